"""``epoch-audit decode PATH``: print any supported input file as JSON lines (no Spark).

Like ``kafka-dump-log``, but for everything the audit reads: segments (``*.log``, with the
``__consumer_offsets`` key/value decoded), checkpoints, ``partition.metadata``, capture JSONL,
pcap/pcapng, Parquet/JSONL offset dumps and the tools' text dumps, and the KRaft metadata log
(``__cluster_metadata-0`` segments, ``<end>-<epoch>.checkpoint`` snapshots, ``bootstrap.checkpoint``,
``--cluster-metadata-decoder`` text: one ``metadata_record``/``control_record`` line per record). One JSON object per
batch / record / entry / observation; anything undecodable is an ``{"type": "error", ...}``
line with its position, and decoding goes on (a Parquet file without ``key``/``value`` columns, or no Parquet at
all, is one such line for the whole file). What is decoded but worth knowing — bytes after a
complete MetadataResponse body or ``__consumer_offsets`` key/value (ignored, as Kafka's clients and
tools do), or a value version above the newest known one (read with the newest layout) — gets an
``{"type": "info", "unit", "position", "reason"}`` line right after the unit it concerns; so does a
segment's final entry that the file ends inside (the end of the log, as Kafka reads it: a copy of the
active segment), while zero bytes after a segment's last entry (a preallocated segment) are no line.
"""

from __future__ import annotations

import base64
import dataclasses
import datetime as dt
import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from epochlib import checkpoint, coordinator, dumps, pcap, protocol, records
from epochlib.errors import DecodeError
from epochlib.kraft import codec as kraft_codec
from epochlib.kraft import dumptext as kraft_dump
from epochlib.kraft import snapshot as kraft_snapshot
from jobs.ingest.metadata import LINE_ERRORS, parse_capture_line

__all__ = ["DESCRIPTIVE_TYPES", "capture_time", "detect_kind", "decode_path", "to_json"]

#: Row types that describe a file or the unit before them rather than being decoded from it: a note (``info``),
#: and a snapshot's name-derived summary (``snapshot``: end offset and epoch come from the file name, so it is
#: printed even for a zero-length ``.checkpoint``). ``epoch-audit decode`` does not count them as decoded.
DESCRIPTIVE_TYPES = frozenset({"info", "snapshot"})

_SEGMENT = re.compile(r"^\d{20}\.log$")
_OFFSET_CHECKPOINTS = {
    "replication-offset-checkpoint",
    "recovery-point-offset-checkpoint",
    "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint",
}
KINDS = ("segment", "leader-epoch-checkpoint", "offset-checkpoint", "partition-metadata", "pcap",
         "jsonl", "parquet", "text-dump", "metadata-log", "metadata-snapshot", "metadata-dump")


def detect_kind(path: Path, head: bytes) -> str | None:
    """Which decoder fits ``path``: by name first, then by the first bytes."""
    name = path.name
    if name == "leader-epoch-checkpoint":
        return "leader-epoch-checkpoint"
    if name in _OFFSET_CHECKPOINTS:
        return "offset-checkpoint"
    if name == "partition.metadata":
        return "partition-metadata"
    if name == "bootstrap.checkpoint" or kraft_snapshot.parse_snapshot_name(name):
        return "metadata-snapshot"
    if _SEGMENT.match(name) or name.endswith(".log"):
        return "metadata-log" if "__cluster_metadata" in str(path) else "segment"
    if name.endswith((".pcap", ".pcapng", ".cap")) or head[:4] in (
            b"\xa1\xb2\xc3\xd4", b"\xd4\xc3\xb2\xa1", b"\x0a\x0d\x0d\x0a", b"\xa1\xb2\x3c\x4d", b"\x4d\x3c\xb2\xa1"):
        return "pcap"
    if name.endswith(".parquet") or head[:4] == b"PAR1":
        return "parquet"
    if name.endswith((".jsonl", ".json")):
        return "jsonl"
    text = head.decode("utf-8", "replace")
    if kraft_dump.detect_metadata_dump(text):
        return "metadata-dump"
    if dumps.detect_dump_format(text):
        return "text-dump"
    return None


def to_json(obj: Any) -> str:
    """One compact JSON line; bytes as base64, dataclasses as dicts."""
    return json.dumps(_plain(obj), separators=(",", ":"), ensure_ascii=False)


def _plain(o: Any) -> Any:
    if dataclasses.is_dataclass(o) and not isinstance(o, type):
        return {f.name: _plain(getattr(o, f.name)) for f in dataclasses.fields(o)}
    if isinstance(o, dict):
        return {str(k): _plain(v) for k, v in o.items()}
    if isinstance(o, list | tuple):
        return [_plain(v) for v in o]
    if isinstance(o, bytes | bytearray | memoryview):
        return base64.b64encode(bytes(o)).decode("ascii")
    if isinstance(o, dt.datetime | dt.date):
        return o.isoformat()
    return o


def decode_path(path: str | Path, *, kind: str | None = None, offsets_decoder: bool | None = None,
                broker_ports: tuple[int, ...] = (9092,)) -> Iterator[dict[str, Any]]:
    """Decode one file into plain dicts (see the module docstring).

    Args:
        path: a local file.
        kind: force a decoder (one of ``KINDS``); detected from name and content when None.
        offsets_decoder: decode record keys/values as ``__consumer_offsets`` records; by default
            when the path names a ``__consumer_offsets-N`` directory.
        broker_ports: ports that identify the broker side in pcap files.

    Raises:
        ValueError: the file's kind cannot be recognised (and none was forced).
    """
    p = Path(path)
    data = p.read_bytes()
    kind = kind or detect_kind(p, data[:4096])
    if kind is None:
        raise ValueError(f"{p}: not a file epoch-audit recognises (use --kind one of {', '.join(KINDS)})")
    if offsets_decoder is None:
        offsets_decoder = "__consumer_offsets" in str(p)
    if kind == "segment":
        yield from _segment(data, offsets_decoder, records.segment_base_offset(p.name), _last_segment(p))
    elif kind == "leader-epoch-checkpoint":
        yield from _text_file(data, lambda d: [
            {"type": "lineage_entry", "epoch": e, "start_offset": s}
            for e, s in checkpoint.parse_leader_epoch_checkpoint(d).entries])
    elif kind == "offset-checkpoint":
        yield from _text_file(data, lambda d: [
            {"type": "checkpoint_entry", "topic": t, "partition": part, "offset": off}
            for (t, part), off in checkpoint.parse_offset_checkpoint(d).entries.items()])
    elif kind == "partition-metadata":
        yield from _text_file(data, _partition_metadata)
    elif kind == "pcap":
        yield from _pcap(data, broker_ports)
    elif kind == "jsonl":
        yield from _jsonl(data)
    elif kind == "parquet":
        yield from _parquet(p)
    elif kind == "text-dump":
        for item in dumps.iter_dump_records(data):
            if isinstance(item, dumps.DumpTail):
                yield _tail_info(item)
                continue
            if isinstance(item, dumps.DumpError):
                yield {"type": "error", "unit": item.unit, "position": item.line, "reason": item.reason}
            else:
                yield {"type": "record", **item}
    elif kind == "metadata-log":
        yield from _metadata_entries(kraft_codec.iter_metadata_log(
            data, segment_base_offset=records.segment_base_offset(p.name), ends_file=True,
            last_segment=_last_segment(p)))
    elif kind == "metadata-snapshot":
        snap = kraft_snapshot.read_snapshot(data, name=p.name)
        yield {"type": "snapshot", "end_offset": snap.end_offset, "epoch": snap.epoch,
               "last_contained_timestamp": snap.last_contained_timestamp, "complete": snap.complete}
        yield from _metadata_entries([*snap.entries, *snap.errors])
    elif kind == "metadata-dump":
        yield from _metadata_entries(kraft_dump.iter_dump_entries(data))
    else:
        raise ValueError(f"unknown kind {kind!r}; one of {', '.join(KINDS)}")


def _metadata_entries(items) -> Iterator[dict[str, Any]]:
    for e in items:
        if isinstance(e, records.IncompleteTail):
            yield _tail_info(e)
            continue
        if isinstance(e, kraft_codec.MetadataError):
            yield {"type": "error", "unit": e.unit, "position": e.position, "offset": e.offset, "reason": e.reason}
            continue
        head = {"offset": e.offset, "timestamp": e.timestamp, "raft_epoch": e.raft_epoch, "position": e.position}
        if e.control is not None:
            c = e.control
            yield {"type": "control_record", **head, "control_type": c.control_type, "name": c.name,
                   "data": c.data, "raw": c.raw}
            continue
        r = e.record
        row = {"type": "metadata_record", **head, "api_key": r.api_key, "record_type": r.name,
               "version": r.version, "data": r.data}
        if r.raw is not None or r.note is not None:
            row.update(raw=r.raw, note=r.note)
        yield row


def _partition_metadata(data: bytes) -> Iterator[dict[str, Any]]:
    pm = checkpoint.parse_partition_metadata(data)
    yield {"type": "partition_metadata", "version": pm.version, "topic_id": pm.topic_id}
    if pm.note:  # what Kafka reads but never writes: accepted, said
        yield _info("file", 0, pm.note)


def _text_file(data: bytes, parse) -> Iterator[dict[str, Any]]:
    try:
        yield from parse(data)
    except DecodeError as e:
        yield {"type": "error", "unit": e.unit, "position": e.offset, "reason": e.reason}


def _coordinator_fields(key: bytes | None, value: bytes | None) -> dict[str, Any]:
    if key is None:
        return {"coordinator_error": "record has no key"}
    try:
        rec = coordinator.decode_record(key, value)
    except DecodeError as e:
        return {"coordinator_error": str(e)}
    return {"key": rec.key, "value": rec.value, "is_tombstone": rec.is_tombstone}


def _info(unit: str, position: Any, reason: str) -> dict[str, Any]:
    return {"type": "info", "unit": unit, "position": position, "reason": reason}


def _coordinator_notes(row: dict[str, Any], unit: str, position: Any) -> Iterator[dict[str, Any]]:
    """Info lines for a decoded ``__consumer_offsets`` record's marks (see epochlib.coordinator)."""
    parts = {part: row.get(part) for part in ("key", "value")}
    parts = {k: v for k, v in parts.items() if isinstance(v, dict)}  # raw bytes: a record not decoded as one
    for part, fields in parts.items():
        n = fields.get("trailing_bytes")
        if n:
            yield _info(unit, position, f"{n} bytes after the complete __consumer_offsets {part} (ignored)")
    value = parts.get("value") or {}
    if value.get("version_above_known"):
        yield _info(unit, position, f"value version {value['version']} is above the newest known; "
                                    "read with the newest known layout")


def _observation_notes(obs: list[dict[str, Any]], unit: str, position: Any) -> Iterator[dict[str, Any]]:
    n = obs[0]["trailing_bytes"] if obs else 0
    if n:
        yield _info(unit, position, f"{n} bytes after the complete MetadataResponse body (ignored, as clients do)")


def _tail_info(t: records.IncompleteTail) -> dict[str, Any]:
    """The note for a final entry the file ends inside: not decoded, not an error (Kafka's reader ends the log
    there; a copy of the active segment taken while the broker wrote it ends so)."""
    unit = "line" if isinstance(t, dumps.DumpTail) else "batch"  # a dump's: its line number
    return _info(unit, t.position, f"{t.reason}: the end of the log, as Kafka reads it (a copy of the active "
                                      "segment ends so); not decoded")


def _last_segment(p: Path) -> bool:
    """``p`` has the highest base offset of the segment files beside it (or is no segment, or its folder cannot be
    listed): only its partition's last segment can be cut by a copy while the broker appends to it."""
    base = records.segment_base_offset(p.name)
    if base is None:
        return True
    try:
        return all((records.segment_base_offset(q.name) or -1) <= base for q in p.parent.glob("*.log"))
    except OSError:
        return True


def _segment(data: bytes, offsets_decoder: bool, base_offset: int | None,
             last_segment: bool = True) -> Iterator[dict[str, Any]]:
    """A segment file's batches and records; ``base_offset`` (its file name's) bounds the batches' offsets, and
    its end is read as Kafka reads it (a zero fill: nothing; a final entry cut short: an info line — an error in a
    rolled segment, not ``last_segment``, which Kafka never appends to)."""
    for item in records.iter_batches(data, segment_base_offset=base_offset, ends_file=True,
                                     last_segment=last_segment):
        if isinstance(item, records.IncompleteTail):
            yield _tail_info(item)
            continue
        if isinstance(item, records.BadBatch):
            yield {"type": "error", "unit": "batch", "position": item.position, "reason": item.reason,
                   "length": item.length}
            continue
        head = {f.name: getattr(item, f.name) for f in dataclasses.fields(item) if f.name != "records"}
        yield {"type": "batch", **head}
        for r in item.records:
            row: dict[str, Any] = {"type": "record", "batch_position": item.position,
                                   **{f.name: getattr(r, f.name) for f in dataclasses.fields(r)}}
            if offsets_decoder and not item.is_control:
                row.update(_coordinator_fields(r.key, r.value))
            yield row
            yield from _coordinator_notes(row, "record", r.offset)


def _observations(response: bytes, api_version: int) -> list[dict[str, Any]]:
    return protocol.metadata_observations(response, api_version)


def _pcap(data: bytes, broker_ports: tuple[int, ...]) -> Iterator[dict[str, Any]]:
    found = False
    for item in pcap.iter_exchanges(data, broker_ports=broker_ports):
        found = True
        if isinstance(item, pcap.CaptureError):
            yield {"type": "error", "unit": item.unit, "position": item.position, "reason": item.reason}
            continue
        ts = capture_time(item.ts)
        if ts is None:  # as a run quarantines the frame
            yield {"type": "error", "unit": "frame", "position": item.frame_index,
                   "reason": f"capture time {item.ts!r:.40} is outside 0001-01-01..9999-12-31"}
            continue
        base = {"ts": ts, "client": item.client, "broker": item.broker, "client_id": item.client_id,
                "api_key": item.api_key, "api_version": item.api_version,
                "correlation_id": item.correlation_id, "frame": item.frame_index}
        if item.api_key != protocol.METADATA:
            yield {"type": "exchange", **base}
            continue
        try:
            rows = _observations(item.response, item.api_version)
        except DecodeError as e:
            yield {"type": "error", "unit": "frame", "position": item.frame_index, "reason": str(e)}
            continue
        for obs in rows:
            yield {"type": "metadata_observation", **base, **obs}
        yield from _observation_notes(rows, "frame", item.frame_index)
    if not found:  # nothing on the broker ports: name the ports that carried traffic (a wrong --broker-port)
        from .ingest.metadata import PORT_HINT_TOP, no_exchange_reason

        yield _info("file", 0, no_exchange_reason(broker_ports, pcap.tcp_ports(data, top=PORT_HINT_TOP)))


_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def capture_time(seconds: float) -> str | None:
    """A pcap packet's time (epoch seconds) as the ``ts`` of decode's JSON lines: ISO-8601 UTC to the microsecond,
    as capture JSONL lines spell theirs (``2024-03-04T00:03:14.956123Z``); None when no date can hold it."""
    try:
        t = _EPOCH + dt.timedelta(microseconds=round(seconds * 1_000_000))
    except (OverflowError, ValueError):  # inf, nan, or beyond 0001..9999
        return None
    return t.isoformat(timespec="microseconds").replace("+00:00", "Z")


def _b64(v: Any) -> bytes | None:
    if v is None:
        return None
    if isinstance(v, str):
        return base64.b64decode(v, validate=True)
    raise ValueError("expected a base64 string")


def _jsonl(data: bytes) -> Iterator[dict[str, Any]]:
    for n, line in enumerate(data.decode("utf-8", "replace").splitlines(), start=1):
        if not line.strip():
            continue
        try:
            obj = json.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("line is not a JSON object")
            if "response" in obj:  # a Metadata capture line, read as a run reads it (same errors)
                try:
                    _, response, version, _, token = parse_capture_line(line)
                except LINE_ERRORS as e:
                    raise ValueError(f"bad capture line: {e}") from None
                meta = {"ts": obj.get("ts"), "client_id": obj.get("client_id"), "broker": obj.get("broker"),
                        "api_version": version, "line": n, **({"metadata_token": token} if token is not None else {})}
                rows = _observations(response, version)
                for obs in rows:
                    yield {"type": "metadata_observation", **meta, **obs}
                yield from _observation_notes(rows, "line", n)
            elif "key" in obj:  # a dump row with base64 key/value
                row = {"type": "record", "line": n, "partition": obj.get("partition"),
                       "offset": obj.get("offset"), "timestamp": obj.get("timestamp"),
                       **_coordinator_fields(_b64(obj["key"]), _b64(obj.get("value")))}
                yield row
                yield from _coordinator_notes(row, "line", n)
            else:
                raise ValueError("neither a capture line (response) nor a dump row (key)")
        except (DecodeError, ValueError, TypeError, KeyError) as e:
            yield {"type": "error", "unit": "line", "position": n, "reason": str(e)}


#: What a Parquet dump must be (the run quarantines any other file as one unit, with the same words).
PARQUET_EXPECTED = "not a readable key/value Parquet dump (expected Parquet with key and value columns, as Spark's " \
                   "Kafka source writes)"


def _parquet(path: Path) -> Iterator[dict[str, Any]]:
    """A Parquet dump's rows as records; a file that is not one (not Parquet at all, no key/value columns) is one
    error line saying what was expected, and a row group that cannot be read ends the file with one."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    try:
        pf = pq.ParquetFile(path)
        names = set(pf.schema_arrow.names)
        if not {"key", "value"} <= names:
            raise ValueError(f"no key/value columns (has {', '.join(sorted(names)) or 'none'})")
    except (pa.ArrowException, ValueError) as e:  # pyarrow's own words, after ours: "Parquet magic bytes not found…"
        yield {"type": "error", "unit": "file", "position": 0, "reason": f"{PARQUET_EXPECTED}: {_first_line(e)}"}
        return
    row = 0
    try:
        # row group by row group: the rows before a damaged one are printed
        for batch in (b for g in range(pf.num_row_groups) for b in pf.iter_batches(batch_size=10_000, row_groups=[g])):
            cols = batch.to_pydict()
            for i in range(batch.num_rows):
                rec = {"type": "record", "row": row, "partition": cols.get("partition", [None] * batch.num_rows)[i],
                       "offset": cols.get("offset", [None] * batch.num_rows)[i],
                       **_coordinator_fields(cols["key"][i], cols["value"][i])}
                yield rec
                yield from _coordinator_notes(rec, "row", row)
                row += 1
    except (pa.ArrowException, OSError) as e:  # a damaged row group: the rest of the file is one bad unit, as a run has it
        yield {"type": "error", "unit": "row", "position": row,
               "reason": f"unreadable Parquet data after row {row}: {_first_line(e)}"}


def _first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]
