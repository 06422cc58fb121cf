"""The Spark side of the commit pass without Spark: ``run_commit_pass`` turns the cogroup's two Arrow
tables (commits; lineage rows and group records) into the finding rows of ``check_partition_commits``."""

from __future__ import annotations

import random

from test_rules_commit_pass import (
    COMMIT_SCHEMA,
    SIDE_SCHEMA,
    T0,
    TOL,
    _groups,
    _sequence,
    _snaps_and_states,
    _snapshots,
    _table,
)

from epochlib.rules import check_partition_commits
from jobs.reports import _frames as fr
from jobs.reports import commit_pass as cp


def test_run_commit_pass_gives_the_rows_of_check_partition_commits() -> None:
    rng = random.Random(7)
    total = 0
    for _ in range(10):
        gids = ["g0", "g1"]
        commits = _sequence(rng, "g0", 60, T0, 0, end=1500) + _sequence(rng, "g1", 40, T0, 500, end=2500)
        side = _snapshots(rng) + _groups(rng, gids)
        got = cp.run_commit_pass(_table(commits, COMMIT_SCHEMA), _table(side, SIDE_SCHEMA), tolerance_ms=TOL)
        snaps, states = _snaps_and_states(side)
        want = [fr.finding_row(f, group_clients=c) for f, c in
                check_partition_commits(_table(commits, COMMIT_SCHEMA), snaps, states, tolerance_ms=TOL)]  # fmt: skip
        assert got == want
        assert fr.findings_table(got).num_rows == len(want)
        total += len(want)
    assert total > 0


def test_run_commit_pass_folds_kip848_member_records_of_the_side_table() -> None:
    """Issue 13 item 3 through the Spark glue: the side table's record type and member ids reach the rule,
    so one of two KIP-848 members leaving keeps a rewind an error (not ``operator_reset``)."""
    import pyarrow as pa

    side_schema = SIDE_SCHEMA.append(pa.field("g_record_type", pa.string())).append(
        pa.field("g_member_ids", pa.list_(pa.string())))
    lineage = dict(topic="t", partition=0, _k=0, broker="1", snapshot_ts=T0 + 10_000,
                   entries=[{"epoch": 0, "start_offset": 0}, {"epoch": 4, "start_offset": 100}], log_end_offset=900,
                   log_start_offset=0, source="broker=1/snapshot=x/t-0/leader-epoch-checkpoint")  # fmt: skip

    def member(ts, mid, client, tomb=False, lo=0):
        return dict(topic="t", partition=0, _k=1, group_id="g", g_event_ts=ts, g_member_count=1,
                    g_client_ids=[] if tomb else [client], g_is_tombstone=tomb, g_log_offset=lo, g_source="/o/x.log",
                    g_position=lo, g_record_type="consumer_group_member_metadata", g_member_ids=[mid])  # fmt: skip

    side = [lineage, member(T0, "a", "ca", lo=1), member(T0, "b", "cb", lo=2),
            member(T0 + 1500, "a", None, tomb=True, lo=3)]  # fmt: skip
    commits = [dict(topic="t", partition=0, group_id="g", committed_offset=o, leader_epoch=4, ts=T0 + ts,
                    is_tombstone=False, log_offset=lo, source="/o/c.log", position=lo)
               for o, ts, lo in ((600, 1000, 10), (300, 2000, 11))]  # fmt: skip
    rows = cp.run_commit_pass(_table(commits, COMMIT_SCHEMA), _table(side, side_schema), tolerance_ms=TOL)
    s = [(r["kind"], r["severity"], r["group_clients"]) for r in rows if r["rule"].startswith("S")]
    assert s == [("spurious_rewind", "error", ["cb"])]


def test_run_commit_pass_hands_the_topic_ids_creation_times_to_the_pass() -> None:
    """The Spark glue passes the metadata log's creation times on: commits before the creation of the only
    rounds' topic id (their own incarnation's snapshots missing) are not judged by its lineage."""
    lineage = [dict(topic="t", partition=0, _k=0, broker=str(b), snapshot_ts=T0 + 6 * 3_600_000, topic_id="B",
                    entries=[{"epoch": 0, "start_offset": 0}], log_end_offset=60, log_start_offset=0,
                    source=f"broker={b}/snapshot=x/t-0/leader-epoch-checkpoint") for b in (1, 2)]  # fmt: skip
    commits = [dict(topic="t", partition=0, group_id="g", committed_offset=1000 + j, leader_epoch=5, ts=T0 + j * 60_000,
                    is_tombstone=False, log_offset=j, source="/o/c.log", position=j) for j in range(10)]  # fmt: skip
    args = (_table(commits, COMMIT_SCHEMA), _table(lineage, SIDE_SCHEMA))
    assert {r["kind"] for r in cp.run_commit_pass(*args, tolerance_ms=TOL)} == {"commit_unknown_epoch"}
    assert cp.run_commit_pass(*args, tolerance_ms=TOL, topic_created={"B": T0 + 3_600_000}) == []
