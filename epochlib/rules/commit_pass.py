"""The commit pass: F2/F4 and S1/S2 over one (topic, partition)'s commits, columnar, in one call.

Why: the commits are by far the largest input (10^8-10^9 a day on a busy cluster), and both rule
families read them the same way — one sequence per (group, topic, partition) in ``__consumer_offsets``
log order, against the partition's lineage snapshots. :func:`check_partition_commits` takes the
partition's commits as one Arrow table (what a Spark cogroup hands over) and gives exactly the findings
of :func:`~epochlib.rules.check_commit_fencing` and :func:`~epochlib.rules.check_offset_resets` run on
every group's sequence (``tests/test_rules_commit_pass.py`` checks it on random sequences, so a rule
change the candidate filters below do not cover fails there).

The work is numpy over the Arrow columns; the reference rules run only where a finding is possible:

- F2/F4: the rule's loop state is computed in numpy: the highest epoch before each commit and the
  commit that set it (a tombstone starts a new baseline), the first commit of each run of -1 commits,
  and whether a commit repeats the (offset, epoch) before it. F4 fires where an epoch is below that
  highest one, or at the first -1 commit after it: the rule on the pair ``[highest commit, commit]``
  (without a lineage) gives exactly that finding. F2 is decided per commit by
  :func:`~epochlib.rules.fence_check`, whose answer depends on the commit only through (leader
  snapshot, epoch, snapshot older than the commit) and the comparison of the offset with the epoch's
  end: it is evaluated once per distinct triple and the offsets are compared vectorised; the rule on
  the one flagged commit gives its F2 finding. Only those commits become
  :class:`~epochlib.rules.Commit` values. Sequences shorter than :data:`SHORT` run the rule whole.
- S1/S2: every rewind is a finding; a forward move can only be one when its new offset equals a leader's
  log start (S2a) or, at a rate above the pace factor times the highest earlier rate, reaches the newest
  snapshot log-end estimate or has none to reach (then the other groups' commits, "the highest offset
  seen", may still give one) (S2b). Those candidates are classified by
  :func:`~epochlib.rules.classify_rewind` / :func:`~epochlib.rules.classify_jump` with the exact loop
  state (previous commit, since, largest step and rate of the earlier forward moves that were not
  findings). A tombstone or a commit without an offset ends a run (the rule starts afresh after it),
  so a sequence is cut there into runs, each taken as above.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._model import Commit, Finding, GroupState, ReplicaSnapshot
from .fencing import LineageLookup, check_commit_fencing, fence_check
from .resets import (
    MIN_PACE_ELAPSED_MS,
    OffsetsSeen,
    ResetContext,
    check_offset_resets,
    classify_jump,
    classify_rewind,
)
from .rounds import SnapshotRounds, log_start_of

__all__ = ["COMMIT_COLUMNS", "CommitFinding", "check_partition_commits", "commit_log_order"]

#: What the pass reads of a commit, besides ``topic`` and ``partition`` (``ts`` = the commit's
#: :attr:`~epochlib.rules.Commit.ts`: event time, else commit time, epoch ms).
COMMIT_COLUMNS = ("group_id", "committed_offset", "leader_epoch", "ts", "is_tombstone", "log_offset", "source", "position")
#: Sequences shorter than this run the plain rules (numpy's per-call cost exceeds the loop's).
SHORT = 8
_NO_LS = np.iinfo(np.int64).min  # "no log start" in the vectorised arrays


class CommitFinding(NamedTuple):
    """A finding of the pass and, for S1/S2, the client ids of the group's last record at or before the
    commit (None when the group has no record then, and for F2/F4): what M4 correlates with."""

    finding: Finding
    group_clients: tuple[str, ...] | None = None


def commit_log_order(c: Commit) -> tuple:
    """``__consumer_offsets`` log order of one group's commits (all in one log partition): the log
    offset; rows without one (text dumps without offsets) by commit time, after, then input position."""
    lo = c.log_offset
    return (lo is None, lo if lo is not None else 0, c.ts, c.source or "", c.position or 0)


def _ints(col: pa.ChunkedArray, null: int) -> np.ndarray:
    return pc.fill_null(col, null).to_numpy(zero_copy_only=False).astype(np.int64)


def _ranks(col: pa.ChunkedArray, null: str) -> tuple[np.ndarray, list[str]]:
    """Per row, the rank of its string (``null`` for a null) among the distinct strings of ``col`` (plain or
    dictionary-encoded), and those strings in order. Only the dictionary values the rows use are read: a
    bucket's slice keeps the whole bucket's dictionary."""
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    enc = arr if pa.types.is_dictionary(arr.type) else pc.dictionary_encode(arr)
    idx = pc.fill_null(enc.indices.cast(pa.int64()), -1).to_numpy(zero_copy_only=False)
    used, inverse = np.unique(idx, return_inverse=True)
    values = enc.dictionary.take(pa.array(np.maximum(used, 0))).to_pylist()
    values = [null if k < 0 or v is None else str(v) for k, v in zip(used.tolist(), values, strict=True)]
    distinct = sorted(set(values))
    rank = {v: i for i, v in enumerate(distinct)}
    return np.array([rank[v] for v in values], dtype=np.int64)[inverse.reshape(-1)], distinct


class _Names(Sequence[str]):
    """Group ids by row (``names[codes[i]]``), looked up when asked: :class:`OffsetsSeen` reads a few."""

    def __init__(self, codes: np.ndarray, names: list[str]) -> None:
        self.codes, self.names = codes, names

    def __len__(self) -> int:
        return len(self.codes)

    def __iter__(self):  # noqa: ANN204
        return iter([self.names[k] for k in self.codes.tolist()])

    def __getitem__(self, i: int) -> str:  # type: ignore[override] - rows are read one at a time
        return self.names[self.codes[i]]


class _Commits:
    """One (topic, partition)'s commits sorted per group in log order (:func:`commit_log_order`), as
    numpy columns; builds :class:`Commit` values only for the rows asked for."""

    def __init__(self, table: pa.Table, topic: str, partition: int) -> None:
        n = table.num_rows
        # the sort keys as integers: each string by its rank among the column's strings (UTF-8 byte order is code
        # point order, as Python compares); a string sort and a take of the string columns were ~30 % of the pass
        gid, names = _ranks(table.column("group_id"), "None")  # Commit: str(None)
        lo = table.column("log_offset")
        src, _ = _ranks(table.column("source"), "")
        ts = _ints(table.column("ts"), 0)
        # commit_log_order per group, groups by id (a stable sort, as Python's; lexsort's last key is the first)
        order = np.lexsort((_ints(table.column("position"), 0), src, ts, _ints(lo, 0),
                            pc.is_null(lo).to_numpy(zero_copy_only=False), gid))
        t = table.select(["committed_offset", "leader_epoch", "is_tombstone", "ts", "log_offset", "source",
                          "position"]).take(pa.array(order))
        self.topic, self.partition, self.n = topic, partition, n
        ranks = gid[order]
        new = np.r_[True, ranks[1:] != ranks[:-1]] if n else np.zeros(0, dtype=bool)
        starts = np.flatnonzero(new)
        # dense group codes in id order, and each code's id
        self.codes, self.names = np.cumsum(new) - 1, [names[k] for k in ranks[starts].tolist()]
        self.bounds = list(zip(starts.tolist(), np.r_[starts[1:], n].tolist(), strict=True))
        off = t.column("committed_offset")
        ep = t.column("leader_epoch")
        tomb = t.column("is_tombstone")
        self.off_null = pc.is_null(off).to_numpy()
        self.off = _ints(off, 0)
        self.ep_raw_null = pc.is_null(ep).to_numpy()
        raw = _ints(ep, -1)
        self.epoch = np.where(raw < 0, -1, raw)  # Commit.epoch
        self.tomb = pc.fill_null(tomb, False).to_numpy().astype(bool)
        self.ts = ts[order]
        self._cols: dict[str, pa.ChunkedArray] = {c: t.column(c) for c in ("leader_epoch", "log_offset", "source", "position", "ts")}

    def group_id(self, start: int) -> str:
        return self.names[self.codes[start]]

    def commit(self, i: int, group_id: str) -> Commit:
        c = self._cols
        return Commit(
            group_id, self.topic, self.partition,
            None if self.off_null[i] else int(self.off[i]),
            c["leader_epoch"][i].as_py(), None, c["ts"][i].as_py(), bool(self.tomb[i]), "none", None,
            c["log_offset"][i].as_py(), None, None, c["source"][i].as_py(), c["position"][i].as_py(),
        )  # fmt: skip

    def offsets_seen(self) -> OffsetsSeen:
        """Every group's commits with an offset (no tombstones) as :class:`OffsetsSeen`, keyed by group id."""
        rows = np.flatnonzero(~self.tomb & ~self.off_null)
        return OffsetsSeen(
            self.ts[rows], self.off[rows], _Names(self.codes[rows], self.names),
            lambda i: self.commit(int(rows[i]), self.group_id(int(rows[i]))).pointer(),
        )  # fmt: skip

    def commits(self, a: int, b: int, group_id: str) -> list[Commit]:
        cols = {k: v.slice(a, b - a).to_pylist() for k, v in self._cols.items()}
        offs = [None if self.off_null[i] else int(self.off[i]) for i in range(a, b)]
        tombs = self.tomb[a:b].tolist()
        return [
            Commit(group_id, self.topic, self.partition, o, e, None, ts, tb, "none", None, lo, None, None, src, pos)
            for o, e, ts, tb, lo, src, pos in zip(offs, cols["leader_epoch"], cols["ts"], tombs, cols["log_offset"],
                                                  cols["source"], cols["position"], strict=True)  # fmt: skip
        ]


class _RoundArrays:
    """Per round of :class:`SnapshotRounds`: the leader's snapshot time and log start, as arrays."""

    def __init__(self, rounds: SnapshotRounds) -> None:
        self.rounds = rounds
        self.snap_ts = np.array([s.snapshot_ts for s in rounds.leaders], dtype=np.int64)
        ls = [log_start_of(s)[0] for s in rounds.leaders]
        self.log_start = np.array([_NO_LS if v is None else v for v in ls], dtype=np.int64)


def _f2_flags(cm: _Commits, rows: np.ndarray, ra: _RoundArrays, gid: str) -> np.ndarray:
    """Of the commits ``rows`` (each with an offset and an epoch >= 0), those for which :func:`fence_check`
    gives unknown_epoch or beyond_epoch_end."""
    ts, e, o = cm.ts[rows], cm.epoch[rows], cm.off[rows]
    li = ra.rounds.leader_indices_at(ts)
    judged = li >= 0  # no leader (a re-creation between the rounds around the commit): not judged
    if not judged.all():
        flags = np.zeros(len(rows), dtype=bool)
        flags[judged] = _f2_flags(cm, rows[judged], ra, gid) if judged.any() else flags[judged]
        return flags
    older = ra.snap_ts[li] < ts
    combo = (li.astype(np.int64) * 2 + older) * (1 << 32) + e
    uniq, first, inv = np.unique(combo, return_index=True, return_inverse=True)
    unknown = np.zeros(len(uniq), dtype=bool)
    end = np.full(len(uniq), -1, dtype=np.int64)  # end offset where the comparison decides; -1: never
    for k, i in enumerate(first.tolist()):
        r = fence_check(cm.commit(int(rows[i]), gid), ra.rounds.leaders[li[i]])
        if r.status == "unknown_epoch":
            unknown[k] = True
        elif r.status in ("ok", "beyond_epoch_end"):
            end[k] = r.end_offset
    ends = end[inv]
    return unknown[inv] | ((ends >= 0) & (ends < o))


def _fencing(cm: _Commits, a: int, b: int, gid: str, ra: _RoundArrays, lookup: LineageLookup | None) -> list[Finding]:
    """``check_commit_fencing`` on the sequence ``[a, b)``: its loop state in numpy, the rule itself called
    only for the commits that give a finding (so each finding is the rule's own)."""
    if b - a < SHORT:
        return check_commit_fencing(cm.commits(a, b, gid), lookup)
    e, o, tomb, no_off = cm.epoch[a:b], cm.off[a:b], cm.tomb[a:b], cm.off_null[a:b]
    n = b - a
    # F4: a tombstone starts a new baseline (it is the first row of its segment); the highest epoch before
    # each commit counts the commits with an epoch >= 0 of its segment only
    seg = np.cumsum(tomb).astype(np.int64) << 33
    counted = (e >= 0) & ~tomb
    highest = np.maximum.accumulate(seg + np.where(counted, e + 1, 0)) - seg - 1  # this commit included; -1 none
    before = np.r_[-1, highest[:-1]]  # -1 after a tombstone too: its own "highest" is its segment's, none
    raised = counted & (e > before)
    highest_row = np.maximum.accumulate(np.where(raised, np.arange(n), -1))  # the commit that set it (not a finding)
    regression = counted & (before >= 0) & (e < before)
    # "dropped" once per run of -1 commits (a commit with an epoch, or a tombstone, ends the run)
    dropped = (e < 0) & ~tomb & (before >= 0) & np.r_[True, e[:-1] >= 0]
    rows = [(int(k), 0, [cm.commit(a + int(highest_row[k]), gid), cm.commit(a + int(k), gid)], None)
            for k in np.flatnonzero(regression | dropped)]  # fmt: skip
    if len(ra.rounds):
        # F2: commits with an offset and an epoch; a run of commits repeating the (offset, epoch) of the commit
        # before gives its first flagged commit only
        same_off = np.where(no_off[1:], no_off[:-1], ~no_off[:-1] & (o[1:] == o[:-1]))
        repeat = np.r_[False, same_off & (e[1:] == e[:-1]) & ~tomb[:-1]]
        judged = np.flatnonzero(counted & ~no_off)
        flagged = judged[_f2_flags(cm, a + judged, ra, gid)] if len(judged) else judged
        run = np.cumsum(~repeat)[flagged]
        flagged = flagged[np.r_[True, run[1:] != run[:-1]]] if len(flagged) else flagged
        rows += [(int(k), 1, [cm.commit(a + int(k), gid)], lookup) for k in flagged]
    out: list[Finding] = []
    for _, _, seq, lkp in sorted(rows, key=lambda r: r[:2]):  # the rule's order: by commit, F4 before F2
        out += check_commit_fencing(seq, lkp)  # [highest, commit] without a lookup: its F4 finding only
    return out


def _reset_candidates(
    o: np.ndarray, fwd: np.ndarray, rates: np.ndarray, s2a: np.ndarray, reach: np.ndarray, factor: float, start: int,
) -> np.ndarray:
    """Indices >= ``start`` that may give a finding: rewinds, S2a-shaped moves, and forward moves reaching
    the log-end estimate faster than ``factor`` x the highest earlier rate (``rates``: -inf for moves that
    do not count)."""
    n = len(o)
    prev_max = np.full(n, -np.inf)
    if n > 1:
        prev_max[1:] = np.maximum.accumulate(rates)[:-1]
    rewind = np.zeros(n, dtype=bool)
    rewind[1:] = o[1:] < o[:-1]
    fast = fwd & reach & np.isfinite(prev_max) & (rates > factor * prev_max * (1 - 1e-9))
    cand = rewind | (fwd & s2a) | fast
    cand[:start] = False
    return np.flatnonzero(cand)


def _resets(
    cm: _Commits, a: int, b: int, gid: str, ctx: ResetContext, ra: _RoundArrays,
    est_ts: np.ndarray, est_off: np.ndarray,
) -> list[Finding]:
    breaks = np.flatnonzero(cm.tomb[a:b] | cm.off_null[a:b])
    if len(breaks):  # a tombstone or a commit without an offset ends a run: the rule starts afresh after it
        bounds = zip(np.r_[a, a + breaks + 1].tolist(), np.r_[a + breaks, b].tolist(), strict=True)
        return [f for lo, hi in bounds if hi > lo for f in _resets(cm, lo, hi, gid, ctx, ra, est_ts, est_off)]
    if b - a < SHORT:
        return check_offset_resets(cm.commits(a, b, gid), ctx)
    n = b - a
    o, ts = cm.off[a:b], cm.ts[a:b]
    # loop state of check_offset_resets, vectorised: ``since`` of commit k is the time of the last commit
    # before k that was not a repeat of its predecessor's offset
    moved = np.r_[True, o[1:] != o[:-1]]
    last_moved = np.maximum.accumulate(np.where(moved, np.arange(n), 0))
    since = np.zeros(n, dtype=np.int64)
    since[1:] = ts[last_moved[:-1]]
    fwd = np.zeros(n, dtype=bool)
    fwd[1:] = o[1:] > o[:-1]
    step = np.zeros(n, dtype=np.int64)
    step[1:] = o[1:] - o[:-1]
    rates = np.where(fwd, step / np.maximum(ts - since, MIN_PACE_ELAPSED_MS), -np.inf)  # pace_rate
    steps = np.where(fwd, step, np.iinfo(np.int64).min)
    po = np.r_[o[:1], o[:-1]]
    if len(ra.rounds):
        li = ra.rounds.leader_indices_at(ts)
        ls_at = np.where(li >= 0, ra.log_start[np.maximum(li, 0)], _NO_LS)
        bi = ra.rounds.indices_before(ts)
        ls_before = np.where(bi >= 0, ra.log_start[np.maximum(bi, 0)], _NO_LS)
        s2a = ((ls_at != _NO_LS) & (po < ls_at) & (o == ls_at)) | ((ls_before != _NO_LS) & (po < ls_before) & (o == ls_before))
    else:
        s2a = np.zeros(n, dtype=bool)
    # a superset of "reaches ctx.log_end_before": the estimate is at least the newest snapshot estimate,
    # and without one only the other groups' commits (ctx.offsets_seen) can give it; classify_jump decides
    ei = np.searchsorted(est_ts, ts, side="right") - 1
    reach = (ei >= 0) & (o >= est_off[np.maximum(ei, 0)]) if len(est_ts) else np.zeros(n, dtype=bool)
    if ctx.offsets_seen is not None:
        reach |= ei < 0
    factor = float(ctx.skip_pace_factor)

    out: list[Finding] = []
    cands = _reset_candidates(o, fwd, rates, s2a, reach, factor, 1)
    j = 0
    while j < len(cands):
        k = int(cands[j])
        c, prev = cm.commit(a + k, gid), cm.commit(a + k - 1, gid)
        if o[k] < o[k - 1]:
            out.append(classify_rewind(c, prev, ctx))
            j += 1
            continue
        counted = rates[:k][np.isfinite(rates[:k])]
        max_rate = float(counted.max()) if len(counted) else None
        max_step = int(steps[:k].max()) if len(counted) else None
        f = classify_jump(c, prev, ctx, max_step, max_rate, int(since[k]))
        if f is None:
            j += 1
            continue
        out.append(f)
        # a jump that is a finding does not count towards the pace: later candidates change
        rates[k], steps[k] = -np.inf, np.iinfo(np.int64).min
        cands = _reset_candidates(o, fwd, rates, s2a, reach, factor, k + 1)
        j = 0
    return out


def check_partition_commits(
    commits: pa.Table,
    snapshots: Sequence[ReplicaSnapshot],
    group_states: Mapping[str, Sequence[GroupState]] | None = None,
    *,
    tolerance_ms: int = 0,
    fencing: bool = True,
    resets: bool = True,
    topic_created: Mapping[str, int] | None = None,
) -> list[CommitFinding]:
    """F2/F4 (``fencing``) and S1/S2 (``resets``) findings of one (topic, partition)'s commits.

    ``commits``: the partition's *live* commits (txn_state none/committed; tombstones kept, they end a
    sequence), any order, with ``topic``, ``partition`` and :data:`COMMIT_COLUMNS` (strings plain or
    dictionary-encoded); each group's sequence
    is taken in :func:`commit_log_order`. ``snapshots``: the partition's lineage snapshots, any order
    (rounds within ``tolerance_ms``). ``group_states``: each group's metadata records, any order (ties in
    time go to the later log offset). The result equals ``check_commit_fencing(seq, lookup)`` and
    ``check_offset_resets(seq, ResetContext(snapshots, the group's records, OffsetsSeen of every group's
    commits, tolerance_ms))`` on every group's sequence, groups in id order, F before S per group.
    ``topic_created``: topic id -> creation time (the metadata log's), given to the rounds (and so to both
    rule families): a commit before the creation of the topic id of the round that would judge it has no leader.
    """
    if commits.num_rows == 0:
        return []
    topic = str(commits.column("topic")[0].as_py())
    partition = int(commits.column("partition")[0].as_py())
    snaps = sorted(snapshots, key=lambda s: (s.snapshot_ts, s.broker, s.source or ""))
    cm = _Commits(commits, topic, partition)
    rounds = SnapshotRounds(snaps, tolerance_ms, topic_created)
    ra = _RoundArrays(rounds)
    out: list[CommitFinding] = []
    if fencing:
        lookup = rounds.leader_at if snaps else None
        for a, b in cm.bounds:
            out += [CommitFinding(f) for f in _fencing(cm, a, b, cm.group_id(a), ra, lookup)]
    if resets:
        states = {
            g: sorted(v, key=lambda s: (s.event_ts, s.log_offset if s.log_offset is not None else -1))
            for g, v in (group_states or {}).items()
        }
        ests = rounds.log_end_estimates()
        est_ts = np.array([e.ts for e in ests], dtype=np.int64)
        est_off = np.array([e.offset for e in ests], dtype=np.int64)
        seen = cm.offsets_seen() if len(cm.bounds) > 1 else None  # one group: nobody else's offsets to see
        for a, b in cm.bounds:
            gid = cm.group_id(a)
            ctx = ResetContext(snapshots=snaps, group_states=states.get(gid, ()), offsets_seen=seen,
                               tolerance_ms=tolerance_ms, topic_created=topic_created,
                               snapshot_rounds=rounds)  # fmt: skip
            for f in _resets(cm, a, b, gid, ctx, ra, est_ts, est_off):
                g = ctx.group_state_at(f.event_ts)
                out.append(CommitFinding(f, tuple(g.client_ids) if g is not None else None))
    return out
