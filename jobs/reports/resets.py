"""The ``spurious_offset_resets`` report: S1 (every classification), S2, with M4 correlation.

How it runs (executors only):

1. **S1/S2** (:func:`~epochlib.rules.check_offset_resets`), in the commit pass (:mod:`.commit_pass`,
   shared with F2/F4): the commits cogrouped by (topic, partition) with the partition's ``epoch_lineage``
   rows and the ``group_metadata`` records of the groups committing to it (:func:`group_records`: the
   window's, and from before it the latest of each kind per group, however old; a join of the distinct
   (group, topic, partition) with the records; no shuffle of the commits by group) — ``applyInArrow``;
   inside, one sequence per group in ``__consumer_offsets`` log order and one
   :class:`~epochlib.rules.ResetContext` with the partition's snapshots (rounds within
   ``snapshot_tolerance_seconds``) and the group's records, whose ``group_state_at`` is the group's last
   record at or before a commit (member count, tombstone, member client ids, pointer).
   Log-end estimates for S2b are the snapshots' log end (segments) or high watermark
   (replication-offset-checkpoint), and "the highest offset seen": the largest offset another group had
   committed to the partition before the jump (:class:`~epochlib.rules.OffsetsSeen`). With none of
   these S2b says nothing ("do not guess").
2. **M4** (Spark join): a reset of a kind in :data:`~epochlib.rules.CORRELATED_KINDS` is joined with the
   M1/M2 findings of the same (topic, partition) at most ``correlation_window_minutes`` before it
   (inclusive); when the group's state at the commit names member client ids, only those clients'
   findings count, otherwise any client's. The latest qualifying finding wins (ties: the smaller id),
   as in :func:`~epochlib.rules.correlate_resets`. The finding id does not change; the detail gains the
   cause "stale metadata". A finding of a response naming the topic by id only (v12+) is matched under
   the name other observations give that id (:func:`topic_names`: the observations are read only then).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from typing import TYPE_CHECKING

from epochlib.rules import CORRELATED_KINDS

from . import _frames as fr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import Config


__all__ = ["correlate", "group_records", "resets_frame", "resets_in_range", "topic_names"]


#: The first day :func:`group_records` reads from (every stored day before the window).
_FIRST_DAY = dt.date(1970, 1, 1)


def group_records(
    spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
    inputs: fr.InputState | None = None,
) -> DataFrame:
    """The ``group_metadata`` rows S1b/S2b read: those of the ``window`` and, from every day before it (the stored
    table's and the run's inputs' state, :data:`jobs.ingest.WHOLE_HISTORY_STATE`), the latest record per group of
    each record type (per member for KIP-848 member records; of the group-level kinds the latest tombstone too): a
    group's membership is long-lived state, and its
    last record before the window says whether it is empty however old it is (``__consumer_offsets`` is
    compacted, so it is retained). These are exactly the records :func:`epochlib.rules.current_membership`
    folds to the member set at the window's start (a later record of a kind replaces the earlier one; a group
    tombstone clears the member records before it), so a run over one day sees the membership a run over more
    days sees."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    rows = fr.read_silver(spark, config, "group_metadata", cluster, window, inputs)
    if window[0] <= _FIRST_DAY:
        return rows
    older = fr.read_silver(spark, config, "group_metadata", cluster, (_FIRST_DAY, window[0] - dt.timedelta(days=1)),
                           inputs)  # fmt: skip
    # a member record's latest (a tombstone removes the member); of the group-level kinds the latest tombstone and
    # the latest other record (a tombstone clears every member record before it, the later one of the two decides
    # whether the group is deleted)
    is_member = F.col("record_type") == "consumer_group_member_metadata"
    member = F.when(is_member, F.col("members")[0]["member_id"])
    tomb = F.when(~is_member | F.col("record_type").isNull(), F.coalesce(F.col("is_tombstone"), F.lit(False)))
    key = [F.col("group_id"), F.coalesce(F.col("record_type"), F.lit("")), member, tomb]
    latest = Window.partitionBy(*key).orderBy(
        F.coalesce(F.col("event_ts"), F.col("state_ts")).desc_nulls_last(), F.col("log_offset").desc_nulls_last(),
        F.col("source").desc_nulls_last(), F.col("position").desc_nulls_last())  # fmt: skip
    last = older.where(F.col("group_id").isNotNull()).withColumn("_n", F.row_number().over(latest))
    return rows.unionByName(last.where(F.col("_n") == 1).drop("_n"))


def topic_names(metadata: DataFrame, observations: Callable[[], DataFrame]) -> DataFrame | None:
    """Topic id -> name (``topic_id``, ``topic``) for the M1/M2 findings without a topic name (a v12+
    response may name a topic by id only), from the observations that name both (the smallest name, as
    :func:`~epochlib.rules.topic_names_of`); None when every such finding has its name (the usual case: the
    observations are then not read)."""
    from pyspark.sql import functions as F

    nameless = metadata.where(F.col("rule").isin("M1", "M2") & F.col("topic").isNull() & F.col("topic_id").isNotNull())
    ids = sorted(r[0] for r in nameless.select("topic_id").distinct().collect())
    if not ids:
        return None
    obs = observations()
    return (obs.where(F.col("topic").isNotNull() & F.col("topic_id").isin(ids))
            .groupBy("topic_id").agg(F.min("topic").alias("topic")))


def correlate(resets: DataFrame, metadata: DataFrame, window_ms: int, names: DataFrame | None = None) -> DataFrame:
    """M4: ``correlated_finding_id`` (and the cause in ``detail``) on resets that follow an M1/M2
    finding of the same partition within ``window_ms`` (the group's clients' findings when known). A
    finding without a topic name takes the one ``names`` (:func:`topic_names`) gives its id."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    m = metadata.where(F.col("rule").isin("M1", "M2"))
    topic = F.col("topic")
    if names is not None:
        n = names.select(F.col("topic_id").alias("_n_id"), F.col("topic").alias("_n_topic"))
        m = m.join(F.broadcast(n), m["topic_id"] == n["_n_id"], "left")
        topic = F.coalesce(F.col("topic"), F.col("_n_topic"))
    meta = m.select(
        F.col("finding_id").alias("_m_id"),
        F.col("event_ms").alias("_m_ms"),
        topic.alias("_m_topic"),
        F.col("partition").alias("_m_partition"),
        F.col("client_id").alias("_m_client"),
    )
    r = resets.where(F.col("kind").isin(*sorted(CORRELATED_KINDS))).select(
        "finding_id", "event_ms", "topic", "partition", "group_clients"
    )
    known = F.coalesce(F.size("group_clients"), F.lit(0)) > 0
    cond = (
        (r["topic"] == meta["_m_topic"])
        & (r["partition"] == meta["_m_partition"])
        & (meta["_m_ms"] <= r["event_ms"])
        & (r["event_ms"] <= meta["_m_ms"] + F.lit(window_ms))
        & (~known | F.array_contains(F.col("group_clients"), meta["_m_client"]))
    )
    w = Window.partitionBy("finding_id").orderBy(F.col("_m_ms").desc(), F.col("_m_id"))
    best = (
        r.join(meta, cond, "inner")
        .withColumn("_n", F.row_number().over(w))
        .where(F.col("_n") == 1)
        .select(F.col("finding_id").alias("_r_id"), "_m_id")
    )
    out = resets.join(best, resets["finding_id"] == best["_r_id"], "left")
    cause = F.concat(F.col("detail"), F.lit(" Likely cause: stale metadata (finding "), F.col("_m_id"), F.lit(")."))
    return (
        out.withColumn("correlated_finding_id", F.coalesce(F.col("_m_id"), F.col("correlated_finding_id")))
        .withColumn("detail", F.when(F.col("_m_id").isNotNull(), cause).otherwise(F.col("detail")))
        .drop("_r_id", "_m_id")
    )


def resets_frame(
    findings: DataFrame, date_range: tuple[dt.date, dt.date], cluster: str, run_id: str
) -> DataFrame:
    """The ``spurious_offset_resets`` gold rows (``classification`` = the kind; ``cause_finding_id`` when the
    findings carry it, :func:`jobs.reports.kraft.add_causes`)."""
    from pyspark.sql import functions as F

    extra = {"classification": F.col("kind")}
    if "cause_finding_id" in findings.columns:
        extra["cause_finding_id"] = F.col("cause_finding_id")
    return fr.to_gold(findings, "spurious_offset_resets", cluster, run_id, extra=extra)


def resets_in_range(
    reset_findings_df: DataFrame,
    metadata: DataFrame | None,
    date_range: tuple[dt.date, dt.date],
    *,
    window_ms: int,
    observations: Callable[[], DataFrame] | None = None,
) -> DataFrame:
    """S1/S2 findings (the commit pass's S rows) of events in the range, deduplicated and (with
    ``metadata``) M4-correlated (``observations``: the metadata observations, read only when a finding
    lacks its topic name, :func:`topic_names`)."""
    from pyspark.sql import functions as F

    found = reset_findings_df.where(F.col("rule").startswith("S"))
    found = fr.in_range(fr.dedupe(found), date_range)
    if metadata is None:
        return found
    names = topic_names(metadata, observations) if observations is not None else None
    return correlate(found, metadata, window_ms, names)
