"""The offsets pass whose tasks write the ``offset_commits`` Parquet files themselves (delta-rs sink).

Where the sink stages Parquet files and commits them with delta-rs (:func:`jobs.sink.adopts_files`), each
task decodes its segment range or dump once (:data:`._kv.ONE_PASS`) and

- writes the non-transactional commits with pyarrow into the sink's staging folder, one file per range and
  ``event_date`` (Hive folders ``cluster=…/event_date=…``, as Spark would name them), dropping the rows dated
  outside the days the write covers, as ``jobs.ingest._dated`` does in Spark;
- writes every other row (transactional commits, markers, groups, quarantine, stats) to
  ``<staging>/_side/rows/``, read back by Spark as the side rows (:attr:`CommitFiles.side`).

The JVM then never holds the commits as rows: Spark turning 10 M decoded commits from Arrow into rows and
those into Parquet took ~2.2 µs of JVM CPU per commit, pyarrow writes them at ~0.25 µs; and the second
decode of every input for the side rows is gone. The transactional commits still get their ``txn_state``
from Spark's window over the markers (:func:`.offsets.transactional_commits`), handed back to the sink to
write into the same folder.

File names are a hash of the task's input row (source, byte or line range) and the date, written under a
temporary ``.…`` name and renamed at the end, so a retried task leaves the same files, not more.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import uuid
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.sink import FileSource

from ._rows import OFFSETS_WORK

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .discover import InputFile

__all__ = ["SIDE_DIR", "WRITTEN", "CommitFiles", "escape_partition_value", "event_days", "write_pass"]

#: The folder, inside the staging folder, of the side rows: not the table's (the sink skips ``_…`` folders),
#: and read by Spark through its ``rows`` folder (Spark ignores a path whose own name starts with ``_``).
SIDE_DIR = "_side"
_SIDE_ROWS = f"{SIDE_DIR}/rows"
#: One row per file a task wrote (what the pass's action brings to the driver); ``tx``: the side rows that are
#: transactional commits (so the driver knows without a Spark job whether their window is needed).
WRITTEN = pa.schema([pa.field("kind", pa.string()), pa.field("path", pa.string()), pa.field("rows", pa.int64()),
                     pa.field("tx", pa.int64())])
#: Commits buffered per date before they are written as a row group.
ROW_GROUP = 1 << 18
_DAY_US = 86_400_000_000
_EPOCH = dt.date(1970, 1, 1)
# the characters Spark escapes in a partition folder's value (ExternalCatalogUtils.escapePathName)
_ESCAPED = frozenset('"#%\'*/:=?\\\x7f{[]^') | frozenset(chr(c) for c in range(1, 32))


def escape_partition_value(value: str) -> str:
    """A partition value as Spark writes it in a folder name (``%XX`` for the characters it escapes)."""
    return "".join(f"%{ord(c):02X}" if c in _ESCAPED else c for c in value)


def event_days(event_ts: pa.Array, default: dt.date) -> np.ndarray:
    """Days since 1970-01-01 of each UTC timestamp (floor, as ``jobs.ingest._event_date``); ``default``
    where null."""
    us = event_ts.cast(pa.int64()).fill_null((default - _EPOCH).days * _DAY_US)
    return np.floor_divide(us.to_numpy(zero_copy_only=False), _DAY_US)


def write_pass(decode: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], staging: str, *,
               cluster: str, days: tuple[dt.date, dt.date], default_date: dt.date,
               file_schema: pa.Schema) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The ``mapInArrow`` function of the pass: each input row (a file or range of ``decode``'s input) is
    decoded once; its commits dated in ``days`` are written under ``staging`` in ``file_schema``, its side
    rows under ``staging/_side``; yields :data:`WRITTEN` rows."""
    lo, hi = ((d - _EPOCH).days for d in days)
    part_dir = f"cluster={escape_partition_value(cluster)}"

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        from jobs.fs import filesystem

        fs, base = filesystem(staging)
        base = base.rstrip("/")
        for rb in batches:
            for i in range(rb.num_rows):
                one = rb.slice(i, 1)
                key = hashlib.sha1(repr(sorted(one.to_pylist()[0].items())).encode()).hexdigest()[:24]
                out = _RangeFiles(fs, base, part_dir, key, file_schema)
                try:
                    for b in decode(iter([one])):
                        if "row_kind" in b.schema.names:
                            out.side(b)
                        elif b.num_rows:
                            d = event_days(b.column("event_ts"), default_date)
                            out.commits(b, d, lo, hi)
                    yield out.close()
                except BaseException:
                    out.abort()
                    raise

    return run


class _RangeFiles:
    """The files of one input row: one commit file per date, one side file; temporary until :meth:`close`."""

    def __init__(self, fs: Any, base: str, part_dir: str, key: str, file_schema: pa.Schema) -> None:
        self.fs, self.base, self.part_dir, self.key, self.schema = fs, base, part_dir, key, file_schema
        self.buffers: dict[int, list[pa.RecordBatch]] = {}
        self.buffered: dict[int, int] = {}
        self.rows: dict[str, int] = {}
        self.writers: dict[str, tuple[Any, str]] = {}  # final path -> (writer, temporary path)
        self.side_rows: list[pa.RecordBatch] = []
        self.side_buffered = 0
        self.tx = 0

    def commits(self, b: pa.RecordBatch, days: np.ndarray, lo: int, hi: int) -> None:
        if b.schema != self.schema:
            b = pa.Table.from_batches([b]).cast(self.schema).to_batches()[0]
        inside = (days >= lo) & (days <= hi)
        for day in np.unique(days[inside]).tolist():
            sel = b.filter(pa.array(days == day))
            self.buffers.setdefault(day, []).append(sel)
            self.buffered[day] = self.buffered.get(day, 0) + sel.num_rows
            if self.buffered[day] >= ROW_GROUP:
                self._flush(day)

    def side(self, b: pa.RecordBatch) -> None:
        if b.num_rows:
            self.side_rows.append(b)
            self.side_buffered += b.num_rows
            self.tx += pc.sum(pc.equal(b.column("row_kind"), "commit").cast(pa.int64())).as_py() or 0
            if self.side_buffered >= ROW_GROUP:  # e.g. a range of transactional commits only: bounded memory
                self._flush_side()

    def _flush_side(self) -> None:
        if self.side_rows:
            self._write(f"{_SIDE_ROWS}/part-{self.key}.parquet", pa.Table.from_batches(self.side_rows, OFFSETS_WORK))
        self.side_rows, self.side_buffered = [], 0

    def _flush(self, day: int) -> None:
        date = (_EPOCH + dt.timedelta(days=day)).isoformat()
        table = pa.Table.from_batches(self.buffers.pop(day), self.schema)
        self.buffered[day] = 0
        self._write(f"{self.part_dir}/event_date={date}/part-{self.key}.parquet", table)

    def _write(self, rel: str, table: pa.Table) -> None:
        import pyarrow.parquet as pq

        final = f"{self.base}/{rel}"
        if final not in self.writers:
            folder, name = final.rsplit("/", 1)
            self.fs.create_dir(folder, recursive=True)
            tmp = f"{folder}/.{name}.{uuid.uuid4().hex}.tmp"
            self.writers[final] = (pq.ParquetWriter(self.fs.open_output_stream(tmp), table.schema,
                                                    compression="snappy"), tmp)
            self.rows[final] = 0
        self.writers[final][0].write_table(table, row_group_size=ROW_GROUP)
        self.rows[final] += table.num_rows

    def close(self) -> pa.RecordBatch:
        """Write what is buffered, close and rename the files; the :data:`WRITTEN` rows."""
        for day in list(self.buffers):
            self._flush(day)
        self._flush_side()
        kinds, paths, rows, tx = [], [], [], []
        for final, (writer, tmp) in self.writers.items():
            writer.close()
            self.fs.move(tmp, final)
            side = f"/{SIDE_DIR}/" in final
            kinds.append("side" if side else "commits")
            paths.append(final)
            rows.append(self.rows[final])
            tx.append(self.tx if side else 0)
        self.writers = {}
        return pa.RecordBatch.from_arrays([pa.array(kinds, pa.string()), pa.array(paths, pa.string()),
                                           pa.array(rows, pa.int64()), pa.array(tx, pa.int64())], schema=WRITTEN)

    def abort(self) -> None:
        for writer, tmp in self.writers.values():
            try:
                writer.close()
                self.fs.delete_file(tmp)
            except Exception:  # noqa: BLE001, S110 - best effort: the staging folder goes with the write
                pass
        self.writers = {}


class CommitFiles(FileSource):
    """The offsets inputs as a :class:`jobs.sink.FileSource` of ``offset_commits``: the sink calls
    :meth:`stage`, which runs the one pass; then :attr:`side` holds the side rows (``OFFSETS_WORK``), read
    from the staging folder, which the sink keeps until the write's held rows are released."""

    def __init__(self, spark: SparkSession, files: list[InputFile], *, cluster: str, days: tuple[dt.date, dt.date],
                 default_date: dt.date, dated: Callable[[DataFrame], DataFrame], split_bytes: int,
                 parallelism: int) -> None:
        self._spark = spark
        self.files, self.cluster, self.days, self.default_date = files, cluster, days, default_date
        self.dated, self.split_bytes, self.parallelism = dated, split_bytes, parallelism
        self.side: DataFrame | None = None
        self.written: list[dict[str, Any]] = []

    @property
    def sparkSession(self) -> SparkSession:  # noqa: N802 - the DataFrame attribute it stands in for
        return self._spark

    @property
    def keep_staging(self) -> bool:
        return True  # the side rows are read from it until the run's state is released

    def stage(self, path: str, partition_by: list[str], schema: pa.Schema) -> DataFrame | None:
        """Run the pass into ``path``; the transactional commits (dated) for the sink to add."""
        from jobs.frames import union_all

        from . import offsets
        from ._spark import to_spark_schema

        if list(partition_by) != ["cluster", "event_date"]:
            raise ValueError(f"the offsets pass writes cluster/event_date folders, not {partition_by}")
        file_schema = pa.schema([f for f in schema if f.name not in partition_by])
        frames = [frame.mapInArrow(write_pass(both, path, cluster=self.cluster, days=self.days,
                                              default_date=self.default_date, file_schema=file_schema),
                                   to_spark_schema(WRITTEN))
                  for frame, _, _, both in offsets.input_frames(self._spark, self.files, split_bytes=self.split_bytes,
                                                                parallelism=self.parallelism)]
        self.written = [r.asDict() for r in union_all(frames).collect()] if frames else []
        side_schema = to_spark_schema(OFFSETS_WORK)
        if any(w["kind"] == "side" for w in self.written):
            self.side = self._spark.read.schema(side_schema).parquet(f"{path}/{_SIDE_ROWS}")
        else:
            self.side = self._spark.createDataFrame([], side_schema)
        if not sum(w["tx"] for w in self.written):
            return None
        return self.dated(offsets.transactional_commits(self.side))
