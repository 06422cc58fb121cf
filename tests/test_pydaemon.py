"""The Python worker daemon of our local sessions (jobs.pydaemon): Spark's bundled copies of pyspark leave the
workers' path only when they are copies of the pyspark the workers import anyway."""

from __future__ import annotations

import os
import subprocess
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


#: What the tests measure, in one source: run here, in a subprocess (``python -c``) and in a Spark worker (which
#: cannot import this module), so each is written once.
_PROBES = """
def thp_enabled():
    # this process's THP_enabled line of /proc/self/status (Linux 5.0+), None where there is none
    try:
        with open("/proc/self/status") as fh:
            return next((line.split(":")[1].strip() for line in fh if line.startswith("THP_enabled:")), None)
    except OSError:
        return None


def page_faults():
    # the page faults of three 20 MB arrays allocated and freed together (as a task's temporaries), ten times
    import resource

    import numpy as np

    def work():
        arrays = [np.ones(2_500_000) for _ in range(3)]
        del arrays

    work()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(10):
        work()
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before
"""


def _probes() -> dict:
    namespace: dict = {}
    exec(_PROBES, namespace)  # noqa: S102 - the test's own source, above
    return namespace


def _in_worker(spark, probe: str):
    """``probe`` of :data:`_PROBES`, run in a Python worker of ``spark``."""
    source = _PROBES

    def run(_: int):
        namespace: dict = {}
        exec(source, namespace)  # noqa: S102
        return namespace[probe]()

    return spark.sparkContext.parallelize([0], 1).map(run).first()


needs_thp_status = pytest.mark.skipif(_probes()["thp_enabled"]() != "1",
                                      reason="no THP_enabled: 1 in /proc/self/status")
_PRCTL_REFUSED = "this kernel or sandbox refuses PR_SET_THP_DISABLE (the daemon then leaves it)"

_FORK = _PROBES + """
import os
from jobs.pydaemon import no_huge_pages
ok = no_huge_pages()
pid = os.fork()
if pid == 0:
    os._exit(0 if thp_enabled() == "0" else 3)
_, status = os.waitpid(pid, 0)
print(ok, thp_enabled(), os.waitstatus_to_exitcode(status))
"""


def _run(code: str, *args: str, env: dict[str, str] | None = None) -> list[str]:
    return subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, check=True,
                          env=env).stdout.split()


@needs_thp_status
def test_no_huge_pages_holds_for_the_processes_it_forks() -> None:
    ok, after, child = _run(_FORK)
    if ok != "True":
        pytest.skip(_PRCTL_REFUSED)
    assert (after, child) == ("0", "0")  # off in the process, and in its fork


@needs_thp_status
@pytest.mark.spark
def test_our_local_sessions_workers_run_without_huge_pages(spark) -> None:
    if _run("from jobs.pydaemon import no_huge_pages; print(no_huge_pages())") != ["True"]:
        pytest.skip(_PRCTL_REFUSED)

    assert _in_worker(spark, "thp_enabled") == "0"


_FAULTS = _PROBES + """
import sys
from jobs.pydaemon import keep_freed_memory, no_huge_pages
thp_off = no_huge_pages()  # 4 KiB pages: the count does not hang on the kernel's huge-page settings
kept = keep_freed_memory() if sys.argv[1] == "kept" else None
print(thp_off, kept, page_faults())
"""


def _glibc_without_user_settings() -> dict[str, str]:
    import platform

    from jobs.pydaemon import _USER_MALLOC

    if sys.platform != "linux" or platform.libc_ver()[0] != "glibc":
        pytest.skip("glibc's malloc")
    if _USER_MALLOC.intersection(os.environ) or "malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        pytest.skip("this environment sets malloc thresholds of its own: the daemon leaves them")
    return {k: v for k, v in os.environ.items() if k not in _USER_MALLOC and k != "GLIBC_TUNABLES"}


def test_a_process_reuses_the_memory_it_freed() -> None:
    env = _glibc_without_user_settings()
    thp_off, _, default = _run(_FAULTS, "default", env=env)
    if thp_off != "True":
        pytest.skip(_PRCTL_REFUSED)
    assert int(default) > 50_000  # glibc trims its heap and maps the arrays again: every page faults in again
    _, kept, faults = _run(_FAULTS, "kept", env=env)
    assert kept == "True" and int(faults) < 500  # the freed heap is reused
    # a user's own setting is theirs: left as it is
    assert _run(_FAULTS, "kept", env={**env, "MALLOC_TRIM_THRESHOLD_": "131072"})[1] == "False"


@pytest.mark.spark
def test_our_local_sessions_workers_reuse_the_memory_they_freed(spark) -> None:
    _glibc_without_user_settings()

    assert _in_worker(spark, "page_faults") < 500  # > 50 k without the daemon's mallopt


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
