"""leader_snapshot_at, F2, F4, F5 and the transaction filter."""

from __future__ import annotations

from dataclasses import replace

from epochlib.lineage import EpochEntry
from epochlib.rules import (
    Commit,
    ReplicaSnapshot,
    ResetContext,
    check_commit_fencing,
    check_offset_resets,
    fence_check,
    leader_snapshot_at,
    make_lineage_lookup,
)


def snap(broker, ts, entries, leo=None, ls=None, tid=None) -> ReplicaSnapshot:
    return ReplicaSnapshot(
        broker=str(broker),
        snapshot_ts=ts,
        topic="t",
        partition=0,
        topic_id=tid,
        entries=tuple(EpochEntry(e, s) for e, s in entries),
        log_end_offset=leo,
        log_start_offset=ls,
        source=f"broker={broker}/snapshot={ts}/t-0/leader-epoch-checkpoint",
    )


def commit(offset, epoch, ts=100, *, txn="none", tomb=False, log_offset=0) -> Commit:
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
        log_offset=log_offset,
        source="/o/00000000000000000000.log",
        position=log_offset * 100,
    )


# The leader truncated epoch 3's tail at 150 and epoch 4 started there: a consumer that committed
# (180, epoch 3) read records that are gone.
LEADER = snap(1, 1000, [(0, 0), (3, 100), (4, 150)], leo=300)
FOLLOWER = snap(2, 1000, [(0, 0), (3, 100)], leo=170)


def lookup(ts):
    return LEADER


# --- leader_snapshot_at ----------------------------------------------------------------------------


def test_leader_snapshot_first_round_at_or_after_else_newest():
    s_old = [snap(1, 10, [(0, 0)], leo=5), snap(2, 10, [(0, 0), (1, 5)], leo=6)]
    s_new = [snap(1, 20, [(0, 0), (1, 5), (2, 9)], leo=12), snap(2, 20, [(0, 0), (1, 5)], leo=9)]
    allsnaps = s_old + s_new
    assert leader_snapshot_at(allsnaps, 5).broker == "2"  # round 10, broker 2 has epoch 1
    assert leader_snapshot_at(allsnaps, 10).snapshot_ts == 10  # "at" counts
    assert (
        leader_snapshot_at(allsnaps, 11).snapshot_ts == 20 and leader_snapshot_at(allsnaps, 11).broker == "1"
    )
    assert leader_snapshot_at(allsnaps, 99).snapshot_ts == 20  # none later: the newest
    assert leader_snapshot_at([], 5) is None


def test_leader_ties_go_to_higher_leo_then_lower_broker():
    a, b, c = (
        snap(3, 10, [(0, 0), (1, 5)], leo=7),
        snap(2, 10, [(0, 0), (1, 5)], leo=9),
        snap(10, 10, [(0, 0), (1, 5)], leo=9),
    )
    assert leader_snapshot_at([a, b, c], 0).broker == "2"


def test_leader_lookup_with_tolerance_groups_a_round():
    s = [snap(1, 1000, [(0, 0)], leo=5), snap(2, 1900, [(0, 0), (1, 5)], leo=6)]
    assert make_lineage_lookup(s, tolerance_ms=0)(1000).broker == "1"
    assert make_lineage_lookup(s, tolerance_ms=1000)(1000).broker == "2"


# --- rounds without the leader (a broker-by-broker collection sweep) ------------------------------

MIN = 60_000
H6 = 6 * 60 * MIN  # 06:00


def _sweep(later=True, tid="A", later_entries=((2, 400), (5, 700), (6, 1100))):
    """Brokers 1 and 2 snapshotted at 06:00 (epoch 6 from 1100, LEO 1300); broker 3, re-fetching after a
    disk swap, alone at 06:10 (epochs up to 5, LEO 900): beyond the 300 s tolerance, a round of its own."""
    lead = [(2, 400), (5, 700), (6, 1100)]
    snaps = [snap(b, H6, lead, leo=1300, tid=tid) for b in (1, 2)]
    snaps.append(snap(3, H6 + 10 * MIN, [(2, 400), (5, 700)], leo=900, tid=tid))
    if later:
        snaps += [snap(b, 12 * 60 * MIN + (b - 1) * MIN, later_entries, leo=1500, tid=tid) for b in (1, 2, 3)]
    return snaps


def _healthy_commits():
    return [commit(1250, 6, H6 + 5 * MIN, log_offset=1), commit(1290, 6, H6 + 8 * MIN, log_offset=2),
            commit(1320, 6, H6 + 20 * MIN, log_offset=3)]  # fmt: skip


def test_f2_a_round_of_lagging_followers_is_not_the_leader():
    for later in (True, False):  # the next round holding the leader judges, else the one before
        lookup = make_lineage_lookup(_sweep(later), tolerance_ms=300_000)
        assert lookup(H6 + 5 * MIN).broker == "1"
        assert check_commit_fencing(_healthy_commits(), lookup) == []
    assert make_lineage_lookup(_sweep(), 300_000)(H6 + 5 * MIN).snapshot_ts == 12 * 60 * MIN
    assert make_lineage_lookup(_sweep(False), 300_000)(H6 + 5 * MIN).snapshot_ts == H6


def test_f2_a_truncation_is_found_past_a_round_of_lagging_followers():
    # an unclean election at 06:30 cut epoch 6 at 1280: the 12:00 round, the first holding the leader, shows it
    snaps = _sweep(later_entries=((2, 400), (5, 700), (6, 1100), (7, 1280)))
    found = check_commit_fencing(_healthy_commits(), make_lineage_lookup(snaps, 300_000))
    assert [(f.kind, f.numbers["committed_offset"], f.numbers["end_offset"]) for f in found] == [
        ("commit_beyond_epoch_end", 1290, 1280), ("commit_beyond_epoch_end", 1320, 1280)]
    assert {(f.broker, f.numbers["snapshot_ts"]) for f in found} == {("1", 12 * 60 * MIN)}


def test_f2_a_round_with_entries_the_earlier_leader_lacks_is_not_taken_for_a_lagging_one():
    """One replica with a bogus (monotone, so no L2) entry (999, 1000) at 06:00 must not turn every later, healthy
    round into "lagging followers" judged by the 06:00 snapshot: the later rounds' lineages are not a part of it."""
    bogus = [snap(1, H6, [(2, 400), (5, 700), (999, 1000)], leo=1300, tid="A")]
    later = [snap(b, 12 * 60 * MIN + (b - 1) * MIN, [(2, 400), (5, 700), (6, 1100)], leo=2500, tid="A")
             for b in (1, 2)]
    lookup = make_lineage_lookup(bogus + later, tolerance_ms=300_000)
    assert lookup(H6 + 5 * MIN).snapshot_ts == 12 * 60 * MIN
    assert check_commit_fencing([commit(2250, 6, H6 + 5 * MIN, log_offset=1)], lookup) == []


def test_f2_a_lower_round_without_topic_id_is_kept():
    # without topic ids a lagging follower cannot be told from a re-created topic (epochs restart at 0)
    lookup = make_lineage_lookup(_sweep(tid=None), tolerance_ms=300_000)
    assert lookup(H6 + 5 * MIN).broker == "3"
    kinds = [f.kind for f in check_commit_fencing(_healthy_commits(), lookup)]
    assert kinds == ["commit_unknown_epoch", "commit_unknown_epoch"]


# --- a topic deleted and re-created between two rounds ---------------------------------------------

H = 60 * MIN


def _recreated(truncated_round=False):
    """Topic id A with epochs up to 5 (LEO 1200) at 06:00; deleted at 09:30 and re-created as id B: the 12:00
    round holds epoch 0 only (LEO 60). ``truncated_round``: an A round at 08:45 after an unclean election cut
    epoch 5 at 1150."""
    old = [(0, 0), (3, 500), (5, 900)]
    snaps = [snap(b, 6 * H, old, leo=1200, tid="A") for b in (1, 2)]
    if truncated_round:
        snaps += [snap(b, 8 * H + 45 * MIN, [*old, (6, 1150)], leo=1250, tid="A") for b in (1, 2)]
    return snaps + [snap(b, 12 * H, [(0, 0)], leo=60, tid="B") for b in (1, 2)]


def test_f2_commits_before_a_re_creation_are_not_judged_by_the_new_topic():
    lookup = make_lineage_lookup(_recreated(), tolerance_ms=300_000)
    g1 = [commit(1100, 5, 8 * H, log_offset=1), commit(1180, 5, 9 * H, log_offset=2),
          commit(None, -1, 9 * H + 30 * MIN, tomb=True, log_offset=5),
          commit(40, 0, 10 * H, log_offset=6), commit(60, 0, 11 * H, log_offset=7)]  # fmt: skip
    g2 = [commit(300, 0, 8 * H + 30 * MIN, log_offset=3), commit(450, 0, 9 * H + 10 * MIN, log_offset=4)]
    assert check_commit_fencing(g1, lookup) == [] and check_commit_fencing(g2, lookup) == []
    assert lookup(8 * H) is None and lookup(5 * H).topic_id == "A" and lookup(13 * H).topic_id == "B"
    # without topic ids nothing tells the incarnations apart: the first round after the commit judges it
    assert make_lineage_lookup([replace(s, topic_id=None) for s in _recreated()], 300_000)(8 * H).topic_id is None


def test_f2_a_truncation_before_a_re_creation_is_still_found():
    lookup = make_lineage_lookup(_recreated(truncated_round=True), tolerance_ms=300_000)
    seq = [commit(1180, 5, 8 * H, log_offset=1), commit(1190, 5, 9 * H, log_offset=2)]
    (f,) = check_commit_fencing(seq, lookup)  # 09:00 lies between the A round at 08:45 and the B one: not judged
    assert (f.kind, f.numbers["committed_offset"], f.numbers["end_offset"]) == ("commit_beyond_epoch_end", 1180, 1150)
    assert f.topic_id == "A" and f.numbers["snapshot_ts"] == 8 * H + 45 * MIN


def test_commits_before_the_creation_of_the_only_round_s_topic_id_are_not_judged():
    """The old incarnation's snapshots are missing (a day without log-dir snapshots): the only round is the new
    topic id's. With that id's creation time (the metadata log's), a commit before it has no leader lineage: no F2,
    and no S1 ``truncation`` by it; a commit after it is judged as before. Without the time: as before."""
    only_b = [s for s in _recreated() if s.topic_id == "B"]  # the 12:00 round, epoch 0 only (LEO 60)
    born = {"B": 9 * H + 30 * MIN}
    old = [commit(1100, 5, 8 * H, log_offset=1), commit(1180, 5, 9 * H, log_offset=2)]
    late = [commit(80, 0, 10 * H, log_offset=6)]  # after the creation: beyond the new topic's log end (60)
    blind = make_lineage_lookup(only_b, 300_000)
    assert [f.kind for f in check_commit_fencing(old, blind)] == ["commit_unknown_epoch"] * 2
    lookup = make_lineage_lookup(only_b, 300_000, born)
    assert lookup(8 * H) is None and lookup(9 * H + 30 * MIN).topic_id == "B"
    assert leader_snapshot_at(only_b, 9 * H, 300_000, born) is None
    assert check_commit_fencing(old, lookup) == []
    (f,) = check_commit_fencing(late, lookup)
    assert (f.kind, f.numbers["end_offset"], f.topic_id) == ("commit_beyond_epoch_end", 60, "B")
    # S1: a rewind 50 -> 45 in epoch 0 of the old topic, judged by a new round whose epoch 0 ends at 30 (epoch 1
    # from there): "truncation" by the new topic's lineage, unless its creation time is known
    newer = [replace(s, entries=(EpochEntry(0, 0), EpochEntry(1, 30))) for s in only_b]
    seq = [commit(50, 0, 8 * H, log_offset=1), commit(45, 0, 8 * H + 10 * MIN, log_offset=2)]
    (blind_s1,) = check_offset_resets(seq, ResetContext(snapshots=newer, tolerance_ms=300_000))
    assert blind_s1.kind == "truncation"
    (s1,) = check_offset_resets(seq, ResetContext(snapshots=newer, tolerance_ms=300_000, topic_created=born))
    assert s1.kind != "truncation"


# --- F2 --------------------------------------------------------------------------------------------


def test_f2_commit_beyond_epoch_end():
    (f,) = check_commit_fencing([commit(180, 3)], lookup)
    assert (f.rule, f.kind, f.severity) == ("F2", "commit_beyond_epoch_end", "error")
    assert f.numbers["end_offset"] == 150 and f.numbers["records_affected"] == 30
    assert f.numbers["expected_epoch"] == 3 and f.broker == "1"
    assert f.evidence[0] == "offsets:/o/00000000000000000000.log@byte 0 offset 0"
    # the epoch's own line and the line holding its end offset (the start of epoch 4)
    assert f.evidence[1:] == ("checkpoint:broker=1/snapshot=1000/t-0/leader-epoch-checkpoint line 4",
                              "checkpoint:broker=1/snapshot=1000/t-0/leader-epoch-checkpoint line 5")


def test_f2_latest_epoch_cites_no_end_line_the_log_end_is_in_no_checkpoint():
    (f,) = check_commit_fencing([commit(301, 4)], lookup)
    assert [e for e in f.evidence if e.startswith("checkpoint:")] == [
        "checkpoint:broker=1/snapshot=1000/t-0/leader-epoch-checkpoint line 5"]


def test_f2_commit_exactly_at_epoch_end_is_fine():
    assert check_commit_fencing([commit(150, 3)], lookup) == []
    assert check_commit_fencing([commit(149, 3)], lookup) == []


def test_f2_latest_epoch_is_bounded_by_leo():
    assert check_commit_fencing([commit(300, 4)], lookup) == []
    (f,) = check_commit_fencing([commit(301, 4)], lookup)
    assert f.numbers["end_offset"] == 300 and f.numbers["records_affected"] == 1


def test_f2_a_new_leader_that_has_written_nothing_yet_holds_its_epoch_at_the_leo():
    # Partition.makeLeader assigns (1, LEO) and flushes it; ListOffsets(LATEST) then hands epoch 1 to a
    # consumer resetting to the end, which commits (100, 1). Only a restart's load would drop the entry.
    old_leader = snap(1, 2000, [(0, 0)], leo=100)
    new_leader = snap(2, 2000, [(0, 0), (1, 100)], leo=100)
    lkp = make_lineage_lookup([old_leader, new_leader])
    assert lkp(1000).broker == "2"  # the replica holding the newest epoch is the leader
    assert check_commit_fencing([commit(100, 1, ts=1000)], lkp) == []
    assert check_commit_fencing([commit(100, 0, ts=1000)], lkp) == []  # epoch 0 ends at 100
    (f,) = check_commit_fencing([commit(101, 1, ts=1000)], lkp)  # past the log end
    assert f.kind == "commit_beyond_epoch_end" and f.numbers["end_offset"] == 100
    (f,) = check_commit_fencing([commit(100, 2, ts=1000)], lkp)
    assert f.kind == "commit_unknown_epoch"
    # an entry past the log end is still a stale one (an async flush after a truncation): dropped
    stale = snap(2, 2000, [(0, 0), (1, 101)], leo=100)
    (f,) = check_commit_fencing([commit(100, 1, ts=1000)], make_lineage_lookup([old_leader, stale]))
    assert f.kind == "commit_unknown_epoch"


def test_f2_unknown_epoch():
    (f,) = check_commit_fencing([commit(200, 9)], lookup)
    assert f.kind == "commit_unknown_epoch" and f.numbers["expected_epoch"] == -1


def test_f2_snapshot_older_than_commit_does_not_judge_the_latest_or_newer_epochs():
    old = snap(1, 50, [(0, 0), (3, 100)], leo=120)
    assert check_commit_fencing([commit(500, 3, ts=100)], lambda ts: old) == []
    assert check_commit_fencing([commit(500, 5, ts=100)], lambda ts: old) == []
    # an older epoch still has a fixed end
    assert [f.kind for f in check_commit_fencing([commit(101, 0, ts=100)], lambda ts: old)] == [
        "commit_beyond_epoch_end"
    ]


def test_f2_a_snapshot_in_the_commit_s_millisecond_judges_it():
    same = snap(1, 100, [(0, 0), (3, 100)], leo=120)  # not older than the commit at 100: its epoch 3 is judged
    assert [(f.kind, f.numbers["end_offset"]) for f in check_commit_fencing([commit(500, 3, ts=100)],
                                                                           lambda ts: same)] == [
        ("commit_beyond_epoch_end", 120)]


def test_f2_epoch_older_than_head_uses_the_head_start():
    trimmed = snap(1, 1000, [(3, 100), (4, 150)], leo=300)
    (f,) = check_commit_fencing([commit(120, 1)], lambda ts: trimmed)
    assert f.numbers["end_offset"] == 100 and f.numbers["expected_epoch"] == 1


def test_f2_empty_lineage_and_no_snapshot_are_not_judged():
    assert check_commit_fencing([commit(10, 1)], lambda ts: snap(1, 1000, [], leo=5)) == []
    assert check_commit_fencing([commit(10, 1)], lambda ts: None) == []
    assert check_commit_fencing([commit(10, 1)], None) == []


def test_f2_repeated_commits_of_the_same_position_are_reported_once():
    fs = check_commit_fencing([commit(180, 3, log_offset=i) for i in range(5)], lookup)
    assert len(fs) == 1


def test_f2_a_repeat_judged_clean_is_judged_again_against_the_next_round():
    """An idle consumer re-commits (140, e5) every few seconds across an unclean election: clean against the
    round before it, beyond epoch 5's new end (120) against the round after. It gave no F2 at all, since the
    repeat was never judged; once the run has its F2 the repeats stay quiet."""
    before = snap(1, 1000, [(0, 0), (5, 100)], leo=150)
    after = snap(2, 3000, [(0, 0), (5, 100), (6, 120)], leo=160)
    seq = [commit(140, 5, ts=t, log_offset=i) for i, t in enumerate((500, 900, 1500, 2000, 2500))]
    fs = check_commit_fencing(seq, lambda ts: before if ts <= 1000 else after)
    assert [(f.kind, f.event_ts, f.numbers["records_affected"]) for f in fs] == [("commit_beyond_epoch_end", 1500, 20)]


def test_f4_id_does_not_depend_on_how_far_back_the_run_read():
    """F4 cites the commit that first carried the highest epoch: a run over the last day alone finds a later one
    than a run over three days. The finding is the same, and so is its id (it differed)."""
    from epochlib.rules import finding_id

    whole = check_commit_fencing([commit(10, 3, log_offset=1), commit(20, 3, log_offset=2),
                                  commit(30, 2, log_offset=3), commit(40, -1, log_offset=4)], None)
    alone = check_commit_fencing([commit(20, 3, log_offset=2), commit(30, 2, log_offset=3),
                                  commit(40, -1, log_offset=4)], None)
    assert [f.kind for f in whole] == [f.kind for f in alone] == ["commit_epoch_regression", "commit_epoch_dropped"]
    assert [f.evidence[1] for f in whole] != [f.evidence[1] for f in alone]  # the context differs
    assert [finding_id(f) for f in whole] == [finding_id(f) for f in alone]
    moved = check_commit_fencing([commit(20, 3, log_offset=2), commit(30, 2, log_offset=5)], None)
    assert finding_id(moved[0]) != finding_id(alone[0])  # its own commit still identifies it


def test_f2_latest_epoch_with_unknown_leo_is_skipped():
    r = fence_check(commit(10, 2), snap(1, 1000, [(0, 0), (2, 5)]))
    assert r.status == "skipped"


# --- F5 and filters --------------------------------------------------------------------------------


def test_f5_epoch_minus_one_disables_epoch_checks():
    assert check_commit_fencing([commit(10_000, -1), commit(10_000, None)], lookup) == []


def test_aborted_and_open_transactional_commits_are_ignored():
    assert check_commit_fencing([commit(180, 3, txn="aborted"), commit(180, 3, txn="open")], lookup) == []
    assert len(check_commit_fencing([commit(180, 3, txn="committed")], lookup)) == 1


# --- F4 --------------------------------------------------------------------------------------------


def test_f4_regression_and_equal_epochs():
    seq = [
        commit(10, 3, log_offset=1),
        commit(20, 3, log_offset=2),
        commit(30, 2, log_offset=3),
        commit(40, 4, log_offset=4),
    ]
    fs = check_commit_fencing(seq, None)
    assert [(f.rule, f.kind, f.severity) for f in fs] == [("F4", "commit_epoch_regression", "warning")]
    assert fs[0].numbers == {"committed_offset": 30, "leader_epoch": 2, "expected_epoch": 3}
    assert fs[0].evidence[1].endswith("offset 1")


def test_f4_dropped_is_info_once_per_run_and_keeps_baseline():
    seq = [
        commit(10, 3, log_offset=1),
        commit(20, -1, log_offset=2),
        commit(30, -1, log_offset=3),
        commit(40, 2, log_offset=4),
    ]
    fs = check_commit_fencing(seq, None)
    assert [f.kind for f in fs] == ["commit_epoch_dropped", "commit_epoch_regression"]
    assert fs[0].severity == "info"


def test_f4_tombstone_starts_a_new_baseline():
    seq = [
        commit(10, 5, log_offset=1),
        commit(None, None, tomb=True, log_offset=2),
        commit(0, 0, log_offset=3),
    ]
    assert check_commit_fencing(seq, None) == []
    assert check_commit_fencing([commit(0, -1), commit(1, -1)], None) == []  # never had an epoch
