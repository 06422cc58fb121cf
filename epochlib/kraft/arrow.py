"""Arrow batch functions for the metadata log (the path Spark calls), with their per-record reference.

:func:`metadata_records_arrow` decodes a segment or snapshot into :data:`RECORD_SCHEMA` — one row
per record (control records included) and one row per bad batch (``error`` set, ``offset``
null). Strategy: :func:`epochlib.records.batches_arrow` gives the batch and record columns; the
frame header of every value is read with numpy, and the record kinds that dominate real logs
are filled in columnar form — NoOpRecord (98 % of a quiet cluster's log: a 500 ms heartbeat)
and PartitionChangeRecord carrying only a Leader tag (a leader change). Every other row goes
through :func:`_reference_row`, the oracle; :func:`metadata_records_rows` is the reference
for the whole function and the tests hold the two equal row for row.

``data_json`` is the decoded record (or control) fields as canonical JSON (sorted keys, bytes
as hex), null for NoOpRecord; ``value`` keeps the value bytes of every metadata record except
NoOpRecord, so a replay can re-decode them without the file. :func:`history_arrow` turns
replay rows into an Arrow table (:data:`HISTORY_SCHEMA`, the ``partition_history`` columns).
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Sequence
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .._wire import Buffer, uuid_to_str
from ..errors import DecodeError
from ..records import BadBatch, IncompleteTail, batches_arrow, iter_batches
from .codec import decode_control_value, decode_record_value
from .replay import HistoryRow

__all__ = ["HISTORY_SCHEMA", "RECORD_SCHEMA", "history_arrow", "metadata_records_arrow", "metadata_records_rows"]

RECORD_SCHEMA = pa.schema([
    ("batch_position", pa.int64()),
    ("offset", pa.int64()),
    ("timestamp", pa.int64()),
    ("raft_epoch", pa.int32()),
    ("is_control", pa.bool_()),
    ("control_type", pa.int16()),
    ("api_key", pa.int16()),
    ("record_type", pa.string()),
    ("version", pa.int16()),
    ("topic_id", pa.string()),
    ("partition_id", pa.int32()),
    ("leader", pa.int32()),
    ("data_json", pa.string()),
    ("value", pa.binary()),
    ("error", pa.string()),
    # True on the row of the incomplete entry a segment file ends in (``ends_file``): a limit of the copy
    # (Kafka's reader ends the log there), not bad data; ``error`` says what it is
    ("tail", pa.bool_()),
])
_NAMES = RECORD_SCHEMA.names
NOOP_VALUE = b"\x01\x14\x00\x00"
PARTITION_CHANGE = 5


def _json_default(o: Any) -> Any:
    if isinstance(o, bytes | bytearray | memoryview):
        return bytes(o).hex()
    raise TypeError(type(o).__name__)


def _dumps(d: Any) -> str:
    return json.dumps(d, default=_json_default, sort_keys=True, separators=(",", ":"))


def _reference_row(batch_position: int, offset: int, timestamp: int, raft_epoch: int, is_control: bool,
                   control_type: int | None, value: bytes | None) -> dict[str, Any]:
    row: dict[str, Any] = dict.fromkeys(_NAMES)
    row.update(batch_position=batch_position, offset=offset, timestamp=timestamp, raft_epoch=raft_epoch,
               is_control=is_control, control_type=control_type)
    try:
        if is_control:
            if control_type is None:
                raise DecodeError("control record without a usable key", 0)
            ctl = decode_control_value(control_type, value)
            row.update(record_type=ctl.name, data_json=None if ctl.data is None else _dumps(ctl.data))
            return row
        if value is None:
            raise DecodeError("metadata record with a null value", 0)
        rec = decode_record_value(value)
    except DecodeError as e:
        row["error"] = str(e)
        row["value"] = None if value is None else bytes(value[:4096])
        return row
    row.update(api_key=rec.api_key, record_type=rec.name, version=rec.version)
    if bytes(value) == NOOP_VALUE:
        return row
    row["value"] = bytes(value)
    d = rec.data
    if d is not None:
        row["data_json"] = _dumps(d)
        row["topic_id"] = d.get("topic_id")
        if "partition_id" in d:
            row["partition_id"] = d["partition_id"]
        if rec.api_key in (3, 5):
            row["leader"] = d["leader"]
    else:
        row["data_json"] = _dumps({"raw": rec.raw, "note": rec.note})
    return row


def _tail_row(t: IncompleteTail) -> dict[str, Any]:
    row = dict.fromkeys(_NAMES)
    row.update(batch_position=t.position, error=t.reason, tail=True)
    return row


def metadata_records_rows(buf: Buffer, *, base_position: int = 0, segment_base_offset: int | None = None,
                          ends_file: bool = False, last_segment: bool = True) -> list[dict[str, Any]]:
    """Reference for :func:`metadata_records_arrow`: one dict per record / bad batch, file order."""
    out = []
    for b in iter_batches(buf, base_position=base_position, segment_base_offset=segment_base_offset,
                          ends_file=ends_file, last_segment=last_segment):
        if isinstance(b, IncompleteTail):
            out.append(_tail_row(b))
            continue
        if isinstance(b, BadBatch):
            row = dict.fromkeys(_NAMES)
            row.update(batch_position=b.position, error=b.reason, value=b.raw_slice)
            out.append(row)
            continue
        for r in b.records:
            out.append(_reference_row(b.position, r.offset, b.max_timestamp, b.partition_leader_epoch, b.is_control,
                                      r.control_type, r.value))
    return out


def _b64url_uuids(u8: np.ndarray) -> np.ndarray:
    """Kafka's uuid text (22-char base64url, no padding) of each 16-byte row of ``u8`` (n x 16)."""
    n = len(u8)
    padded = np.zeros((n, 18), np.uint8)
    padded[:, :16] = u8
    raw = base64.urlsafe_b64encode(padded.tobytes())  # 18 bytes -> 24 chars per row
    chars = np.frombuffer(raw, np.uint8).reshape(n, 24)[:, :22]
    return chars.copy().view("S22").ravel()


def metadata_records_arrow(buf: Buffer, *, base_position: int = 0, segment_base_offset: int | None = None,
                           ends_file: bool = False, last_segment: bool = True) -> pa.RecordBatch:
    """Decode a metadata segment or snapshot into :data:`RECORD_SCHEMA` (equal to
    :func:`metadata_records_rows`). For a segment (not a snapshot, which is written whole): its base offset (its
    file name's), so that a batch outside the segment's offset range is a bad batch, and ``ends_file`` when
    ``buf`` is the whole file, so that a zero fill after the last batch is no row and an incomplete final entry
    one ``tail`` row (:func:`epochlib.records.iter_batches`) — unless ``last_segment`` is False (a rolled segment,
    not the copy's last: the cut entry is a bad batch). Raises only DecodeError, for non-bytes input."""
    ba = batches_arrow(buf, base_position=base_position, segment_base_offset=segment_base_offset,
                       ends_file=ends_file, last_segment=last_segment)
    batches, recs = ba.batches, ba.records
    bad = batches.filter(pc.is_valid(batches.column("error")))
    n = recs.num_rows
    # batch time of every record (max_timestamp of its batch; all KRaft records carry it)
    good = batches.filter(pc.is_null(batches.column("error")))
    bpos = good.column("position").to_numpy()
    bts = good.column("max_timestamp").to_numpy()
    rpos = recs.column("batch_position").to_numpy()
    ts = bts[np.searchsorted(bpos, rpos)] if n else np.zeros(0, np.int64)

    values = recs.column("value")
    is_control = recs.column("is_control").to_numpy(zero_copy_only=False)
    offs = np.frombuffer(values.buffers()[1], np.int32, count=values.offset + n + 1)[values.offset:].astype(np.int64)
    data = values.buffers()[2]
    u8 = np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8)
    u8 = np.concatenate([u8, np.zeros(40, np.uint8)])
    start, length = offs[:-1], np.diff(offs)
    valid = values.is_valid().to_numpy(zero_copy_only=False) if values.null_count else np.ones(n, bool)
    meta = valid & ~is_control
    b0, b1, b2 = u8[start], u8[start + 1], u8[start + 2]
    head = meta & (b0 == 1) & (b1 < 0x80) & (b2 < 0x80) & (length >= 4)
    noop = head & (b1 == 20) & (b2 == 0) & (length == 4) & (u8[start + 3] == 0)
    # PartitionChangeRecord v0-v2 with exactly one tag, Leader (tag 1, 4 bytes): 30 bytes
    pcr = head & (b1 == PARTITION_CHANGE) & (b2 <= 2) & (length == 30)
    pcr &= (u8[start + 23] == 1) & (u8[start + 24] == 1) & (u8[start + 25] == 4)
    fast = noop | pcr
    slow = np.flatnonzero(~fast)

    api_key = np.where(fast, b1, 0).astype(np.int16)
    version = np.where(fast, b2, 0).astype(np.int16)
    be32 = np.ndarray((len(u8) - 3,), ">i4", u8, strides=(1,))
    pidx, lidx = np.where(pcr, start + 3, 0), np.where(pcr, start + 26, 0)
    partition_id = be32[pidx].astype(np.int32)
    leader = be32[lidx].astype(np.int32)
    p_rows = np.flatnonzero(pcr)
    tid_rows = u8[(start[p_rows] + 7)[:, None] + np.arange(16)]
    tids = _b64url_uuids(tid_rows).astype(str) if len(p_rows) else np.zeros(0, str)
    topic_id = np.full(n, None, object)
    topic_id[p_rows] = tids
    rtype = np.full(n, None, object)
    rtype[noop] = "NoOpRecord"
    rtype[pcr] = "PartitionChangeRecord"
    data_json = np.full(n, None, object)
    if len(p_rows):
        data_json[p_rows] = _pcr_json(partition_id[p_rows], leader[p_rows], tids)

    cols: dict[str, Any] = {
        "batch_position": rpos, "offset": recs.column("offset").to_numpy(), "timestamp": ts,
        "raft_epoch": recs.column("partition_leader_epoch").to_numpy(zero_copy_only=False),
        "is_control": is_control, "control_type": recs.column("control_type"),
        "api_key": (api_key, fast), "record_type": rtype, "version": (version, fast),
        "topic_id": topic_id, "partition_id": (partition_id, pcr), "leader": (leader, pcr),
        "data_json": data_json, "error": np.full(n, None, object), "tail": np.full(n, None, object),
    }
    value_keep = ~noop
    ref = []
    if slow.size:
        vlist = values.take(pa.array(slow)).to_pylist()
        ctypes = recs.column("control_type").take(pa.array(slow)).to_pylist()
        for i, v, ct in zip(slow, vlist, ctypes, strict=True):
            row = _pcr_row(v) if head[i] and b1[i] == PARTITION_CHANGE else None
            ref.append(row or _reference_row(int(rpos[i]), 0, 0, 0, bool(is_control[i]), ct, v))
    arrays = []
    for f in RECORD_SCHEMA:
        name = f.name
        if name == "value":
            arr = pc.if_else(pa.array(value_keep), values, pa.nulls(n, pa.binary()))
            if slow.size:
                mask = np.zeros(n, bool)
                mask[slow] = True
                arr = pc.replace_with_mask(arr, pa.array(mask), pa.array([r["value"] for r in ref], pa.binary()))
            arrays.append(arr)
            continue
        c = cols[name]
        if isinstance(c, tuple):
            d, ok = c
            d, ok = np.asarray(d).astype(f.type.to_pandas_dtype(), copy=True), ok.copy()
            if name in ("api_key", "version", "partition_id", "leader"):
                for i, r in zip(slow, ref, strict=True):
                    ok[i] = r[name] is not None
                    if r[name] is not None:
                        d[i] = r[name]
            arrays.append(pa.array(d, f.type, mask=~ok))
            continue
        if isinstance(c, (pa.Array, pa.ChunkedArray)):
            arrays.append(c)
            continue
        if c.dtype == object:
            if name in ("record_type", "topic_id", "data_json", "error"):
                for i, r in zip(slow, ref, strict=True):
                    c[i] = r[name]
            arrays.append(pa.array(c, f.type))
        else:
            arrays.append(pa.array(c.astype(f.type.to_pandas_dtype(), copy=False), f.type))
    table = pa.RecordBatch.from_arrays(arrays, schema=RECORD_SCHEMA)
    if bad.num_rows or ba.tail is not None:
        extra = pa.RecordBatch.from_pylist(
            [{"batch_position": p, "error": e, "value": raw} for p, e, raw in zip(
                bad.column("position").to_pylist(), bad.column("error").to_pylist(),
                bad.column("raw").to_pylist(), strict=True)]
            + ([_tail_row(ba.tail)] if ba.tail is not None else []), schema=RECORD_SCHEMA)
        t = pa.Table.from_batches([table, extra]).combine_chunks()
        order = np.argsort(t.column("batch_position").to_numpy(), kind="stable")
        table = t.take(pa.array(order)).combine_chunks().to_batches()[0]
    return table


_I32 = struct.Struct(">i")
_LIST_TAGS = {0: "isr", 2: "replicas", 3: "removing_replicas", 4: "adding_replicas",
              6: "eligible_leader_replicas", 7: "last_known_elr"}
_PCR_DEFAULTS = {"isr": None, "leader": -2, "replicas": None, "removing_replicas": None, "adding_replicas": None,
                 "leader_recovery_state": -1, "directories": None, "eligible_leader_replicas": None,
                 "last_known_elr": None}


def _uv(v: bytes, p: int) -> tuple[int, int]:
    out = shift = 0
    while True:
        b = v[p]
        p += 1
        out |= (b & 0x7F) << shift
        if b < 0x80:
            return out, p
        shift += 7
        if shift > 28:
            raise ValueError("varint too long")


def _pcr_row(v: bytes) -> dict[str, Any] | None:
    """A PartitionChangeRecord row without the generic interpreter, for the well-formed shapes
    (known tags only, in order, exact sizes); None sends the row to :func:`_reference_row`."""
    try:
        version = v[2]
        if v[0] != 1 or version > 2 or len(v) < 24:
            return None
        d: dict[str, Any] = {"partition_id": _I32.unpack_from(v, 3)[0], "topic_id": uuid_to_str(v[7:23]),
                             **_PCR_DEFAULTS}
        n, p = _uv(v, 23)
        last = -1
        for _ in range(n):
            tag, p = _uv(v, p)
            size, p = _uv(v, p)
            end = p + size
            if tag <= last or end > len(v):
                return None
            last = tag
            if tag in _LIST_TAGS and (tag < 6 or version >= 2):
                c1, q = _uv(v, p)
                if c1 == 0 or q + 4 * (c1 - 1) != end:
                    return None
                d[_LIST_TAGS[tag]] = list(struct.unpack_from(f">{c1 - 1}i", v, q))
            elif tag == 1 and size == 4:
                d["leader"] = _I32.unpack_from(v, p)[0]
            elif tag == 5 and size == 1:
                d["leader_recovery_state"] = struct.unpack_from(">b", v, p)[0]
            elif tag == 8 and version >= 1:
                c1, q = _uv(v, p)
                if c1 == 0 or q + 16 * (c1 - 1) != end:
                    return None
                d["directories"] = [uuid_to_str(v[q + 16 * k:q + 16 * k + 16]) for k in range(c1 - 1)]
            else:
                return None
            p = end
        if p != len(v):
            return None
    except (IndexError, ValueError, struct.error):
        return None
    return {"api_key": PARTITION_CHANGE, "record_type": "PartitionChangeRecord", "version": version,
            "topic_id": d["topic_id"], "partition_id": d["partition_id"], "leader": d["leader"],
            "data_json": _dumps(d), "value": v, "error": None}


def _pcr_json(pid: np.ndarray, leader: np.ndarray, tids: np.ndarray) -> np.ndarray:
    """Canonical data_json of leader-only PartitionChangeRecords, built column-wise (keys sorted;
    fields of later versions appear at their defaults, as the schema interpreter gives them)."""
    return ('{"adding_replicas":null,"directories":null,"eligible_leader_replicas":null,"isr":null,'
            '"last_known_elr":null,"leader":' + leader.astype(str).astype(object)
            + ',"leader_recovery_state":-1,"partition_id":' + pid.astype(str).astype(object)
            + ',"removing_replicas":null,"replicas":null,"topic_id":"' + tids.astype(object) + '"}')


#: The ``partition_history`` columns as replay gives them (ingestion adds cluster/event_date).
HISTORY_SCHEMA = pa.schema([
    ("metadata_offset", pa.int64()),
    ("controller_ts", pa.int64()),
    ("raft_epoch", pa.int32()),
    ("topic", pa.string()),
    ("topic_id", pa.string()),
    ("partition", pa.int32()),
    ("leader", pa.int32()),
    ("leader_epoch", pa.int32()),
    ("partition_epoch", pa.int32()),
    ("replicas", pa.list_(pa.int32())),
    ("isr", pa.list_(pa.int32())),
    ("leader_recovery_state", pa.int8()),
    ("adding_replicas", pa.list_(pa.int32())),
    ("removing_replicas", pa.list_(pa.int32())),
    ("elr", pa.list_(pa.int32())),
    ("last_known_elr", pa.list_(pa.int32())),
    ("change", pa.string()),
    ("unclean", pa.bool_()),
    ("previous_leader", pa.int32()),
    ("previous_isr", pa.list_(pa.int32())),
    ("source", pa.string()),
    ("position", pa.int64()),
])


def history_arrow(rows: Sequence[HistoryRow]) -> pa.Table:
    """Replay rows as an Arrow table of :data:`HISTORY_SCHEMA`."""
    cols = {f.name: [getattr(r, f.name) for r in rows] for f in HISTORY_SCHEMA}
    return pa.Table.from_pydict(cols, schema=HISTORY_SCHEMA)
