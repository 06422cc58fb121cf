"""Kafka's primitive encodings (spec/kafka-formats.md §2), sans-IO.

Every reader takes ``(buf, pos)`` — ``buf`` is ``bytes``, ``bytearray`` or ``memoryview`` —
and returns ``(value, new_pos)``. Readers raise :class:`~epochlib.errors.DecodeError`
with the position of the field that could not be read; nothing else escapes.
Every writer takes a value and returns ``bytes``; writers exist for round-trip tests,
the simulator and fixtures.

Integers are big-endian two's complement. Varints are LEB128 (7 bits a byte, least
significant group first); signed varints are zig-zag encoded. A 32-bit unsigned varint
has at most 5 bytes, a 64-bit one at most 10 (Kafka's reader rejects longer ones).
"""

from __future__ import annotations

import base64
import struct
from collections.abc import Callable
from typing import Any

from .errors import DecodeError

Buffer = bytes | bytearray | memoryview

_I8 = struct.Struct(">b")
_U8 = struct.Struct(">B")
_I16 = struct.Struct(">h")
_U16 = struct.Struct(">H")
_I32 = struct.Struct(">i")
_U32 = struct.Struct(">I")
_I64 = struct.Struct(">q")
_F64 = struct.Struct(">d")


def _fixed(st: struct.Struct, name: str) -> Callable[[Buffer, int], tuple[Any, int]]:
    size = st.size
    unpack_from = st.unpack_from

    def read(buf: Buffer, pos: int) -> tuple[Any, int]:
        if pos < 0 or pos + size > len(buf):
            raise DecodeError(f"{name} needs {size} bytes, {max(0, len(buf) - pos)} left", pos)
        return unpack_from(buf, pos)[0], pos + size

    read.__name__ = f"read_{name}"
    read.__doc__ = f"Read a big-endian {name} ({size} bytes)."
    return read


read_int8 = _fixed(_I8, "int8")
read_uint8 = _fixed(_U8, "uint8")
read_int16 = _fixed(_I16, "int16")
read_uint16 = _fixed(_U16, "uint16")
read_int32 = _fixed(_I32, "int32")
read_uint32 = _fixed(_U32, "uint32")
read_int64 = _fixed(_I64, "int64")
read_float64 = _fixed(_F64, "float64")


def read_bool(buf: Buffer, pos: int) -> tuple[bool, int]:
    """Read a BOOLEAN: one byte, any non-zero value is true."""
    v, pos = read_uint8(buf, pos)
    return v != 0, pos


def read_uvarint(buf: Buffer, pos: int, max_bytes: int = 5) -> tuple[int, int]:
    """Read an UNSIGNED_VARINT (LEB128); ``max_bytes`` 5 for 32-bit, 10 for 64-bit values."""
    result = 0
    shift = 0
    start = pos
    n = len(buf)
    for _ in range(max_bytes):
        if pos >= n:
            raise DecodeError("varint runs past the end", start)
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            if max_bytes == 5 and result > 0xFFFFFFFF:
                raise DecodeError("varint does not fit in 32 bits", start)
            return result, pos
        shift += 7
    raise DecodeError(f"varint longer than {max_bytes} bytes", start)


def read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag VARINT (32-bit signed)."""
    u, pos = read_uvarint(buf, pos, 5)
    return (u >> 1) ^ -(u & 1), pos


def read_varlong(buf: Buffer, pos: int) -> tuple[int, int]:
    """Read a zig-zag VARLONG (64-bit signed)."""
    u, pos = read_uvarint(buf, pos, 10)
    if u > 0xFFFFFFFFFFFFFFFF:
        raise DecodeError("varlong does not fit in 64 bits", pos)
    return (u >> 1) ^ -(u & 1), pos


def read_raw(buf: Buffer, pos: int, n: int, what: str = "field") -> tuple[bytes, int]:
    """Read exactly ``n`` bytes as ``bytes``."""
    if n < 0:
        raise DecodeError(f"negative {what} length {n}", pos)
    end = pos + n
    if end > len(buf):
        raise DecodeError(f"{what} of {n} bytes runs past the end ({len(buf) - pos} left)", pos)
    return bytes(buf[pos:end]), end


def _utf8(raw: bytes) -> str:
    """A wire string as Kafka's readers take it (``new String(bytes, UTF_8)``): invalid bytes become
    U+FFFD, and the rest of the message is still read."""
    return raw.decode("utf-8", "replace")


def read_string(buf: Buffer, pos: int) -> tuple[str, int]:
    """Read a STRING: int16 length ≥ 0, then UTF-8."""
    start = pos
    n, pos = read_int16(buf, pos)
    if n < 0:
        raise DecodeError(f"non-nullable string has length {n}", start)
    raw, pos = read_raw(buf, pos, n, "string")
    return _utf8(raw), pos


def read_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    """Read a NULLABLE_STRING: int16 length, -1 = null."""
    start = pos
    n, pos = read_int16(buf, pos)
    if n == -1:
        return None, pos
    if n < -1:
        raise DecodeError(f"string length {n}", start)
    raw, pos = read_raw(buf, pos, n, "string")
    return _utf8(raw), pos


def read_compact_string(buf: Buffer, pos: int) -> tuple[str, int]:
    """Read a COMPACT_STRING: uvarint N+1, then N bytes UTF-8."""
    start = pos
    n1, pos = read_uvarint(buf, pos)
    if n1 == 0:
        raise DecodeError("non-nullable compact string is null", start)
    raw, end = read_raw(buf, pos, n1 - 1, "string")
    return _utf8(raw), end


def read_compact_nullable_string(buf: Buffer, pos: int) -> tuple[str | None, int]:
    """Read a COMPACT_NULLABLE_STRING: uvarint N+1 (0 = null)."""
    n1, pos = read_uvarint(buf, pos)
    if n1 == 0:
        return None, pos
    raw, end = read_raw(buf, pos, n1 - 1, "string")
    return _utf8(raw), end


def read_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    """Read BYTES: int32 length ≥ 0, then the bytes."""
    start = pos
    n, pos = read_int32(buf, pos)
    if n < 0:
        raise DecodeError(f"non-nullable bytes has length {n}", start)
    return read_raw(buf, pos, n, "bytes")


def read_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    """Read NULLABLE_BYTES: int32 length, -1 = null."""
    start = pos
    n, pos = read_int32(buf, pos)
    if n == -1:
        return None, pos
    if n < -1:
        raise DecodeError(f"bytes length {n}", start)
    return read_raw(buf, pos, n, "bytes")


def read_compact_bytes(buf: Buffer, pos: int) -> tuple[bytes, int]:
    """Read COMPACT_BYTES: uvarint N+1, then N bytes."""
    start = pos
    n1, pos = read_uvarint(buf, pos)
    if n1 == 0:
        raise DecodeError("non-nullable compact bytes is null", start)
    return read_raw(buf, pos, n1 - 1, "bytes")


def read_compact_nullable_bytes(buf: Buffer, pos: int) -> tuple[bytes | None, int]:
    """Read COMPACT_NULLABLE_BYTES: uvarint N+1 (0 = null)."""
    n1, pos = read_uvarint(buf, pos)
    if n1 == 0:
        return None, pos
    return read_raw(buf, pos, n1 - 1, "bytes")


def read_uuid(buf: Buffer, pos: int) -> tuple[str, int]:
    """Read a UUID (16 bytes) and return Kafka's text form (22-char URL-safe base64)."""
    raw, pos = read_raw(buf, pos, 16, "uuid")
    return uuid_to_str(raw), pos


def read_tagged_fields(buf: Buffer, pos: int) -> tuple[dict[int, bytes], int]:
    """Read a tagged-field section: count, then (tag, size, payload) triples.

    Returns the raw payloads by tag so unknown tags are kept, as Kafka does. Tags may come in any order
    and repeat (the last one counts), as Kafka's generated readers accept them; its writers sort them.
    """
    start = pos
    count, pos = read_uvarint(buf, pos)
    if count > len(buf) - pos:
        raise DecodeError(f"tagged-field count {count} exceeds the bytes left", start)
    out: dict[int, bytes] = {}
    for _ in range(count):
        tag, pos = read_uvarint(buf, pos)
        size, pos = read_uvarint(buf, pos)
        out[tag], pos = read_raw(buf, pos, size, f"tagged field {tag}")
    return out, pos


# ---------------------------------------------------------------- text forms


def uuid_to_str(raw: bytes) -> str:
    """Kafka's Uuid text form: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(bytes(raw)).rstrip(b"=").decode("ascii")


def uuid_from_str(text: str) -> bytes:
    """Parse Kafka's 22-character Uuid text form into 16 bytes."""
    try:
        raw = base64.urlsafe_b64decode(text + "==")
    except (ValueError, TypeError) as e:
        raise DecodeError(f"invalid uuid text {text!r}: {e}", 0) from None
    if len(raw) != 16:
        raise DecodeError(f"uuid text {text!r} is not 16 bytes", 0)
    return raw


ZERO_UUID = uuid_to_str(bytes(16))


# ---------------------------------------------------------------- writers


def write_int8(v: int) -> bytes:
    return _I8.pack(v)


def write_int16(v: int) -> bytes:
    return _I16.pack(v)


def write_uint16(v: int) -> bytes:
    return _U16.pack(v)


def write_int32(v: int) -> bytes:
    return _I32.pack(v)


def write_uint32(v: int) -> bytes:
    return _U32.pack(v)


def write_int64(v: int) -> bytes:
    return _I64.pack(v)


def write_float64(v: float) -> bytes:
    return _F64.pack(v)


def write_bool(v: bool) -> bytes:
    return b"\x01" if v else b"\x00"


def write_uvarint(v: int) -> bytes:
    if v < 0:
        raise ValueError("unsigned varint must be >= 0")
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def write_varint(v: int) -> bytes:
    return write_uvarint(((v << 1) ^ (v >> 31)) & 0xFFFFFFFF)


def write_varlong(v: int) -> bytes:
    return write_uvarint(((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF)


def write_string(v: str) -> bytes:
    raw = v.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def write_nullable_string(v: str | None) -> bytes:
    return _I16.pack(-1) if v is None else write_string(v)


def write_compact_string(v: str) -> bytes:
    raw = v.encode("utf-8")
    return write_uvarint(len(raw) + 1) + raw


def write_compact_nullable_string(v: str | None) -> bytes:
    return b"\x00" if v is None else write_compact_string(v)


def write_bytes(v: bytes) -> bytes:
    return _I32.pack(len(v)) + bytes(v)


def write_nullable_bytes(v: bytes | None) -> bytes:
    return _I32.pack(-1) if v is None else write_bytes(v)


def write_compact_bytes(v: bytes) -> bytes:
    return write_uvarint(len(v) + 1) + bytes(v)


def write_compact_nullable_bytes(v: bytes | None) -> bytes:
    return b"\x00" if v is None else write_compact_bytes(v)


def write_uuid(v: str | bytes) -> bytes:
    raw = uuid_from_str(v) if isinstance(v, str) else bytes(v)
    if len(raw) != 16:
        raise ValueError("uuid must be 16 bytes")
    return raw


def write_tagged_fields(fields: dict[int, bytes] | None = None) -> bytes:
    fields = fields or {}
    out = [write_uvarint(len(fields))]
    for tag in sorted(fields):
        payload = fields[tag]
        out += [write_uvarint(tag), write_uvarint(len(payload)), payload]
    return b"".join(out)


def java_string_hash(s: str) -> int:
    """Java's ``String.hashCode`` over UTF-16 code units, with int32 wrap-around."""
    h = 0
    data = s.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def offsets_partition_for(group_id: str, num_partitions: int = 50) -> int:
    """The ``__consumer_offsets`` partition of a group (spec §1.6; Kafka's Utils.abs)."""
    h = java_string_hash(group_id)
    h = 0 if h == -(1 << 31) else abs(h)
    return h % num_partitions
