"""``__consumer_offsets`` segment ranges -> offsets rows (executor side, one function per pass).

Ranges come from :mod:`.ranges` (on batch boundaries). Each is read in pieces of about
:data:`.ranges.PIECE_BYTES` (cut on batch boundaries) and decoded with :func:`.ranges.segment_tables`, whose
own pieces bound the decompressed bytes held, so a task's memory does not grow with the range; a bad CRC is one
quarantined ``batch``, a record of a good batch whose key/value cannot be decoded one quarantined ``record``
(:func:`._kv.decode_kv`). At the end of the file a final batch cut short (a copy of the active segment) is no
unit but counted in ``n_unpaired`` — in the partition's last segment only; in a rolled one it is a quarantined
``batch`` (Kafka never appends to it, so the bytes were lost) — and a zero fill after the last batch (``log.preallocate``) is nothing, as
Kafka's reader takes them. COMMIT/ABORT control records become ``marker`` rows for the ``txn_state`` window.
"""

from __future__ import annotations

import bisect
import struct
from collections.abc import Iterator

import pyarrow as pa
import pyarrow.compute as pc

from epochlib import records
from jobs.fs import open_reader

from ._kv import COMMIT_PASS, ONE_PASS, SIDE_PASS, Pass, decode_kv
from ._rows import OFFSETS_WORK, RowBuffer, make_batch, repeat, side_row, stats_row
from .ranges import PIECE_BYTES, segment_tables

__all__ = ["OUT_ROWS", "decode_segment_both", "decode_segment_commits", "decode_segment_side"]

#: Rows per Arrow batch handed back to Spark by the commit pass: a 64 MiB range decodes to ~1.2 M rows,
#: and the JVM holds a whole batch off-heap per task; 64 k rows bound that (CPU is the same from 4 k
#: rows to a whole range, measured with bench/bench_ingest.py).
OUT_ROWS = 1 << 16


def decode_segment_commits(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function, commit pass: segment ranges -> non-transactional commits
    (:data:`~jobs.ingest._rows.COMMITS`), in batches of at most :data:`OUT_ROWS` rows."""
    for b in _decode_ranges(batches, COMMIT_PASS):
        if b.num_rows <= OUT_ROWS:
            yield b
        else:
            for i in range(0, b.num_rows, OUT_ROWS):
                yield b.slice(i, OUT_ROWS)


def decode_segment_side(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function, side pass: segment ranges -> every other row
    (:data:`~jobs.ingest._rows.OFFSETS_WORK`) with the quarantine and stats rows."""
    return _decode_ranges(batches, SIDE_PASS)


def decode_segment_both(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Both passes from one decode (:data:`~._kv.ONE_PASS`): commit-pass and side-pass batches, mixed."""
    return _decode_ranges(batches, ONE_PASS)


def _decode_ranges(batches: Iterator[pa.RecordBatch], p: Pass) -> Iterator[pa.RecordBatch]:
    for rb in batches:
        for row in rb.to_pylist():
            yield from _decode_range(row, p)


def _decode_range(row: dict, p: Pass) -> Iterator[pa.RecordBatch]:
    source, start = row["source"], row["start"]
    broker, log_partition = row["broker"], row["log_partition"]
    side = RowBuffer(OFFSETS_WORK)
    counts = [0, 0, 0, 0, 0, 0]  # batches read, batches bad, records read, records bad, rows out, incomplete tails
    try:
        with open_reader(source) as r:
            # the range is read piece by piece (cut on batch boundaries, headers only), so a task holds one
            # piece's bytes and decoded columns, not the whole range's
            length = row["end"] - start
            pieces = records.split_points(lambda pos, n: r.read_at(start + pos, n), length, PIECE_BYTES)
            for s, e in pieces:
                buf = r.read_at(start + s, e - s)
                at_end = start + e == row["size"]  # the file's last piece: where a live copy's last batch is cut
                for heads, rec, tail in segment_tables(buf, start + s, segment_base_offset=row.get("base_offset"),
                                                       ends_file=at_end, last_segment=row.get("last_segment")):
                    counts[5] += tail is not None
                    yield from _decode_piece(heads, rec, row, p, side, counts)
                    if len(side) >= 8192:
                        yield side.flush()
                del buf
    except OSError as e:  # the rest of the range is one bad file unit; what was decoded before it counts
        if p.side:
            side.add(side_row(source, start, "file", f"unreadable: {e}", broker=broker,
                              log_partition=log_partition))
            side.add(stats_row(source, "file", 1, 1, 0))
    if p.side:
        n_heads, n_bad, n_rec, n_rec_bad, n_out, n_tail = counts
        side.add(stats_row(source, "batch", n_heads, n_bad, 0, n_tail))
        side.add(stats_row(source, "record", n_rec, n_rec_bad, n_out))
        yield side.flush()


def _bad_batch_ms(heads: pa.RecordBatch) -> list[int | None]:
    """A time for each bad batch of ``heads`` (in position order), so that the run of its day counts it: its own
    v2 header's max timestamp when the header is there and lies between the good batches around it (a CRC
    failure may be in the timestamps themselves), else the previous good batch's max timestamp, else the next
    one's base timestamp; None when the piece has no good batch (the unit stays undated)."""
    err = heads.column("error").is_valid().to_pylist()
    max_ts, base_ts = heads.column("max_timestamp").to_pylist(), heads.column("base_timestamp").to_pylist()
    raws = heads.column("raw").to_pylist()
    good = [i for i, e in enumerate(err) if not e]
    out: list[int | None] = []
    for i, e in enumerate(err):
        if not e:
            continue
        k = bisect.bisect_left(good, i)
        prev = max_ts[good[k - 1]] if k > 0 else None
        nxt = base_ts[good[k]] if k < len(good) else None
        raw = raws[i] or b""
        own = struct.unpack_from(">q", raw, 35)[0] if len(raw) >= 43 and raw[16] == 2 else None
        fits = own is not None and (prev is None or own >= prev) and (nxt is None or own <= nxt)
        out.append(own if fits and (prev is not None or nxt is not None) else prev if prev is not None else nxt)
    return out


def _decode_piece(heads: pa.RecordBatch, rec: pa.RecordBatch | None, row: dict, p: Pass, side: RowBuffer,
                  counts: list[int]) -> Iterator[pa.RecordBatch]:
    """One piece of a range (:func:`.ranges.segment_tables`): its rows for pass ``p``, quarantine rows
    into ``side`` and the counts added to ``counts``."""
    source, broker, log_partition = row["source"], row["broker"], row["log_partition"]
    counts[0] += heads.num_rows
    if p.side:
        bad = heads.filter(pc.is_valid(heads.column("error")))
        counts[1] += bad.num_rows
        dates = _bad_batch_ms(heads) if bad.num_rows else []
        for h, q_ms in zip(bad.select(["position", "error", "raw"]).to_pylist(), dates, strict=True):
            side.add(side_row(source, h["position"], "batch", h["error"], h["raw"], q_ms=q_ms, broker=broker,
                              log_partition=log_partition))
    if rec is not None and rec.num_rows:
        is_control = rec.column("is_control")
        any_control = pc.any(is_control).as_py()
        if any_control and p.side:
            markers = rec.filter(pc.and_(is_control, pc.is_in(rec.column("control_type"),
                                                              pa.array(["COMMIT", "ABORT"]))))
            if markers.num_rows:
                m = markers.num_rows
                yield make_batch(OFFSETS_WORK, {
                    "row_kind": repeat("marker", m, pa.string()), "source": repeat(source, m, pa.string()),
                    "position": markers.column("batch_position"),
                    "broker": repeat(broker, m, pa.string()),
                    "log_partition": repeat(log_partition, m, pa.int32()),
                    "log_offset": markers.column("offset"), "record_ms": markers.column("timestamp"),
                    "producer_id": markers.column("producer_id"),
                    "is_transactional": markers.column("is_transactional"),
                    "control_type": markers.column("control_type"),
                }, m)
        data = rec.filter(pc.invert(is_control)) if any_control else rec
        if data.num_rows:
            m = data.num_rows
            ctx_cols = {
                "source": repeat(source, m, pa.string()),
                "position": data.column("batch_position"),
                "broker": repeat(broker, m, pa.string()),
                "log_partition": repeat(log_partition, m, pa.int32()),
                "log_offset": data.column("offset"), "record_ms": data.column("timestamp"),
                "batch_leader_epoch": data.column("partition_leader_epoch"),
                "producer_id": data.column("producer_id"),
                "is_transactional": data.column("is_transactional"),
            }
            counts[2] += m
            for out, nbad, good in decode_kv(data.column("key"), data.column("value"), ctx_cols, p,
                                             unit="record", source=source):
                counts[4] += good
                counts[3] += nbad
                if out is not None:
                    yield out
