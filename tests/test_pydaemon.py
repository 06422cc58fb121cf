"""The Python worker daemon of our local sessions (jobs.pydaemon): Spark's bundled copies of pyspark leave the
workers' path only when they are copies of the pyspark the workers import anyway."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from jobs.pydaemon import bundled_entries


def _install(root: Path, *, py4j: bool = True) -> tuple[Path, list[str]]:
    """A pip-style install: site/pyspark (with its bundled zips and jar) and, optionally, site/py4j."""
    site = root / "site"
    pkg = site / "pyspark"
    (pkg / "python" / "lib").mkdir(parents=True)
    (pkg / "jars").mkdir()
    (pkg / "__init__.py").write_text("")
    if py4j:
        (site / "py4j").mkdir()
        (site / "py4j" / "__init__.py").write_text("")
    bundled = [str(pkg / "python" / "lib" / "pyspark.zip"), str(pkg / "python" / "lib" / "py4j-0.10.9.9-src.zip"),
               str(pkg / "jars" / "spark-core_2.13-4.3.0.jar")]
    for b in bundled:
        Path(b).write_bytes(b"")
    return site, bundled


def test_the_copies_of_the_installed_pyspark_are_dropped(tmp_path) -> None:
    site, bundled = _install(tmp_path)
    other = str(tmp_path / "deps.zip")  # a user's --py-files zip stays
    path = [*bundled, other, str(site)]
    assert bundled_entries(path) == bundled


def test_py4j_found_only_in_its_zip_keeps_the_zip(tmp_path) -> None:
    site, bundled = _install(tmp_path, py4j=False)
    assert bundled_entries([*bundled, str(site)]) == [bundled[0], bundled[2]]


def test_another_spark_distribution_is_left_alone(tmp_path) -> None:
    site, _ = _install(tmp_path)
    spark_home = tmp_path / "spark-4.3.0-bin"  # SPARK_HOME of a downloaded Spark: its pyspark may differ
    (spark_home / "python" / "lib").mkdir(parents=True)
    zips = [str(spark_home / "python" / "lib" / "pyspark.zip"), str(spark_home / "python" / "lib" / "py4j-src.zip")]
    assert bundled_entries([*zips, str(site)]) == []


def test_pyspark_only_in_the_zip_is_left_alone(tmp_path) -> None:
    _, bundled = _install(tmp_path)
    assert bundled_entries(bundled) == []  # nothing else provides pyspark


@pytest.mark.spark
def test_our_local_sessions_workers_import_the_installed_pyspark(spark) -> None:
    from jobs.session import DAEMON_MODULE

    assert spark.conf.get("spark.python.daemon.module") == DAEMON_MODULE
    path = spark.sparkContext.parallelize([0], 1).map(lambda _: (sys.path, __import__("pyspark").__file__)).first()
    assert not [p for p in path[0] if p.endswith(("pyspark.zip", ".jar"))]
    assert ".zip" not in path[1]


def _thp_enabled() -> str | None:
    """This process's ``THP_enabled`` line of ``/proc/self/status`` (Linux 5.0+), None where there is none."""
    try:
        lines = Path("/proc/self/status").read_text().splitlines()
    except OSError:
        return None
    return next((line.split(":")[1].strip() for line in lines if line.startswith("THP_enabled:")), None)


needs_thp_status = pytest.mark.skipif(_thp_enabled() is None, reason="no THP_enabled in /proc/self/status")


@needs_thp_status
def test_no_huge_pages_holds_for_the_processes_it_forks() -> None:
    import subprocess

    code = ("import os, sys; sys.path[:0] = [sys.argv[1], sys.argv[2]]; import test_pydaemon as t; "
            "from jobs.pydaemon import no_huge_pages; before = t._thp_enabled(); ok = no_huge_pages(); "
            "pid = os.fork()\nif pid == 0: os._exit(0 if t._thp_enabled() == '0' else 3)\n"
            "_, st = os.waitpid(pid, 0); print(before, ok, t._thp_enabled(), os.waitstatus_to_exitcode(st))")
    root = Path(__file__).resolve().parent
    out = subprocess.run([sys.executable, "-c", code, str(root.parent), str(root)], capture_output=True, text=True,
                         check=True).stdout.split()
    if out[1] != "True":
        pytest.skip("this kernel or sandbox refuses PR_SET_THP_DISABLE (the daemon then leaves it)")
    assert out == ["1", "True", "0", "0"]  # on in this process's parent, off after, and off in its fork


@needs_thp_status
@pytest.mark.spark
def test_our_local_sessions_workers_run_without_huge_pages(spark) -> None:
    def status(_: int) -> list[str]:  # in the worker: this module is not on its path
        with open("/proc/self/status") as fh:
            return [line.split(":")[1].strip() for line in fh if line.startswith("THP_enabled:")]

    import subprocess

    works = subprocess.run([sys.executable, "-c", "from jobs.pydaemon import no_huge_pages; print(no_huge_pages())"],
                           capture_output=True, text=True, check=True).stdout.strip()
    if works != "True":
        pytest.skip("this kernel or sandbox refuses PR_SET_THP_DISABLE (the daemon then leaves it)")
    assert spark.sparkContext.parallelize([0], 1).map(status).first() == ["0"]


_FAULTS = """
import resource, sys
import numpy as np
from jobs.pydaemon import keep_freed_memory, no_huge_pages
no_huge_pages()  # 4 KiB pages, so the count does not hang on the kernel's huge-page settings
kept = keep_freed_memory() if sys.argv[1] == "kept" else None
def work():
    arrays = [np.ones(2_500_000) for _ in range(3)]  # 3 x 20 MB, freed together, as a task's temporaries
    del arrays
work()
before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
for _ in range(10):
    work()
print(kept, resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before)
"""


@pytest.mark.skipif(sys.platform != "linux", reason="glibc's malloc")
def test_a_worker_reuses_the_memory_its_last_task_freed() -> None:
    import platform
    import subprocess

    if platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's malloc")

    def faults(mode: str, **env: str) -> tuple[str, int]:
        out = subprocess.run([sys.executable, "-c", _FAULTS, mode], capture_output=True, text=True, check=True,
                             env={k: v for k, v in os.environ.items() if not k.startswith("MALLOC_")} | env)
        kept, n = out.stdout.split()
        return kept, int(n)

    assert faults("default")[1] > 50_000  # glibc maps and unmaps the arrays: every page is faulted in again
    assert faults("kept") == ("True", pytest.approx(0, abs=500))  # the freed heap is reused
    # a user's own setting is theirs: left as it is
    assert faults("kept", MALLOC_TRIM_THRESHOLD_="131072")[0] == "False"


class _Cycle:
    def __init__(self) -> None:
        self.me = self


def test_the_daemon_collects_the_young_generations_between_tasks() -> None:
    import gc
    import types
    import weakref

    from jobs.pydaemon import young_collections

    daemon = types.SimpleNamespace(gc=gc)  # pyspark.daemon calls gc.collect() after every task
    assert young_collections(daemon)
    calls: list[int] = []
    real = gc.collect
    try:
        gc.collect = lambda generation=2: calls.append(generation) or real(generation)
        daemon.gc.collect()
    finally:
        gc.collect = real
    assert calls == [1]  # not the full collection that walks every object of the process
    assert daemon.gc.isenabled() == gc.isenabled()  # the rest is the gc module's
    garbage = weakref.ref(_Cycle())  # what a task leaves in a reference cycle is still freed
    daemon.gc.collect()
    assert garbage() is None
    assert not young_collections(types.SimpleNamespace())  # a daemon without gc: left as it is
