"""The ``epoch-audit`` command: run, demo, decode, simulate, report, findings, init, accuracy.

Subcommands are thin: they parse flags, call the same functions the notebook and the tests call
(:func:`jobs.audit.run_audit`, :func:`jobs.decode.decode_path`, :func:`epochlib.sim.simulate`,
:func:`jobs.summary.summarise`) and turn domain errors into one line on stderr and an exit code
(:data:`EXIT_CODES_HELP`, also in ``epoch-audit run --help`` and the README):

====  ==========================================================
0     success (findings are data, not failures)
1     unexpected failure (a bug: rerun with ``--debug`` for the traceback)
2     usage or configuration error (bad flag, bad config, invalid date range)
3     an input path is missing or unreadable; ``decode``: nothing decoded from the file (every unit an error);
      ``report``/``findings``: no table, unknown cluster, the output location cannot be reached, or no
      finished run covers the range;
      ``report --partition``: no snapshot of it in the range
4     a table could not be written or read (``report``/``findings``: one there whose Delta log or a data file is
      damaged or missing)
5     ``--fail-on SEVERITY``: findings at or above it exist
6     ``--fail-on-no-input``: a configured input yielded nothing (run status ``no_input`` or ``partial``
      because of days without rows, or days whose earlier rows it kept: their input is gone)
7     ``run``: another live run of the same cluster holds the output root's run lease (nothing written)
130   ``run`` stopped by SIGINT (Ctrl-C); 143: by SIGTERM (a scheduler's timeout); the run is recorded as failed
      (after the run finished, while it is reported: the run's own status, with this exit code)
====  ==========================================================
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import re
import shlex
import shutil
import signal
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import click

from epochlib.incidents import printable

from .errors import (
    ConfigError,
    EpochAuditError,
    InputError,
    RunLeaseHeld,
    SinkError,
    Terminated,
    interruption,
    one_line,
)
from .fs import replace_text

EXIT_OK, EXIT_BUG, EXIT_USAGE, EXIT_INPUT, EXIT_SINK = 0, 1, 2, 3, 4
EXIT_FINDINGS, EXIT_NO_INPUT, EXIT_LEASE_HELD = 5, 6, 7
EXIT_SIGINT, EXIT_SIGTERM = 128 + signal.SIGINT, 128 + signal.SIGTERM  # 130, 143: a shell's code for them

#: The exit codes and statuses, as shown in ``run --help`` (\b keeps click from rewrapping them).
EXIT_CODES_HELP = """\b
Exit codes:
  0  ok (findings are data, not failures)
  1  unexpected failure (a bug; `epoch-audit --debug run ...` shows the traceback)
  2  usage or configuration error (bad flag, config or date range)
  3  an input path is missing or unreadable
  4  a table could not be written or read
  5  --fail-on: findings at or above that severity exist
  6  --fail-on-no-input: a configured input yielded nothing (or days without rows,
     or days it kept earlier runs' rows of: their input is gone)
  7  another run of the cluster is writing to the output root (its run lease
     is live): nothing written; wait, or remove its lease file if it is gone
  130, 143  stopped by SIGINT (Ctrl-C) or SIGTERM (a scheduler's timeout): recorded as failed
            (after the run finished: its own status, this exit code)
\b
Run status (summary, --summary-json, --metrics-file, audit_runs.status):
  ok        every configured source decoded data on every day of the range
  partial   some units quarantined, or days of the range without rows
  no_input  no configured source yielded anything (the metadata log alone
            does not count: its old files decode every night)
  failed    the run raised (audit_runs.error holds the message)"""
SEVERITY_CHOICES = ("warning", "error", "critical")


def _exit_code(exc: EpochAuditError) -> int:
    if isinstance(exc, ConfigError):
        return EXIT_USAGE
    if isinstance(exc, RunLeaseHeld):
        return EXIT_LEASE_HELD
    if isinstance(exc, InputError):
        return EXIT_INPUT
    if isinstance(exc, SinkError):
        return EXIT_SINK
    return EXIT_BUG


def _failure_exit_code(exc: BaseException) -> int:
    if isinstance(exc, Terminated):
        return exc.exit_code
    return _exit_code(exc) if isinstance(exc, EpochAuditError) else EXIT_BUG


#: When each signal first reached the run (monotonic seconds): the same signal again within
#: :data:`SIGNAL_REPEAT_S` is that one signal, not a second.
_FIRST_SIGNAL: dict[int, float] = {}
#: ``timeout -s TERM`` signals its child and then the whole process group, so one timeout delivers SIGTERM twice
#: within microseconds; a second Ctrl-C meant to cut the cleanup short comes later than this.
SIGNAL_REPEAT_S = 1.0


def _exit_at_once(signum: int, _frame: Any) -> None:
    first = _FIRST_SIGNAL.get(signum)
    if first is not None and time.monotonic() - first < SIGNAL_REPEAT_S:
        return  # the first one's echo (timeout's process-group kill): the cleanup it started goes on
    with contextlib.suppress(OSError):
        os.write(2, f"epoch-audit: {signal.Signals(signum).name} again: exiting at once\n".encode())
    os._exit(128 + signum)


def _raise_terminated(signum: int, _frame: Any) -> None:
    _FIRST_SIGNAL.setdefault(signum, time.monotonic())
    for s in (signal.SIGTERM, signal.SIGINT):  # the cleanup this starts is not to be interrupted, but cut short
        signal.signal(s, _exit_at_once)
    # Py4J logs a traceback for each call into a JVM the signal ended too (a process group's signal): the run's
    # end is said in one line instead
    logging.getLogger().setLevel(logging.CRITICAL)
    logging.getLogger("py4j").setLevel(logging.CRITICAL)
    raise Terminated(signum)


def _reclaim_sigint() -> None:
    """A SparkContext started in the main thread sets its own SIGINT handler (cancel the jobs, KeyboardInterrupt):
    a run's Ctrl-C is to go :func:`_terminable`'s way, as SIGTERM does (``spark.stop()`` then cancels the jobs)."""
    if threading.current_thread() is threading.main_thread() and signal.getsignal(signal.SIGINT) not in (
            _raise_terminated, _exit_at_once):
        signal.signal(signal.SIGINT, _raise_terminated)


@contextlib.contextmanager
def _terminable(*, cleanup: bool = False) -> Iterator[None]:
    """SIGTERM and SIGINT raise :class:`~jobs.errors.Terminated` in the main thread while the block runs (a blocked
    Py4J or lock wait is interrupted: CPython runs the handler there), so that a run stopped by its scheduler goes
    the way of a failed one. Once one came, or in a ``cleanup`` block (recording a failed run), a further one ends
    the process at once (exit 128 + its number): a second Ctrl-C must not wait for that cleanup. The previous
    handlers are restored after the block. Outside the main thread, where Python sets no handler, signals are left alone."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    handler = _exit_at_once if cleanup else _raise_terminated
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, old in previous.items():
            signal.signal(s, old)


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
            click.echo(f"epoch-audit: error: {printable(one_line(exc, 2000))}", err=True)
            ctx.exit(_exit_code(exc))
        except BrokenPipeError:
            # the reader of our output went away (`... | head`): a normal end, not a failure
            # no "Exception ignored ... BrokenPipeError" when Python flushes stdout at exit
            with contextlib.suppress(OSError, ValueError, AttributeError):
                os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            ctx.exit(0)
        except (click.ClickException, click.exceptions.Exit, click.Abort):
            raise
        except Terminated as exc:  # a scheduler's timeout or Ctrl-C (`run` recorded it as failed)
            click.echo(f"epoch-audit: {exc}: exit {exc.exit_code}", err=True)
            ctx.exit(exc.exit_code)
        except Exception as exc:
            if debug:
                raise
            click.echo(f"epoch-audit: unexpected failure: {type(exc).__name__}: {printable(one_line(exc, 2000))} "
                       "(rerun with --debug for the traceback)", err=True)
            ctx.exit(EXIT_BUG)

    return wrapper


def _say(quiet: bool, t0: float | None = None) -> Callable[[str], None]:
    """Progress lines on stderr, ``[mm:ss]`` since ``t0`` (now by default); nothing under ``--quiet``."""
    t0 = time.monotonic() if t0 is None else t0

    def say(line: str) -> None:
        if not quiet:
            m, s = divmod(int(time.monotonic() - t0), 60)
            click.echo(f"[{m:02d}:{s:02d}] {printable(line)}", err=True)

    return say


def _warner(into: list[str], t0: float) -> Callable[[str], None]:
    """Prints each of a run's warnings as it arises, ``--quiet`` or not (they are not progress), on the progress
    lines' clock (``t0``), and keeps them in ``into``: a run that fails has no result to carry them to
    ``--summary-json``."""
    loud = _say(False, t0)

    def warn(text: str) -> None:
        into.append(text)
        loud(f"warning: {text}")

    return warn


@click.group(context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100})
@click.option("--debug", is_flag=True, help="Show tracebacks instead of one-line errors.")
@click.version_option(package_name="epoch-audit")
def cli(debug: bool) -> None:
    """Audit epoch consistency in Apache Kafka clusters (stale metadata, fencing violations,
    spurious offset resets) and write the findings as Delta tables."""


# ------------------------------------------------------------------------------------------------ run


def _config(conf: str | None, command: str, **flags: Any) -> Any:
    """``--conf FILE`` with the flags over it; without ``--conf``, the flags alone (never the demo's
    built-in config: its inputs and tables must not leak into a run that did not ask for them)."""
    from .config import config_from_flags, load_config

    if conf:
        return load_config(conf).with_overrides(**flags)
    return config_from_flags(command=command, **flags)


def _cluster_of(conf: str | None) -> str | None:
    """The ``cluster`` a config file names, read as leniently as possible (for a run whose config cannot be loaded:
    its failed outputs still name the cluster): the parsed TOML's, else a ``cluster = "…"`` line; None."""
    if not conf:
        return None
    try:
        text = Path(conf).read_text(encoding="utf-8-sig", errors="replace")
    except OSError:
        return None
    import tomllib

    with contextlib.suppress(tomllib.TOMLDecodeError):
        value = tomllib.loads(text).get("cluster")
        return value if isinstance(value, str) and value else None
    line = re.search(r"""^[ \t]*cluster[ \t]*=[ \t]*(?:"([^"\n]+)"|'([^'\n]+)')""", text, re.MULTILINE)
    return (line.group(1) or line.group(2)) if line else None


#: An input given as a URL (a scheme of two letters or more, so that ``C:\\`` is none): checked by the run's reader.
_URL = re.compile(r"[A-Za-z][A-Za-z0-9+.-]+:")


def _check_inputs(config: Any, flags: dict[str, Any] | None = None) -> None:
    """Fail fast, before Spark starts, on a configured local input that does not exist or cannot be read (a
    folder that cannot be listed, a file that cannot be opened): exit 3, not a run that reads nothing and says
    so only in its status. ``flags``: the input flags given on the command line, so that the message names where
    the path came from (``--logdirs`` or ``[inputs] logdirs`` of the config file)."""
    for name, value in zip(config.inputs.LOCATIONS, config.inputs.roots, strict=True):
        if value is None or _URL.match(value):  # s3://, abfss://, dbfs:/, hdfs:/, file:/...: fsspec reads them
            continue
        if (flags or {}).get(name) is not None or config.source is None:
            origin = f"--{name.replace('_', '-')}"
        else:
            origin = f"[inputs] {name} in {config.source}"
        path = Path(value)
        if not path.exists():
            raise InputError(f"{origin}: input path does not exist: {value}")
        problem = _unreadable(path)
        if problem:
            raise InputError(f"{origin}: input path cannot be read ({problem}): {value}")
    if not any(config.inputs.roots):
        raise ConfigError("no inputs configured: set [inputs] offsets/logdirs/metadata or pass --offsets etc.")


def _unreadable(path: Path) -> str | None:
    """Why the input root ``path`` cannot be read (a folder that cannot be listed, a file that cannot be
    opened), or None. Tried for real, not with ``os.access``: a process running as root passes every access
    check and still meets what it cannot read (a mount, a capability-less root)."""
    try:
        if path.is_dir():
            with os.scandir(path) as entries:
                next(entries, None)
        elif path.is_file():  # not a FIFO: opening one would wait for a writer (the run quarantines it instead)
            with open(path, "rb") as f:
                f.read(1)
    except OSError as exc:
        return exc.strerror or type(exc).__name__
    return None


def _session(config: Any, *, ingest: bool = False) -> Any:
    """The run's session; for a run that ingests, a new local one is started for the size of its inputs
    (:func:`jobs.session.java_options_for_input`)."""
    from .session import get_or_create_session, local_input_size

    size = local_input_size(config) if ingest else None
    try:
        # a run that ingests loads nearly every class an audit needs: it makes the class-data archive when
        # there is none (finished in main, once the command is done); other commands only use it
        return get_or_create_session(master=config.spark.master, app_name=f"epoch-audit {config.cluster}",
                                     extra_conf=dict(config.spark.conf), input_bytes=size,
                                     class_data="make" if ingest else "use")
    except Exception as exc:  # the JVM did not start: almost always the master or the Java install
        raise ConfigError(f"could not start Spark with [spark] master = {config.spark.master!r}: "
                          f"{one_line(exc)} (set [spark] master, e.g. \"local[*]\", or run under "
                          "spark-submit.sh; Spark needs Java 17 on PATH or JAVA_HOME)") from exc


@cli.command(epilog=EXIT_CODES_HELP)
@click.option("--conf", "conf", type=click.Path(dir_okay=False),
              help="TOML config. Without it, only the flags count: --cluster and --output-root are required.")
@click.option("--from", "date_from", required=True, metavar="YYYY-MM-DD", help="First UTC date (inclusive).")
@click.option("--to", "date_to", metavar="YYYY-MM-DD", help="Last UTC date (inclusive; default: --from).")
@click.option("--offsets", help="__consumer_offsets input (overrides [inputs] offsets).")
@click.option("--logdirs", help="Log-dir snapshots input (overrides [inputs] logdirs).")
@click.option("--metadata", help="Metadata captures input (overrides [inputs] metadata).")
@click.option("--cluster-metadata", help="KRaft __cluster_metadata-0 copies or --cluster-metadata-decoder dumps "
              "(overrides [inputs] cluster_metadata).")
@click.option("--output-root", help="Where the tables go (overrides [output] root).")
@click.option("--cluster", help="Name of the audited cluster (overrides cluster).")
@click.option("--reports", help="Comma-separated reports (stale_metadata,fencing_violations,spurious_offset_resets).")
@click.option("--reports-only", is_flag=True, help="Skip ingestion; rerun the reports over existing silver tables.")
@click.option("--fail-on", type=click.Choice(SEVERITY_CHOICES),
              help=f"Exit {EXIT_FINDINGS} when findings at or above this severity exist.")
@click.option("--fail-on-no-input", is_flag=True,
              help=f"Exit {EXIT_NO_INPUT} when a configured input yields nothing (status no_input, days "
                   "without rows, or days whose earlier rows were kept: their input is gone).")
@click.option("--summary-json", type=click.Path(dir_okay=False),
              help="Also write the run's summary as JSON (status, counts, per-source completeness, top findings).")
@click.option("--metrics-file", type=click.Path(dir_okay=False),
              help="Also write Prometheus text-format metrics (for node_exporter's textfile collector).")
@click.option("-q", "--quiet", is_flag=True, help="No progress lines.")
@_guarded
def run(conf: str | None, date_from: str, date_to: str | None, offsets: str | None, logdirs: str | None,
        metadata: str | None, cluster_metadata: str | None, output_root: str | None, cluster: str | None,
        reports: str | None,
        reports_only: bool, fail_on: str | None, fail_on_no_input: bool, summary_json: str | None,
        metrics_file: str | None, quiet: bool) -> None:
    """Audit a date range: ingest the inputs, write the reports, print a summary.

    Each input is optional; at least one is needed. The summary says whether every configured input
    yielded data (run status below), names the top findings, and breaks a range down per day."""
    from .audit import run_audit
    from .config import parse_date_range
    from .runlog import new_run_id
    from .sink import hold_run
    from .summary import summarise

    start, end = parse_date_range(date_from, date_to, audited=True)
    _check_output_files(summary_json=summary_json, metrics_file=metrics_file)  # else a failure could not say so
    t0 = time.monotonic()
    say = _say(quiet, t0)
    warned: list[str] = []
    partial: list[Any] = []  # the run's AuditResult as far as it got: a failed run's JSON names it, its sources too
    # the flag's, until the config is read; the config file's own cluster line when only the rest of it is wrong (the
    # metrics file keeps that cluster's last success: its staleness alert must not lose the series)
    config: Any = SimpleNamespace(cluster=cluster or _cluster_of(conf))

    def failed(exc: BaseException) -> None:  # the --summary-json / --metrics-file of a run that raised
        code = _failure_exit_code(exc)
        so_far = partial[0] if partial else None
        try:  # the error as the terminal says it (no Rust backtrace of deltalake's, no Java stack trace)
            _write_outputs(config, start, end, summary_json, metrics_file, status="failed", summary=None,
                           duration_s=time.monotonic() - t0, error=one_line(exc, 2000), exit_code=code,
                           warnings=warned, partial=so_far)
        except SinkError as out_exc:  # said, but the run's own error decides the exit code
            click.echo(f"epoch-audit: error: {printable(str(out_exc))}", err=True)

    spark = None
    result: Any = None  # the run's AuditResult once run_audit returned (audit_runs then holds its status)
    summary: Any = None
    code = EXIT_OK
    # the run lease, taken before Spark starts and held to the end (run_audit shares it: the same run id)
    owned = contextlib.ExitStack()
    run_id = new_run_id()
    with owned:  # released on every way out: success, failure, SIGTERM/SIGINT, exit codes 5 and 6
        # from here on, every failure (the config, the inputs, the lease, Spark's start, the run, SIGTERM/SIGINT) writes
        # both files
        try:
            with _terminable():
                config = _config(conf, "run", offsets=offsets, logdirs=logdirs, metadata=metadata,
                                 cluster_metadata=cluster_metadata, output_root=output_root, cluster=cluster,
                                 reports=reports)
                if reports_only:  # a wrong location or a mistyped cluster, said before Spark's JVM starts
                    from .audit import reports_only_sources

                    reports_only_sources(config)  # (run_audit checks again)
                else:
                    _check_inputs(config, dict(offsets=offsets, logdirs=logdirs, metadata=metadata,
                                               cluster_metadata=cluster_metadata))
                warn = _warner(warned, t0)
                # a live run of the cluster refuses this one here (exit 7), before Spark starts and before anything is
                # written: no audit_runs row, no table touched; only --summary-json/--metrics-file say failed
                owned.enter_context(hold_run(config, run_id, warn=warn))
                spark = _session(config, ingest=not reports_only)
                _reclaim_sigint()
                result = run_audit(spark, config, start, end, ingest=not reports_only, progress=say, run_id=run_id,
                                   warn=warn, on_result=partial.append)
                # the run finished: a signal while it is reported still ends the process, but the way of a finished
                # run (_reported_when_signalled), not the default handler's (no files, or last night's, no exit line)
                summary = summarise(config, start, end)
                code = _report_run(config, result, summary, fail_on=fail_on, fail_on_no_input=fail_on_no_input)
                _write_outputs(config, start, end, summary_json, metrics_file, status=result.status, summary=summary,
                               duration_s=result.timings["total"], result=result, exit_code=code,  # = "done in"
                               sink_exit=EXIT_SINK)
        except (Exception, Terminated, KeyboardInterrupt) as exc:
            stop = interruption(exc)  # also behind the Py4J error of a cleanup in a JVM the signal ended
            if isinstance(stop, KeyboardInterrupt):  # Spark's own SIGINT handler, before _reclaim_sigint
                stop = Terminated(signal.SIGINT)
            if result is not None and stop is None:  # the run finished; its summary or a file failed: as ever
                raise
            with _terminable(cleanup=True):  # the failure is recorded whole; a signal now ends the process at once
                if result is not None:
                    _reported_when_signalled(config, start, end, result, summary, stop, summary_json, metrics_file)
                else:
                    failed(stop or exc)
                if stop is not None and spark is not None:
                    with contextlib.suppress(Exception):  # the scheduler may have ended the JVM already
                        spark.stop()
            if stop is not None and stop is not exc:
                raise stop from None
            raise
    if code:
        click.get_current_context().exit(code)


def _report_run(config: Any, result: Any, summary: Any, *, fail_on: str | None, fail_on_no_input: bool) -> int:
    """Print a finished run's summary and return its exit code (0, or 6 / 5 for ``--fail-on-no-input`` /
    ``--fail-on``)."""
    from .summary import format_summary

    click.echo(format_summary(summary))
    for s in result.sources.values():
        if s.status != "ok":
            click.echo(f"  input {s.source_kind}: {s.status} ({printable(s.reason)})")
    if result.quarantined:
        click.echo(f"  {result.quarantined} input units quarantined: see "
                   f"{printable(config.output.table_location('quarantine'))}")
    click.echo(f"Status: {result.status}   Tables: {printable(config.output.table_location(''))}")
    code = EXIT_OK
    if fail_on_no_input and result.status in ("no_input", "partial") and any(
            s.status == "no_input" or s.days_without_input or s.days_kept for s in result.sources.values()):
        code = EXIT_NO_INPUT
        click.echo(f"epoch-audit: a configured input yielded nothing (--fail-on-no-input): exit {code}", err=True)
    elif fail_on and summary.count(severity_at_least=fail_on):
        code = EXIT_FINDINGS
        click.echo(f"epoch-audit: {summary.count(severity_at_least=fail_on)} findings at or above {fail_on} "
                   f"(--fail-on): exit {code}", err=True)
    return code


def _reported_when_signalled(config: Any, start: Any, end: Any, result: Any, summary: Any, stop: Terminated,
                             summary_json: str | None, metrics_file: str | None) -> None:
    """--summary-json and --metrics-file of a run that finished (``audit_runs`` holds its status, its tables are
    whole) but got SIGTERM/SIGINT while its summary was printed or the files written: the run's own status and
    findings (its summary is read now if the signal came first), with the signal's exit code and an ``error`` that
    says when it came, so that an alert neither reads a failed run nor keeps last night's files. A file is written
    whole or not at all; one that cannot be written (or a summary that cannot be read) is said, and the signal's
    exit code stands."""
    from .summary import summarise

    error = (f"{stop} while reporting: the run had finished (status {result.status}, recorded in audit_runs); "
             "the terminal summary may be cut short")
    click.echo(f"epoch-audit: {printable(error)}", err=True)
    if not summary_json and not metrics_file:
        return
    try:
        if summary is None:
            summary = summarise(config, start, end)
        _write_outputs(config, start, end, summary_json, metrics_file, status=result.status, summary=summary,
                       duration_s=result.timings["total"], result=result, error=error, exit_code=stop.exit_code)
    except EpochAuditError as exc:  # said; the files are then last night's, whole (never half of this one)
        click.echo(f"epoch-audit: error: {printable(one_line(exc, 2000))}", err=True)


def _write_outputs(config: Any, start: Any, end: Any, summary_json: str | None, metrics_file: str | None,
                   *, status: str, summary: Any, duration_s: float, result: Any = None, error: str | None = None,
                   exit_code: int | None = None, warnings: Sequence[str] = (), partial: Any = None,
                   sink_exit: int | None = None) -> None:
    """The --summary-json and --metrics-file outputs (also for a failed run, so an alert can fire; its
    ``warnings`` are the ones printed before it failed, ``partial`` its AuditResult as far as it got: its run id,
    and the units counted and source statuses judged before it failed).
    ``sink_exit``: the exit code the process takes when one of the files cannot be written (a run that
    succeeded: :data:`EXIT_SINK`); a file that was written is then written again with it, so that it does not
    report the run's own code while the process says otherwise. None: the run's own code stands (a failed run)."""
    if not summary_json and not metrics_file:
        return
    from .alerts import run_document, write_metrics, write_summary_json

    got = result if result is not None else partial
    run = got.run if got is not None else None
    doc = run_document(
        cluster=config.cluster, date_from=start, date_to=end, status=status, summary=summary,
        run_id=run.run_id if run else None, started_at=run.started_at if run else None,
        duration_s=duration_s, sources=got.sources if got is not None else None,
        counts=got.ingest.counts if got is not None and got.ingest is not None else (),
        rows_per_day=got.rows_per_day if got is not None else None, error=error, exit_code=exit_code,
        warnings=result.warnings if result is not None else warnings)
    outputs = [(flag, path, write) for flag, path, write in (("--summary-json", summary_json, write_summary_json),
                                                             ("--metrics-file", metrics_file, write_metrics)) if path]
    failed, written = [], []
    for flag, path, write in outputs:
        try:  # each file is tried: one that cannot be written must not cost the other
            write(path, doc)
            written.append((path, write))
        except OSError as e:
            failed.append(f"{flag} {path}: {e.strerror or e}")
    if not failed:
        return
    error = SinkError(f"could not write {'; '.join(failed)} (the run's status: {status})")
    if sink_exit is not None and written:  # the process exits sink_exit: the file written must say so too
        doc = {**doc, "exit_code": sink_exit, "error": str(error)}
        for path, write in written:
            with contextlib.suppress(OSError):
                write(path, doc)
    raise error


def _check_output_files(**paths: str | None) -> None:
    """Refuse, before the run, an output file that cannot be written (its folder is a file or not writable):
    the run's status would otherwise be lost after the work is done."""
    for flag, path in paths.items():
        if not path:
            continue
        target = Path(path)
        name = "--" + flag.replace("_", "-")
        if target.is_dir():
            raise ConfigError(f"{name} {path} is a folder")
        folder = target.parent
        while not folder.exists() and folder != folder.parent:
            folder = folder.parent
        if not folder.is_dir() or not os.access(folder, os.W_OK | os.X_OK):
            raise ConfigError(f"{name} {path}: cannot write in {folder}")


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
    from .runlog import new_run_id
    from .sink import hold_run
    from .summary import format_summary, summarise

    t0 = time.monotonic()
    say = _say(quiet, t0)
    root = Path(out).resolve()
    try:
        scenario = sim.preset(preset, seed=seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    inputs = root / "inputs"
    entries = _previous_demo(root)
    # a demo running in this folder holds the run lease of its tables: refused here (exit 7), before anything of
    # it is deleted; run_audit shares this lease (the same run id)
    run_id, warn = new_run_id(), _warner([], t0)
    with hold_run(default_config().with_overrides(output_root=str(root / "tables")), run_id, warn=warn):
        _clear_previous_demo(root, entries, say)
        (root / DEMO_MARK).write_text("written by `epoch-audit demo`: the next demo into this folder replaces it\n")
        say(f"simulating scenario {scenario.name!r} (seed {scenario.seed}) into {inputs}")
        res = sim.simulate(scenario, inputs)
        start, end = res.date_range
        config = default_config().with_overrides(
            offsets=str(inputs / "offsets"), logdirs=str(inputs / "logdirs"), metadata=str(inputs / "metadata"),
            cluster_metadata=str(res.cluster_metadata), output_root=str(root / "tables"))
        spark = _session(config, ingest=True)
        run_audit(spark, config, start, end, progress=say, warn=warn, run_id=run_id)
    summary = summarise(config, start, end)
    click.echo(format_summary(summary))
    click.echo(printable(f"Ground truth (what the simulator injected): {res.truth_path}"))
    click.echo(printable(f"Tables: {root / 'tables'}  (read them with deltalake.DeltaTable, Spark, DuckDB or Polars)"))
    prog = "epoch-audit" if shutil.which("epoch-audit") else sys.argv[0]  # e.g. .venv/bin/epoch-audit after make demo
    click.echo(printable(f"Next: {prog} report --output-root {root / 'tables'} --cluster {config.cluster} "
                         f"--from {start} --to {end} --html {root / 'report.html'}"))


#: The file that says a folder is a demo's (``epoch-audit demo --out``), so that the next demo may replace it.
DEMO_MARK = ".epoch-audit-demo"


def _previous_demo(root: Path) -> set[str]:
    """What an earlier ``epoch-audit demo`` wrote in ``root`` (``inputs/`` with the simulator's ``truth.jsonl``,
    ``tables/``, ``report.html``), to be replaced. Anything else in the folder is not ours to delete: a clear error
    instead."""
    if not root.exists():
        return set()
    if not root.is_dir():
        raise ConfigError(f"--out {root} is a file; give a folder for the demo")
    ours = {"inputs", "tables", "report.html", DEMO_MARK}
    entries = {p.name for p in root.iterdir()}
    # (the mark is written before the simulation: a demo stopped while it simulated left no truth.jsonl)
    made_by_demo = (root / DEMO_MARK).is_file() or (root / "inputs" / "truth.jsonl").is_file() \
        or not (entries & {"inputs", "tables"})
    if entries - ours or not made_by_demo:
        raise ConfigError(f"--out {root} holds files an earlier demo did not write ({', '.join(sorted(entries)[:5])}); "
                          "give an empty or new folder with --out")
    return entries


def _clear_previous_demo(root: Path, entries: set[str], say: Callable[[str], None]) -> None:
    """A second ``epoch-audit demo`` into the same folder starts afresh: the earlier demo's ``entries``
    (:func:`_previous_demo`) are removed, but for the run lease this demo holds in ``tables/``."""
    from .sink import LEASE_DIR

    if entries:
        say(f"replacing the previous demo in {root}")
    for name in sorted(entries):
        path = root / name
        if name == "tables" and path.is_dir():
            for sub in path.iterdir():
                if sub.name != LEASE_DIR:
                    shutil.rmtree(sub) if sub.is_dir() else sub.unlink()
            with contextlib.suppress(OSError):  # unless the lease is in it
                path.rmdir()
        else:
            shutil.rmtree(path) if path.is_dir() else path.unlink()


# --------------------------------------------------------------------------------------------- decode


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False, readable=False))  # unreadable: exit 3 below, not click's 2
@click.option("--kind", type=click.Choice(["segment", "leader-epoch-checkpoint", "offset-checkpoint",
                                           "partition-metadata", "pcap", "jsonl", "parquet", "text-dump",
                                           "metadata-log", "metadata-snapshot", "metadata-dump"]),
              help="Force the decoder (default: by file name and content).")
@click.option("--offsets-decoder/--no-offsets-decoder", default=None,
              help="Decode record keys/values as __consumer_offsets records (default: when the path says so).")
@click.option("--broker-port", "broker_ports", type=int, multiple=True, help="Broker port in pcap files (9092).")
@_guarded
def decode(path: str, kind: str | None, offsets_decoder: bool | None, broker_ports: tuple[int, ...]) -> None:
    """Print any supported file as JSON lines: one per batch, record, entry or observation.

    Units that cannot be decoded are {"type": "error"} lines, and decoding goes on (exit 0). Exit 3 when the file
    is missing or unreadable, of no kind epoch-audit knows, or when nothing at all could be decoded from it (every
    unit an error: the error lines are printed, then one line on stderr), so that a script can tell."""
    from .decode import DESCRIPTIVE_TYPES, decode_path, to_json

    if not Path(path).is_file():  # a missing input is exit 3, as for `run` (click's own check says 2)
        raise InputError(f"input file does not exist: {path}")
    problem = _unreadable(Path(path))
    if problem:  # and an unreadable one, as for `run`
        raise InputError(f"input file cannot be read ({problem}): {path}")

    decoded, errors, first_error = 0, 0, {}  # rows decoded, error rows, the first of them
    try:
        rows = decode_path(path, kind=kind, offsets_decoder=offsets_decoder, broker_ports=broker_ports or (9092,))
        for row in rows:
            sys.stdout.write(to_json(row) + "\n")
            if row.get("type") == "error":
                errors += 1
                first_error = first_error or row
            elif row.get("type") not in DESCRIPTIVE_TYPES:  # a note or a snapshot's summary is not a decoded unit
                decoded += 1
    except ValueError as exc:
        raise InputError(str(exc)) from None
    except (PermissionError, FileNotFoundError) as exc:  # gone or locked since the check: as above
        raise InputError(f"input file cannot be read ({exc.strerror or exc}): {path}") from None
    if errors and not decoded:  # a file of garbage, or of the wrong kind: a script piping decode must see it
        raise InputError(f"nothing decoded from {path}: {errors:,} error line{'s' if errors != 1 else ''}, the first "
                         f"({first_error.get('unit')}, position {first_error.get('position')}): "
                         f"{first_error.get('reason')}")
    # `| head` closing the pipe (BrokenPipeError) is a normal end: the command guard exits 0 quietly


# ------------------------------------------------------------------------------------------- simulate


@cli.command()
@click.option("--preset", default="demo", show_default=True, help="Scenario preset (demo, accuracy-1..3, bench).")
@click.option("--out", "out", type=click.Path(file_okay=False), required=True, help="Folder to write inputs to.")
@click.option("--commits", type=int, help="Override the number of offset commits.")
@click.option("--seed", type=int, help="Override the seed.")
@_guarded
def simulate(preset: str, out: str, commits: int | None, seed: int | None) -> None:
    """Write a simulated cluster's inputs (the layout of README's "What it reads") plus truth.jsonl (every injected anomaly)."""
    from epochlib import sim

    try:
        scenario = sim.preset(preset, commits=commits, seed=seed)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    t0 = time.perf_counter()
    res = sim.simulate(scenario, Path(out))
    start, end = res.date_range
    first, *rest = res.summary_lines()
    for line in (f"wrote {out} in {time.perf_counter() - t0:.1f}s: {first}", *rest):  # escaped per line: no `\n`
        click.echo(printable(line))
    base = Path(out).resolve()
    q = shlex.quote
    click.echo(printable(
        f"audit it: epoch-audit run --offsets {q(str(base / 'offsets'))} --logdirs {q(str(base / 'logdirs'))} "
        f"--metadata {q(str(base / 'metadata'))} --cluster-metadata {q(str(res.cluster_metadata.resolve()))} "
        f"--output-root {q(str(base / 'tables'))} --cluster {q(scenario.name)} --from {start} --to {end}"))


# --------------------------------------------------------------------------------------------- report


_TARGET_OPTIONS = (
    click.option("--conf", "conf", type=click.Path(dir_okay=False),
                 help="TOML config. Without it, --cluster and --output-root are required."),
    click.option("--output-root", help="Where the tables are (overrides [output] root)."),
    click.option("--cluster", help="Name of the audited cluster (overrides cluster)."),
)


def _target_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(_TARGET_OPTIONS):
        fn = option(fn)
    return fn


def _known_summary(config: Any, start: Any, end: Any) -> Any:
    """The summary of a range, or exit 3 with one line when there is nothing to summarise: no report
    table at the location, or a cluster no run wrote (a typo must not read as "no findings")."""
    from .runlog import clusters_with_runs, no_run_of_cluster
    from .summary import REPORT_TABLES, summarise

    summary = summarise(config, start, end)  # InputError when the location cannot be reached
    if config.output.root is None:  # catalog tables: only Spark can read them (the notebook shows them)
        return summary
    if len(summary.missing) == len(REPORT_TABLES):
        raise InputError(f"no report tables at {config.output.table_location('')}: has `epoch-audit run` "
                         "written there? (check --output-root / [output])")
    clusters = clusters_with_runs(config)
    if clusters is not None and config.cluster not in clusters:
        raise InputError(no_run_of_cluster(config, clusters))
    return summary


def _covered(config: Any, start: Any, end: Any) -> Any:
    """What ``audit_runs`` says of the range (None for catalog tables or without the table), or exit 3 with one line
    when no finished run covers any day of it: a date typo must not read as "no findings" (``report``, ``findings``)."""
    from .summary import run_coverage

    coverage = run_coverage(config, start, end)
    if coverage is not None and not coverage.runs:
        raise InputError(f"no finished run of cluster {config.cluster!r} covers {start} .. {end} at "
                         f"{config.output.table_location('')} (`epoch-audit run` that range first)")
    return coverage


@cli.command()
@_target_options
@click.option("--from", "date_from", required=True, metavar="YYYY-MM-DD")
@click.option("--to", "date_to", metavar="YYYY-MM-DD")
@click.option("--html", "html", type=click.Path(dir_okay=False), help="Also write a self-contained HTML report here.")
@click.option("--partition", "partitions", multiple=True, metavar="TOPIC:PARTITION",
              help="Show this partition's findings and lineage across replicas (repeatable): in the terminal, "
                   "and drawn in the HTML report with --html.")
@click.option("--fail-on", type=click.Choice(SEVERITY_CHOICES),
              help=f"Exit {EXIT_FINDINGS} when findings at or above this severity exist.")
@_guarded
def report(conf: str | None, output_root: str | None, cluster: str | None, date_from: str, date_to: str | None,
           html: str | None, partitions: tuple[str, ...], fail_on: str | None) -> None:
    """Summarise the findings of a date range (and optionally write an HTML report).

    Exits 3 when the location has no report tables, the cluster has no run there, or the location
    cannot be reached; 4 when a table there cannot be read (a damaged Delta log or data file)."""
    from .config import parse_date_range
    from .summary import format_coverage, format_summary

    start, end = parse_date_range(date_from, date_to, audited=True)
    subjects = [_topic_partition(p) for p in partitions]
    config = _config(conf, "report", output_root=output_root, cluster=cluster)
    summary = _known_summary(config, start, end)
    coverage = _covered(config, start, end)
    click.echo(format_summary(summary, coverage.not_audited if coverage is not None else ()))
    if coverage is not None:
        click.echo(format_coverage(coverage))
    # Catalog tables (Databricks) can only be read through Spark; path tables need no JVM.
    spark = _session(config) if config.output.root is None and (html or subjects) else None
    missing: list[tuple[str, int]] = []
    if subjects:  # the requested partitions' findings and lineage, in the terminal too (never silently dropped)
        from .html_report import partitions_text

        text, missing = partitions_text(config, start, end, subjects, spark=spark)
        click.echo(text)
    if html:
        from .html_report import write_html_report

        path = write_html_report(config, start, end, Path(html), partitions=subjects, spark=spark)
        click.echo(printable(f"HTML report: {path}"))
    found = bool(fail_on and summary.count(severity_at_least=fail_on))
    if missing:  # said in its section (and on the page); a typo must not pass unnoticed here either (exit 3)
        named = ", ".join(f"{t}:{p}" for t, p in missing)
        problem = (f"--partition {named}: no snapshot in epoch_lineage for {start} .. {end}, "
                   + ("nothing drawn (the rest of the report is written)" if html else
                      "no lineage shown (the rest of the report is printed)"))
        if not found:
            raise InputError(problem)
        # --fail-on's findings are what a scheduled report alerts on: the partition's missing lineage is said, but
        # does not turn exit 5 into 3 (a deployment without log dirs has no lineage for any partition)
        click.echo(f"epoch-audit: error: {printable(problem)}", err=True)
    if found:
        click.get_current_context().exit(EXIT_FINDINGS)


# ------------------------------------------------------------------------------------------- findings


FINDINGS_FORMATS = ("table", "json", "csv")


@cli.command()
@_target_options
@click.option("--from", "date_from", required=True, metavar="YYYY-MM-DD")
@click.option("--to", "date_to", metavar="YYYY-MM-DD")
@click.option("--severity", type=click.Choice(("info", *SEVERITY_CHOICES)), default="info", show_default=True,
              help="Only findings at or above this severity.")
@click.option("--format", "fmt", type=click.Choice(FINDINGS_FORMATS), default="table", show_default=True,
              help="table for people; json (one object per line) or csv for tools, with every column of the "
                   "findings (evidence, topic_id, correlation ids, each report's numbers).")
@_guarded
def findings(conf: str | None, output_root: str | None, cluster: str | None, date_from: str,
             date_to: str | None, severity: str, fmt: str) -> None:
    """List the findings of a date range, most severe first.

    Exits 3 as `report` does: no report tables at the location, a cluster with no run there, a location that cannot
    be reached, or a range no finished run covers; 4 when a table there cannot be read."""
    import csv
    import json

    from .config import parse_date_range
    from .runlog import spans
    from .summary import REPORT_TABLES, at_least, export_fields, finding_rows, load_findings

    start, end = parse_date_range(date_from, date_to, audited=True)
    config = _config(conf, "findings", output_root=output_root, cluster=cluster)
    _known_summary(config, start, end)
    coverage = _covered(config, start, end)  # an empty listing of a range no run audited would read as "no findings"
    keep = at_least(severity)
    rows = []
    for report_name in REPORT_TABLES:
        t = load_findings(config, report_name, start, end)
        if t is not None:
            rows += [r for r in finding_rows(report_name, t, every_column=fmt != "table") if r["severity"] in keep]
    order = {sev: i for i, sev in enumerate(("critical", "error", "warning", "info"))}
    rows.sort(key=lambda r: (order.get(r["severity"], 9), r["event_ts"] is None, r["event_ts"], r["finding_id"]))

    def text(v: Any) -> str:
        return "" if v is None else v.isoformat() if hasattr(v, "isoformat") else str(v)

    def cell(v: Any) -> str:  # a list (the evidence) as a JSON array: its items are paths, any character in them
        return json.dumps(v, default=text) if isinstance(v, (list, dict)) else text(v)

    # json and csv carry every column of the findings (evidence, topic_id, correlation ids, the report's numbers)
    if fmt == "json":  # one key set for every line, as csv's header (null where a report has no such column)
        fields = export_fields(rows)
        for r in rows:
            click.echo(json.dumps({k: r.get(k) for k in fields}, default=text))
    elif fmt == "csv":
        writer = csv.DictWriter(sys.stdout, fieldnames=export_fields(rows), lineterminator="\n")
        writer.writeheader()
        for r in rows:
            writer.writerow({k: cell(v) for k, v in r.items()})
    else:
        cols = ("event_ts", "severity", "rule", "kind", "subject", "units")
        table = [[printable(text(r[c])) for c in cols] for r in rows]  # ids and names are the evidence's: no escapes
        widths = [max([len(c), *(len(t[i]) for t in table)]) for i, c in enumerate(cols)]
        click.echo("  ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)).rstrip())
        for t in table:
            click.echo("  ".join(v.ljust(w) for v, w in zip(t, widths, strict=True)).rstrip())
        click.echo(printable(f"{len(rows)} findings ({severity} or worse), cluster {config.cluster}, {start} .. {end}"),
                   err=True)
    if coverage is not None and coverage.not_audited:  # on stderr: json/csv stay one record per line
        click.echo(f"not audited (no finished run covers them): {spans(coverage.not_audited)}", err=True)


# ----------------------------------------------------------------------------------------------- init


@cli.command()
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--example", type=click.Choice(("nightly", "databricks", "local")), default="nightly",
              show_default=True, help="Which commented example to start from.")
@click.option("--force", is_flag=True, help="Overwrite PATH if it exists.")
@_guarded
def init(path: str, example: str, force: bool) -> None:
    """Write a commented example config to PATH (the examples ship inside the package)."""
    from .config import example_config_path

    target = Path(path)
    if target.exists() and not force:
        raise ConfigError(f"{target} exists; pass --force to overwrite it")
    text = example_config_path(example).read_text(encoding="utf-8")
    try:
        replace_text(target, text)
    except OSError as e:
        raise SinkError(f"could not write {target}: {e.strerror or e}") from None
    master = "" if example == "local" else (
        ", and [spark] master for runs without spark-submit (\"local[*]\" on one machine)")
    click.echo(printable(f"wrote {target} (from the {example} example): set cluster, [inputs] and [output]{master}, "
                         f"then epoch-audit run --conf {shlex.quote(str(target))} --from YYYY-MM-DD"))


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
    from .config import check_master

    check_master("--master", master)
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
                           say=_say(quiet, t0), warn=_warner([], t0))  # fmt: skip
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
    written and flushed by then (Delta commits are synchronous), so skip that teardown. Before that, a JVM that
    writes the class-data archive (:mod:`jobs.class_cache`) is let finish.
    """
    from .class_cache import finish

    code = 1  # what escapes click (--debug's tracebacks) is a failure
    try:
        cli.main(prog_name="epoch-audit")
        code = 0
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 1)
    finally:
        with contextlib.suppress(OSError, ValueError):
            sys.stdout.flush()
        with contextlib.suppress(BaseException):  # never changes the exit code
            # the first full run's JVM writes the class-data archive as it exits: wait for it (a failed run's ends)
            finish(code)
    sys.stderr.flush()
    os._exit(code)


if __name__ == "__main__":  # pragma: no cover
    main()
