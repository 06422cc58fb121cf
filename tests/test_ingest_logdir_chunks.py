"""Log-dir checkpoint files travel to the executors in chunks (issue 16 item 3): same rows, same counts."""

from __future__ import annotations

import pyarrow as pa
from fixtures_ingest import build_inputs

from epochlib import checkpoint
from jobs.ingest import discover as disc
from jobs.ingest import logdirs as ld
from jobs.ingest._spark import rows_of


def _decode(batches: list[pa.RecordBatch]) -> tuple[list[dict], list[int]]:
    rows = [r for b in ld.decode_logdir_files(iter(batches)) for r in b.to_pylist()]
    stats = [r for r in rows if r["row_kind"] == "stats"]
    totals = [sum(r[k] for r in stats) for k in ("n_read", "n_bad", "n_out")]
    return sorted((r for r in rows if r["row_kind"] != "stats"), key=repr), totals


def test_chunked_files_decode_to_the_rows_and_counts_of_one_row_per_file(tmp_path, monkeypatch):
    paths, _ = build_inputs(tmp_path)
    snap = next((tmp_path / "logdirs").rglob("snapshot=*"))
    extra = snap / "extra.topic-0"
    extra.mkdir()
    (extra / "leader-epoch-checkpoint").write_text("0\n2\n0 0\n")  # says 2 entries, has 1: quarantined
    (extra / "partition.metadata").write_text(checkpoint.format_partition_metadata("q1Yk3QGkT7eM0aZ1b2c3dA"))
    files = disc.discover(logdirs=paths["logdirs"]).of("logdirs", disc.LEC, disc.PMETA, disc.ROOT_CKPT)
    assert len(files) >= 8
    per_file = pa.RecordBatch.from_pylist(rows_of(files, ld.FILE_SCHEMA), schema=ld.FILE_SCHEMA)
    want_rows, want_totals = _decode([per_file])
    assert want_totals[0] == len(files) and want_totals[1] >= 1  # the fixture's broken files and ours

    monkeypatch.setattr(ld, "FILES_PER_CHUNK", 3)
    chunks = ld.file_chunks(files, parallelism=1)
    assert len(chunks) == -(-len(files) // 3)  # no chunk above FILES_PER_CHUNK files
    assert len(ld.file_chunks(files[:5], parallelism=8)) == 5  # at most one file per chunk, then
    batch = pa.RecordBatch.from_pylist([{"chunk": c, "files": b} for c, b in chunks], schema=ld.CHUNK_SCHEMA)
    got_rows, got_totals = _decode([batch.slice(0, 2), batch.slice(2)])
    assert got_rows == want_rows
    assert got_totals == want_totals
    quarantined = [r["source"].split("/")[-2] for r in got_rows if r["row_kind"] == "quarantine"]
    assert len(quarantined) == want_totals[1] and "extra.topic-0" in quarantined
