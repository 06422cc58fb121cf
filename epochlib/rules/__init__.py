"""Detection rules of spec/detection-rules.md as pure functions over sorted sequences.

Inputs are the frozen dataclasses of :mod:`epochlib.rules._model` (each with ``from_row``); outputs
are :class:`Finding` values with a deterministic :func:`finding_id`. No Spark, no I/O, no clock.
Judgement calls where the spec is silent are listed in ``epochlib/rules/README.md``.
"""

from ..lineage import EpochEntry, LeaderEpochCache
from ._model import (
    CRITICAL,
    ERROR,
    INFO,
    LIVE_TXN_STATES,
    SEVERITY,
    WARNING,
    BatchHeader,
    Commit,
    Finding,
    GroupState,
    MetadataObservation,
    QuarantineRecord,
    ReplicaSnapshot,
    finding_id,
    to_ms,
)
from .divergence import check_replica_divergence, snapshot_rounds
from .fencing import (
    FenceResult,
    check_commit_fencing,
    fence_check,
    leader_of_round,
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
    LogEndEstimate,
    OffsetsSeen,
    ResetContext,
    check_offset_resets,
    correlate_resets,
)

__all__ = [
    "CORRELATED_KINDS",
    "CRITICAL",
    "ERROR",
    "INFO",
    "SEVERITY",
    "LIVE_TXN_STATES",
    "WARNING",
    "BatchHeader",
    "Commit",
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
    "check_batch_epochs",
    "check_broker_staleness",
    "check_checkpoint_unreadable",
    "check_client_metadata",
    "check_commit_fencing",
    "check_lineage_history",
    "check_lineage_monotonic",
    "check_offset_resets",
    "check_replica_divergence",
    "correlate_resets",
    "fence_check",
    "finding_id",
    "leader_of_round",
    "leader_snapshot_at",
    "make_lineage_lookup",
    "parse_logdir_path",
    "snapshot_rounds",
    "stale_rates",
    "to_ms",
]
