"""Ingestion pieces that need no Spark: discovery by path, segment splitting, executor decode functions."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from fixtures_ingest import T1, build_inputs, commit_kv

from epochlib import records
from epochlib.records import NewRecord
from jobs.errors import InputError
from jobs.ingest import discover as disc
from jobs.ingest import offsets as off


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    base = tmp_path_factory.mktemp("ingest_inputs")
    return build_inputs(base)


def test_discovery_classifies_by_path_only(inputs):
    paths, _ = inputs
    inv = disc.discover(paths["offsets"], paths["logdirs"], paths["metadata"])
    forms = {(f.kind, f.form) for f in inv.files}
    assert {("offsets", "segment"), ("offsets", "parquet"), ("offsets", "jsonl"), ("offsets", "text"),
            ("logdirs", "leader_epoch_checkpoint"), ("logdirs", "partition_metadata"),
            ("logdirs", "root_checkpoint"), ("logdirs", "segment"), ("metadata", "pcap"),
            ("metadata", "jsonl")} <= forms
    seg = next(f for f in inv.of("offsets", "segment") if f.log_partition == 2)
    assert seg.broker == "1" and seg.base_offset == 0
    snaps = {(f.broker, f.snapshot_ms) for f in inv.of("logdirs", "leader_epoch_checkpoint")}
    assert len(snaps) == 4
    assert sorted(Path(u.source).name for u in inv.unrecognised) == ["junk.csv", "notes.bin"]
    assert any(s.endswith(".index") for _, s in inv.ignored)


def test_discovery_of_a_missing_root_is_an_input_error(tmp_path):
    with pytest.raises(InputError):
        disc.discover(offsets=str(tmp_path / "nope"))


def test_logdir_files_outside_the_layout_are_unrecognised(tmp_path):
    (tmp_path / "broker=1" / "snapshot=yesterday" / "t-0").mkdir(parents=True)
    (tmp_path / "broker=1" / "snapshot=yesterday" / "t-0" / "leader-epoch-checkpoint").write_text("0\n0\n")
    (tmp_path / "loose-checkpoint.txt").write_text("x")
    inv = disc.discover(logdirs=str(tmp_path))
    assert not inv.files and len(inv.unrecognised) == 2


def _segment(tmp_path: Path, n_batches: int) -> Path:
    p = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    p.parent.mkdir(parents=True)
    p.write_bytes(b"".join(
        records.encode_batch([NewRecord(*commit_kv("g", "t", 0, i, 1, T1 + i), T1 + i)], base_offset=i)
        for i in range(n_batches)))
    return p


def _range_rows(p: Path, target: int) -> pa.RecordBatch:
    row = {"source": str(p), "size": p.stat().st_size, "start": 0, "end": 0, "target": target, "broker": None,
           "log_partition": 0, "topic": "__consumer_offsets", "partition": 0, "snapshot_ms": None}
    return pa.RecordBatch.from_pylist([row], schema=off.RANGE_SCHEMA)


def test_big_segments_are_split_on_batch_boundaries_and_decode_to_the_same_rows(tmp_path):
    p = _segment(tmp_path, 50)
    ranges = pa.Table.from_batches(list(off.plan_segment_ranges(iter([_range_rows(p, 1000)]))))
    starts, ends = ranges["start"].to_pylist(), ranges["end"].to_pylist()
    assert len(starts) > 3 and starts[0] == 0 and ends[-1] == p.stat().st_size
    assert starts[1:] == ends[:-1]
    bounds = {pos for pos, _ in records.scan_batch_boundaries(p.read_bytes())}
    assert set(starts) <= bounds
    work = pa.Table.from_batches(list(off.decode_segment_ranges(iter(ranges.to_batches()))))
    commits = work.filter(pa.compute.equal(work["row_kind"], "commit"))
    assert sorted(commits["committed_offset"].to_pylist()) == list(range(50))
    stats = work.filter(pa.compute.equal(work["row_kind"], "stats")).to_pylist()
    assert sum(s["n_read"] for s in stats if s["unit"] == "batch") == 50


def test_small_segments_are_one_range_without_being_opened(tmp_path):
    row = {"source": str(tmp_path / "missing.log"), "size": 100, "start": 0, "end": 0, "target": 1 << 20,
           "broker": None, "log_partition": 0, "topic": None, "partition": None, "snapshot_ms": None}
    out = pa.Table.from_batches(list(off.plan_segment_ranges(iter([pa.RecordBatch.from_pylist(
        [row], schema=off.RANGE_SCHEMA)]))))
    assert out.select(["start", "end"]).to_pylist() == [{"start": 0, "end": 100}]
