"""Issue 18 items 4 and 7: safe file walking (symlinks, loops, FIFOs) and odd names (``_schemas``, empty
inputs), at discovery (driver side, no Spark)."""

from __future__ import annotations

import datetime as dt
import os
from pathlib import Path

import pytest

from jobs.config import ConfigError, parse_config
from jobs.errors import InputError
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
    # evidence the run did not read: quarantined with the reason, so the source is not "ok"
    assert {(Path(u.source).name, u.reason) for u in inv.unrecognised} == {
        (n, f"not read: {disc.LINK_OUTSIDE}") for n in ("passwd.txt", "more")}
    assert not inv.skipped
    os.symlink(outside / "passwd", root / ".hidden.txt")  # a name the run ignores anyway: no loss
    inv = disc.discover(offsets=str(root))
    assert len(inv.unrecognised) == 2 and inv.reasons("offsets") == {disc.LINK_OUTSIDE: 1}
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
        assert inv.reasons("offsets") == {disc.LINK_LOOP: 1, disc.LINK_INSIDE: 2}  # read elsewhere: no loss
        assert [(Path(u.source).name, u.reason) for u in inv.unrecognised] == [
            ("dangling.jsonl", f"not read: {disc.LINK_BROKEN}")]


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
    os.mkfifo(root / "broker=1" / "__consumer_offsets-0" / "00000000000000000009.log")
    os.mkfifo(root / "broker=1" / "__consumer_offsets-0" / "00000000000000000009.index")  # ignored anyway
    inv = disc.discover(offsets=str(root))
    assert inv.reasons("offsets") == {disc.NOT_REGULAR: 1}
    assert sorted(Path(u.source).name for u in inv.unrecognised) == ["00000000000000000009.log", "pipe.jsonl"]
    assert {u.reason for u in inv.unrecognised} == {f"not read: {disc.NOT_REGULAR}"}


def test_a_name_that_is_not_utf8_is_quarantined_with_a_printable_source(tmp_path):
    """Linux names are bytes: one that is not UTF-8 cannot go into a table, so it is not read, and says so
    (it used to fail the run's first write)."""
    root, _ = _offsets_tree(tmp_path)
    raw = os.fsencode(root) + b"/broker=1/__consumer_offsets-0/dump\xff.txt"
    with open(raw, "wb") as fh:
        fh.write(b"x")
    os.mkdir(os.fsencode(root) + b"/broker=\xe9")
    with open(os.fsencode(root) + b"/broker=\xe9/a.jsonl", "wb") as fh:
        fh.write(b"{}\n")
    inv = disc.discover(offsets=str(root))
    assert [Path(f.source).name for f in inv.files] == [SEG]
    assert sorted(u.source[len(str(root)) + 1:] for u in inv.unrecognised) == [
        "broker=1/__consumer_offsets-0/dump\\xff.txt", "broker=\\xe9"]
    assert {u.reason for u in inv.unrecognised} == {f"not read: {disc.NAME_NOT_UTF8}"}
    for u in inv.unrecognised:
        u.source.encode("utf-8")
    with pytest.raises(InputError, match="offsets input path is not valid UTF-8: .*broker=\\\\xe9"):
        disc.discover(offsets=os.fsdecode(os.fsencode(root) + b"/broker=\xe9"))


def test_partition_numbers_and_base_offsets_beyond_kafka_s_are_quarantined(tmp_path):
    root, _ = _offsets_tree(tmp_path)
    for d, name in (("__consumer_offsets-99999999999", SEG), ("__consumer_offsets-2147483648", SEG),
                    ("__consumer_offsets-1", "99999999999999999999.log")):
        (root / "broker=1" / d).mkdir(exist_ok=True)
        (root / "broker=1" / d / name).write_bytes(b"x")
    (root / "broker=1" / "__consumer_offsets-2147483647").mkdir()
    (root / "broker=1" / "__consumer_offsets-2147483647" / "09223372036854775807.log").write_bytes(b"x")
    inv = disc.discover(offsets=str(root))
    assert sorted((f.partition, f.base_offset) for f in inv.files) == [(0, 0), (2**31 - 1, 2**63 - 1)]
    assert sorted(u.reason for u in inv.unrecognised) == [disc.PARTITION_RANGE, disc.PARTITION_RANGE,
                                                          disc.BASE_OFFSET_RANGE]
    snap = tmp_path / "logdirs" / "broker=1" / "snapshot=20240301T000000Z" / "t-0"
    snap.mkdir(parents=True)
    (snap / "99999999999999999999.log").write_bytes(b"x")
    inv = disc.discover(logdirs=str(tmp_path / "logdirs"))
    assert [u.reason for u in inv.unrecognised] == [disc.BASE_OFFSET_RANGE] and not inv.files


def test_topics_starting_with_an_underscore_are_decoded_not_hidden(tmp_path):
    snap = tmp_path / "logdirs" / "broker=1" / "snapshot=20240301T000000Z"
    for topic_dir in ("_schemas-0", "_confluent-metrics-3", "orders-0"):
        (snap / topic_dir).mkdir(parents=True)
        (snap / topic_dir / "leader-epoch-checkpoint").write_text("0\n1\n0 0\n")
        (snap / topic_dir / SEG).write_bytes(b"x" * 61)
    (snap / "_SUCCESS").write_text("")
    (snap / "_tmp").mkdir()
    (snap / "_tmp" / "leader-epoch-checkpoint").write_text("0\n0\n")
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


def test_a_root_inside_the_layout_is_read_as_if_its_parent_were_given(tmp_path):
    """An operator points --offsets at one partition folder or one segment, --logdirs at one broker or snapshot:
    the folders above the root name its broker, snapshot and partition (they were ignored or unrecognised)."""
    part = tmp_path / "x" / "broker=7" / "__consumer_offsets-3"
    part.mkdir(parents=True)
    (part / SEG).write_bytes(b"x")
    (part / "00000000000000000000.index").write_bytes(b"x")
    for root in (tmp_path / "x", part.parent, part, part / SEG):
        inv = disc.discover(offsets=str(root))
        assert [(f.broker, f.partition, f.base_offset) for f in inv.files] == [("7", 3, 0)], root
        assert not inv.unrecognised, root
    inv = disc.discover(offsets=str(part / "00000000000000000000.index"))  # alone, not read: said so
    assert not inv.files and [u.reason for u in inv.unrecognised] == [disc.NOT_ALONE["offsets"]]
    other = tmp_path / "orders-0"
    other.mkdir()
    (other / SEG).write_bytes(b"x")
    assert [u.reason for u in disc.discover(offsets=str(other / SEG)).unrecognised] == [
        disc.NOT_ALONE["offsets"]]
    assert disc.discover(offsets=str(other)).ignored  # a folder of another topic: ignored, as inside a root
    dump = tmp_path / "_scratch" / "d.jsonl"  # a dump given alone is read whatever its folder is called
    dump.parent.mkdir()
    dump.write_text("{}\n")
    assert [f.form for f in disc.discover(offsets=str(dump)).files] == [disc.JSONL]
    snap = tmp_path / "logs" / "broker=2" / "snapshot=20240301T000000Z"
    (snap / "t-4").mkdir(parents=True)
    (snap / "t-4" / "leader-epoch-checkpoint").write_text("0\n0\n")
    (snap / "replication-offset-checkpoint").write_text("0\n0\n")
    for root in (tmp_path / "logs", snap.parent, snap):
        inv = disc.discover(logdirs=str(root))
        assert sorted((f.form, f.broker, f.topic, f.partition) for f in inv.files) == [
            (disc.LEC, "2", "t", 4), (disc.ROOT_CKPT, "2", None, None)], root
    inv = disc.discover(logdirs=str(snap / "t-4" / "leader-epoch-checkpoint"))
    assert [(f.broker, f.topic, f.partition, f.snapshot_ms) for f in inv.files] == [("2", "t", 4, 1709251200000)]
    hidden = tmp_path / "y" / "broker=1" / ".trash"  # a hidden layout folder: no prefix, unrecognised as before
    (hidden / "t-0").mkdir(parents=True)
    (hidden / "t-0" / "leader-epoch-checkpoint").write_text("0\n0\n")
    inv = disc.discover(logdirs=str(hidden))
    assert not inv.files and len(inv.unrecognised) == 1


def test_a_root_inside_the_layout_keeps_the_brokers_below_it_and_says_what_it_could_not_read(tmp_path):
    """Review of the prefix: a root below an unrelated broker= folder keeps the brokers named below it; what the
    walk skipped under a root inside the layout is judged as the root's files are (a broken segment link is not
    read: quarantined; a broken index link is nothing lost); a _schemas-0 partition folder is a root like t-0."""
    top = tmp_path / "broker=all" / "export"
    for b in ("1", "2"):
        d = top / f"broker={b}" / "snapshot=20240301T000000Z" / "t-0"
        d.mkdir(parents=True)
        (d / "leader-epoch-checkpoint").write_text("0\n0\n")
    inv = disc.discover(logdirs=str(top))
    assert sorted(f.broker for f in inv.files) == ["1", "2"] and not inv.unrecognised
    part = tmp_path / "o" / "broker=7" / "__consumer_offsets-3"
    part.mkdir(parents=True)
    (part / SEG).write_bytes(b"x")
    os.symlink(tmp_path / "gone", part / "00000000000000000005.log")
    if hasattr(os, "mkfifo"):
        os.mkfifo(part / "00000000000000000009.log")
    inv = disc.discover(offsets=str(part))
    assert [(f.broker, f.partition) for f in inv.files] == [("7", 3)]
    assert sorted(Path(u.source).name for u in inv.unrecognised) == [
        "00000000000000000005.log", *(["00000000000000000009.log"] if hasattr(os, "mkfifo") else [])]
    snap = tmp_path / "l" / "broker=1" / "snapshot=20240301T000000Z"
    (snap / "t-0").mkdir(parents=True)
    (snap / "t-0" / "leader-epoch-checkpoint").write_text("0\n0\n")
    os.symlink(tmp_path / "gone", snap / "t-0" / "00000000000000000000.index")
    (snap / "_schemas-0").mkdir()
    (snap / "_schemas-0" / "leader-epoch-checkpoint").write_text("0\n0\n")
    for root in (snap.parent.parent, snap):
        inv = disc.discover(logdirs=str(root))
        assert not inv.unrecognised and inv.reasons("logdirs") == {disc.LINK_BROKEN: 1}, root
    inv = disc.discover(logdirs=str(snap / "_schemas-0"))
    assert [(f.topic, f.partition) for f in inv.files] == [("_schemas", 0)] and not inv.unrecognised
    (snap / "t-0" / "00000000000000000000.timeindex").write_bytes(b"x")
    inv = disc.discover(logdirs=str(snap / "t-0" / "00000000000000000000.timeindex"))
    assert [u.reason for u in inv.unrecognised] == [disc.NOT_ALONE["logdirs"]]


def test_the_run_s_own_tables_inside_an_input_root_are_not_read_as_input(tmp_path):
    """An output root inside the input root (``--offsets data --output-root data/tables``): the tables' Parquet files
    are output, not offsets dumps or unrecognised files in quarantine, on every input kind; a table folder is skipped
    whole, with its reason, and said in the run's notes."""
    root, _ = _offsets_tree(tmp_path)
    tables = root / "tables"
    for t in ("offset_commits", "quarantine"):
        part = tables / t / "cluster=c1" / "event_date=2024-03-04"
        part.mkdir(parents=True)
        (part / "part-0.parquet").write_bytes(b"PAR1")
        (tables / t / "_delta_log").mkdir()
    (root / "other.parquet").write_bytes(b"PAR1")  # a dump beside them is still input
    exclude = [str(tables / t) for t in ("offset_commits", "quarantine", "fencing_violations")]
    for kind in ("offsets", "logdirs", "metadata"):
        inv = disc.discover(**{kind: str(root)}, exclude=exclude)
        assert not any("/tables/" in f.source for f in inv.files), kind
        assert not any("/tables/" in u.source for u in inv.unrecognised), kind
        assert {(Path(s.source).name, s.reason) for s in inv.skipped} == {
            ("offset_commits", disc.OUTPUT_TABLE), ("quarantine", disc.OUTPUT_TABLE)}, kind
    inv = disc.discover(offsets=str(root), exclude=exclude)
    assert sorted(Path(f.source).name for f in inv.files) == [SEG, "other.parquet"]
    # without the exclusion, the tables are still known for epoch-audit's by their Delta logs
    assert {(Path(s.source).name, s.reason) for s in disc.discover(offsets=str(root)).skipped} == {
        ("offset_commits", disc.AUDIT_TABLE), ("quarantine", disc.AUDIT_TABLE)}
    from jobs.ingest.cluster_metadata import discover_cluster_metadata

    cm = discover_cluster_metadata(str(root), exclude=exclude)
    assert not any("/tables/" in u.source for u in cm.unrecognised)


def test_an_object_store_listing_leaves_out_the_run_s_tables_and_other_runs_tables():
    from jobs.fs import FileEntry

    files = [FileEntry(f"s3://b/in/{p}", p, 4) for p in (
        "a.parquet", "tables/quarantine/x.parquet", "tables/quarantine_old/y.parquet",
        "nightly/offset_commits/_delta_log/00000000000000000000.json", "nightly/offset_commits/c=1/z.parquet",
        "dumps/offset_commits/w.parquet")]  # a folder named like a table, without a Delta log: input
    out = disc._without(disc.Listing(files=list(files)), ["s3://b/in/tables/quarantine/", "s3://b/in/tables/t2"])
    assert [e.rel for e in out.files] == ["a.parquet", "tables/quarantine_old/y.parquet",
                                          "dumps/offset_commits/w.parquet"]
    assert out.skipped == [("s3://b/in/tables/quarantine", disc.OUTPUT_TABLE),
                           ("s3://b/in/nightly/offset_commits", disc.AUDIT_TABLE)]


def test_another_run_s_tables_inside_an_input_root_are_not_read_as_input(tmp_path):
    """The nightly writes under the offsets root; an incident run with its own --output-root read the nightly's
    Parquet files as dumps (a review: 32 quarantine rows and a `partial` source). A folder named like a table but
    without a Delta log is still read."""
    root, _ = _offsets_tree(tmp_path)
    table = root / "nightly" / "offset_commits"
    (table / "_delta_log").mkdir(parents=True)
    (table / "_delta_log" / "00000000000000000000.json").write_text("{}")
    (table / "cluster=c1").mkdir()
    (table / "cluster=c1" / "part-0.parquet").write_bytes(b"PAR1")
    (root / "dumps" / "offset_commits").mkdir(parents=True)
    (root / "dumps" / "offset_commits" / "d.parquet").write_bytes(b"PAR1")
    inv = disc.discover(offsets=str(root))
    assert sorted(Path(f.source).name for f in inv.files) == [SEG, "d.parquet"]
    assert [(Path(s.source).name, s.reason) for s in inv.skipped] == [("offset_commits", disc.AUDIT_TABLE)]
    assert not inv.unrecognised


def test_only_the_highest_base_offset_of_a_partition_folder_is_its_last_segment(tmp_path):
    """Kafka appends only to a partition's last segment, so only it may be cut by a copy (a rolled one cut short lost
    bytes): discovery marks it per folder — an empty active segment still makes the one before it rolled."""
    from jobs.ingest.discover import discover

    snap = tmp_path / "broker=1" / "snapshot=20240304T120000Z"
    names = {"a-0": ["00000000000000000000.log", "00000000000000000021.log"],
             "b-0": ["00000000000000000000.log"], "c-0": ["00000000000000000000.log", "00000000000000000005.log"]}
    for part, segs in names.items():
        (snap / part).mkdir(parents=True)
        for n in segs:
            (snap / part / n).write_bytes(b"" if part == "c-0" and n.startswith("00000000000000000005") else b"x")
    inv = discover(logdirs=str(tmp_path))
    last = {f.source.split("/snapshot=20240304T120000Z/")[1]: f.last_segment for f in inv.of("logdirs")}
    assert last == {"a-0/00000000000000000000.log": False, "a-0/00000000000000000021.log": True,
                    "b-0/00000000000000000000.log": True, "c-0/00000000000000000000.log": False}
