"""L1, L2, L3, L5."""

from __future__ import annotations

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


def snap(entries, ts=1000, broker="1", leo=None, ls=None, topic_id=None) -> ReplicaSnapshot:
    return ReplicaSnapshot(
        broker=broker,
        snapshot_ts=ts,
        topic="orders",
        partition=3,
        topic_id=topic_id,
        entries=tuple(EpochEntry(e, s) for e, s in entries),
        log_end_offset=leo,
        log_start_offset=ls,
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
    # the checkpoint still holds (6, 30) beyond the log end (async flush): repair drops it, and the
    # retention-trimmed head moves to the log start 15
    s = snap([(0, 0), (2, 10), (6, 30)], leo=30, ls=15)
    batches = [batch(5, 0, count=5), batch(15, 2, count=15)]  # the first is below the log start: skipped
    assert check_batch_epochs(s, batches) == []
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
