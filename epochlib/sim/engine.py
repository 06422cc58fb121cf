"""The discrete-event simulator: background workload, injected incidents, ground truth.

Simulated time is integer ms; every random draw comes from ``random.Random`` seeded by the scenario,
so a seed gives byte-identical output. Events run from a heap ordered by (time, sequence).

Ground truth. Each incident emits the findings it causes *by construction* (S1/S2 classes, D1, L1, L2,
L3, the M4 link). Where a finding depends on evidence the audit will combine later, small oracles
apply the rule text of spec/detection-rules.md to exactly what was written, so the truth names every
consequence (including knock-on ones):

- F2 oracle: commits on partitions with a truncation incident in the snapshot interval, and every
  injected commit, are checked against the lineage of the highest-epoch replica of the first snapshot
  round at or after the commit (endOffsetFor with that replica's LEO); ties as the audit breaks them
  (higher LEO where segments show it, then lower broker id).
- F4 oracle: every live commit, per (group, topic, partition), epoch below the highest committed before
  (tombstones reset), or -1 after epochs >= 0.
- L5 and M oracles, and F2's choice of a round's leader: :mod:`epochlib.sim.oracles`, fed from here
  (every readable snapshot lineage; every captured response in capture order).
- The controller's metadata log (:mod:`epochlib.sim.kraftlog`) records every published partition change,
  topic creation, expansion and deletion; its writer names K2 (unclean elections), the K1 oracle here
  checks every readable checkpoint entry against the epochs the log assigned, and
  :class:`~epochlib.sim.oracles.LogOracle` names M5 and the M2 findings only the log shows. The incidents
  of :mod:`epochlib.sim.kraft_incidents` (K1, P1, M5) draw from their own random stream, after all other
  planning, so adding them changed nothing else.

Clean background activity never triggers any of these: clients only take metadata from brokers that
already serve the latest published state (a stale broker is avoided, as the least-loaded choice would
normally pick an up-to-date one), consumers commit the epoch of the last record they read, elections
are clean, and snapshots are taken away from incidents.
"""

from __future__ import annotations

import bisect
import datetime as dt
import heapq
import random
from pathlib import Path
from typing import Any

from ._codec import COMMIT_V3, need
from .cluster import Client, Group, Member, MetaVersion, Part, TopicVersion
from .incidents import Incidents
from .kraft_incidents import KraftIncidents
from .kraftlog import ControllerLog
from .oracles import LogOracle, MetadataOracle, leader_rank, lineage_as_loaded, lineage_change
from .scenario import Scenario
from .writers import SegmentLog, TruthLog, snapshot_name, write_snapshot_files

MIN = 60_000
HOUR = 3_600_000
INT32_MIN = -(1 << 31)
RB = 20  # records per data-topic batch
SEG_RECORDS = 1000  # retention granularity (records per data segment)

SEV = need("rules", "SEVERITY").SEVERITY  # kind -> severity: the rules' own table, so truth and audit agree
# The metadata-log kinds (detection-rules.md, issue 15) until the rules' table has them; metadata_state_mixed
# is a warning on KRaft (one image per broker), which every simulated cluster is.
LOG_SEVERITY = {"checkpoint_epoch_unknown": "error", "unclean_leader_election": "warning",
                "metadata_offset_regression": "warning", "metadata_state_mixed": "warning",
                "expansion_order_violation": "warning"}  # fmt: skip


def severity(kind: str) -> str:
    """The severity the audit gives ``kind`` (the rules' table; the spec's for the metadata-log kinds)."""
    if kind == "metadata_state_mixed":
        return LOG_SEVERITY[kind]
    return SEV[kind] if kind in SEV else LOG_SEVERITY[kind]


class Sim:
    """One simulation: the cluster state, the background workload, the writers and the oracles.

    The injected incidents act on it through :class:`epochlib.sim.incidents.Incidents` (``self.incidents``),
    which sees only the narrow API of :class:`epochlib.sim.incidents.Engine`.
    """

    def __init__(self, sc: Scenario, out: Path) -> None:
        self.sc = sc
        self.out = Path(out)
        self.rec = need("records", "encode_batch", "encode_control_batch", "NewRecord")
        self.coord = need("coordinator", "encode_offset_commit_key", "encode_group_metadata_value", "encode_key",
                          "encode_consumer_subscription", "encode_consumer_assignment")  # fmt: skip
        self.ck = need("checkpoint", "format_leader_epoch_checkpoint")
        self.wire = need("_wire", "offsets_partition_for", "uuid_to_str")
        self.proto = None  # imported on the first metadata capture
        self.rng = random.Random(f"{sc.seed}:sim")
        day0 = dt.datetime.fromisoformat(sc.start).replace(tzinfo=dt.timezone.utc)
        self.t0 = int(day0.timestamp() * 1000)
        self.t_end = self.t0 + int(sc.days * 24 * HOUR)
        si = int(sc.snapshot_interval_hours * HOUR)
        rounds = []
        t = self.t0 + si
        while t < self.t_end - si // 2:
            rounds.append(t)
            t += si
        rounds.append(self.t_end - 2 * MIN)
        self.rounds = rounds
        self.bounds = [self.t0, *rounds]
        self.retention_ms = int(sc.retention_hours * HOUR)
        self.heap: list[tuple[int, int, Any, tuple]] = []
        self.seq = 0
        self.now = self.t0
        self.truth = TruthLog(self.out / "truth.jsonl")
        self.brokers = list(range(1, sc.brokers + 1))
        self.cluster_id = self.wire.uuid_to_str(self.rng.randbytes(16))
        self.controller = self.rng.choice(self.brokers)
        self.topic_versions: dict[str, list[TopicVersion]] = {}
        self.topic_parts: dict[str, list[Part] | None] = {}
        self.groups: dict[str, Group] = {}
        self.clients: list[Client] = []
        self.keys: dict[tuple[str, tuple[str, int]], bytes] = {}
        self.olog: dict[int, SegmentLog] = {}
        self.olog_epoch: dict[int, int] = {}
        cw = list(sc.codecs)
        self.codec_names = [c for c, _ in cw]
        self.codec_cum = []
        acc = 0.0
        for _, w in cw:
            acc += w
            self.codec_cum.append(acc)
        # oracles
        self.f4: dict[tuple[str, tuple[str, int]], int] = {}
        self.watch: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.f2_buffer: list[tuple] = []
        self.last_lineage: dict[tuple, tuple[tuple[tuple[int, int], ...], int]] = {}  # -> (entries, LEO)
        self.round_caps: dict[tuple[str, int, str], dict[int, tuple[Any, int]]] = {}
        self.m_oracle = MetadataOracle(self._truth, log_id=self._log_topic_id)
        # incident bookkeeping
        self.overlays: dict[tuple[int, int, tuple[str, int]], str] = {}
        self.d1: dict[tuple[tuple[str, int], int], dict] = {}
        self.pending: dict[tuple[str, tuple[str, int]], dict] = {}
        self.l5_expect: set = set()
        self.counts = {"commits": 0, "commit_batches": 0, "tombstones": 0, "group_metadata": 0, "txn_markers": 0,
                       "metadata_responses": 0, "snapshots": 0, "snapshot_files": 0, "data_batches": 0}  # fmt: skip
        self.srng = random.Random(f"{sc.seed}:jitter")  # per-event jitter, separate from planning draws
        self.incidents = Incidents(self)
        # the controller's metadata log, its incidents and oracles: a random stream of their own
        self.krng = random.Random(f"{sc.seed}:kraft")
        self.klog = ControllerLog(self.out / "cluster_metadata", rng=self.krng, brokers=self.brokers,
                                  idle_ms=sc.metadata_idle_ms, segment_bytes=sc.metadata_segment_bytes,
                                  truth=self._truth)  # fmt: skip
        self.hw_seen: dict[tuple[str, int], list[tuple[int, int]]] = {}
        self.log_oracle = LogOracle(self.klog, self._truth)
        self.kraft_incidents = KraftIncidents(self)

    # ------------------------------------------------------------------ scheduling

    def at(self, t: int, fn, *args) -> None:
        self.seq += 1
        heapq.heappush(self.heap, (int(t), self.seq, fn, args))

    def run(self) -> None:
        while self.heap:
            t, _, fn, args = heapq.heappop(self.heap)
            if t > self.t_end:
                break
            self.now = t
            fn(*args)

    # ------------------------------------------------------------------ setup

    def _topic_id(self) -> str:
        raw = bytearray(self.rng.randbytes(16))
        raw[0] |= 1  # never the all-zero id
        return self.wire.uuid_to_str(bytes(raw))

    def _lineage(self, leo: int, log_start: int, spread: bool) -> list[tuple[int, int]]:
        """A plausible history: epochs from >= 1 with small gaps; with ``spread`` the entries fall inside
        the retained range (so they survive retention for a while)."""
        n = self.rng.randint(3, 5)
        e = self.rng.randint(1, 3)
        lo = log_start + (leo - log_start) // 2 if spread else 0
        starts = sorted(self.rng.sample(range(lo + 1, max(lo + 2 * n + 2, leo - 10)), n - 1))
        out = [(e, 0)]
        for s in starts:
            e += self.rng.randint(1, 2)
            out.append((e, s))
        return out

    def make_topic(self, name: str, n: int, t: int, consumed: bool, *, fresh: bool = False,
                    avoid: list[list[int]] | None = None) -> list[Part]:  # fmt: skip
        tid = self._topic_id()
        parts = []
        rf = min(self.sc.replication_factor, len(self.brokers))
        for i in range(n):
            rate = self.rng.uniform(*self.sc.produce_rate) / 1000.0
            for _ in range(20):
                replicas = self.rng.sample(self.brokers, rf)
                if not avoid or sorted(replicas) != sorted(avoid[i]):
                    break
            if fresh:
                leo, start, entries = 0, 0, [(0, 0)]
            else:
                span = int(rate * self.retention_ms)
                leo = int(span * self.rng.uniform(1.2, 3.0)) + 5000
                start = max(0, (leo - span) // SEG_RECORDS * SEG_RECORDS)
                entries = self._lineage(leo, start, spread=not consumed)
            p = Part(name, i, tid, replicas, replicas[0], entries, leo, t, rate, 0)
            p.truncate_start(start)
            p.consumed = consumed
            p.meta.append(MetaVersion(t, {b: 0 for b in self.brokers}, *p.view()))
            parts.append(p)
        self.topic_parts[name] = parts
        self.topic_versions.setdefault(name, []).append(TopicVersion(t, {b: 0 for b in self.brokers}, parts, tid))
        if self.klog.is_open:
            self.klog.create_topic(t, name, tid, parts)
        return parts

    def delete_topic(self, name: str, delays: dict[int, int]) -> None:
        """Delete topic ``name`` now; ``delays``: when each broker stops serving it."""
        tid = self.topic_versions[name][-1].topic_id
        self.topic_versions[name].append(TopicVersion(self.now, delays, None, None))
        self.topic_parts[name] = None
        if self.klog.is_open and tid is not None:
            self.klog.remove_topic(self.now, tid)

    def new_group(self, name: str, topics: list[str], *, members: int | None = None, **kw) -> Group:
        tps = [(tp.topic, tp.index) for t in topics for tp in self.topic_parts[t]]
        nm = members or self.rng.randint(1, 2)
        nm = max(1, min(nm, len(tps)))
        ms = []
        per = -(-len(tps) // nm)
        for i in range(nm):
            mid = f"consumer-{name}-{i + 1}-{self.rng.randbytes(6).hex()}"
            ms.append(Member(mid, f"consumer-{name}-{i + 1}", f"/10.1.{len(self.groups) % 250}.{i + 10}",
                             tps[i * per:(i + 1) * per]))  # fmt: skip
        g = Group(name, topics, ms, self.wire.offsets_partition_for(name, self.sc.offsets_partitions), **kw)
        self.groups[name] = g
        return g

    def setup(self) -> None:
        sc, t = self.sc, self.t0
        n = sc.partitions
        small = max(2, n // 2)
        self.make_topic("orders", n, t, True)
        self.make_topic("clicks", n, t, True)
        self.make_topic("payments", n, t, True)
        self.make_topic("reports", small, t, True)
        self.make_topic("inventory", small, t, True)
        self.make_topic("shipments", small, t, True)
        a = sc.anomalies
        lineage_incidents = (a.stale_epoch_batches + a.unknown_epoch_batches + a.corrupt_checkpoints
                             + a.non_monotonic_checkpoints + a.lineage_rewrites + a.replica_conflicts)
        self.make_topic("audit-trail", max(n, lineage_incidents + 1), t, False)  # no consumers: lineage incidents
        for i in range(sc.bulk_topics):
            self.make_topic(f"bulk-{i:02d}", n, t, True)
        self.new_group("orders-processor", ["orders"])
        self.new_group("orders-audit", ["orders"], on_truncation="seek_beginning")
        self.new_group("clicks-sessionizer", ["clicks"])
        self.new_group("clicks-archiver", ["clicks"])
        self.new_group("payments-ledger", ["payments"])
        self.new_group("payments-eos", ["payments"], producer_id=self.rng.randint(1000, 90000), members=1)
        self.new_group("legacy-billing", ["payments"], epochs=False, members=1)
        self.new_group("inventory-sync", ["inventory"])
        for i in range(sc.bulk_topics):
            for j in range(sc.bulk_groups_per_topic):
                self.new_group(f"bulk-{i:02d}-app-{j}", [f"bulk-{i:02d}"], members=self.rng.randint(1, 3))
        # offsets partitions: a leader broker and leader epoch each
        for p in range(sc.offsets_partitions):
            b = self.rng.choice(self.brokers)
            self.olog_epoch[p] = self.rng.randint(0, 6)
            self.olog[p] = SegmentLog(self.out / "offsets" / f"broker={b}" / f"__consumer_offsets-{p}",
                                      sc.offsets_segment_bytes)  # fmt: skip
        for p in self.topic_parts["inventory"]:
            p.claimed = True  # reserved for the topic re-creation incident
        # clean data segments on a few consumed partitions
        pool = [p for p in self._all_parts() if p.consumed and p.topic in ("orders", "clicks", "payments")]
        for p in self.rng.sample(pool, min(sc.data_segment_partitions, len(pool))):
            p.segments = True
            p.claimed = True

    def _all_parts(self) -> list[Part]:
        return [p for ps in self.topic_parts.values() if ps for p in ps]

    def part(self, tp: tuple[str, int]) -> Part | None:
        ps = self.topic_parts.get(tp[0])
        return ps[tp[1]] if ps and tp[1] < len(ps) else None

    def _clients(self) -> None:
        sc = self.sc
        n = 0
        for g in self.groups.values():
            for m in g.members:
                self.clients.append(self.new_client(m.client_id, list(g.topics), n, g.name))
                n += 1
        names = [t for t in self.topic_parts if not t.startswith("bulk-")]
        for i in range(sc.extra_metadata_clients):
            topics = self.rng.sample(names, self.rng.randint(1, 3))
            self.clients.append(self.new_client(f"producer-{i + 1}", topics, n))
            n += 1

    def new_client(self, cid: str, topics: list[str], n: int, group: str | None = None) -> Client:
        # mostly v12 (topic ids), every 6th client v9 (epochs, no ids), every 9th an old v1/v5 (no epochs)
        version = 9 if n % 6 == 3 else self.rng.choice([1, 5]) if n % 9 == 5 else 12
        style = "pcap" if self.rng.random() < self.sc.pcap_fraction else self.rng.choice("ab")
        return Client(cid, topics, version, f"10.2.{n // 250}.{n % 250 + 1}", 40000 + n, style, group)

    # ------------------------------------------------------------------ planning

    def plan(self) -> None:
        sc, a = self.sc, self.sc.anomalies
        self._clients()
        # background: commits, rebalances, metadata fetches
        bg = [g for g in self.groups.values()]
        total = sum(len(m.partitions) for g in bg for m in g.members)
        interval = max(1000, int(total * (self.t_end - self.t0) / max(1, sc.commits)))
        for g in bg:
            g.interval = int(interval * self.rng.uniform(0.9, 1.1))
        # incidents (before the first events so they can claim partitions and groups)
        self.slot_use: dict[int, int] = {}
        self.incidents.plan(a)
        for _ in range(sc.clean_elections):
            p = self.claim(lambda p: True, claim=False)
            if p is not None:
                self.at(self.slot_time(self.rng.randrange(len(self.bounds) - 1)), self.clean_election, p)
        self.incidents.plan_console_group()
        # group metadata at start, commit ticks, rebalances
        for g in self.groups.values():
            if g.dedicated and not g.active:
                continue
            self.at(self.t0 + self.rng.randrange(0, 1000), self.write_group_metadata, g)
            for m in g.members:
                for tp in m.partitions:
                    p = self.part(tp)
                    lag = g.lag_ms.get(tp, 0)
                    g.pos.setdefault(tp, max(p.log_start, p.leo(self.t0) - int(p.rate * (lag + 5000))))
            self.at(self.t0 + 1000 + self.rng.randrange(0, g.interval), self.tick, g)
            if not g.dedicated:
                self.at(self.rng.randrange(self.t0 + HOUR, self.t_end - HOUR), self.rebalance, g)
        for c in self.clients:
            self.at(self.t0 + self.rng.randrange(0, sc.metadata_interval_s * 1000), self.meta_tick, c)
        for k, r in enumerate(self.rounds):
            for b in self.brokers:
                self.at(r + self.rng.randrange(0, 20) * 1000, self.snapshot, k, b)
            self.at(r + 30_000, self.round_end, k)
            self.at(r + 2 * MIN, self.retention)
        if sc.metadata_log:
            self.kraft_incidents.plan(a)
            self.klog.open(self.t0, self.t_end, [(name, ps[0].topic_id, ps) for name, ps in self.topic_parts.items()
                                                 if ps])  # fmt: skip

    def slot(self, need_after: int = 0, first: int = 0) -> int:
        """An interval index (between bounds[i] and bounds[i+1]) with room, least used first."""
        last = len(self.bounds) - 2 - need_after
        cands = list(range(min(first, last), last + 1)) or [0]
        self.rng.shuffle(cands)
        cands.sort(key=lambda i: self.slot_use.get(i, 0))
        i = cands[0]
        self.slot_use[i] = self.slot_use.get(i, 0) + 1
        return i

    def slot_time(self, i: int, lo_pad: int = 20 * MIN, hi_pad: int = 25 * MIN) -> int:
        lo, hi = self.bounds[i] + lo_pad, self.bounds[i + 1] - hi_pad
        return self.rng.randrange(lo, max(lo + 1, hi))

    def claim(self, pred, claim: bool = True, topics: tuple[str, ...] | None = None) -> Part | None:
        pool = [p for p in self._all_parts() if not p.claimed and pred(p) and (topics is None or p.topic in topics)]
        if not pool:
            return None
        p = self.rng.choice(pool)
        p.claimed = p.claimed or claim
        return p

    def groups_on(self, tp: tuple[str, int]) -> list[tuple[Group, Member]]:
        out = []
        for g in self.groups.values():
            for m in g.members:
                if tp in m.partitions:
                    out.append((g, m))
        return out

    def main_group(self, tp: tuple[str, int]) -> tuple[Group, Member]:
        for g, m in self.groups_on(tp):
            if g.epochs and g.producer_id < 0 and g.on_truncation == "reset_to_end" and not g.dedicated:
                return g, m
        raise RuntimeError(f"no background group consumes {tp}")

    def client_of(self, member: Member) -> Client:
        return next(c for c in self.clients if c.client_id == member.client_id)

    # ------------------------------------------------------------------ commits

    def _codec(self, rng: random.Random | None = None) -> str:
        return self.codec_names[bisect.bisect_left(self.codec_cum, (rng or self.srng).random() * self.codec_cum[-1])]

    def key(self, group: str, tp: tuple[str, int]) -> bytes:
        k = self.keys.get((group, tp))
        if k is None:
            k = self.keys[(group, tp)] = self.coord.encode_offset_commit_key(group, tp[0], tp[1])
        return k

    def tick(self, g: Group) -> None:
        t = self.now
        rng = g.rng or self.srng
        if g.active:
            jit = rng.random
            for m in g.members:
                recs = []
                for tp in m.partitions:
                    if tp in g.skip_tps:
                        continue
                    p = self.part(tp)
                    pos = g.pos.get(tp)
                    if p is None or pos is None:
                        continue
                    su = g.stuck_until.get(tp)
                    if su is not None and t < su:
                        recs.append((tp, pos, g.meta.get(("epoch", tp), p.epoch_at(pos)) if g.epochs else -1))
                        continue
                    leo = p.leo(t)
                    lag = g.lag_ms.get(tp)
                    target = leo - int(p.rate * (lag if lag else 2000 * jit()))
                    new = max(pos, min(target, pos + int(p.rate * g.interval * 4) + 50))
                    g.pos[tp] = new
                    e = p.epoch_at(new) if g.epochs else -1
                    g.meta[("epoch", tp)] = e
                    recs.append((tp, new, e))
                if recs:
                    self.commit(t, g, m, recs)
        self.at(t + int(g.interval * (0.95 + 0.1 * rng.random())), self.tick, g)

    def commit(self, t: int, g: Group, m: Member | None, recs: list[tuple[tuple[str, int], int, int]], *,
               injected: bool = False, txn: str | None = None, client_id: str | None = None) -> None:  # fmt: skip
        """Write one commit batch (one OffsetCommit / TxnOffsetCommit request) and run the oracles."""
        NR = self.rec.NewRecord
        pack = COMMIT_V3.pack
        records = []
        if txn is None and g.producer_id >= 0:
            txn = "COMMIT"
        live = txn != "ABORT"
        cid = client_id or (m.client_id if m else None)
        for tp, o, e in recs:
            records.append(NR(self.key(g.name, tp), pack(3, o, e, 0, t), t))
            if not live:
                continue
            kk = (g.name, tp)
            mx = self.f4.get(kk, -1)
            if e >= 0:
                if e < mx:
                    self._truth("F4", "commit_epoch_regression", t, f"epoch {e} below {mx} committed before",
                                topic=tp[0], partition=tp[1], group_id=g.name, client_id=cid, offset=o,
                                leader_epoch=e, expected_epoch=mx)  # fmt: skip
                else:
                    self.f4[kk] = e
            elif mx >= 0:
                self._truth("F4", "commit_epoch_dropped", t, f"commit without a leader epoch after epoch {mx}",
                            topic=tp[0], partition=tp[1], group_id=g.name, client_id=cid, offset=o,
                            expected_epoch=mx)  # fmt: skip
            w = self.watch.get(tp)
            if e >= 0 and (injected or (w and any(lo <= t < hi for lo, hi in w))):
                self.f2_buffer.append((t, g.name, tp, o, e, cid))
            pend = self.pending.pop(kk, None)
            if pend is not None:
                self._truth(pend.pop("rule"), pend.pop("kind"), t, pend.pop("note"), topic=tp[0], partition=tp[1],
                            group_id=g.name, client_id=cid, offset=o, leader_epoch=e, **pend)  # fmt: skip
        self._write_batch(t, g, records, txn)
        self.counts["commits"] += len(records)

    def _write_batch(self, t: int, g: Group, records: list, txn: str | None = None) -> None:
        log = self.olog[g.offsets_partition]
        ple = self.olog_epoch[g.offsets_partition]
        if g.producer_id >= 0 and txn is not None:
            seq = g.meta.get("seq", 0)
            g.meta["seq"] = seq + len(records)
            data = self.rec.encode_batch(records, base_offset=log.next_offset, partition_leader_epoch=ple,
                                         compression=self._codec(g.rng), producer_id=g.producer_id,
                                         producer_epoch=g.producer_epoch, base_sequence=seq,
                                         is_transactional=True)  # fmt: skip
            log.append(data, len(records))
            marker = self.rec.encode_control_batch(txn, base_offset=log.next_offset, partition_leader_epoch=ple,
                                                   producer_id=g.producer_id, producer_epoch=g.producer_epoch,
                                                   coordinator_epoch=3, timestamp=t + 7)  # fmt: skip
            log.append(marker, 1)
            self.counts["txn_markers"] += 1
        else:
            data = self.rec.encode_batch(records, base_offset=log.next_offset, partition_leader_epoch=ple,
                                         compression=self._codec(g.rng))  # fmt: skip
            log.append(data, len(records))
        self.counts["commit_batches"] += 1

    def commit_member(self, g: Group, tp: tuple[str, int], o: int, e: int, **kw) -> None:
        """One scripted commit of a single partition by the member that owns it."""
        m = next((m for m in g.members if tp in m.partitions), None)
        g.pos[tp] = o
        g.meta[("epoch", tp)] = e
        self.commit(self.now, g, m, [(tp, o, e)], txn="COMMIT" if g.producer_id >= 0 else None, **kw)

    def tombstones(self, g: Group, tps: list[tuple[str, int]], group_too: bool = False) -> None:
        NR = self.rec.NewRecord
        t = self.now
        recs = [NR(self.key(g.name, tp), None, t) for tp in tps]
        for tp in tps:
            self.f4.pop((g.name, tp), None)
            g.pos.pop(tp, None)
        if group_too:
            recs.append(NR(self.coord.encode_key(2, {"group": g.name}), None, t))
        self._write_batch(t, g, recs)
        self.counts["tombstones"] += len(recs)

    def write_group_metadata(self, g: Group, empty: bool = False) -> None:
        c = self.coord
        t = self.now
        members = []
        if not empty:
            for m in g.members:
                by_topic: dict[str, list[int]] = {}
                for tp in m.partitions:
                    by_topic.setdefault(tp[0], []).append(tp[1])
                assigned = [{"topic": k, "partitions": v} for k, v in by_topic.items()]
                members.append({
                    "member_id": m.member_id, "group_instance_id": None, "client_id": m.client_id,
                    "client_host": m.host, "rebalance_timeout": 300_000, "session_timeout": 45_000,
                    "subscription": c.encode_consumer_subscription(
                        {"topics": list(g.topics), "user_data": None, "owned_partitions": assigned,
                         "generation_id": g.generation, "rack_id": None}, 3),
                    "assignment": c.encode_consumer_assignment({"assigned_partitions": assigned, "user_data": None}, 3),
                })  # fmt: skip
        value = c.encode_group_metadata_value({
            "protocol_type": "consumer", "generation": g.generation, "protocol": None if empty else "range",
            "leader": None if empty else g.members[0].member_id, "current_state_timestamp": t, "members": members,
        }, 3)  # fmt: skip
        key = c.encode_key(2, {"group": g.name})
        self._write_batch(t, g, [self.rec.NewRecord(key, value, t)])
        self.counts["group_metadata"] += 1

    def rebalance(self, g: Group) -> None:
        if g.active:
            g.generation += 1
            self.write_group_metadata(g)

    # ------------------------------------------------------------------ metadata

    def publish(self, p: Part, lag: dict[int, int] | None = None) -> None:
        """Partition ``p`` changed now: the controller writes it to the metadata log, each broker serves it after
        its delay (``lag`` overrides some)."""
        rng = p.rng or self.srng
        delays = {b: rng.randrange(5, 150) for b in self.brokers}
        delays.update(lag or {})
        p.meta.append(MetaVersion(self.now, delays, *p.view()))
        if self.klog.is_open:
            self.klog.change(self.now, p)

    @staticmethod
    def _visible(versions: list, b: int, t: int):
        for v in reversed(versions):
            if v.t + v.delays.get(b, 0) <= t:
                return v
        return versions[0]

    @staticmethod
    def _latest(versions: list, t: int):
        for v in reversed(versions):
            if v.t <= t:
                return v
        return versions[0]

    def _fresh(self, b: int, topics: list[str], t: int) -> bool:
        for name in topics:
            tv = self.topic_versions[name]
            cur = self._visible(tv, b, t)
            if cur is not self._latest(tv, t):
                return False
            for p in cur.parts or ():
                if self._visible(p.meta, b, t) is not self._latest(p.meta, t):
                    return False
        return True

    def meta_tick(self, c: Client) -> None:
        t = self.now
        order = list(self.brokers)
        self.srng.shuffle(order)
        b = next((b for b in order if self._fresh(b, c.topics, t)), None)
        if b is None:
            self.at(t + 500, self.meta_tick, c)
            return
        self.capture(c, b, t)
        self.at(t + int(self.sc.metadata_interval_s * 1000 * (0.9 + 0.2 * self.srng.random())), self.meta_tick, c)

    def capture(self, c: Client, b: int, t: int) -> None:
        """Client ``c`` fetches metadata for its topics from broker ``b`` at ``t`` (broker ``b``'s view)."""
        if self.proto is None:
            self.proto = need("protocol", "encode_metadata_response", "encode_metadata_request", "frame")
        topics, obs = [], []
        for name in c.topics:
            tv = self._visible(self.topic_versions[name], b, t)
            if tv.parts is None:
                topics.append({"error_code": 3, "name": name, "topic_id": self.wire.uuid_to_str(bytes(16)),
                               "is_internal": False, "partitions": [], "topic_authorized_operations": INT32_MIN})  # fmt: skip
                continue
            parts = []
            for p in tv.parts:
                v = self._visible(p.meta, b, t)
                parts.append({"error_code": 0, "partition_index": p.index, "leader_id": v.leader,
                              "leader_epoch": v.epoch, "replica_nodes": list(v.replicas), "isr_nodes": list(v.isr),
                              "offline_replicas": list(v.offline)})  # fmt: skip
                obs.append((name, tv.topic_id, p.index, v.epoch, v.replicas))
            topics.append({"error_code": 0, "name": name, "topic_id": tv.topic_id, "is_internal": False,
                           "partitions": parts, "topic_authorized_operations": INT32_MIN})  # fmt: skip
        body = {
            "throttle_time_ms": 0,
            "brokers": [{"node_id": x, "host": f"broker-{x}.kafka.internal", "port": 9092, "rack": f"rack-{x % 3}"}
                        for x in self.brokers],
            "cluster_id": self.cluster_id, "controller_id": self.controller, "topics": topics,
            "cluster_authorized_operations": INT32_MIN, "error_code": 0,
        }  # fmt: skip
        c.corr += 1
        resp = self.proto.encode_metadata_response(body, c.version, c.corr)
        if c.style == "pcap":
            req = self.proto.encode_metadata_request(
                {"topics": [{"topic_id": "AAAAAAAAAAAAAAAAAAAAAA", "name": n} for n in c.topics], "allow_auto_topic_creation": True,
                 "include_cluster_authorized_operations": False, "include_topic_authorized_operations": False},
                c.version, c.corr, c.client_id)  # fmt: skip
            self.captures.wire(t, c.ip, c.port, f"10.0.0.{10 + b}", 9092, self.proto.frame(req),
                               self.proto.frame(resp), 1 + self.srng.randrange(4))  # fmt: skip
        else:
            self.captures.jsonl(t, c.client_id, b, f"broker-{b}.kafka.internal:9092", c.version, resp, style=c.style)
        self.counts["metadata_responses"] += 1
        before = len(self.truth.rows)
        self.m_oracle.observe(c, b, t, obs)
        m2 = {(r.get("topic_id"), r.get("partition")) for r in self.truth.rows[before:] if r["rule"] == "M2"}
        self.log_oracle.observe(c, b, t, obs, m2)

    # ------------------------------------------------------------------ elections and retention

    def clean_election(self, p: Part) -> None:
        if p.frozen or p.offline or self.part(p.tp) is not p:
            return
        cands = [b for b in p.in_sync() if b != p.leader]
        if not cands:
            return
        p.elect(self.now, self.rng.choice(cands))
        self.publish(p)

    def retention(self) -> None:
        for p in self._all_parts():
            span = int(p.rate * self.retention_ms)
            new = (p.leo(self.now) - span) // SEG_RECORDS * SEG_RECORDS
            if new > p.log_start:
                p.truncate_start(new)

    # ------------------------------------------------------------------ snapshots

    def snapshot(self, k: int, b: int) -> None:
        t = self.now
        t -= t % 1000
        root = self.out / "logdirs" / f"broker={b}" / f"snapshot={snapshot_name(t)}"
        items, ls, hw, rp = [], {}, {}, {}
        for p in self._all_parts():
            if b not in p.caches or b in p.offline:
                continue
            leo = p.frozen.get(b, p.leo(t))
            cache = p.caches[b]
            entries = [tuple(e) for e in cache.entries]
            ov = self.overlays.get((k, b, p.tp))
            text = self.ck.format_leader_epoch_checkpoint(entries)
            readable, monotonic = True, True
            if ov == "corrupt":
                text = text.replace(f"\n{len(entries)}\n", f"\n{len(entries) + 1}\n", 1)
                readable = False
                self._truth("L1", "checkpoint_unreadable", t, "entry count line does not match the entry lines",
                            topic=p.topic, topic_id=p.topic_id, partition=p.index, broker=b)
            elif ov == "unknown_epoch":  # a restored directory: one entry with an epoch the log never assigned
                last = entries[-1]
                entries = [*entries, (cache.latest_epoch + 4, last[1] + max(1, (leo - last[1]) // 2))]
                text = self.ck.format_leader_epoch_checkpoint(entries)
            elif ov == "non_monotonic":
                last = entries[-1]
                bad = (0, (last[1] + leo) // 2 if leo > last[1] + 1 else last[1])
                entries2 = [*entries, bad]
                text = self.ck.format_leader_epoch_checkpoint(entries2)
                monotonic = False
                self._truth("L2", "lineage_not_monotonic", t, f"entry {bad} after {last}", topic=p.topic,
                            topic_id=p.topic_id, partition=p.index, broker=b, entries=[list(e) for e in entries2])
            segs = self._segments(p, b, t, leo, ov) if p.segments else []
            items.append({"topic": p.topic, "partition": p.index, "topic_id": p.topic_id, "checkpoint": text,
                          "segments": segs})  # fmt: skip
            if p.log_start > 0:
                ls[p.tp] = p.log_start
            hw[p.tp] = min(leo, p.leo(t))
            rp[p.tp] = max(p.log_start, leo - (p.rng or self.srng).randrange(0, 50))
            self.hw_seen.setdefault((p.topic_id, p.index), []).append((t, hw[p.tp]))
            if readable and self.klog.is_open:
                self._k1(p, b, t, entries2 if not monotonic else entries)
            self.round_caps.setdefault((p.topic, p.index, p.topic_id), {})[b] = (cache.copy(), leo)
            if readable:
                # L5 sees the lineage the broker holds after loading the file; for a non-monotonic file
                # that is not what was written (an out-of-order entry evicts the entries before it), and
                # the audit compares it with this replica's snapshot before and after it
                shown_start = p.log_start or None  # the log-start-offset checkpoint lists it when > 0
                seen = tuple(entries) if monotonic else lineage_as_loaded(
                    entries2, log_start=shown_start, log_end=leo if p.segments else None)  # fmt: skip
                self._l5(b, p, t, seen, leo, shown_start)
            d1 = self.d1.get((p.tp, b))
            if d1 is not None and b in p.frozen:
                d1["seen"] += 1
                if d1["seen"] == 2:
                    self._truth("D1", "replica_divergence_unresolved", t,
                                "follower kept its divergent suffix in two consecutive snapshots",
                                topic=p.topic, topic_id=p.topic_id, partition=p.index, broker=b,
                                leader_broker=p.leader, truncation_point=d1["point"], log_end_offset=leo,
                                records_affected=leo - d1["point"])  # fmt: skip
                    self.at(t + 5 * MIN, self.incidents.resolve_divergence, p, b, d1["point"])
            pend = self.pending.pop(("D2", p.tp, b), None)
            if pend is not None:
                self._truth("D2", "replica_lineage_conflict", t, pend["note"], topic=p.topic, topic_id=p.topic_id,
                            partition=p.index, broker=b, other_broker=p.leader, epoch=pend["epoch"],
                            start_offset=pend["start"], other_start_offset=pend["other_start"])  # fmt: skip
        self.counts["snapshot_files"] += write_snapshot_files(root, items, ls, hw, rp)
        self.counts["snapshots"] += 1

    def _k1(self, p: Part, b: int, t: int, entries: list[tuple[int, int]]) -> None:
        """K1 by the rule text: a checkpoint entry whose epoch the metadata log never assigned to the partition,
        where the retained log covers it (above the oldest epoch it shows)."""
        for epoch, start in entries:
            if self.klog.assigned(p.topic_id, p.index, epoch) is False:
                self._truth("K1", "checkpoint_epoch_unknown", t, f"checkpoint entry ({epoch}, {start}): the "
                            "metadata log never assigned that epoch to the partition", topic=p.topic,
                            topic_id=p.topic_id, partition=p.index, broker=b, epoch=epoch, start_offset=start)

    def _l5(self, b: int, p: Part, t: int, new: tuple[tuple[int, int], ...], leo: int,
            log_start: int | None) -> None:  # fmt: skip
        key = (b, p.topic, p.index, p.topic_id)
        last = self.last_lineage.get(key)
        self.last_lineage[key] = (new, leo)
        if last is None:
            return
        prev, prev_leo = last
        rewritten, truncated = lineage_change(prev, prev_leo, new, log_start)
        if rewritten:
            self._truth("L5", "lineage_rewritten", t, "; ".join(rewritten), topic=p.topic, topic_id=p.topic_id,
                        partition=p.index, broker=b, previous=[list(x) for x in prev], current=[list(x) for x in new])
        elif truncated:
            self._truth("L5", "lineage_truncated", t, f"tail entries {truncated} removed", topic=p.topic,
                        topic_id=p.topic_id, partition=p.index, broker=b, removed=[list(x) for x in truncated])

    def _segments(self, p: Part, b: int, t: int, leo: int, ov: str | None) -> list[tuple[int, bytes]]:
        cache = p.caches[b]
        NR = self.rec.NewRecord
        start = max(p.log_start, (leo - self.sc.data_tail_records) // RB * RB)
        starts = [e.start_offset for e in cache.entries]
        plan = []
        o = start
        while o < leo:
            end = min((o // RB + 1) * RB, leo)
            i = bisect.bisect_right(starts, o)
            if i < len(starts) and starts[i] < end:
                end = starts[i]
            plan.append([o, end, cache.epoch_for_offset(o)])
            o = end
        if ov == "stale" and len(plan) >= 4:
            j = next((j for j in range(len(plan) // 2, len(plan) - 1) if plan[j][2] == plan[j - 1][2]
                      and plan[j][2] >= 1), None)  # fmt: skip
            if j is not None:
                plan[j].append(plan[j][2] - 1)
        elif ov == "unknown" and plan:
            plan[-1].append(max(e.epoch for e in cache.entries) + 3)
        out: list[tuple[int, bytes]] = []
        cur: list[bytes] = []
        cur_base, size = None, 0
        for item in plan:
            o, end, epoch = item[:3]
            stamp = item[3] if len(item) > 3 else epoch
            ts0 = t - int((leo - o) / p.rate)
            recs = [NR(None, b"v%09d" % (o + i), ts0 + int(i / p.rate)) for i in range(end - o)]
            data = self.rec.encode_batch(recs, base_offset=o, partition_leader_epoch=stamp, compression="none")
            self.counts["data_batches"] += 1
            if stamp != epoch:
                max_ts = max(r.timestamp for r in recs)
                sub = dict(topic=p.topic, topic_id=p.topic_id, partition=p.index, broker=b, base_offset=o,
                           batch_epoch=stamp, lineage_epoch=epoch, snapshot=snapshot_name(t))  # fmt: skip
                if ov == "unknown":
                    self._truth("L3", "batch_epoch_unknown", max_ts, "batch epoch above every lineage entry", **sub)
                else:  # also a mismatch, but L3 gives one finding per batch and the regression wins
                    self._truth("L3", "batch_epoch_regression", max_ts, "batch stamped with the previous epoch: "
                                "lower than the batch before it", **sub)  # fmt: skip
            if cur and size + len(data) > self.sc.data_segment_bytes:
                out.append((cur_base, b"".join(cur)))
                cur, size = [], 0
            if not cur:
                cur_base = o
            cur.append(data)
            size += len(data)
        if cur:
            out.append((cur_base, b"".join(cur)))
        return out

    def round_end(self, k: int) -> None:
        """F2 oracle: buffered commits made before this round, against the round's highest-epoch replica."""
        r = self.rounds[k]
        keep = []
        for item in self.f2_buffer:
            t, group, tp, o, e, cid = item
            if t >= r:
                keep.append(item)
                continue
            p = self.part(tp)
            caps = self.round_caps.get((tp[0], tp[1], p.topic_id)) if p else None
            if not caps:
                continue
            b = max(caps, key=lambda x: leader_rank(p, x, *caps[x]))
            cache, leo = caps[b]
            ep, end = cache.end_offset_for(e, leo)
            sub = dict(topic=tp[0], topic_id=p.topic_id, partition=tp[1], group_id=group, client_id=cid, offset=o,
                       leader_epoch=e, broker=b)  # fmt: skip
            if ep == -1:
                self._truth("F2", "commit_unknown_epoch", t, f"epoch {e} is newer than the lineage "
                            f"(latest {cache.latest_epoch})", **sub)  # fmt: skip
            elif end < o:
                self._truth("F2", "commit_beyond_epoch_end", t, f"epoch {e} ends at {end} in the lineage",
                            end_offset=end, records_affected=o - end, **sub)
        self.f2_buffer = keep
        self.round_caps = {}

    def _log_topic_id(self, name: str, t: int) -> str | None:
        """The id the controller's metadata log gives topic ``name`` at ``t``, where the log covers ``t``."""
        return self.klog.topic_id_of(name) if self.klog.covers(t) else None

    # ------------------------------------------------------------------ truth helper

    def _truth(self, rule: str, kind: str, t: int, note: str, **subject) -> None:
        self.truth.add(rule, kind, severity(kind), t, note, **subject)
