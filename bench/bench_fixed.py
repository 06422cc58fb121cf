"""Issue 16 items 1-2, measured as ratios within one script run (the "before" figures).

1. **Fixed cost** (one Python process, ``--child-fixed``): the wall time of creating a bare ``local[2]`` session and
   running a trivial job (``spark.range(1000).count()``), then, in the same process and session, ``run_audit`` over
   the ``demo`` simulator preset (simulated beforehand, not timed). Target: demo audit <= 2x bare start + job.
2. **End to end vs decode**: ``bench_e2e.py`` at 1 M and 10 M commits (fresh process each, ``--stages`` for the
   per-stage wall/CPU from Spark's event log), then ``bench_spark_decode.py --variants mapInArrow`` over the same
   number of commits (10 M) through Spark alone. Prints the e2e/decode wall ratio (target <= 5x) and the
   1 M -> 10 M CPU slope in us per commit (target <= 3).

    python bench/bench_fixed.py                           # both parts (10 M simulated once, ~10 min)
    python bench/bench_fixed.py --only fixed
    python bench/bench_fixed.py --only submit --repeat 2  # 3. spark-submit vs the CLI, whole commands
    python bench/bench_fixed.py --sizes 100000,1000000 --json /tmp/fixed.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent


def fixed_cost(master: str, stages: bool, full_jit: bool = False) -> dict:
    """In this process: bare session start + trivial job, then the demo audit on that session. The session
    is started as the CLI starts it, for the size of the inputs (``full_jit``: as for a large input)."""
    from bench_ingest import event_log_conf, java_pid, stage_report, tree_cpu_s

    from epochlib import sim
    from jobs.audit import run_audit
    from jobs.config import default_config
    from jobs.session import get_or_create_session, local_input_size

    root = Path(tempfile.mkdtemp(prefix="bench_fixed_"))
    try:
        scenario = sim.preset("demo")
        res = sim.simulate(scenario, root / "inputs")  # not timed
        start, end = res.date_range
        inputs = root / "inputs"
        config = default_config().with_overrides(
            offsets=str(inputs / "offsets"), logdirs=str(inputs / "logdirs"), metadata=str(inputs / "metadata"),
            cluster_metadata=str(res.cluster_metadata), output_root=str(root / "tables"))
        extra = {**dict(config.spark.conf), "spark.ui.enabled": "false"}
        if stages:
            extra.update(event_log_conf(root / "events"))
        t0 = time.perf_counter()
        c0 = time.process_time()
        size = None if full_jit else local_input_size(config)
        spark = get_or_create_session(master=master, app_name="bench-fixed", extra_conf=extra, input_bytes=size)
        n = spark.range(1000).count()
        bare = time.perf_counter() - t0
        jpid = java_pid()
        bare_cpu = (tree_cpu_s(jpid) if jpid else 0.0) + time.process_time() - c0
        assert n == 1000
        cpu1 = (tree_cpu_s(jpid) if jpid else 0.0) + time.process_time()
        t1 = time.perf_counter()
        out = run_audit(spark, config, start, end)
        audit = time.perf_counter() - t1
        audit_cpu = (tree_cpu_s(jpid) if jpid else 0.0) + time.process_time() - cpu1
        fig = {"bare_s": bare, "bare_cpu_s": bare_cpu, "demo_audit_s": audit, "demo_audit_cpu_s": audit_cpu,
               "ratio": audit / bare, "timings": dict(out.timings), "findings": out.findings}
        spark.stop()
        if stages:
            fig["stages"] = stage_report(root / "events")
        return fig
    finally:
        shutil.rmtree(root, ignore_errors=True)


def submit_vs_cli(master: str, repeat: int) -> dict:
    """The demo audit as an operator starts it: ``epoch-audit run --conf F`` (the CLI) against
    ``./spark-submit.sh --conf F -- --master M``, each a fresh process into a fresh output root, interleaved
    ``repeat`` times. Wall time of the whole command (JVM start included). Target: submit <= 1.2x CLI."""
    import statistics

    from epochlib import sim

    root = Path(tempfile.mkdtemp(prefix="bench_submit_"))
    try:
        res = sim.simulate(sim.preset("demo"), root / "inputs")  # not timed
        start, end = (str(d) for d in res.date_range)
        inputs = root / "inputs"
        cli = Path(sys.executable).with_name("epoch-audit")
        times: dict[str, list[float]] = {"cli": [], "spark-submit": []}
        for i in range(repeat):
            for how in times:
                conf = root / f"{how}-{i}.toml"
                conf.write_text(
                    f'cluster = "demo"\n[inputs]\noffsets = "{inputs / "offsets"}"\nlogdirs = "{inputs / "logdirs"}"\n'
                    f'metadata = "{inputs / "metadata"}"\ncluster_metadata = "{res.cluster_metadata}"\n'
                    f'[output]\nroot = "{root / f"tables-{how}-{i}"}"\n[spark]\nmaster = "{master}"\n')
                dates = ["--from", start, "--to", end]
                cmd = ([str(cli), "run", "--conf", str(conf), *dates, "--quiet"] if how == "cli" else
                       [str(HERE.parent / "spark-submit.sh"), "--conf", str(conf), *dates, "--", "--master", master])
                t = time.perf_counter()
                done = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "PYTHON": sys.executable})
                times[how].append(time.perf_counter() - t)
                if done.returncode:
                    raise SystemExit(f"{' '.join(cmd)} failed (exit {done.returncode}): {done.stderr[-2000:]}")
                print(f"  {how:<12} run {i + 1}: {times[how][-1]:.1f} s", flush=True)
        med = {k: statistics.median(v) for k, v in times.items()}
        return {"times": times, "median": med, "ratio": med["spark-submit"] / med["cli"]}
    finally:
        shutil.rmtree(root, ignore_errors=True)


def _child(args: list[str]) -> dict:
    """Run this script (or another bench script) in a fresh process; its last ``RESULT`` / JSON line back."""
    with subprocess.Popen([sys.executable, *args], stdout=subprocess.PIPE, text=True) as proc:
        result = None
        for line in proc.stdout:
            if line.startswith("RESULT "):
                result = json.loads(line[7:])
            else:
                print(line, end="", flush=True)
    if proc.returncode:
        raise SystemExit(f"{args} failed (exit {proc.returncode})")
    return result


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="fixed,e2e", help="any of fixed, e2e, submit (the spark-submit/CLI ratio)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved CLI / spark-submit pairs (submit)")
    ap.add_argument("--sizes", default="1000000,10000000", help="two commit counts: slope from the first to the last")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--stages", action="store_true", help="per-stage figures of the fixed-cost run too")
    ap.add_argument("--full-jit", action="store_true",
                    help="start the fixed-cost session as for a large input (no small-input JVM flags)")
    ap.add_argument("--json")
    ap.add_argument("--child-fixed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child_fixed:
        fig = fixed_cost(args.master, args.stages, args.full_jit)
        print("RESULT " + json.dumps(fig), flush=True)
        return fig
    only = set(args.only.split(","))
    out: dict = {}
    if "fixed" in only:
        f = _child([__file__, "--child-fixed", "--master", args.master] + (["--stages"] if args.stages else [])
                   + (["--full-jit"] if args.full_jit else []))
        out["fixed"] = f
        for line in f.get("stages", []):
            print(line)
        print(f"fixed cost: bare session + trivial job {f['bare_s']:.1f} s (CPU {f['bare_cpu_s']:.1f} s); demo "
              f"audit {f['demo_audit_s']:.1f} s (CPU {f['demo_audit_cpu_s']:.1f} s) = {f['ratio']:.2f}x "
              f"(target <= 2x); split {f['timings']}", flush=True)
    if "submit" in only:
        sub = submit_vs_cli(args.master, args.repeat)
        out["submit"] = sub
        print(f"demo audit, whole command: CLI median {sub['median']['cli']:.1f} s, spark-submit median "
              f"{sub['median']['spark-submit']:.1f} s = {sub['ratio']:.2f}x (target <= 1.2x)", flush=True)
    if "e2e" in only:
        sizes = [int(x) for x in args.sizes.split(",")]
        jpath = Path(tempfile.mkstemp(prefix="bench_fixed_e2e_", suffix=".json")[1])
        subprocess.run([sys.executable, str(HERE / "bench_e2e.py"), "--commits", args.sizes, "--stages",
                        "--master", args.master, "--json", str(jpath)], check=True)
        e2e = json.loads(jpath.read_text())
        dpath = Path(tempfile.mkstemp(prefix="bench_fixed_dec_", suffix=".json")[1])
        subprocess.run([sys.executable, str(HERE / "bench_spark_decode.py"), "--rows", str(sizes[-1]),
                        "--variants", "mapInArrow", "--repeat", "1", "--master", args.master,
                        "--json", str(dpath)], check=True)
        dec = json.loads(dpath.read_text())
        out["e2e"], out["decode"] = e2e, dec
        big, small = e2e[-1], e2e[0]
        dec_wall = dec["results"][0]["median"]
        print(f"end to end {big['commits']:,} commits: {big['wall_s']:.1f} s wall; Spark-only decode of as many "
              f"commits {dec_wall:.1f} s: {big['wall_s'] / dec_wall:.1f}x (target <= 5x)")
        slope = (big["cpu_s"] - small["cpu_s"]) / (big["commits"] - small["commits"]) * 1e6
        print(f"CPU slope {small['commits']:,} -> {big['commits']:,}: {slope:.1f} us/commit (target <= 3); "
              f"Python RSS {small['py_rss_mib']:.0f} -> {big['py_rss_mib']:.0f} MiB")
        out["ratio_e2e_decode"] = big["wall_s"] / dec_wall
        out["cpu_slope_us"] = slope
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
