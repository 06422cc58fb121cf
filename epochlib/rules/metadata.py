"""Stale metadata in captured MetadataResponses: M1, M2 (+ rates) and M3.

Observations are processed in capture-time order (a stable sort is applied, so ties keep input order).
Responses captured at the *same* millisecond are never "already seen" relative to each other: each is
compared only with what was seen strictly earlier.
"""

from __future__ import annotations

import datetime as _dt
from bisect import bisect_left, bisect_right
from collections import defaultdict
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from itertools import groupby
from typing import Any

from ._model import Finding, MetadataObservation

__all__ = ["check_broker_staleness", "check_client_metadata", "older_ids", "single_ids", "stale_rates",
           "token_frontier"]

#: One sighting of a cluster-metadata token: (capture time ms, token, capture pointer of the response).
TokenSighting = tuple[int, int, str]


def _key(o: MetadataObservation, single_ids: dict[str, str] | None = None) -> tuple:
    """Partition identity: by topic id (v10+), else by name — or by the one id the name maps to
    (``single_ids``: name -> id, for names that map to exactly one id)."""
    if o.topic_id is not None:
        return ("id", o.topic_id, o.partition)
    if single_ids and o.topic in single_ids:
        return ("id", single_ids[o.topic], o.partition)
    return ("name", o.topic, o.partition)


def _m2_key(o: MetadataObservation, single: Mapping[str, tuple[str, int]]) -> tuple:
    """M2's partition key (:func:`check_broker_staleness`): a no-id row takes its name's one id from that id's first
    sighting on."""
    if o.topic_id is None and o.topic in single and o.capture_ts >= single[o.topic][1]:
        return ("id", single[o.topic][0], o.partition)
    return _key(o)


def _subject(o: MetadataObservation) -> dict[str, Any]:
    return dict(
        event_ts=o.capture_ts,
        topic=o.topic,
        topic_id=o.topic_id,
        partition=o.partition,
        client_id=o.client_id,
        broker=o.broker,
    )


@dataclass
class _Baseline:
    highest: int = -1
    first_seen_ts: int = 0
    first_seen: MetadataObservation | None = None
    last: MetadataObservation | None = None
    epochs_first_seen: dict[int, tuple[int, MetadataObservation]] = field(default_factory=dict)


def _looks_recreated(base: _Baseline, o: MetadataObservation) -> bool:
    """Without topic ids: the epoch dropped to 0 and the replica set changed (both sets known)."""
    if o.topic_id is not None or o.epoch != 0 or base.highest <= 0 or base.last is None:
        return False
    old, new = set(base.last.replicas), set(o.replicas)
    return bool(old) and bool(new) and old != new


def _response_key(o: MetadataObservation) -> tuple:
    """One captured response's (client, response, topic): M3 reports once per topic of a response."""
    return (o.client_id, o.capture_ts, o.pointer(), o.broker, o.correlation_id, o.topic, o.topic_id)


def _partitions_text(parts: list[int]) -> str:
    ps = sorted(set(parts))
    return f"partition {ps[0]}" if len(ps) == 1 else f"partitions {', '.join(map(str, ps))}"


def _recreation_finding(items: list[tuple[MetadataObservation, _Baseline]], rule: str) -> Finding:
    """One ``possible_topic_recreation`` for every partition of one topic in one response."""
    o = items[0][0]
    parts = [x.partition for x, _ in items]
    cached = max(b.highest for _, b in items)
    changes = "; ".join(
        f"{x.partition}: epoch {b.highest} -> 0, replicas {sorted(b.last.replicas) if b.last else []} -> "
        f"{sorted(x.replicas)}"
        for x, b in items
    )
    evidence = [o.pointer()]
    for _, b in items:
        if b.last is not None and b.last.pointer() not in evidence:
            evidence.append(b.last.pointer())
    return Finding(
        rule=rule,
        kind="possible_topic_recreation",
        numbers={"served_epoch": 0, "cached_epoch": cached, "correlation_id": o.correlation_id},
        evidence=tuple(evidence),
        detail=(
            f"the leader epoch of {o.topic} ({_partitions_text(parts)}) dropped to 0 and the replica set changed "
            f"({changes}) in a response without topic ids: treated as a possible re-creation of the topic (new "
            "baseline), not as stale metadata."
        ),
        **{**_subject(o), "partition": None},
    )


def _id_regression_finding(
    o: MetadataObservation, newest: tuple[str, int, MetadataObservation], parts: list[MetadataObservation]
) -> Finding:
    """One ``topic_id_regression`` for one topic of one response (every partition row it served)."""
    epochs = [x.leader_epoch for x in parts if x.leader_epoch is not None]
    return Finding(
        rule="M3",
        kind="topic_id_regression",
        numbers={
            "staleness_ms": o.capture_ts - newest[1],
            "correlation_id": o.correlation_id,
            "served_epoch": max(epochs) if epochs else None,
        },
        evidence=(o.pointer(), newest[2].pointer()),
        detail=(
            f"broker {o.broker} served topic id {o.topic_id} for {o.topic} "
            f"({_partitions_text([x.partition for x in parts])}), older than id {newest[0]} the client had seen "
            f"{o.capture_ts - newest[1]} ms before (a deleted incarnation of the topic)."
        ),
        **{**_subject(o), "partition": None},
    )


def older_ids(firsts: Iterable[tuple[Any, str, str, int]]) -> set[tuple[str, str]]:
    """The (older id, newer id) pairs of topic ids M3 can order, from ``(client, topic, topic id, the client's first
    sighting of it)``: id I is older than J (same name) when I was first seen by any client before J was first seen
    by any client, *and* some client saw I first and J later. The second condition keeps a capture that starts
    after a re-creation (the new id first seen before a lagging broker serves the deleted one) from ordering the
    ids the wrong way round: such ids stay unordered, and serving either is no finding."""
    first: dict[str, int] = {}
    per_client: dict[tuple[Any, str], list[tuple[int, str]]] = defaultdict(list)
    for client, topic, tid, ts in firsts:
        first[tid] = min(first.get(tid, ts), ts)
        per_client[(client, topic)].append((ts, tid))
    out: set[tuple[str, str]] = set()
    for seen in per_client.values():
        seen.sort()
        for i, (ti, a) in enumerate(seen):
            for tj, b in seen[i + 1:]:
                if ti < tj and first[a] < first[b]:
                    out.add((a, b))
    return out


def _id_firsts(observations: Iterable[MetadataObservation]) -> list[tuple[Any, str, str, int]]:
    """(client, topic, topic id, the client's first sighting of the id) for :func:`older_ids`."""
    firsts: dict[tuple, int] = {}
    for o in observations:
        if o.topic_id is not None and o.topic is not None:
            k = (o.client, o.topic, o.topic_id)
            firsts[k] = min(firsts.get(k, o.capture_ts), o.capture_ts)
    return [(*k, ts) for k, ts in firsts.items()]


def single_ids(observations: Iterable[MetadataObservation]) -> dict[str, tuple[str, int]]:
    """Topic name -> (its one topic id, that id's first sighting) for the names the observations give exactly one
    id: M2 keys a response without ids (below v10) captured from then on by that id."""
    ids: dict[str, dict[str, int]] = {}
    for o in observations:
        if o.topic is not None and o.topic_id is not None:
            seen = ids.setdefault(o.topic, {})
            seen[o.topic_id] = min(seen.get(o.topic_id, o.capture_ts), o.capture_ts)
    return {name: next(iter(v.items())) for name, v in ids.items() if len(v) == 1}


def check_client_metadata(observations_sorted: Iterable[MetadataObservation],
                          older: Collection[tuple[str, str]] | None = None) -> list[Finding]:
    """M1 and M3 per client (any mix of clients may be passed; they are separated by ``client_id`` and, where the
    capture gives it, ``client_host``: one client instance keeps its own view, as Java's ``Metadata`` does).

    - M1 ``client_epoch_regression`` (warning): per (client, topic id, partition) a response whose leader
      epoch is below the highest the client has already seen; names the serving broker, the cached and
      served epochs and ``staleness_ms`` = how long ago the client first saw the newer epoch. Equal is
      fine; epoch -1 (below v7) is not comparable.
    - M3 ``topic_id_regression`` (error): a response serves a topic id for a name that is older than an id
      the client has already seen for that name. A new id starts a new baseline (re-created topic,
      KAFKA-12257: no finding). Ids are ordered cluster-wide (``older``: :func:`older_ids` over every
      observation; computed from those passed when None), not by the order one client happened to see them: a
      client that joined after a re-creation and is then served the deleted id by a lagging broker gets the
      finding on that broker's response, and none when the healthy broker serves the current id again.
    - M3 ``possible_topic_recreation`` (info): without ids, the epoch dropped to 0 together with a change
      of replica set: a new baseline, reported so the operator sees why no M1 was raised.
    - Both M3 kinds are topic-level: one finding per (client, response, topic) with ``partition`` None;
      the partitions of the response that showed it are listed in ``detail``.

    Judgement calls: a response without topic ids (below v10) is compared with the id-keyed ones (v10+)
    when the client's own responses map its topic name to exactly one id over the observations passed;
    with two or more ids (a re-created topic) it is keyed by name, separately, and each id stays its own
    baseline (M3); error codes do not exclude a partition (its epoch is still what the broker's cache held), only
    epoch -1 does; the all-zero Uuid counts as "no id"; M3 needs the topic name in the response.
    """
    out: list[Finding] = []
    obs = sorted(observations_sorted, key=lambda o: o.capture_ts)
    if older is None:
        older = older_ids(_id_firsts(obs))

    by_client: dict[Any, list[MetadataObservation]] = defaultdict(list)
    for o in obs:
        by_client[o.client].append(o)
    for _client, items in by_client.items():
        single = {name: tid for name, (tid, _first) in single_ids(items).items()}  # M1: from any time
        bases: dict[tuple, _Baseline] = {}
        ids: dict[str, list[tuple[str, int, MetadataObservation]]] = {}
        for _ts, group in groupby(items, key=lambda o: o.capture_ts):
            group = list(group)
            # judge the whole tie group against the state before it; M3 is collected per (response, topic)
            regressions: dict[tuple, list] = {}
            recreations: dict[tuple, list[tuple[MetadataObservation, _Baseline]]] = {}
            for o in group:
                if o.topic_id is not None and o.topic is not None:
                    newer = [x for x in ids.get(o.topic, []) if (o.topic_id, x[0]) in older]
                    if newer:
                        regressions.setdefault(_response_key(o), [o, newer[-1], []])[2].append(o)
                        continue
                if o.epoch < 0:
                    continue
                base = bases.get(_key(o, single))
                if base is None:
                    continue
                if _looks_recreated(base, o):
                    recreations.setdefault(_response_key(o), []).append((o, base))
                    continue
                if o.epoch < base.highest:
                    out.append(
                        Finding(
                            rule="M1",
                            kind="client_epoch_regression",
                            numbers={
                                "served_epoch": o.epoch,
                                "cached_epoch": base.highest,
                                "staleness_ms": o.capture_ts - base.first_seen_ts,
                                "correlation_id": o.correlation_id,
                            },
                            evidence=(o.pointer(),)
                            + ((base.first_seen.pointer(),) if base.first_seen else ()),
                            detail=(
                                f"client {o.client_text()} was served leader epoch {o.epoch} for "
                                f"{o.topic or o.topic_id}-{o.partition} by broker {o.broker}, but had seen epoch "
                                f"{base.highest} {o.capture_ts - base.first_seen_ts} ms earlier."
                            ),
                            **_subject(o),
                        )
                    )
            out.extend(_id_regression_finding(o, newest, parts) for o, newest, parts in regressions.values())
            out.extend(_recreation_finding(items, "M3") for items in recreations.values())
            # then fold the group into the state
            for o in group:
                if o.topic_id is not None and o.topic is not None:
                    seen = ids.setdefault(o.topic, [])
                    if not any(x[0] == o.topic_id for x in seen):
                        seen.append((o.topic_id, o.capture_ts, o))
                if o.epoch < 0:
                    continue
                k = _key(o, single)
                base = bases.get(k)
                if base is None or _looks_recreated(base, o):
                    base = bases[k] = _Baseline()
                if o.epoch > base.highest:
                    base.highest, base.first_seen_ts, base.first_seen = o.epoch, o.capture_ts, o
                base.last = o
    return out


def token_frontier(sightings: Iterable[TokenSighting]) -> list[TokenSighting]:
    """The part of a cluster's token history M2 needs: each sighting whose token is higher than every token
    sighted before it, in time order (so times rise and tokens strictly rise along the list).

    Sightings at the same time count highest token first; of equal (time, token) sightings the first given
    wins, so pass them in the order the observations are sorted. Every stale-token verdict of
    :func:`check_broker_staleness` depends only on this list: the newest token seen before a cut-off is the
    last entry before it, and the earliest sighting of any token above ``k`` is the first entry above ``k``.
    """
    ordered = sorted(sightings, key=lambda s: (s[0], -s[1]))
    out: list[TokenSighting] = []
    for s in ordered:
        if not out or s[1] > out[-1][1]:
            out.append(s)
    return out


def _newer_token(
    frontier: Sequence[TokenSighting], times: Sequence[int], toks: Sequence[int], token: int, cutoff: int
) -> tuple[TokenSighting, int] | None:
    """(earliest sighting of a token above ``token``, highest such token), both seen strictly before
    ``cutoff``; None when no higher token had been seen by then."""
    seen = bisect_left(times, cutoff)
    if not seen or toks[seen - 1] <= token:
        return None
    return frontier[bisect_right(toks, token)], toks[seen - 1]


def check_broker_staleness(
    observations_sorted: Iterable[MetadataObservation],
    grace_ms: int = 1000,
    frontier: Sequence[TokenSighting] | None = None,
    single: Mapping[str, tuple[str, int]] | None = None,
) -> list[Finding]:
    """M2 ``broker_served_stale`` (warning) per (topic id, partition) across all clients and brokers.

    A response serving epoch e at time t although a higher epoch had been observed (from any broker)
    before t - grace: ``staleness_ms`` = t - (first time any epoch above e was seen). Where captures carry
    a monotone cluster-metadata token, a token lower than one first seen before t - grace is stale the
    same way. Tokens are cluster-wide: they are compared with every token of the cluster, i.e. with
    ``frontier`` (:func:`token_frontier` of all the cluster's observations) when the caller passes only a
    part of them (the Spark job passes one partition at a time), else with the observations passed.

    A response without topic ids (below v10) captured at or after the first sighting of the one id its topic
    name has (``single``: :func:`single_ids` of every observation, computed from those passed when None) is
    keyed by that id, so a v9 client served an epoch older than one a v10+ client saw is compared; earlier
    ones (perhaps a deleted incarnation) and names with two or more ids (a re-created topic) keep the name.

    Judgement calls: "before t - grace" is strict (staleness must exceed the grace); one finding per stale
    (response, partition) — the epoch comparison wins, the token one is reported only when the epoch does
    not show staleness; without topic ids a drop to epoch 0 with a changed replica set resets the baseline
    (possible re-creation, reported by M3 in :func:`check_client_metadata`, not here); epoch -1 is not
    compared (the token still is).
    """
    out: list[Finding] = []
    obs = sorted(observations_sorted, key=lambda o: o.capture_ts)
    if frontier is None:
        frontier = token_frontier(
            (o.capture_ts, o.metadata_token, o.pointer()) for o in obs if o.metadata_token is not None
        )
    f_times = [x[0] for x in frontier]
    f_toks = [x[1] for x in frontier]
    if single is None:
        single = single_ids(obs)
    bases: dict[tuple, _Baseline] = {}
    for o in obs:
        t = o.capture_ts
        k = _m2_key(o, single)
        base = bases.get(k)
        if base is not None and o.epoch >= 0 and _looks_recreated(base, o):
            base = bases[k] = _Baseline()
        finding = None
        if base is not None and o.epoch >= 0:
            older = [
                (ts, ep, src)
                for ep, (ts, src) in base.epochs_first_seen.items()
                if ep > o.epoch and ts < t - grace_ms
            ]
            if older:
                ts0, ep0, src0 = min(older, key=lambda x: (x[0], -x[1]))
                finding = Finding(
                    rule="M2",
                    kind="broker_served_stale",
                    numbers={
                        "served_epoch": o.epoch,
                        "cached_epoch": max(x[1] for x in older),
                        "staleness_ms": t - ts0,
                        "correlation_id": o.correlation_id,
                        "metadata_token": o.metadata_token,
                    },
                    evidence=(o.pointer(), src0.pointer()),
                    detail=(
                        f"broker {o.broker} served leader epoch {o.epoch} for {o.topic or o.topic_id}-{o.partition} "
                        f"to client {o.client_text()} {t - ts0} ms after epoch {ep0} had been observed "
                        f"(grace {grace_ms} ms)."
                    ),
                    **_subject(o),
                )
        if finding is None and o.metadata_token is not None:
            hit = _newer_token(frontier, f_times, f_toks, o.metadata_token, t - grace_ms)
            if hit is not None:
                (ts0, tok0, ptr0), newest = hit
                finding = Finding(
                    rule="M2",
                    kind="broker_served_stale",
                    numbers={
                        "served_epoch": o.leader_epoch,
                        "cached_epoch": None,
                        "staleness_ms": t - ts0,
                        "correlation_id": o.correlation_id,
                        "metadata_token": o.metadata_token,
                        "newer_metadata_token": newest,
                    },
                    evidence=(o.pointer(), ptr0),
                    detail=(
                        f"broker {o.broker} served cluster-metadata token {o.metadata_token} for "
                        f"{o.topic or o.topic_id}-{o.partition} to client {o.client_text()} {t - ts0} ms after token "
                        f"{tok0} had been observed (grace {grace_ms} ms)."
                    ),
                    **_subject(o),
                )
        if finding is not None:
            out.append(finding)
        # fold in
        if o.epoch >= 0:
            if base is None:
                base = bases[k] = _Baseline()
            base.epochs_first_seen.setdefault(o.epoch, (t, o))
            base.highest = max(base.highest, o.epoch)
            base.last = o
    return out


def _utc_date(ms: int) -> _dt.date:
    return (_dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)).date()


def stale_rates(
    observations: Iterable[MetadataObservation], findings: Iterable[Finding], by_date: bool = True
) -> list[dict[str, Any]]:
    """Per broker and per client: Metadata responses observed, responses with at least one M2 finding,
    and their ratio — rows shaped like the ``stale_metadata_rates`` table: ``event_date`` (UTC date of
    the capture, or None when ``by_date`` is False), ``dimension`` (broker|client), ``subject``,
    ``responses``, ``stale_responses``, ``stale_rate``.

    A response is identified by its capture pointer (file + line/frame), so a response with many
    partitions counts once; an M2 finding is linked to its response by its first evidence pointer.
    Rows are sorted by (event_date, dimension, subject)."""
    stale_ptrs = {f.evidence[0] for f in findings if f.rule == "M2" and f.evidence}
    responses: dict[tuple, set[str]] = defaultdict(set)
    stale: dict[tuple, set[str]] = defaultdict(set)
    for o in observations:
        ptr = o.pointer()
        d = _utc_date(o.capture_ts) if by_date else None
        for dim, subj in (("broker", o.broker), ("client", o.client_id)):
            k = (d, dim, subj)
            responses[k].add(ptr)
            if ptr in stale_ptrs:
                stale[k].add(ptr)
    rows = []
    for k in sorted(responses, key=lambda k: (str(k[0]), k[1], str(k[2]))):
        n, s = len(responses[k]), len(stale.get(k, ()))
        rows.append(
            {
                "event_date": k[0],
                "dimension": k[1],
                "subject": k[2],
                "responses": n,
                "stale_responses": s,
                "stale_rate": s / n if n else 0.0,
            }
        )
    return rows
