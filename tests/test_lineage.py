"""LeaderEpochCache: the scenarios of Kafka's LeaderEpochFileCacheTest, restated, plus properties."""

from __future__ import annotations

from itertools import pairwise

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlib.lineage import EpochEntry, LeaderEpochCache, as_entry

UNDEF = (-1, -1)


def cache_of(*pairs: tuple[int, int]) -> LeaderEpochCache:
    c = LeaderEpochCache()
    for e, s in pairs:
        c.assign(e, s)
    return c


def E(*pairs: tuple[int, int]) -> tuple[EpochEntry, ...]:
    return tuple(EpochEntry(e, s) for e, s in pairs)


# --- assign ----------------------------------------------------------------------------------------


def test_assign_adds_entry_and_latest_epoch_answers_log_end():
    c = cache_of((2, 10))
    assert c.latest_epoch == 2
    assert c.entries == E((2, 10))
    assert c.end_offset_for(2, 11) == (2, 11)


def test_same_epoch_later_offset_is_ignored():
    c = cache_of((2, 9))
    assert c.assign(2, 10) is False
    assert c.entries == E((2, 9))


def test_same_epoch_same_offset_is_ignored():
    c = cache_of((2, 6))
    assert c.assign(2, 6) is False
    assert len(c) == 1


def test_higher_epoch_same_offset_replaces_empty_epoch():
    # a leader's epoch in which nothing was written is evicted by the next leader at the same LEO
    assert cache_of((2, 9), (3, 9)).entries == E((3, 9))


def test_lower_epoch_evicts_higher_ones():
    c = cache_of((1, 5), (2, 6), (1, 7))
    assert c.latest_epoch == 1
    assert c.entries == E((1, 7))
    assert c.end_offset_for(1, 8) == (1, 8)
    assert c.end_offset_for(2, 8) == UNDEF


def test_lower_offset_evicts_later_entries():
    assert cache_of((2, 6), (3, 5)).entries == E((3, 5))


def test_same_epoch_earlier_offset_truncates_and_replaces():
    c = cache_of((5, 11), (6, 12), (7, 13), (7, 12))
    assert c.entries == E((5, 11), (7, 12))
    assert c.end_offset_for(5, 0) == (5, 12)
    assert c.end_offset_for(6, 0) == (5, 12)


@pytest.mark.parametrize("epoch,offset", [(-1, 0), (0, -1), (-5, -5)])
def test_assign_rejects_negative(epoch, offset):
    with pytest.raises(ValueError):
        LeaderEpochCache().assign(epoch, offset)


def test_constructor_loads_like_the_broker_reads_a_checkpoint():
    # the broker assigns checkpoint lines one by one: a non-monotonic file is normalised
    assert LeaderEpochCache([(0, 0), (3, 10), (2, 20)]).entries == E((0, 0), (2, 20))
    assert LeaderEpochCache([{"epoch": 1, "start_offset": 4}]).entries == E((1, 4))


def test_as_entry_accepts_rows_dicts_tuples():
    class Row:
        epoch = 3
        start_offset = 9

    assert as_entry(Row()) == EpochEntry(3, 9)
    assert as_entry({"epoch": 3, "start_offset": 9}) == EpochEntry(3, 9)
    assert as_entry([3, 9]) == EpochEntry(3, 9)


# --- end_offset_for --------------------------------------------------------------------------------


def test_undefined_epoch_answers_undefined():
    assert cache_of((2, 11), (3, 12)).end_offset_for(-1, 0) == UNDEF
    assert LeaderEpochCache().end_offset_for(-1, 73) == UNDEF


def test_empty_cache_answers_undefined():
    assert LeaderEpochCache().end_offset_for(0, 0) == UNDEF
    assert LeaderEpochCache().end_offset_for(7, 0) == UNDEF


def test_epoch_older_than_every_entry_answers_itself_and_first_start():
    assert cache_of((5, 11), (6, 12), (7, 13)).end_offset_for(4, 0) == (4, 11)


def test_previous_epoch_ends_where_next_starts():
    c = cache_of((1, 11), (1, 12), (2, 13), (2, 14), (3, 15), (3, 16))
    assert c.end_offset_for(2, 17) == (2, 15)


def test_missing_epoch_answers_largest_lower_epoch():
    c = cache_of((0, 10), (2, 13), (4, 17))
    assert c.end_offset_for(1, 0) == (0, 13)
    assert c.end_offset_for(2, 0) == (2, 17)
    assert c.end_offset_for(3, 0) == (2, 17)


def test_epoch_above_latest_is_undefined():
    assert cache_of((2, 100)).end_offset_for(3, 100) == UNDEF


def test_epochs_not_starting_at_zero():
    c = cache_of((2, 6))
    assert c.end_offset_for(2, 7) == (2, 7)
    assert c.entries == E((2, 6))


def test_tracks_epochs_as_leaders_change():
    c = cache_of((0, 0), (1, 0))
    assert c.entries == E((1, 0))
    assert c.end_offset_for(1, 0) == (1, 0)
    assert c.end_offset_for(0, 0) == (0, 0)  # older than every entry: (itself, head start)
    assert c.end_offset_for(1, 5) == (1, 5)
    c.assign(2, 5)
    assert c.end_offset_for(2, 10) == (2, 10)
    assert c.end_offset_for(1, 10) == (1, 5)
    assert c.end_offset_for(0, 10) == (0, 0)


def test_tracks_epochs_as_follower_receives_batches():
    c = LeaderEpochCache()
    for off in range(3):
        c.assign(0, off)
    assert c.end_offset_for(0, 3) == (0, 3)
    for off in range(3, 6):
        c.assign(1, off)
    for off in range(6, 9):
        c.assign(2, off)
    assert c.entries == E((0, 0), (1, 3), (2, 6))
    assert c.end_offset_for(2, 9) == (2, 9)
    assert c.end_offset_for(0, 9) == (0, 3)
    assert c.end_offset_for(1, 9) == (1, 6)


# --- truncations -----------------------------------------------------------------------------------


def base() -> LeaderEpochCache:
    return cache_of((2, 6), (3, 8), (4, 11))


def test_truncate_from_end_on_boundary_drops_that_epoch():
    c = base()
    removed = c.truncate_from_end(8)
    assert c.entries == E((2, 6))
    assert removed == [EpochEntry(4, 11), EpochEntry(3, 8)]


def test_truncate_from_end_between_boundaries():
    c = base()
    c.truncate_from_end(9)
    assert c.latest_epoch == 3
    assert c.entries == E((2, 6), (3, 8))


def test_truncate_from_end_beyond_latest_start_is_a_no_op():
    c = base()
    assert c.truncate_from_end(12) == []
    assert c.entries == base().entries


def test_truncate_from_end_undefined_is_a_no_op():
    c = base()
    c.truncate_from_end(-1)
    assert len(c) == 3


def test_truncate_from_start_keeps_covering_epoch():
    c = base()
    c.truncate_from_start(8)
    assert c.entries == E((3, 8), (4, 11))


def test_truncate_from_start_too_early_is_a_no_op():
    c = base()
    assert c.truncate_from_start(1) == []
    assert c.entries == base().entries


def test_truncate_from_start_at_first_offset_keeps_everything():
    c = base()
    c.truncate_from_start(6)
    assert c.entries == base().entries


def test_truncate_from_start_at_latest_start():
    c = base()
    c.truncate_from_start(11)
    assert c.entries == E((4, 11))


def test_truncate_from_start_between_boundaries_moves_start():
    c = base()
    c.truncate_from_start(9)
    assert c.entries == E((3, 9), (4, 11))


def test_truncate_from_start_between_first_two():
    c = cache_of((0, 0), (1, 7), (2, 10))
    c.truncate_from_start(5)
    assert c.entries == E((0, 5), (1, 7), (2, 10))


def test_truncate_from_start_past_everything_keeps_latest_epoch():
    c = base()
    c.truncate_from_start(15)
    assert c.entries == E((4, 15))


def test_truncate_from_start_undefined_is_a_no_op():
    c = base()
    c.truncate_from_start(-1)
    assert len(c) == 3


def test_truncations_on_empty_cache():
    c = LeaderEpochCache()
    assert c.truncate_from_start(7) == []
    assert c.truncate_from_end(7) == []
    assert c.latest_epoch is None and c.earliest_entry is None and c.latest_entry is None


def test_both_truncations():
    c = base()
    c.truncate_from_end(11)
    c.truncate_from_start(8)
    assert c.entries == E((3, 8))


def test_clear():
    c = base()
    c.clear()
    assert len(c) == 0


# --- epoch_for_offset ------------------------------------------------------------------------------


def test_epoch_for_offset():
    c = cache_of((0, 10), (1, 20), (5, 30))
    assert c.epoch_for_offset(25) == 1
    assert c.epoch_for_offset(20) == 1
    assert c.epoch_for_offset(30) == 5
    assert c.epoch_for_offset(50) == 5
    assert c.epoch_for_offset(5) is None
    assert c.epoch_for_offset(10) == 0
    assert c.epoch_for_offset(19) == 0
    assert LeaderEpochCache().epoch_for_offset(0) is None


# --- repaired --------------------------------------------------------------------------------------


def test_repaired_applies_end_then_start_and_leaves_original():
    c = cache_of((0, 0), (2, 100), (5, 200), (7, 300))
    r = c.repaired(log_end_offset=250, log_start_offset=150)
    assert r.entries == E((2, 150), (5, 200))
    assert c.entries == E((0, 0), (2, 100), (5, 200), (7, 300))


def test_repaired_with_unknown_values_changes_nothing():
    c = base()
    assert c.repaired(None, None) == c
    assert c.repaired(9, None).entries == E((2, 6), (3, 8))
    assert c.repaired(None, 9).entries == E((3, 9), (4, 11))


def test_repaired_when_log_start_equals_log_end_keeps_one_entry():
    # empty log after retention: LEO 9 removes (4,11); start 9 rewrites the covering epoch 3
    assert base().repaired(9, 9).entries == E((3, 9))


def test_copy_is_independent_and_equality():
    c = base()
    d = c.copy()
    d.assign(9, 50)
    assert c != d and c == base()
    assert "LeaderEpochCache([(2, 6)" in repr(c)
    assert [e.epoch for e in c] == [2, 3, 4]
    assert c.entry_for_epoch(3) == EpochEntry(3, 8) and c.entry_for_epoch(9) is None


# --- properties ------------------------------------------------------------------------------------

ops = st.lists(
    st.one_of(
        st.tuples(st.just("assign"), st.integers(0, 12), st.integers(0, 60)),
        st.tuples(st.just("end"), st.integers(-1, 60), st.just(0)),
        st.tuples(st.just("start"), st.integers(-1, 60), st.just(0)),
    ),
    max_size=40,
)


def apply(c: LeaderEpochCache, op: tuple[str, int, int]) -> None:
    kind, a, b = op
    if kind == "assign":
        c.assign(a, b)
    elif kind == "end":
        c.truncate_from_end(a)
    else:
        c.truncate_from_start(a)


def strictly_increasing(entries) -> bool:
    return all(x.epoch < y.epoch and x.start_offset < y.start_offset for x, y in pairwise(entries))


def brute_end_offset_for(entries, epoch: int, leo: int) -> tuple[int, int]:
    """A model of OffsetsForLeaderEpoch written from the spec's five cases, over a plain dict."""
    by_epoch = {e.epoch: e.start_offset for e in entries}
    if epoch == -1:
        return UNDEF
    if by_epoch and max(by_epoch) == epoch:
        return (epoch, leo)
    higher = sorted(k for k in by_epoch if k > epoch)
    if not higher:
        return UNDEF
    lower = [k for k in by_epoch if k <= epoch]
    if not lower:
        return (epoch, by_epoch[higher[0]])
    return (max(lower), by_epoch[higher[0]])


def brute_epoch_for_offset(entries, offset: int) -> int | None:
    cands = [e for e in entries if e.start_offset <= offset]
    return cands[-1].epoch if cands else None


@settings(max_examples=200, deadline=None)
@given(ops)
def test_entries_stay_strictly_increasing(operations):
    c = LeaderEpochCache()
    for op in operations:
        apply(c, op)
        assert strictly_increasing(c.entries)


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(-1, 14), st.integers(0, 80), st.integers(0, 70))
def test_end_offset_for_and_epoch_for_offset_agree_with_model(operations, epoch, leo, offset):
    c = LeaderEpochCache()
    for op in operations:
        apply(c, op)
    assert c.end_offset_for(epoch, leo) == brute_end_offset_for(c.entries, epoch, leo)
    assert c.epoch_for_offset(offset) == brute_epoch_for_offset(c.entries, offset)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 12), st.integers(0, 60)), max_size=20))
def test_loading_a_well_formed_checkpoint_is_identity(pairs):
    c = LeaderEpochCache(pairs)
    assert LeaderEpochCache(c.entries) == c


@settings(max_examples=200, deadline=None)
@given(ops, st.integers(0, 70), st.integers(0, 70))
def test_repaired_stays_within_log_bounds(operations, leo, start):
    c = LeaderEpochCache()
    for op in operations:
        apply(c, op)
    r = c.repaired(leo, start)
    assert strictly_increasing(r.entries)
    if r.entries and c.entries and r.entries[0].start_offset < start:
        pytest.fail("repaired head precedes log start")
    # every entry that starts below the new LEO and at/after the log start keeps its epoch mapping
    for e in c.entries:
        if start < e.start_offset < leo:
            assert r.epoch_for_offset(e.start_offset) == e.epoch
