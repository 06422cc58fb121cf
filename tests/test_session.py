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
