"""Broker log-dir snapshots -> ``epoch_lineage`` and ``record_batches`` (executor + Spark parts).

Layout: ``broker=<id>/snapshot=<YYYYMMDDTHHMMSSZ>/<topic>-<partition>/leader-epoch-checkpoint`` with,
optionally, ``partition.metadata`` and ``*.log`` segments beside it, and the log-start-offset,
replication-offset (high watermark) and recovery-point checkpoints at the snapshot root.

- :func:`files_frame` sends the small text files to the executors a few thousand per row (an Arrow IPC
  blob of :data:`FILE_SCHEMA` rows): 10^5 checkpoint files cost a few Spark rows and one counts row per
  chunk, not a Spark row, a pickled driver tuple and a stats row each.
- :func:`decode_logdir_files` parses them (one ``file`` unit each; a malformed one is
  quarantined with the failing line as ``position`` and the job goes on — rule L1 reads quarantine).
- :func:`decode_logdir_segments` reads the batch *headers* of the segments (unit ``batch``; a final batch
  cut short by the end of the file, as in a copy of the active segment, is no unit but ``n_unpaired`` — in the
  partition's last segment; in a rolled one it is a quarantined batch, bytes lost — and a zero fill after the
  last batch is nothing).
- :func:`lineage_frame` joins them in Spark: one row per replica snapshot (per parsed
  leader-epoch-checkpoint), with the topic id, the root checkpoints' offsets for that partition and the
  log end offset (last offset + 1 of the segments present).
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from epochlib import checkpoint
from epochlib.errors import DecodeError
from jobs.fs import open_reader

from ._rows import RAW_MAX, SIDE_FIELDS, RowBuffer, make_batch, ms_in_range, side_row, stats_row
from .discover import LEC, PMETA, ROOT_CHECKPOINTS, ROOT_CKPT
from .ranges import read_range, segment_tables

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .discover import InputFile

__all__ = ["CHUNK_SCHEMA", "FILES_PER_CHUNK", "FILE_SCHEMA", "WORK", "batches_frame", "decode_logdir_files",
           "decode_logdir_segments", "files_frame", "lineage_frame"]

_ENTRY = pa.struct([pa.field("epoch", pa.int32()), pa.field("start_offset", pa.int64())])

WORK = pa.schema([
    *SIDE_FIELDS,
    pa.field("broker", pa.string()),
    pa.field("snapshot_ms", pa.int64()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    # leader-epoch-checkpoint
    pa.field("entries", pa.list_(_ENTRY)),
    pa.field("checkpoint_version", pa.int32()),
    # partition.metadata
    pa.field("topic_id", pa.string()),
    # root checkpoints: one row per entry
    pa.field("column", pa.string()),
    pa.field("offset", pa.int64()),
    # batch headers
    pa.field("base_offset", pa.int64()),
    pa.field("last_offset", pa.int64()),
    pa.field("partition_leader_epoch", pa.int32()),
    pa.field("magic", pa.int8()),
    pa.field("compression", pa.string()),
    pa.field("is_transactional", pa.bool_()),
    pa.field("is_control", pa.bool_()),
    pa.field("producer_id", pa.int64()),
    pa.field("records_count", pa.int32()),
    pa.field("max_timestamp", pa.int64()),
    pa.field("size", pa.int32()),
])

FILE_SCHEMA = pa.schema([
    pa.field("source", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("form", pa.string()),
    pa.field("name", pa.string()),
    pa.field("broker", pa.string()),
    pa.field("snapshot_ms", pa.int64()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
])


#: At most this many files per row of :func:`files_frame` (more rows only when there are more files).
FILES_PER_CHUNK = 32768

#: A row of :func:`files_frame`: ``files`` is an Arrow IPC stream of :data:`FILE_SCHEMA` rows.
CHUNK_SCHEMA = pa.schema([pa.field("chunk", pa.int32()), pa.field("files", pa.binary())])


def file_chunks(files: Sequence[InputFile], parallelism: int) -> list[tuple[int, bytes]]:
    """The files as ``(chunk, IPC blob)`` rows: at least ``2 x parallelism`` chunks (when there are that many
    files) so every core gets work, and none above :data:`FILES_PER_CHUNK` files."""
    from ._spark import rows_of

    if not files:
        return []
    table = pa.Table.from_pylist(rows_of(files, FILE_SCHEMA), schema=FILE_SCHEMA)
    n = max(min(len(files), 2 * parallelism), math.ceil(len(files) / FILES_PER_CHUNK))
    size = math.ceil(len(files) / n)
    out = []
    for i in range(0, len(files), size):
        sink = pa.BufferOutputStream()
        with pa.ipc.new_stream(sink, FILE_SCHEMA) as w:
            w.write_table(table.slice(i, size))
        out.append((len(out), sink.getvalue().to_pybytes()))
    return out


def files_frame(spark: SparkSession, files: Sequence[InputFile], parallelism: int) -> DataFrame:
    """The checkpoint files as a few :data:`CHUNK_SCHEMA` rows spread over tasks (input of
    :func:`decode_logdir_files`)."""
    from ._spark import spread, to_spark_schema

    rows = file_chunks(files, parallelism)
    df = spark.createDataFrame(rows, to_spark_schema(CHUNK_SCHEMA))
    return spread(spark, df, len(rows), sum(len(blob) for _, blob in rows))


def _file_rows(rb: pa.RecordBatch) -> list[dict]:
    if "files" not in rb.schema.names:  # one row per file (FILE_SCHEMA)
        return rb.to_pylist()
    return [r for blob in rb.column("files").to_pylist() for r in pa.ipc.open_stream(blob).read_all().to_pylist()]


def decode_logdir_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: checkpoint / partition.metadata files (:data:`CHUNK_SCHEMA` rows, or
    :data:`FILE_SCHEMA` rows) -> :data:`WORK` rows, with one counts row per input batch."""
    for rb in batches:
        out = RowBuffer(WORK)
        rows = _file_rows(rb)
        n_bad = n_out = 0
        for row in rows:
            bad, produced = _decode_file(row, out)
            n_bad += bad
            n_out += produced
        if rows:
            out.add(stats_row(rows[0]["source"], "file", len(rows), n_bad, n_out))
        batch = out.flush()
        if batch is not None:
            yield batch


def _read(src: str) -> bytes:
    """A whole small file: a local path straight through ``open`` (the per-file cost of a pyarrow
    filesystem is most of a checkpoint's decode), anything else through :mod:`jobs.fs`."""
    if src.startswith("/"):
        with open(src, "rb") as fh:
            return fh.read()
    with open_reader(src) as r:
        return r.read_all()


def _decode_file(row: dict, out: RowBuffer) -> tuple[int, int]:
    """Decode one file into ``out``; returns (units quarantined, lineage rows produced)."""
    src, form = row["source"], row["form"]
    ctx = {"source": src, "broker": row["broker"], "snapshot_ms": row["snapshot_ms"], "topic": row["topic"],
           "partition": row["partition"]}
    data = b""
    try:
        data = _read(src)
        if form == LEC:
            ck = checkpoint.parse_leader_epoch_checkpoint(data)
            out.add({**ctx, "row_kind": "lineage", "checkpoint_version": ck.version,
                     "entries": [{"epoch": e, "start_offset": o} for e, o in ck.entries]})
            n_out = 1
        elif form == PMETA:
            pm = checkpoint.parse_partition_metadata(data)
            out.add({**ctx, "row_kind": "topic_id", "topic_id": pm.topic_id})
            n_out = 0
        elif form == ROOT_CKPT:
            ck = checkpoint.parse_offset_checkpoint(data)
            column = ROOT_CHECKPOINTS[row["name"]]
            for (topic, partition), offset in ck.entries.items():
                out.add({**ctx, "row_kind": "offset", "topic": topic, "partition": partition,
                         "column": column, "offset": offset})
            n_out = 0
        else:  # pragma: no cover - discovery only sends the forms above
            raise DecodeError(f"unexpected file form {form}", 0)
    except DecodeError as e:
        out.add(side_row(src, e.offset, "file", f"{row.get('name') or form}: {e.reason} at line {e.offset}",
                         data[:RAW_MAX], q_ms=row["snapshot_ms"], **{k: ctx[k] for k in ctx if k != "source"}))
        return 1, 0
    except OSError as e:
        out.add(side_row(src, 0, "file", f"unreadable: {e}", None, q_ms=row["snapshot_ms"]))
        return 1, 0
    return 0, n_out


_BATCH_COLUMNS = ("position", "base_offset", "last_offset", "partition_leader_epoch", "magic", "compression",
                  "is_transactional", "is_control", "producer_id", "records_count", "max_timestamp", "size")


def decode_logdir_segments(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: byte ranges of snapshot segments -> batch header rows (:data:`WORK`)."""
    for rb in batches:
        for row in rb.to_pylist():
            src, start = row["source"], row["start"]
            ctx = {"source": src, "broker": row["broker"], "snapshot_ms": row["snapshot_ms"],
                   "topic": row["topic"], "partition": row["partition"]}
            out = RowBuffer(WORK)
            try:
                buf = read_range(row)
            except OSError as e:
                out.add(side_row(src, start, "file", f"unreadable: {e}", q_ms=row["snapshot_ms"]))
                out.add(stats_row(src, "file", 1, 1, 0))
                yield out.flush()
                continue
            # headers only: one piece; the last range of a file runs to its end (a live copy's cut batch, a zero fill)
            heads, _, tail = next(segment_tables(buf, start, with_records=False,
                                                 segment_base_offset=row.get("base_offset"),
                                                 ends_file=row["end"] == row["size"],
                                                 last_segment=row.get("last_segment")))
            del buf
            heads = _date_checked(heads)
            err = pc.is_valid(heads.column("error"))
            bad = heads.filter(err)
            for h in bad.select(["position", "error", "raw"]).to_pylist():
                out.add(side_row(src, h["position"], "batch", h["error"], h["raw"], q_ms=row["snapshot_ms"],
                                 **{k: ctx[k] for k in ctx if k != "source"}))
            good = heads.filter(pc.invert(err))
            m = good.num_rows
            if m:
                cols = {name: good.column(name) for name in _BATCH_COLUMNS}
                cols.update({"row_kind": pa.array(["batch"] * m), "source": pa.array([src] * m),
                             "broker": pa.array([row["broker"]] * m, pa.string()),
                             "snapshot_ms": pa.array([row["snapshot_ms"]] * m, pa.int64()),
                             "topic": pa.array([row["topic"]] * m, pa.string()),
                             "partition": pa.array([row["partition"]] * m, pa.int32())})
                yield make_batch(WORK, cols, m)
            # an incomplete final entry is a limit of the copy: no unit (not read, not quarantined), counted apart
            out.add(stats_row(src, "batch", heads.num_rows, bad.num_rows, m, int(tail is not None)))
            yield out.flush()


def _date_checked(heads: pa.RecordBatch) -> pa.RecordBatch:
    """Batch headers with an ``error`` for each good batch whose max timestamp no date can hold (a
    bad value of that batch: quarantined, not a failed run in ``timestamp_millis``)."""
    ok = ms_in_range(heads.column("max_timestamp"))
    if pc.all(ok).as_py():
        return heads
    ts = heads.column("max_timestamp").to_pylist()
    errs = [e if e is not None or good else f"max timestamp {t} ms is outside 0001-01-01..9999-12-31"
            for e, good, t in zip(heads.column("error").to_pylist(), ok.to_pylist(), ts, strict=True)]
    i = heads.schema.get_field_index("error")
    return heads.set_column(i, "error", pa.array(errs, heads.schema.field("error").type))


# ----------------------------------------------------------------------------------- Spark side


def batches_frame(work: DataFrame) -> DataFrame:
    """``record_batches`` columns (minus cluster/event_date)."""
    from pyspark.sql import functions as F

    b = work.filter(F.col("row_kind") == "batch")
    event_ms = F.when(F.col("max_timestamp") >= 0, F.col("max_timestamp")).otherwise(F.col("snapshot_ms"))
    return b.select(
        F.col("broker").cast("int").alias("broker"), F.timestamp_millis("snapshot_ms").alias("snapshot_ts"),
        "topic", "partition", "source", "position", "base_offset", "last_offset", "partition_leader_epoch",
        "magic", "compression", "is_transactional", "is_control", "producer_id", "records_count",
        F.when(F.col("max_timestamp") >= 0, F.timestamp_millis("max_timestamp")).alias("max_timestamp"),
        "size", F.timestamp_millis(event_ms).alias("event_ts"),
    )


def lineage_frame(work: DataFrame) -> DataFrame:
    """``epoch_lineage`` columns (minus cluster/event_date): one row per parsed leader-epoch-checkpoint."""
    from pyspark.sql import functions as F

    keys = ["broker", "snapshot_ms", "topic", "partition"]
    lec = work.filter(F.col("row_kind") == "lineage").select(*keys, "entries", "checkpoint_version", "source")
    # what the replica's other files say of it, in one aggregation (three aggregations and joins were three
    # scans and, on small inputs, three broadcast jobs each time the table or its lookback state was computed):
    # the id from partition.metadata, the root checkpoints' offsets, the log end from the segments' batches
    kind = F.col("row_kind")
    facts = work.filter(kind.isin("topic_id", "offset", "batch")).groupBy(*keys).agg(
        F.first(F.when(kind == "topic_id", F.col("topic_id")), ignorenulls=True).alias("topic_id"),
        *(F.max(F.when((kind == "offset") & (F.col("column") == name), F.col("offset"))).alias(name)
          for name in ROOT_CHECKPOINTS.values()),
        # null when the last offset is Long.MAX (a segment named near it can hold one): no log end fits a long
        F.try_add(F.max(F.when(kind == "batch", F.col("last_offset"))), F.lit(1).cast("long"))
        .alias("log_end_offset"),
    )
    j = lec.join(facts, keys, "left")
    return j.select(
        F.col("broker").cast("int").alias("broker"), F.timestamp_millis("snapshot_ms").alias("snapshot_ts"),
        "topic", "partition", "topic_id", "entries", "checkpoint_version", "log_start_offset", "high_watermark",
        "recovery_point", "log_end_offset", "source", F.timestamp_millis("snapshot_ms").alias("event_ts"),
    )
