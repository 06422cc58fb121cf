"""The per-entry reference decoder: one v2 batch or one v0/v1 message (a compressed wrapper with
its inner messages), strict — it raises :class:`~epochlib.errors.DecodeError`, a CRC mismatch
included (spec/kafka-formats.md §3.2–§3.6).

Plain Python and the test oracle: segment walking (:mod:`.segments`) calls it per entry, and the
Arrow fast path (:mod:`.fastpath`) must agree with it; it is authoritative for reasons and values.
Decompression is :mod:`epochlib._compression`'s.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Callable
from typing import NamedTuple

from .._compression import CODEC_NAMES, CODEC_NONE, LEGACY_CODECS, decompress
from .._wire import read_varint, read_varlong
from ..errors import DecodeError
from .values import (
    _ENTRY,
    _I16_I32,
    _I32,
    _LEGACY_V0,
    _LEGACY_V1,
    _MIN_SIZE,
    _V2,
    CONTROL_TYPE_NAMES,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    V2_HEADER_SIZE,
    Batch,
    Buffer,
    Record,
    _as_buffer,
    _crc32c,
    _I16x2,
)

__all__ = ["decode_batch"]


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
            hks = hk.decode("utf-8", "replace")  # as Kafka's DefaultRecord reads it (Utils.utf8: new String)
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
        if codec == CODEC_NONE:
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
    if codec not in LEGACY_CODECS:
        raise DecodeError(f"invalid legacy compression codec {codec}", pos + 17)
    ts_type = -1 if m.magic == 0 else (m.attributes >> 3) & 1
    log_append = m.magic == 1 and ts_type == 1
    if codec == CODEC_NONE:
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


def decode_batch(buf: Buffer, pos: int = 0) -> Batch:
    """Decode the one log entry (any magic) at ``pos``, verifying CRCs.

    Raises:
        DecodeError: truncated or malformed entry, or CRC mismatch (offset = position in buf).
    """
    buf = _as_buffer(buf)
    if pos < 0:
        raise DecodeError(f"negative position {pos}", pos)
    return _decode_entry(buf, pos, True, True)
