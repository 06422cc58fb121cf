"""Incidents only the controller's metadata log explains (issue 15): K1, P1 and the two M5 kinds.

(K2, the unclean election, needs no incident of its own: :mod:`epochlib.sim.incidents` already runs
unclean elections, and the metadata log writer names each one as it writes it.)

- **K1** ``checkpoint_epoch_unknown``: a single-replica partition of ``archive`` whose replica, in the
  last snapshot round, holds one more checkpoint entry, with an epoch the log never assigned (a
  directory restored from elsewhere). One replica, so no divergence rule sees a second lineage.
- **P1** ``expansion_order_violation``: ``telemetry`` (2 partitions) grows to 3 ten minutes after a
  snapshot round; its group lags 40 minutes on partition 0, is given the new partition at a rebalance
  and commits on it two minutes after the expansion, while its offset on partition 0 is still below the
  high watermark that round's snapshots recorded (a proven lower bound of that partition's log end).
- **M5** ``metadata_offset_regression``: a broker serving an older *whole* state: it lags on the changes
  of ``ledger`` and ``ledger-index``; a dashboard client reads ``ledger-index`` from an up-to-date broker,
  then ``ledger`` from the lagging one — no partition's epoch goes back for that client (no M1), yet the
  second state is older than the first. ``metadata_state_mixed``: a broker lags on one ``ledger``
  partition's change only and serves it beside the other partition's newer epoch.
  Both stale responses are also M2 findings *with the log* (the log had committed the newer epoch), which
  the captures alone would not show; :class:`epochlib.sim.oracles.LogOracle` names every one of these.

Everything here draws from the simulation's own ``krng`` and runs on topics, groups and clients of its
own, created after all other planning, so the incidents of :mod:`epochlib.sim.incidents` — their times,
subjects and findings — are exactly what they were without the metadata log.
"""

from __future__ import annotations

from .cluster import Client, Group, Member, MetaVersion, Part, TopicVersion
from .incidents import Engine
from .scenario import Anomalies

MIN = 60_000

__all__ = ["KraftIncidents"]


class KraftIncidents:
    """The metadata-log incidents of one simulation, planned after every other draw."""

    def __init__(self, sim: Engine) -> None:
        self.sim = sim
        self.rng = sim.krng

    # ------------------------------------------------------------------ helpers

    def _delays(self) -> dict[int, int]:
        return {b: self.rng.randrange(5, 150) for b in self.sim.brokers}

    def _window(self, hi_pad: int = 25 * MIN) -> int:
        b = self.sim.bounds
        i = self.rng.randrange(len(b) - 1)
        lo, hi = b[i] + 20 * MIN, b[i + 1] - hi_pad
        return self.rng.randrange(lo, max(lo + 1, hi))

    def _topic(self, name: str, n: int, rf: int, consumed: bool) -> list[Part]:
        """A topic that existed before the simulation (so it is in the log's starting snapshot)."""
        sim, rng = self.sim, self.rng
        raw = bytearray(rng.randbytes(16))
        raw[0] |= 1
        tid = sim.wire.uuid_to_str(bytes(raw))
        parts = []
        for i in range(n):
            rate = rng.uniform(*sim.sc.produce_rate) / 1000.0
            replicas = rng.sample(sim.brokers, min(rf, len(sim.brokers)))
            span = int(rate * sim.retention_ms)
            leo = int(span * rng.uniform(1.2, 2.0)) + 5000
            start = max(0, (leo - span) // 1000 * 1000)
            e = rng.randint(1, 4)
            entries, s = [(e, 0)], start + (leo - start) // 3
            for _ in range(rng.randint(1, 3)):
                e += rng.randint(1, 2)
                entries.append((e, s))
                s += rng.randint(5, 50)
            p = Part(name, i, tid, replicas, replicas[0], entries, leo, sim.t0, rate, 0)
            p.truncate_start(start)
            p.rng, p.consumed, p.claimed = rng, consumed, True
            p.meta.append(MetaVersion(sim.t0, {b: 0 for b in sim.brokers}, *p.view()))
            parts.append(p)
        sim.topic_parts[name] = parts
        sim.topic_versions[name] = [TopicVersion(sim.t0, {b: 0 for b in sim.brokers}, parts, tid)]
        return parts

    def _client(self, cid: str) -> Client:
        n = len(self.sim.clients)
        c = Client(cid, [], 12, f"10.4.{n // 250}.{n % 250 + 1}", 46000 + n, self.rng.choice("ab"))
        c.scripted = True
        self.sim.clients.append(c)
        return c

    def fetch(self, c: Client, b: int, topics: list[str]) -> None:
        c.topics = list(topics)
        self.sim.capture(c, b, self.sim.now)

    def elect(self, p: Part, lag: dict[int, int] | None = None) -> None:
        new = next((b for b in p.in_sync() if b != p.leader), None)
        if new is not None:
            p.elect(self.sim.now, new)
            self.sim.publish(p, lag=lag)

    # ------------------------------------------------------------------ planning

    def plan(self, a: Anomalies) -> None:
        """Create the incidents' topics (in the starting image) and schedule their steps."""
        rf = min(self.sim.sc.replication_factor, len(self.sim.brokers))
        if a.unknown_checkpoint_epochs:
            self.plan_unknown_epoch(self._topic("archive", a.unknown_checkpoint_epochs, 1, consumed=False))
        for i in range(a.partition_expansions):
            self.plan_expansion(self._topic(f"telemetry{'-' + str(i + 1) if i else ''}", 2, rf, consumed=True), i)
        if a.metadata_state_regressions or a.metadata_state_mixes:
            ledger = self._topic("ledger", 2, rf, consumed=False)
            index = self._topic("ledger-index", 1, rf, consumed=False)
            for i in range(max(a.metadata_state_regressions, a.metadata_state_mixes)):
                self.plan_state_incident(ledger, index, i, regression=i < a.metadata_state_regressions,
                                         mixed=i < a.metadata_state_mixes)  # fmt: skip

    # ------------------------------------------------------------------ K1

    def plan_unknown_epoch(self, parts: list[Part]) -> None:
        k = len(self.sim.rounds) - 1  # the last round: no later snapshot shows the entry vanish again
        for p in parts:
            self.sim.overlays[(k, p.replicas[0], p.tp)] = "unknown_epoch"

    # ------------------------------------------------------------------ P1

    def plan_expansion(self, parts: list[Part], n: int) -> None:
        sim, rng = self.sim, self.rng
        rounds = [r for r in sim.rounds[:-1] if r + 30 * MIN < sim.t_end]
        if not rounds:
            return
        t0x = rng.choice(rounds) + 10 * MIN
        name = parts[0].topic
        gname = f"{name}-enricher"
        members = [Member(f"consumer-{gname}-{j + 1}-{rng.randbytes(6).hex()}", f"consumer-{gname}-{j + 1}",
                          f"/10.5.{n}.{j + 10}", [p.tp]) for j, p in enumerate(parts)]  # fmt: skip
        g = Group(gname, [name], members, sim.wire.offsets_partition_for(gname, sim.sc.offsets_partitions),
                  dedicated=True, rng=rng)  # fmt: skip
        g.interval = sim.groups["orders-processor"].interval
        lagging = parts[0]
        g.lag_ms[lagging.tp] = 40 * MIN
        for p in parts:
            g.pos[p.tp] = max(p.log_start, p.leo(sim.t0) - int(p.rate * g.lag_ms.get(p.tp, 2000)))
        sim.groups[gname] = g
        sim.at(sim.t0 + rng.randrange(0, 1000), sim.write_group_metadata, g)
        sim.at(sim.t0 + 1000 + rng.randrange(0, g.interval), sim.tick, g)
        sim.at(t0x, self.expand, g, name)
        sim.at(t0x + MIN, self.rebalance_expanded, g, name)
        sim.at(t0x + 2 * MIN + rng.randrange(1, 20_000), self.early_commit, g, name, t0x)

    def expand(self, g: Group, name: str) -> None:
        sim, rng = self.sim, self.rng
        old = sim.topic_parts[name] or []
        tid = old[0].topic_id
        replicas = rng.sample(sim.brokers, len(old[0].replicas))
        p = Part(name, len(old), tid, replicas, replicas[0], [(0, 0)], 0, sim.now, old[0].rate, 0)
        p.rng, p.consumed, p.claimed = rng, True, True
        delays = self._delays()
        p.meta.append(MetaVersion(sim.now, delays, *p.view()))
        parts = [*old, p]
        sim.topic_parts[name] = parts
        sim.topic_versions[name].append(TopicVersion(sim.now, delays, parts, tid))
        g.meta[("expansion", name)] = (sim.klog.expand_topic(sim.now, tid, [p]) if sim.klog.is_open else None,
                                       {q.index: g.pos.get(q.tp, -1) for q in old})  # fmt: skip

    def rebalance_expanded(self, g: Group, name: str) -> None:
        new = (self.sim.topic_parts[name] or [])[-1]
        g.members[-1].partitions.append(new.tp)
        g.skip_tps.add(new.tp)  # assigned; the first commit on it is the scripted one below
        g.generation += 1
        self.sim.write_group_metadata(g)

    def early_commit(self, g: Group, name: str, t0x: int) -> None:
        """The group's first commit on the new partition; P1 by the rule text when an old partition's
        committed offset is below the largest proven lower bound of its log end at the expansion."""
        sim = self.sim
        parts = sim.topic_parts[name] or []
        new = parts[-1]
        g.skip_tps.discard(new.tp)
        offset, commits_at_t0 = g.meta[("expansion", name)]
        o = new.leo(sim.now)
        worst = None
        for q in parts[:-1]:
            bounds = [hw for ts, hw in sim.hw_seen.get((q.topic_id, q.index), ()) if ts <= t0x]
            bound = max([*bounds, commits_at_t0.get(q.index, -1)])
            committed = g.pos.get(q.tp, -1)
            if bound >= 0 and committed < bound and (worst is None or bound - committed > worst[1]):
                worst = (q.index, bound - committed, bound, committed)
        if worst is not None and o > 0:
            sim.pending[(g.name, new.tp)] = dict(
                rule="P1", kind="expansion_order_violation", topic_id=new.topic_id,
                note=f"consumed new partition {new.index} while partition {worst[0]} was {worst[1]} records behind "
                     f"its log end at the expansion", old_partition=worst[0], records_pending=worst[1],
                lower_bound=worst[2], committed_offset=worst[3], expansion_ts=t0x, metadata_offset=offset)  # fmt: skip
        sim.commit_member(g, new.tp, o, new.epoch_at(o))

    # ------------------------------------------------------------------ M5

    def plan_state_incident(self, ledger: list[Part], index: list[Part], n: int, *, regression: bool,
                            mixed: bool) -> None:  # fmt: skip
        sim, rng = self.sim, self.rng
        t = self._window(hi_pad=45 * MIN)
        if regression:
            c = self._client(f"ops-dashboard-{n + 1}")
            stale = rng.choice(sim.brokers)
            good = rng.choice([b for b in sim.brokers if b != stale])
            lag = {stale: 10 * MIN}  # the stale broker's whole image stops moving
            sim.at(t, self.elect, ledger[0], lag)
            sim.at(t + 20_000, self.elect, index[0], lag)
            sim.at(t + 50_000, self.fetch, c, good, ["ledger-index"])
            sim.at(t + 80_000, self.fetch, c, stale, ["ledger"])
        if mixed:
            c2 = self._client(f"capacity-planner-{n + 1}")
            stale2 = rng.choice(sim.brokers)
            t2 = t + 15 * MIN
            sim.at(t2, self.elect, ledger[1], {stale2: 10 * MIN})  # only this change reaches stale2 late
            sim.at(t2 + 20_000, self.elect, ledger[0], None)
            sim.at(t2 + 60_000, self.fetch, c2, stale2, ["ledger"])
