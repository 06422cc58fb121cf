"""The offsets pass whose tasks write the ``offset_commits`` Parquet files themselves (delta-rs sink).

Each task decodes its segment range or dump once (:data:`._kv.ONE_PASS`) and writes the non-transactional
commits with pyarrow into the sink's staging folder, and every other row (transactional commits, markers,
groups, quarantine, stats) as side rows (:mod:`.pass_files`). Without this, the second decode of every input
for the side rows took a pass of its own.

The transactional commits take their ``txn_state`` from the next COMMIT/ABORT marker of their producer in the
same ``__consumer_offsets`` partition, which may lie in another task's range or segment. One task reads the
side files' transactional rows with pyarrow, resolves them (:func:`transactional_commits_arrow`) and writes
them into the same staging folder; above :data:`MAX_TX_ROWS` side rows Spark's window does it
(:func:`.offsets.transactional_commits`), handed back to the sink to write. The window took ~10 task-s for
the 10 M bench run's 204 k transactional commits, most of it on one core at the end of the ingestion
(BENCHMARKS.md, issue 16 thirteenth round); the one task takes ~1 s.
"""

from __future__ import annotations

import datetime as dt
import hashlib
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ._rows import COMMITS, OFFSETS_WORK, commit_batch
from .pass_files import WRITTEN, Decode, PassFiles, RangeFiles, escape_partition_value, event_days

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .discover import InputFile

__all__ = ["MAX_TX_ROWS", "CommitFiles", "transactional_commits_arrow"]

#: Above this many side rows (transactional commits and markers among them) Spark's window gives the
#: transactional commits their state: the one task holds the transactional rows in memory (~200 bytes each).
MAX_TX_ROWS = 1 << 22
#: The side columns the resolution reads: every commit column and what picks the transactional rows (not the
#: quarantine, stats and group-record columns).
_TX_COLUMNS = [f.name for f in OFFSETS_WORK if f.name not in (
    "raw", "reason", "unit", "q_ms", "n_read", "n_bad", "n_out", "n_unpaired", "record_type", "protocol_type",
    "generation", "protocol", "leader", "state_ms", "member_count", "members")]
_STATE = {"COMMIT": "committed", "ABORT": "aborted"}


def _codes(a: pa.ChunkedArray | pa.Array) -> np.ndarray:
    """Dense int64 codes of a column's values, null a value of its own (as Spark's window partitions)."""
    enc = pc.dictionary_encode(a, null_encoding="encode")
    if isinstance(enc, pa.ChunkedArray):
        enc = enc.combine_chunks()
    return enc.indices.to_numpy(zero_copy_only=False).astype(np.int64)


def _transactional(side: pa.Table) -> pa.Array:
    """Which side rows are transactional commits or markers."""
    return pc.and_(pc.is_in(side.column("row_kind"), pa.array(["commit", "marker"])),
                   pc.fill_null(side.column("is_transactional"), False)).fill_null(False)


def transactional_commits_arrow(side: pa.Table) -> pa.RecordBatch:
    """The side rows' transactional commits in :data:`~._rows.COMMITS` shape, each with the state of the first
    COMMIT/ABORT marker after it (higher log offset) of the same producer in the same ``__consumer_offsets``
    partition and replica (``broker``): ``committed``, ``aborted``, ``open`` when there is none yet (or its
    control type is another one). The rows of :func:`.offsets.transactional_commits` (Spark's window, which
    orders a null log offset before every other and skips markers without a control type), with numpy.

    ``side`` holds :data:`~._rows.OFFSETS_WORK` columns (any row kinds; at least the commit columns,
    ``row_kind``, ``is_transactional`` and ``control_type``). Rows of one producer at one offset (only divergent
    copies of a log without a broker can give them) are not ordered by Spark's window: here a marker at the
    commit's own offset does not count, and of two markers at one offset the first in ``side`` does."""
    t = side.filter(_transactional(side))
    n = t.num_rows
    if n == 0:
        return pa.RecordBatch.from_pylist([], schema=COMMITS)
    # a null offset before every other (Spark's descending order puts nulls last)
    off = pc.fill_null(t.column("log_offset").cast(pa.int64()), np.iinfo(np.int64).min).to_numpy(
        zero_copy_only=False)
    ctrl = t.column("control_type")
    is_marker = pc.and_(pc.equal(t.column("row_kind"), "marker"), pc.is_valid(ctrl)).fill_null(False)
    is_marker = is_marker.to_numpy(zero_copy_only=False)
    broker, part, pid = (_codes(t.column(c)) for c in ("broker", "log_partition", "producer_id"))
    # by (replica, log partition, producer), then offset; at an offset the markers after the commits
    order = np.lexsort((is_marker, off, pid, part, broker))
    broker, part, pid, off, is_marker = broker[order], part[order], pid[order], off[order], is_marker[order]
    new_key = np.r_[True, (broker[1:] != broker[:-1]) | (part[1:] != part[:-1]) | (pid[1:] != pid[:-1])]
    key = np.cumsum(new_key)
    # the first position after each row's (key, offset) block: a marker there or later is strictly after it
    new_block = new_key | np.r_[True, off[1:] != off[:-1]]
    starts = np.flatnonzero(new_block)
    block_end = np.r_[starts[1:], n][np.cumsum(new_block) - 1]
    # the nearest marker at or after each position (n: none)
    nxt = np.minimum.accumulate(np.where(is_marker, np.arange(n), n)[::-1])[::-1]
    nxt = np.r_[nxt, n]
    m = nxt[block_end]
    found = m < n
    found[found] = key[m[found]] == key[found]
    ctrl_sorted = ctrl.take(pa.array(order)).to_numpy(zero_copy_only=False)
    state = np.full(n, "open", dtype=object)
    state[found] = [_STATE.get(c, "open") for c in ctrl_sorted[m[found]]]
    commit = ~is_marker & (pc.equal(t.column("row_kind"), "commit").fill_null(False)
                           .to_numpy(zero_copy_only=False)[order])
    rows = t.take(pa.array(order[commit]))
    out = commit_batch(dict(zip(rows.column_names, rows.columns, strict=True)), rows.num_rows)
    return out.set_column(COMMITS.get_field_index("txn_state"), COMMITS.field("txn_state"),
                          pa.array(state[commit], pa.string()))


def _tx_task(staging: str, side_files: list[str], *, cluster: str, days: tuple[dt.date, dt.date],
             default_date: dt.date, file_schema: pa.Schema) -> Decode:
    """``mapInArrow`` over one row: the transactional commits of the side files, resolved and written into
    ``staging`` as the pass's tasks write their commits (one file per date, the days' rows only)."""
    lo, hi = ((d - dt.date(1970, 1, 1)).days for d in days)
    key = "txn-" + hashlib.sha1("\n".join(sorted(side_files)).encode()).hexdigest()[:20]

    def run(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow.parquet as pq

        from jobs.fs import filesystem

        for _ in batches:
            pass
        fs, base = filesystem(staging)
        parts = []
        for path in side_files:
            with fs.open_input_file(path) as fh:
                pf = pq.ParquetFile(fh)
                cols = [c for c in _TX_COLUMNS if c in pf.schema_arrow.names]
                for g in range(pf.num_row_groups):
                    rg = pf.read_row_group(g, columns=cols, use_threads=False)
                    parts.append(rg.filter(_transactional(rg)))
        side = pa.concat_tables(parts) if parts else OFFSETS_WORK.empty_table()
        commits = transactional_commits_arrow(side)
        out = RangeFiles(fs, base.rstrip("/"), f"cluster={escape_partition_value(cluster)}", key, file_schema,
                         OFFSETS_WORK)
        try:
            if commits.num_rows:
                out.rows_of(commits, event_days(commits.column("event_ts"), default_date), lo, hi)
            yield out.close()
        except BaseException:
            out.abort()
            raise

    return run


class CommitFiles(PassFiles):
    """The offsets inputs as a :class:`jobs.sink.FileSource` of ``offset_commits``; :attr:`side` holds the
    side rows (``OFFSETS_WORK``) once the sink has staged it."""

    side_schema = OFFSETS_WORK

    def __init__(self, spark: SparkSession, files: list[InputFile], *, cluster: str, days: tuple[dt.date, dt.date],
                 default_date: dt.date, dated: Callable[[DataFrame], DataFrame], split_bytes: int,
                 parallelism: int) -> None:
        super().__init__(spark, cluster=cluster, days=days, default_date=default_date)
        self.files, self.dated, self.split_bytes, self.parallelism = files, dated, split_bytes, parallelism

    def frames(self) -> list[tuple[DataFrame, Decode]]:
        from . import offsets

        return [(frame, both) for frame, _, _, both in offsets.input_frames(
            self._spark, self.files, split_bytes=self.split_bytes, parallelism=self.parallelism)]

    def after(self, staging: str, file_schema: pa.Schema) -> DataFrame | None:
        """The transactional commits, when the pass met any: written here by one task (the side rows are at
        most :data:`MAX_TX_ROWS`), else Spark's window's rows (dated) for the sink to write."""
        from . import offsets
        from ._spark import to_spark_schema

        if not sum(w["tx"] for w in self.written):
            return None
        side_files = [w for w in self.written if w["kind"] == "side"]
        if sum(w["rows"] for w in side_files) <= MAX_TX_ROWS:
            fn = _tx_task(staging, [w["path"] for w in side_files], cluster=self.cluster, days=self.days,
                          default_date=self.default_date, file_schema=file_schema)
            rows = self._spark.range(1, numPartitions=1).mapInArrow(fn, to_spark_schema(WRITTEN)).collect()
            self.written += [r.asDict() for r in rows]
            return None
        assert self.side is not None
        return self.dated(offsets.transactional_commits(self.side))
