"""``__consumer_offsets`` key/value arrays -> offsets rows, for one of the two decode passes.

Segments and key/value dumps both end in aligned ``key``/``value`` arrays; :func:`decode_kv` turns them
into rows with :func:`epochlib.coordinator.decode_offsets_arrow` (offset commits, vectorised) and the
per-record reference decoder (group metadata and KIP-848 records: few).

An offsets input yields two kinds of rows:

- :data:`COMMIT_PASS` emits only the non-transactional commits, already in the silver shape
  (:data:`~jobs.ingest._rows.COMMITS`): no per-record work, no quarantine, no counts;
- :data:`SIDE_PASS` emits everything else in :data:`~jobs.ingest._rows.OFFSETS_WORK`: transactional
  commits (their ``txn_state`` needs a window over markers), markers, group records, quarantine and
  stats rows, with the counts of *all* units;
- :data:`ONE_PASS` emits both from one decode: the pass whose task writes the commits' Parquet files
  itself (:mod:`.commit_files`, the delta-rs sink). Where Spark writes the commits (delta-spark) they
  come from the commit pass and the side rows from a second decode (cheaper than caching the wide rows).

:class:`Pass` holds what differs between them, so the decode functions take one explicit value
instead of branching on a mode string.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from epochlib import coordinator

from ._rows import (
    OFFSETS_WORK,
    RAW_MAX,
    RowBuffer,
    bad_value,
    commit_batch,
    make_batch,
    ms_in_range,
    repeat,
    side_row,
)

__all__ = ["COMMIT_PASS", "ONE_PASS", "SIDE_PASS", "Pass", "decode_kv", "group_row"]


def _arr(a: Any) -> pa.Array:
    return a.combine_chunks() if isinstance(a, pa.ChunkedArray) else a


def _is_tx(cols: Mapping[str, Any] | pa.RecordBatch, n: int) -> pa.Array:
    a = cols.get("is_transactional") if isinstance(cols, Mapping) else cols.column("is_transactional")
    if a is None:
        return pa.repeat(pa.scalar(False), n)
    return _arr(a).fill_null(False)


@dataclass(frozen=True, slots=True)
class Pass:
    """One decode pass over the offsets inputs: :data:`COMMIT_PASS`, :data:`SIDE_PASS`, or :data:`ONE_PASS`
    (both parts from one decode: the pass that writes the commits' files itself, :mod:`.commit_files`)."""

    side: bool
    """True for the side pass: quarantine, stats, markers and groups are produced (and counted)."""
    commits: bool = False
    """True when the non-transactional commits are produced too (in :data:`~._rows.COMMITS` shape)."""

    @property
    def parts(self) -> tuple[Pass, ...]:
        """The single passes this pass is made of (itself, or the commit pass then the side pass)."""
        return (COMMIT_PASS, SIDE_PASS) if self.side and self.commits else (self,)

    def commit_mask(self, is_commit: pa.Array, is_tx: pa.Array) -> pa.Array:
        """The commits a single pass keeps: transactional ones on the side, the others in the commit pass."""
        return pc.and_(is_commit, is_tx if self.side else pc.invert(is_tx))

    def commit_rows(self, cols: Mapping[str, Any], n: int) -> pa.RecordBatch:
        """Commit columns (:data:`OFFSETS_WORK` names) in a single pass's shape."""
        if self.side:
            return make_batch(OFFSETS_WORK, {**cols, "row_kind": repeat("commit", n, pa.string())}, n)
        return commit_batch(cols, n)

    def select(self, batch: pa.RecordBatch | None) -> Iterator[pa.RecordBatch]:
        """This pass's parts of a batch of :data:`OFFSETS_WORK` rows with every row kind (the text dumps
        build those): the non-transactional commits in :data:`~._rows.COMMITS` shape, the rest as they are."""
        if batch is None or not batch.num_rows:
            return
        is_commit = pc.equal(batch.column("row_kind"), "commit").fill_null(False)
        non_tx = pc.and_(is_commit, pc.invert(_is_tx(batch, batch.num_rows)))
        for part in self.parts:
            out = batch.filter(pc.invert(non_tx) if part.side else non_tx)
            if not out.num_rows:
                continue
            if part.side:
                yield out
            else:
                yield commit_batch(dict(zip(out.schema.names, out.columns, strict=True)), out.num_rows)


COMMIT_PASS = Pass(side=False, commits=True)
SIDE_PASS = Pass(side=True)
ONE_PASS = Pass(side=True, commits=True)


def decode_kv(keys: pa.Array, values: pa.Array, ctx_cols: Mapping[str, Any], p: Pass, *, unit: str,
              source: str) -> Iterator[tuple[pa.RecordBatch | None, int, int]]:
    """Decode aligned key/value arrays for pass ``p``; yields ``(batch, quarantined units, decoded rows)``.

    ``ctx_cols`` holds per-row context arrays (source, position, log offset …) aligned with the keys.
    The counts cover every row (both passes' rows), so the side pass's stats are complete; the commit
    pass ignores them.
    """
    keys, values = _arr(keys), _arr(values)
    dec = coordinator.decode_offsets_arrow(keys, values)
    ctx_arrays = {k: _arr(v) for k, v in ctx_cols.items()}
    err = _value_errors(dec, ctx_arrays)
    rtype = dec.column("record_type")
    n = dec.num_rows
    commit_mask = pc.and_(pc.is_null(err), pc.is_in(rtype, pa.array([0, 1], rtype.type))).fill_null(False)
    n_commit = pc.sum(commit_mask.cast(pa.int64())).as_py() or 0
    if n_commit:
        is_tx = _is_tx(ctx_arrays, n)
        good = n_commit  # counted once, with the first part
        for part in p.parts:
            mask = part.commit_mask(commit_mask, is_tx)
            want = pc.sum(mask.cast(pa.int64())).as_py() or 0
            if not want:
                yield None, 0, good
            else:
                yield _commit_rows(ctx_arrays, dec, None if want == n else mask, part), 0, good
            good = 0
    if not p.side or n_commit == n:
        return
    idx = np.flatnonzero(pc.invert(commit_mask).to_numpy(zero_copy_only=False))
    rows = RowBuffer(OFFSETS_WORK)
    n_bad = 0
    errs = err.to_pylist()
    for i in idx.tolist():
        ctx = {k: v[i].as_py() for k, v in ctx_arrays.items()}
        k, v = keys[i].as_py(), values[i].as_py()
        reason = errs[i]
        rec = None
        if reason is None:
            try:
                rec = coordinator.decode_record(k, v)
            except Exception as e:  # noqa: BLE001 - DecodeError by contract; anything else is quarantined too
                reason = getattr(e, "reason", None) or str(e)
        if rec is None:
            n_bad += 1
            raw = (k or b"") + (v or b"")
            log_offset = ctx.get("log_offset")
            where = f"record at log offset {log_offset}: " if log_offset is not None else ""
            rows.add(side_row(source, ctx.get("position"), unit, where + str(reason), raw[:RAW_MAX],
                              q_ms=ctx.get("record_ms"), broker=ctx.get("broker"),
                              log_partition=ctx.get("log_partition"), log_offset=log_offset))
            continue
        row = {**ctx, **group_row(rec)}
        why = bad_value(row, OFFSETS_WORK)
        if why is not None:  # e.g. a state timestamp no date can hold: a bad value of this record
            n_bad += 1
            rows.add(side_row(source, ctx.get("position"), unit, f"record at log offset {ctx.get('log_offset')}: "
                              f"{why}", ((k or b"") + (v or b""))[:RAW_MAX], q_ms=ctx.get("record_ms"),
                              broker=ctx.get("broker"), log_partition=ctx.get("log_partition"),
                              log_offset=ctx.get("log_offset")))
            continue
        rows.add(row)
    yield rows.flush(), n_bad, len(idx) - n_bad


def _value_errors(dec: pa.RecordBatch, ctx: Mapping[str, pa.Array]) -> pa.Array:
    """The decoder's ``error`` column, plus a reason for each otherwise good row holding a time that no
    date column can hold (a CRC-valid commit whose commitTimestamp is 2^62, a record timestamp of year
    146 million): such a row is a bad value of its unit and quarantined, in both passes alike."""
    err = dec.column("error")
    checks = [("commitTimestamp", dec.column("commit_timestamp")),
              ("expireTimestamp", dec.column("expire_timestamp"))]
    if ctx.get("record_ms") is not None:
        checks.append(("record timestamp", ctx["record_ms"]))
    found: dict[int, str] = {}
    for name, a in checks:
        a = _arr(a)
        ok = ms_in_range(a)
        if pc.all(ok).as_py():
            continue
        for i in np.flatnonzero(pc.invert(ok).to_numpy(zero_copy_only=False)).tolist():
            found.setdefault(i, f"{name} {a[i].as_py()} ms is outside 0001-01-01..9999-12-31")
    part = ctx.get("log_partition")
    if part is not None and pa.types.is_int64(part.type):  # Parquet dumps: the column may be wider than int32
        ok = pc.and_(pc.greater_equal(part, -(1 << 31)), pc.less(part, 1 << 31)).fill_null(True)
        for i in np.flatnonzero(pc.invert(ok).to_numpy(zero_copy_only=False)).tolist():
            found.setdefault(i, f"partition {part[i].as_py()} does not fit a 32-bit column")
    if not found:
        return err
    errs = err.to_pylist()
    for i, why in found.items():
        if errs[i] is None:
            errs[i] = why
    return pa.array(errs, pa.string())


def _commit_rows(ctx_arrays: dict[str, pa.Array], dec: pa.RecordBatch, mask: pa.Array | None,
                 p: Pass) -> pa.RecordBatch:
    """The commit rows selected by ``mask`` (all when None), in single pass ``p``'s shape."""
    sel = ctx_arrays if mask is None else {k: v.filter(mask) for k, v in ctx_arrays.items()}
    d = dec if mask is None else dec.filter(mask)
    cols = {
        **sel,
        "key_type": d.column("record_type"), "value_version": d.column("value_version"),
        "is_tombstone": d.column("is_tombstone"), "group_id": d.column("group_id"),
        "topic": d.column("topic"), "partition": d.column("partition"),
        "committed_offset": d.column("committed_offset"), "leader_epoch": d.column("leader_epoch"),
        "metadata": d.column("metadata"), "commit_ms": d.column("commit_timestamp"),
        "expire_ms": d.column("expire_timestamp"),
        "value_version_above_known": d.column("value_version_above_known"),
        "trailing_bytes": d.column("trailing_bytes"),
    }
    return p.commit_rows(cols, d.num_rows)


#: KIP-848 ``ConsumerGroupMemberMetadata``: one record (or tombstone) per member of a consumer group.
MEMBER_RECORD_TYPE = 5


def member_record_members(member_id: Any, value: Mapping[str, Any] | None) -> list[dict[str, Any]] | None:
    """``members`` of a KIP-848 member record: the one member it names (key ``member_id``; client id, host
    and instance id from the value, none on a tombstone), so the resets can fold the group's member set
    over its records (a tombstone = that member left). None without a member id."""
    if member_id is None:
        return None
    v = value or {}
    return [{"member_id": str(member_id), "group_instance_id": v.get("instance_id"),
             "client_id": v.get("client_id"), "client_host": v.get("client_host"), "assigned_partitions": []}]


def group_row(rec: coordinator.CoordinatorRecord) -> dict[str, Any]:
    """The ``group_metadata`` columns of a decoded non-commit coordinator record. ``members`` lists a
    classic record's members (``member_count`` their number) or a KIP-848 member record's one member
    (``member_count`` null: the record does not count the group)."""
    v = rec.value or {}
    members = None
    kip848 = None
    if rec.record_type == MEMBER_RECORD_TYPE:
        kip848 = member_record_members((rec.key or {}).get("member_id"), rec.value)
    if rec.record_type == 2 and v:
        members = []
        for m in v.get("members") or []:
            assigned = (m.get("assignment_decoded") or {}).get("assigned_partitions") or []
            members.append({
                "member_id": m.get("member_id"), "group_instance_id": m.get("group_instance_id"),
                "client_id": m.get("client_id"), "client_host": m.get("client_host"),
                "assigned_partitions": [{"topic": a.get("topic"), "partitions": list(a.get("partitions") or [])}
                                        for a in assigned],
            })
    state = v.get("current_state_timestamp")
    return {
        "row_kind": "group",
        "key_type": rec.record_type,
        "record_type": coordinator.snake_type_name(rec.record_type),
        "value_version": rec.value_version,
        "is_tombstone": rec.is_tombstone,
        "group_id": rec.group,
        "protocol_type": v.get("protocol_type"),
        "generation": v.get("generation") if rec.record_type == 2 else v.get("group_epoch", v.get("epoch")),
        "protocol": v.get("protocol"),
        "leader": v.get("leader"),
        "state_ms": state if isinstance(state, int) and state >= 0 else None,
        "member_count": len(members) if members is not None else None,
        "members": members if kip848 is None else kip848,
        "value_version_above_known": rec.version_above_known,
        "trailing_bytes": rec.trailing_bytes,
    }
