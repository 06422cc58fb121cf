"""Issue 18 item 1: one bad value never fails a run.

Poison values (a non-finite or out-of-range time, an integer beyond its column type, JSON nested 100 000
deep, a CRC-valid commit whose commitTimestamp is 2^62) are fed through the very ``mapInArrow`` functions
Spark calls; each must become one quarantine row of its unit while the good units around it are decoded,
and every time that comes out must be one a Spark timestamp/date can hold (Spark's ``timestamp_millis``
fails the whole job on the others).
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from fixtures_ingest import T1, capture_line, commit_kv, metadata_body
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from epochlib import protocol, records
from epochlib.records import NewRecord
from jobs.ingest import _rows, kvdumps, textdumps
from jobs.ingest import metadata as md
from jobs.ingest import offsets_segments as segs
from jobs.ingest.ranges import RANGE_SCHEMA

NESTED = "[" * 100_000
_TIME = [float("inf"), float("-inf"), float("nan"), 1 << 62, -(1 << 62), 10**30, 1 << 63, 1e300,
         _rows.MS_MAX + 1, _rows.MS_MIN - 1]
#: Bad values per field: out of its column type, or (times) out of what a date can hold.
POISON = {
    "ts": _TIME, "timestamp": _TIME,
    "commitTimestamp": [1 << 62, -(1 << 62), (1 << 63) - 1, _rows.MS_MAX + 1],
    "partition": [1 << 40, 1 << 31, -(1 << 31) - 1, 10**30, float("inf")],
    "offset": [10**30, 1 << 63, -(1 << 63) - 1, float("inf")],
    "nested": [None],
}


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _file_batch(path: Path, **extra) -> pa.RecordBatch:
    row = {"source": str(path), "size": path.stat().st_size, "broker": None, **extra}
    schema = md.FILE_SCHEMA if "form" in extra else _rows.FILE_SCHEMA
    return pa.RecordBatch.from_pylist([{k: row.get(k) for k in schema.names}], schema=schema)


def _check_times(batch: pa.RecordBatch) -> None:
    """Every time column holds what Spark can turn into a timestamp and a date."""
    for name in batch.schema.names:
        col = batch.column(name)
        if name.endswith("_ms") or name == "max_timestamp":
            assert pc.all(_rows.ms_in_range(col)).as_py(), (name, col)
        elif pa.types.is_timestamp(col.type):
            ms = pc.cast(pc.cast(col, pa.timestamp("ms", tz="UTC")), pa.int64())
            assert pc.all(_rows.ms_in_range(ms)).as_py(), (name, col)


def _run(fns, batch: pa.RecordBatch) -> dict:
    """Run the pass functions over one input; returns decoded rows, quarantine positions and summed stats."""
    out = {"rows": 0, "quarantined": [], "raw": [], "read": 0, "bad": 0}
    for fn in fns:
        for b in fn(iter([batch])):
            if b is None:
                continue
            _check_times(b)
            if "row_kind" not in b.schema.names:  # the commit pass: offset_commits rows
                out["rows"] += b.num_rows
                continue
            for r in b.to_pylist():
                if r["row_kind"] == "quarantine":
                    out["quarantined"].append(r["position"])
                    out["raw"].append(r["raw"])
                elif r["row_kind"] == "stats":
                    out["read"] += r["n_read"]
                    out["bad"] += r["n_bad"]
                elif r["row_kind"] not in ("marker", "stats"):
                    out["rows"] += 1
    return out


# ------------------------------------------------------------------ poison lines, one input form each


def _kv_line(field: str, value) -> str:
    k, v = commit_kv("g", "t", 0, 5, 1, T1)
    if field == "nested":
        return NESTED
    if field == "commitTimestamp":
        _, v = commit_kv("g", "t", 0, 5, 1, value)
        return json.dumps({"key": _b64(k), "value": _b64(v)})
    obj = {"key": _b64(k), "value": _b64(v), field: value}
    return json.dumps(obj)  # allow_nan: Python writes Infinity / NaN as the poison lines do


def _capture(field: str, value) -> str:
    resp = protocol.encode_metadata_response(metadata_body(4), 9, 100)
    if field == "nested":
        return NESTED
    return capture_line(value, "c", "b1:9092", 9, resp)


def _console(field: str, value) -> str:
    if field == "nested":
        return NESTED
    key = {"group": "g", "topic": "t", "partition": value if field == "partition" else 0}
    val = {"offset": value if field == "offset" else 5, "leaderEpoch": 5, "metadata": "",
           "commitTimestamp": value if field == "commitTimestamp" else T1}
    return json.dumps({"key": {"type": 1, "data": key}, "value": {"version": 3, "data": val}})


FORMS = {
    "kv_jsonl": (_kv_line, ("timestamp", "partition", "offset", "commitTimestamp", "nested"), ".jsonl",
                 (kvdumps.decode_dump_commits, kvdumps.decode_dump_side), {}),
    "capture_jsonl": (_capture, ("ts", "nested"), ".jsonl", (md.decode_capture_files((9092,)),),
                      {"form": "jsonl"}),
    "console_text": (_console, ("partition", "offset", "commitTimestamp", "nested"), ".txt",
                     (textdumps.decode_text_commits, textdumps.decode_text_side), {}),
}


@st.composite
def poisoned_inputs(draw):
    form = draw(st.sampled_from(sorted(FORMS)))
    make, fields, _, _, _ = FORMS[form]
    field = draw(st.sampled_from(fields))
    value = draw(st.sampled_from(POISON[field]))
    n_good = draw(st.integers(1, 4))
    at = draw(st.integers(0, n_good))
    return form, field, value, n_good, at


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(case=poisoned_inputs())
def test_a_poison_line_is_one_quarantined_unit_between_decoded_good_ones(tmp_path, case):
    form, field, value, n_good, at = case
    make, _, suffix, fns, extra = FORMS[form]
    good = {"kv_jsonl": lambda: _kv_line("timestamp", T1), "capture_jsonl": lambda: _capture("ts", T1),
            "console_text": lambda: _console("none", None)}[form]()
    lines = [good] * n_good
    poison = make(field, value)
    lines.insert(at, poison)
    path = tmp_path / f"in{suffix}"
    path.write_text("\n".join(lines) + "\n")
    got = _run(fns, _file_batch(path, **extra))
    assert got["quarantined"] == [at + 1], (form, field, value, got)
    assert got["raw"][0], "the quarantine row shows what it could not use"
    if form == "console_text":  # a text dump's row shows the line (a JSON-lines dump's the record's key+value)
        assert got["raw"] == [poison.encode()[:_rows.RAW_MAX]], (got["raw"], poison)
    assert got["read"] == n_good + 1 and got["bad"] == 1
    per_line = 2 if form == "capture_jsonl" else 1  # a capture line holds two partitions
    assert got["rows"] == n_good * per_line


def _segment(tmp_path: Path, commit_ts: list[int], record_ts: list[int]) -> pa.RecordBatch:
    p = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_bytes(b"".join(
        records.encode_batch([NewRecord(*commit_kv("g", "t", 0, i, 1, c), r)], base_offset=i)
        for i, (c, r) in enumerate(zip(commit_ts, record_ts, strict=True))))
    size = p.stat().st_size
    return pa.RecordBatch.from_pylist([{"source": str(p), "size": size, "start": 0, "end": size, "target": size,
                                        "broker": "1", "log_partition": 0, "topic": "__consumer_offsets",
                                        "partition": 0, "snapshot_ms": None}], schema=RANGE_SCHEMA)


@pytest.mark.parametrize("bad", ["commit", "record"])
def test_a_crc_valid_commit_with_an_impossible_time_is_one_quarantined_record(tmp_path, bad):
    commit_ts, record_ts = [T1] * 5, [T1] * 5
    (commit_ts if bad == "commit" else record_ts)[2] = 1 << 62
    got = _run((segs.decode_segment_commits, segs.decode_segment_side), _segment(tmp_path, commit_ts, record_ts))
    assert got["rows"] == 4 and len(got["quarantined"]) == 1
    assert got["bad"] == 1 and got["read"] == 5 + 5  # 5 batches + 5 records, one record bad


def test_timestamps_of_lines_are_checked_for_range_and_finiteness():
    assert _rows.ts_ms(T1) == T1 and _rows.ts_ms("2024-03-01T01:00:00Z") == T1
    for v in (float("inf"), float("nan"), 1 << 62, -(1 << 62), "4611686018427387904"):
        with pytest.raises(ValueError):
            _rows.ts_ms(v)
    assert _rows.bad_value({"partition": 1 << 40}, _rows.OFFSETS_WORK).startswith("partition")
    assert _rows.bad_value({"commit_ms": 1 << 62}, _rows.OFFSETS_WORK).startswith("commit_ms")
    assert _rows.bad_value({"partition": 3, "commit_ms": T1}, _rows.OFFSETS_WORK) is None


def test_a_parquet_dump_row_with_a_wide_partition_or_impossible_time_is_one_quarantined_record(tmp_path):
    import pyarrow.parquet as pq

    kvs = [commit_kv("g", "t", 0, j, 5, T1) for j in range(4)]
    path = tmp_path / "d.parquet"
    pq.write_table(pa.table({"key": [k for k, _ in kvs], "value": [v for _, v in kvs],
                             "partition": pa.array([3, 1 << 40, 3, 3], pa.int64()),
                             "timestamp": pa.array([T1, T1, 1 << 62, T1], pa.int64())}), path)
    got = _run((kvdumps.decode_dump_commits, kvdumps.decode_dump_side), _file_batch(path))
    assert got["rows"] == 2 and sorted(got["quarantined"]) == [1, 2]
    assert (got["read"], got["bad"]) == (4, 2)
