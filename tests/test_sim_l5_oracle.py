"""The simulator's L5 oracle (``epochlib.sim.oracles.lineage_change``) on plain lineages, and its agreement
with the audit's rule (``check_lineage_history``) on the same snapshots.

The first case is accuracy-3's ``orders``-3 on broker 2: the follower that kept its divergent suffix
(D1) truncated it to 97680 once it resolved, caught up from the unclean leader's epoch 8, and retention
moved the log start to 98000 before the next snapshot. The old lineage's epochs are all below the new
head's, but epoch 7 started at 103095, above the new log start: retention cannot have removed it.
"""

from __future__ import annotations

import pytest

from epochlib.rules import ReplicaSnapshot, check_lineage_history
from epochlib.sim.oracles import lineage_as_loaded, lineage_change

DIVERGENT = ((6, 72000), (7, 103095))  # broker 2 at 08:00:03, LEO 121507, log start 72000
CAUGHT_UP = ((8, 98000),)  # broker 2 at 10:00:13, log start 98000 (LEO 162713)


def snap(entries, ts, ls, leo=None) -> ReplicaSnapshot:
    src = "/ld/broker=2/snapshot=20240630T000000Z/orders-3/leader-epoch-checkpoint"
    return ReplicaSnapshot(broker="2", snapshot_ts=ts, topic="orders", partition=3, entries=entries,
                           log_start_offset=ls, log_end_offset=leo, source=src)  # fmt: skip


def test_truncation_then_catch_up_past_the_retention_point_is_a_truncation():
    # before the fix the oracle read every vanished epoch below the new head epoch (8) as head trimming
    assert lineage_change(DIVERGENT, 121507, CAUGHT_UP) == ([], [(6, 72000), (7, 103095)])


def test_the_audit_reports_the_same_snapshots_as_truncated():
    # what the audit sees: log starts known, log ends unknown (no segments written for orders-3)
    (f,) = check_lineage_history([snap(DIVERGENT, 1, 72000), snap(CAUGHT_UP, 2, 98000)])
    assert (f.rule, f.kind, f.severity) == ("L5", "lineage_truncated", "info")
    assert f.numbers["truncation_point"] == 98000  # the real point 97680 lies below the new log start


@pytest.mark.parametrize(
    "new,ls,expected",
    [
        (((6, 98000), (7, 103095)), 98000, ([], [])),  # head trimmed inside epoch 6
        (((7, 110000),), 110000, ([], [])),  # epoch 6 wholly below the new log start
        (((7, 115000), (8, 125000)), 115000, ([], [])),  # trimmed, then a clean election past the old LEO
        (((8, 125000),), 125000, ([], [])),  # retention past the whole old log
        (((6, 72000), (8, 110000)), 72000, ([], [(7, 103095)])),  # plain tail truncation
        (((8, 98000),), 98000, ([], [(6, 72000), (7, 103095)])),  # truncated, caught up, trimmed
    ],
)
def test_oracle_and_rule_agree(new, ls, expected):
    assert lineage_change(DIVERGENT, 121507, new) == expected
    kinds = [f.kind for f in check_lineage_history([snap(DIVERGENT, 1, 72000), snap(new, 2, ls)])]
    assert kinds == (["lineage_truncated"] if expected[1] else [])
    # the same with both log ends known (segments written)
    kinds = [f.kind for f in check_lineage_history([snap(DIVERGENT, 1, 72000, 121507), snap(new, 2, ls, 130000)])]
    assert kinds == (["lineage_truncated"] if expected[1] else [])


def test_interior_entry_vanishing_is_a_rewrite_for_both():
    prev = ((5, 1000), (6, 72000), (7, 103095))
    new = ((5, 1000), (7, 103095))
    rewritten, truncated = lineage_change(prev, 121507, new)
    assert rewritten == ["interior entry (6, 72000) vanished"] and truncated == []
    (f,) = check_lineage_history([snap(prev, 1, 1000), snap(new, 2, 1000)])
    assert f.kind == "lineage_rewritten"


def test_identical_lineages_are_no_change():
    assert lineage_change(DIVERGENT, 121507, DIVERGENT) == ([], [])


# --------------------------------------------------------------------------- non-monotonic checkpoints
#
# accuracy-3's audit-trail-4 on broker 2: the simulator writes the non-monotonic checkpoint
# [(6, 559000), (0, 594623)] at 11:58:06 (L2). Loaded the way the broker loads it (each line through
# LeaderEpochCache.assign), (0, 594623) evicts epoch 6, so the replica's lineage is [(0, 594623)], and L5
# compares that with the snapshot before it ([(6, 530000)], LEO 601971): epoch 6 vanished although its
# offsets reach past 594623 — a tail truncation, which the truth has to name too.

BEFORE_NM = ((6, 530000),)  # 10:00:05, log start 530000, LEO 601971
WRITTEN_NM = ((6, 559000), (0, 594623))  # 11:58:06, log start 559000, LEO 630247
AFTER_NM = ((6, 588000),)  # a later snapshot, log start 588000 (the epoch 6 the assign evicted is back)


def test_a_non_monotonic_checkpoint_is_compared_as_the_broker_loads_it():
    loaded = lineage_as_loaded(WRITTEN_NM, log_start=559000, log_end=None)
    assert loaded == ((0, 594623),)
    assert lineage_change(BEFORE_NM, 601971, loaded, log_start=559000) == ([], [(6, 530000)])
    # the snapshot after it is compared with the loaded lineage too: epoch 0 vanished in turn
    assert lineage_change(loaded, 630247, AFTER_NM, log_start=588000) == ([], [(0, 594623)])
    # what the audit reports for the same files (log ends unknown: audit-trail has no segments)
    fs = check_lineage_history([snap(BEFORE_NM, 1, 530000), snap(WRITTEN_NM, 2, 559000), snap(AFTER_NM, 3, 588000)])
    assert [(f.kind, f.event_ts) for f in fs] == [("lineage_truncated", 2), ("lineage_truncated", 3)]


def test_a_loaded_head_above_the_log_start_was_not_left_by_retention():
    # the simulated case below (seed 5): epoch 4 ran to 71390 at the previous snapshot, short of the
    # out-of-order entry's 73912, so "its whole range lies below the new head" held; but the new log start
    # is 61000, and offsets 61000..73912 are in the log with no entry covering them: retention re-inserts
    # the epoch in force at the log start (the file's first line, (4, 61000)), only the eviction removes it
    prev, written = ((4, 45000),), ((4, 61000), (0, 73912))
    loaded = lineage_as_loaded(written, log_start=61000, log_end=None)
    assert loaded == ((0, 73912),)
    assert lineage_change(prev, 71390, loaded) == ([], [])  # the new head's start standing in for the log start
    assert lineage_change(prev, 71390, loaded, log_start=61000) == ([], [(4, 45000)])
    (f,) = check_lineage_history([snap(prev, 1, 45000), snap(written, 2, 61000)])
    assert f.kind == "lineage_truncated"
    # the same when retention passed the old log end: epoch 4 was still in force at the new log start
    assert lineage_change(prev, 58000, loaded, log_start=61000) == ([], [(4, 45000)])
    # an entry a later old entry took over from below the log start was trimmed, not truncated
    assert lineage_change(((3, 30000), (4, 45000)), 71390, loaded, log_start=61000) == ([], [(4, 45000)])
    # a head at the log start is what retention leaves: the rule is unchanged there
    assert lineage_change(prev, 58000, ((4, 61000),), log_start=61000) == ([], [])
    assert lineage_change(prev, 58000, ((5, 61000),), log_start=61000) == ([], [])
    assert lineage_change(prev, 71390, ((5, 61000),), log_start=61000) == ([], [(4, 45000)])


def test_loading_applies_the_log_bounds_the_snapshot_shows():
    # the evicting entry starts at the log start (the last epoch held one record): it stays, at the start
    assert lineage_as_loaded(((6, 559000), (0, 559000)), log_start=559000, log_end=None) == ((0, 559000),)
    # it starts at the log end (nothing written in it yet): it stays, as a running leader's entry does
    # (LogLoader drops it on a restart only); past the log end it goes
    assert lineage_as_loaded(((6, 559000), (0, 560000)), log_start=559000, log_end=560000) == ((0, 560000),)
    assert lineage_as_loaded(((6, 559000), (0, 560001)), log_start=559000, log_end=560000) == ()
    # a monotonic lineage inside its bounds is unchanged
    assert lineage_as_loaded(DIVERGENT, log_start=72000, log_end=121507) == DIVERGENT


def _replica_snapshots(logdirs, broker, topic, partition):
    """The readable snapshots of one replica as the audit builds them from the written files (log end
    unknown: the test asserts no segments were written for it)."""
    from epochlib.checkpoint import parse_leader_epoch_checkpoint, parse_offset_checkpoint
    from epochlib.errors import DecodeError

    out = []
    for ts, snap_dir in enumerate(sorted((logdirs / f"broker={broker}").glob("snapshot=*"))):
        d = snap_dir / f"{topic}-{partition}"
        if not d.is_dir():
            continue
        assert not list(d.glob("*.log"))
        try:
            entries = parse_leader_epoch_checkpoint((d / "leader-epoch-checkpoint").read_bytes()).entries
        except DecodeError:
            continue  # quarantined (L1): no epoch_lineage row
        starts = parse_offset_checkpoint((snap_dir / "log-start-offset-checkpoint").read_bytes()).entries
        out.append((snap_dir.name.split("=", 1)[1], snap(entries, ts, starts.get((topic, partition)))))
    return out


def test_simulated_non_monotonic_checkpoint_has_its_l5_consequence_in_the_truth(tmp_path):
    import json

    from epochlib.sim import Anomalies, Scenario, simulate
    from epochlib.sim.writers import snapshot_name

    quiet = dict(stale_epoch_batches=0, unknown_epoch_batches=0, lineage_rewrites=0, replica_conflicts=0,
                 topic_recreations=0, topic_id_regressions=0, retention_resets=0, corrupt_checkpoints=0)  # fmt: skip
    sc = Scenario(name="nm", seed=5, days=0.25, brokers=3, partitions=3, commits=600, snapshot_interval_hours=1.5,
                  retention_hours=1.0, extra_metadata_clients=1, metadata_interval_s=900, data_tail_records=200,
                  anomalies=Anomalies(**quiet))  # fmt: skip
    res = simulate(sc, tmp_path)
    truth = [json.loads(x) for x in res.truth.read_text().splitlines()]
    (l2,) = [r for r in truth if r["kind"] == "lineage_not_monotonic"]
    where = (l2["broker"], l2["topic"], l2["partition"])
    snaps = _replica_snapshots(res.logdirs, *where)
    assert len(snaps) >= 2
    names = {s.snapshot_ts: name for name, s in snaps}
    found = [(f.kind, names[f.event_ts]) for f in check_lineage_history([s for _, s in snaps])]
    expected = [(r["kind"], snapshot_name(r["event_ts"])) for r in truth
                if r["rule"] == "L5" and (r["broker"], r["topic"], r["partition"]) == where]  # fmt: skip
    assert found == expected
    assert ("lineage_truncated", snapshot_name(l2["event_ts"])) in expected


# --------------------------------------------------------------------------- the audit against the truth
#
# The small scenario of tests/test_sim.py (1.5 h snapshots, 1 h retention) has, in every seed, a follower
# that truncated its divergent suffix, caught up from the next leader and had its log start moved past the
# old tail entry's start (not past the old log end) before the next snapshot: no epoch is shared, the new
# head sits at the log start. No segments are written for it, so the rule sees no LEO; the old snapshot's
# high watermark / recovery point show epoch 7 ran past the new log start. Every replica of a few seeds,
# rebuilt from the written files as the ingest builds epoch_lineage rows, must give the truth's L5 lines.

SMALL_QUIET = dict(stale_epoch_batches=0, unknown_epoch_batches=0, lineage_rewrites=0, replica_conflicts=0,
                   topic_recreations=0, topic_id_regressions=0, retention_resets=0)  # fmt: skip


def _audit_rows(logdirs):
    """Every readable leader-epoch-checkpoint as an epoch_lineage row: entries, topic id, the three root
    checkpoints (log start, high watermark, recovery point) and the LEO when segments show it."""
    from collections import defaultdict

    from epochlib.checkpoint import (
        parse_leader_epoch_checkpoint,
        parse_offset_checkpoint,
        parse_partition_metadata,
    )
    from epochlib.errors import DecodeError
    from epochlib.records import Batch, iter_batches
    from epochlib.rules.lineage_rules import parse_logdir_path

    roots = (("log-start-offset-checkpoint", "ls"), ("replication-offset-checkpoint", "hw"),
             ("recovery-point-offset-checkpoint", "rp"))  # fmt: skip
    out = defaultdict(list)
    for snap_dir in sorted(logdirs.glob("broker=*/snapshot=*")):
        root = {col: parse_offset_checkpoint((snap_dir / name).read_bytes()).entries for name, col in roots}
        for ck in sorted(snap_dir.glob("*/leader-epoch-checkpoint")):
            where = parse_logdir_path(str(ck))
            tp = (where["topic"], where["partition"])
            try:
                entries = parse_leader_epoch_checkpoint(ck.read_bytes()).entries
            except DecodeError:
                continue  # quarantined (L1): no epoch_lineage row
            ends = [b.last_offset + 1 for seg in ck.parent.glob("*.log")
                    for b in iter_batches(seg.read_bytes(), decode_records=False) if isinstance(b, Batch)]  # fmt: skip
            out[(where["broker"], *tp)].append(ReplicaSnapshot(
                broker=where["broker"], snapshot_ts=where["snapshot_ts"], topic=tp[0], partition=tp[1],
                topic_id=parse_partition_metadata((ck.parent / "partition.metadata").read_bytes()).topic_id,
                entries=entries, log_start_offset=root["ls"].get(tp), high_watermark=root["hw"].get(tp),
                recovery_point=root["rp"].get(tp), log_end_offset=max(ends) if ends else None, source=str(ck)))  # fmt: skip
    return out


@pytest.mark.parametrize("seed", [1, 2, 3, 4])
def test_the_audit_finds_exactly_the_l5_truth_of_the_small_scenario(tmp_path, seed):
    import json

    from epochlib.sim import Anomalies, Scenario, simulate
    from epochlib.sim.writers import snapshot_name

    sc = Scenario(name="small", seed=seed, days=0.25, brokers=3, partitions=3, commits=600,
                  snapshot_interval_hours=1.5, retention_hours=1.0, extra_metadata_clients=1, metadata_interval_s=900,
                  data_tail_records=200, anomalies=Anomalies(**SMALL_QUIET))  # fmt: skip
    res = simulate(sc, tmp_path)
    truth = [json.loads(x) for x in res.truth.read_text().splitlines()]
    want = sorted((str(r["broker"]), r["topic"], r["partition"], snapshot_name(r["event_ts"]), r["kind"])
                  for r in truth if r["rule"] == "L5")  # fmt: skip
    got = sorted((f.broker, f.topic, f.partition, snapshot_name(f.event_ts), f.kind)
                 for snaps in _audit_rows(res.logdirs).values()
                 for f in check_lineage_history(sorted(snaps, key=lambda s: (s.snapshot_ts, s.source))))  # fmt: skip
    assert ("lineage_truncated" in {w[-1] for w in want}) and got == want
