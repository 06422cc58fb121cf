"""KRaft metadata record codec (kraft-metadata.md §2): the §5.5 byte vectors (hex from the spec,
not from our encoder), round trips of every record table at every version, unknown keys and
versions, frame errors, and fuzz — random, mutated and truncated values raise only DecodeError."""

from __future__ import annotations

import contextlib
import struct

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib import _wire as w
from epochlib._schema import FieldSpec
from epochlib.errors import DecodeError
from epochlib.kraft import codec
from epochlib.kraft.codec import (
    decode_control_value,
    decode_record_value,
    encode_control_value,
    encode_metadata_batch,
    encode_record_value,
    iter_metadata_log,
)
from epochlib.kraft.schemas import CONTROL_SPECS, RECORD_SPECS, enum_name
from epochlib.records import decode_batch

HEX = bytes.fromhex
FUZZ = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# kraft-metadata.md §5.5, spaces kept as in the spec
TOPIC_V0 = "01 02 00 05 74657374 8e0f9e8341114e4680c17e758e9af6a1 00"
PARTITION_V1 = ("01 03 01 00000000 8e0f9e8341114e4680c17e758e9af6a1 02 00000001 02 00000001 01 01 00000001 "
                "00000000 00000000 02 3d267a26b72a1363624c17e6aa315cbf 00")
PARTITION_V0 = ("01 03 00 00000000 a5c80182e3804a2ab7ba3913ac6bbf43 02 00000001 02 00000001 01 01 00000001 "
                "00000000 00000000 00")
PCR_LEADER_NONE = "01 05 01 00000000 8e0fb3057c1946da93900acc3aea3202 01 01 04 ffffffff"
PCR_LEADER_1 = "01 05 01 00000000 8e0f9e8341114e4680c17e758e9af6a1 01 01 04 00000001"
BRC_V0_UNFENCE = "01 11 00 00000001 00000000000003fe 01 00 01 ff"
BRC_V1_SHUTDOWN = "01 11 01 00000001 0000000000000006 01 01 01 01"
NOOP_BATCH = ("0000000000000008 0000003c 00000001 02 797a9084 0000 00000000 0000019271f78684 0000019271f78684 "
              "ffffffffffffffff ffff ffffffff 00000001 14 00 00 00 01 08 01140000 00")
LEADER_CHANGE = "0000 00000001 02 00000001 00 02 00000001 00 00"
SNAPSHOT_HEADER = "0000 0000018817f8c452 00"


def h(s: str) -> bytes:
    return HEX(s.replace(" ", ""))


def test_topic_record_vector() -> None:
    r = decode_record_value(h(TOPIC_V0))
    assert (r.api_key, r.version, r.name) == (2, 0, "TopicRecord")
    assert r.data == {"name": "test", "topic_id": "jg-eg0ERTkaAwX51jpr2oQ"}


def test_partition_record_v1_vector() -> None:
    r = decode_record_value(h(PARTITION_V1))
    assert (r.api_key, r.version) == (3, 1)
    d = r.data
    assert (d["partition_id"], d["topic_id"], d["replicas"], d["isr"]) == (0, "jg-eg0ERTkaAwX51jpr2oQ", [1], [1])
    assert (d["removing_replicas"], d["adding_replicas"], d["leader"]) == ([], [], 1)
    assert (d["leader_epoch"], d["partition_epoch"], d["leader_recovery_state"]) == (0, 0, 0)
    assert d["directories"] == ["PSZ6JrcqE2NiTBfmqjFcvw"]
    assert d["eligible_leader_replicas"] is None


def test_partition_record_v0_vector_has_no_directories() -> None:
    d = decode_record_value(h(PARTITION_V0)).data
    assert d["topic_id"] == "pcgBguOASiq3ujkTrGu_Qw" and d["directories"] == [] and d["leader"] == 1


@pytest.mark.parametrize(("hexs", "topic", "leader"), [
    (PCR_LEADER_NONE, "jg-zBXwZRtqTkArMOuoyAg", -1), (PCR_LEADER_1, "jg-eg0ERTkaAwX51jpr2oQ", 1)])
def test_partition_change_vectors_carry_only_the_leader(hexs: str, topic: str, leader: int) -> None:
    r = decode_record_value(h(hexs))
    assert (r.api_key, r.version) == (5, 1)
    d = r.data
    assert (d["partition_id"], d["topic_id"], d["leader"]) == (0, topic, leader)
    # every other tag absent = "no change" sentinels (§2.3)
    assert d["isr"] is None and d["replicas"] is None and d["leader_recovery_state"] == -1


def test_broker_registration_change_vectors() -> None:
    a = decode_record_value(h(BRC_V0_UNFENCE)).data
    assert (a["broker_id"], a["broker_epoch"], a["fenced"], a["in_controlled_shutdown"]) == (1, 1022, -1, 0)
    b = decode_record_value(h(BRC_V1_SHUTDOWN)).data
    assert (b["broker_epoch"], b["fenced"], b["in_controlled_shutdown"]) == (6, 0, 1)


@pytest.mark.parametrize("hexs", [TOPIC_V0, PARTITION_V1, PARTITION_V0, PCR_LEADER_NONE, PCR_LEADER_1,
                                  BRC_V0_UNFENCE, BRC_V1_SHUTDOWN, "01140000"])
def test_vectors_reencode_byte_exact(hexs: str) -> None:
    raw = h(hexs)
    r = decode_record_value(raw)
    assert encode_record_value(r.api_key, r.version, r.data) == raw


def test_whole_noop_batch_vector_decodes_and_our_writer_reproduces_it() -> None:
    raw = h(NOOP_BATCH)
    b = decode_batch(raw)
    assert (b.base_offset, b.partition_leader_epoch, b.crc, b.max_timestamp) == (8, 1, 0x797A9084, 1728488900228)
    (e,) = list(iter_metadata_log(raw))
    assert (e.offset, e.timestamp, e.raft_epoch, e.record.name) == (8, 1728488900228, 1, "NoOpRecord")
    again = encode_metadata_batch([(20, 0, {})], base_offset=8, raft_epoch=1, timestamp=1728488900228)
    assert again == raw  # CRC-32C, attributes, producer fields: byte for byte what the controller wrote


def test_control_vectors() -> None:
    lc = decode_control_value(2, h(LEADER_CHANGE))
    assert lc.name == "LeaderChangeMessage"
    assert lc.data == {"control_version": 0, "leader_id": 1, "voters": [{"voter_id": 1}],
                       "granting_voters": [{"voter_id": 1}]}
    sh = decode_control_value(3, h(SNAPSHOT_HEADER))
    assert sh.data == {"control_version": 0, "last_contained_log_timestamp": 1684029359186}
    assert encode_control_value(2, lc.data) == h(LEADER_CHANGE)
    assert decode_control_value(9, b"\x00\x01").name == "Unknown"


def test_every_api_key_of_the_spec_is_recognised() -> None:
    assert set(RECORD_SPECS) == set(range(30)) - {6, 13, 16}
    assert enum_name("ZkMigrationStateRecord") == "ZK_MIGRATION_STATE_RECORD"
    assert enum_name("BrokerRegistrationChangeRecord") == "BROKER_REGISTRATION_CHANGE_RECORD"


@pytest.mark.parametrize("key", [6, 13, 16, 30, 200, 32767])
def test_unknown_api_key_is_a_typed_unknown_row(key: int) -> None:
    value = w.write_uvarint(1) + w.write_uvarint(key) + w.write_uvarint(0) + b"\xde\xad"
    r = decode_record_value(value)
    assert (r.name, r.api_key, r.raw, r.known) == ("Unknown", key, b"\xde\xad", False)
    assert codec.encode_record(r) == value


def test_newer_version_reads_with_newest_layout_or_stays_unknown() -> None:
    # TopicRecord "v1" with the v0 layout: read, version kept, noted
    r = decode_record_value(h("01 02 01 05 74657374 8e0f9e8341114e4680c17e758e9af6a1 00"))
    assert (r.name, r.version, r.data["name"]) == ("TopicRecord", 1, "test")
    assert "read with the v0 layout" in r.note
    # a newer layout that does not fit (extra inline bytes) is kept raw, not an error
    r2 = decode_record_value(h("01 02 05 05 74657374 8e0f9e8341114e4680c17e758e9af6a1 00 ff ff"))
    assert r2.name == "Unknown" and r2.raw.endswith(b"\xff\xff") and "does not fit" in r2.note


@pytest.mark.parametrize(("value", "why"), [
    (b"\x00\x02\x00", "frame version 0"), (b"\x02\x02\x00", "frame version 2"),
    (HEX("01ffff03") + b"\x00", "does not fit an int16"), (b"\x01", "runs past the end"),
    (h(TOPIC_V0) + b"\x00", "garbage"), (h(PCR_LEADER_1)[:-1], ""),
])
def test_bad_frames_and_trailing_bytes_raise_decode_error(value: bytes, why: str) -> None:
    with pytest.raises(DecodeError) as ei:
        decode_record_value(value)
    assert why in str(ei.value) or not why


# ------------------------------------------------------------------ round trips of every table


def _strategy(f: FieldSpec, version: int) -> st.SearchStrategy:
    nullable = version in f.nullable_versions
    if f.is_array:
        elem = _struct(f.fields, version) if f.elem_type == "struct" else _prim(f.elem_type)
        s = st.lists(elem, max_size=3)
    elif f.type == "struct":
        s = _struct(f.fields, version)
    else:
        s = _prim(f.type)
    return st.one_of(st.none(), s) if nullable else s


def _prim(t: str) -> st.SearchStrategy:
    bits = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
    if t in bits:
        n = bits[t]
        return st.integers(-(1 << (n - 1)), (1 << (n - 1)) - 1)
    return {"uint16": st.integers(0, 0xFFFF), "bool": st.booleans(),
            "float64": st.floats(allow_nan=False), "string": st.text(max_size=8), "bytes": st.binary(max_size=8),
            "uuid": st.binary(min_size=16, max_size=16).map(w.uuid_to_str)}[t]


def _struct(fields, version: int) -> st.SearchStrategy:
    return st.fixed_dictionaries({f.key: _strategy(f, version) if version in f.versions else st.just(f.default_value())
                                  for f in fields})


_CASES = [(k, v) for k, spec in RECORD_SPECS.items() for v in spec.versions()]


@pytest.mark.parametrize(("api_key", "version"), _CASES, ids=[f"{RECORD_SPECS[k].name}-v{v}" for k, v in _CASES])
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_record_table_round_trips(api_key: int, version: int, data) -> None:
    value = data.draw(_struct(RECORD_SPECS[api_key].fields, version))
    raw = encode_record_value(api_key, version, value)
    r = decode_record_value(raw)
    assert (r.api_key, r.version, r.name) == (api_key, version, RECORD_SPECS[api_key].name)
    assert r.data == value
    assert encode_record_value(api_key, version, r.data) == raw


@pytest.mark.parametrize("ctype", sorted(CONTROL_SPECS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_every_control_table_round_trips(ctype: int, data) -> None:
    value = data.draw(_struct(CONTROL_SPECS[ctype].fields, 0))
    assert decode_control_value(ctype, encode_control_value(ctype, value)).data == value


# ------------------------------------------------------------------ fuzz

_REAL_VALUES = [h(x) for x in (TOPIC_V0, PARTITION_V1, PARTITION_V0, PCR_LEADER_NONE, BRC_V0_UNFENCE, BRC_V1_SHUTDOWN)]


def _only_decode_error(fn, *args) -> None:
    with contextlib.suppress(DecodeError):
        fn(*args)


@FUZZ
@given(st.binary(max_size=200))
def test_fuzz_random_values(raw: bytes) -> None:
    _only_decode_error(decode_record_value, raw)
    _only_decode_error(decode_control_value, 2, raw)
    _only_decode_error(decode_control_value, 6, raw)


@FUZZ
@given(st.sampled_from(_REAL_VALUES), st.lists(st.tuples(st.integers(0, 80), st.integers(0, 255)), max_size=4))
def test_fuzz_mutated_values(raw: bytes, edits) -> None:
    b = bytearray(raw)
    for i, v in edits:
        b[i % len(b)] = v
    _only_decode_error(decode_record_value, bytes(b))


@pytest.mark.parametrize("raw", _REAL_VALUES + [h(LEADER_CHANGE)])
def test_truncated_at_every_byte_raises_decode_error(raw: bytes) -> None:
    for n in range(len(raw)):
        with pytest.raises(DecodeError):
            if raw == h(LEADER_CHANGE):
                decode_control_value(2, raw[:n])
            else:
                decode_record_value(raw[:n])


@FUZZ
@given(st.binary(max_size=300))
def test_fuzz_log_walk_never_raises(raw: bytes) -> None:
    for item in iter_metadata_log(raw):
        assert isinstance(item, codec.MetadataEntry | codec.MetadataError)


def test_bad_value_in_a_good_batch_is_a_record_error_and_the_walk_goes_on() -> None:
    seg = encode_metadata_batch([(20, 0, {}), b"\x01\x02\x00\x05te", (20, 0, {})], base_offset=0, raft_epoch=1,
                                timestamp=5)
    items = list(iter_metadata_log(seg))
    assert [type(i).__name__ for i in items] == ["MetadataEntry", "MetadataError", "MetadataEntry"]
    assert items[1].unit == "record" and items[1].offset == 1
    # a flipped byte breaks the CRC: one batch error, nothing silently dropped
    bad = bytearray(seg)
    bad[-1] ^= 1
    (err,) = list(iter_metadata_log(bytes(bad)))
    assert err.unit == "batch" and "crc" in err.reason.lower()
    assert struct.unpack(">i", seg[8:12])[0] + 12 == len(seg)


def test_kraft_package_imports_no_spark_or_delta() -> None:
    import subprocess
    import sys

    code = ("import sys\nimport epochlib.kraft, epochlib.kraft.arrow, epochlib.kraft.dumptext\n"
            "print(','.join(sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'deltalake', 'py4j'))))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == ""
