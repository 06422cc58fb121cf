"""Benchmark: segment decoding throughput of epochlib.records (records/s on one core).

Builds realistic in-memory segments (offset-commit-like records: 60-byte keys and values,
batches of 1 and of 50 records, codec none and zstd, producer-id/epoch like a coordinator)
and times (process CPU time, robust on a shared machine) ``batches_arrow`` (the path Spark uses, CRC checked) and, for reference,
``iter_batches``. Run: ``python bench/bench_records.py [--records N]``.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from epochlib.records import NewRecord, batches_arrow, encode_batch, iter_batches  # noqa: E402


def build_segment(n_records: int, per_batch: int, compression: str) -> bytes:
    """``n_records`` offset-commit-like records in batches of ``per_batch``."""
    parts = []
    ts = 1_700_000_000_000
    offset = 0
    epoch = 0
    while offset < n_records:
        recs = []
        for i in range(min(per_batch, n_records - offset)):
            o = offset + i
            key = (
                b"\x00\x01" + f"group-{o % 97:04d}/topic-{o % 13:03d}/partition-{o % 50:04d}".encode()
            ).ljust(60, b"_")
            value = (b"\x00\x03" + o.to_bytes(8, "big") + f"meta-{o}".encode()).ljust(60, b".")
            recs.append(NewRecord(key, value, ts + o))
        if offset % 5000 == 0:
            epoch += 1
        parts.append(
            encode_batch(recs, base_offset=offset, partition_leader_epoch=epoch, compression=compression)
        )
        offset += len(recs)
    return b"".join(parts)


def bench(fn, buf: bytes, n_records: int, repeat: int = 3) -> float:
    best = float("inf")
    for _ in range(repeat):
        t0 = time.process_time()
        fn(buf)
        best = min(best, time.process_time() - t0)
    return n_records / best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--reference", action="store_true", help="also time iter_batches (slow)")
    args = ap.parse_args()
    n = args.records

    def arrow(buf: bytes) -> None:
        res = batches_arrow(buf)
        assert res.records.num_rows == n

    def reference(buf: bytes) -> None:
        assert sum(len(b.records) for b in iter_batches(buf)) == n

    print(
        f"{'segment':32} {'MiB':>7} {'arrow rec/s':>14}"
        + (f" {'iter_batches rec/s':>20}" if args.reference else "")
    )
    for per_batch in (1, 50):
        for compression in ("none", "zstd"):
            buf = build_segment(n, per_batch, compression)
            line = f"{f'{per_batch} rec/batch, {compression}':32} {len(buf) / 2**20:7.1f} {bench(arrow, buf, n):14,.0f}"
            if args.reference:
                line += f" {bench(reference, buf, n, 1):20,.0f}"
            print(line, flush=True)


if __name__ == "__main__":
    main()
