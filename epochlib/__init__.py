"""epochlib: the pure-Python Kafka epoch codec and detection rules of epoch-audit.

Imports neither pyspark nor deltalake: the same functions run in unit tests, in Spark
executors (through the ``*_arrow`` batch functions) and in notebooks.

Modules, one format each (see CONTRIBUTING.md):

- :mod:`epochlib.records` — log entries: v2 batches, legacy v0/v1 message sets, codecs, CRCs
- :mod:`epochlib.coordinator` — ``__consumer_offsets`` keys and values (record types 0–24)
- :mod:`epochlib.offsets_log` — a ``__consumer_offsets`` segment replayed with transaction markers applied
- :mod:`epochlib.protocol` — headers, framing, MetadataRequest/Response v0–13
- :mod:`epochlib.checkpoint` — checkpoint files and ``partition.metadata``
- :mod:`epochlib.lineage` — the leader-epoch cache (Kafka's LeaderEpochFileCache semantics)
- :mod:`epochlib.dumps` — text output of kafka-console-consumer and kafka-dump-log
- :mod:`epochlib.pcap` — Kafka exchanges from pcap/pcapng captures
- :mod:`epochlib.rules` — the detection rules as pure functions
- :mod:`epochlib.sim` — a cluster simulator with ground truth

Every decoder raises only :class:`DecodeError` for malformed input; anything else is a bug.
"""

from .checkpoint import parse_leader_epoch_checkpoint, parse_offset_checkpoint, parse_partition_metadata
from .coordinator import decode_offsets_arrow, decode_record
from .errors import DecodeError
from .lineage import LeaderEpochCache
from .protocol import decode_metadata_response, decode_request_header, metadata_observations_arrow
from .records import BadBatch, Batch, IncompleteTail, batches_arrow, decode_batch, iter_batches

__all__ = [
    "BadBatch",
    "Batch",
    "DecodeError",
    "IncompleteTail",
    "LeaderEpochCache",
    "batches_arrow",
    "decode_batch",
    "decode_metadata_response",
    "decode_offsets_arrow",
    "decode_record",
    "decode_request_header",
    "iter_batches",
    "metadata_observations_arrow",
    "parse_leader_epoch_checkpoint",
    "parse_offset_checkpoint",
    "parse_partition_metadata",
]
__version__ = "0.1.0"
