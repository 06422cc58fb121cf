"""Log entries: the value types and the wire constants the records modules share
(spec/kafka-formats.md §3.1–§3.5).

Wire layout of one log entry (§3.1) — every magic starts the same::

    0  int64 baseOffset (v2) / message offset (v0/v1)
    8  int32 size        bytes that follow this field; entry length = 12 + size
   12  int32 partitionLeaderEpoch (v2) / message CRC (v0/v1)
   16  int8  magic       0, 1 or 2 — read it before anything else

Magic 2 batch header (§3.2, 61 bytes, one ``struct.Struct``)::

   17 uint32 crc (CRC-32C of [21, end))   21 int16 attributes   23 int32 lastOffsetDelta
   27 int64 baseTimestamp   35 int64 maxTimestamp   43 int64 producerId
   51 int16 producerEpoch   53 int32 baseSequence   57 int32 recordsCount   61 records…
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from typing import NamedTuple

import crc32c as _crc32c_mod

from ..errors import DecodeError

__all__ = [
    "BadBatch",
    "Batch",
    "Buffer",
    "CONTROL_TYPE_NAMES",
    "HEADER_SIZE_UP_TO_MAGIC",
    "IncompleteTail",
    "LOG_OVERHEAD",
    "NewRecord",
    "RAW_SLICE_MAX",
    "Record",
    "V2_HEADER_SIZE",
]

_crc32c = _crc32c_mod.crc32c

LOG_OVERHEAD = 12  # offset + size
HEADER_SIZE_UP_TO_MAGIC = 17
V2_HEADER_SIZE = 61
RAW_SLICE_MAX = 4096
# Smallest legal value of the size field per magic (bytes after the size field).
_MIN_SIZE = {0: 14, 1: 22, 2: V2_HEADER_SIZE - LOG_OVERHEAD}

_ENTRY = struct.Struct(">qi")  # offset, size
_SIZE_MAGIC = struct.Struct(">8xi4xb")  # size, magic
_V2 = struct.Struct(">qiibIhiqqqhii")  # the whole 61-byte header
_LEGACY_V0 = struct.Struct(">IbB")  # crc, magic, attributes
_LEGACY_V1 = struct.Struct(">IbBq")  # crc, magic, attributes, timestamp
_I16x2 = struct.Struct(">hh")
_I16_I32 = struct.Struct(">hi")
_I32 = struct.Struct(">i")
_Q = struct.Struct(">q")

CONTROL_TYPE_NAMES: dict[int, str] = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}
_CONTROL_TYPE_IDS = {v: k for k, v in CONTROL_TYPE_NAMES.items()}

Buffer = bytes | bytearray | memoryview


@dataclass(frozen=True, slots=True)
class Record:
    """One decoded record (v2 record or v0/v1 message).

    ``timestamp`` already applies LogAppendTime (= the batch's maxTimestamp) and is -1 for
    magic 0. ``sequence`` is baseSequence + offsetDelta (int32 wrap to 0), -1 when not
    idempotent or legacy. The ``control_*`` fields are set only in control batches (§3.5):
    ``coordinator_epoch`` only for ABORT/COMMIT markers.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...] = ()
    sequence: int = -1
    control_type: int | None = None
    control_name: str | None = None
    coordinator_epoch: int | None = None


@dataclass(frozen=True, slots=True)
class Batch:
    """One log entry: a v2 record batch, or a v0/v1 message (a compressed wrapper counts as
    one entry holding its inner messages).

    ``timestamp_type`` is 0 CreateTime, 1 LogAppendTime, -1 none (magic 0). For legacy
    entries ``partition_leader_epoch``/producer fields are -1, ``crc`` is the CRC-32 (IEEE)
    of the outer message and ``records_count`` the number of (inner) messages.
    ``crc_valid`` is None when the CRC was not checked (``verify_crc=False``).
    """

    position: int
    size: int
    magic: int
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    crc: int
    crc_valid: bool | None
    attributes: int
    compression: str
    timestamp_type: int
    is_transactional: bool
    is_control: bool
    has_delete_horizon: bool
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    records: tuple[Record, ...] = ()

    @property
    def next_offset(self) -> int:
        return self.last_offset + 1

    @property
    def delete_horizon_ms(self) -> int | None:
        """KIP-534: with attribute bit 6, baseTimestamp holds the delete horizon."""
        return self.base_timestamp if self.has_delete_horizon else None


@dataclass(frozen=True, slots=True)
class BadBatch:
    """An entry that could not be decoded: where, why, and the first ≤ 4096 bytes of it.

    ``length`` is the number of bytes the entry spans in the input (12 + size when the size
    field was usable, else everything that was left).
    """

    position: int
    reason: str
    raw_slice: bytes
    length: int


@dataclass(frozen=True, slots=True)
class IncompleteTail:
    """Where a segment file ends inside an entry: fewer bytes are left than its size field announces, or than
    the 17-byte entry header. Kafka's reader takes that as the end of the log, without an error
    (``FileLogInputStream.nextBatch`` returns null), and recovery truncates the file there: in a copy of the
    active segment taken while the broker wrote it, the last batch is half-copied. A limit of the copy, not
    bad data (yielded only when the walk is told the bytes run to the file's end).

    ``length`` bytes are present from ``position``; ``announced`` is the entry's length by its size field, or
    None when fewer than 17 bytes are left.
    """

    position: int
    length: int
    announced: int | None

    @property
    def reason(self) -> str:
        """What a note says of it."""
        if self.announced is None:
            return (f"incomplete entry at the end of the file: {self.length} bytes, fewer than the "
                    f"{HEADER_SIZE_UP_TO_MAGIC}-byte entry header")
        return (f"incomplete entry at the end of the file: {self.length} of the {self.announced} bytes its size "
                "field announces")


class NewRecord(NamedTuple):
    """A record to encode. ``offset_delta`` defaults to the record's index in the batch."""

    key: bytes | None
    value: bytes | None
    timestamp: int
    headers: tuple = ()
    offset_delta: int | None = None


def _as_buffer(buf: Buffer) -> Buffer:
    if isinstance(buf, (bytes, bytearray)):
        return buf
    if isinstance(buf, memoryview):
        return buf.cast("B") if buf.format != "B" or buf.ndim != 1 else buf
    raise DecodeError(f"expected bytes, bytearray or memoryview, got {type(buf).__name__}", 0)
