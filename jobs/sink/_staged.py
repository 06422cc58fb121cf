"""The delta-rs back end: Spark stages Parquet files, the driver moves them into the table and commits one
Delta transaction with delta-rs (steps 1-4 of the :mod:`jobs.sink` docstring)."""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import re
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any
from urllib.parse import unquote

import pyarrow as pa

from jobs.errors import CommitError, SinkError
from jobs.fs import filesystem

from . import _lease
from ._conflict import RUN_KEY, STAGING_KEY, other_run, with_retries
from ._fit import arrow_schema_for, fit_table_schema
from ._read import read_partition_files
from ._runlease import check_still_held
from ._target import FileSource, HeldRows, KeepDays, SinkOptions, SinkResult, Target, days_to_keep, open_delta

if TYPE_CHECKING:
    import pyarrow.fs as pafs
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = ["STAGING_DIR", "write_delta_rs"]

log = logging.getLogger("jobs.sink")

STAGING_DIR = "_staging"
_MANIFEST = "_moves.json"
_COMMIT_KEY = STAGING_KEY
_TOKEN_FILE = re.compile(r"^(\d{8}T\d{6}Z-[0-9a-f]{12})-")  # <token>-part-….parquet, see final_rel
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
    df: DataFrame | FileSource,
    tgt: Target,
    mode: str,
    drange: tuple[dt.date, dt.date] | None,
    partition_by: list[str],
    spark_schema: StructType,
    options: SinkOptions,
    *,
    hold: tuple[dt.date, dt.date] | None = None,
    conform: Callable[[DataFrame], DataFrame] | None = None,
    keep_days: KeepDays | None = None,
) -> SinkResult:
    """Steps 1-4 of the :mod:`jobs.sink` docstring. With ``hold`` (days before the range), the staged files
    of those days are neither moved nor committed: they stay in the staging folder, under this write's
    lease (still renewed), as :attr:`SinkResult.held`, until the caller releases them; if the process dies
    first, the next write of the table removes them like any dead run's staging folder. A
    :class:`~._target.FileSource` writes its own staged files (``conform`` shapes the further rows it hands
    back for Spark to write); one that asks to keep its staging folder gets it kept the same way. With
    ``keep_days``, the days it names that no staged file has are taken out of the overwrite (kept as stored)."""
    arrow_schema = arrow_schema_for(tgt.table, spark_schema)
    uri = tgt.native
    existing = open_delta(uri, tgt.storage_options)
    if existing is not None:
        fit_table_schema(existing, arrow_schema, tgt)
    fs, base = filesystem(tgt.location)
    root = f"{base.rstrip('/')}/{STAGING_DIR}"
    token, run = _new_token(), _lease.run_name(options.run_id)
    owned = contextlib.ExitStack()  # the lease: renewed until the write ends, or until its held rows go

    def end(*, committed: bool) -> None:
        try:
            _discard_staging(fs, base, token, committed=committed)
        finally:
            owned.close()
            _lease.remove_lease(fs, root, token)

    owned.enter_context(_lease.hold(fs, root, token, run, options.lease))
    try:
        staged = _stage(df, tgt, partition_by, token, arrow_schema, conform)
        _check_staged_partitions(staged, tgt, mode, drange, hold)
        staged, kept = _split_held(staged, hold)
        left = days_to_keep(keep_days, drange, (dt.date.fromisoformat(d) for f in staged.files
                                                if (d := f.partition_values.get("event_date"))))
        adds = _add_actions(staged, tgt, fs, base, options, arrow_schema)
        if tgt.cluster:  # a run whose lease was taken over meanwhile stops before it moves files in
            check_still_held(tgt.location, tgt.cluster)
        _move_into_table(staged, fs, base, options)
        _commit(uri, tgt, adds, mode, drange, partition_by, arrow_schema, token, run, options, left)
    except BaseException:
        # A clean failure: undo what we can now (a killed process leaves this to the next run's cleanup).
        # The moved files stay if the commit landed after all (delta-rs#2609: an error after a commit).
        end(committed=_landed(uri, tgt, token))
        raise
    held = None
    keep = bool(kept) or (isinstance(df, FileSource) and df.keep_staging)
    if keep:
        # the moved files are committed: drop the manifest, so that no cleanup of this folder can ever
        # take them for a dead run's uncommitted moves (e.g. once the log no longer holds this commit)
        _, staging_path = filesystem(staged.staging)
        with contextlib.suppress(FileNotFoundError, OSError):
            fs.delete_file(f"{staging_path}/{_MANIFEST}")
        frame = None
        if kept:
            try:
                frame = _read_held(df.sparkSession, staged.staging, kept, partition_by, spark_schema)
            except BaseException:
                end(committed=True)
                raise
        held = HeldRows(frame, lambda: end(committed=True))
    else:
        end(committed=True)
        if hold is not None:
            held = HeldRows(None)
    try:
        _clean_leftovers(uri, tgt, fs, base, options, keep=token)
    except Exception as exc:  # the write is committed; the next run retries the cleanup
        log.warning("%s: cleaning what dead runs left at %s failed: %s", tgt.table, tgt.location, exc)
    version = open_delta(uri, tgt.storage_options).version()
    rows = sum(json.loads(a.stats).get("numRecords", 0) for a in adds)
    return SinkResult(tgt.table, tgt.location, "delta-rs", mode, version, len(adds), rows, drange, held, left)


def _split_held(staged: _Staged, hold: tuple[dt.date, dt.date] | None) -> tuple[_Staged, list[_StagedFile]]:
    """The staged files to commit, and those of the ``hold`` days (kept in the staging folder)."""
    if hold is None:
        return staged, []
    lo, hi = hold[0].isoformat(), hold[1].isoformat()
    rest: list[_StagedFile] = []
    kept: list[_StagedFile] = []
    for f in staged.files:
        (kept if lo <= (f.partition_values.get("event_date") or "") <= hi else rest).append(f)
    return replace(staged, files=rest), kept


def _read_held(spark: Any, staging: str, kept: list[_StagedFile], partition_by: list[str],
               schema: StructType) -> DataFrame:
    """The held files as a DataFrame in the table's schema (columnar Parquet reads, partition values as
    literals, as :func:`jobs.sink.read_table` reads the table's own files)."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for f in kept:
        values = tuple(f.partition_values.get(c) for c in partition_by)
        groups.setdefault(values, []).append(f"{staging}/{f.rel}")
    return read_partition_files(spark, groups, schema, partition_by)


def _stage(df: DataFrame | FileSource, tgt: Target, partition_by: list[str], token: str, schema: pa.Schema,
           conform: Callable[[DataFrame], DataFrame] | None = None) -> _Staged:
    """Step 1: Spark writes the rows as Parquet under ``<table>/_staging/<token>/`` (parallel, executors) -- or
    a :class:`~._target.FileSource`'s tasks write them, and Spark adds the further rows it hands back."""
    staging = f"{tgt.spark}/{STAGING_DIR}/{token}"
    try:
        rows, mode = (df.stage(staging, partition_by, schema), "append") if isinstance(df, FileSource) else (
            df, "error")  # = errorifexists, the one spelling Spark Connect accepts too
        if rows is not None:
            if conform is not None:  # given with a FileSource only, for the rows it hands back
                rows = conform(rows)
            with _session_conf(df.sparkSession, _STAGE_CONF):
                rows.write.mode(mode).partitionBy(*partition_by).parquet(staging)
    except Exception as exc:
        fs, base = filesystem(tgt.location)
        _discard_staging(fs, base, token, committed=False)
        raise SinkError(f"Spark could not write staged Parquet files for {tgt.table!r}: {exc}") from exc
    return _Staged(token, staging, _list_staged(staging, partition_by))


#: Session settings of the staging write. Timestamps as INT64 micros (what Delta readers expect). And
#: concurrent output writers: a partitioned V1 write otherwise sorts every row of the task by its partition
#: columns before writing (a local Sort in the planned write), though a task meets only a few
#: ``event_date`` partitions (the range and the lookback days); with up to this many open writers per task
#: the rows stream straight into their partition's file, and a task that meets more partitions falls back
#: to sorting the rest (Spark's FileFormatWriter), so the files hold the same rows either way.
_STAGE_CONF = {"spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
               "spark.sql.maxConcurrentOutputFileWriters": "4"}


_CONF_LOCK = threading.Lock()
_CONF_HOLDERS: dict[int, list[Any]] = {}  # id(session) -> [writes inside the block, the values it replaced]


@contextlib.contextmanager
def _session_conf(spark: Any, conf: dict[str, str]) -> Iterator[None]:
    """Set ``conf`` on the session for the block, then put back what was there (or unset it). Writes running
    at once from several threads (:func:`jobs.session.run_concurrently`) share one setting: the first to
    enter sets it, the last to leave puts back what was there before the first."""
    key = id(spark)
    with _CONF_LOCK:
        holder = _CONF_HOLDERS.get(key)
        if holder is None:
            previous = {k: spark.conf.get(k, None) for k in conf}
            for k, v in conf.items():
                spark.conf.set(k, v)
            holder = _CONF_HOLDERS[key] = [0, previous]
        holder[0] += 1
    try:
        yield
    finally:
        with _CONF_LOCK:
            holder[0] -= 1
            if holder[0] == 0:
                del _CONF_HOLDERS[key]
                for k, v in holder[1].items():
                    if v is None:
                        spark.conf.unset(k)
                    else:
                        spark.conf.set(k, v)


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
            continue  # _SUCCESS, .crc checksums, a FileSource's temporary files
        dirs = rel.split("/")[:-1]
        if any(d.startswith(("_", ".")) for d in dirs):
            continue  # not the table's: a FileSource's own folders (the offsets pass's side rows)
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
    staged: _Staged, tgt: Target, mode: str, drange: tuple[dt.date, dt.date] | None,
    hold: tuple[dt.date, dt.date] | None = None,
) -> None:
    """replaceWhere semantics: every written row must fall inside the replaced partitions (or the held
    days, which are not committed)."""
    if mode != "replace_range":
        return
    assert drange is not None
    days = [drange] + ([hold] if hold is not None else [])
    for f in staged.files:
        c, d = f.partition_values.get("cluster"), f.partition_values.get("event_date")
        inside = c == tgt.cluster and d is not None and any(
            lo.isoformat() <= d <= hi.isoformat() for lo, hi in days)
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
    run: str,
    options: SinkOptions,
    keep: tuple[dt.date, ...] = (),
) -> None:
    """Step 3: one Delta transaction (create, append, or partition overwrite of the range, less the ``keep``
    days).

    A missing table is created *with* the rows in version 0, put-if-absent (``max_commit_retries=0``): of
    two runs creating it at once one wins, the other finds the table and writes its rows as an ordinary
    append/overwrite. A commit that lost a race is retried on a fresh snapshot (:mod:`._conflict`)."""
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import CommitProperties, create_table_with_add_actions

    meta = {_COMMIT_KEY: token, RUN_KEY: run}
    what = f"Delta commit of {tgt.table!r} at {tgt.location}"

    def attempt(n: int) -> None:
        if not DeltaTable.is_deltatable(uri, storage_options=tgt.storage_options):
            try:
                create_table_with_add_actions(
                    uri, DeltaSchema.from_arrow(schema), adds, mode="error", partition_by=partition_by,
                    storage_options=tgt.storage_options,
                    commit_properties=CommitProperties(custom_metadata=meta, max_commit_retries=0),
                )
                return
            except Exception as exc:
                if not DeltaTable.is_deltatable(uri, storage_options=tgt.storage_options):
                    raise
                log.info("%s: another run created the table first (%s); writing into it", what, exc)
        table = DeltaTable(uri, storage_options=tgt.storage_options)
        if mode == "append":
            props = CommitProperties(custom_metadata=meta)  # blind: delta-rs may rebase it on a newer version
        else:
            # Not rebased by delta-rs: an overwrite of a range that was empty in its snapshot would pass its
            # conflict check next to a concurrent overwrite of the same range, and both rows would stay.
            props = CommitProperties(custom_metadata=meta, max_commit_retries=0)
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
            if keep:  # days of the range the write leaves as stored (write_table(keep_days=...))
                filters.append(("event_date", "not in", [d.isoformat() for d in keep]))
            table.create_write_transaction(
                adds, mode="overwrite", schema=schema, partition_by=partition_by,
                partition_filters=filters, commit_properties=props,
            )

    try:
        with_retries(
            attempt, retries=options.commit_retries, what=what,
            committed=lambda: token in _committed_tokens(uri, tgt),
            winner=lambda: other_run(uri, tgt.storage_options, run),
        )
    except CommitError:
        raise
    except Exception as exc:
        raise CommitError(f"{what} failed: {' '.join(str(exc).split())}") from exc


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


def _clean_leftovers(
    uri: str, tgt: Target, fs: pafs.FileSystem, base: str, options: SinkOptions, keep: str
) -> list[str]:
    """Step 4: remove what dead runs left in this table — their staging folders and leases, and data files
    they had moved into the partitions — i.e. what no Delta version references and no live run owns
    (:mod:`._lease` says when a run counts as live). Returns the tokens cleaned.

    The order of reads makes a run that starts or commits meanwhile safe: the table's files are listed
    first, then the leases (a run moves files only while holding one), then the history (a run removes its
    lease only after its commit). A data file is removed only when its token is in no retained commit and
    none of the current snapshot's files, and the token is younger than the oldest retained commit (older
    ones may have been committed in a log that was since cleaned up: those are VACUUM's business)."""
    import pyarrow.fs as pafs

    base = base.rstrip("/")
    root = f"{base}/{STAGING_DIR}"
    orphans = _token_files(fs, base)
    staging = {
        i.base_name
        for i in fs.get_file_info(pafs.FileSelector(root, recursive=False, allow_not_found=True))
        if i.type == pafs.FileType.Directory
    }
    leases = _lease.read_leases(fs, root)
    now = dt.datetime.now(dt.timezone.utc)

    def dead(token: str) -> bool:
        if token == keep:
            return False
        if token in leases:
            return not _lease.is_live(leases[token], now)
        born = _token_time(token)  # no lease: written by a sink version without leases
        return born is not None and now - born >= options.staging_grace

    dead_staging = sorted(t for t in staging | set(leases) if dead(t))
    dead_files = {
        t: rels for t, rels in orphans.items()
        if t != keep and (t in dead_staging or (t not in staging and t not in leases))
    }
    if not dead_staging and not dead_files:
        return []
    committed, oldest, live_files = _table_state(uri, tgt)
    for token in dead_staging:
        owner = leases.get(token)
        log.info("removing staging folder %s/%s left by %s", root, token, owner.describe() if owner else "a dead run")
        _discard_staging(fs, base, token, committed=token in committed)
        _lease.remove_lease(fs, root, token)
    removed = list(dead_staging)
    for token, rels in sorted(dead_files.items()):
        born = _token_time(token)
        if token in committed or oldest is None or born is None or born < oldest:
            continue
        gone = [r for r in rels if _plain(r) not in live_files and fs.get_file_info(f"{base}/{r}").is_file]
        if not gone:
            continue
        log.info("removing %d uncommitted data file(s) of dead run %s from %s", len(gone), token, base)
        for rel in gone:
            with contextlib.suppress(FileNotFoundError, OSError):
                fs.delete_file(f"{base}/{rel}")
        if token not in removed:
            removed.append(token)
    return removed


def _token_files(fs: pafs.FileSystem, base: str) -> dict[str, list[str]]:
    """Data files in the table's partition folders named by the staged path (``<token>-part-…``), by token."""
    import pyarrow.fs as pafs

    out: dict[str, list[str]] = {}
    for info in fs.get_file_info(pafs.FileSelector(base, recursive=True, allow_not_found=True)):
        rel = info.path[len(base) :].lstrip("/")
        if info.type != pafs.FileType.File or rel.startswith(("_delta_log/", f"{STAGING_DIR}/")):
            continue
        m = _TOKEN_FILE.match(info.base_name)
        if m:
            out.setdefault(m.group(1), []).append(rel)
    return out


def _table_state(uri: str, tgt: Target) -> tuple[set[str], dt.datetime | None, set[str]]:
    """Committed staging tokens, the oldest retained commit's time, and the current snapshot's files."""
    table = open_delta(uri, tgt.storage_options, quiet=True)
    if table is None:
        return set(), None, set()
    history = table.history()
    committed = {str(c[_COMMIT_KEY]) for c in history if _COMMIT_KEY in c}
    stamps = [c["timestamp"] for c in history if isinstance(c.get("timestamp"), int)]
    if any(c.get("version") == 0 for c in history):  # the whole log is retained: every commit is known
        oldest: dt.datetime | None = dt.datetime.min.replace(tzinfo=dt.timezone.utc)
    else:
        oldest = dt.datetime.fromtimestamp(min(stamps) / 1000, dt.timezone.utc) if stamps else None
    live = {_plain(str(p)) for p in pa.table(table.get_add_actions()).column("path").to_pylist()}
    return committed, oldest, live


def _plain(path: str) -> str:
    """A file path with every layer of %-escaping undone: the log, delta-rs' listing and the store
    escape partition values a different number of times (``a b`` is ``a%2520b`` in ``get_add_actions``)."""
    while (once := unquote(path)) != path:
        path = once
    return path


def _landed(uri: str, tgt: Target, token: str) -> bool:
    """Whether this run's commit is in the table after all; unknown counts as yes (keeps the files)."""
    try:
        return token in _committed_tokens(uri, tgt)
    except Exception:
        return True


def _committed_tokens(uri: str, tgt: Target) -> set[str]:
    table = open_delta(uri, tgt.storage_options, quiet=True)
    if table is None:
        return set()
    return {str(c[_COMMIT_KEY]) for c in table.history() if _COMMIT_KEY in c}

