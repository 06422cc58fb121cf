"""The delta-spark back end: Spark's own Delta data source (Databricks, or spark-submit with delta-spark).

Concurrency mirrors the delta-rs path (:mod:`._staged`): Delta's first commit of a path is put-if-absent
(the loser of two creating runs gets a ``MetadataChangedException``/``ProtocolChangedException``), and a
``replaceWhere`` overwrite that lost a race gets ``ConcurrentDeleteReadException`` and friends; the whole
write is retried a bounded number of times (:attr:`SinkOptions.commit_retries`, Delta re-reads the table
each time), then fails with a one-line :class:`CommitError` naming the other run, which every commit
records as ``userMetadata``. Leftovers: Delta Spark writes data files straight into the table (no
staging), so files of a killed run are removed by ``VACUUM`` on the platform's schedule, not by this job.
(This back end cannot run in the project's test environment — no Maven — and is covered with a fake
writer in ``tests/test_sink_concurrency.py``.)
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING

from jobs.errors import CommitError

from . import _lease
from ._conflict import other_run, with_retries
from ._runlease import check_still_held
from ._target import (
    HeldRows,
    KeepDays,
    SinkOptions,
    SinkResult,
    Target,
    days_to_keep,
    open_delta,
    sql_predicate,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["write_delta_spark"]


def write_delta_spark(
    df: DataFrame,
    tgt: Target,
    mode: str,
    drange: tuple[dt.date, dt.date] | None,
    partition_by: Sequence[str],
    options: SinkOptions | None = None,
    *,
    hold: tuple[dt.date, dt.date] | None = None,
    keep_days: KeepDays | None = None,
) -> SinkResult:
    """Write ``df`` with Spark's Delta source; with ``hold`` (days before the range), the rows of those days
    are not written but returned as :attr:`SinkResult.held`: ``df`` is spilled once (DISK_ONLY) so that the
    write and the held rows come from one pass over it, and the held rows are cached (Delta writes files
    straight into the table, so there is no staging folder to keep them in). With ``keep_days``, one more job
    lists the days ``df`` has rows on first (Delta writes straight into the table: nothing is staged to list),
    and the days kept are left out of ``replaceWhere``."""
    if hold is not None:
        return _write_holding_back(df, tgt, mode, drange, partition_by, options, hold, keep_days)
    keep = days_to_keep(keep_days, drange, (r[0] for r in df.select("event_date").distinct().collect()
                                            if r[0] is not None)) if keep_days is not None else ()
    options = options or SinkOptions()
    run = _lease.run_name(options.run_id)
    what = f"Delta write of {tgt.table!r} to {tgt.location}"

    def attempt(n: int) -> None:
        writer = df.write.format("delta").partitionBy(*partition_by).option("mergeSchema", "true")  # new columns
        writer = writer.option("userMetadata", run)
        if mode == "append":
            writer = writer.mode("append")
        else:
            pred = sql_predicate(tgt.cluster, drange).replace("event_date >= '", "event_date >= DATE'").replace(
                "event_date <= '", "event_date <= DATE'"
            )
            if keep:  # days of the range left as stored (write_table(keep_days=...))
                pred += " AND event_date NOT IN (" + ", ".join(f"DATE'{d.isoformat()}'" for d in keep) + ")"
            writer = writer.mode("overwrite").option("replaceWhere", pred)
        if tgt.is_catalog:
            writer.saveAsTable(tgt.location)
        else:
            writer.save(tgt.spark)

    def winner() -> str:
        return "another writer (catalog table)" if tgt.is_catalog else other_run(tgt.native, tgt.storage_options, run)

    if tgt.cluster and not tgt.is_catalog:  # a run whose lease was taken over meanwhile stops here
        check_still_held(tgt.location, tgt.cluster)
    try:
        with_retries(attempt, retries=options.commit_retries, what=what, committed=lambda: False, winner=winner)
    except CommitError:
        raise
    except Exception as exc:
        raise CommitError(f"{what} failed: {' '.join(str(exc).split())[:500]}") from exc
    version = None
    if not tgt.is_catalog:
        opened = open_delta(tgt.native, tgt.storage_options, quiet=True)
        version = opened.version() if opened is not None else None
    return SinkResult(tgt.table, tgt.location, "delta-spark", mode, version, None, None, drange, kept_days=keep)


def _write_holding_back(
    df: DataFrame,
    tgt: Target,
    mode: str,
    drange: tuple[dt.date, dt.date] | None,
    partition_by: Sequence[str],
    options: SinkOptions | None,
    hold: tuple[dt.date, dt.date],
    keep_days: KeepDays | None = None,
) -> SinkResult:
    from dataclasses import replace

    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    held_days = F.col("event_date").between(F.lit(hold[0]), F.lit(hold[1]))
    spill = df.persist(StorageLevel.DISK_ONLY)
    try:
        # rows outside both ranges still reach the write, whose replaceWhere refuses them
        result = write_delta_spark(spill.where(~held_days | F.col("event_date").isNull()), tgt, mode, drange,
                                   partition_by, options, keep_days=keep_days)
        held = spill.where(held_days).persist(StorageLevel.MEMORY_AND_DISK)
        if not held.count():  # materialised while the spill is there; an empty hold is no state at all
            held.unpersist()
            return replace(result, held=HeldRows(None))
        return replace(result, held=HeldRows(held, held.unpersist))
    finally:
        spill.unpersist()
