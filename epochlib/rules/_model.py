"""Plain values the rules consume and produce.

Inputs are frozen, slotted dataclasses that mirror the silver table columns (CONTRIBUTING.md,
``jobs/schemas.py``); each has ``from_row(mapping)`` so a Spark/Arrow row (a dict, or anything with
``asDict()``/attributes) converts directly. Unknown keys are ignored, missing optional keys become None.
Timestamps are normalised to **epoch milliseconds (int)**: a row may carry ints (ms), floats, ``datetime``
(naive = UTC), pandas ``Timestamp`` or ``numpy.datetime64``.

The output is :class:`Finding`; :func:`finding_id` gives its deterministic id.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import KW_ONLY, dataclass, field, fields, replace
from typing import Any

from ..lineage import EpochEntry, LeaderEpochCache, as_entry

__all__ = [
    "norm_topic_ids",
    "observations_from_arrow",
    "INFO",
    "SEVERITY",
    "WARNING",
    "ERROR",
    "CRITICAL",
    "LIVE_TXN_STATES",
    "BatchHeader",
    "Commit",
    "Finding",
    "GroupState",
    "MetadataObservation",
    "QuarantineRecord",
    "ReplicaSnapshot",
    "capture_pointer",
    "finding_id",
    "offsets_pointer",
    "to_ms",
    "unit_pointer",
]

INFO, WARNING, ERROR, CRITICAL = "info", "warning", "error", "critical"
LIVE_TXN_STATES = frozenset({"none", "committed"})
#: The severity of every finding kind: the one place the rules (and the simulator's ground truth) take it
#: from. The spec gives few; the others are judgement calls (README "Judgement calls").
SEVERITY: dict[str, str] = {
    "checkpoint_unreadable": WARNING,  # L1: evidence lost, nothing proven wrong
    "lineage_not_monotonic": ERROR,  # L2
    "batch_epoch_mismatch": ERROR,  # L3
    "batch_epoch_unknown": ERROR,  # L3
    "batch_epoch_regression": CRITICAL,  # L3: a stale leader wrote into the log
    "lineage_truncated": INFO,  # L5
    "lineage_rewritten": ERROR,  # L5
    "replica_divergence_unresolved": ERROR,  # D1
    "replica_lineage_conflict": ERROR,  # D2
    "commit_beyond_epoch_end": ERROR,  # F2
    "commit_unknown_epoch": ERROR,  # F2
    "commit_epoch_regression": WARNING,  # F4
    "commit_epoch_dropped": INFO,  # F4
    "client_epoch_regression": WARNING,  # M1
    "broker_served_stale": WARNING,  # M2
    "topic_id_regression": ERROR,  # M3: a client following it addresses a deleted topic
    "possible_topic_recreation": INFO,  # M3
    "truncation": INFO,  # S1a
    "over_rewind": WARNING,  # S1a
    "operator_reset": INFO,  # S1b, S2b
    "stale_epoch_commit": WARNING,  # S1c
    "spurious_rewind_to_earliest": ERROR,  # S1d
    "spurious_rewind": ERROR,  # S1e
    "retention": INFO,  # S2a
    "spurious_skip": ERROR,  # S2b
    "checkpoint_epoch_unknown": ERROR,  # K1
    "unclean_leader_election": WARNING,  # K2
    "metadata_offset_regression": WARNING,  # M5
    "metadata_state_mixed": WARNING,  # M5: warning on KRaft (one image per broker); info on ZooKeeper-era
    "expansion_order_violation": WARNING,  # P1
}

"""Commits rules look at: non-transactional ones and transactional ones whose COMMIT marker followed."""


# --------------------------------------------------------------------------------------------- helpers


def to_ms(value: Any) -> int | None:
    """Epoch milliseconds from an int/float (already ms), a ``datetime`` (naive = UTC), a pandas
    Timestamp, a ``numpy.datetime64`` or an ISO-8601 string; None stays None (NaT too)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise TypeError("a bool is not a timestamp")
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return None if value != value else int(value)
    if isinstance(value, str):
        text = value.strip()
        if re.fullmatch(r"-?\d+", text):
            return int(text)
        value = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    if isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        delta = value - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
        return delta // _dt.timedelta(milliseconds=1)
    if type(value).__name__ == "datetime64":  # numpy, without importing it
        import numpy as np

        if np.isnat(value):
            return None
        return int(value.astype("datetime64[ms]").astype("int64"))
    if hasattr(value, "value") and type(value).__name__ in ("Timestamp", "NaTType"):  # pandas
        if type(value).__name__ == "NaTType":
            return None
        return int(value.value) // 1_000_000
    raise TypeError(f"cannot read a timestamp from {type(value).__name__}")


def _as_mapping(row: Any) -> Mapping[str, Any]:
    if isinstance(row, Mapping):
        return row
    if hasattr(row, "asDict"):
        return row.asDict(recursive=True)
    if hasattr(row, "_asdict"):
        return row._asdict()
    return {f: getattr(row, f) for f in dir(row) if not f.startswith("_")}


def _opt_int(v: Any) -> int | None:
    if v is None:
        return None
    if isinstance(v, float) and v != v:  # NaN from pandas
        return None
    return int(v)


def _opt_str(v: Any) -> str | None:
    if v is None or (isinstance(v, float) and v != v):
        return None
    return str(v)


def _int_tuple(v: Any) -> tuple[int, ...]:
    if v is None:
        return ()
    return tuple(int(x) for x in v)


#: File suffixes of text captures and dumps (line-numbered), compared case-blind.
TEXT_SUFFIXES = (".jsonl", ".ndjson", ".json", ".txt")


def capture_pointer(source: str | None, position: int | None) -> str:
    """``capture:<file> line N`` for JSONL captures, ``capture:<file> frame N`` for pcap/pcapng."""
    src = source or "?"
    unit = "line" if src.lower().endswith(TEXT_SUFFIXES) else "frame"
    return f"capture:{src} {unit} {position if position is not None else '?'}"


def unit_pointer(source: str | None, position: int | None) -> str:
    """Where a unit sits in its file, in the one explicit form of the file's kind: ``<file>@byte N`` for
    segments (binary), ``<file> line N`` for text dumps (JSONL, console and tool text), ``<file> row N``
    for Parquet dumps (the row index in the file). ``position`` is the silver row's ``position``."""
    src = source or "?"
    low = src.lower()
    pos = position if position is not None else "?"
    if low.endswith(".parquet"):
        return f"{src} row {pos}"
    if low.endswith(TEXT_SUFFIXES):
        return f"{src} line {pos}"
    return f"{src}@byte {pos}"


def offsets_pointer(source: str | None, position: int | None, log_offset: int | None) -> str:
    """``offsets:`` + :func:`unit_pointer` + `` offset <log offset>`` when the input gave one (console
    dumps print no offset unless asked to, so then the pointer ends at the line)."""
    where = f"offsets:{unit_pointer(source, position)}"
    return where if log_offset is None else f"{where} offset {log_offset}"


# ---------------------------------------------------------------------------------------------- inputs


@dataclass(frozen=True, slots=True)
class Commit:
    """One ``offset_commits`` row: a committed (or deleted) offset of (group, topic, partition)."""

    group_id: str
    topic: str
    partition: int
    committed_offset: int | None
    leader_epoch: int | None = None
    commit_ts: int | None = None
    event_ts: int | None = None
    is_tombstone: bool = False
    txn_state: str | None = "none"
    log_partition: int | None = None
    log_offset: int | None = None
    producer_id: int | None = None
    source_kind: str | None = None
    source: str | None = None
    position: int | None = None

    @classmethod
    def from_row(cls, row: Any) -> Commit:
        r = _as_mapping(row)
        return cls(
            group_id=str(r["group_id"]),
            topic=str(r["topic"]),
            partition=int(r["partition"]),
            committed_offset=_opt_int(r.get("committed_offset")),
            leader_epoch=_opt_int(r.get("leader_epoch")),
            commit_ts=to_ms(r.get("commit_ts")),
            event_ts=to_ms(r.get("event_ts")),
            is_tombstone=bool(r.get("is_tombstone") or False),
            txn_state=_opt_str(r.get("txn_state")) or "none",
            log_partition=_opt_int(r.get("log_partition")),
            log_offset=_opt_int(r.get("log_offset")),
            producer_id=_opt_int(r.get("producer_id")),
            source_kind=_opt_str(r.get("source_kind")),
            source=_opt_str(r.get("source")),
            position=_opt_int(r.get("position")),
        )

    @property
    def ts(self) -> int:
        """The commit's time (``event_ts``, else ``commit_ts``, else 0)."""
        if self.event_ts is not None:
            return self.event_ts
        return self.commit_ts if self.commit_ts is not None else 0

    @property
    def epoch(self) -> int:
        """The leader epoch with null (value < v3) read as -1 (unknown; F5)."""
        return -1 if self.leader_epoch is None or self.leader_epoch < 0 else self.leader_epoch

    @property
    def is_live(self) -> bool:
        """Counts for the rules: not aborted/open (spec §1.6)."""
        return (self.txn_state or "none") in LIVE_TXN_STATES

    def pointer(self) -> str:
        """``offsets:<file>@byte N offset <log offset>`` (segments), ``… line N`` (text), ``… row N``
        (Parquet): :func:`offsets_pointer`."""
        return offsets_pointer(self.source, self.position, self.log_offset)


@dataclass(frozen=True, slots=True)
class ReplicaSnapshot:
    """One ``epoch_lineage`` row: a replica's leader-epoch checkpoint (raw, file order) and log bounds."""

    broker: str
    snapshot_ts: int
    topic: str
    partition: int
    topic_id: str | None = None
    entries: tuple[EpochEntry, ...] = ()
    log_start_offset: int | None = None
    log_end_offset: int | None = None
    high_watermark: int | None = None
    source: str | None = None
    checkpoint_version: int | None = None
    recovery_point: int | None = None

    def __post_init__(self) -> None:
        # accept plain (epoch, start) tuples or dicts when built by hand
        object.__setattr__(self, "entries", tuple(as_entry(e) for e in self.entries))
        object.__setattr__(self, "broker", str(self.broker))

    @classmethod
    def from_row(cls, row: Any) -> ReplicaSnapshot:
        r = _as_mapping(row)
        return cls(
            broker=str(r["broker"]),
            snapshot_ts=to_ms(r["snapshot_ts"]) or 0,
            topic=str(r["topic"]),
            partition=int(r["partition"]),
            topic_id=_opt_str(r.get("topic_id")),
            entries=tuple(as_entry(e) for e in (r.get("entries") or ())),
            log_start_offset=_opt_int(r.get("log_start_offset")),
            log_end_offset=_opt_int(r.get("log_end_offset")),
            high_watermark=_opt_int(r.get("high_watermark")),
            source=_opt_str(r.get("source")),
            checkpoint_version=_opt_int(r.get("checkpoint_version")),
            recovery_point=_opt_int(r.get("recovery_point")),
        )

    def cache(self) -> LeaderEpochCache:
        """The cache as the broker loads this checkpoint (assign per line; negative lines skipped — the
        broker would refuse the file, L2 reports them)."""
        return LeaderEpochCache(e for e in self.entries if e.epoch >= 0 and e.start_offset >= 0)

    def repaired_cache(self) -> LeaderEpochCache:
        """The cache after LogLoader's repair: truncateFromEnd(LEO), truncateFromStart(log start),
        each when known (spec §4.4)."""
        return self.cache().repaired(self.log_end_offset, self.log_start_offset, keep_at_end=True)

    def line_of(self, epoch: int) -> int | None:
        """1-based checkpoint line of the raw entry for ``epoch`` (entries start on line 3)."""
        for i, e in enumerate(self.entries):
            if e.epoch == epoch:
                return i + 3
        return None

    def end_line_of(self, epoch: int) -> int | None:
        """The checkpoint line holding the end offset of ``epoch`` in the repaired lineage: the line of
        the next epoch's entry (its start is where ``epoch`` ends); None when ``epoch`` is the latest
        (it ends at the log end offset, which no checkpoint line holds)."""
        nxt = [e.epoch for e in self.repaired_cache().entries if e.epoch > epoch]
        return self.line_of(min(nxt)) if nxt else None

    def pointer(self, epoch: int | None = None) -> str:
        """``checkpoint:<file> line N`` (the entry of ``epoch``), or the file alone."""
        src = self.source or f"broker={self.broker}/{self.topic}-{self.partition}/leader-epoch-checkpoint"
        line = self.line_of(epoch) if epoch is not None else None
        return f"checkpoint:{src} line {line}" if line is not None else f"checkpoint:{src}"


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """One ``record_batches`` row: a batch header read from a replica's segment."""

    broker: str
    topic: str
    partition: int
    base_offset: int
    last_offset: int | None = None
    partition_leader_epoch: int | None = None
    magic: int = 2
    snapshot_ts: int | None = None
    is_control: bool = False
    is_transactional: bool = False
    producer_id: int | None = None
    records_count: int | None = None
    max_timestamp: int | None = None
    event_ts: int | None = None
    source: str | None = None
    position: int | None = None

    @classmethod
    def from_row(cls, row: Any) -> BatchHeader:
        r = _as_mapping(row)
        magic = _opt_int(r.get("magic"))
        return cls(
            broker=str(r["broker"]),
            topic=str(r["topic"]),
            partition=int(r["partition"]),
            base_offset=int(r["base_offset"]),
            last_offset=_opt_int(r.get("last_offset")),
            partition_leader_epoch=_opt_int(r.get("partition_leader_epoch")),
            magic=2 if magic is None else magic,
            snapshot_ts=to_ms(r.get("snapshot_ts")),
            is_control=bool(r.get("is_control") or False),
            is_transactional=bool(r.get("is_transactional") or False),
            producer_id=_opt_int(r.get("producer_id")),
            records_count=_opt_int(r.get("records_count")),
            max_timestamp=to_ms(r.get("max_timestamp")),
            event_ts=to_ms(r.get("event_ts")),
            source=_opt_str(r.get("source")),
            position=_opt_int(r.get("position")),
        )

    def pointer(self) -> str:
        """``segment:<file>@byte N offset <base offset>``."""
        return f"segment:{self.source or '?'}@byte {self.position if self.position is not None else '?'} offset {self.base_offset}"


@dataclass(frozen=True, slots=True)
class MetadataObservation:
    """One ``metadata_observations`` row: (response, topic, partition) as a client received it.

    ``metadata_token`` is an optional monotone cluster-metadata token carried by some captures (not a
    Kafka protocol field; None when absent)."""

    capture_ts: int
    client_id: str | None
    broker: str | None
    topic: str | None
    partition: int
    leader_epoch: int | None = None
    topic_id: str | None = None
    api_version: int | None = None
    correlation_id: int | None = None
    leader_id: int | None = None
    replicas: tuple[int, ...] = ()
    isr: tuple[int, ...] = ()
    topic_error: int | None = None
    partition_error: int | None = None
    metadata_token: int | None = None
    source: str | None = None
    position: int | None = None
    client_host: str | None = None

    @classmethod
    def from_row(cls, row: Any) -> MetadataObservation:
        r = _as_mapping(row)
        return cls(
            capture_ts=to_ms(r.get("capture_ts") if r.get("capture_ts") is not None else r.get("event_ts"))
            or 0,
            client_id=_opt_str(r.get("client_id")),
            broker=_opt_str(r.get("broker")),
            topic=_opt_str(r.get("topic")),
            partition=int(r["partition"]),
            leader_epoch=_opt_int(r.get("leader_epoch")),
            topic_id=_norm_topic_id(_opt_str(r.get("topic_id"))),
            api_version=_opt_int(r.get("api_version")),
            correlation_id=_opt_int(r.get("correlation_id")),
            leader_id=_opt_int(r.get("leader_id")),
            replicas=_int_tuple(r.get("replicas")),
            isr=_int_tuple(r.get("isr")),
            topic_error=_opt_int(r.get("topic_error")),
            partition_error=_opt_int(r.get("partition_error")),
            metadata_token=_opt_int(r.get("metadata_token")),
            source=_opt_str(r.get("source")),
            position=_opt_int(r.get("position")),
            client_host=_opt_str(r.get("client_host")),
        )

    @property
    def client(self) -> tuple[str | None, str | None]:
        """What M1/M3/M5 call one client: the client id and, where the capture gives it, the client's host (Java's
        default client ids, ``consumer-<group>-<n>``, repeat on every host)."""
        return (self.client_id, self.client_host)

    def client_text(self) -> str:
        """The client as a finding's sentence names it: ``id`` or ``id on host``."""
        return f"{self.client_id}" if self.client_host is None else f"{self.client_id} on {self.client_host}"

    @property
    def epoch(self) -> int:
        """The leader epoch, -1 when absent (responses below v7: not comparable)."""
        return -1 if self.leader_epoch is None or self.leader_epoch < 0 else self.leader_epoch

    def pointer(self) -> str:
        return capture_pointer(self.source, self.position)


_ZERO_UUIDS = {"AAAAAAAAAAAAAAAAAAAAAA", "00000000-0000-0000-0000-000000000000"}

_OBS_INTS = ("partition", "leader_epoch", "api_version", "correlation_id", "leader_id", "topic_error",
             "partition_error", "metadata_token", "position", "capture_ts", "event_ts")
_OBS_STRS = ("client_id", "broker", "topic", "topic_id", "source", "client_host")


def norm_topic_ids(ids: Any) -> Any:
    """:func:`_norm_topic_id` over a ``pyarrow`` string column: the all-zero Uuid and "" become null."""
    import pyarrow as pa
    import pyarrow.compute as pc

    from ..arrow_compat import null_where

    zero = pc.fill_null(pc.is_in(ids, pa.array(sorted(_ZERO_UUIDS | {""}), ids.type)), False)
    out = null_where(ids, zero)
    return out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out


def observations_from_arrow(table: Any) -> list[MetadataObservation]:
    """:meth:`MetadataObservation.from_row` over every row of a ``pyarrow`` table or batch, a column at a time
    (the same values, ~5x cheaper: the report's passes turn up to every observation into one). Columns of
    other types than the silver table's (timestamps, floats) take the row path."""
    import pyarrow as pa
    import pyarrow.compute as pc

    names = set(table.schema.names)
    n = table.num_rows

    def typed(name: str, check: Any) -> bool:
        return name not in names or check(table.schema.field(name).type)

    fast = (all(typed(c, pa.types.is_integer) for c in _OBS_INTS)
            and all(typed(c, lambda t: pa.types.is_string(t) or pa.types.is_large_string(t)) for c in _OBS_STRS)
            and all(typed(c, lambda t: pa.types.is_list(t) and pa.types.is_integer(t.value_type))
                    for c in ("replicas", "isr"))
            and "partition" in names and table.column("partition").null_count == 0)
    if not fast:
        return [MetadataObservation.from_row(r) for r in table.to_pylist()]

    def col(name: str) -> list[Any]:
        return table.column(name).to_pylist() if name in names else [None] * n

    if "capture_ts" in names and "event_ts" in names:
        cap = pc.coalesce(table.column("capture_ts"), table.column("event_ts"))
    else:
        cap = table.column("capture_ts") if "capture_ts" in names else table.column("event_ts") if "event_ts" in names \
            else pa.nulls(n, pa.int64())
    capture = pc.fill_null(cap, 0).to_pylist()
    topic_ids = norm_topic_ids(table.column("topic_id")).to_pylist() if "topic_id" in names else [None] * n
    replicas = [() if v is None else tuple(v) for v in col("replicas")]
    isr = [() if v is None else tuple(v) for v in col("isr")]
    return [
        MetadataObservation(*args)
        for args in zip(capture, col("client_id"), col("broker"), col("topic"), col("partition"), col("leader_epoch"),
                        topic_ids, col("api_version"), col("correlation_id"), col("leader_id"), replicas, isr,
                        col("topic_error"), col("partition_error"), col("metadata_token"), col("source"),
                        col("position"), col("client_host"), strict=True)
    ]


def _norm_topic_id(tid: str | None) -> str | None:
    """The all-zero Uuid (what brokers send below v10 semantics) means "no id"."""
    return None if tid is None or tid in _ZERO_UUIDS or tid == "" else tid


@dataclass(frozen=True, slots=True)
class GroupState:
    """One ``group_metadata`` row reduced to what the rules need: was the group empty, who were its
    clients. A tombstone means the group is gone (empty)."""

    group_id: str
    event_ts: int
    member_count: int | None = None
    client_ids: tuple[str, ...] = ()
    is_tombstone: bool = False
    generation: int | None = None
    protocol_type: str | None = None
    log_offset: int | None = None
    source: str | None = None
    position: int | None = None
    record_type: str | None = None
    member_ids: tuple[str, ...] | None = None
    """The ``record_type`` of the row (``group_metadata``, ``consumer_group_member_metadata``, …; None =
    a classic group record) and the member ids it names (None = it names none): what
    :func:`current_membership` folds into the group's member set."""

    @classmethod
    def from_row(cls, row: Any) -> GroupState:
        r = _as_mapping(row)
        members = r.get("members") or ()
        clients = []
        ids: list[str] = []
        for m in members:
            mm = _as_mapping(m)
            if mm.get("client_id") is not None:
                clients.append(str(mm["client_id"]))
            if mm.get("member_id") is not None:
                ids.append(str(mm["member_id"]))
        count = _opt_int(r.get("member_count"))
        if count is None and r.get("members") is not None:
            count = len(members)
        return cls(
            group_id=str(r["group_id"]),
            event_ts=to_ms(r.get("event_ts") if r.get("event_ts") is not None else r.get("state_ts")) or 0,
            member_count=count,
            client_ids=tuple(clients),
            is_tombstone=bool(r.get("is_tombstone") or False),
            generation=_opt_int(r.get("generation")),
            protocol_type=_opt_str(r.get("protocol_type")),
            log_offset=_opt_int(r.get("log_offset")),
            source=_opt_str(r.get("source")),
            position=_opt_int(r.get("position")),
            record_type=_opt_str(r.get("record_type")),
            member_ids=tuple(ids) if r.get("members") is not None else None,
        )

    @property
    def is_empty(self) -> bool:
        """No members (member_count 0) or deleted (tombstone). Unknown count is not empty."""
        return self.is_tombstone or self.member_count == 0

    def pointer(self) -> str:
        """:func:`offsets_pointer` of the record, marked ``(group metadata)``."""
        return f"{offsets_pointer(self.source, self.position, self.log_offset)} (group metadata)"


@dataclass(frozen=True, slots=True)
class QuarantineRecord:
    """A ``quarantine`` row (only the fields L1 reads)."""

    source: str
    reason: str
    source_kind: str | None = "logdirs"
    position: int | None = None
    unit: str | None = "file"

    @classmethod
    def from_row(cls, row: Any) -> QuarantineRecord:
        r = _as_mapping(row)
        return cls(
            source=str(r["source"]),
            reason=str(r.get("reason") or ""),
            source_kind=_opt_str(r.get("source_kind")),
            position=_opt_int(r.get("position")),
            unit=_opt_str(r.get("unit")),
        )


# ---------------------------------------------------------------------------------------------- output


@dataclass(frozen=True)
class Finding:
    """One finding row (DESIGN.md "Outputs"). ``numbers`` uses the gold tables' column names
    (``jobs/schemas.py``) where one exists, e.g. committed_offset, leader_epoch, expected_epoch,
    end_offset, records_affected, served_epoch, cached_epoch, staleness_ms, previous_offset,
    new_offset, records_reread, records_skipped, log_start_offset, truncation_point.

    ``severity`` comes from :data:`SEVERITY` by ``kind`` unless given: pass it only where a rule really
    decides it otherwise. Every field after ``kind`` is keyword-only."""

    rule: str
    kind: str
    _: KW_ONLY
    severity: str = ""
    event_ts: int
    topic: str | None = None
    topic_id: str | None = None
    partition: int | None = None
    group_id: str | None = None
    client_id: str | None = None
    broker: str | None = None
    numbers: dict[str, int | float | None] = field(default_factory=dict)
    evidence: tuple[str, ...] = ()
    detail: str = ""
    correlated_finding_id: str | None = None
    cause: str | None = None

    def __post_init__(self) -> None:
        if not self.severity:
            if self.kind not in SEVERITY:
                raise ValueError(f"finding kind {self.kind!r} has no severity in SEVERITY; pass severity=")
            object.__setattr__(self, "severity", SEVERITY[self.kind])

    def __hash__(self) -> int:
        return hash(finding_id(self))

    @property
    def id(self) -> str:
        return finding_id(self)

    def with_correlation(self, other_id: str, cause: str) -> Finding:
        """A copy pointing at the finding that likely caused it (its id does not change)."""
        return replace(self, correlated_finding_id=other_id, cause=cause)

    def to_row(self) -> dict[str, Any]:
        """A flat dict: ``finding_id``, the finding columns, then each number as its own key.
        Reset findings also get ``classification`` (= kind). ``event_ts`` stays epoch ms."""
        row: dict[str, Any] = {"finding_id": finding_id(self)}
        for f in fields(self):
            if f.name == "numbers":
                continue
            v = getattr(self, f.name)
            row[f.name] = list(v) if f.name == "evidence" else v
        for k, v in self.numbers.items():
            row.setdefault(k, v)
        if self.rule.startswith("S"):
            row["classification"] = self.kind
        return row


_ID_FIELDS = ("rule", "kind", "event_ts", "topic", "topic_id", "partition", "group_id", "client_id", "broker")


#: Kinds whose evidence after the first pointer is context a run finds as far back as it reads: F4 cites the commit
#: that first carried the group's highest epoch, which a run over D3 alone finds on D3 and a run over D1..D3 on D1.
#: Their id keys on the finding's own commit (the first pointer), so the same finding has one id either way.
_ID_OWN_EVIDENCE_ONLY = frozenset({"commit_epoch_regression", "commit_epoch_dropped"})

#: Numbers a finding's evidence already determines, left out of its id: F2's ``snapshot_ts`` is the time of the
#: snapshot its evidence names (added so that the K2 cause can be an election after the commit; F2 ids unchanged).
_ID_DERIVED_NUMBERS = frozenset({"snapshot_ts"})


def finding_id(f: Finding) -> str:
    """Deterministic id: sha256 (first 32 hex chars) of rule, kind, event time, subject, numbers and
    evidence in a canonical JSON form. Severity, detail and correlation are left out, so rewording a
    sentence or adding an M4 correlation does not change the id (nor, for :data:`_ID_OWN_EVIDENCE_ONLY`,
    how far back the run read)."""
    payload = {k: getattr(f, k) for k in _ID_FIELDS}
    payload["numbers"] = {k: f.numbers[k] for k in sorted(f.numbers) if k not in _ID_DERIVED_NUMBERS}
    payload["evidence"] = list(f.evidence[:1] if f.kind in _ID_OWN_EVIDENCE_ONLY else f.evidence)
    text = json.dumps(payload, sort_keys=True, separators=(",", ":"), default=str)
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:32]


def sorted_by(items: Iterable[Any], key) -> list[Any]:
    """A stable sort (ties keep their input order)."""
    return sorted(items, key=key)
