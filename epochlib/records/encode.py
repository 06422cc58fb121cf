"""Writers mirroring the readers — magic 2 batches (control batches included) and magic 0/1 message
sets, framed as Kafka's Java client writes them — for round-trip tests, fixtures and the simulator.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Sequence

from .._compression import CODEC_NONE, CODEC_ZSTD, codec_id, compress
from .._wire import write_varint, write_varlong
from .values import (
    _CONTROL_TYPE_IDS,
    _ENTRY,
    _I16_I32,
    _I32,
    _Q,
    LOG_OVERHEAD,
    V2_HEADER_SIZE,
    NewRecord,
    _crc32c,
    _I16x2,
)

__all__ = ["encode_batch", "encode_control_batch", "encode_legacy_message_set"]


def _encode_record_v2(r: NewRecord, index: int, base_ts: int) -> bytes:
    od = index if r.offset_delta is None else r.offset_delta
    parts = [b"\x00", write_varlong(r.timestamp - base_ts), write_varint(od)]
    for v in (r.key, r.value):
        if v is None:
            parts.append(b"\x01")  # varint -1
        else:
            parts += [write_varint(len(v)), bytes(v)]
    parts.append(write_varint(len(r.headers)))
    for hk, hv in r.headers:
        hkb = hk.encode("utf-8") if isinstance(hk, str) else bytes(hk)
        parts += [write_varint(len(hkb)), hkb]
        parts += [b"\x01"] if hv is None else [write_varint(len(hv)), bytes(hv)]
    body = b"".join(parts)
    return write_varint(len(body)) + body


def encode_batch(
    records: Sequence[NewRecord],
    *,
    base_offset: int = 0,
    partition_leader_epoch: int = -1,
    compression: str | int = "none",
    timestamp_type: int = 0,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    is_transactional: bool = False,
    is_control: bool = False,
    base_timestamp: int | None = None,
    max_timestamp: int | None = None,
    last_offset_delta: int | None = None,
    has_delete_horizon: bool = False,
) -> bytes:
    """Encode a magic 2 record batch, CRC-32C included, as a Kafka producer/leader would.

    ``base_timestamp`` defaults to the first record's timestamp (-1 for an empty batch),
    ``max_timestamp`` to the largest record timestamp; with ``timestamp_type=1``
    (LogAppendTime) pass the append time as ``max_timestamp``. ``last_offset_delta``
    defaults to the largest offset delta (set it to model a compacted batch).
    """
    records = [r if isinstance(r, NewRecord) else NewRecord(*r) for r in records]
    codec = codec_id(compression)
    if base_timestamp is None:
        base_timestamp = records[0].timestamp if records else -1
    if max_timestamp is None:
        max_timestamp = max((r.timestamp for r in records), default=-1)
    if last_offset_delta is None:
        last_offset_delta = max(
            (i if r.offset_delta is None else r.offset_delta for i, r in enumerate(records)), default=0
        )
    body = b"".join(_encode_record_v2(r, i, base_timestamp) for i, r in enumerate(records))
    if codec:
        body = compress(codec, body, 2)
    attrs = codec | (timestamp_type & 1) << 3 | (0x10 if is_transactional else 0)
    attrs |= (0x20 if is_control else 0) | (0x40 if has_delete_horizon else 0)
    after_crc = struct.pack(
        ">hiqqqhii", attrs, last_offset_delta, base_timestamp, max_timestamp, producer_id, producer_epoch,
        base_sequence, len(records),
    ) + body  # fmt: skip
    size = V2_HEADER_SIZE - LOG_OVERHEAD + len(body)
    head = struct.pack(">qiibI", base_offset, size, partition_leader_epoch, 2, _crc32c(after_crc))
    return head + after_crc


def encode_control_batch(
    marker: str,
    *,
    base_offset: int,
    partition_leader_epoch: int,
    producer_id: int,
    producer_epoch: int,
    coordinator_epoch: int,
    timestamp: int,
) -> bytes:
    """Encode a transaction marker batch (one ABORT or COMMIT control record, §3.5)."""
    ctype = _CONTROL_TYPE_IDS.get(marker.upper()) if isinstance(marker, str) else None
    if ctype not in (0, 1):
        raise ValueError(f"marker must be 'COMMIT' or 'ABORT', not {marker!r}")
    rec = NewRecord(_I16x2.pack(0, ctype), _I16_I32.pack(0, coordinator_epoch), timestamp)
    return encode_batch(
        [rec], base_offset=base_offset, partition_leader_epoch=partition_leader_epoch, producer_id=producer_id,
        producer_epoch=producer_epoch, is_transactional=True, is_control=True,
    )  # fmt: skip


def _legacy_message(
    offset: int, magic: int, attrs: int, timestamp: int, key: bytes | None, value: bytes | None
) -> bytes:
    body = bytes([magic, attrs])
    if magic == 1:
        body += _Q.pack(timestamp)
    for v in (key, value):
        body += _I32.pack(-1) if v is None else _I32.pack(len(v)) + bytes(v)
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return _ENTRY.pack(offset, len(msg)) + msg


def encode_legacy_message_set(
    records: Sequence[NewRecord],
    *,
    magic: int = 1,
    base_offset: int = 0,
    compression: str | int = "none",
    log_append_time: int | None = None,
) -> bytes:
    """Encode a magic 0/1 message set; with compression, one wrapper message whose offset is
    the absolute last offset (inner offsets relative 0..n-1 for v1, absolute for v0).

    ``log_append_time`` (v1 only) sets the LogAppendTime attribute and that timestamp on the
    outer message(s). Headers are not representable in v0/v1.
    """
    if magic not in (0, 1):
        raise ValueError("magic must be 0 or 1")
    codec = codec_id(compression)
    if codec == CODEC_ZSTD:
        raise ValueError("zstd is not allowed in magic 0/1 message sets")
    records = [r if isinstance(r, NewRecord) else NewRecord(*r) for r in records]
    if any(r.headers for r in records):
        raise ValueError("magic 0/1 messages have no headers")
    lat_attr = 0x08 if (magic == 1 and log_append_time is not None) else 0
    if codec == CODEC_NONE:
        return b"".join(
            _legacy_message(
                base_offset + i, magic, lat_attr,
                log_append_time if lat_attr else r.timestamp, r.key, r.value,
            )
            for i, r in enumerate(records)
        )  # fmt: skip
    if not records:
        return b""
    inner = b"".join(
        _legacy_message(i if magic == 1 else base_offset + i, magic, 0, r.timestamp, r.key, r.value)
        for i, r in enumerate(records)
    )
    wrapper_ts = log_append_time if lat_attr else max(r.timestamp for r in records)
    return _legacy_message(
        base_offset + len(records) - 1,
        magic,
        codec | lat_attr,
        wrapper_ts,
        None,
        compress(codec, inner, magic),
    )
