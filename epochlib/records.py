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

import crc32c as _crc32c_mod

from ._compression import CODEC_NAMES, codec_id, compress, decompress
from ._wire import (
    read_varint,
    read_varlong,
    write_varint,
    write_varlong,
)
from .errors import DecodeError

__all__ = [
    "BadBatch",
    "Batch",
    "CONTROL_TYPE_NAMES",
    "NewRecord",
    "Record",
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
    view = data[:end] if end < len(data) else data
    out = []
    for i in range(count):
        start = pos
        length, pos = read_varint(view, pos)
        if length < 0 or pos + length > end:
            raise DecodeError(f"record {i} length {length} runs past the batch", start)
        rec_end = pos + length
        rec = view[:rec_end] if rec_end < end else view
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
        ts = log_append_time if log_append_time is not None else base_timestamp + ts_delta
        seq = _incr_sequence(base_sequence, off_delta)
        if is_control:
            ctype, cname, cepoch = _control_fields(key, value, start)
            out.append(
                Record(base_offset + off_delta, ts, key, value, tuple(headers), seq, ctype, cname, cepoch)
            )
        else:
            out.append(Record(base_offset + off_delta, ts, key, value, tuple(headers), seq))
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
        computed = _crc32c(buf[pos + 21 : end])
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
        pos, LOG_OVERHEAD + size, magic, base_offset, base_offset + lod, ple, crc, crc_valid, attrs,
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
        computed = zlib.crc32(buf[pos + 16 : end])
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
        try:
            b = _decode_entry(
                buf[: pos + length] if pos + length < n else buf, pos, verify_crc, decode_records
            )
        except DecodeError as e:
            yield BadBatch(
                base_position + pos,
                f"{e.reason} at byte {base_position + e.offset}",
                _raw(buf, pos, length),
                length,
            )
        else:
            yield _shift(b, base_position) if base_position else b
        pos += length


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
