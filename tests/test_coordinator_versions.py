"""Coordinator schemas synced with spec/coordinator-versions.md, and values of versions above the newest
known one read as Kafka's own readers do (issue 12 item 5). Bytes are laid out by hand from that page
(or encoded by kafka-python from a schema written from it), never by epochlib's encoder."""

from __future__ import annotations

import json
import struct
import types
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from epochlib import _wire as w
from epochlib import coordinator as c
from epochlib._schema import F, M
from epochlib.errors import DecodeError

TID = uuid.UUID("5b2c7e0a-1111-4222-8333-944455556666")
TID_STR = w.uuid_to_str(TID.bytes)
KEY = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b, n = n & 0x7F, n >> 7
        out.append(b | 0x80 if n else b)
        if not n:
            return bytes(out)


def _tags(*fields: tuple[int, bytes]) -> bytes:
    return _uvarint(len(fields)) + b"".join(_uvarint(t) + _uvarint(len(d)) + d for t, d in fields)


def _commit_v4_layout(version: int, *tags: tuple[int, bytes], metadata: bytes = b"m") -> bytes:
    """``version | offset i64 | leaderEpoch i32 | compact metadata | commitTimestamp i64 | tags``."""
    return (struct.pack(">hqi", version, 1234, 17) + _uvarint(len(metadata) + 1) + metadata
            + struct.pack(">q", 1_750_000_000_000) + _tags(*tags))


# ------------------------------------------------------------------ OffsetCommitValue v4 TopicId


def test_offset_commit_v4_topic_id_tag_by_hand():
    rec = c.decode_record(KEY, _commit_v4_layout(4, (0, TID.bytes)))
    assert (rec.value_version, rec.offset, rec.leader_epoch, rec.metadata) == (4, 1234, 17, "m")
    assert rec.topic_id == TID_STR and rec.value["topic_id"] == TID_STR and rec.version_above_known is False
    assert "_unknown_tags" not in rec.value
    zero = c.decode_record(KEY, _commit_v4_layout(4))  # zero uuid: the tag is omitted
    assert zero.topic_id is None and zero.value["topic_id"] == w.ZERO_UUID
    with pytest.raises(DecodeError):  # a TopicId tag that is not 16 bytes is malformed
        c.decode_record(KEY, _commit_v4_layout(4, (0, TID.bytes[:8])))


def test_tags_in_any_order_or_repeated_are_read_as_kafka_reads_them():
    """Kafka's generated readers loop over the tags with no order or duplicate check (its writers sort them):
    a commit whose tags a foreign writer put out of order was quarantined. Both decoders now read it."""
    for value in (_commit_v4_layout(4, (5, b"a"), (0, TID.bytes)),  # unknown tag 5 before the TopicId
                  _commit_v4_layout(4, (0, bytes(16)), (0, TID.bytes))):  # the TopicId twice: the last counts
        rec = c.decode_record(KEY, value)
        assert (rec.offset, rec.leader_epoch, rec.topic_id) == (1234, 17, TID_STR)
        row = c.decode_offsets_arrow(pa.array([KEY], pa.binary()), pa.array([value], pa.binary())).to_pylist()[0]
        assert row["error"] is None and (row["committed_offset"], row["leader_epoch"]) == (1234, 17)


def test_offset_commit_v4_topic_id_cross_check_kafka_python():
    import kafka.protocol.api_data as api_data

    schema = json.loads((Path(__file__).parent / "schemas" / "OffsetCommitValue.json").read_text())
    original = api_data.load_json
    api_data.load_json = lambda name, package=None: schema
    try:
        cls = types.new_class("OffsetCommitValue", (api_data.ApiData,), {})
    finally:
        api_data.load_json = original
    theirs = cls(version=4, offset=7, leader_epoch=3, metadata="x", commit_timestamp=9, topic_id=TID).encode(4)
    assert theirs.endswith(b"\x01\x00\x10" + TID.bytes)  # one tag: 0, 16 bytes, the uuid
    v = c.decode_value(1, theirs)
    assert (v["offset"], v["leader_epoch"], v["metadata"], v["topic_id"]) == (7, 3, "x", TID_STR)
    assert c.encode_value(1, 4, v) == theirs
    back = cls.decode(c.encode_value(1, 4, v))
    assert back.topic_id == TID


# ------------------------------------------------------------------ versions above the newest known


def test_offset_commit_v5_is_read_with_the_v4_layout_and_marked():
    raw = _commit_v4_layout(5, (0, TID.bytes), (7, b"\x01\x02"))
    rec = c.decode_record(KEY, raw)
    assert rec.value_version == 5 and rec.version_above_known is True and rec.value["version_above_known"]
    assert (rec.offset, rec.leader_epoch, rec.metadata, rec.commit_timestamp) == (1234, 17, "m", 1_750_000_000_000)
    assert rec.topic_id == TID_STR and rec.value["_unknown_tags"] == {7: b"\x01\x02"}
    # a "v5" that does not fit the v4 layout is still an error (short body)
    with pytest.raises(DecodeError):
        c.decode_record(KEY, raw[:12])
    with pytest.raises(DecodeError):  # negative versions are never read
        c.decode_record(KEY, struct.pack(">h", -2) + raw[2:])


def test_versions_above_known_in_the_arrow_batch():
    keys = [KEY, KEY, KEY]
    values = [_commit_v4_layout(9), _commit_v4_layout(4), None]
    batch = c.decode_offsets_arrow(pa.array(keys, pa.binary()), pa.array(values, pa.binary()))
    assert batch.to_pylist() == c.decode_offsets_rows(keys, values)
    assert batch.column("value_version").to_pylist() == [9, 4, None]
    assert batch.column("value_version_above_known").to_pylist() == [True, False, None]
    assert batch.column("committed_offset").to_pylist() == [1234, 1234, None]
    assert batch.column("error").null_count == 3


def test_group_metadata_v5_and_kip848_v1_read_with_the_newest_layout():
    gv4 = bytes.fromhex("000409636f6e73756d6572000000050672616e6765046d2d310000018bcfe5680002046d2d310002630a2f"
                        "31302e302e302e31000493e00000afc80300010300020000")
    v = c.decode_value(2, b"\x00\x05" + gv4[2:])
    assert v["version"] == 5 and v["version_above_known"] and v["generation"] == 5 and v["leader"] == "m-1"
    v = c.decode_value(3, struct.pack(">hi", 1, 12) + _tags())
    assert v == {"version": 1, "epoch": 12, "metadata_hash": 0, "creation_time_ms": -1, "version_above_known": True}


def test_non_flexible_newest_layout_keeps_refusing_newer_versions(monkeypatch):
    # A non-flexible layout can grow by untagged fields anywhere, so a newer version's bytes cannot
    # be read with it safely; no table is like that today, so one is put in place for the test.
    legacy = M("LegacyOffsetCommitValue", "0", "none", F("offset", "int64"), F("metadata", "string"),
               F("commitTimestamp", "int64"))
    monkeypatch.setitem(c.VALUE_SPECS, 0, legacy)
    v0 = struct.pack(">hqh", 0, 5, 0) + struct.pack(">q", 6)
    assert c.decode_value(0, v0)["offset"] == 5
    with pytest.raises(DecodeError, match="version 1 not in 0"):
        c.decode_value(0, b"\x00\x01" + v0[2:])


def test_every_value_table_above_its_newest_version_is_read_or_refused_by_the_rule():
    for rt, spec in c.VALUE_SPECS.items():
        if spec is None:
            continue
        hi = spec.valid_versions.hi
        assert hi in spec.flexible_versions, f"type {rt}: newest layout not flexible, rule would refuse"
        raw = c.encode_value(rt, hi, {})
        v = c.decode_value(rt, w.write_int16(hi + 1) + raw[2:])
        assert v["version"] == hi + 1 and v.get("version_above_known") is True, rt


def test_type0_legacy_value_is_offset_commit_v0():
    key0 = b"\x00\x00" + KEY[2:]
    rec = c.decode_record(key0, struct.pack(">hqh", 0, 77, 1) + b"z" + struct.pack(">q", 5))
    assert (rec.record_type, rec.offset, rec.metadata, rec.commit_timestamp, rec.leader_epoch) == (0, 77, "z", 5, -1)


# ------------------------------------------------------------------ KIP-848 and streams tables


def test_consumer_group_metadata_hash_and_creation_time_tags():
    raw = struct.pack(">hi", 0, 4) + _tags((0, struct.pack(">q", -123456789)), (1, struct.pack(">q", 1_760_000_000_000)))
    v = c.decode_value(3, raw)
    assert v == {"version": 0, "epoch": 4, "metadata_hash": -123456789, "creation_time_ms": 1_760_000_000_000}
    assert c.encode_value(3, 0, v) == raw


def test_target_assignment_metadata_timestamp_tag():
    raw = struct.pack(">hi", 0, 8) + _tags((0, struct.pack(">q", 1_770_000_000_000)))
    v = c.decode_value(6, raw)
    assert v == {"version": 0, "assignment_epoch": 8, "assignment_timestamp": 1_770_000_000_000}
    assert "_unknown_tags" not in v


def test_current_member_assignment_epochs_tag_in_topic_partitions():
    epochs = _uvarint(3) + struct.pack(">ii", 4, 6)  # compact nullable []int32: [4, 6]
    tp = TID.bytes + _uvarint(3) + struct.pack(">ii", 0, 1) + _tags((0, epochs))
    tp_plain = TID.bytes + _uvarint(2) + struct.pack(">i", 2) + _tags()
    raw = struct.pack(">hiib", 0, 9, 8, 0) + _uvarint(2) + tp + _uvarint(2) + tp_plain + _tags()
    v = c.decode_value(8, raw)
    assert v["assigned_partitions"] == [{"topic_id": TID_STR, "partitions": [0, 1], "assignment_epochs": [4, 6]}]
    assert v["partitions_pending_revocation"] == [{"topic_id": TID_STR, "partitions": [2], "assignment_epochs": None}]
    assert c.encode_value(8, 0, v) == raw


def _cstr(s: str) -> bytes:
    return _uvarint(len(s.encode()) + 1) + s.encode()


def test_streams_group_metadata_newest_and_older_preview_layouts():
    newest = (struct.pack(">hiq", 0, 3, 0x0102030405060708) + _uvarint(2) + _cstr("num.standby") + _cstr("1")
              + _tags() + _tags((0, struct.pack(">i", 2))))
    v = c.decode_value(17, newest)
    assert v == {"version": 0, "epoch": 3, "metadata_hash": 0x0102030405060708, "validated_topology_epoch": 2,
                 "assignment_configs": [{"key": "num.standby", "value": "1"}]}
    old = struct.pack(">hi", 0, 3) + _tags()  # Kafka 4.0 preview: Epoch only
    v = c.decode_value(17, old)
    assert v["epoch"] == 3 and v["layout"].startswith("StreamsGroupMetadataValue (") and "raw" not in v
    assert "trailing_bytes" not in v
    junk = c.decode_value(17, b"\x00\x00\x01")
    assert "raw" in junk and "layout_error" in junk


def test_resolved_topic_ids_value_matches_the_page():
    raw = (struct.pack(">hi", 0, 5) + _uvarint(2) + _cstr("sub-0") + _uvarint(2) + TID.bytes + _tags() + _tags())
    v = c.decode_value(24, raw)
    assert v == {"version": 0, "assignment_epoch": 5,
                 "resolved_topic_ids_by_subtopology": [{"subtopology_id": "sub-0", "topic_ids": [TID_STR]}]}
