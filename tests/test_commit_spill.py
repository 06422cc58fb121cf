"""The commit pass over spilled Arrow buckets (:mod:`jobs.reports.commit_spill`) finds what Spark's cogroup
finds: the same bucket in Python and in Spark, the same commits read from the files as Spark reads them, and
the same findings in whole audits (a first run, a rerun whose lookback day is both in the table and in the
run's inputs) — and leaves no scratch files behind."""

from __future__ import annotations

import datetime as dt
import json
import os
import random
import subprocess
import sys

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytestmark = pytest.mark.spark

UTC = dt.timezone.utc


def test_a_partition_has_one_bucket_in_every_process_and_arrow_layout() -> None:
    """File rows (pyarrow: string) and Spark rows (maybe large_string, any chunking) of one partition must meet
    in one bucket, in every executor process (no per-process string hash)."""
    from jobs.reports.commit_spill import bucket_of

    rng = random.Random(7)
    topics = ["", "orders", "zählung-ü", "日本語", "a" * 249, None, "__consumer_offsets"]
    rows = [(rng.choice(topics), rng.choice([None, 0, 1, 2**31 - 1, -1, rng.randrange(10_000)])) for _ in range(400)]
    topic, part = pa.array([t for t, _ in rows], pa.string()), pa.array([p for _, p in rows], pa.int32())
    want = bucket_of(topic, part, 10).tolist()
    assert len(set(want)) == 10  # it spreads
    chunked = pa.chunked_array([topic.slice(0, 100), topic.slice(100)]).cast(pa.large_string())
    assert bucket_of(chunked, pa.chunked_array([part.slice(0, 250), part.slice(250)]), 10).tolist() == want
    # dictionary-encoded (as the spill reads the data files), over chunks with different dictionaries
    dictionary = pa.dictionary(pa.int32(), pa.string())
    assert bucket_of(topic.cast(dictionary), part, 10).tolist() == want
    assert bucket_of(pa.chunked_array([topic.slice(0, 100).cast(dictionary), topic.slice(100).cast(dictionary)]),
                     part, 10).tolist() == want
    # a partition's rows group together whatever the dictionary: a repeated value, a null in it or a null index
    from jobs.reports._frames import value_codes

    odd = pa.DictionaryArray.from_arrays(pa.array([0, None, 1, 2, 3], pa.int32()), pa.array(["a", None, "a", "b"]))
    codes = value_codes(odd).tolist()
    assert codes[0] == codes[3] and codes[1] == codes[2] and len({codes[0], codes[1], codes[4]}) == 3
    assert bucket_of(odd, pa.array([1] * 5, pa.int32()), 1000).tolist() == bucket_of(
        pa.array(["a", None, None, "a", "b"]), pa.array([1] * 5, pa.int32()), 1000).tolist()
    # a bucket's slice of a row group carries only the dictionary values it uses (not every group id of the group)
    from jobs.reports.commit_spill import _compacted, _plain

    many = pa.array([f"g{i}" for i in range(50_000)]).cast(dictionary)
    cut = pa.table({"group_id": many, "partition": pa.array(range(50_000), pa.int32())}).slice(100, 10)
    small = _compacted(cut)
    assert len(small.column("group_id").combine_chunks().dictionary) == 10
    assert _plain(small).to_pylist() == _plain(cut).to_pylist()
    assert _plain(_compacted(pa.table({"g": odd}))).column("g").to_pylist() == ["a", None, None, "a", "b"]
    # a null topic is "", a null partition 0
    nulls = bucket_of(pa.array([None, "", "x"]), pa.array([0, None, None], pa.int32()), 1000).tolist()
    assert nulls[0] == nulls[1] == bucket_of(pa.array([""]), pa.array([0], pa.int32()), 1000)[0] != nulls[2]
    code = ("import pyarrow as pa, json, sys; from jobs.reports.commit_spill import bucket_of; r = json.load(sys.stdin); "
            "print(json.dumps(bucket_of(pa.array([t for t, _ in r], pa.string()), "
            "pa.array([p for _, p in r], pa.int32()), 10).tolist()))")  # fmt: skip
    for seed in ("1", "2"):
        out = subprocess.run([sys.executable, "-c", code], input=json.dumps(rows), capture_output=True, text=True,
                             check=True, env={**os.environ, "PYTHONHASHSEED": seed})  # fmt: skip
        assert json.loads(out.stdout) == want


def _commit(i: int, **kw) -> dict:
    base = dt.datetime(2024, 3, 3, 12, tzinfo=UTC)
    row = {
        "cluster": "c", "event_date": dt.date(2024, 3, 3), "group_id": f"g{i % 3}", "topic": "t", "partition": i % 2,
        "committed_offset": 100 + i, "leader_epoch": i % 4, "commit_ts": base + dt.timedelta(microseconds=1500 * i),
        "event_ts": None if i % 5 == 0 else base + dt.timedelta(seconds=i, microseconds=999), "is_tombstone": i == 7,
        "txn_state": [None, "none", "committed", "aborted", "pending"][i % 5], "log_offset": i, "source": "s",
        "position": 10 * i,
    }  # fmt: skip
    row.update(kw)
    return row


def test_a_data_file_s_live_commits_are_the_ones_spark_reads(spark, tmp_path, monkeypatch) -> None:
    import pyarrow.parquet as pq

    from jobs import schemas
    from jobs.config import default_config
    from jobs.reports import commit_pass, commit_spill
    from jobs.reports._frames import key_groups as _key_groups
    from jobs.reports.commit_spill import (
        ROWS_COLUMNS,
        _plain,
        _rows_schema,
        _spill_schema,
        commit_file_rows,
    )
    from jobs.sink import table_files, write_table

    config = default_config().with_overrides(output_root=str(tmp_path), cluster="c")
    # before 1970 (floored ms), sub-ms micros, every txn state, no event time, a tombstone without an offset
    rows = [_commit(i) for i in range(40)]
    rows.append(_commit(40, commit_ts=dt.datetime(1969, 12, 31, 23, 59, 59, 999_001, tzinfo=UTC), event_ts=None))
    rows.append(_commit(41, committed_offset=None, is_tombstone=True, leader_epoch=None))
    # a commit without a group, two without a topic: their own groups
    rows += [_commit(42, group_id=None, txn_state=None)]
    rows += [_commit(i, topic=None, partition=0, group_id="gx", leader_epoch=ep, txn_state=None)
             for i, ep in ((43, 3), (44, 0))]  # an epoch drop: F4
    # several data files: the spill's tasks take runs of them (below)
    df = spark.createDataFrame(rows, schemas.spark_schema("offset_commits")).repartition(3)
    window = (dt.date(2024, 3, 3), dt.date(2024, 3, 3))
    write_table(df, "offset_commits", config=config, date_range=window, cluster="c")
    want = commit_pass.commit_rows(commit_pass.read_commits(spark, config, "c", window)).collect()
    want = sorted((tuple(r) for r in want), key=repr)

    files = table_files("offset_commits", config, cluster="c", date_range=window)
    assert len(files.files) == 3
    tables = [pq.read_table(f"{files.root}/{f.path}") for f in files.files]
    got = pa.concat_tables([commit_file_rows(t, _rows_schema()) for t in tables])
    assert got.column_names == list(ROWS_COLUMNS)
    assert sorted((tuple(r.values()) for r in got.to_pylist()), key=repr) == want
    # the strings read as dictionaries and spilled so: the same rows once decoded, in the same groups
    spilled = [commit_file_rows(pq.read_table(f"{files.root}/{f.path}", read_dictionary=["topic", "group_id", "source",
                                                                                         "txn_state"]), _spill_schema())
               for f in files.files]  # fmt: skip
    assert all(pa.types.is_dictionary(t.schema.field("source").type) for t in spilled)
    decoded = pa.concat_tables(spilled).combine_chunks()
    assert sorted((tuple(r.values()) for r in _plain(decoded).to_pylist()), key=repr) == want
    by_dict, by_plain = _key_groups(decoded)[1], _key_groups(_plain(decoded))[1]
    assert len(by_dict) == len(by_plain) == len({(r[0], r[1]) for r in want})
    assert len(want) == 45 - 16  # aborted and pending left out
    # a file of an older layout, without `position`: null, as Spark reads it in the table's schema
    old = pa.concat_tables([commit_file_rows(t.drop_columns(["position"]), _rows_schema()) for t in tables])
    assert sorted((tuple(r.values()) for r in old.to_pylist()), key=repr) == sorted(((*r[:-1], None) for r in want),
                                                                                key=repr)

    # the whole spilled pass over these files (no lineage, so no bucket has side rows) finds what the cogroup does
    from jobs.reports.commit_spill import CommitSpill
    from jobs.reports.fencing import lineage

    lin = lineage(spark, config, "c", window)
    ref = commit_pass.commit_findings(commit_pass.read_commits(spark, config, "c", window), lin, None, tolerance_ms=0,
                                      resets=False).collect()  # fmt: skip
    # all the files in one spill task (local[1], few rows), then a task per file
    for per_task in (commit_spill.ROWS_PER_SPILL_TASK, 1):
        monkeypatch.setattr(commit_spill, "ROWS_PER_SPILL_TASK", per_task)
        spill = CommitSpill.plan(spark, config, "c", window, min_rows=0)
        tasks = commit_spill.spill_tasks(spill.file_rows, spark.sparkContext.defaultParallelism)  # what it runs
        assert len(tasks) == (min(len(files.files), spark.sparkContext.defaultParallelism) if per_task > 1
                              else len(files.files))
        try:
            found = spill.findings(lin, None, tolerance_ms=0, resets=False).collect()
            assert spill.rows_spilled == len(want)
        finally:
            spill.close()
        assert sorted(map(repr, found)) == sorted(map(repr, ref))
    assert {r["group_id"] for r in found} >= {"g0", "g1", "g2", "gx"}
    assert [r["rule"] for r in found if r["group_id"] == "gx"] == ["F4"]


@pytest.mark.slow
def test_audits_with_the_spilled_pass_find_what_the_cogroup_finds(spark, tmp_path, monkeypatch) -> None:
    sim_mod = pytest.importorskip("epochlib.sim")
    from jobs.audit import run_audit
    from jobs.config import parse_config
    from jobs.reports import _frames as fr
    from jobs.reports import commit_pass, commit_spill
    from jobs.reports.fencing import lineage
    from jobs.sink import read_table_arrow

    d1, d2 = "2024-06-30", "2024-07-01"
    sc = sim_mod.Scenario(name="spill", seed=13, start=f"{d1}T18:00:00", days=0.5, commits=2000,
                          snapshot_interval_hours=2.0, retention_hours=3.0)  # fmt: skip
    sim = sim_mod.simulate(sc, tmp_path / "sim")

    def config(root: str):
        return parse_config({
            "cluster": "spill",
            "inputs": {"offsets": str(sim.offsets), "logdirs": str(sim.logdirs), "metadata": str(sim.metadata)},
            "output": {"root": str(tmp_path / root)},
        })  # fmt: skip

    def findings(cfg, day: str | None = None) -> list[dict]:
        out = []
        for table in ("fencing_violations", "spurious_offset_resets"):
            out += [{k: v for k, v in r.items() if k != "run_id"} for r in read_table_arrow(table, cfg).to_pylist()
                    if day is None or r["event_date"].isoformat() == day]  # fmt: skip
        return sorted(out, key=lambda r: r["finding_id"])

    planned: list[object] = []
    spied: list[tuple[dt.date, dt.date]] = []  # the windows planned
    plan = commit_spill.CommitSpill.plan.__func__

    def spy(cls, *args, **kwargs):
        spill = plan(cls, *args, **kwargs)
        planned.append(spill)
        spied.append(args[3])
        return spill

    cogroup, spilled = config("cogroup"), config("spilled")
    run_audit(spark, cogroup, d1, d2, progress_interval=0)
    assert planned == [], "a small run keeps the cogroup"
    monkeypatch.setattr(commit_spill.CommitSpill, "plan", classmethod(spy))
    monkeypatch.setattr(commit_spill, "MIN_ROWS", 0)
    run_audit(spark, spilled, d1, d2, progress_interval=0)
    want = findings(cogroup)
    assert {r["rule"][:2] for r in want} >= {"F2", "F4", "S1"}
    assert findings(spilled) == want
    assert planned and all(p is not None for p in planned)
    # a rerun of d2: d1's commits are in the table and in the run's inputs (counted once)
    run_audit(spark, spilled, d2, d2, progress_interval=0)
    assert planned[-1].spark_rows is not None
    # d1's commits were spilled once (the table's and the run's own are the same records), d2's from the files
    rerun_window = spied[-1]
    assert planned[-1].rows_spilled == commit_pass.commit_rows(
        commit_pass.read_commits(spark, spilled, "spill", rerun_window)).count()
    assert findings(spilled, d2) == findings(cogroup, d2)
    scratch = tmp_path / "spilled" / "offset_commits" / commit_spill.SCRATCH_DIR
    assert not scratch.exists() or not any(scratch.iterdir())

    # too many commits for small files, or a sink that does not stage files (delta-spark): the cogroup again
    import jobs.sink

    whole = (dt.date(2024, 6, 30), dt.date(2024, 7, 1))
    monkeypatch.setattr(commit_spill, "MAX_ROWS", 100)
    assert commit_spill.CommitSpill.plan(spark, spilled, "spill", whole) is None
    monkeypatch.undo()
    monkeypatch.setattr(jobs.sink, "adopts_files", lambda *a, **k: False)
    assert commit_spill.CommitSpill.plan(spark, spilled, "spill", whole, min_rows=0) is None
    monkeypatch.undo()

    # each rule family alone, straight against the cogroup
    window = (dt.date.fromisoformat(d1), dt.date.fromisoformat(d2))
    lin = lineage(spark, spilled, "spill", window)
    groups = fr.read_silver(spark, spilled, "group_metadata", "spill", window)
    commits = commit_pass.read_commits(spark, spilled, "spill", window)
    for fencing, resets in ((True, False), (False, True)):
        spill = commit_spill.CommitSpill.plan(spark, spilled, "spill", window, min_rows=0)
        try:
            got = spill.findings(lin, groups, tolerance_ms=60_000, fencing=fencing, resets=resets).collect()
        finally:
            spill.close()
        ref = commit_pass.commit_findings(commits, lin, groups, tolerance_ms=60_000, fencing=fencing, resets=resets)
        assert sorted(map(repr, got)) == sorted(map(repr, ref.collect()))
        assert {r["rule"][0] for r in got} == ({"F"} if fencing else {"S"})


@given(st.lists(st.integers(0, 5_000_000), max_size=40), st.integers(1, 16))
@settings(max_examples=300, deadline=None)
def test_spill_tasks_cover_the_files_in_order_with_at_most_one_task_per_file(rows, parallelism) -> None:
    """Every data file is spilled once, the files keep their order (a bucket's rows come in the order of a task
    per file), every task has a file, and there are as many tasks as the rows ask (at least one per core)."""
    from jobs.reports.commit_spill import ROWS_PER_SPILL_TASK, spill_tasks

    runs = spill_tasks(rows, parallelism)
    assert [i for run in runs for i in run] == list(range(len(rows)))
    assert all(len(run) for run in runs)
    assert len(runs) == min(len(rows), max(parallelism, -(-sum(rows) // ROWS_PER_SPILL_TASK)))
    if runs and all(rows):  # no task holds far more than its share, unless one file alone does
        share = sum(rows) / len(runs)
        assert all(sum(rows[i] for i in run) <= 2 * share or len(run) == 1 or max(rows[i] for i in run) > share
                   for run in runs)


def test_a_dead_run_s_scratch_folder_is_swept_and_a_live_one_kept(tmp_path) -> None:
    """By the time in the folder's name (S3 and GCS list folders without one), not the folder's own time."""
    from jobs.reports.commit_spill import _STAMP, sweep_scratch

    now = dt.datetime.now(UTC)
    dead = tmp_path / f"{(now - dt.timedelta(days=2)).strftime(_STAMP)}-0a1b"
    live = tmp_path / f"{(now - dt.timedelta(hours=2)).strftime(_STAMP)}-2c3d"
    other = tmp_path / "not-a-scratch-folder"
    for folder in (dead, live, other):
        (folder / "commits" / "b=0").mkdir(parents=True)
        (folder / "commits" / "b=0" / "x.arrow").write_bytes(b"x")
        os.utime(folder, (0, 0))  # a folder's own time says nothing
    assert sweep_scratch(str(tmp_path)) == [str(dead)]
    assert not dead.exists() and live.exists() and other.exists()
    assert sweep_scratch(str(tmp_path / "never-made")) == []
