"""P1 ``expansion_order_violation`` (KIP-253, never adopted; spec/detection-rules.md "Partition expansion").

Adding partitions to a keyed topic moves keys to the new partitions. A group that reads a new partition
past the expansion point before it has read every old partition up to that point reads records of one key
out of order. Kafka does not enforce it; this checks it after the fact:

- :func:`expansions_from_history` — expansions from the metadata log (PartitionRecords for partitions ≥ N
  of an existing topic id, ``change`` ``expanded``; T0 = their batch time);
- :func:`expansions_from_observations` — without a log, the first captured MetadataResponse listing N'
  partitions after responses listing N (T0 = that later capture, which the finding says);
- :func:`check_expansion_order` — the rule, given a topic's commits and the lower-bound evidence of the
  old partitions' log ends (:class:`BoundEvidence`: batches, replica snapshots; commits are added here).
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ._model import Commit, Finding, MetadataObservation
from .kraft import HistoryChange

__all__ = ["BoundEvidence", "Expansion", "check_expansion_order", "expansions_from_history",
           "expansions_from_observations"]


@dataclass(frozen=True, slots=True)
class Expansion:
    """Topic ``topic`` grew from ``old_count`` partitions (``new_partitions`` added) at ``ts`` (T0)."""

    topic: str
    topic_id: str | None
    old_count: int
    new_partitions: tuple[int, ...]
    ts: int
    metadata_offset: int | None
    evidence: str
    from_log: bool


@dataclass(frozen=True, slots=True)
class BoundEvidence:
    """A proven lower bound of partition ``partition``'s log end at time ``ts``: the end of a batch
    (last offset + 1, at its max timestamp) or a replica snapshot's log end / high watermark."""

    partition: int
    ts: int
    offset: int
    pointer: str


def expansions_from_history(rows: Iterable[HistoryChange]) -> list[Expansion]:
    """One :class:`Expansion` per (topic id, batch time) of ``expanded`` partition rows; ``old_count`` =
    partitions of that topic id known before the first of them."""
    rows = sorted(rows, key=lambda r: (r.metadata_offset, r.partition if r.partition is not None else -1))
    known: dict[str, set[int]] = defaultdict(set)
    groups: dict[tuple[str, int], list[HistoryChange]] = {}
    before: dict[tuple[str, int], int] = {}
    for r in rows:
        if r.partition is None:
            if "topic_deleted" in r.changes:
                known.pop(r.topic_id, None)
            continue
        if "expanded" in r.changes:
            key = (r.topic_id, r.controller_ts)
            if key not in groups:
                groups[key] = []
                before[key] = len(known[r.topic_id])
            groups[key].append(r)
        known[r.topic_id].add(r.partition)
    out = []
    for key, rs in groups.items():
        first = rs[0]
        out.append(Expansion(first.topic or "", first.topic_id, before[key], tuple(sorted(r.partition for r in rs)),
                             first.controller_ts, first.metadata_offset, first.pointer(), True))
    return sorted(out, key=lambda e: (e.topic, e.ts))


def expansions_from_observations(observations: Iterable[MetadataObservation]) -> list[Expansion]:
    """Expansions seen in captures: per topic incarnation, the first response listing more partitions than
    every earlier response of that incarnation did (responses grouped by capture pointer, in capture order).

    An incarnation is (name, topic id): a response naming another id than an earlier one is a re-creation, a
    new baseline, not an expansion. A response without an id (below v10) belongs to the one id its name has
    over the observations (so one expansion seen by old and new clients is one expansion), to the id-less
    incarnation when the name never has an id, and is left out when the name has several ids (which
    incarnation it describes is unknown). Responses without a topic name are left out."""
    resp: dict[tuple, tuple[int, str, set[int], str | None]] = {}
    ids: dict[str, set[str]] = defaultdict(set)
    for o in observations:
        if o.topic is None:
            continue
        if o.topic_id is not None:
            ids[o.topic].add(o.topic_id)
        k = (o.topic, o.source, o.position, o.capture_ts, o.topic_id)
        ts, topic, parts, tid = resp.get(k, (o.capture_ts, o.topic, set(), o.topic_id))
        parts.add(o.partition)
        resp[k] = (ts, topic, parts, tid)
    out = []
    high: dict[tuple[str, str | None], int] = {}
    for k in sorted(resp, key=lambda k: (resp[k][0], k[1] or "", k[2] or 0, k[4] or "")):
        ts, topic, parts, tid = resp[k]
        inc = (topic, tid)
        if tid is None and ids[topic]:
            if len(ids[topic]) > 1:
                continue
            inc = (topic, *ids[topic])  # the finding keeps the response's own id (its id is unchanged)
        n = max(parts) + 1
        if inc in high and n > high[inc]:
            out.append(Expansion(topic, tid, high[inc], tuple(range(high[inc], n)), ts, None,
                                 f"capture:{k[1]} {k[2]} (first response listing {n} partitions)", False))
        high[inc] = max(high.get(inc, 0), n)
    return out


def check_expansion_order(expansion: Expansion, commits: Sequence[Commit],
                          evidence: Iterable[BoundEvidence] = ()) -> list[Finding]:
    """P1 for one expansion over the topic's commits (any order; live commits count).

    Lower bound of an old partition i's log end at T0, largest wins: a batch end or a snapshot's log end /
    high watermark taken at or before T0 (``evidence``), the highest offset any group committed on i at or
    before T0. A group that committed on an old partition before T0, then commits an offset > 0 on a new
    partition q at tc ≥ T0 while its last commit on some old partition i (one it committed on) is below i's
    bound, violates the order. One finding per (group, expansion, new partition): the first such commit;
    the lagging partition is the one with the most records pending (bound − committed).

    A tombstone of (group, topic, partition) ends that group's sequence there (the topic's deletion, the
    offsets' expiry or deletion: commits carry no topic id): it clears the group's last commit on the
    partition, and a commit followed by its group's tombstone at or before T0 is neither a bound nor "committed
    before T0" (it may belong to a deleted incarnation of the topic)."""
    t0, n_old = expansion.ts, expansion.old_count
    bounds: dict[int, tuple[int, str]] = {}
    for b in evidence:
        if b.partition < n_old and b.ts <= t0 and b.offset > bounds.get(b.partition, (-1, ""))[0]:
            bounds[b.partition] = (b.offset, b.pointer)
    seq = sorted((c for c in commits if c.topic == expansion.topic and c.is_live
                  and (c.is_tombstone or c.committed_offset is not None)), key=lambda c: (c.ts, c.log_offset or 0))
    ended: set[int] = set()  # ids of commits a tombstone at or before T0 ends
    open_: dict[tuple[str, int], list[Commit]] = defaultdict(list)
    for c in seq:
        if c.ts > t0:
            break
        if c.is_tombstone:
            ended.update(id(x) for x in open_.pop((c.group_id, c.partition), ()))
        else:
            open_[(c.group_id, c.partition)].append(c)
    for c in seq:
        if (not c.is_tombstone and c.partition < n_old and c.ts <= t0 and id(c) not in ended
                and c.committed_offset > bounds.get(c.partition, (-1, ""))[0]):
            bounds[c.partition] = (c.committed_offset, c.pointer())
    if not bounds:
        return []
    by_group: dict[str, list[Commit]] = defaultdict(list)
    for c in seq:
        by_group[c.group_id].append(c)
    out = []
    new = set(expansion.new_partitions)
    for group, cs in sorted(by_group.items()):
        if not any(c.partition < n_old and c.ts < t0 and not c.is_tombstone and id(c) not in ended for c in cs):
            continue
        last: dict[int, Commit] = {}
        reported: set[int] = set()
        for c in cs:
            if c.is_tombstone:
                last.pop(c.partition, None)
                continue
            if c.partition < n_old:
                last[c.partition] = c
                continue
            if c.partition not in new or c.partition in reported or c.ts < t0 or c.committed_offset <= 0:
                continue
            behind = [(bounds[i][0] - last[i].committed_offset, i) for i in last if i in bounds
                      and last[i].committed_offset < bounds[i][0]]
            if not behind:
                continue
            pending, i = max(behind)
            reported.add(c.partition)
            how = "metadata offset " + str(expansion.metadata_offset) if expansion.from_log else (
                "capture evidence (T0 = the first capture listing the new partitions)")
            out.append(Finding(
                "P1", "expansion_order_violation", event_ts=c.ts, topic=expansion.topic, topic_id=expansion.topic_id,
                partition=c.partition, group_id=group,
                numbers={"committed_offset": c.committed_offset, "new_partition": c.partition, "lagging_partition": i,
                         "records_pending": pending, "expansion_ts": t0, "metadata_offset": expansion.metadata_offset},
                evidence=(c.pointer(), last[i].pointer(), bounds[i][1], expansion.evidence),
                detail=(f"group {group} committed offset {c.committed_offset} on new partition "
                        f"{expansion.topic}-{c.partition} while {expansion.topic}-{i} was still {pending} records "
                        f"behind its log end at the expansion to {n_old + len(new)} partitions ({how}): records "
                        f"of one key may have been read out of order (KIP-253)"),
            ))
    return out
