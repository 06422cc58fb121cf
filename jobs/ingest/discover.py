"""Input discovery: list the three input roots and classify every file by its path (driver side).

Only names and sizes are looked at here; contents are read by executors. The layout is DESIGN.md's
"Inputs and where the job finds them":

- ``<offsets>``: ``**/__consumer_offsets-<N>/<20 digits>.log`` segments (an optional ``broker=<id>``
  path part names the replica), ``**/*.parquet`` and ``**/*.jsonl`` dumps, ``**/*.txt`` tool dumps
  (their format is detected from their content, in the executor).
- ``<logdirs>``: ``broker=<id>/snapshot=<YYYYMMDDTHHMMSSZ>/<topic>-<partition>/leader-epoch-checkpoint``
  with, beside it, ``partition.metadata`` and ``*.log`` segments, and at the snapshot root the
  ``log-start-offset``, ``replication-offset`` and ``recovery-point-offset`` checkpoints. ``<id>`` is the
  broker's node id (an integer, ``epoch_lineage.broker``); the ``broker=`` folder nearest the snapshot names
  it, and files under any other ``broker=`` name (a host name) are unrecognised.
- ``<metadata>``: ``**/*.pcap``, ``**/*.pcapng`` and ``**/*.jsonl`` captures.

Three outcomes per file: a typed :class:`InputFile` (decoded later), *ignored* (a file a Kafka log
directory normally holds that carries no evidence this job uses: indexes, producer snapshots, other
topics' segments under ``<offsets>``, ``meta.properties`` …, and hidden ``.``/``_`` files -- but not a
topic's partition directory in a snapshot such as ``_schemas-0``, ``_confluent-metrics-3`` or ``.hidden-0``),
or *unrecognised* — which becomes a ``quarantine`` row with unit ``file``, never an exception (a segment outside
any ``<topic>-<partition>`` folder is: its partition is unknown, and a copy that lost its partition folders has
lost segments too, overwritten by same-named ones). Besides those, *empty*
inputs (a zero-byte segment, JSONL or text dump, a directory named like an input file with nothing in
it) are read with zero units, and *skipped* entries are not read at all, each with its reason
(:class:`Skipped`). A skipped entry that may hold evidence (a broken link, a FIFO, an unreadable entry, a link
out of the root, a name that is not UTF-8; not a link to a path read anyway, nor a name the job ignores) is
unrecognised too, ``not read: <reason>``: a run never calls a source ``ok`` with evidence it did not read
(:func:`unread_units`). Names beyond Kafka's ranges (a partition above 2^31 - 1, a segment above 2^63 - 1)
are unrecognised.

Local roots are walked by :func:`walk_local`, which does not follow symbolic links out of the root
unless ``follow_symlinks`` says so, never reads a link to a path inside the root twice (the target is
read at its own path), never descends a loop and never opens a FIFO, socket or device.
"""

from __future__ import annotations

import os
import re
import stat
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field, replace
from datetime import datetime, timezone
from functools import lru_cache

from epochlib.checkpoint import parse_partition_dir_name
from epochlib.errors import DecodeError
from epochlib.records import segment_base_offset
from jobs.fs import FileEntry, list_files, resolve

__all__ = ["InputFile", "Inventory", "Skipped", "classify_logdirs", "classify_metadata", "classify_offsets",
           "discover", "mark_last_segments", "walk_local"]

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

_SEGMENT = re.compile(r"([0-9]{20})\.log")
_OFFSETS_DIR = re.compile(r"__consumer_offsets-([0-9]+)")
#: Kafka's offsets are Java longs and its partitions Java ints: a name beyond them is no segment or partition.
_OFFSET_MAX, _PARTITION_MAX = 2**63 - 1, 2**31 - 1
NOT_ALONE = {
    "offsets": "given as the whole offsets input, but not a file the job reads there (a __consumer_offsets segment "
               "is read in its __consumer_offsets-<N> folder; give a folder above it)",
    "logdirs": "given as the whole logdirs input, but not a file the job reads there (give the snapshot folder, "
               "broker=<id>/snapshot=<time>, or a folder above it)",
}
BASE_OFFSET_RANGE = "segment file name beyond Kafka's largest offset (2^63 - 1)"
NO_PARTITION_DIR = ("segment file not in a <topic>-<partition> directory: its partition directory is missing (copy "
                    "the partition folders themselves, e.g. rsync without a slash after __consumer_offsets-*, not "
                    "their contents: the partitions' same-named segments overwrite each other)")
#: A partition's directory, live (``<topic>-<partition>``) or not (``….<id>-delete|-future|-stray``).
_ANY_PARTITION_DIR = re.compile(r"[A-Za-z0-9._-]+-[0-9]+(\.[0-9a-f]+-(delete|future|stray))?")
PARTITION_RANGE = "partition number beyond Kafka's largest partition (2^31 - 1)"
_BROKER = re.compile(r"broker=([^/]+)")
_NODE_ID = re.compile(r"[0-9]{1,10}")
BROKER_NOT_NODE_ID = "not under broker=<integer node id> (Kafka's node.id, 0 to 2^31 - 1)"
_SNAPSHOT = re.compile(r"snapshot=([^/]+)")
#: A live partition's directory: a legal topic name (Kafka's ``Topic.LEGAL_CHARS``) and ``-<partition>``.
_PARTITION_DIR = re.compile(r"([A-Za-z0-9._-]+)-\d+")
# Files a Kafka log dir holds that carry nothing this job reads (spec §4, §4.1), and the ``.tmp`` files Kafka writes
# before an atomic rename (CheckpointFile, PartitionMetadataFile, PropertiesUtils for meta.properties,
# BootstrapDirectory, FileQuorumStateStore, TierStateMachine for producer snapshots), left by a copy taken mid-write.
_KAFKA_AUX = re.compile(
    r"(\d{20}\.(index|timeindex|txnindex|snapshot)(\.(deleted|cleaned|swap))?|\d{20}\.snapshot\.tmp"
    r"|\d{20}\.log\.(deleted|cleaned|swap)"
    r"|\d{20}-\d{10}\.checkpoint(\.(deleted|part))?"
    r"|leader-epoch-checkpoint(\.tmp)?|partition\.metadata(\.tmp)?|.*-checkpoint(\.tmp)?"
    r"|(meta\.properties|quorum-state|bootstrap\.checkpoint)(\.tmp)?|\.lock|\.kafka_cleanshutdown)"
)
#: Tiered storage's cache of remote segments' indexes at a log dir's root (``RemoteIndexCache.DIR_NAME``): no
#: partition (``LogManager.loadLogs`` skips it), nothing this job reads.
REMOTE_INDEX_CACHE = "remote-log-index-cache"


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
    last_segment: bool | None = None
    """For a segment: it has the highest base offset of the segment files in its folder (its partition's active
    segment, the only one Kafka appends to, so the only one a copy can cut mid-batch); None: not known (taken as the
    last). Set by :func:`mark_last_segments`."""


def mark_last_segments(files: list[InputFile], forms: Iterable[str] = (SEGMENT,)) -> list[InputFile]:
    """``files`` with :attr:`InputFile.last_segment` set on every segment (form in ``forms``): True on the one with
    the highest base offset (file name) of each folder, False on the others (rolled segments). Empty segment files
    must be in ``files`` too: a newly rolled active segment may still be empty, and the one before it is rolled."""
    bases = [segment_base_offset(f.name) if f.form in forms and f.name else None for f in files]
    top: dict[str, int] = {}
    for f, base in zip(files, bases, strict=True):
        if base is not None:
            folder = f.source.rsplit("/", 1)[0]
            top[folder] = max(top.get(folder, base), base)
    return [f if base is None else replace(f, last_segment=base == top[f.source.rsplit("/", 1)[0]])
            for f, base in zip(files, bases, strict=True)]


@dataclass(frozen=True, slots=True)
class Unrecognised:
    """A file the job cannot use, with why; it becomes a quarantine row (unit ``file``)."""

    kind: str
    source: str
    size: int
    reason: str


@dataclass(frozen=True, slots=True)
class Skipped:
    """A directory entry that was not read, with why (a symlink out of the root, a loop, a FIFO …), or
    (in :attr:`Inventory.empty`) an input read with zero units."""

    kind: str
    source: str
    reason: str


#: Reasons of :class:`Skipped` entries.
LINK_OUTSIDE = "symbolic link out of the input root (set [inputs] follow_symlinks = true to read it)"
LINK_INSIDE = "symbolic link to a path inside the input root (read at its own path)"
LINK_LOOP = "symbolic link loop"
LINK_BROKEN = "broken symbolic link"
LINK_SEEN = "directory already read through another link"
NOT_REGULAR = "not a regular file (FIFO, socket or device)"
UNREADABLE_DIR = "unreadable directory"
NAME_NOT_UTF8 = "name is not valid UTF-8 (rename it to read it; shown with \\x escapes)"
OUTPUT_TABLE = "a table the run writes (the output root lies in the input root): output, not input"
AUDIT_TABLE = "an epoch-audit Delta table (another run's output, e.g. a nightly's under the input root): output, not input"
#: Skipped entries whose target is read anyway (at another path) or holds nothing new: no evidence is lost.
_NOTHING_LOST = frozenset({LINK_INSIDE, LINK_LOOP, LINK_SEEN, OUTPUT_TABLE, AUDIT_TABLE})
EMPTY_FILE = "empty file"
EMPTY_DIR = "directory named like an input file, with nothing in it"

#: Forms whose zero-byte files hold zero units (read, nothing in them) rather than a malformed file.
_EMPTY_OK = frozenset({SEGMENT, JSONL, TEXT})
#: Names an input file has; a directory named so is reported when it holds nothing.
_FILE_LIKE = re.compile(r".*\.(log|jsonl|ndjson|txt|parquet|pcap|pcapng|cap)", re.IGNORECASE)


@dataclass(slots=True)
class Inventory:
    """Everything discovery found, by source kind."""

    files: list[InputFile] = field(default_factory=list)
    unrecognised: list[Unrecognised] = field(default_factory=list)
    ignored: list[tuple[str, str]] = field(default_factory=list)  # (kind, source)
    skipped: list[Skipped] = field(default_factory=list)
    """Entries not read at all (symlinks out of the root, loops, FIFOs …), with their reasons."""
    empty: list[Skipped] = field(default_factory=list)
    """Inputs read with zero units: zero-byte segments and dumps, empty directories named like files."""

    def of(self, kind: str, *forms: str) -> list[InputFile]:
        return [f for f in self.files if f.kind == kind and (not forms or f.form in forms)]

    def extend(self, other: Inventory) -> None:
        self.files.extend(other.files)
        self.unrecognised.extend(other.unrecognised)
        self.ignored.extend(other.ignored)
        self.skipped.extend(other.skipped)
        self.empty.extend(other.empty)

    def reasons(self, kind: str, which: str = "skipped") -> dict[str, int]:
        """``reason -> count`` of the :attr:`skipped` (or :attr:`empty`) entries of one source kind."""
        out: dict[str, int] = {}
        for s in getattr(self, which):
            if s.kind == kind:
                out[s.reason] = out.get(s.reason, 0) + 1
        return out


def _hidden(rel: str, topic_dir: int | None = None) -> bool:
    """Hidden by the Hadoop/Spark convention (``.x``, ``_x``); Kafka's internal ``__topic`` dirs are not,
    nor is the path part at index ``topic_dir`` when it is a partition directory (``_schemas-0``, ``.hidden-0``:
    Kafka's ``Topic.validate`` refuses only the names ``.`` and ``..``, and loads every other)."""
    for i, p in enumerate(rel.split("/")):
        if p.startswith(".") or (p.startswith("_") and not p.startswith("__")):
            if i == topic_dir and (m := _PARTITION_DIR.fullmatch(p)) and m.group(1) not in (".", ".."):
                continue
            return True
    return False


def is_kafka_aux(rel: str) -> bool:
    """``rel`` (a path below an input root) is a file Kafka keeps in a log dir that carries nothing this job reads:
    an index, a producer snapshot, a checkpoint it does not use, a temporary file of an atomic write, anything in
    tiered storage's index cache (:data:`REMOTE_INDEX_CACHE`)."""
    parts = rel.split("/")
    return bool(_KAFKA_AUX.fullmatch(parts[-1])) or REMOTE_INDEX_CACHE in parts[:-1]


def _folder_of(source: str) -> str:
    """The name of the folder holding ``source`` (for a file directly under a root: the root's own name)."""
    return source.rstrip("/").rsplit("/", 2)[-2] if source.count("/") >= 1 else ""


def is_node_id(text: str) -> bool:
    """``text`` is a Kafka node id as a ``broker=<id>`` folder names it: decimal digits, 0 to 2^31 - 1 (``node.id``
    and ``broker.id`` are Java ints that Kafka requires to be >= 0)."""
    return bool(_NODE_ID.fullmatch(text)) and int(text) <= _PARTITION_MAX


def _broker(rel: str) -> str | None:
    found = _BROKER.findall(rel)
    return found[-1] if found else None


@lru_cache(maxsize=1 << 14)  # one strptime per snapshot directory, not per file
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
        part = _OFFSETS_DIR.fullmatch(parent)
        if seg and part:
            number = part.group(1)
            if len(number) > 10 or int(number) > _PARTITION_MAX or int(seg.group(1)) > _OFFSET_MAX:
                inv.unrecognised.append(Unrecognised("offsets", e.source, e.size, BASE_OFFSET_RANGE
                                                     if int(seg.group(1)) > _OFFSET_MAX else PARTITION_RANGE))
                continue
            inv.files.append(InputFile(
                "offsets", SEGMENT, e.source, e.size, broker=_broker(e.rel),
                topic="__consumer_offsets", log_partition=int(number), partition=int(number),
                base_offset=int(seg.group(1)), name=name,
            ))
        elif seg and not _ANY_PARTITION_DIR.fullmatch(parent or _folder_of(e.source)):  # commits of which partition?
            inv.unrecognised.append(Unrecognised("offsets", e.source, e.size, NO_PARTITION_DIR))
        elif seg or is_kafka_aux(e.rel):
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
        snap_i = next((i for i, p in enumerate(parts[:-1]) if _SNAPSHOT.fullmatch(p)), None)
        if _hidden(e.rel, None if snap_i is None else snap_i + 1):
            inv.ignored.append(("logdirs", e.source))
            continue
        brokers = [i for i, p in enumerate(parts[:snap_i]) if _BROKER.fullmatch(p)] if snap_i is not None else []
        if not brokers:
            inv.unrecognised.append(Unrecognised(
                "logdirs", e.source, e.size, "not under broker=<id>/snapshot=<YYYYMMDDTHHMMSSZ>/"))
            continue
        broker = _BROKER.fullmatch(parts[brokers[-1]]).group(1)  # the one nearest the snapshot, as for a file root
        if not is_node_id(broker):  # epoch_lineage.broker is an int: a host name failed the whole run's cast
            inv.unrecognised.append(Unrecognised("logdirs", e.source, e.size,
                                                 f"{BROKER_NOT_NODE_ID}: broker={broker[:80]}"))
            continue
        try:
            snapshot_ms = parse_snapshot_ms(_SNAPSHOT.fullmatch(parts[snap_i]).group(1))
        except ValueError:
            inv.unrecognised.append(Unrecognised(
                "logdirs", e.source, e.size, f"malformed snapshot time {parts[snap_i]!r}"))
            continue
        below = parts[snap_i + 1:]
        if len(below) > 1 and below[0] == REMOTE_INDEX_CACHE:  # not a partition: LogManager.loadLogs skips it too
            inv.ignored.append(("logdirs", e.source))
            continue
        if len(below) == 1:
            if name in ROOT_CHECKPOINTS:
                inv.files.append(InputFile("logdirs", ROOT_CKPT, e.source, e.size, broker=broker,
                                           snapshot_ms=snapshot_ms, name=name))
            elif _KAFKA_AUX.fullmatch(name):
                inv.ignored.append(("logdirs", e.source))
            else:
                inv.unrecognised.append(Unrecognised("logdirs", e.source, e.size, NO_PARTITION_DIR
                                                     if _SEGMENT.fullmatch(name) else
                                                     "unrecognised file at the snapshot root"))
            continue
        if len(below) != 2:
            inv.unrecognised.append(Unrecognised("logdirs", e.source, e.size,
                                                 "unexpected nesting below the snapshot directory"))
            continue
        try:
            topic, partition, variant = _partition_dir(below[0])
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
        elif seg and int(seg.group(1)) > _OFFSET_MAX:
            inv.unrecognised.append(Unrecognised("logdirs", e.source, e.size, BASE_OFFSET_RANGE))
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


_partition_dir = lru_cache(maxsize=1 << 16)(parse_partition_dir_name)  # once per directory, not per file

_CLASSIFIERS = {"offsets": classify_offsets, "logdirs": classify_logdirs, "metadata": classify_metadata}


@dataclass(slots=True)
class Listing:
    """What :func:`walk_local` found: regular files, skipped entries and empty file-like directories
    (``(source, reason)`` pairs)."""

    files: list[FileEntry] = field(default_factory=list)
    skipped: list[tuple[str, str]] = field(default_factory=list)
    empty_dirs: list[str] = field(default_factory=list)


def walk_local(root: str, *, follow_symlinks: bool = False, exclude: frozenset[str] = frozenset()) -> Listing:
    """Every regular file below the local directory ``root``, sorted by relative path, without following
    symbolic links out of ``root`` (unless ``follow_symlinks``), without reading a link to a path inside
    ``root`` (its target is read at its own path), without descending a loop, and without opening
    FIFOs, sockets or devices (reading a FIFO would block the driver). Sources are ``<root>/<rel>``.
    ``exclude``: directories (real paths) not descended, each skipped as :data:`OUTPUT_TABLE` (the run's tables).

    Raises:
        FileNotFoundError: ``root`` does not exist.
    """
    root = root.rstrip("/") or "/"
    if not os.path.lexists(root):
        raise FileNotFoundError(root)
    out = Listing()
    real_root = os.path.realpath(root)
    if not os.path.isdir(root):
        st_ = os.stat(root)
        if stat.S_ISREG(st_.st_mode):
            out.files.append(FileEntry(root, os.path.basename(root), int(st_.st_size)))
        else:
            out.skipped.append((root, NOT_REGULAR))
        return out
    seen: set[str] = {real_root}

    def inside(real: str) -> bool:
        return real == real_root or real.startswith(real_root.rstrip("/") + "/")

    def walk(path: str, rel: str, ancestors: frozenset[str]) -> bool:
        """Walk one directory; True when a regular file was found below it."""
        try:
            with os.scandir(path) as it:
                entries = sorted(it, key=lambda d: d.name)
        except OSError as e:
            out.skipped.append((path, f"{UNREADABLE_DIR}: {e.strerror or e}"))
            return False
        found = False
        for de in entries:
            sub = f"{rel}/{de.name}" if rel else de.name
            src = f"{root}/{sub}"
            if not _utf8(de.name):  # no table, Arrow array or Spark string can hold it: not read, said so
                out.skipped.append((shown(src), NAME_NOT_UTF8))
                continue
            try:
                is_link = de.is_symlink()
                real = os.path.realpath(de.path) if is_link else None
                if is_link:
                    if not os.path.exists(de.path):
                        out.skipped.append((src, LINK_BROKEN))
                        continue
                    if real in ancestors:
                        out.skipped.append((src, LINK_LOOP))
                        continue
                    if inside(real):
                        out.skipped.append((src, LINK_INSIDE))
                        continue
                    if not follow_symlinks:
                        out.skipped.append((src, LINK_OUTSIDE))
                        continue
                st_ = os.stat(de.path)
            except OSError as e:
                out.skipped.append((src, f"unreadable: {e.strerror or e}"))
                continue
            if stat.S_ISDIR(st_.st_mode):
                key = real or os.path.realpath(de.path)
                if key in exclude:
                    out.skipped.append((src, OUTPUT_TABLE))
                    continue
                if _is_audit_table(de.name, de.path):
                    out.skipped.append((src, AUDIT_TABLE))
                    continue
                if key in ancestors:
                    out.skipped.append((src, LINK_LOOP))
                    continue
                if key in seen:
                    out.skipped.append((src, LINK_SEEN))
                    continue
                seen.add(key)
                below = walk(de.path, sub, ancestors | {key})
                if not below and _FILE_LIKE.fullmatch(de.name):
                    out.empty_dirs.append(src)
                found = found or below
            elif stat.S_ISREG(st_.st_mode):
                out.files.append(FileEntry(src, sub, int(st_.st_size)))
                found = True
            else:
                out.skipped.append((src, NOT_REGULAR))
        return found

    walk(root, "", frozenset({real_root}))
    out.files.sort(key=lambda e: e.rel)
    return out


def _utf8(name: str) -> bool:
    try:
        name.encode("utf-8")
        return True
    except UnicodeEncodeError:  # os.scandir hands undecodable bytes back as lone surrogates
        return False


def shown(path: str) -> str:
    """``path`` as valid UTF-8: the bytes of an undecodable name as ``\\xNN`` escapes."""
    return path if _utf8(path) else os.fsencode(path).decode("utf-8", "backslashreplace")


def unread_units(kind: str, root: str, skipped: Iterable[tuple[str, str]],
                 classify: Callable[[list[FileEntry]], Inventory], *,
                 prefix: str | None = None) -> tuple[list[Skipped], list[Unrecognised]]:
    """Split what the walk of ``root`` skipped into what loses no evidence (links to paths read anyway, loops)
    or would be ignored by its name (hidden files, indexes: ``classify``), and the rest: evidence the run could
    not read (a broken link, a FIFO, an unreadable entry, a link out of the root, an undecodable name), which
    becomes a quarantine row (unit ``file``, reason ``not read: …``) so that its source is not ``ok``.
    ``prefix``: the layout folders a root inside the layout stands in (:func:`_prefix_of_folder_root`), as the
    root's files were classified."""
    kept: list[Skipped] = []
    lost: list[Unrecognised] = []
    base = (resolve(root).native if _is_local(root) else root).rstrip("/") or "/"  # as the walk named the sources
    for src, why in skipped:
        rel = src[len(base) + 1:] if src.startswith(base + "/") else os.path.basename(src.rstrip("/"))
        rel = f"{prefix}/{rel}" if prefix else rel
        if why in _NOTHING_LOST or classify([FileEntry(src, rel or src, 0)]).ignored:
            kept.append(Skipped(kind, src, why))
        else:
            lost.append(Unrecognised(kind, src, 0, f"not read: {why}"))
    return kept, lost


def _rel_of_file_root(path: str) -> str:
    """The path of an input root that is one file, from its last ``broker=`` folder (else its parent folder):
    ``…/broker=1/__consumer_offsets-3/<segment>`` is then partition 3 of broker 1, as inside a folder root."""
    parts = [p for p in path.split("/") if p]
    brokers = [i for i, p in enumerate(parts[:-1]) if _BROKER.fullmatch(p)]
    return "/".join(parts[brokers[-1]:] if brokers else parts[-2:])


def _prefix_of_folder_root(root: str, kind: str) -> str | None:
    """The layout folders a folder root stands inside, for a root below the layout's top (the caller checks that
    no ``broker=`` folder lies below it): from its last ``broker=`` folder (``…/broker=1/snapshot=…``), or a
    ``__consumer_offsets-<N>`` folder itself; None for a root above the layout, or when one of those folders is
    hidden (``.``/``_``; a topic's partition folder such as ``_schemas-0`` or ``.hidden-0`` is not)."""
    parts = [p for p in root.split("/") if p]
    brokers = [i for i, p in enumerate(parts) if _BROKER.fullmatch(p)]
    if brokers:
        prefix = parts[brokers[-1]:]
    elif parts and _OFFSETS_DIR.fullmatch(parts[-1]):
        prefix = parts[-1:]
    else:
        return None
    snap = next((i for i, p in enumerate(prefix) if _SNAPSHOT.fullmatch(p)), None)
    topic_dir = None if kind != "logdirs" or snap is None else snap + 1
    return None if _hidden("/".join(prefix), topic_dir) else "/".join(prefix)


def _is_local(root: str) -> bool:
    native = resolve(root).native
    return native.startswith("/") and "://" not in native


def local_input_bytes(roots: Iterable[str | None], cap: int) -> int | None:
    """The bytes of the regular files under the input ``roots`` (files or folders), counted only until they
    exceed ``cap`` (then some value above it); None when a root is not a local path or cannot be read.
    A cheap bound for choosing how to start Spark before discovery (:func:`jobs.session.java_options_for_input`);
    symbolic links are not followed."""
    total = 0
    todo: list[str] = []
    for root in roots:
        if root is None:
            continue
        if not _is_local(root):
            return None
        todo.append(resolve(root).native)
    try:
        while todo and total <= cap:
            path = todo.pop()
            if not os.path.isdir(path):
                total += os.stat(path).st_size
                continue
            with os.scandir(path) as it:
                for entry in it:
                    if entry.is_dir(follow_symlinks=False):
                        todo.append(entry.path)
                    elif entry.is_file(follow_symlinks=False):
                        total += entry.stat(follow_symlinks=False).st_size
    except OSError:
        return None
    return total


def list_root(kind: str, root: str, *, follow_symlinks: bool = False, exclude: Iterable[str] = ()) -> Listing:
    """The files under one input root: local roots walked by :func:`walk_local` (link and loop safety),
    others listed with :func:`jobs.fs.list_files`. ``exclude``: the run's table locations; one that lies inside
    the root is not read (a skipped entry, :data:`OUTPUT_TABLE`), or a later run would take its Parquet files
    for input (dumps, or unrecognised files in quarantine).

    Raises:
        jobs.errors.InputError: the root does not exist or cannot be listed (``kind`` names the input).
    """
    from jobs.errors import InputError

    if not _utf8(root):
        raise InputError(f"{kind} input path is not valid UTF-8: {shown(root)} (rename it, or give a link to it)")
    try:
        if _is_local(root):
            tables = frozenset(os.path.realpath(resolve(x).native) for x in exclude if _is_local(x))
            return walk_local(resolve(root).native, follow_symlinks=follow_symlinks, exclude=tables)
        return _without(Listing(files=list_files(root)), [resolve(x).native for x in exclude if not _is_local(x)])
    except FileNotFoundError:
        raise InputError(f"{kind} input {root} does not exist") from None
    except OSError as e:
        raise InputError(f"cannot list {kind} input {root}: {e}") from None


DELTA_LOG = "_delta_log"


def _is_audit_table(name: str, folder: str | None = None) -> bool:
    """A folder named like one of epoch-audit's tables that holds a Delta log (``folder``: the local folder to look
    in; None: the listing showed one): some run's output."""
    from jobs.schemas import TABLES

    return name in TABLES and (folder is None or os.path.isdir(os.path.join(folder, DELTA_LOG)))


def _without(listing: Listing, tables: list[str]) -> Listing:
    """``listing`` (of an object store) without the files under ``tables`` (the run's own) and under any other
    epoch-audit Delta table (:func:`_is_audit_table`), each such table that held some skipped once."""
    found = {t.rstrip("/"): OUTPUT_TABLE for t in tables}
    delta = [e.source for e in listing.files if f"/{DELTA_LOG}/" in e.source]
    for src in delta:
        folder = src[: src.index(f"/{DELTA_LOG}/")]
        if folder not in found and _is_audit_table(folder.rsplit("/", 1)[-1]):
            found[folder] = AUDIT_TABLE
    for t, why in found.items():
        inside = [e for e in listing.files if e.source.startswith(t + "/")]
        if inside:
            listing.files = [e for e in listing.files if not e.source.startswith(t + "/")]
            listing.skipped.append((t, why))
    return listing


def discover(offsets: str | None = None, logdirs: str | None = None, metadata: str | None = None, *,
             follow_symlinks: bool = False, exclude: Iterable[str] = ()) -> Inventory:
    """List and classify the input roots that are set (driver side: names and sizes only).

    Local roots are walked with :func:`walk_local` (``follow_symlinks`` as there); object stores have no
    links and are listed with :func:`jobs.fs.list_files`. ``exclude``: the run's table locations (:func:`list_root`).

    Raises:
        jobs.errors.InputError: a root that is set does not exist or cannot be listed.
    """

    inv = Inventory()
    for kind, root in (("offsets", offsets), ("logdirs", logdirs), ("metadata", metadata)):
        if not root:
            continue
        listing = list_root(kind, root, follow_symlinks=follow_symlinks, exclude=exclude)
        native = resolve(root).native.rstrip("/") or "/"
        alone = kind != "metadata" and len(listing.files) == 1 and "/" not in listing.files[0].rel and (
            listing.files[0].source == native) and bool(
            _SEGMENT.fullmatch(listing.files[0].rel) or _KAFKA_AUX.fullmatch(listing.files[0].rel))
        prefix = None
        if alone:  # the root is one file: classify it by the folders above it, as if their parent were given
            e = listing.files[0]
            listing.files = [FileEntry(e.source, _rel_of_file_root(e.source), e.size)]
        elif kind != "metadata" and (prefix := _prefix_of_folder_root(native, kind)) is not None:
            # a root inside the layout: the folders above it name what it is, unless a broker= folder lies below
            # it (then it is above the layout; checked only for a root whose path names one, not per file always)
            if any("broker=" in e.rel and any(_BROKER.fullmatch(p) for p in e.rel.split("/")) for e in listing.files):
                prefix = None
            else:
                listing.files = [FileEntry(e.source, f"{prefix}/{e.rel}", e.size) for e in listing.files]
        found = _CLASSIFIERS[kind](listing.files)
        found.files = mark_last_segments(found.files)  # before zero-byte files are set apart: an empty one counts
        if alone and found.ignored:  # a file the job reads only inside a log dir's layout: not read, said so
            found.unrecognised += [Unrecognised(kind, src, 0, NOT_ALONE[kind]) for _, src in found.ignored]
            found.ignored = []
        kept, lost = unread_units(kind, root, listing.skipped, _CLASSIFIERS[kind], prefix=prefix)
        inv.skipped.extend(kept)
        inv.unrecognised.extend(lost)
        inv.empty.extend(Skipped(kind, src, EMPTY_DIR) for src in listing.empty_dirs)
        for f in found.files:
            if f.size == 0 and f.form in _EMPTY_OK:
                inv.empty.append(Skipped(kind, f.source, EMPTY_FILE))
            else:
                inv.files.append(f)
        found.files = []
        inv.extend(found)
    return inv
