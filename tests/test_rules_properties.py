"""Properties: legal broker histories never look rewritten; rule outputs are deterministic."""

from __future__ import annotations

from itertools import pairwise

from hypothesis import given, settings
from hypothesis import strategies as st

from epochlib.lineage import LeaderEpochCache
from epochlib.rules import Commit, ReplicaSnapshot, ResetContext, check_lineage_history, check_offset_resets

op = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 3), st.integers(1, 20)),  # epoch bump, records
    st.tuples(st.just("truncate"), st.integers(0, 30), st.just(0)),  # records cut from the end
    st.tuples(st.just("retain"), st.integers(0, 30), st.just(0)),  # records dropped at the start
    st.tuples(st.just("elect"), st.integers(1, 2), st.just(0)),  # new leader, nothing written yet
    st.tuples(st.just("snapshot"), st.just(0), st.just(0)),
)


@settings(max_examples=200, deadline=None)
@given(st.lists(op, max_size=40))
def test_legal_replica_history_is_never_rewritten(ops):
    """A replica that only appends at its log end, truncates its tail and moves its log start forward
    (what a broker does) yields no lineage_rewritten, and lineage_truncated only after a truncation."""
    cache, leo, ls, epoch = LeaderEpochCache(), 0, 0, 0
    snaps, truncated_since = [], []
    truncated = False
    for kind, a, b in ops:
        if kind == "append":
            epoch += a
            cache.assign(epoch, leo)
            leo += b
        elif kind == "elect":
            epoch += a
            cache.assign(epoch, leo)
        elif kind == "truncate":
            new_leo = max(ls, leo - a)
            if new_leo < leo:
                cache.truncate_from_end(new_leo)
                truncated = True
                if not cache.entries or cache.entries[-1].epoch < epoch:
                    # the current epoch's start was cut: a broker truncates that far only to follow a new
                    # leader, so what it writes next carries a higher epoch (an epoch's start never moves back)
                    epoch += 1
            leo = new_leo
        elif kind == "retain":
            ls = min(leo, ls + a)
            cache.truncate_from_start(ls)
        else:
            snaps.append(
                ReplicaSnapshot(
                    broker="1",
                    snapshot_ts=len(snaps),
                    topic="t",
                    partition=0,
                    entries=cache.entries,
                    log_end_offset=leo,
                    log_start_offset=ls,
                )
            )
            truncated_since.append(truncated)
            truncated = False
    findings = check_lineage_history(snaps)
    assert all(f.kind == "lineage_truncated" for f in findings), findings
    for f in findings:
        assert truncated_since[f.event_ts], (f, truncated_since)


moves = st.lists(st.tuples(st.integers(0, 500), st.sampled_from([-1, 0, 1, 2])), min_size=0, max_size=30)


@settings(max_examples=200, deadline=None)
@given(moves)
def test_every_rewind_gets_exactly_one_classification_and_ids_are_stable(seq):
    commits = [
        Commit("g", "t", 0, o, e, commit_ts=i * 1000, event_ts=i * 1000, log_offset=i)
        for i, (o, e) in enumerate(seq)
    ]
    ctx = ResetContext(
        snapshots=[ReplicaSnapshot("1", 5000, "t", 0, entries=((0, 0), (2, 100)), log_end_offset=400)]
    )
    rewinds = sum(1 for (a, _), (b, _) in pairwise(seq) if b < a)
    fs = check_offset_resets(commits, ctx)
    assert sum(1 for f in fs if f.rule.startswith("S1")) == rewinds
    assert [f.id for f in fs] == [f.id for f in check_offset_resets(commits, ctx)]
