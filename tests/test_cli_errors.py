"""What a user sees when something outside the audit fails: one line, the right exit code."""

from __future__ import annotations

from types import SimpleNamespace

import click
import pytest
from click.testing import CliRunner

from jobs import cli
from jobs.errors import ConfigError, one_line

JAVA_TRACE = ("An error occurred while calling o57.save.\n"
              ": org.apache.spark.SparkException: Job aborted.\n"
              "\tat org.apache.spark.sql.execution.SparkPlan.execute(SparkPlan.scala:1)\n" * 20)


def test_one_line_keeps_the_first_line_of_a_java_trace() -> None:
    assert one_line(RuntimeError(JAVA_TRACE)) == "An error occurred while calling o57.save."
    assert one_line(RuntimeError("\n\n  spaced   out \n more")) == "spaced out"
    assert one_line(ValueError("")) == "ValueError"
    assert len(one_line(RuntimeError("x" * 5000), 100)) == 100


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
