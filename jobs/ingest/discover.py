"""Input discovery: list the three input roots and classify every file by its path (driver side).

Only names and sizes are looked at here; contents are read by executors. The layout is DESIGN.md's
"Inputs and where the job finds them":

- ``<offsets>``: ``**/__consumer_offsets-<N>/<20 digits>.log`` segments (an optional ``broker=<id>``
  path part names the replica), ``**/*.parquet`` and ``**/*.jsonl`` dumps, ``**/*.txt`` tool dumps
  (their format is detected from their content, in the executor).
- ``<logdirs>``: ``broker=<id>/snapshot=<YYYYMMDDTHHMMSSZ>/<topic>-<partition>/leader-epoch-checkpoint``
  with, beside it, ``partition.metadata`` and ``*.log`` segments, and at the snapshot root the
  ``log-start-offset``, ``replication-offset`` and ``recovery-point-offset`` checkpoints.
- ``<metadata>``: ``**/*.pcap``, ``**/*.pcapng`` and ``**/*.jsonl`` captures.

Three outcomes per file: a typed :class:`InputFile` (decoded later), *ignored* (a file a Kafka log
directory normally holds that carries no evidence this job uses: indexes, producer snapshots, other
topics' segments under ``<offsets>``, ``meta.properties`` …, and hidden ``.``/``_`` files), or
*unrecognised* — which becomes a ``quarantine`` row with unit ``file``, never an exception.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from datetime import datetime, timezone

from epochlib.checkpoint import parse_partition_dir_name
from epochlib.errors import DecodeError
from jobs.fs import FileEntry, list_files

__all__ = ["InputFile", "Inventory", "classify_logdirs", "classify_metadata", "classify_offsets", "discover"]

#: Input file forms (the ``form`` column of the work lists).
SEGMENT = "segment"
PARQUET = "parquet"
JSONL = "jsonl"
TEXT = "text"
LEC = "leader_epoch_checkpoint"
PMETA = "partition_metadata"
ROOT_CKPT = "root_checkpoint"
PCAP = "pcap"

#: Snapshot-root checkpoints that feed ``epoch_lineage`` (file name -> lineage column).
ROOT_CHECKPOINTS = {
    "log-start-offset-checkpoint": "log_start_offset",
    "replication-offset-checkpoint": "high_watermark",
    "recovery-point-offset-checkpoint": "recovery_point",
}

_SEGMENT = re.compile(r"(\d{20})\.log")
_OFFSETS_DIR = re.compile(r"__consumer_offsets-(\d+)")
_BROKER = re.compile(r"broker=([^/]+)")
_SNAPSHOT = re.compile(r"snapshot=([^/]+)")
# Files a Kafka log dir holds that carry nothing this job reads (spec §4, §4.1).
_KAFKA_AUX = re.compile(
    r"(\d{20}\.(index|timeindex|txnindex|snapshot)(\.(deleted|cleaned|swap))?"
    r"|\d{20}\.log\.(deleted|cleaned|swap)"
    r"|\d{20}-\d{10}\.checkpoint(\.(deleted|part))?"
    r"|leader-epoch-checkpoint(\.tmp)?|partition\.metadata(\.tmp)?|.*-checkpoint(\.tmp)?"
    r"|meta\.properties|quorum-state|bootstrap\.checkpoint|\.lock|\.kafka_cleanshutdown)"
)


@dataclass(frozen=True, slots=True)
class InputFile:
    """One input file to decode. ``kind`` is the source kind (offsets|logdirs|metadata), ``form`` one of
    the form constants above; the other fields are what the path says (None when it says nothing)."""

    kind: str
    form: str
    source: str
    size: int
    broker: str | None = None
    snapshot_ms: int | None = None
    topic: str | None = None
    partition: int | None = None
    log_partition: int | None = None
    base_offset: int | None = None
    name: str | None = None


@dataclass(frozen=True, slots=True)
class Unrecognised:
    """A file the job cannot use, with why; it becomes a quarantine row (unit ``file``)."""

    kind: str
    source: str
    size: int
    reason: str


@dataclass(slots=True)
class Inventory:
    """Everything discovery found, by source kind."""

    files: list[InputFile] = field(default_factory=list)
    unrecognised: list[Unrecognised] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (kind, source)

    def of(self, kind: str, *forms: str) -> list[InputFile]:
        return [f for f in self.files if f.kind == kind and (not forms or f.form in forms)]

    def extend(self, other: Inventory) -> None:
        self.files.extend(other.files)
        self.unrecognised.extend(other.unrecognised)
        self.ignored.extend(other.ignored)


def _hidden(rel: str) -> bool:
    """Hidden by the Hadoop/Spark convention (``.x``, ``_x``); Kafka's internal ``__topic`` dirs are not."""
    return any(p.startswith(".") or (p.startswith("_") and not p.startswith("__")) for p in rel.split("/"))


def _broker(rel: str) -> str | None:
    found = _BROKER.findall(rel)
    return found[-1] if found else None


def parse_snapshot_ms(text: str) -> int:
    """Epoch milliseconds of a ``YYYYMMDDTHHMMSSZ`` snapshot name (UTC); ValueError when malformed."""
    dt = datetime.strptime(text, "%Y%m%dT%H%M%SZ").replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def classify_offsets(entries: list[FileEntry]) -> Inventory:
    """Classify the files below ``<offsets>``."""
    inv = Inventory()
    for e in entries:
        parts = e.rel.split("/")
        name = parts[-1]
        low = name.lower()
        if _hidden(e.rel):
            inv.ignored.append(("offsets", e.source))
            continue
        seg = _SEGMENT.fullmatch(name)
        parent = parts[-2] if len(parts) >= 2 else ""
        if seg and _OFFSETS_DIR.fullmatch(parent):
            inv.files.append(InputFile(
                "offsets", SEGMENT, e.source, e.size, broker=_broker(e.rel),
                topic="__consumer_offsets", log_partition=int(_OFFSETS_DIR.fullmatch(parent).group(1)),
                partition=int(_OFFSETS_DIR.fullmatch(parent).group(1)),
                base_offset=int(seg.group(1)), name=name,
            ))
        elif seg or _KAFKA_AUX.fullmatch(name):
            # another topic's segment, an index, a checkpoint: Kafka files, not commit evidence
            inv.ignored.append(("offsets", e.source))
        elif low.endswith(".parquet"):
            inv.files.append(InputFile("offsets", PARQUET, e.source, e.size, broker=_broker(e.rel), name=name))
        elif low.endswith((".jsonl", ".ndjson")):
            inv.files.append(InputFile("offsets", JSONL, e.source, e.size, broker=_broker(e.rel), name=name))
        elif low.endswith(".txt"):
            inv.files.append(InputFile("offsets", TEXT, e.source, e.size, broker=_broker(e.rel), name=name))
        else:
            inv.unrecognised.append(Unrecognised("offsets", e.source, e.size, "unrecognised file in offsets input"))
    return inv


def classify_logdirs(entries: list[FileEntry]) -> Inventory:
    """Classify the files below ``<logdirs>`` (``broker=<id>/snapshot=<ts>/...``)."""
    inv = Inventory()
    for e in entries:
        parts = e.rel.split("/")
        name = parts[-1]
        if _hidden(e.rel):
            inv.ignored.append(("logdirs", e.source))
            continue
        snap_i = next((i for i, p in enumerate(parts[:-1]) if _SNAPSHOT.fullmatch(p)), None)
        broker_i = next((i for i, p in enumerate(parts[:-1]) if _BROKER.fullmatch(p)), None)
        if snap_i is None or broker_i is None or broker_i > snap_i:
            inv.unrecognised.append(Unrecognised(
                "logdirs", e.source, e.size, "not under broker=<id>/snapshot=<YYYYMMDDTHHMMSSZ>/"))
            continue
        broker = _BROKER.fullmatch(parts[broker_i]).group(1)
        try:
            snapshot_ms = parse_snapshot_ms(_SNAPSHOT.fullmatch(parts[snap_i]).group(1))
        except ValueError:
            inv.unrecognised.append(Unrecognised(
                "logdirs", e.source, e.size, f"malformed snapshot time {parts[snap_i]!r}"))
            continue
        below = parts[snap_i + 1:]
        if len(below) == 1:
            if name in ROOT_CHECKPOINTS:
                inv.files.append(InputFile("logdirs", ROOT_CKPT, e.source, e.size, broker=broker,
                                           snapshot_ms=snapshot_ms, name=name))
            elif _KAFKA_AUX.fullmatch(name):
                inv.ignored.append(("logdirs", e.source))
            else:
                inv.unrecognised.append(Unrecognised("logdirs", e.source, e.size,
                                                     "unrecognised file at the snapshot root"))
            continue
        if len(below) != 2:
            inv.unrecognised.append(Unrecognised("logdirs", e.source, e.size,
                                                 "unexpected nesting below the snapshot directory"))
            continue
        try:
            topic, partition, variant = parse_partition_dir_name(below[0])
        except DecodeError as err:
            inv.unrecognised.append(Unrecognised("logdirs", e.source, e.size, err.reason))
            continue
        if variant is not None:  # -delete / -future / -stray replicas are not the live lineage
            inv.ignored.append(("logdirs", e.source))
            continue
        common = dict(broker=broker, snapshot_ms=snapshot_ms, topic=topic, partition=partition, name=name)
        seg = _SEGMENT.fullmatch(name)
        if name == "leader-epoch-checkpoint":
            inv.files.append(InputFile("logdirs", LEC, e.source, e.size, **common))
        elif name == "partition.metadata":
            inv.files.append(InputFile("logdirs", PMETA, e.source, e.size, **common))
        elif seg:
            inv.files.append(InputFile("logdirs", SEGMENT, e.source, e.size, base_offset=int(seg.group(1)),
                                       **common))
        elif _KAFKA_AUX.fullmatch(name):
            inv.ignored.append(("logdirs", e.source))
        else:
            inv.unrecognised.append(Unrecognised("logdirs", e.source, e.size,
                                                 "unrecognised file in a partition directory"))
    return inv


def classify_metadata(entries: list[FileEntry]) -> Inventory:
    """Classify the files below ``<metadata>``."""
    inv = Inventory()
    for e in entries:
        low = e.rel.rsplit("/", 1)[-1].lower()
        if _hidden(e.rel):
            inv.ignored.append(("metadata", e.source))
        elif low.endswith((".pcap", ".pcapng", ".cap")):
            inv.files.append(InputFile("metadata", PCAP, e.source, e.size, name=low))
        elif low.endswith((".jsonl", ".ndjson")):
            inv.files.append(InputFile("metadata", JSONL, e.source, e.size, name=low))
        else:
            inv.unrecognised.append(Unrecognised("metadata", e.source, e.size,
                                                 "unrecognised file in metadata input"))
    return inv


_CLASSIFIERS = {"offsets": classify_offsets, "logdirs": classify_logdirs, "metadata": classify_metadata}


def discover(offsets: str | None = None, logdirs: str | None = None, metadata: str | None = None) -> Inventory:
    """List and classify the input roots that are set (driver side: names and sizes only).

    Raises:
        jobs.errors.InputError: a root that is set does not exist or cannot be listed.
    """
    from jobs.errors import InputError

    inv = Inventory()
    for kind, root in (("offsets", offsets), ("logdirs", logdirs), ("metadata", metadata)):
        if not root:
            continue
        try:
            entries = list_files(root)
        except FileNotFoundError:
            raise InputError(f"{kind} input {root} does not exist") from None
        except OSError as e:
            raise InputError(f"cannot list {kind} input {root}: {e}") from None
        inv.extend(_CLASSIFIERS[kind](entries))
    return inv
