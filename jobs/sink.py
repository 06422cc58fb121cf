"""The Delta sink: the one component that writes (and reads back) epoch-audit's tables.

Shaped like ``deltalake.write_deltalake``: one verb, keyword-only options, a ``Literal`` mode whose
default is the safe one for this job (``replace_range``: replaceWhere on ``cluster`` and an
``event_date`` range, so a rerun never duplicates rows and other dates stay untouched).

Two back ends (DESIGN.md "Delta"):

``delta-spark``
    Spark's own Delta data source, when the session has it (:func:`jobs.session.has_delta`): Databricks,
    or spark-submit with the delta-spark package. ``replaceWhere`` for ranges; catalog targets
    (``[output] catalog``/``schema``) are written with ``saveAsTable``.

``delta-rs``
    Everything else (the embedded default: local Spark, no Maven). The data never passes through the
    driver:

    1. Spark writes Parquet files in parallel into ``<table>/_staging/<token>/cluster=…/event_date=…/``
       (``_``-prefixed, so no Delta reader or vacuum ever looks there);
    2. the driver lists them, checks their partition values against the run's cluster and range, reads
       each file's *footer* (its row count: the Delta statistics, see :func:`_footer_stats`), and moves
       (renames) them to ``<table>/cluster=…/event_date=…/<token>-<name>``; a manifest of the moves is
       written first so a crash here can be undone;
    3. the driver commits **one** Delta transaction with delta-rs
       (``DeltaTable.create_write_transaction``): ``add`` actions for the new files and, for
       ``replace_range``, a partition overwrite of exactly ``cluster = c AND from <= event_date <= to``
       (delta-rs derives the ``remove`` actions from the snapshot it read); a new table is created with
       ``create_table_with_add_actions`` in one commit;
    4. the staging folder is removed, as are stale staging folders of runs that died before committing
       (older than :attr:`SinkOptions.staging_grace`), together with any files they had already moved.

    A run that dies anywhere before step 3 leaves the table at its previous version: readers follow the
    Delta log, which never names an uncommitted file. The token is recorded in the commit's
    ``commitInfo`` (``epochAudit.staging``) so cleanup can tell a committed run from a dead one.

    Trade-offs: on object stores (S3/GCS) a move is a server-side copy, not a rename (still no data
    through the driver); footers are read one per file on the driver (metadata only, a thread pool);
    files carry no column min/max statistics (see :func:`_footer_stats` for why), so readers skip data
    by the ``cluster``/``event_date`` partitions only.

Small tables (a few thousand rows: audit_runs, rates) may skip Spark: :func:`write_small` writes a
``pyarrow.Table`` with ``deltalake.write_deltalake`` (``mode="overwrite"`` + ``predicate``).

Reading back: :func:`read_table` gives a Spark DataFrame. With delta-spark it is ``format("delta")``;
without it, Spark cannot read the Delta log, so the file list comes from delta-rs
(``DeltaTable.get_add_actions``: the live files and their partition values) and Spark reads exactly
those Parquet files (``spark.read.schema(...).parquet(*files)``), one read per partition with the
partition values added as literals (partition columns are not stored in Delta data files). Tables with
deletion vectors (only delta-spark writes them) cannot be read this way and raise :class:`SinkError`.
:func:`read_table_arrow` reads through delta-rs alone (tests, small tables).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import time
import uuid
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import reduce
from typing import TYPE_CHECKING, Any, Literal
from urllib.parse import unquote

import pyarrow as pa

from . import schemas
from .config import Config, parse_date_range
from .errors import CommitError, ConfigError, SchemaMismatchError, SinkError

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from pyspark.sql import DataFrame, SparkSession
    from pyspark.sql.types import StructType

__all__ = [
    "Mode",
    "SinkOptions",
    "SinkResult",
    "read_table",
    "read_table_arrow",
    "table_location",
    "write_small",
    "write_table",
]

log = logging.getLogger(__name__)

Mode = Literal["replace_range", "append"]
Backend = Literal["auto", "delta-spark", "delta-rs"]

STAGING_DIR = "_staging"
_MANIFEST = "_moves.json"
_COMMIT_KEY = "epochAudit.staging"
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class SinkOptions:
    """Tuning of the delta-rs commit path (the defaults suit nightly and CLI runs)."""

    staging_grace: dt.timedelta = dt.timedelta(hours=12)
    """Staging folders older than this are treated as left by a dead run and removed. It must exceed the
    longest write, because a *concurrent* run's staging folder younger than this is left alone."""
    threads: int = 8
    """Driver threads for footer reads and file moves (I/O bound: matters on object stores)."""
    storage_options: Mapping[str, str] | None = None
    """delta-rs storage options (default: the config's ``[output.storage_options]``)."""


@dataclass(frozen=True)
class SinkResult:
    """What a write did."""

    table: str
    """Logical table name (e.g. ``offset_commits``)."""
    location: str
    """Path/URI of the Delta table, or ``catalog.schema.table``."""
    backend: str
    """``delta-spark`` or ``delta-rs``."""
    mode: str
    version: int | None
    """Delta table version after the write (None when it cannot be read with delta-rs)."""
    files_added: int | None = None
    rows_written: int | None = None
    """Rows in the added files (delta-rs path: from the Parquet footers; None for delta-spark)."""
    date_range: tuple[dt.date, dt.date] | None = None


# -------------------------------------------------------------------------------------------- locations


@dataclass(frozen=True)
class _Target:
    table: str
    location: str  # normalised URI/path, or catalog.schema.table
    is_catalog: bool
    cluster: str | None
    storage_options: dict[str, str] | None
    configured_backend: str


def table_location(table: str, config: Config | None = None, *, target: str | None = None) -> str:
    """Where ``table`` lives: ``<root>/<table>`` or ``catalog.schema.table`` (``target`` wins)."""
    return _target(table, config, target, None, None).location


def _target(
    table: str,
    config: Config | None,
    target: str | None,
    cluster: str | None,
    options: SinkOptions | None,
) -> _Target:
    if config is None and target is None:
        raise ConfigError(f"write/read of {table!r}: give either config= or target=")
    storage = dict(options.storage_options) if options and options.storage_options is not None else None
    if storage is None and config is not None and config.output.storage_options:
        storage = dict(config.output.storage_options)
    backend = config.output.backend if config is not None else "auto"
    the_cluster = cluster if cluster is not None else (config.cluster if config is not None else None)
    if target is not None:
        is_catalog = _looks_like_catalog_name(target)
        location = target if is_catalog else _normalise(target)
    elif config.output.root is not None:
        location, is_catalog = _normalise(config.output.table_location(table)), False
    else:
        location, is_catalog = config.output.table_location(table), True
    return _Target(table, location, is_catalog, the_cluster, storage, backend)


def _looks_like_catalog_name(target: str) -> bool:
    parts = target.split(".")
    return len(parts) == 3 and all(p.replace("_", "a").isalnum() for p in parts) and "/" not in target


def _normalise(uri: str) -> str:
    """Absolute local path for local targets (``file:`` stripped), URIs unchanged, no trailing slash."""
    import os

    uri = str(uri)
    if uri.startswith("file://"):
        uri = uri[len("file://") :]
    elif uri.startswith("file:"):
        uri = uri[len("file:") :]
    if "://" not in uri and not uri.startswith("dbfs:"):
        return os.path.abspath(os.path.expanduser(uri)).rstrip("/") or "/"
    return uri.rstrip("/")


def _filesystem(uri: str) -> tuple[pafs.FileSystem, str]:
    """A pyarrow filesystem and the path inside it; ``s3a://`` is S3 for pyarrow, unknown schemes
    (``dbfs:``, ``memory://``) go through fsspec."""
    import pyarrow.fs as pafs

    arrow_uri = uri
    for hadoop, arrow in (("s3a://", "s3://"), ("s3n://", "s3://")):
        if arrow_uri.startswith(hadoop):
            arrow_uri = arrow + arrow_uri[len(hadoop) :]
    try:
        return pafs.FileSystem.from_uri(arrow_uri)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError):
        import fsspec

        fs, path = fsspec.core.url_to_fs(uri)
        return pafs.PyFileSystem(pafs.FSSpecHandler(fs)), path


def _delta_uri(location: str) -> str:
    """delta-rs speaks ``s3://`` where Hadoop speaks ``s3a://``."""
    for hadoop in ("s3a://", "s3n://"):
        if location.startswith(hadoop):
            return "s3://" + location[len(hadoop) :]
    return location


# ----------------------------------------------------------------------------------------------- writes


def write_table(
    df: DataFrame,
    table: str,
    *,
    config: Config | None = None,
    target: str | None = None,
    mode: Mode = "replace_range",
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
    cluster: str | None = None,
    partition_by: Sequence[str] = schemas.PARTITION_BY,
    backend: Backend | None = None,
    options: SinkOptions | None = None,
) -> SinkResult:
    """Write a Spark DataFrame to a Delta table.

    Args:
        df: the rows; its columns must be the table's (:mod:`jobs.schemas` for known tables, in any order;
            integer/float widths and all-null columns are cast, anything else is a
            :class:`SchemaMismatchError`). For unknown table names ``df.schema`` is the schema.
        table: logical table name; the location is ``<root>/<table>`` or ``catalog.schema.table``.
        config: the run's config (output root or catalog, cluster, back end, storage options).
        target: explicit table location instead of ``config`` (a path/URI or ``catalog.schema.table``).
        mode: ``replace_range`` replaces exactly the partitions ``cluster`` × ``date_range`` (rows outside
            them are an error); ``append`` adds the rows.
        date_range: inclusive ``(from, to)`` dates; required for ``replace_range``.
        cluster: the cluster whose partitions are replaced (default ``config.cluster``).
        partition_by: partition columns (must be ``("cluster", "event_date")`` for ``replace_range``).
        backend: ``auto``/``delta-spark``/``delta-rs``; default: the config's ``[output] backend``.
        options: :class:`SinkOptions` for the delta-rs path.

    Returns:
        A :class:`SinkResult`.

    Raises:
        ConfigError: missing range/cluster/location. SchemaMismatchError: columns do not fit the data or
        the existing table. SinkError: rows outside the replaced range, back end unavailable.
        CommitError: the Delta commit failed (the table stays at its previous version).
    """
    options = options or SinkOptions()
    tgt = _target(table, config, target, cluster, options)
    drange = _check_mode(tgt, mode, date_range, partition_by)
    spark = df.sparkSession
    chosen = _choose_backend(spark, backend or tgt.configured_backend, tgt)
    spark_schema = _spark_schema_for(table, df)
    df = _conform_spark(df, spark_schema, table)
    if chosen == "delta-spark":
        return _write_delta_spark(df, tgt, mode, drange, partition_by)
    return _write_delta_rs(df, tgt, mode, drange, list(partition_by), spark_schema, options)


def write_small(
    data: pa.Table,
    table: str,
    *,
    config: Config | None = None,
    target: str | None = None,
    mode: Mode = "replace_range",
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
    cluster: str | None = None,
    partition_by: Sequence[str] = schemas.PARTITION_BY,
    backend: Backend | None = None,
    spark: SparkSession | None = None,
    options: SinkOptions | None = None,
) -> SinkResult:
    """Write a small ``pyarrow.Table`` (it is held in driver memory) with the same semantics as
    :func:`write_table`. With delta-rs it goes straight through ``write_deltalake`` (no Spark job);
    with delta-spark (or a catalog target) ``spark`` is required and the rows go through Spark."""
    options = options or SinkOptions()
    tgt = _target(table, config, target, cluster, options)
    drange = _check_mode(tgt, mode, date_range, partition_by)
    schema = schemas.arrow_schema(table) if table in schemas.TABLES else data.schema
    data = _conform_arrow(data, schema, table)
    wanted = backend or tgt.configured_backend
    if tgt.is_catalog or wanted == "delta-spark" or (wanted == "auto" and spark is not None and _has_delta(spark)):
        if spark is None:
            raise SinkError(f"writing {table!r} with Spark's Delta source needs spark= (catalog or delta-spark)")
        df = spark.createDataFrame(data, schema=schemas.spark_schema(table) if table in schemas.TABLES else None)
        return write_table(
            df, table, target=tgt.location, config=config, mode=mode, date_range=drange, cluster=tgt.cluster,
            partition_by=partition_by, backend=wanted, options=options,
        )
    from deltalake import DeltaTable, write_deltalake

    uri = _delta_uri(tgt.location)
    _check_rows_in_range_arrow(data, tgt, mode, drange)
    existing = _open_delta(uri, tgt.storage_options)
    if existing is not None:
        _fit_table_schema(existing, schema, tgt)
    kwargs: dict[str, Any] = {"partition_by": list(partition_by), "storage_options": tgt.storage_options}
    try:
        if mode == "append":
            write_deltalake(uri, data, mode="append", **kwargs)
        else:
            write_deltalake(uri, data, mode="overwrite", predicate=_sql_predicate(tgt.cluster, drange), **kwargs)
    except Exception as exc:
        raise CommitError(f"delta-rs write of {table!r} at {tgt.location} failed: {exc}") from exc
    version = DeltaTable(uri, storage_options=tgt.storage_options).version()
    return SinkResult(table, tgt.location, "delta-rs", mode, version, None, data.num_rows, drange)


def _check_mode(
    tgt: _Target, mode: str, date_range: Any, partition_by: Sequence[str]
) -> tuple[dt.date, dt.date] | None:
    if mode not in ("replace_range", "append"):
        raise ConfigError(f"unknown sink mode {mode!r}; valid: replace_range, append")
    drange = parse_date_range(*date_range) if date_range is not None else None
    if mode == "replace_range":
        if drange is None:
            raise ConfigError(f"replace_range write of {tgt.table!r} needs date_range=(from, to)")
        if tgt.cluster is None:
            raise ConfigError(f"replace_range write of {tgt.table!r} needs a cluster (config or cluster=)")
        if tuple(partition_by) != schemas.PARTITION_BY:
            raise ConfigError(f"replace_range needs partition_by={schemas.PARTITION_BY}, got {tuple(partition_by)}")
    return drange


def _has_delta(spark: SparkSession) -> bool:
    from .session import has_delta

    return has_delta(spark)


def _choose_backend(spark: SparkSession, wanted: str, tgt: _Target) -> str:
    if wanted not in ("auto", "delta-spark", "delta-rs"):
        raise ConfigError(f"unknown sink back end {wanted!r}; valid: auto, delta-spark, delta-rs")
    if wanted == "auto":
        wanted = "delta-spark" if _has_delta(spark) else "delta-rs"
    if wanted == "delta-spark" and not _has_delta(spark):
        raise SinkError(
            "back end 'delta-spark' requested but the Spark session has no Delta support "
            "(start it with the delta-spark package, or set [output] backend = \"delta-rs\")"
        )
    if wanted == "delta-rs" and tgt.is_catalog:
        raise SinkError(f"catalog table {tgt.location} needs Spark's Delta source; the session has none")
    return wanted


def _sql_predicate(cluster: str | None, drange: tuple[dt.date, dt.date] | None) -> str:
    assert cluster is not None and drange is not None
    quoted = cluster.replace("'", "''")
    return (
        f"cluster = '{quoted}' AND event_date >= '{drange[0].isoformat()}' "
        f"AND event_date <= '{drange[1].isoformat()}'"
    )


# ------------------------------------------------------------------------------------------- delta-spark


def _write_delta_spark(
    df: DataFrame, tgt: _Target, mode: str, drange: tuple[dt.date, dt.date] | None, partition_by: Sequence[str]
) -> SinkResult:
    writer = df.write.format("delta").partitionBy(*partition_by).option("mergeSchema", "true")  # new columns
    if mode == "append":
        writer = writer.mode("append")
    else:
        pred = _sql_predicate(tgt.cluster, drange).replace("event_date >= '", "event_date >= DATE'").replace(
            "event_date <= '", "event_date <= DATE'"
        )
        writer = writer.mode("overwrite").option("replaceWhere", pred)
    try:
        if tgt.is_catalog:
            writer.saveAsTable(tgt.location)
        else:
            writer.save(tgt.location)
    except Exception as exc:
        raise CommitError(f"Delta write of {tgt.table!r} to {tgt.location} failed: {exc}") from exc
    version = None
    if not tgt.is_catalog:
        opened = _open_delta(_delta_uri(tgt.location), tgt.storage_options, quiet=True)
        version = opened.version() if opened is not None else None
    return SinkResult(tgt.table, tgt.location, "delta-spark", mode, version, None, None, drange)


# ---------------------------------------------------------------------------------------------- delta-rs


@dataclass(frozen=True)
class _Staged:
    token: str
    staging: str  # URI of <table>/_staging/<token>
    files: list[_StagedFile]


@dataclass(frozen=True)
class _StagedFile:
    rel: str  # relative to the staging dir: cluster=../event_date=../part-….parquet
    partition_dir: str  # cluster=../event_date=..
    partition_values: dict[str, str | None]
    size: int
    mtime_ms: int

    def final_rel(self, token: str) -> str:
        return f"{self.partition_dir}/{token}-{self.rel.rsplit('/', 1)[-1]}"


def _new_token() -> str:
    return f"{dt.datetime.now(dt.timezone.utc):%Y%m%dT%H%M%SZ}-{uuid.uuid4().hex[:12]}"


def _token_time(token: str) -> dt.datetime | None:
    try:
        return dt.datetime.strptime(token.split("-", 1)[0], "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc)
    except ValueError:
        return None


def _write_delta_rs(
    df: DataFrame,
    tgt: _Target,
    mode: str,
    drange: tuple[dt.date, dt.date] | None,
    partition_by: list[str],
    spark_schema: StructType,
    options: SinkOptions,
) -> SinkResult:
    arrow_schema = _arrow_schema_for(tgt.table, spark_schema)
    uri = _delta_uri(tgt.location)
    existing = _open_delta(uri, tgt.storage_options)
    if existing is not None:
        _fit_table_schema(existing, arrow_schema, tgt)
    staged = _stage(df, tgt, partition_by)
    fs, base = _filesystem(tgt.location)
    try:
        _check_staged_partitions(staged, tgt, mode, drange)
        adds = _add_actions(staged, tgt, fs, base, options, arrow_schema)
        _move_into_table(staged, fs, base, options)
        _commit(uri, tgt, adds, mode, drange, partition_by, arrow_schema, staged.token)
    except BaseException:
        # A clean failure: undo what we can now (a killed process leaves this to the next run's cleanup).
        _discard_staging(fs, base, staged.token, committed=False)
        raise
    _discard_staging(fs, base, staged.token, committed=True)
    _clean_stale_staging(uri, tgt, fs, base, options, keep=staged.token)
    version = _open_delta(uri, tgt.storage_options).version()
    rows = sum(json.loads(a.stats).get("numRecords", 0) for a in adds)
    return SinkResult(tgt.table, tgt.location, "delta-rs", mode, version, len(adds), rows, drange)


def _stage(df: DataFrame, tgt: _Target, partition_by: list[str]) -> _Staged:
    """Step 1: Spark writes the rows as Parquet under ``<table>/_staging/<token>/`` (parallel, executors)."""
    token = _new_token()
    staging = f"{tgt.location}/{STAGING_DIR}/{token}"
    spark = df.sparkSession
    key = "spark.sql.parquet.outputTimestampType"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        df.write.mode("errorifexists").partitionBy(*partition_by).parquet(staging)
    except Exception as exc:
        fs, base = _filesystem(tgt.location)
        _discard_staging(fs, base, token, committed=False)
        raise SinkError(f"Spark could not write staged Parquet files for {tgt.table!r}: {exc}") from exc
    finally:
        if previous is not None and previous != "TIMESTAMP_MICROS":
            spark.conf.set(key, previous)
    return _Staged(token, staging, _list_staged(staging, partition_by))


def _list_staged(staging: str, partition_by: list[str]) -> list[_StagedFile]:
    import pyarrow.fs as pafs

    fs, path = _filesystem(staging)
    path = path.rstrip("/")
    out = []
    for info in fs.get_file_info(pafs.FileSelector(path, recursive=True, allow_not_found=True)):
        if info.type != pafs.FileType.File:
            continue
        rel = info.path[len(path) :].lstrip("/")
        name = rel.rsplit("/", 1)[-1]
        if not name.endswith(".parquet") or name.startswith((".", "_")):
            continue  # _SUCCESS, .crc checksums
        dirs = rel.split("/")[:-1]
        values: dict[str, str | None] = {}
        for part in dirs:
            key, sep, value = part.partition("=")
            if not sep:
                raise SinkError(f"unexpected directory {part!r} in staged output {staging}")
            value = unquote(value)
            values[key] = None if value == _HIVE_NULL else value
        if list(values) != partition_by:
            raise SinkError(f"staged file {rel} is not partitioned by {partition_by}")
        mtime = info.mtime_ns // 1_000_000 if info.mtime_ns else int(time.time() * 1000)
        out.append(_StagedFile(rel, "/".join(dirs), values, int(info.size or 0), mtime))
    out.sort(key=lambda f: f.rel)
    return out


def _check_staged_partitions(
    staged: _Staged, tgt: _Target, mode: str, drange: tuple[dt.date, dt.date] | None
) -> None:
    """replaceWhere semantics: every written row must fall inside the replaced partitions."""
    if mode != "replace_range":
        return
    assert drange is not None
    for f in staged.files:
        c, d = f.partition_values.get("cluster"), f.partition_values.get("event_date")
        inside = c == tgt.cluster and d is not None and drange[0].isoformat() <= d <= drange[1].isoformat()
        if not inside:
            raise SinkError(
                f"{tgt.table}: rows with cluster={c!r}, event_date={d} fall outside the replaced range "
                f"cluster={tgt.cluster!r}, {drange[0]}..{drange[1]}; filter them before writing"
            )


def _add_actions(
    staged: _Staged, tgt: _Target, fs: pafs.FileSystem, base: str, options: SinkOptions, schema: pa.Schema
) -> list[Any]:
    """Delta ``add`` actions for the staged files; statistics come from each file's Parquet footer."""
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    _, staging_path = _filesystem(staged.staging)

    def one(f: _StagedFile) -> AddAction:
        meta = pq.read_metadata(f"{staging_path}/{f.rel}", filesystem=fs)
        stats = _footer_stats(meta)
        return AddAction(
            f.final_rel(staged.token), f.size, dict(f.partition_values), f.mtime_ms, True, json.dumps(stats)
        )

    with ThreadPoolExecutor(max(1, options.threads)) as pool:
        return list(pool.map(one, staged.files))


def _footer_stats(meta: Any) -> dict[str, Any]:
    """Delta per-file statistics from a Parquet footer: ``numRecords`` only, on purpose.

    delta-rs (1.x, its pyarrow dataset) treats a column that has no min/max in a file's statistics as
    all-null as soon as *other* columns have them, so a reader filtering on such a column — e.g.
    ``rule = 'F2'`` when only integer columns had stats — silently got 0 rows. Exact min/max for every
    column (strings, timestamps, booleans, nested) is not worth that risk: partition pruning on
    ``cluster``/``event_date`` does the real skipping for this job's reads.
    """
    return {"numRecords": meta.num_rows}


def _move_into_table(staged: _Staged, fs: pafs.FileSystem, base: str, options: SinkOptions) -> None:
    """Step 2: rename staged files into the table's partition folders (a manifest first, for cleanup)."""
    base = base.rstrip("/")
    _, staging_path = _filesystem(staged.staging)
    manifest = [f.final_rel(staged.token) for f in staged.files]
    with fs.open_output_stream(f"{staging_path}/{_MANIFEST}") as out:
        out.write(json.dumps({"token": staged.token, "files": manifest}).encode())

    def one(f: _StagedFile) -> None:
        dest = f"{base}/{f.final_rel(staged.token)}"
        fs.create_dir(dest.rsplit("/", 1)[0], recursive=True)
        fs.move(f"{staging_path}/{f.rel}", dest)

    with ThreadPoolExecutor(max(1, options.threads)) as pool:
        list(pool.map(one, staged.files))


def _commit(
    uri: str,
    tgt: _Target,
    adds: list[Any],
    mode: str,
    drange: tuple[dt.date, dt.date] | None,
    partition_by: list[str],
    schema: pa.Schema,
    token: str,
) -> None:
    """Step 3: one Delta transaction (create, append, or partition overwrite of the range)."""
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import CommitProperties, create_table_with_add_actions

    props = CommitProperties(custom_metadata={_COMMIT_KEY: token})
    try:
        if not DeltaTable.is_deltatable(uri, storage_options=tgt.storage_options):
            create_table_with_add_actions(
                uri, DeltaSchema.from_arrow(schema), adds, mode="error", partition_by=partition_by,
                storage_options=tgt.storage_options, commit_properties=props,
            )
            return
        table = DeltaTable(uri, storage_options=tgt.storage_options)
        if mode == "append":
            table.create_write_transaction(
                adds, mode="append", schema=schema, partition_by=partition_by, commit_properties=props
            )
        else:
            assert drange is not None
            filters = [
                ("cluster", "=", tgt.cluster),
                ("event_date", ">=", drange[0].isoformat()),
                ("event_date", "<=", drange[1].isoformat()),
            ]
            table.create_write_transaction(
                adds, mode="overwrite", schema=schema, partition_by=partition_by,
                partition_filters=filters, commit_properties=props,
            )
    except Exception as exc:
        raise CommitError(f"Delta commit of {tgt.table!r} at {tgt.location} failed: {exc}") from exc


def _discard_staging(fs: pafs.FileSystem, base: str, token: str, *, committed: bool) -> None:
    """Remove ``_staging/<token>``; when not committed, also the files its manifest says were moved."""
    base = base.rstrip("/")
    staging_path = f"{base}/{STAGING_DIR}/{token}"
    try:
        if not committed:
            for rel in _read_manifest(fs, staging_path):
                with contextlib.suppress(FileNotFoundError, OSError):
                    fs.delete_file(f"{base}/{rel}")
        fs.delete_dir(staging_path)
    except (FileNotFoundError, OSError) as exc:
        log.debug("staging cleanup of %s: %s", staging_path, exc)


def _read_manifest(fs: pafs.FileSystem, staging_path: str) -> list[str]:
    try:
        with fs.open_input_stream(f"{staging_path}/{_MANIFEST}") as f:
            return list(json.loads(f.read().decode()).get("files", []))
    except (FileNotFoundError, OSError, ValueError):
        return []


def _clean_stale_staging(
    uri: str, tgt: _Target, fs: pafs.FileSystem, base: str, options: SinkOptions, keep: str
) -> list[str]:
    """Step 4: remove staging folders of runs that died (older than the grace period). Files such a run
    had already moved into the table are deleted too, unless the run's token is in a commit."""
    import pyarrow.fs as pafs

    root = f"{base.rstrip('/')}/{STAGING_DIR}"
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=False, allow_not_found=True))
    now = dt.datetime.now(dt.timezone.utc)
    stale = []
    for info in infos:
        token = info.base_name
        if info.type != pafs.FileType.Directory or token == keep:
            continue
        born = _token_time(token)
        if born is None or now - born < options.staging_grace:
            continue
        stale.append(token)
    if not stale:
        return []
    committed = _committed_tokens(uri, tgt)
    for token in stale:
        log.info("removing stale staging folder %s/%s", root, token)
        _discard_staging(fs, base, token, committed=token in committed)
    return stale


def _committed_tokens(uri: str, tgt: _Target) -> set[str]:
    table = _open_delta(uri, tgt.storage_options, quiet=True)
    if table is None:
        return set()
    return {str(c[_COMMIT_KEY]) for c in table.history() if _COMMIT_KEY in c}


# ------------------------------------------------------------------------------------------------ reads


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
    schema (see the module docstring). A missing table raises :class:`SinkError`.
    """
    from pyspark.sql import functions as F

    tgt = _target(table, config, target, cluster, None)
    drange = parse_date_range(*date_range) if date_range is not None else None
    chosen = _choose_backend(spark, backend or tgt.configured_backend, tgt)
    if chosen == "delta-spark":
        df = spark.table(tgt.location) if tgt.is_catalog else spark.read.format("delta").load(tgt.location)
        if cluster is not None:
            df = df.where(F.col("cluster") == cluster)
        if drange is not None:
            df = df.where(F.col("event_date").between(F.lit(drange[0]), F.lit(drange[1])))
        return df

    uri = _delta_uri(tgt.location)
    dtable = _open_delta(uri, tgt.storage_options)
    if dtable is None:
        raise SinkError(f"no Delta table {table!r} at {tgt.location}")
    features = set(dtable.protocol().reader_features or [])
    if "deletionVectors" in features:
        raise SinkError(f"{tgt.location} uses deletion vectors: read it with Spark's Delta source (delta-spark)")
    arrow_schema = pa.schema(dtable.schema().to_arrow())
    full = _spark_schema_from_arrow(table, arrow_schema)
    part_cols = list(dtable.metadata().partition_columns)
    data_schema = _struct_without(full, part_cols)
    groups: dict[tuple[Any, ...], list[str]] = {}
    for row in _live_files(dtable):
        values = tuple(row.get(f"partition.{c}") for c in part_cols)
        pv = dict(zip(part_cols, values, strict=True))
        if cluster is not None and pv.get("cluster") != cluster:
            continue
        if drange is not None and "event_date" in pv:
            d = pv["event_date"]
            if d is None or not drange[0] <= d <= drange[1]:
                continue
        groups.setdefault(values, []).append(f"{tgt.location}/{row['path']}")
    if not groups:
        return spark.createDataFrame([], full)
    frames = []
    for values, files in groups.items():
        part = spark.read.schema(data_schema).parquet(*files)
        for name, value in zip(part_cols, values, strict=True):
            # nullif(v, NULL) is v, typed nullable as in the table schema (a bare literal is NOT NULL).
            typ = full[name].dataType
            part = part.withColumn(name, F.nullif(F.lit(value).cast(typ), F.lit(None).cast(typ)))
        frames.append(part.select(*full.fieldNames()))
    return reduce(lambda a, b: a.unionByName(b), frames)


def read_table_arrow(
    table: str,
    config: Config | None = None,
    *,
    target: str | None = None,
    cluster: str | None = None,
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
    where: Mapping[str, Any] | None = None,
) -> pa.Table:
    """The live rows of a path table through delta-rs alone (into driver memory: tests, small tables,
    one partition's lineage). ``where`` adds ``column == value`` conditions, applied while scanning."""
    tgt = _target(table, config, target, cluster, None)
    if tgt.is_catalog:
        raise SinkError(f"{tgt.location} is a catalog table: use read_table with a Spark session")
    dtable = _open_delta(_delta_uri(tgt.location), tgt.storage_options)
    if dtable is None:
        raise SinkError(f"no Delta table {table!r} at {tgt.location}")
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
    return dtable.to_pyarrow_dataset().to_table(filter=wanted, use_threads=False)


def _live_files(dtable: Any) -> Iterable[dict[str, Any]]:
    actions = pa.table(dtable.get_add_actions(flatten=True))
    return actions.to_pylist()


def _open_delta(uri: str, storage_options: dict[str, str] | None, *, quiet: bool = False) -> Any:
    from deltalake import DeltaTable

    try:
        if not DeltaTable.is_deltatable(uri, storage_options=storage_options):
            return None
        return DeltaTable(uri, storage_options=storage_options)
    except Exception as exc:
        if quiet:
            return None
        raise SinkError(f"cannot open Delta table at {uri}: {exc}") from exc


# ----------------------------------------------------------------------------------------------- schemas


def _spark_schema_for(table: str, df: DataFrame) -> StructType:
    return schemas.spark_schema(table) if table in schemas.TABLES else df.schema


def _arrow_schema_for(table: str, spark_schema: StructType) -> pa.Schema:
    if table in schemas.TABLES:
        return schemas.arrow_schema(table)
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema)


def _spark_schema_from_arrow(table: str, arrow_schema: pa.Schema) -> StructType:
    from pyspark.sql.types import StructField, StructType

    if table in schemas.TABLES and [f.name for f in arrow_schema] == list(schemas.arrow_schema(table).names):
        return schemas.spark_schema(table)
    return StructType([StructField(f.name, schemas.arrow_to_spark_type(f.type), True) for f in arrow_schema])


def _struct_without(schema: StructType, names: Sequence[str]) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name not in names])


def _names_diff(table: str, have: Sequence[str], want: Sequence[str]) -> None:
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in want]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        raise SchemaMismatchError(f"{table}: columns do not match the table schema ({'; '.join(parts)})")


def _conform_spark(df: DataFrame, schema: StructType, table: str) -> DataFrame:
    """Select the table's columns in order; cast numeric widths and all-null columns, refuse the rest."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NullType, NumericType

    _names_diff(table, df.columns, schema.fieldNames())
    have = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    for field in schema.fields:
        src = have[field.name]
        if src.simpleString() == field.dataType.simpleString():
            cols.append(F.col(field.name))
        elif isinstance(src, NullType) or (isinstance(src, NumericType) and isinstance(field.dataType, NumericType)):
            cols.append(F.col(field.name).cast(field.dataType).alias(field.name))
        else:
            raise SchemaMismatchError(
                f"{table}.{field.name}: has type {src.simpleString()}, the table needs "
                f"{field.dataType.simpleString()}"
            )
    return df.select(*cols)


def _conform_arrow(data: pa.Table, schema: pa.Schema, table: str) -> pa.Table:
    _names_diff(table, data.column_names, schema.names)
    data = data.select(schema.names)
    try:
        return data.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(f"{table}: data does not fit the table schema: {exc}") from None


def _fit_table_schema(existing: Any, schema: pa.Schema, tgt: _Target) -> None:
    """Fit the existing table to ``schema``: new nullable columns are added (a code upgrade that adds a
    column, e.g. ``metadata_token``; old rows read it as null), anything else — a column gone, a changed
    type, a new non-null column — is refused. Columns compare by name (Delta is name-based)."""
    from deltalake import Schema as DeltaSchema

    have = {f.name: repr(f.type) for f in existing.schema().fields}
    want = DeltaSchema.from_arrow(schema).fields
    added = [f for f in want if f.name not in have]
    dropped = [n for n in have if n not in {f.name for f in want}]
    changed = [f.name for f in want if f.name in have and have[f.name] != repr(f.type)]
    required = [f.name for f in added if not f.nullable]
    if not (dropped or changed or required):
        if added:
            try:
                existing.alter.add_columns(added)
            except Exception as exc:
                raise CommitError(f"adding columns to {tgt.table!r} at {tgt.location} failed: {exc}") from exc
            log.info("%s: added column(s) %s to the existing table", tgt.table, ", ".join(f.name for f in added))
        return
    detail = "; ".join(
        s
        for s in (
            f"columns gone {', '.join(dropped)}" if dropped else "",
            f"changed types {', '.join(changed)}" if changed else "",
            f"new non-nullable columns {', '.join(required)}" if required else "",
        )
        if s
    )
    raise SchemaMismatchError(
        f"{tgt.table}: the existing table at {tgt.location} has a different schema ({detail}); "
        "only new nullable columns are added automatically: migrate the table or write to a new output root"
    )


def _check_rows_in_range_arrow(
    data: pa.Table, tgt: _Target, mode: str, drange: tuple[dt.date, dt.date] | None
) -> None:
    if mode != "replace_range" or data.num_rows == 0:
        return
    import pyarrow.compute as pc

    assert drange is not None
    ok = pc.and_(
        pc.equal(data["cluster"], pa.scalar(tgt.cluster)),
        pc.and_(
            pc.greater_equal(data["event_date"], pa.scalar(drange[0], pa.date32())),
            pc.less_equal(data["event_date"], pa.scalar(drange[1], pa.date32())),
        ),
    )
    bad = data.num_rows - pc.sum(pc.fill_null(ok, False).cast(pa.int64())).as_py()
    if bad:
        raise SinkError(
            f"{tgt.table}: {bad} rows fall outside the replaced range cluster={tgt.cluster!r}, "
            f"{drange[0]}..{drange[1]}; filter them before writing"
        )
