"""Run every benchmark at documented sizes and write the results table into BENCHMARKS.md.

    python bench/run_all.py            # default sizes: ~10 min on an idle 2-core machine (20+ min when shared)
    python bench/run_all.py --quick    # small sizes (CI-like smoke run, ~4 minutes)
    python bench/run_all.py --full     # also the 10 M-commit end-to-end run (+ ~6 min simulation once, + ~5 min)

Each benchmark runs as its own process (its own Spark session and peak RSS) with ``--json`` into a temporary
folder. The generated part of BENCHMARKS.md sits between two marker comments and is replaced; the hand-written
analysis around it is kept. The last ``--full`` end-to-end figures are kept in ``--state`` (under /tmp) so a
default run can still show them, marked with their date; likewise ``--only`` reruns some benchmarks and keeps
the other rows from their last run at the same sizes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
BEGIN, END = "<!-- run_all:begin -->", "<!-- run_all:end -->"

SIZES = {  # per mode: the arguments of each benchmark
    "quick": {"spark": ["--rows", "300000", "--repeat", "3"], "codec": ["--quick"],
              "compare": ["--records", "50000"], "e2e": ["--commits", "100000"]},
    "default": {"spark": ["--rows", "2000000", "--repeat", "3"], "codec": [],
                "compare": ["--records", "300000"], "e2e": ["--commits", "1000000"]},
}
SPARK_TARGET = 1.25
E2E_TARGETS = {"wall_10m_s": 300.0, "ratio": 11.0, "rss_growth": 1.25}


def machine() -> dict:
    def first(path: str, key: str) -> str:
        try:
            for line in Path(path).read_text().splitlines():
                if line.startswith(key):
                    return line.split(":", 1)[1].strip()
        except OSError:
            pass
        return "?"

    import deltalake
    import numpy
    import pyarrow
    import pyspark

    mem_kib = first("/proc/meminfo", "MemTotal").split()[0]
    return {
        "nproc": os.cpu_count(), "memory": f"{int(mem_kib) / 2**20:.1f} GiB" if mem_kib.isdigit() else "?",
        "cpu": first("/proc/cpuinfo", "model name"), "python": platform.python_version(),
        "pyspark": pyspark.__version__, "pyarrow": pyarrow.__version__, "deltalake": deltalake.__version__,
        "numpy": numpy.__version__, "java": _java_version(), "date": dt.datetime.now(dt.timezone.utc).strftime(
            "%Y-%m-%d %H:%M UTC"), "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }


def _java_version() -> str:
    try:
        out = subprocess.run(["java", "-version"], capture_output=True, text=True, timeout=30).stderr
        return out.splitlines()[0].strip() if out else "?"
    except (OSError, subprocess.SubprocessError):
        return "?"


def run(script: str, args: list[str], out: Path) -> tuple[object, str, float]:
    """Run ``bench/<script>`` with ``args --json out``; returns (parsed JSON, the command as documented, seconds)."""
    shown = "python bench/" + script + ("" if not args else " " + " ".join(shlex.quote(a) for a in args))
    print(f"\n$ {shown}", flush=True)
    t = time.perf_counter()
    subprocess.run([sys.executable, str(HERE / script), *args, "--json", str(out)], cwd=ROOT, check=True)
    return json.loads(out.read_text()), shown, time.perf_counter() - t


def fmt_rate(x: float) -> str:
    if x >= 1e6:
        return f"{x / 1e6:.2f} M/s"
    return f"{x / 1e3:.0f} k/s" if x >= 1e4 else f"{x:,.0f}/s"


def met(ok: bool | None) -> str:
    return "—" if ok is None else ("**yes**" if ok else "**no**")


def spark_rows(res: dict, cmd: str) -> list[tuple]:
    rows = []
    by = {r["variant"]: r for r in res["results"]}
    base = by.get("sql")
    for v, r in by.items():
        measured = (f"best {r['best']:.2f} s ({fmt_rate(r['rate_best'])}), median {r['median']:.2f} s "
                    f"({fmt_rate(r['rate_median'])}); {r['ratio_best']:.2f}× / {r['ratio_median']:.2f}× of SQL "
                    f"(best / median wall), {r['ratio_cpu']:.2f}× in CPU")
        if v == "mapInArrow" and base:
            ok = r["ratio_best"] <= SPARK_TARGET and r["ratio_median"] <= SPARK_TARGET
            rows.append((f"decode {res['rows']:,} commits through Spark `local[2]`: **{v}**", cmd,
                         f"≤ {SPARK_TARGET}× SQL", measured, met(ok)))
        else:
            rows.append((f"decode {res['rows']:,} commits through Spark `local[2]`: {v}", cmd,
                         "ceiling" if v == "sql" else "—", measured, "—"))
    return rows


def codec_rows(res: list[dict], cmd: str) -> list[tuple]:
    rows = []
    for r in res:
        if r["family"] == "metadata" and r["unit"] == "rows":
            continue
        what = f"codec, one core: {r['family']} — {r['case']} ({r['impl']})"
        measured = f"{fmt_rate(r['rate'])} {r['unit']} ({r['units']:,} in {r['cpu_s']:.3f} CPU-s)"
        if r.get("rows_per_s"):
            measured += f"; {fmt_rate(r['rows_per_s'])} observation rows"
        target = f"≥ {fmt_rate(r['target'])}" if "target" in r else "—"
        rows.append((what, cmd, target, measured, met(r.get("met"))))
    return rows


def compare_rows(res: list[dict], cmd: str) -> list[tuple]:
    return [(f"same segment ({r['records']:,} commits, {r['mib']:.0f} MiB), one core: {r['reader']}", cmd, "—",
             f"{fmt_rate(r['rate'])} records ({r['x_base']:.1f}× kafka-python)", "—") for r in res]


def e2e_rows(figs: list[dict], cmd: str, note: str = "") -> list[tuple]:
    rows = []
    for f in figs:
        n = f["commits"]
        target, ok = "—", None
        if n >= 10_000_000:
            target, ok = f"≤ {E2E_TARGETS['wall_10m_s'] / 60:.0f} min", f["wall_s"] <= E2E_TARGETS["wall_10m_s"]
        rows.append((f"end-to-end `run_audit`, {n:,} commits, `local[2]`{note}", cmd, target,
                     f"{f['wall_s']:.0f} s (ingest {f['ingest_s']:.0f} s, reports {f['reports_s']:.0f} s), "
                     f"{fmt_rate(f['rate'])} commits; {fmt_rate(f['rate_cpu'])} per CPU-s; peak RSS Python "
                     f"{f['py_rss_mib']:.0f} MiB, JVM {f['jvm_rss_mib']:.0f} MiB", met(ok)))
    if len(figs) >= 2:
        a, b = figs[0], figs[-1]
        ratio = b["wall_s"] / a["wall_s"]
        rows.append((f"end-to-end scaling {b['commits']:,} / {a['commits']:,} commits{note}", cmd,
                     f"wall ≤ {E2E_TARGETS['ratio']:.0f}×", f"{ratio:.2f}× wall, {b['cpu_s'] / a['cpu_s']:.2f}× CPU",
                     met(ratio <= E2E_TARGETS["ratio"])))
        gp, gj = b["py_rss_mib"] / a["py_rss_mib"], b["jvm_rss_mib"] / a["jvm_rss_mib"]
        rows.append((f"driver peak RSS, {b['commits']:,} vs {a['commits']:,} commits{note}", cmd,
                     f"flat (≤ {E2E_TARGETS['rss_growth']}×)",
                     f"Python {a['py_rss_mib']:.0f} → {b['py_rss_mib']:.0f} MiB ({gp:.2f}×), JVM "
                     f"{a['jvm_rss_mib']:.0f} → {b['jvm_rss_mib']:.0f} MiB ({gj:.2f}×)",
                     met(gp <= E2E_TARGETS["rss_growth"] and gj <= E2E_TARGETS["rss_growth"])))
    return rows


def render(m: dict, mode: str, rows: list[tuple], total_s: float) -> str:
    esc = lambda s: str(s).replace("|", "\\|")  # noqa: E731
    lines = [
        BEGIN,
        f"_Written by `python bench/run_all.py{' --quick' if mode == 'quick' else ''}` on {m['date']} "
        f"({total_s / 60:.1f} min of benchmarks in that invocation; rows marked \"run of …\" come from the last run "
        f"of that benchmark at these sizes)._",
        "",
        "| machine | |", "| --- | --- |",
        f"| CPUs (`nproc`) | {m['nproc']} |", f"| memory | {m['memory']} |", f"| CPU model | {m['cpu']} |",
        f"| Python / Java | {m['python']} / {m['java']} |",
        f"| pyspark / pyarrow / deltalake / numpy | {m['pyspark']} / {m['pyarrow']} / {m['deltalake']} / "
        f"{m['numpy']} |",
        f"| load average at start (shared machine) | {m['load']} |",
        "",
        "| what | command | target | measured | met? |", "| --- | --- | --- | --- | --- |",
    ]
    lines += [f"| {esc(w)} | `{esc(c)}` | {esc(t)} | {esc(v)} | {ok} |" for w, c, t, v, ok in rows]
    lines.append(END)
    return "\n".join(lines)


def write_benchmarks(path: Path, block: str) -> None:
    text = path.read_text() if path.exists() else "# Benchmarks\n\n" + BEGIN + "\n" + END + "\n"
    if BEGIN in text and END in text:
        head, rest = text.split(BEGIN, 1)
        text = head + block + rest.split(END, 1)[1]
    else:
        text = text.rstrip() + "\n\n" + block + "\n"
    path.write_text(text)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    g = ap.add_mutually_exclusive_group()
    g.add_argument("--quick", action="store_true", help="small sizes (smoke run)")
    g.add_argument("--full", action="store_true", help="also the 10 M-commit end-to-end run")
    ap.add_argument("--only", default="spark,codec,compare,e2e", help="comma-separated subset")
    ap.add_argument("--out", default=str(ROOT / "BENCHMARKS.md"))
    ap.add_argument("--state", default="/tmp/epoch-audit-bench-state", help="keeps the last --full e2e figures")
    args = ap.parse_args()
    mode = "quick" if args.quick else "default"
    sizes = SIZES[mode]
    only = set(args.only.split(","))
    m = machine()
    t0 = time.perf_counter()
    rows: list[tuple] = []
    state = Path(args.state)
    state.mkdir(parents=True, exist_ok=True)
    steps = [("codec", "bench_codec.py", sizes["codec"], codec_rows),
             ("compare", "bench_compare.py", sizes["compare"], compare_rows),
             ("spark", "bench_spark_decode.py", sizes["spark"], spark_rows),
             ("e2e", "bench_e2e.py", ["--commits", "1000000,10000000"] if args.full else sizes["e2e"], e2e_rows)]
    with tempfile.TemporaryDirectory(prefix="bench_all_") as tmp:
        for name, script, bargs, to_rows in steps:
            if name in only:
                res, cmd, _ = run(script, bargs, Path(tmp) / f"{name}.json")
                rows += to_rows(res, cmd)
                saved = {"date": m["date"], "cmd": cmd, "res": res, "mode": mode}
                full_e2e = name == "e2e" and args.full
                (state / ("e2e-full.json" if full_e2e else f"{name}-{mode}.json")).write_text(json.dumps(saved))
                if full_e2e:
                    continue
            elif (state / f"{name}-{mode}.json").exists():  # --only: the other rows from their last run
                last = json.loads((state / f"{name}-{mode}.json").read_text())
                rows += [(w + f" (run of {last['date']})", *rest) for w, *rest in to_rows(last["res"], last["cmd"])]
            if name == "e2e" and not args.full and (state / "e2e-full.json").exists():
                last = json.loads((state / "e2e-full.json").read_text())
                rows += e2e_rows(last["res"], last["cmd"], note=f" (last `--full` run, {last['date']})")
    total = time.perf_counter() - t0
    write_benchmarks(Path(args.out), render(m, "full" if args.full else mode, rows, total))
    print(f"\nwrote {args.out} ({len(rows)} rows) in {total / 60:.1f} min")


if __name__ == "__main__":
    main()
