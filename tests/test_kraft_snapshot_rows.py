"""A KRaft snapshot's rows in ``partition_history`` are stored once: nightly runs over one metadata-log copy re-read
the same ``<end offset>-<epoch>.checkpoint`` every night, and each stored another copy of its rows under its own
first day (the table and every reader's time grew by one snapshot a night). A new snapshot still gets its rows."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest
from fixtures_kraft import TID, T, metadata_log

from epochlib.kraft.codec import iter_batches
from epochlib.kraft.snapshot import encode_snapshot
from jobs.config import parse_config
from jobs.ingest import run_ingestion
from jobs.sink import read_table_arrow

pytestmark = pytest.mark.spark

D1, D2, D3 = dt.date(2024, 5, 1), dt.date(2024, 5, 2), dt.date(2024, 5, 3)


def _partition(p: int, leader: int, epoch: int, isr: list[int]) -> tuple:
    return (3, 0, {"partition_id": p, "topic_id": TID, "replicas": [1, 2, 3], "isr": isr, "leader": leader,
                   "leader_epoch": epoch, "partition_epoch": epoch})


def _copy(folder: Path, start: int, image: list[tuple], last_ts: int, end: int | None = None) -> None:
    """One node's ``__cluster_metadata-0`` as ``rsync --delete`` leaves it: the fixture log from offset ``start`` on
    (its batches start at offsets 0, 1, 4, 5, 6, 7, 8, 10), up to offset ``end`` (a copy collected then), and the
    snapshot ending there."""
    log = metadata_log(3)
    batches = [log[b.position:b.position + b.size] for b in iter_batches(log)]
    firsts = [0, 1, 4, 5, 6, 7, 8, 10]
    d = folder / "node1" / "__cluster_metadata-0"
    d.mkdir(parents=True, exist_ok=True)
    for old in d.iterdir():
        old.unlink()
    (d / f"{start:020d}.log").write_bytes(b"".join(
        b for b, f in zip(batches, firsts, strict=True) if f >= start and (end is None or f < end)))
    (d / f"{start:020d}-{1:010d}.checkpoint").write_bytes(encode_snapshot(
        [(2, 0, {"name": "orders", "topic_id": TID}), *image], epoch=1, last_contained_timestamp=last_ts,
        timestamp=last_ts + 1_000))


def _snapshot_rows(cfg) -> list[tuple]:
    rows = read_table_arrow("partition_history", cfg, cluster="kr").to_pylist()
    return sorted((r["event_date"].isoformat(), r["metadata_offset"], r["partition"] if r["partition"] is not None
                   else -1) for r in rows if r["change"] == "snapshot")


def test_nightly_runs_over_one_snapshot_store_its_rows_once_and_a_new_snapshot_adds_its_own(
        spark, tmp_path: Path) -> None:
    cm = tmp_path / "cluster_metadata"
    # the snapshot at offset 4: orders created with partitions 0 (leader 1) and 1 (leader 2), epoch 0
    _copy(cm, 4, [_partition(0, 1, 0, [1, 2, 3]), _partition(1, 2, 0, [1, 2, 3])], T + 1_000)
    cfg = parse_config({"cluster": "kr", "inputs": {"cluster_metadata": str(cm)},
                        "output": {"root": str(tmp_path / "out")}})
    first = [("2024-05-01", 3, -1), ("2024-05-01", 3, 0), ("2024-05-01", 3, 1)]
    run_ingestion(spark, cfg, D1, D1)
    assert _snapshot_rows(cfg) == first
    run_ingestion(spark, cfg, D2, D2)  # the next night, the same copy: no second copy of the snapshot's rows
    assert _snapshot_rows(cfg) == first
    run_ingestion(spark, cfg, D2, D2)  # a rerun of that night
    run_ingestion(spark, cfg, D1, D1)  # a rerun of the first night writes its rows again (its dates are replaced)
    assert _snapshot_rows(cfg) == first
    # the html report's timeline still finds the partition's state at the start of a later range (its leader epoch
    # before the range's first change), as when every night stored the snapshot
    from jobs.html_report import _partition_history

    hist = _partition_history(cfg, D2, D2, [("orders", 0)], None)[("orders", 0)].to_pylist()
    assert [(r["change"], r["leader_epoch"]) for r in hist] == [("snapshot", 0)]

    # the log cleaned to offset 8 and a snapshot there (p0 led by 1 in epoch 2, p1 by 3 in epoch 1): its rows are new
    _copy(cm, 8, [_partition(0, 1, 2, [1, 2, 3]), _partition(1, 3, 1, [3])], T + 40_000)
    run_ingestion(spark, cfg, D3, D3)
    assert _snapshot_rows(cfg) == [*first, ("2024-05-03", 7, -1), ("2024-05-03", 7, 0), ("2024-05-03", 7, 1)]


def test_a_backfill_before_the_first_stored_copy_stores_its_own(spark, tmp_path: Path) -> None:
    """Day 2 run first, then day 1 (a backfill; or a rerun of day 1 over tables an earlier version wrote a copy a
    night into): a copy dated after the range counted as stored, so day 1 got none, and the HTML timeline of day 1,
    which takes a partition's starting state from the last snapshot stored before or in its range, lost the
    partition's first leader change (6 markers where there were 14)."""
    cm = tmp_path / "cluster_metadata"
    _copy(cm, 4, [_partition(0, 1, 0, [1, 2, 3]), _partition(1, 2, 0, [1, 2, 3])], T + 1_000)
    cfg = parse_config({"cluster": "kr", "inputs": {"cluster_metadata": str(cm)},
                        "output": {"root": str(tmp_path / "out")}})
    run_ingestion(spark, cfg, D2, D2)
    run_ingestion(spark, cfg, D1, D1)
    assert [r for r in _snapshot_rows(cfg) if r[0] == "2024-05-01"] == [
        ("2024-05-01", 3, -1), ("2024-05-01", 3, 0), ("2024-05-01", 3, 1)]
    from jobs.html_report import _partition_history

    hist = _partition_history(cfg, D1, D1, [("orders", 0)], None)[("orders", 0)].to_pylist()
    assert ("snapshot", 0) in [(r["change"], r["leader_epoch"]) for r in hist]


def _changes(cfg, day: dt.date) -> list[tuple]:
    """``partition_history``'s changes of ``day`` (not its ``log_end`` row: how far the run's copy reached), without
    the folder of the copy they were read from."""
    rows = read_table_arrow("partition_history", cfg, cluster="kr").to_pylist()
    return sorted(tuple(sorted((k, str(v)) for k, v in r.items() if k != "source")) for r in rows
                  if r["event_date"] == day and r["change"] != "log_end")


def test_a_day_stored_from_a_copy_that_ended_mid_day_is_completed_by_the_next_run(spark, tmp_path: Path) -> None:
    """The common night: the copy collected on day 1 ends mid-day (offset 7, T+40 s), the run of day 1 stores what it
    holds; the next night's run (day 2) replays day 1's later changes (the expansion at 8-9, p0's epoch 3 at 10).
    They were never written (each stored day was taken for whole), and a --reports-only run read a history without
    them (false K1 errors on the epochs assigned there)."""
    image = [_partition(0, 1, 0, [1, 2, 3]), _partition(1, 2, 0, [1, 2, 3])]
    cm, whole = tmp_path / "cluster_metadata", tmp_path / "whole"
    _copy(cm, 4, image, T + 1_000, end=8)
    _copy(whole, 4, image, T + 1_000)
    cfg = parse_config({"cluster": "kr", "inputs": {"cluster_metadata": str(cm)},
                        "output": {"root": str(tmp_path / "out")}})
    one = parse_config({"cluster": "kr", "inputs": {"cluster_metadata": str(whole)},
                        "output": {"root": str(tmp_path / "one")}})
    run_ingestion(spark, cfg, D1, D1)
    assert max(int(dict(r)["metadata_offset"]) for r in _changes(cfg, D1)) == 7  # the copy's last change
    _copy(cm, 4, image, T + 1_000)  # the next night's copy holds the rest of day 1
    second = run_ingestion(spark, cfg, D2, D2)
    run_ingestion(spark, one, D1, D2)  # one run over both days, from the whole copy
    def offsets(c) -> list[int]:
        return sorted(int(dict(r)["metadata_offset"]) for r in _changes(c, D1))

    assert offsets(cfg) == offsets(one) == [3, 3, 3, 4, 5, 6, 7, 8, 9, 10]  # the snapshot's rows, then the changes
    assert _changes(cfg, D1) == _changes(one, D1)  # the missing changes added, none stored twice
    assert len(_changes(cfg, D1)) == len(set(_changes(cfg, D1)))
    assert [i for i in second.infos if "lacked" in i] == [
        "cluster_metadata: partition_history lacked changes of stored days that the metadata log holds (an earlier "
        "run's copy ended before them); added 3 of 2024-05-01"]
    assert _snapshot_rows(cfg) == [("2024-05-01", 3, -1), ("2024-05-01", 3, 0), ("2024-05-01", 3, 1)]  # still once
    again = run_ingestion(spark, cfg, D2, D2)  # a rerun: nothing lacks, nothing is added
    assert not [i for i in again.infos if "lacked" in i] and _changes(cfg, D1) == _changes(one, D1)
