"""KRaft metadata logs (``__cluster_metadata-0``) -> silver ``partition_history`` (executor + Spark parts).

Inputs (DESIGN.md, spec/kraft-metadata.md): below ``[inputs] cluster_metadata``, any number of node copies
``**/__cluster_metadata-0/`` (``*.log`` segments, ``<end>-<epoch>.checkpoint`` snapshots) and
``kafka-dump-log --cluster-metadata-decoder`` text (``*.txt``); and every ``__cluster_metadata-0``
directory found inside a log-dir snapshot (``[inputs] logdirs``). A *copy* is one such directory (or one
dump file); copies of several nodes, or of one node at several snapshot times, are merged by metadata offset.

Two steps, both on the executors:

1. :func:`decode_files` (``mapInArrow``, one row per file): segments and snapshots through the codec's
   Arrow batch function :func:`epochlib.kraft.arrow.metadata_records_arrow` (dump text through
   :func:`epochlib.kraft.dumptext.iter_dump_entries`). NoOpRecords — ~98 % of a quiet cluster's log,
   the controller's 500 ms heartbeat — are counted and dropped here; undecodable batches and records
   become quarantine rows (unit ``batch``; ``line`` for dump text). A batch holding an undecodable record
   counts as quarantined. A segment's final batch cut short by the end of the file (a copy of the active
   segment) is no unit but counted in ``n_unpaired`` — in the copy's last segment (highest base offset); in a
   rolled one, which Kafka never appends to, it is a quarantined batch — and a zero fill after its last batch is
   nothing. In dump text, kafka-dump-log's "Found N invalid bytes at the end of" a folder's last segment is
   counted in ``n_unpaired`` the same way (:mod:`epochlib.kraft.dumptext`).
2. :func:`replay_records` (``mapInArrow`` over a single partition): the merge of the copies
   (:func:`epochlib.kraft.merge_copies`) and the replay (:func:`epochlib.kraft.replay`) must see the
   whole log in offset order — transactions span batches, a PartitionChangeRecord needs the state its
   topic's creation set, and topic re-creation needs every earlier deletion — so it runs as one task.
   Sizing: a metadata log holds days of history in a few MB (the real logs in ../shared are 0.5–2 MB,
   6,800–30,000 records, of which all but a few hundred are NoOps dropped in step 1); at the codec's
   ~0.5 M records/s a 100 MB log replays in well under a minute. Copies are reconciled as Raft does
   (:func:`epochlib.kraft.merge_copies`: a copy that diverged from a more up-to-date one is cut there, with a
   note); records of different copies that differ at one offset in one Raft epoch are quarantined (unit
   ``record``: the other copy's record, the reason naming both sources; the first copy in path order is
   kept); replay issues (a change for an unknown partition, a
   gap between snapshot and log, an open transaction) are quarantined too, never dropped.

The snapshot the replay starts from is :func:`epochlib.kraft.choose_snapshot` over every copy's snapshot
names and the merged log's first offset (a copy holding only snapshots, like a log-dir snapshot taken
after cleaning, gives the newest snapshot's image). Its rows are stored once, by the first run that replays from it
(:func:`without_stored_snapshots`): every nightly run replays it again. Offsets no copy holds are holes, each
quarantined — between runs of held offsets (:data:`RANGE` rows), and below the first one read where a segment's name
(:data:`SEGMENT_BASE` rows) or an older snapshot says the log held them. The history stops at a hole and goes on
from the first later snapshot that joins the log read after it (:meth:`epochlib.kraft.Replayer.restart`, as a Raft
follower fetches a snapshot), else ends there.
"""

from __future__ import annotations

import datetime as dt
import json
import re
from collections.abc import Iterable, Iterator
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from epochlib.arrow_compat import null_where
from epochlib.errors import DecodeError
from epochlib.kraft import (
    ControlRecord,
    HistoryRow,
    MetadataEntry,
    Snapshot,
    choose_snapshot,
    decode_record_value,
    merge_copies,
    parse_snapshot_name,
    replay,
    unbounded,
)
from epochlib.kraft.arrow import HISTORY_SCHEMA, NOOP_VALUE, history_arrow, metadata_records_arrow
from epochlib.kraft.codec import encode_record
from epochlib.kraft.dumptext import detect_metadata_dump, dump_files, iter_dump_entries
from epochlib.records import IncompleteTail, segment_base_offset
from jobs.fs import FileEntry, open_reader

from ._rows import RAW_MAX, SIDE_FIELDS, RowBuffer, side_row, stats_row
from .discover import (
    EMPTY_FILE,
    InputFile,
    Inventory,
    Skipped,
    Unrecognised,
    is_kafka_aux,
    mark_last_segments,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from jobs.config import Config

__all__ = ["FILE_SCHEMA", "HISTORY_WORK", "WORK", "classify_cluster_metadata", "decode_files", "discover_cluster_metadata", "from_logdirs",
           "history_frame", "replay_records", "snapshots_stored_before", "without_stored_snapshots"]

KIND = "cluster_metadata"
#: Input forms.
KSEGMENT, KSNAPSHOT, KDUMP = "kraft_segment", "kraft_snapshot", "kraft_dump"
#: ``file_kind`` of the one work row that marks a snapshot file with unreadable batches or records (step 1 -> 2).
DAMAGED = "damaged_snapshot"
#: ``file_kind`` of the work rows that give a log file's runs of consecutive record offsets (``offset`` ..
#: ``end_offset``, NoOps and unreadable records included as the gaps they leave): the replay finds the log's holes
#: from them, since the records it gets have their NoOps dropped.
RANGE = "offset_range"
#: ``file_kind`` of the one work row per segment file (a zero-byte one included) that gives its base offset (its file
#: name's, ``offset``): the offset its log starts at, so that offsets below the first one read are a hole the replay
#: names (an empty rolled segment, a first batch lost), not a log that starts later.
SEGMENT_BASE = "segment_base"


def _ranges(offsets: Iterable[int]) -> list[tuple[int, int]]:
    """Runs of consecutive offsets, in file order: a new run wherever an offset is not the previous one + 1."""
    out: list[list[int]] = []
    for o in offsets:
        if out and o == out[-1][1] + 1:
            out[-1][1] = o
        else:
            out.append([o, o])
    return [(a, b) for a, b in out]


def _range_rows(src: str, copy: str, offsets: Iterable[int]) -> list[dict[str, Any]]:
    return [{"row_kind": "record", "source": src, "copy": copy, "file_kind": RANGE, "offset": a, "end_offset": b}
            for a, b in _ranges(offsets)]
DIR = "__cluster_metadata-0"
NOOP_KEY = 20
SNAPSHOT_HEADER = 3

_SEG = re.compile(r"\d{20}\.log")
_SNAP = re.compile(r"\d{20}-\d{10}\.checkpoint")
# files of a metadata partition directory that carry nothing the replay reads
_AUX = re.compile(r"\d{20}\.(index|timeindex|txnindex|snapshot)(\.deleted)?|\d{20}\.log\.deleted"
                  r"|\d{20}-\d{10}\.checkpoint\.(deleted|part)|leader-epoch-checkpoint(\.tmp)?"
                  r"|partition\.metadata(\.tmp)?|quorum-state|bootstrap\.checkpoint|meta\.properties")

_KAFKA_FILE = re.compile(r".*-checkpoint(\.tmp)?|meta\.properties|\.lock|\.kafka_cleanshutdown")
_PARTITION_DIR = re.compile(r".+-\d+(\.[0-9a-f]+-(delete|future|stray))?")

FILE_SCHEMA = pa.schema([
    pa.field("source", pa.string()),
    pa.field("size", pa.int64()),
    pa.field("form", pa.string()),
    pa.field("name", pa.string()),
    # a segment with the highest base offset of its copy (null: not known, taken as the last): only that one may end
    # inside a batch because it was copied while written (:attr:`.discover.InputFile.last_segment`)
    pa.field("last_segment", pa.bool_()),
])

#: Step 1 rows: the records the replay needs (NoOps dropped), plus the side rows.
WORK = pa.schema([
    *SIDE_FIELDS,
    pa.field("copy", pa.string()),
    pa.field("file_kind", pa.string()),  # log | snapshot
    pa.field("snapshot_name", pa.string()),
    pa.field("offset", pa.int64()),
    pa.field("timestamp", pa.int64()),
    pa.field("raft_epoch", pa.int32()),
    pa.field("is_control", pa.bool_()),
    pa.field("control_type", pa.int16()),
    pa.field("value", pa.binary()),
    pa.field("data_json", pa.string()),
    pa.field("end_offset", pa.int64()),  # RANGE rows: the last offset of a run of consecutive records
])

#: Step 2 rows: ``partition_history`` rows (times as epoch ms) plus the side rows.
HISTORY_WORK = pa.schema([*SIDE_FIELDS[:1], *HISTORY_SCHEMA, *SIDE_FIELDS[3:]])


# ------------------------------------------------------------------------------------------ discovery


def copy_of(source: str) -> str:
    """The copy a file belongs to: its ``__cluster_metadata-0`` directory, else the file itself."""
    i = source.rfind("/" + DIR + "/")
    return source[: i + 1 + len(DIR)] if i >= 0 else source


def classify_cluster_metadata(entries: list[FileEntry]) -> Inventory:
    """Classify the files below ``<cluster_metadata>``."""
    inv = Inventory()
    for e in entries:
        parts = e.rel.split("/")
        name = parts[-1]
        parent = e.source.rstrip("/").rsplit("/", 2)[-2] if "/" in e.source else ""
        in_dir = parent == DIR
        if any(p.startswith(".") or (p.startswith("_") and not p.startswith("__")) for p in parts):
            inv.ignored.append((KIND, e.source))
        elif in_dir and _SEG.fullmatch(name):
            inv.files.append(InputFile(KIND, KSEGMENT, e.source, e.size, name=name))
        elif in_dir and _SNAP.fullmatch(name):
            inv.files.append(InputFile(KIND, KSNAPSHOT, e.source, e.size, name=name))
        elif in_dir or _AUX.fullmatch(name) or _KAFKA_FILE.fullmatch(name) or is_kafka_aux(e.rel) or (
                len(parts) >= 2 and _PARTITION_DIR.fullmatch(parts[-2])):
            # a whole Kafka data directory may be given: other partitions' files carry nothing for this input
            inv.ignored.append((KIND, e.source))
        elif name.lower().endswith(".txt"):
            inv.files.append(InputFile(KIND, KDUMP, e.source, e.size, name=name))
        else:
            inv.unrecognised.append(Unrecognised(KIND, e.source, e.size, "unrecognised file in cluster_metadata input"))
    return inv


def discover_cluster_metadata(root: str | None, *, follow_symlinks: bool = False,
                              exclude: Iterable[str] = ()) -> Inventory:
    """List and classify ``[inputs] cluster_metadata`` (empty when not set), walking a local root as
    :func:`jobs.ingest.discover.discover` does (links out of the root only with ``follow_symlinks``, the run's
    tables (``exclude``) not read; what the walk skips is reported the same way).

    Raises:
        jobs.errors.InputError: the root is set but does not exist or cannot be listed.
    """
    from .discover import list_root, unread_units

    if not root:
        return Inventory()
    listing = list_root("cluster_metadata", root, follow_symlinks=follow_symlinks, exclude=exclude)
    inv = classify_cluster_metadata(listing.files)
    inv.files = mark_last_segments(inv.files, (KSEGMENT,))
    # a zero-byte segment holds no unit, as in the other inputs (said "(N empty files)" when nothing else is read),
    # but is still decoded: its base offset is where its log starts, a hole when no copy holds the offsets after it
    inv.empty.extend(Skipped(KIND, f.source, EMPTY_FILE) for f in inv.files if f.form == KSEGMENT and f.size == 0)
    kept, lost = unread_units(KIND, root, listing.skipped, classify_cluster_metadata)
    inv.skipped.extend(kept)
    inv.unrecognised.extend(lost)
    return inv


def from_logdirs(inv: Inventory) -> list[InputFile]:
    """The ``__cluster_metadata-0`` segments and snapshots inside log-dir snapshots, as cluster-metadata
    inputs (their batch headers still feed ``record_batches`` as the logdirs input's own)."""
    out = []
    for f in inv.of("logdirs"):
        if f.topic == "__cluster_metadata" and f.partition == 0 and f.form == "segment":
            out.append(InputFile(KIND, KSEGMENT, f.source, f.size, name=f.name, last_segment=f.last_segment))
    for kind, src in inv.ignored:
        name = src.rsplit("/", 1)[-1]
        if kind == "logdirs" and f"/{DIR}/" in src and _SNAP.fullmatch(name):
            out.append(InputFile(KIND, KSNAPSHOT, src, -1, name=name))
    return out


# ------------------------------------------------------------------------------------ step 1: decode


def _array(a: pa.Array | pa.ChunkedArray) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def decode_files(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function: one metadata file per row -> :data:`WORK` rows."""
    for rb in batches:
        for row in rb.to_pylist():
            yield from _decode_file(row)


def _read(src: str) -> bytes:
    with open_reader(src) as r:
        return r.read_all()


def _decode_file(row: dict[str, Any]) -> Iterator[pa.RecordBatch]:
    src, form, name = row["source"], row["form"], row["name"] or ""
    side = RowBuffer(WORK)
    try:
        data = _read(src)
    except OSError as e:
        side.add(side_row(src, 0, "file", f"cannot read: {e}"))
        side.add(stats_row(src, "file", 1, 1, 0))
        yield side.flush()
        return
    if form == KDUMP:
        yield from _decode_dump(src, data)
        return
    # a segment's batches must lie in its file name's offset range (a snapshot's start at 0 whatever its name), and
    # it may end in a zero fill or a batch cut short (a copy of the active segment): the end of the log, as Kafka
    # reads it — if it is the copy's last segment: a rolled one is never appended to, so its cut is lost bytes; a
    # snapshot is written whole, so a cut one is damaged
    seg = form == KSEGMENT
    rb = metadata_records_arrow(data, segment_base_offset=segment_base_offset(name) if seg else None, ends_file=seg,
                                last_segment=row.get("last_segment") is not False)
    is_kind = "snapshot" if form == KSNAPSHOT else "log"
    err = rb.column("error")
    tail = rb.column("tail").fill_null(False)  # the incomplete final entry: no unit, counted apart
    n_tail = int(pc.sum(tail.cast(pa.int64())).as_py() or 0)
    bad_batch = pc.and_(pc.and_(pc.is_valid(err), pc.is_null(rb.column("offset"))), pc.invert(tail))
    bad_rec = pc.and_(pc.is_valid(err), pc.is_valid(rb.column("offset")))
    pos = rb.column("batch_position")
    for p, e, raw in zip(pos.filter(bad_batch).to_pylist(), err.filter(bad_batch).to_pylist(),
                         rb.column("value").filter(bad_batch).to_pylist(), strict=True):
        side.add(side_row(src, p, "batch", f"metadata batch: {e}", raw))
    for p, o, e, raw in zip(pos.filter(bad_rec).to_pylist(), rb.column("offset").filter(bad_rec).to_pylist(),
                            err.filter(bad_rec).to_pylist(), rb.column("value").filter(bad_rec).to_pylist(),
                            strict=True):
        side.add(side_row(src, p, "record", f"metadata record at offset {o}: {e}", raw))
    good_pos = pc.unique(pos.filter(pc.is_null(err)))
    bad_pos = set(pos.filter(bad_rec).to_pylist())
    n_bad = int(pc.sum(bad_batch.cast(pa.int64())).as_py() or 0) + len(bad_pos)
    n_read = len(good_pos) + int(pc.sum(bad_batch.cast(pa.int64())).as_py() or 0)
    if is_kind == "log":  # the offsets this file holds, for the replay's hole check
        side.extend(_range_rows(src, copy_of(src), rb.column("offset").filter(pc.is_null(err)).to_pylist()))
        if seg and (base := segment_base_offset(name)) is not None:
            side.add({"row_kind": "record", "source": src, "copy": copy_of(src), "file_kind": SEGMENT_BASE,
                      "offset": base})
    if is_kind == "snapshot":
        ctl = rb.column("control_type").filter(pc.is_null(err)).to_pylist()
        reason = _unbounded_reason(ctl[0] if ctl else None, ctl[-1] if ctl else None)
        if reason is not None and not n_bad:  # a file cut short at a batch boundary: one bad unit of its own
            side.add(side_row(src, len(data), "batch", f"metadata {reason}"))
            n_read, n_bad = n_read + 1, n_bad + 1
        if n_bad:  # the replay does not start from a partial image (:func:`replay_records`)
            side.add(_damaged(src, name))
    n_good_records = int(pc.sum(pc.is_null(err).cast(pa.int64())).as_py() or 0)
    side.add(stats_row(src, "batch", n_read, n_bad, n_good_records, n_tail))
    noop = pc.equal(pc.fill_null(rb.column("api_key"), -1), NOOP_KEY)
    # NoOps carry no state: dropped, except the first and last records of each run of consecutive offsets (the
    # file's first and last, and those next to a bad batch), which tell the replay where the log starts (the gap
    # check and the snapshot choice need the true first offset) and how far in time it reaches (the ``log_end``
    # row: a quiet cluster's last change may be days before its last heartbeat; after a hole, the offset before
    # it) (decoded ones only: a bad batch or an incomplete entry at the end holds no record)
    ok = pc.is_null(err)
    decoded = np.flatnonzero(ok.to_numpy(zero_copy_only=False))
    offs = rb.column("offset").filter(ok).to_numpy(zero_copy_only=False).astype(np.int64)
    at_edge = np.zeros(rb.num_rows, dtype=bool)
    if len(decoded):
        step = offs[1:] != offs[:-1] + 1  # where a run of consecutive offsets ends and the next begins
        at_edge[decoded[np.concatenate(([True], step)) | np.concatenate((step, [True]))]] = True
    edge = pa.array(at_edge)
    keep = pc.and_(pc.is_null(err), pc.or_(pc.or_(rb.column("is_control"), pc.invert(noop)), edge))
    t = pa.Table.from_batches([rb]).filter(keep)
    values = pc.if_else(pc.and_(noop.filter(keep), pc.is_null(t.column("value"))), pa.scalar(NOOP_VALUE),
                        t.column("value")) if t.num_rows else t.column("value")
    n = t.num_rows
    if n:
        ctl = t.column("is_control")
        cols = {
            "row_kind": pa.repeat(pa.scalar("record"), n), "source": pa.repeat(pa.scalar(src), n),
            "position": t.column("batch_position"), "copy": pa.repeat(pa.scalar(copy_of(src)), n),
            "file_kind": pa.repeat(pa.scalar(is_kind), n),
            "snapshot_name": pa.repeat(pa.scalar(name if is_kind == "snapshot" else None, pa.string()), n),
            "offset": t.column("offset"), "timestamp": t.column("timestamp"), "raft_epoch": t.column("raft_epoch"),
            "is_control": ctl, "control_type": t.column("control_type"), "value": values,
            "data_json": null_where(t.column("data_json"), pc.invert(ctl)),
        }
        arrays = [_array(cols[f.name]) if f.name in cols else pa.nulls(n, f.type) for f in WORK]
        yield pa.RecordBatch.from_arrays([a.cast(f.type) for a, f in zip(arrays, WORK, strict=True)], schema=WORK)
    out = side.flush()
    if out is not None:
        yield out


def _unbounded_reason(first_control: int | None, last_control: int | None) -> str | None:
    """Why a snapshot is not whole (:func:`epochlib.kraft.unbounded`'s first reason), None when it is."""
    return next((r for r in unbounded(first_control, last_control) if r is not None), None)


def _damaged(src: str, name: str, copy: str | None = None) -> dict[str, Any]:
    """The work row that marks snapshot ``name`` of ``copy`` (default: ``src``'s), read from ``src``, as not whole
    (:func:`replay_records` replays from another copy, or none)."""
    return {"row_kind": "record", "source": src, "copy": copy or copy_of(src), "file_kind": DAMAGED,
            "snapshot_name": name}


def _snapshot_name(section: Any) -> str | None:
    """The snapshot file name of a dump's section (``<end>-<epoch>.checkpoint``); None for a log or an unnamed one."""
    if section is None or section.kind != "snapshot" or section.end_offset is None or section.epoch is None:
        return None
    return f"{section.end_offset:020d}-{section.epoch:010d}.checkpoint"


def _decode_dump(src: str, data: bytes) -> Iterator[pa.RecordBatch]:
    out = RowBuffer(WORK)
    head = data[:65536].decode("utf-8", "replace")
    if not detect_metadata_dump(head):
        out.add(side_row(src, 0, "file", "not kafka-dump-log --cluster-metadata-decoder output", data[:RAW_MAX]))
        out.add(stats_row(src, "file", 1, 1, 0))
        yield out.flush()
        return
    text = data.decode("utf-8", "replace")
    files = sorted(dump_files(text), key=lambda f: f.line)
    copy = copy_of(src)
    n_read = n_bad = n_out = 0
    # as in a binary file (above): NoOps dropped, except each file's first and last record
    prev_key: int | None = None  # the file (section) of the previous record: the entries come in file order
    last_noop: dict[str, Any] | None = None  # the previous record, a NoOp held back in case it is its file's last
    damaged: set[tuple[str, str]] = set()  # (snapshot name, the path the dump printed for it)
    bounds: dict[tuple[str, str], list[Any]] = {}
    log_offsets: dict[int, list[int]] = {}

    def key_of(section: Any) -> int:
        return -1 if section is None else section.line

    n_tail = 0  # "Found N invalid bytes at the end of" a folder's last segment: counted apart, as in a binary file
    for e in iter_dump_entries(text):
        if isinstance(e, IncompleteTail):
            n_tail += 1
            continue
        n_read += 1
        section = None
        for f in files:
            if f.line <= e.position:
                section = f
        if not isinstance(e, MetadataEntry):
            n_bad += 1
            out.add(side_row(src, e.position, "line", f"metadata dump: {e.reason}", e.raw))
            name = _snapshot_name(section)
            if name is not None and (name, section.path) not in damaged:  # as for a binary snapshot: not replayed from
                damaged.add((name, section.path))
                out.add(_damaged(src, name, copy_of(section.path)))
            continue
        if section is not None and section.kind == "bootstrap":
            continue  # bootstrap.checkpoint: features only, not the cluster's history
        is_snap = section is not None and section.kind == "snapshot"
        snap_name = _snapshot_name(section)
        if is_snap and snap_name is None:
            continue
        if is_snap:  # (first line, first control type, last control type) of each snapshot section
            ct = e.control.control_type if e.control is not None else None
            sf = bounds.setdefault((snap_name, section.path), [section.line, ct, ct])
            sf[2] = ct
        else:  # the offsets of each log section, NoOps included, for the replay's hole check
            log_offsets.setdefault(key_of(section), []).append(e.offset)
        n_out += 1
        key = key_of(section)
        first = key != prev_key
        if first and last_noop is not None:
            out.add(last_noop)  # the last record of the previous file
        prev_key = key
        row = {"row_kind": "record", "source": src, "position": e.position,
               "copy": copy if not is_snap else copy_of(section.path),
               "file_kind": "snapshot" if is_snap else "log", "snapshot_name": snap_name,
               "offset": e.offset, "timestamp": e.timestamp, "raft_epoch": e.raft_epoch,
               "is_control": e.control is not None}
        if e.control is not None:
            row["control_type"] = e.control.control_type
            row["data_json"] = None if e.control.data is None else json.dumps(e.control.data, default=str)
        else:
            row["value"] = encode_record(e.record)
        last_noop = row if e.record is not None and e.record.api_key == NOOP_KEY and not first else None
        if last_noop is None:
            out.add(row)
    if last_noop is not None:
        out.add(last_noop)
    for offsets in log_offsets.values():
        out.extend(_range_rows(src, copy, offsets))
    for (name, path), (line, first_ct, last_ct) in bounds.items():
        reason = _unbounded_reason(first_ct, last_ct)
        if reason is not None and (name, path) not in damaged:  # a section cut short at a batch: one bad unit
            n_read, n_bad = n_read + 1, n_bad + 1
            out.add(side_row(src, line, "line", f"metadata dump: {reason}"))
            out.add(_damaged(src, name, copy_of(path)))
    out.add(stats_row(src, "line", n_read, n_bad, n_out, n_tail or None))  # null: no unit of that kind met
    yield out.flush()


# ------------------------------------------------------------------------------------ step 2: replay


def _entry(r: dict[str, Any]) -> MetadataEntry:
    if r["is_control"]:
        ct = int(r["control_type"]) if r["control_type"] is not None else -1
        data = json.loads(r["data_json"]) if r["data_json"] else None
        return MetadataEntry(r["offset"], r["timestamp"], r["raft_epoch"], r["position"],
                             control=ControlRecord(ct, "", data if ct == SNAPSHOT_HEADER else None))
    return MetadataEntry(r["offset"], r["timestamp"], r["raft_epoch"], r["position"],
                         record=decode_record_value(r["value"]))


def _first_hole(covered: list[tuple[int, int]], start: int | None) -> tuple[int, int] | None:
    """``(first missing offset, next offset held)`` of the first hole after ``start`` (the snapshot's end offset,
    else the log's first offset) in the union of the copies' runs of offsets (``covered``, sorted); None when the
    log is whole from there (or no runs were given: rows from before the check)."""
    if not covered or start is None:
        return None
    reach = None  # the last offset held without a hole from ``start`` on
    for a, b in covered:
        if reach is None:
            if b < start:
                continue
            if a > start:
                return (start, a)  # the first run after the snapshot starts later: nothing joins it
            reach = b
        elif a > reach + 1:
            return (reach + 1, a)
        else:
            reach = max(reach, b)
    return None


def replay_records(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """``mapInArrow`` function over ONE partition holding every :data:`WORK` record row of the run:
    merge the copies, replay, and give :data:`HISTORY_WORK` rows (history, quarantine, stats)."""
    rows = [r for b in batches for r in b.to_pylist() if r["row_kind"] == "record"]
    side = RowBuffer(HISTORY_WORK)
    copies: dict[str, list[MetadataEntry]] = {}
    snap_copies: dict[str, dict[str, list[MetadataEntry]]] = {}
    # (snapshot name, copy) -> the file a damaged snapshot was read from
    damaged = {(r["snapshot_name"], r["copy"]): r["source"] for r in rows if r["file_kind"] == DAMAGED}
    source_of: dict[str, str] = {}  # a snapshot copy -> the file it was read from
    file_of: dict[tuple[str, int], str] = {}  # (log copy, record offset) -> the segment file it was read from
    ranges = [(r["copy"], r["offset"], r["end_offset"]) for r in rows if r["file_kind"] == RANGE]
    for r in rows:
        if r["file_kind"] in (DAMAGED, RANGE, SEGMENT_BASE):
            continue
        try:
            e = _entry(r)
        except DecodeError as err:  # a row step 1 decoded cannot fail here; kept as quarantine, not a crash
            side.add(side_row(r["source"], r["position"], "record", f"metadata record: {err.reason}", r["value"]))
            continue
        if r["file_kind"] == "snapshot":  # by copy: one dump text can hold several nodes' snapshots
            snap_copies.setdefault(r["snapshot_name"], {}).setdefault(r["copy"], []).append(e)
            source_of.setdefault(r["copy"], r["source"])
        else:
            copies.setdefault(r["copy"], []).append(e)
            file_of[(r["copy"], e.offset)] = r["source"]
    # a snapshot is replayed from one whole copy of it: Kafka loads a snapshot whole or not at all, and a partial
    # image (a batch lost to a bad CRC) makes a history whose missing topics the rules would read as facts
    snaps: dict[str, tuple[str, list[MetadataEntry]]] = {}
    rejected: list[tuple[str, str]] = []
    for name in set(snap_copies) | {n for n, _ in damaged}:
        by_copy = snap_copies.get(name, {})
        whole = [c for c in sorted(by_copy) if (name, c) not in damaged]
        if whole:
            snaps[name] = (source_of[whole[0]], by_copy[whole[0]])
        else:
            rejected += sorted((name, src) for (n, _), src in damaged.items() if n == name)
    for c in copies.values():
        c.sort(key=lambda e: e.offset)
    merged = merge_copies({k: copies[k] for k in sorted(copies)})
    # a copy's superseded tail holds none of the log: the offsets only it had are a hole, not covered
    cut = {x.source: x.offset for x in merged.superseded}
    covered = sorted((a, min(b, cut[c] - 1) if c in cut else b) for c, a, b in ranges if c not in cut or a < cut[c])
    log_start = merged.entries[0][1].offset if merged.entries else None
    chosen = choose_snapshot(list(snaps), log_start)

    def snapshot_of(name: str) -> Snapshot:
        entries = sorted(snaps[name][1], key=lambda e: e.offset)
        end, epoch = parse_snapshot_name(name) or (None, None)
        header = next((e for e in entries if e.control is not None and e.control.control_type == SNAPSHOT_HEADER
                       and e.control.data), None)
        last_ts = int(header.control.data.get("last_contained_log_timestamp", -1)) if header else -1
        return Snapshot(end, epoch, last_ts, tuple(entries))

    snapshot = snapshot_of(chosen) if chosen is not None else None
    snap_src = snaps[chosen][0] if chosen is not None else None
    # the holes, each quarantined: where no copy holds some offsets, the state after them is unknown (epochs counted
    # across a hole would be wrong); the replay starts again from the first later snapshot that joins the log read
    # after it, as a follower the leader has no longer the records for fetches a snapshot, else the history ends
    holes: list[tuple[str, str]] = []  # (source, reason)
    restarts: list[tuple[Snapshot, str]] = []
    ends = {name: (parse_snapshot_name(name) or (0, 0))[0] for name in snaps}
    bases = [r["offset"] for r in rows if r["file_kind"] == SEGMENT_BASE]

    def between(lo: int, hi: int | None) -> list[tuple[str, MetadataEntry]]:
        return [x for x in merged.entries if x[1].offset >= lo and (hi is None or x[1].offset < hi)]

    first_held = min(a for a, _ in covered) if covered else None
    if first_held is not None:  # a hole before the first offset read: a segment starts below it, or a snapshot ends
        lead = [(b, f"segment {b:020d}.log starts there") for b in bases if b < first_held]
        lead += [(e, f"snapshot {n} ends there") for n, e in ends.items() if e < first_held]
        start = snapshot.end_offset if snapshot is not None else first_held
        if lead and start >= first_held and (snapshot is None or start > first_held):
            lo, why = min(lead)
            lost = between(first_held, start)
            after = (f"the {len(lost)} records at offsets {first_held}..{start - 1} after it are not replayed; the "
                     f"history starts from snapshot {chosen}" if snapshot is not None else
                     f"the history starts at offset {first_held} without the state before it (changes to partitions "
                     "created before it are not replayed)")
            where = merged.entries[0][0] if merged.entries else snap_src or ""
            holes.append((where, f"the log has a hole at offsets {lo}..{first_held - 1} ({why}; no copy read holds "
                                 f"those records): {after}"))
    pos = snapshot.end_offset if snapshot is not None else log_start
    last_held = max((b for _, b in covered), default=None)
    lo, cur_src, entries = -1, snap_src or "", []
    while pos is not None:
        hole = _first_hole(covered, pos)
        beyond = [n for n, e in ends.items() if last_held is not None and e > max(last_held + 1, pos)]
        if hole is None and not beyond:
            entries += between(lo, None)
            break
        # a hole between runs of held offsets, or after the last one with a snapshot beyond it (a copy holding only
        # a newer snapshot): the history goes on from the first later snapshot that joins the log read after the
        # hole, or from that newer image
        cut, resume = hole if hole is not None else (last_held + 1, None)
        joins = [n for n, e in ends.items() if resume is not None and e >= resume
                 and any(a <= e <= b + 1 for a, b in covered)]
        bridge = min(joins, key=ends.get) if joins else max(beyond, key=ends.get) if beyond else None
        part = between(lo, cut)
        entries += part
        src = part[-1][0] if part else cur_src
        upto = resume if resume is not None else ends[bridge]
        where = (f"between snapshot {chosen} and the log's next offset {resume}" if snapshot is not None
                 and not restarts and cut == snapshot.end_offset and resume is not None else
                 f"at offsets {cut}..{upto - 1}")
        if bridge is None:
            holes.append((src, f"the log has a hole {where} (no copy read holds those records): the history ends at "
                               f"offset {cut - 1}; {len(between(cut, None))} records after the hole are not replayed, "
                               "since leader epochs cannot be counted across it"))
            break
        skipped = len(between(cut, ends[bridge]))
        holes.append((src, f"the log has a hole {where} (no copy read holds those records): the history stops at "
                           f"offset {cut - 1} and goes on from snapshot {bridge} (its image as of offset "
                           f"{ends[bridge] - 1}, as a follower fetches a snapshot), since leader epochs cannot be "
                           "counted across the hole" + (f"; the {skipped} records read between the hole and the "
                                                        "snapshot's end are not replayed" if skipped else "")))
        cur_src = snaps[bridge][0]
        restarts.append((snapshot_of(bridge), cur_src))
        lo = pos = ends[bridge]
    else:
        entries = list(merged.entries)
    for where, reason in holes:
        side.add(side_row(where, None, "record", f"metadata replay: {reason}"))
    # each record is replayed under its segment file, not its copy's folder: the history's evidence is then a file
    # and byte position that `kafka-dump-log.sh` can re-read (the copies were merged by folder)
    entries = [(file_of.get((c, e.offset), c), e) if isinstance(e, MetadataEntry) else (c, e) for c, e in entries]
    result = replay(entries, snapshot=snapshot, snapshot_source=snap_src or "", restarts=restarts)
    for sup in merged.superseded:  # Raft's own reconciliation, not damage: a note, not quarantine
        side.add({"row_kind": "info", "source": sup.source, "position": None, "reason": (
            f"{sup.records} records from metadata offset {sup.offset} on (Raft epoch {sup.epoch}) are an uncommitted "
            f"tail: a more up-to-date copy ({sup.by_source}) holds epoch {sup.by_epoch} there; not replayed, as Kafka "
            "truncates them")})
    for c in merged.conflicts:  # undated, as the replay's other rows: every run replays the whole log with it
        side.add(side_row(c.other_source, c.other.position, "record",
                          f"copies differ at metadata offset {c.offset} (appended at {c.other.timestamp} ms): kept "
                          f"{c.first_source} (batch at byte {c.first.position}), not this copy's record",
                          encode_record(c.other.record) if c.other.record is not None else None))
    for i in result.issues:
        side.add(side_row(i.source or "", i.position, "record", f"metadata replay: {i.reason}"))
    start = (f"snapshot {chosen}" if chosen is not None else
             f"the log's first record (offset {log_start})" if log_start is not None else "nothing")
    for name, src in rejected:
        side.add(side_row(src, None, "record", f"metadata replay: snapshot {name} not replayed: it is not whole (a "
                          "batch unreadable or the file cut short, quarantined), and a snapshot is loaded whole or "
                          f"not at all; the replay starts from {start}"))
    n_conf, n_issue = len(merged.conflicts), len(result.issues) + len(rejected) + len(holes)
    side.add(stats_row("", "record", len(entries) + n_conf + n_issue, n_conf + n_issue, len(result.rows)))
    rows = list(result.rows)
    if snapshot is None and entries:
        # where a replay without a snapshot starts: from offset 0 it knows every topic; from later, not the topics
        # created before it (the rules then do not name a topic's id from the log: :class:`~epochlib.rules.kraft.LogView`)
        src0, e0 = entries[0]
        rows.append(HistoryRow(e0.offset, e0.timestamp, e0.raft_epoch, None, "", None, None, None, None, None, None,
                               None, None, None, None, None, "log_start", False, None, None, src0, e0.position))
    last = entries[-1] if entries else None
    # the image the history ends in when no record follows it: the last snapshot replayed from
    final, final_src = (restarts[-1] if restarts and (last is None or restarts[-1][0].end_offset > last[1].offset)
                        else (snapshot, snap_src or "") if last is None else (None, ""))
    if last is not None or final is not None:
        # how far the retained history reaches (K1 and M2 judge only inside it): the last record replayed — before a
        # hole that ends the history, the one just before the hole (the decode keeps the NoOps at a hole's edges)
        src, e = (final_src, None) if final is not None else last
        ts = e.timestamp if e is not None else final.last_contained_timestamp
        rows.append(HistoryRow(result.last_offset if result.last_offset is not None else -1, ts,
                               e.raft_epoch if e is not None else (final.epoch or -1), None, "", None, None, None,
                               None, None, None, None, None, None, None, None, "log_end", False, None, None, src,
                               e.position if e is not None else -1))
    hist = history_arrow(rows)
    if hist.num_rows:
        n = hist.num_rows
        cols = {f.name: hist.column(f.name) for f in HISTORY_SCHEMA}
        cols["row_kind"] = pa.repeat(pa.scalar("history"), n)
        arrays = [_array(cols[f.name]) if f.name in cols else pa.nulls(n, f.type) for f in HISTORY_WORK]
        yield pa.RecordBatch.from_arrays(arrays, schema=HISTORY_WORK)
    out = side.flush()
    if out is not None:
        yield out


# ------------------------------------------------------------------------------------------ Spark


def history_frame(work: DataFrame, range_from: dt.date) -> DataFrame:
    """``partition_history`` rows (without cluster/event_date) from the :data:`HISTORY_WORK` frame.

    ``event_ts`` is the controller time, except for ``snapshot``, ``log_start`` and ``log_end`` rows: they are the state
    the retained log starts from and how far it reaches, not events, and are dated no earlier than the
    run's first day (``controller_ts`` keeps their true time) — a snapshot taken just before the range
    would otherwise never reach the reports, which then would know nothing of the partitions that did not
    change inside it."""
    from pyspark.sql import functions as F

    cols = [F.timestamp_millis("controller_ts").alias("controller_ts") if f.name == "controller_ts"
            else F.col(f.name) for f in HISTORY_SCHEMA]
    start_ms = int(dt.datetime(range_from.year, range_from.month, range_from.day, tzinfo=dt.timezone.utc)
                   .timestamp() * 1000)
    state = F.col("change").isin("snapshot", "log_start", "log_end")
    event = F.when(state, F.greatest(F.col("controller_ts"), F.lit(start_ms))).otherwise(F.col("controller_ts"))
    return work.where(F.col("row_kind") == "history").select(*cols, F.timestamp_millis(event).alias("event_ts"))


#: The ``partition_history`` columns that name a snapshot: its rows' ``metadata_offset`` is the snapshot's end offset
#: - 1 and their ``raft_epoch`` its epoch (the ``<end offset>-<epoch>.checkpoint`` file name), ``change`` "snapshot".
SNAPSHOT_ID = ("metadata_offset", "raft_epoch")


def snapshots_stored_before(spark: SparkSession, config: Config, cluster: str, date_range: tuple[dt.date, dt.date],
                               snapshots: Iterable[tuple[int, int]]) -> set[tuple[int, int]]:
    """Which of ``snapshots`` (``(end offset - 1, epoch)``) ``partition_history`` already holds rows of for
    ``cluster`` under a date before ``date_range`` (the dates a run replaces); read through delta-rs for a path
    table (only the snapshots' rows), else Spark; none when the table is not there."""
    from pyspark.sql import functions as F

    from jobs.errors import NoTableError, SinkError
    from jobs.sink import read_table, read_table_arrow

    lo = date_range[0]
    wanted = set(snapshots)
    found: list[dict[str, Any]] = []
    try:
        for offset, _epoch in sorted(wanted):
            found += read_table_arrow("partition_history", config, cluster=cluster,
                                      where={"change": "snapshot", "metadata_offset": offset},
                                      columns=["event_date", *SNAPSHOT_ID]).to_pylist()
    except NoTableError:
        return set()
    except SinkError:  # a catalog table: only Spark reads it
        try:
            df = read_table(spark, "partition_history", config, cluster=cluster)
        except Exception as exc:  # not written yet (SinkError, or Spark's AnalysisException for catalogs)
            if not isinstance(exc, SinkError) and "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
                raise
            return set()
        offsets = sorted({o for o, _ in wanted})
        found = [r.asDict() for r in df.where((F.col("change") == "snapshot") & F.col("metadata_offset").isin(offsets))
                 .select("event_date", *SNAPSHOT_ID).distinct().collect()]
    return {key for r in found if (key := (r["metadata_offset"], r["raft_epoch"])) in wanted
            and r["event_date"] is not None and r["event_date"] < lo}


def without_stored_snapshots(spark: SparkSession, config: Config, cluster: str, date_range: tuple[dt.date, dt.date],
                             history: DataFrame) -> DataFrame:
    """``history`` (:func:`history_frame`) without the rows of a snapshot that ``partition_history`` holds under a
    date before ``date_range`` already (a copy dated after it does not count: a reader of the range, the HTML
    timeline, takes a partition's starting state from the last snapshot stored before it, so a backfill stores its
    own copy).

    A snapshot's rows are dated at the first day of the run that replays from it (:func:`history_frame`), and a
    nightly run replays the same snapshot file night after night: each night stored one more copy of its rows under
    its own date, and the table and every reader's time grew without bound. They are now stored once, by the first
    run that meets the snapshot (its identity: end offset and epoch, :data:`SNAPSHOT_ID`); a rerun of that run's
    range writes them again (its dates are replaced), and a new snapshot gets its rows. The reports read every date
    of the table (:func:`jobs.reports.kraft.load`, one row per change), so their findings are the same."""
    from pyspark.sql import functions as F

    is_snapshot = F.col("change") == "snapshot"
    ids = {(r[0], r[1]) for r in history.where(is_snapshot).select(*SNAPSHOT_ID).distinct().collect()}
    stored = snapshots_stored_before(spark, config, cluster, date_range, ids) if ids else set()
    if not stored:
        return history
    same = None
    for offset, epoch in sorted(stored):
        one = F.col("metadata_offset").eqNullSafe(offset) & F.col("raft_epoch").eqNullSafe(epoch)
        same = one if same is None else same | one
    return history.where(~(is_snapshot & same))
