"""Schema tables of every KRaft metadata record type and control record (kraft-metadata.md §2.3, §2.4).

Data only, for the one interpreter in :mod:`epochlib._schema`: ``RECORD_SPECS[api_key]`` is the
:class:`~epochlib._schema.MessageSpec` of the record value that follows the ApiMessageAndVersion
frame; ``CONTROL_SPECS[control_type]`` the KRaft control values (types 2–6, no frame, first field
an int16 ``Version``). Every metadata record is flexible from version 0. Field names follow
Kafka's JSON schemas (``metadata/src/main/resources/common/metadata/*.json``), written from the
spec; decoded dicts use their snake_case.

Retired or unused keys (6 AccessControlRecord, 13, 16 RemoveFeatureLevelRecord) are absent on
purpose: a record with such a key is decoded as an "unknown" record, never an error.
"""

from __future__ import annotations

from .._schema import F, M, MessageSpec

__all__ = ["CONTROL_NAMES", "CONTROL_SPECS", "RECORD_NAMES", "RECORD_SPECS", "enum_name"]


def _v(name: str, valid: str, *fields) -> MessageSpec:
    return M(name, valid, "0+", *fields)


_ENDPOINT = (F("Name", "string"), F("Host", "string"), F("Port", "uint16"), F("SecurityProtocol", "int16"))
_FEATURE = (F("Name", "string"), F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16"))
_NULL_I32S = {"nullable": "0+", "default": None}

RECORD_SPECS: dict[int, MessageSpec] = {
    0: _v("RegisterBrokerRecord", "0-3",
          F("BrokerId", "int32"),
          F("IsMigratingZkBroker", "bool", "2+", default=False),
          F("IncarnationId", "uuid"),
          F("BrokerEpoch", "int64"),
          F("EndPoints", "[]struct", fields=_ENDPOINT),
          F("Features", "[]struct", fields=_FEATURE),
          F("Rack", "string", nullable="0+", default=None),
          F("Fenced", "bool", default=True),
          F("InControlledShutdown", "bool", "1+", default=False),
          F("LogDirs", "[]uuid", "3+", tag=0, tagged="3+")),
    1: _v("UnregisterBrokerRecord", "0", F("BrokerId", "int32"), F("BrokerEpoch", "int64")),
    2: _v("TopicRecord", "0", F("Name", "string"), F("TopicId", "uuid")),
    3: _v("PartitionRecord", "0-2",
          F("PartitionId", "int32", default=-1),
          F("TopicId", "uuid"),
          F("Replicas", "[]int32"),
          F("Isr", "[]int32"),
          F("RemovingReplicas", "[]int32"),
          F("AddingReplicas", "[]int32"),
          F("Leader", "int32", default=-1),
          F("LeaderRecoveryState", "int8", tag=0, tagged="0+", default=0),
          F("LeaderEpoch", "int32", default=-1),
          F("PartitionEpoch", "int32", default=-1),
          F("Directories", "[]uuid", "1+"),
          F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=1, tagged="2+", default=None),
          F("LastKnownElr", "[]int32", "2+", nullable="2+", tag=2, tagged="2+", default=None)),
    4: _v("ConfigRecord", "0",
          F("ResourceType", "int8"), F("ResourceName", "string"), F("Name", "string"),
          F("Value", "string", nullable="0+", default=None)),
    5: _v("PartitionChangeRecord", "0-2",
          F("PartitionId", "int32", default=-1),
          F("TopicId", "uuid"),
          F("Isr", "[]int32", tag=0, tagged="0+", **_NULL_I32S),
          F("Leader", "int32", tag=1, tagged="0+", default=-2),
          F("Replicas", "[]int32", tag=2, tagged="0+", **_NULL_I32S),
          F("RemovingReplicas", "[]int32", tag=3, tagged="0+", **_NULL_I32S),
          F("AddingReplicas", "[]int32", tag=4, tagged="0+", **_NULL_I32S),
          F("LeaderRecoveryState", "int8", tag=5, tagged="0+", default=-1),
          F("Directories", "[]uuid", "1+", nullable="1+", tag=8, tagged="1+", default=None),
          F("EligibleLeaderReplicas", "[]int32", "2+", nullable="2+", tag=6, tagged="2+", default=None),
          F("LastKnownElr", "[]int32", "2+", nullable="2+", tag=7, tagged="2+", default=None)),
    7: _v("FenceBrokerRecord", "0", F("Id", "int32"), F("Epoch", "int64")),
    8: _v("UnfenceBrokerRecord", "0", F("Id", "int32"), F("Epoch", "int64")),
    9: _v("RemoveTopicRecord", "0", F("TopicId", "uuid")),
    10: _v("DelegationTokenRecord", "0",
           F("Owner", "string"), F("Requester", "string"), F("Renewers", "[]string"),
           F("IssueTimestamp", "int64"), F("MaxTimestamp", "int64"), F("ExpirationTimestamp", "int64"),
           F("TokenId", "string")),
    11: _v("UserScramCredentialRecord", "0",
           F("Name", "string"), F("Mechanism", "int8"), F("Salt", "bytes"), F("StoredKey", "bytes"),
           F("ServerKey", "bytes"), F("Iterations", "int32")),
    12: _v("FeatureLevelRecord", "0", F("Name", "string"), F("FeatureLevel", "int16")),
    14: _v("ClientQuotaRecord", "0",
           F("Entity", "[]struct", fields=(
               F("EntityType", "string"), F("EntityName", "string", nullable="0+", default=None))),
           F("Key", "string"), F("Value", "float64"), F("Remove", "bool")),
    15: _v("ProducerIdsRecord", "0",
           F("BrokerId", "int32"), F("BrokerEpoch", "int64", default=-1), F("NextProducerId", "int64")),
    17: _v("BrokerRegistrationChangeRecord", "0-2",
           F("BrokerId", "int32"),
           F("BrokerEpoch", "int64"),
           F("Fenced", "int8", tag=0, tagged="0+", default=0),
           F("InControlledShutdown", "int8", "1+", tag=1, tagged="1+", default=0),
           F("LogDirs", "[]uuid", "2+", tag=2, tagged="2+")),
    18: _v("AccessControlEntryRecord", "0",
           F("Id", "uuid"), F("ResourceType", "int8"), F("ResourceName", "string"), F("PatternType", "int8"),
           F("Principal", "string"), F("Host", "string"), F("Operation", "int8"), F("PermissionType", "int8")),
    19: _v("RemoveAccessControlEntryRecord", "0", F("Id", "uuid")),
    20: _v("NoOpRecord", "0"),
    21: _v("ZkMigrationStateRecord", "0", F("ZkMigrationState", "int8")),
    22: _v("RemoveUserScramCredentialRecord", "0", F("Name", "string"), F("Mechanism", "int8")),
    23: _v("BeginTransactionRecord", "0", F("Name", "string", nullable="0+", tag=0, tagged="0+", default=None)),
    24: _v("EndTransactionRecord", "0"),
    25: _v("AbortTransactionRecord", "0", F("Reason", "string", nullable="0+", tag=0, tagged="0+", default=None)),
    26: _v("RemoveDelegationTokenRecord", "0", F("TokenId", "string")),
    27: _v("RegisterControllerRecord", "0",
           F("ControllerId", "int32"), F("IncarnationId", "uuid"), F("ZkMigrationReady", "bool"),
           F("EndPoints", "[]struct", fields=_ENDPOINT), F("Features", "[]struct", fields=_FEATURE)),
    28: _v("ClearElrRecord", "0", F("TopicName", "string")),
    29: _v("ClusterIdRecord", "0", F("ClusterId", "string")),
}

#: api key -> record name (``MessageSpec.name``) for every key with a schema.
RECORD_NAMES: dict[int, str] = {k: s.name for k, s in RECORD_SPECS.items()}

# KRaft control values (§2.4): flexible v0; the leading Version field is the message's own version.
CONTROL_SPECS: dict[int, MessageSpec] = {
    2: _v("LeaderChangeMessage", "0",
          F("Version", "int16", key="control_version"), F("LeaderId", "int32"),
          F("Voters", "[]struct", fields=(F("VoterId", "int32"),)),
          F("GrantingVoters", "[]struct", fields=(F("VoterId", "int32"),))),
    3: _v("SnapshotHeaderRecord", "0",
          F("Version", "int16", key="control_version"), F("LastContainedLogTimestamp", "int64")),
    4: _v("SnapshotFooterRecord", "0", F("Version", "int16", key="control_version")),
    5: _v("KRaftVersionRecord", "0",
          F("Version", "int16", key="control_version"), F("KRaftVersion", "int16")),
    6: _v("VotersRecord", "0",
          F("Version", "int16", key="control_version"),
          F("Voters", "[]struct", fields=(
              F("VoterId", "int32"), F("VoterDirectoryId", "uuid"),
              F("Endpoints", "[]struct", fields=(F("Name", "string"), F("Host", "string"), F("Port", "uint16"))),
              F("KRaftVersionFeature", "struct", fields=(
                  F("MinSupportedVersion", "int16"), F("MaxSupportedVersion", "int16"))),
          ))),
}
CONTROL_NAMES: dict[int, str] = {k: s.name for k, s in CONTROL_SPECS.items()}


def enum_name(record_name: str) -> str:
    """``MetadataRecordType`` name used by kafka-dump-log: ``"PartitionChangeRecord"`` -> ``"PARTITION_CHANGE_RECORD"``
    (``ZkMigrationStateRecord`` keeps Kafka's ``ZK_MIGRATION_STATE_RECORD``)."""
    out = []
    for i, ch in enumerate(record_name):
        if ch.isupper() and i and (not record_name[i - 1].isupper()
                                   or (i + 1 < len(record_name) and record_name[i + 1].islower())):
            out.append("_")
        out.append(ch.upper())
    return "".join(out)
