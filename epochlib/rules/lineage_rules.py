"""Lineage rules L1, L2, L3, L5 (spec/detection-rules.md "Lineage and the lookup everything else uses").

All functions are pure: sequences in, a list of :class:`Finding` out.
"""

from __future__ import annotations

import datetime as _dt
import re
from collections.abc import Iterable, Sequence
from typing import Any

from ..lineage import EpochEntry
from ._model import (
    BatchHeader,
    Finding,
    QuarantineRecord,
    ReplicaSnapshot,
)

__all__ = [
    "check_batch_epochs",
    "check_checkpoint_unreadable",
    "check_lineage_history",
    "check_lineage_monotonic",
    "parse_logdir_path",
]

CHECKPOINT_NAME = "leader-epoch-checkpoint"
_BROKER_RE = re.compile(r"(?:^|/)broker=([^/]+)")
_SNAPSHOT_RE = re.compile(r"(?:^|/)snapshot=(\d{8}T\d{6}Z)")
_TP_RE = re.compile(r"^(.+)-(\d+)$")
_PARTITION_MAX = 2**31 - 1  # a partition is a Java int: a larger number is no partition directory


def parse_logdir_path(path: str) -> dict[str, Any]:
    """``broker``, ``snapshot_ts`` (ms), ``topic`` and ``partition`` read from a log-dir snapshot path
    ``…/broker=<id>/snapshot=<YYYYMMDDTHHMMSSZ>/<topic>-<partition>/<file>``; missing parts are None."""
    p = path.replace("\\", "/")
    out: dict[str, Any] = {"broker": None, "snapshot_ts": None, "topic": None, "partition": None}
    if m := _BROKER_RE.search(p):
        out["broker"] = m.group(1)
    if m := _SNAPSHOT_RE.search(p):
        try:  # a quarantined file may sit under a malformed name (month 13): that part is then missing
            t = _dt.datetime.strptime(m.group(1), "%Y%m%dT%H%M%SZ").replace(tzinfo=_dt.timezone.utc)
            out["snapshot_ts"] = int(t.timestamp() * 1000)
        except ValueError:
            pass
    parts = [x for x in p.split("/") if x]
    if len(parts) >= 2 and (m := _TP_RE.match(parts[-2])) and len(m.group(2)) <= 10 \
            and int(m.group(2)) <= _PARTITION_MAX:
        out["topic"], out["partition"] = m.group(1), int(m.group(2))
    return out


# ------------------------------------------------------------------------------------------------ L1


def check_checkpoint_unreadable(
    record: QuarantineRecord | Any, fallback_ts: int | None = None
) -> list[Finding]:
    """L1 ``checkpoint_unreadable`` (warning): a quarantined ``leader-epoch-checkpoint`` (wrong version,
    count != entry lines, malformed line) means that replica lost its lineage evidence.

    Judgement calls: only quarantine rows whose file is named ``leader-epoch-checkpoint`` qualify (other
    checkpoints feed no lineage); broker, snapshot time and topic-partition are read from the path layout
    of DESIGN.md; when the path has no ``snapshot=`` part the event time is ``fallback_ts`` (the run's
    ``from``), else 0. Severity warning: evidence is missing, nothing is proven wrong.
    """
    if not isinstance(record, QuarantineRecord):
        record = QuarantineRecord.from_row(record)
    name = record.source.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
    if name != CHECKPOINT_NAME:
        return []
    where = parse_logdir_path(record.source)
    ts = where["snapshot_ts"] if where["snapshot_ts"] is not None else (fallback_ts or 0)
    pos = f" line {record.position}" if record.position else ""  # lines count from 1: 0 = the whole file
    return [
        Finding(
            rule="L1",
            kind="checkpoint_unreadable",
            event_ts=ts,
            topic=where["topic"],
            partition=where["partition"],
            broker=where["broker"],
            numbers={},
            evidence=(f"checkpoint:{record.source}{pos}",),
            detail=(
                f"leader-epoch-checkpoint of {where['topic']}-{where['partition']} on broker "
                f"{where['broker']} could not be read ({record.reason}); this replica's lineage evidence is lost."
            ),
        )
    ]


# ------------------------------------------------------------------------------------------------ L2


def check_lineage_monotonic(snapshot: ReplicaSnapshot) -> list[Finding]:
    """L2 ``lineage_not_monotonic`` (error): epochs or start offsets of the raw checkpoint are not
    strictly increasing.

    Judgement calls: one finding per snapshot (the first offending line is in ``numbers``, every
    offending line in ``evidence``, ``violations`` counts them); a negative epoch or offset is also a
    violation (the broker refuses such an entry); an empty or single-entry checkpoint is monotonic.
    """
    bad: list[tuple[int, EpochEntry, EpochEntry | None]] = []
    prev: EpochEntry | None = None
    for i, e in enumerate(snapshot.entries):
        if (
            e.epoch < 0
            or e.start_offset < 0
            or prev is not None
            and (e.epoch <= prev.epoch or e.start_offset <= prev.start_offset)
        ):
            bad.append((i, e, prev))
        prev = e
    if not bad:
        return []
    i, e, p = bad[0]
    src = snapshot.pointer()
    return [
        Finding(
            rule="L2",
            kind="lineage_not_monotonic",
            event_ts=snapshot.snapshot_ts,
            topic=snapshot.topic,
            topic_id=snapshot.topic_id,
            partition=snapshot.partition,
            broker=snapshot.broker,
            numbers={
                "line": i + 3,
                "leader_epoch": e.epoch,
                "start_offset": e.start_offset,
                "previous_epoch": p.epoch if p else None,
                "previous_start_offset": p.start_offset if p else None,
                "violations": len(bad),
            },
            evidence=tuple(f"{src} line {j + 3}" for j, _, _ in bad),
            detail=(
                f"checkpoint entry ({e.epoch}, {e.start_offset}) on line {i + 3} does not follow "
                + (f"({p.epoch}, {p.start_offset})" if p else "the rules (negative value)")
                + f" with strictly increasing epoch and offset ({len(bad)} such line(s))."
            ),
        )
    ]


# ------------------------------------------------------------------------------------------------ L3


def check_batch_epochs(snapshot: ReplicaSnapshot, batches_sorted: Iterable[BatchHeader]) -> list[Finding]:
    """L3 over one replica's batches in offset order, against its repaired lineage:

    - ``batch_epoch_regression`` (critical): a batch's epoch is lower than an earlier batch's (a stale
      leader's writes, KIP-359);
    - ``batch_epoch_unknown`` (error): the batch epoch is above every lineage entry;
    - ``batch_epoch_mismatch`` (error): the batch epoch is not ``epoch_for_offset(base_offset)``.

    Judgement calls: only magic-2 batches with an epoch >= 0 are checked (v0/v1 carry no epoch); batches
    below the log start (when known) are skipped; with an empty lineage, or for a batch below the lineage
    head, there is no epoch in force, so only the regression check applies; a batch gets at most one
    finding — regression first, then unknown, then mismatch (each implies the later ones); the event time
    is the batch's max timestamp, else the snapshot time. ``records_affected`` = records in the batch.
    """
    cache = snapshot.repaired_cache()
    latest = cache.latest_epoch
    ls = snapshot.log_start_offset
    out: list[Finding] = []
    best: BatchHeader | None = None  # the earlier batch with the highest epoch
    for b in batches_sorted:
        if b.magic < 2 or b.partition_leader_epoch is None or b.partition_leader_epoch < 0:
            continue
        if ls is not None and b.base_offset < ls:
            continue
        epoch = b.partition_leader_epoch
        expected = cache.epoch_for_offset(b.base_offset)
        ts = b.max_timestamp if b.max_timestamp is not None and b.max_timestamp >= 0 else snapshot.snapshot_ts
        common: dict[str, Any] = dict(
            event_ts=ts,
            topic=snapshot.topic,
            topic_id=snapshot.topic_id,
            partition=snapshot.partition,
            broker=snapshot.broker,
        )
        nums = {
            "base_offset": b.base_offset,
            "last_offset": b.last_offset,
            "batch_epoch": epoch,
            "leader_epoch": epoch,
            "expected_epoch": expected,
            "records_affected": b.records_count,
            "log_end_offset": snapshot.log_end_offset,
        }
        if best is not None and epoch < best.partition_leader_epoch:  # type: ignore[operator]
            out.append(
                Finding(
                    rule="L3",
                    kind="batch_epoch_regression",
                    numbers={
                        **nums,
                        "expected_epoch": best.partition_leader_epoch,
                        "previous_offset": best.base_offset,
                    },
                    evidence=(b.pointer(), best.pointer()),
                    detail=(
                        f"batch at offset {b.base_offset} carries epoch {epoch}, lower than epoch "
                        f"{best.partition_leader_epoch} of the earlier batch at {best.base_offset}: writes "
                        "accepted by a stale leader."
                    ),
                    **common,
                )
            )
        elif latest is not None and epoch > latest:
            out.append(
                Finding(
                    rule="L3",
                    kind="batch_epoch_unknown",
                    numbers={**nums, "expected_epoch": expected},
                    evidence=(b.pointer(), snapshot.pointer(latest)),
                    detail=(
                        f"batch at offset {b.base_offset} carries epoch {epoch}, above every entry of the "
                        f"lineage (latest {latest})."
                    ),
                    **common,
                )
            )
        elif expected is not None and expected != epoch:
            out.append(
                Finding(
                    rule="L3",
                    kind="batch_epoch_mismatch",
                    numbers=nums,
                    evidence=(b.pointer(), snapshot.pointer(expected)),
                    detail=(
                        f"batch at offset {b.base_offset} carries epoch {epoch} but the lineage puts epoch "
                        f"{expected} in force there."
                    ),
                    **common,
                )
            )
        if best is None or epoch > best.partition_leader_epoch:  # type: ignore[operator]
            best = b
    return out


# ------------------------------------------------------------------------------------------------ L5


def _entry_text(entries: Sequence[EpochEntry]) -> str:
    return "[" + ", ".join(f"({e.epoch}, {e.start_offset})" for e in entries) + "]"


def _log_end_lower_bound(s: ReplicaSnapshot) -> int | None:
    """The best lower bound of a snapshot's LEO when the LEO itself is unknown: the high watermark and
    the recovery point are both at or below it (D1 reads the high watermark the same way); None when
    neither is known."""
    known = [x for x in (s.high_watermark, s.recovery_point) if x is not None]
    return max(known) if known else None


def _retention_explains(
    prev: ReplicaSnapshot, cur: ReplicaSnapshot, old_tail: EpochEntry, new_head: EpochEntry
) -> bool:
    """Whether retention alone (truncateFromStart) can turn a lineage into one that shares no epoch.

    truncateFromStart keeps the epoch in force at the new log start (its start moves up to the log
    start), so a new, unshared head epoch at offset h means every old offset at or above h was replaced:
    only an old log that ended at or before h was wholly trimmed. Known old LEO: ``h >= LEO``. Unknown:
    the head must sit at the new log start and past the old tail's start, and the old tail's range
    ``[start, max(HW, recovery point))`` — a part of it the replica certainly held — must not reach past
    h; with neither bound known, the benefit of the doubt goes to retention.
    """
    h = new_head.start_offset
    if prev.log_end_offset is not None:
        return h >= prev.log_end_offset
    if cur.log_start_offset is None or h != cur.log_start_offset or h <= old_tail.start_offset:
        return False
    bound = _log_end_lower_bound(prev)
    return bound is None or bound <= h


def _discarded_text(prev: ReplicaSnapshot, point: int, discarded: int | None) -> str:
    """The detail's tail: the offsets discarded (old LEO known), else a lower bound from the old high
    watermark / recovery point (kept out of ``records_affected``, which holds exact counts only)."""
    if discarded is not None:
        return f", {discarded} offset(s) discarded."
    bound = _log_end_lower_bound(prev)
    if bound is not None and bound > point:
        return (
            f", at least {bound - point} offset(s) discarded (old log end unknown; its high watermark / "
            f"recovery point reached {bound})."
        )
    return " (log ends unknown)."


def _history_step(prev: ReplicaSnapshot, cur: ReplicaSnapshot) -> Finding | None:
    p = prev.repaired_cache().entries
    c = cur.repaired_cache().entries
    p_idx = {e.epoch: i for i, e in enumerate(p)}
    c_idx = {e.epoch: i for i, e in enumerate(c)}
    common = [e.epoch for e in c if e.epoch in p_idx]
    common_common: dict[str, Any] = dict(
        event_ts=cur.snapshot_ts,
        topic=cur.topic,
        topic_id=cur.topic_id,
        partition=cur.partition,
        broker=cur.broker,
    )

    def rewritten(reason: str, epoch: int | None) -> Finding:
        return Finding(
            rule="L5",
            kind="lineage_rewritten",
            numbers={
                "leader_epoch": epoch,
                "previous_start_offset": p[p_idx[epoch]].start_offset if epoch in p_idx else None,
                "start_offset": c[c_idx[epoch]].start_offset if epoch in c_idx else None,
                "previous_snapshot_ts": prev.snapshot_ts,
            },
            evidence=(prev.pointer(epoch), cur.pointer(epoch)),
            detail=f"lineage changed from {_entry_text(p)} to {_entry_text(c)}: {reason}.",
            **common_common,
        )

    if common:
        pi = [p_idx[e] for e in common]
        # the shared epochs must be one contiguous run of the old lineage, and the start of the new ones
        if pi != list(range(pi[0], pi[0] + len(pi))):
            gone = next(p[j].epoch for j in range(pi[0], pi[-1]) if p[j].epoch not in c_idx)
            return rewritten(f"interior epoch {gone} vanished", gone)
        if c_idx[common[0]] != 0:
            return rewritten(f"entry for epoch {c[0].epoch} appeared before the old head", c[0].epoch)
        ci = [c_idx[e] for e in common]
        if ci != list(range(len(common))):
            extra = next(c[j].epoch for j in range(len(common)) if c[j].epoch not in p_idx)
            return rewritten(f"entry for epoch {extra} was inserted between existing entries", extra)
        for k, ep in enumerate(common):
            ps, cs = p[p_idx[ep]].start_offset, c[c_idx[ep]].start_offset
            if k == 0 and cs > ps:
                continue  # head trimmed forward (truncateFromStart)
            if cs != ps:
                return rewritten(f"start offset of epoch {ep} moved from {ps} to {cs}", ep)
        kept_last = pi[-1]
        removed = list(p[kept_last + 1 :])
        appended = list(c[len(common) :])
    else:
        # nothing shared: everything old was either trimmed by retention or truncated away
        removed, appended = list(p), list(c)
        if not p:
            return None
        if c and _retention_explains(prev, cur, p[-1], c[0]):
            return None  # the new head starts past the old log: retention moved the start, no truncation

    prev_leo, cur_leo = prev.log_end_offset, cur.log_end_offset
    if removed:
        t = removed[0].start_offset
        cands = [t]
        if appended and appended[0].start_offset <= t:
            cands.append(appended[0].start_offset)
        if cur_leo is not None:
            cands.append(cur_leo)
        point = min(cands)
        if cur.log_start_offset is not None:
            point = max(point, cur.log_start_offset)  # below the log start, retention removed the data
        if prev_leo is not None and point >= prev_leo:
            return None  # only an empty (never written) epoch was evicted by the next leader
        discarded = prev_leo - point if prev_leo is not None else None
        reason = f"tail entries {_entry_text(removed)} removed"
        ev_epoch = removed[0].epoch
    elif prev_leo is not None and cur_leo is not None and cur_leo < prev_leo:
        point, discarded = cur_leo, prev_leo - cur_leo
        reason = f"log end moved back from {prev_leo} to {cur_leo} within epoch {p[-1].epoch if p else None}"
        ev_epoch = p[-1].epoch if p else None
    else:
        return None
    return Finding(
        rule="L5",
        kind="lineage_truncated",
        numbers={
            "truncation_point": point,
            "records_affected": discarded,
            "previous_log_end_offset": prev_leo,
            "log_end_offset": cur_leo,
            "previous_snapshot_ts": prev.snapshot_ts,
        },
        evidence=(prev.pointer(ev_epoch), cur.pointer()),
        detail=f"replica truncated its log at {point}: {reason}{_discarded_text(prev, point, discarded)}",
        **common_common,
    )


def check_lineage_history(snapshots_sorted: Iterable[ReplicaSnapshot]) -> list[Finding]:
    """L5 across consecutive snapshots of one replica (same broker, topic, partition), oldest first.

    Appending entries, removing tail entries and trimming the head are legal. Tail removal (or the log
    end moving back) is ``lineage_truncated`` (info) with the truncation point and, when the older LEO is
    known, the offsets discarded; any other change — an interior entry vanished, an entry appeared before
    the old head, an epoch's start offset moved (except the head moving forward) — is
    ``lineage_rewritten`` (error).

    Judgement calls: both lineages are compared after the LogLoader repair (the broker's view); a new
    topic id starts a new baseline (re-created topic: no comparison); the truncation point is the lowest
    of the first removed entry's start, the first appended entry's start (the log resumed there) and the
    new LEO, but never below the new log start (retention, not truncation, removed what lies below it);
    an entry starting at the LEO stays in the repair (a running leader's, before its first append); an evicted epoch in which nothing was written (its start equals the old LEO) is not
    reported; identical consecutive snapshots (timestamp ties) compare equal and yield nothing.

    When no epoch is shared, retention (truncateFromStart, which keeps the epoch in force at the new log
    start) explains the change only if the old log ended at or before the new head: the new head starts
    at or past the old LEO; with that LEO unknown, the new head sits at the new log start, past the old
    tail's start, and at or past the old snapshot's max(high watermark, recovery point) — both <= the
    LEO, so the old tail certainly ran up to there (neither known: retention, as before). Otherwise the
    old tail was removed: ``lineage_truncated``, e.g. a follower that truncated its divergent suffix,
    caught up from a newer leader, and had its log start moved past the old tail's start before the next
    snapshot. ``records_affected`` stays exact (old LEO known only); a lower bound goes to the detail.
    """
    out: list[Finding] = []
    prev: ReplicaSnapshot | None = None
    for cur in snapshots_sorted:
        if prev is not None:
            recreated = (
                prev.topic_id is not None and cur.topic_id is not None and prev.topic_id != cur.topic_id
            )
            if not recreated:
                f = _history_step(prev, cur)
                if f is not None:
                    out.append(f)
        prev = cur
    return out
