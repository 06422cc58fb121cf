"""A segment's limits as Kafka's recovery (``LogSegment.recover``) knows them, in the codec's segment walk:
the offset range its file name allows. Both walks — the per-entry reference
(:func:`epochlib.records.iter_batches`) and the Arrow batch function (:func:`epochlib.records.batches_arrow`,
its numpy fast path included) — and the KRaft metadata-log functions built on them must agree.

Inputs are built with kafka-python's builders and ``struct`` (never with our encoder): offsets lie outside
the batch CRC, so the builders' batches are patched there as a leader does.
"""

from __future__ import annotations

import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from epochlib.kraft.arrow import metadata_records_arrow, metadata_records_rows
from epochlib.kraft.codec import MetadataError, iter_metadata_log
from epochlib.records import (
    BadBatch,
    Batch,
    batches_arrow,
    iter_batches,
    iter_batches_arrow,
    segment_base_offset,
)

TS = 1_709_550_000_000
LONG_MAX = (1 << 63) - 1
SPAN = (1 << 31) - 1
NOOP = b"\x01\x14\x00\x00"  # a KRaft NoOpRecord value: frame version 1, api key 20, version 0, no tagged fields


def kp_batch(base_offset: int, n: int = 1, *, epoch: int = 0, value: bytes = b"v", key: bytes | None = b"k") -> bytes:
    """One v2 batch of ``n`` records built by kafka-python, its baseOffset and partitionLeaderEpoch patched."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for i in range(n):
        b.append(i, timestamp=TS + i, key=key, value=value, headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base_offset)
    struct.pack_into(">i", raw, 12, epoch)
    return bytes(raw)


def kp_legacy(offset: int, magic: int = 1) -> bytes:
    """One uncompressed legacy message built by kafka-python, its (entry) offset patched."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    b.append(0, timestamp=TS if magic else None, key=b"k", value=b"v")
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, offset)
    return bytes(raw)


def reference(buf: bytes, **kw) -> tuple[list[tuple], list[tuple]]:
    heads, recs = [], []
    for b in iter_batches(buf, **kw):
        if isinstance(b, BadBatch):
            heads.append((b.position, b.length, None, None, b.reason))
            continue
        heads.append((b.position, b.size, b.base_offset, b.last_offset, None))
        recs += [(b.position, r.offset, r.key, r.value) for r in b.records]
    return heads, recs


def arrow(buf: bytes, **kw) -> tuple[list[tuple], list[tuple]]:
    res = batches_arrow(buf, **kw)
    t = res.batches.to_pydict()
    heads = list(zip(t["position"], t["size"], t["base_offset"], t["last_offset"], t["error"], strict=True))
    r = res.records.to_pydict()
    return heads, list(zip(r["batch_position"], r["offset"], r["key"], r["value"], strict=True))


def pieces(buf: bytes, **kw) -> tuple[list[tuple], list[tuple]]:
    """:func:`iter_batches_arrow` with one-entry pieces, joined."""
    heads, recs = [], []
    for res in iter_batches_arrow(buf, max_decoded=1, max_input=1, **kw):
        t = res.batches.to_pydict()
        heads += zip(t["position"], t["size"], t["base_offset"], t["last_offset"], t["error"], strict=True)
        r = res.records.to_pydict()
        recs += zip(r["batch_position"], r["offset"], r["key"], r["value"], strict=True)
    return heads, recs


def agree(buf: bytes, **kw) -> tuple[list[tuple], list[tuple]]:
    ref = reference(buf, **kw)
    assert arrow(buf, **kw) == ref
    assert pieces(buf, **kw) == ref
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
    heads, recs = agree(seg, segment_base_offset=0)
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
    heads, recs = agree(seg, segment_base_offset=seg_base)
    assert [h[4] is None for h in heads] == [True, ok, True]
    if not ok:
        assert heads[1][4].startswith(f"offsets outside the segment's range [{seg_base}, {seg_base}+2^31-1]: "
                                      f"base offset {base}, last offset ")
        assert {r[0] for r in recs} == {0, len(seg) - len(after)}  # its records are gone
    else:
        assert len(recs) == n + 2


def test_legacy_entries_are_checked_too():
    seg = kp_legacy(5) + kp_legacy(1 << 40) + kp_legacy(6, magic=0)
    heads, _ = agree(seg, segment_base_offset=5)
    assert [h[4] is None for h in heads] == [True, False, True]
    assert heads[1][4] == f"offsets outside the segment's range [5, 5+2^31-1]: base offset {1 << 40}, last offset {1 << 40}"


def test_the_vectorised_path_agrees_on_many_batches_with_some_outside():
    """40+ batches keep the numpy k-th-record path busy; the out-of-range ones go to the reference."""
    bases = [1000 + 3 * i for i in range(48)]
    bases[7], bases[30], bases[41] = 999, 1001 + SPAN, -1  # before, after, negative
    seg = b"".join(kp_batch(b, 1 + i % 3) for i, b in enumerate(bases))
    heads, recs = agree(seg, segment_base_offset=1000)
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
    heads, recs = agree(seg, segment_base_offset=seg_base)
    for _pos, _size, base, last, err in heads:
        assert err is not None or seg_base <= base <= last <= min(seg_base + SPAN, LONG_MAX)
