"""Report plumbing: silver rows -> rule inputs, findings -> rows; plus the silver-table builder the other
``test_reports_*`` modules share (tiny Delta tables under ``tmp_path``)."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

from epochlib.rules import Commit, Finding, finding_id
from epochlib.rules._model import capture_pointer
from jobs import schemas
from jobs.config import parse_config
from jobs.reports import _frames as fr
from jobs.sink import read_table_arrow, write_small

UTC = dt.timezone.utc
DAY = dt.date(2024, 3, 4)
PREV = DAY - dt.timedelta(days=1)
NEXT = DAY + dt.timedelta(days=1)


def ms(day: dt.date, hh: int = 0, mm: int = 0, ss: int = 0, milli: int = 0) -> int:
    """Epoch ms of ``day`` at hh:mm:ss.milli UTC."""
    t = dt.datetime(day.year, day.month, day.day, hh, mm, ss, tzinfo=UTC) + dt.timedelta(milliseconds=milli)
    return int(t.timestamp() * 1000)


def ts(v: int | None) -> dt.datetime | None:
    return None if v is None else dt.datetime.fromtimestamp(v / 1000, tz=UTC)


_TS_COLUMNS = {"commit_ts", "expire_ts", "event_ts", "record_ts", "state_ts", "snapshot_ts", "max_timestamp", "capture_ts"}
_EVENT_FROM = {"epoch_lineage": "snapshot_ts", "record_batches": "max_timestamp", "metadata_observations": "capture_ts"}


class Silver:
    """Writes silver rows (dicts, times as epoch ms) into Delta tables under an output root."""

    def __init__(self, tmp_path: Path, cluster: str = "c1", **rules: Any) -> None:
        raw: dict[str, Any] = {"cluster": cluster, "output": {"root": str(tmp_path / "out")}}
        if rules:
            raw["rules"] = rules
        self.config = parse_config(raw)
        self.cluster = cluster

    def write(self, table: str, rows: list[dict[str, Any]]) -> None:
        names = [c.name for c in schemas.TABLES[table]]
        out = []
        for r in rows:
            r = dict(r)
            src = _EVENT_FROM.get(table)
            if "event_ts" in names and r.get("event_ts") is None and src and r.get(src) is not None:
                r["event_ts"] = r[src]
            full = {n: r.get(n) for n in names}
            for n in names:
                if n in _TS_COLUMNS:
                    full[n] = ts(full[n])
            full["cluster"] = self.cluster
            if full.get("event_date") is None:
                full["event_date"] = full["event_ts"].date()
            unknown = set(r) - set(names)
            assert not unknown, f"{table}: unknown columns {unknown}"
            out.append(full)
        data = pa.Table.from_pylist(out, schema=schemas.arrow_schema(table))
        dates = [r["event_date"] for r in out]
        write_small(data, table, config=self.config, date_range=(min(dates), max(dates)))

    def gold(self, table: str) -> list[dict[str, Any]]:
        rows = read_table_arrow(table, self.config).to_pylist()
        return sorted(rows, key=lambda r: (str(r.get("event_ts")), r.get("rule") or "", r.get("finding_id") or r.get("subject") or ""))


def kinds(rows: list[dict[str, Any]]) -> list[tuple]:
    """(rule, kind, severity, event date) per gold row, sorted."""
    return sorted((r["rule"], r["kind"], r["severity"], r["event_date"]) for r in rows)


# ----------------------------------------------------------------------------------------------- tests


def test_commit_fast_path_agrees_with_from_row() -> None:
    rows = [
        dict(group_id="g", topic="t", partition=1, committed_offset=5, leader_epoch=None, commit_ts=10,
             event_ts=None, is_tombstone=None, txn_state=None, log_partition=3, log_offset=7, producer_id=-1,
             source_kind="offsets", source="f.log", position=99),
        dict(group_id="h", topic="u", partition=0, committed_offset=None, leader_epoch=-1, commit_ts=None,
             event_ts=20, is_tombstone=True, txn_state="committed", log_partition=None, log_offset=None,
             producer_id=None, source_kind=None, source=None, position=None),
    ]  # fmt: skip
    table = pa.Table.from_pylist(rows)
    assert fr.commits_from_arrow(table) == [Commit.from_row(r) for r in rows]


def test_finding_rows_keep_the_id_and_numbers() -> None:
    f = Finding(rule="F2", kind="commit_beyond_epoch_end", severity="error", event_ts=123, topic="t",
                partition=0, group_id="g", numbers={"committed_offset": 10, "end_offset": 7, "ratio": 1.0},
                evidence=("a", "b"))  # fmt: skip
    t = fr.findings_table([f])
    assert t.schema == fr.FINDINGS_ARROW
    row = t.to_pylist()[0]
    assert row["finding_id"] == finding_id(f)
    assert dict(row["numbers"]) == {"committed_offset": 10, "end_offset": 7, "ratio": 1}
    assert row["evidence"] == ["a", "b"] and row["event_ms"] == 123


@pytest.mark.spark
def test_capture_pointer_column_matches_epochlib(spark) -> None:
    from jobs.reports.stale_metadata import capture_pointer_col

    cases = [("/c/a.jsonl", 3), ("/c/b.pcapng", 17), (None, None), ("/c/x.json", 0), ("/c/y.txt", 5),
             ("/c/z.NDJSON", 9),
             # case-blind without lower(): a final line break, letters that lower-case out of ASCII, a suffix alone
             ("/c/a.json\n", 1), ("/c/\u0130.TxT", 2), ("/c/a.\u212a", 3), (".jsonl", 4), ("/c/a_jsonl", 5),
             ("/c/a.jsonl.gz", 6), ("/c/a.JSoNl", 7)]
    df = spark.createDataFrame(cases, "source string, position long")
    got = [r[0] for r in df.select(capture_pointer_col()).collect()]
    assert got == [capture_pointer(s, p) for s, p in cases]


@pytest.mark.spark
def test_missing_silver_table_reads_as_empty(spark, tmp_path) -> None:
    silver = Silver(tmp_path)
    df = fr.read_silver(spark, silver.config, "epoch_lineage", "c1", (PREV, DAY))
    assert df.count() == 0 and df.schema == schemas.spark_schema("epoch_lineage")


@pytest.mark.spark
def test_the_lookback_gaps_from_the_delta_logs_are_the_ones_spark_counts(spark, tmp_path) -> None:
    """The delta-rs sink's logs give each table's dates without a Spark job: the same sentences as the rows do
    (a table only in the range, one reaching back part of the way, one all the way, one only in the lookback days,
    another cluster's rows ignored); where the run's own inputs hold lookback rows only Spark can tell."""
    first = PREV - dt.timedelta(days=1)
    window, before = (first, DAY), DAY
    c1, c2 = Silver(tmp_path), Silver(tmp_path, cluster="c2")
    c1.write("offset_commits", [{"group_id": "g", "topic": "t", "partition": 0, "event_ts": ms(DAY, 1)}])
    c1.write("epoch_lineage", [{"topic": "t", "partition": 0, "snapshot_ts": ms(d, 2)} for d in (PREV, DAY)])
    c2.write("epoch_lineage", [{"topic": "t", "partition": 0, "snapshot_ts": ms(first, 2)}])
    c1.write("metadata_observations", [{"topic": "t", "partition": 0, "capture_ts": ms(d, 3)} for d in (first, DAY)])
    c1.write("group_metadata", [{"group_id": "g", "event_ts": ms(first, 4)}])
    tables = sorted(fr.LOOKBACK_NEEDS)

    known = {t: fr.log_gap_facts(spark, c1.config, t, "c1", window, before) for t in tables}
    assert None not in known.values(), known
    frames = {t: fr.read_silver(spark, c1.config, t, "c1", window).select("event_date") for t in tables}
    from_rows = fr.lookback_gaps(frames, window, before)
    assert fr.lookback_gaps({}, window, before, known) == from_rows
    # part of the tables from the logs, the rest from Spark (gaps() when the run's own inputs hold lookback rows)
    assert fr.lookback_gaps({t: frames[t] for t in tables[:2]}, window, before,
                            {t: known[t] for t in tables[2:]}) == from_rows
    assert len(from_rows) == 2, from_rows
    assert from_rows[0].startswith(f"lookback: epoch_lineage reaches back only to {PREV} ")
    assert from_rows[1].startswith(f"lookback: no offset_commits rows dated {first}..{PREV} ")
    assert fr.log_gap_facts(spark, c1.config, "record_batches", "c1", window, before) == (None, False)  # never written
    state = fr.InputState(before=before, frames={"offset_commits": frames["offset_commits"]})
    assert fr.log_gap_facts(spark, c1.config, "offset_commits", "c1", window, before, state) is None
