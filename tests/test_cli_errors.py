"""What a user sees when something outside the audit fails: one line, the right exit code."""

from __future__ import annotations

from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner

from jobs import cli
from jobs.errors import ConfigError, SinkError, one_line

JAVA_TRACE = ("An error occurred while calling o57.save.\n"
              ": org.apache.spark.SparkException: Job aborted.\n"
              "\tat org.apache.spark.sql.execution.SparkPlan.execute(SparkPlan.scala:1)\n" * 20)


def test_one_line_keeps_the_first_line_of_a_java_trace() -> None:
    # Py4J's first line only announces the Java exception: its message is the cause a user needs
    assert one_line(RuntimeError(JAVA_TRACE)) == ("An error occurred while calling o57.save. "
                                                  "org.apache.spark.SparkException: Job aborted.")
    assert one_line(RuntimeError("\n\n  spaced   out \n more")) == "spaced out"
    assert one_line(ValueError("")) == "ValueError"
    assert len(one_line(RuntimeError("x" * 5000), 100)) == 100


PYTHON_WORKER = ("Spark could not write staged Parquet files for 'metadata_observations': An exception was thrown "
                 "from the Python worker:\n"
                 "Traceback (most recent call last):\n"
                 '  File "/venv/pyspark/worker.py", line 1, in main\n    process()\n'
                 "ValueError: a first failure\n\nDuring handling of the above exception, another exception occurred:\n\n"
                 "Traceback (most recent call last):\n"
                 '  File "/repo/jobs/ingest/metadata.py", line 227, in _decode_jsonl\n'
                 "    for line_no, line in read_lines(row):\n"
                 "PermissionError: [Errno 13] Permission denied: '/sim/metadata/a.jsonl'\n\n"
                 "JVM stacktrace:\norg.apache.spark.api.python.PythonException: Traceback (most recent call last):\n"
                 "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException(PythonRunner.scala:1)\n")


def test_one_line_ends_a_python_worker_s_failure_with_its_exception_not_a_colon() -> None:
    assert one_line(SinkError(PYTHON_WORKER), 2000) == (
        "Spark could not write staged Parquet files for 'metadata_observations': An exception was thrown from the "
        "Python worker: PermissionError: [Errno 13] Permission denied: '/sim/metadata/a.jsonl'")


def test_a_session_that_cannot_start_is_a_usage_error_naming_the_master(monkeypatch) -> None:
    def refuse(**_kw):
        raise RuntimeError("[JAVA_GATEWAY_EXITED] Java gateway process exited before sending its port number.\n"
                           "\tat somewhere")

    import jobs.session

    monkeypatch.setattr(jobs.session, "get_or_create_session", refuse)
    config = SimpleNamespace(cluster="c", spark=SimpleNamespace(master="yarn", conf={}))
    with pytest.raises(ConfigError) as err:
        cli._session(config)
    text = str(err.value)
    assert "'yarn'" in text and "JAVA_GATEWAY_EXITED" in text and "\n" not in text and "local[*]" in text
    assert cli._exit_code(err.value) == 2


def test_a_closed_pipe_is_a_normal_end() -> None:
    @click.command()
    @cli._guarded
    def talk() -> None:
        raise BrokenPipeError(32, "Broken pipe")

    res = CliRunner().invoke(talk, [])
    assert res.exit_code == 0 and "unexpected failure" not in res.output



def test_decode_of_a_missing_file_is_exit_3_like_run(tmp_path) -> None:
    res = CliRunner().invoke(cli.cli, ["decode", str(tmp_path / "nope.log")])
    assert res.exit_code == 3 and "input file does not exist" in res.output


def test_a_master_the_jvm_refuses_is_one_line_with_the_java_cause(monkeypatch) -> None:
    """Py4J's first line ("An error occurred while calling None.…JavaSparkContext.") was all the user got."""
    def refuse(**_kw):
        raise RuntimeError("An error occurred while calling None.org.apache.spark.api.java.JavaSparkContext.\n"
                           ": org.apache.spark.SparkException: Asked to run locally with 0 threads\n"
                           "\tat org.apache.spark.SparkContext$.createTaskScheduler(SparkContext.scala:3200)\n")

    import jobs.session

    monkeypatch.setattr(jobs.session, "get_or_create_session", refuse)
    config = SimpleNamespace(cluster="c", spark=SimpleNamespace(master="local[0]", conf={}))
    with pytest.raises(ConfigError) as err:
        cli._session(config)
    assert "org.apache.spark.SparkException: Asked to run locally with 0 threads" in str(err.value)
    assert "\n" not in str(err.value)


def test_run_with_a_malformed_local_master_is_exit_2_before_spark(tmp_path, monkeypatch) -> None:
    import jobs.session

    monkeypatch.setattr(jobs.session, "get_or_create_session", lambda **_kw: pytest.fail("Spark started"))
    (tmp_path / "in").mkdir()
    conf = tmp_path / "c.toml"
    conf.write_text(f'cluster = "demo"\n[inputs]\noffsets = "{tmp_path / "in"}"\n[output]\nroot = "{tmp_path / "out"}"\n'
                    '[spark]\nmaster = "local[x]"\n')
    res = CliRunner().invoke(cli.cli, ["run", "--conf", str(conf), "--from", "2024-03-04"])
    assert res.exit_code == 2
    assert res.output.strip() == (f"epoch-audit: error: {conf}: [spark] master 'local[x]' is not a Spark master: a "
                                  "local one is local, local[N], local[*], local[N,M] or local-cluster[N,C,M]")
    res = CliRunner().invoke(cli.cli, ["accuracy", "--master", "local[x]", "--out", str(tmp_path / "acc")])
    assert res.exit_code == 2 and "--master 'local[x]' is not a Spark master" in res.output


def test_decode_of_an_unreadable_file_is_exit_3_like_a_missing_one(tmp_path, monkeypatch) -> None:
    """It was click's usage error, exit 2. Running as root reads anything: the access check and the open are made to
    refuse as they do for another user."""
    import builtins
    import os

    target = tmp_path / "00000000000000000000.log"
    target.write_bytes(b"\0" * 64)
    real_access, real_open = os.access, builtins.open
    monkeypatch.setattr(os, "access", lambda p, mode, *a, **kw: False if str(p) == str(target)
                        else real_access(p, mode, *a, **kw))

    def open_(file, *a, **kw):
        if str(file) == str(target):
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **kw)

    monkeypatch.setattr(builtins, "open", open_)
    res = CliRunner().invoke(cli.cli, ["decode", str(target)])
    assert res.exit_code == 3, res.output
    assert res.output.strip() == f"epoch-audit: error: input file cannot be read (Permission denied): {target}"
