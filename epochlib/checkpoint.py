"""Plain-text files of a Kafka log directory (spec/kafka-formats.md §4, §4.2, §4.3).

Checkpoint files (``CheckpointFile.java``), UTF-8, one item per line::

    <version>        line 1, an integer; 0 for every file read here
    <N>              line 2, the number of entry lines that follow
    <entry> x N      fields split on runs of whitespace

``leader-epoch-checkpoint`` entries are ``<epoch> <startOffset>``; the log-dir level
``replication-offset-checkpoint``, ``recovery-point-offset-checkpoint``,
``log-start-offset-checkpoint`` and ``cleaner-offset-checkpoint`` entries are
``<topic> <partition> <offset>``. An empty file, or one with only the version line, means
"no entries" (Kafka returns an empty list for both).

``partition.metadata`` (``PartitionMetadataReadBuffer.java``) is two ``key: value`` lines,
``version: 0`` and ``topic_id: <22-char base64url Uuid>``, with no newline after the id. Kafka reads
only those two lines, by position: each must split on ``:\\s+`` into exactly two fields (the keys are
never compared), the version must be an integer >= 0 (a higher one is accepted "to ensure downgrade
compatibility"), and the id a Uuid other than the all-zero one; later lines are not read.

Strategy: parse as strictly as the broker's reader does (a file the broker would refuse is a
``DecodeError``), with the 1-based line number as the offset (``unit="line"``). Semantic checks
(e.g. strictly increasing epochs, rule L2) are not the parser's job: such files parse fine.
Writers produce exactly the bytes Kafka writes, for fixtures and the simulator.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from . import _wire
from .errors import DecodeError

__all__ = [
    "LeaderEpochCheckpoint",
    "OffsetCheckpoint",
    "PartitionMetadata",
    "format_leader_epoch_checkpoint",
    "format_offset_checkpoint",
    "format_partition_metadata",
    "parse_leader_epoch_checkpoint",
    "parse_offset_checkpoint",
    "parse_partition_dir_name",
    "parse_partition_metadata",
]

CHECKPOINT_VERSION = 0
PARTITION_METADATA_VERSION = 0

_INT32 = (-(2**31), 2**31 - 1)
_INT64 = (-(2**63), 2**63 - 1)

# java.util.regex "\s" is [ \t\n\x0B\f\r]; Python's \s would also split on Unicode spaces.
_WS = re.compile(r"[ \t\n\x0b\f\r]+")
# Integer.parseInt / Long.parseLong: optional sign, ASCII digits, nothing else.
_JAVA_INT = re.compile(r"[+-]?[0-9]+")
# BufferedReader.readLine ends a line at \n, \r or \r\n.
_LINE_END = re.compile(r"\r\n|\r|\n")
# PartitionMetadataReadBuffer splits each line on ":" followed by whitespace.
_COLON_WS = re.compile(r":[ \t\n\x0b\f\r]+")


@dataclass(frozen=True, slots=True)
class LeaderEpochCheckpoint:
    """A parsed ``leader-epoch-checkpoint``.

    ``version`` is ``None`` for an empty file; ``entries`` are ``(epoch, start_offset)`` in file order.
    """

    version: int | None
    entries: tuple[tuple[int, int], ...]


@dataclass(frozen=True, slots=True)
class OffsetCheckpoint:
    """A parsed ``topic partition offset`` checkpoint (high watermarks, recovery points, ...).

    ``version`` is ``None`` for an empty file; ``entries`` maps ``(topic, partition)`` to the offset
    (a repeated key keeps the last line, as Kafka's map does).
    """

    version: int | None
    entries: dict[tuple[str, int], int]


@dataclass(frozen=True, slots=True)
class PartitionMetadata:
    """A parsed ``partition.metadata``: the file version and the topic id (22-char base64url).

    ``note`` says what Kafka's reader accepts but its writer never writes (a version above 0, other key names,
    lines after the topic id), or is None."""

    version: int
    topic_id: str
    note: str | None = None


# ---------------------------------------------------------------- helpers


def _as_text(data: str | bytes | bytearray | memoryview) -> str:
    """Decode bytes as strict UTF-8; a bad byte is reported with its line number."""
    if isinstance(data, str):
        return data
    raw = bytes(data)
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        line = raw.count(b"\n", 0, e.start) + 1
        raise DecodeError(f"invalid UTF-8 ({e.reason})", line, unit="line") from None


def _lines(text: str) -> list[str]:
    """Split like ``BufferedReader.readLine``: a final terminator does not start another line."""
    if not text:
        return []
    parts = _LINE_END.split(text)
    if parts[-1] == "":
        parts.pop()
    return parts


def _java_int(token: str, bounds: tuple[int, int], what: str, line: int) -> int:
    if not _JAVA_INT.fullmatch(token):
        raise DecodeError(f"{what} {token!r} is not an integer", line, unit="line")
    value = int(token)
    if not bounds[0] <= value <= bounds[1]:
        raise DecodeError(f"{what} {token} out of range", line, unit="line")
    return value


def _java_split(line: str) -> list[str]:
    """``String.split("\\s+")``: a leading separator gives an empty first field, trailing ones vanish."""
    parts = _WS.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def _read_checkpoint(data: str | bytes, width: int, what: str) -> tuple[int | None, list[tuple[int, list[str]]]]:
    """Common frame: version, count, then ``width`` fields per entry line (with their line numbers)."""
    lines = _lines(_as_text(data))
    if not lines:
        return None, []
    version = _java_int(lines[0], _INT32, "version", 1)
    if version != CHECKPOINT_VERSION:
        raise DecodeError(
            f"unrecognised {what} version {version}, expected {CHECKPOINT_VERSION}", 1, unit="line"
        )
    if len(lines) == 1:
        return version, []
    expected = _java_int(lines[1], _INT32, "entry count", 2)
    entries: list[tuple[int, list[str]]] = []
    for i, line in enumerate(lines[2:], start=3):
        fields = _java_split(line)
        if len(fields) != width or fields[0] == "":
            raise DecodeError(f"malformed {what} line {line[:80]!r}", i, unit="line")
        entries.append((i, fields))
    if len(entries) != expected:
        raise DecodeError(f"expected {expected} entries, found {len(entries)}", 2, unit="line")
    return version, entries


# ---------------------------------------------------------------- readers


def parse_leader_epoch_checkpoint(data: str | bytes) -> LeaderEpochCheckpoint:
    """Parse a ``leader-epoch-checkpoint`` (str or bytes).

    Raises:
        DecodeError: wrong version, malformed line, count ≠ entry lines or invalid UTF-8;
            ``offset`` is the 1-based line number.
    """
    version, rows = _read_checkpoint(data, 2, "leader-epoch-checkpoint")
    entries = tuple(
        (_java_int(f[0], _INT32, "epoch", i), _java_int(f[1], _INT64, "start offset", i)) for i, f in rows
    )
    return LeaderEpochCheckpoint(version, entries)


def parse_offset_checkpoint(data: str | bytes) -> OffsetCheckpoint:
    """Parse a ``topic partition offset`` checkpoint (replication-offset, recovery-point, ...).

    Raises:
        DecodeError: as :func:`parse_leader_epoch_checkpoint`.
    """
    version, rows = _read_checkpoint(data, 3, "offset checkpoint")
    entries: dict[tuple[str, int], int] = {}
    for i, f in rows:
        partition = _java_int(f[1], _INT32, "partition", i)
        entries[(f[0], partition)] = _java_int(f[2], _INT64, "offset", i)
    return OffsetCheckpoint(version, entries)


def _colon_split(line: str) -> list[str]:
    """``line.split(":\\s+")`` in Java: split on ``:`` and whitespace, trailing empty fields dropped."""
    parts = _COLON_WS.split(line)
    while parts and parts[-1] == "":
        parts.pop()
    return parts


def parse_partition_metadata(data: str | bytes) -> PartitionMetadata:
    """Parse ``partition.metadata`` as Kafka's ``PartitionMetadataReadBuffer`` does: the first two lines, each
    ``<key>: <value>`` by position (the keys are not compared), a version >= 0, a topic id other than the
    all-zero Uuid; later lines are not read. What Kafka never writes but reads is noted (:attr:`PartitionMetadata.note`).

    Raises:
        DecodeError: an empty file, a missing or malformed line, a negative version, a bad or zero uuid,
            invalid UTF-8 (``offset`` = line number).
    """
    lines = _lines(_as_text(data))
    if not lines:
        raise DecodeError("empty partition.metadata", 1, unit="line")
    head = _colon_split(lines[0])
    if len(head) != 2:
        raise DecodeError(f"malformed version line {lines[0][:80]!r}", 1, unit="line")
    version = _java_int(head[1], _INT32, "version", 1)
    if version < PARTITION_METADATA_VERSION:
        raise DecodeError(f"unrecognised partition.metadata version {version}", 1, unit="line")
    if len(lines) < 2:
        raise DecodeError("missing topic_id line", 2, unit="line")
    body = _colon_split(lines[1])
    if len(body) != 2:
        raise DecodeError(f"malformed topic_id line {lines[1][:80]!r}", 2, unit="line")
    topic_id = _check_uuid(body[1], 2)
    notes = []
    if version != PARTITION_METADATA_VERSION:
        notes.append(f"version {version} (Kafka writes {PARTITION_METADATA_VERSION}, and reads any version >= 0)")
    if (head[0], body[0]) != ("version", "topic_id"):
        notes.append(f"keys {head[0][:40]!r}, {body[0][:40]!r} instead of 'version', 'topic_id' (Kafka reads the "
                     "values by position)")
    extra = sum(1 for line in lines[2:] if line.strip())
    if extra:
        notes.append(f"{extra} line{'s' if extra != 1 else ''} after the topic id (Kafka does not read "
                     f"{'them' if extra != 1 else 'it'})")
    return PartitionMetadata(version, topic_id, "; ".join(notes) or None)


def _check_uuid(text: str, line: int) -> str:
    # Uuid.fromString: base64url of 16 bytes; 22 characters in Kafka's own output.
    if not re.fullmatch(r"[A-Za-z0-9_-]{22}(==)?", text):
        raise DecodeError(f"invalid topic id {text[:40]!r}", line, unit="line")
    try:
        raw = _wire.uuid_from_str(text[:22])
    except DecodeError as e:
        raise DecodeError(e.reason, line, unit="line") from None
    if raw == bytes(16):
        raise DecodeError("topic id is the all-zero Uuid", line, unit="line")
    return _wire.uuid_to_str(raw)


_VARIANT_SUFFIXES = {"-delete": "delete", "-future": "future", "-stray": "stray"}
_VARIANT_DIR = re.compile(r"(\S+)-(\S+)\.(\S+)-(delete|future|stray)")


def parse_partition_dir_name(name: str) -> tuple[str, int, str | None]:
    """Split a partition directory name into ``(topic, partition, variant)``.

    ``variant`` is ``None`` for a live replica, else ``"delete"``, ``"future"`` or ``"stray"``
    for ``<topic>-<partition>.<id>-delete`` etc. (``UnifiedLog.parseTopicPartitionName``). The
    partition is the text after the last ``-``, so topics with ``-`` and ``.`` split correctly.
    The topic of a ``-delete`` directory may have been shortened by Kafka to fit 255 characters.

    Raises:
        DecodeError: not a partition directory name (offset 0, unit "line").
    """
    if not isinstance(name, str) or "-" not in name:
        raise DecodeError(f"not a partition directory name: {str(name)[:80]!r}", 0, unit="line")
    variant = None
    base = name
    for suffix, kind in _VARIANT_SUFFIXES.items():
        if name.endswith(suffix):
            if not _VARIANT_DIR.fullmatch(name):
                raise DecodeError(f"malformed {kind} directory name {name[:80]!r}", 0, unit="line")
            variant = kind
            base = name[: name.rindex(".")]
            break
    topic, sep, part = base.rpartition("-")
    if not sep or not topic or not part:
        raise DecodeError(f"not a partition directory name: {name[:80]!r}", 0, unit="line")
    partition = _java_int(part, _INT32, "partition", 0)
    return topic, partition, variant


# ---------------------------------------------------------------- writers


def format_leader_epoch_checkpoint(entries: Iterable[tuple[int, int]], *, version: int = CHECKPOINT_VERSION) -> str:
    """The exact text Kafka writes for these ``(epoch, start_offset)`` entries (every line ends in ``\\n``)."""
    rows = [f"{int(epoch)} {int(offset)}" for epoch, offset in entries]
    return "".join(f"{line}\n" for line in [str(version), str(len(rows)), *rows])


def format_offset_checkpoint(
    entries: Mapping[tuple[str, int], int] | Iterable[tuple[str, int, int]],
    *,
    version: int = CHECKPOINT_VERSION,
) -> str:
    """The exact text of a ``topic partition offset`` checkpoint.

    ``entries`` is a mapping ``(topic, partition) -> offset`` or an iterable of
    ``(topic, partition, offset)`` triples; order is kept (Kafka's is hash-map order).
    """
    items = (
        [(t, p, o) for (t, p), o in entries.items()] if isinstance(entries, Mapping) else list(entries)
    )
    rows = []
    for topic, partition, offset in items:
        if not topic or _WS.search(topic):
            raise ValueError(f"topic {topic!r} is empty or contains whitespace")
        rows.append(f"{topic} {int(partition)} {int(offset)}")
    return "".join(f"{line}\n" for line in [str(version), str(len(rows)), *rows])


def format_partition_metadata(topic_id: str | bytes) -> str:
    """The exact text of ``partition.metadata`` (no newline after the topic id)."""
    raw = _wire.uuid_from_str(topic_id) if isinstance(topic_id, str) else bytes(topic_id)
    if len(raw) != 16 or raw == bytes(16):
        raise ValueError("topic id must be 16 bytes and not all zero")
    return f"version: {PARTITION_METADATA_VERSION}\ntopic_id: {_wire.uuid_to_str(raw)}"
