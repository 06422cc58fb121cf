"""Spark Connect (Databricks shared / standard access mode, serverless): no SparkContext in the driver's process.

The helpers that read it degrade instead of failing, checked here without a Connect server: with a fake session
whose ``sparkContext`` raises as Connect's does (:mod:`fixtures_connect`). ``test_spark_connect.py`` runs an audit
on a real local Connect server when pyspark's Connect dependencies are installed.
"""

from __future__ import annotations

import pytest
from fixtures_connect import ConnectLike, WithoutContext


def test_the_default_parallelism_of_a_connect_session_comes_from_its_settings() -> None:
    from jobs.ingest._spark import default_parallelism as ingest_parallelism
    from jobs.session import CONNECT_PARALLELISM, default_parallelism, is_connect, spark_context

    assert spark_context(ConnectLike()) is None and is_connect(ConnectLike())
    assert default_parallelism(ConnectLike()) == ingest_parallelism(ConnectLike()) == CONNECT_PARALLELISM
    assert default_parallelism(ConnectLike({"spark.default.parallelism": "3"})) == 3
    for bad in ("auto", "0", "-2", ""):  # not a width: the fallback
        assert default_parallelism(ConnectLike({"spark.default.parallelism": bad})) == CONNECT_PARALLELISM


def test_shuffles_of_a_connect_session_keep_the_server_s_width() -> None:
    from jobs.session import ADAPTIVE, SHUFFLE_PARTITIONS, size_shuffles

    session = ConnectLike()
    changed = size_shuffles(session)
    assert SHUFFLE_PARTITIONS not in changed and SHUFFLE_PARTITIONS not in session.conf.values
    assert changed[ADAPTIVE] == "true"  # what the session can be told still is


def test_progress_on_a_connect_session_says_it_has_no_task_counts_and_does_not_fail() -> None:
    from jobs.audit import SparkProgress

    lines: list[str] = []
    with SparkProgress(ConnectLike(), lines.append, interval=0.01) as tracker:
        tracker.step("ingest")
        tracker.step("reports")
    assert lines == ["spark: a Spark Connect session: no task counts or job descriptions (no SparkContext)"]
    with SparkProgress(ConnectLike(), lines.append, interval=0) as tracker:  # progress off: nothing said
        tracker.step("ingest")
    assert len(lines) == 1


def test_an_interrupted_run_on_connect_interrupts_the_session_s_operations(monkeypatch) -> None:
    """Ctrl-C while steps run: Spark Classic cancels the context's jobs; on Connect the session's operations are
    interrupted (``interruptAll``), where ``cancelAllJobs`` was reached for and its error swallowed."""
    import time
    from concurrent import futures

    import pyspark

    from jobs.session import run_concurrently

    session = ConnectLike()
    monkeypatch.setattr(pyspark, "inheritable_thread_target", lambda _session: (lambda f: f))  # plain threads
    real_wait, calls = futures.wait, []

    def interrupted_wait(fs, timeout=None):
        calls.append(timeout)
        if len(calls) == 1:
            raise KeyboardInterrupt  # Ctrl-C while the driver waits for the steps
        return real_wait(fs, timeout)

    monkeypatch.setattr(futures, "wait", interrupted_wait)
    with pytest.raises(KeyboardInterrupt):
        run_concurrently(session, [("a", lambda: time.sleep(0.05)), ("b", lambda: time.sleep(0.05))])
    assert session.interrupted == 1


def test_an_interrupted_run_does_not_wait_for_ever_for_a_step_blocked_in_the_driver(monkeypatch) -> None:
    """SIGTERM while a step sat in a collect that never returned: the run waited for it for ever (its lease beating,
    no record of the signal, later runs refused with exit 7). The steps are waited for a bounded time, their jobs
    cancelled again meanwhile, and the interrupt is raised."""
    import threading
    import time
    from concurrent import futures

    import pyspark

    from jobs import session as session_mod

    session = ConnectLike()
    monkeypatch.setattr(pyspark, "inheritable_thread_target", lambda _session: (lambda f: f))
    monkeypatch.setattr(session_mod, "INTERRUPT_WAIT_S", 1.5)
    real_wait, calls, never = futures.wait, [], threading.Event()

    def interrupted_wait(fs, timeout=None):
        calls.append(timeout)
        if len(calls) == 1:
            raise KeyboardInterrupt  # the signal, while the driver waits for the steps
        return real_wait(fs, timeout)

    monkeypatch.setattr(futures, "wait", interrupted_wait)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        session_mod.run_concurrently(session, [("blocked", never.wait), ("quick", lambda: None)])
    assert time.monotonic() - t0 < 5
    assert session.interrupted >= 2  # cancelled again while the blocked step did not end
    never.set()


def test_delta_on_a_connect_session_is_what_its_settings_say() -> None:
    from jobs.session import has_delta

    assert not has_delta(ConnectLike())
    assert has_delta(ConnectLike({"spark.sql.extensions": "io.delta.sql.DeltaSparkSessionExtension"}))


@pytest.mark.spark
def test_a_session_without_a_spark_context_reads_a_table_and_plans_the_spilled_pass(spark, tmp_path) -> None:
    """The same calls as a run makes, on the real session with its ``sparkContext`` taken away (as on Connect)."""
    import datetime as dt

    from jobs.config import default_config
    from jobs.reports.commit_spill import CommitSpill
    from jobs.session import CONNECT_PARALLELISM
    from jobs.sink import read_table, write_table

    config = default_config().with_overrides(output_root=str(tmp_path / "t"), cluster="c")
    session = WithoutContext(spark)
    days = [dt.date(2024, 3, d) for d in (1, 2, 3)]
    rows = [{"cluster": "c", "event_date": d, "group_id": "g", "topic": "t", "partition": 0,
             "committed_offset": i, "event_ts": dt.datetime(2024, 3, d.day, tzinfo=dt.timezone.utc)}
            for i, d in enumerate(days)]
    from jobs.schemas import spark_schema

    schema = spark_schema("offset_commits")
    full = [{f.name: r.get(f.name) for f in schema.fields} for r in rows]
    write_table(spark.createDataFrame(full, schema), "offset_commits", config=config, mode="append")
    df = read_table(session, "offset_commits", config, cluster="c", date_range=(days[0], days[-1]))
    assert df.count() == 3 and df.rdd.getNumPartitions() <= CONNECT_PARALLELISM
    spill = CommitSpill.plan(session, config, "c", (days[0], days[-1]), min_rows=0)
    assert spill is not None
    try:
        assert spill.buckets == CONNECT_PARALLELISM
    finally:
        spill.close()


def test_a_connect_session_that_cannot_cache_fails_the_run_at_its_start_with_one_line(tmp_path) -> None:
    """Databricks serverless compute refuses ``persist``: the run says so before it reads or writes anything, and
    records the failure in ``audit_runs``; a session that can cache is asked once and left as it was."""
    from deltalake import DeltaTable

    from jobs.audit import run_audit
    from jobs.config import parse_config
    from jobs.session import UnsupportedSession, check_session

    able = ConnectLike()
    check_session(able)
    assert able.cached == 0
    (tmp_path / "in").mkdir()
    config = parse_config({"cluster": "c", "inputs": {"offsets": str(tmp_path / "in")},
                           "output": {"root": str(tmp_path / "t")}}, base_dir=".")
    with pytest.raises(UnsupportedSession) as err:
        run_audit(ConnectLike(refuse_cache=True), config, "2024-03-04")
    message = str(err.value)
    assert "\n" not in message and "[NOT_SUPPORTED_WITH_SERVERLESS]" in message
    assert message.startswith("this Spark Connect session cannot cache DataFrames, which the run needs")
    assert message.endswith("run it on a cluster in dedicated (single user) access mode")
    assert sorted(p.name for p in (tmp_path / "t").iterdir()) == ["audit_runs"]  # nothing else was written
    runs = DeltaTable(str(tmp_path / "t" / "audit_runs")).to_pyarrow_table().to_pylist()
    assert {r["status"] for r in runs} == {"failed"} and all(r["error"].startswith(message[:60]) for r in runs)
