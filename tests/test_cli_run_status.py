"""Missing data is never reported as success (issue 14.2/14.3, issue 18 item 8): real runs through the
CLI on the shared Spark session, their terminal summary, audit_runs rows, JSON summary and metrics."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest
from click.testing import CliRunner
from deltalake import DeltaTable
from prometheus_client.parser import text_string_to_metric_families
from test_notebook import commit_lines, write_tiny_inputs

from jobs.cli import EXIT_FINDINGS, EXIT_NO_INPUT, EXIT_SINK, cli
from jobs.errors import SinkError

pytestmark = pytest.mark.spark


def _runs(root: Path) -> list[dict]:
    return DeltaTable(str(root / "audit_runs")).to_pyarrow_table().to_pylist()


def _metrics(path: Path) -> dict[tuple[str, tuple], float]:
    out = {}
    for family in text_string_to_metric_families(path.read_text()):
        for s in family.samples:
            out[(s.name, tuple(sorted((k, v) for k, v in s.labels.items() if k != "cluster")))] = s.value
    return out


def test_empty_and_undecodable_inputs_are_no_input_not_success(spark, tmp_path: Path) -> None:
    offsets = tmp_path / "offsets"
    offsets.mkdir()  # configured, but empty
    junk = tmp_path / "captures"
    junk.mkdir()
    for i in range(11):  # random files: read, none decoded
        (junk / f"cap{i}.jsonl").write_bytes(os.urandom(64).replace(b"\n", b"x") + b"\n")
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--offsets", str(offsets), "--metadata", str(junk),
            "--output-root", str(out), "--cluster", "empty", "-q", "--summary-json", str(tmp_path / "s.json"),
            "--metrics-file", str(tmp_path / "m.prom")]
    res = CliRunner().invoke(cli, [*args, "--fail-on-no-input"])
    assert res.exit_code == EXIT_NO_INPUT, res.output
    assert "Status: no_input" in res.stdout
    assert "input offsets: no_input (configured but no input units found)" in res.stdout
    assert "input metadata: no_input (11 lines read, none decoded (11 quarantined))" in res.stdout
    runs = _runs(out)
    assert {r["status"] for r in runs} == {"no_input"}
    assert {(r["source_kind"], r["source_status"], r["units_read"], r["units_decoded"]) for r in runs} == {
        ("offsets", "no_input", 0, 0), ("metadata", "no_input", 11, 0)}
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "no_input" and doc["exit_code"] == EXIT_NO_INPUT
    assert doc["sources"]["metadata"]["units_quarantined"] == 11
    assert doc["days"]["2024-03-01"]["rows"] == {}
    m = _metrics(tmp_path / "m.prom")
    assert m[("epoch_audit_run_status", (("status", "no_input"),))] == 1
    assert m[("epoch_audit_units_quarantined", (("source_kind", "metadata"), ("unit", "line")))] == 11
    assert ("epoch_audit_last_success_timestamp_seconds", ()) not in m
    # without --fail-on-no-input the run still says it, and exits 0
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 0 and "Status: no_input" in again.stdout


def test_days_without_input_are_partial_and_fail_on_findings(spark, tmp_path: Path) -> None:
    inputs = write_tiny_inputs(tmp_path / "in")  # everything on 2024-03-01; nothing on 03-02
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--to", "2024-03-02", "--offsets", inputs["offsets"],
            "--logdirs", inputs["logdirs"], "--output-root", str(out), "--cluster", "tiny", "-q",
            "--summary-json", str(tmp_path / "s.json"), "--metrics-file", str(tmp_path / "m.prom"),
            "--fail-on", "error"]
    res = CliRunner().invoke(cli, args)
    assert res.exit_code == EXIT_FINDINGS, res.output
    assert "Status: partial" in res.stdout
    assert "input offsets: partial (no rows on 2024-03-02)" in res.stdout
    assert "2024-03-01       1  (1 error)" in res.stdout and "2024-03-02       0" in res.stdout
    assert "error    S1e spurious_rewind: orders-0, group g1, broker 1 (150 records re-read)" in res.stdout
    runs = _runs(out)
    assert {r["status"] for r in runs} == {"partial"}
    days = {r["source_kind"]: r["days_without_input"] for r in runs}
    assert [str(d) for d in days["offsets"]] == ["2024-03-02"]
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["exit_code"] == EXIT_FINDINGS and doc["findings"]["by_severity"]["error"] == 1
    assert doc["findings"]["top"][0]["subject"] == "orders-0, group g1, broker 1"
    assert doc["days"]["2024-03-01"]["rows"]["offsets"] == 3 and doc["days"]["2024-03-02"]["rows"] == {}
    m = _metrics(tmp_path / "m.prom")
    assert m[("epoch_audit_findings", (("kind", "spurious_rewind"), ("report", "spurious_offset_resets"),
                                       ("rule", "S1e"), ("severity", "error")))] == 1
    assert m[("epoch_audit_units_read", (("source_kind", "offsets"), ("unit", "line")))] == 3
    assert m[("epoch_audit_run_status", (("status", "partial"),))] == 1
    last_success = m[("epoch_audit_last_success_timestamp_seconds", ())]
    assert m[("epoch_audit_run_duration_seconds", ())] > 0

    # a failed run writes its audit_runs row with the error, keeps the last success in the metrics; the
    # warnings it printed before it failed (under -q too) follow the error and reach the JSON
    import jobs.reports
    import jobs.session

    def broken(*a, **k):
        raise SinkError("disk full while writing fencing_violations")

    mp = pytest.MonkeyPatch()
    mp.setattr(jobs.reports, "run_reports", broken)
    mp.setattr(jobs.session, "python_memory_warning", lambda session: "workers too\nsmall")
    try:
        res = CliRunner().invoke(cli, args)
    finally:
        mp.undo()
    assert res.exit_code == EXIT_SINK and "disk full" in res.output
    assert "warning: workers too\\nsmall" in res.output  # one line on the terminal, the text as it was in the JSON
    failed = [r for r in _runs(out) if r["status"] == "failed"]
    assert failed and {r["error"] for r in failed} == {  # one line
        "disk full while writing fencing_violations [warning: workers too small]"}
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "failed" and doc["warnings"] == ["workers too\nsmall"]
    assert doc["error"] == "disk full while writing fencing_violations"
    # the JSON names the failed run as its audit_runs rows do, so an alert can lead to them
    assert {r["run_id"] for r in failed} == {doc["run_id"]} and doc["run_id"] != runs[0]["run_id"]
    assert {r["started_at"].isoformat() for r in failed} == {doc["started_at"]}
    m = _metrics(tmp_path / "m.prom")
    assert m[("epoch_audit_run_status", (("status", "failed"),))] == 1
    assert m[("epoch_audit_last_success_timestamp_seconds", ())] == last_success
    # --fail-on-no-input: a day of the range without rows is missing input (exit 6), whatever the findings
    gap = CliRunner().invoke(cli, [*args[:-2], "--fail-on-no-input"])
    assert gap.exit_code == EXIT_NO_INPUT and "--fail-on-no-input" in gap.stderr, gap.output


def test_a_day_without_log_dir_snapshots_is_missing_input_though_a_later_snapshot_holds_its_batches(
        spark, tmp_path: Path) -> None:
    """Log dirs cover a day by the snapshots taken on it, not by the record batches a later snapshot's segments
    hold of it (dated by their batch timestamps): the day was reported covered (``days_without_input`` []), and
    the rules judged its commits by the next day's rounds (hundreds of false F2 errors)."""
    from test_notebook import T0

    from epochlib import records
    from epochlib.records import NewRecord

    inputs = write_tiny_inputs(tmp_path / "in")  # offsets on 2024-03-01, snapshots at 2024-03-01 06:00
    for broker in (1, 2):  # the snapshots taken on 03-02 instead, their segment holding a batch of 03-01
        b = Path(inputs["logdirs"]) / f"broker={broker}"
        (b / "snapshot=20240301T060000Z").rename(b / "snapshot=20240302T060000Z")
        batch = records.encode_batch([NewRecord(b"k", b"v", T0)], base_offset=10, partition_leader_epoch=2)
        (b / "snapshot=20240302T060000Z" / "orders-0" / "00000000000000000010.log").write_bytes(batch)
    out = tmp_path / "tables"
    res = CliRunner().invoke(cli, [
        "run", "--from", "2024-03-01", "--to", "2024-03-02", "--offsets", inputs["offsets"], "--logdirs",
        inputs["logdirs"], "--output-root", str(out), "--cluster", "tiny", "-q",
        "--summary-json", str(tmp_path / "s.json"), "--fail-on-no-input"])
    assert res.exit_code == EXIT_NO_INPUT, res.output
    assert "input logdirs: partial (no snapshots taken on 2024-03-01)" in res.stdout
    days = {r["source_kind"]: r["days_without_input"] for r in _runs(out)}
    assert [str(d) for d in days["logdirs"]] == ["2024-03-01"]
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["sources"]["logdirs"]["days_without_input"] == ["2024-03-01"]
    assert doc["days"]["2024-03-01"]["rows"]["logdirs"] == 2  # the batch (in both replicas), dated on 03-01
    assert doc["days"]["2024-03-02"]["rows"]["logdirs"] == 2  # the two snapshots


def _tiny_inputs_and_metadata_log(tmp_path: Path) -> dict[str, str]:
    """The tiny inputs (offsets and logdirs on 2024-03-01) and a copy of a metadata log under ``in/cluster_metadata``
    whose changes lie two months later."""
    from fixtures_kraft import metadata_log

    inputs = write_tiny_inputs(tmp_path / "in")
    d = tmp_path / "in" / "cluster_metadata" / "node=1" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(metadata_log(3))
    return inputs


def test_the_metadata_log_has_its_own_status_and_a_quiet_day_is_ok(spark, tmp_path: Path) -> None:
    """cluster_metadata gets a per-source status like the three inputs, judged by its units: the log's only
    changes are two months after the range (a quiet range), which is no missing input."""
    inputs = _tiny_inputs_and_metadata_log(tmp_path)  # offsets and logdirs on 2024-03-01
    out = tmp_path / "tables"
    res = CliRunner().invoke(cli, [
        "run", "--from", "2024-03-01", "--offsets", inputs["offsets"], "--logdirs", inputs["logdirs"],
        "--cluster-metadata", str(tmp_path / "in" / "cluster_metadata"), "--output-root", str(out),
        "--cluster", "tiny", "-q", "--summary-json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    assert "Status: ok" in res.stdout and "input cluster_metadata" not in res.stdout
    runs = {(r["source_kind"], r["unit"]): r for r in _runs(out)}
    assert {k for k in runs if k[0] == "cluster_metadata"} >= {("cluster_metadata", "batch")}
    assert {r["source_status"] for k, r in runs.items() if k[0] == "cluster_metadata"} == {"ok"}
    assert runs[("cluster_metadata", "batch")]["days_without_input"] == []
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "ok" and doc["sources"]["cluster_metadata"]["status"] == "ok"
    assert doc["sources"]["cluster_metadata"]["units_read"] == runs[("cluster_metadata", "batch")]["units_read"] + sum(
        r["units_read"] for k, r in runs.items() if k[0] == "cluster_metadata" and k[1] != "batch")


def test_a_night_without_new_input_is_no_input_though_a_metadata_log_copy_decodes(spark, tmp_path: Path) -> None:
    """The metadata log is state, not daily data: its old files decode every night. With a copy configured, a night
    whose daily inputs hold nothing of the range was ``partial`` and advanced "last success" (exit 6 only by
    --fail-on-no-input); without the copy it was ``no_input``. Now both are ``no_input``."""
    inputs = _tiny_inputs_and_metadata_log(tmp_path)  # offsets and logdirs on 2024-03-01 only
    out = tmp_path / "tables"
    res = CliRunner().invoke(cli, [
        "run", "--from", "2024-03-02", "--offsets", inputs["offsets"], "--logdirs", inputs["logdirs"],
        "--cluster-metadata", str(tmp_path / "in" / "cluster_metadata"), "--output-root", str(out),
        "--cluster", "tiny", "-q", "--fail-on-no-input", "--metrics-file", str(tmp_path / "n.prom")])
    assert res.exit_code == EXIT_NO_INPUT, res.output
    assert "Status: no_input" in res.stdout
    m = _metrics(tmp_path / "n.prom")
    assert m[("epoch_audit_run_status", (("status", "no_input"),))] == 1
    assert ("epoch_audit_last_success_timestamp_seconds", ()) not in m
    assert {r["status"] for r in _runs(out)} == {"no_input"}


def test_a_metadata_log_read_from_logdirs_is_judged_too(spark, tmp_path: Path) -> None:
    """A ``__cluster_metadata-0`` inside a log-dir snapshot is read without ``--cluster-metadata``: a hole in it
    (offsets 11-19 missing) made a run that said ``ok``. Its status is now the run's, and the reports' rerun
    over the same tables says the same."""
    from fixtures_kraft import T, metadata_log

    from epochlib.kraft.codec import encode_metadata_batch

    inputs = write_tiny_inputs(tmp_path / "in")
    d = Path(inputs["logdirs"]) / "broker=1" / "snapshot=20240301T060000Z" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(metadata_log(3))
    (d / "00000000000000000020.log").write_bytes(encode_metadata_batch(
        [(5, 0, {"partition_id": 0, "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "leader": 2})], base_offset=20,
        raft_epoch=1, timestamp=T + 300_000))
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--offsets", inputs["offsets"], "--logdirs", inputs["logdirs"],
            "--output-root", str(out), "--cluster", "tiny", "-q"]
    res = CliRunner().invoke(cli, [*args, "--summary-json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    assert "Status: partial" in res.stdout and "input cluster_metadata: partial" in res.stdout, res.output
    assert "input logdirs" not in res.stdout  # the log-dir files themselves were read whole
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "partial" and doc["sources"]["cluster_metadata"]["units_quarantined"] >= 1
    again = CliRunner().invoke(cli, [*args, "--reports-only"])
    assert again.exit_code == 0 and "input cluster_metadata: partial" in again.stdout, again.output
    # the next night's run replays the same log with the same hole: its history is cut too (not a unit another
    # run stored already); so with a record two copies hold differently (dated by the record, another day, it was
    # left to that day's run, while every run's replay keeps the first copy's)
    other = d.parent.parent.parent / "broker=2" / "snapshot=20240301T060000Z" / "__cluster_metadata-0"
    other.mkdir(parents=True)
    (other / "00000000000000000000.log").write_bytes(metadata_log(2))  # differs at offset 10
    args[2] = "2024-03-02"
    night2 = CliRunner().invoke(cli, args)
    assert night2.exit_code == 0 and "input cluster_metadata: partial (2 of" in night2.stdout, night2.output


def test_the_run_s_duration_is_one_figure(spark, tmp_path: Path) -> None:
    """The "done in X s" progress line, audit_runs (finished_at - started_at) and the JSON summary's duration_s
    (and so the metrics) give the same duration; the JSON used to count the Spark session's start too."""
    import re

    inputs = write_tiny_inputs(tmp_path / "in")
    out = tmp_path / "tables"
    res = CliRunner().invoke(cli, ["run", "--from", "2024-03-01", "--offsets", inputs["offsets"], "--output-root",
                                   str(out), "--cluster", "tiny", "--summary-json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    done = float(re.search(r"done in ([0-9.]+)s: status", res.stderr).group(1))
    doc = json.loads((tmp_path / "s.json").read_text())
    (run,) = {(r["started_at"], r["finished_at"]) for r in _runs(out)}
    recorded = (run[1] - run[0]).total_seconds()
    assert abs(doc["duration_s"] - recorded) <= 0.001
    assert abs(doc["duration_s"] - done) <= 0.051  # the line rounds to 0.1 s


def test_reports_only_over_rows_from_damaged_input_is_partial_as_the_run_that_ingested_them(
        spark, tmp_path: Path) -> None:
    """The reports rerun over the same silver rows are as incomplete as the run that ingested them: it said
    ``ok`` (and refreshed "last success") where that run said ``partial`` for its quarantined units."""
    inputs = write_tiny_inputs(tmp_path / "in")
    commits = Path(inputs["offsets"]) / "commits.jsonl"
    with commits.open("a") as f:  # a line whose key is not base64, dated on the run's day
        f.write(json.dumps({"key": "not base64!", "value": "", "partition": 7, "offset": 9,
                            "timestamp": 1709280000000}) + "\n")
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--offsets", inputs["offsets"], "--logdirs", inputs["logdirs"],
            "--output-root", str(out), "--cluster", "tiny", "-q"]
    first = CliRunner().invoke(cli, [*args, "--fail-on-no-input"])  # partial by a quarantined unit: input was there
    assert first.exit_code == 0 and "input offsets: partial (1 of 4 units quarantined)" in first.stdout, first.output
    again = CliRunner().invoke(cli, [*args, "--reports-only", "--summary-json", str(tmp_path / "s.json")])
    assert again.exit_code == 0, again.output
    assert "Status: partial" in again.stdout
    assert "input offsets: partial (1 input units in quarantine for the range)" in again.stdout
    assert "input logdirs" not in again.stdout  # the clean source stays ok
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "partial" and doc["sources"]["offsets"]["units_quarantined"] == 0  # it read no units
    assert {r["status"] for r in _runs(out) if r["run_id"] == doc["run_id"]} == {"partial"}


def test_a_rerun_after_a_source_s_files_are_gone_keeps_its_rows_and_findings_and_says_so(
        spark, tmp_path: Path) -> None:
    """A nightly catch-up after the offsets dumps rotated away (the folder still configured, empty) wiped the
    day's commits and their findings (rc 0, "no_input" the only signal). The rows earlier runs stored stay, the
    reports read them, and the run says it kept them; the source is still no_input (it read nothing)."""
    inputs = write_tiny_inputs(tmp_path / "in")
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--offsets", inputs["offsets"], "--logdirs", inputs["logdirs"],
            "--output-root", str(out), "--cluster", "tiny", "-q"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0 and "S1e spurious_rewind" in first.stdout, first.output
    commits = DeltaTable(str(out / "offset_commits")).to_pyarrow_table().num_rows
    assert commits > 0
    (Path(inputs["offsets"]) / "commits.jsonl").unlink()  # rotated away: the folder is still configured
    again = CliRunner().invoke(cli, [*args, "--summary-json", str(tmp_path / "s.json")])
    assert again.exit_code == 0, again.output
    assert (f"input offsets: no_input (no input units; kept the {commits} rows earlier runs stored for "
            "2024-03-01)") in again.stdout
    assert "S1e spurious_rewind" in again.stdout and "Status: partial" in again.stdout
    assert DeltaTable(str(out / "offset_commits")).to_pyarrow_table().num_rows == commits
    assert DeltaTable(str(out / "spurious_offset_resets")).to_pyarrow_table().num_rows == 1
    doc = json.loads((tmp_path / "s.json").read_text())
    off = doc["sources"]["offsets"]
    assert off["status"] == "no_input" and off["rows_kept"] == commits and off["days_without_input"] == []
    runs = [r for r in _runs(out) if r["run_id"] == doc["run_id"]]
    assert {(r["source_kind"], r["source_status"], r["units_read"], tuple(r["days_without_input"])) for r in runs} == {
        ("offsets", "no_input", 0, ()), ("logdirs", "ok", 4, ())}
    # --fail-on-no-input still says the input is gone (exit 6), the rows stay; zero-byte dumps left in the folder
    # are said (the reason read as if the folder were empty)
    for name in ("commits-1.jsonl", "commits-2.jsonl"):
        (Path(inputs["offsets"]) / name).touch()
    failing = CliRunner().invoke(cli, [*args, "--fail-on-no-input"])
    assert failing.exit_code == EXIT_NO_INPUT and "S1e spurious_rewind" in failing.stdout, failing.output
    assert f"input offsets: no_input (no input units (2 empty files); kept the {commits} rows" in failing.stdout
    assert DeltaTable(str(out / "offset_commits")).to_pyarrow_table().num_rows == commits


def test_a_rerun_that_reads_nothing_keeps_the_range_s_rows_and_bad_units(spark, tmp_path: Path) -> None:
    """Every configured folder emptied: the rows and the bad units earlier runs stored stay (L1, which reads the
    unreadable checkpoint from the quarantine, reports it again), and the run is no_input, saying so — the bad unit
    it kept too (its reason and `report`'s coverage named the rows only: L1 with no quarantined unit to show)."""
    inputs = write_tiny_inputs(tmp_path / "in")
    bad = Path(inputs["logdirs"]) / "broker=1" / "snapshot=20240301T060000Z" / "orders-0" / "leader-epoch-checkpoint"
    bad.write_text("0\n2\nnot a checkpoint\n")
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--logdirs", inputs["logdirs"], "--output-root", str(out),
            "--cluster", "tiny", "-q"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0 and "L1 checkpoint_unreadable" in first.stdout, first.output
    lineage = DeltaTable(str(out / "epoch_lineage")).to_pyarrow_table().num_rows
    import shutil

    shutil.rmtree(inputs["logdirs"])
    Path(inputs["logdirs"]).mkdir()
    again = CliRunner().invoke(cli, [*args, "--summary-json", str(tmp_path / "s.json")])
    assert again.exit_code == 0, again.output
    assert "input logdirs: no_input (no input units; kept the" in again.stdout and "Status: no_input" in again.stdout
    assert "2024-03-01, and their 1 quarantined unit (the quarantine table))" in again.stdout
    assert json.loads((tmp_path / "s.json").read_text())["sources"]["logdirs"]["quarantine_kept"] == 1
    assert "L1 checkpoint_unreadable" in again.stdout
    rerun = max(_runs(out), key=lambda r: r["finished_at"])["run_id"]
    report = CliRunner().invoke(cli, ["report", "--from", "2024-03-01", "--output-root", str(out), "--cluster", "tiny"])
    assert (f"  input logdirs: quarantined 1 unit stored by earlier runs and kept by run {rerun}, which read none of "
            "this source (the quarantine table)") in report.output, report.output
    assert DeltaTable(str(out / "epoch_lineage")).to_pyarrow_table().num_rows == lineage
    assert DeltaTable(str(out / "quarantine")).to_pyarrow_table().num_rows == 1


def test_a_bad_unit_dated_outside_the_range_is_left_to_the_run_whose_range_holds_it(spark, tmp_path: Path) -> None:
    """A bad checkpoint in a snapshot two days later made a one-day run ``partial`` ("1 input units quarantined:
    see …/quarantine") with no quarantine row to show: the unit is the later run's, in its counts and status."""
    inputs = write_tiny_inputs(tmp_path / "in")
    bad = Path(inputs["logdirs"]) / "broker=1" / "snapshot=20240303T060000Z" / "orders-0" / "leader-epoch-checkpoint"
    bad.parent.mkdir(parents=True)
    bad.write_text("0\n2\nnot a checkpoint\n")
    out = tmp_path / "tables"
    args = ["--offsets", inputs["offsets"], "--logdirs", inputs["logdirs"], "--output-root", str(out),
            "--cluster", "tiny", "-q"]
    first = CliRunner().invoke(cli, ["run", "--from", "2024-03-01", *args])
    assert first.exit_code == 0, first.output
    assert "Status: ok" in first.stdout and "quarantined" not in first.stdout
    assert {(r["source_kind"], r["units_quarantined"]) for r in _runs(out)} >= {("logdirs", 0)}
    assert not (out / "quarantine").exists() or DeltaTable(str(out / "quarantine")).to_pyarrow_table().num_rows == 0
    later = CliRunner().invoke(cli, ["run", "--from", "2024-03-03", *args])
    assert "1 input units quarantined" in later.stdout, later.output  # the day holds no rows but the bad one
    assert DeltaTable(str(out / "quarantine")).to_pyarrow_table().num_rows == 1


def test_a_rerun_of_one_source_keeps_the_other_sources_bad_units_and_their_findings(spark, tmp_path: Path) -> None:
    """The quarantine is replaced by date, not by kind: a rerun with --offsets alone dropped the logdirs' unreadable
    checkpoint of the range, and with it L1 — while that source's silver rows, which it does not touch, stayed."""
    inputs = write_tiny_inputs(tmp_path / "in")
    bad = Path(inputs["logdirs"]) / "broker=2" / "snapshot=20240301T060000Z" / "orders-0" / "leader-epoch-checkpoint"
    bad.write_text("0\n2\nnot a checkpoint\n")
    out = tmp_path / "tables"
    common = ["run", "--from", "2024-03-01", "--output-root", str(out), "--cluster", "tiny", "-q"]
    first = CliRunner().invoke(cli, [*common, "--offsets", inputs["offsets"], "--logdirs", inputs["logdirs"]])
    assert first.exit_code == 0 and "L1 checkpoint_unreadable" in first.stdout, first.output
    again = CliRunner().invoke(cli, [*common, "--offsets", inputs["offsets"]])
    assert again.exit_code == 0, again.output
    assert "L1 checkpoint_unreadable" in again.stdout
    rows = DeltaTable(str(out / "quarantine")).to_pyarrow_table().to_pylist()
    assert [(r["source_kind"], r["unit"]) for r in rows] == [("logdirs", "file")]
    first_run = min(_runs(out), key=lambda r: r["started_at"])["run_id"]
    assert rows[0]["run_id"] == first_run  # kept as the run that met it wrote it


def test_an_undated_bad_unit_is_stored_once_by_nightly_runs_as_by_one_run_over_their_days(
        spark, tmp_path: Path) -> None:
    """A bad line without a time and a broken link have no date: the first run stores them under its ``from``.
    Each later nightly run stored them again under its own (one more row of the same line per night, counted again
    each night). A run over D+1 now leaves them under D, as a run over D..D+1 stores them once; a rerun of D
    replaces them in place."""
    inputs = write_tiny_inputs(tmp_path / "in")
    with (Path(inputs["offsets"]) / "commits.jsonl").open("a") as f:
        f.write(json.dumps({"key": "not base64!", "value": "", "partition": 7, "offset": 9}) + "\n")
    os.symlink(tmp_path / "nowhere.log", Path(inputs["offsets"]) / "gone.log")

    def run(root: Path, *days: str, quiet: bool = True) -> object:
        res = CliRunner().invoke(cli, ["run", "--from", days[0], "--to", days[-1], "--offsets", inputs["offsets"],
                                       "--output-root", str(root), "--cluster", "tiny", *(["-q"] if quiet else [])])
        assert res.exit_code == 0, res.output
        return res

    def stored(root: Path) -> list[tuple]:
        return sorted((str(r["event_date"]), r["unit"], r["reason"][:20])
                      for r in DeltaTable(str(root / "quarantine")).to_pyarrow_table().to_pylist())

    nightly, whole = tmp_path / "nightly", tmp_path / "whole"
    first = run(nightly, "2024-03-01")
    assert "input offsets: partial (2 of" in first.stdout, first.output
    second = run(nightly, "2024-03-02", quiet=False)
    assert "offsets: 2 bad units left to the runs of other dates" in second.stderr, second.output
    assert "quarantined" not in second.stdout
    run(whole, "2024-03-01", "2024-03-02")
    assert stored(nightly) == stored(whole) and [d for d, *_ in stored(whole)] == ["2024-03-01", "2024-03-01"]
    second_id = max(_runs(nightly), key=lambda r: r["started_at"])["run_id"]
    assert {r["units_quarantined"] for r in _runs(nightly) if r["run_id"] == second_id} == {0}
    run(nightly, "2024-03-01")  # a rerun of the day that holds them: replaced, not added
    assert stored(nightly) == stored(whole)


def test_reports_only_for_a_mistyped_cluster_is_exit_3_naming_the_clusters_there(spark, tmp_path: Path) -> None:
    """``--reports-only --cluster`` with a typo said "Status: partial", exit 0 (every source ``no_input``, the
    metadata log ``ok`` with nothing read): it is exit 3 with one line, as ``report``/``findings`` say it. A
    cluster whose runs stored no ``partition_history`` row (another cluster's did) reads no metadata log:
    ``no_input``, not ``ok``."""
    from fixtures_kraft import metadata_log

    inputs = write_tiny_inputs(tmp_path / "in")
    out = tmp_path / "tables"
    tiny = CliRunner().invoke(cli, ["run", "--from", "2024-03-01", "--offsets", inputs["offsets"], "--logdirs",
                                    inputs["logdirs"], "--output-root", str(out), "--cluster", "tiny", "-q"])
    assert tiny.exit_code == 0, tiny.output
    d = tmp_path / "in" / "cluster_metadata" / "node=1" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(metadata_log(3))
    other = CliRunner().invoke(cli, ["run", "--from", "2024-05-01", "--cluster-metadata",
                                     str(tmp_path / "in" / "cluster_metadata"), "--output-root", str(out),
                                     "--cluster", "other", "-q"])
    assert other.exit_code == 0, other.output

    typo = CliRunner().invoke(cli, ["run", "--from", "2024-03-01", "--reports-only", "--output-root", str(out),
                                    "--cluster", "tinny", "-q"])
    assert typo.exit_code == 3, typo.output
    assert typo.stdout == "" and typo.stderr.strip() == (
        f"epoch-audit: error: --reports-only: no run of cluster 'tinny' at {out}/ (clusters there: other, tiny)")

    again = CliRunner().invoke(cli, ["run", "--from", "2024-03-01", "--reports-only", "--output-root", str(out),
                                     "--cluster", "tiny", "-q"])
    assert again.exit_code == 0, again.output
    assert "input cluster_metadata: no_input (no silver rows of the cluster" in again.stdout, again.stdout
    assert "input offsets" not in again.stdout and "input logdirs" not in again.stdout


def test_a_two_day_rerun_after_one_day_s_dumps_are_gone_keeps_that_day(spark, tmp_path: Path) -> None:
    """The dumps of the range's first day rotated away, those of its second day still there: a rerun over both days
    replaced the first day's commits by none, and its S1e went with them. A day the run's input of a source yields
    no row and no unit of is to keep what earlier runs stored for it, as a source without any input does."""
    inputs = write_tiny_inputs(tmp_path / "in")  # g1's commits (200 -> 50: S1e) on 2024-03-01
    day2 = 1709251200000 + 86_400_000 + 3_600_000  # 2024-03-02T01:00:00Z
    (Path(inputs["offsets"]) / "commits-0302.jsonl").write_text(commit_lines("g2", (10, 20, 30), day2, log_partition=8))
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--to", "2024-03-02", "--offsets", inputs["offsets"], "--logdirs",
            inputs["logdirs"], "--output-root", str(out), "--cluster", "tiny", "-q"]
    first = CliRunner().invoke(cli, args)
    assert "S1e spurious_rewind" in first.stdout, first.output

    def commits_on(day: str) -> int:
        t = DeltaTable(str(out / "offset_commits")).to_pyarrow_table().to_pylist()
        return sum(1 for r in t if str(r["event_date"]) == day)

    assert (commits_on("2024-03-01"), commits_on("2024-03-02")) == (3, 3)
    (Path(inputs["offsets"]) / "commits.jsonl").unlink()  # the first day's dumps rotated away
    again = CliRunner().invoke(cli, args)
    assert (commits_on("2024-03-01"), commits_on("2024-03-02")) == (3, 3), again.output
    assert "S1e spurious_rewind" in again.stdout, again.output
    assert "kept the 3 rows earlier runs stored for 2024-03-01" in again.stdout, again.output


def test_a_rerun_after_one_day_s_snapshot_folders_are_gone_keeps_that_day_s_lineage_and_bad_units(
        spark, tmp_path: Path) -> None:
    """Log dirs: the first day's snapshot folders removed, the second day's still there. The rerun over both days
    keeps the first day's epoch_lineage rows and its unreadable checkpoint (the quarantine row L1 reads), and says
    it kept them; the second day is replaced as before."""
    import shutil

    inputs = write_tiny_inputs(tmp_path / "in")
    logdirs = Path(inputs["logdirs"])
    for broker in (1, 2):
        shutil.copytree(logdirs / f"broker={broker}" / "snapshot=20240301T060000Z",
                        logdirs / f"broker={broker}" / "snapshot=20240302T060000Z")
    (logdirs / "broker=1" / "snapshot=20240301T060000Z" / "orders-0" / "leader-epoch-checkpoint").write_text(
        "0\n2\nnot a checkpoint\n")
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--to", "2024-03-02", "--logdirs", inputs["logdirs"], "--output-root",
            str(out), "--cluster", "tiny", "-q"]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0 and "L1 checkpoint_unreadable" in first.stdout, first.output

    def lineage() -> list[tuple]:  # (day, broker, the data file the row is in)
        t = DeltaTable(str(out / "epoch_lineage"))
        rows = []
        for f in t.file_uris():
            day = f.split("event_date=")[1].split("/")[0]
            rows += [(day, b, f) for b in pq.read_table(f.removeprefix("file://"), columns=["broker"])["broker"]
                     .to_pylist()]
        return sorted(rows)

    before = lineage()
    assert {d for d, _, _ in before} == {"2024-03-01", "2024-03-02"}
    for broker in (1, 2):
        shutil.rmtree(logdirs / f"broker={broker}" / "snapshot=20240301T060000Z")
    again = CliRunner().invoke(cli, [*args, "--summary-json", str(tmp_path / "s.json")])
    assert again.exit_code == 0, again.output
    after = lineage()
    day1 = [r for r in before if r[0] == "2024-03-01"]
    assert [r for r in after if r[0] == "2024-03-01"] == day1  # kept as the first run stored it
    assert {r[2] for r in after if r[0] == "2024-03-02"} != {r[2] for r in day1}  # replaced by the rerun
    assert "L1 checkpoint_unreadable" in again.stdout
    assert [r["source_kind"] for r in DeltaTable(str(out / "quarantine")).to_pyarrow_table().to_pylist()] == [
        "logdirs"]
    assert (f"input logdirs: partial (kept the {len(day1)} rows earlier runs stored for 2024-03-01 (no input of "
            "it that day), and their 1 quarantined unit (the quarantine table))") in again.stdout, again.output
    logs = json.loads((tmp_path / "s.json").read_text())["sources"]["logdirs"]
    assert logs["rows_kept"] == len(day1) and logs["days_without_input"] == []
    assert logs["quarantine_kept"] == 1 and logs["days_kept"] == ["2024-03-01"]
    # the day's input is gone, as for a source kept whole: --fail-on-no-input says so
    rerun = max(_runs(out), key=lambda r: r["finished_at"])["run_id"]
    report = CliRunner().invoke(cli, ["report", "--from", "2024-03-01", "--to", "2024-03-02", "--output-root",
                                      str(out), "--cluster", "tiny"])
    assert (f"  input logdirs: quarantined 1 unit stored by earlier runs and kept by run {rerun}, which had no input "
            "of it on 2024-03-01 (the quarantine table)") in report.output, report.output
    strict = CliRunner().invoke(cli, [*args, "--fail-on-no-input"])
    assert strict.exit_code == 6, strict.output


def _snapshot_with_batches(logdirs: Path, snap: str, batches: list[tuple[int, int, int]]) -> None:
    """Broker 1's snapshot ``snap`` of ``orders-0``: lineage epochs 0 at 0 and 2 at 10, and one segment holding the
    batches (base offset, partition leader epoch, max timestamp ms)."""
    from epochlib import checkpoint, records
    from epochlib.records import NewRecord

    pdir = logdirs / "broker=1" / f"snapshot={snap}" / "orders-0"
    pdir.mkdir(parents=True)
    (pdir / "leader-epoch-checkpoint").write_text(checkpoint.format_leader_epoch_checkpoint([(0, 0), (2, 10)]))
    (pdir / "00000000000000000000.log").write_bytes(b"".join(
        records.encode_batch([NewRecord(b"k", b"v", ts)], base_offset=base, partition_leader_epoch=epoch)
        for base, epoch, ts in batches))


def _batches(out: Path) -> list[tuple]:
    """(snapshot_ts, event_date, base_offset) of every stored record_batches row."""
    t = DeltaTable(str(out / "record_batches")).to_pyarrow_table(columns=["snapshot_ts", "event_date", "base_offset"])
    return sorted((str(r["snapshot_ts"]), str(r["event_date"]), r["base_offset"]) for r in t.to_pylist())


_H = 3_600_000
_MAR1, _MAR2 = 1709251200000, 1709337600000  # 2024-03-01T00:00Z, 2024-03-02T00:00Z


def _two_snapshots(tmp_path: Path) -> tuple[Path, Path, list[str]]:
    """Broker 1's snapshots of 03-01 (batches of epochs 0, 2, 1: a critical L3) and 03-02 (the first two batches,
    still dated 03-01, and one of 03-02); the log dirs, the output root and a `run` over both days."""
    logdirs = tmp_path / "logdirs"
    _snapshot_with_batches(logdirs, "20240301T060000Z",
                           [(0, 0, _MAR1 + _H), (10, 2, _MAR1 + 2 * _H), (20, 1, _MAR1 + 3 * _H)])
    _snapshot_with_batches(logdirs, "20240302T060000Z",
                           [(0, 0, _MAR1 + _H), (10, 2, _MAR1 + 2 * _H), (30, 2, _MAR2 + _H)])
    out = tmp_path / "tables"
    return logdirs, out, ["run", "--from", "2024-03-01", "--to", "2024-03-02", "--logdirs", str(logdirs),
                          "--output-root", str(out), "--cluster", "tiny", "-q"]


@pytest.mark.parametrize("stages_files", [True, False], ids=["delta-rs", "delta-spark-path"])
def test_a_rerun_after_one_day_s_snapshot_folders_are_gone_keeps_that_snapshot_s_record_batches(
        spark, tmp_path: Path, monkeypatch, stages_files: bool) -> None:
    """The first day's snapshot held a stale leader's batch (L3 batch_epoch_regression, critical) that the second
    day's snapshot no longer holds, though its older segment still dates two batches on the first day. A rerun after
    the first day's snapshot folder is removed keeps every record_batches row of that snapshot (and its finding),
    re-derives the second snapshot's without duplicating them, and counts the kept batches in ``rows_kept``. The
    same through delta-spark's path (no staged files: the frame is written whole, the state from the work rows)."""
    import shutil

    import jobs.sink

    if not stages_files:
        monkeypatch.setattr(jobs.sink, "adopts_files", lambda *a, **k: False)
    logdirs, out, args = _two_snapshots(tmp_path)
    args += ["--summary-json", str(tmp_path / "s.json")]
    first = CliRunner().invoke(cli, args)
    assert "L3 batch_epoch_regression" in first.stdout, first.output
    before = _batches(out)
    assert len(before) == 6
    day1_snapshot = [r for r in before if r[0].startswith("2024-03-01")]
    shutil.rmtree(logdirs / "broker=1" / "snapshot=20240301T060000Z")
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == EXIT_FINDINGS or again.exit_code == 0, again.output
    after = _batches(out)
    assert [r for r in after if r[0].startswith("2024-03-01")] == day1_snapshot, again.output  # all kept
    assert after == before  # the second snapshot's rows re-derived once: none twice, none lost
    assert "L3 batch_epoch_regression" in again.stdout, again.output
    logs = json.loads((tmp_path / "s.json").read_text())["sources"]["logdirs"]
    assert logs["rows_kept"] == 1 + len(day1_snapshot), logs  # the day's lineage row and its snapshot's batches
    assert (f"input logdirs: partial (kept the {1 + len(day1_snapshot)} rows earlier runs stored for 2024-03-01 "
            "(no input of it that day))") in again.stdout, again.output


def test_a_snapshot_whose_checkpoint_is_gone_but_whose_segments_are_there_is_not_carried_over_twice(
        spark, tmp_path: Path) -> None:
    """Lineage keeps the day (its leader-epoch-checkpoint is gone), but the run still reads that snapshot's
    segments: its batches are re-derived, not carried over beside the stored ones."""
    logdirs, out, args = _two_snapshots(tmp_path)
    CliRunner().invoke(cli, args)
    before = _batches(out)
    (logdirs / "broker=1" / "snapshot=20240301T060000Z" / "orders-0" / "leader-epoch-checkpoint").unlink()
    again = CliRunner().invoke(cli, args)
    assert sorted(_batches(out)) == sorted(before), again.output


def test_a_first_run_whose_first_day_has_no_snapshot_writes_the_batches_later_snapshots_date_on_it(
        spark, tmp_path: Path) -> None:
    """No stored rows to keep: the batches the second day's snapshot dates on the first day are written."""
    logdirs = tmp_path / "logdirs"
    _snapshot_with_batches(logdirs, "20240302T060000Z", [(0, 0, _MAR1 + _H), (10, 2, _MAR2 + _H)])
    out = tmp_path / "tables"
    res = CliRunner().invoke(cli, ["run", "--from", "2024-03-01", "--to", "2024-03-02", "--logdirs", str(logdirs),
                                   "--output-root", str(out), "--cluster", "tiny", "-q"])
    assert res.exit_code in (0, EXIT_FINDINGS), res.output
    assert [(d, b) for _, d, b in _batches(out)] == [("2024-03-01", 0), ("2024-03-02", 10)], res.output


def test_an_undated_bad_unit_is_stored_once_and_counted_as_kept_only_when_an_earlier_run_stored_it(
        spark, tmp_path: Path) -> None:
    """A line without a time, stored by a nightly run on its date, is not stored again on the from date of a rerun
    that keeps that night (its dumps gone); and a run's own quarantine row of a kept day is not counted as kept."""
    inputs = write_tiny_inputs(tmp_path / "in")
    day2 = 1709251200000 + 86_400_000 + 3_600_000  # 2024-03-02T01:00:00Z
    dumps = Path(inputs["offsets"])
    (dumps / "commits-0302.jsonl").write_text(commit_lines("g2", (10, 20, 30), day2, log_partition=8))
    (dumps / "bad.jsonl").write_text("not a commit\n")
    out = tmp_path / "tables"
    base = ["--offsets", inputs["offsets"], "--output-root", str(out), "--cluster", "tiny", "-q",
            "--summary-json", str(tmp_path / "s.json")]

    def stored() -> list[tuple[str, str]]:
        return sorted((str(r["event_date"]), r["source"].rsplit("/", 1)[-1]) for r in
                      DeltaTable(str(out / "quarantine")).to_pyarrow_table().to_pylist())

    nightly = CliRunner().invoke(cli, ["run", "--from", "2024-03-02", "--to", "2024-03-02", *base])
    assert stored() == [("2024-03-02", "bad.jsonl")], nightly.output
    (dumps / "commits-0302.jsonl").unlink()
    rerun = CliRunner().invoke(cli, ["run", "--from", "2024-03-01", "--to", "2024-03-02", *base])
    assert stored() == [("2024-03-02", "bad.jsonl")], rerun.output  # not again under 2024-03-01
    assert json.loads((tmp_path / "s.json").read_text())["sources"]["offsets"]["quarantine_kept"] == 1

    (tmp_path / "in2").mkdir()
    inputs = write_tiny_inputs(tmp_path / "in2" / "x")
    out = tmp_path / "tables2"
    base[1], base[3] = inputs["offsets"], str(out)
    CliRunner().invoke(cli, ["run", "--from", "2024-03-01", "--to", "2024-03-01", *base])
    (Path(inputs["offsets"]) / "commits.jsonl").write_text("not a commit\n")  # the day's input gone: kept
    again = CliRunner().invoke(cli, ["run", "--from", "2024-03-01", "--to", "2024-03-01", *base])
    offsets = json.loads((tmp_path / "s.json").read_text())["sources"]["offsets"]
    assert (offsets["units_quarantined"], offsets["quarantine_kept"], offsets["rows_kept"]) == (1, 0, 3), again.output
    assert "quarantined unit (the quarantine table)" not in again.stdout, again.output


def test_a_rerun_replaces_a_day_whose_input_changed_or_is_now_bad(spark, tmp_path: Path) -> None:
    """Only a day the source has no unit of is kept: a day whose dumps now hold other commits is replaced by them,
    and one whose dumps now hold only a bad line of that day's time is replaced by none. A bad unit without a date
    (a line without a time) says nothing of its day: the day is kept, whether it is rerun alone or in a longer range
    (stored on the from date, it replaced a day rerun alone and kept it in a longer rerun), and its quarantine row
    is stored once."""
    inputs = write_tiny_inputs(tmp_path / "in")
    day2 = 1709251200000 + 86_400_000 + 3_600_000  # 2024-03-02T01:00:00Z
    dumps = Path(inputs["offsets"])
    (dumps / "commits-0302.jsonl").write_text(commit_lines("g2", (10, 20, 30), day2, log_partition=8))
    out = tmp_path / "tables"
    args = ["run", "--from", "2024-03-01", "--to", "2024-03-02", "--offsets", inputs["offsets"], "--output-root",
            str(out), "--cluster", "tiny", "-q"]
    first = CliRunner().invoke(cli, args)
    assert "S1e spurious_rewind" in first.stdout, first.output

    def commits_on() -> tuple[int, int]:
        t = DeltaTable(str(out / "offset_commits")).to_pyarrow_table().to_pylist()
        return tuple(sum(1 for r in t if str(r["event_date"]) == d) for d in ("2024-03-01", "2024-03-02"))

    def bad_lines() -> list[str]:
        return [r["reason"][:40] for r in DeltaTable(str(out / "quarantine")).to_pyarrow_table().to_pylist()]

    assert commits_on() == (3, 3)
    (dumps / "commits.jsonl").write_text("not a commit\n")
    for rerun in ([*args[:4], "2024-03-01", *args[5:]], args, args):  # the first day alone, then both days, twice
        again = CliRunner().invoke(cli, rerun)
        assert commits_on() == (3, 3), again.output
        assert "S1e spurious_rewind" in again.stdout and "kept the 3 rows" in again.stdout, again.output
        assert len(bad_lines()) == 1, bad_lines()
    t0 = 1709251200000 + 3_600_000  # 2024-03-01T01:00:00Z: a bad line with the day's time
    (dumps / "commits.jsonl").write_text(json.dumps({"key": "AAAA", "value": "AAAA", "partition": 7, "offset": 0,
                                                     "timestamp": t0}) + "\n")
    (dumps / "commits-0302.jsonl").write_text(commit_lines("g2", (10, 20), day2, log_partition=8))
    again = CliRunner().invoke(cli, args)
    assert commits_on() == (0, 2), again.output
    assert "S1e spurious_rewind" not in again.stdout and "kept the" not in again.stdout, again.output
