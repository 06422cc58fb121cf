"""D1 and D2."""

from __future__ import annotations

from epochlib.lineage import EpochEntry
from epochlib.rules import ReplicaSnapshot, check_replica_divergence, snapshot_rounds


def snap(broker, ts, entries, leo=None, ls=None, topic_id=None) -> ReplicaSnapshot:
    return ReplicaSnapshot(
        broker=str(broker),
        snapshot_ts=ts,
        topic="t",
        partition=0,
        topic_id=topic_id,
        entries=tuple(EpochEntry(e, s) for e, s in entries),
        log_end_offset=leo,
        log_start_offset=ls,
        source=f"broker={broker}/snapshot={ts}/t-0/leader-epoch-checkpoint",
    )


def kinds(fs):
    return [f.kind for f in fs]


# --- rounds ----------------------------------------------------------------------------------------


def test_rounds_group_within_tolerance_and_keep_the_later_duplicate():
    r = snapshot_rounds([snap(1, 0, []), snap(2, 50, []), snap(1, 90, [(0, 0)]), snap(1, 500, [])], 100)
    assert [(ts, sorted(m)) for ts, m in r] == [(0, ["1", "2"]), (500, ["1"])]
    assert r[0][1]["1"].snapshot_ts == 90


# --- D2 --------------------------------------------------------------------------------------------


def test_d2_conflict_on_an_interior_epoch():
    a = snap(1, 0, [(0, 0), (2, 10), (3, 20)], leo=30)  # the leader: same epoch and LEO, lower broker id
    b = snap(2, 0, [(0, 0), (2, 12), (3, 20)], leo=30)
    (f,) = check_replica_divergence([a, b], 1000)
    assert (f.rule, f.kind, f.severity) == ("D2", "replica_lineage_conflict", "error")
    assert f.broker == "2"  # the replica that disagrees with the leader
    assert f.numbers == {"leader_epoch": 2, "start_offset": 12, "other_start_offset": 10, "other_broker": 1,
                         "conflicting_replicas": 1}  # fmt: skip
    assert f.evidence == (b.pointer(2), a.pointer(2))


def test_d2_one_finding_per_replica_disagreeing_with_the_leader():
    # the demo's case: broker 4 holds epoch 3 at another start than the leader and two other followers
    lead = snap(1, 0, [(0, 0), (3, 100), (5, 200)], leo=300)
    f2 = snap(2, 10, [(0, 0), (3, 100), (5, 200)], leo=290)
    f3 = snap(3, 20, [(0, 0), (3, 100), (5, 200)], leo=280)
    odd = snap(4, 30, [(0, 0), (3, 140), (5, 200)], leo=280)
    (f,) = check_replica_divergence([lead, f2, f3, odd], 1000)
    assert (f.broker, f.event_ts, f.numbers["start_offset"], f.numbers["other_start_offset"]) == ("4", 30, 140, 100)
    assert f.numbers["other_broker"] == 1 and f.evidence[:2] == (odd.pointer(3), lead.pointer(3))
    # two replicas off the leader: one finding each, each naming the other in its evidence
    odd2 = snap(2, 10, [(0, 0), (3, 120), (5, 200)], leo=290)
    fs = check_replica_divergence([lead, odd2, f3, odd], 1000)
    assert sorted(f.broker for f in fs) == ["2", "4"]
    assert all(f.numbers["conflicting_replicas"] == 2 and len(f.evidence) == 3 for f in fs)
    # the leader is the minority: it is still the reference (the followers are reported)
    lead_odd = snap(1, 0, [(0, 0), (3, 150), (5, 200)], leo=300)
    assert sorted(f.broker for f in check_replica_divergence([lead_odd, f2, f3], 1000)) == ["2", "3"]


def test_d2_epoch_the_leader_lacks_falls_back_to_the_majority_start():
    lead = snap(1, 0, [(5, 200), (6, 300)], leo=350)  # retention removed epoch 3 from the leader entirely
    f2 = snap(2, 0, [(0, 0), (3, 100), (5, 200)], leo=300)
    f3 = snap(3, 0, [(0, 0), (3, 100), (5, 200)], leo=300)
    odd = snap(4, 0, [(0, 0), (3, 130), (5, 200)], leo=300)
    (f,) = check_replica_divergence([lead, f2, f3, odd], 1000)
    assert (f.broker, f.numbers["start_offset"], f.numbers["other_start_offset"]) == ("4", 130, 100)
    assert f.numbers["other_broker"] == 2 and "majority" in f.detail
    # a tie: the start of the replica ranked first as a leader (higher LEO) is the reference
    g2 = snap(2, 0, [(0, 0), (3, 100), (5, 200)], leo=310)
    assert [f.broker for f in check_replica_divergence([lead, g2, odd], 1000)] == ["4"]


def test_d2_last_entry_of_either_lineage_is_exempt():
    a = snap(1, 0, [(0, 0), (2, 10)], leo=30)
    b = snap(2, 0, [(0, 0), (2, 12), (3, 20)], leo=30)
    assert check_replica_divergence([a, b], 1000) == []


def test_d2_equal_starts_and_retention_trimmed_heads_are_fine():
    a = snap(1, 0, [(2, 150), (3, 200), (4, 300)], leo=350, ls=150)  # head trimmed to its log start
    b = snap(2, 0, [(2, 120), (3, 200), (4, 300)], leo=350, ls=120)
    assert check_replica_divergence([a, b], 1000) == []
    # but a head that starts *earlier* than the other's interior start is a conflict
    c = snap(3, 0, [(2, 100), (3, 200), (4, 300)], leo=350)
    d = snap(4, 0, [(0, 0), (2, 120), (3, 200), (4, 300)], leo=350)
    assert kinds(check_replica_divergence([c, d], 1000)) == ["replica_lineage_conflict"]


def test_d2_outside_tolerance_or_other_topic_id_not_compared_and_reported_once():
    a = snap(1, 0, [(0, 0), (2, 10), (3, 20)], leo=30)
    b = snap(2, 5000, [(0, 0), (2, 12), (3, 20)], leo=30)
    assert check_replica_divergence([a, b], 1000) == []
    a2 = snap(1, 0, [(0, 0), (2, 10), (3, 20)], leo=30, topic_id="X")
    b2 = snap(2, 0, [(0, 0), (2, 12), (3, 20)], leo=30, topic_id="Y")
    assert check_replica_divergence([a2, b2], 1000) == []
    rounds = [snap(1, t, [(0, 0), (2, 10), (3, 20)], leo=30) for t in (0, 10_000)] + [
        snap(2, t, [(0, 0), (2, 12), (3, 20)], leo=30) for t in (0, 10_000)
    ]
    assert len(check_replica_divergence(rounds, 1000)) == 1


def test_empty_and_single_replica():
    assert check_replica_divergence([], 1000) == []
    assert check_replica_divergence([snap(1, 0, [], leo=0), snap(2, 0, [], leo=0)], 1000) == []
    assert check_replica_divergence([snap(1, 0, [(0, 0)], leo=5)], 1000) == []


# --- D1 --------------------------------------------------------------------------------------------

# Broker 2 led epoch 3 and wrote [100, 130) that nobody replicated; broker 1 became leader in epoch 4
# at 100. Broker 2 should truncate to 100; if it does not, its LEO stays above 100.
LEADER = [(0, 0), (4, 100)]
STALE = [(0, 0), (3, 100)]


def test_d1_needs_two_consecutive_rounds():
    r1 = [snap(1, 0, LEADER, leo=150), snap(2, 0, STALE, leo=130)]
    assert check_replica_divergence(r1, 1000) == []
    r2 = [snap(1, 10_000, LEADER, leo=180), snap(2, 10_000, STALE, leo=130)]
    (f,) = check_replica_divergence(r1 + r2, 1000)
    assert (f.rule, f.kind, f.severity) == ("D1", "replica_divergence_unresolved", "error")
    assert f.broker == "2" and f.event_ts == 10_000
    assert f.numbers["truncation_point"] == 100 and f.numbers["records_affected"] == 30
    assert f.numbers["expected_epoch"] == 0 and f.numbers["leader_broker"] == 1


def test_d1_resolved_follower_and_persisting_condition_reported_once():
    r1 = [snap(1, 0, LEADER, leo=150), snap(2, 0, STALE, leo=130)]
    fixed = [snap(1, 10_000, LEADER, leo=180), snap(2, 10_000, [(0, 0), (4, 100)], leo=170)]
    assert check_replica_divergence(r1 + fixed, 1000) == []
    r2 = [snap(1, 10_000, LEADER, leo=180), snap(2, 10_000, STALE, leo=130)]
    r3 = [snap(1, 20_000, LEADER, leo=190), snap(2, 20_000, STALE, leo=130)]
    assert len(check_replica_divergence(r1 + r2 + r3, 1000)) == 1


def test_d1_follower_at_the_truncation_point_or_same_epoch_is_fine():
    at_point = [snap(1, t, LEADER, leo=150) for t in (0, 10_000)] + [
        snap(2, t, STALE, leo=100) for t in (0, 10_000)
    ]
    assert check_replica_divergence(at_point, 1000) == []
    # same latest epoch as the leader: a higher follower LEO is snapshot skew, not divergence
    skew = [snap(1, t, LEADER, leo=150) for t in (0, 10_000)] + [
        snap(2, t, LEADER, leo=160) for t in (0, 10_000)
    ]
    assert check_replica_divergence(skew, 1000) == []


def test_d1_unknown_log_ends_are_not_judged():
    r = [snap(1, t, LEADER) for t in (0, 10_000)] + [snap(2, t, STALE) for t in (0, 10_000)]
    assert check_replica_divergence(r, 1000) == []


def test_d1_follower_lineage_decides_the_point_when_lower():
    # follower has epoch 2 from 90 that the leader never had; leader's epoch 0 ends at 100
    leader = [(0, 0), (4, 100)]
    follower = [(0, 0), (2, 90)]
    r = [snap(1, t, leader, leo=150) for t in (0, 10_000)] + [
        snap(2, t, follower, leo=120) for t in (0, 10_000)
    ]
    (f,) = check_replica_divergence(r, 1000)
    assert f.numbers["truncation_point"] == 90 and f.numbers["records_affected"] == 30


def test_d1_follower_high_watermark_stands_in_for_an_unknown_log_end():
    # snapshots without segments: only replication-offset-checkpoint (HW <= LEO) bounds the log end
    def hw(broker, ts, entries, hw_):
        return ReplicaSnapshot(
            broker=str(broker), snapshot_ts=ts, topic="t", partition=0,
            entries=tuple(EpochEntry(e, s) for e, s in entries), high_watermark=hw_,
        )  # fmt: skip

    r = [hw(1, t, LEADER, 180) for t in (0, 10_000)] + [hw(2, t, STALE, 130) for t in (0, 10_000)]
    (f,) = check_replica_divergence(r, 1000)
    assert f.kind == "replica_divergence_unresolved" and f.broker == "2" and f.event_ts == 10_000
    assert f.numbers["truncation_point"] == 100 and f.numbers["records_affected"] == 30
    # a follower HW at the point proves nothing
    r = [hw(1, t, LEADER, 180) for t in (0, 10_000)] + [hw(2, t, STALE, 100) for t in (0, 10_000)]
    assert check_replica_divergence(r, 1000) == []
