"""Headers, framing, error names and Metadata v0–13 (spec §5, §6), cross-checked with kafka-python."""

from __future__ import annotations

import pytest

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
