"""The cluster simulator: layout, determinism, independent decoding of what it writes, ground truth.

Runs the demo preset once per session (a few seconds) and a tiny scenario twice for determinism.
"""

from __future__ import annotations

import base64
import hashlib
import json
import re
from pathlib import Path

import pytest

from epochlib.sim import Anomalies, Scenario, preset, scenario_presets, simulate
from epochlib.sim._codec import commit_value_v3

DEMO_KINDS = {
    "D1:replica_divergence_unresolved", "D2:replica_lineage_conflict", "F2:commit_beyond_epoch_end",
    "F2:commit_unknown_epoch", "F4:commit_epoch_dropped", "F4:commit_epoch_regression",
    "L1:checkpoint_unreadable", "L2:lineage_not_monotonic",
    "L3:batch_epoch_regression", "L3:batch_epoch_unknown", "L5:lineage_rewritten", "L5:lineage_truncated",
    "M1:client_epoch_regression", "M2:broker_served_stale", "M3:topic_id_regression", "S1:operator_reset",
    "S1:over_rewind", "S1:spurious_rewind", "S1:spurious_rewind_to_earliest", "S1:stale_epoch_commit",
    "S1:truncation", "S2:retention", "S2:spurious_skip",
    # only the controller's metadata log shows these (issue 15)
    "K1:checkpoint_epoch_unknown", "K2:unclean_leader_election", "M5:metadata_offset_regression",
    "M5:metadata_state_mixed", "P1:expansion_order_violation",
}  # fmt: skip

TINY = Scenario(name="tiny", seed=5, days=0.25, brokers=3, partitions=3, commits=600, snapshot_interval_hours=1.5,
                retention_hours=1.0, extra_metadata_clients=1, metadata_interval_s=900, data_tail_records=200,
                anomalies=Anomalies(stale_epoch_batches=0, unknown_epoch_batches=0, lineage_rewrites=0,
                                    replica_conflicts=0, topic_recreations=0, topic_id_regressions=0,
                                    retention_resets=0))  # fmt: skip


@pytest.fixture(scope="session")
def demo(tmp_path_factory):
    out = tmp_path_factory.mktemp("sim") / "demo"
    return simulate(preset("demo"), out)


def _tree_digest(root: Path) -> dict[str, str]:
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(root.rglob("*")) if p.is_file()}  # fmt: skip


def test_same_seed_gives_identical_bytes(tmp_path):
    a = simulate(TINY, tmp_path / "a")
    simulate(TINY, tmp_path / "b")
    assert a.counts["commits"] > 300
    digest = _tree_digest(tmp_path / "a")
    assert digest == _tree_digest(tmp_path / "b")
    assert any(k.startswith("cluster_metadata/") and k.endswith(".checkpoint") for k in digest)
    c = simulate(TINY.replace(seed=6), tmp_path / "c")
    assert _tree_digest(tmp_path / "a") != _tree_digest(tmp_path / "c")
    assert c.truth.exists()


def test_refuses_a_folder_that_already_holds_a_simulation(tmp_path):
    (tmp_path / "offsets").mkdir()
    with pytest.raises(FileExistsError):
        simulate(TINY, tmp_path)


def test_presets_and_overrides():
    assert {"demo", "accuracy-1", "accuracy-2", "accuracy-3", "bench"} <= set(scenario_presets)
    s = preset("bench", commits=10_000_000, seed=9)
    assert (s.commits, s.seed) == (10_000_000, 9)
    with pytest.raises(ValueError, match="unknown scenario preset"):
        preset("nope")


@pytest.mark.parametrize("offset,epoch,ts,meta", [(0, -1, 0, ""), (2**40, 17, 1709510400123, ""),
                                                   (5, 3, 1, "ünïcode meta")])  # fmt: skip
def test_commit_value_fast_path_is_byte_identical(offset, epoch, ts, meta):
    from epochlib.coordinator import encode_offset_commit_value

    assert commit_value_v3(offset, epoch, ts, meta) == encode_offset_commit_value(
        offset, leader_epoch=epoch, metadata=meta, commit_timestamp=ts, version=3)


def test_layout_is_exactly_the_design(demo):
    root = demo.out_dir
    assert sorted(p.name for p in root.iterdir()) == ["cluster_metadata", "logdirs", "metadata", "offsets",
                                                      "simulation.json", "truth.jsonl"]  # fmt: skip
    kraft = re.compile(r"node=\d+/__cluster_metadata-0/(\d{20}\.log|\d{20}-\d{10}\.checkpoint|leader-epoch-checkpoint"
                       r"|partition\.metadata|quorum-state)")
    files = [str(p.relative_to(demo.cluster_metadata)) for p in demo.cluster_metadata.rglob("*") if p.is_file()]
    assert files and all(kraft.fullmatch(f) for f in files), files
    assert sum(f.endswith(".checkpoint") for f in files) == 1 and sum(f.endswith(".log") for f in files) >= 1
    seg = re.compile(r"broker=\d+/__consumer_offsets-\d+/\d{20}\.log")
    offsets = [str(p.relative_to(demo.offsets)) for p in demo.offsets.rglob("*") if p.is_file()]
    assert offsets and all(seg.fullmatch(p) for p in offsets)
    snap = r"broker=\d+/snapshot=\d{8}T\d{6}Z/"
    part = re.compile(snap + r"[a-z][a-z0-9-]*-\d+/(leader-epoch-checkpoint|partition\.metadata|\d{20}\.log)")
    rootck = re.compile(snap + r"(log-start-offset|replication-offset|recovery-point-offset)-checkpoint")
    files = [str(p.relative_to(demo.logdirs)) for p in demo.logdirs.rglob("*") if p.is_file()]
    assert all(part.fullmatch(f) or rootck.fullmatch(f) for f in files), [
        f for f in files if not (part.fullmatch(f) or rootck.fullmatch(f))][:3]
    assert any(f.endswith(".log") for f in files)
    names = sorted(p.name for p in demo.metadata.iterdir())
    assert any(n.endswith(".jsonl") for n in names) and any(n.endswith(".pcap") for n in names)


def test_offsets_segments_decode_with_kafka_python(demo):
    from kafka.record.memory_records import MemoryRecords

    from epochlib.coordinator import decode_record

    n_commits = n_control = n_txn = 0
    codecs = set()
    for path in sorted(demo.offsets.rglob("*.log")):
        mr = MemoryRecords(path.read_bytes())
        expected = int(path.stem)
        while (batch := mr.next_batch()) is not None:
            assert batch.validate_crc()
            assert batch.base_offset == expected
            codecs.add(batch.compression_type)
            expected = batch.base_offset + batch.last_offset_delta + 1
            if batch.is_control_batch:
                n_control += 1
                continue
            n_txn += batch.is_transactional
            for rec in batch:
                cr = decode_record(rec.key, rec.value)
                if cr.record_type == 1 and rec.value is not None:
                    n_commits += 1
    assert n_commits == demo.counts["commits"]
    assert n_control == demo.counts["txn_markers"] > 0 and n_txn == n_control
    assert len(codecs) >= 4


def test_data_segments_decode_and_carry_leader_epochs(demo):
    from kafka.record.memory_records import MemoryRecords

    logs = sorted(demo.logdirs.rglob("*.log"))
    assert logs
    epochs = set()
    for path in logs[:40]:
        mr = MemoryRecords(path.read_bytes())
        while (batch := mr.next_batch()) is not None:
            assert batch.validate_crc()
            epochs.add(batch._partition_leader_epoch if hasattr(batch, "_partition_leader_epoch")
                       else int.from_bytes(batch._buffer[12:16], "big", signed=True))  # fmt: skip
    assert epochs and min(epochs) >= 0


def test_checkpoints_parse(demo):
    from epochlib.checkpoint import (
        parse_leader_epoch_checkpoint,
        parse_offset_checkpoint,
        parse_partition_metadata,
    )
    from epochlib.errors import DecodeError

    bad = 0
    for path in demo.logdirs.rglob("leader-epoch-checkpoint"):
        try:
            parse_leader_epoch_checkpoint(path.read_bytes())
        except DecodeError:
            bad += 1
    truth = [json.loads(x) for x in demo.truth.read_text().splitlines()]
    assert bad == sum(r["rule"] == "L1" for r in truth) >= 1
    for path in demo.logdirs.rglob("partition.metadata"):
        parse_partition_metadata(path.read_bytes())
    for name in ("log-start-offset-checkpoint", "replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
        for path in demo.logdirs.rglob(name):
            parse_offset_checkpoint(path.read_bytes())


def test_metadata_captures_decode_with_kafka_python(demo):
    from kafka.protocol.metadata import MetadataResponse

    versions = set()
    lines = [json.loads(x) for f in sorted(demo.metadata.glob("*.jsonl")) for x in f.read_text().splitlines()]
    assert len(lines) == demo.counts["jsonl_lines"] > 100
    for line in lines:
        raw = base64.b64decode(line["response"])
        v = line["api_version"]
        versions.add(v)
        hdr = 5 if v >= 9 else 4  # correlation id (+ empty tag section for flexible versions)
        resp = MetadataResponse[v].decode(raw[hdr:])
        assert resp.topics
    assert {12, 9} <= versions and min(versions) < 7
    assert demo.counts["pcap_pairs"] > 0


def test_pcap_pairs_requests_and_responses(demo):
    pcap = pytest.importorskip("epochlib.pcap")
    path = next(demo.metadata.glob("*.pcap"))
    assert path.stat().st_size > 0
    if hasattr(pcap, "read_kafka_exchanges"):
        assert list(pcap.read_kafka_exchanges(path.read_bytes()))


def test_truth_names_every_kind_the_demo_promises(demo):
    rows = [json.loads(x) for x in demo.truth.read_text().splitlines()]
    kinds = {f"{r['rule']}:{r['kind']}" for r in rows}
    assert kinds >= DEMO_KINDS, DEMO_KINDS - kinds
    for r in rows:
        assert r["severity"] in {"info", "warning", "error", "critical"}
        assert r["note"] and isinstance(r["event_ts"], int)
    assert any(r.get("m4_correlated") for r in rows if r["kind"] == "spurious_rewind_to_earliest")
    # the re-created topic is not a finding: no lineage finding names the re-created topic
    assert not [r for r in rows if r.get("topic") == "inventory" and r["rule"] in {"L5", "D1", "D2", "M1", "M2"}]


def test_truth_severities_are_the_rules_severities(demo):
    from epochlib.rules import SEVERITY
    from epochlib.sim.engine import LOG_SEVERITY

    rows = [json.loads(x) for x in demo.truth.read_text().splitlines()]
    # the metadata-log kinds take the spec's severity until the rules' table names them (mixed: KRaft's)
    table = {**LOG_SEVERITY, **SEVERITY, "metadata_state_mixed": "warning"}
    assert {(r["kind"], r["severity"]) for r in rows} <= set(table.items())
    sev = {(r["kind"], r["severity"]) for r in rows}
    assert ("checkpoint_unreadable", "warning") in sev and ("commit_unknown_epoch", "error") in sev


def test_stale_epoch_batch_is_one_regression_finding(demo):
    # L3 gives one finding per batch, the most severe: a stale-epoch batch is a regression, not also a mismatch
    rows = [json.loads(x) for x in demo.truth.read_text().splitlines()]
    l3 = [r for r in rows if r["rule"] == "L3" and r["kind"] != "batch_epoch_unknown"]
    assert [r["kind"] for r in l3] == ["batch_epoch_regression"]
    assert l3[0]["batch_epoch"] == l3[0]["lineage_epoch"] - 1


def test_f2_oracle_breaks_leader_ties_as_the_audit_does():
    from epochlib.lineage import LeaderEpochCache
    from epochlib.sim.oracles import leader_rank

    class P:
        segments = False

    cache = LeaderEpochCache([(0, 0), (5, 100)])
    older = LeaderEpochCache([(0, 0), (4, 90)])
    caps = {4: (cache, 220), 1: (cache, 200), 2: (older, 300)}  # broker 4 is the simulator's leader
    assert max(caps, key=lambda b: leader_rank(P, b, *caps[b])) == 1  # LEO unknown: lower broker id
    P.segments = True
    assert max(caps, key=lambda b: leader_rank(P, b, *caps[b])) == 4  # segments show the higher LEO


def test_possible_topic_recreation_is_in_the_truth_once_per_response_only_without_the_metadata_log(demo, tmp_path):
    """M3's heuristic is for responses without topic ids; where the metadata log covers the capture, the audit
    gives them the id the log has for the name, so the re-creation is a new id (a silent new baseline)."""
    rows = [json.loads(x) for x in demo.truth.read_text().splitlines()]
    assert not [r for r in rows if r["kind"] == "possible_topic_recreation"]
    assert [r for r in rows if r["kind"] == "topic_id_regression"]  # the re-creation incident did run
    without = simulate(preset("demo").replace(metadata_log=False), tmp_path / "no-log")
    rows = [json.loads(x) for x in without.truth.read_text().splitlines()]
    rec = [r for r in rows if r["kind"] == "possible_topic_recreation"]
    assert rec and all(r["severity"] == "info" and r["topic"] == "inventory" and "partition" not in r for r in rec)
    assert len({(r["client_id"], r["event_ts"]) for r in rec}) == len(rec)


def test_demo_is_small_and_quick(demo):
    assert 2000 <= demo.counts["commits"] <= 10_000
    assert demo.date_range == ("2024-03-04", "2024-03-04")
