"""The Versions type, spec validation and the one interpreter (spec §2)."""

from __future__ import annotations

import pytest

from epochlib import _wire as w
from epochlib._schema import F, FieldSpec, M, SchemaError, Versions, decode, encode, snake_case
from epochlib.errors import DecodeError


@pytest.mark.parametrize(
    ("text", "lo", "hi", "inside", "outside"),
    [("0", 0, 0, [0], [1, -1]), ("1-3", 1, 3, [1, 2, 3], [0, 4]), ("3+", 3, 0x7FFF, [3, 99], [2]),
     ("none", 0, -1, [], [0, 1])],
)
def test_versions_parse_and_membership(text, lo, hi, inside, outside):
    v = Versions.parse(text)
    assert (v.lo, v.hi) == (lo, hi)
    assert str(v) == text
    assert all(x in v for x in inside)
    assert not any(x in v for x in outside)


def test_versions_algebra_and_errors():
    assert Versions.parse("1-5").intersect(Versions.parse("3+")) == Versions.parse("3-5")
    assert Versions.parse("1-2").intersect(Versions.parse("3+")).empty
    assert Versions.parse("4+").issubset(Versions.parse("0+"))
    assert not Versions.parse("0+").issubset(Versions.parse("0-9"))
    for bad in ("x", "3-1", "1-", "+"):
        with pytest.raises(SchemaError):
            Versions.parse(bad)


def test_snake_case():
    assert snake_case("LeaderEpoch") == "leader_epoch"
    assert snake_case("commitTimestamp") == "commit_timestamp"
    assert snake_case("TopicID") == "topic_id"
    assert snake_case("group") == "group"


@pytest.mark.parametrize(
    ("build", "needle"),
    [
        (lambda: F("Epoch", "int32", nullable="0+"), "'Epoch': type 'int32' cannot be nullable"),
        (lambda: F("Foo", "int32", tag=1), "'Foo': a tag needs tagged_versions"),
        (lambda: F("Foo", "int32", tagged="1+"), "'Foo': a tag needs tagged_versions"),
        (lambda: F("Foo", "int32", tag=1, tagged="1-2"), "'Foo': tagged_versions 1-2 must be open-ended"),
        (lambda: F("Foo", "int32", "2+", tag=1, tagged="1+"), "'Foo': tagged_versions 1+ not within versions 2+"),
        (lambda: F("Foo", "string", "2+", nullable="1+"), "'Foo': nullable_versions 1+ not within"),
        (lambda: F("Foo", "struct"), "'Foo': struct type needs nested fields"),
        (lambda: F("Foo", "int32", fields=[F("A", "int8")]), "'Foo': only struct types"),
        (lambda: F("Foo", "int33"), "'Foo': unknown type 'int33'"),
        (lambda: F("Foo", "int8", default=300), "'Foo': default 300 does not fit"),
        (lambda: F("Foo", "string", default=None), "'Foo': default null on a field that is never nullable"),
        (lambda: F("Foo", "int32", "none"), "'Foo': versions must not be 'none'"),
        (lambda: M("Msg", "0-2", "none", F("A", "int8"), F("a", "int8")), "'Msg.a': duplicate name"),
        (lambda: M("Msg", "0+", "0+", F("A", "int8", tag=0, tagged="0+"), F("B", "int8", tag=0, tagged="0+")),
         "'Msg.B': duplicate tag 0"),
        (lambda: M("Msg", "0-3", "2+", F("S", "[]struct", fields=[F("T", "int8", tag=1, tagged="1+")])),
         "'Msg.S.T': tagged_versions 1+ outside the message's flexible_versions 2+"),
        (lambda: M("Msg", "none", "none", F("A", "int8")), "'Msg': valid_versions must not be 'none'"),
    ],
)
def test_invalid_specs_are_rejected_naming_the_field(build, needle):
    with pytest.raises(SchemaError) as e:
        build()
    assert needle in str(e.value)


SPEC = M(
    "Demo", "0-3", "2+",
    F("A", "int8"),
    F("B", "uint16", "1+", default=7),
    F("C", "float64"),
    F("D", "string", nullable="1+", default=None),
    F("E", "bytes"),
    F("R", "records"),
    F("U", "uuid"),
    F("Ok", "bool", default=True),
    F("Ids", "[]int64", nullable="3+"),
    F("Names", "[]string"),
    F("Client", "string", flexible="none"),
    F("Child", "struct", nullable="0+", default=None, fields=[F("X", "int32"), F("Y", "string")]),
    F("Items", "[]struct", fields=[F("K", "string"), F("V", "int16", "1+", default=-1)]),
    F("Extra", "int64", "2+", tag=3, tagged="2+", default=-1),
    F("Opt", "struct", "2+", nullable="2+", tag=5, tagged="2+", default=None, fields=[F("Z", "int8")]),
)


def sample() -> dict:
    return {
        "a": -3, "b": 65535, "c": 1.5, "d": "dé", "e": b"\x00\xff", "r": b"batch", "u": w.uuid_to_str(bytes(range(16))),
        "ok": False, "ids": [1, -(1 << 63)], "names": ["x", ""], "client": "cli",
        "child": {"x": 9, "y": "why"}, "items": [{"k": "k1", "v": 5}, {"k": "k2", "v": -1}],
        "extra": 123, "opt": {"z": 4},
    }


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_round_trip_every_version(version):
    raw = encode(SPEC, version, sample())
    value, pos = decode(SPEC, version, raw + b"trailing", 0)
    assert pos == len(raw)
    assert encode(SPEC, version, value) == raw
    s = sample()
    if version < 1:  # Items[].V is a v1+ field: its default shows up in v0
        s["items"] = [{"k": "k1", "v": -1}, {"k": "k2", "v": -1}]
    for f in SPEC.fields:
        present = version in f.versions
        assert value[f.key] == (s[f.key] if present else f.default_value()), f.name
    if version < 1:
        assert value["b"] == 7


def test_flexible_encoding_details():
    raw = encode(SPEC, 2, {**sample(), "child": None, "opt": None, "extra": -1})
    # compact string for D (len 2 bytes "dé" is 3 bytes utf-8 -> 0x04), non-compact Client
    assert w.write_compact_string("dé") in raw
    assert w.write_string("cli") in raw
    # defaults of tagged fields are not written: the top-level tag section is empty
    assert raw.endswith(b"\x00")
    value, _ = decode(SPEC, 2, raw)
    assert value["child"] is None and value["opt"] is None and value["extra"] == -1


def test_tagged_fields_known_unknown_and_nullable_struct():
    s = M("T", "0", "0+", F("A", "int8"), F("Opt", "struct", nullable="0+", tag=0, tagged="0+", default=None,
                                        fields=[F("Z", "int32")]))
    raw = encode(s, 0, {"a": 1, "opt": {"z": 5}, "_unknown_tags": {7: b"\xaa\xbb"}})
    # A, count 2, tag 0 size 6 (presence byte + int32 + struct tags), tag 7 size 2
    assert raw.hex() == "01" "02" "00" "06" "01" "00000005" "00" "07" "02" "aabb"
    value, pos = decode(s, 0, raw)
    assert value == {"a": 1, "opt": {"z": 5}, "_unknown_tags": {7: b"\xaa\xbb"}} and pos == len(raw)
    assert encode(s, 0, value) == raw
    with pytest.raises(DecodeError, match="declared 7 bytes"):
        decode(s, 0, bytes.fromhex("010100070100000005" "0000"))
    # tags in any order, a repeated one taking its last value: Kafka's generated readers accept both (its
    # writers sort them), so a foreign writer's record is read, not quarantined
    value, pos = decode(s, 0, bytes.fromhex("01" "03" "0701aa" "0006" "01" "00000009" "00" "0006" "01" "00000005" "00"))
    assert value == {"a": 1, "opt": {"z": 5}, "_unknown_tags": {7: b"\xaa"}} and pos == 21


def test_untagged_nullable_struct_marker_and_null_array():
    raw = encode(SPEC, 3, {**sample(), "child": None, "ids": None})
    value, _ = decode(SPEC, 3, raw)
    assert value["child"] is None and value["ids"] is None
    with pytest.raises(ValueError):
        encode(SPEC, 2, {**sample(), "ids": None})


@pytest.mark.parametrize("version", [0, 2, 3])
def test_every_truncation_raises_decode_error(version):
    raw = encode(SPEC, version, sample())
    for n in range(len(raw)):
        with pytest.raises(DecodeError):
            decode(SPEC, version, raw[:n])


def test_unsupported_version_and_huge_counts():
    with pytest.raises(DecodeError, match="version 4 not in 0-3"):
        decode(SPEC, 4, b"")
    s = M("Arr", "0", "none", F("X", "[]int32"))
    with pytest.raises(DecodeError, match="exceeds") as e:
        decode(s, 0, b"\x00" + b"\x7f\xff\xff\xff", 1)
    assert e.value.offset == 1


def test_fieldspec_is_a_frozen_value():
    f = F("A", "int8")
    assert f == FieldSpec("A", "int8")
    with pytest.raises(AttributeError):
        f.name = "B"  # type: ignore[misc]
