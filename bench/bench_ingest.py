"""Benchmark: ingest >= 2 M offset-commit records from segment files on local Spark.

Writes ``--segments`` segment files of ``__consumer_offsets`` (v2 batches of ``--batch`` commits, uncompressed
by default) once into a cache folder (``--cache``, default ``/tmp/epoch-audit-bench``; reused by later runs
with the same shape), runs :func:`jobs.ingest.run_ingestion` over them with a small ``--split-mb`` so big
segments are decoded in parallel ranges, into a fresh output folder, and prints:

- records/s and wall time of ``run_ingestion`` (discovery, decode, Delta writes, counts);
- CPU seconds of the whole Spark process tree (JVM + Python workers) during the run, and records per
  CPU-second -- the figure to compare on a shared, noisy machine;
- peak RSS of the Python driver process and of the JVM driver (``VmHWM`` of the ``java`` child in local mode):
  neither may grow with the input, since the driver only lists files and collects count aggregates;
- with ``--stages``: per Spark stage wall time, tasks, executor run/CPU time and rows in/out (from the event
  log, written to a temporary folder).

    . .venv/bin/activate && python bench/bench_ingest.py --records 2000000 --master 'local[2]'
    . .venv/bin/activate && python bench/bench_ingest.py --records 10000000 --master 'local[2]'
"""

from __future__ import annotations

import argparse
import json
import os
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
_TICK = os.sysconf("SC_CLK_TCK")


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


def cached_inputs(cache: Path, n_records: int, n_segments: int, batch: int, compression: str) -> tuple[Path, int]:
    """The offsets root for this input shape, written once (a ``done`` marker makes it reusable)."""
    d = cache / f"r{n_records}-s{n_segments}-b{batch}-{compression}"
    done = d / "done.json"
    if done.exists():
        return d / "offsets", json.loads(done.read_text())["bytes"]
    shutil.rmtree(d, ignore_errors=True)
    t = time.perf_counter()
    size = write_segments(d / "offsets", n_records, n_segments, batch, compression)
    done.write_text(json.dumps({"bytes": size}))
    print(f"wrote {n_records:,} commits in {n_segments} segments, {size / 2**20:.1f} MiB "
          f"({time.perf_counter() - t:.1f} s) into {d}")
    return d / "offsets", size


# ------------------------------------------------------------------------------------ /proc readings


def _children(pid: int) -> list[int]:
    out = []
    try:
        for tid in os.listdir(f"/proc/{pid}/task"):
            with open(f"/proc/{pid}/task/{tid}/children") as fh:
                out.extend(int(x) for x in fh.read().split())
    except OSError:
        pass
    return out


def _tree(pid: int) -> list[int]:
    todo, seen = [pid], []
    while todo:
        p = todo.pop()
        seen.append(p)
        todo.extend(_children(p))
    return seen


def _cpu_s(pid: int, children: bool = True) -> float:
    """utime + stime of a process (its threads, live or ended) plus, with ``children``, those of its reaped
    children, in seconds."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            f = fh.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return sum(int(x) for x in f[11 : 15 if children else 13]) / _TICK


def tree_cpu_s(pid: int) -> float:
    return sum(_cpu_s(p) for p in _tree(pid))


def _threads(pid: int) -> dict[str, tuple[str, float]]:
    """Per live thread id of a process: its name (digits stripped: ``GC Thread#3`` -> ``GC Thread#``) and CPU
    seconds."""
    out: dict[str, tuple[str, float]] = {}
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except OSError:
        return out
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as fh:
                head, rest = fh.read().rsplit(")", 1)
        except OSError:
            continue
        f = rest.split()
        name = "".join(c for c in head.split("(", 1)[1] if not c.isdigit()).strip()
        out[tid] = (name, (int(f[11]) + int(f[12])) / _TICK)
    return out


def thread_cpu_s(pid: int) -> dict[str, float]:
    """CPU seconds per thread-name group of a process's live threads."""
    out: dict[str, float] = {}
    for name, cpu in _threads(pid).values():
        out[name] = out.get(name, 0.0) + cpu
    return out


#: JVM thread names (``/proc`` keeps their first 15 characters; digits stripped) -> the group a CPU split reports
#: them in.
_THREAD_GROUPS = (("Executor task", "executor tasks"), ("Thread-", "driver calls (py4j: planning)"),
                  ("C CompilerThre", "JIT compiler"), ("GC Thread#", "GC"), ("VM Thread", "GC"))


class JvmThreadSampler:
    """CPU seconds of the JVM's threads over a run, grouped (:data:`_THREAD_GROUPS`, the rest ``other``).

    ``/proc/<pid>/task`` lists live threads only, and the threads that serve the Python driver's calls (py4j, one
    per connection: query analysis and planning) come and go, so a background thread reads them every
    ``interval`` seconds and keeps each thread's last reading (a thread that lives less than that is missed). That
    thread's own CPU (:attr:`own_cpu`, ~2 % of a core) is the measuring process's: take it off that process's figure.
    Use as a context manager around the run; :meth:`split` then gives the groups."""

    def __init__(self, pid: int, interval: float = 0.25) -> None:
        import threading

        self.pid, self.interval = pid, interval
        self.start: dict[str, float] = {}
        self.last: dict[str, tuple[str, float]] = {}
        self.own_cpu = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def _read(self) -> None:
        self.last.update(_threads(self.pid))

    def _loop(self) -> None:
        start = time.thread_time()
        while not self._stop.wait(self.interval):
            self._read()
        self.own_cpu = time.thread_time() - start  # in the measured process: callers take it off its CPU

    def __enter__(self) -> JvmThreadSampler:
        self._read()
        self.start = {tid: cpu for tid, (_, cpu) in self.last.items()}
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        self._read()

    def split(self) -> dict[str, float]:
        out: dict[str, float] = {}
        for tid, (name, cpu) in self.last.items():
            group = next((g for prefix, g in _THREAD_GROUPS if name.startswith(prefix)), "other")
            out[group] = out.get(group, 0.0) + cpu - self.start.get(tid, 0.0)
        return out


def _status_kib(pid: int, key: str) -> int:
    try:
        with open(f"/proc/{pid}/status") as fh:
            for line in fh:
                if line.startswith(key + ":"):
                    return int(line.split()[1])
    except OSError:
        pass
    return 0


def java_pid() -> int | None:
    """The JVM driver: the ``java`` child of this Python process (local mode)."""
    for p in _children(os.getpid()):
        try:
            with open(f"/proc/{p}/comm") as fh:
                if fh.read().strip() == "java":
                    return p
        except OSError:
            continue
    return None


# ------------------------------------------------------------------------------------ event log


def event_log_conf(log_dir: Path) -> dict[str, str]:
    """Spark settings that write an uncompressed event log into ``log_dir`` (created) for :func:`stage_report`."""
    log_dir.mkdir(parents=True, exist_ok=True)
    return {"spark.eventLog.enabled": "true", "spark.eventLog.compress": "false", "spark.eventLog.dir": str(log_dir)}


def stage_report(log_dir: Path) -> list[str]:
    """Per stage: start (s after the first job), wall, tasks, executor run/CPU time, rows written, shuffle bytes,
    and the step it ran for (the job description, e.g. ``epoch-audit: reports: fencing_violations``), from the
    event log."""
    stages: dict[int, dict] = {}
    step: dict[int, str] = {}
    t0: float | None = None
    for f in sorted(x for x in log_dir.rglob("*") if x.is_file() and not x.name.startswith(".")):
        with open(f) as fh:
            for line in fh:
                ev = json.loads(line)
                kind = ev.get("Event")
                if kind == "SparkListenerJobStart":
                    sub = ev.get("Submission Time", 0)
                    t0 = sub if t0 is None else min(t0, sub)  # rolled logs are not read in time order
                    desc = (ev.get("Properties") or {}).get("spark.job.description") or ""
                    for sid in ev.get("Stage IDs", ()):
                        step.setdefault(sid, desc.removeprefix("epoch-audit: "))
                elif kind == "SparkListenerTaskEnd":
                    s = stages.setdefault(ev["Stage ID"], {"run": 0, "cpu": 0, "in": 0, "out": 0, "shw": 0,
                                                          "tasks": 0})
                    m = ev.get("Task Metrics") or {}
                    s["tasks"] += 1
                    s["run"] += m.get("Executor Run Time", 0)
                    s["cpu"] += m.get("Executor CPU Time", 0) / 1e6
                    s["in"] += (m.get("Input Metrics") or {}).get("Records Read", 0)
                    s["out"] += (m.get("Output Metrics") or {}).get("Records Written", 0)
                    s["shw"] += (m.get("Shuffle Write Metrics") or {}).get("Shuffle Bytes Written", 0)
                elif kind == "SparkListenerStageCompleted":
                    info = ev["Stage Info"]
                    s = stages.setdefault(info["Stage ID"], {"run": 0, "cpu": 0, "in": 0, "out": 0, "shw": 0,
                                                             "tasks": 0})
                    s["name"] = info.get("Stage Name", "")
                    s["start"] = info.get("Submission Time", 0)
                    s["wall"] = (info.get("Completion Time", 0) - info.get("Submission Time", 0)) / 1000
    lines = [f"{'stage':>5} {'start s':>7} {'wall s':>7} {'tasks':>5} {'run s':>7} {'jvmcpu s':>8} {'rows out':>10} "
             f"{'shuffle MiB':>11}  step / name"]
    for sid in sorted(stages):
        s = stages[sid]
        start = (s.get("start", 0) - (t0 or 0)) / 1000 if s.get("start") else 0.0
        where = step.get(sid) or s.get("name", "")
        lines.append(f"{sid:>5} {start:>7.1f} {s.get('wall', 0):>7.1f} {s['tasks']:>5} {s['run'] / 1000:>7.1f} "
                     f"{s['cpu'] / 1000:>8.1f} {s['out']:>10,} {s['shw'] / 2**20:>11.1f}  {where[:40]}"
                     f" / {s.get('name', '')[:30]}")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=int, default=2_000_000)
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--batch", type=int, default=200, help="commits per record batch")
    ap.add_argument("--compression", default="none")
    ap.add_argument("--split-mb", type=int, default=16, help="target byte range per task (MiB)")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--cache", default="/tmp/epoch-audit-bench", help="folder for the generated inputs")
    ap.add_argument("--repeat", type=int, default=1, help="ingest this many times in one session")
    ap.add_argument("--threads", action="store_true", help="print JVM CPU per thread group of each run")
    ap.add_argument("--stages", action="store_true", help="print per-stage figures from the event log")
    ap.add_argument("--keep", action="store_true", help="keep the output folder")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="extra Spark setting")
    args = ap.parse_args()

    from jobs.config import Config, Inputs, Output
    from jobs.ingest import run_ingestion
    from jobs.session import get_or_create_session

    offsets, size = cached_inputs(Path(args.cache), args.records, args.segments, args.batch, args.compression)
    tmp = Path(tempfile.mkdtemp(prefix="bench_ingest_"))
    try:
        conf = {"spark.ui.enabled": "false", "spark.sql.shuffle.partitions": "4"}
        conf.update(kv.split("=", 1) for kv in args.conf)
        if args.stages:
            conf.update(event_log_conf(tmp / "events"))
        spark = get_or_create_session(master=args.master, app_name="bench-ingest", extra_conf=conf)
        jpid = java_pid()
        for i in range(args.repeat):
            out = tmp / f"out{i}"
            cfg = Config(cluster="bench", inputs=Inputs(offsets=str(offsets)), output=Output(root=str(out)))
            cpu0 = tree_cpu_s(jpid) if jpid else 0.0
            jvm0 = _cpu_s(jpid) if jpid else 0.0
            th0 = thread_cpu_s(jpid) if jpid and args.threads else {}
            self0 = time.process_time()
            t = time.perf_counter()
            result = run_ingestion(spark, cfg, "2024-03-01", "2024-03-31", split_bytes=args.split_mb << 20)
            dt = time.perf_counter() - t
            cpu = (tree_cpu_s(jpid) if jpid else 0.0) - cpu0 + time.process_time() - self0
            jvm = (_cpu_s(jpid) if jpid else 0.0) - jvm0
            rec = result.count("offsets", "record")
            written = result.tables["offset_commits"].rows_written
            assert rec.units_read == args.records and written == args.records, (rec, written)
            print(f"run {i + 1}: {rec.units_read:,} records ({rec.units_quarantined} quarantined), "
                  f"{written:,} rows written to offset_commits")
            print(f"  wall {dt:.1f} s: {rec.units_read / dt:,.0f} records/s ({size / 2**20 / dt:.1f} MiB/s), "
                  f"master {args.master}")
            print(f"  CPU {cpu:.1f} s (JVM + Python workers + driver): {rec.units_read / cpu:,.0f} records per "
                  f"CPU-second")
            print(f"    of which JVM {jvm:.1f} s, Python workers {cpu - jvm - (time.process_time() - self0):.1f} s, "
                  f"Python driver {time.process_time() - self0:.1f} s")
            if th0:
                th = thread_cpu_s(jpid)
                top = sorted(((v - th0.get(k, 0.0), k) for k, v in th.items()), reverse=True)[:8]
                print("    JVM threads: " + ", ".join(f"{k} {v:.1f} s" for v, k in top if v >= 0.1))
            shutil.rmtree(out, ignore_errors=True)
        py_peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
        jvm_peak = _status_kib(jpid, "VmHWM") / 1024 if jpid else float("nan")
        print(f"peak RSS: Python driver {py_peak:.0f} MiB, JVM driver {jvm_peak:.0f} MiB "
              f"(records {args.records:,})")
        spark.stop()
        if args.stages:
            print("\n".join(stage_report(tmp / "events")))
    finally:
        if not args.keep:
            shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
