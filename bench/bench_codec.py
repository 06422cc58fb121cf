"""Codec-only throughput per core (no Spark), in CPU time (``time.process_time``: robust on a shared machine).

Four families, each the Arrow batch function Spark calls and, for comparison, the per-record reference:

- ``commits``      ``__consumer_offsets`` key/value pairs: :func:`coordinator.decode_offsets_arrow` and
                   :func:`coordinator.decode_offsets_rows` (v3 values, some v1, ~2 % tombstones);
- ``segments``     offset-commit records in v2 batches, codecs none/gzip/snappy/lz4/zstd, 1 and 50 records
                   per batch, CRC-32C verified: :func:`records.batches_arrow` and :func:`records.iter_batches`;
- ``checkpoints``  many small files read from disk and parsed (``leader-epoch-checkpoint`` with 1-8 entries,
                   ``partition.metadata``, and log-dir ``replication-offset-checkpoint`` with 200 lines);
- ``metadata``     MetadataResponse v12 with 2 topics x 25 partitions (3 replicas):
                   :func:`protocol.metadata_observations_arrow` (rows = one per partition).

Prints one line per case (best of ``--repeat`` CPU times) and, with ``--json``, writes them for ``run_all.py``.

    python bench/bench_codec.py            # default sizes (~1-2 min)
    python bench/bench_codec.py --quick    # a tenth of them
    python bench/bench_codec.py --only segments --codecs lz4 --per-batch 1 --no-reference --repeat 7
                                           # one segment case (what a codec change needs re-measured)
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import time
from pathlib import Path

import pyarrow as pa

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_codec_offsets import make_batch  # noqa: E402

from epochlib import brokers, checkpoint, coordinator, protocol, records  # noqa: E402

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
TARGETS = {"commits": 1_000_000, "segments": 500_000, "metadata": 10_000}  # metadata: responses/s (issue 16)


def cpu_best(fn, repeat: int) -> float:
    """Best CPU seconds of ``repeat`` calls of ``fn`` (after one warm-up call)."""
    fn()
    best = float("inf")
    for _ in range(repeat):
        t = time.process_time()
        fn()
        best = min(best, time.process_time() - t)
    return max(best, 1e-9)


def _case(family: str, case: str, impl: str, units: int, unit: str, cpu: float, **extra) -> dict:
    r = {"family": family, "case": case, "impl": impl, "units": units, "unit": unit, "cpu_s": cpu,
         "rate": units / cpu, **extra}
    target = TARGETS.get(family) if impl == "arrow" and unit != "rows" else None
    if target is not None:
        r["target"], r["met"] = target, r["rate"] >= target
    print(f"{family:12} {case:38} {impl:10} {units:>9,} {unit:8} {cpu:8.3f} s  {r['rate']:>13,.0f} {unit}/s"
          + (f"  (target {target:,}: {'met' if r['met'] else 'NOT met'})" if target else ""), flush=True)
    return r


# ------------------------------------------------------------------------------------------- commits


def bench_commits(n: int, repeat: int) -> list[dict]:
    keys, values = make_batch(n)
    out = []
    cpu = cpu_best(lambda: coordinator.decode_offsets_arrow(keys, values), repeat)
    out.append(_case("commits", "key/value v1+v3", "arrow", n, "records", cpu))
    m = max(1000, n // 20)
    k, v = keys.slice(0, m).to_pylist(), values.slice(0, m).to_pylist()
    cpu = cpu_best(lambda: coordinator.decode_offsets_rows(k, v), 1)
    out.append(_case("commits", "key/value v1+v3", "reference", m, "records", cpu))
    return out


# ------------------------------------------------------------------------------------------- segments


def build_segment(n: int, per_batch: int, compression: str) -> bytes:
    """``n`` real offset-commit records (key/value as a coordinator writes them) in v2 batches."""
    keys, values = make_batch(min(n, 4096))
    kl, vl = keys.to_pylist(), values.to_pylist()
    ts = 1_700_000_000_000
    parts, off = [], 0
    while off < n:
        m = min(per_batch, n - off)
        recs = [records.NewRecord(kl[(off + i) % len(kl)], vl[(off + i) % len(vl)], ts + off + i) for i in range(m)]
        parts.append(records.encode_batch(recs, base_offset=off, partition_leader_epoch=3 + off // 50_000,
                                          compression=compression, producer_id=-1))
        off += m
    return b"".join(parts)


def bench_segments(n: int, repeat: int, reference: bool, codecs=CODECS, per_batches=(1, 50)) -> list[dict]:
    out = []
    for per_batch in per_batches:
        for codec in codecs:
            buf = build_segment(n, per_batch, codec)

            def arrow(buf=buf):
                res = records.batches_arrow(buf, verify_crc=True)
                assert res.records.num_rows == n and res.batches.column("error").null_count == res.batches.num_rows

            cpu = cpu_best(arrow, repeat)
            case = f"{per_batch:>2} rec/batch {codec}"
            out.append(_case("segments", case, "arrow", n, "records", cpu, mib=len(buf) / 2**20))
            if reference:
                m = max(per_batch * 20, n // 10)
                small = build_segment(m, per_batch, codec)

                def ref(small=small, m=m):
                    assert sum(len(b.records) for b in records.iter_batches(small, verify_crc=True)) == m

                out.append(_case("segments", case, "reference", m, "records", cpu_best(ref, 1)))
    return out


# ------------------------------------------------------------------------------------------- checkpoints


def write_checkpoints(root: Path, files: int) -> tuple[list[Path], list[Path], list[Path]]:
    """``files`` partition dirs (leader-epoch-checkpoint + partition.metadata) and a few log-dir checkpoints."""
    lec, pm, rep = [], [], []
    shutil.rmtree(root, ignore_errors=True)
    for i in range(files):
        d = root / f"snap-{i // 1000}" / f"orders.events.v{i % 13}-{i}"
        d.mkdir(parents=True)
        entries = [(e, e * 10_000 + i) for e in range(1 + i % 8)]
        (d / "leader-epoch-checkpoint").write_text(checkpoint.format_leader_epoch_checkpoint(entries))
        (d / "partition.metadata").write_text(checkpoint.format_partition_metadata("q1Yk3QGkT7eM0aZ1b2c3dA"))
        lec.append(d / "leader-epoch-checkpoint")
        pm.append(d / "partition.metadata")
    for j in range(max(1, files // 200)):
        p = root / f"replication-offset-checkpoint-{j}"
        p.write_text(checkpoint.format_offset_checkpoint({(f"orders.events.v{k % 13}", k): k * 100 for k in range(200)}))
        rep.append(p)
    return lec, pm, rep


def bench_checkpoints(files: int, repeat: int, root: Path) -> list[dict]:
    lec, pm, rep = write_checkpoints(root, files)
    out = []

    def parse_all(paths, fn):
        def run():
            for p in paths:
                with open(p, "rb") as fh:
                    fn(fh.read())
        return run

    out.append(_case("checkpoints", "leader-epoch-checkpoint", "reference", len(lec), "files",
                     cpu_best(parse_all(lec, checkpoint.parse_leader_epoch_checkpoint), repeat)))
    out.append(_case("checkpoints", "partition.metadata", "reference", len(pm), "files",
                     cpu_best(parse_all(pm, checkpoint.parse_partition_metadata), repeat)))
    out.append(_case("checkpoints", "replication-offset (200 l)", "reference", len(rep), "files",
                     cpu_best(parse_all(rep, checkpoint.parse_offset_checkpoint), repeat)))
    shutil.rmtree(root, ignore_errors=True)
    return out


# ------------------------------------------------------------------------------------------- metadata


def metadata_response(i: int, version: int = 12, topics: int = 2, partitions: int = 25) -> bytes:
    brokers = list(range(1, 7))
    body = {
        "throttle_time_ms": 0,
        "brokers": [{"node_id": b, "host": f"broker-{b}.kafka.internal", "port": 9092, "rack": f"rack-{b % 3}"}
                    for b in brokers],
        "cluster_id": "lkc-bench-0001", "controller_id": 1, "error_code": 0,
        "cluster_authorized_operations": -2**31,
        "topics": [{
            "error_code": 0, "name": f"orders.events.v{t}", "topic_id": "q1Yk3QGkT7eM0aZ1b2c3dA",
            "is_internal": False, "topic_authorized_operations": -2**31,
            "partitions": [{"error_code": 0, "partition_index": p, "leader_id": brokers[(p + i) % 6],
                            "leader_epoch": 10 + i % 7, "replica_nodes": [brokers[(p + k) % 6] for k in range(3)],
                            "isr_nodes": [brokers[(p + k) % 6] for k in range(3)], "offline_replicas": []}
                           for p in range(partitions)],
        } for t in range(topics)],
    }
    return protocol.encode_metadata_response(body, version, i)


def bench_metadata(n: int, repeat: int) -> list[dict]:
    distinct = [metadata_response(i) for i in range(64)]
    resp = pa.array([distinct[i % 64] for i in range(n)], pa.binary())
    vers = pa.array([12] * n, pa.int16())
    rows = protocol.metadata_observations_arrow(resp.slice(0, 1), vers.slice(0, 1)).num_rows

    def run():
        b = protocol.metadata_observations_arrow(resp, vers)
        assert b.num_rows == n * rows and b.column("error").null_count == b.num_rows

    # as the ingestion runs it: the observations, then the serving broker's name per response (captured as
    # host:port, so the broker list is read too)
    captured = pa.array([f"broker-{1 + i % 6}.kafka.internal:9092" for i in range(n)], pa.string())

    def run_named():
        run()
        assert brokers.canonical_brokers_arrow(captured, resp, vers, {}).null_count == 0

    cpu = cpu_best(run, repeat)
    cpu_named = cpu_best(run_named, repeat)
    return [_case("metadata", f"v12, {rows} partitions", "arrow", n, "responses", cpu,
                  rows_per_s=n * rows / cpu),
            _case("metadata", f"v12, {rows} partitions", "arrow", n * rows, "rows", cpu),
            _case("metadata", f"v12, {rows} partitions + broker names", "arrow", n, "responses", cpu_named,
                  rows_per_s=n * rows / cpu_named)]


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="a tenth of the default sizes")
    ap.add_argument("--commits", type=int, default=1_000_000)
    ap.add_argument("--segment-records", type=int, default=200_000)
    ap.add_argument("--checkpoint-files", type=int, default=5000)
    ap.add_argument("--responses", type=int, default=5000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-reference", action="store_true", help="skip the per-record reference timings")
    ap.add_argument("--only", default="commits,segments,checkpoints,metadata")
    ap.add_argument("--codecs", default=",".join(CODECS), help="segments: these codecs only (comma-separated)")
    ap.add_argument("--per-batch", default="1,50", help="segments: these records-per-batch sizes only")
    ap.add_argument("--tmp", default="/tmp/epoch-audit-bench-codec")
    ap.add_argument("--json", help="write the results here")
    args = ap.parse_args(argv)
    q = 10 if args.quick else 1
    only = set(args.only.split(","))
    print(f"{'family':12} {'case':24} {'impl':10} {'units':>9} {'unit':8} {'CPU':>10}  {'rate':>13}", flush=True)
    res: list[dict] = []
    if "commits" in only:
        res += bench_commits(args.commits // q, args.repeat)
    if "segments" in only:
        codecs = [c for c in args.codecs.split(",") if c]
        unknown = set(codecs) - set(CODECS)
        if unknown:
            ap.error(f"unknown codec(s) {sorted(unknown)}; choose from {','.join(CODECS)}")
        res += bench_segments(args.segment_records // q, args.repeat, not args.no_reference, codecs,
                              [int(x) for x in args.per_batch.split(",") if x])
    if "checkpoints" in only:
        res += bench_checkpoints(args.checkpoint_files // q, args.repeat, Path(args.tmp))
    if "metadata" in only:
        res += bench_metadata(args.responses // q, args.repeat)
    if args.json:
        Path(args.json).write_text(json.dumps(res, indent=1))
    return res


if __name__ == "__main__":
    main()
