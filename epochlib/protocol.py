"""Kafka wire protocol: size framing, request/response headers, Metadata v0–13 (spec §5, §6).

Wire layout (spec §5.1)::

    frame            = INT32 size || header || body        (size excludes itself)
    request header   v0: api_key INT16, api_version INT16, correlation_id INT32
                     v1: v0 + client_id NULLABLE_STRING (INT16 length, -1 = null)
                     v2: v1 + TAGGED_FIELDS (client_id stays non-compact)
    response header  v0: correlation_id INT32
                     v1: v0 + TAGGED_FIELDS

Header version selection: request v2 when the API version is flexible, else v1
(ControlledShutdown v0 uses v0); response v1 when flexible, else v0 — except
ApiVersionsResponse, which always uses response header v0 so any client can read it.

Contract: every public decoder takes ``bytes | bytearray | memoryview`` plus a position and
returns a value or raises :class:`~epochlib.errors.DecodeError` with the absolute byte
position; any other exception escaping is a bug (the fuzz tests enforce it).
"""

from __future__ import annotations

import struct
from typing import Any

import numpy as np
import pyarrow as pa

from . import _wire as w
from ._schema import F, M, MessageSpec, _decode_field, decode, encode
from ._wire import Buffer
from .errors import DecodeError

__all__ = [
    "API_KEYS",
    "ERROR_NAMES",
    "FLEXIBLE_FROM",
    "METADATA_ARROW_SCHEMA",
    "METADATA_REQUEST",
    "METADATA_RESPONSE",
    "decode_metadata_request",
    "decode_metadata_response",
    "encode_metadata_request",
    "encode_metadata_response",
    "metadata_observations",
    "metadata_observations_arrow",
    "metadata_response_brokers",
    "BrokerListCache",
    "decode_request_header",
    "decode_response_header",
    "encode_request_header",
    "encode_response_header",
    "error_name",
    "frame",
    "is_flexible",
    "request_header_version",
    "response_header_version",
    "split_frames",
]

# ------------------------------------------------------------------ API keys

#: API key -> name (spec §5.2 and the keys a capture commonly shows).
API_KEYS: dict[int, str] = {
    0: "Produce", 1: "Fetch", 2: "ListOffsets", 3: "Metadata", 4: "LeaderAndIsr",
    5: "StopReplica", 6: "UpdateMetadata", 7: "ControlledShutdown", 8: "OffsetCommit",
    9: "OffsetFetch", 10: "FindCoordinator", 11: "JoinGroup", 12: "Heartbeat", 13: "LeaveGroup",
    14: "SyncGroup", 15: "DescribeGroups", 16: "ListGroups", 17: "SaslHandshake",
    18: "ApiVersions", 19: "CreateTopics", 20: "DeleteTopics", 21: "DeleteRecords",
    22: "InitProducerId", 23: "OffsetForLeaderEpoch", 24: "AddPartitionsToTxn",
    25: "AddOffsetsToTxn", 26: "EndTxn", 27: "WriteTxnMarkers", 28: "TxnOffsetCommit",
    29: "DescribeAcls", 30: "CreateAcls", 31: "DeleteAcls", 32: "DescribeConfigs",
    33: "AlterConfigs", 34: "AlterReplicaLogDirs", 35: "DescribeLogDirs", 36: "SaslAuthenticate",
    37: "CreatePartitions", 38: "CreateDelegationToken", 39: "RenewDelegationToken",
    40: "ExpireDelegationToken", 41: "DescribeDelegationToken", 42: "DeleteGroups", 43: "ElectLeaders", 44: "IncrementalAlterConfigs",
    45: "AlterPartitionReassignments", 46: "ListPartitionReassignments", 47: "OffsetDelete",
    48: "DescribeClientQuotas", 49: "AlterClientQuotas", 50: "DescribeUserScramCredentials",
    51: "AlterUserScramCredentials", 52: "Vote", 53: "BeginQuorumEpoch", 54: "EndQuorumEpoch",
    55: "DescribeQuorum", 56: "AlterPartition", 57: "UpdateFeatures", 58: "Envelope", 59: "FetchSnapshot",
    60: "DescribeCluster", 61: "DescribeProducers", 62: "BrokerRegistration", 63: "BrokerHeartbeat",
    64: "UnregisterBroker", 65: "DescribeTransactions", 66: "ListTransactions", 67: "AllocateProducerIds",
    68: "ConsumerGroupHeartbeat", 69: "ConsumerGroupDescribe", 70: "ControllerRegistration",
    71: "GetTelemetrySubscriptions", 72: "PushTelemetry", 73: "AssignReplicasToDirs",
    74: "ListConfigResources", 75: "DescribeTopicPartitions", 76: "ShareGroupHeartbeat",
    77: "ShareGroupDescribe", 78: "ShareFetch", 79: "ShareAcknowledge", 80: "AddRaftVoter",
    81: "RemoveRaftVoter", 82: "UpdateRaftVoter", 83: "InitializeShareGroupState",
    84: "ReadShareGroupState", 85: "WriteShareGroupState", 86: "DeleteShareGroupState",
    87: "ReadShareGroupStateSummary",
}

#: API key -> first flexible API version (None = never flexible). From the request schemas'
#: ``flexibleVersions`` (kafka-python 3.0.12's vendored copy, ≈ Kafka 4.1; a test re-reads it).
#: Keys 4–7 are broker-internal (pre-KRaft) and not in that copy: LeaderAndIsr 4+,
#: StopReplica 2+, UpdateMetadata 6+, ControlledShutdown 3+; nor are the delegation-token, KRaft,
#: telemetry, KIP-848 and share-group keys (38–41, 52–87), read from Kafka's own schemas.
FLEXIBLE_FROM: dict[int, int | None] = {
    0: 9, 1: 12, 2: 6, 3: 9, 4: 4, 5: 2, 6: 6, 7: 3, 8: 8, 9: 6, 10: 3, 11: 6, 12: 4,
    13: 4, 14: 4, 15: 5, 16: 3, 17: None, 18: 3, 19: 5, 20: 4, 21: 2, 22: 2, 23: 4,
    24: 3, 25: 3, 26: 3, 27: 1, 28: 3, 29: 2, 30: 2, 31: 2, 32: 4, 33: 2, 34: 2, 35: 2,
    36: 2, 37: 2, 42: 2, 43: 2, 44: 1, 45: 0, 46: 0, 47: None, 48: 1, 49: 1, 50: 0,
    51: 0, 55: 0, 57: 0, 60: 0, 61: 0, 65: 0, 66: 0, 74: 0, 75: 0,
    38: 2, 39: 2, 40: 2, 41: 2, 52: 0, 53: 1, 54: 1, 56: 0, 58: 0, 59: 0, 62: 0, 63: 0, 64: 0,
    **dict.fromkeys(range(67, 74), 0), **dict.fromkeys(range(76, 88), 0),
}

_API_VERSIONS = 18
_CONTROLLED_SHUTDOWN = 7


def is_flexible(api_key: int, api_version: int) -> bool:
    """Whether ``api_version`` of ``api_key`` uses the flexible (compact + tagged) encoding.

    Unknown API keys are treated as non-flexible (the header then has no tag section).
    """
    first = FLEXIBLE_FROM.get(api_key)
    return first is not None and api_version >= first


def request_header_version(api_key: int, api_version: int) -> int:
    """Request header version for an API call (spec §5.1)."""
    if api_key == _CONTROLLED_SHUTDOWN and api_version == 0:
        return 0
    return 2 if is_flexible(api_key, api_version) else 1


def response_header_version(api_key: int, api_version: int) -> int:
    """Response header version for an API call; ApiVersionsResponse always uses v0."""
    if api_key == _API_VERSIONS:
        return 0
    return 1 if is_flexible(api_key, api_version) else 0


# ------------------------------------------------------------------ headers


def decode_request_header(buf: Buffer, pos: int = 0) -> tuple[dict[str, Any], int]:
    """Decode a request header starting at ``pos`` (after the size prefix).

    The header version is chosen from the API key and version read first (spec §5.1).

    Returns:
        ``({"api_key", "api_version", "correlation_id", "client_id", "header_version",
        "tagged_fields"}, pos_after_header)``; ``client_id`` is None for header v0 or a
        null client id, ``tagged_fields`` is ``{tag: raw bytes}`` (empty below v2).

    Raises:
        DecodeError: truncated or malformed header, with the absolute byte position.
    """
    try:
        api_key, pos = w.read_int16(buf, pos)
        api_version, pos = w.read_int16(buf, pos)
        correlation_id, pos = w.read_int32(buf, pos)
        hv = request_header_version(api_key, api_version)
        client_id = None
        tagged: dict[int, bytes] = {}
        if hv >= 1:
            client_id, pos = w.read_nullable_string(buf, pos)
        if hv >= 2:
            tagged, pos = w.read_tagged_fields(buf, pos)
    except DecodeError:
        raise
    except Exception as e:  # noqa: BLE001 - contract: only DecodeError escapes
        raise DecodeError(f"malformed request header ({type(e).__name__}: {e})", pos) from None
    return {
        "api_key": api_key,
        "api_version": api_version,
        "correlation_id": correlation_id,
        "client_id": client_id,
        "header_version": hv,
        "tagged_fields": tagged,
    }, pos


def decode_response_header(
    buf: Buffer, api_key: int, api_version: int, pos: int = 0
) -> tuple[dict[str, Any], int]:
    """Decode a response header; the version comes from the request's API key and version.

    Returns ``({"correlation_id", "header_version", "tagged_fields"}, pos_after_header)``.
    """
    try:
        hv = response_header_version(api_key, api_version)
        correlation_id, pos = w.read_int32(buf, pos)
        tagged: dict[int, bytes] = {}
        if hv >= 1:
            tagged, pos = w.read_tagged_fields(buf, pos)
    except DecodeError:
        raise
    except Exception as e:  # noqa: BLE001
        raise DecodeError(f"malformed response header ({type(e).__name__}: {e})", pos) from None
    return {"correlation_id": correlation_id, "header_version": hv, "tagged_fields": tagged}, pos


def encode_request_header(
    api_key: int, api_version: int, correlation_id: int, client_id: str | None = None,
    tagged_fields: dict[int, bytes] | None = None,
) -> bytes:
    """Encode a request header in the version the API call requires."""
    hv = request_header_version(api_key, api_version)
    out = w.write_int16(api_key) + w.write_int16(api_version) + w.write_int32(correlation_id)
    if hv >= 1:
        out += w.write_nullable_string(client_id)
    if hv >= 2:
        out += w.write_tagged_fields(tagged_fields)
    return out


def encode_response_header(
    api_key: int, api_version: int, correlation_id: int, tagged_fields: dict[int, bytes] | None = None
) -> bytes:
    """Encode a response header in the version the API call requires."""
    out = w.write_int32(correlation_id)
    if response_header_version(api_key, api_version) >= 1:
        out += w.write_tagged_fields(tagged_fields)
    return out


# ------------------------------------------------------------------ framing


def frame(payload: bytes) -> bytes:
    """Prefix ``payload`` (header + body) with its INT32 size."""
    return w.write_int32(len(payload)) + bytes(payload)


def split_frames(buf: Buffer, pos: int = 0) -> list[bytes]:
    """Split a byte stream of size-prefixed frames into their payloads (header + body).

    Raises:
        DecodeError: a negative size or a frame that runs past the end (at its size field).
    """
    out: list[bytes] = []
    n = len(buf)
    while pos < n:
        start = pos
        size, pos = w.read_int32(buf, pos)
        if size < 0:
            raise DecodeError(f"negative frame size {size}", start)
        if pos + size > n:
            raise DecodeError(f"frame of {size} bytes runs past the end ({n - pos} left)", start)
        out.append(bytes(buf[pos : pos + size]))
        pos += size
    return out


# ------------------------------------------------------------------ error codes (§6)

_ERRORS = """
-1 UNKNOWN_SERVER_ERROR; 0 NONE; 1 OFFSET_OUT_OF_RANGE; 2 CORRUPT_MESSAGE;
3 UNKNOWN_TOPIC_OR_PARTITION; 4 INVALID_FETCH_SIZE; 5 LEADER_NOT_AVAILABLE; 6 NOT_LEADER_OR_FOLLOWER;
7 REQUEST_TIMED_OUT; 8 BROKER_NOT_AVAILABLE; 9 REPLICA_NOT_AVAILABLE; 10 MESSAGE_TOO_LARGE;
11 STALE_CONTROLLER_EPOCH; 12 OFFSET_METADATA_TOO_LARGE; 13 NETWORK_EXCEPTION; 14 COORDINATOR_LOAD_IN_PROGRESS;
15 COORDINATOR_NOT_AVAILABLE; 16 NOT_COORDINATOR; 17 INVALID_TOPIC_EXCEPTION; 18 RECORD_LIST_TOO_LARGE;
19 NOT_ENOUGH_REPLICAS; 20 NOT_ENOUGH_REPLICAS_AFTER_APPEND; 21 INVALID_REQUIRED_ACKS; 22 ILLEGAL_GENERATION;
23 INCONSISTENT_GROUP_PROTOCOL; 24 INVALID_GROUP_ID; 25 UNKNOWN_MEMBER_ID; 26 INVALID_SESSION_TIMEOUT;
27 REBALANCE_IN_PROGRESS; 28 INVALID_COMMIT_OFFSET_SIZE; 29 TOPIC_AUTHORIZATION_FAILED; 30 GROUP_AUTHORIZATION_FAILED;
31 CLUSTER_AUTHORIZATION_FAILED; 32 INVALID_TIMESTAMP; 33 UNSUPPORTED_SASL_MECHANISM; 34 ILLEGAL_SASL_STATE;
35 UNSUPPORTED_VERSION; 36 TOPIC_ALREADY_EXISTS; 37 INVALID_PARTITIONS; 38 INVALID_REPLICATION_FACTOR;
39 INVALID_REPLICA_ASSIGNMENT; 40 INVALID_CONFIG; 41 NOT_CONTROLLER; 42 INVALID_REQUEST; 43 UNSUPPORTED_FOR_MESSAGE_FORMAT;
44 POLICY_VIOLATION; 45 OUT_OF_ORDER_SEQUENCE_NUMBER; 46 DUPLICATE_SEQUENCE_NUMBER; 47 INVALID_PRODUCER_EPOCH;
48 INVALID_TXN_STATE; 49 INVALID_PRODUCER_ID_MAPPING; 50 INVALID_TRANSACTION_TIMEOUT; 51 CONCURRENT_TRANSACTIONS;
52 TRANSACTION_COORDINATOR_FENCED; 53 TRANSACTIONAL_ID_AUTHORIZATION_FAILED; 54 SECURITY_DISABLED; 55 OPERATION_NOT_ATTEMPTED;
56 KAFKA_STORAGE_ERROR; 57 LOG_DIR_NOT_FOUND; 58 SASL_AUTHENTICATION_FAILED; 59 UNKNOWN_PRODUCER_ID;
60 REASSIGNMENT_IN_PROGRESS; 61 DELEGATION_TOKEN_AUTH_DISABLED; 62 DELEGATION_TOKEN_NOT_FOUND; 63 DELEGATION_TOKEN_OWNER_MISMATCH;
64 DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; 65 DELEGATION_TOKEN_AUTHORIZATION_FAILED; 66 DELEGATION_TOKEN_EXPIRED;
67 INVALID_PRINCIPAL_TYPE; 68 NON_EMPTY_GROUP; 69 GROUP_ID_NOT_FOUND; 70 FETCH_SESSION_ID_NOT_FOUND;
71 INVALID_FETCH_SESSION_EPOCH; 72 LISTENER_NOT_FOUND; 73 TOPIC_DELETION_DISABLED; 74 FENCED_LEADER_EPOCH;
75 UNKNOWN_LEADER_EPOCH; 76 UNSUPPORTED_COMPRESSION_TYPE; 77 STALE_BROKER_EPOCH; 78 OFFSET_NOT_AVAILABLE;
79 MEMBER_ID_REQUIRED; 80 PREFERRED_LEADER_NOT_AVAILABLE; 81 GROUP_MAX_SIZE_REACHED; 82 FENCED_INSTANCE_ID;
83 ELIGIBLE_LEADERS_NOT_AVAILABLE; 84 ELECTION_NOT_NEEDED; 85 NO_REASSIGNMENT_IN_PROGRESS; 86 GROUP_SUBSCRIBED_TO_TOPIC;
87 INVALID_RECORD; 88 UNSTABLE_OFFSET_COMMIT; 89 THROTTLING_QUOTA_EXCEEDED; 90 PRODUCER_FENCED;
91 RESOURCE_NOT_FOUND; 92 DUPLICATE_RESOURCE; 93 UNACCEPTABLE_CREDENTIAL; 94 INCONSISTENT_VOTER_SET;
95 INVALID_UPDATE_VERSION; 96 FEATURE_UPDATE_FAILED; 97 PRINCIPAL_DESERIALIZATION_FAILURE; 98 SNAPSHOT_NOT_FOUND;
99 POSITION_OUT_OF_RANGE; 100 UNKNOWN_TOPIC_ID; 101 DUPLICATE_BROKER_REGISTRATION; 102 BROKER_ID_NOT_REGISTERED;
103 INCONSISTENT_TOPIC_ID; 104 INCONSISTENT_CLUSTER_ID; 105 TRANSACTIONAL_ID_NOT_FOUND; 106 FETCH_SESSION_TOPIC_ID_ERROR;
107 INELIGIBLE_REPLICA; 108 NEW_LEADER_ELECTED; 109 OFFSET_MOVED_TO_TIERED_STORAGE; 110 FENCED_MEMBER_EPOCH;
111 UNRELEASED_INSTANCE_ID; 112 UNSUPPORTED_ASSIGNOR; 113 STALE_MEMBER_EPOCH; 114 MISMATCHED_ENDPOINT_TYPE;
115 UNSUPPORTED_ENDPOINT_TYPE; 116 UNKNOWN_CONTROLLER_ID; 117 UNKNOWN_SUBSCRIPTION_ID; 118 TELEMETRY_TOO_LARGE;
119 INVALID_REGISTRATION; 120 TRANSACTION_ABORTABLE; 121 INVALID_RECORD_STATE; 122 SHARE_SESSION_NOT_FOUND;
123 INVALID_SHARE_SESSION_EPOCH; 124 FENCED_STATE_EPOCH; 125 INVALID_VOTER_KEY; 126 DUPLICATE_VOTER;
127 VOTER_NOT_FOUND; 128 INVALID_REGULAR_EXPRESSION; 129 REBOOTSTRAP_REQUIRED; 130 STREAMS_INVALID_TOPOLOGY;
131 STREAMS_INVALID_TOPOLOGY_EPOCH; 132 STREAMS_TOPOLOGY_FENCED; 133 SHARE_SESSION_LIMIT_REACHED
"""

#: Error code -> Kafka's name (spec §6, Errors.java; 133 from a 2025 trunk).
ERROR_NAMES: dict[int, str] = {
    int(code): name
    for code, name in (item.split() for item in _ERRORS.replace("\n", " ").split(";"))
}


def error_name(code: int) -> str:
    """Kafka's name for an error code; unknown codes come back as ``"UNKNOWN_ERROR_<code>"``."""
    return ERROR_NAMES.get(code, f"UNKNOWN_ERROR_{code}")


# ------------------------------------------------------------------ Metadata (API key 3)

METADATA = 3
INT32_MIN = -(1 << 31)

# MetadataRequest (spec §5.3). v1: null topics = all topics (v0: empty = all); v4
# AllowAutoTopicCreation; v8 the authorized-operations flags; v9 flexible; v10 TopicId before
# Name and Name nullable; v11 dropped IncludeClusterAuthorizedOperations; v12 lookups by id.
METADATA_REQUEST = M(
    "MetadataRequest", "0-13", "9+",
    F("Topics", "[]struct", nullable="1+", fields=(
        F("TopicId", "uuid", "10+"),
        F("Name", "string", nullable="10+"),
    )),
    F("AllowAutoTopicCreation", "bool", "4+", default=True),
    F("IncludeClusterAuthorizedOperations", "bool", "8-10"),
    F("IncludeTopicAuthorizedOperations", "bool", "8+"),
)

# MetadataResponse (spec §5.4). v1 rack, controller, is_internal; v2 cluster_id; v3
# throttle_time_ms; v4 = v3; v5 offline_replicas; v6 throttling change only; v7 leader_epoch
# (KIP-320); v8 authorized operations; v9 flexible; v10 topic_id; v11 dropped cluster
# authorized operations; v12 topic name nullable; v13 top-level error code (KIP-1102).
METADATA_RESPONSE = M(
    "MetadataResponse", "0-13", "9+",
    F("ThrottleTimeMs", "int32", "3+"),
    F("Brokers", "[]struct", fields=(
        F("NodeId", "int32"),
        F("Host", "string"),
        F("Port", "int32"),
        F("Rack", "string", "1+", nullable="1+", default=None),
    )),
    F("ClusterId", "string", "2+", nullable="2+", default=None),
    F("ControllerId", "int32", "1+", default=-1),
    F("Topics", "[]struct", fields=(
        F("ErrorCode", "int16"),
        F("Name", "string", nullable="12+"),
        F("TopicId", "uuid", "10+"),
        F("IsInternal", "bool", "1+", default=False),
        F("Partitions", "[]struct", fields=(
            F("ErrorCode", "int16"),
            F("PartitionIndex", "int32"),
            F("LeaderId", "int32"),
            F("LeaderEpoch", "int32", "7+", default=-1),
            F("ReplicaNodes", "[]int32"),
            F("IsrNodes", "[]int32"),
            F("OfflineReplicas", "[]int32", "5+"),
        )),
        F("TopicAuthorizedOperations", "int32", "8+", default=INT32_MIN),
    )),
    F("ClusterAuthorizedOperations", "int32", "8-10", default=INT32_MIN),
    F("ErrorCode", "int16", "13+"),
)


def _decode_body(spec: MessageSpec, version: int, buf: Buffer, pos: int) -> dict[str, Any]:
    """Decode a request/response body; bytes after it are counted, not refused.

    Java's ``NetworkClient`` and librdkafka parse a body and ignore what follows it (librdkafka's
    mock cluster sends a flexible MetadataResponse with one extra byte), so the client acted on
    that body: it is decoded, and the excess is returned as ``"trailing_bytes"`` (present only
    when there are some, like ``"_unknown_tags"``). A short or malformed body still raises.
    """
    body, end = decode(spec, version, buf, pos)
    if end != len(buf):
        body["trailing_bytes"] = len(buf) - end
    return body


def decode_metadata_response(buf: Buffer, api_version: int, *, with_header: bool = True) -> dict[str, Any]:
    """Decode a MetadataResponse (no size prefix) at ``api_version``.

    Returns the body dict (snake_case keys as in spec §5.4; absent fields hold their
    defaults), plus ``correlation_id`` when ``with_header``, plus ``trailing_bytes`` (the count
    of bytes after the complete body) when the buffer holds more than the body, as clients
    ignore them.

    Raises:
        DecodeError: truncated, malformed or unsupported version.
    """
    pos = 0
    header: dict[str, Any] = {}
    if with_header:
        hdr, pos = decode_response_header(buf, METADATA, api_version)
        header = {"correlation_id": hdr["correlation_id"]}
    return {**header, **_decode_body(METADATA_RESPONSE, api_version, buf, pos)}


#: Broker-list memo of :func:`metadata_response_brokers`: (api_version, byte length) -> {list bytes: list}.
BrokerListCache = dict[tuple[int, int], dict[bytes, list[tuple[int, str, int]]]]
_BROKER_CACHE_MAX = 256


def metadata_response_brokers(
    buf: Buffer, api_version: int, cache: BrokerListCache | None = None
) -> list[tuple[int, str, int]]:
    """The broker list ``(node_id, host, port)`` of a MetadataResponse (header + body, no size prefix).

    The list precedes the topics in every version, so only the header and that prefix are decoded: naming
    the broker that served a response (:mod:`epochlib.brokers`) costs a fraction of a full decode. The
    rest of the buffer is not checked (:func:`decode_metadata_response` does that).

    ``cache``: a dict the caller keeps across calls. A response whose list bytes equal an earlier one's (a
    cluster's membership rarely changes) reuses that decode instead of interpreting the list again; equal
    bytes at the same version decode to the same list, so the result is the same either way.

    Raises:
        DecodeError: truncated or malformed prefix, or an unsupported version.
    """
    _hdr, pos = decode_response_header(buf, METADATA, api_version)
    spec = METADATA_RESPONSE
    if api_version not in spec.valid_versions:
        raise DecodeError(f"{spec.name} version {api_version} not in {spec.valid_versions}", pos)
    flexible = api_version in spec.flexible_versions
    brokers: list[dict[str, Any]] = []
    try:
        for f in spec.fields:  # ThrottleTimeMs (v3+), then Brokers; neither is tagged
            if f.key == "brokers":
                if cache:
                    for (ver, size), known in cache.items():
                        hit = known.get(bytes(buf[pos:pos + size])) if ver == api_version else None
                        if hit is not None:
                            return list(hit)
                start = pos
                brokers, pos = _decode_field(f, api_version, flexible, buf, pos)
                break
            if api_version in f.versions:
                _value, pos = _decode_field(f, api_version, flexible, buf, pos)
    except DecodeError:
        raise
    except Exception as e:  # noqa: BLE001 - contract: only DecodeError escapes
        raise DecodeError(f"{spec.name} brokers: {type(e).__name__}: {e}", pos) from None
    out = [(b["node_id"], b["host"], b["port"]) for b in brokers]
    if cache is not None:
        if sum(len(v) for v in cache.values()) >= _BROKER_CACHE_MAX:
            cache.clear()
        cache.setdefault((api_version, pos - start), {})[bytes(buf[start:pos])] = out
        return list(out)
    return out


def encode_metadata_response(body: dict[str, Any], api_version: int, correlation_id: int) -> bytes:
    """Response header + MetadataResponse body at ``api_version`` (no size prefix)."""
    return encode_response_header(METADATA, api_version, correlation_id) + encode(
        METADATA_RESPONSE, api_version, body)


def decode_metadata_request(
    buf: Buffer, api_version: int | None = None, *, with_header: bool = True
) -> dict[str, Any]:
    """Decode a MetadataRequest (no size prefix).

    With the header, the version comes from it (``api_version`` if given must agree) and the
    result carries ``api_version``, ``correlation_id`` and ``client_id``. Bytes after the body
    are counted in ``trailing_bytes``, as for responses.
    """
    pos = 0
    header: dict[str, Any] = {}
    if with_header:
        hdr, pos = decode_request_header(buf, 0)
        if hdr["api_key"] != METADATA:
            raise DecodeError(f"api_key {hdr['api_key']} is not Metadata (3)", 0)
        if api_version is not None and api_version != hdr["api_version"]:
            raise DecodeError(f"header says v{hdr['api_version']}, caller says v{api_version}", 2)
        api_version = hdr["api_version"]
        header = {k: hdr[k] for k in ("api_version", "correlation_id", "client_id")}
    elif api_version is None:
        raise ValueError("api_version is required without a header")
    return {**header, **_decode_body(METADATA_REQUEST, api_version, buf, pos)}


def encode_metadata_request(
    body: dict[str, Any], api_version: int, correlation_id: int, client_id: str | None = None
) -> bytes:
    """Request header + MetadataRequest body at ``api_version`` (no size prefix)."""
    return encode_request_header(METADATA, api_version, correlation_id, client_id) + encode(
        METADATA_REQUEST, api_version, body)


# ------------------------------------------------------------------ observations

METADATA_ARROW_SCHEMA = pa.schema([
    ("response_index", pa.int32()),
    ("correlation_id", pa.int32()),
    ("throttle_time_ms", pa.int32()),
    ("cluster_id", pa.string()),
    ("controller_id", pa.int32()),
    ("topic", pa.string()),
    ("topic_id", pa.string()),
    ("is_internal", pa.bool_()),
    ("topic_error", pa.int16()),
    ("partition", pa.int32()),
    ("partition_error", pa.int16()),
    ("leader_id", pa.int32()),
    ("leader_epoch", pa.int32()),
    ("replicas", pa.list_(pa.int32())),
    ("isr", pa.list_(pa.int32())),
    ("offline_replicas", pa.list_(pa.int32())),
    ("top_error", pa.int16()),
    ("trailing_bytes", pa.int32()),
    ("error", pa.string()),
])
_OBS_COLUMNS = [n for n in METADATA_ARROW_SCHEMA.names if n != "response_index"]


def metadata_observations(buf: Buffer, api_version: int) -> list[dict[str, Any]]:
    """Flatten one MetadataResponse (header + body, no size prefix) to observation rows.

    One row per (topic, partition); a topic without partitions (e.g. an error topic) gives one
    row with the partition columns null, and a response without topics one row with the topic
    columns null, so errors stay visible. ``topic_id`` is null below v10 or when all-zero;
    ``leader_epoch`` is -1 below v7; ``trailing_bytes`` counts the bytes after the complete
    body (0 when none; they are ignored, as clients do). Raises :class:`DecodeError` for
    undecodable input (a short or malformed body).
    """
    r = decode_metadata_response(buf, api_version)
    base = {
        "correlation_id": r["correlation_id"], "throttle_time_ms": r["throttle_time_ms"],
        "cluster_id": r["cluster_id"], "controller_id": r["controller_id"],
        "top_error": r["error_code"], "trailing_bytes": r.get("trailing_bytes", 0), "error": None,
    }
    empty_topic = dict.fromkeys(("topic", "topic_id", "is_internal", "topic_error"))
    empty_part = dict.fromkeys(("partition", "partition_error", "leader_id", "leader_epoch", "replicas",
                                "isr", "offline_replicas"))
    rows: list[dict[str, Any]] = []
    for t in r["topics"]:
        topic = {
            "topic": t["name"],
            "topic_id": None if api_version < 10 or t["topic_id"] == w.ZERO_UUID else t["topic_id"],
            "is_internal": t["is_internal"], "topic_error": t["error_code"],
        }
        if not t["partitions"]:
            rows.append({**base, **topic, **empty_part})
        for p in t["partitions"]:
            rows.append({
                **base, **topic,
                "partition": p["partition_index"], "partition_error": p["error_code"],
                "leader_id": p["leader_id"], "leader_epoch": p["leader_epoch"],
                "replicas": p["replica_nodes"], "isr": p["isr_nodes"], "offline_replicas": p["offline_replicas"],
            })
    if not rows:
        rows.append({**base, **empty_topic, **empty_part})
    return rows


# ------------------------------------------------------------------ columnar fast path
#
# metadata_observations_arrow reads each response with a hand-written walk over the known layout of
# MetadataResponse v0–13 (one struct.unpack_from per partition header and per replica list) straight into
# columns, instead of the generic interpreter's dict per struct (~390 field reads per 50-partition
# response). Anything unusual — a tagged field, a null where none is allowed, a multi-byte compact length
# inside a partition, invalid UTF-8, a short buffer, an unknown version — makes the walk give up on that
# response, which then goes through metadata_observations (the reference) and so gets exactly the
# reference's rows or error. tests/test_protocol.py checks the two agree row for row.


class _Unusual(Exception):
    """The fast walk does not handle this response; the reference decoder decides."""


_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")
_I32_I32 = struct.Struct(">ii")
_HDR_FLEX = struct.Struct(">hiiiB")  # partition: error, index, leader, epoch, replicas' compact length
_HDR_V7 = struct.Struct(">hiiii")  # v7–8: ... epoch, replicas' int32 length
_HDR_V0 = struct.Struct(">hiii")  # v0–6: no epoch
_ARR_FLEX: dict[int, struct.Struct] = {}  # n int32 + the next one-byte compact length / tag count
_ARR_NEXT: dict[int, struct.Struct] = {}  # n int32 + the next int32 length
_ARR_LAST: dict[int, struct.Struct] = {}  # n int32
_MAX_FAST_ELEMS = 1024
_TOPIC_IDS: dict[bytes, str | None] = {}


def _arr(cache: dict[int, struct.Struct], n: int, tail: str) -> struct.Struct:
    """``n`` int32 then ``tail``; a one-byte compact length (tail ``B``) covers at most 126 elements."""
    s = cache.get(n)
    if s is None:
        if not 0 <= n <= (126 if tail == "B" else _MAX_FAST_ELEMS):
            raise _Unusual
        s = cache[n] = struct.Struct(f">{n}i{tail}")
    return s


_PART_FLEX: dict[tuple[int, int, int], struct.Struct] = {}


def _part_flex(shape: tuple[int, int, int]) -> struct.Struct:
    """One flexible partition whose replica, isr and offline lists hold ``shape`` elements."""
    n, m, k = shape
    s = _PART_FLEX[shape] = struct.Struct(f">hiiiB{n}iB{m}iB{k}iB")
    return s


def _uvarint(buf: bytes, pos: int) -> tuple[int, int]:
    b = buf[pos]
    if b < 0x80:
        return b, pos + 1
    return w.read_uvarint(buf, pos)


def _text(buf: bytes, pos: int, n: int) -> tuple[str, int]:
    end = pos + n
    if n < 0 or end > len(buf):
        raise _Unusual
    return buf[pos:end].decode("utf-8"), end


def _count(buf: bytes, pos: int, flex: bool) -> tuple[int, int]:
    """An array's length (compact or INT32); a null array is unusual here."""
    if flex:
        n1, pos = _uvarint(buf, pos)
        n = n1 - 1
    else:
        (n,) = _I32.unpack_from(buf, pos)
        pos += 4
    if n < 0:
        raise _Unusual
    return n, pos


def _opt_text(buf: bytes, pos: int, flex: bool) -> tuple[str | None, int]:
    """A nullable string (compact or INT16-sized)."""
    if flex:
        n1, pos = _uvarint(buf, pos)
        return _text(buf, pos, n1 - 1) if n1 else (None, pos)
    (n,) = _I16.unpack_from(buf, pos)
    return _text(buf, pos + 2, n) if n != -1 else (None, pos + 2)


def _no_tags(buf: bytes, pos: int) -> int:
    """Skip an empty tagged-field section; tagged fields are unusual here."""
    if buf[pos]:
        raise _Unusual
    return pos + 1


def _metadata_fast(buf: bytes, ver: int, topics: list, rows_per_topic: list, quads: list, lens: list,
                   flat: list) -> tuple[tuple, int]:
    """Walk one response into the column lists (appending only when the whole walk succeeds).

    Returns the response-level values ``(correlation_id, throttle_time_ms, cluster_id, controller_id,
    top_error, trailing_bytes)`` and the number of rows; raises :class:`_Unusual` (or an ``IndexError``,
    ``struct.error``, ``UnicodeDecodeError``) to hand the response to the reference decoder.
    """
    if not 0 <= ver <= 13:
        raise _Unusual
    flex = ver >= 9
    t_topics: list = []
    t_rows: list = []
    t_quads: list = []
    t_lens: list = []
    t_flat: list = []
    (corr,) = _I32.unpack_from(buf, 0)
    pos = _no_tags(buf, 4) if flex else 4
    throttle = 0
    if ver >= 3:
        (throttle,) = _I32.unpack_from(buf, pos)
        pos += 4
    # brokers: skipped, but read as the reference would (so a bad host fails the same way)
    nb, pos = _count(buf, pos, flex)
    for _ in range(nb):
        pos += 4
        if flex:
            n1, pos = _uvarint(buf, pos)
            _h, pos = _text(buf, pos, n1 - 1)
            pos += 4
            _r, pos = _opt_text(buf, pos, flex)
            pos = _no_tags(buf, pos)
        else:
            (n,) = _I16.unpack_from(buf, pos)
            _h, pos = _text(buf, pos + 2, n)
            pos += 4
            if ver >= 1:
                _r, pos = _opt_text(buf, pos, flex)
    cluster_id = None
    if ver >= 2:
        cluster_id, pos = _opt_text(buf, pos, flex)
    controller = -1
    if ver >= 1:
        (controller,) = _I32.unpack_from(buf, pos)
        pos += 4
    nt, pos = _count(buf, pos, flex)
    extend_q, extend_f, append_l = t_quads.extend, t_flat.extend, t_lens.append
    pop_f = t_flat.pop
    for _ in range(nt):
        (terr,) = _I16.unpack_from(buf, pos)
        pos += 2
        if flex:
            n1, pos = _uvarint(buf, pos)
            if n1 == 0:
                if ver < 12:
                    raise _Unusual
                name = None
            else:
                name, pos = _text(buf, pos, n1 - 1)
        else:
            (n,) = _I16.unpack_from(buf, pos)
            if n < 0:
                raise _Unusual
            name, pos = _text(buf, pos + 2, n)
        topic_id = None
        if ver >= 10:
            raw = buf[pos:pos + 16]
            if len(raw) != 16:
                raise _Unusual
            pos += 16
            if raw in _TOPIC_IDS:
                topic_id = _TOPIC_IDS[raw]
            else:
                text = w.uuid_to_str(raw)
                topic_id = None if text == w.ZERO_UUID else text
                if len(_TOPIC_IDS) < 65536:
                    _TOPIC_IDS[raw] = topic_id
        internal = False
        if ver >= 1:
            internal = buf[pos] != 0
            pos += 1
        np_, pos = _count(buf, pos, flex)
        if np_ == 0:
            extend_q((0, 0, 0, 0, 0))
            append_l(None)
        elif flex:
            # partitions of a topic usually share their list lengths: one unpack per partition with the
            # previous partition's shape, checked by its length bytes; the per-list walk otherwise
            shape = None
            whole, n1_, m1_, k1_, i2, i3, size = _HDR_FLEX, 0, 0, 0, 0, 0, 0
            for _ in range(np_):
                if shape is not None:
                    try:
                        t = whole.unpack_from(buf, pos)
                    except struct.error:
                        t = None
                    if t is not None and t[4] == n1_ and t[i2] == m1_ and t[i3] == k1_ and not t[-1]:
                        extend_q(t[:5])
                        extend_f(t[5:i2])
                        extend_f(t[i2 + 1:i3])
                        extend_f(t[i3 + 1:-1])
                        append_l(shape)
                        pos += size
                        continue
                q = _HDR_FLEX.unpack_from(buf, pos)
                extend_q(q)
                n = q[4] - 1
                pos += 15
                s = _ARR_FLEX.get(n) or _arr(_ARR_FLEX, n, "B")
                extend_f(s.unpack_from(buf, pos))
                m = pop_f() - 1
                pos += 4 * n + 1
                s = _ARR_FLEX.get(m) or _arr(_ARR_FLEX, m, "B")
                extend_f(s.unpack_from(buf, pos))
                k = pop_f() - 1
                pos += 4 * m + 1
                s = _ARR_FLEX.get(k) or _arr(_ARR_FLEX, k, "B")
                extend_f(s.unpack_from(buf, pos))
                if pop_f():
                    raise _Unusual  # tagged fields in a partition
                pos += 4 * k + 1
                shape = (n, m, k)
                append_l(shape)
                whole = _PART_FLEX.get(shape) or _part_flex(shape)
                n1_, m1_, k1_, i2, i3, size = n + 1, m + 1, k + 1, 5 + n, 6 + n + m, whole.size
        else:
            for _ in range(np_):
                if ver >= 7:
                    q = _HDR_V7.unpack_from(buf, pos)
                    pos += 18
                else:
                    e, p, lead, n = _HDR_V0.unpack_from(buf, pos)
                    q = (e, p, lead, -1, n)
                    pos += 14
                extend_q(q)
                n = q[4]
                s = _ARR_NEXT.get(n) or _arr(_ARR_NEXT, n, "i")
                extend_f(s.unpack_from(buf, pos))
                m = pop_f()
                pos += 4 * n + 4
                if ver >= 5:
                    s = _ARR_NEXT.get(m) or _arr(_ARR_NEXT, m, "i")
                    extend_f(s.unpack_from(buf, pos))
                    k = pop_f()
                    pos += 4 * m + 4
                    s = _ARR_LAST.get(k) or _arr(_ARR_LAST, k, "")
                    extend_f(s.unpack_from(buf, pos))
                    pos += 4 * k
                else:
                    k = 0
                    s = _ARR_LAST.get(m) or _arr(_ARR_LAST, m, "")
                    extend_f(s.unpack_from(buf, pos))
                    pos += 4 * m
                append_l((n, m, k))
        if ver >= 8:
            pos += 4  # topic authorized operations
        if flex:
            pos = _no_tags(buf, pos)
        t_topics.append((name, topic_id, internal, terr))
        t_rows.append(max(np_, 1))
    if 8 <= ver <= 10:
        pos += 4  # cluster authorized operations
    top_error = 0
    if ver >= 13:
        (top_error,) = _I16.unpack_from(buf, pos)
        pos += 2
    if flex:
        pos = _no_tags(buf, pos)
    if pos > len(buf):
        raise _Unusual
    if not nt:
        t_quads.extend((0, 0, 0, 0, 0))
        t_lens.append(None)
        t_topics.append((None, None, None, None))
        t_rows.append(1)
    topics.extend(t_topics)
    rows_per_topic.extend(t_rows)
    quads.extend(t_quads)
    lens.extend(t_lens)
    flat.extend(t_flat)
    return (corr, throttle, cluster_id, controller, top_error, len(buf) - pos), len(t_lens)


def metadata_observations_arrow(responses: pa.Array, api_versions: pa.Array) -> pa.RecordBatch:
    """Batch form of :func:`metadata_observations` over Arrow arrays (for Spark).

    Args:
        responses: ``binary``/``large_binary`` MetadataResponses (header + body, no size prefix).
        api_versions: ``int16`` API version of each response's request.

    Returns a batch in :data:`METADATA_ARROW_SCHEMA`; ``response_index`` is the input row.
    Row data never raises: an undecodable (or null) response gives one row with only
    ``response_index`` and ``error`` set. The rows are those of :func:`metadata_observations`,
    read by a columnar walk of the known layout that hands anything unusual to that function.
    """
    if isinstance(responses, pa.ChunkedArray):
        responses = responses.combine_chunks()
    if isinstance(api_versions, pa.ChunkedArray):
        api_versions = api_versions.combine_chunks()
    if len(responses) != len(api_versions):
        raise ValueError(f"{len(responses)} responses but {len(api_versions)} versions")
    resp: list[tuple] = []  # per response: correlation_id .. trailing_bytes, error
    rows_per_resp: list[int] = []
    topics: list[tuple] = []  # per topic (or null-topic row): topic, topic_id, is_internal, topic_error
    rows_per_topic: list[int] = []
    quads: list[int] = []  # per row: partition_error, partition, leader_id, leader_epoch, (unused)
    lens: list[tuple[int, int, int] | None] = []  # per row: replica list lengths; None = null partition
    flat: list[int] = []  # the rows' replicas, isr, offline_replicas values in row order
    for buf, ver in zip(responses.to_pylist(), api_versions.to_pylist(), strict=True):
        if buf is not None and ver is not None:
            try:
                head, nrows = _metadata_fast(buf, ver, topics, rows_per_topic, quads, lens, flat)
                resp.append((*head, None))
                rows_per_resp.append(nrows)
                continue
            except (_Unusual, IndexError, struct.error, UnicodeDecodeError, ValueError):
                pass
        try:
            if buf is None or ver is None:
                raise DecodeError("null response or api_version", 0)
            rows = metadata_observations(buf, ver)
        except DecodeError as e:
            resp.append((None,) * 6 + (str(e),))
            rows_per_resp.append(1)
            topics.append((None, None, None, None))
            rows_per_topic.append(1)
            quads.extend((0, 0, 0, 0, 0))
            lens.append(None)
            continue
        r0 = rows[0]
        resp.append((r0["correlation_id"], r0["throttle_time_ms"], r0["cluster_id"], r0["controller_id"],
                     r0["top_error"], r0["trailing_bytes"], None))
        rows_per_resp.append(len(rows))
        for row in rows:
            topics.append((row["topic"], row["topic_id"], row["is_internal"], row["topic_error"]))
            rows_per_topic.append(1)
            if row["partition"] is None:
                quads.extend((0, 0, 0, 0, 0))
                lens.append(None)
            else:
                quads.extend((row["partition_error"], row["partition"], row["leader_id"], row["leader_epoch"], 0))
                lens.append((len(row["replicas"]), len(row["isr"]), len(row["offline_replicas"])))
                flat.extend(row["replicas"])
                flat.extend(row["isr"])
                flat.extend(row["offline_replicas"])
    return _observation_batch(resp, rows_per_resp, topics, rows_per_topic, quads, lens, flat)


def _observation_batch(resp: list[tuple], rows_per_resp: list[int], topics: list[tuple],
                       rows_per_topic: list[int], quads: list[int], lens: list, flat: list[int]) -> pa.RecordBatch:
    """Assemble the collected per-response, per-topic and per-row values into one batch."""
    n_rows = len(lens)
    fields = METADATA_ARROW_SCHEMA
    resp_idx = np.repeat(np.arange(len(resp), dtype=np.int32), np.asarray(rows_per_resp, dtype=np.int64))
    topic_idx = np.repeat(np.arange(len(topics), dtype=np.int64), np.asarray(rows_per_topic, dtype=np.int64))
    cols: dict[str, pa.Array] = {"response_index": pa.array(resp_idx, pa.int32())}
    take_r = pa.array(resp_idx.astype(np.int64))
    for j, name in enumerate(("correlation_id", "throttle_time_ms", "cluster_id", "controller_id", "top_error",
                              "trailing_bytes", "error")):
        cols[name] = pa.array([r[j] for r in resp], fields.field(name).type).take(take_r)
    take_t = pa.array(topic_idx)
    for j, name in enumerate(("topic", "topic_id", "is_internal", "topic_error")):
        cols[name] = pa.array([t[j] for t in topics], fields.field(name).type).take(take_t)
    null = np.fromiter((x is None for x in lens), dtype=bool, count=n_rows)
    mask = pa.array(null) if null.any() else None
    q = np.asarray(quads, dtype=np.int64).reshape(n_rows, 5)
    for j, name in enumerate(("partition_error", "partition", "leader_id", "leader_epoch")):
        typ = fields.field(name).type
        cols[name] = pa.array(q[:, j].astype(typ.to_pandas_dtype()), typ, mask=null if mask is not None else None)
    ln = np.zeros((n_rows, 3), dtype=np.int64)
    if n_rows:
        ln[~null] = np.asarray([x for x in lens if x is not None], dtype=np.int64).reshape(-1, 3)
    values = np.asarray(flat, dtype=np.int32)
    # flat holds, row by row, replicas then isr then offline: each list column gathers its own runs
    starts = np.concatenate(([0], np.cumsum(ln.sum(axis=1))[:-1])) if n_rows else np.zeros(0, np.int64)
    for j, name in enumerate(("replicas", "isr", "offline_replicas")):
        first = starts + ln[:, :j].sum(axis=1)
        count = ln[:, j]
        offsets = np.zeros(n_rows + 1, dtype=np.int32)
        np.cumsum(count, out=offsets[1:])
        gather = np.repeat(first - offsets[:-1], count) + np.arange(offsets[-1], dtype=np.int64)
        cols[name] = pa.ListArray.from_arrays(pa.array(offsets), pa.array(values[gather], pa.int32()),
                                              type=fields.field(name).type, mask=mask)
    return pa.RecordBatch.from_arrays([cols[f.name] for f in fields], schema=fields)
