"""Segment bytes built with kafka-python's builders and ``struct``, never with our encoder (the oracle must not be
the code under test): offsets and the partition leader epoch lie outside the batch CRC, so the builders'
batches are patched there as a leader does (spec/kafka-formats.md §3.2, §9)."""

from __future__ import annotations

import struct

from kafka.record.default_records import DefaultRecordBatchBuilder
from kafka.record.legacy_records import LegacyRecordBatchBuilder

TS = 1_709_550_000_000
LONG_MAX = (1 << 63) - 1
SPAN = (1 << 31) - 1
NOOP = b"\x01\x14\x00\x00"  # a KRaft NoOpRecord value: frame version 1, api key 20, version 0, no tagged fields


def kp_batch(base_offset: int, n: int = 1, *, epoch: int = 0, value: bytes = b"v", key: bytes | None = b"k") -> bytes:
    """One v2 batch of ``n`` records built by kafka-python, its baseOffset and partitionLeaderEpoch patched."""
    b = DefaultRecordBatchBuilder(magic=2, compression_type=0, is_transactional=0, producer_id=-1,
                                  producer_epoch=-1, base_sequence=-1, batch_size=1 << 24)
    for i in range(n):
        b.append(i, timestamp=TS + i, key=key, value=value, headers=[])
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, base_offset)
    struct.pack_into(">i", raw, 12, epoch)
    return bytes(raw)


def kp_legacy(offset: int, magic: int = 1) -> bytes:
    """One uncompressed legacy message built by kafka-python, its (entry) offset patched."""
    b = LegacyRecordBatchBuilder(magic=magic, compression_type=0, batch_size=1 << 20)
    b.append(0, timestamp=TS if magic else None, key=b"k", value=b"v")
    raw = bytearray(b.build())
    struct.pack_into(">q", raw, 0, offset)
    return bytes(raw)
