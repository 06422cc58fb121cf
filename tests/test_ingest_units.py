"""Ingestion pieces that need no Spark: discovery by path, segment splitting, executor decode functions."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from fixtures_ingest import T1, build_inputs, commit_kv

from epochlib import coordinator, records
from epochlib.records import NewRecord
from jobs.errors import InputError
from jobs.ingest import _rows as rows
from jobs.ingest import discover as disc
from jobs.ingest import kvdumps, ranges, textdumps
from jobs.ingest import offsets_segments as segs
from jobs.ingest._kv import COMMIT_PASS, ONE_PASS, SIDE_PASS


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
    return pa.RecordBatch.from_pylist([row], schema=ranges.RANGE_SCHEMA)


def test_big_segments_are_split_on_batch_boundaries_and_decode_to_the_same_rows(tmp_path):
    p = _segment(tmp_path, 50)
    planned = pa.Table.from_batches(list(ranges.plan_segment_ranges(iter([_range_rows(p, 1000)]))))
    starts, ends = planned["start"].to_pylist(), planned["end"].to_pylist()
    assert len(starts) > 3 and starts[0] == 0 and ends[-1] == p.stat().st_size
    assert starts[1:] == ends[:-1]
    bounds = {pos for pos, _ in records.scan_batch_boundaries(p.read_bytes())}
    assert set(starts) <= bounds
    commits = pa.Table.from_batches(list(segs.decode_segment_commits(iter(planned.to_batches()))),
                                    schema=rows.COMMITS)
    assert sorted(commits["committed_offset"].to_pylist()) == list(range(50))
    side = pa.Table.from_batches(list(segs.decode_segment_side(iter(planned.to_batches()))),
                                 schema=rows.OFFSETS_WORK)
    stats = side.filter(pa.compute.equal(side["row_kind"], "stats")).to_pylist()
    assert sum(s["n_read"] for s in stats if s["unit"] == "batch") == 50
    assert sum(s["n_out"] for s in stats if s["unit"] == "record") == 50


def test_small_segments_are_one_range_without_being_opened(tmp_path):
    row = {"source": str(tmp_path / "missing.log"), "size": 100, "start": 0, "end": 0, "target": 1 << 20,
           "broker": None, "log_partition": 0, "topic": None, "partition": None, "snapshot_ms": None}
    out = pa.Table.from_batches(list(ranges.plan_segment_ranges(iter([pa.RecordBatch.from_pylist(
        [row], schema=ranges.RANGE_SCHEMA)]))))
    assert out.select(["start", "end"]).to_pylist() == [{"start": 0, "end": 100}]


def test_commit_and_side_passes_split_the_rows_exactly(inputs):
    """For every offsets input form, the commit pass gives the non-transactional commits (already in the
    offset_commits shape) and the side pass everything else: no row in both, none in neither (the side
    pass counts every decoded row, commit-pass rows included)."""
    paths, _ = inputs
    inv = disc.discover(paths["offsets"], None, None)
    seg_rows = pa.RecordBatch.from_pylist(
        [{"source": f.source, "size": f.size, "start": 0, "end": f.size, "target": 1 << 30, "broker": f.broker,
          "log_partition": f.log_partition, "topic": None, "partition": None, "snapshot_ms": None}
         for f in inv.of("offsets", "segment")], schema=ranges.RANGE_SCHEMA)
    file_rows = {form: pa.RecordBatch.from_pylist(
        [{"source": f.source, "size": f.size, "broker": f.broker} for f in inv.of("offsets", *forms)],
        schema=rows.FILE_SCHEMA) for form, forms in (("dumps", ("parquet", "jsonl")), ("text", ("text",)))}

    kinds = set()
    for commit_fn, side_fn, both_fn, batch in (
        (segs.decode_segment_commits, segs.decode_segment_side, segs.decode_segment_both, seg_rows),
        (kvdumps.decode_dump_commits, kvdumps.decode_dump_side, kvdumps.decode_dump_both, file_rows["dumps"]),
        (textdumps.decode_text_commits, textdumps.decode_text_side, textdumps.decode_text_both, file_rows["text"]),
    ):
        commits = pa.Table.from_batches(list(commit_fn(iter([batch]))), schema=rows.COMMITS)
        side = pa.Table.from_batches(list(side_fn(iter([batch]))), schema=rows.OFFSETS_WORK)
        # the one pass (the delta-rs sink's: its tasks write the commits) yields exactly both passes' rows
        both = list(both_fn(iter([batch])))
        assert {b.schema for b in both} == {rows.COMMITS, rows.OFFSETS_WORK}
        assert pa.Table.from_batches([b for b in both if b.schema == rows.COMMITS], schema=rows.COMMITS).equals(commits)
        assert pa.Table.from_batches([b for b in both if b.schema == rows.OFFSETS_WORK],
                                     schema=rows.OFFSETS_WORK).equals(side)
        assert commits.num_rows > 0
        assert set(commits["txn_state"].to_pylist()) == {"none"}
        side_commits = side.filter(pa.compute.equal(side["row_kind"], "commit"))
        assert set(side_commits["is_transactional"].to_pylist()) <= {True}
        decoded = side.filter(pa.compute.is_in(side["row_kind"], pa.array(["commit", "group"]))).num_rows
        stats = side.filter(pa.compute.equal(side["row_kind"], "stats"))
        assert pa.compute.sum(stats["n_out"]).as_py() == commits.num_rows + decoded
        # a unit: file, line/byte, log offset — and the commit itself, since glued console JSON objects share
        # their line (positions of text dumps are line numbers, issue 13)
        def key(r):
            return (r["source"], r["position"], r["log_offset"], r["group_id"], r["topic"], r["partition"],
                    r["committed_offset"])

        keys = {key(r) for r in commits.to_pylist()}
        assert len(keys) == commits.num_rows
        assert not keys & {key(r) for r in side_commits.to_pylist()}
        kinds |= set(side["row_kind"].to_pylist())
    assert {"commit", "marker", "group", "quarantine", "stats"} <= kinds  # transactional commits stay on the side


def test_text_dump_rows_split_by_pass_select():
    """Pass.select (the text dumps' split of rows of every kind) keeps the non-transactional commits for
    the commit pass, in the silver shape, and the rest for the side pass."""
    work = rows.make_batch(rows.OFFSETS_WORK, {
        "row_kind": ["commit", "commit", "commit", "group", "stats"], "is_transactional": [False, True, None, None,
                                                                                         None],
        "committed_offset": [1, 2, 3, None, None], "commit_ms": [T1, T1, T1, None, None],
        "record_type": [None, None, None, coordinator.snake_type_name(2), None]}, 5)
    [committed] = COMMIT_PASS.select(work)
    assert committed.schema == rows.COMMITS and committed["committed_offset"].to_pylist() == [1, 3]
    [side] = SIDE_PASS.select(work)
    assert side["row_kind"].to_pylist() == ["commit", "group", "stats"]
    assert side["record_type"].to_pylist()[1] == "group_metadata"
    assert list(COMMIT_PASS.select(work.slice(3))) == []
    # the one pass (whose tasks write the commits' files) gets both parts, the commits first
    both = list(ONE_PASS.select(work))
    assert [b.schema for b in both] == [rows.COMMITS, rows.OFFSETS_WORK]
    assert both[0].equals(committed) and both[1].equals(side)


def test_commit_rows_take_their_times_as_the_spark_expressions_did():
    ms = pa.array([T1, None, -1, T1], pa.int64())
    batch = rows.commit_batch({
        "commit_ms": ms, "record_ms": pa.array([T1 + 5, T1 + 6, T1 + 7, -3], pa.int64()),
        "expire_ms": pa.array([-1, T1, None, 0], pa.int64()),
        "is_tombstone": pa.array([False, False, False, True]), "source": pa.array(["s"] * 4)}, 4)
    got = batch.to_pylist()
    to_ms = lambda t: None if t is None else int(t.timestamp() * 1000)  # noqa: E731
    assert [to_ms(r["commit_ts"]) for r in got] == [T1, None, -1, T1]
    assert [to_ms(r["event_ts"]) for r in got] == [T1, T1 + 6, T1 + 7, -3]  # record time when no usable commit time
    assert [to_ms(r["expire_ts"]) for r in got] == [None, T1, None, 0]
    assert [to_ms(r["record_ts"]) for r in got] == [T1 + 5, T1 + 6, T1 + 7, None]
    assert {r["txn_state"] for r in got} == {"none"} and {r["source_kind"] for r in got} == {"offsets"}


# --- a bad __consumer_offsets batch is dated by its own header or its neighbours --------------------------


def _kp_batch(base_offset: int, ts: int) -> bytearray:
    """One v2 batch of one record built by kafka-python (not our encoder), at ``base_offset``, time ``ts``."""
    import struct as _struct

    from kafka.record.default_records import DefaultRecordBatchBuilder

    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 20)
    b.append(0, timestamp=ts, key=b"k", value=b"v", headers=[])
    raw = bytearray(b.build())
    _struct.pack_into(">q", raw, 0, base_offset)
    return raw


def test_a_bad_batch_between_good_ones_is_dated_so_that_its_day_counts_it() -> None:
    """A CRC-bad batch (the header intact) is dated by its own max timestamp; an entry whose size no batch can have
    and a batch whose header time is corrupt too fall back to the good batch before them: a run of that day counts
    them (a day-split review found such a batch undated: the day's run said ok with commits of its own unread)."""
    import struct as _struct

    from jobs.ingest.offsets_segments import _bad_batch_ms
    from jobs.ingest.ranges import segment_tables

    day1, day2 = 1_719_792_000_000, 1_719_878_400_000  # 2024-07-01, 2024-07-02 (UTC midnight)
    a, bad, c = _kp_batch(0, day1 + 5), _kp_batch(1, day2 + 10), _kp_batch(2, day2 + 20)
    bad[-1] ^= 0xFF  # in the record: the CRC fails, the header (and its timestamps) stands
    (heads, _, _), = segment_tables(bytes(a + bad + c), 0)
    assert heads.column("error").is_valid().to_pylist() == [False, True, False]
    assert _bad_batch_ms(heads) == [day2 + 10]
    # its header's time corrupt as well (after the next good batch): the previous good batch's time
    wild = bytearray(bad)
    _struct.pack_into(">q", wild, 35, day2 + 10**9)
    (heads, _, _), = segment_tables(bytes(a + wild + c), 0)
    assert _bad_batch_ms(heads) == [day1 + 5]
    # an entry with a size no batch can have after a good batch (a final batch cut short by the end of the file is
    # no bad batch: it is counted apart, test_segment_limits_spark)
    insane = bytearray(c)
    _struct.pack_into(">i", insane, 8, -5)
    (heads, _, _), = segment_tables(bytes(a + insane[:30]), 0, ends_file=True)  # no timestamps in its 30 bytes
    assert heads.column("error").is_valid().to_pylist() == [False, True] and _bad_batch_ms(heads) == [day1 + 5]
