"""Walking a segment (or a byte range of one): :func:`iter_batches` never raises for bad data — a
corrupt entry becomes a :class:`~.values.BadBatch` and the walk resumes at the next entry when the
size field is sane (bad CRC recovery); a torn tail ends the walk with a final
``BadBatch("torn tail: N bytes")`` — unless the bytes run to the end of the file (``ends_file``), where
the walk ends as Kafka's reader does: at zero bytes after the last entry (a preallocated segment's fill),
silently, and at an incomplete final entry with an :class:`~.values.IncompleteTail` — when the file is its
partition's last segment (``last_segment``, the only one a broker appends to while it is copied); in a rolled
segment the same cut is lost bytes, a ``BadBatch``.
:func:`scan_batch_boundaries` and :func:`split_points` read only entry headers, to plan byte ranges
(spec/kafka-formats.md §3.1, §4.1).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator

import numpy as np

from ..errors import DecodeError
from .reference import _decode_entry
from .values import (
    _ENTRY,
    _MIN_SIZE,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RAW_SLICE_MAX,
    V2_HEADER_SIZE,
    BadBatch,
    Batch,
    Buffer,
    IncompleteTail,
    _as_buffer,
    _crc32c,
)

__all__ = ["SEGMENT_OFFSET_SPAN", "iter_batches", "scan_batch_boundaries", "segment_base_offset", "split_points",
           "stop_reason"]

#: A segment holds offsets ``base .. base + SEGMENT_OFFSET_SPAN``: its indexes store offsets relative to the base
#: in 32 bits, and Kafka's recovery rejects a batch whose last offset does not fit (``LogSegment.recover`` ->
#: ``ensureOffsetInRange``, ``LogSegmentOffsetOverflowException``).
SEGMENT_OFFSET_SPAN = 0x7FFFFFFF
_INT64_MAX = 0x7FFFFFFFFFFFFFFF
_SEGMENT_NAME = re.compile(r"(\d{20})\.log")


def segment_base_offset(name: str) -> int | None:
    """The base offset a segment file's name gives (``00000000000000001234.log`` -> 1234; the last part of a
    path is read), or None for any other name, and for one beyond Kafka's largest offset (2^63 - 1)."""
    m = _SEGMENT_NAME.fullmatch(re.split(r"[/\\]", name)[-1])  # a Windows path's last part too
    if m is None:
        return None
    base = int(m.group(1))
    return base if base <= _INT64_MAX else None


def _offset_range(segment_base_offset: int | None) -> tuple[int, int] | None:
    """``(lowest, highest)`` offset a segment with that base may hold; None when there is no base."""
    if segment_base_offset is None:
        return None
    return segment_base_offset, min(segment_base_offset + SEGMENT_OFFSET_SPAN, _INT64_MAX)


def _outside(b: Batch, offset_range: tuple[int, int]) -> str | None:
    """Why ``b`` cannot be in its segment (its base or last offset outside the range), None when it can."""
    lo, hi = offset_range
    if lo <= b.base_offset <= hi and lo <= b.last_offset <= hi:
        return None
    return (f"offsets outside the segment's range [{lo}, {lo}+2^31-1]: base offset {b.base_offset}, "
            f"last offset {b.last_offset}")


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


def _zero_fill(buf: Buffer, pos: int) -> bool:
    """True when every byte from ``pos`` on is zero (a preallocated segment's fill after the data)."""
    return not np.frombuffer(buf, np.uint8)[pos:].any()


def _whole_batch_inside(buf: Buffer, start: int, end: int) -> int | None:
    """The position of the first whole, CRC-valid magic-2 batch that starts in ``[start, end)`` and ends by
    ``end``, or None. A last batch a copy cut short holds none: its bytes are one batch's beginning. A damaged
    size field that announces more than the file holds (one flipped bit) does: the batches after it."""
    view = np.frombuffer(buf, np.uint8)[:end]
    if end - start < V2_HEADER_SIZE:
        return None
    magic_at = np.flatnonzero(view[start + 16:end - V2_HEADER_SIZE + 17] == 2) + start  # candidates: magic byte 2
    for q in magic_at.tolist():
        size = int.from_bytes(view[q + 8:q + 12].tobytes(), "big", signed=True)
        if size < V2_HEADER_SIZE - LOG_OVERHEAD or q + LOG_OVERHEAD + size > end:
            continue
        crc = int.from_bytes(view[q + 17:q + 21].tobytes(), "big")
        if _crc32c(memoryview(buf)[q + 21:q + LOG_OVERHEAD + size]) == crc:
            return q
    return None


def _not_a_beginning(buf: Buffer, pos: int, length: int, offset_range: tuple[int, int] | None) -> str | None:
    """Why the ``length`` bytes at ``pos`` cannot be the beginning of a batch that a copy cut short (a magic no
    entry has; a base offset outside the segment's range, when known), None when they can: a live copy's last
    batch is a real batch's first bytes, and random or overwritten bytes almost never pass both."""
    if length >= HEADER_SIZE_UP_TO_MAGIC and buf[pos + 16] not in _MIN_SIZE:
        return f"magic {buf[pos + 16]}"
    if offset_range is not None and length >= 8:
        offset = int.from_bytes(buf[pos:pos + 8], "big", signed=True)
        if not offset_range[0] <= offset <= offset_range[1]:
            return (f"base offset {offset} outside the segment's range [{offset_range[0]}, "
                    f"{offset_range[0]}+2^31-1]")
    return None


def _stop(
    buf: Buffer, pos: int, length: int, problem: str, base_position: int, ends_file: bool, last_segment: bool = True,
    offset_range: tuple[int, int] | None = None,
) -> BadBatch | IncompleteTail | None:
    """What a walk gives where it stops at an entry it cannot frame (``problem``: "torn" or a reason).

    At the end of a file (``ends_file``) zero bytes from an entry boundary on are the end of the data (None:
    nothing), and an entry the file ends inside is an :class:`IncompleteTail`, as Kafka's reader takes both —
    unless a whole CRC-valid batch starts inside its bytes: then its size field is damaged and what follows is
    data the walk cannot reach (a :class:`BadBatch`, quarantined, never a silent end). Anything else is a
    :class:`BadBatch`. An entry cut short at the end of a file that is not its partition's last segment
    (``last_segment`` False) is a :class:`BadBatch` too: Kafka appends only to the active (last) segment, so a
    copy can cut only that one while it grows; a rolled segment that ends inside an entry lost its bytes. So are
    bytes that cannot be a batch's beginning (:func:`_not_a_beginning`, with the segment's ``offset_range``):
    overwritten or foreign bytes whose size field happens to run past the end, not a copy's cut.
    """
    if ends_file:
        if _zero_fill(buf, pos):
            return None
        if problem == "torn":
            return _cut_at_end(buf, pos, length, base_position, last_segment, offset_range)
    reason = stop_reason(problem, base_position + pos, length)
    return BadBatch(base_position + pos, reason, _raw(buf, pos, length), length)


def stop_reason(problem: str, position: int, length: int) -> str:
    """The reason of the bad item where a walk stops (``problem`` from :func:`_entry_extent`: "torn" or why the
    size field is insane) at ``position``, ``length`` bytes before the end of what it was given.

    An insane size field mid-file leaves every later byte unframeable: the reason names them ("N bytes from byte X
    on not read (…)"), so the rows after it are seen as missing, not absent. The walk does not search for a later
    batch: Kafka's own readers stop there too (``FileLogInputStream`` raises ``CorruptRecordException`` and log
    recovery truncates the segment at that entry), and a magic-2 look-alike found by scanning could be a record's
    bytes."""
    if problem == "torn":
        return f"torn tail: {length} bytes"
    return (f"{length} bytes from byte {position} on not read ({problem}: no entry can be framed there, so the walk "
            "stops; Kafka's log recovery truncates a segment at such an entry)")


def _cut_at_end(buf: Buffer, pos: int, length: int, base_position: int, last_segment: bool,
                offset_range: tuple[int, int] | None) -> BadBatch | IncompleteTail:
    """An entry the file ends inside (:func:`_stop`): a live copy's cut (:class:`IncompleteTail`), or why not."""
    inside = _whole_batch_inside(buf, pos + 1, pos + length)
    if inside is not None:
        reason = (f"entry size beyond the file's end, but a whole batch starts {inside - pos} bytes into it: a "
                  f"damaged size field, not a copy's cut ({length} bytes unreadable)")
        return BadBatch(base_position + pos, reason, _raw(buf, pos, length), length)
    foreign = _not_a_beginning(buf, pos, length, offset_range)
    if foreign is not None:
        reason = (f"{length} bytes at the end of the file that cannot begin a batch ({foreign}): damaged or foreign "
                  "bytes, not a copy's cut")
        return BadBatch(base_position + pos, reason, _raw(buf, pos, length), length)
    whole = length >= HEADER_SIZE_UP_TO_MAGIC  # the header is there: its size field announces the length
    announced = LOG_OVERHEAD + _ENTRY.unpack_from(buf, pos)[1] if whole else None
    if last_segment:
        return IncompleteTail(base_position + pos, length, announced)
    of = f" of the {announced} its size field announces" if announced is not None else ""
    reason = (f"cut short, but not the partition's last segment: the final entry has {length} bytes{of}, at the end "
              "of a rolled segment, which Kafka never appends to (bytes lost, not a live copy's cut)")
    return BadBatch(base_position + pos, reason, _raw(buf, pos, length), length)


def iter_batches(
    buf: Buffer, *, base_position: int = 0, verify_crc: bool = True, decode_records: bool = True,
    segment_base_offset: int | None = None, ends_file: bool = False, last_segment: bool = True,
) -> Iterator[Batch | BadBatch | IncompleteTail]:
    """Iterate over the log entries of a segment (or a byte range of one), lazily.

    Yields a :class:`Batch` per good entry and a :class:`BadBatch` for a CRC mismatch or an
    undecodable entry (the walk continues at the next entry when the size field is sane; an insane one
    ends the walk with one ``BadBatch`` whose reason names the bytes not read: :func:`stop_reason`);
    a torn tail (fewer than 17 bytes left, or an entry shorter than announced) yields a final
    ``BadBatch`` with reason ``"torn tail: N bytes"``. Positions are
    ``base_position + offset in buf``.

    With ``segment_base_offset`` (the base offset the segment's file name gives:
    :func:`segment_base_offset`), an entry whose base or last offset lies outside
    ``[base, base + 2^31 - 1]`` is a ``BadBatch`` too ("offsets outside the segment's range …"):
    Kafka's recovery rejects it, and an offset field is outside the CRC, so a CRC-valid batch can
    carry any value there.

    With ``ends_file`` (``buf`` runs to the end of its segment file) the walk ends where Kafka's reader
    ends it without an error: zero bytes from an entry boundary to the end (``log.preallocate``'s fill)
    yield nothing, and a final entry cut short (fewer bytes left than announced, or than the 17-byte
    header; e.g. a copy of the active segment) yields an :class:`IncompleteTail` instead of the torn
    tail's ``BadBatch``. A bad entry before the end (a size no entry can have, a CRC failure) stays a
    ``BadBatch``. ``last_segment=False`` (with ``ends_file``: the file is a rolled segment, not the highest base
    offset of its partition's folder) makes a final entry cut short a ``BadBatch`` ("cut short, but not the
    partition's last segment …"): Kafka never appends to a rolled segment, so a copy cannot catch it mid-write.

    Raises:
        DecodeError: only when ``buf`` is not a bytes-like object.
    """
    buf = _as_buffer(buf)
    n = len(buf)
    pos = 0
    offset_range = _offset_range(segment_base_offset)
    while pos < n:
        length, problem = _entry_extent(buf, pos, n)
        if problem is not None:
            last = _stop(buf, pos, length, problem, base_position, ends_file, last_segment, offset_range)
            if last is not None:
                yield last
            return
        yield _entry_or_bad(buf, pos, length, verify_crc, decode_records, base_position, offset_range)
        pos += length


def _entry_or_bad(
    buf: Buffer, pos: int, length: int, verify_crc: bool, decode_records: bool, base_position: int,
    offset_range: tuple[int, int] | None = None,
) -> Batch | BadBatch:
    """The entry at ``pos`` decoded, or why not (the one place both walks turn an entry into an item)."""
    try:
        b = _decode_entry(buf, pos, verify_crc, decode_records)
    except DecodeError as e:
        reason = f"{e.reason} at byte {base_position + e.offset}"
        return BadBatch(base_position + pos, reason, _raw(buf, pos, length), length)
    if offset_range is not None:
        outside = _outside(b, offset_range)
        if outside is not None:
            return BadBatch(base_position + pos, outside, _raw(buf, pos, length), length)
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
