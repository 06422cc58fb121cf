"""The KRaft cluster metadata log (``__cluster_metadata-0``) as evidence (spec/kraft-metadata.md).

Public API, by module (each documents its contract):

* :mod:`~epochlib.kraft.schemas` — every metadata record type (api keys 0–29) and KRaft control
  record as tables for :mod:`epochlib._schema` (``RECORD_SPECS``, ``CONTROL_SPECS``).
* :mod:`~epochlib.kraft.codec` — the ApiMessageAndVersion frame (:func:`decode_record_value`,
  :func:`encode_record_value`), control values, :func:`iter_metadata_log` (a segment or snapshot
  → :class:`MetadataEntry` / :class:`MetadataError`), batch writers for the simulator.
* :mod:`~epochlib.kraft.snapshot` — ``<end>-<epoch>.checkpoint`` snapshots and
  ``bootstrap.checkpoint`` (:func:`read_snapshot`, :func:`encode_snapshot`,
  :func:`parse_snapshot_name`, :func:`choose_snapshot`).
* :mod:`~epochlib.kraft.dumptext` — ``kafka-dump-log --cluster-metadata-decoder`` text, read
  into the same entries (:func:`iter_dump_entries`) and written (:func:`format_dump`).
* :mod:`~epochlib.kraft.replay` — the pure replay into ``partition_history`` rows
  (:func:`replay`, :class:`Replayer`, :class:`HistoryRow`), merging node copies
  (:func:`merge_copies`), image comparison (:func:`compare_images`).
* :mod:`~epochlib.kraft.arrow` — the Arrow batch functions (:func:`metadata_records_arrow`,
  reference :func:`metadata_records_rows`; :func:`history_arrow`).

Everything here is sans-IO (bytes/text in, values out) and raises only
:class:`~epochlib.errors.DecodeError` for malformed input.
"""

from .codec import (
    ControlRecord,
    MetadataEntry,
    MetadataError,
    MetadataRecord,
    decode_control_value,
    decode_record_value,
    encode_control_record_batch,
    encode_control_value,
    encode_metadata_batch,
    encode_record_value,
    iter_metadata_log,
)
from .replay import (
    Conflict,
    HistoryRow,
    PartitionState,
    Replayer,
    ReplayIssue,
    ReplayResult,
    compare_images,
    merge_copies,
    replay,
)
from .snapshot import (
    Snapshot,
    choose_snapshot,
    encode_snapshot,
    parse_snapshot_name,
    read_snapshot,
    unbounded,
)

__all__ = [
    "Conflict",
    "ControlRecord",
    "HistoryRow",
    "MetadataEntry",
    "MetadataError",
    "MetadataRecord",
    "PartitionState",
    "ReplayIssue",
    "ReplayResult",
    "Replayer",
    "Snapshot",
    "choose_snapshot",
    "compare_images",
    "decode_control_value",
    "decode_record_value",
    "encode_control_record_batch",
    "encode_control_value",
    "encode_metadata_batch",
    "encode_record_value",
    "encode_snapshot",
    "iter_metadata_log",
    "merge_copies",
    "parse_snapshot_name",
    "read_snapshot",
    "unbounded",
    "replay",
]
