"""KRaft metadata records: the ApiMessageAndVersion frame, control records, log walking, encoders
(kraft-metadata.md §2.1–2.5).

Frame of a metadata record value (§2.2)::

    UNSIGNED_VARINT frameVersion (must be 1) | UNSIGNED_VARINT apiKey | UNSIGNED_VARINT version
    | the record struct at that version (flexible; tables in :mod:`epochlib.kraft.schemas`)

Decoding policy (as the broker's loader, but never fatal):

* a known api key at a known version must consume the value exactly, else :class:`DecodeError`;
* an api key without a schema (retired 6/13/16, or newer than this codec) gives a
  :class:`MetadataRecord` with ``name == "Unknown"`` and the struct bytes in ``raw``;
* a version above the newest known is read with the newest layout (Kafka's generated readers
  do the same) and keeps the version seen; when that layout does not fit, the record is
  kept as unknown with the reason in ``note``.

KRaft control values (§2.4) have no frame: :func:`decode_control_value` reads them at schema
version 0 (their first field, ``Version``, is exposed as ``control_version``).

:func:`iter_metadata_log` walks a segment (or snapshot) with :func:`epochlib.records.iter_batches`
and yields one :class:`MetadataEntry` per record, or a :class:`MetadataError` (quarantine unit
``batch`` or ``record``) — it never raises for bad data. Writers mirror readers:
:func:`encode_record_value`, :func:`encode_control_value`, :func:`encode_metadata_batch`,
:func:`encode_control_record_batch` (batches go through :func:`epochlib.records.encode_batch`).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .. import _wire as w
from .._schema import decode, encode
from .._wire import Buffer
from ..errors import DecodeError
from ..records import BadBatch, IncompleteTail, NewRecord, encode_batch, iter_batches
from .schemas import CONTROL_NAMES, CONTROL_SPECS, RECORD_NAMES, RECORD_SPECS

__all__ = [
    "FRAME_VERSION",
    "UNKNOWN",
    "ControlRecord",
    "MetadataEntry",
    "MetadataError",
    "MetadataRecord",
    "decode_control_value",
    "decode_record_value",
    "encode_control_record_batch",
    "encode_control_value",
    "encode_metadata_batch",
    "encode_record_value",
    "iter_metadata_log",
]

FRAME_VERSION = 1
UNKNOWN = "Unknown"
_INT16_MAX = 0x7FFF


@dataclass(frozen=True, slots=True)
class MetadataRecord:
    """One decoded metadata record value.

    ``name`` is the record type (``"PartitionChangeRecord"``) or ``"Unknown"``; ``data`` the
    fields (snake_case keys, absent tagged fields at their defaults; ``None`` when unknown);
    ``raw`` the struct bytes after the frame when they were not decoded; ``note`` why (unknown
    key, layout that does not fit) or that a newer version was read with an older layout.
    """

    api_key: int
    version: int
    name: str
    data: dict[str, Any] | None
    raw: bytes | None = None
    note: str | None = None

    @property
    def known(self) -> bool:
        return self.data is not None


@dataclass(frozen=True, slots=True)
class ControlRecord:
    """A KRaft control record (LeaderChange, SnapshotHeader/Footer, KRaftVersion, Voters) or an
    unknown control type (``name == "Unknown"``, ``raw`` = the value bytes)."""

    control_type: int
    name: str
    data: dict[str, Any] | None
    raw: bytes | None = None


@dataclass(frozen=True, slots=True)
class MetadataEntry:
    """One record of a metadata log, snapshot or dump, in its context.

    ``offset`` is the metadata offset (snapshot-local in a snapshot file); ``timestamp`` the
    batch append time (every record of a batch carries it); ``raft_epoch`` the batch's
    partitionLeaderEpoch; ``position`` the batch's byte position (line number for dump text);
    exactly one of ``record`` / ``control`` is set.
    """

    offset: int
    timestamp: int
    raft_epoch: int
    position: int
    record: MetadataRecord | None = None
    control: ControlRecord | None = None

    @property
    def is_control(self) -> bool:
        return self.control is not None


@dataclass(frozen=True, slots=True)
class MetadataError:
    """Input that could not be decoded, for quarantine: ``unit`` is ``batch``, ``record`` or
    ``line``; ``offset`` the metadata offset when known; ``raw`` at most 4 KiB."""

    position: int
    unit: str
    reason: str
    raw: bytes = b""
    offset: int | None = None


# ------------------------------------------------------------------ record values


def _frame(value: Buffer) -> tuple[int, int, int]:
    frame, pos = w.read_uvarint(value, 0)
    if frame != FRAME_VERSION:
        if frame == 0:
            raise DecodeError("frame version 0 (the 2.8 KRaft preview format) is not supported", 0)
        raise DecodeError(f"unsupported frame version {frame}", 0)
    key_pos = pos
    api_key, pos = w.read_uvarint(value, pos)
    ver_pos = pos
    version, pos = w.read_uvarint(value, pos)
    if api_key > _INT16_MAX:
        raise DecodeError(f"api key {api_key} does not fit an int16", key_pos)
    if version > _INT16_MAX:
        raise DecodeError(f"record version {version} does not fit an int16", ver_pos)
    return api_key, version, pos


def decode_record_value(value: Buffer) -> MetadataRecord:
    """Decode one metadata record value (the ApiMessageAndVersion frame and its struct).

    Raises:
        DecodeError: bad frame, or a known record at a known version that is malformed or
            followed by extra bytes (positions relative to ``value``).
    """
    if not isinstance(value, bytes | bytearray | memoryview):
        raise DecodeError(f"expected bytes, got {type(value).__name__}", 0)
    api_key, version, pos = _frame(value)
    spec = RECORD_SPECS.get(api_key)
    if spec is None:
        return MetadataRecord(api_key, version, UNKNOWN, None, bytes(value[pos:]), f"unknown api key {api_key}")
    hi = spec.valid_versions.hi
    if version <= hi:
        data, end = decode(spec, version, value, pos)
        if end != len(value):
            raise DecodeError(f"{len(value) - end} byte(s) of garbage after {spec.name} v{version}", end)
        return MetadataRecord(api_key, version, spec.name, data)
    try:  # newer than known: the newest layout, as Kafka's readers
        data, end = decode(spec, hi, value, pos)
        if end != len(value):
            raise DecodeError(f"{len(value) - end} byte(s) left", end)
    except DecodeError as e:
        note = f"{spec.name} v{version} is newer than v{hi} and does not fit its layout: {e}"
        return MetadataRecord(api_key, version, UNKNOWN, None, bytes(value[pos:]), note)
    return MetadataRecord(api_key, version, spec.name, data, None, f"v{version} read with the v{hi} layout")


def encode_record_value(api_key: int, version: int, data: dict[str, Any] | None = None, *,
                        raw: bytes | None = None) -> bytes:
    """Encode a metadata record value (frame + struct). ``raw`` writes an undecoded struct
    (unknown keys); otherwise ``data`` uses the snake_case field names, missing ones default.
    Raises ``ValueError`` for an unknown key without ``raw`` or a bad value."""
    head = w.write_uvarint(FRAME_VERSION) + w.write_uvarint(api_key) + w.write_uvarint(version)
    if raw is not None:
        return head + bytes(raw)
    spec = RECORD_SPECS.get(api_key)
    if spec is None:
        raise ValueError(f"api key {api_key} has no schema: pass raw bytes")
    return head + encode(spec, min(version, spec.valid_versions.hi), data or {})


def encode_record(record: MetadataRecord) -> bytes:
    """The value bytes of a decoded :class:`MetadataRecord` (inverse of :func:`decode_record_value`)."""
    if record.data is None:
        return encode_record_value(record.api_key, record.version, raw=record.raw or b"")
    return encode_record_value(record.api_key, record.version, record.data)


# ------------------------------------------------------------------ control values


def decode_control_value(control_type: int, value: Buffer | None) -> ControlRecord:
    """Decode a KRaft control value (types 2–6) at schema version 0; other types are kept raw.

    Raises:
        DecodeError: a known control value that is malformed or has trailing bytes.
    """
    spec = CONTROL_SPECS.get(control_type)
    if spec is None or value is None:
        return ControlRecord(control_type, UNKNOWN, None, None if value is None else bytes(value))
    data, end = decode(spec, 0, value, 0)
    if end != len(value):
        raise DecodeError(f"{len(value) - end} byte(s) of garbage after {spec.name}", end)
    return ControlRecord(control_type, spec.name, data)


def encode_control_value(control_type: int, data: dict[str, Any]) -> bytes:
    """Encode a KRaft control value (types 2–6) at schema version 0."""
    spec = CONTROL_SPECS.get(control_type)
    if spec is None:
        raise ValueError(f"control type {control_type} has no schema")
    return encode(spec, 0, data)


def _control_key(control_type: int) -> bytes:
    return w.write_int16(0) + w.write_int16(control_type)


# ------------------------------------------------------------------ log walking


def iter_metadata_log(
    buf: Buffer, *, base_position: int = 0, segment_base_offset: int | None = None, ends_file: bool = False,
    last_segment: bool = True,
) -> Iterator[MetadataEntry | MetadataError | IncompleteTail]:
    """Every record of a metadata segment or snapshot file, in file order.

    Bad batches (CRC, framing, torn tail, offsets outside the segment's range when
    ``segment_base_offset`` is given: :func:`epochlib.records.iter_batches`) and undecodable record values
    become :class:`MetadataError` rows; walking goes on. With ``ends_file`` (a whole segment file) a zero
    fill after the last batch ends the walk, and a final entry the file ends inside comes out as the codec's
    :class:`~epochlib.records.IncompleteTail` (a limit of the copy, not an error) — in the copy's last segment
    only (``last_segment``; in a rolled one it is a bad batch). Raises DecodeError only for non-bytes input.
    """
    for b in iter_batches(buf, base_position=base_position, segment_base_offset=segment_base_offset,
                          ends_file=ends_file, last_segment=last_segment):
        if isinstance(b, IncompleteTail):
            yield b
            continue
        if isinstance(b, BadBatch):
            yield MetadataError(b.position, "batch", b.reason, b.raw_slice)
            continue
        for r in b.records:
            try:
                if b.is_control:
                    if r.control_type is None:
                        raise DecodeError("control record without a usable key", 0)
                    ctl = decode_control_value(r.control_type, r.value)
                    yield MetadataEntry(r.offset, b.max_timestamp, b.partition_leader_epoch, b.position,
                                        control=ctl)
                    continue
                if r.value is None:
                    raise DecodeError("metadata record with a null value", 0)
                rec = decode_record_value(r.value)
            except DecodeError as e:
                yield MetadataError(b.position, "record", f"offset {r.offset}: {e}",
                                    bytes((r.value or b"")[:4096]), r.offset)
                continue
            yield MetadataEntry(r.offset, b.max_timestamp, b.partition_leader_epoch, b.position, record=rec)


# ------------------------------------------------------------------ batch writers

RecordLike = MetadataRecord | tuple[int, int, dict[str, Any]] | bytes


def _value_of(r: RecordLike) -> bytes:
    if isinstance(r, bytes | bytearray):
        return bytes(r)
    if isinstance(r, MetadataRecord):
        return encode_record(r)
    api_key, version, data = r
    return encode_record_value(api_key, version, data)


def encode_metadata_batch(records: Sequence[RecordLike], *, base_offset: int, raft_epoch: int, timestamp: int,
                          compression: str | int = "none") -> bytes:
    """One metadata batch as the controller writes it (§2.1): null keys, every record at the
    batch append time ``timestamp``, no producer, partitionLeaderEpoch = ``raft_epoch``.
    Records are ``(api_key, version, data)`` tuples, :class:`MetadataRecord` or value bytes."""
    recs = [NewRecord(None, _value_of(r), timestamp) for r in records]
    return encode_batch(recs, base_offset=base_offset, partition_leader_epoch=raft_epoch,
                        compression=compression, base_timestamp=timestamp, max_timestamp=timestamp)


def encode_control_record_batch(controls: Sequence[tuple[int, dict[str, Any]]], *, base_offset: int,
                                raft_epoch: int, timestamp: int) -> bytes:
    """A control batch of KRaft control records ``(control_type, data)`` — e.g. ``(2, LeaderChange)``
    at the start of a Raft epoch, or a snapshot's header/footer."""
    recs = [NewRecord(_control_key(t), encode_control_value(t, d), timestamp) for t, d in controls]
    return encode_batch(recs, base_offset=base_offset, partition_leader_epoch=raft_epoch, is_control=True,
                        base_timestamp=timestamp, max_timestamp=timestamp)


def record_name(api_key: int) -> str:
    """The record type name of an api key (``"Unknown"`` when it has no schema)."""
    return RECORD_NAMES.get(api_key, UNKNOWN)


def control_name(control_type: int) -> str:
    """The KRaft control message name of a control type (``"Unknown"`` otherwise)."""
    return CONTROL_NAMES.get(control_type, UNKNOWN)
