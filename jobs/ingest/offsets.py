"""``__consumer_offsets`` evidence -> ``offset_commits`` and ``group_metadata`` (the Spark side).

Inputs (DESIGN.md), each decoded in executors by its own module, twice (:mod:`._kv`: a commit pass and a
side pass):

- raw segments: cut into byte ranges on batch boundaries by :mod:`.ranges`, decoded by
  :mod:`.offsets_segments`;
- Parquet/JSONL dumps with binary key/value (the schema of Spark's Kafka source): :mod:`.kvdumps`;
- tool text dumps (console consumer, kafka-dump-log): :mod:`.textdumps`.

The row shapes they share are in :mod:`._rows`. Here: :func:`offsets_frames` builds the two pass
DataFrames, and :func:`commits_frame` / :func:`groups_frame` shape the silver tables; transactional
commits get their ``txn_state`` from the next COMMIT/ABORT marker of the same producer in the same log
partition (a window, not a driver loop).

Units: segment batches (``batch``; a bad CRC is one quarantined batch; a final batch the file ends inside, as
in a copy of the active segment, is no unit but counted in ``n_unpaired``), records inside good batches whose
key/value cannot be decoded (``record``), Parquet rows (``record``), JSONL and text lines (``line``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ._rows import COMMITS, FILE_SCHEMA, OFFSETS_WORK

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

__all__ = ["commits_frame", "groups_frame", "has_transactional_commits", "input_frames", "offsets_frames",
           "transactional_commits"]


def input_frames(spark: SparkSession, files: list, *, split_bytes: int,
                 parallelism: int) -> list[tuple[DataFrame, Callable, Callable, Callable]]:
    """Every ``offsets`` input file as Spark rows to decode, by form: ``(frame, commit pass, side pass, both)``
    -- segment byte ranges, dump files, text dump line ranges -- with the ``mapInArrow`` functions of the
    commit pass, the side pass and the one pass (:data:`._kv.ONE_PASS`, for :mod:`.commit_files`)."""
    from . import kvdumps, offsets_segments, textdumps
    from ._spark import files_frame
    from .discover import JSONL, PARQUET, SEGMENT, TEXT
    from .lines import line_ranges_frame
    from .ranges import ranges_frame

    out = []
    segs = [f for f in files if f.form == SEGMENT]
    if segs:
        out.append((ranges_frame(spark, segs, split_bytes=split_bytes, parallelism=parallelism),
                    offsets_segments.decode_segment_commits, offsets_segments.decode_segment_side,
                    offsets_segments.decode_segment_both))
    for forms, commit_fn, side_fn, both_fn in (
        ((PARQUET, JSONL), kvdumps.decode_dump_commits, kvdumps.decode_dump_side, kvdumps.decode_dump_both),
        ((TEXT,), textdumps.decode_text_commits, textdumps.decode_text_side, textdumps.decode_text_both),
    ):
        chosen = [f for f in files if f.form in forms]
        if chosen:
            if forms == (TEXT,):  # text dumps in line ranges: a large dump spreads over executors
                frame = line_ranges_frame(spark, chosen, split_bytes=split_bytes, parallelism=parallelism)
            else:
                frame = files_frame(spark, chosen, FILE_SCHEMA, parallelism)
            out.append((frame, commit_fn, side_fn, both_fn))
    return out


def offsets_frames(spark: SparkSession, files: list, *, split_bytes: int,
                   parallelism: int) -> tuple[DataFrame, DataFrame] | None:
    """The two decode passes over every ``offsets`` input file: ``(commits, side)``; None when no files.

    ``commits`` (:data:`~._rows.COMMITS`) holds the non-transactional commits, already in the
    ``offset_commits`` shape, so writing them is one streaming pass with no cache and no shuffle. ``side``
    (:data:`~._rows.OFFSETS_WORK`) holds the rest: transactional commits and COMMIT/ABORT markers (for
    :func:`commits_frame`), group records, quarantine and stats rows -- usually tiny, so it is the one
    worth persisting. Each pass decodes the inputs (the codec is cheaper than caching the wide decoded
    rows). Used where Spark writes the commits (delta-spark); with delta-rs one pass does both
    (:mod:`.commit_files`).
    """
    from jobs.frames import union_all

    from ._spark import to_spark_schema

    commits_schema, side_schema = to_spark_schema(COMMITS), to_spark_schema(OFFSETS_WORK)
    frames = input_frames(spark, files, split_bytes=split_bytes, parallelism=parallelism)
    if not frames:
        return None
    return (union_all([f.mapInArrow(c, commits_schema) for f, c, _, _ in frames]),
            union_all([f.mapInArrow(s, side_schema) for f, _, s, _ in frames]))


def has_transactional_commits(side: DataFrame) -> bool:
    """Whether the side rows hold any transactional commit (only then does :func:`commits_frame` need
    its window); a cheap question when ``side`` is persisted."""
    from pyspark.sql import functions as F

    return not side.filter(F.col("row_kind") == "commit").isEmpty()


def commits_frame(commits: DataFrame, side: DataFrame, *, transactional: bool = True) -> DataFrame:
    """``offset_commits`` columns (minus cluster/event_date): the commit pass's rows plus the transactional
    commits of the side rows with their ``txn_state`` (:func:`transactional_commits`), only when
    ``transactional`` says there are any (:func:`has_transactional_commits`)."""
    if not transactional:
        return commits
    return commits.unionByName(transactional_commits(side))


def transactional_commits(side: DataFrame) -> DataFrame:
    """The side rows' transactional commits in ``offset_commits`` columns (minus cluster/event_date).

    A transactional commit takes the state of the first COMMIT/ABORT marker after it of the same
    producer in the same ``__consumer_offsets`` partition (and replica); none yet -> ``open``. Only
    the side rows (transactional commits and markers) go through that window's shuffle.
    """
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    tx = side.filter(F.col("row_kind").isin("commit", "marker")
                     & F.coalesce(F.col("is_transactional"), F.lit(False)))
    # The nearest later marker, as a running frame over the rows in *descending* offset order: Spark
    # evaluates (unbounded preceding .. 1 preceding) incrementally, while the equivalent ascending frame
    # (1 following .. unbounded following) is recomputed per row - O(n^2): 40 k transactional rows of one
    # producer took 90 s, which stalled a 10 M-commit run for 25 minutes.
    w = (Window.partitionBy("broker", "log_partition", "producer_id")
         .orderBy(F.col("log_offset").desc()).rowsBetween(Window.unboundedPreceding, -1))
    marker = F.last(F.when(F.col("row_kind") == "marker", F.col("control_type")), ignorenulls=True).over(w)
    tx = (tx.withColumn("_marker", marker)
          .filter(F.col("row_kind") == "commit")
          .withColumn("txn_state", F.when(F.col("_marker") == "COMMIT", "committed")
                      .when(F.col("_marker") == "ABORT", "aborted").otherwise("open"))
          .drop("_marker"))
    event_ms = F.when(F.col("is_tombstone") | F.col("commit_ms").isNull() | (F.col("commit_ms") < 0),
                      F.col("record_ms")).otherwise(F.col("commit_ms"))
    return tx.select(
        "group_id", "topic", "partition", "committed_offset", "leader_epoch", "metadata",
        _ts("commit_ms").alias("commit_ts"),
        F.when(F.col("expire_ms") >= 0, _ts("expire_ms")).alias("expire_ts"),
        "is_tombstone", "key_type", "value_version",
        _ts_col(event_ms).alias("event_ts"),
        "log_partition", "log_offset",
        F.when(F.col("record_ms") >= 0, _ts("record_ms")).alias("record_ts"),
        "batch_leader_epoch", "producer_id", "txn_state",
        F.lit("offsets").alias("source_kind"), "source", "position",
        "value_version_above_known", "trailing_bytes",
    )


def groups_frame(work: DataFrame) -> DataFrame:
    """``group_metadata`` columns (minus cluster/event_date) from the work rows."""
    from pyspark.sql import functions as F

    g = work.filter(F.col("row_kind") == "group")
    event_ms = F.coalesce(F.when(F.col("state_ms") >= 0, F.col("state_ms")),
                          F.when(F.col("record_ms") >= 0, F.col("record_ms")))
    return g.select(
        "group_id", "record_type", "value_version", "is_tombstone", "protocol_type", "generation", "protocol",
        "leader", _ts("state_ms").alias("state_ts"), "member_count", "members",
        _ts_col(event_ms).alias("event_ts"), "log_partition", "log_offset",
        F.lit("offsets").alias("source_kind"), "source", "position",
        "value_version_above_known", "trailing_bytes",
    )


def _ts(name: str):
    from pyspark.sql import functions as F

    return _ts_col(F.col(name))


def _ts_col(col):
    from pyspark.sql import functions as F

    return F.timestamp_millis(col)
