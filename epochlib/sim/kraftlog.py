"""The controller's KRaft metadata log (``__cluster_metadata-0``), written as the simulation runs.

Layout (DESIGN.md ``<cluster_metadata>/**/__cluster_metadata-0/``, spec/kraft-metadata.md §1)::

    <out>/cluster_metadata/node=<controller id>/__cluster_metadata-0/
        <E:020d>-<raft epoch:010d>.checkpoint   KRaft snapshot: the cluster image at the simulation start
        <base offset:020d>.log                  segments from offset E (the log start: retention deleted
                                                everything the snapshot covers), rolled at a size
        leader-epoch-checkpoint                 the Raft epochs and the first offset of each in this log
        partition.metadata, quorum-state

Every batch goes through the codec's encoders (:func:`epochlib.kraft.encode_metadata_batch`,
:func:`~epochlib.kraft.encode_control_record_batch`, :func:`~epochlib.kraft.encode_snapshot`), at
metadata.version 20 (3.8-IV0): PartitionRecord / PartitionChangeRecord v1 with log-dir ids,
RegisterBrokerRecord v3. The active controller writes a NoOpRecord whenever it has been idle for
``idle_ms`` (Kafka's ``metadata.max.idle.interval.ms``; the simulator's default is coarser than Kafka's
500 ms to keep the files small) and fails over once, mid-run, to a new Raft epoch (a LeaderChange batch).

What the records say follows the simulated cluster exactly (kraft-metadata.md §3): a PartitionChangeRecord
for every published change of a partition — ``Leader`` when the leader epoch moved (by exactly one),
``Isr`` / ``Replicas`` (+ ``Directories``) when those changed, ``LeaderRecoveryState`` 1 for an election
outside the ISR and 0 at the next change of that partition (recovery done) — TopicRecord + PartitionRecords
for a topic created during the run, PartitionRecords alone for an expansion, RemoveTopicRecord for a
deletion. One simplification: a replica removed by a reassignment does not force a leader-epoch bump here
(the simulated brokers do not bump either, so captures and checkpoints stay consistent with the log).

The writer keeps, per (topic id, partition), when each leader epoch began (metadata offset and controller
time) and when a topic id was removed: the oracles (K1, K2, M2 with the log, M5) read them.
"""

from __future__ import annotations

import json
import random
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ._codec import need
from .writers import SegmentLog

__all__ = ["ControllerLog", "METADATA_TOPIC_ID", "PState"]

METADATA_VERSION = 20  # 3.8-IV0
PARTITION_V = 1  # PartitionRecord / PartitionChangeRecord with Directories (MV >= 3.7-IV2)
REGISTER_V = 3
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"  # the reserved id of __cluster_metadata (UUID 0...01)
NOOP, TOPIC, PARTITION, CHANGE, REMOVE_TOPIC, REGISTER, FEATURE, CONFIG = 20, 2, 3, 5, 9, 0, 12, 4
LEADER_CHANGE = 2
RECOVERED, RECOVERING = 0, 1


@dataclass
class PState:
    """What the log says about one partition now."""

    leader: int
    epoch: int
    partition_epoch: int
    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    lrs: int = RECOVERED


class ControllerLog:
    """The active controller's ``__cluster_metadata-0``: a snapshot of the starting image, then every change.

    ``truth(rule, kind, t, note, **subject)`` receives K2 findings: the rule text (a leader change whose new
    leader was not in the ISR just before it, or that sets LeaderRecoveryState RECOVERING) applied to every
    PartitionChangeRecord as it is written.
    """

    def __init__(self, directory: Path, *, rng: random.Random, brokers: list[int], idle_ms: int,
                 segment_bytes: int, truth: Callable[..., None]) -> None:  # fmt: skip
        self.kraft = need("kraft", "encode_metadata_batch", "encode_control_record_batch", "encode_snapshot")
        self.wire = need("_wire", "uuid_to_str")
        self.rng = rng
        self.truth = truth
        self.brokers = list(brokers)
        self.voters = [3000, 3001, 3002]  # dedicated controllers
        self.node = rng.choice(self.voters)
        self.dir = Path(directory) / f"node={self.node}" / "__cluster_metadata-0"
        self.idle_ms = idle_ms
        self.segment_bytes = segment_bytes
        self.raft_epoch = rng.randint(2, 6)
        self.log_dirs = {b: self._uuid() for b in self.brokers}
        self.state: dict[tuple[str, int], PState] = {}
        self.names: dict[str, str] = {}  # topic id -> name
        # (topic id, partition) -> [(leader epoch, metadata offset, controller ms)], oldest first; the first
        # entry of a partition in the starting snapshot is its epoch at the snapshot (offset E - 1).
        self.epochs: dict[tuple[str, int], list[tuple[int, int, int]]] = {}
        self.oldest_epoch: dict[tuple[str, int], int] = {}  # the oldest epoch the retained log shows
        self.removed: dict[str, tuple[int, int]] = {}  # topic id -> (offset, ms) of its RemoveTopicRecord
        self.raft_starts: list[tuple[int, int]] = []
        self.log: SegmentLog | None = None
        self.next_noop = 0
        self.first_ts: int | None = None  # the snapshot's time: where the replayed history starts
        self.last_ts: int | None = None  # the newest record written so far
        self.t_end: int | None = None
        self.failover_at: int | None = None
        self.node_after: int | None = None  # the Raft leader after the failover
        self.counts = {"metadata_batches": 0, "metadata_records": 0, "metadata_noops": 0,
                       "metadata_partition_changes": 0}  # fmt: skip

    def _uuid(self) -> str:
        raw = bytearray(self.rng.randbytes(16))
        raw[0] |= 0x10  # never one of the reserved ids (0, 1, 2)
        return self.wire.uuid_to_str(bytes(raw))

    # ------------------------------------------------------------------ the starting image

    def open(self, t0: int, t_end: int, topics: Iterable[tuple[str, str, list[Any]]]) -> None:
        """Write the snapshot of the image at ``t0`` (``topics``: (name, topic id, parts) with the parts'
        current state) and start the log right after it."""
        rng = self.rng
        end = rng.randrange(20_000, 90_000)  # snapshot end offset = log start offset
        last_ts = t0 - rng.randrange(1, self.idle_ms)
        records: list[tuple[int, int, dict[str, Any]]] = [
            (FEATURE, 0, {"name": "metadata.version", "feature_level": METADATA_VERSION})]
        for b in self.brokers:
            records.append((REGISTER, REGISTER_V, {
                "broker_id": b, "incarnation_id": self._uuid(), "broker_epoch": rng.randrange(10, end // 2),
                "end_points": [{"name": "PLAINTEXT", "host": f"broker-{b}.kafka.internal", "port": 9092,
                                "security_protocol": 0}],
                "features": [{"name": "metadata.version", "min_supported_version": 1,
                              "max_supported_version": METADATA_VERSION}],
                "rack": f"rack-{b % 3}", "fenced": False, "log_dirs": [self.log_dirs[b]]}))  # fmt: skip
        for name, tid, parts in topics:
            self.names[tid] = name
            records.append((TOPIC, 0, {"name": name, "topic_id": tid}))
            records.append((CONFIG, 0, {"resource_type": 2, "resource_name": name, "name": "cleanup.policy",
                                        "value": "delete"}))  # fmt: skip
            for p in parts:
                st = PState(p.leader, p.epoch, p.epoch + rng.randrange(0, 4), tuple(p.replicas), tuple(p.isr))
                records.append((PARTITION, PARTITION_V, self._partition_record(tid, p.index, st)))
                self.state[(tid, p.index)] = st
                self.epochs[(tid, p.index)] = [(st.epoch, end - 1, last_ts)]
                self.oldest_epoch[(tid, p.index)] = st.epoch
        self.dir.mkdir(parents=True, exist_ok=True)
        snap = self.kraft.encode_snapshot(records, epoch=self.raft_epoch, last_contained_timestamp=last_ts,
                                          timestamp=last_ts + rng.randrange(20, 60))  # fmt: skip
        (self.dir / f"{end:020d}-{self.raft_epoch:010d}.checkpoint").write_bytes(snap)
        self.log = SegmentLog(self.dir, self.segment_bytes, next_offset=end)
        self.raft_starts.append((self.raft_epoch, end))
        self.next_noop = last_ts + self.idle_ms
        self.first_ts, self.t_end = last_ts, t_end
        self.failover_at = t0 + int((t_end - t0) * rng.uniform(0.45, 0.65))

    def _partition_record(self, tid: str, idx: int, st: PState) -> dict[str, Any]:
        return {"partition_id": idx, "topic_id": tid, "replicas": list(st.replicas), "isr": list(st.isr),
                "removing_replicas": [], "adding_replicas": [], "leader": st.leader, "leader_recovery_state": st.lrs,
                "leader_epoch": st.epoch, "partition_epoch": st.partition_epoch,
                "directories": [self.log_dirs[b] for b in st.replicas]}  # fmt: skip

    # ------------------------------------------------------------------ appending

    @property
    def is_open(self) -> bool:
        return self.log is not None

    def _batch(self, t: int, records: list[tuple[int, int, dict[str, Any]]]) -> int:
        assert self.log is not None
        data = self.kraft.encode_metadata_batch(records, base_offset=self.log.next_offset, raft_epoch=self.raft_epoch,
                                                timestamp=t)  # fmt: skip
        self.counts["metadata_batches"] += 1
        self.counts["metadata_records"] += len(records)
        self.last_ts = t if self.last_ts is None else max(self.last_ts, t)
        return self.log.append(data, len(records))

    def _idle(self, t: int) -> None:
        """NoOp heartbeats for every idle interval before ``t``, and the controller failover when it is due."""
        assert self.log is not None
        while self.next_noop < t:
            if self.failover_at is not None and self.failover_at <= self.next_noop:
                self._failover(self.failover_at)
                continue
            self._batch(self.next_noop, [(NOOP, 0, {})])
            self.counts["metadata_noops"] += 1
            self.next_noop += self.idle_ms

    def _failover(self, t: int) -> None:
        assert self.log is not None
        self.failover_at = None
        self.node_after = self.rng.choice([v for v in self.voters if v != self.node])
        self.raft_epoch += 1
        granting = sorted({self.node_after, *self.rng.sample(self.voters, 2)})
        data = self.kraft.encode_control_record_batch([(LEADER_CHANGE, {
            "leader_id": self.node_after, "voters": [{"voter_id": v} for v in self.voters],
            "granting_voters": [{"voter_id": v} for v in granting]})], base_offset=self.log.next_offset,
            raft_epoch=self.raft_epoch, timestamp=t)  # fmt: skip
        self.raft_starts.append((self.raft_epoch, self.log.append(data, 1)))
        self.counts["metadata_batches"] += 1
        self.last_ts = t if self.last_ts is None else max(self.last_ts, t)
        self.next_noop = t + self.idle_ms

    def _write(self, t: int, records: list[tuple[int, int, dict[str, Any]]]) -> int:
        self._idle(t)
        base = self._batch(t, records)
        self.next_noop = t + self.idle_ms
        return base

    # ------------------------------------------------------------------ what the simulation reports

    def change(self, t: int, p: Any) -> None:
        """Part ``p`` was published at ``t``: write the PartitionChangeRecord of what changed (nothing when
        nothing the log records changed)."""
        key = (p.topic_id, p.index)
        old = self.state[key]
        leader, epoch, replicas, isr = p.leader, p.epoch, tuple(p.replicas), tuple(p.isr)
        d: dict[str, Any] = {"partition_id": p.index, "topic_id": p.topic_id}
        new = PState(leader, old.epoch, old.partition_epoch + 1, replicas, isr, old.lrs)
        elected = epoch != old.epoch
        if elected:
            if epoch != old.epoch + 1:
                raise AssertionError(f"{p.topic}-{p.index}: leader epoch {old.epoch} -> {epoch} in one change")
            d["leader"] = leader
            new.epoch = epoch
        elif leader != old.leader:
            raise AssertionError(f"{p.topic}-{p.index}: leader {old.leader} -> {leader} without an epoch bump")
        if isr != old.isr:
            d["isr"] = list(isr)
        if replicas != old.replicas:
            d["replicas"] = list(replicas)
            d["directories"] = [self.log_dirs[b] for b in replicas]
        unclean = elected and leader not in old.isr
        if unclean:
            d["leader_recovery_state"] = new.lrs = RECOVERING
        elif old.lrs == RECOVERING and len(d) > 2:
            d["leader_recovery_state"] = new.lrs = RECOVERED  # the new leader finished its recovery
        if len(d) == 2:
            return
        offset = self._write(t, [(CHANGE, PARTITION_V, d)])
        self.state[key] = new
        self.counts["metadata_partition_changes"] += 1
        if elected:
            self.epochs[key].append((epoch, offset, t))
        if unclean:
            self.truth("K2", "unclean_leader_election", t, f"broker {leader} elected outside the ISR "
                       f"{list(old.isr)} (LeaderRecoveryState RECOVERING)", topic=p.topic, topic_id=p.topic_id,
                       partition=p.index, new_leader=leader, previous_leader=old.leader, previous_isr=list(old.isr),
                       leader_epoch=epoch, metadata_offset=offset)  # fmt: skip

    def create_topic(self, t: int, name: str, tid: str, parts: list[Any]) -> None:
        """TopicRecord and one PartitionRecord per partition, in one batch."""
        self.names[tid] = name
        self._add_partitions(t, tid, parts, [(TOPIC, 0, {"name": name, "topic_id": tid})])

    def expand_topic(self, t: int, tid: str, parts: list[Any]) -> int:
        """PartitionRecords for new partitions of an existing topic id (no TopicRecord); returns the offset."""
        return self._add_partitions(t, tid, parts, [])

    def _add_partitions(self, t: int, tid: str, parts: list[Any], head: list) -> int:
        recs = list(head)
        sts = []
        for p in parts:
            st = PState(p.leader, p.epoch, 0, tuple(p.replicas), tuple(p.isr))
            recs.append((PARTITION, PARTITION_V, self._partition_record(tid, p.index, st)))
            sts.append((p.index, st))
        base = self._write(t, recs)
        for j, (idx, st) in enumerate(sts):
            self.state[(tid, idx)] = st
            self.epochs[(tid, idx)] = [(st.epoch, base + len(head) + j, t)]
            self.oldest_epoch[(tid, idx)] = st.epoch
        return base + len(head)

    def remove_topic(self, t: int, tid: str) -> None:
        self.removed[tid] = (self._write(t, [(REMOVE_TOPIC, 0, {"topic_id": tid})]), t)

    # ------------------------------------------------------------------ queries for the oracles

    def assigned(self, tid: str, idx: int, epoch: int) -> bool | None:
        """Whether the log assigned ``epoch`` to the partition; None when the retained log does not cover it
        (at or below the oldest epoch it shows, or a partition it never saw)."""
        oldest = self.oldest_epoch.get((tid, idx))
        if oldest is None or epoch < oldest:
            return None
        return any(e == epoch for e, _o, _t in self.epochs[(tid, idx)])

    def interval(self, tid: str, idx: int, epoch: int) -> tuple[int, int, int] | None:
        """The metadata offsets a response serving ``epoch`` can reflect: (start, end, end's controller ms),
        end exclusive (-1 = not yet ended); None when the log does not know the epoch."""
        hist = self.epochs.get((tid, idx))
        if not hist:
            return None
        for j, (e, o, _t) in enumerate(hist):
            if e == epoch:
                if j + 1 < len(hist):
                    return o, hist[j + 1][1], hist[j + 1][2]
                gone = self.removed.get(tid)
                return (o, gone[0], gone[1]) if gone else (o, -1, -1)
        return None

    def newer_epoch_before(self, tid: str, idx: int, epoch: int, t: int) -> tuple[int, int] | None:
        """The first epoch above ``epoch`` the log committed before ``t``: (epoch, controller ms), or None."""
        for e, _o, te in self.epochs.get((tid, idx), ()):
            if e > epoch and te < t:
                return e, te
        return None

    def topic_id_of(self, name: str) -> str | None:
        """The topic id the log gives ``name`` now (its live incarnation), None when no live topic has it."""
        live = [tid for tid, n in self.names.items() if n == name and tid not in self.removed]
        return live[-1] if live else None

    def covers(self, t: int) -> bool:
        """Will the finished log's history span ``t`` — its first record (the snapshot) at or before ``t``
        and its last record at or after it? That is when the audit gives a response without topic ids the id
        the log has for its name (``epochlib.rules.kraft.with_log_topic_ids``). Judged while the simulation
        runs: from the records already written and the heartbeats :meth:`close` will still write up to the
        end. One approximation: a change written in the last heartbeat interval before the end, after ``t``,
        would extend the history past a ``t`` this calls uncovered."""
        if self.log is None or self.first_ts is None or self.t_end is None or t < self.first_ts:
            return False
        if self.last_ts is not None and self.last_ts >= t:
            return True
        last, n, fo = self.last_ts, self.next_noop, self.failover_at
        if fo is not None and n < self.t_end:  # the failover is written once the heartbeats pass it
            passes = n + max(0, -(-(fo - n) // self.idle_ms)) * self.idle_ms
            if passes < self.t_end:
                last, n = fo, fo + self.idle_ms
        if n < self.t_end:  # the last heartbeat before the end
            last = n + (self.t_end - 1 - n) // self.idle_ms * self.idle_ms
        return last is not None and last >= t

    # ------------------------------------------------------------------ closing

    def close(self, t_end: int) -> None:
        """Heartbeats up to ``t_end``; the directory's other files."""
        if self.log is None:
            return
        self._idle(t_end)
        self.log.close()
        ck = need("checkpoint", "format_leader_epoch_checkpoint", "format_partition_metadata")
        (self.dir / "leader-epoch-checkpoint").write_bytes(
            ck.format_leader_epoch_checkpoint(self.raft_starts).encode("utf-8"))
        (self.dir / "partition.metadata").write_bytes(ck.format_partition_metadata(METADATA_TOPIC_ID).encode("utf-8"))
        leader = self.node if self.node_after is None else self.node_after
        state = {"clusterId": "", "leaderId": leader, "leaderEpoch": self.raft_epoch, "votedId": -1,
                 "appliedOffset": 0, "currentVoters": [{"voterId": v} for v in self.voters], "data_version": 0}  # fmt: skip
        (self.dir / "quorum-state").write_text(json.dumps(state, separators=(",", ":")), encoding="utf-8")
        self.log = None
