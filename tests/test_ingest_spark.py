"""End-to-end ingestion on the shared local[1] session: every input kind and form -> silver tables,
bad units -> quarantine with exact reconciliation, idempotent reruns, one-day runs, real broker files."""

from __future__ import annotations

import contextlib
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from fixtures_ingest import DAY1, DAY2, TOPIC_ID, build_inputs

from jobs.config import Config, Inputs, Output
from jobs.ingest import run_ingestion

pytestmark = pytest.mark.spark


def _read(root, table):
    return DeltaTable(f"{root}/{table}").to_pyarrow_table()


def _cfg(paths, out, cluster="test"):
    return Config(cluster=cluster, inputs=Inputs(**paths), output=Output(root=str(out)))


@pytest.fixture(scope="module")
def ingested(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("ingest_e2e")
    paths, expect = build_inputs(base / "in")
    cfg = _cfg(paths, base / "out")
    result = run_ingestion(spark, cfg, DAY1, DAY2)
    return cfg, paths, expect, result, str(base / "out")


def test_offsets_become_commits_and_group_metadata(ingested):
    _, _, ex, _, root = ingested
    commits = _read(root, "offset_commits")
    dates = Counter(commits["event_date"].to_pylist())
    assert dates == {DAY1: ex.commits_day1, DAY2: ex.commits_day2}
    rows = commits.to_pylist()
    codec = [r for r in rows if r["group_id"] == "g-codec"]
    assert len(codec) == 15 and {r["leader_epoch"] for r in codec} == {5}
    assert {r["batch_leader_epoch"] for r in codec} == {5} and {r["log_partition"] for r in codec} == {0}
    assert all(r["source"].endswith("__consumer_offsets-0/00000000000000000000.log") and r["position"] >= 0
               and r["log_offset"] is not None for r in codec)
    txn = {r["group_id"]: r["txn_state"] for r in rows if r["group_id"].startswith("g-txn")}
    assert txn == ex.txn
    assert {r["txn_state"] for r in rows if not r["group_id"].startswith("g-txn")} == {"none"}
    legacy = sorted(r["committed_offset"] for r in rows if r["group_id"] == "g-legacy")
    assert legacy == [10, 11, 20]
    by_source = Counter(r["source"].rsplit("/", 1)[-1] for r in rows)
    assert by_source["commits.parquet"] == 4 and by_source["commits.jsonl"] == 4
    assert by_source["console.txt"] == 2 and by_source["scala.txt"] == 2 and by_source["dumplog.txt"] == 1
    tomb = [r for r in rows if r["is_tombstone"]]
    assert len(tomb) == 1 and tomb[0]["committed_offset"] is None and tomb[0]["event_ts"] is not None
    groups = _read(root, "group_metadata").to_pylist()
    assert len(groups) == ex.groups
    g = groups[0]
    assert g["record_type"] == "group_metadata" and g["generation"] == 3 and g["member_count"] == 1
    assert g["members"][0]["client_id"] == "client-a"
    assert g["members"][0]["assigned_partitions"] == [{"topic": "orders", "partitions": [0, 1]}]


def test_logdir_snapshots_become_lineage_and_batches(ingested):
    _, _, ex, _, root = ingested
    lineage = _read(root, "epoch_lineage").to_pylist()
    assert len(lineage) == ex.lineage_rows
    late = next(r for r in lineage if r["broker"] == 1 and r["snapshot_ts"].hour == 18)
    assert [(e["epoch"], e["start_offset"]) for e in late["entries"]] == [(0, 0), (2, 10), (4, 20)]
    assert late["topic_id"] == TOPIC_ID and late["checkpoint_version"] == 0
    assert (late["log_start_offset"], late["high_watermark"], late["recovery_point"]) == (0, 30, 30)
    assert late["log_end_offset"] == 21
    batches = _read(root, "record_batches")
    assert batches.num_rows == ex.record_batches
    assert set(batches["broker"].to_pylist()) == {1, 2}


def test_captures_become_metadata_observations(ingested):
    _, _, ex, _, root = ingested
    obs = _read(root, "metadata_observations").to_pylist()
    assert len(obs) == ex.observations
    pcap_rows = [r for r in obs if r["source"].endswith(".pcap")]
    assert {(r["client_id"], r["api_version"], r["correlation_id"], r["leader_epoch"]) for r in pcap_rows} == {
        ("client-b", 9, 200, 6)}
    jsonl = sorted((r["api_version"], r["partition"], r["leader_epoch"]) for r in obs
                   if r["source"].endswith(".jsonl"))
    assert jsonl == [(9, 0, 4), (9, 1, 4), (12, 0, 5), (12, 1, 5)]
    assert {r["topic_id"] for r in obs if r["api_version"] == 12} == {TOPIC_ID}
    assert {r["metadata_token"] for r in obs} == {None}  # pcap never carries one, these JSONL lines neither
    # JSONL "b1:9092" is node 1 in the responses' broker list; the pcap peer is not listed (no mapping)
    assert {(r["broker"], r["broker_address"]) for r in obs} == {("1", "b1:9092"), ("10.0.0.1:9092", "10.0.0.1:9092")}


def test_bad_units_are_quarantined_and_counts_reconcile(ingested):
    _, _, ex, result, root = ingested
    q = _read(root, "quarantine")
    got = Counter(zip(q["source_kind"].to_pylist(), q["unit"].to_pylist(), strict=True))
    assert got == Counter(ex.quarantine)
    assert all(r is None or len(r) <= 4096 for r in q["raw"].to_pylist())
    assert set(q["run_id"].to_pylist()) == {result.run.run_id}
    for c in result.counts:
        assert c.units_read == c.units_decoded + c.units_quarantined
        assert c.units_quarantined == got.get((c.source_kind, c.unit), 0)
    audit = _read(root, "audit_runs").filter(pc.equal(_read(root, "audit_runs")["run_id"], result.run.run_id))
    rows = {(r["source_kind"], r["unit"]): r for r in audit.to_pylist()}
    assert set(rows) == {(c.source_kind, c.unit) for c in result.counts}
    for r in rows.values():
        assert r["units_read"] == r["units_decoded"] + r["units_quarantined"]
    assert rows[("offsets", "batch")]["units_quarantined"] == 1  # the CRC mismatch
    assert rows[("logdirs", "file")]["units_quarantined"] == 1
    # the segment that ends inside a batch: not quarantined, counted as a limit of the copy (and said so)
    assert {k: r["units_unpaired"] for k, r in rows.items() if r["units_unpaired"]} == ex.unpaired
    assert any(n.startswith("offsets: 1 segment file ends inside a batch") for n in result.notes())


def test_same_range_twice_gives_the_same_rows(spark, ingested):
    cfg, _, _, _, root = ingested
    before = {t: sorted(map(str, _read(root, t).drop_columns(["run_id"] if t == "quarantine" else []).to_pylist()))
              for t in ("offset_commits", "epoch_lineage", "metadata_observations", "quarantine")}
    run_ingestion(spark, cfg, DAY1, DAY2, write_audit=False)
    after = {t: sorted(map(str, _read(root, t).drop_columns(["run_id"] if t == "quarantine" else []).to_pylist()))
             for t in before}
    assert after == before


def test_a_small_run_ingests_the_same_rows(spark, ingested, small_run, tmp_path, monkeypatch):
    """A small run (one shuffle partition, as the CLI narrows it: its work rows stay in the slices Spark makes of the
    driver's lists, without a shuffle to spread them, and its work rows are cached in a partition per core) gives the
    same rows, quarantine and counts."""
    import jobs.ingest._spark as ingest_spark
    from jobs.session import one_partition

    cfg, paths, _, result, root = ingested
    spread, seen = ingest_spark.spread, []

    def watched(spark, df, partitions, nbytes):
        seen.append(one_partition(spark))
        return spread(spark, df, partitions, nbytes)

    monkeypatch.setattr(ingest_spark, "spread", watched)
    with small_run():
        small = run_ingestion(spark, _cfg(paths, tmp_path / "out"), DAY1, DAY2, write_audit=False)
    assert seen and all(seen)  # the run was narrowed: no list (each far below 1 MiB) was spread
    assert small.counts == result.counts
    tables = ("offset_commits", "group_metadata", "record_batches", "epoch_lineage", "metadata_observations",
              "quarantine")
    assert {t: _rows(str(tmp_path / "out"), t) for t in tables} == {t: _rows(root, t) for t in tables}


def _executed(df) -> str:
    return df._jdf.queryExecution().executedPlan().toString()


@contextlib.contextmanager
def _narrowed(spark, small_run):
    """The session as the CLI narrows a small run (one shuffle partition, the mark set)."""
    from jobs.session import shuffles_for_input

    with small_run(), shuffles_for_input(spark, 1000) as width:
        assert width == 1
        yield


def test_a_small_run_spreads_only_a_long_work_list(spark, small_run):
    from jobs.ingest._spark import spread

    rows = spark.range(10)
    assert "Exchange" in _executed(spread(spark, rows, 4, 80))  # a larger run spreads them over four tasks
    with _narrowed(spark, small_run):
        assert "Exchange" not in _executed(spread(spark, rows, 4, 80))
        # a 2 MiB list is shuffled to spread it, not sent again in the tasks of every stage that reads it
        assert "Exchange" in _executed(spread(spark, rows, 4, 2 << 20))


def _checkpoints(n: int) -> list:
    from jobs.ingest.discover import LEC, InputFile

    return [InputFile("logdirs", LEC, f"/data/broker=1/snapshot=20240304T000000Z/topic-{i}/leader-epoch-checkpoint",
                      40, broker="1", snapshot_ms=1709510400000, topic="topic", partition=i,
                      name="leader-epoch-checkpoint") for i in range(n)]


def _segments(n: int) -> list:
    from jobs.ingest.discover import SEGMENT, InputFile

    return [InputFile("offsets", SEGMENT, f"/data/broker=1/__consumer_offsets-{i % 50}/{i:020d}.log", 1000,
                      broker="1", log_partition=i % 50, base_offset=i, name=f"{i:020d}.log") for i in range(n)]


def test_a_small_run_spreads_a_long_list_of_files(spark, small_run):
    """Checkpoint files are tiny: a small run can list 100,000 of them. A list above 1 MiB (here 3.4 MB of
    checkpoint chunks, 2.5 MB of range rows, 1.6 MB of file rows) is shuffled to spread it instead of travelling
    in the tasks of every stage that reads it (Spark warned of 10 MiB tasks); a short one is not."""
    from jobs.ingest import logdirs
    from jobs.ingest._rows import FILE_SCHEMA
    from jobs.ingest._spark import files_frame
    from jobs.ingest.ranges import ranges_frame

    with _narrowed(spark, small_run):
        assert "Exchange" not in _executed(logdirs.files_frame(spark, _checkpoints(100), 2))
        assert "Exchange" in _executed(logdirs.files_frame(spark, _checkpoints(20_000), 2))
        # the segment ranges (planned_frame's own spread) and a plain file list (frame's)
        assert "Exchange" not in _executed(ranges_frame(spark, _segments(10), split_bytes=1 << 20, parallelism=2))
        assert "Exchange" in _executed(ranges_frame(spark, _segments(20_000), split_bytes=1 << 20, parallelism=2))
        assert "Exchange" not in _executed(files_frame(spark, _segments(10), FILE_SCHEMA, 2))
        assert "Exchange" in _executed(files_frame(spark, _segments(20_000), FILE_SCHEMA, 2))


def _rows(root, table):
    return sorted(map(str, _read(root, table).drop_columns(["run_id"] if table == "quarantine" else []).to_pylist()))


def test_a_one_day_run_leaves_other_days_untouched(spark, tmp_path):
    paths, ex = build_inputs(tmp_path / "in")
    cfg = _cfg(paths, tmp_path / "out")
    run_ingestion(spark, cfg, DAY1, DAY2, write_audit=False)
    (tmp_path / "in" / "offsets" / "broker=1" / "__consumer_offsets-0" / "00000000000000000000.log").unlink()
    run_ingestion(spark, cfg, DAY1, DAY1, write_audit=False)
    dates = Counter(_read(str(tmp_path / "out"), "offset_commits")["event_date"].to_pylist())
    assert dates[DAY2] == ex.commits_day2  # the day-2 commit written by the first run is still there
    assert dates[DAY1] == ex.commits_day1 - 18  # day 1 was replaced without the deleted segment's commits


def test_real_broker_files_decode_without_quarantine(spark, real_data, tmp_path):
    logdirs = tmp_path / "logdirs" / "broker=1"
    logdirs.mkdir(parents=True)
    (logdirs / "snapshot=20241010T000000Z").symlink_to(real_data / "kraft-single-broker-2024")
    paths = {"offsets": str(real_data / "kraft-single-broker-2024"), "logdirs": str(tmp_path / "logdirs")}
    # the snapshot is a symlink out of the logdirs root: followed only when the config says so
    cfg = _cfg({**paths, "follow_symlinks": True}, tmp_path / "out", cluster="real")
    result = run_ingestion(spark, cfg, "2024-01-01", "2025-12-31")
    assert result.units_quarantined == 0
    commits = _read(str(tmp_path / "out"), "offset_commits").to_pylist()
    assert commits and {r["leader_epoch"] for r in commits} == {-1}
    assert {r["log_partition"] for r in commits} == {0, 39}
    assert {(r["topic"], r["partition"]) for r in commits if r["log_partition"] == 0} >= {("sensor-data-topic", 0)}
    lineage = {(r["topic"], r["partition"]): r for r in _read(str(tmp_path / "out"), "epoch_lineage").to_pylist()}
    lec0 = lineage[("__consumer_offsets", 0)]
    assert [(e["epoch"], e["start_offset"]) for e in lec0["entries"]] == [(2, 0), (4, 3), (6, 9), (8, 34)]
    assert lec0["topic_id"] is not None and lec0["log_end_offset"] is not None
    q = DeltaTable(str(tmp_path / "out" / "quarantine")) if (tmp_path / "out" / "quarantine").exists() else None
    assert q is None or q.to_pyarrow_table().num_rows == 0


def test_an_output_root_inside_an_input_root_is_not_read_back_as_input(spark, ingested, tmp_path):
    """``--output-root`` inside ``--offsets`` (and every other input): the second run reads the same evidence as the
    first, not the first run's tables (their Parquet files were read as offsets dumps, or quarantined as
    unrecognised files of the other inputs)."""
    import shutil

    _, paths, _, _, base_out = ingested
    src = {k: tmp_path / k for k in paths}
    for k, p in paths.items():
        shutil.copytree(p, src[k])
    out = src["offsets"] / "audit-tables"
    cfg = _cfg({k: str(v) for k, v in src.items()}, out)
    first = run_ingestion(spark, cfg, DAY1, DAY2, write_audit=False)
    second = run_ingestion(spark, cfg, DAY1, DAY2, write_audit=False)
    assert [(c.source_kind, c.unit, c.units_read, c.units_quarantined) for c in second.counts] == [
        (c.source_kind, c.unit, c.units_read, c.units_quarantined) for c in first.counts]
    base_in = str(Path(paths["offsets"]).parent)
    for table in ("offset_commits", "quarantine"):  # the same rows as a run whose tables lie elsewhere
        assert [r.replace(str(tmp_path), base_in) for r in _rows(str(out), table)] == _rows(base_out, table), table
    assert any(line.startswith("offsets: ") and "output, not input" in line for line in second.notes())
