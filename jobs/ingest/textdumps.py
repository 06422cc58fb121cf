"""Tool text dumps of ``__consumer_offsets`` -> offsets rows (executor side, one function per pass).

The format (console-consumer JSON, Scala formatter lines, kafka-dump-log) is detected from the file's
content with :func:`epochlib.dumps.detect_dump_format`; a ``.txt`` file that is none of them is one
quarantined ``file`` unit (a non-Kafka file). Each record or unparseable line is one ``line`` unit;
``position`` is the dump's line number (the character offset for glued console JSON objects that do
not start a line). kafka-dump-log's ``Found N invalid bytes at the end of <file>`` after a folder's last dumped
segment is no unit but counted in ``n_unpaired`` (a cut final batch, as the binary reader counts it; a bad line
after a rolled segment: :class:`epochlib.dumps.DumpTail`). kafka-dump-log transaction markers become ``marker`` rows, so transactional commits
are resolved by the same Spark window as segments. A large dump is cut into line ranges (:mod:`.lines`)
decoded by many tasks; each file or range is decoded into rows of every kind (:func:`decode_text_range`)
and each pass keeps its part (:meth:`._kv.Pass.select`).
"""

from __future__ import annotations

import bisect
import re
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from epochlib import coordinator, dumps
from jobs.fs import open_reader

from ._kv import COMMIT_PASS, MEMBER_RECORD_TYPE, ONE_PASS, SIDE_PASS, Pass, member_record_members
from ._rows import OFFSETS_WORK, RAW_MAX, RowBuffer, bad_value, side_row, stats_row

__all__ = ["decode_text_both", "decode_text_commits", "decode_text_file", "decode_text_range", "decode_text_side", "detect_format"]


def decode_text_commits(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function, commit pass: text dump files (:data:`~jobs.ingest._rows.FILE_SCHEMA`)
    -> non-transactional commits (:data:`~jobs.ingest._rows.COMMITS`)."""
    return _decode_files(batches, COMMIT_PASS)


def decode_text_side(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function, side pass: text dump files -> every other row, quarantine and stats
    (:data:`~jobs.ingest._rows.OFFSETS_WORK`)."""
    return _decode_files(batches, SIDE_PASS)


def decode_text_both(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Both passes from one decode (:data:`~._kv.ONE_PASS`): commit-pass and side-pass batches, mixed."""
    return _decode_files(batches, ONE_PASS)


def _decode_files(batches: Iterator[pa.RecordBatch], p: Pass) -> Iterator[pa.RecordBatch]:
    for rb in batches:
        for row in rb.to_pylist():
            for b in decode_text_range(row):
                yield from p.select(b)


def _members(members: Any) -> list[dict] | None:
    if members is None:
        return None
    out = []
    for m in members:
        a = m.get("assignment")
        assigned: list = []
        if isinstance(a, dict):
            assigned = a.get("assigned_partitions") or []
        elif isinstance(a, (bytes, bytearray)):
            try:
                assigned = coordinator.decode_consumer_assignment(a).get("assigned_partitions") or []
            except Exception:  # noqa: BLE001 - DecodeError: keep the member without its assignment
                assigned = []
        out.append({
            "member_id": m.get("member_id"), "group_instance_id": m.get("group_instance_id"),
            "client_id": m.get("client_id"), "client_host": m.get("client_host"),
            "assigned_partitions": [{"topic": p.get("topic"), "partitions": list(p.get("partitions") or [])}
                                    for p in assigned if isinstance(p, dict)],
        })
    return out


def _nonneg(v: Any) -> int | None:
    return v if isinstance(v, int) and not isinstance(v, bool) and v >= 0 else None


def _row(item: dict, src: str, broker: str | None) -> dict | None:
    ctx = {
        # the line the record starts on (console JSON glued on one line: its line, not a character offset)
        "source": src, "position": item.get("line_no", item.get("line")), "broker": broker,
        "log_partition": item.get("log_partition"), "log_offset": item.get("log_offset"),
        "record_ms": item.get("record_ts"), "batch_leader_epoch": item.get("batch_leader_epoch"),
        "producer_id": item.get("producer_id"), "is_transactional": item.get("is_transactional"),
    }
    kind = item.get("kind")
    if kind == "offset_commit":
        return {**ctx, "row_kind": "commit", "key_type": item.get("record_type"),
                "value_version": item.get("value_version"), "is_tombstone": bool(item.get("is_tombstone")),
                "group_id": item.get("group"), "topic": item.get("topic"), "partition": item.get("partition"),
                "committed_offset": item.get("offset"), "leader_epoch": item.get("leader_epoch"),
                "metadata": item.get("metadata"), "commit_ms": item.get("commit_timestamp"),
                "expire_ms": item.get("expire_timestamp")}
    if kind == "control":
        if item.get("control_type") not in ("COMMIT", "ABORT"):
            return None
        return {**ctx, "row_kind": "marker", "control_type": item.get("control_type"),
                "is_transactional": True}
    rtype = item.get("record_type")
    if rtype is None:
        return None
    members = _members(item.get("members")) if kind == "group_metadata" else None
    count = None if members is None else len(members)
    if rtype == MEMBER_RECORD_TYPE:
        members = member_record_members(item.get("member_id"), None if item.get("is_tombstone") else item)
    return {**ctx, "row_kind": "group", "key_type": rtype, "record_type": coordinator.snake_type_name(rtype),
            "value_version": item.get("value_version"), "is_tombstone": bool(item.get("is_tombstone")),
            "group_id": item.get("group", item.get("group_id")), "protocol_type": item.get("protocol_type"),
            "generation": item.get("generation") if rtype == 2 else item.get("group_epoch", item.get("epoch")),
            "protocol": item.get("protocol"), "leader": item.get("leader"),
            "state_ms": _nonneg(item.get("current_state_timestamp")),
            "member_count": count, "members": members}


_AT_CHAR = re.compile(r"at character (\d+)")


def detect_format(data: bytes) -> str | None:
    """The dump format, from the first of the file's first 16 lines (within 1 MiB) that shows one: a
    garbled first line is one bad line of a dump, not a reason to reject the whole file."""
    start = 0
    for _ in range(16):
        fmt = dumps.detect_dump_format(data[start:start + 8192].decode("utf-8", "replace"))
        if fmt is not None:
            return fmt
        nl = data.find(b"\n", start, 1 << 20)
        if nl < 0:
            return None
        start = nl + 1
    return None


def _unusable(row: dict, item: dict) -> str | None:
    """Why a parsed dump record cannot become a row: a value that does not fit its column (a partition
    of 2^40, an offset of 10^30, a commit time no date can hold), or a group record whose key the tool
    did not print (kafka-dump-log <=3.7 ``unknown::version=N``: no group, no value) -- counted as a
    quarantined line with the reason, not a row with a null group nor a silent drop."""
    why = bad_value(row, OFFSETS_WORK)
    if why is not None:
        return f"bad value: {why}"
    if row["row_kind"] == "group" and row.get("group_id") is None:
        return (f"record type {row.get('key_type')}: the tool printed neither its key nor its value "
                "(kafka-dump-log <=3.7 'unknown::version'); dump with kafka-dump-log >=3.8 or read the segment")
    return None


class _RecordText:
    """The text a parsed record came from, for the quarantine row of one that cannot become a row: the
    dump's line (from the record's character offset to its line's end for glued console JSON). The
    lines are split once, on the first such record: they are rare, and a dump can be large."""

    def __init__(self, data: bytes) -> None:
        self._data = data
        self._text: str | None = None
        self._starts: list[int] = []

    def at(self, where: int | None, unit: str | None) -> bytes | None:
        if where is None:
            return None
        if self._text is None:
            self._text = dumps.dump_text(self._data)  # the text the positions point into
            self._starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", self._text)]
        if unit == "char":
            start = where
        elif 1 <= where <= len(self._starts):
            start = self._starts[where - 1]
        else:
            return None
        end = bisect.bisect_right(self._starts, start)
        stop = self._starts[end] if end < len(self._starts) else len(self._text)
        return self._text[start:stop].rstrip("\r\n").encode("utf-8")[:RAW_MAX]


def decode_text_file(src: str, broker: str | None) -> Iterator[pa.RecordBatch]:
    """Decode one whole text dump into :data:`~jobs.ingest._rows.OFFSETS_WORK` rows of every kind (see
    the module docstring)."""
    return decode_text_range({"source": src, "broker": broker})


def decode_text_range(row: dict) -> Iterator[pa.RecordBatch]:
    """Decode one text dump, or one line range of it (:data:`~jobs.ingest.lines.LINE_RANGE_SCHEMA`: ``start``,
    ``end``, the lines and characters before ``start``, the detected ``fmt`` and the kafka-dump-log
    ``context`` line), into :data:`~jobs.ingest._rows.OFFSETS_WORK` rows; positions are those of a
    whole-file read."""
    src, broker = row["source"], row.get("broker")
    start, end = row.get("start") or 0, row.get("end")
    rows = RowBuffer(OFFSETS_WORK)
    try:
        with open_reader(src) as r:
            data = r.read_at(start, (r.size if end is None else end) - start)
    except OSError as e:
        rows.add(side_row(src, start, "file", f"unreadable: {e}", broker=broker))
        rows.add(stats_row(src, "file", 1, 1, 0))
        yield rows.flush()
        return
    fmt = row.get("fmt") or detect_format(data)
    if fmt is None:
        rows.add(side_row(src, 0, "file", "not a Kafka tool dump (unrecognised text format)", data[:RAW_MAX],
                          broker=broker))
        rows.add(stats_row(src, "file", 1, 1, 0))
        yield rows.flush()
        return
    context = row.get("context")
    line_shift, char_shift = row.get("first_line") or 0, row.get("first_char") or 0
    if context:  # the range's "Dumping <file>" line goes first, as line 0 of the range
        data = context.encode("utf-8") + b"\n" + data
        line_shift -= 1
        char_shift -= len(context) + 1
    n_read = n_bad = n_out = n_tail = 0
    text = _RecordText(data)
    for item in dumps.iter_dump_records(data, fmt):
        if isinstance(item, dumps.DumpTail):  # kafka-dump-log's invalid bytes at a segment's end: counted apart
            n_tail += 1
            continue
        n_read += 1
        if isinstance(item, dumps.DumpError):
            n_bad += 1
            at = item.line + (line_shift if item.unit == "line" else char_shift)
            where = "" if item.unit == "line" else f"(character {at}) "
            reason = item.reason
            if char_shift:  # the decoder's character offsets are the range's: make them the file's
                reason = _AT_CHAR.sub(lambda m: f"at character {int(m[1]) + char_shift}", reason)
            rows.add(side_row(src, at, "line", where + reason, item.raw.encode("utf-8")[:RAW_MAX],
                              broker=broker))
        else:
            here, unit = item.get("line"), item.get("unit")  # the range's own position, for its text
            if item.get("line") is not None:
                item["line"] += char_shift if item.get("unit") == "char" else line_shift
            if item.get("line_no") is not None:  # console JSON: the line the record starts on
                item["line_no"] += line_shift
            row = _row(item, src, broker)
            why = None if row is None else _unusable(row, item)
            if why is not None:
                n_bad += 1
                rows.add(side_row(src, item.get("line"), "line", why, text.at(here, unit), broker=broker,
                                  log_partition=item.get("log_partition"), log_offset=item.get("log_offset")))
            elif row is not None:
                rows.add(row)
                if row["row_kind"] != "marker":
                    n_out += 1
        if len(rows) >= 8192:
            yield rows.flush()
    rows.add(stats_row(src, "line", n_read, n_bad, n_out, n_tail or None))  # null: no unit of that kind met
    yield rows.flush()
