"""Rules over the KRaft metadata log (``partition_history``): K1, K2 (+ its cause links), M5, M2 timed
from the log, and the per-response metadata lag of ``stale_metadata_rates`` (spec/detection-rules.md,
"The cluster metadata log").

The log gives no data-log offsets and no history older than its oldest retained record: every rule
here treats "not in the retained log" as "unknown", never as "never happened" (a partition whose first
row is a ``snapshot`` row has an epoch whose start is unknown; an epoch below the oldest one retained is
not judged).

Coordinates: an epoch ``e`` of partition p was in force over the metadata offsets
``[start(e), start(next epoch))`` — ``start`` is the offset of the record that made ``e`` p's epoch
(creation or a leader change), the end is the next leader change or the topic's deletion (open when
neither is retained). A response serving ``e`` for p can only reflect offsets in that interval.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ._model import (
    INFO,
    Finding,
    MetadataObservation,
    ReplicaSnapshot,
    _as_mapping,
    _int_tuple,
    _opt_int,
    _opt_str,
    to_ms,
)

__all__ = [
    "CAUSE_KINDS",
    "Election",
    "EpochSpan",
    "HistoryChange",
    "LogView",
    "Served",
    "check_broker_staleness_logged",
    "check_checkpoint_epochs",
    "check_metadata_offsets",
    "cause_of",
    "check_unclean_elections",
    "judge",
    "observation_key",
    "response_lags",
    "scan_served",
    "judged_ts",
    "truncated_epoch",
    "unclean_cause",
    "view_from_rows",
    "with_log_topic_ids",
]

#: Findings an unclean leader election (K2) explains on the same partition afterwards.
CAUSE_KINDS = frozenset({"commit_beyond_epoch_end", "truncation", "over_rewind", "lineage_truncated"})
_UNKNOWN_START = -1


@dataclass(frozen=True, slots=True)
class HistoryChange:
    """One ``partition_history`` row (``partition`` None for a topic-level change)."""

    metadata_offset: int
    controller_ts: int
    topic: str | None
    topic_id: str
    partition: int | None
    change: str
    leader: int | None = None
    leader_epoch: int | None = None
    isr: tuple[int, ...] = ()
    leader_recovery_state: int | None = None
    unclean: bool = False
    previous_leader: int | None = None
    previous_isr: tuple[int, ...] | None = None
    source: str | None = None
    position: int | None = None

    @classmethod
    def from_row(cls, row: Any) -> HistoryChange:
        r = _as_mapping(row)
        prev = r.get("previous_isr")
        return cls(
            metadata_offset=int(r["metadata_offset"]),
            controller_ts=to_ms(r.get("controller_ts")) or 0,
            topic=_opt_str(r.get("topic")),
            topic_id=str(r["topic_id"]),
            partition=_opt_int(r.get("partition")),
            change=str(r.get("change") or ""),
            leader=_opt_int(r.get("leader")),
            leader_epoch=_opt_int(r.get("leader_epoch")),
            isr=_int_tuple(r.get("isr")),
            leader_recovery_state=_opt_int(r.get("leader_recovery_state")),
            unclean=bool(r.get("unclean") or False),
            previous_leader=_opt_int(r.get("previous_leader")),
            previous_isr=None if prev is None else _int_tuple(prev),
            source=_opt_str(r.get("source")),
            position=_opt_int(r.get("position")),
        )

    @property
    def changes(self) -> set[str]:
        return set(self.change.split(",")) if self.change else set()

    def pointer(self) -> str:
        """``metadata:<file>@<byte position> offset <metadata offset> <topic>-<partition>`` (the partition
        names the record: a snapshot's rows all share one offset and often one batch)."""
        pos = self.position if self.position is not None else "?"
        subject = self.topic if self.partition is None else f"{self.topic}-{self.partition}"
        return f"metadata:{self.source or '?'}@{pos} offset {self.metadata_offset} {subject}"


@dataclass(frozen=True, slots=True)
class EpochSpan:
    """Epoch ``epoch`` of one partition: in force over metadata offsets ``[start, end)`` (``start`` -1 when
    it began before the retained history; ``end`` None while open), from ``start_ts`` to ``end_ts``."""

    epoch: int
    start: int
    start_ts: int | None
    end: int | None
    end_ts: int | None
    leader: int | None
    row: HistoryChange


@dataclass
class LogView:
    """The replayed log indexed for the rules: per (topic id, partition) the epoch spans in order, the
    name -> topic id incarnations, and the time the retained history covers."""

    spans: dict[tuple[str, int], list[EpochSpan]] = field(default_factory=dict)
    incarnations: dict[str, list[tuple[int, int | None, str]]] = field(default_factory=dict)
    first_ts: int | None = None
    last_ts: int | None = None
    names_known: bool = True
    """Whether the history knows every topic name's ids (it starts from a snapshot or from offset 0)."""
    created: dict[str, int] = field(default_factory=dict)
    """Topic id -> creation time (its topic record's controller time); ids first met in a metadata snapshot have
    none (created before the retained log). F2/S1 judge no commit before its round's id was created."""

    @classmethod
    def build(cls, rows: Iterable[HistoryChange]) -> LogView:
        rows = sorted(rows, key=lambda r: (r.metadata_offset, r.partition if r.partition is not None else -1))
        view = cls()
        deleted: dict[str, tuple[int, int]] = {}
        born: dict[str, tuple[int, str]] = {}
        by_part: dict[tuple[str, int], list[HistoryChange]] = defaultdict(list)
        for r in rows:
            view.first_ts = r.controller_ts if view.first_ts is None else min(view.first_ts, r.controller_ts)
            view.last_ts = r.controller_ts if view.last_ts is None else max(view.last_ts, r.controller_ts)
            if r.partition is None:
                if "topic_deleted" in r.changes:
                    deleted[r.topic_id] = (r.metadata_offset, r.controller_ts)
                elif r.topic is not None:
                    born.setdefault(r.topic_id, (r.controller_ts if "snapshot" not in r.changes else -1, r.topic))
                continue
            by_part[(r.topic_id, r.partition)].append(r)
        for key, part_rows in by_part.items():
            spans: list[EpochSpan] = []
            for r in part_rows:
                if r.leader_epoch is None:
                    continue
                if spans and spans[-1].epoch == r.leader_epoch:
                    continue
                # a snapshot's epoch began before it, at a time the history does not hold: before the retained
                # log, or — a snapshot after earlier rows, which the replay starts again from after a hole in the
                # log — somewhere in the hole (its start_ts None: K1 then judges no epoch assigned in the hole)
                known = "snapshot" not in r.changes
                start = r.metadata_offset if known or spans else _UNKNOWN_START
                if spans:
                    spans[-1] = _close(spans[-1], r.metadata_offset, r.controller_ts)
                spans.append(EpochSpan(r.leader_epoch, start, r.controller_ts if known else None, None, None,
                                       r.leader, r))
            if spans and key[0] in deleted:
                spans[-1] = _close(spans[-1], *deleted[key[0]])
            view.spans[key] = spans
        starts = [r.metadata_offset for r in rows if r.change == "log_start"]
        from_snapshot = any("snapshot" in r.changes for r in rows)
        # a log replayed from a later offset without a snapshot does not know the topics created before it: a name's
        # first id in it may follow an older one, so no response is given an id by its name (the id-keyed rules
        # would take the older incarnation's responses for the newer's); rows older than ``log_start`` lack the mark
        view.names_known = from_snapshot or not starts or min(starts) <= 0
        view.created = {tid: ts for tid, (ts, _) in born.items() if ts >= 0}
        for tid, (ts, name) in born.items() if view.names_known else ():
            end = deleted.get(tid)
            view.incarnations.setdefault(name, []).append((ts, None if end is None else end[1], tid))
        for v in view.incarnations.values():
            # an open incarnation sorts after a closed one born at the same time (a plain tuple sort raised
            # TypeError comparing None with an int when a name was deleted and re-created in one millisecond)
            v.sort(key=lambda inc: (inc[0], float("inf") if inc[1] is None else inc[1], inc[2]))
        return view

    def topic_id_at(self, name: str | None, ts: int) -> str | None:
        """The topic id that had ``name`` at time ``ts`` (None when the log does not say)."""
        best = None
        for born, died, tid in self.incarnations.get(name or "", ()):
            if born <= ts and (died is None or ts < died):
                best = tid
        return best

    def spans_of(self, topic_id: str | None, topic: str | None, partition: int, ts: int) -> list[EpochSpan] | None:
        tid = topic_id if topic_id is not None else self.topic_id_at(topic, ts)
        if tid is None:
            return None
        return self.spans.get((tid, partition))

    def covers(self, ts: int) -> bool:
        """Does the retained history span ``ts`` (between its first and last change)?"""
        return self.first_ts is not None and self.last_ts is not None and self.first_ts <= ts <= self.last_ts


def _close(s: EpochSpan, end: int, end_ts: int) -> EpochSpan:
    return EpochSpan(s.epoch, s.start, s.start_ts, end, end_ts, s.leader, s.row)


def _span(spans: Sequence[EpochSpan], epoch: int) -> EpochSpan | None:
    for s in spans:
        if s.epoch == epoch:
            return s
    return None


# --------------------------------------------------------------------------------------------- K2


def check_unclean_elections(rows: Iterable[HistoryChange]) -> list[Finding]:
    """K2 ``unclean_leader_election``: every change the replay marked unclean — a new leader outside the
    ISR (and ELR) it had just before, or LeaderRecoveryState set to RECOVERING (KIP-704)."""
    out = []
    for r in sorted(rows, key=lambda r: r.metadata_offset):
        if not r.unclean or r.partition is None:
            continue
        how = ("its LeaderRecoveryState set to RECOVERING" if r.leader_recovery_state == 1 else
               "a leader outside the ISR")
        out.append(Finding(
            "K2", "unclean_leader_election", event_ts=r.controller_ts, topic=r.topic, topic_id=r.topic_id,
            partition=r.partition, broker=None if r.leader is None else str(r.leader),
            numbers={"leader_epoch": r.leader_epoch, "previous_leader": r.previous_leader,
                     "metadata_offset": r.metadata_offset},
            evidence=(r.pointer(),),
            detail=(f"{r.topic}-{r.partition}: broker {r.leader} became leader in epoch {r.leader_epoch} with {how} "
                    f"(ISR just before: {list(r.previous_isr or ())}, previous leader {r.previous_leader}); "
                    f"records the old ISR had acknowledged may be lost"),
        ))
    return out


@dataclass(frozen=True, slots=True)
class Election:
    """A K2 finding reduced to what :func:`cause_of` compares (a row of the report tables carries these)."""

    finding_id: str
    topic: str | None
    partition: int | None
    event_ts: int
    leader_epoch: int | None
    metadata_offset: int | None = None

    @classmethod
    def of(cls, f: Finding) -> Election:
        return cls(f.id, f.topic, f.partition, f.event_ts, f.numbers.get("leader_epoch"),
                   f.numbers.get("metadata_offset"))


def cause_of(kind: str, topic: str | None, partition: int | None, event_ts: int, leader_epoch: int | None,
             elections: Iterable[Election], judged_at: int | None = None) -> str | None:
    """The id of the unclean election (K2) that explains a finding of ``kind`` (F2 ``commit_beyond_epoch_end``,
    S1 ``truncation`` / ``over_rewind``, L5 ``lineage_truncated``): the latest one of the same topic and
    partition at or before the finding — and, when the finding carries the epoch of the truncated records
    (``leader_epoch`` ≥ 0: :func:`truncated_epoch`), one that started a newer epoch than it (the election that
    truncated what that epoch wrote).
    A finding judged later than it happened (F2: a commit made before the election, judged by a snapshot
    taken after it; ``judged_at``, the snapshot's time), with that epoch and no such election at or before
    it, names the first one after it up to ``judged_at``: the first unclean election that ended its epoch.
    None when no election qualifies or the kind is not one an unclean election causes."""
    if kind not in CAUSE_KINDS:
        return None
    best = after = None
    known = leader_epoch is not None and leader_epoch >= 0
    for k in elections:
        if (k.topic, k.partition) != (topic, partition):
            continue
        if known and k.leader_epoch is not None and k.leader_epoch <= leader_epoch:  # type: ignore[operator]
            continue
        key = (k.event_ts, k.metadata_offset or 0)
        if k.event_ts <= event_ts:
            if best is None or key > (best.event_ts, best.metadata_offset or 0):
                best = k
        elif (known and judged_at is not None and k.event_ts <= judged_at
              and (after is None or key < (after.event_ts, after.metadata_offset or 0))):
            after = k
    best = best if best is not None else after
    return None if best is None else best.finding_id


def truncated_epoch(kind: str, numbers: Mapping[str, Any]) -> int | None:
    """The epoch whose records a finding of ``kind`` says were truncated, for :func:`cause_of`: an S1 rewind's
    *previous* commit's (the one beyond its epoch's end; the rewinding commit usually carries the new leader's
    epoch already, which would rule out the very election that truncated), else the finding's ``leader_epoch``."""
    if kind in ("truncation", "over_rewind"):
        return numbers.get("previous_epoch")
    return numbers.get("leader_epoch")


def judged_ts(kind: str, numbers: Mapping[str, Any]) -> int | None:
    """When a finding of ``kind`` was judged, if later than it happened, for :func:`cause_of`: an F2's
    snapshot round (``snapshot_ts``); None for the others (judged at their own time)."""
    return numbers.get("snapshot_ts") if kind == "commit_beyond_epoch_end" else None


def unclean_cause(finding: Finding, elections: Sequence[Finding]) -> str | None:
    """:func:`cause_of` for a :class:`Finding` against K2 findings."""
    return cause_of(finding.kind, finding.topic, finding.partition, finding.event_ts,
                    truncated_epoch(finding.kind, finding.numbers),
                    [Election.of(k) for k in elections if k.kind == "unclean_leader_election"],
                    judged_ts(finding.kind, finding.numbers))


# --------------------------------------------------------------------------------------------- K1


def check_checkpoint_epochs(snapshot: ReplicaSnapshot, view: LogView) -> list[Finding]:
    """K1 ``checkpoint_epoch_unknown``: a checkpoint entry (E, s) whose epoch the metadata log never
    assigned to the partition (same topic id; by name, the incarnation alive at the snapshot time),
    where the retained history covers E: E above the oldest epoch retained for the partition, and the
    snapshot taken while the history ran — not after the log's last change (a newer epoch may have been
    assigned after it) and not before the partition's first retained row (an epoch "from the future" is
    as likely a wrong snapshot time as a foreign lineage). One finding per snapshot (the first unknown
    entry; all of them in ``detail``)."""
    if view.last_ts is None or view.last_ts < snapshot.snapshot_ts:
        return []
    spans = view.spans_of(snapshot.topic_id, snapshot.topic, snapshot.partition, snapshot.snapshot_ts)
    if not spans or spans[0].row.controller_ts > snapshot.snapshot_ts:
        return []
    assigned = {s.epoch for s in spans}
    for prev, s in zip(spans, spans[1:], strict=False):
        if s.start_ts is None:  # a snapshot after a hole in the log: the epochs between were assigned in the hole
            assigned.update(range(prev.epoch + 1, s.epoch))
    oldest = spans[0].epoch
    unknown = [e for e in snapshot.entries if e.epoch > oldest and e.epoch not in assigned]
    if not unknown:
        return []
    first = unknown[0]
    tid = spans[0].row.topic_id
    return [Finding(
        "K1", "checkpoint_epoch_unknown", event_ts=snapshot.snapshot_ts, topic=snapshot.topic, topic_id=tid,
        partition=snapshot.partition, broker=snapshot.broker,
        numbers={"leader_epoch": first.epoch, "expected_epoch": spans[-1].epoch,
                 "metadata_offset": spans[-1].start if spans[-1].start >= 0 else None},
        evidence=(snapshot.pointer(first.epoch), spans[-1].row.pointer()),
        detail=(f"{snapshot.topic}-{snapshot.partition} on broker {snapshot.broker}: checkpoint entries "
                f"{[(e.epoch, e.start_offset) for e in unknown]} name epochs the metadata log never assigned "
                f"to topic id {tid} (retained epochs {oldest}..{spans[-1].epoch}): this lineage is not the "
                f"partition's history (restored disk, copied directory, corruption)"),
    )]


# --------------------------------------------------------------------------------------------- M5


@dataclass(frozen=True, slots=True)
class Served:
    """The interval of metadata offsets a response can reflect: the latest start and the earliest end of the
    epochs it served, with the partitions (first in the response) that set them."""

    start: int
    end: int | None
    start_span: EpochSpan
    end_span: EpochSpan | None
    start_obs: MetadataObservation
    end_obs: MetadataObservation | None


def _responses(observations: Iterable[MetadataObservation]) -> list[list[MetadataObservation]]:
    groups: dict[tuple, list[MetadataObservation]] = {}
    for o in observations:
        groups.setdefault((o.client_id, o.source, o.position, o.capture_ts), []).append(o)
    return sorted(groups.values(), key=lambda g: (g[0].capture_ts, g[0].source or "", g[0].position or 0))


def _served(resp: Sequence[MetadataObservation], view: LogView) -> Served | None:
    start = end = None
    for o in resp:
        if o.epoch < 0:
            continue
        spans = view.spans_of(o.topic_id, o.topic, o.partition, o.capture_ts)
        s = _span(spans, o.epoch) if spans else None
        if s is None:
            continue
        if start is None or s.start > start[0]:
            start = (s.start, s, o)
        if s.end is not None and (end is None or s.end < end[0]):
            end = (s.end, s, o)
    if start is None:
        return None
    return Served(start[0], None if end is None else end[0], start[1], None if end is None else end[1], start[2],
                   None if end is None else end[2])


def check_metadata_offsets(observations: Iterable[MetadataObservation], view: LogView, *,
                           kraft: bool = True) -> list[Finding]:
    """M5 over one client's observations (any order; grouped into responses by capture pointer and sorted by
    capture time). ``metadata_offset_regression``: a response whose served interval ends at or before the
    start of a served interval the client was already given (strictly earlier). ``metadata_state_mixed``:
    a response whose partitions' intervals do not intersect (warning on KRaft, info with ``kraft=False``).
    Partitions served with an epoch the log does not retain are left out of the interval."""
    return scan_served(((resp[0], _served(resp, view)) for resp in _responses(observations)), kraft=kraft)


def scan_served(responses: Iterable[tuple[MetadataObservation, Served | None]], *, kraft: bool = True) -> list[Finding]:
    """M5's walk over one client's responses in capture order: each as its first observation and the interval
    it served (None: no partition with a retained epoch). Shared by :func:`check_metadata_offsets` and the
    columnar :func:`epochlib.rules.kraft_pass.metadata_offsets`, which compute the intervals differently."""
    out: list[Finding] = []
    seen: tuple[int, Served, MetadataObservation] | None = None
    pending: list[tuple[int, Served, MetadataObservation]] = []
    last_ts = None
    for o0, sv in responses:
        if last_ts is not None and o0.capture_ts > last_ts:
            for p in pending:
                if seen is None or p[0] > seen[0]:
                    seen = p
            pending = []
        last_ts = o0.capture_ts
        if sv is None:
            continue
        if sv.end is not None and sv.end <= sv.start:
            e = sv.end_span
            out.append(Finding(
                "M5", "metadata_state_mixed", severity="" if kraft else INFO, event_ts=o0.capture_ts,
                topic=sv.end_obs.topic, topic_id=sv.end_obs.topic_id, partition=sv.end_obs.partition,
                client_id=o0.client_id, broker=o0.broker,
                numbers={"served_offset_start": sv.start, "served_offset_end": sv.end,
                         "correlation_id": o0.correlation_id, "served_epoch": sv.end_obs.epoch},
                evidence=(o0.pointer(), e.row.pointer()) if e else (o0.pointer(),),
                detail=(f"response to {o0.client_text()} from broker {o0.broker} mixes cluster states that never "
                        f"coexisted: {sv.end_obs.topic}-{sv.end_obs.partition} epoch {sv.end_obs.epoch} ended at "
                        f"metadata offset {sv.end}, {sv.start_obs.topic}-{sv.start_obs.partition} epoch "
                        f"{sv.start_obs.epoch} began at {sv.start}"),
            ))
            continue
        if seen is not None and sv.end is not None and sv.end <= seen[0]:
            old = seen[1]
            lag_ms = None
            if old.start_span.start_ts is not None and sv.end_span is not None and sv.end_span.end_ts is not None:
                lag_ms = old.start_span.start_ts - sv.end_span.end_ts
            out.append(Finding(
                "M5", "metadata_offset_regression", event_ts=o0.capture_ts, topic=sv.end_obs.topic,
                topic_id=sv.end_obs.topic_id, partition=sv.end_obs.partition, client_id=o0.client_id,
                broker=o0.broker,
                numbers={"served_offset_start": sv.start, "served_offset_end": sv.end, "seen_offset_start": seen[0],
                         "lag_offsets": seen[0] - sv.end + 1, "lag_ms": lag_ms,
                         "correlation_id": o0.correlation_id, "served_epoch": sv.end_obs.epoch},
                evidence=(o0.pointer(), seen[2].pointer(),
                          *((sv.end_span.row.pointer(),) if sv.end_span else ())),
                detail=(f"{o0.client_text()} got from broker {o0.broker} a cluster state older than one it already had: "
                        f"served interval [{sv.start}, {sv.end}) ends at or before offset {seen[0]} it had seen "
                        f"({seen[1].start_obs.topic}-{seen[1].start_obs.partition} epoch {seen[1].start_obs.epoch}); "
                        f"{sv.end_obs.topic}-{sv.end_obs.partition} epoch {sv.end_obs.epoch} had been superseded "
                        f"{seen[0] - sv.end + 1} metadata offsets"
                        + (f" / {lag_ms} ms of controller time" if lag_ms is not None else "") + " earlier"),
            ))
        pending.append((sv.start, sv, o0))
    return out


# ------------------------------------------------------------------------------ M2 from the log + lag


def _committed_after(spans: Sequence[EpochSpan], epoch: int, before: int) -> EpochSpan | None:
    """The first epoch above ``epoch`` the log committed strictly before time ``before``."""
    for s in spans:
        if s.epoch > epoch and s.start_ts is not None and s.start_ts < before:
            return s
    return None


def judge(o: MetadataObservation, view: LogView, grace_ms: int) -> tuple[list[EpochSpan] | None, EpochSpan | None]:
    """Whether the log judges observation ``o``, and against what: ``(spans, newer)``. ``spans`` is its
    partition's epoch spans when the log covers the capture time and retains ``o``'s epoch (None: not
    judged); ``newer`` the first higher epoch the log committed before capture time − grace (None: the
    response was current). What M2 from the log and the metadata lag both decide per observation."""
    if o.epoch < 0 or not view.covers(o.capture_ts):
        return None, None
    spans = view.spans_of(o.topic_id, o.topic, o.partition, o.capture_ts)
    if not spans or o.epoch < spans[0].epoch:
        return None, None
    return spans, _committed_after(spans, o.epoch, o.capture_ts - grace_ms)


def check_broker_staleness_logged(observations: Iterable[MetadataObservation], view: LogView,
                                  grace_ms: int = 1000) -> tuple[list[Finding], set[str]]:
    """M2 where the metadata log covers the capture time: a response serving epoch e for p at t although
    the log had committed a higher epoch for p before t − grace; staleness = t − that commit's time.
    Returns the findings and the capture pointers of the observations the log judged (their
    capture-only M2 verdicts are superseded)."""
    out: list[Finding] = []
    judged: set[str] = set()
    for o in observations:
        spans, newer = judge(o, view, grace_ms)
        if spans is None:
            continue
        judged.add(observation_key(o))
        if newer is None:
            continue
        latest = max(s.epoch for s in spans if s.start_ts is not None and s.start_ts < o.capture_ts - grace_ms)
        staleness = o.capture_ts - newer.start_ts
        out.append(Finding(
            "M2", "broker_served_stale", event_ts=o.capture_ts, topic=o.topic, topic_id=o.topic_id,
            partition=o.partition, client_id=o.client_id, broker=o.broker,
            numbers={"served_epoch": o.epoch, "cached_epoch": latest, "staleness_ms": staleness,
                     "correlation_id": o.correlation_id},
            evidence=(o.pointer(), newer.row.pointer()),
            detail=(f"broker {o.broker} served {o.topic}-{o.partition} epoch {o.epoch} to {o.client_text()}, but the "
                    f"metadata log had committed epoch {newer.epoch} {staleness} ms before (latest: {latest})"),
        ))
    return out, judged


def observation_key(o: MetadataObservation) -> str:
    """The key :func:`check_broker_staleness_logged` puts in its ``judged`` set for an observation."""
    return f"{o.pointer()}#{o.topic_id or o.topic}-{o.partition}"


def response_lags(observations: Iterable[MetadataObservation], view: LogView,
                  grace_ms: int = 1000) -> list[tuple[str, str | None, int, int]]:
    """Per response the log covers: ``(capture pointer, broker, capture time, lag ms)`` — capture time −
    time of the oldest committed change (before t − grace) to one of its partitions that it does not
    reflect; 0 when it reflects everything committed before t − grace."""
    out = []
    for resp in _responses(observations):
        o0 = resp[0]
        if not view.covers(o0.capture_ts):
            continue
        lag = 0
        judged = False
        for o in resp:
            spans, newer = judge(o, view, grace_ms)
            if spans is None:
                continue
            judged = True
            if newer is not None:
                lag = max(lag, o.capture_ts - newer.start_ts)
        if judged:
            out.append((o0.pointer(), o0.broker, o0.capture_ts, lag))
    return out


def with_log_topic_ids(observations: Iterable[MetadataObservation], view: LogView) -> list[MetadataObservation]:
    """M3 with the log: observations without a topic id (responses below v10) get the id the metadata log
    says their topic name had at the capture time, where the log's history spans that time. The id-keyed
    rules then replace the re-creation heuristic: a re-created topic is a new id (a new baseline, no alarm),
    and an epoch that dropped without a re-creation is an M1 regression, not a "possible re-creation"."""
    from dataclasses import replace

    out = []
    for o in observations:
        if o.topic_id is None and o.topic is not None and view.covers(o.capture_ts):
            tid = view.topic_id_at(o.topic, o.capture_ts)
            if tid is not None:
                o = replace(o, topic_id=tid)
        out.append(o)
    return out


def view_from_rows(rows: Iterable[Mapping[str, Any]]) -> LogView:
    """A :class:`LogView` from ``partition_history`` rows (dicts)."""
    return LogView.build(HistoryChange.from_row(r) for r in rows)
