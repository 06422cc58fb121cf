"""spark-submit.sh: one-line errors before any JVM starts, the command it builds, and one real run on local
Spark (the spark-submit shipped in the pyspark wheel) over a tiny generated input."""

from __future__ import annotations

import datetime as dt
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from test_notebook import write_tiny_inputs

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "spark-submit.sh"


def _run(*args: str, env: dict | None = None, timeout: int = 60) -> subprocess.CompletedProcess:
    full_env = {**os.environ, "PYTHON": sys.executable, **(env or {})}
    return subprocess.run(["bash", str(SCRIPT), *args], capture_output=True, text=True, env=full_env,
                          timeout=timeout, cwd=ROOT)


def _config(tmp_path: Path, inputs: dict[str, str] | None = None) -> Path:
    lines = ['cluster = "submit-test"', "[inputs]"]
    lines += [f'{k} = "{v}"' for k, v in (inputs or {}).items()]
    lines += ["[output]", f'root = "{tmp_path / "tables"}"']
    path = tmp_path / "audit.toml"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_script_is_valid_bash():
    assert subprocess.run(["bash", "-n", str(SCRIPT)]).returncode == 0
    shellcheck = shutil.which("shellcheck")
    if shellcheck:
        assert subprocess.run([shellcheck, str(SCRIPT)], capture_output=True).returncode == 0


@pytest.mark.parametrize(("args", "message"), [
    (["--from", "2024-02-30"], "--from: '2024-02-30' is not a valid date"),
    (["--from", "yesterday"], "--from: 'yesterday' is not a date in the form YYYY-MM-DD"),
    (["--from", "2024-03-02", "--to", "2024-03-01"], "--from 2024-03-02 is after --to 2024-03-01"),
    (["--bogus"], "unknown option '--bogus'"),
])
def test_bad_usage_is_one_clear_line(tmp_path, args, message):
    res = _run("--conf", str(_config(tmp_path)), *args)
    assert res.returncode == 2
    assert res.stderr.strip() == f"spark-submit.sh: error: {message}" or res.stderr.startswith(
        f"spark-submit.sh: error: {message}"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_missing_or_bad_config(tmp_path):
    res = _run("--from", "2024-03-01")
    assert res.returncode == 2 and "--conf FILE is required" in res.stderr
    res = _run("--conf", str(tmp_path / "nope.toml"))
    assert res.returncode == 2 and res.stderr.strip() == f"spark-submit.sh: error: config file not found: {tmp_path}/nope.toml"
    bad = tmp_path / "bad.toml"
    bad.write_text('cluster = "c"\n[output]\nroot = "x"\n[rules]\nlookback = 1\n')
    res = _run("--conf", str(bad))
    assert res.returncode == 2 and "bad config:" in res.stderr and "unknown key 'rules.lookback'" in res.stderr


def test_dry_run_defaults_to_yesterday_and_forwards_options(tmp_path):
    conf = _config(tmp_path)
    res = _run("--conf", str(conf), "--dry-run", "--", "--master", "yarn", "--num-executors", "20",
               env={"SPARK_SUBMIT": "/opt/spark/bin/spark-submit"})
    # SPARK_SUBMIT must be executable: a clear error, not a confusing failure later
    assert res.returncode == 2 and "spark-submit is not executable: /opt/spark/bin/spark-submit" in res.stderr
    res = _run("--conf", str(conf), "--dry-run", "--reports", "stale_metadata", "--", "--master", "yarn",
               "--num-executors", "20", env={"PATH": "/usr/bin:/bin"})
    assert res.returncode == 0, res.stderr
    yesterday = (dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)).isoformat()
    cmd = res.stdout.split()
    assert cmd[0].endswith("pyspark/bin/spark-submit")  # not on PATH: the one in the pyspark wheel
    assert cmd[cmd.index("--py-files") + 1].endswith("epoch_audit.zip")
    driver = next(i for i, a in enumerate(cmd) if a.endswith("epoch_audit_driver.py"))
    assert cmd[driver - 4:driver] == ["--master", "yarn", "--num-executors", "20"]  # before the app
    assert cmd[driver + 1:] == ["--conf", str(conf), "--from", yesterday, "--to", yesterday,
                                "--reports", "stale_metadata"]
    assert "--packages" not in cmd


def test_delta_adds_package_and_sql_settings(tmp_path):
    res = _run("--conf", str(_config(tmp_path)), "--from", "2024-03-01", "--to", "2024-03-03", "--delta",
               "--delta-version", "4.0.1", "--dry-run")
    assert res.returncode == 0, res.stderr
    cmd = res.stdout.split()
    assert cmd[cmd.index("--packages") + 1] == "io.delta:delta-spark_2.13:4.0.1"
    assert "spark.sql.extensions=io.delta.sql.DeltaSparkSessionExtension" in cmd
    assert "spark.sql.catalog.spark_catalog=org.apache.spark.sql.delta.catalog.DeltaCatalog" in cmd
    assert cmd[-4:] == ["--from", "2024-03-01", "--to", "2024-03-03"]


@pytest.mark.spark
@pytest.mark.slow
def test_real_run_on_local_spark(tmp_path):
    conf = _config(tmp_path, write_tiny_inputs(tmp_path / "in"))
    res = _run("--conf", str(conf), "--from", "2024-03-01", "--", "--master", "local[1]",
               "--conf", "spark.ui.enabled=false", "--conf", "spark.sql.shuffle.partitions=2",
               "--driver-memory", "1g", timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    assert "Findings for cluster submit-test, 2024-03-01 .. 2024-03-01" in res.stdout
    for table in ("offset_commits", "epoch_lineage", "audit_runs", "stale_metadata", "fencing_violations",
                  "spurious_offset_resets"):
        assert (tmp_path / "tables" / table / "_delta_log").is_dir(), table
    from deltalake import DeltaTable

    runs = DeltaTable(str(tmp_path / "tables" / "audit_runs")).to_pyarrow_table().to_pylist()
    assert {r["status"] for r in runs} == {"succeeded"} and {r["cluster"] for r in runs} == {"submit-test"}
    assert "spark-submit.sh: auditing 2024-03-01 .. 2024-03-01" in res.stderr
