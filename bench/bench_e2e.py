"""End-to-end audit throughput: ``run_audit`` (ingest + three reports + Delta commits) on a simulated cluster.

For each ``--commits`` size the inputs are simulated once (``epoch-audit simulate --preset bench --commits N``)
into ``--cache`` (default ``/tmp/epoch-audit-e2e/c<N>``, reused by later runs), then one fresh Python process
per size creates a ``local[2]`` session and runs :func:`jobs.audit.run_audit` over the simulated day into a
temporary output root, and reports:

- wall time of ``run_audit`` (and its ingest / reports split), commits/s;
- CPU seconds of the whole process tree (Python driver, JVM, Python workers) and commits per CPU-second;
- peak RSS of the Python driver (``ru_maxrss``) and of its JVM child (``VmHWM`` from /proc).

With several sizes it prints the ratios against the first one (wall; the target is 10M/1M <= 11x) and whether
the driver's RSS stays flat.

    python bench/bench_e2e.py --commits 1000000
    python bench/bench_e2e.py --commits 1000000,10000000 --json /tmp/e2e.json
    python bench/bench_e2e.py --commits 10000000 --day 2024-03-05 --no-reports --stages   # all commits are state

``--day`` audits that day instead of the simulated one: the day after it makes every input row a lookback-day
row (the state a nightly run carries over), ``--no-reports`` stops after ingestion.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import math
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_ingest import (  # noqa: E402  (/proc, event log)
    JvmThreadSampler,
    _cpu_s,
    _status_kib,
    event_log_conf,
    java_pid,
    stage_report,
    tree_cpu_s,
)

ROOT = Path(__file__).resolve().parent.parent


def simulated(cache: Path, commits: int) -> Path:
    """The simulated inputs for ``commits`` (written once: simulated into ``<dir>.tmp``, then renamed)."""
    d = cache / f"c{commits}"
    if (d / "offsets").is_dir():
        return d
    tmp = cache / f"c{commits}.tmp"
    shutil.rmtree(tmp, ignore_errors=True)
    cache.mkdir(parents=True, exist_ok=True)
    exe = Path(sys.executable).with_name("epoch-audit")
    cmd = [str(exe), "simulate", "--preset", "bench", "--commits", str(commits), "--out", str(tmp)]
    print("$ " + " ".join(cmd), flush=True)
    t = time.perf_counter()
    subprocess.run(cmd, check=True)
    tmp.rename(d)
    print(f"simulated {commits:,} commits in {time.perf_counter() - t:.0f} s into {d}", flush=True)
    return d


def date_range(commits: int) -> tuple[str, str]:
    from epochlib import sim

    sc = sim.preset("bench", commits=commits)
    start = dt.date.fromisoformat(sc.start)
    return str(start), str(start + dt.timedelta(days=max(0, math.ceil(sc.days) - 1)))


def one_run(commits: int, cache: Path, master: str, conf: list[str], stages: bool = False, day: str | None = None,
            reports: bool = True) -> dict:
    """Simulate (if needed) and audit ``commits`` in this process (over ``day`` instead of the simulated days when
    given; without the reports unless ``reports``); returns the figures."""
    from jobs.audit import run_audit
    from jobs.config import default_config
    from jobs.session import get_or_create_session, local_input_size

    inputs = simulated(cache, commits)
    start, end = (day, day) if day else date_range(commits)
    out = Path(tempfile.mkdtemp(prefix="bench_e2e_"))
    cm = inputs / "cluster_metadata"  # a cache simulated before the metadata log existed has none: read as empty
    cm.mkdir(exist_ok=True)
    try:
        config = default_config().with_overrides(
            offsets=str(inputs / "offsets"), logdirs=str(inputs / "logdirs"), metadata=str(inputs / "metadata"),
            cluster_metadata=str(cm), output_root=str(out / "tables"), cluster="bench")
        # 2 GiB heap (the embedded default is 1 GiB, enough for the demo): the local JVM is driver and
        # executors at once, and at 10 M commits two tasks' Arrow buffers plus shuffle need the room.
        extra = {**dict(config.spark.conf), "spark.ui.enabled": "false", "spark.driver.memory": "2g"}
        extra.update(kv.split("=", 1) for kv in conf)
        if stages:
            extra.update(event_log_conf(out / "events"))
        # the JVM flags the CLI would choose for this input (jobs.session.java_options_for_input)
        # and the class-data archive a CLI run made (jobs.class_cache; none: not used, as in a first run)
        spark = get_or_create_session(master=master, app_name="bench-e2e", extra_conf=extra,
                                      input_bytes=local_input_size(config), class_data="use")
        jpid = java_pid()
        cpu0 = (tree_cpu_s(jpid) if jpid else 0.0) + time.process_time()
        jvm0, driver0 = (_cpu_s(jpid, children=False) if jpid else 0.0), time.process_time()
        sampler = JvmThreadSampler(jpid) if jpid and stages else None
        t = time.perf_counter()
        with sampler or contextlib.nullcontext():
            res = run_audit(spark, config, start, end, progress=lambda line: print("  " + line, flush=True),
                            progress_interval=30, reports=None if reports else ())
        wall = time.perf_counter() - t
        own = sampler.own_cpu if sampler else 0.0  # the sampler's thread runs in this process: not the run's
        cpu = (tree_cpu_s(jpid) if jpid else 0.0) + time.process_time() - cpu0 - own
        jvm, driver = (_cpu_s(jpid, children=False) - jvm0 if jpid else 0.0), time.process_time() - driver0 - own
        # where the CPU went: the JVM (by thread group, with --stages), the Python driver, the Python workers
        split = {"python driver": driver, "python workers": cpu - jvm - driver, "jvm": jvm,
                 **({f"jvm: {k}": v for k, v in sorted(sampler.split().items())} if sampler else {})}
        decoded = {f"{c.source_kind}/{c.unit}": c.records_decoded for c in res.ingest.counts}
        n_commits = res.ingest.tables["offset_commits"].rows_written if "offset_commits" in res.ingest.tables else None
        fig = {
            "commits": commits, "offset_commits_rows": n_commits, "wall_s": wall,
            "ingest_s": res.timings.get("ingest"), "reports_s": res.timings.get("reports"),
            "rate": commits / wall, "cpu_s": cpu, "rate_cpu": commits / cpu, "findings": res.findings,
            "records_decoded": decoded, "master": master,
            "py_rss_mib": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024,
            "jvm_rss_mib": _status_kib(jpid, "VmHWM") / 1024 if jpid else None,
            "cpu_split": split,
        }
        spark.stop()
        if stages:
            fig["stages"] = stage_report(out / "events")
            print("\n".join(fig["stages"]), flush=True)
            print("CPU s: " + ", ".join(f"{k} {v:.1f}" for k, v in split.items()), flush=True)
        return fig
    finally:
        shutil.rmtree(out, ignore_errors=True)


def main(argv: list[str] | None = None) -> list[dict]:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--commits", default="1000000", help="comma-separated sizes")
    ap.add_argument("--cache", default="/tmp/epoch-audit-e2e")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--stages", action="store_true", help="print per-stage figures from Spark's event log")
    ap.add_argument("--day", help="audit this day (YYYY-MM-DD) instead of the simulated ones")
    ap.add_argument("--no-reports", action="store_true", help="ingestion only")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    sizes = [int(x) for x in args.commits.split(",")]
    cache = Path(args.cache)
    if args.child:
        fig = one_run(sizes[0], cache, args.master, args.conf, args.stages, args.day, not args.no_reports)
        print("RESULT " + json.dumps(fig), flush=True)
        return [fig]
    figs = []
    for n in sizes:
        simulated(cache, n)  # generation is not part of the measurement
        cmd = [sys.executable, __file__, "--child", "--commits", str(n), "--cache", str(cache),
               "--master", args.master] + [f"--conf={c}" for c in args.conf] + (["--stages"] if args.stages else [])
        cmd += (["--day", args.day] if args.day else []) + (["--no-reports"] if args.no_reports else [])
        with subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True) as proc:  # a fresh process: its own peak RSS
            for line in proc.stdout:
                if line.startswith("RESULT "):
                    figs.append(json.loads(line[7:]))
                else:
                    print(line, end="", flush=True)
        if proc.returncode:
            raise SystemExit(f"e2e run of {n:,} commits failed (exit {proc.returncode})")
        f = figs[-1]
        print(f"e2e {n:>11,} commits: wall {f['wall_s']:7.1f} s (ingest {f['ingest_s']:.1f}, reports "
              f"{f['reports_s'] or 0:.1f}) {f['rate']:>10,.0f} commits/s; CPU {f['cpu_s']:.0f} s "
              f"{f['rate_cpu']:>10,.0f} commits/CPU-s; peak RSS Python {f['py_rss_mib']:.0f} MiB, "
              f"JVM {f['jvm_rss_mib']:.0f} MiB", flush=True)
    for f in figs[1:]:
        b = figs[0]
        print(f"{f['commits']:,} vs {b['commits']:,}: size x{f['commits'] / b['commits']:.1f}, wall "
              f"x{f['wall_s'] / b['wall_s']:.2f}, CPU x{f['cpu_s'] / b['cpu_s']:.2f}, Python RSS "
              f"x{f['py_rss_mib'] / b['py_rss_mib']:.2f}, JVM RSS x{f['jvm_rss_mib'] / b['jvm_rss_mib']:.2f}")
    if args.json:
        Path(args.json).write_text(json.dumps(figs, indent=1))
    return figs


if __name__ == "__main__":
    main()
