"""Issue 18 items 4 and 7: safe file walking (symlinks, loops, FIFOs) and odd names (``_schemas``, empty
inputs), at discovery (driver side, no Spark)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from jobs.config import ConfigError, parse_config
from jobs.ingest import IngestResult
from jobs.ingest import discover as disc
from jobs.runlog import RunContext

SEG = "00000000000000000000.log"


def _offsets_tree(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "offsets"
    part = root / "broker=1" / "__consumer_offsets-0"
    part.mkdir(parents=True)
    (part / SEG).write_bytes(b"x" * 100)
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    (outside / "dump.jsonl").write_text("{}\n")
    return root, outside


def test_a_symlink_out_of_the_root_is_skipped_with_its_reason_unless_allowed(tmp_path):
    root, outside = _offsets_tree(tmp_path)
    os.symlink(outside / "passwd", root / "passwd.txt")
    os.symlink(outside, root / "more")
    inv = disc.discover(offsets=str(root))
    assert [Path(f.source).name for f in inv.files] == [SEG]
    assert not inv.unrecognised
    assert inv.reasons("offsets") == {disc.LINK_OUTSIDE: 2}
    allowed = disc.discover(offsets=str(root), follow_symlinks=True)
    assert sorted(Path(f.source).name for f in allowed.files) == [SEG, "dump.jsonl", "passwd.txt"]
    assert not allowed.skipped


def test_a_symlink_loop_is_never_descended_and_inside_links_are_not_read_twice(tmp_path):
    root, _ = _offsets_tree(tmp_path)
    part = root / "broker=1" / "__consumer_offsets-0"
    os.symlink("..", part / "up")  # a loop: the partition dir's parent
    os.symlink(part, root / "alias")  # the same partition at a second path
    os.symlink(part / SEG, root / "broker=1" / "copy.log")
    os.symlink(root / "missing", root / "dangling.jsonl")
    for follow in (False, True):
        inv = disc.discover(offsets=str(root), follow_symlinks=follow)
        assert [f.source for f in inv.files] == [str(part / SEG)], follow
        assert inv.reasons("offsets") == {disc.LINK_LOOP: 1, disc.LINK_INSIDE: 2, disc.LINK_BROKEN: 1}


def test_a_loop_out_of_the_root_is_descended_once_when_links_are_followed(tmp_path):
    root, outside = _offsets_tree(tmp_path)
    os.symlink(outside, outside / "self")
    os.symlink(outside, root / "ext")
    inv = disc.discover(offsets=str(root), follow_symlinks=True)
    assert sorted(Path(f.source).name for f in inv.files) == [SEG, "dump.jsonl"]
    assert inv.reasons("offsets") == {disc.LINK_LOOP: 1}


@pytest.mark.skipif(not hasattr(os, "mkfifo"), reason="no FIFOs here")
def test_a_fifo_is_skipped_not_opened(tmp_path):
    root, _ = _offsets_tree(tmp_path)
    os.mkfifo(root / "pipe.jsonl")
    inv = disc.discover(offsets=str(root))
    assert inv.reasons("offsets") == {disc.NOT_REGULAR: 1}


def test_topics_starting_with_an_underscore_are_decoded_not_hidden(tmp_path):
    snap = tmp_path / "logdirs" / "broker=1" / "snapshot=20240301T000000Z"
    for topic_dir in ("_schemas-0", "_confluent-metrics-3", "orders-0"):
        (snap / topic_dir).mkdir(parents=True)
        (snap / topic_dir / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        (snap / topic_dir / SEG).write_bytes(b"x" * 61)
    (snap / "_SUCCESS").write_text("")
    (snap / ".hidden-0").mkdir()
    (snap / ".hidden-0" / "leader-epoch-checkpoint").write_text("0\n0\n")
    inv = disc.discover(logdirs=str(tmp_path / "logdirs"))
    topics = sorted({(f.topic, f.partition) for f in inv.files})
    assert topics == [("_confluent-metrics", 3), ("_schemas", 0), ("orders", 0)]
    assert {Path(s).name for _, s in inv.ignored} == {"_SUCCESS", "leader-epoch-checkpoint"}


def test_empty_inputs_are_counted_as_read_with_zero_units(tmp_path):
    root, _ = _offsets_tree(tmp_path)
    (root / "empty.jsonl").write_text("")
    (root / "empty.txt").write_text("")
    empty_part = root / "broker=2" / "__consumer_offsets-1"
    empty_part.mkdir(parents=True)
    (empty_part / SEG).write_bytes(b"")
    (root / "looks-like.jsonl").mkdir()
    inv = disc.discover(offsets=str(root))
    assert [Path(f.source).name for f in inv.files] == [SEG]
    assert inv.reasons("offsets", "empty") == {disc.EMPTY_FILE: 3, disc.EMPTY_DIR: 1}
    assert not inv.unrecognised
    # a Spark-written dataset directory named like a file is read through its part files, not "empty"
    (root / "dataset.parquet").mkdir()
    (root / "dataset.parquet" / "part-0.parquet").write_bytes(b"PAR1")
    inv = disc.discover(offsets=str(root))
    assert inv.reasons("offsets", "empty") == {disc.EMPTY_FILE: 3, disc.EMPTY_DIR: 1}


def test_the_run_notes_say_what_was_skipped_and_what_was_empty():
    run = RunContext("c", dt.date(2024, 3, 1), dt.date(2024, 3, 1))
    res = IngestResult(run=run, counts=(), skipped={"offsets": {disc.LINK_OUTSIDE: 2, disc.LINK_LOOP: 1}},
                       empty={"metadata": {disc.EMPTY_FILE: 1}})
    notes = res.notes()
    assert notes[0] == f"metadata: 1 entry read with zero units (1 {disc.EMPTY_FILE})"
    assert notes[1].startswith("offsets: 3 entries skipped, not read (1 symbolic link loop; 2 symbolic link out")


def test_follow_symlinks_is_a_boolean_config_switch():
    out = {"root": "/tmp/out"}
    assert parse_config({"cluster": "c", "output": out}).inputs.follow_symlinks is False
    on = parse_config({"cluster": "c", "output": out, "inputs": {"follow_symlinks": True}})
    assert on.inputs.follow_symlinks is True
    with pytest.raises(ConfigError, match="follow_symlinks"):
        parse_config({"cluster": "c", "output": out, "inputs": {"follow_symlinks": "yes"}})


def test_local_input_bytes_counts_files_until_the_cap_and_follows_no_links(tmp_path: Path) -> None:
    """The size the CLI starts Spark for: exact below the cap, above it once passed, None when unknowable."""
    root = tmp_path / "logdirs" / "broker=1"
    root.mkdir(parents=True)
    (root / "a.log").write_bytes(b"x" * 1000)
    (root / "b.log").write_bytes(b"x" * 500)
    single = tmp_path / "one.jsonl"
    single.write_bytes(b"y" * 7)
    big = tmp_path / "big"
    big.mkdir()
    with open(big / "huge.log", "wb") as fh:  # sparse: its size counts, not its blocks
        fh.truncate(2**30)
    (root / "loop").symlink_to(tmp_path)  # not followed: would count everything twice (or forever)
    assert disc.local_input_bytes([str(tmp_path / "logdirs"), None, str(single)], cap=10**9) == 1507
    assert disc.local_input_bytes([str(tmp_path / "logdirs"), str(big)], cap=2**20) > 2**20
    assert disc.local_input_bytes([str(tmp_path / "missing")], cap=2**20) is None
    assert disc.local_input_bytes(["s3://bucket/offsets", str(single)], cap=2**20) is None
