"""``__consumer_offsets`` evidence -> ``offset_commits`` and ``group_metadata`` (executor + Spark parts).

Inputs (DESIGN.md): raw segments, Parquet/JSONL dumps with binary key/value (the schema of Spark's Kafka
source; base64 strings in JSONL; timestamps ISO-8601 or epoch ms) and tool text dumps.

Executor side (plain functions over Arrow batches, testable without Spark):

- segments are cut into byte ranges on batch boundaries (:func:`plan_segment_ranges`, reading only entry
  headers, in executors) and every range is decoded by :func:`decode_segment_ranges` with
  :mod:`epochlib.records` and :func:`epochlib.coordinator.decode_offsets_arrow`;
- Parquet and JSONL dumps by :func:`decode_dump_files` (Arrow columns straight into the codec);
- text dumps by :func:`decode_text_files` (:mod:`epochlib.dumps` iterators).

Spark side: :func:`offsets_work` builds one work DataFrame (schema :data:`WORK`), and
:func:`commits_frame` / :func:`groups_frame` shape the silver tables; transactional commits get their
``txn_state`` from the next COMMIT/ABORT marker of the same producer in the same log partition (a window,
not a driver loop).

Units: segment batches (``batch``; a bad CRC or a torn tail is one quarantined batch), records inside good
batches whose key/value cannot be decoded (``record``), Parquet rows (``record``), JSONL and text lines
(``line``).
"""

from __future__ import annotations

import base64
import binascii
import json
import re
from collections.abc import Iterator
from datetime import datetime, timezone
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from epochlib import coordinator, records
from jobs.schemas import arrow_schema

from ._io import open_reader
from ._rows import RAW_MAX, SIDE_FIELDS, RowBuffer, make_batch, side_row, stats_row

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "COMMITS",
    "RANGE_SCHEMA",
    "WORK",
    "commits_frame",
    "decode_dump_files",
    "decode_segment_ranges",
    "decode_text_files",
    "groups_frame",
    "offsets_frames",
    "plan_segment_ranges",
]

_ASSIGNED = pa.struct([pa.field("topic", pa.string()), pa.field("partitions", pa.list_(pa.int32()))])
_MEMBER = pa.struct([
    pa.field("member_id", pa.string()),
    pa.field("group_instance_id", pa.string()),
    pa.field("client_id", pa.string()),
    pa.field("client_host", pa.string()),
    pa.field("assigned_partitions", pa.list_(_ASSIGNED)),
])

#: The work schema of every offsets decode function.
WORK = pa.schema([
    *SIDE_FIELDS,
    pa.field("broker", pa.string()),
    pa.field("log_partition", pa.int32()),
    pa.field("log_offset", pa.int64()),
    pa.field("record_ms", pa.int64()),
    pa.field("batch_leader_epoch", pa.int32()),
    pa.field("producer_id", pa.int64()),
    pa.field("is_transactional", pa.bool_()),
    pa.field("control_type", pa.string()),
    pa.field("key_type", pa.int16()),
    pa.field("value_version", pa.int16()),
    pa.field("is_tombstone", pa.bool_()),
    pa.field("group_id", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("committed_offset", pa.int64()),
    pa.field("leader_epoch", pa.int32()),
    pa.field("metadata", pa.string()),
    pa.field("commit_ms", pa.int64()),
    pa.field("expire_ms", pa.int64()),
    pa.field("record_type", pa.string()),
    pa.field("protocol_type", pa.string()),
    pa.field("generation", pa.int32()),
    pa.field("protocol", pa.string()),
    pa.field("leader", pa.string()),
    pa.field("state_ms", pa.int64()),
    pa.field("member_count", pa.int32()),
    pa.field("members", pa.list_(_MEMBER)),
])

#: What the *commit* pass emits: the ``offset_commits`` columns minus ``cluster``/``event_date`` (Spark adds
#: those), for the non-transactional commits only (``txn_state`` = ``none``). Everything else a decoder
#: finds (transactional commits, markers, group records, quarantine and stats rows) goes to the *side*
#: pass in the :data:`WORK` schema, which stays small.
COMMITS = pa.schema([f for f in arrow_schema("offset_commits") if f.name not in ("cluster", "event_date")])
_TS = COMMITS.field("commit_ts").type

#: Input of :func:`plan_segment_ranges` / :func:`decode_segment_ranges`: one row per file or byte range.
RANGE_SCHEMA = pa.schema([
    pa.field("source", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("start", pa.int64()),
    pa.field("end", pa.int64()),
    pa.field("target", pa.int64()),
    pa.field("broker", pa.string()),
    pa.field("log_partition", pa.int32()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("snapshot_ms", pa.int64()),
])

#: Input of the per-file decode functions.
FILE_SCHEMA = pa.schema([
    pa.field("source", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("broker", pa.string()),
])

_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake_type_name(record_type: int) -> str:
    """``GroupMetadata`` -> ``group_metadata`` (the ``record_type`` column of ``group_metadata``)."""
    return _CAMEL.sub("_", coordinator.type_name(record_type)).lower()


# ----------------------------------------------------------------------------------- segment ranges


def plan_segment_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: each input file row -> its byte ranges on batch boundaries.

    Files no larger than their ``target`` become one range without being opened; larger ones are walked
    header by header (:func:`epochlib.records.split_points`), reading only the 17-byte entry prefixes.
    An unreadable file becomes one range covering it all, so the decoder reports the error.
    """
    for rb in batches:
        out = []
        for row in rb.to_pylist():
            size, target = row["size"], row["target"]
            ranges: list[tuple[int, int]]
            if size <= target:
                ranges = [(0, size)] if size > 0 else []
            else:
                try:
                    with open_reader(row["source"]) as r:
                        ranges = records.split_points(r.read_at, size, target)
                except OSError:
                    ranges = [(0, size)]
            for start, end in ranges:
                out.append({**row, "start": start, "end": end})
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=RANGE_SCHEMA)


def segment_tables(buf: bytes, base: int, *, with_records: bool = True) -> tuple[pa.RecordBatch,
                                                                                 pa.RecordBatch | None]:
    """Decode a byte range of a segment with the codec's Arrow batch function
    (:func:`epochlib.records.batches_arrow`): (one row per log entry, bad ones with ``error``/``raw``;
    one row per record, ``control_type`` as the marker name ``COMMIT``/``ABORT``/… for control records)."""
    out = records.batches_arrow(buf, base_position=base, with_records=with_records)
    rec = out.records
    if rec is not None and rec.num_rows:
        ct = rec.column("control_type")
        names = pa.array([records.CONTROL_TYPE_NAMES.get(i) for i in range(7)], pa.string())
        valid = pc.and_(pc.greater_equal(ct, 0), pc.less(ct, 7)).fill_null(False)
        named = pc.if_else(valid, pc.take(names, pc.if_else(valid, ct, 0).cast(pa.int32())),
                           pa.scalar(None, pa.string()))
        rec = rec.set_column(rec.schema.get_field_index("control_type"), "control_type", named)
    return out.batches, rec


def decode_segment_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: each byte range of a ``__consumer_offsets`` segment -> :data:`WORK` rows
    (every row kind; the reference shape that the two passes below split between them)."""
    for rb in batches:
        for row in rb.to_pylist():
            yield from _decode_range(row, "work")


#: Rows per Arrow batch handed back to Spark by the commit pass: a 64 MiB range decodes to ~1.2 M rows,
#: and the JVM holds a whole batch off-heap per task; 64 k rows bound that (CPU is the same from 4 k
#: rows to a whole range, measured with bench/bench_ingest.py).
OUT_ROWS = 1 << 16


def _sliced(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    for b in batches:
        if b.num_rows <= OUT_ROWS:
            yield b
        else:
            for i in range(0, b.num_rows, OUT_ROWS):
                yield b.slice(i, OUT_ROWS)


def decode_segment_commits(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function, commit pass: segment ranges -> non-transactional commits in :data:`COMMITS`."""
    for rb in batches:
        for row in rb.to_pylist():
            yield from _sliced(_decode_range(row, "commits"))


def decode_segment_side(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function, side pass: segment ranges -> :data:`WORK` rows without the
    non-transactional commits (those come from :func:`decode_segment_commits`)."""
    for rb in batches:
        for row in rb.to_pylist():
            yield from _decode_range(row, "side")


def _repeat(value: Any, n: int, type_: pa.DataType) -> pa.Array:
    return pa.nulls(n, type_) if value is None else pa.repeat(pa.scalar(value, type_), n)


def _decode_range(row: dict, emit: str = "work") -> Iterator[pa.RecordBatch]:
    source, start, end = row["source"], row["start"], row["end"]
    ctx = {"source": source, "broker": row["broker"], "log_partition": row["log_partition"]}
    side = RowBuffer(WORK)
    try:
        with open_reader(source) as r:
            buf = r.read_at(start, end - start)
    except OSError as e:
        if emit == "commits":
            return
        side.add(side_row(source, start, "file", f"unreadable: {e}", **_ctx(ctx)))
        side.add(stats_row(source, "file", 1, 1, 0))
        yield side.flush()
        return
    heads, rec = segment_tables(buf, start)
    del buf
    n_bad = 0
    if emit != "commits":
        bad = heads.filter(pc.is_valid(heads.column("error")))
        n_bad = bad.num_rows
        for h in bad.select(["position", "error", "raw"]).to_pylist():
            side.add(side_row(source, h["position"], "batch", h["error"], h["raw"], **_ctx(ctx)))
    n_out = 0
    n_rec = n_rec_bad = 0
    if rec is not None and rec.num_rows:
        is_control = rec.column("is_control")
        any_control = pc.any(is_control).as_py()
        if any_control and emit != "commits":
            markers = rec.filter(pc.and_(is_control, pc.is_in(rec.column("control_type"),
                                                              pa.array(["COMMIT", "ABORT"]))))
            if markers.num_rows:
                m = markers.num_rows
                yield make_batch(WORK, {
                    "row_kind": _repeat("marker", m, pa.string()), "source": _repeat(source, m, pa.string()),
                    "position": markers.column("batch_position"),
                    "broker": _repeat(ctx["broker"], m, pa.string()),
                    "log_partition": _repeat(ctx["log_partition"], m, pa.int32()),
                    "log_offset": markers.column("offset"), "record_ms": markers.column("timestamp"),
                    "producer_id": markers.column("producer_id"),
                    "is_transactional": markers.column("is_transactional"),
                    "control_type": markers.column("control_type"),
                }, m)
        data = rec.filter(pc.invert(is_control)) if any_control else rec
        if data.num_rows:
            m = data.num_rows
            ctx_cols = {
                "source": _repeat(source, m, pa.string()),
                "position": data.column("batch_position"),
                "broker": _repeat(ctx["broker"], m, pa.string()),
                "log_partition": _repeat(ctx["log_partition"], m, pa.int32()),
                "log_offset": data.column("offset"), "record_ms": data.column("timestamp"),
                "batch_leader_epoch": data.column("partition_leader_epoch"),
                "producer_id": data.column("producer_id"),
                "is_transactional": data.column("is_transactional"),
            }
            n_rec = m
            for out, nbad, good in _decode_kv(data.column("key"), data.column("value"), ctx_cols,
                                              unit="record", source=source, emit=emit):
                n_out += good
                n_rec_bad += nbad
                if out is not None:
                    yield out
    if emit == "commits":
        return
    side.add(stats_row(source, "batch", heads.num_rows, n_bad, 0))
    side.add(stats_row(source, "record", n_rec, n_rec_bad, n_out))
    yield side.flush()


def _ctx(ctx: dict) -> dict:
    return {"broker": ctx.get("broker"), "log_partition": ctx.get("log_partition")}


# ----------------------------------------------------------------------------------- key/value -> rows


def _decode_offsets(keys: pa.Array, values: pa.Array) -> pa.RecordBatch:
    """The codec's batch function (:func:`epochlib.coordinator.decode_offsets_arrow`)."""
    return coordinator.decode_offsets_arrow(keys, values)


def _arr(a: Any) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def _ms_to_ts(ms: pa.Array) -> pa.Array:
    """Epoch ms -> ``timestamp[us, UTC]`` (as Spark's ``timestamp_millis``; overflow is an error)."""
    return pc.multiply_checked(ms, 1000).cast(_TS)


def commit_batch(cols: dict[str, Any], n: int) -> pa.RecordBatch:
    """:data:`COMMITS` rows (``txn_state`` = ``none``) from :data:`WORK`-named commit columns; absent
    columns are null. The same column rules as the Spark expressions of :func:`commits_frame`."""
    def col(name: str, type_: pa.DataType) -> pa.Array:
        a = cols.get(name)
        if a is None:
            return pa.nulls(n, type_)
        a = _arr(a)
        return a if a.type == type_ else a.cast(type_)

    i64 = pa.int64()
    commit_ms, record_ms, expire_ms = col("commit_ms", i64), col("record_ms", i64), col("expire_ms", i64)
    tomb = col("is_tombstone", pa.bool_())
    null_ms = pa.scalar(None, i64)
    use_record = pc.or_kleene(tomb, pc.or_kleene(pc.is_null(commit_ms), pc.less(commit_ms, 0))).fill_null(False)
    out = {
        "group_id": col("group_id", pa.string()), "topic": col("topic", pa.string()),
        "partition": col("partition", pa.int32()), "committed_offset": col("committed_offset", i64),
        "leader_epoch": col("leader_epoch", pa.int32()), "metadata": col("metadata", pa.string()),
        "commit_ts": _ms_to_ts(commit_ms),
        "expire_ts": _ms_to_ts(pc.if_else(pc.greater_equal(expire_ms, 0), expire_ms, null_ms)),
        "is_tombstone": tomb, "key_type": col("key_type", pa.int16()),
        "value_version": col("value_version", pa.int16()),
        "event_ts": _ms_to_ts(pc.if_else(use_record, record_ms, commit_ms)),
        "log_partition": col("log_partition", pa.int32()), "log_offset": col("log_offset", i64),
        "record_ts": _ms_to_ts(pc.if_else(pc.greater_equal(record_ms, 0), record_ms, null_ms)),
        "batch_leader_epoch": col("batch_leader_epoch", pa.int32()), "producer_id": col("producer_id", i64),
        "txn_state": _repeat("none", n, pa.string()), "source_kind": _repeat("offsets", n, pa.string()),
        "source": col("source", pa.string()), "position": col("position", i64),
    }
    return pa.RecordBatch.from_arrays([out[f.name] for f in COMMITS], schema=COMMITS)


def _is_tx(batch_or_cols: Any, n: int) -> pa.Array:
    a = batch_or_cols.get("is_transactional") if isinstance(batch_or_cols, dict) else \
        batch_or_cols.column("is_transactional")
    if a is None:
        return pa.repeat(pa.scalar(False), n)
    return _arr(a).fill_null(False)


def work_to_commits(batch: pa.RecordBatch | None) -> pa.RecordBatch | None:
    """The non-transactional commit rows of a :data:`WORK` batch as :data:`COMMITS` (None when none)."""
    if batch is None or not batch.num_rows:
        return None
    mask = pc.and_(pc.equal(batch.column("row_kind"), "commit").fill_null(False),
                   pc.invert(_is_tx(batch, batch.num_rows)))
    sel = batch.filter(mask)
    if not sel.num_rows:
        return None
    return commit_batch(dict(zip(sel.schema.names, sel.columns, strict=True)), sel.num_rows)


def work_side(batch: pa.RecordBatch | None) -> pa.RecordBatch | None:
    """A :data:`WORK` batch without its non-transactional commits (None when nothing is left)."""
    if batch is None or not batch.num_rows:
        return None
    keep = pc.or_(pc.not_equal(batch.column("row_kind"), "commit").fill_null(True), _is_tx(batch, batch.num_rows))
    out = batch.filter(keep)
    return out if out.num_rows else None


def _route(gen: Iterator[pa.RecordBatch | None], emit: str) -> Iterator[pa.RecordBatch]:
    """Route the batches of a decode generator to one pass: ``work`` (all), ``commits`` or ``side``."""
    for b in gen:
        if b is None:
            continue
        if emit == "work":
            yield b
        elif b.schema.equals(COMMITS):
            if emit == "commits":
                yield b
        else:
            out = work_to_commits(b) if emit == "commits" else work_side(b)
            if out is not None:
                yield out


def _decode_kv(keys, values, ctx_cols: dict[str, Any], *, unit: str, source: str,
               q_ms=None, emit: str = "work") -> Iterator[tuple[pa.RecordBatch | None, int, int]]:
    """Decode aligned key/value arrays; yields ``(batch, quarantined units, decoded rows)`` pieces.

    ``ctx_cols`` holds per-row context arrays (source, position, log offset …) aligned with the keys.
    Offset commits (types 0/1) take the vectorised path; other record types (group metadata, KIP-848)
    go through the per-record reference decoder (they are few). ``emit``: ``work`` yields every row as
    :data:`WORK`; ``commits`` only the non-transactional commits, as :data:`COMMITS` (no per-record work,
    no counts); ``side`` everything but those, as :data:`WORK`, with the counts of all.
    """
    keys, values = _arr(keys), _arr(values)
    dec = _decode_offsets(keys, values)
    err = dec.column("error")
    rtype = dec.column("record_type")
    n = dec.num_rows
    ok = pc.is_null(err)
    commit_mask = pc.and_(ok, pc.is_in(rtype, pa.array([0, 1], rtype.type))).fill_null(False)
    ctx_arrays = {k: _arr(v) for k, v in ctx_cols.items()}
    n_commit = pc.sum(commit_mask.cast(pa.int64())).as_py() or 0
    if n_commit and emit == "work":
        yield _commit_rows(ctx_arrays, dec, None if n_commit == n else commit_mask, emit), 0, n_commit
    elif n_commit:
        tx = _is_tx(ctx_arrays, n)
        n_tx = pc.sum(pc.and_(commit_mask, tx).cast(pa.int64())).as_py() or 0
        want = n_commit - n_tx if emit == "commits" else n_tx
        if not want:
            yield None, 0, n_commit
        elif want == n:
            yield _commit_rows(ctx_arrays, dec, None, emit), 0, n_commit
        else:
            mask = pc.and_(commit_mask, pc.invert(tx) if emit == "commits" else tx)
            yield _commit_rows(ctx_arrays, dec, mask, emit), 0, n_commit
    if emit == "commits" or n_commit == n:
        return
    other = pc.invert(commit_mask)
    idx = np.flatnonzero(other.to_numpy(zero_copy_only=False))
    rows = RowBuffer(WORK)
    n_bad = 0
    key_list, val_list = keys, values
    errs = err.to_pylist()
    for i in idx.tolist():
        ctx = {k: v[i].as_py() for k, v in ctx_arrays.items()}
        k, v = key_list[i].as_py(), val_list[i].as_py()
        reason = errs[i]
        rec = None
        if reason is None:
            try:
                rec = coordinator.decode_record(k, v)
            except Exception as e:  # noqa: BLE001 - DecodeError by contract; anything else is quarantined too
                reason = getattr(e, "reason", None) or str(e)
        if rec is None:
            n_bad += 1
            raw = (k or b"") + (v or b"")
            log_offset = ctx.get("log_offset")
            where = f"record at log offset {log_offset}: " if log_offset is not None else ""
            rows.add(side_row(source, ctx.get("position"), unit, where + str(reason), raw[:RAW_MAX],
                              q_ms=ctx.get("record_ms") if q_ms is None else q_ms,
                              broker=ctx.get("broker"), log_partition=ctx.get("log_partition"),
                              log_offset=log_offset))
            continue
        rows.add({**ctx, **group_row(rec)})
    yield rows.flush(), n_bad, len(idx) - n_bad


def _commit_rows(ctx_arrays: dict[str, pa.Array], dec: pa.RecordBatch, mask: pa.Array | None,
                 emit: str) -> pa.RecordBatch:
    """The commit rows selected by ``mask`` (all when None): :data:`COMMITS` for the commit pass,
    :data:`WORK` otherwise."""
    sel = ctx_arrays if mask is None else {k: v.filter(mask) for k, v in ctx_arrays.items()}
    d = dec if mask is None else dec.filter(mask)
    m = d.num_rows
    cols = {
        **sel,
        "key_type": d.column("record_type"), "value_version": d.column("value_version"),
        "is_tombstone": d.column("is_tombstone"), "group_id": d.column("group_id"),
        "topic": d.column("topic"), "partition": d.column("partition"),
        "committed_offset": d.column("committed_offset"), "leader_epoch": d.column("leader_epoch"),
        "metadata": d.column("metadata"), "commit_ms": d.column("commit_timestamp"),
        "expire_ms": d.column("expire_timestamp"),
    }
    if emit == "commits":
        return commit_batch(cols, m)
    return make_batch(WORK, {**cols, "row_kind": _repeat("commit", m, pa.string())}, m)


def group_row(rec: coordinator.CoordinatorRecord) -> dict[str, Any]:
    """The ``group_metadata`` columns of a decoded non-commit coordinator record."""
    v = rec.value or {}
    members = None
    if rec.record_type == 2 and v:
        members = []
        for m in v.get("members") or []:
            assigned = (m.get("assignment_decoded") or {}).get("assigned_partitions") or []
            members.append({
                "member_id": m.get("member_id"), "group_instance_id": m.get("group_instance_id"),
                "client_id": m.get("client_id"), "client_host": m.get("client_host"),
                "assigned_partitions": [{"topic": a.get("topic"), "partitions": list(a.get("partitions") or [])}
                                        for a in assigned],
            })
    state = v.get("current_state_timestamp")
    return {
        "row_kind": "group",
        "key_type": rec.record_type,
        "record_type": snake_type_name(rec.record_type),
        "value_version": rec.value_version,
        "is_tombstone": rec.is_tombstone,
        "group_id": rec.group,
        "protocol_type": v.get("protocol_type"),
        "generation": v.get("generation") if rec.record_type == 2 else v.get("group_epoch", v.get("epoch")),
        "protocol": v.get("protocol"),
        "leader": v.get("leader"),
        "state_ms": state if isinstance(state, int) and state >= 0 else None,
        "member_count": len(members) if members is not None else None,
        "members": members,
    }


# ----------------------------------------------------------------------------------- dumps


def _ts_ms(value: Any) -> int | None:
    """Epoch ms from an ISO-8601 string or a number (epoch ms); None when absent or unparseable."""
    if value is None:
        return None
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return int(value)
    if isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"-?\d+", s):
            return int(s)
        try:
            dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
        except ValueError:
            return None
        if dt.tzinfo is None:
            dt = dt.replace(tzinfo=timezone.utc)
        return int(dt.timestamp() * 1000)
    return None


def _parquet_ms(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_timestamp(t):
        return pc.cast(pc.cast(col, pa.timestamp("ms", tz=t.tz)), pa.int64())
    if pa.types.is_integer(t):
        return pc.cast(col, pa.int64())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.array([_ts_ms(x) for x in col.to_pylist()], pa.int64())
    return pa.nulls(len(col), pa.int64())


def _binary(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_binary(t):
        return col
    if pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pc.cast(col, pa.binary())
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # base64 text
        return pa.array([None if x is None else base64.b64decode(x, validate=True) for x in col.to_pylist()],
                        pa.binary())
    raise TypeError(f"key/value column of type {t}")


def decode_dump_files(batches: Iterator[pa.RecordBatch], emit: str = "work") -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: Parquet / JSONL dump files -> :data:`WORK` rows (``emit``: see :func:`_route`).

    Parquet: read row group by row group (``position`` = row index in the file, unit ``record``).
    JSONL: streamed line by line (``position`` = line number, unit ``line``). A file that is not what its
    name says becomes one quarantined ``file`` unit.
    """
    for rb in batches:
        for row in rb.to_pylist():
            src = row["source"]
            low = src.lower()
            if low.endswith(".parquet"):
                yield from _route(_decode_parquet(src, row.get("broker"), emit), emit)
            else:
                yield from _route(_decode_jsonl(src, row.get("broker"), emit), emit)


def _file_failure(src: str, reason: str, raw: bytes | None = None, broker: str | None = None) -> pa.RecordBatch:
    rows = RowBuffer(WORK)
    rows.add(side_row(src, 0, "file", reason, raw, broker=broker))
    rows.add(stats_row(src, "file", 1, 1, 0))
    return rows.flush()


def _decode_parquet(src: str, broker: str | None, emit: str = "work") -> Iterator[pa.RecordBatch]:
    import pyarrow.parquet as pq

    try:
        reader = open_reader(src)
        pf = pq.ParquetFile(reader._f if reader._kind == "arrow" else reader._f)
        names = set(pf.schema_arrow.names)
        if not {"key", "value"} <= names:
            raise ValueError(f"no key/value columns (has {sorted(names)})")
    except Exception as e:  # noqa: BLE001 - an unreadable or foreign file is quarantined, not fatal
        yield _file_failure(src, f"not a readable key/value Parquet dump: {e}", broker=broker)
        return
    n_read = n_bad = n_out = 0
    row_index = 0
    cols = [c for c in ("key", "value", "partition", "offset", "timestamp") if c in names]
    try:
        for chunk in pf.iter_batches(batch_size=65536, columns=cols):
            m = chunk.num_rows
            pos = pa.array(np.arange(row_index, row_index + m, dtype=np.int64))
            row_index += m
            n_read += m
            c = dict(zip(chunk.schema.names, chunk.columns, strict=True))
            ctx_cols = {
                "source": pa.array([src] * m), "position": pos,
                "broker": pa.array([broker] * m, pa.string()),
                "log_partition": pc.cast(c["partition"], pa.int32()) if "partition" in c else None,
                "log_offset": pc.cast(c["offset"], pa.int64()) if "offset" in c else None,
                "record_ms": _parquet_ms(c["timestamp"]) if "timestamp" in c else None,
            }
            ctx_cols = {k: v for k, v in ctx_cols.items() if v is not None}
            for out, bad, good in _decode_kv(_binary(c["key"]), _binary(c["value"]), ctx_cols,
                                             unit="record", source=src, emit=emit):
                n_bad += bad
                n_out += good
                if out is not None:
                    yield out
    except Exception as e:  # noqa: BLE001 - a corrupt row group: the rest of the file is one bad unit
        yield _file_failure(src, f"unreadable Parquet data after row {row_index}: {e}", broker=broker)
    finally:
        reader.close()
    rows = RowBuffer(WORK)
    rows.add(stats_row(src, "record", n_read, n_bad, n_out))
    yield rows.flush()


def _iter_lines(src: str, chunk: int = 8 << 20) -> Iterator[tuple[int, int, bytes]]:
    """``(line number, byte position, line bytes)`` of a file, streamed in chunks."""
    with open_reader(src) as r:
        pos = 0
        line_no = 0
        rest = b""
        rest_pos = 0
        while pos < r.size:
            data = r.read_at(pos, chunk)
            if not data:
                break
            pos += len(data)
            buf = rest + data
            start = 0
            while True:
                nl = buf.find(b"\n", start)
                if nl < 0:
                    break
                line_no += 1
                yield line_no, rest_pos + start, buf[start:nl]
                start = nl + 1
            rest_pos += start
            rest = buf[start:]
        if rest:
            yield line_no + 1, rest_pos, rest


def _decode_jsonl(src: str, broker: str | None, emit: str = "work") -> Iterator[pa.RecordBatch]:
    n_read = n_bad = n_out = 0
    side = RowBuffer(WORK)
    pending: dict[str, list] = {k: [] for k in ("key", "value", "position", "log_partition", "log_offset",
                                                "record_ms")}

    def flush_pending():
        nonlocal n_bad, n_out
        m = len(pending["key"])
        if not m:
            return
        ctx_cols = {
            "source": pa.array([src] * m), "position": pa.array(pending["position"], pa.int64()),
            "broker": pa.array([broker] * m, pa.string()),
            "log_partition": pa.array(pending["log_partition"], pa.int32()),
            "log_offset": pa.array(pending["log_offset"], pa.int64()),
            "record_ms": pa.array(pending["record_ms"], pa.int64()),
        }
        keys = pa.array(pending["key"], pa.binary())
        values = pa.array(pending["value"], pa.binary())
        for v in pending.values():
            v.clear()
        for out, bad, good in _decode_kv(keys, values, ctx_cols, unit="line", source=src, emit=emit):
            n_bad += bad
            n_out += good
            if out is not None:
                yield out

    try:
        for line_no, _bpos, line in _iter_lines(src):
            if not line.strip():
                continue
            n_read += 1
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict) or "key" not in obj:
                    raise ValueError("not a JSON object with a key")
                key = _b64(obj.get("key"))
                value = _b64(obj.get("value"))
                ts = obj.get("timestamp")
                ms = _ts_ms(ts)
                if ts is not None and ms is None:
                    raise ValueError(f"unparseable timestamp {str(ts)[:40]!r}")
                part = obj.get("partition")
                off = obj.get("offset")
                part = None if part is None else int(part)
                off = None if off is None else int(off)
            except (ValueError, TypeError, binascii.Error) as e:
                n_bad += 1
                side.add(side_row(src, line_no, "line", f"bad dump line: {e}", line[:RAW_MAX], broker=broker))
                continue
            pending["key"].append(key)
            pending["value"].append(value)
            pending["position"].append(line_no)
            pending["log_partition"].append(part)
            pending["log_offset"].append(off)
            pending["record_ms"].append(ms)
            if len(pending["key"]) >= 8192:
                yield from flush_pending()
        yield from flush_pending()
    except OSError as e:
        yield _file_failure(src, f"unreadable: {e}", broker=broker)
        return
    side.add(stats_row(src, "line", n_read, n_bad, n_out))
    yield side.flush()


def _b64(value: Any) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("key/value must be a base64 string or null")
    return base64.b64decode(value, validate=True)


# ----------------------------------------------------------------------------------- text dumps


def decode_text_files(batches: Iterator[pa.RecordBatch], emit: str = "work") -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: console-consumer / kafka-dump-log text dumps -> :data:`WORK` rows
    (``emit``: see :func:`_route`)."""
    from . import textdumps

    for rb in batches:
        for row in rb.to_pylist():
            yield from _route(textdumps.decode_text_file(row["source"], row.get("broker")), emit)


# ----------------------------------------------------------------------------------- Spark side


def _pass(fn: Any, emit: str) -> Any:
    """``fn`` (a decode function taking ``emit``) as a one-argument ``mapInArrow`` function."""
    import functools

    return functools.partial(fn, emit=emit)


def offsets_frames(spark: SparkSession, files: list, *, split_bytes: int,
                   parallelism: int) -> tuple[DataFrame, DataFrame] | None:
    """The two decode passes over every ``offsets`` input file: ``(commits, side)``; None when no files.

    ``commits`` (:data:`COMMITS`) holds the non-transactional commits, already in the ``offset_commits``
    shape, so writing them is one streaming pass with no cache and no shuffle. ``side`` (:data:`WORK`)
    holds the rest: transactional commits and COMMIT/ABORT markers (for :func:`commits_frame`), group
    records, quarantine and stats rows -- usually tiny, so it is the one worth persisting. Each pass
    decodes the inputs (the codec is cheaper than caching the wide decoded rows).
    """
    from ._spark import files_frame, ranges_frame
    from .discover import JSONL, PARQUET, SEGMENT, TEXT

    commits, side = [], []
    segs = [f for f in files if f.form == SEGMENT]
    if segs:
        ranges = ranges_frame(spark, segs, split_bytes=split_bytes, parallelism=parallelism,
                              plan=plan_segment_ranges, schema=RANGE_SCHEMA)
        commits.append(ranges.mapInArrow(decode_segment_commits, _spark_schema(COMMITS)))
        side.append(ranges.mapInArrow(decode_segment_side, _spark_schema(WORK)))
    for forms, fn in (((PARQUET, JSONL), decode_dump_files), ((TEXT,), decode_text_files)):
        chosen = [f for f in files if f.form in forms]
        if chosen:
            frame = files_frame(spark, chosen, FILE_SCHEMA, parallelism)
            commits.append(frame.mapInArrow(_pass(fn, "commits"), _spark_schema(COMMITS)))
            side.append(frame.mapInArrow(_pass(fn, "side"), _spark_schema(WORK)))
    if not commits:
        return None
    return _union(commits), _union(side)


def _union(parts: list[DataFrame]) -> DataFrame:
    out = parts[0]
    for p in parts[1:]:
        out = out.unionByName(p)
    return out


def _spark_schema(schema: pa.Schema):
    from ._spark import to_spark_schema

    return to_spark_schema(schema)


def has_transactional_commits(side: DataFrame) -> bool:
    """Whether the side rows hold any transactional commit (only then does :func:`commits_frame` need
    its window); a cheap question when ``side`` is persisted."""
    from pyspark.sql import functions as F

    return not side.filter(F.col("row_kind") == "commit").isEmpty()


def commits_frame(commits: DataFrame, side: DataFrame, *, transactional: bool = True) -> DataFrame:
    """``offset_commits`` columns (minus cluster/event_date): the commit pass's rows plus the transactional
    commits of the side rows with their ``txn_state``.

    A transactional commit takes the state of the first COMMIT/ABORT marker after it of the same
    producer in the same ``__consumer_offsets`` partition (and replica); none yet -> ``open``. Only
    the side rows (transactional commits and markers) go through that window's shuffle, and only when
    ``transactional`` says there are any (:func:`has_transactional_commits`).
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if not transactional:
        return commits
    tx = side.filter(F.col("row_kind").isin("commit", "marker")
                     & F.coalesce(F.col("is_transactional"), F.lit(False)))
    # The nearest later marker, as a running frame over the rows in *descending* offset order: Spark
    # evaluates (unbounded preceding .. 1 preceding) incrementally, while the equivalent ascending frame
    # (1 following .. unbounded following) is recomputed per row - O(n^2): 40 k transactional rows of one
    # producer took 90 s, which stalled a 10 M-commit run for 25 minutes.
    w = (Window.partitionBy("broker", "log_partition", "producer_id")
         .orderBy(F.col("log_offset").desc()).rowsBetween(Window.unboundedPreceding, -1))
    marker = F.last(F.when(F.col("row_kind") == "marker", F.col("control_type")), ignorenulls=True).over(w)
    tx = (tx.withColumn("_marker", marker)
          .filter(F.col("row_kind") == "commit")
          .withColumn("txn_state", F.when(F.col("_marker") == "COMMIT", "committed")
                      .when(F.col("_marker") == "ABORT", "aborted").otherwise("open"))
          .drop("_marker"))
    event_ms = F.when(F.col("is_tombstone") | F.col("commit_ms").isNull() | (F.col("commit_ms") < 0),
                      F.col("record_ms")).otherwise(F.col("commit_ms"))
    tx = tx.select(
        "group_id", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
        _ts("commit_ms").alias("commit_ts"),
        F.when(F.col("expire_ms") >= 0, _ts("expire_ms")).alias("expire_ts"),
        "is_tombstone", "key_type", "value_version",
        _ts_col(event_ms).alias("event_ts"),
        "log_partition", "log_offset",
        F.when(F.col("record_ms") >= 0, _ts("record_ms")).alias("record_ts"),
        "batch_leader_epoch", "producer_id", "txn_state",
        F.lit("offsets").alias("source_kind"), "source", "position",
    )
    return commits.unionByName(tx)


def groups_frame(work: DataFrame) -> DataFrame:
    """``group_metadata`` columns (minus cluster/event_date) from the work rows."""
    from pyspark.sql import functions as F

    g = work.filter(F.col("row_kind") == "group")
    event_ms = F.coalesce(F.when(F.col("state_ms") >= 0, F.col("state_ms")),
                          F.when(F.col("record_ms") >= 0, F.col("record_ms")))
    return g.select(
        "group_id", "record_type", "value_version", "is_tombstone", "protocol_type", "generation", "protocol",
        "leader", _ts("state_ms").alias("state_ts"), "member_count", "members",
        _ts_col(event_ms).alias("event_ts"), "log_partition", "log_offset",
        F.lit("offsets").alias("source_kind"), "source", "position",
    )


def _ts(name: str):
    from pyspark.sql import functions as F

    return _ts_col(F.col(name))


def _ts_col(col):
    from pyspark.sql import functions as F

    return F.timestamp_millis(col)
