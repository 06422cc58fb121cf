"""The Arrow batch function's columnar fast path for magic-2 batches (no per-record Python objects).

Strategy: the 61-byte headers of all batches are gathered at once with numpy, one CRC call per
batch, compressed records sections decompressed by :func:`epochlib._compression.decompress_sections`,
records parsed "k-th record of every batch at once" with vectorised varint reads (the long tail of
few batches with many records in plain Python), and key/value bytes gathered from one arena into
Arrow binary buffers. Every check of the reference decoder (:mod:`.reference`) is applied; a batch
failing one is handed back (``rejected``) for the reference to report.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa

from .._compression import CODEC_NONE, CODEC_ZSTD, decompress_sections
from .._wire import read_uvarint as _wire_uvarint
from .._wire import read_varint
from ..errors import DecodeError
from .reference import _control_fields, _read_len_bytes
from .values import LOG_OVERHEAD, V2_HEADER_SIZE, Buffer, _crc32c

__all__ = ["FastV2", "decode_v2_fast"]


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


class FastV2:
    """Columnar output of :func:`decode_v2_fast`.

    ``positions`` the entries given, ``headers`` their 61-byte headers (a numpy structured array),
    ``keep`` the mask of those that passed every check, ``rejected`` the positions of the others (the
    reference decoder reports them), ``rec`` ``None`` or the records of the kept batches:
    ``(arena, j, offset_delta, ts_delta, key_start, key_len, value_start, value_len, control_type)``
    with ``j`` the batch index and the starts in the ``arena`` byte array (lengths -1 = null).
    """

    __slots__ = ("positions", "headers", "keep", "rejected", "rec")

    def __init__(
        self, positions: np.ndarray, headers: np.ndarray, keep: np.ndarray, rejected: list[int],
        rec: tuple[np.ndarray, ...] | None,
    ) -> None:
        self.positions = positions
        self.headers = headers
        self.keep = keep
        self.rejected = rejected
        self.rec = rec


def decode_v2_fast(buf: Buffer, positions: np.ndarray, verify_crc: bool, with_records: bool,
                   max_decoded: int | None = None, *, offset_range: tuple[int, int] | None = None) -> FastV2:
    """Decode the magic-2 entries at ``positions`` (sizes already checked to fit ``buf``) column-wise;
    entries failing any check the reference applies are left to the reference (``rejected``), and so are
    those whose base or last offset lies outside ``offset_range`` (``(lowest, highest)``, inclusive: the
    segment's range, :func:`epochlib.records.iter_batches`).

    With ``max_decoded`` (and records), decompression stops once that many bytes are decompressed:
    only the first entries are decoded and ``positions`` of the result is that prefix (the caller
    decodes the rest in another call, :func:`epochlib.records.iter_batches_arrow`).
    """
    nb = len(positions)
    u8 = np.frombuffer(buf, np.uint8) if len(buf) else np.zeros(0, np.uint8)
    h = u8[positions[:, None] + _HDR_RANGE].view(_HDR_DTYPE).reshape(nb) if nb else np.zeros(0, _HDR_DTYPE)
    sizes = h["size"].astype(np.int64)
    ends = positions + LOG_OVERHEAD + sizes
    attrs = h["attributes"].astype(np.int64)
    counts = h["count"].astype(np.int64)
    codec = attrs & 7
    ok = (codec <= CODEC_ZSTD) & (counts >= 0)  # codec ids above zstd are unknown
    if offset_range is not None and nb:
        lo, hi = offset_range
        base = h["base_offset"].astype(np.int64)
        last = base + h["lod"].astype(np.int64)  # int64 wrap-around, as the reference's (and Java's) lastOffset
        ok &= (base >= lo) & (base <= hi) & (last >= lo) & (last <= hi)
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
        comp_idx = np.flatnonzero(ok & (codec != CODEC_NONE))
        data = buf
        if comp_idx.size:
            # the arena holds buf only if uncompressed batches have records to read from it
            arena_base = len(buf) if (ok & (codec == CODEC_NONE) & (counts > 0)).any() else 0
            chunks = [bytes(buf)] if arena_base else []
            ds, failed = decompress_sections(buf, rec_start[comp_idx], rec_limit[comp_idx], codec[comp_idx],
                                             max_decoded)
            if len(ds) < comp_idx.size:  # the budget ran out: keep the entries before the first not done
                m = int(comp_idx[len(ds)])
                positions, h, sizes, ends, attrs, counts, codec, ok, rec_start, rec_limit = (
                    a[:m] for a in (positions, h, sizes, ends, attrs, counts, codec, ok, rec_start, rec_limit))
                comp_idx = comp_idx[: len(ds)]
                nb = m
            lens = np.fromiter(map(len, ds), np.int64, len(ds))
            ends_c = np.cumsum(lens) + arena_base
            rec_start[comp_idx] = ends_c - lens
            rec_limit[comp_idx] = ends_c
            chunks += ds
            ok[comp_idx[np.asarray(failed, np.int64)]] = False
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
    return FastV2(positions, h, keep, rejected, rec)


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
