"""The real broker files (../shared/real-kafka-data) audit clean: no finding of warning or above.

Each folder is its own cluster. Every committed offset there has leader epoch -1 and every folder is
one broker, so these files test decoding and the absence of false alarms end to end (ingest + the three
reports); the three lineage snapshots are one broker's checkpoints at successive times (rule L5 must see
an append-only history, not a rewrite).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from jobs.audit import run_audit
from jobs.config import parse_config
from jobs.sink import read_table_arrow

pytestmark = [pytest.mark.spark, pytest.mark.slow]

REPORTS = ("stale_metadata", "fencing_violations", "spurious_offset_resets")
BAD = {"warning", "error", "critical"}


def _audit(spark, tmp_path: Path, cluster: str, inputs: dict[str, str]) -> dict[str, list[dict]]:
    # the snapshot folders are symlinks out of the logdirs root: followed only when the config says so
    inputs = {**inputs, "follow_symlinks": True}
    cfg = parse_config({"cluster": cluster, "inputs": inputs, "output": {"root": str(tmp_path / "out")}})
    result = run_audit(spark, cfg, "2020-01-01", "2026-12-31", progress_interval=0)
    assert result.quarantined == 0
    # not vacuous: evidence was decoded, and every report ran over it
    assert sum(c.records_decoded for c in result.ingest.counts) > 0
    assert set(result.findings) == set(REPORTS)
    out = {}
    for report in REPORTS:
        try:
            out[report] = read_table_arrow(report, cfg, cluster=cluster).to_pylist()
        except Exception:  # a report with nothing to say may not have created its table
            out[report] = []
    return out


def _bad(findings: dict[str, list[dict]]) -> list[tuple]:
    return [(r, f["rule"], f["kind"], f["severity"], f["detail"]) for r, rows in findings.items()
            for f in rows if f["severity"] in BAD]


#: folder -> (log-dir snapshot time, partition_history rows: kraft-metadata.md §5's changes + the log_start row (each
#: log starts at offset 0, so no snapshot is replayed from) + the log_end row). The snapshot times of kraft-single-broker-2024 and kraft-microservice lie inside their metadata
#: log's history, so K1 judges their checkpoints against the log instead of skipping them.
FOLDERS = {
    "kraft-single-broker-2024": ("20241009T165739Z", 543),
    "kraft-microservice": ("20251202T120955Z", 375),
    "kraft-aibulb-2023": ("20230514T011517Z", 55),
    "zk-era-broker-2022": ("20241010T000000Z", 0),
}


@pytest.mark.parametrize("folder", list(FOLDERS))
def test_real_broker_folder_audits_clean(spark, real_data: Path, tmp_path: Path, folder: str) -> None:
    src = real_data / folder
    if not src.is_dir():
        pytest.skip(f"{folder} not present")
    snapshot, history_rows = FOLDERS[folder]
    logdirs = tmp_path / "logdirs" / "broker=1"
    logdirs.mkdir(parents=True)
    (logdirs / f"snapshot={snapshot}").symlink_to(src)
    inputs = {"offsets": str(src), "logdirs": str(tmp_path / "logdirs")}
    if history_rows:
        # the whole data dir: the reader takes __cluster_metadata-0 from it (and again from the log-dir
        # snapshot: two identical copies, merged)
        inputs["cluster_metadata"] = str(src)
    cluster = folder.replace("-", "_")
    findings = _audit(spark, tmp_path, cluster, inputs)
    assert _bad(findings) == []
    if history_rows:
        cfg = parse_config({"cluster": cluster, "output": {"root": str(tmp_path / "out")}})
        assert read_table_arrow("partition_history", cfg, cluster=cluster).num_rows == history_rows


def test_real_lineage_history_is_append_only(spark, real_data: Path, tmp_path: Path) -> None:
    snaps = sorted((real_data / "lineage-snapshots").iterdir())
    assert len(snaps) == 3
    broker = tmp_path / "logdirs" / "broker=1"
    broker.mkdir(parents=True)
    for day, snap in enumerate(snaps, start=1):
        (broker / f"snapshot=202501{day:02d}T000000Z").symlink_to(snap)
    findings = _audit(spark, tmp_path, "lineage", {"logdirs": str(tmp_path / "logdirs")})
    cfg = parse_config({"cluster": "lineage", "output": {"root": str(tmp_path / "out")}})
    patient = read_table_arrow("epoch_lineage", cfg, where={"topic": "patient", "partition": 0}).to_pylist()
    assert len({r["snapshot_ts"] for r in patient}) == 3  # three snapshots of one replica compared by L5
    assert _bad(findings) == []
    assert not [f for f in findings["fencing_violations"] if f["kind"] == "lineage_rewritten"]
