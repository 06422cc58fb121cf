"""Shuffles sized to the input in every session: adaptive execution on, a small shuffle width, Arrow batches into
Python without a per-row size check, and a setting a user made explicitly (Databricks, spark-submit --conf,
[spark.conf]) is never overridden."""

from __future__ import annotations

import pytest

from jobs.session import get_or_create_session, size_shuffles

KEYS = ("spark.sql.adaptive.enabled", "spark.sql.adaptive.coalescePartitions.enabled",
        "spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "spark.sql.shuffle.partitions",
        "spark.sql.execution.arrow.maxBytesPerBatch", "spark.sql.autoBroadcastJoinThreshold",
        "spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode")
MARKS = ("spark.epochaudit.shufflePartitions.auto", "spark.epochaudit.adaptive.auto")


@pytest.fixture
def restore(spark):
    before = {k: spark.conf.get(k, None) for k in (*KEYS, *MARKS)}
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
    # cached frames' shuffles coalesced too (the reports cache unions of grouped rule outputs)
    assert spark.conf.get("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning") == "true"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "8"  # local[1]: max(8, 2 x 1)
    # Int.MaxValue: Spark's "no byte limit", so no size check per row (O(rows^2) per batch of nested rows)
    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch") == "2147483647"


@pytest.mark.spark
def test_explicit_user_settings_win(restore) -> None:
    spark = restore
    spark.conf.set("spark.sql.shuffle.partitions", "64")
    spark.conf.set("spark.sql.adaptive.coalescePartitions.enabled", "false")
    spark.conf.unset("spark.sql.adaptive.enabled")
    spark.conf.set("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning", "false")
    spark.conf.set("spark.sql.execution.arrow.maxBytesPerBatch", "1048576")
    changed = size_shuffles(spark)
    assert changed == {"spark.sql.adaptive.enabled": "true"}
    assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch") == "1048576"
    assert spark.conf.get("spark.sql.optimizer.canChangeCachedPlanOutputPartitioning") == "false"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "64"
    assert spark.conf.get("spark.sql.adaptive.coalescePartitions.enabled") == "false"


@pytest.mark.spark
def test_without_a_row_limit_the_byte_limit_stays(restore) -> None:
    spark = restore
    before = spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch", None)
    spark.conf.unset("spark.sql.execution.arrow.maxBytesPerBatch")
    spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", "0")  # Spark: no row limit
    try:
        assert "spark.sql.execution.arrow.maxBytesPerBatch" not in size_shuffles(spark)
        assert spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch", None) is None  # Spark's 64 MiB
    finally:
        if before is None:
            spark.conf.unset("spark.sql.execution.arrow.maxRecordsPerBatch")
        else:
            spark.conf.set("spark.sql.execution.arrow.maxRecordsPerBatch", before)


@pytest.fixture
def auto(restore, small_run):
    """The session as size_shuffles leaves one nobody configured (its own choices marked: conftest's small_run)."""
    with small_run():
        yield restore


@pytest.mark.spark
def test_a_small_run_narrows_the_automatic_width_and_restores_it(auto) -> None:
    from jobs.session import one_partition, shuffles_for_input

    spark = auto
    with shuffles_for_input(spark, 16 * 2**20) as width:  # the demo's 16 MB
        assert width == 1
        assert spark.conf.get("spark.sql.shuffle.partitions") == "1"
        assert spark.conf.get("spark.sql.adaptive.enabled") == "false"  # one partition: nothing to adapt
        assert spark.conf.get("spark.sql.codegen.wholeStage") == "false"  # nor worth compiling
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "NO_CODEGEN"  # not even its expressions
        assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == "-1"  # a broadcast is a Spark job of its own
        assert int(spark.conf.get("spark.sql.maxSinglePartitionBytes").rstrip("b")) == 2**63 - 1
        assert one_partition(spark)
        df = spark.range(10)
        assert df.groupBy((df.id % 3).alias("k")).count().count() == 3
        # a join of two one-partition sides runs in their partition: no exchange, no broadcast
        a, b = df.coalesce(1).localCheckpoint(), df.coalesce(1).localCheckpoint()
        plan = a.join(b, "id")._jdf.queryExecution().executedPlan().toString()
        assert "Exchange" not in plan and "Broadcast" not in plan
    assert not one_partition(spark)
    assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") != "-1"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "8"
    assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    assert spark.conf.get("spark.sql.codegen.wholeStage", None) is None  # back to Spark's default
    assert spark.conf.get("spark.sql.codegen.factoryMode", None) is None
    with shuffles_for_input(spark, 300 * 2**20) as width:  # 5 x 64 MiB: 5 partitions, adaptive stays on
        assert width == 5
        assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
        assert spark.conf.get("spark.sql.codegen.wholeStage", None) is None
        assert spark.conf.get("spark.sql.codegen.factoryMode", None) is None
    spark.conf.set("spark.sql.codegen.wholeStage", "true")  # a user's explicit choices are kept
    spark.conf.set("spark.sql.codegen.factoryMode", "CODEGEN_ONLY")
    spark.conf.set("spark.sql.autoBroadcastJoinThreshold", "1m")
    with shuffles_for_input(spark, 1000) as width:
        assert width == 1 and spark.conf.get("spark.sql.codegen.wholeStage") == "true"
        assert spark.conf.get("spark.sql.codegen.factoryMode") == "CODEGEN_ONLY"
        assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == "1m"
    assert spark.conf.get("spark.sql.autoBroadcastJoinThreshold") == "1m"
    for key in ("spark.sql.codegen.wholeStage", "spark.sql.codegen.factoryMode", "spark.sql.autoBroadcastJoinThreshold"):
        spark.conf.unset(key)
    with shuffles_for_input(spark, 10 * 2**30) as width:  # never wider than the session's own width
        assert width == 8
    with shuffles_for_input(spark, None) as width:  # unknown input (a reports-only run): left alone
        assert width is None
        assert spark.conf.get("spark.sql.shuffle.partitions") == "8"


@pytest.mark.spark
def test_a_run_never_narrows_an_explicit_width(auto) -> None:
    from jobs.session import one_partition, shuffles_for_input

    spark = auto
    spark.conf.set("spark.sql.shuffle.partitions", "64")  # a user's --conf, after the session started
    with shuffles_for_input(spark, 1000) as width:
        assert width is None and not one_partition(spark)
        assert spark.conf.get("spark.sql.shuffle.partitions") == "64"
        assert spark.conf.get("spark.sql.adaptive.enabled") == "true"
    assert spark.conf.get("spark.sql.shuffle.partitions") == "64"
    spark.conf.set("spark.sql.shuffle.partitions", "1")  # even a width of one: such a run may be large
    with shuffles_for_input(spark, 1000) as width:
        assert width is None and not one_partition(spark)


@pytest.mark.spark
def test_a_session_handed_straight_to_run_audit_is_sized_as_the_cli_s(restore, tmp_path, monkeypatch) -> None:
    """A notebook's ``spark`` goes to ``run_audit`` without ``get_or_create_session``: its run must still get the
    automatic width that a small input then narrows to one partition (it ran Spark's 200-partition shuffles)."""
    import jobs.audit as audit
    from jobs.config import Config, Inputs, Output
    from jobs.session import one_partition, shuffles_for_input

    spark = restore
    for k in (*KEYS, *MARKS):
        spark.conf.unset(k)
    seen = []

    def run(spark, *args, **kwargs):
        with shuffles_for_input(spark, 2**20) as width:  # what _run does for a 1 MiB input
            seen.append((width, one_partition(spark), spark.conf.get("spark.sql.execution.arrow.maxBytesPerBatch")))

    monkeypatch.setattr(audit, "_run", run)
    (tmp_path / "in").mkdir()
    cfg = Config(cluster="c", inputs=Inputs(offsets=str(tmp_path / "in")), output=Output(root=str(tmp_path / "o")))
    audit.run_audit(spark, cfg, "2024-03-04")
    assert seen == [(1, True, "2147483647")]
