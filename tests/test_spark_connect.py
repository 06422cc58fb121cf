"""The audit on a Spark Connect session, as a Databricks notebook on a shared (standard) access mode cluster or
serverless compute runs it: a local Connect server from the pip install (``SparkSession.builder.remote("local[1]")``).

Skipped unless pyspark's Connect dependencies (``pyspark[connect]``: grpcio, grpcio-status, googleapis-common-protos,
zstandard) are installed; the ``test`` extra installs them (pyproject.toml), so CI runs it. The session runs in a
subprocess: starting a local Connect server turns the process into a Connect client for good (``SPARK_REMOTE``,
``SPARK_CONNECT_MODE_ENABLED``), and the other tests need the classic shared session. ``test_connect_fallbacks.py``
checks the helpers without a server.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

for _module in ("grpc", "grpc_status", "google.rpc", "zstandard"):
    pytest.importorskip(_module, reason="pyspark's Spark Connect dependencies are not installed (pyspark[connect])")

ROOT = Path(__file__).resolve().parent.parent

#: Runs in the subprocess: the demo's inputs audited on a local Connect server with the delta-rs sink (the commit
#: pass spilled, as a large run's is), then the notebook's display of the findings; one RESULT line of JSON.
SCRIPT = r"""
import importlib.util, json, os, sys
from pathlib import Path
from pyspark.sql import SparkSession
import jobs.reports.commit_spill as commit_spill
from jobs.audit import run_audit
from jobs.config import default_config

root = Path(sys.argv[1])
start, end, cluster_metadata = sys.argv[2:5]
commit_spill.MIN_ROWS = 0  # the spilled commit pass (a large run's) too
spark = (SparkSession.builder.remote("local[1]").config("spark.sql.shuffle.partitions", "2")
         .config("spark.ui.enabled", "false").getOrCreate())
try:
    spark.sparkContext
    raise SystemExit("not a Spark Connect session: it has a SparkContext")
except AttributeError:
    pass
inputs = root / "inputs"
config = default_config().with_overrides(
    offsets=str(inputs / "offsets"), logdirs=str(inputs / "logdirs"), metadata=str(inputs / "metadata"),
    cluster_metadata=cluster_metadata, output_root=str(root / "connect"))
lines = []
result = run_audit(spark, config, start, end, progress=lines.append)
spec = importlib.util.spec_from_file_location("notebook", sys.argv[5])
notebook = importlib.util.module_from_spec(spec)
spec.loader.exec_module(notebook)
shown = []
notebook.show_findings(spark, config, result.run.range_from, result.run.range_to, lambda df: shown.append(df.count()))
spark.stop()
print("RESULT " + json.dumps({"status": result.status, "findings": result.findings, "lines": lines, "shown": shown}))
"""


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_audit_on_spark_connect_finds_what_spark_classic_finds(spark, tmp_path) -> None:
    from deltalake import DeltaTable

    from epochlib import sim
    from jobs.audit import run_audit
    from jobs.config import default_config

    res = sim.simulate(sim.preset("demo"), tmp_path / "inputs")
    start, end = res.date_range
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "PYSPARK_PYTHON": sys.executable}
    env.pop("PYSPARK_GATEWAY_PORT", None)
    proc = subprocess.run([sys.executable, "-c", SCRIPT, str(tmp_path), str(start), str(end),
                           str(res.cluster_metadata), str(ROOT / "notebooks" / "epoch_audit_databricks.py")],
                          capture_output=True, text=True, env=env, timeout=1500)
    out = [line for line in proc.stdout.splitlines() if line.startswith("RESULT ")]
    assert proc.returncode == 0 and out, proc.stderr[-3000:]
    connect = json.loads(out[-1][len("RESULT "):])
    assert "spark: a Spark Connect session: no task counts or job descriptions (no SparkContext)" in connect["lines"]

    inputs = tmp_path / "inputs"
    config = default_config().with_overrides(
        offsets=str(inputs / "offsets"), logdirs=str(inputs / "logdirs"), metadata=str(inputs / "metadata"),
        cluster_metadata=str(res.cluster_metadata), output_root=str(tmp_path / "classic"))
    classic = run_audit(spark, config, start, end)
    assert connect["status"] == classic.status
    assert connect["findings"] == classic.findings and sum(classic.findings.values()) > 0
    assert connect["shown"][1:] == [classic.findings[r] for r in config.reports]  # the notebook's display
    for table in (*config.reports, "offset_commits", "epoch_lineage", "quarantine"):
        ids = [sorted(map(str, DeltaTable(str(tmp_path / side / table)).to_pyarrow_table().column(
            "finding_id" if table in config.reports else "source").to_pylist())) for side in ("connect", "classic")]
        assert ids[0] == ids[1], table
