"""Issue 12 items 2–4 on the capture side: captures that start mid-stream or miss packets,
pcapng files merged from interfaces with different clocks, and TLS on (or off) a broker port.

Bytes are built independently of :mod:`epochlib.pcap`'s reader: Kafka frames by kafka-python,
TCP/IP packets by dpkt's packet classes, pcapng blocks by hand with ``struct``, TLS records by
Python's ``ssl`` module (a real ClientHello) or by hand (record headers per RFC 8446 §5.1).
"""

from __future__ import annotations

import io
import os
import socket
import ssl
import struct

import dpkt
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import MetadataResponse
from test_pcap import BROKER, CLIENT, _capture, _split, metadata_request, metadata_response

from epochlib.pcap import CaptureError, CaptureTally, Exchange, iter_exchanges, tally

C, B = (CLIENT, 50001), (BROKER, 9092)


def _kinds(errors: list[CaptureError]) -> list[str]:
    return sorted(e.kind for e in errors)


# ---------------------------------------------------------------- item 2: mid-stream, missed packets


def test_response_of_a_missed_request_does_not_hide_its_neighbours() -> None:
    """The real-capture case: capture starts mid-stream and request 8 falls into a gap; responses 7
    (whose request was captured, a v2 Metadata response) and 9 must both be decoded."""
    req7, req8, req9 = (metadata_request(2, cid) for cid in (7, 8, 9))
    resp7, resp8, resp9 = (metadata_response(2, cid, partitions=20) for cid in (7, 8, 9))
    old_resp = metadata_response(2, 6)
    down = old_resp[-40:] + resp7 + resp8 + resp9
    segs = [
        (1.0, *C, *B, req7, 0),
        (1.2, *C, *B, req9, len(req7) + len(req8)),  # request 8 was never captured
        (1.5, *B, *C, down, 0),
    ]
    items = list(iter_exchanges(_capture(segs, handshake=False)))
    exchanges, errors = _split(items)
    assert [(e.correlation_id, e.api_version) for e in exchanges] == [(7, 2), (9, 2)]
    assert exchanges[0].response == resp7[4:] and exchanges[1].response == resp9[4:]
    decoded = MetadataResponse.decode(exchanges[0].response, version=2, header=True)
    assert len(decoded.topics[0].partitions) == 20
    assert _kinds(errors) == ["partial", "unpaired_response"]
    (unpaired,) = [e for e in errors if e.kind == "unpaired_response"]
    assert "correlation id 8" in unpaired.reason and not unpaired.quarantined
    counts = tally(items)
    assert (counts.exchanges, counts.quarantined, counts.unpaired_responses, counts.partial_frames) == (2, 0, 1, 1)
    assert counts.units_read == 2


def test_run_starting_on_an_unpaired_frame_keeps_it_as_unpaired_not_skipped() -> None:
    """A capture that starts between frames, just after a request was sent: the first response has
    no request; it is reported as unpaired (not as 'skipped bytes'), and the next ones pair."""
    resp5 = metadata_response(1, 5)
    segs = [(1.0, *B, *C, resp5), (1.1, *C, *B, metadata_request(1, 7)), (1.2, *B, *C, metadata_response(1, 7)),
            (1.3, *C, *B, metadata_request(1, 9)), (1.4, *B, *C, metadata_response(1, 9))]
    exchanges, errors = _split(list(iter_exchanges(_capture(segs, handshake=False))))
    assert [e.correlation_id for e in exchanges] == [7, 9]
    assert [(e.kind, e.position) for e in errors] == [("unpaired_response", 1)]


def test_synced_stream_skips_an_unpaired_response_by_its_size() -> None:
    resp = [metadata_response(1, cid) for cid in (7, 8, 9)]
    segs = [(1.0, *C, *B, metadata_request(1, 7) + metadata_request(1, 9)), (2.0, *B, *C, b"".join(resp))]
    items = list(iter_exchanges(_capture(segs)))
    exchanges, errors = _split(items)
    assert [e.correlation_id for e in exchanges] == [7, 9]
    assert [e.kind for e in errors] == ["unpaired_response"]
    assert errors[0].client == f"{CLIENT}:50001" and errors[0].broker == f"{BROKER}:9092"


def test_responses_without_any_captured_request_are_unpaired_not_corrupt() -> None:
    """Only the tail of a conversation was captured (no request at all): nothing could be paired,
    but nothing is bad input either."""
    down = metadata_response(1, 6)[-30:] + metadata_response(1, 7) + metadata_response(1, 8)
    items = list(iter_exchanges(_capture([(1.0, *B, *C, down)], handshake=False)))
    assert [(i.kind, i.quarantined) for i in items] == [("unpaired_response", False)]


def test_unpaired_request_and_undecodable_request_kinds_and_per_stream_counts() -> None:
    c2 = (CLIENT, 50002)
    bad_req = b"\x00\x00\x00\x06\x00\x03\x00\x01\x00\x00"  # header cut short: could not decode
    segs = [(1.0, *C, *B, metadata_request(1, 1)), (1.1, *B, *C, metadata_response(1, 1)),
            (1.2, *C, *B, metadata_request(1, 2)),  # never answered in the capture
            (2.0, *c2, *B, bad_req)]
    items = list(iter_exchanges(_capture(segs)))
    per = tally(items, by_stream=True)
    one, two = per[(f"{CLIENT}:50001", f"{BROKER}:9092")], per[(f"{CLIENT}:50002", f"{BROKER}:9092")]
    assert (one.exchanges, one.unpaired_requests, one.quarantined) == (1, 1, 0)
    assert (two.exchanges, two.unpaired_requests, two.quarantined) == (0, 0, 1)
    whole = tally(items)
    assert isinstance(whole, CaptureTally) and (whole.units_read, whole.quarantined) == (2, 1)


def test_frame_cut_by_the_end_of_the_capture_is_partial() -> None:
    resp = metadata_response(1, 7, partitions=50)
    segs = [(1.0, *C, *B, metadata_request(1, 7)), (1.1, *B, *C, resp[:300])]
    unpaired, cut = list(iter_exchanges(_capture(segs)))
    assert (unpaired.kind, cut.kind) == ("unpaired_request", "partial")
    assert "incomplete" in cut.reason and not cut.quarantined and cut.position == 4


# ---------------------------------------------------------------- item 3: pcapng, several interfaces


def _block(btype: int, body: bytes, order: str = "<") -> bytes:
    body += b"\x00" * (-len(body) % 4)
    n = len(body) + 12
    return struct.pack(order + "II", btype, n) + body + struct.pack(order + "I", n)


def _opt(code: int, value: bytes, order: str = "<") -> bytes:
    return struct.pack(order + "HH", code, len(value)) + value + b"\x00" * (-len(value) % 4)


def _shb(order: str = "<") -> bytes:
    return _block(0x0A0D0D0A, struct.pack(order + "IHHq", 0x1A2B3C4D, 1, 0, -1), order)


def _idb(linktype: int, tsresol: int | None = None, tsoffset: int | None = None, order: str = "<") -> bytes:
    opts = b""
    if tsresol is not None:
        opts += _opt(9, bytes([tsresol]), order)
    if tsoffset is not None:
        opts += _opt(14, struct.pack(order + "q", tsoffset), order)
    if opts:
        opts += _opt(0, b"", order)
    return _block(1, struct.pack(order + "HHI", linktype, 0, 65535) + opts, order)


def _epb(iface: int, ticks: int, pkt: bytes, order: str = "<") -> bytes:
    head = struct.pack(order + "IIIII", iface, ticks >> 32, ticks & 0xFFFFFFFF, len(pkt), len(pkt))
    return _block(6, head + pkt, order)


def _ip_tcp(src: tuple[str, int], dst: tuple[str, int], seq: int, payload: bytes, flags: int = 0x18) -> dpkt.ip.IP:
    tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq, ack=1, flags=flags, win=65535, data=payload)
    ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=6, ttl=64, data=tcp)
    ip.len = len(ip)
    return ip


def _eth(ip: dpkt.ip.IP) -> bytes:
    return bytes(dpkt.ethernet.Ethernet(src=b"\x02" + b"\x00" * 5, dst=b"\x02" + b"\x00" * 4 + b"\x01",
                                        type=dpkt.ethernet.ETH_TYPE_IP, data=ip))


T0 = 1_700_000_000


def merged_capture(order: str = "<") -> bytes:
    """Client-side interface 0 (Ethernet, µs, the default resolution) and broker-side interface 1
    (raw IP, ns) merged into one file, as ``mergecap`` writes it; a third interface (2^-20 s ticks,
    ``if_tsoffset`` = T0) carries a second exchange on another connection."""
    c2 = (CLIENT, 50002)
    req, resp = metadata_request(1, 7), metadata_response(1, 7)
    req2, resp2 = metadata_request(1, 8), metadata_response(1, 8)
    return b"".join([
        _shb(order),
        _idb(1, order=order),                      # µs by default
        _idb(101, tsresol=9, order=order),         # raw IP, ns
        _idb(1, tsresol=0x80 | 20, tsoffset=T0, order=order),
        _epb(0, T0 * 10**6 + 123_456, _eth(_ip_tcp(C, B, 1000, req)), order),
        _epb(1, T0 * 10**9 + 124_000_789, bytes(_ip_tcp(B, C, 5000, resp)), order),
        _epb(2, 3 << 19, _eth(_ip_tcp(c2, B, 1000, req2)), order),      # T0 + 1.5 s
        _epb(2, 7 << 18, _eth(_ip_tcp(B, c2, 9000, resp2)), order),     # T0 + 1.75 s
    ])


@pytest.mark.parametrize("order", ["<", ">"])
def test_pcapng_each_interface_keeps_its_own_clock_and_link_type(order: str) -> None:
    items = list(iter_exchanges(merged_capture(order)))
    exchanges, errors = _split(items)
    assert errors == []
    first, second = exchanges
    assert first.request_ts == pytest.approx(T0 + 0.123456, abs=1e-6)
    assert first.ts == pytest.approx(T0 + 0.124000789, abs=1e-6)  # dpkt 1.9.8 gives ~1000x this
    assert first.ts - first.request_ts == pytest.approx(0.000544789, abs=1e-6)
    assert (first.frame_index, first.request_frame_index, first.correlation_id) == (2, 1, 7)
    assert second.request_ts == T0 + 1.5 and second.ts == T0 + 1.75
    assert (second.frame_index, second.correlation_id) == (4, 8)


def test_pcapng_second_section_resets_the_interfaces() -> None:
    """``mergecap -a`` (concatenate) output: a new Section Header Block, whose interface 0 is ns."""
    req, resp = metadata_request(1, 7), metadata_response(1, 7)
    data = b"".join([
        _shb(), _idb(1), _epb(0, T0 * 10**6, _eth(_ip_tcp(C, B, 1000, req))),
        _shb(">"), _idb(1, tsresol=9, order=">"), _epb(0, T0 * 10**9 + 5 * 10**8, _eth(_ip_tcp(B, C, 5000, resp)),
                                                       order=">"),
    ])
    (ex,) = list(iter_exchanges(data))
    assert ex.request_ts == T0 and ex.ts == pytest.approx(T0 + 0.5, abs=1e-6)


def test_pcapng_packet_naming_an_undefined_interface_is_reported_and_skipped() -> None:
    req, resp = metadata_request(1, 7), metadata_response(1, 7)
    data = b"".join([_shb(), _idb(1), _epb(0, 10**6, _eth(_ip_tcp(C, B, 1000, req))),
                     _epb(3, 2 * 10**6, _eth(_ip_tcp(C, B, 1000, req))),
                     _epb(0, 3 * 10**6, _eth(_ip_tcp(B, C, 5000, resp)))])
    exchanges, errors = _split(list(iter_exchanges(data)))
    assert [e.frame_index for e in exchanges] == [3]
    assert [(e.position, e.kind) for e in errors] == [(2, "corrupt")] and "interface 3" in errors[0].reason


def test_pcapng_truncated_inside_a_block() -> None:
    data = merged_capture()
    items = list(iter_exchanges(data[:-20]))
    exchanges, errors = _split(items)
    assert [e.correlation_id for e in exchanges] == [7]
    assert any("ends inside packet 4" in e.reason and e.kind == "partial" for e in errors)
    assert not [e for e in errors if e.quarantined]


# ---------------------------------------------------------------- item 4: TLS


def real_client_hello() -> bytes:
    """The first flight of a real TLS client (Python's ssl / OpenSSL), no server needed."""
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    obj = ssl.create_default_context().wrap_bio(incoming, outgoing, server_hostname="broker-1")
    with pytest.raises(ssl.SSLWantReadError):
        obj.do_handshake()
    return outgoing.read()


def tls_record(content_type: int, body: bytes, version: int = 0x0303) -> bytes:
    return struct.pack(">BHH", content_type, version, len(body)) + body


def server_flight() -> bytes:
    hello = b"\x02" + (38).to_bytes(3, "big") + b"\x03\x03" + os.urandom(32) + b"\x00\x13\x01\x00"
    return tls_record(22, hello) + tls_record(20, b"\x01") + tls_record(23, os.urandom(300))


def app_data(n: int, size: int = 700) -> bytes:
    return b"".join(tls_record(23, os.urandom(size)) for _ in range(n))


def test_tls_stream_on_broker_port_gives_one_error_per_stream() -> None:
    """Two TLS connections (packets 1-16 and 17-): one item each, at its first data packet."""
    c2 = (CLIENT, 50002)
    segs = [(1.0, *C, *B, real_client_hello()), (1.1, *B, *C, server_flight()),
            (1.2, *C, *B, app_data(5)), (1.3, *B, *C, app_data(9, 1400)),
            (2.0, *c2, *B, real_client_hello()), (2.1, *B, *c2, server_flight() + app_data(3))]
    items = list(iter_exchanges(_capture(segs)))
    assert [(i.kind, i.unit, i.position) for i in items] == [("tls", "stream", 3), ("tls", "stream", 19)]
    assert all(isinstance(i, CaptureError) and i.quarantined for i in items)
    assert "TLS-encrypted stream on broker port 9092" in items[0].reason
    assert "capture responses client-side as JSONL" in items[0].reason
    assert tally(items).tls_streams == 2


def test_tls_stream_captured_mid_way_is_recognised() -> None:
    up, down = app_data(6), app_data(8, 1200)
    segs = [(1.0, *C, *B, up[333:]), (1.1, *B, *C, down[1000:])]
    items = list(iter_exchanges(_capture(segs, handshake=False)))
    assert [(i.kind, i.unit) for i in items] == [("tls", "stream")]


def test_tls_handshakes_to_an_unconfigured_port_are_named_once() -> None:
    tls_port = (BROKER, 9093)
    segs = [(1.0, *C, *B, metadata_request(1, 7)), (1.1, *B, *C, metadata_response(1, 7))]
    for i in range(3):
        cl = (CLIENT, 51000 + i)
        segs += [(2.0 + i, *cl, *tls_port, real_client_hello()), (2.1 + i, *tls_port, *cl, server_flight()),
                 (2.2 + i, *cl, *tls_port, app_data(2))]
    exchanges, errors = _split(list(iter_exchanges(_capture(segs))))
    assert [e.correlation_id for e in exchanges] == [7]
    (err,) = errors
    assert (err.kind, err.unit, err.quarantined) == ("tls_port", "port", False)
    assert "port 9093 (3 TCP streams)" in err.reason
    assert tally(exchanges + errors).tls_ports == [9093]


def test_plain_kafka_streams_are_not_taken_for_tls() -> None:
    """Kafka frames whose payload holds TLS-looking bytes stay Kafka."""
    fake = tls_record(23, b"x" * 40) * 4
    req = metadata_request(1, 7, client_id=fake.decode("latin-1")[:200])
    segs = [(1.0, *C, *B, req), (1.1, *B, *C, metadata_response(1, 7))]
    for handshake in (True, False):
        exchanges, errors = _split(list(iter_exchanges(_capture(segs, handshake=handshake))))
        assert [e.correlation_id for e in exchanges] == [7] and errors == []


# ---------------------------------------------------------------- fuzz (new paths)

_MERGED = merged_capture()
_MERGED_BE = merged_capture(">")


@settings(max_examples=200, deadline=None)
@given(st.tuples(st.sampled_from([_MERGED, _MERGED_BE]), st.integers(0, 1200), st.binary(min_size=1, max_size=8),
                 st.integers(0, 2000)).map(lambda t: t[0][: t[1]] + t[2] + t[0][t[1] + len(t[2]) :][: t[3]]))
def test_mutated_multi_interface_pcapng_never_raises(data: bytes) -> None:
    items = list(iter_exchanges(data))
    assert all(isinstance(i, (Exchange, CaptureError)) for i in items)
    assert all(i.kind in ("corrupt", "tls", "unpaired_request", "unpaired_response", "partial", "tls_port")
               for i in items if isinstance(i, CaptureError))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(20, 23), st.binary(max_size=600), st.integers(0, 40)),
                min_size=1, max_size=6), st.booleans())
def test_tls_like_and_mid_stream_payloads_never_raise(chunks: list, handshake: bool) -> None:
    """TLS-looking record headers, cut anywhere, mixed with Kafka frames of unknown correlation ids."""
    segs = []
    for i, (up, ctype, body, cut) in enumerate(chunks):
        payload = (tls_record(ctype, body) if body else metadata_response(1, i))[cut:]
        segs.append((float(i), *(C + B if up else B + C), payload))
    items = list(iter_exchanges(_capture(segs, handshake=handshake)))
    assert all(isinstance(i, (Exchange, CaptureError)) for i in items)
    per = tally(items, by_stream=True)
    assert sum(t.units_read for t in per.values()) == tally(items).units_read


def test_io_of_the_merged_capture_is_not_what_dpkt_reads() -> None:
    """Guards the hand-built file itself: dpkt's pcapng reader parses its blocks (so the bytes are a
    valid pcapng) — it is only its per-interface clock that this project does not trust."""
    pkts = list(dpkt.pcapng.Reader(io.BytesIO(_MERGED)))
    assert len(pkts) == 4 and pkts[0][0] == pytest.approx(T0 + 0.123456)
