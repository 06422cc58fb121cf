"""``__consumer_offsets`` keys/values (spec §1): §9 vectors, every table version, kafka-python
cross-checks (ApiData with schemas written from §1 in tests/schemas/), fuzz, and the Arrow
batch function against its per-record reference."""

from __future__ import annotations

import contextlib
import json
import types
from pathlib import Path

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib import _wire as w
from epochlib import coordinator as c
from epochlib._schema import FieldSpec, decode, encode
from epochlib.errors import DecodeError

HEX = bytes.fromhex
SCHEMAS = Path(__file__).parent / "schemas"
GV3 = ("00030008636f6e73756d657200000005000572616e676500036d2d310000018bcfe568000000000100036d2d31ffff"
       "00016300092f31302e302e302e31000493e00000afc8000000020001000000020002")
GV4 = ("000409636f6e73756d6572000000050672616e6765046d2d310000018bcfe5680002046d2d310002630a2f31302e30"
       "2e302e31000493e00000afc80300010300020000")
MEMBER = {"member_id": "m-1", "group_instance_id": None, "client_id": "c", "client_host": "/10.0.0.1",
          "rebalance_timeout": 300000, "session_timeout": 45000, "subscription": b"\x00\x01",
          "assignment": b"\x00\x02"}
GROUP = {"protocol_type": "consumer", "generation": 5, "protocol": "range", "leader": "m-1",
         "current_state_timestamp": 1700000000000, "members": [MEMBER]}
TOPIC_ID = w.uuid_to_str(bytes(range(1, 17)))

# (what, record type, hex, expected fields) — spec §9
VALUE_VECTORS = [
    ("OffsetCommitValue v1", 1, "0001000000000000002a00000000018bcfe568000000018bd50bc400",
     {"version": 1, "offset": 42, "leader_epoch": -1, "metadata": "", "commit_timestamp": 1700000000000,
      "expire_timestamp": 1700086400000, "topic_id": w.ZERO_UUID}),
    ("OffsetCommitValue v3", 1, "0003000000000000002a0000000700000000018bcfe56800",
     {"version": 3, "offset": 42, "leader_epoch": 7, "metadata": "", "commit_timestamp": 1700000000000,
      "expire_timestamp": -1, "topic_id": w.ZERO_UUID}),
    ("OffsetCommitValue v4", 1, "0004000000000000002a00000007010000018bcfe5680000",
     {"version": 4, "offset": 42, "leader_epoch": 7, "metadata": "", "commit_timestamp": 1700000000000,
      "expire_timestamp": -1, "topic_id": w.ZERO_UUID}),
    ("GroupMetadataValue v3", 2, GV3, {"version": 3, **GROUP}),
    ("GroupMetadataValue v4", 2, GV4, {"version": 4, **GROUP}),
    ("ConsumerGroupMetadataValue v0", 3, "00000000000900",
     {"version": 0, "epoch": 9, "metadata_hash": 0, "creation_time_ms": -1}),
    ("ConsumerGroupCurrentMemberAssignmentValue v0", 8,
     "0000000000090000000800020102030405060708090a0b0c0d0e0f10030000000000000001000100",
     {"version": 0, "member_epoch": 9, "previous_member_epoch": 8, "state": 0,
      "assigned_partitions": [{"topic_id": TOPIC_ID, "partitions": [0, 1], "assignment_epochs": None}],
      "partitions_pending_revocation": []}),
    ("ConsumerGroupMemberMetadataValue v0", 5,
     "000000000263026802027400000003e8000100110100007530020672616e67650301020000",
     {"version": 0, "instance_id": None, "rack_id": None, "client_id": "c", "client_host": "h",
      "subscribed_topic_names": ["t"], "subscribed_topic_regex": None, "rebalance_timeout_ms": 1000,
      "server_assignor": None, "classic_member_metadata": {
          "session_timeout_ms": 30000, "supported_protocols": [{"name": "range", "metadata": b"\x01\x02"}]}}),
]
KEY_VECTORS = [
    (1, "000100016700017400000000", {"group": "g", "topic": "t", "partition": 0}),
    (2, "0002000167", {"group": "g"}),
    (3, "0003000167", {"group_id": "g"}),
]


@pytest.mark.parametrize(("rt", "hex_", "fields"), KEY_VECTORS)
def test_key_vectors(rt, hex_, fields):
    key = c.decode_key(HEX(hex_))
    assert key == {"record_type": rt, "type_name": c.TYPE_NAMES[rt], **fields}
    assert c.encode_key(rt, key) == HEX(hex_)


@pytest.mark.parametrize(("what", "rt", "hex_", "fields"), VALUE_VECTORS, ids=[v[0] for v in VALUE_VECTORS])
def test_value_vectors(what, rt, hex_, fields):
    value = c.decode_value(rt, HEX(hex_))
    got = {k: v for k, v in value.items() if k != "members"}
    assert got == {k: v for k, v in fields.items() if k != "members"}
    if "members" in fields:
        for m, expected in zip(value["members"], fields["members"], strict=True):
            assert {k: m[k] for k in expected} == expected
            # "consumer" group: embedded protocol tried; 0x0001 is not a valid subscription -> raw kept
            assert m["subscription_decoded"] is None and m["assignment_decoded"] is None
    assert c.encode_value(rt, value["version"], value) == HEX(hex_)


def test_convenience_encoders_match_vectors():
    assert c.encode_offset_commit_key("g", "t", 0) == HEX("000100016700017400000000")
    assert c.encode_offset_commit_value(42, leader_epoch=7, commit_timestamp=1700000000000) == HEX(VALUE_VECTORS[1][2])
    assert c.encode_offset_commit_value(
        42, commit_timestamp=1700000000000, expire_timestamp=1700086400000, version=1) == HEX(VALUE_VECTORS[0][2])
    assert c.encode_group_metadata_value(GROUP) == HEX(GV3)
    assert c.encode_group_metadata_value(GROUP, version=4) == HEX(GV4)


# ------------------------------------------------------------------ every version of every table


def _sample(fields: tuple[FieldSpec, ...], version: int, seed: int = 1) -> dict:
    """Deterministic non-default values for every field present in ``version``."""
    out = {}
    for i, f in enumerate(fields):
        if version not in f.versions:
            continue
        n = seed * 31 + i
        elem = f.elem_type
        if elem == "struct":
            one = _sample(f.fields, version, n)
            v = [one, _sample(f.fields, version, n + 1)] if f.is_array else one
        else:
            v = {"int8": n % 100, "int16": -n, "int32": 100000 + n, "int64": (1 << 40) + n, "uint16": 60000,
                 "bool": True, "float64": 0.5, "string": f"s{n}é", "bytes": bytes([n % 256, 1]),
                 "records": b"rec", "uuid": w.uuid_to_str(bytes([n % 256] * 16))}[elem]
            if f.is_array:
                v = [v, v]
        out[f.key] = v
    return out


TABLES = [(rt, v) for rt, spec in sorted(c.VALUE_SPECS.items()) if spec for v in spec.versions()]


@pytest.mark.parametrize(("rt", "version"), TABLES, ids=[f"type{rt}-v{v}" for rt, v in TABLES])
def test_round_trip_every_value_version(rt, version):
    spec = c.VALUE_SPECS[rt]
    data = _sample(spec.fields, version)
    raw = c.encode_value(rt, version, data)
    value = c.decode_value(rt, raw)
    assert value["version"] == version
    for k, v in data.items():
        if k == "members":
            assert [{kk: m[kk] for kk in v[0]} for m in value[k]] == v
        else:
            assert value[k] == v
    assert c.encode_value(rt, version, value) == raw


@pytest.mark.parametrize("rt", sorted(c.KEY_SPECS))
def test_round_trip_every_key(rt):
    data = _sample(c.KEY_SPECS[rt].fields, 0)
    raw = c.encode_key(rt, data)
    assert c.decode_key(raw) == {"record_type": rt, "type_name": c.TYPE_NAMES[rt], **data}


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_consumer_protocol_round_trip_and_group_embedding(version):
    sub = _sample(c.CONSUMER_SUBSCRIPTION.fields, version)
    asg = _sample(c.CONSUMER_ASSIGNMENT.fields, version)
    sub_raw = c.encode_consumer_subscription(sub, version)
    asg_raw = c.encode_consumer_assignment(asg, version)
    assert {k: c.decode_consumer_subscription(sub_raw)[k] for k in sub} == sub
    assert {k: c.decode_consumer_assignment(asg_raw)[k] for k in asg} == asg
    group = {**GROUP, "members": [{**MEMBER, "subscription": sub_raw, "assignment": asg_raw}]}
    member = c.decode_value(2, c.encode_group_metadata_value(group))["members"][0]
    assert member["subscription"] == sub_raw  # raw kept
    assert member["subscription_decoded"]["version"] == version
    assert member["assignment_decoded"]["assigned_partitions"] == asg["assigned_partitions"]
    # non-consumer groups keep only raw bytes
    other = c.decode_value(2, c.encode_group_metadata_value({**group, "protocol_type": "connect"}))
    assert "subscription_decoded" not in other["members"][0]


def test_newer_consumer_protocol_version_is_read_with_newest_layout():
    raw = c.encode_consumer_subscription({"topics": ["a"], "rack_id": "r"}, 3)
    newer = b"\x00\x07" + raw[2:] + b"future-field"
    d = c.decode_consumer_subscription(newer)
    assert d["version"] == 7 and d["topics"] == ["a"] and d["rack_id"] == "r"


# ------------------------------------------------------------------ records, tombstones, unknown types


def test_decode_record_offset_commit_and_tombstone():
    key = c.encode_offset_commit_key("grp", "orders", 3)
    rec = c.decode_record(key, HEX(VALUE_VECTORS[1][2]))
    assert (rec.record_type, rec.type_name, rec.group, rec.topic, rec.partition) == (1, "OffsetCommit", "grp", "orders", 3)
    assert (rec.offset, rec.leader_epoch, rec.metadata, rec.commit_timestamp, rec.expire_timestamp) == (
        42, 7, "", 1700000000000, -1)
    assert rec.value_version == 3 and not rec.is_tombstone and rec.raw_value is None
    tomb = c.decode_record(key, None)
    assert tomb.is_tombstone and tomb.value is None and tomb.offset is None and tomb.partition == 3
    with pytest.raises(AttributeError):
        tomb.offset = 1  # type: ignore[misc]
    assert not hasattr(tomb, "__dict__")


def test_group_and_kip848_records_fill_group_only():
    rec = c.decode_record(HEX("0002000167"), HEX(GV3))
    assert rec.group == "g" and rec.topic is None and rec.offset is None and rec.value["generation"] == 5
    rec = c.decode_record(HEX("0003000167"), HEX("00000000000900"))
    assert rec.group == "g" and rec.value == {"version": 0, "epoch": 9, "metadata_hash": 0, "creation_time_ms": -1}


@pytest.mark.parametrize("rt", [25, 99, 32767, -1])
def test_unknown_record_types_are_kept_raw(rt):
    rec = c.decode_record(w.write_int16(rt) + b"whatever", b"\x00\x05payload")
    assert rec.type_name == "Unknown" and rec.raw_value == b"payload" and rec.value["version"] == 5
    assert c.decode_record(w.write_int16(rt), b"\x01").value == {"version": None, "raw": b"\x01"}


def test_streams_types_without_layout_and_preview_mismatch_are_kept_raw():
    rec = c.decode_record(HEX("0017000167"), b"\x00\x00anything")
    assert rec.raw_value == b"anything"
    rec = c.decode_record(HEX("0011000167"), b"\x00\x00\x01")  # type 17: too short for Epoch
    assert rec.raw_value == b"\x01" and "layout_error" in rec.value


@pytest.mark.parametrize(
    ("key", "value", "pos"),
    [
        (b"\x00", None, 0),
        (HEX("0001000567"), None, 4),
        (HEX("000100016700017400000000"), HEX("ffff"), 0),  # negative version
        (HEX("000100016700017400000000"), HEX("0005"), 2),  # v5 read as v4: no offset
        (HEX("000100016700017400000000"), HEX("0003000000000000002a00000007ffff"), 14),
        (HEX("0002000167"), GV3[:60], None),
        (HEX("0005000167"), HEX("00000000"), None),
    ],
)
def test_malformed_records_raise_decode_error_with_position(key, value, pos):
    if isinstance(value, str):
        value = HEX(value)
    with pytest.raises(DecodeError) as e:
        c.decode_record(key, value)
    if pos is not None:
        assert e.value.offset == pos


# ------------------------------------------------------------------ kafka-python cross-checks


@pytest.fixture(scope="module")
def kp(request):
    """kafka-python ApiData classes built from the §1 schemas in tests/schemas/."""
    import kafka.protocol.api_data as api_data

    original = api_data.load_json
    api_data.load_json = lambda name, package=None: json.loads((SCHEMAS / f"{name}.json").read_text())
    try:
        return {p.stem: types.new_class(p.stem, (api_data.ApiData,), {}) for p in SCHEMAS.glob("*.json")}
    finally:
        api_data.load_json = original


@pytest.mark.parametrize("version", range(5))
def test_offset_commit_value_cross_check(kp, version):
    data = {"offset": 9_000_000_000, "leader_epoch": 12, "metadata": "métà", "commit_timestamp": 1700000000123,
            "expire_timestamp": 1700000999999}
    theirs = kp["OffsetCommitValue"](version=version, **data).encode(version)
    ours = c.encode_value(1, version, data)
    assert ours == theirs
    back = kp["OffsetCommitValue"].decode(ours)
    mine = c.decode_value(1, theirs)
    for k in data:
        assert getattr(back, k) == mine[k]


def test_keys_cross_check(kp):
    theirs = w.write_int16(1) + kp["OffsetCommitKey"](group="gé", topic="t", partition=7).encode(0, header=False)
    assert theirs == c.encode_offset_commit_key("gé", "t", 7)
    assert c.decode_key(theirs)["group"] == "gé"
    theirs = w.write_int16(2) + kp["GroupMetadataKey"](group="g").encode(0, header=False)
    assert c.decode_key(theirs) == {"record_type": 2, "type_name": "GroupMetadata", "group": "g"}


@pytest.mark.parametrize("version", range(5))
def test_group_metadata_value_cross_check(kp, version):
    cls = kp["GroupMetadataValue"]
    sub = c.encode_consumer_subscription({"topics": ["t1", "t2"], "generation_id": 5}, 2)
    members = [
        {**MEMBER, "group_instance_id": "inst-1", "subscription": sub},
        {**MEMBER, "member_id": "m-2", "group_instance_id": None, "protocol": None},
    ]
    data = {**GROUP, "protocol": None, "members": members}
    kp_members = [cls.MemberMetadata(**{k: m[k] for k in MEMBER}) for m in members]
    theirs = cls(version=version, **{**data, "members": kp_members}).encode(version)
    ours = c.encode_group_metadata_value(data, version)
    assert ours == theirs
    mine = c.decode_value(2, theirs)
    back = cls.decode(ours)
    for k in ("protocol_type", "generation", "protocol", "leader", "current_state_timestamp"):
        assert getattr(back, k) == mine[k], k
    for bm, mm in zip(back.members, mine["members"], strict=True):
        for k in MEMBER:
            assert getattr(bm, k) == mm[k], k
    assert mine["members"][0]["subscription_decoded"]["topics"] == ["t1", "t2"]


def test_kip848_values_cross_check(kp):
    cls = kp["ConsumerGroupMemberMetadataValue"]
    classic = cls.ClassicMemberMetadata(session_timeout_ms=30000, supported_protocols=[
        cls.ClassicMemberMetadata.ClassicProtocol(name="range", metadata=b"\x01\x02")])
    theirs = cls(version=0, instance_id=None, rack_id="r", client_id="c", client_host="h",
                 subscribed_topic_names=["t"], subscribed_topic_regex="re.*", rebalance_timeout_ms=1000,
                 server_assignor="uniform", classic_member_metadata=classic).encode(0)
    v = c.decode_value(5, theirs)
    assert v["rack_id"] == "r" and v["subscribed_topic_regex"] == "re.*" and v["server_assignor"] == "uniform"
    assert v["classic_member_metadata"]["supported_protocols"] == [{"name": "range", "metadata": b"\x01\x02"}]
    assert c.encode_value(5, 0, v) == theirs
    no_classic = cls(version=0, instance_id="i", rack_id=None, client_id="c", client_host="h",
                     subscribed_topic_names=[], subscribed_topic_regex=None, rebalance_timeout_ms=-1,
                     server_assignor=None, classic_member_metadata=None).encode(0)
    assert c.decode_value(5, no_classic)["classic_member_metadata"] is None
    assert c.encode_value(5, 0, c.decode_value(5, no_classic)) == no_classic

    acls = kp["ConsumerGroupCurrentMemberAssignmentValue"]
    data = c.decode_value(8, HEX(VALUE_VECTORS[6][2]))
    back = acls.decode(c.encode_value(8, 0, data))
    assert (back.member_epoch, back.previous_member_epoch, back.state) == (9, 8, 0)
    assert back.assigned_partitions[0].topic_id.bytes == bytes(range(1, 17))
    assert back.assigned_partitions[0].partitions == [0, 1]


@pytest.mark.parametrize("version", range(4))
def test_consumer_protocol_cross_check_with_kafka_python(version):
    from kafka.protocol.consumer.metadata import ConsumerProtocolAssignment as A
    from kafka.protocol.consumer.metadata import ConsumerProtocolSubscription as S

    theirs = S(topics=["a", "b"], user_data=b"u", owned_partitions=[S.TopicPartition(topic="a", partitions=[0, 1])],
               generation_id=3, rack_id="r", version=version).encode(version)
    d = c.decode_consumer_subscription(theirs)
    assert d["version"] == version and d["topics"] == ["a", "b"] and d["user_data"] == b"u"
    if version >= 1:
        assert d["owned_partitions"] == [{"topic": "a", "partitions": [0, 1]}]
    assert d["generation_id"] == (3 if version >= 2 else -1)
    assert d["rack_id"] == ("r" if version >= 3 else None)
    assert c.encode_consumer_subscription(d, version) == theirs
    theirs = A(assigned_partitions=[A.TopicPartition(topic="a", partitions=[2])], user_data=None,
               version=version).encode(version)
    d = c.decode_consumer_assignment(theirs)
    assert d["assigned_partitions"] == [{"topic": "a", "partitions": [2]}] and d["user_data"] is None
    assert c.encode_consumer_assignment(d, version) == theirs


# ------------------------------------------------------------------ fuzz: only DecodeError escapes

VALID = [(HEX(k), None) for _, k, _ in KEY_VECTORS] + [
    (w.write_int16(rt) + b"\x00\x01g" + (b"\x00\x01t\x00\x00\x00\x01" if rt in (0, 1) else b""), HEX(h))
    for _, rt, h, _ in VALUE_VECTORS
]


def _check_record(key, value):
    """Any outcome but an exception other than DecodeError is fine."""
    rt = int.from_bytes(key[:2], "big", signed=True) if len(key) >= 2 else 1
    for fn, args in ((c.decode_record, (key, value)), (c.decode_key, (key,)), (c.decode_value, (rt, value))):
        with contextlib.suppress(DecodeError):
            fn(*args)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=80), st.one_of(st.none(), st.binary(max_size=120)))
def test_fuzz_random_bytes(key, value):
    _check_record(key, value)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(VALID), st.data())
def test_fuzz_mutated_valid_encodings(pair, data):
    key, value = pair
    value = value or b""
    blob = bytearray(value)
    for _ in range(data.draw(st.integers(1, 4))):
        if not blob:
            break
        i = data.draw(st.integers(0, len(blob) - 1))
        blob[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(blob)))
    _check_record(key, bytes(blob[:cut] if data.draw(st.booleans()) else blob))


# ------------------------------------------------------------------ Arrow batch function


def _mixed_batch():
    keys, values = [], []
    for i in range(60):
        keys.append(c.encode_offset_commit_key(f"group-{i % 5}", "tópic" if i == 11 else f"topic-{i % 3}", i))
        if i % 9 == 4:
            values.append(None)
        else:
            values.append(c.encode_offset_commit_value(
                i * 1000, leader_epoch=i % 7, metadata="meta" * (i % 3) + ("é" if i == 13 else ""),
                commit_timestamp=1_700_000_000_000 + i, expire_timestamp=1_700_000_900_000 if i % 5 == 1 else -1,
                version=i % 5))
    keys[20] = b"\x00\x00" + keys[20][2:]  # type 0 legacy key
    for i, n in enumerate((11, 12, 13, 16, 40, 300)):  # around the 12-byte inline limit of Arrow views
        keys.append(c.encode_offset_commit_key("g" * n, "t" * (n + 1), i))
        values.append(c.encode_offset_commit_value(i, metadata="m" * (n - 1), commit_timestamp=i, version=3))
    keys += [HEX("0002000167"), HEX("0002000167"), HEX("0003000167"), HEX("0019abcd"), b"\x00", None,
             HEX("000100016700017400000000"), HEX("000100016700017400000000"), HEX("0001ffff"),
             HEX("000100016700017400000000")]
    values += [HEX(GV4), None, HEX("00000000000900"), b"xx", b"", HEX(VALUE_VECTORS[1][2]),
               HEX("0003000000000000002a00000007ffff"), HEX("0009"), None, HEX("0003") + b"\xff" * 30]
    return keys, values


@pytest.mark.parametrize("kind", ["binary", "large_binary", "sliced", "chunked"])
def test_arrow_agrees_with_reference(kind):
    keys, values = _mixed_batch()
    typ = pa.large_binary() if kind == "large_binary" else pa.binary()
    k, v = pa.array(keys, typ), pa.array(values, typ)
    if kind == "sliced":
        k, v = pa.array([b"pad"] * 3 + keys, typ).slice(3), pa.array([b"x"] * 3 + values, typ).slice(3)
    if kind == "chunked":
        k, v = pa.chunked_array([k.slice(0, 30), k.slice(30)]), pa.chunked_array([v.slice(0, 30), v.slice(30)])
    batch = c.decode_offsets_arrow(k, v)
    assert batch.schema == c.ARROW_SCHEMA
    ref = c.decode_offsets_rows(keys, values)
    assert batch.to_pylist() == ref
    rows = batch.to_pylist()
    assert rows[0]["leader_epoch"] == -1 and rows[3]["leader_epoch"] == 3 and rows[1]["expire_timestamp"] == 1_700_000_900_000
    assert rows[4]["is_tombstone"] and rows[4]["committed_offset"] is None and rows[4]["partition"] == 4
    assert rows[64]["group_id"] == "g" * 40 and rows[64]["topic"] == "t" * 41 and rows[64]["metadata"] == "m" * 39
    assert rows[66]["group_metadata_json"] and json.loads(rows[66]["group_metadata_json"])["generation"] == 5
    assert sum(r["error"] is not None for r in rows) == 6


def test_arrow_all_null_values_and_empty():
    keys = [c.encode_offset_commit_key("g", "t", 1)] * 3
    batch = c.decode_offsets_arrow(pa.array(keys, pa.binary()), pa.nulls(3))
    assert batch.column("is_tombstone").to_pylist() == [True] * 3
    assert c.decode_offsets_arrow(pa.array([], pa.binary()), pa.array([], pa.binary())).num_rows == 0


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.one_of(st.none(), st.binary(max_size=40), st.sampled_from([p[0] for p in VALID])),
                          st.one_of(st.none(), st.binary(max_size=40), st.sampled_from([h for _, _, h, _ in VALUE_VECTORS]).map(HEX))),
                max_size=12))
def test_fuzz_arrow_never_raises_and_matches_reference(pairs):
    keys = [k for k, _ in pairs]
    values = [v for _, v in pairs]
    batch = c.decode_offsets_arrow(pa.array(keys, pa.binary()), pa.array(values, pa.binary()))
    assert batch.to_pylist() == c.decode_offsets_rows(keys, values)


def test_bench_smoke():
    import importlib.util

    path = Path(__file__).parent.parent / "bench" / "bench_codec_offsets.py"
    spec = importlib.util.spec_from_file_location("bench_codec_offsets", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    assert mod.bench_offsets_arrow(20_000, repeat=1) > 0


def test_schema_tables_use_the_interpreter_directly():
    raw = HEX(VALUE_VECTORS[1][2])
    value, pos = decode(c.OFFSET_COMMIT_VALUE, 3, raw, 2)
    assert pos == len(raw) and encode(c.OFFSET_COMMIT_VALUE, 3, value) == raw[2:]
