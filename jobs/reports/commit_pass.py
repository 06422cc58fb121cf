"""The commit pass in Spark: F2/F4 (``fencing_violations``) and S1/S2 (``spurious_offset_resets``) in ONE
cogrouped Arrow call over the commits, which runs :func:`epochlib.rules.check_partition_commits`.

Why one pass: the commits are by far the largest input, and both rule families read them the same way
(one sequence per group, against the partition's lineage snapshots). So the commits are shuffled once,
cogrouped by (topic, partition) with a small *side* table, and every finding comes back tagged with its
rule; :func:`run_reports <jobs.reports.run_reports>` splits F* and S* rows afterwards.

- left: the live commits (:func:`read_commits`: txn_state none/committed, tombstones kept), only the
  columns the rules read (:data:`~epochlib.rules.COMMIT_COLUMNS`, ``ts`` = event time, else commit time);
- right (the side table, small): the partition's ``epoch_lineage`` rows (``_k`` = 0) and, when the resets
  are wanted, the ``group_metadata`` records of every group that commits to the partition (``_k`` = 1,
  a join of the distinct (group, topic, partition) of the commits with the records) — without a shuffle
  and sort of every commit by group.

This module only moves Arrow in and out (:func:`run_commit_pass`); what the pass decides, and how it
stays equal to the reference rules, is in :mod:`epochlib.rules.commit_pass`. Large runs on the delta-rs sink
run the same :func:`run_commit_pass` without the shuffle: :mod:`.commit_spill`.
"""

from __future__ import annotations

import datetime as dt
from collections import defaultdict
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import pyarrow as pa
import pyarrow.compute as pc

from epochlib.rules import COMMIT_COLUMNS, GroupState, check_partition_commits

from . import _frames as fr

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import Config

__all__ = ["COMMIT_COLUMNS", "commit_findings", "commit_rows", "group_records", "read_commits", "run_commit_pass"]

STATE_FIELDS = (
    "g_event_ts", "g_member_count", "g_client_ids", "g_is_tombstone", "g_generation", "g_protocol_type",
    "g_log_offset", "g_source", "g_position", "g_record_type", "g_member_ids",
)  # fmt: skip
#: The ``offset_commits`` columns :func:`read_commits` reads.
SILVER_COMMIT_COLUMNS = (
    "group_id", "topic", "partition", "committed_offset", "leader_epoch", "commit_ts", "event_ts",
    "is_tombstone", "txn_state", "log_partition", "log_offset", "producer_id", "source_kind", "source",
    "position",
)  # fmt: skip


# ------------------------------------------------------------------------------------ executor side


def _states(side: pa.Table) -> dict[str, list[GroupState]]:
    """Group records of the side table per group (``check_partition_commits`` orders them)."""
    if "_k" not in side.column_names or "g_event_ts" not in side.column_names:
        return {}
    recs = side.filter(pc.equal(side.column("_k"), 1))
    n = recs.num_rows
    cols = [recs.column(f).to_pylist() if f in recs.column_names else [None] * n for f in ("group_id", *STATE_FIELDS)]
    out: dict[str, list[GroupState]] = defaultdict(list)
    for gid, ts, count, clients, tomb, gen, ptype, lo, src, pos, rtype, ids in zip(*cols, strict=True):
        out[str(gid)].append(
            GroupState(
                group_id=str(gid), event_ts=int(ts), member_count=count, client_ids=tuple(clients or ()),
                is_tombstone=bool(tomb), generation=gen, protocol_type=ptype, log_offset=lo, source=src,
                position=pos, record_type=rtype, member_ids=None if ids is None else tuple(ids),
            )  # fmt: skip
        )
    return out


def run_commit_pass(
    commit_table: pa.Table, side_table: pa.Table, *, tolerance_ms: int, fencing: bool = True, resets: bool = True,
    topic_created: Mapping[str, int] | None = None,
) -> list[Any]:
    """F2/F4 and S1/S2 finding rows (:data:`~jobs.reports._frames.FINDINGS_ARROW`, with ``group_clients``)
    of one (topic, partition): the cogroup's two Arrow tables in, :func:`check_partition_commits` on them.
    ``topic_created``: topic id -> creation time from the replayed metadata log (shipped in the closure; None
    without a log)."""
    if commit_table.num_rows == 0:
        return []
    lin = side_table.filter(pc.equal(side_table.column("_k"), 0)) if "_k" in side_table.column_names else side_table
    snaps = fr.snapshots_from_arrow(lin.select([c for c in lin.column_names if c in _SNAPSHOT_FIELDS]))
    found = check_partition_commits(
        commit_table, snaps, _states(side_table) if resets else None, tolerance_ms=tolerance_ms, fencing=fencing,
        resets=resets, topic_created=topic_created,
    )  # fmt: skip
    return [fr.finding_row(f, group_clients=clients) for f, clients in found]


_SNAPSHOT_FIELDS = frozenset(
    ("broker", "snapshot_ts", "topic", "partition", "topic_id", "entries", "checkpoint_version", "log_start_offset",
     "high_watermark", "recovery_point", "log_end_offset", "source")  # fmt: skip
)


# -------------------------------------------------------------------------------------- driver side


def read_commits(
    spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
    state: fr.InputState | None = None,
) -> DataFrame:
    """Live ``offset_commits`` rows of the window (with the inputs' lookback rows, ``state``; txn_state
    none/committed; tombstones kept: they end sequences), times as epoch ms: the commits both the
    fencing and the resets report read."""
    from pyspark.sql import functions as F

    df = fr.read_silver(spark, config, "offset_commits", cluster, window, state).select(*SILVER_COMMIT_COLUMNS)
    live = F.coalesce(F.col("txn_state"), F.lit("none")).isin("none", "committed")
    return fr.ms_columns(df.where(live), ("commit_ts", "event_ts"))


def commit_rows(commits: DataFrame) -> DataFrame:
    """Live commits (times in ms, as :func:`read_commits` gives them) narrowed to the keys and
    :data:`~epochlib.rules.COMMIT_COLUMNS`."""
    from pyspark.sql import functions as F

    ts = F.coalesce(F.col("event_ts"), F.col("commit_ts")).alias("ts")
    return commits.select(
        "topic", "partition", "group_id", "committed_offset", "leader_epoch", ts, "is_tombstone", "log_offset",
        "source", "position",
    )  # fmt: skip


def group_records(groups: DataFrame) -> DataFrame:
    """``group_metadata`` records as the ``g_*`` state the resets read (time, member count and client ids,
    tombstone, generation, protocol type, pointer, record type and member ids — the KIP-848 member set is
    folded from those, :func:`epochlib.rules.current_membership`), keyed by ``group_id``."""
    from pyspark.sql import functions as F

    g = fr.ms_columns(groups, ("event_ts", "state_ts"))
    count = F.coalesce(F.col("member_count"), F.when(F.col("members").isNotNull(), F.size("members")))
    clients = F.filter(F.transform(F.coalesce(F.col("members"), F.array()), lambda m: m["client_id"]),
                       lambda x: x.isNotNull())  # fmt: skip
    return g.where(F.col("group_id").isNotNull()).select(
        "group_id",
        F.coalesce("event_ts", "state_ts", F.lit(0)).alias("g_event_ts"),
        count.cast("int").alias("g_member_count"),
        clients.alias("g_client_ids"),
        F.coalesce(F.col("is_tombstone"), F.lit(False)).alias("g_is_tombstone"),
        F.col("generation").alias("g_generation"),
        F.col("protocol_type").alias("g_protocol_type"),
        F.col("log_offset").alias("g_log_offset"),
        F.col("source").alias("g_source"),
        F.col("position").alias("g_position"),
        F.col("record_type").alias("g_record_type"),
        F.when(F.col("members").isNotNull(), F.transform("members", lambda m: m["member_id"])).alias("g_member_ids"),
    )


def commit_findings(
    commits: DataFrame,
    lineage_df: DataFrame,
    groups: DataFrame | None,
    *,
    tolerance_ms: int,
    fencing: bool = True,
    resets: bool = True,
    topic_created: Mapping[str, int] | None = None,
) -> DataFrame:
    """F2/F4 and S1/S2 findings (FINDINGS schema, uncorrelated, in range or not) in one cogroup of the
    commits with the lineage (and, for the resets, the group records of the partition's groups);
    ``topic_created``: topic id -> creation time (the metadata log's), for the rounds."""
    from functools import partial

    from pyspark.sql import functions as F

    rows = commit_rows(commits)
    side = lineage_df.withColumn("_k", F.lit(0))
    if resets and groups is not None:
        pairs = rows.select("group_id", "topic", "partition").distinct()
        recs = pairs.join(group_records(groups), "group_id").withColumn("_k", F.lit(1))
        side = side.unionByName(recs, allowMissingColumns=True)
    fn = partial(run_commit_pass, tolerance_ms=tolerance_ms, fencing=fencing, resets=resets,
                 topic_created=dict(topic_created) if topic_created else None)
    return (
        rows.groupBy("topic", "partition")
        .cogroup(side.groupBy("topic", "partition"))
        .applyInArrow(fr.arrow_cogroup_fn(fn), fr.findings_spark_schema())
    )
