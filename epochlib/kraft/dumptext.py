"""``kafka-dump-log.sh --cluster-metadata-decoder`` text (kraft-metadata.md §4), read and written.

Reader: :func:`iter_dump_entries` turns the text into the same
:class:`~epochlib.kraft.codec.MetadataEntry` objects as the binary decoder — offset and
CreateTime from the record prefix (or batch base offset + index with ``--skip-record-metadata``),
Raft epoch from the preceding batch line, ``position`` = the batch line's number — so
:func:`~epochlib.kraft.replay.replay` takes either. The JSON ``data`` (lower-camel schema names,
tagged fields only when not default) is mapped onto the schema tables, absent fields taking
their defaults, so a record reads equal to its binary twin. Control records give a
:class:`~epochlib.kraft.codec.ControlRecord` (``data`` None when the tool printed only
``controlType: NAME(n)``). Bad lines (``payload: Error at …``, broken JSON) become
:class:`~epochlib.kraft.codec.MetadataError` with ``unit="line"``; nothing is raised.
``Dumping``/``Log starting offset``/``Snapshot end offset``/``KRaft bootstrap snapshot`` lines
start a new file; :func:`dump_files` reports them.

``--skip-record-metadata``: the Scala tool prints a control record as an empty line (its ``controlType`` /
``SnapshotHeader`` / ``SnapshotFooter`` text is inside ``if (!skipRecordMetadata)``, the ``println()`` is not),
and a metadata record as `` payload: <JSON>``. A control batch whose batch line is followed by no record line
(:func:`_unprinted_controls`) gives its records from the batch line — offsets ``baseOffset`` on, its CreateTime
and epoch — with the type Kafka writes there: in a snapshot the header batch (offset 0) holds the
SnapshotHeader (then KRaftVersion, KRaftVoters) and any later control batch is the footer; in a log a one-record
control batch that opens a Raft epoch (another epoch than the batch before it in the file, or the file's first
batch) is the new leader's LeaderChange; any other is an unknown control type. The header's
``lastContainedLogTimestamp`` is not printed: the header batch's CreateTime (when the snapshot was written, at
or just after it) stands in.

``Found N invalid bytes at the end of <file>``: kafka-dump-log (``DumpLogSegments.dumpLog``) prints it whenever
the batches it could frame end before the file does — ``FileLogInputStream.nextBatch`` returned null because 17
or fewer bytes were left, or an entry announced more bytes than were left: a final batch a copy cut short (a live
copy of the active segment), a damaged size field, or a short zero fill. (A longer zero fill, ``log.preallocate``,
prints no such line: the tool stops with ``CorruptRecordException``, "record size 0 smaller than minimum record
overhead", and the text just ends.) The binary reader tells these apart; the text cannot, so the reader takes the
line as the binary reader takes a cut final batch: in a log segment that is the dump's last of its folder (the
highest base offset among the ``Dumping`` lines of that folder) it is a :class:`DumpTail` — the end of the log,
counted apart (``units_unpaired``), not a bad unit; in a rolled segment (a later one of the same folder is in the
dump: Kafka never appends to it, so bytes were lost) and in a snapshot (written whole) it is a
:class:`~epochlib.kraft.codec.MetadataError`, as in the bytes.

Writer: :func:`format_dump` prints a segment or snapshot the way the Scala tool (3.3–4.0) does,
from the bytes, for fixtures and round-trip tests.
"""

from __future__ import annotations

import base64
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .._schema import FieldSpec, MessageSpec
from .._wire import Buffer
from ..dumps import DumpTail, invalid_bytes_line, last_dumped_segments, rolled_segment_cut
from ..errors import DecodeError
from ..records import BadBatch, iter_batches, segment_base_offset
from .codec import (
    UNKNOWN,
    ControlRecord,
    MetadataEntry,
    MetadataError,
    MetadataRecord,
    decode_control_value,
    decode_record_value,
)
from .schemas import CONTROL_SPECS, RECORD_SPECS, enum_name

__all__ = ["DumpFile", "DumpTail", "detect_metadata_dump", "dump_files", "format_dump", "iter_dump_entries", "record_json"]

_ENUMS = {enum_name(s.name): k for k, s in RECORD_SPECS.items()}
_PAIR = re.compile(r"(\w+): (\S+)")
_CTL_TEXT = {"SnapshotHeader": 3, "SnapshotFooter": 4, "KRaftVersion": 5, "KRaftVoters": 6, "LeaderChange:": 2}
_CTL_WORDS = {v: k.rstrip(":") for k, v in _CTL_TEXT.items()}
_CONTROL_TYPE = re.compile(r"controlType: (\w+)\((-?\d+)\)")


@dataclass(frozen=True, slots=True)
class DumpFile:
    """One ``Dumping <path>`` section: ``kind`` ``log`` / ``snapshot`` / ``bootstrap`` / ``unknown``."""

    path: str
    line: int
    kind: str
    log_start_offset: int | None = None
    end_offset: int | None = None
    epoch: int | None = None


def detect_metadata_dump(text: str) -> bool:
    """True when ``text`` (the head of a file) looks like ``--cluster-metadata-decoder`` output."""
    return ('"type":"' in text and '_RECORD"' in text and "payload: " in text) or \
        "KRaft bootstrap snapshot" in text or re.search(r"Snapshot end offset: \d+, epoch: \d+", text) is not None


def _lower_first(name: str) -> str:
    return name[:1].lower() + name[1:]


def _from_json(fields: tuple[FieldSpec, ...], version: int, obj: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        jname = _lower_first(f.name)
        if version not in f.versions or jname not in obj:
            out[f.key] = f.default_value()
            continue
        v = obj[jname]
        if v is None:
            out[f.key] = None
        elif f.is_array and f.elem_type == "struct":
            out[f.key] = [_from_json(f.fields, version, x) for x in v]
        elif f.is_array:
            out[f.key] = [base64.b64decode(x) if f.elem_type == "bytes" else x for x in v]
        elif f.type == "struct":
            out[f.key] = _from_json(f.fields, version, v)
        elif f.type in ("bytes", "records"):
            out[f.key] = base64.b64decode(v)
        elif f.type == "float64":
            out[f.key] = float(v)
        else:
            out[f.key] = v
    return out


def _to_json(fields: tuple[FieldSpec, ...], version: int, data: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f in fields:
        if version not in f.versions:
            continue
        v = data.get(f.key, f.default_value())
        if f.tag is not None and version in f.tagged_versions:
            d = f.default_value()
            if (list(v) if isinstance(v, tuple | list) else v) == d:
                continue
        if v is None:
            out[_lower_first(f.name)] = None
        elif f.is_array and f.elem_type == "struct":
            out[_lower_first(f.name)] = [_to_json(f.fields, version, x) for x in v]
        elif f.is_array:
            out[_lower_first(f.name)] = [base64.b64encode(x).decode() if isinstance(x, bytes) else x for x in v]
        elif f.type == "struct":
            out[_lower_first(f.name)] = _to_json(f.fields, version, v)
        elif isinstance(v, bytes):
            out[_lower_first(f.name)] = base64.b64encode(v).decode()
        else:
            out[_lower_first(f.name)] = v
    return out


def record_json(rec: MetadataRecord) -> dict[str, Any]:
    """The tool's payload object ``{"type", "version", "data"}`` of a decoded record."""
    spec = RECORD_SPECS.get(rec.api_key)
    if spec is None or rec.data is None:
        return {"type": f"UNKNOWN({rec.api_key})", "version": rec.version, "data": {}}
    v = min(rec.version, spec.valid_versions.hi)
    return {"type": enum_name(spec.name), "version": rec.version, "data": _to_json(spec.fields, v, rec.data)}


def _record_from_json(obj: Any) -> MetadataRecord:
    if not isinstance(obj, dict) or not isinstance(obj.get("type"), str) or not isinstance(obj.get("version"), int):
        raise ValueError("payload is not {type, version, data}")
    api_key = _ENUMS.get(obj["type"])
    version = obj["version"]
    data = obj.get("data") or {}
    if not isinstance(data, dict):
        raise ValueError("payload data is not an object")
    if api_key is None:
        return MetadataRecord(-1, version, UNKNOWN, None, None, f"unknown record type {obj['type']}")
    spec: MessageSpec = RECORD_SPECS[api_key]
    hi = spec.valid_versions.hi
    note = f"v{version} read with the v{hi} layout" if version > hi else None
    return MetadataRecord(api_key, version, spec.name, _from_json(spec.fields, min(version, hi), data), None, note)


def _control_from_json(ctype: int, obj: Any) -> ControlRecord:
    if not isinstance(obj, dict):
        raise ValueError("control payload is not an object")
    spec = CONTROL_SPECS[ctype]
    return ControlRecord(ctype, spec.name, _from_json(spec.fields, 0, obj))


def _int(pairs: dict[str, str], key: str, default: int | None = None) -> int | None:
    v = pairs.get(key)
    try:
        return int(v) if v is not None else default
    except ValueError:
        return default


#: kafka-dump-log's line after a file's last whole batch (a torn tail), and :func:`format_dump`'s for a bad batch.
_TORN = re.compile(r"Found (\d+ invalid bytes at the end of |invalid batch at position )")


def _invalid_bytes(s: str, n: int, line: str, section: DumpFile | None, last_logs: set[str],
                   at_end: bool) -> MetadataError | DumpTail:
    """What the tool's ``Found N invalid bytes at the end of <file>`` line is (module docstring); ``at_end``: it
    ends its file's section (the tool prints it last; only a ``Dumping`` line or the end of the text follows)."""
    m = invalid_bytes_line(s)
    if m is None or section is None or not at_end:
        return MetadataError(n, "line", s, line.encode()[:4096])
    is_log = section.kind == "log" or (section.kind == "unknown" and segment_base_offset(section.path) is not None)
    if not is_log:  # a snapshot is written whole: a cut one is damaged, as in the bytes
        return MetadataError(n, "line", s, line.encode()[:4096])
    rolled = rolled_segment_cut(section.path, last_logs)
    if rolled is not None:
        return MetadataError(n, "line", f"{s}: {rolled}", line.encode()[:4096])
    return DumpTail(n, m[0], None, m[1])


def _control(ctype: int, data: dict[str, Any] | None = None) -> ControlRecord:
    spec = CONTROL_SPECS.get(ctype)
    return ControlRecord(ctype, spec.name if spec else UNKNOWN, data)


def _unprinted_controls(batch: dict[str, Any] | None, section: DumpFile | None) -> Iterator[MetadataEntry]:
    """The records of a control batch that printed none (``--skip-record-metadata``: module docstring), from its
    batch line; nothing for any other batch. Marks the batch as done."""
    if batch is None or not batch["control"] or batch["index"] or not batch["valid"]:
        return
    base, count, epoch, ts = batch["base"], batch["count"], batch["epoch"], batch["ts"]
    batch["index"] = count
    kind = section.kind if section is not None else "unknown"
    if kind == "unknown" and section is not None and segment_base_offset(section.path) is not None:
        kind = "log"
    for i in range(count):
        if kind in ("snapshot", "bootstrap"):
            if base == 0:  # the header batch: SnapshotHeader, then (kraft.version 1) KRaftVersion and KRaftVoters
                ctl = _control((3, 5, 6)[i], {"control_version": 0, "last_contained_log_timestamp": ts}
                               if i == 0 else None) if i < 3 else _control(-1)
            else:
                ctl = _control(4 if count == 1 else -1)
        elif kind == "log" and count == 1 and (batch["prev_epoch"] is None or batch["prev_epoch"] != epoch):
            ctl = _control(2)  # a new leader's first record in its epoch
        else:
            ctl = _control(-1)
        yield MetadataEntry(base + i, ts, epoch, batch["line"], control=ctl)


def _walk(text: str) -> Iterator[tuple[str, Any]]:
    """("file", DumpFile) and ("entry", MetadataEntry | MetadataError | DumpTail) in line order."""
    batch: dict[str, Any] | None = None
    files: list[DumpFile] = []
    last_logs = last_dumped_segments(text) if "invalid bytes at the end of" in text else set()
    pending: tuple[str, int, str, DumpFile | None] | None = None  # an invalid-bytes line, decided by the next one
    for n, line in enumerate(text.splitlines(), start=1):
        s = line.strip()
        if not s:
            continue
        if pending is not None:
            yield "entry", _invalid_bytes(*pending, last_logs, s.startswith("Dumping "))
            pending = None
        if s.startswith(("Dumping ", "baseOffset:")) or _TORN.match(s):  # the batch before has ended
            for e in _unprinted_controls(batch, files[-1] if files else None):
                yield "entry", e
        try:
            if s.startswith("Dumping "):
                files.append(DumpFile(s[len("Dumping "):], n, "unknown"))
                batch = None
                yield "file", files[-1]
                continue
            if s.startswith("Log starting offset:") and files:
                f = files[-1]
                files[-1] = DumpFile(f.path, f.line, "log", int(s.split(":", 1)[1]))
                yield "file", files[-1]
                continue
            m = re.match(r"Snapshot end offset: (\d+), epoch: (\d+)", s)
            if m and files:
                f = files[-1]
                files[-1] = DumpFile(f.path, f.line, "snapshot", None, int(m.group(1)), int(m.group(2)))
                yield "file", files[-1]
                continue
            if s == "KRaft bootstrap snapshot" and files:
                f = files[-1]
                files[-1] = DumpFile(f.path, f.line, "bootstrap")
                yield "file", files[-1]
                continue
            if s.startswith("baseOffset:"):
                p = dict(_PAIR.findall(s))
                batch = {"line": n, "base": int(p["baseOffset"]), "epoch": _int(p, "partitionLeaderEpoch", -1),
                         "ts": _int(p, "CreateTime", _int(p, "LogAppendTime", -1)), "control": p.get("isControl") == "true",
                         "index": 0, "valid": p.get("isvalid") != "false", "count": _int(p, "count", 1) or 0,
                         "prev_epoch": batch["epoch"] if batch is not None else None}
                continue
            # the tool's word for bytes it could not frame at a file's end: as the binary reader takes a final batch
            # the file ends inside (a DumpTail in the last segment of a folder; bad in a rolled one or a snapshot);
            # format_dump's "Found invalid batch at position" is a bad batch
            if _TORN.match(s):
                if invalid_bytes_line(s) is not None:
                    pending = (s, n, line, files[-1] if files else None)
                else:
                    yield "entry", MetadataError(n, "line", s, line.encode()[:4096])
                continue
            if not (s.startswith("|") or s.startswith("payload:") or s.startswith("offset:")):
                continue  # tool chatter (warnings, summaries)
            if batch is None:
                raise ValueError("record line before any batch line")
            if not batch["valid"]:  # the tool prints a batch whose CRC fails, and its records: corrupt bytes
                batch["index"] += 1
                yield "entry", MetadataError(n, "line", "record of a batch whose CRC check failed (isvalid: false)",
                                             line.encode()[:4096])
                continue
            head, sep, payload = s.partition("payload: ")
            p = dict(_PAIR.findall(head))
            offset = _int(p, "offset", batch["base"] + batch["index"])
            ts = _int(p, "CreateTime", _int(p, "LogAppendTime", batch["ts"]))
            batch["index"] += 1
            pos = batch["line"]
            if sep:
                if payload.startswith("Error at"):
                    yield "entry", MetadataError(n, "line", payload, line.encode()[:4096], offset)
                    continue
                rec = _record_from_json(json.loads(payload))
                yield "entry", MetadataEntry(offset, ts, batch["epoch"], pos, record=rec)
                continue
            ctl = _control_line(head)
            if ctl is None:
                raise ValueError("record line with neither a payload nor a control record")
            yield "entry", MetadataEntry(offset, ts, batch["epoch"], pos, control=ctl)
        except (ValueError, KeyError, TypeError, DecodeError, IndexError) as e:
            yield "entry", MetadataError(n, "line", f"{type(e).__name__}: {e}", line.encode()[:4096])
    for e in _unprinted_controls(batch, files[-1] if files else None):
        yield "entry", e
    if pending is not None:
        yield "entry", _invalid_bytes(*pending, last_logs, True)


def _control_line(head: str) -> ControlRecord | None:
    for word, ctype in _CTL_TEXT.items():
        i = head.find(" " + word + " ") if not word.endswith(":") else head.find(" " + word)
        if i >= 0:
            return _control_from_json(ctype, json.loads(head[i + len(word) + 1:].strip()))
    m = _CONTROL_TYPE.search(head)
    if m:
        ctype = int(m.group(2))
        spec = CONTROL_SPECS.get(ctype)
        return ControlRecord(ctype, spec.name if spec else UNKNOWN, None)
    return None


def iter_dump_entries(text: str | bytes) -> Iterator[MetadataEntry | MetadataError | DumpTail]:
    """Every record of a ``--cluster-metadata-decoder`` dump (all files in it, in order), and a :class:`DumpTail`
    where the tool found invalid bytes at the end of a folder's last log segment (module docstring)."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8", "replace")
    for kind, item in _walk(text):
        if kind == "entry":
            yield item


def dump_files(text: str | bytes) -> list[DumpFile]:
    """The files a dump covers, with their kind and header numbers."""
    if isinstance(text, bytes | bytearray | memoryview):
        text = bytes(text).decode("utf-8", "replace")
    out: dict[int, DumpFile] = {}
    for kind, item in _walk(text):
        if kind == "file":
            out[item.line] = item
    return list(out.values())


def _js(o: Any) -> str:
    return json.dumps(o, separators=(",", ":"))


def format_dump(buf: Buffer, path: str, *, kind: str = "log", snapshot_id: tuple[int, int] | None = None,
                skip_record_metadata: bool = False) -> str:
    """The tool's text for a segment (``kind="log"``), snapshot or ``bootstrap`` file; with
    ``skip_record_metadata`` as ``--skip-record-metadata`` prints it (Scala: `` payload: <JSON>`` per record, an
    empty line per control record)."""
    lines = [f"Dumping {path}"]
    items = list(iter_batches(buf))
    if kind == "log":
        first = next((b.base_offset for b in items if not isinstance(b, BadBatch)), 0)
        lines.append(f"Log starting offset: {first}")
    elif kind == "snapshot" and snapshot_id:
        lines.append(f"Snapshot end offset: {snapshot_id[0]}, epoch: {snapshot_id[1]}")
    elif kind == "bootstrap":
        lines.append("KRaft bootstrap snapshot")
    for b in items:
        if isinstance(b, BadBatch):
            lines.append(f"Found invalid batch at position {b.position}: {b.reason}")
            continue
        lines.append(
            f"baseOffset: {b.base_offset} lastOffset: {b.last_offset} count: {b.records_count} baseSequence: -1 "
            f"lastSequence: -1 producerId: {b.producer_id} producerEpoch: {b.producer_epoch} "
            f"partitionLeaderEpoch: {b.partition_leader_epoch} isTransactional: {str(b.is_transactional).lower()} "
            f"isControl: {str(b.is_control).lower()} deleteHorizonMs: OptionalLong.empty position: {b.position} "
            f"CreateTime: {b.max_timestamp} size: {b.size} magic: 2 compresscodec: {b.compression} crc: {b.crc} "
            f"isvalid: true")
        for r in b.records:
            ksize = -1 if r.key is None else len(r.key)
            vsize = -1 if r.value is None else len(r.value)
            head = (f"| offset: {r.offset} CreateTime: {r.timestamp} keySize: {ksize} valueSize: {vsize} "
                    f"sequence: -1 headerKeys: []")
            if skip_record_metadata:
                head = ""
                if b.is_control:
                    lines.append("")
                    continue
            if b.is_control:
                try:
                    ctl = decode_control_value(r.control_type if r.control_type is not None else -1, r.value)
                except DecodeError:
                    ctl = ControlRecord(-1, UNKNOWN, None)
                if ctl.control_type == 2 or ctl.data is None:
                    lines.append(f"{head} controlType: {_ctl_enum(ctl.control_type)}({ctl.control_type})")
                else:
                    lines.append(f"{head} {_CTL_WORDS[ctl.control_type]} {_js(_ctl_json(ctl))}")
                continue
            try:
                rec = decode_record_value(r.value if r.value is not None else b"")
                lines.append(f"{head} payload: {_js(record_json(rec))}")
            except DecodeError as e:
                lines.append(f"{head} payload: Error at {e.offset}, skipping. {e.reason}")
    return "\n".join(lines) + "\n"


def _ctl_enum(t: int) -> str:
    from ..records import CONTROL_TYPE_NAMES

    return CONTROL_TYPE_NAMES.get(t, "UNKNOWN")


def _ctl_json(ctl: ControlRecord) -> dict[str, Any]:
    """The tool's JSON of a control record (``control_version`` prints as ``version``)."""
    return _to_json(CONTROL_SPECS[ctl.control_type].fields, 0, ctl.data)
