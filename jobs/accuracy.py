"""Detection accuracy against the simulator's ground truth (issue 5).

For each scenario preset: simulate it into ``<out>/<preset>``, run :func:`jobs.audit.run_audit` on it
(every input the simulator wrote, the controller's KRaft metadata log included; local Spark, Delta tables
written by delta-rs), then match the report findings to ``truth.jsonl``. Kinds are scored generically:
the metadata-log kinds (K1, K2, M5, P1) need nothing special.

A finding matches a truth line when they agree on the rule family (``S1e`` and ``S1`` are both ``S1``),
the kind, the subject and the event time:

- ``topic``, ``partition`` and ``group_id`` must be equal (both null counts as equal);
- ``client_id`` and ``broker`` must be equal where both sides name one (the rules do not name a client
  for commit findings, the truth does); brokers compare by node id (``3``, ``"3"`` and
  ``broker-3.kafka.internal:9092`` are the same broker; a packet capture's peer address such as
  ``10.0.0.13:9092`` names no node id, so it is not compared);
- the event times differ by at most ``tolerance_ms`` (default 1 s).

Each truth line matches at most one finding (the nearest in time). Per kind: truth n, found n, true
positives, precision = TP / found, recall = TP / truth. The measurement passes when every kind of
severity warning or above has recall 100 % and no warning+ finding is missing from the truth; info
findings are counted but never fail it (their kinds are listed when the truth has none of them).
"""

from __future__ import annotations

import datetime as dt
import json
import re
import time
from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

__all__ = [
    "DEFAULT_PRESETS",
    "audit_config",
    "SEVERE",
    "KindScore",
    "MatchResult",
    "PresetAccuracy",
    "format_accuracy",
    "match_findings",
    "measure_preset",
    "read_findings",
    "read_truth",
    "run_accuracy",
]

DEFAULT_PRESETS = ("accuracy-1", "accuracy-2", "accuracy-3")
SEVERE = frozenset({"warning", "error", "critical"})
SEVERITY_ORDER = ("critical", "error", "warning", "info")
REPORT_TABLES = ("stale_metadata", "fencing_violations", "spurious_offset_resets")
_BROKER_ID = re.compile(r"^(?:broker-)?(\d+)(?:[.:].*)?$")
_IP = re.compile(r"^\d+\.\d+\.\d+\.\d+(?::\d+)?$")


def _ms(value: Any) -> int:
    if isinstance(value, dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        return int(value.timestamp() * 1000)
    return int(value)


def _broker(value: Any) -> str | None:
    if value is None:
        return None
    text = str(value)
    if _IP.match(text):
        return None  # a capture's peer address: not comparable to a node id
    m = _BROKER_ID.match(text)
    return m.group(1) if m else text


def _norm(row: dict[str, Any]) -> dict[str, Any]:
    """The fields matching looks at, in one shape for truth lines and finding rows."""
    return {
        "rule": str(row["rule"])[:2],
        "kind": row["kind"],
        "severity": row["severity"],
        "ms": _ms(row["event_ts"]),
        "topic": row.get("topic"),
        "partition": None if row.get("partition") is None else int(row["partition"]),
        "group_id": row.get("group_id"),
        "client_id": row.get("client_id"),
        "broker": _broker(row.get("broker")),
        "row": row,
    }


def read_truth(path: str | Path) -> list[dict[str, Any]]:
    """The lines of a simulator's ``truth.jsonl``."""
    return [json.loads(line) for line in Path(path).read_text(encoding="utf-8").splitlines() if line.strip()]


def read_findings(config: Any) -> list[dict[str, Any]]:
    """Every row of the three report tables (read through delta-rs)."""
    from .sink import read_table_arrow

    rows: list[dict[str, Any]] = []
    for table in REPORT_TABLES:
        rows += read_table_arrow(table, config).to_pylist()
    return rows


@dataclass
class KindScore:
    rule: str
    kind: str
    severity: str
    truth: int = 0
    found: int = 0
    tp: int = 0

    @property
    def precision(self) -> float | None:
        return self.tp / self.found if self.found else None

    @property
    def recall(self) -> float | None:
        return self.tp / self.truth if self.truth else None


@dataclass
class MatchResult:
    """Per-kind scores, and the unmatched rows of either side (normalised, ``row`` = the original)."""

    scores: dict[tuple[str, str], KindScore]
    misses: list[dict[str, Any]]  # truth lines no finding matched
    extras: list[dict[str, Any]]  # findings no truth line matched

    @property
    def severe_misses(self) -> list[dict[str, Any]]:
        return [m for m in self.misses if m["severity"] in SEVERE]

    @property
    def severe_extras(self) -> list[dict[str, Any]]:
        return [m for m in self.extras if m["severity"] in SEVERE]

    @property
    def ok(self) -> bool:
        """Recall 100 % for every warning+ kind and no warning+ finding the truth lacks."""
        return not self.severe_misses and not self.severe_extras


def _same_subject(t: dict[str, Any], f: dict[str, Any]) -> bool:
    return all(t[k] is None or f[k] is None or t[k] == f[k] for k in ("client_id", "broker"))


def match_findings(
    truth: Iterable[dict[str, Any]], found: Iterable[dict[str, Any]], tolerance_ms: int = 1000
) -> MatchResult:
    """Match truth lines to findings (see the module docstring); each side is used at most once."""
    t_rows = [_norm(r) for r in truth]
    f_rows = [_norm(r) for r in found]
    scores: dict[tuple[str, str], KindScore] = {}
    for r in t_rows + f_rows:
        scores.setdefault((r["rule"], r["kind"]), KindScore(r["rule"], r["kind"], r["severity"]))
    buckets: dict[tuple, list[dict[str, Any]]] = defaultdict(list)
    for f in f_rows:
        scores[(f["rule"], f["kind"])].found += 1
        buckets[(f["rule"], f["kind"], f["topic"], f["partition"], f["group_id"])].append(f)
    used: set[int] = set()
    misses = []
    for t in sorted(t_rows, key=lambda r: r["ms"]):
        s = scores[(t["rule"], t["kind"])]
        s.truth += 1
        cands = [
            f
            for f in buckets.get((t["rule"], t["kind"], t["topic"], t["partition"], t["group_id"]), ())
            if id(f) not in used and abs(f["ms"] - t["ms"]) <= tolerance_ms and _same_subject(t, f)
        ]
        if not cands:
            misses.append(t)
            continue
        best = min(cands, key=lambda f: abs(f["ms"] - t["ms"]))
        used.add(id(best))
        s.tp += 1
    extras = [f for f in f_rows if id(f) not in used]
    return MatchResult(scores, misses, extras)


@dataclass
class PresetAccuracy:
    preset: str
    result: MatchResult
    seconds: float
    counts: dict[str, int] = field(default_factory=dict)


def audit_config(cluster: str, res: Any, tables: str | Path) -> Any:
    """The audit's config for a simulation ``res`` (:class:`epochlib.sim.SimResult`): every input it wrote,
    the controller's metadata log included, and Delta tables under ``tables`` written by delta-rs."""
    from .config import parse_config

    return parse_config({
        "cluster": cluster,
        "inputs": {"offsets": str(res.offsets), "logdirs": str(res.logdirs), "metadata": str(res.metadata),
                   "cluster_metadata": str(res.cluster_metadata)},
        "output": {"root": str(tables), "backend": "delta-rs"},
    })  # fmt: skip


def measure_preset(
    spark: Any,
    scenario: Any,
    out: str | Path,
    *,
    tolerance_ms: int = 1000,
    say: Callable[[str], None] = lambda _line: None,
    warn: Callable[[str], None] | None = None,
) -> PresetAccuracy:
    """Simulate ``scenario`` into ``out``, audit it and match the findings to its truth (``say``: progress lines;
    ``warn``: the run's warnings, by default as ``warning:`` progress lines)."""
    from epochlib import sim

    from .audit import run_audit
    from .config import Config, Output
    from .runlog import new_run_id
    from .sink import hold_run

    t0 = time.perf_counter()
    out = Path(out)
    run_id = new_run_id()
    # the run lease of the tables, taken before the inputs are simulated over another run's (run_audit shares it)
    with hold_run(Config(cluster=scenario.name, output=Output(root=str(out / "tables"))), run_id):
        say(f"{scenario.name}: simulating into {out}")
        res = sim.simulate(scenario, out / "inputs")
        config = audit_config(scenario.name, res, out / "tables")
        run_audit(spark, config, res.date_from, res.date_to, progress=lambda line: say(f"{scenario.name}: {line}"),
                  progress_interval=0, run_id=run_id,
                  warn=None if warn is None else (lambda text: warn(f"{scenario.name}: {text}")))
    result = match_findings(read_truth(res.truth), read_findings(config), tolerance_ms)
    return PresetAccuracy(scenario.name, result, time.perf_counter() - t0, dict(res.counts))


def _pct(v: float | None) -> str:
    return "—" if v is None else f"{100 * v:.1f}%"


def format_accuracy(results: Sequence[PresetAccuracy]) -> str:
    """The precision/recall table per kind (summed over the presets), totals per severity, then the
    warning+ misses and extras of each preset."""
    total: dict[tuple[str, str], KindScore] = {}
    for pa in results:
        for key, s in pa.result.scores.items():
            t = total.setdefault(key, KindScore(s.rule, s.kind, s.severity))
            t.truth, t.found, t.tp = t.truth + s.truth, t.found + s.found, t.tp + s.tp
    names = ", ".join(pa.preset for pa in results)
    head = "| rule | kind | severity | truth n | found n | TP | precision | recall |"
    lines = [f"Detection accuracy over {names}", "", head, "| --- | --- | --- | ---: | ---: | ---: | ---: | ---: |"]
    order = {s: i for i, s in enumerate(SEVERITY_ORDER)}
    for s in sorted(total.values(), key=lambda s: (order.get(s.severity, 9), s.rule, s.kind)):
        lines.append(f"| {s.rule} | {s.kind} | {s.severity} | {s.truth} | {s.found} | {s.tp} | {_pct(s.precision)} "
                     f"| {_pct(s.recall)} |")  # fmt: skip
    lines += ["", "| severity | truth n | found n | TP | precision | recall |", "| --- | ---: | ---: | ---: | ---: | ---: |"]
    for sev in SEVERITY_ORDER:
        group = [s for s in total.values() if s.severity == sev]
        if not group:
            continue
        agg = KindScore("", "", sev, sum(s.truth for s in group), sum(s.found for s in group), sum(s.tp for s in group))
        lines.append(f"| {sev} | {agg.truth} | {agg.found} | {agg.tp} | {_pct(agg.precision)} | {_pct(agg.recall)} |")
    lines.append("")
    for pa in results:
        r = pa.result
        verdict = "ok" if r.ok else "FAILED"
        lines.append(f"{pa.preset}: {verdict} ({pa.counts.get('commits', 0):,} commits, {pa.seconds:.0f} s)")
        for label, rows in (("missed", r.severe_misses), ("extra", r.severe_extras)):
            for m in rows:
                when = dt.datetime.fromtimestamp(m["ms"] / 1000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]
                subj = ", ".join(f"{k}={m[k]}" for k in ("topic", "partition", "group_id", "client_id", "broker")
                                 if m[k] is not None)  # fmt: skip
                lines.append(f"  {label}: {m['rule']} {m['kind']} at {when}Z ({subj})")
        info_extra = sorted({m["kind"] for m in r.extras if m["severity"] not in SEVERE})
        if info_extra:
            lines.append(f"  info findings without a truth line: {', '.join(info_extra)}")
    return "\n".join(lines)


def run_accuracy(
    presets: Sequence[str] = DEFAULT_PRESETS,
    out: str | Path = "epoch-audit-accuracy",
    *,
    master: str = "local[2]",
    tolerance_ms: int = 1000,
    spark: Any = None,
    scenarios: Sequence[Any] | None = None,
    say: Callable[[str], None] = lambda _line: None,
    warn: Callable[[str], None] | None = None,
) -> list[PresetAccuracy]:
    """Measure every preset (or the given ``scenarios``) in one Spark session; ``out/<preset>`` must not
    already hold a simulation (``say``, ``warn``: as :func:`measure_preset`)."""
    from epochlib import sim

    from .session import get_or_create_session

    todo = list(scenarios) if scenarios is not None else [sim.preset(p) for p in presets]
    if spark is None:
        spark = get_or_create_session(master=master, app_name="epoch-audit accuracy",
                                      extra_conf={"spark.sql.shuffle.partitions": "4"})  # fmt: skip
    root = Path(out)
    return [measure_preset(spark, sc, root / sc.name, tolerance_ms=tolerance_ms, say=say, warn=warn) for sc in todo]
