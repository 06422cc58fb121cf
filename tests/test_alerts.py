"""The metrics file as Prometheus reads it (no Spark): what an alert rule can select."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from jobs.alerts import run_document, write_metrics


def test_two_rules_with_one_kind_are_two_series_not_one_overwriting_the_other(tmp_path: Path) -> None:
    # S1b and S2b both classify a reset as operator_reset (detection-rules.md): one series per kind lost a count
    day = dt.date(2024, 3, 4)
    doc = run_document(cluster="c1", date_from=day, date_to=day, status="ok", summary=None)
    doc["findings"]["by_kind"] = [
        {"report": "spurious_offset_resets", "rule": "S1b", "kind": "operator_reset", "severity": "info", "count": 3},
        {"report": "spurious_offset_resets", "rule": "S2b", "kind": "operator_reset", "severity": "info", "count": 2},
    ]
    doc["findings"]["by_severity"]["info"] = 5
    path = write_metrics(tmp_path / "m.prom", doc)
    series = {(s.labels.get("rule"), s.labels["kind"]): s.value
              for fam in text_string_to_metric_families(path.read_text()) if fam.name == "epoch_audit_findings"
              for s in fam.samples}
    assert series == {("S1b", "operator_reset"): 3, ("S2b", "operator_reset"): 2}
    assert sum(series.values()) == 5  # adds up to epoch_audit_findings_by_severity{severity="info"}


def test_a_copy_s_cut_batch_is_in_the_json_and_the_metrics_not_only_in_audit_runs(tmp_path: Path) -> None:
    # a live copy's last batch (or a capture's unpaired frame) is no unit read, yet commits are missing with it: a
    # run that is ok says how many, where an alert can see them
    from jobs.runlog import SourceCounts

    day = dt.date(2024, 3, 4)
    counts = [SourceCounts("offsets", "batch", 10, 0, 40, units_unpaired=1), SourceCounts("logdirs", "file", 3, 0, 3)]
    doc = run_document(cluster="c1", date_from=day, date_to=day, status="ok", summary=None, counts=counts)
    assert [(u["source_kind"], u["unpaired"]) for u in doc["units"]] == [("offsets", 1), ("logdirs", None)]
    path = write_metrics(tmp_path / "m.prom", doc)
    unpaired = {s.labels["source_kind"]: s.value for fam in text_string_to_metric_families(path.read_text())
                if fam.name == "epoch_audit_units_unpaired" for s in fam.samples}
    assert unpaired == {"offsets": 1}  # no series where the input has no such limit (a checkpoint file)
