"""Replay semantics (kraft-metadata.md §3) on logs written with our encoder, the dump-text reader on
lines written by hand from §4, snapshot selection, and the Arrow path against its reference on
fuzzed segments."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib import _wire as w
from epochlib.kraft import arrow, dumptext
from epochlib.kraft.codec import (
    MetadataEntry,
    MetadataError,
    encode_control_record_batch,
    encode_metadata_batch,
    encode_record_value,
    iter_metadata_log,
)
from epochlib.kraft.replay import merge_copies, replay
from epochlib.kraft.snapshot import choose_snapshot, encode_snapshot, parse_snapshot_name, read_snapshot
from epochlib.records import IncompleteTail

T1, T2 = w.uuid_to_str(bytes(range(1, 17))), w.uuid_to_str(bytes(range(2, 18)))
TOPIC, PART, PCR, REMOVE, BEGIN, END, ABORT, NOOP = 2, 3, 5, 9, 23, 24, 25, 20


def part(tid: str, p: int, replicas=(1, 2, 3), leader: int = 1, version: int = 0) -> tuple:
    return (PART, version, {"partition_id": p, "topic_id": tid, "replicas": list(replicas), "isr": list(replicas),
                            "leader": leader, "leader_epoch": 0, "partition_epoch": 0})


def pcr(tid: str, p: int, version: int = 0, **changes) -> tuple:
    return (PCR, version, {"partition_id": p, "topic_id": tid, **changes})


class Log:
    """A metadata log built batch by batch (offsets and times assigned in order)."""

    def __init__(self) -> None:
        self.parts: list[bytes] = [encode_control_record_batch(
            [(2, {"leader_id": 1, "voters": [{"voter_id": 1}], "granting_voters": [{"voter_id": 1}]})],
            base_offset=0, raft_epoch=1, timestamp=1000)]
        self.next, self.ts = 1, 1000

    def batch(self, *records) -> int:
        self.ts += 10
        self.parts.append(encode_metadata_batch(list(records), base_offset=self.next, raft_epoch=1, timestamp=self.ts))
        first, self.next = self.next, self.next + len(records)
        return first

    @property
    def bytes(self) -> bytes:
        return b"".join(self.parts)


def test_isr_shrink_unclean_election_and_recovery() -> None:
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    o_shrink = log.batch(pcr(T1, 0, isr=[1]))
    o_unclean = log.batch(pcr(T1, 0, leader=2, isr=[2], leader_recovery_state=1))
    o_recovered = log.batch(pcr(T1, 0, isr=[2, 3], leader_recovery_state=0))
    o_bump = log.batch(pcr(T1, 0, leader=2))  # forced epoch bump, same leader, in ISR: clean
    r = replay(iter_metadata_log(log.bytes), source="ctl")
    rows = r.history(T1, 0)
    got = [(x.metadata_offset, x.change, x.leader, x.leader_epoch, x.partition_epoch, x.isr, x.leader_recovery_state,
            x.unclean) for x in rows]
    assert got == [
        (2, "created", 1, 0, 0, (1, 2, 3), 0, False),
        (o_shrink, "isr", 1, 0, 1, (1,), 0, False),  # ISR change alone: partition epoch only
        (o_unclean, "leader,isr,leader_recovery_state", 2, 1, 2, (2,), 1, True),
        (o_recovered, "isr,leader_recovery_state", 2, 1, 3, (2, 3), 0, False),
        (o_bump, "leader", 2, 2, 4, (2, 3), 0, False),
    ]
    assert (rows[2].previous_leader, rows[2].previous_isr) == (1, (1,))
    assert rows[2].source == "ctl" and not r.issues


def test_recovering_set_again_is_not_a_second_unclean_election() -> None:
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    log.batch(pcr(T1, 0, leader=2, isr=[2], leader_recovery_state=1))
    log.batch(pcr(T1, 0, isr=[2], leader_recovery_state=1))  # still recovering: the same election
    rows = replay(iter_metadata_log(log.bytes)).history(T1, 0)
    assert [x.unclean for x in rows[1:]] == [True, False]


def test_leader_outside_isr_is_unclean_even_without_recovery_state() -> None:
    """Logs written before MV 3.2 have no LeaderRecoveryState: the ISR test alone (§3.3)."""
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    log.batch(pcr(T1, 0, isr=[1]))
    log.batch(pcr(T1, 0, leader=-1))
    log.batch(pcr(T1, 0, leader=3, isr=[3]))
    rows = replay(iter_metadata_log(log.bytes)).history(T1, 0)
    assert [(x.leader, x.leader_epoch, x.unclean) for x in rows[-2:]] == [(-1, 1, False), (3, 2, True)]


def test_a_reassignment_completed_with_a_new_leader_is_clean() -> None:
    """Moving the leader's replica away ([1, 2, 3] -> [4, 2, 3]): Kafka completes the reassignment in the record
    that brings 4 into the ISR and elects 4 from that new ISR (``PartitionChangeBuilder.build``). 4 was not in
    the ISR before the record; the election is clean all the same (it was K2 on every decommissioned leader).
    An election outside the ISR while the reassignment is still under way stays unclean."""
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0), part(T1, 1))
    log.batch(pcr(T1, 0, replicas=[4, 2, 3, 1], adding_replicas=[4], removing_replicas=[1]))
    log.batch(pcr(T1, 0, leader=4, isr=[2, 3, 4], replicas=[4, 2, 3], adding_replicas=[], removing_replicas=[]))
    log.batch(pcr(T1, 1, replicas=[4, 2, 3, 1], adding_replicas=[4], removing_replicas=[1]))
    log.batch(pcr(T1, 1, isr=[1]))
    log.batch(pcr(T1, 1, leader=4, isr=[4]))  # the leader died before 4 caught up: still unclean
    r = replay(iter_metadata_log(log.bytes))
    assert [(x.leader, x.leader_epoch, x.isr, x.adding_replicas, x.unclean) for x in r.history(T1, 0)[1:]] == [
        (1, 0, (1, 2, 3), (4,), False), (4, 1, (2, 3, 4), (), False)]
    assert [(x.leader, x.unclean) for x in r.history(T1, 1)[-1:]] == [(4, True)]
    # a reassignment that only removes ([1, 2, 3] -> [3, 2]): completed when 3 is back in the ISR
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    log.batch(pcr(T1, 0, isr=[1, 2]))
    log.batch(pcr(T1, 0, replicas=[3, 2, 1], removing_replicas=[1]))
    log.batch(pcr(T1, 0, leader=3, isr=[2, 3], replicas=[3, 2], removing_replicas=[]))
    assert [(x.leader, x.unclean) for x in replay(iter_metadata_log(log.bytes)).history(T1, 0)[-1:]] == [(3, False)]
    # cancelling [1, 2, 3] -> [4, 5, 6] while the ISR held only new replicas reverts to ISR [1]: Kafka calls that
    # unclean (PartitionReassignmentRevert), and so is the election of 1
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    log.batch(pcr(T1, 0, replicas=[4, 5, 6, 1, 2, 3], adding_replicas=[4, 5, 6], removing_replicas=[1, 2, 3]))
    log.batch(pcr(T1, 0, leader=4, isr=[4, 5]))
    log.batch(pcr(T1, 0, leader=1, isr=[1], replicas=[1, 2, 3], adding_replicas=[], removing_replicas=[]))
    assert [(x.leader, x.unclean) for x in replay(iter_metadata_log(log.bytes)).history(T1, 0)[-1:]] == [(1, True)]


def test_election_from_elr_is_clean() -> None:
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0, version=2))
    log.batch(pcr(T1, 0, version=2, leader=-1, isr=[], eligible_leader_replicas=[2]))
    log.batch(pcr(T1, 0, version=2, leader=2, isr=[2], eligible_leader_replicas=[]))
    rows = replay(iter_metadata_log(log.bytes)).history(T1, 0)
    assert [(x.leader, x.elr, x.unclean) for x in rows[1:]] == [(-1, (2,), False), (2, (), False)]


def test_clear_elr_record_clears_the_elr_with_a_partition_epoch() -> None:
    """ClearElrRecord (min.insync.replicas changed): Kafka merges ELR = LastKnownElr = [] into every partition of
    the topic (all topics for an empty name) that has either, a partition epoch each (``TopicsDelta.replay``).
    It was ignored: the partition epoch stayed one low, and the stale ELR made a later election clean."""
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0, version=2), part(T1, 1, version=2),
              (TOPIC, 0, {"name": "u", "topic_id": T2}), part(T2, 0, version=2))
    log.batch(pcr(T1, 0, version=2, isr=[1], eligible_leader_replicas=[2, 3]),
              pcr(T2, 0, version=2, isr=[1], eligible_leader_replicas=[2]))
    o_clear = log.batch((28, 0, {"topic_name": "t"}))
    log.batch(pcr(T1, 0, version=2, leader=2, isr=[2]))
    o_all = log.batch((28, 0, {"topic_name": ""}), (28, 0, {"topic_name": "gone"}))
    r = replay(iter_metadata_log(log.bytes))
    got = [(x.metadata_offset, x.change, x.partition_epoch, x.elr, x.last_known_elr, x.unclean)
           for x in r.history(T1, 0)[2:]]
    assert got == [(o_clear, "elr,last_known_elr", 2, (), (), False), (o_clear + 1, "leader,isr", 3, (), (), True)]
    assert len(r.history(T1, 1)) == 1  # no ELR: untouched, no row
    assert [(x.metadata_offset, x.partition_epoch, x.elr) for x in r.history(T2, 0)[2:]] == [(o_all, 2, ())]
    assert [i.reason for i in r.issues] == ["ClearElrRecord for unknown topic 'gone': skipped"]


def test_expansion_deletion_and_recreation() -> None:
    log = Log()
    log.batch((TOPIC, 0, {"name": "orders", "topic_id": T1}), part(T1, 0), part(T1, 1))
    o_exp = log.batch(part(T1, 2), part(T1, 3))
    o_del = log.batch((REMOVE, 0, {"topic_id": T1}))
    o_new = log.batch((TOPIC, 0, {"name": "orders", "topic_id": T2}), part(T2, 0))
    r = replay(iter_metadata_log(log.bytes))
    assert [(x.metadata_offset, x.partition, x.change) for x in r.history(T1, 2) + r.history(T1, 3)] == \
        [(o_exp, 2, "expanded"), (o_exp + 1, 3, "expanded")]
    topic_rows = [(x.metadata_offset, x.topic, x.topic_id, x.change) for x in r.rows if x.partition is None]
    assert topic_rows == [(1, "orders", T1, "topic_created"), (o_del, "orders", T1, "topic_deleted"),
                          (o_new, "orders", T2, "topic_recreated")]
    assert r.topics == {T2: "orders"} and list(r.partitions) == [(T2, 0)]
    assert r.history(T2, 0)[0].change == "created" and r.history(T2, 0)[0].leader_epoch == 0


def test_transactions_apply_at_end_and_aborts_are_discarded() -> None:
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    log.batch((BEGIN, 0, {"name": "x"}), pcr(T1, 0, leader=2))
    log.batch(pcr(T1, 0, isr=[2]))
    log.batch((ABORT, 0, {"reason": "failover"}))
    o = log.batch((BEGIN, 0, {}), pcr(T1, 0, leader=3), (TOPIC, 0, {"name": "u", "topic_id": T2}))
    log.batch(part(T2, 0), (END, 0, {}))
    r = replay(iter_metadata_log(log.bytes))
    assert [(x.metadata_offset, x.leader, x.leader_epoch) for x in r.history(T1, 0)] == [(2, 1, 0), (o + 1, 3, 1)]
    # created in one transaction over two batches: creation, not expansion
    assert r.history(T2, 0)[0].change == "created" and not r.issues


def test_problems_become_issues_not_exceptions() -> None:
    log = Log()
    log.batch(pcr(T1, 0, leader=2))  # unknown partition
    log.batch((END, 0, {}))  # End without Begin
    log.batch((BEGIN, 0, {}), (TOPIC, 0, {"name": "t", "topic_id": T1}))  # left open
    seg = log.bytes + b"\x00" * 7  # torn tail
    r = replay(iter_metadata_log(seg))
    reasons = " | ".join(i.reason for i in r.issues)
    assert "unknown partition" in reasons and "without BeginTransaction" in reasons
    assert "still open" in reasons and "torn tail" in reasons
    assert r.topics == {}  # nothing of the open transaction applied


def test_offsets_going_back_are_skipped_with_an_issue() -> None:
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    again = encode_metadata_batch([pcr(T1, 0, leader=2)], base_offset=1, raft_epoch=1, timestamp=5000)
    r = replay(iter_metadata_log(log.bytes + again))
    assert len(r.history(T1, 0)) == 1 and "not after" in r.issues[0].reason


def test_snapshot_plus_log_and_gap() -> None:
    snap_bytes = encode_snapshot([(TOPIC, 0, {"name": "t", "topic_id": T1}),
                                  (PART, 0, {**part(T1, 0)[2], "leader_epoch": 4, "partition_epoch": 9})],
                                 epoch=2, last_contained_timestamp=777, timestamp=800)
    snap = read_snapshot(snap_bytes, name="00000000000000000100-0000000002.checkpoint")
    assert snap.complete and (snap.end_offset, snap.epoch, snap.last_contained_timestamp) == (100, 2, 777)
    tail = encode_metadata_batch([pcr(T1, 0, leader=2)], base_offset=100, raft_epoch=2, timestamp=900)
    older = encode_metadata_batch([pcr(T1, 0, leader=3)], base_offset=99, raft_epoch=2, timestamp=850)
    r = replay(iter_metadata_log(older + tail), snapshot=snap)
    assert [(x.metadata_offset, x.change, x.leader, x.leader_epoch, x.partition_epoch) for x in r.history(T1, 0)] == \
        [(99, "snapshot", 1, 4, 9), (100, "leader", 2, 5, 10)]  # offset 99 is inside the snapshot: skipped
    assert not r.issues
    late = encode_metadata_batch([pcr(T1, 0, leader=3)], base_offset=150, raft_epoch=2, timestamp=950)
    assert "gap" in replay(iter_metadata_log(late), snapshot=snap).issues[0].reason
    truncated = read_snapshot(snap_bytes[:-20], name="00000000000000000100-0000000002.checkpoint")
    assert not truncated.complete and any("SnapshotFooterRecord" in e.reason for e in truncated.errors)


def test_a_restart_from_a_later_snapshot_drops_the_state_from_before_the_hole() -> None:
    """Topics t and u before a hole; u deleted and t's leader moved inside it (unseen); the replay goes on from a
    snapshot after the hole (``restarts``). Its image replaces the state: u is not carried on as alive, t's partition
    is the snapshot's, and the log after it applies onto that image."""
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    log.batch((TOPIC, 0, {"name": "u", "topic_id": T2}), part(T2, 0))
    snap = read_snapshot(encode_snapshot([(TOPIC, 0, {"name": "t", "topic_id": T1}),
                                          (PART, 0, {**part(T1, 0)[2], "leader": 2, "leader_epoch": 4,
                                                     "partition_epoch": 6})],
                                         epoch=1, last_contained_timestamp=5000, timestamp=5100),
                         name="00000000000000000050-0000000001.checkpoint")
    after = encode_metadata_batch([pcr(T1, 0, leader=3)], base_offset=50, raft_epoch=1, timestamp=6000)
    r = replay([*iter_metadata_log(log.bytes), *iter_metadata_log(after)], restarts=[(snap, "snap")])
    assert set(r.partitions) == {(T1, 0)} and set(r.topics) == {T1}
    assert [(x.metadata_offset, x.change, x.leader, x.leader_epoch) for x in r.history(T1, 0)] == [
        (2, "created", 1, 0), (49, "snapshot", 2, 4), (50, "leader", 3, 5)]
    assert r.last_offset == 50 and not r.issues
    # a snapshot after the last record read: its image is where the history ends
    r = replay(iter_metadata_log(log.bytes), restarts=[(snap, "snap")])
    assert r.last_offset == 49 and r.partitions[(T1, 0)].leader_epoch == 4 and set(r.topics) == {T1}


def test_snapshot_names_and_choice() -> None:
    assert parse_snapshot_name("00000000000000007259-0000000001.checkpoint") == (7259, 1)
    for bad in ("00000000000000007259-0000000001.checkpoint.part", "00000000000000007259-0000000001.checkpoint.deleted",
                "bootstrap.checkpoint", "00000000000000006437.snapshot"):
        assert parse_snapshot_name(bad) is None
    names = ["00000000000000000100-0000000001.checkpoint", "00000000000000000300-0000000002.checkpoint"]
    assert choose_snapshot(names, 0) is None
    assert choose_snapshot(names, 100) == names[0]
    assert choose_snapshot(names, 200) == names[1]
    assert choose_snapshot(names, None) == names[1]


def test_merge_identical_is_one_and_different_is_a_conflict() -> None:
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))
    a = list(iter_metadata_log(log.bytes))
    log_b = Log()
    log_b.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0, leader=2))
    b = list(iter_metadata_log(log_b.bytes))
    m = merge_copies({"n1": a, "n2": b})
    assert [e.offset for _, e in m.entries] == [0, 1, 2]
    (c,) = m.conflicts
    assert (c.offset, c.first_source, c.other_source) == (2, "n1", "n2")
    assert replay(m.entries).history(T1, 0)[0].source == "n1"


def test_merge_follows_raft_a_copy_s_uncommitted_tail_is_left_out() -> None:
    """A controller failover: node 1 (old leader) appended offsets 4-5 in Raft epoch 1 and crashed before they
    were committed; node 2 led epoch 2 from offset 4. Raft keeps node 2's records and truncates node 1's tail
    (``KafkaRaftClient``, a diverging epoch), whatever the copies' order: node 1's copy came first and its
    tail gave a phantom unclean election and every later epoch one too high."""
    def head(records_4_on: list[bytes]) -> bytes:
        return b"".join([encode_control_record_batch(
            [(2, {"leader_id": 1, "voters": [{"voter_id": 1}], "granting_voters": [{"voter_id": 1}]})],
            base_offset=0, raft_epoch=1, timestamp=1000),
            encode_metadata_batch([(TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0), pcr(T1, 0, isr=[1, 2])],
                                  base_offset=1, raft_epoch=1, timestamp=1010), *records_4_on])

    old = head([encode_metadata_batch([pcr(T1, 0, leader=2), pcr(T1, 0, leader=3, isr=[3])], base_offset=4,
                                      raft_epoch=1, timestamp=1020)])
    new = head([encode_control_record_batch([(2, {"leader_id": 2, "voters": [{"voter_id": 2}],
                                                  "granting_voters": [{"voter_id": 2}]})],
                                            base_offset=4, raft_epoch=2, timestamp=1030),
                encode_metadata_batch([pcr(T1, 0, leader=2)], base_offset=5, raft_epoch=2, timestamp=1040)])
    for order in (("n1", "n2"), ("n2", "n1")):
        logs = {"n1": old, "n2": new}
        m = merge_copies({k: list(iter_metadata_log(logs[k])) for k in order})
        assert [(e.offset, src, e.raft_epoch) for src, e in m.entries][3:] == [(3, order[0], 1), (4, "n2", 2),
                                                                              (5, "n2", 2)]
        assert not m.conflicts
        assert [(x.source, x.offset, x.epoch, x.by_source, x.by_epoch, x.records) for x in m.superseded] == [
            ("n1", 4, 1, "n2", 2, 2)]
        rows = replay(m.entries).history(T1, 0)
        assert [(x.leader, x.leader_epoch, x.unclean) for x in rows] == [(1, 0, False), (1, 0, False), (2, 1, False)]
    # the same record in one epoch but different: damage, a conflict as before (the first copy keeps its own)
    other = head([encode_metadata_batch([pcr(T1, 0, leader=3)], base_offset=4, raft_epoch=1, timestamp=1020)])
    m = merge_copies({"n1": list(iter_metadata_log(old)), "n3": list(iter_metadata_log(other))})
    assert [(c.offset, c.first_source, c.other_source) for c in m.conflicts] == [(4, "n1", "n3")] and not m.superseded


def test_merge_takes_the_most_up_to_date_copy_as_raft_does_not_the_highest_epoch_per_offset() -> None:
    """Three voters, two quick failovers: A led epoch 5 and appended 101-120; B won epoch 6, appended 101-110,
    replicated nothing and crashed; A won epoch 7 and wrote 121-130, which committed its epoch-5 records. Raft
    truncates B's epoch-6 records (A's log is the more up-to-date: last epoch 7). Comparing epochs offset by
    offset kept B's and dropped all of A's from 101. A later copy that starts after retention (offset 120,
    epoch 6) cuts an older copy's epoch-5 records from 120 only: what lies before its first offset is unknown
    to it and stays."""
    from epochlib.kraft.codec import MetadataEntry, MetadataRecord

    def copy(*spans: tuple[int, int, int]) -> list[MetadataEntry]:
        return [MetadataEntry(o, 1000 + o, ep, o * 10, record=MetadataRecord(20, 0, "NoOpRecord", {}))
                for a, b, ep in spans for o in range(a, b + 1)]

    a, b = copy((0, 120, 5), (121, 130, 7)), copy((0, 100, 5), (101, 110, 6))
    for order in (("a", "b"), ("b", "a")):
        m = merge_copies({k: {"a": a, "b": b}[k] for k in order})
        assert [(e.offset, src, e.raft_epoch) for src, e in m.entries if e.offset in (101, 115, 125)] == [
            (101, "a", 5), (115, "a", 5), (125, "a", 7)]
        assert [(x.source, x.offset, x.epoch, x.by_source, x.records) for x in m.superseded] == [
            ("b", 101, 6, "a", 10)]
    # the reference's NoOp heartbeats between two records are not in the merge's input (the decode keeps a file's
    # first and last): its epoch there is that of its last record before, as Kafka reads epoch ranges
    ref = [*copy((3, 3, 5)), *copy((12, 13, 5)), *copy((14, 14, 7))]
    m = merge_copies({"b": copy((0, 7, 5), (8, 9, 6)), "a": ref})
    assert [(x.source, x.offset, x.by_source, x.by_epoch) for x in m.superseded] == [("b", 8, "a", 5)]
    # a later copy of A that retention moved past everything else is the most up-to-date, yet holds nothing at
    # 101: the next copy down (A earlier) decides there, whatever the mapping order (it was a conflict, path order)
    later = copy((500, 510, 9))
    for order in (("b", "a", "a2"), ("a2", "b", "a")):
        m = merge_copies({k: {"a": a, "b": b, "a2": later}[k] for k in order})
        assert not m.conflicts and [(x.source, x.offset, x.by_source) for x in m.superseded] == [("b", 101, "a")]
    m = merge_copies({"old": copy((0, 200, 5)), "later": copy((120, 250, 6))})
    assert [(x.source, x.offset, x.by_epoch, x.records) for x in m.superseded] == [("old", 120, 6, 81)]
    assert max(e.offset for src, e in m.entries if src == "old") == 119


# ------------------------------------------------------------------ dump text written by hand (§4)

DUMP = """Dumping /data/__cluster_metadata-0/00000000000000000000.log
Log starting offset: 0
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1728488899687 size: 91 magic: 2 compresscodec: none crc: 1 isvalid: true
| offset: 0 CreateTime: 1728488899687 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] controlType: LEADER_CHANGE(2)
baseOffset: 189 lastOffset: 190 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 13677 CreateTime: 1728488990897 size: 167 magic: 2 compresscodec: none crc: 2568149797 isvalid: true
| offset: 189 CreateTime: 1728488990897 keySize: -1 valueSize: 25 sequence: -1 headerKeys: [] payload: {"type":"TOPIC_RECORD","version":0,"data":{"name":"test","topicId":"jg-eg0ERTkaAwX51jpr2oQ"}}
| offset: 190 CreateTime: 1728488990897 keySize: -1 valueSize: 62 sequence: -1 headerKeys: [] payload: {"type":"PARTITION_RECORD","version":1,"data":{"partitionId":0,"topicId":"jg-eg0ERTkaAwX51jpr2oQ","replicas":[1],"isr":[1],"removingReplicas":[],"addingReplicas":[],"leader":1,"leaderEpoch":0,"partitionEpoch":0,"directories":["PSZ6JrcqE2NiTBfmqjFcvw"]}}
baseOffset: 1017 lastOffset: 1018 count: 2 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty position: 69900 CreateTime: 1728489349781 size: 120 magic: 2 compresscodec: none crc: 5 isvalid: true
 payload: {"type":"PARTITION_CHANGE_RECORD","version":1,"data":{"partitionId":0,"topicId":"jg-eg0ERTkaAwX51jpr2oQ","leader":-1}}
| offset: 1018 CreateTime: 1728489349781 keySize: -1 valueSize: 9 sequence: -1 headerKeys: [] payload: Error at 3, skipping. Unknown metadata id 99
baseOffset: 1020 lastOffset: 1020 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 2 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 71750 CreateTime: 1728489390227 size: 91 magic: 2 compresscodec: none crc: 7 isvalid: true
| offset: 1020 CreateTime: 1728489390227 keySize: 4 valueSize: 19 sequence: -1 headerKeys: [] LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}
Dumping /data/__cluster_metadata-0/00000000000000007259-0000000001.checkpoint
Snapshot end offset: 7259, epoch: 1
baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 partitionLeaderEpoch: 1 isTransactional: false isControl: true deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: 1684029359220 size: 83 magic: 2 compresscodec: none crc: 9 isvalid: true
| offset: 0 CreateTime: 1684029359220 keySize: 4 valueSize: 11 sequence: -1 headerKeys: [] SnapshotHeader {"version":0,"lastContainedLogTimestamp":1684029359186}
"""


def test_hand_written_dump_reads_like_the_bytes() -> None:
    assert dumptext.detect_metadata_dump(DUMP)
    items = list(dumptext.iter_dump_entries(DUMP))
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["MetadataEntry"] * 4 + ["MetadataError"] + ["MetadataEntry"] * 2
    lc, topic, partition, change, err, lc2, header = items
    assert (lc.control.control_type, lc.control.data, lc.raft_epoch) == (2, None, 1)
    assert topic.record.data == {"name": "test", "topic_id": "jg-eg0ERTkaAwX51jpr2oQ"}
    # defaults filled exactly as the binary decoder fills them (vector 2 of §5.5)
    from epochlib.kraft.codec import decode_record_value
    binary = decode_record_value(bytes.fromhex(
        "010301000000008e0f9e8341114e4680c17e758e9af6a102000000010200000001010100000001000000000000000002"
        "3d267a26b72a1363624c17e6aa315cbf00"))
    assert partition.record == binary and partition.position == 5  # the batch line
    # --skip-record-metadata line: offset from the batch base, time from the batch line
    assert (change.offset, change.timestamp, change.record.data["leader"]) == (1017, 1728489349781, -1)
    assert err.unit == "line" and err.offset == 1018 and "Unknown metadata id" in err.reason
    assert lc2.control.data["leader_id"] == 1 and lc2.raft_epoch == 2
    assert header.control.data == {"control_version": 0, "last_contained_log_timestamp": 1684029359186}
    files = dumptext.dump_files(DUMP)
    assert [(f.kind, f.log_start_offset, f.end_offset, f.epoch) for f in files] == \
        [("log", 0, None, None), ("snapshot", None, 7259, 1)]
    r = replay(items[:4])
    assert [(x.leader, x.leader_epoch) for x in r.history("jg-eg0ERTkaAwX51jpr2oQ", 0)] == [(1, 0), (-1, 1)]

def test_a_dump_s_invalid_batches_are_errors_and_its_cut_end_a_tail_as_in_the_bytes() -> None:
    """kafka-dump-log prints a batch whose CRC fails with ``isvalid: false``, then its records decoded from corrupt
    bytes, and ``Found N invalid bytes at the end of <file>`` when the batches it can frame end before the file
    (DumpLogSegments.dumpLog). The binary reader quarantines the bad batch and counts a final batch the last
    segment ends inside apart (an IncompleteTail, not a bad unit); the text reader does the same — a DumpTail — for
    the folder's last segment, and quarantines the line after a rolled one (a later segment of its folder dumped),
    or one that does not end its file's section."""
    bad = DUMP.replace("position: 13677 CreateTime: 1728488990897 size: 167 magic: 2 compresscodec: none crc: 2568149797 "
                       "isvalid: true", "position: 13677 CreateTime: 1728488990897 size: 167 magic: 2 compresscodec: "
                       "none crc: 2568149797 isvalid: false")
    bad = bad.replace("Dumping /data/__cluster_metadata-0/00000000000000007259",
                      "Found 7 invalid bytes at the end of 00000000000000000000.log\n"
                      "Dumping /data/__cluster_metadata-0/00000000000000007259")
    items = list(dumptext.iter_dump_entries(bad))
    kinds = [type(i).__name__ for i in items]
    assert kinds == ["MetadataEntry", "MetadataError", "MetadataError", "MetadataEntry", "MetadataError",
                     "MetadataEntry", "DumpTail", "MetadataEntry"]
    assert "isvalid: false" in items[1].reason and items[1].position == 6  # the record's own line
    assert (items[6].length, items[6].file, items[6].announced) == (7, "00000000000000000000.log", None)
    assert isinstance(items[6], IncompleteTail)  # what the binary reader gives for a cut final batch
    assert replay(items).issues == replay([i for i in items if not isinstance(i, IncompleteTail)]).issues
    # a later segment of the same folder dumped after it: the first is rolled, its cut is lost bytes
    rolled = bad.replace("Dumping /data/__cluster_metadata-0/00000000000000007259-0000000001.checkpoint",
                         "Dumping /data/__cluster_metadata-0/00000000000000007259.log\nLog starting offset: 7259")
    items = list(dumptext.iter_dump_entries(rolled))
    assert [type(i).__name__ for i in items][6] == "MetadataError"
    assert items[6].reason.startswith("Found 7 invalid bytes at the end of 00000000000000000000.log: cut short, but "
                                      "not the partition's last segment")
    # not the last line of its file's section: not the tool's end-of-file line, a bad line
    mid = bad.replace("Found 7 invalid bytes at the end of 00000000000000000000.log\nDumping",
                      "Dumping").replace("Log starting offset: 0", "Log starting offset: 0\n"
                                         "Found 7 invalid bytes at the end of 00000000000000000000.log")
    assert "DumpTail" not in [type(i).__name__ for i in dumptext.iter_dump_entries(mid)]



@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(DUMP.splitlines()) | st.text(max_size=60), max_size=12), st.integers(0, 200))
def test_fuzz_dump_text_never_raises(lines, cut) -> None:
    text = "\n".join(lines)
    text = text[:cut] + text[cut + 1:]
    for item in dumptext.iter_dump_entries(text):
        assert isinstance(item, MetadataEntry | MetadataError)


# ------------------------------------------------------------------ Arrow path on fuzzed segments

def _segment() -> bytes:
    log = Log()
    log.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0), part(T1, 1, version=1))
    for i in range(5):
        log.batch((NOOP, 0, {}))
        log.batch(pcr(T1, i % 2, version=i % 3, leader=i))
    log.batch(pcr(T1, 0, isr=[1, 2]), b"\x01\x63\x00\xaa", (NOOP, 1, {}))  # api key 99: unknown; NoOp "v1"
    log.batch(pcr(T1, 1, version=1, replicas=[1, 2, 4], adding_replicas=[4], removing_replicas=[3],
                  directories=[T1, T2, T1]),
              pcr(T1, 0, version=2, leader=2, isr=[], eligible_leader_replicas=[2, 3], last_known_elr=[1],
                  leader_recovery_state=1),
              pcr(T1, 0, version=2, isr=None, replicas=[]), pcr(T1, 1, version=0, leader_recovery_state=0))
    return log.bytes


_SEG = _segment()


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.tuples(st.integers(0, len(_SEG) - 1), st.integers(0, 255)), max_size=4), st.integers(0, len(_SEG)))
def test_arrow_equals_reference_on_mutated_and_truncated_segments(edits, cut) -> None:
    b = bytearray(_SEG[:cut] if cut > len(_SEG) // 2 else _SEG)
    for i, v in edits:
        if b:
            b[i % len(b)] = v
    raw = bytes(b)
    assert arrow.metadata_records_arrow(raw).to_pylist() == arrow.metadata_records_rows(raw)


def test_arrow_on_the_clean_segment_takes_every_kind() -> None:
    rows = arrow.metadata_records_arrow(_SEG).to_pylist()
    assert rows == arrow.metadata_records_rows(_SEG)
    kinds = {(r["record_type"], r["version"]) for r in rows}
    assert {("NoOpRecord", 0), ("PartitionChangeRecord", 0), ("PartitionChangeRecord", 1),
            ("PartitionChangeRecord", 2), ("Unknown", 0),
            ("LeaderChangeMessage", None)} <= kinds


@pytest.mark.parametrize("n", [0, 1, 17, 100])
def test_arrow_on_prefixes(n: int) -> None:
    assert arrow.metadata_records_arrow(_SEG[:n]).to_pylist() == arrow.metadata_records_rows(_SEG[:n])


_PCR_VALUES = [
    encode_record_value(*pcr(T1, 1, version=1, replicas=[1, 2, 4], adding_replicas=[4], directories=[T1, T2])),
    encode_record_value(*pcr(T1, 0, version=2, leader=2, isr=[], eligible_leader_replicas=[2, 3], last_known_elr=[1],
                             leader_recovery_state=1)),
    encode_record_value(*pcr(T1, 0, version=0, isr=[1, 2, 3], removing_replicas=[3])),
]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.sampled_from(_PCR_VALUES), st.lists(st.tuples(st.integers(0, 120), st.integers(0, 255)), max_size=3),
       st.integers(0, 3))
def test_arrow_partition_change_shapes_equal_reference_when_mutated(value: bytes, edits, chop) -> None:
    """The Arrow path reads PartitionChangeRecords itself: every mutated shape must read as the schema does."""
    b = bytearray(value[: len(value) - chop])
    for i, v in edits:
        b[i % len(b)] = v
    seg = encode_metadata_batch([bytes(b)], base_offset=0, raft_epoch=1, timestamp=1)
    assert arrow.metadata_records_arrow(seg).to_pylist() == arrow.metadata_records_rows(seg)


def _tagged(version: int, tags: list[tuple[int, bytes]]) -> bytes:
    body = b"".join(w.write_uvarint(t) + w.write_uvarint(len(p)) + p for t, p in tags)
    return b"\x01\x05" + bytes([version]) + w.write_int32(0) + bytes(range(1, 17)) + w.write_uvarint(len(tags)) + body


I32S = b"\x03" + w.write_int32(1) + w.write_int32(2)  # compact array [1, 2]


@pytest.mark.parametrize("value", [
    _tagged(2, [(1, w.write_int32(2)), (5, b"\xfd")]),  # a negative recovery state
    _tagged(0, [(0, I32S + b"\x00")]),  # list shorter than its tag
    _tagged(0, [(0, b"\x00")]),  # null ISR
    _tagged(0, [(9, b"\x01")]),  # unknown tag: kept in _unknown_tags
    _tagged(0, [(8, b"\x01")]),  # Directories before v1: unknown there
    _tagged(1, [(8, b"\x02" + bytes(16))]),
    _tagged(1, [(6, I32S)]),  # ELR before v2: unknown there
    _tagged(2, [(6, I32S), (7, b"\x01")]),
    _tagged(0, [(2, I32S), (0, I32S)]),  # out of order
    _tagged(0, [(1, b"\x00\x01")]),  # Leader of 2 bytes
    _tagged(0, [(0, b"\x83\x80\x80\x80\x80\x00")]),  # over-long varint
    _tagged(0, [(1, w.write_int32(3))]) + b"\x00",  # trailing byte
], ids=range(12))
def test_arrow_partition_change_edge_shapes_equal_reference(value: bytes) -> None:
    seg = encode_metadata_batch([value], base_offset=0, raft_epoch=1, timestamp=1)
    assert arrow.metadata_records_arrow(seg).to_pylist() == arrow.metadata_records_rows(seg)


def test_a_change_with_its_tags_out_of_order_is_replayed() -> None:
    """Kafka's generated readers accept tags in any order (its writers sort them): such a change was a hole
    that ended the partition's history there; it is now replayed like the sorted one."""
    head = Log()
    head.batch((TOPIC, 0, {"name": "t", "topic_id": T1}), part(T1, 0))  # _tagged's topic id is T1
    seg = head.bytes + encode_metadata_batch([_tagged(0, [(2, I32S), (0, I32S), (1, w.write_int32(2))])],
                                             base_offset=head.next, raft_epoch=1, timestamp=5000)
    r = replay(iter_metadata_log(seg))
    assert not r.issues
    assert [(x.change, x.leader, x.isr, x.replicas) for x in r.history(T1, 0)[1:]] == [
        ("leader,isr,replicas", 2, (1, 2), (1, 2))]
