"""The Python worker daemon of the local sessions we start (``spark.python.daemon.module``): pyspark's own
daemon, with Spark's bundled copies of pyspark taken off the workers' ``sys.path``.

Spark puts ``pyspark.zip``, the py4j zip and its ``spark-core`` jar at the front of every Python worker's
``PYTHONPATH``. With pyspark installed from PyPI those are copies of the installed package, and costly ones:
modules imported from a zip are compiled from source in every worker (there is no ``.pyc`` in it), and pyspark
calls ``importlib.invalidate_caches()`` before every task, which rereads each zip's directory (the jar's holds
~6,000 entries). Over the demo audit's ~250 tasks that was ~1.5-2.5 of the workers' ~7-9 CPU-s
(BENCHMARKS.md, "Issue 16", tenth round).

They are dropped only when they belong to the same pyspark installation the workers import anyway (the zips
under its ``python/lib``, the jar under its ``jars``); a separate Spark distribution's copies are left where
they are. This module must not import pyspark before that is decided: it runs as ``python -m jobs.pydaemon``.
"""

from __future__ import annotations

import importlib.machinery
import os
import sys

#: The entries Spark adds for pyspark itself (``PythonUtils.sparkPythonPath``).
_BUNDLED = ("pyspark.zip", "py4j-", "spark-core_")


def bundled_entries(path: list[str]) -> list[str]:
    """The entries of ``path`` that are Spark's bundled copies of the pyspark found without them (empty when
    there are none, when pyspark is found only through them, or when any of them lies outside that pyspark)."""
    ours = [p for p in path if p.endswith((".zip", ".jar")) and os.path.basename(p).startswith(_BUNDLED)]
    if not ours:
        return []
    rest = [p for p in path if p not in ours]
    spec = importlib.machinery.PathFinder.find_spec("pyspark", rest)
    if spec is None or not spec.origin:
        return []
    home = os.path.realpath(os.path.dirname(spec.origin)) + os.sep
    if not all(os.path.realpath(p).startswith(home) for p in ours):
        return []
    if importlib.machinery.PathFinder.find_spec("py4j", rest) is None:  # py4j only in its zip: keep that
        ours = [p for p in ours if not os.path.basename(p).startswith("py4j-")]
    return ours


def drop_bundled() -> list[str]:
    """Take :func:`bundled_entries` off ``sys.path`` and out of the import system's finder cache (which
    ``importlib.invalidate_caches()`` walks); returns what was dropped."""
    gone = bundled_entries(sys.path)
    if gone:
        sys.path[:] = [p for p in sys.path if p not in gone]
        for p in gone:
            sys.path_importer_cache.pop(p, None)
    return gone


if __name__ == "__main__":
    drop_bundled()
    from pyspark.daemon import manager

    manager()
