"""The fencing_violations report (L1, L2, L3, L5, D1, D2, F2, F4), on tiny silver tables."""

from __future__ import annotations

import datetime as dt

import pytest
from test_reports_frames import DAY, PREV, Silver, kinds, ms

from jobs.reports import run_reports

pytestmark = pytest.mark.spark

R0, R1, R2 = ms(PREV, 12), ms(DAY, 6), ms(DAY, 12)


def stamp(t: int) -> str:
    return dt.datetime.fromtimestamp(t / 1000, tz=dt.timezone.utc).strftime("%Y%m%dT%H%M%SZ")


def path(broker: int, t: int, topic: str, part: int, name: str = "leader-epoch-checkpoint") -> str:
    return f"/logs/broker={broker}/snapshot={stamp(t)}/{topic}-{part}/{name}"


def snap(broker: int, t: int, topic: str, part: int, entries, leo, ls=0) -> dict:
    return dict(broker=broker, snapshot_ts=t, topic=topic, partition=part, topic_id=f"ID-{topic}",
                entries=[{"epoch": e, "start_offset": s} for e, s in entries], checkpoint_version=0,
                log_start_offset=ls, high_watermark=leo, log_end_offset=leo, source=path(broker, t, topic, part))  # fmt: skip


E2 = [(0, 0), (1, 100), (2, 150)]  # t-0 after the unclean election: epoch 2 starts at 150

LINEAGE = [
    # t-0: b2 leads epoch 2 since 150; b1 keeps [150, 180) of epoch 1 in R0 and R1 (D1 at R1), truncated by R2
    snap(1, R0, "t", 0, [(0, 0), (1, 100)], 180),
    snap(2, R0, "t", 0, E2, 250),
    snap(1, R1, "t", 0, [(0, 0), (1, 100)], 180),
    snap(2, R1, "t", 0, E2, 300),
    snap(1, R2, "t", 0, E2, 400),
    snap(2, R2, "t", 0, E2, 400),
    # t-1: the tail entry (4, 150) removed and the log end moved back to 150 (L5 lineage_truncated)
    snap(1, R1, "t", 1, [(0, 0), (3, 100), (4, 150)], 200),
    snap(1, R2, "t", 1, [(0, 0), (3, 100)], 150),
    # t-2: epoch 1's start moved (L5 lineage_rewritten)
    snap(1, R1, "t", 2, [(0, 0), (1, 100), (2, 200)], 300),
    snap(1, R2, "t", 2, [(0, 0), (1, 110), (2, 200)], 350),
    # t-3: two replicas disagree on where epoch 1 starts (D2)
    snap(1, R1, "t", 3, [(0, 0), (1, 100), (2, 200)], 250),
    snap(2, R1, "t", 3, [(0, 0), (1, 120), (2, 200)], 250),
    # m-0: epochs not increasing (L2)
    snap(2, R1, "m", 0, [(0, 0), (2, 50), (1, 60)], 100),
    # clean partitions: c-0 grows normally on two replicas
    snap(1, R0, "c", 0, [(0, 0)], 50),
    snap(2, R0, "c", 0, [(0, 0)], 50),
    snap(1, R1, "c", 0, [(0, 0), (1, 60)], 90),
    snap(2, R1, "c", 0, [(0, 0), (1, 60)], 90),
]


def batch(t_snap: int, base: int, epoch: int, max_ts: int, broker: int = 2) -> dict:
    return dict(broker=broker, snapshot_ts=t_snap, topic="t", partition=0, source=path(broker, t_snap, "t", 0,
                f"{base // 1000 * 1000:020d}.log"), position=base * 10, base_offset=base, last_offset=base + 4,
                partition_leader_epoch=epoch, magic=2, compression="none", is_transactional=False,
                is_control=False, producer_id=-1, records_count=5, max_timestamp=max_ts, size=100)  # fmt: skip


BATCHES = [
    b
    for t_snap in (R1, R2)  # the same segment read in two snapshots: each finding once
    for b in (
        batch(t_snap, 100, 1, ms(DAY, 0, 30)),
        batch(t_snap, 105, 2, ms(PREV, 23)),  # mismatch, but its time is before the range
        batch(t_snap, 120, 2, ms(DAY, 1)),  # mismatch: epoch 1 is in force at 120
        batch(t_snap, 150, 2, ms(DAY, 2)),
        batch(t_snap, 200, 1, ms(DAY, 3)),  # regression: below epoch 2 of an earlier batch
        batch(t_snap, 250, 5, ms(DAY, 4)),  # unknown: above every lineage entry
    )
] + [batch(R1, 100, 1, ms(DAY, 1), broker=1), batch(R1, 150, 1, ms(DAY, 1), broker=1)]  # clean on b1

_lo = iter(range(1, 10_000))


def commit(group: str, t: int, offset: int | None, epoch: int | None, *, txn: str = "none", part: int = 0,
           topic: str = "t") -> dict:  # fmt: skip
    lo = next(_lo)
    return dict(group_id=group, topic=topic, partition=part, committed_offset=offset, leader_epoch=epoch,
                commit_ts=t, event_ts=t, is_tombstone=offset is None, key_type=1,
                value_version=None if offset is None else 3, log_partition=7, log_offset=lo, record_ts=t,
                txn_state=txn, producer_id=-1, source_kind="offsets", source="/off/00000000000000000000.log",
                position=lo * 100)  # fmt: skip


COMMITS = [
    commit("g1", ms(PREV, 20), 170, 1),  # beyond the end of epoch 1 (150), but before the range
    commit("g1", ms(DAY, 1), 175, 1),  # F2 beyond end: 25 records
    commit("g1", ms(DAY, 2), 160, 2),
    commit("g1", ms(DAY, 3), 200, 1),  # F4 regression (2 committed before) and F2 beyond end (50)
    commit("g2", ms(DAY, 4), 210, 9),  # F2 unknown epoch
    commit("g3", ms(DAY, 1), 10, 2),
    commit("g3", ms(DAY, 2), 20, -1),  # F4 epoch dropped
    commit("g3", ms(DAY, 2, 30), 30, -1),  # the same run of -1 commits: not repeated
    # clean: an aborted commit that would regress, a committed transaction, a tombstone baseline, F5
    commit("g4", ms(DAY, 1), 200, 2),
    commit("g4", ms(DAY, 2), 250, 1, txn="aborted"),
    commit("g4", ms(DAY, 3), 260, 2, txn="committed"),
    commit("g5", ms(DAY, 1), 200, 2),
    commit("g5", ms(DAY, 2), None, None),
    commit("g5", ms(DAY, 3), 10, 1),
    commit("g6", ms(DAY, 1), 500, -1),
    commit("g6", ms(DAY, 2), 600, None),
    commit("g7", ms(DAY, 1), 70, 1, topic="c"),
]

QUARANTINE = [
    dict(event_date=DAY, run_id="r0", source_kind="logdirs", source=path(3, R1, "t", 0), position=2, unit="file",
         reason="count 2 does not match 1 entry line", raw=b"0\n2\n0 0\n"),  # fmt: skip
    dict(event_date=PREV, run_id="r0", source_kind="logdirs", source=path(3, R0, "t", 0), position=1, unit="file",
         reason="unknown version 7", raw=b"7\n"),  # fmt: skip
    dict(event_date=DAY, run_id="r0", source_kind="logdirs", source=f"/logs/broker=3/snapshot={stamp(R1)}/"
         "replication-offset-checkpoint", position=1, unit="file", reason="bad line", raw=b"x"),  # fmt: skip
]


def build(tmp_path) -> Silver:
    silver = Silver(tmp_path)
    silver.write("epoch_lineage", LINEAGE)
    silver.write("record_batches", BATCHES)
    silver.write("offset_commits", COMMITS)
    silver.write("quarantine", QUARANTINE)
    return silver


def test_fencing_violations(spark, tmp_path) -> None:
    silver = build(tmp_path)
    res = run_reports(spark, silver.config, DAY, DAY, reports=["fencing_violations"])
    got = silver.gold("fencing_violations")
    assert kinds(got) == sorted(
        [
            ("D1", "replica_divergence_unresolved", "error", DAY),
            ("D2", "replica_lineage_conflict", "error", DAY),
            ("F2", "commit_beyond_epoch_end", "error", DAY),
            ("F2", "commit_beyond_epoch_end", "error", DAY),
            ("F2", "commit_unknown_epoch", "error", DAY),
            ("F4", "commit_epoch_dropped", "info", DAY),
            ("F4", "commit_epoch_regression", "warning", DAY),
            ("L1", "checkpoint_unreadable", "warning", DAY),
            ("L2", "lineage_not_monotonic", "error", DAY),
            ("L3", "batch_epoch_mismatch", "error", DAY),
            ("L3", "batch_epoch_regression", "critical", DAY),
            ("L3", "batch_epoch_unknown", "error", DAY),
            ("L5", "lineage_rewritten", "error", DAY),
            ("L5", "lineage_truncated", "info", DAY),
        ]
    )
    assert res.counts["fencing_violations"] == 14
    by = {(r["rule"], r["kind"], r["group_id"], r["committed_offset"]): r for r in got}
    f2 = by[("F2", "commit_beyond_epoch_end", "g1", 175)]
    assert (f2["leader_epoch"], f2["expected_epoch"], f2["end_offset"], f2["records_affected"]) == (1, 1, 150, 25)
    assert f2["broker"] == "2" and f2["event_ts"] == dt.datetime(2024, 3, 4, 1, tzinfo=dt.timezone.utc)
    assert by[("F2", "commit_beyond_epoch_end", "g1", 200)]["records_affected"] == 50
    assert by[("F4", "commit_epoch_regression", "g1", 200)]["expected_epoch"] == 2
    assert by[("F2", "commit_unknown_epoch", "g2", 210)]["leader_epoch"] == 9
    assert {r["group_id"] for r in got if r["group_id"]} == {"g1", "g2", "g3"}  # g4..g7 are clean
    d1 = next(r for r in got if r["rule"] == "D1")
    assert (d1["broker"], d1["partition"], d1["end_offset"], d1["records_affected"]) == ("1", 0, 150, 30)
    assert d1["event_ts"].hour == 6  # proven by R0 (before the range) and R1
    l3 = {r["kind"]: r for r in got if r["rule"] == "L3"}
    assert {k: (r["base_offset"], r["batch_epoch"]) for k, r in l3.items()} == {
        "batch_epoch_mismatch": (120, 2),
        "batch_epoch_regression": (200, 1),
        "batch_epoch_unknown": (250, 5),
    }
    assert all(f"snapshot={stamp(R1)}" in r["evidence"][0] for r in l3.values())  # the earliest snapshot
    l1 = next(r for r in got if r["rule"] == "L1")
    assert (l1["broker"], l1["topic"], l1["partition"]) == ("3", "t", 0)
    l5 = {r["kind"]: r for r in got if r["rule"] == "L5"}
    assert l5["lineage_truncated"]["partition"] == 1 and l5["lineage_truncated"]["records_affected"] == 50
    assert l5["lineage_rewritten"]["partition"] == 2
    assert next(r for r in got if r["rule"] == "L2")["topic"] == "m"

    # a rerun gives the same rows and ids; a range without events empties nothing else
    run_reports(spark, silver.config, DAY, DAY, reports=["fencing_violations"])
    again = silver.gold("fencing_violations")
    assert [{k: v for k, v in r.items() if k != "run_id"} for r in again] == [
        {k: v for k, v in r.items() if k != "run_id"} for r in got
    ]

