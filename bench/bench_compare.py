"""Our segment reader against the record readers an operator would otherwise script, on the same file.

One ``__consumer_offsets`` segment (written once under ``--tmp``: ``--records`` offset commits, as a group
coordinator writes them: mostly one-record batches, every tenth batch a multi-partition commit of 20
records; or any segment given with ``--file``) is read by:

- ``kafka-python``  ``kafka.record.memory_records.MemoryRecords``: every batch, ``validate_crc()``, every
                    record's key and value (pure Python);
- ``aiokafka``      ``aiokafka.record.memory_records.MemoryRecords`` (its C extension), same loop;
- ``iter_batches``  :func:`epochlib.records.iter_batches` (our per-record reference, CRC-32C checked);
- ``batches_arrow`` :func:`epochlib.records.batches_arrow` (the batch function Spark runs);
- ``batches_arrow + commits``  the same plus :func:`epochlib.coordinator.decode_offsets_arrow` on the
                    record keys/values (what ingestion does: group, topic, partition, offset, epoch...).

CPU time (``time.process_time``), best of ``--repeat``; records/s and the ratio to kafka-python.

    python bench/bench_compare.py
    python bench/bench_compare.py --file /path/to/__consumer_offsets-7/00000000000000000000.log
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from epochlib import coordinator, records  # noqa: E402


def write_segment(path: Path, n: int, compression: str) -> None:
    """``n`` offset-commit records in coordinator-like batches (bounded memory, written once)."""
    ts = 1_700_000_000_000
    off, i = 0, 0
    tmp = path.with_suffix(".tmp")
    tmp.parent.mkdir(parents=True, exist_ok=True)
    with open(tmp, "wb") as fh:
        while off < n:
            m = min(20 if i % 10 == 9 else 1, n - off)
            g = f"payments-consumer-{i % 97}"
            recs = [records.NewRecord(coordinator.encode_offset_commit_key(g, f"orders.events.v{(off + j) % 13}",
                                                                         (off + j) % 64),
                                      coordinator.encode_offset_commit_value(1000 + off + j, leader_epoch=7,
                                                                             commit_timestamp=ts + off),
                                      ts + off) for j in range(m)]
            fh.write(records.encode_batch(recs, base_offset=off, partition_leader_epoch=7, compression=compression))
            off += m
            i += 1
    tmp.rename(path)


def kafka_python(buf: bytes) -> int:
    from kafka.record.memory_records import MemoryRecords

    n = 0
    mr = MemoryRecords(buf)
    while mr.has_next():
        b = mr.next_batch()
        if not b.validate_crc():
            raise ValueError("bad crc")
        for r in b:
            r.key, r.value  # noqa: B018 - decode every record's key and value
            n += 1
    return n


def aiokafka_c(buf: bytes) -> int:
    from aiokafka.record.memory_records import MemoryRecords

    n = 0
    mr = MemoryRecords(buf)
    while mr.has_next():
        b = mr.next_batch()
        if not b.validate_crc():
            raise ValueError("bad crc")
        for r in b:
            r.key, r.value  # noqa: B018
            n += 1
    return n


def ours_reference(buf: bytes) -> int:
    n = 0
    for b in records.iter_batches(buf, verify_crc=True):
        for r in b.records:
            r.key, r.value  # noqa: B018
            n += 1
    return n


def ours_arrow(buf: bytes) -> int:
    return records.batches_arrow(buf, verify_crc=True).records.num_rows


def ours_arrow_commits(buf: bytes) -> int:
    rec = records.batches_arrow(buf, verify_crc=True).records
    out = coordinator.decode_offsets_arrow(rec.column("key"), rec.column("value"))
    assert out.column("error").null_count == out.num_rows
    return out.num_rows


READERS = {"kafka-python": kafka_python, "aiokafka (C)": aiokafka_c, "iter_batches": ours_reference,
           "batches_arrow": ours_arrow, "batches_arrow + commits": ours_arrow_commits}


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=300_000)
    ap.add_argument("--compression", default="none")
    ap.add_argument("--file", help="an existing segment file instead of the generated one")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tmp", default="/tmp/epoch-audit-bench-compare")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    if args.file:
        path = Path(args.file)
    else:
        path = Path(args.tmp) / f"r{args.records}-{args.compression}" / "00000000000000000000.log"
        if not path.exists():
            write_segment(path, args.records, args.compression)
    buf = path.read_bytes()
    print(f"segment {path} ({len(buf) / 2**20:.1f} MiB)")
    print(f"{'reader':26} {'records':>9} {'CPU s':>7} {'records/s':>12} {'x kafka-python':>14}", flush=True)
    res: list[dict] = []
    base = None
    for name, fn in READERS.items():
        n = fn(buf)  # warm-up, and the count every reader must agree on
        best = float("inf")
        for _ in range(args.repeat):
            t = time.process_time()
            assert fn(buf) == n
            best = min(best, time.process_time() - t)
        r = {"reader": name, "records": n, "cpu_s": best, "rate": n / best, "file": str(path),
             "mib": len(buf) / 2**20}
        base = base or r
        assert n == base["records"], (name, n, base["records"])
        r["x_base"] = r["rate"] / base["rate"]
        res.append(r)
        print(f"{name:26} {n:>9,} {best:7.3f} {r['rate']:>12,.0f} {r['x_base']:>14.1f}", flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
