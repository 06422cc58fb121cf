"""The decode passes whose tasks write their table's Parquet files themselves (delta-rs sink).

Where the sink stages Parquet files and commits them with delta-rs (:func:`jobs.sink.adopts_files`), a
:class:`PassFiles` is a :class:`jobs.sink.FileSource`: each task decodes its input row (a file, or a byte or
line range of one) once and

- writes the table's rows with pyarrow into the sink's staging folder, one file per input row and
  ``event_date`` (Hive folders ``cluster=…/event_date=…``, as Spark would name them), dropping the rows dated
  outside the days the write covers, as ``jobs.ingest._dated`` does in Spark;
- writes every other row (quarantine, stats, and what the table's Spark side still needs) to
  ``<staging>/_side/rows/``, read back by Spark as the side rows (:attr:`PassFiles.side`).

Two passes are such sources: the offsets pass writes ``offset_commits`` (:mod:`.commit_files`) and the
capture pass ``metadata_observations`` (:class:`.metadata.CaptureFiles`). The JVM then never holds those
rows: Spark turning 10 M decoded commits from Arrow into rows and those into Parquet took ~2.2 µs of JVM CPU
per commit, pyarrow writes them at ~0.25 µs.

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

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["SIDE_DIR", "WRITTEN", "PassFiles", "RangeFiles", "escape_partition_value", "event_days", "write_pass"]

Decode = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]

#: The folder, inside the staging folder, of the side rows: not the table's (the sink skips ``_…`` folders),
#: and read by Spark through its ``rows`` folder (Spark ignores a path whose own name starts with ``_``).
SIDE_DIR = "_side"
_SIDE_ROWS = f"{SIDE_DIR}/rows"
#: One row per file a task wrote (what the pass's action brings to the driver); of a side file, ``tx``: its rows that
#: are transactional commits (so the driver knows without a Spark job whether their state must be resolved) and
#: ``info``: its info rows (the run's notes: :meth:`PassFiles.info_rows` opens only the files that hold some).
WRITTEN = pa.schema([pa.field("kind", pa.string()), pa.field("path", pa.string()), pa.field("rows", pa.int64()),
                     pa.field("tx", pa.int64()), pa.field("info", pa.int64())])
#: Table rows buffered per date before they are written as a row group.
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


def write_pass(decode: Decode, staging: str, *, cluster: str, days: tuple[dt.date, dt.date], default_date: dt.date,
               file_schema: pa.Schema, side_schema: pa.Schema) -> Decode:
    """The ``mapInArrow`` function of a pass: each input row (a file or range of ``decode``'s input) is
    decoded once. ``decode`` yields table rows (with ``event_ts``) and side rows (batches with a ``row_kind``
    column, in ``side_schema``); the table rows dated in ``days`` are written under ``staging`` in
    ``file_schema``, the side rows under ``staging/_side``. Yields :data:`WRITTEN` rows."""
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
                out = RangeFiles(fs, base, part_dir, key, file_schema, side_schema)
                try:
                    for b in decode(iter([one])):
                        if "row_kind" in b.schema.names:
                            out.side(b)
                        elif b.num_rows:
                            d = event_days(b.column("event_ts"), default_date)
                            out.rows_of(b, d, lo, hi)
                    yield out.close()
                except BaseException:
                    out.abort()
                    raise

    return run


def _dictionary_columns(schema: pa.Schema) -> list[str]:
    """The columns worth dictionary pages: not the 64-bit integers and times (offsets, positions, timestamps:
    nearly all distinct, so the writer builds a dictionary only to drop it; 1 M commits write in ~0.15 s
    instead of ~0.21 s, and the file is no larger)."""
    out = []
    for f in schema:
        if pa.types.is_list(f.type):  # a list's values are its leaf column (e.g. an observation's replicas)
            if not pa.types.is_int64(f.type.value_type):
                out.append(f"{f.name}.list.element")
        elif not (pa.types.is_int64(f.type) or pa.types.is_timestamp(f.type)):
            out.append(f.name)
    return out


class RangeFiles:
    """The files of one input row: one table file per date, one side file; temporary until :meth:`close`."""

    def __init__(self, fs: Any, base: str, part_dir: str, key: str, file_schema: pa.Schema,
                 side_schema: pa.Schema) -> None:
        self.fs, self.base, self.part_dir, self.key, self.schema = fs, base, part_dir, key, file_schema
        self.side_schema = side_schema
        self.buffers: dict[int, list[pa.RecordBatch]] = {}
        self.buffered: dict[int, int] = {}
        self.rows: dict[str, int] = {}
        self.writers: dict[str, tuple[Any, str]] = {}  # final path -> (writer, temporary path)
        self.side_rows: list[pa.RecordBatch] = []
        self.side_buffered = 0
        self.tx = self.info = 0

    def rows_of(self, b: pa.RecordBatch, days: np.ndarray, lo: int, hi: int) -> None:
        if b.schema != self.schema:
            b = pa.Table.from_batches([b]).cast(self.schema).to_batches()[0]
        inside = (days >= lo) & (days <= hi)
        found = np.unique(days[inside]).tolist()
        # a batch of one date (the usual case) is taken whole: a filter copies every column (~0.3 µs a row)
        whole = len(found) == 1 and bool(inside.all())
        for day in found:
            sel = b if whole else b.filter(pa.array(days == day))
            self.buffers.setdefault(day, []).append(sel)
            self.buffered[day] = self.buffered.get(day, 0) + sel.num_rows
            if self.buffered[day] >= ROW_GROUP:
                self._flush(day)

    def side(self, b: pa.RecordBatch) -> None:
        if b.num_rows:
            self.side_rows.append(b)
            self.side_buffered += b.num_rows
            self.tx += pc.sum(pc.equal(b.column("row_kind"), "commit").cast(pa.int64())).as_py() or 0  # offsets
            self.info += pc.sum(pc.equal(b.column("row_kind"), "info").cast(pa.int64())).as_py() or 0  # captures
            if self.side_buffered >= ROW_GROUP:  # e.g. a range of transactional commits only: bounded memory
                self._flush_side()

    def _flush_side(self) -> None:
        if self.side_rows:
            self._write(f"{_SIDE_ROWS}/part-{self.key}.parquet", pa.Table.from_batches(self.side_rows, self.side_schema))
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
                                                    compression="snappy", use_dictionary=_dictionary_columns(table.schema)), tmp)
            self.rows[final] = 0
        self.writers[final][0].write_table(table, row_group_size=ROW_GROUP)
        self.rows[final] += table.num_rows

    def close(self) -> pa.RecordBatch:
        """Write what is buffered, close and rename the files; the :data:`WRITTEN` rows."""
        for day in list(self.buffers):
            self._flush(day)
        self._flush_side()
        kinds, paths, rows, tx, info = [], [], [], [], []
        for final, (writer, tmp) in self.writers.items():
            writer.close()
            self.fs.move(tmp, final)
            side = f"/{SIDE_DIR}/" in final
            kinds.append("side" if side else "table")
            paths.append(final)
            rows.append(self.rows[final])
            tx.append(self.tx if side else 0)
            info.append(self.info if side else 0)
        self.writers = {}
        return pa.RecordBatch.from_arrays([pa.array(kinds, pa.string()), pa.array(paths, pa.string()),
                                           pa.array(rows, pa.int64()), pa.array(tx, pa.int64()),
                                           pa.array(info, pa.int64())], schema=WRITTEN)

    def abort(self) -> None:
        for writer, tmp in self.writers.values():
            try:
                writer.close()
                self.fs.delete_file(tmp)
            except Exception:  # noqa: BLE001, S110 - best effort: the staging folder goes with the write
                pass
        self.writers = {}


class PassFiles(FileSource):
    """A decode pass as a :class:`jobs.sink.FileSource`: the sink calls :meth:`stage`, which runs the pass
    (:meth:`frames`: each input frame with its decode function); then :attr:`side` holds the side rows
    (:attr:`side_schema`), read from the staging folder, which the sink keeps until the write's held rows
    are released. :meth:`after` gives further rows for the sink to add, if any."""

    side_schema: pa.Schema

    def __init__(self, spark: SparkSession, *, cluster: str, days: tuple[dt.date, dt.date],
                 default_date: dt.date) -> None:
        self._spark = spark
        self.cluster, self.days, self.default_date = cluster, days, default_date
        self.side: DataFrame | None = None
        self.written: list[dict[str, Any]] = []
        self.staging: str | None = None

    @property
    def sparkSession(self) -> SparkSession:  # noqa: N802 - the DataFrame attribute it stands in for
        return self._spark

    @property
    def keep_staging(self) -> bool:
        return True  # the side rows are read from it until the run's state is released

    def frames(self) -> list[tuple[DataFrame, Decode]]:
        """The input rows (one per file or range) and the function that decodes them."""
        raise NotImplementedError

    def after(self, staging: str, file_schema: pa.Schema) -> DataFrame | None:
        """Further rows in the table's columns (dated) for the sink to write, once :attr:`side` is set (or
        written into ``staging`` here in ``file_schema``, as :class:`RangeFiles`, adding to :attr:`written`)."""
        return None

    def info_rows(self, columns: list[str], limit: int) -> pa.Table:
        """``columns`` of up to ``limit`` info rows (the run's notes), read with pyarrow from the side files that hold
        some (:data:`WRITTEN`'s ``info``; the driver opens no other file): no Spark job over every side row."""
        import pyarrow.parquet as pq

        from jobs.fs import filesystem

        parts, found = [], 0
        holding = [w for w in self.written if w["kind"] == "side" and w.get("info")]
        if self.staging is not None and holding:
            fs, _ = filesystem(self.staging)
            for w in holding:
                with fs.open_input_file(w["path"]) as fh:
                    t = pq.read_table(fh, columns=sorted({"row_kind", *columns}), use_threads=False)
                t = t.filter(pc.equal(t.column("row_kind"), "info")).select(columns)
                parts.append(t)
                found += t.num_rows
                if found >= limit:
                    break
        table = pa.concat_tables(parts) if parts else self.side_schema.empty_table().select(columns)
        return table.slice(0, limit)

    def stage(self, path: str, partition_by: list[str], schema: pa.Schema) -> DataFrame | None:
        """Run the pass into ``path``; what :meth:`after` gives."""
        from jobs.frames import union_all

        from ._spark import to_spark_schema

        if list(partition_by) != ["cluster", "event_date"]:
            raise ValueError(f"a decode pass writes cluster/event_date folders, not {partition_by}")
        file_schema = pa.schema([f for f in schema if f.name not in partition_by])
        self.staging = path
        frames = [frame.mapInArrow(write_pass(decode, path, cluster=self.cluster, days=self.days,
                                              default_date=self.default_date, file_schema=file_schema,
                                              side_schema=self.side_schema),
                                   to_spark_schema(WRITTEN))
                  for frame, decode in self.frames()]
        self.written = [r.asDict() for r in union_all(frames).collect()] if frames else []
        side_schema = to_spark_schema(self.side_schema)
        if any(w["kind"] == "side" for w in self.written):
            self.side = self._spark.read.schema(side_schema).parquet(f"{path}/{_SIDE_ROWS}")
        else:
            self.side = self._spark.createDataFrame([], side_schema)
        return self.after(path, file_schema)
