"""One name per broker: the node id of the broker that served a captured MetadataResponse.

Captures spell the serving broker three ways: a node id (``"3"``, JSONL), the advertised ``host:port``
(``broker-3.kafka.internal:9092``, JSONL) and the TCP peer ``ip:port`` (``10.0.0.13:9092``, pcap;
``[v6]:port`` for IPv6). Rules M1/M2 name that broker and M2's rates are per broker, so the three spellings
would split one broker into three. :func:`canonical_broker` resolves, in this order:

a. a node id (an int, or a string of ASCII digits, 0..2^31-1) -> its decimal string (``"03"`` -> ``"3"``);
b. a ``host:port`` equal to exactly one entry (host, port) of *that same response's* broker list -> that
   entry's node id. Hosts compare case-insensitively and IP literals in canonical form (Java prints
   ``0:0:0:0:0:0:0:1``, pcap ``[::1]``), so a cluster that advertises IP addresses resolves its pcap peers
   here. An address listed under two node ids, or only with another port, does not resolve;
c. the operator's mapping (``[inputs] broker_addresses``): ``address -> node id``, where an address
   with a port matches that port only and one without (``10.0.0.13``) any port. A port-specific key wins
   over a host-only one;
d. otherwise the value unchanged (as text; None stays None).

The response's own list comes before the mapping: it is what the cluster said at that moment, while the
mapping is static configuration that can lag behind a re-addressed broker.

Pure Python (no Spark): :func:`canonical_broker` is the per-response reference,
:func:`canonical_brokers_arrow` the batch form the ingestion calls once per captured response.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

import pyarrow as pa

from . import protocol
from .errors import DecodeError

__all__ = [
    "NODE_ID_MAX",
    "address_key",
    "canonical_broker",
    "canonical_brokers_arrow",
    "node_id_text",
    "normalize_addresses",
    "parse_address",
]

#: Node ids are non-negative int32 (-1 means "no broker" on the wire).
NODE_ID_MAX = (1 << 31) - 1

_DIGITS = re.compile(r"[0-9]+")
_HOST = re.compile(r"[^\s\[\]/@]+")
_PORT_MAX = 65535


def node_id_text(value: Any) -> str | None:
    """The decimal string of ``value`` when it is a node id (int or ASCII-digit string, 0..2^31-1), else None."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return str(value) if 0 <= value <= NODE_ID_MAX else None
    if isinstance(value, str) and _DIGITS.fullmatch(value):
        n = int(value)
        return str(n) if n <= NODE_ID_MAX else None
    return None


@lru_cache(maxsize=4096)
def _host_key(host: str) -> str:
    """A host as compared: lower case, IP literals canonical (IPv4-mapped IPv6 as IPv4), IPv6 bracketed."""
    h = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    try:
        ip = ipaddress.ip_address(h)
    except ValueError:
        return h.lower()
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return f"[{ip}]"
    return str(ip)


@lru_cache(maxsize=4096)
def parse_address(text: str) -> tuple[str, int | None]:
    """Split an address into ``(host key, port or None)``: ``host``, ``host:port``, ``[v6]``, ``[v6]:port``
    or a bare IPv6 literal. The host key is lower case with IP literals canonical and IPv6 bracketed.

    Raises:
        ValueError: not an address (empty, spaces, a bad port, an unbalanced bracket …); the message says why.
    """
    if not isinstance(text, str):
        raise ValueError(f"not a string: {text!r}")
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            raise ValueError(f"{text!r}: '[' without ']'")
        host, rest = text[: end + 1], text[end + 1:]
        try:
            ipaddress.IPv6Address(host[1:-1])
        except ValueError:
            raise ValueError(f"{text!r}: {host} is not an IPv6 address") from None
        if rest and not rest.startswith(":"):
            raise ValueError(f"{text!r}: expected ':port' after ']'")
        port_text = rest[1:] if rest else None
    elif text.count(":") > 1:  # a bare IPv6 literal (no port: write [v6]:port for one)
        try:
            ipaddress.IPv6Address(text)
        except ValueError:
            raise ValueError(f"{text!r}: more than one ':' but not an IPv6 address (use [v6]:port)") from None
        host, port_text = text, None
    else:
        host, sep, port_text_ = text.partition(":")
        port_text = port_text_ if sep else None
        if not _HOST.fullmatch(host):
            raise ValueError(f"{text!r}: {'empty host' if not host else 'bad characters in the host'}")
    port = None
    if port_text is not None:
        if not _DIGITS.fullmatch(port_text) or not 1 <= int(port_text) <= _PORT_MAX:
            raise ValueError(f"{text!r}: port {port_text!r} is not a TCP port (1-65535)")
        port = int(port_text)
    return _host_key(host), port


def address_key(host: str, port: int | None) -> str:
    """The canonical text of an address (``host`` or ``host:port``; ``host`` as :func:`parse_address` gives)."""
    return host if port is None else f"{host}:{port}"


def normalize_addresses(mapping: Mapping[str, Any]) -> dict[str, int]:
    """Validate an operator's ``address -> node id`` mapping; keys become canonical (:func:`address_key`).

    Idempotent (a normalized mapping normalizes to itself), so callers may pass either form on.

    Raises:
        ValueError: a key is not an address or is a node id, a value is not a node id (an integer
            0..2^31-1), or two spellings of one address name different node ids. The message names the key.
    """
    out: dict[str, int] = {}
    spelled: dict[str, str] = {}
    for key, value in mapping.items():
        if isinstance(key, str) and _DIGITS.fullmatch(key):
            raise ValueError(f"{key!r} is a node id, not an address (write host, host:port or [ipv6]:port)")
        try:
            canon = address_key(*parse_address(key))
        except ValueError as e:
            raise ValueError(f"{key!r} is not an address (host, host:port or [ipv6]:port): {e}") from None
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= NODE_ID_MAX:
            kind = {bool: "boolean", str: "string", float: "float"}.get(type(value), type(value).__name__)
            raise ValueError(f"{key!r}: the node id must be an integer 0..{NODE_ID_MAX}, got {kind} {value!r}")
        if canon in out and out[canon] != value:
            raise ValueError(f"{spelled[canon]!r} and {key!r} are the same address ({canon}) with different "
                             f"node ids ({out[canon]} and {value})")
        out[canon] = value
        spelled.setdefault(canon, key)
    return out


def _listed(host: str, port: int, brokers: Iterable[tuple[int, str, int]]) -> int | None:
    """The one node id the list gives for (host key, port); None when absent or listed under two ids."""
    found: int | None = None
    for node_id, b_host, b_port in brokers:
        if b_port == port and isinstance(b_host, str) and _host_key(b_host) == host:
            if found is not None and found != node_id:
                return None
            found = node_id
    return found


def _resolve(raw: Any, brokers: Sequence[tuple[int, str, int]] | None, addresses: Mapping[str, int]) -> str | None:
    """:func:`canonical_broker` over a normalized mapping; ``brokers`` None = not needed or unavailable."""
    if raw is None:
        return None
    nid = node_id_text(raw)
    if nid is not None:
        return nid
    text = str(raw)
    try:
        host, port = parse_address(text)
    except ValueError:
        return text
    if port is not None and brokers:
        listed = _listed(host, port, brokers)
        if listed is not None and 0 <= listed <= NODE_ID_MAX:
            return str(listed)
    if addresses:
        if port is not None and address_key(host, port) in addresses:
            return str(addresses[address_key(host, port)])
        if host in addresses:
            return str(addresses[host])
    return text


def canonical_broker(
    raw: Any,
    brokers: Iterable[tuple[int, str, int]] = (),
    addresses: Mapping[str, int] | None = None,
) -> str | None:
    """The canonical name of the broker that served a response (see the module docstring).

    Args:
        raw: the captured spelling: a node id (int or digit string), ``host:port``, ``ip:port``,
            ``[v6]:port``; anything else is returned as text. None stays None.
        brokers: that response's broker list as ``(node_id, host, port)``
            (:func:`epochlib.protocol.metadata_response_brokers`).
        addresses: the operator's ``address -> node id`` mapping (raw or :func:`normalize_addresses` form).

    Raises:
        ValueError: ``addresses`` is invalid (as :func:`normalize_addresses`).
    """
    return _resolve(raw, list(brokers), normalize_addresses(addresses or {}))


def canonical_brokers_arrow(
    raw: pa.Array,
    responses: pa.Array,
    api_versions: pa.Array,
    addresses: Mapping[str, int] | None = None,
) -> pa.StringArray:
    """Batch form of :func:`canonical_broker`: one canonical name per captured response.

    Args:
        raw: ``string`` captured broker spelling of each response.
        responses: ``binary`` MetadataResponses (header + body, no size prefix); only the broker-list
            prefix is decoded, and only for a value that is not a node id. An undecodable or null response
            resolves as if its list were empty.
        api_versions: ``int16`` API version of each response's request.
        addresses: the operator's mapping (validated once here).

    Raises:
        ValueError: the arrays differ in length, or ``addresses`` is invalid.
    """
    arrays = []
    for a in (raw, responses, api_versions):
        arrays.append(a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a)
    raw, responses, api_versions = arrays
    if not len(raw) == len(responses) == len(api_versions):
        raise ValueError(f"{len(raw)} brokers, {len(responses)} responses, {len(api_versions)} versions")
    book = normalize_addresses(addresses or {})
    memo: dict[Any, str | None] = {}
    lists: protocol.BrokerListCache = {}
    out: list[str | None] = []
    raws = raw.to_pylist()
    vers = api_versions.to_pylist()
    for i, value in enumerate(raws):
        if value is None or node_id_text(value) is not None:
            out.append(_resolve(value, None, book))
            continue
        try:
            host, port = parse_address(str(value))
        except ValueError:
            out.append(str(value))
            continue
        brokers: tuple[tuple[int, str, int], ...] = ()
        buf, ver = responses[i].as_py(), vers[i]
        if port is not None and buf is not None and ver is not None:
            try:
                brokers = tuple(protocol.metadata_response_brokers(buf, ver, lists))
            except DecodeError:
                brokers = ()
        key = (value, brokers)
        if key not in memo:
            memo[key] = _resolve(value, brokers, book)
        out.append(memo[key])
    return pa.array(out, pa.string())
