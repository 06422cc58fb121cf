"""KRaft metadata log decoding throughput per core (no Spark), in CPU time (``time.process_time``).

The Arrow batch function Spark will call, :func:`epochlib.kraft.arrow.metadata_records_arrow` (bytes of a
segment -> one row per record, CRC-32C verified), and its per-record reference for comparison, on:

- ``quiet``   a synthetic log with the real logs' mix: 98 % NoOpRecord heartbeats (one per batch), 1.5 %
              leader-only PartitionChangeRecords in batches of 50, 0.5 % ISR changes (the generic path);
- ``busy``    50 % NoOp, 40 % leader-only changes, 10 % ISR changes — a cluster in a rolling restart;
- ``isr``     100 % ISR/replica changes: every record through the generic (reference-row) path;
- ``real``    the three real ``__cluster_metadata-0`` logs (when ``../shared/real-kafka-data`` exists).

    python bench/bench_kraft.py                 # ~1 min
    python bench/bench_kraft.py --records 100000 --repeat 3
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench_codec import cpu_best  # noqa: E402  (bench/ is the script's own folder)

from epochlib.kraft import arrow  # noqa: E402
from epochlib.kraft.codec import encode_metadata_batch  # noqa: E402

TARGET = 500_000
REAL = Path(os.environ.get("EPOCH_AUDIT_REAL_DATA", Path(__file__).resolve().parents[2] / "shared" / "real-kafka-data"))
# Kafka's Uuid text form: URL-safe base64 without padding
TOPICS = [base64.urlsafe_b64encode(bytes([i]) * 16).rstrip(b"=").decode() for i in range(1, 21)]


def make_log(n: int, noop: float, leader: float) -> bytes:
    """A metadata log of ``n`` records: NoOps alone in their batches, changes in batches of 50."""
    out, offset, ts = [], 0, 1_700_000_000_000
    n_noop, n_leader = int(n * noop), int(n * leader)
    n_isr = n - n_noop - n_leader
    changes = [(5, 1, {"partition_id": i % 50, "topic_id": TOPICS[i % 20], "leader": i % 3}) for i in range(n_leader)]
    changes += [(5, 1, {"partition_id": i % 50, "topic_id": TOPICS[i % 20], "isr": [1, 2, 3][: 1 + i % 3],
                        "leader_recovery_state": i % 2}) for i in range(n_isr)]
    every = max(1, n_noop // max(1, len(changes) // 50 + 1))
    ci = 0
    for k in range(n_noop):
        out.append(encode_metadata_batch([(20, 0, {})], base_offset=offset, raft_epoch=3, timestamp=ts))
        offset, ts = offset + 1, ts + 500
        if k % every == 0 and ci < len(changes):
            chunk = changes[ci:ci + 50]
            out.append(encode_metadata_batch(chunk, base_offset=offset, raft_epoch=3, timestamp=ts))
            offset, ci = offset + len(chunk), ci + len(chunk)
    while ci < len(changes):
        chunk = changes[ci:ci + 50]
        out.append(encode_metadata_batch(chunk, base_offset=offset, raft_epoch=3, timestamp=ts))
        offset, ci = offset + len(chunk), ci + len(chunk)
    return b"".join(out)




def run(name: str, buf: bytes, repeat: int, reference: bool) -> list[dict]:
    n = arrow.metadata_records_arrow(buf).num_rows
    out = []
    impls = [("arrow", arrow.metadata_records_arrow)] + ([("reference", arrow.metadata_records_rows)] if reference else [])
    for impl, fn in impls:
        cpu = cpu_best(lambda fn=fn: fn(buf), repeat if impl == "arrow" else 1)
        rate = n / cpu
        met = "" if impl != "arrow" else f"  (target {TARGET:,}: {'met' if rate >= TARGET else 'NOT met'})"
        print(f"kraft  {name:28} {impl:10} {n:>9,} records {len(buf) / 1e6:7.1f} MB {cpu:7.3f} s  "
              f"{rate:>11,.0f} records/s{met}", flush=True)
        out.append({"family": "kraft", "case": name, "impl": impl, "units": n, "unit": "records", "cpu_s": cpu,
                    "rate": rate, **({"target": TARGET, "met": rate >= TARGET} if impl == "arrow" else {})})
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--no-reference", action="store_true")
    ap.add_argument("--json", type=Path)
    a = ap.parse_args(argv)
    results = []
    for name, noop, leader in (("quiet (98% NoOp)", 0.98, 0.015), ("busy (50% NoOp, 40% leader)", 0.5, 0.4),
                               ("isr (100% generic path)", 0.0, 0.0)):
        results += run(name, make_log(a.records if noop else a.records // 10, noop, leader), a.repeat,
                       not a.no_reference)
    if REAL.is_dir():
        buf = b"".join((REAL / d / "__cluster_metadata-0" / "00000000000000000000.log").read_bytes()
                       for d in ("kraft-single-broker-2024", "kraft-aibulb-2023", "kraft-microservice"))
        results += run("real (3 logs, 48,254 rec)", buf, a.repeat, not a.no_reference)
    if a.json:
        a.json.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
