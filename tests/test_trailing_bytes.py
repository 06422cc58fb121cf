"""Bytes after a complete body (issue 12 item 1): decoded like Java's NetworkClient and librdkafka do
(the body is used, the excess counted), for Metadata responses/requests and coordinator keys/values
alike; a short or malformed body stays an error. Bytes come from kafka-python, aiokafka and by hand."""

from __future__ import annotations

import struct
import uuid

import pyarrow as pa
import pytest

from epochlib import _wire as w
from epochlib import coordinator as c
from epochlib import protocol as p
from epochlib.errors import DecodeError

TID = uuid.UUID("0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0")


def _kp_metadata_response(v: int) -> bytes:
    """A MetadataResponse (header + body, no size prefix) encoded by kafka-python."""
    from kafka.protocol.metadata import MetadataResponse as R

    T, B = R.MetadataResponseTopic, R.MetadataResponseBroker
    P = T.MetadataResponsePartition
    parts = [P(error_code=0, partition_index=i, leader_id=1 + i, leader_epoch=10 + i, replica_nodes=[1, 2],
               isr_nodes=[1, 2], offline_replicas=[]) for i in range(2)]
    msg = R[v](throttle_time_ms=0, brokers=[B(node_id=1, host="b1", port=9092, rack=None),
                                            B(node_id=2, host="b2", port=9092, rack="r2")],
               cluster_id="clu", controller_id=1,
               topics=[T(error_code=0, name="orders", topic_id=TID, is_internal=False, partitions=parts,
                         authorized_operations=None)],
               authorized_operations=None, error_code=0)
    msg.with_header(correlation_id=31)
    (payload,) = p.split_frames(msg.encode(header=True, framed=True))
    return payload


@pytest.mark.parametrize("v", range(9, 14))
def test_kafka_python_flexible_response_plus_one_byte_keeps_every_observation(v):
    raw = _kp_metadata_response(v)
    clean = p.metadata_observations(raw, v)
    rows = p.metadata_observations(raw + b"\x00", v)
    assert [r["trailing_bytes"] for r in rows] == [1, 1]
    assert [{**r, "trailing_bytes": 0} for r in rows] == clean
    assert [(r["partition"], r["leader_id"], r["leader_epoch"]) for r in rows] == [(0, 1, 10), (1, 2, 11)]
    assert all(r["trailing_bytes"] == 0 for r in clean)
    assert p.decode_metadata_response(raw + b"\x07\x07\x07", v)["trailing_bytes"] == 3


def test_aiokafka_v5_response_plus_one_byte():
    from aiokafka.protocol.metadata import MetadataResponse_v5 as R

    body = R(0, [(1, "b1", 9092, None)], "clu", 1,
             [(0, "orders", False, [(0, 0, 1, [1, 2], [1], [2])])]).encode()
    raw = struct.pack(">i", 8) + body  # response header v0: correlation id
    rows = p.metadata_observations(raw + b"\xff", 5)
    assert len(rows) == 1
    r = rows[0]
    assert (r["topic"], r["partition"], r["leader_id"], r["isr"], r["offline_replicas"], r["trailing_bytes"]) == (
        "orders", 0, 1, [1], [2], 1)


def _uvarint(n: int) -> bytes:
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _cstr(s: str | None) -> bytes:
    if s is None:
        return b"\x00"
    data = s.encode()
    return _uvarint(len(data) + 1) + data


def _carr_i32(xs: list[int]) -> bytes:
    return _uvarint(len(xs) + 1) + b"".join(struct.pack(">i", x) for x in xs)


def _rdkafka_mock_v12(extra: bytes) -> bytes:
    """A v12 MetadataResponse laid out by hand, field by field (spec §5.4), as librdkafka's mock
    cluster sends it: one broker, one topic with three partitions, then ``extra`` after the last
    tagged-field section."""
    out = struct.pack(">i", 0x1234) + b"\x00"  # response header v1: correlation id, no tags
    out += struct.pack(">i", 0)  # throttle_time_ms
    out += _uvarint(2) + struct.pack(">i", 1) + _cstr("127.0.0.1") + struct.pack(">i", 39617) + _cstr(None) + b"\x00"
    out += _cstr("mockCluster1a2b3c") + struct.pack(">i", 1)  # cluster_id, controller_id
    out += _uvarint(2)  # one topic
    out += struct.pack(">h", 0) + _cstr("rdkafkatest") + TID.bytes + b"\x00"  # error, name, id, is_internal
    out += _uvarint(4)
    for i in range(3):
        out += struct.pack(">hiii", 0, i, 1, 5 + i) + _carr_i32([1]) + _carr_i32([1]) + _carr_i32([]) + b"\x00"
    out += struct.pack(">i", -(1 << 31)) + b"\x00"  # topic_authorized_operations, topic tags
    out += b"\x00"  # top-level tags
    return out + extra


def test_librdkafka_mock_style_v12_response_with_one_extra_byte():
    rows = p.metadata_observations(_rdkafka_mock_v12(b"\x00"), 12)
    assert [(r["topic"], r["partition"], r["leader_epoch"]) for r in rows] == [
        ("rdkafkatest", 0, 5), ("rdkafkatest", 1, 6), ("rdkafkatest", 2, 7)]
    assert rows[0]["topic_id"] == w.uuid_to_str(TID.bytes) and rows[0]["cluster_id"] == "mockCluster1a2b3c"
    assert {r["trailing_bytes"] for r in rows} == {1}
    assert {r["trailing_bytes"] for r in p.metadata_observations(_rdkafka_mock_v12(b""), 12)} == {0}


def test_short_or_malformed_bodies_stay_errors_in_the_batch_function():
    full = _rdkafka_mock_v12(b"\x00")
    short = _rdkafka_mock_v12(b"")[:-1]  # missing its top-level tag section
    bad_tags = _rdkafka_mock_v12(b"")[:-1] + b"\x05"  # 5 tagged fields announced, none there
    batch = p.metadata_observations_arrow(pa.array([full, short, bad_tags], pa.binary()),
                                          pa.array([12, 12, 12], pa.int16()))
    rows = batch.to_pylist()
    assert [r["response_index"] for r in rows] == [0, 0, 0, 1, 2]
    assert [r["trailing_bytes"] for r in rows[:3]] == [1, 1, 1]
    assert rows[3]["error"] and rows[4]["error"] and rows[3]["trailing_bytes"] is None
    for buf in (short, bad_tags):
        with pytest.raises(DecodeError):
            p.decode_metadata_response(buf, 12)


def test_metadata_request_trailing_bytes_counted():
    from kafka.protocol.metadata import MetadataRequest as Q

    q = Q[12](topics=[Q.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="orders")],
              allow_auto_topic_creation=False, include_topic_authorized_operations=False)
    q.with_header(correlation_id=4, client_id="rdkafka")
    raw = q.encode(header=True)
    assert "trailing_bytes" not in p.decode_metadata_request(raw)
    d = p.decode_metadata_request(raw + b"\x00\x00")
    assert d["trailing_bytes"] == 2 and d["topics"][0]["name"] == "orders" and d["client_id"] == "rdkafka"


# ------------------------------------------------------------------ coordinator keys and values


def _kp_key(group: str, topic: str, partition: int) -> bytes:
    """OffsetCommitKey bytes from aiokafka's classic types (type 1 + group, topic, partition)."""
    from aiokafka.protocol.types import Int16, Int32, String

    s = String("utf-8")
    return Int16.encode(1) + s.encode(group) + s.encode(topic) + Int32.encode(partition)


def test_coordinator_key_and_value_trailing_bytes_are_counted_not_ignored():
    key = _kp_key("grp", "orders", 3)
    value = struct.pack(">hqih", 3, 42, 7, 0) + struct.pack(">q", 1_700_000_000_000)
    rec = c.decode_record(key + b"\x00", value + b"\x01\x02")
    assert (rec.group, rec.topic, rec.partition, rec.offset, rec.leader_epoch) == ("grp", "orders", 3, 42, 7)
    assert rec.key["trailing_bytes"] == 1 and rec.value["trailing_bytes"] == 2 and rec.trailing_bytes == 3
    clean = c.decode_record(key, value)
    assert clean.trailing_bytes == 0 and "trailing_bytes" not in clean.key and "trailing_bytes" not in clean.value
    with pytest.raises(DecodeError):  # short value: still an error
        c.decode_record(key, value[:-1])
    with pytest.raises(DecodeError):  # short key
        c.decode_record(key[:-1], value)


def test_group_metadata_and_kip848_trailing_bytes():
    gv3 = c.encode_group_metadata_value({"protocol_type": "consumer", "generation": 5, "protocol": "range",
                                         "leader": "m", "current_state_timestamp": 1, "members": []})
    v = c.decode_value(2, gv3 + b"\xab")
    assert v["generation"] == 5 and v["trailing_bytes"] == 1
    v = c.decode_value(3, bytes.fromhex("00000000000900") + b"\x00\x00")
    assert v["epoch"] == 9 and v["trailing_bytes"] == 2


def test_arrow_batch_counts_trailing_bytes_on_the_fast_and_slow_paths():
    key = _kp_key("g", "t", 0)
    v3 = struct.pack(">hqih", 3, 42, 7, 0) + struct.pack(">q", 1)
    v1 = struct.pack(">hqhqq", 1, 5, 0, 1, 2)
    v4 = c.encode_offset_commit_value(9, leader_epoch=2, commit_timestamp=3, version=4)
    keys = [key, key + b"\x00", key, key, key + b"\x00\x00", key]
    values = [v3, v3, v3 + b"\x00\x00\x00", v1 + b"\x00", None, v4 + b"\x00"]
    batch = c.decode_offsets_arrow(pa.array(keys, pa.binary()), pa.array(values, pa.binary()))
    assert batch.to_pylist() == c.decode_offsets_rows(keys, values)
    assert batch.column("trailing_bytes").to_pylist() == [0, 1, 3, 1, 2, 1]
    assert batch.column("committed_offset").to_pylist() == [42, 42, 42, 5, None, 9]
    assert batch.column("error").null_count == len(keys)
