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


def _sorted_rows(table: pa.Table) -> list[str]:
    return sorted(map(str, table.to_pylist()))


def _passes(fn, rows: pa.RecordBatch) -> tuple[pa.Table, pa.Table, pa.Table]:
    """(reference work rows, commit pass, side pass) of one offsets decode function over ``rows``."""
    def run(emit):
        return list(fn(iter([rows])) if emit == "work" else fn(iter([rows]), emit=emit))

    work = pa.Table.from_batches(run("work"), schema=off.WORK)
    commits = pa.Table.from_batches(run("commits"), schema=off.COMMITS)
    side = pa.Table.from_batches(run("side"), schema=off.WORK)
    return work, commits, side


def test_commit_and_side_passes_split_the_work_rows_exactly(inputs):
    """The commit pass gives exactly the non-transactional commits of the reference work rows (already in
    the offset_commits shape) and the side pass exactly everything else, for every offsets input form."""
    paths, _ = inputs
    inv = disc.discover(paths["offsets"], None, None)
    segs = inv.of("offsets", "segment")
    seg_rows = pa.RecordBatch.from_pylist(
        [{"source": f.source, "size": f.size, "start": 0, "end": f.size, "target": 1 << 30, "broker": f.broker,
          "log_partition": f.log_partition, "topic": None, "partition": None, "snapshot_ms": None} for f in segs],
        schema=off.RANGE_SCHEMA)
    file_rows = {form: pa.RecordBatch.from_pylist(
        [{"source": f.source, "size": f.size, "broker": f.broker} for f in inv.of("offsets", *forms)],
        schema=off.FILE_SCHEMA) for form, forms in (("dumps", ("parquet", "jsonl")), ("text", ("text",)))}

    def seg_fn(batches, emit="work"):
        return {"work": off.decode_segment_ranges, "commits": off.decode_segment_commits,
                "side": off.decode_segment_side}[emit](batches)

    kinds = set()
    for fn, rows in ((seg_fn, seg_rows), (off.decode_dump_files, file_rows["dumps"]),
                     (off.decode_text_files, file_rows["text"])):
        work, commits, side = _passes(fn, rows)
        assert commits.num_rows > 0
        expect_commits = [off.work_to_commits(b) for b in work.to_batches()]
        expect_commits = pa.Table.from_batches([b for b in expect_commits if b is not None], schema=off.COMMITS)
        assert _sorted_rows(commits) == _sorted_rows(expect_commits)
        assert set(commits["txn_state"].to_pylist()) == {"none"}
        expect_side = [off.work_side(b) for b in work.to_batches()]
        expect_side = pa.Table.from_batches([b for b in expect_side if b is not None], schema=off.WORK)
        assert _sorted_rows(side) == _sorted_rows(expect_side)
        assert side.num_rows + commits.num_rows == work.num_rows
        kinds |= set(side["row_kind"].to_pylist())
    assert {"commit", "marker", "group", "quarantine", "stats"} <= kinds  # transactional commits stay on the side


def test_commit_rows_take_their_times_as_the_spark_expressions_did():
    ms = pa.array([T1, None, -1, T1], pa.int64())
    batch = off.commit_batch({
        "commit_ms": ms, "record_ms": pa.array([T1 + 5, T1 + 6, T1 + 7, -3], pa.int64()),
        "expire_ms": pa.array([-1, T1, None, 0], pa.int64()),
        "is_tombstone": pa.array([False, False, False, True]), "source": pa.array(["s"] * 4)}, 4)
    rows = batch.to_pylist()
    to_ms = lambda t: None if t is None else int(t.timestamp() * 1000)  # noqa: E731
    assert [to_ms(r["commit_ts"]) for r in rows] == [T1, None, -1, T1]
    assert [to_ms(r["event_ts"]) for r in rows] == [T1, T1 + 6, T1 + 7, -3]  # record time when no usable commit time
    assert [to_ms(r["expire_ts"]) for r in rows] == [None, T1, None, 0]
    assert [to_ms(r["record_ts"]) for r in rows] == [T1 + 5, T1 + 6, T1 + 7, None]
    assert {r["txn_state"] for r in rows} == {"none"} and {r["source_kind"] for r in rows} == {"offsets"}
