"""Spark plumbing of the ingestion jobs: work lists as small DataFrames, partition counts, schemas.

Only file names, sizes and path-derived fields ever go from the driver to Spark; contents are read by
the executor functions that ``mapInArrow`` runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.schemas import arrow_to_spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from .discover import InputFile

__all__ = ["default_parallelism", "files_frame", "ranges_frame", "to_spark_schema"]


def to_spark_schema(schema: pa.Schema) -> StructType:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, arrow_to_spark_type(f.type), True) for f in schema])


def default_parallelism(spark: SparkSession) -> int:
    """The session's default parallelism (8 when it cannot be read, e.g. on Spark Connect)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:  # noqa: BLE001 - Spark Connect has no SparkContext
        return 8


def _rows(files: Sequence[InputFile], schema: pa.Schema, **extra) -> list[dict]:
    out = []
    for f in files:
        row = {name: getattr(f, name, None) for name in schema.names}
        row.update({k: v for k, v in extra.items() if k in schema.names})
        out.append(row)
    return out


def _frame(spark: SparkSession, rows: list[dict], schema: pa.Schema, partitions: int) -> DataFrame:
    table = pa.Table.from_pylist(rows, schema=schema)
    sschema = to_spark_schema(schema)
    df = spark.createDataFrame([tuple(r.values()) for r in table.to_pylist()], sschema)
    return df.repartition(max(1, min(partitions, len(rows)))) if rows else df


def files_frame(spark: SparkSession, files: Sequence[InputFile], schema: pa.Schema, parallelism: int,
                **extra) -> DataFrame:
    """One row per file (the columns of ``schema`` taken from :class:`InputFile`), spread over tasks."""
    return _frame(spark, _rows(files, schema, **extra), schema, parallelism * 2)


def ranges_frame(
    spark: SparkSession, files: Sequence[InputFile], *, split_bytes: int, parallelism: int,
    plan: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], schema: pa.Schema,
) -> DataFrame:
    """One row per byte range of the segment files, ranges on batch boundaries.

    Files up to ``split_bytes`` are one range, decided here from their size alone; larger ones are split
    by ``plan`` in executors (one task per large file). The ranges are then spread over about one task
    per ``split_bytes`` of input, so a 1 GiB segment is decoded by ~16 tasks.
    """
    small = [f for f in files if f.size <= split_bytes]
    big = [f for f in files if f.size > split_bytes]
    rows = _rows(small, schema, target=split_bytes)
    for r in rows:
        r["start"], r["end"] = 0, r["size"]
    parts = []
    if rows:
        parts.append(_frame(spark, rows, schema, parallelism))
    if big:
        big_rows = _rows(big, schema, target=split_bytes)
        parts.append(_frame(spark, big_rows, schema, len(big_rows)).mapInArrow(plan, to_spark_schema(schema)))
    df = parts[0]
    for p in parts[1:]:
        df = df.unionByName(p)
    est = sum(max(1, -(-f.size // split_bytes)) for f in big) + max(1, len(small) // 16)
    return df.repartition(max(1, min(est, max(parallelism * 4, len(big) * 16))))
