"""Issue 16 items 1-2, measured as ratios within one script run (the "before" figures).

1. **Fixed cost** (one Python process, ``--child-fixed``): the wall time of creating a bare ``local[2]`` session and
   running a trivial job (``spark.range(1000).count()``), then, in the same process and session, ``run_audit`` over
   the ``demo`` simulator preset (simulated beforehand, not timed). Target: demo audit <= 2x bare start + job.
2. **End to end vs decode**: ``bench_e2e.py`` at 1 M and 10 M commits (fresh process each, ``--stages`` for the
   per-stage wall/CPU from Spark's event log) and ``bench_spark_decode.py --variants mapInArrow`` over the same
   number of commits (10 M) through Spark alone, interleaved: decode, then per ``--rounds`` an end-to-end run and
   a decode. Each round's ratio is its 10 M wall over the mean of the two decodes around it, so a shared host that
   slows down for minutes moves both sides of the ratio (the same decode took 17.4 s and 26.3 s within one run of
   this script: BENCHMARKS.md, fifteenth round). Prints each round's ratio and their median (target <= 5x), and
   the 1 M -> 10 M CPU slope in us per commit (target <= 3).

    python bench/bench_fixed.py                           # both parts (10 M simulated once, ~10 min)
    python bench/bench_fixed.py --only fixed
    python bench/bench_fixed.py --only fixed --class-data off  # both sessions without the class-data archive
    python bench/bench_fixed.py --only fixed --again 2     # and the same audit twice more, warm
    python bench/bench_fixed.py --only e2e --rounds 3      # 3 end-to-end runs between 4 decodes
    python bench/bench_fixed.py --only submit --repeat 2  # 3. spark-submit vs the CLI, whole commands
    python bench/bench_fixed.py --sizes 100000,1000000 --json /tmp/fixed.json
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

HERE = Path(__file__).resolve().parent


def fixed_cost(master: str, stages: bool, full_jit: bool = False, class_data: bool = True, again: int = 0) -> dict:
    """In this process: bare session start + trivial job, then the demo audit on that session. The session
    is started as the CLI starts it, for the size of the inputs (``full_jit``: as for a large input), with the
    class-data archive of :mod:`jobs.class_cache` when there is one (``class_data=False``: without it, as every
    session started before the seventeenth round of issue 16, when the target was set). ``again``: that many more
    audits of the same inputs in the same session, each into a fresh output root: the same work with the JVM and
    the Python workers warm, which shows how much of the first audit is their warm-up."""
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
        from jobs import class_cache

        archive = class_cache.archive_for_session("use") if class_data else None  # what the session will map
        t0 = time.perf_counter()
        c0 = time.process_time()
        size = None if full_jit else local_input_size(config)
        spark = get_or_create_session(master=master, app_name="bench-fixed", extra_conf=extra, input_bytes=size,
                                      class_data="use" if class_data else None)
        n = spark.range(1000).count()
        bare = time.perf_counter() - t0
        jpid = java_pid()

        def cpu() -> float:  # the JVM's process tree (with the Python workers) and this process
            return (tree_cpu_s(jpid) if jpid else 0.0) + time.process_time()

        bare_cpu = cpu() - c0
        assert n == 1000

        def timed_audit(output_root: Path | None = None) -> tuple:
            cfg = config if output_root is None else config.with_overrides(output_root=str(output_root))
            c, t = cpu(), time.perf_counter()
            done = run_audit(spark, cfg, start, end)
            return done, time.perf_counter() - t, cpu() - c

        out, audit, audit_cpu = timed_audit()
        fig = {"bare_s": bare, "bare_cpu_s": bare_cpu, "demo_audit_s": audit, "demo_audit_cpu_s": audit_cpu,
               "ratio": audit / bare, "timings": dict(out.timings), "findings": out.findings,
               "class_data_archive": str(archive.path) if archive else None, "again": []}
        for i in range(again):
            rerun, wall, wall_cpu = timed_audit(root / f"tables-again-{i + 1}")
            assert rerun.findings == out.findings, (rerun.findings, out.findings)
            fig["again"].append({"demo_audit_s": wall, "ratio": wall / bare, "demo_audit_cpu_s": wall_cpu})
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



def _decode_wall(rows: int, master: str) -> float:
    """Median wall of decoding ``rows`` commits through Spark alone (``bench_spark_decode.py``, fresh process)."""
    path = Path(tempfile.mkstemp(prefix="bench_fixed_dec_", suffix=".json")[1])
    subprocess.run([sys.executable, str(HERE / "bench_spark_decode.py"), "--rows", str(rows), "--variants",
                    "mapInArrow", "--repeat", "1", "--master", master, "--json", str(path)], check=True)
    return json.loads(path.read_text())["results"][0]["median"]


def e2e_vs_decode(sizes: list[int], master: str, rounds: int) -> dict:
    """Item 2: ``rounds`` end-to-end runs over ``sizes`` commits, each between two Spark-only decodes of the
    largest size; each round's ratio is its largest run's wall over the mean of the decodes around it."""
    from jobs import class_cache

    archive = class_cache.archive_for_session("use")  # what both sides' sessions map (the CLI's runs too)
    print(f"class-data archive: {archive.path if archive else 'none (turned off, or no CLI run has made one)'}",
          flush=True)
    decodes = [_decode_wall(sizes[-1], master)]
    runs, ratios, slopes = [], [], []
    for r in range(rounds):
        path = Path(tempfile.mkstemp(prefix="bench_fixed_e2e_", suffix=".json")[1])
        subprocess.run([sys.executable, str(HERE / "bench_e2e.py"), "--commits", ",".join(map(str, sizes)),
                        "--stages", "--master", master, "--json", str(path)], check=True)
        e2e = json.loads(path.read_text())
        decodes.append(_decode_wall(sizes[-1], master))
        big, small = e2e[-1], e2e[0]
        dec = (decodes[-2] + decodes[-1]) / 2
        ratios.append(big["wall_s"] / dec)
        if big["commits"] != small["commits"]:
            slopes.append((big["cpu_s"] - small["cpu_s"]) / (big["commits"] - small["commits"]) * 1e6)
        runs.append(e2e)
        print(f"round {r + 1}: end to end {big['commits']:,} commits {big['wall_s']:.1f} s wall; Spark-only decode "
              f"of as many commits {decodes[-2]:.1f} s before, {decodes[-1]:.1f} s after: {ratios[-1]:.1f}x "
              f"(target <= 5x)" + (f"; CPU slope {small['commits']:,} -> {big['commits']:,}: {slopes[-1]:.1f} "
                                   f"us/commit (target <= 3)" if slopes else "")
              + f"; Python RSS {small['py_rss_mib']:.0f} -> {big['py_rss_mib']:.0f} MiB", flush=True)
    med = statistics.median(ratios)
    print(f"end to end / decode over {rounds} round(s): {', '.join(f'{x:.1f}x' for x in ratios)}; median {med:.1f}x"
          + (f"; CPU slope median {statistics.median(slopes):.1f} us/commit" if slopes else ""), flush=True)
    return {"e2e": runs, "decode_s": decodes, "ratios": ratios, "ratio_e2e_decode": med,
            "class_data_archive": str(archive.path) if archive else None,
            **({"cpu_slope_us": statistics.median(slopes)} if slopes else {})}


def main(argv: list[str] | None = None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="fixed,e2e", help="any of fixed, e2e, submit (the spark-submit/CLI ratio)")
    ap.add_argument("--repeat", type=int, default=2, help="interleaved CLI / spark-submit pairs (submit)")
    ap.add_argument("--sizes", default="1000000,10000000", help="two commit counts: slope from the first to the last")
    ap.add_argument("--rounds", type=int, default=1,
                    help="e2e: end-to-end runs, each after a Spark-only decode and followed by one")
    ap.add_argument("--master", default="local[2]")
    ap.add_argument("--stages", action="store_true", help="per-stage figures of the fixed-cost run too")
    ap.add_argument("--full-jit", action="store_true",
                    help="start the fixed-cost session as for a large input (no small-input JVM flags)")
    ap.add_argument("--class-data", choices=("use", "off"), default="use",
                    help="fixed: the sessions with the class-data archive when there is one (as the CLI starts "
                         "them), or without it (as before it existed); both sides of the ratio alike")
    ap.add_argument("--again", type=int, default=0, metavar="N",
                    help="fixed: N more demo audits in the same session (warm JVM and workers), each reported")
    ap.add_argument("--json")
    ap.add_argument("--child-fixed", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.rounds < 1:
        ap.error("--rounds must be at least 1")
    if args.again < 0:
        ap.error("--again must be at least 0")
    if args.child_fixed:
        fig = fixed_cost(args.master, args.stages, args.full_jit, args.class_data == "use", args.again)
        print("RESULT " + json.dumps(fig), flush=True)
        return fig
    only = set(args.only.split(","))
    out: dict = {}
    if "fixed" in only:
        f = _child([__file__, "--child-fixed", "--master", args.master] + (["--stages"] if args.stages else [])
                   + (["--full-jit"] if args.full_jit else []) + ["--class-data", args.class_data]
                   + ["--again", str(args.again)])
        out["fixed"] = f
        for line in f.get("stages", []):
            print(line)
        print(f"fixed cost: bare session + trivial job {f['bare_s']:.1f} s (CPU {f['bare_cpu_s']:.1f} s); demo "
              f"audit {f['demo_audit_s']:.1f} s (CPU {f['demo_audit_cpu_s']:.1f} s) = {f['ratio']:.2f}x "
              f"(target <= 2x); class-data archive: {f['class_data_archive'] or 'none'}; split {f['timings']}",
              flush=True)
        for i, a in enumerate(f.get("again", []), 1):
            print(f"  the same audit again ({i + 1} in this session, warm JVM and workers): {a['demo_audit_s']:.1f} s "
                  f"(CPU {a['demo_audit_cpu_s']:.1f} s) = {a['ratio']:.2f}x", flush=True)
    if "submit" in only:
        sub = submit_vs_cli(args.master, args.repeat)
        out["submit"] = sub
        print(f"demo audit, whole command: CLI median {sub['median']['cli']:.1f} s, spark-submit median "
              f"{sub['median']['spark-submit']:.1f} s = {sub['ratio']:.2f}x (target <= 1.2x)", flush=True)
    if "e2e" in only:
        out.update(e2e_vs_decode([int(x) for x in args.sizes.split(",")], args.master, args.rounds))
    if args.json:
        Path(args.json).write_text(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
