"""epochlib.records: log entries (spec/kafka-formats.md §3), cross-checked against kafka-python
3.0.12 and aiokafka 0.14.0 in both directions, plus segment iteration, the Arrow batch function
and fuzzing (only DecodeError may escape)."""

from __future__ import annotations

import contextlib
import gzip
import struct
import zlib

import crc32c
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib.errors import DecodeError
from epochlib.records import (
    BadBatch,
    Batch,
    IncompleteTail,
    NewRecord,
    batches_arrow,
    decode_batch,
    encode_batch,
    encode_control_batch,
    encode_legacy_message_set,
    iter_batches,
    scan_batch_boundaries,
    split_points,
)

CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
CODEC_ID = {name: i for i, name in enumerate(CODECS)}
TS = 1_700_000_000_000

# §9 test vectors
V2_TWO_RECORDS = bytes.fromhex(
    "00000000000000000000006f00000000021c1b88910000000000010000018bcfe568000000018bcfe56801ffffffff"
    "ffffffffffffffffffff000000025400000018000100016700017400000000300003000000000000002a0000000700"
    "000000018bcfe568000024000202180001000167000174000000000100"
)
CONTROL_COMMIT = bytes.fromhex(
    "00000000000000640000004200000003029ffa4e710030000000000000018bcfe568000000018bcfe5680000000000"
    "00000fa00000ffffffff000000012000000008000000010c00000000000500"
)
OFFSET_COMMIT_KEY = bytes.fromhex("000100016700017400000000")
OFFSET_COMMIT_VALUE_V3 = bytes.fromhex("0003000000000000002a0000000700000000018bcfe56800")

SAMPLE = [
    NewRecord(b"k0", b"v0", TS, (("h1", b"x"), ("h2", None))),
    NewRecord(None, b"v1", TS + 5),
    NewRecord(b"k2", None, TS + 3),  # tombstone
    NewRecord(b"", b"", TS - 10),
]


def _records(batch: Batch) -> list[tuple]:
    return [(r.offset, r.timestamp, r.key, r.value, r.headers) for r in batch.records]


def _set_base_and_epoch(raw: bytes, base_offset: int, epoch: int) -> bytes:
    """Patch baseOffset and partitionLeaderEpoch (outside the CRC), as a leader does."""
    return struct.pack(">q", base_offset) + raw[8:12] + struct.pack(">i", epoch) + raw[16:]


# ---------------------------------------------------------------- §9 vectors


def test_vector_two_record_batch_decodes_and_reencodes_byte_exact():
    b = decode_batch(V2_TWO_RECORDS)
    assert (b.magic, b.base_offset, b.last_offset, b.partition_leader_epoch) == (2, 0, 1, 0)
    assert (b.compression, b.records_count, b.size, b.crc_valid) == ("none", 2, len(V2_TWO_RECORDS), True)
    assert (b.base_timestamp, b.max_timestamp, b.producer_id, b.base_sequence) == (TS, TS + 1, -1, -1)
    assert _records(b) == [
        (0, TS, OFFSET_COMMIT_KEY, OFFSET_COMMIT_VALUE_V3, ()),
        (1, TS + 1, OFFSET_COMMIT_KEY, None, ()),
    ]
    again = encode_batch(
        [NewRecord(r.key, r.value, r.timestamp) for r in b.records], partition_leader_epoch=0
    )
    assert again == V2_TWO_RECORDS


def test_vector_control_batch_decodes_and_reencodes_byte_exact():
    b = decode_batch(CONTROL_COMMIT)
    assert (b.base_offset, b.partition_leader_epoch, b.attributes) == (100, 3, 0x30)
    assert b.is_control and b.is_transactional and (b.producer_id, b.producer_epoch) == (4000, 0)
    (r,) = b.records
    assert (r.offset, r.control_type, r.control_name, r.coordinator_epoch) == (100, 1, "COMMIT", 5)
    again = encode_control_batch(
        "COMMIT", base_offset=100, partition_leader_epoch=3, producer_id=4000, producer_epoch=0,
        coordinator_epoch=5, timestamp=TS,
    )  # fmt: skip
    assert again == CONTROL_COMMIT


# ---------------------------------------------------------------- their builders -> our decoder


def _kp_builder(lib: str):
    if lib == "kafka-python":
        from kafka.record.default_records import DefaultRecordBatchBuilder
    else:
        from aiokafka.record.default_records import DefaultRecordBatchBuilder
    return DefaultRecordBatchBuilder


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", CODECS)
def test_their_v2_batches_decode(lib, codec):
    builder = _kp_builder(lib)(
        magic=2, compression_type=CODEC_ID[codec], is_transactional=1, producer_id=77,
        producer_epoch=3, base_sequence=2147483646, batch_size=1 << 20,
    )  # fmt: skip
    values = [bytes([i % 251]) * (i * 37 % 3000) for i in range(40)]
    for i, v in enumerate(values):
        key = None if i % 7 == 3 else f"key-{i}".encode()
        value = None if i % 5 == 4 else v
        builder.append(i, timestamp=TS + i, key=key, value=value, headers=[("h", b"v"), ("n", None)][: i % 3])
    raw = _set_base_and_epoch(bytes(builder.build()), 1000, 9)
    b = decode_batch(raw)
    assert (b.compression, b.records_count, b.base_offset, b.last_offset) == (codec, 40, 1000, 1039)
    assert (b.partition_leader_epoch, b.producer_id, b.producer_epoch, b.is_transactional) == (9, 77, 3, True)
    assert b.crc_valid and b.crc == crc32c.crc32c(raw[21:])
    for i, r in enumerate(b.records):
        assert r.offset == 1000 + i and r.timestamp == TS + i
        assert r.key == (None if i % 7 == 3 else f"key-{i}".encode())
        assert r.value == (None if i % 5 == 4 else values[i])
        assert r.headers == (("h", b"v"), ("n", None))[: i % 3]
    # sequence wraps after int32 max to 0 (§3.2)
    assert [r.sequence for r in b.records[:4]] == [2147483646, 2147483647, 0, 1]


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS[:4])
def test_their_legacy_message_sets_decode(lib, magic, codec):
    if lib == "kafka-python":
        from kafka.record.legacy_records import LegacyRecordBatchBuilder
    else:
        from aiokafka.record.legacy_records import LegacyRecordBatchBuilder
    if magic == 0 and codec == "lz4":
        if lib == "aiokafka":
            pytest.skip("aiokafka refuses to write magic-0 lz4")
        pytest.importorskip("xxhash", reason="kafka-python needs xxhash to write magic-0 lz4")
    builder = LegacyRecordBatchBuilder(magic=magic, compression_type=CODEC_ID[codec], batch_size=1 << 20)
    for i in range(5):
        builder.append(
            i, timestamp=TS + i if magic else None, key=None if i == 2 else b"k%d" % i, value=b"v" * i
        )
    raw = bytes(builder.build())
    batches = list(iter_batches(raw))
    assert all(isinstance(b, Batch) for b in batches)
    recs = [r for b in batches for r in b.records]
    assert [r.offset for r in recs] == list(range(5))
    assert [r.key for r in recs] == [b"k0", b"k1", None, b"k3", b"k4"]
    assert [r.value for r in recs] == [b"v" * i for i in range(5)]
    assert [r.timestamp for r in recs] == ([TS + i for i in range(5)] if magic else [-1] * 5)
    assert {b.magic for b in batches} == {magic} and {b.compression for b in batches} == {codec}
    assert len(batches) == (5 if codec == "none" else 1)


# ---------------------------------------------------------------- our encoder -> their readers


def _their_batches(lib: str, raw: bytes):
    if lib == "kafka-python":
        from kafka.record.memory_records import MemoryRecords
    else:
        from aiokafka.record.memory_records import MemoryRecords
    mr = MemoryRecords(raw)
    out = []
    while True:
        b = mr.next_batch()
        if b is None:
            return out
        assert b.validate_crc()
        out.append((b, list(b)))


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("codec", CODECS)
def test_our_v2_batches_read_by_them(lib, codec):
    raw = encode_batch(SAMPLE, base_offset=500, partition_leader_epoch=4, compression=codec, producer_id=9,
                       producer_epoch=1, base_sequence=10)  # fmt: skip
    [(b, recs)] = _their_batches(lib, raw)
    assert (b.base_offset, b.compression_type, b.producer_id, b.base_sequence) == (
        500,
        CODEC_ID[codec],
        9,
        10,
    )
    assert [(r.offset, r.timestamp, r.key, r.value, list(r.headers)) for r in recs] == [
        (500 + i, s.timestamp, s.key, s.value, [tuple(h) for h in s.headers]) for i, s in enumerate(SAMPLE)
    ]


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("marker", ["COMMIT", "ABORT"])
def test_our_control_batches_read_by_them(lib, marker):
    raw = encode_control_batch(marker, base_offset=7, partition_leader_epoch=2, producer_id=5, producer_epoch=1,
                               coordinator_epoch=11, timestamp=TS)  # fmt: skip
    [(b, recs)] = _their_batches(lib, raw)
    assert b.is_control_batch and b.is_transactional
    (r,) = recs
    assert r.offset == 7
    ctype = 1 if marker == "COMMIT" else 0
    if lib == "kafka-python":
        assert r.type == ctype
    else:
        assert r.key == struct.pack(">hh", 0, ctype)
    assert r.value == struct.pack(">hi", 0, 11)


@pytest.mark.parametrize("lib", ["kafka-python", "aiokafka"])
@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS[:4])
def test_our_legacy_sets_read_by_them(lib, magic, codec):
    if lib == "kafka-python":
        from kafka.record.legacy_records import LegacyRecordBatch
    else:
        from aiokafka.record.legacy_records import LegacyRecordBatch
    if magic == 0 and codec == "lz4":
        if lib == "aiokafka":
            pytest.skip("aiokafka refuses to read magic-0 lz4")
        pytest.importorskip("xxhash", reason="kafka-python needs xxhash to read magic-0 lz4")
    recs = [NewRecord(b"k%d" % i, b"value-%d" % i, TS + i) for i in range(4)]
    raw = encode_legacy_message_set(recs, magic=magic, base_offset=40, compression=codec)
    got = []
    pos = 0
    while pos < len(raw):
        size = struct.unpack_from(">i", raw, pos + 8)[0]
        entry = raw[pos : pos + 12 + size]
        lb = LegacyRecordBatch(bytearray(entry), magic)
        assert lb.validate_crc()
        got += [(r.offset, r.key, r.value) for r in lb]
        pos += 12 + size
    assert got == [(40 + i, b"k%d" % i, b"value-%d" % i) for i in range(4)]


@pytest.mark.parametrize("magic", [0, 1])
@pytest.mark.parametrize("codec", CODECS[:4])
def test_legacy_round_trip_and_wrapper_offsets(magic, codec):
    recs = [NewRecord(b"k%d" % i, None if i == 1 else b"v", TS + 10 - i) for i in range(3)]
    raw = encode_legacy_message_set(recs, magic=magic, base_offset=100, compression=codec)
    batches = list(iter_batches(raw))
    assert [(r.offset, r.key, r.value) for b in batches for r in b.records] == [
        (100 + i, r.key, r.value) for i, r in enumerate(recs)
    ]
    if codec != "none":
        (b,) = batches
        assert (b.base_offset, b.last_offset, b.records_count) == (100, 102, 3)
        assert b.max_timestamp == (TS + 10 if magic else -1)  # v1 wrapper = max inner timestamp
        assert struct.unpack_from(">q", raw)[0] == 102  # wrapper offset = last inner offset


def test_legacy_v1_wrapper_offset_zero_means_base_zero():
    """Some librdkafka versions wrote wrapper offset 0 with relative inner offsets 0..n-1."""
    raw = bytearray(encode_legacy_message_set([NewRecord(b"a", b"1", TS)] * 3, magic=1, base_offset=0,
                                              compression="gzip"))  # fmt: skip
    assert struct.unpack_from(">q", raw)[0] == 2
    raw[0:8] = struct.pack(">q", 0)  # outside the CRC
    (b,) = iter_batches(bytes(raw))
    assert [r.offset for r in b.records] == [0, 1, 2]


def _legacy_wrapper(wrapper_offset: int, inner_offsets=(0, 1, 2), magic: int = 1) -> bytes:
    """A CRC-valid gzip wrapper message built by hand, holding one inner message per inner offset."""
    inner = b"".join(
        encode_legacy_message_set([NewRecord(b"k", b"v", TS)], magic=magic, base_offset=o) for o in inner_offsets
    )
    body = bytes([magic, 1]) + (struct.pack(">q", TS) if magic else b"")  # attributes 1 = gzip
    body += struct.pack(">i", -1) + struct.pack(">i", len(v := gzip.compress(inner))) + v
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return struct.pack(">qi", wrapper_offset, len(msg)) + msg


@pytest.mark.parametrize(("wrapper_offset", "inner_offsets"), [(-(1 << 63), (0, 1, 2)), ((1 << 63) - 1, (0, 5, 1))])
def test_legacy_v1_wrapper_offset_outside_int64_is_a_decode_error(wrapper_offset, inner_offsets):
    """Issue 18 item 6: the wrapper's offset field lies outside the CRC, so a CRC-valid v1 wrapper can
    carry -2^63, and its relative inner offsets then map below int64 (or above it: 2^63-1 with an inner
    offset past the last one). Both decoders report the entry instead of crashing or returning them."""
    raw = _legacy_wrapper(wrapper_offset, inner_offsets)
    assert decode_batch(_legacy_wrapper(100, inner_offsets)).records_count == 3  # the wrapper is sound
    with pytest.raises(DecodeError, match="outside int64"):
        decode_batch(raw)
    (item,) = iter_batches(raw)
    assert isinstance(item, BadBatch) and "outside int64" in item.reason
    res = batches_arrow(raw)
    assert res.batches.column("error").to_pylist() == [item.reason]
    assert res.records.num_rows == 0


def test_legacy_v1_log_append_time():
    recs = [NewRecord(b"a", b"1", 5), NewRecord(b"b", b"2", 6)]
    (b,) = iter_batches(encode_legacy_message_set(recs, magic=1, compression="snappy", log_append_time=TS))
    assert b.timestamp_type == 1 and [r.timestamp for r in b.records] == [TS, TS]
    plain = list(iter_batches(encode_legacy_message_set(recs, magic=1, log_append_time=TS)))
    assert [b.records[0].timestamp for b in plain] == [TS, TS]


def test_legacy_crc_is_ieee_crc32():
    raw = encode_legacy_message_set([NewRecord(b"k", b"v", TS)], magic=1)
    assert struct.unpack_from(">I", raw, 12)[0] == zlib.crc32(raw[16:])
    assert decode_batch(raw).crc_valid


# ---------------------------------------------------------------- attribute semantics


def test_log_append_time_replaces_record_timestamps():
    raw = encode_batch(SAMPLE, timestamp_type=1, max_timestamp=TS + 999)
    b = decode_batch(raw)
    assert b.timestamp_type == 1 and {r.timestamp for r in b.records} == {TS + 999}


def test_delete_horizon_and_compacted_last_offset_delta():
    raw = encode_batch([NewRecord(b"k", None, TS + 50, offset_delta=3)], base_timestamp=TS, has_delete_horizon=True,
                       last_offset_delta=9, base_offset=20)  # fmt: skip
    b = decode_batch(raw)
    assert b.has_delete_horizon and b.delete_horizon_ms == TS
    assert (b.base_offset, b.last_offset, b.next_offset) == (20, 29, 30)
    assert _records(b) == [(23, TS + 50, b"k", None, ())]


def test_empty_batch_after_compaction():
    b = decode_batch(encode_batch([], base_offset=5, last_offset_delta=4))
    assert (b.records_count, b.records, b.last_offset, b.base_timestamp) == (0, (), 9, -1)


@pytest.mark.parametrize("ctype,name", [(2, "LEADER_CHANGE"), (5, "KRAFT_VERSION"), (42, "UNKNOWN")])
def test_other_control_types_by_name(ctype, name):
    raw = encode_batch([NewRecord(struct.pack(">hh", 0, ctype), b"\x00\x00\x00\x00", TS)], is_control=True)
    (r,) = decode_batch(raw).records
    assert (r.control_type, r.control_name, r.coordinator_epoch) == (ctype, name, None)


def test_abort_marker_fields():
    raw = encode_control_batch("ABORT", base_offset=1, partition_leader_epoch=0, producer_id=1, producer_epoch=0,
                               coordinator_epoch=-1, timestamp=TS)  # fmt: skip
    (r,) = decode_batch(raw).records
    assert (r.control_type, r.control_name, r.coordinator_epoch) == (0, "ABORT", -1)


# ---------------------------------------------------------------- codec framings Kafka accepts


def test_snappy_bare_block_and_xerial_frames_both_decode():
    import snappy

    body = b"".join(
        bytes(r)
        for r in [encode_batch([s])[61:] for s in SAMPLE[:1]]  # one uncompressed record section
    )
    base = bytearray(encode_batch(SAMPLE[:1], compression="snappy"))
    for payload in (snappy.compress(body), bytes(base[61:])):
        raw = base[:61] + payload
        raw[8:12] = struct.pack(">i", len(raw) - 12)
        raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
        assert _records(decode_batch(bytes(raw)))[0][2:4] == (b"k0", b"v0")


def test_lz4_python_lz4_frames_and_magic0_broken_header_checksum():
    import lz4.frame

    inner = encode_legacy_message_set([NewRecord(b"k", b"v", 0)], magic=0, base_offset=3)
    for framed in (
        lz4.frame.compress(inner, block_linked=False, store_size=True, content_checksum=True),
        encode_legacy_message_set([NewRecord(b"k", b"v", 0)], magic=0, base_offset=3, compression="lz4")[26:],
    ):
        body = bytes([0, 3]) + struct.pack(">i", -1) + struct.pack(">i", len(framed)) + framed
        msg = struct.pack(">I", zlib.crc32(body)) + body
        raw = struct.pack(">qi", 3, len(msg)) + msg
        (b,) = iter_batches(raw)
        assert isinstance(b, Batch), b
        assert _records(b) == [(3, -1, b"k", b"v", ())]


def test_zstd_streaming_frames_without_content_size():
    import zstandard

    plain = encode_batch(SAMPLE)
    cctx = zstandard.ZstdCompressor(write_content_size=False)
    frames = cctx.compress(plain[61:200]) + cctx.compress(plain[200:])  # two frames back to back
    raw = bytearray(plain[:61] + frames)
    raw[21:23] = struct.pack(">h", 4)
    raw[8:12] = struct.pack(">i", len(raw) - 12)
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    assert _records(decode_batch(bytes(raw))) == _records(decode_batch(plain))
    arrow = batches_arrow(bytes(raw)).records.to_pydict()
    assert arrow["value"] == [r.value for r in SAMPLE]


# ---------------------------------------------------------------- segment iteration


def _segment() -> tuple[bytes, list[int]]:
    parts = [
        encode_batch(SAMPLE, base_offset=0, partition_leader_epoch=1),
        encode_batch(SAMPLE[:2], base_offset=4, partition_leader_epoch=1, compression="zstd"),
        encode_legacy_message_set(SAMPLE[1:3], magic=1, base_offset=6, compression="gzip"),
        encode_control_batch(
            "COMMIT",
            base_offset=8,
            partition_leader_epoch=2,
            producer_id=3,
            producer_epoch=0,
            coordinator_epoch=1,
            timestamp=TS,
        ),  # fmt: skip
        encode_batch(SAMPLE, base_offset=9, partition_leader_epoch=2, compression="lz4"),
    ]
    positions = [sum(len(p) for p in parts[:i]) for i in range(len(parts))]
    return b"".join(parts), positions


def test_iter_batches_positions_and_base_position():
    seg, positions = _segment()
    items = list(iter_batches(seg, base_position=1000))
    assert all(isinstance(b, Batch) for b in items)
    assert [b.position for b in items] == [1000 + p for p in positions]
    assert [b.base_offset for b in items] == [0, 4, 6, 8, 9]
    assert scan_batch_boundaries(seg) == [(p, b.size) for p, b in zip(positions, items, strict=True)]


def test_bad_crc_yields_badbatch_and_iteration_continues():
    seg, positions = _segment()
    bad = bytearray(seg)
    bad[positions[1] + 70] ^= 0xFF
    items = list(iter_batches(bytes(bad), base_position=10))
    assert [type(b).__name__ for b in items] == ["Batch", "BadBatch", "Batch", "Batch", "Batch"]
    bb = items[1]
    assert bb.position == 10 + positions[1] and "crc mismatch" in bb.reason
    assert bb.length == positions[2] - positions[1] and bb.raw_slice == bytes(
        bad[positions[1] : positions[2]]
    )
    with pytest.raises(DecodeError, match="crc"):
        decode_batch(bytes(bad), positions[1])
    # without CRC checking the corrupted batch is decoded (or rejected for its content)
    assert isinstance(list(iter_batches(bytes(bad), verify_crc=False))[0], Batch)


def test_unknown_magic_is_skipped_with_sane_size():
    seg, positions = _segment()
    bad = bytearray(seg)
    bad[positions[2] + 16] = 7
    items = list(iter_batches(bytes(bad)))
    assert isinstance(items[2], BadBatch) and "magic 7" in items[2].reason
    assert [b.base_offset for b in items if isinstance(b, Batch)] == [0, 4, 8, 9]


@pytest.mark.parametrize("cut", [1, 5, 11, 12, 16, 17, 60, 100])
def test_torn_tail_is_reported_and_stops(cut):
    seg, positions = _segment()
    torn = seg[: positions[4] + cut]
    items = list(iter_batches(torn))
    assert [type(b).__name__ for b in items] == ["Batch"] * 4 + ["BadBatch"]
    assert items[-1].reason == f"torn tail: {cut} bytes" and items[-1].length == cut
    assert items[-1].position == positions[4]
    assert scan_batch_boundaries(torn) == scan_batch_boundaries(seg)[:4]


def test_insane_size_stops_iteration():
    seg, positions = _segment()
    bad = bytearray(seg)
    bad[positions[1] + 8 : positions[1] + 12] = struct.pack(">i", -5)
    items = list(iter_batches(bytes(bad)))
    assert len(items) == 2 and "invalid entry size -5" in items[1].reason
    assert items[1].length == len(seg) - positions[1]


def test_zero_padding_is_one_bad_entry():
    seg, _ = _segment()
    items = list(iter_batches(seg + bytes(100)))
    assert isinstance(items[-1], BadBatch) and items[-1].length == 100


def test_decode_records_false_keeps_headers_only():
    seg, _ = _segment()
    items = list(iter_batches(seg, decode_records=False))
    assert all(isinstance(b, Batch) for b in items)
    assert [b.records_count for b in items] == [4, 2, 2, 1, 4]
    assert all(b.records == () for b in items)


def test_decode_batch_rejects_trailing_record_bytes_and_bad_counts():
    raw = bytearray(encode_batch(SAMPLE))
    raw[57:61] = struct.pack(">i", 3)  # one record left over
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(DecodeError, match="bytes left"):
        decode_batch(bytes(raw))
    raw[57:61] = struct.pack(">i", 5000)
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    with pytest.raises(DecodeError):
        decode_batch(bytes(raw))


def test_non_buffer_input_is_a_decode_error():
    with pytest.raises(DecodeError):
        list(iter_batches("not bytes"))  # type: ignore[arg-type]


@pytest.mark.parametrize("target", [1, 200, 1000, 10**9])
def test_split_points_cover_file_on_boundaries(target):
    seg, positions = _segment()
    seg = seg * 5
    bounds = {p for p, _ in scan_batch_boundaries(seg)} | {len(seg)}
    reads = []

    def read_at(offset: int, n: int) -> bytes:
        reads.append((offset, n))
        return seg[offset : offset + n]

    ranges = split_points(read_at, len(seg), target, readahead=64)
    assert ranges[0][0] == 0 and ranges[-1][1] == len(seg)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:], strict=False))
    assert all(s in bounds and e in bounds for s, e in ranges)
    assert all(n <= 64 for _, n in reads)
    if target == 10**9:
        assert ranges == [(0, len(seg))]
    # every range decodes on its own with no bad entry
    for s, e in ranges:
        assert all(isinstance(b, Batch) for b in iter_batches(seg[s:e], base_position=s))


def test_split_points_keep_torn_tail_in_last_range():
    seg, _ = _segment()
    torn = seg + seg[:30]
    ranges = split_points(lambda o, n: torn[o : o + n], len(torn), 100)
    assert ranges[-1][1] == len(torn)
    last = list(iter_batches(torn[ranges[-1][0] :]))
    assert last[-1].reason == "torn tail: 30 bytes"


# ---------------------------------------------------------------- Arrow batch function vs reference


def _reference_rows(buf: bytes, base_position: int = 0) -> tuple[list[tuple], list[tuple]]:
    batches, records = [], []
    for b in iter_batches(buf, base_position=base_position):
        if isinstance(b, BadBatch):
            batches.append((b.position, b.length, None, None, None, b.reason, b.raw_slice))
            continue
        batches.append(
            (b.position, b.size, b.base_offset, b.last_offset, b.partition_leader_epoch, None, None)
        )
        for r in b.records:
            records.append(
                (
                    b.position,
                    r.offset,
                    r.timestamp,
                    r.key,
                    r.value,
                    b.is_control,
                    r.control_type,
                    b.producer_id,
                    b.is_transactional,
                    b.partition_leader_epoch,
                )  # fmt: skip
            )
    return batches, records


def _arrow_rows(buf: bytes, base_position: int = 0) -> tuple[list[tuple], list[tuple]]:
    res = batches_arrow(buf, base_position=base_position)
    t = res.batches.to_pydict()
    batches = list(zip(t["position"], t["size"], t["base_offset"], t["last_offset"], t["partition_leader_epoch"],
                       t["error"], t["raw"], strict=True))  # fmt: skip
    r = res.records.to_pydict()
    records = list(zip(*(r[c] for c in res.records.schema.names), strict=True))
    return batches, records


def _many_batches(n: int, per_batch, compression="none") -> bytes:
    parts, off = [], 0
    for i in range(n):
        k = per_batch(i)
        recs = [
            NewRecord(
                b"key-%d" % (off + j) if j % 4 else None,
                b"v" * ((off + j) % 300) if j % 5 else None,
                TS + j * 1000 - 77,
                (("h", b"x"),) if (off + j) % 11 == 0 else (),
            )  # fmt: skip
            for j in range(k)
        ]
        parts.append(encode_batch(recs, base_offset=off, partition_leader_epoch=i // 10, compression=compression,
                                  producer_id=i % 3, timestamp_type=1 if i % 13 == 0 else 0))  # fmt: skip
        off += k
    return b"".join(parts)


@pytest.mark.parametrize("compression", CODECS)
def test_arrow_agrees_with_reference_vectorised_and_tail_paths(compression):
    # 80 batches: most hold 1-3 records, a few hold 300 (so the long tail runs in plain Python)
    seg = _many_batches(80, lambda i: 300 if i % 27 == 5 else 1 + i % 3, compression)
    seg += CONTROL_COMMIT + encode_legacy_message_set(SAMPLE[1:3], magic=0, compression="gzip")
    assert _arrow_rows(seg, 123) == _reference_rows(seg, 123)


def test_arrow_agrees_on_mixed_and_damaged_segments():
    seg, positions = _segment()
    bad = bytearray(seg * 20)
    bad[positions[1] + 70] ^= 0xFF  # bad crc in a zstd batch
    bad[len(seg) + positions[0] + 64] ^= 0x40  # bad crc in an uncompressed batch
    damaged = bytes(bad) + seg[:40]  # torn tail
    assert _arrow_rows(damaged) == _reference_rows(damaged)
    res = batches_arrow(damaged)
    errors = [e for e in res.batches.column("error").to_pylist() if e]
    assert len(errors) == 3 and errors[-1] == "torn tail: 40 bytes"


def test_arrow_without_records_and_empty_input():
    seg, _ = _segment()
    res = batches_arrow(seg, with_records=False)
    assert res.records is None and res.batches.num_rows == 5
    assert res.batches.column("compression").to_pylist() == ["none", "zstd", "gzip", "none", "lz4"]
    empty = batches_arrow(b"")
    assert empty.batches.num_rows == 0 and empty.records.num_rows == 0


def test_arrow_bad_record_content_with_valid_crc_falls_back_to_reference():
    raw = bytearray(encode_batch(SAMPLE))
    raw[62] = 0x7F  # corrupt the first record's attributes+ts varint region consistently under a fresh CRC
    raw[61] = 0x01  # record length -1
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    seg = bytes(raw) * 40
    assert _arrow_rows(seg) == _reference_rows(seg)
    assert all(e for e in batches_arrow(seg).batches.column("error").to_pylist())


def _with_records_section(batch: bytes, section: bytes, codec: int = 3) -> bytes:
    """``batch`` with its records section replaced by ``section`` (codec bits, size and CRC fixed)."""
    raw = bytearray(batch[:61] + section)
    raw[21:23] = struct.pack(">h", (struct.unpack(">h", raw[21:23])[0] & ~7) | codec)
    raw[8:12] = struct.pack(">i", len(raw) - 12)
    raw[17:21] = struct.pack(">I", crc32c.crc32c(bytes(raw[21:])))
    return bytes(raw)


_COMPRESSIBLE = [NewRecord(b"k0", b"v" * 200, TS, (("h1", b"x"),)), NewRecord(None, b"w" * 50, TS + 1)]


def test_arrow_lz4_frames_of_every_shape_agree_with_reference():
    """The Arrow path inlines one-block LZ4 frames (compressed or stored); every other shape, and every
    broken one, must come out exactly as the reference decodes it."""
    import lz4.frame

    small = SAMPLE[1:2]  # one short record: Kafka stores the block uncompressed (bit 31 of its size)
    big = [NewRecord(b"k%d" % i, b"v" * 400, TS + i) for i in range(400)]  # > 64 KiB: several blocks
    body_small = encode_batch(small)[61:]
    body_big = encode_batch(big)[61:]
    one = encode_batch(_COMPRESSIBLE, compression="lz4")
    stored = encode_batch(small, compression="lz4")
    multi = encode_batch(big, compression="lz4")
    assert struct.unpack("<I", stored[68:72])[0] & 0x80000000  # really the stored shape
    assert not struct.unpack("<I", one[68:72])[0] & 0x80000000
    frames = [
        one,
        stored,
        multi,  # several blocks: the generic walk
        _with_records_section(multi, lz4.frame.compress(body_big, block_size=lz4.frame.BLOCKSIZE_MAX4MB,
                                                        block_linked=False)),  # one block > the 64 KiB scratch
        _with_records_section(stored, lz4.frame.compress(body_small, block_linked=False, store_size=True,
                                                         content_checksum=True)),
        _with_records_section(stored, stored[61:65] + b"\x40" + stored[66:]),  # dependent blocks: refused
        _with_records_section(one, one[61:68] + b"\xff" + one[69:]),  # garbage block size
        _with_records_section(one, one[61:-6] + b"\x00\xff" + one[-4:]),  # corrupt compressed block
        _with_records_section(one, one[61:-4] + b"\x00\x00\x00\x01"),  # no end mark
        _with_records_section(one, one[61:66] + b"\x10" + one[67:]),  # invalid BD
        _with_records_section(stored, stored[61:-4] + b"\x00\x00\x00\x00\x00"),  # trailing byte
        _with_records_section(stored, stored[61:72] + stored[72:-5] + stored[-4:]),  # stored block too short
        _with_records_section(one, one[61:72]),  # header only
    ]
    seg = b"".join(f for f in frames for _ in range(20))  # ≥ 32 active batches: the numpy record path too
    assert _arrow_rows(seg, 7) == _reference_rows(seg, 7)
    errors = batches_arrow(seg).batches.column("error").to_pylist()[::20]
    assert errors[:5] == [None] * 5
    assert all(errors[i] for i in (5, 6, 8, 9, 11, 12)), errors


def test_arrow_snappy_and_gzip_streams_of_every_shape_agree_with_reference():
    """The Arrow path inlines one-chunk xerial snappy streams and one-member gzip streams; other shapes
    (several chunks or members, a bare snappy block, chunks over its 64 KiB scratch) and broken ones
    must come out exactly as the reference decodes them."""
    import snappy

    big = [NewRecord(b"k%d" % i, bytes(range(256)) * 2, TS + i) for i in range(300)]  # > 64 KiB
    body_one, body_big = encode_batch(_COMPRESSIBLE)[61:], encode_batch(big)[61:]
    sn_one = encode_batch(_COMPRESSIBLE, compression="snappy")
    sn_big = encode_batch(big, compression="snappy")  # several 32 KiB chunks
    one_chunk_big = sn_one[61:77] + struct.pack(">I", len(raw := snappy.compress(body_big))) + raw
    gz_one = encode_batch(_COMPRESSIBLE, compression="gzip")
    gz_two = zlib.compress(body_one[:100], wbits=31) + zlib.compress(body_one[100:], wbits=31)
    frames = [
        sn_one,
        sn_big,
        _with_records_section(sn_one, snappy.compress(body_one), 2),  # a bare block
        _with_records_section(sn_big, one_chunk_big, 2),  # one chunk over the 64 KiB scratch
        gz_one,
        _with_records_section(gz_one, gz_two, 1),  # two members
        _with_records_section(sn_one, sn_one[61:] + b"\x00", 2),  # a byte after the chunk
        _with_records_section(sn_one, sn_one[61:-1], 2),  # chunk shorter than its length
        _with_records_section(sn_one, sn_one[61:81] + b"\xff" + sn_one[82:], 2),  # corrupt chunk
        _with_records_section(sn_one, sn_one[61:77] + b"\x00\x00\x00\x02\x05\x00", 2),  # wrong length
        _with_records_section(gz_one, gz_one[61:] + b"\x00", 1),  # garbage after the member
        _with_records_section(gz_one, gz_one[61:-1], 1),  # truncated
        _with_records_section(gz_one, gz_one[61:80] + b"\xff" + gz_one[81:], 1),  # corrupt deflate
    ]
    seg = b"".join(f for f in frames for _ in range(20))
    assert _arrow_rows(seg, 7) == _reference_rows(seg, 7)
    errors = batches_arrow(seg).batches.column("error").to_pylist()[::20]
    assert errors[:6] == [None] * 6
    assert all(errors[i] for i in (7, 9, 10, 11)), errors


@pytest.mark.parametrize("codec", CODECS[1:])
def test_arrow_inline_paths_respect_the_decompressed_size_cap(codec, monkeypatch):
    from epochlib import _compression

    one, small = encode_batch(_COMPRESSIBLE, compression=codec), encode_batch(SAMPLE[1:2], compression=codec)
    sections = [len(encode_batch(_COMPRESSIBLE)) - 61, len(encode_batch(SAMPLE[1:2])) - 61]
    seg = (one + small) * 20
    cap = min(sections) - 1  # both records sections are bigger
    monkeypatch.setattr(_compression, "MAX_DECOMPRESSED_SIZE", cap)
    assert _arrow_rows(seg) == _reference_rows(seg)
    assert all(f"batch decompresses to more than {cap} bytes" in e
               for e in batches_arrow(seg).batches.column("error").to_pylist())
    monkeypatch.setattr(_compression, "MAX_DECOMPRESSED_SIZE", max(sections))  # at the cap: both fine
    assert batches_arrow(seg).batches.column("error").null_count == 40


# ---------------------------------------------------------------- fuzz: only DecodeError, never hang


def _no_surprises(data: bytes) -> None:
    for item in iter_batches(data):
        assert isinstance(item, Batch | BadBatch)
    with contextlib.suppress(DecodeError):
        decode_batch(data)
    res = batches_arrow(data)
    assert res.batches.num_rows == len(list(iter_batches(data, decode_records=False)))
    # a whole segment file named for offset 0: its end and its offset range are checked too
    seg = {"ends_file": True, "segment_base_offset": 0}
    items = list(iter_batches(data, **seg))
    assert all(isinstance(i, Batch | BadBatch) for i in items[:-1])
    tail = items[-1] if items and isinstance(items[-1], IncompleteTail) else None
    res = batches_arrow(data, **seg)
    assert res.tail == tail
    assert res.batches.column("error").to_pylist() == [
        i.reason if isinstance(i, BadBatch) else None for i in items if not isinstance(i, IncompleteTail)]


FUZZ = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@FUZZ
@given(st.binary(max_size=400))
def test_fuzz_random_bytes(data):
    _no_surprises(data)


@FUZZ
@given(st.binary(min_size=17, max_size=200))
def test_fuzz_random_bytes_behind_a_plausible_header(tail):
    data = struct.pack(">qib", 0, len(tail) + 5, 0) + bytes([tail[0] % 3]) + tail
    _no_surprises(data)



_I64_EDGES = st.sampled_from([-(1 << 63), -(1 << 63) + 1, -1, 0, 1, (1 << 63) - 2, (1 << 63) - 1])
_I64 = st.one_of(_I64_EDGES, st.integers(-(1 << 63), (1 << 63) - 1))


@FUZZ
@given(st.sampled_from([0, 1]), _I64, st.lists(_I64, min_size=1, max_size=4))
def test_fuzz_legacy_wrapper_with_extreme_offset_fields(magic, wrapper_offset, inner_offsets):
    """Offset fields lie outside the CRCs, so a CRC-valid wrapper can carry any int64 there: both
    decoders give the same rows, and every offset they return is an int64 (issue 18 item 6)."""
    data = _legacy_wrapper(wrapper_offset, inner_offsets, magic)
    _no_surprises(data)
    assert _arrow_rows(data) == _reference_rows(data)
    (item,) = iter_batches(data)
    if isinstance(item, Batch):
        assert all(-(1 << 63) <= r.offset < 1 << 63 for r in item.records)
        assert all(-(1 << 63) <= o < 1 << 63 for o in (item.base_offset, item.last_offset))


_SEG, _ = _segment()


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(_SEG) - 1), st.integers(1, 255)), min_size=1, max_size=6))
def test_fuzz_flipped_bytes_in_valid_segment(flips):
    data = bytearray(_SEG)
    for pos, x in flips:
        data[pos] ^= x
    _no_surprises(bytes(data))
    assert _arrow_rows(bytes(data)) == _reference_rows(bytes(data))


def test_truncation_at_every_position():
    ends = {p + n for p, n in scan_batch_boundaries(_SEG)}
    starts = [p for p, _ in scan_batch_boundaries(_SEG)]
    for cut in range(len(_SEG) + 1):
        data = _SEG[:cut]
        _no_surprises(data)
        items = list(iter_batches(data))
        if cut and cut not in ends:
            assert items[-1].reason.startswith("torn tail")
        # at the end of a file: the cut entry is a tail (or, if only zero bytes of it are there, nothing)
        items = list(iter_batches(data, ends_file=True))
        assert all(isinstance(i, Batch) for i in items[:-1])
        if cut and cut not in ends:
            start = max(p for p in starts if p < cut)
            if data[start:].strip(b"\0"):
                assert items[-1] == IncompleteTail(start, cut - start, items[-1].announced)
            else:
                assert all(isinstance(i, Batch) for i in items)


_MANY = _many_batches(40, lambda i: 1 + i % 4)


@FUZZ
@given(st.lists(st.tuples(st.integers(0, len(_MANY) - 1), st.integers(1, 255)), min_size=1, max_size=4))
def test_fuzz_vectorised_arrow_path_agrees_under_corruption(flips):
    """40 batches keep the k-th-record-of-every-batch numpy path busy; CRC off so content is parsed."""
    data = bytearray(_MANY)
    for pos, x in flips:
        data[pos] ^= x
    data = bytes(data)
    for verify in (True, False):
        res = batches_arrow(data, verify_crc=verify)
        ref = list(iter_batches(data, verify_crc=verify))
        assert res.batches.column("position").to_pylist() == [b.position for b in ref]
        assert res.batches.column("error").to_pylist() == [
            b.reason if isinstance(b, BadBatch) else None for b in ref
        ]
        assert res.records.column("offset").to_pylist() == [
            r.offset for b in ref if isinstance(b, Batch) for r in b.records
        ]
        assert res.records.column("value").to_pylist() == [
            r.value for b in ref if isinstance(b, Batch) for r in b.records
        ]


_MANY_COMPRESSED = {c: _many_batches(40, lambda i: 1 + i % 4, c) for c in CODECS[1:]}


@pytest.mark.parametrize("compression", CODECS[1:])
@settings(max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_fuzz_compressed_arrow_path_agrees_under_corruption(compression, data):
    """Flipped bytes in compressed batches with the CRC off, so the damage reaches the decompressors:
    the inlined LZ4/zstd paths and the generic ones must agree with the reference."""
    seg = bytearray(_MANY_COMPRESSED[compression])
    flips = data.draw(st.lists(st.tuples(st.integers(0, len(seg) - 1), st.integers(1, 255)), min_size=1,
                               max_size=4))
    for pos, x in flips:
        seg[pos] ^= x
    seg = bytes(seg)
    res = batches_arrow(seg, verify_crc=False)
    ref = list(iter_batches(seg, verify_crc=False))
    assert res.batches.column("error").to_pylist() == [b.reason if isinstance(b, BadBatch) else None for b in ref]
    assert res.records.column("value").to_pylist() == [
        r.value for b in ref if isinstance(b, Batch) for r in b.records
    ]


@pytest.mark.parametrize("wrap", [bytes, bytearray, memoryview])
def test_all_buffer_types_give_the_same_answer(wrap):
    seg, _ = _segment()
    assert _arrow_rows(wrap(seg)) == _reference_rows(seg)
    assert [b.position for b in iter_batches(wrap(seg))] == [b.position for b in iter_batches(seg)]
    assert decode_batch(wrap(seg)) == decode_batch(seg)


def test_a_header_key_that_is_not_utf8_is_read_as_kafka_reads_it():
    """DefaultRecord reads header keys with Utils.utf8 (new String(bytes, UTF_8)): a bad byte is U+FFFD and
    the record is read; the batch was quarantined."""
    raw = encode_batch([NewRecord(b"k", b"v", TS, headers=((b"tr\xffce", b"x"),))])
    (batch,) = list(iter_batches(raw))
    assert isinstance(batch, Batch) and batch.records[0].headers == (("tr\ufffdce", b"x"),)
    res = batches_arrow(raw)
    assert res.records.num_rows == 1 and res.batches.column("error").to_pylist() == [None]
