"""Ingestion: every input -> silver Delta tables, plus ``quarantine`` and ``audit_runs`` rows.

:func:`run_ingestion` is the one call path (CLI, notebook and tests)::

    result = run_ingestion(spark, config, "2024-05-01", "2024-05-01")

1. discovery lists the configured input roots (driver: names and sizes only, :mod:`.discover`);
2. executors decode the files through ``mapInArrow`` into per-kind *work* rows (:mod:`.offsets` with
   :mod:`.offsets_segments`, :mod:`.kvdumps` and :mod:`.textdumps`; :mod:`.logdirs`; :mod:`.metadata`;
   large segments in byte ranges, :mod:`.ranges`; KRaft metadata logs, :mod:`.cluster_metadata`, decoded per
   file and replayed in one task), which are persisted once and shaped into ``group_metadata``,
   ``record_batches``, ``epoch_lineage``, ``metadata_observations`` and ``partition_history``. The
   high-volume ``offset_commits`` and ``metadata_observations`` do not go through the work rows with the
   delta-rs sink: one pass decodes each input once, its tasks write the table's Parquet files for the sink
   with pyarrow and the small rest (transactional commits and markers for ``txn_state``, groups,
   quarantine, stats, notes) next to them as the work rows (:mod:`.pass_files`: :mod:`.commit_files`,
   :class:`.metadata.CaptureFiles`); with delta-spark a commit pass decodes the commits straight into their
   silver shape for Spark to write, a side pass decodes the rest, and the observations come from the
   cached work rows;
3. every table is written through :func:`jobs.sink.write_table` replacing exactly the run's
   ``[from, to]`` ``event_date`` partitions: rows whose own date lies outside the range are not written;
   rows without any time of their own land on the ``from`` date. A configured source of which the run finds no
   input unit at all (:attr:`IngestResult.kept`) is not written: its rows of the range stay as earlier runs
   stored them (dumps rotated away must not erase what was collected). So, per table and day, is a day of the range
   a source with input gets no row of the table on and no bad unit dated on (:attr:`IngestResult.kept_days`,
   ``write_table(keep_days=...)``): the inputs of that day are gone, not empty. The ``record_batches`` rows of the
   snapshots of a day ``epoch_lineage`` kept are written again with the run's own
   (:attr:`IngestResult.kept_snapshots`): a later snapshot dates batches on that day too, and must not replace the
   ones only the removed snapshot held. The rows dated in the lookback days before ``from``
   (``[rules] lookback_days``) are kept, not written, as :attr:`IngestResult.lookback`: detection state the reports
   add to what earlier runs wrote for those days (a first run, or an incident run into a fresh output root, has no
   earlier runs). A table's state comes from its one write:
   it stages the lookback days too and the sink holds those files back from the table
   (``write_table(hold_back=...)``) until :meth:`IngestResult.release` — every table's on the delta-rs sink,
   the commits' with delta-spark, where the other tables' state is cached from the work rows;
4. ``quarantine`` gets one row per undecodable unit (and per unrecognised file), and ``audit_runs`` one
   row per (source kind, unit) with ``units_read = units_decoded + units_quarantined`` — counted by Spark
   aggregations over per-task stats rows, over *all* units read (not only those dated in the range).
"""

from __future__ import annotations

import datetime as dt
import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from jobs.schemas import SILVER_BY_SOURCE, UNIT_DATED_BY_SOURCE

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import Column, DataFrame, SparkSession

    from jobs.config import Config
    from jobs.runlog import RunContext, SourceCounts
    from jobs.sink import HeldRows, SinkResult

    from .discover import Inventory

__all__ = ["DEFAULT_SPLIT_BYTES", "WHOLE_HISTORY_STATE", "IngestResult", "lookback_days", "run_ingestion"]

#: Segment files larger than this are decoded in ranges of about this size, in parallel.
DEFAULT_SPLIT_BYTES = 64 << 20

SILVER = ("offset_commits", "group_metadata", "record_batches", "epoch_lineage", "metadata_observations",
          "partition_history")
#: The input kind each silver table comes from (``[inputs]`` keys).
_SOURCE_OF = {table: kind for kind, tables in SILVER_BY_SOURCE.items() for table in tables}
#: Work frames whose side rows belong to another source kind (the metadata-log replay step).
_WORK_KIND = {"cluster_metadata_replay": "cluster_metadata"}


@dataclass(frozen=True)
class IngestResult:
    """What an ingestion run did.

    Attributes:
        run: the run's identity (run id, cluster, range).
        counts: per (source kind, unit): units read / decoded / quarantined and silver rows produced;
            each satisfies ``units_read == units_decoded + units_quarantined``.
        tables: table name -> :class:`jobs.sink.SinkResult` of its write (silver, quarantine, audit_runs).
        files: number of input files decoded, unrecognised (quarantined), ignored, empty (read with zero
            units: zero-byte segments and dumps, empty directories named like files) and skipped (not
            read: symlinks out of the root, loops, FIFOs …), by source kind.
        skipped: source kind -> reason -> number of entries skipped (see ``files``).
        infos: decoder notes that are neither units nor quarantine (e.g. TLS to ports that are not broker
            ports).
        empty: source kind -> reason -> number of inputs read with zero units.
        lookback: silver table -> the inputs' rows dated in the lookback days before the range (the Parquet
            files its write held back, or with delta-spark cached; not written to the tables); for the tables of
            :data:`WHOLE_HISTORY_STATE`, every day before the range: pass to :func:`jobs.reports.run_reports` as
            ``state``, then :meth:`release`.
        lookahead: what the inputs hold after the range (cached, not written): ``epoch_lineage``, the snapshots
            of the next day (the first snapshot round after a commit late on the range's last day is there, and
            F2/S1/S2 judge the commit against it, as a run over both days does), and ``partition_history``, the
            metadata log's later changes (the reports read the whole retained log, as a longer run does). Pass
            as ``ahead``, then :meth:`release`.
    """

    run: RunContext
    counts: tuple[SourceCounts, ...]
    tables: dict[str, SinkResult] = field(default_factory=dict)
    files: dict[str, dict[str, int]] = field(default_factory=dict)
    lookback: dict[str, DataFrame] = field(default_factory=dict)
    skipped: dict[str, dict[str, int]] = field(default_factory=dict)
    empty: dict[str, dict[str, int]] = field(default_factory=dict)
    input_bytes: int = 0
    """Bytes of the input files discovered (what the shuffle width was sized to)."""
    infos: tuple[str, ...] = ()
    """Notes from the decoders that are neither counts nor quarantine (TLS on ports that are not broker ports)."""
    held: tuple[HeldRows, ...] = ()
    """The sink's held-back lookback rows behind :attr:`lookback` (dropped by :meth:`release`)."""
    lookahead: dict[str, DataFrame] = field(default_factory=dict)
    kept: tuple[str, ...] = ()
    """The configured source kinds of which the run read no unit at all: their silver tables' rows of the range
    were not replaced (the rows earlier runs stored stay, and the reports read them), nor their quarantine rows."""
    kept_days: dict[str, tuple[dt.date, ...]] = field(default_factory=dict)
    """Silver table -> the days of the range its write left as earlier runs stored them: its source (one of
    :data:`~jobs.schemas.UNIT_DATED_BY_SOURCE`'s) had units in the run, but the table got no row on the day and
    the source no bad unit dated (its dumps of that day rotated away, that day's snapshot folder removed). The source's quarantine rows of a
    day its unit-dated table kept are kept too, and so are the ``record_batches`` rows of the snapshots taken on a
    day ``epoch_lineage`` kept, whatever day their batches are dated on (:attr:`kept_snapshots`): a later
    snapshot's segments date batches on that day too, so that table's day is written, not kept, yet the batches
    only the removed snapshots held must stay."""
    kept_snapshots: dict[str, dict[dt.date, int]] = field(default_factory=dict)
    """Silver table (``record_batches``) -> day of the snapshots -> the rows earlier runs stored from the snapshots
    of that day (a day :attr:`kept_days` names for ``epoch_lineage``) that its write carried over unchanged."""

    def release(self) -> None:
        """Drop the lookback and lookahead state (cached frames, held-back staging files) once the reports have
        read it."""
        _release(self.held, self.lookback, self.lookahead)

    def notes(self) -> list[str]:
        """One line per source kind that had inputs read with zero units or entries skipped, with the
        reasons (printed with the run's progress lines)."""
        out = []
        for kind in sorted(set(self.skipped) | set(self.empty)):
            for label, by in (("read with zero units", self.empty.get(kind)),
                              ("skipped, not read", self.skipped.get(kind))):
                if by:
                    n = sum(by.values())
                    why = "; ".join(f"{c} {r}" for r, c in sorted(by.items()))
                    out.append(f"{kind}: {n} entr{'y' if n == 1 else 'ies'} {label} ({why})")
        for c in self.counts:
            n = c.units_unpaired or 0
            if not n:
                continue
            if c.unit == "frame":
                out.append(f"{c.source_kind}: {n} capture frames unpaired or cut by the capture (counted in "
                           "audit_runs.units_unpaired, not quarantined)")
            else:  # segment batches
                out.append(f"{c.source_kind}: {n} segment file{'s' if n != 1 else ''} end{'' if n != 1 else 's'} "
                           "inside a batch, as a copy of the active segment taken while the broker wrote it does "
                           "(Kafka reads the log up to there): counted in audit_runs.units_unpaired, not quarantined")
        return out + list(self.infos)

    def count(self, source_kind: str, unit: str) -> SourceCounts | None:
        """The counts of one (source kind, unit), None when that unit was not met."""
        return next((c for c in self.counts if c.source_kind == source_kind and c.unit == unit), None)

    @property
    def units_quarantined(self) -> int:
        return sum(c.units_quarantined for c in self.counts)


def _event_date(ts: Column, default: dt.date) -> Column:
    """UTC date of a timestamp, independent of the session time zone; ``default`` when null."""
    from pyspark.sql import functions as F

    # exact: floor(micros / day) in doubles put the last microseconds of a day far from 1970 on the next day
    us, day = F.unix_micros(ts), F.lit(86_400_000_000)
    days = F.round((us - F.pmod(us, day)) / day).cast("int")
    return F.coalesce(F.date_from_unix_date(days), F.lit(default))


def _utc_day(ms: int | None, default: dt.date) -> dt.date:
    """UTC date of epoch milliseconds (a snapshot's time, as :func:`_event_date` dates it); ``default`` when None."""
    if ms is None:
        return default
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).date()


def _dated(df: DataFrame, run: RunContext, days: tuple[dt.date, dt.date] | None = None) -> DataFrame:
    """``df`` with ``cluster`` and ``event_date``, cut to the rows dated in ``days`` (the run's range)."""
    from pyspark.sql import functions as F

    lo, hi = days or run.date_range
    out = df.withColumn("cluster", F.lit(run.cluster)).withColumn(
        "event_date", _event_date(F.col("event_ts"), run.range_from))
    return out.filter(F.col("event_date").between(F.lit(lo), F.lit(hi)))


#: The silver tables whose state is every day before the range (not only the lookback days): the metadata log's
#: changes, and the group records (a group's membership, however old its last record).
WHOLE_HISTORY_STATE = frozenset({"partition_history", "group_metadata"})
#: The first and last days of ``partition_history``'s states (:func:`run_ingestion`): every day before the range
#: (:attr:`IngestResult.lookback`) and every day after it (:attr:`IngestResult.lookahead`).
_HISTORY_START, _HISTORY_END = dt.date(1970, 1, 1), dt.date(9999, 12, 30)


def lookback_days(config: Config, run: RunContext) -> tuple[dt.date, dt.date] | None:
    """The lookback days before the run's range, ``[from - lookback_days, from - 1]``; None for 0."""
    n = int(config.rules.lookback_days)
    if n <= 0:
        return None
    return (run.range_from - dt.timedelta(days=n), run.range_from - dt.timedelta(days=1))


def _quarantine(work: DataFrame, kind: str, run: RunContext, known: DataFrame | None = None) -> DataFrame:
    from pyspark.sql import functions as F

    from jobs.runlog import quarantine_frame

    q = work.filter(F.col("row_kind") == "quarantine")
    if known is not None:  # undated units stored under another date already stay there (:func:`_recorded_elsewhere`)
        q = q.join(F.broadcast(known), _undated_known(q, known), "left_anti")
    q = q.select(
        "source", "position", "unit", "reason", "raw",
        F.when(F.col("q_ms").isNotNull(), _event_date(F.timestamp_millis("q_ms"), run.range_from))
        .alias("event_date"))
    return quarantine_frame(q, run, kind)


def _quarantine_of_other_kinds(spark: SparkSession, config: Config, run: RunContext, owned: set[str],
                               kept_days: dict[str, set[dt.date]] | None = None) -> list[dict]:
    """The ``quarantine`` rows of the run's range whose source kind the run does not read (``owned``), and those of
    a kind on the days it keeps (``kept_days``: kind -> days, :attr:`IngestResult.kept_days`): the quarantine write
    replaces the range's rows of every kind, so these are written again as they are (read into the driver first:
    the write replaces the files they are read from)."""
    from jobs.runlog import read_quarantine

    kept_days = kept_days or {}
    return [r for r in read_quarantine(spark, config, run.date_range) if r["source_kind"] not in owned
            or r["event_date"] in kept_days.get(r["source_kind"], ())]


#: What makes two quarantine rows one input unit (with the source kind).
_Q_KEY = ("source", "position", "unit", "reason")


def _recorded_elsewhere(spark: SparkSession, config: Config, run: RunContext) -> dict[str, set[tuple]]:
    """Per source kind, the keys (:data:`_Q_KEY`) of the ``quarantine`` rows stored under dates outside the run's
    range. An undated bad unit (a line without a time, a file that is not an input) is stored under the ``from``
    date of the first run that met it; a later run with another range met it again and stored it again (each
    nightly run one more row of the same line). Such a unit is now left where it is, as a unit dated outside the
    range is. Not the metadata log's: its replay judges the whole retained log again in every run (a hole cuts
    every run's history, whatever its range), so its rows are each run's own."""
    from jobs.runlog import read_quarantine

    out: dict[str, set[tuple]] = {}
    for r in read_quarantine(spark, config, None, columns=["event_date", "source_kind", *_Q_KEY]):
        if r["source_kind"] != "cluster_metadata" and not run.range_from <= r["event_date"] <= run.range_to:
            out.setdefault(r["source_kind"], set()).add(tuple(r[k] for k in _Q_KEY))
    return out


def _known_frame(spark: SparkSession, keys: set[tuple] | None) -> DataFrame | None:
    """``keys`` as a small frame (columns ``k_`` + :data:`_Q_KEY`) to match undated quarantine rows against."""
    if not keys:
        return None
    return spark.createDataFrame(sorted(keys, key=repr), "k_source string, k_position long, k_unit string, "
                                 "k_reason string")


def _undated_known(q: DataFrame, known: DataFrame) -> Column:
    """The join condition: a quarantine row without a date (no ``q_ms``) of a unit in ``known`` (null-safe)."""
    cond = q["q_ms"].isNull()
    for k in _Q_KEY:
        cond = cond & q[k].eqNullSafe(known[f"k_{k}"])
    return cond


def _stats(work: DataFrame, kind: str, run: RunContext, known: DataFrame | None = None) -> DataFrame:
    """The per-task stats rows, and a row with ``n_elsewhere`` = 1 for each bad unit dated outside the run's
    range: the run leaves those to the run whose range holds them (:func:`jobs.runlog.quarantine_frame`), so its
    counts leave them out too (a bad checkpoint two days later made a one-day run ``partial`` with no quarantine
    row to show) — and for each undated one already stored under another date (``known``,
    :func:`_recorded_elsewhere`). One scan of the work rows (two with ``known``)."""
    from pyspark.sql import functions as F

    stats = F.col("row_kind") == "stats"
    own = _event_date(F.timestamp_millis("q_ms"), run.range_from)
    elsewhere = ((F.col("row_kind") == "quarantine") & F.col("q_ms").isNotNull()
                 & ~own.between(F.lit(run.range_from), F.lit(run.range_to)))
    zero = F.lit(0).cast("long")
    out = work.filter(stats | elsewhere).select(
        F.lit(kind).alias("source_kind"), "unit",
        *[F.when(stats, F.col(c)).otherwise(zero).alias(c) for c in ("n_read", "n_bad", "n_out")],
        F.when(stats, F.col("n_unpaired")).alias("n_unpaired"),
        F.when(stats, zero).otherwise(F.lit(1).cast("long")).alias("n_elsewhere"))
    if known is None:
        return out
    q = work.filter(F.col("row_kind") == "quarantine")
    again = q.join(F.broadcast(known), _undated_known(q, known), "left_semi").select(
        F.lit(kind).alias("source_kind"), "unit", *[zero.alias(c) for c in ("n_read", "n_bad", "n_out")],
        F.lit(None).cast("long").alias("n_unpaired"), F.lit(1).cast("long").alias("n_elsewhere"))
    return out.unionByName(again)


def run_ingestion(
    spark: SparkSession,
    config: Config,
    date_from: dt.date | str,
    date_to: dt.date | str | None = None,
    run: RunContext | None = None,
    *,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    write_audit: bool = True,
) -> IngestResult:
    """Decode every configured input and write the silver tables for ``[date_from, date_to]``.

    Args:
        spark: the session (any master; nothing is collected but file names and count aggregates).
        config: inputs (``offsets``/``logdirs``/``metadata``/``cluster_metadata``, ``broker_ports``,
            ``broker_addresses``), output
            and cluster.
        date_from, date_to: the inclusive ``event_date`` range to (re)write; ``date_to`` defaults to
            ``date_from``. Ignored when ``run`` is given.
        run: the run's :class:`~jobs.runlog.RunContext` when a larger job (the CLI's ``run``) shares it.
        split_bytes: target byte size of the segment ranges (and of the line ranges of JSONL captures and text
            dumps) decoded by one task.
        write_audit: append this run's ``audit_runs`` rows (the CLI may prefer to write them itself once
            the reports have run, with their finding counts).

    Returns:
        An :class:`IngestResult`.

    Raises:
        jobs.errors.InputError: a configured input root does not exist or cannot be listed.
        jobs.errors.SinkError: a table could not be written.
    """
    from jobs.runlog import RunContext
    from jobs.schemas import TABLES
    from jobs.session import shuffles_for_input

    from . import cluster_metadata as cm
    from .discover import discover

    if run is None:
        run = RunContext.start(config, date_from, date_to)
    inputs = config.inputs
    tables = [config.output.table_location(t) for t in TABLES] if config.output.root is not None else []
    inv: Inventory = discover(inputs.offsets, inputs.logdirs, inputs.metadata,
                              follow_symlinks=inputs.follow_symlinks, exclude=tables)
    inv.extend(cm.discover_cluster_metadata(inputs.cluster_metadata, follow_symlinks=inputs.follow_symlinks,
                                            exclude=tables))
    input_bytes = sum(f.size for f in inv.files)
    with shuffles_for_input(spark, input_bytes) as width:
        return _ingest(spark, config, run, inv, input_bytes, split_bytes=split_bytes, write_audit=write_audit,
                       narrow=width == 1)


def _ingest(spark: SparkSession, config: Config, run: RunContext, inv: Inventory, input_bytes: int, *,
            split_bytes: int, write_audit: bool, narrow: bool = False) -> IngestResult:
    """:func:`run_ingestion` after discovery (with the shuffle width sized to the input; ``narrow``: one
    shuffle partition, a small input)."""
    from pyspark import StorageLevel
    from pyspark.sql import functions as F

    from jobs.frames import union_all
    from jobs.runlog import SourceCounts, audit_run_table, days_of, quarantine_table, write_audit_runs
    from jobs.runlog import quarantine_row as make_qrow
    from jobs.schemas import spark_schema
    from jobs.session import Once, run_concurrently, unpersist
    from jobs.sink import adopts_files, write_table

    from . import cluster_metadata as cm
    from . import logdirs as ld
    from . import metadata as md
    from . import offsets as off
    from ._spark import default_parallelism, files_frame, to_spark_schema
    from .commit_files import CommitFiles
    from .discover import LEC, PMETA, ROOT_CKPT, SEGMENT
    from .pass_files import PassFiles
    from .ranges import ranges_frame

    inputs = config.inputs
    par = default_parallelism(spark)
    works: dict[str, DataFrame] = {}
    offset_commits: DataFrame | None = None
    lookback: dict[str, DataFrame] = {}
    lookahead: dict[str, DataFrame] = {}
    held: list[HeldRows] = []
    side_cached: list[DataFrame] = []  # a narrow run's cached pass side rows

    def cache(work: DataFrame) -> DataFrame:
        # a small input's work rows are cached in one partition per core: the decode keeps its parallelism, and
        # each of the ~10 scans of them (a table's rows, the lineage's aggregates, the states, the counts, the
        # quarantine) is that many tasks instead of one per file chunk and segment range (12-27 in the demo)
        return (work.coalesce(par) if narrow else work).persist(StorageLevel.MEMORY_AND_DISK)

    before = lookback_days(config, run)
    # the days a pass that writes its own files covers: the lookback days (held back, see held_write) and the range
    pass_days = (before[0] if before is not None else run.range_from, run.range_to)
    # the replayed metadata log's changes of EVERY day before the range are its state, whatever lookback_days says:
    # K1/K2/M2/M5/P1 read the partitions' whole history up to --to, and the inputs hold it (a run over one day
    # into a fresh root named epochs assigned the day before "never assigned": hundreds of false K1 errors); so are
    # the group records: a group's membership is long-lived state (the last record before the range says whether it
    # is empty, whenever it was written; __consumer_offsets is compacted, so it is retained), S1b/S2b read it
    history_before = ((_HISTORY_START, run.range_from - dt.timedelta(days=1))
                      if run.range_from > _HISTORY_START else None)

    def state_days(name: str) -> tuple[dt.date, dt.date] | None:
        return history_before if name in WHOLE_HISTORY_STATE else before
    offsets_files = inv.of("offsets")
    commit_files: CommitFiles | None = None
    if offsets_files and adopts_files(spark, "offset_commits", config):
        # one decode pass whose tasks write the commits' Parquet files for the sink themselves and the side
        # rows next to them (.commit_files)
        commit_files = CommitFiles(spark, offsets_files, cluster=run.cluster, days=pass_days,
                                   default_date=run.range_from,
                                   dated=functools.partial(_dated, run=run, days=pass_days),
                                   split_bytes=split_bytes, parallelism=par)
    elif offsets_files:
        # two decode passes: commits straight into the silver shape (streamed to the sink, never cached)
        # and the small side rows (markers, transactional commits, groups, quarantine, stats), persisted
        offset_commits, works["offsets"] = off.offsets_frames(spark, offsets_files, split_bytes=split_bytes,
                                                              parallelism=par)
    logdir_files = inv.of("logdirs", LEC, PMETA, ROOT_CKPT)
    logdir_segs = inv.of("logdirs", SEGMENT)
    if logdir_files or logdir_segs:
        parts = []
        wschema = to_spark_schema(ld.WORK)
        if logdir_files:
            parts.append(ld.files_frame(spark, logdir_files, par).mapInArrow(ld.decode_logdir_files, wschema))
        if logdir_segs:
            parts.append(ranges_frame(spark, logdir_segs, split_bytes=split_bytes, parallelism=par)
                         .mapInArrow(ld.decode_logdir_segments, wschema))
        works["logdirs"] = union_all(parts)
    capture_files = inv.of("metadata")
    captures: md.CaptureFiles | None = None
    if capture_files and adopts_files(spark, "metadata_observations", config):
        # like the offsets pass: the tasks write the observations' Parquet files (over the lookback days too)
        # and their quarantine, stats and info rows next to them
        captures = md.CaptureFiles(spark, capture_files, cluster=run.cluster, days=pass_days,
                                   default_date=run.range_from, broker_ports=inputs.broker_ports,
                                   broker_addresses=inputs.broker_addresses, split_bytes=split_bytes,
                                   parallelism=par)
    elif capture_files:
        decode = md.decode_capture_files(inputs.broker_ports, inputs.broker_addresses)
        works["metadata"] = union_all([f.mapInArrow(decode, to_spark_schema(md.WORK)) for f in md.capture_frames(
            spark, capture_files, split_bytes=split_bytes, parallelism=par)])
    kraft_files = inv.of("cluster_metadata") + cm.from_logdirs(inv)
    if kraft_files:
        # decode per file (in parallel); the merge + replay sees the whole log in one task (small: MBs)
        records = files_frame(spark, kraft_files, cm.FILE_SCHEMA, par).mapInArrow(
            cm.decode_files, to_spark_schema(cm.WORK))
        works["cluster_metadata"] = records = cache(records)
        works["cluster_metadata_replay"] = records.where(F.col("row_kind") == "record").repartition(1).mapInArrow(
            cm.replay_records, to_spark_schema(cm.HISTORY_WORK))
    for k in list(works):
        if k != "cluster_metadata":  # cached where it is made: the replay reads that cache
            works[k] = cache(works[k])

    try:
        # each silver frame is planned by the first step that reads it (its write, in that write's thread: the
        # plans of the tables are analysed side by side and the first writes start ~1 s sooner; then the
        # lookback states)
        silver: dict[str, Once[DataFrame]] = {}
        if offset_commits is not None:
            side, commits = works["offsets"], offset_commits
            silver["offset_commits"] = Once(lambda: off.commits_frame(
                commits, side, transactional=off.has_transactional_commits(side)))
            silver["group_metadata"] = Once(lambda: off.groups_frame(side))
        if "logdirs" in works:
            silver["record_batches"] = Once(lambda: ld.batches_frame(works["logdirs"]))
            silver["epoch_lineage"] = Once(lambda: ld.lineage_frame(works["logdirs"]))
        if "metadata" in works:
            silver["metadata_observations"] = Once(lambda: md.observations_frame(works["metadata"]))
        if "cluster_metadata_replay" in works:
            # a snapshot's rows once: not again when another date holds them (the next night's run)
            silver["partition_history"] = Once(lambda: cm.without_stored_snapshots(
                spark, config, run.cluster, run.date_range,
                cm.history_frame(works["cluster_metadata_replay"], run.range_from)))

        passes: dict[str, PassFiles] = {n: p for n, p in (("offset_commits", commit_files),
                                                          ("metadata_observations", captures)) if p is not None}

        def held_write(name: str, rows: Once[DataFrame] | PassFiles) -> SinkResult:
            # the commits (and a pass's rows) are decoded straight for the sink, never cached: one write over
            # the lookback days and the range, whose lookback days' files the sink holds back from the table
            # as this run's state (read back columnar; usually there are none, and then there is no state)
            days = state_days(name)
            frame = rows if isinstance(rows, PassFiles) else with_kept_snapshots(name, _dated(  # a pass dates its own
                rows.get(), run, (days[0] if days is not None else run.range_from, run.range_to)))
            res = write_table(frame, name, config=config, mode="replace_range", date_range=run.date_range,
                              hold_back=days, keep_days=keeper(name))
            if res.held is not None:
                held.append(res.held)  # released on any later failure, like the other states
            return res

        # a pass's write runs once, in its own step; the steps that read the pass's side rows (its groups,
        # quarantine, counts and notes) wait for it, and only for it
        pass_writes = {name: Once(functools.partial(held_write, name, src)) for name, src in passes.items()}
        pass_kinds = {"offsets": "offset_commits", "metadata": "metadata_observations"}

        def side_rows(kind: str) -> DataFrame:
            pass_writes[pass_kinds[kind]].get()
            src = passes[pass_kinds[kind]]
            assert src.side is not None
            side = cache(src.side) if narrow else src.side
            if narrow:
                side_cached.append(side)
            return side

        sides = {kind: Once(functools.partial(side_rows, kind)) for kind, name in pass_kinds.items() if name in passes}

        def bad_days_of(kind: str) -> frozenset[dt.date]:
            # the days of the source's dated bad units in the run: it had input then. Not an undated one's (a line
            # without a time, a broken link, a file of no known kind): it says nothing of the day it held, and
            # stored on the from date it kept or replaced a day by the range a rerun was given (a broken link
            # replaced a day's commits by none when the day was rerun alone, and kept them in a longer rerun)
            name = pass_kinds.get(kind, "")
            w = passes[name].side if name in passes else works.get(kind)  # a pass's side rows: staged by now
            if w is None:
                return frozenset()
            return frozenset(r["d"] for r in w.filter((F.col("row_kind") == "quarantine") & F.col("q_ms").isNotNull())
                             .select(_event_date(F.timestamp_millis("q_ms"), run.range_from).alias("d"))
                             .distinct().collect())

        bad_days = {kind: Once(functools.partial(bad_days_of, kind)) for kind in UNIT_DATED_BY_SOURCE}

        def keeper(name: str) -> Callable[[frozenset[dt.date]], list[dt.date]] | None:
            # a rerun keeps, per table and day, what its input no longer yields: the days of the range the table
            # gets no row on and its source no bad unit dated on are left as earlier runs stored them (a two-day rerun
            # after one day's dumps rotated away replaced that day's commits by none, and its findings went)
            kind = _SOURCE_OF[name]
            if kind not in UNIT_DATED_BY_SOURCE:
                return None

            def keep(written: frozenset[dt.date]) -> list[dt.date]:
                unwritten = [d for d in days_of(*run.date_range) if d not in written]
                return [d for d in unwritten if d not in bad_days[kind].get()] if unwritten else []
            return keep
        if commit_files is not None:
            silver["group_metadata"] = Once(lambda: off.groups_frame(sides["offsets"].get()))

        def all_works() -> dict[str, DataFrame]:
            # every kind's work rows: the passes' side rows once their writes ran
            return {**works, **{kind: side.get() for kind, side in sides.items()}}

        # the tables whose write stages the lookback days too and holds them back as the state (no job of their
        # own): the commits, never cached, and on the delta-rs sink every table, whose held files cost nothing
        # more; delta-spark would persist each frame to hold its rows back, so its other states come from the
        # cached work rows in one job (lookback_states)
        held_state = {name for name in silver if state_days(name) is not None and (
            name == "offset_commits" or adopts_files(spark, name, config))}

        done_once: dict[str, Once[SinkResult]] = {}  # the silver writes, which the quarantine write may wait for

        def silver_writes(names: tuple[str, ...]) -> list[tuple[str, Callable[[], SinkResult]]]:
            # one step per silver table, each run once (a pass's write is the pass's own): the quarantine step
            # waits for some of them through done_once
            out: list[tuple[str, Callable[[], SinkResult]]] = []
            for name in names:
                if name in pass_writes:
                    once = pass_writes[name]
                elif (rows := silver.get(name)) is None:
                    # configured, but not one unit read (a folder emptied, dumps rotated away): the rows earlier
                    # runs stored for the range stay, and the reports read them (a nightly catch-up after the
                    # offsets dumps rotated away wiped the day's commits and 44 of its 66 findings); a source
                    # whose files were all unrecognised read units, and its rows are replaced by none
                    if not getattr(config.inputs, _SOURCE_OF[name]) or _SOURCE_OF[name] in kept:
                        continue
                    once = Once(functools.partial(cleared_write, name))
                elif name in held_state:
                    once = Once(functools.partial(held_write, name, rows))
                else:
                    once = Once(functools.partial(dated_write, name, rows))
                done_once[name] = once
                out.append((name, once.get))
            return out

        def cleared_write(name: str) -> SinkResult:
            # the range's rows of a configured source whose files were all unrecognised are replaced by none, as
            # any rerun's (it read units: its quarantine rows are this run's)
            return write_table(spark.createDataFrame([], spark_schema(name)), name, config=config,
                               mode="replace_range", date_range=run.date_range)

        def dated_write(name: str, rows: Once[DataFrame]) -> SinkResult:
            return write_table(with_kept_snapshots(name, _dated(rows.get(), run)), name, config=config,
                               mode="replace_range", date_range=run.date_range, keep_days=keeper(name))

        # the days of the range a leader-epoch-checkpoint file of the inputs is dated on (its snapshot's): on each,
        # epoch_lineage gets a row or the log dirs a bad unit, so lineage keeps none of them (driver: names only)
        lec_days = {_utc_day(f.snapshot_ms, run.range_from) for f in logdir_files if f.form == LEC}
        lineage_may_keep = "epoch_lineage" in silver and any(d not in lec_days for d in days_of(*run.date_range))
        carried: dict[str, dict[dt.date, int]] = {}  # table -> snapshot day -> stored rows carried into its write

        def with_kept_snapshots(name: str, frame: DataFrame) -> DataFrame:
            # a snapshot whose folders are gone cannot be re-derived: the record_batches rows earlier runs stored
            # from the snapshots of the days epoch_lineage kept stay, whatever day their batches are dated on
            # (later snapshots' segments date batches on those days too, and replaced them: the batches only the
            # removed snapshots held went, with their L3 findings). The rows of the snapshots the run has are
            # re-derived, so none is twice. Only when some day of the range has no checkpoint in the inputs does
            # this wait for lineage's write (a nightly run has one on every day: no wait, no extra job).
            if name != "record_batches" or not lineage_may_keep:
                return frame
            days = done_once["epoch_lineage"].get().kept_days
            if not days:
                return frame
            from jobs.reports._frames import read_silver

            snap_day = _event_date(F.col("snapshot_ts"), run.range_from)
            stored = read_silver(spark, config, name, run.cluster, run.date_range).where(
                snap_day.isin(list(days)))
            # not a snapshot the run still reads segments of (its checkpoint gone, its logs there): re-derived
            have = sorted({f"{int(f.broker)}|{f.snapshot_ms}" for f in inv.of("logdirs")
                           if f.broker is not None and str(f.broker).isdigit() and f.snapshot_ms is not None})
            if have:
                stored = stored.where(~F.concat_ws("|", F.col("broker").cast("string"),
                                                   F.unix_millis("snapshot_ts").cast("string")).isin(have))
            counted = stored.groupBy(snap_day.alias("d")).count().collect()  # one small job, only on such reruns
            carried[name] = {r["d"]: int(r["count"]) for r in counted}
            if not counted:
                return frame
            return frame.unionByName(stored.select(*(F.col(c).cast(frame.schema[c].dataType) for c in frame.columns)))

        # the silver tables, the quarantine, the lookback states, the counts and the notes are independent steps
        # over the work rows: submitted at once (jobs.session.run_concurrently), so one write's scheduling gaps
        # and one-task stages are filled by another's tasks. What reads a pass's side rows (the groups, the
        # quarantine, the counts, the notes) waits for that pass's write only: it used to wait for every silver
        # write, and started ~4 s after the offsets pass at 10 M bench commits, behind the log-dir writes
        # (the configured sources with no input unit at all, no file decoded or unrecognised, are not written: kept)
        kept = tuple(k for k in SILVER_BY_SOURCE if getattr(inputs, k) and not any(
            _SOURCE_OF[n] == k for n in (*silver, *passes)) and not any(u.kind == k for u in inv.unrecognised)
            and not (k == "cluster_metadata" and kraft_files))
        writes = silver_writes(tuple(n for n in SILVER if n in passes) + tuple(n for n in SILVER if n not in passes))

        # quarantine: executor rows; from the driver, unrecognised files (names only) and the range's rows of the
        # kinds this run does not read, which stay (the table is replaced by date, not by kind: a rerun with
        # --offsets alone dropped the logdirs' bad checkpoints, and L1 with them)
        # undated bad units a run of other dates stored already: left there, not counted again
        recorded = Once(lambda: _recorded_elsewhere(spark, config, run))
        known = Once(lambda: {k: _known_frame(spark, keys) for k, keys in recorded.get().items()})
        unrecognised = Once(lambda: [u for u in inv.unrecognised if (u.source, 0, "file", u.reason)
                                     not in recorded.get().get(u.kind, ())])

        def quarantine_rows() -> DataFrame:
            # a kept source's bad units of the range stay with its kept rows (L1 reads them; its status said so)
            owned = ({k for k in SILVER_BY_SOURCE if getattr(config.inputs, k)} | (
                {"cluster_metadata"} if kraft_files else set())) - set(kept)
            # and a source's rows of the days its unit-dated table kept (it had no unit dated then, bad or good):
            # waits for that table's write, which never waits for this one
            kept_bad = {kind: set(res.kept_days) for kind, name in UNIT_DATED_BY_SOURCE.items()
                        if name in done_once and (res := done_once[name].get()).kept_days}
            stored = _quarantine_of_other_kinds(spark, config, run, owned, kept_bad)
            # an undated bad unit of this run that is one of those kept rows (stored on the from date of an earlier
            # run, a day now kept) stays where it is, as one stored outside the range does: not written twice
            also = {}
            for r in stored:
                if r["source_kind"] in kept_bad:
                    also.setdefault(r["source_kind"], set()).add(tuple(r[k] for k in _Q_KEY))
            known_now = known.get() if not also else {
                k: _known_frame(spark, recorded.get().get(k, set()) | also.get(k, set()))
                for k in recorded.get().keys() | also.keys()}
            qparts = [_quarantine(w, _WORK_KIND.get(kind, kind), run, known_now.get(_WORK_KIND.get(kind, kind)))
                      for kind, w in all_works().items()]
            driver_rows = quarantine_table([make_qrow(run, source_kind=u.kind, source=u.source, position=0, unit="file",
                                                      reason=u.reason, raw=None) for u in unrecognised.get()
                                            if (u.source, 0, "file", u.reason) not in also.get(u.kind, ())]).to_pylist()
            driver_rows += stored
            if driver_rows:
                qparts.append(spark.createDataFrame(driver_rows, spark_schema("quarantine")))
            if not qparts:  # nothing read: the range's earlier bad units are replaced by none, as the silver rows
                return spark.createDataFrame([], spark_schema("quarantine"))
            rows = union_all(qparts)
            return rows.coalesce(par) if narrow else rows  # a task per work frame's partition otherwise

        writes.append(("quarantine", lambda: write_table(quarantine_rows(), "quarantine", config=config,
                                                         mode="replace_range", date_range=run.date_range)))

        def keep_nonempty(plans: dict[str, Callable[[], DataFrame]], into: dict[str, DataFrame]) -> None:
            # one job materialises the planned states while the work rows are cached; an empty state is not
            # handed on (each report read of it was a union with a cached frame plus a dedupe)
            states: dict[str, DataFrame] = {}
            try:
                for name, plan in plans.items():  # a frame may fail to plan: the except below releases the rest
                    states[name] = plan().persist(StorageLevel.MEMORY_AND_DISK)
                if not states:
                    return
                parts = [st.select(F.lit(name).alias("table")) for name, st in states.items()]
                have = {r["table"] for r in union_all(parts).groupBy("table").count().collect() if r["count"]}
            except BaseException:
                for st in states.values():
                    st.unpersist()
                raise
            for name, st in states.items():
                if name in have:
                    into[name] = st  # released with the rest of the state, on success or failure
                else:
                    st.unpersist()

        def lookback_states() -> None:
            # the states the writes do not hold back for the reports (delta-spark's, from the cached work rows)
            plans: dict[str, Callable[[], DataFrame]] = {}
            for name, df in silver.items():
                days = state_days(name)
                if days is not None and name not in held_state and name not in passes:
                    plans[name] = lambda df=df, days=days: _dated(df.get(), run, days)
            keep_nonempty(plans, lookback)

        def lookahead_state() -> None:
            # what the reports read beyond the range's last day, never written: the snapshots of the next day
            # when the inputs hold any (the driver knows their dates; their lineage from the cached work rows
            # of those snapshots only), and the metadata log's changes of every later day (a select over the
            # cached replay)
            nxt = run.range_to + dt.timedelta(days=1)
            lo = int(dt.datetime(nxt.year, nxt.month, nxt.day, tzinfo=dt.timezone.utc).timestamp() * 1000)
            hi = lo + 86_400_000
            plans: dict[str, Callable[[], DataFrame]] = {}
            if "logdirs" in works and any(f.snapshot_ms is not None and lo <= f.snapshot_ms < hi
                                          for f in logdir_files):
                rows = works["logdirs"].where((F.col("snapshot_ms") >= lo) & (F.col("snapshot_ms") < hi))
                plans["epoch_lineage"] = lambda: _dated(ld.lineage_frame(rows), run, (nxt, nxt))
            if "partition_history" in silver:
                plans["partition_history"] = lambda: _dated(silver["partition_history"].get(), run,
                                                            (nxt, _HISTORY_END))
            keep_nonempty(plans, lookahead)

        elsewhere: dict[str, int] = {}  # per source kind: bad units another run's range holds

        def unit_totals() -> dict[tuple[str, str], list]:
            # counts: Spark sums the per-task stats rows; the driver only sees the per-unit totals
            totals: dict[tuple[str, str], list] = {}
            sparts = [_stats(w, _WORK_KIND.get(kind, kind), run, known.get().get(_WORK_KIND.get(kind, kind)))
                      for kind, w in all_works().items()]
            if sparts:
                stats = union_all(sparts)
                agg = (stats.coalesce(par) if narrow else stats).groupBy("source_kind", "unit").agg(
                    F.sum("n_read").alias("read"), F.sum("n_bad").alias("bad"), F.sum("n_out").alias("out"),
                    F.sum("n_unpaired").alias("unpaired"), F.sum("n_elsewhere").alias("elsewhere"))
                for r in agg.collect():
                    read, bad = int(r["read"] or 0), int(r["bad"] or 0)
                    other = min(int(r["elsewhere"] or 0), bad)  # another run's bad units: neither read nor bad here
                    if other:
                        elsewhere[r["source_kind"]] = elsewhere.get(r["source_kind"], 0) + other
                    if read or bad or not r["elsewhere"]:  # not a unit kind known only from elsewhere
                        totals[(r["source_kind"], r["unit"])] = [read - other, bad - other, int(r["out"] or 0),
                                                                 r["unpaired"]]
            return totals

        def info_notes() -> list[str]:
            # info lines (TLS handshakes to ports that are not broker ports; a metadata-log copy's uncommitted
            # tail): few, for the run's notes
            out: list[str] = []
            if captures is not None:  # the pass's side rows are its files: read there, not with a Spark job
                pass_writes["metadata_observations"].get()
                info = captures.info_rows(["source", "reason"], 100)
                out += [f"metadata: {r['source']}: {r['reason']}" for r in info.to_pylist()]
            for kind, name in (("metadata", "metadata"), ("cluster_metadata", "cluster_metadata_replay")):
                if name in works:
                    out += [f"{kind}: {r['source']}: {r['reason']}" for r in works[name].filter(
                        F.col("row_kind") == "info").select("source", "reason").limit(100).collect()]
            return out

        # one round of concurrent steps, the pass writes first
        steps = [*writes, ("_states", lookback_states), ("_ahead", lookahead_state), ("_totals", unit_totals),
                 ("_infos", info_notes)]
        done = run_concurrently(spark, steps, workers=len(steps))  # all at once: small jobs and collects
        totals: dict[tuple[str, str], list] = done.pop("_totals")
        infos: list[str] = done.pop("_infos")
        done.pop("_states")
        done.pop("_ahead")
        tables: dict[str, SinkResult] = done
        for name in (*held_state, *passes):
            res = tables.get(name)
            if res is not None and res.held is not None and res.held.frame is not None:
                lookback[name] = res.held.frame
        if lookback.get("partition_history") is not None:
            n, added = store_history_gaps(spark, config, run, lookback["partition_history"])
            if n:
                infos.append(f"cluster_metadata: the metadata log's changes of {n} earlier day{'s' if n != 1 else ''} "
                             "that no run had stored were written to partition_history (a --reports-only run reads "
                             "the history from the table)")
            if added:
                infos.append("cluster_metadata: partition_history lacked changes of stored days that the metadata log "
                             "holds (an earlier run's copy ended before them); added " + ", ".join(
                                 f"{c} of {d.isoformat()}" for d, c in sorted(added.items())))

        for u in unrecognised.get():
            t = totals.setdefault((u.kind, "file"), [0, 0, 0, None])
            t[0] += 1
            t[1] += 1
        for kind, n in (Counter(u.kind for u in inv.unrecognised) - Counter(u.kind for u in unrecognised.get())).items():
            elsewhere[kind] = elsewhere.get(kind, 0) + n
        infos += [f"{kind}: {n} bad unit{'s' if n != 1 else ''} left to the runs of other dates (dated outside the "
                  "range, or undated and in the quarantine under another date already): not counted again here"
                  for kind, n in sorted(elsewhere.items())]
        counts = tuple(
            SourceCounts(source_kind=k, unit=u, units_decoded=r - b, units_quarantined=b, records_decoded=o,
                         units_read=r, units_unpaired=None if up is None else int(up))
            for (k, u), (r, b, o, up) in sorted(totals.items()))
        if write_audit and counts:
            tables["audit_runs"] = write_audit_runs(audit_run_table(run, counts), config)
    except BaseException:
        _release(held, lookback, lookahead)
        raise
    finally:
        for w in (*works.values(), *side_cached):
            unpersist(w)

    files: dict[str, dict[str, int]] = {}
    for kind in ("offsets", "logdirs", "metadata", "cluster_metadata"):
        files[kind] = {
            "decoded": len(inv.of(kind)),
            "unrecognised": sum(1 for u in inv.unrecognised if u.kind == kind),
            "ignored": sum(1 for k, _ in inv.ignored if k == kind),
            "empty": sum(1 for e in inv.empty if e.kind == kind),
            "skipped": sum(1 for e in inv.skipped if e.kind == kind),
        }
    kinds = ("offsets", "logdirs", "metadata", "cluster_metadata")
    skipped = {k: inv.reasons(k) for k in kinds if inv.reasons(k)}
    empty = {k: inv.reasons(k, "empty") for k in kinds if inv.reasons(k, "empty")}
    return IngestResult(run=run, counts=counts, tables=tables, files=files, skipped=skipped, empty=empty,
                        infos=tuple(infos), lookback=lookback, input_bytes=input_bytes, held=tuple(held),
                        lookahead=lookahead, kept=kept,
                        kept_days={n: r.kept_days for n, r in tables.items() if n in SILVER and r.kept_days},
                        kept_snapshots={n: by for n, by in carried.items() if by})


def store_history_gaps(spark: SparkSession, config: Config, run: RunContext,
                       state: DataFrame) -> tuple[int, dict[dt.date, int]]:
    """Write the replayed metadata log's changes of the days before the range (``state``: this run's
    ``partition_history`` state) that ``partition_history`` lacks: the days it holds no rows of, whole, and on the
    days it holds, the changes at offsets it has no row of. Gives the number of days written whole and the
    changes added per stored day.

    A run stores its own range only, and uses the history before it as state, from the log it replays. A
    ``--reports-only`` run has no log to replay: it reads the history from the table, and without the days
    before the first run's range it took epochs assigned then for "never assigned" (hundreds of false K1
    errors). A stored day is not always whole: the run that stored it may have read a copy of the log collected
    mid-day (a nightly collection at 23:00 audited at 01:00), so a later run that replays more of that day appends
    the changes the day lacks, by metadata offset (a record's changes are replayed and stored together; the rows a
    day holds are never replaced, nor duplicated); so every day is completed by the first run that replays it
    further. The stored offsets are read through delta-rs on the driver: no Spark job when nothing is missing.
    A catalog table (whose files are not listed here) is left alone."""
    from pyspark.sql import functions as F

    from jobs.errors import NoTableError, SinkError
    from jobs.sink import read_table_arrow, table_files, write_table

    # the state's changes per day and offset (one small collect: the retained log's changes before the range)
    offsets: dict[dt.date, Counter[int]] = {}
    for d, o in state.select("event_date", "metadata_offset").collect():
        offsets.setdefault(d, Counter())[o] += 1
    days = sorted(offsets)
    if not days:
        return 0, {}
    try:
        listed = table_files("partition_history", config, cluster=run.cluster, date_range=(days[0], days[-1]))
        stored = {f.values.get("event_date") for f in listed.files if f.rows is None or f.rows > 0}
    except NoTableError:
        stored = set()
    except SinkError:
        return 0, {}
    blocks: list[list[dt.date]] = []
    for d in sorted(set(days) | {x for x in stored if isinstance(x, dt.date)}):
        if d in stored:
            blocks.append([])  # a stored day ends a block: a block's write replaces every day between its ends
        elif blocks and blocks[-1]:
            blocks[-1].append(d)
        else:
            blocks.append([d])
    written = 0
    for b in (b for b in blocks if b):
        write_table(state.where(F.col("event_date").between(F.lit(b[0]), F.lit(b[-1]))), "partition_history",
                    config=config, mode="replace_range", date_range=(b[0], b[-1]))
        written += len(b)
    kept = [d for d in days if d in stored]
    if not kept:
        return written, {}
    held: dict[dt.date, set[int]] = {}
    for r in read_table_arrow("partition_history", config, cluster=run.cluster, date_range=(kept[0], kept[-1]),
                              columns=["event_date", "metadata_offset", "change"]).to_pylist():
        if r["change"] not in _STATE_ROWS:  # a snapshot's rows carry its end offset, log_end the last record's
            held.setdefault(r["event_date"], set()).add(r["metadata_offset"])
    missing = {d: sorted(set(offsets[d]) - held.get(d, set())) for d in kept}
    missing = {d: m for d, m in missing.items() if m}
    if not missing:
        return written, {}
    lacking = functools.reduce(lambda a, b: a | b, (
        (F.col("event_date") == F.lit(d)) & F.col("metadata_offset").isin(m) for d, m in missing.items()))
    write_table(state.where(lacking), "partition_history", config=config, mode="append")
    return written, {d: sum(offsets[d][o] for o in m) for d, m in missing.items()}


#: ``partition_history`` rows that are no change of the log: the state a replay starts from and how far it reaches.
_STATE_ROWS = frozenset({"snapshot", "log_start", "log_end"})


def _release(held: list[HeldRows] | tuple[HeldRows, ...], *states: dict[str, DataFrame]) -> None:
    from jobs.session import STUCK_STEPS

    if STUCK_STEPS:  # nothing is released, held rows included (see jobs.session.unpersist)
        return
    for frames in states:
        for df in frames.values():
            df.unpersist()
    for h in held:
        h.release()
