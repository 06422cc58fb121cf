"""The commit pass: F2/F4 (``fencing_violations``) and S1/S2 (``spurious_offset_resets``) in ONE grouped
Arrow call over the commits.

Why one pass: the commits are by far the largest input (10^8-10^9 a day on a busy cluster), and both
rule families read them the same way — one sequence per (group, topic, partition) in
``__consumer_offsets`` log order, against the lineage snapshots of the partition. So the commits are
shuffled once, cogrouped by (topic, partition) with a small *side* table, and every finding comes back
tagged with its rule; :func:`run_reports <jobs.reports.run_reports>` splits F* and S* rows afterwards.

- left: the live commits (txn_state none/committed, tombstones kept), only the columns the rules read
  (``ts`` = event time, else commit time — the ``Commit.ts`` the rules use);
- right (the side table, small): the partition's ``epoch_lineage`` rows (``_k`` = 0) and, when the resets
  are wanted, the ``group_metadata`` records of every group that commits to the partition (``_k`` = 1,
  a join of the distinct (group, topic, partition) of the commits with the records). Inside, each
  group's :class:`~epochlib.rules.ResetContext` gets all its records: ``group_state_at`` picks the last
  record at or before a commit, which is what the earlier window-function as-of join attached — without
  a shuffle and sort of every commit by group.

Inside a (topic, partition) group the work is columnar (numpy over the Arrow columns); the Python rules
run only where a finding is possible:

- F2/F4: a sequence with no tombstone, no null offset, no epoch -1 and epochs that never go down cannot
  give F4, and F2 is decided per commit by :func:`~epochlib.rules.fence_check`, whose answer depends on
  the commit only through (leader snapshot, epoch, snapshot older than the commit) and the comparison of
  the offset with the epoch's end: it is evaluated once per distinct triple and the offsets are compared
  vectorised. Only flagged commits become :class:`~epochlib.rules.Commit` values and go through
  :func:`~epochlib.rules.check_commit_fencing` (a one-commit sequence gives exactly its F2 finding).
  Any other sequence runs the rule on the whole sequence.
- S1/S2: every rewind is a finding; a forward move can only be one when its new offset equals a leader's
  log start (S2a) or, at a rate above the pace factor times the highest earlier rate, reaches the newest
  snapshot log-end estimate or has none to reach (then the other groups' commits, "the highest offset
  seen", may still give one) (S2b). Those candidates are classified by the rule's own ``_classify_rewind`` /
  ``_classify_jump`` with the exact loop state (previous commit, since, largest step and rate of the
  earlier forward moves that were not findings). Sequences with a tombstone or a null offset run
  :func:`~epochlib.rules.check_offset_resets` whole.

``tests/test_reports_commit_pass.py`` checks both fast paths against the rules on random sequences, so
a rule change that the candidate filters do not cover fails there.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from epochlib.rules import (
    Commit,
    GroupState,
    OffsetsSeen,
    ReplicaSnapshot,
    ResetContext,
    check_commit_fencing,
    check_offset_resets,
    fence_check,
    make_lineage_lookup,
)
from epochlib.rules.fencing import _rounds, leader_of_round
from epochlib.rules.resets import _classify_jump, _classify_rewind, _log_start, snapshot_log_ends

from . import _frames as fr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["COMMIT_COLUMNS", "commit_findings", "commit_rows", "group_records", "run_commit_pass"]

#: What the pass reads of a commit (besides the keys topic, partition).
COMMIT_COLUMNS = ("group_id", "committed_offset", "leader_epoch", "ts", "is_tombstone", "log_offset", "source", "position")
STATE_FIELDS = (
    "g_event_ts", "g_member_count", "g_client_ids", "g_is_tombstone", "g_generation", "g_protocol_type",
    "g_log_offset", "g_source", "g_position",
)  # fmt: skip
#: Sequences shorter than this run the plain rules (numpy's per-call cost exceeds the loop's).
SHORT = 8
_NO_LS = np.iinfo(np.int64).min  # "no log start" in the vectorised arrays


# ------------------------------------------------------------------------------------ executor side


class _Commits:
    """One (topic, partition) group's commits sorted per group in log order, as numpy columns; builds
    :class:`Commit` values only for the rows asked for."""

    def __init__(self, table: pa.Table, topic: str, partition: int) -> None:
        n = table.num_rows
        gid = pc.fill_null(table.column("group_id").cast(pa.string()), "None")  # Commit: str(None)
        lo = table.column("log_offset")
        keys = pa.table(
            {
                "g": gid,
                "lo_null": pc.is_null(lo),
                "lo": pc.fill_null(lo, 0),
                "ts": pc.fill_null(table.column("ts"), 0),
                "src": pc.fill_null(table.column("source"), ""),
                "pos": pc.fill_null(table.column("position"), 0),
            }
        )
        # fr.commit_log_order per group, groups by id (a stable sort, as Python's)
        order = pc.sort_indices(
            keys, sort_keys=[("g", "ascending"), ("lo_null", "ascending"), ("lo", "ascending"),
                             ("ts", "ascending"), ("src", "ascending"), ("pos", "ascending")],  # fmt: skip
        )
        t = table.take(order)
        self.topic, self.partition, self.n = topic, partition, n
        self.gid = gid.take(order)
        codes = self.gid.combine_chunks().dictionary_encode()
        ids = codes.indices.to_numpy(zero_copy_only=False)
        self.codes, self.names = ids, codes.dictionary.to_pylist()
        starts = np.flatnonzero(np.r_[True, ids[1:] != ids[:-1]]) if n else np.array([], dtype=np.int64)
        self.bounds = list(zip(starts.tolist(), np.r_[starts[1:], n].tolist(), strict=True))
        off = t.column("committed_offset")
        ep = t.column("leader_epoch")
        tomb = t.column("is_tombstone")
        self.off_null = pc.is_null(off).to_numpy()
        self.off = pc.fill_null(off, 0).to_numpy().astype(np.int64)
        self.ep_raw_null = pc.is_null(ep).to_numpy()
        raw = pc.fill_null(ep, -1).to_numpy().astype(np.int64)
        self.epoch = np.where(raw < 0, -1, raw)  # Commit.epoch
        self.tomb = pc.fill_null(tomb, False).to_numpy().astype(bool)
        self.ts = pc.fill_null(t.column("ts"), 0).to_numpy().astype(np.int64)
        self._cols: dict[str, pa.ChunkedArray] = {c: t.column(c) for c in ("leader_epoch", "log_offset", "source", "position", "ts")}

    def group_id(self, start: int) -> str:
        return self.gid[start].as_py()

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
            self.ts[rows], self.off[rows], [self.names[k] for k in self.codes[rows].tolist()],
            lambda i: self.commit(int(rows[i]), self.gid[int(rows[i])].as_py()).pointer(),
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


class _Leaders:
    """The partition's snapshot rounds as arrays: the leader of the first round ending at or after a time
    (``at``, :func:`~epochlib.rules.make_lineage_lookup`) and of the newest round ending at or before it
    (``before``, ``ResetContext.leader_before``)."""

    def __init__(self, snaps: Sequence[ReplicaSnapshot], tolerance_ms: int) -> None:
        rounds = _rounds(snaps, tolerance_ms)
        self.ends = np.array([max(s.snapshot_ts for s in m) for _, m in rounds], dtype=np.int64)
        self.leaders = [leader_of_round(m) for _, m in rounds]
        self.snap_ts = np.array([s.snapshot_ts for s in self.leaders], dtype=np.int64)
        ls = [_log_start(s)[0] for s in self.leaders]
        self.log_start = np.array([_NO_LS if v is None else v for v in ls], dtype=np.int64)

    def __len__(self) -> int:
        return len(self.leaders)

    def at(self, ts: np.ndarray) -> np.ndarray:
        return np.minimum(np.searchsorted(self.ends, ts, side="left"), len(self.leaders) - 1)

    def before(self, ts: np.ndarray) -> np.ndarray:
        return np.searchsorted(self.ends, ts, side="right") - 1


def _f2_flags(cm: _Commits, a: int, b: int, leaders: _Leaders, gid: str) -> np.ndarray:
    """Commits of ``[a, b)`` for which :func:`fence_check` gives unknown_epoch or beyond_epoch_end."""
    ts, e, o = cm.ts[a:b], cm.epoch[a:b], cm.off[a:b]
    li = leaders.at(ts)
    older = leaders.snap_ts[li] < ts
    combo = (li.astype(np.int64) * 2 + older) * (1 << 32) + e
    uniq, first, inv = np.unique(combo, return_index=True, return_inverse=True)
    unknown = np.zeros(len(uniq), dtype=bool)
    end = np.full(len(uniq), -1, dtype=np.int64)  # end offset where the comparison decides; -1: never
    for k, i in enumerate(first.tolist()):
        r = fence_check(cm.commit(a + i, gid), leaders.leaders[li[i]])
        if r.status == "unknown_epoch":
            unknown[k] = True
        elif r.status in ("ok", "beyond_epoch_end"):
            end[k] = r.end_offset
    ends = end[inv]
    return unknown[inv] | ((ends >= 0) & (ends < o))


def _fencing(cm: _Commits, a: int, b: int, gid: str, leaders: _Leaders, lookup: Callable | None) -> list[Any]:
    e = cm.epoch[a:b]
    plain = (
        b - a >= SHORT
        and not cm.tomb[a:b].any()
        and not cm.off_null[a:b].any()
        and not cm.ep_raw_null[a:b].any()
        and (e >= 0).all()
        and not (np.diff(e) < 0).any()
    )
    if not plain:
        return check_commit_fencing(cm.commits(a, b, gid), lookup)
    if not len(leaders):
        return []  # no lineage: F2 is skipped for every commit, and F4 cannot fire
    flags = _f2_flags(cm, a, b, leaders, gid)
    o = cm.off[a:b]
    new_key = np.r_[True, (o[1:] != o[:-1]) | (e[1:] != e[:-1])]  # the rule skips a repeated (offset, epoch)
    out: list[Any] = []
    for i in np.flatnonzero(flags & new_key).tolist():
        out += check_commit_fencing([cm.commit(a + i, gid)], lookup)
    return out


def _reset_candidates(
    o: np.ndarray, ts: np.ndarray, since: np.ndarray, fwd: np.ndarray, rates: np.ndarray, s2a: np.ndarray,
    reach: np.ndarray, factor: float, start: int,
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
    cm: _Commits, a: int, b: int, gid: str, ctx: ResetContext, leaders: _Leaders,
    est_ts: np.ndarray, est_off: np.ndarray,
) -> list[Any]:
    if b - a < SHORT or cm.tomb[a:b].any() or cm.off_null[a:b].any():
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
    rates = np.where(fwd, step / np.maximum(ts - since, 1000), -np.inf)
    steps = np.where(fwd, step, np.iinfo(np.int64).min)
    po = np.r_[o[:1], o[:-1]]
    if len(leaders):
        ls_at = leaders.log_start[leaders.at(ts)]
        bi = leaders.before(ts)
        ls_before = np.where(bi >= 0, leaders.log_start[np.maximum(bi, 0)], _NO_LS)
        s2a = ((ls_at != _NO_LS) & (po < ls_at) & (o == ls_at)) | ((ls_before != _NO_LS) & (po < ls_before) & (o == ls_before))
    else:
        s2a = np.zeros(n, dtype=bool)
    # a superset of "reaches ctx.log_end_before": the estimate is at least the newest snapshot estimate,
    # and without one only the other groups' commits (ctx.offsets_seen) can give it; _classify_jump decides
    ei = np.searchsorted(est_ts, ts, side="right") - 1
    reach = (ei >= 0) & (o >= est_off[np.maximum(ei, 0)]) if len(est_ts) else np.zeros(n, dtype=bool)
    if ctx.offsets_seen is not None:
        reach |= ei < 0
    factor = float(ctx.skip_pace_factor)

    out: list[Any] = []
    cands = _reset_candidates(o, ts, since, fwd, rates, s2a, reach, factor, 1)
    j = 0
    while j < len(cands):
        k = int(cands[j])
        c, prev = cm.commit(a + k, gid), cm.commit(a + k - 1, gid)
        if o[k] < o[k - 1]:
            out.append(_classify_rewind(c, prev, ctx))
            j += 1
            continue
        counted = rates[:k][np.isfinite(rates[:k])]
        max_rate = float(counted.max()) if len(counted) else None
        max_step = int(steps[:k].max()) if len(counted) else None
        f = _classify_jump(c, prev, ctx, max_step, max_rate, int(since[k]))
        if f is None:
            j += 1
            continue
        out.append(f)
        # a jump that is a finding does not count towards the pace: later candidates change
        rates[k], steps[k] = -np.inf, np.iinfo(np.int64).min
        cands = _reset_candidates(o, ts, since, fwd, rates, s2a, reach, factor, k + 1)
        j = 0
    return out


def _states(side: pa.Table) -> dict[str, list[GroupState]]:
    """Group records of the side table per group, ordered by (time, log offset; null first)."""
    if "_k" not in side.column_names or "g_event_ts" not in side.column_names:
        return {}
    recs = side.filter(pc.equal(side.column("_k"), 1))
    cols = [recs.column(f).to_pylist() for f in ("group_id", *STATE_FIELDS)]
    out: dict[str, list[GroupState]] = defaultdict(list)
    for gid, ts, count, clients, tomb, gen, ptype, lo, src, pos in zip(*cols, strict=True):
        out[str(gid)].append(
            GroupState(
                group_id=str(gid), event_ts=int(ts), member_count=count, client_ids=tuple(clients or ()),
                is_tombstone=bool(tomb), generation=gen, protocol_type=ptype, log_offset=lo, source=src,
                position=pos,
            )  # fmt: skip
        )
    for v in out.values():
        v.sort(key=lambda g: (g.event_ts, g.log_offset if g.log_offset is not None else -1))
    return out


def _log_end_estimates(snaps: Sequence[ReplicaSnapshot], tolerance_ms: int) -> tuple[np.ndarray, np.ndarray]:
    """The snapshot log-end estimates ``ResetContext.log_end_before`` bisects, as (times, offsets)."""
    ests = snapshot_log_ends(snaps, tolerance_ms)
    return np.array([e.ts for e in ests], dtype=np.int64), np.array([e.offset for e in ests], dtype=np.int64)


def run_commit_pass(
    commit_table: pa.Table, side_table: pa.Table, *, tolerance_ms: int, fencing: bool = True, resets: bool = True
) -> list[Any]:
    """F2/F4 findings and S1/S2 finding rows (with ``group_clients``) of one (topic, partition)."""
    if commit_table.num_rows == 0:
        return []
    topic = str(commit_table.column("topic")[0].as_py())
    partition = int(commit_table.column("partition")[0].as_py())
    lin = side_table.filter(pc.equal(side_table.column("_k"), 0)) if "_k" in side_table.column_names else side_table
    snaps = fr.snapshots_from_arrow(lin.select([c for c in lin.column_names if c in _SNAPSHOT_FIELDS]))
    snaps.sort(key=fr.snapshot_order)
    cm = _Commits(commit_table, topic, partition)
    leaders = _Leaders(snaps, tolerance_ms)
    out: list[Any] = []
    if fencing:
        lookup = make_lineage_lookup(snaps, tolerance_ms) if snaps else None
        for a, b in cm.bounds:
            out += _fencing(cm, a, b, cm.group_id(a), leaders, lookup)
    if resets:
        states = _states(side_table)
        est_ts, est_off = _log_end_estimates(snaps, tolerance_ms)
        seen = cm.offsets_seen() if len(cm.bounds) > 1 else None  # one group: nobody else's offsets to see
        for a, b in cm.bounds:
            gid = cm.group_id(a)
            ctx = ResetContext(snapshots=snaps, group_states=states.get(gid, ()), offsets_seen=seen,
                               tolerance_ms=tolerance_ms)  # fmt: skip
            for f in _resets(cm, a, b, gid, ctx, leaders, est_ts, est_off):
                g = ctx.group_state_at(f.event_ts)
                out.append(fr.finding_row(f, group_clients=g.client_ids if g is not None else None))
    return out


_SNAPSHOT_FIELDS = frozenset(
    ("broker", "snapshot_ts", "topic", "partition", "topic_id", "entries", "checkpoint_version", "log_start_offset",
     "high_watermark", "recovery_point", "log_end_offset", "source")  # fmt: skip
)


# -------------------------------------------------------------------------------------- driver side


def commit_rows(commits: DataFrame) -> DataFrame:
    """Live commits (times in ms, as :func:`jobs.reports.fencing.commits` gives them) narrowed to the keys
    and :data:`COMMIT_COLUMNS`."""
    from pyspark.sql import functions as F

    ts = F.coalesce(F.col("event_ts"), F.col("commit_ts")).alias("ts")
    return commits.select(
        "topic", "partition", "group_id", "committed_offset", "leader_epoch", ts, "is_tombstone", "log_offset",
        "source", "position",
    )  # fmt: skip


def group_records(groups: DataFrame) -> DataFrame:
    """``group_metadata`` records as the ``g_*`` state the resets read (time, member count and client ids,
    tombstone, generation, protocol type, pointer), keyed by ``group_id``."""
    from pyspark.sql import functions as F

    g = fr.ms_columns(groups, ("event_ts", "state_ts"))
    count = F.coalesce(F.col("member_count"), F.when(F.col("members").isNotNull(), F.size("members")))
    clients = F.filter(F.transform(F.coalesce(F.col("members"), F.array()), lambda m: m["client_id"]),
                       lambda x: x.isNotNull())  # fmt: skip
    return g.where(F.col("group_id").isNotNull()).select(
        "group_id",
        F.coalesce("event_ts", "state_ts", F.lit(0)).alias("g_event_ts"),
        count.cast("int").alias("g_member_count"),
        clients.alias("g_client_ids"),
        F.coalesce(F.col("is_tombstone"), F.lit(False)).alias("g_is_tombstone"),
        F.col("generation").alias("g_generation"),
        F.col("protocol_type").alias("g_protocol_type"),
        F.col("log_offset").alias("g_log_offset"),
        F.col("source").alias("g_source"),
        F.col("position").alias("g_position"),
    )


def commit_findings(
    commits: DataFrame,
    lineage_df: DataFrame,
    groups: DataFrame | None,
    *,
    tolerance_ms: int,
    fencing: bool = True,
    resets: bool = True,
) -> DataFrame:
    """F2/F4 and S1/S2 findings (FINDINGS schema, uncorrelated, in range or not) in one cogroup of the
    commits with the lineage (and, for the resets, the group records of the partition's groups)."""
    from functools import partial

    from pyspark.sql import functions as F

    rows = commit_rows(commits)
    side = lineage_df.withColumn("_k", F.lit(0))
    if resets and groups is not None:
        pairs = rows.select("group_id", "topic", "partition").distinct()
        recs = pairs.join(group_records(groups), "group_id").withColumn("_k", F.lit(1))
        side = side.unionByName(recs, allowMissingColumns=True)
    fn = partial(run_commit_pass, tolerance_ms=tolerance_ms, fencing=fencing, resets=resets)
    return (
        rows.groupBy("topic", "partition")
        .cogroup(side.groupBy("topic", "partition"))
        .applyInArrow(fr.arrow_cogroup_fn(fn), fr.findings_spark_schema())
    )
