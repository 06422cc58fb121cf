"""Fencing of commits, KIP-320 applied after the fact: F2, F4 (and F5, the epoch -1 filter).

The leader lineage at a commit's time is :meth:`SnapshotRounds.leader_at
<epochlib.rules.rounds.SnapshotRounds.leader_at>`: the first snapshot round taken at or after the commit
(the newest round when none is later), and in it the replica whose lineage holds the highest epoch; a
round of lagging followers is replaced by one holding the leader, and a commit between rounds of two
topic ids (a re-created topic), or before the creation of the round's topic id (when the metadata log
gives it), has none (:mod:`epochlib.rules.rounds`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from ._model import Commit, Finding, ReplicaSnapshot
from .rounds import SnapshotRounds

__all__ = [
    "FenceResult",
    "LineageLookup",
    "check_commit_fencing",
    "fence_check",
    "leader_snapshot_at",
    "make_lineage_lookup",
]

LineageLookup = Callable[[int], "ReplicaSnapshot | None"]


def leader_snapshot_at(
    snapshots: Sequence[ReplicaSnapshot], ts: int, tolerance_ms: int = 0, topic_created: Mapping[str, int] | None = None
) -> ReplicaSnapshot | None:
    """The leader's snapshot for an event at ``ts``: :meth:`SnapshotRounds.leader_at
    <epochlib.rules.rounds.SnapshotRounds.leader_at>` (the first round at or after ``ts``, else the
    newest; in it the replica with the highest epoch; see there for the exceptions). None when there are
    no snapshots, or no leader at ``ts`` (``topic_created``: topic id -> creation time, from the metadata log)."""
    return SnapshotRounds(snapshots, tolerance_ms, topic_created).leader_at(ts)


def make_lineage_lookup(snapshots: Iterable[ReplicaSnapshot], tolerance_ms: int = 0,
                        topic_created: Mapping[str, int] | None = None) -> LineageLookup:
    """A ``lineage_lookup(ts)`` over a fixed set of snapshots of one partition (the rounds are built
    once, :class:`~epochlib.rules.rounds.SnapshotRounds`; each lookup is a bisection). ``topic_created``:
    topic id -> creation time where the metadata log knows it (no leader for a commit before it)."""
    return SnapshotRounds(snapshots, tolerance_ms, topic_created).leader_at


@dataclass(frozen=True, slots=True)
class FenceResult:
    """The OffsetsForLeaderEpoch verdict for one commit against one lineage."""

    status: str  # "ok" | "beyond_epoch_end" | "unknown_epoch" | "skipped"
    end_epoch: int
    end_offset: int
    head_epoch: int | None
    latest_epoch: int | None
    reason: str = ""


def fence_check(commit: Commit, snap: ReplicaSnapshot | None) -> FenceResult:
    """F2 for one commit: ``(E', end) = endOffsetFor(e, LEO)`` on the repaired leader lineage.

    ``skipped`` when: the epoch is -1 (F5); no snapshot or an empty lineage (no evidence); the snapshot
    is older than the commit and the commit's epoch is the latest (or newer) one — the log and the epochs
    may have grown since, so only a later snapshot can judge it; the epoch is the latest but the LEO is
    unknown."""
    e, o = commit.epoch, commit.committed_offset
    if e < 0 or o is None:
        return FenceResult("skipped", -1, -1, None, None, "epoch -1 (F5)")
    if snap is None:
        return FenceResult("skipped", -1, -1, None, None, "no lineage snapshot")
    cache = snap.repaired_cache()
    head = cache.earliest_entry
    latest = cache.latest_epoch
    if latest is None:
        return FenceResult("skipped", -1, -1, None, None, "empty lineage")
    head_epoch = head.epoch if head else None
    older = snap.snapshot_ts < commit.ts
    if older and e >= latest:
        return FenceResult("skipped", -1, -1, head_epoch, latest, "snapshot older than the commit")
    if e == latest and snap.log_end_offset is None:
        return FenceResult("skipped", -1, -1, head_epoch, latest, "log end offset unknown")
    leo = snap.log_end_offset if snap.log_end_offset is not None else -1
    end_epoch, end = cache.end_offset_for(e, leo)
    if end_epoch == -1:
        return FenceResult("unknown_epoch", end_epoch, end, head_epoch, latest)
    if 0 <= end < o:
        return FenceResult("beyond_epoch_end", end_epoch, end, head_epoch, latest)
    return FenceResult("ok", end_epoch, end, head_epoch, latest)


def _pointers(*commits: Commit | None) -> tuple[str, ...]:
    return tuple(c.pointer() for c in commits if c is not None)


def _subject(c: Commit) -> dict:
    return dict(event_ts=c.ts, topic=c.topic, partition=c.partition, group_id=c.group_id)


def check_commit_fencing(
    commits_sorted: Iterable[Commit], lineage_lookup: LineageLookup | None
) -> list[Finding]:
    """F2 and F4 over one (group, topic, partition) commit sequence in ``__consumer_offsets`` log order.

    - F2 ``commit_beyond_epoch_end`` (error): end >= 0 and end < offset; records affected = offset - end.
      F2 ``commit_unknown_epoch`` (error): E' = -1, the epoch is newer than the whole lineage.
    - F4 ``commit_epoch_regression`` (warning): epoch >= 0 and below the highest epoch committed before
      (KIP-232's INVALID_LEADER_EPOCH, not enforced by brokers). F4 ``commit_epoch_dropped`` (info):
      epoch -1 after epochs >= 0.
    - F5: epoch -1 (or null) disables the epoch checks for that commit.

    Only ``txn_state`` none/committed commits count (aborted/open are ignored); a tombstone ends the
    sequence, the next commit starts a new F4 baseline.

    Judgement calls: F2 uses :func:`fence_check` (skips a snapshot older than the commit for the latest
    epoch, and empty lineages); a run of commits repeating the (offset, epoch) of the previous live commit
    gives at most one F2, at its first commit that is beyond the end (idle consumers re-commit the same
    position every few seconds: a run judged clean against one snapshot round is judged again against the
    next, where an unclean election may have cut the epoch under it); ``commit_epoch_dropped`` is reported
    once per run of -1 commits; an epoch -1 commit leaves the F4 baseline unchanged.
    """
    out: list[Finding] = []
    highest: int | None = None
    highest_commit: Commit | None = None
    dropped_reported = False
    last_key: tuple[int | None, int] | None = None
    last_snap: ReplicaSnapshot | None = None
    run_reported = False  # the current run of commits repeating last_key has given its F2
    for c in commits_sorted:
        if not c.is_live:
            continue
        if c.is_tombstone:
            highest, highest_commit, dropped_reported, last_key = None, None, False, None
            continue
        e = c.epoch
        key = (c.committed_offset, e)
        if e < 0:
            if highest is not None and not dropped_reported:
                out.append(
                    Finding(
                        rule="F4",
                        kind="commit_epoch_dropped",
                        numbers={
                            "committed_offset": c.committed_offset,
                            "leader_epoch": -1,
                            "expected_epoch": highest,
                        },
                        evidence=_pointers(c, highest_commit),
                        detail=(
                            f"commit at offset {c.committed_offset} carries no leader epoch (-1) after epoch "
                            f"{highest} had been committed: client downgrade or external tool; epoch checks off."
                        ),
                        **_subject(c),
                    )
                )
                dropped_reported = True
            last_key = key
            continue
        dropped_reported = False
        if highest is not None and e < highest:
            out.append(
                Finding(
                    rule="F4",
                    kind="commit_epoch_regression",
                    numbers={
                        "committed_offset": c.committed_offset,
                        "leader_epoch": e,
                        "expected_epoch": highest,
                    },
                    evidence=_pointers(c, highest_commit),
                    detail=(
                        f"commit at offset {c.committed_offset} carries epoch {e}, lower than epoch {highest} "
                        "committed before (KIP-232 INVALID_LEADER_EPOCH, not enforced by the broker)."
                    ),
                    **_subject(c),
                )
            )
        if highest is None or e > highest:
            highest, highest_commit = e, c
        snap = lineage_lookup(c.ts) if lineage_lookup is not None else None
        if key != last_key:
            last_key, run_reported = key, False
        elif run_reported or snap is last_snap:
            continue  # the run of repeats has its F2, or this round already judged it
        last_snap = snap
        r = fence_check(c, snap)
        if r.status in ("ok", "skipped") or snap is None:
            continue
        run_reported = True
        ev = (c.pointer(), snap.pointer(r.end_epoch if r.end_epoch >= 0 else r.latest_epoch))
        end_line = snap.end_line_of(r.end_epoch) if r.end_epoch >= 0 else None
        if end_line is not None:  # the line whose start offset is the epoch's end
            ev += (f"{snap.pointer()} line {end_line}",)
        nums = {
            "committed_offset": c.committed_offset,
            "leader_epoch": e,
            "expected_epoch": r.end_epoch,
            "end_offset": r.end_offset,
            "log_end_offset": snap.log_end_offset,
            "snapshot_ts": snap.snapshot_ts,  # the round that judged it: a K2 cause may come after the commit
        }
        if r.status == "unknown_epoch":
            out.append(
                Finding(
                    rule="F2",
                    kind="commit_unknown_epoch",
                    numbers={**nums, "records_affected": None},
                    evidence=ev,
                    detail=(
                        f"commit at offset {c.committed_offset} carries epoch {e}, newer than every epoch in "
                        f"the leader lineage on broker {snap.broker} (latest {r.latest_epoch})."
                    ),
                    **_subject(c),
                    broker=snap.broker,
                    topic_id=snap.topic_id,
                )
            )
        else:
            out.append(
                Finding(
                    rule="F2",
                    kind="commit_beyond_epoch_end",
                    numbers={**nums, "records_affected": c.committed_offset - r.end_offset},  # type: ignore[operator]
                    evidence=ev,
                    detail=(
                        f"commit at offset {c.committed_offset} in epoch {e} is beyond the end {r.end_offset} "
                        f"of epoch {r.end_epoch} in the leader lineage on broker {snap.broker}: "
                        f"{c.committed_offset - r.end_offset} consumed record(s) are no longer in the log."  # type: ignore[operator]
                    ),
                    **_subject(c),
                    broker=snap.broker,
                    topic_id=snap.topic_id,
                )
            )
    return out
