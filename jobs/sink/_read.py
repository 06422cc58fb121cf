"""Reading tables back: :func:`read_table` (Spark) and :func:`read_table_arrow` (delta-rs alone)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs.config import Config, parse_date_range
from jobs.errors import NoTableError, SinkError
from jobs.frames import union_all

from ._fit import spark_schema_from_arrow, struct_without
from ._target import Backend, Target, choose_backend, open_delta, resolve_target

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["DataFile", "TableFiles", "read_partition_files", "read_stored_table", "read_table", "read_table_arrow",
           "table_files"]


def read_table(
    spark: SparkSession,
    table: str,
    config: Config | None = None,
    *,
    target: str | None = None,
    cluster: str | None = None,
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
    backend: Backend | None = None,
) -> DataFrame:
    """The live rows of a table as a Spark DataFrame (optionally only ``cluster``/``date_range``).

    With delta-spark: ``spark.read.format("delta")`` (or ``spark.table`` for catalog tables). With
    delta-rs: the files listed by the Delta log are read with ``spark.read.parquet`` in the table's
    schema (see the :mod:`jobs.sink` docstring). A missing table raises :class:`SinkError`.
    """
    from pyspark.sql import functions as F

    tgt = resolve_target(table, config, target, cluster, None)
    drange = parse_date_range(*date_range) if date_range is not None else None
    chosen = choose_backend(spark, backend or tgt.configured_backend, tgt)
    if chosen == "delta-spark":
        df = spark.table(tgt.location) if tgt.is_catalog else spark.read.format("delta").load(tgt.spark)
        if cluster is not None:
            df = df.where(F.col("cluster") == cluster)
        if drange is not None:
            df = df.where(F.col("event_date").between(F.lit(drange[0]), F.lit(drange[1])))
        return df

    files = _table_files(tgt, cluster, drange)
    groups: dict[tuple[Any, ...], list[str]] = {}
    for f in files.files:
        groups.setdefault(tuple(f.values.values()), []).append(f"{tgt.spark}/{f.path}")
    df = read_partition_files(spark, groups, spark_schema_from_arrow(table, files.schema), files.part_cols)
    if len(groups) > 1 and sum(f.size for f in files.files) <= SMALL_READ_BYTES:
        # each partition folder is a scan of its own, at least one task each: a small table's days are read
        # in one task per core instead (the demo's reports read ~9 days of each silver table)
        from jobs.session import default_parallelism

        df = df.coalesce(default_parallelism(spark))
    return df


#: A table read (the files of its partitions in the range) at most this large is read in one task per core.
SMALL_READ_BYTES = 64 << 20


@dataclass(frozen=True)
class DataFile:
    """One live data file of a table: ``path`` relative to the table, as the Delta log names it."""

    path: str
    rows: int  # the log's numRecords (0 when it has none)
    values: dict[str, Any]  # the partition values, in the table's partition column order
    size: int = 0  # bytes, as the log gives them
    counted: bool = True  # the log has the file's numRecords (a writer without statistics leaves it out)


@dataclass(frozen=True)
class TableFiles:
    """The live data files of a path table (delta-rs), for readers that open them themselves."""

    root: str  # what pyarrow opens (jobs.fs.Location.native)
    schema: pa.Schema  # the table's
    part_cols: list[str]
    files: list[DataFile]


def table_files(
    table: str,
    config: Config | None = None,
    *,
    target: str | None = None,
    cluster: str | None = None,
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
) -> TableFiles:
    """The live files of a path table for ``cluster``/``date_range`` from its Delta log (delta-rs), the
    ones :func:`read_table` reads with Spark. A missing or catalog table, or one with deletion vectors, raises
    :class:`SinkError`."""
    tgt = resolve_target(table, config, target, cluster, None)
    if tgt.is_catalog:
        raise SinkError(f"{tgt.location} is a catalog table: its files are not listed here")
    return _table_files(tgt, cluster, parse_date_range(*date_range) if date_range is not None else None)


def _table_files(tgt: Target, cluster: str | None, drange: tuple[dt.date, dt.date] | None) -> TableFiles:
    dtable = open_delta(tgt.native, tgt.storage_options)
    if dtable is None:
        raise NoTableError(f"no Delta table {tgt.table!r} at {tgt.location}")
    features = set(dtable.protocol().reader_features or [])
    if "deletionVectors" in features:
        raise SinkError(f"{tgt.location} uses deletion vectors: read it with Spark's Delta source (delta-spark)")
    part_cols = list(dtable.metadata().partition_columns)
    files = []
    for row in _live_files(dtable):
        pv = {c: row.get(f"partition.{c}") for c in part_cols}
        if cluster is not None and pv.get("cluster") != cluster:
            continue
        if drange is not None and "event_date" in pv:
            d = pv["event_date"]
            if d is None or not drange[0] <= d <= drange[1]:
                continue
        rows = row.get("num_records")
        files.append(DataFile(str(row["path"]), int(rows or 0), pv, int(row.get("size_bytes") or 0), rows is not None))
    return TableFiles(tgt.native, pa.schema(dtable.schema().to_arrow()), part_cols, files)


def read_partition_files(
    spark: SparkSession, groups: Mapping[tuple[Any, ...], Sequence[str]], full: StructType, part_cols: Sequence[str]
) -> DataFrame:
    """Parquet data files (without their partition columns, as Delta and Spark write them) read in the
    table schema ``full``: ``groups`` maps partition values (in ``part_cols`` order; the values or their
    text) to their files; each group is one ``spark.read.parquet`` with its values added as literals."""
    from pyspark.sql import functions as F

    if not groups:
        return spark.createDataFrame([], full)
    data_schema = struct_without(full, part_cols)
    frames = []
    for values, files in groups.items():
        part = spark.read.schema(data_schema).parquet(*files)
        for name, value in zip(part_cols, values, strict=True):
            # nullif(v, NULL) is v, typed nullable as in the table schema (a bare literal is NOT NULL).
            typ = full[name].dataType
            part = part.withColumn(name, F.nullif(F.lit(value).cast(typ), F.lit(None).cast(typ)))
        frames.append(part.select(*full.fieldNames()))
    return union_all(frames)


def read_table_arrow(
    table: str,
    config: Config | None = None,
    *,
    target: str | None = None,
    cluster: str | None = None,
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
    where: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table:
    """The live rows of a path table through delta-rs alone (into driver memory: tests, small tables,
    one partition's lineage). ``where`` adds ``column == value`` conditions, applied while scanning;
    ``columns`` reads only those (default: all)."""
    tgt = resolve_target(table, config, target, cluster, None)
    if tgt.is_catalog:
        raise SinkError(f"{tgt.location} is a catalog table: use read_table with a Spark session")
    dtable = open_delta(tgt.native, tgt.storage_options)
    if dtable is None:
        raise NoTableError(f"no Delta table {table!r} at {tgt.location}")
    import pyarrow.dataset as pads

    wanted = pads.scalar(True)
    if cluster is not None:
        wanted = wanted & (pads.field("cluster") == cluster)
    if date_range is not None:
        d0, d1 = parse_date_range(*date_range)
        wanted = wanted & (pads.field("event_date") >= d0) & (pads.field("event_date") <= d1)
    for column, value in (where or {}).items():
        wanted = wanted & (pads.field(column) == value)
    # One reader thread on purpose: pyarrow's scanner pool can still be tearing down when Python exits,
    # which aborts the process ("terminate called without an active exception", exit 134; delta-rs#2184,
    # arrow#34314) - 3 in 20 CLI runs here did. These reads are small (findings, tests).
    cols = None if columns is None else list(columns)
    return dtable.to_pyarrow_dataset().to_table(columns=cols, filter=wanted, use_threads=False)


def read_stored_table(
    table: str,
    config: Config,
    *,
    cluster: str | None = None,
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
    where: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
) -> pa.Table | None:
    """:func:`read_table_arrow` for the commands that read what runs stored (``report``, ``findings``): None when
    there is no such table; a table that is there but cannot be read told apart from a location that cannot be
    reached, since one is a damaged table (exit 4) and the other a store or credentials problem (exit 3).

    Raises:
        InputError: the location cannot be reached (an object store down, credentials, an endpoint: the store's
            OSError).
        SinkError: the table is there but cannot be read, named with the reason: its Delta log is damaged (a
            truncated or garbage commit file, a checkpoint ``_last_checkpoint`` names that is missing), or a data
            file the log names is missing or damaged.
    """
    from jobs.errors import InputError

    try:
        return read_table_arrow(table, config, cluster=cluster, date_range=date_range, where=where, columns=columns)
    except NoTableError:
        return None
    except SinkError as exc:
        if exc.__cause__ is None:  # not a failed read (a catalog table: only Spark reads it)
            raise
        problem: BaseException = exc.__cause__
    except (OSError, pa.ArrowException) as exc:  # scanning the data files the log names
        problem = exc
    lines = str(problem).strip().splitlines()
    reason = f"{type(problem).__name__}: {lines[0] if lines else ''}".rstrip(": ")
    where = config.output.table_location(table)
    if isinstance(problem, OSError) and not isinstance(problem, FileNotFoundError):
        raise InputError(f"cannot reach {where}: {reason}") from None
    raise SinkError(f"table {table} at {where} cannot be read: {reason} (its Delta log, or a data file the log "
                    "names, is damaged or missing)") from None


def _live_files(dtable: Any) -> Iterable[dict[str, Any]]:
    actions = pa.table(dtable.get_add_actions(flatten=True))
    return actions.to_pylist()

