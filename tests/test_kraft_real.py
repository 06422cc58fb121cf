"""The three real ``__cluster_metadata-0`` logs: every count, topic and history of
kraft-metadata.md §5 reproduced exactly; each snapshot equal to the replay of the log up to its
offset; the Arrow path equal to the reference; the dump text equal to the bytes; ``decode``."""

from __future__ import annotations

import dataclasses
import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from epochlib import checkpoint
from epochlib.kraft import arrow, dumptext
from epochlib.kraft.codec import MetadataEntry, MetadataError, iter_metadata_log
from epochlib.kraft.replay import compare_images, merge_copies, replay
from epochlib.kraft.snapshot import read_snapshot
from epochlib.records import BadBatch, iter_batches

K24, K23, KMS = "kraft-single-broker-2024", "kraft-aibulb-2023", "kraft-microservice"
SEG = "__cluster_metadata-0/00000000000000000000.log"


def _dir(real_data: Path, which: str) -> Path:
    return real_data / which / "__cluster_metadata-0"


@pytest.fixture(scope="module")
def logs(real_data: Path) -> dict[str, bytes]:
    return {k: (real_data / k / SEG).read_bytes() for k in (K24, K23, KMS)}


@pytest.fixture(scope="module")
def entries(logs) -> dict[str, list]:
    return {k: list(iter_metadata_log(v)) for k, v in logs.items()}


def _counts(items) -> Counter:
    c: Counter = Counter()
    for e in items:
        assert isinstance(e, MetadataEntry), e
        c[e.control.name if e.control else (e.record.name, e.record.version)] += 1
    return c


# §5.2 ------------------------------------------------------------------------------------------

EXPECTED = {
    K24: {"LeaderChangeMessage": 5, ("NoOpRecord", 0): 6232, ("PartitionChangeRecord", 1): 482,
          ("PartitionRecord", 1): 54, ("TopicRecord", 0): 5, ("RegisterBrokerRecord", 3): 5,
          ("RegisterControllerRecord", 0): 5, ("BrokerRegistrationChangeRecord", 0): 10,
          ("BrokerRegistrationChangeRecord", 1): 5, ("ConfigRecord", 0): 3, ("FeatureLevelRecord", 0): 1,
          ("ProducerIdsRecord", 0): 4, ("ZkMigrationStateRecord", 0): 1, ("BeginTransactionRecord", 0): 1,
          ("EndTransactionRecord", 0): 1},
    K23: {"LeaderChangeMessage": 1, ("NoOpRecord", 0): 11312, ("PartitionRecord", 0): 51, ("TopicRecord", 0): 2,
          ("RegisterBrokerRecord", 2): 1, ("BrokerRegistrationChangeRecord", 0): 1, ("ConfigRecord", 0): 3,
          ("FeatureLevelRecord", 0): 1},
    KMS: {"LeaderChangeMessage": 4, ("NoOpRecord", 0): 29672, ("PartitionChangeRecord", 0): 318,
          ("PartitionRecord", 0): 53, ("TopicRecord", 0): 2, ("RegisterBrokerRecord", 2): 3,
          ("BrokerRegistrationChangeRecord", 0): 7, ("BrokerRegistrationChangeRecord", 1): 2,
          ("ConfigRecord", 0): 3, ("FeatureLevelRecord", 0): 1, ("ZkMigrationStateRecord", 0): 1,
          ("BeginTransactionRecord", 0): 1, ("EndTransactionRecord", 0): 1},
}
BATCHES = {K24: (6268, 6814), K23: (11318, 11372), KMS: (29551, 30068)}


@pytest.mark.parametrize("which", [K24, K23, KMS])
def test_record_counts_per_type_and_version(entries, which: str) -> None:
    assert _counts(entries[which]) == EXPECTED[which]


@pytest.mark.parametrize("which", [K24, K23, KMS])
def test_batches_are_valid_uncompressed_and_counted(logs, which: str) -> None:
    bs = list(iter_batches(logs[which]))
    assert not [b for b in bs if isinstance(b, BadBatch)]
    assert (len(bs), sum(b.records_count for b in bs)) == BATCHES[which]
    assert {b.compression for b in bs} == {"none"} and all(b.crc_valid for b in bs)
    assert all(r.key is None for b in bs if not b.is_control for r in b.records)
    if which == K24:
        assert sum(1 for b in bs if b.records_count == 1) == 6252


def test_k23_snapshot_counts(real_data: Path) -> None:
    p = _dir(real_data, K23) / "00000000000000007259-0000000001.checkpoint"
    snap = read_snapshot(p.read_bytes(), name=p.name)
    assert snap.complete and (snap.end_offset, snap.epoch) == (7259, 1)
    assert len(list(iter_batches(p.read_bytes()))) == 3 and len(snap.entries) == 60
    assert _counts(snap.entries) == {"SnapshotHeaderRecord": 1, "SnapshotFooterRecord": 1, ("PartitionRecord", 0): 51,
                                     ("TopicRecord", 0): 2, ("RegisterBrokerRecord", 2): 1, ("ConfigRecord", 0): 3,
                                     ("FeatureLevelRecord", 0): 1}
    # header time = append time of log offset 7258 (§2.4)
    assert snap.last_contained_timestamp == 1684029359186


@pytest.mark.parametrize("name", ["00000000000000007260-0000000001.checkpoint",
                                  "00000000000000024828-0000000003.checkpoint"])
def test_kms_snapshots_have_header_footer_and_a_migration_state(real_data: Path, name: str) -> None:
    snap = read_snapshot((_dir(real_data, KMS) / name).read_bytes(), name=name)
    c = _counts(snap.entries)
    assert snap.complete and c["SnapshotHeaderRecord"] == c["SnapshotFooterRecord"] == 1
    assert c[("ZkMigrationStateRecord", 0)] == 1


@pytest.mark.parametrize(("which", "level"), [(K24, 20), (K23, 8)])
def test_bootstrap_checkpoint_holds_metadata_version(real_data: Path, which: str, level: int) -> None:
    snap = read_snapshot((real_data / which / "bootstrap.checkpoint").read_bytes(), name="bootstrap.checkpoint")
    (rec,) = snap.records
    assert snap.complete and snap.end_offset is None
    assert rec.record.data == {"name": "metadata.version", "feature_level": level}


# §5.5 byte vectors at their file positions --------------------------------------------------------

VECTORS = [
    (K24, SEG, 13744, "01 02 00 05 74657374 8e0f9e8341114e4680c17e758e9af6a1 00"),
    (K24, SEG, 13778, "01 03 01 00000000 8e0f9e8341114e4680c17e758e9af6a1 02 00000001 02 00000001 01 01 00000001 "
                      "00000000 00000000 02 3d267a26b72a1363624c17e6aa315cbf 00"),
    (K23, "__cluster_metadata-0/00000000000000007259-0000000001.checkpoint", 310,
     "01 03 00 00000000 a5c80182e3804a2ab7ba3913ac6bbf43 02 00000001 02 00000001 01 01 00000001 00000000 00000000 00"),
    (K23, SEG, 167207, "01 03 00 00000000 a5c80182e3804a2ab7ba3913ac6bbf43 02 00000001 02 00000001 01 01 00000001 "
                       "00000000 00000000 00"),
    (K24, SEG, 69697, "01 05 01 00000000 8e0fb3057c1946da93900acc3aea3202 01 01 04 ffffffff"),
    (K24, SEG, 72398, "01 05 01 00000000 8e0f9e8341114e4680c17e758e9af6a1 01 01 04 00000001"),
    (K24, SEG, 72298, "01 11 00 00000001 00000000000003fe 01 00 01 ff"),
    (K24, SEG, 69671, "01 11 01 00000001 0000000000000006 01 01 01 01"),
    (K24, SEG, 645, "0000000000000008 0000003c 00000001 02 797a9084 0000 00000000 0000019271f78684 0000019271f78684 "
                    "ffffffffffffffff ffff ffffffff 00000001 14 00 00 00 01 08 01140000 00"),
]


@pytest.mark.parametrize(("which", "path", "at", "hexs"), VECTORS)
def test_spec_vectors_are_the_file_bytes(real_data: Path, which: str, path: str, at: int, hexs: str) -> None:
    raw = bytes.fromhex(hexs.replace(" ", ""))
    assert (real_data / which / path).read_bytes()[at:at + len(raw)] == raw


# §5.3 / §5.4 ------------------------------------------------------------------------------------

TOPICS = {
    K24: {"test": ("jg-eg0ERTkaAwX51jpr2oQ", 1, 189), "__consumer_offsets": ("Rkh9AX0GSAe8U38BBNFwlg", 50, 242),
          "first": ("mnjqLRqrSwSh1xz9beGobA", 1, 372), "sensor-data-topic": ("jg-zBXwZRtqTkArMOuoyAg", 1, 614),
          "sensor-data": ("_8GXajk4QRewcM7P7IIz9A", 1, 1905)},
    K23: {"my-topic": ("pcgBguOASiq3ujkTrGu_Qw", 1, 2319), "__consumer_offsets": ("DuF3GEJ3RHuB62-zMzajeA", 50, 2321)},
    KMS: {"__consumer_offsets": ("bBBFYnFTQxKI233Q08M3NA", 50, None), "order_created": ("q78Hxe0QSZyFQ2Zdyc-gIA", 3, None)},
}


@pytest.mark.parametrize("which", [K24, K23, KMS])
def test_topics_ids_partitions_and_creation(entries, which: str) -> None:
    r = replay(entries[which])
    assert not r.issues
    got = {}
    for tid, name in r.topics.items():
        created = [x.metadata_offset for x in r.rows if x.topic_id == tid and x.change == "topic_created"]
        got[name] = (tid, sum(1 for k in r.partitions if k[0] == tid), created[0])
    want = TOPICS[which]
    assert {n: (t, p) for n, (t, p, _) in got.items()} == {n: (t, p) for n, (t, p, _) in want.items()}
    assert all(got[n][2] == o for n, (_, _, o) in want.items() if o is not None)
    changes = {c for x in r.rows for c in x.change.split(",")}
    assert not changes & {"topic_deleted", "topic_recreated", "expanded", "replaced"}  # none in these logs


HISTORIES = {
    (K24, "__consumer_offsets", 0): [(246, 1728489016522, 1, 0, 0), (967, 1728489349781, -1, 1, 1),
                                     (1028, 1728489391050, 1, 2, 2), (1499, 1728489600938, -1, 3, 3),
                                     (1560, 1728489672004, 1, 4, 4), (2169, 1728489950004, -1, 5, 5),
                                     (2231, 1728489991879, 1, 6, 6), (6383, 1728492743724, -1, 7, 7),
                                     (6445, 1728492929294, 1, 8, 8), (6760, 1728493059705, -1, 9, 9)],
    (K24, "sensor-data-topic", 0): [(615, 1728489175133, 1, 0, 0), (965, 1728489349781, -1, 1, 1),
                                    (1026, 1728489391050, 1, 2, 2), (1497, 1728489600938, -1, 3, 3),
                                    (1558, 1728489672004, 1, 4, 4), (2167, 1728489950004, -1, 5, 5),
                                    (2229, 1728489991879, 1, 6, 6), (6381, 1728492743724, -1, 7, 7),
                                    (6443, 1728492929294, 1, 8, 8), (6758, 1728493059705, -1, 9, 9)],
    (K24, "sensor-data", 0): [(1906, 1728489819460, 1, 0, 0), (2220, 1728489950004, -1, 1, 1),
                              (2281, 1728489991879, 1, 2, 2), (6434, 1728492743724, -1, 3, 3),
                              (6495, 1728492929294, 1, 4, 4), (6811, 1728493059705, -1, 5, 5)],
    (K24, "test", 0): [(190, 1728488990897, 1, 0, 0), (1017, 1728489349781, -1, 1, 1),
                       (1027, 1728489391050, 1, 2, 2), (1549, 1728489600938, -1, 3, 3),
                       (1559, 1728489672004, 1, 4, 4), (2219, 1728489950004, -1, 5, 5),
                       (2230, 1728489991879, 1, 6, 6), (6433, 1728492743724, -1, 7, 7),
                       (6444, 1728492929294, 1, 8, 8), (6810, 1728493059705, -1, 9, 9)],
    (K23, "my-topic", 0): [(2320, 1684026917079, 1, 0, 0)],
    (KMS, "order_created", 0): [(88, 1764666007747, 1, 0, 0), (14137, 1764673034935, -1, 1, 1),
                                (14220, 1764673488736, 1, 2, 2), (17452, 1764675078869, -1, 3, 3),
                                (17558, 1764675679731, 1, 4, 4), (21009, 1764677395500, -1, 5, 5),
                                (21064, 1764677395552, 1, 6, 6)],
}


@pytest.mark.parametrize("key", list(HISTORIES), ids=[f"{a}-{b}-{c}" for a, b, c in HISTORIES])
def test_partition_histories_exactly(entries, key) -> None:
    which, topic, part = key
    r = replay(entries[which], source=which)
    tid = TOPICS[which][topic][0]
    rows = r.history(tid, part)
    assert [(x.metadata_offset, x.controller_ts, x.leader, x.leader_epoch, x.partition_epoch) for x in rows] == \
        HISTORIES[key]
    assert all(x.replicas == x.isr == (1,) and x.leader_recovery_state == 0 and not x.unclean for x in rows)
    assert rows[0].change == "created" and {x.change for x in rows[1:]} <= {"leader"}
    assert all(x.topic == topic and x.source == which for x in rows)


def test_k23_has_no_partition_change_at_all(entries) -> None:
    r = replay(entries[K23])
    assert all((s.leader, s.leader_epoch, s.partition_epoch) == (1, 0, 0) for s in r.partitions.values())
    assert len(r.partitions) == 51


@pytest.mark.parametrize("which", [K24, K23, KMS])
def test_raft_epochs_equal_the_leader_epoch_checkpoint(real_data: Path, entries, which: str) -> None:
    cp = checkpoint.parse_leader_epoch_checkpoint((_dir(real_data, which) / "leader-epoch-checkpoint").read_bytes())
    assert replay(entries[which]).raft_epochs == dict(cp.entries)


def test_broker_epochs_are_registration_offsets(entries) -> None:
    assert replay(entries[K24]).broker_epochs == {1: [6, 1022, 1553, 2225, 6439]}


SNAPSHOTS = [(K23, "00000000000000007259-0000000001.checkpoint", 51),
             (KMS, "00000000000000007260-0000000001.checkpoint", 53),
             (KMS, "00000000000000024828-0000000003.checkpoint", 53)]


@pytest.mark.parametrize(("which", "name", "parts"), SNAPSHOTS)
def test_each_snapshot_equals_the_replay_of_the_log_up_to_its_offset(real_data: Path, entries, which, name,
                                                                     parts) -> None:
    snap = read_snapshot((_dir(real_data, which) / name).read_bytes(), name=name)
    from_snap = replay([], snapshot=snap)
    from_log = replay(entries[which], upto=snap.end_offset - 1)
    assert len(from_snap.partitions) == parts
    assert compare_images(from_snap, from_log) == []
    # and a replay started from the snapshot ends where the whole log ends
    started = replay(entries[which], snapshot=snap)
    assert compare_images(started, replay(entries[which])) == [] and not started.issues
    if name.startswith("00000000000000024828"):
        oc = [s for (t, _), s in from_snap.partitions.items() if t == "q78Hxe0QSZyFQ2Zdyc-gIA"]
        assert {(s.leader_epoch, s.partition_epoch) for s in oc} == {(6, 6)}


def test_snapshot_start_gives_snapshot_rows_then_log_rows(real_data: Path, entries) -> None:
    name = "00000000000000007260-0000000001.checkpoint"
    snap = read_snapshot((_dir(real_data, KMS) / name).read_bytes(), name=name)
    rows = replay(entries[KMS], snapshot=snap).history("q78Hxe0QSZyFQ2Zdyc-gIA", 0)
    assert (rows[0].change, rows[0].metadata_offset, rows[0].controller_ts) == \
        ("snapshot", 7259, snap.last_contained_timestamp)
    assert [x.metadata_offset for x in rows[1:]] == [o for o, *_ in HISTORIES[(KMS, "order_created", 0)][1:]]


# the Arrow path, dump text, merging, decode -------------------------------------------------------------


@pytest.mark.parametrize("which", [K24, K23, KMS])
def test_arrow_path_equals_reference(logs, which: str) -> None:
    got = arrow.metadata_records_arrow(logs[which]).to_pylist()
    want = arrow.metadata_records_rows(logs[which])
    assert len(got) == BATCHES[which][1] and got == want


def test_arrow_path_equals_reference_on_a_snapshot(real_data: Path) -> None:
    raw = (_dir(real_data, KMS) / "00000000000000024828-0000000003.checkpoint").read_bytes()
    assert arrow.metadata_records_arrow(raw).to_pylist() == arrow.metadata_records_rows(raw)


@pytest.mark.parametrize("which", [K24, KMS])
def test_dump_text_reads_back_equal_to_the_bytes(logs, entries, which: str) -> None:
    text = dumptext.format_dump(logs[which], "00000000000000000000.log")
    from_text = list(dumptext.iter_dump_entries(text))
    assert len(from_text) == len(entries[which])
    for a, b in zip(entries[which], from_text, strict=True):
        assert (a.offset, a.timestamp, a.raft_epoch, a.record) == (b.offset, b.timestamp, b.raft_epoch, b.record)
    strip = [dataclasses.replace(x, source="", position=0) for x in replay(from_text).rows]
    assert strip == [dataclasses.replace(x, source="", position=0) for x in replay(entries[which]).rows]
    # a binary copy and a text copy of the same log merge without conflicts
    m = merge_copies({"bin": entries[which], "txt": from_text})
    assert not m.conflicts and len(m.entries) == len(entries[which])


def test_merge_two_copies_one_with_a_diverging_tail(entries) -> None:
    log = entries[K24]
    mutated = list(log)
    i = next(k for k, e in enumerate(mutated) if e.record and e.record.name == "PartitionChangeRecord")
    rec = mutated[i].record
    mutated[i] = dataclasses.replace(mutated[i], record=dataclasses.replace(rec, data={**rec.data, "leader": 7}))
    m = merge_copies({"controller": log, "broker": mutated[:-100]})
    assert len(m.entries) == len(log)  # identical records are one
    (c,) = m.conflicts
    assert (c.offset, c.first_source, c.other_source) == (mutated[i].offset, "controller", "broker")
    assert c.first.record.data["leader"] != c.other.record.data["leader"]
    assert all(src == "controller" for src, _ in m.entries)


def test_history_arrow_has_one_row_per_change(entries) -> None:
    r = replay(entries[K24])
    t = arrow.history_arrow(r.rows)
    assert t.schema == arrow.HISTORY_SCHEMA and t.num_rows == len(r.rows) == 5 + 54 + 482


def test_decode_cli_on_real_metadata_files(real_data: Path) -> None:
    from jobs.cli import cli

    runner = CliRunner()
    res = runner.invoke(cli, ["decode", str(real_data / K24 / SEG)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.output.splitlines()]
    assert len(rows) == 6814 and Counter(r["type"] for r in rows) == {"metadata_record": 6809, "control_record": 5}
    r190 = next(r for r in rows if r.get("offset") == 190)
    assert (r190["record_type"], r190["data"]["topic_id"], r190["raft_epoch"]) == \
        ("PartitionRecord", "jg-eg0ERTkaAwX51jpr2oQ", 1)
    snap = _dir(real_data, K23) / "00000000000000007259-0000000001.checkpoint"
    res = runner.invoke(cli, ["decode", str(snap)])
    first = json.loads(res.output.splitlines()[0])
    assert res.exit_code == 0 and first == {"type": "snapshot", "end_offset": 7259, "epoch": 1,
                                            "last_contained_timestamp": 1684029359186, "complete": True}


def test_no_decode_errors_anywhere(entries) -> None:
    assert not [e for v in entries.values() for e in v if isinstance(e, MetadataError)]


def test_snapshot_dump_text_reads_back_equal(real_data: Path) -> None:
    name = "00000000000000024828-0000000003.checkpoint"
    raw = (_dir(real_data, KMS) / name).read_bytes()
    text = dumptext.format_dump(raw, name, kind="snapshot", snapshot_id=(24828, 3))
    assert [(f.kind, f.end_offset, f.epoch) for f in dumptext.dump_files(text)] == [("snapshot", 24828, 3)]
    strip = [dataclasses.replace(e, position=0) for e in dumptext.iter_dump_entries(text)]
    assert strip == [dataclasses.replace(e, position=0) for e in read_snapshot(raw, name=name).entries]
