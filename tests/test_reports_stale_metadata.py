"""The stale_metadata report (M1, M2, M3) and stale_metadata_rates, on tiny silver tables."""

from __future__ import annotations

import pytest
from test_reports_frames import DAY, PREV, Silver, kinds, ms

from epochlib.rules import MetadataObservation, check_broker_staleness, check_client_metadata, stale_rates
from jobs.reports import run_reports

pytestmark = pytest.mark.spark

_pos = iter(range(1, 10_000))


def obs(t: int, client: str, broker: str, topic: str, epoch: int, *, tid: str | None = None, part: int = 0,
        replicas=(1, 2, 3), version: int = 12, token: int | None = None, position: int | None = None) -> dict:  # fmt: skip
    """One silver row; rows given the same ``position`` are partitions of one captured response."""
    return dict(capture_ts=t, client_id=client, broker=broker, api_version=version, correlation_id=next(_pos),
                topic=topic, topic_id=tid, partition=part, leader_id=replicas[0], leader_epoch=epoch,
                replicas=list(replicas), isr=list(replicas), topic_error=0, partition_error=0,
                metadata_token=token, source="/cap/a.jsonl",
                position=next(_pos) if position is None else position)  # fmt: skip


def scenario() -> list[dict]:
    return [
        # before the range: c1 learns epoch 5 of t-0, then is served epoch 3 (M1 + M2 before the range)
        obs(ms(PREV, 12), "c1", "b1:9092", "t", 5, tid="TID1"),
        obs(ms(PREV, 13), "c1", "b2:9092", "t", 3, tid="TID1"),
        # in the range: b2 serves c1 epoch 4 (M1, and M2: epoch 5 was seen 13 h earlier)
        obs(ms(DAY, 1), "c1", "b2:9092", "t", 4, tid="TID1"),
        # c2 never saw epoch 5: M2 only
        obs(ms(DAY, 2), "c2", "b2:9092", "t", 4, tid="TID1"),
        # topic r re-created (R1 -> R2, epochs restart: no finding), then R1 served again: M3
        obs(ms(DAY, 3), "c1", "b1:9092", "r", 7, tid="R1"),
        obs(ms(DAY, 4), "c1", "b1:9092", "r", 0, tid="R2"),
        obs(ms(DAY, 5), "c1", "b3:9092", "r", 7, tid="R1"),
        # no ids (v9): drop to 0 with a new replica set = possible re-creation (info), not M1/M2
        obs(ms(DAY, 6), "c3", "b1:9092", "n", 6, version=9),
        obs(ms(DAY, 7), "c3", "b1:9092", "n", 0, replicas=(4, 5, 6), version=9),
        # clean: monotone and equal epochs, epoch -1 (v6) is not comparable
        obs(ms(DAY, 8), "c4", "b1:9092", "u", 2, tid="U1"),
        obs(ms(DAY, 8, 5), "c4", "b2:9092", "u", 2, tid="U1"),
        obs(ms(DAY, 8, 10), "c4", "b3:9092", "u", -1, tid=None, version=6),
        obs(ms(DAY, 8, 15), "c4", "b1:9092", "u", 3, tid="U1"),
        # within the grace: epoch 2 first seen 500 ms before another client is served 1 (no finding)
        obs(ms(DAY, 9), "c5", "b1:9092", "t", 2, tid="TID1", part=1),
        obs(ms(DAY, 9, 0, 0, 500), "c6", "b2:9092", "t", 1, tid="TID1", part=1),
    ]


def oracle(rows: list[dict]):
    """The epochlib rules run directly on the same rows (what Spark must reproduce)."""
    o = [MetadataObservation.from_row(r) for r in rows]
    o.sort(key=lambda x: (x.capture_ts, x.source or "", x.position or 0, x.partition))
    return check_client_metadata(o) + check_broker_staleness(o, grace_ms=1000), o


@pytest.mark.parametrize("one_task", [True, False], ids=["one-task", "spark-stages"])
def test_stale_metadata_findings_and_rates(spark, tmp_path, monkeypatch, one_task) -> None:
    """Both ways a run finds them (jobs.reports.metadata_pass within its limit; the Spark stages over the cached
    observations above it) write these rows."""
    from jobs.reports import metadata_pass, stale_metadata

    spark_path: list[int] = []
    real = stale_metadata.metadata_findings
    monkeypatch.setattr(stale_metadata, "metadata_findings", lambda *a, **k: spark_path.append(1) or real(*a, **k))
    if not one_task:
        monkeypatch.setattr(metadata_pass, "MAX_ROWS", 0)
    silver = Silver(tmp_path)
    rows = scenario()
    silver.write("metadata_observations", rows)
    res = run_reports(spark, silver.config, DAY, DAY, reports=["stale_metadata"])
    got = silver.gold("stale_metadata")
    assert kinds(got) == [
        ("M1", "client_epoch_regression", "warning", DAY),
        ("M2", "broker_served_stale", "warning", DAY),
        ("M2", "broker_served_stale", "warning", DAY),
        ("M3", "possible_topic_recreation", "info", DAY),
        ("M3", "topic_id_regression", "error", DAY),
    ]
    m1 = next(r for r in got if r["rule"] == "M1")
    assert (m1["client_id"], m1["broker"], m1["served_epoch"], m1["cached_epoch"]) == ("c1", "b2:9092", 4, 5)
    assert m1["staleness_ms"] == ms(DAY, 1) - ms(PREV, 12)  # the baseline comes from before the range
    assert m1["topic_id"] == "TID1" and m1["evidence"][0].startswith("capture:/cap/a.jsonl line ")
    assert sorted(r["client_id"] for r in got if r["rule"] == "M2") == ["c1", "c2"]
    assert {r["cluster"] for r in got} == {"c1"} and len({r["run_id"] for r in got}) == 1
    # exactly the in-range findings the rules give on the same rows, same ids
    found, o = oracle(rows)
    want = {f.id for f in found if f.event_ts >= ms(DAY)}
    assert {r["finding_id"] for r in got} == want
    assert res.counts["stale_metadata"] == 5
    assert bool(spark_path) is not one_task
    assert res.by_kind["stale_metadata"][("M1", "client_epoch_regression", "warning")] == 1

    # rates: per broker and per client, for the range's dates only, as epochlib's stale_rates
    rates = silver.gold("stale_metadata_rates")
    expected = stale_rates([x for x in o if x.capture_ts >= ms(DAY)], found)
    assert sorted((r["event_date"], r["dimension"], r["subject"], r["responses"], r["stale_responses"],
                   r["stale_rate"]) for r in rates) == sorted(
        (e["event_date"], e["dimension"], e["subject"], e["responses"], e["stale_responses"], e["stale_rate"])
        for e in expected)  # fmt: skip
    b2 = next(r for r in rates if r["subject"] == "b2:9092")
    assert (b2["responses"], b2["stale_responses"]) == (4, 2)
    assert res.counts["stale_metadata_rates"] == len(rates)

    # a rerun replaces the range: identical rows and ids
    run_reports(spark, silver.config, DAY, DAY, reports=["stale_metadata"])
    again = silver.gold("stale_metadata")
    strip = [{k: v for k, v in r.items() if k != "run_id"} for r in again]
    assert strip == [{k: v for k, v in r.items() if k != "run_id"} for r in got]


def test_tokens_are_compared_cluster_wide_and_a_response_counts_once(spark, tmp_path) -> None:
    silver = Silver(tmp_path)
    rows = [
        # before the range: token 200 is seen with topic x only
        obs(ms(PREV, 23), "c1", "b1:9092", "x", 3, tid="X1", token=200),
        # y was never served with a higher token, but the cluster was: b2 is stale by token
        obs(ms(DAY, 1), "c2", "b2:9092", "y", 7, tid="Y1", token=150),
        # one response of b3: x-0 stale by epoch and by token (the epoch finding wins), x-1 by token only
        obs(ms(DAY, 2), "c3", "b3:9092", "x", 2, tid="X1", token=180, position=9_001),
        obs(ms(DAY, 2), "c3", "b3:9092", "x", 4, tid="X1", part=1, token=180, position=9_001),
        # the newest token again: fine
        obs(ms(DAY, 3), "c1", "b1:9092", "x", 3, tid="X1", token=200),
    ]
    silver.write("metadata_observations", rows)
    run_reports(spark, silver.config, DAY, DAY, reports=["stale_metadata"])
    got = silver.gold("stale_metadata")
    found, o = oracle(rows)
    assert {r["finding_id"] for r in got} == {f.id for f in found if f.event_ts >= ms(DAY)}
    summary = sorted((r["broker"], r["topic"], r["partition"], r["served_epoch"], r["cached_epoch"]) for r in got)
    assert summary == [("b2:9092", "y", 0, 7, None), ("b3:9092", "x", 0, 2, 3), ("b3:9092", "x", 1, 4, None)]
    y = next(r for r in got if r["topic"] == "y")
    assert "token 150" in y["detail"] and "token 200" in y["detail"]
    assert y["staleness_ms"] == ms(DAY, 1) - ms(PREV, 23) and y["evidence"][1] == f"capture:/cap/a.jsonl line {rows[0]['position']}"
    rates = {(r["dimension"], r["subject"]): (r["responses"], r["stale_responses"])
             for r in silver.gold("stale_metadata_rates")}  # fmt: skip
    assert rates[("broker", "b3:9092")] == (1, 1)  # two stale partitions, one response
    assert rates[("broker", "b2:9092")] == (1, 1) and rates[("broker", "b1:9092")] == (1, 0)


def test_a_table_written_before_the_token_address_and_trailing_columns_still_reads(spark, tmp_path) -> None:
    from deltalake import write_deltalake

    from jobs.sink import read_table_arrow, table_location

    rows = scenario()
    scratch = Silver(tmp_path / "scratch")
    scratch.write("metadata_observations", rows)
    old = read_table_arrow("metadata_observations", scratch.config).drop_columns(
        ["metadata_token", "broker_address", "trailing_bytes", "client_host"])
    silver = Silver(tmp_path)
    write_deltalake(table_location("metadata_observations", silver.config), old, partition_by=["cluster", "event_date"])
    run_reports(spark, silver.config, DAY, DAY, reports=["stale_metadata"])
    found, _ = oracle(rows)
    assert {r["finding_id"] for r in silver.gold("stale_metadata")} == {f.id for f in found if f.event_ts >= ms(DAY)}


def test_only_groups_that_cannot_hold_a_finding_are_skipped(spark, tmp_path) -> None:
    """The Spark job sends only groups that can hold a finding to the rules (two epochs of a partition, two
    ids of a name, or a token): on mixed random traffic its findings are still exactly the rules' own —
    including an M3 id regression whose epochs never change and a token-only M2 of a steady partition."""
    import random

    rnd = random.Random(16)
    rows = [
        obs(ms(DAY, 1), "k1", "b1:9092", "steady", 7, tid="S1"),
        obs(ms(DAY, 2), "k1", "b1:9092", "steady", 7, tid="S2"),
        obs(ms(DAY, 3), "k1", "b2:9092", "steady", 7, tid="S1"),  # M3 with one epoch throughout
    ]
    for i in range(400):
        topic = rnd.choice(["a", "b", "c", "d"])
        tid = None if rnd.random() < 0.2 else f"{topic.upper()}{rnd.choice([1, 1, 1, 2])}"
        rows.append(obs(ms(DAY, 4 + i // 60, i % 60), rnd.choice(["c1", "c2", "c3"]), rnd.choice(["b1", "b2"]),
                        topic, rnd.choice([3, 3, 3, 3, 2, 4, -1]) if topic != "d" else 5, tid=tid,
                        part=rnd.choice([0, 1]), version=12 if tid else 9,
                        token=rnd.choice([None, None, 100 + i]) if topic == "c" else None))
    # epochs that only grow (skipped now), one that comes back after the grace (M2) or inside it (none), and
    # a client that sees a lower epoch in the same millisecond as the higher one (no M1: ties are judged together)
    for i in range(60):
        rows.append(obs(ms(DAY, 12, i), f"g{i % 3}", "b3", "e", i // 6, tid="E1", part=i % 2))
    rows += [obs(ms(DAY, 13), "h1", "b1", "e", 20, tid="E1", part=5), obs(ms(DAY, 13, 0, 0, 999), "h2", "b2", "e", 19,
             tid="E1", part=5), obs(ms(DAY, 13, 0, 2), "h3", "b2", "e", 19, tid="E1", part=5)]
    rows += [obs(ms(DAY, 14), "h4", "b1", "e", 9, tid="E1", part=6), obs(ms(DAY, 14), "h4", "b2", "e", 8, tid="E1", part=6)]
    # a capture without a client id is a group of its own too (the kept groups are matched null-safe)
    rows += [obs(ms(DAY, 15), None, "b1", "z", 9, tid="Z1"), obs(ms(DAY, 16), None, "b2", "z", 4, tid="Z1")]
    silver = Silver(tmp_path)
    silver.write("metadata_observations", rows)
    run_reports(spark, silver.config, DAY, DAY, reports=["stale_metadata"])
    got = silver.gold("stale_metadata")
    found, _ = oracle(rows)
    assert {r["finding_id"] for r in got} == {f.id for f in found if f.event_ts >= ms(DAY)}
    assert ("M3", "topic_id_regression") in {(r["rule"], r["kind"]) for r in got if r["topic"] == "steady"}
    assert {r["rule"] for r in got} >= {"M1", "M2", "M3"}
    assert {r["rule"] for r in got if r["topic"] == "z"} >= {"M2"}


def test_the_log_overrules_a_capture_only_m2_verdict_of_the_observations_it_judges(spark, tmp_path) -> None:
    """Captures saw epoch 2 of t-0 at 11:00, so b2 serving epoch 1 at 11:30 looks stale from the captures
    alone; the metadata log committed epoch 2 only at 11:45, so b2 was current: no finding. At 13:00 b2 still
    serves epoch 1: stale by the log, timed from the log's commit (75 min), and reported once."""
    from test_reports_frames import ts

    silver = Silver(tmp_path)
    silver.write("metadata_observations", [
        obs(ms(DAY, 11), "c1", "b1", "t", 2, tid="TID1"),
        obs(ms(DAY, 11, 30), "c2", "b2", "t", 1, tid="TID1"),
        obs(ms(DAY, 13), "c3", "b2", "t", 1, tid="TID1"),
    ])  # fmt: skip

    def change(offset: int, t: int, change: str, partition: int | None, epoch: int | None = None) -> dict:
        return dict(metadata_offset=offset, controller_ts=ts(t), event_ts=t, topic="t", topic_id="TID1",
                    partition=partition, change=change, leader=1 if epoch is not None else None, leader_epoch=epoch,
                    isr=[1, 2] if epoch is not None else None, source="ctl/0.log", position=offset)

    silver.write("partition_history", [
        change(1, ms(DAY, 0), "topic_created", None), change(1, ms(DAY, 0), "created", 0, 0),
        change(2, ms(DAY, 10), "leader", 0, 1), change(3, ms(DAY, 11, 45), "leader", 0, 2),
        change(4, ms(DAY, 20), "isr", 0, 2),
    ])  # fmt: skip
    run_reports(spark, silver.config, DAY, DAY, reports=["stale_metadata"])
    got = silver.gold("stale_metadata")
    assert [(r["rule"], r["client_id"], r["staleness_ms"]) for r in got] == [("M2", "c3", 75 * 60_000)]
    assert got[0]["evidence"][1].startswith("metadata-log:") or "ctl/0.log" in got[0]["evidence"][1]
    b2 = next(r for r in silver.gold("stale_metadata_rates") if r["subject"] == "b2")
    assert (b2["responses"], b2["metadata_lag_max_ms"]) == (2, 75 * 60_000)
