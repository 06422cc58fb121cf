"""The SparkSession factory: reuse of the active session, UTC, Arrow, no Delta download."""

from __future__ import annotations

import sys

import pytest

from jobs import session as session_mod
from jobs.session import get_or_create_session, has_delta


@pytest.mark.spark
def test_fixture_session_has_the_settings_every_job_relies_on(spark) -> None:
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.execution.arrow.pyspark.enabled") == "true"
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert spark.conf.get("spark.ui.enabled") == "false"
    assert spark.conf.get("spark.sql.catalogImplementation") == "in-memory"
    assert spark.sparkContext.master == "local[1]"


@pytest.mark.spark
def test_active_session_is_reused_and_master_ignored(spark) -> None:
    key = "spark.sql.shuffle.partitions"
    before = spark.conf.get(key)
    try:
        again = get_or_create_session(master="local[2]", extra_conf={key: 3, "spark.driver.memory": "8g"})
        assert again is spark
        assert spark.sparkContext.master == "local[1]"
        assert spark.conf.get(key) == "3"  # runtime settings are applied to the reused session
        assert spark.sparkContext.getConf().get("spark.driver.memory") != "8g"  # static ones are not
    finally:
        spark.conf.set(key, before)


@pytest.mark.spark
def test_utc_is_restored_on_a_reused_session(spark) -> None:
    spark.conf.set("spark.sql.session.timeZone", "Europe/Paris")
    try:
        assert get_or_create_session().conf.get("spark.sql.session.timeZone") == "UTC"
    finally:
        spark.conf.set("spark.sql.session.timeZone", "UTC")


@pytest.mark.spark
def test_plain_local_session_has_no_delta(spark) -> None:
    assert has_delta(spark) is False
    assert "spark.jars.packages" not in dict(spark.sparkContext.getConf().getAll())


@pytest.mark.spark
def test_delta_extension_without_classes_is_not_delta(spark, monkeypatch) -> None:
    """A configured extension whose jar is absent must not count (we never download it)."""
    real_get = spark.conf.get

    def fake_get(key, default=None):
        if key == "spark.sql.extensions":
            return "io.delta.sql.DeltaSparkSessionExtension"
        return real_get(key, default)

    monkeypatch.setattr(spark.conf, "get", fake_get)
    assert spark.conf.get("spark.sql.extensions") == "io.delta.sql.DeltaSparkSessionExtension"
    assert has_delta(spark) is False


def test_databricks_runtime_counts_as_delta(monkeypatch) -> None:
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "15.4")
    assert has_delta(object()) is True  # type: ignore[arg-type]


def test_spark_submit_is_detected_by_its_gateway(monkeypatch) -> None:
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    assert session_mod._under_spark_submit() is False
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    assert session_mod._under_spark_submit() is True


@pytest.mark.spark
def test_python_workers_run_the_drivers_interpreter(spark) -> None:
    """Workers must import pyarrow and epochlib from this virtualenv, not from python3 on PATH
    (a fresh machine's `make demo` failed with 'No module named pyarrow' in the worker)."""
    import pyarrow as pa

    def where(batches):
        import sys as worker_sys

        for _ in batches:
            yield pa.RecordBatch.from_pydict({"exe": [worker_sys.executable]})

    exe = spark.range(1).mapInArrow(where, "exe string").first()["exe"]
    assert exe == sys.executable


class _Builder:
    """Stands in for ``SparkSession.builder``: records what a new session would be built with."""

    def __init__(self) -> None:
        self.conf: dict[str, str] = {}

    def appName(self, name):  # noqa: N802 - Spark's name
        return self

    def master(self, master):
        return self

    def config(self, key, value):
        self.conf[key] = value
        return self

    def getOrCreate(self):  # noqa: N802 - Spark's name
        return object()


@pytest.mark.parametrize(("input_bytes", "extra", "expected"), [
    (16 * 2**20, {}, session_mod.SMALL_INPUT_JAVA_OPTIONS),  # the demo: C1 only, a larger code cache
    (session_mod.SMALL_INPUT_BYTES, {}, session_mod.SMALL_INPUT_JAVA_OPTIONS),
    # a larger input keeps the JVM's full JIT; every local session gets the throughput collector
    (session_mod.SMALL_INPUT_BYTES + 1, {}, session_mod.LOCAL_JAVA_OPTIONS),
    (None, {}, session_mod.LOCAL_JAVA_OPTIONS),  # size unknown (remote inputs, --reports-only)
    (1000, {"spark.driver.extraJavaOptions": "-Dmine=1"}, "-Dmine=1"),  # an explicit setting wins
])
def test_a_new_local_session_for_a_small_input_compiles_with_c1_only(monkeypatch, input_bytes, extra,
                                                                      expected) -> None:
    from pyspark.sql import SparkSession

    builder = _Builder()
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(SparkSession, "builder", builder)
    monkeypatch.setattr(session_mod, "size_shuffles", lambda s: {})
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    monkeypatch.delenv("JAVA_TOOL_OPTIONS", raising=False)
    monkeypatch.delenv("JDK_JAVA_OPTIONS", raising=False)
    monkeypatch.delenv("_JAVA_OPTIONS", raising=False)
    monkeypatch.setattr(session_mod, "_spark_defaults_set", lambda key: False)
    monkeypatch.setattr(session_mod, "_log_options", lambda: "")  # the log configuration's flag: its own test
    get_or_create_session(master="local[2]", extra_conf=extra, input_bytes=input_bytes)
    assert builder.conf.get("spark.driver.extraJavaOptions") == expected
    monkeypatch.setattr(session_mod, "_log_options", lambda: "-Dlog4j2.configurationFile=file:/x")
    builder.conf.clear()
    get_or_create_session(master="local[2]", extra_conf=extra, input_bytes=input_bytes)
    assert builder.conf.get("spark.driver.extraJavaOptions") == (
        expected if extra else f"{expected} -Dlog4j2.configurationFile=file:/x")  # ours only with our flags
    # under spark-submit the JVM already runs: nothing to choose (spark-submit.sh passes the flags itself)
    builder.conf.clear()
    monkeypatch.setenv("PYSPARK_GATEWAY_PORT", "40000")
    get_or_create_session(extra_conf={}, input_bytes=1000)
    assert "spark.driver.extraJavaOptions" not in builder.conf


@pytest.mark.spark
def test_concurrent_steps_all_run_in_order_of_results_and_the_first_failure_is_raised(spark) -> None:
    import threading
    import time

    from jobs.session import run_concurrently

    finished: list[str] = []
    gate = threading.Event()

    def step(name: str, fail: bool = False, wait: bool = False):
        def run():
            if wait:
                assert gate.wait(10)  # only returns when another step runs at the same time
            n = spark.range(10).count()
            finished.append(name)
            if fail:
                raise ValueError(name)
            return n

        return run

    def opener():
        time.sleep(0.2)
        gate.set()
        finished.append("opener")
        return 0

    out = run_concurrently(spark, [("a", step("a", wait=True)), ("b", opener), ("c", step("c"))])
    assert list(out) == ["a", "b", "c"] and out["a"] == 10 and out["b"] == 0  # order given, not of finishing
    finished.clear()
    with pytest.raises(ValueError, match="^b$"):
        run_concurrently(spark, [("a", step("a")), ("b", step("b", fail=True)), ("c", step("c", fail=True)),
                                 ("d", step("d"))], workers=2)
    assert sorted(finished) == ["a", "b", "c", "d"]  # a failure does not leave the other writes half-done


@pytest.mark.spark
def test_concurrent_steps_carry_the_callers_job_description_and_their_name(spark) -> None:
    """The Spark UI and the event log name each step's jobs: the caller's description (inherited by the
    threads) and the step, e.g. ``epoch-audit: reports: fencing_violations``; the caller's own stays."""
    from jobs.session import run_concurrently

    sc = spark.sparkContext
    sc.setJobDescription("epoch-audit: reports")
    try:
        seen = run_concurrently(spark, [(n, lambda: sc.getLocalProperty("spark.job.description")) for n in "ab"])
        after = sc.getLocalProperty("spark.job.description")
    finally:
        sc.setJobDescription(None)
    assert seen == {"a": "epoch-audit: reports: a", "b": "epoch-audit: reports: b"}
    assert after == "epoch-audit: reports"
    seen = run_concurrently(spark, [(n, lambda: sc.getLocalProperty("spark.job.description")) for n in "ab"])
    assert seen == {"a": "epoch-audit: a", "b": "epoch-audit: b"}


def test_the_local_jvm_flags_give_way_to_the_users_own(monkeypatch, tmp_path) -> None:
    """A collector chosen in the environment's Java options (two collectors: the JVM would not start), or
    driver options in ``spark-defaults.conf`` (the user's, as an explicit ``extra_conf``), are kept."""
    from pyspark.sql import SparkSession

    for k in ("JAVA_TOOL_OPTIONS", "JDK_JAVA_OPTIONS", "_JAVA_OPTIONS"):
        monkeypatch.delenv(k, raising=False)
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path))
    assert "-XX:+UseParallelGC" in session_mod.java_options_for_input(None)
    monkeypatch.setenv("JAVA_TOOL_OPTIONS", "-Xss4m -XX:+UseG1GC")
    assert session_mod.java_options_for_input(None) == ""
    assert session_mod.java_options_for_input(1000) == "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
    monkeypatch.delenv("JAVA_TOOL_OPTIONS")

    builder = _Builder()
    monkeypatch.setattr(SparkSession, "getActiveSession", staticmethod(lambda: None))
    monkeypatch.setattr(SparkSession, "builder", builder)
    monkeypatch.setattr(session_mod, "size_shuffles", lambda s: {})
    monkeypatch.setattr(session_mod, "_log_options", lambda: "")
    monkeypatch.delenv("PYSPARK_GATEWAY_PORT", raising=False)
    get_or_create_session(master="local[2]", input_bytes=1000)
    assert builder.conf["spark.driver.extraJavaOptions"] == session_mod.SMALL_INPUT_JAVA_OPTIONS
    (tmp_path / "spark-defaults.conf").write_text("# mine\nspark.driver.extraJavaOptions  -Dhttp.proxyHost=p\n")
    builder.conf.clear()
    get_or_create_session(master="local[2]", input_bytes=1000)
    assert "spark.driver.extraJavaOptions" not in builder.conf


@pytest.mark.spark
def test_a_local_session_lists_named_files_on_the_driver(spark, tmp_path) -> None:
    """Reading 40 named Parquet files (more than Spark's 32) starts no listing job in a local session."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    assert spark.conf.get("spark.sql.sources.parallelPartitionDiscovery.threshold") == "1024"
    paths = []
    for i in range(40):
        pq.write_table(pa.table({"x": [i]}), tmp_path / f"{i}.parquet")
        paths.append(str(tmp_path / f"{i}.parquet"))
    tracker = spark.sparkContext.statusTracker()
    group = "listing-check"
    spark.sparkContext.setJobGroup(group, "listing")
    try:
        df = spark.read.schema("x long").parquet(*paths)  # as the reports read (no schema inference job)
    finally:
        spark.sparkContext.setLocalProperty("spark.jobGroup.id", None)
    assert tracker.getJobIdsForGroup(group) == []
    assert df.count() == 40


class _Conf:
    """A session whose settings are a dict (what ``spark.conf.get(key, None)`` returns)."""

    def __init__(self, values: dict[str, str]) -> None:
        self.conf = self
        self.values = values

    def get(self, key: str, default: str | None = None) -> str | None:
        return self.values.get(key, default)


@pytest.mark.parametrize(("text", "mib"), [
    ("2g", 2048), ("2GB", 2048), (" 512m ", 512), ("1024", 1024), ("1t", 2**20), ("3145728b", 3),
    # whole MiB, rounded down as Spark converts: 512k is 0, which Spark takes as no limit
    ("4k", 0), ("512k", 0), ("1536k", 1), ("3145729b", 3), (None, 0), ("", 0),
])  # fmt: skip
def test_spark_memory_sizes_read_as_spark_reads_them(text, mib) -> None:
    from jobs.session import size_mib

    assert size_mib(text) == mib


@pytest.mark.parametrize("text", ["1.5g", "lots", "2 gigabytes", "-1g", "512 m", "\u0665\u0661\u0662m",
                                  "8388608t"])  # Spark reads a size as a Java long
def test_a_memory_size_spark_would_reject_is_an_error(text) -> None:
    from jobs.session import size_mib

    with pytest.raises(ValueError, match="not a size"):
        size_mib(text)


@pytest.mark.parametrize(("conf", "version", "slots"), [
    ({}, "4.3.0", 1),  # a local master: the whole setting per worker
    ({"spark.executor.cores": "4"}, "4.3.0", 4),
    ({"spark.executor.cores": "4", "spark.task.cpus": "2"}, "4.3.0", 2),  # SPARK-58192: task slots
    ({"spark.executor.cores": "4", "spark.task.cpus": "0.5"}, "4.3.1", 8),
    ({"spark.executor.cores": "3", "spark.task.cpus": "2"}, "5.0.0", 2),  # rounded up ...
    ({"spark.executor.cores": "3", "spark.task.cpus": "2", "spark.dynamicAllocation.enabled": "true",
      "spark.master": "yarn"}, "4.3.0", 1),  # ... down with dynamic allocation: the tasks that fit
    ({"spark.executor.cores": "3", "spark.task.cpus": "2", "spark.dynamicAllocation.enabled": "true",
      "spark.master": "local[3]"}, "4.3.0", 2),  # which a local master never has
    ({"spark.executor.cores": "1", "spark.task.cpus": "2", "spark.dynamicAllocation.enabled": "true",
      "spark.master": "yarn"}, "4.3.0", 1),  # at least one
    ({"spark.executor.cores": "4", "spark.task.cpus": "2"}, "4.0.1", 4),  # before 4.3: cores
])  # fmt: skip
def test_spark_divides_python_memory_among_the_executor_s_task_slots(conf, version, slots) -> None:
    from jobs.session import task_slots, worker_address_limit_mib

    assert task_slots(conf.get, version) == slots
    assert worker_address_limit_mib({**conf, "spark.executor.pyspark.memory": "8g"}.get, version) == 8192 // slots


@pytest.mark.parametrize("conf", [{"spark.executor.cores": "x"}, {"spark.executor.cores": "0"},
                                  {"spark.executor.cores": str(2**31)},
                                  {"spark.task.cpus": "0"}, {"spark.task.cpus": "many"}, {"spark.task.cpus": "nan"}])
def test_task_slots_of_settings_spark_rejects_are_an_error(conf) -> None:
    from jobs.session import task_slots

    with pytest.raises(ValueError):
        task_slots(conf.get, "4.3.0")


@pytest.mark.parametrize(("conf", "advice"), [
    ({}, None),  # unset: no limit
    ({"spark.executor.pyspark.memory": "1400m"}, "at least 2g"),  # measured: such a run failed with MemoryError
    ({"spark.executor.pyspark.memory": "2g"}, None),
    ({"spark.executor.pyspark.memory": "512k"}, None),  # 0 MiB: Spark sets no limit
    ({"spark.executor.pyspark.memory": "4g", "spark.executor.cores": "4"}, "at least 7g"),  # 1 GiB per worker
    ({"spark.executor.pyspark.memory": "8g", "spark.executor.cores": "4"}, None),
    ({"spark.executor.pyspark.memory": "3m", "spark.executor.cores": "4"}, "at least 7g"),  # 0 MiB: Spark refuses
    ({"spark.executor.pyspark.memory": "1.5g"}, None),  # Spark itself rejects it, and these (no exception either)
    ({"spark.executor.pyspark.memory": "4g", "spark.task.cpus": "1e-1000000"}, None),
    ({"spark.executor.pyspark.memory": "1" + "0" * 403 + "m", "spark.executor.cores": "1" + "0" * 400}, None),
])  # fmt: skip
def test_a_python_memory_limit_below_what_a_worker_maps_is_warned_of(conf, advice) -> None:
    from jobs.session import python_memory_warning

    warning = python_memory_warning(_Conf(conf))
    assert (warning is not None) == (advice is not None)
    if advice:
        assert "spark.executor.pyspark.memory=" in warning and "MemoryError" in warning and advice in warning


def test_no_python_memory_warning_where_spark_does_not_enforce_the_limit(monkeypatch) -> None:
    from jobs.session import python_memory_warning

    small = {"spark.executor.pyspark.memory": "1g"}
    monkeypatch.setattr("sys.platform", "darwin")
    assert python_memory_warning(_Conf({**small, "spark.master": "local[2]"})) is None
    assert python_memory_warning(_Conf({**small, "spark.master": "yarn"})) is not None  # the workers are elsewhere
    monkeypatch.setattr("sys.platform", "linux")
    assert python_memory_warning(_Conf({**small, "spark.master": "local[2]"})) is not None


@pytest.mark.spark
def test_a_run_carries_the_python_memory_warning(spark, tmp_path, monkeypatch) -> None:
    """Each warning is said once, as it arises, the memory one first; a run that also has lookback gaps keeps both."""
    from types import SimpleNamespace

    import jobs.reports
    import jobs.session
    from jobs.audit import run_audit
    from jobs.config import parse_config

    (tmp_path / "md").mkdir()
    config = parse_config({"cluster": "warn", "inputs": {"metadata": str(tmp_path / "md")},
                           "output": {"root": str(tmp_path / "out")}})
    said: list[str] = []
    monkeypatch.setattr(jobs.session, "python_memory_warning", lambda session: "workers too small")
    monkeypatch.setattr(jobs.reports, "run_reports",
                        lambda *a, **k: SimpleNamespace(findings={}, lookback_gaps=["lookback: no state"]))
    result = run_audit(spark, config, "2024-03-04", "2024-03-04", reports=["stale_metadata"], progress=said.append,
                       progress_interval=0)
    assert result.warnings == ["workers too small", "lookback: no state"]
    warned = [line for line in said if line.startswith("warning: ")]
    assert warned == ["warning: workers too small", "warning: lookback: no state"]
    assert said.index(warned[0]) < said.index("ingest: decoding inputs into silver tables")  # before the tasks


def test_local_sessions_log_as_spark_submit_sh_does(tmp_path, monkeypatch) -> None:
    """The CLI's own sessions read the packaged log4j2 configuration (Spark at WARN without the warnings every local
    run prints, e.g. the run's released local checkpoints), unless the user's SPARK_CONF_DIR has its own or
    EPOCH_AUDIT_LOG4J names another file."""
    from jobs import session

    monkeypatch.delenv("SPARK_CONF_DIR", raising=False)
    monkeypatch.delenv("EPOCH_AUDIT_LOG4J", raising=False)
    flag = session._log_options()
    assert flag == f"-Dlog4j2.configurationFile={session.LOG4J_CONFIG.resolve().as_uri()}"
    assert "org.apache.spark.rdd.MapPartitionsRDD" in session.LOG4J_CONFIG.read_text()
    mine = tmp_path / "my log4j2.properties"
    mine.write_text("rootLogger.level = info\n")
    monkeypatch.setenv("EPOCH_AUDIT_LOG4J", str(mine))
    assert session._log_options().endswith("/my%20log4j2.properties") and " " not in session._log_options()
    (tmp_path / "conf").mkdir()
    (tmp_path / "conf" / "log4j2.properties").write_text("rootLogger.level = info\n")
    monkeypatch.setenv("SPARK_CONF_DIR", str(tmp_path / "conf"))
    assert session._log_options() == ""
    monkeypatch.delenv("SPARK_CONF_DIR")  # a Spark installation's conf folder counts too (SPARK_HOME/conf)
    monkeypatch.setattr(session.class_cache, "spark_home", lambda: str(tmp_path))
    assert session._log_options() == ""
