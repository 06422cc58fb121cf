"""The delta-spark back end: Spark's own Delta data source (Databricks, or spark-submit with delta-spark)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.errors import CommitError

from ._target import SinkResult, Target, open_delta, sql_predicate

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["write_delta_spark"]


def write_delta_spark(
    df: DataFrame, tgt: Target, mode: str, drange: tuple[dt.date, dt.date] | None, partition_by: Sequence[str]
) -> SinkResult:
    writer = df.write.format("delta").partitionBy(*partition_by).option("mergeSchema", "true")  # new columns
    if mode == "append":
        writer = writer.mode("append")
    else:
        pred = sql_predicate(tgt.cluster, drange).replace("event_date >= '", "event_date >= DATE'").replace(
            "event_date <= '", "event_date <= DATE'"
        )
        writer = writer.mode("overwrite").option("replaceWhere", pred)
    try:
        if tgt.is_catalog:
            writer.saveAsTable(tgt.location)
        else:
            writer.save(tgt.spark)
    except Exception as exc:
        raise CommitError(f"Delta write of {tgt.table!r} to {tgt.location} failed: {exc}") from exc
    version = None
    if not tgt.is_catalog:
        opened = open_delta(tgt.native, tgt.storage_options, quiet=True)
        version = opened.version() if opened is not None else None
    return SinkResult(tgt.table, tgt.location, "delta-spark", mode, version, None, None, drange)

