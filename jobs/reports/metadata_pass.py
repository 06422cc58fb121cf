"""The stale-metadata findings of a run in one Python task, when its observations fit one.

:func:`stale_metadata.metadata_findings` and :func:`kraft.metadata_findings` build the M1/M2/M3/M5 findings
as ~25 Spark stages over the cached observations: two window pre-filters, the id -> name join, the token
frontier, three grouped rule calls, the log's M2 and the anti-join of the observations it judges, and the
lag pass of the rates. Each stage turns the cached rows into rows or Arrow again; at 1 M observations that
is ~30 CPU-s, while the rules themselves take ~1. Here every observation goes to one ``mapInArrow`` task
(the observations' partitions coalesced into one, no shuffle) and the same steps run there, columnar (numpy over the whole table) where Spark ran
them and through the same rule functions, on the same groups of rows, where Spark called Python:

- **M1 + M3**: groups ``(client_id, client_host, topic_key)``, ``topic_key`` = the topic, else the smallest name other
  rows give the id, else the id; a group goes to :func:`~epochlib.rules.check_client_metadata` when one of
  its epochs is below one the client saw strictly earlier for the partition, or it holds two ids;
- **M2**: groups ``(partition_key, partition)``; a group goes to
  :func:`~epochlib.rules.check_broker_staleness` when one of its epochs is below one seen before
  ``t - grace`` or (with a token frontier) it carries a token; the frontier is the first sighting of each
  token in (time, source, position, partition) order;
- with a metadata log: M5 per client, M2 timed from the log over every row, the capture-only M2 findings
  whose observation the log judges dropped, and per response the largest lag of its judged rows;
- every response once, what the rates count (so they need not read the observations again).

The outcome equals the Spark path's (``tests/test_metadata_pass.py`` runs both over the same rows). A run
takes this path when its observations number at most :func:`one_task_rows` (one Python worker holds them all:
:data:`MAX_ROWS` under a local master, what an executor's Python memory holds on a cluster) and every row has a
capture time; otherwise the Spark stages run. On the delta-rs sink the task reads the table's
files itself (:class:`ObservationFiles`); elsewhere Spark hands it the rows (:func:`metadata_pass`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from epochlib.arrow_compat import null_where
from epochlib.rules import capture_pointer
from epochlib.rules.kraft import LogView, observation_key
from epochlib.rules.kraft_pass import (
    SpanIndex,
    fill_log_topic_ids,
    judged_rows,
    logged_staleness,
    metadata_offsets,
)
from epochlib.rules.metadata import older_ids, token_frontier

from . import _frames as fr
from .kraft import _M5_COLUMNS, _spark_schema, response_lags_table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from ..config import Config

__all__ = ["MAX_ROWS", "BYTES_PER_ROW", "MetadataPass", "ObservationFiles", "metadata_pass", "observations_arrow",
           "one_task_rows", "pass_table", "rows_for_conf"]

#: The most observations one task takes: its Python worker holds them as one Arrow table (~250 bytes a row) and
#: peaks at ~1.2 KB a row.
MAX_ROWS = 2_000_000
#: How :func:`rows_for_conf` sizes the task on a cluster, from its worker in a ``local[2]`` run of the bench preset's
#: ~1 M observations: resident peak 1.16-1.27 GB, against 0.4 GB for an ordinary worker of that run. Per row, on top
#: of a base that does not grow with them (imports, the log's index, the run's other tasks), each with a margin; and
#: the part of the executor's memory overhead that its JVM uses outside the heap (Spark's own floor for the
#: overhead). Under ``spark.executor.pyspark.memory`` the base is what a worker maps
#: (:data:`jobs.session.WORKER_ADDRESS_MIB`): with it set to 1800m the task over those rows failed with
#: ``MemoryError``. BENCHMARKS.md, "Issue 16", twenty-third round.
BYTES_PER_ROW = 1300
WORKER_BASE_MIB = 256
JVM_OVERHEAD_MIB = 384
#: Spark's defaults: an executor's memory, the share of it set aside beyond the heap, and that overhead's floor.
_EXECUTOR_MIB, _OVERHEAD_FACTOR, _OVERHEAD_MIN_MIB = 1024, 0.1, 384


def one_task_rows(spark: SparkSession) -> int:
    """The most observations the one task may take in ``spark``'s session (:func:`rows_for_conf` of its settings):
    a task that outgrew its executor's memory would have the container killed by YARN or Kubernetes, or fail with
    ``MemoryError`` under ``spark.executor.pyspark.memory``."""
    from ..session import conf_getter

    return rows_for_conf(conf_getter(spark))


def rows_for_conf(get: Callable[[str], str | None]) -> int:
    """:func:`one_task_rows` from the session's settings (``get``: a key's value, None when unset), up to
    :data:`MAX_ROWS`, at :data:`BYTES_PER_ROW` a row:

    - with ``spark.executor.pyspark.memory`` (under any master Spark limits each worker's address space to it
      over the executor's task slots, :func:`jobs.session.task_slots`): what that share holds beyond
      :data:`jobs.session.WORKER_ADDRESS_MIB`;
    - else under a local master, :data:`MAX_ROWS`: the worker runs beside the driver, with the machine's memory;
    - else on a cluster, what one task slot's share of the executor's memory overhead holds, less
      :data:`JVM_OVERHEAD_MIB` for the JVM and :data:`WORKER_BASE_MIB` for the worker. The overhead is
      ``spark.executor.memoryOverhead``, else Spark's default: ``spark.executor.memoryOverheadFactor`` (on
      Kubernetes ``spark.kubernetes.memoryOverheadFactor``, which Spark sets to 0.4 for Python; else 0.1) of
      ``spark.executor.memory``, at least ``spark.executor.minMemoryOverhead`` (384 MiB). With Spark's defaults
      that leaves nothing.

    More rows than that take the Spark stages, which find the same; so does a setting that is not a size (0)."""
    from ..session import WORKER_ADDRESS_MIB, size_mib, task_slots, worker_address_limit_mib

    master = get("spark.master") or ""
    try:
        limit = worker_address_limit_mib(get)
        if limit is not None:
            budget = limit - WORKER_ADDRESS_MIB
        elif master.startswith("local"):
            return MAX_ROWS
        else:
            overhead = size_mib(get("spark.executor.memoryOverhead"))
            if not overhead:
                executor = size_mib(get("spark.executor.memory")) or _EXECUTOR_MIB
                k8s = get("spark.kubernetes.memoryOverheadFactor") if master.startswith("k8s") else None
                factor = float(get("spark.executor.memoryOverheadFactor") or k8s or _OVERHEAD_FACTOR)
                floor = size_mib(get("spark.executor.minMemoryOverhead")) or _OVERHEAD_MIN_MIB
                overhead = max(floor, executor * factor)
            budget = (overhead - JVM_OVERHEAD_MIB) / task_slots(get) - WORKER_BASE_MIB
        return max(0, min(MAX_ROWS, int(budget * 2**20 / BYTES_PER_ROW)))
    except (ValueError, ArithmeticError):
        return 0

#: What the task returns, one kind of row each (``pass_row``): ``finding`` (the :data:`~jobs.reports._frames.FINDINGS_ARROW`
#: columns), ``lag`` (with a log: a response with a row the log judges, its largest lag: ``broker``, ``client_id``,
#: ``resp_*``, ``lag_ms``), ``response`` (every response once, for the rates: ``broker``, ``client_id``, ``resp_*``)
#: and ``unfit`` (the files pass met observations the task cannot take: the Spark stages run instead).
PASS_ARROW = pa.schema([*fr.FINDINGS_ARROW, pa.field("pass_row", pa.string()), pa.field("resp_source", pa.string()),
                        pa.field("resp_position", pa.int64()), pa.field("resp_capture_ts", pa.int64()),
                        pa.field("lag_ms", pa.int64())])
_RESP_COLUMNS = {"broker": "broker", "client_id": "client_id", "source": "resp_source", "position": "resp_position",
                 "capture_ts": "resp_capture_ts"}  # a response's columns (kraft._RESPONSE) -> the task's


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
        else:  # densified by hashing, in order of first appearance (np.unique's sort was ~0.6 s a million rows)
            pair = pc.dictionary_encode(pa.array(out * (len(enc.dictionary) + 1) + k, pa.int64()))
            out = pair.indices.to_numpy(zero_copy_only=False).astype(np.int64)
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
    if table.column("topic").null_count == 0:
        return table.column("topic")
    table = table.select(["tid", "topic"])  # the filter below copies only what it reads
    named = table.filter(pc.and_(pc.is_valid(table.column("tid")), pc.is_valid(table.column("topic"))))
    names = named.group_by("tid", use_threads=False).aggregate([("topic", "min")])
    ids = pc.dictionary_encode(table.column("tid")).combine_chunks()
    per_id = pc.take(names.column("topic_min"), pc.index_in(ids.dictionary, value_set=names.column("tid")))
    return pc.coalesce(table.column("topic"), pc.take(per_id, ids.indices), table.column("tid"))


def _named_ids(table: pa.Table) -> pa.Table:
    """The client, ``tid``, ``topic`` and ``capture_ts`` of the rows that carry both an id and a name."""
    t = table.select(["client_id", "client_host", "tid", "topic", "capture_ts"])
    return t.filter(pc.and_(pc.is_valid(t.column("tid")), pc.is_valid(t.column("topic"))))


def _per_name(named: pa.Table) -> pa.Table:
    return named.group_by("topic", use_threads=False).aggregate([("tid", "min"), ("tid", "max"), ("capture_ts", "min")])


def _older_ids(table: pa.Table) -> set[tuple[str, str]]:
    """:func:`epochlib.rules.metadata.older_ids` (what :func:`stale_metadata.older_ids_of` collects): the names with
    two or more ids, each client's first sighting of each."""
    named = _named_ids(table)
    per_name = _per_name(named)
    multi = per_name.filter(pc.less(per_name.column("tid_min"), per_name.column("tid_max"))).column("topic")
    if not len(multi):
        return set()
    rows = named.filter(pc.is_in(named.column("topic"), value_set=multi))
    firsts = rows.group_by(["client_id", "client_host", "topic", "tid"], use_threads=False).aggregate(
        [("capture_ts", "min")])
    return older_ids(((c, h), t, i, ts) for c, h, t, i, ts in zip(*(firsts.column(n).to_pylist() for n in (
        "client_id", "client_host", "topic", "tid", "capture_ts_min")), strict=True))


def _single_ids(table: pa.Table) -> tuple[pa.ChunkedArray, dict[str, tuple[str, int]]]:
    """:func:`epochlib.rules.metadata.single_ids` (name -> its one id and that id's first sighting) and, per row
    without an id captured from then on, that id: the key :func:`epochlib.rules.metadata.check_broker_staleness`
    gives such a row (null for every other row)."""
    per_name = _per_name(_named_ids(table))
    single = per_name.filter(pc.equal(per_name.column("tid_min"), per_name.column("tid_max")))
    at = pc.index_in(table.column("topic"), value_set=single.column("topic"))
    first = pc.take(single.column("capture_ts_min"), at)
    use = pc.and_(pc.is_null(table.column("tid")), pc.greater_equal(table.column("capture_ts"), first))
    ids = pc.if_else(pc.fill_null(use, False), pc.take(single.column("tid_min"), at), pa.scalar(None, pa.string()))
    return ids, dict(zip(single.column("topic").to_pylist(), zip(
        single.column("tid_min").to_pylist(), single.column("capture_ts_min").to_pylist(), strict=True), strict=True))


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
    client, host = table.column("client_id"), table.column("client_host")
    g13 = _codes(client, host, topic_key)
    below = _below_earlier(_codes(client, host, topic_key, table.column("partition")), ts, ep)
    keep13 = _any_per_group(g13, below)
    tid_codes = _codes(table.column("tid"))
    has_tid = table.column("tid").is_valid().to_numpy(zero_copy_only=False)
    if has_tid.any():  # two ids in one group: (group, id) pairs with an id, counted per group
        width = int(tid_codes.max()) + 1  # the distinct pairs by hashing (np.unique over axis 1 was ~1.4 s a million)
        pairs = pc.unique(pa.array(g13[has_tid] * width + tid_codes[has_tid], pa.int64())).to_numpy()
        counts = np.bincount(pairs // width, minlength=len(keep13))
        keep13 |= counts[: len(keep13)] > 1
    older = _older_ids(table) if keep13.any() else set()
    for group in _groups(keyed, g13, keep13):
        found += sm.client_group_findings(group, older)
    # M2
    tid = table.column("tid")
    single_col, single = (tid, {}) if tid.null_count == 0 else _single_ids(table)
    pkey = pc.coalesce(pc.binary_join_element_wise("id:", pc.coalesce(tid, single_col), ""),
                       pc.binary_join_element_wise("name:", table.column("topic"), ""))
    keyed2 = table.select(cols).append_column("partition_key", pkey)
    g2 = _codes(pkey, table.column("partition"))
    frontier = _frontier(table)
    keep2 = _any_per_group(g2, _below_before_cutoff(g2, ts, ep, grace_ms))
    if frontier:  # a token can be stale on its own
        keep2 |= _any_per_group(g2, table.column("metadata_token").is_valid().to_numpy(zero_copy_only=False))
    for group in _groups(keyed2, g2, keep2):
        found += sm.partition_group_findings(group, grace_ms, frontier, single)
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
    pointers = {n.rsplit("#", 1)[0] for n in names}  # ``<pointer>#<topic>-<p>``: the path may hold a ``#``, a topic not
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


def _rows_of(kind: str, table: pa.Table) -> pa.Table:
    """``table``'s columns (findings, or responses named as :data:`_RESP_COLUMNS` says) as :data:`PASS_ARROW` rows."""
    cols = {_RESP_COLUMNS.get(c, c): table.column(c) for c in table.column_names}
    n = table.num_rows
    return pa.table([pa.array([kind] * n, pa.string()) if f.name == "pass_row"
                     else cols[f.name].cast(f.type) if f.name in cols else pa.nulls(n, f.type)
                     for f in PASS_ARROW], schema=PASS_ARROW)


def pass_table(table: pa.Table, grace_ms: int, index: SpanIndex | None) -> pa.Table:
    """Every stale-metadata finding over ``table`` (the observations of :func:`stale_metadata.observations`
    with the log's ids filled in), every response once, and with a log (``index``) the lag per response, in
    :data:`PASS_ARROW`."""
    from .kraft import _RESPONSE

    table = table.combine_chunks()
    found = _capture_findings(table, grace_ms)
    lags = None
    if index is not None:
        dropped = _judged_keys(table, found, index, grace_ms)
        found = [f for f in found if f.rule != "M2" or _finding_key(f) is None or _finding_key(f) not in dropped]
        found += logged_staleness(index, table, grace_ms)
        m5 = table.select(list(_M5_COLUMNS))
        for group in _groups(m5, _codes(m5.column("client_id"), m5.column("client_host"))):
            found += metadata_offsets(index, group, kraft=True)
        lags = response_lags_table(table, index, grace_ms)
    responses = table.select(list(_RESPONSE)).group_by(list(_RESPONSE), use_threads=False).aggregate([])
    parts = [_rows_of("finding", fr.findings_table(found)), _rows_of("response", responses)]
    if lags is not None and lags.num_rows:
        parts.append(_rows_of("lag", lags))
    return pa.concat_tables(parts)


# ---------------------------------------------------------------------------------------------- Spark side


@dataclass(frozen=True)
class MetadataPass:
    """The one task's outcome: the stale-metadata findings (as ``kraft.metadata_findings`` returns them), every
    response once (``broker, client_id, source, position, capture_ts``: what the rates count) and, with a log, the
    lag per response (the same columns and ``lag_ms``)."""

    findings: DataFrame
    responses: DataFrame
    lags: DataFrame | None


def fits_one_task(obs: DataFrame) -> bool:
    """True when ``obs`` holds at most :func:`one_task_rows` rows and none without a capture time (one small Spark
    job over the capture times decides)."""
    from pyspark.sql import functions as F

    limit = one_task_rows(obs.sparkSession)
    if limit <= 0:
        return False
    size = obs.agg(F.count(F.lit(1)).alias("n"), F.count(F.when(F.col("capture_ts").isNull(), 1)).alias("nulls")).first()
    return size is not None and size["n"] <= limit and not size["nulls"]


def _outcome(passed: DataFrame, with_lags: bool) -> MetadataPass | None:
    """Run the kept task now, once (the report writes that read it start together, and each would run the task
    itself; a narrow run's keep has run it already: then this reads its checkpoint), and split its rows; None when
    the task found observations it cannot take (an ``unfit`` row)."""
    from pyspark.sql import functions as F

    row = F.col("pass_row")
    got = passed.agg(F.count(F.when(row == "unfit", 1)).alias("unfit")).first()  # a job over every row: it runs the task
    if got is not None and got["unfit"]:
        return None
    found = passed.where(row == "finding").select(*fr.FINDINGS_ARROW.names)

    def responses(kind: str, *extra: str) -> DataFrame:
        return passed.where(row == kind).select(*[F.col(c).alias(r) for r, c in _RESP_COLUMNS.items()], *extra)

    return MetadataPass(found, responses("response"), responses("lag", "lag_ms") if with_lags else None)


def metadata_pass(obs: DataFrame, grace_ms: int, index: SpanIndex | None,
                  keep: Callable[[DataFrame], DataFrame], *, fits: bool | None = None) -> MetadataPass | None:
    """The stale-metadata findings of ``obs`` in one task, or None when it does not fit one
    (:func:`fits_one_task`; ``fits``: its answer, when the caller has it). ``keep`` keeps the task's rows
    (read more than once: findings, responses and lags)."""
    if not (fits_one_task(obs) if fits is None else fits):
        return None

    def one_task(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        got = [b for b in batches if b.num_rows]
        if got:  # no observations: no findings, no lags (the batches' own schema: Spark's Arrow types may vary)
            yield from pass_table(pa.Table.from_batches(got), grace_ms, index).to_batches()

    # one partition without a shuffle: the task reads the observations itself (a group-by-constant shuffled
    # and sorted every row first, ~3 JVM CPU-s a million observations); the scan of ``obs`` runs in this task
    # too, which at this size (<= MAX_ROWS) costs less than the shuffle did
    return _outcome(keep(obs.coalesce(1).mapInArrow(one_task, _spark_schema(PASS_ARROW))), index is not None)


# ---------------------------------------------------------------------------------------------- the files pass


def _raw_schema() -> pa.Schema:
    """The ``metadata_observations`` columns :func:`stale_metadata.observations` reads, as the table stores them."""
    from jobs import schemas

    from .stale_metadata import OBS_COLUMNS

    table = schemas.arrow_schema("metadata_observations")
    return pa.schema([table.field(c) for c in OBS_COLUMNS])


def observations_arrow(raw: pa.Table, view: LogView | None = None) -> pa.Table:
    """:func:`stale_metadata.observations` in Arrow, over rows as the table stores them (:func:`_raw_schema`): the
    rows with a partition, times as epoch ms, the capture time else the event time, ``tid`` the id unless it is
    the all-zero one; with the log's ``view`` also :func:`kraft.with_topic_ids` (the rows without an id after the
    others, as Spark's union gives them)."""
    from .stale_metadata import _ZERO_IDS, OBS_COLUMNS

    topic_id = raw.column("topic_id")
    tid = null_where(topic_id, pc.is_in(topic_id, value_set=pa.array(_ZERO_IDS, topic_id.type)))
    # The rows kept, in their order, as one index: the kept rows are copied once (a filter, then one per side of
    # the id split, then the concatenation's combine copied every column of every row up to four times: ~0.6 s a
    # million observations each in a fresh worker), and not at all when every row is kept in place.
    keep = pc.is_valid(raw.column("partition")).to_numpy(zero_copy_only=False)
    has = pc.is_valid(tid).to_numpy(zero_copy_only=False) if view is not None and tid.null_count else None
    n_known = None
    if has is not None and not has[keep].all():
        known = np.flatnonzero(keep & has)
        n_known = len(known)
        order = np.concatenate([known, np.flatnonzero(keep & ~has)])
    elif not keep.all():
        order = np.flatnonzero(keep)
    else:
        order = None
    if order is not None:
        take = pa.array(order, pa.int64())
        t, tid = raw.select(list(OBS_COLUMNS)).take(take), tid.take(take)
    else:
        t = raw
    cols = {c: t.column(c) for c in OBS_COLUMNS}
    cols["event_ts"] = fr.epoch_ms_arrow(t.column("event_ts"))
    cols["capture_ts"] = pc.coalesce(fr.epoch_ms_arrow(t.column("capture_ts")), cols["event_ts"])
    cols["tid"] = tid
    out = pa.table(cols)
    if n_known is None:
        return out
    unknown = out.slice(n_known)  # kraft._fill_ids
    filled = fill_log_topic_ids(view, unknown)
    if isinstance(filled, pa.Array):
        filled = pa.chunked_array([filled])
    head = out.slice(0, n_known)  # only the two columns change: the others keep their one chunk
    for name, tail in (("tid", filled), ("topic_id", pc.coalesce(unknown.column("topic_id"), filled))):
        out = out.set_column(out.schema.get_field_index(name), name, pa.chunked_array(
            [*head.column(name).chunks, *tail.chunks], out.schema.field(name).type))
    return out


def _unfit() -> pa.RecordBatch:
    return pa.RecordBatch.from_pylist([{"pass_row": "unfit"}], schema=PASS_ARROW)


def _files_task(root: str, files: list[str], grace_ms: int, index: SpanIndex | None, view: LogView | None,
                max_rows: int) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """``mapInArrow`` of the files pass: the Spark rows given (the merged lookback rows; the marker row that makes
    the task run is dropped) and ``files`` (relative to ``root``), read with pyarrow, through :func:`pass_table`;
    one ``unfit`` row instead when they are more than ``max_rows`` rows (counted before the rows without a partition
    are dropped) or one has no capture time."""

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        schema = _raw_schema()
        parts, rows = [], 0
        for b in batches:  # every batch is read (Spark's side of the task), but none kept once past max_rows
            t = pa.Table.from_batches([b]) if b.num_rows and rows <= max_rows else None
            if t is not None:
                t = t.filter(pc.invert(pc.fill_null(t.column("_marker"), False)))
                rows += t.num_rows
                if t.num_rows and rows <= max_rows:
                    parts.append(fr.conformed(t, schema))
        if rows > max_rows:
            yield _unfit()
            return
        fs, base = fr.fs_path(root)
        names = []
        for f in files:  # the footers first: a window too large for one task is not read
            with fs.open_input_file(f"{base}/{f}") as fh:
                meta = pq.ParquetFile(fh)
                rows += meta.metadata.num_rows
                names.append([c for c in schema.names if c in meta.schema_arrow.names])
        if rows > max_rows:
            yield _unfit()
            return
        for f, cols in zip(files, names, strict=True):
            with fs.open_input_file(f"{base}/{f}") as fh:
                parts.append(fr.conformed(pq.read_table(fh, columns=cols, use_threads=False), schema))
        obs = observations_arrow(pa.concat_tables(parts) if parts else schema.empty_table(), view)
        if obs.num_rows == 0:
            return
        if obs.column("capture_ts").null_count:
            yield _unfit()
            return
        yield from pass_table(obs, grace_ms, index).to_batches()

    return run


@dataclass(frozen=True)
class ObservationFiles:
    """The files pass: the one task of :func:`metadata_pass` reading the window's observations itself, from the
    table's data files (the delta-rs sink's, listed in its Delta log), instead of taking them from Spark.

    Spark read every observation into rows and then into Arrow for the task — and once more for the size check
    and for the rates: ~19 JVM CPU-s for the million observations of the 10 M-commit bench run, against ~0.4 s for
    pyarrow to read the same files (BENCHMARKS.md, issue 16 twelfth round). Only the lookback days that the run's
    own inputs also hold rows of (``early``) come from Spark, merged as :func:`~._frames.read_silver` merges them.
    The outcome equals :func:`metadata_pass`'s over :func:`stale_metadata.observations` (``tests/test_metadata_pass.py``).
    """

    root: str
    files: tuple[str, ...]
    early: DataFrame | None

    @classmethod
    def plan(cls, spark: SparkSession, config: Config, cluster: str, window: tuple[dt.date, dt.date],
             state: fr.InputState | None = None) -> ObservationFiles | None:
        """The files pass over ``window``, or None where it does not apply: the delta-spark back end, a catalog
        table, escaped file names, or more than :func:`one_task_rows` observations in the files (the Delta log's
        counts; the task checks the files' own)."""
        table = "metadata_observations"
        listed = fr.sink_files(spark, config, table, cluster, window)
        if listed is None:
            return None
        root, found = listed  # nothing captured yet: no files, the task reads none (read_silver: an empty frame)
        files, early = fr.split_window(table, found, window, state)
        # the lookback days' files count too: Spark reads them for the task then (with the run's own rows)
        if sum(f.rows for f in found) > one_task_rows(spark) or any("%" in f.path for f in files):
            return None
        rows = None if early is None else fr.read_silver(spark, config, table, cluster, early, state)
        return cls(root, tuple(f.path for f in files), rows)

    def run(self, spark: SparkSession, grace_ms: int, index: SpanIndex | None, view: LogView | None,
            keep: Callable[[DataFrame], DataFrame]) -> MetadataPass | None:
        """Run the task now (``keep`` keeps its rows); None when it found the observations unfit for one task
        (more than :func:`one_task_rows`, or one without a capture time): the Spark stages run instead."""
        from pyspark.sql import functions as F

        from .stale_metadata import OBS_COLUMNS

        # a marker row, so that the task runs (and reads the files) even when Spark has no rows to give it
        given = spark.range(1, numPartitions=1).select(F.lit(True).alias("_marker"))
        if self.early is not None:
            types = dict(self.early.dtypes)
            cols = [F.col(c) if c in types else F.lit(None).cast("long").alias(c) for c in OBS_COLUMNS]
            rows = self.early.select(*cols, F.lit(False).alias("_marker"))
            given = rows.unionByName(given, allowMissingColumns=True)
        task = _files_task(self.root, list(self.files), grace_ms, index, view, one_task_rows(spark))
        return _outcome(keep(given.coalesce(1).mapInArrow(task, _spark_schema(PASS_ARROW))), index is not None)
