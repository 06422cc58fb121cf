"""Machine-readable outputs of a run for schedulers and alerting: the JSON summary (``--summary-json``)
and a Prometheus text-format metrics file (``--metrics-file``, for node_exporter's textfile collector).

Both are built from one plain dict, :func:`run_document`, so they always agree with each other and
with the terminal summary. Files are replaced atomically (a collector never reads half a file).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .fs import replace_text
from .runlog import SourceStatus
from .summary import SEVERITIES, Summary

__all__ = ["METRIC_PREFIX", "run_document", "write_metrics", "write_summary_json"]

METRIC_PREFIX = "epoch_audit"


def _source_doc(s: SourceStatus) -> dict[str, Any]:
    return {
        "status": s.status,
        "units_read": s.units_read,
        "units_decoded": s.units_decoded,
        "units_quarantined": s.units_quarantined,
        "records_decoded": s.records_decoded,
        "days_without_input": [d.isoformat() for d in s.days_without_input],
        "reason": s.reason,
        "rows_kept": s.rows_kept,
        "quarantine_kept": s.quarantine_kept,
        "days_kept": [d.isoformat() for d in s.days_kept],
    }


def run_document(
    *,
    cluster: str,
    date_from: dt.date,
    date_to: dt.date,
    status: str,
    summary: Summary | None,
    run_id: str | None = None,
    started_at: dt.datetime | None = None,
    duration_s: float | None = None,
    sources: Mapping[str, SourceStatus] | None = None,
    counts: Any = (),
    rows_per_day: Mapping[dt.date, Mapping[str, int]] | None = None,
    error: str | None = None,
    exit_code: int | None = None,
    warnings: Sequence[str] = (),
) -> dict[str, Any]:
    """Everything a scheduler or an alert needs about one run, as JSON-ready values.

    ``counts`` are the run's :class:`~jobs.runlog.SourceCounts` (per source kind and unit); ``warnings``
    what the run could not judge fully (:attr:`jobs.audit.AuditResult.warnings`: the lookback days whose
    state neither the inputs nor earlier runs held, settings likely to fail its tasks), the lines the terminal
    prints as ``warning:``.
    """
    findings: dict[str, Any] = {"total": 0, "by_severity": dict.fromkeys(SEVERITIES, 0), "by_kind": [],
                                "top": [], "missing_tables": [], "incidents": [], "input_roots": {}}
    days: dict[str, dict[str, Any]] = {}
    day = date_from
    while day <= date_to:
        days[day.isoformat()] = {"findings": dict.fromkeys(SEVERITIES, 0),
                                 "rows": dict((rows_per_day or {}).get(day, {}))}
        day += dt.timedelta(days=1)
    if summary is not None:
        findings["total"] = summary.total
        findings["by_severity"] = summary.by_severity()
        findings["by_kind"] = [
            {"report": r, "rule": rule, "kind": k, "severity": sev, "count": n}
            for (r, rule, k, sev), n in sorted(summary.by_kind.items())
        ]
        findings["top"] = [
            {k: (v.isoformat() if isinstance(v, (dt.date, dt.datetime)) else v) for k, v in row.items()}
            for row in summary.top_findings
        ]
        findings["missing_tables"] = list(summary.missing)
        # the incidents the terminal summary lists and the HTML report draws, with their re-check commands
        findings["incidents"] = [inc.to_dict(summary.roots) for inc in summary.incidents]
        # the values of the $OFFSETS/$LOGDIRS/... the re-check commands are written against
        findings["input_roots"] = {name.upper(): root for name, root in summary.roots.items()}
        for (d, sev), n in summary.by_day.items():
            if d is not None and d.isoformat() in days:
                days[d.isoformat()]["findings"][sev] = n
    return {
        "cluster": cluster,
        "from": date_from.isoformat(),
        "to": date_to.isoformat(),
        "run_id": run_id,
        "status": status,
        "exit_code": exit_code,
        "error": error,
        "started_at": started_at.isoformat() if started_at else None,
        "duration_s": None if duration_s is None else round(duration_s, 3),
        "warnings": list(warnings),
        "sources": {k: _source_doc(s) for k, s in (sources or {}).items()},
        "units": [
            {"source_kind": c.source_kind, "unit": c.unit, "read": c.units_read, "decoded": c.units_decoded,
             "quarantined": c.units_quarantined, "records": c.records_decoded,
             "unpaired": c.units_unpaired}  # the input's limits: a copy's cut batch, a capture's unpaired frames
            for c in counts
        ],
        "days": days,
        "findings": findings,
    }


def write_summary_json(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write :func:`run_document`'s dict as indented JSON (atomically)."""
    return replace_text(path, json.dumps(doc, indent=2, sort_keys=False, default=str) + "\n")


def _previous_last_success(path: Path, cluster: str) -> float | None:
    """The last-success time recorded in an earlier metrics file, so a failed run does not erase it."""
    from prometheus_client.parser import text_string_to_metric_families

    try:
        text = path.read_text(encoding="utf-8")
    except OSError:
        return None
    try:
        for family in text_string_to_metric_families(text):
            if family.name == f"{METRIC_PREFIX}_last_success_timestamp_seconds":
                for sample in family.samples:
                    if sample.labels.get("cluster") == cluster:
                        return float(sample.value)
    except Exception:  # a hand-edited or truncated file: start afresh
        return None
    return None


def write_metrics(path: str | Path, doc: Mapping[str, Any], *, now: dt.datetime | None = None) -> Path:
    """Write the run's metrics in Prometheus text format with ``prometheus_client`` (atomically).

    Metrics (all labelled with ``cluster``): ``epoch_audit_findings{report,rule,kind,severity}`` (the rule too:
    two rules can share a kind, e.g. S1b and S2b ``operator_reset``),
    ``epoch_audit_units_{read,decoded,quarantined,unpaired}{source_kind,unit}`` (unpaired: the input's limits, not
    bad input: a final batch a copy cut short, capture frames without their other half),
    ``epoch_audit_source_status{source_kind,status}`` and ``epoch_audit_run_status{status}`` (1 for the
    current one), ``epoch_audit_run_duration_seconds``, ``epoch_audit_last_run_timestamp_seconds`` and
    ``epoch_audit_last_success_timestamp_seconds`` (a run whose status is ok or partial; kept from the
    previous file when this run did not succeed).
    """
    from prometheus_client import CollectorRegistry, Gauge, write_to_textfile

    from .runlog import SOURCE_STATUSES, STATUSES

    path = Path(path)
    now = now or dt.datetime.now(dt.timezone.utc)
    cluster = doc["cluster"] or ""  # None: a config that could not be read named none
    registry = CollectorRegistry()
    p = METRIC_PREFIX
    findings = Gauge(f"{p}_findings", "Findings in the audited range, by report, rule, kind and severity.",
                     ["cluster", "report", "rule", "kind", "severity"], registry=registry)
    for row in doc["findings"]["by_kind"]:
        findings.labels(cluster, row["report"], row["rule"], row["kind"], row["severity"]).set(row["count"])
    severities = Gauge(f"{p}_findings_by_severity", "Findings in the audited range, by severity.",
                       ["cluster", "severity"], registry=registry)
    for sev, n in doc["findings"]["by_severity"].items():
        severities.labels(cluster, sev).set(n)
    units = {
        name: Gauge(f"{p}_units_{name}", f"Input units {name} by source kind and unit.",
                    ["cluster", "source_kind", "unit"], registry=registry)
        for name in ("read", "decoded", "quarantined", "unpaired")
    }
    for u in doc["units"]:
        for name, gauge in units.items():
            if u.get(name) is not None:  # unpaired: only where the input has such limits (segments, captures)
                gauge.labels(cluster, u["source_kind"], u["unit"]).set(u[name])
    source_status = Gauge(f"{p}_source_status", "1 for each configured source's current status.",
                          ["cluster", "source_kind", "status"], registry=registry)
    for kind, s in doc["sources"].items():
        for st in SOURCE_STATUSES:
            source_status.labels(cluster, kind, st).set(1 if s["status"] == st else 0)
    run_status = Gauge(f"{p}_run_status", "1 for the run's status (ok, partial, no_input, failed).",
                       ["cluster", "status"], registry=registry)
    for st in STATUSES:
        run_status.labels(cluster, st).set(1 if doc["status"] == st else 0)
    if doc.get("duration_s") is not None:
        Gauge(f"{p}_run_duration_seconds", "Wall time of the run.", ["cluster"],
              registry=registry).labels(cluster).set(doc["duration_s"])
    Gauge(f"{p}_last_run_timestamp_seconds", "When the run ended (Unix time).", ["cluster"],
          registry=registry).labels(cluster).set(now.timestamp())
    last_success = now.timestamp() if doc["status"] in ("ok", "partial") else _previous_last_success(path, cluster)
    if last_success is not None:
        Gauge(f"{p}_last_success_timestamp_seconds", "When a run last ended ok or partial (Unix time).",
              ["cluster"], registry=registry).labels(cluster).set(last_success)
    path.parent.mkdir(parents=True, exist_ok=True)
    write_to_textfile(str(path), registry)  # writes a temporary file and renames it
    return path
