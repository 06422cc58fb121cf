"""Report jobs: silver Delta tables -> the three gold report tables (and ``stale_metadata_rates``).

:func:`run_reports` is the one call path (CLI, notebook, tests)::

    result = run_reports(spark, config, "2024-03-04", "2024-03-04")
    result.counts    # {"stale_metadata": 3, "stale_metadata_rates": 14, "fencing_violations": 9, ...}
    result.findings  # the same without the rates table: the ``findings`` map of ``audit_runs``

Every report reads the silver tables of ``[from - lookback_days, to]`` (state from before the range:
baselines, earlier commits, lineage snapshots, group records; of the group records also the latest of each
kind per group from any earlier day, :func:`.resets.group_records`) — together with the rows the run's own
inputs hold for the lookback days (``state``: ingestion decodes them but writes only the range), so a
first run or an incident run into a fresh output root judges the range as a run over the whole window
would — applies the rules of
:mod:`epochlib.rules` on the executors (grouped Arrow functions, window functions and joins; see the
modules :mod:`.stale_metadata`, :mod:`.fencing`, :mod:`.resets`, :mod:`.kraft` (the metadata-log rules K1,
K2, M5, P1, M2 timed from the log, the metadata lag, and the K2 cause of F2/L5/S1 findings), and
:mod:`.commit_pass`, the one pass over the commits that both F2/F4 and S1/S2 come from), keeps the findings
whose event lies in
``[from, to]`` and writes each table with replace-range semantics (the run's ``event_date`` partitions of
the cluster are replaced, so a rerun gives the same rows and other dates are untouched).

Finding ids are :func:`epochlib.rules.finding_id` (a hash of rule, kind, event time, subject, numbers and
evidence): the same silver rows, range and settings give the same ids.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..config import REPORTS, Config
from ..errors import ConfigError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..runlog import RunContext
    from ..sink import SinkResult

__all__ = ["ReportResult", "run_reports"]

RATES_TABLE = "stale_metadata_rates"
#: What one report table's write step returns: the sink's result, the rows per (rule, kind, severity) (None
#: for the rates), the row count and the seconds it took.
_Written = tuple["SinkResult", "dict[tuple, int] | None", int, float]


@dataclass(frozen=True)
class ReportResult:
    """What a report run wrote.

    Attributes:
        run: the run's identity (cluster, range, run id).
        counts: table -> rows written (the three reports' findings, and ``stale_metadata_rates`` rows
            when ``stale_metadata`` ran) — the ``findings`` map of ``audit_runs``.
        by_kind: table -> {(rule, kind, severity): findings}.
        tables: table -> :class:`jobs.sink.SinkResult` of its write.
        lookback_gaps: one sentence per silver table whose rows do not reach back over the lookback days
            (inputs and earlier runs together): the state the rules named there went without.
        seconds: table -> wall time of computing and writing it (the shared F2/F4 + S1/S2 commit pass runs in a
            step of its own, or inside the first of the two tables written; ``commit_pass`` is only its planning
            time).
    """

    run: RunContext
    counts: dict[str, int] = field(default_factory=dict)
    by_kind: dict[str, dict[tuple[str, str, str], int]] = field(default_factory=dict)
    tables: dict[str, SinkResult] = field(default_factory=dict)
    seconds: dict[str, float] = field(default_factory=dict)
    lookback_gaps: list[str] = field(default_factory=list)

    @property
    def findings(self) -> dict[str, int]:
        """Report table -> findings written (the ``findings`` map of ``audit_runs``; no rates rows)."""
        return {t: n for t, n in self.counts.items() if t in REPORTS}

    @property
    def total(self) -> int:
        """Findings written over the report tables."""
        return sum(self.findings.values())


#: The silver tables whose earlier rows each report needs as state (checked by ``lookback_gaps``).
_READS = {
    "stale_metadata": ("metadata_observations",),
    "fencing_violations": ("epoch_lineage", "offset_commits"),
    "spurious_offset_resets": ("epoch_lineage", "offset_commits", "group_metadata", "metadata_observations"),
}


def written_kinds(
    spark: SparkSession, config: Config, table: str, rng: tuple[dt.date, dt.date], cluster: str,
    keys: tuple[str, ...],
) -> dict[tuple, int]:
    """Rows per ``keys`` that ``table`` holds for ``cluster`` x ``rng`` (after a replace-range write: the
    run's own rows). Read through delta-rs into the driver (a findings table's range is small), or with
    one Spark aggregation for a catalog table or when delta-rs cannot read it."""
    from ..errors import SinkError
    from ..sink import read_table, read_table_arrow

    try:
        rows = read_table_arrow(table, config, cluster=cluster, date_range=rng, columns=list(keys))
    except SinkError:
        rows = None
    if rows is not None:
        if not keys:
            return {(): rows.num_rows}
        agg = rows.group_by(list(keys)).aggregate([([], "count_all")])
        return {tuple(r[k] for k in keys): int(r["count_all"]) for r in agg.to_pylist()}
    df = read_table(spark, table, config, cluster=cluster, date_range=rng)
    return {tuple(r[k] for k in keys): int(r["count"]) for r in df.groupBy(*keys).count().collect()}


def _window(run: RunContext, config: Config) -> tuple[dt.date, dt.date]:
    return (run.range_from - dt.timedelta(days=int(config.rules.lookback_days)), run.range_to)


def _reports(config: Config, reports: Iterable[str] | None) -> tuple[str, ...]:
    wanted = tuple(reports) if reports is not None else tuple(config.reports)
    unknown = [r for r in wanted if r not in REPORTS]
    if unknown:
        raise ConfigError(f"unknown report(s) {', '.join(unknown)}; valid: {', '.join(REPORTS)}")
    return tuple(r for r in REPORTS if r in wanted)


def _drop(df: DataFrame) -> None:
    """Release a kept frame: its cache, or a local checkpoint's blocks (through the JVM plan, Spark Classic; where
    that is not reachable Spark's cleaner drops them once the frame is gone)."""
    from ..session import unpersist

    if not unpersist(df):  # a deadlocked step holds a cache's lock: its blocks stay
        return
    with contextlib.suppress(Exception):
        plan = df._jdf.logicalPlan()
        if plan.getClass().getSimpleName() == "LogicalRDD":
            plan.rdd().unpersist(False)


def run_reports(
    spark: SparkSession,
    config: Config,
    date_from: dt.date | str,
    date_to: dt.date | str | None = None,
    run: RunContext | None = None,
    reports: Iterable[str] | None = None,
    state: Mapping[str, DataFrame] | None = None,
    *,
    narrow: bool = False,
    ahead: Mapping[str, DataFrame] | None = None,
) -> ReportResult:
    """Compute and write the report tables for ``[date_from, date_to]``.

    Args:
        spark: the session.
        config: output location, cluster and ``[rules]`` settings (lookback, correlation window,
            stale grace, snapshot tolerance); ``config.reports`` when ``reports`` is None.
        date_from, date_to: inclusive ``event_date`` range of the findings (``date_to`` defaults to
            ``date_from``); ignored when ``run`` is given.
        run: the run's :class:`~jobs.runlog.RunContext` (shared with ingestion); a new one by default.
        reports: any of ``stale_metadata``, ``fencing_violations``, ``spurious_offset_resets``.
        state: silver table -> rows decoded from the run's inputs dated in the lookback days before the
            range (:attr:`jobs.ingest.IngestResult.lookback`); added to what earlier runs wrote for them.
        narrow: the run is small (one shuffle partition, :func:`jobs.session.shuffles_for_input`): the parts
            several reports share are computed into local checkpoints as soon as they are planned.
        ahead: ``epoch_lineage`` -> the run's inputs' snapshots of the day after the range
            (:attr:`jobs.ingest.IngestResult.lookahead`): with what earlier runs wrote for that day, F2/S1/S2
            judge a commit late on the last day against the first snapshot round after it.

    Returns:
        A :class:`ReportResult` with per-table counts.

    Raises:
        ConfigError: an unknown report name or a bad date range. SinkError: a write failed.
    """
    from pyspark import StorageLevel

    from ..runlog import RunContext
    from ..session import Once, run_concurrently
    from ..sink import write_table
    from . import _frames as fr
    from . import commit_pass, fencing, kraft, metadata_pass, resets, stale_metadata
    from .commit_spill import CommitSpill

    if run is None:
        run = RunContext.start(config, date_from, date_to)
    wanted = _reports(config, reports)
    window = _window(run, config)
    rng = run.date_range
    cluster = run.cluster
    result = ReportResult(run=run)
    inputs = fr.InputState(before=run.range_from, frames=dict(state)) if state else None
    needs = {t for r in wanted for t in _READS[r]}

    def gaps() -> list[str]:  # a step of its own, beside the writes (it was ~1 s before them)
        # from the Delta logs where they tell (the delta-rs sink: a Spark job and four table reads less to plan),
        # else one Spark job over the tables' rows
        known = {t: f for t in sorted(needs)
                 if (f := fr.log_gap_facts(spark, config, t, cluster, window, run.range_from, inputs)) is not None}
        frames = {t: fr.read_silver(spark, config, t, cluster, window, inputs).select("event_date")
                  for t in sorted(needs) if t not in known}
        return fr.lookback_gaps(frames, window, run.range_from, known)

    cached: list[DataFrame] = []
    spills: list[CommitSpill] = []

    def keep(df: DataFrame) -> DataFrame:
        # a part several steps read (the caller's frame holds its rows; released when the reports are written).
        # In a narrow run it is computed at once into a local checkpoint: the plans built on it then start from its
        # rows instead of repeating its whole plan, whose analysis, again for every frame derived from it, was ~1 s
        # of the fencing step (BENCHMARKS.md, eleventh round). It is checkpointed in one partition: a union of rule
        # outputs has a partition per rule, each a task of every stage that reads it, and one partition, like the
        # narrow run's table reads, needs no shuffle for the joins and groupings over it (twenty-first round; the
        # parts of a union are then computed one after the other, in a run this small a few seconds at most).
        # Otherwise it is cached, computed by the first write that reads it
        df = df.coalesce(1).localCheckpoint(eager=True) if narrow else df.persist(StorageLevel.MEMORY_AND_DISK)
        cached.append(df)
        return df

    def write(plan: Callable[[], DataFrame], table: str) -> None:
        # the table's plan is built in its write step (a shared part, e.g. the commit pass, is computed by the
        # first step that needs it while the other steps run theirs), then written straight from the plan (no
        # persist, no count before the write: each was a Spark job of its own); the per-kind counts are read
        # back from the few rows just written
        def step() -> _Written:
            started = time.perf_counter()
            written = write_table(plan(), table, config=config, date_range=rng, cluster=cluster)
            kinds = None
            if table == RATES_TABLE:
                count = (written.rows_written if written.rows_written is not None
                         else sum(written_kinds(spark, config, table, rng, cluster, ()).values()))
            else:
                kinds = written_kinds(spark, config, table, rng, cluster, ("rule", "kind", "severity"))
                count = sum(kinds.values())
            return written, kinds, count, time.perf_counter() - started

        writes.append((table, step))

    # every report's write step starts at once (jobs.session.run_concurrently) and builds its plan there; the
    # findings they share (kept) are computed once, by whichever step asks first (Once), so the one-task
    # metadata pass and the commit pass's spill run side by side instead of one after the other. A failure of
    # a shared part fails every step that needs it; the others still write their tables (as when a write
    # fails), and the run raises the first failure
    writes: list[tuple[str, Callable[[], _Written]]] = []
    try:
        grace = int(config.rules.stale_grace_ms)
        # the replayed metadata log (small; empty without one), loaded by the first step that needs it
        load_log = Once(lambda: kraft.load(spark, config, cluster, window, inputs,
                                           (ahead or {}).get("partition_history")))

        def plain_observations() -> DataFrame:
            # the observations (id-filled rows kept: the fill is Python over every id-less response)
            return kraft.with_topic_ids(stale_metadata.observations(spark, config, cluster, window, inputs),
                                        load_log.get(), keep)

        plain_obs = Once(plain_observations)

        def observations() -> tuple[DataFrame, bool]:
            # the observations as the Spark-fed paths read them: the one task, or the ~25 stages of M1/M2/M3, the
            # token frontier, M5, M2 from the log, the rates and the lag. When they fit the one task (whose responses
            # and lags the rates then read), its few other readers scan just the columns they need; the Spark stages
            # read them from one cache (a cache of every column of a million rows cost ~7 JVM CPU-s at 10 M commits,
            # more than the scans it saved)
            plain = plain_obs.get()
            fits = metadata_pass.fits_one_task(plain)
            return (plain if fits else keep(plain)), fits

        obs_once = Once(observations)
        # the files pass applies (the delta-rs sink, at most one_task_rows observations in the Delta log): decided on
        # the driver from the log, before any Spark job
        files = Once(lambda: metadata_pass.ObservationFiles.plan(spark, config, cluster, window, inputs))

        def metadata() -> tuple[DataFrame, DataFrame | None, DataFrame | None]:
            ev = load_log.get()
            index = ev.index if ev.present else None
            # every M-finding, every response and the lag per response in one Python task when the observations
            # fit one: reading the table's files itself where it can, else handed the rows by Spark
            plan = files.get()
            one = plan.run(spark, grace, index, ev.view if ev.present else None, keep) if plan is not None else None
            if one is None:
                obs, fits = obs_once.get()
                one = metadata_pass.metadata_pass(obs, grace, index, keep, fits=fits)
            if one is not None:
                return one.findings, one.lags, one.responses
            obs = obs_once.get()[0]
            return keep(kraft.metadata_findings(obs, stale_metadata.metadata_findings(obs, grace), ev, grace,
                                                keep=keep)), None, None

        def other_readers() -> DataFrame:
            # the observations for P1 (without a log): the plain frame when the one task reads the files (nothing
            # else reads them then), else what the Spark-fed paths read. (Should the files' task then find them unfit
            # for one task, the Spark stages cache them and P1 has scanned them once more: the same rows.)
            return plain_obs.get() if files.get() is not None else obs_once.get()[0]

        meta = Once(metadata)
        if "stale_metadata" in wanted:
            def rates_plan() -> DataFrame:
                findings, lags, responses = meta.get()
                # the responses the one task found, else the observations (the Spark stages' path)
                rows = responses if responses is not None else obs_once.get()[0]
                return kraft.add_lag(stale_metadata.stale_rates_frame(rows, findings, rng, cluster), rows,
                                     load_log.get(), grace, lags=lags)

            write(lambda: stale_metadata.stale_metadata_frame(meta.get()[0], rng, cluster, run.run_id), "stale_metadata")
            write(rates_plan, RATES_TABLE)
        want_f, want_s = "fencing_violations" in wanted, "spurious_offset_resets" in wanted
        if want_f or want_s:
            tol = int(config.rules.snapshot_tolerance_seconds) * 1000
            lineage = Once(lambda: keep(fencing.lineage(spark, config, cluster, window, inputs)))

            # the next day's snapshots: the first round after a late commit (F2/S1/S2), and the lineage of a
            # snapshot just after midnight whose segments hold batches of the range's last day (L3)
            after = Once(lambda: fencing.lineage_ahead(spark, config, cluster, rng[1],
                                                       (ahead or {}).get("epoch_lineage")))

            def commit_lineage() -> DataFrame:
                return lineage.get() if after.get() is None else lineage.get().unionByName(after.get())

            def commit_found() -> DataFrame:
                t0 = time.perf_counter()
                lin = commit_lineage()
                groups = resets.group_records(spark, config, cluster, window, inputs) if want_s else None
                # one pass over the commits for F2/F4 and S1/S2 (the findings, few, are kept for both reports)
                # each topic id's creation time (the metadata log's): a commit before the creation of the topic id of
                # the round that would judge it is not judged (no round of the older incarnation may be there)
                created = load_log.get().view.created or None
                spill = CommitSpill.plan(spark, config, cluster, window, inputs)
                if spill is not None:  # a large run on the delta-rs sink: the pass without Spark's row shuffle
                    spills.append(spill)
                    found = spill.findings(lin, groups, tolerance_ms=tol, fencing=want_f, resets=want_s,
                                           topic_created=created)
                else:
                    found = commit_pass.commit_findings(commits.get(), lin, groups, tolerance_ms=tol, fencing=want_f,
                                                        resets=want_s, topic_created=created)
                # planning (and a spill's jobs): the pass itself runs with the first step that reads it (in a narrow
                # run, when it is kept here)
                result.seconds["commit_pass"] = time.perf_counter() - t0
                return keep(found)

            def commit_side() -> tuple[DataFrame, DataFrame]:
                found = commit_once.get()
                # K1, K2, P1 (the K2 rows also name the cause of later F2/L5/S1 findings)
                # P1 reads the observations only without a metadata log (the expansions come from the log when
                # there is one): then this step need not wait for them
                ev = load_log.get()
                obs = None if ev.present else other_readers()
                return found, keep(kraft.fencing_findings(spark, config, cluster, window, ev, lineage.get(),
                                                          commits.get(), obs, inputs))

            commits = Once(lambda: commit_pass.read_commits(spark, config, cluster, window, inputs))
            commit_once = Once(commit_found)
            shared = Once(commit_side)
            def causes() -> DataFrame | None:  # the K2 rows, when there is a metadata log
                return shared.get()[1] if load_log.get().present else None

            if want_f:
                def fencing_plan() -> DataFrame:
                    commit_found, kraft_found = shared.get()
                    found = fencing.fencing_findings(spark, config, cluster, window, lineage_df=lineage.get(),
                                                     commit_findings_df=commit_found, state=inputs,
                                                     lineage_ahead=after.get())
                    found = kraft.add_causes(found.unionByName(kraft_found), causes(), keep=keep)
                    return fencing.fencing_frame(found, rng, cluster, run.run_id)

                write(fencing_plan, "fencing_violations")
            if want_s:
                def resets_plan() -> DataFrame:
                    found = resets.resets_in_range(shared.get()[0], meta.get()[0], rng,
                                                   window_ms=int(config.rules.correlation_window_minutes) * 60_000,
                                                   observations=other_readers)
                    found = kraft.add_causes(found, causes(), keep=keep)
                    return resets.resets_frame(found, rng, cluster, run.run_id)

                write(resets_plan, "spurious_offset_resets")
        steps = [*writes, ("_lookback_gaps", gaps)]
        if (want_f or want_s) and not narrow:
            def commit_pass_now() -> None:
                # the commit pass's findings (cached) computed as soon as they are planned: the first write that
                # reads them builds its whole plan first (the L/D rules, the causes: 2.3-3.7 s of the driver at
                # 10 M bench commits) while the pass's 10 bucket tasks waited. A write that reads them meanwhile
                # waits for the same cached blocks (a narrow run's kept frames are computed when kept). Only a warm-up:
                # should its job fail, the writes compute the frame themselves and report a real failure
                found = commit_once.get()  # planning errors reach every reader alike
                with contextlib.suppress(Exception):
                    found.count()

            steps.append(("_commit_pass", commit_pass_now))
        done = run_concurrently(spark, steps, workers=len(steps))  # the small gap check beside, not after, a write
        result.lookback_gaps.extend(done.pop("_lookback_gaps"))
        done.pop("_commit_pass", None)
        for table, (written, kinds, count, seconds) in done.items():
            result.tables[table] = written
            if kinds is not None:
                result.by_kind[table] = kinds
            result.counts[table] = count
            result.seconds[table] = seconds
    finally:
        for df in cached:
            _drop(df)
        for spill in spills:
            spill.close()
    return result
