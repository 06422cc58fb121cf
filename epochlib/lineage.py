"""The leader-epoch cache: one replica's lineage of (epoch, start offset) entries.

A pure, in-memory re-statement of Kafka's ``LeaderEpochFileCache``
(``storage/.../internals/epoch/LeaderEpochFileCache.java``; spec/kafka-formats.md §4.4). No file, no
clock, no lock: the checkpoint file is read by :mod:`epochlib.checkpoint`, this class only applies the
cache's rules so the audit reasons about a lineage exactly as a broker would.

Entries are (epoch, start_offset) = "the first offset written in this leader epoch". After any sequence
of :meth:`LeaderEpochCache.assign` calls both columns are strictly increasing (the invariant L2 checks on
raw checkpoints).

Mutating methods (``assign``, ``truncate_from_end``, ``truncate_from_start``) change the cache in place,
like the broker's; ``copy`` and ``repaired`` return new caches, so rule code never mutates its input.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any, NamedTuple

__all__ = ["UNDEFINED_EPOCH", "UNDEFINED_EPOCH_OFFSET", "EpochEntry", "LeaderEpochCache", "as_entry"]

UNDEFINED_EPOCH = -1
"""OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH."""
UNDEFINED_EPOCH_OFFSET = -1
"""OffsetsForLeaderEpochResponse.UNDEFINED_EPOCH_OFFSET."""


class EpochEntry(NamedTuple):
    """One cache entry: ``epoch`` started at ``start_offset`` (the first offset written in it)."""

    epoch: int
    start_offset: int


def as_entry(value: Any) -> EpochEntry:
    """An :class:`EpochEntry` from a tuple/list ``(epoch, start_offset)``, a mapping with those keys
    (the ``epoch_lineage.entries`` struct as a dict) or an object with those attributes (a Spark Row)."""
    if isinstance(value, EpochEntry):
        return value
    if isinstance(value, Mapping):
        return EpochEntry(int(value["epoch"]), int(value["start_offset"]))
    if hasattr(value, "epoch") and hasattr(value, "start_offset"):
        return EpochEntry(int(value.epoch), int(value.start_offset))
    epoch, start = value
    return EpochEntry(int(epoch), int(start))


class LeaderEpochCache:
    """Kafka's leader-epoch cache over a sorted list of :class:`EpochEntry`.

    ``LeaderEpochCache(entries)`` loads entries the way the broker loads a checkpoint file: by calling
    :meth:`assign` for each, in file order (``checkpoint.read().forEach(this::assign)``). A raw
    checkpoint that is not monotonic is therefore normalised exactly as the broker would; use
    ``rules.check_lineage_monotonic`` on the raw entries to report it.
    """

    __slots__ = ("_entries",)

    def __init__(self, entries: Iterable[Any] = ()) -> None:
        self._entries: list[EpochEntry] = []
        for e in entries:
            entry = as_entry(e)
            self.assign(entry.epoch, entry.start_offset)

    # -- mutation (Kafka's rules) -------------------------------------------------------------------

    def assign(self, epoch: int, start_offset: int) -> bool:
        """Record that ``epoch`` started at ``start_offset``; return whether the cache changed.

        Kafka's rules: epoch and offset must be >= 0 (``ValueError`` otherwise, as the broker throws
        IllegalArgumentException). The entry is ignored when it has the latest entry's epoch and a start
        offset >= the latest entry's. Otherwise every trailing entry with ``epoch >= new.epoch`` or
        ``start_offset >= new.start_offset`` is removed, then the entry is appended.
        """
        if epoch < 0 or start_offset < 0:
            raise ValueError(f"invalid partition leader epoch entry ({epoch}, {start_offset})")
        if self._entries:
            last = self._entries[-1]
            if last.epoch == epoch and start_offset >= last.start_offset:
                return False
        while self._entries and (
            self._entries[-1].epoch >= epoch or self._entries[-1].start_offset >= start_offset
        ):
            self._entries.pop()
        self._entries.append(EpochEntry(epoch, start_offset))
        return True

    def truncate_from_end(self, end_offset: int) -> list[EpochEntry]:
        """The log was truncated to ``end_offset``: when ``end_offset >= 0`` and the latest entry starts
        at or after it, remove every entry with ``start_offset >= end_offset``. Returns the removed
        entries (newest first, as Kafka iterates)."""
        removed: list[EpochEntry] = []
        if end_offset >= 0 and self._entries and self._entries[-1].start_offset >= end_offset:
            while self._entries and self._entries[-1].start_offset >= end_offset:
                removed.append(self._entries.pop())
        return removed

    def truncate_from_start(self, start_offset: int) -> list[EpochEntry]:
        """The log start moved to ``start_offset``: remove every leading entry with
        ``start_offset <= start_offset`` and re-insert the last removed entry's epoch starting at
        ``start_offset`` (so the epoch covering the new log start survives: truncating from 6 keeps an
        entry at 6). Returns the removed entries (oldest first)."""
        n = 0
        while n < len(self._entries) and self._entries[n].start_offset <= start_offset:
            n += 1
        if n == 0:
            return []
        removed = self._entries[:n]
        self._entries[:n] = [EpochEntry(removed[-1].epoch, start_offset)]
        return removed

    def clear(self) -> None:
        """Drop every entry (the broker does so when a v0/v1 batch is appended)."""
        self._entries.clear()

    # -- queries ------------------------------------------------------------------------------------

    @property
    def entries(self) -> tuple[EpochEntry, ...]:
        """The entries, oldest first."""
        return tuple(self._entries)

    @property
    def latest_epoch(self) -> int | None:
        """The epoch of the last entry (the highest), or None for an empty cache."""
        return self._entries[-1].epoch if self._entries else None

    @property
    def latest_entry(self) -> EpochEntry | None:
        """The last (newest) entry, the lineage "tail"."""
        return self._entries[-1] if self._entries else None

    @property
    def earliest_entry(self) -> EpochEntry | None:
        """The first (oldest) entry, the lineage "head"."""
        return self._entries[0] if self._entries else None

    def entry_for_epoch(self, epoch: int) -> EpochEntry | None:
        """The entry with exactly this epoch, if cached."""
        for e in self._entries:
            if e.epoch == epoch:
                return e
        return None

    def end_offset_for(self, epoch: int, log_end_offset: int) -> tuple[int, int]:
        """Kafka's OffsetsForLeaderEpoch answer ``(epoch, end_offset)`` for a requested epoch:

        1. epoch -1 -> (-1, -1);
        2. epoch == latest cached epoch -> (epoch, log_end_offset);
        3. no entry with a higher epoch -> (-1, -1) (also for an empty cache);
        4. no entry with epoch <= requested -> (requested epoch itself, first higher entry's start);
        5. else (largest cached epoch <= requested, start offset of the first higher entry).
        """
        if epoch == UNDEFINED_EPOCH:
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        if self._entries and self._entries[-1].epoch == epoch:
            return (epoch, log_end_offset)
        higher = next((e for e in self._entries if e.epoch > epoch), None)
        if higher is None:
            return (UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET)
        floor = None
        for e in self._entries:
            if e.epoch <= epoch:
                floor = e
            else:
                break
        if floor is None:
            return (epoch, higher.start_offset)
        return (floor.epoch, higher.start_offset)

    def epoch_for_offset(self, offset: int) -> int | None:
        """The epoch in force at ``offset``: the entry starting exactly there, else the last entry
        starting before it; None when ``offset`` precedes every entry (or the cache is empty)."""
        previous: int | None = None
        for e in self._entries:
            if e.start_offset == offset:
                return e.epoch
            if e.start_offset > offset:
                return previous
            previous = e.epoch
        return previous

    # -- derived caches -----------------------------------------------------------------------------

    def copy(self) -> LeaderEpochCache:
        """An independent copy."""
        new = LeaderEpochCache()
        new._entries = list(self._entries)
        return new

    def repaired(
        self, log_end_offset: int | None, log_start_offset: int | None, *, keep_at_end: bool = False
    ) -> LeaderEpochCache:
        """A copy repaired as LogLoader does on load: ``truncate_from_end(log_end_offset)`` then
        ``truncate_from_start(log_start_offset)``, each only when that value is known (not None).

        A checkpoint on disk can hold entries beyond the log end or below the log start, because both
        truncations flush asynchronously (spec §4.4). ``keep_at_end`` keeps a last entry starting exactly at
        the log end: a running leader's view (``Partition.makeLeader`` assigns (epoch, LEO) and flushes it
        at once; only a restart's load removes it), where the load's repair would drop it."""
        new = self.copy()
        if log_end_offset is not None:
            new.truncate_from_end(log_end_offset + 1 if keep_at_end else log_end_offset)
        if log_start_offset is not None:
            new.truncate_from_start(log_start_offset)
        return new

    # -- dunder -------------------------------------------------------------------------------------

    def __len__(self) -> int:
        return len(self._entries)

    def __iter__(self):
        return iter(tuple(self._entries))

    def __eq__(self, other: object) -> bool:
        if isinstance(other, LeaderEpochCache):
            return self._entries == other._entries
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # mutable

    def __repr__(self) -> str:
        inner = ", ".join(f"({e.epoch}, {e.start_offset})" for e in self._entries)
        return f"LeaderEpochCache([{inner}])"
