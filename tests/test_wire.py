"""Primitive encodings against known byte/value pairs (spec §2) and round trips."""

from __future__ import annotations

import contextlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from epochlib import DecodeError
from epochlib import _wire as w

VARINT_CASES = [(0, "00"), (-1, "01"), (1, "02"), (42, "54"), (-64, "7f"), (64, "8001"),
                (2**31 - 1, "feffffff0f"), (-(2**31), "ffffffff0f")]


@pytest.mark.parametrize(("value", "hexed"), VARINT_CASES)
def test_varint_known_vectors(value: int, hexed: str) -> None:
    assert w.write_varint(value).hex() == hexed
    assert w.read_varint(bytes.fromhex(hexed), 0) == (value, len(hexed) // 2)


def test_uvarint_too_long_is_a_decode_error_with_position() -> None:
    with pytest.raises(DecodeError) as e:
        w.read_uvarint(b"\x00\xff\xff\xff\xff\xff\xff", 1)
    assert e.value.offset == 1


def test_string_past_end_reports_position() -> None:
    with pytest.raises(DecodeError) as e:
        w.read_string(b"\x00\x00\x00\x05ab", 2)
    assert e.value.offset == 4 and "runs past the end" in e.value.reason


def test_uuid_text_form_is_22_char_base64url() -> None:
    raw = bytes(range(1, 17))
    text = w.uuid_to_str(raw)
    assert len(text) == 22 and w.uuid_from_str(text) == raw


def test_offsets_partition_matches_java_hash() -> None:
    assert w.java_string_hash("hello") == 99162322  # Java: "hello".hashCode()
    # the famous string whose hashCode is Integer.MIN_VALUE: Kafka's Utils.abs maps it to 0
    assert w.java_string_hash("polygenelubricants") == -(2**31)
    assert w.offsets_partition_for("polygenelubricants") == 0
    assert w.offsets_partition_for("hello") == 99162322 % 50


def test_tagged_fields_roundtrip_and_order() -> None:
    data = w.write_tagged_fields({0: b"\x01", 5: b"abc"})
    assert w.read_tagged_fields(data, 0) == ({0: b"\x01", 5: b"abc"}, len(data))
    # any order, as Kafka's generated readers read them (a repeated tag: its last payload)
    assert w.read_tagged_fields(b"\x03\x05\x00\x01\x00\x05\x01\x07", 0) == ({5: b"\x07", 1: b""}, 8)
    with pytest.raises(DecodeError):
        w.read_tagged_fields(b"\x02\x05\x00\x01\x02\x00", 0)  # runs past the end


@given(st.integers(-(2**63), 2**63 - 1))
def test_varlong_roundtrip(v: int) -> None:
    assert w.read_varlong(w.write_varlong(v), 0)[0] == v


@given(st.binary(max_size=12), st.integers(0, 12))
def test_readers_raise_only_decode_error(data: bytes, pos: int) -> None:
    for reader in (w.read_varint, w.read_varlong, w.read_string, w.read_compact_nullable_string,
                   w.read_nullable_bytes, w.read_compact_bytes, w.read_uuid, w.read_tagged_fields,
                   w.read_int64):
        with contextlib.suppress(DecodeError):
            reader(data, pos)
