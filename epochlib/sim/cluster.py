"""The cluster model: partitions with per-replica leader-epoch caches, metadata versions per broker,
consumer groups, metadata clients. Pure state and small rules; the event loop lives in :mod:`epochlib.sim.engine`.

A partition's log grows linearly at ``rate`` records/ms from (``t_base``, ``leo_base``); it is never
materialised. Replicas in sync follow the leader's LEO; a *frozen* replica keeps its own LEO (out of
sync, offline, or divergent). Each replica's lineage is a real ``epochlib.lineage.LeaderEpochCache``
driven by the same calls a broker makes (assign on election/append, truncate on divergence/retention).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ._codec import need

_lineage = need("lineage", "LeaderEpochCache")
LeaderEpochCache = _lineage.LeaderEpochCache


@dataclass
class MetaVersion:
    """One published metadata state of a partition and the per-broker delay before each broker serves it."""

    t: int
    delays: dict[int, int]
    leader: int
    epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    offline: tuple[int, ...]


class Part:
    """One data partition (of one topic incarnation)."""

    def __init__(self, topic: str, index: int, topic_id: str, replicas: list[int], leader: int,
                 entries: list[tuple[int, int]], leo: int, t: int, rate: float, log_start: int) -> None:  # fmt: skip
        self.topic = topic
        self.index = index
        self.topic_id = topic_id
        self.replicas = list(replicas)
        self.leader = leader
        self.isr = list(replicas)
        self.offline: set[int] = set()
        self.frozen: dict[int, int] = {}  # broker -> its own LEO (not following the leader)
        self.caches = {b: LeaderEpochCache(entries) for b in replicas}
        self.leo_base = leo
        self.t_base = t
        self.rate = rate
        self.log_start = log_start
        self.meta: list[MetaVersion] = []
        self.consumed = False
        self.segments = False  # write data segments at snapshots
        self.claimed = False  # reserved by an incident
        self.rng: Any = None  # per-event draws for this partition (None: the simulation's jitter stream)
        self._cur_epoch = -1
        self._cur_start = 0
        self._refresh()

    @property
    def tp(self) -> tuple[str, int]:
        return (self.topic, self.index)

    def _refresh(self) -> None:
        last = self.caches[self.leader].latest_entry
        self._cur_epoch, self._cur_start = (last.epoch, last.start_offset) if last else (-1, 0)

    @property
    def epoch(self) -> int:
        return self._cur_epoch

    @property
    def lcache(self):
        return self.caches[self.leader]

    def leo(self, t: int) -> int:
        return self.leo_base + int((t - self.t_base) * self.rate)

    def in_sync(self) -> list[int]:
        return [b for b in self.caches if b not in self.frozen and b not in self.offline]

    def epoch_at(self, position: int) -> int:
        """Epoch of the record before ``position`` in the leader's lineage (what a consumer commits)."""
        if position - 1 >= self._cur_start:
            return self._cur_epoch
        e = self.lcache.epoch_for_offset(max(position - 1, 0))
        if e is None:
            head = self.lcache.earliest_entry
            return head.epoch if head else -1
        return e

    def rebase(self, t: int, leo: int) -> None:
        self.leo_base = leo
        self.t_base = t

    def elect(self, t: int, new_leader: int) -> int:
        """Leader election: the new leader assigns (epoch+1, LEO); in-sync replicas replicate it."""
        leo = self.leo(t)
        self.rebase(t, leo)
        epoch = self.epoch + 1
        self.leader = new_leader
        for b in self.in_sync():
            self.caches[b].assign(epoch, leo)
        self._refresh()
        return epoch

    def elect_unclean(self, t: int, new_leader: int) -> int:
        """Unclean election of the out-of-sync replica ``new_leader``: it becomes the sole ISR member and
        assigns (epoch+1, its own LEO); the log continues from there. Returns that LEO (the truncation point)."""
        point = self.frozen.pop(new_leader)
        self.caches[new_leader].assign(self.epoch + 1, point)
        self.leader, self.isr = new_leader, [new_leader]
        self.rebase(t, point)
        self._refresh()
        return point

    def collapse_lineage(self) -> None:
        """Every replica's lineage becomes the current epoch alone, from the log start: a partition with a
        one-epoch history (the stale-metadata incident starts from one)."""
        for b in list(self.caches):
            self.caches[b] = LeaderEpochCache([(self.epoch, self.log_start)])
        self._refresh()

    def truncate_start(self, new_start: int) -> None:
        if new_start <= self.log_start:
            return
        self.log_start = new_start
        for c in self.caches.values():
            c.truncate_from_start(new_start)
        self._refresh()

    def view(self) -> tuple[int, int, tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
        return (self.leader, self.epoch, tuple(self.replicas), tuple(self.isr), tuple(sorted(self.offline)))


class Client:
    """A metadata client (consumer member, producer, scripted tool): what it asks for and how it is captured."""

    __slots__ = ("client_id", "topics", "version", "ip", "port", "style", "corr", "scripted", "group")

    def __init__(self, client_id: str, topics: list[str], version: int, ip: str, port: int, style: str,
                 group: str | None = None) -> None:  # fmt: skip
        self.client_id = client_id
        self.topics = topics
        self.version = version  # MetadataResponse version it speaks
        self.ip = ip
        self.port = port
        self.style = style  # "a" | "b" (JSONL spellings) | "pcap"
        self.corr = 0
        self.scripted = False
        self.group = group


@dataclass
class TopicVersion:
    """One published state of a topic name: its incarnation (None = deleted) and per-broker delays."""

    t: int
    delays: dict[int, int]
    parts: list[Part] | None
    topic_id: str | None


@dataclass
class Member:
    member_id: str
    client_id: str
    host: str
    partitions: list[tuple[str, int]]


@dataclass
class Group:
    name: str
    topics: list[str]
    members: list[Member]
    offsets_partition: int
    epochs: bool = True  # commits carry leader epochs (KIP-320 client); False = legacy client (-1)
    on_truncation: str = "reset_to_end"  # or "seek_beginning"
    producer_id: int = -1  # >= 0: commits through transactions (EOS)
    producer_epoch: int = 0
    interval: int = 60_000
    generation: int = 1
    active: bool = True
    dedicated: bool = False  # an incident's own group (not background)
    pos: dict[tuple[str, int], int] = field(default_factory=dict)
    stuck_until: dict[tuple[str, int], int] = field(default_factory=dict)
    lag_ms: dict[tuple[str, int], int] = field(default_factory=dict)
    skip_tps: set[tuple[str, int]] = field(default_factory=set)
    meta: dict[Any, Any] = field(default_factory=dict)
    rng: Any = None  # per-event draws (jitter, codecs) for this group (None: the simulation's jitter stream)
