"""The Python worker daemon of the local sessions we start (``spark.python.daemon.module``): pyspark's own
daemon, with four costs of the workers taken out. Results do not change; BENCHMARKS.md ("Issue 16", tenth and
twenty-second rounds) has the figures.

1. **Spark's bundled copies of pyspark leave the workers' path.** Spark puts ``pyspark.zip``, the py4j zip
   and its ``spark-core`` jar at the front of every Python worker's ``PYTHONPATH``. With pyspark installed
   from PyPI those are copies of the installed package, and costly ones: modules imported from a zip are
   compiled from source in every worker (a zip holds no ``.pyc``), and pyspark calls
   ``importlib.invalidate_caches()`` before every task, which rereads each zip's directory (the jar's holds
   ~6,000 entries): ~1.5-2.5 of the demo audit's 7-9 worker CPU-s. They are dropped only when they belong to
   the pyspark the workers import anyway (the zips under its ``python/lib``, the jar under its ``jars``); a
   separate Spark distribution's copies stay. This module therefore imports pyspark only after that.
2. **Only the young generations are collected after each task.** pyspark's daemon runs a full
   ``gc.collect()`` in a reused worker after every task; with pyspark, pyarrow, numpy and our modules loaded
   that walks every object of the process, ~35 ms of CPU per task however small the task (200 one-row
   ``mapInArrow`` tasks: 7.3-8.1 worker CPU-s; collecting generations 0 and 1: 0.35). That still frees what
   a task left in reference cycles; the old generation is collected by Python's own thresholds, as in any
   long-lived process.
3. **No transparent huge pages in the workers.** Arrow's allocator (mimalloc) and numpy ask the kernel for huge
   pages (``madvise(MADV_HUGEPAGE)``) on their large buffers; the kernel then zeroes 2 MiB at each first touch,
   and again after the allocator hands idle memory back. A worker that holds ~1 GB for a while (the metadata
   pass over 1 M observations) spent more time zeroing pages than in its own code: 2.2-3.0 -> 1.5-1.7 CPU-s
   without them. ``prctl(PR_SET_THP_DISABLE)`` in the daemon, inherited by the workers it forks (and what they
   start); Linux only, and where it fails nothing changes.
4. **Freed memory stays in the worker for reuse.** glibc's malloc hands large blocks (numpy's arrays among them)
   straight back to the kernel, and the next task's arrays fault them in again, page by page: the offsets pass
   over 2.2 M commits took 290 k page faults and 2.2 CPU-s, 115-119 k and 1.94-1.95 CPU-s with blocks up to
   32 MiB taken from the heap and up to 256 MiB of free heap kept (``mallopt``, in the daemon so its forks inherit
   it; the peak memory is the same). Left as it is where the user set a malloc threshold, and off glibc.
"""

from __future__ import annotations

import gc
import importlib.machinery
import os
import sys
from typing import Any

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


def _libc() -> Any:
    """The C library this process runs on, through ctypes; None where ctypes or the library is not there."""
    try:
        import ctypes

        return ctypes.CDLL(None)
    except (ImportError, OSError):
        return None


def no_huge_pages() -> bool:
    """Turn transparent huge pages off for this process and the ones it starts (Linux ``PR_SET_THP_DISABLE``, kept
    across fork and exec); False where that is not possible."""
    libc = _libc() if sys.platform.startswith("linux") else None
    try:
        return libc is not None and libc.prctl(41, 1, 0, 0, 0) == 0  # 41: PR_SET_THP_DISABLE
    except AttributeError:
        return False


#: glibc's ``mallopt`` parameters and what the workers get (:func:`keep_freed_memory`).
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
#: 32 MiB: glibc's own dynamic mmap threshold stops there on 64-bit (``DEFAULT_MMAP_THRESHOLD_MAX``).
TRIM_BYTES, MMAP_BYTES = 256 << 20, 32 << 20
#: The environment's own say over those thresholds (``MALLOC_ARENA_MAX``, which YARN sets, is not one of them).
_USER_MALLOC = frozenset({"MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_"})


def keep_freed_memory() -> bool:
    """glibc's malloc in this process (and the ones it forks) takes blocks up to :data:`MMAP_BYTES` from its heap
    and keeps up to :data:`TRIM_BYTES` of it free. By default glibc raises its mmap threshold only as it frees
    mapped blocks, and trims the heap above twice that threshold, so a new worker's tasks map, trim and fault in
    their arrays again and again. False where nothing was changed (not glibc, or the user set a malloc threshold in
    :data:`_USER_MALLOC` or ``GLIBC_TUNABLES``)."""
    if _USER_MALLOC.intersection(os.environ) or "malloc." in os.environ.get("GLIBC_TUNABLES", ""):
        return False
    import platform

    libc = _libc() if platform.libc_ver()[0] == "glibc" else None
    try:
        # the mmap threshold first (glibc refuses one too large): setting either turns its own adjustment off, and
        # a fixed mmap threshold with the default trim threshold would trim more often, not less
        return libc is not None and bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_BYTES)) and bool(
            libc.mallopt(M_TRIM_THRESHOLD, TRIM_BYTES))
    except AttributeError:
        return False


class YoungCollections:
    """The ``gc`` module as pyspark's daemon sees it: :meth:`collect` collects at most the young generations
    (0 and 1); everything else is the ``gc`` module's."""

    def __getattr__(self, name: str) -> Any:
        return getattr(gc, name)

    @staticmethod
    def collect(generation: int = 2) -> int:
        return gc.collect(min(generation, 1))


def young_collections(daemon: Any) -> bool:
    """Make ``daemon`` (pyspark's daemon module) collect only the young generations between tasks; False when
    it does not use the ``gc`` module the way this expects (a pyspark that changed: left as it is)."""
    if getattr(daemon, "gc", None) is not gc:
        return False
    daemon.gc = YoungCollections()
    return True


if __name__ == "__main__":
    try:  # optimisations of the workers' memory: never a reason for the daemon not to start
        no_huge_pages()
        keep_freed_memory()
    except Exception:  # noqa: BLE001, S110
        pass
    drop_bundled()
    import pyspark.daemon

    young_collections(pyspark.daemon)
    # running this module imported our package; the workers import it afresh, from where the task's own path
    # says (under spark-submit a --py-files zip comes first), not from wherever this daemon was found
    sys.modules.pop("jobs", None)
    pyspark.daemon.manager()
