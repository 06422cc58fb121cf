"""The one place that creates (or reuses) the SparkSession.

Notebooks, ``spark-submit`` and tests all go through :func:`get_or_create_session`:

- An active session (Databricks notebook, an interactive shell, a test fixture) is reused and ``master``
  is ignored; only runtime-modifiable settings of ``extra_conf`` are applied to it.
- Under ``spark-submit`` the JVM already exists with its own ``--master``; we never override it.
- Otherwise a new local session is built with sane small-machine defaults: UTC session time zone, Arrow
  for pandas/Arrow conversions, modest driver memory, the in-memory catalog (no Hive), Parquet
  timestamps written as INT64 micros (readable by delta-rs, DuckDB, Polars), the UI off under pytest, JVM
  flags for the input's size (:func:`java_options_for_input`) and our Python worker daemon
  (:mod:`jobs.pydaemon`) when the workers run this interpreter.
- Every session, created or handed to us, gets shuffles sized to the input (:data:`ADAPTIVE_CONF`:
  adaptive execution with coalesced shuffle partitions, and ``spark.sql.shuffle.partitions`` of
  ``2 x defaultParallelism``, at least 8) and Arrow batches without a per-row size check
  (:data:`ARROW_INPUT_CONF`) *unless the setting was made explicitly* — by a Databricks
  user, ``spark-submit --conf``, ``spark-defaults.conf`` or the config's ``[spark.conf]``: those win.
  Without this a tiny nightly input ran 200-600 tasks per report stage under spark-submit.

Maven packages are never downloaded here: Delta support is whatever the session already has
(:func:`has_delta`), and the sink falls back to delta-rs otherwise.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from . import class_cache
from .errors import ConfigError, EpochAuditError

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.sql import DataFrame, SparkSession

    from .config import Config

__all__ = ["ADAPTIVE_CONF", "ARROW_INPUT_CONF", "CONCURRENT_ACTIONS", "CONNECT_PARALLELISM", "LOCAL_DEFAULTS",
           "LOCAL_MASTER_DEFAULTS", "SINGLE_PARTITION_CONF", "UTC_CONF", "UnsupportedSession", "cancel_all_jobs",
           "check_session", "default_parallelism", "get_or_create_session", "has_delta", "java_options_for_input",
           "WORKER_ADDRESS_MIB", "conf_getter", "local_input_size", "one_partition", "python_memory_warning",
           "is_connect", "run_concurrently", "shuffles_for_input", "size_mib", "size_shuffles", "spark_context",
           "worker_address_limit_mib"]

T = TypeVar("T")

log = logging.getLogger(__name__)

#: Settings every session needs for correct results (``event_date`` is a UTC date); also applied to a
#: reused session, since they are runtime SQL settings.
UTC_CONF: dict[str, str] = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    # Spark's default INT96 timestamps are legacy; delta-rs and other readers expect INT64 micros.
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
}

#: Defaults for a session this module creates itself (never applied to a reused session).
LOCAL_DEFAULTS: dict[str, str] = {
    "spark.driver.memory": "1g",
    "spark.sql.catalogImplementation": "in-memory",  # no Hive metastore, no derby files in the cwd
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.showConsoleProgress": "false",
}
#: ... and for a ``local[...]`` master: Spark lists more than 32 explicitly named files (the reports read a
#: silver table's data files by name) with a Spark job of one task per file, ~0.5-1.2 s of wall each time at
#: 10 M bench commits (35 files); in one JVM those tasks list no faster than the driver, at most as many at a
#: time as the master has cores (remote files: up to 1024 listed one by one).
LOCAL_MASTER_DEFAULTS: dict[str, str] = {
    "spark.sql.sources.parallelPartitionDiscovery.threshold": "1024",
}

#: Adaptive query execution: Spark merges small shuffle partitions after each stage, so a tiny input
#: runs a handful of tasks and a large one keeps its width. Applied to every session unless set explicitly.
ADAPTIVE_CONF: dict[str, str] = {
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
    # ... inside a cached plan too: Spark otherwise keeps a cached frame's shuffles at their full width, and the
    # reports cache unions of grouped rule outputs (L5, L3, D1/D2 over 15 k lineage rows ran 53 tasks a stage at
    # 10 M bench commits; 10-run: ~200 of ~500 report tasks and ~4 s, BENCHMARKS.md issue 16 thirteenth round)
    "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning": "true",
}
#: Arrow batches into Python workers bounded by rows only. With ``spark.sql.execution.arrow.maxBytesPerBatch`` set
#: (Spark 4's default: 64 MiB) Spark asks its Arrow writer for the batch's size after *every row*, and for a list or
#: struct column that question rewrites the offsets of every row already in the batch: a batch of nested rows costs
#: O(rows^2). The epoch lineage's 15 k rows (``entries`` is a list of structs) into the commit pass's buckets took
#: 2.5-4.6 JVM CPU-s at 1 M bench commits, 0.4 without the check (BENCHMARKS.md, issue 16 sixteenth round).
#: ``Int.MaxValue`` is Spark's "no byte limit"; batches stay at most ``spark.sql.execution.arrow.maxRecordsPerBatch``
#: rows (10,000), as in Spark 3. Applied to every session unless set explicitly.
ARROW_INPUT_CONF: dict[str, str] = {"spark.sql.execution.arrow.maxBytesPerBatch": str(2**31 - 1)}
#: ... unless this is set to 0 or less (no row limit): then the byte limit is all that bounds a batch, and is kept.
MAX_RECORDS_PER_BATCH = "spark.sql.execution.arrow.maxRecordsPerBatch"
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
WHOLE_STAGE = "spark.sql.codegen.wholeStage"
#: How Spark builds expression evaluators (projections, predicates, orderings): generated code compiled with
#: Janino, falling back to interpreted (Spark's default), or interpreted only (``NO_CODEGEN``).
CODEGEN_FACTORY = "spark.sql.codegen.factoryMode"
MIN_SHUFFLE_PARTITIONS = 8
#: What a run whose shuffles make one partition sets besides (unless set explicitly): no joins broadcast by size
#: (an explicit ``broadcast`` hint still is), and no limit on a single partition's size (see
#: :func:`shuffles_for_input`).
SINGLE_PARTITION_CONF: dict[str, str] = {
    "spark.sql.autoBroadcastJoinThreshold": "-1",
    "spark.sql.maxSinglePartitionBytes": str(2**63 - 1),
}
#: Set to ``true`` while :func:`shuffles_for_input` runs a small run in one shuffle partition (:func:`one_partition`).
ONE_PARTITION_KEY = "spark.epochaudit.onePartition"
#: Set (to the value chosen) when :func:`size_shuffles` chose the shuffle width / turned on adaptive execution
#: itself, so a run may size them to its input (:func:`shuffles_for_input`); an explicit setting never
#: carries them.
AUTO_WIDTH_KEY = "spark.epochaudit.shufflePartitions.auto"
AUTO_ADAPTIVE_KEY = "spark.epochaudit.adaptive.auto"
ADAPTIVE = "spark.sql.adaptive.enabled"
#: Input bytes per shuffle partition when a run narrows the width (a partition of this much input is a
#: few seconds of work; far less is per-task latency: scheduling, a Python worker round trip, a file).
BYTES_PER_SHUFFLE_PARTITION = 64 * 2**20

_DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
_DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"


def _conf_str(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _under_spark_submit() -> bool:
    """True when the Python driver was launched by spark-submit (the JVM and its --master exist)."""
    return "PYSPARK_GATEWAY_PORT" in os.environ


def get_or_create_session(
    master: str = "local[*]",
    app_name: str = "epoch-audit",
    extra_conf: Mapping[str, Any] | None = None,
    input_bytes: int | None = None,
    class_data: class_cache.Mode | None = None,
) -> SparkSession:
    """Return the active SparkSession, or build a local one.

    Args:
        master: Spark master for a *new* session (ignored when a session is active or under spark-submit).
        app_name: application name for a new session.
        extra_conf: more Spark settings (values are stringified; booleans become ``true``/``false``).
            They override the local defaults. On a reused session only runtime-modifiable keys are set;
            the others are logged and skipped.
        input_bytes: what the run will read, when known: a *new local* session gets
            :data:`LOCAL_JAVA_OPTIONS` (the throughput collector), and for an input up to
            :data:`SMALL_INPUT_BYTES` :data:`SMALL_INPUT_JAVA_OPTIONS` (C1 only; :func:`java_options_for_input`),
            unless ``extra_conf`` or ``spark-defaults.conf`` sets ``spark.driver.extraJavaOptions``.
        class_data: a *new* session's JVM maps the class-data archive of :mod:`jobs.class_cache` when there is
            one (``"use"``), or also writes one as it exits when there is none (``"make"``: the caller then calls
            :func:`jobs.class_cache.finish` before the process ends); None: neither. Not with an explicit
            ``spark.driver.extraJavaOptions`` (as above).

    Returns:
        The session, with ``spark.sql.session.timeZone=UTC``.
    """
    from pyspark.sql import SparkSession

    extra = {k: _conf_str(v) for k, v in (extra_conf or {}).items()}
    active = SparkSession.getActiveSession()
    if active is not None:
        for key, value in {**UTC_CONF, **extra}.items():
            if active.conf.get(key, None) == value:
                continue
            try:
                if active.conf.isModifiable(key):
                    active.conf.set(key, value)
                else:
                    log.info("session already running: ignoring static Spark setting %s", key)
            except Exception as exc:  # Spark Connect / restricted clusters may refuse some keys
                log.info("could not set %s on the active session: %s", key, exc)
        size_shuffles(active)
        return active

    conf: dict[str, str] = {}
    archive: class_cache.Archive | None = None
    builder = SparkSession.builder.appName(app_name)
    if not _under_spark_submit():
        # Python workers of a session we start run *this* interpreter (its virtualenv has pyarrow and
        # epochlib), not whatever ``python3`` is first on PATH; an explicit PYSPARK_PYTHON still wins.
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        builder = builder.master(master)
        conf.update(LOCAL_DEFAULTS)
        if master.startswith("local"):
            conf.update(LOCAL_MASTER_DEFAULTS)
        if _python_daemon_usable() and not _spark_defaults_set(PYTHON_DAEMON):
            conf[PYTHON_DAEMON] = DAEMON_MODULE
        options = java_options_for_input(input_bytes)
        ours = DRIVER_JAVA_OPTIONS not in extra and not _spark_defaults_set(DRIVER_JAVA_OPTIONS)
        if ours:  # spark-defaults.conf wins, as extra_conf does
            archive = class_cache.archive_for_session(class_data)
            flags = " ".join(f for f in (options, archive.java_options if archive else "", _log_options()) if f)
            if flags:
                conf[DRIVER_JAVA_OPTIONS] = flags
        if "pytest" in sys.modules:
            conf["spark.ui.enabled"] = "false"
    conf.update(UTC_CONF)
    conf.update(extra)  # an explicit spark.driver.extraJavaOptions replaces the small-input flags
    for key, value in conf.items():
        builder = builder.config(key, value)
    crashes = class_cache.crash_logs(archive) if archive is not None else set()
    try:
        session = builder.getOrCreate()
    except Exception:
        from pyspark import SparkContext

        if archive is None or SparkContext._gateway is not None:  # the JVM started: the archive is not why
            raise
        if not class_cache.could_be_why(archive, crashes):
            # no crash, and Java starts with the archive's flags: Spark's launcher refused the session (e.g. `yarn`
            # without HADOOP_CONF_DIR exits before the gateway is up); a second start would print the same trace
            raise
        # the JVM would not start with the class-data archive (a damaged file: it crashes): once more without it
        session = builder.config(DRIVER_JAVA_OPTIONS, options).getOrCreate()
        log.warning("Spark did not start with the class-data archive's flags (%s), and did without them",
                    archive.java_options)
        class_cache.discard(archive)
    size_shuffles(session)
    return session


DRIVER_JAVA_OPTIONS = "spark.driver.extraJavaOptions"
#: Inputs up to this size run in a JVM that compiles with C1 only (:data:`SMALL_INPUT_JAVA_OPTIONS`).
SMALL_INPUT_BYTES = 4 * 2**30
#: The JVM flags of every local session we start: the throughput collector. A run is a batch job; G1's
#: concurrent marking cost ~3-4 CPU-s of a 10 M-commit audit's ~100 and bought nothing (no pause matters).
LOCAL_JAVA_OPTIONS = "-XX:+UseParallelGC"
#: ... and of one for an input up to :data:`SMALL_INPUT_BYTES`: C1 only. Most of a run's JVM work is Spark's
#: planner, writers and shuffles running once or a few times each over rows that Python decodes and judges;
#: the C2 compiler spent ~23 CPU-s of a 10 M-commit audit's ~104 optimising such code (the demo: ~20 of ~44).
#: With C1 only the executor threads run ~50 % longer (21 -> 32 CPU-s at 10 M) but the total falls: 1 M
#: commits 96 -> 67 CPU-s, 10 M 111 -> 84 CPU-s, the demo 22-23 s -> 17.5-18.7 s (BENCHMARKS.md, "Issue 16",
#: fourth and ninth rounds). The code cache is raised from C1-only's 48 MB default, which a whole audit
#: fills (the JIT then stops compiling).
_C1_ONLY = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
SMALL_INPUT_JAVA_OPTIONS = f"{LOCAL_JAVA_OPTIONS} {_C1_ONLY}"


#: The log4j2 configuration of the sessions this module starts, as ``spark-submit.sh`` passes it: Spark at WARN, without
#: the warnings every local run prints and that mean nothing here (the loopback hostname, no native Hadoop library,
#: truncated plan strings, the run's own local checkpoints released). ``EPOCH_AUDIT_LOG4J`` names another file.
LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")


def _log_options() -> str:
    """``-Dlog4j2.configurationFile=<uri>`` for a new local session, unless the Spark configuration folder
    (:func:`_spark_conf_dir`) holds the user's own ``log4j2.properties`` (which Spark then reads)."""
    if (Path(_spark_conf_dir()) / "log4j2.properties").is_file():
        return ""
    path = Path(os.environ.get("EPOCH_AUDIT_LOG4J") or LOG4J_CONFIG)
    return f"-Dlog4j2.configurationFile={path.resolve().as_uri()}" if path.is_file() else ""


def java_options_for_input(input_bytes: int | None) -> str:
    """The driver JVM flags for a new local session of a run reading ``input_bytes`` (None: unknown); without
    the collector when the environment's Java options choose one (two collectors: the JVM would not start)."""
    small = input_bytes is not None and input_bytes <= SMALL_INPUT_BYTES
    flags = ([] if _gc_chosen_by_environment() else [LOCAL_JAVA_OPTIONS]) + ([_C1_ONLY] if small else [])
    return " ".join(flags)


def local_input_size(config: Config) -> int | None:
    """What :func:`java_options_for_input` needs to know of the config's inputs: their bytes, counted up to
    just past :data:`SMALL_INPUT_BYTES` (None: not local, or unreadable)."""
    from .ingest.discover import local_input_bytes

    return local_input_bytes(config.inputs.roots, SMALL_INPUT_BYTES)


def _gc_chosen_by_environment() -> bool:
    """True when ``JAVA_TOOL_OPTIONS``, ``JDK_JAVA_OPTIONS`` or ``_JAVA_OPTIONS`` select a garbage collector."""
    import re

    text = " ".join(os.environ.get(k, "") for k in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"))
    return re.search(r"-XX:\+Use\w*GC\b", text) is not None


def _spark_conf_dir() -> str:
    """The folder a new session reads ``spark-defaults.conf`` and ``log4j2.properties`` from: ``SPARK_CONF_DIR``,
    else ``SPARK_HOME/conf`` (pyspark's own)."""
    return os.environ.get("SPARK_CONF_DIR") or os.path.join(class_cache.spark_home(), "conf")


def _spark_defaults_set(key: str) -> bool:
    """True when the ``spark-defaults.conf`` a new session reads (:func:`_spark_conf_dir`) sets ``key``."""
    folder = _spark_conf_dir()
    try:
        with open(os.path.join(folder, "spark-defaults.conf"), encoding="utf-8") as fh:
            return any(line.split(None, 1)[0] == key for line in fh if line.strip() and not line.lstrip().startswith("#"))
    except OSError:
        return False


PYTHON_DAEMON = "spark.python.daemon.module"
#: The Python worker daemon of a local session we start: pyspark's, without Spark's bundled copies of
#: pyspark on the workers' path, with young-generation collections between tasks, and with workers that keep
#: their freed memory and use no transparent huge pages (:mod:`jobs.pydaemon`).
DAEMON_MODULE = "jobs.pydaemon"


def _python_daemon_usable() -> bool:
    """True when the workers run this interpreter (``PYSPARK_PYTHON`` unset or ours), which imports
    :mod:`jobs.pydaemon`; another interpreter may not have our package."""
    worker = os.environ.get("PYSPARK_PYTHON")
    return worker is None or os.path.abspath(worker) == os.path.abspath(sys.executable)


def _explicit(spark: SparkSession, key: str) -> str | None:
    """The value of ``key`` if someone set it (``None`` when Spark would use its built-in default)."""
    try:
        return spark.conf.get(key, None)
    except Exception:
        return None


def size_shuffles(spark: SparkSession) -> dict[str, str]:
    """Turn on adaptive execution with coalesced partitions and a shuffle width of ``2 x
    defaultParallelism`` (at least 8), and Arrow batches into Python bounded by rows only
    (:data:`ARROW_INPUT_CONF`) — each only where nobody set that key explicitly.

    Returns the settings it changed (empty when the user's own settings were all kept).
    """
    wanted = {**ADAPTIVE_CONF, **ARROW_INPUT_CONF}
    with contextlib.suppress(Exception):
        if int(_explicit(spark, MAX_RECORDS_PER_BATCH) or 1) <= 0:  # no row limit: the byte limit is the only bound
            for key in ARROW_INPUT_CONF:
                wanted.pop(key)
    if spark_context(spark) is not None:  # Spark Connect: no SparkContext; the server's width stays
        wanted[SHUFFLE_PARTITIONS] = str(max(MIN_SHUFFLE_PARTITIONS, 2 * default_parallelism(spark)))
    changed: dict[str, str] = {}
    for key, value in wanted.items():
        if _explicit(spark, key) is not None:
            continue
        try:
            spark.conf.set(key, value)
            changed[key] = value
        except Exception as exc:  # restricted clusters may refuse a key
            log.info("could not set %s: %s", key, exc)
    for key, mark in ((SHUFFLE_PARTITIONS, AUTO_WIDTH_KEY), (ADAPTIVE, AUTO_ADAPTIVE_KEY)):
        if key in changed:
            with contextlib.suppress(Exception):
                spark.conf.set(mark, changed[key])
    return changed


@contextlib.contextmanager
def shuffles_for_input(spark: SparkSession, input_bytes: int | None) -> Iterator[int | None]:
    """While a run executes, size its shuffles to its input: one partition per
    :data:`BYTES_PER_SHUFFLE_PARTITION` of input, at least 1, at most the width :func:`size_shuffles`
    chose; and when that is a single partition, no adaptive execution (with one partition there is nothing
    to coalesce or split, and adaptive execution runs every shuffle stage as a Spark job of its own: 144
    jobs instead of 43 for the demo) and no generated code, for whole stages or expressions (compiling it costs
    more than running interpreted on so few rows). A 16 MB nightly input then runs its joins and grouped rule functions
    as one task each instead of eight near-empty ones (each a scheduling round and a Python worker round trip).

    Only settings :func:`size_shuffles` chose (and code generation, when nobody set it) are changed — an
    explicit ``spark.sql.shuffle.partitions``, ``spark.sql.adaptive.enabled``, ``spark.sql.codegen.wholeStage`` or
    ``spark.sql.codegen.factoryMode`` (spark-submit ``--conf``, ``[spark.conf]``, a Databricks cluster) is left
    alone — and they are restored afterwards. Yields the width in force (None when left alone). Results do
    not depend on either setting.
    """
    def current(key: str, mark: str) -> str | None:
        """The value of ``key`` when :func:`size_shuffles` set it and nobody changed it since, else None."""
        with contextlib.suppress(Exception):
            chosen = spark.conf.get(mark, None)
            if chosen is not None and spark.conf.get(key, None) == chosen:
                return chosen
        return None

    auto_width, auto_adaptive = current(SHUFFLE_PARTITIONS, AUTO_WIDTH_KEY), current(ADAPTIVE, AUTO_ADAPTIVE_KEY)
    if input_bytes is None or auto_width is None:
        yield None
        return
    width = max(1, min(int(auto_width), math.ceil(input_bytes / BYTES_PER_SHUFFLE_PARTITION)))
    changed: dict[str, tuple[str, str | None]] = {SHUFFLE_PARTITIONS: (str(width), auto_width)}
    if width == 1 and auto_adaptive is not None:
        changed[ADAPTIVE] = ("false", auto_adaptive)
    if width == 1:
        # and its plans keep their rows in that one partition (:func:`one_partition`): no join is broadcast by size
        # (each broadcast is a Spark job of its own), and a join or cogroup whose sides are in one partition each is
        # not shuffled again because the planner cannot size them (a checkpoint's size is unknown, so larger than
        # Spark's 128 MiB per single partition)
        for key, value in SINGLE_PARTITION_CONF.items():
            if _explicit(spark, key) is None:
                changed[key] = (value, None)
    if width == 1 and _explicit(spark, WHOLE_STAGE) is None:
        # a small input's queries run faster interpreted than compiled: each stage's generated code is compiled
        # (Janino, then the JIT) for a few thousand rows (demo audit: 25.1-25.5 s -> 23.6-23.9 s)
        changed[WHOLE_STAGE] = ("false", None)
    if width == 1 and _explicit(spark, CODEGEN_FACTORY) is None:
        # ... and so do its expressions: without whole-stage code each projection and predicate was still
        # generated and compiled by Janino, ~30 % of the demo's executor-thread CPU (BENCHMARKS.md, tenth round)
        changed[CODEGEN_FACTORY] = ("NO_CODEGEN", None)
    done = {}
    try:
        for key, (value, before) in changed.items():
            try:
                spark.conf.set(key, value)
                done[key] = before
            except Exception as exc:
                log.info("could not set %s: %s", key, exc)
        if width == 1 and SHUFFLE_PARTITIONS in done and ADAPTIVE in done:
            with contextlib.suppress(Exception):  # the mark one_partition reads
                spark.conf.set(ONE_PARTITION_KEY, "true")
                done[ONE_PARTITION_KEY] = None
        yield width if SHUFFLE_PARTITIONS in done else None
    finally:
        for key, before in done.items():
            with contextlib.suppress(Exception):
                if before is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, before)


def one_partition(spark: SparkSession) -> bool:
    """True while a small run executes with one shuffle partition and no adaptive execution (as
    :func:`shuffles_for_input` narrowed it; a user's own ``spark.sql.shuffle.partitions=1`` does not count: such a
    run may be large). Then every exchange gathers all rows into one task anyway: a table read into one partition
    from the start needs none for the joins, groupings and windows over it (one partition satisfies any
    clustering), and a list of work rows need not be spread over more tasks than the slices Spark makes of it."""
    try:
        return spark.conf.get(ONE_PARTITION_KEY, None) == "true"
    except Exception:  # a session that cannot say: as if wider
        return False


#: Independent Spark actions (table writes) a run keeps in flight at once. A run's steps are mostly short jobs
#: whose stages wait on each other (scheduling, a Python worker round trip, a one-task stage, a Delta commit
#: on the driver); with a few in flight, one job's tasks fill the cores while another waits.
CONCURRENT_ACTIONS = 4


def named_step(spark: SparkSession, name: str, step: Callable[[], T]) -> Callable[[], T]:
    """``step`` to run in another driver thread: it inherits the caller's Spark job properties
    (:func:`pyspark.inheritable_thread_target`) and context variables, and adds ``name`` to the job description,
    so the Spark UI and the event log say which step a job is for (e.g. "epoch-audit: reports: fencing")."""
    import contextvars

    from pyspark import inheritable_thread_target

    sc = spark_context(spark)  # Spark Connect: none, and no job descriptions to set
    parent = sc.getLocalProperty("spark.job.description") if sc is not None else None
    # the caller's context variables too (a new thread starts with none): the audit run the sink names in its
    # leases and commits (jobs.sink.running_as) is the caller's, not the thread's host:pid
    context = contextvars.copy_context()

    def run() -> T:
        if sc is not None:
            sc.setJobDescription(f"{parent}: {name}" if parent else f"epoch-audit: {name}")
        return context.run(step)

    return inheritable_thread_target(spark)(run)


def run_concurrently(spark: SparkSession, steps: Sequence[tuple[str, Callable[[], T]]],
                     workers: int = CONCURRENT_ACTIONS) -> dict[str, T]:
    """Run independent steps (each a Spark action, e.g. one table's write) from up to ``workers`` driver
    threads at once, and return their results by name, in the order given.

    Spark schedules jobs from several threads side by side (each thread inherits the caller's job description
    through :func:`pyspark.inheritable_thread_target` and adds the step's name to it, so the Spark UI and the
    event log say which step a job is for); the results are those of running the steps one by one.
    Every step runs to its end even when another fails; then the first failure, in the order given, is raised
    (so no write is left half-done behind an error). Steps that a deadlock in the driver's JVM holds (two cached
    plans failing at once, see :data:`STUCK_STEPS`) are left behind: the failure is raised instead of a hang.
    Interrupted (SIGTERM, Ctrl-C) while waiting, the session's jobs are cancelled, the steps are waited for (at most
    :data:`INTERRUPT_WAIT_S`: one blocked in the driver is left behind), and the interrupt is raised.
    """
    if workers <= 1 or len(steps) <= 1:
        return {name: step() for name, step in steps}
    import queue
    from concurrent.futures import Future, wait

    futures: list[tuple[str, Future]] = [(name, Future()) for name, _ in steps]
    todo: queue.SimpleQueue = queue.SimpleQueue()
    for (name, step), (_, fut) in zip(steps, futures, strict=True):
        todo.put((named_step(spark, name, step), fut))

    def work() -> None:
        while True:
            try:
                fn, fut = todo.get_nowait()
            except queue.Empty:
                return
            if fut.set_running_or_notify_cancel():
                try:
                    fut.set_result(fn())
                except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
                    fut.set_exception(exc)

    # daemon threads: a step a JVM deadlock holds must not keep the process from ending
    for i in range(min(workers, len(steps))):
        threading.Thread(target=work, name=f"epoch-audit-step-{i}", daemon=True).start()
    known = deadlocked_threads(spark)  # one an earlier run left is not this run's
    pending = {f for _, f in futures}
    try:
        while pending:  # every step runs to its end, unless the driver's JVM deadlocked under it
            done, pending = wait(pending, timeout=DEADLOCK_POLL_S)
            if pending and not done and deadlocked_threads(spark) - known and not _active_jobs(spark):
                break
    except BaseException:
        # interrupted (SIGTERM, Ctrl-C): cancel the session's jobs, again each second for one a step starts after
        # that, and wait for the steps a bounded time: a step blocked in the driver (a collect that never returns)
        # held the run for ever, its lease beating, with no record of the signal (its thread is a daemon: left)
        rest = {f for _, f in futures if not f.done()}
        deadline = time.monotonic() + INTERRUPT_WAIT_S
        while rest and time.monotonic() < deadline:
            with contextlib.suppress(Exception):
                cancel_all_jobs(spark)
            _, rest = wait(rest, timeout=min(1.0, max(deadline - time.monotonic(), 0.0)))
        if rest:
            log.warning("steps %s did not end within %.0f s of the interrupt; the run ends without them",
                        ", ".join(name for name, f in futures if f in rest), INTERRUPT_WAIT_S)
        raise
    if pending:
        # Spark 4's cache can deadlock when two threads build cached plans that both fail (each rebuild locks the
        # other's cache, SPARK-49982's recache): the run fails with the first error instead of hanging for ever
        STUCK_STEPS.extend(name for name, f in futures if f in pending)
        log.warning("steps %s are deadlocked in the driver's JVM after a failure (Spark's cache); the run fails "
                    "with the first error; restart the Python process before using Spark again",
                    ", ".join(STUCK_STEPS))
    for _, f in futures:
        if f.done() and f.exception() is not None:
            raise f.exception()  # type: ignore[misc]
    if pending:
        raise SparkDeadlock(f"Spark's driver deadlocked while the steps {', '.join(STUCK_STEPS)} built cached data, "
                            "after a task failure (Spark's cache rebuild, SPARK-49982): the task's error is in "
                            "Spark's log above; restart the Python process (a notebook: its kernel) before "
                            "running again")
    return {name: f.result() for name, f in futures}


#: How often :func:`run_concurrently` looks for a deadlock in the driver's JVM while its steps run.
DEADLOCK_POLL_S = 5.0
#: How long :func:`run_concurrently`, interrupted, waits for its steps to end (their jobs cancelled) before it
#: raises without them.
INTERRUPT_WAIT_S = 60.0
#: Steps of the current run left deadlocked after a failure: their driver threads never end (the CLI leaves with
#: ``os._exit`` as always; a notebook must restart its kernel: the JVM keeps the locks). Cleared when a run starts.
STUCK_STEPS: list[str] = []


def unpersist(df: DataFrame) -> bool:
    """Release a frame's cache, unless steps of this run are deadlocked (:data:`STUCK_STEPS`): one of them holds
    a cache's lock, and releasing it would wait for ever. Returns whether it released."""
    if STUCK_STEPS:
        return False
    df.unpersist()
    return True


def deadlocked_threads(spark: SparkSession) -> set[int]:
    """Ids of the driver JVM's threads deadlocked on monitors (``ThreadMXBean.findDeadlockedThreads``)."""
    sc = spark_context(spark)  # Spark Connect: the driver JVM is the server's, out of reach
    if sc is None:
        return set()
    try:
        ids = sc._jvm.java.lang.management.ManagementFactory.getThreadMXBean().findDeadlockedThreads()
        return set() if ids is None else {int(i) for i in ids}
    except Exception:  # noqa: BLE001 - a session that cannot answer is not known to be deadlocked
        return set()


def _active_jobs(spark: SparkSession) -> bool:
    """Whether Spark is running any job (a step whose job runs is working, not deadlocked)."""
    sc = spark_context(spark)
    try:
        return sc is not None and bool(sc.statusTracker().getActiveJobsIds())
    except Exception:  # noqa: BLE001
        return False


class SparkDeadlock(EpochAuditError):
    """Steps of :func:`run_concurrently` deadlocked in the driver's JVM without any step failing first."""


class Once(Generic[T]):
    """A value computed once, by the first caller of :meth:`get`; later callers (other steps' threads of
    :func:`run_concurrently`) wait for it and get the same value, or the same exception."""

    def __init__(self, make: Callable[[], T]) -> None:
        self._make, self._lock = make, threading.Lock()
        self._done, self._value, self._error = False, None, None

    def get(self) -> T:
        with self._lock:
            if not self._done:
                try:
                    self._value = self._make()
                except BaseException as exc:
                    self._error = exc
                    raise
                finally:
                    self._done = True
        if self._error is not None:
            raise self._error
        return self._value


#: The address space one of this job's Python workers maps before it holds a task's rows: pyarrow's allocator
#: reserves its arena up front. Its workers mapped 1.7 GB in a 1 M-commit run; with
#: ``spark.executor.pyspark.memory=1400m`` (a limit on each worker's address space) the run failed with
#: ``MemoryError``, at 1800m it ran (BENCHMARKS.md, "Issue 16", twenty-third round).
WORKER_ADDRESS_MIB = 1792
#: Bytes per unit of a Spark size (no unit: MiB, as for Spark's memory settings).
_UNIT_BYTES = {"": 2**20, "b": 1, "k": 2**10, "m": 2**20, "g": 2**30, "t": 2**40, "p": 2**50}
_LONG_MAX, _INT_MAX = 2**63 - 1, 2**31 - 1


def size_mib(text: str | None) -> int:
    """Whole MiB of a Spark memory setting (``2g``, ``512m``, ``1024``: MiB without a unit), rounded down as Spark
    converts it (``512k`` is 0, which Spark takes as no limit); 0 when unset. ValueError on anything Spark rejects
    (fractions, spaces inside, other units)."""
    import re

    if not text or not text.strip():
        return 0
    m = re.fullmatch(r"([0-9]+)(?:([kmgtp])b?|(b)?)", text.strip().lower())
    if m is None:
        raise ValueError(f"not a size: {text!r}")
    size = int(m.group(1)) * _UNIT_BYTES[m.group(2) or m.group(3) or ""]
    if size > _LONG_MAX:  # Spark reads sizes as Java longs
        raise ValueError(f"not a size: {text!r} (too large)")
    return size // 2**20


def task_slots(get: Callable[[str], str | None], spark_version: str | None = None) -> int:
    """How many tasks share one executor's memory, as Spark divides ``spark.executor.pyspark.memory`` among them:
    ``spark.executor.cores`` (1 when unset, as under a local master); from Spark 4.3 (SPARK-58192) that over
    ``spark.task.cpus``, rounded up, or with dynamic allocation on a cluster rounded down (the tasks that fit),
    at least 1. ``spark_version``: pyspark's by default. ValueError when a setting is not a number."""
    import re
    from decimal import Decimal, InvalidOperation

    cores = int(get("spark.executor.cores") or 1)
    if not 1 <= cores <= _INT_MAX:  # a Java int
        raise ValueError(f"spark.executor.cores is {cores}")
    if spark_version is None:
        import pyspark

        spark_version = pyspark.__version__
    v = re.match(r"(\d+)\.(\d+)", spark_version)
    if v is None or (int(v.group(1)), int(v.group(2))) < (4, 3):
        return cores
    try:
        cpus = Decimal(get("spark.task.cpus") or "1")
    except InvalidOperation:
        raise ValueError(f"spark.task.cpus is not a number: {get('spark.task.cpus')!r}") from None
    if not cpus.is_finite() or cpus <= 0:
        raise ValueError(f"spark.task.cpus is {cpus}")
    dynamic = ((get("spark.dynamicAllocation.enabled") or "").strip().lower() == "true"
               and not (get("spark.master") or "").startswith("local"))
    share = Decimal(cores) / cpus
    return max(1, int(share) if dynamic else math.ceil(share))


def conf_getter(spark: SparkSession) -> Callable[[str], str | None]:
    """A key's value in ``spark``'s session, None when unset or unreadable (Spark Connect reads fewer keys)."""

    def get(key: str) -> str | None:
        try:
            return spark.conf.get(key, None)
        except Exception:  # noqa: BLE001
            return None

    return get


def worker_address_limit_mib(get: Callable[[str], str | None], spark_version: str | None = None) -> int | None:
    """The address space each Python worker may map under ``spark.executor.pyspark.memory``, in whole MiB as Spark
    computes it (the setting over :func:`task_slots`, under any master; 0 when that rounds to nothing, which Spark
    refuses when the task starts); None when unset. ValueError (or ArithmeticError) when a setting is not a size or
    a number Spark would take."""
    python = size_mib(get("spark.executor.pyspark.memory"))
    return python // task_slots(get, spark_version) if python else None


def python_memory_warning(spark: SparkSession) -> str | None:
    """A warning for a run whose ``spark.executor.pyspark.memory`` leaves each Python worker less address space
    than :data:`WORKER_ADDRESS_MIB`: its tasks are likely to fail with ``MemoryError``, however small the input.
    None under a local master on macOS or Windows, where Spark's workers do not enforce the limit; None for a
    setting Spark itself rejects. Never raises."""
    get = conf_getter(spark)
    if (get("spark.master") or "").startswith("local") and sys.platform in ("darwin", "win32"):
        return None
    try:
        limit = worker_address_limit_mib(get)
        if limit is None or limit >= WORKER_ADDRESS_MIB:
            return None
        slots = task_slots(get)
        share = f" shared by {slots} concurrent tasks per executor" if slots > 1 else ""
        return (f"spark.executor.pyspark.memory={get('spark.executor.pyspark.memory')}{share} gives each Python "
                f"worker {limit:,} MiB of address space; this job's workers map ~{WORKER_ADDRESS_MIB:,} MiB before "
                f"they hold any rows (pyarrow's allocator), so tasks may fail with MemoryError: set it to at least "
                f"{-(-WORKER_ADDRESS_MIB * slots // 1024)}g, or leave it unset")
    except (ValueError, ArithmeticError):
        return None  # Spark itself rejects such a setting


def has_delta(spark: SparkSession) -> bool:
    """True when the session can read and write Delta through Spark's own data source.

    That is: on Databricks (Delta is built in), or when the Delta SQL extension or catalog is configured
    *and* the ``io.delta`` classes load in the driver JVM. Never downloads anything.
    """
    if os.environ.get("DATABRICKS_RUNTIME_VERSION"):
        return True
    try:
        extensions = spark.conf.get("spark.sql.extensions", "") or ""
        catalog = spark.conf.get("spark.sql.catalog.spark_catalog", "") or ""
    except Exception:
        return False
    if _DELTA_EXTENSION not in extensions and catalog != _DELTA_CATALOG:
        return False
    jvm = getattr(spark_context(spark), "_jvm", None)
    if jvm is None:  # Spark Connect: no py4j gateway; trust the server's configuration
        return True
    try:
        loader = jvm.java.lang.Thread.currentThread().getContextClassLoader()
        loader.loadClass("io.delta.tables.DeltaTable")
        return True
    except Exception:
        return False


def spark_context(spark: SparkSession) -> SparkContext | None:
    """The session's ``SparkContext``; None on Spark Connect (Databricks shared / standard access mode clusters,
    serverless compute, ``SparkSession.builder.remote``), where the attribute raises: the driver JVM is the
    server's, and this process has no py4j gateway to it. Callers without one degrade (:func:`default_parallelism`,
    no job descriptions or task counts) instead of failing."""
    try:
        return spark.sparkContext
    except Exception:  # noqa: BLE001 - PySparkAttributeError [JVM_ATTRIBUTE_NOT_SUPPORTED] on Connect
        return None


def is_connect(spark: SparkSession) -> bool:
    """Whether ``spark`` is a Spark Connect session (no ``SparkContext`` in this process)."""
    return spark_context(spark) is None


#: The parallelism assumed on Spark Connect when the session does not set ``spark.default.parallelism``: the server's
#: cores cannot be asked for without a SparkContext (adaptive execution coalesces what this over-splits).
CONNECT_PARALLELISM = 8


def default_parallelism(spark: SparkSession) -> int:
    """How many tasks the session runs at once: ``SparkContext.defaultParallelism``; on Spark Connect (no
    SparkContext) the session's ``spark.default.parallelism`` when it is a positive number, else
    :data:`CONNECT_PARALLELISM`. At least 1."""
    sc = spark_context(spark)
    if sc is not None:
        with contextlib.suppress(Exception):
            return max(1, int(sc.defaultParallelism))
    with contextlib.suppress(Exception):
        value = int(spark.conf.get("spark.default.parallelism", None) or 0)
        if value > 0:
            return value
    return CONNECT_PARALLELISM


class UnsupportedSession(ConfigError):
    """The session refuses a Spark API the run needs (Databricks serverless compute: caching); said before any work."""


def check_session(spark: SparkSession) -> None:
    """Raise :class:`UnsupportedSession` when ``spark`` is a Spark Connect session that refuses caching
    (``DataFrame.persist``; Databricks serverless compute: ``[NOT_SUPPORTED_WITH_SERVERLESS]``): ingestion and the
    Delta sink cache the frames they read twice, so such a run would fail in the middle, after writing some tables.
    Asked with a one-row frame; a Spark Classic session is not asked (it always can)."""
    if spark_context(spark) is not None:
        return
    from pyspark import StorageLevel

    from .errors import one_line

    probe = spark.range(1)
    try:
        probe.persist(StorageLevel.MEMORY_AND_DISK)
        probe.unpersist()
    except Exception as exc:  # noqa: BLE001 - whatever the server says, it is said in the error
        raise UnsupportedSession(
            "this Spark Connect session cannot cache DataFrames, which the run needs (DataFrame.persist: "
            f"{one_line(exc, 300)}); Databricks serverless compute refuses caching: run it on a cluster in dedicated "
            "(single user) access mode") from None


def cancel_all_jobs(spark: SparkSession) -> None:
    """Cancel every running Spark job of the session: ``SparkContext.cancelAllJobs``, or on Spark Connect the
    session's ``interruptAll`` (the operations this client started on the server)."""
    sc = spark_context(spark)
    if sc is not None:
        sc.cancelAllJobs()
    else:
        spark.interruptAll()
