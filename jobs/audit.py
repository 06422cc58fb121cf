"""One audit run: ingestion, the three reports, and the run's ``audit_runs`` rows.

This is the single call path: the CLI's ``run`` and ``demo``, ``spark-submit.sh``, the Databricks
notebook and the end-to-end tests all call :func:`run_audit` with a ``SparkSession`` and a
:class:`~jobs.config.Config`.
"""

from __future__ import annotations

import datetime as dt
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .config import Config, parse_date_range
from .runlog import RunContext

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["AuditResult", "run_audit", "SparkProgress"]

Progress = Callable[[str], None]


@dataclass
class AuditResult:
    """What one run did: its identity, per-source counts, finding counts and timings (seconds)."""

    run: RunContext
    ingest: Any = None
    reports: Any = None
    findings: dict[str, int] = field(default_factory=dict)
    timings: dict[str, float] = field(default_factory=dict)
    status: str = "succeeded"

    @property
    def quarantined(self) -> int:
        return 0 if self.ingest is None else self.ingest.units_quarantined


class SparkProgress:
    """Prints what Spark is doing every ``interval`` seconds while a step runs.

    Spark's console bar says "Stage 12" and nothing else; this names our step (through the job
    description) and counts tasks, so a person can follow a long run. Quiet when nothing runs.
    """

    def __init__(self, spark: SparkSession, emit: Progress, interval: float = 10.0) -> None:
        self._sc = spark.sparkContext
        self._emit = emit
        self._interval = interval
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._step = ""

    def step(self, name: str) -> None:
        self._step = name
        self._sc.setJobDescription(f"epoch-audit: {name}")

    def __enter__(self) -> SparkProgress:
        if self._interval > 0:
            self._thread = threading.Thread(target=self._loop, name="epoch-audit-progress", daemon=True)
            self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)
        self._sc.setJobDescription(None)

    def _loop(self) -> None:
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
        progress_interval: seconds between Spark task-count lines (0 turns them off).
        run_id: a fixed run id (tests); a fresh one by default.

    Returns:
        An :class:`AuditResult`. Findings are data: a run that found problems still succeeded.

    Raises:
        jobs.errors.EpochAuditError: bad configuration, unreadable inputs, a failed table write.
    """
    from .ingest import run_ingestion
    from .reports import run_reports
    from .runlog import SourceCounts, audit_run_table, write_audit_runs

    say = progress or (lambda _line: None)
    start, end = parse_date_range(date_from, date_to)
    run = RunContext.start(config, start, end, run_id=run_id)
    wanted = tuple(config.reports if reports is None else reports)
    result = AuditResult(run=run)
    say(f"run {run.run_id[:12]}: cluster {config.cluster}, {start} .. {end}, "
        f"output {config.output.table_location('')}")
    t0 = time.perf_counter()
    counts: tuple[SourceCounts, ...] = ()
    with SparkProgress(spark, say, progress_interval) as tracker:
        if ingest:
            tracker.step("ingest")
            say("ingest: decoding inputs into silver tables")
            result.ingest = run_ingestion(spark, config, start, end, run, write_audit=False)
            counts = result.ingest.counts
            result.timings["ingest"] = time.perf_counter() - t0
            for c in counts:
                units = "batches" if c.unit == "batch" else f"{c.unit}s"
                say(f"ingest: {c.source_kind:<8} {c.units_read:>10,} {units} read, {c.units_decoded:,} decoded, "
                    f"{c.units_quarantined:,} quarantined, {c.records_decoded:,} records")
        if wanted:
            t1 = time.perf_counter()
            tracker.step("reports")
            say(f"reports: {', '.join(wanted)}")
            result.reports = run_reports(spark, config, start, end, run, reports=wanted)
            result.findings = dict(getattr(result.reports, "findings", {}) or {})
            result.timings["reports"] = time.perf_counter() - t1
            for table, n in sorted(result.findings.items()):
                say(f"reports: {table:<24} {n:>8,} findings")
    result.timings["total"] = time.perf_counter() - t0
    write_audit_runs(audit_run_table(run, counts, result.findings, status=result.status), config)
    say(f"done in {result.timings['total']:.1f}s")
    return result
