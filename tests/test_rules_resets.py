"""S1 (every classification, in order), S2 and M4 correlation."""

from __future__ import annotations

from dataclasses import replace

from epochlib.lineage import EpochEntry
from epochlib.rules import (
    Commit,
    Finding,
    GroupState,
    LogEndEstimate,
    MetadataObservation,
    OffsetsSeen,
    ReplicaSnapshot,
    ResetContext,
    check_offset_resets,
    correlate_resets,
    topic_names_of,
)

_lo = iter(range(1, 100_000))


def snap(ts, entries, leo=None, ls=None, broker=1) -> ReplicaSnapshot:
    return ReplicaSnapshot(
        broker=str(broker),
        snapshot_ts=ts,
        topic="t",
        partition=0,
        entries=tuple(EpochEntry(e, s) for e, s in entries),
        log_end_offset=leo,
        log_start_offset=ls,
        source=f"broker={broker}/snapshot={ts}/t-0/leader-epoch-checkpoint",
    )


def commit(offset, epoch, ts, *, tomb=False, txn="none") -> Commit:
    lo = next(_lo)
    return Commit(
        group_id="g",
        topic="t",
        partition=0,
        committed_offset=offset,
        leader_epoch=epoch,
        commit_ts=ts,
        event_ts=ts,
        is_tombstone=tomb,
        txn_state=txn,
        log_offset=lo,
        source="/o/00000000000000000000.log",
        position=lo * 10,
    )


def one(commits, ctx=None) -> Finding:
    fs = check_offset_resets(commits, ctx)
    assert len(fs) == 1, fs
    return fs[0]


# Partition history: epoch 3 from 100; the leader of epoch 3 lost [150, 180) in an unclean election and
# epoch 4 started at 150. Log start 40 (retention), LEO 400 at the snapshot.
TRUNCATED = snap(10_000, [(0, 0), (3, 100), (4, 150)], leo=400, ls=40)


# --- S1 --------------------------------------------------------------------------------------------


def test_s1a_truncation_explains_a_rewind_to_the_truncation_point():
    f = one([commit(180, 3, 1000), commit(150, 4, 2000)], ResetContext(snapshots=[TRUNCATED]))
    assert (f.rule, f.kind, f.severity) == ("S1a", "truncation", "info")
    assert f.numbers["truncation_point"] == 150 and f.numbers["records_reread"] == 30
    assert f.numbers["previous_offset"] == 180 and f.numbers["new_offset"] == 150
    assert any("line 4" in e for e in f.evidence)  # the lineage entry that decided it
    assert f.to_row()["classification"] == "truncation"


def test_s1a_a_commit_without_an_epoch_takes_the_epoch_its_record_had_before():
    """Clients without leader epochs (-1: librdkafka < 2.1, sarama, Flink) across an unclean election: the
    record before offset 180 was in epoch 3 at the snapshot before the commit, and epoch 3 ends at 150 after the
    election, so the rewind is a truncation (F5 stops epoch checks, not offset checks)."""
    before = snap(500, [(0, 0), (3, 100)], leo=200, ls=40)
    ctx = ResetContext(snapshots=[before, TRUNCATED])
    f = one([commit(180, -1, 1000), commit(160, -1, 2000)], ctx)
    assert (f.rule, f.kind, f.numbers["truncation_point"]) == ("S1a", "truncation", 150)
    assert "the commit carries no epoch: offset 179 was in epoch 3" in f.detail
    assert f.evidence[-1] == before.pointer(3)  # the lineage line that gave the epoch
    assert one([commit(180, -1, 1000), commit(0, -1, 2000)], ctx).kind == "over_rewind"
    # the snapshot before had not seen the record yet (LEO 170): it may belong to epoch 4, nothing is proven
    early = snap(500, [(0, 0), (3, 100)], leo=170, ls=40)
    assert one([commit(180, -1, 1000), commit(160, -1, 2000)],
               ResetContext(snapshots=[early, TRUNCATED])).rule != "S1a"
    # and without a snapshot before the commit either
    assert one([commit(180, -1, 1000), commit(160, -1, 2000)], ResetContext(snapshots=[TRUNCATED])).rule != "S1a"


def test_s1a_new_offset_above_the_truncation_point_is_still_truncation():
    f = one([commit(180, 3, 1000), commit(160, 4, 2000)], ResetContext(snapshots=[TRUNCATED]))
    assert f.kind == "truncation"


def test_s1a_over_rewind_below_the_truncation_point():
    f = one([commit(180, 3, 1000), commit(120, 4, 2000)], ResetContext(snapshots=[TRUNCATED]))
    assert (f.rule, f.kind, f.severity) == ("S1a", "over_rewind", "warning")
    assert f.numbers["records_reread"] == 30 and f.numbers["truncation_point"] == 150


def test_s1a_truncation_of_the_lineage_head_epoch_itself():
    """The previous commit carries the head epoch of a retention-trimmed lineage (3 from 100, 4 from 150): epoch 3
    was cut at 150, so the rewind 180 -> 160 is a truncation (info), not a spurious rewind (error)."""
    trimmed = snap(10_000, [(3, 100), (4, 150)], leo=400, ls=100)
    f = one([commit(180, 3, 1000), commit(160, 4, 2000)], ResetContext(snapshots=[trimmed]))
    assert (f.rule, f.kind, f.numbers["truncation_point"]) == ("S1a", "truncation", 150)


def test_s1b_operator_reset_when_group_empty():
    ctx = ResetContext(
        snapshots=[TRUNCATED],
        group_states=[
            GroupState("g", 500, member_count=2, client_ids=("c1",)),
            GroupState("g", 1500, member_count=0, source="/o/x.log", position=5, log_offset=9),
        ],
    )
    f = one([commit(300, 4, 1000), commit(200, 4, 2000)], ctx)
    assert (f.rule, f.kind, f.severity) == ("S1b", "operator_reset", "info")
    assert f.evidence[-1].endswith("offset 9 (group metadata)")
    # the group record written in the rewind's own millisecond counts (at or before)
    same_ms = ResetContext(snapshots=[TRUNCATED], group_states=[GroupState("g", 2000, member_count=0)])
    assert one([commit(300, 4, 1000), commit(200, 4, 2000)], same_ms).kind == "operator_reset"
    # a group that still had members is no operator reset
    ctx2 = ResetContext(snapshots=[TRUNCATED], group_states=[GroupState("g", 1500, member_count=1)])
    assert one([commit(300, 4, 1000), commit(200, 4, 2000)], ctx2).kind == "spurious_rewind"


def _member(ts, mid, client=None, *, tomb=False, lo=None) -> GroupState:
    """A KIP-848 ``ConsumerGroupMemberMetadata`` record (a tombstone when the member left)."""
    return GroupState("g", ts, record_type="consumer_group_member_metadata", member_ids=(mid,),
                      client_ids=(client,) if client and not tomb else (), is_tombstone=tomb, log_offset=lo,
                      source="/o/x.log", position=ts)


def test_s1b_kip848_one_of_two_members_leaving_leaves_the_group_non_empty():
    """Issue 13 item 3: member a leaves (its record is deleted), b is still live: the rewind is spurious."""
    states = [
        GroupState("g", 400, record_type="consumer_group_metadata", generation=1),
        _member(500, "a", "client-a"),
        _member(510, "b", "client-b"),
        GroupState("g", 1500, record_type="consumer_group_metadata", generation=2),
        _member(1500, "a", tomb=True),
    ]
    ctx = ResetContext(snapshots=[TRUNCATED], group_states=states)
    f = one([commit(300, 4, 1000), commit(200, 4, 2000)], ctx)
    assert (f.kind, f.severity) == ("spurious_rewind", "error")
    assert ctx.group_state_at(2000).member_count == 1 and ctx.group_state_at(2000).client_ids == ("client-b",)
    # the last member leaving too, then the group deleted: now it is an operator reset
    gone = [*states, _member(1600, "b", tomb=True)]
    f = one([commit(300, 4, 1000), commit(200, 4, 2000)], ResetContext(snapshots=[TRUNCATED], group_states=gone))
    assert (f.kind, f.numbers["member_count"]) == ("operator_reset", 0)
    deleted = [*gone, GroupState("g", 1700, record_type="consumer_group_metadata", is_tombstone=True)]
    f = one([commit(300, 4, 1000), commit(200, 4, 2000)], ResetContext(snapshots=[TRUNCATED], group_states=deleted))
    assert f.kind == "operator_reset" and "deleted" in f.detail


def test_membership_folds_classic_and_kip848_records_and_ties_go_to_the_log_offset():
    from epochlib.rules import current_membership

    states = [
        GroupState("g", 100, member_count=2, client_ids=("c1", "c2"), record_type="group_metadata"),
        _member(200, "m", "c3", lo=7),
        _member(200, "m", tomb=True, lo=6),  # written before the join at the same millisecond
        GroupState("g", 300, record_type="consumer_group_target_assignment_member"),
    ]
    got = [(g.member_count, g.client_ids, g.is_tombstone) for g in current_membership(states)]
    assert got == [(2, ("c1", "c2"), False), (2, ("c1", "c2"), False), (3, ("c1", "c2", "c3"), False),
                   (3, ("c1", "c2", "c3"), False)]
    # a classic tombstone deletes the group; a record of unknown count says nothing about emptiness
    assert current_membership([GroupState("g", 1, is_tombstone=True)])[0].is_empty
    assert not current_membership([GroupState("g", 1, record_type="consumer_group_partition_metadata")])[0].is_empty


def test_truncation_is_decided_before_operator_reset():
    ctx = ResetContext(snapshots=[TRUNCATED], group_states=[GroupState("g", 0, is_tombstone=True)])
    assert one([commit(180, 3, 1000), commit(150, 4, 2000)], ctx).kind == "truncation"


def test_s1c_stale_epoch_commit_below_lineage_head():
    trimmed = snap(10_000, [(3, 200), (4, 250)], leo=400, ls=200)  # epochs 0..2 gone with retention
    f = one([commit(260, 1, 1000), commit(200, 4, 2000)], ResetContext(snapshots=[trimmed]))
    assert (f.rule, f.kind, f.severity) == ("S1c", "stale_epoch_commit", "warning")
    assert f.numbers["expected_epoch"] == 3 and f.numbers["stale_epoch"] == 1


def test_s1c_epoch_zero_below_the_lineage_head_is_stale_too():
    trimmed = snap(10_000, [(3, 200), (4, 250)], leo=400, ls=200)
    f = one([commit(260, 0, 1000), commit(200, 4, 2000)], ResetContext(snapshots=[trimmed]))
    assert (f.rule, f.kind, f.numbers["stale_epoch"]) == ("S1c", "stale_epoch_commit", 0)


def test_s1d_spurious_rewind_to_earliest():
    f = one([commit(300, 4, 1000), commit(40, 4, 2000)], ResetContext(snapshots=[TRUNCATED]))
    assert (f.rule, f.kind, f.severity) == ("S1d", "spurious_rewind_to_earliest", "error")
    assert f.numbers["log_start_offset"] == 40 and f.numbers["records_reread"] == 260


def test_s1d_log_start_from_repaired_lineage_head_when_no_checkpoint():
    s = snap(10_000, [(2, 40), (4, 150)], leo=400)
    assert one([commit(300, 4, 1000), commit(40, 4, 2000)], ResetContext(snapshots=[s])).kind == (
        "spurious_rewind_to_earliest"
    )


def test_s1d_uses_the_snapshot_before_when_retention_moved_the_log_start_on_since():
    """A consumer reset to earliest at the rewind lands on the log start of that moment: the round after may
    already show a later one (it was S1e, while S2a looked at both rounds)."""
    before = snap(1500, [(0, 40), (4, 150)], leo=300, ls=40)
    after = snap(10_000, [(4, 90)], leo=400, ls=90)
    f = one([commit(300, 4, 1000), commit(40, 4, 2000)], ResetContext(snapshots=[before, after]))
    assert (f.rule, f.kind, f.numbers["log_start_offset"]) == ("S1d", "spurious_rewind_to_earliest", 40)
    assert f.evidence[-1].startswith("checkpoint:broker=1/snapshot=1500/")
    assert one([commit(300, 4, 1000), commit(60, 4, 2000)], ResetContext(snapshots=[before, after])).kind == (
        "spurious_rewind")  # neither round's log start


def test_s1e_spurious_rewind_and_without_any_context():
    f = one([commit(300, 4, 1000), commit(250, 4, 2000)], ResetContext(snapshots=[TRUNCATED]))
    assert (f.rule, f.kind, f.severity) == ("S1e", "spurious_rewind", "error")
    assert f.numbers["records_reread"] == 50
    assert one([commit(300, 4, 1000), commit(250, 4, 2000)]).kind == "spurious_rewind"


def test_epoch_minus_one_still_gets_offset_checks_but_no_truncation_explanation():
    # a consumer of a client that commits no epoch (kafka-python, a client before 2.1), in a group with members
    members = [GroupState("g", 500, member_count=1, client_ids=("c1",))]
    f = one([commit(180, -1, 1000), commit(150, -1, 2000)], ResetContext(snapshots=[TRUNCATED], group_states=members))
    assert f.kind == "spurious_rewind"
    # with no group record at all, the same -1 rewind is an offset written from outside the group, not a truncation
    assert one([commit(180, -1, 1000), commit(150, -1, 2000)], ResetContext(snapshots=[TRUNCATED])).kind == "operator_reset"


def test_s1b_a_group_that_never_had_members_and_commits_without_an_epoch_is_managed_from_outside():
    """MirrorMaker 2's offset sync (``sync.group.offsets.enabled``) writes translated offsets with AdminClient
    (epoch -1) into a group that never had members on the target cluster: no group record exists. A translated
    offset going back (5200 -> 4800) is an operator-side reset (info), not a consumer's spurious rewind."""
    snaps = [snap(0, [(0, 0), (2, 50)], leo=9000, ls=0)]
    mm = [commit(o, -1, 1000 + i * 60_000) for i, o in enumerate((5000, 5100, 5200, 4800, 5300))]
    f = one(mm, ResetContext(snapshots=snaps))
    assert (f.rule, f.kind, f.severity, f.numbers["records_reread"], f.numbers["member_count"]) == (
        "S1b", "operator_reset", "info", 400, None)  # fmt: skip
    assert "no group record" in f.detail and f.evidence == (mm[3].pointer(), mm[2].pointer())
    # a group record only after the rewind does not change what the group was at the rewind
    later = ResetContext(snapshots=snaps, group_states=[GroupState("g", 10_000_000, member_count=1)])
    assert one(mm, later).kind == "operator_reset"
    # a real consumer group's spurious rewind stays an error: members known, or a commit carrying an epoch
    members = ResetContext(snapshots=snaps, group_states=[GroupState("g", 500, member_count=1, client_ids=("c1",))])
    assert one(mm, members).kind == "spurious_rewind"
    consumer = [replace(c, leader_epoch=2) for c in mm]
    for ctx in (ResetContext(snapshots=snaps), members):
        f = one(consumer, ctx)
        assert (f.rule, f.kind, f.severity) == ("S1e", "spurious_rewind", "error")
    # the commit that moved the offset decides: a tool's -1 rewind of a memberless group's consumer-written offset
    assert one([*consumer[:3], mm[3]], ResetContext(snapshots=snaps)).kind == "operator_reset"
    # and a jump to the log end written so is an operator reset too (--to-latest), as for an empty group
    ends = [snap(0, [(0, 0), (2, 50)], leo=9000, ls=0)]
    f = one([*mm[:3], commit(9000, -1, 1000 + 3 * 60_000)], ResetContext(snapshots=ends))
    assert (f.rule, f.kind, f.severity, f.numbers["member_count"]) == ("S2b", "operator_reset", "info", None)
    assert one([*consumer[:3], commit(9000, 2, 1000 + 3 * 60_000)], ResetContext(snapshots=ends)).kind == "spurious_skip"


def test_tombstone_ends_the_sequence_and_filters():
    seq = [commit(300, 4, 1000), commit(None, None, 1500, tomb=True), commit(10, 4, 2000)]
    assert check_offset_resets(seq, ResetContext(snapshots=[TRUNCATED])) == []
    seq = [commit(300, 4, 1000), commit(10, 4, 1500, txn="aborted"), commit(300, 4, 2000)]
    assert check_offset_resets(seq) == []
    assert check_offset_resets([commit(5, 0, 1), commit(5, 0, 2)]) == []  # equal offsets: no move
    assert check_offset_resets([]) == []


# --- S2 --------------------------------------------------------------------------------------------


def test_s2a_retention():
    f = one([commit(20, 0, 1000), commit(40, 4, 2000)], ResetContext(snapshots=[TRUNCATED]))
    assert (f.rule, f.kind, f.severity) == ("S2a", "retention", "info")
    assert f.numbers["records_skipped"] == 20 and f.numbers["log_start_offset"] == 40


def test_s2a_uses_the_snapshot_before_when_the_log_start_moved_on_since():
    before = snap(1500, [(0, 40), (4, 150)], leo=300, ls=40)
    after = snap(10_000, [(4, 90)], leo=400, ls=90)
    assert (
        one([commit(20, 0, 1000), commit(40, 4, 2000)], ResetContext(snapshots=[before, after])).kind
        == "retention"
    )


def _paced(start, n, step, t0=0):
    return [commit(start + i * step, 4, t0 + i * 1000) for i in range(n)]


def test_s2b_spurious_skip_to_log_end():
    ctx = ResetContext(snapshots=[snap(500, [(0, 0), (4, 150)], leo=100_000, ls=0)])
    seq = _paced(200, 5, 10, t0=1000) + [commit(100_000, 4, 9000)]
    f = one(seq, ctx)
    assert (f.rule, f.kind, f.severity) == ("S2b", "spurious_skip", "error")
    assert f.numbers["records_skipped"] == 100_000 - 240 and f.numbers["log_end_offset"] == 100_000
    assert f.numbers["largest_previous_step"] == 10


def test_s2b_a_skip_to_the_log_end_while_the_group_was_empty_is_an_operator_reset():
    """``kafka-consumer-groups --reset-offsets --to-latest`` needs an empty group: an operator's action, info as
    S1b, not an error that pages (it was ``spurious_skip``)."""
    ctx = ResetContext(snapshots=[snap(500, [(0, 0), (4, 150)], leo=100_000, ls=0)],
                       group_states=[GroupState("g", 500, member_count=1),
                                     GroupState("g", 8000, member_count=0, source="/o/x.log", position=5, log_offset=9)])
    seq = _paced(200, 5, 10, t0=1000) + [commit(100_000, 4, 9000)]
    f = one(seq, ctx)
    assert (f.rule, f.kind, f.severity) == ("S2b", "operator_reset", "info")
    assert f.numbers["records_skipped"] == 100_000 - 240 and f.evidence[2].endswith("offset 9 (group metadata)")
    # with a member the same jump is a spurious skip; an ordinary step of an empty group is still nothing
    busy = ResetContext(snapshots=ctx.snapshots, group_states=[GroupState("g", 8000, member_count=1)])
    assert one(seq, busy).kind == "spurious_skip"
    assert check_offset_resets(_paced(200, 6, 10, t0=1000), ctx) == []


def test_s2b_no_guess_without_a_log_end_or_pace_and_normal_steps_are_quiet():
    seq = _paced(200, 5, 10, t0=1000) + [commit(100_000, 4, 9000)]
    assert check_offset_resets(seq) == []  # no log end estimate
    ctx = ResetContext(snapshots=[snap(500, [(0, 0), (4, 150)], leo=100_000, ls=0)])
    assert check_offset_resets([commit(200, 4, 1000), commit(100_000, 4, 2000)], ctx) == []  # no pace yet
    assert check_offset_resets(_paced(200, 10, 10, t0=1000), ctx) == []
    # short of the log end: consumption, not a reset to latest
    assert check_offset_resets(_paced(200, 5, 10, t0=1000) + [commit(90_000, 4, 9000)], ctx) == []
    # extra estimates count too
    ctx2 = ResetContext(
        log_end_estimates=[LogEndEstimate(500, 5000, "hw")], snapshots=[snap(500, [(4, 0)], ls=0)]
    )
    assert one(_paced(200, 5, 10, t0=1000) + [commit(5000, 4, 9000)], ctx2).kind == "spurious_skip"


def test_s2b_pace_is_a_rate_reset_to_latest_within_seconds_is_a_skip():
    # the demo's orders-4: ~560 records per 7.5 min, then 79861 -> 82876 (the log end) 7 s after the last
    # commit: only 5.4x the largest step, but ~350x the rate
    t, step = 450_000, 560
    # commit: only 5.4x the largest step, but ~350x the rate (the log end was there before that last commit)
    seq = [commit(75_381 + i * step, 4, 1000 + i * t) for i in range(9)]  # ends at 79_861
    seq.append(commit(82_876, 4, seq[-1].ts + 7000))
    ctx = ResetContext(log_end_estimates=[LogEndEstimate(seq[-2].ts - 2000, 82_876, "hw")],
                       snapshots=[snap(500, [(0, 0), (4, 150)], leo=60_000, ls=50_000)])  # fmt: skip
    f = one(seq, ctx)
    assert (f.rule, f.kind, f.numbers["records_skipped"]) == ("S2b", "spurious_skip", 3015)
    assert f.numbers["largest_previous_step"] == 560 and f.numbers["previous_rate_per_min"] == 75
    assert f.numbers["skip_rate_per_min"] == round(3015 * 60 / 7)
    assert f"3015 of them already written by {seq[-2].ts - 2000}" in f.detail


def test_s2b_needs_a_rate_above_the_factor_not_at_it():
    """10 records/s, then 100 records in 1 s to the log end: exactly 10x the pace is no skip; 101 records is."""
    def ctx(leo: int) -> ResetContext:
        return ResetContext(snapshots=[snap(500, [(0, 0), (4, 150)], leo=leo, ls=0)])

    assert check_offset_resets(_paced(200, 5, 10, t0=1000) + [commit(340, 4, 6000)], ctx(340)) == []
    assert one(_paced(200, 5, 10, t0=1000) + [commit(341, 4, 6000)], ctx(341)).kind == "spurious_skip"


def test_s2b_caught_up_consumer_committing_the_log_end_at_its_pace_is_quiet():
    ctx = ResetContext(log_end_estimates=[LogEndEstimate(500, 10_000, "hw")], snapshots=[snap(500, [(4, 0)], ls=0)])
    # steps of 100 every 10 s; the last commit reaches the log end after 10 s with a step of 120
    seq = [commit(9_380 + i * 100, 4, 1000 + i * 10_000) for i in range(6)] + [commit(10_000, 4, 61_000)]
    assert check_offset_resets(seq, ctx) == []
    # an idle consumer: one large step (50x the largest) after a long pause, at its usual rate
    seq = [commit(9_000 + i * 10, 4, 1000 + i * 1000) for i in range(5)] + [commit(10_000, 4, 105_000)]
    assert check_offset_resets(seq, ctx) == []
    # commits within one millisecond: the elapsed time is floored at 1 s, so a 15-record step is no skip
    seq = [commit(9_900 + i * 10, 4, 1000 + i * 1000) for i in range(5)] + [commit(10_000, 4, 5001)]
    assert check_offset_resets(seq, ctx) == []


def test_s2b_a_caught_up_consumer_draining_a_burst_between_two_commits_is_quiet():
    """A trickle consumer (7 records per 5 s auto-commit); 50k records are produced at 10:00:10, a snapshot round
    at 10:00:12 sees the log end 51000, the next commit (10:00:13) is 51000: the consumer drained the burst (a
    consumer reads 50k records in well under a second). The estimate the jump reaches was taken after the group's
    previous commit, so it shows the burst, not records the group passed over."""
    t0 = 36_000_000
    trickle = [commit(960 + 7 * i, 1, t0 + 5000 * i) for i in range(7)]  # ends at 1002, t0 + 30 s
    seq = [*trickle, commit(51_000, 1, t0 + 35_000), commit(51_006, 1, t0 + 40_000)]
    lin = [(0, 0), (1, 100)]
    rounds = [snap(0, lin, leo=900, ls=0), snap(t0 + 34_000, lin, leo=51_000, ls=0), snap(t0 + 60_000, lin, leo=52_000, ls=0)]
    assert check_offset_resets(seq, ResetContext(snapshots=rounds)) == []
    # nor when an earlier round saw the consumer a few records behind (a caught-up consumer always is): those
    # few records existed at its previous commit, the other 49,990 did not
    near = [rounds[0], snap(t0 + 29_000, lin, leo=1010, ls=0), *rounds[1:]]
    assert check_offset_resets(seq, ResetContext(snapshots=near)) == []
    # another caught-up group's commit after the previous commit is the same burst
    seen = OffsetsSeen.from_commits([*seq, other(51_000, t0 + 34_500)])
    assert check_offset_resets(seq, ResetContext(snapshots=rounds, offsets_seen=seen)) == []
    # the true reset to latest: the log end was already at 51000 when the group last committed (a round at
    # 10:00:29, or another group's commit), and the group jumped past those records in 5 s
    for ctx in (ResetContext(snapshots=[rounds[0], snap(t0 + 29_000, lin, leo=51_000, ls=0), *rounds[1:]]),
                ResetContext(snapshots=rounds, offsets_seen=OffsetsSeen.from_commits([*seq, other(51_000, t0 + 29_000)]))):
        f = one(seq, ctx)
        assert (f.rule, f.kind, f.severity, f.numbers["records_skipped"]) == ("S2b", "spurious_skip", "error", 49_998)


def test_s2b_a_repeated_offset_does_not_restart_the_pace_clock():
    # accuracy-3's clicks-4: a tool re-commits the position (epoch -1) 22 s before the consumer's usual step of
    # ~1000 records per 5 min reaches the log end; the pace runs from the first commit of that offset
    ctx = ResetContext(log_end_estimates=[LogEndEstimate(500, 9_000, "hw")], snapshots=[snap(500, [(4, 0)], ls=0)])
    seq = [commit(3_000 + i * 1000, 4, 1000 + i * 300_000) for i in range(6)]  # ends at 8000, t=1_501_000
    seq += [commit(8_000, -1, 1_786_000), commit(9_015, 4, 1_808_000)]
    assert check_offset_resets(seq, ctx) == []
    # but a real reset to latest shortly after such a repeat is still one
    seq[-1] = commit(60_000, 4, 1_808_000)
    ctx2 = ResetContext(log_end_estimates=[LogEndEstimate(500, 60_000, "hw")], snapshots=[snap(500, [(4, 0)], ls=0)])
    assert one(seq, ctx2).kind == "spurious_skip"


def test_s2b_a_previous_offset_below_the_log_start_jumping_to_the_log_end_is_no_skip():
    """Retention took the previous position (200..240 < log start 1000): OffsetOutOfRange with
    auto.offset.reset=latest jumps to the log end legitimately; not S2a (that lands on the log start), not S2b."""
    ctx = ResetContext(snapshots=[snap(500, [(0, 0), (4, 150)], leo=100_000, ls=1000)])
    assert check_offset_resets(_paced(200, 5, 10, t0=1000) + [commit(100_000, 4, 9000)], ctx) == []
    # the same jump from above the log start is the skip
    above = ResetContext(snapshots=[snap(500, [(0, 0), (4, 150)], leo=100_000, ls=100)])
    assert one(_paced(200, 5, 10, t0=1000) + [commit(100_000, 4, 9000)], above).kind == "spurious_skip"


def test_s2b_retention_not_excluded_means_no_skip():
    ctx = ResetContext(log_end_estimates=[LogEndEstimate(500, 5000, "hw")])
    assert check_offset_resets(_paced(200, 5, 10, t0=1000) + [commit(5000, 4, 9000)], ctx) == []


# "the highest offset seen": other groups' commits bound the log end from below (no snapshot estimate here:
# the only snapshot, taken later, gives the log start but neither a LEO nor a high watermark)
LATER_LS_ONLY = snap(100_000, [(4, 0)], ls=0)


def other(offset, ts, group="other", **kw) -> Commit:
    return replace(commit(offset, 4, ts, **kw), group_id=group)


def test_s2b_highest_offset_another_group_committed_is_a_log_end_estimate():
    seq = _paced(200, 5, 10, t0=1000) + [commit(5000, 4, 9000)]
    seen = OffsetsSeen.from_commits([*seq, other(4_000, 2000), other(5_000, 8000)])
    f = one(seq, ResetContext(snapshots=[LATER_LS_ONLY], offsets_seen=seen))
    assert (f.rule, f.kind, f.numbers["log_end_offset"], f.numbers["records_skipped"]) == (
        "S2b", "spurious_skip", 5000, 4760)  # fmt: skip
    assert any("group other had committed offset 5000" in e and e.startswith("offsets:") for e in f.evidence)
    # without the other group's commits there is nothing to reach: no guess
    assert check_offset_resets(seq, ResetContext(snapshots=[LATER_LS_ONLY])) == []


def test_s2b_highest_offset_seen_nearest_negatives():
    seq = _paced(200, 5, 10, t0=1000) + [commit(5000, 4, 9000)]
    # the group's own commits are never its log-end estimate (every forward jump passes them)
    assert check_offset_resets(seq, ResetContext(snapshots=[LATER_LS_ONLY], offsets_seen=OffsetsSeen.from_commits(seq))) == []
    cases = {
        "committed at the same millisecond, not before": [other(5_000, 9000)],
        "the other group is further on: the jump stops short of what was seen": [other(6_000, 8000)],
        "a tombstone deletes an offset, it does not show one": [other(5_000, 8000, tomb=True)],
        "an aborted transactional commit never counted": [other(5_000, 8000, txn="aborted")],
    }
    for why, extra in cases.items():
        ctx = ResetContext(snapshots=[LATER_LS_ONLY], offsets_seen=OffsetsSeen.from_commits([*seq, *extra]))
        assert check_offset_resets(seq, ctx) == [], why
    # the larger of the two bounds wins: a snapshot's high watermark below what another group had read
    with_hw = [snap(500, [(4, 0)], ls=0, leo=4_000), LATER_LS_ONLY]
    ctx = ResetContext(snapshots=with_hw, offsets_seen=OffsetsSeen.from_commits([*seq, other(6_000, 8000)]))
    assert check_offset_resets(seq, ctx) == []
    assert one(seq, ResetContext(snapshots=with_hw)).numbers["log_end_offset"] == 4_000


def test_s2b_two_caught_up_groups_on_a_bursty_topic_are_quiet():
    # the real kraft-single-broker-2024 files: two groups commit the same offsets milliseconds apart; a burst of
    # 4 records after minutes of 1-record steps looks 14x faster than the pace, and the other group had just
    # committed the new offset - but when this group last committed, nobody was past its offset
    me = [commit(o, -1, t) for o, t in [(15, 1_879_777), (16, 1_915_364), (17, 1_974_862), (20, 2_037_858),
                                         (21, 2_041_417), (25, 2_042_698)]]  # fmt: skip
    them = [other(o, t - 5) for o, t in [(15, 1_879_777), (16, 1_915_364), (17, 1_974_862), (20, 2_037_858),
                                         (21, 2_041_417), (25, 2_042_698)]]  # fmt: skip
    ctx = ResetContext(snapshots=[LATER_LS_ONLY], offsets_seen=OffsetsSeen.from_commits(me + them))
    assert check_offset_resets(me, ctx) == []
    # a group that was behind the other one at its previous commit, and then jumps to it, did skip
    behind = [*me[:-1], commit(40, -1, 2_042_698)]
    ahead = [*them, other(40, 2_030_000)]
    ctx = ResetContext(snapshots=[LATER_LS_ONLY], offsets_seen=OffsetsSeen.from_commits(behind + ahead))
    assert one(behind, ctx).numbers["records_skipped"] == 19


def test_s2b_a_jump_no_larger_than_an_earlier_step_is_a_catch_up():
    seq = [commit(200, 4, 1000), commit(400, 4, 100_000), commit(410, 4, 110_000), commit(420, 4, 120_000)]
    ctx = ResetContext(snapshots=[snap(500, [(0, 0), (4, 150)], leo=620, ls=0)])
    assert check_offset_resets([*seq, commit(620, 4, 121_000)], ctx) == []  # 200 again, at 60x the pace
    assert one([*seq, commit(621, 4, 121_000)], ResetContext(snapshots=[snap(500, [(0, 0), (4, 150)], leo=621, ls=0)]))


def test_offsets_seen_answers_for_each_group_without_its_own_commits():
    seen = OffsetsSeen([10, 20, 30, 40], [100, 300, 200, 250], ["a", "b", "a", "c"])
    assert seen.highest_before(10, "x") is None  # strictly before
    assert seen.highest_before(25, "b").offset == 100  # b's own 300 is excluded
    assert seen.highest_before(25, "a").offset == 300
    assert seen.highest_before(50, "b").offset == 250  # the best of a group other than b
    assert seen.highest_before(50, "a").offset == 300
    assert seen.highest_before(15, "a") is None  # only a's own commit before 15
    assert OffsetsSeen([], [], []).highest_before(10) is None


# --- M4 --------------------------------------------------------------------------------------------


def _meta(ts, client="c1", rule="M2", partition=0):
    return Finding(
        rule,
        "broker_served_stale",
        event_ts=ts,
        topic="t",
        topic_id="X",
        partition=partition,
        client_id=client,
        broker="b2",
        numbers={"served_epoch": 3},
        evidence=(f"capture:x line {ts}",),
    )


def test_m4_correlates_within_window_with_the_latest_metadata_finding():
    reset = one([commit(300, 4, 1000), commit(40, 4, 600_000)], ResetContext(snapshots=[TRUNCATED]))
    early, late, after = _meta(100_000), _meta(500_000), _meta(700_000)
    (r,) = correlate_resets([reset], [early, late, after])
    assert r.correlated_finding_id == late.id and r.cause == "stale metadata"
    assert r.id == reset.id


def test_m4_window_partition_group_clients_and_explained_kinds():
    reset = one([commit(300, 4, 1000), commit(250, 4, 2_000_000)], ResetContext(snapshots=[TRUNCATED]))
    assert correlate_resets([reset], [_meta(0)])[0].correlated_finding_id is None  # outside 15 min
    assert correlate_resets([reset], [_meta(1_900_000, partition=1)])[0].correlated_finding_id is None
    m = _meta(1_900_000, client="other")
    assert correlate_resets([reset], [m], group_clients={"g": {"c1"}})[0].correlated_finding_id is None
    assert correlate_resets([reset], [m], group_clients={"g": set()})[0].correlated_finding_id == m.id
    assert correlate_resets([reset], [m], group_clients=lambda g: None)[0].correlated_finding_id == m.id
    assert correlate_resets([reset], [_meta(2_000_000)])[0].correlated_finding_id is not None  # same ms
    edge = _meta(2_000_000 - 15 * 60 * 1000)  # the window's far end is in it
    assert correlate_resets([reset], [edge])[0].correlated_finding_id == edge.id
    a, b = _meta(1_900_000, client="c1"), _meta(1_900_000, client="c2")  # a tie: the smaller id
    assert correlate_resets([reset], [a, b])[0].correlated_finding_id == min(a.id, b.id)
    assert correlate_resets([reset], [b, a])[0].correlated_finding_id == min(a.id, b.id)


def test_m4_matches_a_finding_without_topic_name_by_its_topic_id():
    # a v12+ response may name a topic by id only: its finding has topic None and topic id "X"
    reset = one([commit(300, 4, 1000), commit(250, 4, 2_000_000)], ResetContext(snapshots=[TRUNCATED]))
    nameless = replace(_meta(1_900_000), topic=None)
    assert correlate_resets([reset], [nameless])[0].correlated_finding_id is None  # no name known
    seen = [MetadataObservation(1_000, "c1", "b1", "t", 0, 4, topic_id="X"),
            MetadataObservation(1_000, "c1", "b1", None, 0, 4, topic_id="X"),
            MetadataObservation(1_000, "c1", "b1", "u", 0, 4, topic_id="Y")]
    names = topic_names_of(seen)
    assert names == {"X": "t", "Y": "u"}
    (r,) = correlate_resets([reset], [nameless], topic_names=names)
    assert r.correlated_finding_id == nameless.id and r.cause == "stale metadata"
    other = replace(nameless, topic_id="Y")  # another topic's id
    assert correlate_resets([reset], [other], topic_names=names)[0].correlated_finding_id is None
    explained = one([commit(180, 3, 1000), commit(150, 4, 2_000_000)], ResetContext(snapshots=[TRUNCATED]))
    assert correlate_resets([explained], [_meta(1_900_000)])[0].correlated_finding_id is None
