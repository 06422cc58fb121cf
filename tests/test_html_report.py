"""The HTML report: one self-contained file with a chart per question, the lineage of a requested partition,
escaped evidence, and "no data" sections instead of crashes. Tables are written with delta-rs (no Spark)."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import pyarrow as pa
import pytest

from jobs import schemas
from jobs.config import Config, Output
from jobs.html_report import _Lane, _nice_ticks, divergences, write_html_report
from jobs.sink import write_small

D1, D2 = dt.date(2024, 3, 1), dt.date(2024, 3, 2)
UTC = dt.timezone.utc
EVIL = '<script>alert("x")</script> & /data/seg.log@4096'


def _ts(day: dt.date, hour: int) -> dt.datetime:
    return dt.datetime(day.year, day.month, day.day, hour, tzinfo=UTC)


def _table(name: str, rows: list[dict]) -> pa.Table:
    schema = schemas.arrow_schema(name)
    return pa.Table.from_pylist([{f.name: r.get(f.name) for f in schema} for r in rows], schema=schema)


def _finding(i: int, day: dt.date, rule: str, kind: str, severity: str, **extra) -> dict:
    return {"finding_id": f"f{i}", "run_id": "r1", "cluster": "c1", "event_date": day, "rule": rule, "kind": kind,
            "severity": severity, "event_ts": _ts(day, 3 + i % 10), "detail": f"finding {i}",
            "evidence": [f"/data/offsets/__consumer_offsets-3/00000000000000000000.log@{100 * i}"], **extra}


def _write_all(cfg: Config) -> None:
    rng = (D1, D2)
    write_small(_table("stale_metadata_rates", [
        {"cluster": "c1", "event_date": d, "dimension": dim, "subject": subj, "responses": 100,
         "stale_responses": n, "stale_rate": n / 100}
        for d, dim, subj, n in [(D1, "broker", "b1:9092", 5), (D2, "broker", "b1:9092", 12),
                                (D1, "broker", "b2:9092", 0), (D2, "broker", "b2:9092", 1),
                                (D1, "client", "client-a", 3)]]), "stale_metadata_rates", config=cfg, date_range=rng)
    write_small(_table("stale_metadata", [
        _finding(1, D1, "M1", "stale_leader_epoch", "warning", broker="b1:9092", client_id="client-a",
                 topic="orders", partition=0, served_epoch=4, cached_epoch=5, staleness_ms=5000)]),
        "stale_metadata", config=cfg, date_range=rng)
    write_small(_table("fencing_violations", [
        _finding(2, D1, "F2", "commit_beyond_epoch_end", "error", group_id="g1", topic="orders", partition=0),
        _finding(3, D2, "F2", "commit_beyond_epoch_end", "warning", group_id="g1", topic="orders", partition=0),
        _finding(4, D2, "D1", "replica_lineage_conflict", "critical", topic="orders", partition=0, broker="2",
                 detail=EVIL, evidence=[EVIL]),
        _finding(5, D2, "L3", "batch_epoch_above_checkpoint", "info", topic="orders", partition=1)]),
        "fencing_violations", config=cfg, date_range=rng)
    write_small(_table("spurious_offset_resets", [
        _finding(6, D1, "S1e", "spurious_rewind", "warning", group_id="g1", topic="orders", partition=0,
                 classification="spurious_rewind", records_reread=250, previous_offset=500, new_offset=250),
        _finding(7, D2, "S1a", "truncation", "info", group_id="g2", topic="orders", partition=0,
                 classification="truncation", records_reread=10),
        _finding(8, D2, "S2b", "spurious_skip", "error", group_id="g2", topic="orders", partition=1,
                 classification="spurious_skip", records_skipped=900)]),
        "spurious_offset_resets", config=cfg, date_range=rng)

    def lineage(broker, hour, entries, leo, day=D1, topic="orders", partition=0):
        return {"cluster": "c1", "event_date": day, "broker": broker, "snapshot_ts": _ts(day, hour),
                "topic": topic, "partition": partition, "entries": [{"epoch": e, "start_offset": s} for e, s in entries],
                "checkpoint_version": 0, "log_start_offset": 0, "high_watermark": leo, "log_end_offset": leo,
                "source": f"/logdirs/broker={broker}/snapshot=x/{topic}-{partition}/leader-epoch-checkpoint",
                "event_ts": _ts(day, hour)}
    write_small(_table("epoch_lineage", [
        lineage(1, 6, [(0, 0), (2, 100)], 150), lineage(2, 6, [(0, 0), (2, 100)], 140),
        # broker 2 kept epoch 3 from offset 180 while broker 1 started epoch 4 at 170: divergence at 170..
        lineage(1, 18, [(0, 0), (2, 100), (4, 170)], 260), lineage(2, 18, [(0, 0), (2, 100), (3, 180)], 230),
        lineage(1, 6, [(0, 0)], 10, topic="other")]), "epoch_lineage", config=cfg, date_range=rng)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[str, Path]:
    root = tmp_path_factory.mktemp("html")
    cfg = Config(cluster="c1", output=Output(root=str(root / "tables")))
    _write_all(cfg)
    path = write_html_report(cfg, D1, D2, root / "out" / "report.html", partitions=[("orders", 0)])
    return path.read_text(encoding="utf-8"), path


def test_every_chart_is_an_svg_with_a_title_and_label(report):
    text, path = report
    assert path.name == "report.html"
    assert text.startswith("<!DOCTYPE html>") and "<title>epoch-audit: c1, 2024-03-01 .. 2024-03-02</title>" in text
    for chart in ("chart-stale-rate", "chart-resets", "chart-reset-records", "chart-fencing",
                  "chart-lineage-orders-0"):
        m = re.search(rf'<svg id="{chart}"[^>]*role="img"[^>]*aria-label="([^"]+)"', text)
        assert m, chart
        assert f'<title id="{chart}-t">' in text and f'<desc id="{chart}-d">' in text
    assert text.count('class="legend"') >= 5
    assert "day (UTC)" in text and "stale responses (%)" in text and ">offset</text>" in text


def test_charts_carry_the_numbers(report):
    text, _ = report
    assert "b1:9092, 2024-03-02: 12.00%" in text          # stale rate point tooltip
    assert "client-a" not in text.split('id="stale-rate"')[1].split("</section>")[0]  # brokers only
    assert "2024-03-01: spurious_rewind 1" in text         # stacked reset bar
    assert "records skipped 900" in text and "records re-read 250" in text
    assert "F2 commit_beyond_epoch_end: 1 error" in text and "F2 commit_beyond_epoch_end: 1 warning" in text


def test_lineage_of_the_requested_partition_shows_divergence(report):
    text, _ = report
    section = text.split('id="lineage-orders-0"')[1].split("</section>")[0]
    assert "broker 1, snapshot 2024-03-01 18:00:00: epoch 4, offsets 170–259" in section
    assert 'class="diverge"' in section and "Divergence between replicas" in section
    assert "offsets 170–179 — broker 1: epoch 4, broker 2: epoch 2" in section
    assert "offsets 180–229 — broker 1: epoch 4, broker 2: epoch 3" in section
    assert section.count("<li>2024-03-01 ") == 2  # the 06:00 snapshots agree (broker 2 only lags)
    assert "other-0" not in text  # only requested partitions are drawn


def test_summary_and_top_findings_escape_evidence(report):
    text, _ = report
    assert "<script>alert" not in text and text.count("<script") == 1  # only the page's own filter script
    assert "&lt;script&gt;alert(&quot;x&quot;)&lt;/script&gt; &amp; /data/seg.log@4096" in text
    top = text.split('id="top-findings"')[1]
    assert top.index("critical") < top.index("finding 8") < top.index("finding 1")  # severity order
    assert "finding 5" not in top and "finding 7" not in top  # info findings are counted, not listed
    assert "__consumer_offsets-3/00000000000000000000.log@600" in top
    summary = text.split('id="summary"')[1].split("</section>")[0]
    assert "replica_lineage_conflict" in summary and "spurious_skip" in summary


def test_no_external_resources(report):
    text, _ = report
    lowered = text.lower()
    for bad in ('src="http', "src='http", 'href="http', "href='http", "@import", "url(http", "url(//",
                "<link", "<img", "<iframe", "fetch(", "xmlhttprequest", "import("):
        assert bad not in lowered, bad
    assert not re.search(r"https?://", lowered)
    assert lowered.count("<script") == lowered.count("<script>") == 1  # one inline script, no src


def test_missing_tables_give_no_data_sections(tmp_path):
    cfg = Config(cluster="c1", output=Output(root=str(tmp_path / "nothing")))
    text = write_html_report(cfg, "2024-03-01", None, tmp_path / "r.html", partitions=[("orders", 3)]).read_text()
    assert text.count('class="nodata"') >= 5
    assert "stale_metadata_rates</code> not found" in text and "epoch_lineage</code> not found" in text
    assert "<svg" not in text


def test_partition_without_snapshots(report, tmp_path):
    _, path = report
    cfg = Config(cluster="c1", output=Output(root=str(path.parent.parent / "tables")))
    text = write_html_report(cfg, D1, D2, tmp_path / "r.html", partitions=[("orders", 9)]).read_text()
    assert "no snapshots of <code>orders-9</code>" in text
    other = write_html_report(cfg, D2, D2, tmp_path / "r2.html").read_text()  # D1-only lineage, rates of D2
    assert "b1:9092: 12.00% stale responses (%)" in other and "2024-03-01" not in other.split("<main>")[1].split("</header>")[1]


def _lane(broker, entries, end):
    return _Lane(broker, dt.datetime(2024, 3, 1, tzinfo=UTC), entries, end, 0, end, "")


def test_divergence_compares_only_offsets_both_replicas_hold():
    lagging = [_lane(1, [(0, 0), (2, 100)], 200), _lane(2, [(0, 0), (2, 100)], 120)]
    assert divergences(lagging) == []
    forked = [_lane(1, [(0, 0), (4, 170)], 260), _lane(2, [(0, 0), (3, 180)], 230)]
    assert divergences(forked) == [(170, 180, "broker 1: epoch 4, broker 2: epoch 0"),
                                   (180, 230, "broker 1: epoch 4, broker 2: epoch 3")]


@pytest.mark.spark
def test_lineage_from_spark_written_table(spark, tmp_path):
    """Spark-staged files committed by delta-rs carry integer statistics only: the lineage filter on
    topic (a string) must still find the rows."""
    from jobs.sink import write_table

    cfg = Config(cluster="c1", output=Output(root=str(tmp_path / "tables")))
    rows = _table("epoch_lineage", [
        {"cluster": "c1", "event_date": D1, "broker": b, "snapshot_ts": _ts(D1, 6), "topic": "orders",
         "partition": 0, "entries": [{"epoch": 0, "start_offset": 0}, {"epoch": 2, "start_offset": 100}],
         "log_start_offset": 0, "log_end_offset": 150, "source": f"b{b}", "event_ts": _ts(D1, 6)} for b in (1, 2)])
    df = spark.createDataFrame(rows.to_pylist(), schema=schemas.spark_schema("epoch_lineage"))
    write_table(df, "epoch_lineage", config=cfg, date_range=(D1, D1), backend="delta-rs")
    text = write_html_report(cfg, D1, D1, tmp_path / "r.html", partitions=[("orders", 0)]).read_text()
    section = text.split('id="lineage-orders-0"')[1].split("</section>")[0]
    assert "<svg" in section and "broker 2, snapshot 2024-03-01 06:00:00: epoch 2, offsets 100–149" in section
    assert 'class="ok"' in section


def test_a_one_day_range_draws_a_bar_per_broker(report, tmp_path):
    _, path = report
    cfg = Config(cluster="c1", output=Output(root=str(path.parent.parent / "tables")))
    text = write_html_report(cfg, D1, D1, tmp_path / "day.html").read_text(encoding="utf-8")
    section = text.split('id="stale-rate"')[1].split("</section>")[0]
    assert "Stale metadata rate per broker, 2024-03-01" in section and "<polyline" not in section
    assert "b1:9092: 5.00% stale responses (%)" in section and ">5.00%</text>" in section
    assert "b2:9092: 0.00%" not in section and ">0.00%</text>" in section  # a zero rate: no bar, its label


@pytest.mark.parametrize(("hi", "last"), [(0.32, 0.4), (12, 12.5), (11, 12.5), (10, 10), (0.3, 0.3), (1, 1), (97, 100)])
def test_the_axis_reaches_the_largest_value(hi, last):
    """Charts scale to the last tick: 12 resets on a 0..10 axis were drawn past the top of the plot."""
    ticks = _nice_ticks(0, hi)
    assert ticks[0] == 0 and ticks[-1] == pytest.approx(last) and ticks[-2] < hi
