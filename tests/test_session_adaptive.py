"""Shuffles sized to the input in every session: adaptive execution on, a small shuffle width, and a
setting a user made explicitly (Databricks, spark-submit --conf, [spark.conf]) is never overridden."""

from __future__ import annotations

import pytest

from jobs.session import get_or_create_session, size_shuffles

KEYS = ("spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled",
        "spark.sql.shuffle.partitions")


@pytest.fixture
def restore(spark):
    before = {k: spark.conf.get(k, None) for k in KEYS}
    yield spark
    for k, v in before.items():
        if v is None:
            spark.conf.unset(k)
        else:
            spark.conf.set(k, v)


@pytest.mark.spark
def test_handed_session_without_settings_gets_adaptive_and_a_small_width(restore) -> None:
    spark = restore
    for k in KEYS:
        spark.conf.unset(k)
    assert spark.conf.get("spark.sql.shuffle.partitions", None) is None  # nobody set it: Spark's 200
    again = get_or_create_session()
    assert again is spark
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    assert spark.conf.get("spark.sql.adaptive.coalescePartitions.enabled") == "true"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "8"  # local[1]: max(8, 2 x 1)


@pytest.mark.spark
def test_explicit_user_settings_win(restore) -> None:
    spark = restore
    spark.conf.set("spark.sql.shuffle.partitions", "64")
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    spark.conf.unset("spark.sql.adaptive.enabled")
    changed = size_shuffles(spark)
    assert changed == {"spark.sql.adaptive.enabled": "true"}
    assert spark.conf.get("spark.sql.shuffle.partitions") == "64"
    assert spark.conf.get("spark.sql.adaptive.coalescePartitions.enabled") == "false"
