# Databricks notebook source
# MAGIC %md
# MAGIC # epoch-audit on Databricks
# MAGIC
# MAGIC Audits **epoch consistency** of one Kafka cluster over a UTC date range (stale metadata, fencing
# MAGIC violations, spurious offset resets) on this notebook's `spark`, writes the Delta tables, and shows
# MAGIC the findings. It calls exactly what the CLI and `spark-submit.sh` call:
# MAGIC `jobs.audit.run_audit(spark, config, from, to, progress=print)`.
# MAGIC
# MAGIC **Runtime**: Databricks Runtime **17.0 or later** (Apache Spark 4.0): the reports use Spark 4's
# MAGIC `applyInArrow`, which older runtimes (Spark 3.5) do not have.
# MAGIC
# MAGIC **Compute**: a dedicated (single user) or standard (shared) access mode cluster. Serverless compute refuses
# MAGIC caching, which the run needs: it then stops at its start with one line saying so (README, "Databricks").
# MAGIC
# MAGIC **Install** (once per cluster, or at the top of the notebook). The runtime already ships pyspark, pyarrow,
# MAGIC numpy, pandas and Delta: installing epoch-audit *with* its dependencies would replace the runtime's
# MAGIC pyspark. So install the wheel without dependencies, then the pure-Python ones it needs (the same list
# MAGIC as the README's; never the `delta-spark` extra here: Delta is built in):
# MAGIC
# MAGIC ```
# MAGIC %pip install --no-deps /Volumes/<catalog>/<schema>/<volume>/epoch_audit-0.1.0-py3-none-any.whl
# MAGIC %pip install "deltalake>=1.0,<2" "click>=8.2,<9" "prometheus_client>=0.20,<1" "cramjam>=2.11,<3" "zstandard>=0.22,<1" "crc32c>=2.4,<3" "dpkt>=1.9.8,<2" "fsspec>=2024.2"
# MAGIC ```
# MAGIC Build the wheel with `python -m pip wheel --no-deps -w dist .` in a checkout and upload it to a volume.
# MAGIC
# MAGIC **Widgets**: `from`/`to` (UTC dates, default yesterday), `conf` (a TOML config such as
# MAGIC `conf/databricks.example.toml` on a volume or in the workspace; optional), and overrides: `cluster`,
# MAGIC `catalog` + `schema` (catalog tables), or `output_root` (a path), and the input locations (`offsets`,
# MAGIC `logdirs`, `metadata`, `cluster_metadata`: the KRaft metadata log). Without a config file, `cluster`, an
# MAGIC output and at least one input are required.
# MAGIC
# MAGIC Config files are read with plain Python file I/O: use `/Volumes/...` or `/Workspace/...` paths
# MAGIC (a `dbfs:/x` file is `/dbfs/x`).

# COMMAND ----------

# MAGIC %md
# MAGIC Optional: uncomment to install from a wheel in a volume (see above), then the notebook restarts Python.

# COMMAND ----------

# %pip install --no-deps /Volumes/kafka/tools/wheels/epoch_audit-0.1.0-py3-none-any.whl
# %pip install "deltalake>=1.0,<2" "click>=8.2,<9" "prometheus_client>=0.20,<1" "cramjam>=2.11,<3" "zstandard>=0.22,<1" "crc32c>=2.4,<3" "dpkt>=1.9.8,<2" "fsspec>=2024.2"

# COMMAND ----------

import dataclasses
import datetime as dt
from collections.abc import Callable
from typing import Any

#: Widget name -> (default, label). Defaults that depend on the day are filled in by define_widgets.
WIDGETS: dict[str, tuple[str, str]] = {
    "from": ("", "From (UTC date, YYYY-MM-DD)"),
    "to": ("", "To (UTC date, inclusive)"),
    "conf": ("", "Config TOML path (optional)"),
    "cluster": ("", "Cluster name (overrides config)"),
    "catalog": ("", "Output catalog"),
    "schema": ("", "Output schema"),
    "output_root": ("", "Output root path (instead of catalog)"),
    "offsets": ("", "Input: __consumer_offsets dumps"),
    "logdirs": ("", "Input: log-dir snapshots"),
    "metadata": ("", "Input: Metadata captures"),
    "cluster_metadata": ("", "Input: KRaft __cluster_metadata-0 copies"),
}


#: The input widgets (the config's [inputs] locations).
INPUTS: tuple[str, ...] = ("offsets", "logdirs", "metadata", "cluster_metadata")


def yesterday_utc() -> dt.date:
    """The default audit day: yesterday in UTC (what the nightly job audits)."""
    return dt.datetime.now(dt.timezone.utc).date() - dt.timedelta(days=1)


def define_widgets(dbutils: Any) -> None:
    """Create the text widgets (idempotent: Databricks keeps the values a user typed)."""
    day = yesterday_utc().isoformat()
    for name, (default, label) in WIDGETS.items():
        dbutils.widgets.text(name, day if name in ("from", "to") else default, label)


def widget_values(dbutils: Any) -> dict[str, str]:
    """Every widget's value, stripped ('' when unset)."""
    values = {}
    for name in WIDGETS:
        try:
            values[name] = (dbutils.widgets.get(name) or "").strip()
        except Exception:  # a widget removed by hand: treat as unset
            values[name] = ""
    return values


def build_config(values: dict[str, str]) -> Any:
    """A validated :class:`jobs.config.Config` from the config file (if any) and the widget overrides.

    Raises:
        jobs.errors.ConfigError: a bad config file or widget value, with a one-line message.
    """
    from jobs.config import load_config, parse_config
    from jobs.errors import ConfigError

    catalog, schema, root = values.get("catalog"), values.get("schema"), values.get("output_root")
    if root and (catalog or schema):
        raise ConfigError("set either the output_root widget or catalog + schema, not both")
    if bool(catalog) != bool(schema):
        raise ConfigError("the catalog and schema widgets go together: set both or neither")
    if values.get("conf"):
        config = load_config(values["conf"])
    else:
        raw: dict[str, Any] = {"cluster": values.get("cluster") or ""}
        if not raw["cluster"]:
            raise ConfigError("no config file: set the cluster widget (or the conf widget)")
        raw["inputs"] = {k: values[k] for k in INPUTS if values.get(k)}
        if catalog:
            raw["output"] = {"catalog": catalog, "schema": schema}
        elif root:
            raw["output"] = {"root": root}
        else:
            raise ConfigError("no config file: set catalog + schema (or output_root) for the output tables")
        return parse_config(raw, base_dir=".")
    config = config.with_overrides(
        cluster=values.get("cluster") or None, output_root=root or None,
        offsets=values.get("offsets") or None, logdirs=values.get("logdirs") or None,
        metadata=values.get("metadata") or None, cluster_metadata=values.get("cluster_metadata") or None)
    if catalog:
        config = dataclasses.replace(
            config, output=dataclasses.replace(config.output, root=None, catalog=catalog, schema=schema))
    return config


def missing_widgets(values: dict[str, str]) -> list[str]:
    """What a run still needs from the widgets (empty when it can start): without a config file, a
    cluster, an output (catalog + schema, or output_root) and at least one input."""
    if values.get("conf"):
        return []
    missing = []
    if not values.get("cluster"):
        missing.append("cluster")
    if not (values.get("catalog") and values.get("schema")) and not values.get("output_root"):
        missing.append("catalog + schema (or output_root)")
    if not any(values.get(k) for k in INPUTS):
        missing.append(f"at least one input ({', '.join(INPUTS)})")
    return missing


def stop_unless_ready(dbutils: Any) -> None:
    """On a first run (widgets just created, still empty) stop the notebook with a clear message instead
    of a configuration error: Databricks shows the widget form, the user fills it and runs again."""
    missing = missing_widgets(widget_values(dbutils))
    if missing:
        message = ("epoch-audit: fill in the widgets at the top of the notebook (" + "; ".join(missing)
                   + "), or set `conf` to a config file, then run the notebook again.")
        print(message)
        dbutils.notebook.exit(message)


def show_findings(spark: Any, config: Any, date_from: dt.date, date_to: dt.date,
                  display: Callable[[Any], Any]) -> dict[str, Any]:
    """``display()`` a count by (report, rule, kind, severity), then each report's findings in the range.

    Reads through :func:`jobs.sink.read_table` (Spark), so it works for catalog and path outputs alike.
    Returns report -> DataFrame (reports whose table does not exist yet are skipped with a note).
    """
    from pyspark.sql import functions as F

    from jobs.errors import SinkError
    from jobs.sink import read_table

    frames: dict[str, Any] = {}
    for report in config.reports:
        try:
            df = read_table(spark, report, config, cluster=config.cluster, date_range=(date_from, date_to))
        except SinkError as exc:
            print(f"{report}: no table yet ({exc})")
            continue
        frames[report] = df
    if not frames:
        print("no report tables to show")
        return frames
    counts = None
    for report, df in frames.items():
        part = df.groupBy("rule", "kind", "severity").count().withColumn("report", F.lit(report))
        counts = part if counts is None else counts.unionByName(part)
    severity_rank = (F.when(F.col("severity") == "critical", 0).when(F.col("severity") == "error", 1)
                     .when(F.col("severity") == "warning", 2).otherwise(3))
    display(counts.select("report", "rule", "kind", "severity", "count")
            .orderBy("report", severity_rank, "rule", "kind"))
    for report, df in frames.items():
        print(f"{report}: findings {date_from} .. {date_to}")
        display(df.orderBy(severity_rank, F.col("event_ts").desc()))
    return frames


def run_notebook(spark: Any, dbutils: Any, display: Callable[[Any], Any], *,
                 progress: Callable[[str], None] = print) -> dict[str, Any]:
    """The notebook's code path: widgets -> Config -> ``run_audit`` -> ``display`` of the findings.

    Returns what it did (config, range, the :class:`jobs.audit.AuditResult`, the displayed frames) so a
    test, or the next cell, can look at it.
    """
    from jobs import audit
    from jobs.config import parse_date_range

    values = widget_values(dbutils)
    date_from, date_to = parse_date_range(values["from"] or yesterday_utc(), values["to"] or None)
    config = build_config(values)
    progress(f"epoch-audit: cluster {config.cluster}, {date_from} .. {date_to}, "
             f"tables at {config.output.table_location('')}")
    result = audit.run_audit(spark, config, date_from, date_to, progress=progress)
    frames = show_findings(spark, config, date_from, date_to, display)
    return {"config": config, "date_from": date_from, "date_to": date_to, "result": result, "frames": frames}


# COMMAND ----------

# MAGIC %md
# MAGIC ## Widgets
# MAGIC This cell creates the form at the top of the notebook (it keeps what you typed). On a first run the
# MAGIC next cell stops with a message naming what to fill in.

# COMMAND ----------

if __name__ == "__main__" and "dbutils" in globals():  # on Databricks (or a test that passes stubs)
    define_widgets(dbutils)  # noqa: F821 - provided by the Databricks runtime

# COMMAND ----------

# MAGIC %md
# MAGIC ## Run
# MAGIC Fill in the widgets at the top, then run this cell. Findings are data: a run that finds problems
# MAGIC still succeeds. Rerunning a range replaces exactly its `event_date` partitions.

# COMMAND ----------

if __name__ == "__main__" and "dbutils" in globals():
    stop_unless_ready(dbutils)  # noqa: F821
    epoch_audit_run = run_notebook(spark, dbutils, display)  # noqa: F821

# COMMAND ----------

# MAGIC %md
# MAGIC ## Optional: the HTML report
# MAGIC Charts of the same range (stale-metadata rate per broker, resets, fencing kinds, and the epoch lineage of
# MAGIC the partitions you name) as one self-contained page. Uncomment to render it here; pass
# MAGIC `path=` to `write_html_report` instead to save it to a volume.

# COMMAND ----------

# from jobs.html_report import render_html_report
# displayHTML(render_html_report(epoch_audit_run["config"], epoch_audit_run["date_from"],
#                                epoch_audit_run["date_to"], partitions=[("orders", 0)], spark=spark))
