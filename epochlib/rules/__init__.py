"""Detection rules of spec/detection-rules.md as pure functions over sorted sequences.

Inputs are the frozen dataclasses exported here (each with ``from_row``); outputs are :class:`Finding`
values with a deterministic :func:`finding_id`. No Spark, no I/O, no clock. Snapshot rounds and "the
leader at a time" live in :mod:`.rounds`; the columnar pass over a partition's commits (F2/F4 + S1/S2)
in :mod:`.commit_pass`. ``epochlib/rules/README.md`` names the one module that decides each rule and the
judgement calls where the spec is silent.
"""

from ..lineage import EpochEntry, LeaderEpochCache
from ._model import (
    CRITICAL,
    ERROR,
    INFO,
    LIVE_TXN_STATES,
    SEVERITY,
    TEXT_SUFFIXES,
    WARNING,
    BatchHeader,
    Commit,
    Finding,
    GroupState,
    MetadataObservation,
    QuarantineRecord,
    ReplicaSnapshot,
    capture_pointer,
    finding_id,
    observations_from_arrow,
    offsets_pointer,
    to_ms,
    unit_pointer,
)
from .commit_pass import COMMIT_COLUMNS, CommitFinding, check_partition_commits, commit_log_order
from .divergence import (
    EpochDisagreement,
    check_replica_divergence,
    epoch_disagreements,
    held_end,
    snapshot_rounds,
)
from .fencing import (
    FenceResult,
    check_commit_fencing,
    fence_check,
    leader_snapshot_at,
    make_lineage_lookup,
)
from .lineage_rules import (
    check_batch_epochs,
    check_checkpoint_unreadable,
    check_lineage_history,
    check_lineage_monotonic,
    parse_logdir_path,
)
from .metadata import check_broker_staleness, check_client_metadata, stale_rates
from .resets import (
    CORRELATED_KINDS,
    OffsetsSeen,
    ResetContext,
    check_offset_resets,
    classify_jump,
    classify_rewind,
    correlate_resets,
    current_membership,
    topic_names_of,
)
from .rounds import LogEndEstimate, Round, SnapshotRounds, leader_of_round, log_end_of, log_start_of

__all__ = [
    "COMMIT_COLUMNS",
    "CORRELATED_KINDS",
    "CRITICAL",
    "ERROR",
    "INFO",
    "SEVERITY",
    "LIVE_TXN_STATES",
    "WARNING",
    "BatchHeader",
    "Commit",
    "CommitFinding",
    "EpochDisagreement",
    "EpochEntry",
    "FenceResult",
    "Finding",
    "GroupState",
    "LeaderEpochCache",
    "LogEndEstimate",
    "OffsetsSeen",
    "MetadataObservation",
    "QuarantineRecord",
    "ReplicaSnapshot",
    "ResetContext",
    "Round",
    "SnapshotRounds",
    "TEXT_SUFFIXES",
    "capture_pointer",
    "offsets_pointer",
    "unit_pointer",
    "check_batch_epochs",
    "check_broker_staleness",
    "check_checkpoint_unreadable",
    "check_client_metadata",
    "check_commit_fencing",
    "check_lineage_history",
    "check_lineage_monotonic",
    "check_offset_resets",
    "check_partition_commits",
    "check_replica_divergence",
    "classify_jump",
    "classify_rewind",
    "commit_log_order",
    "correlate_resets",
    "current_membership",
    "epoch_disagreements",
    "fence_check",
    "finding_id",
    "held_end",
    "leader_of_round",
    "leader_snapshot_at",
    "log_end_of",
    "log_start_of",
    "make_lineage_lookup",
    "parse_logdir_path",
    "snapshot_rounds",
    "stale_rates",
    "to_ms",
    "topic_names_of",
    "observations_from_arrow",
]
