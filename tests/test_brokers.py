"""One name per broker (epochlib.brokers): node ids, the response's own broker list, the operator's mapping."""

from __future__ import annotations

import contextlib
import io
import struct

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib import pcap, protocol
from epochlib.brokers import (
    canonical_broker,
    canonical_brokers_arrow,
    node_id_text,
    normalize_addresses,
    parse_address,
)
from epochlib.errors import DecodeError

#: the advertised listeners of a five-broker cluster (as a MetadataResponse lists them)
LISTED = [(n, f"broker-{n}.kafka.internal", 9092) for n in range(1, 6)]


def response(brokers: list[tuple[int, str, int]], version: int = 12, corr: int = 1) -> bytes:
    body = {
        "throttle_time_ms": 0, "cluster_id": "clu", "controller_id": 1, "topics": [],
        "brokers": [{"node_id": n, "host": h, "port": p, "rack": None} for n, h, p in brokers],
        "cluster_authorized_operations": -(1 << 31), "error_code": 0,
    }  # fmt: skip
    return protocol.encode_metadata_response(body, version, corr)


# ------------------------------------------------------------------------------------------ (a) node ids


@pytest.mark.parametrize(("raw", "want"), [
    (3, "3"), ("3", "3"), ("03", "3"), (0, "0"), ((1 << 31) - 1, "2147483647"),
    (True, None), (-1, None), ("-1", None), (1 << 31, None), ("3 ", None), ("٣", None), (3.0, None), (None, None),
])  # fmt: skip
def test_node_id_text(raw, want) -> None:
    assert node_id_text(raw) == want


def test_a_node_id_is_its_decimal_string_whatever_the_list_says() -> None:
    assert canonical_broker(3, LISTED) == "3"
    assert canonical_broker("03", []) == "3"  # not in any list: still what the capture says
    assert canonical_broker(None, LISTED) is None


# -------------------------------------------------------------------------------- (b) the response's list


def test_an_advertised_host_port_resolves_to_its_node_id() -> None:
    assert canonical_broker("broker-3.kafka.internal:9092", LISTED) == "3"
    assert canonical_broker("BROKER-3.Kafka.Internal:9092", LISTED) == "3"  # host names are case-insensitive


def test_a_port_mismatch_or_an_unlisted_host_stays_as_captured() -> None:
    assert canonical_broker("broker-3.kafka.internal:9093", LISTED) == "broker-3.kafka.internal:9093"
    assert canonical_broker("broker-9.kafka.internal:9092", LISTED) == "broker-9.kafka.internal:9092"
    assert canonical_broker("broker-3.kafka.internal", LISTED) == "broker-3.kafka.internal"  # no port
    assert canonical_broker("10.0.0.13:9092", LISTED) == "10.0.0.13:9092"  # a pcap peer of a named cluster


def test_an_address_listed_under_two_node_ids_is_not_resolved() -> None:
    twice = [*LISTED, (7, "broker-3.kafka.internal", 9092)]
    assert canonical_broker("broker-3.kafka.internal:9092", twice) == "broker-3.kafka.internal:9092"
    # the same node listed twice (one listener per line) is not a conflict
    assert canonical_broker("broker-3.kafka.internal:9092", [*LISTED, LISTED[2]]) == "3"


def test_a_cluster_advertising_ips_resolves_pcap_peers_directly() -> None:
    listed = [(n, f"10.0.0.{10 + n}", 9092) for n in range(1, 6)]
    assert canonical_broker("10.0.0.13:9092", listed) == "3"
    assert canonical_broker("10.0.0.13:9094", listed) == "10.0.0.13:9094"


def test_ipv6_peers_compare_in_canonical_form() -> None:
    """pcap writes ``[::1]:9092``; a Java broker may advertise ``0:0:0:0:0:0:0:1``."""
    for host in ("0:0:0:0:0:0:0:1", "::1", "[::1]"):
        assert canonical_broker("[::1]:9092", [(4, host, 9092)]) == "4"
    assert canonical_broker("[2001:DB8::a]:9092", [(5, "2001:db8:0:0:0:0:0:a", 9092)]) == "5"
    assert canonical_broker("[::1]:9093", [(4, "::1", 9092)]) == "[::1]:9093"


def test_pcap_reports_ipv6_peers_in_the_form_the_resolver_reads() -> None:
    req = protocol.encode_metadata_request({"topics": None}, 12, 9, "cli")
    resp = response([(4, "0:0:0:0:0:0:0:1", 9092)], corr=9)
    framed = lambda b: struct.pack(">i", len(b)) + b  # noqa: E731
    buf = io.BytesIO()
    pcap.write_pcap(buf, [(1.0, "::2", 50000, "::1", 9092, framed(req)), (1.01, "::1", 9092, "::2", 50000, framed(resp))])
    (ex,) = [e for e in pcap.iter_exchanges(buf.getvalue(), broker_ports=(9092,)) if not isinstance(e, pcap.CaptureError)]
    assert ex.broker == "[::1]:9092"
    brokers = protocol.metadata_response_brokers(ex.response, ex.api_version)
    assert canonical_broker(ex.broker, brokers) == "4"


# ----------------------------------------------------------------------------- (c) the operator's mapping


def test_the_mapping_names_what_the_list_does_not() -> None:
    book = {"10.0.0.13:9092": 3, "10.0.0.14": 4}
    assert canonical_broker("10.0.0.13:9092", LISTED, book) == "3"
    assert canonical_broker("10.0.0.13:9093", LISTED, book) == "10.0.0.13:9093"  # that port only
    assert canonical_broker("10.0.0.14:9092", LISTED, book) == "4"  # a host-only key: any port
    assert canonical_broker("10.0.0.14:19092", [], book) == "4"
    assert canonical_broker("10.0.0.15:9092", LISTED, book) == "10.0.0.15:9092"


def test_a_port_key_wins_over_a_host_key_and_the_list_over_the_mapping() -> None:
    book = {"10.0.0.13": 3, "10.0.0.13:9094": 8}
    assert canonical_broker("10.0.0.13:9094", [], book) == "8"
    assert canonical_broker("10.0.0.13:9092", [], book) == "3"
    listed = [(1, "10.0.0.13", 9092)]  # what the cluster said at that moment beats static config
    assert canonical_broker("10.0.0.13:9092", listed, book) == "1"
    # an address the list gives two ids is left to the mapping
    assert canonical_broker("10.0.0.13:9092", [(1, "10.0.0.13", 9092), (2, "10.0.0.13", 9092)], book) == "3"


def test_mapping_keys_are_normalized() -> None:
    assert normalize_addresses({"Broker-3.Kafka.Internal:9092": 3, "::1": 4, "[0:0::2]:9092": 5, "10.0.0.1": 6}) == {
        "broker-3.kafka.internal:9092": 3, "[::1]": 4, "[::2]:9092": 5, "10.0.0.1": 6}
    assert normalize_addresses({"a:1": 1, "A:1": 1}) == {"a:1": 1}  # two spellings, same id: fine
    book = normalize_addresses({"[::1]:9092": 4})
    assert normalize_addresses(book) == book
    assert canonical_broker("[::1]:9092", [], {"::1": 4}) == "4"


@pytest.mark.parametrize(("mapping", "message"), [
    ({"10.0.0.13:99999": 3}, "is not a TCP port"),
    ({"10.0.0.13:": 3}, "is not a TCP port"),
    ({"": 3}, "empty host"),
    ({"a b:9092": 3}, "bad characters"),
    ({"[::1:9092": 3}, "'[' without ']'"),
    ({"[nope]:9092": 3}, "not an IPv6 address"),
    ({"fe80::zz": 3}, "not an IPv6 address"),
    ({"3": 3}, "is a node id, not an address"),
    ({"10.0.0.13": "3"}, "must be an integer 0..2147483647, got string '3'"),
    ({"10.0.0.13": True}, "got boolean"),
    ({"10.0.0.13": -1}, "got int -1"),
    ({"a:1": 1, "A:1": 2}, "same address (a:1) with different node ids (1 and 2)"),
])  # fmt: skip
def test_bad_mappings_say_why(mapping, message) -> None:
    with pytest.raises(ValueError) as info:
        normalize_addresses(mapping)
    assert message in str(info.value)


def test_parse_address_forms() -> None:
    assert parse_address("Host:9092") == ("host", 9092)
    assert parse_address("host") == ("host", None)
    assert parse_address("[::FFFF:10.0.0.1]:9092") == ("10.0.0.1", 9092)  # IPv4-mapped is the IPv4 address
    assert parse_address("fe80::1") == ("[fe80::1]", None)


def test_anything_else_stays_as_captured() -> None:
    for raw in ("b1", "not an address", "host:port", "[::1", ""):
        assert canonical_broker(raw, LISTED, {"10.0.0.1": 1}) == raw
    assert canonical_broker(3.5, LISTED) == "3.5"


# ----------------------------------------------------------------------------------------- batch form


def test_broker_list_prefix_matches_a_full_decode_in_every_version() -> None:
    cache: protocol.BrokerListCache = {}  # shared across versions and lists: a hit must never cross them
    for brokers in ([(1, "b1", 9092), (2, "B2", 9093)], [(1, "b1", 9092)], [(1, "b1", 9092), (2, "B2", 9094)]):
        for v in range(14):
            buf = response(brokers, version=v, corr=v)
            full = protocol.decode_metadata_response(buf, v)["brokers"]
            want = [(b["node_id"], b["host"], b["port"]) for b in full]
            assert protocol.metadata_response_brokers(buf, v) == want
            assert protocol.metadata_response_brokers(buf, v, cache) == want
            assert protocol.metadata_response_brokers(buf, v, cache) == want  # the cached answer
    assert sum(len(k) for k in cache.values()) == 3 * 14


def test_the_batch_form_agrees_with_the_reference() -> None:
    listed = [*LISTED, (6, "10.0.0.16", 9092), (7, "broker-5.kafka.internal", 9093)]
    good = response(listed, version=12)
    old = response(listed, version=0)
    cases = [
        ("3", good, 12), ("broker-3.kafka.internal:9092", good, 12), ("broker-3.kafka.internal:9092", old, 0),
        ("10.0.0.16:9092", good, 12), ("10.0.0.13:9092", good, 12), ("10.0.0.14:1", good, 12),
        ("broker-5.kafka.internal:9093", good, 12), ("broker-3.kafka.internal:9092", b"\x00\x01", 12),
        ("broker-3.kafka.internal:9092", None, 12), ("broker-3.kafka.internal:9092", good, None),
        (None, good, 12), ("b1", good, 12), ("broker-3.kafka.internal:9092", good, 12),
    ]  # fmt: skip
    book = {"10.0.0.13:9092": 3, "10.0.0.14": 4}
    raw, bufs, vers = (list(c) for c in zip(*cases, strict=True))
    got = canonical_brokers_arrow(pa.array(raw, pa.string()), pa.array(bufs, pa.binary()),
                                  pa.array(vers, pa.int16()), book).to_pylist()  # fmt: skip

    def reference(r, b, v):
        try:
            listed_ = protocol.metadata_response_brokers(b, v) if b is not None and v is not None else []
        except DecodeError:
            listed_ = []
        return canonical_broker(r, listed_, book)

    assert got == [reference(*c) for c in cases]
    assert got == ["3", "3", "3", "6", "3", "4", "7", "broker-3.kafka.internal:9092", "broker-3.kafka.internal:9092",
                   "broker-3.kafka.internal:9092", None, "b1", "3"]  # fmt: skip


def test_the_batch_form_checks_its_inputs() -> None:
    with pytest.raises(ValueError, match="1 brokers, 0 responses"):
        canonical_brokers_arrow(pa.array(["a"]), pa.array([], pa.binary()), pa.array([], pa.int16()))
    with pytest.raises(ValueError, match="is not a TCP port"):
        canonical_brokers_arrow(pa.array(["a"]), pa.array([b""]), pa.array([1], pa.int16()), {"a:0": 1})


_FUZZ_CACHE: protocol.BrokerListCache = {}


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 13), st.data())
def test_fuzz_broker_prefix_only_raises_decode_error(v, data) -> None:
    blob = bytearray(response(LISTED, version=v))
    for _ in range(data.draw(st.integers(1, 4))):
        blob[data.draw(st.integers(0, len(blob) - 1))] = data.draw(st.integers(0, 255))
    blob = bytes(blob[: data.draw(st.integers(0, len(blob)))])
    plain = cached = None
    with contextlib.suppress(DecodeError):
        plain = protocol.metadata_response_brokers(blob, v)
    with contextlib.suppress(DecodeError):
        cached = protocol.metadata_response_brokers(blob, v, _FUZZ_CACHE)
    assert plain == cached  # equal list bytes decode to the same list, whatever follows them
    got = canonical_brokers_arrow(pa.array(["broker-3.kafka.internal:9092"]), pa.array([blob], pa.binary()),
                                  pa.array([v], pa.int16()))  # fmt: skip
    name = got.to_pylist()[0]  # a mutated list may name another node, never anything but a node id or the raw
    assert name == "broker-3.kafka.internal:9092" or node_id_text(name) == name
