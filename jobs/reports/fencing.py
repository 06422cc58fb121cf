"""The ``fencing_violations`` report: L1, L2, L3, L5, D1, D2, F2, F4 (F5 inside F2/F4).

How each rule runs (all on the executors, over silver rows of ``[from - lookback, to]``):

========  ===============================================================  ==============================
rule      Spark shape                                                      epochlib function
========  ===============================================================  ==============================
L1        ``quarantine`` rows of ``leader-epoch-checkpoint`` files,         ``check_checkpoint_unreadable``
          ``mapInArrow`` (a file without ``snapshot=`` in its path is
          dated at its quarantine row's ``event_date``)
L2        ``epoch_lineage`` rows, ``mapInArrow`` (one snapshot per row)    ``check_lineage_monotonic``
L5        ``epoch_lineage`` hash-partitioned by (topic, partition),        ``check_lineage_history``
          ``mapInArrow``: per (broker, topic, partition), snapshots by time
L3        ``epoch_lineage`` cogrouped with ``record_batches`` by           ``check_batch_epochs``
          (broker, topic, partition) — replicas with segments only —
          and, inside, per snapshot_ts: the batches of a
          snapshot against that snapshot's lineage (an empty lineage
          when its checkpoint was unreadable: only the regression check)
D1, D2    the same ``mapInArrow`` as L5, per (topic, partition):          ``check_replica_divergence``
          rounds within ``snapshot_tolerance_seconds``
F2, F4    ``offset_commits`` (txn_state none/committed, tombstones kept)   ``check_partition_commits``
          cogrouped with ``epoch_lineage`` by (topic, partition) in the    (``check_commit_fencing``)
          commit pass (:mod:`.commit_pass`, shared with S1/S2); inside,
          one sequence per group in ``__consumer_offsets`` log order and
          one ``SnapshotRounds`` per partition (rounds within the tolerance)
========  ===============================================================  ==============================

L3 sees one batch in every snapshot whose segments still hold it: it is reported once, from the
earliest snapshot that shows it (``dedupe_key`` broker/topic/partition/base offset/kind).
Findings are written for events in ``[from, to]`` only (``event_date`` per DESIGN.md: snapshot time for
L1/L2/L5/D1/D2, the batch's max timestamp for L3, the commit's time for F2/F4).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from epochlib.rules import (
    ReplicaSnapshot,
    check_batch_epochs,
    check_checkpoint_unreadable,
    check_lineage_history,
    check_lineage_monotonic,
    check_replica_divergence,
)

from . import _frames as fr
from . import commit_pass

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import Config

__all__ = ["fencing_findings", "fencing_frame", "lineage"]

_LINEAGE_COLUMNS = (
    "broker", "snapshot_ts", "topic", "partition", "topic_id", "entries", "checkpoint_version",
    "log_start_offset", "high_watermark", "recovery_point", "log_end_offset", "source",
)  # fmt: skip
_BATCH_COLUMNS = (
    "broker", "snapshot_ts", "topic", "partition", "source", "position", "base_offset", "last_offset",
    "partition_leader_epoch", "magic", "is_transactional", "is_control", "producer_id", "records_count",
    "max_timestamp", "event_ts",
)  # fmt: skip


# ----------------------------------------------------------------------------------------- inputs


def lineage(
    spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
    state: fr.InputState | None = None,
) -> DataFrame:
    """``epoch_lineage`` rows of the window (with the inputs' lookback rows, ``state``), ``snapshot_ts`` as
    epoch ms."""
    df = fr.read_silver(spark, config, "epoch_lineage", cluster, window, state).select(*_LINEAGE_COLUMNS)
    return fr.ms_columns(df, ("snapshot_ts",))


def lineage_ahead(spark: SparkSession, config: Config, cluster: str, last_day: dt.date,
                  ahead: DataFrame | None = None) -> DataFrame | None:
    """``epoch_lineage`` rows of the day after ``last_day`` (as :func:`lineage`): what earlier runs wrote for it,
    and ``ahead``, the run's own inputs' snapshots of that day (:attr:`jobs.ingest.IngestResult.lookahead`); a
    snapshot both hold counts once. None when there are none (known from the Delta log where it tells).

    F2/S1/S2 judge a commit against the first snapshot round at or after it: for a commit late on the range's
    last day that round is on the next day, and a run over that day alone found otherwise than a run over both
    days (an F2's end offset, a truncation taken for a spurious rewind)."""
    day = last_day + dt.timedelta(days=1)
    if ahead is None and (listed := fr.sink_files(spark, config, "epoch_lineage", cluster, (day, day))) is not None \
            and not listed[1]:
        return None  # the usual nightly run: nothing of the next day yet (no Spark job to find that out)
    # the inputs' rows join the table's as read_silver joins a lookback state (a row both hold counts once)
    state = None if ahead is None else fr.InputState(before=day + dt.timedelta(days=1), frames={"epoch_lineage": ahead})
    return lineage(spark, config, cluster, (day, day), state)


# --------------------------------------------------------------------------------- executor functions


def _snapshots(table: pa.Table) -> list[ReplicaSnapshot]:
    snaps = fr.snapshots_from_arrow(table)
    snaps.sort(key=fr.snapshot_order)
    return snaps


def _l1(table: pa.Table) -> list[Any]:
    out = []
    for rec, day in zip(fr.quarantine_from_arrow(table), table.column("event_date").to_pylist(), strict=True):
        fallback = (day - dt.date(1970, 1, 1)).days * fr.MS_PER_DAY if day is not None else None
        out += check_checkpoint_unreadable(rec, fallback_ts=fallback)
    return out


def _l2(table: pa.Table) -> list[Any]:
    out = []
    for s in fr.snapshots_from_arrow(table):
        out += check_lineage_monotonic(s)
    return out


def _l3(snap_table: pa.Table, batch_table: pa.Table) -> list[dict[str, Any]]:
    if batch_table.num_rows == 0:
        return []
    batches = fr.batches_from_arrow(batch_table)
    batches.sort(key=lambda b: (b.base_offset, b.source or "", b.position or 0))
    snaps = _snapshots(snap_table)
    if snaps:
        snap = snaps[-1]
    else:  # the checkpoint of this snapshot was unreadable (L1): no lineage, only the regression check
        b = batches[0]
        snap = ReplicaSnapshot(broker=b.broker, snapshot_ts=b.snapshot_ts or 0, topic=b.topic, partition=b.partition)
    rows = []
    for f in check_batch_epochs(snap, batches):
        key = f"{f.broker}/{f.topic}/{f.partition}/{f.numbers.get('base_offset')}/{f.kind}"
        rows.append(fr.finding_row(f, dedupe_key=key, dedupe_order=snap.snapshot_ts))
    return rows


def _l3_replica(snap_table: pa.Table, batch_table: pa.Table) -> list[dict[str, Any]]:
    """L3 for one replica (broker, topic, partition): :func:`_l3` per snapshot time (null = one key, as
    Spark groups it). One call per replica instead of per snapshot: most snapshots carry no segments, and
    a grouped call costs far more than the rule on a handful of batches."""
    if batch_table.num_rows == 0:
        return []
    snap_ts = snap_table.column("snapshot_ts").to_pylist()
    rows = []
    for ts, idx in _positions(batch_table.column("snapshot_ts").to_pylist()).items():
        snaps = [i for i, t in enumerate(snap_ts) if t == ts]
        if not snaps:  # batches dated in the window from a snapshot dated after it: no lineage to judge them
            continue
        rows += _l3(snap_table.take(pa.array(snaps, pa.int64())), batch_table.take(pa.array(idx, pa.int64())))
    return rows


def _positions(values: list[Any]) -> dict[Any, list[int]]:
    out: dict[Any, list[int]] = {}
    for i, v in enumerate(values):
        out.setdefault(v, []).append(i)
    return out


def _lineage_rules(batches: Iterator[pa.RecordBatch], *, tolerance_ms: int) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` over ``epoch_lineage`` rows hash-partitioned by (topic, partition) (or all in one partition, in a
    small run): D1/D2 per partition and L5 per replica (broker) of it, each over its snapshots by time.

    One call per Spark partition, not one per group: with ``groupBy().applyInArrow`` the ~3,300 groups of
    15 k lineage rows cost ~7 task-s of round trips, the rules themselves ~1.6 s. The task holds its
    partition's lineage rows as Arrow (a share of the lineage: AQE merges hash partitions up to its advisory
    size, never splits one), and one (topic, partition) at a time as Python objects."""
    parts = [b for b in batches if b.num_rows]
    if not parts:
        return
    table, bounds = fr.key_groups(pa.Table.from_batches(parts))
    # replicas by the broker column's values, as Spark groups them (a null broker is not one named "None",
    # though both read as "None" in a snapshot)
    brokers = fr.value_codes(table.column("broker").combine_chunks()).tolist()
    found: list[Any] = []
    for lo, hi in bounds:
        snaps = fr.snapshots_from_arrow(table.slice(lo, hi - lo))
        order = sorted(range(len(snaps)), key=lambda i: fr.snapshot_order(snaps[i]))
        found += check_replica_divergence([snaps[i] for i in order], tolerance_ms=tolerance_ms)
        codes = brokers[lo:hi]
        replicas: dict[int, list[ReplicaSnapshot]] = {}  # each in time order
        for i in order:
            replicas.setdefault(codes[i], []).append(snaps[i])
        for replica in replicas.values():
            found += check_lineage_history(replica)
    yield from fr.findings_table(found).to_batches()


# ---------------------------------------------------------------------------------------- the report


def fencing_findings(
    spark: SparkSession,
    config: Config,
    cluster: str,
    window: tuple[dt.date, dt.date],
    *,
    lineage_df: DataFrame | None = None,
    commits_df: DataFrame | None = None,
    commit_findings_df: DataFrame | None = None,
    state: fr.InputState | None = None,
    lineage_ahead: DataFrame | None = None,
    topic_created: Mapping[str, int] | None = None,
) -> DataFrame:
    """Every fencing finding (FINDINGS schema) over the window's evidence, in range or not.

    ``lineage_ahead`` (:func:`lineage_ahead`) joins L3's lineage side: a snapshot taken just after midnight holds
    batches of the range's last day, whose L3 finding is dated on that day (a nightly run lost it: the day's run
    had the batches but not that snapshot's lineage, the next day's run had both but the finding out of range).

    F2/F4 come from the commit pass (:mod:`.commit_pass`): ``commit_findings_df`` when the caller ran it
    for the resets too (only its F rows are taken), else a fencing-only pass over ``commits_df`` (with
    ``topic_created``, the metadata log's creation time of each topic id)."""
    from pyspark.sql import functions as F

    from ..session import one_partition

    schema = fr.findings_spark_schema()
    tol = int(config.rules.snapshot_tolerance_seconds) * 1000
    lin = lineage_df if lineage_df is not None else lineage(spark, config, cluster, window, state)

    quarantine = fr.read_silver(spark, config, "quarantine", cluster, window).where(
        (F.col("source_kind") == "logdirs") & F.col("source").endswith("leader-epoch-checkpoint")
    )
    l1 = quarantine.select("source", "reason", "source_kind", "position", "unit", "event_date").mapInArrow(
        fr.arrow_map_fn(_l1), schema
    )
    l2 = lin.mapInArrow(fr.arrow_map_fn(_l2), schema)
    # each (topic, partition) in one task: hash-partitioned, or all in one in a small run (jobs.session.one_partition:
    # its rows are mostly in one partition already, and coalescing moves them without a shuffle)
    by_partition = lin.coalesce(1) if one_partition(spark) else lin.repartition("topic", "partition")
    l5_d12 = by_partition.mapInArrow(partial(_lineage_rules, tolerance_ms=tol), schema)
    batches = fr.ms_columns(
        fr.read_silver(spark, config, "record_batches", cluster, window, state).select(*_BATCH_COLUMNS),
        ("snapshot_ts", "max_timestamp", "event_ts"),
    )
    keys = ["broker", "topic", "partition"]
    # only replicas with segments can give L3: the lineage side is cut to them (null-safe, as grouping is)
    with_batches = batches.select(*[F.col(k).alias(f"_b_{k}") for k in keys]).distinct()
    lin_all = lin if lineage_ahead is None else lin.unionByName(lineage_ahead)
    lin_l3 = lin_all.join(
        with_batches, [lin_all[k].eqNullSafe(with_batches[f"_b_{k}"]) for k in keys], "left_semi"
    )
    l3 = (
        lin_l3.groupBy(*keys)
        .cogroup(batches.groupBy(*keys))
        .applyInArrow(fr.arrow_cogroup_fn(_l3_replica), schema)
    )
    if commit_findings_df is not None:
        f24 = commit_findings_df.where(F.col("rule").startswith("F"))
    else:
        com = commits_df if commits_df is not None else commit_pass.read_commits(spark, config, cluster, window, state)
        f24 = commit_pass.commit_findings(com, lin, None, tolerance_ms=tol, fencing=True, resets=False,
                                          topic_created=topic_created)
    return l1.unionByName(l2).unionByName(l5_d12).unionByName(l3).unionByName(f24)


def fencing_frame(findings: DataFrame, date_range: tuple[dt.date, dt.date], cluster: str, run_id: str) -> DataFrame:
    """The ``fencing_violations`` gold rows (events in the range, one row per finding; duplicates are
    removed before the range filter, so an L3 batch first seen in a snapshot before the range is not
    reported again from a later one)."""
    from .kraft import gold_extras

    return fr.to_gold(fr.in_range(fr.dedupe(findings), date_range), "fencing_violations", cluster, run_id,
                      gold_extras(findings))
