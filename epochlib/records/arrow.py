"""The Arrow batch function :func:`batches_arrow` (what Spark calls): a segment or byte range into a
batch-header table (one row per log entry, bad ones included) and a records table.

Strategy: one pass over the entry headers finds the boundaries; magic-2 entries take the columnar
fast path (:mod:`.fastpath`). Legacy entries, bad entries and any batch the fast path rejects go
through the reference decoder (:func:`.segments._entry_or_bad`), which is authoritative for reasons
and values. Must agree with :func:`.segments.iter_batches` row for row (tests enforce it).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import NamedTuple

import numpy as np
import pyarrow as pa

from .._compression import CODEC_NAMES
from .fastpath import FastV2, _gather_binary, decode_v2_fast
from .segments import _entry_extent, _entry_or_bad, _offset_range, _raw, _stop, stop_reason
from .values import (
    _ENTRY,
    _SIZE_MAGIC,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    BadBatch,
    Batch,
    Buffer,
    IncompleteTail,
    Record,
    _as_buffer,
)

__all__ = ["BATCH_SCHEMA", "DEFAULT_MAX_DECODED", "RECORD_SCHEMA", "BatchesArrow", "batches_arrow",
           "iter_batches_arrow"]

BATCH_SCHEMA = pa.schema(
    [
        ("position", pa.int64()),
        ("size", pa.int32()),
        ("magic", pa.int8()),
        ("base_offset", pa.int64()),
        ("last_offset", pa.int64()),
        ("partition_leader_epoch", pa.int32()),
        ("crc", pa.int64()),
        ("crc_valid", pa.bool_()),
        ("attributes", pa.int16()),
        ("compression", pa.string()),
        ("timestamp_type", pa.int8()),
        ("is_transactional", pa.bool_()),
        ("is_control", pa.bool_()),
        ("has_delete_horizon", pa.bool_()),
        ("base_timestamp", pa.int64()),
        ("max_timestamp", pa.int64()),
        ("producer_id", pa.int64()),
        ("producer_epoch", pa.int16()),
        ("base_sequence", pa.int32()),
        ("records_count", pa.int32()),
        ("error", pa.string()),
        ("raw", pa.binary()),
    ]
)

RECORD_SCHEMA = pa.schema(
    [
        ("batch_position", pa.int64()),
        ("offset", pa.int64()),
        ("timestamp", pa.int64()),
        ("key", pa.binary()),
        ("value", pa.binary()),
        ("is_control", pa.bool_()),
        ("control_type", pa.int16()),
        ("producer_id", pa.int64()),
        ("is_transactional", pa.bool_()),
        ("partition_leader_epoch", pa.int32()),
    ]
)


class BatchesArrow(NamedTuple):
    """Result of :func:`batches_arrow`: one row per log entry, and one row per record; ``tail`` the incomplete
    entry the file ends in (only with ``ends_file``; no row: not an entry, not bad data)."""

    batches: pa.RecordBatch
    records: pa.RecordBatch | None
    tail: IncompleteTail | None = None

_CODEC_NAME_ARRAY = np.array([CODEC_NAMES[i] for i in range(len(CODEC_NAMES))], dtype=object)


def _scan_entries(buf: Buffer) -> tuple[list[int], list[tuple[int, int, str | None]]]:
    """Positions of magic-2 entries with sane sizes, and the other entries (legacy/bad/torn)."""
    n = len(buf)
    fast: list[int] = []
    slow: list[tuple[int, int, str | None]] = []
    unpack = _SIZE_MAGIC.unpack_from
    append = fast.append
    pos = 0
    while pos < n:
        if n - pos >= HEADER_SIZE_UP_TO_MAGIC:
            size, magic = unpack(buf, pos)
            end = pos + LOG_OVERHEAD + size
            if magic == 2 and size >= 49 and end <= n:
                append(pos)
                pos = end
                continue
        length, problem = _entry_extent(buf, pos, n)
        slow.append((pos, length, problem))
        if problem is not None:
            break
        pos += length
    return fast, slow


def _split_tail(
    buf: Buffer, slow: list[tuple[int, int, str | None]], base_position: int, ends_file: bool,
    last_segment: bool = True, offset_range: tuple[int, int] | None = None,
) -> tuple[list[tuple[int, int, str | None]], IncompleteTail | None]:
    """The scanned entries without where the walk stopped when that is the end of the data (a zero fill: dropped)
    or an incomplete final entry (returned apart), as :func:`.segments.iter_batches` does with ``ends_file``."""
    if not ends_file or not slow or slow[-1][2] is None:
        return slow, None
    pos, length, problem = slow[-1]
    last = _stop(buf, pos, length, problem, base_position, ends_file, last_segment, offset_range)
    if isinstance(last, BadBatch):  # with its reason (:func:`_stop`'s words, not a torn tail's)
        return [*slow[:-1], (pos, length, last.reason)], None
    return slow[:-1], last


def batches_arrow(
    buf: Buffer, *, base_position: int = 0, with_records: bool = True, verify_crc: bool = True,
    segment_base_offset: int | None = None, ends_file: bool = False, last_segment: bool = True,
) -> BatchesArrow:
    """Decode a segment (or byte range) into Arrow: a batch-header table with one row per
    entry — bad ones included, with ``error`` and ``raw`` (≤ 4096 bytes) set and the decoded
    columns null — and, when ``with_records``, a records table in file order.

    ``segment_base_offset``, ``ends_file`` and ``last_segment`` as for :func:`iter_batches` (entries outside the
    segment's offset range are bad; at the end of the file a zero fill is no row, and an incomplete final entry is
    ``tail``, no row — a bad row in a rolled segment, ``last_segment=False``). Agrees with :func:`iter_batches` (the reference) row for row. Raises only
    :class:`~epochlib.errors.DecodeError`, and only for a non-bytes-like ``buf``.
    """
    buf = _as_buffer(buf)
    fast_pos, slow = _scan_entries(buf)
    rng = _offset_range(segment_base_offset)
    slow, tail = _split_tail(buf, slow, base_position, ends_file, last_segment, rng)
    return _decode(buf, fast_pos, slow, base_position, with_records, verify_crc, None, rng)[0]._replace(tail=tail)


#: Decompressed bytes :func:`iter_batches_arrow` lets one piece hold (plus at most one batch, which the
#: per-batch cap of :mod:`epochlib._compression` bounds).
DEFAULT_MAX_DECODED = 32 << 20


def iter_batches_arrow(
    buf: Buffer, *, base_position: int = 0, with_records: bool = True, verify_crc: bool = True,
    max_decoded: int = DEFAULT_MAX_DECODED, max_input: int | None = None, segment_base_offset: int | None = None,
    ends_file: bool = False, last_segment: bool = True,
) -> Iterator[BatchesArrow]:
    """:func:`batches_arrow` in pieces that each hold at most about ``max_decoded`` decompressed bytes
    (plus one batch) and, with ``max_input``, entries starting within ``max_input`` bytes of the piece's
    first: the per-batch decompression cap alone lets a run of small batches that each inflate to just
    under it (32 batches of 2 KB) hold gigabytes at once, and the decoded columns of a whole 64 MiB range
    take ~13x its size. Entries are in file order across pieces; the pieces together are exactly
    :func:`batches_arrow`'s rows. Without records nothing is decompressed and there is one piece. The last
    piece carries the ``tail`` (with ``ends_file``; ``last_segment`` as for :func:`batches_arrow`).
    """
    buf = _as_buffer(buf)
    fast_pos, slow = _scan_entries(buf)
    rng = _offset_range(segment_base_offset)
    slow, tail = _split_tail(buf, slow, base_position, ends_file, last_segment, rng)
    if not with_records or (not fast_pos and not slow):
        yield _decode(buf, fast_pos, slow, base_position, with_records, verify_crc, None, rng)[0]._replace(tail=tail)
        return
    budget = max(1, int(max_decoded))
    while fast_pos or slow:
        first = min(fast_pos[0] if fast_pos else len(buf), slow[0][0] if slow else len(buf))
        limit = first + max(1, int(max_input)) if max_input is not None else len(buf) + 1
        fp = fast_pos[: bisect.bisect_left(fast_pos, limit)]
        sl = slow[: bisect.bisect_left([p for p, _, _ in slow], limit)]
        out, stop = _decode(buf, fp, sl, base_position, with_records, verify_crc, budget, rng)
        nxt = limit if stop is None else stop
        fast_pos = fast_pos[bisect.bisect_left(fast_pos, nxt):]
        slow = slow[bisect.bisect_left([p for p, _, _ in slow], nxt):]
        yield out if fast_pos or slow else out._replace(tail=tail)


def _decode(
    buf: Buffer, fast_pos: list[int], slow: list[tuple[int, int, str | None]], base_position: int,
    with_records: bool, verify_crc: bool, max_decoded: int | None, offset_range: tuple[int, int] | None,
) -> tuple[BatchesArrow, int | None]:
    """Decode the scanned entries; with ``max_decoded``, only those before the first magic-2 entry the
    budget did not reach (returned as the second item; None when all were decoded). With ``offset_range``
    the fast path leaves entries outside it to the reference, which reports them."""
    fb = decode_v2_fast(buf, np.asarray(fast_pos, np.int64), verify_crc, with_records, max_decoded,
                        offset_range=offset_range)
    stop = fast_pos[len(fb.positions)] if len(fb.positions) < len(fast_pos) else None
    slow_items: list[Batch | BadBatch] = []
    for pos, length, problem in slow:
        if stop is not None and pos >= stop:
            break
        if problem is None:
            slow_items.append(_entry_or_bad(buf, pos, length, verify_crc, with_records, base_position, offset_range))
        else:  # where the walk stopped, and it is bad (:func:`_split_tail` took out what is not)
            raw_problem = problem == "torn" or problem.startswith("invalid entry size")  # as _entry_extent gave it
            reason = stop_reason(problem, base_position + pos, length) if raw_problem else problem
            slow_items.append(BadBatch(base_position + pos, reason, _raw(buf, pos, length), length))

    for pos in fb.rejected:
        length = LOG_OVERHEAD + _ENTRY.unpack_from(buf, pos)[1]
        slow_items.append(_entry_or_bad(buf, pos, length, verify_crc, with_records, base_position, offset_range))

    # -- batch table: fast rows (numpy) + slow rows (reference values), sorted by position
    h = fb.headers
    keep = fb.keep
    k_n = int(keep.sum())
    codec = (h["attributes"][keep] & 7).astype(np.int64)
    attrs = h["attributes"][keep].astype(np.int16)
    fast_cols = {
        "position": fb.positions[keep] + base_position,
        "size": h["size"][keep].astype(np.int32) + LOG_OVERHEAD,
        "magic": np.full(k_n, 2, np.int8),
        "base_offset": h["base_offset"][keep].astype(np.int64),
        "last_offset": h["base_offset"][keep].astype(np.int64) + h["lod"][keep].astype(np.int64),
        "partition_leader_epoch": h["ple"][keep].astype(np.int32),
        "crc": h["crc"][keep].astype(np.int64),
        "crc_valid": pa.array(np.ones(k_n, bool)) if verify_crc else pa.nulls(k_n, pa.bool_()),
        "attributes": attrs,
        "compression": pa.array(_CODEC_NAME_ARRAY[codec], pa.string()),
        "timestamp_type": ((attrs >> 3) & 1).astype(np.int8),
        "is_transactional": (attrs & 0x10) != 0,
        "is_control": (attrs & 0x20) != 0,
        "has_delete_horizon": (attrs & 0x40) != 0,
        "base_timestamp": h["base_ts"][keep].astype(np.int64),
        "max_timestamp": h["max_ts"][keep].astype(np.int64),
        "producer_id": h["pid"][keep].astype(np.int64),
        "producer_epoch": h["pepoch"][keep].astype(np.int16),
        "base_sequence": h["bseq"][keep].astype(np.int32),
        "records_count": h["count"][keep].astype(np.int32),
        "error": pa.nulls(k_n, pa.string()),
        "raw": pa.nulls(k_n, pa.binary()),
    }
    fast_batch = pa.RecordBatch.from_arrays(
        [pa.array(fast_cols[f.name], f.type) for f in BATCH_SCHEMA], schema=BATCH_SCHEMA
    )
    slow_batch = pa.RecordBatch.from_pylist([_batch_row(b) for b in slow_items], schema=BATCH_SCHEMA)
    batches = _sorted(fast_batch, slow_batch, "position", BATCH_SCHEMA)

    records = None
    if with_records:
        slow_rows = [_record_row(b, r) for b in slow_items if isinstance(b, Batch) for r in b.records]
        slow_rec = pa.RecordBatch.from_pylist(slow_rows, schema=RECORD_SCHEMA)
        records = _sorted(_fast_records(fb, base_position), slow_rec, "batch_position", RECORD_SCHEMA)
    return BatchesArrow(batches, records), stop


def _sorted(a: pa.RecordBatch, b: pa.RecordBatch, key: str, schema: pa.Schema) -> pa.RecordBatch:
    if b.num_rows == 0:
        return a
    t = pa.Table.from_batches([a, b], schema=schema).combine_chunks()
    order = np.argsort(t.column(key).to_numpy(), kind="stable")
    out = t.take(pa.array(order)).combine_chunks().to_batches()
    return out[0] if out else pa.RecordBatch.from_pylist([], schema=schema)


def _batch_row(b: Batch | BadBatch) -> dict:
    if isinstance(b, BadBatch):
        return {"position": b.position, "size": b.length, "error": b.reason, "raw": b.raw_slice}
    d = {f: getattr(b, f) for f in BATCH_SCHEMA.names if f not in ("error", "raw")}
    return d


def _record_row(b: Batch, r: Record) -> dict:
    return {
        "batch_position": b.position,
        "offset": r.offset,
        "timestamp": r.timestamp,
        "key": r.key,
        "value": r.value,
        "is_control": b.is_control,
        "control_type": r.control_type,
        "producer_id": b.producer_id,
        "is_transactional": b.is_transactional,
        "partition_leader_epoch": b.partition_leader_epoch,
    }


def _fast_records(fb: FastV2, base_position: int) -> pa.RecordBatch:
    """The records table of the batches the fast path kept."""
    if fb.rec is None:
        return pa.RecordBatch.from_pylist([], schema=RECORD_SCHEMA)
    arena, j, od, tsd, ks, kl, vs, vl, ctype = fb.rec
    h = fb.headers
    attrs = h["attributes"].astype(np.int64)
    lat = ((attrs >> 3) & 1)[j] != 0
    base_off = h["base_offset"].astype(np.int64)[j]
    base_ts = h["base_ts"].astype(np.int64)[j]
    max_ts = h["max_ts"].astype(np.int64)[j]
    with np.errstate(over="ignore"):
        offsets = base_off + od
        ts = np.where(lat, max_ts, base_ts + tsd)
    is_ctrl = ((attrs & 0x20) != 0)[j]
    cols = [
        pa.array(fb.positions[j] + base_position, pa.int64()),
        pa.array(offsets, pa.int64()),
        pa.array(ts, pa.int64()),
        _gather_binary(arena, ks, kl),
        _gather_binary(arena, vs, vl),
        pa.array(is_ctrl, pa.bool_()),
        pa.array(ctype, pa.int16(), mask=~is_ctrl),
        pa.array(h["pid"].astype(np.int64)[j], pa.int64()),
        pa.array(((attrs & 0x10) != 0)[j], pa.bool_()),
        pa.array(h["ple"].astype(np.int32)[j], pa.int32()),
    ]
    return pa.RecordBatch.from_arrays(cols, schema=RECORD_SCHEMA)
