"""The Databricks notebook source file, executed as Databricks would (``__name__ == "__main__"``) with stub
``dbutils``/``display`` objects and the shared ``spark``: widgets -> Config -> run_audit -> display."""

from __future__ import annotations

import base64
import datetime as dt
import importlib.util
import json
import re
from pathlib import Path

import pyarrow as pa
import pytest

from epochlib import checkpoint, coordinator

NOTEBOOK = Path(__file__).resolve().parent.parent / "notebooks" / "epoch_audit_databricks.py"
DAY = dt.date(2024, 3, 1)
T0 = 1709251200000 + 3_600_000  # 2024-03-01T01:00:00Z


def commit_lines(group: str, offsets: tuple[int, ...], t0: int, *, log_partition: int) -> str:
    """JSONL dump lines of ``group``'s commits of ``orders-0`` at ``offsets``, a minute apart from ``t0`` (epoch ms)."""
    lines = []
    for i, off in enumerate(offsets):
        key = coordinator.encode_offset_commit_key(group, "orders", 0)
        value = coordinator.encode_offset_commit_value(off, leader_epoch=2, commit_timestamp=t0 + 60_000 * i)
        lines.append(json.dumps({"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode(),
                                 "partition": log_partition, "offset": i, "timestamp": t0 + 60_000 * i}))
    return "\n".join(lines) + "\n"


def write_tiny_inputs(base: Path) -> dict[str, str]:
    """A few commits of one group (one rewind 200 -> 50) and two brokers' lineage of ``orders-0`` on DAY."""
    offsets = base / "offsets"
    offsets.mkdir(parents=True)
    (offsets / "commits.jsonl").write_text(commit_lines("g1", (100, 200, 50), T0, log_partition=7))
    for broker in (1, 2):
        snap = base / "logdirs" / f"broker={broker}" / "snapshot=20240301T060000Z"
        (snap / "orders-0").mkdir(parents=True)
        (snap / "orders-0" / "leader-epoch-checkpoint").write_text(
            checkpoint.format_leader_epoch_checkpoint([(0, 0), (2, 10)]))
        (snap / "log-start-offset-checkpoint").write_text(checkpoint.format_offset_checkpoint({("orders", 0): 0}))
    return {"offsets": str(offsets), "logdirs": str(base / "logdirs")}


class StubWidgets:
    """``dbutils.widgets`` with preset values (what a user typed) over the notebook's defaults."""

    def __init__(self, typed: dict[str, str]) -> None:
        self.typed = dict(typed)
        self.defaults: dict[str, str] = {}

    def text(self, name: str, default: str, label: str | None = None) -> None:
        self.defaults[name] = default

    def get(self, name: str) -> str:
        if name not in self.defaults:
            raise ValueError(f"InputWidgetNotDefined: {name}")
        return self.typed.get(name, self.defaults[name])


class NotebookExit(Exception):
    """What ``dbutils.notebook.exit`` does in the stub: stop the notebook here."""


class StubNotebook:
    def __init__(self) -> None:
        self.exited: str | None = None

    def exit(self, value: str) -> None:
        self.exited = value
        raise NotebookExit(value)


class StubDbutils:
    def __init__(self, typed: dict[str, str]) -> None:
        self.widgets = StubWidgets(typed)
        self.notebook = StubNotebook()


def run_notebook_file(spark, typed: dict[str, str]) -> tuple[dict, list, StubDbutils]:
    """Exec the notebook file like Databricks does; returns (its globals, displayed objects, dbutils)."""
    shown: list = []
    dbutils = StubDbutils(typed)
    scope = {"__name__": "__main__", "spark": spark, "dbutils": dbutils, "display": shown.append}
    exec(compile(NOTEBOOK.read_text(), str(NOTEBOOK), "exec"), scope)
    return scope, shown, dbutils


def _cells(text: str) -> list[str]:
    return text.split("\n# COMMAND ----------\n")


def test_widgets_are_created_in_their_own_cell_and_a_first_run_stops_clearly(capsys):
    """A first run (empty widgets) shows the form and stops with a message, not a ConfigError."""
    cells = _cells(NOTEBOOK.read_text())
    widget_cell = [c for c in cells if "define_widgets(dbutils)" in c and "def " not in c]
    assert len(widget_cell) == 1 and "run_notebook(" not in widget_cell[0]
    with pytest.raises(NotebookExit) as stopped:
        run_notebook_file(None, {})
    assert "fill in the widgets" in str(stopped.value) and "cluster" in str(stopped.value)
    assert "ConfigError" not in capsys.readouterr().out


def test_notebook_source_format():
    text = NOTEBOOK.read_text()
    assert text.startswith("# Databricks notebook source\n")
    assert text.count("\n# COMMAND ----------\n") >= 4
    assert re.search(r"^# MAGIC %md$", text, re.M)
    assert "%pip install --no-deps" in text  # never replace the runtime's pyspark
    assert "run_audit(spark, config, date_from, date_to, progress=progress)" in text


def test_import_without_databricks_runs_nothing():
    spec = importlib.util.spec_from_file_location("nb", NOTEBOOK)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)  # no dbutils/display/spark: only definitions
    assert callable(module.run_notebook) and not hasattr(module, "epoch_audit_run")


def test_build_config_from_widgets_only():
    spec = importlib.util.spec_from_file_location("nb", NOTEBOOK)
    nb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nb)
    cfg = nb.build_config({"cluster": "prod-us2", "catalog": "kafka", "schema": "audit",
                           "offsets": "/Volumes/k/e/offsets"})
    assert cfg.output.table_location("stale_metadata") == "kafka.audit.stale_metadata"
    assert cfg.inputs.offsets == "/Volumes/k/e/offsets"
    from jobs.errors import ConfigError

    with pytest.raises(ConfigError, match="cluster widget"):
        nb.build_config({"catalog": "kafka", "schema": "audit"})
    with pytest.raises(ConfigError, match="catalog and schema"):
        nb.build_config({"cluster": "c", "catalog": "kafka"})
    over = nb.build_config({"conf": str(NOTEBOOK.parent.parent / "conf" / "databricks.example.toml"),
                            "cluster": "other", "catalog": "cat", "schema": "sch"})
    assert over.cluster == "other" and over.output.catalog == "cat" and over.output.root is None


def test_the_kraft_metadata_log_has_a_widget_like_the_other_inputs():
    spec = importlib.util.spec_from_file_location("nb", NOTEBOOK)
    nb = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(nb)
    holder = StubDbutils({})
    nb.define_widgets(holder)
    assert "cluster_metadata" in holder.widgets.defaults and "cluster_metadata" in nb.widget_values(holder)
    only_log = {"cluster": "c", "output_root": "/o", "cluster_metadata": "/Volumes/k/e/cluster-metadata"}
    assert nb.missing_widgets(only_log) == []  # the metadata log alone is an input
    assert nb.build_config(only_log).inputs.cluster_metadata == "/Volumes/k/e/cluster-metadata"
    over = nb.build_config({"conf": str(NOTEBOOK.parent.parent / "conf" / "databricks.example.toml"),
                            "cluster_metadata": "/Volumes/k/e/other-log"})
    assert over.inputs.cluster_metadata == "/Volumes/k/e/other-log"
    assert "cluster_metadata" in nb.missing_widgets({"cluster": "c", "output_root": "/o"})[0]


@pytest.mark.spark
def test_notebook_calls_run_audit_and_displays_findings(spark, tmp_path, monkeypatch):
    """The wiring, independent of the report jobs: run_audit is replaced by one that writes a finding."""
    from jobs import audit, schemas
    from jobs.sink import write_small

    calls = []

    def fake_run_audit(spark_, config, date_from, date_to, **kwargs):
        calls.append((spark_, config, date_from, date_to, kwargs))
        schema = schemas.arrow_schema("spurious_offset_resets")
        row = {f.name: None for f in schema}
        row.update(finding_id="f1", cluster=config.cluster, event_date=date_from, rule="S1e", kind="spurious_rewind",
                   severity="warning", event_ts=dt.datetime(2024, 3, 1, 1, tzinfo=dt.timezone.utc),
                   group_id="g1", evidence=["commits.jsonl line 3"])
        write_small(pa.Table.from_pylist([row], schema=schema), "spurious_offset_resets", config=config,
                    date_range=(date_from, date_to))
        return "result"

    monkeypatch.setattr(audit, "run_audit", fake_run_audit)
    typed = {"from": "2024-03-01", "to": "2024-03-01", "cluster": "nb", "output_root": str(tmp_path / "tables"),
             **write_tiny_inputs(tmp_path / "in")}
    scope, shown, dbutils = run_notebook_file(spark, typed)

    assert set(dbutils.widgets.defaults) >= {"from", "to", "conf", "cluster", "catalog", "schema"}
    assert dbutils.widgets.defaults["from"] == (dt.datetime.now(dt.timezone.utc).date()
                                                - dt.timedelta(days=1)).isoformat()
    (spark_, config, d0, d1, kwargs) = calls[0]
    assert spark_ is spark and config.cluster == "nb" and (d0, d1) == (DAY, DAY) and kwargs == {"progress": print}
    assert scope["epoch_audit_run"]["result"] == "result"
    # a summary, then the one report table that exists (the other two are noted as missing)
    assert len(shown) == 2
    summary = [r.asDict() for r in shown[0].collect()]
    assert summary == [{"report": "spurious_offset_resets", "rule": "S1e", "kind": "spurious_rewind",
                        "severity": "warning", "count": 1}]
    rows = shown[1].collect()
    assert [(r.finding_id, r.group_id, list(r.evidence)) for r in rows] == [("f1", "g1", ["commits.jsonl line 3"])]


@pytest.mark.spark
@pytest.mark.slow
def test_notebook_end_to_end_on_tiny_input(spark, tmp_path):
    """The real run_audit on generated inputs: silver + report tables written, every report displayed."""
    pytest.importorskip("jobs.reports", reason="report jobs not landed yet")
    typed = {"from": "2024-03-01", "to": "2024-03-01", "cluster": "nb-e2e", "output_root": str(tmp_path / "tables"),
             **write_tiny_inputs(tmp_path / "in")}
    scope, shown, _ = run_notebook_file(spark, typed)
    run = scope["epoch_audit_run"]
    assert set(run["frames"]) == set(run["config"].reports)
    assert len(shown) == 1 + len(run["config"].reports)
    for table in ("offset_commits", "epoch_lineage", "audit_runs", *run["config"].reports):
        assert (tmp_path / "tables" / table / "_delta_log").is_dir(), table
    resets = run["frames"]["spurious_offset_resets"].collect()
    assert any(r.group_id == "g1" and r.kind.startswith("spurious_rewind") for r in resets), resets
