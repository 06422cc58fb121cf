"""The offsets pass whose tasks write the ``offset_commits`` files themselves (delta-rs sink, issue 16): the
same tables as Spark writing the commits from two decode passes, Spark's folder names and dates, a retried
task leaving the same files, and nothing left in the staging folder once the run's state is released."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from deltalake import DeltaTable
from fixtures_ingest import DAY1, DAY2, build_inputs

import jobs.sink
from jobs.config import Config, Inputs, Output, Rules
from jobs.ingest import commit_files as cf
from jobs.ingest import pass_files as pf
from jobs.ingest import run_ingestion
from jobs.ingest.discover import discover
from jobs.ingest.offsets import input_frames

pytestmark = pytest.mark.spark


def _rows(root: Path, table: str, drop: tuple[str, ...] = ()) -> list[str]:
    t = DeltaTable(f"{root}/{table}").to_pyarrow_table()
    return sorted(map(str, t.drop_columns([c for c in drop if c in t.column_names]).to_pylist()))


def _both_ways(spark, tmp_path: Path, monkeypatch, inputs: Inputs, tables: tuple[str, ...],
               ways: tuple[str, ...] = ("one", "two")) -> dict[str, tuple]:
    """Ingest day 2 (lookback 1 day) with the passes writing their files ("one"; "window": with Spark's window
    giving the transactional commits their state), then with Spark writing them ("two"): per way, the
    ``tables``' rows, the counts, the lookback state and the notes."""
    out = {}
    for how in ways:
        if how == "window":  # the pass writes the commits, Spark's window the transactional ones
            monkeypatch.setattr(cf, "MAX_TX_ROWS", 0)
        if how == "two":
            monkeypatch.setattr(jobs.sink, "adopts_files", lambda *a, **k: False)
        cfg = Config(cluster="test", inputs=inputs, output=Output(root=str(tmp_path / how)), rules=Rules(lookback_days=1))
        res = run_ingestion(spark, cfg, DAY2, DAY2)
        try:
            # (key order aside: a held-back state has the table's column order, a cached one the frame's)
            state = {t: sorted(str(sorted(r.items())) for r in df.toArrow().to_pylist())
                     for t, df in res.lookback.items()}
        finally:
            res.release()
        out[how] = ({t: _rows(tmp_path / how, t, ("run_id",)) for t in tables},
                    sorted((c.source_kind, c.unit, c.units_read, c.units_quarantined, c.records_decoded,
                            c.units_unpaired) for c in res.counts), state, sorted(res.infos))
    return out


def test_one_pass_writes_what_spark_writes_from_two_passes(spark, tmp_path, monkeypatch):
    """Every input form (segments of every codec, transactions, dumps, tool text dumps, bad units), over a
    range with a lookback day: the same commits (transactional ones with their txn_state), groups,
    quarantine, counts and lookback state whether the pass writes the commits or Spark does, and whether the
    transactional commits' state comes from the one task or from Spark's window."""
    paths, ex = build_inputs(tmp_path / "in")
    out = _both_ways(spark, tmp_path, monkeypatch, Inputs(**paths), ("offset_commits", "group_metadata", "quarantine"),
                     ("one", "window", "two"))
    one, two = out["one"], out["two"]
    assert one == out["window"]
    # something in each table, and in the lookback day's state
    assert one[0]["offset_commits"] and one[2]["offset_commits"] and one[2]["group_metadata"]
    assert any("'txn_state': 'committed'" in r for r in one[0]["offset_commits"]) or any(
        "('txn_state', 'committed')" in r for r in one[2]["offset_commits"])
    assert any("'source_kind': 'offsets'" in r for r in one[0]["quarantine"])
    assert one == two
    assert len(one[0]["offset_commits"]) == ex.commits_day2


def test_release_leaves_no_staging_folder(spark, tmp_path):
    paths, _ = build_inputs(tmp_path / "in")
    cfg = Config(cluster="test", inputs=Inputs(**paths), output=Output(root=str(tmp_path / "out")))
    res = run_ingestion(spark, cfg, DAY1, DAY2)
    staging = tmp_path / "out" / "offset_commits" / jobs.sink.STAGING_DIR
    side = list(staging.glob(f"*/{pf.SIDE_DIR}/rows/*.parquet"))
    assert side  # the side rows are read from here until the run's state is released
    assert not any(p.name.endswith(".parquet") and pf.SIDE_DIR not in p.parts
                   for p in staging.rglob("*"))  # the commits' files went into the table
    res.release()
    assert not [p for p in staging.rglob("*") if p.is_file()]


def test_partition_folders_are_named_as_spark_names_them(spark, tmp_path):
    """The cluster value is escaped in the folder name as Spark escapes it (the sink reads names back)."""
    odd = 'a/b:c=d%e f#g?h*i[j]^k{l}\\m"n\'o\x01p'
    spark.createDataFrame([(odd, 1)], "cluster string, x int").write.partitionBy("cluster").parquet(
        str(tmp_path / "s"))
    [folder] = [p.name for p in (tmp_path / "s").iterdir() if p.name.startswith("cluster=")]
    assert folder == f"cluster={pf.escape_partition_value(odd)}"


def test_event_dates_are_the_ones_spark_computes(spark):
    """Dates of the commits' event times as ``jobs.ingest._event_date`` computes them in Spark: UTC days,
    floored before 1970, the run's first day when there is none."""
    from jobs.ingest import _event_date

    us = [0, 1, -1, 86_399_999_999, 86_400_000_000, -86_400_000_000, -86_400_000_001, 1_709_510_400_000_000,
          253_402_300_799_999_999, -62_135_596_800_000_000, None]
    default = dt.date(2024, 3, 4)
    df = spark.createDataFrame([(u,) for u in us], "us long").selectExpr("timestamp_micros(us) AS ts")
    from pyspark.sql import functions as F

    want = [r["d"] for r in df.select(_event_date(F.col("ts"), default).alias("d")).collect()]
    got = pf.event_days(pa.array(us, pa.int64()).cast(pa.timestamp("us", "UTC")), default)
    assert [dt.date(1970, 1, 1) + dt.timedelta(days=int(d)) for d in got] == want


def _segment_rows(tmp_path: Path) -> pa.RecordBatch:
    """The fixture's offsets segments as whole-file ranges (the pass's input rows)."""
    from jobs.ingest.ranges import RANGE_SCHEMA

    paths, _ = build_inputs(tmp_path / "in")
    inv = discover(paths["offsets"], None, None)
    return pa.RecordBatch.from_pylist(
        [{"source": f.source, "size": f.size, "start": 0, "end": f.size, "target": 1 << 30, "broker": f.broker,
          "log_partition": f.log_partition, "topic": None, "partition": None, "snapshot_ms": None}
         for f in inv.of("offsets", "segment")], schema=RANGE_SCHEMA)


def test_a_retried_task_leaves_the_same_files(tmp_path):
    """Running the pass's function twice over the same input (a retried or speculative task) gives the same
    file names and rows, not a second copy; temporary files are gone."""
    from jobs.ingest._rows import COMMITS, OFFSETS_WORK
    from jobs.ingest.offsets_segments import decode_segment_both

    rows = _segment_rows(tmp_path)
    staging = tmp_path / "staging"
    fn = pf.write_pass(decode_segment_both, str(staging), cluster="c 1", days=(DAY1, DAY2), default_date=DAY1,
                       file_schema=COMMITS, side_schema=OFFSETS_WORK)

    def snapshot():
        files = sorted(p for p in staging.rglob("*") if p.is_file())
        return {str(p.relative_to(staging)): pq.read_table(p).num_rows for p in files}

    first_written = pa.Table.from_batches(list(fn(iter([rows]))))
    first = snapshot()
    again = pa.Table.from_batches(list(fn(iter([rows]))))
    assert snapshot() == first and again.equals(first_written)
    assert not [name for name in first if Path(name).name.startswith(".")]
    commits = {k: n for k, n in first.items() if not k.startswith(pf.SIDE_DIR)}
    assert commits and all(k.startswith("cluster=c 1/event_date=") for k in commits)
    assert sum(commits.values()) == sum(r["rows"] for r in first_written.to_pylist() if r["kind"] == "table")
    assert {k.split("/")[1] for k in commits} <= {f"event_date={DAY1}", f"event_date={DAY2}"}


def test_rows_that_write_their_own_files_need_the_delta_rs_sink(spark, tmp_path):
    """A FileSource given to a delta-spark write is a clear error, not a silent fallback (the ingest asks
    jobs.sink.adopts_files first)."""
    from jobs.errors import SinkError
    from jobs.sink._target import resolve_target

    src = cf.CommitFiles(spark, [], cluster="c", days=(DAY1, DAY1), default_date=DAY1, dated=lambda d: d,
                         split_bytes=1 << 20, parallelism=1)
    assert isinstance(src, jobs.sink.FileSource)
    assert jobs.sink.adopts_files(spark, "offset_commits", target=str(tmp_path / "t"))
    assert resolve_target("offset_commits", None, str(tmp_path / "t"), "c", None)
    with pytest.raises(SinkError, match="delta-rs"):
        jobs.sink.write_table(src, "my_table", target=str(tmp_path / "t"), cluster="c", date_range=(DAY1, DAY1))
    assert input_frames(spark, [], split_bytes=1, parallelism=1) == []


def test_small_row_groups_hold_the_same_rows(tmp_path, monkeypatch):
    """Buffers are flushed every ROW_GROUP rows (a range of transactional commits only must not sit in
    memory whole): the files then hold the same rows as with one flush per range."""
    from jobs.ingest._rows import COMMITS, OFFSETS_WORK
    from jobs.ingest.offsets_segments import decode_segment_both

    rows = _segment_rows(tmp_path)

    def files(where: Path) -> dict[str, list[str]]:
        fn = pf.write_pass(decode_segment_both, str(where), cluster="c", days=(DAY1, DAY2), default_date=DAY1,
                           file_schema=COMMITS, side_schema=OFFSETS_WORK)
        list(fn(iter([rows])))
        return {str(p.relative_to(where)): sorted(map(str, pq.read_table(p).to_pylist()))
                for p in where.rglob("*.parquet")}

    whole = files(tmp_path / "whole")
    monkeypatch.setattr(pf, "ROW_GROUP", 3)
    small = files(tmp_path / "small")
    assert small == whole and any(len(v) > 3 for v in whole.values())
    assert any(pq.ParquetFile(p).num_row_groups > 1 for p in (tmp_path / "small").rglob("*.parquet"))


def test_capture_pass_writes_what_spark_writes(spark, tmp_path, monkeypatch):
    """The capture pass whose tasks write ``metadata_observations`` themselves gives the table, quarantine,
    counts, notes and lookback state that Spark writing them from the cached work rows gives: JSONL and pcap,
    rows in the range and in the lookback day, bad lines dated by their own time."""
    from fixtures_ingest import T1, T2, Expect, capture_line, metadata_body, write_metadata

    from epochlib import protocol

    root = tmp_path / "in" / "metadata"
    write_metadata(root, Expect())  # day 1 (the lookback day): JSONL, pcap, an undecodable response
    lines = [capture_line(T2 + i, "client-c", "b1:9092", 12,
                          protocol.encode_metadata_response(metadata_body(7 + i), 12, 300 + i)) for i in range(3)]
    lines += [capture_line(T2, "client-c", "b1:9092", 12, b"\x00\x01", metadata_token=5),
              capture_line(T1, "client-c", "b1:9092", 12, b"\x00", metadata_token="x"),
              "not json"]
    (root / "day2.jsonl").write_text("\n".join(lines) + "\n")
    out = _both_ways(spark, tmp_path, monkeypatch, Inputs(metadata=str(root)), ("metadata_observations", "quarantine"))
    for how in out:
        staging = tmp_path / how / "metadata_observations" / jobs.sink.STAGING_DIR
        assert not [p for p in staging.rglob("*") if p.is_file()]  # released: nothing left behind
    one, two = out["one"], out["two"]
    assert len(one[0]["metadata_observations"]) == 3 * 2  # day 2's three responses, two partitions each
    assert len(one[2]["metadata_observations"]) == 6  # day 1's observations are the lookback state
    # day 2's undecodable response, the line without a time and the unrecognised file (dated the range's
    # first day); the bad token's line is dated day 1, by its own time
    assert sum("'source_kind': 'metadata'" in r for r in one[0]["quarantine"]) == 3
    assert one == two
