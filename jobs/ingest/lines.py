"""Line-oriented files (JSONL captures and dumps, tool text dumps) -> line ranges, decoded by many tasks.

As segments are cut into byte ranges on batch boundaries (:mod:`.ranges`), a large line file is cut into
byte ranges on line boundaries, so an hourly multi-GB capture spreads over executors. The driver sends
only names and sizes (:func:`line_ranges_frame`); files up to the target size are one range each, larger
ones are cut by :func:`plan_line_ranges` in executors, which reads the file once, sequentially, to find
cut points and count the lines and characters before each (so line numbers and character positions of
every unit are the same as in a whole-file read). A range may only start where a unit starts:

- JSONL and Scala formatter lines: any line;
- console-consumer JSON: a line starting a JSON object or a ``CreateTime:``/``Partition:``… prefix (glued
  objects without newlines stay in one range);
- kafka-dump-log: a batch line (``baseOffset:``, or a ≤2.x ``offset: … position:`` line), so records keep
  their batch's fields; the file's last ``Dumping <file>`` line before the cut travels with the range
  (``context``), so its records keep their ``__consumer_offsets`` partition.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa

from jobs.fs import iter_lines, open_reader

from .ranges import planned_frame

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .discover import InputFile

__all__ = ["LINE_RANGE_SCHEMA", "cut_points", "line_ranges_frame", "plan_line_ranges", "read_lines"]

#: One row per file or line range: the input of :func:`plan_line_ranges` and of the range decoders.
LINE_RANGE_SCHEMA = pa.schema([
    pa.field("source", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("form", pa.string()),
    pa.field("broker", pa.string()),
    pa.field("target", pa.int64()),
    pa.field("start", pa.int64()),
    pa.field("end", pa.int64()),
    pa.field("first_line", pa.int64()),  # lines before ``start``
    pa.field("first_char", pa.int64()),  # characters (UTF-8) before ``start``
    pa.field("fmt", pa.string()),  # text dumps: the format detected from the file's head
    pa.field("context", pa.string()),  # kafka-dump-log: the last "Dumping <file>" line before start
])

_CHUNK = 8 << 20
_CONSOLE_START = re.compile(rb"\s*(\{|(CreateTime|LogAppendTime|NoTimestampType|Partition|Offset):)")
_DUMPLOG_START = re.compile(rb"\s*(baseOffset:|offset:|Dumping )")


def _starts_unit(fmt: str | None) -> Callable[[bytes], bool]:
    if fmt == "console_json":
        return lambda line: _CONSOLE_START.match(line) is not None
    if fmt == "dump_log":
        return lambda line: _DUMPLOG_START.match(line) is not None
    return lambda line: True


def _chars(data: bytes | memoryview) -> int:
    """UTF-8 characters in ``data`` (bytes that are not continuation bytes)."""
    a = np.frombuffer(data, np.uint8)
    return int(a.size - np.count_nonzero((a & 0xC0) == 0x80))


def cut_points(read_at: Callable[[int, int], bytes], size: int, target: int, fmt: str | None = None
               ) -> list[tuple[int, int, int, int, str | None]]:
    """``(start, end, lines before start, characters before start, context)`` ranges of about ``target``
    bytes covering ``[0, size)``, each starting where a unit of ``fmt`` starts (see the module
    docstring). Reads the file once, in chunks."""
    if size <= 0:
        return []
    if target <= 0:
        raise ValueError("target must be positive")
    starts_unit = _starts_unit(fmt)
    out: list[tuple[int, int, int, int, str | None]] = []
    start, start_lines, start_chars, start_ctx = 0, 0, 0, None
    lines = chars = 0  # before the line being looked at
    context: str | None = None
    pos = 0  # bytes read so far
    carry, carry_pos = b"", 0
    while True:
        data = read_at(pos, min(_CHUNK, size - pos)) if pos < size else b""
        pos += len(data)
        eof = pos >= size or not data
        buf = carry + data
        i = 0
        while i < len(buf):
            nl = buf.find(b"\n", i)
            if nl < 0:
                if not eof:
                    break
                nl = len(buf) - 1  # the last line, without a newline
            line_start = carry_pos + i
            line = buf[i:nl]
            if line_start - start >= target and starts_unit(line[:64]):
                out.append((start, line_start, start_lines, start_chars, start_ctx))
                start, start_lines, start_chars, start_ctx = line_start, lines, chars, context
            if fmt == "dump_log" and line.lstrip().startswith(b"Dumping "):
                context = line.strip().decode("utf-8", "replace")
            lines += 1
            chars += _chars(buf[i:nl + 1])
            i = nl + 1
        carry_pos += i
        carry = buf[i:]
        if eof:
            break
    out.append((start, size, start_lines, start_chars, start_ctx))
    return out


def plan_line_ranges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: each file row larger than its ``target`` -> its line ranges."""
    for rb in batches:
        out = []
        for row in rb.to_pylist():
            try:
                with open_reader(row["source"]) as r:
                    fmt = row.get("fmt")
                    if row["form"] == "text" and fmt is None:
                        from .textdumps import detect_format

                        fmt = detect_format(r.read_at(0, 1 << 20))
                    if row["form"] == "text" and fmt is None:  # no dump: one file unit, quarantined whole
                        cuts = [(0, row["size"], 0, 0, None)]
                    else:
                        cuts = cut_points(r.read_at, row["size"], row["target"], fmt)
            except OSError:
                cuts, fmt = [(0, row["size"], 0, 0, None)], None
            for start, end, first_line, first_char, ctx in cuts:
                out.append({**row, "start": start, "end": end, "first_line": first_line, "first_char": first_char,
                            "fmt": fmt, "context": ctx})
        if out:
            yield pa.RecordBatch.from_pylist(out, schema=LINE_RANGE_SCHEMA)


def line_ranges_frame(spark: SparkSession, files: Sequence[InputFile], *, split_bytes: int,
                      parallelism: int) -> DataFrame:
    """One row per line range of ``files`` (:data:`LINE_RANGE_SCHEMA`): files up to ``split_bytes`` whole,
    larger ones cut by :func:`plan_line_ranges` in executors (one task per large file), the ranges then
    spread over about one task per ``split_bytes``."""
    return planned_frame(spark, files, LINE_RANGE_SCHEMA, plan_line_ranges, split_bytes=split_bytes,
                         parallelism=parallelism, whole={"first_line": 0, "first_char": 0},
                         small_slices=parallelism * 2, spread_small=False)


def read_lines(row: dict, chunk: int = 8 << 20) -> Iterator[tuple[int, bytes]]:
    """``(line number, line bytes)`` of one range row (whole file when it has no ``end``), numbered as in
    the whole file; streamed in chunks (:func:`jobs.fs.iter_lines`)."""
    for line_no, _pos, line in iter_lines(row["source"], chunk, start=row.get("start") or 0, end=row.get("end"),
                                          first_line=row.get("first_line") or 0):
        yield line_no, line
