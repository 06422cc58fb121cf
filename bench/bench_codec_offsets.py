"""Throughput of coordinator.decode_offsets_arrow on offset-commit key/value pairs.

Run: ``python bench/bench_codec_offsets.py [n]`` — prints records/s on one core.
Issue acceptance: >= 1.0 M offset-commit pairs per second.
"""

from __future__ import annotations

import sys
import time

import pyarrow as pa

from epochlib.coordinator import decode_offsets_arrow, encode_offset_commit_key, encode_offset_commit_value


def make_batch(n: int, distinct: int = 4096) -> tuple[pa.Array, pa.Array]:
    """``n`` realistic pairs: v3 values (as brokers write), some v1, ~2% tombstones."""
    keys, values = [], []
    for i in range(distinct):
        keys.append(encode_offset_commit_key(f"payments-consumer-{i % 97}", f"orders.events.v{i % 13}", i % 64))
        if i % 50 == 0:
            values.append(None)
        elif i % 17 == 0:
            values.append(encode_offset_commit_value(
                1000 + i, commit_timestamp=1_700_000_000_000 + i, expire_timestamp=1_700_086_400_000, version=1))
        else:
            values.append(encode_offset_commit_value(
                1000 + i, leader_epoch=i % 9, commit_timestamp=1_700_000_000_000 + i))
    reps = -(-n // distinct)
    k = pa.array((keys * reps)[:n], pa.binary())
    v = pa.array((values * reps)[:n], pa.binary())
    return k, v


def bench_offsets_arrow(n: int = 1_000_000, repeat: int = 5) -> float:
    """Best-of-``repeat`` records/s of decode_offsets_arrow over ``n`` pairs; prints it."""
    keys, values = make_batch(n)
    decode_offsets_arrow(keys.slice(0, 1000), values.slice(0, 1000))  # warm-up
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        batch = decode_offsets_arrow(keys, values)
        best = min(best, time.perf_counter() - t0)
    assert batch.num_rows == n and batch.column("error").null_count == n
    rate = n / best
    print(f"decode_offsets_arrow: {n} pairs in {best * 1000:.1f} ms -> {rate / 1e6:.2f} M records/s")
    return rate


if __name__ == "__main__":
    bench_offsets_arrow(int(sys.argv[1]) if len(sys.argv) > 1 else 1_000_000)
