"""Arrow plumbing shared by the executor-side decode functions.

Every decode function (run by ``mapInArrow``) emits one *work* schema per source kind: the decoded
columns of that kind plus the side columns below, and a ``row_kind`` saying what a row is:

- a decoded row (``commit``, ``group``, ``marker``, ``lineage``, ``batch``, ``observation`` …);
- ``quarantine``: one undecodable unit (``unit``, ``reason``, ``raw`` ≤ 4 KiB, ``q_ms`` its own time
  when known);
- ``stats``: per work item and unit, how many units were read (``n_read``), quarantined (``n_bad``)
  and how many silver rows came out (``n_out``), plus what is a limit of the input, not a unit
  (``n_unpaired``): for captures, frames unpaired or cut by the capture; for segments, a final batch cut
  short by the end of the file. Spark sums these; the driver never loops over data;
- ``info``: a line for the run's notes (``reason``), e.g. TLS handshakes to a port that is not a broker
  port.

Times stay epoch milliseconds (int64) here; the Spark side turns them into timestamps and dates.

The ``__consumer_offsets`` inputs (segments, key/value dumps, text dumps) share their row shapes,
defined here so that no input module imports another: :data:`OFFSETS_WORK` (every row kind),
:data:`COMMITS` (the commit pass: ``offset_commits`` rows as they are written) and :data:`FILE_SCHEMA`
(one input file per row); :func:`commit_batch` is the one place commit columns take their silver form.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping
from datetime import datetime, timezone
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from jobs.schemas import arrow_schema

__all__ = [
    "COMMITS",
    "FILE_SCHEMA",
    "MS_MAX",
    "MS_MIN",
    "OFFSETS_WORK",
    "RAW_MAX",
    "SIDE_FIELDS",
    "RowBuffer",
    "commit_batch",
    "bad_value",
    "make_batch",
    "ms_in_range",
    "repeat",
    "side_row",
    "stats_row",
    "ts_ms",
]

RAW_MAX = 4096

#: Epoch-ms bounds of what a Spark/Delta timestamp (and its ``event_date``) can hold: 0001-01-01 ..
#: 9999-12-31 UTC. A time outside them is a bad value of its unit (a quarantine row), never a crash in
#: ``timestamp_millis`` or a row dated in year 146 million.
MS_MIN = -62_135_596_800_000
MS_MAX = 253_402_300_799_999

#: The columns of the work schemas that hold epoch milliseconds (checked against MS_MIN..MS_MAX).
_MS_COLUMNS = frozenset({"q_ms", "record_ms", "commit_ms", "expire_ms", "state_ms", "capture_ms", "snapshot_ms",
                         "max_timestamp"})

SIDE_FIELDS: list[pa.Field] = [
    pa.field("row_kind", pa.string()),
    pa.field("source", pa.string()),
    pa.field("position", pa.int64()),
    pa.field("unit", pa.string()),
    pa.field("reason", pa.string()),
    pa.field("raw", pa.binary()),
    pa.field("q_ms", pa.int64()),
    pa.field("n_read", pa.int64()),
    pa.field("n_bad", pa.int64()),
    pa.field("n_out", pa.int64()),
    pa.field("n_unpaired", pa.int64()),
]


def make_batch(schema: pa.Schema, columns: Mapping[str, Any], n: int) -> pa.RecordBatch:
    """A batch of ``schema`` from ``columns`` (arrays or lists); absent columns are all null."""
    arrays = []
    for f in schema:
        col = columns.get(f.name)
        if col is None:
            arrays.append(pa.nulls(n, f.type))
        elif isinstance(col, (pa.Array, pa.ChunkedArray)):
            col = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
            arrays.append(col if col.type == f.type else col.cast(f.type))
        else:
            arrays.append(pa.array(col, type=f.type))
    return pa.RecordBatch.from_arrays(arrays, schema=schema)


class RowBuffer:
    """Row-wise accumulation for the low-volume paths (quarantine, stats, group metadata …)."""

    def __init__(self, schema: pa.Schema) -> None:
        self.schema = schema
        self.rows: list[dict[str, Any]] = []

    def add(self, row: dict[str, Any]) -> None:
        self.rows.append(row)

    def extend(self, rows: Iterable[dict[str, Any]]) -> None:
        self.rows.extend(rows)

    def __len__(self) -> int:
        return len(self.rows)

    def flush(self) -> pa.RecordBatch | None:
        if not self.rows:
            return None
        batch = pa.RecordBatch.from_pylist(self.rows, schema=self.schema)
        self.rows = []
        return batch


#: Bit widths of the integer context columns a quarantine row may carry (others: 64).
_CTX_BITS = {"log_partition": 32, "partition": 32, "batch_leader_epoch": 32, "api_version": 16}


def _ms_ok(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and MS_MIN <= value <= MS_MAX


def side_row(source: str, position: int | None, unit: str, reason: str, raw: bytes | None = None,
             q_ms: int | None = None, **extra: Any) -> dict[str, Any]:
    """A ``quarantine`` work row. A ``q_ms`` outside what a date can hold is dropped (the row is then
    dated by the run), as are context values that do not fit their column: the quarantine row of a bad
    value must not fail on that same value."""
    for k, v in extra.items():
        if isinstance(v, int) and not isinstance(v, bool):
            half = 1 << (_CTX_BITS.get(k, 64) - 1)
            if not -half <= v < half:
                extra[k] = None
    return {"row_kind": "quarantine", "source": source, "position": position, "unit": unit,
            "reason": reason[:2000], "raw": None if raw is None else bytes(raw[:RAW_MAX]),
            "q_ms": q_ms if _ms_ok(q_ms) else None, **extra}


def stats_row(source: str, unit: str, n_read: int, n_bad: int, n_out: int,
              n_unpaired: int | None = None) -> dict[str, Any]:
    """A ``stats`` work row: units read / quarantined, silver rows produced (and what is a limit of the input
    rather than a unit: for captures, frames unpaired or partial; for segments, a final batch the file ends
    inside)."""
    return {"row_kind": "stats", "source": source, "unit": unit, "n_read": n_read, "n_bad": n_bad,
            "n_out": n_out, "n_unpaired": n_unpaired}


def repeat(value: Any, n: int, type_: pa.DataType) -> pa.Array:
    """``value`` ``n`` times (nulls when ``value`` is None)."""
    return pa.nulls(n, type_) if value is None else pa.repeat(pa.scalar(value, type_), n)


def ts_ms(value: Any) -> int | None:
    """Epoch ms from an ISO-8601 string or a number (epoch ms); None when absent or unparseable
    (the ``timestamp`` of JSONL dump and capture lines).

    Raises:
        ValueError: a number that is not finite or lies outside what a date can hold
            (:data:`MS_MIN` .. :data:`MS_MAX`): a bad value of its line, not an unknown time.
    """
    if value is None or isinstance(value, bool):
        return None
    ms: int | None = None
    if isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError(f"timestamp {value!r} is not a finite number")
        ms = int(value) if abs(value) < 1e19 else None
        if ms is None:
            raise ValueError(f"timestamp {value!r:.40} is outside 0001-01-01..9999-12-31")
    elif isinstance(value, int):
        ms = value
    elif isinstance(value, str):
        s = value.strip()
        if re.fullmatch(r"-?\d{1,30}", s):
            ms = int(s)
        else:
            try:
                dt = datetime.fromisoformat(s.replace("Z", "+00:00").replace("z", "+00:00"))
            except ValueError:
                return None
            if dt.tzinfo is None:
                dt = dt.replace(tzinfo=timezone.utc)
            try:
                ms = int(dt.timestamp() * 1000)
            except (OverflowError, ValueError):
                return None
    else:
        return None
    if not MS_MIN <= ms <= MS_MAX:
        raise ValueError(f"timestamp {str(value)[:40]} is outside 0001-01-01..9999-12-31")
    return ms


def ms_in_range(ms: pa.Array) -> pa.Array:
    """Per value of an epoch-ms array: True when it is null or a time a date can hold."""
    ok = pc.and_(pc.greater_equal(ms, MS_MIN), pc.less_equal(ms, MS_MAX))
    return ok.fill_null(True)


_INT_BITS = {pa.int8(): 8, pa.int16(): 16, pa.int32(): 32, pa.int64(): 64}


def bad_value(row: Mapping[str, Any], schema: pa.Schema) -> str | None:
    """Why a row-wise work row cannot be stored in ``schema``: an integer column holding a non-integer
    or a number beyond its type, or an epoch-ms column beyond what a date can hold; None when it fits.
    The reason names the column and the value, for the quarantine row of its unit."""
    for name, value in row.items():
        if value is None or name not in schema.names:
            continue
        t = schema.field(name).type
        bits = _INT_BITS.get(t)
        if bits is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            return f"{name} is not an integer: {str(value)[:40]!r}"
        if not -(1 << (bits - 1)) <= value < (1 << (bits - 1)):
            return f"{name} {str(value)[:40]} does not fit a {bits}-bit column"
        if name in _MS_COLUMNS and not MS_MIN <= value <= MS_MAX:
            return f"{name} {value} is outside 0001-01-01..9999-12-31"
    return None


# ------------------------------------------------------------------------ __consumer_offsets shapes

_ASSIGNED = pa.struct([pa.field("topic", pa.string()), pa.field("partitions", pa.list_(pa.int32()))])
_MEMBER = pa.struct([
    pa.field("member_id", pa.string()),
    pa.field("group_instance_id", pa.string()),
    pa.field("client_id", pa.string()),
    pa.field("client_host", pa.string()),
    pa.field("assigned_partitions", pa.list_(_ASSIGNED)),
])

#: The work schema of every ``__consumer_offsets`` decode function (the side pass emits it).
OFFSETS_WORK = pa.schema([
    *SIDE_FIELDS,
    pa.field("broker", pa.string()),
    pa.field("log_partition", pa.int32()),
    pa.field("log_offset", pa.int64()),
    pa.field("record_ms", pa.int64()),
    pa.field("batch_leader_epoch", pa.int32()),
    pa.field("producer_id", pa.int64()),
    pa.field("is_transactional", pa.bool_()),
    pa.field("control_type", pa.string()),
    pa.field("key_type", pa.int16()),
    pa.field("value_version", pa.int16()),
    pa.field("is_tombstone", pa.bool_()),
    pa.field("group_id", pa.string()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("committed_offset", pa.int64()),
    pa.field("leader_epoch", pa.int32()),
    pa.field("metadata", pa.string()),
    pa.field("commit_ms", pa.int64()),
    pa.field("expire_ms", pa.int64()),
    pa.field("record_type", pa.string()),
    pa.field("protocol_type", pa.string()),
    pa.field("generation", pa.int32()),
    pa.field("protocol", pa.string()),
    pa.field("leader", pa.string()),
    pa.field("state_ms", pa.int64()),
    pa.field("member_count", pa.int32()),
    pa.field("members", pa.list_(_MEMBER)),
    pa.field("value_version_above_known", pa.bool_()),
    pa.field("trailing_bytes", pa.int32()),
])

#: What the *commit* pass emits: the ``offset_commits`` columns minus ``cluster``/``event_date`` (Spark adds
#: those), for the non-transactional commits only (``txn_state`` = ``none``). Everything else a decoder
#: finds (transactional commits, markers, group records, quarantine and stats rows) goes to the *side*
#: pass in the :data:`OFFSETS_WORK` schema, which stays small.
COMMITS = pa.schema([f for f in arrow_schema("offset_commits") if f.name not in ("cluster", "event_date")])
_TS = COMMITS.field("commit_ts").type

#: Input of the per-file decode functions (key/value dumps, text dumps).
FILE_SCHEMA = pa.schema([
    pa.field("source", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("broker", pa.string()),
])


def _arr(a: Any) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def _ms_to_ts(ms: pa.Array) -> pa.Array:
    """Epoch ms -> ``timestamp[us, UTC]`` (as Spark's ``timestamp_millis``; overflow is an error)."""
    return pc.multiply_checked(ms, 1000).cast(_TS)


def commit_batch(cols: Mapping[str, Any], n: int) -> pa.RecordBatch:
    """:data:`COMMITS` rows (``txn_state`` = ``none``) from :data:`OFFSETS_WORK`-named commit columns;
    absent columns are null. The same column rules as the Spark expressions of
    :func:`jobs.ingest.offsets.commits_frame`."""
    def col(name: str, type_: pa.DataType) -> pa.Array:
        a = cols.get(name)
        if a is None:
            return pa.nulls(n, type_)
        a = _arr(a)
        return a if a.type == type_ else a.cast(type_)

    i64 = pa.int64()
    commit_ms, record_ms, expire_ms = col("commit_ms", i64), col("record_ms", i64), col("expire_ms", i64)
    tomb = col("is_tombstone", pa.bool_())
    null_ms = pa.scalar(None, i64)
    use_record = pc.or_kleene(tomb, pc.or_kleene(pc.is_null(commit_ms), pc.less(commit_ms, 0))).fill_null(False)
    out = {
        "group_id": col("group_id", pa.string()), "topic": col("topic", pa.string()),
        "partition": col("partition", pa.int32()), "committed_offset": col("committed_offset", i64),
        "leader_epoch": col("leader_epoch", pa.int32()), "metadata": col("metadata", pa.string()),
        "commit_ts": _ms_to_ts(commit_ms),
        "expire_ts": _ms_to_ts(pc.if_else(pc.greater_equal(expire_ms, 0), expire_ms, null_ms)),
        "is_tombstone": tomb, "key_type": col("key_type", pa.int16()),
        "value_version": col("value_version", pa.int16()),
        "event_ts": _ms_to_ts(pc.if_else(use_record, record_ms, commit_ms)),
        "log_partition": col("log_partition", pa.int32()), "log_offset": col("log_offset", i64),
        "record_ts": _ms_to_ts(pc.if_else(pc.greater_equal(record_ms, 0), record_ms, null_ms)),
        "batch_leader_epoch": col("batch_leader_epoch", pa.int32()), "producer_id": col("producer_id", i64),
        "txn_state": repeat("none", n, pa.string()), "source_kind": repeat("offsets", n, pa.string()),
        "source": col("source", pa.string()), "position": col("position", i64),
        "value_version_above_known": col("value_version_above_known", pa.bool_()),
        "trailing_bytes": col("trailing_bytes", pa.int32()),
    }
    return pa.RecordBatch.from_arrays([out[f.name] for f in COMMITS], schema=COMMITS)
