"""K1, K2 (+ cause links), M5, M2 timed from the log, metadata lag and P1 — each rule's positive case, its
nearest negative, and edges (epochlib.rules.kraft, epochlib.rules.expansion)."""

from __future__ import annotations

from dataclasses import asdict, replace

from epochlib.kraft import iter_metadata_log, replay
from epochlib.kraft.codec import encode_control_record_batch, encode_metadata_batch
from epochlib.rules import SEVERITY, Commit, Finding, MetadataObservation, ReplicaSnapshot
from epochlib.rules.expansion import (
    BoundEvidence,
    Expansion,
    check_expansion_order,
    expansions_from_history,
    expansions_from_observations,
)
from epochlib.rules.kraft import (
    HistoryChange,
    LogView,
    check_broker_staleness_logged,
    check_checkpoint_epochs,
    check_metadata_offsets,
    check_unclean_elections,
    response_lags,
    unclean_cause,
)

T1, T2 = "AQIDBAUGBwgJCgsMDQ4PEA", "AgMEBQYHCAkKCwwNDg8QEQ"


def row(offset, ts, partition, change, epoch=None, leader=1, topic="t", tid=T1, unclean=False, isr=(1, 2, 3),
        prev_isr=None, lrs=0) -> HistoryChange:
    return HistoryChange(offset, ts, topic, tid, partition, change, leader, epoch, isr, lrs, unclean,
                         None, prev_isr, "ctl/00000000000000000000.log", offset * 10)


def history() -> list[HistoryChange]:
    """t (T1) created with 2 partitions at offset 10; p0 epochs 0 @10, 1 @20, 2 @30; p1 epochs 0 @10, 1 @25."""
    return [
        row(10, 1_000, None, "topic_created"),
        row(10, 1_000, 0, "created", 0), row(10, 1_000, 1, "created", 0),
        row(20, 2_000, 0, "leader", 1, leader=2),
        row(25, 2_500, 1, "leader", 1, leader=3),
        row(30, 3_000, 0, "leader", 2, leader=1),
        row(40, 9_000, 0, "isr", 2, isr=(1, 2)),
    ]


# ----------------------------------------------------------------------------------------------- K2


def test_k2_reports_the_unclean_change_only() -> None:
    rows = [*history(), row(50, 10_000, 1, "leader,isr", 2, leader=4, unclean=True, isr=(4,), prev_isr=(3,))]
    found = check_unclean_elections(rows)
    assert [(f.rule, f.kind, f.severity, f.partition, f.broker, f.numbers["leader_epoch"], f.numbers["metadata_offset"])
            for f in found] == [("K2", "unclean_leader_election", "warning", 1, "4", 2, 50)]
    assert found[0].evidence == ("metadata:ctl/00000000000000000000.log@500 offset 50 t-1",)
    assert "ISR just before: [3]" in found[0].detail


def test_k2_nearest_negative_clean_leader_changes_and_recovery_state_text() -> None:
    assert check_unclean_elections(history()) == []
    rec = [row(60, 11_000, 0, "leader_recovery_state", 2, unclean=True, lrs=1)]
    assert "RECOVERING" in check_unclean_elections(rec)[0].detail


def test_cause_links_only_later_findings_of_the_same_partition_and_newer_epoch() -> None:
    k2 = check_unclean_elections([row(50, 10_000, 1, "leader", 2, leader=4, unclean=True, prev_isr=(3,))])
    f2 = Finding("F2", "commit_beyond_epoch_end", event_ts=12_000, topic="t", partition=1, numbers={"leader_epoch": 1})
    assert unclean_cause(f2, k2) == k2[0].id
    assert unclean_cause(Finding("F2", "commit_beyond_epoch_end", event_ts=9_000, topic="t", partition=1), k2) is None
    assert unclean_cause(Finding("F2", "commit_beyond_epoch_end", event_ts=12_000, topic="t", partition=0), k2) is None
    same_epoch = Finding("F2", "commit_beyond_epoch_end", event_ts=12_000, topic="t", partition=1,
                         numbers={"leader_epoch": 2})
    assert unclean_cause(same_epoch, k2) is None  # the commit already carried the unclean epoch
    assert unclean_cause(Finding("S1e", "spurious_rewind", event_ts=12_000, topic="t", partition=1), k2) is None
    assert unclean_cause(Finding("L5", "lineage_truncated", event_ts=12_000, topic="t", partition=1), k2) == k2[0].id
    # the consumer's reset after the truncation carries the new leader's epoch: the truncated records are the
    # previous commit's, of the older epoch (it lost the link in the commonest unclean-election pattern)
    reset = Finding("S1a", "truncation", event_ts=12_000, topic="t", partition=1,
                    numbers={"leader_epoch": 2, "previous_epoch": 1})
    assert unclean_cause(reset, k2) == k2[0].id
    assert unclean_cause(Finding("S1a", "over_rewind", event_ts=12_000, topic="t", partition=1,
                                 numbers={"leader_epoch": 2, "previous_epoch": 2}), k2) is None


def test_cause_of_an_f2_commit_made_before_the_election_that_cut_its_epoch() -> None:
    """An idle consumer's commit (epoch 1) made before the unclean election at 10 s, found beyond epoch 1's end
    by the snapshot round after it: the election is its cause. Judged by a round before the election, it is
    not; and of two later elections, the first one that ended the epoch is named."""
    k2 = check_unclean_elections([row(50, 10_000, 1, "leader", 2, leader=4, unclean=True, prev_isr=(3,)),
                                  row(70, 14_000, 1, "leader", 3, leader=5, unclean=True, prev_isr=(4,))])

    def f2(snapshot_ts: int | None, epoch: int = 1) -> Finding:
        nums = {"leader_epoch": epoch} | ({} if snapshot_ts is None else {"snapshot_ts": snapshot_ts})
        return Finding("F2", "commit_beyond_epoch_end", event_ts=9_000, topic="t", partition=1, numbers=nums)

    assert unclean_cause(f2(12_000), k2) == k2[0].id
    assert unclean_cause(f2(20_000), k2) == k2[0].id  # both before the round: the first, that ended epoch 1
    assert unclean_cause(f2(20_000, epoch=2), k2) == k2[1].id  # epoch 2 was ended by the second
    assert unclean_cause(f2(9_500), k2) is None  # the round that judged it came before any election
    assert unclean_cause(f2(None), k2) is None
    at_once = Finding("F2", "commit_beyond_epoch_end", event_ts=10_000, topic="t", partition=1,
                      numbers={"leader_epoch": 1})  # in the election's own millisecond: at or before
    assert unclean_cause(at_once, k2) == k2[0].id
    # the judging round's time is evidence already (the snapshot's pointer): the F2's id does not change with it
    assert f2(12_000).id == f2(None).id == f2(20_000).id


# ----------------------------------------------------------------------------------------------- K1


def snap(entries, ts=5_000, tid=T1, partition=0) -> ReplicaSnapshot:
    return ReplicaSnapshot(broker="1", snapshot_ts=ts, topic="t", partition=partition, topic_id=tid, entries=entries,
                           source="b1/t-0/leader-epoch-checkpoint")


def test_k1_epoch_never_assigned() -> None:
    view = LogView.build(history())
    found = check_checkpoint_epochs(snap([(0, 0), (2, 10), (5, 40)]), view)
    assert [(f.rule, f.kind, f.severity, f.numbers["leader_epoch"], f.numbers["expected_epoch"]) for f in found] == [
        ("K1", "checkpoint_epoch_unknown", "error", 5, 2)]
    assert found[0].evidence[0] == "checkpoint:b1/t-0/leader-epoch-checkpoint line 5"


def test_k1_does_not_judge_the_epochs_assigned_in_a_hole_the_replay_went_on_after() -> None:
    """The replay goes on from a later snapshot after a hole in the log (epoch 2 before it, 5 in the snapshot):
    epochs 3 and 4 were assigned in the hole, not "never assigned" — a lineage naming them is no K1. Epoch 6, after
    the snapshot and never in the log, still is."""
    rows = [*history(), row(80, 8_000, 0, "snapshot", 5), row(90, 9_500, 0, "leader", 6)]
    view = LogView.build(rows)
    assert check_checkpoint_epochs(snap([(2, 10), (3, 20), (4, 30), (5, 40)], ts=9_000), view) == []
    assert [f.numbers["leader_epoch"] for f in check_checkpoint_epochs(snap([(4, 30), (7, 50)], ts=9_000), view)] == [7]
    (span,) = [s for s in view.spans[(T1, 0)] if s.epoch == 5]
    assert span.start_ts is None  # when epoch 5 began is not known: somewhere in the hole


def test_k1_nearest_negatives_and_edges() -> None:
    view = LogView.build(history())
    assert check_checkpoint_epochs(snap([(0, 0), (1, 5), (2, 10)]), view) == []  # all assigned
    assert check_checkpoint_epochs(snap([(5, 40)], ts=9_500), view) == []  # snapshot after the log ends
    # ... unless the log ran on past its last change (the ingestion's log_end row: its last heartbeat)
    longer = LogView.build([*history(), row(90, 20_000, None, "log_end", tid="", topic=None)])
    assert [f.numbers["leader_epoch"] for f in check_checkpoint_epochs(snap([(5, 40)], ts=9_500), longer)] == [5]
    assert check_checkpoint_epochs(snap([(5, 40)], ts=900), view) == []  # before the partition's history begins
    assert check_checkpoint_epochs(snap([(5, 40)], tid=T2), view) == []  # another topic id: not this partition
    # history starting from a snapshot: epochs at or below the oldest retained one are not judged
    from_snapshot = LogView.build([row(100, 1_000, 0, "snapshot", 7), row(110, 8_000, 0, "leader", 8)])
    assert check_checkpoint_epochs(snap([(3, 0), (7, 10), (8, 20)]), from_snapshot) == []
    assert [f.numbers["leader_epoch"] for f in check_checkpoint_epochs(snap([(7, 10), (9, 20)]), from_snapshot)] == [9]
    # no topic id in the lineage: matched by name to the incarnation alive at the snapshot time
    assert len(check_checkpoint_epochs(snap([(5, 40)], tid=None), view)) == 1


def test_the_view_knows_each_topic_id_s_creation_time() -> None:
    """What F2/S1 read (a commit before its round's topic id was created is not judged): the topic record's
    controller time, for a re-created name too; none for an id first met in a metadata snapshot."""
    recreated = [*history(), row(50, 5_000, None, "topic_deleted"), row(60, 6_000, None, "topic_recreated", tid=T2),
                 row(60, 6_000, 0, "created", 0, tid=T2)]  # fmt: skip
    assert LogView.build(recreated).created == {T1: 1_000, T2: 6_000}
    assert LogView.build([row(100, 1_000, None, "snapshot"), row(100, 1_000, 0, "snapshot", 7)]).created == {}


def test_k1_on_a_replayed_log_with_recreation() -> None:
    """Built through the codec: a re-created topic restarts at epoch 0; the old incarnation's epochs are not
    the new one's."""
    def topic(tid):
        return (2, 0, {"name": "t", "topic_id": tid})

    def part(tid):
        return (3, 0, {"partition_id": 0, "topic_id": tid, "replicas": [1], "isr": [1], "leader": 1,
                       "leader_epoch": 0, "partition_epoch": 0})

    parts = [encode_control_record_batch([(2, {"leader_id": 1, "voters": [], "granting_voters": []})],
                                         base_offset=0, raft_epoch=1, timestamp=100)]
    batches = [[topic(T1), part(T1)], [(5, 0, {"partition_id": 0, "topic_id": T1, "leader": 1})],
               [(9, 0, {"topic_id": T1})], [topic(T2), part(T2)]]
    off = 1
    for i, b in enumerate(batches):
        parts.append(encode_metadata_batch(b, base_offset=off, raft_epoch=1, timestamp=1_000 * (i + 1)))
        off += len(b)
    rows = [HistoryChange.from_row(asdict(r)) for r in replay(iter_metadata_log(b"".join(parts))).rows]
    view = LogView.build(rows)
    assert [s.epoch for s in view.spans[(T1, 0)]] == [0, 1] and view.spans[(T1, 0)][-1].end == 4
    # the new incarnation (T2) only ever had epoch 0: a lineage naming epoch 1 under T2 is unknown
    assert [f.numbers["leader_epoch"] for f in check_checkpoint_epochs(snap([(0, 0), (1, 5)], ts=4_000, tid=T2),
                                                                         view)] == [1]
    assert check_checkpoint_epochs(snap([(0, 0), (1, 5)], ts=4_000, tid=T1), view) == []


# ----------------------------------------------------------------------------------------------- M5


def obs(ts, partition, epoch, client="c1", pos=1, broker="1", topic="t", tid=T1) -> MetadataObservation:
    return MetadataObservation(capture_ts=ts, client_id=client, broker=broker, topic=topic, partition=partition,
                               leader_epoch=epoch, topic_id=tid, source="cap.jsonl", position=pos, correlation_id=pos)


def test_m5_regression_of_the_whole_state_without_any_partition_epoch_going_back() -> None:
    view = LogView.build(history())
    found = check_metadata_offsets([
        obs(4_000, 1, 1, pos=1),  # p1 epoch 1: [25, inf) -> the client has seen offset 25
        obs(5_000, 0, 1, pos=2),  # p0 epoch 1: [20, 30): ends at 30 > 25: fine, not a regression
        obs(6_000, 0, 2, pos=3), obs(6_000, 1, 1, pos=3),  # [30, inf): seen start 30
        obs(7_000, 0, 1, pos=4),  # p0 epoch 1 ends at 30 <= 30: older than what the client had
    ], view)
    assert [(f.rule, f.kind, f.severity, f.numbers["served_offset_end"], f.numbers["seen_offset_start"],
             f.numbers["lag_offsets"], f.numbers["lag_ms"]) for f in found] == [
        ("M5", "metadata_offset_regression", "warning", 30, 30, 1, 0)]
    assert found[0].evidence[0] == "capture:cap.jsonl line 4"


def test_m5_nearest_negatives() -> None:
    view = LogView.build(history())
    # overlapping intervals (the same state) never regress; same-millisecond responses are not "already seen"
    assert check_metadata_offsets([obs(4_000, 0, 1, pos=1), obs(4_000, 1, 1, pos=1), obs(5_000, 0, 1, pos=2)],
                                  view) == []
    assert check_metadata_offsets([obs(6_000, 0, 2, pos=1), obs(6_000, 0, 1, pos=2)], view) == []
    # epochs the log does not retain, and epoch -1, are left out
    assert check_metadata_offsets([obs(6_000, 0, 2, pos=1), obs(7_000, 0, 9, pos=2), obs(8_000, 0, -1, pos=3)],
                                  view) == []


def test_m5_mixed_state_warning_on_kraft_info_otherwise() -> None:
    view = LogView.build(history())
    mixed = [obs(6_000, 0, 0, pos=1), obs(6_000, 1, 1, pos=1)]  # p0 epoch 0: [10, 20); p1 epoch 1: [25, inf)
    found = check_metadata_offsets(mixed, view)
    assert [(f.kind, f.severity, f.numbers["served_offset_start"], f.numbers["served_offset_end"]) for f in found] == [
        ("metadata_state_mixed", "warning", 25, 20)]
    assert check_metadata_offsets(mixed, view, kraft=False)[0].severity == "info"
    assert SEVERITY["metadata_state_mixed"] == "warning"


# ----------------------------------------------------------------------------------------------- M3


def test_m3_uses_the_logs_topic_ids_instead_of_the_heuristic() -> None:
    from epochlib.rules import check_client_metadata
    from epochlib.rules.kraft import with_log_topic_ids

    def v9(ts, epoch, replicas, pos):
        return MetadataObservation(capture_ts=ts, client_id="c", broker="1", topic="t", partition=0,
                                   leader_epoch=epoch, replicas=replicas, source="cap.jsonl", position=pos)

    caps = [v9(3_500, 2, (1, 2, 3), 1), v9(8_000, 0, (4, 5, 6), 2)]  # epoch 2 -> 0 and a new replica set
    heuristic = check_client_metadata(caps)
    assert [f.kind for f in heuristic] == ["possible_topic_recreation"]
    # the log says t was never re-created: the drop is an epoch regression (M1), with the topic id filled in
    view = LogView.build(history())
    found = check_client_metadata(with_log_topic_ids(caps, view))
    assert [(f.rule, f.kind, f.topic_id) for f in found] == [("M1", "client_epoch_regression", T1)]
    # the log shows the re-creation (a new id): a new baseline, no finding at all
    recreated = LogView.build([*history(), row(50, 5_000, None, "topic_deleted"),
                               row(51, 6_000, None, "topic_recreated", tid=T2), row(51, 6_000, 0, "created", 0, tid=T2),
                               row(60, 9_000, 0, "isr", 0, tid=T2)])
    assert check_client_metadata(with_log_topic_ids(caps, recreated)) == []
    # outside the log's span the heuristic stays
    late = [v9(20_000, 2, (1, 2, 3), 1), v9(21_000, 0, (4, 5, 6), 2)]
    assert [f.kind for f in check_client_metadata(with_log_topic_ids(late, view))] == ["possible_topic_recreation"]


def test_a_log_replayed_from_a_later_offset_without_a_snapshot_names_no_ids() -> None:
    """The log kept from offset 40 on, no snapshot (or only a damaged one): t's first incarnation was created before
    it, so the log knows only the re-created id. Naming the later responses by it while the earlier ones keep no id
    made the id-keyed rules take the old incarnation's epochs for the new one's: 268 false M1 on the demo with a
    corrupt snapshot batch. Such a log names no ids by topic name; from offset 0 (or a snapshot) it does."""
    from epochlib.rules import check_client_metadata
    from epochlib.rules.kraft import with_log_topic_ids

    def v9(ts, epoch, pos, replicas=(1, 2, 3)):
        return MetadataObservation(capture_ts=ts, client_id="c", broker="1", topic="t", partition=0,
                                   leader_epoch=epoch, replicas=replicas, source="cap.jsonl", position=pos)

    tail = [row(50, 5_000, None, "topic_deleted"), row(51, 6_000, None, "topic_recreated", tid=T2),
            row(51, 6_000, 0, "created", 0, tid=T2), row(60, 9_000, 0, "isr", 0, tid=T2)]
    caps = [v9(4_500, 7, 1), v9(5_500, 7, 2), v9(7_000, 0, 3, (4, 5, 6)), v9(8_000, 0, 4, (4, 5, 6)),
            v9(8_500, 1, 5, (4, 5, 6))]
    later = LogView.build([row(40, 4_000, None, "log_start", tid=""), *tail])
    assert not later.names_known and later.topic_id_at("t", 7_000) is None
    assert [o.topic_id for o in with_log_topic_ids(caps, later)] == [None] * 5
    assert check_client_metadata(with_log_topic_ids(caps, later)) == check_client_metadata(caps)  # as without a log
    assert [f.kind for f in check_client_metadata(caps)] == ["possible_topic_recreation"]
    # what the old view did: the re-created id for the later responses only, and an M1 per later response
    mixed = [o if o.capture_ts < 6_000 else replace(o, topic_id=T2) for o in caps]
    assert [f.rule for f in check_client_metadata(mixed)] == ["M1"] * 3
    # from offset 0 the log knows every topic: t's re-created id is named
    whole = LogView.build([row(0, 1_000, None, "log_start", tid=""), *tail])
    assert whole.names_known and whole.topic_id_at("t", 7_000) == T2
    from_snapshot = LogView.build([row(39, 3_000, None, "snapshot,topic_created"), *tail])
    assert from_snapshot.names_known and from_snapshot.topic_id_at("t", 4_500) == T1


# ------------------------------------------------------------------------------------- M2 + lag


def test_m2_from_the_log_times_staleness_from_the_commit() -> None:
    view = LogView.build(history())
    found, judged = check_broker_staleness_logged([obs(4_000, 0, 1, pos=1), obs(3_500, 0, 1, pos=2)], view, 1000)
    # at 4000 the log had committed epoch 2 at 3000 (< 4000 - 1000 is false: 3000 < 3000 is false) -> fine
    assert found == [] and len(judged) == 2
    found, _ = check_broker_staleness_logged([obs(4_500, 0, 1, pos=3)], view, 1000)
    assert [(f.rule, f.kind, f.numbers["served_epoch"], f.numbers["cached_epoch"], f.numbers["staleness_ms"])
            for f in found] == [("M2", "broker_served_stale", 1, 2, 1_500)]
    # outside the log's coverage (after its last change): left to the capture-only rule
    found, judged = check_broker_staleness_logged([obs(20_000, 0, 1, pos=4)], view, 1000)
    assert found == [] and judged == set()


def test_response_lag_is_zero_when_up_to_date() -> None:
    view = LogView.build(history())
    lags = response_lags([obs(8_000, 0, 2, pos=1), obs(8_000, 1, 1, pos=1), obs(8_000, 0, 0, pos=2, broker="2")],
                         view, 1000)
    assert [(b, lag) for _, b, _, lag in lags] == [("1", 0), ("2", 6_000)]  # p0 epoch 1 began at 2000


# ----------------------------------------------------------------------------------------------- P1


def commit(group, partition, offset, ts) -> Commit:
    return Commit(group, "t", partition, offset, -1, ts, ts, source="o.log", position=ts, log_offset=ts)


def expansion_rows() -> list[HistoryChange]:
    return [*history(), row(45, 10_000, 2, "expanded", 0), row(45, 10_000, 3, "expanded", 0)]


def test_p1_expansion_and_violation() -> None:
    (exp,) = expansions_from_history(expansion_rows())
    assert (exp.topic, exp.old_count, exp.new_partitions, exp.ts, exp.metadata_offset) == ("t", 2, (2, 3), 10_000, 45)
    commits = [commit("g", 0, 100, 9_000), commit("g", 1, 50, 9_000), commit("g", 2, 7, 11_000)]
    bounds = [BoundEvidence(0, 9_500, 180, "segment:b1/t-0@0 offset 170"), BoundEvidence(1, 9_500, 60, "x")]
    (f,) = check_expansion_order(exp, commits, bounds)
    assert (f.rule, f.kind, f.severity, f.group_id, f.partition) == ("P1", "expansion_order_violation", "warning", "g", 2)
    assert (f.numbers["lagging_partition"], f.numbers["records_pending"], f.numbers["expansion_ts"]) == (0, 80, 10_000)


def test_p1_nearest_negatives_and_edges() -> None:
    (exp,) = expansions_from_history(expansion_rows())
    bounds = [BoundEvidence(0, 9_500, 180, "b")]
    caught_up = [commit("g", 0, 100, 9_000), commit("g", 0, 180, 10_500), commit("g", 2, 7, 11_000)]
    assert check_expansion_order(exp, caught_up, bounds) == []  # old partition read up to its bound first
    assert check_expansion_order(exp, [commit("g", 0, 100, 9_000), commit("g", 2, 0, 11_000)], bounds) == []  # offset 0
    # commits alone: g's own 100 is the bound, so g is not behind
    assert check_expansion_order(exp, [commit("g", 0, 100, 9_000), commit("g", 2, 7, 11_000)], []) == []
    late_bound = [BoundEvidence(0, 10_500, 500, "after T0")]  # not proven at T0
    assert check_expansion_order(exp, [commit("g", 0, 100, 9_000), commit("g", 2, 7, 11_000)], late_bound) == []
    new_group = [commit("h", 2, 7, 11_000)]  # never committed on the old partitions before T0
    assert check_expansion_order(exp, new_group, bounds) == []
    # another group's commit at or before T0 is a bound too
    other = [commit("o", 0, 300, 9_900), commit("g", 0, 100, 9_000), commit("g", 2, 7, 11_000)]
    assert [f.numbers["records_pending"] for f in check_expansion_order(exp, other, [])] == [200]


def test_p1_expansion_from_captures_when_there_is_no_log() -> None:
    caps = [obs(1_000, 0, 0, pos=1), obs(1_000, 1, 0, pos=1), obs(2_000, 0, 0, pos=2), obs(2_000, 1, 0, pos=2),
            obs(2_000, 2, 0, pos=2), obs(3_000, 2, 0, pos=3)]
    (exp,) = expansions_from_observations(caps)
    assert (exp.old_count, exp.new_partitions, exp.ts, exp.from_log) == (2, (2,), 2_000, False)
    assert expansions_from_observations(caps[:2]) == []


def test_p1_a_re_created_topic_in_captures_is_not_an_expansion() -> None:
    # t deleted (id T1, 2 partitions) and re-created with 4 partitions (id T2): a new topic, no expansion
    caps = [obs(1_000, 0, 3, pos=1), obs(1_000, 1, 3, pos=1), *[obs(6_000, p, 0, pos=2, tid=T2) for p in range(4)]]
    assert expansions_from_observations(caps) == []
    # the re-created topic expanded later: one expansion of T2, from 4 partitions
    later = [obs(9_000, p, 0, pos=3, tid=T2) for p in range(6)]
    (exp,) = expansions_from_observations(caps + later)
    assert (exp.topic_id, exp.old_count, exp.new_partitions, exp.ts) == (T2, 4, (4, 5), 9_000)


def test_p1_capture_expansion_seen_by_old_and_new_clients_is_one_expansion() -> None:
    # an old client's responses (below v10: no id) belong to the one id the name has
    old = [obs(1_000, p, 0, client="v9", pos=1, tid=None) for p in range(2)]
    new = [obs(2_000, p, 0, client="v12", pos=2) for p in range(4)]
    (exp,) = expansions_from_observations(old + new)
    assert (exp.topic_id, exp.old_count, exp.new_partitions, exp.ts) == (T1, 2, (2, 3), 2_000)
    mixed = [obs(1_000, p, 0, client="v12", pos=1) for p in range(2)] + [
        obs(2_000, p, 0, client="v9", pos=2, tid=None) for p in range(4)] + [
        obs(3_000, p, 0, client="v12", pos=3) for p in range(4)]
    # (the expansion keeps the id of the response that first listed the new partitions: none here, as before)
    assert [(e.topic_id, e.old_count, e.ts) for e in expansions_from_observations(mixed)] == [(None, 2, 2_000)]
    # a name with two ids: an id-less response belongs to neither (no expansion guessed from it)
    two = [obs(1_000, p, 0, pos=1) for p in range(2)] + [obs(2_000, p, 0, pos=2, tid=T2) for p in range(2)] + [
        obs(3_000, p, 0, client="v9", pos=3, tid=None) for p in range(4)]
    assert expansions_from_observations(two) == []


def tomb(group, partition, ts) -> Commit:
    return Commit(group, "t", partition, None, None, ts, ts, is_tombstone=True, source="o.log", position=ts,
                  log_offset=ts)


def test_p1_commits_before_a_tombstone_do_not_bound_a_later_incarnation() -> None:
    # t (2 partitions) deleted at 55 s (the coordinator's tombstones), re-created with 2, expanded to 4 at 60 s
    exp = Expansion("t", T2, 2, (2, 3), 60_000, None, "capture:c 3", False)
    before = [commit("g", 0, 100, 20_000), commit("g", 1, 100, 20_000), commit("h", 0, 500, 25_000),
              tomb("g", 0, 55_000), tomb("g", 1, 55_000), tomb("h", 0, 55_000)]
    after = [commit("g", 0, 3, 57_000), commit("g", 1, 3, 57_000), commit("g", 2, 5, 100_000)]
    assert check_expansion_order(exp, before + after) == []  # h's 500 was the deleted topic's
    # the new incarnation's own bound still gives the finding
    (f,) = check_expansion_order(exp, [*before, *after, commit("h", 0, 50, 58_000)])
    assert (f.group_id, f.partition, f.numbers["lagging_partition"], f.numbers["records_pending"]) == ("g", 2, 0, 47)
    # a group whose only old-partition commits were tombstoned before T0 did not read the old partitions first
    assert check_expansion_order(exp, [*before, commit("g", 0, 3, 70_000), commit("g", 2, 5, 100_000)],
                                 [BoundEvidence(0, 59_000, 40, "b")]) == []


def test_p1_a_tombstone_clears_the_groups_last_commit() -> None:
    (exp,) = expansions_from_history(expansion_rows())  # T0 = 10 s
    bounds = [BoundEvidence(0, 9_500, 180, "b")]
    # g's offsets of t-0 deleted after T0: its sequence there ended, nothing to compare the new partition with
    assert check_expansion_order(exp, [commit("g", 0, 100, 9_000), tomb("g", 0, 10_500), commit("g", 2, 7, 11_000)],
                                 bounds) == []
    # a tombstone after the new-partition commit does not change it
    (f,) = check_expansion_order(exp, [commit("g", 0, 100, 9_000), commit("g", 2, 7, 11_000), tomb("g", 0, 12_000)],
                                 bounds)
    assert f.numbers["records_pending"] == 80
