"""The JVM class-data archive (jobs.class_cache): made by a first run, used by later ones, and never a reason
for Spark not to start.

The session tests start their own JVMs, so they run in child processes (the suite shares one session)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from jobs import class_cache

# a child process: start a local session as the CLI does, run a job, then what the CLI does last
CHILD = textwrap.dedent("""
    import sys
    from jobs import class_cache
    from jobs.session import DRIVER_JAVA_OPTIONS, get_or_create_session
    spark = get_or_create_session(master="local[1]", app_name="class-cache-test", class_data=sys.argv[1],
                                  extra_conf={"spark.ui.enabled": "false"})
    assert spark.range(100).count() == 100
    print("OPTIONS", spark.sparkContext.getConf().get(DRIVER_JAVA_OPTIONS, ""))
    print("MADE", class_cache.finish(int(sys.argv[2])))  # the command's exit code
""")

needs_java = pytest.mark.skipif(shutil.which("java") is None and not os.environ.get("JAVA_HOME"),
                                reason="no Java to start Spark with")


def _child(folder: Path, mode: str, exit_code: int = 0, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", CHILD, mode, str(exit_code)], capture_output=True, text=True,
                          env={**os.environ, class_cache.ENV: str(folder), **env}, timeout=600, check=False)


def _line(out: str, key: str) -> str:
    return next(line.split(" ", 1)[1] for line in out.splitlines() if line.startswith(key + " "))


def test_folder_comes_from_the_environment(monkeypatch, tmp_path):
    monkeypatch.setenv(class_cache.ENV, str(tmp_path / "jvm"))
    assert class_cache.cache_folder() == tmp_path / "jvm"
    for off in ("off", "0", "false", "no", ""):
        monkeypatch.setenv(class_cache.ENV, off)
        assert class_cache.cache_folder() is None
        assert class_cache.archive_for_session("make") is None
    monkeypatch.delenv(class_cache.ENV)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert class_cache.cache_folder() == tmp_path / "xdg" / "epoch-audit" / "jvm"


def test_an_archive_is_used_only_at_the_size_noted_when_it_was_made(monkeypatch, tmp_path):
    monkeypatch.setenv(class_cache.ENV, str(tmp_path))
    made = class_cache.archive_for_session("make")
    assert made is not None and made.making is not None
    assert "-XX:ArchiveClassesAtExit=" in made.java_options and "-Xlog:cds*=off" in made.java_options
    assert class_cache.archive_for_session("use") is None  # nothing to use yet, and "use" never makes one
    class_cache.discard(made)  # not made here: this process has no JVM writing it
    made.path.write_bytes(b"x" * 100)
    made.path.with_name(made.path.name + ".size").write_text("100\n")
    used = class_cache.archive_for_session("use")
    assert used is not None and used.making is None
    assert f"-XX:SharedArchiveFile={made.path}" in used.java_options
    made.path.write_bytes(b"x" * 50)  # cut short: the JVM would crash on it (SIGBUS)
    assert class_cache.archive_for_session("use") is None
    assert class_cache.archive_for_session(None) is None


def test_temporary_files_of_ended_runs_are_removed(monkeypatch, tmp_path):
    monkeypatch.setenv(class_cache.ENV, str(tmp_path))
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = tmp_path / f".spark-0123456789abcdef.jsa.{int(dead.stdout)}.tmp"
    alive = tmp_path / f".spark-0123456789abcdef.jsa.{os.getppid()}.tmp"
    gone.write_bytes(b"half an archive")
    alive.write_bytes(b"being written")
    made = class_cache.archive_for_session("make")
    assert made is not None
    assert not gone.exists() and alive.exists()
    class_cache.discard(made)


@pytest.mark.slow
@needs_java
def test_the_first_good_run_makes_the_archive_and_the_next_maps_it(tmp_path):
    # a failed first run (exit 1) leaves no archive: its JVM is ended, not left to write a partial run's classes
    failed = _child(tmp_path, "make", exit_code=1)
    assert failed.returncode == 0, failed.stderr[-3000:]
    assert "-XX:ArchiveClassesAtExit=" in _line(failed.stdout, "OPTIONS")
    assert _line(failed.stdout, "MADE") == "None"
    assert not list(tmp_path.iterdir())

    first = _child(tmp_path, "make")
    assert first.returncode == 0, first.stderr[-3000:]
    archives = list(tmp_path.glob("spark-*.jsa"))
    assert [str(a) for a in archives] == [_line(first.stdout, "MADE")]
    size = archives[0].stat().st_size
    assert size > 10 << 20  # Spark's classes, not an empty file
    assert (tmp_path / (archives[0].name + ".size")).read_text().strip() == str(size)
    assert not list(tmp_path.glob(".*.tmp"))
    assert "saving Spark's class-data archive" in first.stderr
    # the JVM's own CDS messages (~1,300 lines as it writes) stay out of the output
    assert "[cds" not in first.stdout and "[cds" not in first.stderr

    # the next session maps Spark's classes from it (the JVM's class-loading log names the archive as their source)
    loads = tmp_path / "class-load.log"
    second = _child(tmp_path, "make", JAVA_TOOL_OPTIONS=f"-Xlog:class+load=info:file={loads}")
    assert second.returncode == 0, second.stderr[-3000:]
    assert f"-XX:SharedArchiveFile={archives[0]}" in _line(second.stdout, "OPTIONS")
    assert _line(second.stdout, "MADE") == "None"  # made once
    mapped = [line for line in loads.read_text().splitlines() if "source: shared objects file (top)" in line]
    assert any("org.apache.spark.sql.SparkSession" in line for line in mapped), len(mapped)
    assert "[cds" not in second.stdout and "[cds" not in second.stderr
    loads.unlink()

    # an archive the JVM cannot map (here: cut, with a note that says otherwise) does not stop Spark: the
    # session starts without it, the archive is removed, and the crash log goes to the archive's folder
    data = archives[0].read_bytes()[: 1 << 20]
    archives[0].write_bytes(data)
    (tmp_path / (archives[0].name + ".size")).write_text(f"{len(data)}\n")
    third = _child(tmp_path, "use")
    assert third.returncode == 0, third.stderr[-3000:]
    assert "SharedArchiveFile" not in _line(third.stdout, "OPTIONS")
    assert not archives[0].exists()
    assert "did not start with the class-data archive's flags" in third.stderr
    assert list(tmp_path.glob("hs_err_pid*.log"))


@pytest.mark.slow
@needs_java
def test_a_jvm_that_writes_no_archive_is_not_asked_again(tmp_path):
    # e.g. class sharing turned off in the environment (the JVM then refuses to start with the flag that makes
    # one): the session starts without it, a note says so, and the next run does not try again
    first = _child(tmp_path, "make", JAVA_TOOL_OPTIONS="-Xshare:off")
    assert first.returncode == 0, first.stderr[-3000:]
    assert _line(first.stdout, "MADE") == "None"
    assert list(tmp_path.glob("spark-*.jsa.failed")) and not list(tmp_path.glob("spark-*.jsa"))
    second = _child(tmp_path, "make", JAVA_TOOL_OPTIONS="-Xshare:off")
    assert second.returncode == 0, second.stderr[-3000:]
    assert "ArchiveClassesAtExit" not in _line(second.stdout, "OPTIONS")
    assert "saving Spark's class-data archive" not in second.stderr


def test_a_folder_whose_name_spark_or_the_jvm_would_split_is_not_used(monkeypatch, tmp_path):
    for name in (str(tmp_path / "my cache"), str(tmp_path / "a:b"), str(tmp_path / "50%"), "relative/folder",
                 "~no-such-user-here/jvm"):
        monkeypatch.setenv(class_cache.ENV, name)
        assert class_cache.cache_folder() is None, name
        assert class_cache.archive_for_session("make") is None, name


@needs_java
def test_the_archive_is_blamed_only_when_java_crashed_or_will_not_start_with_it(monkeypatch, tmp_path):
    """A session that did not start is started again without the archive only when the archive could be why: a
    master Spark's launcher refuses (``yarn`` without HADOOP_CONF_DIR) was started twice, two stack traces."""
    monkeypatch.setenv(class_cache.ENV, str(tmp_path))
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    made = class_cache.archive_for_session("make")
    assert made is not None and made.making is not None
    before = class_cache.crash_logs(made)
    assert not class_cache.could_be_why(made, before)  # Java starts with the flags: something else refused
    assert not made.making.exists() and not list(tmp_path.glob("*.jsa"))  # the probe wrote no archive there
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xshare:off")  # the JVM refuses ArchiveClassesAtExit then
    assert class_cache.could_be_why(made, before)
    monkeypatch.delenv("JAVA_TOOL_OPTIONS")
    (tmp_path / "hs_err_pid4242.log").write_text("SIGBUS")  # a JVM crashed on the archive
    assert class_cache.could_be_why(made, before)
    monkeypatch.setenv("JAVA_HOME", str(tmp_path / "no-java"))  # no Java at all: the archive is not why
    assert not class_cache.could_be_why(made, class_cache.crash_logs(made))


YARN = textwrap.dedent("""
    from jobs.session import get_or_create_session
    get_or_create_session(master="yarn", app_name="class-cache-test", class_data="make")
""")


@pytest.mark.slow
@needs_java
def test_a_master_spark_refuses_starts_the_jvm_once(tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("HADOOP_CONF_DIR", "YARN_CONF_DIR", "JAVA_TOOL_OPTIONS")}
    done = subprocess.run([sys.executable, "-c", YARN], capture_output=True, text=True, timeout=600, check=False,
                          env={**env, class_cache.ENV: str(tmp_path)})
    assert done.returncode != 0
    assert done.stderr.count("HADOOP_CONF_DIR or YARN_CONF_DIR must be set") == 1, done.stderr[-3000:]
    assert "did not start with the class-data archive's flags" not in done.stderr
    assert not list(tmp_path.glob("*.failed"))  # the archive is not blamed: the next local run still makes one
