"""A self-contained HTML report of one cluster and date range: a triage page, then the charts.

One file that opens offline anywhere (an e-mail attachment, a ticket, a laptop on a plane): the CSS is
inline, the charts are inline SVG drawn by the small functions below (no plotting library, no font or
image fetched from anywhere), and every chart has a ``<title>``/``<desc>``, axis labels, a legend and a
data table in a ``<details>`` element as its text alternative. One small inline script filters the page
by severity, report and subject (state in the URL hash: ``#sev=critical,error&report=…&subject=orders-3``);
without it everything is shown.

Sections:

0. incidents (:func:`epochlib.incidents.group_incidents`, drawn, not computed, here): each with its
   severity, time span, subjects, records affected, what the kind usually means and what to do, the
   commands that re-check the evidence with Kafka's own tools, and its findings in time order;
   a timeline of the range (hour ticks, finer when the events span less than a few hours): incident
   spans, stale responses, resets, other findings and leader changes (from the lineage snapshots, or
   exact from ``partition_history`` when the metadata log was ingested), one lane per affected partition;
1. stale-metadata rate per broker per day (``stale_metadata_rates``, ``dimension = 'broker'``);
2. offset resets by classification per day, and the records re-read / skipped (``spurious_offset_resets``);
3. fencing findings by rule and kind, stacked by severity (``fencing_violations``);
4. for each partition with an error-or-worse finding, and each requested one: its epoch lineage across
   replicas (``epoch_lineage``): one lane per broker and snapshot, epochs as coloured spans over the offset
   axis, the offset ranges where replicas of the same snapshot disagree outlined in red, and the offsets
   the partition's findings name (committed, epoch end, truncation point, batch) marked;
5. a summary table (report × rule/kind × severity) and the top findings (warning or worse) with their
   evidence pointers.

Tables are read through delta-rs (:func:`jobs.sink.read_table_arrow`), filtered by the config's cluster
and the ``event_date`` range, into driver memory: findings are few. A missing table gives a short
"no data" paragraph in its section, never an error. Catalog outputs (Databricks) need ``spark=``.
All text taken from the tables (details, evidence, names) is HTML-escaped.
"""

from __future__ import annotations

import datetime as dt
import html
import math
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from epochlib.incidents import Incident, group_incidents, offsets_of, recheck_commands, relative_pointer
from epochlib.incidents import to_ms as ms_of
from epochlib.rules import ReplicaSnapshot, SnapshotRounds, epoch_disagreements, held_end, to_ms

from .config import Config, parse_date_range
from .errors import SinkError
from .fs import replace_text
from .summary import REPORT_TABLES, SEVERITIES, Coverage, input_roots, report_rows, run_coverage, spans

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["partitions_text", "render_html_report", "write_html_report"]

#: Findings listed in "Top findings" (the rest are counted in the summary table).
TOP_FINDINGS = 100
#: Brokers drawn in the stale-rate chart (the ones with the most stale responses).
MAX_BROKER_SERIES = 10
#: Snapshot groups drawn per lineage chart (the most recent ones).
MAX_SNAPSHOT_GROUPS = 12
#: Partitions whose lineage is drawn without being asked for (those with an error-or-worse finding).
MAX_AUTO_LINEAGE = 24
#: Lanes in the timeline (the subjects of the most severe incidents).
MAX_TIMELINE_LANES = 40
#: Findings listed inside one incident (the rest are counted).
MAX_INCIDENT_FINDINGS = 60
#: Offsets marked on one lineage chart.
MAX_OFFSET_MARKS = 40

# Colour-blind-safe palette (Okabe-Ito, then a few Tableau colours for more series).
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000",
           "#8c564b", "#7f7f7f", "#bcbd22", "#17becf")
SEVERITY_COLOURS = {"critical": "#67000d", "error": "#d1495b", "warning": "#f0a202", "info": "#7a9cc6"}
DIVERGENCE_COLOUR = "#d00000"


# ---------------------------------------------------------------------------------------------- entry


def write_html_report(
    config: Config,
    date_from: dt.date | str,
    date_to: dt.date | str | None,
    path: str | Path,
    *,
    partitions: Iterable[tuple[str, int]] = (),
    spark: SparkSession | None = None,
) -> Path:
    """Write the HTML report of ``[date_from, date_to]`` for ``config.cluster`` to ``path``.

    Args:
        config: where the tables are (``[output] root``) and which cluster to report.
        date_from, date_to: inclusive UTC date range (``event_date`` partitions).
        path: the HTML file to write (parent folders are created).
        partitions: (topic, partition) pairs whose epoch lineage across replicas is drawn.
        spark: only needed for catalog outputs (``[output] catalog``/``schema``), which delta-rs cannot read.

    Returns:
        The path written.

    Raises:
        ConfigError: invalid date range.
    """
    start, end = parse_date_range(date_from, date_to, audited=True)
    out = Path(path)
    text = render_html_report(config, start, end, partitions=partitions, spark=spark)
    try:
        replace_text(out, text)
    except OSError as e:
        raise SinkError(f"could not write the HTML report {out}: {e.strerror or e}") from None
    return out


#: Findings listed per partition by :func:`partitions_text` (the rest are counted: ``findings`` lists them all).
MAX_PARTITION_FINDINGS = 20


def partitions_text(
    config: Config,
    date_from: dt.date,
    date_to: dt.date,
    partitions: Iterable[tuple[str, int]],
    *,
    spark: SparkSession | None = None,
) -> tuple[str, list[tuple[str, int]]]:
    """What ``report --partition`` prints in the terminal: for each requested partition, its findings in the range
    (most severe first) and its epoch lineage across replicas (the HTML chart's data table: one line per broker and
    snapshot, the last :data:`MAX_SNAPSHOT_GROUPS` snapshot times), with the offsets replicas of one snapshot assign
    to different epochs. Also returns the partitions with no snapshot in ``epoch_lineage`` for the range (or no such
    table), which the CLI says on stderr too: a typo in ``--partition`` must not pass unnoticed. Each line is
    :func:`~epochlib.incidents.printable`."""
    from epochlib.incidents import printable

    order = {s: i for i, s in enumerate(SEVERITIES)}
    lines: list[str] = []
    missing: list[tuple[str, int]] = []
    for topic, partition in partitions:
        findings = [{**r, "report": name} for name in REPORT_TABLES
                    for r in _rows(_load(config, name, date_from, date_to, spark=spark,
                                         where={"topic": topic, "partition": partition}),
                                   ["severity", "rule", "kind", "event_ts", "detail"])]
        findings.sort(key=lambda f: (order.get(str(f["severity"]), 9), f["event_ts"] is None, f["event_ts"]))
        lines.append(f"Partition {topic}-{partition}, {date_from} .. {date_to}:")
        lines.append(f"  findings ({len(findings):,})" + (":" if findings else ""))
        for f in findings[:MAX_PARTITION_FINDINGS]:
            when = f["event_ts"].strftime("%Y-%m-%d %H:%M:%S") if f["event_ts"] is not None else "?"
            detail = f": {f['detail']}" if f["detail"] else ""
            lines.append(f"    {f['severity']!s:<8} {when}  {f['rule']} {f['kind']}{detail}")
        if len(findings) > MAX_PARTITION_FINDINGS:
            lines.append(f"    … {len(findings) - MAX_PARTITION_FINDINGS:,} more (epoch-audit findings lists them all)")
        lanes = _load_lanes(config, date_from, date_to, topic, partition, spark)
        if not lanes:
            missing.append((topic, partition))
            lines.append("  lineage: " + ("no epoch_lineage table" if lanes is None else
                                          "no snapshot of it in epoch_lineage for this range"))
            continue
        groups = _snapshot_groups(lanes, dt.timedelta(seconds=config.rules.snapshot_tolerance_seconds))
        shown = groups[-MAX_SNAPSHOT_GROUPS:]
        more = f", the last {len(shown)} of {len(groups)} snapshot times" if len(groups) > len(shown) else ""
        lines.append(f"  lineage (epoch@start offset; log start, high watermark, log end{more}):")
        for g in shown:
            for ln in g:
                lines.append(f"    {ln.snapshot.strftime('%Y-%m-%d %H:%M:%S')}  broker {ln.broker}  "
                             f"{' '.join(f'{e}@{o:,}' for e, o in ln.entries) or '(no epochs)'}  "
                             f"log start {_num(ln.log_start) or '?'}, hw {_num(ln.high_watermark) or '?'}, "
                             f"log end {_num(ln.end) or '?'}")
        diverged = [(g[0].snapshot, lo, hi, what) for g in shown for lo, hi, what in divergences(g)]
        for snap, lo, hi, what in diverged:
            lines.append(f"  divergence at {snap.strftime('%Y-%m-%d %H:%M:%S')}: offsets {lo:,}–{hi - 1:,} — {what}")
        if not diverged:
            lines.append("  replicas of each snapshot agree on the epoch of every offset they all hold")
    return "\n".join(map(printable, lines)), missing


def render_html_report(
    config: Config,
    date_from: dt.date,
    date_to: dt.date,
    *,
    partitions: Iterable[tuple[str, int]] = (),
    spark: SparkSession | None = None,
) -> str:
    """The report as one HTML string (see :func:`write_html_report`)."""
    requested = [(str(t), int(p)) for t, p in partitions]
    tables = {name: _load(config, name, date_from, date_to, spark=spark)
              for name in (*REPORT_TABLES, "stale_metadata_rates")}
    days = [date_from + dt.timedelta(days=i) for i in range((date_to - date_from).days + 1)]
    findings = report_rows(tables)
    incidents = group_incidents(findings)
    incident_of = {id(f): inc for inc in incidents for f in inc.findings}
    roots = input_roots(config, date_from, date_to)
    auto = _severe_partitions(incidents)
    subjects = list(dict.fromkeys(requested + auto[:MAX_AUTO_LINEAGE]))
    lanes = {tp: _load_lanes(config, date_from, date_to, tp[0], tp[1], spark)
             for tp in dict.fromkeys(subjects + _timeline_partitions(incidents))}
    history = _partition_history(config, date_from, date_to, _timeline_partitions(incidents), spark)
    body = [
        _header(config, date_from, date_to, tables, incidents),
        _filter_bar(findings),
        _timeline_section(incidents, date_from, date_to, lanes, history),
        _incidents_section(incidents, roots, set(subjects)),
        *(_lineage_section(config, t, p, lanes.get((t, p)),
                           [f for f in findings if f.get("topic") == t and f.get("partition") == p],
                           auto=(t, p) not in requested)
          for t, p in subjects),
        _stale_rate_section(config, tables["stale_metadata_rates"], days),
        _resets_section(config, tables["spurious_offset_resets"], days),
        _fencing_section(config, tables["fencing_violations"]),
        _summary_section(config, tables, run_coverage(config, date_from, date_to)),
        _top_findings_section(tables, incident_of, roots),
    ]
    if len(auto) > MAX_AUTO_LINEAGE:
        body.insert(4, f'<p class="note">Lineage drawn for the first {MAX_AUTO_LINEAGE} of {len(auto)} partitions '
                       "with an error-or-worse finding (most severe incidents first); ask for others with "
                       "<code>--partition TOPIC:PARTITION</code>.</p>")
    title = f"epoch-audit: {config.cluster}, {date_from} .. {date_to}"
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        "<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n"
        f"<title>{_e(title)}</title>\n<style>{_CSS}</style>\n</head>\n<body>\n<main>\n"
        + "\n".join(body)
        + f"\n</main>\n<script>{_SCRIPT}</script>\n</body>\n</html>\n"
    )


# -------------------------------------------------------------------------------------------- reading


def _load(config: Config, table: str, start: dt.date, end: dt.date, *, spark: SparkSession | None = None,
          where: Mapping[str, Any] | None = None) -> pa.Table | None:
    """Rows of ``table`` for the cluster and range (and ``where`` equalities); None when it does not exist. A path
    table that is there but cannot be read raises (:func:`jobs.sink.read_stored_table`): a damaged ``epoch_lineage``
    is not "no snapshot"."""
    from .sink import read_stored_table, read_table

    if config.output.root is not None:
        return read_stored_table(table, config, cluster=config.cluster, date_range=(start, end), where=where)
    if spark is None:  # catalog tables: only Spark can read them
        return None
    from pyspark.sql import functions as F

    try:
        df = read_table(spark, table, config, cluster=config.cluster, date_range=(start, end))
    except SinkError:
        return None
    for col, value in (where or {}).items():
        df = df.where(F.col(col) == value)
    return df.toArrow()


def _rows(table: pa.Table | None, columns: Sequence[str]) -> list[dict[str, Any]]:
    if table is None or table.num_rows == 0:
        return []
    have = [c for c in columns if c in table.column_names]
    rows = table.select(have).to_pylist()
    for row in rows:
        for c in columns:
            row.setdefault(c, None)
    return rows


# ------------------------------------------------------------------------------------------- sections


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _no_data(table: str, config: Config, what: str = "") -> str:
    where = config.output.table_location(table)
    reason = what or f"table <code>{_e(table)}</code> not found at <code>{_e(where)}</code>"
    return f'<p class="nodata">No data: {reason}.</p>'


def _header(config: Config, start: dt.date, end: dt.date, tables: Mapping[str, pa.Table | None],
            incidents: Sequence[Incident] = ()) -> str:
    from epochlib import __version__

    counts: dict[str, int | None] = {"incidents": len(incidents)}
    counts.update({name: (t.num_rows if t is not None else None) for name, t in tables.items()
                   if name in REPORT_TABLES})
    worse = 0
    for name in REPORT_TABLES:
        t = tables.get(name)
        if t is not None and "severity" in t.column_names:
            worse += sum(1 for s in t.column("severity").to_pylist() if s in ("warning", "error", "critical"))
    total = sum(n for name, n in counts.items() if n and name != "incidents")
    cards = "".join(
        f'<div class="card"><div class="n">{"–" if n is None else f"{n:,}"}</div>'
        f'<div class="l">{_e(name.replace("_", " "))}</div></div>' for name, n in counts.items())
    now = dt.datetime.now(dt.timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    return (
        f"<header><h1>Epoch audit: cluster <span class=\"mono\">{_e(config.cluster)}</span></h1>\n"
        f"<p class=\"meta\">Events from {start} to {end} (UTC, inclusive) · {total:,} findings, {worse:,} warning or "
        f"worse · tables at <code>{_e(config.output.table_location(''))}</code> · generated {now} by "
        f"epoch-audit {_e(__version__)}</p>\n<div class=\"cards\">{cards}</div></header>"
    )


def _section(sid: str, title: str, intro: str, content: str, attrs: str = "") -> str:
    return (f'<section id="{sid}" aria-labelledby="{sid}-h"{attrs}><h2 id="{sid}-h">{_e(title)}</h2>\n'
            f'<p class="intro">{intro}</p>\n{content}</section>')


def _stale_rate_section(config: Config, rates: pa.Table | None, days: list[dt.date]) -> str:
    sid, title = "stale-rate", "Stale metadata rate per broker"
    intro = ("Share of Metadata responses each broker served with at least one partition's leader epoch older "
             "than what the client had already seen (rules M1–M3), per day.")
    if rates is None:
        return _section(sid, title, intro, _no_data("stale_metadata_rates", config))
    rows = [r for r in _rows(rates, ["event_date", "dimension", "subject", "responses", "stale_responses"])
            if r["dimension"] == "broker"]
    if not rows:
        return _section(sid, title, intro, _no_data("", config, "no broker rates in this range"))
    resp: dict[tuple[str, dt.date], int] = Counter()
    stale: dict[tuple[str, dt.date], int] = Counter()
    for r in rows:
        key = (str(r["subject"]), r["event_date"])
        resp[key] += int(r["responses"] or 0)
        stale[key] += int(r["stale_responses"] or 0)
    by_broker: Counter = Counter()
    for (broker, _d), n in stale.items():
        by_broker[broker] += n
    for broker, _d in resp:
        by_broker.setdefault(broker, 0)
    brokers = sorted(by_broker, key=lambda b: (-by_broker[b], b))
    shown, hidden = brokers[:MAX_BROKER_SERIES], brokers[MAX_BROKER_SERIES:]
    series = {
        b: [(100.0 * stale[(b, d)] / resp[(b, d)]) if resp.get((b, d)) else None for d in days] for b in shown
    }
    if len(days) > 1:
        chart = line_chart(
            "chart-stale-rate", "Stale metadata rate per broker per day",
            [d.isoformat() for d in days], series, x_label="day (UTC)", y_label="stale responses (%)",
            value_format=lambda v: f"{v:.2f}%",
            desc=f"Line chart: percentage of stale Metadata responses per day for {len(shown)} broker(s).",
        )
    else:  # one day: a line of single points says nothing, a bar per broker does
        name = "stale responses (%)"
        chart = hbar_chart(
            "chart-stale-rate", f"Stale metadata rate per broker, {days[0].isoformat()}",
            shown, {name: [v[0] or 0.0 for v in series.values()]}, {name: PALETTE[0]},
            x_label="stale responses (%)", y_label="broker", value_format=lambda v: f"{v:.2f}%",
            desc=f"Bar chart: percentage of stale Metadata responses on {days[0].isoformat()} for "
                 f"{len(shown)} broker(s).",
        )  # fmt: skip
    note = ""
    if hidden:
        note = (f'<p class="note">{len(hidden)} more broker(s) with fewer stale responses not drawn: '
                f"{_e(', '.join(hidden[:20]))}{' …' if len(hidden) > 20 else ''}</p>")
    table = _data_table(
        ["broker", "day", "responses", "stale responses", "stale rate"],
        [[b, d.isoformat(), f"{resp[(b, d)]:,}", f"{stale[(b, d)]:,}",
          f"{100.0 * stale[(b, d)] / resp[(b, d)]:.2f}%"]
         for b in brokers for d in days if resp.get((b, d))])
    return _section(sid, title, intro, chart + note + table)


def _resets_section(config: Config, resets: pa.Table | None, days: list[dt.date]) -> str:
    sid, title = "offset-resets", "Offset resets by classification"
    intro = ("Committed-offset rewinds and jumps per day, by how they were classified (S1/S2): explained by a "
             "truncation or retention, an operator reset, or spurious; and how many records consumers re-read "
             "or skipped because of them.")
    if resets is None:
        return _section(sid, title, intro, _no_data("spurious_offset_resets", config))
    rows = _rows(resets, ["event_date", "classification", "kind", "records_reread", "records_skipped"])
    if not rows:
        return _section(sid, title, intro, _no_data("", config, "no offset resets in this range"))
    count: Counter = Counter()
    reread: Counter = Counter()
    skipped: Counter = Counter()
    totals: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for r in rows:
        cls = str(r["classification"] or r["kind"] or "unclassified")
        count[(cls, r["event_date"])] += 1
        reread[r["event_date"]] += int(r["records_reread"] or 0)
        skipped[r["event_date"]] += int(r["records_skipped"] or 0)
        t = totals[cls]
        t[0] += 1
        t[1] += int(r["records_reread"] or 0)
        t[2] += int(r["records_skipped"] or 0)
    classes = sorted(totals, key=lambda c: (-totals[c][0], c))
    labels = [d.isoformat() for d in days]
    chart1 = bar_chart(
        "chart-resets", "Offset resets per day by classification", labels,
        {c: [count[(c, d)] for d in days] for c in classes}, _colours(classes),
        x_label="day (UTC)", y_label="offset resets", stacked=True,
        desc=f"Stacked bar chart: offset resets per day, split into {len(classes)} classification(s).",
    )
    chart2 = bar_chart(
        "chart-reset-records", "Records re-read and skipped per day", labels,
        {"records re-read": [reread[d] for d in days], "records skipped": [skipped[d] for d in days]},
        {"records re-read": PALETTE[0], "records skipped": PALETTE[5]},
        x_label="day (UTC)", y_label="records", stacked=False,
        desc="Grouped bar chart: records consumed twice (rewinds) and never consumed (jumps) per day.",
    )
    table = _data_table(
        ["classification", "resets", "records re-read", "records skipped"],
        [[c, f"{totals[c][0]:,}", f"{totals[c][1]:,}", f"{totals[c][2]:,}"] for c in classes],
        caption="Totals for the range", open_=True)
    return _section(sid, title, intro, f'<div class="row">{chart1}{chart2}</div>{table}')


def _fencing_section(config: Config, fencing: pa.Table | None) -> str:
    sid, title = "fencing", "Fencing findings by kind"
    intro = ("Commits, record batches and replicas that carry an epoch the lineage says they must not "
             "(rules L1–L5, D1–D2, F1–F5), by rule and kind, coloured by severity.")
    if fencing is None:
        return _section(sid, title, intro, _no_data("fencing_violations", config))
    rows = _rows(fencing, ["rule", "kind", "severity"])
    if not rows:
        return _section(sid, title, intro, _no_data("", config, "no fencing findings in this range"))
    counts: Counter = Counter((f"{r['rule']} {r['kind']}", r["severity"]) for r in rows)
    per_kind: Counter = Counter()
    for (k, _s), n in counts.items():
        per_kind[k] += n
    kinds = sorted(per_kind, key=lambda k: (-per_kind[k], k))
    sevs = [s for s in SEVERITIES if any(counts[(k, s)] for k in kinds)]
    chart = hbar_chart(
        "chart-fencing", "Fencing findings by rule and kind", kinds,
        {s: [counts[(k, s)] for k in kinds] for s in sevs}, {s: SEVERITY_COLOURS.get(s, "#999") for s in sevs},
        x_label="findings", y_label="rule and kind",
        desc=f"Horizontal stacked bar chart: fencing findings for {len(kinds)} rule/kind pair(s) by severity.",
    )
    return _section(sid, title, intro, chart)


def _summary_section(config: Config, tables: Mapping[str, pa.Table | None], coverage: Coverage | None = None) -> str:
    """The findings counted by report, rule, kind and severity, and what ``audit_runs`` says of the range
    (``coverage``: days no run audited are not "no findings")."""
    counts: Counter = Counter()
    missing = []
    for report in REPORT_TABLES:
        t = tables.get(report)
        if t is None:
            missing.append(report)
            continue
        for r in _rows(t, ["rule", "kind", "severity"]):
            counts[(report, r["rule"], r["kind"], r["severity"])] += 1
    order = {s: i for i, s in enumerate(SEVERITIES)}
    rows = sorted(counts.items(), key=lambda kv: (kv[0][0], order.get(kv[0][3], 9), str(kv[0][1]), str(kv[0][2])))
    if rows:
        body = "".join(
            f'<tr><td>{_e(rep)}</td><td>{_e(rule)}</td><td>{_e(kind)}</td>'
            f'<td>{_sev(sev)}</td><td class="num">{n:,}</td></tr>' for (rep, rule, kind, sev), n in rows)
        content = ('<table class="data"><caption>Findings by report, rule, kind and severity</caption><thead><tr>'
                   '<th scope="col">report</th><th scope="col">rule</th><th scope="col">kind</th>'
                   f'<th scope="col">severity</th><th scope="col">count</th></tr></thead><tbody>{body}</tbody></table>')
    else:
        content = '<p class="nodata">No findings in this range.</p>'
    if missing:
        content += ('<p class="note">No table yet (not run for this output): '
                    + ", ".join(f"<code>{_e(m)}</code>" for m in missing) + "</p>")
    if coverage is not None:
        lines = [f"Status of the runs that last covered the range (<code>audit_runs</code>): "
                 f"<strong>{_e(coverage.status or 'not audited')}</strong>."]
        if coverage.not_audited:
            lines.append(f"Not audited (no finished run covers them, so no findings is no verdict): "
                         f"{_e(spans(coverage.not_audited))}.")
        lines += [_e(n) + "." for n in coverage.notes]
        content += "".join(f'<p class="note">{line}</p>' for line in lines)
    return _section("summary", "Summary", "Every finding in the range, counted.", content)


def _top_findings_section(tables: Mapping[str, pa.Table | None], incident_of: Mapping[int, Incident] | None = None,
                          roots: Mapping[str, str | None] | None = None) -> str:
    found = [(str(r.get("report")), r) for r in report_rows(tables)
             if r.get("severity") in ("warning", "error", "critical")]
    incident_of = incident_of or {}
    order = {s: i for i, s in enumerate(SEVERITIES)}
    epoch = dt.datetime.min.replace(tzinfo=dt.timezone.utc)

    def key(item: tuple[str, dict[str, Any]]) -> tuple[Any, ...]:
        r = item[1]
        ts = r.get("event_ts") if isinstance(r.get("event_ts"), dt.datetime) else epoch
        if ts.tzinfo is None:
            ts = ts.replace(tzinfo=dt.timezone.utc)
        return (order.get(r.get("severity"), 9), -ts.timestamp(), str(r.get("finding_id")))

    found.sort(key=key)
    intro = (f"Findings of severity warning or worse, most severe and most recent first (at most {TOP_FINDINGS}). "
             "The evidence pointers name the file (relative to the input roots) and byte position, log offset, "
             "checkpoint line or capture frame to re-check each finding with Kafka's own tools.")
    if not found:
        return _section("top-findings", "Top findings", intro,
                        '<p class="nodata">No findings of severity warning or worse in this range.</p>')
    items = []
    for report, r in found[:TOP_FINDINGS]:
        subject = _finding_subjects(r)
        ts = r["event_ts"].strftime("%Y-%m-%d %H:%M:%S") if isinstance(r.get("event_ts"), dt.datetime) else ""
        evidence = "".join(f"<li><code>{_e(relative_pointer(str(p), roots or {}))}</code></li>"
                           for p in (r.get("evidence") or []))
        inc = incident_of.get(id(r))
        link = f'<br><a href="#incident-{inc.number}">incident #{inc.number}</a>' if inc is not None else ""
        attrs = _filter_attrs(str(r.get("severity")), {report}, subject)
        items.append(
            f'<tr{attrs}><td>{_sev(r.get("severity"))}{link}</td><td>{_e(report)}<br><b>{_e(r.get("rule"))}</b> '
            f'{_e(r.get("kind"))}</td><td class="mono">{_e(ts)}</td><td>{_e(", ".join(subject))}</td>'
            f'<td>{_e(r.get("detail"))}<ul class="evidence">{evidence}</ul></td></tr>')
    more = len(found) - TOP_FINDINGS
    tail = f'<p class="note">{more:,} more not listed.</p>' if more > 0 else ""
    content = ('<table class="data findings"><caption>Findings (warning or worse)</caption><thead><tr>'
               '<th scope="col">severity</th><th scope="col">report / rule / kind</th><th scope="col">time (UTC)</th>'
               '<th scope="col">subject</th><th scope="col">detail and evidence</th></tr></thead><tbody>'
               + "".join(items) + "</tbody></table>" + tail)
    return _section("top-findings", "Top findings", intro, content)


def _finding_subjects(r: Mapping[str, Any]) -> list[str]:
    """``orders-3``, ``group g``, ``client c``, ``broker b``: what a finding is about, as the filter matches it."""
    subject = []
    if r.get("topic") is not None:
        subject.append(f"{r['topic']}-{r['partition']}" if r.get("partition") is not None else str(r["topic"]))
    for label in ("group_id", "client_id", "broker"):
        if r.get(label) is not None:
            subject.append(f"{label.replace('_id', '')} {r[label]}")
    return subject


def _sev(severity: Any) -> str:
    colour = SEVERITY_COLOURS.get(str(severity), "#999")
    return f'<span class="sev" style="border-color:{colour}">{_e(severity)}</span>'


# ------------------------------------------------------------------------------------ triage: incidents


def _filter_attrs(severity: str | None, reports: Iterable[str], subjects: Iterable[str]) -> str:
    """``data-sev``/``data-rep``/``data-subj`` attributes the page's filter script matches (omitted ones
    never hide the element; ``severity`` may list several, space-separated: shown when any is selected)."""
    out = ""
    if severity:
        out += f' data-sev="{_e(severity)}"'
    reps = " ".join(sorted(set(reports)))
    if reps:
        out += f' data-rep="{_e(reps)}"'
    subj = "|".join(s.lower() for s in subjects)
    if subj:
        out += f' data-subj="{_e(subj)}"'
    return out


def _severe_partitions(incidents: Sequence[Incident]) -> list[tuple[str, int]]:
    """Partitions with an error-or-worse finding, in incident order (most severe first)."""
    out: dict[tuple[str, int], None] = {}
    for inc in incidents:
        for f in inc.findings:
            if f.get("severity") in ("error", "critical") and f.get("topic") is not None and f.get("partition") is not None:
                out.setdefault((str(f["topic"]), int(f["partition"])), None)
    return list(out)


def _timeline_lanes(incidents: Sequence[Incident]) -> list[tuple[str, Any]]:
    """Timeline lanes in incident order: ``("p", (topic, partition))``, ``("t", topic)`` for topic-level
    findings, ``("g", group)``/``("b", broker)`` for incidents that name no topic."""
    lanes: dict[tuple[str, Any], None] = {}
    for inc in incidents:
        keys: list[tuple[str, Any]] = [("p", tp) for tp in inc.partitions] + [("t", t) for t in inc.topics]
        if not keys:
            keys = [("g", g) for g in inc.groups] or [("b", b) for b in inc.brokers]
        for k in keys:
            lanes.setdefault(k, None)
    return list(lanes)[:MAX_TIMELINE_LANES]


def _timeline_partitions(incidents: Sequence[Incident]) -> list[tuple[str, int]]:
    return [k for kind, k in _timeline_lanes(incidents) if kind == "p"]


def _hms(ms: int | None) -> str:
    if ms is None:
        return "?"
    return dt.datetime.fromtimestamp(ms / 1000, dt.timezone.utc).strftime("%Y-%m-%d %H:%M:%S")


def _span_text(inc: Incident) -> str:
    if inc.start_ms is None:
        return "time unknown"
    start, end = _hms(inc.start_ms), _hms(inc.end_ms)
    if inc.end_ms == inc.start_ms:
        return f"{start} UTC"
    minutes = ((inc.end_ms or inc.start_ms) - inc.start_ms) // 60_000
    took = f"{minutes // 60} h {minutes % 60} min" if minutes >= 60 else f"{minutes} min" if minutes else "< 1 min"
    return f"{start} – {end[11:] if end[:10] == start[:10] else end} UTC ({took})"


def _used_roots(incidents: Sequence[Incident], roots: Mapping[str, str | None]) -> dict[str, str | None]:
    """The input roots some evidence path lies under (a config pointing elsewhere would export a
    variable no command uses)."""
    from epochlib.incidents import parse_pointer, relative_path

    used = {}
    for name, root in roots.items():
        for inc in incidents:
            if any((p := parse_pointer(str(t))) is not None and relative_path(p.file, {name: root}) != p.file
                   for f in inc.findings for t in (f.get("evidence") or ())):
                used[name] = root
                break
    return used


def _roots_block(roots: Mapping[str, str | None]) -> str:
    """The variables the re-check commands use: the input roots and a bootstrap server to fill in."""
    import shlex

    from epochlib.incidents import ROOT_VARIABLES

    lines = [f"export {ROOT_VARIABLES.get(name, name.upper())}={shlex.quote(str(path))}"
             for name, path in roots.items() if path]
    lines.append("export BOOTSTRAP=broker-1:9092   # any broker of the cluster")
    where = ("evidence paths are relative to the input roots, so the same commands work on any copy of the "
             "evidence" if len(lines) > 1 else "the evidence lies under none of the input roots the run recorded or "
             "the config gives, so its paths are given as recorded")
    return (f'<p>The commands below use these variables ({where}):</p><pre class="cmd"><code>'
            + _e("\n".join(lines)) + "</code></pre>")


def _incidents_section(incidents: Sequence[Incident], roots: Mapping[str, str | None],
                       lineage_drawn: set[tuple[str, int]]) -> str:
    sid, title = "incidents", "Incidents"
    intro = ("Findings grouped into incidents: the same partition (or topic, or consumer group) and causally linked "
             "(a finding naming its cause, a shared evidence record) or close in time. Most severe first; inside "
             "each, the findings in time order, what the kind usually means, and the commands that confirm the "
             "evidence with Kafka's own tools.")
    if not incidents:
        return _section(sid, title, intro, '<p class="nodata">No findings in this range, so no incidents.</p>')
    used = _used_roots(incidents, roots)
    cards = [_roots_block(used)]
    for inc in incidents:
        cards.append(_incident_card(inc, used, lineage_drawn))
    return _section(sid, title, intro, "".join(cards))


def _incident_card(inc: Incident, roots: Mapping[str, str | None], lineage_drawn: set[tuple[str, int]]) -> str:
    attrs = _filter_attrs(inc.severity, inc.reports, inc.subjects())
    n = len(inc.findings)
    records = f" · {inc.records_affected:,} records affected" if inc.records_affected else ""
    subj = []
    for label, values in (("partitions", [f"{t}-{p}" for t, p in inc.partitions]), ("topics", inc.topics),
                          ("groups", inc.groups), ("clients", inc.clients), ("brokers", inc.brokers)):
        if values:
            shown = ", ".join(values[:12]) + (f" (+{len(values) - 12})" if len(values) > 12 else "")
            subj.append(f"<b>{label}</b> <span class=\"mono\">{_e(shown)}</span>")
    kinds = " ".join(f'<span class="kind">{_e(r)} {_e(k)} ×{c}</span>' for r, k, _s, c in inc.kinds)
    commands = recheck_commands(inc, roots)
    cmd_text = "\n".join(f"# {c.what}\n{c.command}" for c in commands)
    links = " ".join(f'<a href="#lineage-{_slug(t)}-{p}">lineage of {_e(t)}-{p}</a>'
                     for t, p in inc.partitions if (t, p) in lineage_drawn)
    rows = []
    for f in inc.findings[:MAX_INCIDENT_FINDINGS]:
        ts = _hms(ms_of(f.get("event_ts")))
        ev = "".join(f"<li><code>{_e(relative_pointer(str(p), roots))}</code></li>" for p in (f.get("evidence") or []))
        f_attrs = _filter_attrs(str(f.get("severity")), [str(f.get("report") or "")], _finding_subjects(f))
        rows.append(f'<tr{f_attrs}><td class="mono">{_e(ts[11:] if ts[:10] == _hms(inc.start_ms)[:10] else ts)}</td>'
                    f'<td>{_sev(f.get("severity"))}</td><td><b>{_e(f.get("rule"))}</b> {_e(f.get("kind"))}</td>'
                    f'<td>{_e(", ".join(_finding_subjects(f)))}</td>'
                    f'<td>{_e(f.get("detail"))}<ul class="evidence">{ev}</ul></td></tr>')
    more = n - MAX_INCIDENT_FINDINGS
    tail = f'<p class="note">{more:,} more findings not listed.</p>' if more > 0 else ""
    table = ('<table class="data findings"><thead><tr><th scope="col">time (UTC)</th><th scope="col">severity</th>'
             '<th scope="col">rule / kind</th><th scope="col">subject</th><th scope="col">detail and evidence</th>'
             f'</tr></thead><tbody>{"".join(rows)}</tbody></table>{tail}')
    open_ = " open" if inc.severity in ("critical", "error") else ""
    colour = SEVERITY_COLOURS.get(inc.severity, "#999")
    return (
        f'<article class="incident" id="incident-{inc.number}"{attrs} style="border-left-color:{colour}">'
        f'<h3>{_sev(inc.severity)} #{inc.number} {_e(inc.title)}</h3>'
        f'<p class="meta">{_e(_span_text(inc))} · {n:,} finding{"s" if n != 1 else ""}{records} · '
        f'{_e(", ".join(inc.reports))} · <span class="mono">{_e(inc.incident_id)}</span></p>'
        f'<p class="subjects">{" · ".join(subj)}</p>'
        f'<p class="guide"><b>Usually means:</b> {_e(inc.meaning)}. <b>What to do:</b> {_e(inc.action)}.</p>'
        f'<p class="kinds">{kinds}{" · " + links if links else ""}</p>'
        f'<details{open_}><summary>Re-check with Kafka\'s tools ({len(commands)} command'
        f'{"s" if len(commands) != 1 else ""})</summary><pre class="cmd"><code>{_e(cmd_text)}</code></pre></details>'
        f'<details><summary>Findings in time order ({n:,})</summary>{table}</details></article>'
    )


def _filter_bar(findings: Sequence[Mapping[str, Any]]) -> str:
    present = Counter(str(f.get("severity")) for f in findings)
    boxes = "".join(f'<label class="sevbox"><input type="checkbox" name="sev" value="{s}" checked> '
                    f'{_sev(s)} <span class="n">{present.get(s, 0):,}</span></label>' for s in SEVERITIES)
    reports = "".join(f'<option value="{r}">{_e(r.replace("_", " "))}</option>' for r in REPORT_TABLES)
    return (
        '<nav id="filters" class="filters" aria-label="Filter the report">'
        f'<span class="flabel">Severity</span>{boxes}'
        f'<label>Report <select id="f-report"><option value="">all reports</option>{reports}</select></label>'
        '<label>Subject <input id="f-subject" type="search" size="26" '
        'placeholder="orders-3, group g, client c, broker 1"></label>'
        '<span id="filter-status" role="status" aria-live="polite"></span>'
        '<noscript><span class="note">(filters need JavaScript; everything is shown)</span></noscript></nav>'
    )


# ------------------------------------------------------------------------------------- triage: timeline

_TICK_MINUTES = (5, 10, 15, 30, 60, 120, 180, 360, 720, 1440)
_SHORT_SPAN_MS = 6 * 3_600_000


def time_axis(date_from: dt.date, date_to: dt.date, events: Sequence[int]) -> tuple[int, int, int]:
    """(lo, hi, tick step) in ms for the timeline: the whole range with hour ticks (wider steps for long
    ranges), zoomed to the events ± 30 min with finer ticks when they span less than six hours."""
    lo = ms_of(date_from) or 0
    hi = ms_of(date_to + dt.timedelta(days=1)) or lo + 86_400_000
    inside = [t for t in events if lo <= t <= hi]
    if inside and max(inside) - min(inside) < _SHORT_SPAN_MS:
        q = 15 * 60_000
        lo = max(lo, (min(inside) // q) * q - 2 * q)
        hi = min(hi, -(-max(inside) // q) * q + 2 * q)
    span_min = (hi - lo) / 60_000
    step = next((m for m in _TICK_MINUTES if span_min / m <= 24), 1440 * math.ceil(span_min / 1440 / 24))
    return lo, hi, step * 60_000


def _leader_changes(lanes: Sequence[_Lane] | None, history: pa.Table | None) -> list[tuple[int, int | None, str, bool]]:
    """(time ms, earliest possible time ms or None when exact, label, unclean) of the partition's leader
    changes: exact from ``partition_history`` rows, else bracketed by the replica snapshots (an epoch first
    seen in a snapshot began after the previous snapshot)."""
    out: list[tuple[int, int | None, str, bool]] = []
    rows = _rows(history, ["controller_ts", "metadata_offset", "leader", "leader_epoch", "unclean", "change"])
    if rows:
        rows.sort(key=lambda r: (r["metadata_offset"] if r["metadata_offset"] is not None else -1))
        prev = None
        for r in rows:
            epoch, t = r["leader_epoch"], ms_of(r["controller_ts"])
            if epoch is not None and t is not None and prev is not None and epoch != prev:
                label = (f"leader epoch {epoch} (leader {r['leader']}) at {_hms(t)} UTC, from the metadata log"
                         + (" — unclean election" if r["unclean"] else ""))
                out.append((t, None, label, bool(r["unclean"])))
            prev = epoch if epoch is not None else prev
        return out
    if not lanes:
        return out
    times = sorted({ms_of(ln.snapshot) or 0 for ln in lanes})
    first_seen: dict[int, int] = {}
    for ln in lanes:
        t = ms_of(ln.snapshot) or 0
        for epoch, _s in ln.entries:
            first_seen[epoch] = min(first_seen.get(epoch, t), t)
    for epoch, t in sorted(first_seen.items()):
        if t <= times[0]:
            continue  # already there in the first snapshot: when it began is unknown
        before = max(x for x in times if x < t)
        out.append((t, before, f"leader epoch {epoch} first seen in the snapshot of {_hms(t)} UTC: elected after "
                               f"{_hms(before)}", False))
    return out


def _timeline_section(incidents: Sequence[Incident], date_from: dt.date, date_to: dt.date,
                      lanes_by_tp: Mapping[tuple[str, int], list[_Lane] | None],
                      history: Mapping[tuple[str, int], pa.Table | None]) -> str:
    sid, title = "timeline", "Timeline"
    intro = ("The range on one time axis, one lane per affected partition (topic, group or broker when an incident "
             "names no partition): incident spans as bands, stale metadata responses (●), offset resets (▼), other "
             "findings (|) and leader changes (◆; a thin line back to the previous snapshot when only the "
             "snapshots bracket the change, red when the metadata log says it was unclean). Hover for details.")
    lanes = _timeline_lanes(incidents)
    if not lanes:
        return _section(sid, title, intro, '<p class="nodata">No incidents in this range.</p>')
    changes = {tp: _leader_changes(lanes_by_tp.get(tp), history.get(tp)) for kind, tp in lanes if kind == "p"}
    events = [t for inc in incidents for t in (inc.start_ms, inc.end_ms) if t is not None]
    events += [c[0] for cs in changes.values() for c in cs]
    lo, hi, step = time_axis(date_from, date_to, events)
    width, left, right, top, lane_h = 1000, 180, 16, 34, 24
    plot_w = width - left - right
    height = top + len(lanes) * lane_h + 44

    def x(t: int) -> float:
        return left + (min(max(t, lo), hi) - lo) / max(hi - lo, 1) * plot_w

    out = [_svg_open("chart-timeline", width, height, "Incidents and leader changes over time",
                     f"Timeline from {_hms(lo)} to {_hms(hi)} UTC of {len(incidents)} incident(s) on {len(lanes)} "
                     "lane(s).")]
    t = -(-lo // step) * step
    axis_y = top + len(lanes) * lane_h
    label_every = max(1, math.ceil((hi - lo) / step * 44 / plot_w))  # a label needs ~44 px
    k = 0
    while t <= hi:
        tx = x(t)
        stamp = dt.datetime.fromtimestamp(t / 1000, dt.timezone.utc)
        label = stamp.strftime("%m-%d") if stamp.hour == 0 and stamp.minute == 0 and hi - lo > 86_400_000 else \
            stamp.strftime("%H:%M")
        out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{top}" y2="{axis_y}" class="grid"/>')
        if k % label_every == 0:
            out.append(f'<text class="tick" x="{tx:.1f}" y="{axis_y + 14}" text-anchor="middle">{label}</text>')
        t += step
        k += 1
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
               f"time (UTC), {_hms(lo)[:10]}{' .. ' + _hms(hi - 1)[:10] if hi - lo > 86_400_000 else ''}</text>")
    for i, (kind, key) in enumerate(lanes):
        y = top + i * lane_h
        mid = y + lane_h / 2
        if kind == "p":
            name, match = f"{key[0]}-{key[1]}", (lambda f, k=key: f.get("topic") == k[0] and f.get("partition") == k[1])
        elif kind == "t":
            name, match = f"{key} (topic)", (lambda f, k=key: f.get("topic") == k and f.get("partition") is None)
        elif kind == "g":
            name, match = f"group {key}", (lambda f, k=key: f.get("group_id") == k and f.get("topic") is None)
        else:
            name, match = f"broker {key}", (lambda f, k=key: str(f.get("broker")) == k and f.get("topic") is None)
        mine = [inc for inc in incidents if any(match(f) for f in inc.findings)]
        subjects = {name.lower()} | {s.lower() for inc in mine for s in inc.subjects()}
        sevs = " ".join(sv for sv in SEVERITIES if any(inc.severity == sv for inc in mine))
        out.append(f'<g class="lane-row"{_filter_attrs(sevs, (), sorted(subjects))}>'
                   f'<rect x="{left}" y="{y + 2}" width="{plot_w}" height="{lane_h - 4}" class="lane-bg"/>'
                   f'<text class="lane" x="{left - 8}" y="{mid + 4:.1f}" text-anchor="end">'
                   f'{_e(name if len(name) <= 26 else name[:25] + "…")}</text>')
        for inc in mine:
            if inc.start_ms is None:
                continue
            x0, x1 = x(inc.start_ms), x(inc.end_ms or inc.start_ms)
            out.append(f'<a href="#incident-{inc.number}"><rect x="{x0 - 2:.1f}" y="{y + 3}" width="{max(x1 - x0, 0) + 4:.1f}" '
                       f'height="{lane_h - 6}" fill="{SEVERITY_COLOURS.get(inc.severity, "#999")}" fill-opacity="0.22" '
                       f'class="span-band"{_filter_attrs(inc.severity, inc.reports, ())}><title>#{inc.number} '
                       f'{_e(inc.title)}: {_e(_span_text(inc))}</title></rect></a>')
        for inc in mine:
            for f in inc.findings:
                ts = ms_of(f.get("event_ts"))
                if ts is None or not match(f):
                    continue
                fx, sev = x(ts), str(f.get("severity"))
                c = SEVERITY_COLOURS.get(sev, "#999")
                tip = f"<title>{_e(_hms(ts)[11:])} {_e(f.get('rule'))} {_e(f.get('kind'))} ({_e(sev)}): {_e(f.get('detail'))}</title>"
                fa = _filter_attrs(sev, [str(f.get("report") or "")], ())
                rule = str(f.get("rule") or "")
                if rule.startswith("M"):
                    out.append(f'<circle cx="{fx:.1f}" cy="{mid:.1f}" r="4.5" fill="{c}" class="stale"{fa}>{tip}</circle>')
                elif rule.startswith("S"):
                    out.append(f'<path d="M{fx - 5:.1f},{mid - 5:.1f} L{fx + 5:.1f},{mid - 5:.1f} L{fx:.1f},{mid + 5:.1f} Z" '
                               f'fill="{c}" class="reset"{fa}>{tip}</path>')
                else:
                    out.append(f'<rect x="{fx - 1:.1f}" y="{y + 4}" width="2.5" height="{lane_h - 8}" fill="{c}" '
                               f'class="finding"{fa}>{tip}</rect>')
        for when, since, label, unclean in changes.get(key, []) if kind == "p" else []:
            if not lo <= when <= hi:
                continue
            cx = x(when)
            colour = DIVERGENCE_COLOUR if unclean else "#222"
            if since is not None:
                out.append(f'<line x1="{x(since):.1f}" x2="{cx:.1f}" y1="{mid:.1f}" y2="{mid:.1f}" stroke="{colour}" '
                           'stroke-width="1" stroke-dasharray="2 2"/>')
            out.append(f'<path d="M{cx:.1f},{mid - 6:.1f} L{cx + 5:.1f},{mid:.1f} L{cx:.1f},{mid + 6:.1f} '
                       f'L{cx - 5:.1f},{mid:.1f} Z" fill="{colour}" class="leader-change"><title>{_e(label)}</title></path>')
        out.append("</g>")
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{axis_y}" y2="{axis_y}" class="axis"/></svg>')
    legend = [(s, SEVERITY_COLOURS[s]) for s in SEVERITIES] + [("leader change", "#222"),
                                                               ("unclean election", DIVERGENCE_COLOUR)]
    note = ""
    total = len({k for inc in incidents for k in ([("p", tp) for tp in inc.partitions] + [("t", t) for t in inc.topics])})
    if total > len(lanes):
        note = f'<p class="note">{total - len(lanes)} more subject(s) of less severe incidents not drawn.</p>'
    rows = "".join(
        f'<tr{_filter_attrs(inc.severity, inc.reports, inc.subjects())}><td><a href="#incident-{inc.number}">'
        f'#{inc.number}</a></td><td>{_sev(inc.severity)}</td><td class="mono">{_e(_span_text(inc))}</td>'
        f'<td>{_e(inc.title)}</td><td class="num">{len(inc.findings):,}</td>'
        f'<td class="num">{_num(inc.records_affected or None)}</td></tr>' for inc in incidents)
    table = ('<table class="data" id="incident-list"><caption>Incidents, most severe first</caption><thead><tr>'
             '<th scope="col">incident</th><th scope="col">severity</th><th scope="col">time</th>'
             '<th scope="col">what and where</th><th scope="col">findings</th><th scope="col">records affected</th>'
             f'</tr></thead><tbody>{rows}</tbody></table>')
    return _section(sid, title, intro, _figure("chart-timeline", "".join(out), legend) + note + table)


_FIRST_DAY = dt.date(1970, 1, 1)


def _partition_history(config: Config, start: dt.date, end: dt.date, parts: Sequence[tuple[str, int]],
                       spark: SparkSession | None) -> dict[tuple[str, int], pa.Table | None]:
    """``partition_history`` rows (the replayed KRaft metadata log) per partition; empty when the table
    does not exist (no metadata log ingested)."""
    out: dict[tuple[str, int], pa.Table | None] = {}
    for t, p in parts:
        data = _load(config, "partition_history", start, end, spark=spark, where={"topic": t, "partition": p})
        if data is None:
            return {}
        if "snapshot" not in data.column("change").to_pylist() and start > _FIRST_DAY:
            # a snapshot's rows are stored once, under the first day of the run that met it: the partition's state
            # where the range's changes start is the last snapshot stored before the range (a run of the range
            # stored its copy inside it before), so that the range's first leader change is drawn
            before = _load(config, "partition_history", _FIRST_DAY, start - dt.timedelta(days=1), spark=spark,
                           where={"topic": t, "partition": p, "change": "snapshot"})
            if before is not None and before.num_rows:
                last = max(range(before.num_rows), key=lambda i: before.column("metadata_offset")[i].as_py() or -1)
                data = pa.concat_tables([data, before.slice(last, 1).select(data.column_names).cast(data.schema)])
        out[(t, p)] = data
    return out


# ------------------------------------------------------------------------------------------- lineage


@dataclass
class _Lane:
    """One lane of the lineage chart: a replica snapshot as drawn (broker as an int, time as a datetime)."""

    broker: int
    snapshot: dt.datetime
    entries: list[tuple[int, int]]  # (epoch, start_offset), file order
    end: int | None  # log end offset, else high watermark
    log_start: int | None
    high_watermark: int | None
    source: str

    @cached_property
    def replica(self) -> ReplicaSnapshot:
        """The lane as the :mod:`epochlib.rules` value (``end`` is its log end: LEO, else HW)."""
        return ReplicaSnapshot(broker=str(self.broker), snapshot_ts=to_ms(self.snapshot) or 0, topic="", partition=0,
                               entries=tuple(self.entries), log_start_offset=self.log_start, log_end_offset=self.end,
                               high_watermark=self.high_watermark, source=self.source)  # fmt: skip

    def known_end(self) -> int:
        """The highest offset this replica is known to hold + 1 (:func:`epochlib.rules.held_end`)."""
        return held_end(self.replica)


def _snapshot_groups(lanes: list[_Lane], tolerance: dt.timedelta) -> list[list[_Lane]]:
    """Lanes grouped by the rounds of :class:`epochlib.rules.SnapshotRounds` (snapshots within ``tolerance``
    of a round's first one), each group in (time, broker) order."""
    by_replica = {id(ln.replica): ln for ln in lanes}
    rounds = SnapshotRounds([ln.replica for ln in lanes], tolerance // dt.timedelta(milliseconds=1))
    return [sorted((by_replica[id(s)] for s in r.members), key=lambda ln: (ln.snapshot, ln.broker)) for r in rounds]


def divergences(group: Sequence[_Lane]) -> list[tuple[int, int, str]]:
    """Offset ranges ``[lo, hi)`` that replicas of one snapshot group assign different epochs to
    (:func:`epochlib.rules.epoch_disagreements`: only offsets both replicas of a pair hold), with a
    description naming the brokers and their epochs."""
    return [(d.lo, d.hi, f"broker {d.broker_a}: epoch {d.epoch_a}, broker {d.broker_b}: epoch {d.epoch_b}")
            for d in epoch_disagreements([ln.replica for ln in group])]


def _load_lanes(config: Config, start: dt.date, end: dt.date, topic: str, partition: int,
                spark: SparkSession | None) -> list[_Lane] | None:
    """The partition's replica snapshots in the range as lanes; None when ``epoch_lineage`` does not exist."""
    data = _load(config, "epoch_lineage", start, end, spark=spark, where={"topic": topic, "partition": partition})
    if data is None:
        return None
    rows = _rows(data, ["broker", "snapshot_ts", "entries", "log_start_offset", "high_watermark",
                        "log_end_offset", "source"])
    lanes = []
    for r in rows:
        entries = [(int(x["epoch"]), int(x["start_offset"])) for x in (r["entries"] or [])
                   if x and x.get("epoch") is not None and x.get("start_offset") is not None]
        end_off = r["log_end_offset"] if r["log_end_offset"] is not None else r["high_watermark"]
        snap = r["snapshot_ts"] or dt.datetime.min.replace(tzinfo=dt.timezone.utc)
        if snap.tzinfo is None:
            snap = snap.replace(tzinfo=dt.timezone.utc)
        lanes.append(_Lane(int(r["broker"]) if r["broker"] is not None else -1, snap, entries, end_off,
                           r["log_start_offset"], r["high_watermark"], str(r["source"] or "")))
    return lanes


def _offset_marks(findings: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, str]]:
    """(offset, label, severity) for the offsets a partition's findings name, most severe first, one per
    offset (:func:`epochlib.incidents.offsets_of`)."""
    order = {s: i for i, s in enumerate(SEVERITIES)}
    marks: dict[int, tuple[int, str, str]] = {}
    for f in sorted(findings, key=lambda f: order.get(str(f.get("severity")), 9)):
        for col, off in offsets_of(f):
            if off not in marks:
                marks[off] = (off, f"{f.get('rule')} {f.get('kind')}: {col.replace('_', ' ')} {off:,}",
                              str(f.get("severity")))
    return list(marks.values())[:MAX_OFFSET_MARKS]


def _lineage_section(config: Config, topic: str, partition: int, lanes: list[_Lane] | None,
                     findings: Sequence[Mapping[str, Any]], *, auto: bool = False) -> str:
    sid = f"lineage-{_slug(topic)}-{partition}"
    title = f"Epoch lineage of {topic}-{partition} across replicas"
    intro = ("One lane per broker and log-dir snapshot: each leader epoch is a coloured span from its start offset "
             "to the next epoch's start (the last one to the log end offset, or the high watermark). A grey band "
             "marks offsets below the log start; red outlines mark offsets replicas of the same snapshot assign to "
             "different epochs (divergence); triangles with dashed lines mark the offsets this partition's findings "
             "name.")
    if auto:
        intro += " Drawn because the partition has an error-or-worse finding."
    order = {s: i for i, s in enumerate(SEVERITIES)}
    worst = min((str(f.get("severity")) for f in findings), key=lambda s: order.get(s, 9), default="info")
    attrs = _filter_attrs(worst, {str(f.get("report")) for f in findings if f.get("report")},
                          [f"{topic}-{partition}"])
    if lanes is None:
        return _section(sid, title, intro, _no_data("epoch_lineage", config), attrs)
    if not lanes:
        return _section(sid, title, intro, _no_data(
            "", config, f"no snapshots of <code>{_e(topic)}-{partition}</code> in <code>epoch_lineage</code> "
            "for this range"), attrs)
    groups = _snapshot_groups(lanes, dt.timedelta(seconds=config.rules.snapshot_tolerance_seconds))
    note = ""
    if len(groups) > MAX_SNAPSHOT_GROUPS:
        note = (f'<p class="note">Showing the last {MAX_SNAPSHOT_GROUPS} of {len(groups)} snapshot times.</p>')
        groups = groups[-MAX_SNAPSHOT_GROUPS:]
    chart_id = f"chart-{sid}"
    chart, diverged = lineage_chart(chart_id, title, groups, _offset_marks(findings))
    parts = [chart, note]
    if diverged:
        items = "".join(f"<li>{_e(snap)}: offsets {lo:,}–{hi - 1:,} — {_e(what)}</li>" for snap, lo, hi, what in diverged)
        parts.append(f'<div class="alert"><b>Divergence between replicas</b><ul>{items}</ul></div>')
    else:
        parts.append('<p class="ok">Replicas of each snapshot agree on the epoch of every offset they all hold.</p>')
    if findings:
        items = "".join(f"<li>{_sev(r.get('severity'))} <b>{_e(r.get('rule'))}</b> {_e(r.get('kind'))}: "
                        f"{_e(r.get('detail'))}</li>" for r in findings[:20])
        parts.append(f'<p>Findings for this partition ({len(findings):,}):</p><ul class="plain">{items}</ul>')
    parts.append(_data_table(
        ["snapshot (UTC)", "broker", "epochs (epoch@start offset)", "log start", "high watermark", "log end",
         "checkpoint"],
        [[ln.snapshot.strftime("%Y-%m-%d %H:%M:%S"), ln.broker, " ".join(f"{e}@{s:,}" for e, s in ln.entries),
          _num(ln.log_start), _num(ln.high_watermark), _num(ln.end), ln.source]
         for g in groups for ln in g]))
    return _section(sid, title, intro, "".join(parts), attrs)


def lineage_chart(chart_id: str, title: str, groups: Sequence[Sequence[_Lane]],
                  marks: Sequence[tuple[int, str, str]] = ()) -> tuple[str, list[tuple]]:
    """SVG of lanes (snapshot × broker) of epoch spans over a shared offset axis, with ``marks``
    ((offset, label, severity): a triangle and a dashed line each); returns (svg, divergences)."""
    lanes = [ln for g in groups for ln in g]
    lo = min([min((s for _e, s in ln.entries), default=0) for ln in lanes]
             + [ln.log_start for ln in lanes if ln.log_start is not None])
    hi = max(ln.known_end() for ln in lanes)
    if marks:  # a commit past the log end is the point: widen the axis to show it
        lo = min(lo, min(m[0] for m in marks))
        hi = max(hi, max(m[0] for m in marks) + 1)
    if hi <= lo:
        hi = lo + 1
    lane_h, gap, left, right, top = 18, 10, 190, 20, 44 if marks else 34
    height = top + sum(len(g) * (lane_h + 4) + gap for g in groups) + 46
    width = 860
    plot_w = width - left - right
    ticks = _nice_ticks(lo, hi)

    def x(offset: float) -> float:
        return left + (offset - lo) / (hi - lo) * plot_w

    epochs = sorted({e for ln in lanes for e, _s in ln.entries})
    colours = {e: PALETTE[i % len(PALETTE)] for i, e in enumerate(epochs)}
    out = [_svg_open(chart_id, width, height, title,
                     f"Epoch spans of {len(lanes)} replica snapshot(s) in {len(groups)} snapshot group(s) over "
                     f"offsets {lo:,} to {hi:,}.")]
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{height - 6}" text-anchor="middle">'
               "offset</text>")
    y = top
    diverged: list[tuple] = []
    for group in groups:
        snap = group[0].snapshot.strftime("%Y-%m-%d %H:%M:%S")
        g_top = y
        for lane in group:
            out.append(f'<text class="lane" x="{left - 8}" y="{y + lane_h - 5}" text-anchor="end">'
                       f'{_e(snap[5:16])} · broker {lane.broker}</text>')
            out.append(f'<rect x="{left}" y="{y}" width="{plot_w}" height="{lane_h}" class="lane-bg"/>')
            ordered = sorted(lane.entries, key=lambda es: es[1])
            for i, (epoch, s) in enumerate(ordered):
                open_end = i + 1 == len(ordered) and lane.end is None
                e_end = ordered[i + 1][1] if i + 1 < len(ordered) else lane.known_end()
                x0, x1 = x(s), x(max(e_end, s))
                w = max(x1 - x0, 2.0)
                dash = ' stroke-dasharray="3 2" stroke="#333"' if open_end else ""
                out.append(f'<rect x="{x0:.1f}" y="{y}" width="{w:.1f}" height="{lane_h}" fill="{colours[epoch]}"'
                           f'{dash}><title>broker {lane.broker}, snapshot {_e(snap)}: epoch {epoch}, offsets '
                           f'{s:,}–{"?" if open_end else f"{e_end - 1:,}"}</title></rect>')
                if w > 26:
                    out.append(f'<text class="span" x="{x0 + 3:.1f}" y="{y + lane_h - 5}">e{epoch}</text>')
            if lane.log_start is not None and lane.log_start > lo:
                out.append(f'<rect x="{left}" y="{y}" width="{x(lane.log_start) - left:.1f}" height="{lane_h}" '
                           f'class="deleted"><title>below log start offset {lane.log_start:,}</title></rect>')
            if lane.high_watermark is not None:
                hx = x(lane.high_watermark)
                out.append(f'<line x1="{hx:.1f}" x2="{hx:.1f}" y1="{y - 2}" y2="{y + lane_h + 2}" class="hw">'
                           f'<title>high watermark {lane.high_watermark:,}</title></line>')
            y += lane_h + 4
        for d_lo, d_hi, what in divergences(group):
            diverged.append((snap, d_lo, d_hi, what))
            x0 = x(d_lo)
            out.append(f'<rect x="{x0:.1f}" y="{g_top - 2}" width="{max(x(d_hi) - x0, 3):.1f}" '
                       f'height="{y - g_top}" class="diverge"><title>divergence at offsets {d_lo:,}–{d_hi - 1:,}: '
                       f'{_e(what)}</title></rect>')
        y += gap
    axis_y = y
    for off, label, sev in marks:
        mx = x(off)
        colour = SEVERITY_COLOURS.get(sev, "#999")
        out.append(f'<g class="mark"><title>{_e(label)}</title>'
                   f'<line x1="{mx:.1f}" x2="{mx:.1f}" y1="{top - 6}" y2="{axis_y}" stroke="{colour}" '
                   f'stroke-dasharray="4 3" stroke-width="1.5"/>'
                   f'<path d="M{mx - 5:.1f},{top - 14} L{mx + 5:.1f},{top - 14} L{mx:.1f},{top - 5} Z" '
                   f'fill="{colour}"/></g>')
    out.append(f'<line x1="{left}" x2="{left + plot_w}" y1="{axis_y}" y2="{axis_y}" class="axis"/>')
    for t in ticks:
        tx = x(t)
        out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{axis_y}" y2="{axis_y + 4}" class="axis"/>'
                   f'<text class="tick" x="{tx:.1f}" y="{axis_y + 16}" text-anchor="middle">{_short(t)}</text>')
    out.append("</svg>")
    legend = [(f"epoch {e}", colours[e]) for e in epochs]
    legend += [("below log start", "#bbbbbb"), ("divergence", DIVERGENCE_COLOUR)]
    legend += [(f"finding offset ({s})", SEVERITY_COLOURS[s]) for s in SEVERITIES if any(m[2] == s for m in marks)]
    return _figure(chart_id, "".join(out), legend), diverged


# --------------------------------------------------------------------------------------------- charts


def _svg_open(chart_id: str, width: int, height: int, title: str, desc: str) -> str:
    return (f'<svg id="{_e(chart_id)}" class="chart" role="img" viewBox="0 0 {width} {height}" width="{width}" '
            f'height="{height}" aria-labelledby="{_e(chart_id)}-t {_e(chart_id)}-d" aria-label="{_e(title)}">'
            f'<title id="{_e(chart_id)}-t">{_e(title)}</title><desc id="{_e(chart_id)}-d">{_e(desc)}</desc>'
            f'<text class="chart-title" x="{width / 2:.0f}" y="18" text-anchor="middle">{_e(title)}</text>')


def _figure(chart_id: str, svg: str, legend: Sequence[tuple[str, str]]) -> str:
    items = "".join(f'<li><span class="swatch" style="background:{c}"></span>{_e(label)}</li>' for label, c in legend)
    return (f'<figure class="chart-box">{svg}<figcaption><ul class="legend" aria-label="legend">{items}</ul>'
            f"</figcaption></figure>")


def _nice_ticks(lo: float, hi: float, n: int = 5) -> list[float]:
    """Round tick values covering ``[lo, hi]`` (1, 2, 2.5 or 5 × 10^k steps): the last tick is at or above
    ``hi``, since charts scale to it and a value above it would be drawn past the axis."""
    if hi <= lo:
        hi = lo + 1
    raw = (hi - lo) / max(n, 1)
    mag = 10 ** math.floor(math.log10(raw))
    step = next(m * mag for m in (1, 2, 2.5, 5, 10) if m * mag >= raw)
    first = math.floor(lo / step) * step
    ticks = []
    t = first
    while True:
        if t >= lo - step * 1e-9:
            ticks.append(round(t, 10))
        if t >= hi - step * 1e-9:
            return ticks
        t += step


def _short(v: float) -> str:
    """Compact tick label: 1.5k, 2M, 0.25."""
    a = abs(v)
    for div, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if a >= div:
            return f"{v / div:.3g}{suffix}"
    return f"{v:.3g}" if v != int(v) else f"{int(v)}"


def _num(v: Any) -> str:
    return "" if v is None else f"{v:,}"


def _slug(text: str) -> str:
    return "".join(ch if ch.isalnum() else "-" for ch in text).strip("-").lower() or "topic"


def _colours(names: Sequence[str]) -> dict[str, str]:
    return {n: PALETTE[i % len(PALETTE)] for i, n in enumerate(names)}


def _x_labels(labels: Sequence[str], width: float) -> list[bool]:
    """Which category labels to print so they do not overlap (every k-th)."""
    k = max(1, math.ceil(len(labels) * 70 / max(width, 1)))
    return [i % k == 0 for i in range(len(labels))]


def _y_axis(out: list[str], left: int, top: int, plot_w: float, plot_h: float, ticks: list[float],
            y_max: float, fmt: Any, y_label: str) -> None:
    for t in ticks:
        ty = top + plot_h - t / y_max * plot_h
        out.append(f'<line x1="{left}" x2="{left + plot_w:.1f}" y1="{ty:.1f}" y2="{ty:.1f}" class="grid"/>'
                   f'<text class="tick" x="{left - 6}" y="{ty + 4:.1f}" text-anchor="end">{_e(fmt(t))}</text>')
    cy = top + plot_h / 2
    out.append(f'<text class="axis-title" x="14" y="{cy:.1f}" text-anchor="middle" '
               f'transform="rotate(-90 14 {cy:.1f})">{_e(y_label)}</text>')
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" class="axis"/>'
               f'<line x1="{left}" x2="{left + plot_w:.1f}" y1="{top + plot_h}" y2="{top + plot_h}" class="axis"/>')


def line_chart(chart_id: str, title: str, x_labels: Sequence[str], series: Mapping[str, Sequence[float | None]], *,
               x_label: str, y_label: str, value_format: Any = None, desc: str = "") -> str:
    """A line chart with point markers; ``None`` values leave a gap. Returns a ``<figure>``."""
    fmt = value_format or _short
    width, height, left, right, top, bottom = 860, 300, 64, 20, 30, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    values = [v for vs in series.values() for v in vs if v is not None]
    ticks = _nice_ticks(0, max(values, default=0) or 1)
    y_max = ticks[-1] or 1
    n = len(x_labels)

    def px(i: int) -> float:
        return left + (plot_w / 2 if n == 1 else i * plot_w / (n - 1))

    def py(v: float) -> float:
        return top + plot_h - v / y_max * plot_h

    out = [_svg_open(chart_id, width, height, title, desc or title)]
    _y_axis(out, left, top, plot_w, plot_h, ticks, y_max, fmt, y_label)
    for i, (label, show) in enumerate(zip(x_labels, _x_labels(x_labels, plot_w), strict=True)):
        if show:
            out.append(f'<text class="tick" x="{px(i):.1f}" y="{top + plot_h + 16}" text-anchor="middle">'
                       f"{_e(label)}</text>")
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
               f"{_e(x_label)}</text>")
    colours = _colours(list(series))
    for name, vs in series.items():
        c = colours[name]
        run: list[str] = []
        paths = []
        for i, v in enumerate(vs):
            if v is None:
                if len(run) > 1:
                    paths.append(run)
                run = []
                continue
            run.append(f"{px(i):.1f},{py(v):.1f}")
        if len(run) > 1:
            paths.append(run)
        for pts in paths:
            out.append(f'<polyline points="{" ".join(pts)}" fill="none" stroke="{c}" stroke-width="2"/>')
        for i, v in enumerate(vs):
            if v is not None:
                out.append(f'<circle cx="{px(i):.1f}" cy="{py(v):.1f}" r="3.5" fill="{c}">'
                           f"<title>{_e(name)}, {_e(x_labels[i])}: {_e(fmt(v))}</title></circle>")
    out.append("</svg>")
    return _figure(chart_id, "".join(out), list(colours.items()))


def bar_chart(chart_id: str, title: str, categories: Sequence[str], series: Mapping[str, Sequence[float]],
              colours: Mapping[str, str], *, x_label: str, y_label: str, stacked: bool = True,
              desc: str = "") -> str:
    """Vertical bars per category: stacked or grouped series. Returns a ``<figure>``."""
    width, height, left, right, top, bottom = 860, 300, 64, 20, 30, 56
    plot_w, plot_h = width - left - right, height - top - bottom
    n = max(len(categories), 1)
    if stacked:
        peak = max((sum(vs[i] for vs in series.values()) for i in range(len(categories))), default=0)
    else:
        peak = max((v for vs in series.values() for v in vs), default=0)
    ticks = _nice_ticks(0, peak or 1)
    y_max = ticks[-1] or 1
    slot = plot_w / n
    bar_w = slot * 0.7
    out = [_svg_open(chart_id, width, height, title, desc or title)]
    _y_axis(out, left, top, plot_w, plot_h, ticks, y_max, _short, y_label)
    names = list(series)
    for i, (cat, show) in enumerate(zip(categories, _x_labels(categories, plot_w), strict=True)):
        x0 = left + i * slot + (slot - bar_w) / 2
        base = 0.0
        for j, name in enumerate(names):
            v = series[name][i]
            if not v:
                continue
            h = v / y_max * plot_h
            if stacked:
                bx, bw, by = x0, bar_w, top + plot_h - (base + v) / y_max * plot_h
                base += v
            else:
                bw = bar_w / len(names)
                bx, by = x0 + j * bw, top + plot_h - h
            out.append(f'<rect x="{bx:.1f}" y="{by:.1f}" width="{max(bw, 1):.1f}" height="{h:.1f}" '
                       f'fill="{colours[name]}"><title>{_e(cat)}: {_e(name)} {v:,}</title></rect>')
        if show:
            out.append(f'<text class="tick" x="{left + (i + 0.5) * slot:.1f}" y="{top + plot_h + 16}" '
                       f'text-anchor="middle">{_e(cat)}</text>')
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
               f"{_e(x_label)}</text></svg>")
    return _figure(chart_id, "".join(out), [(n_, colours[n_]) for n_ in names])


def hbar_chart(chart_id: str, title: str, categories: Sequence[str], series: Mapping[str, Sequence[float]],
               colours: Mapping[str, str], *, x_label: str, y_label: str, desc: str = "",
               value_format: Callable[[float], str] = lambda v: f"{int(v):,}") -> str:
    """Horizontal stacked bars, one per category (long labels fit on the left). Returns a ``<figure>``."""
    bar_h, left, right, top = 22, 260, 80, 30  # right: room for the value label of the longest bar
    width = 860
    plot_w = width - left - right
    height = top + len(categories) * (bar_h + 8) + 50
    peak = max((sum(vs[i] for vs in series.values()) for i in range(len(categories))), default=0)
    ticks = _nice_ticks(0, peak or 1)
    x_max = ticks[-1] or 1
    plot_h = len(categories) * (bar_h + 8)
    out = [_svg_open(chart_id, width, height, title, desc or title)]
    for t in ticks:
        tx = left + t / x_max * plot_w
        out.append(f'<line x1="{tx:.1f}" x2="{tx:.1f}" y1="{top}" y2="{top + plot_h}" class="grid"/>'
                   f'<text class="tick" x="{tx:.1f}" y="{top + plot_h + 16}" text-anchor="middle">{_short(t)}</text>')
    for i, cat in enumerate(categories):
        y = top + i * (bar_h + 8) + 4
        label = cat if len(cat) <= 40 else cat[:39] + "…"
        out.append(f'<text class="lane" x="{left - 8}" y="{y + bar_h - 6}" text-anchor="end">{_e(label)}</text>')
        base = 0.0
        for name, vs in series.items():
            v = vs[i]
            if not v:
                continue
            x0 = left + base / x_max * plot_w
            w = v / x_max * plot_w
            base += v
            out.append(f'<rect x="{x0:.1f}" y="{y}" width="{max(w, 1):.1f}" height="{bar_h}" fill="{colours[name]}">'
                       f"<title>{_e(cat)}: {_e(value_format(v))} {_e(name)}</title></rect>")
        out.append(f'<text class="tick" x="{left + base / x_max * plot_w + 4:.1f}" y="{y + bar_h - 6}">'
                   f"{_e(value_format(base))}</text>")
    out.append(f'<line x1="{left}" x2="{left}" y1="{top}" y2="{top + plot_h}" class="axis"/>'
               f'<line x1="{left}" x2="{left + plot_w}" y1="{top + plot_h}" y2="{top + plot_h}" class="axis"/>')
    out.append(f'<text class="axis-title" x="{left + plot_w / 2:.1f}" y="{height - 8}" text-anchor="middle">'
               f"{_e(x_label)}</text>")
    out.append(f'<text class="axis-title" x="12" y="{top - 10}">{_e(y_label)}</text></svg>')
    return _figure(chart_id, "".join(out), [(n_, colours[n_]) for n_ in series])


def _data_table(header: Sequence[str], rows: Sequence[Sequence[Any]], *, caption: str = "Data behind the chart",
                open_: bool = False) -> str:
    """A table in a ``<details>`` element: the chart's text alternative (screen readers, copy-paste)."""
    if not rows:
        return ""
    head = "".join(f'<th scope="col">{_e(h)}</th>' for h in header)
    body = "".join("<tr>" + "".join(f"<td>{_e(c)}</td>" for c in row) + "</tr>" for row in rows)
    return (f'<details{" open" if open_ else ""}><summary>{_e(caption)} ({len(rows):,} rows)</summary>'
            f'<table class="data"><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></details>')


_CSS = """
:root{--fg:#1d1d1f;--muted:#5f6368;--line:#d0d4da;--bg:#fff;--panel:#f6f7f9}
*{box-sizing:border-box}
body{margin:0;font:14px/1.45 system-ui,-apple-system,"Segoe UI",Roboto,Helvetica,Arial,sans-serif;color:var(--fg);
background:var(--bg)}
main{max-width:1100px;margin:0 auto;padding:16px 24px 48px}
h1{font-size:22px;margin:8px 0 4px}h2{font-size:18px;margin:28px 0 6px;border-bottom:1px solid var(--line);
padding-bottom:4px}
.meta,.intro,.note{color:var(--muted)}.note{font-size:13px}
.mono,code{font-family:ui-monospace,SFMono-Regular,Menlo,Consolas,monospace;font-size:12.5px}
.cards{display:flex;gap:12px;flex-wrap:wrap;margin:12px 0}
.card{background:var(--panel);border:1px solid var(--line);border-radius:6px;padding:8px 14px;min-width:170px}
.card .n{font-size:22px;font-weight:600}.card .l{color:var(--muted)}
.chart-box{margin:8px 0;overflow-x:auto}.chart{max-width:100%;height:auto;font-size:11px}
.row{display:block}
.chart-title{font-size:13px;font-weight:600}.axis-title{font-size:12px;fill:#333}
.tick{fill:#444;font-size:10.5px}.lane{fill:#333;font-size:11px}.span{fill:#fff;font-size:10px;font-weight:600}
.grid{stroke:#eceef1}.axis{stroke:#888}.lane-bg{fill:#f1f2f4}
.deleted{fill:#bbbbbb;fill-opacity:.75}.hw{stroke:#222;stroke-width:2}
.diverge{fill:#d00000;fill-opacity:.12;stroke:#d00000;stroke-width:2}
.legend{list-style:none;padding:0;margin:4px 0;display:flex;flex-wrap:wrap;gap:4px 14px}
.swatch{display:inline-block;width:12px;height:12px;margin-right:5px;vertical-align:-1px;border-radius:2px}
table.data{border-collapse:collapse;margin:8px 0;width:100%}
table.data th,table.data td{border:1px solid var(--line);padding:4px 8px;text-align:left;vertical-align:top}
table.data th{background:var(--panel)}td.num{text-align:right}caption{text-align:left;color:var(--muted)}
.findings td{font-size:13px}.evidence{margin:4px 0 0;padding-left:18px}
.sev{display:inline-block;border-left:6px solid;padding:0 6px;background:var(--panel)}
.nodata{background:var(--panel);border:1px dashed var(--line);padding:10px;border-radius:6px}
.alert{border-left:4px solid #d00000;background:#fff4f4;padding:8px 12px;margin:8px 0}
.ok{color:#1b5e20}.plain{padding-left:18px}
details{margin:6px 0}summary{cursor:pointer;color:var(--muted)}
@media print{details{display:none}}
"""

_CSS += """
[data-hidden]{display:none!important}
.filters{position:sticky;top:0;z-index:5;background:#fff;border-bottom:1px solid var(--line);padding:8px 0;
display:flex;flex-wrap:wrap;gap:6px 14px;align-items:center}
.filters .flabel{color:var(--muted)}.filters .n{color:var(--muted);font-size:12px}
.filters select,.filters input[type=search]{font:inherit;padding:2px 4px}
#filter-status{color:var(--muted);margin-left:auto}
.incident{border:1px solid var(--line);border-left:6px solid #999;border-radius:6px;padding:6px 14px;margin:12px 0;
background:#fff}
.incident h3{font-size:16px;margin:6px 0}.incident .meta{color:var(--muted);margin:2px 0}
.incident p{margin:4px 0}.kind{display:inline-block;background:var(--panel);border:1px solid var(--line);
border-radius:4px;padding:0 6px;margin:0 4px 2px 0;font-size:12.5px}
pre.cmd{background:#1d1f21;color:#e8e8e8;padding:8px 10px;border-radius:6px;overflow-x:auto;white-space:pre;
font-size:12px}
.span-band:hover{fill-opacity:.4}
"""

# The page's one script: filters by severity, report and subject (no network, no library). State lives in
# the URL hash so a filtered view can be linked: #sev=critical,error&report=fencing_violations&subject=orders-3
# It marks the document when it ran (data-filters="ready") or failed (data-script-error), for the tests.
_SCRIPT = """
(function () {
  "use strict";
  var root = document.documentElement;
  try {
    var boxes = [].slice.call(document.querySelectorAll("#filters input[name=sev]"));
    var report = document.getElementById("f-report");
    var subject = document.getElementById("f-subject");
    var status = document.getElementById("filter-status");
    var items = [].slice.call(document.querySelectorAll("[data-sev],[data-rep],[data-subj]"));
    var read = function () {
      var h = {};
      location.hash.replace(/^#/, "").split("&").forEach(function (kv) {
        var i = kv.indexOf("=");
        if (i > 0) {
          var v = kv.slice(i + 1).replace(/\\+/g, " ");
          try { v = decodeURIComponent(v); } catch (e) { /* a malformed %-escape (a hand-edited link): taken as written */ }
          h[kv.slice(0, i)] = v;
        }
      });
      if (h.sev !== undefined) {
        var want = h.sev.split(",");
        boxes.forEach(function (b) { b.checked = want.indexOf(b.value) >= 0; });
      }
      if (h.report !== undefined) { report.value = h.report; }
      if (h.subject !== undefined) { subject.value = h.subject; }
    };
    var apply = function (write) {
      var sev = boxes.filter(function (b) { return b.checked; }).map(function (b) { return b.value; });
      var rep = report.value;
      var sub = subject.value.trim().toLowerCase();
      var shown = 0, total = 0;
      items.forEach(function (el) {
        var s = el.getAttribute("data-sev"), r = el.getAttribute("data-rep"), j = el.getAttribute("data-subj");
        var ok = (s === null || s.split(" ").some(function (v) { return sev.indexOf(v) >= 0; })) &&
                 (!rep || r === null || (" " + r + " ").indexOf(" " + rep + " ") >= 0) &&
                 (!sub || j === null || j.indexOf(sub) >= 0);
        if (ok) { el.removeAttribute("data-hidden"); } else { el.setAttribute("data-hidden", ""); }
        if (el.classList.contains("incident")) { total += 1; if (ok) { shown += 1; } }
      });
      status.textContent = shown + " of " + total + " incidents shown";
      if (write) {
        var hash = "#sev=" + sev.join(",") + "&report=" + encodeURIComponent(rep) +
                   "&subject=" + encodeURIComponent(subject.value.trim());
        try { history.replaceState(null, "", hash); } catch (e) { location.hash = hash; }
      }
    };
    read();
    apply(false);
    boxes.forEach(function (b) { b.addEventListener("change", function () { apply(true); }); });
    report.addEventListener("change", function () { apply(true); });
    subject.addEventListener("input", function () { apply(true); });
    window.addEventListener("hashchange", function () { read(); apply(false); });
    root.setAttribute("data-filters", "ready");
  } catch (err) {
    root.setAttribute("data-script-error", String((err && err.message) || err));
    throw err;
  }
})();
"""
