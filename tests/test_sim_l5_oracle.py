"""The simulator's L5 oracle (``epochlib.sim.engine.lineage_change``) on plain lineages, and its agreement
with the audit's rule (``check_lineage_history``) on the same snapshots.

The first case is accuracy-3's ``orders``-3 on broker 2: the follower that kept its divergent suffix
(D1) truncated it to 97680 once it resolved, caught up from the unclean leader's epoch 8, and retention
moved the log start to 98000 before the next snapshot. The old lineage's epochs are all below the new
head's, but epoch 7 started at 103095, above the new log start: retention cannot have removed it.
"""

from __future__ import annotations

import pytest

from epochlib.rules import ReplicaSnapshot, check_lineage_history
from epochlib.sim.engine import lineage_change

DIVERGENT = ((6, 72000), (7, 103095))  # broker 2 at 08:00:03, LEO 121507, log start 72000
CAUGHT_UP = ((8, 98000),)  # broker 2 at 10:00:13, log start 98000 (LEO 162713)


def snap(entries, ts, ls, leo=None) -> ReplicaSnapshot:
    src = "/ld/broker=2/snapshot=20240630T000000Z/orders-3/leader-epoch-checkpoint"
    return ReplicaSnapshot(broker="2", snapshot_ts=ts, topic="orders", partition=3, entries=entries,
                           log_start_offset=ls, log_end_offset=leo, source=src)  # fmt: skip


def test_truncation_then_catch_up_past_the_retention_point_is_a_truncation():
    # before the fix the oracle read every vanished epoch below the new head epoch (8) as head trimming
    assert lineage_change(DIVERGENT, 121507, CAUGHT_UP) == ([], [(6, 72000), (7, 103095)])


def test_the_audit_reports_the_same_snapshots_as_truncated():
    # what the audit sees: log starts known, log ends unknown (no segments written for orders-3)
    (f,) = check_lineage_history([snap(DIVERGENT, 1, 72000), snap(CAUGHT_UP, 2, 98000)])
    assert (f.rule, f.kind, f.severity) == ("L5", "lineage_truncated", "info")
    assert f.numbers["truncation_point"] == 98000  # the real point 97680 lies below the new log start


@pytest.mark.parametrize(
    "new,ls,expected",
    [
        (((6, 98000), (7, 103095)), 98000, ([], [])),  # head trimmed inside epoch 6
        (((7, 110000),), 110000, ([], [])),  # epoch 6 wholly below the new log start
        (((7, 115000), (8, 125000)), 115000, ([], [])),  # trimmed, then a clean election past the old LEO
        (((8, 125000),), 125000, ([], [])),  # retention past the whole old log
        (((6, 72000), (8, 110000)), 72000, ([], [(7, 103095)])),  # plain tail truncation
        (((8, 98000),), 98000, ([], [(6, 72000), (7, 103095)])),  # truncated, caught up, trimmed
    ],
)
def test_oracle_and_rule_agree(new, ls, expected):
    assert lineage_change(DIVERGENT, 121507, new) == expected
    kinds = [f.kind for f in check_lineage_history([snap(DIVERGENT, 1, 72000), snap(new, 2, ls)])]
    assert kinds == (["lineage_truncated"] if expected[1] else [])
    # the same with both log ends known (segments written)
    kinds = [f.kind for f in check_lineage_history([snap(DIVERGENT, 1, 72000, 121507), snap(new, 2, ls, 130000)])]
    assert kinds == (["lineage_truncated"] if expected[1] else [])


def test_interior_entry_vanishing_is_a_rewrite_for_both():
    prev = ((5, 1000), (6, 72000), (7, 103095))
    new = ((5, 1000), (7, 103095))
    rewritten, truncated = lineage_change(prev, 121507, new)
    assert rewritten == ["interior entry (6, 72000) vanished"] and truncated == []
    (f,) = check_lineage_history([snap(prev, 1, 1000), snap(new, 2, 1000)])
    assert f.kind == "lineage_rewritten"


def test_identical_lineages_are_no_change():
    assert lineage_change(DIVERGENT, 121507, DIVERGENT) == ([], [])
