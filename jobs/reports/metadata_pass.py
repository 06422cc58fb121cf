"""The stale-metadata findings of a run in one Python task, when its observations fit one.

:func:`stale_metadata.metadata_findings` and :func:`kraft.metadata_findings` build the M1/M2/M3/M5 findings
as ~25 Spark stages over the cached observations: two window pre-filters, the id -> name join, the token
frontier, three grouped rule calls, the log's M2 and the anti-join of the observations it judges, and the
lag pass of the rates. Each stage turns the cached rows into rows or Arrow again; at 1 M observations that
is ~30 CPU-s, while the rules themselves take ~1. Here every observation goes to one ``mapInArrow`` task
(the observations' partitions coalesced into one, no shuffle) and the same steps run there, columnar (numpy over the whole table) where Spark ran
them and through the same rule functions, on the same groups of rows, where Spark called Python:

- **M1 + M3**: groups ``(client_id, topic_key)``, ``topic_key`` = the topic, else the smallest name other
  rows give the id, else the id; a group goes to :func:`~epochlib.rules.check_client_metadata` when one of
  its epochs is below one the client saw strictly earlier for the partition, or it holds two ids;
- **M2**: groups ``(partition_key, partition)``; a group goes to
  :func:`~epochlib.rules.check_broker_staleness` when one of its epochs is below one seen before
  ``t - grace`` or (with a token frontier) it carries a token; the frontier is the first sighting of each
  token in (time, source, position, partition) order;
- with a metadata log: M5 per client, M2 timed from the log over every row, the capture-only M2 findings
  whose observation the log judges dropped, and per response the largest lag of its judged rows.

The outcome equals the Spark path's (``tests/test_metadata_pass.py`` runs both over the same rows). A run
takes this path when its observations number at most :data:`MAX_ROWS` (one Python worker holds them all) and
every row has a capture time; otherwise the Spark stages run.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from epochlib.rules import capture_pointer
from epochlib.rules.kraft import observation_key
from epochlib.rules.kraft_pass import SpanIndex, judged_rows, logged_staleness, metadata_offsets
from epochlib.rules.metadata import token_frontier

from . import _frames as fr
from .kraft import _M5_COLUMNS, _spark_schema, response_lags_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["MAX_ROWS", "MetadataPass", "metadata_pass", "pass_table"]

#: The most observations one task takes: its Python worker holds them as one Arrow table (~250 bytes a row) and
#: peaks at ~1.2 KB a row (1.1 GB for the 1 M observations of the 10 M-commit bench preset).
MAX_ROWS = 2_000_000

#: What the task returns: findings in :data:`~jobs.reports._frames.FINDINGS_ARROW` (the lag columns null), and
#: one row per response with a row the log judges (``rule`` null; ``broker``, ``client_id`` and ``lag_*`` set).
PASS_ARROW = pa.schema([*fr.FINDINGS_ARROW, pa.field("lag_source", pa.string()), pa.field("lag_position", pa.int64()),
                        pa.field("lag_capture_ts", pa.int64()), pa.field("lag_ms", pa.int64())])
_LAG_COLUMNS = PASS_ARROW.names[len(fr.FINDINGS_ARROW):]


# ---------------------------------------------------------------------------------------------- columns


def _codes(*cols: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """One dense int64 code per row for the tuple of ``cols`` (null is a value of its own, as in Spark's
    ``groupBy``)."""
    out: np.ndarray | None = None
    for col in cols:
        enc = pc.dictionary_encode(col)
        if isinstance(enc, pa.ChunkedArray):
            enc = enc.combine_chunks()
        k = pc.fill_null(enc.indices, -1).to_numpy(zero_copy_only=False).astype(np.int64) + 1
        if out is None:
            out = k
        else:
            out = np.unique(out * (len(enc.dictionary) + 1) + k, return_inverse=True)[1].astype(np.int64)
    assert out is not None
    return out


def _ints(col: pa.ChunkedArray, null: int) -> np.ndarray:
    return pc.fill_null(col, null).to_numpy(zero_copy_only=False).astype(np.int64)


def _valid_epochs(table: pa.Table) -> np.ndarray:
    """The leader epoch where it is one (>= 0), else -1 (Spark's ``when(leader_epoch >= 0, ...)``: null)."""
    ep = _ints(table.column("leader_epoch"), -1)
    return np.where(ep >= 0, ep, -1)


_SHIFT = np.int64(1) << np.int64(33)  # above every epoch + 1 (epochs are int32)


def _running_max(group: np.ndarray, values: np.ndarray) -> np.ndarray:
    """Per position of rows sorted by ``group``: the max of ``values`` (>= -1) over the group's rows so far."""
    shifted = np.maximum.accumulate(group * _SHIFT + (values + 1))
    return shifted - group * _SHIFT - 1


def _below_earlier(group: np.ndarray, ts: np.ndarray, ep: np.ndarray) -> np.ndarray:
    """Per row: its epoch is below the highest epoch of its group's rows with a strictly earlier time."""
    order = np.lexsort((ts, group))
    g, t, e = group[order], ts[order], ep[order]
    n = len(g)
    new_run = np.ones(n, bool)
    new_run[1:] = (g[1:] != g[:-1]) | (t[1:] != t[:-1])
    starts = np.nonzero(new_run)[0]
    run_of = np.cumsum(new_run) - 1
    run_g = g[starts]
    run_max = _running_max(run_g, np.maximum.reduceat(e, starts))  # through each run, inclusive
    before = np.full(len(starts), -1, np.int64)
    same = run_g[1:] == run_g[:-1]
    before[1:] = np.where(same, run_max[:-1], -1)
    prior = before[run_of]
    out = np.zeros(n, bool)
    out[order] = (e >= 0) & (prior >= 0) & (e < prior)
    return out


def _below_before_cutoff(group: np.ndarray, ts: np.ndarray, ep: np.ndarray, grace_ms: int) -> np.ndarray:
    """Per row: its epoch is below the highest epoch of its group's rows at or before ``t - grace - 1`` (every row
    of the group when ``grace`` is negative: the window then looks ahead)."""
    order = np.lexsort((ts, group))
    g, t, e = group[order], ts[order], ep[order]
    if grace_ms < 0:
        first = np.ones(len(g), bool)
        first[1:] = g[1:] != g[:-1]
        starts = np.nonzero(first)[0]
        top = np.maximum.reduceat(e, starts)[np.cumsum(first) - 1]
        out = np.zeros(len(g), bool)
        out[order] = (e >= 0) & (e < top)
        return out
    # times as ranks among the distinct times (a key of group and rank cannot overflow, whatever the times)
    times = np.unique(t)
    width = len(times) + 1
    if not len(times):
        return np.zeros(0, bool)
    grace = min(grace_ms, int(times[-1] - times[0]) + 1)  # a cut-off below every time, without overflow
    key = g * width + np.searchsorted(times, t) + 1
    cut = g * width + np.searchsorted(times, t - (grace + 1), side="right")
    last = np.searchsorted(key, cut, side="right") - 1  # the group's last row at or before the cut-off
    upto = _running_max(g, e)
    ok = (last >= 0) & (g[np.maximum(last, 0)] == g)
    prior = np.where(ok, upto[np.maximum(last, 0)], -1)
    out = np.zeros(len(g), bool)
    out[order] = (e >= 0) & (prior >= 0) & (e < prior)
    return out


def _groups(table: pa.Table, codes: np.ndarray, keep: np.ndarray | None = None) -> Iterator[pa.Table]:
    """The rows of each group of ``table`` (by ``codes``) that ``keep`` (per group code; all when None) marks:
    one ``take`` in group order, then zero-copy slices."""
    rows = np.arange(len(codes)) if keep is None else np.nonzero(keep[codes])[0]
    if not len(rows):
        return
    rows = rows[np.argsort(codes[rows], kind="stable")]
    c = codes[rows]
    bounds = [0, *(np.nonzero(c[1:] != c[:-1])[0] + 1).tolist(), len(rows)]
    grouped = table.take(pa.array(rows))
    for a, b in zip(bounds[:-1], bounds[1:], strict=True):
        yield grouped.slice(a, b - a)


def _any_per_group(codes: np.ndarray, flags: np.ndarray) -> np.ndarray:
    out = np.zeros(int(codes.max()) + 1 if len(codes) else 0, bool)
    out[codes[flags]] = True
    return out


# ---------------------------------------------------------------------------------------------- the pass


def _topic_key(table: pa.Table) -> pa.ChunkedArray:
    """The topic, else the smallest name another row gives the row's id, else the id."""
    named = table.filter(pc.and_(pc.is_valid(table.column("tid")), pc.is_valid(table.column("topic"))))
    names = named.group_by("tid", use_threads=False).aggregate([("topic", "min")])
    ids = pc.dictionary_encode(table.column("tid")).combine_chunks()
    per_id = pc.take(names.column("topic_min"), pc.index_in(ids.dictionary, value_set=names.column("tid")))
    return pc.coalesce(table.column("topic"), pc.take(per_id, ids.indices), table.column("tid"))


def _frontier(table: pa.Table) -> list[tuple[int, int, str]]:
    """:func:`stale_metadata.token_frontier_of`: the first sighting of each token (time, source, position,
    partition order), reduced to the rule's frontier."""
    rows = table.filter(pc.is_valid(table.column("metadata_token")))
    if rows.num_rows == 0:
        return []
    keys = pa.table({
        "ts": rows.column("capture_ts"), "src": pc.fill_null(rows.column("source"), ""),
        "pos": pc.fill_null(rows.column("position"), 0), "partition": rows.column("partition")})
    keys = keys.append_column("src_raw", rows.column("source")).append_column("pos_raw", rows.column("position"))
    # Spark's min over the struct (ts, source or "", position or 0, partition, source, position): nulls first
    order = pc.sort_indices(keys, sort_keys=[(c, "ascending") for c in keys.column_names],
                            null_placement="at_start").to_numpy()
    tok = rows.column("metadata_token").to_numpy()[order]
    _, first = np.unique(tok, return_index=True)
    pick = rows.take(pa.array(order[first]))
    return token_frontier((ts, token, capture_pointer(src, pos)) for ts, token, src, pos in zip(
        pick.column("capture_ts").to_pylist(), pick.column("metadata_token").to_pylist(),
        pick.column("source").to_pylist(), pick.column("position").to_pylist(), strict=True))


def _capture_findings(table: pa.Table, grace_ms: int) -> list[Any]:
    """M1, M2 and M3 from the captures alone (what :func:`stale_metadata.metadata_findings` finds)."""
    from . import stale_metadata as sm

    cols = list(sm.OBS_COLUMNS)
    ts = table.column("capture_ts").to_numpy()
    ep = _valid_epochs(table)
    found: list[Any] = []
    # M1 + M3
    topic_key = _topic_key(table)
    keyed = table.select(cols).append_column("topic_key", topic_key)
    g13 = _codes(table.column("client_id"), topic_key)
    below = _below_earlier(_codes(table.column("client_id"), topic_key, table.column("partition")), ts, ep)
    keep13 = _any_per_group(g13, below)
    tid_codes = _codes(table.column("tid"))
    has_tid = table.column("tid").is_valid().to_numpy(zero_copy_only=False)
    if has_tid.any():  # two ids in one group: (group, id) pairs with an id, counted per group
        pairs = np.unique(np.stack([g13[has_tid], tid_codes[has_tid]]), axis=1)
        counts = np.bincount(pairs[0], minlength=len(keep13))
        keep13 |= counts[: len(keep13)] > 1
    for group in _groups(keyed, g13, keep13):
        found += sm.client_group_findings(group)
    # M2
    pkey = pc.coalesce(pc.binary_join_element_wise("id:", table.column("tid"), ""),
                       pc.binary_join_element_wise("name:", table.column("topic"), ""))
    keyed2 = table.select(cols).append_column("partition_key", pkey)
    g2 = _codes(pkey, table.column("partition"))
    frontier = _frontier(table)
    keep2 = _any_per_group(g2, _below_before_cutoff(g2, ts, ep, grace_ms))
    if frontier:  # a token can be stale on its own
        keep2 |= _any_per_group(g2, table.column("metadata_token").is_valid().to_numpy(zero_copy_only=False))
    for group in _groups(keyed2, g2, keep2):
        found += sm.partition_group_findings(group, grace_ms, frontier)
    return found


def _finding_key(f: Any) -> str | None:
    """The observation key a capture-only M2 finding names (:func:`kraft.metadata_findings` builds it in Spark:
    null, matching nothing, without evidence or without a topic id and name)."""
    if not f.evidence or f.evidence[0] is None or (f.topic_id or f.topic) is None or f.partition is None:
        return None
    return f"{f.evidence[0]}#{f.topic_id or f.topic}-{f.partition}"


def _judged_keys(table: pa.Table, found: list[Any], index: SpanIndex, grace_ms: int) -> set[str]:
    """The observation keys of the capture-only M2 findings whose observation the log judges."""
    names = {_finding_key(f) for f in found if f.rule == "M2"} - {None}
    if not names:
        return set()
    pointers = {n.split("#", 1)[0] for n in names}
    resp = _codes(table.column("source"), table.column("position"))
    _, first = np.unique(resp, return_index=True)
    src, pos = table.column("source").take(pa.array(first)).to_pylist(), table.column("position").take(
        pa.array(first)).to_pylist()
    wanted = np.zeros(len(first), bool)
    for i, (s, p) in enumerate(zip(src, pos, strict=True)):
        wanted[i] = capture_pointer(s, p) in pointers
    rows = table.filter(pa.array(wanted[resp]))
    named = [i for i, o in enumerate(fr.observations_from_arrow(rows)) if observation_key(o) in names]
    if not named:
        return set()
    rows = rows.take(pa.array(named, pa.int64()))
    judged = judged_rows(index, rows, grace_ms)
    return {observation_key(o) for o in fr.observations_from_arrow(rows.filter(pa.array(judged)))}


def pass_table(table: pa.Table, grace_ms: int, index: SpanIndex | None) -> pa.Table:
    """Every stale-metadata finding over ``table`` (the observations of :func:`stale_metadata.observations`
    with the log's ids filled in), and with a log (``index``) the lag per response, in :data:`PASS_ARROW`."""
    table = table.combine_chunks()
    found = _capture_findings(table, grace_ms)
    lags = None
    if index is not None:
        dropped = _judged_keys(table, found, index, grace_ms)
        found = [f for f in found if f.rule != "M2" or _finding_key(f) is None or _finding_key(f) not in dropped]
        found += logged_staleness(index, table, grace_ms)
        m5 = table.select(list(_M5_COLUMNS))
        for group in _groups(m5, _codes(m5.column("client_id"))):
            found += metadata_offsets(index, group, kraft=True)
        lags = response_lags_table(table, index, grace_ms)
    out = fr.findings_table(found)
    parts = [pa.table([*out.columns, *(pa.nulls(out.num_rows, PASS_ARROW.field(n).type) for n in _LAG_COLUMNS)],
                      schema=PASS_ARROW)]
    if lags is not None and lags.num_rows:
        cols = {"broker": lags.column("broker"), "client_id": lags.column("client_id"),
                "lag_source": lags.column("source"), "lag_position": lags.column("position"),
                "lag_capture_ts": lags.column("capture_ts"), "lag_ms": lags.column("lag_ms")}
        parts.append(pa.table([cols[f.name].cast(f.type) if f.name in cols else pa.nulls(lags.num_rows, f.type)
                               for f in PASS_ARROW], schema=PASS_ARROW))
    return pa.concat_tables(parts)


# ---------------------------------------------------------------------------------------------- Spark side


@dataclass(frozen=True)
class MetadataPass:
    """The one task's outcome: the stale-metadata findings (as ``kraft.metadata_findings`` returns them) and,
    with a log, the lag per response (``broker, client_id, source, position, capture_ts, lag_ms``)."""

    findings: DataFrame
    lags: DataFrame | None


def fits_one_task(obs: DataFrame) -> bool:
    """True when ``obs`` holds at most :data:`MAX_ROWS` rows and none without a capture time (one small Spark
    job over the capture times decides)."""
    from pyspark.sql import functions as F

    size = obs.agg(F.count(F.lit(1)).alias("n"), F.count(F.when(F.col("capture_ts").isNull(), 1)).alias("nulls")).first()
    return size is not None and size["n"] <= MAX_ROWS and not size["nulls"]


def metadata_pass(obs: DataFrame, grace_ms: int, index: SpanIndex | None,
                  keep: Callable[[DataFrame], DataFrame], *, fits: bool | None = None) -> MetadataPass | None:
    """The stale-metadata findings of ``obs`` in one task, or None when it does not fit one
    (:func:`fits_one_task`; ``fits``: its answer, when the caller has it). ``keep`` keeps the task's rows
    (read twice: findings and lags)."""
    from pyspark.sql import functions as F

    if not (fits_one_task(obs) if fits is None else fits):
        return None

    def one_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = [b for b in batches if b.num_rows]
        if got:  # no observations: no findings, no lags (the batches' own schema: Spark's Arrow types may vary)
            yield from pass_table(pa.Table.from_batches(got), grace_ms, index).to_batches()

    # one partition without a shuffle: the task reads the observations itself (a group-by-constant shuffled
    # and sorted every row first, ~3 JVM CPU-s a million observations); the scan of ``obs`` runs in this task
    # too, which at this size (<= MAX_ROWS) costs less than the shuffle did
    passed = keep(obs.coalesce(1).mapInArrow(one_task, _spark_schema(PASS_ARROW)))
    # run it now, once: the report writes that read it start together, and each would run the task itself (a
    # narrow run's keep has run it already: then this reads its checkpoint)
    passed.count()
    found = passed.where(F.col("rule").isNotNull()).select(*fr.FINDINGS_ARROW.names)
    lags = None
    if index is not None:
        lags = passed.where(F.col("rule").isNull()).select(
            "broker", "client_id", F.col("lag_source").alias("source"), F.col("lag_position").alias("position"),
            F.col("lag_capture_ts").alias("capture_ts"), "lag_ms")
    return MetadataPass(found, lags)
