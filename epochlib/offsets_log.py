"""Replaying a ``__consumer_offsets`` partition log as the group coordinator does (spec §1.6).

Records of transactional batches (``producerId`` ≠ -1 with the transactional bit) take effect only
when a COMMIT marker of the same producer follows in the same partition; an ABORT marker discards
them; records never closed by a marker are still ``open``. Non-transactional records apply at once.
The audit keeps every record and labels it: ``txn_state`` is ``none``, ``committed``, ``aborted`` or
``open`` (the rules use ``none`` and ``committed`` only).

:func:`replay_segment` is the per-record reference that the Spark ingestion's window over
(log partition, producer id) must agree with; :func:`resolve_txn_states` is the labelling itself, shared
with the text dumps (kafka-dump-log prints markers too).
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from .coordinator import CoordinatorRecord, decode_record
from .errors import DecodeError
from .records import BadBatch, Buffer, IncompleteTail, iter_batches

__all__ = ["OffsetsLogRecord", "replay_segment", "resolve_txn_states"]


def resolve_txn_states(items: Iterable[Any]) -> Iterator[Any]:
    """Set ``txn_state`` on record dicts in log order, as the broker replays them.

    Items are dicts with ``producer_id``, ``is_transactional``, ``kind`` (``"control"`` for markers, with
    ``control_type`` ``"COMMIT"``/``"ABORT"``/…) and optionally ``file`` (markers apply within one file /
    partition). Transactional records are held until their producer's marker; records never closed come
    out last as ``open``. Anything that is not a dict (e.g. an error item) passes through in order.
    """
    pending: dict[tuple[Any, Any], list[dict]] = {}
    for item in items:
        if not isinstance(item, dict):
            yield item
            continue
        key = (item.get("file"), item.get("producer_id"))
        if item.get("kind") == "control":
            ctype = item.get("control_type")
            held = pending.pop(key, []) if ctype in ("COMMIT", "ABORT") else []
            state = "committed" if ctype == "COMMIT" else "aborted"
            for rec in held:
                rec["txn_state"] = state
                yield rec
            item["txn_state"] = "none"
            yield item
            continue
        if item.get("is_transactional") and item.get("producer_id") not in (None, -1):
            pending.setdefault(key, []).append(item)
            continue
        item["txn_state"] = "none"
        yield item
    for held in pending.values():
        for rec in held:
            rec["txn_state"] = "open"
            yield rec


@dataclass(frozen=True, slots=True)
class OffsetsLogRecord:
    """One record of a ``__consumer_offsets`` segment, decoded and labelled.

    ``record`` is None when the key/value could not be decoded (``error`` says why) or for a control
    record (``control_type`` set). ``position`` is the byte position of the record's batch.
    """

    position: int
    offset: int
    timestamp: int
    partition_leader_epoch: int
    producer_id: int
    txn_state: str
    record: CoordinatorRecord | None = None
    control_type: str | None = None
    error: str | None = None


def replay_segment(
    buf: Buffer, *, base_position: int = 0, segment_base_offset: int | None = None, ends_file: bool = False,
    last_segment: bool = True,
) -> Iterator[OffsetsLogRecord | BadBatch | IncompleteTail]:
    """Decode a ``__consumer_offsets`` segment (or byte range of one) with transaction markers applied.

    Bad batches come out as :class:`~epochlib.records.BadBatch` where they occur (with ``segment_base_offset``,
    the file name's, a batch outside the segment's offset range too), and with ``ends_file`` an incomplete
    final entry as an :class:`~epochlib.records.IncompleteTail` (:func:`~epochlib.records.iter_batches`; a
    ``BadBatch`` with ``last_segment=False``, a rolled segment);
    transactional records come out when their marker is read (or at the end, as ``open``), so the order is the
    replay order.
    """

    def items() -> Iterator[Any]:
        for batch in iter_batches(buf, base_position=base_position, segment_base_offset=segment_base_offset,
                                  ends_file=ends_file, last_segment=last_segment):
            if isinstance(batch, BadBatch | IncompleteTail):
                yield batch
                continue
            for r in batch.records:
                item: dict[str, Any] = {
                    "position": batch.position, "offset": r.offset, "timestamp": r.timestamp,
                    "partition_leader_epoch": batch.partition_leader_epoch, "producer_id": batch.producer_id,
                    "is_transactional": batch.is_transactional,
                }
                if batch.is_control:
                    item.update(kind="control", control_type=r.control_name)
                elif r.key is None:
                    item["error"] = "record has no key"
                else:
                    try:
                        item["record"] = decode_record(r.key, r.value)
                    except DecodeError as e:
                        item["error"] = str(e)
                yield item

    for item in resolve_txn_states(items()):
        if isinstance(item, BadBatch | IncompleteTail):
            yield item
            continue
        yield OffsetsLogRecord(
            position=item["position"], offset=item["offset"], timestamp=item["timestamp"],
            partition_leader_epoch=item["partition_leader_epoch"], producer_id=item["producer_id"],
            txn_state=item["txn_state"], record=item.get("record"),
            control_type=item.get("control_type"), error=item.get("error"),
        )
