"""A run never hangs: Spark 4 deadlocks its driver when two threads build cached plans (adaptive execution on)
and both fail, each rebuild locking the other's cache (SPARK-49982's recache). With the job's concurrent steps
that hung a nightly run for good, e.g. when the executors' Python lacked pyarrow. run_concurrently now sees the
deadlock in the JVM and fails with a clear error instead.

The deadlock locks the session's cache for good, so it runs in a Spark session of its own, in a subprocess.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

SCRIPT = r"""
import os
from pyspark.sql import SparkSession

spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
         .config("spark.sql.adaptive.enabled", "true").getOrCreate())
from jobs import session

session.DEADLOCK_POLL_S = 1.0


def slow_fail(batches):
    import time
    for b in batches:
        time.sleep(3)
        raise RuntimeError("boom")
        yield b


# two cached plans whose shuffle-map stages fail, a third that reads one of them
a = spark.range(4).mapInArrow(slow_fail, "id long").repartition(2).persist()
b = a.groupBy("id").count().persist()
c = spark.range(4).mapInArrow(slow_fail, "id long").repartition(2).persist()
try:
    session.run_concurrently(spark, [("a", a.count), ("b", b.collect), ("c", c.count)])
    print("RESULT none", flush=True)
except Exception as e:
    print("RESULT", type(e).__name__, "stuck:", ",".join(session.STUCK_STEPS), flush=True)
os._exit(0)  # the deadlocked driver threads never end (the CLI leaves so too)
"""


@pytest.mark.slow
def test_failing_cached_plans_built_at_once_end_the_run_instead_of_hanging_it() -> None:
    # The deadlock is a race: the failing steps usually lock each other's cache, but now and then one fails before
    # the other builds its plan and the run ends by itself (it did once, in a fresh-clone CI run). Up to three tries: every one
    # must end (without the watch a deadlocked one never does, and the subprocess times out) with a step's own error
    # or the deadlock named as such, and the watch must have seen the deadlock in one of them.
    seen = []
    for _ in range(3):
        out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120,
                             env={**os.environ, "PYSPARK_PYTHON": sys.executable})
        result = [line for line in out.stdout.splitlines() if line.startswith("RESULT")]
        assert out.returncode == 0 and len(result) == 1, out.stderr[-3000:]
        assert result[0].split()[1] in ("PythonException", "SparkDeadlock"), result
        seen.append(result[0])
        if result[0].split("stuck:")[1].strip():  # the deadlock happened, and the watch named its steps
            return
    pytest.fail(f"the deadlock did not happen in three tries, so its watch went untested: {seen}")
