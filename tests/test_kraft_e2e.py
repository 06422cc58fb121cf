"""End to end on Spark with a small hand-built KRaft metadata log: ingestion into ``partition_history`` (two
node copies merged, one conflicting record quarantined with both sources, counted in ``audit_runs``,
idempotent) and one finding of each new kind — K1, K2 (naming the cause of an L5 truncation), M5 regression
and mixed state, P1 — plus M2 timed from the log and the per-broker metadata lag in the rates."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from fixtures_ingest import capture_line
from fixtures_kraft import DAY, TID, T, metadata_log

from epochlib import checkpoint, coordinator, protocol, records
from epochlib.records import NewRecord
from jobs.audit import run_audit
from jobs.config import parse_config
from jobs.ingest import run_ingestion
from jobs.sink import read_table_arrow

pytestmark = [pytest.mark.spark, pytest.mark.slow]

def _commit(group: str, partition: int, offset: int, ts: int, epoch: int = -1) -> NewRecord:
    return NewRecord(coordinator.encode_offset_commit_key(group, "orders", partition),
                     coordinator.encode_offset_commit_value(offset, leader_epoch=epoch, commit_timestamp=ts), ts)


def _response(client: str, ts: int, parts: dict[int, int], corr: int) -> str:
    body = {"throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}],
            "cluster_id": "clu", "controller_id": 1,
            "topics": [{"error_code": 0, "name": "orders", "topic_id": TID, "is_internal": False,
                        "partitions": [{"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": e,
                                        "replica_nodes": [1, 2, 3], "isr_nodes": [1], "offline_replicas": []}
                                       for p, e in sorted(parts.items())],
                        "topic_authorized_operations": -(1 << 31)}],
            "cluster_authorized_operations": -(1 << 31), "error_code": 0}
    return capture_line(ts, client, 1, 12, protocol.encode_metadata_response(body, 12, corr))


def build(base: Path) -> dict[str, str]:
    cm = base / "cluster_metadata"
    for node, last in (("node1", 3), ("node2", 2)):  # node2's copy differs at offset 10: a conflict
        d = cm / node / "__cluster_metadata-0"
        d.mkdir(parents=True)
        (d / "00000000000000000000.log").write_bytes(metadata_log(last))
        (d / "quorum-state").write_text("{}")
    # log dirs: orders-1 truncated between two snapshots (L5, caused by the unclean election); orders-0 holds an
    # epoch the controller never assigned (K1)
    ld = base / "logdirs" / "broker=1"
    for snap, entries, batch in (("20240501T000020Z", [(0, 0)], (99, 0)),
                                 ("20240501T000230Z", [(0, 0), (1, 60)], (79, 1))):
        p = ld / f"snapshot={snap}" / "orders-1"
        p.mkdir(parents=True)
        (p / "leader-epoch-checkpoint").write_text(checkpoint.format_leader_epoch_checkpoint(entries))
        (p / "partition.metadata").write_text(checkpoint.format_partition_metadata(TID))
        (p / "00000000000000000000.log").write_bytes(records.encode_batch(
            [NewRecord(b"k", b"v", T + 1_000)], base_offset=batch[0], partition_leader_epoch=batch[1]))
    p0 = ld / "snapshot=20240501T000230Z" / "orders-0"
    p0.mkdir(parents=True)
    (p0 / "leader-epoch-checkpoint").write_text(checkpoint.format_leader_epoch_checkpoint([(0, 0), (2, 50), (7, 90)]))
    (p0 / "partition.metadata").write_text(checkpoint.format_partition_metadata(TID))
    # commits: g read orders-0 to 100 before the expansion, "other" proves orders-0 held 500 at T0; g then reads the
    # new partition 2 while still 400 records behind on orders-0 (P1); "idle" committed orders-1 at 90 in epoch 0
    # 5 s before the unclean election cut epoch 0 at 60 (F2 by the round after it, caused by the election)
    seg = base / "offsets" / "__consumer_offsets-0" / "00000000000000000000.log"
    seg.parent.mkdir(parents=True)
    commits = [_commit("idle", 1, 90, T + 25_000, epoch=0), _commit("g", 0, 100, T + 50_000),
               _commit("g", 1, 40, T + 50_000), _commit("other", 0, 500, T + 90_000), _commit("g", 2, 5, T + 110_000)]
    seg.write_bytes(b"".join(records.encode_batch([c], base_offset=i, partition_leader_epoch=0)
                             for i, c in enumerate(commits)))
    # captures: c1 first sees p1 epoch 1 (state from offset 6 on), then p0 epoch 0 (a state that ended at offset 4):
    # no partition's epoch went back for c1 (M1 is silent), but the cluster state did (M5); c2 gets a response
    # mixing p0 epoch 0 ([2, 4)) with p1 epoch 1 ([6, ...)): states that never coexisted
    caps = base / "metadata"
    caps.mkdir()
    lines = [_response("c1", T + 45_000, {1: 1}, 1), _response("c1", T + 50_000, {0: 0}, 2),
             _response("c2", T + 60_000, {0: 0, 1: 1}, 3)]
    (caps / "captures.jsonl").write_text("\n".join(lines) + "\n")
    return {"offsets": str(base / "offsets"), "logdirs": str(base / "logdirs"), "metadata": str(caps),
            "cluster_metadata": str(cm)}


@pytest.fixture(scope="module")
def audited(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("kraft_e2e")
    inputs = build(base / "in")
    cfg = parse_config({"cluster": "kr", "inputs": inputs, "output": {"root": str(base / "out")}})
    result = run_audit(spark, cfg, DAY, DAY, progress_interval=0)
    out = {t: read_table_arrow(t, cfg, cluster="kr").to_pylist()
           for t in ("partition_history", "fencing_violations", "stale_metadata", "stale_metadata_rates", "quarantine")}
    return spark, cfg, result, out


def test_partition_history_ingested_merged_and_counted(audited) -> None:
    spark, cfg, result, out = audited
    rows = sorted(out["partition_history"], key=lambda r: (r["metadata_offset"], r["partition"] or -1))
    hist = [r for r in rows if r["change"] not in ("log_start", "log_end")]
    assert len(hist) == 10 and [r["metadata_offset"] for r in rows if r["change"] == "log_end"] == [10]
    # no snapshot: where the replay started (offset 0: every topic's ids are known)
    assert [r["metadata_offset"] for r in rows if r["change"] == "log_start"] == [0]
    assert [(r["metadata_offset"], r["partition"], r["change"]) for r in hist][:4] == [
        (1, None, "topic_created"), (2, 0, "created"), (3, 1, "created"), (4, 0, "leader")]
    unclean = [r for r in hist if r["unclean"]]
    assert [(r["metadata_offset"], r["partition"], r["leader"], r["leader_epoch"], r["previous_isr"]) for r in unclean] == [
        (6, 1, 3, 1, [2])]
    assert {r["event_date"] for r in hist} == {DAY}
    last = hist[-1]
    assert (last["metadata_offset"], last["leader"]) == (10, 3) and "/node1/" in last["source"]  # first copy kept
    # the differing record of node2 is quarantined, naming both copies
    q = [r for r in out["quarantine"] if r["source_kind"] == "cluster_metadata"]
    assert len(q) == 1 and "/node2/" in q[0]["source"] and "node1" in q[0]["reason"] and q[0]["unit"] == "record"
    counts = {(c.source_kind, c.unit): c for c in result.ingest.counts if c.source_kind == "cluster_metadata"}
    assert counts[("cluster_metadata", "batch")].units_read == 16 and counts[("cluster_metadata", "batch")].units_quarantined == 0
    rec = counts[("cluster_metadata", "record")]
    assert (rec.units_read, rec.units_quarantined, rec.records_decoded) == (12, 1, 10)  # 10 changes (+ log_end row)
    # idempotent: ingesting the day again replaces, never duplicates
    run_ingestion(spark, cfg, DAY, DAY)
    assert read_table_arrow("partition_history", cfg, cluster="kr").num_rows == 12


def _kinds(rows):
    return sorted((r["rule"], r["kind"], r["severity"]) for r in rows)


def test_one_finding_of_each_new_kind(audited) -> None:
    _, _, _, out = audited
    fv = out["fencing_violations"]
    new = [r for r in fv if r["rule"] in ("K1", "K2", "P1")]
    assert _kinds(new) == [("K1", "checkpoint_epoch_unknown", "error"), ("K2", "unclean_leader_election", "warning"),
                           ("P1", "expansion_order_violation", "warning")]
    k1, k2, p1 = sorted(new, key=lambda r: r["rule"])
    assert (k1["partition"], k1["leader_epoch"], k1["expected_epoch"]) == (0, 7, 3)
    assert (k2["partition"], k2["broker"], k2["previous_leader"], k2["metadata_offset"]) == (1, "3", 2, 6)
    assert (p1["group_id"], p1["new_partition"], p1["lagging_partition"], p1["records_pending"]) == ("g", 2, 0, 400)
    assert p1["expansion_ts"] == dt.datetime.fromtimestamp((T + 100_000) / 1000, dt.timezone.utc)
    # the truncation of orders-1 names the unclean election as its cause, and so does the F2 of the commit made
    # before it (judged by the snapshot round after it)
    l5 = [r for r in fv if r["kind"] == "lineage_truncated"]
    assert len(l5) == 1 and l5[0]["cause_finding_id"] == k2["finding_id"]
    f2 = [r for r in fv if r["rule"] == "F2"]
    assert [(r["kind"], r["group_id"], r["committed_offset"], r["end_offset"], r["cause_finding_id"]) for r in f2] == [
        ("commit_beyond_epoch_end", "idle", 90, 60, k2["finding_id"])]
    assert all(r["cause_finding_id"] is None for r in fv if r["kind"] not in ("lineage_truncated", "commit_beyond_epoch_end"))
    assert not [r for r in fv if r["severity"] in ("error", "critical") and r["rule"] not in ("K1", "F2")]

    sm = out["stale_metadata"]
    m5 = sorted((r for r in sm if r["rule"] == "M5"), key=lambda r: r["kind"])
    assert [(r["kind"], r["severity"], r["client_id"]) for r in m5] == [
        ("metadata_offset_regression", "warning", "c1"), ("metadata_state_mixed", "warning", "c2")]
    reg, mixed = m5
    assert (reg["served_offset_end"], reg["seen_offset_start"], reg["lag_offsets"]) == (4, 6, 3)
    assert (mixed["served_offset_start"], mixed["served_offset_end"]) == (6, 4)
    assert not [r for r in sm if r["rule"] == "M1"]  # strictly more than M1 sees
    m2 = sorted((r["client_id"], r["staleness_ms"]) for r in sm if r["rule"] == "M2")
    assert m2 == [("c1", 40_000), ("c2", 50_000)]  # timed from the log's commit of epoch 1 at T+10s

    (broker,) = [r for r in out["stale_metadata_rates"] if r["dimension"] == "broker"]
    assert (broker["responses"], broker["metadata_lag_median_ms"], broker["metadata_lag_max_ms"]) == (3, 40_000, 50_000)
    assert all(r["metadata_lag_max_ms"] is None for r in out["stale_metadata_rates"] if r["dimension"] == "client")
