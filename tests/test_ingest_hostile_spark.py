"""Hostile and odd inputs end to end on the shared local[1] session (issue 18 items 1, 4, 7; issue 12
items 6, 7): poison lines between good ones, a symlink out of the root, an empty dump, a ``_schemas``
topic, a KIP-848 group epoch in a console dump, and line ranges small enough to need several tasks.

The run must finish (the CLI's exit 0: ``run_ingestion`` returns), land the good rows, quarantine each
bad unit once, reconcile its counts, and give the same rows whether files are read whole or in ranges.
"""

from __future__ import annotations

import base64
import json
import os
from collections import Counter
from pathlib import Path

import pyarrow.compute as pc
import pytest
from deltalake import DeltaTable
from fixtures_ingest import DAY1, T1, capture_line, commit_kv, metadata_body

from epochlib import protocol, records
from epochlib.records import NewRecord
from jobs.config import Config, Inputs, Output
from jobs.ingest import run_ingestion
from jobs.ingest.discover import EMPTY_FILE, LINK_BROKEN, LINK_OUTSIDE, NAME_NOT_UTF8, NOT_REGULAR

pytestmark = pytest.mark.spark

NESTED = "[" * 100_000


def _b64(b: bytes) -> str:
    return base64.b64encode(b).decode()


def _console(group: str, j: int, ts: int = T1, partition: int = 0) -> str:
    return json.dumps({"key": {"type": 1, "data": {"group": group, "topic": "orders", "partition": partition}},
                       "value": {"version": 3, "data": {"offset": j, "leaderEpoch": 5, "metadata": "",
                                                        "commitTimestamp": ts}}})


def build(base: Path) -> dict[str, str]:
    off, meta, logs = base / "offsets", base / "metadata", base / "logdirs"
    for d in (off, meta, logs):
        d.mkdir(parents=True)
    # a key/value JSONL dump: 6 good lines, 4 poison lines between them
    k, v = commit_kv("g-kv", "orders", 0, 1, 5, T1)
    good = json.dumps({"key": _b64(k), "value": _b64(v), "timestamp": T1})
    poison = [json.dumps({"key": _b64(k), "value": _b64(v), "timestamp": float("inf")}),  # Infinity
              json.dumps({"key": _b64(k), "value": _b64(v), "partition": 1 << 40}),
              json.dumps({"key": _b64(k), "value": _b64(v), "offset": 10**30}), NESTED]
    (off / "kv.jsonl").write_text("\n".join(x for p in poison for x in (good, p)) + "\n" + good + "\n" + good + "\n")
    # a console dump: 30 good commits, a commit at 2^62 ms, a partition of 2^40, a KIP-848 group epoch
    lines = [_console("g-console", j) for j in range(30)]
    lines.insert(10, _console("g-console", 99, ts=1 << 62))
    lines.insert(20, _console("g-console", 98, partition=1 << 40))
    lines.append('{"key":{"type":3,"data":{"groupId":"g-848"}},"value":{"version":0,"data":{"epoch":42}}}')
    (off / "console.txt").write_text("\n".join(lines) + "\n")
    # a segment: 4 good commits and a CRC-valid one whose commitTimestamp is 2^62
    seg = off / "broker=1" / "__consumer_offsets-0" / "00000000000000000000.log"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(b"".join(records.encode_batch(
        [NewRecord(*commit_kv("g-seg", "orders", 0, i, 5, (1 << 62) if i == 2 else T1), T1)], base_offset=i)
        for i in range(5)))
    (off / "empty.jsonl").write_text("")
    outside = base / "elsewhere"
    outside.mkdir()
    (outside / "secret.txt").write_text(_console("g-outside", 1) + "\n")
    os.symlink(outside / "secret.txt", off / "linked.txt")
    os.symlink(outside / "gone.log", seg.parent / "00000000000000000005.log")  # a segment that is not there
    if hasattr(os, "mkfifo"):
        os.mkfifo(seg.parent / "00000000000000000009.log")  # never opened: it would block the driver
    with open(os.fsencode(off) + b"/dump\xff.txt", "w") as fh:  # a name no table can hold
        fh.write(_console("g-bad-name", 1) + "\n")
    # captures: 20 good lines (2 partitions each), a ts of Infinity and one of 2^62
    resp = protocol.encode_metadata_response(metadata_body(4), 9, 100)
    cap = [capture_line(T1 + j, "c", "b1:9092", 9, resp) for j in range(20)]
    cap.insert(5, capture_line(T1, "c", "b1:9092", 9, resp).replace(f'"ts": {T1}', '"ts": Infinity'))
    cap.insert(15, capture_line(1 << 62, "c", "b1:9092", 9, resp))
    (meta / "cap.jsonl").write_text("\n".join(cap) + "\n")
    # a _schemas topic in a log-dir snapshot
    part = logs / "broker=1" / "snapshot=20240301T020000Z" / "_schemas-0"
    part.mkdir(parents=True)
    (part / "leader-epoch-checkpoint").write_text("0\n1\n3 0\n")
    return {"offsets": str(off), "metadata": str(meta), "logdirs": str(logs)}


def _read(root: str, table: str):
    return DeltaTable(f"{root}/{table}").to_pyarrow_table()


@pytest.fixture(scope="module")
def runs(spark, tmp_path_factory):
    base = tmp_path_factory.mktemp("hostile")
    paths = build(base / "in")
    out = {}
    for name, split in (("whole", 64 << 20), ("ranges", 600)):
        cfg = Config(cluster="test", inputs=Inputs(**paths), output=Output(root=str(base / name)))
        out[name] = (run_ingestion(spark, cfg, DAY1, DAY1, split_bytes=split), str(base / name))
    return paths, out


def test_poison_values_are_quarantined_and_the_good_rows_land(runs):
    _, out = runs
    result, root = out["whole"]
    commits = _read(root, "offset_commits")
    by_group = Counter(commits.column("group_id").to_pylist())
    assert by_group == {"g-kv": 6, "g-console": 30, "g-seg": 4}
    obs = _read(root, "metadata_observations")
    assert obs.num_rows == 40
    q = _read(root, "quarantine")
    kinds = Counter(zip(q.column("source_kind").to_pylist(), q.column("unit").to_pylist(), strict=True))
    assert kinds == {("offsets", "line"): 6, ("offsets", "record"): 1, ("metadata", "line"): 2,
                     ("offsets", "file"): 4 if hasattr(os, "mkfifo") else 3}  # the entries it could not read
    reasons = " | ".join(q.column("reason").to_pylist())
    assert "outside 0001-01-01..9999-12-31" in reasons and "does not fit a 32-bit column" in reasons
    for c in result.counts:
        assert c.units_read == c.units_decoded + c.units_quarantined
    assert result.count("offsets", "line").units_quarantined == 6
    assert result.count("metadata", "line").units_read == 22


def test_kip848_group_epoch_reaches_group_metadata_from_a_console_dump(runs):
    _, out = runs
    g = _read(out["whole"][1], "group_metadata")
    rows = [r for r in g.to_pylist() if r["group_id"] == "g-848"]
    assert [(r["record_type"], r["generation"]) for r in rows] == [("consumer_group_metadata", 42)]


def test_what_could_not_be_read_is_quarantined_and_empty_files_counted(runs):
    """A link out of the root, a broken link, a FIFO named like a segment and a name that is not UTF-8 are not
    read: each is a quarantine row with its reason (the offsets source is then partial, not ok)."""
    _, out = runs
    result, root = out["whole"]
    groups = set(_read(root, "offset_commits").column("group_id").to_pylist())
    assert "g-outside" not in groups and "g-bad-name" not in groups
    assert result.skipped == {}
    assert result.empty == {"offsets": {EMPTY_FILE: 1}}
    q = [r for r in _read(root, "quarantine").to_pylist() if r["unit"] == "file"]
    assert sorted((r["source"].rsplit("/", 1)[-1], r["reason"]) for r in q) == sorted([
        ("linked.txt", f"not read: {LINK_OUTSIDE}"), ("00000000000000000005.log", f"not read: {LINK_BROKEN}"),
        ("dump\\xff.txt", f"not read: {NAME_NOT_UTF8}"),
        *([("00000000000000000009.log", f"not read: {NOT_REGULAR}")] if hasattr(os, "mkfifo") else [])])
    files = result.count("offsets", "file")
    assert files.units_quarantined == len(q) and files.units_read == len(q)


def test_a_topic_starting_with_an_underscore_is_decoded(runs):
    _, out = runs
    lineage = _read(out["whole"][1], "epoch_lineage")
    assert lineage.column("topic").to_pylist() == ["_schemas"]


def test_line_ranges_give_the_rows_of_the_whole_read_in_several_tasks(spark, runs):
    paths, out = runs
    (whole, wroot), (split, sroot) = out["whole"], out["ranges"]
    for table, key in (("offset_commits", ["group_id", "position", "committed_offset"]),
                       ("metadata_observations", ["position", "partition"]),
                       ("group_metadata", ["group_id", "position"]),
                       ("quarantine", ["source", "position", "reason"])):
        a = _read(wroot, table).drop_columns(["run_id"] if table == "quarantine" else [])
        b = _read(sroot, table).drop_columns(["run_id"] if table == "quarantine" else [])
        idx = [(k, "ascending") for k in key]
        assert a.sort_by(idx).equals(b.sort_by(idx)), table
    assert [(c.source_kind, c.unit, c.units_read, c.units_quarantined) for c in whole.counts] == \
        [(c.source_kind, c.unit, c.units_read, c.units_quarantined) for c in split.counts]
    from jobs.ingest.discover import discover
    from jobs.ingest.lines import line_ranges_frame

    inv = discover(paths["offsets"], None, paths["metadata"])
    frame = line_ranges_frame(spark, inv.of("offsets", "text") + inv.of("metadata", "jsonl"), split_bytes=600,
                              parallelism=1)
    assert frame.count() >= 10  # the console dump and the capture, each cut into several ranges
    assert pc.min(_read(sroot, "metadata_observations").column("position")).as_py() == 1
