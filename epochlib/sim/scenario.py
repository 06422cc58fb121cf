"""Scenario specs: what cluster to simulate and which anomalies to inject, as plain dataclasses.

A scenario is data; :func:`epochlib.sim.simulate` turns it into files plus a ground-truth list.
Every anomaly count is a number of *incidents*; one incident can cause several findings (an unclean
election causes F2 commits, S1 truncation rewinds, L5 lineage truncations and optionally a D1), and
the ground truth lists each finding separately.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

__all__ = ["Scenario", "Anomalies", "scenario_presets", "preset"]


@dataclass(frozen=True)
class Anomalies:
    """How many incidents of each kind to inject (each incident claims its own partition/slot)."""

    unclean_elections: int = 1  # F2 beyond end, S1 truncation + over_rewind, L5 lineage_truncated
    unresolved_divergence: int = 1  # D1: of the unclean elections, how many leave a follower untruncated
    stale_metadata_rewinds: int = 1  # M1 + M2, then an M4-correlated S1 spurious_rewind_to_earliest
    stale_broker_only: int = 1  # M2 only (a client that never saw the newer epoch)
    topic_id_regressions: int = 1  # M3 during a topic re-creation (needs topic_recreations >= 1)
    topic_recreations: int = 1  # clean delete + re-create with a new topic id (no finding)
    spurious_rewinds: int = 1  # S1 spurious_rewind (uncorrelated)
    spurious_skips: int = 1  # S2 spurious_skip (reset to latest while lagging)
    retention_resets: int = 1  # S2 retention (consumer stalled behind retention, resets to earliest)
    operator_resets: int = 1  # S1 operator_reset + F4 commit_epoch_dropped, group empty
    stale_epoch_commits: int = 1  # S1 stale_epoch_commit (+ F4 regression, F2 when beyond the epoch end)
    epoch_regressions: int = 1  # F4 commit_epoch_regression (+ F2 beyond end)
    epoch_drops: int = 1  # F4 commit_epoch_dropped
    unknown_epoch_commits: int = 1  # F2 commit_unknown_epoch (MirrorMaker-translated commits)
    stale_epoch_batches: int = 1  # L3 batch_epoch_regression (one finding per batch: it is also a mismatch)
    unknown_epoch_batches: int = 1  # L3 batch_epoch_unknown
    lineage_rewrites: int = 1  # L5 lineage_rewritten
    replica_conflicts: int = 1  # D2 replica_lineage_conflict
    corrupt_checkpoints: int = 1  # L1 checkpoint_unreadable
    non_monotonic_checkpoints: int = 1  # L2 lineage_not_monotonic
    aborted_txns: int = 1  # an aborted transactional commit holding a rewind (must NOT be a finding)
    # evidence only the controller's metadata log gives (issue 15; K2 comes with every unclean election)
    unknown_checkpoint_epochs: int = 1  # K1 checkpoint_epoch_unknown (a restored single-replica directory)
    partition_expansions: int = 1  # P1 expansion_order_violation (a group reads the new partition too early)
    metadata_state_regressions: int = 1  # M5 metadata_offset_regression (+ M2: a whole image served late)
    metadata_state_mixes: int = 1  # M5 metadata_state_mixed (+ M2: one partition's change served late)


@dataclass(frozen=True)
class Scenario:
    """One simulated cluster.

    Time is simulated (integer ms from ``start``); all randomness comes from ``seed``. ``commits`` is the
    approximate number of offset commits of the background workload: the commit interval is derived
    from it, the number of groups and partitions and the duration.
    """

    name: str = "custom"
    seed: int = 1
    start: str = "2024-03-04"  # UTC date (midnight)
    days: float = 0.5
    brokers: int = 4
    replication_factor: int = 3
    partitions: int = 6  # partitions of each named topic
    bulk_topics: int = 0  # extra clean topics (each `partitions` wide) with `bulk_groups_per_topic` groups
    bulk_groups_per_topic: int = 2
    commits: int = 4000
    snapshot_interval_hours: float = 2.0
    retention_hours: float = 3.0
    produce_rate: tuple[float, float] = (1.0, 4.0)  # records/s per partition (uniform range)
    offsets_partitions: int = 50
    offsets_segment_bytes: int = 1 << 20
    codecs: tuple[tuple[str, float], ...] = (("none", 0.4), ("lz4", 0.2), ("zstd", 0.15), ("snappy", 0.15), ("gzip", 0.1))
    metadata_interval_s: int = 300  # metadata.max.age.ms of the clients
    extra_metadata_clients: int = 3  # producers fetching metadata besides the consumer members
    pcap_fraction: float = 0.25  # share of clients whose traffic is captured as pcap instead of JSONL
    clean_elections: int = 3
    data_segment_partitions: int = 2  # clean consumed partitions whose segments are written at each snapshot
    data_tail_records: int = 2000  # how many trailing offsets of a replica the written segments cover
    data_segment_bytes: int = 16 * 1024
    metadata_log: bool = True  # write the controller's __cluster_metadata-0 (and its incidents)
    metadata_idle_ms: int = 2000  # NoOp heartbeat interval (Kafka: metadata.max.idle.interval.ms, 500 ms)
    metadata_segment_bytes: int = 1 << 20
    anomalies: Anomalies = field(default_factory=Anomalies)

    def replace(self, **changes) -> Scenario:
        """A copy with fields replaced; ``anomalies`` may be a dict of count overrides."""
        a = changes.pop("anomalies", None)
        out = dataclasses.replace(self, **changes)
        if isinstance(a, dict):
            out = dataclasses.replace(out, anomalies=dataclasses.replace(self.anomalies, **a))
        elif a is not None:
            out = dataclasses.replace(out, anomalies=a)
        return out


def _bench(commits: int = 1_000_000, seed: int = 7) -> Scenario:
    # ~1280 committing partitions (20 bulk topics x 32 partitions x 2 groups) over one day.
    return Scenario(
        name="bench", seed=seed, days=1.0, brokers=6, partitions=32, bulk_topics=20, bulk_groups_per_topic=2,
        commits=commits, snapshot_interval_hours=4.0, retention_hours=6.0, produce_rate=(5.0, 50.0),
        offsets_segment_bytes=100 << 20, data_segment_partitions=2, data_tail_records=5000,
        data_segment_bytes=256 * 1024, extra_metadata_clients=10, clean_elections=10,
    )  # fmt: skip


scenario_presets: dict[str, Scenario] = {
    "demo": Scenario(name="demo", seed=20240304),
    "accuracy-1": Scenario(name="accuracy-1", seed=101, days=1.0, commits=20_000, snapshot_interval_hours=3.0,
                           retention_hours=5.0, clean_elections=6),
    "accuracy-2": Scenario(
        name="accuracy-2", seed=202, days=1.0, brokers=5, partitions=8, commits=30_000, snapshot_interval_hours=2.0,
        clean_elections=8, pcap_fraction=0.5,
        anomalies=Anomalies(unclean_elections=2, unresolved_divergence=1, stale_metadata_rewinds=2,
                            stale_broker_only=2, spurious_rewinds=2, spurious_skips=2, epoch_regressions=2,
                            stale_epoch_batches=2, corrupt_checkpoints=2, replica_conflicts=2, aborted_txns=2),
    ),
    "accuracy-3": Scenario(
        name="accuracy-3", seed=303, start="2024-06-30", days=1.5, brokers=3, partitions=8, commits=25_000,
        snapshot_interval_hours=2.0, codecs=(("zstd", 0.5), ("gzip", 0.5)), clean_elections=4,
        # 3 brokers with RF 3: no spare broker for the D2 reassignment, so no replica conflict here.
        anomalies=Anomalies(unclean_elections=3, unresolved_divergence=2, retention_resets=2, operator_resets=2,
                            replica_conflicts=0,
                            stale_epoch_commits=2, epoch_drops=2, unknown_epoch_commits=2, lineage_rewrites=2,
                            non_monotonic_checkpoints=2, unknown_epoch_batches=2),
    ),
    "bench": _bench(),
}  # fmt: skip


def preset(name: str, *, commits: int | None = None, seed: int | None = None) -> Scenario:
    """A preset by name, with the CLI's ``--commits`` / ``--seed`` overrides applied."""
    try:
        sc = scenario_presets[name]
    except KeyError:
        raise ValueError(f"unknown scenario preset {name!r}; known: {', '.join(sorted(scenario_presets))}") from None
    changes: dict = {}
    if commits is not None:
        changes["commits"] = int(commits)
    if seed is not None:
        changes["seed"] = int(seed)
    return sc.replace(**changes) if changes else sc
