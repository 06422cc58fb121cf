"""Kafka log entries: v2 record batches, legacy v0/v1 message sets, segment iteration, encoders and
the Arrow batch function (spec/kafka-formats.md §3, §4.1). This module is the public API; the
modules below each hold one concern:

- :mod:`.values` — the value types (:class:`Record`, :class:`Batch`, :class:`BadBatch`,
  :class:`IncompleteTail`, :class:`NewRecord`), wire constants and the entry layout;
- :mod:`.reference` — :func:`decode_batch`, the strict per-entry reference decoder (raises
  :class:`~epochlib.errors.DecodeError`, incl. for a CRC mismatch), the test oracle;
- :mod:`.segments` — :func:`iter_batches` (never raises for bad data: a corrupt entry becomes a
  :class:`BadBatch` and the walk resumes at the next entry when the size field is sane; a torn tail
  ends with ``BadBatch("torn tail: N bytes")``, but at the end of a file, as in Kafka's reader, a zero
  fill ends the walk silently and an incomplete final entry with an :class:`IncompleteTail`; given the
  segment's base offset, an entry outside its offset range is a ``BadBatch`` too),
  :func:`segment_base_offset` (from the file name),
  :func:`scan_batch_boundaries`, :func:`split_points`;
- :mod:`.encode` — writers for round-trip tests, fixtures and the simulator;
- :mod:`.arrow` / :mod:`.fastpath` — :func:`batches_arrow`, the columnar version Spark calls, and its
  numpy magic-2 fast path; it must agree with :func:`iter_batches` (tests enforce it);
  :func:`iter_batches_arrow` gives the same rows in pieces of bounded decompressed size.

Decompression (and the decompressed-size cap) is wholly :mod:`epochlib._compression`'s. Readers are
sans-IO over ``bytes | bytearray | memoryview``; any exception other than ``DecodeError`` escaping a
public function is a bug.
"""

from __future__ import annotations

from .arrow import (
    BATCH_SCHEMA,
    DEFAULT_MAX_DECODED,
    RECORD_SCHEMA,
    BatchesArrow,
    batches_arrow,
    iter_batches_arrow,
)
from .encode import encode_batch, encode_control_batch, encode_legacy_message_set
from .fastpath import FastV2, decode_v2_fast
from .reference import decode_batch
from .segments import (
    SEGMENT_OFFSET_SPAN,
    iter_batches,
    scan_batch_boundaries,
    segment_base_offset,
    split_points,
)
from .values import (
    CONTROL_TYPE_NAMES,
    HEADER_SIZE_UP_TO_MAGIC,
    LOG_OVERHEAD,
    RAW_SLICE_MAX,
    V2_HEADER_SIZE,
    BadBatch,
    Batch,
    Buffer,
    IncompleteTail,
    NewRecord,
    Record,
)

#: Old private name of :func:`decode_v2_fast`, kept until callers switch to the public one.
_fast_v2 = decode_v2_fast

__all__ = [
    "BadBatch",
    "BATCH_SCHEMA",
    "Batch",
    "BatchesArrow",
    "Buffer",
    "CONTROL_TYPE_NAMES",
    "DEFAULT_MAX_DECODED",
    "FastV2",
    "HEADER_SIZE_UP_TO_MAGIC",
    "IncompleteTail",
    "LOG_OVERHEAD",
    "RAW_SLICE_MAX",
    "RECORD_SCHEMA",
    "SEGMENT_OFFSET_SPAN",
    "NewRecord",
    "Record",
    "V2_HEADER_SIZE",
    "batches_arrow",
    "decode_batch",
    "decode_v2_fast",
    "encode_batch",
    "encode_control_batch",
    "encode_legacy_message_set",
    "iter_batches",
    "iter_batches_arrow",
    "scan_batch_boundaries",
    "segment_base_offset",
    "split_points",
]
