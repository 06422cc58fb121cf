"""The transactional commits' ``txn_state`` resolved with numpy in one task (issue 16, thirteenth round): the state a
brute-force reading of the rule gives, and the rows Spark's window (:func:`jobs.ingest.offsets.transactional_commits`)
gives, markers in other ranges and null keys included."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.ingest._rows import OFFSETS_WORK
from jobs.ingest.commit_files import transactional_commits_arrow

_STATE = {"COMMIT": "committed", "ABORT": "aborted"}

rows_st = st.lists(
    st.fixed_dictionaries({
        "broker": st.sampled_from([None, "1", "2"]),
        "log_partition": st.sampled_from([None, 0, 7]),
        "producer_id": st.sampled_from([None, 5, 6]),
        "row_kind": st.sampled_from(["commit", "commit", "marker", "marker", "group"]),
        "is_transactional": st.sampled_from([None, True, True, False]),
        "control_type": st.sampled_from([None, "COMMIT", "ABORT", "UNKNOWN"]),
        "commit_ms": st.integers(0, 10**12),
    }),
    max_size=40,
)


def _side(rows: list[dict], *, null_first_offset: bool, shuffle: list[int]) -> pa.Table:
    """Rows with distinct log offsets (the first one's null when asked), in the order ``shuffle`` gives."""
    out = []
    for i, r in enumerate(rows):
        out.append({**r, "log_offset": None if (i == 0 and null_first_offset) else 100 + 3 * i,
                    "group_id": f"g{i}", "topic": "t", "partition": i % 3, "committed_offset": i, "record_ms": 1})
    out = [out[i] for i in shuffle if i < len(out)] + [o for j, o in enumerate(out) if j not in set(shuffle)]
    return pa.Table.from_pylist(out, schema=OFFSETS_WORK)


def _brute(side: pa.Table) -> dict[str, str]:
    """Group id -> state, straight from the rule: the nearest later marker with a control type, same producer,
    log partition and replica; a null offset before every other."""
    rows = [r for r in side.to_pylist() if r["row_kind"] in ("commit", "marker") and r["is_transactional"]]
    low = -(1 << 63)
    out = {}
    for c in rows:
        if c["row_kind"] != "commit":
            continue
        key = (c["broker"], c["log_partition"], c["producer_id"])
        o = low if c["log_offset"] is None else c["log_offset"]
        later = [m for m in rows if m["row_kind"] == "marker" and m["control_type"] is not None
                 and (m["broker"], m["log_partition"], m["producer_id"]) == key
                 and (low if m["log_offset"] is None else m["log_offset"]) > o]
        nearest = min(later, key=lambda m: low if m["log_offset"] is None else m["log_offset"], default=None)
        out[c["group_id"]] = "open" if nearest is None else _STATE.get(nearest["control_type"], "open")
    return out


@settings(max_examples=300, deadline=None)
@given(rows=rows_st, null_first=st.booleans(), shuffle=st.permutations(range(40)))
def test_each_transactional_commit_takes_the_next_markers_state(rows, null_first, shuffle):
    side = _side(rows, null_first_offset=null_first, shuffle=shuffle)
    got = transactional_commits_arrow(side)
    assert dict(zip(got.column("group_id").to_pylist(), got.column("txn_state").to_pylist(), strict=True)) == _brute(side)


def test_commits_keep_their_columns_and_times():
    side = pa.Table.from_pylist([
        {"row_kind": "commit", "is_transactional": True, "broker": "1", "log_partition": 3, "producer_id": 9,
         "log_offset": 10, "group_id": "g", "topic": "t", "partition": 2, "committed_offset": 42, "leader_epoch": 4,
         "commit_ms": 1_700_000_000_000, "record_ms": 1_700_000_000_500, "source": "s", "position": 7},
        {"row_kind": "marker", "is_transactional": True, "broker": "1", "log_partition": 3, "producer_id": 9,
         "log_offset": 11, "control_type": "ABORT"},
    ], schema=OFFSETS_WORK)
    (row,) = transactional_commits_arrow(side).to_pylist()
    assert (row["txn_state"], row["committed_offset"], row["leader_epoch"], row["log_offset"]) == ("aborted", 42, 4, 10)
    assert row["commit_ts"].timestamp() == 1_700_000_000 and row["source_kind"] == "offsets"


@pytest.mark.spark
def test_the_rows_spark_s_window_gives(spark):
    """Many producers and partitions, markers before and after, some commits with none: the same rows as the
    Spark window (the path of the delta-spark sink and of very many transactional rows)."""
    import random

    from jobs.ingest._spark import to_spark_schema
    from jobs.ingest.offsets import transactional_commits

    rnd = random.Random(16)
    rows = []
    for off in range(3000):
        kind = rnd.choice(["commit", "commit", "commit", "marker", "group"])
        rows.append({"row_kind": kind, "is_transactional": rnd.random() < 0.9,
                     "broker": rnd.choice(["1", "2", None]), "log_partition": rnd.choice([0, 1, 2, None]),
                     "producer_id": rnd.choice([1, 2, 3, 4, None]), "log_offset": off,
                     "control_type": rnd.choice(["COMMIT", "ABORT", None]) if kind == "marker" else None,
                     "group_id": f"g{off}", "topic": "t", "partition": off % 5, "committed_offset": off,
                     "commit_ms": 1_700_000_000_000 + off, "record_ms": 1_700_000_000_000})
    side = pa.Table.from_pylist(rows, schema=OFFSETS_WORK)
    want = transactional_commits(spark.createDataFrame(side.to_pandas(), to_spark_schema(OFFSETS_WORK))).toArrow()
    got = transactional_commits_arrow(side)
    key = [("log_offset", "ascending")]
    assert got.num_rows > 1000
    assert pa.Table.from_batches([got]).sort_by(key).to_pylist() == want.select(got.schema.names).sort_by(key).to_pylist()
