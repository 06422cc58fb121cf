"""L1, L2, L3, L5."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from epochlib.lineage import EpochEntry
from epochlib.rules import (
    BatchHeader,
    QuarantineRecord,
    ReplicaSnapshot,
    check_batch_epochs,
    check_checkpoint_unreadable,
    check_lineage_history,
    check_lineage_monotonic,
    finding_id,
    parse_logdir_path,
)

CKPT = "/ld/broker=1/snapshot=20241001T000000Z/orders-3/leader-epoch-checkpoint"


def snap(entries, ts=1000, broker="1", leo=None, ls=None, topic_id=None, hw=None, rp=None) -> ReplicaSnapshot:
    return ReplicaSnapshot(
        broker=broker,
        snapshot_ts=ts,
        topic="orders",
        partition=3,
        topic_id=topic_id,
        entries=tuple(EpochEntry(e, s) for e, s in entries),
        log_end_offset=leo,
        log_start_offset=ls,
        high_watermark=hw,
        recovery_point=rp,
        source=CKPT,
    )


def batch(base, epoch, *, last=None, magic=2, count=1, ts=5000, pos=0) -> BatchHeader:
    return BatchHeader(
        broker="1",
        topic="orders",
        partition=3,
        base_offset=base,
        last_offset=last if last is not None else base + count - 1,
        partition_leader_epoch=epoch,
        magic=magic,
        records_count=count,
        max_timestamp=ts,
        source="/ld/broker=1/snapshot=20241001T000000Z/orders-3/00000000000000000000.log",
        position=pos,
    )


# --- L1 --------------------------------------------------------------------------------------------


def test_l1_unreadable_checkpoint_names_broker_partition_and_snapshot_time():
    (f,) = check_checkpoint_unreadable(
        QuarantineRecord(source=CKPT, reason="count 3 != 2 entry lines", position=2)
    )
    assert (f.rule, f.kind, f.severity) == ("L1", "checkpoint_unreadable", "warning")
    assert (f.broker, f.topic, f.partition) == ("1", "orders", 3)
    assert f.event_ts == 1727740800000
    assert f.evidence == (f"checkpoint:{CKPT} line 2",)
    assert "count 3" in f.detail
    # an unreadable file (position 0: no line) is cited as the file, never as "line 0"
    (f,) = check_checkpoint_unreadable(QuarantineRecord(source=CKPT, reason="unreadable: EIO", position=0))
    assert f.evidence == (f"checkpoint:{CKPT}",)


def test_l1_other_quarantined_files_are_not_lineage_findings():
    assert (
        check_checkpoint_unreadable(
            {"source": "/ld/broker=1/snapshot=20241001T000000Z/orders-3/partition.metadata", "reason": "bad"}
        )
        == []
    )
    assert check_checkpoint_unreadable(QuarantineRecord(source="/o/x.log", reason="crc")) == []


def test_l1_without_snapshot_in_path_uses_fallback():
    (f,) = check_checkpoint_unreadable(
        QuarantineRecord(source="/x/t-0/leader-epoch-checkpoint", reason="v"), fallback_ts=77
    )
    assert f.event_ts == 77 and f.broker is None and f.topic == "t"


def test_l1_of_a_checkpoint_under_a_malformed_snapshot_or_partition_name_still_reports():
    """Ingestion quarantines a checkpoint whose snapshot time or partition number is malformed; L1 names it
    with what the path gives (the run's date for the time) instead of failing the fencing report."""
    (f,) = check_checkpoint_unreadable(QuarantineRecord(
        source="/ld/broker=1/snapshot=20251302T130000Z/orders-3/leader-epoch-checkpoint", reason="r"), fallback_ts=5)
    assert (f.event_ts, f.broker, f.topic, f.partition) == (5, "1", "orders", 3)
    for name in ("orders-99999999999", "orders-2147483648", "orders-" + "9" * 5000):
        (f,) = check_checkpoint_unreadable(QuarantineRecord(
            source=f"/ld/broker=1/snapshot=20241001T000000Z/{name}/leader-epoch-checkpoint", reason="r"))
        assert f.event_ts == 1727740800000 and (f.topic, f.partition) == (None, None)
    assert parse_logdir_path("b/snapshot=20240101T000000Z/t-2147483647/x")["partition"] == 2**31 - 1


_DIGITS = st.text(alphabet="0123456789", min_size=1, max_size=14)


@given(st.text(alphabet="b=/-x", max_size=12), _DIGITS, _DIGITS, st.text(alphabet="t-.", max_size=6), _DIGITS)
def test_parse_logdir_path_never_raises(junk, day, time, topic, partition):
    path = f"{junk}broker=1/snapshot={day[:8]:0<8}T{time[:6]:0<6}Z/t{topic}-{partition}/leader-epoch-checkpoint"
    out = parse_logdir_path(path)
    assert out["partition"] is None or 0 <= out["partition"] < 2**31


def test_parse_logdir_path_with_dashes_in_topic():
    p = parse_logdir_path("broker=2/snapshot=20240101T010203Z/my-topic-12/leader-epoch-checkpoint")
    assert p["topic"] == "my-topic" and p["partition"] == 12 and p["broker"] == "2"


# --- L2 --------------------------------------------------------------------------------------------


def test_l2_monotonic_lineages_pass_including_empty_and_single():
    assert check_lineage_monotonic(snap([])) == []
    assert check_lineage_monotonic(snap([(4, 0)])) == []
    assert check_lineage_monotonic(snap([(0, 0), (2, 10), (5, 30)])) == []


def test_l2_equal_epochs_and_offsets_and_regressions():
    (f,) = check_lineage_monotonic(snap([(0, 0), (2, 10), (2, 20), (3, 20), (1, 40)]))
    assert (f.rule, f.kind, f.severity) == ("L2", "lineage_not_monotonic", "error")
    assert f.numbers["line"] == 5 and f.numbers["violations"] == 3
    assert f.numbers["previous_epoch"] == 2 and f.numbers["leader_epoch"] == 2
    assert f.evidence == tuple(f"checkpoint:{CKPT} line {n}" for n in (5, 6, 7))


def test_l2_negative_entry():
    (f,) = check_lineage_monotonic(snap([(-1, 0)]))
    assert f.numbers["line"] == 3


# --- L3 --------------------------------------------------------------------------------------------


def test_l3_consistent_log_has_no_findings_even_at_boundaries():
    s = snap([(0, 0), (2, 10), (5, 20)], leo=30)
    batches = [batch(0, 0, count=10), batch(10, 2, count=10), batch(20, 5, count=5), batch(25, 5, count=5)]
    assert check_batch_epochs(s, batches) == []


def test_l3_mismatch_at_a_boundary_offset():
    s = snap([(0, 0), (2, 10)], leo=20)
    (f,) = check_batch_epochs(s, [batch(0, 0, count=9), batch(9, 2, count=11)])
    assert (f.rule, f.kind) == ("L3", "batch_epoch_mismatch")
    assert (
        f.numbers["expected_epoch"] == 0 and f.numbers["batch_epoch"] == 2 and f.numbers["base_offset"] == 9
    )
    assert f.event_ts == 5000
    assert f.evidence[1] == f"checkpoint:{CKPT} line 3"


def test_l3_regression_is_reported_once_per_batch():
    s = snap([(0, 0), (3, 10)], leo=30)
    fs = check_batch_epochs(
        s, [batch(0, 0, count=10), batch(10, 3, count=10), batch(20, 1, count=10, pos=99)]
    )
    assert [f.kind for f in fs] == ["batch_epoch_regression"]
    assert fs[0].severity == "critical" and fs[0].numbers["expected_epoch"] == 3
    assert fs[0].numbers["previous_offset"] == 10 and fs[0].numbers["records_affected"] == 10


def test_l3_unknown_epoch_above_every_entry():
    (f,) = check_batch_epochs(
        snap([(0, 0), (2, 10)], leo=30), [batch(10, 2, count=10), batch(20, 7, count=10)]
    )
    assert f.kind == "batch_epoch_unknown" and f.numbers["batch_epoch"] == 7


def test_l3_uses_the_repaired_lineage():
    # the checkpoint still holds (6, 35) beyond the log end (async flush): repair drops it, and the
    # retention-trimmed head moves to the log start 15
    s = snap([(0, 0), (2, 10), (6, 35)], leo=30, ls=15)
    batches = [batch(5, 0, count=5), batch(15, 2, count=15)]  # the first is below the log start: skipped
    assert check_batch_epochs(s, batches) == []
    # skipped even with an epoch that would be unknown, and be a regression for the next batch, if judged
    assert check_batch_epochs(s, [batch(5, 9, count=5), batch(15, 2, count=15)]) == []
    # without repair the unknown epoch would be hidden by the stale entry
    assert [f.kind for f in check_batch_epochs(s, [batch(15, 2, count=10), batch(25, 6, count=5)])] == [
        "batch_epoch_unknown"
    ]


def test_l3_skips_legacy_and_unstamped_batches_and_empty_lineage_only_checks_regression():
    s = snap([(1, 0)], leo=10)
    assert check_batch_epochs(s, [batch(0, -1, magic=1), batch(1, None), batch(2, 1)]) == []
    empty = snap([], leo=20)
    assert check_batch_epochs(empty, [batch(0, 4, count=10)]) == []
    assert [f.kind for f in check_batch_epochs(empty, [batch(0, 4, count=10), batch(10, 3)])] == [
        "batch_epoch_regression"
    ]


def test_l3_batch_below_the_lineage_head_is_not_judged():
    assert check_batch_epochs(snap([(3, 100)], leo=200), [batch(50, 1, count=50), batch(100, 3)]) == []


def test_l3_event_time_falls_back_to_snapshot():
    (f,) = check_batch_epochs(snap([(0, 0), (2, 10)], leo=20, ts=4242), [batch(5, 2, ts=-1)])
    assert f.event_ts == 4242


# --- L5 --------------------------------------------------------------------------------------------


def test_l5_appends_and_head_trims_are_legal():
    a = snap([(0, 0), (2, 10)], ts=1, leo=20)
    b = snap([(0, 0), (2, 10), (3, 20)], ts=2, leo=40)
    c = snap([(3, 25), (4, 40)], ts=3, leo=50, ls=25)  # head trimmed to 25 inside epoch 3, then epoch 4
    assert check_lineage_history([a, b, c]) == []
    assert check_lineage_history([a, a]) == []  # tie / identical snapshots
    assert check_lineage_history([a]) == [] and check_lineage_history([]) == []


def test_l5_tail_removal_is_truncated_info_with_offsets_discarded():
    a = snap([(0, 0), (2, 10), (4, 30)], ts=1, leo=45)
    b = snap([(0, 0), (2, 10), (5, 28)], ts=2, leo=40)  # truncated to 28, then epoch 5 from there
    (f,) = check_lineage_history([a, b])
    assert (f.rule, f.kind, f.severity) == ("L5", "lineage_truncated", "info")
    assert f.numbers["truncation_point"] == 28 and f.numbers["records_affected"] == 17
    assert f.event_ts == 2


def test_l5_truncated_without_known_log_ends():
    (f,) = check_lineage_history([snap([(0, 0), (2, 10)], ts=1), snap([(0, 0)], ts=2)])
    assert f.kind == "lineage_truncated" and f.numbers["records_affected"] is None
    assert f.numbers["truncation_point"] == 10


def test_l5_evicting_an_empty_epoch_is_not_a_truncation():
    a = snap([(0, 0), (2, 10)], ts=1, leo=10)  # epoch 2 assigned at LEO, nothing written
    b = snap([(0, 0), (3, 10)], ts=2, leo=15)
    assert check_lineage_history([a, b]) == []


def test_l5_log_end_moving_back_within_an_epoch():
    (f,) = check_lineage_history([snap([(0, 0)], ts=1, leo=50), snap([(0, 0)], ts=2, leo=42)])
    assert f.kind == "lineage_truncated" and f.numbers["records_affected"] == 8


def test_l5_rewrites():
    base = snap([(0, 0), (2, 10), (3, 20)], ts=1, leo=30)
    moved = snap([(0, 0), (2, 12), (3, 20)], ts=2, leo=30)
    vanished = snap([(0, 0), (3, 20)], ts=2, leo=30)
    before_head = snap([(0, 0), (2, 10), (3, 20)], ts=1)
    grown_back = snap([(0, 0), (1, 5), (2, 10), (3, 20)], ts=2)
    cases = [(base, moved, "moved"), (base, vanished, "vanished"), (before_head, grown_back, "inserted")]
    for prev, cur, word in cases:
        fs = check_lineage_history([prev, cur])
        assert [f.kind for f in fs] == ["lineage_rewritten"], (cur, fs)
        assert fs[0].severity == "error" and word in fs[0].detail
    (f,) = check_lineage_history([base, moved])
    assert (
        f.numbers["leader_epoch"] == 2
        and f.numbers["previous_start_offset"] == 10
        and f.numbers["start_offset"] == 12
    )
    head_back = snap([(2, 10), (3, 20)], ts=1)
    (g,) = check_lineage_history([head_back, snap([(1, 0), (2, 10), (3, 20)], ts=2)])
    assert "before the old head" in g.detail


def test_l5_recreated_topic_starts_a_new_baseline():
    a = snap([(0, 0), (7, 100)], ts=1, leo=200, topic_id="A")
    b = snap([(0, 0)], ts=2, leo=3, topic_id="B")
    assert check_lineage_history([a, b]) == []
    assert [f.kind for f in check_lineage_history([a, snap([(0, 0)], ts=2, leo=3, topic_id="A")])] == [
        "lineage_truncated"
    ]


def test_l5_retention_past_everything_is_not_a_truncation():
    a = snap([(0, 0), (2, 10)], ts=1, leo=20)
    b = snap([(3, 25)], ts=2, leo=30, ls=25)
    assert check_lineage_history([a, b]) == []


def test_l5_ids_are_stable_across_reruns():
    a = snap([(0, 0), (2, 10)], ts=1, leo=20)
    b = snap([(0, 0)], ts=2, leo=8)
    assert [finding_id(f) for f in check_lineage_history([a, b])] == [
        finding_id(f) for f in check_lineage_history([a, b])
    ]


# --- L5: retention or truncation when no epoch is shared -------------------------------------------
#
# The simulator's small scenario (tests/test_sim.py, seed 1, broker 1, orders-0): a follower truncated
# its epoch-7 suffix, caught up from the leader of epoch 8, and retention moved its log start to 31000
# before the next snapshot. Segments were not written, so both LEOs are unknown; the old snapshot's high
# watermark (33475) and recovery point (33471) show that epoch 7 held offsets past 31000.

OLD = [(6, 21000), (7, 25011)]  # log start 21000, LEO unknown


def _old(hw=33475, rp=33471, leo=None):
    return snap(OLD, ts=1, ls=21000, hw=hw, rp=rp, leo=leo)


def test_l5_new_epoch_below_the_old_high_watermark_is_a_truncation_not_retention():
    (f,) = check_lineage_history([_old(), snap([(8, 31000)], ts=2, ls=31000, hw=48956, rp=48944)])
    assert (f.rule, f.kind, f.severity) == ("L5", "lineage_truncated", "info")
    assert f.numbers["truncation_point"] == 31000  # clamped to the new log start
    # the old LEO is unknown: no exact count; the detail gives the lower bound
    assert f.numbers["records_affected"] is None and f.numbers["previous_log_end_offset"] is None
    assert "at least 2475 offset(s) discarded" in f.detail and "33475" in f.detail
    assert f.evidence[0].endswith("line 3")  # the first removed entry, epoch 6


def test_l5_either_lower_bound_of_the_old_log_end_is_enough():
    new = snap([(8, 31000)], ts=2, ls=31000)
    assert [f.kind for f in check_lineage_history([_old(hw=33475, rp=None), new])] == ["lineage_truncated"]
    assert [f.kind for f in check_lineage_history([_old(hw=None, rp=33471), new])] == ["lineage_truncated"]
    # a follower's high watermark can lag its recovery point (divergent suffix): the larger bound counts
    assert [f.kind for f in check_lineage_history([_old(hw=27441, rp=33452), new])] == ["lineage_truncated"]


def test_l5_retention_past_the_old_bound_is_still_retention():
    new = snap([(8, 31000)], ts=2, ls=31000)
    assert check_lineage_history([_old(hw=30000, rp=29990), new]) == []
    # the bound exactly at the new head: epoch 7 may have ended there, truncateFromStart(31000) then drops
    # it and keeps epoch 8 at 31000 (Kafka removes entries starting at or below the new log start)
    assert check_lineage_history([_old(hw=31000, rp=None), new]) == []


def test_l5_without_high_watermark_or_recovery_point_the_rule_is_unchanged():
    # nothing shows how far epoch 7 ran: retention gets the benefit of the doubt, as before
    assert check_lineage_history([_old(hw=None, rp=None), snap([(8, 31000)], ts=2, ls=31000)]) == []


def test_l5_tail_epoch_still_in_force_at_the_new_log_start_is_retention():
    # truncateFromStart keeps the epoch in force at the log start, its start moved up: epoch 7 shared
    for new in ([(7, 31000)], [(7, 31000), (8, 40000)]):
        assert check_lineage_history([_old(), snap(new, ts=2, ls=31000)]) == [], new
    # whole epochs below the new log start go, the one in force stays
    three = snap([(5, 10000), (6, 21000), (7, 25011)], ts=1, ls=10000, hw=33475, rp=33471)
    assert check_lineage_history([three, snap([(7, 31000)], ts=2, ls=31000)]) == []
    assert check_lineage_history([three, snap([(6, 22000), (7, 25011)], ts=2, ls=22000)]) == []


def test_l5_known_old_log_end_decides_alone():
    new = snap([(8, 31000)], ts=2, ls=31000, leo=48956)
    (f,) = check_lineage_history([_old(leo=33475), new])
    assert f.kind == "lineage_truncated" and f.numbers["records_affected"] == 2475
    assert f.numbers["truncation_point"] == 31000 and "2475 offset(s) discarded." in f.detail
    # retention past the whole old log (the new head at or past the old LEO), whatever HW/RP say
    assert check_lineage_history([_old(leo=31000), new]) == []
    assert check_lineage_history([_old(leo=30500, hw=None, rp=None), new]) == []


def test_l5_no_shared_epoch_edge_cases():
    # the new head below the old tail's start: truncation whatever the bounds (the README's example)
    for hw in (None, 33475):
        kinds = [
            f.kind for f in check_lineage_history([_old(hw=hw, rp=None), snap([(8, 24000)], ts=2, ls=24000)])
        ]
        assert kinds == ["lineage_truncated"], hw
    # the new head above its log start (nothing covers the offsets between): retention did not leave it
    kinds = [
        f.kind for f in check_lineage_history([_old(hw=None, rp=None), snap([(8, 32000)], ts=2, ls=31000)])
    ]
    assert kinds == ["lineage_truncated"]
    # the new log start unknown: nothing shows retention happened
    kinds = [f.kind for f in check_lineage_history([_old(hw=30000, rp=None), snap([(8, 31000)], ts=2)])]
    assert kinds == ["lineage_truncated"]
    # a later snapshot of the caught-up replica appends only: one finding for the whole history
    later = snap([(8, 35000), (9, 50000)], ts=3, ls=35000, hw=52000, rp=52000)
    fs = check_lineage_history([_old(), snap([(8, 31000)], ts=2, ls=31000, hw=48956, rp=48944), later])
    assert [(f.kind, f.event_ts) for f in fs] == [("lineage_truncated", 2)]
    # a lineage that loses everything (empty new checkpoint) is unchanged: tail removal
    (f,) = check_lineage_history([_old(), snap([], ts=2, ls=31000)])
    assert f.kind == "lineage_truncated" and f.numbers["truncation_point"] == 31000
