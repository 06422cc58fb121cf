"""M1, M2 (+ rates) and M3."""

from __future__ import annotations

import datetime as dt

from epochlib.rules import MetadataObservation, check_broker_staleness, check_client_metadata, stale_rates
from epochlib.rules.metadata import _id_firsts, older_ids, token_frontier

_pos = iter(range(1, 10_000))


def obs(
    ts,
    epoch,
    *,
    client="c1",
    broker="b1:9092",
    topic="t",
    tid="IDA",
    part=0,
    replicas=(1, 2, 3),
    token=None,
    corr=None,
) -> MetadataObservation:
    return MetadataObservation(
        capture_ts=ts,
        client_id=client,
        broker=broker,
        topic=topic,
        partition=part,
        leader_epoch=epoch,
        topic_id=tid,
        replicas=tuple(replicas),
        metadata_token=token,
        correlation_id=corr,
        source="caps/c.jsonl",
        position=next(_pos),
    )


def kinds(fs):
    return [f.kind for f in fs]


# --- M1 --------------------------------------------------------------------------------------------


def test_m1_regression_names_broker_epochs_and_age():
    seen = obs(1000, 5, broker="b1:9092")
    stale = obs(4000, 4, broker="b2:9092", corr=77)
    (f,) = check_client_metadata([obs(500, 4), seen, stale])
    assert (f.rule, f.kind, f.severity) == ("M1", "client_epoch_regression", "warning")
    assert f.broker == "b2:9092" and f.client_id == "c1" and f.topic_id == "IDA"
    assert f.numbers == {"served_epoch": 4, "cached_epoch": 5, "staleness_ms": 3000, "correlation_id": 77}
    assert f.evidence == (stale.pointer(), seen.pointer())
    assert f.event_ts == 4000


def test_m1_staleness_counts_from_the_first_sighting_of_the_higher_epoch():
    first, again, stale = obs(0, 5), obs(2000, 5), obs(3000, 4)
    (f,) = check_client_metadata([first, again, stale])
    assert f.numbers["staleness_ms"] == 3000 and f.evidence == (stale.pointer(), first.pointer())


def test_m1_equal_epochs_and_minus_one_are_fine():
    assert check_client_metadata([obs(1, 5), obs(2, 5), obs(3, -1), obs(4, None)]) == []


def test_m1_is_per_client_and_per_partition():
    assert check_client_metadata([obs(1, 5, client="a"), obs(2, 4, client="b")]) == []
    assert check_client_metadata([obs(1, 5, part=0), obs(2, 4, part=1)]) == []


def test_m1_one_client_id_on_two_hosts_is_two_clients():
    """Java's default client ids repeat on every host: host B never saw host A's epoch."""
    a = obs(1, 6, client="consumer-g-1")
    b = MetadataObservation(**{**{f: getattr(a, f) for f in a.__slots__}, "capture_ts": 2, "leader_epoch": 5,
                               "client_host": "10.0.1.2", "position": next(_pos)})
    a = MetadataObservation(**{**{f: getattr(a, f) for f in a.__slots__}, "client_host": "10.0.1.1"})
    assert check_client_metadata([a, b]) == []
    (f,) = check_client_metadata([a, b, MetadataObservation(**{**{f: getattr(b, f) for f in b.__slots__},
                                                               "capture_ts": 3, "client_host": "10.0.1.1"})])
    assert f.kind == "client_epoch_regression" and "consumer-g-1 on 10.0.1.1" in f.detail


def test_m1_ties_in_capture_time_are_not_already_seen():
    assert check_client_metadata([obs(10, 5), obs(10, 4)]) == []
    assert kinds(check_client_metadata([obs(10, 5), obs(10, 4), obs(11, 4)])) == ["client_epoch_regression"]


def test_m1_unsorted_input_is_sorted_by_capture_time():
    assert kinds(check_client_metadata([obs(20, 4), obs(10, 5)])) == ["client_epoch_regression"]


# --- M3 --------------------------------------------------------------------------------------------


def test_m3_recreated_topic_new_id_is_a_new_baseline():
    seq = [obs(1, 7, tid="OLD"), obs(2, 0, tid="NEW"), obs(3, 1, tid="NEW")]
    assert check_client_metadata(seq) == []


def test_m3_older_topic_id_is_a_regression():
    seq = [obs(1, 7, tid="OLD"), obs(2, 0, tid="NEW"), obs(5, 7, tid="OLD", broker="b3:9092")]
    (f,) = check_client_metadata(seq)
    assert (f.rule, f.kind, f.severity) == ("M3", "topic_id_regression", "error")
    assert f.broker == "b3:9092" and f.topic_id == "OLD" and f.numbers["staleness_ms"] == 3


def test_m3_orders_ids_across_clients_not_by_one_clients_order():
    """A client that starts after a re-creation (id NEW) and is then served the deleted id OLD by a lagging broker:
    the finding is on the lagging broker's response, not on the healthy broker serving NEW again afterwards."""
    others = [obs(1, 7, client="j0", tid="OLD"), obs(5, 0, client="j0", tid="NEW")]
    mine = [obs(10, 0, client="j1", tid="NEW", broker="b1:9092"),
            obs(15, 7, client="j1", tid="OLD", broker="b3:9092"),
            obs(20, 0, client="j1", tid="NEW", broker="b1:9092")]
    (f,) = check_client_metadata(others + mine)
    assert (f.kind, f.client_id, f.broker, f.event_ts, f.topic_id) == ("topic_id_regression", "j1", "b3:9092", 15,
                                                                       "OLD")
    assert f.numbers["staleness_ms"] == 5  # since j1 saw NEW
    # the Spark job passes one client's rows with every id's first sighting
    (g,) = check_client_metadata(mine, older_ids(_id_firsts(others + mine)))
    assert (g.broker, g.event_ts) == ("b3:9092", 15)
    # the capture starts after the re-creation: nobody saw OLD before NEW; a lagging broker serves OLD to a client
    # that had not seen NEW yet, then the healthy one serves NEW: no error on the healthy response
    late = [obs(5, 0, client="y", tid="NEW"), obs(10, 7, client="x", tid="OLD", broker="b3:9092"),
            obs(20, 0, client="x", tid="NEW")]
    assert check_client_metadata(late) == []


def test_m3_without_ids_drop_to_zero_with_new_replicas_is_possible_recreation():
    seq = [
        obs(1, 7, tid=None, replicas=(1, 2)),
        obs(2, 0, tid=None, replicas=(3, 4)),
        obs(3, 0, tid=None, replicas=(3, 4)),
    ]
    (f,) = check_client_metadata(seq)
    assert (f.rule, f.kind, f.severity) == ("M3", "possible_topic_recreation", "info")
    assert "possible re-creation" in f.detail


def test_m3_epoch_zero_throughout_with_new_replicas_is_a_reassignment_not_a_recreation():
    seq = [obs(1, 0, tid=None, replicas=(1, 2)), obs(2, 0, tid=None, replicas=(3, 4))]
    assert check_client_metadata(seq) == []


def test_m3_without_ids_drop_to_zero_same_replicas_is_a_regression():
    seq = [obs(1, 7, tid=None, replicas=(1, 2)), obs(2, 0, tid=None, replicas=(1, 2))]
    assert kinds(check_client_metadata(seq)) == ["client_epoch_regression"]
    seq = [obs(1, 7, tid=None, replicas=(1, 2)), obs(2, 3, tid=None, replicas=(3, 4))]  # not a drop to 0
    assert kinds(check_client_metadata(seq)) == ["client_epoch_regression"]


def test_m1_mixed_versions_compare_as_one_key_when_the_name_maps_to_one_id():
    """Issue 13 item 4: epoch 5 served via v12 (with the id), then epoch 4 via v9 (no id): a regression."""
    seq = [obs(1000, 5, tid="IDA"), obs(4000, 4, tid=None, broker="b2:9092")]
    (f,) = check_client_metadata(seq)
    assert (f.rule, f.kind, f.broker) == ("M1", "client_epoch_regression", "b2:9092")
    assert (f.numbers["served_epoch"], f.numbers["cached_epoch"], f.numbers["staleness_ms"]) == (4, 5, 3000)
    # and the other way round: the v9 response first, the id-keyed one later
    assert kinds(check_client_metadata([obs(1000, 5, tid=None), obs(2000, 4, tid="IDA")])) == [
        "client_epoch_regression"]


def test_m1_mixed_versions_stay_apart_when_the_name_had_two_ids():
    """A re-created topic (two ids for the name) keeps separate baselines: no-id responses are not judged
    against either incarnation (M3)."""
    seq = [obs(1, 7, tid="OLD"), obs(2, 0, tid="NEW"), obs(3, 1, tid=None), obs(4, 2, tid="NEW")]
    assert check_client_metadata(seq) == []


# --- M2 --------------------------------------------------------------------------------------------


def test_m2_stale_after_grace_with_staleness_from_first_sighting():
    seq = [
        obs(0, 4, client="a"),
        obs(1000, 5, client="a", broker="b1"),
        obs(5000, 4, client="b", broker="b2", corr=9),
    ]
    (f,) = check_broker_staleness(seq, grace_ms=1000)
    assert (f.rule, f.kind, f.severity) == ("M2", "broker_served_stale", "warning")
    assert f.broker == "b2" and f.client_id == "b"
    assert (
        f.numbers["served_epoch"] == 4
        and f.numbers["cached_epoch"] == 5
        and f.numbers["staleness_ms"] == 4000
    )


def test_m2_compares_a_response_without_ids_with_the_id_keyed_ones():
    """A v9 client (no topic ids) served epoch 5 a minute after v12 clients saw epoch 6: stale, as M1 already
    compares them; a name with two ids (re-created) keeps its own key."""
    seq = [obs(0, 6, client="new-java"), obs(60_000, 5, client="old-rdkafka", tid=None, broker="b2:9092")]
    (f,) = check_broker_staleness(seq, grace_ms=1000)
    assert (f.rule, f.client_id, f.broker, f.numbers["staleness_ms"]) == ("M2", "old-rdkafka", "b2:9092", 60_000)
    recreated = [obs(0, 6, tid="OLD"), obs(1, 0, tid="NEW"), obs(60_000, 5, tid=None, broker="b2:9092")]
    assert check_broker_staleness(recreated, grace_ms=1000) == []
    # a v9 client saw the old incarnation (no id) before the new id was first seen: the new topic's epoch 0 a
    # minute later is not stale against it
    old_v9 = [obs(0, 5, tid=None, replicas=(1, 2)), obs(60_000, 0, tid="NEW", replicas=(3, 4)),
              obs(70_000, 1, tid="NEW", replicas=(3, 4))]
    assert check_broker_staleness(old_v9, grace_ms=1000) == []


def test_m2_within_grace_or_at_exactly_grace_is_not_stale():
    assert check_broker_staleness([obs(1000, 5), obs(1500, 4)], grace_ms=1000) == []
    assert check_broker_staleness([obs(1000, 5), obs(2000, 4)], grace_ms=1000) == []
    assert len(check_broker_staleness([obs(1000, 5), obs(2001, 4)], grace_ms=1000)) == 1


def test_m2_staleness_counts_from_the_first_higher_epoch():
    (f,) = check_broker_staleness([obs(0, 5), obs(100, 6), obs(10_000, 4)], grace_ms=1000)
    assert f.numbers["staleness_ms"] == 10_000 and f.numbers["cached_epoch"] == 6


def test_m2_a_later_sighting_of_the_higher_epoch_does_not_restart_its_clock():
    (f,) = check_broker_staleness([obs(0, 5), obs(9500, 5), obs(10_000, 4)], grace_ms=1000)
    assert f.numbers["staleness_ms"] == 10_000


def test_m2_equal_epoch_minus_one_and_recreated_topic_are_fine():
    assert check_broker_staleness([obs(0, 5), obs(5000, 5), obs(6000, -1)], 1000) == []
    assert check_broker_staleness([obs(0, 9, tid="OLD"), obs(5000, 0, tid="NEW")], 1000) == []
    no_ids = [
        obs(0, 9, tid=None, replicas=(1, 2)),
        obs(5000, 0, tid=None, replicas=(5, 6)),
        obs(9000, 1, tid=None, replicas=(5, 6)),
    ]
    assert check_broker_staleness(no_ids, 1000) == []


def test_m2_cluster_metadata_token():
    seq = [obs(0, 5, token=10), obs(100, 5, token=12, part=1), obs(5000, 5, token=11, broker="old")]
    (f,) = check_broker_staleness(seq, 1000)
    assert f.broker == "old" and f.numbers["metadata_token"] == 11 and f.numbers["newer_metadata_token"] == 12
    assert f.numbers["staleness_ms"] == 4900


def test_m2_tokens_per_partition_with_the_cluster_frontier_match_the_whole_set():
    """What the Spark job relies on: one partition at a time plus the cluster-wide frontier gives the
    findings of the rule over every observation at once (tokens are cluster-wide)."""
    seq = [
        obs(0, 5, token=10, tid="A"),
        obs(0, 5, token=30, tid="B"),  # same time: the higher token is the earlier sighting
        obs(200, 5, token=20, tid="B", part=1),  # stale only within 1000 ms grace: no finding
        obs(3000, 5, token=25, tid="A", broker="lag"),  # token 30 was seen with topic B only
        obs(3000, 4, token=25, tid="B", broker="lag"),  # stale by epoch and token: one finding
        obs(4000, 5, token=30, tid="A"),
    ]
    whole = check_broker_staleness(seq, 1000)
    frontier = token_frontier((o.capture_ts, o.metadata_token, o.pointer()) for o in seq if o.metadata_token)
    assert [(t, tok) for t, tok, _ in frontier] == [(0, 30)]
    parts: dict = {}
    for o in seq:
        parts.setdefault((o.topic_id, o.partition), []).append(o)
    grouped = [f for group in parts.values() for f in check_broker_staleness(group, 1000, frontier)]
    assert sorted(f.id for f in grouped) == sorted(f.id for f in whole)
    assert sorted((f.topic_id, f.numbers["cached_epoch"], f.numbers.get("newer_metadata_token")) for f in whole) == [
        ("A", None, 30), ("B", 5, None)]
    a = next(f for f in whole if f.topic_id == "A")
    assert a.evidence[1] == seq[1].pointer() and a.numbers["staleness_ms"] == 3000


# --- rates -----------------------------------------------------------------------------------------


def test_stale_rates_per_broker_and_client():
    seq = [
        obs(0, 5, broker="b1", client="a"),
        obs(5000, 4, broker="b2", client="b"),
        obs(6000, 5, broker="b2", client="b"),
    ]
    findings = check_broker_staleness(seq, 1000)
    rows = stale_rates(seq, findings)
    by = {(r["dimension"], r["subject"]): r for r in rows}
    assert by[("broker", "b2")]["responses"] == 2 and by[("broker", "b2")]["stale_responses"] == 1
    assert by[("broker", "b2")]["stale_rate"] == 0.5 and by[("broker", "b1")]["stale_rate"] == 0.0
    assert by[("client", "b")]["stale_responses"] == 1
    assert rows[0]["event_date"] == dt.date(1970, 1, 1)
    assert stale_rates(seq, findings, by_date=False)[0]["event_date"] is None
    assert stale_rates([], []) == []


def _response(ts, epochs, *, tid="IDA", replicas=(1, 2, 3), broker="b1:9092", corr=None):
    """Every partition row of one captured response (same capture pointer)."""
    pos = next(_pos)
    return [
        MetadataObservation(capture_ts=ts, client_id="c1", broker=broker, topic="t", partition=i,
                            leader_epoch=e, topic_id=tid, replicas=tuple(replicas), correlation_id=corr,
                            source="caps/c.jsonl", position=pos)
        for i, e in enumerate(epochs)
    ]  # fmt: skip


def test_m3_topic_id_regression_is_one_finding_per_response_and_topic():
    seq = _response(1, [7, 7, 7], tid="OLD") + _response(2, [0, 0, 0], tid="NEW")
    stale = _response(5, [7, 6, 7], tid="OLD", broker="b3:9092", corr=12)
    (f,) = check_client_metadata(seq + stale)
    assert (f.rule, f.kind, f.topic, f.partition) == ("M3", "topic_id_regression", "t", None)
    assert f.broker == "b3:9092"
    assert f.numbers == {"staleness_ms": 3, "correlation_id": 12, "served_epoch": 7}
    assert f.evidence[0] == stale[0].pointer() and "partitions 0, 1, 2" in f.detail
    # a second stale response is a second finding
    again = _response(9, [7, 7, 7], tid="OLD", broker="b3:9092")
    assert kinds(check_client_metadata(seq + stale + again)) == ["topic_id_regression"] * 2


def test_m3_possible_recreation_is_one_finding_per_response_and_topic():
    seq = _response(1, [7, 5], tid=None, replicas=(1, 2)) + _response(2, [0, 0], tid=None, replicas=(3, 4))
    (f,) = check_client_metadata(seq)
    assert (f.kind, f.partition, f.numbers["cached_epoch"]) == ("possible_topic_recreation", None, 7)
    assert "partitions 0, 1" in f.detail
