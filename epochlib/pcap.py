"""Kafka request/response exchanges from packet captures (pcap, pcapng), and a capture writer.

Pipeline (all in memory, sans-IO: the caller passes the file's bytes):

1. **Packets** — ``dpkt.pcap.Reader`` for pcap, a block walk of our own for pcapng (each
   interface keeps its own clock: ``if_tsresol`` µs/ns/2^-n and ``if_tsoffset``, and link type);
   link types Ethernet (incl. VLAN), Linux SLL/SLL2, BSD loopback and raw IP; IPv4 and IPv6;
   TCP only. Packets are numbered from 1 in file order, as Wireshark does.
2. **TCP reassembly**, per connection and direction: segments are ordered by (unwrapped 32-bit)
   sequence number, retransmitted bytes are dropped, and a hole (a segment never captured)
   splits the stream into *runs*. A direction whose SYN was seen starts synchronised on a
   Kafka frame boundary; one whose SYN was not (capture started mid-stream), and every run
   after a hole, is re-synchronised on a plausible frame boundary: the first one from which whole
   frames chain on (a header whose frame would run past the captured bytes proves nothing), else
   the one with the most whole frames — or reported as unsynchronised with a :class:`CaptureError`.
   Requests of any API key up to :data:`NEW_API_KEYS` past the known ones count. A response frame
   answering a request the capture missed does not break re-synchronisation: it is skipped by its
   size prefix.
3. **TLS** — a connection whose first bytes (either direction) are TLS records is reported
   once (``kind="tls"``) and not framed; TLS ClientHellos to ports that are not broker ports
   are reported once per port (``kind="tls_port"``).
4. **Framing** — each run is split into ``INT32 size || payload`` frames (spec §5.1). The
   client→broker direction is the one whose destination port is in ``broker_ports``.
5. **Pairing** — requests are decoded with :func:`epochlib.protocol.decode_request_header` and
   responses matched to them by correlation id within their TCP connection.

Contract: :func:`iter_exchanges` never raises on bad input; it yields :class:`Exchange` items
and :class:`CaptureError` items in packet order, and goes on where it can. Each error has a
``kind``: ``corrupt`` and ``tls`` are input that could not be decoded (quarantine rows);
``unpaired_request``, ``unpaired_response``, ``partial`` (a frame cut by the capture's start,
end or a gap, and a file that ends inside a packet: read up to there, as Wireshark reads a capture
copied while it was written) and ``tls_port`` are limits of the capture, counted apart (:func:`tally`).
A packet that claims more bytes than any capture writes (256 KiB), past the file's end, is damage.
"""

from __future__ import annotations

import bisect
import heapq
import io
import itertools
import re
import socket
import struct
import zlib
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

__all__ = ["KINDS", "QUARANTINE_KINDS", "CaptureError", "CaptureTally", "Exchange", "iter_exchanges", "tally",
           "tcp_ports", "write_pcap"]

#: Largest frame accepted as plausible (Kafka's socket.request.max.bytes is 100 MiB by default;
#: fetch responses can be larger).
MAX_FRAME = 1 << 28
#: How far into a run the re-synchronisation scan looks for a frame boundary.
RESYNC_WINDOW = 1 << 20
MSS = 1460

_PCAP_MAGICS = {b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1"}
_PCAPNG_MAGIC = b"\x0a\x0d\x0d\x0a"
_I32 = struct.Struct(">i")
_I16 = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class Exchange:
    """One Kafka request and its response, as seen on the wire.

    ``ts`` is the capture time (seconds) of the packet carrying the response's first byte and
    ``frame_index`` that packet's 1-based number; ``request`` and ``response`` are the frame
    payloads after the 4-byte size field (header + body). ``client`` and ``broker`` are
    ``"ip:port"`` (``"[v6]:port"`` for IPv6).
    """

    ts: float
    client: str
    broker: str
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    request: bytes
    response: bytes
    frame_index: int
    request_ts: float = 0.0
    request_frame_index: int = 0


#: :attr:`CaptureError.kind` values. Only :data:`QUARANTINE_KINDS` mean "could not decode"; the others
#: describe the capture's limits (what it did not contain) and are counted, not quarantined.
CORRUPT = "corrupt"  # bytes that should be Kafka (or a capture) but could not be decoded
TLS = "tls"  # a TLS-encrypted TCP stream on a broker port: one item per stream (unit "stream")
UNPAIRED_REQUEST = "unpaired_request"  # a complete request whose response was not captured
UNPAIRED_RESPONSE = "unpaired_response"  # a complete response whose request was not captured
PARTIAL = "partial"  # a frame cut by the capture's start or end, or by a gap (packets not captured)
TLS_PORT = "tls_port"  # TLS handshakes to a port that is not a broker port: one item per port (unit "port")
KINDS = (CORRUPT, TLS, UNPAIRED_REQUEST, UNPAIRED_RESPONSE, PARTIAL, TLS_PORT)
QUARANTINE_KINDS = frozenset({CORRUPT, TLS})


@dataclass(frozen=True, slots=True)
class CaptureError:
    """Something in the capture that could not be used.

    ``position`` is the 1-based packet number where the problem starts (``unit`` ``"frame"``, ``"stream"``:
    the stream's first packet, or ``"port"``: the first handshake seen), or 0 for a problem with the file as
    a whole (``unit == "file"``). ``kind`` is one of :data:`KINDS`; :attr:`quarantined` tells whether the
    item is bad input (a quarantine row) or a limit of the capture (a count). ``client``/``broker`` name
    the TCP connection (``"ip:port"``) when the item belongs to one.
    """

    position: int
    reason: str
    unit: str = "frame"
    kind: str = CORRUPT
    client: str | None = None
    broker: str | None = None

    @property
    def quarantined(self) -> bool:
        """True when this is input that could not be decoded (a quarantine row), not a capture limit."""
        return self.kind in QUARANTINE_KINDS


@dataclass(slots=True)
class CaptureTally:
    """Counts over the items of one capture (:func:`tally`), for a run log beside the quarantine.

    ``units_read == exchanges + quarantined`` holds for what is counted as a unit: an exchange
    (decoded downstream) or a quarantined item. Unpaired and partial frames and foreign TLS ports
    are counted apart: they are not bad input.
    """

    exchanges: int = 0
    quarantined: int = 0
    unpaired_requests: int = 0
    unpaired_responses: int = 0
    partial_frames: int = 0
    tls_streams: int = 0
    tls_ports: list[int] = field(default_factory=list)

    @property
    def units_read(self) -> int:
        return self.exchanges + self.quarantined

    def add(self, item: Exchange | CaptureError) -> None:
        """Count one item of :func:`iter_exchanges`."""
        if isinstance(item, Exchange):
            self.exchanges += 1
            return
        if item.quarantined:
            self.quarantined += 1
        if item.kind == TLS:
            self.tls_streams += 1
        elif item.kind == UNPAIRED_REQUEST:
            self.unpaired_requests += 1
        elif item.kind == UNPAIRED_RESPONSE:
            self.unpaired_responses += 1
        elif item.kind == PARTIAL:
            self.partial_frames += 1
        elif item.kind == TLS_PORT:
            m = re.search(r"port (\d+)", item.reason)
            if m:
                self.tls_ports.append(int(m.group(1)))


def tally(
    items: Iterable[Exchange | CaptureError], *, by_stream: bool = False
) -> CaptureTally | dict[tuple[str, str] | None, CaptureTally]:
    """Count the items of one capture: per file, or (``by_stream``) per ``(client, broker)`` connection.

    With ``by_stream``, items that belong to no connection (file problems, foreign TLS ports) are
    counted under the key ``None``.
    """
    if not by_stream:
        total = CaptureTally()
        for item in items:
            total.add(item)
        return total
    out: dict[tuple[str, str] | None, CaptureTally] = {}
    for item in items:
        key = (item.client, item.broker) if item.client is not None and item.broker is not None else None
        out.setdefault(key, CaptureTally()).add(item)
    return out


# ---------------------------------------------------------------- packets


def _ip_str(raw: bytes) -> str:
    if len(raw) == 4:
        return socket.inet_ntop(socket.AF_INET, raw)
    return "[" + socket.inet_ntop(socket.AF_INET6, raw) + "]"


def _l3(linktype: int, buf: bytes) -> Any:
    """The IP packet inside a link-layer frame, or None."""
    import dpkt

    if linktype == 1:  # Ethernet (dpkt strips 802.1Q/QinQ tags)
        return dpkt.ethernet.Ethernet(buf).data
    if linktype == 113:  # Linux cooked capture v1
        return dpkt.sll.SLL(buf).data
    if linktype == 276:  # Linux cooked capture v2
        return dpkt.sll2.SLL2(buf).data
    if linktype in (0, 108):  # BSD loopback / OpenBSD loop
        return dpkt.loopback.Loopback(buf).data
    if linktype in (12, 14, 101, 228, 229):  # raw IP
        if not buf:
            return None
        version = buf[0] >> 4
        if version == 4:
            return dpkt.ip.IP(buf)
        if version == 6:
            return dpkt.ip6.IP6(buf)
    return None


def _tcp_of(linktype: int, buf: bytes) -> tuple[str, int, str, int, Any] | None:
    import dpkt

    ip = _l3(linktype, buf)
    if isinstance(ip, dpkt.ip.IP):
        if ip.p != dpkt.ip.IP_PROTO_TCP or ip.mf or ip.offset:
            return None
    elif not isinstance(ip, dpkt.ip6.IP6):
        return None
    tcp = ip.data
    if not isinstance(tcp, dpkt.tcp.TCP):
        return None
    return _ip_str(bytes(ip.src)), tcp.sport, _ip_str(bytes(ip.dst)), tcp.dport, tcp


class _ShortReadTracker(io.BytesIO):
    """A BytesIO that remembers when a read returned fewer bytes than asked (truncated file), and how many.

    dpkt's reader reads the file header, then per packet its record header and its data: a data read (the 3rd,
    5th, … read) that returns nothing is a cut too (the file ends right after a record header), while a record
    header read that returns nothing is the file's end."""

    short = False
    wanted = 0
    reads = 0

    def read(self, n: int | None = -1) -> bytes:  # type: ignore[override]
        out = super().read(n)
        self.reads += 1
        data_read = self.reads >= 3 and self.reads % 2 == 1
        if n is not None and n > 0 and len(out) < n and (out or data_read):
            self.short, self.wanted = True, n
        return out


#: The most bytes a packet of a capture cut while it was written may claim (tcpdump's largest snapshot length):
#: a file that ends inside a packet claiming more is damaged, not cut.
_MAX_PACKET = 262_144


def _cut_at_end(n: int, what: str) -> CaptureError:
    """The capture ends inside packet ``n`` (a file copied while tcpdump was still writing it): its end, as
    Wireshark reads it ("cut short in the middle of a packet"); the frames it cut are counted as partial."""
    return CaptureError(n, f"capture ends inside {what} {n} (cut while it was being written?): read up to there",
                        kind=PARTIAL)


def _packets(data: bytes, errors: list[CaptureError]) -> Iterator[tuple[int, float, int, bytes]]:
    """``(packet_no, ts, linktype, frame bytes)``; problems go to ``errors``."""
    import dpkt

    head = bytes(data[:4])
    if head == _PCAPNG_MAGIC:
        yield from _pcapng_packets(bytes(data), errors)
        return
    if head not in _PCAP_MAGICS:
        errors.append(CaptureError(0, "not a pcap or pcapng file", "file"))
        return
    f = _ShortReadTracker(bytes(data))
    try:
        reader: Any = dpkt.pcap.Reader(f)
        linktype = reader.datalink()
    except Exception as e:  # noqa: BLE001 - dpkt raises assorted types on a bad header
        errors.append(CaptureError(0, f"unreadable capture header ({type(e).__name__}: {e})", "file"))
        return
    it = iter(reader)
    n = 0
    limit = max(int(getattr(reader, "snaplen", 0) or 0), _MAX_PACKET)
    while True:
        try:
            ts, buf = next(it)
        except StopIteration:
            break
        except dpkt.NeedData:  # fewer than a record header's 16 bytes left: the file ends there
            errors.append(_cut_at_end(n + 1, "the header of packet"))
            return
        except Exception as e:  # noqa: BLE001
            errors.append(CaptureError(n + 1, f"capture truncated or corrupt after packet {n} ({type(e).__name__})"))
            return
        n += 1
        if f.short:
            errors.append(_cut_at_end(n, "packet") if f.wanted <= limit else CaptureError(
                n, f"capture corrupt at packet {n}: it claims {f.wanted} bytes, past the file's end"))
            return
        yield n, float(ts), linktype, bytes(buf)


_SHB_BOM = {b"\x4d\x3c\x2b\x1a": "<", b"\x1a\x2b\x3c\x4d": ">"}
_OPT_IF_TSRESOL, _OPT_IF_TSOFFSET = 9, 14


@dataclass(frozen=True, slots=True)
class _Interface:
    """One pcapng Interface Description Block: its link type and clock (ticks per second, offset)."""

    linktype: int
    ticks_per_s: int = 1_000_000
    offset_s: int = 0

    def seconds(self, ticks: int) -> float:
        """Ticks to seconds, splitting whole seconds off first so large ns counts keep their precision."""
        whole, frac = divmod(ticks, self.ticks_per_s)
        return self.offset_s + whole + frac / self.ticks_per_s


def _options(body: memoryview, order: str) -> Iterator[tuple[int, bytes]]:
    p = 0
    while p + 4 <= len(body):
        code, length = struct.unpack_from(order + "HH", body, p)
        if code == 0:
            return
        yield code, bytes(body[p + 4 : p + 4 + length])
        p += 4 + ((length + 3) & ~3)


def _interface(body: memoryview, order: str) -> _Interface:
    linktype = struct.unpack_from(order + "H", body, 0)[0]
    ticks, offset = 1_000_000, 0
    for code, value in _options(body[8:], order):
        if code == _OPT_IF_TSRESOL and value:
            exp = value[0] & 0x7F
            ticks = 2**exp if value[0] & 0x80 else 10**exp
        elif code == _OPT_IF_TSOFFSET and len(value) >= 8:
            offset = struct.unpack_from(order + "q", value)[0]
    return _Interface(linktype, ticks, offset)


def _pcapng_packets(data: bytes, errors: list[CaptureError]) -> Iterator[tuple[int, float, int, bytes]]:
    """Packets of a pcapng file, each timed by *its own* interface's ``if_tsresol``/``if_tsoffset``.

    dpkt 1.9.8's pcapng reader applies the first interface's resolution (and link type) to every
    packet and stops at a second section; this walk keeps one interface table per section (pcapng
    spec, draft-ietf-opsawg-pcapng §4). Enhanced, Simple and (obsolete) Packet Blocks are read;
    other blocks are skipped. A Simple Packet Block has no timestamp: it gets the previous packet's.
    """
    view = memoryview(data)
    end = len(data)
    pos = n = 0
    order = "<"
    ifaces: list[_Interface] = []
    last_ts = 0.0
    while pos < end:
        if pos + 12 > end:
            errors.append(_cut_at_end(n + 1, "the block header of packet") if pos else CaptureError(
                0, "capture truncated inside its first block header", "file"))
            return
        if data[pos : pos + 4] == _PCAPNG_MAGIC:
            order = _SHB_BOM.get(data[pos + 8 : pos + 12], "")
            if not order:
                errors.append(CaptureError(0 if pos == 0 else n + 1, "pcapng section header with an unknown "
                                           "byte-order magic", "file" if pos == 0 else "frame"))
                return
            ifaces = []
        btype, blen = struct.unpack_from(order + "II", data, pos)
        if blen < 12 or blen % 4:
            errors.append(CaptureError(0 if pos == 0 else n + 1, f"corrupt pcapng block length {blen} after packet "
                                       f"{n}", "file" if pos == 0 else "frame"))
            return
        if pos + blen > end:
            errors.append(_cut_at_end(n + 1, "packet") if pos and blen <= _MAX_PACKET + 64 else CaptureError(
                0 if pos == 0 else n + 1, f"capture truncated or corrupt inside packet {n + 1} (a block of {blen} "
                "bytes past the file's end)", "file" if pos == 0 else "frame"))
            return
        body = view[pos + 8 : pos + blen - 4]
        pos += blen
        try:
            if btype == 0x0A0D0D0A:
                major = struct.unpack_from(order + "H", body, 4)[0]
                if major != 1:
                    errors.append(CaptureError(0 if pos == blen else n + 1, f"unsupported pcapng version {major}",
                                               "file" if pos == blen else "frame"))
                    return
                continue
            if btype == 1:
                ifaces.append(_interface(body, order))
                continue
            if btype == 6:  # Enhanced Packet Block
                iface_id, hi, lo, caplen = struct.unpack_from(order + "IIII", body, 0)
                start = 20
            elif btype == 2:  # Packet Block (obsolete)
                iface_id, _drops, hi, lo, caplen = struct.unpack_from(order + "HHIII", body, 0)
                start = 20
            elif btype == 3:  # Simple Packet Block
                iface_id, hi, lo, start = 0, None, None, 4
                caplen = min(struct.unpack_from(order + "I", body, 0)[0], len(body) - 4)
            else:
                continue
        except struct.error:
            errors.append(CaptureError(n + 1, f"corrupt pcapng block of type {btype} after packet {n}"))
            return
        n += 1
        if start + caplen > len(body):
            errors.append(CaptureError(n, f"pcapng packet {n} claims {caplen} captured bytes, its block holds "
                                          f"{len(body) - start}"))
            continue
        if iface_id >= len(ifaces):
            errors.append(CaptureError(n, f"pcapng packet {n} names interface {iface_id}, which no interface "
                                          "description block defines"))
            continue
        iface = ifaces[iface_id]
        if hi is not None:
            last_ts = iface.seconds((hi << 32) | lo)
        yield n, last_ts, iface.linktype, bytes(body[start : start + caplen])


# ---------------------------------------------------------------- TCP reassembly


@dataclass(slots=True)
class _Run:
    """Contiguous bytes of one direction, with which packet carried which byte."""

    buf: bytearray = field(default_factory=bytearray)
    offsets: list[int] = field(default_factory=list)  # run offset where each packet's bytes begin
    packets: list[tuple[float, int]] = field(default_factory=list)  # (ts, packet_no)
    synced: bool = False
    after_gap: bool = False

    def packet_at(self, offset: int) -> tuple[float, int]:
        return self.packets[bisect.bisect_right(self.offsets, offset) - 1]


@dataclass(slots=True)
class _Direction:
    segs: list[tuple[int, int, bytes, float]] = field(default_factory=list)  # (abs seq, pkt no, data, ts)
    syn_abs: int | None = None
    syn_seq32: int | None = None
    last_seq32: int | None = None
    last_abs: int = 0

    def unwrap(self, seq32: int) -> int:
        if self.last_seq32 is None:
            self.last_seq32, self.last_abs = seq32, seq32
            return seq32
        delta = (seq32 - self.last_seq32) & 0xFFFFFFFF
        if delta >= 1 << 31:
            delta -= 1 << 32
        self.last_seq32, self.last_abs = seq32, self.last_abs + delta
        return self.last_abs

    def runs(self) -> list[_Run]:
        """Reassemble: order by sequence, drop retransmitted bytes, split at holes."""
        if not self.segs:
            return []
        segs = sorted(self.segs, key=lambda s: (s[0], s[1]))
        cursor = self.syn_abs + 1 if self.syn_abs is not None else segs[0][0]
        run = _Run(synced=self.syn_abs is not None)
        out = [run]
        for start, pkt, data, ts in segs:
            end = start + len(data)
            if end <= cursor:
                continue  # retransmission (or data before the SYN we keep)
            if start > cursor:
                run = _Run(after_gap=True)
                out.append(run)
                cursor = start
            run.offsets.append(len(run.buf))
            run.packets.append((ts, pkt))
            run.buf += data[cursor - start :]
            cursor = end
        return [r for r in out if r.buf]


@dataclass(slots=True)
class _Conn:
    client: str
    broker: str
    to_broker: _Direction = field(default_factory=_Direction)
    to_client: _Direction = field(default_factory=_Direction)


def _collect(data: bytes, ports: frozenset[int], errors: list[CaptureError],
             foreign: dict[int, list[int]] | None = None) -> list[_Conn]:
    """TCP connections on broker ports, in order of first packet.

    ``foreign`` collects TLS ClientHellos to other ports: port -> [first packet, number of streams]."""
    hellos: set[tuple[str, int, str, int]] = set()
    conns: dict[tuple[str, int, str, int], list[_Conn]] = {}
    order: list[_Conn] = []
    for n, ts, linktype, buf in _packets(data, errors):
        try:
            parsed = _tcp_of(linktype, buf)
        except Exception:  # noqa: BLE001 - not a decodable IP/TCP packet: not Kafka traffic
            continue
        if parsed is None:
            continue
        src, sport, dst, dport, tcp = parsed
        syn = bool(tcp.flags & 0x02)
        ack = bool(tcp.flags & 0x10)
        fwd_key, rev_key = (src, sport, dst, dport), (dst, dport, src, sport)
        if dport in ports and sport in ports:  # broker to broker: whoever sent the SYN is the client
            if fwd_key in conns or (rev_key not in conns and syn and not ack):
                key, forward = fwd_key, True
            else:
                key, forward = rev_key, False
        elif dport in ports:
            key, forward = fwd_key, True
        elif sport in ports:
            key, forward = rev_key, False
        else:
            if foreign is not None and fwd_key not in hellos and _is_client_hello(bytes(tcp.data)):
                hellos.add(fwd_key)
                seen = foreign.setdefault(dport, [n, 0])
                seen[1] += 1
            continue
        bucket = conns.setdefault(key, [])
        conn = bucket[-1] if bucket else None
        if conn is None or (syn and forward and not ack and _is_new_connection(conn.to_broker, tcp.seq)):
            conn = _Conn(f"{key[0]}:{key[1]}", f"{key[2]}:{key[3]}")
            bucket.append(conn)
            order.append(conn)
        d = conn.to_broker if forward else conn.to_client
        abs_seq = d.unwrap(tcp.seq)
        payload = bytes(tcp.data)
        if syn:
            if d.syn_abs is None:
                d.syn_abs, d.syn_seq32 = abs_seq, tcp.seq
            abs_seq += 1  # the SYN takes one sequence number
        if payload:
            d.segs.append((abs_seq, n, payload, ts))
    return order


def tcp_ports(data: bytes | bytearray | memoryview, *, top: int = 5) -> list[tuple[int, int]]:
    """The TCP ports that carried the most packets in a capture, as ``(port, packets)``, most first (``top`` of
    them): what ``broker_ports`` may have to be when :func:`iter_exchanges` found nothing on the configured ones.

    Each packet counts once, for its connection's service port: the destination of a SYN (or the source of a
    SYN-ACK) seen in the capture, else the lower of its two ports (clients use high ephemeral ports). A separate
    walk over the packets, meant only for captures without exchanges (the normal decode does not pay for it).
    Never raises: an unreadable capture, or its unreadable rest, counts as no packets.
    """
    pairs: dict[tuple[int, int], int] = {}
    servers: set[int] = set()
    try:
        for _n, _ts, linktype, buf in _packets(bytes(data), []):
            try:
                parsed = _tcp_of(linktype, buf)
            except Exception:  # noqa: BLE001 - not a decodable IP/TCP packet
                continue
            if parsed is None:
                continue
            _src, sport, _dst, dport, tcp = parsed
            if tcp.flags & 0x02:  # SYN: the listening side is the destination (the source of a SYN-ACK)
                servers.add(sport if tcp.flags & 0x10 else dport)
            pairs[(sport, dport)] = pairs.get((sport, dport), 0) + 1
    except Exception:  # noqa: BLE001 - contract: never raise on bad input; what was read counts
        pass
    counts: dict[int, int] = {}
    for (sport, dport), n in pairs.items():
        port = dport if dport in servers else sport if sport in servers else min(sport, dport)
        counts[port] = counts.get(port, 0) + n
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max(0, top)]


def _is_new_connection(d: _Direction, seq32: int) -> bool:
    """A SYN on a 4-tuple already seen starts a new connection unless it retransmits the old SYN."""
    return not (d.syn_seq32 == seq32 or (d.syn_seq32 is None and not d.segs))


# ---------------------------------------------------------------- framing and resync


def _size_at(buf: bytearray, p: int) -> int:
    return _I32.unpack_from(buf, p)[0]


#: Request API keys above the known ones that a re-synchronisation still accepts: a broker handles
#: every key it advertises in ApiVersions, and clients use new ones as soon as brokers do.
NEW_API_KEYS = 32


def _request_keys(api_keys: dict[int, str]) -> frozenset[int]:
    top = max(api_keys)
    return frozenset(api_keys) | frozenset(range(top + 1, top + 1 + NEW_API_KEYS))


def _plausible_request(buf: bytearray, p: int, keys: frozenset[int]) -> bool:
    """A request frame at ``p``: a plausible size, a known API key and version, and (when captured) a client id
    length that fits. Needs the size, key and version only (8 bytes: a run may end inside the next header)."""
    if p + 8 > len(buf):
        return False
    size = _size_at(buf, p)
    if size < 8 or size > MAX_FRAME:
        return False
    key, version = _I16.unpack_from(buf, p + 4)[0], _I16.unpack_from(buf, p + 6)[0]
    if key not in keys or not 0 <= version <= 30:
        return False
    if size >= 10 and p + 14 <= len(buf):
        n = _I16.unpack_from(buf, p + 12)[0]
        if n < -1 or n > size - 10:
            return False
    return True


#: Correlation ids of responses whose request was not captured are accepted during re-synchronisation
#: when they lie this close to the connection's captured ones (clients count them up per connection).
CID_SLACK = 1 << 20


def _plausible_response(buf: bytearray, p: int, cids: set[int], lo: int, hi: int) -> bool:
    """A response frame at ``p``: a plausible size and a correlation id that was captured or lies in ``lo..hi``."""
    if p + 8 > len(buf):
        return False
    size = _size_at(buf, p)
    if not 4 <= size <= MAX_FRAME:
        return False
    cid = _I32.unpack_from(buf, p + 4)[0]
    return cid in cids or lo <= cid <= hi


def _walk_frames(buf: bytearray, p: int, check, limit: int) -> tuple[int, str]:
    """Follow frames from ``p`` (at most ``limit``): how many were whole, and how the walk ended — ``"end"``
    exactly at the run's end, ``"cut"`` in a header cut short by it (fewer than 8 bytes), ``"past"`` in a frame
    that runs past it, ``"bad"`` at a header ``check`` refuses, ``"limit"`` after ``limit`` whole frames."""
    n = 0
    for _ in range(limit):
        if p == len(buf):
            return n, "end"
        if p + 8 > len(buf):
            return n, "cut"
        if not check(buf, p):
            return n, "bad"
        end = p + 4 + _size_at(buf, p)
        if end > len(buf):
            return n, "past"
        n, p = n + 1, end
    return n, "limit"


def _chain_frames(buf: bytearray, p: int, check, depth: int) -> int:
    """How many whole frames follow each other from ``p`` (at most ``depth``), or -1 when a header on
    the way is not plausible. A frame that runs past the end counts for nothing: any four bytes that look
    like a header would pass so (in a response full of small integers, also after a whole frame or two),
    and a boundary found that way hides the whole frames captured after it. A chain that ends at the run's
    end, or inside the header after its last whole frame, has its whole frames counted (:func:`_best_boundary`
    then checks it as one that explains every byte: two small integers that chain to the end by chance are
    not ``depth`` frames)."""
    n, how = _walk_frames(buf, p, check, depth)
    return -1 if how == "bad" else n


def _chains_to_end(buf: bytearray, p: int, check, limit: int = 256) -> int:
    """How many headers chain from ``p`` to the run's end, each checked: whole frames, then one last frame that
    runs past the end (a capture cut inside a frame); -1 when a header on the way fails, or the chain ends in a
    header cut short (fewer than 8 bytes left: unchecked bytes are explained by nothing)."""
    n, how = _walk_frames(buf, p, check, limit)
    return -1 if how in ("bad", "cut") else n + (how == "past")


#: Candidate boundaries a re-synchronisation examines at most (a response full of small integers offers
#: thousands: each is a few µs, so a worst case costs a fraction of a second, once per hole).
MAX_RESYNC_CANDIDATES = 1 << 14


def _best_boundary(candidates: Iterator[int], buf: bytearray, make_check, depth: int,
                   make_strict=None) -> int | None:
    """The first candidate (in stream order) whose frames chain ``depth`` deep. Else, for a run with fewer whole
    frames than that (a short run after a hole, ending after its last frame or inside it): of the candidates
    with a whole frame from which frames explain every byte to the end (:func:`_chains_to_end`, each header
    passing ``make_strict()``'s check, by default ``make_check()``'s), the one with the most checked headers,
    the earliest of those — a few small integers inside a large response that happen to chain would otherwise
    win by number. Else the candidate with the most whole frames (the earliest of those).
    ``make_check()`` gives each candidate's chain its frame check (it may follow the chain, e.g. its
    correlation ids)."""
    best: tuple[int, int] | None = None
    explained: tuple[int, int] | None = None
    for p in itertools.islice(candidates, MAX_RESYNC_CANDIDATES):
        n = _chain_frames(buf, p, make_check(), depth)
        if n == depth:  # ``depth`` whole frames in order: stronger than any chain that only explains the bytes
            return p
        if n >= 1:
            headers = _chains_to_end(buf, p, (make_strict or make_check)())
            if headers > 0 and (explained is None or headers > explained[0]):
                explained = (headers, p)
        if n >= 0 and (best is None or n > best[0]):
            best = (n, p)
    if explained is not None:
        return explained[1]
    return None if best is None else best[1]


def _resync_request(buf: bytearray, start: int, api_keys: dict[int, str]) -> int | None:
    window = bytes(buf[start : start + RESYNC_WINDOW + 8])
    # candidates: an api key (int16, high byte 0) and a small api version right after a size field
    cands = (start + m.start() for m in re.finditer(rb"(?s)(?=....\x00[\x00-\x7f]\x00[\x00-\x1e])", window)
             if m.start() <= RESYNC_WINDOW)
    keys = _request_keys(api_keys)

    def check(b: bytearray, q: int) -> bool:
        return _plausible_request(b, q, keys)

    return _best_boundary(cands, buf, lambda: check, 3)


def _chain_reaches(buf: bytearray, p: int, target: int, check, steps: int = 256) -> bool:
    """Whole frames lead from ``p`` exactly to ``target``."""
    for _ in range(steps):
        if p == target:
            return True
        if p > target or not check(buf, p):
            return False
        p += 4 + _size_at(buf, p)
    return False


def _resync_response(buf: bytearray, start: int, candidates: list[int], all_cids: set[int],
                     after: int | None = None) -> int | None:
    """The first frame boundary at or after ``start``.

    The anchor is the earliest frame whose correlation id belongs to a captured request and from which
    frames chain on; frames *around* it may answer requests the capture missed (their ids are only
    required to be near the captured ones), so one unpaired response no longer hides its neighbours.
    When whole frames lead from ``start`` to the anchor, ``start`` itself is the boundary (the frames
    before the anchor are then reported as unpaired instead of being skipped as a partial frame).
    ``after``: the correlation id of the connection's last response framed before this run; the responses
    after a hole answer later requests, so their ids are larger (a client counts them up).
    """
    if after is not None:
        candidates = [c for c in candidates if c > after]
        all_cids = {c for c in all_cids if c > after}
    if not all_cids:
        return None
    lo, hi = min(all_cids) - CID_SLACK, max(all_cids) + CID_SLACK

    def check(b: bytearray, q: int) -> bool:
        return _plausible_response(b, q, all_cids, lo, hi)

    window = bytes(buf[start : start + RESYNC_WINDOW + 8])

    def anchors(cid: int) -> Iterator[int]:  # where a pending request's correlation id could start a frame
        pat = _I32.pack(cid)
        i = window.find(pat, 4)
        while i != -1:
            yield start + i - 4
            i = window.find(pat, i + 1)

    first, final = min(all_cids), max(all_cids)

    def in_order(captured_only: bool = False) -> Callable[[bytearray, int], bool]:
        # a connection's responses come in the order of its requests, whose correlation ids a client counts up
        last: list[int] = [] if after is None else [after]

        def check_next(b: bytearray, q: int) -> bool:
            if not check(b, q):
                return False
            cid = _I32.unpack_from(b, q + 4)[0]
            if (last and cid <= last[0]) or (captured_only and cid not in all_cids and not first < cid < final):
                return False
            last[:] = [cid]
            return True
        return check_next

    # in stream order: the scan stops at the first frame that chains on; a short run's chain must answer captured
    # requests, or requests missed between them (an id merely near them, from a small integer inside a response,
    # does not explain the bytes)
    best = _best_boundary(heapq.merge(*(anchors(c) for c in candidates[:1024])), buf, in_order, 4,
                          lambda: in_order(True))
    if best is not None and best > start and _chain_reaches(buf, start, best, check):
        return start
    return best


# ---------------------------------------------------------------- TLS

_TLS_MAX_RECORD = (1 << 14) + 2048  # TLSCiphertext.length limit (RFC 5246 §6.2.3)
_TLS_HEAD = re.compile(rb"(?=[\x14-\x17]\x03[\x01-\x04])")
TLS_SCAN = 1 << 15  # how far into a stream captured mid-way a TLS record boundary is looked for


def _tls_record(buf: bytes | bytearray, p: int) -> int | None:
    """The end of a TLS record header-plausible at ``p`` (content type 20–23, version 3.1–3.4), or None."""
    if p + 5 > len(buf):
        return None
    if not (20 <= buf[p] <= 23 and buf[p + 1] == 3 and 1 <= buf[p + 2] <= 4):
        return None
    length = (buf[p + 3] << 8) | buf[p + 4]
    if length == 0 or length > _TLS_MAX_RECORD:
        return None
    return p + 5 + length


def _tls_chain(buf: bytes | bytearray, p: int, cap: int = 64) -> tuple[int, bool]:
    """``(records, reaches_end)``: how many TLS records follow each other from ``p`` (at most ``cap``),
    and whether they run to the end of ``buf`` (the last one may be cut off there)."""
    count = 0
    while count < cap:
        end = _tls_record(buf, p)
        if end is None:
            return count, False
        count += 1
        if end >= len(buf):
            return count, True
        p = end
    return count, True


def _tls_at_start(run: _Run) -> bool:
    """A synchronised run (its SYN was captured) that starts with TLS records.

    No Kafka frame can start so: a leading byte 0x14–0x17 would be a size above :data:`MAX_FRAME`.
    One record is enough when it is a ClientHello/ServerHello handshake, two chained ones otherwise.
    """
    buf = run.buf
    if _tls_record(buf, 0) is None:
        return False
    if buf[0] == 22 and len(buf) > 5 and buf[5] in (1, 2):
        return True
    return _tls_chain(buf, 0)[0] >= 2


def _tls_mid_stream(run: _Run) -> bool:
    """A run captured mid-way: TLS records starting within its first :data:`TLS_SCAN` bytes chain on to
    its end (three at least), as encrypted traffic does and Kafka payloads do not."""
    buf = run.buf
    head = bytes(buf[: TLS_SCAN + 5])
    for m in _TLS_HEAD.finditer(head):
        count, to_end = _tls_chain(buf, m.start())
        if count >= 3 and to_end:
            return True
    return False


def _is_tls(up: list[_Run], down: list[_Run], api_keys: dict[int, str]) -> bool:
    """Whether a connection carries TLS: its first run in either direction is TLS.

    A run captured mid-way counts only when the request direction has no Kafka frame boundary
    either, so Kafka payloads that happen to hold TLS-looking bytes stay Kafka."""
    firsts = [r[0] for r in (up, down) if r]
    if any(r.synced and _tls_at_start(r) for r in firsts):
        return True
    if not any(not r.synced and _tls_mid_stream(r) for r in firsts):
        return False
    return not (up and _resync_request(up[0].buf, 0, api_keys) is not None)


def _is_client_hello(payload: bytes) -> bool:
    return len(payload) > 5 and payload[0] == 22 and payload[5] == 1 and _tls_record(payload, 0) is not None


# ---------------------------------------------------------------- framing


@dataclass(slots=True)
class _Frame:
    payload: bytes
    ts: float
    packet: int


def _frames(runs: list[_Run], what: str, errors: list[CaptureError], resync, conn: _Conn,
            unsynced_kind: str = CORRUPT) -> list[_Frame]:
    """Split runs into frames; unsynchronised runs are first re-synchronised with ``resync(buf, start, framed)``
    (``framed``: the frames split so far, earlier in the stream).

    ``unsynced_kind`` is the kind of a run no frame boundary is found in (unpaired when the
    connection has no captured request a response could answer)."""
    out: list[_Frame] = []

    def err(position: int, reason: str, kind: str) -> None:
        errors.append(CaptureError(position, reason, "frame", kind, conn.client, conn.broker))

    for run in runs:
        buf = run.buf
        pos = 0
        if not run.synced:
            found = resync(buf, 0, out)
            why = "after a gap in the TCP stream" if run.after_gap else "(capture started mid-stream)"
            if found is None:
                err(run.packets[0][1], f"{what} stream unsynchronised {why}: no plausible Kafka frame boundary "
                                       f"in {len(buf)} bytes", unsynced_kind)
                continue
            if found > 0:
                err(run.packets[0][1], f"{what} stream resynchronised {why}: skipped {found} bytes of a "
                                       "partial frame", PARTIAL)
            pos = found
        n = len(buf)
        while pos < n:
            if pos + 4 > n:
                err(run.packet_at(pos)[1], f"{what} frame size field cut off", PARTIAL)
                break
            size = _size_at(buf, pos)
            if size < 0 or size > MAX_FRAME:
                found = resync(buf, pos + 1, out)
                err(run.packet_at(pos)[1], f"implausible {what} frame (size {size})"
                    + ("; stream unsynchronised" if found is None else f"; skipped {found - pos} bytes"), CORRUPT)
                if found is None:
                    break
                pos = found
                continue
            end = pos + 4 + size
            if end > n:
                err(run.packet_at(pos)[1], f"{what} frame of {size} bytes incomplete ({n - pos - 4} captured "
                                           "before a gap or the end of the capture)", PARTIAL)
                break
            ts, pkt = run.packet_at(pos)
            out.append(_Frame(bytes(buf[pos + 4 : end]), ts, pkt))
            pos = end
    return out


# ---------------------------------------------------------------- pairing


def iter_exchanges(
    data: bytes | bytearray | memoryview,
    *,
    broker_ports: Iterable[int] = (9092,),
    api_keys: Iterable[int] | None = None,
) -> Iterator[Exchange | CaptureError]:
    """Kafka request/response pairs found in a pcap or pcapng capture.

    Args:
        data: the whole capture file.
        broker_ports: TCP ports of the brokers; traffic to them is client→broker.
        api_keys: keep only exchanges of these API keys (e.g. ``{3}`` for Metadata); errors
            about requests of other keys are left out too (a response without its request has
            no known key and is always reported).

    Yields:
        :class:`Exchange` and :class:`CaptureError` items, ordered by packet number. A TLS
        connection on a broker port gives one ``kind="tls"`` item (unit ``"stream"``) and nothing
        else; TLS handshakes to other ports give one ``kind="tls_port"`` item per port.
        :func:`tally` counts them.
    """
    from .errors import DecodeError
    from .protocol import API_KEYS, decode_request_header

    ports = frozenset(int(p) for p in broker_ports)
    keep = None if api_keys is None else frozenset(int(k) for k in api_keys)
    errors: list[CaptureError] = []
    items: list[tuple[int, int, Exchange | CaptureError]] = []
    foreign: dict[int, list[int]] = {}
    try:
        conns = _collect(bytes(data), ports, errors, foreign)
    except Exception as e:  # noqa: BLE001 - contract: never raise on bad input
        errors.append(CaptureError(0, f"capture could not be read ({type(e).__name__}: {e})", "file"))
        conns = []

    for port, (first, streams) in sorted(foreign.items(), key=lambda kv: kv[1][0]):
        errors.append(CaptureError(
            first, f"TLS handshakes to port {port} ({streams} TCP stream{'s' if streams != 1 else ''}), which is "
                   "not a configured broker port: if a broker listens there its traffic is encrypted; "
                   "capture responses client-side as JSONL", "port", TLS_PORT))

    for conn in conns:
        up_runs, down_runs = conn.to_broker.runs(), conn.to_client.runs()
        if _is_tls(up_runs, down_runs, API_KEYS):
            first = min(r.packets[0][1] for r in (up_runs[:1] + down_runs[:1]))
            port = conn.broker.rsplit(":", 1)[1]
            errors.append(CaptureError(first, f"TLS-encrypted stream on broker port {port} ({conn.client} -> "
                                              f"{conn.broker}): capture responses client-side as JSONL",
                                       "stream", TLS, conn.client, conn.broker))
            continue
        req_frames = _frames(up_runs, "request", errors, lambda b, s, _framed: _resync_request(b, s, API_KEYS), conn)
        pending: dict[int, deque[tuple[_Frame, dict[str, Any]]]] = {}
        order: list[int] = []
        for fr in req_frames:
            try:
                header, _ = decode_request_header(fr.payload, 0)
            except DecodeError as e:
                errors.append(CaptureError(fr.packet, f"undecodable request header: {e.reason} at byte {e.offset}",
                                           "frame", CORRUPT, conn.client, conn.broker))
                continue
            except Exception as e:  # noqa: BLE001
                errors.append(CaptureError(fr.packet, f"undecodable request header ({type(e).__name__})",
                                           "frame", CORRUPT, conn.client, conn.broker))
                continue
            cid = header["correlation_id"]
            pending.setdefault(cid, deque()).append((fr, header))
            order.append(cid)
        all_cids = set(pending)

        def resync_response(b: bytearray, s: int, framed: list[_Frame], pending=pending, order=order,
                            cids=all_cids) -> int | None:
            after = next((_I32.unpack_from(f.payload, 0)[0] for f in reversed(framed) if len(f.payload) >= 4), None)
            return _resync_response(b, s, [c for c in dict.fromkeys(order) if pending.get(c)], cids, after)

        resp_frames = _frames(down_runs, "response", errors, resync_response, conn,
                              CORRUPT if all_cids else UNPAIRED_RESPONSE)
        for fr in resp_frames:
            if len(fr.payload) < 4:
                errors.append(CaptureError(fr.packet, "response frame shorter than a correlation id",
                                           "frame", CORRUPT, conn.client, conn.broker))
                continue
            cid = _I32.unpack_from(fr.payload, 0)[0]
            queue = pending.get(cid)
            if not queue:
                errors.append(CaptureError(fr.packet, f"response with correlation id {cid} has no captured request",
                                           "frame", UNPAIRED_RESPONSE, conn.client, conn.broker))
                continue
            req, header = queue.popleft()
            if keep is not None and header["api_key"] not in keep:
                continue
            ex = Exchange(
                ts=fr.ts, client=conn.client, broker=conn.broker, api_key=header["api_key"],
                api_version=header["api_version"], correlation_id=cid, client_id=header["client_id"],
                request=req.payload, response=fr.payload, frame_index=fr.packet,
                request_ts=req.ts, request_frame_index=req.packet,
            )
            items.append((fr.packet, 1, ex))
        for queue in pending.values():
            for req, header in queue:
                if keep is None or header["api_key"] in keep:
                    errors.append(CaptureError(
                        req.packet, f"request (api key {header['api_key']}, correlation id "
                                    f"{header['correlation_id']}) has no captured response",
                        "frame", UNPAIRED_REQUEST, conn.client, conn.broker))
    items.extend((e.position, 0, e) for e in errors)
    items.sort(key=lambda t: (t[0], t[1]))
    for _, _, item in items:
        yield item


# ---------------------------------------------------------------- writer


def write_pcap(
    fileobj: BinaryIO,
    segments: Iterable[tuple],
    *,
    pcapng: bool = False,
    handshake: bool = True,
) -> int:
    """Write TCP segments as an Ethernet/IP/TCP capture (for tests and the simulator).

    Each segment is ``(ts, src_ip, src_port, dst_ip, dst_port, payload)``, optionally with a
    7th element ``rel_seq``: the payload's offset in that direction's byte stream, to write
    out-of-order segments and retransmissions (default: right after the previous payload).
    Sequence numbers are kept per flow from a deterministic ISN; the first segment of a new
    connection is preceded by a SYN / SYN-ACK handshake (``handshake=False`` leaves it out, as
    in a capture started mid-stream). Payloads longer than 1460 bytes are split into several
    segments. IPv6 addresses give IPv6 packets. Returns the number of packets written.
    """
    import dpkt

    writer: Any = (dpkt.pcapng.Writer(fileobj, snaplen=65535) if pcapng
                   else dpkt.pcap.Writer(fileobj, snaplen=65535))
    next_seq: dict[tuple[str, int, str, int], int] = {}
    isn: dict[tuple[str, int, str, int], int] = {}
    count = 0

    def emit(ts: float, src: str, sport: int, dst: str, dport: int, seq: int, ack: int, flags: int,
             payload: bytes) -> None:
        nonlocal count
        tcp = dpkt.tcp.TCP(sport=sport, dport=dport, seq=seq & 0xFFFFFFFF, ack=ack & 0xFFFFFFFF,
                           flags=flags, win=65535, data=payload)
        tcp.off = 5
        if ":" in src:
            ip: Any = dpkt.ip6.IP6(src=socket.inet_pton(socket.AF_INET6, src),
                                   dst=socket.inet_pton(socket.AF_INET6, dst), nxt=dpkt.ip.IP_PROTO_TCP,
                                   hlim=64, data=tcp, plen=len(tcp))
            ip.extension_hdrs = {}
            eth_type = dpkt.ethernet.ETH_TYPE_IP6
        else:
            ip = dpkt.ip.IP(src=socket.inet_aton(src), dst=socket.inet_aton(dst), p=dpkt.ip.IP_PROTO_TCP,
                            ttl=64, data=tcp)
            ip.len = len(ip)
            eth_type = dpkt.ethernet.ETH_TYPE_IP
        eth = dpkt.ethernet.Ethernet(src=b"\x02\x00\x00\x00\x00\x01", dst=b"\x02\x00\x00\x00\x00\x02",
                                     type=eth_type, data=ip)
        writer.writepkt(bytes(eth), ts=ts)
        count += 1

    def isn_of(flow: tuple[str, int, str, int]) -> int:
        if flow not in isn:
            isn[flow] = zlib.crc32(repr(flow).encode()) & 0xFFFFFFFF
        return isn[flow]

    for seg in segments:
        ts, src, sport, dst, dport, payload = seg[:6]
        rel = seg[6] if len(seg) > 6 else None
        fwd, rev = (src, sport, dst, dport), (dst, dport, src, sport)
        if fwd not in next_seq and rev not in next_seq:
            next_seq[fwd] = next_seq[rev] = 0
            if handshake:
                emit(ts - 0.0002, src, sport, dst, dport, isn_of(fwd), 0, dpkt.tcp.TH_SYN, b"")
                emit(ts - 0.0001, dst, dport, src, sport, isn_of(rev), isn_of(fwd) + 1,
                     dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK, b"")
        start = next_seq[fwd] if rel is None else int(rel)
        payload = bytes(payload)
        chunks = [payload[i : i + MSS] for i in range(0, len(payload), MSS)] or [b""]
        offset = start
        for chunk in chunks:
            emit(ts, src, sport, dst, dport, isn_of(fwd) + 1 + offset, isn_of(rev) + 1 + next_seq[rev],
                 dpkt.tcp.TH_ACK | (dpkt.tcp.TH_PUSH if chunk else 0), chunk)
            offset += len(chunk)
        next_seq[fwd] = max(next_seq[fwd], offset)
    return count
