"""Snapshot rounds of one partition: the one place that groups replica snapshots by time and names
the leader of a round, the leader at / before a time, and a snapshot's log start and log end.

Every rule that needs "the leader lineage at time t" (F2, S1/S2, D1/D2), the commit pass and the HTML
report build one :class:`SnapshotRounds` from a partition's snapshots and ask it; none groups snapshots
on its own.

- A **round**: snapshots sorted by (time, broker); a round starts at a snapshot and takes every later
  one within ``tolerance_ms`` of that start (config ``snapshot_tolerance_seconds``; 0 = identical
  ``snapshot=`` time).
- The **leader** of a round: the replica whose repaired lineage holds the highest epoch; ties go to the
  higher log end offset, then the lower broker id (deterministic).
- The round **at** ``ts``: the first round whose last member is at or after ``ts``, else the newest
  round. The round **before** ``ts``: the newest round whose last member is at or before ``ts``.
- The **leader at** ``ts`` (:meth:`SnapshotRounds.leader_at`, what F2, S1 and S2 judge an event
  against) is the leader of the round at ``ts``, with two exceptions, both decided on topic ids (a
  round's topic id is its leader's, from ``partition.metadata``):

  - a round *without the leader*: its highest epoch is below the highest epoch of an earlier round of
    the same topic id (a partition's epochs never go back within one incarnation of the topic), so every
    replica in it is a lagging follower — a collection sweep that reaches the brokers one by one splits
    into several rounds. Its place is taken by the first later round of that topic id that holds the
    leader, else by the newest earlier one. Without a known topic id a lagging follower cannot be told
    from a re-created topic (epochs restart at 0): the round is kept as it is.
  - a **re-creation** between the rounds around ``ts``: the round chosen holds another topic id than the
    round before ``ts`` (both known). The event may belong to either incarnation, so neither round's
    lineage can judge it: there is no leader at ``ts`` (F2 skips the commit: a new topic id is a new
    baseline, KAFKA-12257).
  - an event **before the creation** of the topic id of the round chosen (``created``: topic id -> creation
    time, from the metadata log's replay; only where that time is known). The round's lineage is a later
    incarnation's, the event belongs to an older one (or to none): there is no leader at ``ts``. This is the
    re-creation above when no round of the older id was taken (its snapshots are missing, or it was
    re-created before the first snapshot).
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np

from ._model import ReplicaSnapshot

__all__ = [
    "LogEndEstimate",
    "Round",
    "SnapshotRounds",
    "leader_key",
    "leader_of_round",
    "log_end_of",
    "log_start_of",
]


_NO_BIRTH = np.iinfo(np.int64).min  # "creation time unknown" in ``SnapshotRounds._born``


def _broker_order(b: str) -> tuple:
    return (0, int(b), "") if b.isdigit() else (1, 0, b)


def leader_key(s: ReplicaSnapshot) -> tuple:
    """Sort key of :func:`leader_of_round`: highest repaired epoch, then higher LEO, then lower broker id."""
    latest = s.repaired_cache().latest_epoch
    return (
        -(-1 if latest is None else latest),
        -(-1 if s.log_end_offset is None else s.log_end_offset),
        _broker_order(s.broker),
    )


def leader_of_round(snapshots: Iterable[ReplicaSnapshot]) -> ReplicaSnapshot | None:
    """The replica whose (repaired) lineage holds the highest epoch; ties go to the higher log end
    offset, then the lower broker id (so the choice is deterministic). None for no snapshots."""
    ordered = sorted(snapshots, key=leader_key)
    return ordered[0] if ordered else None


def log_start_of(snap: ReplicaSnapshot | None) -> tuple[int | None, str]:
    """(log start, evidence) of a snapshot: the log-start-offset checkpoint, else the repaired lineage
    head's start; (None, "") when neither is known (or no snapshot)."""
    if snap is None:
        return None, ""
    if snap.log_start_offset is not None:
        return snap.log_start_offset, f"{snap.pointer()} (log start offset {snap.log_start_offset})"
    head = snap.repaired_cache().earliest_entry
    if head is None:
        return None, ""
    return head.start_offset, f"{snap.pointer(head.epoch)} (lineage head ({head.epoch}, {head.start_offset}))"


def log_end_of(snap: ReplicaSnapshot) -> int | None:
    """What a snapshot says of its log end: the log end offset (segments), else the high watermark
    (replication-offset-checkpoint, a lower bound of the LEO); None when neither is known."""
    return snap.log_end_offset if snap.log_end_offset is not None else snap.high_watermark


def _behind(follower: ReplicaSnapshot, leader: ReplicaSnapshot) -> bool:
    """Whether ``follower``'s (repaired) lineage is a part of ``leader``'s: its entries are the leader's, except
    that its first may start later (its log start moved on), as a lagging follower's are. One with an entry the
    leader lacks (a bogus or diverged lineage) is not taken for a lagging follower."""
    f, lead = follower.repaired_cache().entries, leader.repaired_cache().entries
    starts = {e.epoch: e.start_offset for e in lead}
    if not f or f[0].epoch not in starts or starts[f[0].epoch] > f[0].start_offset:
        return False
    return all(starts.get(e.epoch) == e.start_offset for e in f[1:])


def _lead_rounds(leaders: tuple[ReplicaSnapshot, ...]) -> np.ndarray:
    """Per round, the round whose leader stands for it: itself, or for a round whose highest epoch is
    below that of an earlier round of the same (known) topic id, and whose lineage is a part of that round's
    leader's (:func:`_behind`), the first later round of that id which is not below, else the newest earlier
    one that was not."""
    n = len(leaders)
    lead = np.arange(n, dtype=np.int64)
    lagging = np.zeros(n, dtype=bool)
    best: dict[str, tuple[int, int]] = {}  # topic id -> (highest epoch so far, newest round holding it)
    for i, s in enumerate(leaders):
        latest = s.repaired_cache().latest_epoch
        if s.topic_id is None or latest is None:
            continue
        seen = best.get(s.topic_id)
        if seen is not None and latest < seen[0] and _behind(s, leaders[seen[1]]):
            lead[i], lagging[i] = seen[1], True
        else:
            best[s.topic_id] = (latest, i)
    later: dict[str, int] = {}  # topic id -> the first later round holding the leader
    for i in range(n - 1, -1, -1):
        tid = leaders[i].topic_id
        if tid is None:
            continue
        if lagging[i]:
            lead[i] = later.get(tid, lead[i])
        elif leaders[i].repaired_cache().latest_epoch is not None:
            later[tid] = i
    return lead


@dataclass(frozen=True, slots=True)
class LogEndEstimate:
    """A known log end (next offset) of the partition at a time: from segments, the
    replication-offset-checkpoint (high watermark), or the highest offset seen anywhere."""

    ts: int
    offset: int
    evidence: str = ""
    from_commits: bool = False
    """True for "the highest offset seen" (:class:`~epochlib.rules.OffsetsSeen`), False for snapshots and
    extra estimates."""


@dataclass(frozen=True, slots=True)
class Round:
    """One snapshot round: its members in (time, broker) order and its leader."""

    start: int
    """``snapshot_ts`` of the first member."""
    end: int
    """``snapshot_ts`` of the last member (a round is "at or after t" when its end is)."""
    members: tuple[ReplicaSnapshot, ...]
    leader: ReplicaSnapshot

    def by_broker(self) -> dict[str, ReplicaSnapshot]:
        """broker -> snapshot; a broker seen twice in the round keeps its later snapshot."""
        out: dict[str, ReplicaSnapshot] = {}
        for s in self.members:
            out[s.broker] = s
        return out


class SnapshotRounds:
    """The rounds of one partition's replica snapshots, built once; every lookup is a bisection.

    ``ends`` (numpy, int64) and ``leaders`` are aligned with ``rounds``; the ``indices_*`` methods answer
    many times at once (the columnar commit pass)."""

    __slots__ = ("ends", "lead", "leaders", "rounds", "tolerance_ms", "_born", "_ends_list", "_ids")

    def __init__(self, snapshots: Iterable[ReplicaSnapshot], tolerance_ms: int = 0,
                 created: Mapping[str, int] | None = None) -> None:
        """``created``: topic id -> creation time (epoch ms) where the metadata log knows it; an event before
        the creation of the round's topic id has no leader (see the module docstring)."""
        ordered = sorted(snapshots, key=lambda s: (s.snapshot_ts, s.broker))
        groups: list[list[ReplicaSnapshot]] = []
        for s in ordered:
            if groups and s.snapshot_ts - groups[-1][0].snapshot_ts <= tolerance_ms:
                groups[-1].append(s)
            else:
                groups.append([s])
        self.tolerance_ms = tolerance_ms
        self.rounds: tuple[Round, ...] = tuple(
            Round(g[0].snapshot_ts, max(s.snapshot_ts for s in g), tuple(g), leader_of_round(g))  # type: ignore[arg-type]
            for g in groups
        )
        self._ends_list = [r.end for r in self.rounds]
        self.ends = np.array(self._ends_list, dtype=np.int64)
        self.leaders: tuple[ReplicaSnapshot, ...] = tuple(r.leader for r in self.rounds)
        self.lead = _lead_rounds(self.leaders)
        """Per round, the index of the round whose leader stands for it (itself, unless it has no leader:
        see the module docstring)."""
        codes: dict[str, int] = {}
        self._ids = np.array(
            [-1 if s.topic_id is None else codes.setdefault(s.topic_id, len(codes)) for s in self.leaders],
            dtype=np.int64,
        )
        """Per round, its leader's topic id as a small integer; -1 when unknown."""
        born = created or {}
        self._born = np.array(
            [_NO_BIRTH if s.topic_id is None else int(born.get(s.topic_id, _NO_BIRTH)) for s in self.leaders],
            dtype=np.int64,
        )
        """Per round, the creation time of its leader's topic id; the int64 minimum when unknown."""

    def __len__(self) -> int:
        return len(self.rounds)

    def __iter__(self):
        return iter(self.rounds)

    # -- one time ---------------------------------------------------------------------------------

    def index_at(self, ts: int) -> int | None:
        """Index of the first round ending at or after ``ts``, else of the newest; None without rounds."""
        if not self.rounds:
            return None
        return min(bisect.bisect_left(self._ends_list, ts), len(self.rounds) - 1)

    def index_before(self, ts: int) -> int | None:
        """Index of the newest round ending at or before ``ts``; None when there is none."""
        i = bisect.bisect_right(self._ends_list, ts) - 1
        return i if i >= 0 else None

    def leader_index_at(self, ts: int) -> int | None:
        """Index of the round whose leader judges an event at ``ts``: the round at ``ts``, or the round
        standing for it when it has no leader; None without rounds, when the topic was re-created
        between the round before ``ts`` and that round, and when ``ts`` is before that round's topic id was
        created (see the module docstring)."""
        i = self.index_at(ts)
        if i is None:
            return None
        j, b = int(self.lead[i]), self.index_before(ts)
        if b is not None and self._ids[j] >= 0 and self._ids[b] >= 0 and self._ids[j] != self._ids[b]:
            return None
        if ts < self._born[j]:
            return None
        return j

    def leader_at(self, ts: int) -> ReplicaSnapshot | None:
        """The leader's snapshot for an event at ``ts`` (:meth:`leader_index_at`); None without one."""
        i = self.leader_index_at(ts)
        return None if i is None else self.leaders[i]

    def leader_before(self, ts: int) -> ReplicaSnapshot | None:
        """The leader's snapshot of the newest round taken at or before ``ts``."""
        i = self.index_before(ts)
        return None if i is None else self.leaders[i]

    # -- many times (numpy) -----------------------------------------------------------------------

    def indices_at(self, ts: np.ndarray) -> np.ndarray:
        """:meth:`index_at` for every element of ``ts`` (needs at least one round)."""
        return np.minimum(np.searchsorted(self.ends, ts, side="left"), len(self.rounds) - 1)

    def indices_before(self, ts: np.ndarray) -> np.ndarray:
        """:meth:`index_before` for every element of ``ts``; -1 where there is none."""
        return np.searchsorted(self.ends, ts, side="right") - 1

    def leader_indices_at(self, ts: np.ndarray) -> np.ndarray:
        """:meth:`leader_index_at` for every element of ``ts`` (needs at least one round); -1 where None."""
        j, b = self.lead[self.indices_at(ts)], self.indices_before(ts)
        idj, idb = self._ids[j], self._ids[np.maximum(b, 0)]
        other = (b >= 0) & (idj >= 0) & (idb >= 0) & (idj != idb)
        return np.where(other | (ts < self._born[j]), -1, j)

    # -- log bounds -------------------------------------------------------------------------------

    def log_end_estimates(self, extra: Iterable[LogEndEstimate] = ()) -> list[LogEndEstimate]:
        """``extra`` plus each round leader's log end (:func:`log_end_of`), sorted by (time, offset)."""
        ests = list(extra)
        for lead in self.leaders:
            end = log_end_of(lead)
            if end is not None:
                ests.append(LogEndEstimate(lead.snapshot_ts, end, lead.pointer() + f" (log end {end})"))
        ests.sort(key=lambda e: (e.ts, e.offset))
        return ests
