"""spark-submit.sh: one-line errors before any JVM starts, the command it builds, and one real run on local
Spark (the spark-submit shipped in the pyspark wheel) over a tiny generated input."""

from __future__ import annotations

import datetime as dt
import os
import shlex
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
    (["--conf", "-x.toml"], "--conf needs a FILE, got '-x.toml' (an option?)"),
    (["--from", "--to", "2024-03-01"], "--from needs a date (YYYY-MM-DD), got '--to' (an option?)"),
    (["--fail-on"], "--fail-on needs a severity (warning, error, critical)"),
    (["--dry-run", "--fail-on", "bogus"], "--fail-on: 'bogus' is not one of warning, error, critical"),
    (["--fail-on=Error"], "--fail-on: 'Error' is not one of warning, error, critical"),
])
def test_bad_usage_is_one_clear_line(tmp_path, args, message):
    res = _run("--conf", str(_config(tmp_path)), *args)
    assert res.returncode == 2
    assert res.stderr.strip() == f"spark-submit.sh: error: {message}" or res.stderr.startswith(
        f"spark-submit.sh: error: {message}"), res.stderr
    assert len(res.stderr.strip().splitlines()) == 1


def test_fail_on_accepts_exactly_what_the_cli_accepts(tmp_path):
    from jobs.cli import SEVERITY_CHOICES

    conf = str(_config(tmp_path))
    for severity in SEVERITY_CHOICES:
        res = _run("--conf", conf, "--dry-run", "--work-dir", str(tmp_path / "w"), "--fail-on", severity)
        assert res.returncode == 0 and f"--fail-on {severity}" in res.stdout, res.stderr


def test_missing_or_bad_config(tmp_path):
    res = _run("--from", "2024-03-01")
    assert res.returncode == 2 and "--conf FILE is required" in res.stderr
    res = _run("--conf", str(tmp_path / "nope.toml"))
    assert res.returncode == 2 and res.stderr.strip() == f"spark-submit.sh: error: config file not found: {tmp_path}/nope.toml"
    bad = tmp_path / "bad.toml"
    bad.write_text('cluster = "c"\n[output]\nroot = "x"\n[rules]\nlookback = 1\n')
    res = _run("--conf", str(bad))
    assert res.returncode == 2 and "bad config:" in res.stderr and "unknown key 'rules.lookback'" in res.stderr


def test_a_bad_config_still_writes_the_alerting_files_as_failed(tmp_path):
    """The script checks the config before the job runs: a bad one exited 2 and left last night's --summary-json
    and --metrics-file standing (status ok), so the failed-run alert never fired."""
    import json

    bad = tmp_path / "bad.toml"
    bad.write_text('cluster = "prod"\n[output]\nroot = "x"\n[rules]\nlookback = 1\n')
    js, prom = tmp_path / "s.json", tmp_path / "m.prom"
    js.write_text('{"status": "ok"}')
    prom.write_text('epoch_audit_last_success_timestamp_seconds{cluster="prod"} 1.7e+09\n')
    res = _run("--conf", str(bad), "--from", "2024-03-01", "--summary-json", str(js), "--metrics-file", str(prom))
    assert res.returncode == 2 and res.stderr.strip().splitlines()[-1].startswith("spark-submit.sh: error: bad config:")
    doc = json.loads(js.read_text())
    assert (doc["status"], doc["exit_code"], doc["cluster"]) == ("failed", 2, "prod")
    assert "unknown key 'rules.lookback'" in doc["error"]
    text = prom.read_text()
    assert 'epoch_audit_run_status{cluster="prod",status="failed"} 1.0' in text
    assert 'epoch_audit_last_success_timestamp_seconds{cluster="prod"} 1.7e+09' in text  # kept for the staleness alert


def test_dry_run_defaults_to_yesterday_and_forwards_options(tmp_path):
    conf = _config(tmp_path)
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}
    res = _run("--conf", str(conf), "--dry-run", "--", "--master", "yarn", "--num-executors", "20",
               env={"SPARK_SUBMIT": "/opt/spark/bin/spark-submit"})
    # SPARK_SUBMIT must be executable: a clear error, not a confusing failure later
    assert res.returncode == 2 and "spark-submit is not executable: /opt/spark/bin/spark-submit" in res.stderr
    res = _run("--conf", str(conf), "--dry-run", "--reports", "stale_metadata", "--fail-on", "error",
               "--summary-json", "s.json", "--", "--master", "yarn", "--num-executors", "20",
               env={"PATH": "/usr/bin:/bin", **cache})
    assert res.returncode == 0, res.stderr
    yesterday = (dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)).isoformat()
    cmd = res.stdout.split()
    assert cmd[0].endswith("pyspark/bin/spark-submit")  # not on PATH: the one in the pyspark wheel
    # the printed files outlive the script: the command can be run as printed
    zip_path = Path(cmd[cmd.index("--py-files") + 1])
    assert zip_path == tmp_path / "cache" / "epoch-audit" / "submit" / "epoch_audit.zip" and zip_path.is_file()
    driver = next(i for i, a in enumerate(cmd) if a.endswith("epoch_audit_driver.py"))
    assert Path(cmd[driver]).is_file()
    assert cmd[driver - 4:driver] == ["--master", "yarn", "--num-executors", "20"]  # before the app
    assert cmd[driver + 1:] == ["--conf", str(conf), "--from", yesterday, "--to", yesterday,
                                "--reports", "stale_metadata", "--fail-on", "error", "--summary-json",
                                str(ROOT / "s.json")]
    assert "--packages" not in cmd
    # Spark's logging: the shipped log4j2 file, before the user's options (theirs win)
    log4j = ROOT / "jobs" / "log4j2.properties"
    assert f"spark.driver.extraJavaOptions=-Dlog4j2.configurationFile={log4j.as_uri()}" in cmd
    assert cmd.index("--files") < driver - 4 and cmd[cmd.index("--files") + 1] == str(log4j)
    assert "rootLogger.level = warn" in log4j.read_text()


def test_a_log4j_file_under_a_folder_with_a_space_reaches_the_driver_as_a_uri(tmp_path):
    """Spark splits extraJavaOptions at spaces: `file:/tmp/sp ace/…` ran as `main class ace…` (exit 1), for a
    checkout or EPOCH_AUDIT_LOG4J under such a folder."""
    import shlex

    conf = _config(tmp_path)
    spaced = tmp_path / "sp ace" / "log4j2.properties"
    spaced.parent.mkdir()
    spaced.write_text((ROOT / "jobs" / "log4j2.properties").read_text())
    res = _run("--conf", str(conf), "--dry-run", "--work-dir", str(tmp_path / "w"),
               env={"EPOCH_AUDIT_LOG4J": str(spaced)})
    assert res.returncode == 0, res.stderr
    cmd = shlex.split(res.stdout)
    driver_opts = next(a for a in cmd if a.startswith("spark.driver.extraJavaOptions="))
    assert driver_opts.split("=", 1)[1].split(" ")[0] == f"-Dlog4j2.configurationFile={spaced.as_uri()}"
    assert "%20" in spaced.as_uri() and cmd[cmd.index("--files") + 1] == str(spaced)
    named = tmp_path / "my log4j2.properties"
    named.write_text("x")
    res = _run("--conf", str(conf), "--dry-run", "--work-dir", str(tmp_path / "w"), env={"EPOCH_AUDIT_LOG4J": str(named)})
    assert res.returncode != 0 and "file name has a space" in res.stderr


def _fake_python(tmp_path: Path, pyspark: str) -> str:
    """A python whose importlib.metadata reports ``pyspark`` and no delta-spark (the script asks it)."""
    site = tmp_path / f"site-{pyspark}"
    (site / f"pyspark-{pyspark}.dist-info").mkdir(parents=True)
    (site / f"pyspark-{pyspark}.dist-info" / "METADATA").write_text(f"Name: pyspark\nVersion: {pyspark}\n")
    wrapper = tmp_path / f"python-{pyspark}"
    # the project's own imports still resolve (config check); only the metadata lookup is faked
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{site}:{ROOT}" exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    return str(wrapper)


@pytest.mark.parametrize(("pyspark", "delta"), [("4.0.0", "4.0.1"), ("4.0.1", "4.4.1"), ("4.2.0", "4.4.1")])
def test_delta_release_matches_the_installed_pyspark(tmp_path, pyspark, delta):
    res = _run("--conf", str(_config(tmp_path)), "--from", "2024-03-01", "--delta", "--dry-run",
               env={"PYTHON": _fake_python(tmp_path, pyspark), "XDG_CACHE_HOME": str(tmp_path / "c"),
                    "SPARK_SUBMIT": "/bin/true"})
    assert res.returncode == 0, res.stderr
    cmd = res.stdout.split()
    assert cmd[cmd.index("--packages") + 1] == f"io.delta:delta-spark_2.13:{delta}"


def test_delta_on_an_unsupported_pyspark_says_which_to_use(tmp_path):
    res = _run("--conf", str(_config(tmp_path)), "--from", "2024-03-01", "--delta", "--dry-run",
               env={"PYTHON": _fake_python(tmp_path, "4.3.0"), "SPARK_SUBMIT": "/bin/true"})
    assert res.returncode == 2
    assert len(res.stderr.strip().splitlines()) == 1
    assert "no delta-spark release supports pyspark 4.3.0" in res.stderr and "pyspark>=4.0,<4.3" in res.stderr


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
    """As the README documents it: Spark's logging at WARN (was ~29,000 INFO lines), the job's progress
    and errors on stderr, the summary on stdout, and the alerting files written."""
    conf = _config(tmp_path, write_tiny_inputs(tmp_path / "in"))
    res = _run("--conf", str(conf), "--from", "2024-03-01", "--fail-on", "error", "--summary-json",
               str(tmp_path / "s.json"), "--", "--master", "local[1]", "--conf", "spark.ui.enabled=false",
               "--driver-memory", "1g", timeout=600)
    assert res.returncode == 5, res.stderr[-3000:]  # one error finding, --fail-on error
    assert "Findings for cluster submit-test, 2024-03-01 .. 2024-03-01" in res.stdout
    assert " INFO " not in res.stderr
    assert len(res.stderr.splitlines()) < 40, res.stderr[-3000:]
    assert "ingest: offsets" in res.stderr and "ingest:" not in res.stdout  # progress stays on stderr
    assert "findings at or above error" in res.stderr
    import json

    assert json.loads((tmp_path / "s.json").read_text())["status"] == "ok"
    for table in ("offset_commits", "epoch_lineage", "audit_runs", "stale_metadata", "fencing_violations",
                  "spurious_offset_resets"):
        assert (tmp_path / "tables" / table / "_delta_log").is_dir(), table
    from deltalake import DeltaTable

    runs = DeltaTable(str(tmp_path / "tables" / "audit_runs")).to_pyarrow_table().to_pylist()
    assert {r["status"] for r in runs} == {"ok"} and {r["cluster"] for r in runs} == {"submit-test"}
    assert "spark-submit.sh: auditing 2024-03-01 .. 2024-03-01" in res.stderr


@pytest.mark.spark
@pytest.mark.slow
@pytest.mark.parametrize(("signame", "to_script", "to_group"), [
    ("SIGTERM", True, True),  # timeout -s TERM: the script, then its process group
    ("SIGTERM", True, False),  # a scheduler that signals the script alone: passed on to the driver and the JVM
    ("SIGINT", False, True),  # Ctrl-C: the process group
], ids=["timeout", "script-only", "ctrl-c"])
def test_a_run_a_scheduler_stops_is_recorded_as_failed_before_its_code_is_removed(tmp_path, signame, to_script,
                                                                                  to_group):
    """`timeout -s TERM` on spark-submit.sh: the script's exit trap removed the code zip at once, while the Python
    driver (the JVM's child) still imported from it to record the failed run: both alerting files were lost. A
    SIGTERM to the script alone ended only the JVM (the driver failed on a dead gateway: exit 1); a Ctrl-C left a
    JVM started in the background with SIGINT ignored, and the run hung."""
    import json
    import signal
    import time

    signum = getattr(signal, signame)

    from test_notebook import write_tiny_inputs as tiny

    conf = _config(tmp_path, tiny(tmp_path / "in"))
    (tmp_path / "tmp").mkdir()
    env = {**os.environ, "PYTHON": sys.executable, "TMPDIR": str(tmp_path / "tmp")}
    proc = subprocess.Popen(["bash", str(SCRIPT), "--conf", str(conf), "--from", "2024-03-01", "--summary-json",
                             str(tmp_path / "s.json"), "--metrics-file", str(tmp_path / "m.prom"), "--", "--master",
                             "local[1]", "--conf", "spark.ui.enabled=false"], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 300
        for line in proc.stderr:  # the driver runs: its first progress line
            if "ingest:" in line or time.monotonic() > deadline:
                break
        if to_script:
            os.kill(proc.pid, signum)
        if to_group:
            os.killpg(proc.pid, signum)
        proc.stderr.read()
        proc.wait(timeout=120)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
    doc = json.loads((tmp_path / "s.json").read_text())
    assert (doc["status"], doc["exit_code"], doc["error"]) == ("failed", 128 + signum, f"terminated by {signame}")
    assert proc.returncode == 128 + signum
    assert 'epoch_audit_run_status{cluster="submit-test",status="failed"} 1.0' in (tmp_path / "m.prom").read_text()
    assert list((tmp_path / "tmp").glob("epoch-audit-submit.*")) == []  # and the code zip is gone after all


def test_dry_run_for_a_local_master_prints_the_python_it_sets(tmp_path):
    """For local masters the script points Spark's workers at its own Python; the printed command must
    carry that, or it fails as printed with 'No module named pyarrow' under a bare python3."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    res = subprocess.run(["bash", str(SCRIPT), "--conf", str(_config(tmp_path)), "--from", "2024-03-01",
                          "--dry-run", "--", "--master", "local[2]"], capture_output=True, text=True,
                         env={**env, "PYTHON": sys.executable, "XDG_CACHE_HOME": str(tmp_path / "cache")},
                         timeout=60)
    assert res.returncode == 0, res.stderr
    words = shlex.split(res.stdout)
    assert words[:2] == [f"PYSPARK_PYTHON={sys.executable}", f"PYSPARK_DRIVER_PYTHON={sys.executable}"]
    assert words[2].endswith("spark-submit")


def test_a_small_local_input_gets_the_small_input_jvm_flags(tmp_path):
    """Like the CLI's own session (jobs.session.java_options_for_input): a local master auditing a small
    input compiles with C1 only; a large input, --reports-only or a cluster master keeps the full JIT."""
    from jobs.session import SMALL_INPUT_BYTES, SMALL_INPUT_JAVA_OPTIONS

    offsets = tmp_path / "offsets"
    offsets.mkdir()
    (offsets / "00000000000000000000.log").write_bytes(b"\0" * 100)
    conf = _config(tmp_path, {"offsets": str(offsets)})
    cache = {"XDG_CACHE_HOME": str(tmp_path / "cache")}

    def driver_options(*extra: str) -> str:
        res = _run("--conf", str(conf), "--from", "2024-03-01", "--dry-run", *extra, env=cache)
        assert res.returncode == 0, res.stderr
        words = shlex.split(res.stdout)
        return next(w for w in words if w.startswith("spark.driver.extraJavaOptions="))

    assert driver_options("--", "--master", "local[2]").endswith(f"log4j2.properties {SMALL_INPUT_JAVA_OPTIONS}")
    assert SMALL_INPUT_JAVA_OPTIONS in driver_options()  # no --master: local
    assert SMALL_INPUT_JAVA_OPTIONS not in driver_options("--", "--master", "yarn")
    assert SMALL_INPUT_JAVA_OPTIONS not in driver_options("--reports-only", "--", "--master", "local[2]")
    with open(offsets / "00000000000000000000.log", "r+b") as fh:
        fh.truncate(SMALL_INPUT_BYTES + 1)
    assert SMALL_INPUT_JAVA_OPTIONS not in driver_options("--", "--master", "local[2]")


def test_a_local_master_gets_our_worker_daemon_when_the_workers_python_has_it(tmp_path):
    """Like the CLI's own sessions (jobs.session): a local master's workers run jobs.pydaemon when their Python
    imports it; a cluster master's executors may not have our package, so they keep pyspark's daemon."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK_")}
    env.update(PYTHON=sys.executable, XDG_CACHE_HOME=str(tmp_path / "cache"))

    def words(*extra: str, **more: str) -> list[str]:
        res = subprocess.run(["bash", str(SCRIPT), "--conf", str(_config(tmp_path)), "--from", "2024-03-01",
                              "--dry-run", *extra], capture_output=True, text=True, env={**env, **more}, timeout=60)
        assert res.returncode == 0, res.stderr
        return shlex.split(res.stdout)

    daemon = "spark.python.daemon.module=jobs.pydaemon"
    assert daemon in words("--", "--master", "local[2]")
    assert daemon not in words("--", "--master", "yarn")
    bare = tmp_path / "bare-python"  # a worker Python without our package: pyspark's daemon stays
    bare.write_text("#!/bin/sh\nexec python3 -S -c 'import sys; sys.exit(1)'\n")
    bare.chmod(0o755)
    assert daemon not in words("--", "--master", "local[2]", PYSPARK_PYTHON=str(bare))


def test_a_local_master_maps_the_class_data_archive_a_cli_run_made(tmp_path):
    """Like the CLI's sessions (jobs.class_cache): a local driver JVM maps the archive when there is a whole one;
    a cluster master's driver, or no archive, gets no flag."""
    from jobs import class_cache

    folder = tmp_path / "jvm"
    folder.mkdir()
    archive = folder / f"spark-{class_cache._install_key()}.jsa"
    conf = _config(tmp_path)

    def driver_options(*extra: str) -> str:
        res = _run("--conf", str(conf), "--from", "2024-03-01", "--dry-run", *extra,
                   env={class_cache.ENV: str(folder), "XDG_CACHE_HOME": str(tmp_path / "cache")})
        assert res.returncode == 0, res.stderr
        return next(w for w in shlex.split(res.stdout) if w.startswith("spark.driver.extraJavaOptions="))

    assert "SharedArchiveFile" not in driver_options("--", "--master", "local[2]")  # none made yet
    archive.write_bytes(b"x" * 64)
    archive.with_name(archive.name + ".size").write_text("64\n")
    assert f"-XX:SharedArchiveFile={archive}" in driver_options("--", "--master", "local[2]")
    assert f"-XX:SharedArchiveFile={archive}" in driver_options("--reports-only")
    assert "SharedArchiveFile" not in driver_options("--", "--master", "yarn")
    archive.write_bytes(b"x" * 32)  # cut short: not used
    assert "SharedArchiveFile" not in driver_options("--", "--master", "local[2]")
