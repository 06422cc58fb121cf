"""The commit pass without Spark's row shuffle, for large runs on the delta-rs sink.

:func:`.commit_pass.commit_findings` cogroups the commits by (topic, partition) in Spark: the JVM reads every
commit into a row, converts it to Arrow for Python, shuffles and sorts it — ~20 of the pass's ~24 CPU-s at
10 M commits, the rules ~4 (BENCHMARKS.md, issue 16 sixth and seventh rounds). Where the commits are
Parquet files the Delta log lists (the delta-rs sink), :class:`CommitSpill` runs the same pass as

1. **spill**: a task per run of data files (:func:`spill_tasks`) reads the commit columns with pyarrow (the
   repeated strings as dictionaries, :data:`DICTIONARY_COLUMNS`), keeps the live commits (``txn_state``
   none/committed; tombstones kept), splits them into buckets of (topic, partition) (:func:`bucket_of`) and
   writes one Arrow IPC stream per bucket into a scratch folder next to the table
   (``<offset_commits>/_commit_pass/<token>/``), plus its distinct (group, topic, partition) for the resets'
   group records. The rows the run decoded itself for the lookback days
   (:class:`~._frames.InputState`, with what earlier runs wrote for them) come from Spark the same way.
   Then the side table (lineage, group records) is spilled from Spark into the same buckets (the same
   :func:`bucket_of`);
2. **buckets**: a task per bucket reads its files and runs :func:`.commit_pass.run_commit_pass` on each
   (topic, partition), its strings still dictionary-encoded — no shuffle; the JVM holds none of the files'
   commits (only the lookback rows).

The findings are those of the Spark cogroup (``tests/test_commit_spill.py``). The scratch folder stays until
:meth:`CommitSpill.close`, after the run's writes (a re-read of the findings reads the files again); a killed
run's folder is removed by a later run's :meth:`CommitSpill.plan` (:func:`sweep_scratch`).
Small runs keep the cogroup (:data:`MIN_ROWS`): the spill's three Spark jobs cost more than they save there;
so do very large ones (:data:`MAX_ROWS`), whose spill would be too many small files.
"""

from __future__ import annotations

import datetime as dt
import uuid
import zlib
from collections.abc import Iterable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from epochlib.rules import COMMIT_COLUMNS

from . import _frames as fr
from .commit_pass import commit_rows, group_records, read_commits, run_commit_pass

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import Config

__all__ = ["MAX_ROWS", "MIN_ROWS", "ROWS_COLUMNS", "CommitSpill", "bucket_of", "spill_tasks", "sweep_scratch"]

#: Below this many commits in the window's files the Spark cogroup runs (the demo, small incident runs). Measured
#: (BENCHMARKS.md, twelfth round): at 250 k commits the two are even, at 1 M the spill saves ~10 of ~65 CPU-s.
MIN_ROWS = 1 << 18
#: Above this many the Spark cogroup runs again: the spill writes (spill tasks x buckets) files — ~2 k at this
#: size on up to 32 cores (~15 k when it wrote a set per data file; both counts are at least one per core, so a
#: large cluster writes more), slow on an object store — and its driver gathers their names, where Spark's shuffle
#: scales out. Not raised with the spill tasks: nothing here has measured a larger run.
MAX_ROWS = 1 << 26
#: Commits per bucket aimed at (a bucket task holds its bucket in memory: ~100 bytes a commit).
ROWS_PER_BUCKET = 1 << 20
#: Commits per spill task aimed at: a task takes a run of data files (streaming them, a row group at a time), so
#: that each task's fixed cost and its IPC file per bucket are paid per ~2 M commits, not per data file.
ROWS_PER_SPILL_TASK = 1 << 21
#: The columns a spilled commit has (:func:`.commit_pass.commit_rows`' order).
ROWS_COLUMNS = ("topic", "partition", *COMMIT_COLUMNS)
#: The spilled columns kept dictionary-encoded from the data files to the bucket tasks (read with
#: ``read_dictionary``) and on into the pass, which ranks them: a few distinct values each (the segment file's
#: path, for ``source``), which decoded were most of the spill's bytes and of its CPU (BENCHMARKS.md, issue 16
#: thirteenth round), and of a bucket's (eighteenth round).
DICTIONARY_COLUMNS = ("topic", "group_id", "source")
_DICT = pa.dictionary(pa.int32(), pa.string())
SCRATCH_DIR = "_commit_pass"
#: A scratch folder this old is a dead run's (:func:`sweep_scratch`).
SCRATCH_TTL = dt.timedelta(days=1)
_STAMP = "%Y%m%dT%H%M%SZ"  # a scratch folder's name starts with its creation time (object stores list no times)
_PAIRS = ("group_id", "topic", "partition")
_READ = ("topic", "partition", "group_id", "committed_offset", "leader_epoch", "commit_ts", "event_ts",
         "is_tombstone", "txn_state", "log_offset", "source", "position")  # fmt: skip
#: One row per file a spill task wrote: ``kind`` rows (a bucket's) or pairs; ``path`` relative to the scratch.
_SPILLED = pa.schema([pa.field("kind", pa.string()), pa.field("bucket", pa.int32()), pa.field("path", pa.string()),
                      pa.field("rows", pa.int64())])


def bucket_of(topic: pa.Array | pa.ChunkedArray, partition: pa.Array | pa.ChunkedArray, n: int) -> np.ndarray:
    """Bucket (0 … n-1) of each (topic, partition): ``(crc32(utf-8 topic) * 31 + partition) mod n``, null as
    "" and 0; the same for any Arrow string type, dictionary-encoded or not, or chunking (file rows and Spark
    rows meet in one bucket)."""
    if isinstance(topic, pa.ChunkedArray):
        topic = topic.combine_chunks() if topic.num_chunks else pa.array([], topic.type)
    enc = topic if pa.types.is_dictionary(topic.type) else pc.dictionary_encode(topic)
    # a null index, or a null in the dictionary, is ""
    values = ["" if v is None else v for v in enc.dictionary.to_pylist()] + [""]
    idx = pc.fill_null(enc.indices, len(values) - 1).to_numpy(zero_copy_only=False)
    crc = np.array([zlib.crc32(s.encode()) for s in values], dtype=np.int64)
    part = pc.fill_null(partition, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    return np.mod(crc[idx] * 31 + part, n)


# ------------------------------------------------------------------------------------ executor side


def _rows_schema() -> pa.Schema:
    from jobs import schemas

    table = schemas.arrow_schema("offset_commits")
    return pa.schema([pa.field("ts", pa.int64()) if c == "ts" else table.field(c) for c in ROWS_COLUMNS])


def _spill_schema() -> pa.Schema:
    """:func:`_rows_schema` with the repeated strings (:data:`DICTIONARY_COLUMNS`) dictionary-encoded, as the
    data files' rows are spilled."""
    return pa.schema([pa.field(f.name, _DICT) if f.name in DICTIONARY_COLUMNS else f for f in _rows_schema()])


def _plain(table: pa.Table) -> pa.Table:
    """``table`` with its dictionary columns decoded (what the rules read)."""
    if not any(pa.types.is_dictionary(f.type) for f in table.schema):
        return table
    return table.cast(pa.schema([pa.field(f.name, f.type.value_type, f.nullable) if pa.types.is_dictionary(f.type)
                                 else f for f in table.schema]))


def _compacted(table: pa.Table) -> pa.Table:
    """``table`` with each dictionary column's dictionary cut to the values its rows use: a bucket's slice of a row
    group keeps the whole row group's dictionary otherwise, and each bucket would carry every distinct group id of
    every row group (with 50 k distinct ids, a 64-bucket spill was 5x the plain one)."""
    for i, f in enumerate(table.schema):
        if not pa.types.is_dictionary(f.type):
            continue
        a = table.column(i).combine_chunks()
        idx = a.indices.to_numpy(zero_copy_only=False)
        valid = pc.is_valid(a.indices).to_numpy(zero_copy_only=False)
        used = np.zeros(len(a.dictionary), dtype=bool)
        used[idx[valid].astype(np.int64)] = True
        if used.all():
            continue
        remap = (np.cumsum(used) - 1).astype(np.int32)
        new_idx = pa.array(np.where(valid, remap[np.where(valid, idx, 0).astype(np.int64)], 0), pa.int32(),
                           mask=~valid)
        table = table.set_column(i, f, pa.DictionaryArray.from_arrays(
            new_idx, a.dictionary.filter(pa.array(used))).cast(f.type))
    return table


def _live(state: pa.Array) -> pa.Array:
    """The commits a ``txn_state`` keeps (none, committed; null is none), for a plain or dictionary column
    (then judged once per distinct state)."""
    keep = pa.array(["none", "committed"])
    if pa.types.is_dictionary(state.type):
        per_value = pc.is_in(pc.fill_null(state.dictionary, "none"), keep)
        return pc.fill_null(pc.take(per_value, state.indices), True)
    return pc.is_in(pc.fill_null(state, "none"), keep)


def commit_file_rows(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """The live commits of one ``offset_commits`` data file (any subset of its columns; those it lacks, as an
    older file may, are null; string columns plain or dictionary-encoded) as :func:`.commit_pass.commit_rows`
    gives them from Spark, in ``schema`` (:func:`_rows_schema`, or :func:`_spill_schema`)."""
    n = table.num_rows

    def col(name: str, typ: pa.DataType) -> pa.Array:
        return table.column(name).combine_chunks().cast(typ) if name in table.column_names else pa.nulls(n, typ)

    state = table.column("txn_state").combine_chunks() if "txn_state" in table.column_names else pa.nulls(
        n, pa.string())
    live = _live(state)
    ts = pc.coalesce(fr.epoch_ms_arrow(col("event_ts", pa.timestamp("us", tz="UTC"))),
                     fr.epoch_ms_arrow(col("commit_ts", pa.timestamp("us", tz="UTC"))))  # fmt: skip
    cols = [ts if f.name == "ts" else col(f.name, f.type) for f in schema]
    return pa.table(cols, schema=schema).filter(live)


class _BucketFiles:
    """One task's spill: an IPC file per bucket it has rows of, and (``pairs``) a Parquet file of its
    distinct (group, topic, partition). Names are unique per task attempt and only the files of the attempts
    that finished reach the driver (:meth:`close`'s rows), so a failed attempt's files are never read (no
    rename: an object store, or Azure without a namespace, has none)."""

    def __init__(self, fs: Any, base: str, folder: str, n: int, *, pairs: bool) -> None:
        from pyspark import TaskContext

        ctx = TaskContext.get()
        task = f"{ctx.partitionId()}-{ctx.attemptNumber()}" if ctx is not None else "driver"
        self.fs, self.base, self.folder, self.n, self.want_pairs = fs, base, folder, n, pairs
        self.tag = f"{task}-{uuid.uuid4().hex[:12]}"
        # bucket -> writer, stream, path relative to the scratch folder
        self.writers: dict[int, tuple[Any, Any, str]] = {}
        self.rows: dict[int, int] = {}
        self.pairs: list[pa.Table] = []

    def add(self, rows: pa.Table) -> None:
        import pyarrow.ipc as ipc

        if rows.num_rows == 0:
            return
        if self.want_pairs:  # (distinct over the dictionary codes, decoded once distinct)
            self.pairs.append(_plain(rows.select(list(_PAIRS)).group_by(list(_PAIRS)).aggregate([])))
        b = bucket_of(rows.column("topic"), rows.column("partition"), self.n)
        # (a stable sort of 16-bit keys is numpy's radix sort: ~7x faster than of the 64-bit bucket numbers)
        order = np.argsort(b.astype(np.int16) if self.n <= np.iinfo(np.int16).max else b, kind="stable")
        rows, b = rows.take(pa.array(order)), b[order]
        cuts = np.flatnonzero(np.diff(b)) + 1
        for lo, hi in zip(np.r_[0, cuts].tolist(), np.r_[cuts, len(b)].tolist(), strict=True):
            k = int(b[lo])
            if k not in self.writers:
                folder = f"{self.base}/{self.folder}/b={k}"
                self.fs.create_dir(folder, recursive=True)
                rel = f"{self.folder}/b={k}/{self.tag}.arrow"
                stream = self.fs.open_output_stream(f"{self.base}/{rel}")
                # a stream, not a file: each row group's dictionaries replace the last ones
                opts = ipc.IpcWriteOptions(compression="lz4")
                self.writers[k] = (ipc.new_stream(stream, rows.schema, options=opts), stream, rel)
                self.rows[k] = 0
            self.writers[k][0].write_table(_compacted(rows.slice(lo, hi - lo)))
            self.rows[k] += hi - lo

    def close(self) -> pa.RecordBatch:
        """Close the files; one :data:`_SPILLED` row each."""
        import pyarrow.parquet as pq

        kinds, buckets, paths, counts = [], [], [], []
        for k, (writer, stream, rel) in sorted(self.writers.items()):
            writer.close()
            stream.close()
            kinds.append("rows"), buckets.append(k), paths.append(rel), counts.append(self.rows[k])
        if self.pairs:
            pairs = pa.concat_tables(self.pairs).group_by(list(_PAIRS)).aggregate([])
            folder = f"{self.base}/{self.folder}/pairs"
            self.fs.create_dir(folder, recursive=True)
            pq.write_table(pairs, f"{folder}/{self.tag}.parquet", filesystem=self.fs)
            kinds.append("pairs"), buckets.append(-1), paths.append(f"{self.folder}/pairs/{self.tag}.parquet")
            counts.append(pairs.num_rows)
        self.writers = {}
        return pa.RecordBatch.from_arrays([pa.array(kinds, pa.string()), pa.array(buckets, pa.int32()),
                                           pa.array(paths, pa.string()), pa.array(counts, pa.int64())],
                                          schema=_SPILLED)  # fmt: skip


def spill_tasks(rows: list[int], parallelism: int) -> list[range]:
    """The data files (by their row counts, in the window's order) cut into runs, one spill task each: as many
    runs as :data:`ROWS_PER_SPILL_TASK` asks, at least ``parallelism`` (never more than files), cut where the
    rows so far pass an equal share. Runs keep the files' order, so a bucket's rows come in the same order as with
    a task per file."""
    if not rows:
        return []
    total = sum(rows)
    n = min(len(rows), max(parallelism, -(-total // ROWS_PER_SPILL_TASK)))
    runs, start, seen = [], 0, 0
    for i, r in enumerate(rows):
        seen += r
        left = len(rows) - i - 1  # files after this one: enough for the runs still to come
        if len(runs) < n - 1 and (seen * n >= total * (len(runs) + 1) or left == n - 1 - len(runs)):
            runs.append(range(start, i + 1))
            start = i + 1
    runs.append(range(start, len(rows)))
    return runs


def _spill_files_fn(scratch: str, root: str, files: list[list[str]], n: int, *, pairs: bool):  # noqa: ANN202
    """``mapInArrow`` over ``spark.range`` ids: each id is the run of data files ``files[id]`` (relative to
    ``root``), spilled in order into one set of bucket files."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        fs, base = fr.fs_path(scratch)
        rfs, rbase = fr.fs_path(root)
        schema = _spill_schema()
        out = _BucketFiles(fs, base, "commits", n, pairs=pairs)
        for rb in batches:
            for path in (f"{rbase}/{f}" for i in rb.column(0).to_pylist() for f in files[i]):
                with rfs.open_input_file(path) as fh:  # one handle: the schema, then the file read with dictionaries
                    names = pq.read_schema(fh).names
                    pf = pq.ParquetFile(fh, read_dictionary=[c for c in (*DICTIONARY_COLUMNS, "txn_state")
                                                             if c in names])
                    cols = [c for c in _READ if c in names]
                    for g in range(pf.num_row_groups):
                        out.add(commit_file_rows(pf.read_row_group(g, columns=cols, use_threads=False), schema))
        yield out.close()

    return run


def _spill_rows_fn(scratch: str, folder: str, n: int, *, pairs: bool, conform: bool):  # noqa: ANN202
    """``mapInArrow`` over Spark rows (the lookback commits, or the side table) into ``folder``'s buckets."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, base = fr.fs_path(scratch)
        schema = _spill_schema() if conform else None
        out = _BucketFiles(fs, base, folder, n, pairs=pairs)
        for rb in batches:
            t = pa.Table.from_batches([rb])
            out.add(t.select(list(ROWS_COLUMNS)).cast(schema) if schema is not None else t)
        yield out.close()

    return run


def _read_ipc(fs: Any, base: str, paths: Iterable[str]) -> pa.Table | None:
    import pyarrow.ipc as ipc

    tables = [ipc.open_stream(fs.open_input_file(f"{base}/{p}")).read_all() for p in paths]
    return pa.concat_tables(tables).combine_chunks() if tables else None


def _bucket_fn(scratch: str, buckets: list[int], rows: dict[int, list[str]], side: dict[int, list[str]],
               side_schema: pa.Schema, *, tolerance_ms: int, fencing: bool, resets: bool,
               topic_created: Mapping[str, int] | None = None):  # noqa: ANN202
    """``mapInArrow`` over ``spark.range`` ids: the findings of bucket ``buckets[id]``'s (topic, partition)s."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        fs, base = fr.fs_path(scratch)
        for rb in batches:
            for i in rb.column(0).to_pylist():
                k = buckets[i]
                commits = _read_ipc(fs, base, rows.get(k, ()))
                if commits is None:
                    continue
                sides = _read_ipc(fs, base, side.get(k, ()))
                sides = side_schema.empty_table() if sides is None else sides
                by_key: dict[tuple[Any, Any], list[int]] = {}
                for j, tp in enumerate(zip(sides.column("topic").to_pylist(), sides.column("partition").to_pylist(),
                                           strict=True)):
                    by_key.setdefault(tp, []).append(j)
                commits, bounds = fr.key_groups(commits)
                found: list[Any] = []
                for lo, hi in bounds:
                    part = commits.slice(lo, hi - lo)  # strings still dictionary-encoded: the pass ranks them
                    tp = (part.column("topic")[0].as_py(), part.column("partition")[0].as_py())
                    right = sides.take(pa.array(by_key.get(tp, []), pa.int64()))
                    found += run_commit_pass(part, right, tolerance_ms=tolerance_ms, fencing=fencing, resets=resets,
                                             topic_created=topic_created)
                yield from fr.findings_table(found).to_batches()

    return run


# -------------------------------------------------------------------------------------- driver side


class CommitSpill:
    """The commit pass over bucketed Arrow files (module docstring); :meth:`plan` says whether it applies."""

    def __init__(self, spark: SparkSession, scratch: str, root: str, files: list[str], spark_rows: DataFrame | None,
                 buckets: int, file_rows: list[int]) -> None:
        self.spark, self.scratch, self.root, self.files = spark, scratch, root, files
        self.spark_rows, self.buckets, self.file_rows = spark_rows, buckets, file_rows  # file_rows: per file
        self.rows_spilled: int | None = None  # the live commits spilled (once :meth:`findings` ran)

    @classmethod
    def plan(cls, spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
             state: fr.InputState | None = None, *, min_rows: int | None = None) -> CommitSpill | None:
        """The spill of the window's commits, or None where the Spark cogroup runs: the delta-spark back end,
        a catalog table, escaped file names, or fewer than :data:`MIN_ROWS` (more than :data:`MAX_ROWS`)
        commits in the files."""
        from ..session import default_parallelism
        from ..sink import table_location

        listed = fr.sink_files(spark, config, "offset_commits", cluster, window)
        if listed is None or not listed[0]:  # only Spark reads it, or no commits were ever written
            return None
        root, found = listed
        files, early = fr.split_window("offset_commits", found, window, state)
        rows = sum(f.rows for f in files)
        if not (MIN_ROWS if min_rows is None else min_rows) <= rows <= MAX_ROWS or any("%" in f.path for f in files):
            return None
        spark_rows = None if early is None else commit_rows(read_commits(spark, config, cluster, early, state))
        parent = f"{table_location('offset_commits', config)}/{SCRATCH_DIR}"
        sweep_scratch(parent)
        stamp = dt.datetime.now(dt.timezone.utc).strftime(_STAMP)
        scratch = f"{parent}/{stamp}-{uuid.uuid4().hex}"
        buckets = max(default_parallelism(spark), -(-rows // ROWS_PER_BUCKET))
        return cls(spark, scratch, root, [f.path for f in files], spark_rows, buckets, [f.rows for f in files])

    def findings(self, lineage_df: DataFrame, groups: DataFrame | None, *, tolerance_ms: int, fencing: bool = True,
                 resets: bool = True, topic_created: Mapping[str, int] | None = None) -> DataFrame:
        """F2/F4 and S1/S2 findings, as :func:`.commit_pass.commit_findings` (runs the spill now; the
        bucket pass runs when the frame is; ``topic_created`` goes to the bucket tasks in their closure)."""
        from pyspark.sql import functions as F
        from pyspark.sql.pandas.types import to_arrow_schema

        from jobs.frames import union_all
        from jobs.fs import resolve

        from ..ingest._spark import to_spark_schema
        from ..session import default_parallelism

        spilled_schema = to_spark_schema(_SPILLED)
        want_pairs = resets and groups is not None
        n = self.buckets
        runs = [[self.files[i] for i in run]
                for run in spill_tasks(self.file_rows, default_parallelism(self.spark))]
        parts = [self.spark.range(len(runs), numPartitions=max(1, len(runs)))
                 .mapInArrow(_spill_files_fn(self.scratch, self.root, runs, n, pairs=want_pairs),
                             spilled_schema)]  # fmt: skip
        if self.spark_rows is not None:
            parts.append(self.spark_rows.mapInArrow(
                _spill_rows_fn(self.scratch, "commits", n, pairs=want_pairs, conform=True), spilled_schema))
        written = [r.asDict() for r in union_all(parts).collect()]
        self.rows_spilled = sum(w["rows"] for w in written if w["kind"] == "rows")
        side = lineage_df.withColumn("_k", F.lit(0))
        pair_files = [w["path"] for w in written if w["kind"] == "pairs"]
        if want_pairs and pair_files:
            at = resolve(self.scratch).spark
            pairs = self.spark.read.parquet(*[f"{at}/{p}" for p in pair_files]).select(*_PAIRS).distinct()
            recs = pairs.join(group_records(groups), "group_id").withColumn("_k", F.lit(1))
            side = side.unionByName(recs, allowMissingColumns=True)
        side_written = [r.asDict() for r in side.mapInArrow(
            _spill_rows_fn(self.scratch, "side", n, pairs=False, conform=False), spilled_schema).collect()]
        rows, sides = _by_bucket(written), _by_bucket(side_written)
        wanted = sorted(rows)
        fn = _bucket_fn(self.scratch, wanted, rows, sides, to_arrow_schema(side.schema), tolerance_ms=tolerance_ms,
                        fencing=fencing, resets=resets, topic_created=topic_created)  # fmt: skip
        # a task per bucket, without a shuffle (spark.range's slices; AQE would merge a small shuffle's)
        return (self.spark.range(len(wanted), numPartitions=max(1, len(wanted)))
                .mapInArrow(fn, fr.findings_spark_schema()))

    def close(self) -> None:
        """Remove the scratch folder (best effort: a later run's folder is a different token)."""
        try:
            fs, path = fr.fs_path(self.scratch)
            fs.delete_dir(path)
        except Exception:  # noqa: BLE001, S110 - nothing to remove, or already gone
            pass


def sweep_scratch(parent: str, *, older_than: dt.timedelta = SCRATCH_TTL) -> list[str]:
    """Remove the scratch folders under ``parent`` created more than ``older_than`` ago (a run killed before
    :meth:`CommitSpill.close`; a live run's folder is younger). The time is the one in the folder's name (S3
    and GCS list folders without one). Best effort; the removed paths."""
    import pyarrow.fs as pafs

    removed: list[str] = []
    try:
        fs, path = fr.fs_path(parent)
        infos = fs.get_file_info(pafs.FileSelector(path, allow_not_found=True))
    except Exception:  # noqa: BLE001 - nothing to sweep
        return removed
    cutoff = dt.datetime.now(dt.timezone.utc) - older_than
    for info in infos:
        if info.type != pafs.FileType.Directory:
            continue
        try:
            made = dt.datetime.strptime(info.base_name.split("-", 1)[0], _STAMP).replace(tzinfo=dt.timezone.utc)
        except ValueError:  # not a folder this module names
            continue
        if made < cutoff:
            try:
                fs.delete_dir(info.path)
                removed.append(info.path)
            except Exception:  # noqa: BLE001, S112 - another run removed it
                continue
    return removed


def _by_bucket(written: list[dict[str, Any]]) -> dict[int, list[str]]:
    out: dict[int, list[str]] = {}
    for w in written:
        if w["kind"] == "rows":
            out.setdefault(int(w["bucket"]), []).append(w["path"])
    return out
