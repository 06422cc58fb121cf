"""The simulator's view of the codec: imports of the encoders it writes through, and the fast paths.

Every encoder comes from the shared codec modules (records, coordinator, protocol, checkpoint, pcap,
lineage). A module that is missing raises an ImportError naming the module and what the simulator
needs from it, at the moment that part of the simulator runs — never a silent fallback.

Fast path: offset-commit values are packed with one precompiled ``struct`` in the v3 layout
(int16 version 3, int64 offset, int32 leader epoch, string metadata, int64 commit timestamp), which a
test proves byte-identical to ``coordinator.encode_offset_commit_value(..., version=3)``.
"""

from __future__ import annotations

import importlib
import struct
from types import ModuleType

__all__ = ["need", "commit_value_v3", "COMMIT_V3"]

_WHAT = {
    "records": "encode_batch, encode_control_batch, NewRecord",
    "coordinator": "encode_offset_commit_key, encode_offset_commit_value, encode_group_metadata_value, "
    "encode_consumer_subscription, encode_consumer_assignment",
    "protocol": "encode_metadata_response, encode_metadata_request, frame",
    "checkpoint": "format_leader_epoch_checkpoint, format_offset_checkpoint, format_partition_metadata",
    "lineage": "LeaderEpochCache",
    "pcap": "write_pcap",
    "_wire": "offsets_partition_for, uuid_to_str",
}


def need(module: str, *names: str) -> ModuleType:
    """Import ``epochlib.<module>`` and check it has ``names``; raise a clear ImportError otherwise."""
    try:
        mod = importlib.import_module(f"epochlib.{module}")
    except ImportError as e:
        raise ImportError(
            f"epochlib.sim needs epochlib.{module} ({_WHAT.get(module, ', '.join(names))}), "
            f"which is not available yet: {e}"
        ) from e
    missing = [n for n in names if not hasattr(mod, n)]
    if missing:
        raise ImportError(f"epochlib.sim needs epochlib.{module}.{', '.join(missing)}, which does not exist yet")
    return mod


COMMIT_V3 = struct.Struct(">hqihq")  # version, offset, leaderEpoch, metadata "" (int16 0), commitTimestamp
_HEAD_V3 = struct.Struct(">hqi")
_Q = struct.Struct(">q")
_H = struct.Struct(">h")


def commit_value_v3(offset: int, leader_epoch: int, commit_timestamp: int, metadata: str = "") -> bytes:
    """OffsetCommitValue v3 bytes, byte-identical to ``encode_offset_commit_value(version=3)``."""
    if not metadata:
        return COMMIT_V3.pack(3, offset, leader_epoch, 0, commit_timestamp)
    raw = metadata.encode("utf-8")
    return _HEAD_V3.pack(3, offset, leader_epoch) + _H.pack(len(raw)) + raw + _Q.pack(commit_timestamp)
