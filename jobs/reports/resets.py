"""The ``spurious_offset_resets`` report: S1 (every classification), S2, with M4 correlation.

How it runs (executors only):

1. **As-of group state** (Spark window functions, no driver loop): the window's ``group_metadata`` records
   and live commits are unioned per ``group_id`` and ordered by (time, records before commits, log
   offset); ``last(state, ignorenulls)`` over the rows up to each commit attaches the group's last
   record at or before the commit (member count, tombstone, member client ids, pointer). That is exactly
   what :meth:`~epochlib.rules.ResetContext.group_state_at` would pick from all records.
2. **S1/S2** (:func:`~epochlib.rules.check_offset_resets`): the commits (with their attached states)
   cogrouped with ``epoch_lineage`` by (topic, partition) — ``applyInArrow``; inside, one sequence per
   group in ``__consumer_offsets`` log order and one :class:`~epochlib.rules.ResetContext` with the
   partition's snapshots (rounds within ``snapshot_tolerance_seconds``) and the group's attached states.
   Log-end estimates for S2b are the snapshots' log end (segments) or high watermark
   (replication-offset-checkpoint); no estimate is made from commits, so without snapshots S2b says
   nothing ("do not guess").
3. **M4** (Spark join): a reset of a kind in :data:`~epochlib.rules.CORRELATED_KINDS` is joined with the
   M1/M2 findings of the same (topic, partition) at most ``correlation_window_minutes`` before it
   (inclusive); when the group's state at the commit names member client ids, only those clients'
   findings count, otherwise any client's. The latest qualifying finding wins (ties: the smaller id),
   as in :func:`~epochlib.rules.correlate_resets`. The finding id does not change; the detail gains the
   cause "stale metadata".
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from epochlib.rules import CORRELATED_KINDS, GroupState, ResetContext, check_offset_resets

from . import _frames as fr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame


__all__ = ["correlate", "reset_findings", "resets_frame", "resets_in_range", "with_group_state"]

_STATE_FIELDS = (
    "g_event_ts", "g_member_count", "g_client_ids", "g_is_tombstone", "g_generation", "g_protocol_type",
    "g_log_offset", "g_source", "g_position",
)  # fmt: skip


def with_group_state(commits: DataFrame, groups: DataFrame) -> DataFrame:
    """``commits`` (times in ms) plus the ``g_*`` columns of their group's last metadata record at or
    before the commit (all null when the group has no earlier record in the window)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    g = fr.ms_columns(groups, ("event_ts", "state_ts"))
    count = F.coalesce(F.col("member_count"), F.when(F.col("members").isNotNull(), F.size("members")))
    clients = F.filter(F.transform(F.coalesce(F.col("members"), F.array()), lambda m: m["client_id"]),
                       lambda x: x.isNotNull())  # fmt: skip
    state = F.struct(
        F.coalesce("event_ts", "state_ts", F.lit(0)).alias("g_event_ts"),
        count.cast("int").alias("g_member_count"),
        clients.alias("g_client_ids"),
        F.coalesce(F.col("is_tombstone"), F.lit(False)).alias("g_is_tombstone"),
        F.col("generation").alias("g_generation"),
        F.col("protocol_type").alias("g_protocol_type"),
        F.col("log_offset").alias("g_log_offset"),
        F.col("source").alias("g_source"),
        F.col("position").alias("g_position"),
    )
    recs = g.where(F.col("group_id").isNotNull()).select(
        "group_id",
        F.coalesce("event_ts", "state_ts", F.lit(0)).alias("_ts"),
        F.lit(0).alias("_k"),
        F.col("log_offset").alias("_lo"),
        state.alias("_state"),
    )
    com = commits.withColumn("_ts", F.coalesce("event_ts", "commit_ts", F.lit(0))).withColumn("_k", F.lit(1))
    com = com.withColumn("_lo", F.col("log_offset")).withColumn("_state", F.lit(None).cast(recs.schema["_state"].dataType))
    both = com.unionByName(recs, allowMissingColumns=True)
    w = (
        Window.partitionBy("group_id")
        .orderBy("_ts", "_k", F.col("_lo").asc_nulls_first())
        .rowsBetween(Window.unboundedPreceding, Window.currentRow)
    )
    attached = both.withColumn("_asof", F.last("_state", ignorenulls=True).over(w)).where(F.col("_k") == 1)
    return attached.select(*commits.columns, *[F.col("_asof").getField(f).alias(f) for f in _STATE_FIELDS])


def _states(table: pa.Table) -> dict[str, list[GroupState]]:
    """Distinct attached group states per group, ordered by (time, log offset)."""
    cols = {f: table.column(f).to_pylist() for f in ("group_id", *_STATE_FIELDS)}
    seen: dict[str, dict[tuple, GroupState]] = defaultdict(dict)
    for gid, ts, count, clients, tomb, gen, ptype, lo, src, pos in zip(*cols.values(), strict=True):
        if ts is None:
            continue
        key = (ts, lo, src, pos)
        if key not in seen[gid]:
            seen[gid][key] = GroupState(
                group_id=str(gid), event_ts=int(ts), member_count=count, client_ids=tuple(clients or ()),
                is_tombstone=bool(tomb), generation=gen, protocol_type=ptype, log_offset=lo, source=src,
                position=pos,
            )  # fmt: skip
    return {
        gid: [v for _, v in sorted(d.items(), key=lambda kv: (kv[0][0], kv[0][1] if kv[0][1] is not None else -1))]
        for gid, d in seen.items()
    }


def _s12(commit_table: pa.Table, snap_table: pa.Table, tolerance_ms: int) -> list[dict[str, Any]]:
    if commit_table.num_rows == 0:
        return []
    snaps = fr.snapshots_from_arrow(snap_table)
    snaps.sort(key=fr.snapshot_order)
    states = _states(commit_table)
    by_group: dict[str, list[Any]] = defaultdict(list)
    for c in fr.commits_from_arrow(commit_table):
        by_group[c.group_id].append(c)
    rows = []
    for gid in sorted(by_group):
        seq = sorted(by_group[gid], key=fr.commit_log_order)
        ctx = ResetContext(snapshots=snaps, group_states=states.get(gid, ()), tolerance_ms=tolerance_ms)
        for f in check_offset_resets(seq, ctx):
            g = ctx.group_state_at(f.event_ts)
            rows.append(fr.finding_row(f, group_clients=g.client_ids if g is not None else None))
    return rows


def reset_findings(commits_with_state: DataFrame, lineage_df: DataFrame, tolerance_ms: int) -> DataFrame:
    """Every S1/S2 finding (FINDINGS schema) over the window, in range or not, uncorrelated."""
    return (
        commits_with_state.groupBy("topic", "partition")
        .cogroup(lineage_df.groupBy("topic", "partition"))
        .applyInArrow(fr.arrow_cogroup_fn(partial(_s12, tolerance_ms=tolerance_ms)), fr.findings_spark_schema())
    )


def correlate(resets: DataFrame, metadata: DataFrame, window_ms: int) -> DataFrame:
    """M4: ``correlated_finding_id`` (and the cause in ``detail``) on resets that follow an M1/M2
    finding of the same partition within ``window_ms`` (the group's clients' findings when known)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    meta = metadata.where(F.col("rule").isin("M1", "M2")).select(
        F.col("finding_id").alias("_m_id"),
        F.col("event_ms").alias("_m_ms"),
        F.col("topic").alias("_m_topic"),
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
    """The ``spurious_offset_resets`` gold rows (``classification`` = the kind)."""
    from pyspark.sql import functions as F

    return fr.to_gold(findings, "spurious_offset_resets", cluster, run_id, extra={"classification": F.col("kind")})


def resets_in_range(
    commits_with_state: DataFrame,
    lineage_df: DataFrame,
    metadata: DataFrame | None,
    date_range: tuple[dt.date, dt.date],
    *,
    tolerance_ms: int,
    window_ms: int,
) -> DataFrame:
    """S1/S2 findings of events in the range, deduplicated and (with ``metadata``) M4-correlated."""
    found = fr.in_range(fr.dedupe(reset_findings(commits_with_state, lineage_df, tolerance_ms)), date_range)
    return correlate(found, metadata, window_ms) if metadata is not None else found
