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
