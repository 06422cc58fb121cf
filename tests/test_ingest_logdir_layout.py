"""Log-dir snapshots and ``__consumer_offsets`` copies as operators make them (a review of the log-dir reader):
a ``broker=<hostname>`` folder, the files Kafka keeps beside the logs in a full log-dir copy, topics whose names
start with ``.``, ``partition.metadata`` as Kafka reads it, and segments copied without their partition folder.

Each tree is written by hand, file by file, and read the way a user reads it: discovery, and a ``run`` of the CLI
on the shared ``local[1]`` session (its terminal summary, ``epoch_lineage``, ``quarantine``).
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner
from deltalake import DeltaTable

from epochlib import coordinator, records
from jobs.cli import cli
from jobs.ingest import discover as disc

SNAP = "snapshot=20240304T120000Z"
TID = "dGVzdHRvcGljdGVzdDAxMg"  # a topic id as Kafka prints it (22 characters of base64url)
SEG = "00000000000000000000.log"
T0 = 1_709_553_600_000  # 2024-03-04T12:00:00Z
README = Path(__file__).resolve().parent.parent / "README.md"


def _write(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


def _run(tmp_path: Path, **inputs: Path) -> tuple[int, str, dict]:
    """``epoch-audit run`` over the given input roots on 2024-03-04: exit code, terminal output, JSON summary."""
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-04", "--output-root", str(out), "--cluster", "t", "-q",
            "--summary-json", str(tmp_path / "s.json")]
    for kind, root in inputs.items():
        args += [f"--{kind}", str(root)]
    res = CliRunner().invoke(cli, args)
    summary = json.loads((tmp_path / "s.json").read_text()) if (tmp_path / "s.json").exists() else {}
    return res.exit_code, res.output, summary


def _table(tmp_path: Path, name: str) -> list[dict]:
    path = tmp_path / "tables" / name
    return DeltaTable(str(path)).to_pyarrow_table().to_pylist() if path.exists() else []


# --- item 3: a broker= folder named by host ------------------------------------------------------------------


def test_discovery_takes_a_broker_folder_for_a_node_id_only(tmp_path):
    root = tmp_path / "logdirs"
    for broker in ("kafka-1", "1", "-1", "2147483648", "0x1"):
        _write(root / f"broker={broker}" / SNAP / "t-0" / "leader-epoch-checkpoint", "0\n1\n0 0\n")
    _write(root / "broker=all" / "export" / "broker=2" / SNAP / "t-0" / "leader-epoch-checkpoint", "0\n0\n")
    inv = disc.discover(logdirs=str(root))
    assert sorted(f.broker for f in inv.files) == ["1", "2"]  # the broker= folder nearest the snapshot names it
    assert sorted(u.reason for u in inv.unrecognised) == sorted(
        f"{disc.BROKER_NOT_NODE_ID}: broker={b}" for b in ("kafka-1", "-1", "2147483648", "0x1"))
    assert disc.is_node_id("0") and disc.is_node_id("2147483647") and not disc.is_node_id("")


@pytest.mark.spark
def test_a_broker_folder_named_by_host_is_quarantined_and_the_run_goes_on(spark, tmp_path):
    """``broker=kafka-1`` failed the whole run (exit 4, CAST_INVALID_INPUT in epoch_lineage's broker column)."""
    root = tmp_path / "logdirs"
    _write(root / "broker=kafka-1" / SNAP / "t-0" / "leader-epoch-checkpoint", "0\n1\n0 0\n")
    _write(root / "broker=2" / SNAP / "t-0" / "leader-epoch-checkpoint", "0\n1\n0 0\n")
    code, output, summary = _run(tmp_path, logdirs=root)
    assert code == 0, output
    assert "Status: partial" in output and summary["status"] == "partial"
    assert [(r["broker"], r["topic"]) for r in _table(tmp_path, "epoch_lineage")] == [(2, "t")]
    q = _table(tmp_path, "quarantine")
    assert [(Path(r["source"]).parent.parent.parent.name, r["reason"]) for r in q] == [
        ("broker=kafka-1", f"{disc.BROKER_NOT_NODE_ID}: broker=kafka-1")]


# --- item 4: the files Kafka keeps beside the logs, in a full log-dir copy -------------------------------------


def _full_log_dir(snap: Path) -> None:
    """One broker's log dir copied whole (``rsync -a /var/lib/kafka/data/ …``), as it is while Kafka runs: the
    partition's files, tiered storage's index cache, and the ``.tmp`` files of atomic writes in flight."""
    _write(snap / "t-0" / "leader-epoch-checkpoint", "0\n1\n0 0\n")
    _write(snap / "t-0" / "partition.metadata", f"version: 0\ntopic_id: {TID}")
    for name in ("00000000000000000000.index", "00000000000000000000.timeindex", "00000000000000000005.snapshot",
                 "00000000000000000007.snapshot.tmp", "leader-epoch-checkpoint.tmp"):
        _write(snap / "t-0" / name, "x")
    cache = snap / "remote-log-index-cache"
    for name in ("1000_Q2FjaGVkU2VnbWVudElkMQ.index", "1000_Q2FjaGVkU2VnbWVudElkMQ.timeindex",
                 "1000_Q2FjaGVkU2VnbWVudElkMQ.txnindex", "900_T2xkU2VnbWVudElkMDAwMQ.index.deleted",
                 "1100_TmV3U2VnbWVudElkMDAwMQ.index.tmp"):
        _write(cache / name, "\0" * 16)
    for name in ("meta.properties", "meta.properties.tmp", "bootstrap.checkpoint", "bootstrap.checkpoint.tmp",
                 ".lock", ".kafka_cleanshutdown", "cleaner-offset-checkpoint", "replication-offset-checkpoint.tmp"):
        _write(snap / name, "x")
    _write(snap / "__cluster_metadata-0" / "quorum-state", '{"leaderId":1}')
    _write(snap / "__cluster_metadata-0" / "quorum-state.tmp", '{"lea')
    _write(snap / "replication-offset-checkpoint", "0\n1\nt 0 1\n")


def test_discovery_ignores_the_files_kafka_keeps_beside_the_logs(tmp_path):
    """remote-log-index-cache/ was quarantined as "partition 'cache' is not an integer", the .tmp files of Kafka's
    atomic writes as unrecognised: a full log-dir copy made every run partial."""
    from jobs.ingest.cluster_metadata import discover_cluster_metadata

    snap = tmp_path / "logdirs" / "broker=1" / SNAP
    _full_log_dir(snap)
    inv = disc.discover(logdirs=str(tmp_path / "logdirs"))
    assert not inv.unrecognised
    assert sorted((f.form, f.name) for f in inv.files) == [
        (disc.LEC, "leader-epoch-checkpoint"), (disc.PMETA, "partition.metadata"),
        (disc.ROOT_CKPT, "replication-offset-checkpoint")]
    assert not disc.discover(logdirs=str(snap / "remote-log-index-cache")).unrecognised  # a root inside it too
    # the same data directory given whole as the offsets or the cluster_metadata input: nothing of it unrecognised
    assert not disc.discover(offsets=str(snap)).unrecognised
    assert not discover_cluster_metadata(str(snap)).unrecognised


@pytest.mark.spark
def test_a_full_log_dir_copy_is_an_ok_run(spark, tmp_path):
    _full_log_dir(tmp_path / "logdirs" / "broker=1" / SNAP)
    code, output, summary = _run(tmp_path, logdirs=tmp_path / "logdirs")
    assert code == 0, output
    assert "Status: ok" in output and summary["sources"]["logdirs"]["status"] == "ok", output
    assert not _table(tmp_path, "quarantine")
    assert [(r["topic"], r["topic_id"], r["high_watermark"]) for r in _table(tmp_path, "epoch_lineage")] == [
        ("t", TID, 1)]


# --- item 6: topics whose names start with "." --------------------------------------------------------------


def test_discovery_reads_a_topic_starting_with_a_dot_and_still_ignores_dot_files(tmp_path):
    """Kafka refuses only the topic names "." and ".." (Topic.validate): ".hidden-0" is a partition it loads, and
    was ignored like a hidden file, without a trace."""
    snap = tmp_path / "logdirs" / "broker=1" / SNAP
    for topic_dir in (".hidden-0", "...-2", "t-0"):
        _write(snap / topic_dir / "leader-epoch-checkpoint", "0\n1\n0 0\n")
    for hidden in (".-0/leader-epoch-checkpoint", "..-1/leader-epoch-checkpoint", ".lock", ".kafka_cleanshutdown",
                   ".replication-offset-checkpoint.tmp", ".trash/t-0/leader-epoch-checkpoint",
                   "t-0/.leader-epoch-checkpoint.tmp", ".hidden-0/.partition.metadata.Ab12Cd",
                   ".hidden-0.0123456789abcdef0123456789abcdef-delete/leader-epoch-checkpoint"):
        _write(snap / hidden, "0\n0\n")
    inv = disc.discover(logdirs=str(tmp_path / "logdirs"))
    assert sorted((f.topic, f.partition) for f in inv.files) == [("...", 2), (".hidden", 0), ("t", 0)]
    assert not inv.unrecognised and len(inv.ignored) == 9
    inv = disc.discover(logdirs=str(snap / ".hidden-0"))  # the partition folder as the root: the same partition
    assert [(f.broker, f.topic, f.partition) for f in inv.files] == [("1", ".hidden", 0)]


@pytest.mark.spark
def test_a_topic_starting_with_a_dot_gets_its_lineage_and_findings(spark, tmp_path):
    snap = tmp_path / "logdirs" / "broker=1" / SNAP
    _write(snap / ".hidden-0" / "leader-epoch-checkpoint", "0\n2\n5 100\n3 200\n")  # not monotonic: L2
    _write(snap / ".hidden-0" / "partition.metadata", f"version: 0\ntopic_id: {TID}")
    _write(snap / "replication-offset-checkpoint", "0\n1\n.hidden 0 300\n")
    _write(snap / ".lock", "")
    code, output, _ = _run(tmp_path, logdirs=tmp_path / "logdirs")
    assert code == 0, output
    assert "L2 lineage_not_monotonic" in output and "Status: ok" in output, output
    assert [(r["topic"], r["partition"], r["topic_id"], r["high_watermark"])
            for r in _table(tmp_path, "epoch_lineage")] == [(".hidden", 0, TID, 300)]
    assert [(r["topic"], r["kind"]) for r in _table(tmp_path, "fencing_violations")] == [
        (".hidden", "lineage_not_monotonic")]


# --- item 7: partition.metadata as Kafka reads it ------------------------------------------------------------


@pytest.mark.spark
def test_partition_metadata_kafka_reads_gives_the_topic_id_and_what_it_refuses_is_quarantined(spark, tmp_path):
    """Kafka's PartitionMetadataReadBuffer reads any version >= 0 and two lines by position; a version 1, a third
    line or other key names were quarantined and the replica's topic id lost."""
    snap = tmp_path / "logdirs" / "broker=1" / SNAP
    files = {"v1-0": f"version: 1\ntopic_id: {TID}", "extra-0": f"version: 0\ntopic_id: {TID}\nextra: 1\n",
             "keys-0": f"Version: 0\ntopicId: {TID}", "neg-0": f"version: -1\ntopic_id: {TID}"}
    for topic_dir, text in files.items():
        _write(snap / topic_dir / "leader-epoch-checkpoint", "0\n1\n0 0\n")
        _write(snap / topic_dir / "partition.metadata", text)
    code, output, summary = _run(tmp_path, logdirs=tmp_path / "logdirs")
    assert code == 0, output
    assert sorted((r["topic"], r["topic_id"]) for r in _table(tmp_path, "epoch_lineage")) == [
        ("extra", TID), ("keys", TID), ("neg", None), ("v1", TID)]
    assert [(Path(r["source"]).parent.name, r["reason"]) for r in _table(tmp_path, "quarantine")] == [
        ("neg-0", "partition.metadata: unrecognised partition.metadata version -1 at line 1")]
    assert summary["sources"]["logdirs"]["units_quarantined"] == 1


# --- item 8: __consumer_offsets segments copied without their partition folder ---------------------------------


def _segment(group: str, offsets: tuple[int, ...]) -> bytes:
    """A __consumer_offsets segment holding ``group``'s commits to orders-0, one batch each."""
    key = coordinator.encode_offset_commit_key(group, "orders", 0)
    return b"".join(records.encode_batch([records.NewRecord(
        key, coordinator.encode_offset_commit_value(off, leader_epoch=1, commit_timestamp=T0 + i), T0 + i)],
        base_offset=i) for i, off in enumerate(offsets))


def test_a_segment_outside_a_partition_folder_is_quarantined_not_ignored(tmp_path):
    """`rsync -a data/__consumer_offsets-*/ offsets/broker=1/` (README's old command) copied every partition's files
    into broker=1/ itself: the segments overwrote each other and the survivor was ignored as "another topic's"."""
    root = tmp_path / "offsets"
    (root / "broker=1").mkdir(parents=True)
    (root / "broker=1" / SEG).write_bytes(b"x")  # flat: the partition folder is missing
    (root / "broker=1" / "00000000000000000000.index").write_bytes(b"x")  # an index stays ignored
    for folder in ("__consumer_offsets-3.0123456789abcdef0123456789abcdef-delete", "orders-0", "__consumer_offsets-4"):
        (root / "broker=2" / folder).mkdir(parents=True)
        (root / "broker=2" / folder / SEG).write_bytes(b"x")
    inv = disc.discover(offsets=str(root))
    assert [(f.broker, f.partition) for f in inv.files] == [("2", 4)]
    assert [(u.source[len(str(root)) + 1:], u.reason) for u in inv.unrecognised] == [
        (f"broker=1/{SEG}", disc.NO_PARTITION_DIR)]
    assert len(inv.ignored) == 3  # the index, the -delete copy's and another topic's segment
    for given in (root / "broker=1", root / "broker=1" / SEG):  # the same file as the root, or in the root
        assert [u.reason for u in disc.discover(offsets=str(given)).unrecognised] == [disc.NO_PARTITION_DIR], given
    snap = tmp_path / "logdirs" / "broker=1" / SNAP
    snap.mkdir(parents=True)
    (snap / SEG).write_bytes(b"x")  # a partition's segment at a log-dir snapshot's root
    assert [u.reason for u in disc.discover(logdirs=str(tmp_path / "logdirs")).unrecognised] == [
        disc.NO_PARTITION_DIR]


def _readme_command(start: str) -> str:
    """The backquoted command of README's input table that starts with ``start``."""
    commands = re.findall(r"`([^`]*rsync [^`]*)`", README.read_text())
    found = [c for c in commands if c.startswith(start)]
    assert len(found) == 1, commands
    return found[0]


def _broker_data_dir(data: Path) -> None:
    """A broker's /var/lib/kafka/data with two __consumer_offsets partitions and the copies Kafka keeps while it
    deletes or moves one, and a topic."""
    for folder, group in (("__consumer_offsets-0", "g0"), ("__consumer_offsets-12", "g12"),
                          ("__consumer_offsets-3.0123456789abcdef0123456789abcdef-delete", "gone"),
                          ("__consumer_offsets-5.0123456789abcdef0123456789abcdef-future", "moving"),
                          ("__consumer_offsets-7.0123456789abcdef0123456789abcdef-stray", "stray"),
                          ("orders-0", None)):
        (data / folder).mkdir(parents=True)
        if group:
            (data / folder / SEG).write_bytes(_segment(group, (1, 2)))
        (data / folder / "00000000000000000000.index").write_bytes(b"\0" * 8)
        _write(data / folder / "leader-epoch-checkpoint", "0\n1\n0 0\n")
        _write(data / folder / "partition.metadata", f"version: 0\ntopic_id: {TID}")
    _write(data / "replication-offset-checkpoint", "0\n2\n__consumer_offsets 0 2\norders 0 0\n")
    _write(data / "meta.properties", "node.id=1\n")


@pytest.mark.skipif(shutil.which("rsync") is None or shutil.which("bash") is None, reason="needs rsync and bash")
def test_the_readme_s_collect_commands_keep_the_partition_folders(tmp_path):
    """The README's rsync commands, run as written on a broker's data directory (its path swapped for a local one),
    give trees every file of which the run reads or knowingly ignores: the partition folders kept, the -delete,
    -future and -stray copies left out."""
    data = tmp_path / "data"
    _broker_data_dir(data)
    offsets_cmd = _readme_command("mkdir -p offsets/broker=1 && rsync")
    remote = "'broker1:/var/lib/kafka/data/__consumer_offsets-*'"  # quoted: the broker's shell expands it
    assert remote in offsets_cmd
    subprocess.run(["bash", "-c", offsets_cmd.replace(remote, f"{data}/__consumer_offsets-*")], cwd=tmp_path,
                   check=True)
    copied = sorted(p.relative_to(tmp_path / "offsets").as_posix() for p in (tmp_path / "offsets").rglob("*")
                    if p.is_file())
    assert copied == [f"broker=1/__consumer_offsets-0/{SEG}", f"broker=1/__consumer_offsets-12/{SEG}"]
    inv = disc.discover(offsets=str(tmp_path / "offsets"))
    assert sorted(f.partition for f in inv.files) == [0, 12] and not inv.unrecognised
    logdirs_cmd = _readme_command("ts=$(date -u +%Y%m%dT%H%M%SZ); mkdir -p logdirs/broker=$ID/snapshot=$ts && rsync")
    subprocess.run(["bash", "-c", logdirs_cmd.replace("/var/lib/kafka/data/", f"{data}/")], cwd=tmp_path,
                   check=True, env={"ID": "1", "PATH": "/usr/bin:/bin"})
    inv = disc.discover(logdirs=str(tmp_path / "logdirs"))
    assert not inv.unrecognised
    assert sorted((f.broker, f.topic, f.partition) for f in inv.of("logdirs", disc.LEC)) == [
        ("1", "__consumer_offsets", 0), ("1", "__consumer_offsets", 12), ("1", "orders", 0)]


@pytest.mark.spark
def test_a_flat_segment_is_quarantined_and_a_jbod_broker_s_log_dirs_keep_their_checkpoints(spark, tmp_path):
    """A run on broker 2's flat copy said nothing of it (its segment ignored); now the run is partial and says
    why. Broker 1's two log dirs, each in a snapshot folder of its own at the same time (README), keep each
    its own root checkpoint."""
    off = tmp_path / "offsets"
    (off / "broker=1" / "__consumer_offsets-0").mkdir(parents=True)
    (off / "broker=1" / "__consumer_offsets-0" / SEG).write_bytes(_segment("g-ok", (10, 20)))
    (off / "broker=2").mkdir()
    (off / "broker=2" / SEG).write_bytes(_segment("g-flat", (10, 20)))
    logs = tmp_path / "logdirs"
    for disk, partition in (("d1", 0), ("d2", 1)):
        snap = logs / disk / "broker=1" / SNAP
        _write(snap / f"orders-{partition}" / "leader-epoch-checkpoint", "0\n1\n1 0\n")
        _write(snap / "replication-offset-checkpoint", f"0\n1\norders {partition} {100 + partition}\n")
    code, output, summary = _run(tmp_path, offsets=off, logdirs=logs)
    assert code == 0, output
    assert summary["sources"]["offsets"]["status"] == "partial" and "Status: partial" in output, output
    assert [(Path(r["source"]).parent.name, r["reason"]) for r in _table(tmp_path, "quarantine")] == [
        ("broker=2", disc.NO_PARTITION_DIR)]
    assert {r["group_id"] for r in _table(tmp_path, "offset_commits")} == {"g-ok"}
    assert sorted((r["broker"], r["partition"], r["high_watermark"]) for r in _table(tmp_path, "epoch_lineage")) == [
        (1, 0, 100), (1, 1, 101)]
