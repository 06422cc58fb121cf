"""The ``epoch-audit`` command: run, demo, decode, simulate, report, accuracy.

Subcommands are thin: they parse flags, call the same functions the notebook and the tests call
(:func:`jobs.audit.run_audit`, :func:`jobs.decode.decode_path`, :func:`epochlib.sim.simulate`,
:func:`jobs.summary.summarise`) and turn domain errors into one line on stderr and an exit code:

====  ==========================================================
0     success (findings are data, not failures)
1     unexpected failure (a bug: rerun with ``--debug`` for the traceback)
2     usage or configuration error (bad flag, bad config, invalid date range)
3     an input path is missing or unreadable
4     a table could not be written or read
====  ==========================================================
"""

from __future__ import annotations

import functools
import os
import shutil
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from .errors import ConfigError, EpochAuditError, InputError, SinkError

EXIT_OK, EXIT_BUG, EXIT_USAGE, EXIT_INPUT, EXIT_SINK = 0, 1, 2, 3, 4


def _exit_code(exc: EpochAuditError) -> int:
    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, InputError):
        return EXIT_INPUT
    if isinstance(exc, SinkError):
        return EXIT_SINK
    return EXIT_BUG


def _guarded(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Domain errors → one line on stderr + exit code; anything else → exit 1 (traceback with --debug)."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        debug = (ctx.find_root().params or {}).get("debug", False)
        try:
            return fn(*args, **kwargs)
        except EpochAuditError as exc:
            if debug:
                raise
            click.echo(f"epoch-audit: error: {exc}", err=True)
            ctx.exit(_exit_code(exc))
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Exception as exc:
            if debug:
                raise
            click.echo(f"epoch-audit: unexpected failure: {type(exc).__name__}: {exc} "
                       "(rerun with --debug for the traceback)", err=True)
            ctx.exit(EXIT_BUG)

    return wrapper


def _say(quiet: bool) -> Callable[[str], None]:
    t0 = time.monotonic()

    def say(line: str) -> None:
        if not quiet:
            m, s = divmod(int(time.monotonic() - t0), 60)
            click.echo(f"[{m:02d}:{s:02d}] {line}", err=True)

    return say


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="epoch-audit")
def cli(debug: bool) -> None:
    """Audit epoch consistency in Apache Kafka clusters (stale metadata, fencing violations,
    spurious offset resets) and write the findings as Delta tables."""


# ------------------------------------------------------------------------------------------------ run


def _config(conf: str | None) -> Any:
    from .config import default_config, load_config

    return load_config(conf) if conf else default_config()


def _check_inputs(config: Any) -> None:
    """Fail fast, before Spark starts, on a configured local input that does not exist."""
    for name in ("offsets", "logdirs", "metadata"):
        value = getattr(config.inputs, name)
        if value is None or "://" in value or value.startswith("dbfs:"):
            continue
        if not Path(value).exists():
            raise InputError(f"--{name} input path does not exist: {value}")
    if not any(getattr(config.inputs, n) for n in ("offsets", "logdirs", "metadata")):
        raise ConfigError("no inputs configured: set [inputs] offsets/logdirs/metadata or pass --offsets etc.")


def _session(config: Any) -> Any:
    from .session import get_or_create_session

    return get_or_create_session(master=config.spark.master, app_name=f"epoch-audit {config.cluster}",
                                 extra_conf=dict(config.spark.conf))


@cli.command()
@click.option("--conf", "conf", type=click.Path(dir_okay=False), help="TOML config (default: conf/local.toml).")
@click.option("--from", "date_from", required=True, metavar="YYYY-MM-DD", help="First UTC date (inclusive).")
@click.option("--to", "date_to", metavar="YYYY-MM-DD", help="Last UTC date (inclusive; default: --from).")
@click.option("--offsets", help="Override [inputs] offsets.")
@click.option("--logdirs", help="Override [inputs] logdirs.")
@click.option("--metadata", help="Override [inputs] metadata.")
@click.option("--output-root", help="Override [output] root.")
@click.option("--cluster", help="Override cluster.")
@click.option("--reports", help="Comma-separated reports (stale_metadata,fencing_violations,spurious_offset_resets).")
@click.option("--reports-only", is_flag=True, help="Skip ingestion; rerun the reports over existing silver tables.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@_guarded
def run(conf: str | None, date_from: str, date_to: str | None, offsets: str | None, logdirs: str | None,
        metadata: str | None, output_root: str | None, cluster: str | None, reports: str | None,
        reports_only: bool, quiet: bool) -> None:
    """Audit a date range: ingest the inputs, write the reports, print a summary."""
    from .audit import run_audit
    from .config import parse_date_range
    from .summary import format_summary, summarise

    start, end = parse_date_range(date_from, date_to)
    config = _config(conf).with_overrides(offsets=offsets, logdirs=logdirs, metadata=metadata,
                                          output_root=output_root, cluster=cluster, reports=reports)
    if not reports_only:
        _check_inputs(config)
    say = _say(quiet)
    spark = _session(config)
    result = run_audit(spark, config, start, end, ingest=not reports_only, progress=say)
    click.echo(format_summary(summarise(config, start, end)))
    if result.quarantined:
        click.echo(f"  {result.quarantined} input units quarantined: see {config.output.table_location('quarantine')}")
    click.echo(f"Tables: {config.output.table_location('')}")


# ----------------------------------------------------------------------------------------------- demo


@cli.command()
@click.option("--out", "out", type=click.Path(file_okay=False), default="epoch-audit-demo", show_default=True,
              help="Folder for the simulated inputs and the output tables.")
@click.option("--preset", default="demo", show_default=True, help="Simulator scenario preset.")
@click.option("--seed", type=int, help="Override the scenario's seed.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@_guarded
def demo(out: str, preset: str, seed: int | None, quiet: bool) -> None:
    """Simulate a small cluster with known anomalies, audit it on local Spark, print the findings."""
    from epochlib import sim

    from .audit import run_audit
    from .config import default_config
    from .summary import format_summary, summarise

    say = _say(quiet)
    root = Path(out).resolve()
    try:
        scenario = sim.preset(preset, seed=seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    inputs = root / "inputs"
    say(f"simulating scenario {scenario.name!r} (seed {scenario.seed}) into {inputs}")
    res = sim.simulate(scenario, inputs)
    start, end = res.date_range
    config = default_config().with_overrides(
        offsets=str(inputs / "offsets"), logdirs=str(inputs / "logdirs"), metadata=str(inputs / "metadata"),
        output_root=str(root / "tables"))
    spark = _session(config)
    run_audit(spark, config, start, end, progress=say)
    summary = summarise(config, start, end)
    click.echo(format_summary(summary))
    click.echo(f"Ground truth (what the simulator injected): {res.truth_path}")
    click.echo(f"Tables: {root / 'tables'}  (read them with deltalake.DeltaTable, Spark, DuckDB or Polars)")
    prog = "epoch-audit" if shutil.which("epoch-audit") else sys.argv[0]  # e.g. .venv/bin/epoch-audit after make demo
    click.echo(f"Next: {prog} report --output-root {root / 'tables'} --cluster {config.cluster} "
               f"--from {start} --to {end} --html {root / 'report.html'}")


# --------------------------------------------------------------------------------------------- decode


@cli.command()
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--kind", type=click.Choice(["segment", "leader-epoch-checkpoint", "offset-checkpoint",
                                           "partition-metadata", "pcap", "jsonl", "parquet", "text-dump",
                                           "metadata-log", "metadata-snapshot", "metadata-dump"]),
              help="Force the decoder (default: by file name and content).")
@click.option("--offsets-decoder/--no-offsets-decoder", default=None,
              help="Decode record keys/values as __consumer_offsets records (default: when the path says so).")
@click.option("--broker-port", "broker_ports", type=int, multiple=True, help="Broker port in pcap files (9092).")
@_guarded
def decode(path: str, kind: str | None, offsets_decoder: bool | None, broker_ports: tuple[int, ...]) -> None:
    """Print any supported file as JSON lines: one per batch, record, entry or observation."""
    from .decode import decode_path, to_json

    try:
        rows = decode_path(path, kind=kind, offsets_decoder=offsets_decoder, broker_ports=broker_ports or (9092,))
        for row in rows:
            sys.stdout.write(to_json(row) + "\n")
    except ValueError as exc:
        raise InputError(str(exc)) from None
    except BrokenPipeError:  # `| head` closed the pipe
        sys.stderr.close()


# ------------------------------------------------------------------------------------------- simulate


@cli.command()
@click.option("--preset", default="demo", show_default=True, help="Scenario preset (demo, accuracy-1..3, bench).")
@click.option("--out", "out", type=click.Path(file_okay=False), required=True, help="Folder to write inputs to.")
@click.option("--commits", type=int, help="Override the number of offset commits.")
@click.option("--seed", type=int, help="Override the seed.")
@_guarded
def simulate(preset: str, out: str, commits: int | None, seed: int | None) -> None:
    """Write a simulated cluster's inputs (DESIGN.md layout) plus truth.jsonl (every injected anomaly)."""
    from epochlib import sim

    try:
        scenario = sim.preset(preset, commits=commits, seed=seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    t0 = time.perf_counter()
    res = sim.simulate(scenario, Path(out))
    start, end = res.date_range
    click.echo(f"wrote {out} in {time.perf_counter() - t0:.1f}s: {res.summary()}")
    click.echo(f"audit it: epoch-audit run --offsets {out}/offsets --logdirs {out}/logdirs "
               f"--metadata {out}/metadata --from {start} --to {end}")


# --------------------------------------------------------------------------------------------- report


@cli.command()
@click.option("--conf", "conf", type=click.Path(dir_okay=False), help="TOML config (default: conf/local.toml).")
@click.option("--from", "date_from", required=True, metavar="YYYY-MM-DD")
@click.option("--to", "date_to", metavar="YYYY-MM-DD")
@click.option("--output-root", help="Override [output] root.")
@click.option("--cluster", help="Override cluster.")
@click.option("--html", "html", type=click.Path(dir_okay=False), help="Also write a self-contained HTML report here.")
@click.option("--partition", "partitions", multiple=True, metavar="TOPIC:PARTITION",
              help="Draw this partition's lineage across replicas in the HTML report (repeatable).")
@_guarded
def report(conf: str | None, date_from: str, date_to: str | None, output_root: str | None, cluster: str | None,
           html: str | None, partitions: tuple[str, ...]) -> None:
    """Summarise the findings of a date range (and optionally write an HTML report)."""
    from .config import parse_date_range
    from .summary import format_summary, summarise

    start, end = parse_date_range(date_from, date_to)
    subjects = [_topic_partition(p) for p in partitions]
    config = _config(conf).with_overrides(output_root=output_root, cluster=cluster)
    click.echo(format_summary(summarise(config, start, end)))
    if html:
        from .html_report import write_html_report

        # Catalog tables (Databricks) can only be read through Spark; path tables need no JVM.
        spark = _session(config) if config.output.root is None else None
        path = write_html_report(config, start, end, Path(html), partitions=subjects, spark=spark)
        click.echo(f"HTML report: {path}")


# ------------------------------------------------------------------------------------------- accuracy


@cli.command()
@click.option("--presets", default="accuracy-1,accuracy-2,accuracy-3", show_default=True,
              help="Comma-separated simulator presets to measure.")
@click.option("--out", "out", type=click.Path(file_okay=False), default="epoch-audit-accuracy", show_default=True,
              help="Folder; each preset is simulated and audited under OUT/<preset> (must not exist yet).")
@click.option("--master", default="local[2]", show_default=True, help="Master of the local Spark session.")
@click.option("--commits", type=int, help="Override each preset's commit count (a quicker, smaller run).")
@click.option("--tolerance-ms", type=int, default=1000, show_default=True,
              help="Largest event-time difference between a finding and its truth line.")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@_guarded
def accuracy(presets: str, out: str, master: str, commits: int | None, tolerance_ms: int, quiet: bool) -> None:
    """Measure detection accuracy: simulate presets, audit them, match the findings to the ground truth.

    Exits 0 when every warning+ kind has 100 % recall and no warning+ finding is missing from the truth,
    1 otherwise (the misses and extras are printed)."""
    from epochlib import sim

    from .accuracy import format_accuracy, run_accuracy

    names = [p.strip() for p in presets.split(",") if p.strip()]
    try:
        scenarios = [sim.preset(n, commits=commits) for n in names]
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    for sc in scenarios:
        if (Path(out) / sc.name / "inputs").exists():
            raise ConfigError(f"{Path(out) / sc.name} already holds a simulation; choose another --out")
    t0 = time.monotonic()
    results = run_accuracy(names, out, master=master, tolerance_ms=tolerance_ms, scenarios=scenarios,
                           say=_say(quiet))  # fmt: skip
    click.echo(format_accuracy(results))
    click.echo(f"wall time {time.monotonic() - t0:.0f} s")
    if not all(r.result.ok for r in results):
        click.get_current_context().exit(EXIT_BUG)


def _topic_partition(text: str) -> tuple[str, int]:
    topic, sep, part = text.rpartition(":")
    if not sep or not topic or not part.isdigit():
        raise ConfigError(f"--partition expects TOPIC:PARTITION, got {text!r}")
    return topic, int(part)


def main() -> None:
    """Console-script entry: run the command, then leave at once with its exit code.

    Native reader/writer thread pools (pyarrow, delta-rs) can still be tearing down during normal
    interpreter shutdown and abort the process with "terminate called without an active exception"
    (exit 134; delta-rs#2184, arrow#34314), turning a finished run into a failure. Everything is
    written and flushed by then (Delta commits are synchronous), so skip that teardown.
    """
    try:
        cli.main(prog_name="epoch-audit")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
