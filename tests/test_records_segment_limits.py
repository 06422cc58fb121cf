"""A segment's limits as Kafka's recovery (``LogSegment.recover``) knows them, in the codec's segment walk:
the offset range its file name allows, and its end — a zero fill after the last entry (``log.preallocate``)
and a final entry the file ends inside (a copy of the active segment) are the end of the log, not bad
data (``FileLogInputStream.nextBatch`` returns null). Both walks — the per-entry reference
(:func:`epochlib.records.iter_batches`) and the Arrow batch function (:func:`epochlib.records.batches_arrow`,
its numpy fast path included) — and the KRaft metadata-log functions built on them must agree.

Inputs are built with kafka-python's builders and ``struct`` (never with our encoder:
:mod:`fixtures_segments`).
"""

from __future__ import annotations

import struct

import pytest
from fixtures_segments import LONG_MAX, NOOP, SPAN, kp_batch, kp_legacy
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib.kraft.arrow import metadata_records_arrow, metadata_records_rows
from epochlib.kraft.codec import MetadataError, iter_metadata_log
from epochlib.records import (
    BadBatch,
    Batch,
    IncompleteTail,
    batches_arrow,
    iter_batches,
    iter_batches_arrow,
    segment_base_offset,
)


def reference(buf: bytes, **kw) -> tuple[list[tuple], list[tuple], IncompleteTail | None]:
    heads, recs, tail = [], [], None
    for b in iter_batches(buf, **kw):
        assert tail is None  # an incomplete tail is the last item
        if isinstance(b, IncompleteTail):
            tail = b
            continue
        if isinstance(b, BadBatch):
            heads.append((b.position, b.length, None, None, b.reason))
            continue
        heads.append((b.position, b.size, b.base_offset, b.last_offset, None))
        recs += [(b.position, r.offset, r.key, r.value) for r in b.records]
    return heads, recs, tail


def arrow(buf: bytes, **kw) -> tuple[list[tuple], list[tuple], IncompleteTail | None]:
    res = batches_arrow(buf, **kw)
    t = res.batches.to_pydict()
    heads = list(zip(t["position"], t["size"], t["base_offset"], t["last_offset"], t["error"], strict=True))
    r = res.records.to_pydict()
    return heads, list(zip(r["batch_position"], r["offset"], r["key"], r["value"], strict=True)), res.tail


def pieces(buf: bytes, **kw) -> tuple[list[tuple], list[tuple], IncompleteTail | None]:
    """:func:`iter_batches_arrow` with one-entry pieces, joined (the last piece carries the tail)."""
    heads, recs, tails = [], [], []
    for res in iter_batches_arrow(buf, max_decoded=1, max_input=1, **kw):
        t = res.batches.to_pydict()
        heads += zip(t["position"], t["size"], t["base_offset"], t["last_offset"], t["error"], strict=True)
        r = res.records.to_pydict()
        recs += zip(r["batch_position"], r["offset"], r["key"], r["value"], strict=True)
        tails.append(res.tail)
    assert all(t is None for t in tails[:-1])
    return heads, recs, tails[-1] if tails else None


def agree(buf: bytes, **kw) -> tuple[list[tuple], list[tuple], IncompleteTail | None]:
    ref = reference(buf, **kw)
    assert arrow(buf, **kw) == ref
    assert pieces(buf, **kw) == ref
    without_records = batches_arrow(buf, with_records=False, **kw)
    assert (without_records.batches.column("error").to_pylist(), without_records.tail) == (
        [h[4] for h in ref[0]], ref[2])
    return ref


# ------------------------------------------------------------------- the segment's offset range


def test_the_file_name_gives_the_base_offset():
    assert segment_base_offset("00000000000000001234.log") == 1234
    assert segment_base_offset("/data/orders-0/09223372036854775807.log") == LONG_MAX
    # not a 20-digit segment name (or beyond Kafka's longs): no base, the walk checks no range
    for name in ("1234.log", "00000000000000001234.index", "segment.log", "99999999999999999999.log"):
        assert segment_base_offset(name) is None


def test_a_batch_at_long_max_in_segment_zero_is_bad_not_a_batch():
    """The reviewer's tree: one CRC-valid batch whose baseOffset (outside the CRC) is 2^63-1, in
    00000000000000000000.log. Kafka's recovery rejects it (LogSegmentOffsetOverflowException)."""
    seg = kp_batch(LONG_MAX)
    heads, recs, _ = agree(seg, segment_base_offset=0)
    assert recs == []
    assert heads == [(0, len(seg), None, None, "offsets outside the segment's range [0, 0+2^31-1]: "
                      f"base offset {LONG_MAX}, last offset {LONG_MAX}")]
    # without a base (a file name that is not a segment's): as before, a batch
    (b,) = iter_batches(seg)
    assert isinstance(b, Batch) and b.base_offset == LONG_MAX
    assert agree(seg)[0] == [(0, len(seg), LONG_MAX, LONG_MAX, None)]


@pytest.mark.parametrize(("seg_base", "base", "n", "ok"), [
    (100, 100, 3, True),              # starts at the base
    (100, 99, 1, False),              # before the base
    (100, 98, 3, False),              # starts before, ends inside
    (0, SPAN, 1, True),               # last offset = base + 2^31 - 1: the last relative offset an index holds
    (0, SPAN, 2, False),              # last offset one beyond
    (0, SPAN + 1, 1, False),          # both beyond
    (LONG_MAX - 1, LONG_MAX - 1, 2, True),   # up to Long.MAX: the range ends there
    (LONG_MAX - 1, LONG_MAX, 2, False),      # lastOffset wraps to Long.MIN (Java's long arithmetic)
])
def test_batches_outside_the_range_are_bad_both_walks_agree(seg_base, base, n, ok):
    before, after = kp_batch(seg_base), kp_batch(seg_base, value=b"after")
    seg = before + kp_batch(base, n) + after
    heads, recs, _ = agree(seg, segment_base_offset=seg_base)
    assert [h[4] is None for h in heads] == [True, ok, True]
    if not ok:
        assert heads[1][4].startswith(f"offsets outside the segment's range [{seg_base}, {seg_base}+2^31-1]: "
                                      f"base offset {base}, last offset ")
        assert {r[0] for r in recs} == {0, len(seg) - len(after)}  # its records are gone
    else:
        assert len(recs) == n + 2


def test_legacy_entries_are_checked_too():
    seg = kp_legacy(5) + kp_legacy(1 << 40) + kp_legacy(6, magic=0)
    heads, _, _ = agree(seg, segment_base_offset=5)
    assert [h[4] is None for h in heads] == [True, False, True]
    assert heads[1][4] == f"offsets outside the segment's range [5, 5+2^31-1]: base offset {1 << 40}, last offset {1 << 40}"


def test_the_vectorised_path_agrees_on_many_batches_with_some_outside():
    """40+ batches keep the numpy k-th-record path busy; the out-of-range ones go to the reference."""
    bases = [1000 + 3 * i for i in range(48)]
    bases[7], bases[30], bases[41] = 999, 1001 + SPAN, -1  # before, after, negative
    seg = b"".join(kp_batch(b, 1 + i % 3) for i, b in enumerate(bases))
    heads, recs, _ = agree(seg, segment_base_offset=1000)
    assert [i for i, h in enumerate(heads) if h[4] is not None] == [7, 30, 41]
    assert len(recs) == sum(1 + i % 3 for i in range(48) if i not in (7, 30, 41))


def test_metadata_log_segments_are_checked_too():
    """The KRaft metadata log walks its segments with the same codec: reference and Arrow rows agree."""
    seg = kp_batch(500, 2, key=None, value=NOOP) + kp_batch(LONG_MAX, key=None, value=NOOP) \
        + kp_batch(502, key=None, value=NOOP)
    rows = metadata_records_rows(seg, segment_base_offset=500)
    assert metadata_records_arrow(seg, segment_base_offset=500).to_pylist() == rows
    assert [(r["offset"], r["error"] is not None) for r in rows] == [(500, False), (501, False), (None, True),
                                                                     (502, False)]
    assert rows[2]["error"].startswith("offsets outside the segment's range [500, 500+2^31-1]")
    items = list(iter_metadata_log(seg, segment_base_offset=500))
    assert [type(i).__name__ for i in items] == ["MetadataEntry", "MetadataEntry", "MetadataError", "MetadataEntry"]
    assert isinstance(items[2], MetadataError) and items[2].unit == "batch"
    # a snapshot (no base offset given): unchanged
    assert all(r["error"] is None for r in metadata_records_rows(seg))


def test_the_offsets_replay_checks_the_range_too():
    """replay_segment (the reference of the __consumer_offsets ingestion) passes the base offset to the walk."""
    from epochlib.offsets_log import OffsetsLogRecord, replay_segment

    seg = kp_batch(0, key=None) + kp_batch(LONG_MAX, key=None) + kp_batch(1, key=None)
    out = list(replay_segment(seg, segment_base_offset=0))
    assert [type(i).__name__ for i in out] == ["OffsetsLogRecord", "BadBatch", "OffsetsLogRecord"]
    assert [i.offset for i in out if isinstance(i, OffsetsLogRecord)] == [0, 1]
    assert all(isinstance(i, OffsetsLogRecord) for i in replay_segment(seg))  # without a base: as before


_OFFSETS = st.one_of(st.sampled_from([-(1 << 63), -1, 0, 1, 99, 100, SPAN, SPAN + 100, LONG_MAX - 1, LONG_MAX]),
                     st.integers(-(1 << 63), LONG_MAX))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seg_base=st.sampled_from([0, 100, LONG_MAX - 5, LONG_MAX]),
       bases=st.lists(st.tuples(_OFFSETS, st.integers(1, 3)), min_size=1, max_size=40))
def test_fuzz_any_offsets_both_walks_agree(seg_base, bases):
    """Any int64 in the offset fields (outside the CRC): the reference, the Arrow function and its pieces give
    the same rows, and every batch kept lies in the segment's range."""
    seg = b"".join(kp_batch(b, n) for b, n in bases)
    heads, recs, _ = agree(seg, segment_base_offset=seg_base)
    for _pos, _size, base, last, err in heads:
        assert err is not None or seg_base <= base <= last <= min(seg_base + SPAN, LONG_MAX)


# ------------------------------------------------------------------- the end of a segment file


def data_segment() -> tuple[bytes, bytes]:
    """The reviewer's tree 4: 20 records in two batches (epochs 0 and 1), and the batch that would come next."""
    seg = kp_batch(0, 10, epoch=0) + kp_batch(10, 10, epoch=1)
    return seg, kp_batch(20, 1, epoch=1)


@pytest.mark.parametrize("zeros", [1, 7, 16, 17, 61, 4096])
def test_a_zero_fill_after_the_last_entry_is_the_end_of_the_data(zeros):
    """log.preallocate=true: the active segment is zero-filled after the data. At the end of the file that is
    the end of the log — no bad batch, no tail — where it was quarantined as "invalid entry size 0 for magic 0"
    (or a torn tail, under 17 bytes), which a walk not told it reaches the file's end still reports."""
    seg, _ = data_segment()
    heads, recs, tail = agree(seg + bytes(zeros), ends_file=True)
    assert (heads, recs, tail) == reference(seg)
    assert len(heads) == 2 and len(recs) == 20 and tail is None
    (*_, last) = iter_batches(seg + bytes(zeros))
    assert isinstance(last, BadBatch)
    assert (last.reason.startswith(f"{zeros} bytes from byte {len(seg)} on not read (invalid entry size 0 for magic 0:")
            if zeros >= 17 else last.reason == f"torn tail: {zeros} bytes")


def test_a_zero_filled_file_holds_nothing():
    assert agree(bytes(4096), ends_file=True) == ([], [], None)


@pytest.mark.parametrize("cut", [8, 11, 12, 16, 17, 30, 60, 61, -1])
def test_a_final_entry_the_file_ends_inside_is_a_tail_not_a_bad_batch(cut):
    """A live copy of the active segment: the last batch half-copied. Kafka's reader ends the log before it; the
    walk ends with an IncompleteTail (no row, nothing decoded from it), the batches before it whole."""
    seg, nxt = data_segment()
    part = nxt[:cut]
    heads, recs, tail = agree(seg + part, ends_file=True)
    assert (heads, recs) == reference(seg)[:2]
    announced = len(nxt) if len(part) >= 17 else None
    assert tail == IncompleteTail(len(seg), len(part), announced)
    if announced is None:
        assert tail.reason == f"incomplete entry at the end of the file: {len(part)} bytes, fewer than the " \
                              "17-byte entry header"
    else:
        assert tail.reason == f"incomplete entry at the end of the file: {len(part)} of the {len(nxt)} bytes " \
                              "its size field announces"
    # positions are the file's: a range read from byte 1000 on
    assert agree(seg + part, ends_file=True, base_position=1000)[2].position == 1000 + len(seg)
    # a walk not told it reaches the end of the file: a torn tail, a bad batch, as before
    assert reference(seg + part)[0][-1][4] == f"torn tail: {len(part)} bytes"


@pytest.mark.parametrize("cut", [8, 12, 16, 17, 30, 60, -1])
def test_a_rolled_segment_cut_short_is_a_bad_batch_not_a_tail(cut):
    """Kafka appends only to a partition's last (active) segment; a copy can cut only that one mid-batch. A rolled
    segment (a higher base offset beside it) that ends inside a batch lost bytes: a bad batch, quarantined, in both
    walks, the metadata log's and the offsets replay's — where it was an IncompleteTail (counted, not
    quarantined: an ok run over lost data). Its zero fill, and the same cut in the last segment, are unchanged."""
    seg, nxt = data_segment()
    part = nxt[:cut]
    heads, recs, tail = agree(seg + part, ends_file=True, last_segment=False, segment_base_offset=0)
    assert (heads[:-1], recs) == reference(seg)[:2] and tail is None
    announced = f" of the {len(nxt)} its size field announces" if len(part) >= 17 else ""
    assert heads[-1] == (len(seg), len(part), None, None,
                         f"cut short, but not the partition's last segment: the final entry has {len(part)} bytes"
                         f"{announced}, at the end of a rolled segment, which Kafka never appends to (bytes lost, not a"
                         " live copy's cut)")
    (bad,) = [b for b in iter_batches(seg + part, ends_file=True, last_segment=False) if isinstance(b, BadBatch)]
    assert bad.raw_slice == part and bad.length == len(part)
    assert agree(seg + part, ends_file=True, base_position=1000, last_segment=False)[0][-1][0] == 1000 + len(seg)
    assert isinstance(agree(seg + part, ends_file=True, last_segment=True)[2], IncompleteTail)
    assert agree(seg + bytes(4096), ends_file=True, last_segment=False) == reference(seg)
    # the metadata log: a batch row with the error, no tail row
    meta = kp_batch(0, 2, key=None, value=NOOP) + kp_batch(2, key=None, value=NOOP)
    mnxt = kp_batch(3, key=None, value=NOOP)[:cut]
    rows = metadata_records_rows(meta + mnxt, segment_base_offset=0, ends_file=True, last_segment=False)
    assert metadata_records_arrow(meta + mnxt, segment_base_offset=0, ends_file=True,
                                  last_segment=False).to_pylist() == rows
    assert rows[-1]["tail"] is None and rows[-1]["error"].startswith("cut short, but not the partition's last")
    items = list(iter_metadata_log(meta + mnxt, segment_base_offset=0, ends_file=True, last_segment=False))
    assert isinstance(items[-1], MetadataError) and items[-1].unit == "batch"
    from epochlib.offsets_log import replay_segment

    assert isinstance(list(replay_segment(seg + part, ends_file=True, last_segment=False))[-1], BadBatch)


def test_a_cut_in_the_leading_zeros_of_the_next_base_offset_looks_like_a_zero_fill():
    """The first bytes of an entry are its baseOffset's high bytes, zero for any offset below 2^8: a copy cut
    there leaves only zeros, which are the end of the data as well (nothing to count, nothing lost)."""
    seg, nxt = data_segment()
    assert nxt[:7] == bytes(7)
    assert agree(seg + nxt[:7], ends_file=True) == reference(seg)


def test_a_bad_entry_before_the_end_stays_a_bad_batch():
    """Only the end of the file is a limit of the copy: damage before it stays quarantined, also with ends_file."""
    seg, nxt = data_segment()
    first = len(kp_batch(0, 10))
    # a size field no entry can have, in the middle: the walk stops there (the rest cannot be framed)
    insane = bytearray(seg + nxt)
    struct.pack_into(">i", insane, first + 8, -5)
    heads, _, tail = agree(bytes(insane), ends_file=True)
    rest = len(insane) - first
    assert [h[4] for h in heads] == [None, (
        f"{rest} bytes from byte {first} on not read (invalid entry size -5: no entry can be framed there, so the "
        "walk stops; Kafka's log recovery truncates a segment at such an entry)")] and tail is None
    # a range read from byte 1000 on (not to the file's end): the same words, the file's positions
    heads, _, _ = agree(bytes(insane), base_position=1000)
    assert heads[-1][4].startswith(f"{rest} bytes from byte {1000 + first} on not read (invalid entry size -5:")
    # a CRC failure in the middle: one bad batch, the next one read
    crc = bytearray(seg + nxt)
    crc[first + 70] ^= 0xFF
    heads, recs, tail = agree(bytes(crc), ends_file=True)
    assert [h[4] is None for h in heads] == [True, False, True] and "crc" in heads[1][4].lower()
    assert tail is None and len(recs) == 11
    # zeros in the middle, then data: not a fill to the end
    heads, _, tail = agree(seg + bytes(100) + nxt, ends_file=True)
    assert [h[4] for h in heads][:2] == [None, None] and tail is None
    assert heads[2][4].startswith(f"{100 + len(nxt)} bytes from byte {len(seg)} on not read (invalid entry size 0 "
                                  "for magic 0:")
    # the last whole batch broken, then the fill: the batch is bad, the fill is still the end of the data
    broken = bytearray(seg)
    broken[-1] ^= 0xFF
    heads, _, tail = agree(bytes(broken) + bytes(512), ends_file=True)
    assert [h[4] is None for h in heads] == [True, False] and tail is None


@pytest.mark.parametrize("bit", [24, 20, 16])
def test_a_damaged_size_field_that_overruns_the_file_is_a_bad_batch_not_a_tail(bit):
    """A flipped bit makes an entry announce more bytes than the file holds. Kafka's reader stops there as at a
    cut; but a copy's cut holds one batch's beginning, and these bytes hold whole batches: quarantined, so the run
    says partial, not an ok run that silently lost the rest of the file."""
    bs = [kp_batch(i * 10, 10, epoch=1) for i in range(5)]
    seg = bytearray(b"".join(bs))
    at = len(bs[0])
    struct.pack_into(">i", seg, at + 8, (1 << bit) | struct.unpack_from(">i", seg, at + 8)[0])
    heads, _, tail = agree(bytes(seg), ends_file=True, segment_base_offset=0)
    assert tail is None and heads[0][4] is None
    assert heads[1][0] == at and "damaged size field" in heads[1][4] and len(heads) == 2
    # the same file cut inside its last batch (a live copy) is still a tail
    good = b"".join(bs)
    heads, _, tail = agree(good[: len(good) - 30], ends_file=True, segment_base_offset=0)
    assert isinstance(tail, IncompleteTail) and all(h[4] is None for h in heads) and len(heads) == 4


def test_metadata_log_segments_end_the_same_way():
    seg = kp_batch(0, 2, key=None, value=NOOP) + kp_batch(2, key=None, value=NOOP)
    nxt = kp_batch(3, key=None, value=NOOP)
    for data, tail in ((seg + nxt[:30], IncompleteTail(len(seg), 30, len(nxt))), (seg + bytes(4096), None)):
        rows = metadata_records_rows(data, segment_base_offset=0, ends_file=True)
        assert metadata_records_arrow(data, segment_base_offset=0, ends_file=True).to_pylist() == rows
        assert [r["offset"] for r in rows] == [0, 1, 2] + ([None] if tail else [])
        assert all(r["error"] is None and r["tail"] is None for r in rows[:3])
        if tail is not None:
            assert rows[3]["tail"] is True and rows[3]["error"] == tail.reason
            assert rows[3]["batch_position"] == len(seg) and rows[3]["value"] is None
        items = list(iter_metadata_log(data, segment_base_offset=0, ends_file=True))
        assert [type(i).__name__ for i in items] == ["MetadataEntry"] * 3 + (["IncompleteTail"] if tail else [])
        assert (items[3] if tail else None) == tail
    # a snapshot (written whole; not ends_file): a cut one is bad, as before
    rows = metadata_records_rows(seg + nxt[:30])
    assert metadata_records_arrow(seg + nxt[:30]).to_pylist() == rows
    assert rows[-1]["error"] == "torn tail: 30 bytes" and rows[-1]["tail"] is None


def test_the_offsets_replay_ends_the_same_way():
    from epochlib.offsets_log import OffsetsLogRecord, replay_segment

    seg, nxt = data_segment()
    out = list(replay_segment(seg + nxt[:40], ends_file=True))
    assert [type(i).__name__ for i in out] == ["OffsetsLogRecord"] * 20 + ["IncompleteTail"]
    assert all(isinstance(i, OffsetsLogRecord) for i in replay_segment(seg + bytes(100), ends_file=True))


def test_bytes_that_cannot_begin_a_batch_at_the_end_are_a_bad_batch_not_a_copy_s_cut():
    """A final entry whose size runs past the end was taken for a live copy's cut whatever its bytes: random or
    overwritten bytes (a 1 GiB size, magic 85) made an ok run that silently lost the rest of the file. A copy's cut
    holds a real batch's beginning: a known magic, and a base offset inside the segment's range."""
    seg, nxt = data_segment()
    junk = bytearray(b"\x5a" * 600)
    struct.pack_into(">qi", junk, 0, 0x5A5A5A5A5A5A5A5A, 1 << 30)  # offset, size; the magic byte is 0x5a = 90
    heads, _, tail = agree(seg + bytes(junk), ends_file=True)
    assert tail is None and heads[-1][:2] == (len(seg), 600)
    assert heads[-1][4] == ("600 bytes at the end of the file that cannot begin a batch (magic 90): damaged or "
                            "foreign bytes, not a copy's cut")
    # a good magic, but a base offset the segment cannot hold (its file name says where it starts)
    moved = bytearray(nxt)
    struct.pack_into(">q", moved, 0, 1 << 40)
    heads, _, tail = agree(seg + bytes(moved[:60]), ends_file=True, segment_base_offset=0)
    assert tail is None and heads[-1][4].startswith("60 bytes at the end of the file that cannot begin a batch (base "
                                                    f"offset {1 << 40} outside the segment's range [0, 0+2^31-1])")
    # without the file name's base offset only the magic is known: the cut is taken as Kafka takes it
    assert isinstance(agree(seg + bytes(moved[:60]), ends_file=True)[2], IncompleteTail)
    # a real cut (a known magic, an offset in range) is still the copy's limit, from 8 bytes of it on
    for cut in (8, 16, 17, 60):
        assert isinstance(agree(seg + nxt[:cut], ends_file=True, segment_base_offset=0)[2], IncompleteTail)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(n=st.integers(1, 40), cut=st.integers(0, 200), zeros=st.integers(0, 300),
       flips=st.lists(st.tuples(st.integers(0, 1 << 16), st.integers(1, 255)), max_size=3),
       seg_base=st.sampled_from([None, 0, 5]), last=st.booleans())
def test_fuzz_cut_padded_and_flipped_segment_ends_agree(n, cut, zeros, flips, seg_base, last):
    """A segment of n batches cut anywhere in a further one, zero-filled or not, bytes flipped or not: the
    reference, the Arrow function and its pieces agree (tail included). Without flips every batch before the
    cut is read, and the cut one is a tail — or, when the fill completes the length it announces, a bad entry
    (its CRC fails), as a crash while writing a preallocated segment leaves it. In a rolled segment (not
    ``last``) the cut one is a bad batch instead of a tail."""
    whole = b"".join(kp_batch(i * 3, 1 + i % 3) for i in range(n))
    nxt = kp_batch(n * 3, 2)
    part = nxt[: cut % len(nxt)]
    data = bytearray(whole + part + bytes(zeros))
    for pos, x in flips:
        data[pos % len(data)] ^= x
    heads, recs, tail = agree(bytes(data), ends_file=True, segment_base_offset=seg_base, last_segment=last)
    if flips or seg_base == 5:  # 5: the batches at 0..4 are outside the range
        return
    # the fill can complete the cut batch exactly when its own last bytes are zeros: then it is a whole batch
    completed = len(part) + zeros >= len(nxt) and nxt[len(part):] == bytes(len(nxt) - len(part))
    assert [h[4] for h in heads[:n]] == [None] * n
    assert len(recs) == sum(1 + i % 3 for i in range(n)) + (2 if completed else 0)
    if completed:
        return
    extra = heads[n:]
    if not part.strip(b"\0"):  # nothing but the zero high bytes of its base offset: a fill like the rest
        assert (extra, tail) == ([], None)
    elif not zeros and last:
        assert extra == [] and tail == IncompleteTail(len(whole), len(part), len(nxt) if len(part) >= 17 else None)
    elif not zeros:
        assert tail is None and [h[:2] for h in extra] == [(len(whole), len(part))]
        assert extra[0][4].startswith("cut short, but not the partition's last segment")
    elif not last:
        assert tail is None and len(extra) == 1
    else:
        assert (len(extra), tail is None) in ((1, True), (0, False))
        assert tail is None or (tail.position, tail.length) == (len(whole), len(part) + zeros)
