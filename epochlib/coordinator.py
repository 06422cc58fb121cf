"""``__consumer_offsets`` records: keys and values of types 0–24 as data (spec §1).

Framing (spec §1.1)::

    key   = INT16 record_type   || key struct (always schema version 0, never flexible)
    value = INT16 value_version || value struct at that version
    value = null                -> tombstone (the state addressed by the key is deleted)

Types (spec §1.2): 0/1 offset commits (both read with the OffsetCommitValue table, v0–v4),
2 classic group metadata (v0–v4; the consumer embedded protocol inside is decoded too),
3–8 and 16 KIP-848 consumer groups (always flexible v0), 9–15 share groups and 17–24 streams
groups (preview layouts: decoded where the spec gives them, kept raw otherwise or when the
layout does not fit). Types ≥ 25 (or negative) are unknown: recognised, raw bytes kept, no
error — as the broker's loader skips them.

Leniency, as Kafka's readers (one rule for every decoder in epochlib, see also
:mod:`epochlib.protocol`):

* bytes after a complete key or value struct are not an error: the struct is decoded and the
  excess is counted in ``"trailing_bytes"`` of the key/value dict (present only when > 0); a
  short or malformed struct still raises;
* a value whose version is above the highest known one is read with the newest known layout
  when that layout is flexible, as Kafka's own readers do (the generated ``read`` does not check
  the version; fields added later can only be tagged, KIP-915): ``"version"`` keeps the real
  number and ``"version_above_known": True`` marks it. When the newest layout is not flexible
  (none of the tables below today; the consumer embedded protocol is handled on its own), a
  newer version could have appended untagged fields anywhere, so it stays a DecodeError;
* negative versions are always an error.

The tables follow spec/coordinator-versions.md (the newest schema files read), which is newer
than spec/kafka-formats.md §1 where they differ.

Public decoders raise only :class:`~epochlib.errors.DecodeError` (position relative to the
key or value bytes). :func:`decode_offsets_arrow` never raises on row data: a bad row gets its
reason in the ``error`` column.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from . import _wire as w
from ._schema import F, M, MessageSpec, decode, encode
from ._wire import Buffer
from .errors import DecodeError

__all__ = [
    "ARROW_SCHEMA",
    "KEY_SPECS",
    "TYPE_NAMES",
    "VALUE_SPECS",
    "CoordinatorRecord",
    "decode_consumer_assignment",
    "decode_consumer_subscription",
    "decode_key",
    "decode_offsets_arrow",
    "decode_offsets_rows",
    "decode_record",
    "decode_value",
    "encode_consumer_assignment",
    "encode_consumer_subscription",
    "encode_group_metadata_value",
    "encode_key",
    "encode_offset_commit_key",
    "encode_offset_commit_value",
    "encode_value",
    "snake_type_name",
    "type_name",
]

# ------------------------------------------------------------------ tables (spec §1.2–1.5)

TYPE_NAMES: dict[int, str] = {
    0: "LegacyOffsetCommit", 1: "OffsetCommit", 2: "GroupMetadata",
    3: "ConsumerGroupMetadata", 4: "ConsumerGroupPartitionMetadata",
    5: "ConsumerGroupMemberMetadata", 6: "ConsumerGroupTargetAssignmentMetadata",
    7: "ConsumerGroupTargetAssignmentMember", 8: "ConsumerGroupCurrentMemberAssignment",
    9: "ShareGroupPartitionMetadata", 10: "ShareGroupMemberMetadata", 11: "ShareGroupMetadata",
    12: "ShareGroupTargetAssignmentMetadata", 13: "ShareGroupTargetAssignmentMember",
    14: "ShareGroupCurrentMemberAssignment", 15: "ShareGroupStatePartitionMetadata",
    16: "ConsumerGroupRegularExpression", 17: "StreamsGroupMetadata",
    18: "StreamsGroupPartitionMetadata", 19: "StreamsGroupMemberMetadata",
    20: "StreamsGroupTargetAssignmentMetadata", 21: "StreamsGroupTargetAssignmentMember",
    22: "StreamsGroupCurrentMemberAssignment", 23: "StreamsGroupTopology",
    24: "StreamsGroupTargetAssignmentResolvedTopicIds",
}
UNKNOWN_TYPE_NAME = "Unknown"

#: Share (KIP-932) and streams (KIP-1071) types: preview schemas that changed between releases.
#: A value that does not fit the layout below is kept raw instead of failing the record.
PREVIEW_TYPES = frozenset(range(9, 16)) | frozenset(range(17, 25))

# Keys (§1.3): non-flexible, schema version 0.
_OFFSET_KEY = M("OffsetCommitKey", "0", "none",
                F("group", "string"), F("topic", "string"), F("partition", "int32"))
_GROUP_KEY = M("GroupMetadataKey", "0", "none", F("group", "string"))
_GROUP_ID_KEY = M("GroupIdKey", "0", "none", F("GroupId", "string"))
_MEMBER_KEY = M("GroupMemberKey", "0", "none", F("GroupId", "string"), F("MemberId", "string"))
_REGEX_KEY = M("ConsumerGroupRegularExpressionKey", "0", "none",
               F("GroupId", "string"), F("RegularExpression", "string"))

KEY_SPECS: dict[int, MessageSpec] = {0: _OFFSET_KEY, 1: _OFFSET_KEY, 2: _GROUP_KEY, 16: _REGEX_KEY}
KEY_SPECS.update({t: _GROUP_ID_KEY for t in (3, 4, 6, 9, 11, 12, 15, 17, 18, 20, 23, 24)})
KEY_SPECS.update({t: _MEMBER_KEY for t in (5, 7, 8, 10, 13, 14, 19, 21, 22)})

# OffsetCommitValue (§1.4). v1 added expireTimestamp, v2 dropped it again, v3 added
# leaderEpoch (KIP-320), v4 is v3 in the flexible encoding plus the tagged TopicId (tag 0,
# KAFKA-19141, written by Kafka 4.1+; zero uuid = absent). Type 0 (LegacyOffsetCommitValue,
# v0 only in Kafka's files) is read with this table too: its v0 bytes are identical, and old
# brokers' type-0 keys may sit beside values of any OffsetCommitValue version (formats §1.4).
OFFSET_COMMIT_VALUE = M(
    "OffsetCommitValue", "0-4", "4+",
    F("offset", "int64"),
    F("leaderEpoch", "int32", "3+", default=-1),
    F("metadata", "string"),
    F("commitTimestamp", "int64"),
    F("expireTimestamp", "int64", "1", default=-1),
    F("TopicId", "uuid", "4+", tag=0, tagged="4+"),
)

# GroupMetadataValue (§1.4). v1 added member.rebalanceTimeout, v2 currentStateTimestamp,
# v3 member.groupInstanceId (KIP-345), v4 = v3 flexible.
GROUP_METADATA_VALUE = M(
    "GroupMetadataValue", "0-4", "4+",
    F("protocolType", "string"),
    F("generation", "int32"),
    F("protocol", "string", nullable="0+"),
    F("leader", "string", nullable="0+"),
    F("currentStateTimestamp", "int64", "2+", default=-1),
    F("members", "[]struct", fields=(
        F("memberId", "string"),
        F("groupInstanceId", "string", "3+", nullable="3+", default=None),
        F("clientId", "string"),
        F("clientHost", "string"),
        F("rebalanceTimeout", "int32", "1+", default=-1),
        F("sessionTimeout", "int32"),
        F("subscription", "bytes"),
        F("assignment", "bytes"),
    )),
)

_TOPIC_PARTITIONS = (F("Topic", "string"), F("Partitions", "[]int32"))

# Consumer embedded protocol (§1.4), never flexible; v1 OwnedPartitions (KIP-429),
# v2 GenerationId, v3 RackId (KIP-881). Newer versions are read with the v3 layout.
CONSUMER_SUBSCRIPTION = M(
    "ConsumerProtocolSubscription", "0-3", "none",
    F("Topics", "[]string"),
    F("UserData", "bytes", nullable="0+", default=None),
    F("OwnedPartitions", "[]struct", "1+", fields=_TOPIC_PARTITIONS),
    F("GenerationId", "int32", "2+", default=-1),
    F("RackId", "string", "3+", nullable="3+", default=None),
)
CONSUMER_ASSIGNMENT = M(
    "ConsumerProtocolAssignment", "0-3", "none",
    F("AssignedPartitions", "[]struct", fields=_TOPIC_PARTITIONS),
    F("UserData", "bytes", nullable="0+", default=None),
)

# KIP-848 / share / streams values (§1.5): validVersions 0, always flexible.
_TOPIC_ID_PARTITIONS = (F("TopicId", "uuid"), F("Partitions", "[]int32"))
_PARTITION_METADATA = (
    F("Topics", "[]struct", fields=(
        F("TopicId", "uuid"), F("TopicName", "string"), F("NumPartitions", "int32"),
        F("PartitionMetadata", "[]struct", fields=(F("Partition", "int32"), F("Racks", "[]string"))),
    )),
)
_TASKS = (F("SubtopologyId", "string"), F("Partitions", "[]int32"))
# ConsumerGroupCurrentMemberAssignmentValue's own TopicPartitions: tag 0 AssignmentEpochs
# (KIP-1251, one epoch per entry of Partitions; null = not written).
_TOPIC_ID_PARTITIONS_EPOCHS = (
    *_TOPIC_ID_PARTITIONS,
    F("AssignmentEpochs", "[]int32", nullable="0+", tag=0, tagged="0+", default=None),
)


def _v0(name: str, *fields) -> MessageSpec:
    return M(name, "0", "0+", *fields)


VALUE_SPECS: dict[int, MessageSpec | None] = {
    0: OFFSET_COMMIT_VALUE,
    1: OFFSET_COMMIT_VALUE,
    2: GROUP_METADATA_VALUE,
    3: _v0("ConsumerGroupMetadataValue", F("Epoch", "int32"),
           F("MetadataHash", "int64", tag=0, tagged="0+", default=0),  # KIP-1101, 4.1
           F("CreationTimeMs", "int64", tag=1, tagged="0+", default=-1)),  # KIP-1282
    4: _v0("ConsumerGroupPartitionMetadataValue", *_PARTITION_METADATA),
    5: _v0(
        "ConsumerGroupMemberMetadataValue",
        F("InstanceId", "string", nullable="0+", default=None),
        F("RackId", "string", nullable="0+", default=None),
        F("ClientId", "string"),
        F("ClientHost", "string"),
        F("SubscribedTopicNames", "[]string"),
        F("SubscribedTopicRegex", "string", nullable="0+", default=None),
        F("RebalanceTimeoutMs", "int32", default=-1),
        F("ServerAssignor", "string", nullable="0+", default=None),
        F("ClassicMemberMetadata", "struct", nullable="0+", tag=0, tagged="0+", default=None, fields=(
            F("SessionTimeoutMs", "int32"),
            F("SupportedProtocols", "[]struct", fields=(F("Name", "string"), F("Metadata", "bytes"))),
        )),
    ),
    6: _v0("ConsumerGroupTargetAssignmentMetadataValue", F("AssignmentEpoch", "int32"),
           F("AssignmentTimestamp", "int64", tag=0, tagged="0+", default=0)),  # KIP-1263, 4.3
    7: _v0("ConsumerGroupTargetAssignmentMemberValue",
           F("TopicPartitions", "[]struct", fields=_TOPIC_ID_PARTITIONS)),
    8: _v0(
        "ConsumerGroupCurrentMemberAssignmentValue",
        F("MemberEpoch", "int32"),
        F("PreviousMemberEpoch", "int32"),
        F("State", "int8"),
        F("AssignedPartitions", "[]struct", fields=_TOPIC_ID_PARTITIONS_EPOCHS),
        F("PartitionsPendingRevocation", "[]struct", fields=_TOPIC_ID_PARTITIONS_EPOCHS),
    ),
    9: _v0("ShareGroupPartitionMetadataValue", *_PARTITION_METADATA),
    10: _v0("ShareGroupMemberMetadataValue",
            F("RackId", "string", nullable="0+", default=None), F("ClientId", "string"),
            F("ClientHost", "string"), F("SubscribedTopicNames", "[]string")),
    11: _v0("ShareGroupMetadataValue", F("Epoch", "int32")),
    12: _v0("ShareGroupTargetAssignmentMetadataValue", F("AssignmentEpoch", "int32")),
    13: _v0("ShareGroupTargetAssignmentMemberValue",
            F("TopicPartitions", "[]struct", fields=_TOPIC_ID_PARTITIONS)),
    14: _v0("ShareGroupCurrentMemberAssignmentValue",
            F("MemberEpoch", "int32"), F("PreviousMemberEpoch", "int32"), F("State", "int8"),
            F("AssignedPartitions", "[]struct", fields=_TOPIC_ID_PARTITIONS)),
    15: _v0("ShareGroupStatePartitionMetadataValue",
            F("InitializedTopics", "[]struct", fields=(
                F("TopicId", "uuid"), F("TopicName", "string"), F("Partitions", "[]int32"))),
            F("DeletingTopics", "[]struct", fields=(F("TopicId", "uuid"), F("TopicName", "string")))),
    # its "Version" field would clash with the value version: exposed as "regex_version"
    16: _v0("ConsumerGroupRegularExpressionValue",
            F("Topics", "[]string"), F("Version", "int64", key="regex_version"), F("Timestamp", "int64")),
    # changed without a version bump (coordinator-versions §2): the newest layout first; values of
    # the older preview layout are read with PREVIEW_OLDER_LAYOUTS[17]
    17: _v0("StreamsGroupMetadataValue",
            F("Epoch", "int32"),
            F("MetadataHash", "int64"),
            F("ValidatedTopologyEpoch", "int32", tag=0, tagged="0+", default=-1),
            F("AssignmentConfigs", "[]struct", fields=(F("Key", "string"), F("Value", "string")))),
    18: _v0("StreamsGroupPartitionMetadataValue", *_PARTITION_METADATA),
    19: _v0(
        "StreamsGroupMemberMetadataValue",
        F("InstanceId", "string", nullable="0+", default=None),
        F("RackId", "string", nullable="0+", default=None),
        F("ClientId", "string"),
        F("ClientHost", "string"),
        F("RebalanceTimeoutMs", "int32", default=-1),
        F("TopologyEpoch", "int32"),
        F("ProcessId", "string"),
        F("UserEndpoint", "struct", nullable="0+", default=None,
          fields=(F("Host", "string"), F("Port", "uint16"))),
        F("ClientTags", "[]struct", fields=(F("Key", "string"), F("Value", "string"))),
    ),
    20: _v0("StreamsGroupTargetAssignmentMetadataValue", F("AssignmentEpoch", "int32")),
    21: _v0("StreamsGroupTargetAssignmentMemberValue",
            F("ActiveTasks", "[]struct", fields=_TASKS),
            F("StandbyTasks", "[]struct", fields=_TASKS),
            F("WarmupTasks", "[]struct", fields=_TASKS)),
    22: None,  # six task lists whose exact layout the spec does not give: kept raw
    23: None,  # topology: "see JSON" in the spec: kept raw
    24: _v0("StreamsGroupTargetAssignmentResolvedTopicIdsValue",
            F("AssignmentEpoch", "int32"),
            F("ResolvedTopicIdsBySubtopology", "[]struct", fields=(
                F("SubtopologyId", "string"), F("TopicIds", "[]uuid")))),
}

#: Earlier layouts of preview values that changed without a version bump, tried in order when
#: the newest one (VALUE_SPECS) does not fit the bytes exactly; the value then names the
#: layout it was read with in ``"layout"``.
PREVIEW_OLDER_LAYOUTS: dict[int, tuple[MessageSpec, ...]] = {
    17: (M("StreamsGroupMetadataValue (Kafka 4.0 preview)", "0", "0+", F("Epoch", "int32")),),
}


# ------------------------------------------------------------------ decoding


def _wrap(fn, *args):
    """Run a decoder, turning any stray exception into DecodeError (contract)."""
    try:
        return fn(*args)
    except DecodeError:
        raise
    except Exception as e:  # noqa: BLE001
        raise DecodeError(f"{type(e).__name__}: {e}", 0) from None


def type_name(record_type: int) -> str:
    """The record kind for a key's record type ("Unknown" for types this codec does not know)."""
    return TYPE_NAMES.get(record_type, UNKNOWN_TYPE_NAME)


_CAMEL = re.compile(r"(?<!^)(?=[A-Z])")


def snake_type_name(record_type: int) -> str:
    """:func:`type_name` in snake case (``GroupMetadata`` -> ``group_metadata``): the ``record_type``
    column of the ``group_metadata`` table, shared by every input form that yields group records."""
    return _CAMEL.sub("_", type_name(record_type)).lower()


def decode_key(key: Buffer) -> dict[str, Any]:
    """Decode a ``__consumer_offsets`` key.

    Returns ``{"record_type", "type_name", ...key fields}`` (+ ``"trailing_bytes"`` when bytes
    follow the complete key struct: counted, not an error); unknown types give
    ``{"record_type", "type_name": "Unknown", "raw": bytes after the type}``.

    Raises:
        DecodeError: fewer than 2 bytes, or a known type whose key struct is malformed.
    """
    return _wrap(_decode_key, key)


def _decode_key(key: Buffer) -> dict[str, Any]:
    if key is None:
        raise DecodeError("null key", 0)
    record_type, pos = w.read_int16(key, 0)
    spec = KEY_SPECS.get(record_type)
    if spec is None:
        return {"record_type": record_type, "type_name": UNKNOWN_TYPE_NAME, "raw": bytes(key[2:])}
    fields, end = decode(spec, 0, key, pos)
    out = {"record_type": record_type, "type_name": TYPE_NAMES[record_type], **fields}
    if end < len(key):
        out["trailing_bytes"] = len(key) - end
    return out


def decode_value(record_type: int, value: Buffer | None) -> dict[str, Any] | None:
    """Decode a value for a key of ``record_type``; ``None`` (tombstone) gives ``None``.

    Returns ``{"version": int, ...fields}``. Type 2 members of ``"consumer"`` groups gain
    ``subscription_decoded`` / ``assignment_decoded`` (None when the embedded bytes do not
    parse; the raw bytes stay in ``subscription`` / ``assignment``). Values kept raw (unknown
    types, types 22/23, preview layouts that do not fit) are ``{"version", "raw"}``
    (plus ``"layout_error"`` for the last case).

    Marks (module docstring): ``"trailing_bytes"`` (bytes after the complete struct, when > 0),
    ``"version_above_known": True`` (a version above the table's newest, read with the newest
    flexible layout), ``"layout"`` (a preview value read with an older layout of its type).

    Raises:
        DecodeError: malformed or short value of a known type, a negative version, or a
            version above a non-flexible newest layout.
    """
    if value is None:
        return None
    return _wrap(_decode_value, record_type, value)


def _layout_version(spec: MessageSpec, version: int) -> tuple[int, bool]:
    """(version whose layout reads ``version``, whether it is above the newest known one).

    Above the newest version, Kafka's generated readers use the newest layout they know; that is
    only safe when the newest layout is flexible (later fields can then only be tagged).
    """
    hi = spec.valid_versions.hi
    if version > hi and hi in spec.flexible_versions:
        return hi, True
    if version not in spec.valid_versions:
        raise DecodeError(f"{spec.name} version {version} not in {spec.valid_versions}", 0)
    return version, False


def _decode_fitting(record_type: int, spec: MessageSpec, version: int, value: Buffer, pos: int):
    """Decode with ``spec`` (or, for a preview type, the first earlier layout that uses every byte).

    Returns ``(fields, end, spec used, above_known)``; raises the newest layout's error when none fits.
    """
    first: tuple | None = None
    error: DecodeError | None = None
    for cand in (spec, *PREVIEW_OLDER_LAYOUTS.get(record_type, ())):
        try:
            layout, above = _layout_version(cand, version)
            fields, end = decode(cand, layout, value, pos)
        except DecodeError as e:
            error = error or e
            continue
        if end == len(value):
            return fields, end, cand, above
        first = first or (fields, end, cand, above)
    if first is not None:
        return first
    assert error is not None
    raise error


def _decode_value(record_type: int, value: Buffer) -> dict[str, Any]:
    known = record_type in VALUE_SPECS
    if not known and len(value) < 2:
        return {"version": None, "raw": bytes(value)}
    version, pos = w.read_int16(value, 0)
    spec = VALUE_SPECS.get(record_type)
    if spec is None:
        return {"version": version, "raw": bytes(value[2:])}
    try:
        fields, end, used, above = _decode_fitting(record_type, spec, version, value, pos)
    except DecodeError as e:
        if record_type in PREVIEW_TYPES:
            return {"version": version, "raw": bytes(value[2:]), "layout_error": str(e)}
        raise
    if record_type == 2 and fields["protocol_type"] == "consumer":
        for m in fields["members"]:
            m["subscription_decoded"] = _try(decode_consumer_subscription, m["subscription"])
            m["assignment_decoded"] = _try(decode_consumer_assignment, m["assignment"])
    out = {"version": version, **fields}
    if used is not spec:
        out["layout"] = used.name
    if above:
        out["version_above_known"] = True
    if end < len(value):
        out["trailing_bytes"] = len(value) - end
    return out


def _try(fn, raw: bytes):
    try:
        return fn(raw)
    except DecodeError:
        return None


def _decode_embedded(spec: MessageSpec, raw: Buffer) -> dict[str, Any]:
    version, pos = w.read_int16(raw, 0)
    if version < 0:
        raise DecodeError(f"{spec.name}: negative version {version}", 0)
    fields, end = decode(spec, min(version, spec.valid_versions.hi), raw, pos)
    out = {"version": version, **fields}
    if end < len(raw):
        out["trailing_bytes"] = len(raw) - end
    return out


def decode_consumer_subscription(raw: Buffer) -> dict[str, Any]:
    """Decode ConsumerProtocolSubscription (int16 version + struct; newer versions read as v3)."""
    return _wrap(_decode_embedded, CONSUMER_SUBSCRIPTION, raw)


def decode_consumer_assignment(raw: Buffer) -> dict[str, Any]:
    """Decode ConsumerProtocolAssignment (int16 version + struct; newer versions read as v3)."""
    return _wrap(_decode_embedded, CONSUMER_ASSIGNMENT, raw)


@dataclass(frozen=True, slots=True)
class CoordinatorRecord:
    """One decoded ``__consumer_offsets`` record.

    ``key`` / ``value`` are the dicts of :func:`decode_key` / :func:`decode_value`;
    ``raw_value`` holds the value bytes when they were kept undecoded. The offset-commit
    convenience fields are None for other types (``group`` is set for every group-keyed type);
    ``topic_id`` is the OffsetCommitValue v4+ TopicId (None when absent or all-zero).
    ``trailing_bytes`` counts the bytes after the complete key and value structs (0 = none);
    ``version_above_known`` is True when the value's version is above the newest known one
    (read with the newest layout), False for other values, None for tombstones.
    """

    record_type: int
    type_name: str
    key: dict[str, Any]
    value: dict[str, Any] | None
    is_tombstone: bool
    value_version: int | None = None
    raw_value: bytes | None = None
    group: str | None = None
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None
    leader_epoch: int | None = None
    metadata: str | None = None
    commit_timestamp: int | None = None
    expire_timestamp: int | None = None
    topic_id: str | None = None
    trailing_bytes: int = 0
    version_above_known: bool | None = None

    @property
    def is_offset_commit(self) -> bool:
        return self.record_type in (0, 1)


def decode_record(key: Buffer, value: Buffer | None) -> CoordinatorRecord:
    """Decode a key/value pair into a :class:`CoordinatorRecord` (value None = tombstone).

    Raises:
        DecodeError: malformed key or value (unknown record types are not an error).
    """
    k = decode_key(key)
    rt = k["record_type"]
    v = decode_value(rt, value)
    raw = None
    if v is not None and "raw" in v:
        raw = v["raw"]
    group = k.get("group", k.get("group_id"))
    common = dict(
        record_type=rt, type_name=k["type_name"], key=k, value=v, is_tombstone=value is None,
        value_version=None if v is None else v["version"], raw_value=raw, group=group,
        trailing_bytes=k.get("trailing_bytes", 0) + (0 if v is None else v.get("trailing_bytes", 0)),
        version_above_known=None if v is None else v.get("version_above_known", False),
    )
    if rt in (0, 1):
        common.update(topic=k["topic"], partition=k["partition"])
        if v is not None:
            tid = v["topic_id"]
            common.update(
                offset=v["offset"], leader_epoch=v["leader_epoch"], metadata=v["metadata"],
                commit_timestamp=v["commit_timestamp"], expire_timestamp=v["expire_timestamp"],
                topic_id=None if tid == w.ZERO_UUID else tid,
            )
    return CoordinatorRecord(**common)


# ------------------------------------------------------------------ encoding


def encode_key(record_type: int, data: dict[str, Any]) -> bytes:
    """Encode a key of a known ``record_type`` (``data`` uses the snake_case field names)."""
    spec = KEY_SPECS.get(record_type)
    if spec is None:
        return w.write_int16(record_type) + bytes(data.get("raw", b""))
    return w.write_int16(record_type) + encode(spec, 0, data)


def encode_value(record_type: int, version: int, data: dict[str, Any]) -> bytes:
    """Encode a value of ``record_type`` at ``version`` (types kept raw write ``data["raw"]``)."""
    spec = VALUE_SPECS.get(record_type)
    if spec is None:
        return w.write_int16(version) + bytes(data.get("raw", b""))
    return w.write_int16(version) + encode(spec, version, data)


def encode_offset_commit_key(group: str, topic: str, partition: int) -> bytes:
    """Type-1 key for (group, topic, partition)."""
    return encode_key(1, {"group": group, "topic": topic, "partition": partition})


def encode_offset_commit_value(
    offset: int, *, leader_epoch: int = -1, metadata: str = "", commit_timestamp: int,
    expire_timestamp: int = -1, version: int = 3,
) -> bytes:
    """OffsetCommitValue at ``version`` (brokers write v3; v1 when an expiry is set)."""
    return encode_value(1, version, {
        "offset": offset, "leader_epoch": leader_epoch, "metadata": metadata,
        "commit_timestamp": commit_timestamp, "expire_timestamp": expire_timestamp,
    })


def encode_group_metadata_value(data: dict[str, Any], version: int = 3) -> bytes:
    """GroupMetadataValue at ``version`` (brokers write v3)."""
    return encode_value(2, version, data)


def encode_consumer_subscription(data: dict[str, Any], version: int) -> bytes:
    """ConsumerProtocolSubscription bytes (int16 version + struct), for group member fixtures."""
    return w.write_int16(version) + encode(CONSUMER_SUBSCRIPTION, version, data)


def encode_consumer_assignment(data: dict[str, Any], version: int) -> bytes:
    """ConsumerProtocolAssignment bytes (int16 version + struct)."""
    return w.write_int16(version) + encode(CONSUMER_ASSIGNMENT, version, data)


# ------------------------------------------------------------------ Arrow batch function

#: Columns of :func:`decode_offsets_arrow` (and the dicts of :func:`decode_offsets_rows`).
ARROW_SCHEMA = pa.schema([
    ("record_type", pa.int16()),
    ("value_version", pa.int16()),
    ("is_tombstone", pa.bool_()),
    ("group_id", pa.string()),
    ("topic", pa.string()),
    ("partition", pa.int32()),
    ("committed_offset", pa.int64()),
    ("leader_epoch", pa.int32()),
    ("metadata", pa.string()),
    ("commit_timestamp", pa.int64()),
    ("expire_timestamp", pa.int64()),
    ("group_metadata_json", pa.string()),
    ("error", pa.string()),
    ("trailing_bytes", pa.int32()),
    ("value_version_above_known", pa.bool_()),
])
_COLUMNS = ARROW_SCHEMA.names
_NUMERIC = {f.name: f.type.to_pandas_dtype() for f in ARROW_SCHEMA if pa.types.is_integer(f.type)}


def _json_default(o: Any) -> Any:
    if isinstance(o, (bytes, bytearray, memoryview)):
        return bytes(o).hex()
    raise TypeError(type(o).__name__)


def _reference_row(key: Buffer | None, value: Buffer | None) -> dict[str, Any]:
    """One output row, computed with :func:`decode_record` (the oracle of the batch function)."""
    row: dict[str, Any] = dict.fromkeys(_COLUMNS)
    try:
        if key is None:
            raise DecodeError("null key", 0)
        rec = decode_record(key, value)
    except DecodeError as e:
        row["error"] = str(e)
        return row
    row.update(
        record_type=rec.record_type, value_version=rec.value_version, is_tombstone=rec.is_tombstone,
        group_id=rec.group, topic=rec.topic, partition=rec.partition, committed_offset=rec.offset,
        leader_epoch=rec.leader_epoch, metadata=rec.metadata, commit_timestamp=rec.commit_timestamp,
        expire_timestamp=rec.expire_timestamp, trailing_bytes=rec.trailing_bytes,
        value_version_above_known=rec.version_above_known,
    )
    if rec.record_type == 2 and rec.value is not None:
        row["group_metadata_json"] = json.dumps(rec.value, default=_json_default, sort_keys=True)
    return row


def decode_offsets_rows(keys, values) -> list[dict[str, Any]]:
    """Per-record reference for :func:`decode_offsets_arrow`: one dict per (key, value) pair."""
    return [_reference_row(k, v) for k, v in zip(keys, values, strict=True)]


def _binary_parts(arr: pa.Array) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(starts, ends, valid, padded data) of a (Large)BinaryArray, zero-copy where possible."""
    n = len(arr)
    if pa.types.is_null(arr.type):
        z = np.zeros(n, np.int64)
        return z, z, np.zeros(n, bool), np.zeros(16, np.uint8)
    bufs = arr.buffers()
    odt = np.int64 if pa.types.is_large_binary(arr.type) else np.int32
    offs = np.frombuffer(bufs[1], dtype=odt, count=arr.offset + n + 1)[arr.offset:].astype(np.int64)
    raw = np.frombuffer(bufs[2], dtype=np.uint8) if bufs[2] is not None else np.zeros(0, np.uint8)
    data = np.zeros(len(raw) + 16, np.uint8)  # padding: gathers at clamped positions never overrun
    data[: len(raw)] = raw
    valid = arr.is_valid().to_numpy(zero_copy_only=False) if arr.null_count else np.ones(n, bool)
    return offs[:-1], offs[1:], valid, data


_BE = {2: ">i2", 4: ">i4", 8: ">i8"}


class _Buf:
    """A padded data buffer plus unaligned big-endian int views over it (one gather per int)."""

    def __init__(self, data: np.ndarray) -> None:
        self.data = data
        self.be = {k: np.ndarray((len(data) - k + 1,), dtype=t, buffer=data, strides=(1,)) for k, t in _BE.items()}
        self.le32 = np.ndarray((len(data) - 3,), dtype="<u4", buffer=data, strides=(1,))

    def int(self, pos: np.ndarray, size: int) -> np.ndarray:
        return self.be[size][pos].astype(f"i{size}")


class _Cursor:
    """Vectorised reader: advances per-row positions while ``ok`` tracks rows still in bounds."""

    def __init__(self, buf: _Buf, pos: np.ndarray, end: np.ndarray, ok: np.ndarray) -> None:
        self.buf, self.pos, self.end, self.ok = buf, pos, end, ok

    def int(self, size: int) -> np.ndarray:
        self.ok &= self.pos + size <= self.end
        v = self.buf.int(np.where(self.ok, self.pos, 0), size)
        self.pos = self.pos + size
        return v

    def string(self) -> tuple[np.ndarray, np.ndarray]:
        n = self.int(2).astype(np.int64)
        self.ok &= n >= 0
        n = np.where(self.ok, n, 0)
        start = self.pos
        self.pos = self.pos + n
        self.ok &= self.pos <= self.end
        return start, n


def _bitmap(valid: np.ndarray) -> pa.Buffer:
    return pa.py_buffer(np.packbits(valid, bitorder="little"))


def _gather_binary(buf: _Buf, start: np.ndarray, length: np.ndarray, take: np.ndarray):
    """The byte strings ``data[start:start+length]`` of the rows in ``take`` as a binary array.

    Built as an Arrow binary-view array pointing into the data buffer (16-byte views: length,
    then the bytes inline when <= 12, else a 4-byte prefix + buffer offset), which Arrow then
    compacts; the cost is per row, not per byte of input. Also returns the rows holding a
    byte >= 0x80, whose UTF-8 the reference decoder must check.
    """
    n = len(start)
    if len(buf.data) >= 2**31:
        raise OverflowError("data buffer larger than 2 GiB")
    length = np.where(take, length, 0)
    s = np.where(take, start, 0)
    views = np.zeros((n, 4), "<u4")
    views[:, 0] = length
    short = length <= 12
    for k in range(3):
        nbytes = np.clip(length - 4 * k, 0, 4).astype(np.uint64)
        mask = ((np.uint64(1) << (nbytes * np.uint64(8))) - np.uint64(1)).astype(np.uint32)
        word = buf.le32[s + 4 * k] & mask
        views[:, 1 + k] = word if k == 0 else np.where(short, word, 0 if k == 1 else s)
    arr = pa.Array.from_buffers(pa.binary_view(), n, [_bitmap(take), pa.py_buffer(views), pa.py_buffer(buf.data)])
    arr = arr.cast(pa.binary())
    offsets = np.frombuffer(arr.buffers()[1], np.int32, count=n + 1)
    values = np.frombuffer(arr.buffers()[2], np.uint8, count=int(offsets[-1])) if arr.buffers()[2] else offsets[:0]
    high = np.flatnonzero(values >= 0x80)
    suspicious = np.unique(np.searchsorted(offsets, high, side="right") - 1) if high.size else high
    return arr, suspicious


def _prepare(arr) -> pa.Array:
    if isinstance(arr, pa.ChunkedArray):
        arr = arr.combine_chunks()
    elif not isinstance(arr, pa.Array):
        arr = pa.array(arr, type=pa.binary())
    if not (pa.types.is_binary(arr.type) or pa.types.is_large_binary(arr.type) or pa.types.is_null(arr.type)):
        raise TypeError(f"expected a binary array, got {arr.type}")
    return arr


def decode_offsets_arrow(keys: pa.Array, values: pa.Array) -> pa.RecordBatch:
    """Decode a batch of ``__consumer_offsets`` key/value pairs into :data:`ARROW_SCHEMA`.

    Offset commits (types 0/1, value v0–v3 or tombstone, ASCII strings) are read straight from
    the Arrow buffers with numpy; every other row (group metadata, KIP-848, unknown types,
    v4 and above, non-ASCII text, malformed bytes) goes through :func:`_reference_row`, so each
    row equals :func:`decode_offsets_rows`. Row data never raises: a bad row has only ``error``
    set. ``trailing_bytes`` counts the bytes after the complete key and value structs;
    ``value_version_above_known`` marks a value read with the newest layout (null for tombstones).

    Args:
        keys: ``binary`` or ``large_binary`` array (null keys become error rows).
        values: same length; null = tombstone.
    """
    keys, values = _prepare(keys), _prepare(values)
    n = len(keys)
    if len(values) != n:
        raise ValueError(f"{n} keys but {len(values)} values")
    ks, ke, kvalid, kdata = _binary_parts(keys)
    vs, ve, vvalid, vdata = _binary_parts(values)

    # key: int16 type, string group, string topic, int32 partition
    kbuf, vbuf = _Buf(kdata), _Buf(vdata)
    kc = _Cursor(kbuf, ks, ke, kvalid.copy())
    rtype = kc.int(2)
    kc.ok &= (rtype == 0) | (rtype == 1)
    g_start, g_len = kc.string()
    t_start, t_len = kc.string()
    partition = kc.int(4)
    key_end = kc.pos
    oc = kc.ok

    # value: int16 version, then the per-version layouts of OffsetCommitValue v0-v3
    tomb = ~vvalid
    vc = _Cursor(vbuf, vs, ve, oc & vvalid)
    version = vc.int(2)
    vc.ok &= (version >= 0) & (version <= 3)
    offset = vc.int(8)
    is3 = version == 3
    epoch_pos = vc.pos
    vc.pos = np.where(is3, vc.pos + 4, vc.pos)
    vc.ok &= vc.pos <= vc.end
    leader_epoch = np.where(is3, vbuf.int(np.where(vc.ok & is3, epoch_pos, 0), 4), -1).astype(np.int32)
    m_start, m_len = vc.string()
    commit = vc.int(8)
    is1 = version == 1
    exp_pos = vc.pos
    vc.ok &= ~is1 | (exp_pos + 8 <= vc.end)
    expire = np.where(is1, vbuf.int(np.where(vc.ok & is1, exp_pos, 0), 8), -1)
    value_end = np.where(is1, exp_pos + 8, exp_pos)

    fast = oc & (tomb | vc.ok)
    live = fast & ~tomb
    # bytes after the complete key / value structs: counted, as the reference does
    trailing = (ke - key_end) + np.where(live, ve - value_end, 0)
    g_arr, g_bad = _gather_binary(kbuf, g_start, g_len, fast)
    t_arr, t_bad = _gather_binary(kbuf, t_start, t_len, fast)
    m_arr, m_bad = _gather_binary(vbuf, m_start, m_len, live)
    for bad in (g_bad, t_bad, m_bad):  # non-ASCII text: let the reference check the UTF-8
        fast[bad] = False
    live &= fast
    slow = np.flatnonzero(~fast)

    cols: dict[str, Any] = {
        "record_type": (rtype, fast), "value_version": (version, live), "is_tombstone": (tomb, fast),
        "partition": (partition, fast), "committed_offset": (offset, live),
        "leader_epoch": (leader_epoch, live), "commit_timestamp": (commit, live),
        "expire_timestamp": (expire, live), "trailing_bytes": (trailing, fast),
        "value_version_above_known": (np.zeros(n, bool), live),
    }
    strings = {"group_id": g_arr, "topic": t_arr, "metadata": m_arr}
    ref_rows = []
    if slow.size:
        key_list = keys.take(pa.array(slow)).to_pylist()
        val_list = values.take(pa.array(slow)).to_pylist()
        ref_rows = [_reference_row(k, v) for k, v in zip(key_list, val_list, strict=True)]

    arrays = []
    for name in _COLUMNS:
        typ = ARROW_SCHEMA.field(name).type
        if name in cols:
            data, valid = cols[name]
            data = np.asarray(data).astype(typ.to_pandas_dtype(), copy=True)
            valid = valid.copy()
            for i, row in zip(slow, ref_rows, strict=True):
                v = row[name]
                valid[i] = v is not None
                if v is not None:
                    data[i] = v
            arrays.append(pa.array(data, type=typ, mask=~valid))
            continue
        arr = strings[name] if name in strings else pa.nulls(n, pa.binary())
        if slow.size:
            mask = np.zeros(n, bool)
            mask[slow] = True
            repl = pa.array([row[name] for row in ref_rows], type=pa.string()).cast(pa.binary())
            arr = pc.replace_with_mask(arr, pa.array(mask), repl)
        arrays.append(arr.view(pa.string()))
    return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
