"""Segments at Kafka's limits, end to end through ``epoch-audit run`` on the shared local[1] session: what the
user sees (exit code, status, unit counts, quarantine rows, silver rows) for segments that Kafka's own
recovery (``LogSegment.recover``) handles: a batch outside the segment's offset range (rejected: one
quarantined batch, not a failed run), and a segment that ends in a zero fill or inside a batch (the end of the
log: not quarantined; the cut batch counted in ``audit_runs.units_unpaired``).

Inputs are built with kafka-python's batch builder and ``struct`` (never with our encoder), as the
reviewer's reproduction trees were.
"""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from fixtures_segments import LONG_MAX, NOOP, kp_batch

from jobs.cli import cli

pytestmark = pytest.mark.spark

SNAP = "snapshot=20240304T120000Z"
DAY = "2024-03-04"
T = 1_709_550_000_000  # 2024-03-04T11:00:00Z


def _s16(s: str) -> bytes:
    b = s.encode()
    return struct.pack(">h", len(b)) + b


def commit_batch(base_offset: int, group: str, committed: int) -> bytes:
    """A __consumer_offsets batch of one OffsetCommit (key v1, value v3) built with struct + kafka-python."""
    key = struct.pack(">h", 1) + _s16(group) + _s16("orders") + struct.pack(">i", 0)
    value = struct.pack(">hqi", 3, committed, 5) + _s16("") + struct.pack(">q", T)
    return kp_batch(base_offset, key=key, value=value, epoch=5)


def _write(path: Path, data: bytes | str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data if isinstance(data, bytes) else data.encode())


def _run(tmp: Path, quiet: bool = True, **inputs: Path) -> tuple[int, str, dict]:
    args = ["run", "--from", DAY, "--output-root", str(tmp / "out"), "--cluster", "seg",
            "--summary-json", str(tmp / "s.json"), *(["-q"] if quiet else [])]
    for kind, path in inputs.items():
        args += [f"--{kind}", str(path)]
    res = CliRunner().invoke(cli, args)
    return res.exit_code, res.output, json.loads((tmp / "s.json").read_text())


def _table(tmp: Path, name: str) -> list[dict]:
    return DeltaTable(str(tmp / "out" / name)).to_pyarrow_table().to_pylist()


@pytest.fixture(scope="module")
def out_of_range(spark, tmp_path_factory):
    """The reviewer's tree 3 (a log-dir segment 0 holding one CRC-valid batch at baseOffset 2^63-1), the same in
    a __consumer_offsets segment, and a segment whose name allows that offset (09223372036854775807.log)."""
    tmp = tmp_path_factory.mktemp("out_of_range")
    snap = tmp / "logdirs" / "broker=1" / SNAP
    _write(snap / "h-0" / "leader-epoch-checkpoint", f"0\n1\n0 {LONG_MAX}\n")
    _write(snap / "h-0" / "00000000000000000000.log", kp_batch(LONG_MAX))
    _write(snap / "m-0" / "leader-epoch-checkpoint", f"0\n1\n0 {LONG_MAX}\n")
    _write(snap / "m-0" / "09223372036854775807.log", kp_batch(LONG_MAX))
    _write(snap / "replication-offset-checkpoint", f"0\n2\nh 0 {LONG_MAX}\nm 0 {LONG_MAX}\n")
    seg = tmp / "offsets" / "broker=1" / "__consumer_offsets-0" / "00000000000000000000.log"
    _write(seg, commit_batch(0, "g", 10) + commit_batch(LONG_MAX, "g", 11) + commit_batch(1, "g", 12))
    code, output, summary = _run(tmp, logdirs=tmp / "logdirs", offsets=tmp / "offsets")
    return tmp, code, output, summary


def test_a_batch_outside_its_segments_range_is_one_quarantined_batch_not_a_failed_run(out_of_range):
    tmp, code, output, summary = out_of_range
    assert code == 0, output
    assert summary["status"] == "partial" and summary["error"] is None
    q = sorted((r["source_kind"], r["unit"], r["position"], r["reason"]) for r in _table(tmp, "quarantine"))
    reason = f"offsets outside the segment's range [0, 0+2^31-1]: base offset {LONG_MAX}, last offset {LONG_MAX}"
    first = len(commit_batch(0, "g", 10))
    assert q == [("logdirs", "batch", 0, reason), ("offsets", "batch", first, reason)]
    units = {(u["source_kind"], u["unit"]): (u["read"], u["quarantined"]) for u in summary["units"]}
    assert units[("logdirs", "batch")] == (2, 1) and units[("offsets", "batch")] == (3, 1)
    # the commits around it are read
    assert sorted(r["committed_offset"] for r in _table(tmp, "offset_commits")) == [10, 12]


def test_a_last_offset_of_long_max_gives_no_log_end_offset_instead_of_an_overflow(out_of_range):
    """A segment named 09223372036854775807.log may hold a batch at 2^63-1: it is decoded, and the log end offset
    (last offset + 1) does not fit a long: null, not ARITHMETIC_OVERFLOW failing the run (Spark's ANSI mode)."""
    tmp, code, output, _ = out_of_range
    assert code == 0, output
    batches = [(r["topic"], r["base_offset"], r["last_offset"]) for r in _table(tmp, "record_batches")]
    assert batches == [("m", LONG_MAX, LONG_MAX)]
    lineage = {r["topic"]: (r["log_end_offset"], r["high_watermark"]) for r in _table(tmp, "epoch_lineage")}
    assert lineage == {"h": (None, LONG_MAX), "m": (None, LONG_MAX)}


@pytest.fixture(scope="module")
def live_copies(spark, tmp_path_factory):
    """The reviewer's tree 4 — a log-dir segment copied while the broker wrote it (its last batch half-copied),
    and a preallocated one (zero-filled after the data) — and the same two endings in __consumer_offsets
    segments."""
    tmp = tmp_path_factory.mktemp("live_copies")
    snap = tmp / "logdirs" / "broker=1" / SNAP
    seg = kp_batch(0, 10, epoch=0) + kp_batch(10, 10, epoch=1)
    nxt = kp_batch(20, 1, epoch=1)
    for topic, data in (("a", seg + nxt[: len(nxt) // 2]), ("b", seg + bytes(4096))):
        _write(snap / f"{topic}-0" / "leader-epoch-checkpoint", "0\n2\n0 0\n1 10\n")
        _write(snap / f"{topic}-0" / "00000000000000000000.log", data)
    offs = tmp / "offsets" / "broker=1"
    commits = commit_batch(0, "g", 10) + commit_batch(1, "g", 11)
    cut = commit_batch(2, "g", 12)
    _write(offs / "__consumer_offsets-0" / "00000000000000000000.log", commits + cut[:40])
    _write(offs / "__consumer_offsets-1" / "00000000000000000000.log", commits + bytes(1 << 16))
    code, output, summary = _run(tmp, quiet=False, logdirs=tmp / "logdirs", offsets=tmp / "offsets")
    return tmp, code, output, summary


def test_a_live_or_preallocated_segments_end_is_not_quarantined(live_copies):
    """Was: status partial, "torn tail: 35 bytes" and "invalid entry size 0 for magic 0" quarantined (logdirs), and
    the same for the offsets segments. Now the run is ok and every batch before the end is read."""
    tmp, code, output, summary = live_copies
    assert code == 0, output
    assert summary["status"] == "ok", output
    assert _table(tmp, "quarantine") == []
    units = {(u["source_kind"], u["unit"]): (u["read"], u["quarantined"]) for u in summary["units"]}
    assert units[("logdirs", "batch")] == (4, 0) and units[("offsets", "batch")] == (4, 0)
    assert sorted(r["committed_offset"] for r in _table(tmp, "offset_commits")) == [10, 10, 11, 11]
    assert len(_table(tmp, "record_batches")) == 4


def test_the_cut_batch_is_counted_as_a_limit_of_the_copy(live_copies):
    """The half-copied batch is neither read nor quarantined: audit_runs.units_unpaired counts it (the zero fill is
    no data and counts nowhere), and the run's notes say what that count is."""
    tmp, code, output, _ = live_copies
    assert code == 0, output
    unpaired = {(r["source_kind"], r["unit"]): r["units_unpaired"] for r in _table(tmp, "audit_runs")}
    assert unpaired[("logdirs", "batch")] == 1 and unpaired[("offsets", "batch")] == 1
    assert "logdirs: 1 segment file ends inside a batch" in output
    assert "offsets: 1 segment file ends inside a batch" in output
    # the log end offset of both replicas is that of the data: the batches read
    lineage = {r["topic"]: r["log_end_offset"] for r in _table(tmp, "epoch_lineage")}
    assert lineage == {"a": 20, "b": 20}


CUT_ROLLED = "cut short, but not the partition's last segment"


@pytest.fixture(scope="module")
def rolled_cuts(spark, tmp_path_factory):
    """Copies whose cut batch is in a rolled segment — a segment with a higher base offset beside it (Kafka never
    appends to it, so the bytes were lost) — in a log dir (a-0; c-0, whose active segment is still empty), in a
    __consumer_offsets partition and in a __cluster_metadata-0 copy; and b-0, cut in its last segment (a live copy:
    still counted, not quarantined)."""
    tmp = tmp_path_factory.mktemp("rolled_cuts")
    snap = tmp / "logdirs" / "broker=1" / SNAP
    seg = kp_batch(0, 10, epoch=0) + kp_batch(10, 10, epoch=1)
    nxt = kp_batch(20, 1, epoch=1)
    for topic, first, second in (("a", seg + nxt[:30], kp_batch(21, 1, epoch=1)), ("b", seg, nxt[:30]),
                                 ("c", seg + nxt[:30], b"")):
        _write(snap / f"{topic}-0" / "leader-epoch-checkpoint", "0\n2\n0 0\n1 10\n")
        _write(snap / f"{topic}-0" / "00000000000000000000.log", first)
        _write(snap / f"{topic}-0" / f"{(21 if topic != 'b' else 20):020d}.log", second)
    offs = tmp / "offsets" / "broker=1" / "__consumer_offsets-0"
    _write(offs / "00000000000000000000.log", commit_batch(0, "g", 10) + commit_batch(1, "g", 11)
           + commit_batch(2, "g", 12)[:40])
    _write(offs / "00000000000000000003.log", commit_batch(3, "g", 13))
    meta = tmp / "cluster_metadata" / "node=1" / "__cluster_metadata-0"
    _write(meta / "00000000000000000000.log", kp_batch(0, 2, key=None, value=NOOP, epoch=1)
           + kp_batch(2, 1, key=None, value=NOOP, epoch=1)[:30])
    _write(meta / "00000000000000000003.log", kp_batch(3, 1, key=None, value=NOOP, epoch=1))
    args = ["run", "--from", DAY, "--output-root", str(tmp / "out"), "--cluster", "seg", "--summary-json",
            str(tmp / "s.json"), "--logdirs", str(tmp / "logdirs"), "--offsets", str(tmp / "offsets"),
            "--cluster-metadata", str(tmp / "cluster_metadata")]
    res = CliRunner().invoke(cli, args)
    return tmp, res.exit_code, res.output, json.loads((tmp / "s.json").read_text())


def test_a_rolled_segment_cut_short_is_quarantined_and_the_run_partial(rolled_cuts):
    """Was: each counted in audit_runs.units_unpaired as a live copy's cut, the run ok although bytes were lost
    from the middle of the log. Now each is one quarantined batch naming why, and the run is partial; the cut in
    b-0's last segment is still a limit of the copy."""
    tmp, code, output, summary = rolled_cuts
    assert code == 0, output
    assert summary["status"] == "partial", output
    q = sorted((r["source_kind"], r["source"].split("/", 2)[-1].split("/", 1)[-1], r["unit"], r["position"])
               for r in _table(tmp, "quarantine") if CUT_ROLLED in r["reason"])
    seg_len = len(kp_batch(0, 10, epoch=0) + kp_batch(10, 10, epoch=1))
    offs_len = len(commit_batch(0, "g", 10) + commit_batch(1, "g", 11))
    meta_len = len(kp_batch(0, 2, key=None, value=NOOP, epoch=1))
    assert [(k, u, p) for k, _, u, p in q] == sorted([
        ("cluster_metadata", "batch", meta_len), ("logdirs", "batch", seg_len), ("logdirs", "batch", seg_len),
        ("offsets", "batch", offs_len)])
    assert all(src.endswith("00000000000000000000.log") for _, src, _, _ in q)
    unpaired = {(r["source_kind"], r["unit"]): r["units_unpaired"] for r in _table(tmp, "audit_runs")}
    assert unpaired[("logdirs", "batch")] == 1  # b-0's last segment
    assert not unpaired.get(("offsets", "batch")) and not unpaired.get(("cluster_metadata", "batch"))


NOT_READ = "bytes from byte {} on not read (invalid entry size 3 for magic 2"


def _size_damaged(batch: bytes) -> bytes:
    """``batch`` with its size field (bytes 8..12) set to 3: no entry can be that short, so no walk frames it."""
    return batch[:8] + struct.pack(">i", 3) + batch[12:]


@pytest.fixture(scope="module")
def damaged_size(spark, tmp_path_factory):
    """A __consumer_offsets segment and a __cluster_metadata-0 segment whose second batch has a damaged size field,
    with whole batches after it: the walk cannot frame anything from there on."""
    tmp = tmp_path_factory.mktemp("damaged_size")
    offs = tmp / "offsets" / "broker=1" / "__consumer_offsets-0" / "00000000000000000000.log"
    _write(offs, commit_batch(0, "g", 10) + _size_damaged(commit_batch(1, "g", 11)) + commit_batch(2, "g", 12)
           + commit_batch(3, "g", 13))
    meta = tmp / "cluster_metadata" / "node=1" / "__cluster_metadata-0" / "00000000000000000000.log"
    noop = [kp_batch(i * 2, 2, key=None, value=NOOP, epoch=1) for i in range(4)]
    _write(meta, noop[0] + _size_damaged(noop[1]) + noop[2] + noop[3])
    args = ["run", "--from", DAY, "--output-root", str(tmp / "out"), "--cluster", "seg", "--summary-json",
            str(tmp / "s.json"), "--offsets", str(tmp / "offsets"), "--cluster-metadata", str(tmp / "cluster_metadata")]
    res = CliRunner().invoke(cli, args)
    sizes = {"offsets": (len(commit_batch(0, "g", 10)), len(offs.read_bytes())),
             "cluster_metadata": (len(noop[0]), len(meta.read_bytes()))}
    return tmp, res.exit_code, res.output, json.loads((tmp / "s.json").read_text()), sizes


def test_a_damaged_size_field_mid_file_names_the_bytes_not_read(damaged_size):
    """Was: one row "invalid entry size 3 for magic 2" and nothing about the batches after it (two whole commits
    and two metadata batches silently not read). Now that row names every byte the walk could not reach — from the
    damaged entry to the end of the file — and the run is partial; the commit before the damage is kept."""
    tmp, code, output, summary, sizes = damaged_size
    assert code == 0, output
    assert summary["status"] == "partial", output
    rows = {r["source_kind"]: r for r in _table(tmp, "quarantine") if "not read" in r["reason"]}
    assert set(rows) == {"offsets", "cluster_metadata"}, _table(tmp, "quarantine")
    for kind, (at, size) in sizes.items():
        assert rows[kind]["position"] == at and rows[kind]["unit"] == "batch"
        assert f"{size - at} {NOT_READ.format(at)}" in rows[kind]["reason"], rows[kind]["reason"]
    assert [r["committed_offset"] for r in _table(tmp, "offset_commits")] == [10]
