"""A run that fails — before Spark starts, while it starts, in the run, or stopped by its scheduler's SIGTERM —
still writes --summary-json and --metrics-file with status failed and its exit code, so that an alert on
``epoch_audit_run_status{status="failed"}`` fires instead of last night's files standing."""

from __future__ import annotations

import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from prometheus_client.parser import text_string_to_metric_families

from jobs.cli import EXIT_INPUT, EXIT_SIGINT, EXIT_SIGTERM, EXIT_SINK, EXIT_USAGE, cli

REPO = Path(__file__).resolve().parents[1]


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


def test_a_config_whose_rest_is_wrong_keeps_its_cluster_s_last_success_in_the_metrics(tmp_path: Path) -> None:
    """spark-submit.sh passes no --cluster: a config that failed to load wrote its failed metrics under cluster="",
    and the cluster's last-success series vanished, so its "no success for 26 h" alert saw no data."""
    prom = tmp_path / "m.prom"
    prom.write_text('epoch_audit_last_success_timestamp_seconds{cluster="prod"} 1.7e+09\n')
    for body in ('cluster = "prod"\n[spark]\nmaster = "local[two]"\n',  # TOML fine, a value wrong
                 'cluster = "prod"\n[inputs\noffsets = 1\n'):  # not even TOML
        conf = tmp_path / "c.toml"
        conf.write_text(body)
        res = CliRunner().invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-05", *_outputs(tmp_path)])
        assert res.exit_code == EXIT_USAGE, res.output
        assert json.loads((tmp_path / "s.json").read_text())["cluster"] == "prod"
        samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
                   for fam in text_string_to_metric_families(prom.read_text()) for s in fam.samples}
        assert samples[("epoch_audit_last_success_timestamp_seconds", (("cluster", "prod"),))] == 1.7e9
        assert samples[("epoch_audit_run_status", (("cluster", "prod"), ("status", "failed")))] == 1


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
                             "records": 40, "unpaired": None}]


def _after_a_sigterm(cleanup: str) -> str:
    """A script that takes one SIGTERM as a run does (:func:`jobs.cli._terminable`), then runs ``cleanup`` where a
    failed run is recorded (``_terminable(cleanup=True)``)."""
    return textwrap.dedent("""
        import os, signal, time
        from jobs.cli import _terminable
        from jobs.errors import Terminated
        try:
            with _terminable():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(30)
        except Terminated as exc:
            print(exc, flush=True)
            with _terminable(cleanup=True):
    """) + textwrap.indent(textwrap.dedent(cleanup), " " * 8)


SECOND_SIGNAL = _after_a_sigterm("""
    os.kill(os.getpid(), signal.SIGINT)  # recording the failed run: a Ctrl-C now ends the process at once
    time.sleep(30)
    print("cleanup was not cut short")
""")


def test_a_second_signal_during_the_cleanup_ends_the_process_at_once() -> None:
    t0 = time.monotonic()
    res = subprocess.run([sys.executable, "-c", SECOND_SIGNAL], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert res.stdout == "terminated by SIGTERM\n" and res.returncode == EXIT_SIGINT, res
    assert "SIGINT again: exiting at once" in res.stderr
    assert time.monotonic() - t0 < 20


ECHOED_SIGNAL = _after_a_sigterm("""
    os.kill(os.getpid(), signal.SIGTERM)  # timeout's second SIGTERM, to the process group, at once
    time.sleep(0.2)
    print("the cleanup went on", flush=True)
    time.sleep(1.5)
    os.kill(os.getpid(), signal.SIGTERM)  # a second SIGTERM of its own, later: cuts the cleanup short
    time.sleep(30)
    print("cleanup was not cut short")
""")


def test_timeout_s_echo_of_the_same_sigterm_does_not_cut_the_cleanup_short() -> None:
    """`timeout -s TERM` signals its child, then the whole process group: the run saw SIGTERM twice within
    microseconds, took the second for a second signal and exited at once, with no trace of the run (1 in 3 runs)."""
    res = subprocess.run([sys.executable, "-c", ECHOED_SIGNAL], capture_output=True, text=True, timeout=60,
                         env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert res.stdout == "terminated by SIGTERM\nthe cleanup went on\n" and res.returncode == EXIT_SIGTERM, res
    assert res.stderr.count("SIGTERM again: exiting at once") == 1


#: ``epoch-audit run`` whose run finishes at once (no Spark) and gets SIGTERM while it is reported: in ``summarise``
#: (the findings not read yet) or while writing --metrics-file (--summary-json written, with exit 0).
SIGNALLED_WHILE_REPORTING = textwrap.dedent("""
    import collections, datetime as dt, os, signal, sys
    import jobs.alerts, jobs.audit, jobs.cli, jobs.summary
    from jobs.audit import AuditResult
    from jobs.runlog import RunContext

    when, tmp = sys.argv[1], sys.argv[2]
    day = dt.date(2024, 3, 5)
    signalled = []

    def once(step):
        if when == step and not signalled:
            signalled.append(step)
            os.kill(os.getpid(), signal.SIGTERM)

    def finished(spark, config, start, end, *, on_result, **_kw):
        result = AuditResult(run=RunContext("demo", day, day, run_id="r1"), timings={"total": 1.5})
        on_result(result)
        return result  # audit_runs would hold its ok row now

    def summarise(config, start, end, **_kw):
        once("summary")
        return jobs.summary.Summary("demo", start, end, by_kind=collections.Counter(
            {("fencing_violations", "F2", "fenced_commit", "error"): 2}))

    write_metrics = jobs.alerts.write_metrics

    def metrics(path, doc, **kw):
        once("files")
        return write_metrics(path, doc, **kw)

    jobs.audit.run_audit, jobs.summary.summarise, jobs.alerts.write_metrics = finished, summarise, metrics
    jobs.cli._session = lambda config, ingest: object()
    sys.argv = ["epoch-audit", "run", "--offsets", f"{tmp}/in", "--output-root", f"{tmp}/t", "--cluster", "demo",
                "--from", "2024-03-05", "--summary-json", f"{tmp}/s.json", "--metrics-file", f"{tmp}/m.prom"]
    jobs.cli.main()
""")


@pytest.mark.parametrize("when", ["summary", "files"])
def test_a_signal_after_the_run_finished_writes_both_files_with_its_status_and_the_signal_s_exit_code(
        tmp_path: Path, when: str) -> None:
    """SIGTERM after run_audit returned (audit_runs said ok) met Python's default handler: the process died by the
    signal with last night's files standing (or --summary-json saying exit 0 and no metrics). The files now carry
    the run's own status and findings, exit code 143 and an error saying the signal came while reporting."""
    js, prom = _last_night(tmp_path)
    (tmp_path / "in").mkdir()
    res = subprocess.run([sys.executable, "-c", SIGNALLED_WHILE_REPORTING, when, str(tmp_path)], capture_output=True,
                         text=True, timeout=120, env={**os.environ, "PYTHONPATH": str(REPO)}, check=False)
    assert res.returncode == EXIT_SIGTERM, res
    assert "epoch-audit: terminated by SIGTERM while reporting: the run had finished (status ok" in res.stderr
    assert "epoch-audit: terminated by SIGTERM: exit 143" in res.stderr and "Traceback" not in res.stderr
    doc = json.loads(js.read_text())
    assert (doc["status"], doc["exit_code"], doc["run_id"]) == ("ok", EXIT_SIGTERM, "r1")
    assert doc["error"].startswith("terminated by SIGTERM while reporting: the run had finished (status ok")
    assert doc["findings"]["by_severity"]["error"] == 2  # the findings are counted, not dropped
    samples = {(s.name, s.labels.get("status")): s.value for f in text_string_to_metric_families(prom.read_text())
               for s in f.samples}
    assert samples[("epoch_audit_run_status", "ok")] == 1 and _failed_status(prom) == 0
    assert ("epoch_audit_last_success_timestamp_seconds", None) in samples  # the run succeeded: no staleness alert
    assert not [p.name for p in tmp_path.iterdir() if p.name.endswith(".tmp") or ".prom." in p.name]


needs_java = pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                reason="no Java to start Spark with")


@pytest.fixture(scope="module")
def demo_inputs(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("signals") / "demo"
    res = CliRunner().invoke(cli, ["simulate", "--out", str(out)])
    assert res.exit_code == 0, res.output
    return out


@pytest.mark.slow
@needs_java
@pytest.mark.parametrize(("signum", "whole_group", "code"), [
    (signal.SIGTERM, False, EXIT_SIGTERM),  # a scheduler that signals the job's process
    (signal.SIGTERM, True, EXIT_SIGTERM),  # `timeout -s TERM`: the JVM gets it too
    (signal.SIGINT, False, EXIT_SIGINT),  # Ctrl-C
], ids=["sigterm", "sigterm-process-group", "sigint"])
def test_a_run_stopped_by_a_signal_is_recorded_as_failed(demo_inputs: Path, tmp_path: Path, signum: int,
                                                         whole_group: bool, code: int) -> None:
    from deltalake import DeltaTable

    js, prom = _last_night(tmp_path)
    d = demo_inputs
    argv = [sys.executable, "-m", "jobs.cli", "run", "--offsets", str(d / "offsets"), "--logdirs", str(d / "logdirs"),
            "--metadata", str(d / "metadata"), "--cluster-metadata", str(d / "cluster_metadata"),
            "--output-root", str(tmp_path / "t"), "--cluster", "demo", "--from", "2024-03-04", *_outputs(tmp_path)]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env={**os.environ, "PYTHONPATH": str(REPO)}, start_new_session=True)
    try:
        lines = []
        for line in proc.stderr:  # the run is under way once it says it ingests
            lines.append(line)
            if "ingest:" in line:
                break
        else:
            pytest.fail("the run ended before ingesting: " + "".join(lines))
        time.sleep(1)  # in the middle of a Spark call
        t0 = time.monotonic()
        (os.killpg if whole_group else os.kill)(proc.pid, signum)
        _out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert proc.returncode == code, err
    assert time.monotonic() - t0 < 60
    name = signal.Signals(signum).name
    assert f"epoch-audit: terminated by {name}: exit {code}" in err
    assert "Traceback" not in err
    doc = json.loads(js.read_text())
    assert doc["status"] == "failed" and doc["exit_code"] == code and doc["error"] == f"terminated by {name}"
    assert _failed_status(prom) == 1
    runs = DeltaTable(str(tmp_path / "t" / "audit_runs")).to_pyarrow_table().to_pylist()
    assert {(r["run_id"], r["status"], r["error"]) for r in runs} == {(doc["run_id"], "failed", f"terminated by {name}")}
