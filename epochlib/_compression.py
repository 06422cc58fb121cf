"""Compression codecs of Kafka log entries (spec/kafka-formats.md §3.4, §3.6), sans-IO.

Strategy: every codec is a pair ``decompress_<name>(data, magic) -> bytes`` /
``compress_<name>(data, magic) -> bytes`` looked up by codec id in two tables
(:data:`DECOMPRESSORS`, :data:`COMPRESSORS`). Decompressors raise only
:class:`~epochlib.errors.DecodeError` (offset 0 = start of the compressed bytes; the caller
shifts it to a file position). Compressors write what Kafka's Java client writes:

* gzip: one RFC 1952 stream.
* snappy: xerial snappy-java stream framing (16-byte header, then int32 BE chunk length +
  raw snappy block per ≤ 32 KiB of input). The reader also accepts one bare snappy block.
* lz4: LZ4 frame, FLG 0x60 (independent blocks, no checksums, no content size), BD 0x40
  (64 KiB blocks). For magic 0 Kafka computed the header checksum over magic+FLG+BD (the
  historic "broken HC"), so the writer reproduces it and the reader never checks the HC.
* zstd: a standard Zstandard frame; read with a *streaming* decoder because Kafka's writer
  does not store the content size. ``zstandard`` is used when importable (≈30× less per-call
  overhead than cramjam's streaming decoder, which matters for one-record batches), else cramjam.

All block codecs come from ``cramjam``. Codec ids are Kafka's attribute values (``CODEC_NONE`` 0 …
``CODEC_ZSTD`` 4), defined here once.

Every decompression of the package happens here. Each codec has a one-frame helper for the shape
Kafka writes for a small batch (one gzip member, one zstd frame, an LZ4 frame of one block, a xerial
stream of one chunk) that returns ``None`` for anything else; the per-codec decompressor tries it
first and otherwise walks the stream (owning every error reason), and :func:`decompress_sections`
— the Arrow fast path's many-batches entry point — recognises those shapes for all batches at once
and calls the same helpers, falling back to :func:`decompress`. So both decoders give the same
bytes, the same cap and the same errors.

Decompressed size cap (compression bombs): every decompressor stops with
``DecodeError("batch decompresses to more than N bytes")`` once its output would exceed
:data:`MAX_DECOMPRESSED_SIZE` (or the ``max_size`` given to :func:`decompress`), and checks
*before* it allocates past the cap: gzip inflates with ``max_length``; snappy reads the
uncompressed length from each block's header first; lz4 sums the blocks as it walks the frame
(and refuses a declared content size over the cap); zstd feeds a streaming decoder slices of
input small enough that one slice cannot produce more than a fraction of the cap (libzstd
refuses a block that regenerates more than 128 KiB, and every block costs at least 4 input
bytes). Peak memory per call is therefore about the cap plus one slice's output, not the
bomb's full size.
"""

from __future__ import annotations

import struct
import threading
import zlib
from collections.abc import Callable

import cramjam
import numpy as np

from .errors import DecodeError

try:  # optional fast path for zstd; cramjam is the guaranteed one
    import zstandard as _zstandard

    _ZSTD_DCTX = _zstandard.ZstdDecompressor()
    # For hot loops: ``zstd_decompressobj()`` / ``ZSTD_ERROR`` (None / () without zstandard).
    zstd_decompressobj = _ZSTD_DCTX.decompressobj
    ZSTD_ERROR: tuple[type[Exception], ...] = (_zstandard.ZstdError,)
except ImportError:  # pragma: no cover - depends on the environment
    _zstandard = None
    _ZSTD_DCTX = None
    zstd_decompressobj = None
    ZSTD_ERROR = ()

__all__ = [
    "MAX_DECOMPRESSED_SIZE",
    "ZSTD_ERROR",
    "ZSTD_SMALL_RATIO",
    "zstd_decompressobj",
    "CODEC_GZIP",
    "CODEC_IDS",
    "CODEC_LZ4",
    "CODEC_NAMES",
    "CODEC_NONE",
    "CODEC_SNAPPY",
    "CODEC_ZSTD",
    "COMPRESSORS",
    "DECOMPRESSORS",
    "LEGACY_CODECS",
    "codec_id",
    "compress",
    "decompress",
    "decompress_sections",
]

#: Codec ids: Kafka's values of the compression bits (attributes & 0x07) of a batch or message.
CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4, CODEC_ZSTD = 0, 1, 2, 3, 4
#: The codecs a magic 0/1 message may name (zstd arrived with magic 2).
LEGACY_CODECS = frozenset((CODEC_NONE, CODEC_GZIP, CODEC_SNAPPY, CODEC_LZ4))
CODEC_NAMES: dict[int, str] = {
    CODEC_NONE: "none", CODEC_GZIP: "gzip", CODEC_SNAPPY: "snappy", CODEC_LZ4: "lz4", CODEC_ZSTD: "zstd"
}
CODEC_IDS: dict[str, int] = {v: k for k, v in CODEC_NAMES.items()}

_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_LE_U32 = struct.Struct("<I")
_LE_U64 = struct.Struct("<Q")

_XERIAL_MAGIC = b"\x82SNAPPY\x00"
_XERIAL_HEADER = _XERIAL_MAGIC + _I32.pack(1) + _I32.pack(1)
_XERIAL_CHUNK = 32 * 1024

_LZ4_MAGIC = b"\x04\x22\x4d\x18"
_LZ4_BLOCK = 64 * 1024
_LZ4_BLOCK_MAX = {4: 64 * 1024, 5: 256 * 1024, 6: 1024 * 1024, 7: 4 * 1024 * 1024}

#: Largest decompressed records section (v2) or wrapper value (v0/v1) a decompressor returns: 64 MiB.
#:
#: Why 64 MiB: a broker refuses batches over ``message.max.bytes`` (default 1 MiB + 12, counted
#: *compressed*, as stored), and real payloads compress ~2-10:1 (JSON/text with gzip or zstd), so a
#: default-configured cluster writes batches of a few MiB decompressed. Past 64 MiB the ratio over the
#: default limit is > 64:1: the signature of a bomb or of corrupt data, not of a batch.
#: ``__consumer_offsets`` batches are far smaller still (uncompressed by default; group metadata values
#: are KiB to a few MiB). The decoders hold about three copies of a batch's records (decompressed
#: bytes, the Arrow path's arena, the Arrow columns), so 64 MiB costs an executor's Python worker
#: ~200 MiB at worst, where 256 MiB would cost ~0.8 GiB. A topic with a raised ``max.message.bytes``
#: and very compressible data may need more: pass ``max_size`` to :func:`decompress`, or assign this
#: attribute (``epochlib._compression.MAX_DECOMPRESSED_SIZE = n``; it is read at call time, so the
#: record decoders see it too). It is a per-batch cap: a byte range of many batches decodes to the
#: sum of theirs.
MAX_DECOMPRESSED_SIZE = 64 * 1024 * 1024

#: libzstd refuses a block that regenerates more than 128 KiB (the format's Block_Maximum_Size), and a
#: block that yields output costs at least 4 input bytes (3-byte header + 1 RLE byte): zstd input of
#: ``n`` bytes never decompresses to more than ``n * ZSTD_SMALL_RATIO`` bytes. Inputs of at most
#: ``cap // ZSTD_SMALL_RATIO`` bytes can therefore be decompressed in one call without a bound (the
#: hot path of one-record batches); larger ones are fed in slices. A test pins the libzstd behaviour.
ZSTD_SMALL_RATIO = 128 * 1024 // 4

_CODEC_ERRORS = (cramjam.DecompressionError, ValueError, OSError, MemoryError, OverflowError)
_gzip_obj = zlib.decompressobj
_lz4_into = cramjam.lz4.decompress_block_into
_snappy_len = cramjam.snappy.decompress_raw_len
_snappy_into = cramjam.snappy.decompress_raw_into


def codec_id(compression: str | int) -> int:
    """Codec id (0–4) from a name (``"none"``, ``"gzip"``, …) or an id; ValueError otherwise."""
    if isinstance(compression, int) and compression in CODEC_NAMES:
        return compression
    try:
        return CODEC_IDS[str(compression).lower()]
    except KeyError:
        raise ValueError(f"unknown compression {compression!r}") from None


# ---------------------------------------------------------------- xxHash32 (lz4 header checksum)

_P1, _P2, _P3, _P4, _P5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
_M32 = 0xFFFFFFFF


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _xxh32(data: bytes, seed: int = 0) -> int:
    """xxHash32 of ``data`` (only ever called on a few header bytes)."""
    n = len(data)
    p = 0
    if n >= 16:
        v = [(seed + _P1 + _P2) & _M32, (seed + _P2) & _M32, seed & _M32, (seed - _P1) & _M32]
        while p + 16 <= n:
            for i in range(4):
                lane = _LE_U32.unpack_from(data, p)[0]
                v[i] = (_rotl((v[i] + lane * _P2) & _M32, 13) * _P1) & _M32
                p += 4
        h = (_rotl(v[0], 1) + _rotl(v[1], 7) + _rotl(v[2], 12) + _rotl(v[3], 18)) & _M32
    else:
        h = (seed + _P5) & _M32
    h = (h + n) & _M32
    while p + 4 <= n:
        h = (_rotl((h + _LE_U32.unpack_from(data, p)[0] * _P3) & _M32, 17) * _P4) & _M32
        p += 4
    while p < n:
        h = (_rotl((h + data[p] * _P5) & _M32, 11) * _P1) & _M32
        p += 1
    h ^= h >> 15
    h = (h * _P2) & _M32
    h ^= h >> 13
    h = (h * _P3) & _M32
    h ^= h >> 16
    return h


_LZ4_FLG_BD = b"\x60\x40"
_LZ4_HC = (_xxh32(_LZ4_FLG_BD) >> 8) & 0xFF  # 0x82, as python-lz4 writes
_LZ4_HC_BROKEN = (_xxh32(_LZ4_MAGIC + _LZ4_FLG_BD) >> 8) & 0xFF  # Kafka 0.8/0.9 (magic 0)


# ---------------------------------------------------------------- decompressors


def _too_big(limit: int, codec: str, offset: int = 0) -> DecodeError:
    return DecodeError(f"batch decompresses to more than {limit} bytes ({codec})", offset)


def _gzip_member(data: bytes | memoryview, limit: int) -> bytes | None:
    """The shape Kafka writes: one complete gzip member filling ``data``, within the cap; else None
    (the caller's full path then owns the result or the error)."""
    d = _gzip_obj(31)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error:
        return None
    return out if d.eof and not d.unused_data and len(out) <= limit else None


def _decompress_gzip(data: bytes, magic: int, limit: int) -> bytes:
    """One or more gzip members (Java's GZIPInputStream reads concatenated members too).

    zlib directly: ~1.6 µs a call against ~4.3 µs through cramjam, which is what a one-record
    ``__consumer_offsets`` batch pays per record. ``max_length`` stops inflating one byte past
    what is left of the cap, so a bomb never allocates more than the cap.
    """
    out = _gzip_member(data, limit)
    if out is not None:
        return out
    d = zlib.decompressobj(31)
    try:
        out = d.decompress(data, limit + 1)
    except zlib.error as e:
        raise DecodeError(f"gzip: {e}", 0) from None
    if len(out) > limit:
        raise _too_big(limit, "gzip")
    if not d.eof:  # the output stayed under max_length, so zlib consumed all input: truncated
        raise DecodeError("gzip stream truncated", len(data))
    if not d.unused_data:
        return out
    parts = [out]  # more members (rare): a list, not repeated concatenation
    total = len(out)
    rest = d.unused_data
    while rest:
        d = zlib.decompressobj(31)
        try:
            chunk = d.decompress(rest, limit - total + 1)
        except zlib.error as e:
            raise DecodeError(f"gzip: {e}", len(data) - len(rest)) from None
        total += len(chunk)
        if total > limit:
            raise _too_big(limit, "gzip")
        if not d.eof:
            raise DecodeError("gzip stream truncated", len(data))
        parts.append(chunk)
        rest = d.unused_data
    return b"".join(parts)


def _snappy_block(block: memoryview, scratch: memoryview, limit: int) -> bytes | None:
    """One raw snappy block decoded into ``scratch``, when the length its header states fits both
    ``scratch`` and the cap; else None (the caller's full path then owns the result or the error)."""
    try:
        if _snappy_len(block) > limit:
            return None
        k = _snappy_into(block, scratch)  # raises when the output would not fit scratch
    except Exception:  # noqa: BLE001 - cramjam's own error types
        return None
    return scratch[:k].tobytes() if k <= limit else None  # tobytes: half the cost of bytes()


def _decompress_snappy(data: bytes, magic: int, limit: int) -> bytes:
    """A xerial stream or one bare block. Each block's header states its uncompressed length, which
    is checked against the cap before cramjam allocates it."""
    raw_len = _snappy_len
    if bytes(data[:8]) != _XERIAL_MAGIC:
        if raw_len(data) > limit:
            raise _too_big(limit, "snappy")
        return bytes(cramjam.snappy.decompress_raw(data))
    n = len(data)
    if n >= 20 and _U32.unpack_from(data, 16)[0] + 20 == n:  # one chunk: what Kafka writes for a small batch
        out1 = _snappy_block(memoryview(data)[20:], _small_scratch(), limit)
        if out1 is not None:
            return out1
    out = []
    total = 0
    pos, n = 16, len(data)
    if n < 16:
        raise DecodeError("xerial snappy header truncated", 0)
    while pos < n:
        if pos + 4 > n:
            raise DecodeError("xerial snappy chunk length truncated", pos)
        (clen,) = _U32.unpack_from(data, pos)
        pos += 4
        if pos + clen > n:
            raise DecodeError(f"xerial snappy chunk of {clen} bytes runs past the end", pos - 4)
        block = data[pos : pos + clen]
        total += raw_len(block)
        if total > limit:
            raise _too_big(limit, "snappy", pos)
        out.append(bytes(cramjam.snappy.decompress_raw(block)))
        pos += clen
    return b"".join(out)


_SCRATCH = threading.local()
# the one-block helpers' scratch: Kafka's LZ4 block size (BD 0x40), twice xerial's chunk
_SMALL_BLOCK = 64 * 1024


def _lz4_scratch(size: int) -> bytearray:
    """A reusable per-thread output buffer: allocating 64 KiB per one-record batch cost more than the
    decompression itself."""
    buf = getattr(_SCRATCH, "buf", None)
    if buf is None or len(buf) < size:
        buf = _SCRATCH.buf = bytearray(size)
    return buf


def _small_scratch() -> memoryview:
    """The per-thread scratch, exactly :data:`_SMALL_BLOCK` bytes long (its length bounds the output)."""
    return memoryview(_lz4_scratch(_SMALL_BLOCK))[:_SMALL_BLOCK]


def _lz4_block(block: memoryview, stored: bool, scratch: memoryview, limit: int) -> bytes | None:
    """The only block of an LZ4 frame (Kafka's shape for a small batch): a stored block as it is, a
    compressed one decoded into ``scratch`` (whose length bounds the output); None when it does not
    decode within the cap (the caller's frame walk then owns the result or the error)."""
    if stored:
        return block.tobytes() if len(block) <= limit else None
    try:
        k = _lz4_into(block, scratch)
    except Exception:  # noqa: BLE001 - cramjam's own error types
        return None
    return scratch[:k].tobytes() if 0 <= k <= limit else None


def _decompress_lz4(data: bytes, magic: int, limit: int) -> bytes:
    """Walk an LZ4 frame block by block; the header checksum is not verified (see module doc).

    Blocks decompress into a scratch buffer of the frame's block maximum (≤ 4 MiB); the running
    total is checked against the cap before a block's output is kept.
    """
    n = len(data)
    # Fast path for what Kafka's Lz4BlockOutputStream writes for a small batch: FLG 0x60 (independent
    # blocks, no checksums, no content size), one block, then the end mark (decompress_sections
    # recognises the same shape for many batches at once). Anything else, and any inconsistency,
    # takes the general walk below (which owns the error messages).
    if n >= 15 and data[4] == 0x60 and bytes(data[:4]) == _LZ4_MAGIC:
        (size,) = _LE_U32.unpack_from(data, 7)
        stored = size >= 0x80000000
        size &= 0x7FFFFFFF
        max_block = _LZ4_BLOCK_MAX.get((data[5] >> 4) & 0x07)
        if (max_block is not None and size <= max_block and 15 + size == n
                and _LE_U32.unpack_from(data, 11 + size)[0] == 0):
            scratch = memoryview(_lz4_scratch(max_block))[:max_block]
            out1 = _lz4_block(memoryview(data)[11 : 11 + size], stored, scratch, limit)
            if out1 is not None:
                return out1
    if n < 7 or bytes(data[:4]) != _LZ4_MAGIC:
        raise DecodeError("not an LZ4 frame (bad magic)", 0)
    flg, bd = data[4], data[5]
    if flg >> 6 != 1:
        raise DecodeError(f"unsupported LZ4 frame version {flg >> 6}", 4)
    if not flg & 0x20:
        # Kafka's Lz4BlockInputStream rejects dependent blocks as well.
        raise DecodeError("LZ4 frame with dependent blocks is not supported", 4)
    block_checksum = bool(flg & 0x10)
    content_checksum = bool(flg & 0x04)
    if flg & 0x08 and n >= 14 and _LE_U64.unpack_from(data, 6)[0] > limit:  # declared content size
        raise _too_big(limit, "lz4", 6)
    pos = 6 + (8 if flg & 0x08 else 0) + (4 if flg & 0x01 else 0) + 1  # + HC
    max_block = _LZ4_BLOCK_MAX.get((bd >> 4) & 0x07)
    if max_block is None:
        raise DecodeError(f"invalid LZ4 block maximum size in BD byte {bd:#x}", 5)
    out = []
    total = 0
    scratch = _lz4_scratch(max_block)
    while True:
        if pos + 4 > n:
            raise DecodeError("LZ4 frame truncated (no end mark)", pos)
        (size,) = _LE_U32.unpack_from(data, pos)
        pos += 4
        if size == 0:
            break
        stored = size & 0x80000000
        size &= 0x7FFFFFFF
        if size > max_block or pos + size > n:
            raise DecodeError(f"LZ4 block of {size} bytes runs past the end", pos - 4)
        block = data[pos : pos + size]
        k = size if stored else cramjam.lz4.decompress_block_into(bytes(block), scratch)
        total += k
        if total > limit:
            raise _too_big(limit, "lz4", pos - 4)
        out.append(bytes(block) if stored else bytes(scratch[:k]))
        pos += size + (4 if block_checksum else 0)
    if content_checksum and pos + 4 > n:
        raise DecodeError("LZ4 content checksum truncated", pos)
    return b"".join(out)


def _zstd_frame(data: bytes | memoryview, limit: int) -> bytes | None:
    """The shape Kafka writes: one complete zstd frame filling ``data``, when ``zstandard`` is there and
    ``data`` is small enough (see :data:`ZSTD_SMALL_RATIO`) to decode in one call without passing the
    cap; else None (the caller's full path then owns the result or the error)."""
    if _ZSTD_DCTX is None or len(data) > limit // ZSTD_SMALL_RATIO:
        return None
    d = _ZSTD_DCTX.decompressobj()
    try:
        out = d.decompress(data)
    except _zstandard.ZstdError:
        return None
    return out if d.eof and not d.unused_data and len(out) <= limit else None


def _decompress_zstd(data: bytes, magic: int, limit: int) -> bytes:
    """Zstandard frame(s) back to back, streamed (Kafka's writer stores no content size).

    Input of at most ``limit // ZSTD_SMALL_RATIO`` bytes cannot exceed the cap and is decoded in one
    call per frame; larger input goes to :func:`_zstd_sliced`.
    """
    if magic < 2:
        raise DecodeError("zstd is not allowed in magic 0/1 message sets", 0)
    if _ZSTD_DCTX is None:
        return _decompress_zstd_cramjam(data, limit)
    if len(data) > limit // ZSTD_SMALL_RATIO:
        return _zstd_sliced(data, limit)
    out1 = _zstd_frame(data, limit)
    if out1 is not None:
        return out1
    out = []
    rest = data
    while True:
        d = _ZSTD_DCTX.decompressobj()
        try:
            out.append(d.decompress(rest))
        except _zstandard.ZstdError as e:
            raise DecodeError(f"zstd: {e}", 0) from None
        if not d.eof:
            raise DecodeError("zstd frame truncated", len(data))
        rest = d.unused_data
        if not rest:
            return out[0] if len(out) == 1 else b"".join(out)


def _zstd_sliced(data: bytes, limit: int) -> bytes:
    """Feed the decoder slices of ``max(64, limit >> 18)`` bytes: one slice adds at most ~``limit / 8``
    (+ one 128 KiB block) before the running total is checked against the cap."""
    mv = memoryview(data)
    n = len(mv)
    step = max(64, limit >> 18)
    out = []
    total = 0
    pos = 0
    while True:  # one frame per turn
        d = _ZSTD_DCTX.decompressobj()
        while not d.eof:
            if pos >= n:
                raise DecodeError("zstd frame truncated", n)
            try:
                chunk = d.decompress(mv[pos : pos + step])
            except _zstandard.ZstdError as e:
                raise DecodeError(f"zstd: {e}", 0) from None
            pos = min(n, pos + step)
            total += len(chunk)
            if total > limit:
                raise _too_big(limit, "zstd")
            out.append(chunk)
        pos -= len(d.unused_data)
        if pos >= n:
            return b"".join(out)


def _decompress_zstd_cramjam(data: bytes, limit: int) -> bytes:
    """Without ``zstandard``: cramjam has no bounded streaming decoder, so small input (bounded by
    :data:`ZSTD_SMALL_RATIO`) is decoded directly and larger input into a buffer of the cap + 1."""
    if len(data) <= limit // ZSTD_SMALL_RATIO:
        return bytes(cramjam.zstd.decompress(bytes(data)))
    buf = bytearray(limit + 1)
    try:
        k = cramjam.zstd.decompress_into(bytes(data), buf)
    except cramjam.DecompressionError as e:
        if "whole buffer" in str(e):  # cramjam's word for "the output did not fit"
            raise _too_big(limit, "zstd") from None
        raise
    if k > limit:
        raise _too_big(limit, "zstd")
    return bytes(memoryview(buf)[:k])


def _decompress_none(data: bytes, magic: int, limit: int) -> bytes:
    return bytes(data)


DECOMPRESSORS: dict[int, Callable[[bytes, int, int], bytes]] = {
    CODEC_NONE: _decompress_none,
    CODEC_GZIP: _decompress_gzip,
    CODEC_SNAPPY: _decompress_snappy,
    CODEC_LZ4: _decompress_lz4,
    CODEC_ZSTD: _decompress_zstd,
}


def decompress(
    codec: int, data: bytes | bytearray | memoryview, magic: int = 2, *, max_size: int | None = None
) -> bytes:
    """Decompress a records section (v2) or wrapper value (v0/v1); raises only DecodeError.

    ``max_size`` caps the decompressed size (default :data:`MAX_DECOMPRESSED_SIZE`, read at call
    time); more raises ``DecodeError("batch decompresses to more than N bytes (codec)")`` before the
    output grows past the cap (see the module doc). Uncompressed data (codec 0) is not capped.
    """
    fn = DECOMPRESSORS.get(codec)
    if fn is None:
        raise DecodeError(f"unknown compression codec {codec}", 0)
    limit = MAX_DECOMPRESSED_SIZE if max_size is None else max_size
    try:
        return fn(data, magic, limit)
    except DecodeError:
        raise
    except _CODEC_ERRORS as e:
        raise DecodeError(f"{CODEC_NAMES[codec]}: {e}", 0) from None


# ---------------------------------------------------------------- many records sections at once
#
# The Arrow fast path decompresses every compressed batch of a byte range. A one-record batch pays a
# Python round trip per batch, so the frame shapes Kafka's Java client writes for a small batch are
# recognised for all batches at once (numpy) and decoded by the one-frame helpers above (~0.3-0.7 µs a
# batch instead of ~1-1.3 µs through decompress()); anything else, any failure and anything past the
# cap goes through decompress(), which owns the results and the error reasons.

_OTHER, _ONE_BLOCK, _ONE_STORED = 0, 1, 2  # frame shapes (not codecs): see _frame_shapes
_NP_LZ4_MAGIC = np.frombuffer(_LZ4_MAGIC, np.uint8)
# the block maximum by BD bits 4-6, as _LZ4_BLOCK_MAX
_NP_LZ4_BLOCK_MAX = np.array([-1, -1, -1, -1, 64 << 10, 256 << 10, 1 << 20, 4 << 20], np.int64)
_NP_XERIAL_MAGIC = np.frombuffer(_XERIAL_MAGIC, np.uint8)
_NP_LE32 = np.array([1, 1 << 8, 1 << 16, 1 << 24], np.int64)


def _frame_shapes(u8: np.ndarray, start: np.ndarray, end: np.ndarray, codec: np.ndarray) -> np.ndarray:
    """Per section ``u8[start:end]``: ``_ONE_BLOCK``/``_ONE_STORED`` where it has the shape Kafka's Java
    client writes for a small batch, else ``_OTHER``:

    - LZ4 (Lz4BlockOutputStream): magic, FLG 0x60 (independent blocks, no checksums, no content
      size), a valid BD, one compressed (or stored: bit 31 of its size) block filling the frame
      (``15 + size == length``, ``size`` ≤ the block maximum) and the end mark; the block is
      ``[start + 11, end - 4)``. The same test as :func:`_decompress_lz4`'s one-block path;
    - snappy (xerial SnappyOutputStream): the 8-byte magic, 8 header bytes and one chunk filling the
      stream (``20 + length == total``); the chunk is ``[start + 20, end)``, as in
      :func:`_decompress_snappy`.
    """
    out = np.full(len(codec), _OTHER, np.int8)
    n = end - start
    last = len(u8) - 1

    def gather(pos: np.ndarray, width: int) -> np.ndarray:  # u8[pos : pos + width] per row
        return u8.take(np.minimum(pos[:, None] + np.arange(width), last)).astype(np.int64)

    at = np.flatnonzero((codec == CODEC_LZ4) & (n >= 15))
    if at.size:
        hdr, mark = gather(start[at], 11), gather(end[at] - 4, 4)
        size = hdr[:, 7:11] @ _NP_LE32
        stored = size >= 1 << 31
        size &= 0x7FFFFFFF
        ok = (hdr[:, :4] == _NP_LZ4_MAGIC).all(axis=1) & (hdr[:, 4] == 0x60) & (size + 15 == n[at])
        ok &= (size <= _NP_LZ4_BLOCK_MAX[(hdr[:, 5] >> 4) & 7]) & (mark.sum(axis=1) == 0)
        out[at[ok]] = np.where(stored[ok], _ONE_STORED, _ONE_BLOCK)
    at = np.flatnonzero((codec == CODEC_SNAPPY) & (n >= 20))
    if at.size:
        hdr = gather(start[at], 20)
        size = hdr[:, 16:20] @ _NP_LE32[::-1]  # big-endian
        ok = (hdr[:, :8] == _NP_XERIAL_MAGIC).all(axis=1) & (size + 20 == n[at])
        out[at[ok]] = _ONE_BLOCK
    return out


def decompress_sections(
    buf: bytes | bytearray | memoryview, start: np.ndarray, end: np.ndarray, codec: np.ndarray,
    budget: int | None = None,
) -> tuple[list[bytes], list[int]]:
    """Decompress the records sections ``buf[start[i]:end[i]]`` (magic 2) with codec ids ``codec[i]``:
    (their bytes in order, the indices ``i`` that failed — ``b""`` in their place).

    Each section gives what :func:`decompress` gives for it (the cap included); only the cost differs.
    With ``budget``, decompression stops after the section that brings the total to ``budget`` bytes:
    fewer sections than asked are returned, and the caller decodes the rest later (so a run of
    sections that each stay under the per-section cap cannot add up to gigabytes held at once).
    """
    mv = memoryview(buf)
    u8 = np.frombuffer(mv, np.uint8) if len(mv) else np.zeros(0, np.uint8)
    shapes = _frame_shapes(u8, start, end, codec).tolist()
    limit = MAX_DECOMPRESSED_SIZE  # read at call time, like decompress()
    scratch = _small_scratch()
    gzip_member, zstd_frame, lz4_block, snappy_block = _gzip_member, _zstd_frame, _lz4_block, _snappy_block
    out: list[bytes] = []
    append = out.append
    failed: list[int] = []
    sections = zip(range(len(shapes)), start.tolist(), end.tolist(), codec.tolist(), shapes, strict=True)
    total = 0
    for i, s, e, c, shape in sections:
        if budget is not None and total >= budget:
            break
        if c == CODEC_ZSTD:
            d = zstd_frame(mv[s:e], limit)
        elif c == CODEC_GZIP:
            d = gzip_member(mv[s:e], limit)
        elif shape == _OTHER:
            d = None
        elif c == CODEC_LZ4:
            d = lz4_block(mv[s + 11 : e - 4], shape == _ONE_STORED, scratch, limit)
        else:
            d = snappy_block(mv[s + 20 : e], scratch, limit)
        if d is None:
            try:
                d = decompress(c, mv[s:e], 2)
            except DecodeError:
                failed.append(i)
                d = b""
        append(d)
        total += len(d)
    return out, failed


# ---------------------------------------------------------------- compressors


def _compress_gzip(data: bytes, magic: int) -> bytes:
    return bytes(cramjam.gzip.compress(data))


def _compress_snappy(data: bytes, magic: int) -> bytes:
    out = [_XERIAL_HEADER]
    for i in range(0, len(data), _XERIAL_CHUNK):
        block = bytes(cramjam.snappy.compress_raw(data[i : i + _XERIAL_CHUNK]))
        out += [_U32.pack(len(block)), block]
    return b"".join(out)


def _compress_lz4(data: bytes, magic: int) -> bytes:
    hc = _LZ4_HC_BROKEN if magic == 0 else _LZ4_HC
    out = [_LZ4_MAGIC, _LZ4_FLG_BD, bytes([hc])]
    for i in range(0, len(data), _LZ4_BLOCK):
        raw = data[i : i + _LZ4_BLOCK]
        block = bytes(cramjam.lz4.compress_block(raw, store_size=False))
        if len(block) >= len(raw):
            out += [_LE_U32.pack(len(raw) | 0x80000000), bytes(raw)]
        else:
            out += [_LE_U32.pack(len(block)), block]
    out.append(b"\x00\x00\x00\x00")
    return b"".join(out)


def _compress_zstd(data: bytes, magic: int) -> bytes:
    if magic < 2:
        raise ValueError("zstd needs magic 2")
    return bytes(cramjam.zstd.compress(data))


def _compress_none(data: bytes, magic: int) -> bytes:
    return bytes(data)


COMPRESSORS: dict[int, Callable[[bytes, int], bytes]] = {
    CODEC_NONE: _compress_none,
    CODEC_GZIP: _compress_gzip,
    CODEC_SNAPPY: _compress_snappy,
    CODEC_LZ4: _compress_lz4,
    CODEC_ZSTD: _compress_zstd,
}


def compress(codec: int, data: bytes, magic: int = 2) -> bytes:
    """Compress ``data`` the way Kafka's Java client frames it for ``codec``."""
    return COMPRESSORS[codec](bytes(data), magic)
