"""Summaries of findings over a date range: the table printed after a run, by ``report`` and ``demo``,
and the rows of ``epoch-audit findings``.

Findings are few compared with the evidence, so the gold tables are read through delta-rs into
Arrow (filtered by cluster and ``event_date`` partitions) without Spark. A table that does not exist
is noted (``Summary.missing``); a location that cannot be reached (object store down, bad
credentials) raises :class:`~jobs.errors.InputError`, and a table that is there but cannot be read (a damaged
Delta log or data file) :class:`~jobs.errors.SinkError`, instead of passing for "no findings".

The findings are also grouped into incidents (:func:`epochlib.incidents.group_incidents`): the terminal
summary lists them, the JSON summary (:func:`jobs.alerts.run_document`) carries them with their re-check
commands, and the HTML report draws the same list.
"""

from __future__ import annotations

import datetime as dt
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from epochlib.incidents import Incident, group_incidents, iso, printable

from .config import Config
from .runlog import spans

__all__ = [
    "REPORT_TABLES",
    "SEVERITIES",
    "Coverage",
    "Summary",
    "at_least",
    "export_fields",
    "finding_subject",
    "finding_units",
    "format_coverage",
    "format_incidents",
    "format_summary",
    "input_roots",
    "load_findings",
    "report_rows",
    "run_coverage",
    "spans",
    "summarise",
]

#: Incidents listed by :func:`format_summary` (all of them are in the JSON summary and the HTML report).
MAX_LISTED_INCIDENTS = 25

REPORT_TABLES = ("stale_metadata", "fencing_violations", "spurious_offset_resets")
SEVERITIES = ("critical", "error", "warning", "info")
#: Columns every finding row is reduced to for the top list, ``findings`` and the JSON summary.
FINDING_FIELDS = ("report", "finding_id", "event_date", "event_ts", "rule", "kind", "severity", "topic",
                  "partition", "group_id", "client_id", "broker", "detail", "subject", "units")
#: Report-specific numbers that say how much a finding matters (column -> unit label).
_UNIT_COLUMNS = (
    ("records_reread", "records re-read"),
    ("records_skipped", "records skipped"),
    ("records_affected", "records affected"),
    ("staleness_ms", "ms stale"),
)


def at_least(severity: str) -> tuple[str, ...]:
    """The severities at or above ``severity`` (``warning`` -> critical, error, warning)."""
    return SEVERITIES[: SEVERITIES.index(severity) + 1]


@dataclass
class Summary:
    """Counts of findings in a range: by (report, kind, severity), per day, and the top findings."""

    cluster: str
    date_from: dt.date
    date_to: dt.date
    by_kind: Counter = field(default_factory=Counter)  # (report, rule, kind, severity) -> n
    by_day: Counter = field(default_factory=Counter)  # (event_date, severity) -> n
    top: dict[str, list[tuple[str, int]]] = field(default_factory=dict)  # broker/client/group -> [(name, n)]
    top_findings: list[dict[str, Any]] = field(default_factory=list)  # most severe first, FINDING_FIELDS
    tables: dict[str, str] = field(default_factory=dict)  # report -> location
    missing: list[str] = field(default_factory=list)  # reports with no table yet
    incidents: list[Incident] = field(default_factory=list)  # most severe first
    roots: dict[str, str | None] = field(default_factory=dict)  # input roots, for re-check commands

    @property
    def total(self) -> int:
        return sum(self.by_kind.values())

    def count(self, *, severity_at_least: str = "info") -> int:
        """Findings at or above a severity."""
        keep = at_least(severity_at_least)
        return sum(n for (_r, _rule, _k, sev), n in self.by_kind.items() if sev in keep)

    def by_severity(self) -> dict[str, int]:
        out = dict.fromkeys(SEVERITIES, 0)
        for (_r, _rule, _k, sev), n in self.by_kind.items():
            out[sev] = out.get(sev, 0) + n
        return out


def load_findings(config: Config, report: str, date_from: dt.date, date_to: dt.date) -> pa.Table | None:
    """The findings of one report table in the range, or None when the table does not exist.

    Raises:
        InputError: the output location cannot be reached (not the same as "no table yet").
        SinkError: the table is there but cannot be read (a damaged Delta log or data file): not "no findings".
    """
    from .sink import read_stored_table

    return read_stored_table(report, config, cluster=config.cluster, date_range=(date_from, date_to))


def finding_subject(row: dict[str, Any]) -> str:
    """What a finding is about, as a person names it: ``orders-0, group g1, broker 2, client c``."""
    parts = []
    if row.get("topic") is not None:
        parts.append(f"{row['topic']}-{row['partition']}" if row.get("partition") is not None else row["topic"])
    for key, label in (("group_id", "group"), ("broker", "broker"), ("client_id", "client")):
        if row.get(key):
            parts.append(f"{label} {row[key]}")
    return ", ".join(parts) or "(no subject)"


def finding_units(row: dict[str, Any]) -> str:
    """How much a finding matters in its own units (``1,200 records re-read``), '' when none apply."""
    return ", ".join(f"{int(row[c]):,} {label}" for c, label in _UNIT_COLUMNS if row.get(c) is not None)


def finding_rows(report: str, table: pa.Table, *, every_column: bool = False) -> list[dict[str, Any]]:
    """A report table's rows reduced to :data:`FINDING_FIELDS` (subject and units spelled out); with
    ``every_column``, followed by the table's other columns (the evidence, the topic id, the correlated and cause
    finding ids, the correlation id, the report's own numbers: what ``findings --format json|csv`` exports)."""
    out = []
    for row in table.to_pylist():
        row["report"] = report
        row["subject"] = finding_subject(row)
        row["units"] = finding_units(row)
        kept = {k: row.get(k) for k in FINDING_FIELDS}
        if every_column:
            kept.update((k, v) for k, v in row.items() if k not in kept)
        out.append(kept)
    return out


def export_fields(rows: Iterable[Mapping[str, Any]] = ()) -> list[str]:
    """The columns of ``findings --format csv``: :data:`FINDING_FIELDS`, then every other column of the three
    report tables (their schemas, so that the header does not depend on which reports found something), then any
    column ``rows`` hold beyond those (a table written by a newer version)."""
    from .schemas import arrow_schema

    fields = dict.fromkeys(FINDING_FIELDS)
    for report in REPORT_TABLES:
        fields.update(dict.fromkeys(arrow_schema(report).names))
    for row in rows:
        fields.update(dict.fromkeys(row))
    return list(fields)


def report_rows(tables: Mapping[str, pa.Table | None]) -> list[dict[str, Any]]:
    """Every finding of the report tables, all columns, with its ``report`` name (the input of
    :func:`epochlib.incidents.group_incidents`)."""
    rows: list[dict[str, Any]] = []
    for report in REPORT_TABLES:
        t = tables.get(report)
        if t is None or t.num_rows == 0:
            continue
        for r in t.to_pylist():
            r["report"] = report
            rows.append(r)
    return rows


def input_roots(config: Config, date_from: dt.date | None = None,
                date_to: dt.date | None = None) -> dict[str, str | None]:
    """The input roots by name, in their native form (re-check commands write evidence paths relative to them): the
    configured ones, and, for a range (``report``, which needs no inputs), the others as the latest run over it
    recorded them (``audit_runs.input_root``)."""
    from .fs import native_uri

    names = config.inputs.LOCATIONS
    roots = {n: getattr(config.inputs, n) for n in names if getattr(config.inputs, n, None)}
    if date_from is not None and date_to is not None and len(roots) < len(names):
        roots = {**recorded_roots(config, date_from, date_to), **roots}
    # in the form the evidence names its files (``<native root>/<rel>``: ``s3a://`` as ``s3://``, ``dbfs:/`` as ``/dbfs``)
    return {n: native_uri(r) for n, r in roots.items()}


def recorded_roots(config: Config, date_from: dt.date, date_to: dt.date) -> dict[str, str]:
    """Each source kind's input root as recorded by the latest run of the cluster whose range overlaps
    ``[date_from, date_to]`` (empty without ``audit_runs`` or from rows older than the column)."""
    from .sink import read_table_arrow

    try:
        t = read_table_arrow("audit_runs", config, cluster=config.cluster)
    except Exception:  # noqa: BLE001 - the roots only shorten the commands' paths: a report never fails for them
        return {}
    if t is None or "input_root" not in t.column_names:
        return {}
    best: dict[str, tuple[Any, str]] = {}
    for r in t.select(["range_from", "range_to", "finished_at", "source_kind", "input_root"]).to_pylist():
        if not r["input_root"] or not r["source_kind"] or r["range_from"] > date_to or r["range_to"] < date_from:
            continue
        key = r["finished_at"] or r["range_to"]
        if r["source_kind"] not in best or key > best[r["source_kind"]][0]:
            best[r["source_kind"]] = (key, r["input_root"])
    return {kind: root for kind, (_, root) in best.items()}


def _rank(row: dict[str, Any]) -> tuple:
    sev = SEVERITIES.index(row["severity"]) if row.get("severity") in SEVERITIES else len(SEVERITIES)
    ts = row.get("event_ts")
    return (sev, -(ts.timestamp() if ts is not None else 0), row.get("finding_id") or "")


_STATUS_RANK = {"ok": 0, "partial": 1, "no_input": 2}


@dataclass
class Coverage:
    """What the finished runs in ``audit_runs`` say of each day of a range (``report`` prints it): the days no
    finished run covers, the worst status of the runs that last covered the others, and per source the days
    without rows and the runs that quarantined units."""

    runs: int = 0
    not_audited: list[dt.date] = field(default_factory=list)
    status: str | None = None
    notes: list[str] = field(default_factory=list)


def run_coverage(config: Config, date_from: dt.date, date_to: dt.date) -> Coverage | None:
    """Which days of the range the cluster's finished runs covered, as each day's latest run recorded them; None
    when ``audit_runs`` cannot be read without Spark (catalog tables) or does not exist.

    Raises:
        InputError, SinkError: as :func:`jobs.sink.read_stored_table` (unreachable; there but unreadable).
    """
    from .runlog import no_input_on, unit_count
    from .sink import read_stored_table

    if config.output.root is None:
        return None
    runs = read_stored_table("audit_runs", config)
    if runs is None:
        return None
    rows = [r for r in runs.to_pylist() if r["cluster"] == config.cluster and r["status"] not in (None, "failed")
            and r["range_from"] is not None and r["range_to"] is not None
            and r["range_from"] <= date_to and r["range_to"] >= date_from]
    by_run: dict[str, list[dict[str, Any]]] = {}
    for r in rows:
        by_run.setdefault(r["run_id"], []).append(r)
    newest = sorted(by_run, key=lambda k: max(r["finished_at"] or r["started_at"] for r in by_run[k]), reverse=True)
    cov = Coverage()
    chosen: dict[str, list[dt.date]] = {}  # run id -> the days it is the latest run of
    day = date_from
    while day <= date_to:
        run = next((k for k in newest if by_run[k][0]["range_from"] <= day <= by_run[k][0]["range_to"]), None)
        if run is None:
            cov.not_audited.append(day)
        else:
            chosen.setdefault(run, []).append(day)
        day += dt.timedelta(days=1)
    cov.runs = len(chosen)
    gaps: dict[str, set[dt.date]] = {}
    quarantined: dict[str, list[str]] = {}
    unread: dict[str, dict[str, list[dt.date]]] = {}  # kind -> run -> its days, where it read no unit of the kind
    mine: dict[str, dict[str, list[dt.date]]] = {}  # kind -> run -> its days, for the kinds it was configured with
    # the worst status of the runs chosen (one a version of this job does not know reads as partial)
    statuses = [r["status"] if r["status"] in _STATUS_RANK else "partial" for run in chosen for r in by_run[run]]
    cov.status = max(statuses, key=_STATUS_RANK.__getitem__, default=None)
    for run, days in chosen.items():
        for r in by_run[run]:
            kind = r["source_kind"]
            if kind is None:
                continue
            gaps.setdefault(kind, set()).update(d for d in (r["days_without_input"] or []) if d in days)
            if r["units_quarantined"]:
                quarantined.setdefault(kind, []).append(f"{unit_count(r['units_quarantined'], r['unit'] or 'unit')} in "
                                                        f"run {run}")
        for kind in {r["source_kind"] for r in by_run[run]} - {None}:
            mine.setdefault(kind, {})[run] = days
            if not any(r["units_read"] for r in by_run[run] if r["source_kind"] == kind):
                unread.setdefault(kind, {})[run] = days
    # a run kept the quarantine rows earlier runs stored for its days of a source it read no unit of, or for the
    # days it had no input of (kept per day with their rows): L1 reads them
    for kind, n_run in _kept_bad_units(config, date_from, date_to, mine).items():
        for run, (n, days) in n_run.items():
            why = ("which read none of this source" if run in unread.get(kind, {}) else
                   f"which had no input of it on {spans(days)}")
            quarantined.setdefault(kind, []).append(f"{unit_count(n, 'unit')} stored by earlier runs and kept by run "
                                                    f"{run}, {why}")
    for kind in sorted(set(gaps) | set(quarantined)):
        if gaps.get(kind):
            cov.notes.append(f"input {kind}: {no_input_on(kind)} {spans(gaps[kind])}")  # as `run` says it
        if quarantined.get(kind):
            cov.notes.append(f"input {kind}: quarantined " + "; ".join(quarantined[kind]) + " (the quarantine table)")
    return cov


def _kept_bad_units(config: Config, date_from: dt.date, date_to: dt.date,
                    runs_of: dict[str, dict[str, list[dt.date]]]) -> dict[str, dict[str, tuple[int, list[dt.date]]]]:
    """Per source kind and run (``runs_of``: kind -> run -> the days it is the latest run of), the ``quarantine``
    rows of those days another run met: what earlier runs stored and that run kept (a source it read no unit of,
    or the days it had no input of), with their days."""
    from .errors import NoTableError, SinkError
    from .sink import read_table_arrow

    if not runs_of:
        return {}
    try:
        q = read_table_arrow("quarantine", config, cluster=config.cluster, date_range=(date_from, date_to),
                             columns=["event_date", "source_kind", "run_id"]).to_pylist()
    except (NoTableError, SinkError):
        return {}
    out: dict[str, dict[str, tuple[int, list[dt.date]]]] = {}
    for kind, runs in runs_of.items():
        for run, days in runs.items():
            hit = [r["event_date"] for r in q if r["source_kind"] == kind and r["event_date"] in set(days)
                   and r["run_id"] != run]
            if hit:
                out.setdefault(kind, {})[run] = (len(hit), sorted(set(hit)))
    return out


def format_coverage(cov: Coverage) -> str:
    """The lines ``report`` prints after the summary: the runs' status, days not audited, inputs missing."""
    from .runlog import unit_count

    lines = [f"  Status: {cov.status or 'not audited'} (audit_runs: {unit_count(cov.runs, 'run')} last covered the "
             "range)"]
    if cov.not_audited:
        lines.append(f"  not audited (no finished run covers them): {spans(cov.not_audited)}")
    lines += [f"  {n}" for n in cov.notes]
    return "\n".join(map(printable, lines))


def most_findings(counts: Counter, n: int) -> list[tuple[Any, int]]:
    """The ``n`` subjects (brokers, clients, groups) with the most findings, ties by name: the same tables give the
    same lines whatever order their files were read in (``Counter.most_common`` keeps the reading order)."""
    def name(v: Any) -> tuple[int, int, str]:  # a broker id (text in the tables) by number: 2 before 10
        return (0, int(v), "") if str(v).isdigit() else (1, 0, str(v))

    return sorted(counts.items(), key=lambda kv: (-kv[1], name(kv[0])))[:n]


def summarise(config: Config, date_from: dt.date | str, date_to: dt.date | str, *, top_n: int = 5) -> Summary:
    """Read the three report tables for ``[date_from, date_to]`` (dates, or ISO strings as a simulation's
    ``date_range`` gives them), count their findings and group them into incidents.

    Raises:
        InputError: the output location cannot be reached.
    """
    date_from, date_to = (d if isinstance(d, dt.date) else dt.date.fromisoformat(d) for d in (date_from, date_to))
    out = Summary(config.cluster, date_from, date_to, roots=input_roots(config, date_from, date_to))
    tables: dict[str, pa.Table | None] = {}
    subjects: dict[str, Counter] = {"broker": Counter(), "client_id": Counter(), "group_id": Counter()}
    rows: list[dict[str, Any]] = []
    for report in REPORT_TABLES:
        out.tables[report] = config.output.table_location(report)
        t = tables[report] = load_findings(config, report, date_from, date_to)
        if t is None:
            out.missing.append(report)
            continue
        cols = t.select(["rule", "kind", "severity", "event_date", "broker", "client_id", "group_id"]).to_pydict()
        for rule, kind, sev, day in zip(cols["rule"], cols["kind"], cols["severity"], cols["event_date"],
                                        strict=True):
            out.by_kind[(report, rule, kind, sev)] += 1
            out.by_day[(day, sev)] += 1
        for name, counter in subjects.items():
            counter.update(v for v in cols[name] if v)
        # only the most severe rows are kept in full: a day can have many info findings
        worst = [r for r in finding_rows(report, t) if r["severity"] != "info"] or finding_rows(report, t)
        rows.extend(sorted(worst, key=_rank)[:top_n])
    out.top = {name: most_findings(c, top_n) for name, c in subjects.items() if c}
    out.top_findings = sorted(rows, key=_rank)[:top_n]
    out.incidents = group_incidents(report_rows(tables))
    return out


def _hms(ms: int | None) -> str:
    text = iso(ms)
    return "?" if text is None else text[:10] + " " + text[11:19]


def format_incidents(incidents: Iterable[Incident], limit: int = MAX_LISTED_INCIDENTS) -> list[str]:
    """One line per incident: number, severity, time span (UTC), title, findings and records."""
    items = list(incidents)
    if not items:
        return []
    by_sev = Counter(i.severity for i in items)
    lines = [f"  incidents: {len(items)} (" + ", ".join(f"{n} {s}" for s, n in by_sev.items()) + ")"]
    for inc in items[:limit]:
        start, end = _hms(inc.start_ms), _hms(inc.end_ms)
        span = start if end == start else f"{start} .. {end[11:] if end[:10] == start[:10] else end}"
        n = len(inc.findings)
        records = f", {inc.records_affected:,} records" if inc.records_affected else ""
        lines.append(f"  #{inc.number:<3} {inc.severity:<8} {span}  {inc.title} "
                     f"({n} finding{'s' if n != 1 else ''}{records})")
    if len(items) > limit:
        lines.append(f"  … {len(items) - limit} more incidents (epoch-audit report --html shows them all)")
    return lines


#: Ranges longer than this list only the days with findings in the per-day breakdown.
MAX_LISTED_DAYS = 62


def format_summary(s: Summary, not_audited: Iterable[dt.date] = ()) -> str:
    """The summary as a plain-text table (what the CLI prints), each line :func:`~epochlib.incidents.printable`;
    ``not_audited`` days (:func:`run_coverage`) are marked so in the per-day breakdown, not counted as 0."""
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
    if s.date_from != s.date_to:
        skipped = set(not_audited)
        long_range = (s.date_to - s.date_from).days >= MAX_LISTED_DAYS
        lines.append("  per day:" + (" (days with findings only: the range is long)" if long_range else ""))
        days = sorted({d for d, _ in s.by_day}) if long_range else [
            s.date_from + dt.timedelta(days=i) for i in range((s.date_to - s.date_from).days + 1)]
        for day in days:
            counts = {sev: s.by_day.get((day, sev), 0) for sev in SEVERITIES}
            total = sum(counts.values())
            if day in skipped and not total:
                lines.append(f"    {day}  not audited")
                continue
            detail = ", ".join(f"{n} {sev}" for sev, n in counts.items() if n)
            lines.append(f"    {day}  {total:>6}" + (f"  ({detail})" if detail else ""))
    lines += format_incidents(s.incidents)
    if s.top_findings:
        lines.append("  top findings:")
        for r in s.top_findings:
            units = f" ({r['units']})" if r["units"] else ""
            lines.append(f"    {r['severity']:<8} {r['rule']} {r['kind']}: {r['subject']}{units}")
    for name, label in (("broker", "brokers"), ("client_id", "clients"), ("group_id", "groups")):
        if s.top.get(name):
            lines.append(f"  top {label}: " + ", ".join(f"{k} ({n})" for k, n in s.top[name]))
    if s.missing:
        lines.append("  (no table yet: " + ", ".join(s.missing) + ")")
    return "\n".join(map(printable, lines))  # subjects, groups, clients are the evidence's strings: no escapes
