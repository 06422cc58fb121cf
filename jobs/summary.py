"""Summaries of findings over a date range: the table printed after a run, by ``report`` and ``demo``.

Findings are few compared with the evidence, so the gold tables are read through delta-rs into
Arrow (filtered by cluster and ``event_date`` partitions) without Spark.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from dataclasses import dataclass, field

import pyarrow as pa

from .config import Config

__all__ = ["REPORT_TABLES", "Summary", "summarise", "format_summary", "load_findings"]

REPORT_TABLES = ("stale_metadata", "fencing_violations", "spurious_offset_resets")
SEVERITIES = ("critical", "error", "warning", "info")


@dataclass
class Summary:
    """Counts of findings in a range: by (report, kind, severity) and the subjects seen most."""

    cluster: str
    date_from: dt.date
    date_to: dt.date
    by_kind: Counter = field(default_factory=Counter)  # (report, rule, kind, severity) -> n
    top: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # broker/client/group -> [(name, n)]
    tables: dict[str, str] = field(default_factory=dict)  # report -> location
    missing: list[str] = field(default_factory=list)  # reports with no table yet

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def count(self, *, severity_at_least: str = "info") -> int:
        """Findings at or above a severity."""
        keep = SEVERITIES[: SEVERITIES.index(severity_at_least) + 1]
        return sum(n for (_r, _rule, _k, sev), n in self.by_kind.items() if sev in keep)


def load_findings(config: Config, report: str, date_from: dt.date, date_to: dt.date) -> pa.Table | None:
    """The findings of one report table in the range, or None when the table does not exist."""
    from .errors import SinkError
    from .sink import read_table_arrow

    try:
        return read_table_arrow(report, config, cluster=config.cluster, date_range=(date_from, date_to))
    except SinkError:
        return None


def summarise(config: Config, date_from: dt.date, date_to: dt.date, *, top_n: int = 5) -> Summary:
    """Read the three report tables for ``[date_from, date_to]`` and count their findings."""
    out = Summary(config.cluster, date_from, date_to)
    subjects: dict[str, Counter] = {"broker": Counter(), "client_id": Counter(), "group_id": Counter()}
    for report in REPORT_TABLES:
        out.tables[report] = config.output.table_location(report)
        t = load_findings(config, report, date_from, date_to)
        if t is None:
            out.missing.append(report)
            continue
        cols = t.select(["rule", "kind", "severity", "broker", "client_id", "group_id"]).to_pydict()
        for rule, kind, sev in zip(cols["rule"], cols["kind"], cols["severity"], strict=True):
            out.by_kind[(report, rule, kind, sev)] += 1
        for name, counter in subjects.items():
            counter.update(v for v in cols[name] if v)
    out.top = {name: c.most_common(top_n) for name, c in subjects.items() if c}
    return out


def format_summary(s: Summary) -> str:
    """The summary as a plain-text table (what the CLI prints)."""
    lines = [f"Findings for cluster {s.cluster}, {s.date_from} .. {s.date_to}: {s.total} "
             f"({s.count(severity_at_least='warning')} warning or worse)"]
    if s.by_kind:
        order = {sev: i for i, sev in enumerate(SEVERITIES)}
        rows = sorted(s.by_kind.items(), key=lambda kv: (kv[0][0], order.get(kv[0][3], 9), kv[0][1], kv[0][2]))
        w_report = max(len("report"), *(len(k[0]) for k, _ in rows))
        w_kind = max(len("kind"), *(len(f"{k[1]} {k[2]}") for k, _ in rows))
        lines.append(f"  {'report':<{w_report}}  {'rule kind':<{w_kind}}  {'severity':<8}  {'count':>6}")
        for (report, rule, kind, sev), n in rows:
            lines.append(f"  {report:<{w_report}}  {rule + ' ' + kind:<{w_kind}}  {sev:<8}  {n:>6}")
    else:
        lines.append("  no findings")
    for name, label in (("broker", "brokers"), ("client_id", "clients"), ("group_id", "groups")):
        if s.top.get(name):
            lines.append(f"  top {label}: " + ", ".join(f"{k} ({n})" for k, n in s.top[name]))
    if s.missing:
        lines.append("  (no table yet: " + ", ".join(s.missing) + ")")
    return "\n".join(lines)
