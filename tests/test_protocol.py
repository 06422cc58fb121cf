"""Headers, framing, error names and Metadata v0–13 (spec §5, §6), cross-checked with kafka-python."""

from __future__ import annotations

import contextlib
import uuid

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib import _wire as w
from epochlib import protocol as p
from epochlib.errors import DecodeError


@pytest.mark.parametrize(
    ("api_key", "api_version", "hv", "hex_"),
    [
        (3, 8, 1, "000300080000002a0003636c69"),
        (3, 9, 2, "000300090000002a0003636c6900"),
        (3, 1, 1, "000300010000002affff"),
        (7, 0, 0, "000700000000002a"),
        (18, 3, 2, "001200030000002a0003636c6900"),
    ],
)
def test_request_header_versions_and_bytes(api_key, api_version, hv, hex_):
    client = None if hv == 0 or hex_.endswith("ffff") else "cli"
    raw = bytes.fromhex(hex_)
    assert p.encode_request_header(api_key, api_version, 42, client) == raw
    hdr, pos = p.decode_request_header(raw + b"body")
    assert pos == len(raw)
    assert (hdr["api_key"], hdr["api_version"], hdr["correlation_id"], hdr["client_id"]) == (
        api_key, api_version, 42, client)
    assert hdr["header_version"] == hv


def test_response_header_versions():
    assert p.encode_response_header(3, 8, 7) == bytes.fromhex("00000007")
    assert p.encode_response_header(3, 9, 7) == bytes.fromhex("0000000700")
    # ApiVersionsResponse keeps header v0 even when flexible
    assert p.encode_response_header(18, 3, 7) == bytes.fromhex("00000007")
    hdr, pos = p.decode_response_header(bytes.fromhex("0000000700"), 3, 13)
    assert hdr["correlation_id"] == 7 and pos == 5


@pytest.mark.parametrize("n", range(0, 14))
def test_truncated_request_header_raises_decode_error(n):
    raw = bytes.fromhex("000300090000002a0003636c6900")
    with pytest.raises(DecodeError):
        p.decode_request_header(raw[:n])


def test_frames_round_trip_and_errors():
    payloads = [b"abc", b"", b"\x00" * 9]
    stream = b"".join(p.frame(x) for x in payloads)
    assert p.split_frames(stream) == payloads
    with pytest.raises(DecodeError) as e:
        p.split_frames(stream + b"\x00\x00\x00\x09ab")
    assert e.value.offset == len(stream)
    with pytest.raises(DecodeError):
        p.split_frames(b"\xff\xff\xff\xff")


def test_error_names():
    assert p.error_name(74) == "FENCED_LEADER_EPOCH"
    assert p.error_name(-1) == "UNKNOWN_SERVER_ERROR"
    assert p.error_name(133) == "SHARE_SESSION_LIMIT_REACHED"
    assert p.error_name(9999) == "UNKNOWN_ERROR_9999"
    assert len(p.ERROR_NAMES) == 135


def test_flexible_table_matches_kafka_python_schemas():
    import json
    import re
    from importlib import resources

    root = resources.files("kafka.protocol.schemas.resources")
    seen = 0
    for entry in root.iterdir():
        if not entry.name.endswith("Request.json"):
            continue
        spec = json.loads(re.sub(r"//.*", "", entry.read_text()))
        flex = spec["flexibleVersions"]
        first = None if flex == "none" else int(flex.rstrip("+"))
        assert p.FLEXIBLE_FROM[spec["apiKey"]] == first, spec["name"]
        seen += 1
    assert seen > 40


# ------------------------------------------------------------------ Metadata v0–13

TID = uuid.UUID(int=0x0102030405060708090A0B0C0D0E0F10)


def body(v: int) -> dict:
    """A MetadataResponse body with every field non-default where the version has it."""
    return {
        "throttle_time_ms": 5,
        "brokers": [{"node_id": 1, "host": "b1", "port": 9092, "rack": "r1"},
                    {"node_id": 2, "host": "b2", "port": 9093, "rack": None}],
        "cluster_id": "clu", "controller_id": 2,
        "topics": [
            {"error_code": 0, "name": "orders", "topic_id": w.uuid_to_str(TID.bytes), "is_internal": False,
             "partitions": [
                 {"error_code": 0, "partition_index": 0, "leader_id": 1, "leader_epoch": 7,
                  "replica_nodes": [1, 2], "isr_nodes": [1], "offline_replicas": [2]},
                 {"error_code": 6, "partition_index": 1, "leader_id": -1, "leader_epoch": 8,
                  "replica_nodes": [2, 1], "isr_nodes": [], "offline_replicas": []}],
             "topic_authorized_operations": 10},
            {"error_code": 3, "name": "gone", "topic_id": w.ZERO_UUID, "is_internal": True, "partitions": [],
             "topic_authorized_operations": -(1 << 31)},
        ],
        "cluster_authorized_operations": 6, "error_code": 129 if v >= 13 else 0,
    }


def expected(v: int) -> dict:
    """What our decoder must return for body(v): fields absent in v take their defaults."""
    b = body(v)
    if v < 1:
        b["controller_id"] = -1
        for br in b["brokers"]:
            br["rack"] = None
    if v < 2:
        b["cluster_id"] = None
    if v < 3:
        b["throttle_time_ms"] = 0
    for t in b["topics"]:
        if v < 1:
            t["is_internal"] = False
        if v < 10:
            t["topic_id"] = w.ZERO_UUID
        if v < 8:
            t["topic_authorized_operations"] = -(1 << 31)
        for p_ in t["partitions"]:
            if v < 7:
                p_["leader_epoch"] = -1
            if v < 5:
                p_["offline_replicas"] = []
    if not 8 <= v <= 10:
        b["cluster_authorized_operations"] = -(1 << 31)
    return b


@pytest.mark.parametrize("v", range(14))
def test_metadata_response_round_trip(v):
    raw = p.encode_metadata_response(body(v), v, 77)
    d = p.decode_metadata_response(raw, v)
    assert d == {"correlation_id": 77, **expected(v)}
    assert p.encode_metadata_response(d, v, 77) == raw
    assert raw[4:5] == (b"\x00" if v >= 9 else raw[4:5])  # flexible: empty header tag section
    # bytes after the body are counted, not refused (issue 12); a short body still fails
    assert p.decode_metadata_response(raw + b"\x00", v) == {**d, "trailing_bytes": 1}
    with pytest.raises(DecodeError):
        p.decode_metadata_response(raw[:-1], v)


def _bits(x: int) -> set[int] | None:
    return None if x == -(1 << 31) else {i for i in range(32) if x >> i & 1}


def _kp_response(v: int):
    from kafka.protocol.metadata import MetadataResponse as R

    T, B = R.MetadataResponseTopic, R.MetadataResponseBroker
    P = T.MetadataResponsePartition
    b = body(v)
    topics = [T(error_code=t["error_code"], name=t["name"], topic_id=uuid.UUID(bytes=w.uuid_from_str(t["topic_id"])),
                is_internal=t["is_internal"], authorized_operations=_bits(t["topic_authorized_operations"]),
                partitions=[P(**p_) for p_ in t["partitions"]]) for t in b["topics"]]
    return R[v](throttle_time_ms=5, brokers=[B(**br) for br in b["brokers"]], cluster_id="clu", controller_id=2,
                topics=topics, authorized_operations=_bits(b["cluster_authorized_operations"]),
                error_code=b["error_code"])


@pytest.mark.parametrize("v", range(14))
def test_metadata_response_cross_check_kafka_python(v):
    from kafka.protocol.metadata import MetadataResponse as R

    msg = _kp_response(v)
    msg.with_header(correlation_id=77)
    framed = msg.encode(header=True, framed=True)
    (payload,) = p.split_frames(framed)
    ours = p.decode_metadata_response(payload, v)
    assert ours == {"correlation_id": 77, **expected(v)}
    # ours encoded -> kafka-python decodes the same fields
    theirs = R.decode(p.frame(p.encode_metadata_response(body(v), v, 77)), version=v, header=True, framed=True)
    assert theirs.throttle_time_ms in (5, None, 0) and theirs.controller_id in (2, -1, None)
    assert [(br.node_id, br.host, br.port) for br in theirs.brokers] == [(1, "b1", 9092), (2, "b2", 9093)]
    e = expected(v)
    for tt, et in zip(theirs.topics, e["topics"], strict=True):
        assert (tt.error_code, tt.name) == (et["error_code"], et["name"])
        if v >= 10:
            # kafka-python decodes the all-zero uuid as None
            assert (w.ZERO_UUID if tt.topic_id is None else w.uuid_to_str(tt.topic_id.bytes)) == et["topic_id"]
        if v >= 8:
            assert tt.authorized_operations == _bits(et["topic_authorized_operations"])
        for tp, ep in zip(tt.partitions, et["partitions"], strict=True):
            assert (tp.error_code, tp.partition_index, tp.leader_id, tp.replica_nodes, tp.isr_nodes) == (
                ep["error_code"], ep["partition_index"], ep["leader_id"], ep["replica_nodes"], ep["isr_nodes"])
            if v >= 7:
                assert tp.leader_epoch == ep["leader_epoch"]
            if v >= 5:
                assert tp.offline_replicas == ep["offline_replicas"]
    if v >= 13:
        assert theirs.error_code == 129


@pytest.mark.parametrize("v", range(14))
def test_metadata_request_round_trip_and_cross_check(v):
    from kafka.protocol.metadata import MetadataRequest as Q

    topics = [{"topic_id": w.ZERO_UUID, "name": "orders"}]
    b = {"topics": topics, "allow_auto_topic_creation": False, "include_cluster_authorized_operations": True,
         "include_topic_authorized_operations": True}
    raw = p.encode_metadata_request(b, v, 9, "cli")
    d = p.decode_metadata_request(raw)
    assert (d["api_version"], d["correlation_id"], d["client_id"]) == (v, 9, "cli")
    assert d["topics"][0]["name"] == "orders"
    assert d["allow_auto_topic_creation"] is (v < 4)
    assert d["include_cluster_authorized_operations"] is (8 <= v <= 10)
    q = Q[v](topics=[Q.MetadataRequestTopic(topic_id=uuid.UUID(int=0), name="orders")],
             allow_auto_topic_creation=False, include_cluster_authorized_operations=True,
             include_topic_authorized_operations=True)
    q.with_header(correlation_id=9, client_id="cli")
    assert q.encode(header=True) == raw
    if v >= 1:  # null topics = all topics
        raw = p.encode_metadata_request({"topics": None}, v, 9)
        assert p.decode_metadata_request(raw)["topics"] is None


def test_metadata_observations_rows():
    raw = p.encode_metadata_response(body(12), 12, 5)
    rows = p.metadata_observations(raw, 12)
    assert len(rows) == 3
    r0, r1, r2 = rows
    assert (r0["topic"], r0["partition"], r0["leader_id"], r0["leader_epoch"], r0["replicas"], r0["isr"]) == (
        "orders", 0, 1, 7, [1, 2], [1])
    assert r0["topic_id"] == w.uuid_to_str(TID.bytes) and r0["cluster_id"] == "clu" and r0["correlation_id"] == 5
    assert r1["partition_error"] == 6 and r1["offline_replicas"] == []
    assert r2["topic"] == "gone" and r2["topic_error"] == 3 and r2["partition"] is None and r2["topic_id"] is None
    old = p.metadata_observations(p.encode_metadata_response(body(6), 6, 5), 6)
    assert old[0]["leader_epoch"] == -1 and old[0]["topic_id"] is None
    empty = p.metadata_observations(p.encode_metadata_response({"topics": [], "error_code": 129}, 13, 1), 13)
    assert len(empty) == 1 and empty[0]["topic"] is None and empty[0]["top_error"] == 129


def test_metadata_observations_arrow_agrees_with_reference():
    raws = [p.encode_metadata_response(body(v), v, v) for v in range(14)]
    raws += [b"\x00\x01", None, raws[12][:-3]]
    versions = list(range(14)) + [3, 3, 12]
    batch = p.metadata_observations_arrow(pa.array(raws, pa.binary()), pa.array(versions, pa.int16()))
    assert batch.schema == p.METADATA_ARROW_SCHEMA
    rows = batch.to_pylist()
    ref = []
    for i, (r, v) in enumerate(zip(raws, versions, strict=True)):
        try:
            got = p.metadata_observations(r, v)
        except (DecodeError, TypeError):
            got = [{n: None for n in p.METADATA_ARROW_SCHEMA.names if n != "response_index"}]
            got[0]["error"] = "x"
        ref += [{"response_index": i, **g} for g in got]
    assert len(rows) == len(ref)
    for a, b in zip(rows, ref, strict=True):
        assert (a["error"] is None) == (b["error"] is None)
        if a["error"] is None:
            assert a == b
        else:
            assert all(a[k] is None for k in a if k not in ("response_index", "error"))
    assert [r["response_index"] for r in rows if r["error"]] == [14, 15, 16]


@pytest.mark.parametrize("version", [5, 9, 12])
def test_a_name_that_is_not_utf8_is_read_as_kafka_reads_it(version):
    """Kafka's readers build strings with ``new String(bytes, UTF_8)``: a bad byte becomes U+FFFD and the
    client uses the response. Bytes from kafka-python's encoder, the topic name patched afterwards."""
    from kafka.protocol.metadata import MetadataResponse

    cls = MetadataResponse[version]
    topic_cls = cls.MetadataResponseTopic
    parts = [topic_cls.MetadataResponsePartition(error_code=0, partition_index=i, leader_id=1, leader_epoch=4,
                                                 replica_nodes=[1], isr_nodes=[1], offline_replicas=[])
             for i in range(2)]
    resp = cls(throttle_time_ms=0, brokers=[cls.MetadataResponseBroker(node_id=1, host="b1", port=9092, rack=None)],
               cluster_id="c", controller_id=1,
               topics=[topic_cls(error_code=0, name="orders", is_internal=False, partitions=parts)])
    resp.with_header(correlation_id=3)
    raw = resp.encode(header=True).replace(b"orders", b"ord\xff\xfes")
    rows = p.metadata_observations(raw, version)
    assert [(r["topic"], r["partition"]) for r in rows] == [("ord\ufffd\ufffds", 0), ("ord\ufffd\ufffds", 1)]
    batch = p.metadata_observations_arrow(pa.array([raw], pa.binary()), pa.array([version], pa.int16()))
    assert batch.column("topic").to_pylist() == ["ord\ufffd\ufffds"] * 2 and batch.column("error").null_count == 2


# ------------------------------------------------------------------ fuzz

def _must_only_raise_decode_error(fn, *args):
    with contextlib.suppress(DecodeError):
        fn(*args)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=120), st.integers(0, 13))
def test_fuzz_random_bytes_protocol(buf, v):
    _must_only_raise_decode_error(p.decode_metadata_response, buf, v)
    _must_only_raise_decode_error(p.decode_request_header, buf)
    _must_only_raise_decode_error(p.decode_metadata_request, buf)
    _must_only_raise_decode_error(p.split_frames, buf)
    p.metadata_observations_arrow(pa.array([buf], pa.binary()), pa.array([v], pa.int16()))


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 13), st.data())
def test_fuzz_mutated_metadata_responses(v, data):
    blob = bytearray(p.encode_metadata_response(body(v), v, 1))
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    blob = bytes(blob[: data.draw(st.integers(0, len(blob)))])
    _must_only_raise_decode_error(p.decode_metadata_response, blob, v)
    _must_only_raise_decode_error(p.metadata_observations, blob, v)
    batch = p.metadata_observations_arrow(pa.array([blob, None], pa.binary()), pa.array([v, v], pa.int16()))
    assert batch.column("response_index").to_pylist()[-1] == 1


# ------------------------------------------------------------------ the Arrow function's fast walk

_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=12)
_ids = st.lists(st.integers(-1, 2**31 - 1), max_size=5)


@st.composite
def _metadata_body(draw, v: int) -> dict:
    """A MetadataResponse body valid at ``v``: any counts (some past one varint byte), nulls where allowed,
    now and then an unknown tagged field (flexible versions), which the fast walk leaves to the reference."""
    tags = (lambda: {draw(st.integers(0, 40)): draw(st.binary(max_size=3))}) if v >= 9 else dict

    def maybe_tags(d: dict) -> dict:
        if v >= 9 and draw(st.integers(0, 30)) == 0:
            d["_unknown_tags"] = tags()
        return d

    def partition(i: int) -> dict:
        lists = st.lists(st.integers(-1, 2**31 - 1), min_size=127, max_size=130) if draw(
            st.integers(0, 40)) == 0 else _ids
        return maybe_tags({"error_code": draw(st.integers(-1, 200)), "partition_index": i,
                           "leader_id": draw(st.integers(-1, 9)), "leader_epoch": draw(st.integers(-1, 2**31 - 1)),
                           "replica_nodes": draw(lists), "isr_nodes": draw(_ids), "offline_replicas": draw(_ids)})

    def topic() -> dict:
        n = draw(st.sampled_from([0, 1, 3, 30, 130]))
        same = draw(st.booleans())  # partitions of one shape, as brokers usually send them
        parts = [partition(i) for i in range(n if not same else min(n, 1))]
        if same and n:
            parts += [{**parts[0], "partition_index": i, "leader_id": i % 7} for i in range(1, n)]
        return maybe_tags({"error_code": draw(st.integers(0, 3)),
                           "name": None if v >= 12 and draw(st.integers(0, 9)) == 0 else draw(_names),
                           "topic_id": draw(st.sampled_from([w.ZERO_UUID, w.uuid_to_str(TID.bytes)])),
                           "is_internal": draw(st.booleans()), "partitions": parts,
                           "topic_authorized_operations": draw(st.integers(-(2**31), 2**31 - 1))})

    brokers = [maybe_tags({"node_id": i, "host": draw(_names), "port": 9092,
                           "rack": draw(st.one_of(st.none(), _names))}) for i in range(draw(st.integers(0, 3)))]
    return maybe_tags({
        "throttle_time_ms": draw(st.integers(0, 100)), "brokers": brokers,
        "cluster_id": draw(st.one_of(st.none(), _names)), "controller_id": draw(st.integers(-1, 5)),
        "topics": [topic() for _ in range(draw(st.sampled_from([0, 1, 2, 5])))],
        "cluster_authorized_operations": draw(st.integers(-(2**31), 2**31 - 1)),
        "error_code": draw(st.integers(0, 130)),
    })


def _reference_rows(raws: list, versions: list) -> list[dict]:
    out = []
    for i, (r, v) in enumerate(zip(raws, versions, strict=True)):
        try:
            if r is None:
                raise DecodeError("null response or api_version", 0)
            got = p.metadata_observations(r, v)
        except DecodeError as e:
            got = [{**dict.fromkeys(n for n in p.METADATA_ARROW_SCHEMA.names if n != "response_index"),
                    "error": str(e)}]
        out += [{"response_index": i, **g} for g in got]
    return out


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.data())
def test_metadata_arrow_agrees_with_reference_row_for_row(data):
    """Several responses of mixed versions in one batch, some damaged (bytes changed, cut short, extra bytes):
    the Arrow function's rows, errors included, are the reference's, in the same order."""
    raws, versions = [], []
    for _ in range(data.draw(st.integers(1, 4))):
        v = data.draw(st.integers(0, 13))
        blob = bytearray(p.encode_metadata_response(data.draw(_metadata_body(v)), v, data.draw(st.integers(0, 99))))
        damage = data.draw(st.sampled_from(["none", "none", "flip", "cut", "extra"]))
        if damage == "flip":
            for _ in range(data.draw(st.integers(1, 3))):
                blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
        elif damage == "cut":
            blob = blob[: data.draw(st.integers(0, len(blob)))]
        elif damage == "extra":
            blob += data.draw(st.binary(min_size=1, max_size=5))
        raws.append(bytes(blob))
        versions.append(data.draw(st.sampled_from([v, v, v, data.draw(st.integers(-1, 15))])))
    if data.draw(st.booleans()):
        raws.append(None)
        versions.append(12)
    batch = p.metadata_observations_arrow(pa.array(raws, pa.binary()), pa.array(versions, pa.int16()))
    assert batch.schema == p.METADATA_ARROW_SCHEMA
    assert batch.to_pylist() == _reference_rows(raws, versions)


@pytest.mark.parametrize("v", range(14))
def test_metadata_arrow_reads_common_responses_without_the_reference(v, monkeypatch):
    """Plain responses of every version (and one with trailing bytes) never need the generic interpreter:
    that is what makes captures decode at >= 10 k responses per CPU-second."""
    raws = [p.encode_metadata_response(body(v), v, 3), p.encode_metadata_response(body(v), v, 4) + b"\x00\x00"]
    want = _reference_rows(raws, [v, v])
    monkeypatch.setattr(p, "metadata_observations", lambda *a: pytest.fail("fell back to the reference"))
    batch = p.metadata_observations_arrow(pa.array(raws, pa.binary()), pa.array([v, v], pa.int16()))
    assert batch.to_pylist() == want
    assert batch.column("trailing_bytes").to_pylist()[-1] == 2
