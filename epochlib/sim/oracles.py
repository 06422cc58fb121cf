"""Ground-truth oracles: a rule's text applied to exactly what the simulator wrote, so the truth names every
consequence of an incident. The engine (:mod:`epochlib.sim.engine`) feeds them; the F2 and F4 bookkeeping
that lives on its commit path stays there.

- L5 (:func:`lineage_change`): every replica's consecutive readable snapshot lineages, each as
  the broker loads it (:func:`lineage_as_loaded`: a non-monotonic file loses the entries its
  out-of-order line evicts, a consequence L5 compares with the snapshots before and after it), keyed
  by topic id, so a re-created topic starts fresh: tail removal = ``lineage_truncated``; an
  interior entry vanished or moved = ``lineage_rewritten``; a vanished entry is head trimming only when
  its offsets lie wholly below the new head (by offsets, not epochs: a follower that truncated and caught
  up from a newer leader also shows only higher epochs).
- F2's leader of a snapshot round (:func:`leader_rank`), as the audit can tell it from the files.
- M (:class:`MetadataOracle`): every captured response (JSONL and pcap) in capture-time order: M1 per
  (client, topic id, partition), M2 per (topic id, partition) with the 1 s grace, M3 per (client, topic
  name): an older topic id, or (without ids) a drop to epoch 0 with a new replica set, once per response
  and topic. Where the controller's metadata log covers the capture time, a response without ids is keyed
  by the id the log gives its topic name then (detection-rules.md M3: the heuristic is for responses
  *without* ids; kraft-metadata.md §6.1: the log's topic-id lifecycle replaces it), so a re-creation is a
  new id — a silent new baseline, no ``possible_topic_recreation``.
- M with the controller's metadata log (:class:`LogOracle`, issue 15): M5 per client in capture order
  — a response's served interval is the intersection over its partitions of [offset where the served
  epoch began, offset where the next began — or where the topic id was removed); empty =
  ``metadata_state_mixed``, ending at or before the start of an interval the client already had =
  ``metadata_offset_regression``; the partition that proves it is the one whose interval ends first — and
  M2 where the log had committed a higher epoch before t - grace although no capture had shown it yet
  (the captures-only findings above are a subset of these, and stay as they are).
"""


from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from .cluster import Client, LeaderEpochCache, Part

__all__ = ["GRACE_MS", "LogOracle", "MetadataOracle", "leader_rank", "lineage_as_loaded", "lineage_change"]

GRACE_MS = 1000  # M2: a broker may serve an older epoch this long after a newer one was first seen


class MetadataOracle:
    """M1/M2/M3 over the captured responses, fed in capture order; ``truth(rule, kind, t, note, **subject)``
    records each finding."""

    def __init__(self, truth: Callable[..., None], log_id: Callable[[str, int], str | None] | None = None) -> None:
        self.truth = truth
        # (topic name, capture ms) -> the id the metadata log gives the name then, None where no log covers it
        self.log_id = log_id
        self.client_max: dict[tuple, int] = {}  # (client, partition key) -> highest epoch the client saw
        self.first_seen: dict[tuple, dict[int, int]] = {}  # partition key -> epoch -> first capture time
        self.ids: dict[tuple[str, str], list[str]] = {}  # (client, topic name) -> topic ids in order seen
        self.name_replicas: dict[tuple, tuple] = {}  # (client, partition key) -> replica set (no topic ids)

    def observe(self, c: Client, b: int, t: int, obs: list) -> None:
        """M1/M2/M3 by the rule text over every captured response, in capture order."""
        if c.version < 7:
            return
        m3_seen: set[str] = set()
        recreated: set[str] = set()
        for name, tid, idx, epoch, replicas in obs:
            if c.version >= 10:
                ids = self.ids.setdefault((c.client_id, name), [])
                if ids and tid != ids[-1] and tid in ids:
                    if name in m3_seen:
                        continue
                    m3_seen.add(name)
                    self.truth("M3", "topic_id_regression", t, f"served topic id {tid} after {ids[-1]}",
                                topic=name, topic_id=tid, client_id=c.client_id, broker=b, newest_topic_id=ids[-1])
                    continue
                if tid not in ids:
                    ids.append(tid)
                key = ("id", tid, idx)
            elif (lid := self.log_id(name, t) if self.log_id is not None else None) is not None:
                key = ("id", lid, idx)  # the log knows the topic's incarnation: no guessing
            else:
                key = ("name", name, idx)
                prev = self.name_replicas.get((c.client_id, key))
                self.name_replicas[(c.client_id, key)] = tuple(sorted(replicas))
                if prev is not None and epoch == 0 and prev != tuple(sorted(replicas)):
                    if self.client_max.get((c.client_id, key), -1) > 0 and name not in recreated:
                        recreated.add(name)  # one finding per (client, response, topic), as the rule
                        self.truth("M3", "possible_topic_recreation", t, "epoch dropped to 0 with a new replica "
                                    "set in a response without topic ids", topic=name, client_id=c.client_id,
                                    broker=b)  # fmt: skip
                    self.client_max.pop((c.client_id, key), None)  # possible re-creation: new baseline
                    self.first_seen.pop(key, None)
            ck = (c.client_id, key)
            mx = self.client_max.get(ck, -1)
            firsts = self.first_seen.setdefault(key, {})
            if epoch < mx:
                self.truth("M1", "client_epoch_regression", t, f"served epoch {epoch} after the client saw {mx}",
                            topic=name, topic_id=tid, partition=idx, client_id=c.client_id, broker=b,
                            served_epoch=epoch, cached_epoch=mx, staleness_ms=t - firsts.get(mx, t))  # fmt: skip
            higher = [ts for e, ts in firsts.items() if e > epoch and ts < t - GRACE_MS]
            if higher:
                first = min(higher)
                self.truth("M2", "broker_served_stale", t, f"broker {b} served epoch {epoch} {t - first} ms "
                            "after a higher epoch was observed", topic=name, topic_id=tid, partition=idx,
                            client_id=c.client_id, broker=b, served_epoch=epoch,
                            newest_epoch=max(e for e in firsts if e > epoch), staleness_ms=t - first)  # fmt: skip
            if epoch > mx:
                self.client_max[ck] = epoch
            if epoch not in firsts:
                firsts[epoch] = t


class LogOracle:
    """M5 and M2-with-the-log over the captured responses, against the controller's log ``klog``
    (:class:`epochlib.sim.kraftlog.ControllerLog`), fed in capture order after :class:`MetadataOracle`."""

    def __init__(self, klog: Any, truth: Callable[..., None]) -> None:
        self.klog = klog
        self.truth = truth
        self.client_start: dict[str, tuple[int, int]] = {}  # client -> (latest interval start seen, its ms)

    def observe(self, c: Client, b: int, t: int, obs: list, m2_done: set[tuple[str, int]]) -> None:
        """``obs`` as :meth:`MetadataOracle.observe`; ``m2_done`` = (topic id, partition) the captures-only
        M2 already reported for this response."""
        if c.version < 7 or not self.klog.is_open:
            return
        lo, lo_ms, hi, hi_ms, proof = -1, -1, None, -1, None
        for name, tid, idx, epoch, _replicas in obs:
            iv = self.klog.interval(tid, idx, epoch)
            if iv is not None:
                start, end, end_ms = iv
                if start > lo:
                    lo, lo_ms = start, next(te for e, o, te in self.klog.epochs[(tid, idx)] if o == start)
                if end >= 0 and (hi is None or end < hi):
                    hi, hi_ms, proof = end, end_ms, (name, tid, idx, epoch)
            newer = self.klog.newer_epoch_before(tid, idx, epoch, t - GRACE_MS)
            if newer is not None and (tid, idx) not in m2_done:
                self.truth("M2", "broker_served_stale", t, f"broker {b} served epoch {epoch} {t - newer[1]} ms "
                           f"after the metadata log committed epoch {newer[0]}", topic=name, topic_id=tid,
                           partition=idx, client_id=c.client_id, broker=b, served_epoch=epoch,
                           newest_epoch=newer[0], staleness_ms=t - newer[1])  # fmt: skip
        if proof is not None and lo >= hi:
            name, tid, idx, epoch = proof
            self.truth("M5", "metadata_state_mixed", t, f"served states never coexisted: interval starts at "
                       f"{lo} and ends at {hi}", topic=name, topic_id=tid, partition=idx, client_id=c.client_id,
                       broker=b, interval_start=lo, interval_end=hi, served_epoch=epoch)  # fmt: skip
            return
        seen = self.client_start.get(c.client_id)
        if proof is not None and seen is not None and hi <= seen[0]:
            name, tid, idx, epoch = proof
            self.truth("M5", "metadata_offset_regression", t, f"served interval ends at offset {hi}, at or before "
                       f"the start {seen[0]} of one the client already had", topic=name, topic_id=tid,
                       partition=idx, client_id=c.client_id, broker=b, interval_start=lo, interval_end=hi,
                       previous_start=seen[0], lag_offsets=seen[0] - hi + 1, lag_ms=seen[1] - hi_ms,
                       served_epoch=epoch)  # fmt: skip
        if lo >= 0 and (seen is None or lo > seen[0]):
            self.client_start[c.client_id] = (lo, lo_ms)


def leader_rank(p: Part, b: int, cache: Any, leo: int) -> tuple[int, int, int]:
    """The F2 oracle's leader of a round, as the audit can tell it from the files (``leader_of_round``):
    the highest epoch, then the higher log end offset — known only where segments were written — then
    the lower broker id. Not the simulator's actual leader, which the evidence does not show."""
    latest = cache.latest_epoch
    return (-1 if latest is None else latest, leo if p.segments else -1, -b)


def lineage_as_loaded(written: Iterable[tuple[int, int]], log_start: int | None,
                      log_end: int | None) -> tuple[tuple[int, int], ...]:  # fmt: skip
    """The lineage a broker holds after loading the checkpoint entries ``written`` (file order).

    The broker feeds each line to its leader-epoch cache (``LeaderEpochCache.assign``), which drops every
    earlier entry whose epoch or start offset is at or above the new one's, so a non-monotonic file
    loads as less than it says: ``[(6, 559000), (0, 594623)]`` loads as ``[(0, 594623)]``. The audit then
    repairs the cache against the log as LogLoader does, except that a running leader's entry at the log
    end stays: entries past ``log_end`` go, entries below ``log_start`` collapse onto it. A bound is
    ``None`` when the snapshot does not show it (no segments written: the log end is unknown), as the
    audit, which reads only the files, cannot apply it either.
    """
    cache = LeaderEpochCache(written).repaired(log_end, log_start, keep_at_end=True)
    return tuple((e.epoch, e.start_offset) for e in cache.entries)


def lineage_change(prev: tuple[tuple[int, int], ...], prev_leo: int | None, new: tuple[tuple[int, int], ...],
                   log_start: int | None = None) -> tuple[list[str], list[tuple[int, int]]]:  # fmt: skip
    """The L5 oracle for one replica's consecutive lineages: ``(rewrites, truncated entries)``.

    ``prev`` held the offsets up to ``prev_leo``; each entry owns its range up to the next entry's start
    (the last one up to ``prev_leo``). An old entry missing from ``new`` was trimmed by retention
    (truncateFromStart) only when its whole range lies below the new head's start (which is the log start
    after a trim): the epoch number alone proves nothing, since a truncated replica that caught up with a
    newer leader also has a higher head epoch. A missing entry whose range reaches the new head is tail
    removal (``lineage_truncated``) when every later old entry is missing too, else an interior entry
    vanished (``lineage_rewritten``); an epoch's start may only move forward, and only for the head.

    ``log_start`` is the new snapshot's log start, when it shows one. A trim re-inserts the epoch in force
    at the new log start there, so a lineage whose head starts *above* its log start (a non-monotonic
    checkpoint as the broker loads it: its out-of-order line evicted every entry before it) was not left
    so by retention: then only entries a later old entry took over from at or below the log start count
    as trimmed, and the old last entry, still in force at the log start, was removed from the tail.
    """
    if prev == new:
        return [], []
    head = new[0][0] if new else None
    head_start = new[0][1] if new else None
    uncovered = log_start is not None and head_start is not None and head_start > log_start
    new_map = dict(new)
    prev_map = dict(prev)
    rewritten: list[str] = []
    truncated: list[tuple[int, int]] = []
    for i, (e, s) in enumerate(prev):
        end = prev[i + 1][1] if i + 1 < len(prev) else (prev_leo if prev_leo is not None else s)
        if e in new_map:
            if new_map[e] != s and not (e == head and new_map[e] > s):
                rewritten.append(f"epoch {e} moved from {s} to {new_map[e]}")
        elif uncovered and i + 1 < len(prev) and end <= log_start:
            continue  # a later old entry took over at or below the log start: retention trimmed this one
        elif not uncovered and head_start is not None and end <= head_start:
            continue  # its whole range lies below the new log start: retention trimmed the head
        elif all(e2 not in new_map for e2, _ in prev[i:]):
            truncated.append((e, s))
        else:
            rewritten.append(f"interior entry ({e}, {s}) vanished")
    kept = [e for e, _ in prev if e in new_map]
    for e, s in new:
        if e not in prev_map and kept and e < max(kept):
            rewritten.append(f"entry ({e}, {s}) inserted before kept entries")
    return rewritten, truncated
