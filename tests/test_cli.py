"""The epoch-audit command: error paths and exit codes (no Spark needed), and decode."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from click.testing import CliRunner
from fixtures_segments import LONG_MAX, NOOP, kp_batch

from epochlib import coordinator, records
from epochlib.checkpoint import format_leader_epoch_checkpoint
from jobs.cli import EXIT_INPUT, EXIT_SINK, EXIT_USAGE, cli


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _conf(tmp_path: Path, body: str) -> Path:
    p = tmp_path / "x.toml"
    p.write_text(body)
    return p


GOOD = """cluster = "c1"
[inputs]
offsets = "{offsets}"
[output]
root = "{root}"
"""


def test_help_lists_every_subcommand(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["--help"])
    assert res.exit_code == 0
    for cmd in ("run", "demo", "decode", "simulate", "report"):
        assert cmd in res.output


@pytest.mark.parametrize(("dates", "needle"), [
    (["--from", "2024-13-01"], "--from"),
    (["--from", "2024-03-05", "--to", "2024-03-01"], "after"),
    (["--from", "yesterday"], "--from"),
    (["--from", "9999-12-31"], "outside 1970-01-01..9999-12-29"),  # was exit 1: the day after overflowed
    (["--from", "0001-01-01", "--to", "2024-01-01"], "--from 0001-01-01 is outside"),
])
def test_run_rejects_invalid_date_ranges(runner: CliRunner, tmp_path: Path, dates: list[str], needle: str) -> None:
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path, root=tmp_path / "out"))
    res = runner.invoke(cli, ["run", "--conf", str(conf), *dates])
    assert res.exit_code == EXIT_USAGE
    assert "error" in res.output and needle in res.output
    assert "Traceback" not in res.output


def test_run_bad_config_is_one_line_exit_2(runner: CliRunner, tmp_path: Path) -> None:
    conf = _conf(tmp_path, 'cluster = "c1"\n[output]\nroot = "x"\n[rules]\nlookbak_days = 2\n')
    res = runner.invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-04"])
    assert res.exit_code == EXIT_USAGE
    assert "lookbak_days" in res.output
    assert len(res.output.strip().splitlines()) == 1


def test_run_missing_config_file(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["run", "--conf", str(tmp_path / "nope.toml"), "--from", "2024-03-04"])
    assert res.exit_code == EXIT_USAGE and "not found" in res.output


def test_run_missing_input_path_exit_3(runner: CliRunner, tmp_path: Path) -> None:
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path / "missing", root=tmp_path / "out"))
    res = runner.invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-04"])
    assert res.exit_code == EXIT_INPUT
    assert "does not exist" in res.output and "missing" in res.output


def test_a_missing_path_of_the_config_file_is_named_by_its_key_not_a_flag(runner: CliRunner, tmp_path: Path) -> None:
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path / "missing", root=tmp_path / "out"))
    res = runner.invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-04"])
    assert res.exit_code == EXIT_INPUT
    assert f"[inputs] offsets in {conf.resolve()}: input path does not exist" in res.output
    assert "--offsets" not in res.output


@pytest.mark.parametrize("kind", ["folder", "file"])
def test_an_unreadable_input_root_is_exit_3_before_spark(runner: CliRunner, tmp_path: Path, monkeypatch,
                                                         kind: str) -> None:
    """A root the run cannot list (a folder) or open (a file) was read as "nothing decoded": status partial,
    exit 0. Root reads anything, so the listing or the open is made to refuse as it does for another user."""
    import builtins
    import os

    import jobs.session

    root = tmp_path / "offsets"
    root.mkdir()
    target = root
    if kind == "file":
        target = root / "commits.jsonl"
        target.write_text("{}\n")
    real_scandir, real_open = os.scandir, builtins.open

    def scandir(path=".", *a):
        if Path(path) == target:
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path, *a)

    def open_(file, *a, **kw):
        if isinstance(file, (str, Path)) and Path(file) == target:
            raise PermissionError(13, "Permission denied", str(file))
        return real_open(file, *a, **kw)

    monkeypatch.setattr(os, "scandir", scandir)
    monkeypatch.setattr(builtins, "open", open_)
    monkeypatch.setattr(jobs.session, "get_or_create_session", lambda **_kw: pytest.fail("Spark started"))
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path, root=tmp_path / "out"))
    res = runner.invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-04", "--offsets", str(target)])
    assert res.exit_code == EXIT_INPUT, res.output
    assert res.output.strip() == (f"epoch-audit: error: --offsets: input path cannot be read (Permission denied): "
                                  f"{target}")


def test_run_flag_overrides_input_path(runner: CliRunner, tmp_path: Path) -> None:
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path, root=tmp_path / "out"))
    res = runner.invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-04",
                               "--metadata", str(tmp_path / "no-captures")])
    assert res.exit_code == EXIT_INPUT and "--metadata" in res.output


def test_run_cluster_metadata_flag_is_checked_before_spark(runner: CliRunner, tmp_path: Path) -> None:
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path, root=tmp_path / "out"))
    res = runner.invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-04",
                               "--cluster-metadata", str(tmp_path / "no-metadata-log")])
    assert res.exit_code == EXIT_INPUT and "--cluster-metadata" in res.output


@pytest.mark.parametrize("flag", ["--summary-json", "--metrics-file"])
def test_an_output_file_that_cannot_be_written_is_refused_before_the_run(runner: CliRunner, tmp_path: Path,
                                                                        flag: str) -> None:
    """Its folder is a file: said before any work (exit 2), not after the tables were written (it was exit 1, and
    the other file was never written)."""
    (tmp_path / "afile").write_text("x")
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path, root=tmp_path / "out"))
    res = runner.invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-04", flag, str(tmp_path / "afile/s")])
    assert res.exit_code == EXIT_USAGE and f"{flag} " in res.output and "cannot write" in res.output
    assert not (tmp_path / "out").exists()


def test_each_output_file_is_written_when_the_other_cannot_be(tmp_path: Path) -> None:
    from jobs.cli import _write_outputs
    from jobs.config import Config, Output
    from jobs.errors import SinkError

    (tmp_path / "afile").write_text("x")
    config = Config(cluster="c1", output=Output(root=str(tmp_path / "out")))
    with pytest.raises(SinkError, match=r"--summary-json .*afile/s.json.*run's status: ok"):
        day = dt.date(2024, 3, 4)
        _write_outputs(config, day, day, str(tmp_path / "afile/s.json"),
                       str(tmp_path / "m.prom"), status="ok", summary=None, duration_s=1.0)
    assert 'epoch_audit_run_status{cluster="c1",status="ok"} 1.0' in (tmp_path / "m.prom").read_text()


def test_the_file_written_says_the_exit_code_the_process_takes_when_the_other_fails(tmp_path: Path) -> None:
    """A run that succeeded exits 4 when --metrics-file cannot be written: its --summary-json must say 4 and why,
    not the run's own 0 (an alert keyed on the JSON would read success while the job failed)."""
    import json

    from jobs.cli import _write_outputs
    from jobs.config import Config, Output
    from jobs.errors import SinkError

    (tmp_path / "afile").write_text("x")
    config = Config(cluster="c1", output=Output(root=str(tmp_path / "out")))
    day = dt.date(2024, 3, 4)
    with pytest.raises(SinkError):
        _write_outputs(config, day, day, str(tmp_path / "s.json"), str(tmp_path / "afile/m.prom"), status="ok",
                       summary=None, duration_s=1.0, exit_code=0, sink_exit=EXIT_SINK)
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "ok" and doc["exit_code"] == EXIT_SINK
    assert "--metrics-file" in doc["error"] and "afile/m.prom" in doc["error"]
    # a failed run keeps its own code (the process exits with it)
    with pytest.raises(SinkError):
        _write_outputs(config, day, day, str(tmp_path / "f.json"), str(tmp_path / "afile/m.prom"), status="failed",
                       summary=None, duration_s=1.0, exit_code=3, error="no input")
    assert json.loads((tmp_path / "f.json").read_text())["exit_code"] == 3


def test_an_output_file_failing_after_a_failed_run_is_one_escaped_line(
        runner: CliRunner, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The error names a path the user gave: printed raw, an escape sequence in it would reach the terminal."""
    import jobs.audit
    import jobs.cli
    from jobs.errors import InputError, SinkError

    def run_fails(*a, **k):
        raise InputError("input gone")

    def write_fails(*a, **k):
        raise SinkError("could not write /x/\x1b]0;owned\x07s.json:\nPermission denied")

    monkeypatch.setattr(jobs.cli, "_session", lambda *a, **k: None)
    monkeypatch.setattr(jobs.audit, "run_audit", run_fails)
    monkeypatch.setattr(jobs.cli, "_write_outputs", write_fails)
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path, root=tmp_path / "out"))
    res = runner.invoke(cli, ["run", "--conf", str(conf), "--from", "2024-03-04", "-q"])
    assert res.exit_code == EXIT_INPUT  # the run's own error decides the exit code
    assert "\x1b" not in res.output and "\\x1b]0;owned\\x07s.json:\\nPermission denied" in res.output
    assert res.output.count("epoch-audit: error:") == 2 and len(res.output.splitlines()) == 2


def test_init_and_simulate_print_a_hostile_path_escaped(runner: CliRunner, tmp_path: Path) -> None:
    """The lines naming a path the user gave (init's, simulate's, demo's, report's) go through the same escaping as
    the rest of the output."""
    target = tmp_path / "x\x1b]0;owned\x07.toml"
    res = runner.invoke(cli, ["init", str(target)])
    assert res.exit_code == 0 and target.is_file(), res.output
    assert "\x1b" not in res.output and "\\x1b]0;owned\\x07.toml" in res.output


def test_html_report_or_config_that_cannot_be_written_is_exit_4(runner: CliRunner, tmp_path: Path) -> None:
    (tmp_path / "afile").write_text("x")
    res = runner.invoke(cli, ["init", str(tmp_path / "afile/x.toml")])
    assert res.exit_code == EXIT_SINK and "could not write" in res.output and len(res.output.splitlines()) == 1


def test_report_rejects_bad_partition_flag(runner: CliRunner, tmp_path: Path) -> None:
    conf = _conf(tmp_path, GOOD.format(offsets=tmp_path, root=tmp_path / "out"))
    res = runner.invoke(cli, ["report", "--conf", str(conf), "--from", "2024-03-04", "--html",
                               str(tmp_path / "r.html"), "--partition", "orders"])
    assert res.exit_code == EXIT_USAGE


def test_simulate_unknown_preset(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["simulate", "--preset", "nope", "--out", str(tmp_path)])
    assert res.exit_code == EXIT_USAGE and "nope" in res.output


# ------------------------------------------------------------------------------------------- decode


def _segment(tmp_path: Path) -> Path:
    d = tmp_path / "__consumer_offsets-7"
    d.mkdir()
    key = coordinator.encode_offset_commit_key("g", "orders", 3)
    value = coordinator.encode_offset_commit_value(42, leader_epoch=5, commit_timestamp=1_700_000_000_000)
    good = records.encode_batch([records.NewRecord(key, value, 1_700_000_000_000),
                                 records.NewRecord(key, None, 1_700_000_000_001)],
                                base_offset=10, partition_leader_epoch=5, compression="zstd")
    bad = bytearray(good)
    bad[-1] ^= 0xFF  # breaks the CRC of the second copy
    p = d / "00000000000000000010.log"
    p.write_bytes(good + bytes(bad) + good[:30])  # + a final batch cut short (a copy of the active segment)
    return p


def test_decode_segment_prints_batches_records_and_errors(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["decode", str(_segment(tmp_path))])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.output.splitlines()]
    kinds = [r["type"] for r in rows]
    assert kinds == ["batch", "record", "record", "error", "info"]
    assert rows[0]["partition_leader_epoch"] == 5 and rows[0]["compression"] == "zstd"
    assert rows[1]["key"]["topic"] == "orders" and rows[1]["value"]["offset"] == 42
    assert rows[1]["value"]["leader_epoch"] == 5
    assert rows[2]["is_tombstone"] is True
    batch_len = rows[0]["size"]
    assert "crc" in rows[3]["reason"].lower() and rows[3]["position"] == batch_len
    # the end of the file inside a batch: the end of the log as Kafka reads it, a note, not an error
    assert rows[4]["position"] == 2 * batch_len and rows[4]["unit"] == "batch"
    assert rows[4]["reason"].startswith(f"incomplete entry at the end of the file: 30 of the {batch_len} bytes")


def test_decode_checks_a_segments_batches_against_its_file_name(runner: CliRunner, tmp_path: Path) -> None:
    """A batch whose baseOffset (outside the CRC) lies outside the 20-digit name's range [base, base+2^31-1] is an
    error line, as Kafka's recovery rejects it; under any other name the same bytes decode as before."""
    data = kp_batch(7) + kp_batch(LONG_MAX)
    (tmp_path / "00000000000000000007.log").write_bytes(data)
    (tmp_path / "copy.log").write_bytes(data)
    res = runner.invoke(cli, ["decode", str(tmp_path / "00000000000000000007.log")])
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert [r["type"] for r in rows] == ["batch", "record", "error"]
    assert rows[2]["reason"] == f"offsets outside the segment's range [7, 7+2^31-1]: base offset {LONG_MAX}, " \
                                f"last offset {LONG_MAX}"
    res = runner.invoke(cli, ["decode", str(tmp_path / "copy.log")])
    assert [json.loads(line)["type"] for line in res.output.splitlines()] == ["batch", "record", "batch", "record"]


def test_decode_reads_a_segments_end_as_kafka_does(runner: CliRunner, tmp_path: Path) -> None:
    """A zero fill after the last batch (log.preallocate) is no line; a metadata-log segment that ends inside a
    batch gets an info line, not an error (kafka-python-built bytes)."""
    p = tmp_path / "orders-0" / "00000000000000000000.log"
    p.parent.mkdir()
    p.write_bytes(kp_batch(0, 2) + bytes(4096))
    res = runner.invoke(cli, ["decode", str(p)])
    assert [json.loads(line)["type"] for line in res.output.splitlines()] == ["batch", "record", "record"]
    m = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    m.parent.mkdir()
    whole = kp_batch(0, key=None, value=NOOP)
    m.write_bytes(whole + kp_batch(1, key=None, value=NOOP)[:20])
    rows = [json.loads(line) for line in runner.invoke(cli, ["decode", str(m)]).output.splitlines()]
    assert [r["type"] for r in rows] == ["metadata_record", "info"]
    assert rows[1]["position"] == len(whole) and rows[1]["reason"].startswith(
        f"incomplete entry at the end of the file: 20 of the {len(whole)} bytes its size field announces")

    # a rolled segment (a later one beside it) cut short: an error (bytes lost), for the metadata log too
    (m.parent / "00000000000000000002.log").write_bytes(kp_batch(2, key=None, value=NOOP))
    rows = [json.loads(line) for line in runner.invoke(cli, ["decode", str(m)]).output.splitlines()]
    assert [r["type"] for r in rows] == ["metadata_record", "error"]
    assert rows[1]["reason"].startswith(
        "cut short, but not the partition's last segment: the final entry has 20 bytes of the")
    (p.parent / "00000000000000000005.log").write_bytes(kp_batch(5))
    p.write_bytes(kp_batch(0, 2) + kp_batch(2, 3)[:40])
    rows = [json.loads(line) for line in runner.invoke(cli, ["decode", str(p)]).output.splitlines()]
    assert [r["type"] for r in rows] == ["batch", "record", "record", "error"]
    assert rows[3]["reason"].startswith("cut short, but not the partition's last segment: the final entry has 40 bytes of the")


def test_decode_checkpoint_reports_line_of_a_bad_entry(runner: CliRunner, tmp_path: Path) -> None:
    p = tmp_path / "leader-epoch-checkpoint"
    p.write_text(format_leader_epoch_checkpoint([(0, 0), (2, 10)]).replace("2 10", "2 ten"))
    res = runner.invoke(cli, ["decode", str(p)])
    assert res.exit_code == EXIT_INPUT  # its one unit (the file) is an error: nothing decoded
    row = json.loads(res.stdout)
    assert row["type"] == "error" and row["unit"] == "line" and row["position"] == 4


def test_decode_exits_3_when_nothing_at_all_could_be_decoded(runner: CliRunner, tmp_path: Path) -> None:
    """A script piping ``decode`` must tell a file of garbage (or of the wrong kind) from one that decoded: every
    unit an error is exit 3, the error lines still printed and one line on stderr naming the file; one good unit
    among bad ones is exit 0 (the errors are the data, as for a run's quarantine)."""
    seg = tmp_path / "orders-0" / "00000000000000000000.log"
    seg.parent.mkdir()
    seg.write_bytes(b"\xbd" * 2000)  # no batch can begin with these bytes
    lines = tmp_path / "dump.jsonl"
    lines.write_text('{"a": 1}\nnot json\n{"key": "!!"}\n')
    for path, n in ((seg, 1), (lines, 3)):
        res = runner.invoke(cli, ["decode", str(path)])
        assert res.exit_code == EXIT_INPUT, res.output
        assert [json.loads(x)["type"] for x in res.stdout.splitlines()] == ["error"] * n
        assert res.stderr.count("\n") == 1 and res.stderr.startswith(f"epoch-audit: error: nothing decoded from {path}: ")
    assert "3 error lines, the first (line, position 1): neither a capture line" in runner.invoke(
        cli, ["decode", str(lines)]).stderr
    seg.write_bytes(kp_batch(0) + b"\xbd" * 2000)  # one batch decodes: the error line is data
    res = runner.invoke(cli, ["decode", str(seg)])
    assert res.exit_code == 0 and [json.loads(x)["type"] for x in res.stdout.splitlines()] == ["batch", "record", "error"]
    assert res.stderr == ""
    empty = tmp_path / "t-0" / "00000000000000000000.log"  # an empty segment (a new active one): no error, exit 0
    empty.parent.mkdir()
    empty.write_bytes(b"")
    assert runner.invoke(cli, ["decode", str(empty)]).exit_code == 0


def test_decode_of_a_zero_length_snapshot_exits_3_as_nothing_was_decoded(runner: CliRunner, tmp_path: Path) -> None:
    """Was exit 0: the snapshot line (end offset and epoch from the file's name) counted as decoded, so a
    zero-length ``.checkpoint`` passed a script's check. Now it exits 3 like any file of which nothing decoded,
    its lines still printed; a whole snapshot (header, a record, footer) is exit 0."""
    from epochlib.kraft.snapshot import encode_snapshot

    snap = tmp_path / "__cluster_metadata-0" / "00000000000000007260-0000000001.checkpoint"
    snap.parent.mkdir()
    snap.write_bytes(b"")
    res = runner.invoke(cli, ["decode", str(snap)])
    assert res.exit_code == EXIT_INPUT, res.output
    assert [json.loads(x)["type"] for x in res.stdout.splitlines()] == ["snapshot", "error", "error"]
    assert res.stderr == (f"epoch-audit: error: nothing decoded from {snap}: 2 error lines, the first (file, "
                          "position 0): snapshot does not start with a SnapshotHeaderRecord\n")
    snap.write_bytes(encode_snapshot([(2, 0, {"name": "orders", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ"})], epoch=1,
                                     last_contained_timestamp=1, timestamp=1))
    res = runner.invoke(cli, ["decode", str(snap)])
    assert res.exit_code == 0 and res.stderr == "", res.output


def test_decode_unknown_file_is_input_error(runner: CliRunner, tmp_path: Path) -> None:
    p = tmp_path / "notes.bin"
    p.write_bytes(b"\x00\x01hello")
    res = runner.invoke(cli, ["decode", str(p)])
    assert res.exit_code == EXIT_INPUT and "--kind" in res.output


def test_decode_real_broker_segment(runner: CliRunner, real_data: Path) -> None:
    seg = real_data / "kraft-single-broker-2024" / "__consumer_offsets-0" / "00000000000000000000.log"
    res = runner.invoke(cli, ["decode", str(seg)])
    assert res.exit_code == 0
    rows = [json.loads(line) for line in res.output.splitlines()]
    assert not [r for r in rows if r["type"] == "error"]
    commits = [r for r in rows if r["type"] == "record" and r.get("key", {}).get("record_type") == 1]
    assert commits and all(r["value"]["leader_epoch"] == -1 for r in commits)
    assert {r["key"]["topic"] for r in commits} == {"sensor-data-topic"}


def test_the_run_starts_spark_for_the_size_of_its_local_inputs(tmp_path, monkeypatch) -> None:
    """`run`/`demo` hand the inputs' size to the session factory (small: a JVM tuned for warm-up);
    a run that ingests nothing (--reports-only) does not know it."""
    import dataclasses
    from types import SimpleNamespace

    import jobs.session as session_mod
    from jobs import cli as cli_mod
    from jobs.config import Inputs

    (tmp_path / "offsets").mkdir()
    (tmp_path / "offsets" / "00000000000000000000.log").write_bytes(b"\0" * 123)
    seen = []
    monkeypatch.setattr(session_mod, "get_or_create_session", lambda **kw: seen.append(kw["input_bytes"]))
    inputs = Inputs(offsets=str(tmp_path / "offsets"), metadata=str(tmp_path / "none"))
    config = SimpleNamespace(inputs=inputs, cluster="c", spark=SimpleNamespace(master="local[2]", conf={}))
    cli_mod._session(config, ingest=True)
    assert seen == [None]  # a missing root: unknown, the full JIT
    config.inputs = dataclasses.replace(inputs, metadata=None)
    cli_mod._session(config, ingest=True)
    cli_mod._session(config)
    assert seen[1:] == [123, None]


def test_input_urls_are_left_to_the_reader_and_local_paths_are_checked(tmp_path: Path) -> None:
    """file:/, hdfs:/, s3://, dbfs:/ roots are read by the run's file system layer (jobs.fs), not by os.path: the
    early check must not call them missing (it said "does not exist" for file:/ and hdfs:/ roots)."""
    from jobs import cli as cli_mod
    from jobs.config import Config, Inputs, Output
    from jobs.errors import InputError

    for url in ("file:/nowhere/offsets", "hdfs:/kafka/offsets", "s3://bucket/offsets", "dbfs:/mnt/offsets",
                "abfss://c@a.dfs.core.windows.net/o"):
        cli_mod._check_inputs(Config(cluster="c", inputs=Inputs(offsets=url), output=Output(root=str(tmp_path))))
    with pytest.raises(InputError, match="does not exist"):
        cli_mod._check_inputs(Config(cluster="c", inputs=Inputs(offsets=str(tmp_path / "nowhere")),
                                     output=Output(root=str(tmp_path))))


def test_decode_of_a_file_that_is_no_parquet_dump_says_what_was_expected(runner: CliRunner, tmp_path: Path) -> None:
    """A garbage ``.parquet`` exited 3 with pyarrow's bare "Parquet magic bytes not found in footer…" (no file named),
    a Parquet file without key/value columns printed one "record has no key" row per row, and a damaged row group
    ended decoding with pyarrow's exception: each is now an error line saying what was expected, as the run
    quarantines it, and the file's rows before a damaged row group are printed."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    garbage = tmp_path / "dump.parquet"
    garbage.write_bytes(b"not parquet at all")
    res = runner.invoke(cli, ["decode", str(garbage)])
    assert res.exit_code == EXIT_INPUT and res.stdout.startswith('{"type":"error"'), res.output
    row = json.loads(res.stdout)
    assert (row["type"], row["unit"], row["position"]) == ("error", "file", 0)
    assert row["reason"].startswith("not a readable key/value Parquet dump (expected Parquet with key and value "
                                    "columns, as Spark's Kafka source writes): Parquet magic bytes not found")
    assert res.stderr.count("\n") == 1 and f"nothing decoded from {garbage}: " in res.stderr and row["reason"] in res.stderr

    other = tmp_path / "other.parquet"
    pq.write_table(pa.table({"a": [1, 2]}), other)
    res = runner.invoke(cli, ["decode", str(other)])
    assert res.exit_code == EXIT_INPUT and json.loads(res.stdout)["reason"].endswith(": no key/value columns (has a)")

    key = coordinator.encode_offset_commit_key("g", "orders", 3)
    value = coordinator.encode_offset_commit_value(42, leader_epoch=5, commit_timestamp=1_700_000_000_000)
    dump = tmp_path / "two-groups.parquet"
    pq.write_table(pa.table({"key": [key] * 20, "value": [value] * 20, "offset": list(range(20))}), dump,
                   row_group_size=10)
    data = bytearray(dump.read_bytes())
    at = pq.ParquetFile(dump).metadata.row_group(1).column(0).data_page_offset
    data[at + 20:at + 200] = b"\xff" * 180  # the second row group's first page
    dump.write_bytes(bytes(data))
    res = runner.invoke(cli, ["decode", str(dump)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert [r["type"] for r in rows] == ["record"] * 10 + ["error"]
    assert rows[-1]["position"] == 10 and rows[-1]["reason"].startswith("unreadable Parquet data after row 10: ")


def test_decode_of_a_pcap_prints_its_capture_times_as_iso_to_the_microsecond(runner: CliRunner, tmp_path: Path) -> None:
    """A capture JSONL line's ``ts`` is printed as the line spells it (ISO-8601), a pcap's was float seconds
    (``1709510594.956123``): the same field now reads the same way, in UTC to the capture's microsecond; a packet time
    no date can hold is an error line, as the run quarantines that frame."""
    from test_pcap import _capture, metadata_request, metadata_response

    c, b = ("10.0.0.9", 50001), ("10.0.0.1", 9092)
    p = tmp_path / "cap.pcapng"
    p.write_bytes(_capture([(1_709_510_594.000001, *c, *b, metadata_request(1, 7)),
                            (1_709_510_594.956123, *b, *c, metadata_response(1, 7)),
                            (1_709_510_595.0, *c, *b, metadata_request(1, 8)),
                            (1e12, *b, *c, metadata_response(1, 8))], pcapng=True))  # 64-bit times
    res = runner.invoke(cli, ["decode", str(p)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.stdout.splitlines()]
    assert rows[0]["ts"] == "2024-03-04T00:03:14.956123Z"
    assert [r["type"] for r in rows] == ["metadata_observation"] * 3 + ["error"]
    assert {r["ts"] for r in rows[:3]} == {"2024-03-04T00:03:14.956123Z"}
    assert dt.datetime.fromisoformat(rows[0]["ts"]) == dt.datetime(2024, 3, 4, 0, 3, 14, 956123, tzinfo=dt.timezone.utc)
    assert rows[3]["unit"] == "frame" and rows[3]["reason"].startswith("capture time 1000000000000.0 is outside ")
