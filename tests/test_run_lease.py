"""One writing run per cluster and output root (jobs.sink._runlease): a second `epoch-audit run` while another holds
the run lease fails before Spark starts, exit 7, naming the holder, and still writes its --summary-json and
--metrics-file as failed, but no audit_runs row; a dead run's lease (expired heartbeat, or a pid gone on this host)
is taken over with a warning; every way out of a run releases the lease; read-only commands take none."""

from __future__ import annotations

import datetime as dt
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from test_cli_ops import write_findings

from jobs import cli as cli_mod
from jobs.audit import AuditResult
from jobs.cli import EXIT_LEASE_HELD, EXIT_SIGTERM, EXIT_SINK, EXIT_USAGE, cli
from jobs.config import Config, Output
from jobs.errors import ConfigError, RunLeaseHeld, Terminated
from jobs.runlog import RunContext
from jobs.sink import hold_run, run_lease_path

HOST = socket.gethostname()


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _lease_file(root: Path, cluster: str = "c1") -> Path:
    return root / "_run_leases" / f"{cluster}.lease"


PIDNS = os.readlink("/proc/self/ns/pid") if os.path.exists("/proc/self/ns/pid") else ""


def _plant(root: Path, *, run: str = "nightly-42", host: str = HOST, pid: int | None = None,
           age: dt.timedelta = dt.timedelta(seconds=5), seconds: float = 600, cluster: str = "c1",
           pidns: str = PIDNS) -> Path:
    """A lease as another process's run leaves it: its heartbeat ``age`` old (written in ``pidns``)."""
    path = _lease_file(root, cluster)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({
        "run": run, "host": host, "pid": os.getppid() if pid is None else pid, "pidns": pidns,
        "started": "2024-03-02T02:00:00+00:00",
        "heartbeat": (dt.datetime.now(dt.timezone.utc) - age).isoformat(), "lease_seconds": seconds}))
    return path


def _args(tmp_path: Path, *extra: str) -> list[str]:
    (tmp_path / "offsets").mkdir(exist_ok=True)
    return ["run", "--from", "2024-03-01", "--offsets", str(tmp_path / "offsets"), "--output-root",
            str(tmp_path / "t"), "--cluster", "c1", "--summary-json", str(tmp_path / "s.json"),
            "--metrics-file", str(tmp_path / "m.prom"), *extra]


@pytest.fixture
def no_spark(monkeypatch) -> None:
    def refuse(config, **_kw):
        raise AssertionError("Spark was started")

    monkeypatch.setattr(cli_mod, "_session", refuse)


def test_a_live_lease_of_another_process_refuses_the_run_before_spark_with_exit_7(tmp_path, no_spark) -> None:
    lease = _plant(tmp_path / "t")
    before = lease.read_text()
    res = CliRunner().invoke(cli, _args(tmp_path))
    assert res.exit_code == EXIT_LEASE_HELD, res.output
    line = res.output.strip()
    assert line.splitlines() == [line]  # one line
    assert line.startswith("epoch-audit: error: another run of cluster 'c1' is writing to this output root: ")
    for needle in ("run nightly-42", f"on host {HOST}", f"(pid {os.getppid()})", "started at 2024-03-02T02:00:00",
                   "wait for it to finish", f"remove the lease file {lease} if you are sure that run is gone"):
        assert needle in line, needle
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "failed" and doc["exit_code"] == EXIT_LEASE_HELD and doc["cluster"] == "c1"
    assert "run nightly-42" in doc["error"] and doc["run_id"] is None
    assert 'epoch_audit_run_status{cluster="c1",status="failed"} 1.0' in (tmp_path / "m.prom").read_text()
    # the live run's lease and tables are untouched: no audit_runs row of the refused run
    assert lease.read_text() == before
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["_run_leases"]


def test_a_live_lease_on_another_host_refuses_a_reports_only_run_too(tmp_path, monkeypatch, no_spark) -> None:
    monkeypatch.setattr("jobs.audit.reports_only_sources", lambda config: ["offsets"])
    _plant(tmp_path / "t", host="other-host", pid=1)
    res = CliRunner().invoke(cli, _args(tmp_path, "--reports-only"))
    assert res.exit_code == EXIT_LEASE_HELD, res.output
    assert "on host other-host (pid 1)" in res.output


@pytest.mark.parametrize("how", ["dead pid here", "expired heartbeat"])
def test_a_dead_run_s_lease_is_taken_over_with_a_warning_and_released_after_a_failure(
        tmp_path, monkeypatch, how) -> None:
    lease = _lease_file(tmp_path / "t")
    if how == "dead pid here":
        _plant(tmp_path / "t", pid=_dead_pid())
        why = "its process is no longer running on this host"
    else:  # another host, where no pid can be checked: its heartbeat is older than its lease
        _plant(tmp_path / "t", host="other-host", pid=1, age=dt.timedelta(minutes=11))
        why = "s (the lease is 600 s), so that run is gone"
    seen = {}

    def fake_run_audit(spark, config, start, end, **kwargs):
        seen.update(json.loads(lease.read_text()), run_id=kwargs["run_id"])
        raise ConfigError("the run failed")

    monkeypatch.setattr("jobs.audit.run_audit", fake_run_audit)
    monkeypatch.setattr(cli_mod, "_session", lambda config, **kw: None)
    res = CliRunner().invoke(cli, _args(tmp_path, "-q"))
    assert res.exit_code == EXIT_USAGE and "the run failed" in res.output
    assert f"warning: took over the run lease {lease} of run nightly-42" in res.output and why in res.output
    assert seen["run"] == seen["run_id"] and seen["pid"] == os.getpid() and seen["host"] == HOST  # held while it ran
    assert not lease.exists() and not lease.parent.exists()  # released after the failure, nothing left beside tables
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "failed" and any("took over the run lease" in w for w in doc["warnings"])


def test_a_live_lease_from_another_container_with_this_host_name_is_not_taken_over(tmp_path, no_spark) -> None:
    """Docker --network host / k8s hostNetwork: one host name, separate pid namespaces. The other container's run
    has a pid this one cannot see, and a fresh heartbeat: it is live (it was taken over, and its staging files
    removed under it, so that the first run failed with exit 4)."""
    lease = _plant(tmp_path / "t", pid=_dead_pid(), pidns="pid:[4026599999]")
    res = CliRunner().invoke(cli, _args(tmp_path, "-q"))
    assert res.exit_code == EXIT_LEASE_HELD, res.output
    assert "another run of cluster 'c1' is writing to this output root: run nightly-42" in res.output
    assert json.loads(lease.read_text())["run"] == "nightly-42"
    assert "(its pid was not checked: the lease was written in another pid namespace; it counts as live until its " \
           "heartbeat is 600 s old, at " in res.output


def test_an_output_root_whose_store_cannot_be_reached_is_exit_4_in_one_line(tmp_path, monkeypatch,
                                                                             no_spark) -> None:
    """An abfss:// root without credentials that get a token: pyarrow raises its own ArrowException (not an
    OSError), which read as a bug (exit 1) with pages of Azure's text; it is the store that cannot be written."""
    import pyarrow as pa

    def no_token(root):
        raise pa.ArrowException("Failed to get token from DefaultAzureCredential.\nManagedIdentityCredential: ...")

    monkeypatch.setattr("jobs.sink._runlease.filesystem", no_token)
    res = CliRunner().invoke(cli, _args(tmp_path, "-q"))
    assert res.exit_code == EXIT_SINK, res.output
    assert res.stderr.strip().splitlines() == [
        f"epoch-audit: error: cannot write the run lease {tmp_path / 't'}/_run_leases/c1.lease: Failed to get token "
        "from DefaultAzureCredential."]
    assert json.loads((tmp_path / "s.json").read_text())["exit_code"] == EXIT_SINK


def test_one_unreadable_beat_does_not_stop_the_heartbeat(tmp_path, monkeypatch) -> None:
    """A store's 503 on one read stopped renewing for good: 10 minutes later another run took the live lease over."""
    from jobs.sink import _runlease

    config = _config(tmp_path / "t")
    path = Path(run_lease_path(config))
    real, calls, blips = _runlease._read, [0], [0]

    def flaky(fs, native):
        calls[0] += 1
        if calls[0] == 2:  # the first beat's read (the first read is the take's)
            blips[0] += 1
            return 0.0  # what _read says of a lease it cannot read
        return real(fs, native)

    monkeypatch.setattr(_runlease, "_read", flaky)
    with hold_run(config, "r1", lease=dt.timedelta(seconds=0.6)):
        first = json.loads(path.read_text())["heartbeat"]
        time.sleep(0.9)  # the blip at 0.2 s, then beats at 0.4, 0.6, 0.8 s
        assert blips[0] == 1 and json.loads(path.read_text())["heartbeat"] > first


def test_a_normal_run_holds_the_lease_and_leaves_none_behind(tmp_path, monkeypatch) -> None:
    write_findings(tmp_path / "t")
    lease = _lease_file(tmp_path / "t")
    seen = {}

    def fake_run_audit(spark, config, start, end, **kwargs):
        seen.update(json.loads(lease.read_text()))
        # run_audit's own hold_run, the same run in the same process, shares the CLI's lease
        with hold_run(config, kwargs["run_id"]) as inner:
            assert inner is not None and inner.run_id == kwargs["run_id"]
        assert lease.exists()
        return AuditResult(run=RunContext.start(config, start, run_id=kwargs["run_id"]), timings={"total": 1.0})

    monkeypatch.setattr("jobs.audit.run_audit", fake_run_audit)
    monkeypatch.setattr(cli_mod, "_session", lambda config, **kw: None)
    res = CliRunner().invoke(cli, _args(tmp_path, "-q"))
    assert res.exit_code == 0, res.output
    assert seen["run"] == json.loads((tmp_path / "s.json").read_text())["run_id"] and seen["pid"] == os.getpid()
    assert dt.datetime.fromisoformat(seen["started"]) <= dt.datetime.fromisoformat(seen["heartbeat"])
    assert not lease.exists()


def test_a_run_stopped_by_sigterm_releases_the_lease(tmp_path, monkeypatch) -> None:
    def stopped(spark, config, start, end, **kwargs):
        assert _lease_file(tmp_path / "t").exists()
        raise Terminated(signal.SIGTERM)

    monkeypatch.setattr("jobs.audit.run_audit", stopped)
    monkeypatch.setattr(cli_mod, "_session", lambda config, **kw: None)
    res = CliRunner().invoke(cli, _args(tmp_path, "-q"))
    assert res.exit_code == EXIT_SIGTERM, res.output
    assert not _lease_file(tmp_path / "t").exists()


def test_read_only_commands_take_no_lease(tmp_path) -> None:
    write_findings(tmp_path / "t")
    lease = _plant(tmp_path / "t")
    before = lease.read_text()
    for cmd in (["report"], ["findings"]):
        res = CliRunner().invoke(cli, [*cmd, "--output-root", str(tmp_path / "t"), "--cluster", "c1",
                                       "--from", "2024-03-01"])
        assert res.exit_code not in (EXIT_LEASE_HELD, 1), res.output
    assert lease.read_text() == before


def _config(root: Path, cluster: str = "c1") -> Config:
    return Config(cluster=cluster, output=Output(root=str(root)))


def test_the_heartbeat_is_renewed_and_a_lease_taken_over_meanwhile_is_not_removed(tmp_path) -> None:
    config = _config(tmp_path / "t")
    path = Path(run_lease_path(config))
    with hold_run(config, "r1", lease=dt.timedelta(seconds=0.6)):
        first = json.loads(path.read_text())["heartbeat"]
        time.sleep(0.5)
        assert json.loads(path.read_text())["heartbeat"] > first
        # another process in this one's place (this one was thought dead): from then on it is that run's
        _plant(tmp_path / "t", run="r2", seconds=600)
        time.sleep(0.4)
        assert json.loads(path.read_text())["run"] == "r2"  # not overwritten by the next beat
    assert json.loads(path.read_text())["run"] == "r2"  # nor removed on release


def _one_row(day: dt.date):
    import pyarrow as pa

    return pa.table({"cluster": ["c1"], "event_date": pa.array([day], pa.date32()), "x": [1]})


@pytest.mark.parametrize("spelling", ["absolute", "relative", "file-uri"])
def test_a_run_whose_lease_was_taken_over_stops_before_its_next_commit(tmp_path, monkeypatch, spelling) -> None:
    """A run paused past its lease (a stopped VM) wakes to find the next run holding it: its next table write
    fails naming that run (exit 4), and the table stays as that run left it; while the lease is its own, writes go
    through. However the output root is spelt (the demo's config has a relative one)."""
    import pyarrow as pa
    from deltalake import DeltaTable

    from jobs.errors import RunLeaseLost
    from jobs.sink import write_small

    monkeypatch.chdir(tmp_path)
    root = {"absolute": str(tmp_path / "t"), "relative": "./t", "file-uri": f"file://{tmp_path / 't'}"}[spelling]
    config, day = Config(cluster="c1", output=Output(root=root)), dt.date(2024, 3, 1)
    with hold_run(config, "r1"):
        write_small(_one_row(day), "things", config=config, mode="replace_range", date_range=(day, day))
        version = DeltaTable(str(tmp_path / "t" / "things")).version()
        _plant(tmp_path / "t", run="r2", seconds=600)  # taken over while this run was paused
        with pytest.raises(RunLeaseLost, match="held by run r2 on host .* now: this run stopped renewing it"):
            write_small(_one_row(day), "things", config=config, mode="replace_range", date_range=(day, day))
        # its failure is still recorded: audit_runs rows are appends under its own run id
        from jobs.schemas import arrow_schema

        row = {"cluster": "c1", "event_date": day, "run_id": "r1", "status": "failed"}
        write_small(pa.Table.from_pylist([row], schema=arrow_schema("audit_runs")), "audit_runs", config=config,
                    mode="append")
    assert DeltaTable(str(tmp_path / "t" / "things")).version() == version
    assert DeltaTable(str(tmp_path / "t" / "audit_runs")).to_pyarrow_table().num_rows == 1
    assert issubclass(RunLeaseLost, cli_mod.SinkError)  # exit 4, one line


@pytest.mark.spark
def test_a_spark_write_of_a_run_whose_lease_was_taken_over_moves_no_file_in(spark, tmp_path) -> None:
    from jobs.errors import RunLeaseLost
    from jobs.sink import write_table

    config, day = _config(tmp_path / "t"), dt.date(2024, 3, 1)
    with hold_run(config, "r1"):
        _plant(tmp_path / "t", run="r2", seconds=600)
        with pytest.raises(RunLeaseLost, match="held by run r2"):
            write_table(spark.createDataFrame(_one_row(day).to_pandas()), "things", config=config,
                        mode="replace_range", date_range=(day, day))
    assert not list((tmp_path / "t" / "things").glob("**/*.parquet"))


def test_two_holders_in_one_process_and_one_per_cluster(tmp_path) -> None:
    """A notebook thread starting a second run of the same cluster is refused; another cluster is not."""
    with hold_run(_config(tmp_path), "r1"):
        with pytest.raises(RunLeaseHeld, match=f"run r1 on host {HOST} \\(pid {os.getpid()}\\)"), \
                hold_run(_config(tmp_path), "r2"):
            pass
        with hold_run(_config(tmp_path, "c2"), "r2") as other:
            assert other is not None and other.took_over is None
    assert not (tmp_path / "_run_leases").exists()


def test_catalog_tables_take_no_lease() -> None:
    config = Config(cluster="c1", output=Output(catalog="main", schema="audit"))
    with hold_run(config, "r1") as held:
        assert held is None


@pytest.mark.spark
def test_run_audit_is_refused_without_an_audit_runs_row_and_a_run_leaves_no_lease(spark, tmp_path) -> None:
    from test_notebook import DAY, write_tiny_inputs

    from jobs.audit import run_audit
    from jobs.config import Inputs

    inputs = write_tiny_inputs(tmp_path / "in")
    config = Config(cluster="c1", inputs=Inputs(**inputs), output=Output(root=str(tmp_path / "t")))
    lease = _plant(tmp_path / "t", host="other-host", pid=1)
    with pytest.raises(RunLeaseHeld, match="run nightly-42 on host other-host"):
        run_audit(spark, config, DAY, DAY, progress_interval=0)
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["_run_leases"]  # no audit_runs, no table
    lease.unlink()
    held = []
    result = run_audit(spark, config, DAY, DAY, reports=["spurious_offset_resets"], progress_interval=0,
                       progress=lambda line: held.append(lease.exists()))
    assert result.status in ("ok", "partial") and held and all(held)
    assert not lease.exists() and (tmp_path / "t" / "audit_runs").is_dir()


def test_spark_submit_refuses_a_live_lease_before_any_jvm_with_exit_7(tmp_path) -> None:
    """spark-submit.sh asks before spark-submit starts (SPARK_SUBMIT is not even looked at), and writes both alerting
    files as failed with code 7; --dry-run runs nothing and is not refused."""
    root = Path(__file__).resolve().parents[1]
    conf = tmp_path / "audit.toml"
    conf.write_text(f'cluster = "c1"\n[inputs]\noffsets = "{tmp_path}"\n[output]\nroot = "{tmp_path / "t"}"\n')
    _plant(tmp_path / "t", host="other-host", pid=1)
    env = {**os.environ, "PYTHON": sys.executable, "SPARK_SUBMIT": str(tmp_path / "no-spark-submit"),
           "XDG_CACHE_HOME": str(tmp_path / "cache")}
    res = subprocess.run(["bash", str(root / "spark-submit.sh"), "--conf", str(conf), "--from", "2024-03-01",
                          "--summary-json", str(tmp_path / "s.json")], capture_output=True, text=True, env=env,
                         timeout=60, cwd=root)
    assert res.returncode == EXIT_LEASE_HELD, res.stderr
    assert res.stderr.strip().splitlines() == [res.stderr.strip()]
    assert res.stderr.startswith("spark-submit.sh: error: another run of cluster 'c1'") and "other-host" in res.stderr
    doc = json.loads((tmp_path / "s.json").read_text())
    assert (doc["status"], doc["exit_code"], doc["cluster"]) == ("failed", EXIT_LEASE_HELD, "c1")
    dry = subprocess.run(["bash", str(root / "spark-submit.sh"), "--conf", str(conf), "--dry-run"],
                         capture_output=True, text=True, env=env, timeout=60, cwd=root)
    assert "another run" not in dry.stderr and "spark-submit is not executable" in dry.stderr
