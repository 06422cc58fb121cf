"""The simulator's KRaft metadata log (issue 15 item 4): it decodes with the codec, reads back through an
independent path (kafka-python's batch reader + the spec's field layout), agrees with what the brokers and
the ground truth say, and leaves the truth of every earlier kind as it was."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from epochlib.sim import Anomalies, Scenario, preset, simulate
from epochlib.sim.kraftlog import ControllerLog

TINY = Scenario(name="tiny-kraft", seed=11, days=0.25, brokers=3, partitions=3, commits=600,
                snapshot_interval_hours=1.5, retention_hours=1.0, extra_metadata_clients=1, metadata_interval_s=900,
                data_tail_records=200)  # fmt: skip
NEW_RULES = {"K1", "K2", "M5", "P1"}


@pytest.fixture(scope="module")
def demo(tmp_path_factory):
    return simulate(preset("demo"), tmp_path_factory.mktemp("sim-kraft") / "demo")


def _dir(res) -> Path:
    (d,) = list(res.cluster_metadata.glob("node=*/__cluster_metadata-0"))
    return d


def _truth(res) -> list[dict]:
    return [json.loads(x) for x in res.truth.read_text().splitlines()]


def _replay(res):
    from epochlib.kraft import iter_metadata_log, read_snapshot, replay

    d = _dir(res)
    (snap_path,) = list(d.glob("*.checkpoint"))
    snap = read_snapshot(snap_path.read_bytes(), name=snap_path.name)
    entries = []
    for seg in sorted(d.glob("*.log")):
        entries += list(iter_metadata_log(seg.read_bytes()))
    return snap, entries, replay(entries, snapshot=snap)


# ------------------------------------------------------------------ the codec reads it


def test_metadata_log_decodes_with_the_codec_and_replays_without_issues(demo):
    from epochlib.kraft import MetadataEntry

    snap, entries, res = _replay(demo)
    assert snap.complete and snap.end_offset == int(sorted(_dir(demo).glob("*.log"))[0].stem)
    assert all(isinstance(e, MetadataEntry) for e in entries)  # no MetadataError: every batch and value decodes
    offsets = [e.offset for e in entries]
    assert offsets == list(range(snap.end_offset, snap.end_offset + len(offsets)))  # contiguous from the log start
    records = [e for e in entries if e.record is not None]
    assert len(records) == demo.counts["metadata_records"]
    assert all(e.record.known and e.record.note is None for e in records)
    assert not res.issues and not res.conflicts
    # the Raft epochs of the batches are the directory's leader-epoch-checkpoint (one failover: two epochs)
    ck = (_dir(demo) / "leader-epoch-checkpoint").read_text().split()
    pairs = [(int(ck[i]), int(ck[i + 1])) for i in range(2, len(ck), 2)]
    # the first epoch began before the retained log (it starts at the log start); the failover's LeaderChange
    assert pairs[0] == (snap.epoch, snap.end_offset) and sorted(res.raft_epochs.items()) == pairs[1:]
    assert len(pairs) == 2 and pairs[1][0] == pairs[0][0] + 1
    changes = [r for r in res.rows if r.change not in ("snapshot",)]
    assert sum(e.record.api_key == 5 for e in records) == demo.counts["metadata_partition_changes"] > 10
    assert {r.change for r in changes} >= {"topic_deleted", "topic_recreated", "created", "expanded"}


# ------------------------------------------------------------------ an independent reader


def _uv(b: bytes, p: int) -> tuple[int, int]:
    n = shift = 0
    while True:
        x = b[p]
        p += 1
        n |= (x & 0x7F) << shift
        if not x & 0x80:
            return n, p
        shift += 7


def _i32s(b: bytes, p: int) -> tuple[list[int], int]:
    n, p = _uv(b, p)  # compact array: length + 1
    out = list(struct.unpack_from(f">{n - 1}i", b, p)) if n > 1 else []
    return out, p + 4 * max(n - 1, 0)


def _uuid(b: bytes, p: int) -> tuple[bytes, int]:
    return b[p:p + 16], p + 16


def _tags(b: bytes, p: int) -> tuple[dict[int, bytes], int]:
    n, p = _uv(b, p)
    out = {}
    for _ in range(n):
        tag, p = _uv(b, p)
        size, p = _uv(b, p)
        out[tag] = b[p:p + size]
        p += size
    return out, p


def _read_value(v: bytes):
    """kraft-metadata.md §2.2/§2.3 by hand: the frame, then TopicRecord v0, PartitionRecord v1,
    PartitionChangeRecord v1, RemoveTopicRecord v0 (other types: key only)."""
    frame, p = _uv(v, 0)
    key, p = _uv(v, p)
    version, p = _uv(v, p)
    assert frame == 1
    if key == 2:
        n, p = _uv(v, p)
        name = v[p:p + n - 1].decode()
        tid, p = _uuid(v, p + n - 1)
        return key, {"name": name, "tid": tid}
    if key == 9:
        return key, {"tid": v[p:p + 16]}
    if key == 3:
        assert version == 1
        (pid,) = struct.unpack_from(">i", v, p)
        tid, p = _uuid(v, p + 4)
        replicas, p = _i32s(v, p)
        isr, p = _i32s(v, p)
        _removing, p = _i32s(v, p)
        _adding, p = _i32s(v, p)
        leader, epoch, pepoch = struct.unpack_from(">iii", v, p)
        n, p = _uv(v, p + 12)
        p += 16 * (n - 1)  # directories
        tags, p = _tags(v, p)
        assert p == len(v)
        return key, {"tid": tid, "pid": pid, "replicas": replicas, "isr": isr, "leader": leader, "epoch": epoch,
                     "pepoch": pepoch, "lrs": tags[0][0] if 0 in tags else 0}  # fmt: skip
    if key == 5:
        assert version == 1
        (pid,) = struct.unpack_from(">i", v, p)
        tid, p = _uuid(v, p + 4)
        tags, p = _tags(v, p)
        assert p == len(v)
        d = {"tid": tid, "pid": pid}
        if 0 in tags:
            d["isr"] = _i32s(tags[0], 0)[0]
        if 1 in tags:
            d["leader"] = struct.unpack(">i", tags[1])[0]
        if 2 in tags:
            d["replicas"] = _i32s(tags[2], 0)[0]
        if 5 in tags:
            d["lrs"] = struct.unpack(">b", tags[5])[0]
        return key, d
    return key, None


def _batches(path: Path):
    from kafka.record.memory_records import MemoryRecords

    mr = MemoryRecords(path.read_bytes())
    while (batch := mr.next_batch()) is not None:
        assert batch.validate_crc()
        ple = int.from_bytes(batch._buffer[12:16], "big", signed=True)
        yield batch, ple


def test_metadata_log_reads_back_through_kafka_python_and_the_spec_layout(demo):
    """Replayed by hand (kraft-metadata.md §3.1) from kafka-python's batches, the log gives the codec's
    replay: every partition's final leader, epochs, replicas and ISR, and every RECOVERING election."""
    _snap, _entries, res = _replay(demo)
    d = _dir(demo)
    state: dict[tuple[bytes, int], dict] = {}
    topics: dict[bytes, str] = {}
    snap_path = next(d.glob("*.checkpoint"))
    raft_epoch = int(snap_path.stem.split("-")[1])
    for batch, ple in _batches(snap_path):
        assert ple == raft_epoch
        for rec in batch:
            if batch.is_control_batch:
                continue
            key, v = _read_value(rec.value)
            if key == 2:
                topics[v["tid"]] = v["name"]
            elif key == 3:
                state[(v["tid"], v["pid"])] = v
    recovering = []
    expected_offset = int(snap_path.stem.split("-")[0])
    for seg in sorted(d.glob("*.log")):
        for batch, ple in _batches(seg):
            assert batch.base_offset == expected_offset
            expected_offset += batch.last_offset_delta + 1
            assert ple >= raft_epoch
            assert batch.producer_id == -1 and not batch.is_transactional
            for rec in batch:
                assert rec.timestamp == batch.max_timestamp
                if batch.is_control_batch:
                    continue
                assert rec.key is None and not rec.headers
                key, v = _read_value(rec.value)
                if key == 2:
                    topics[v["tid"]] = v["name"]
                elif key == 9:
                    for k in [k for k in state if k[0] == v["tid"]]:
                        del state[k]
                elif key == 3:
                    state[(v["tid"], v["pid"])] = v
                elif key == 5:
                    st = state[(v["tid"], v["pid"])]
                    if "leader" in v and v["leader"] != -2:
                        st["leader"], st["epoch"] = v["leader"], st["epoch"] + 1
                    for f in ("isr", "replicas", "lrs"):
                        if f in v and v[f] != -1:
                            st[f] = v[f]
                    st["pepoch"] += 1
                    if v.get("lrs") == 1:
                        recovering.append((rec.offset, batch.max_timestamp, v["tid"], v["pid"]))
    from epochlib._wire import uuid_to_str

    mine = {(uuid_to_str(t), p): (s["leader"], s["epoch"], s["pepoch"], tuple(s["replicas"]), tuple(s["isr"]), s["lrs"])
            for (t, p), s in state.items()}  # fmt: skip
    theirs = {k: (s.leader, s.leader_epoch, s.partition_epoch, tuple(s.replicas), tuple(s.isr), s.leader_recovery_state)
              for k, s in res.partitions.items()}  # fmt: skip
    assert mine == theirs and len(mine) > 40
    k2 = [(r["metadata_offset"], r["event_ts"], r["topic_id"], r["partition"]) for r in _truth(demo) if r["rule"] == "K2"]
    assert [(o, ts, uuid_to_str(t), p) for o, ts, t, p in recovering] == k2 and k2


# ------------------------------------------------------------------ agreement with brokers and truth


def test_each_partition_s_last_epoch_is_the_newest_its_brokers_wrote(demo):
    from epochlib.checkpoint import parse_leader_epoch_checkpoint, parse_partition_metadata
    from epochlib.errors import DecodeError

    _snap, _entries, res = _replay(demo)
    k1 = {(r["topic_id"], r["partition"]) for r in _truth(demo) if r["rule"] == "K1"}
    newest: dict[tuple[str, int], int] = {}
    last_round = [max(b.glob("snapshot=*")) for b in demo.logdirs.glob("broker=*")]  # each broker's newest
    for ck in (c for snap in last_round for c in snap.glob("*/leader-epoch-checkpoint")):
        try:
            entries = parse_leader_epoch_checkpoint(ck.read_bytes()).entries
        except DecodeError:
            continue  # the L1 file
        tid = parse_partition_metadata((ck.parent / "partition.metadata").read_bytes()).topic_id
        key = (tid, int(ck.parent.name.rsplit("-", 1)[1]))
        newest[key] = max([newest.get(key, -1), *(e[0] for e in entries)])
    assert k1 and all(newest[k] > res.partitions[k].leader_epoch for k in k1)
    mismatched = {k: (v, res.partitions[k].leader_epoch) for k, v in newest.items()
                  if k not in k1 and v != res.partitions[k].leader_epoch}  # fmt: skip
    assert not mismatched and len(newest) == len(res.partitions)


def test_k1_truth_names_an_epoch_the_log_never_assigned(demo):
    _snap, _entries, res = _replay(demo)
    for r in [r for r in _truth(demo) if r["rule"] == "K1"]:
        hist = res.history(r["topic_id"], r["partition"])
        assigned = {h.leader_epoch for h in hist}
        assert r["epoch"] not in assigned and r["epoch"] > min(assigned)
        assert r["severity"] == "error"


def test_expansion_is_partition_records_of_an_existing_topic_and_p1_names_it(demo):
    _snap, _entries, res = _replay(demo)
    (p1,) = [r for r in _truth(demo) if r["rule"] == "P1"]
    (row,) = [r for r in res.rows if r.change == "expanded"]
    assert (row.topic, row.partition, row.leader_epoch, row.partition_epoch) == ("telemetry", 2, 0, 0)
    assert (p1["topic"], p1["partition"], p1["metadata_offset"], p1["expansion_ts"]) == (
        "telemetry", 2, row.metadata_offset, row.controller_ts)
    assert p1["event_ts"] > p1["expansion_ts"] and p1["offset"] > 0
    assert p1["committed_offset"] < p1["lower_bound"] and p1["records_pending"] == p1["lower_bound"] - p1["committed_offset"]


def test_topic_recreation_is_a_removal_then_a_new_topic_id(demo):
    _snap, _entries, res = _replay(demo)
    rows = [r for r in res.rows if r.topic == "inventory" and r.partition is None]
    assert [r.change for r in rows] == ["snapshot", "topic_deleted", "topic_recreated"]
    assert rows[0].topic_id == rows[1].topic_id != rows[2].topic_id


def test_m5_truth_is_the_intersection_of_served_intervals(demo):
    rows = _truth(demo)
    reg = [r for r in rows if r["kind"] == "metadata_offset_regression"]
    mixed = [r for r in rows if r["kind"] == "metadata_state_mixed"]
    assert reg and mixed and all(r["severity"] == "warning" for r in reg + mixed)
    assert all(r["interval_end"] <= r["previous_start"] and r["interval_start"] < r["interval_end"] for r in reg)
    assert all(r["interval_start"] >= r["interval_end"] for r in mixed)
    # the whole-image incident: no M1 for that client (no single partition went back), but M2 with the log
    dash = [r for r in rows if r.get("client_id", "").startswith("ops-dashboard")]
    assert {r["rule"] for r in dash} == {"M5", "M2"}


# ------------------------------------------------------------------ nothing else changed


def test_the_metadata_log_leaves_the_earlier_truth_unchanged(tmp_path):
    """Its incidents draw from their own random stream: without the log, the truth is the same, except the
    metadata-log kinds and the M2 findings of the new incidents' stale responses (only the log shows them)."""
    with_log = simulate(TINY, tmp_path / "with")
    without = simulate(TINY.replace(metadata_log=False), tmp_path / "without")
    assert not (without.cluster_metadata.exists() and any(without.cluster_metadata.iterdir()))

    def strip(rows):
        return [{k: v for k, v in r.items() if k != "id"} for r in rows]

    new_clients = ("ops-dashboard", "capacity-planner")
    old = [r for r in strip(_truth(with_log)) if r["rule"] not in NEW_RULES
           and not (r["rule"] == "M2" and r.get("client_id", "").startswith(new_clients))]  # fmt: skip
    assert old == strip(_truth(without))
    assert {r["rule"] for r in _truth(with_log)} >= NEW_RULES
    assert with_log.counts["commits"] > without.counts["commits"]  # the expansion's group commits too


def test_a_scenario_without_the_new_incidents_still_writes_the_log(tmp_path):
    sc = TINY.replace(anomalies=Anomalies(unknown_checkpoint_epochs=0, partition_expansions=0,
                                          metadata_state_regressions=0, metadata_state_mixes=0))  # fmt: skip
    res = simulate(sc, tmp_path / "x")
    rows = _truth(res)
    assert "K2" in {r["rule"] for r in rows} and not {r["rule"] for r in rows} & {"K1", "P1"}
    # M5 may still come from the stale-metadata incidents the log now explains, never from the new clients
    assert not [r for r in rows if r.get("client_id", "").startswith(("ops-dashboard", "capacity-planner"))]
    assert list(res.cluster_metadata.glob("node=*/__cluster_metadata-0/*.log"))


# ------------------------------------------------------------------ the M5 oracle on a hand-made log


class _Log:
    """The ControllerLog queries LogOracle uses, over a hand-written history."""

    is_open = True

    def __init__(self, epochs, removed=None):
        self.epochs = epochs  # (tid, idx) -> [(epoch, offset, ms)]
        self.removed = removed or {}

    interval = ControllerLog.interval
    newer_epoch_before = ControllerLog.newer_epoch_before


def _oracle(epochs, removed=None):
    from epochlib.sim.oracles import LogOracle

    rows = []
    return LogOracle(_Log(epochs, removed), lambda rule, kind, t, note, **s: rows.append((rule, kind, t, s))), rows


def _client(cid="c"):
    from epochlib.sim.cluster import Client

    return Client(cid, [], 12, "10.0.0.1", 1, "a")


# a: epoch 3 since the snapshot (offset 99), epoch 4 from offset 120 (t=1000); b: epoch 7, epoch 8 from 150 (t=2000)
EPOCHS = {("A", 0): [(3, 99, 0), (4, 120, 1000)], ("B", 0): [(7, 99, 0), (8, 150, 2000)]}


def test_m5_an_older_whole_state_after_a_newer_one_is_a_regression_without_any_epoch_going_back():
    o, rows = _oracle(EPOCHS)
    c = _client()
    o.observe(c, 1, 60_000, [("b", "B", 0, 8, ())], set())  # interval [150, inf)
    o.observe(c, 2, 70_000, [("a", "A", 0, 3, ())], set())  # interval [99, 120): ends before 150
    kinds = [(r[0], r[1]) for r in rows]
    assert kinds == [("M2", "broker_served_stale"), ("M5", "metadata_offset_regression")]
    s = rows[1][3]
    assert (s["topic"], s["partition"], s["interval_end"], s["previous_start"]) == ("a", 0, 120, 150)
    # M2 already reported by the captures-only oracle is not repeated
    o2, rows2 = _oracle(EPOCHS)
    o2.observe(c, 1, 60_000, [("b", "B", 0, 8, ())], set())
    o2.observe(c, 2, 70_000, [("a", "A", 0, 3, ())], {("A", 0)})
    assert [(r[0], r[1]) for r in rows2] == [("M5", "metadata_offset_regression")]


def test_m5_nearest_negatives_a_current_state_another_client_and_the_grace():
    o, rows = _oracle(EPOCHS)
    o.observe(_client("c"), 1, 60_000, [("b", "B", 0, 8, ())], set())
    o.observe(_client("c"), 2, 70_000, [("a", "A", 0, 4, ())], set())  # current epoch of a: [120, inf)
    o.observe(_client("d"), 2, 70_000, [("a", "A", 0, 3, ())], set())  # another client had seen nothing yet
    assert [(r[0], r[1]) for r in rows] == [("M2", "broker_served_stale")]  # only the log's M2 for d
    o3, rows3 = _oracle(EPOCHS)
    o3.observe(_client("c"), 2, 1500, [("a", "A", 0, 3, ())], set())  # 500 ms after the change: within grace
    assert rows3 == []


def test_m5_partitions_whose_states_never_coexisted_are_mixed_not_a_regression():
    o, rows = _oracle(EPOCHS)
    c = _client()
    o.observe(c, 1, 60_000, [("a", "A", 0, 3, ()), ("b", "B", 0, 8, ())], set())  # [150, 120): empty
    assert [(r[0], r[1]) for r in rows] == [("M2", "broker_served_stale"), ("M5", "metadata_state_mixed")]
    assert rows[1][3]["topic"] == "a"  # the partition whose state ended first
    # a removed topic id ends its partitions' interval: serving it after a newer state is a regression
    o2, rows2 = _oracle({("A", 0): [(3, 99, 0)], ("N", 0): [(0, 130, 1000)]}, removed={"A": (125, 900)})
    o2.observe(c, 1, 60_000, [("t", "N", 0, 0, ())], set())
    o2.observe(c, 2, 70_000, [("t", "A", 0, 3, ())], set())
    assert [(r[1], r[3]["interval_end"]) for r in rows2] == [("metadata_offset_regression", 125)]
