"""Issue 18 item 2: a segment range is decoded in pieces of bounded decompressed size.

:func:`epochlib.records.iter_batches_arrow` must give exactly :func:`batches_arrow`'s rows, and no piece
may hold more than its budget plus one batch, however many small batches each inflate to just under the
per-batch cap. The ingest test measures a decoding process's peak RSS on such a segment (32 batches of
2 KB that each inflate to 64 MiB drove one Python worker to 4 GiB).
"""

from __future__ import annotations

import struct
import subprocess
import sys
import textwrap
from pathlib import Path

import pyarrow as pa
from hypothesis import given, settings
from hypothesis import strategies as st

from epochlib import records
from epochlib.records import NewRecord, batches_arrow, iter_batches_arrow

ROOT = Path(__file__).resolve().parent.parent


def _bombs(n: int, size: int, compression: str = "zstd") -> bytes:
    """``n`` copies of one batch whose single value inflates to ``size`` bytes (the base offset, outside
    the CRC, patched per copy)."""
    one = records.encode_batch([NewRecord(b"k", bytes(size), 1_709_251_200_000)], compression=compression)
    return b"".join(struct.pack(">q", i) + one[8:] for i in range(n))


def _mixed() -> bytes:
    parts = []
    for i in range(40):
        comp = ("none", "gzip", "zstd", "snappy", "lz4")[i % 5]
        recs = [NewRecord(b"k%d" % j, bytes(500 * (i % 7)) + b"v", 1000 + j) for j in range(3)]
        parts.append(records.encode_batch(recs, base_offset=i * 3, compression=comp))
    parts.insert(7, records.encode_legacy_message_set([NewRecord(b"a", b"b", 5)], base_offset=900, magic=1))
    bad = bytearray(parts[20])
    bad[-1] ^= 1  # a CRC mismatch: a bad entry in the middle
    parts[20] = bytes(bad)
    return b"".join(parts) + parts[3][:30]  # and a torn tail


MIXED = _mixed()


def _table(batches: list[pa.RecordBatch]) -> pa.Table:
    return pa.Table.from_batches(batches).combine_chunks()


@settings(max_examples=40, deadline=None)
@given(max_decoded=st.integers(1, 20_000), max_input=st.one_of(st.none(), st.integers(1, 30_000)))
def test_pieces_together_are_exactly_the_whole_decode(max_decoded, max_input):
    whole = batches_arrow(MIXED, base_position=11)
    pieces = list(iter_batches_arrow(MIXED, base_position=11, max_decoded=max_decoded, max_input=max_input))
    assert _table([p.batches for p in pieces]).equals(_table([whole.batches]))
    assert _table([p.records for p in pieces]).equals(_table([whole.records]))


def test_no_piece_holds_more_than_its_budget_plus_one_batch():
    size, budget = 3 << 20, 8 << 20
    seg = _bombs(16, size)
    assert len(seg) < 16 * 4096  # each batch is a few hundred bytes on disk
    held = [sum(len(v) for v in p.records.column("value").to_pylist()) for p in
            iter_batches_arrow(seg, max_decoded=budget)]
    assert sum(held) == 16 * size
    assert max(held) <= budget + size
    assert len(held) >= 16 * size // (budget + size)


def test_without_records_nothing_is_decompressed_and_there_is_one_piece():
    pieces = list(iter_batches_arrow(_bombs(4, 1 << 20), with_records=False, max_decoded=1))
    assert len(pieces) == 1 and pieces[0].batches.num_rows == 4 and pieces[0].records is None
    assert [p.batches.num_rows for p in iter_batches_arrow(b"")] == [0]


_PROBE = textwrap.dedent("""
    import resource, sys
    import pyarrow as pa
    from jobs.ingest import offsets_segments as segs
    from jobs.ingest.ranges import RANGE_SCHEMA
    src, size = sys.argv[1], int(sys.argv[2])
    rb = pa.RecordBatch.from_pylist([{"source": src, "size": size, "start": 0, "end": size, "target": size,
                                      "broker": "1", "log_partition": 0, "topic": "__consumer_offsets",
                                      "partition": 0, "snapshot_ms": None}], schema=RANGE_SCHEMA)
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    n = {"bad": 0}
    for fn in (segs.decode_segment_commits, segs.decode_segment_side):
        for b in fn(iter([rb])):
            if "row_kind" in b.schema.names:
                n["bad"] += sum(r["n_bad"] or 0 for r in b.to_pylist() if r["row_kind"] == "stats")
    print((resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - base) // 1024, n["bad"])
""")


def test_a_segment_of_small_batches_that_each_inflate_near_the_cap_keeps_a_worker_small(tmp_path):
    """16 batches of ~1 KB inflating to 16 MiB each (256 MiB in all): decoding the range through the
    mapInArrow functions must not hold them all: the process grew by 1164 MiB before the pieces, by ~170 MiB
    with them (32 MiB budget plus one batch, and their copies)."""
    p = tmp_path / "__consumer_offsets-0" / "00000000000000000000.log"
    p.parent.mkdir()
    p.write_bytes(_bombs(16, 16 << 20))
    out = subprocess.run([sys.executable, "-c", _PROBE, str(p), str(p.stat().st_size)], capture_output=True,
                         text=True, timeout=600, cwd=ROOT, check=True)
    growth_mib, n_bad = (int(x) for x in out.stdout.split())
    assert n_bad == 16  # each inflated value is no commit: one quarantined record each, no crash
    assert growth_mib < 400, f"peak RSS grew by {growth_mib} MiB decoding 256 MiB of inflated batches"
