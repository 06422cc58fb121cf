"""One audit run: ingestion, the three reports, and the run's ``audit_runs`` rows.

This is the single call path: the CLI's ``run`` and ``demo``, ``spark-submit.sh``, the Databricks
notebook and the end-to-end tests all call :func:`run_audit` with a ``SparkSession`` and a
:class:`~jobs.config.Config`.
"""

from __future__ import annotations

import datetime as dt
import functools
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from .config import Config, parse_date_range
from .errors import InputError, interruption, one_line
from .runlog import RunContext, SourceStatus
from .schemas import COVERAGE_BY_SOURCE, SILVER_BY_SOURCE, UNIT_DATED_BY_SOURCE

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["AuditResult", "SILVER_BY_SOURCE", "SparkProgress", "covered_days", "reports_only_sources", "rows_per_day",
           "rows_per_table", "run_audit"]


Progress = Callable[[str], None]


@dataclass
class AuditResult:
    """What one run did: its identity, per-source counts, finding counts and timings (seconds)."""

    run: RunContext
    ingest: Any = None
    reports: Any = None
    findings: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    status: str = "ok"
    """``ok | partial | no_input`` (:func:`jobs.runlog.run_status`); a failed run raises instead."""
    sources: dict[str, SourceStatus] = field(default_factory=dict)
    """Each configured source kind's status, totals and days without rows."""
    rows_per_day: dict[dt.date, dict[str, int]] = field(default_factory=dict)
    """Day -> source kind -> silver rows of that day (only days and kinds with rows)."""
    warnings: list[str] = field(default_factory=list)
    """What the run could not judge fully, e.g. the state a rule lacked because neither the inputs nor
    earlier runs reach back over the lookback days, and settings likely to fail its tasks (a
    ``spark.executor.pyspark.memory`` below what a Python worker maps). Printed in the run summary, never silent."""

    @property
    def quarantined(self) -> int:
        return 0 if self.ingest is None else self.ingest.units_quarantined


class SparkProgress:
    """Prints what Spark is doing every ``interval`` seconds while a step runs.

    Spark's console bar says "Stage 12" and nothing else; this names our step (through the job
    description) and counts tasks, so a person can follow a long run. Quiet when nothing runs.
    On Spark Connect (no ``SparkContext``: Databricks shared access mode and serverless) there is neither a job
    description to set nor a status tracker to ask: it says so once and prints no task counts.
    """

    def __init__(self, spark: SparkSession, emit: Progress, interval: float = 10.0) -> None:
        from .session import spark_context

        self._sc = spark_context(spark)
        self._emit = emit
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._step = ""

    def step(self, name: str) -> None:
        self._step = name
        if self._sc is not None:
            self._sc.setJobDescription(f"epoch-audit: {name}")

    def __enter__(self) -> SparkProgress:
        if self._sc is None:
            if self._interval > 0:
                self._emit("spark: a Spark Connect session: no task counts or job descriptions (no SparkContext)")
        elif self._interval > 0:
            self._thread = threading.Thread(target=self._loop, name="epoch-audit-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        if self._sc is not None:
            self._sc.setJobDescription(None)

    def _loop(self) -> None:
        assert self._sc is not None
        tracker = self._sc.statusTracker()
        while not self._stop.wait(self._interval):
            try:
                done = total = 0
                for sid in tracker.getActiveStageIds():
                    info = tracker.getStageInfo(sid)
                    if info is not None:
                        done += info.numCompletedTasks
                        total += info.numTasks
                if total:
                    self._emit(f"  … {self._step}: {done}/{total} tasks done in the active Spark stages")
            except Exception:  # progress is best effort; never break the run for it
                return


def _release(result: AuditResult) -> None:
    """Drop the lookback rows of the inputs (kept by ingestion for the reports: cached frames, and the
    commits' held-back staging files)."""
    release = getattr(result.ingest, "release", None)
    if release is not None:
        release()


def run_audit(
    spark: SparkSession,
    config: Config,
    date_from: dt.date | str,
    date_to: dt.date | str | None = None,
    *,
    reports: Sequence[str] | None = None,
    ingest: bool = True,
    progress: Progress | None = None,
    progress_interval: float = 10.0,
    run_id: str | None = None,
    warn: Progress | None = None,
    on_start: Callable[[RunContext], None] | None = None,
    on_result: Callable[[AuditResult], None] | None = None,
) -> AuditResult:
    """Audit ``[date_from, date_to]``: decode the inputs into silver tables, then write the reports.

    Args:
        spark: the session (a notebook's ``spark``, spark-submit's, or one from
            :func:`jobs.session.get_or_create_session`).
        config: inputs, output, rules (``config.reports`` unless ``reports`` is given).
        date_from, date_to: the inclusive UTC date range whose partitions are replaced.
        reports: which report tables to write; ``()`` for none.
        ingest: False to rerun only the reports over silver tables written earlier.
        progress: called with one human-readable line per step (the CLI prints them).
        warn: called with each of :attr:`AuditResult.warnings` as it arises, also in a run that then
            fails (the CLI prints them under ``--quiet`` too); by default they go to ``progress`` as
            ``warning: ...`` lines.
        progress_interval: seconds between Spark task-count lines (0 turns them off).
        run_id: a fixed run id (tests); a fresh one by default.
        on_start: called with the run's identity (:class:`~jobs.runlog.RunContext`: ``run_id``,
            ``started_at``) before any work, so that a caller can name the run even when it fails (the CLI's
            ``--summary-json`` of a failed run carries the ``run_id`` of its ``audit_runs`` row).
        on_result: called with the run's :class:`AuditResult` before any work; it is filled in as the run goes,
            so that a caller can tell what a run that failed had done (its units counted, source statuses).

    Returns:
        An :class:`AuditResult` whose ``status`` says whether every configured input yielded data
        (``ok``), some did not (``partial``) or none did (``no_input``). Findings are data: a run that
        found problems still succeeded.

    Raises:
        jobs.errors.RunLeaseHeld: another live run of ``config.cluster`` holds the output root's run lease
            (:func:`jobs.sink.hold_run`); nothing is written, not even an ``audit_runs`` row.
        jobs.errors.EpochAuditError: bad configuration, unreadable inputs, a failed table write. A run
            that raises (or is interrupted: KeyboardInterrupt, the CLI's :class:`~jobs.errors.Terminated`) still
            appends its ``audit_runs`` row, with ``status = failed`` and the error,
            followed by the run's warnings so far (unless that write fails too: the original error is
            raised either way).
    """
    from .sink import hold_run

    say = progress or (lambda _line: None)
    on_warning = warn or (lambda text: say(f"warning: {text}"))
    start, end = parse_date_range(date_from, date_to, audited=True)
    reread = () if ingest else reports_only_sources(config)  # --reports-only: the silver tables are the input
    from .session import STUCK_STEPS, size_shuffles

    STUCK_STEPS.clear()  # the steps an earlier run left deadlocked are that run's
    size_shuffles(spark)  # a session handed straight here (a notebook's) is sized as the CLI's; explicit settings win
    run = RunContext.start(config, start, end, run_id=run_id)
    result = AuditResult(run=run)
    # one writing run per cluster and output root; refused (RunLeaseHeld) before anything is written, audit_runs
    # included: the live run's tables are not this one's to touch. Released however the run ends.
    with hold_run(config, run.run_id, warn=on_warning) as lease:
        if lease is not None and lease.took_over:  # (said by whoever took the lease: the CLI, or hold_run here)
            result.warnings.append(lease.took_over)
        _audit(spark, config, start, end, run, result, reports, ingest, reread, say, on_warning, progress_interval,
               on_start, on_result)
    return result


def _audit(spark: SparkSession, config: Config, start: dt.date, end: dt.date, run: RunContext,
           result: AuditResult, reports: Sequence[str] | None, ingest: bool, reread: Sequence[str], say: Progress,
           on_warning: Progress, progress_interval: float, on_start: Callable[[RunContext], None] | None,
           on_result: Callable[[AuditResult], None] | None) -> None:
    """:func:`run_audit` under its run lease: the run, and its ``audit_runs`` row also when it fails."""
    from .runlog import audit_run_table, write_audit_runs
    from .sink import running_as

    if on_start is not None:
        on_start(run)
    if on_result is not None:
        on_result(result)
    say(f"run {run.run_id[:12]}: cluster {config.cluster}, {start} .. {end}, "
        f"output {config.output.table_location('')}")
    try:
        with running_as(run.run_id):
            _run(spark, config, start, end, run, result, reports, ingest, reread, say, on_warning,
                 progress_interval)
    except BaseException as exc:  # also an interrupt: SIGTERM from a scheduler (the CLI's Terminated), Ctrl-C
        result.status = "failed"
        # an interrupt is what ended the run, also when the cleanup on its way out failed (a JVM that it ended)
        cause = interruption(exc) or exc
        # the warnings so far follow the error, e.g. the memory setting that explains a MemoryError
        noted = "".join(f" [warning: {' '.join(w.split())}]" for w in result.warnings)  # one line, as the error
        error = one_line(cause, max(500, 2000 - len(noted))) + noted
        counts = result.ingest.counts if result.ingest is not None else ()
        try:
            write_audit_runs(audit_run_table(run, counts, result.findings, status="failed",
                                             error=error[:2000]), config)
        except Exception as log_exc:  # the table itself may be what failed: keep the first error
            say(f"could not record the failed run in audit_runs: {log_exc}")
        if cause is not exc:
            raise cause from None
        raise


def _run(spark: SparkSession, config: Config, start: dt.date, end: dt.date, run: RunContext,
         result: AuditResult, reports: Sequence[str] | None, ingest: bool, reread: Sequence[str], say: Progress,
         warn: Progress, progress_interval: float) -> None:
    from .ingest import run_ingestion
    from .ingest.metadata import no_exchange_hint
    from .reports import run_reports
    from .runlog import (
        JUDGED_BY_UNITS,
        SourceCounts,
        audit_run_table,
        run_status,
        source_status,
        unit_count,
        write_audit_runs,
    )
    from .session import check_session, named_step, python_memory_warning, shuffles_for_input

    check_session(spark)  # a Spark Connect session that cannot cache (serverless) fails here, not after some writes
    memory = python_memory_warning(spark)  # before the tasks it would fail
    if memory:
        result.warnings.append(memory)
        warn(memory)
    wanted = tuple(config.reports if reports is None else reports)
    configured = [k for k in SILVER_BY_SOURCE if getattr(config.inputs, k)]
    t0 = time.perf_counter()
    counts: tuple[SourceCounts, ...] = ()
    with SparkProgress(spark, say, progress_interval) as tracker, ThreadPoolExecutor(
            1, thread_name_prefix="epoch-audit-completeness") as aside:
        per_day: Future[dict[dt.date, dict[str, int]]] | None = None  # day -> table -> rows
        if ingest:
            tracker.step("ingest")
            say("ingest: decoding inputs into silver tables")
            result.ingest = run_ingestion(spark, config, start, end, run, write_audit=False)
            counts = result.ingest.counts
            result.timings["ingest"] = time.perf_counter() - t0
            for c in counts:
                units = unit_count(c.units_read, c.unit).split(" ", 1)[1]
                say(f"ingest: {c.source_kind:<8} {c.units_read:>10,} {units} read, {c.units_decoded:,} decoded, "
                    f"{c.units_quarantined:,} quarantined, {c.records_decoded:,} records")
            for line in result.ingest.notes():
                say(f"ingest: {line}")
            # what the run read is judged too: a metadata log found inside <logdirs> (cluster_metadata not
            # configured) with a hole made a run that said ok
            configured += [k for k in SILVER_BY_SOURCE if k not in configured
                           and any(c.source_kind == k and c.units_read for c in counts)]
        if ingest and configured and wanted:
            # the completeness counts read only the silver tables just written: counted while the reports run
            tracker.step("completeness")
            per_day = aside.submit(named_step(spark, "rows per day", functools.partial(
                rows_per_table, spark, config, start, end, configured)))
        if wanted:
            t1 = time.perf_counter()
            tracker.step("reports")
            say(f"reports: {', '.join(wanted)}")
            state = getattr(result.ingest, "lookback", None) or None
            # the reports read what this run ingested (and the lookback days): the same width as ingestion
            width = result.ingest.input_bytes if result.ingest is not None else None
            try:
                with shuffles_for_input(spark, width) as in_force:
                    result.reports = run_reports(spark, config, start, end, run, reports=wanted, state=state,
                                                 narrow=in_force == 1,
                                                 ahead=getattr(result.ingest, "lookahead", None) or None)
            finally:
                _release(result)
            result.findings = dict(getattr(result.reports, "findings", {}) or {})
            gaps = list(getattr(result.reports, "lookback_gaps", ()) or ())
            result.warnings.extend(gaps)
            result.timings["reports"] = time.perf_counter() - t1
            for table, n in sorted(result.findings.items()):
                say(f"reports: {table:<24} {n:>8,} findings")
            for line in gaps:
                warn(line)
        if ingest and configured:
            tracker.step("completeness")
            tables = (per_day.result() if per_day is not None
                      else rows_per_table(spark, config, start, end, configured))
            result.rows_per_day = by_source(tables)
            met = {c.source_kind for c in counts}
            # a configured source with no input unit at all still gets its audit_runs row (no_input)
            counts = counts + tuple(SourceCounts(k, "file", 0, 0, 0) for k in configured if k not in met)
            # a source of which the run read no unit kept the rows earlier runs stored (jobs.ingest): said with them
            kept = set(getattr(result.ingest, "kept", ()) or ())
            empty = getattr(result.ingest, "empty", None) or {}
            # the days a source with units in the run kept (none of its units dated then): said with their rows
            kept_days = getattr(result.ingest, "kept_days", None) or {}
            # and the batch rows of the snapshots of such days, carried over whatever day they are dated on
            carried = getattr(result.ingest, "kept_snapshots", None) or {}
            # and with the bad units it kept: a source kept whole, all its quarantine rows of the range (it read
            # none); one kept per day, its rows of the days its unit-dated table kept (the run had none dated then)
            bad_days = {k: set(kept_days.get(UNIT_DATED_BY_SOURCE.get(k, ""), ())) for k in configured}
            bad = quarantined_per_source(spark, config, start, end, by_day=True, other_than=run.run_id) if kept or any(
                bad_days.values()) else Counter()
            result.sources = {
                k: source_status(k, counts, covered_days(tables, k), (start, end),
                                 kept={d: n[k] for d, n in result.rows_per_day.items() if n.get(k)} if k in kept else None,
                                 quarantine_kept=sum(n for (kind, d), n in bad.items() if kind == k and (
                                     k in kept or d in bad_days[k])),
                                 empty=empty_inputs(empty.get(k)), kept_days=kept_rows(tables, k, kept_days, carried))
                for k in configured
            }
            hint = no_exchange_hint(getattr(result.ingest, "infos", ()) or (), config.inputs.broker_ports)
            meta = result.sources.get("metadata")
            if hint and meta is not None and meta.status != "ok":  # a wrong broker_ports: say which ports had traffic
                result.sources["metadata"] = replace(meta, reason=f"{meta.reason}; {hint}" if meta.reason else hint)
        elif not ingest:
            # what the reports read: the silver rows of the range (the configured sources', else every one there)
            # (and the metadata log when <logdirs> is configured: it may have been read from there)
            kinds = [k for k in configured if k in reread] or list(reread)
            if "logdirs" in configured and "cluster_metadata" in reread and "cluster_metadata" not in kinds:
                kinds.append("cluster_metadata")
            tables = rows_per_table(spark, config, start, end, kinds)
            result.rows_per_day = by_source(tables)
            bad = quarantined_per_source(spark, config, start, end)
            result.sources = {k: silver_status(k, covered_days(tables, k), (start, end), quarantined=bad.get(k, 0),
                                               held=k not in JUDGED_BY_UNITS or _silver_rows(config, [k]))
                              for k in kinds}
            result.sources.update({k: silver_status(k, (), (start, end), present=False)
                                   for k in configured if k not in reread})
        if result.sources:
            result.status = run_status(result.sources.values())
            for s in result.sources.values():
                if s.status != "ok":
                    say(f"input: {s.source_kind} is {s.status}: {s.reason}")
    _release(result)
    # one figure for the run's duration: audit_runs' finished_at - started_at, the "done in" line, the JSON summary
    finished = dt.datetime.now(dt.timezone.utc)
    result.timings["total"] = (finished - run.started_at).total_seconds()
    write_audit_runs(audit_run_table(run, counts, result.findings, status=result.status,
                                     sources=result.sources, finished_at=finished), config)
    say(f"done in {result.timings['total']:.1f}s: status {result.status}")


def reports_only_sources(config: Config) -> list[str]:
    """The source kinds whose silver tables a ``--reports-only`` run rereads, checked without Spark (delta-rs reads
    the tables' logs), so that the CLI says a wrong location or a mistyped cluster before a JVM starts.

    Catalog tables (and tables with deletion vectors) cannot be read here: they pass, and the run reads them with
    Spark (a cluster that has no rows there then finds nothing, as before).

    Raises:
        InputError: no silver table at the location, or none holds a row of ``config.cluster`` (naming the clusters
            with runs there, as ``report``/``findings`` do).
    """
    reread = _silver_kinds(config)
    if not reread:  # a wrong location: said before anything is written there
        raise InputError(f"--reports-only: no silver tables at {config.output.table_location('')}: has "
                         "`epoch-audit run` ingested there? (check --output-root / [output])")
    if not _silver_rows(config, reread):  # a mistyped cluster: said as report/findings say it
        from .runlog import clusters_with_runs, no_run_of_cluster

        clusters = clusters_with_runs(config)
        if clusters is not None and config.cluster in clusters:  # its runs stored no silver row
            raise InputError(f"--reports-only: no silver rows of cluster {config.cluster!r} at "
                             f"{config.output.table_location('')}: its runs ingested nothing")
        raise InputError(f"--reports-only: {no_run_of_cluster(config, clusters)}")
    return reread


def _silver_kinds(config: Config) -> list[str]:
    """The source kinds with a silver table at the output location (all of them for catalog tables, which only
    Spark can list)."""
    from .errors import NoTableError, SinkError
    from .sink import table_files

    kinds = []
    for kind, tables in SILVER_BY_SOURCE.items():
        for table in tables:
            try:
                table_files(table, config, cluster=config.cluster, date_range=(dt.date.max, dt.date.max))
            except NoTableError:
                continue
            except SinkError:  # a catalog table, deletion vectors: there, and read by Spark
                pass
            kinds.append(kind)
            break
    return kinds


def _silver_rows(config: Config, kinds: Sequence[str]) -> bool:
    """Whether the silver tables of ``kinds`` hold any row of ``config.cluster``; True when that cannot be told
    without Spark (a catalog table, deletion vectors)."""
    from .errors import NoTableError, SinkError
    from .sink import table_files

    for kind in kinds:
        for table in SILVER_BY_SOURCE[kind]:
            try:
                listed = table_files(table, config, cluster=config.cluster)
            except NoTableError:
                continue
            except SinkError:
                return True
            if any(f.rows or not f.counted for f in listed.files):
                return True
    return False


def silver_status(source_kind: str, days_with_rows: Sequence[dt.date], date_range: tuple[dt.date, dt.date], *,
                  present: bool = True, quarantined: int = 0, held: bool = True) -> SourceStatus:
    """A source's status for a ``--reports-only`` run, which reads no input: judged by its silver rows in the
    range (the metadata log, judged by its units when ingested, by its table being there) and by the
    ``quarantine`` rows the runs that ingested the range stored for it — rows read from damaged input are as
    incomplete on a rerun of the reports as they were when ingested. ``held``: for the metadata log, whether its
    table holds any row of the cluster (the history the reports read): none is ``no_input``, not ``ok``."""
    from .runlog import JUDGED_BY_UNITS, days_of

    have = set(days_with_rows)
    missing = () if source_kind in JUDGED_BY_UNITS else tuple(d for d in days_of(*date_range) if d not in have)
    if not present:
        status, reason = "no_input", "configured, but no silver table of it at the output location"
    elif not held and not quarantined:  # (units the ingest runs quarantined: partial, as they said)
        status, reason = "no_input", "no silver rows of the cluster (--reports-only reads no input)"
    elif missing and len(missing) == len(days_of(*date_range)):
        status, reason = "no_input", "no silver rows in the range (--reports-only reads no input)"
    elif missing or quarantined:
        parts = [f"{quarantined} input units in quarantine for the range"] if quarantined else []
        if missing:
            what = "no snapshots (epoch_lineage rows) on " if source_kind == "logdirs" else "no silver rows on "
            parts.append(what + ", ".join(d.isoformat() for d in missing))
        status, reason = "partial", "; ".join(parts)
    else:
        status, reason = "ok", ""
    return SourceStatus(source_kind, status, 0, 0, 0, 0, missing, reason)  # it read no units: counts stay 0


def empty_inputs(by_reason: Mapping[str, int] | None) -> str:
    """What a source's inputs read with zero units were (:attr:`jobs.ingest.IngestResult.empty`), in words for its
    status reason: ``3 empty files, 1 empty directory named like an input file`` ("" for none) — a folder of
    zero-byte files is not a folder with nothing in it."""
    from .ingest.discover import EMPTY_DIR, EMPTY_FILE
    from .runlog import unit_count

    out = []
    for reason, n in sorted((by_reason or {}).items()):
        if reason == EMPTY_FILE:
            out.append(unit_count(n, "empty file"))
        elif reason == EMPTY_DIR:
            out.append("1 empty directory named like an input file" if n == 1
                       else f"{n:,} empty directories named like input files")
        else:
            out.append(f"{n:,} read with zero units ({reason})")
    return ", ".join(out)


def quarantined_per_source(spark: SparkSession, config: Config, start: dt.date, end: dt.date, *,
                           by_day: bool = False, other_than: str | None = None) -> Counter:
    """``quarantine`` rows per source kind (``by_day``: per (source kind, event date)) in ``[start, end]`` for
    ``config.cluster`` (none when the table is not there); with ``other_than``, only the rows other runs met (what
    that run kept, not its own)."""
    from .runlog import read_quarantine

    if not by_day:
        return Counter(r["source_kind"] for r in read_quarantine(spark, config, (start, end), ["source_kind"]))
    return Counter((r["source_kind"], r["event_date"])
                   for r in read_quarantine(spark, config, (start, end), ["source_kind", "event_date", "run_id"])
                   if other_than is None or r["run_id"] != other_than)


def rows_per_day(spark: SparkSession, config: Config, start: dt.date, end: dt.date,
                 source_kinds: Sequence[str]) -> dict[dt.date, dict[str, int]]:
    """Silver rows per day and source kind in ``[start, end]`` for ``config.cluster`` (:func:`rows_per_table`
    summed per source kind)."""
    return by_source(rows_per_table(spark, config, start, end, source_kinds))


def by_source(per_table: dict[dt.date, dict[str, int]],
              tables_of: dict[str, tuple[str, ...]] = SILVER_BY_SOURCE) -> dict[dt.date, dict[str, int]]:
    """Day -> table -> rows summed per source kind (``tables_of``: each kind's tables); only days and kinds
    with rows."""
    out: dict[dt.date, dict[str, int]] = {}
    for day, counts in per_table.items():
        kinds = {k: n for k, tables in tables_of.items() if (n := sum(counts.get(t, 0) for t in tables))}
        if kinds:
            out[day] = kinds
    return out


def kept_rows(per_table: dict[dt.date, dict[str, int]], source_kind: str,
              kept_days: dict[str, tuple[dt.date, ...]],
              carried: dict[str, dict[dt.date, int]] | None = None) -> dict[dt.date, int]:
    """Day -> the rows of ``source_kind``'s tables on the days each table kept (:attr:`IngestResult.kept_days`),
    plus the rows a write carried over from the snapshots of a kept day (:attr:`IngestResult.kept_snapshots`, by
    snapshot day: the batches a removed snapshot held, dated on that day or earlier ones)."""
    out: dict[dt.date, int] = {}
    for table in SILVER_BY_SOURCE.get(source_kind, ()):
        for d in kept_days.get(table, ()):
            if n := per_table.get(d, {}).get(table, 0):
                out[d] = out.get(d, 0) + n
        for d, n in (carried or {}).get(table, {}).items():
            if n:
                out[d] = out.get(d, 0) + n
    return out


def covered_days(per_table: dict[dt.date, dict[str, int]], source_kind: str) -> list[dt.date]:
    """The days a source covered (:data:`~jobs.schemas.COVERAGE_BY_SOURCE`): for log dirs the days a snapshot
    was taken on, not the days the batches in a later snapshot's segments are dated on."""
    tables = COVERAGE_BY_SOURCE[source_kind]
    return [d for d, counts in sorted(per_table.items()) if any(counts.get(t) for t in tables)]


def rows_per_table(spark: SparkSession, config: Config, start: dt.date, end: dt.date,
                   source_kinds: Sequence[str]) -> dict[dt.date, dict[str, int]]:
    """Silver rows per day and table of ``source_kinds`` in ``[start, end]`` for ``config.cluster`` (a table not
    written yet counts as no rows): from the Delta log's record counts where delta-rs reads the table's log and it
    has them (no Spark job: Spark's count of the 10 M-commit bench run's tables was ~3 JVM CPU-s), else one Spark
    job."""
    from pyspark.sql import functions as F

    from .errors import NoTableError, SinkError
    from .frames import union_all
    from .sink import read_table, table_files

    out: dict[dt.date, dict[str, int]] = {}
    parts = []
    for kind in source_kinds:
        for table in SILVER_BY_SOURCE[kind]:
            try:
                listed = table_files(table, config, cluster=config.cluster, date_range=(start, end))
            except NoTableError:
                continue  # not written yet
            except SinkError:
                listed = None  # a catalog table, deletion vectors: Spark counts it
            if listed is not None and {"cluster", "event_date"} <= set(listed.part_cols) and all(
                    f.counted and isinstance(f.values.get("event_date"), dt.date) for f in listed.files):
                for f in listed.files:
                    if f.rows:
                        day = out.setdefault(f.values["event_date"], {})
                        day[table] = day.get(table, 0) + f.rows
                continue
            try:
                df = read_table(spark, table, config, cluster=config.cluster, date_range=(start, end))
            except Exception as exc:  # not written yet (SinkError, or Spark's AnalysisException for catalogs)
                if not isinstance(exc, SinkError) and "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
                    raise
                continue
            parts.append(df.select(F.lit(table).alias("_table"), F.col("event_date")))
    if parts:
        for r in union_all(parts).groupBy("event_date", "_table").count().collect():
            day = out.setdefault(r["event_date"], {})
            day[r["_table"]] = day.get(r["_table"], 0) + int(r["count"])
    return dict(sorted(out.items()))
