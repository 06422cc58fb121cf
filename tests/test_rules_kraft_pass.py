"""The columnar metadata-log passes (epochlib.rules.kraft_pass) give exactly what their reference functions
in epochlib.rules.kraft give, on random logs (re-created and deleted topics, snapshot starts, epochs that
go down or repeat, clocks that go back) and random observations (no id, the all-zero id, no epoch, times
inside and outside the log, names the log never saw)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute  # noqa: F401  (pa.compute)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_rules_model import OBS_ARROW

from epochlib.rules import MetadataObservation
from epochlib.rules.kraft import (
    HistoryChange,
    LogView,
    check_broker_staleness_logged,
    check_metadata_offsets,
    judge,
    response_lags,
    with_log_topic_ids,
)
from epochlib.rules.kraft_pass import (
    SpanIndex,
    fill_log_topic_ids,
    judged_rows,
    logged_staleness,
    metadata_offsets,
    row_lags,
)

IDS = ["AQIDBAUGBwgJCgsMDQ4PEA", "AgMEBQYHCAkKCwwNDg8QEQ", "AwQFBgcICQoLDA0ODxAREg"]
ZERO = "AAAAAAAAAAAAAAAAAAAAAA"
NAMES = ["t", "u"]
OBS_SCHEMA = OBS_ARROW


@st.composite
def histories(draw) -> list[HistoryChange]:
    """A replayed log: topics born (some from a snapshot) and deleted, partition leader changes whose
    epochs mostly grow, sometimes repeat or go down, at controller times that mostly grow."""
    rows: list[HistoryChange] = []
    off, ts = 0, draw(st.integers(0, 5_000))
    regular = draw(st.booleans())
    for tid in draw(st.lists(st.sampled_from(IDS), min_size=1, max_size=3, unique=True)):
        name = draw(st.sampled_from(NAMES))
        snapshot = draw(st.booleans())
        off += draw(st.integers(1, 5))
        rows.append(HistoryChange(off, ts, name, tid, None, "snapshot" if snapshot else "topic_created"))
        born = off
        for p in range(draw(st.integers(1, 3))):
            epoch = draw(st.integers(0, 3))
            for i in range(draw(st.integers(1, 6))):
                # partitions are often created by one record (one offset), as a topic's creation does
                off = born if i == 0 and draw(st.booleans()) else off + draw(st.integers(1, 5))
                ts += draw(st.integers(0, 400) if regular else st.integers(-300, 400))
                change = "snapshot" if snapshot and i == 0 else draw(st.sampled_from(["leader", "isr", "created"]))
                e = None if draw(st.integers(0, 9)) == 0 else epoch
                rows.append(HistoryChange(off, ts, name, tid, p, change, 1, e, (1, 2), None, False, None, None,
                                          "ctl/0.log", off * 10))
                epoch += draw(st.integers(0, 2) if regular else st.integers(-1, 2))
        if draw(st.booleans()):
            off += draw(st.integers(1, 5))
            ts += draw(st.integers(0, 400))
            rows.append(HistoryChange(off, ts, name, tid, None, "topic_deleted"))
    return rows


@st.composite
def observation_tables(draw, lo: int, hi: int, times: list[int]) -> pa.Table:
    """Observations around the log's times: the responses' times, a span's start ± a little, or anywhere."""
    rows = []
    resp_ts = [draw(st.one_of(st.sampled_from(times), st.integers(lo - 1_000, hi + 1_000))) for _ in range(4)]
    resp_ts += [draw(st.sampled_from(resp_ts)) for _ in range(3)]  # responses captured in the same millisecond
    for _ in range(draw(st.integers(0, 40))):
        resp = draw(st.integers(0, 6))  # observations of one response share client, source, position, time
        ts = resp_ts[resp]
        rows.append({
            "capture_ts": draw(st.one_of(st.just(ts), st.just(ts), st.integers(lo - 1_000, hi + 1_000))),
            "client_id": f"c{resp % 2}", "broker": str(resp % 3), "api_version": 12, "correlation_id": resp,
            "topic": draw(st.sampled_from([*NAMES, "never", None])),
            "topic_id": draw(st.sampled_from([*IDS, ZERO, "", None])),
            "partition": draw(st.integers(0, 2)),
            "leader_id": 1, "leader_epoch": draw(st.one_of(st.none(), st.integers(-1, 6))),
            "replicas": [1], "isr": [1], "topic_error": 0, "partition_error": 0, "metadata_token": None,
            "source": f"cap-{resp % 2}.jsonl", "position": resp, "event_ts": ts,
        })
    return pa.Table.from_pylist(rows, schema=OBS_SCHEMA)


def _case(draw) -> tuple[LogView, pa.Table, int]:
    view = LogView.build(draw(histories()))
    lo, hi = view.first_ts or 0, view.last_ts or 0
    times = [s.start_ts + d for spans in view.spans.values() for s in spans if s.start_ts is not None
             for d in (0, 50, 150, 1_100)] or [lo]
    return view, draw(observation_tables(lo, hi, times)), draw(st.sampled_from([0, 100, 1000]))


def _objects(table: pa.Table) -> list[MetadataObservation]:
    return [MetadataObservation.from_row(r) for r in table.to_pylist()]


@settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.data())
def test_columnar_passes_equal_the_reference(data) -> None:
    view, table, grace = _case(data.draw)
    index = SpanIndex.of(view)
    obs = _objects(table)

    assert fill_log_topic_ids(view, table).to_pylist() == [o.topic_id for o in with_log_topic_ids(obs, view)]

    assert judged_rows(index, table, grace).tolist() == [judge(o, view, grace)[0] is not None for o in obs]

    assert logged_staleness(index, table, grace) == check_broker_staleness_logged(obs, view, grace)[0]

    for kraft in (True, False):
        assert metadata_offsets(index, table, kraft=kraft) == check_metadata_offsets(obs, view, kraft=kraft)
    for client in {o.client_id for o in obs}:  # per client, as the report groups them
        mine = table.filter(pa.compute.equal(table.column("client_id"), client))
        assert metadata_offsets(index, mine) == check_metadata_offsets([o for o in obs if o.client_id == client], view)

    # per response (as add_lag aggregates them): the max lag of its judged rows, for responses with one
    judged, lag = row_lags(index, table, grace)
    want = {}
    for broker in {o.broker for o in obs}:
        for ptr, b, ts, lag_ms in response_lags([o for o in obs if o.broker == broker], view, grace):
            want[(b, ptr, ts)] = lag_ms
    got: dict = {}
    for o, j, g in zip(obs, judged.tolist(), lag.tolist(), strict=True):
        if j:
            k = (o.broker, o.pointer(), o.capture_ts)
            got[k] = max(got.get(k, 0), g)
    assert got == want


def test_a_regular_log_needs_no_reference_rows() -> None:
    """On a log whose epochs grow (every replayed KRaft log), every row is decided by the arrays."""
    rows = [HistoryChange(1, 1_000, "t", IDS[0], None, "topic_created")]
    rows += [HistoryChange(1 + e, 1_000 + 100 * e, "t", IDS[0], 0, "leader", 1, e) for e in range(5)]
    view = LogView.build(rows)
    index = SpanIndex.of(view)
    assert index.regular.all()
    table = pa.Table.from_pylist([
        {"capture_ts": 1_350, "topic": "t", "topic_id": None, "partition": 0, "leader_epoch": 1, "client_id": "c",
         "broker": "1", "source": "a.jsonl", "position": 1},
        {"capture_ts": 1_350, "topic": "t", "topic_id": IDS[0], "partition": 0, "leader_epoch": 3, "client_id": "c",
         "broker": "1", "source": "a.jsonl", "position": 2},
    ], schema=OBS_SCHEMA)
    judged, lag = row_lags(index, table, 100)
    # epoch 1 at 1350: epoch 2 began at 1200 (< 1350 - 100): stale by 150 ms; epoch 3 is current
    assert judged.tolist() == [True, True] and lag.tolist() == [150, 0]
    [f] = logged_staleness(index, table, 100)
    assert (f.rule, f.numbers["served_epoch"], f.numbers["staleness_ms"]) == ("M2", 1, 150)


def test_m5_ties_name_the_first_partition_of_the_response_as_the_rule_does() -> None:
    """Both partitions of t moved to epoch 1 at offset 20: the response serving both began at 20 by either;
    the rule names the first. Served epoch 0 of t-0 later (ended at 20): a regression."""
    rows = [HistoryChange(10, 1_000, "t", IDS[0], None, "topic_created")]
    rows += [HistoryChange(10, 1_000, "t", IDS[0], p, "created", 1, 0) for p in (0, 1)]
    rows += [HistoryChange(20, 2_000, "t", IDS[0], p, "leader", 2, 1) for p in (0, 1)]
    view = LogView.build(rows)

    def o(ts: int, position: int, partition: int, epoch: int) -> dict:
        return {"capture_ts": ts, "client_id": "c", "broker": "1", "topic": "t", "topic_id": IDS[0],
                "partition": partition, "leader_epoch": epoch, "source": "a.jsonl", "position": position}

    table = pa.Table.from_pylist([o(1_500, 1, 0, 1), o(1_500, 1, 1, 1), o(1_800, 2, 0, 0)], schema=OBS_SCHEMA)
    [f] = metadata_offsets(SpanIndex.of(view), table)
    assert f == check_metadata_offsets(_objects(table), view)[0]
    assert f.kind == "metadata_offset_regression" and "(t-0 epoch 1)" in f.detail
