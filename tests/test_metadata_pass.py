"""The stale-metadata findings in one task (``jobs.reports.metadata_pass``) equal the Spark stages' findings.

The one task is what every run with up to ``MAX_ROWS`` observations takes; the Spark stages are what larger
runs take. Both run here over the same observation rows: random ones full of the awkward cases (ties in time,
null clients, topics and ids, one name with two ids, negative epochs, tokens, text and binary captures) and
the demo simulation's, whose metadata log adds M5, M2 timed from the log and the lag per response.
"""

from __future__ import annotations

import datetime as dt
import random

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from jobs.reports import _frames
from jobs.reports import metadata_pass as mp

# ------------------------------------------------------------------------------------ the pre-filters


def _earlier_oracle(group, ts, ep):
    out = []
    for i in range(len(group)):
        prior = [ep[j] for j in range(len(group)) if group[j] == group[i] and ts[j] < ts[i] and ep[j] >= 0]
        out.append(ep[i] >= 0 and bool(prior) and ep[i] < max(prior))
    return out


def _cutoff_oracle(group, ts, ep, grace):
    out = []
    for i in range(len(group)):
        prior = [ep[j] for j in range(len(group)) if group[j] == group[i] and ep[j] >= 0
                 and (grace < 0 or int(ts[j]) <= int(ts[i]) - grace - 1)]
        out.append(ep[i] >= 0 and bool(prior) and ep[i] < max(prior))
    return out


rows = st.lists(st.tuples(st.integers(0, 3), st.integers(-3, 12), st.integers(-1, 6)), max_size=40)
scales = st.sampled_from([1, 1000, 10**13, 2**40 + 7])  # ms apart, up to centuries (a key of raw times overflows)
graces = st.one_of(st.integers(-4, 6), st.just(2**63 - 1), st.just(-(2**62)))


@settings(max_examples=300, deadline=None)
@given(rows, scales, graces)
def test_the_prefilters_flag_exactly_the_rows_a_brute_force_oracle_flags(data, scale, grace) -> None:
    group = np.array([r[0] for r in data], np.int64)
    ts = np.array([r[1] for r in data], np.int64) * scale
    ep = np.array([r[2] for r in data], np.int64)
    assert mp._below_earlier(group, ts, ep).tolist() == _earlier_oracle(group, ts, ep)
    g = grace * 1000 if abs(grace) < 100 else grace
    assert mp._below_before_cutoff(group, ts, ep, g).tolist() == _cutoff_oracle(group, ts, ep, g)


def test_the_cutoff_prefilter_holds_with_a_million_partitions() -> None:
    n = 1 << 20  # a million one-row partitions, then one whose epoch goes back after the grace
    group = np.concatenate([np.arange(n), [n, n]]).astype(np.int64)
    ts = np.concatenate([np.zeros(n), [0, 10_000]]).astype(np.int64)
    ep = np.concatenate([np.zeros(n), [5, 3]]).astype(np.int64)
    flagged = mp._below_before_cutoff(group, ts, ep, 1000)
    assert flagged[-1] and not flagged[:-1].any()


# ------------------------------------------------------------------------------------ against Spark's stages


_TYPES = {
    "capture_ts": pa.int64(), "client_id": pa.string(), "broker": pa.string(), "api_version": pa.int16(),
    "correlation_id": pa.int32(), "topic": pa.string(), "topic_id": pa.string(), "partition": pa.int32(),
    "leader_id": pa.int32(), "leader_epoch": pa.int32(), "replicas": pa.list_(pa.int32()),
    "isr": pa.list_(pa.int32()), "topic_error": pa.int16(), "partition_error": pa.int16(),
    "metadata_token": pa.int64(), "source": pa.string(), "position": pa.int64(), "event_ts": pa.int64(),
    "tid": pa.string(), "client_host": pa.string(),
}  # fmt: skip


def _random_observations(seed: int, n: int = 600) -> pa.Table:
    """Responses of a few clients and brokers over a few topics: epochs that go back, ties in capture time,
    null clients and topics, a name re-created with a second id, ids without names, tokens on some."""
    rnd = random.Random(seed)
    ids = {"orders": ["id-orders-1", "id-orders-2"], "clicks": ["id-clicks"], None: ["id-anon"]}
    rows = []
    for r in range(n // 3):
        ts = 1_700_000_000_000 + rnd.randrange(0, 40) * 500  # many ties
        client = rnd.choice(["c1", "c2", "c3", None])
        host = rnd.choice(["10.0.0.1", "10.0.0.2", None]) if client == "c1" else None  # one client id on two hosts
        src = rnd.choice(["cap-a.jsonl", "cap-b.pcap", None])
        token = rnd.choice([None, None, rnd.randrange(100, 110)])
        for p in range(rnd.randrange(1, 4)):
            topic = rnd.choice(["orders", "clicks", None])
            tid = rnd.choice(ids[topic] + [None])
            rows.append({
                "capture_ts": ts, "client_id": client, "broker": rnd.choice(["1", "2", None]), "api_version": 12,
                "correlation_id": r, "topic": topic if tid is None or rnd.random() < 0.8 else None,
                "topic_id": tid, "partition": p, "leader_id": rnd.choice([1, 2]),
                "leader_epoch": rnd.choice([-1, 0, 1, 2, 3, 3, 4]), "replicas": [1, 2], "isr": [1, 2],
                "topic_error": 0, "partition_error": 0, "metadata_token": token, "source": src,
                "position": rnd.choice([r, None]) if src else r, "event_ts": ts, "tid": tid, "client_host": host,
            })  # fmt: skip
    # a token first sighted twice at once in one capture file, by a frame with a position and one without (Spark's
    # min puts the null first), and a later response with a lower token: an M2 whose evidence names that sighting
    for i, (pos, token, dt_ms) in enumerate([(0, 9, 0), (None, 9, 0), (5, 5, 10_000)]):
        ts = 1_700_000_200_000 + dt_ms
        rows.append({**rows[0], "capture_ts": ts, "event_ts": ts, "client_id": "c-tokens", "topic": "clicks",
                     "topic_id": "id-clicks", "tid": "id-clicks", "partition": 0, "leader_epoch": 1,
                     "metadata_token": token, "source": "tokens.pcap", "position": pos, "correlation_id": 900 + i})
    # one client whose epochs never go back but whose "orders" id does (M3 alone must keep its group), first of all: it
    # sees id-orders-1 before id-orders-2, the order M3 needs a client to have seen
    for i, tid in enumerate(["id-orders-1", "id-orders-2", "id-orders-1"]):
        ts = 1_699_999_000_000 + i * 1000  # before the others: the first sightings (M3 orders ids by them)
        rows.append({**rows[0], "capture_ts": ts, "event_ts": ts, "client_id": "c-steady", "topic": "orders",
                     "topic_id": tid, "tid": tid, "partition": 0, "leader_epoch": i, "metadata_token": None,
                     "source": "steady.jsonl", "position": i})
    return pa.Table.from_pylist(rows, schema=pa.schema([pa.field(k, v) for k, v in _TYPES.items()]))


def _canon(df_or_rows) -> list[str]:
    rows = df_or_rows.collect() if hasattr(df_or_rows, "collect") else df_or_rows
    return sorted(repr(r.asDict() if hasattr(r, "asDict") else r) for r in rows)


@pytest.mark.parametrize("grace", [1000, 0, -1500])
def test_one_task_finds_what_the_spark_stages_find_over_awkward_captures(spark, grace) -> None:
    from jobs.reports import stale_metadata

    obs = spark.createDataFrame(_random_observations(seed=grace))
    want = _canon(stale_metadata.metadata_findings(obs, grace))
    assert {r.split("'rule': '")[1][:2] for r in want} >= {"M1", "M2", "M3"}, "the rows must exercise M1-M3"
    assert any("'rule': 'M3'" in r and "c-steady" in r for r in want)
    assert any("'rule': 'M2'" in r and "capture:tokens.pcap frame ?" in r for r in want)
    got = mp.metadata_pass(obs, grace, None, keep=lambda df: df)
    assert got is not None and got.lags is None
    assert _canon(got.findings) == want


@pytest.fixture(scope="module")
def demo_run(spark, tmp_path_factory):
    """The demo simulation ingested (no reports): its config, the reports' read window and the replayed log."""
    from epochlib.sim import preset, simulate
    from jobs.audit import run_audit
    from jobs.config import parse_config
    from jobs.reports import kraft

    root = tmp_path_factory.mktemp("metadata-pass")
    res = simulate(preset("demo"), root / "in")
    cfg = parse_config({"cluster": "demo", "inputs": {
        "metadata": str(res.metadata), "cluster_metadata": str(res.cluster_metadata)},
        "output": {"root": str(root / "tables")}})  # fmt: skip
    start, end = res.date_range
    run_audit(spark, cfg, start, end, reports=(), progress_interval=0)
    window = (dt.date.fromisoformat(start) - dt.timedelta(days=7), dt.date.fromisoformat(end))
    return cfg, window, kraft.load(spark, cfg, "demo", window)


@pytest.fixture(scope="module")
def demo_obs(spark, demo_run):
    """The demo's observations with the log's ids (as the Spark-fed paths read them), and the log."""
    from jobs.reports import kraft, stale_metadata

    cfg, window, ev = demo_run
    obs = kraft.with_topic_ids(stale_metadata.observations(spark, cfg, "demo", window), ev).cache()
    yield obs, ev
    obs.unpersist()


def test_with_a_metadata_log_the_findings_and_the_lags_equal_the_spark_stages(spark, demo_obs) -> None:
    from functools import partial

    from pyspark.sql import functions as F

    from jobs.reports import kraft, stale_metadata

    obs, ev = demo_obs
    assert ev.present
    grace = 1000
    want = _canon(kraft.metadata_findings(obs, stale_metadata.metadata_findings(obs, grace), ev, grace))
    assert {r.split("'rule': '")[1][:2] for r in want} >= {"M1", "M2", "M3", "M5"}
    got = mp.metadata_pass(obs, grace, ev.index, keep=lambda df: df.cache())
    assert got is not None and _canon(got.findings) == want
    per_response = kraft._spark_schema(pa.schema([
        pa.field(c, pa.int64() if c in ("position", "capture_ts", "lag_ms") else pa.string())
        for c in (*kraft._RESPONSE, "lag_ms")]))  # fmt: skip
    lags = (obs.select(*kraft._RESPONSE, "topic", "topic_id", "partition", "leader_epoch")
            .mapInArrow(partial(kraft._row_lags, index=ev.index, grace_ms=grace), per_response)
            .groupBy(*kraft._RESPONSE).agg(F.max("lag_ms").alias("lag_ms")))
    got_lags = _canon(got.lags.select(*kraft._RESPONSE, "lag_ms"))
    assert len(got_lags) > 100 and got_lags == _canon(lags)


def test_a_hash_in_the_captures_path_does_not_change_the_findings(spark, demo_obs) -> None:
    """Captures under ``…/case#4711/``: the one task dropped the capture-only M2 findings the log judges by the part of
    their key before the first ``#``, which was inside the path, so it kept two it should have dropped (a review:
    6 M2 where the Spark stages, and a path without ``#``, give 4)."""
    from pyspark.sql import functions as F

    from jobs.reports import kraft, stale_metadata

    obs, ev = demo_obs
    obs = obs.withColumn("source", F.concat(F.lit("/evidence/case#4711/"), F.col("source")))
    grace = 1000
    want = _canon(kraft.metadata_findings(obs, stale_metadata.metadata_findings(obs, grace), ev, grace))
    got = mp.metadata_pass(obs, grace, ev.index, keep=lambda df: df)
    assert got is not None and _canon(got.findings) == want
    assert sum("'rule': 'M2'" in r for r in want) == 4


def test_no_observations_give_no_findings_and_no_lags(spark, demo_obs) -> None:
    """A run without captures in its window (only commits, or a day nobody captured) still takes the one-task
    path: its task gets no rows at all."""
    obs, ev = demo_obs
    none = obs.where("false")
    for index in (None, ev.index):
        got = mp.metadata_pass(none, 1000, index, keep=lambda df: df)
        assert got is not None and got.findings.count() == 0
        assert (got.lags is None) == (index is None) and (got.lags is None or got.lags.count() == 0)


def test_too_many_observations_or_one_without_a_time_keep_the_spark_stages(spark, demo_obs, monkeypatch) -> None:
    from pyspark.sql import functions as F

    obs, ev = demo_obs
    monkeypatch.setattr(mp, "MAX_ROWS", obs.count() - 1)
    assert mp.metadata_pass(obs, 1000, ev.index, keep=lambda df: df) is None
    monkeypatch.undo()
    timeless = obs.withColumn("capture_ts", F.when(F.col("correlation_id") == 1, None).otherwise(F.col("capture_ts")))
    assert mp.metadata_pass(timeless, 1000, ev.index, keep=lambda df: df) is None


@pytest.mark.parametrize(("conf", "rows"), [
    # local: the worker has the machine's memory, whatever the executor's memory settings say
    ({"spark.master": "local[2]", "spark.executor.memory": "512m"}, mp.MAX_ROWS),
    # ... unless Spark limits each worker's address space (under any master): 4 GiB less the 1.75 GiB a worker maps
    ({"spark.master": "local[2]", "spark.executor.pyspark.memory": "4g"}, 1_858_399),
    # a cluster with Spark's defaults: the 384 MiB overhead is the JVM's; no task
    ({"spark.master": "yarn"}, 0),
    # the default overhead is a tenth of the executor's memory (less the JVM's 384 MiB and the worker's 256 MiB),
    # or the factor given; on Kubernetes the factor Spark sets for Python counts
    ({"spark.master": "k8s://https://k8s:443", "spark.executor.memory": "8g"}, 144_542),
    ({"spark.master": "yarn", "spark.executor.memory": "8192", "spark.executor.memoryOverheadFactor": "0.1"}, 144_542),
    ({"spark.master": "k8s://https://k8s:443", "spark.executor.memory": "4g",
      "spark.kubernetes.memoryOverheadFactor": "0.4"}, 805_306),
    ({"spark.master": "yarn", "spark.executor.memory": "4g", "spark.kubernetes.memoryOverheadFactor": "0.4"}, 0),
    # Spark 4's floor of the default overhead
    ({"spark.master": "yarn", "spark.executor.minMemoryOverhead": "1g"}, 309_733),
    # an explicit overhead, shared by the executor's cores; spark.executor.pyspark.memory wins over it
    ({"spark.master": "yarn", "spark.executor.memoryOverhead": "2g", "spark.executor.cores": "4"}, 129_055),
    ({"spark.master": "yarn", "spark.executor.memoryOverhead": "64g", "spark.executor.pyspark.memory": "8gb",
      "spark.executor.cores": "2"}, 1_858_399),
    # never more than MAX_ROWS; a setting that is not a size or a number: the Spark stages
    ({"spark.master": "spark://host:7077", "spark.executor.memoryOverhead": "64g"}, mp.MAX_ROWS),
    ({"spark.master": "yarn", "spark.executor.memoryOverhead": "1.5g"}, 0),
    ({"spark.master": "yarn", "spark.executor.memoryOverheadFactor": "inf"}, 0),
    # a local master reads no core count without spark.executor.pyspark.memory
    ({"spark.master": "local[2]", "spark.executor.cores": "x"}, mp.MAX_ROWS),
    ({"spark.master": "local[2]", "spark.executor.cores": "x", "spark.executor.pyspark.memory": "4g"}, 0),
    # a setting whose share rounds to 0 MiB is a limit (Spark refuses it), not the local default
    ({"spark.master": "local[2]", "spark.executor.cores": "4", "spark.executor.pyspark.memory": "3m"}, 0),
    ({"spark.master": "yarn", "spark.executor.memoryOverhead": "2g", "spark.task.cpus": "1e-1000000"}, 0),
])  # fmt: skip
def test_on_a_cluster_the_one_task_takes_what_one_task_slots_python_memory_holds(conf, rows, monkeypatch) -> None:
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", "4.3.0")  # the sharing by task slots (below: before 4.3)
    assert mp.rows_for_conf(conf.get) == rows


@pytest.mark.parametrize(("version", "rows"), [("4.3.0", 129_055), ("4.2.0", 0)])
def test_the_overhead_is_shared_by_task_slots_as_spark_shares_it(version, rows, monkeypatch) -> None:
    """8 cores at 2 CPUs a task are 4 workers from Spark 4.3 (SPARK-58192): the 2 GiB overhead of the 4-core
    example above; before 4.3 Spark divides by the 8 cores, which leaves the worker nothing."""
    import pyspark

    monkeypatch.setattr(pyspark, "__version__", version)
    conf = {"spark.master": "yarn", "spark.executor.memoryOverhead": "2g", "spark.executor.cores": "8",
            "spark.task.cpus": "2"}
    assert mp.rows_for_conf(conf.get) == rows


def test_a_session_whose_workers_cannot_hold_the_observations_keeps_the_spark_stages(spark, demo_run, demo_obs,
                                                                                    monkeypatch) -> None:
    from jobs.reports import _frames as fr

    obs, ev = demo_obs
    cfg, window, _ = demo_run
    n = fr.read_silver(spark, cfg, "metadata_observations", "demo", window).count()  # what the files pass reads
    assert mp.one_task_rows(spark) == mp.MAX_ROWS > max(n, obs.count())  # the tests' session is local
    plan = mp.ObservationFiles.plan(spark, cfg, "demo", window)
    assert plan is not None
    # as a small executor's settings would say: one row fewer than each path is handed
    monkeypatch.setattr(mp, "one_task_rows", lambda session: obs.count() - 1)
    assert mp.metadata_pass(obs, 1000, ev.index, keep=lambda df: df) is None
    monkeypatch.setattr(mp, "one_task_rows", lambda session: n - 1)
    assert mp.ObservationFiles.plan(spark, cfg, "demo", window) is None
    assert plan.run(spark, 1000, ev.index, ev.view, keep=lambda df: df) is None
    # ... and exactly as many: the one task
    monkeypatch.setattr(mp, "one_task_rows", lambda session: obs.count())
    assert mp.metadata_pass(obs, 1000, ev.index, keep=lambda df: df) is not None
    monkeypatch.setattr(mp, "one_task_rows", lambda session: n)
    assert mp.ObservationFiles.plan(spark, cfg, "demo", window) is not None
    assert plan.run(spark, 1000, ev.index, ev.view, keep=lambda df: df) is not None


def test_spark_names_a_response_as_the_rules_do(spark) -> None:
    from epochlib.rules import capture_pointer
    from jobs.reports.stale_metadata import capture_pointer_col

    cases = [("a.jsonl", 3), ("B.PCAP", None), ("", 2), (None, 7), ("x.ndjson", 0)]
    df = spark.createDataFrame(cases, "source string, position long")
    got = [r[0] for r in df.select(capture_pointer_col()).collect()]
    assert got == [capture_pointer(s, p) for s, p in cases]


# ------------------------------------------------------------------------------------ the files pass


def _responses(obs) -> list[str]:
    from jobs.reports.kraft import _RESPONSE

    return _canon(obs.select(*_RESPONSE).distinct())


def test_the_files_pass_reads_the_observations_spark_reads(spark, demo_run, demo_obs) -> None:
    """The table's files read with pyarrow and shaped in Arrow are the rows Spark's observations() and
    with_topic_ids() give: the same times, the same ids (some filled from the log), the same rows dropped."""
    import pyarrow.parquet as pq

    from jobs.sink import table_files

    cfg, window, ev = demo_run
    obs, _ = demo_obs
    listed = table_files("metadata_observations", cfg, cluster="demo", date_range=window)
    raw = pa.concat_tables([_frames.conformed(pq.read_table(f"{listed.root}/{f.path}"), mp._raw_schema())
                            for f in listed.files])
    got = mp.observations_arrow(raw, ev.view)
    want = obs.toArrow()
    assert got.num_rows == want.num_rows > 1000
    assert got.column_names == want.column_names
    canon = lambda t: sorted(map(repr, t.to_pylist()))  # noqa: E731
    assert canon(got) == canon(want.cast(got.schema))
    plain = mp.observations_arrow(raw)
    assert plain.column("tid").null_count > got.column("tid").null_count, "the demo must have ids to fill"
    # the order too: the rows with a partition in the files' order; with the log, those with an id first
    kept = pc.is_valid(raw.column("partition"))
    assert not pc.all(kept).as_py(), "the demo must have rows without a partition"
    assert plain.column("position").equals(raw.filter(kept).column("position"))
    has = pc.is_valid(plain.column("tid"))
    rest = [c for c in plain.column_names if c not in ("tid", "topic_id")]
    assert got.select(rest).combine_chunks().equals(
        pa.concat_tables([plain.filter(has), plain.filter(pc.invert(has))]).select(rest).combine_chunks())


def test_the_files_pass_finds_what_the_spark_fed_task_finds(spark, demo_run, demo_obs) -> None:
    cfg, window, ev = demo_run
    obs, _ = demo_obs
    grace = 1000
    want = mp.metadata_pass(obs, grace, ev.index, keep=lambda df: df.cache())
    plan = mp.ObservationFiles.plan(spark, cfg, "demo", window)
    assert plan is not None and plan.files and plan.early is None
    got = plan.run(spark, grace, ev.index, ev.view, keep=lambda df: df.cache())
    assert got is not None and want is not None
    assert {r.split("'rule': '")[1][:2] for r in _canon(got.findings)} >= {"M1", "M2", "M3", "M5"}
    assert _canon(got.findings) == _canon(want.findings)
    assert len(_canon(got.lags)) > 100 and _canon(got.lags) == _canon(want.lags)
    assert _canon(got.responses) == _canon(want.responses) == _responses(obs)
    # without the log: no lags, and the rows keep the ids they came with
    bare = plan.run(spark, grace, None, None, keep=lambda df: df)
    assert bare is not None and bare.lags is None
    assert _canon(bare.findings) == _canon(mp.metadata_pass(stale_obs(spark, cfg, window), grace, None,
                                                             keep=lambda df: df).findings)


def stale_obs(spark, cfg, window, state=None):
    from jobs.reports import stale_metadata

    return stale_metadata.observations(spark, cfg, "demo", window, state)


def test_the_files_pass_merges_the_runs_own_lookback_rows_as_spark_does(spark, demo_run) -> None:
    """Lookback days the run's inputs also hold rows of come from Spark (earlier runs' rows and the run's own,
    each once); the later days from the files. A row only the inputs hold counts, a row both hold counts once."""
    from pyspark.sql import functions as F

    from jobs.reports import _frames as fr
    from jobs.reports import kraft
    from jobs.sink import write_table

    cfg, window, ev = demo_run
    day = window[1]
    later = day + dt.timedelta(days=1)
    table = fr.read_silver(spark, cfg, "metadata_observations", "demo", window)
    # a later day in the table (the demo's day again, a day on): that day is read from the files
    shifted = (table.withColumn("capture_ts", F.col("capture_ts") + F.expr("INTERVAL 1 DAY"))
               .withColumn("event_ts", F.col("event_ts") + F.expr("INTERVAL 1 DAY"))
               .withColumn("event_date", F.lit(later)))
    write_table(shifted, "metadata_observations", config=cfg, mode="replace_range", date_range=(later, later))
    wide = (window[0], later)
    # the run's inputs hold the demo's day again (the same rows: counted once) and rows only they hold: a
    # response of a new client with higher epochs
    extra = table.limit(50).withColumn("client_id", F.lit("only-in-the-inputs")).withColumn(
        "leader_epoch", F.col("leader_epoch") + 1).cache()  # the same 50 rows for both paths
    assert extra.count() == 50
    state = fr.InputState(before=later, frames={"metadata_observations": table.unionByName(extra)})
    plan = mp.ObservationFiles.plan(spark, cfg, "demo", wide, state)
    assert plan is not None and plan.early is not None and plan.files
    assert all(f"event_date={later}" in f for f in plan.files)  # the lookback day's files come through Spark
    assert len(plan.files) < len(mp.ObservationFiles.plan(spark, cfg, "demo", wide).files)
    got = plan.run(spark, 1000, ev.index, ev.view, keep=lambda df: df.cache())
    obs = kraft.with_topic_ids(stale_obs(spark, cfg, wide, state), ev).cache()
    want = mp.metadata_pass(obs, 1000, ev.index, keep=lambda df: df.cache())
    assert got is not None and want is not None
    assert _canon(got.findings) == _canon(want.findings)
    assert _canon(got.lags) == _canon(want.lags)
    assert _canon(got.responses) == _canon(want.responses) == _responses(obs)
    assert any("only-in-the-inputs" in r for r in _canon(got.responses))
    mine = got.responses.where(F.col("client_id") == "only-in-the-inputs").count()
    assert mine == extra.where(F.col("partition").isNotNull()).select("source", "position").distinct().count() > 0
    obs.unpersist()
    extra.unpersist()


def test_the_files_pass_gives_way_to_the_spark_stages_when_the_task_cannot_take_them(spark, demo_run,
                                                                                       monkeypatch) -> None:
    from pyspark.sql import functions as F

    from jobs.reports import _frames as fr

    cfg, window, ev = demo_run
    plan = mp.ObservationFiles.plan(spark, cfg, "demo", window)
    assert plan is not None
    # too many: the Delta log's counts say so before any job; the files' footers say so in the task
    table = fr.read_silver(spark, cfg, "metadata_observations", "demo", window)
    monkeypatch.setattr(mp, "MAX_ROWS", table.count() - 1)
    assert mp.ObservationFiles.plan(spark, cfg, "demo", window) is None
    assert plan.run(spark, 1000, ev.index, ev.view, keep=lambda df: df) is None
    monkeypatch.undo()
    # a row without any time, among the run's own lookback rows (every table day is a lookback day here)
    timeless = (table.limit(1).withColumn("capture_ts", F.lit(None).cast("timestamp"))
                .withColumn("event_ts", F.lit(None).cast("timestamp")))
    state = fr.InputState(before=window[1] + dt.timedelta(days=1), frames={"metadata_observations": timeless})
    plan = mp.ObservationFiles.plan(spark, cfg, "demo", window, state)
    assert plan is not None and plan.early is not None and plan.files == ()
    assert plan.run(spark, 1000, ev.index, ev.view, keep=lambda df: df) is None
    # too many among the rows Spark hands the task (the lookback days): counted as they come, none kept past the limit
    whole = fr.InputState(before=window[1] + dt.timedelta(days=1), frames={"metadata_observations": table})
    plan = mp.ObservationFiles.plan(spark, cfg, "demo", window, whole)
    assert plan is not None and plan.early is not None
    monkeypatch.setattr(mp, "MAX_ROWS", 10)
    assert plan.run(spark, 1000, ev.index, ev.view, keep=lambda df: df) is None
    monkeypatch.undo()
    # ... which the Spark stages take (the same rows through read_silver)
    assert mp.metadata_pass(stale_obs(spark, cfg, window, state), 1000, ev.index, keep=lambda df: df) is None


def test_the_files_pass_over_a_root_without_captures_runs_and_finds_nothing(spark, tmp_path) -> None:
    from jobs.config import parse_config

    cfg = parse_config({"cluster": "demo", "output": {"root": str(tmp_path / "tables")}})
    window = (dt.date(2024, 3, 1), dt.date(2024, 3, 4))
    plan = mp.ObservationFiles.plan(spark, cfg, "demo", window)
    assert plan is not None and plan.files == ()
    got = plan.run(spark, 1000, None, None, keep=lambda df: df)
    assert got is not None and got.findings.count() == 0 and got.responses.count() == 0


def test_the_files_pass_shapes_awkward_rows_as_spark_does(spark, tmp_path) -> None:
    """Times before 1970 with sub-millisecond parts (floored, as unix_millis), a row without a capture time (its
    event time), a row without a partition (dropped), the all-zero ids in each spelling (null), written to a table
    and read back both ways."""
    import datetime as _dt

    import pyarrow.parquet as pq

    from jobs import schemas
    from jobs.config import parse_config
    from jobs.reports import stale_metadata
    from jobs.sink import table_files, write_table

    utc = _dt.timezone.utc
    day = dt.date(2024, 3, 4)
    t0 = _dt.datetime(2024, 3, 4, 12, 0, 0, 123456, tzinfo=utc)
    pre = _dt.datetime(1969, 12, 31, 23, 59, 59, 998500, tzinfo=utc)  # -1.5 ms: floor -2, not -1
    base = {f.name: None for f in schemas.spark_schema("metadata_observations").fields}
    rows = [
        {**base, "capture_ts": pre, "event_ts": pre, "topic": "a", "topic_id": "id-a", "partition": 0},
        {**base, "capture_ts": None, "event_ts": t0, "topic": "a", "topic_id": "id-a", "partition": 1},
        {**base, "capture_ts": t0, "event_ts": t0, "topic": "a", "topic_id": "id-a", "partition": None},
        {**base, "capture_ts": t0, "event_ts": t0, "topic": "b", "topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "partition": 0},
        {**base, "capture_ts": t0, "event_ts": t0, "topic": "b", "topic_id": "00000000-0000-0000-0000-000000000000",
         "partition": 1},
        {**base, "capture_ts": t0, "event_ts": t0, "topic": "b", "topic_id": "", "partition": 2},
        {**base, "capture_ts": t0, "event_ts": None, "topic": None, "topic_id": None, "partition": 3,
         "replicas": [1, 2], "leader_epoch": 7, "metadata_token": 5, "source": "x.pcap", "position": 9},
    ]
    for r in rows:
        r.update(cluster="c", event_date=day, client_id="cl", broker="1")
    cfg = parse_config({"cluster": "c", "output": {"root": str(tmp_path / "tables")}})
    df = spark.createDataFrame(rows, schemas.spark_schema("metadata_observations"))
    write_table(df, "metadata_observations", config=cfg, mode="replace_range", date_range=(day, day))
    listed = table_files("metadata_observations", cfg, cluster="c", date_range=(day, day))
    raw = pa.concat_tables([_frames.conformed(pq.read_table(f"{listed.root}/{f.path}"), mp._raw_schema())
                            for f in listed.files])
    got = mp.observations_arrow(raw)
    want = stale_metadata.observations(spark, cfg, "c", (day, day)).toArrow()
    assert got.column_names == want.column_names
    for name in got.column_names:  # the same types (a list's item name aside)
        a, b = got.schema.field(name).type, want.schema.field(name).type
        assert (a.value_type == b.value_type) if pa.types.is_list(a) else a == b, name
    canon = lambda t: sorted(map(repr, t.to_pylist()))  # noqa: E731
    assert canon(got) == canon(want.cast(got.schema))
    assert got.num_rows == 6 and -2 in got.column("capture_ts").to_pylist()
    assert got.column("tid").to_pylist().count(None) == 4  # three zero spellings and the null id
    # a file from before a column existed reads it as null
    old = _frames.conformed(raw.drop(["metadata_token"]), mp._raw_schema())
    assert old.column("metadata_token").null_count == old.num_rows


def test_the_log_read_from_its_files_equals_sparks_read(spark, demo_run, tmp_path, monkeypatch) -> None:
    """``kraft.load`` reads the replayed log with pyarrow where the Delta log lists its files (no Spark job for the
    metadata pass to wait on): the same rows as Spark's read, one per change even when a later run wrote a
    snapshot's rows again under another date, and Spark's read where the files are not the sink's."""
    from jobs.config import parse_config
    from jobs.reports import kraft
    from jobs.reports._frames import read_silver
    from jobs.schemas import arrow_schema
    from jobs.sink import write_small

    cfg, window, ev = demo_run
    hist = read_silver(spark, cfg, "partition_history", "demo", (dt.date(1970, 1, 1), window[1])).toArrow()
    assert hist.num_rows > 50
    # the same rows in a fresh root twice: on their own dates, and again a day earlier (a rerun's copy)
    copy = parse_config({"cluster": "demo", "output": {"root": str(tmp_path / "tables")}})
    days = sorted(set(hist.column("event_date").to_pylist()))
    write_small(hist.cast(arrow_schema("partition_history")), "partition_history", config=copy,
                date_range=(days[0], days[-1]))
    earlier = hist.set_column(hist.schema.get_field_index("event_date"), "event_date",
                              pa.array([d - dt.timedelta(days=1) for d in hist.column("event_date").to_pylist()]))
    # ... from another node's copy: every other row under a source that sorts first (the copy both reads keep)
    src = [s if i % 2 else "!other-node/" + (s or "") for i, s in enumerate(earlier.column("source").to_pylist())]
    earlier = earlier.set_column(earlier.schema.get_field_index("source"), "source", pa.array(src, pa.string()))
    write_small(earlier.cast(arrow_schema("partition_history")), "partition_history", config=copy,
                date_range=(days[0] - dt.timedelta(days=1), days[0] - dt.timedelta(days=1)))

    def canon(rows):
        return sorted(repr(sorted(r.items())) for r in rows)

    for conf in (cfg, copy):
        files = kraft.history_rows(spark, conf, "demo", window)
        assert files is not None
        want = kraft.load(spark, conf, "demo", window).frame.toArrow().to_pylist()  # Spark's read of the same rows
        assert canon(files) == canon(want)
        assert len(files) == len({(r["metadata_offset"], r["topic_id"], r["partition"], r["change"]) for r in files})
    kept = kraft.history_rows(spark, copy, "demo", window)
    assert len(kept) == len(ev.rows)
    def key(r):
        return r["metadata_offset"], r["topic_id"], r["partition"], r["change"]

    other = {key(r) for i, r in enumerate(earlier.to_pylist()) if i % 2 == 0}
    assert other and all(r["source"].startswith("!other-node/") == (key(r) in other) for r in kept)
    # the window's end bounds the dates read; a table never written has no rows; not the sink's files: Spark reads
    assert kraft.history_rows(spark, copy, "demo", (window[0], days[0] - dt.timedelta(days=2))) == []
    none = parse_config({"cluster": "demo", "output": {"root": str(tmp_path / "none")}})
    assert kraft.history_rows(spark, none, "demo", window) == []
    import jobs.sink

    monkeypatch.setattr(jobs.sink, "adopts_files", lambda *a, **k: False)  # e.g. delta-spark, a catalog table
    assert kraft.history_rows(spark, copy, "demo", window) is None
    assert canon(kraft.load(spark, copy, "demo", window).rows) == canon(kept)


def test_the_files_pass_rows_in_order_with_ids_filled_from_the_log() -> None:
    """observations_arrow on hand-made rows: the rows without a partition go, the log fills the ids it knows (by
    name and capture time), and the rows it had to fill come after the others, each side in the files' order;
    without the log nothing moves. The same for input in several chunks, and for no input."""
    from epochlib.rules.kraft import LogView

    t0 = dt.datetime(2024, 3, 1, tzinfo=dt.timezone.utc)
    ms = int(t0.timestamp() * 1000)
    rows = [  # (topic, topic_id, partition, seconds after t0)
        ("t1", "id-a", 0, 0), ("t1", None, 1, 1), ("t2", "AAAAAAAAAAAAAAAAAAAAAA", None, 2), ("t2", None, 2, 30),
        ("t3", None, 0, 4), ("t1", "id-b", 3, 5), ("t2", "", 4, 6)]
    raw = pa.Table.from_pylist([{"capture_ts": t0 + dt.timedelta(seconds=s), "event_ts": t0, "topic": t,
                                 "topic_id": i, "partition": p, "position": n, "source": "c.jsonl"}
                                for n, (t, i, p, s) in enumerate(rows)], schema=mp._raw_schema())
    view = LogView(incarnations={"t1": [(0, None, "log-t1")],
                                 "t2": [(0, ms + 10_000, "log-t2a"), (ms + 10_000, None, "log-t2b")]},
                   first_ts=0, last_ts=ms + 3_600_000)

    def got(table, v=None):
        out = mp.observations_arrow(table, v)
        return list(zip(*(out.column(c).to_pylist() for c in ("position", "tid", "topic_id")), strict=True))

    filled = [(0, "id-a", "id-a"), (5, "id-b", "id-b"), (1, "log-t1", "log-t1"), (3, "log-t2b", "log-t2b"),
              (4, None, None), (6, "log-t2a", "")]  # (an empty id is no id, but stays the row's topic_id)
    plain = [(0, "id-a", "id-a"), (1, None, None), (3, None, None), (4, None, None), (5, "id-b", "id-b"),
             (6, None, "")]
    assert got(raw, view) == filled
    assert got(raw) == plain
    chunked = pa.concat_tables([raw.slice(0, 3), raw.slice(3, 1), raw.slice(4)])
    assert got(chunked, view) == filled and got(chunked) == plain
    # ids missing only where the partition is too: the rows stay in place
    assert got(raw.take([2, 5, 0]), view) == [(5, "id-b", "id-b"), (0, "id-a", "id-a")]
    empty = mp.observations_arrow(raw.slice(0, 0), view)
    assert empty.num_rows == 0 and empty.column_names[-1] == "tid"
