"""Segment files -> byte ranges on batch boundaries, and a range -> Arrow tables (offsets and log dirs).

Large segments are decoded by many tasks: the driver sends only names and sizes
(:func:`ranges_frame`); files up to the target size are one range each, larger ones are cut by
:func:`plan_segment_ranges` in executors, which reads only the entry headers
(:func:`epochlib.records.split_points`). Every range starts on a batch boundary, so each decodes on its
own (:func:`read_range`, :func:`segment_tables`, in pieces of bounded decompressed size). Both the ``__consumer_offsets`` segments
(:mod:`.offsets_segments`) and the log-dir snapshot segments (:mod:`.logdirs`) go this way.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
import pyarrow.compute as pc

from epochlib import records
from epochlib.arrow_compat import null_where
from jobs.frames import union_all
from jobs.fs import open_reader

from ._spark import frame, rows_of, to_spark_schema

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .discover import InputFile

__all__ = ["DECODED_BUDGET", "PIECE_BYTES", "RANGE_SCHEMA", "plan_segment_ranges", "ranges_frame", "read_range",
           "segment_tables"]

#: One row per file or byte range: the input of :func:`plan_segment_ranges` and of the range decoders.
RANGE_SCHEMA = pa.schema([
    pa.field("source", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("start", pa.int64()),
    pa.field("end", pa.int64()),
    pa.field("target", pa.int64()),
    pa.field("broker", pa.string()),
    pa.field("log_partition", pa.int32()),
    pa.field("topic", pa.string()),
    pa.field("partition", pa.int32()),
    pa.field("snapshot_ms", pa.int64()),
    # the base offset the segment's file name gives: the codec checks each batch's offsets against its range
    pa.field("base_offset", pa.int64()),
    # the segment has the highest base offset in its folder (null: not known, taken as the last): only that one
    # may end inside a batch because it was copied while written (:attr:`.discover.InputFile.last_segment`)
    pa.field("last_segment", pa.bool_()),
])


def plan_segment_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: each input file row -> its byte ranges on batch boundaries.

    Files no larger than their ``target`` become one range without being opened; larger ones are walked
    header by header (:func:`epochlib.records.split_points`), reading only the 17-byte entry prefixes.
    An unreadable file becomes one range covering it all, so the decoder reports the error.
    """
    for rb in batches:
        out = []
        for row in rb.to_pylist():
            size, target = row["size"], row["target"]
            ranges: list[tuple[int, int]]
            if size <= target:
                ranges = [(0, size)] if size > 0 else []
            else:
                try:
                    with open_reader(row["source"]) as r:
                        ranges = records.split_points(r.read_at, size, target)
                except OSError:
                    ranges = [(0, size)]
            for start, end in ranges:
                out.append({**row, "start": start, "end": end})
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=RANGE_SCHEMA)


def ranges_frame(
    spark: SparkSession, files: Sequence[InputFile], *, split_bytes: int, parallelism: int,
    plan: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]] = plan_segment_ranges,
) -> DataFrame:
    """One row per byte range of the segment files (:data:`RANGE_SCHEMA`), ranges on batch boundaries.

    Files up to ``split_bytes`` are one range, decided here from their size alone; larger ones are split
    by ``plan`` in executors (one task per large file). The ranges are then spread over about one task
    per ``split_bytes`` of input, so a 1 GiB segment is decoded by ~16 tasks.
    """
    return planned_frame(spark, files, RANGE_SCHEMA, plan, split_bytes=split_bytes, parallelism=parallelism,
                         whole={}, small_slices=parallelism, spread_small=True)


def planned_frame(
    spark: SparkSession, files: Sequence[InputFile], schema: pa.Schema,
    plan: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]], *, split_bytes: int, parallelism: int,
    whole: dict, small_slices: int, spread_small: bool,
) -> DataFrame:
    """The one small/big split of the range planners (segments here, lines in :mod:`.lines`): a file up to
    ``split_bytes`` is one row ``start=0, end=size`` plus ``whole``'s fields, in ``small_slices`` slices;
    a larger one is cut by ``plan`` in executors (one task per file). The rows are then spread over about
    one task per ``split_bytes`` of input — always, or only when some file was cut (``spread_small``)."""
    small = [f for f in files if f.size <= split_bytes]
    big = [f for f in files if f.size > split_bytes]
    est = sum(max(1, -(-f.size // split_bytes)) for f in big) + max(1, len(small) // 16)
    width = max(1, min(est, max(parallelism * 4, len(big) * 16)))
    parts = []
    if small:
        rows = rows_of(small, schema, target=split_bytes)
        for r in rows:
            r.update(start=0, end=r["size"], **whole)
        # without a cut file these rows are the whole list: spread once, to the final width (:func:`frame`)
        parts.append(frame(spark, rows, schema, width if spread_small and not big else small_slices))
    if not big:
        return union_all(parts)
    rows = rows_of(big, schema, target=split_bytes)
    parts.append(frame(spark, rows, schema, len(rows)).mapInArrow(plan, to_spark_schema(schema)))
    # the ranges a large file was cut into (in the one task that planned it) are always spread
    return union_all(parts).repartition(width)


def read_range(row: dict) -> bytes:
    """The bytes of one :data:`RANGE_SCHEMA` row. Raises ``OSError`` when the file cannot be read."""
    with open_reader(row["source"]) as r:
        return r.read_at(row["start"], row["end"] - row["start"])


#: Decompressed bytes one task holds at once while decoding a segment range (plus at most one batch,
#: which epochlib's per-batch cap bounds at 64 MiB): a range is decoded and handed on in pieces of this
#: size, so 32 batches of 2 KB that each inflate to 64 MiB no longer drive a worker to 4 GiB.
DECODED_BUDGET = 32 << 20
#: Input bytes of a range decoded at once: the decoded columns of a batch of commits take ~13x its bytes
#: (a whole 64 MiB range drove a Python worker to ~850 MiB RSS; 8 MiB pieces keep it near 250 MiB).
PIECE_BYTES = 8 << 20


def segment_tables(buf: bytes, base: int, *, with_records: bool = True, budget: int | None = None,
                   segment_base_offset: int | None = None, ends_file: bool = False, last_segment: bool | None = None,
                   ) -> Iterator[tuple[pa.RecordBatch, pa.RecordBatch | None, records.IncompleteTail | None]]:
    """Decode a byte range of a segment with the codec's Arrow batch function, in pieces of at most
    ``budget`` (default :data:`DECODED_BUDGET`) decompressed bytes and :data:`PIECE_BYTES` input bytes
    (:func:`epochlib.records.iter_batches_arrow`): per piece, (one row per log entry, bad ones with
    ``error``/``raw``; one row per record, ``control_type`` as the marker name ``COMMIT``/``ABORT``/…
    for control records; the incomplete entry the file ends in, or None). Without records there is one piece.
    ``segment_base_offset`` (the file name's, :data:`RANGE_SCHEMA` ``base_offset``): a batch outside the
    segment's offset range is a bad row. ``ends_file`` (the range runs to the file's end): a zero fill after
    the last entry is no row, and an incomplete final entry is the last piece's third item, not a row (a limit
    of the copy, counted apart: :func:`epochlib.records.iter_batches`) — unless ``last_segment`` is False (a
    rolled segment, :data:`RANGE_SCHEMA` ``last_segment``): there the cut entry is a bad row (bytes lost)."""
    for out in records.iter_batches_arrow(buf, base_position=base, with_records=with_records,
                                          max_decoded=budget or DECODED_BUDGET, max_input=PIECE_BYTES,
                                          segment_base_offset=segment_base_offset, ends_file=ends_file,
                                          last_segment=last_segment is not False):
        rec = out.records
        if rec is not None and rec.num_rows:
            ct = rec.column("control_type")
            names = pa.array([records.CONTROL_TYPE_NAMES.get(i) for i in range(7)], pa.string())
            valid = pc.and_(pc.greater_equal(ct, 0), pc.less(ct, 7)).fill_null(False)
            named = null_where(pc.take(names, pc.if_else(valid, ct, 0).cast(pa.int32())), pc.invert(valid))
            rec = rec.set_column(rec.schema.get_field_index("control_type"), "control_type", named)
        yield out.batches, rec, out.tail
        del out, rec
