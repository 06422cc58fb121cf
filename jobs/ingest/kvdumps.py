"""Parquet / JSONL dumps of ``__consumer_offsets`` with binary key/value -> offsets rows (executor side).

The schema of Spark's Kafka source: ``key``, ``value`` (binary; base64 strings in JSONL), optionally
``partition``, ``offset`` and ``timestamp`` (ISO-8601 or epoch ms). Parquet is read row group by row
group (``position`` = row index in the file, unit ``record``); JSONL is streamed line by line
(``position`` = line number, unit ``line``). A file that is not what its name says becomes one
quarantined ``file`` unit. The Arrow columns go straight into :func:`._kv.decode_kv`.
"""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Iterator
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from jobs.fs import iter_lines, open_reader

from ._kv import COMMIT_PASS, ONE_PASS, SIDE_PASS, Pass, decode_kv
from ._rows import MS_MAX, OFFSETS_WORK, RAW_MAX, RowBuffer, side_row, stats_row, ts_ms

__all__ = ["decode_dump_both", "decode_dump_commits", "decode_dump_side"]


def decode_dump_commits(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function, commit pass: dump files (:data:`~jobs.ingest._rows.FILE_SCHEMA`) ->
    non-transactional commits (:data:`~jobs.ingest._rows.COMMITS`)."""
    return _decode_files(batches, COMMIT_PASS)


def decode_dump_side(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function, side pass: dump files -> every other row, quarantine and stats
    (:data:`~jobs.ingest._rows.OFFSETS_WORK`)."""
    return _decode_files(batches, SIDE_PASS)


def decode_dump_both(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Both passes from one decode (:data:`~._kv.ONE_PASS`): commit-pass and side-pass batches, mixed."""
    return _decode_files(batches, ONE_PASS)


def _decode_files(batches: Iterator[pa.RecordBatch], p: Pass) -> Iterator[pa.RecordBatch]:
    for rb in batches:
        for row in rb.to_pylist():
            src = row["source"]
            decode = _decode_parquet if src.lower().endswith(".parquet") else _decode_jsonl
            for b in decode(src, row.get("broker"), p):
                if b is not None:
                    yield b


def _file_failure(src: str, reason: str, broker: str | None = None) -> pa.RecordBatch:
    rows = RowBuffer(OFFSETS_WORK)
    rows.add(side_row(src, 0, "file", reason, None, broker=broker))
    rows.add(stats_row(src, "file", 1, 1, 0))
    return rows.flush()


def _stats(src: str, unit: str, n_read: int, n_bad: int, n_out: int) -> pa.RecordBatch:
    rows = RowBuffer(OFFSETS_WORK)
    rows.add(stats_row(src, unit, n_read, n_bad, n_out))
    return rows.flush()


def _parquet_ms(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_timestamp(t):
        return pc.cast(pc.cast(col, pa.timestamp("ms", tz=t.tz)), pa.int64())
    if pa.types.is_integer(t):
        return pc.cast(col, pa.int64())
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return pa.array([_lenient_ms(x) for x in col.to_pylist()], pa.int64())
    return pa.nulls(len(col), pa.int64())


def _lenient_ms(value: Any) -> int | None:
    """A Parquet string timestamp in ms; one outside what a date can hold is kept as such so that
    :func:`._kv.decode_kv` quarantines its row (an unparseable one is unknown: None)."""
    try:
        return ts_ms(value)
    except ValueError:
        return MS_MAX + 1


def _binary(col: pa.Array) -> pa.Array:
    t = col.type
    if pa.types.is_binary(t):
        return col
    if pa.types.is_large_binary(t) or pa.types.is_fixed_size_binary(t):
        return pc.cast(col, pa.binary())
    if pa.types.is_string(t) or pa.types.is_large_string(t):  # base64 text
        return pa.array([None if x is None else base64.b64decode(x, validate=True) for x in col.to_pylist()],
                        pa.binary())
    raise TypeError(f"key/value column of type {t}")


def _decode_parquet(src: str, broker: str | None, p: Pass) -> Iterator[pa.RecordBatch | None]:
    import pyarrow.parquet as pq

    try:
        reader = open_reader(src)
        pf = pq.ParquetFile(reader.file)
        names = set(pf.schema_arrow.names)
        if not {"key", "value"} <= names:
            raise ValueError(f"no key/value columns (has {sorted(names)})")
    except Exception as e:  # noqa: BLE001 - an unreadable or foreign file is quarantined, not fatal
        if p.side:
            yield _file_failure(src, f"not a readable key/value Parquet dump: {e}", broker=broker)
        return
    n_read = n_bad = n_out = 0
    row_index = 0
    cols = [c for c in ("key", "value", "partition", "offset", "timestamp") if c in names]
    try:
        for chunk in pf.iter_batches(batch_size=65536, columns=cols):
            m = chunk.num_rows
            pos = pa.array(np.arange(row_index, row_index + m, dtype=np.int64))
            row_index += m
            n_read += m
            c = dict(zip(chunk.schema.names, chunk.columns, strict=True))
            ctx_cols = {
                "source": pa.array([src] * m), "position": pos,
                "broker": pa.array([broker] * m, pa.string()),
                # int64 here: a partition beyond int32 is a bad value of its row (decode_kv), not a failed file
                "log_partition": pc.cast(c["partition"], pa.int64()) if "partition" in c else None,
                "log_offset": pc.cast(c["offset"], pa.int64()) if "offset" in c else None,
                "record_ms": _parquet_ms(c["timestamp"]) if "timestamp" in c else None,
            }
            ctx_cols = {k: v for k, v in ctx_cols.items() if v is not None}
            for out, bad, good in decode_kv(_binary(c["key"]), _binary(c["value"]), ctx_cols, p,
                                            unit="record", source=src):
                n_bad += bad
                n_out += good
                yield out
    except Exception as e:  # noqa: BLE001 - a corrupt row group: the rest of the file is one bad unit
        if p.side:
            yield _file_failure(src, f"unreadable Parquet data after row {row_index}: {e}", broker=broker)
    finally:
        reader.close()
    if p.side:
        yield _stats(src, "record", n_read, n_bad, n_out)


def _decode_jsonl(src: str, broker: str | None, p: Pass) -> Iterator[pa.RecordBatch | None]:
    n_read = n_bad = n_out = 0
    side = RowBuffer(OFFSETS_WORK)
    pending: dict[str, list] = {k: [] for k in ("key", "value", "position", "log_partition", "log_offset",
                                                "record_ms")}

    def flush_pending() -> Iterator[pa.RecordBatch | None]:
        nonlocal n_bad, n_out
        m = len(pending["key"])
        if not m:
            return
        ctx_cols = {
            "source": pa.array([src] * m), "position": pa.array(pending["position"], pa.int64()),
            "broker": pa.array([broker] * m, pa.string()),
            "log_partition": pa.array(pending["log_partition"], pa.int32()),
            "log_offset": pa.array(pending["log_offset"], pa.int64()),
            "record_ms": pa.array(pending["record_ms"], pa.int64()),
        }
        keys = pa.array(pending["key"], pa.binary())
        values = pa.array(pending["value"], pa.binary())
        for v in pending.values():
            v.clear()
        for out, bad, good in decode_kv(keys, values, ctx_cols, p, unit="line", source=src):
            n_bad += bad
            n_out += good
            yield out

    try:
        for line_no, _bpos, line in iter_lines(src):
            if not line.strip():
                continue
            n_read += 1
            try:
                obj = json.loads(line)
                if not isinstance(obj, dict) or "key" not in obj:
                    raise ValueError("not a JSON object with a key")
                key = _b64(obj.get("key"))
                value = _b64(obj.get("value"))
                ts = obj.get("timestamp")
                ms = ts_ms(ts)
                if ts is not None and ms is None:
                    raise ValueError(f"unparseable timestamp {str(ts)[:40]!r}")
                part = _bounded(obj.get("partition"), "partition", 32)
                off = _bounded(obj.get("offset"), "offset", 64)
            except (ValueError, TypeError, OverflowError, RecursionError, binascii.Error) as e:
                n_bad += 1
                side.add(side_row(src, line_no, "line", f"bad dump line: {e}", line[:RAW_MAX], broker=broker))
                continue
            pending["key"].append(key)
            pending["value"].append(value)
            pending["position"].append(line_no)
            pending["log_partition"].append(part)
            pending["log_offset"].append(off)
            pending["record_ms"].append(ms)
            if len(pending["key"]) >= 8192:
                yield from flush_pending()
        yield from flush_pending()
    except OSError as e:
        if p.side:
            yield _file_failure(src, f"unreadable: {e}", broker=broker)
        return
    if p.side:
        side.add(stats_row(src, "line", n_read, n_bad, n_out))
        yield side.flush()


def _bounded(value: Any, name: str, bits: int) -> int | None:
    """An optional integer field of a dump line that must fit its ``bits``-bit column (None stays None)."""
    if value is None:
        return None
    v = int(value)
    if isinstance(value, float) and v != value:
        raise ValueError(f"{name} {value!r} is not an integer")
    if not -(1 << (bits - 1)) <= v < (1 << (bits - 1)):
        raise ValueError(f"{name} {str(value)[:40]} does not fit a {bits}-bit column")
    return v


def _b64(value: Any) -> bytes | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError("key/value must be a base64 string or null")
    return base64.b64decode(value, validate=True)
