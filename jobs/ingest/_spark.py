"""Spark plumbing of the ingestion jobs: work lists as small DataFrames, partition counts, schemas.

Only file names, sizes and path-derived fields ever go from the driver to Spark; contents are read by
the executor functions that ``mapInArrow`` runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import pyarrow as pa

from jobs.schemas import arrow_to_spark_type

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

    from .discover import InputFile

__all__ = ["UNSPREAD_BYTES", "default_parallelism", "files_frame", "frame", "rows_of", "spread", "to_spark_schema"]


def to_spark_schema(schema: pa.Schema) -> StructType:
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(f.name, arrow_to_spark_type(f.type), True) for f in schema])


def default_parallelism(spark: SparkSession) -> int:
    """The session's default parallelism (:func:`jobs.session.default_parallelism`: on Spark Connect its
    ``spark.default.parallelism``, else 8)."""
    from ..session import default_parallelism as parallelism

    return parallelism(spark)


def rows_of(files: Sequence[InputFile], schema: pa.Schema, **extra) -> list[dict]:
    """One dict per file: the columns of ``schema`` taken from :class:`InputFile` (absent: None),
    then ``extra``."""
    out = []
    for f in files:
        row = {name: getattr(f, name, None) for name in schema.names}
        row.update({k: v for k, v in extra.items() if k in schema.names})
        out.append(row)
    return out


def frame(spark: SparkSession, rows: list[dict], schema: pa.Schema, partitions: int) -> DataFrame:
    """``rows`` as a DataFrame of ``schema`` spread over up to ``partitions`` tasks (in a small run a list of at
    most :data:`UNSPREAD_BYTES` stays in the slices Spark makes of it, one per core, without a shuffle stage to
    spread it: :func:`spread`)."""
    table = pa.Table.from_pylist(rows, schema=schema)
    sschema = to_spark_schema(schema)
    df = spark.createDataFrame([tuple(r.values()) for r in table.to_pylist()], sschema)
    return spread(spark, df, min(partitions, table.num_rows), table.nbytes)


#: A small run's work list up to this many bytes on the driver (its Arrow or IPC bytes, about the pickled size Spark
#: ships) stays in the slices Spark makes of it (:func:`spread`). Spark warns of tasks above 1000 KiB; a larger list
#: (the ingestion of 100,000 checkpoint files ran tasks of 10,486 KiB) is shuffled to spread it rather than sent again
#: inside the tasks of every stage that reads it.
UNSPREAD_BYTES = 1 << 20


def spread(spark: SparkSession, df: DataFrame, partitions: int, nbytes: int) -> DataFrame:
    """``df`` (work rows: files, byte ranges; ``nbytes`` of them on the driver) repartitioned over ``partitions``
    tasks, unless this is a small run (:func:`jobs.session.one_partition`, at most 64 MiB of input) whose list is at
    most :data:`UNSPREAD_BYTES`: it decodes in seconds, and the repartition is a Spark stage of its own (a task per
    core) to move a handful of rows."""
    from jobs.session import one_partition

    if partitions < 1 or (nbytes <= UNSPREAD_BYTES and one_partition(spark)):
        return df
    return df.repartition(partitions)


def files_frame(spark: SparkSession, files: Sequence[InputFile], schema: pa.Schema, parallelism: int,
                **extra) -> DataFrame:
    """One row per file (the columns of ``schema`` taken from :class:`InputFile`), spread over tasks."""
    return frame(spark, rows_of(files, schema, **extra), schema, parallelism * 2)
