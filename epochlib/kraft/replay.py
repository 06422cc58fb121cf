"""Replay of the KRaft metadata log into per-partition history (kraft-metadata.md §3).

Pure and incremental: feed :class:`~epochlib.kraft.codec.MetadataEntry` objects in offset order
(from :func:`~epochlib.kraft.codec.iter_metadata_log`, a snapshot, or
:func:`~epochlib.kraft.dumptext.iter_dump_entries`), get :class:`HistoryRow` rows — the
``partition_history`` shape: one row per topic change (``partition`` None) or partition change.

State machine (§3.1): TopicRecord names an id; PartitionRecord *sets* the whole state of
(topic id, partition); PartitionChangeRecord merges (non-null lists replace, ``Leader`` ≠ -2 sets
the leader and bumps the leader epoch, ``LeaderRecoveryState`` ≠ -1 sets it, every change bumps
the partition epoch); RemoveTopicRecord drops the topic and its partitions. Records between
BeginTransactionRecord and EndTransactionRecord are applied at the End (discarded on Abort, §2.5).
ClearElrRecord (a topic's, or every topic's for an empty name) clears ELR and LastKnownElr where set, as a
change setting both to [] (a partition epoch each, ``change`` ``elr,last_known_elr``).

``change`` of a row is a comma-joined list of: ``topic_created``, ``topic_recreated`` (a name
that belonged to a deleted topic id, KAFKA-12257), ``topic_deleted``, ``snapshot`` (state
loaded from a snapshot), ``created``, ``expanded`` (PartitionRecord for a topic created in an
earlier batch/transaction, KIP-253), ``replaced`` (PartitionRecord over an existing partition),
and for PartitionChangeRecords the fields present: ``leader`` (the leader epoch was bumped),
``isr``, ``replicas``, ``adding_replicas``, ``removing_replicas``, ``leader_recovery_state``,
``elr``, ``last_known_elr``, ``directories``. ``unclean`` (§3.3): the record sets a leader ≥ 0
that was neither in the ISR nor in the ELR just before (unless the record completes a reassignment and the
leader is in the ISR it sets: Kafka elected it from that ISR), or sets LeaderRecoveryState RECOVERING.

Problems (a change for an unknown partition, offsets going back within a source, transaction
inconsistencies, a gap between snapshot and log, undecodable records) are kept as
:class:`ReplayIssue`, never raised. :func:`merge_copies` merges copies of the log from several
nodes by metadata offset as Raft does: from the most up-to-date copy down, a copy whose Raft epochs diverge
from a more up-to-date one's holds an uncommitted tail from there (:class:`Superseded`, left out); identical
records are one; records that differ in one epoch are :class:`Conflict` rows (both sources) and the first
source's record is kept.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from ..records import IncompleteTail
from .codec import MetadataEntry, MetadataError
from .snapshot import Snapshot

__all__ = [
    "Conflict",
    "HistoryRow",
    "MergeResult",
    "PartitionState",
    "ReplayIssue",
    "ReplayResult",
    "Replayer",
    "Superseded",
    "compare_images",
    "merge_copies",
    "replay",
]

TOPIC, PARTITION, CONFIG, PARTITION_CHANGE, REMOVE_TOPIC, CLEAR_ELR = 2, 3, 4, 5, 9, 28
BEGIN_TXN, END_TXN, ABORT_TXN = 23, 24, 25
RECOVERING = 1
_Ints = tuple[int, ...]


def _t(v) -> _Ints | None:
    return None if v is None else tuple(v)


@dataclass(frozen=True, slots=True)
class PartitionState:
    """The image of one partition (what a PartitionRecord in a snapshot holds)."""

    topic_id: str
    partition: int
    replicas: _Ints
    isr: _Ints
    removing_replicas: _Ints
    adding_replicas: _Ints
    leader: int
    leader_recovery_state: int
    leader_epoch: int
    partition_epoch: int
    directories: _Ints | tuple[str, ...] = ()
    elr: _Ints | None = None
    last_known_elr: _Ints | None = None

    @classmethod
    def from_record(cls, d: Mapping[str, Any]) -> PartitionState:
        return cls(d["topic_id"], d["partition_id"], tuple(d["replicas"]), tuple(d["isr"]),
                   tuple(d["removing_replicas"]), tuple(d["adding_replicas"]), d["leader"],
                   d["leader_recovery_state"], d["leader_epoch"], d["partition_epoch"],
                   tuple(d["directories"]), _t(d["eligible_leader_replicas"]), _t(d["last_known_elr"]))


@dataclass(frozen=True, slots=True)
class HistoryRow:
    """One row of ``partition_history`` (``partition`` None for a topic-level change).

    ``controller_ts`` is the batch append time (snapshot rows: LastContainedLogTimestamp);
    ``metadata_offset`` the record's offset (snapshot rows: end offset − 1); ``previous_leader``
    / ``previous_isr`` the state just before (None at creation); ``source``/``position`` where
    the record was read (file and batch byte position, or dump line).
    """

    metadata_offset: int
    controller_ts: int
    raft_epoch: int
    topic: str | None
    topic_id: str
    partition: int | None
    leader: int | None
    leader_epoch: int | None
    partition_epoch: int | None
    replicas: _Ints | None
    isr: _Ints | None
    leader_recovery_state: int | None
    adding_replicas: _Ints | None
    removing_replicas: _Ints | None
    elr: _Ints | None
    last_known_elr: _Ints | None
    change: str
    unclean: bool
    previous_leader: int | None
    previous_isr: _Ints | None
    source: str
    position: int


@dataclass(frozen=True, slots=True)
class ReplayIssue:
    """Something the replay could not apply (for quarantine/reporting)."""

    offset: int | None
    reason: str
    source: str = ""
    position: int = -1


@dataclass(frozen=True, slots=True)
class Conflict:
    """Two copies disagree at one metadata offset (kept: ``first``; quarantine both)."""

    offset: int
    first_source: str
    first: MetadataEntry
    other_source: str
    other: MetadataEntry


@dataclass
class ReplayResult:
    """Rows, final image, and what could not be applied."""

    rows: list[HistoryRow]
    partitions: dict[tuple[str, int], PartitionState]
    topics: dict[str, str]
    issues: list[ReplayIssue]
    raft_epochs: dict[int, int]
    broker_epochs: dict[int, list[int]]
    last_offset: int | None
    conflicts: list[Conflict] = field(default_factory=list)

    def history(self, topic_id: str, partition: int) -> list[HistoryRow]:
        """The rows of one partition, in offset order."""
        return [r for r in self.rows if r.topic_id == topic_id and r.partition == partition]


class Replayer:
    """Incremental replay; :func:`replay` is the one-call form."""

    def __init__(self) -> None:
        self.rows: list[HistoryRow] = []
        self.partitions: dict[tuple[str, int], PartitionState] = {}
        self.topics: dict[str, str] = {}
        self.issues: list[ReplayIssue] = []
        self.raft_epochs: dict[int, int] = {}
        self.broker_epochs: dict[int, list[int]] = {}
        self.last_offset: int | None = None
        self._deleted_names: set[str] = set()
        self._topic_unit: dict[str, int] = {}
        self._unit = 0
        self._unit_key: tuple | None = None
        self._txn: list[tuple[MetadataEntry, str]] | None = None
        self._txn_unit = 0
        self._snapshot_end: int | None = None

    # -- input
    def load_snapshot(self, snap: Snapshot, source: str = "") -> None:
        """Start from a snapshot's image: its rows have change ``snapshot``."""
        offset = -1 if snap.end_offset is None else snap.end_offset - 1
        for err in snap.errors:
            self.issues.append(ReplayIssue(None, f"snapshot: {err.reason}", source, err.position))
        for e in snap.records:
            e2 = replace(e, offset=offset, timestamp=snap.last_contained_timestamp,
                         raft_epoch=snap.epoch if snap.epoch is not None else e.raft_epoch)
            self._apply(e2, source, self._unit, from_snapshot=True)
        if snap.end_offset is not None:
            self.last_offset = snap.end_offset - 1
            self._snapshot_end = snap.end_offset

    def restart(self, snap: Snapshot, source: str = "") -> None:
        """Start again from a later snapshot's image after a hole in the log, as a Raft follower whose leader no
        longer holds the offsets it needs does (FetchSnapshot): the state before is dropped (what changed in the hole
        is unknown), the rows and issues so far are kept, and the snapshot's rows have change ``snapshot``. A
        transaction open at the hole is never applied (its End is in the hole)."""
        if self._txn is not None:
            self.issues.append(ReplayIssue(self.last_offset, f"transaction still open at a hole in the log: "
                                           f"{len(self._txn)} record(s) not applied"))
            self._txn = None
        self.partitions, self.topics, self._topic_unit = {}, {}, {}
        self._unit += 1
        self._unit_key = None
        self.last_offset = self._snapshot_end = None
        self.load_snapshot(snap, source)

    def feed(self, item: MetadataEntry | MetadataError, source: str = "") -> None:
        """Apply one log entry (errors become issues; offsets must increase; an incomplete final entry, the end of
        a copy's log, is nothing)."""
        if isinstance(item, IncompleteTail):
            return
        if isinstance(item, MetadataError):
            self.issues.append(ReplayIssue(item.offset, f"undecodable {item.unit}: {item.reason}", source,
                                           item.position))
            return
        e = item
        if self._snapshot_end is not None and e.offset < self._snapshot_end:
            return  # already in the snapshot's image
        if self.last_offset is not None and e.offset <= self.last_offset:
            self.issues.append(ReplayIssue(e.offset, f"offset {e.offset} not after {self.last_offset}: skipped",
                                           source, e.position))
            return
        self.last_offset = e.offset
        key = (source, e.position)
        if key != self._unit_key:
            self._unit_key = key
            self._unit += 1
        if e.control is not None:
            if e.control.control_type == 2:  # LeaderChange: a new Raft epoch starts here
                self.raft_epochs.setdefault(e.raft_epoch, e.offset)
            return
        rec = e.record
        if rec is None or rec.data is None:
            if rec is not None and rec.api_key in (TOPIC, PARTITION, PARTITION_CHANGE, REMOVE_TOPIC):
                self.issues.append(ReplayIssue(e.offset, f"{rec.note}: partition state may be incomplete",
                                               source, e.position))
            return
        k = rec.api_key
        if k == BEGIN_TXN:
            if self._txn is not None:
                self.issues.append(ReplayIssue(e.offset, "BeginTransaction inside an open transaction", source,
                                               e.position))
                return
            self._txn, self._txn_unit = [], self._unit
            return
        if k in (END_TXN, ABORT_TXN):
            if self._txn is None:
                self.issues.append(ReplayIssue(e.offset, f"{rec.name} without BeginTransaction", source, e.position))
                return
            buffered, self._txn = self._txn, None
            if k == END_TXN:
                for be, bsrc in buffered:
                    self._apply(be, bsrc, self._txn_unit)
            return
        if self._txn is not None:
            self._txn.append((e, source))
            return
        self._apply(e, source, self._unit)

    def finish(self) -> ReplayResult:
        if self._txn is not None:
            self.issues.append(ReplayIssue(self.last_offset, f"transaction still open at the end: "
                                           f"{len(self._txn)} record(s) not applied"))
            self._txn = None
        return ReplayResult(self.rows, self.partitions, self.topics, self.issues, self.raft_epochs,
                            self.broker_epochs, self.last_offset)

    # -- state machine
    def _apply(self, e: MetadataEntry, source: str, unit: int, from_snapshot: bool = False) -> None:
        rec = e.record
        d = rec.data
        k = rec.api_key
        if k == TOPIC:
            tid, name = d["topic_id"], d["name"]
            change = "snapshot" if from_snapshot else (
                "topic_recreated" if name in self._deleted_names else "topic_created")
            self.topics[tid] = name
            self._topic_unit[tid] = -1 if from_snapshot else unit
            self._row(e, source, tid, None, None, change)
        elif k == REMOVE_TOPIC:
            tid = d["topic_id"]
            name = self.topics.pop(tid, None)
            if name is None:
                self.issues.append(ReplayIssue(e.offset, f"RemoveTopicRecord for unknown topic id {tid}", source,
                                               e.position))
            else:
                self._deleted_names.add(name)
            for key in [key for key in self.partitions if key[0] == tid]:
                del self.partitions[key]
            self._row(e, source, tid, None, None, "topic_deleted", topic=name)
        elif k == PARTITION:
            st = PartitionState.from_record(d)
            key = (st.topic_id, st.partition)
            prev = self.partitions.get(key)
            if st.topic_id not in self.topics:
                self.issues.append(ReplayIssue(e.offset, f"PartitionRecord for unknown topic id {st.topic_id}",
                                               source, e.position))
            if from_snapshot:
                change = "snapshot"
            elif prev is not None:
                change = "replaced"
            elif self._topic_unit.get(st.topic_id, unit) != unit:
                change = "expanded"
            else:
                change = "created"
            self.partitions[key] = st
            self._row(e, source, st.topic_id, st, prev, change)
        elif k == PARTITION_CHANGE:
            key = (d["topic_id"], d["partition_id"])
            prev = self.partitions.get(key)
            if prev is None:
                self.issues.append(ReplayIssue(e.offset, f"PartitionChangeRecord for unknown partition "
                                               f"{key[0]}-{key[1]}: skipped", source, e.position))
                return
            st, change, unclean = _merge(prev, d)
            self.partitions[key] = st
            self._row(e, source, key[0], st, prev, change, unclean)
        elif k == CLEAR_ELR:  # min.insync.replicas changed: ELR and LastKnownElr cleared (TopicsDelta.replay)
            name = d["topic_name"]
            tids = {tid for tid, n in self.topics.items() if not name or n == name}
            if name and not tids:
                self.issues.append(ReplayIssue(e.offset, f"ClearElrRecord for unknown topic {name!r}: skipped", source,
                                               e.position))
            for key in sorted(k2 for k2 in self.partitions if k2[0] in tids):
                prev = self.partitions[key]
                if prev.elr or prev.last_known_elr:  # merged as a change setting both to []: a partition epoch
                    st = replace(prev, elr=(), last_known_elr=(), partition_epoch=prev.partition_epoch + 1)
                    self.partitions[key] = st
                    self._row(e, source, key[0], st, prev, "elr,last_known_elr")
        elif k == 0:  # RegisterBrokerRecord: the broker epoch is its offset
            self.broker_epochs.setdefault(d["broker_id"], []).append(d["broker_epoch"])

    def _row(self, e: MetadataEntry, source: str, tid: str, st: PartitionState | None,
             prev: PartitionState | None, change: str, unclean: bool = False, topic: str | None = None) -> None:
        name = topic if topic is not None else self.topics.get(tid)
        if st is None:
            self.rows.append(HistoryRow(e.offset, e.timestamp, e.raft_epoch, name, tid, None, None, None, None,
                                        None, None, None, None, None, None, None, change, False, None, None,
                                        source, e.position))
            return
        self.rows.append(HistoryRow(
            e.offset, e.timestamp, e.raft_epoch, name, tid, st.partition, st.leader, st.leader_epoch,
            st.partition_epoch, st.replicas, st.isr, st.leader_recovery_state, st.adding_replicas,
            st.removing_replicas, st.elr, st.last_known_elr, change, unclean,
            None if prev is None else prev.leader, None if prev is None else prev.isr, source, e.position))


_CHANGE_LISTS = (("isr", "isr"), ("replicas", "replicas"), ("adding_replicas", "adding_replicas"),
                 ("removing_replicas", "removing_replicas"), ("eligible_leader_replicas", "elr"),
                 ("last_known_elr", "last_known_elr"), ("directories", "directories"))


def _completes_reassignment(prev: PartitionState, d: Mapping[str, Any], leader: int) -> bool:
    """Does the record complete a reassignment (adding or removing replicas before it, neither after, the
    replicas now the target and all in the ISR it sets), electing a leader from that ISR? Kafka completes one
    in the record that brings the last target replica into the ISR (``PartitionChangeBuilder``:
    ``completeReassignmentIfNeeded`` before ``tryElection``, which elects from that new ISR): when the old
    leader is being removed, the new leader (often a replica just added) was not in the ISR before the record,
    yet the election is clean — every decommissioning of a leader's broker looked like an unclean one."""
    if not (prev.adding_replicas or prev.removing_replicas) or leader not in (d["isr"] or ()):
        return False
    # what remains of the reassignment after the record: a list the record leaves out stays as it was
    left = [prev_list if d[key] is None else d[key] for key, prev_list in (
        ("adding_replicas", prev.adding_replicas), ("removing_replicas", prev.removing_replicas))]
    if any(left):
        return False
    # completed, not cancelled: the replicas become the target (the old ones less the removing ones), all of them
    # in the new ISR (``maybeCompleteReassignment``). A cancellation whose ISR held only adding replicas reverts
    # to ISR [first original replica], which Kafka itself calls unclean (``PartitionReassignmentRevert``)
    target = {r for r in prev.replicas if r not in set(prev.removing_replicas or ())}
    replicas = set(prev.replicas if d["replicas"] is None else d["replicas"])
    return replicas == target and target <= set(d["isr"] or ())


def _merge(prev: PartitionState, d: Mapping[str, Any]) -> tuple[PartitionState, str, bool]:
    upd: dict[str, Any] = {"partition_epoch": prev.partition_epoch + 1}
    change: list[str] = []
    unclean = False
    leader = d["leader"]
    if leader != -2:
        upd["leader"] = leader
        upd["leader_epoch"] = prev.leader_epoch + 1
        change.append("leader")
        if leader >= 0 and leader not in prev.isr and leader not in (prev.elr or ()) and not _completes_reassignment(
                prev, d, leader):
            unclean = True
    for rkey, skey in _CHANGE_LISTS:
        v = d[rkey]
        if v is not None:
            upd[skey] = tuple(v)
            change.append(rkey if rkey != "eligible_leader_replicas" else "elr")
    lrs = d["leader_recovery_state"]
    if lrs != -1:
        upd["leader_recovery_state"] = lrs
        change.append("leader_recovery_state")
        if lrs == RECOVERING and prev.leader_recovery_state != RECOVERING:
            unclean = True
    order = ["leader", "isr", "replicas", "adding_replicas", "removing_replicas", "leader_recovery_state",
             "elr", "last_known_elr", "directories"]
    change.sort(key=order.index)
    return replace(prev, **upd), ",".join(change) or "partition_epoch", unclean


def replay(entries: Iterable[MetadataEntry | MetadataError | tuple[str, MetadataEntry | MetadataError]], *,
           snapshot: Snapshot | None = None, source: str = "", snapshot_source: str = "",
           upto: int | None = None, restarts: Iterable[tuple[Snapshot, str]] = ()) -> ReplayResult:
    """Replay an optional snapshot then log entries (records below the snapshot's end offset
    are skipped; a gap between the snapshot and the log is an issue). Entries may be
    ``(source, entry)`` pairs (as :func:`merge_copies` returns); ``upto`` stops after that offset.
    ``restarts``: (snapshot, its source) the replay starts again from (:meth:`Replayer.restart`) before the first
    entry at or after its end offset, or at the end — a later snapshot bridging a hole the caller found in the log
    (the caller leaves out the entries in the hole and up to the snapshot's end).
    """
    r = Replayer()
    if snapshot is not None:
        r.load_snapshot(snapshot, snapshot_source)
    pending = sorted((x for x in restarts if x[0].end_offset is not None), key=lambda x: x[0].end_offset)
    first = True
    for item in entries:
        src, e = item if isinstance(item, tuple) else (source, item)
        if isinstance(e, MetadataEntry):
            if upto is not None and e.offset > upto:
                break
            while pending and e.offset >= pending[0][0].end_offset:
                r.restart(*pending.pop(0))
            end = None if snapshot is None else snapshot.end_offset
            if first and end is not None and e.offset > end:
                r.issues.append(ReplayIssue(e.offset, f"gap: snapshot ends at {end}, log resumes at {e.offset}",
                                            src, e.position))
            first = False
        r.feed(e, src)
    for snap, src in pending:  # a snapshot with no log after it: its image is where the history ends
        if upto is None or snap.end_offset - 1 <= upto:
            r.restart(snap, src)
    return r.finish()


def _same(a: MetadataEntry, b: MetadataEntry) -> bool:
    """Same record at the same offset? Time, Raft epoch and content; a control record whose
    fields one copy lacks (a dump prints only ``controlType: LEADER_CHANGE(2)``) compares by type."""
    if (a.timestamp, a.raft_epoch, a.record) != (b.timestamp, b.raft_epoch, b.record):
        return False
    ca, cb = a.control, b.control
    if ca is None or cb is None:
        return ca is cb
    if ca.data is None or cb.data is None:
        return ca.control_type == cb.control_type
    return ca == cb


@dataclass(frozen=True, slots=True)
class Superseded:
    """A copy's records from ``offset`` on, appended in Raft epoch ``epoch`` by a leader whose uncommitted
    tail a later leader replaced (``by_source``, a more up-to-date copy, holds Raft epoch ``by_epoch`` there).
    Kafka truncates such a tail when the node fetches from the new leader (``KafkaRaftClient``, a diverging
    epoch): its ``records`` are not the cluster's history and are not merged. Not damage: nothing is
    quarantined."""

    source: str
    offset: int
    epoch: int
    by_source: str
    by_epoch: int
    records: int


@dataclass
class MergeResult:
    """``entries``: (source, entry) in offset order, one per offset; ``conflicts``: differing copies;
    ``errors``: (source, error) of every undecodable unit; ``superseded``: copies' uncommitted tails that a
    more up-to-date copy replaced."""

    entries: list[tuple[str, MetadataEntry]]
    conflicts: list[Conflict]
    errors: list[tuple[str, MetadataError]]
    superseded: list[Superseded] = field(default_factory=list)


_LEADER_CHANGE = 2  # the control record a new Raft leader writes first in its epoch


class _Accepted:
    """The records kept so far from the more up-to-date copies (consistent with one another wherever they
    overlap), read as Kafka's ``endOffsetForEpoch`` reads a log: the epoch at an offset between two kept records
    is theirs when they share it, or the older one's when the newer one is its epoch's LeaderChange (a new
    leader's first record). Otherwise the newer epoch began somewhere in between (the decode drops NoOps; a
    batch may be lost): unknown, and an older epoch there may be an uncommitted tail. Before a copy's first
    offset (retention) nothing is known; past its end, an older epoch than its last has diverged."""

    def __init__(self) -> None:
        self.at: dict[int, tuple[int, bool, str]] = {}  # offset -> (epoch, a LeaderChange, copy)
        self.offsets: list[int] = []
        self.spans: list[tuple[int, int]] = []  # merged [first, last] offsets the copies held
        self.ends: list[tuple[int, int, str]] = []  # (last offset, highest last epoch up to it, its copy)

    def add(self, src: str, entries: list[MetadataEntry]) -> None:
        for e in entries:
            lc = e.control is not None and e.control.control_type == _LEADER_CHANGE
            have = self.at.get(e.offset)
            self.at[e.offset] = (e.raft_epoch, lc or (have is not None and have[1]), have[2] if have else src)
        if not entries:
            return
        self.offsets = sorted(self.at)
        spans = sorted([*self.spans, (entries[0].offset, entries[-1].offset)])
        self.spans = []
        for a, b in spans:
            if self.spans and a <= self.spans[-1][1] + 1:
                self.spans[-1] = (self.spans[-1][0], max(b, self.spans[-1][1]))
            else:
                self.spans.append((a, b))
        ends = sorted([*self.ends, (entries[-1].offset, entries[-1].raft_epoch, src)])
        self.ends = []
        for o, ep, c in ends:  # a running maximum of the last epochs, by last offset
            self.ends.append((o, ep, c) if not self.ends or ep > self.ends[-1][1] else (o, *self.ends[-1][1:]))

    def diverges(self, offset: int, epoch: int) -> tuple[int, str] | None:
        """(the epoch, the copy) that rules out ``epoch`` at ``offset``, or None when they agree or nothing is
        known there."""
        have = self.at.get(offset)
        if have is not None:
            return None if have[0] == epoch else (have[0], have[2])
        k = bisect.bisect_right(self.spans, (offset, float("inf"))) - 1
        if k >= 0 and self.spans[k][0] <= offset <= self.spans[k][1]:
            j = bisect.bisect_right(self.offsets, offset) - 1
            (lo, _, _), (hi, exact, nsrc) = self.at[self.offsets[j]], self.at[self.offsets[j + 1]]
            if lo == hi or exact:
                return None if lo == epoch else (lo, nsrc)
            return None if epoch == hi else (hi, nsrc)
        i = bisect.bisect_left(self.ends, (offset,)) - 1  # the copies that ended before ``offset``
        if i >= 0 and epoch < self.ends[i][1]:
            return (self.ends[i][1], self.ends[i][2])
        return None


def merge_copies(copies: Mapping[str, Iterable[MetadataEntry | MetadataError]]) -> MergeResult:
    """Merge copies of ``__cluster_metadata-0`` from several nodes (or one node at several times) by
    metadata offset, as Raft reconciles them. Copies are taken from the most up-to-date — the highest last Raft
    epoch, then the longest, as Raft elects a leader — down; a copy that holds another epoch than a more
    up-to-date copy's accepted records at an offset (by epoch ranges), or an older epoch past their end, has
    diverged there: its records from that offset on were an old leader's uncommitted tail, which Kafka
    truncates (:class:`Superseded`, left out). Where no more up-to-date copy reaches (before its first offset:
    retention), a copy is taken as read. Records equal in time, Raft epoch and content are one; records that
    differ in the same Raft epoch (which Raft never writes: damage) are a :class:`Conflict`, and the first
    source (mapping order) keeps its record. An epoch of -1 (a dump without ``partitionLeaderEpoch``) is never
    compared."""
    conflicts: list[Conflict] = []
    errors: list[tuple[str, MetadataError]] = []
    lists: dict[str, list[MetadataEntry]] = {}
    for src, items in copies.items():
        mine = lists.setdefault(src, [])
        for e in items:
            if isinstance(e, MetadataError):
                errors.append((src, e))
            elif not isinstance(e, IncompleteTail):  # the end of a copy's log, not a record
                mine.append(e)

    def rank(item: tuple[int, str]) -> tuple[int, int, int]:
        i, src = item
        last = next((e for e in reversed(lists[src]) if e.raft_epoch >= 0), None)
        return (last.raft_epoch, last.offset, -i) if last is not None else (-1, -1, -i)

    accepted: dict[str, int] = {}  # per copy, how many of its records are kept
    superseded: list[Superseded] = []
    view = _Accepted()
    for _, src in sorted(enumerate(lists), key=rank, reverse=True):
        mine, cut = lists[src], None
        for i, e in enumerate(mine):
            if e.raft_epoch >= 0 and (by := view.diverges(e.offset, e.raft_epoch)) is not None:
                cut = i
                superseded.append(Superseded(src, e.offset, e.raft_epoch, by[1], by[0], len(mine) - i))
                break
        accepted[src] = len(mine) if cut is None else cut
        view.add(src, [e for e in mine[:accepted[src]] if e.raft_epoch >= 0])
    by_offset: dict[int, tuple[str, MetadataEntry]] = {}
    for src, mine in lists.items():  # mapping order: the first source keeps a record that differs in one epoch
        for e in mine[:accepted[src]]:
            have = by_offset.get(e.offset)
            if have is None:
                by_offset[e.offset] = (src, e)
            elif not _same(have[1], e):
                conflicts.append(Conflict(e.offset, have[0], have[1], src, e))
    order = {src: i for i, src in enumerate(lists)}
    superseded.sort(key=lambda x: order[x.source])
    return MergeResult([by_offset[o] for o in sorted(by_offset)], conflicts, errors, superseded)


def compare_images(a: ReplayResult, b: ReplayResult) -> list[str]:
    """Differences between two final images (partitions and topic names); [] when equal."""
    out = []
    for key in sorted(set(a.partitions) | set(b.partitions)):
        pa_, pb = a.partitions.get(key), b.partitions.get(key)
        if pa_ != pb:
            out.append(f"{key[0]}-{key[1]}: {pa_} != {pb}")
    if a.topics != b.topics:
        out.append(f"topics: {a.topics} != {b.topics}")
    return out
