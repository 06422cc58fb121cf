"""Arrow plumbing shared by the executor-side decode functions.

Every decode function (run by ``mapInArrow``) emits one *work* schema per source kind: the decoded
columns of that kind plus the side columns below, and a ``row_kind`` saying what a row is:

- a decoded row (``commit``, ``group``, ``marker``, ``lineage``, ``batch``, ``observation`` …);
- ``quarantine``: one undecodable unit (``unit``, ``reason``, ``raw`` ≤ 4 KiB, ``q_ms`` its own time
  when known);
- ``stats``: per work item and unit, how many units were read (``n_read``), quarantined (``n_bad``)
  and how many silver rows came out (``n_out``). Spark sums these; the driver never loops over data.

Times stay epoch milliseconds (int64) here; the Spark side turns them into timestamps and dates.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import pyarrow as pa

__all__ = ["RAW_MAX", "SIDE_FIELDS", "RowBuffer", "make_batch", "side_row", "stats_row"]

RAW_MAX = 4096

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


def side_row(source: str, position: int | None, unit: str, reason: str, raw: bytes | None = None,
             q_ms: int | None = None, **extra: Any) -> dict[str, Any]:
    """A ``quarantine`` work row."""
    return {"row_kind": "quarantine", "source": source, "position": position, "unit": unit,
            "reason": reason[:2000], "raw": None if raw is None else bytes(raw[:RAW_MAX]), "q_ms": q_ms,
            **extra}


def stats_row(source: str, unit: str, n_read: int, n_bad: int, n_out: int) -> dict[str, Any]:
    """A ``stats`` work row: units read / quarantined, silver rows produced."""
    return {"row_kind": "stats", "source": source, "unit": unit, "n_read": n_read, "n_bad": n_bad,
            "n_out": n_out}
