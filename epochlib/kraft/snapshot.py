"""KRaft snapshot files (``<end offset>-<epoch>.checkpoint``) and ``bootstrap.checkpoint``
(kraft-metadata.md §1, §2.6), and choosing which snapshot a replay starts from (§7).

A snapshot is a concatenation of magic-2 batches: a control batch whose first record is
SnapshotHeaderRecord (then optionally KRaftVersion / Voters), data batches of metadata records
describing the whole image as of offset ``end_offset - 1``, and a last control batch holding
SnapshotFooterRecord. Batch offsets are local (from 0). ``bootstrap.checkpoint`` has the same
format. :func:`read_snapshot` never raises for bad content: problems (bad batches, records,
a missing header or footer = truncated file) are listed in ``Snapshot.errors``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from .._wire import Buffer
from .codec import (
    MetadataEntry,
    MetadataError,
    RecordLike,
    encode_control_record_batch,
    encode_metadata_batch,
    iter_metadata_log,
)

__all__ = ["Snapshot", "choose_snapshot", "encode_snapshot", "parse_snapshot_name", "read_snapshot"]

_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
SNAPSHOT_HEADER, SNAPSHOT_FOOTER = 3, 4


def parse_snapshot_name(name: str) -> tuple[int, int] | None:
    """``(end_offset, epoch)`` of a KRaft snapshot file name; None for anything else (including
    ``.checkpoint.part`` / ``.checkpoint.deleted`` files, which are not part of the log)."""
    m = _NAME.match(name.rsplit("/", 1)[-1])
    return (int(m.group(1)), int(m.group(2))) if m else None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """A decoded snapshot: ``end_offset`` (exclusive; None when unknown, e.g. bootstrap) and
    ``epoch`` from the file name, ``last_contained_timestamp`` from the header (-1 if absent),
    ``entries`` every record in file order (local offsets; control records included),
    ``errors`` what was wrong (empty for a complete, valid file)."""

    end_offset: int | None
    epoch: int | None
    last_contained_timestamp: int
    entries: tuple[MetadataEntry, ...]
    errors: tuple[MetadataError, ...] = field(default=())

    @property
    def records(self) -> list[MetadataEntry]:
        """The metadata (non-control) records: the image."""
        return [e for e in self.entries if e.record is not None]

    @property
    def last_contained_offset(self) -> int | None:
        return None if self.end_offset is None else self.end_offset - 1

    @property
    def complete(self) -> bool:
        return not self.errors


def read_snapshot(buf: Buffer, *, name: str | None = None, base_position: int = 0) -> Snapshot:
    """Decode a snapshot (or ``bootstrap.checkpoint``); ``name`` gives end offset and epoch."""
    entries: list[MetadataEntry] = []
    errors: list[MetadataError] = []
    for item in iter_metadata_log(buf, base_position=base_position):
        (errors if isinstance(item, MetadataError) else entries).append(item)
    parsed = parse_snapshot_name(name) if name else None
    end, epoch = parsed if parsed else (None, None)
    last_ts = -1
    first, last = (entries[0], entries[-1]) if entries else (None, None)

    def ctype(e: MetadataEntry | None) -> int | None:
        return None if e is None or e.control is None else e.control.control_type

    head, foot = unbounded(ctype(first), ctype(last))
    if head:
        errors.append(MetadataError(base_position, "file", head))
    else:
        last_ts = first.control.data["last_contained_log_timestamp"]
    if foot:
        errors.append(MetadataError(base_position + len(buf), "file", foot))
    return Snapshot(end, epoch, last_ts, tuple(entries), tuple(errors))


def unbounded(first_control: int | None, last_control: int | None) -> tuple[str | None, str | None]:
    """Why a snapshot whose first and last records have these control types (None: not a control record, or no
    record) is not whole: (no header, no footer) reasons, None where the bound is there. Kafka writes a snapshot
    from its SnapshotHeaderRecord to its SnapshotFooterRecord; one without its footer was cut short."""
    return (None if first_control == SNAPSHOT_HEADER else "snapshot does not start with a SnapshotHeaderRecord",
            None if last_control == SNAPSHOT_FOOTER else "snapshot does not end with a SnapshotFooterRecord (truncated)")


def encode_snapshot(records: Sequence[RecordLike], *, epoch: int, last_contained_timestamp: int, timestamp: int,
                    records_per_batch: int = 1000, controls: Sequence[tuple[int, dict[str, Any]]] = ()) -> bytes:
    """Write a snapshot file as Kafka does: header batch (+ ``controls`` such as KRaftVersion),
    data batches of at most ``records_per_batch`` records, footer batch; local offsets from 0."""
    out = [encode_control_record_batch(
        [(SNAPSHOT_HEADER, {"last_contained_log_timestamp": last_contained_timestamp}), *controls],
        base_offset=0, raft_epoch=epoch, timestamp=timestamp)]
    offset = 1 + len(controls)
    for i in range(0, len(records), records_per_batch):
        chunk = records[i:i + records_per_batch]
        out.append(encode_metadata_batch(chunk, base_offset=offset, raft_epoch=epoch, timestamp=timestamp))
        offset += len(chunk)
    out.append(encode_control_record_batch([(SNAPSHOT_FOOTER, {})], base_offset=offset, raft_epoch=epoch,
                                           timestamp=timestamp))
    return b"".join(out)


def choose_snapshot(snapshot_names: Iterable[str], log_start_offset: int | None) -> str | None:
    """The snapshot a replay starts from (§7), or None when the log starts at offset 0.

    A snapshot with end offset E joins the log without a gap when E ≥ the log start; of those
    the one with the smallest E is chosen, so the log supplies as much history as it holds
    (spec §7 says "newest": the state is the same, the history shorter). With no log
    (``log_start_offset`` None) the newest snapshot; when every snapshot ends below the log
    start, the newest (the replay then reports the gap).
    """
    if log_start_offset == 0:
        return None
    named = sorted((p, n) for n in snapshot_names if (p := parse_snapshot_name(n)))
    if not named:
        return None
    if log_start_offset is not None:
        joining = [n for (end, _), n in named if end >= log_start_offset]
        if joining:
            return joining[0]
    return named[-1][1]
