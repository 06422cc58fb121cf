"""The delta-rs back end: Spark stages Parquet files, the driver moves them into the table and commits one
Delta transaction with delta-rs (steps 1-4 of the :mod:`jobs.sink` docstring)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from jobs.errors import CommitError, SinkError
from jobs.fs import filesystem

from ._fit import arrow_schema_for, fit_table_schema
from ._target import SinkOptions, SinkResult, Target, open_delta

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["STAGING_DIR", "write_delta_rs"]

log = logging.getLogger("jobs.sink")

STAGING_DIR = "_staging"
_MANIFEST = "_moves.json"
_COMMIT_KEY = "epochAudit.staging"
_HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"


@dataclass(frozen=True)
class _Staged:
    token: str
    staging: str  # <table>/_staging/<token> as Spark wrote it (jobs.fs resolves it for pyarrow)
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


def write_delta_rs(
    df: DataFrame,
    tgt: Target,
    mode: str,
    drange: tuple[dt.date, dt.date] | None,
    partition_by: list[str],
    spark_schema: StructType,
    options: SinkOptions,
) -> SinkResult:
    arrow_schema = arrow_schema_for(tgt.table, spark_schema)
    uri = tgt.native
    existing = open_delta(uri, tgt.storage_options)
    if existing is not None:
        fit_table_schema(existing, arrow_schema, tgt)
    staged = _stage(df, tgt, partition_by)
    fs, base = filesystem(tgt.location)
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
    version = open_delta(uri, tgt.storage_options).version()
    rows = sum(json.loads(a.stats).get("numRecords", 0) for a in adds)
    return SinkResult(tgt.table, tgt.location, "delta-rs", mode, version, len(adds), rows, drange)


def _stage(df: DataFrame, tgt: Target, partition_by: list[str]) -> _Staged:
    """Step 1: Spark writes the rows as Parquet under ``<table>/_staging/<token>/`` (parallel, executors)."""
    token = _new_token()
    staging = f"{tgt.spark}/{STAGING_DIR}/{token}"
    spark = df.sparkSession
    key = "spark.sql.parquet.outputTimestampType"
    previous = spark.conf.get(key, None)
    spark.conf.set(key, "TIMESTAMP_MICROS")
    try:
        df.write.mode("errorifexists").partitionBy(*partition_by).parquet(staging)
    except Exception as exc:
        fs, base = filesystem(tgt.location)
        _discard_staging(fs, base, token, committed=False)
        raise SinkError(f"Spark could not write staged Parquet files for {tgt.table!r}: {exc}") from exc
    finally:
        if previous is not None and previous != "TIMESTAMP_MICROS":
            spark.conf.set(key, previous)
    return _Staged(token, staging, _list_staged(staging, partition_by))


def _list_staged(staging: str, partition_by: list[str]) -> list[_StagedFile]:
    import pyarrow.fs as pafs

    fs, path = filesystem(staging)
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
    staged: _Staged, tgt: Target, mode: str, drange: tuple[dt.date, dt.date] | None
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
    staged: _Staged, tgt: Target, fs: pafs.FileSystem, base: str, options: SinkOptions, schema: pa.Schema
) -> list[Any]:
    """Delta ``add`` actions for the staged files; statistics come from each file's Parquet footer."""
    import pyarrow.parquet as pq
    from deltalake.transaction import AddAction

    _, staging_path = filesystem(staged.staging)

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
    _, staging_path = filesystem(staged.staging)
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
    tgt: Target,
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
    uri: str, tgt: Target, fs: pafs.FileSystem, base: str, options: SinkOptions, keep: str
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


def _committed_tokens(uri: str, tgt: Target) -> set[str]:
    table = open_delta(uri, tgt.storage_options, quiet=True)
    if table is None:
        return set()
    return {str(c[_COMMIT_KEY]) for c in table.history() if _COMMIT_KEY in c}

