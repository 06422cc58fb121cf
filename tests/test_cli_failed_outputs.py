"""A run that fails — before Spark starts, while it starts, in the run, or stopped by its scheduler's SIGTERM —
still writes --summary-json and --metrics-file with status failed and its exit code, so that an alert on
``epoch_audit_run_status{status="failed"}`` fires instead of last night's files standing."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from jobs.cli import EXIT_INPUT, EXIT_SINK, EXIT_USAGE, cli


def _failed_status(prom: Path) -> float:
    for family in text_string_to_metric_families(prom.read_text()):
        for s in family.samples:
            if s.name == "epoch_audit_run_status" and s.labels["status"] == "failed":
                return s.value
    raise AssertionError("no epoch_audit_run_status{status=failed}")


def _last_night(tmp_path: Path) -> tuple[Path, Path]:
    """Files an earlier run left, saying ok: a failed run must replace them."""
    js, prom = tmp_path / "s.json", tmp_path / "m.prom"
    js.write_text(json.dumps({"status": "ok", "exit_code": 0}))
    prom.write_text('epoch_audit_run_status{cluster="demo",status="ok"} 1.0\n'
                    'epoch_audit_run_status{cluster="demo",status="failed"} 0.0\n')
    return js, prom


def _outputs(tmp_path: Path) -> list[str]:
    return ["--summary-json", str(tmp_path / "s.json"), "--metrics-file", str(tmp_path / "m.prom")]


def test_a_missing_input_path_writes_both_files_failed_with_exit_3(tmp_path: Path) -> None:
    js, prom = _last_night(tmp_path)
    res = CliRunner().invoke(cli, ["run", "--offsets", str(tmp_path / "nonexistent"), "--output-root",
                                   str(tmp_path / "t"), "--cluster", "demo", "--from", "2024-03-05",
                                   *_outputs(tmp_path)])
    assert res.exit_code == EXIT_INPUT and "input path does not exist" in res.output
    doc = json.loads(js.read_text())
    assert doc["status"] == "failed" and doc["exit_code"] == EXIT_INPUT and doc["cluster"] == "demo"
    assert doc["error"] == f"--offsets: input path does not exist: {tmp_path / 'nonexistent'}"
    assert _failed_status(prom) == 1


def test_spark_that_cannot_start_writes_both_files_failed_with_exit_2(tmp_path: Path, monkeypatch) -> None:
    import jobs.session

    def refuse(**_kw):
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.")

    monkeypatch.setattr(jobs.session, "get_or_create_session", refuse)
    (tmp_path / "in").mkdir()
    js, prom = _last_night(tmp_path)
    res = CliRunner().invoke(cli, ["run", "--offsets", str(tmp_path / "in"), "--output-root", str(tmp_path / "t"),
                                   "--cluster", "demo", "--from", "2024-03-05", *_outputs(tmp_path)])
    assert res.exit_code == EXIT_USAGE and "could not start Spark" in res.output
    doc = json.loads(js.read_text())
    assert doc["status"] == "failed" and doc["exit_code"] == EXIT_USAGE and "could not start Spark" in doc["error"]
    assert _failed_status(prom) == 1


def test_a_config_that_cannot_be_read_writes_both_files_given_as_flags(tmp_path: Path) -> None:
    js, prom = _last_night(tmp_path)
    res = CliRunner().invoke(cli, ["run", "--conf", str(tmp_path / "nope.toml"), "--cluster", "demo",
                                   "--from", "2024-03-05", *_outputs(tmp_path)])
    assert res.exit_code == EXIT_USAGE and "not found" in res.output
    doc = json.loads(js.read_text())
    assert doc["status"] == "failed" and doc["exit_code"] == EXIT_USAGE and doc["cluster"] == "demo"
    assert _failed_status(prom) == 1


BACKTRACE = ("Generic DeltaTable error: Version mismatch\n\nStack backtrace:\n   0: <unknown>\n   1: <unknown>\n"
             "  13: clone3\n             at ./misc/../sysdeps/unix/sysv/linux/x86_64/clone3.S:78:0")


def test_a_failed_run_s_json_error_is_the_terminal_s_one_line_and_keeps_what_ingestion_counted(
        tmp_path: Path, monkeypatch) -> None:
    """The JSON's error carried deltalake's Rust backtrace while the terminal and audit_runs had one line; and its
    sources/units were empty though ingestion had counted them."""
    import jobs.audit
    from jobs.audit import AuditResult
    from jobs.errors import SinkError
    from jobs.runlog import RunContext, SourceCounts, SourceStatus

    day = dt.date(2024, 3, 5)

    def fail_after_ingestion(spark, config, start, end, *, on_result, **_kw):
        result = AuditResult(run=RunContext("demo", day, day))
        result.ingest = type("Ingest", (), {"counts": (SourceCounts("offsets", "file", 3, 1, 40, units_read=4),)})()
        result.sources = {"offsets": SourceStatus("offsets", "partial", 4, 3, 1, 40, reason="1 unit quarantined")}
        on_result(result)
        raise SinkError(f"could not write 'audit_runs': {BACKTRACE}")

    monkeypatch.setattr(jobs.audit, "run_audit", fail_after_ingestion)
    monkeypatch.setattr("jobs.cli._session", lambda config, ingest: object())
    (tmp_path / "in").mkdir()
    res = CliRunner().invoke(cli, ["run", "--offsets", str(tmp_path / "in"), "--output-root", str(tmp_path / "t"),
                                   "--cluster", "demo", "--from", "2024-03-05", *_outputs(tmp_path)])
    assert res.exit_code == EXIT_SINK
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["error"] == "could not write 'audit_runs': Generic DeltaTable error: Version mismatch"
    assert f"epoch-audit: error: {doc['error']}" in res.output
    assert doc["sources"]["offsets"]["status"] == "partial" and doc["sources"]["offsets"]["units_quarantined"] == 1
    assert doc["units"] == [{"source_kind": "offsets", "unit": "file", "read": 4, "decoded": 3, "quarantined": 1,
                             "records": 40}]
