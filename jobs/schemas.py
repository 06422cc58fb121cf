"""The authoritative schemas of every table epoch-audit writes, defined once.

Each table is a tuple of :class:`Column` (name, pyarrow type, one-line doc). :func:`arrow_schema` and
:func:`spark_schema` derive the pyarrow and pyspark schemas from it, so the two can never drift.

Conventions (DESIGN.md "Outputs"):

- every table starts with ``cluster`` (string) and ``event_date`` (date, UTC) and is partitioned by them
  (:data:`PARTITION_BY`);
- timestamps are ``timestamp[us, UTC]`` (Spark ``TimestampType``, Delta ``timestamp``);
- all columns are nullable (Delta's NOT NULL invariants would make writers of both back ends stricter
  than they need to be; "required" in a doc means the producing job always fills it);
- Kafka ints keep Kafka's widths: partition/epoch/ids ``int32``, offsets/producer ids ``int64``,
  versions/error codes ``int16``; a broker node id from a log-dir path is ``int32``, a broker as captured in
  traffic or named in a finding is a string (``host:port`` or the node id as text).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import pyarrow as pa

if TYPE_CHECKING:
    from pyspark.sql.types import DataType, StructType

__all__ = [
    "FINDING_COLUMNS",
    "GOLD_TABLES",
    "OPERATIONAL_TABLES",
    "PARTITION_BY",
    "SILVER_TABLES",
    "TABLES",
    "Column",
    "arrow_schema",
    "arrow_to_spark_type",
    "describe",
    "spark_schema",
]

PARTITION_BY: tuple[str, str] = ("cluster", "event_date")


@dataclass(frozen=True, slots=True)
class Column:
    """One column: its name, its pyarrow type and what it means."""

    name: str
    type: pa.DataType
    doc: str


TS = pa.timestamp("us", tz="UTC")
STR = pa.string()
I16, I32, I64 = pa.int16(), pa.int32(), pa.int64()


def _c(name: str, type_: pa.DataType, doc: str) -> Column:
    return Column(name, type_, doc)


_PARTITION = (
    _c("cluster", STR, "name of the audited Kafka cluster (config `cluster`); partition column"),
    _c("event_date", pa.date32(), "UTC date of the row's event (its `event_ts`, or the snapshot/capture time); partition column"),
)
_SOURCE = (
    _c("source_kind", STR, "input family: offsets | logdirs | metadata | cluster_metadata"),
    _c("source", STR, "path/URI of the input file the row was decoded from"),
    _c("position", I64, "where the unit is in the file: byte position (segments), line number (text and JSONL "
                        "dumps; the line a record starts on), row index (Parquet dumps)"),
)

# ------------------------------------------------------------------------------------------------ silver

OFFSET_COMMITS = (
    *_PARTITION,
    _c("group_id", STR, "consumer group"),
    _c("topic", STR, "committed topic"),
    _c("partition", I32, "committed partition"),
    _c("committed_offset", I64, "the committed offset (null for tombstones)"),
    _c("leader_epoch", I32, "leader epoch in the commit (value v3+; -1 = unknown as on the wire; null before v3)"),
    _c("metadata", STR, "the commit's metadata string"),
    _c("commit_ts", TS, "commit timestamp from the value"),
    _c("expire_ts", TS, "expire timestamp (value v1 only), else null"),
    _c("is_tombstone", pa.bool_(), "true when the record has a null value (offset deleted)"),
    _c("key_type", I16, "coordinator key version (0/1 = offset commit)"),
    _c("value_version", I16, "offset commit value version (null for tombstones)"),
    _c("event_ts", TS, "commit time, or the record timestamp for tombstones; drives event_date"),
    _c("log_partition", I32, "partition of __consumer_offsets holding the record"),
    _c("log_offset", I64, "offset of the record in __consumer_offsets"),
    _c("record_ts", TS, "the record's own timestamp"),
    _c("batch_leader_epoch", I32, "partitionLeaderEpoch of the batch holding the record (-1/null if unknown)"),
    _c("producer_id", I64, "producer id of the batch (-1 when not transactional/idempotent)"),
    _c("txn_state", STR, "none | committed | aborted | open (rules use none and committed only)"),
    *_SOURCE,
    # last, so ALTER TABLE ADD COLUMNS (which appends) turns an older table into exactly this schema
    _c("value_version_above_known", pa.bool_(), "true when value_version is above the newest version "
       "epoch-audit knows and the value was read with the newest (flexible) layout, as Kafka's own readers "
       "do; false otherwise; null for tombstones, text dumps, or rows predating the column"),
    _c("trailing_bytes", I32, "bytes after the complete key and value structs, ignored as Kafka's readers do "
       "(0 = none); null for text dumps or rows predating the column"),
)

_ASSIGNED = pa.struct([pa.field("topic", STR), pa.field("partitions", pa.list_(I32))])
_MEMBER = pa.struct(
    [
        pa.field("member_id", STR),
        pa.field("group_instance_id", STR),
        pa.field("client_id", STR),
        pa.field("client_host", STR),
        pa.field("assigned_partitions", pa.list_(_ASSIGNED)),
    ]
)

GROUP_METADATA = (
    *_PARTITION,
    _c("group_id", STR, "group id"),
    _c("record_type", STR, "snake_case name of the coordinator record type (e.g. group_metadata)"),
    _c("value_version", I16, "value version (null for tombstones)"),
    _c("is_tombstone", pa.bool_(), "true when the record has a null value (group deleted)"),
    _c("protocol_type", STR, "e.g. consumer, connect"),
    _c("generation", I32, "group generation id"),
    _c("protocol", STR, "selected assignor protocol"),
    _c("leader", STR, "leader member id"),
    _c("state_ts", TS, "currentStateTimestamp (value v2+)"),
    _c("member_count", I32, "number of members (classic group records; null for KIP-848 records)"),
    _c("members", pa.list_(_MEMBER), "members with their decoded assignments; for a KIP-848 member record "
                                     "(consumer_group_member_metadata) the one member it names (a tombstone: the "
                                     "member that left)"),
    _c("event_ts", TS, "state timestamp, else the record timestamp; drives event_date"),
    _c("log_partition", I32, "partition of __consumer_offsets holding the record"),
    _c("log_offset", I64, "offset of the record in __consumer_offsets"),
    *_SOURCE,
    # last, so ALTER TABLE ADD COLUMNS (which appends) turns an older table into exactly this schema
    _c("value_version_above_known", pa.bool_(), "true when value_version is above the newest version "
       "epoch-audit knows and the value was read with the newest (flexible) layout, as Kafka's own readers "
       "do; false otherwise; null for tombstones, text dumps, or rows predating the column"),
    _c("trailing_bytes", I32, "bytes after the complete key and value structs, ignored as Kafka's readers do "
       "(0 = none); null for text dumps or rows predating the column"),
)

RECORD_BATCHES = (
    *_PARTITION,
    _c("broker", I32, "broker node id (from the broker=<id> path part)"),
    _c("snapshot_ts", TS, "time of the log-dir snapshot"),
    _c("topic", STR, "topic of the log"),
    _c("partition", I32, "partition of the log"),
    _c("source", STR, "segment file path"),
    _c("position", I64, "byte position of the batch in the segment"),
    _c("base_offset", I64, "first offset of the batch"),
    _c("last_offset", I64, "last offset of the batch"),
    _c("partition_leader_epoch", I32, "leader epoch stamped on the batch (v2; -1/null for v0/v1)"),
    _c("magic", pa.int8(), "record format version 0, 1 or 2"),
    _c("compression", STR, "none | gzip | snappy | lz4 | zstd"),
    _c("is_transactional", pa.bool_(), "transactional attribute bit"),
    _c("is_control", pa.bool_(), "control batch attribute bit"),
    _c("producer_id", I64, "producer id (-1 when none)"),
    _c("records_count", I32, "number of records in the batch"),
    _c("max_timestamp", TS, "max timestamp of the batch"),
    _c("size", I32, "batch size in bytes, header included"),
    _c("event_ts", TS, "max_timestamp (rule L3); drives event_date"),
)

_EPOCH_ENTRY = pa.struct([pa.field("epoch", I32), pa.field("start_offset", I64)])

EPOCH_LINEAGE = (
    *_PARTITION,
    _c("broker", I32, "broker node id"),
    _c("snapshot_ts", TS, "time of the log-dir snapshot"),
    _c("topic", STR, "topic"),
    _c("partition", I32, "partition"),
    _c("topic_id", STR, "topic id from partition.metadata (base64 text as Kafka prints it), if present"),
    _c("entries", pa.list_(_EPOCH_ENTRY), "leader-epoch-checkpoint entries in file order"),
    _c("checkpoint_version", I32, "version line of the leader-epoch-checkpoint"),
    _c("log_start_offset", I64, "from log-start-offset-checkpoint, if present"),
    _c("high_watermark", I64, "from replication-offset-checkpoint, if present"),
    _c("recovery_point", I64, "from recovery-point-offset-checkpoint, if present"),
    _c("log_end_offset", I64, "last offset + 1 of the segments beside the checkpoint, if present"),
    _c("source", STR, "path of the leader-epoch-checkpoint file"),
    _c("event_ts", TS, "snapshot time; drives event_date"),
)

METADATA_OBSERVATIONS = (
    *_PARTITION,
    _c("capture_ts", TS, "capture time of the response"),
    _c("client_id", STR, "client id from the request header"),
    _c("broker", STR, "broker that served the response: its node id (decimal) when the capture gives it, the "
       "response's own broker list lists the captured host:port, or `[inputs] broker_addresses` maps it; "
       "else the captured value (see `broker_address`)"),
    _c("api_version", I16, "Metadata API version"),
    _c("correlation_id", I32, "correlation id of the response"),
    _c("topic", STR, "topic name (null when only an id was returned)"),
    _c("topic_id", STR, "topic id (v10+), base64 text"),
    _c("partition", I32, "partition index"),
    _c("leader_id", I32, "leader broker id"),
    _c("leader_epoch", I32, "leader epoch (v7+; null before)"),
    _c("replicas", pa.list_(I32), "replica broker ids"),
    _c("isr", pa.list_(I32), "in-sync replica ids"),
    _c("offline_replicas", pa.list_(I32), "offline replica ids (v5+)"),
    _c("topic_error", I16, "topic error code"),
    _c("partition_error", I16, "partition error code"),
    _c("cluster_id", STR, "cluster id (v2+)"),
    _c("controller_id", I32, "controller id (v1+)"),
    _c("source", STR, "capture file path"),
    _c("position", I64, "frame number (pcap) or line number (JSONL)"),
    _c("event_ts", TS, "capture time; drives event_date"),
    # last, so ALTER TABLE ADD COLUMNS (which appends) turns an older table into exactly this schema
    _c("metadata_token", I64, "monotone cluster-metadata token recorded with the response (JSONL key "
       "`metadata_token`, e.g. a KRaft metadata offset; M2 compares it); null when the capture has none "
       "or the row predates the column"),
    _c("broker_address", STR, "the serving broker as captured: JSONL `broker` as written (host:port or "
       "node id), pcap peer ip:port (`[v6]:port`); null when the row predates the column"),
    _c("trailing_bytes", I32, "bytes after the complete MetadataResponse body, ignored as Java's NetworkClient "
       "and librdkafka do (0 = none); null when the row predates the column"),
    _c("client_host", STR, "the client's host as captured: pcap client IP (without the port), JSONL "
       "`client_host` as written; null when the capture has none or the row predates the column. With `client_id`, "
       "what M1/M3/M5 call one client: Java's default client ids (`consumer-<group>-1`) repeat on every host"),
)

PARTITION_HISTORY = (
    *_PARTITION,
    _c("metadata_offset", I64, "offset of the record in `__cluster_metadata-0` (snapshot rows: the snapshot's "
       "last contained offset)"),
    _c("controller_ts", TS, "the controller's append time of the record's batch (snapshot rows: the snapshot's "
       "LastContainedLogTimestamp)"),
    _c("raft_epoch", I32, "Raft epoch (partitionLeaderEpoch) of the batch: the controller quorum's term"),
    _c("topic", STR, "topic name (for topic_deleted: the name it had)"),
    _c("topic_id", STR, "topic id (base64 text as Kafka prints it)"),
    _c("partition", I32, "partition index; null for a topic-level change (topic_created / _recreated / _deleted)"),
    _c("leader", I32, "leader after the change (-1 = none)"),
    _c("leader_epoch", I32, "leader epoch after the change (bumped by every leader change)"),
    _c("partition_epoch", I32, "partition epoch after the change (bumped by every change)"),
    _c("replicas", pa.list_(I32), "replica set after the change"),
    _c("isr", pa.list_(I32), "in-sync replicas after the change"),
    _c("leader_recovery_state", pa.int8(), "0 RECOVERED, 1 RECOVERING (KIP-704: elected uncleanly, not yet recovered)"),
    _c("adding_replicas", pa.list_(I32), "replicas being added by a reassignment"),
    _c("removing_replicas", pa.list_(I32), "replicas being removed by a reassignment"),
    _c("elr", pa.list_(I32), "eligible leader replicas (KIP-966), null when the record has none"),
    _c("last_known_elr", pa.list_(I32), "last known ELR (KIP-966), null when the record has none"),
    _c("change", STR, "what changed, comma-joined: topic_created, topic_recreated, topic_deleted, snapshot, "
       "created, expanded (KIP-253), replaced, leader, isr, replicas, adding_replicas, removing_replicas, "
       "leader_recovery_state, elr, last_known_elr, directories; one topic-level row `log_end` (topic id empty) "
       "marks the retained log's last record, NoOps included: how far in time the history reaches; a replay "
       "without a snapshot has one `log_start` row (topic id empty) at the log's first record"),
    _c("unclean", pa.bool_(), "the new leader was in neither the ISR nor the ELR just before (unless the change "
       "completes a reassignment and elects from the ISR it sets), or the change set LeaderRecoveryState RECOVERING "
       "(rule K2)"),
    _c("previous_leader", I32, "leader just before the change (null at creation)"),
    _c("previous_isr", pa.list_(I32), "ISR just before the change (null at creation)"),
    _c("source", STR, "file the kept copy of the record was read from (segment, snapshot or dump text)"),
    _c("position", I64, "byte position of the record's batch in the file (line number for dump text)"),
    _c("event_ts", TS, "controller_ts (snapshot, log_start and log_end rows: at least the run's first day, so the "
       "state the log starts from reaches the reports; a snapshot's rows are stored once, under the first day of "
       "the first run that replayed from it); drives event_date"),
)

# ----------------------------------------------------------------------------------------- operational

QUARANTINE = (
    *_PARTITION[:1],
    _c("event_date", pa.date32(), "the unit's own UTC date, or when it has none the `from` date of the first run that met "
       "it (later runs of other dates leave it there)"),
    _c("run_id", STR, "run that met the unit"),
    _c("source_kind", STR, "offsets | logdirs | metadata | cluster_metadata"),
    _c("source", STR, "path of the input file"),
    _c("position", I64, "byte position of the unit (line number for text)"),
    _c("unit", STR, "batch | record | line | file | frame"),
    _c("reason", STR, "why it could not be decoded (the DecodeError message)"),
    _c("raw", pa.binary(), "the unit's first bytes, at most 4096"),
)

AUDIT_RUNS = (
    *_PARTITION[:1],
    _c("event_date", pa.date32(), "the run's range_from (the table is appended to, one row per run and source)"),
    _c("run_id", STR, "run id"),
    _c("range_from", pa.date32(), "first event_date of the run (inclusive)"),
    _c("range_to", pa.date32(), "last event_date of the run (inclusive)"),
    _c("started_at", TS, "run start"),
    _c("finished_at", TS, "run end"),
    _c("code_version", STR, "epochlib.__version__ of the code that ran"),
    _c("status", STR, "the run's status: ok (every configured source yielded data on every day) | partial "
       "(some units quarantined, or days without input) | no_input (no configured source yielded anything) | "
       "failed (see `error`); older rows: succeeded"),
    _c("source_kind", STR, "offsets | logdirs | metadata | cluster_metadata"),
    _c("unit", STR, "what was counted: batch | record | line | file | frame"),
    _c("units_read", I64, "units read = units_decoded + units_quarantined (a bad unit dated outside the range is "
       "left to the run whose range holds it: in neither)"),
    _c("units_decoded", I64, "units decoded"),
    _c("units_quarantined", I64, "units written to quarantine"),
    _c("records_decoded", I64, "silver rows produced from the decoded units"),
    _c("findings", pa.map_(STR, I64), "report table -> number of findings written by the run"),
    _c("error", STR, "why the run failed (the one-line error), null otherwise"),
    _c("source_status", STR, "this source's status: ok | partial | no_input (null on a failed run's row)"),
    _c("days_without_input", pa.list_(pa.date32()), "days of the range for which this source yielded no rows (log "
       "dirs: no snapshot taken that day)"),
    _c("units_unpaired", I64, "what is a limit of the input, not bad input (not in units_read): for captures "
       "(unit frame), requests or responses whose other half was not captured, frames cut by the capture's start, "
       "end or a gap; for segments (unit batch), files that end inside a batch, as a copy of the active segment "
       "taken while the broker wrote it does (Kafka reads the log up to there; only a partition's last segment: a "
       "rolled one cut short is a quarantined batch); for kafka-dump-log text (unit line), its \"Found N invalid "
       "bytes at the end of\" line after a folder's last dumped segment; null for other units and rows "
       "written before the column"),
    _c("input_root", STR, "this source's input root as the run was given it: what the re-check commands' $OFFSETS, "
       "$LOGDIRS, … stand for when `report` runs without the inputs; null for rows written before the column"),
)

# ------------------------------------------------------------------------------------------------- gold

FINDING_COLUMNS = (
    _c("finding_id", STR, "deterministic hash of the finding's identifying fields (stable across reruns)"),
    _c("run_id", STR, "run that produced the finding"),
    *_PARTITION,
    _c("rule", STR, "rule id, e.g. M1, F2, S1c"),
    _c("kind", STR, "stable snake_case name of the rule"),
    _c("severity", STR, "info | warning | error | critical"),
    _c("event_ts", TS, "time of the event the finding is about"),
    _c("topic", STR, "topic, if it applies"),
    _c("topic_id", STR, "topic id, if known"),
    _c("partition", I32, "partition, if it applies"),
    _c("group_id", STR, "consumer group, if it applies"),
    _c("client_id", STR, "client id, if it applies"),
    _c("broker", STR, "broker, if it applies: a node id, or (M1/M2) the capture's address when it could not "
       "be resolved to one (see `metadata_observations.broker`)"),
    _c("detail", STR, "one human sentence with the numbers"),
    _c("evidence", pa.list_(STR), "pointers to re-check it: file + byte position / log offset, checkpoint line, frame"),
    _c("correlated_finding_id", STR, "finding that likely caused this one (M4: stale metadata -> reset)"),
)

STALE_METADATA = (
    *FINDING_COLUMNS,
    _c("served_epoch", I32, "leader epoch in the stale response"),
    _c("cached_epoch", I32, "newer epoch the client had already seen"),
    _c("staleness_ms", I64, "how long the served metadata had been superseded"),
    _c("correlation_id", I32, "correlation id of the stale response"),
    # last, so ALTER TABLE ADD COLUMNS (which appends) migrates a table written before them
    _c("served_offset_start", I64, "M5: first metadata offset the response can reflect (its served interval)"),
    _c("served_offset_end", I64, "M5: end (exclusive) of the response's served interval; null = open"),
    _c("seen_offset_start", I64, "M5: start of the newest served interval the client had already been given"),
    _c("lag_offsets", I64, "M5: metadata offsets between the served state's end and the state the client had"),
    _c("lag_ms", I64, "M5: controller time between those two states"),
)

FENCING_VIOLATIONS = (
    *FINDING_COLUMNS,
    _c("committed_offset", I64, "committed offset involved (commit rules)"),
    _c("leader_epoch", I32, "epoch carried by the commit or replica"),
    _c("expected_epoch", I32, "epoch the lineage says it must carry"),
    _c("end_offset", I64, "end offset of the epoch per the lineage"),
    _c("records_affected", I64, "records beyond the valid end / in the bad range"),
    _c("base_offset", I64, "base offset of the batch (batch rules)"),
    _c("batch_epoch", I32, "partitionLeaderEpoch of the batch"),
    _c("log_end_offset", I64, "log end offset of the replica"),
    # last, so ALTER TABLE ADD COLUMNS (which appends) migrates a table written before them
    _c("metadata_offset", I64, "K1/K2/P1: offset in the metadata log of the change involved"),
    _c("previous_leader", I32, "K2: leader before the unclean election"),
    _c("new_partition", I32, "P1: the new partition consumed too early"),
    _c("lagging_partition", I32, "P1: the old partition furthest behind its bound at the expansion"),
    _c("records_pending", I64, "P1: records of the lagging partition still unconsumed (bound - committed)"),
    _c("expansion_ts", TS, "P1: time of the expansion (T0)"),
    _c("cause_finding_id", STR, "K2 finding (unclean leader election) that explains this finding (F2, L5)"),
)

SPURIOUS_OFFSET_RESETS = (
    *FINDING_COLUMNS,
    _c("previous_offset", I64, "committed offset before the move"),
    _c("new_offset", I64, "committed offset after the move"),
    _c("classification", STR, "rewind | jump (and how it was or was not explained)"),
    _c("records_reread", I64, "records consumed twice because of a rewind"),
    _c("records_skipped", I64, "records never consumed because of a jump"),
    _c("log_start_offset", I64, "log start offset at the time (retention explains jumps below it)"),
    _c("truncation_point", I64, "truncation offset from the lineage, if a truncation explains it"),
    # last, so ALTER TABLE ADD COLUMNS (which appends) migrates a table written before it
    _c("cause_finding_id", STR, "K2 finding (unclean leader election) that explains this finding (S1 truncation / "
       "over_rewind)"),
)

STALE_METADATA_RATES = (
    *_PARTITION,
    _c("dimension", STR, "broker | client"),
    _c("subject", STR, "the broker (node id, or the captured address when unresolved; as "
       "`metadata_observations.broker`) or the client id"),
    _c("responses", I64, "Metadata responses observed"),
    _c("stale_responses", I64, "responses with at least one stale partition"),
    _c("stale_rate", pa.float64(), "stale_responses / responses"),
    # last, so ALTER TABLE ADD COLUMNS (which appends) migrates a table written before them
    _c("metadata_lag_median_ms", I64, "broker rows with a KRaft metadata log: median over the responses of "
       "capture time - time of the oldest committed change the response does not reflect (0 = up to date)"),
    _c("metadata_lag_max_ms", I64, "the maximum of the same lag"),
)

#: The silver tables each source kind (``[inputs]`` key) feeds: a day "has input" from a source when one of them
#: has rows (the metadata log's rows per day are counted for the summary, but its status comes from its units:
#: :data:`jobs.runlog.JUDGED_BY_UNITS`).
SILVER_BY_SOURCE: dict[str, tuple[str, ...]] = {
    "offsets": ("offset_commits", "group_metadata"),
    "logdirs": ("epoch_lineage", "record_batches"),
    "metadata": ("metadata_observations",),
    "cluster_metadata": ("partition_history",),
}
#: The silver tables whose rows tell the days a source *covered* (``days_without_input``), where that is not every
#: table it feeds: a log-dir snapshot's segments hold record batches of earlier days (``record_batches`` dated by
#: their batch timestamps), which are no snapshot of those days; a day of log dirs is covered by the snapshots
#: taken on it (``epoch_lineage``, dated by the snapshot time). A day with batches but no snapshot read as covered
#: once, and the rules judged its commits by the next day's rounds (hundreds of false F2 errors).
COVERAGE_BY_SOURCE: dict[str, tuple[str, ...]] = {**SILVER_BY_SOURCE, "logdirs": ("epoch_lineage",)}
#: The silver table of each source dated as its input units are: a rerun keeps a day of the range that table gets
#: no row on and the source no bad unit dated on, and the source's quarantine rows of the day with it
#: (:attr:`jobs.ingest.IngestResult.kept_days`). Not the metadata log, whose replay judges the whole retained log
#: in every run.
UNIT_DATED_BY_SOURCE: dict[str, str] = {"offsets": "offset_commits", "logdirs": "epoch_lineage",
                                        "metadata": "metadata_observations"}
SILVER_TABLES: dict[str, tuple[Column, ...]] = {
    "offset_commits": OFFSET_COMMITS,
    "group_metadata": GROUP_METADATA,
    "record_batches": RECORD_BATCHES,
    "epoch_lineage": EPOCH_LINEAGE,
    "metadata_observations": METADATA_OBSERVATIONS,
    "partition_history": PARTITION_HISTORY,
}
GOLD_TABLES: dict[str, tuple[Column, ...]] = {
    "stale_metadata": STALE_METADATA,
    "fencing_violations": FENCING_VIOLATIONS,
    "spurious_offset_resets": SPURIOUS_OFFSET_RESETS,
    "stale_metadata_rates": STALE_METADATA_RATES,
}
OPERATIONAL_TABLES: dict[str, tuple[Column, ...]] = {"quarantine": QUARANTINE, "audit_runs": AUDIT_RUNS}
#: Every table by name.
TABLES: dict[str, tuple[Column, ...]] = {**SILVER_TABLES, **GOLD_TABLES, **OPERATIONAL_TABLES}


def _columns(table: str) -> tuple[Column, ...]:
    try:
        return TABLES[table]
    except KeyError:
        raise KeyError(f"unknown table {table!r}; known: {', '.join(TABLES)}") from None


def arrow_schema(table: str) -> pa.Schema:
    """The pyarrow schema of ``table`` (all fields nullable)."""
    return pa.schema([pa.field(c.name, c.type, nullable=True) for c in _columns(table)])


def describe(table: str) -> dict[str, str]:
    """Column name -> documentation, in column order."""
    return {c.name: c.doc for c in _columns(table)}


def spark_schema(table: str) -> StructType:
    """The pyspark ``StructType`` of ``table``, derived from :func:`arrow_schema`."""
    from pyspark.sql.types import StructField, StructType

    return StructType([StructField(c.name, arrow_to_spark_type(c.type), True) for c in _columns(table)])


def arrow_to_spark_type(t: pa.DataType) -> DataType:
    """Convert the pyarrow types used in these schemas to Spark types (nested types included)."""
    from pyspark.sql import types as T

    simple = {
        pa.string(): T.StringType(),
        pa.large_string(): T.StringType(),
        pa.binary(): T.BinaryType(),
        pa.large_binary(): T.BinaryType(),
        pa.bool_(): T.BooleanType(),
        pa.int8(): T.ByteType(),
        pa.int16(): T.ShortType(),
        pa.int32(): T.IntegerType(),
        pa.int64(): T.LongType(),
        pa.float32(): T.FloatType(),
        pa.float64(): T.DoubleType(),
        pa.date32(): T.DateType(),
    }
    if t in simple:
        return simple[t]
    if pa.types.is_timestamp(t):
        return T.TimestampType() if t.tz is not None else T.TimestampNTZType()
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return T.ArrayType(arrow_to_spark_type(t.value_type), True)
    if pa.types.is_map(t):
        return T.MapType(arrow_to_spark_type(t.key_type), arrow_to_spark_type(t.item_type), True)
    if pa.types.is_struct(t):
        return T.StructType([T.StructField(f.name, arrow_to_spark_type(f.type), True) for f in t])
    raise TypeError(f"no Spark type for arrow type {t}")


_INTROS = {
    "offset_commits": "Every decoded `__consumer_offsets` commit record (and tombstone), with where it came from.",
    "group_metadata": "Classic and KIP-848 group records: state, generation and members with client ids.",
    "record_batches": "Batch headers of the segments found in log-dir snapshots (for rule L3).",
    "epoch_lineage": "One row per replica snapshot: its leader-epoch checkpoint and log bounds.",
    "metadata_observations": "One row per (captured MetadataResponse, topic, partition).",
    "partition_history": "The replayed KRaft metadata log: one row per topic or partition change (K1, K2, M2, M3, M5, P1). "
                         "A run writes its range's rows, and the changes of earlier days no run has stored yet (a "
                         "`--reports-only` run reads the whole history from here).",
    "stale_metadata": "Report: clients handed metadata older than what they had (M1-M3).",
    "fencing_violations": "Report: commits, batches and replicas whose epochs contradict the lineage (L, D, F).",
    "spurious_offset_resets": "Report: rewinds and skips of committed offsets and how each was explained (S1, S2, M4).",
    "stale_metadata_rates": "Per day, per broker and per client: responses, stale responses and the stale rate.",
    "quarantine": "Every input unit that could not be decoded, with a bounded slice of its bytes.",
    "audit_runs": "One row per run and (source kind, unit): counts read / decoded / quarantined, findings.",
}


def _type_text(t: pa.DataType) -> str:
    if pa.types.is_list(t):
        return f"array<{_type_text(t.value_type)}>"
    if pa.types.is_struct(t):
        return "struct<" + ", ".join(f"{f.name}: {_type_text(f.type)}" for f in t) + ">"
    if pa.types.is_map(t):
        return f"map<{_type_text(t.key_type)}, {_type_text(t.item_type)}>"
    if pa.types.is_timestamp(t):
        return "timestamp (UTC)"
    return {"int8": "byte", "int16": "short", "int32": "int", "int64": "long", "bool": "boolean",
            "date32[day]": "date"}.get(str(t), str(t))


def tables_markdown() -> str:
    """Every table and column as Markdown (docs/TABLES.md is this text; a test keeps them equal)."""
    out = ["# Tables written by epoch-audit", "",
           "Generated from `jobs/schemas.py` (`python -m jobs.schemas > docs/TABLES.md`). Every table is a",
           "Delta table at `<output root>/<table>` (or `<catalog>.<schema>.<table>`), partitioned by "
           "`cluster` and `event_date`.", ""]
    groups = (("Silver (decoded evidence)", SILVER_TABLES), ("Gold (reports)", GOLD_TABLES),
              ("Operational", OPERATIONAL_TABLES))
    for title, tables in groups:
        out += [f"## {title}", ""]
        for name, cols in tables.items():
            out += [f"### `{name}`", "", _INTROS.get(name, ""), "", "| column | type | meaning |", "| --- | --- | --- |"]
            out += [f"| `{c.name}` | {_type_text(c.type)} | {c.doc.replace('|', '/')} |" for c in cols]
            out.append("")
    return "\n".join(out)


if __name__ == "__main__":  # pragma: no cover
    print(tables_markdown())
