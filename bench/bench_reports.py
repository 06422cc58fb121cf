"""Benchmark of the report jobs: synthetic silver tables generated in Spark, then ``run_reports``.

    python bench/bench_reports.py                       # 2 M commits, 200 k metadata observations
    python bench/bench_reports.py --commits 500000 --observations 50000 --master local[2]
    python bench/bench_reports.py --commits 10000000 --each   # one run_reports call per report (CPU per report)

The silver rows are generated with ``spark.range`` and column expressions (nothing is built on the
driver) over two days, so the report run over the second day also reads a day of lookback state:

- ``offset_commits``: 20 topics x 32 partitions x 2 groups = 1280 sequences; offsets advance by 100 per
  commit, epochs 1..4 across the two days, a rewind of 5000 every 500 commits of a sequence;
- ``epoch_lineage``: 3 replicas of every partition every 4 hours, lineages that match the commits' epochs;
- ``group_metadata``: 4 records per group; ``record_batches``: 40 batches per replica snapshot of 64
  partitions; ``metadata_observations``: 50 clients, epochs rising with time, every 1000th one stale.

Prints the generation time, the report wall time per table and records/s (silver rows read / report time),
and the CPU time of the whole process tree (JVM + Python workers + driver; the machine may be shared, so
CPU is the steadier figure) with the JVM / Python split. ``--each`` runs one ``run_reports`` call per
report so each gets its own CPU figure (``spurious_offset_resets`` then recomputes the M1/M2 findings it
correlates with).
Generated tables go under ``--out`` (a temporary folder by default) and are removed afterwards.
"""

from __future__ import annotations

import argparse
import datetime as dt
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import _TICK, _children, _cpu_s  # noqa: E402  (the /proc helpers, shared with bench_e2e)

DAY = dt.date(2024, 3, 5)
PREV = DAY - dt.timedelta(days=1)
T0 = int(dt.datetime(PREV.year, PREV.month, PREV.day, tzinfo=dt.timezone.utc).timestamp() * 1000)
SPAN = 2 * 86_400_000
TOPICS, PARTS, GROUPS_PER_TOPIC, BROKERS = 20, 32, 2, 3
SEQS = TOPICS * PARTS * GROUPS_PER_TOPIC
EPOCHS = 4


def cpu_now() -> tuple[float, float]:
    """(CPU seconds of this process tree, of which the JVM's own threads)."""
    todo, total, jvm = [os.getpid()], 0.0, 0.0
    while todo:
        p = todo.pop()
        c = _cpu_s(p)
        total += c
        try:
            with open(f"/proc/{p}/comm") as fh:
                if fh.read().strip() == "java":
                    with open(f"/proc/{p}/stat") as fh2:
                        f = fh2.read().rsplit(")", 1)[1].split()
                    jvm += (int(f[11]) + int(f[12])) / _TICK
        except OSError:
            pass
        todo.extend(_children(p))
    return total, jvm


def _frames(spark, commits: int, observations: int):
    from pyspark.sql import functions as F

    from jobs import schemas

    per_seq = -(-commits // SEQS)  # commits per sequence

    def conform(df, table):
        schema = schemas.spark_schema(table)
        cols = [
            (df[f.name] if f.name in df.columns else F.lit(None)).cast(f.dataType).alias(f.name)
            for f in schema.fields
        ]
        return df.select(*cols)

    def date_of(ms_col):
        return F.date_from_unix_date(F.floor(ms_col / F.lit(86_400_000)).cast("int"))

    def epoch_at_j(j):  # epoch in force for commit index j of a sequence
        return (F.lit(1) + F.floor(j * F.lit(EPOCHS) / F.lit(per_seq))).cast("int")

    # ---- offset_commits
    i = F.col("id")
    s, j = i % SEQS, F.floor(i / SEQS)
    t, g, p = F.floor(s / (PARTS * GROUPS_PER_TOPIC)), F.floor(s / PARTS) % GROUPS_PER_TOPIC, s % PARTS
    ts = F.lit(T0) + F.floor(j * F.lit(SPAN) / F.lit(per_seq)) + s
    offset = j * 100 - F.when(j % 500 == 250, F.lit(5000)).otherwise(F.lit(0))
    commits_df = spark.range(commits).select(
        F.concat(F.lit("g-"), t, F.lit("-"), g).alias("group_id"),
        F.concat(F.lit("bench-"), t).alias("topic"),
        p.alias("partition"),
        offset.alias("committed_offset"),
        epoch_at_j(j).alias("leader_epoch"),
        F.timestamp_millis(ts).alias("commit_ts"),
        F.timestamp_millis(ts).alias("event_ts"),
        F.lit(False).alias("is_tombstone"),
        F.lit(1).alias("key_type"),
        F.lit(3).alias("value_version"),
        (F.abs(F.hash(F.concat(F.lit("g-"), t, F.lit("-"), g))) % 50).alias("log_partition"),
        i.alias("log_offset"),
        F.timestamp_millis(ts).alias("record_ts"),
        F.lit("none").alias("txn_state"),
        F.lit(-1).alias("producer_id"),
        F.lit("offsets").alias("source_kind"),
        F.lit("/bench/offsets/00000000000000000000.log").alias("source"),
        (i * 120).alias("position"),
        date_of(ts).alias("event_date"),
    )

    # ---- epoch_lineage: BROKERS replicas x (every 4 h over 2 days) x partitions
    rounds = SPAN // (4 * 3_600_000)
    k = F.col("id")
    part_idx, rnd, broker = F.floor(k / (rounds * BROKERS)), F.floor(k / BROKERS) % rounds, k % BROKERS + 1
    snap_ms = F.lit(T0) + (rnd + 1) * F.lit(4 * 3_600_000) - F.lit(1000) + broker
    j_at = F.floor((snap_ms - F.lit(T0)) * F.lit(per_seq) / F.lit(SPAN))
    cur_epoch = F.least(epoch_at_j(j_at), F.lit(EPOCHS))
    entries = F.transform(
        F.sequence(F.lit(1), cur_epoch),
        lambda e: F.struct(
            e.cast("int").alias("epoch"),
            (F.ceil((e - 1) * F.lit(per_seq) / F.lit(EPOCHS)) * 100).cast("long").alias("start_offset"),
        ),
    )
    n_snap = TOPICS * PARTS * rounds * BROKERS
    src = F.concat(F.lit("/bench/logdirs/broker="), broker, F.lit("/snapshot="), rnd, F.lit("/bench-"),
                   F.floor(part_idx / PARTS), F.lit("-"), part_idx % PARTS, F.lit("/leader-epoch-checkpoint"))  # fmt: skip
    lineage_df = spark.range(n_snap).select(
        broker.alias("broker"),
        F.timestamp_millis(snap_ms).alias("snapshot_ts"),
        F.concat(F.lit("bench-"), F.floor(part_idx / PARTS)).alias("topic"),
        (part_idx % PARTS).alias("partition"),
        F.concat(F.lit("ID"), F.floor(part_idx / PARTS)).alias("topic_id"),
        entries.alias("entries"),
        F.lit(0).alias("checkpoint_version"),
        F.lit(0).alias("log_start_offset"),
        (j_at * 100 + 100).alias("high_watermark"),
        (j_at * 100 + 100).alias("log_end_offset"),
        src.alias("source"),
        F.timestamp_millis(snap_ms).alias("event_ts"),
        date_of(snap_ms).alias("event_date"),
    )

    # ---- group_metadata: 4 records per group (stable membership)
    n_groups = TOPICS * GROUPS_PER_TOPIC
    q = F.col("id")
    gid = F.concat(F.lit("g-"), F.floor(q / (4 * GROUPS_PER_TOPIC)), F.lit("-"), F.floor(q / 4) % GROUPS_PER_TOPIC)
    g_ms = F.lit(T0) + (q % 4) * F.lit(SPAN // 4) + 500
    member = F.struct(
        F.concat(gid, F.lit("-m1")).alias("member_id"),
        F.lit(None).cast("string").alias("group_instance_id"),
        F.concat(F.lit("client-"), gid).alias("client_id"),
        F.lit("/10.0.0.1").alias("client_host"),
        F.array().cast("array<struct<topic:string,partitions:array<int>>>").alias("assigned_partitions"),
    )
    groups_df = spark.range(n_groups * 4).select(
        gid.alias("group_id"),
        F.lit("group_metadata").alias("record_type"),
        F.lit(3).alias("value_version"),
        F.lit(False).alias("is_tombstone"),
        F.lit("consumer").alias("protocol_type"),
        (q % 4 + 1).alias("generation"),
        F.timestamp_millis(g_ms).alias("state_ts"),
        F.lit(1).alias("member_count"),
        F.array(member).alias("members"),
        F.timestamp_millis(g_ms).alias("event_ts"),
        F.lit(0).alias("log_partition"),
        q.alias("log_offset"),
        date_of(g_ms).alias("event_date"),
    )

    # ---- record_batches: 40 batches per replica snapshot of the first 64 partitions
    n_b = 64 * rounds * BROKERS * 40
    b = F.col("id")
    bpart, brnd, bbroker, bk = (
        F.floor(b / (rounds * BROKERS * 40)),
        F.floor(b / (BROKERS * 40)) % rounds,
        F.floor(b / 40) % BROKERS + 1,
        b % 40,
    )
    bsnap = F.lit(T0) + (brnd + 1) * F.lit(4 * 3_600_000) - F.lit(1000) + bbroker
    bj = F.floor((bsnap - F.lit(T0)) * F.lit(per_seq) / F.lit(SPAN)) - 40 + bk
    base = F.greatest(bj, F.lit(0)) * 100
    bmax = F.lit(T0) + F.floor(F.greatest(bj, F.lit(0)) * F.lit(SPAN) / F.lit(per_seq))
    batches_df = spark.range(n_b).select(
        bbroker.alias("broker"),
        F.timestamp_millis(bsnap).alias("snapshot_ts"),
        F.concat(F.lit("bench-"), F.floor(bpart / PARTS)).alias("topic"),
        (bpart % PARTS).alias("partition"),
        F.concat(F.lit("/bench/logdirs/broker="), bbroker, F.lit("/snapshot="), brnd, F.lit("/seg.log")).alias("source"),
        (bk * 1000).alias("position"),
        base.alias("base_offset"),
        (base + 99).alias("last_offset"),
        epoch_at_j(F.greatest(bj, F.lit(0))).alias("partition_leader_epoch"),
        F.lit(2).alias("magic"),
        F.lit("none").alias("compression"),
        F.lit(False).alias("is_transactional"),
        F.lit(False).alias("is_control"),
        F.lit(-1).alias("producer_id"),
        F.lit(100).alias("records_count"),
        F.timestamp_millis(bmax).alias("max_timestamp"),
        F.lit(5000).alias("size"),
        F.timestamp_millis(bmax).alias("event_ts"),
        date_of(bmax).alias("event_date"),
    )

    # ---- metadata_observations
    o = F.col("id")
    client, opart = o % 50, F.floor(o / 50) % (TOPICS * PARTS)
    o_ms = F.lit(T0) + F.floor(o * F.lit(SPAN) / F.lit(observations))
    o_epoch = (F.lit(1) + F.floor((o_ms - F.lit(T0)) * F.lit(EPOCHS) / F.lit(SPAN))).cast("int")
    o_epoch = F.when((o % 1000 == 999) & (o_epoch > 1), o_epoch - 1).otherwise(o_epoch)
    obs_df = spark.range(observations).select(
        F.timestamp_millis(o_ms).alias("capture_ts"),
        F.concat(F.lit("client-"), client).alias("client_id"),
        F.concat(F.lit("b"), o % BROKERS + 1, F.lit(":9092")).alias("broker"),
        F.lit(12).alias("api_version"),
        o.alias("correlation_id"),
        F.concat(F.lit("bench-"), F.floor(opart / PARTS)).alias("topic"),
        F.concat(F.lit("ID"), F.floor(opart / PARTS)).alias("topic_id"),
        (opart % PARTS).alias("partition"),
        F.lit(1).alias("leader_id"),
        o_epoch.alias("leader_epoch"),
        F.array(F.lit(1), F.lit(2), F.lit(3)).alias("replicas"),
        F.array(F.lit(1), F.lit(2), F.lit(3)).alias("isr"),
        F.lit(0).alias("topic_error"),
        F.lit(0).alias("partition_error"),
        F.concat(F.lit("/bench/metadata/client-"), client, F.lit(".jsonl")).alias("source"),
        o.alias("position"),
        F.timestamp_millis(o_ms).alias("event_ts"),
        date_of(o_ms).alias("event_date"),
    )
    return {
        "offset_commits": conform(commits_df, "offset_commits"),
        "epoch_lineage": conform(lineage_df, "epoch_lineage"),
        "group_metadata": conform(groups_df, "group_metadata"),
        "record_batches": conform(batches_df, "record_batches"),
        "metadata_observations": conform(obs_df, "metadata_observations"),
    }


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--commits", type=int, default=2_000_000)
    ap.add_argument("--observations", type=int, default=200_000)
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--out", default=None, help="output root (default: a temporary folder, removed)")
    ap.add_argument("--reuse", action="store_true", help="with --out: keep silver tables already there")
    ap.add_argument("--each", action="store_true", help="one run_reports call per report (CPU per report)")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    args = ap.parse_args(argv)

    from pyspark.sql import functions as F

    from jobs.config import parse_config
    from jobs.reports import run_reports
    from jobs.session import get_or_create_session
    from jobs.sink import read_table, write_table

    conf = {"spark.sql.shuffle.partitions": "8", "spark.ui.enabled": "false", "spark.driver.memory": "3g"}
    conf.update(kv.split("=", 1) for kv in args.conf)
    spark = get_or_create_session(master=args.master, app_name="bench-reports", extra_conf=conf)
    out = Path(args.out or tempfile.mkdtemp(prefix="bench-reports-"))
    config = parse_config({"cluster": "bench", "output": {"root": str(out)}, "rules": {"lookback_days": 1}})
    try:
        t0 = time.perf_counter()
        rows = {}
        for table, df in _frames(spark, args.commits, args.observations).items():
            if args.reuse and (out / table / "_delta_log").is_dir():
                rows[table] = read_table(spark, table, config, cluster="bench", date_range=(PREV, DAY)).count()
                continue
            df = df.withColumn("cluster", F.lit("bench"))
            res = write_table(df, table, config=config, date_range=(PREV, DAY))
            rows[table] = res.rows_written if res.rows_written is not None else df.count()
        gen = time.perf_counter() - t0
        print(f"{'read' if args.reuse else 'generated'} silver in {gen:.1f}s: "
              + ", ".join(f"{t} {n:,}" for t, n in rows.items()))  # fmt: skip

        read = sum(rows.values())
        commits = rows["offset_commits"]
        runs = [[r] for r in ("stale_metadata", "fencing_violations", "spurious_offset_resets")] if args.each else [None]
        wall = cpu = jvm = 0.0
        for wanted in runs:
            c0, j0, s0 = *cpu_now(), time.process_time()
            t1 = time.perf_counter()
            rep = run_reports(spark, config, DAY, DAY, reports=wanted)
            w = time.perf_counter() - t1
            c1, j1 = cpu_now()
            c, j = c1 - c0, j1 - j0
            wall, cpu, jvm = wall + w, cpu + c, jvm + j
            py = c - j - (time.process_time() - s0)
            label = wanted[0] if wanted else "all reports"
            print(f"{label} over {DAY} (lookback 1 day, {args.master}): {w:.1f}s wall, CPU {c:.1f}s "
                  f"(JVM {j:.1f}s, Python workers {py:.1f}s)")  # fmt: skip
            if "commit_pass" in rep.seconds:
                s_c = rep.seconds["commit_pass"]
                print(f"  {'(commit pass F2/F4+S1/S2)':<35} {s_c:6.1f}s   {commits / s_c:>9,.0f} commits/s")
            for table, n in rep.counts.items():
                print(f"  {table:<24} {n:>10,} rows   {rep.seconds.get(table, 0):6.1f}s")
        print(f"total: {wall:.1f}s wall, CPU {cpu:.1f}s (JVM {jvm:.1f}s); silver rows read: {read:,} "
              f"({commits:,} commits, {rows['metadata_observations']:,} observations) -> {read / wall:,.0f} "
              f"records/s; commits alone {commits / wall:,.0f}/s wall, {commits / cpu:,.0f}/CPU-s")  # fmt: skip
    finally:
        spark.stop()
        if args.out is None:
            shutil.rmtree(out, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
