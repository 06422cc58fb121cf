"""Divergence between replicas of one partition: D1 and D2.

Snapshots are grouped into rounds: sorted by time, a round takes every snapshot within
``tolerance_ms`` of its first one (config ``snapshot_tolerance_seconds``); a broker seen twice in one
round keeps its later snapshot.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import NamedTuple

from ._model import Finding, ReplicaSnapshot
from .rounds import SnapshotRounds, leader_key, leader_of_round, log_end_of

__all__ = ["EpochDisagreement", "check_replica_divergence", "epoch_disagreements", "held_end", "snapshot_rounds"]


def snapshot_rounds(
    snapshots: Iterable[ReplicaSnapshot], tolerance_ms: int
) -> list[tuple[int, dict[str, ReplicaSnapshot]]]:
    """(round start ts, broker -> snapshot) in time order (:class:`~epochlib.rules.rounds.SnapshotRounds`;
    a broker seen twice in one round keeps its later snapshot)."""
    return [(r.start, r.by_broker()) for r in SnapshotRounds(snapshots, tolerance_ms)]


def _same_topic(a: ReplicaSnapshot, b: ReplicaSnapshot) -> bool:
    return a.topic_id is None or b.topic_id is None or a.topic_id == b.topic_id


def _d2_explained(ref_k: int, ref_start: int, k: int, start: int, ref_n: int, n: int) -> bool:
    """Pair conditions under which differing starts of one epoch are not a conflict: the epoch is the last
    entry of either lineage, or a head entry starts later than the other's (its own retention moved it)."""
    if ref_k == ref_n - 1 or k == n - 1:
        return True
    # truncateFromStart moves a head entry's start forward to that replica's own log start
    return (start > ref_start and k == 0) or (ref_start > start and ref_k == 0)


def _d2_round(replicas: list[ReplicaSnapshot]) -> list[tuple[tuple, Finding]]:
    """One finding per (epoch, disagreeing replica) of a round.

    The reference is the round's leader (:func:`leader_of_round`) for every epoch it holds; the
    disagreeing replicas are those holding the epoch at another start. For an epoch the leader does not
    hold, the reference is the majority start among the replicas holding it (a tie goes to the start of
    the replica ranked first by :func:`leader_of_round`), and the minority replicas are reported."""
    found: list[tuple[tuple, Finding]] = []
    leader = leader_of_round(replicas)
    if leader is None:
        return found
    caches = {s.broker: s.repaired_cache().entries for s in replicas}
    rank = {s.broker: i for i, s in enumerate(sorted(replicas, key=leader_key))}
    usable = [s for s in replicas if caches[s.broker] and _same_topic(s, leader)]
    held: dict[int, dict[str, tuple[int, int]]] = {}  # epoch -> broker -> (index, start)
    for s in usable:
        for k, e in enumerate(caches[s.broker]):
            held.setdefault(e.epoch, {})[s.broker] = (k, e.start_offset)
    by_broker = {s.broker: s for s in usable}
    for epoch in sorted(held):
        holders = held[epoch]
        if len(holders) < 2:
            continue
        if leader.broker in holders:
            ref = leader.broker
        else:
            votes: dict[int, list[str]] = {}
            for b, (_, st) in holders.items():
                votes.setdefault(st, []).append(b)
            best = max(votes.values(), key=lambda bs: (len(bs), -min(rank[b] for b in bs)))
            ref = min(best, key=lambda b: rank[b])
        ref_k, ref_start = holders[ref]
        ref_n = len(caches[ref])
        bad = [
            b
            for b, (k, st) in sorted(holders.items(), key=lambda kv: rank[kv[0]])
            if b != ref and st != ref_start and not _d2_explained(ref_k, ref_start, k, st, ref_n, len(caches[b]))
        ]
        r = by_broker[ref]
        for b in bad:
            x = by_broker[b]
            sx = holders[b][1]
            others = [o for o in bad if o != b]
            key = ("D2", x.broker, epoch, sx, ref_start)
            found.append(
                (
                    key,
                    Finding(
                        rule="D2",
                        kind="replica_lineage_conflict",
                        event_ts=x.snapshot_ts,
                        topic=x.topic,
                        topic_id=x.topic_id or r.topic_id,
                        partition=x.partition,
                        broker=x.broker,
                        numbers={
                            "leader_epoch": epoch,
                            "start_offset": sx,
                            "other_start_offset": ref_start,
                            "other_broker": int(r.broker) if r.broker.isdigit() else None,
                            "conflicting_replicas": len(bad),
                        },
                        evidence=(x.pointer(epoch), r.pointer(epoch), *(by_broker[o].pointer(epoch) for o in others)),
                        detail=(
                            f"epoch {epoch} starts at {sx} on broker {x.broker} but at {ref_start} on "
                            + (f"the leader, broker {r.broker}" if r is leader else
                               f"broker {r.broker} and the majority of the replicas holding it (the leader "
                               f"{leader.broker} does not)")
                            + ", and it is not the last entry of either lineage"
                            + (f"; broker(s) {', '.join(others)} disagree too." if others else ".")
                        ),
                    ),
                )
            )
    return found


def _d1_point(leader: ReplicaSnapshot, follower: ReplicaSnapshot) -> tuple[int, int, int] | None:
    """(E', truncation point, follower LEO) when the follower holds offsets past the truncation
    point; None when it does not, or the comparison cannot be made."""
    # The follower's LEO, else its high watermark (replication-offset-checkpoint): HW <= LEO, so a HW
    # above the point proves the divergent suffix too (and the offsets it gives are a lower bound). The
    # leader's LEO is never needed: the follower's latest epoch is below the leader's, so endOffsetFor
    # answers with the start of the leader's next epoch.
    f_leo = follower.log_end_offset if follower.log_end_offset is not None else follower.high_watermark
    if f_leo is None:
        return None
    lc, fc = leader.repaired_cache(), follower.repaired_cache()
    f_latest = fc.latest_epoch
    if f_latest is None or lc.latest_epoch is None:
        return None
    if f_latest == lc.latest_epoch:
        return None  # same current epoch: the follower's data came from this leader (skew, not divergence)
    leader_leo = leader.log_end_offset if leader.log_end_offset is not None else -1
    e2, end = lc.end_offset_for(f_latest, leader_leo)
    if e2 < 0 or end < 0:
        return None
    _, f_end = fc.end_offset_for(e2, f_leo)
    point = end if f_end < 0 else min(end, f_end)
    if f_leo > point:
        return (e2, point, f_leo)
    return None


def check_replica_divergence(
    snapshots_of_one_partition: Iterable[ReplicaSnapshot], tolerance_ms: int = 300_000
) -> list[Finding]:
    """D1 and D2 over every snapshot (all brokers, all times) of one topic-partition.

    - D2 ``replica_lineage_conflict`` (error): two replicas of one round hold the same epoch with
      different start offsets, and it is not the last entry of either lineage. One finding per (epoch,
      round, disagreeing replica): the replica whose start differs from the leader's (the round's
      highest-epoch replica, as :func:`leader_of_round`); ``broker`` = that replica, the leader in
      ``other_broker``/``other_start_offset`` and evidence, the other disagreeing replicas in evidence and
      ``conflicting_replicas``. When the leader does not hold the epoch, the majority start among the
      replicas holding it is the reference (ties: the start of the replica ranked first as a leader).
    - D1 ``replica_divergence_unresolved`` (error): with A the replica holding the highest epoch,
      (E', end) = A.endOffsetFor(F.latestEpoch); point = min(end, F.endOffsetFor(E').end); F's LEO above
      the point in two consecutive rounds (consecutive rounds in which F and a leader appear). Reports the
      offsets F holds that A does not (``records_affected`` = F.LEO - point).

    Judgement calls: lineages are compared after the LogLoader repair; replicas whose topic ids differ
    are not compared (re-created topic); a head entry whose start is later than the other replica's is
    explained by that replica's own retention (truncateFromStart), not a conflict; the leader is the
    highest epoch, ties broken by the higher LEO then the lower broker id; a follower whose latest epoch
    equals the leader's is never divergent (its data came from that leader; LEO differences are snapshot
    skew); D1 needs the follower's LEO or, failing that, its high watermark (a lower bound of the LEO:
    ``log_end_offset``/``records_affected`` are then lower bounds too); each condition is reported once, at the first round that proves it, so a
    persisting condition is not repeated every round: a D2 conflict (replica, epoch, its start, reference start)
    once per call, a D1 condition (follower, E', point) again only after it had resolved.
    """
    out: list[Finding] = []
    seen_d2: set[tuple] = set()
    pending: dict[str, tuple] = {}  # follower -> (E', point) seen in its previous round
    open_d1: set[tuple] = set()
    for _, members in snapshot_rounds(snapshots_of_one_partition, tolerance_ms):
        replicas = sorted(members.values(), key=lambda s: s.broker)
        for key, f in _d2_round(replicas):
            if key not in seen_d2:
                seen_d2.add(key)
                out.append(f)
        leader = leader_of_round(replicas)
        now: dict[str, tuple] = {}
        for f in replicas:
            if leader is None or f.broker == leader.broker or not _same_topic(f, leader):
                continue
            res = _d1_point(leader, f)
            if res is None:
                continue
            e2, point, f_leo = res
            now[f.broker] = (e2, point)
            prev = pending.get(f.broker)
            key = (f.broker, e2, point)
            if prev is not None and key not in open_d1:
                open_d1.add(key)
                out.append(
                    Finding(
                        rule="D1",
                        kind="replica_divergence_unresolved",
                        event_ts=f.snapshot_ts,
                        topic=f.topic,
                        topic_id=f.topic_id or leader.topic_id,
                        partition=f.partition,
                        broker=f.broker,
                        numbers={
                            "leader_epoch": f.repaired_cache().latest_epoch,
                            "expected_epoch": e2,
                            "end_offset": point,
                            "truncation_point": point,
                            "log_end_offset": f_leo,
                            "records_affected": f_leo - point,
                            "leader_broker": int(leader.broker) if leader.broker.isdigit() else None,
                            "leader_log_end_offset": leader.log_end_offset,
                        },
                        evidence=(f.pointer(f.repaired_cache().latest_epoch), leader.pointer(e2)),
                        detail=(
                            f"broker {f.broker} still holds offsets [{point}, {f_leo}) that leader {leader.broker} "
                            f"does not (divergence after epoch {e2}) in two consecutive snapshots: its divergent "
                            "suffix was not truncated (KAFKA-10706)."
                        ),
                    )
                )
        # a follower that resolved (or vanished) closes its open conditions
        for key in list(open_d1):
            if key[0] not in now or now[key[0]] != key[1:]:
                open_d1.discard(key)
        pending = now
    return out


class EpochDisagreement(NamedTuple):
    """Offsets ``[lo, hi)`` that replica ``broker_a`` assigns to ``epoch_a`` and ``broker_b`` to ``epoch_b``
    (None: before the replica's first entry)."""

    lo: int
    hi: int
    broker_a: str
    epoch_a: int | None
    broker_b: str
    epoch_b: int | None


def _file_epoch_at(entries: Sequence[tuple[int, int]], offset: int) -> int | None:
    """The epoch of ``offset`` as the checkpoint file states it: the last entry (by start, stable) starting
    at or before it."""
    found = None
    for epoch, start in entries:
        if start > offset:
            break
        found = epoch
    return found


def held_end(s: ReplicaSnapshot) -> int:
    """The highest offset the replica is known to hold + 1: its log end (:func:`~epochlib.rules.rounds.log_end_of`)
    but at least its last entry's start; without a log end, its last entry's start + 1."""
    last = max((e.start_offset for e in s.entries), default=0)
    end = log_end_of(s)
    return max(end, last) if end is not None else last + 1


def epoch_disagreements(replicas: Sequence[ReplicaSnapshot]) -> list[EpochDisagreement]:
    """For each pair of replicas (in the given order) of one round, the offset ranges both hold (from the
    later first entry to the smaller :func:`_held_end`) to which their checkpoints assign different
    epochs; adjacent ranges of the same pair and epochs are merged.

    A picture of the files, not a rule (D1/D2 decide findings): entries are taken as the files state them
    (sorted by start, not repaired, as the HTML report draws them), so a lagging follower is not
    divergent but any fork of the offset -> epoch map is shown."""
    found: list[EpochDisagreement] = []
    spans = [sorted(((e.epoch, e.start_offset) for e in s.entries), key=lambda es: es[1]) for s in replicas]
    for i, a in enumerate(replicas):
        for j in range(i + 1, len(replicas)):
            b = replicas[j]
            ea_s, eb_s = spans[i], spans[j]
            if not ea_s or not eb_s:
                continue
            lo = max(ea_s[0][1], eb_s[0][1])
            hi = min(held_end(a), held_end(b))
            if hi <= lo:
                continue
            points = sorted({lo, hi, *(s for _e, s in ea_s + eb_s if lo < s < hi)})
            for p, q in zip(points, points[1:], strict=False):
                xa, xb = _file_epoch_at(ea_s, p), _file_epoch_at(eb_s, p)
                if xa == xb:
                    continue
                last = found[-1] if found else None
                if last is not None and last.hi == p and last[2:] == (a.broker, xa, b.broker, xb):
                    found[-1] = last._replace(hi=q)
                else:
                    found.append(EpochDisagreement(p, q, a.broker, xa, b.broker, xb))
    return found
