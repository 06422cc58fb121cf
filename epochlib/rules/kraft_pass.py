"""The metadata-log passes over observations, columnar: the log's topic ids (M3 with the log), M2 from the
log and what it judged, and the metadata lag per response — numpy over the Arrow columns.

Why: these passes read every observation (10^6 rows for a day of a busy cluster's captures), and building a
:class:`~epochlib.rules.MetadataObservation` per row costs more than the rules themselves (8 µs a row).
Each function here gives exactly what its reference in :mod:`.kraft` gives over the same rows as
``MetadataObservation.from_row`` values (``tests/test_rules_kraft_pass.py`` compares them on random logs and
observations):

==========================  ==================================================  ===============================
here                        the reference                                       what becomes Python objects
==========================  ==================================================  ===============================
:func:`fill_log_topic_ids`  :func:`~.kraft.with_log_topic_ids`                  nothing (a loop per topic name)
:func:`judged_rows`         :func:`~.kraft.judge` (per row)                     rows of irregular partitions
:func:`logged_staleness`    :func:`~.kraft.check_broker_staleness_logged`       rows the log finds stale
:func:`row_lags`            :func:`~.kraft.response_lags` (per row; the max     rows of irregular partitions
                            per response is an aggregation)
:func:`metadata_offsets`    :func:`~.kraft.check_metadata_offsets` (M5)         three rows per response with a
                                                                                retained epoch, and irregular ones
==========================  ==================================================  ===============================

How: :class:`SpanIndex` flattens the view's spans into arrays, one segment per (topic id, partition). A
segment is *regular* when its epochs strictly increase and the start times of all but its first span are
known and never go down (what a replayed KRaft log gives: leader epochs only grow, and records are appended
in time order). For a regular segment, "the first span with a higher epoch that began before t − grace" is
the span right after the observation's epoch (a ``searchsorted``), or none. Rows of irregular segments go
through the reference function, so the answer never depends on that assumption.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._model import Finding, MetadataObservation, norm_topic_ids, observations_from_arrow
from .kraft import EpochSpan, LogView, Served, _span, check_broker_staleness_logged, judge, scan_served

__all__ = ["SpanIndex", "fill_log_topic_ids", "judged_rows", "logged_staleness", "metadata_offsets", "row_lags"]

_BIG = np.iinfo(np.int64).max

_SHIFT = np.int64(1 << 32)  # key * 2^32 + epoch: epochs are int32


@dataclass(frozen=True)
class SpanIndex:
    """A :class:`~epochlib.rules.kraft.LogView`'s spans as flat arrays (built once per run, shipped to the
    executors with the grouped functions)."""

    view: LogView
    keys: dict[tuple[str, int], int]  # (topic id, partition) -> segment
    off: np.ndarray  # segment k is [off[k], off[k + 1])
    keyed_epoch: np.ndarray  # k * 2^32 + epoch, sorted (within a regular segment: the spans' order)
    start_ts: np.ndarray  # of the span at each position (regular segments; unknown -> int64 max)
    first_epoch: np.ndarray  # per segment: the epoch of its first span
    regular: np.ndarray  # per segment
    span_start: np.ndarray  # metadata offset where the span at each position began (-1: before the history)
    span_end: np.ndarray  # where it ended (int64 max: open)
    seg_keys: tuple[tuple[str, int], ...]  # segment -> (topic id, partition)

    @classmethod
    def of(cls, view: LogView) -> SpanIndex:
        keys: dict[tuple[str, int], int] = {}
        off, keyed, starts, first, regular, s_start, s_end = [0], [], [], [], [], [], []
        for key, spans in view.spans.items():
            if not spans:
                continue  # no epoch retained: spans_of gives [] -> "not judged", as a missing key
            k = len(keys)
            keys[key] = k
            epochs = [s.epoch for s in spans]
            ts = [s.start_ts for s in spans]
            ok = all(a < b for a, b in zip(epochs, epochs[1:], strict=False)) and all(t is not None for t in ts[1:]) \
                and all(a <= b for a, b in zip(ts[1:], ts[2:], strict=False))
            order = range(len(spans)) if ok else sorted(range(len(spans)), key=lambda i: epochs[i])
            keyed += [k * int(_SHIFT) + epochs[i] for i in order]
            starts += [_BIG if ts[i] is None else ts[i] for i in order]
            s_start += [spans[i].start for i in order]
            s_end += [_BIG if spans[i].end is None else spans[i].end for i in order]
            first.append(epochs[0])
            regular.append(ok)
            off.append(off[-1] + len(spans))
        return cls(view, keys, np.array(off, np.int64), np.array(keyed, np.int64), np.array(starts, np.int64),
                   np.array(first, np.int64), np.array(regular, bool), np.array(s_start, np.int64),
                   np.array(s_end, np.int64), tuple(keys))


def _covers(view: LogView, ts: np.ndarray) -> np.ndarray:
    """:meth:`LogView.covers` per row."""
    if view.first_ts is None or view.last_ts is None:
        return np.zeros(len(ts), bool)
    return (ts >= view.first_ts) & (ts <= view.last_ts)


def _ids_at(view: LogView, topic: pa.Array, ts: np.ndarray, rows: np.ndarray) -> dict[int, str]:
    """:meth:`LogView.topic_id_at` for the ``rows`` (indices) of ``topic``/``ts``: row -> id where it gives one."""
    out: dict[int, str] = {}
    if not len(rows):
        return out
    names = pc.take(topic, pa.array(rows)).to_pylist()
    by_name: dict[str, list[int]] = {}
    for i, name in zip(rows.tolist(), names, strict=True):
        by_name.setdefault(name or "", []).append(i)
    for name, idx in by_name.items():
        incs = view.incarnations.get(name, ())
        if not incs:
            continue
        idx_a = np.array(idx, np.int64)
        t = ts[idx_a]
        best = np.full(len(idx_a), -1, np.int64)
        for j, (born, died, _tid) in enumerate(incs):  # the last matching incarnation wins, as topic_id_at
            m = (born <= t) & ((t < died) if died is not None else True)
            best[m] = j
        for i, j in zip(idx_a.tolist(), best.tolist(), strict=True):
            if j >= 0:
                out[i] = incs[j][2]
    return out


def _columns(table: pa.Table | pa.RecordBatch) -> tuple[np.ndarray, np.ndarray, pa.Array, pa.Array, np.ndarray]:
    """capture time, epoch (-1 absent), normalised topic id, topic, partition — as ``from_row`` reads them."""
    names = table.schema.names
    cap = table.column("capture_ts")
    if "event_ts" in names:
        cap = pc.coalesce(cap, table.column("event_ts"))
    ts = pc.fill_null(cap, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    ep = pc.fill_null(table.column("leader_epoch"), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    ep[ep < 0] = -1
    tid = norm_topic_ids(table.column("topic_id"))
    part = pc.fill_null(table.column("partition"), -1).to_numpy(zero_copy_only=False).astype(np.int64)
    topic = table.column("topic")
    if isinstance(topic, pa.ChunkedArray):
        topic = topic.combine_chunks()
    return ts, ep, tid, topic, part


def fill_log_topic_ids(view: LogView, table: pa.Table | pa.RecordBatch) -> pa.Array:
    """The ``topic_id`` :func:`~epochlib.rules.kraft.with_log_topic_ids` gives each row: the row's own
    (normalised) id, else — for a named topic whose capture time the log covers — the id the log says the
    name had then (null when it says none)."""
    ts, _, tid, topic, _ = _columns(table)
    want = (pc.is_null(tid).to_numpy(zero_copy_only=False) & pc.is_valid(topic).to_numpy(zero_copy_only=False)
            & _covers(view, ts))
    rows = np.nonzero(want)[0]
    if not len(rows):
        return tid
    found = _ids_at(view, topic, ts, rows)
    if not found:
        return tid
    ids = tid.to_pylist()
    for i, t in found.items():
        ids[i] = t
    return pa.array(ids, pa.string())


def _segments(index: SpanIndex, ts: np.ndarray, tid: pa.Array, topic: pa.Array, part: np.ndarray,
              rows: np.ndarray) -> np.ndarray:
    """The segment of each row in ``rows`` (-1: the log has no spans for it), resolving a missing id by the
    topic name at the capture time as :meth:`LogView.spans_of` does."""
    seg = np.full(len(ts), -1, np.int64)
    if not len(rows) or not index.keys:
        return seg
    codes, values = _codes(pc.take(tid, pa.array(rows)))
    missing = rows[codes < 0]
    if len(missing):
        by_name = _ids_at(index.view, topic, ts, missing)
        if by_name:
            pos = {v: i for i, v in enumerate(values)}
            where = {r: j for j, r in enumerate(rows.tolist())}
            for r, t in by_name.items():
                if t not in pos:
                    pos[t] = len(values)
                    values.append(t)
                codes[where[r]] = pos[t]
    pair = codes * _SHIFT + (part[rows] & 0xFFFFFFFF)
    uniq, inv = np.unique(pair, return_inverse=True)
    seg_of = np.array([index.keys.get((values[int(u // _SHIFT)], int(u % _SHIFT)), -1) if u >= 0 else -1
                       for u in uniq.tolist()], np.int64)
    seg[rows] = seg_of[inv]
    return seg


def _judge_arrays(index: SpanIndex, table: pa.Table | pa.RecordBatch, grace_ms: int
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """Per row: judged, newer (bool), how long before the capture the newer span began (0 without one), and
    which rows need the reference (irregular segments; their ``judged``/``newer`` are left False)."""
    ts, ep, tid, topic, part = _columns(table)
    n = len(ts)
    cand = np.nonzero((ep >= 0) & _covers(index.view, ts))[0]
    seg = _segments(index, ts, tid, topic, part, cand)
    has = seg >= 0
    judged = np.zeros(n, bool)
    newer = np.zeros(n, bool)
    age = np.zeros(n, np.int64)
    irregular = np.zeros(n, bool)
    if not has.any():
        return judged, newer, age, irregular
    s = np.where(has, seg, 0)
    irregular = has & ~index.regular[s]
    ok = has & index.regular[s] & (ep >= index.first_epoch[s])
    judged = ok
    # the first span with a higher epoch (regular: epochs ascend in list order) is the one right after
    # the observation's epoch; with start times ascending, it began before t - grace or none did
    p = np.searchsorted(index.keyed_epoch, s * _SHIFT + ep, side="right")
    inside = ok & (p < index.off[s + 1])
    pc_ = np.where(inside, p, 0)
    start = index.start_ts[pc_]
    newer = inside & (start < ts - grace_ms)
    age = np.where(newer, ts - start, 0)
    return judged, newer, age, irregular


def _observations(table: pa.Table | pa.RecordBatch, rows: np.ndarray) -> list[MetadataObservation]:
    if not len(rows):
        return []
    return observations_from_arrow(table.take(pa.array(rows)))


def judged_rows(index: SpanIndex, table: pa.Table | pa.RecordBatch, grace_ms: int) -> np.ndarray:
    """Per row: does the log judge it (:func:`~epochlib.rules.kraft.judge` gives spans)?"""
    judged, _, _, irregular = _judge_arrays(index, table, grace_ms)
    rows = np.nonzero(irregular)[0]
    for i, o in zip(rows.tolist(), _observations(table, rows), strict=True):
        judged[i] = judge(o, index.view, grace_ms)[0] is not None
    return judged


def logged_staleness(index: SpanIndex, table: pa.Table | pa.RecordBatch, grace_ms: int) -> list[Finding]:
    """The findings of :func:`~epochlib.rules.kraft.check_broker_staleness_logged` over the rows: only
    rows the log finds stale (or that sit in irregular segments) become observations for the rule."""
    _, newer, _, irregular = _judge_arrays(index, table, grace_ms)
    rows = np.nonzero(newer | irregular)[0]
    found, _ = check_broker_staleness_logged(_observations(table, rows), index.view, grace_ms)
    return found


def row_lags(index: SpanIndex, table: pa.Table | pa.RecordBatch, grace_ms: int) -> tuple[np.ndarray, np.ndarray]:
    """Per row: judged, and its lag (capture time − the start of the first higher epoch committed before
    capture time − grace, at least 0; 0 when none). A response's lag in
    :func:`~epochlib.rules.kraft.response_lags` is the max over its judged rows, for responses with one."""
    judged, _, age, irregular = _judge_arrays(index, table, grace_ms)
    lag = np.maximum(age, 0)
    rows = np.nonzero(irregular)[0]
    for i, o in zip(rows.tolist(), _observations(table, rows), strict=True):
        spans, nw = judge(o, index.view, grace_ms)
        judged[i] = spans is not None
        lag[i] = max(0, o.capture_ts - nw.start_ts) if nw is not None and nw.start_ts is not None else 0
    return judged, lag


def _codes(a: pa.Array | pa.ChunkedArray) -> tuple[np.ndarray, list]:
    """Dictionary codes of a string column (-1 for null) and the dictionary."""
    enc = pc.dictionary_encode(a)
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    return pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64), enc.dictionary.to_pylist()


def metadata_offsets(index: SpanIndex, table: pa.Table | pa.RecordBatch, *, kraft: bool = True) -> list[Finding]:
    """M5 over the rows, as :func:`~epochlib.rules.kraft.check_metadata_offsets`: the served interval of each
    response (the latest start and earliest end of the epochs it served) is found with array lookups and
    per-response reductions; the walk over the responses (:func:`~epochlib.rules.kraft.scan_served`) is
    the rule's own. A response with no retained epoch is left out of the walk: it cannot be a finding, and
    whether it sits between two others does not change when the earlier ones count as seen."""
    n = table.num_rows
    if n == 0:
        return []
    ts, ep, tid, topic, part = _columns(table)
    seg = _segments(index, ts, tid, topic, part, np.nonzero(ep >= 0)[0])
    has = seg >= 0
    if not has.any():  # no partition the log retains an epoch of (and then the index may be empty)
        return []
    s = np.where(has, seg, 0)
    regular = has & index.regular[s]
    key = s * _SHIFT + ep
    q = np.minimum(np.searchsorted(index.keyed_epoch, key, side="left"), len(index.keyed_epoch) - 1)
    hit = regular & (q < index.off[s + 1]) & (index.keyed_epoch[q] == key)
    start = np.where(hit, index.span_start[q], 0)
    end = np.where(hit, index.span_end[q], _BIG)
    irregular_spans: dict[int, EpochSpan] = {}
    irregular = np.nonzero(has & ~regular)[0]
    for i, o in zip(irregular.tolist(), _observations(table, irregular), strict=True):
        sp = _span(index.view.spans_of(o.topic_id, o.topic, o.partition, o.capture_ts) or [], o.epoch)
        if sp is not None:
            irregular_spans[i] = sp
            hit[i], start[i], end[i] = True, sp.start, _BIG if sp.end is None else sp.end
    if not hit.any():
        return []

    # responses: (client, source, position, capture time), each row's first appearance breaking no ties
    cli, _ = _codes(table.column("client_id"))
    src, src_values = _codes(table.column("source"))
    pos_col = table.column("position")
    pos_null = pc.is_null(pos_col).to_numpy(zero_copy_only=False)
    pos = pc.fill_null(pos_col, 0).to_numpy(zero_copy_only=False).astype(np.int64)
    idx = np.arange(n)
    order = np.lexsort((idx, ts, pos, pos_null, src, cli))
    k_cli, k_src, k_pn, k_pos, k_ts = cli[order], src[order], pos_null[order], pos[order], ts[order]
    new = np.ones(n, bool)
    new[1:] = ((k_cli[1:] != k_cli[:-1]) | (k_src[1:] != k_src[:-1]) | (k_pn[1:] != k_pn[:-1])
               | (k_pos[1:] != k_pos[:-1]) | (k_ts[1:] != k_ts[:-1]))
    bounds = np.nonzero(new)[0]
    group = np.cumsum(new) - 1
    first_row = order[bounds]  # o0 of each response (the sort keeps input order inside a response)
    h = hit[order]
    st_ = np.where(h, start[order], np.iinfo(np.int64).min)
    g_start = np.maximum.reduceat(st_, bounds)
    at_start = h & (st_ == g_start[group])
    start_row = np.minimum.reduceat(np.where(at_start, order, _BIG), bounds)
    en = np.where(h, end[order], _BIG)
    g_end = np.minimum.reduceat(en, bounds)
    at_end = h & (en == g_end[group]) & (en != _BIG)
    end_row = np.minimum.reduceat(np.where(at_end, order, _BIG), bounds)
    any_hit = np.logical_or.reduceat(h, bounds)

    # the walk's order: capture time, source ("" for none), position (0 for none), first appearance
    rank = {v: i for i, v in enumerate(sorted({"", *(v for v in src_values if v is not None)}))}
    src_rank = np.array([rank[v if v is not None else ""] for v in src_values] + [rank[""]], np.int64)
    g_src = src_rank[np.where(k_src[bounds] >= 0, k_src[bounds], len(src_values))]
    walk = [g for g in np.lexsort((first_row, k_pos[bounds], g_src, k_ts[bounds])).tolist() if any_hit[g]]
    need = sorted({int(r) for g in walk for r in (first_row[g], start_row[g], end_row[g]) if r != _BIG})
    objs = dict(zip(need, _observations(table, np.array(need, np.int64)), strict=True))

    def span_of(row: int) -> EpochSpan:
        if row in irregular_spans:
            return irregular_spans[row]
        k = int(s[row])
        return index.view.spans[index.seg_keys[k]][int(q[row] - index.off[k])]

    def served(g: int) -> tuple:
        sr, er = int(start_row[g]), int(end_row[g])
        has_end = er != _BIG
        return objs[int(first_row[g])], Served(
            int(g_start[g]), int(g_end[g]) if has_end else None, span_of(sr), span_of(er) if has_end else None,
            objs[sr], objs[er] if has_end else None)

    return scan_served((served(g) for g in walk), kraft=kraft)
