"""Nightly operations through the CLI (click's runner), without Spark: flags-only runs never touch the
demo, `report`/`findings` on missing or unreachable tables exit 3, `--fail-on`, the findings listing in
three formats, `init`, the simulate hint, and the exit codes in `--help`."""

from __future__ import annotations

import csv
import datetime as dt
import io
import json
import shlex
import shutil
import socket
from pathlib import Path

import pyarrow as pa
import pytest
from click.testing import CliRunner

from jobs import cli as cli_mod
from jobs import schemas
from jobs.cli import EXIT_FINDINGS, EXIT_INPUT, EXIT_SINK, EXIT_USAGE, cli
from jobs.config import Config, Output, load_config
from jobs.runlog import RunContext, audit_run_table
from jobs.sink import write_small

DAY = dt.date(2024, 3, 1)
TS = dt.datetime(2024, 3, 1, 1, tzinfo=dt.timezone.utc)


@pytest.fixture
def runner() -> CliRunner:
    return CliRunner()


def _finding(table: str, **values) -> dict:
    row = {f.name: None for f in schemas.arrow_schema(table)}
    row.update({"cluster": "c1", "event_date": DAY, "event_ts": TS, "evidence": ["x"], **values})
    return row


def write_findings(root: Path, cluster: str = "c1", group2: str = "g2") -> None:
    """Two report tables with three findings, and an audit_runs row for ``cluster``."""
    config = Config(cluster=cluster, output=Output(root=str(root)))
    resets = [
        _finding("spurious_offset_resets", finding_id="r1", rule="S1e", kind="spurious_rewind", severity="error",
                 topic="orders", partition=0, group_id="g1", records_reread=1200),
        _finding("spurious_offset_resets", finding_id="r2", rule="S1b", kind="operator_reset", severity="info",
                 topic="orders", partition=1, group_id=group2),
    ]
    stale = [_finding("stale_metadata", finding_id="m1", rule="M2", kind="broker_served_stale", severity="warning",
                      topic="orders", partition=0, broker="2", client_id="app", staleness_ms=4500)]
    for table, rows in (("spurious_offset_resets", resets), ("stale_metadata", stale)):
        rows = [{**r, "cluster": cluster} for r in rows]
        write_small(pa.Table.from_pylist(rows, schema=schemas.arrow_schema(table)), table, config=config,
                    date_range=(DAY, DAY))
    run = RunContext.start(config, DAY)
    write_small(audit_run_table(run, []), "audit_runs", config=config, mode="append")


# ------------------------------------------------------------------------------------ run without --conf


def test_run_without_conf_requires_cluster_and_output_root(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["run", "--from", "2024-03-01", "--offsets", str(tmp_path)])
    assert res.exit_code == EXIT_USAGE
    assert res.output.strip().splitlines() == [res.output.strip()]  # one line
    assert "--cluster and --output-root" in res.output and "--conf" in res.output
    res = runner.invoke(cli, ["run", "--from", "2024-03-01", "--offsets", str(tmp_path), "--cluster", "c1"])
    assert res.exit_code == EXIT_USAGE and "needs --output-root" in res.output


def test_run_without_conf_uses_only_the_flags(runner: CliRunner, tmp_path: Path, monkeypatch) -> None:
    """The demo's log dirs, captures and tables never leak into a flags-only run (issue 14.1)."""
    seen = {}

    def fake_run_audit(spark, config, start, end, **kwargs):
        seen["config"] = config
        raise cli_mod.ConfigError("stop here")

    monkeypatch.setattr("jobs.audit.run_audit", fake_run_audit)
    monkeypatch.setattr(cli_mod, "_session", lambda config, **kw: None)
    (tmp_path / "offsets").mkdir()
    res = runner.invoke(cli, ["run", "--from", "2024-03-01", "--offsets", str(tmp_path / "offsets"),
                              "--output-root", str(tmp_path / "out"), "--cluster", "prod-1"])
    assert res.exit_code == EXIT_USAGE and "stop here" in res.output
    config = seen["config"]
    assert config.inputs.offsets == str(tmp_path / "offsets")
    assert config.inputs.logdirs is None and config.inputs.metadata is None
    assert config.output.root == str(tmp_path / "out") and config.cluster == "prod-1"
    assert "demo" not in repr(config)


def test_summary_json_carries_the_run_s_lookback_warnings(runner: CliRunner, tmp_path: Path, monkeypatch) -> None:
    """What the terminal prints as "warning: lookback: ..." (also under -q) reaches --summary-json too."""
    from jobs.audit import AuditResult

    gap = ("lookback: no offset_commits rows dated 2024-02-29..2024-02-29 in the inputs or earlier runs; F4, S1/S2 "
           "(each group's previous commit and pace) started at 2024-03-01 without state from before it")
    write_findings(tmp_path / "t")

    def fake_run_audit(spark, config, start, end, **kwargs):
        kwargs["warn"](gap)  # as the run meets it
        return AuditResult(run=RunContext.start(config, start), warnings=[gap], timings={"total": 1.5})

    monkeypatch.setattr("jobs.audit.run_audit", fake_run_audit)
    monkeypatch.setattr(cli_mod, "_session", lambda config, **kw: None)
    (tmp_path / "offsets").mkdir()
    res = runner.invoke(cli, ["run", "--from", "2024-03-01", "--offsets", str(tmp_path / "offsets"), "--output-root",
                              str(tmp_path / "t"), "--cluster", "c1", "-q", "--summary-json", str(tmp_path / "s.json")])
    assert res.exit_code == 0, res.output
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["warnings"] == [gap] and doc["duration_s"] == 1.5
    assert res.output.count(f"warning: {gap}") == 1  # -q drops progress lines, not warnings


def test_warnings_are_stamped_on_the_progress_lines_clock(capsys) -> None:
    import time

    warn = cli_mod._warner(seen := [], time.monotonic() - 65)
    warn("workers too small")
    assert capsys.readouterr().err == "[01:05] warning: workers too small\n" and seen == ["workers too small"]


def test_accuracy_prints_a_run_s_warnings_under_quiet(runner: CliRunner, tmp_path: Path, monkeypatch) -> None:
    def fake_run_accuracy(names, out, **kwargs):
        kwargs["warn"]("demo: workers too small")
        return []

    monkeypatch.setattr("jobs.accuracy.run_accuracy", fake_run_accuracy)
    res = runner.invoke(cli, ["accuracy", "--presets", "demo", "--out", str(tmp_path / "acc"), "-q"])
    assert "warning: demo: workers too small" in res.output


def test_simulate_hint_is_a_complete_safe_command(runner: CliRunner, tmp_path: Path) -> None:
    out = tmp_path / "my sim"
    res = runner.invoke(cli, ["simulate", "--preset", "demo", "--out", str(out), "--commits", "50"])
    assert res.exit_code == 0, res.output
    hint = next(line for line in res.output.splitlines() if line.startswith("audit it: "))
    argv = shlex.split(hint.removeprefix("audit it: "))
    assert argv[:2] == ["epoch-audit", "run"]
    flags = dict(zip(argv[2::2], argv[3::2], strict=True))
    assert flags["--offsets"] == str(out / "offsets") and Path(flags["--offsets"]).is_dir()
    # every input the simulator wrote, the metadata log included (the hint left it out)
    assert {k for k in flags if Path(flags[k]).is_dir() and Path(flags[k]).parent == out} == {
        "--offsets", "--logdirs", "--metadata", "--cluster-metadata"}
    assert any(Path(flags["--cluster-metadata"]).glob("*/__cluster_metadata-0/*.log"))
    assert flags["--output-root"] == str(out / "tables") and flags["--cluster"]
    assert "--conf" not in flags and "epoch-audit-demo" not in hint
    # the summary is lines, not one line with literal "\n" escapes (printable() escaped the newlines between them)
    assert "\\n" not in res.output
    assert any(line.startswith("  ground truth: ") for line in res.output.splitlines())


# ------------------------------------------------------------------------------ report / findings: exit 3


def test_report_on_a_missing_root_is_exit_3_one_line(runner: CliRunner, tmp_path: Path) -> None:
    res = runner.invoke(cli, ["report", "--from", "2024-03-01", "--output-root", str(tmp_path / "nope"),
                              "--cluster", "c1"])
    assert res.exit_code == EXIT_INPUT
    assert len(res.output.strip().splitlines()) == 1 and "no report tables" in res.output


def test_report_on_an_unknown_cluster_is_exit_3(runner: CliRunner, tmp_path: Path) -> None:
    write_findings(tmp_path / "t")
    res = runner.invoke(cli, ["report", "--from", "2024-03-01", "--output-root", str(tmp_path / "t"),
                              "--cluster", "c2"])
    assert res.exit_code == EXIT_INPUT
    assert "no run of cluster 'c2'" in res.output and "c1" in res.output


@pytest.mark.parametrize("command", ["report", "findings"])
def test_report_tables_without_a_finished_run_are_exit_3_not_findings(runner: CliRunner, tmp_path: Path,
                                                                       command: str) -> None:
    """A first run killed during its reports leaves report tables but no audit_runs row: what they hold is
    not a finished run's result, and any cluster name would have read as "no findings"."""
    write_findings(tmp_path / "t")
    shutil.rmtree(tmp_path / "t" / "audit_runs")
    for cluster in ("c1", "typo"):
        res = runner.invoke(cli, [command, "--from", "2024-03-01", "--output-root", str(tmp_path / "t"),
                                  "--cluster", cluster])
        assert res.exit_code == EXIT_INPUT, res.output
        assert f"no run of cluster '{cluster}'" in res.output and "no run finished there" in res.output


def test_reports_only_and_report_for_a_mistyped_cluster_exit_3_before_spark_starts(
        runner: CliRunner, tmp_path: Path, monkeypatch) -> None:
    """`run --reports-only --cluster <typo>` said so (exit 3) only after seconds of JVM start: the silver tables and
    audit_runs are read without Spark, so the typo is said before it starts (the failed run's JSON still written)."""
    write_findings(tmp_path / "t")
    config = Config(cluster="c1", output=Output(root=str(tmp_path / "t")))
    commit = {f.name: None for f in schemas.arrow_schema("offset_commits")}
    commit.update(cluster="c1", event_date=DAY, group_id="g1", topic="orders", partition=0, committed_offset=5,
                  commit_ts=TS, event_ts=TS, source_kind="segment", source="offsets/x.log", position=0)
    write_small(pa.Table.from_pylist([commit], schema=schemas.arrow_schema("offset_commits")), "offset_commits",
                config=config, date_range=(DAY, DAY))

    def no_spark(*_args, **_kwargs):
        raise AssertionError("Spark started")

    monkeypatch.setattr(cli_mod, "_session", no_spark)
    res = runner.invoke(cli, ["run", "--from", "2024-03-01", "--reports-only", "--output-root", str(tmp_path / "t"),
                              "--cluster", "c2", "-q", "--summary-json", str(tmp_path / "s.json")])
    assert res.exit_code == EXIT_INPUT, res.output
    assert res.stderr.strip() == (f"epoch-audit: error: --reports-only: no run of cluster 'c2' at {tmp_path / 't'}/ "
                                  "(clusters there: c1)")
    doc = json.loads((tmp_path / "s.json").read_text())
    assert (doc["status"], doc["exit_code"]) == ("failed", EXIT_INPUT) and "no run of cluster 'c2'" in doc["error"]
    res = runner.invoke(cli, ["report", "--from", "2024-03-01", "--output-root", str(tmp_path / "t"),
                              "--cluster", "c2", "--html", str(tmp_path / "r.html"), "--partition", "orders:0"])
    assert res.exit_code == EXIT_INPUT and "no run of cluster 'c2'" in res.stderr, res.output
    res = runner.invoke(cli, ["run", "--from", "2024-03-01", "--reports-only", "--output-root", str(tmp_path / "t"),
                              "--cluster", "c1", "-q"])  # the cluster that is there: on to Spark
    assert res.exit_code == 1 and "AssertionError: Spark started" in res.stderr, res.output
    # catalog tables (Databricks) cannot be read without Spark: no verdict here, Spark's reading decides
    from jobs.audit import SILVER_BY_SOURCE, reports_only_sources

    catalog = Config(cluster="any-typo", output=Output(catalog="main", schema="audit"))
    assert reports_only_sources(catalog) == list(SILVER_BY_SOURCE)


def test_report_on_an_unreachable_store_is_cannot_reach_not_no_table(runner: CliRunner, tmp_path: Path) -> None:
    conf = tmp_path / "s3.toml"
    conf.write_text('cluster = "c1"\n[output]\nroot = "s3://audit-bucket/epoch"\n[output.storage_options]\n'
                    'AWS_ENDPOINT_URL = "http://127.0.0.1:9"\nAWS_ALLOW_HTTP = "true"\nAWS_REGION = "us-east-1"\n'
                    'AWS_ACCESS_KEY_ID = "x"\nAWS_SECRET_ACCESS_KEY = "y"\nmax_retries = "0"\n')
    res = runner.invoke(cli, ["report", "--conf", str(conf), "--from", "2024-03-01"])
    assert res.exit_code == EXIT_INPUT, res.output
    assert "cannot reach s3://audit-bucket/epoch/" in res.output and "no table" not in res.output
    assert len(res.output.strip().splitlines()) == 1


def _damage(root: Path, how: str) -> str:
    """Damage one table under ``root`` as a disk, a copy or a person can; returns the table's name."""
    log = root / ("audit_runs" if how == "missing checkpoint" else "stale_metadata") / "_delta_log"
    first = log / "00000000000000000000.json"
    if how == "garbage commit":
        first.write_text("garbage\n")
    elif how == "truncated commit":
        last = sorted(log.glob("*.json"))[-1]
        last.write_bytes(last.read_bytes()[:100])
    elif how == "missing checkpoint":  # _last_checkpoint names a checkpoint that is not there
        (log / "_last_checkpoint").write_text('{"version":0,"size":3}')
    else:  # a data file the log names, deleted
        next(log.parent.rglob("*.parquet")).unlink()
    return log.parent.name


@pytest.mark.parametrize("how", ["garbage commit", "truncated commit", "missing checkpoint", "missing data file"])
@pytest.mark.parametrize("command", ["report", "findings"])
def test_a_table_that_is_there_but_cannot_be_read_is_exit_4_naming_it(runner: CliRunner, tmp_path: Path,
                                                                      command: str, how: str) -> None:
    """A damaged Delta log read as "cannot reach …" (exit 3, a store problem), a missing data file as an unexpected
    failure (exit 1), and a damaged audit_runs was skipped (a mistyped cluster then read as "no findings"): a table
    that is there but cannot be read is exit 4, one line naming the table and the reason (README's exit codes)."""
    write_findings(tmp_path / "t")
    table = _damage(tmp_path / "t", how)
    res = runner.invoke(cli, [command, "--from", "2024-03-01", "--output-root", str(tmp_path / "t"), "--cluster", "c1"])
    assert res.exit_code == EXIT_SINK, res.output
    assert res.stderr.count("\n") == 1 and res.stdout == ""
    assert res.stderr.startswith(f"epoch-audit: error: table {table} at {tmp_path / 't' / table} cannot be read: ")
    assert "cannot reach" not in res.stderr
    # deltalake's own words differ between releases (1.0: "Encountered unexpected 'g' …", later: "Kernel error: Json
    # error …"): the line ends saying what is damaged either way
    assert res.stderr.endswith("(its Delta log, or a data file the log names, is damaged or missing)\n"), res.stderr
    if how == "missing data file":
        assert "FileNotFoundError: " in res.stderr


def test_report_summary_names_subjects_and_fail_on(runner: CliRunner, tmp_path: Path) -> None:
    write_findings(tmp_path / "t")
    base = ["report", "--from", "2024-02-29", "--to", "2024-03-01", "--output-root", str(tmp_path / "t"),
            "--cluster", "c1"]
    res = runner.invoke(cli, base)
    assert res.exit_code == 0, res.output
    assert "error    S1e spurious_rewind: orders-0, group g1 (1,200 records re-read)" in res.output
    assert "warning  M2 broker_served_stale: orders-0, broker 2, client app (4,500 ms stale)" in res.output
    # 02-29 is no "0": no run covered it
    assert "2024-02-29  not audited" in res.output and "2024-03-01       3  (1 error, 1 warning, 1 info)" in res.output
    assert "  Status: ok (audit_runs: 1 run last covered the range)" in res.output
    assert "  not audited (no finished run covers them): 2024-02-29" in res.output
    assert runner.invoke(cli, [*base, "--fail-on", "critical"]).exit_code == 0
    assert runner.invoke(cli, [*base, "--fail-on", "error"]).exit_code == EXIT_FINDINGS


@pytest.mark.parametrize("command", ["report", "findings", "findings --format json"])
def test_report_of_a_range_no_run_covered_is_exit_3_not_no_findings(runner: CliRunner, tmp_path: Path,
                                                                    command: str) -> None:
    """A date typo (or a range nobody audited) must not read as "no findings": `findings` printed an empty listing
    and exited 0 where `report` said so (exit 3); both now say it in the same line. A range that a run covers in part
    is listed (exit 0)."""
    write_findings(tmp_path / "t")
    where = ["--output-root", str(tmp_path / "t"), "--cluster", "c1"]
    res = runner.invoke(cli, [*command.split(), "--from", "2024-07-03", "--to", "2024-07-05", *where])
    assert res.exit_code == EXIT_INPUT, res.output
    assert res.stderr == (f"epoch-audit: error: no finished run of cluster 'c1' covers 2024-07-03 .. 2024-07-05 at "
                          f"{tmp_path / 't'}/ (`epoch-audit run` that range first)\n")
    assert res.stdout == ""
    res = runner.invoke(cli, [*command.split(), "--from", "2024-02-29", "--to", "2024-03-01", *where])
    assert res.exit_code == 0 and "S1e" in res.stdout, res.output
    # the days of it no run covered are said, as `report` lists them (findings: on stderr, so that json/csv stay
    # records): a listing of the covered days alone read as "no findings" on the rest
    assert "not audited (no finished run covers them): 2024-02-29" in (res.stdout if command == "report"
                                                                        else res.stderr), res.output


def test_report_prints_the_runs_status_days_without_input_and_quarantine(runner: CliRunner, tmp_path: Path) -> None:
    """What `run` printed at the end (status, days without rows, quarantined units) is what `report` prints of
    the same range later, from audit_runs; a later run of a day replaces an earlier one's word on it."""
    from jobs.runlog import SourceCounts, SourceStatus

    write_findings(tmp_path / "t")
    config = Config(cluster="c1", output=Output(root=str(tmp_path / "t")))
    run = RunContext.start(config, DAY, DAY + dt.timedelta(days=1))
    counts = [SourceCounts("logdirs", "file", 9, 1, 9), SourceCounts("offsets", "batch", 5, 0, 5)]
    sources = {"logdirs": SourceStatus("logdirs", "partial", 10, 9, 1, 9, (DAY + dt.timedelta(days=1),)),
               "offsets": SourceStatus("offsets", "ok", 5, 5, 0, 5)}
    write_small(audit_run_table(run, counts, status="partial", sources=sources), "audit_runs", config=config,
                mode="append")
    res = runner.invoke(cli, ["report", "--from", "2024-02-28", "--to", "2024-03-03", "--output-root",
                              str(tmp_path / "t"), "--cluster", "c1", "--html", str(tmp_path / "r.html")])
    assert res.exit_code == 0, res.output
    page = (tmp_path / "r.html").read_text()  # the page says it too, under the counts
    assert "Status of the runs that last covered the range" in page and "<strong>partial</strong>" in page
    assert "Not audited (no finished run covers them, so no findings is no verdict): 2024-02-28 .. 2024-02-29, " \
           "2024-03-03." in page and "input logdirs: no snapshots taken on 2024-03-02." in page
    assert "  Status: partial (audit_runs: 1 run last covered the range)" in res.output
    assert "  not audited (no finished run covers them): 2024-02-28 .. 2024-02-29, 2024-03-03" in res.output
    assert "  input logdirs: no snapshots taken on 2024-03-02" in res.output  # as `run` said it
    assert f"  input logdirs: quarantined 1 file in run {run.run_id} (the quarantine table)" in res.output
    assert "input offsets" not in res.output


def test_report_of_a_long_range_lists_only_days_with_findings(runner: CliRunner, tmp_path: Path) -> None:
    write_findings(tmp_path / "t")
    res = runner.invoke(cli, ["report", "--from", "2000-01-01", "--to", "2024-12-31", "--output-root",
                              str(tmp_path / "t"), "--cluster", "c1"])
    assert res.exit_code == 0, res.output
    assert len(res.output.splitlines()) < 60
    assert "2024-03-01       3" in res.output


def _write_findings_and_lineage(root: Path) -> None:
    """:func:`write_findings`, plus one broker's lineage snapshot of ``orders-0`` on DAY."""
    write_findings(root)
    config = Config(cluster="c1", output=Output(root=str(root)))
    lineage = {f.name: None for f in schemas.arrow_schema("epoch_lineage")}
    lineage.update(cluster="c1", event_date=DAY, broker=1, snapshot_ts=TS, topic="orders", partition=0,
                   entries=[{"epoch": 0, "start_offset": 0}], source="broker=1/orders-0/leader-epoch-checkpoint")
    write_small(pa.Table.from_pylist([lineage], schema=schemas.arrow_schema("epoch_lineage")), "epoch_lineage",
                config=config, date_range=(DAY, DAY))


def test_report_partition_that_is_not_there_says_so_exit_3(runner: CliRunner, tmp_path: Path) -> None:
    _write_findings_and_lineage(tmp_path / "t")
    base = ["report", "--from", "2024-03-01", "--output-root", str(tmp_path / "t"), "--cluster", "c1",
            "--html", str(tmp_path / "r.html")]
    res = runner.invoke(cli, [*base, "--partition", "orders:0"])
    assert res.exit_code == 0, res.output
    assert res.stderr == ""
    res = runner.invoke(cli, [*base, "--partition", "orders:0", "--partition", "nosuch:9"])
    assert res.exit_code == EXIT_INPUT, res.output
    assert res.stderr.strip().splitlines() == [
        "epoch-audit: error: --partition nosuch:9: no snapshot in epoch_lineage for 2024-03-01 .. 2024-03-01, "
        "nothing drawn (the rest of the report is written)"]
    assert "no snapshots of <code>nosuch-9</code>" in (tmp_path / "r.html").read_text()


@pytest.mark.parametrize("html", [False, True])
def test_report_partition_whose_lineage_table_cannot_be_read_is_exit_4_not_no_snapshot(
        runner: CliRunner, tmp_path: Path, html: bool) -> None:
    """A damaged `epoch_lineage` read as "no snapshot in epoch_lineage" (exit 3: a typo's message), or, in the HTML
    page's automatic lineage, as none: it is exit 4 naming the table, as for the report tables."""
    _write_findings_and_lineage(tmp_path / "t")
    (tmp_path / "t" / "epoch_lineage" / "_delta_log" / "00000000000000000000.json").write_text("garbage\n")
    flags = ["--html", str(tmp_path / "r.html")] if html else ["--partition", "orders:0"]
    res = runner.invoke(cli, ["report", "--from", "2024-03-01", "--output-root", str(tmp_path / "t"), "--cluster", "c1",
                              *flags])
    assert res.exit_code == EXIT_SINK, res.output
    assert res.stderr.startswith(f"epoch-audit: error: table epoch_lineage at {tmp_path / 't' / 'epoch_lineage'} "
                                 "cannot be read: ") and res.stderr.count("\n") == 1
    assert res.stderr.endswith("(its Delta log, or a data file the log names, is damaged or missing)\n")


def test_report_partition_without_html_prints_its_findings_and_lineage(runner: CliRunner, tmp_path: Path) -> None:
    """`--partition` without `--html` was silently ignored: the operator asked for a partition and got nothing."""
    write_findings(tmp_path / "t")
    config = Config(cluster="c1", output=Output(root=str(tmp_path / "t")))
    lineage = []
    for broker, entries in ((1, [(0, 0), (3, 1200)]), (2, [(0, 0), (2, 1100)])):
        row = {f.name: None for f in schemas.arrow_schema("epoch_lineage")}
        row.update(cluster="c1", event_date=DAY, broker=broker, snapshot_ts=TS, topic="orders", partition=0,
                   entries=[{"epoch": e, "start_offset": o} for e, o in entries], log_start_offset=0,
                   high_watermark=1500, log_end_offset=1500, source=f"broker={broker}/orders-0/leader-epoch-checkpoint")
        lineage.append(row)
    write_small(pa.Table.from_pylist(lineage, schema=schemas.arrow_schema("epoch_lineage")), "epoch_lineage",
                config=config, date_range=(DAY, DAY))
    base = ["report", "--from", "2024-03-01", "--output-root", str(tmp_path / "t"), "--cluster", "c1"]
    res = runner.invoke(cli, [*base, "--partition", "orders:0"])
    assert res.exit_code == 0, res.output
    assert res.stderr == ""
    section = res.stdout.split("Partition orders-0, 2024-03-01 .. 2024-03-01:\n", 1)[1].splitlines()
    assert section[0] == "  findings (2):"
    assert section[1].startswith("    error    2024-03-01 01:00:00  S1e spurious_rewind")
    assert section[2].startswith("    warning  2024-03-01 01:00:00  M2 broker_served_stale")
    assert "    2024-03-01 01:00:00  broker 1  0@0 3@1,200  log start 0, hw 1,500, log end 1,500" in section
    assert "    2024-03-01 01:00:00  broker 2  0@0 2@1,100  log start 0, hw 1,500, log end 1,500" in section
    assert any(line.startswith("  divergence at 2024-03-01 01:00:00: offsets 1,100–1,199") for line in section)
    assert "orders-1" not in res.stdout.split("Partition orders-0", 1)[1]  # only the partition asked for
    res = runner.invoke(cli, [*base, "--partition", "orders:0", "--partition", "nosuch:9"])
    assert res.exit_code == EXIT_INPUT, res.output
    assert "Partition nosuch-9, 2024-03-01 .. 2024-03-01:\n  findings (0)\n  lineage: no snapshot of it" in res.stdout
    assert res.stderr.strip().splitlines() == [
        "epoch-audit: error: --partition nosuch:9: no snapshot in epoch_lineage for 2024-03-01 .. 2024-03-01, "
        "no lineage shown (the rest of the report is printed)"]
    # with --fail-on and findings at that severity, the findings decide the exit (a scheduled report alerts on
    # them; a deployment without log dirs has no lineage for any partition): 5, the partition still said
    res = runner.invoke(cli, [*base, "--partition", "nosuch:9", "--fail-on", "warning"])
    assert res.exit_code == EXIT_FINDINGS, res.output
    assert "epoch-audit: error: --partition nosuch:9: no snapshot in epoch_lineage" in res.stderr


def test_findings_in_three_formats(runner: CliRunner, tmp_path: Path) -> None:
    write_findings(tmp_path / "t")
    base = ["findings", "--from", "2024-03-01", "--output-root", str(tmp_path / "t"), "--cluster", "c1"]
    res = runner.invoke(cli, [*base, "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = [json.loads(line) for line in res.stdout.splitlines()]
    assert [r["finding_id"] for r in rows] == ["r1", "m1", "r2"]  # most severe first
    assert rows[0]["subject"] == "orders-0, group g1" and rows[0]["event_ts"].startswith("2024-03-01T01:00")
    res = runner.invoke(cli, [*base, "--format", "csv", "--severity", "warning"])
    table = list(csv.DictReader(io.StringIO(res.stdout)))
    assert [r["finding_id"] for r in table] == ["r1", "m1"] and table[1]["units"] == "4,500 ms stale"
    res = runner.invoke(cli, [*base, "--severity", "error"])
    assert res.exit_code == 0
    assert "S1e" in res.stdout and "M2" not in res.stdout and "1,200 records re-read" in res.stdout
    missing = runner.invoke(cli, ["findings", "--from", "2024-03-01", "--output-root", str(tmp_path / "x"),
                                  "--cluster", "c1"])
    assert missing.exit_code == EXIT_INPUT


def test_findings_json_and_csv_export_every_column_of_the_findings(runner: CliRunner, tmp_path: Path) -> None:
    """An operator exporting findings during an incident needs what the tables hold beyond the table view: the
    evidence, the topic id, the correlation ids, the report's own numbers (a review found json/csv without them)."""
    write_findings(tmp_path / "t")
    config = Config(cluster="c1", output=Output(root=str(tmp_path / "t")))
    stale = [_finding("stale_metadata", finding_id="m1", rule="M2", kind="broker_served_stale", severity="warning",
                      topic="orders", topic_id="AAAAAAAAAAAAAAAAAAAAAQ", partition=0, broker="2", client_id="app",
                      staleness_ms=4500, correlation_id=77, correlated_finding_id="f9", served_epoch=3, cached_epoch=4,
                      evidence=["metadata/cap.pcap@1234", "logdirs/broker=2/orders-0/leader-epoch-checkpoint"])]
    write_small(pa.Table.from_pylist(stale, schema=schemas.arrow_schema("stale_metadata")), "stale_metadata",
                config=config, date_range=(DAY, DAY))
    base = ["findings", "--from", "2024-03-01", "--output-root", str(tmp_path / "t"), "--cluster", "c1"]
    res = runner.invoke(cli, [*base, "--format", "json"])
    assert res.exit_code == 0, res.output
    rows = {r["finding_id"]: r for r in map(json.loads, res.stdout.splitlines())}
    m1 = rows["m1"]
    assert m1["evidence"] == ["metadata/cap.pcap@1234", "logdirs/broker=2/orders-0/leader-epoch-checkpoint"]
    assert (m1["topic_id"], m1["correlation_id"], m1["correlated_finding_id"]) == ("AAAAAAAAAAAAAAAAAAAAAQ", 77, "f9")
    assert (m1["served_epoch"], m1["cached_epoch"], m1["staleness_ms"], m1["run_id"]) == (3, 4, 4500, None)
    assert m1["subject"] == "orders-0, broker 2, client app" and m1["event_ts"].startswith("2024-03-01T01:00")
    assert rows["r1"]["records_reread"] == 1200 and "cause_finding_id" in rows["r1"]
    assert list(rows["r1"]) == list(m1) and m1["records_reread"] is None  # one key set whatever the report (jq)
    res = runner.invoke(cli, [*base, "--format", "csv"])
    assert res.exit_code == 0, res.output
    table = list(csv.DictReader(io.StringIO(res.stdout)))
    header = next(csv.reader(io.StringIO(res.stdout)))
    for column in ("evidence", "topic_id", "correlation_id", "correlated_finding_id", "cause_finding_id",
                   "records_reread", "staleness_ms", "expected_epoch"):  # every report's columns, found or not
        assert column in header, column
    m1 = next(r for r in table if r["finding_id"] == "m1")
    assert json.loads(m1["evidence"]) == ["metadata/cap.pcap@1234", "logdirs/broker=2/orders-0/leader-epoch-checkpoint"]
    assert (m1["topic_id"], m1["correlation_id"], m1["correlated_finding_id"]) == ("AAAAAAAAAAAAAAAAAAAAAQ", "77", "f9")
    assert next(r for r in table if r["finding_id"] == "r1")["correlation_id"] == ""  # not a stale_metadata column
    res = runner.invoke(cli, base)  # the table stays what it was: six columns
    assert res.stdout.splitlines()[0].split() == ["event_ts", "severity", "rule", "kind", "subject", "units"]
    assert "AAAAAAAAAAAAAAAAAAAAAQ" not in res.stdout


def test_findings_and_report_print_a_hostile_group_id_escaped(runner: CliRunner, tmp_path: Path) -> None:
    """A group id is any string a client chose: the terminal gets its escape sequences and newlines shown, not acted
    on (a review saw OSC titles, hyperlinks and screen clears reach a terminal, and a forged line)."""
    hostile = "g2\x1b]0;PWNED\x07\x1b]8;;http://x\x07link\x1b]8;;\x07\nStatus: ok"
    write_findings(tmp_path / "t", group2=hostile)
    base = ["--from", "2024-03-01", "--output-root", str(tmp_path / "t"), "--cluster", "c1"]
    for cmd in (["findings"], ["report"]):
        res = runner.invoke(cli, [*cmd, *base])
        assert res.exit_code == 0, res.output
        assert "\x1b" not in res.output and "\nStatus: ok" not in res.output, cmd
        assert "g2\\x1b]0;PWNED\\x07" in res.output, cmd
    res = runner.invoke(cli, ["findings", *base, "--format", "json"])
    assert any(json.loads(line)["group_id"] == hostile for line in res.stdout.splitlines())  # data stays data


# ------------------------------------------------------------------------------------- init and help


def test_init_writes_a_commented_config_that_loads(runner: CliRunner, tmp_path: Path) -> None:
    target = tmp_path / "prod.toml"
    res = runner.invoke(cli, ["init", str(target)])
    assert res.exit_code == 0, res.output
    text = target.read_text()
    assert text.count("\n#") > 10 and 'cluster = "prod-eu1"' in text
    assert load_config(target).cluster == "prod-eu1"
    again = runner.invoke(cli, ["init", str(target), "--example", "databricks"])
    assert again.exit_code == EXIT_USAGE and "--force" in again.output
    assert runner.invoke(cli, ["init", str(target), "--example", "databricks", "--force"]).exit_code == 0
    assert load_config(target).output.catalog == "kafka"


def test_run_help_documents_exit_codes_and_statuses(runner: CliRunner) -> None:
    res = runner.invoke(cli, ["run", "--help"])
    assert res.exit_code == 0
    for needle in ("0  ok", "2  usage", "3  an input path", "4  a table", "5  --fail-on", "6  --fail-on-no-input",
                   "7  another run of the cluster",
                   "partial", "no_input", "failed", "--summary-json", "--metrics-file"):
        assert needle in res.output, needle


def test_a_demo_running_in_the_folder_refuses_a_second_one_before_anything_is_deleted(tmp_path) -> None:
    """Two `epoch-audit demo --out X` at once: the second deleted the first's inputs and tables, then both ran (the
    first then found 595 findings, 593 of them L1, instead of 66). The running demo's lease refuses it (exit 7)."""
    import os

    from jobs.cli import EXIT_LEASE_HELD
    from jobs.config import default_config

    root = tmp_path / "epoch-audit-demo"
    (root / "inputs" / "offsets").mkdir(parents=True)
    (root / "inputs" / "truth.jsonl").write_text("{}\n")
    lease = root / "tables" / "_run_leases" / f"{default_config().cluster}.lease"
    lease.parent.mkdir(parents=True)
    lease.write_text(json.dumps({
        "run": "first-demo", "host": socket.gethostname(), "pid": os.getppid(),
        "pidns": os.readlink("/proc/self/ns/pid") if os.path.exists("/proc/self/ns/pid") else "",
        "started": "2024-03-02T02:00:00+00:00", "heartbeat": dt.datetime.now(dt.timezone.utc).isoformat(),
        "lease_seconds": 600}))
    res = CliRunner().invoke(cli, ["demo", "--out", str(root), "--quiet"])
    assert res.exit_code == EXIT_LEASE_HELD, res.output
    assert "is writing to this output root: run first-demo" in res.output
    assert (root / "inputs" / "truth.jsonl").is_file() and lease.is_file()  # the running demo's files stay


def test_a_demo_stopped_while_it_simulated_is_replaced_by_the_next(tmp_path, monkeypatch) -> None:
    """Ctrl-C during the simulation left inputs/ without truth.jsonl (and tables/ from the lease): the next demo
    refused the folder as "files an earlier demo did not write", and the user had to delete it by hand."""
    from epochlib import sim

    root = tmp_path / "d1"

    def stopped(scenario, out):
        (out / "offsets").mkdir(parents=True)
        raise KeyboardInterrupt

    monkeypatch.setattr(sim, "simulate", stopped)
    res = CliRunner().invoke(cli, ["demo", "--out", str(root), "--quiet"])
    assert res.exit_code != 0
    assert (root / "inputs" / "offsets").is_dir() and not (root / "inputs" / "truth.jsonl").exists()
    said: list[str] = []
    cli_mod._clear_previous_demo(root, cli_mod._previous_demo(root), said.append)  # no "did not write" error
    assert said == [f"replacing the previous demo in {root}"] and not (root / "inputs").exists()


def test_a_second_demo_into_the_same_folder_starts_afresh(tmp_path) -> None:
    """`make demo` twice: what the first demo wrote (inputs with the truth, tables, the HTML page) is replaced;
    a folder holding anything else is refused before anything is deleted or simulated."""
    root = tmp_path / "epoch-audit-demo"
    (root / "inputs" / "offsets").mkdir(parents=True)
    (root / "inputs" / "truth.jsonl").write_text("{}\n")
    (root / "tables" / "offset_commits").mkdir(parents=True)
    (root / "report.html").write_text("<html/>")
    said: list[str] = []
    cli_mod._clear_previous_demo(root, cli_mod._previous_demo(root), said.append)
    assert list(root.iterdir()) == [] and said == [f"replacing the previous demo in {root}"]

    mine = tmp_path / "mine"
    (mine / "inputs" / "offsets").mkdir(parents=True)  # an operator's real inputs: no simulator truth
    res = CliRunner().invoke(cli, ["demo", "--out", str(mine), "--quiet"])
    assert res.exit_code == EXIT_USAGE, res.output
    assert "holds files an earlier demo did not write" in res.output and (mine / "inputs" / "offsets").is_dir()
    (tmp_path / "notes.txt").write_text("keep me")
    res = CliRunner().invoke(cli, ["demo", "--out", str(tmp_path), "--quiet"])
    assert res.exit_code == EXIT_USAGE and (tmp_path / "notes.txt").read_text() == "keep me"


def test_a_summary_of_a_range_given_as_iso_strings_is_printed(tmp_path: Path) -> None:
    """`epoch-audit demo --preset accuracy-3` (any preset over two days) ended in a TypeError ('str' - 'str') after
    its audit: the simulation's date range is ISO strings, and the per-day breakdown subtracted them."""
    from jobs.summary import format_summary, summarise

    write_findings(tmp_path / "t")
    config = Config(cluster="c1", output=Output(root=str(tmp_path / "t")))
    text = format_summary(summarise(config, "2024-03-01", "2024-03-02"))
    assert "per day:" in text and "2024-03-02" in text
