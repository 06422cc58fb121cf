"""Benchmark: ingest >= 2 M offset-commit records from segment files on local Spark.

Writes ``--segments`` segment files of ``__consumer_offsets`` (v2 batches of ``--batch`` commits, uncompressed
by default) under a temporary folder, runs :func:`jobs.ingest.run_ingestion` over them with a small
``--split-mb`` so big segments are decoded in parallel ranges, and prints records/s and the driver's peak
RSS (which must not grow with the input: the driver only lists files and collects count aggregates).

    . .venv/bin/activate && python bench/bench_ingest.py --records 2000000 --master 'local[2]'
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from epochlib import coordinator, records  # noqa: E402
from epochlib.records import NewRecord  # noqa: E402

T0 = 1709251200000 + 3_600_000  # 2024-03-01T01:00:00Z


def write_segments(root: Path, n_records: int, n_segments: int, batch: int, compression: str) -> int:
    """Write the segments batch by batch (bounded memory); returns the bytes written."""
    per_seg = -(-n_records // n_segments)
    total = 0
    written = 0
    for s in range(n_segments):
        p = root / "broker=1" / f"__consumer_offsets-{s}" / "00000000000000000000.log"
        p.parent.mkdir(parents=True, exist_ok=True)
        with open(p, "wb") as fh:
            off = 0
            n = min(per_seg, n_records - written)
            while off < n:
                m = min(batch, n - off)
                recs = []
                for j in range(m):
                    i = off + j
                    ts = T0 + i // 100
                    recs.append(NewRecord(
                        coordinator.encode_offset_commit_key(f"group-{i % 500}", "orders", i % 32),
                        coordinator.encode_offset_commit_value(i, leader_epoch=3, commit_timestamp=ts), ts))
                b = records.encode_batch(recs, base_offset=off, partition_leader_epoch=3, compression=compression)
                fh.write(b)
                total += len(b)
                off += m
            written += n
    return total


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--batch", type=int, default=200, help="commits per record batch")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--split-mb", type=int, default=16, help="target byte range per task (MiB)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--keep", action="store_true", help="keep the temporary folder")
    args = ap.parse_args()

    from jobs.config import Config, Inputs, Output
    from jobs.ingest import run_ingestion
    from jobs.session import get_or_create_session

    tmp = Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    try:
        t = time.perf_counter()
        size = write_segments(tmp / "offsets", args.records, args.segments, args.batch, args.compression)
        print(f"wrote {args.records:,} commits in {args.segments} segments, {size / 2**20:.1f} MiB "
              f"({time.perf_counter() - t:.1f} s)")
        spark = get_or_create_session(master=args.master, app_name="bench-ingest",
                                      extra_conf={"spark.ui.enabled": "false",
                                                  "spark.sql.shuffle.partitions": "4"})
        cfg = Config(cluster="bench", inputs=Inputs(offsets=str(tmp / "offsets")),
                     output=Output(root=str(tmp / "out")))
        rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        t = time.perf_counter()
        result = run_ingestion(spark, cfg, "2024-03-01", "2024-03-31", split_bytes=args.split_mb << 20)
        dt = time.perf_counter() - t
        rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        rec = result.count("offsets", "record")
        written = result.tables["offset_commits"].rows_written
        print(f"decoded {rec.units_read:,} records ({rec.units_quarantined} quarantined), "
              f"{written} rows written to offset_commits")
        print(f"{dt:.1f} s end to end: {rec.units_read / dt:,.0f} records/s "
              f"({size / 2**20 / dt:.1f} MiB/s), master {args.master}")
        print(f"driver (python) peak RSS: {rss0 / 1024:.0f} MiB before the run, {rss1 / 1024:.0f} MiB after")
        spark.stop()
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
