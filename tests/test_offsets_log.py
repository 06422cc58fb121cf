"""Replaying __consumer_offsets with transaction markers applied (spec §1.6)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from epochlib.coordinator import encode_offset_commit_key, encode_offset_commit_value
from epochlib.offsets_log import OffsetsLogRecord, replay_segment
from epochlib.records import BadBatch, NewRecord, encode_batch, encode_control_batch

TS = 1_700_000_000_000


def _commit(offset: int, committed: int, *, pid: int = -1, epoch: int = 3) -> bytes:
    rec = NewRecord(encode_offset_commit_key("g", "t", 0),
                    encode_offset_commit_value(committed, leader_epoch=epoch, commit_timestamp=TS + offset), TS + offset)
    return encode_batch([rec], base_offset=offset, partition_leader_epoch=5, producer_id=pid, producer_epoch=0 if pid >= 0 else -1,
                        is_transactional=pid >= 0)


def _marker(offset: int, pid: int, marker: str) -> bytes:
    return encode_control_batch(marker, base_offset=offset, partition_leader_epoch=5, producer_id=pid,
                                producer_epoch=0, coordinator_epoch=1, timestamp=TS + offset)


def test_markers_decide_which_transactional_commits_count() -> None:
    seg = b"".join([
        _commit(0, 100),            # plain: applies at once
        _commit(1, 200, pid=7),     # committed below
        _commit(2, 300, pid=8),     # aborted below
        _commit(3, 400, pid=9),     # never closed: open
        _marker(4, 7, "COMMIT"),
        _marker(5, 8, "ABORT"),
        b"\x00" * 7,                # a torn tail
    ])
    out = list(replay_segment(seg, base_position=1000))
    commits = [(r.record.offset, r.txn_state) for r in out if isinstance(r, OffsetsLogRecord) and r.record]
    assert commits == [(100, "none"), (200, "committed"), (300, "aborted"), (400, "open")]
    markers = [r.control_type for r in out if isinstance(r, OffsetsLogRecord) and r.control_type]
    assert markers == ["COMMIT", "ABORT"]
    bad = [r for r in out if isinstance(r, BadBatch)]
    assert len(bad) == 1 and "torn" in bad[0].reason and bad[0].position == 1000 + len(seg) - 7
    first = out[0]
    assert (first.position, first.partition_leader_epoch, first.record.leader_epoch) == (1000, 5, 3)


def test_a_marker_only_closes_its_own_producer() -> None:
    seg = _commit(0, 10, pid=1) + _marker(1, 2, "COMMIT")
    states = [r.txn_state for r in replay_segment(seg) if isinstance(r, OffsetsLogRecord) and r.record]
    assert states == ["open"]


def test_undecodable_value_is_an_error_record_not_an_exception() -> None:
    seg = encode_batch([NewRecord(encode_offset_commit_key("g", "t", 0), b"\x00\x03\x01", TS)], base_offset=0)
    (rec,) = list(replay_segment(seg))
    assert rec.record is None and rec.error and rec.txn_state == "none"


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_replay_never_raises(data: bytes) -> None:
    list(replay_segment(data))
