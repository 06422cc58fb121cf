"""Input conversion (from_row), timestamps and finding ids."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlib.lineage import EpochEntry
from epochlib.rules import (
    SEVERITY,
    BatchHeader,
    Commit,
    Finding,
    GroupState,
    MetadataObservation,
    ReplicaSnapshot,
    finding_id,
    observations_from_arrow,
    to_ms,
)


def test_to_ms_accepts_the_shapes_spark_and_arrow_hand_over():
    when = dt.datetime(2024, 10, 1, 0, 0, 1, 500000, tzinfo=dt.timezone.utc)
    ms = 1727740801500
    assert to_ms(when) == ms
    assert to_ms(when.replace(tzinfo=None)) == ms  # naive = UTC
    assert to_ms(ms) == ms
    assert to_ms("2024-10-01T00:00:01.5Z") == ms
    assert to_ms(str(ms)) == ms
    assert to_ms(np.datetime64("2024-10-01T00:00:01.500")) == ms
    assert to_ms(None) is None and to_ms(float("nan")) is None
    with pytest.raises(TypeError):
        to_ms(True)


def test_commit_from_row_and_defaults():
    c = Commit.from_row(
        {
            "group_id": "g",
            "topic": "t",
            "partition": 3,
            "committed_offset": 10,
            "leader_epoch": None,
            "commit_ts": dt.datetime(1970, 1, 1, 0, 0, 1),
            "event_ts": None,
            "is_tombstone": None,
            "txn_state": None,
            "log_offset": 7,
            "source": "/o/00.log",
            "position": 4096,
            "extra": "ignored",
        }
    )
    assert c.epoch == -1 and c.ts == 1000 and c.is_live and not c.is_tombstone
    assert c.pointer() == "offsets:/o/00.log@byte 4096 offset 7"


def test_pointers_name_their_unit_and_never_say_offset_unknown():
    """Issue 13 item 5: one explicit form per unit: bytes in segments, lines in text, rows in Parquet."""
    from epochlib.rules import BatchHeader, GroupState, unit_pointer

    def ptr(src, pos, lo=None):
        return Commit("g", "t", 0, 1, source=src, position=pos, log_offset=lo).pointer()

    assert ptr("/o/__consumer_offsets-3/00000000000000000000.log", 512, 9) == (
        "offsets:/o/__consumer_offsets-3/00000000000000000000.log@byte 512 offset 9")
    assert ptr("/o/dump.txt", 12, 40) == "offsets:/o/dump.txt line 12 offset 40"  # kafka-dump-log text
    assert ptr("/o/console.txt", 3) == "offsets:/o/console.txt line 3"  # a console dump: no "offset ?"
    assert ptr("/o/d.jsonl", 7, 2) == "offsets:/o/d.jsonl line 7 offset 2"
    assert ptr("/o/D.PARQUET", 0, 5) == "offsets:/o/D.PARQUET row 0 offset 5"
    g = GroupState("g", 0, source="/o/console.txt", position=4)
    assert g.pointer() == "offsets:/o/console.txt line 4 (group metadata)"
    b = BatchHeader(broker="1", topic="t", partition=0, base_offset=10, last_offset=12, partition_leader_epoch=1,
                    source="/l/00000000000000000000.log", position=61)
    assert b.pointer() == "segment:/l/00000000000000000000.log@byte 61 offset 10"
    assert unit_pointer(None, None) == "?@byte ?"
    assert not Commit("g", "t", 0, 1, txn_state="aborted").is_live
    assert Commit("g", "t", 0, 1, txn_state="committed").is_live


def test_snapshot_from_row_entries_and_pointer():
    s = ReplicaSnapshot.from_row(
        {
            "broker": 1,
            "snapshot_ts": 5,
            "topic": "t",
            "partition": 0,
            "topic_id": None,
            "entries": [{"epoch": 0, "start_offset": 0}, {"epoch": 2, "start_offset": 40}],
            "log_end_offset": 50,
            "source": "broker=1/snapshot=20241001T000000Z/t-0/leader-epoch-checkpoint",
        }
    )
    assert s.broker == "1" and s.entries == (EpochEntry(0, 0), EpochEntry(2, 40))
    assert s.pointer(2).endswith("leader-epoch-checkpoint line 4")
    assert s.repaired_cache().entries == s.entries


def test_other_rows():
    b = BatchHeader.from_row(
        {
            "broker": 2,
            "topic": "t",
            "partition": 0,
            "base_offset": 5,
            "magic": None,
            "partition_leader_epoch": 3,
            "max_timestamp": 9,
        }
    )
    assert b.magic == 2 and b.max_timestamp == 9
    o = MetadataObservation.from_row(
        {
            "capture_ts": 3,
            "client_id": "c",
            "broker": "b:9092",
            "topic": "t",
            "partition": 0,
            "leader_epoch": None,
            "topic_id": "AAAAAAAAAAAAAAAAAAAAAA",
            "replicas": [1, 2],
            "source": "cap.jsonl",
            "position": 12,
        }
    )
    assert o.epoch == -1 and o.topic_id is None and o.replicas == (1, 2)
    assert o.pointer() == "capture:cap.jsonl line 12"
    g = GroupState.from_row(
        {
            "group_id": "g",
            "event_ts": 1,
            "member_count": None,
            "members": [{"client_id": "c1"}, {"client_id": "c2"}],
        }
    )
    assert g.member_count == 2 and g.client_ids == ("c1", "c2") and not g.is_empty
    assert GroupState("g", 1, is_tombstone=True).is_empty


def test_finding_id_is_deterministic_and_ignores_wording_and_correlation():
    f = Finding(
        "F2",
        "commit_beyond_epoch_end",
        severity="error",
        event_ts=1000,
        topic="t",
        partition=0,
        group_id="g",
        numbers={"b": 2, "a": 1},
        evidence=("x",),
        detail="one",
    )
    same = Finding(
        "F2",
        "commit_beyond_epoch_end",
        severity="warning",
        event_ts=1000,
        topic="t",
        partition=0,
        group_id="g",
        numbers={"a": 1, "b": 2},
        evidence=("x",),
        detail="two",
    )
    assert finding_id(f) == finding_id(same) == f.id
    assert len(f.id) == 32 and int(f.id, 16) >= 0
    assert f.with_correlation("abc", "stale metadata").id == f.id
    assert (
        finding_id(
            Finding(
                "F2",
                "commit_beyond_epoch_end",
                event_ts=1001,
                topic="t",
                partition=0,
                group_id="g",
                numbers={"a": 1, "b": 2},
                evidence=("x",),
            )
        )
        != f.id
    )
    assert hash(f) == hash(same)
    row = f.to_row()
    assert row["finding_id"] == f.id and row["a"] == 1 and row["evidence"] == ["x"]
    assert Finding("S1e", "spurious_rewind", event_ts=0).to_row()["classification"] == "spurious_rewind"


def test_severity_comes_from_the_kind_unless_a_rule_overrides_it():
    assert Finding("S1e", "spurious_rewind", event_ts=0).severity == SEVERITY["spurious_rewind"] == "error"
    assert Finding("F4", "commit_epoch_dropped", event_ts=0).severity == "info"
    assert Finding("M2", "broker_served_stale", severity="error", event_ts=0).severity == "error"
    with pytest.raises(ValueError, match="no severity"):
        Finding("X1", "not_a_kind", event_ts=0)
    with pytest.raises(TypeError):
        Finding("S1e", "spurious_rewind", "error", 0)  # type: ignore[misc]  # severity, event_ts: keyword only


#: The ``metadata_observations`` columns the rules read, as Arrow types (times as epoch ms).
OBS_ARROW = pa.schema([
    ("capture_ts", pa.int64()), ("client_id", pa.string()), ("broker", pa.string()), ("api_version", pa.int16()),
    ("correlation_id", pa.int32()), ("topic", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()),
    ("leader_id", pa.int32()), ("leader_epoch", pa.int32()), ("replicas", pa.list_(pa.int32())),
    ("isr", pa.list_(pa.int32())), ("topic_error", pa.int16()), ("partition_error", pa.int16()),
    ("metadata_token", pa.int64()), ("source", pa.string()), ("position", pa.int64()), ("event_ts", pa.int64()),
])  # fmt: skip
_opt = st.one_of(st.none(), st.integers(-3, 2**31 - 1))


@settings(max_examples=200, deadline=None)
@given(st.lists(st.fixed_dictionaries({
    "capture_ts": st.one_of(st.none(), st.integers(0, 2**45)), "event_ts": st.one_of(st.none(), st.integers(0, 2**45)),
    "client_id": st.one_of(st.none(), st.text(max_size=4)), "broker": st.one_of(st.none(), st.text(max_size=4)),
    "topic": st.one_of(st.none(), st.text(max_size=4)),
    "topic_id": st.one_of(st.none(), st.sampled_from(["", "AAAAAAAAAAAAAAAAAAAAAA", "AQIDBAUGBwgJCgsMDQ4PEA"]),
                          st.just("00000000-0000-0000-0000-000000000000")),
    "partition": st.integers(0, 2**31 - 1), "leader_epoch": _opt, "api_version": st.one_of(st.none(), st.integers(0, 13)),
    "correlation_id": _opt, "leader_id": _opt,
    "replicas": st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3)),
    "isr": st.one_of(st.none(), st.lists(st.integers(0, 9), max_size=3)),
    "topic_error": st.one_of(st.none(), st.integers(-1, 100)), "partition_error": st.one_of(st.none(), st.integers(-1, 100)),
    "metadata_token": st.one_of(st.none(), st.integers(0, 2**62)), "source": st.one_of(st.none(), st.text(max_size=6)),
    "position": st.one_of(st.none(), st.integers(0, 2**40)),
}), max_size=12), st.booleans())
def test_observations_from_arrow_equal_from_row(rows, drop_event_ts) -> None:
    """The column-at-a-time constructor gives exactly ``from_row``'s values (ids normalised, times coalesced)."""
    table = pa.Table.from_pylist(rows, schema=OBS_ARROW)
    if drop_event_ts:
        table = table.drop_columns(["event_ts", "metadata_token"])
    assert observations_from_arrow(table) == [MetadataObservation.from_row(r) for r in table.to_pylist()]
    # a timestamp column takes the row path and still agrees
    as_ts = table.set_column(0, "capture_ts", table.column("capture_ts").cast(pa.timestamp("ms", tz="UTC")))
    assert observations_from_arrow(as_ts) == [MetadataObservation.from_row(r) for r in as_ts.to_pylist()]
