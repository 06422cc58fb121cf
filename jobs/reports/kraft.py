"""The metadata-log rules in the reports: K1, K2, P1 (``fencing_violations``), M5 and M2 timed from the log
(``stale_metadata``), the metadata lag of ``stale_metadata_rates``, and ``cause_finding_id`` on the F2, L5
and S1 findings an unclean election explains. Rule logic is in :mod:`epochlib.rules.kraft` and
:mod:`epochlib.rules.expansion` (the passes over every observation — the log's ids, M2, the lag — run columnar
through :mod:`epochlib.rules.kraft_pass`, which equals those rules); this module only groups rows and calls it.

``partition_history`` is read from its first date up to ``to`` (not only the lookback window): the rules
need the retained history (which epochs were ever assigned, when each began), and a replayed metadata log
is small — one row per topic/partition change, thousands of rows for days of a busy cluster. That table is
collected once on the driver and shipped with the grouped functions as a :class:`~epochlib.rules.kraft.LogView`
(like the token frontier of M2). Everything else (observations, lineage, commits, batches) stays on the
executors:

========  ================================================================  ==================================
rule      Spark shape                                                       epochlib function
========  ================================================================  ==================================
K2        ``partition_history`` rows marked unclean, ``mapInArrow``         ``check_unclean_elections``
K1        ``epoch_lineage`` rows, ``mapInArrow`` (the view in the closure)  ``check_checkpoint_epochs``
P1        ``offset_commits`` of expanded topics cogrouped by topic with     ``check_expansion_order``
          the old partitions' log-end evidence (batch ends, snapshot LEO /
          HW); expansions from the log, else from captures (a grouped
          call per topic, collected: a handful of rows)
M3 (log)  observations without a topic id get the log's id for their name    ``with_log_topic_ids``
          at the capture time (``mapInArrow``), before M1/M2/M3/M5 run
M5        ``metadata_observations.groupBy(client_id, client_host)``         ``check_metadata_offsets``
          (columnar: ``kraft_pass.metadata_offsets``)
M2 (log)  observations ``mapInArrow``; a capture-only M2 finding is         ``check_broker_staleness_logged``
          dropped when the log judges its observation (the few
          observations the findings name, semi-joined by pointer +
          partition, then an anti-join)
lag       observations ``mapInArrow`` -> per response lag (a max per        ``response_lags``
          response); median and max per (broker, day) joined onto the
          broker rows of the rates
causes    F2/L5/S1 findings cogrouped with K2 by (topic, partition)         ``cause_of``
========  ================================================================  ==================================
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from epochlib.rules.expansion import (
    BoundEvidence,
    Expansion,
    check_expansion_order,
    expansions_from_history,
    expansions_from_observations,
)
from epochlib.rules.kraft import (
    CAUSE_KINDS,
    Election,
    HistoryChange,
    LogView,
    cause_of,
    check_checkpoint_epochs,
    check_unclean_elections,
    judged_ts,
    observation_key,
    truncated_epoch,
)
from epochlib.rules.kraft_pass import (
    SpanIndex,
    fill_log_topic_ids,
    judged_rows,
    logged_staleness,
    metadata_offsets,
    row_lags,
)

from .. import schemas
from ..frames import union_all
from . import _frames as fr

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

    from ..config import Config

__all__ = ["KraftEvidence", "add_causes", "add_lag", "fencing_findings", "gold_extras", "history_rows", "load",
           "metadata_findings", "with_topic_ids"]

_HIST_COLS = ("metadata_offset", "controller_ts", "topic", "topic_id", "partition", "change", "leader",
              "leader_epoch", "isr", "leader_recovery_state", "unclean", "previous_leader", "previous_isr", "source",
              "position")
_EPOCH_OF_TIME, _END_OF_TIME = dt.date(1970, 1, 1), dt.date(9999, 12, 31)
CAUSES = pa.schema([pa.field("finding_id", pa.string()), pa.field("cause_finding_id", pa.string())])


def _spark_schema(schema: pa.Schema) -> Any:
    from pyspark.sql.types import StructField, StructType

    from ..schemas import arrow_to_spark_type

    return StructType([StructField(f.name, arrow_to_spark_type(f.type), True) for f in schema])


class KraftEvidence:
    """The replayed metadata log of a run: the ``partition_history`` frame and, collected, its rows."""

    def __init__(self, frame: DataFrame, rows: list[dict[str, Any]]) -> None:
        self.frame = frame
        self.rows = rows
        self.changes = [HistoryChange.from_row(r) for r in rows]
        self.view = LogView.build(self.changes)
        self.index = SpanIndex.of(self.view)  # the view as arrays, for the per-observation passes

    @property
    def present(self) -> bool:
        return bool(self.rows)


#: One row per change: a snapshot's rows may have been written again by a later run (dated at its start; tables
#: written before a snapshot's rows were stored once, :func:`jobs.ingest.cluster_metadata.without_stored_snapshots`,
#: hold one copy per night), perhaps from another node's copy of the log; the copy kept is the one with the lowest
#: (source, position), nulls first,
#: whichever reads the table (so K2, which reads :attr:`KraftEvidence.frame`, and the rules fed its collected rows
#: cite one copy).
_HIST_KEY = ("metadata_offset", "topic_id", "partition", "change")


def _copy_order(row: dict[str, Any]) -> tuple:
    return tuple((row[c] is not None, row[c]) for c in ("source", "position"))


def load(spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
         inputs: fr.InputState | None = None, ahead: DataFrame | None = None) -> KraftEvidence:
    """``partition_history`` of every day (times as epoch ms), collected once: read from the table's files on the
    driver where the Delta log lists them (:func:`history_rows`), else by Spark. The changes the run's own
    inputs hold for the days before its range (``inputs``: the ingestion's state of this table, every such day)
    and after it (``ahead``: :attr:`jobs.ingest.IngestResult.lookahead`) count as well, whether or not a run
    wrote them: a run over one day sees the retained log a run over more days sees (an epoch assigned the day
    before is not "never assigned" (K1), nor is the log's reach its last change on the day (M2)). Findings
    after the range are dropped where the report frames are cut to it."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    extra = [f for f in (inputs.frames.get("partition_history") if inputs is not None else None, ahead) if f is not None]
    mine = union_all(extra) if extra else None  # the run's own rows, before and after its range
    days = (_EPOCH_OF_TIME, _END_OF_TIME)
    df = fr.read_silver(spark, config, "partition_history", cluster, days,
                        None if mine is None else fr.InputState(before=_END_OF_TIME, frames={"partition_history": mine}))
    first = Window.partitionBy(*_HIST_KEY).orderBy(F.col("source").asc_nulls_first(), F.col("position").asc_nulls_first())
    df = (fr.ms_columns(df.select(*_HIST_COLS), ("controller_ts",)).withColumn("_copy", F.row_number().over(first))
          .where(F.col("_copy") == 1).drop("_copy"))
    rows = history_rows(spark, config, cluster, days, None if mine is None else mine.where(F.col("cluster") == cluster))
    return KraftEvidence(df, df.toArrow().to_pylist() if rows is None else rows)


def history_rows(spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
                 mine: DataFrame | None = None) -> list[dict[str, Any]] | None:
    """:func:`load`'s rows (the table's rows dated up to ``window``'s end) read with pyarrow from the files the
    Delta log lists (the delta-rs sink), without a Spark job: the metadata pass waits for them, and Spark's job (a
    shuffle for the dedupe) queued behind the commit spill's tasks for ~5-8 s at 1 M bench commits. None where
    only Spark can read the table: the delta-spark back end, a catalog table, escaped file names. The log is
    small (a replayed metadata log: one row per change). ``mine``: the run's own rows outside its range
    (:func:`load`), collected only here and merged like another file's."""
    import pyarrow.parquet as pq

    table = "partition_history"
    listed = fr.sink_files(spark, config, table, cluster, (_EPOCH_OF_TIME, window[1]))
    if listed is None or any("%" in f.path for f in listed[1]):
        return None
    root, files = listed
    if not files and mine is None:
        return []
    fs, base = fr.fs_path(root)
    stored = schemas.arrow_schema(table)
    schema = pa.schema([stored.field(c) for c in _HIST_COLS])
    rows: dict[tuple, dict[str, Any]] = {}

    def tables() -> Iterator[pa.Table]:
        for f in files:
            with fs.open_input_file(f"{base}/{f.path}") as fh:
                pf = pq.ParquetFile(fh)
                yield pf.read(columns=[c for c in _HIST_COLS if c in pf.schema_arrow.names], use_threads=False)
        if mine is not None:
            yield mine.select(*[c for c in _HIST_COLS if c in mine.columns]).toArrow()

    for t in tables():
        t = fr.conformed(t, schema)
        t = t.set_column(t.schema.get_field_index("controller_ts"), "controller_ts",
                         fr.epoch_ms_arrow(t.column("controller_ts")))
        for r in t.to_pylist():
            key = tuple(r[k] for k in _HIST_KEY)
            if key not in rows or _copy_order(r) < _copy_order(rows[key]):
                rows[key] = r
    return [rows[k] for k in sorted(rows, key=lambda k: tuple((v is None, v) for v in k))]


# ------------------------------------------------------------------------------------ fencing_violations


def _k2(table: pa.Table) -> list[Any]:
    return check_unclean_elections(HistoryChange.from_row(r) for r in table.to_pylist())


def _k1(table: pa.Table, view: LogView) -> list[Any]:
    out = []
    for s in fr.snapshots_from_arrow(table):
        out += check_checkpoint_epochs(s, view)
    return out


def _p1(commits: pa.Table, evidence: pa.Table, expansions: dict[str, list[Expansion]]) -> list[Any]:
    if commits.num_rows == 0:
        return []
    cs = fr.commits_from_arrow(commits)
    topic = cs[0].topic
    bounds = [BoundEvidence(r["partition"], r["ts"], r["offset"], r["pointer"]) for r in evidence.to_pylist()
              if r["ts"] is not None and r["offset"] is not None]
    out = []
    for exp in expansions.get(topic, ()):
        out += check_expansion_order(exp, cs, bounds)
    return out


_EXP = pa.schema([pa.field("topic", pa.string()), pa.field("topic_id", pa.string()), pa.field("old_count", pa.int32()),
                  pa.field("new_partitions", pa.list_(pa.int32())), pa.field("ts", pa.int64()),
                  pa.field("evidence", pa.string())])


def _capture_expansions(table: pa.Table) -> pa.Table:
    exps = expansions_from_observations(fr.observations_from_arrow(table))
    return pa.Table.from_pylist([{"topic": e.topic, "topic_id": e.topic_id, "old_count": e.old_count,
                                  "new_partitions": list(e.new_partitions), "ts": e.ts, "evidence": e.evidence}
                                 for e in exps], schema=_EXP)


def _expansions(ev: KraftEvidence, obs: DataFrame | None) -> dict[str, list[Expansion]]:
    exps = expansions_from_history(ev.changes) if ev.present else []
    if not ev.present and obs is not None:
        rows = obs.groupBy("topic").applyInArrow(_capture_expansions, _spark_schema(_EXP)).collect()
        exps = [Expansion(r["topic"], r["topic_id"], r["old_count"], tuple(r["new_partitions"]), r["ts"], None,
                          r["evidence"], False) for r in rows]
    out: dict[str, list[Expansion]] = {}
    for e in exps:
        out.setdefault(e.topic, []).append(e)
    return out


def _bound_evidence(spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
                    lin: DataFrame, topics: list[str], inputs: Any = None) -> DataFrame:
    from pyspark.sql import functions as F

    batches = fr.ms_columns(fr.read_silver(spark, config, "record_batches", cluster, window, inputs),
                            ("max_timestamp",))
    b = batches.where(F.col("topic").isin(topics)).select(
        "topic", "partition", F.col("max_timestamp").alias("ts"),
        # null (left out of the bounds) when the last offset is Long.MAX: no next offset fits a long
        F.try_add(F.col("last_offset"), F.lit(1).cast("long")).alias("offset"),
        # as BatchHeader.pointer writes it (the re-check commands parse one form)
        F.concat(F.lit("segment:"), F.coalesce(F.col("source"), F.lit("?")), F.lit("@byte "),
                 F.coalesce(F.col("position").cast("string"), F.lit("?")), F.lit(" offset "),
                 F.col("base_offset").cast("string")).alias("pointer"))
    s = lin.where(F.col("topic").isin(topics)).select(
        "topic", "partition", F.col("snapshot_ts").alias("ts"),
        F.coalesce("log_end_offset", "high_watermark").alias("offset"),
        F.concat(F.lit("checkpoint:"), F.col("source")).alias("pointer"))
    return b.unionByName(s)


def fencing_findings(spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
                     ev: KraftEvidence, lin: DataFrame, commits: DataFrame, obs: DataFrame | None,
                     inputs: Any = None) -> DataFrame:
    """K1, K2 and P1 findings (FINDINGS schema) over the window's evidence, in range or not (``inputs``: the
    run's own lookback rows, :class:`jobs.reports._frames.InputState`)."""
    from pyspark.sql import functions as F

    schema = fr.findings_spark_schema()
    parts = []
    if ev.present:
        parts.append(ev.frame.where(F.col("unclean")).mapInArrow(fr.arrow_map_fn(_k2), schema))
        parts.append(lin.mapInArrow(fr.arrow_map_fn(partial(_k1, view=ev.view)), schema))
    expansions = _expansions(ev, obs)
    if expansions:
        topics = sorted(expansions)
        evidence = _bound_evidence(spark, config, cluster, window, lin, topics, inputs)
        parts.append(commits.where(F.col("topic").isin(topics)).groupBy("topic").cogroup(evidence.groupBy("topic"))
                     .applyInArrow(fr.arrow_cogroup_fn(partial(_p1, expansions=expansions)), schema))
    if not parts:
        return spark.createDataFrame([], schema)
    return union_all(parts)


def _causes(found: pa.Table, elections: pa.Table) -> pa.Table:
    ks = [Election(r["finding_id"], r["topic"], r["partition"], r["event_ms"], dict(r["numbers"] or ()).get("leader_epoch"),
                   dict(r["numbers"] or ()).get("metadata_offset")) for r in elections.to_pylist()]
    rows = []
    for r in found.to_pylist():
        nums = dict(r["numbers"] or ())
        cid = cause_of(r["kind"], r["topic"], r["partition"], r["event_ms"], truncated_epoch(r["kind"], nums), ks,
                       judged_ts(r["kind"], nums))
        if cid is not None:
            rows.append({"finding_id": r["finding_id"], "cause_finding_id": cid})
    return pa.Table.from_pylist(rows, schema=CAUSES)


def add_causes(findings: DataFrame, elections: DataFrame | None,
               keep: Callable[[DataFrame], DataFrame] = lambda df: df) -> DataFrame:
    """``findings`` with ``cause_finding_id``: the K2 finding (of ``elections``) that explains each F2, L5 or
    S1 truncation finding, null elsewhere. With elections the findings are read twice (the candidates, and
    the rows the causes join to): ``keep`` keeps them (caches or checkpoints; the caller releases them)."""
    from pyspark.sql import functions as F

    if elections is None:
        return findings.withColumn("cause_finding_id", F.lit(None).cast("string"))
    findings = keep(findings)
    k2 = elections.where(F.col("kind") == "unclean_leader_election")
    cand = findings.where(F.col("kind").isin(*sorted(CAUSE_KINDS)))
    causes = (cand.groupBy("topic", "partition").cogroup(k2.groupBy("topic", "partition"))
              .applyInArrow(_causes, _spark_schema(CAUSES)))
    return findings.join(causes.dropDuplicates(["finding_id"]), "finding_id", "left")


def gold_extras(findings: DataFrame) -> dict[str, Column]:
    """Gold columns that are not plain numbers: ``cause_finding_id``, ``expansion_ts`` (a timestamp)."""
    from pyspark.sql import functions as F

    extra = {"expansion_ts": F.timestamp_millis(F.col("numbers").getItem("expansion_ts"))}
    if "cause_finding_id" in findings.columns:
        extra["cause_finding_id"] = F.col("cause_finding_id")
    return extra


# -------------------------------------------------------------------------------------- stale_metadata


def _fill_ids(batches, view: LogView):
    """``tid`` (and a null ``topic_id``) from the log, for rows without an id (:func:`with_topic_ids` sends
    only those; columnar, :func:`~epochlib.rules.kraft_pass.fill_log_topic_ids`)."""
    import pyarrow.compute as pc

    for b in batches:
        if b.num_rows == 0:
            continue
        tid = fill_log_topic_ids(view, b)
        cols = {name: b.column(name) for name in b.schema.names}
        cols["tid"] = tid
        cols["topic_id"] = pc.coalesce(b.column("topic_id"), tid)
        yield pa.RecordBatch.from_arrays([cols[n] for n in b.schema.names], schema=b.schema)


def with_topic_ids(obs: DataFrame, ev: KraftEvidence,
                   keep: Callable[[DataFrame], DataFrame] | None = None) -> DataFrame:
    """M3 with the log: ``tid``/``topic_id`` filled from the log's topic-id lifecycle for observations
    without an id whose capture time the log spans (:func:`~epochlib.rules.kraft.with_log_topic_ids`); every
    stale-metadata rule then keys them by id. Unchanged without a log. ``keep`` keeps the filled rows (so
    several readers of the result fill them once)."""
    from pyspark.sql import functions as F

    if not ev.present:
        return obs
    # only the rows without an id make the round trip through Python (a v10+ capture's rows have one)
    missing = F.col("tid").isNull()
    filled = obs.where(missing).mapInArrow(partial(_fill_ids, view=ev.view), obs.schema)
    return obs.where(~missing).unionByName(filled if keep is None else keep(filled))



#: What M5 reads of an observation (the shuffle to one group per client carries only these).
_M5_COLUMNS = ("capture_ts", "client_id", "broker", "correlation_id", "topic", "topic_id", "partition", "leader_epoch",
               "source", "position", "client_host")


def _m5(table: pa.Table, index: SpanIndex) -> list[Any]:
    return metadata_offsets(index, table, kraft=True)


def _m2_logged(table: pa.Table, index: SpanIndex, grace_ms: int) -> list[Any]:
    return logged_staleness(index, table, grace_ms)


def _judged_keys(batches, index: SpanIndex, grace_ms: int):
    """``mapInArrow``: the :func:`~epochlib.rules.kraft.observation_key` of each row the log judges (the
    rows given are the few whose key a capture-only M2 finding names)."""
    for b in batches:
        judged = judged_rows(index, b, grace_ms)
        if judged.any():
            keys = [observation_key(o) for o in fr.observations_from_arrow(b.filter(pa.array(judged)))]
            yield pa.RecordBatch.from_arrays([pa.array(keys, pa.string())], names=["_judged"])


def _observation_key_col() -> Column:
    """Spark form of :func:`~epochlib.rules.kraft.observation_key` (capture pointer # id or name - partition)."""
    from pyspark.sql import functions as F

    from .stale_metadata import capture_pointer_col, topic_id_col

    return F.concat(capture_pointer_col(), F.lit("#"), F.coalesce(topic_id_col(), F.col("topic")), F.lit("-"),
                    F.col("partition").cast("string"))


def metadata_findings(obs: DataFrame, capture_findings: DataFrame, ev: KraftEvidence, grace_ms: int,
                      keep: Callable[[DataFrame], DataFrame] = lambda df: df) -> DataFrame:
    """The stale-metadata findings with the log: M5, and M2 from the log where it covers the capture (the
    capture-only M2 verdicts of the observations the log judges dropped); ``capture_findings`` unchanged
    without a log. ``keep`` keeps the capture findings (few rows, read twice: for the keys of their
    observations and for the output; the caller releases them)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType

    if not ev.present:
        return capture_findings
    schema = fr.findings_spark_schema()
    m5 = obs.select(*_M5_COLUMNS).groupBy("client_id", "client_host").applyInArrow(
        fr.arrow_group_fn(partial(_m5, index=ev.index)), schema)
    m2 = obs.mapInArrow(fr.arrow_map_fn(partial(_m2_logged, index=ev.index, grace_ms=grace_ms)), schema)
    capture_findings = keep(capture_findings)
    key = F.concat(F.col("evidence").getItem(0), F.lit("#"), F.coalesce(F.col("topic_id"), F.col("topic")), F.lit("-"),
                   F.col("partition").cast("string"))
    m2_capture = capture_findings.where(F.col("rule") == "M2").withColumn("_key", key)
    # only the observations a capture-only M2 finding names can change a verdict: the log judges those few
    names = m2_capture.select("_key").where(F.col("_key").isNotNull()).distinct()
    named = obs.join(F.broadcast(names), _observation_key_col() == names["_key"], "left_semi")
    judged = named.mapInArrow(partial(_judged_keys, index=ev.index, grace_ms=grace_ms),
                              StructType([StructField("_judged", StringType())])).distinct()
    kept = m2_capture.join(F.broadcast(judged), m2_capture["_key"] == judged["_judged"], "left_anti").drop("_key")
    return capture_findings.where(F.col("rule") != "M2").unionByName(kept).unionByName(m2).unionByName(m5)


_RESPONSE = ("broker", "client_id", "source", "position", "capture_ts")


def response_lags_table(rows: pa.Table | pa.RecordBatch, index: SpanIndex, grace_ms: int) -> pa.Table:
    """Per response of ``rows`` with a row the log judges, the largest lag of those rows (``_RESPONSE`` columns
    and ``lag_ms``; :func:`~epochlib.rules.kraft_pass.row_lags`)."""
    judged, lag = row_lags(index, rows, grace_ms)
    mask = pa.array(judged)
    t = pa.table({c: rows.column(c).filter(mask) for c in _RESPONSE})
    t = t.append_column("lag_ms", pa.array(lag[judged], pa.int64()))
    return t.group_by(list(_RESPONSE), use_threads=False).aggregate([("lag_ms", "max")]).rename_columns(
        [*_RESPONSE, "lag_ms"])


def _row_lags(batches, index: SpanIndex, grace_ms: int):
    """``mapInArrow``: :func:`response_lags_table` per batch (a response split over batches is folded by Spark)."""
    for b in batches:
        yield from response_lags_table(b, index, grace_ms).to_batches()


def add_lag(rates: DataFrame, obs: DataFrame, ev: KraftEvidence, grace_ms: int,
            lags: DataFrame | None = None) -> DataFrame:
    """The rates with ``metadata_lag_median_ms`` / ``metadata_lag_max_ms`` on the broker rows (null without a
    log, on client rows, and for days the log does not cover). ``lags``: the lag per response
    (:mod:`.metadata_pass` found them already), else a pass over ``obs`` finds them."""
    from pyspark.sql import functions as F

    if not ev.present:
        return (rates.withColumn("metadata_lag_median_ms", F.lit(None).cast("long"))
                .withColumn("metadata_lag_max_ms", F.lit(None).cast("long")))
    if lags is None:
        rows = obs.select(*_RESPONSE, "topic", "topic_id", "partition", "leader_epoch")
        per_response = _spark_schema(pa.schema([
            pa.field("broker", pa.string()), pa.field("client_id", pa.string()), pa.field("source", pa.string()),
            pa.field("position", pa.int64()), pa.field("capture_ts", pa.int64()), pa.field("lag_ms", pa.int64())]))
        lags = (rows.mapInArrow(partial(_row_lags, index=ev.index, grace_ms=grace_ms), per_response)
                .groupBy(*_RESPONSE).agg(F.max("lag_ms").alias("lag_ms")))
    per = (lags.groupBy(fr.date_of_ms(F.col("capture_ts")).alias("_date"), F.col("broker").alias("_subject"))
           .agg(F.percentile_approx("lag_ms", 0.5).cast("long").alias("metadata_lag_median_ms"),
                F.max("lag_ms").cast("long").alias("metadata_lag_max_ms"))
           .withColumn("_dim", F.lit("broker")))
    cond = ((rates["event_date"] == per["_date"]) & (rates["subject"].eqNullSafe(per["_subject"]))
            & (rates["dimension"] == per["_dim"]))
    return rates.join(per, cond, "left").drop("_date", "_subject", "_dim")
