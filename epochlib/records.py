"""Kafka log entries: v2 record batches, legacy v0/v1 message sets, segment iteration,
encoders and the Arrow batch function (spec/kafka-formats.md §3, §4.1).

Wire layout of one log entry (§3.1) — every magic starts the same::

    0  int64 baseOffset (v2) / message offset (v0/v1)
    8  int32 size        bytes that follow this field; entry length = 12 + size
   12  int32 partitionLeaderEpoch (v2) / message CRC (v0/v1)
   16  int8  magic       0, 1 or 2 — read it before anything else

Magic 2 batch header (§3.2, 61 bytes, one ``struct.Struct``)::

   17 uint32 crc (CRC-32C of [21, end))   21 int16 attributes   23 int32 lastOffsetDelta
   27 int64 baseTimestamp   35 int64 maxTimestamp   43 int64 producerId
   51 int16 producerEpoch   53 int32 baseSequence   57 int32 recordsCount   61 records…

Strategy (h11-like, sans-IO): readers take ``(buf, pos)`` over ``bytes | bytearray |
memoryview``. :func:`decode_batch` is the strict per-entry reference (raises
:class:`~epochlib.errors.DecodeError`, incl. for a CRC mismatch). :func:`iter_batches` walks a
segment and never raises for bad data: a corrupt entry becomes a :class:`BadBatch` and the walk
resumes at the next entry when the size field is sane; a torn tail ends the walk with a final
``BadBatch("torn tail: N bytes")``. :func:`batches_arrow` is the columnar version used by
Spark; it must agree with :func:`iter_batches` (tests enforce it). Any other exception
escaping a public function is a bug.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import NamedTuple

import cramjam
import crc32c as _crc32c_mod
import numpy as np
import pyarrow as pa

from . import _compression
from ._compression import CODEC_NAMES, ZSTD_ERROR, codec_id, compress, decompress, zstd_decompressobj
from ._wire import (
    read_uvarint as _wire_uvarint,
)
from ._wire import (
    read_varint,
    read_varlong,
    write_varint,
    write_varlong,
)
from .errors import DecodeError

__all__ = [
    "BadBatch",
    "BATCH_SCHEMA",
    "Batch",
    "BatchesArrow",
    "CONTROL_TYPE_NAMES",
    "RECORD_SCHEMA",
    "NewRecord",
    "Record",
    "batches_arrow",
    "decode_batch",
    "encode_batch",
    "encode_control_batch",
    "encode_legacy_message_set",
    "iter_batches",
    "scan_batch_boundaries",
    "split_points",
]

_crc32c = _crc32c_mod.crc32c

LOG_OVERHEAD = 12  # offset + size
HEADER_SIZE_UP_TO_MAGIC = 17
V2_HEADER_SIZE = 61
RAW_SLICE_MAX = 4096
# Smallest legal value of the size field per magic (bytes after the size field).
_MIN_SIZE = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}

_ENTRY = struct.Struct(">qi")  # offset, size
_SIZE_MAGIC = struct.Struct(">8xi4xb")  # size, magic
_V2 = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header
_LEGACY_V0 = struct.Struct(">IbB")  # crc, magic, attributes
_LEGACY_V1 = struct.Struct(">IbBq")  # crc, magic, attributes, timestamp
_I16x2 = struct.Struct(">hh")
_I16_I32 = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_Q = struct.Struct(">q")

CONTROL_TYPE_NAMES: dict[int, str] = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_CONTROL_TYPE_IDS = {v: k for k, v in CONTROL_TYPE_NAMES.items()}

Buffer = bytes | bytearray | memoryview


# ---------------------------------------------------------------- values


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record (v2 record or v0/v1 message).

    ``timestamp`` already applies LogAppendTime (= the batch's maxTimestamp) and is -1 for
    magic 0. ``sequence`` is baseSequence + offsetDelta (int32 wrap to 0), -1 when not
    idempotent or legacy. The ``control_*`` fields are set only in control batches (§3.5):
    ``coordinator_epoch`` only for ABORT/COMMIT markers.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    sequence: int = -1
    control_type: int | None = None
    control_name: str | None = None
    coordinator_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """One log entry: a v2 record batch, or a v0/v1 message (a compressed wrapper counts as
    one entry holding its inner messages).

    ``timestamp_type`` is 0 CreateTime, 1 LogAppendTime, -1 none (magic 0). For legacy
    entries ``partition_leader_epoch``/producer fields are -1, ``crc`` is the CRC-32 (IEEE)
    of the outer message and ``records_count`` the number of (inner) messages.
    ``crc_valid`` is None when the CRC was not checked (``verify_crc=False``).
    """

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    crc: int
    crc_valid: bool | None
    attributes: int
    compression: str
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    records: tuple[Record, ...] = ()

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: with attribute bit 6, baseTimestamp holds the delete horizon."""
        return self.base_timestamp if self.has_delete_horizon else None


@dataclass(frozen=True, slots=True)
class BadBatch:
    """An entry that could not be decoded: where, why, and the first ≤ 4096 bytes of it.

    ``length`` is the number of bytes the entry spans in the input (12 + size when the size
    field was usable, else everything that was left).
    """

    position: int
    reason: str
    raw_slice: bytes
    length: int


class NewRecord(NamedTuple):
    """A record to encode. ``offset_delta`` defaults to the record's index in the batch."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple = ()
    offset_delta: int | None = None


# ---------------------------------------------------------------- v2 records (reference)


_INT64_MIN, _INT64_MAX = -0x8000000000000000, 0x7FFFFFFFFFFFFFFF


def _wrap64(v: int) -> int:
    """int64 wrap-around, as Java's long arithmetic (only garbage input ever overflows)."""
    if -0x8000000000000000 <= v <= 0x7FFFFFFFFFFFFFFF:
        return v
    return ((v + 0x8000000000000000) & 0xFFFFFFFFFFFFFFFF) - 0x8000000000000000


def _incr_sequence(base_sequence: int, delta: int) -> int:
    """DefaultRecordBatch.incrementSequence: int32 wrap continues at 0."""
    if base_sequence < 0:
        return -1
    if base_sequence > 0x7FFFFFFF - delta:
        return delta - (0x7FFFFFFF - base_sequence) - 1
    return base_sequence + delta


def _read_len_bytes(data: Buffer, pos: int, what: str) -> tuple[bytes | None, int]:
    n, pos = read_varint(data, pos)
    if n == -1:
        return None, pos
    if n < -1:
        raise DecodeError(f"negative {what} length {n}", pos)
    end = pos + n
    if end > len(data):
        raise DecodeError(f"{what} of {n} bytes runs past the end", pos)
    return bytes(data[pos:end]), end


def _control_fields(key: bytes | None, value: bytes | None, pos: int) -> tuple[int, str, int | None]:
    if key is None or len(key) < 4:
        raise DecodeError("control record key shorter than 4 bytes", pos)
    version, ctype = _I16x2.unpack_from(key, 0)
    if version < 0:
        raise DecodeError(f"control record key version {version}", pos)
    name = CONTROL_TYPE_NAMES.get(ctype, "UNKNOWN")
    epoch = None
    if ctype in (0, 1):
        if value is None or len(value) < 6:
            raise DecodeError("transaction marker value shorter than 6 bytes", pos)
        _v, epoch = _I16_I32.unpack_from(value, 0)
    return ctype, name, epoch


def _decode_records_v2(
    data: Buffer,
    pos: int,
    end: int,
    count: int,
    base_offset: int,
    base_timestamp: int,
    log_append_time: int | None,
    base_sequence: int,
    is_control: bool,
) -> tuple[Record, ...]:
    """Decode ``count`` records from ``data[pos:end]``; positions in errors are in ``data``."""
    if count < 0:
        raise DecodeError(f"negative record count {count}", pos)
    if count > (end - pos) // 7 + 1:  # a record takes at least 7 bytes
        raise DecodeError(f"record count {count} does not fit in {end - pos} bytes", pos)
    view = memoryview(data)[:end]  # O(1) bound; reads past a record's end raise
    out = []
    for i in range(count):
        start = pos
        length, pos = read_varint(view, pos)
        if length < 0 or pos + length > end:
            raise DecodeError(f"record {i} length {length} runs past the batch", start)
        rec_end = pos + length
        rec = view[:rec_end]
        pos += 1  # attributes, unused
        ts_delta, pos = read_varlong(rec, pos)
        off_delta, pos = read_varint(rec, pos)
        key, pos = _read_len_bytes(rec, pos, "key")
        value, pos = _read_len_bytes(rec, pos, "value")
        n_headers, pos = read_varint(rec, pos)
        if n_headers < 0 or n_headers > rec_end - pos:
            raise DecodeError(f"invalid header count {n_headers}", pos)
        headers = []
        for _ in range(n_headers):
            hpos = pos
            hk, pos = _read_len_bytes(rec, pos, "header key")
            if hk is None:
                raise DecodeError("null header key", hpos)
            try:
                hks = hk.decode("utf-8")
            except UnicodeDecodeError:
                raise DecodeError("header key is not UTF-8", hpos) from None
            hv, pos = _read_len_bytes(rec, pos, "header value")
            headers.append((hks, hv))
        if pos != rec_end:
            raise DecodeError(
                f"record {i} declared {length} bytes but used {pos - (rec_end - length)}", start
            )
        ts = log_append_time if log_append_time is not None else _wrap64(base_timestamp + ts_delta)
        offset = _wrap64(base_offset + off_delta)
        seq = _incr_sequence(base_sequence, off_delta)
        if is_control:
            ctype, cname, cepoch = _control_fields(key, value, start)
            out.append(Record(offset, ts, key, value, tuple(headers), seq, ctype, cname, cepoch))
        else:
            out.append(Record(offset, ts, key, value, tuple(headers), seq))
    if pos != end:
        raise DecodeError(f"{end - pos} bytes left after {count} records", pos)
    return tuple(out)


def _decode_v2(buf: Buffer, pos: int, verify_crc: bool, decode_records: bool) -> Batch:
    n = len(buf)
    if pos + V2_HEADER_SIZE > n:
        raise DecodeError(f"v2 batch header needs 61 bytes, {n - pos} left", pos)
    (base_offset, size, ple, magic, crc, attrs, lod, base_ts, max_ts, pid, pepoch, bseq, count) = (
        _V2.unpack_from(buf, pos)
    )
    end = pos + LOG_OVERHEAD + size
    if size < V2_HEADER_SIZE - LOG_OVERHEAD or end > n:
        raise DecodeError(f"batch size {size} invalid for {n - pos} bytes", pos + 8)
    crc_valid = None
    if verify_crc:
        computed = _crc32c(memoryview(buf)[pos + 21 : end])
        if computed != crc:
            raise DecodeError(f"crc mismatch: stored {crc:#010x}, computed {computed:#010x}", pos + 17)
        crc_valid = True
    codec = attrs & 0x07
    if codec not in CODEC_NAMES:
        raise DecodeError(f"unknown compression codec {codec}", pos + 21)
    if count < 0:
        raise DecodeError(f"negative record count {count}", pos + 57)
    ts_type = (attrs >> 3) & 1
    is_control = bool(attrs & 0x20)
    records: tuple[Record, ...] = ()
    if decode_records:
        lat = max_ts if ts_type else None
        if codec == 0:
            records = _decode_records_v2(
                buf, pos + V2_HEADER_SIZE, end, count, base_offset, base_ts, lat, bseq, is_control
            )
        else:
            try:
                data = decompress(codec, buf[pos + V2_HEADER_SIZE : end], 2)
            except DecodeError as e:
                raise e.shifted(pos + V2_HEADER_SIZE) from None
            try:
                records = _decode_records_v2(
                    data, 0, len(data), count, base_offset, base_ts, lat, bseq, is_control
                )
            except DecodeError as e:
                raise DecodeError(
                    f"{e.reason} (at byte {e.offset} of the decompressed records)", pos + V2_HEADER_SIZE
                ) from None
    return Batch(
        pos, LOG_OVERHEAD + size, magic, base_offset, _wrap64(base_offset + lod), ple, crc, crc_valid, attrs,
        CODEC_NAMES[codec], ts_type, bool(attrs & 0x10), is_control, bool(attrs & 0x40),
        base_ts, max_ts, pid, pepoch, bseq, count, records,
    )  # fmt: skip


# ---------------------------------------------------------------- legacy v0/v1 (reference)


class _Msg(NamedTuple):
    offset: int
    crc: int
    crc_valid: bool | None
    magic: int
    attributes: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    size: int


def _read_legacy_message(buf: Buffer, pos: int, verify_crc: bool) -> _Msg:
    """One offset/size/message entry starting at ``pos`` (not decompressed)."""
    n = len(buf)
    if pos + HEADER_SIZE_UP_TO_MAGIC + 1 > n:
        raise DecodeError(f"message header truncated ({n - pos} bytes left)", pos)
    offset, size = _ENTRY.unpack_from(buf, pos)
    magic = buf[pos + 16]
    if magic not in (0, 1):
        raise DecodeError(f"legacy message has magic {magic}", pos + 16)
    end = pos + LOG_OVERHEAD + size
    if size < _MIN_SIZE[magic] or end > n:
        raise DecodeError(f"message size {size} invalid for {n - pos} bytes", pos + 8)
    if magic == 0:
        crc, _m, attrs = _LEGACY_V0.unpack_from(buf, pos + 12)
        timestamp, p = -1, pos + 18
    else:
        crc, _m, attrs, timestamp = _LEGACY_V1.unpack_from(buf, pos + 12)
        p = pos + 26
    crc_valid = None
    if verify_crc:
        computed = zlib.crc32(memoryview(buf)[pos + 16 : end])
        if computed != crc:
            raise DecodeError(f"crc mismatch: stored {crc:#010x}, computed {computed:#010x}", pos + 12)
        crc_valid = True
    key = value = None
    for which in ("key", "value"):
        if p + 4 > end:
            raise DecodeError(f"message {which} length truncated", p)
        (ln,) = _I32.unpack_from(buf, p)
        p += 4
        if ln < -1 or p + ln > end:
            raise DecodeError(f"message {which} length {ln} invalid", p - 4)
        if ln >= 0:
            v = bytes(buf[p : p + ln])
            p += ln
            if which == "key":
                key = v
            else:
                value = v
    if p != end:
        raise DecodeError(f"{end - p} bytes left in message", p)
    return _Msg(offset, crc, crc_valid, magic, attrs, timestamp, key, value, LOG_OVERHEAD + size)


def _decode_legacy(buf: Buffer, pos: int, verify_crc: bool, decode_records: bool) -> Batch:
    m = _read_legacy_message(buf, pos, verify_crc)
    codec = m.attributes & 0x07
    if codec not in (0, 1, 2, 3):
        raise DecodeError(f"invalid legacy compression codec {codec}", pos + 17)
    ts_type = -1 if m.magic == 0 else (m.attributes >> 3) & 1
    log_append = m.magic == 1 and ts_type == 1
    if codec == 0:
        records = (Record(m.offset, m.timestamp, m.key, m.value),)
        base = last = m.offset
        base_ts = m.timestamp
    else:
        if m.value is None:
            raise DecodeError("compressed wrapper message has a null value", pos)
        try:
            inner = decompress(codec, m.value, m.magic)
        except DecodeError as e:
            raise DecodeError(e.reason + " (wrapper value)", pos) from None
        msgs = []
        p = 0
        try:
            while p < len(inner):
                im = _read_legacy_message(inner, p, verify_crc)
                if im.magic != m.magic:
                    raise DecodeError(f"inner message magic {im.magic} differs from wrapper {m.magic}", p)
                if im.attributes & 0x07:
                    raise DecodeError("nested compressed message", p)
                msgs.append(im)
                p += im.size
        except DecodeError as e:
            raise DecodeError(f"{e.reason} (at byte {e.offset} of the decompressed wrapper)", pos) from None
        if not msgs:
            raise DecodeError("compressed wrapper holds no messages", pos)
        # v1: relative inner offsets; a wrapper offset of 0 means base 0 (AbstractLegacyRecordBatch).
        # v0: inner offsets are absolute.
        shift = m.offset - msgs[-1].offset if (m.magic == 1 and m.offset != 0) else 0
        inner_offsets = [im.offset for im in msgs]
        if shift and (min(inner_offsets) + shift < _INT64_MIN or max(inner_offsets) + shift > _INT64_MAX):
            # Java's long arithmetic would wrap; the offset field lies outside the CRC, so this is damage
            raise DecodeError(
                f"inner offsets fall outside int64 (wrapper offset {m.offset}, "
                f"last inner offset {msgs[-1].offset})",
                pos,
            )
        records = tuple(
            Record(im.offset + shift, m.timestamp if log_append else im.timestamp, im.key, im.value)
            for im in msgs
        )
        base, last = records[0].offset, records[-1].offset
        base_ts = records[0].timestamp
    return Batch(
        pos, m.size, m.magic, base, last, -1, m.crc, m.crc_valid, m.attributes, CODEC_NAMES[codec],
        ts_type, False, False, False, base_ts, m.timestamp, -1, -1, -1, len(records),
        records if decode_records else (),
    )  # fmt: skip


_DECODERS: dict[int, Callable[[Buffer, int, bool, bool], Batch]] = {
    0: _decode_legacy,
    1: _decode_legacy,
    2: _decode_v2,
}


def _decode_entry(buf: Buffer, pos: int, verify_crc: bool, decode_records: bool) -> Batch:
    if pos + HEADER_SIZE_UP_TO_MAGIC > len(buf):
        raise DecodeError(f"log entry header needs 17 bytes, {len(buf) - pos} left", pos)
    magic = buf[pos + 16]
    dec = _DECODERS.get(magic)
    if dec is None:
        raise DecodeError(f"unknown magic {magic}", pos + 16)
    try:
        return dec(buf, pos, verify_crc, decode_records)
    except DecodeError:
        raise
    except (
        IndexError,
        struct.error,
        ValueError,
        OverflowError,
        MemoryError,
    ) as e:  # pragma: no cover - defensive
        raise DecodeError(f"undecodable entry: {type(e).__name__}: {e}", pos) from None


def _as_buffer(buf: Buffer) -> Buffer:
    if isinstance(buf, (bytes, bytearray)):
        return buf
    if isinstance(buf, memoryview):
        return buf.cast("B") if buf.format != "B" or buf.ndim != 1 else buf
    raise DecodeError(f"expected bytes, bytearray or memoryview, got {type(buf).__name__}", 0)


def decode_batch(buf: Buffer, pos: int = 0) -> Batch:
    """Decode the one log entry (any magic) at ``pos``, verifying CRCs.

    Raises:
        DecodeError: truncated or malformed entry, or CRC mismatch (offset = position in buf).
    """
    buf = _as_buffer(buf)
    if pos < 0:
        raise DecodeError(f"negative position {pos}", pos)
    return _decode_entry(buf, pos, True, True)


# ---------------------------------------------------------------- segment iteration


def _raw(buf: Buffer, pos: int, length: int) -> bytes:
    return bytes(buf[pos : pos + min(length, RAW_SLICE_MAX)])


def _entry_extent(buf: Buffer, pos: int, n: int) -> tuple[int, str | None]:
    """(entry length, problem): problem is None (usable), "torn" or a reason (insane size, stop)."""
    left = n - pos
    if left < HEADER_SIZE_UP_TO_MAGIC:
        return left, "torn"
    _off, size = _ENTRY.unpack_from(buf, pos)
    if size < 0:
        return left, f"invalid entry size {size}"
    length = LOG_OVERHEAD + size
    magic = buf[pos + 16]
    if size < _MIN_SIZE.get(magic, 5):
        return left, f"invalid entry size {size} for magic {magic}"
    if length > left:
        return left, "torn"
    return length, None


def iter_batches(
    buf: Buffer, *, base_position: int = 0, verify_crc: bool = True, decode_records: bool = True
) -> Iterator[Batch | BadBatch]:
    """Iterate over the log entries of a segment (or a byte range of one), lazily.

    Yields a :class:`Batch` per good entry and a :class:`BadBatch` for a CRC mismatch or an
    undecodable entry (the walk continues at the next entry when the size field is sane);
    a torn tail (fewer than 17 bytes left, or an entry shorter than announced) yields a final
    ``BadBatch`` with reason ``"torn tail: N bytes"``. Positions are
    ``base_position + offset in buf``.

    Raises:
        DecodeError: only when ``buf`` is not a bytes-like object.
    """
    buf = _as_buffer(buf)
    n = len(buf)
    pos = 0
    while pos < n:
        length, problem = _entry_extent(buf, pos, n)
        if problem is not None:
            reason = f"torn tail: {length} bytes" if problem == "torn" else problem
            yield BadBatch(base_position + pos, reason, _raw(buf, pos, length), length)
            return
        yield _entry_or_bad(buf, pos, length, verify_crc, decode_records, base_position)
        pos += length


def _entry_or_bad(
    buf: Buffer, pos: int, length: int, verify_crc: bool, decode_records: bool, base_position: int
) -> Batch | BadBatch:
    try:
        b = _decode_entry(buf, pos, verify_crc, decode_records)
    except DecodeError as e:
        reason = f"{e.reason} at byte {base_position + e.offset}"
        return BadBatch(base_position + pos, reason, _raw(buf, pos, length), length)
    return _shift(b, base_position) if base_position else b


def _shift(b: Batch, base: int) -> Batch:
    return Batch(
        b.position + base, b.size, b.magic, b.base_offset, b.last_offset, b.partition_leader_epoch, b.crc,
        b.crc_valid, b.attributes, b.compression, b.timestamp_type, b.is_transactional, b.is_control,
        b.has_delete_horizon, b.base_timestamp, b.max_timestamp, b.producer_id, b.producer_epoch,
        b.base_sequence, b.records_count, b.records,
    )  # fmt: skip


def scan_batch_boundaries(buf: Buffer, start: int = 0) -> list[tuple[int, int]]:
    """``(position, length)`` of each complete entry from ``start``, reading only entry headers.

    Stops before a torn tail or an entry whose size field is unusable (CRCs are not checked).
    """
    buf = _as_buffer(buf)
    n = len(buf)
    out = []
    pos = max(0, start)
    while pos < n:
        length, problem = _entry_extent(buf, pos, n)
        if problem is not None:
            break
        out.append((pos, length))
        pos += length
    return out


def split_points(
    header_reader: Callable[[int, int], bytes], file_size: int, target_bytes: int, *, readahead: int = 1 << 16
) -> list[tuple[int, int]]:
    """Split a segment file into ``(start, end)`` byte ranges of about ``target_bytes`` that
    begin and end on entry boundaries, reading only entry headers through
    ``header_reader(offset, n) -> bytes`` (e.g. a seek+read or an fsspec range read).

    Reads are batched ``readahead`` bytes at a time, so small batches cost one read per
    ``readahead`` bytes and large batches one read each. The ranges cover ``[0, file_size)``
    exactly; an unusable tail (torn write, corrupt size) stays in the last range, where
    :func:`iter_batches` reports it.
    """
    if target_bytes <= 0:
        raise ValueError("target_bytes must be positive")
    if file_size <= 0:
        return []
    ranges = []
    start = pos = 0
    win_pos, win = 0, b""
    while pos < file_size:
        if not (win_pos <= pos and pos + HEADER_SIZE_UP_TO_MAGIC <= win_pos + len(win)):
            win_pos = pos
            win = bytes(header_reader(pos, min(max(readahead, HEADER_SIZE_UP_TO_MAGIC), file_size - pos)))
        rel = pos - win_pos
        if len(win) - rel < HEADER_SIZE_UP_TO_MAGIC:
            break
        _off, size = _ENTRY.unpack_from(win, rel)
        magic = win[rel + 16]
        if size < _MIN_SIZE.get(magic, 5) or pos + LOG_OVERHEAD + size > file_size:
            break
        pos += LOG_OVERHEAD + size
        if pos - start >= target_bytes and pos < file_size:
            ranges.append((start, pos))
            start = pos
    ranges.append((start, file_size))
    return ranges


# ---------------------------------------------------------------- encoders


def _encode_record_v2(r: NewRecord, index: int, base_ts: int) -> bytes:
    od = index if r.offset_delta is None else r.offset_delta
    parts = [b"\x00", write_varlong(r.timestamp - base_ts), write_varint(od)]
    for v in (r.key, r.value):
        if v is None:
            parts.append(b"\x01")  # varint -1
        else:
            parts += [write_varint(len(v)), bytes(v)]
    parts.append(write_varint(len(r.headers)))
    for hk, hv in r.headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        parts += [write_varint(len(hkb)), hkb]
        parts += [b"\x01"] if hv is None else [write_varint(len(hv)), bytes(hv)]
    body = b"".join(parts)
    return write_varint(len(body)) + body


def encode_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    compression: str | int = "none",
    timestamp_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    has_delete_horizon: bool = False,
) -> bytes:
    """Encode a magic 2 record batch, CRC-32C included, as a Kafka producer/leader would.

    ``base_timestamp`` defaults to the first record's timestamp (-1 for an empty batch),
    ``max_timestamp`` to the largest record timestamp; with ``timestamp_type=1``
    (LogAppendTime) pass the append time as ``max_timestamp``. ``last_offset_delta``
    defaults to the largest offset delta (set it to model a compacted batch).
    """
    records = [r if isinstance(r, NewRecord) else NewRecord(*r) for r in records]
    codec = codec_id(compression)
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else -1
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=-1)
    if last_offset_delta is None:
        last_offset_delta = max(
            (i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)), default=0
        )
    body = b"".join(_encode_record_v2(r, i, base_timestamp) for i, r in enumerate(records))
    if codec:
        body = compress(codec, body, 2)
    attrs = codec | (timestamp_type & 1) << 3 | (0x10 if is_transactional else 0)
    attrs |= (0x20 if is_control else 0) | (0x40 if has_delete_horizon else 0)
    after_crc = struct.pack(
        ">hiqqqhii", attrs, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
        base_sequence, len(records),
    ) + body  # fmt: skip
    size = V2_HEADER_SIZE - LOG_OVERHEAD + len(body)
    head = struct.pack(">qiibI", base_offset, size, partition_leader_epoch, 2, _crc32c(after_crc))
    return head + after_crc


def encode_control_batch(
    marker: str,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
) -> bytes:
    """Encode a transaction marker batch (one ABORT or COMMIT control record, §3.5)."""
    ctype = _CONTROL_TYPE_IDS.get(marker.upper()) if isinstance(marker, str) else None
    if ctype not in (0, 1):
        raise ValueError(f"marker must be 'COMMIT' or 'ABORT', not {marker!r}")
    rec = NewRecord(_I16x2.pack(0, ctype), _I16_I32.pack(0, coordinator_epoch), timestamp)
    return encode_batch(
        [rec], base_offset=base_offset, partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
        producer_epoch=producer_epoch, is_transactional=True, is_control=True,
    )  # fmt: skip


def _legacy_message(
    offset: int, magic: int, attrs: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = bytes([magic, attrs])
    if magic == 1:
        body += _Q.pack(timestamp)
    for v in (key, value):
        body += _I32.pack(-1) if v is None else _I32.pack(len(v)) + bytes(v)
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return _ENTRY.pack(offset, len(msg)) + msg


def encode_legacy_message_set(
    records: Sequence[NewRecord],
    *,
    magic: int = 1,
    base_offset: int = 0,
    compression: str | int = "none",
    log_append_time: int | None = None,
) -> bytes:
    """Encode a magic 0/1 message set; with compression, one wrapper message whose offset is
    the absolute last offset (inner offsets relative 0..n-1 for v1, absolute for v0).

    ``log_append_time`` (v1 only) sets the LogAppendTime attribute and that timestamp on the
    outer message(s). Headers are not representable in v0/v1.
    """
    if magic not in (0, 1):
        raise ValueError("magic must be 0 or 1")
    codec = codec_id(compression)
    if codec == 4:
        raise ValueError("zstd is not allowed in magic 0/1 message sets")
    records = [r if isinstance(r, NewRecord) else NewRecord(*r) for r in records]
    if any(r.headers for r in records):
        raise ValueError("magic 0/1 messages have no headers")
    lat_attr = 0x08 if (magic == 1 and log_append_time is not None) else 0
    if codec == 0:
        return b"".join(
            _legacy_message(
                base_offset + i, magic, lat_attr,
                log_append_time if lat_attr else r.timestamp, r.key, r.value,
            )
            for i, r in enumerate(records)
        )  # fmt: skip
    if not records:
        return b""
    inner = b"".join(
        _legacy_message(i if magic == 1 else base_offset + i, magic, 0, r.timestamp, r.key, r.value)
        for i, r in enumerate(records)
    )
    wrapper_ts = log_append_time if lat_attr else max(r.timestamp for r in records)
    return _legacy_message(
        base_offset + len(records) - 1,
        magic,
        codec | lat_attr,
        wrapper_ts,
        None,
        compress(codec, inner, magic),
    )


# ---------------------------------------------------------------- Arrow batch function
#
# Strategy: one pass over the 12-byte entry headers finds the boundaries; magic-2 entries take
# the columnar fast path (headers gathered for all batches at once with numpy, one CRC call per
# batch, records parsed "k-th record of every batch at once" with vectorised varint reads, and
# key/value bytes gathered from one arena into Arrow binary buffers — no per-record Python
# objects). Legacy entries, bad entries and any batch the fast path rejects go through the
# reference decoder (:func:`_entry_or_bad`), which is authoritative for reasons and values.

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
    """Result of :func:`batches_arrow`: one row per log entry, and one row per record."""

    batches: pa.RecordBatch
    records: pa.RecordBatch | None


_HDR_DTYPE = np.dtype(
    [
        ("base_offset", ">i8"),
        ("size", ">i4"),
        ("ple", ">i4"),
        ("magic", "i1"),
        ("crc", ">u4"),
        ("attributes", ">i2"),
        ("lod", ">i4"),
        ("base_ts", ">i8"),
        ("max_ts", ">i8"),
        ("pid", ">i8"),
        ("pepoch", ">i2"),
        ("bseq", ">i4"),
        ("count", ">i4"),
    ]
)
assert _HDR_DTYPE.itemsize == V2_HEADER_SIZE
_HDR_RANGE = np.arange(V2_HEADER_SIZE, dtype=np.int64)
_VEC_MIN_ACTIVE = 32  # below this many batches still holding records, finish in plain Python


def _np_uvarint(u8: np.ndarray, p: np.ndarray, max_bytes: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorised LEB128 read at every position in ``p``: (value uint64, new positions, bad mask)."""
    b = u8.take(p, mode="clip")
    val = (b & 0x7F).astype(np.uint64)
    length = np.ones(p.shape, np.int64)
    bad = np.zeros(p.shape, bool)
    idx = np.flatnonzero(b & 0x80)
    k = 1
    while idx.size:
        if k == max_bytes:
            bad[idx] = True
            break
        bb = u8.take(p[idx] + k, mode="clip")
        if k == 9:  # 10th byte of a varlong may only carry bit 63
            bad[idx[(bb & 0x7E) != 0]] = True
        val[idx] |= (bb & 0x7F).astype(np.uint64) << np.uint64(7 * k)
        length[idx] += 1
        idx = idx[(bb & 0x80) != 0]
        k += 1
    if max_bytes == 5:
        bad |= val > 0xFFFFFFFF
    return val, p + length, bad


def _zigzag(u: np.ndarray) -> np.ndarray:
    return (u >> np.uint64(1)).astype(np.int64) ^ -(u & np.uint64(1)).astype(np.int64)


def _py_uvarint(data: Buffer, p: int, max_bytes: int) -> tuple[int, int]:
    b = data[p]
    if b < 0x80:
        return b, p + 1
    return _wire_uvarint(data, p, max_bytes)


def _py_records(data: bytes, j: int, p: int, limit: int, k0: int, count: int, cols: tuple[list, ...]) -> int:
    """Parse records k0..count-1 of batch ``j`` from ``data[p:limit]`` into the column lists."""
    cj, ck, cod, ctsd, cks, ckl, cvs, cvl = cols
    for k in range(k0, count):
        u, p = _py_uvarint(data, p, 5)
        ln = (u >> 1) ^ -(u & 1)
        rec_end = p + ln
        if ln < 0 or rec_end > limit:
            raise DecodeError("record length", p)
        p += 1
        u, p = _py_uvarint(data, p, 10)
        if u > 0xFFFFFFFFFFFFFFFF:
            raise DecodeError("varlong", p)
        tsd = (u >> 1) ^ -(u & 1)
        u, p = _py_uvarint(data, p, 5)
        od = (u >> 1) ^ -(u & 1)
        u, p = _py_uvarint(data, p, 5)
        kl = (u >> 1) ^ -(u & 1)
        ks = p
        if kl < -1:
            raise DecodeError("key length", p)
        if kl > 0:
            p += kl
        u, p = _py_uvarint(data, p, 5)
        vl = (u >> 1) ^ -(u & 1)
        vs = p
        if vl < -1:
            raise DecodeError("value length", p)
        if vl > 0:
            p += vl
        if p >= rec_end:
            raise DecodeError("record truncated", p)
        if data[p] == 0:
            p += 1
        else:
            p = _py_skip_headers(data, p, rec_end)
        if p != rec_end:
            raise DecodeError("record length mismatch", p)
        cj.append(j)
        ck.append(k)
        cod.append(od)
        ctsd.append(tsd)
        cks.append(ks)
        ckl.append(kl)
        cvs.append(vs)
        cvl.append(vl)
    return p


def _py_skip_headers(data: Buffer, p: int, rec_end: int) -> int:
    """Walk (and validate like the reference) a record's headers; return the position after."""
    view = memoryview(data)[:rec_end]
    n_headers, p = read_varint(view, p)
    if n_headers < 0 or n_headers > rec_end - p:
        raise DecodeError("header count", p)
    for _ in range(n_headers):
        hk, p = _read_len_bytes(view, p, "header key")
        if hk is None:
            raise DecodeError("null header key", p)
        hk.decode("utf-8")  # UnicodeDecodeError is caught by the caller like any failure
        _hv, p = _read_len_bytes(view, p, "header value")
    return p


def _gather_binary(arena: np.ndarray, starts: np.ndarray, lens: np.ndarray) -> pa.Array:
    """Binary array of ``arena[starts[i] : starts[i] + lens[i]]`` (null where lens < 0).

    The wanted ranges never overlap, so sorted by start they interleave with the gaps between
    them into one monotonic offsets buffer over the arena (zero-copy); Arrow's ``take`` of the
    even elements then copies exactly the wanted bytes in C++.
    """
    n = len(starts)
    if n == 0:
        return pa.array([], pa.binary())
    valid = lens >= 0
    ln = np.where(valid, lens, 0).astype(np.int64)
    order = np.argsort(starts, kind="stable")
    s_sorted = starts[order].astype(np.int64)
    e_sorted = s_sorted + ln[order]
    offs = np.empty(2 * n + 1, np.int64)
    offs[0 : 2 * n : 2] = s_sorted
    offs[1 : 2 * n : 2] = e_sorted
    offs[2 * n] = max(len(arena), int(e_sorted[-1]))
    if (np.diff(offs) < 0).any() or offs[2 * n] > len(arena):  # cannot happen for parsed records
        raise DecodeError("overlapping record fields", int(s_sorted[0]))
    both = pa.Array.from_buffers(pa.large_binary(), 2 * n, [None, pa.py_buffer(offs), pa.py_buffer(arena)])
    rank = np.empty(n, np.int64)
    rank[order] = np.arange(n, dtype=np.int64)
    picked = both.take(pa.array(2 * rank))
    null_count = int(n - valid.sum())
    if null_count:
        mask = pa.py_buffer(np.packbits(valid, bitorder="little"))
        bufs = picked.buffers()
        picked = pa.Array.from_buffers(pa.large_binary(), n, [mask, bufs[1], bufs[2]], null_count=null_count)
    return picked.cast(pa.binary()) if int(ln.sum()) <= 0x7FFFFFFF else picked.cast(pa.large_binary())


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


def batches_arrow(
    buf: Buffer, *, base_position: int = 0, with_records: bool = True, verify_crc: bool = True
) -> BatchesArrow:
    """Decode a segment (or byte range) into Arrow: a batch-header table with one row per
    entry — bad ones included, with ``error`` and ``raw`` (≤ 4096 bytes) set and the decoded
    columns null — and, when ``with_records``, a records table in file order.

    Agrees with :func:`iter_batches` (the reference) row for row. Raises only
    :class:`~epochlib.errors.DecodeError`, and only for a non-bytes-like ``buf``.
    """
    buf = _as_buffer(buf)
    fast_pos, slow = _scan_entries(buf)
    slow_items: list[Batch | BadBatch] = []
    for pos, length, problem in slow:
        if problem is None:
            slow_items.append(_entry_or_bad(buf, pos, length, verify_crc, with_records, base_position))
        else:
            reason = f"torn tail: {length} bytes" if problem == "torn" else problem
            slow_items.append(BadBatch(base_position + pos, reason, _raw(buf, pos, length), length))

    fb = _fast_v2(buf, np.asarray(fast_pos, np.int64), verify_crc, with_records)
    for pos in fb.rejected:
        length = LOG_OVERHEAD + _ENTRY.unpack_from(buf, pos)[1]
        slow_items.append(_entry_or_bad(buf, pos, length, verify_crc, with_records, base_position))

    # -- batch table: fast rows (numpy) + slow rows (reference values), sorted by position
    h = fb.headers
    keep = fb.keep
    k_n = int(keep.sum())
    codec = (h["attributes"][keep] & 7).astype(np.int64)
    comp_names = np.array(["none", "gzip", "snappy", "lz4", "zstd"], dtype=object)
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
        "compression": pa.array(comp_names[codec], pa.string()),
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
        records = _sorted(fb.records(base_position), slow_rec, "batch_position", RECORD_SCHEMA)
    return BatchesArrow(batches, records)


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


class _FastResult:
    """Columnar output of the magic-2 fast path (batches that passed every check)."""

    __slots__ = ("positions", "headers", "keep", "rejected", "_rec")

    def __init__(self, positions, headers, keep, rejected, rec):
        self.positions = positions
        self.headers = headers
        self.keep = keep
        self.rejected = rejected
        self._rec = rec

    def records(self, base_position: int) -> pa.RecordBatch:
        if self._rec is None:
            return pa.RecordBatch.from_pylist([], schema=RECORD_SCHEMA)
        arena, j, od, tsd, ks, kl, vs, vl, ctype = self._rec
        h = self.headers
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
            pa.array(self.positions[j] + base_position, pa.int64()),
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


def _fast_v2(buf: Buffer, positions: np.ndarray, verify_crc: bool, with_records: bool) -> _FastResult:
    nb = len(positions)
    u8 = np.frombuffer(buf, np.uint8) if len(buf) else np.zeros(0, np.uint8)
    h = u8[positions[:, None] + _HDR_RANGE].view(_HDR_DTYPE).reshape(nb) if nb else np.zeros(0, _HDR_DTYPE)
    sizes = h["size"].astype(np.int64)
    ends = positions + LOG_OVERHEAD + sizes
    attrs = h["attributes"].astype(np.int64)
    counts = h["count"].astype(np.int64)
    codec = attrs & 7
    ok = (codec <= 4) & (counts >= 0)
    if verify_crc and nb:
        mv = memoryview(buf)
        crc = _crc32c
        slices = map(slice, (positions + 21).tolist(), ends.tolist())
        computed = np.fromiter(map(crc, map(mv.__getitem__, slices)), np.int64, nb)
        ok &= computed == h["crc"].astype(np.int64)
    rec = None
    if with_records and nb:
        rec_start = positions + V2_HEADER_SIZE
        rec_limit = ends.copy()
        # a record takes at least 7 bytes (same guard as the reference)
        ok &= counts <= (rec_limit - rec_start) // 7 + 1
        comp_idx = np.flatnonzero(ok & (codec != 0))
        data = buf
        if comp_idx.size:
            # the arena holds buf only if uncompressed batches have records to read from it
            arena_base = len(buf) if (ok & (codec == 0) & (counts > 0)).any() else 0
            chunks = [bytes(buf)] if arena_base else []
            mv = memoryview(buf)
            ds, failed = _decompress_sections(
                mv, u8, comp_idx, rec_start[comp_idx], rec_limit[comp_idx], codec[comp_idx]
            )
            lens = np.fromiter(map(len, ds), np.int64, len(ds))
            ends_c = np.cumsum(lens) + arena_base
            rec_start[comp_idx] = ends_c - lens
            rec_limit[comp_idx] = ends_c
            chunks += ds
            ok[failed] = False
            ok &= counts <= (rec_limit - rec_start) // 7 + 1
            data = b"".join(chunks)
            u8 = np.frombuffer(data, np.uint8)
        elif not isinstance(data, bytes):
            data = bytes(data)
        j, od, tsd, ks, kl, vs, vl = _parse_records(data, u8, rec_start, rec_limit, counts, ok)
        # control records: the key's type, checked like the reference (few rows, plain Python)
        ctype = np.zeros(len(j), np.int16)
        for r in np.flatnonzero(((attrs & 0x20) != 0)[j]).tolist():
            key = None if kl[r] < 0 else data[ks[r] : ks[r] + kl[r]]
            val = None if vl[r] < 0 else data[vs[r] : vs[r] + vl[r]]
            try:
                ctype[r] = _control_fields(key, val, 0)[0]
            except DecodeError:
                ok[j[r]] = False
        good = ok[j]
        if not good.all():
            j, od, tsd, ks, kl, vs, vl, ctype = (a[good] for a in (j, od, tsd, ks, kl, vs, vl, ctype))
        rec = (u8, j, od, tsd, ks, kl, vs, vl, ctype)
    keep = ok
    rejected = positions[~ok].tolist()
    return _FastResult(positions, h, keep, rejected, rec)


# Pseudo codecs of the batches _decompress_sections inlines (recognised by _inline_shapes).
_LZ4_ONE_BLOCK = -3  # an LZ4 frame of one compressed block,
_LZ4_ONE_STORED = -4  # or of one stored (incompressible: bit 31 of its size) block
_SNAPPY_ONE_CHUNK = -2  # a xerial snappy stream of one chunk
_SCRATCH = 64 * 1024  # Kafka's LZ4 block size (BD 0x40), 2x xerial's chunk; bigger output takes the generic path
_lz4_block_into = cramjam.lz4.decompress_block_into
_snappy_len = cramjam.snappy.decompress_raw_len
_snappy_into = cramjam.snappy.decompress_raw_into
_LZ4_MAGIC = np.array([0x04, 0x22, 0x4D, 0x18], np.uint8)
_LZ4_BLOCK_MAX = np.array([-1, -1, -1, -1, 64 << 10, 256 << 10, 1 << 20, 4 << 20], np.int64)  # by BD bits 4-6
_XERIAL_MAGIC = np.frombuffer(b"\x82SNAPPY\x00", np.uint8)
_LE32 = np.array([1, 1 << 8, 1 << 16, 1 << 24], np.int64)


def _inline_shapes(u8: np.ndarray, start: np.ndarray, end: np.ndarray, codec: np.ndarray) -> np.ndarray:
    """``codec``, with the pseudo codecs above where ``u8[start:end]`` has the shape Kafka's Java client
    writes for a small batch, recognised for all batches at once:

    - LZ4 (Lz4BlockOutputStream): magic, FLG 0x60 (independent blocks, no checksums, no content
      size), a valid BD, one compressed or stored block filling the frame (``15 + size == length``,
      ``size`` ≤ the block maximum) and the end mark; the block is ``[start + 11, end - 4)``;
    - snappy (xerial SnappyOutputStream): the 8-byte magic, 8 header bytes and one chunk filling the
      stream (``20 + length == total``); the chunk is ``[start + 20, end)``.

    ``_compression``'s decoders read exactly these frames the same way (its LZ4 one-block fast path and
    walk, its xerial chunk loop), so the inlined decoding below agrees with them by construction.
    """
    out = codec.copy()
    n = end - start
    last = len(u8) - 1

    def gather(pos: np.ndarray, width: int) -> np.ndarray:  # u8[pos : pos + width] per row
        return u8.take(np.minimum(pos[:, None] + np.arange(width), last)).astype(np.int64)

    at = np.flatnonzero((codec == 3) & (n >= 15))  # LZ4
    if at.size:
        hdr, mark = gather(start[at], 11), gather(end[at] - 4, 4)
        size = hdr[:, 7:11] @ _LE32
        stored = size >= 1 << 31
        size &= 0x7FFFFFFF
        ok = (hdr[:, :4] == _LZ4_MAGIC).all(axis=1) & (hdr[:, 4] == 0x60) & (size + 15 == n[at])
        ok &= (size <= _LZ4_BLOCK_MAX[(hdr[:, 5] >> 4) & 7]) & (mark.sum(axis=1) == 0)
        out[at[ok]] = np.where(stored[ok], _LZ4_ONE_STORED, _LZ4_ONE_BLOCK)
    at = np.flatnonzero((codec == 2) & (n >= 20))  # xerial snappy
    if at.size:
        hdr = gather(start[at], 20)
        size = hdr[:, 16:20] @ _LE32[::-1]  # big-endian
        ok = (hdr[:, :8] == _XERIAL_MAGIC).all(axis=1) & (size + 20 == n[at])
        out[at[ok]] = _SNAPPY_ONE_CHUNK
    return out


def _decompress_sections(
    mv: memoryview, u8: np.ndarray, idx: np.ndarray, start: np.ndarray, end: np.ndarray, codec: np.ndarray
) -> tuple[list[bytes], list[int]]:
    """Decompress the records sections ``mv[start:end]`` of the batches ``idx``: (their bytes in order,
    the ``idx`` that failed — ``b""`` in their place).

    Each one-record batch costs a Python round trip, so the shapes Kafka writes for small batches are
    decoded inline here (one zstd frame; one LZ4 block; one xerial snappy chunk; one gzip member),
    ~0.3-0.7 µs a batch instead of ~1-1.3 µs through :func:`_compression.decompress`. Anything else,
    any failure and anything past the decompressed-size cap goes through ``decompress``, which owns
    the results and error reasons (the reference decoder calls it too).
    """
    codecs_l = _inline_shapes(u8, start, end, codec).tolist()
    ds: list[bytes] = []
    append = ds.append
    failed: list[int] = []
    zobj = zstd_decompressobj
    gzobj = zlib.decompressobj
    # the decompressed-size cap, read at call time like decompress() does; zstd input up to zsmall bytes
    # cannot decompress past it (see _compression.ZSTD_SMALL_RATIO), larger input takes the generic path
    limit = _compression.MAX_DECOMPRESSED_SIZE
    zsmall = limit // _compression.ZSTD_SMALL_RATIO
    scratch = memoryview(bytearray(_SCRATCH))
    scratch_cap = min(limit, _SCRATCH)
    lz4_into, snappy_len, snappy_into = _lz4_block_into, _snappy_len, _snappy_into
    for i, s, e, c in zip(idx.tolist(), start.tolist(), end.tolist(), codecs_l, strict=True):
        if c == 4:
            if zobj is not None and e - s <= zsmall:  # one zstd frame
                try:
                    o = zobj()
                    d = o.decompress(mv[s:e])
                except ZSTD_ERROR:
                    pass
                else:
                    if o.eof and not o.unused_data and len(d) <= limit:
                        append(d)
                        continue
        elif c == 1:  # one gzip member
            o = gzobj(31)
            try:
                d = o.decompress(mv[s:e], limit + 1)
            except zlib.error:
                pass
            else:
                if o.eof and not o.unused_data and len(d) <= limit:
                    append(d)
                    continue
        elif c < 0:
            if c == _LZ4_ONE_STORED:  # an incompressible batch: the block is the records
                if e - s - 15 <= limit:
                    append(mv[s + 11 : e - 4].tobytes())
                    continue
                c = 3
            else:
                try:
                    if c == _LZ4_ONE_BLOCK:
                        k = lz4_into(mv[s + 11 : e - 4], scratch)
                        c = 3
                    else:  # _SNAPPY_ONE_CHUNK: the chunk's header says its length, checked first
                        c = 2
                        block = mv[s + 20 : e]
                        k = snappy_into(block, scratch) if snappy_len(block) <= scratch_cap else -1
                except Exception:  # noqa: BLE001 - cramjam's own errors; the generic path rules
                    k = -1
                if 0 <= k <= scratch_cap:
                    append(scratch[:k].tobytes())
                    continue
        try:
            append(decompress(c, mv[s:e], 2))
        except DecodeError:
            failed.append(i)
            append(b"")
    return ds, failed


def _parse_records(
    data: bytes, u8: np.ndarray, start: np.ndarray, limit: np.ndarray, counts: np.ndarray, ok: np.ndarray
) -> tuple[np.ndarray, ...]:
    """Parse the records of every ``ok`` batch; clears ``ok`` for batches that do not parse."""
    cur = start.copy()
    parts: list[tuple[np.ndarray, ...]] = []
    active = np.flatnonzero(ok & (counts > 0))
    k = 0
    while active.size >= _VEC_MIN_ACTIVE:
        p = cur[active]
        lim = limit[active]
        u, p, bad = _np_uvarint(u8, p, 5)
        ln = _zigzag(u)
        rec_end = p + ln
        bad |= (ln < 0) | (rec_end > lim)
        p = np.minimum(p + 1, lim)
        u, p, b2 = _np_uvarint(u8, p, 10)
        tsd = _zigzag(u)
        u, p, b3 = _np_uvarint(u8, p, 5)
        od = _zigzag(u)
        u, p, b4 = _np_uvarint(u8, p, 5)
        kl = _zigzag(u)
        ks = p
        p = np.minimum(p + np.maximum(kl, 0), lim)
        u, p, b5 = _np_uvarint(u8, p, 5)
        vl = _zigzag(u)
        vs = p
        p = np.minimum(p + np.maximum(vl, 0), lim)
        bad |= b2 | b3 | b4 | b5 | (kl < -1) | (vl < -1) | (p >= rec_end)
        hc = u8.take(p, mode="clip")
        p = p + 1
        for i in np.flatnonzero((hc != 0) & ~bad).tolist():
            try:
                p[i] = _py_skip_headers(data, int(p[i]) - 1, int(rec_end[i]))
            except (DecodeError, UnicodeDecodeError):
                bad[i] = True
        bad |= p != rec_end
        if bad.any():
            ok[active[bad]] = False
        good = ~bad
        a = active[good]
        parts.append(
            (a, np.full(a.size, k, np.int64), od[good], tsd[good], ks[good], kl[good], vs[good], vl[good])
        )
        cur[a] = rec_end[good]
        k += 1
        active = a[counts[a] > k]
    # the long tail (few batches with many records left): plain Python, same columns
    cols: tuple[list, ...] = ([], [], [], [], [], [], [], [])
    for i in active.tolist():
        mark = len(cols[0])
        try:
            cur[i] = _py_records(data, i, int(cur[i]), int(limit[i]), k, int(counts[i]), cols)
        except (DecodeError, IndexError, UnicodeDecodeError):
            ok[i] = False
            for c in cols:
                del c[mark:]
    if cols[0]:
        parts.append(tuple(np.asarray(c, np.int64) for c in cols))
    ok &= cur == limit  # no bytes may remain after recordsCount records
    if parts:
        j, kk, od, tsd, ks, kl, vs, vl = (np.concatenate(x) for x in zip(*parts, strict=True))
        order = np.lexsort((kk, j))
        j, od, tsd, ks, kl, vs, vl = (x[order] for x in (j, od, tsd, ks, kl, vs, vl))
    else:
        j = od = tsd = ks = kl = vs = vl = np.zeros(0, np.int64)
    return j, od, tsd, ks, kl, vs, vl
