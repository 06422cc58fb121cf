"""Small files (issue 16 item 3): ingest a log-dir snapshot set of ``--files`` checkpoint files on ``local[2]``.

The set is written once under ``--cache`` (default ``/tmp/epoch-audit-bench-logdirs/f<N>``, reused): ``--brokers``
brokers x ``--snapshots`` snapshots, each with partition directories holding a ``leader-epoch-checkpoint`` and a
``partition.metadata`` (half of the files each), plus the three root checkpoints of every snapshot listing all
its partitions. :func:`jobs.ingest.run_ingestion` then runs over it (logdirs input only) into a fresh output
folder, and the script prints:

- the driver's listing and classification alone (``discover``), then the whole ``run_ingestion`` wall time
  (the listing included: the target is <= 30 s for 100,000 files) and the CPU of the process tree;
- with ``--stages``: per Spark stage wall, tasks and executor CPU from the event log.

    python bench/bench_logdirs.py                       # 100,000 files
    python bench/bench_logdirs.py --files 20000 --stages
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import event_log_conf, java_pid, stage_report, tree_cpu_s  # noqa: E402

from epochlib import checkpoint  # noqa: E402

TARGET_S = 30.0
TOPICS = 50
SNAP0 = "20240301T%02d0000Z"


def cached_set(cache: Path, files: int, brokers: int, snapshots: int) -> tuple[Path, int]:
    """The snapshot set (written once into ``<dir>.tmp``, then renamed); returns it and its partition dirs."""
    per_snap = max(1, -(-(files - 3 * brokers * snapshots) // (2 * brokers * snapshots)))
    parts_per_topic = -(-per_snap // TOPICS)  # rounded up: at least ``files`` files
    d = cache / f"b{brokers}-s{snapshots}-t{TOPICS}x{parts_per_topic}"
    n_dirs = brokers * snapshots * TOPICS * parts_per_topic
    if d.is_dir():
        return d, n_dirs
    tmp = d.with_name(d.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    t = time.perf_counter()
    pm = {tp: checkpoint.format_partition_metadata(bytes([tp % 251 + 1]) * 16) for tp in range(TOPICS)}
    for b in range(brokers):
        for s in range(snapshots):
            root = tmp / f"broker={b}" / f"snapshot={SNAP0 % s}"
            root.mkdir(parents=True)
            entries = {}
            for tp in range(TOPICS):
                for p in range(parts_per_topic):
                    pd = root / f"bench.topic.{tp}-{p}"
                    pd.mkdir()
                    (pd / "leader-epoch-checkpoint").write_text(
                        checkpoint.format_leader_epoch_checkpoint([(e, e * 1000 + p) for e in range(p % 4 + 1)]))
                    (pd / "partition.metadata").write_text(pm[tp])
                    entries[(f"bench.topic.{tp}", p)] = 5000 + p
            for name in ("log-start-offset-checkpoint", "replication-offset-checkpoint",
                         "recovery-point-offset-checkpoint"):
                (root / name).write_text(checkpoint.format_offset_checkpoint(entries))
    tmp.rename(d)
    print(f"wrote {n_dirs * 2 + 3 * brokers * snapshots:,} files into {d} in {time.perf_counter() - t:.0f} s",
          flush=True)
    return d, n_dirs


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--files", type=int, default=100_000)
    ap.add_argument("--brokers", type=int, default=4)
    ap.add_argument("--snapshots", type=int, default=2)
    ap.add_argument("--cache", default="/tmp/epoch-audit-bench-logdirs")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--repeat", type=int, default=1, help="ingest this many times in one session")
    ap.add_argument("--stages", action="store_true")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json")
    args = ap.parse_args(argv)

    from jobs.config import Config, Inputs, Output
    from jobs.ingest import run_ingestion
    from jobs.ingest.discover import discover
    from jobs.session import get_or_create_session

    logdirs, n_dirs = cached_set(Path(args.cache), args.files, args.brokers, args.snapshots)
    t = time.perf_counter()
    inv = discover(logdirs=str(logdirs))
    listing = time.perf_counter() - t
    n_files = len(inv.of("logdirs"))
    print(f"listing + classification: {n_files:,} files in {listing:.2f} s", flush=True)
    tmp = Path(tempfile.mkdtemp(prefix="bench_logdirs_"))
    runs = []
    try:
        conf = {"spark.ui.enabled": "false"}
        conf.update(kv.split("=", 1) for kv in args.conf)
        if args.stages:
            conf.update(event_log_conf(tmp / "events"))
        spark = get_or_create_session(master=args.master, app_name="bench-logdirs", extra_conf=conf)
        spark.range(1).count()  # session warm: the target is about the ingestion, not the JVM start
        jpid = java_pid()
        for i in range(args.repeat):
            cfg = Config(cluster="bench", inputs=Inputs(logdirs=str(logdirs)), output=Output(root=str(tmp / f"o{i}")))
            cpu0 = (tree_cpu_s(jpid) if jpid else 0.0) + time.process_time()
            t = time.perf_counter()
            res = run_ingestion(spark, cfg, "2024-03-01", "2024-03-01")
            wall = time.perf_counter() - t
            cpu = (tree_cpu_s(jpid) if jpid else 0.0) + time.process_time() - cpu0
            lineage = res.tables["epoch_lineage"].rows_written
            assert lineage == n_dirs, (lineage, n_dirs)
            assert res.units_quarantined == 0
            runs.append({"wall_s": wall, "cpu_s": cpu, "files": n_files, "lineage_rows": lineage})
            print(f"run {i + 1}: {n_files:,} files -> {lineage:,} epoch_lineage rows in {wall:.1f} s wall "
                  f"({n_files / wall:,.0f} files/s; target <= {TARGET_S:.0f} s: "
                  f"{'met' if wall <= TARGET_S else 'NOT met'}), CPU {cpu:.1f} s", flush=True)
            shutil.rmtree(tmp / f"o{i}", ignore_errors=True)
        spark.stop()
        stages = stage_report(tmp / "events") if args.stages else []
        if stages:
            print("\n".join(stages))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    out = {"files": n_files, "listing_s": listing, "runs": runs, "stages": stages, "master": args.master}
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
