"""The Delta sink (delta-rs commit path) and the runlog rows, on tiny tables under tmp_path.

Tables are checked with delta-rs (``DeltaTable.to_pyarrow_table``) and with Spark reading the Parquet
files the Delta log lists, as DESIGN.md asks of both back ends.
"""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.dataset as pads
import pytest
from deltalake import DeltaTable
from fixtures_sink import killed_before_commit

from jobs import runlog, schemas, sink
from jobs.config import parse_config
from jobs.errors import CommitError, ConfigError, SchemaMismatchError, SinkError
from jobs.sink import SinkOptions, _lease, _staged, read_table, read_table_arrow, write_small, write_table

D1, D2, D3 = dt.date(2024, 3, 1), dt.date(2024, 3, 2), dt.date(2024, 3, 3)
UTC = dt.timezone.utc
RATES = "stale_metadata_rates"
NOW_GRACE = SinkOptions(staging_grace=dt.timedelta(0))


def cfg(tmp_path: Path, cluster: str = "c1"):
    return parse_config({"cluster": cluster, "output": {"root": str(tmp_path / "out")}})


def rates(spark, rows):
    """rows: (cluster, date, subject, responses)."""
    data = [(c, d, "broker", s, n, n // 2, 0.5, n, n) for c, d, s, n in rows]
    return spark.createDataFrame(data, schemas.spark_schema(RATES))


def contents(path) -> list[tuple]:
    t = DeltaTable(str(path)).to_pyarrow_table()
    return sorted(zip(t["cluster"].to_pylist(), t["event_date"].to_pylist(), t["subject"].to_pylist(), strict=True))


def spark_rows(spark, path) -> list[tuple]:
    """Read the table the way DESIGN.md promises without delta-spark: the Parquet files the log lists."""
    files = DeltaTable(str(path)).file_uris()
    if not files:
        return []
    df = spark.read.parquet(*files)
    return sorted((r["subject"], r["responses"]) for r in df.collect())


def staging_dirs(path: Path) -> list[str]:
    """Staging folders and their leases (``<token>.lease``) under the table."""
    st = path / sink.STAGING_DIR
    return sorted(os.listdir(st)) if st.exists() else []


@pytest.mark.spark
def test_round_trip_readable_by_delta_rs_and_spark(spark, tmp_path) -> None:
    config = cfg(tmp_path)
    rows = [("c1", D1, "b1", 10), ("c1", D1, "b2", 20), ("c1", D2, "b3", 30)]
    res = write_table(rates(spark, rows), RATES, config=config, date_range=(D1, D2))
    path = tmp_path / "out" / RATES
    assert (res.backend, res.version, res.rows_written, res.location) == ("delta-rs", 0, 3, str(path))
    assert contents(path) == sorted((c, d, s) for c, d, s, _ in rows)
    table = DeltaTable(str(path))
    assert table.metadata().partition_columns == ["cluster", "event_date"]
    assert pa.schema(table.schema().to_arrow()).names == schemas.arrow_schema(RATES).names
    # Per-file statistics from the footers: row counts only (see the next test for why).
    actions = pa.table(table.get_add_actions(flatten=True)).to_pylist()
    assert sum(a["num_records"] for a in actions) == 3
    # delta-rs readers filtering on any column, string or integer, see every matching row.
    ds = table.to_pyarrow_dataset()
    assert ds.to_table(filter=pads.field("subject") == "b2", use_threads=False).num_rows == 1
    assert ds.to_table(filter=pads.field("responses") >= 20, use_threads=False).num_rows == 2
    # Spark reads the listed Parquet files directly, and read_table adds the partition columns back.
    assert spark_rows(spark, path) == [("b1", 10), ("b2", 20), ("b3", 30)]
    back = read_table(spark, RATES, config)
    assert back.schema == schemas.spark_schema(RATES)
    assert sorted((r.cluster, r.event_date, r.subject) for r in back.collect()) == contents(path)
    assert read_table(spark, RATES, config, date_range=(D2, D2)).count() == 1
    assert read_table_arrow(RATES, config, date_range=(D1, D1)).num_rows == 2
    assert staging_dirs(path) == []


@pytest.mark.spark
def test_a_small_table_of_many_days_is_read_in_one_task_per_core(spark, tmp_path, monkeypatch) -> None:
    """Each day folder is a scan of its own: a small table's are read together (one task per core), a large
    one's each in its own tasks; the rows are the same."""
    from jobs.sink import _read

    config = cfg(tmp_path)
    days = [D1 + dt.timedelta(days=i) for i in range(6)]
    rows = [("c1", d, f"b{i}", i) for i, d in enumerate(days)]
    write_table(rates(spark, rows), RATES, config=config, date_range=(days[0], days[-1]))
    small = read_table(spark, RATES, config)
    assert small.rdd.getNumPartitions() == spark.sparkContext.defaultParallelism < len(days)
    monkeypatch.setattr(_read, "SMALL_READ_BYTES", 0)
    large = read_table(spark, RATES, config)
    assert large.rdd.getNumPartitions() >= len(days)
    key = lambda r: (r.event_date, r.subject, r.responses)  # noqa: E731
    assert sorted(map(key, small.collect())) == sorted(map(key, large.collect())) == [(d, s, n) for _, d, s, n in rows]


@pytest.mark.spark
def test_rerun_replaces_its_range_and_leaves_other_dates_and_clusters(spark, tmp_path) -> None:
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    first = [("c1", D1, "a1", 1), ("c1", D2, "a2", 2), ("c1", D3, "a3", 3)]
    write_table(rates(spark, first), RATES, config=config, date_range=(D1, D3))
    write_table(rates(spark, [("c2", D2, "other", 9)]), RATES, config=config, cluster="c2", date_range=(D2, D2))
    # Same run again: no duplicates.
    write_table(rates(spark, first), RATES, config=config, date_range=(D1, D3))
    assert contents(path) == [("c1", D1, "a1"), ("c1", D2, "a2"), ("c1", D3, "a3"), ("c2", D2, "other")]
    # A rerun of D2 alone with new findings replaces only c1's D2.
    res = write_table(rates(spark, [("c1", D2, "new", 5)]), RATES, config=config, date_range=(D2, D2))
    assert contents(path) == [("c1", D1, "a1"), ("c1", D2, "new"), ("c1", D3, "a3"), ("c2", D2, "other")]
    assert res.version == DeltaTable(str(path)).version() == 3
    # A rerun whose range now has no rows empties exactly that range.
    write_table(rates(spark, []), RATES, config=config, date_range=(D2, D3))
    assert contents(path) == [("c1", D1, "a1"), ("c2", D2, "other")]
    assert sorted(s for s, _ in spark_rows(spark, path)) == ["a1", "other"]


@pytest.mark.spark
def test_append_mode_adds_rows(spark, tmp_path) -> None:
    target = str(tmp_path / "t")
    write_table(rates(spark, [("c1", D1, "x", 1)]), RATES, target=target, mode="append")
    write_table(rates(spark, [("c1", D1, "x", 1)]), RATES, target=target, mode="append")
    assert contents(target) == [("c1", D1, "x"), ("c1", D1, "x")]


@pytest.mark.spark
def test_empty_frame_creates_the_table_with_its_schema(spark, tmp_path) -> None:
    config = cfg(tmp_path)
    empty = spark.createDataFrame([], schemas.spark_schema("fencing_violations"))
    res = write_table(empty, "fencing_violations", config=config, date_range=(D1, D1))
    path = tmp_path / "out" / "fencing_violations"
    assert (res.version, res.files_added, res.rows_written) == (0, 0, 0)
    table = DeltaTable(str(path))
    assert pa.schema(table.schema().to_arrow()).names == schemas.arrow_schema("fencing_violations").names
    assert table.to_pyarrow_table().num_rows == 0
    back = read_table(spark, "fencing_violations", config)
    assert back.schema == schemas.spark_schema("fencing_violations") and back.count() == 0


def _stage_like_a_killed_run(spark, config, rows, monkeypatch) -> None:
    """Run a write that dies after Spark staged and the driver moved the files, before the commit,
    without any cleanup (what SIGKILL leaves behind: the staging folder, its lease, the moved files)."""
    with killed_before_commit(monkeypatch):
        write_table(rates(spark, rows), RATES, config=config, date_range=(D1, D2))


@pytest.mark.spark
def test_run_killed_before_commit_leaves_previous_version_and_next_run_cleans_up(
    spark, tmp_path, monkeypatch
) -> None:
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    write_table(rates(spark, [("c1", D1, "old", 1)]), RATES, config=config, date_range=(D1, D2))
    _stage_like_a_killed_run(spark, config, [("c1", D1, "dead", 2), ("c1", D2, "dead", 3)], monkeypatch)

    dead, lease = staging_dirs(path)
    assert lease == f"{dead}{_lease.LEASE_SUFFIX}"
    moved = json.loads((path / sink.STAGING_DIR / dead / "_moves.json").read_text())["files"]
    assert moved and all((path / m).exists() for m in moved)  # orphans beside the live files...
    table = DeltaTable(str(path))
    assert table.version() == 0 and contents(path) == [("c1", D1, "old")]  # ...invisible to readers
    assert spark_rows(spark, path) == [("old", 1)]

    # The very next run (no grace period) removes the dead run's staging folder, lease and moved files:
    # the lease names a write this process is no longer doing (another process: a pid that is gone).
    write_table(rates(spark, [("c1", D3, "other", 4)]), RATES, config=config, date_range=(D3, D3))
    assert staging_dirs(path) == []
    assert not any((path / m).exists() for m in moved)
    write_table(rates(spark, [("c1", D1, "new", 5)]), RATES, config=config, date_range=(D1, D2))
    assert contents(path) == [("c1", D1, "new"), ("c1", D3, "other")]


@pytest.mark.spark
def test_failed_commit_raises_and_leaves_no_files(spark, tmp_path, monkeypatch) -> None:
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    write_table(rates(spark, [("c1", D1, "old", 1)]), RATES, config=config, date_range=(D1, D1))
    before = sorted(p.relative_to(path) for p in path.rglob("*.parquet"))

    def boom(*args, **kwargs):
        raise CommitError("simulated conflict")

    monkeypatch.setattr(_staged, "_commit", boom)
    with pytest.raises(CommitError, match="simulated conflict"):
        write_table(rates(spark, [("c1", D1, "new", 2)]), RATES, config=config, date_range=(D1, D1))
    assert sorted(p.relative_to(path) for p in path.rglob("*.parquet")) == before
    assert staging_dirs(path) == [] and contents(path) == [("c1", D1, "old")]


@pytest.mark.spark
def test_a_first_run_killed_before_commit_does_not_block_the_next(spark, tmp_path, monkeypatch) -> None:
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    _stage_like_a_killed_run(spark, config, [("c1", D1, "dead", 2)], monkeypatch)
    assert not DeltaTable.is_deltatable(str(path))
    write_table(rates(spark, [("c1", D1, "ok", 1)]), RATES, config=config, date_range=(D1, D1), options=NOW_GRACE)
    assert contents(path) == [("c1", D1, "ok")] and staging_dirs(path) == []


@pytest.mark.spark
def test_rows_outside_the_range_are_refused(spark, tmp_path) -> None:
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    write_table(rates(spark, [("c1", D1, "old", 1)]), RATES, config=config, date_range=(D1, D1))
    with pytest.raises(SinkError, match=r"event_date=2024-03-03 fall outside the replaced range"):
        write_table(rates(spark, [("c1", D3, "late", 1)]), RATES, config=config, date_range=(D1, D2))
    with pytest.raises(SinkError, match=r"cluster='c9'"):
        write_table(rates(spark, [("c9", D1, "x", 1)]), RATES, config=config, date_range=(D1, D1))
    assert contents(path) == [("c1", D1, "old")] and staging_dirs(path) == []
    assert not list(path.glob("cluster=c1/event_date=2024-03-03/*")) and not list(path.glob("cluster=c9/*/*"))


D4 = dt.date(2024, 3, 4)


@pytest.mark.spark
def test_hold_back_keeps_the_days_before_the_range_out_of_the_table_until_released(spark, tmp_path) -> None:
    """One write of the lookback days and the range: only the range is committed; the lookback days' rows come
    back as run-scoped staged files (the run's state), owned by a live lease until released."""
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    write_table(rates(spark, [("c1", D1, "earlier-run", 1)]), RATES, config=config, date_range=(D1, D1))
    rows = [("c1", D1, "h1", 1), ("c1", D2, "h2", 2), ("c1", D2, "h3", 3), ("c1", D3, "w1", 4)]
    res = write_table(rates(spark, rows), RATES, config=config, date_range=(D3, D3), hold_back=(D1, D2))
    # the table: the earlier run's D1 untouched, the range written, no held row committed or in its folders
    assert contents(path) == [("c1", D1, "earlier-run"), ("c1", D3, "w1")]
    assert res.rows_written == 1 and res.version == 1
    assert {p.parent.name for p in path.rglob("*.parquet") if sink.STAGING_DIR not in p.parts} == {
        "event_date=2024-03-01", "event_date=2024-03-03"}
    assert len(list((path / "cluster=c1" / "event_date=2024-03-01").glob("*.parquet"))) == 1  # the earlier run's
    # the held rows, in the table's schema, until released
    held = res.held.frame
    assert held.schema == schemas.spark_schema(RATES)
    assert sorted((r.cluster, r.event_date, r.subject, r.responses) for r in held.collect()) == rows[:3]
    token, lease = staging_dirs(path)
    assert lease == f"{token}{_lease.LEASE_SUFFIX}"
    # another write of the table meanwhile leaves a live run's held rows alone
    write_table(rates(spark, [("c1", D4, "other", 1)]), RATES, config=config, date_range=(D4, D4),
                options=NOW_GRACE)
    assert staging_dirs(path) == [token, lease] and held.count() == 3
    res.held.release()
    res.held.release()  # idempotent
    assert staging_dirs(path) == []
    # nothing held: no state at all
    none = write_table(rates(spark, [("c1", D3, "w2", 5)]), RATES, config=config, date_range=(D3, D3),
                       hold_back=(D1, D2))
    assert none.held is not None and none.held.frame is None and staging_dirs(path) == []
    assert contents(path) == [("c1", D1, "earlier-run"), ("c1", D3, "w2"), ("c1", D4, "other")]


def test_keep_days_leaves_the_days_it_names_without_rows_as_stored(spark, tmp_path) -> None:
    """A rerun keeps what its input no longer yields: the days ``keep_days`` names that the write has no row on are
    taken out of the replace; a named day the write has rows on is replaced as before, and so is an unnamed one."""
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    write_table(rates(spark, [("c1", d, f"old{d.day}", 1) for d in (D1, D2, D3)]), RATES, config=config,
                date_range=(D1, D3))
    seen: list[frozenset] = []

    def keep(written: frozenset) -> list:
        seen.append(written)
        return [D1, D2, D4]  # D2 has a row of this write, D4 is outside the range: neither is kept
    res = write_table(rates(spark, [("c1", D2, "new2", 2)]), RATES, config=config, date_range=(D1, D3),
                      keep_days=keep)
    assert seen == [frozenset({D2})] and res.kept_days == (D1,)
    assert contents(path) == [("c1", D1, "old1"), ("c1", D2, "new2")]
    plain = write_table(rates(spark, [("c1", D3, "new3", 3)]), RATES, config=config, date_range=(D1, D3))
    assert plain.kept_days == () and contents(path) == [("c1", D3, "new3")]
    with pytest.raises(ConfigError, match="keep_days .* needs mode='replace_range'"):
        write_table(rates(spark, []), RATES, config=config, mode="append", keep_days=keep)


@pytest.mark.spark
def test_hold_back_still_refuses_rows_outside_both_ranges_and_bad_arguments(spark, tmp_path) -> None:
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    with pytest.raises(SinkError, match=r"event_date=2024-03-04 fall outside"):
        write_table(rates(spark, [("c1", D1, "h", 1), ("c1", D4, "late", 1)]), RATES, config=config,
                    date_range=(D3, D3), hold_back=(D1, D2))
    assert staging_dirs(path) == []
    with pytest.raises(ConfigError, match="must end before the range's first day"):
        write_table(rates(spark, []), RATES, config=config, date_range=(D2, D3), hold_back=(D1, D2))
    with pytest.raises(ConfigError, match="needs mode='replace_range'"):
        write_table(rates(spark, []), RATES, config=config, mode="append", hold_back=(D1, D1))


@pytest.mark.spark
def test_held_rows_of_a_killed_run_never_reach_the_table_and_the_next_write_removes_them(
    spark, tmp_path, monkeypatch
) -> None:
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    res = write_table(rates(spark, [("c1", D1, "h", 1), ("c1", D2, "w", 2)]), RATES, config=config,
                      date_range=(D2, D2), hold_back=(D1, D1))
    with monkeypatch.context() as m:  # the process dies: its lease is no longer renewed, nothing is cleaned
        m.setattr(_staged, "_discard_staging", lambda *a, **k: None)
        m.setattr(_lease, "remove_lease", lambda *a, **k: None)
        res.held.release()
    assert len(staging_dirs(path)) == 2
    assert contents(path) == [("c1", D2, "w")] and not (path / "cluster=c1" / "event_date=2024-03-01").exists()
    write_table(rates(spark, [("c1", D3, "next", 3)]), RATES, config=config, date_range=(D3, D3))
    assert staging_dirs(path) == []
    assert contents(path) == [("c1", D2, "w"), ("c1", D3, "next")]
    assert all(os.path.exists(f) for f in DeltaTable(str(path)).file_uris())


def _last_write_plan(spark) -> str:
    """The physical plan of the session's latest file write (Spark's SQL status store; its listener is async)."""
    import time

    store = spark._jsparkSession.sharedState().statusStore()
    for _ in range(50):
        execs = store.executionsList()
        plans = [execs.apply(i).physicalPlanDescription() for i in range(execs.size())]
        writes = [p for p in plans if "InsertIntoHadoopFsRelationCommand" in p]
        if writes:
            return writes[-1]
        time.sleep(0.1)
    raise AssertionError("no file write in the SQL status store")


@pytest.mark.spark
def test_the_staged_write_streams_rows_into_their_partitions_without_sorting_them(spark, tmp_path) -> None:
    """Issue 16: a partitioned write no longer sorts every row by (cluster, event_date) first; a task that
    meets more partitions than it keeps writers open for still writes every row (Spark sorts the rest)."""
    config = cfg(tmp_path)
    path = tmp_path / "out" / RATES
    days = [D1 + dt.timedelta(days=i) for i in range(7)]
    rows = [("c1", days[i % 7], "broker", f"s{i}", i, 0, 0.0, 0, i) for i in range(70)]
    df = spark.createDataFrame(rows, schemas.spark_schema(RATES)).coalesce(1)
    previous = spark.conf.get("spark.sql.maxConcurrentOutputFileWriters")
    write_table(df, RATES, config=config, date_range=(days[0], days[-1]))
    plan = _last_write_plan(spark)
    head = plan[plan.index("== Physical Plan =="):plan.index("(1)")]
    assert "WriteFiles" in head and "Sort" not in head
    assert contents(path) == sorted(("c1", d, s) for _, d, _, s, *_ in rows)
    assert {p.parent.name for p in path.rglob("*.parquet")} == {f"event_date={d}" for d in days}
    assert spark.conf.get("spark.sql.maxConcurrentOutputFileWriters") == previous  # the session's own again


@pytest.mark.spark
def test_schema_errors_are_clear(spark, tmp_path) -> None:
    config = cfg(tmp_path)
    df = rates(spark, [("c1", D1, "x", 1)])
    with pytest.raises(SchemaMismatchError, match="missing stale_rate"):
        write_table(df.drop("stale_rate"), RATES, config=config, date_range=(D1, D1))
    with pytest.raises(SchemaMismatchError, match="unexpected extra"):
        write_table(df.withColumn("extra", df.responses), RATES, config=config, date_range=(D1, D1))
    with pytest.raises(SchemaMismatchError, match=r"stale_metadata_rates.subject: has type int"):
        write_table(df.withColumn("subject", df.responses.cast("int")), RATES, config=config, date_range=(D1, D1))
    # Narrower numeric types are cast to the table's.
    write_table(df.withColumn("responses", df.responses.cast("int")), RATES, config=config, date_range=(D1, D1))
    # An existing table whose columns were dropped or retyped in code is refused, and left as it was.
    target = str(tmp_path / "custom")
    write_table(df, "custom", target=target, cluster="c1", date_range=(D1, D1))
    with pytest.raises(SchemaMismatchError, match="columns gone stale_rate.*only new nullable columns"):
        write_table(df.drop("stale_rate"), "custom", target=target, cluster="c1", date_range=(D1, D1))
    with pytest.raises(SchemaMismatchError, match="changed types subject"):
        write_table(df.withColumn("subject", df.responses), "custom", target=target, cluster="c1", date_range=(D1, D1))
    assert DeltaTable(target).version() == 0


@pytest.mark.spark
def test_a_column_added_in_code_is_added_to_the_existing_table(spark, tmp_path) -> None:
    """An upgrade that adds a nullable column (metadata_token, say) must not stop the next run."""
    target = str(tmp_path / "custom")
    df = rates(spark, [("c1", D1, "old", 1)])
    write_table(df, "custom", target=target, cluster="c1", date_range=(D1, D1))
    newer = rates(spark, [("c1", D2, "new", 2)])
    newer = newer.select(newer.cluster, newer.event_date, (newer.responses * 10).alias("added"), *newer.columns[2:])
    write_table(newer, "custom", target=target, cluster="c1", date_range=(D2, D2))
    got = DeltaTable(target).to_pyarrow_table().to_pylist()
    assert sorted((r["subject"], r["added"]) for r in got) == [("new", 20), ("old", None)]
    # and again through the small-table path, now that the table has the column
    write_small(pa.Table.from_pylist([r for r in got if r["subject"] == "new"]), "custom", target=target,
                cluster="c1", date_range=(D2, D2))  # fmt: skip
    assert len(DeltaTable(target).to_pyarrow_table()) == 2


@pytest.mark.spark
def test_argument_errors(spark, tmp_path) -> None:
    df = rates(spark, [("c1", D1, "x", 1)])
    with pytest.raises(ConfigError, match="needs date_range"):
        write_table(df, RATES, config=cfg(tmp_path))
    with pytest.raises(ConfigError, match="needs a cluster"):
        write_table(df, RATES, target=str(tmp_path / "t"), date_range=(D1, D1))
    with pytest.raises(ConfigError, match="give either config= or target="):
        write_table(df, RATES, date_range=(D1, D1))
    with pytest.raises(ConfigError, match="is after"):
        write_table(df, RATES, config=cfg(tmp_path), date_range=(D2, D1))
    with pytest.raises(SinkError, match="no Delta support"):
        write_table(df, RATES, config=cfg(tmp_path), date_range=(D1, D1), backend="delta-spark")
    catalog = parse_config({"cluster": "c1", "output": {"catalog": "k", "schema": "s"}})
    with pytest.raises(SinkError, match="needs Spark's Delta source"):
        write_table(df, RATES, config=catalog, date_range=(D1, D1))
    with pytest.raises(SinkError, match="no Delta table"):
        read_table(spark, RATES, cfg(tmp_path / "nothing"))


@pytest.mark.spark
def test_nested_types_and_timestamps_survive_both_readers(spark, tmp_path) -> None:
    config = cfg(tmp_path)
    ts = dt.datetime(2024, 3, 1, 23, 59, 59, 123456, tzinfo=UTC)
    row = {c.name: None for c in schemas.TABLES["epoch_lineage"]}
    row.update(
        cluster="c1", event_date=D1, broker=1, snapshot_ts=ts, topic="t", partition=0,
        entries=[{"epoch": 0, "start_offset": 0}, {"epoch": 3, "start_offset": 42}], event_ts=ts,
    )
    df = spark.createDataFrame([row], schemas.spark_schema("epoch_lineage"))
    write_table(df, "epoch_lineage", config=config, date_range=(D1, D1))
    got = read_table_arrow("epoch_lineage", config).to_pylist()[0]
    assert got["entries"] == row["entries"] and got["snapshot_ts"] == ts
    back = read_table(spark, "epoch_lineage", config).collect()[0]
    assert back.entries[1].start_offset == 42 and back.event_date == D1
    assert back.snapshot_ts.replace(tzinfo=None) == ts.replace(tzinfo=None)  # session time zone is UTC


# ------------------------------------------------------------------------------------ small + runlog


def ctx() -> runlog.RunContext:
    return runlog.RunContext(cluster="c1", range_from=D1, range_to=D2, run_id="run-1")


def test_write_small_round_trip_and_rerun(tmp_path) -> None:
    config = cfg(tmp_path)
    rows = [
        {"cluster": "c1", "event_date": D1, "dimension": "client", "subject": "app", "responses": 4,
         "stale_responses": 1, "stale_rate": 0.25},
    ]
    data = pa.Table.from_pylist(rows, schema=schemas.arrow_schema(RATES))
    write_small(data, RATES, config=config, date_range=(D1, D1))
    write_small(data, RATES, config=config, date_range=(D1, D1))
    path = tmp_path / "out" / RATES
    assert contents(path) == [("c1", D1, "app")]
    with pytest.raises(SinkError, match="1 rows fall outside"):
        write_small(data, RATES, config=config, date_range=(D2, D2))
    with pytest.raises(SchemaMismatchError, match="missing stale_rate"):
        write_small(data.drop(["stale_rate"]), RATES, config=config, date_range=(D1, D1))


def test_quarantine_rows_are_bounded_and_dated() -> None:
    row = runlog.quarantine_row(
        ctx(), source_kind="offsets", source="/x/00000000000000000000.log", position=61, unit="batch",
        reason="bad CRC at byte 61", raw=b"\x00" * 10_000,
    )
    assert len(row["raw"]) == runlog.MAX_RAW_BYTES == 4096
    assert row["event_date"] == D1 and row["run_id"] == "run-1"
    inside = runlog.quarantine_row(
        ctx(), source_kind="metadata", source="a.jsonl", position=3, unit="line", reason="r", raw=None,
        event_date=D2,
    )
    assert inside["event_date"] == D2 and inside["raw"] is None
    # issue 13 item 2: a unit is dated by its own time even outside the range (never moved to `from`)
    later = runlog.quarantine_row(
        ctx(), source_kind="metadata", source="a.jsonl", position=4, unit="line", reason="r", raw=None,
        event_date=dt.date(2030, 1, 1),
    )
    assert later["event_date"] == dt.date(2030, 1, 1) and not ctx().holds(later["event_date"])
    table = runlog.quarantine_table([row, inside])
    assert table.schema == schemas.arrow_schema("quarantine")
    with pytest.raises(ValueError, match="unit 'blob'"):
        runlog.quarantine_row(ctx(), source_kind="offsets", source="s", position=0, unit="blob", reason="r", raw=b"")


def test_source_counts_must_reconcile() -> None:
    assert runlog.SourceCounts("offsets", "batch", 9, 1, 120).units_read == 10
    assert runlog.SourceCounts("offsets", "batch", 9, 1, 120, units_read=10).units_read == 10
    with pytest.raises(ValueError, match="units_read 11 != units_decoded 9 \\+ units_quarantined 1"):
        runlog.SourceCounts("offsets", "batch", 9, 1, 120, units_read=11)
    with pytest.raises(ValueError, match="source_kind 'pcap'"):
        runlog.SourceCounts("pcap", "frame", 1, 0, 1)


def test_run_context_defaults(tmp_path) -> None:
    import epochlib

    c = runlog.RunContext.start(cfg(tmp_path), "2024-03-01", "2024-03-02")
    assert len(c.run_id) == 32 and c.code_version == epochlib.__version__
    assert c.started_at.tzinfo is not None and c.date_range == (D1, D2)
    assert runlog.RunContext.start(cfg(tmp_path), D1, run_id="fixed").run_id == "fixed"
    with pytest.raises(ConfigError):
        runlog.RunContext.start(cfg(tmp_path), "2024-03-02", "2024-03-01")


def test_audit_runs_append_history(tmp_path) -> None:
    config = cfg(tmp_path)
    counts = [runlog.SourceCounts("offsets", "batch", 9, 1, 120), runlog.SourceCounts("logdirs", "file", 4, 0, 4)]
    rows = runlog.audit_run_table(ctx(), counts, {"stale_metadata": 2, "fencing_violations": 0})
    assert rows.num_rows == 2 and rows.schema == schemas.arrow_schema("audit_runs")
    runlog.write_audit_runs(rows, config)
    runlog.write_audit_runs(runlog.audit_run_table(ctx(), [], {}, status="failed"), config)
    got = read_table_arrow("audit_runs", config).to_pylist()
    assert len(got) == 3
    offsets = next(r for r in got if r["source_kind"] == "offsets")
    assert offsets["units_read"] == offsets["units_decoded"] + offsets["units_quarantined"] == 10
    assert dict(offsets["findings"]) == {"fencing_violations": 0, "stale_metadata": 2}
    assert {r["status"] for r in got} == {"ok", "failed"}


@pytest.mark.spark
def test_quarantine_frame_through_spark(spark, tmp_path) -> None:
    config = cfg(tmp_path)
    raw = spark.createDataFrame(
        [("/s/a.log", 0, "batch", "bad magic 7 at byte 16", bytearray(b"\x01" * 5000), None),
         ("/s/b.txt", 12, "line", "not JSON at line 12", bytearray(b"{"), dt.date(2030, 1, 1))],
        "source string, position int, unit string, reason string, raw binary, event_date date",
    )
    q = runlog.quarantine_frame(raw, ctx(), "offsets")
    write_table(q, "quarantine", config=config, date_range=ctx().date_range)
    got = sorted(read_table_arrow("quarantine", config).to_pylist(), key=lambda r: r["position"])
    # issue 13 item 2: no own time -> the run's from date; an own date outside the range -> not this
    # run's row (the run whose range holds 2030-01-01 writes it)
    assert [len(r["raw"]) for r in got] == [4096]
    assert [r["event_date"] for r in got] == [D1]
    assert {r["source_kind"] for r in got} == {"offsets"}
    inside = spark.createDataFrame(
        [("/s/b.txt", 13, "line", "not JSON at line 13", bytearray(b"{"), D2)],
        "source string, position int, unit string, reason string, raw binary, event_date date",
    )
    assert [r["event_date"] for r in runlog.quarantine_frame(inside, ctx(), "offsets").collect()] == [D2]


def test_targets_resolve_through_the_one_filesystem_layer(tmp_path) -> None:
    """Spark keeps the location as written (s3a), delta-rs gets its own dialect (s3), local paths are
    absolute, catalog names stay names."""
    from jobs.sink._target import resolve_target

    s3 = resolve_target(RATES, None, "s3a://bucket/out/rates/", "c1", None)
    assert (s3.location, s3.spark, s3.native, s3.is_catalog) == (
        "s3a://bucket/out/rates", "s3a://bucket/out/rates", "s3://bucket/out/rates", False)
    local = resolve_target(RATES, cfg(tmp_path), None, None, None)
    assert local.location == local.native == str(tmp_path / "out" / RATES) and local.cluster == "c1"
    assert sink.table_location(RATES, target=f"file://{tmp_path}/x/") == str(tmp_path / "x")
    cat = resolve_target(RATES, None, "main.audit.rates", "c1", None)
    assert cat.is_catalog and cat.location == cat.spark == cat.native == "main.audit.rates"
