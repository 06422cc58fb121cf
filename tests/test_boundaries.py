"""The two packages keep to their jobs: epochlib imports neither pyspark nor deltalake."""

from __future__ import annotations

import subprocess
import sys

MODULES = ["epochlib", "epochlib.coordinator", "epochlib.protocol", "epochlib.records", "epochlib.checkpoint",
           "epochlib.dumps", "epochlib.offsets_log", "epochlib.pcap", "epochlib.lineage", "epochlib.rules", "epochlib.sim"]


def test_epochlib_imports_no_spark_or_delta() -> None:
    code = ("import sys\n" + "".join(f"import {m}\n" for m in MODULES)
            + "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'deltalake', 'py4j'))\n"
              "print(','.join(bad))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "", f"epochlib pulled in: {out.stdout.strip()}"


def test_cli_module_imports_without_spark() -> None:
    """`epoch-audit decode` and `--help` must not pay for a JVM or pyspark import."""
    code = "import sys, jobs.cli, jobs.decode\nprint(any(m.startswith('pyspark') for m in sys.modules))\n"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
