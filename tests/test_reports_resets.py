"""The spurious_offset_resets report (S1 every classification, S2) with M4 correlation."""

from __future__ import annotations

from collections import defaultdict

import pytest
from test_reports_fencing import path
from test_reports_frames import DAY, PREV, Silver, ms

from epochlib.rules import Commit, GroupState, ReplicaSnapshot, ResetContext, check_offset_resets
from jobs.reports import run_reports

pytestmark = pytest.mark.spark

R0, R1, R2 = ms(PREV, 12), ms(DAY, 6), ms(DAY, 18)


def snap(t: int, topic: str, part: int, entries, leo: int, ls: int, broker: int = 2) -> dict:
    return dict(broker=broker, snapshot_ts=t, topic=topic, partition=part, topic_id="T",
                entries=[{"epoch": e, "start_offset": s} for e, s in entries], checkpoint_version=0,
                log_start_offset=ls, high_watermark=leo, log_end_offset=leo, source=path(broker, t, topic, part))  # fmt: skip


LINEAGE = [
    # t-0: the leader of epoch 3 lost [150, ...) in an unclean election; epoch 4 starts at 150; log start 40
    snap(R0, "t", 0, [(0, 0), (3, 100)], 170, 40),
    snap(R1, "t", 0, [(0, 0), (3, 100), (4, 150)], 400, 40),
    snap(R2, "t", 0, [(0, 0), (3, 100), (4, 150)], 900, 40),
    # t-1: retention trimmed the head to epoch 5
    snap(R1, "t", 1, [(5, 1000), (6, 2000)], 3000, 1000),
    # t-2: log start moved to 2000
    snap(R1, "t", 2, [(0, 0)], 5000, 2000),
]

_lo = iter(range(1, 10_000))


def commit(group: str, t: int, offset: int | None, epoch: int = 4, *, part: int = 0, txn: str = "none") -> dict:
    lo = next(_lo)
    return dict(group_id=group, topic="t", partition=part, committed_offset=offset, leader_epoch=epoch,
                commit_ts=t, event_ts=t, is_tombstone=offset is None, key_type=1, value_version=3,
                log_partition=3, log_offset=lo, record_ts=t, txn_state=txn, producer_id=-1, source_kind="offsets",
                source="/off/00000000000000000000.log", position=lo * 100)  # fmt: skip


COMMITS = [
    commit("ga", ms(DAY, 1), 170, 3), commit("ga", ms(DAY, 2), 155),  # S1a truncation
    commit("gb", ms(DAY, 1), 170, 3), commit("gb", ms(DAY, 2), 120),  # S1a over_rewind
    commit("gc", ms(DAY, 1), 300), commit("gc", ms(DAY, 2), 200),  # S1b operator reset (group empty at 01:30)
    commit("gd", ms(DAY, 1), 2500, 6, part=1), commit("gd", ms(DAY, 2), 1500, 2, part=1),  # S1c
    commit("ge", ms(DAY, 3), 300), commit("ge", ms(DAY, 3, 10), 40),  # S1d, M4 with its client's finding
    commit("gm", ms(DAY, 3), 350), commit("gm", ms(DAY, 3, 7), 340),  # S1e, M4 with any client (no group data)
    commit("gf", ms(DAY, 20), 800), commit("gf", ms(DAY, 20, 5), 600),  # S1e, nothing to correlate
    commit("gg", ms(PREV, 22), 500, 0, part=2), commit("gg", ms(DAY, 7), 2000, 0, part=2),  # S2a retention
    commit("gh", ms(DAY, 18, 40), 200), commit("gh", ms(DAY, 18, 50), 210), commit("gh", ms(DAY, 18, 59), 225),
    commit("gh", ms(DAY, 19), 900),  # S2b: 675 past the log end known at 18:00 in 1 min, ~400x the earlier rate
    # clean: steady progress, an aborted rewind, a rewind after a tombstone; a rewind before the range
    commit("gi", ms(DAY, 1), 100), commit("gi", ms(DAY, 2), 110), commit("gi", ms(DAY, 3), 120),
    commit("gj", ms(DAY, 1), 300), commit("gj", ms(DAY, 2), 100, txn="aborted"), commit("gj", ms(DAY, 3), 310),
    commit("gk", ms(DAY, 1), 300), commit("gk", ms(DAY, 2), None), commit("gk", ms(DAY, 3), 50),
    commit("gl", ms(PREV, 20), 300), commit("gl", ms(PREV, 21), 100),
]  # fmt: skip


def member(client: str) -> dict:
    return dict(member_id=f"{client}-1", group_instance_id=None, client_id=client, client_host="/10.0.0.1",
                assigned_partitions=[{"topic": "t", "partitions": [0]}])  # fmt: skip


def group(gid: str, t: int, clients: list[str]) -> dict:
    lo = next(_lo)
    return dict(group_id=gid, record_type="group_metadata", value_version=3, is_tombstone=False,
                protocol_type="consumer", generation=1, protocol="range", leader=None, state_ts=t,
                member_count=len(clients), members=[member(c) for c in clients], event_ts=t, log_partition=3,
                log_offset=lo, source_kind="offsets", source="/off/00000000000000000000.log", position=lo * 100)  # fmt: skip


GROUPS = [
    group("gc", ms(PREV, 10), ["cc"]),
    group("gc", ms(DAY, 1, 30), []),
    group("ge", ms(PREV, 9), ["ce1"]),
    group("gf", ms(PREV, 9), ["cf"]),
]


def obs(t: int, client: str, broker: str, epoch: int) -> dict:
    lo = next(_lo)
    return dict(capture_ts=t, client_id=client, broker=broker, api_version=12, correlation_id=lo, topic="t",
                topic_id="T", partition=0, leader_id=2, leader_epoch=epoch, replicas=[1, 2, 3], isr=[1, 2, 3],
                topic_error=0, partition_error=0, source="/cap/m.jsonl", position=lo)  # fmt: skip


OBSERVATIONS = [
    obs(ms(PREV, 20), "ce1", "b1:9092", 4),
    obs(ms(DAY, 3, 2), "ce1", "b3:9092", 3),  # M1 + M2 for ge's client
    obs(ms(DAY, 3, 5), "other", "b3:9092", 3),  # M2 for a client of no group: later, but not ge's
]


def test_spurious_offset_resets(spark, tmp_path) -> None:
    silver = Silver(tmp_path)
    silver.write("epoch_lineage", LINEAGE)
    silver.write("offset_commits", COMMITS)
    silver.write("group_metadata", GROUPS)
    silver.write("metadata_observations", OBSERVATIONS)
    res = run_reports(spark, silver.config, DAY, DAY)
    got = silver.gold("spurious_offset_resets")
    by = {r["group_id"]: r for r in got}
    assert len(by) == len(got) == res.counts["spurious_offset_resets"]
    assert {g: (r["rule"], r["classification"], r["severity"]) for g, r in by.items()} == {
        "ga": ("S1a", "truncation", "info"),
        "gb": ("S1a", "over_rewind", "warning"),
        "gc": ("S1b", "operator_reset", "info"),
        "gd": ("S1c", "stale_epoch_commit", "warning"),
        "ge": ("S1d", "spurious_rewind_to_earliest", "error"),
        "gm": ("S1e", "spurious_rewind", "error"),
        "gf": ("S1e", "spurious_rewind", "error"),
        "gg": ("S2a", "retention", "info"),
        "gh": ("S2b", "spurious_skip", "error"),
    }
    assert (by["ga"]["truncation_point"], by["ga"]["records_reread"]) == (150, 15)
    assert (by["gb"]["truncation_point"], by["gb"]["records_reread"]) == (150, 30)
    assert (by["ge"]["previous_offset"], by["ge"]["new_offset"], by["ge"]["log_start_offset"]) == (300, 40, 40)
    assert (by["gg"]["records_skipped"], by["gg"]["log_start_offset"]) == (1500, 2000)  # previous commit: PREV
    assert by["gh"]["records_skipped"] == 675
    assert all(r["kind"] == r["classification"] for r in got)

    # M4: ge's reset follows its own client's stale metadata (not the later finding of another client);
    # gm's group has no metadata, so any client's finding counts; nothing else is correlated
    meta = {(r["rule"], r["client_id"]): r["finding_id"] for r in silver.gold("stale_metadata")}
    assert set(meta) == {("M1", "ce1"), ("M2", "ce1"), ("M2", "other")}
    assert by["ge"]["correlated_finding_id"] == min(meta[("M1", "ce1")], meta[("M2", "ce1")])
    assert by["gm"]["correlated_finding_id"] == meta[("M2", "other")]
    assert "stale metadata" in by["gm"]["detail"]
    assert {g for g, r in by.items() if r["correlated_finding_id"]} == {"ge", "gm"}

    # the ids are the rules' own ids on the same rows (the as-of group state gives the same decisions)
    snaps = [ReplicaSnapshot.from_row(r) for r in LINEAGE]
    seqs = defaultdict(list)
    for r in COMMITS:
        seqs[r["group_id"]].append(Commit.from_row(r))
    states = defaultdict(list)
    for r in GROUPS:
        states[r["group_id"]].append(GroupState.from_row(r))
    want = set()
    for gid, seq in seqs.items():
        part = seq[0].partition
        ctx = ResetContext(snapshots=[s for s in snaps if s.partition == part], group_states=states[gid],
                           tolerance_ms=300_000)  # fmt: skip
        want |= {f.id for f in check_offset_resets(seq, ctx) if f.event_ts >= ms(DAY)}
    assert {r["finding_id"] for r in got} == want

    # rerun: same rows and ids
    run_reports(spark, silver.config, DAY, DAY, reports=["stale_metadata", "spurious_offset_resets"])
    again = silver.gold("spurious_offset_resets")
    assert [{k: v for k, v in r.items() if k != "run_id"} for r in again] == [
        {k: v for k, v in r.items() if k != "run_id"} for r in got
    ]


def test_m4_correlates_a_finding_of_a_response_naming_the_topic_by_id_only(spark, tmp_path) -> None:
    # a v12+ response may name a topic by id only: its M1/M2 carry topic null; the reset of gq's client is
    # correlated under the name another response gives that id
    silver = Silver(tmp_path)
    silver.write("metadata_observations", [obs(ms(DAY, 3), "q1", "b1:9092", 6),
                                           {**obs(ms(DAY, 3, 2), "q1", "b3:9092", 5), "topic": None}])
    silver.write("offset_commits", [commit("gq", ms(DAY, 2, 50), 1000, 6), commit("gq", ms(DAY, 2, 55), 1050, 6),
                                    commit("gq", ms(DAY, 3, 5), 200, 6)])
    silver.write("group_metadata", [group("gq", ms(PREV, 9), ["q1"])])
    run_reports(spark, silver.config, DAY, DAY, reports=["stale_metadata", "spurious_offset_resets"])
    meta = {r["rule"]: r for r in silver.gold("stale_metadata")}
    assert {(r["rule"], r["topic"], r["topic_id"]) for r in meta.values()} == {("M1", None, "T"), ("M2", None, "T")}
    (reset,) = silver.gold("spurious_offset_resets")
    assert (reset["group_id"], reset["topic"], reset["partition"]) == ("gq", "t", 0)
    assert reset["correlated_finding_id"] == min(r["finding_id"] for r in meta.values())
    assert "stale metadata" in reset["detail"]
