"""Offset resets S1 (rewind) and S2 (forward jump), and their M4 correlation with stale metadata.

Rule ids carry the bullet of spec/detection-rules.md that classified the move:
S1a truncation / over_rewind, S1b operator_reset, S1c stale_epoch_commit, S1d spurious_rewind_to_earliest,
S1e spurious_rewind; S2a retention, S2b spurious_skip.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from ._model import Commit, Finding, GroupState, MetadataObservation, ReplicaSnapshot
from .fencing import LineageLookup, fence_check
from .rounds import LogEndEstimate, SnapshotRounds, log_end_of, log_start_of

__all__ = [
    "CORRELATED_KINDS",
    "MIN_PACE_ELAPSED_MS",
    "LogEndEstimate",
    "OffsetsSeen",
    "ResetContext",
    "check_offset_resets",
    "classify_jump",
    "classify_rewind",
    "correlate_resets",
    "current_membership",
    "pace_rate",
    "topic_names_of",
]


MIN_PACE_ELAPSED_MS = 1000
"""S2b pace: the time between two commits is counted as at least this long."""

#: ``record_type`` values of the group records that change who is a member (None: a classic record).
_CLASSIC_GROUP = frozenset({None, "group_metadata"})
_MEMBER_RECORD = "consumer_group_member_metadata"
_GROUP_RECORD = "consumer_group_metadata"


def _record_order(g: GroupState) -> tuple[int, int]:
    return (g.event_ts, g.log_offset if g.log_offset is not None else -1)


def current_membership(records: Iterable[GroupState]) -> list[GroupState]:
    """A group's records in time order (ties: log offset), each carrying the group's member set as of it.

    S1b asks whether the group had members; one record alone cannot say so under KIP-848, where every
    member has its own ``ConsumerGroupMemberMetadata`` record and one member leaving deletes only its
    own (a tombstone). So the member set is folded over *all* the group's records: a classic
    ``GroupMetadataValue`` replaces the classic members (its tombstone deletes the group), a member
    record adds its member (its tombstone removes it), a ``ConsumerGroupMetadata`` tombstone deletes the
    group; other records change nothing. Each returned record is the input one with ``member_count`` =
    classic + KIP-848 members then (None while neither kind has been seen and the classic count is
    unknown), ``client_ids`` = their client ids (for M4) and ``is_tombstone`` = the group is deleted.
    """
    out: list[GroupState] = []
    classic_count: int | None = None
    classic_clients: tuple[str, ...] = ()
    modern: dict[str, str | None] = {}
    modern_seen = deleted = False
    for g in sorted(records, key=_record_order):
        rt = g.record_type
        if rt in _CLASSIC_GROUP:
            if g.is_tombstone:
                classic_count, classic_clients, deleted = 0, (), True
            else:
                classic_count, classic_clients, deleted = g.member_count, g.client_ids, False
        elif rt == _MEMBER_RECORD:
            modern_seen = True
            ids = g.member_ids or ()
            if g.is_tombstone:
                for m in ids:
                    modern.pop(m, None)
            else:
                clients = list(g.client_ids) + [None] * len(ids)
                for m, cid in zip(ids, clients, strict=False):
                    modern[m] = cid
                deleted = False
        elif rt == _GROUP_RECORD:
            modern_seen = True
            if g.is_tombstone:
                modern.clear()
                deleted = True
            else:
                deleted = False
        count = (classic_count or 0) + len(modern) if classic_count is not None or modern_seen else None
        clients = classic_clients + tuple(c for c in modern.values() if c is not None)
        out.append(replace(g, member_count=count, client_ids=clients, is_tombstone=deleted))
    return out


class OffsetsSeen:
    """"The highest offset seen" (S2b's third log-end source): the largest offset that *other* consumer
    groups had committed to the partition before a time. A committed offset o says the log held records
    below o, so the log end had reached at least o by then.

    The group asking is excluded: its own earlier commits are below any forward jump by construction, so
    they would make every jump "reach the log end" and remove the "without an estimate, do not guess"
    guard. Built from the partition's live, non-tombstone commits (``ts``, ``offsets``, ``groups`` aligned;
    ``pointer(i)`` names the i-th one as evidence). The running maximum keeps the best two offsets of
    distinct groups, so one O(n) pass (done on the first query) answers every group in O(log n).
    """

    __slots__ = ("_groups", "_offsets", "_pointer", "_table", "_ts")

    def __init__(
        self,
        ts: Sequence[int] | np.ndarray,
        offsets: Sequence[int] | np.ndarray,
        groups: Sequence[Hashable] | np.ndarray,
        pointer: Callable[[int], str] | None = None,
    ) -> None:
        self._ts = np.asarray(ts, dtype=np.int64)
        self._offsets = np.asarray(offsets, dtype=np.int64)
        self._groups = groups if isinstance(groups, Sequence) else list(groups)  # a lazy sequence stays one
        if not (len(self._ts) == len(self._offsets) == len(self._groups)):
            raise ValueError("OffsetsSeen: ts, offsets and groups must have the same length")
        self._pointer = pointer
        self._table: tuple | None = None

    @classmethod
    def from_commits(cls, commits: Iterable[Commit]) -> OffsetsSeen:
        """From a partition's commits (every group); aborted/open, tombstones and null offsets are skipped."""
        live = [c for c in commits if c.is_live and not c.is_tombstone and c.committed_offset is not None]
        return cls([c.ts for c in live], [c.committed_offset for c in live], [c.group_id for c in live],
                   lambda i: live[i].pointer())  # fmt: skip

    def _build(self) -> tuple:
        order = np.argsort(self._ts, kind="stable")
        offs, groups = self._offsets[order].tolist(), list(self._groups)
        no = -1 << 63
        o1, g1, i1, o2, i2 = no, None, -1, no, -1  # best, and best of a group other than the best's
        out_o1, out_g1, out_i1, out_o2, out_i2 = [], [], [], [], []
        for k, i in enumerate(order.tolist()):
            o, g = offs[k], groups[i]
            if g == g1:
                if o > o1:
                    o1, i1 = o, i
            elif o > o1:
                o2, i2 = o1, i1
                o1, g1, i1 = o, g, i
            elif o > o2:
                o2, i2 = o, i
            out_o1.append(o1)
            out_g1.append(g1)
            out_i1.append(i1)
            out_o2.append(o2)
            out_i2.append(i2)
        return self._ts[order], out_o1, out_g1, out_i1, out_o2, out_i2

    def highest_before(self, ts: int, exclude_group: Hashable | None = None) -> LogEndEstimate | None:
        """The largest offset committed strictly before ``ts`` by a group other than ``exclude_group``."""
        if not len(self._ts):
            return None
        if self._table is None:
            self._table = self._build()
        times, o1, g1, i1, o2, i2 = self._table
        k = int(np.searchsorted(times, ts, side="left")) - 1
        if k < 0:
            return None
        off, idx = (o1[k], i1[k]) if g1[k] != exclude_group else (o2[k], i2[k])
        if idx < 0:
            return None
        where = self._pointer(idx) if self._pointer is not None else ""
        return LogEndEstimate(
            int(self._ts[idx]), off, f"{where} (group {self._groups[idx]} had committed offset {off})".lstrip(), True
        )


@dataclass(frozen=True)
class ResetContext:
    """What S1/S2 may consult besides the commits, all for the commits' (topic, partition) and group.

    - ``snapshots``: lineage snapshots of the partition (all brokers); the leader lineage at a time is
      :meth:`~epochlib.rules.rounds.SnapshotRounds.leader_at` of their rounds (``tolerance_ms``);
      ``lineage_lookup`` overrides that choice when given;
    - ``group_states``: the group's metadata records (any order);
    - ``log_end_estimates``: extra log-end estimates; the snapshots' LEO (else high watermark) of the
      leader of each round are added automatically;
    - ``offsets_seen``: the partition's commits of every group (:class:`OffsetsSeen`), "the highest
      offset seen" — other groups' commits before a time bound the log end from below;
    - ``skip_pace_factor``: S2b needs a jump whose rate (records per ms since the previous commit) is
      above this many times the highest rate between the sequence's earlier commits (see
      :func:`check_offset_resets`).
    """

    snapshots: Sequence[ReplicaSnapshot] = ()
    group_states: Sequence[GroupState] = ()
    log_end_estimates: Sequence[LogEndEstimate] = ()
    offsets_seen: OffsetsSeen | None = None
    lineage_lookup: LineageLookup | None = None
    tolerance_ms: int = 0
    skip_pace_factor: float = 10.0
    topic_created: Mapping[str, int] | None = field(default=None, compare=False)
    """Topic id -> creation time (epoch ms) where the metadata log knows it: a commit before the creation of
    the topic id of the round that would judge it has no leader lineage (not ``truncation`` by it)."""
    snapshot_rounds: SnapshotRounds | None = field(default=None, repr=False, compare=False)
    """The rounds of ``snapshots`` within ``tolerance_ms`` when the caller built them already (shared by
    the groups of a partition); built on first use otherwise."""
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    # -- derived lookups (computed once, on first use) ---------------------------------------------

    def rounds(self) -> SnapshotRounds:
        """The snapshots' rounds (:class:`~epochlib.rules.rounds.SnapshotRounds`), built on first use."""
        if self.snapshot_rounds is not None:
            return self.snapshot_rounds
        if "rounds" not in self._cache:
            self._cache["rounds"] = SnapshotRounds(self.snapshots, self.tolerance_ms, self.topic_created)
        return self._cache["rounds"]

    def leader_at(self, ts: int) -> ReplicaSnapshot | None:
        """The leader snapshot for an event at ``ts`` (first round at/after, else newest), or
        ``lineage_lookup(ts)`` when one was given."""
        if self.lineage_lookup is not None:
            return self.lineage_lookup(ts)
        return self.rounds().leader_at(ts)

    def leader_before(self, ts: int) -> ReplicaSnapshot | None:
        """The leader snapshot of the newest round taken at or before ``ts``."""
        return self.rounds().leader_before(ts)

    def log_starts_around(self, ts: int) -> list[tuple[ReplicaSnapshot, int, str]]:
        """(snapshot, log start, evidence) of the leader round at/after ``ts`` and of the one before it, where
        known: log starts only grow, so the one at ``ts`` lies between them (S1d and S2a try each)."""
        out = []
        for snap in (self.leader_at(ts), self.leader_before(ts)):
            start, evidence = log_start_of(snap)
            if start is not None:
                out.append((snap, start, evidence))
        return out

    def group_state_at(self, ts: int) -> GroupState | None:
        """The group's last metadata record at or before ``ts``."""
        if "groups" not in self._cache:
            states = current_membership(self.group_states)
            self._cache["groups"] = ([g.event_ts for g in states], states)
        times, states = self._cache["groups"]
        i = bisect.bisect_right(times, ts) - 1
        return states[i] if i >= 0 else None

    def log_end_before(self, ts: int, group_id: str | None = None) -> LogEndEstimate | None:
        """What the log end had reached by ``ts``: the newest snapshot (or extra) estimate at or before
        ``ts``, or, when larger, the highest offset another group than ``group_id`` committed before ``ts``.

        Both are lower bounds of the log end; the larger one is the better bound. After an unclean
        truncation an older commit may overshoot the shorter log: then no jump reaches the estimate, a
        miss rather than a false skip."""
        if "ends" not in self._cache:
            ests = self.rounds().log_end_estimates(self.log_end_estimates)
            self._cache["ends"] = ([e.ts for e in ests], ests)
        times, ests = self._cache["ends"]
        i = bisect.bisect_right(times, ts) - 1
        best = ests[i] if i >= 0 else None
        seen = self.offsets_seen.highest_before(ts, group_id) if self.offsets_seen is not None else None
        if seen is not None and (best is None or seen.offset > best.offset):
            return seen
        return best


def _subject(c: Commit) -> dict[str, Any]:
    return dict(event_ts=c.ts, topic=c.topic, partition=c.partition, group_id=c.group_id)


def _finding(rule, kind, c: Commit, prev: Commit, nums: dict, evidence, detail, snap=None) -> Finding:
    base = {
        "previous_offset": prev.committed_offset,
        "new_offset": c.committed_offset,
        "leader_epoch": c.epoch,
        "previous_epoch": prev.epoch,
        "records_reread": None,
        "records_skipped": None,
        "log_start_offset": None,
        "truncation_point": None,
    }
    base.update(nums)
    return Finding(
        rule=rule,
        kind=kind,
        numbers=base,
        evidence=(c.pointer(), prev.pointer(), *[e for e in evidence if e]),
        detail=detail,
        topic_id=snap.topic_id if snap is not None else None,
        broker=snap.broker if snap is not None else None,
        **_subject(c),
    )


def _epoch_before(prev: Commit, ctx: ResetContext) -> tuple[int, ReplicaSnapshot] | None:
    """For a commit without an epoch (e = -1: clients before KIP-320, tools): the epoch of the record before its
    offset in the leader's lineage of the newest round at or before the commit, when that round's log already
    held the record (else None: the record may belong to a later epoch). If that epoch ends below the offset in
    a later lineage, the records were truncated, whatever epoch the client knew (F5 stops epoch checks, not
    offset checks)."""
    po = prev.committed_offset
    snap = ctx.leader_before(prev.ts) if po is not None and po > 0 else None
    if snap is None:
        return None
    end = log_end_of(snap)
    epoch = snap.repaired_cache().epoch_for_offset(po - 1) if end is not None and po <= end else None
    return None if epoch is None else (epoch, snap)


def _memberless(c: Commit, ctx: ResetContext) -> tuple[GroupState | None, str] | None:
    """Why the group had no members at commit ``c`` (S1b, and S2b's operator reset), or None: (its record then,
    the wording) when its member set folded up to then is empty or it was deleted; (None, the wording) when
    it has no group record at or before ``c`` at all and ``c`` carries no leader epoch (-1): the offset was
    written from outside the group — ``kafka-consumer-groups``, AdminClient, MirrorMaker 2's offset sync —
    since a consumer that joined the group would have a group record and a current one commits its epoch."""
    g = ctx.group_state_at(c.ts)
    if g is not None:
        if not g.is_empty:
            return None
        return g, (f"while group {c.group_id} had no members ({'deleted' if g.is_tombstone else 'empty'} since its "
                   f"record at {g.event_ts})")  # fmt: skip
    if c.epoch >= 0:
        return None
    return None, (f"committed without a leader epoch (-1) to group {c.group_id}, which has no group record by then "
                  "(no members known): an offset written from outside the group (a tool, AdminClient or "
                  "MirrorMaker 2's offset sync)")  # fmt: skip


def classify_rewind(c: Commit, prev: Commit, ctx: ResetContext) -> Finding:
    """S1: the finding for a rewind ``prev -> c`` (``c``'s offset below ``prev``'s) of one sequence, in
    the order S1a, S1b, S1c, S1d, S1e (:func:`check_offset_resets` has the judgement calls). Every rewind
    is a finding."""
    o, po = c.committed_offset, prev.committed_offset
    assert o is not None and po is not None
    snap = ctx.leader_at(c.ts)
    reread = po - o
    # (a) a real truncation: F2 holds for the previous commit on the lineage as of the rewind (a commit without
    # an epoch takes the epoch its last record had in the leader's lineage before it, where that shows it)
    inferred = _epoch_before(prev, ctx) if prev.epoch < 0 else None
    judged = prev if inferred is None else replace(prev, leader_epoch=inferred[0])
    r = fence_check(replace(judged, event_ts=c.ts), snap)
    covered = r.head_epoch is not None and judged.epoch >= r.head_epoch  # case 4 is no proof of truncation
    if r.status == "beyond_epoch_end" and covered and snap is not None:
        how = "" if inferred is None else (
            f" (the commit carries no epoch: offset {po - 1} was in epoch {inferred[0]} on broker "
            f"{inferred[1].broker} in the snapshot before the commit)")
        point = r.end_offset
        ev = (
            snap.pointer(r.end_epoch),
            snap.pointer(r.latest_epoch) if r.latest_epoch != r.end_epoch else "",
        ) + (() if inferred is None else (inferred[1].pointer(inferred[0]),))
        if o >= point:
            return _finding(
                "S1a",
                "truncation",
                c,
                prev,
                {
                    "truncation_point": point,
                    "records_reread": reread,
                    "end_offset": point,
                    "records_affected": po - point,
                },
                ev,
                f"rewind {po} -> {o} follows a log truncation: epoch {judged.epoch} ends at {point} in the leader "
                f"lineage on broker {snap.broker}, and the new offset is at or above it{how}.",
                snap,
            )
        return _finding(
            "S1a",
            "over_rewind",
            c,
            prev,
            {
                "truncation_point": point,
                "records_reread": point - o,
                "end_offset": point,
                "records_affected": po - point,
            },
            ev,
            f"rewind {po} -> {o} goes {point - o} record(s) below the truncation point {point} (epoch "
            f"{judged.epoch} ends there on broker {snap.broker}{how}): records re-read beyond what the truncation "
            "required.",
            snap,
        )
    # (b) the group had no members (or never had any and the offset came from outside it): an operator reset
    empty = _memberless(c, ctx)
    if empty is not None:
        g, why = empty
        return _finding(
            "S1b",
            "operator_reset",
            c,
            prev,
            {"records_reread": reread, "member_count": g.member_count if g is not None else None},
            (g.pointer(),) if g is not None else (),
            f"rewind {po} -> {o} {why}: an operator reset (kafka-consumer-groups --reset-offsets).",
            snap,
        )
    ls, ls_ev = log_start_of(snap)
    cache = snap.repaired_cache() if snap is not None else None
    head = cache.earliest_entry if cache is not None else None
    # (c) a commit carries an epoch below the lineage head (KAFKA-19902)
    if head is not None and snap is not None:
        stale = [x for x in (prev, c) if 0 <= x.epoch < head.epoch]
        if stale:
            x = stale[0]
            return _finding(
                "S1c",
                "stale_epoch_commit",
                c,
                prev,
                {
                    "records_reread": reread,
                    "expected_epoch": head.epoch,
                    "log_start_offset": ls,
                    "stale_epoch": x.epoch,
                },
                (snap.pointer(head.epoch),),
                f"rewind {po} -> {o}: the {'previous' if x is prev else 'new'} commit carries epoch {x.epoch}, below "
                f"the lineage head epoch {head.epoch} on broker {snap.broker} (KAFKA-19902).",
                snap,
            )
    # (d) reset to earliest without a reason: the log start at the commit lies between the rounds before and
    # after it (log starts only grow), so either round's may be the one the consumer reset to (as S2a)
    for at, start, start_ev in ctx.log_starts_around(c.ts):
        if o == start:
            return _finding(
                "S1d",
                "spurious_rewind_to_earliest",
                c,
                prev,
                {"records_reread": reread, "log_start_offset": start},
                (start_ev,),
                f"rewind {po} -> {o} lands on the log start offset with no truncation, empty group or stale "
                "epoch to explain it: a spurious reset to earliest (KAFKA-6262).",
                at,
            )
    # (e) anything else
    return _finding(
        "S1e",
        "spurious_rewind",
        c,
        prev,
        {"records_reread": reread, "log_start_offset": ls},
        (ls_ev,) if ls is not None else (),
        f"rewind {po} -> {o} is not explained by a truncation, an operator reset or a stale epoch: "
        f"{reread} record(s) re-read.",
        snap,
    )


def pace_rate(records: int, elapsed_ms: int) -> float:
    """Records per ms between two commits; the elapsed time is floored at 1 s (commit timestamps are
    coarse and two commits of one batch can share a millisecond)."""
    return records / max(elapsed_ms, MIN_PACE_ELAPSED_MS)


def classify_jump(
    c: Commit, prev: Commit, ctx: ResetContext, max_step: int | None, max_rate: float | None, since: int
) -> Finding | None:
    """S2: the finding for a forward move ``prev -> c``, or None for an ordinary one. The loop state of
    :func:`check_offset_resets`: ``max_step`` / ``max_rate`` of the sequence's earlier forward moves that
    were not findings (None: none yet), ``since`` the time the previous offset was first committed."""
    o, po = c.committed_offset, prev.committed_offset
    assert o is not None and po is not None
    jump = o - po
    # (a) retention: the previous offset had fallen below the log start and the new one is the log start
    for snap, ls, ls_ev in ctx.log_starts_around(c.ts):
        if po < ls and o == ls:
            return _finding(
                "S2a",
                "retention",
                c,
                prev,
                {"records_skipped": jump, "log_start_offset": ls, "records_affected": jump},
                (ls_ev,),
                f"jump {po} -> {o}: the previous offset had fallen below the log start {ls}; the consumer reset "
                f"to earliest and {jump} record(s) were lost to retention.",
                snap,
            )
    # (b) a jump to the log end: a jump far faster than the sequence's own pace, reaching a log-end estimate
    if max_step is None or max_rate is None:
        return None
    rate = pace_rate(jump, c.ts - since)
    if rate <= ctx.skip_pace_factor * max_rate:
        return None
    est = ctx.log_end_before(c.ts, c.group_id)
    if est is None or o < est.offset:
        return None
    if jump <= max_step:
        return None  # no larger than a step the sequence already took at its own pace: a catch-up
    # the skipped records must have existed when the group last committed (a log-end estimate at or before
    # ``since``: a snapshot round, or another group's commit), and those alone must make the jump a skip:
    # otherwise the group was caught up and consumed a burst produced since (a snapshot round, or another
    # caught-up group's commit, after its previous commit shows the burst, not records it passed over)
    then = ctx.log_end_before(since, c.group_id)
    if then is None:
        return None
    existed = min(o, then.offset) - po
    if existed <= max_step or pace_rate(existed, c.ts - since) <= ctx.skip_pace_factor * max_rate:
        return None
    snap = ctx.leader_at(c.ts)
    r = fence_check(replace(prev, event_ts=c.ts), snap)
    if r.status == "beyond_epoch_end":
        return None  # a truncation explains a reset of the position
    ls, ls_ev = log_start_of(snap)
    if ls is None or po < ls:
        return None  # retention cannot be excluded
    empty = _memberless(c, ctx)
    if empty is not None:  # as S1b: kafka-consumer-groups --reset-offsets --to-latest
        g, why = empty
        return _finding(
            "S2b",
            "operator_reset",
            c,
            prev,
            {"records_skipped": jump, "member_count": g.member_count if g is not None else None,
             "log_start_offset": ls, "log_end_offset": est.offset},
            (g.pointer() if g is not None else "", est.evidence),
            f"jump {po} -> {o} reaches the log end ({est.offset} known at {est.ts}) {why}: an operator reset "
            "(kafka-consumer-groups --reset-offsets --to-latest).",
            snap,
        )
    return _finding(
        "S2b",
        "spurious_skip",
        c,
        prev,
        {
            "records_skipped": jump,
            "log_start_offset": ls,
            "log_end_offset": est.offset,
            "largest_previous_step": max_step,
            "skip_rate_per_min": round(rate * 60_000),
            "previous_rate_per_min": round(max_rate * 60_000),
        },
        (est.evidence, ls_ev),
        f"jump {po} -> {o} reaches the log end ({est.offset} known at {est.ts}) past {jump} record(s) never "
        f"committed as consumed ({existed} of them already written by {then.ts}, before the group's previous "
        f"commit), at {rate * 60_000:.0f} records/min against at most {max_rate * 60_000:.1f} "
        f"between the sequence's earlier commits, with the previous offset still above the log start {ls} and "
        "no truncation: a spurious reset to latest.",
        snap,
    )


def check_offset_resets(
    commits_sorted: Iterable[Commit], context: ResetContext | None = None
) -> list[Finding]:
    """S1 and S2 over one (group, topic, partition) commit sequence in ``__consumer_offsets`` log order.

    Consecutive live commits (txn_state none/committed) are compared; a tombstone ends the sequence (the
    offset was deleted) and the next commit starts a new one, so it is never a rewind. Equal offsets are
    no move. Epoch -1 commits still take part (F5 only disables epoch checks).

    S1, rewind (new < previous), classified in this order:
      S1a ``truncation`` (info) — F2 holds for the previous commit on the leader lineage as of the rewind
      and the new offset is at or above the truncation point; ``over_rewind`` (warning) when below it
      (records re-read = point - new); S1b ``operator_reset`` (info) — the group was empty (or deleted);
      S1c ``stale_epoch_commit`` (warning) — a commit's epoch is below the lineage head (KAFKA-19902);
      S1d ``spurious_rewind_to_earliest`` (error) — the new offset is the log start; S1e ``spurious_rewind``
      (error). Records re-read = previous - new.
    S2, forward move: S2a ``retention`` (info) — previous below the log start and new == log start;
      S2b ``spurious_skip`` (error) — see below, or ``operator_reset`` (info) when the group had no members
      (as S1b). Ordinary forward moves yield nothing.

    Judgement calls:
    - S1a checks the previous commit against the lineage as of the *new* commit (the truncation happened
      before the rewind), and only when the previous epoch is covered by the lineage (>= head epoch):
      endOffsetFor's answer for an epoch older than the head is the head start, no proof of truncation —
      that case is S1c.
    - S1c looks at both commits' epochs (the previous one is what the consumer validated on restart).
    - Log start = the log-start-offset checkpoint, else the repaired lineage head start. For S2a both the
      round at/after and the round at/before the commit are tried, since log starts only move forward.
    - S2b ("jump to the log end past records never committed as consumed") needs: a log-end estimate
      taken at or before the commit that the new offset reaches (a snapshot round's log end or high
      watermark, or the highest offset another group committed before it, :class:`OffsetsSeen`); and
      evidence that the skipped records already existed when the group last committed: the log-end
      estimate as of its previous commit (``since``: a round at or before it, or another group's commit
      before it) must be past the previous offset by enough that those records alone make the jump a skip
      (more than every earlier step, at a rate above the pace factor as below) — else the group was
      caught up and drained records produced since (a burst seen by a round, or by another caught-up
      group's commit, between its two commits: a consumer reads tens of thousands of records a second);
      a jump larger than every earlier step of the sequence; at least one earlier forward step in the
      sequence, and a jump whose *rate* (records / ms between the two commits, the elapsed time floored
      at 1 s) exceeds ``skip_pace_factor`` (default 10) times the highest rate between earlier consecutive
      commits (the time runs from the first commit of the previous offset: a commit repeating an offset,
      e.g. a tool re-committing it, says nothing about progress and must not shorten the interval) — a
      caught-up consumer also commits the log end, at its usual pace, so without a sense of
      that pace a jump is not a skip (a rate, not a step size: a reset commits within seconds, while an
      idle consumer's one large step after a long pause is its normal pace);
      a known log start at or below the previous offset (retention excluded); no truncation (F2 of the
      previous commit). Without these, no guess is made.
    - Operator reset: a group with no members at the commit: its member set folded over all its records
      up to then (:func:`current_membership`: classic ``GroupMetadataValue`` and KIP-848 member records;
      one KIP-848 member leaving removes only that member) is empty, or the group was deleted (the evidence
      names the record). A group with *no* group record at or before the commit (none in the records the
      run has) never had members: when the commit that moved the offset carries no leader epoch (-1), the
      offset was written from outside the group — ``kafka-consumer-groups``, AdminClient, MirrorMaker 2's
      offset sync (``sync.group.offsets.enabled``) — and the move is an operator reset too (no group
      record to cite; ``member_count`` null). With an epoch >= 0 the writer was a consumer (a standalone
      ``assign()`` one: no record either) and the move is judged as any consumer's. Caveat: a client that
      commits no epoch (kafka-python, clients before 2.1) used standalone reads as managed from outside.
    """
    ctx = context or ResetContext()
    out: list[Finding] = []
    prev: Commit | None = None
    since = 0  # when the previous offset was first committed (a repeat of it does not restart the clock)
    max_step: int | None = None
    max_rate: float | None = None
    for c in commits_sorted:
        if not c.is_live:
            continue
        if c.is_tombstone or c.committed_offset is None:
            prev, max_step, max_rate = None, None, None
            continue
        if prev is not None and prev.committed_offset is not None:
            o, po = c.committed_offset, prev.committed_offset
            if o == po:
                prev = c
                continue
            if o < po:
                out.append(classify_rewind(c, prev, ctx))
            else:
                f = classify_jump(c, prev, ctx, max_step, max_rate, since)
                if f is not None:
                    out.append(f)
                else:
                    max_step = o - po if max_step is None else max(max_step, o - po)
                    r = pace_rate(o - po, c.ts - since)
                    max_rate = r if max_rate is None else max(max_rate, r)
        prev, since = c, c.ts
    return out


CORRELATED_KINDS = frozenset(
    {"spurious_rewind", "spurious_rewind_to_earliest", "spurious_skip", "over_rewind", "stale_epoch_commit"}
)
"""Reset kinds M4 may attribute to stale metadata; truncation, operator_reset and retention are
explained by facts of their own."""


def topic_names_of(observations: Iterable[MetadataObservation]) -> dict[str, str]:
    """Topic id -> the name the observations give it (responses naming both; the smallest name should an id
    ever have several), for M4 over findings of responses that name a topic by id only."""
    out: dict[str, str] = {}
    for o in observations:
        if o.topic is not None and o.topic_id is not None and (o.topic_id not in out or o.topic < out[o.topic_id]):
            out[o.topic_id] = o.topic
    return out


def correlate_resets(
    reset_findings: Iterable[Finding],
    metadata_findings: Iterable[Finding],
    window_ms: int = 15 * 60 * 1000,
    group_clients: Mapping[str, Collection[str]] | Callable[[str], Collection[str] | None] | None = None,
    topic_names: Mapping[str, str] | None = None,
) -> list[Finding]:
    """M4: a reset (S1/S2) of a partition within ``window_ms`` after an M1/M2 finding for that partition
    gets ``correlated_finding_id`` (that finding's id) and the cause "stale metadata" (KAFKA-6262).

    When ``group_clients`` (group id -> client ids, from group metadata) knows clients of the reset's
    group, only metadata findings of those clients count; otherwise any client's do. Returns every reset
    finding, in input order, correlated or not (ids unchanged: correlation is not part of the id).

    Judgement calls: only the kinds in :data:`CORRELATED_KINDS` are correlated; the partition is matched
    by (topic, partition) (resets carry no topic id); the window is inclusive, metadata finding time <=
    reset time <= finding time + window; when several qualify, the latest one before the reset wins
    (ties: the smaller finding id). A metadata finding without a topic name (a v12+ response may name a
    topic by id only) is matched under the name ``topic_names`` (topic id -> name, :func:`topic_names_of`
    over the observations) gives its id; without one it matches nothing.
    """
    meta: dict[tuple, list[Finding]] = {}
    for m in metadata_findings:
        if m.rule in ("M1", "M2"):
            topic = m.topic
            if topic is None and m.topic_id is not None and topic_names:
                topic = topic_names.get(m.topic_id)
            meta.setdefault((topic, m.partition), []).append(m)
    out = []
    for r in reset_findings:
        if r.kind not in CORRELATED_KINDS:
            out.append(r)
            continue
        clients: Collection[str] | None = None
        if group_clients is not None and r.group_id is not None:
            clients = group_clients(r.group_id) if callable(group_clients) else group_clients.get(r.group_id)
        cands = [
            m
            for m in meta.get((r.topic, r.partition), ())
            if m.event_ts <= r.event_ts <= m.event_ts + window_ms and (not clients or m.client_id in clients)
        ]
        if not cands:
            out.append(r)
            continue
        best = min(cands, key=lambda m: (-m.event_ts, m.id))
        out.append(r.with_correlation(best.id, "stale metadata"))
    return out
