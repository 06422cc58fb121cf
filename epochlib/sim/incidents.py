"""Injected incidents: each ``plan_*`` claims a partition (or group) and a time slot, schedules the
steps, and names the findings the steps cause (directly, or through the oracles in engine.py).

Timing rules that keep the truth unambiguous: incidents run at least ~20 minutes away from snapshot
rounds; a partition belongs to one incident; incident groups and clients are dedicated where a shared
one would blur which finding belongs to what.

:class:`Incidents` acts on the simulation only through :class:`Engine`, the narrow part of
:class:`epochlib.sim.engine.Sim` it needs (clock, random draws, cluster state, writers, the oracles'
pending findings), so this module never imports the engine that drives it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from types import ModuleType
from typing import Any, Protocol

from .cluster import Client, Group, LeaderEpochCache, Member, Part, TopicVersion
from .scenario import Anomalies, Scenario

MIN = 60_000
HOUR = 60 * MIN
CONSUMED = ("orders", "clicks", "payments")


class Engine(Protocol):
    """What an incident may read and do in the simulation (implemented by ``epochlib.sim.engine.Sim``)."""

    sc: Scenario
    wire: ModuleType  # epochlib._wire: offsets_partition_for
    now: int
    t0: int
    t_end: int
    rng: random.Random  # planning draws
    srng: random.Random  # per-event jitter
    brokers: list[int]
    bounds: list[int]  # [t0, *snapshot rounds]: the intervals incidents are slotted into
    rounds: list[int]
    retention_ms: int
    groups: dict[str, Group]
    clients: list[Client]
    topic_versions: dict[str, list[TopicVersion]]
    topic_parts: dict[str, list[Part] | None]
    # ground-truth bookkeeping the engine's writers and oracles read back
    pending: dict[Any, dict]  # (group, tp) -> the finding the next commit causes; ("D2", tp, broker) -> D2
    watch: dict[tuple[str, int], list[tuple[int, int]]]  # tp -> F2-checked intervals
    d1: dict[tuple[tuple[str, int], int], dict]
    f4: dict[tuple[str, tuple[str, int]], int]
    overlays: dict[tuple[int, int, tuple[str, int]], str]  # (round, broker, tp) -> file overlay kind
    # the controller's metadata log and what the metadata-log incidents draw from (epochlib.sim.kraft_incidents)
    klog: Any  # epochlib.sim.kraftlog.ControllerLog
    krng: random.Random
    hw_seen: dict[tuple[str, int], list[tuple[int, int]]]  # (topic id, partition) -> [(snapshot ms, HW)]

    def at(self, t: int, fn: Callable[..., None], *args: Any) -> None: ...
    def part(self, tp: tuple[str, int]) -> Part | None: ...
    def claim(self, pred: Callable[[Part], bool], claim: bool = True,
              topics: tuple[str, ...] | None = None) -> Part | None: ...  # fmt: skip
    def slot(self, need_after: int = 0, first: int = 0) -> int: ...
    def slot_time(self, i: int, lo_pad: int = ..., hi_pad: int = ...) -> int: ...
    def groups_on(self, tp: tuple[str, int]) -> list[tuple[Group, Member]]: ...
    def main_group(self, tp: tuple[str, int]) -> tuple[Group, Member]: ...
    def client_of(self, member: Member) -> Client: ...
    def new_group(self, name: str, topics: list[str], *, members: int | None = None, **kw: Any) -> Group: ...
    def new_client(self, cid: str, topics: list[str], n: int, group: str | None = None) -> Client: ...
    def make_topic(self, name: str, n: int, t: int, consumed: bool, *, fresh: bool = False,
                   avoid: list[list[int]] | None = None) -> list[Part]: ...  # fmt: skip
    def publish(self, p: Part, lag: dict[int, int] | None = None) -> None: ...
    def delete_topic(self, name: str, delays: dict[int, int]) -> None: ...
    def clean_election(self, p: Part) -> None: ...
    def capture(self, c: Client, b: int, t: int) -> None: ...
    def tick(self, g: Group) -> None: ...
    def commit(self, t: int, g: Group, m: Member | None, recs: list[tuple[tuple[str, int], int, int]], *,
               injected: bool = False, txn: str | None = None, client_id: str | None = None) -> None: ...  # fmt: skip
    def commit_member(self, g: Group, tp: tuple[str, int], o: int, e: int, **kw: Any) -> None: ...
    def tombstones(self, g: Group, tps: list[tuple[str, int]], group_too: bool = False) -> None: ...
    def write_group_metadata(self, g: Group, empty: bool = False) -> None: ...


class Incidents:
    """The injected incidents of one simulation: planned up front, then run as events on ``sim``."""

    def __init__(self, sim: Engine) -> None:
        self.sim = sim
        self._extra_replica: dict[Part, int] = {}  # D2: the replica a reassignment added, removed later

    def plan(self, a: Anomalies) -> None:
        """Plan every incident the scenario asks for, in a fixed order (the draws decide the bytes)."""
        for n in range(a.unclean_elections):
            self.plan_unclean(d1=n < a.unresolved_divergence)
        for i in range(a.stale_metadata_rewinds):
            self.plan_stale_rewind(i)
        for _ in range(a.stale_broker_only):
            self.plan_stale_broker_only()
        for i in range(a.topic_recreations):
            self.plan_recreation(with_m3=i < a.topic_id_regressions)
        for _ in range(a.spurious_rewinds):
            self.plan_commit_incident("spurious_rewind")
        for _ in range(a.spurious_skips):
            self.plan_commit_incident("spurious_skip")
        for _ in range(a.stale_epoch_commits):
            self.plan_commit_incident("stale_epoch_commit")
        for _ in range(a.epoch_regressions):
            self.plan_commit_incident("epoch_regression")
        for _ in range(a.epoch_drops):
            self.plan_commit_incident("epoch_drop")
        for i in range(a.unknown_epoch_commits):
            self.plan_unknown_epoch_commits(i)
        for i in range(a.retention_resets):
            self.plan_retention_reset(i)
        for i in range(a.operator_resets):
            self.plan_operator_reset(i)
        for _ in range(a.aborted_txns):
            self.plan_aborted_txn()
        for _ in range(a.stale_epoch_batches):
            self.plan_batch_overlay("stale")
        for _ in range(a.unknown_epoch_batches):
            self.plan_batch_overlay("unknown")
        for _ in range(a.corrupt_checkpoints):
            self.plan_checkpoint_overlay("corrupt")
        for _ in range(a.non_monotonic_checkpoints):
            self.plan_checkpoint_overlay("non_monotonic")
        for _ in range(a.lineage_rewrites):
            self.plan_lineage_rewrite()
        for _ in range(a.replica_conflicts):
            self.plan_replica_conflict()

    # ------------------------------------------------------------------ helpers

    def _scripted_client(self, cid: str, topics: list[str]) -> Client:
        n = len(self.sim.clients)
        c = Client(cid, topics, 12, f"10.3.{n // 250}.{n % 250 + 1}", 45000 + n, self.sim.rng.choice("ab"))
        c.scripted = True
        self.sim.clients.append(c)
        return c

    def _dedicated_group(self, name: str, topics: list[str], members: int = 1, **kw) -> Group:
        g = self.sim.new_group(name, topics, members=members, **kw)
        g.dedicated = True
        g.interval = self.sim.groups["orders-processor"].interval
        for m in g.members:
            self.sim.clients.append(self.sim.new_client(m.client_id, list(topics), len(self.sim.clients), name))
        return g

    def scripted_fetch(self, c: Client, b: int) -> None:
        self.sim.capture(c, b, self.sim.now)

    def start_group(self, g: Group) -> None:
        g.active = True
        for m in g.members:
            for tp in m.partitions:
                p = self.sim.part(tp)
                g.pos[tp] = max(p.log_start, p.leo(self.sim.now) - int(p.rate * 1000))
        self.sim.write_group_metadata(g)
        self.sim.at(self.sim.now + g.interval // 3, self.sim.tick, g)

    def stall_group(self, g: Group) -> None:
        """The group's members leave: a new generation, written as an empty group."""
        g.active = False
        g.generation += 1
        self.sim.write_group_metadata(g, empty=True)

    def restart_group(self, g: Group) -> None:
        """The group's members rejoin: a new generation with the same assignment."""
        g.active = True
        g.generation += 1
        self.sim.write_group_metadata(g)

    def _elections_before(self, p: Part, t: int) -> None:
        """Two clean elections shortly before ``t``, so the lineage has interior entries then."""
        for lead in (45 * MIN, 30 * MIN):
            self.sim.at(max(self.sim.t0 + MIN, t - lead), self.sim.clean_election, p)

    # ------------------------------------------------------------------ unclean election (+ D1)

    def plan_unclean(self, d1: bool) -> None:
        # on "orders": its groups include one that seeks to the beginning on truncation (S1 over_rewind)
        p = self.sim.claim(lambda p: len(p.replicas) >= 3 and not p.segments, topics=("orders",))
        if p is None:
            return
        # The OSR replica falls behind and the ISR changes leader before snapshot round bounds[i] (so that
        # round records the epoch the unclean election later truncates away: L5 lineage_truncated); the
        # unclean election runs inside interval i; a D1 follower stays divergent for two more rounds.
        i = self.sim.slot(need_after=2 if d1 else 0, first=1)
        r, hi = self.sim.bounds[i], self.sim.bounds[i + 1] - 20 * MIN
        t_a, t_b = r - 50 * MIN, r - 25 * MIN
        t_c = r + 20 * MIN + (hi - r - 20 * MIN) // 2
        t_d = t_c + min(5 * MIN, (hi - t_c) // 2)
        self.sim.watch.setdefault(p.tp, []).append((self.sim.bounds[i], self.sim.bounds[i + 1]))
        self.sim.at(t_a, self.unclean_a, p, t_b, t_c, t_d, d1)

    def unclean_a(self, p: Part, t_b: int, t_c: int, t_d: int, d1: bool) -> None:
        followers = [b for b in p.replicas if b != p.leader]
        osr, new_leader, old_leader = followers[0], followers[1], p.leader
        p.frozen[osr] = p.leo(self.sim.now)  # falls out of sync
        p.isr.remove(osr)
        self.sim.publish(p)
        self.sim.at(t_b, self.unclean_b, p, new_leader)
        self.sim.at(t_c, self.unclean_c, p, osr, (new_leader, old_leader), t_d, d1)

    def unclean_b(self, p: Part, new_leader: int) -> None:
        p.elect(self.sim.now, new_leader)  # clean change inside the ISR: the epoch the OSR replica never saw
        self.sim.publish(p)

    def unclean_c(self, p: Part, osr: int, gone: tuple[int, int], t_d: int, d1: bool) -> None:
        t = self.sim.now
        leo = p.leo(t)
        for r in gone:  # the ISR's disks fail
            p.frozen[r] = leo
            p.offline.add(r)
        point = p.elect_unclean(t, osr)
        self.sim.publish(p)
        for g, _m in self.sim.groups_on(p.tp):
            pos = g.pos.get(p.tp)
            if not g.active or pos is None or pos <= point:
                continue
            g.stuck_until[p.tp] = t + 30_000
            self.sim.at(t + 30_000 + self.sim.rng.randrange(0, 5000), self.react_truncation, g, p, point, pos)
        self.sim.at(t_d, self.unclean_d, p, gone, d1)

    def react_truncation(self, g: Group, p: Part, point: int, prev: int) -> None:
        g.stuck_until.pop(p.tp, None)
        if g.on_truncation == "seek_beginning":
            new = p.log_start
            self.sim.pending[(g.name, p.tp)] = dict(
                rule="S1", kind="over_rewind", note="consumer went back to the log start after a truncation",
                previous_offset=prev, truncation_point=point, records_affected=point - new)  # fmt: skip
        else:
            new = min(point + max(1, int(p.rate * 20_000)), p.leo(self.sim.now))
            self.sim.pending[(g.name, p.tp)] = dict(
                rule="S1", kind="truncation", note="rewind to the truncation point of an unclean election",
                previous_offset=prev, truncation_point=point, records_affected=prev - point)  # fmt: skip
        self.sim.commit_member(g, p.tp, new, p.epoch_at(new))

    def unclean_d(self, p: Part, returning: tuple[int, int], d1: bool) -> None:
        lc = p.caches[p.leader]
        for r in returning:
            cr = p.caches[r]
            ep, end = lc.end_offset_for(cr.latest_epoch, p.leo(self.sim.now))
            own = cr.end_offset_for(ep, p.frozen[r])[1] if ep >= 0 else p.frozen[r]
            point = min(end, own) if end >= 0 else p.log_start
            p.offline.discard(r)
            if d1 and r == returning[1]:
                self.sim.d1[(p.tp, r)] = {"seen": 0, "point": point}  # fails to truncate (KAFKA-10706)
                continue
            self._catch_up(p, r, point)
        self.sim.publish(p)

    def _catch_up(self, p: Part, r: int, point: int) -> None:
        cr, lc = p.caches[r], p.caches[p.leader]
        cr.truncate_from_end(point)
        leo = p.leo(self.sim.now)
        if point < leo:
            e = lc.epoch_for_offset(point)
            if e is not None:
                cr.assign(e, point)
            for ent in lc.entries:
                if ent.start_offset > point:
                    cr.assign(ent.epoch, ent.start_offset)
        p.frozen.pop(r, None)
        if r not in p.isr:
            p.isr.append(r)

    def resolve_divergence(self, p: Part, b: int, point: int) -> None:
        self.sim.d1.pop((p.tp, b), None)
        self._catch_up(p, b, point)
        self.sim.publish(p)

    # ------------------------------------------------------------------ stale metadata

    def plan_stale_rewind(self, n: int) -> None:
        p = self.sim.claim(lambda p: len(p.replicas) >= 2 and not p.segments, topics=("clicks", "payments", "orders"))
        if p is None:
            return
        g, m = self.sim.main_group(p.tp)
        c = self.sim.client_of(m)
        c.version = 12
        p.collapse_lineage()
        t = self.sim.slot_time(self.sim.slot(), hi_pad=40 * MIN)
        self.sim.at(t, self.stale_election, p, g, c)

    def _stale_elect(self, p: Part, lag_ms: int) -> tuple[int, int]:
        new_leader = next(b for b in p.in_sync() if b != p.leader)
        stale = self.sim.rng.choice([b for b in self.sim.brokers if b != new_leader])
        good = next(b for b in self.sim.brokers if b != stale)
        p.elect(self.sim.now, new_leader)
        self.sim.publish(p, lag={stale: lag_ms})
        return stale, good

    def stale_election(self, p: Part, g: Group, c: Client) -> None:
        t = self.sim.now
        g.stuck_until[p.tp] = t + 4 * MIN  # fetching from the wrong leader: no progress
        stale, good = self._stale_elect(p, 10 * MIN)
        self.sim.at(t + 30_000, self.scripted_fetch, c, good)
        self.sim.at(t + 75_000, self.scripted_fetch, c, stale)
        self.sim.at(t + 4 * MIN, self.spurious_earliest, g, p)

    def spurious_earliest(self, g: Group, p: Part) -> None:
        g.stuck_until.pop(p.tp, None)
        prev = g.pos[p.tp]
        new = p.log_start
        self.sim.pending[(g.name, p.tp)] = dict(
            rule="S1", kind="spurious_rewind_to_earliest", m4_correlated=True, cause="stale metadata",
            note="reset to earliest minutes after the group's client got stale metadata (KAFKA-6262)",
            previous_offset=prev, records_affected=prev - new)  # fmt: skip
        self.sim.commit_member(g, p.tp, new, p.epoch_at(new))

    def plan_stale_broker_only(self) -> None:
        p = self.sim.claim(lambda p: len(p.replicas) >= 2 and not p.segments, topics=CONSUMED + ("reports", "shipments"))
        if p is None:
            return
        n = len(self.sim.clients)
        victim = self._scripted_client(f"monitoring-agent-{n}", [p.topic])
        observer = self._scripted_client(f"lag-exporter-{n}", [p.topic])
        t = self.sim.slot_time(self.sim.slot(), hi_pad=40 * MIN)
        self.sim.at(t, self.stale_only, p, victim, observer)

    def stale_only(self, p: Part, victim: Client, observer: Client) -> None:
        t = self.sim.now
        stale, good = self._stale_elect(p, 10 * MIN)
        self.sim.at(t + 20_000, self.scripted_fetch, observer, good)
        self.sim.at(t + 60_000, self.scripted_fetch, victim, stale)

    # ------------------------------------------------------------------ topic re-creation (+ M3)

    def plan_recreation(self, with_m3: bool) -> None:
        name = "inventory"  # reserved for this incident at setup
        if self.sim.topic_versions[name][-1].t != self.sim.t0 or len(self.sim.bounds) < 3:
            return  # one re-creation per run
        i = self.sim.slot(first=1)
        r = self.sim.bounds[i]
        groups = [g for g in self.sim.groups.values() if name in g.topics]
        victim = self._scripted_client("inventory-dashboard", [name]) if with_m3 else None
        stale = self.sim.rng.choice(self.sim.brokers) if with_m3 else None
        t_d, t_r = r + 20 * MIN, r + 35 * MIN
        if victim is not None:
            self.sim.at(r - 45 * MIN, self.scripted_fetch, victim, next(b for b in self.sim.brokers if b != stale))
        self.sim.at(r - 40 * MIN, self.recreate_stop, groups)
        self.sim.at(t_d, self.recreate_delete, name, groups, stale, t_r)
        self.sim.at(t_r, self.recreate_create, name, stale, victim)
        self.sim.at(t_r + 5 * MIN, self.recreate_restart, groups)

    def recreate_stop(self, groups: list[Group]) -> None:
        for g in groups:
            self.stall_group(g)

    def recreate_delete(self, name: str, groups: list[Group], stale: int | None, t_r: int) -> None:
        for g in groups:  # the coordinator deletes the offsets of a deleted topic
            tps = [tp for m in g.members for tp in m.partitions if tp[0] == name]
            self.sim.tombstones(g, tps)
        delays = {b: self.sim.srng.randrange(5, 150) for b in self.sim.brokers}
        if stale is not None:
            delays[stale] = t_r - self.sim.now + 10 * MIN
        self.sim.delete_topic(name, delays)

    def recreate_create(self, name: str, stale: int | None, victim: Client | None) -> None:
        old = self.sim.topic_versions[name][0].parts or []
        parts = self.sim.make_topic(name, len(old), self.sim.now, True, fresh=True, avoid=[p.replicas for p in old])
        for p in parts:
            p.claimed = True
        tv = self.sim.topic_versions[name][-1]
        tv.delays = {b: self.sim.srng.randrange(5, 150) for b in self.sim.brokers}
        if stale is not None:
            tv.delays[stale] = 8 * MIN
        if victim is not None:
            good = next(b for b in self.sim.brokers if b != stale)
            self.sim.at(self.sim.now + 60_000, self.scripted_fetch, victim, good)
            self.sim.at(self.sim.now + 120_000, self.scripted_fetch, victim, stale)

    def recreate_restart(self, groups: list[Group]) -> None:
        for g in groups:
            self.restart_group(g)
            for m in g.members:
                for tp in m.partitions:
                    g.pos[tp] = 0  # auto.offset.reset=earliest on the new, empty topic
                    g.meta[("epoch", tp)] = 0

    # ------------------------------------------------------------------ commit incidents

    def plan_commit_incident(self, kind: str) -> None:
        p = self.sim.claim(lambda p: not p.segments, topics=CONSUMED)
        if p is None:
            return
        g, m = self.sim.main_group(p.tp)
        if kind == "spurious_skip":
            g.lag_ms[p.tp] = 40 * MIN
        t = self.sim.slot_time(self.sim.slot())
        self.sim.at(t, self.commit_incident, kind, g, p)

    def commit_incident(self, kind: str, g: Group, p: Part) -> None:
        tp = p.tp
        prev = g.pos[tp]
        rng = self.sim.rng
        if kind == "spurious_rewind":
            k = max(1, int((prev - p.log_start) * rng.uniform(0.3, 0.6)))
            self.sim.pending[(g.name, tp)] = dict(rule="S1", kind="spurious_rewind", note="rewind with no truncation, "
                                              "retention, reset or stale metadata to explain it",
                                              previous_offset=prev, records_affected=k)  # fmt: skip
            self.sim.commit_member(g, tp, prev - k, p.epoch_at(prev - k))
        elif kind == "spurious_skip":
            g.lag_ms.pop(tp, None)
            new = p.leo(self.sim.now)
            self.sim.pending[(g.name, tp)] = dict(rule="S2", kind="spurious_skip", note="lagging consumer jumped to "
                                              "the log end (reset to latest) with nothing to explain it",
                                              previous_offset=prev, records_affected=new - prev)  # fmt: skip
            self.sim.commit_member(g, tp, new, p.epoch)
        elif kind == "stale_epoch_commit":
            head = p.lcache.earliest_entry.epoch
            if head < 1:
                return
            k = max(1, int((prev - p.log_start) * rng.uniform(0.1, 0.3)))
            self.sim.pending[(g.name, tp)] = dict(rule="S1", kind="stale_epoch_commit", note=f"rewind committed with "
                                              f"epoch {head - 1}, below the lineage head {head} (KAFKA-19902)",
                                              previous_offset=prev, records_affected=k)  # fmt: skip
            self.sim.commit_member(g, tp, prev - k, head - 1, injected=True)
        elif kind == "epoch_regression":
            mx = self.sim.f4.get((g.name, tp), -1)
            if mx >= 1:
                self.sim.commit_member(g, tp, prev, mx - 1, injected=True)
        elif kind == "epoch_drop":
            self.sim.commit_member(g, tp, prev, -1)

    def plan_unknown_epoch_commits(self, n: int) -> None:
        p = self.sim.claim(lambda p: not p.segments, topics=CONSUMED)
        if p is None:
            return
        src, _m = self.sim.main_group(p.tp)
        g = Group(f"mm2-us-east.{src.name}", [p.topic], [], self.sim.wire.offsets_partition_for(
            f"mm2-us-east.{src.name}", self.sim.sc.offsets_partitions), dedicated=True, active=False)  # fmt: skip
        if g.name in self.sim.groups:
            g.name += f"-{n}"
            g.offsets_partition = self.sim.wire.offsets_partition_for(g.name, self.sim.sc.offsets_partitions)
        self.sim.groups[g.name] = g
        t = self.sim.slot_time(self.sim.slot(), hi_pad=40 * MIN)
        for j in range(3):
            self.sim.at(t + j * 2 * MIN, self.mm2_commit, g, p)

    def mm2_commit(self, g: Group, p: Part) -> None:
        o = max(p.log_start, p.leo(self.sim.now) - int(p.rate * 60_000))
        e = p.epoch + 40  # the source cluster's epoch, translated verbatim
        self.sim.commit(self.sim.now, g, None, [(p.tp, o, e)], injected=True, client_id="mm2-checkpoint-connector")

    def plan_retention_reset(self, n: int) -> None:
        g = self._dedicated_group(f"reports-nightly-{n + 1}", ["reports"])
        t_stall = self.sim.t0 + (20 + 10 * n) * MIN
        cands = [k for k, r in enumerate(self.sim.rounds[:-1]) if r - t_stall > self.sim.retention_ms + 30 * MIN]
        if not cands:
            return
        k = cands[min(n, len(cands) - 1)]
        self.sim.at(t_stall, self.stall_group, g)
        self.sim.at(self.sim.rounds[k] + 20 * MIN + n * MIN, self.restart_after_retention, g)

    def restart_after_retention(self, g: Group) -> None:
        self.restart_group(g)
        for m in g.members:
            for tp in m.partitions:
                p = self.sim.part(tp)
                prev = g.pos[tp]
                if prev < p.log_start:
                    new = p.log_start
                    self.sim.pending[(g.name, tp)] = dict(rule="S2", kind="retention", note="consumer fell behind "
                                                      "retention and reset to earliest", previous_offset=prev,
                                                      records_affected=new - prev)  # fmt: skip
                    self.sim.commit_member(g, tp, new, p.epoch_at(new))

    def plan_operator_reset(self, n: int) -> None:
        g = self._dedicated_group(f"shipments-router-{n + 1}", ["shipments"])
        t = self.sim.slot_time(self.sim.slot(), hi_pad=40 * MIN)
        self.sim.at(t, self.stall_group, g)
        self.sim.at(t + 5 * MIN, self.operator_reset, g)
        self.sim.at(t + 10 * MIN, self.restart_group, g)

    def operator_reset(self, g: Group) -> None:
        recs = []
        for m in g.members:
            for tp in m.partitions:
                p = self.sim.part(tp)
                prev = g.pos[tp]
                lo = max(p.log_start, p.lcache.latest_entry.start_offset)
                span = prev - lo if prev - lo >= 2 else prev - p.log_start
                k = max(1, int(span * self.sim.rng.uniform(0.2, 0.5)))
                g.pos[tp] = prev - k
                recs.append((tp, prev - k, -1))
                self.sim.pending[(g.name, tp)] = dict(rule="S1", kind="operator_reset", note="offsets reset while the "
                                                  "group was empty (kafka-consumer-groups --reset-offsets)",
                                                  previous_offset=prev, records_affected=k)  # fmt: skip
        self.sim.commit(self.sim.now, g, None, recs, client_id="adminclient-1")

    def plan_aborted_txn(self) -> None:
        g = self.sim.groups["payments-eos"]
        t = self.sim.slot_time(self.sim.slot())
        self.sim.at(t, self.aborted_txn, g)

    def aborted_txn(self, g: Group) -> None:
        m = g.members[0]
        tp = self.sim.rng.choice(m.partitions)
        p = self.sim.part(tp)
        prev = g.pos.get(tp, p.log_start)
        new = max(p.log_start, prev - 500)
        self.sim.commit(self.sim.now, g, m, [(tp, new, p.epoch_at(new))], txn="ABORT")  # a zombie's rewind, aborted

    def plan_console_group(self) -> None:
        g = self._dedicated_group(f"console-consumer-{self.sim.rng.randint(10000, 99999)}", ["clicks"])
        g.active = False
        t = self.sim.slot_time(self.sim.slot(), hi_pad=60 * MIN)
        self.sim.at(t, self.start_group, g)
        self.sim.at(t + 20 * MIN, self.stall_group, g)
        self.sim.at(min(t + 3 * HOUR, self.sim.t_end - 5 * MIN), self.expire_group, g)

    def expire_group(self, g: Group) -> None:
        tps = [tp for m in g.members for tp in m.partitions if tp in g.pos]
        self.sim.tombstones(g, tps, group_too=True)

    # ------------------------------------------------------------------ lineage-file incidents

    def _audit_part(self, pred=lambda p: True) -> Part | None:
        return self.sim.claim(lambda p: not p.consumed and len(p.replicas) >= 2 and pred(p), topics=("audit-trail",))

    def plan_batch_overlay(self, kind: str) -> None:
        p = self._audit_part()
        if p is None:
            return
        p.segments = True
        k = self.sim.rng.randrange(len(self.sim.rounds))
        b = p.leader if kind == "unknown" else next(b for b in p.replicas if b != p.leader)
        self.sim.overlays[(k, b, p.tp)] = kind

    def plan_checkpoint_overlay(self, kind: str) -> None:
        p = self._audit_part(lambda p: not p.segments)
        if p is None:
            return
        k = len(self.sim.rounds) - 1 if kind == "non_monotonic" else self.sim.rng.randrange(len(self.sim.rounds))
        b = next(b for b in p.replicas if b != p.leader)
        self.sim.overlays[(k, b, p.tp)] = kind

    def plan_lineage_rewrite(self) -> None:
        p = self._audit_part(lambda p: not p.segments)
        if p is None or len(self.sim.bounds) < 3:
            return
        b = next(b for b in p.replicas if b != p.leader)
        i = self.sim.slot(first=1)
        self._elections_before(p, self.sim.bounds[i])  # before the snapshot that shows the original lineage
        self.sim.at(self.sim.slot_time(i), self.rewrite_lineage, p, b)

    def rewrite_lineage(self, p: Part, b: int) -> None:
        ents = list(p.caches[b].entries)
        if len(ents) >= 3:  # an interior entry vanishes (a restored or hand-edited partition dir)
            p.caches[b] = LeaderEpochCache([e for j, e in enumerate(ents) if j != len(ents) // 2])

    def plan_replica_conflict(self) -> None:
        p = self._audit_part(lambda p: not p.segments and len(p.replicas) < len(self.sim.brokers))
        if p is None:
            return
        i = self.sim.slot()
        r = self.sim.bounds[i + 1]
        self._elections_before(p, r - 30 * MIN)
        self.sim.at(r - 30 * MIN, self.add_conflicting_replica, p)
        self.sim.at(r + 10 * MIN, self.remove_extra_replica, p)

    def add_conflicting_replica(self, p: Part) -> None:
        r = next(b for b in self.sim.brokers if b not in p.replicas)
        ents = list(p.lcache.entries)
        j = next((j for j in range(1, len(ents) - 1) if ents[j + 1].start_offset - ents[j].start_offset >= 2), None)
        if j is None:
            return
        nxt = ents[j + 1].start_offset
        shift = self.sim.rng.randint(1, nxt - ents[j].start_offset - 1)
        moved = [(e.epoch, e.start_offset + (shift if k == j else 0)) for k, e in enumerate(ents)]
        p.caches[r] = LeaderEpochCache(moved)  # a reassignment copied the log with a wrong epoch boundary
        p.replicas.append(r)
        p.isr.append(r)
        self.sim.publish(p)
        self.sim.pending[("D2", p.tp, r)] = {"note": f"epoch {ents[j].epoch} starts at {ents[j].start_offset + shift} "
                                         f"here and at {ents[j].start_offset} on the leader",
                                         "epoch": ents[j].epoch, "start": ents[j].start_offset + shift,
                                         "other_start": ents[j].start_offset}  # fmt: skip
        self._extra_replica[p] = r

    def remove_extra_replica(self, p: Part) -> None:
        r = self._extra_replica.get(p)
        if r is None or r not in p.caches:
            return
        p.replicas.remove(r)
        if r in p.isr:
            p.isr.remove(r)
        del p.caches[r]
        self.sim.publish(p)


__all__ = ["Engine", "Incidents"]
