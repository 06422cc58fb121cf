"""The ``stale_metadata`` report (M1, M2, M3) and its ``stale_metadata_rates`` companion.

A run whose observations fit one Python task finds M1/M2/M3 (and the log's M5 and M2) there
(:mod:`.metadata_pass`: the same groups, pre-filters and rule calls as below, columnar); a larger run takes the
Spark stages below.

How it runs (no driver loops; every rule call is a grouped Arrow function on the executors):

- ``metadata_observations`` of ``[from - lookback, to]``, timestamps as epoch ms, the all-zero topic id
  read as "no id" (as :class:`~epochlib.rules.MetadataObservation` does);
- **M1 + M3** (:func:`~epochlib.rules.check_client_metadata`): ``groupBy(client_id, client_host, topic_key)
  .applyInArrow``. ``topic_key`` is the topic name; a response that carries only a topic id gets the name
  other responses gave for that id (a broadcast join on the distinct id -> name pairs), else the id, so
  M1's per-(client, topic id, partition) baseline and M3's per-(client, name) id history both live in one
  group;
- **M2** (:func:`~epochlib.rules.check_broker_staleness`): ``groupBy(partition_key, partition)
  .applyInArrow`` with ``partition_key`` = ``id:<topic id>`` (v10+), else ``name:<topic>``, across all
  clients and brokers (the rule's own keying). ``stale_grace_ms`` comes from the config. Cluster-metadata
  tokens (``metadata_token``, where captures carry one) are cluster-wide, not per partition: the first
  sighting of each distinct token is aggregated in Spark, reduced on the driver to the rule's
  :func:`~epochlib.rules.metadata.token_frontier` (at most one entry per distinct token) and shipped with
  the grouped function, so each partition's group compares its tokens with the whole cluster's, exactly as
  the rule does over all observations at once. A ``metadata_observations`` table written before the
  column existed reads as all tokens null;
- inside each group the rows are sorted by (capture time, source, position, partition) so ties are
  ordered the same way on every run;
- findings of events inside ``[from, to]`` are written (replace-range); earlier observations only seed
  the baselines;
- **rates**: per UTC capture date, per broker and per client: distinct responses (capture pointer =
  file + line/frame, as :func:`~epochlib.rules.stale_rates`), distinct responses with at least one M2
  finding, and their ratio — a Spark aggregation joined on the M2 findings' first evidence pointer (a
  response stale on several partitions, or by epoch on one and by token on another, counts once).

Brokers (M1/M2 findings' ``broker``, the per-broker rates) are ``metadata_observations.broker``: the
canonical name ingestion resolved (:mod:`epochlib.brokers`, the node id where known), so one broker
captured as a node id, a ``host:port`` and a peer IP is one subject. The report never reads
``broker_address`` (the captured spelling), so a table written before that column reads as before; its rows
keep the spelling they were ingested with until the range is ingested again.
"""

from __future__ import annotations

import datetime as dt
import re
from functools import partial, reduce
from typing import TYPE_CHECKING

import pyarrow as pa

from epochlib.rules import Finding, capture_pointer, check_broker_staleness, check_client_metadata
from epochlib.rules.metadata import TokenSighting, older_ids, token_frontier

from . import _frames as fr

if TYPE_CHECKING:
    from collections.abc import Collection, Mapping

    from pyspark.sql import Column, DataFrame, SparkSession

    from ..config import Config

__all__ = ["OBS_COLUMNS", "client_group_findings", "metadata_findings", "observations", "partition_group_findings",
           "stale_rates_frame", "stale_metadata_frame", "token_frontier_of"]

_ZERO_IDS = ("AAAAAAAAAAAAAAAAAAAAAA", "00000000-0000-0000-0000-000000000000", "")
#: What the stale-metadata rules (and the rates, the lag, P1) read of an observation. Not ``isr``: no rule
#: reads it, and a list column makes every copy of the million rows (the cache, each Arrow round trip) dearer
#: (``replicas`` stays: M3 tells a re-created topic without ids by its new replica set).
OBS_COLUMNS = (
    "capture_ts", "client_id", "broker", "api_version", "correlation_id", "topic", "topic_id", "partition",
    "leader_id", "leader_epoch", "replicas", "topic_error", "partition_error", "metadata_token", "source",
    "position", "event_ts", "client_host",
)  # fmt: skip


def observations(
    spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
    state: fr.InputState | None = None,
) -> DataFrame:
    """Observations of the read window (with the inputs' lookback rows, ``state``) with epoch-ms times and
    ``tid`` (normalised topic id)."""
    from pyspark.sql import functions as F

    df = fr.read_silver(spark, config, "metadata_observations", cluster, window, state)
    if "metadata_token" not in df.columns:  # a table written before the column existed
        df = df.withColumn("metadata_token", F.lit(None).cast("long"))
    if "client_host" not in df.columns:
        df = df.withColumn("client_host", F.lit(None).cast("string"))
    df = fr.ms_columns(df.select(*OBS_COLUMNS), ("capture_ts", "event_ts"))
    tid = topic_id_col()
    return (
        df.where(F.col("partition").isNotNull())
        .withColumn("capture_ts", F.coalesce("capture_ts", "event_ts"))
        .withColumn("tid", tid)
    )


def topic_id_col() -> Column:
    """``topic_id`` with the all-zero Uuid (and "") as null: the id a ``MetadataObservation`` carries."""
    from pyspark.sql import functions as F

    return F.when(F.col("topic_id").isin(*_ZERO_IDS), F.lit(None)).otherwise(F.col("topic_id"))


def _sorted_obs(table: pa.Table):
    obs = fr.observations_from_arrow(table)
    obs.sort(key=lambda o: (o.capture_ts, o.source or "", o.position or 0, o.partition))
    return obs


def client_group_findings(table: pa.Table, older: Collection[tuple[str, str]] | None = None) -> list[Finding]:
    """M1 + M3 over one ``(client_id, client_host, topic_key)`` group of observations (``older``: the topic ids M3
    can order, :func:`~epochlib.rules.metadata.older_ids` over every observation; None: over the group's rows)."""
    return check_client_metadata(_sorted_obs(table), older)


def partition_group_findings(table: pa.Table, grace_ms: int, frontier: list[TokenSighting],
                             single: Mapping[str, tuple[str, int]] | None = None) -> list[Finding]:
    """M2 over one ``(partition_key, partition)`` group of observations. ``single`` is
    :func:`~epochlib.rules.metadata.single_ids` over every observation; None reads it from the group's ``_single``
    and ``_single_first`` columns (the Spark stages join them onto the rows without an id)."""
    if single is None:
        single = {}
        if "_single" in table.column_names:
            for t, tid, first in zip(table.column("topic").to_pylist(), table.column("_single").to_pylist(),
                                     table.column("_single_first").to_pylist(), strict=True):
                if tid is not None:
                    single[t] = (tid, first)
        table = table.drop_columns([c for c in ("_single", "_single_first") if c in table.column_names])
    return check_broker_staleness(_sorted_obs(table), grace_ms=grace_ms, frontier=frontier, single=single)


def older_ids_of(obs: DataFrame) -> set[tuple[str, str]]:
    """:func:`~epochlib.rules.metadata.older_ids` of the observations: only names with two or more ids (a re-created
    topic) can have any, so only their rows are collected (each client's first sighting of each id)."""
    from pyspark.sql import functions as F

    named = obs.where(F.col("tid").isNotNull() & F.col("topic").isNotNull())
    multi = named.groupBy("topic").agg(F.min("tid").alias("_a"), F.max("tid").alias("_b")).where(
        F.col("_a") < F.col("_b")).select("topic")
    firsts = (named.join(F.broadcast(multi), "topic", "left_semi")
              .groupBy("client_id", "client_host", "topic", "tid").agg(F.min("capture_ts").alias("ts")))
    return older_ids(((r["client_id"], r["client_host"]), r["topic"], r["tid"], r["ts"]) for r in firsts.collect())


def token_frontier_of(obs: DataFrame) -> list[TokenSighting]:
    """The cluster-wide :func:`~epochlib.rules.metadata.token_frontier` of the observations: the first
    sighting of each distinct token (in the order :func:`_sorted_obs` gives), collected and reduced on the
    driver. Empty (after one cheap aggregation) when no capture carries a token."""
    from pyspark.sql import functions as F

    order = F.struct(
        F.col("capture_ts").alias("ts"),
        F.coalesce(F.col("source"), F.lit("")).alias("src_key"),
        F.coalesce(F.col("position"), F.lit(0)).alias("pos_key"),
        F.col("partition").alias("partition"),
        F.col("source").alias("src"),
        F.col("position").alias("pos"),
    )
    first = (
        obs.where(F.col("metadata_token").isNotNull())
        .groupBy("metadata_token")
        .agg(F.min(order).alias("f"))
        .select("metadata_token", "f.ts", "f.src", "f.pos")
    )
    return token_frontier((r["ts"], r["metadata_token"], capture_pointer(r["src"], r["pos"])) for r in first.collect())


def metadata_findings(obs: DataFrame, grace_ms: int) -> DataFrame:
    """M1, M2 and M3 findings (FINDINGS schema) over every observation given, in or before the range."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    schema = fr.findings_spark_schema()
    names = (
        obs.where(F.col("tid").isNotNull() & F.col("topic").isNotNull())
        .groupBy(F.col("tid").alias("_tid"))
        .agg(F.min("topic").alias("_name"))
    )
    keyed = obs.join(F.broadcast(names), obs["tid"] == names["_tid"], "left").withColumn(
        "topic_key", F.coalesce(F.col("topic"), F.col("_name"), F.col("tid"))
    )
    cols = [*OBS_COLUMNS]
    # Only groups that can hold a finding go to the Python rules (on a healthy day, few). Every M1 regression
    # and M3 re-creation is an epoch (>= 0) below one the client saw for the partition strictly earlier;
    # every M3 id regression needs two ids of one name; every M2 finding an epoch below one seen for the
    # partition (by anyone) before t - grace, or a token. Each test is a superset of the rule's own
    # (coarser keys, no baseline resets), and whole groups are kept or dropped, so each rule sees exactly the
    # rows it saw before. The tests run over the few columns they read (the windows shuffle and sort those,
    # not whole observations); the keys of the groups kept, few, then pick the rows by a broadcast semi-join.
    ep = F.when(F.col("leader_epoch") >= 0, F.col("leader_epoch"))
    earlier = (Window.partitionBy("client_id", "client_host", "topic_key", "partition").orderBy("capture_ts")
               .rangeBetween(Window.unboundedPreceding, -1))
    below = F.coalesce((ep < F.max(ep).over(earlier)).cast("int"), F.lit(0))
    kept13 = (
        keyed.select("client_id", "client_host", "topic_key", "partition", "capture_ts", "leader_epoch", "tid")
        .withColumn("_below", below)
        .groupBy("client_id", "client_host", "topic_key")
        .agg(((F.max("_below") == 1) | (F.min("tid") < F.max("tid"))).alias("_keep"))
        .where(F.col("_keep"))
        .drop("_keep")
    )
    m13 = (
        _semi(keyed.select(*cols, "topic_key"), kept13, ("client_id", "client_host", "topic_key"))
        .groupBy("client_id", "client_host", "topic_key")
        .applyInArrow(fr.arrow_group_fn(partial(client_group_findings, older=older_ids_of(obs))), schema)
    )
    # a row without an id (below v10) captured from the first sighting of its name's one id on is keyed by that
    # id, as check_broker_staleness keys it
    single = (obs.where(F.col("tid").isNotNull() & F.col("topic").isNotNull()).groupBy(F.col("topic").alias("_t"))
              .agg(F.min("tid").alias("_single"), F.max("tid").alias("_other"),
                   F.min("capture_ts").alias("_single_first"))
              .where(F.col("_single") == F.col("_other")).select("_t", "_single", "_single_first"))
    obs = obs.join(F.broadcast(single), (obs["topic"] == single["_t"]) & obs["tid"].isNull()
                   & (obs["capture_ts"] >= single["_single_first"]), "left")
    pkey = F.coalesce(F.concat(F.lit("id:"), F.coalesce(F.col("tid"), F.col("_single"))),
                      F.concat(F.lit("name:"), F.col("topic")))
    frontier = token_frontier_of(obs)
    per_key = Window.partitionBy("partition_key", "partition")
    # epochs first seen before t - grace: rows at or before t - grace - 1 ms (a negative grace looks ahead:
    # then every row of the partition counts)
    before = (per_key.orderBy("capture_ts").rangeBetween(Window.unboundedPreceding, -(grace_ms + 1)) if grace_ms >= 0
              else per_key)
    stale = F.coalesce((ep < F.max(ep).over(before)).cast("int"), F.lit(0))
    can_be_stale = F.max("_stale") == 1
    if frontier:  # a token can be stale on its own
        can_be_stale = can_be_stale | (F.max(F.col("metadata_token").isNotNull().cast("int")) == 1)
    keyed2 = obs.select(*cols, "_single", "_single_first", pkey.alias("partition_key"))
    kept2 = (
        keyed2.select("partition_key", "partition", "capture_ts", "leader_epoch", "metadata_token")
        .withColumn("_stale", stale)
        .groupBy("partition_key", "partition")
        .agg(can_be_stale.alias("_keep"))
        .where(F.col("_keep"))
        .drop("_keep")
    )
    m2 = (
        _semi(keyed2, kept2, ("partition_key", "partition"))
        .groupBy("partition_key", "partition")
        .applyInArrow(fr.arrow_group_fn(partial(partition_group_findings, grace_ms=grace_ms, frontier=frontier)), schema)
    )
    return m13.unionByName(m2)


def _semi(rows: DataFrame, keys: DataFrame, on: tuple[str, ...]) -> DataFrame:
    """``rows`` whose ``on`` columns equal (null-safe: a null client id or topic is a group too) a row of
    ``keys``, the few keys of the kept groups (broadcast)."""
    from pyspark.sql import functions as F

    k = keys.select(*(F.col(c).alias(f"_k_{c}") for c in on))
    cond = reduce(lambda a, b: a & b, (rows[c].eqNullSafe(k[f"_k_{c}"]) for c in on))
    return rows.join(F.broadcast(k), cond, "left_semi")


def stale_metadata_frame(findings: DataFrame, date_range: tuple[dt.date, dt.date], cluster: str, run_id: str) -> DataFrame:
    """The ``stale_metadata`` gold rows: M1/M2/M3 findings of events in the range."""
    return fr.to_gold(fr.dedupe(fr.in_range(findings, date_range)), "stale_metadata", cluster, run_id)


def capture_pointer_col() -> Column:
    """Spark form of :func:`epochlib.rules.capture_pointer` (how M2 evidence names a response)."""
    from pyspark.sql import functions as F

    from epochlib.rules import TEXT_SUFFIXES

    src = F.when(F.col("source").isNull() | (F.col("source") == ""), F.lit("?")).otherwise(F.col("source"))  # `source or "?"`
    # `src.lower().endswith(suffixes)` as a case-blind regex, not lower(): Spark's lower() starts ICU's case
    # mapping, ~0.5 s of a planning thread once per JVM (BENCHMARKS.md, eleventh round). ASCII case-blindness is
    # the same test here: no other character lower-cases into these suffixes' letters. \z is the very end
    # (Java's $ also matches before a final line break).
    alts = "|".join(re.escape(s[1:]) for s in TEXT_SUFFIXES)
    text = src.rlike(rf"(?i)\.(?:{alts})\z")
    unit = F.when(text, F.lit("line")).otherwise(F.lit("frame"))
    pos = F.coalesce(F.col("position").cast("string"), F.lit("?"))
    return F.concat(F.lit("capture:"), src, F.lit(" "), unit, F.lit(" "), pos)


def stale_rates_frame(
    obs: DataFrame, findings: DataFrame, date_range: tuple[dt.date, dt.date], cluster: str
) -> DataFrame:
    """``stale_metadata_rates`` rows for the capture dates in the range (per broker, per client)."""
    from pyspark.sql import functions as F

    date = fr.date_of_ms(F.col("capture_ts"))
    resp = (
        obs.select(date.alias("event_date"), "broker", "client_id", capture_pointer_col().alias("ptr"))
        .where(F.col("event_date").between(F.lit(date_range[0]), F.lit(date_range[1])))
        .distinct()
    )
    stale = (
        findings.where(F.col("rule") == "M2")
        .select(F.col("evidence").getItem(0).alias("ptr"))
        .where(F.col("ptr").isNotNull())
        .distinct()
        .withColumn("is_stale", F.lit(True))
    )
    flagged = resp.join(stale, "ptr", "left")
    # one aggregation for both dimensions: each response once as its broker's and once as its client's
    subjects = F.array(
        F.struct(F.lit("broker").alias("dimension"), F.col("broker").alias("subject")),
        F.struct(F.lit("client").alias("dimension"), F.col("client_id").alias("subject")),
    )
    rates = (
        flagged.select("event_date", "ptr", "is_stale", F.explode(subjects).alias("_d"))
        .select("event_date", "ptr", "is_stale", "_d.dimension", "_d.subject")
        .groupBy("event_date", "dimension", "subject")
        .agg(
            F.countDistinct("ptr").alias("responses"),
            F.countDistinct(F.when(F.col("is_stale"), F.col("ptr"))).alias("stale_responses"),
        )
    )
    return rates.select(
        F.lit(cluster).alias("cluster"),
        "event_date",
        "dimension",
        "subject",
        F.col("responses").cast("long").alias("responses"),
        F.col("stale_responses").cast("long").alias("stale_responses"),
        (F.col("stale_responses") / F.col("responses")).cast("double").alias("stale_rate"),
    )
