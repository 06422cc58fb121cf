"""Text dumps of ``__consumer_offsets`` written by Kafka's own tools (spec/kafka-formats.md §7.1, §7.2).

Three families, detected by content (:func:`detect_dump_format`):

* ``console_json`` — ``kafka-console-consumer`` with ``OffsetsMessageFormatter`` /
  ``GroupMetadataMessageFormatter`` (Kafka ≥3.9): one compact JSON object per record, **glued**
  (``}{``) or one per line. Key ``{"type": n, "data": …}`` (4.x) or ``{"version": n, "data": …}``
  (3.9); value ``{"version": n, "data": …}``, ``null`` for a tombstone, ``"data": "unknown"``
  for a version the tool could not decode.
* ``scala`` — the ≤3.x Scala formatters: ``[g,t,p]::OffsetAndMetadata(offset=…, leaderEpoch=…,
  metadata=…, commitTimestamp=…, expireTimestamp=…)``, ``[g,t,p]::NULL`` and
  ``<group>::GroupMetadata(…)`` lines.
* ``dump_log`` — ``kafka-dump-log --offsets-decoder``: ``Dumping <file>``, batch lines
  (``baseOffset: … partitionLeaderEpoch: … position: …``) each followed by record lines
  (``| offset: … key: … payload: …``); ≥3.8 prints JSON keys/payloads with *string* type and
  version, ≤3.7 prints ``offset_commit::group=g,partition=t-0 payload: offset=42``.

Every iterator yields one plain dict per record, shaped like the coordinator decoder's output
(snake_case field names) plus where it came from, or a :class:`DumpError` for a line/object it
cannot parse — it never raises on bad input, so the ingestion job can quarantine and go on.

Common record keys:

``kind``             ``"offset_commit"`` (types 0, 1), ``"group_metadata"`` (type 2), ``"control"``
                     (dump-log transaction markers etc.) or ``"other"`` (any other or unknown type)
``record_type``      the key's record type (int), ``None`` for control records and null keys
``value_version``    int, ``None`` when the dump does not show it
``is_tombstone``     bool
``line``             1-based line number; for a JSON object that does not start its line (glued
                     output) the 0-based character offset instead, with ``unit == "char"``
``unit``             ``"line"`` or ``"char"`` (meaning of ``line``)
``line_no``          (console JSON) the 1-based line the record starts on, also for glued objects

Offset commits add ``group, topic, partition, offset, leader_epoch`` (-1 when the value has none
or ``Optional.empty``; ``None`` when the tool does not print it: kafka-dump-log ≤3.7),
``metadata, commit_timestamp, expire_timestamp`` (-1 when absent, ``None`` when not printed); group
metadata adds ``group, protocol_type, generation, protocol, leader, current_state_timestamp,
members`` (a list of dicts with ``member_id, group_instance_id, client_id, client_host, …``).
Value fields are ``None`` on tombstones and absent when the tool printed ``"unknown"`` (or, ≤3.7
``unknown::version=N``, no payload). Other record types carry the key and value fields snake_cased
as the segment decoder names them (KIP-848 ``group_id`` plus ``group``, the group ``epoch``, …).
``dump_log`` records also carry ``log_offset, record_ts, timestamp_type, file, log_partition``
and the fields of the batch line they follow: ``base_offset, last_offset, batch_leader_epoch,
position, is_transactional, is_control, producer_id, producer_epoch`` (``None`` when unknown).
"""

from __future__ import annotations

import base64
import binascii
import bisect
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from .offsets_log import resolve_txn_states
from .records import IncompleteTail, segment_base_offset

__all__ = [
    "DumpError",
    "DumpTail",
    "detect_dump_format",
    "dump_text",
    "iter_console_json",
    "iter_dump_log",
    "iter_dump_records",
    "invalid_bytes_line",
    "iter_scala_lines",
    "last_dumped_segments",
    "rolled_segment_cut",
    "resolve_txn_states",
]

MAX_RAW = 4096


@dataclass(frozen=True, slots=True)
class DumpTail(IncompleteTail):
    """kafka-dump-log's ``Found N invalid bytes at the end of <file>`` at the end of a log segment that is the
    dump's last of its folder: the text's twin of the binary reader's :class:`~epochlib.records.IncompleteTail`
    (``position`` the line number, ``length`` N, ``announced`` None: the text does not say), not a bad unit.

    ``DumpLogSegments.dumpLog`` prints the line whenever the batches it could frame end before the file does
    (``FileLogInputStream.nextBatch`` returned null: 17 or fewer bytes left, or an entry announcing more bytes
    than are left): a final batch a copy cut short (a live copy of the active segment), a damaged size field or a
    short zero fill. A longer zero fill (``log.preallocate``) prints no such line — the tool stops with
    ``CorruptRecordException`` ("record size 0 smaller than minimum record overhead") and the text just ends. The
    binary reader tells these apart; the text cannot, so the readers take the line as the binary reader takes a cut
    final batch: a tail in the last segment of a folder (counted in ``units_unpaired``), a bad unit in a rolled
    segment (a later segment of the same folder is in the dump: Kafka never appends to it, so bytes were lost).
    """

    file: str = ""

    @property
    def reason(self) -> str:
        """What a note says of it."""
        return f"{self.length} invalid bytes at the end of {self.file} (kafka-dump-log): an incomplete final entry"


_INVALID_BYTES = re.compile(r"Found (\d+) invalid bytes at the end of (.*)")
_DUMPING = re.compile(r"^[ \t]*Dumping (.*?)[ \t\r]*$", re.MULTILINE)


def invalid_bytes_line(line: str) -> tuple[int, str] | None:
    """``(N, file)`` of kafka-dump-log's ``Found N invalid bytes at the end of <file>`` line, else None."""
    m = _INVALID_BYTES.match(line.strip())
    return (int(m[1]), m[2].strip()) if m else None


def last_dumped_segments(text: str) -> set[str]:
    """The paths of the ``Dumping <path>`` lines of ``text`` that are log segments (``<20 digits>.log``) with the
    highest base offset among the dump's segments of their folder (only those may end in a live copy's cut). A path
    without a folder (the tool run inside each partition's folder) names no partition: it is taken as its own last
    segment, as a run takes a segment given alone."""
    top: dict[str, tuple[int, str]] = {}
    alone: set[str] = set()
    for path in _DUMPING.findall(text):
        base = segment_base_offset(path)
        if base is None:
            continue
        cut = max(path.rfind("/"), path.rfind("\\"))  # a Windows path too
        if cut < 0:
            alone.add(path)
            continue
        folder = path[:cut]
        if folder not in top or base > top[folder][0]:
            top[folder] = (base, path)
    return {p for _, p in top.values()} | alone


def rolled_segment_cut(path: str, last: set[str]) -> str | None:
    """Why kafka-dump-log's invalid bytes at the end of the log segment ``path`` are lost bytes, not a live copy's cut
    (a later segment of its folder is in the dump: ``path`` is not in ``last``, :func:`last_dumped_segments`); None
    when they can be that cut (or ``path`` is no log segment)."""
    if segment_base_offset(path) is None or path in last:
        return None
    return ("cut short, but not the partition's last segment (a later segment of its folder is in the dump; Kafka "
            "never appends to a rolled segment: bytes lost)")


@dataclass(frozen=True, slots=True)
class DumpError:
    """A line (or JSON object) that could not be parsed; iteration continues after it.

    ``line`` is the 1-based line number, or the 0-based character offset when ``unit == "char"``.
    ``raw`` is the offending text, cut to 4096 characters.
    """

    line: int
    reason: str
    raw: str
    unit: str = "line"


Item = dict[str, Any]

_OFFSET_VALUE_KEYS = ("offset", "leader_epoch", "metadata", "commit_timestamp", "expire_timestamp")
_GROUP_VALUE_KEYS = ("protocol_type", "generation", "protocol", "leader", "current_state_timestamp", "members")
_KIND = {0: "offset_commit", 1: "offset_commit", 2: "group_metadata"}
_CAMEL = re.compile(r"(?<=[a-z0-9])([A-Z])")


def _snake(name: str) -> str:
    return _CAMEL.sub(r"_\1", name).lower()


def _snake_obj(obj: Any) -> Any:
    if isinstance(obj, dict):
        return {_snake(str(k)): _snake_obj(v) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_snake_obj(v) for v in obj]
    return obj


class _Bad(Exception):
    """Internal: this line/object cannot be parsed (becomes a DumpError)."""


def _int(value: Any, what: str) -> int:
    """A JSON number or numeric string (dump-log ≥3.8 prints type/version as strings)."""
    if type(value) is int:
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]{1,20}", value):
        return int(value)
    raise _Bad(f"{what} is not an integer: {str(value)[:40]!r}")


def _opt_int(value: Any, what: str) -> int | None:
    return None if value is None else _int(value, what)


def _err(line: int, reason: str, raw: str, unit: str = "line") -> DumpError:
    return DumpError(line, reason, raw[:MAX_RAW], unit)


def _kind(record_type: int | None) -> str:
    return _KIND.get(record_type, "other") if record_type is not None else "other"


def dump_text(data: str | bytes | bytearray | memoryview) -> str:
    """The text the dump readers see in ``data`` (a line that is not UTF-8 is read as empty): their line
    numbers and character offsets point into it."""
    return _decode_text(data)[0]


def _decode_text(data: str | bytes | bytearray | memoryview) -> tuple[str, list[DumpError]]:
    """Text of a dump; bytes are decoded per line so one bad line is one error, not a lost file."""
    if isinstance(data, str):
        return data, []
    raw = bytes(data)
    try:
        return raw.decode("utf-8"), []
    except UnicodeDecodeError:
        pass
    lines = raw.split(b"\n")
    out: list[str] = []
    errors: list[DumpError] = []
    for i, line in enumerate(lines, start=1):
        try:
            out.append(line.decode("utf-8"))
        except UnicodeDecodeError as e:
            errors.append(_err(i, f"invalid UTF-8 ({e.reason})", line.decode("utf-8", "replace")))
            out.append("")
    return "\n".join(out), errors


# ---------------------------------------------------------------- JSON key/value → record


def _b64_or_keep(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return base64.b64decode(value, validate=True)
        except (binascii.Error, ValueError):
            return value
    return _snake_obj(value)


def _group_members(members: Any) -> list[Item]:
    if not isinstance(members, list):
        raise _Bad("group metadata members is not a list")
    out = []
    for m in members:
        if not isinstance(m, dict):
            raise _Bad("group member is not an object")
        member = {_snake(str(k)): v for k, v in m.items()}
        member.setdefault("group_instance_id", None)
        member.setdefault("rebalance_timeout", -1)
        for k in ("subscription", "assignment"):
            if k in member:
                member[k] = _b64_or_keep(member[k])
        out.append(member)
    return out


def _record_from_json(key: Any, value: Any, *, tombstone: bool) -> Item:
    """Build the record dict from a formatter's key and value objects (console or dump-log JSON)."""
    rec: Item = {}
    if key is None:
        rec.update(kind="other", record_type=None)
    else:
        if not isinstance(key, dict):
            raise _Bad("key is not an object")
        if "type" in key:
            rtype = _int(key["type"], "key type")
        elif "version" in key:  # Kafka 3.9's formatter calls the record type "version"
            rtype = _int(key["version"], "key version")
        else:
            raise _Bad("key has neither type nor version")
        rec.update(kind=_kind(rtype), record_type=rtype)
        kdata = key.get("data")
        if isinstance(kdata, dict):
            for k, v in kdata.items():
                rec[_snake(str(k))] = v
            if "group" not in rec and isinstance(rec.get("group_id"), str):
                rec["group"] = rec["group_id"]  # KIP-848 keys: the segment decoder's record.group
        elif kdata != "unknown":
            raise _Bad("key data is neither an object nor \"unknown\"")
    kind = rec["kind"]
    rec["is_tombstone"] = tombstone
    if tombstone:
        rec["value_version"] = None
        if kind == "offset_commit":
            rec.update(dict.fromkeys(_OFFSET_VALUE_KEYS))
        elif kind == "group_metadata":
            rec.update(dict.fromkeys(_GROUP_VALUE_KEYS))
        return _check_key(rec)
    if not isinstance(value, dict):
        raise _Bad("value is not an object")
    rec["value_version"] = _opt_int(value.get("version"), "value version")
    vdata = value.get("data")
    if vdata == "unknown" or vdata is None:
        return _check_key(rec)
    if not isinstance(vdata, dict):
        raise _Bad("value data is neither an object nor \"unknown\"")
    fields = {_snake(str(k)): v for k, v in vdata.items()}
    if kind == "offset_commit":
        fields.setdefault("leader_epoch", -1)
        fields.setdefault("expire_timestamp", -1)
        if "offset" not in fields or "commit_timestamp" not in fields:
            raise _Bad("offset commit value lacks offset or commitTimestamp")
        for k in ("offset", "leader_epoch", "commit_timestamp", "expire_timestamp"):
            fields[k] = _int(fields[k], k)
        if not isinstance(fields.get("metadata", ""), str):
            raise _Bad("offset commit metadata is not a string")
        fields.setdefault("metadata", "")
    elif kind == "group_metadata":
        fields.setdefault("current_state_timestamp", -1)
        fields["generation"] = _int(fields.get("generation", fields.pop("generation_id", None)), "generation")
        fields["members"] = _group_members(fields.get("members", []))
        for k in ("protocol_type", "protocol", "leader"):
            fields.setdefault(k, None)
    else:
        fields = _snake_obj(fields)
    rec.update(fields)
    return _check_key(rec)


def _check_key(rec: Item) -> Item:
    kind = rec["kind"]
    if kind == "offset_commit":
        if not isinstance(rec.get("group"), str) or not isinstance(rec.get("topic"), str):
            raise _Bad("offset commit key lacks group or topic")
        rec["partition"] = _int(rec.get("partition"), "partition")
    elif kind == "group_metadata" and not isinstance(rec.get("group"), str):
        raise _Bad("group metadata key lacks group")
    return rec


# ---------------------------------------------------------------- console JSON


_JSON = json.JSONDecoder()
_CONSOLE_PREFIX = re.compile(r"(?:(CreateTime|LogAppendTime|NoTimestampType|Partition|Offset):(-?\d+)\t)+")
_PREFIX_PART = re.compile(r"(CreateTime|LogAppendTime|NoTimestampType|Partition|Offset):(-?\d+)\t")


def iter_console_json(text: str | bytes) -> Iterator[Item | DumpError]:
    """Records of ``kafka-console-consumer`` JSON output, glued (``}{``) or one per line.

    Objects are read with ``json.JSONDecoder().raw_decode`` so glued output needs no separator.
    ``print.timestamp`` / ``print.partition`` / ``print.offset`` prefixes (``CreateTime:…\\t``)
    are accepted and become ``record_ts`` / ``log_partition`` / ``log_offset``. After an
    unparseable stretch a :class:`DumpError` is yielded and reading resumes at the next line or
    the next ``{"key"``.
    """
    text, errors = _decode_text(text)
    yield from errors
    starts = [0] + [m.end() for m in re.finditer(r"\r\n|\r|\n", text)]
    n = len(text)
    pos = 0
    pending: Item = {}
    while pos < n:
        ch = text[pos]
        if ch.isspace():
            pos += 1
            continue
        li = bisect.bisect_right(starts, pos) - 1
        where, unit = (li + 1, "line") if _at_line_start(text, pos, starts[li]) else (pos, "char")
        if ch != "{":
            m = _CONSOLE_PREFIX.match(text, pos)
            if m:
                for pm in _PREFIX_PART.finditer(m.group(0)):
                    name, val = pm.group(1), int(pm.group(2))
                    if name == "Partition":
                        pending["log_partition"] = val
                    elif name == "Offset":
                        pending["log_offset"] = val
                    else:
                        pending["record_ts"], pending["timestamp_type"] = val, name
                pos = m.end()
                continue
            nxt = _resync(text, pos, starts, li)
            yield _err(where, "not a JSON object", text[pos : min(nxt, pos + MAX_RAW)], unit)
            pending = {}
            pos = nxt
            continue
        try:
            obj, end = _decode_object_at(text, pos)
        except (ValueError, RecursionError) as e:
            nxt = _resync(text, pos, starts, li, deep=isinstance(e, RecursionError))
            yield _err(where, f"invalid JSON ({str(e)[:120]})", text[pos : min(nxt, pos + MAX_RAW)], unit)
            pending = {}
            pos = nxt
            continue
        try:
            if not isinstance(obj, dict) or "key" not in obj or "value" not in obj:
                raise _Bad("JSON object lacks key or value")
            value = obj["value"]
            rec = _record_from_json(obj["key"], value, tombstone=value is None)
        except _Bad as e:
            yield _err(where, str(e), text[pos : min(end, pos + MAX_RAW)], unit)
        except Exception as e:  # noqa: BLE001 - contract: bad input becomes an error item
            yield _err(where, f"unexpected record shape ({type(e).__name__})", text[pos : min(end, pos + MAX_RAW)],
                       unit)
        else:
            rec.update(pending)
            rec["line"], rec["unit"], rec["line_no"] = where, unit, li + 1
            yield rec
        pending = {}
        pos = end


_WINDOW = 2048
_TAIL = 16  # a window cut this close to an error may have caused it (a cut literal, escape or number)


def _decode_object_at(text: str, pos: int) -> tuple[Any, int]:
    """``raw_decode`` of the JSON object at ``pos``, read through a growing window of the text.

    ``json`` builds its error message by counting the newlines *before* the error from the start
    of the string, so decoding bad objects in place in one long (glued) line costs O(position)
    each (quadratic). A window starting at ``pos`` costs O(object) instead. An object that
    decodes within the window decodes identically in the whole text (it ends at its ``}``); an
    error is trusted only when it lies well inside the window and is not an unterminated string
    (reported at the string's start), otherwise the window doubles. ``ValueError`` messages
    give the absolute character position.
    """
    n = len(text)
    size = _WINDOW
    while True:
        window = text[pos : pos + size]
        try:
            obj, k = _JSON.raw_decode(window)
        except json.JSONDecodeError as e:
            if pos + size >= n or (e.pos < len(window) - _TAIL and not e.msg.startswith("Unterminated string")):
                raise ValueError(f"{e.msg} at character {pos + e.pos}") from None
            size *= 2
            continue
        return obj, pos + k


def _at_line_start(text: str, pos: int, line_start: int) -> bool:
    """Whether only whitespace precedes ``pos`` on its line.

    Walks back over the whitespace just before ``pos`` only (glued output is one long line, so
    stripping everything from the line start would make reading quadratic).
    """
    i = pos
    while i > line_start and text[i - 1].isspace():
        i -= 1
    return i == line_start


def _resync(text: str, pos: int, starts: list[int], li: int, *, deep: bool = False) -> int:
    """Where to resume after garbage at ``pos``: the next line or the next glued ``{"key"``.

    ``deep``: the object at ``pos`` nests deeper than the recursion limit. Every ``{"key"`` that
    opens before the first ``}`` is inside that nest, so resuming at each in turn would rescan
    the nest again and again; resume at the innermost one (the last before the first ``}``),
    where a real record can start.
    """
    cands = [len(text)]
    if li + 1 < len(starts):
        cands.append(starts[li + 1])
    k = -1
    if deep:
        close = text.find("}", pos + 1)
        k = text.rfind('{"key"', pos + 1, len(text) if close == -1 else close)
    if k == -1:
        k = text.find('{"key"', pos + 1)
    if k != -1:
        cands.append(k)
    return min(cands)


# ---------------------------------------------------------------- Scala formatter lines


_SCALA_OFFSET_KEY = re.compile(r"\[(?P<group>.*?),(?P<topic>[A-Za-z0-9._-]+),(?P<partition>-?\d+)\]::(?P<value>.*)")
_SCALA_OAM = re.compile(
    r"OffsetAndMetadata\(offset=(?P<offset>-?\d+)"
    r"(?:, leaderEpoch=(?:Optional\[(?P<epoch>-?\d+)\]|Optional\.empty))?"
    r", metadata=(?P<metadata>.*)"
    r", commitTimestamp=(?P<commit>-?\d+)"
    r", expireTimestamp=(?:None|Some\((?P<expire>-?\d+)\))\)"
)
# Kafka ≤1.x: [OffsetMetadata[42,NO_METADATA],CommitTime 1700000000000,ExpirationTime 1700086400000]
_SCALA_OLD = re.compile(
    r"\[OffsetMetadata\[(?P<offset>-?\d+),(?P<metadata>.*)\],CommitTime (?P<commit>-?\d+)"
    r",ExpirationTime (?P<expire>-?\d+|None)\]"
)
# GroupMetadata(groupId=…, generation=…, protocolType=…, currentState=…, members=…): the fields after
# the group id, tried at the first few ", generation=" of the value (see _scala_gm).
_SCALA_GM_REST = re.compile(
    r", generation=(?P<generation>-?\d+), "
    r"protocolType=(?:Some\((?P<ptype>.*?)\)|None), currentState=(?P<state>\w+), members=(?P<members>.*)\)"
)
_SCALA_GM_PREFIX = "GroupMetadata(groupId="
_SCALA_GM_TRIES = 16
_SCALA_MEMBER_MARK = "MemberMetadata(memberId="
# one member, matched on the text between two _SCALA_MEMBER_MARKs (after the mark)
_SCALA_MEMBER = re.compile(
    r"(?P<member_id>[^,]*), groupInstanceId=(?:Some\((?P<instance>[^)]*)\)|None), "
    r"clientId=(?P<client_id>[^,]*), clientHost=(?P<client_host>[^,]*), sessionTimeoutMs=(?P<session>-?\d+), "
    r"rebalanceTimeoutMs=(?P<rebalance>-?\d+)(?:, supportedProtocols=(?:List|ArrayBuffer|Vector)?\((?P<protocols>[^)]*)\))?"
)
_NOISE = re.compile(r"Processed a total of \d+ messages?")


def _scala_offset(m: re.Match[str]) -> Item:
    rec: Item = {
        "kind": "offset_commit",
        "record_type": 1,
        "group": m["group"],
        "topic": m["topic"],
        "partition": int(m["partition"]),
        "value_version": None,
    }
    value = m["value"]
    if value == "NULL":
        rec["is_tombstone"] = True
        rec.update(dict.fromkeys(_OFFSET_VALUE_KEYS))
        return rec
    vm = _SCALA_OAM.fullmatch(value)
    if vm:
        epoch, expire, metadata = vm["epoch"], vm["expire"], vm["metadata"]
    else:
        vm = _SCALA_OLD.fullmatch(value)
        if not vm:
            raise _Bad("unrecognised offset value")
        epoch = None
        expire = None if vm["expire"] == "None" else vm["expire"]
        metadata = "" if vm["metadata"] == "NO_METADATA" else vm["metadata"]
    rec.update(
        is_tombstone=False,
        offset=int(vm["offset"]),
        leader_epoch=-1 if epoch is None else int(epoch),
        metadata=metadata,
        commit_timestamp=int(vm["commit"]),
        expire_timestamp=-1 if expire is None else int(expire),
    )
    return rec


def _split_scala_group(line: str) -> tuple[str, str] | None:
    """``(group, value)`` of a ``<group>::GroupMetadata(…)`` or ``<group>::NULL`` line, else None.

    The same split as ``fullmatch(r"(.*?)::(GroupMetadata\\(.*\\)|NULL)")`` (the first ``::`` whose
    rest fits), found with ``str`` searches: the regex rescans the rest of the line at every ``::``
    (quadratic on a long line of them).
    """
    if line.endswith("::NULL"):
        k = len(line) - 6  # only the last "::" can be followed by exactly "NULL"
    elif line.endswith(")"):
        k = line.find("::GroupMetadata(")
        if k == -1 or k + 16 >= len(line):
            return None
    else:
        return None
    return line[:k], line[k + 2 :]


def _scala_gm(value: str) -> tuple[str, re.Match[str]] | None:
    """(group id, match of the other fields) of a ``GroupMetadata(…)`` value, else None.

    Like a lazy ``groupId=(.*?), generation=…`` but trying only the first 16 ``, generation=``:
    each try is linear, so the whole is too (a group id containing ``, generation=`` more often
    than that is not a real one).
    """
    if not value.startswith(_SCALA_GM_PREFIX) or not value.endswith(")"):
        return None
    pos = len(_SCALA_GM_PREFIX)
    for _ in range(_SCALA_GM_TRIES):
        k = value.find(", generation=", pos)
        if k == -1:
            return None
        m = _SCALA_GM_REST.fullmatch(value, k)
        if m:
            return value[len(_SCALA_GM_PREFIX) : k], m
        pos = k + 1
    return None


def _scala_group(group: str, value: str) -> Item:
    rec: Item = {"kind": "group_metadata", "record_type": 2, "group": group, "value_version": None}
    if value == "NULL":
        rec["is_tombstone"] = True
        rec.update(dict.fromkeys(_GROUP_VALUE_KEYS))
        return rec
    found = _scala_gm(value)
    if not found:
        raise _Bad("unrecognised GroupMetadata value")
    _, gm = found
    members = []
    # one anchored match per member: a search would rescan the rest from every mark (quadratic)
    for chunk in gm["members"].split(_SCALA_MEMBER_MARK)[1:]:
        mm = _SCALA_MEMBER.match(chunk)
        if mm is None:
            continue
        protocols = mm["protocols"]
        members.append({
            "member_id": mm["member_id"],
            "group_instance_id": mm["instance"],
            "client_id": mm["client_id"],
            "client_host": mm["client_host"],
            "session_timeout": int(mm["session"]),
            "rebalance_timeout": int(mm["rebalance"]),
            "supported_protocols": [p.strip() for p in protocols.split(",") if p.strip()] if protocols else [],
        })
    rec.update(
        is_tombstone=False,
        protocol_type=gm["ptype"] or "",
        generation=int(gm["generation"]),
        protocol=None,
        leader=None,
        current_state_timestamp=-1,
        current_state=gm["state"],
        members=members,
    )
    return rec


def iter_scala_lines(text: str | bytes) -> Iterator[Item | DumpError]:
    """Records of the ≤3.x Scala ``OffsetsMessageFormatter`` / ``GroupMetadataMessageFormatter`` lines.

    Group metadata is best effort (group, generation, protocol type, state, members' ids, client
    ids and hosts); the Scala ``toString`` carries no protocol name or leader.
    """
    text, errors = _decode_text(text)
    yield from errors
    for i, line in enumerate(_split_lines(text), start=1):
        if not line.strip() or _NOISE.fullmatch(line.strip()):
            continue
        try:
            m = _SCALA_OFFSET_KEY.fullmatch(line)
            if m and (m["value"] == "NULL" or m["value"].startswith(("OffsetAndMetadata(", "[OffsetMetadata["))):
                rec = _scala_offset(m)
            else:
                g = _split_scala_group(line)
                if not g:
                    raise _Bad("not a formatter line")
                rec = _scala_group(*g)
        except _Bad as e:
            yield _err(i, str(e), line)
            continue
        except Exception as e:  # noqa: BLE001 - contract: bad input becomes an error item
            yield _err(i, f"unexpected line shape ({type(e).__name__})", line)
            continue
        rec["line"], rec["unit"] = i, "line"
        yield rec


def _split_lines(text: str) -> list[str]:
    lines = re.split(r"\r\n|\r|\n", text)
    if lines and lines[-1] == "":
        lines.pop()
    return lines


# ---------------------------------------------------------------- kafka-dump-log


# ``(?<!\w)``: a name starts only where a word starts. Without it a long word that is not followed by
# ": " is rescanned from each of its characters (quadratic); the matches are the same, since a match
# found from inside a word would have been found from the word's first character already.
_TOKEN = re.compile(r"(?<!\w)(\w+): (\S+)")
_TS_TYPES = ("CreateTime", "LogAppendTime", "NoTimestampType")
_BATCH_FIELDS = {
    "baseOffset": "base_offset",
    "lastOffset": "last_offset",
    "partitionLeaderEpoch": "batch_leader_epoch",
    "position": "position",
    "isTransactional": "is_transactional",
    "isControl": "is_control",
    "producerId": "producer_id",
    "producerEpoch": "producer_epoch",
}
_EMPTY_BATCH: Item = dict.fromkeys(_BATCH_FIELDS.values())
_OFFSETS_PARTITION = re.compile(r"__consumer_offsets-(\d+)[/\\][^/\\]*$")
_UNKNOWN_TYPE = re.compile(r"Unknown record type (-?\d+) at offset (-?\d+), skipping\.")
_LEGACY_KEY = re.compile(r"offset_commit::group=(?P<group>.*),partition=(?P<tp>.*)")
_LEGACY_GROUP_KEY = re.compile(r"group_metadata::group=(?P<group>.*)")
_LEGACY_UNKNOWN = re.compile(r"unknown::version=(-?\d+)")
_LEGACY_OFFSET_VALUE = re.compile(r"offset=(-?\d+)(?:,metadata=(.*))?")
_ASSIGNMENT_RUN = re.compile(r"[^{},=]+")


def _legacy_assignment(text: str) -> Iterator[tuple[str, str]]:
    """``(member id, "t-0, t-1")`` pairs of a ≤3.7 ``assignment`` string ``{m-1=[t-0, t-1], m-2=[]}``.

    A scanner rather than ``finditer(r"([^{},=\\s][^{},=]*)=\\[([^\\]]*)\\]")``, with the same
    matches: that pattern restarts at every character of a run with no ``=[…]`` after it
    (quadratic). A run of non-separators either ends in ``=[…]`` from its first non-space character
    or from none of its characters, so one attempt per run suffices.
    """
    pos = 0
    while True:
        m = _ASSIGNMENT_RUN.search(text, pos)
        if m is None:
            return
        end = m.end()
        start = m.start() + len(m[0]) - len(m[0].lstrip())
        if start < end and text.startswith("=[", end):
            close = text.find("]", end + 2)
            if close == -1:  # no "]" here means none later either
                return
            yield text[start:end], text[end + 2 : close]
            pos = close + 1
        else:
            pos = end


def _field_value(name: str, text: str) -> Any:
    if text in ("true", "false"):
        return text == "true"
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return text


def _tokens(text: str) -> dict[str, Any]:
    return {m.group(1): _field_value(m.group(1), m.group(2).rstrip("}")) for m in _TOKEN.finditer(text)}


def _batch_context(tokens: dict[str, Any], legacy: bool) -> Item:
    ctx = dict(_EMPTY_BATCH)
    for src, dst in _BATCH_FIELDS.items():
        if src in tokens:
            ctx[dst] = tokens[src]
    if legacy:  # magic 0/1 "offset: <last offset> position: …" line: one (wrapper) message
        ctx["last_offset"] = tokens.get("offset")
        ctx["is_transactional"], ctx["is_control"] = False, False
    for k in ("base_offset", "last_offset", "batch_leader_epoch", "position", "producer_id", "producer_epoch"):
        if ctx[k] is not None and type(ctx[k]) is not int:
            raise _Bad(f"batch field {k} is not an integer")
    return ctx


def _split_key_payload(body: str) -> tuple[str, str | None, str | None]:
    """Split a record line into (metadata prefix, key text, payload text)."""
    if body.startswith("key: "):
        prefix, rest = "", body[5:]
    else:
        ki = body.find(" key: ")
        if ki == -1:
            pi = body.find(" payload: ")
            if pi == -1:
                return body, None, None
            return body[:pi], None, body[pi + 10 :]
        prefix, rest = body[:ki], body[ki + 6 :]
    if rest.startswith("{"):
        try:
            _, end = _JSON.raw_decode(rest, 0)
        except (ValueError, RecursionError):
            end = -1
        if end != -1:
            tail = rest[end:]
            if tail.startswith(" payload: "):
                return prefix, rest[:end], tail[10:]
            if not tail.strip():
                return prefix, rest[:end], None
    pi = rest.find(" payload: ")
    if pi == -1:
        return prefix, rest, None
    return prefix, rest[:pi], rest[pi + 10 :]


def _dump_record(key: str | None, payload: str | None, value_size: Any = None) -> Item:
    """Decode the key/payload texts of one dump-log record (≥3.8 JSON or ≤3.7 text).

    ``value_size`` is the line's ``valueSize`` (-1 for a null value) when printed.
    """
    if key is None:
        raise _Bad("record has no decoded key (dumped without --offsets-decoder?)")
    key = key.strip()
    if key.startswith("{"):
        try:
            kobj = json.loads(key)
        except (ValueError, RecursionError) as e:
            raise _Bad(f"invalid key JSON ({str(e)[:80]})") from None
        if payload is None:
            raise _Bad("record has a key but no payload")
        payload = payload.strip()
        if payload == "<DELETE>":
            return _record_from_json(kobj, None, tombstone=True)
        try:
            vobj = json.loads(payload)
        except (ValueError, RecursionError) as e:
            raise _Bad(f"invalid payload JSON ({str(e)[:80]})") from None
        return _record_from_json(kobj, vobj, tombstone=False)
    m = _UNKNOWN_TYPE.fullmatch(key)
    if m:
        return {"kind": "other", "record_type": int(m[1]), "value_version": None, "is_tombstone": False}
    if key.startswith("Error at offset"):
        raise _Bad(key)
    m = _LEGACY_UNKNOWN.fullmatch(key)
    if m:
        # ≤3.7 knows only types 0-2 and never prints a payload for the others: the value was not
        # decoded, it is not null. Like a console "data":"unknown" value this is a record with an
        # unknown value (not bad input); only valueSize: -1 says the value is null.
        return {"kind": "other", "record_type": int(m[1]), "value_version": None,
                "is_tombstone": value_size == -1}
    m = _LEGACY_KEY.fullmatch(key)
    if m:
        topic, sep, part = m["tp"].rpartition("-")
        if not sep or not topic:
            raise _Bad("offset_commit key has no topic-partition")
        rec: Item = {"kind": "offset_commit", "record_type": 1, "group": m["group"], "topic": topic,
                     "partition": _int(part, "partition"), "value_version": None}
        if payload is None:
            raise _Bad("offset_commit record without payload")
        if payload.strip() == "<DELETE>":
            rec["is_tombstone"] = True
            rec.update(dict.fromkeys(_OFFSET_VALUE_KEYS))
            return rec
        vm = _LEGACY_OFFSET_VALUE.fullmatch(payload)
        if not vm:
            raise _Bad("unrecognised offset_commit payload")
        # ≤3.7 prints neither the leader epoch nor the timestamps: unknown (None), not -1 ("none")
        rec.update(is_tombstone=False, offset=int(vm[1]), leader_epoch=None, metadata=vm[2] or "",
                   commit_timestamp=None, expire_timestamp=None)
        return rec
    m = _LEGACY_GROUP_KEY.fullmatch(key)
    if m:
        rec = {"kind": "group_metadata", "record_type": 2, "group": m["group"], "value_version": None}
        if payload is None:
            raise _Bad("group_metadata record without payload")
        if payload.strip() == "<DELETE>":
            rec["is_tombstone"] = True
            rec.update(dict.fromkeys(_GROUP_VALUE_KEYS))
            return rec
        try:
            obj = json.loads(payload)
        except (ValueError, RecursionError) as e:
            raise _Bad(f"invalid group_metadata payload ({str(e)[:80]})") from None
        if not isinstance(obj, dict):
            raise _Bad("group_metadata payload is not an object")
        members = []
        assignment = obj.get("assignment")
        if isinstance(assignment, str):
            for member_id, assigned in _legacy_assignment(assignment):
                parts: dict[str, list[int]] = {}
                for tp in assigned.split(","):
                    topic, sep, part = tp.strip().rpartition("-")
                    if sep and topic and re.fullmatch(r"-?\d+", part):
                        parts.setdefault(topic, []).append(int(part))
                # same shape as the ≥3.8 decoded assignment object
                members.append({"member_id": member_id.strip(), "assignment": {"assigned_partitions": [
                    {"topic": t, "partitions": p} for t, p in parts.items()], "user_data": None}})
        rec.update(is_tombstone=False, protocol_type=obj.get("protocolType"),
                   generation=_opt_int(obj.get("generationId"), "generationId"),
                   protocol=obj.get("protocol"), leader=None, current_state_timestamp=-1, members=members)
        return rec
    raise _Bad("unrecognised record key")


def iter_dump_log(text: str | bytes) -> Iterator[Item | DumpError | DumpTail]:
    """Records of ``kafka-dump-log --offsets-decoder`` output (≥3.8 JSON, ≤3.7 text, ≤2.8 long lines).

    Each record carries the fields of the batch line before it (``producer_id``,
    ``is_transactional``, ``batch_leader_epoch``, ``position``, …). Transaction markers come out as
    ``kind == "control"`` items with ``control_type`` (``"COMMIT"``/``"ABORT"``/…) and
    ``coordinator_epoch``; :func:`resolve_txn_states` pairs them with the commits. The tool's ``Found N invalid
    bytes at the end of <file>`` is a :class:`DumpTail` in a folder's last dumped segment (not a bad line; a bad
    line in a rolled one).
    """
    text, errors = _decode_text(text)
    yield from errors
    last = last_dumped_segments(text) if "invalid bytes at the end of" in text else set()
    batch: Item = dict(_EMPTY_BATCH)
    valid = True  # the batch line's ``isvalid``: the tool prints a batch whose CRC fails, and its records
    file: str | None = None
    log_partition: int | None = None
    pending: tuple[int, str, str | None] | None = None  # a "Found N invalid bytes" line: (line, its text, file)
    for i, line in enumerate(_split_lines(text), start=1):
        stripped = line.strip()
        if not stripped or _NOISE.fullmatch(stripped):
            continue
        if pending is not None:  # the tool prints it last in a file's section: only a "Dumping" line may follow
            yield _invalid_bytes_item(*pending, last, stripped.startswith("Dumping "))
            pending = None
        try:
            if stripped.startswith("Dumping "):
                file = stripped[8:]
                m = _OFFSETS_PARTITION.search(file)
                log_partition = int(m[1]) if m else None
                batch, valid = dict(_EMPTY_BATCH), True
                continue
            if stripped.startswith(("Log starting offset:", "Starting offset:")):
                continue
            if stripped.startswith(("baseOffset:", "offset:")) and not line.lstrip().startswith("|"):
                batch, valid = dict(_EMPTY_BATCH), True  # a bad batch line must not leave the old context behind
                tokens = _tokens(stripped)
                valid = tokens.get("isvalid") is not False
                batch = _batch_context(tokens, legacy=not stripped.startswith("baseOffset:"))
                continue
            if stripped.startswith("Found ") and invalid_bytes_line(stripped) is not None:
                pending = (i, line, file)  # decided by the line after it (:func:`_invalid_bytes_item`)
                continue
            if not stripped.startswith("|"):
                raise _Bad("unrecognised line")
            if not valid:
                raise _Bad("record of a batch whose CRC check failed (isvalid: false): its bytes are corrupt")
            rec = _dump_record_line(stripped[1:].lstrip(), batch)
        except _Bad as e:
            yield _err(i, str(e), line)
            continue
        except Exception as e:  # noqa: BLE001 - contract: bad input becomes an error item
            yield _err(i, f"unexpected line shape ({type(e).__name__})", line)
            continue
        rec["file"], rec["log_partition"] = file, log_partition
        rec["line"], rec["unit"] = i, "line"
        yield rec
    if pending is not None:
        yield _invalid_bytes_item(*pending, last, True)


def _invalid_bytes_item(i: int, line: str, file: str | None, last: set[str], at_end: bool) -> DumpTail | DumpError:
    """kafka-dump-log's ``Found N invalid bytes at the end of <file>`` on line ``i`` of ``file``'s section: a
    :class:`DumpTail` when it ends the section (``at_end``) of the folder's last dumped segment; a bad line after
    a rolled segment (bytes lost), before more of the section, or outside any section."""
    stripped = line.strip()
    n, name = invalid_bytes_line(stripped) or (0, "")
    if file is None or not at_end:
        return _err(i, "invalid-bytes line that does not end a dumped file's section", line)
    rolled = rolled_segment_cut(file, last)
    if rolled is not None:
        return _err(i, f"{stripped}: {rolled}", line)
    return DumpTail(i, n, None, name)


def _dump_record_line(body: str, batch: Item) -> Item:
    prefix, key, payload = _split_key_payload(body)
    tokens = _tokens(prefix)
    ctx = dict(batch)
    # ≤2.8 record lines repeat the batch fields: they win over the (absent) batch line
    for src, dst in _BATCH_FIELDS.items():
        if src in tokens:
            ctx[dst] = tokens[src]
    meta: Item = {"log_offset": tokens.get("offset"), "record_ts": None, "timestamp_type": None}
    for ts in _TS_TYPES:
        if ts in tokens:
            meta["record_ts"], meta["timestamp_type"] = tokens[ts], ts
    for k in ("log_offset", "record_ts"):
        if meta[k] is not None and type(meta[k]) is not int:
            raise _Bad(f"record {k} is not an integer")
    if "endTxnMarker" in tokens or "controlType" in tokens or (ctx.get("is_control") and key is None):
        control = tokens.get("endTxnMarker") or tokens.get("controlType")
        if isinstance(control, str):
            control = control.split("(")[0]
        rec: Item = {"kind": "control", "record_type": None, "value_version": None, "is_tombstone": False,
                     "control_type": control, "coordinator_epoch": tokens.get("coordinatorEpoch")}
    else:
        rec = _dump_record(key, payload, tokens.get("valueSize"))
    rec.update(meta)
    rec.update(ctx)
    return rec


def iter_dump_records(text: str | bytes, fmt: str | None = None) -> Iterator[Item | DumpError | DumpTail]:
    """Dispatch to the right iterator (``fmt`` or :func:`detect_dump_format` of the text's head)."""
    if fmt is None:
        head = text[:8192]
        fmt = detect_dump_format(head if isinstance(head, str) else bytes(head).decode("utf-8", "replace"))
    if fmt == "console_json":
        return iter_console_json(text)
    if fmt == "scala":
        return iter_scala_lines(text)
    if fmt == "dump_log":
        return iter_dump_log(text)
    return iter([_err(1, "unrecognised dump format", str(text[:200]))])


# ---------------------------------------------------------------- detection


def detect_dump_format(text_head: str) -> str | None:
    """``"console_json"``, ``"scala"``, ``"dump_log"`` or ``None``, from the first lines of a dump."""
    if isinstance(text_head, (bytes, bytearray, memoryview)):
        text_head = bytes(text_head).decode("utf-8", "replace")
    for line in _split_lines(text_head.lstrip("\ufeff"))[:50]:
        s = line.strip()
        if not s or _NOISE.fullmatch(s):
            continue
        if s.startswith(("Dumping ", "Log starting offset:", "Starting offset:", "baseOffset:", "| offset:")):
            return "dump_log"
        if s.startswith("{"):
            return "console_json" if re.match(r'\{\s*"(key|value)"', s) else None
        if _CONSOLE_PREFIX.match(s) and "{" in s:
            return "console_json"
        if _SCALA_OFFSET_KEY.fullmatch(s) or "::GroupMetadata(" in s or s.endswith("::NULL"):
            return "scala"
        return None
    return None
