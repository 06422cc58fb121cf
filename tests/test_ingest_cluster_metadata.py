"""The executor side of the metadata-log ingestion without Spark: discovery, per-file decoding (binary and
dump text alike), quarantine of bad batches, the one-task replay with node copies merged."""

from __future__ import annotations

from pathlib import Path

import pyarrow as pa
import pytest
from fixtures_kraft import TID, T, metadata_log
from fixtures_segments import LONG_MAX, NOOP, kp_batch

from epochlib.kraft.dumptext import format_dump
from epochlib.records import scan_batch_boundaries
from jobs.fs import list_files
from jobs.ingest import cluster_metadata as cm
from jobs.ingest.discover import InputFile, Inventory


def _work(files: list[InputFile]) -> pa.Table:
    rows = [{"source": f.source, "size": f.size, "form": f.form, "name": f.name} for f in files]
    return pa.Table.from_batches(list(cm.decode_files(iter([pa.RecordBatch.from_pylist(rows, schema=cm.FILE_SCHEMA)]))),
                                 schema=cm.WORK)


def _replay(work: pa.Table) -> pa.Table:
    return pa.Table.from_batches(list(cm.replay_records(iter(work.to_batches()))), schema=cm.HISTORY_WORK)


def test_discovery_takes_segments_snapshots_and_dumps_and_ignores_the_rest(tmp_path: Path) -> None:
    d = tmp_path / "n1" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    for name in ("00000000000000000000.log", "00000000000000000100-0000000001.checkpoint", "00000000000000000000.index",
                 "quorum-state", "partition.metadata"):
        (d / name).write_bytes(b"x")
    (tmp_path / "orders-0").mkdir()
    (tmp_path / "orders-0" / "00000000000000000000.log").write_bytes(b"x")  # another topic of a whole data dir
    (tmp_path / "dump.txt").write_text("x")
    (tmp_path / "notes.md").write_text("x")
    inv = cm.classify_cluster_metadata(list_files(str(tmp_path)))
    assert sorted((f.form, f.name) for f in inv.files) == [
        ("kraft_dump", "dump.txt"), ("kraft_segment", "00000000000000000000.log"),
        ("kraft_snapshot", "00000000000000000100-0000000001.checkpoint")]
    assert [u.source.rsplit("/", 1)[-1] for u in inv.unrecognised] == ["notes.md"]
    assert len(inv.ignored) == 4
    # inside log-dir snapshots: the __cluster_metadata-0 segment (a logdirs segment) and snapshot (ignored there)
    logdirs = Inventory(files=[InputFile("logdirs", "segment", "/l/broker=1/snapshot=x/__cluster_metadata-0/"
                                         "00000000000000000000.log", 9, topic="__cluster_metadata", partition=0,
                                         name="00000000000000000000.log"),
                               InputFile("logdirs", "segment", "/l/broker=1/snapshot=x/orders-0/00000000000000000000.log",
                                         9, topic="orders", partition=0, name="00000000000000000000.log")],
                        ignored=[("logdirs", "/l/broker=1/snapshot=x/__cluster_metadata-0/"
                                             "00000000000000000007-0000000001.checkpoint")])
    assert [(f.kind, f.form) for f in cm.from_logdirs(logdirs)] == [("cluster_metadata", "kraft_segment"),
                                                                    ("cluster_metadata", "kraft_snapshot")]


def test_binary_and_dump_text_give_the_same_history_and_bad_batches_are_quarantined(tmp_path: Path) -> None:
    log = metadata_log(3)
    seg = tmp_path / "a" / "__cluster_metadata-0" / "00000000000000000000.log"
    seg.parent.mkdir(parents=True)
    broken = bytearray(log[scan_batch_boundaries(log)[-1][0]:])  # a copy of the last batch, its CRC failing
    broken[-1] ^= 0xFF
    # after the good batches: a bad batch, then a batch cut short by the end of the file (a live copy)
    seg.write_bytes(log + bytes(broken) + b"\x00" * 7 + log[12:40])
    dump = tmp_path / "dump.txt"
    dump.write_text(format_dump(log, "/x/__cluster_metadata-0/00000000000000000000.log"))
    bin_work = _work([InputFile("cluster_metadata", cm.KSEGMENT, str(seg), seg.stat().st_size,
                                name=seg.name)])
    q = [r for r in bin_work.to_pylist() if r["row_kind"] == "quarantine"]
    stats = [r for r in bin_work.to_pylist() if r["row_kind"] == "stats"]
    assert len(q) == 1 and q[0]["unit"] == "batch" and "crc" in q[0]["reason"].lower()
    # 8 batches + the bad one; 11 records; the cut final batch is no unit, but counted as a limit of the copy
    assert [(s["unit"], s["n_read"], s["n_bad"], s["n_out"], s["n_unpaired"]) for s in stats] == [
        ("batch", 9, 1, 11, 1)]
    text_work = _work([InputFile("cluster_metadata", cm.KDUMP, str(dump), dump.stat().st_size, name=dump.name)])
    assert [r["unit"] for r in text_work.to_pylist() if r["row_kind"] == "stats"] == ["line"]

    def history(work):
        return [(r["metadata_offset"], r["partition"], r["change"], r["leader"], r["leader_epoch"], r["unclean"])
                for r in _replay(work).to_pylist() if r["row_kind"] == "history"]

    assert history(bin_work) == history(text_work)
    rows = [r for r in _replay(bin_work).to_pylist() if r["row_kind"] == "history"]
    start = [r for r in rows if r["change"] == "log_start"]  # no snapshot: where the replay started
    assert [(r["metadata_offset"], r["topic_id"], r["partition"]) for r in start] == [(0, "", None)]
    rows = [r for r in rows if r["change"] != "log_start"]
    assert len(rows) == 11 and all(r["topic_id"] == TID for r in rows[:-1])
    # the last row says how far the log reaches: its last record (a NoOp heartbeat would count too)
    assert (rows[-1]["change"], rows[-1]["metadata_offset"], rows[-1]["controller_ts"], rows[-1]["partition"]) == (
        "log_end", 10, T + 200_000, None)


def test_history_evidence_names_the_segment_file_of_each_record(tmp_path: Path) -> None:
    """The history's source and position are a file and byte position that kafka-dump-log.sh re-reads (the copies
    are merged by folder; the evidence named the folder with a byte position inside one of its files)."""
    from epochlib.kraft.codec import encode_metadata_batch

    folder = tmp_path / "node=1" / "__cluster_metadata-0"
    folder.mkdir(parents=True)
    first, second = folder / "00000000000000000000.log", folder / "00000000000000000011.log"
    first.write_bytes(metadata_log(3))  # offsets 0..10
    second.write_bytes(b"".join(encode_metadata_batch([(20, 0, {})], base_offset=11 + i, raft_epoch=1,
                                                      timestamp=T + 300_000 + 500 * i) for i in range(2)))
    work = _work([InputFile("cluster_metadata", cm.KSEGMENT, str(f), f.stat().st_size, name=f.name)
                  for f in (first, second)])
    rows = [r for r in _replay(work).to_pylist() if r["row_kind"] == "history"]
    assert {r["source"] for r in rows if r["change"] != "log_end"} == {str(first)}
    assert [(r["change"], r["source"]) for r in rows if r["change"] == "log_end"] == [("log_end", str(second))]
    assert all(r["position"] is not None and r["position"] < first.stat().st_size for r in rows
               if r["source"] == str(first))


@pytest.mark.parametrize("form", ["binary", "dump", "live copy"])
def test_noop_heartbeats_after_the_last_change_extend_the_log_end(tmp_path: Path, form: str) -> None:
    """A quiet cluster: only NoOps after the last change. They are dropped, but the last one dates the log's end,
    read from the segment or from kafka-dump-log's text of it alike (the text lost it: M2 and K1 then judged
    captures and snapshots after the last change as beyond the log) — and from a copy of the active segment that
    ends inside the next heartbeat's batch (the cut batch is no record: the last whole NoOp still dates the end)."""
    from epochlib.kraft.codec import encode_metadata_batch

    noops = b"".join(encode_metadata_batch([(20, 0, {})], base_offset=11 + i, raft_epoch=1,
                                           timestamp=T + 300_000 + 500 * i) for i in range(5))
    seg = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    seg.parent.mkdir()
    cut = kp_batch(16, key=None, value=NOOP, epoch=1)[:40] if form == "live copy" else b""
    seg.write_bytes(metadata_log(3) + noops + cut)
    if form == "dump":
        dump = tmp_path / "dump.txt"
        dump.write_text(format_dump(seg.read_bytes(), str(seg)))
        work = _work([InputFile("cluster_metadata", cm.KDUMP, str(dump), dump.stat().st_size, name=dump.name)])
    else:
        work = _work([InputFile("cluster_metadata", cm.KSEGMENT, str(seg), seg.stat().st_size, name=seg.name)])
    recs = [r for r in work.to_pylist() if r["row_kind"] == "record"]
    assert sum(r["file_kind"] not in (cm.RANGE, cm.SEGMENT_BASE) for r in recs) == 12  # 11 records + the last NoOp
    assert [(r["offset"], r["end_offset"]) for r in recs if r["file_kind"] == cm.RANGE] == [(0, 15)]  # no hole
    end = [r for r in _replay(work).to_pylist() if r["row_kind"] == "history"][-1]
    assert (end["change"], end["metadata_offset"], end["controller_ts"]) == ("log_end", 15, T + 302_000)
    assert [r for r in work.to_pylist() if r["row_kind"] == "quarantine"] == []
    stats = [(r["unit"], r["n_unpaired"]) for r in work.to_pylist() if r["row_kind"] == "stats"]
    assert stats == ([("batch", 1)] if form == "live copy" else [("batch", 0)] if form == "binary" else [("line", None)])


def test_not_a_dump_is_quarantined_as_a_file(tmp_path: Path) -> None:
    junk = tmp_path / "notes.txt"
    junk.write_text("hello\n")
    rows = _work([InputFile("cluster_metadata", cm.KDUMP, str(junk), 6, name=junk.name)]).to_pylist()
    assert [(r["row_kind"], r["unit"]) for r in rows] == [("quarantine", "file"), ("stats", "file")]


@pytest.mark.parametrize("form", ["binary", "dump"])
def test_a_snapshot_with_an_unreadable_batch_is_not_replayed_from(tmp_path: Path, form: str) -> None:
    """Kafka loads a snapshot whole or not at all. A snapshot with a bad CRC in one batch was replayed from what was
    left of it: its lost topics were missing from the history, and the rules took that for a fact (268 false M1 on
    the demo, a review). It is now quarantined as not replayed from, and the replay starts at the log, marked."""
    from fixtures_kraft import _part

    from epochlib.kraft.snapshot import encode_snapshot

    d = tmp_path / "n1" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    log = d / "00000000000000000004.log"
    log.write_bytes(_batch_at(4))
    snap_bytes = encode_snapshot([(2, 0, {"name": "orders", "topic_id": TID}), _part(0, 1), _part(1, 2)], epoch=1,
                                 last_contained_timestamp=T + 5_000, timestamp=T + 6_000, records_per_batch=1)
    snap = d / "00000000000000000004-0000000001.checkpoint"

    def replayed(data: bytes) -> tuple[list[dict], list[dict]]:
        snap.write_bytes(data)
        files = [InputFile("cluster_metadata", cm.KSEGMENT, str(log), log.stat().st_size, name=log.name),
                 InputFile("cluster_metadata", cm.KSNAPSHOT, str(snap), snap.stat().st_size, name=snap.name)]
        if form == "dump":  # the same files as kafka-dump-log --cluster-metadata-decoder prints them, in one text
            dump = tmp_path / "dump.txt"
            dump.write_text(format_dump(log.read_bytes(), str(log)) + "\n"
                            + format_dump(data, str(snap), kind="snapshot", snapshot_id=(4, 1)))
            files = [InputFile("cluster_metadata", cm.KDUMP, str(dump), dump.stat().st_size, name=dump.name)]
        work = _work(files)
        out = _replay(work).to_pylist()
        q = [r for r in work.to_pylist() + out if r["row_kind"] == "quarantine"]
        return [r for r in out if r["row_kind"] == "history"], q

    hist, q = replayed(snap_bytes)
    assert not q and "snapshot" in {r["change"] for r in hist} and not any(
        r["change"] == "log_start" for r in hist)
    assert any(r["partition"] == 0 and r["leader"] == 2 and r["change"] == "leader" for r in hist)
    bad = bytearray(snap_bytes)
    bad[len(bad) // 2] ^= 0xFF  # inside a data batch: its CRC fails
    hist, q = replayed(bytes(bad))
    reasons = [r["reason"] for r in q]
    assert any(r.startswith(("metadata batch: crc mismatch", "metadata dump: ")) for r in reasons), reasons
    assert any("snapshot 00000000000000000004-0000000001.checkpoint not replayed" in r
               and "starts from the log's first record (offset 4)" in r for r in reasons)
    assert not any("snapshot" in r["change"] for r in hist)  # nothing from the partial image
    assert [r["metadata_offset"] for r in hist if r["change"] == "log_start"] == [4]
    # cut short at a batch boundary: no CRC fails, but the footer is missing (a review: replayed in part, silently)
    cut = snap_bytes[:len(snap_bytes) - 75 - 134]  # without the footer batch and the last PartitionRecord's
    hist, q = replayed(cut)
    reasons = [r["reason"] for r in q]
    assert any("does not end with a SnapshotFooterRecord" in r for r in reasons), reasons
    assert any("not replayed" in r for r in reasons) and not any("snapshot" in r["change"] for r in hist)


def _log_batches() -> list[bytes]:
    """The fixture log (:func:`fixtures_kraft.metadata_log`) as its batches: offsets 0 (LeaderChange), 1-3, 4, 5, 6,
    7, 8-9, 10 (batches 0-7)."""
    from epochlib.kraft.codec import iter_batches

    log = metadata_log(3)
    return [log[b.position:b.position + b.size] for b in iter_batches(log)]


def _replayed(tmp_path: Path, copies: dict[str, list[bytes]]) -> tuple[list[dict], list[dict], list[dict]]:
    files = []
    for node, segments in copies.items():
        d = tmp_path / node / "__cluster_metadata-0"
        d.mkdir(parents=True)
        for seg in segments:
            from epochlib.kraft.codec import iter_batches

            first = next(b.base_offset for b in iter_batches(seg) if hasattr(b, "base_offset"))
            p = d / f"{first:020d}.log"
            p.write_bytes(seg)
            files.append(InputFile("cluster_metadata", cm.KSEGMENT, str(p), p.stat().st_size, name=p.name))
    work = _work(files)
    out = _replay(work).to_pylist()
    q = [r for r in work.to_pylist() + out if r["row_kind"] == "quarantine"]
    stats = [r for r in out if r["row_kind"] == "stats"]
    return [r for r in out if r["row_kind"] == "history"], q, stats


def test_a_hole_in_the_log_ends_the_history_before_it(tmp_path: Path) -> None:
    """A segment lost in collection (offsets 6-7 in no copy): the leader changes after the hole were counted onto the
    state before it, every later epoch one too low (a review: ~107 false K1 errors, and the run said `ok`). The
    history now ends at the hole, which is a quarantined unit; a second copy that holds the offsets fills it."""
    b = _log_batches()
    hist, q, stats = _replayed(tmp_path / "one", {"n1": [b"".join(b[:4]), b"".join(b[6:])]})
    assert max(r["metadata_offset"] for r in hist) == 5  # the log_end row too: the history reaches offset 5
    (hole,) = [r for r in q if "hole" in r["reason"]]
    assert "at offsets 6..7" in hole["reason"] and "the history ends at offset 5" in hole["reason"]
    assert "3 records after the hole are not replayed" in hole["reason"]
    (st,) = stats
    assert (st["n_read"], st["n_bad"]) == (7, 1)  # the records replayed (offsets 0-5) and the hole
    # a CRC failure in the only copy is such a hole too
    bad = bytearray(b[4])
    bad[-1] ^= 0xFF
    hist, q, _ = _replayed(tmp_path / "crc", {"n1": [b"".join(b[:4]) + bytes(bad) + b"".join(b[5:])]})
    assert max(r["metadata_offset"] for r in hist) == 5 and any("hole at offsets 6..6" in r["reason"] for r in q)
    # another node's copy holds what one lost: no hole, the whole history
    whole, q, _ = _replayed(tmp_path / "two", {"n1": [b"".join(b[:4]), b"".join(b[6:])], "n2": [b"".join(b)]})
    assert max(r["metadata_offset"] for r in whole) == 10 and not [r for r in q if "hole" in r["reason"]]


def test_a_snapshot_that_does_not_join_the_log_is_not_continued_across_the_gap(tmp_path: Path) -> None:
    """The log cleaned to offset 8 and the only snapshot ending at 4: the log's records were replayed onto the
    snapshot's state across offsets 4-7 (a review: 146 false K1). The history is now the snapshot's alone."""
    from fixtures_kraft import _part

    from epochlib.kraft.snapshot import encode_snapshot

    b = _log_batches()
    d = tmp_path / "n1" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    seg = d / "00000000000000000008.log"
    seg.write_bytes(b"".join(b[6:]))
    snap = d / "00000000000000000004-0000000001.checkpoint"
    snap.write_bytes(encode_snapshot([(2, 0, {"name": "orders", "topic_id": TID}), _part(0, 2), _part(1, 2)], epoch=1,
                                     last_contained_timestamp=T + 10_000, timestamp=T + 11_000))
    work = _work([InputFile("cluster_metadata", cm.KSEGMENT, str(seg), seg.stat().st_size, name=seg.name),
                  InputFile("cluster_metadata", cm.KSNAPSHOT, str(snap), snap.stat().st_size, name=snap.name)])
    out = _replay(work).to_pylist()
    hist = [r for r in out if r["row_kind"] == "history"]
    assert {r["change"] for r in hist} <= {"snapshot", "snapshot,topic_created", "log_end"}
    assert any("hole between snapshot 00000000000000000004-0000000001.checkpoint and the log's next offset 8" in
               r["reason"] for r in out if r["row_kind"] == "quarantine")


def test_a_dump_of_two_nodes_replays_from_the_whole_snapshot_copy(tmp_path: Path) -> None:
    """One kafka-dump-log text of two nodes' snapshots (``--files n1/…,n2/…``), n1's damaged: the replay takes n2's
    (both were rejected, being one source file), and never applies two copies of one snapshot twice."""
    from fixtures_kraft import _part

    from epochlib.kraft.snapshot import encode_snapshot

    good = encode_snapshot([(2, 0, {"name": "orders", "topic_id": TID}), _part(0, 1), _part(1, 2)], epoch=1,
                           last_contained_timestamp=T + 5_000, timestamp=T + 6_000, records_per_batch=1)
    bad = bytearray(good)
    bad[len(bad) // 2] ^= 0xFF
    log = _batch_at(4)
    name = "00000000000000000004-0000000001.checkpoint"
    text = "\n".join([format_dump(log, "/c/n1/__cluster_metadata-0/00000000000000000004.log"),
                      format_dump(bytes(bad), f"/c/n1/__cluster_metadata-0/{name}", kind="snapshot",
                                  snapshot_id=(4, 1)),
                      format_dump(good, f"/c/n2/__cluster_metadata-0/{name}", kind="snapshot", snapshot_id=(4, 1))])
    dump = tmp_path / "dump.txt"
    dump.write_text(text)
    out = _replay(_work([InputFile("cluster_metadata", cm.KDUMP, str(dump), dump.stat().st_size,
                                   name=dump.name)])).to_pylist()
    hist = [r for r in out if r["row_kind"] == "history"]
    snap_rows = [(r["topic_id"], r["partition"]) for r in hist if "snapshot" in r["change"]]
    assert sorted(snap_rows, key=str) == sorted([(TID, None), (TID, 0), (TID, 1)], key=str)  # once each
    assert not any("not replayed" in r["reason"] for r in out if r["row_kind"] == "quarantine")


def _batch_at(offset: int) -> bytes:
    """One PartitionChangeRecord batch (orders-0's leader to 2) at ``offset``."""
    from fixtures_kraft import _pcr

    from epochlib.kraft.codec import encode_metadata_batch

    return encode_metadata_batch([_pcr(0, leader=2)], base_offset=offset, raft_epoch=1, timestamp=T + 10_000)


def test_a_copy_s_uncommitted_tail_is_a_note_not_history_or_quarantine(tmp_path: Path) -> None:
    """Node n1's copy ends with records of Raft epoch 1 from offset 8 on that node n2's copy holds in epoch 2 (a
    failover: n1's tail was never committed). The replay takes n2's records, as Raft does; n1's tail is neither
    history nor a quarantined conflict (the run is not partial for it), and the run's notes say what was left out."""
    from epochlib.kraft.codec import encode_control_record_batch, encode_metadata_batch

    b = _log_batches()
    leader2 = encode_control_record_batch([(2, {"leader_id": 2, "voters": [{"voter_id": 2}],
                                                "granting_voters": [{"voter_id": 2}]})],
                                          base_offset=8, raft_epoch=2, timestamp=T + 90_000)
    moved = encode_metadata_batch([(5, 0, {"partition_id": 1, "topic_id": TID, "leader": 2, "isr": [2, 3]})],
                                  base_offset=9, raft_epoch=2, timestamp=T + 95_000)
    hist, q, stats = _replayed(tmp_path, {"n1": [b"".join(b)], "n2": [b"".join(b[:6]) + leader2 + moved]})
    assert not q and stats[0]["n_bad"] == 0
    assert max(r["metadata_offset"] for r in hist) == 9
    assert [(r["metadata_offset"], r["partition"], r["leader"], r["leader_epoch"]) for r in hist
            if r["metadata_offset"] >= 8 and r["change"] not in ("log_end",)] == [(9, 1, 2, 2)]
    work = _work([InputFile("cluster_metadata", cm.KSEGMENT, str(p), p.stat().st_size, name=p.name)
                  for p in sorted(tmp_path.rglob("*.log"))])
    (note,) = [r["reason"] for r in _replay(work).to_pylist() if r["row_kind"] == "info"]
    assert "3 records from metadata offset 8 on (Raft epoch 1)" in note and "holds epoch 2 there" in note


def test_a_superseded_copy_does_not_fill_a_hole_in_the_copy_that_replaced_it(tmp_path: Path) -> None:
    """n2 (epoch 2 from offset 8) replaced n1's tail from 8; n2's batch at offset 9 fails its CRC. Offset 9 is held
    by no copy of the log (n1's record there was never committed): a hole, as without n1. n1's offsets counted as
    held hid it, and n2's record at 10 was replayed onto a state without 9."""
    from epochlib.kraft.codec import encode_control_record_batch, encode_metadata_batch

    b = _log_batches()
    leader2 = encode_control_record_batch([(2, {"leader_id": 2, "voters": [{"voter_id": 2}],
                                                "granting_voters": [{"voter_id": 2}]})],
                                          base_offset=8, raft_epoch=2, timestamp=T + 90_000)
    moved = bytearray(encode_metadata_batch([(5, 0, {"partition_id": 1, "topic_id": TID, "leader": 2})],
                                            base_offset=9, raft_epoch=2, timestamp=T + 95_000))
    moved[-1] ^= 0xFF  # a bad CRC
    again = encode_metadata_batch([(5, 0, {"partition_id": 1, "topic_id": TID, "leader": 3})],
                                  base_offset=10, raft_epoch=2, timestamp=T + 96_000)
    hist, q, _ = _replayed(tmp_path, {"n1": [b"".join(b)], "n2": [b"".join(b[:6]) + leader2 + bytes(moved) + again]})
    assert any("hole at offsets 9..9" in r["reason"] for r in q), [r["reason"] for r in q]
    assert max(r["metadata_offset"] for r in hist) == 8


def test_a_lost_leader_change_leaves_the_new_epoch_s_start_unknown(tmp_path: Path) -> None:
    """The most up-to-date copy lost its epoch-2 LeaderChange at offset 8 (a bad CRC); its next record, at 9, is of
    epoch 2. Epoch 2 began somewhere after 7: n1's epoch-1 record at 8 may be an uncommitted tail, so it is cut
    (a hole at 8: the history ends at 7), not replayed. A copy that holds that LeaderChange intact fills the offset,
    and the history runs on to 10 (the bad batch's offset was read as epoch 1 and that copy cut as stale)."""
    from epochlib.kraft.codec import encode_control_record_batch, encode_metadata_batch

    b = _log_batches()
    lc = encode_control_record_batch([(2, {"leader_id": 2, "voters": [{"voter_id": 2}],
                                           "granting_voters": [{"voter_id": 2}]})],
                                     base_offset=8, raft_epoch=2, timestamp=T + 90_000)
    bad = bytearray(lc)
    bad[-1] ^= 0xFF
    rest = b"".join(encode_metadata_batch([(5, 0, {"partition_id": 1, "topic_id": TID, "leader": leader})],
                                          base_offset=o, raft_epoch=2, timestamp=T + 95_000 + o)
                    for o, leader in ((9, 2), (10, 3)))
    hist, q, _ = _replayed(tmp_path / "tail", {"n1": [b"".join(b)], "n2": [b"".join(b[:6]) + bytes(bad) + rest]})
    assert any("hole at offsets 8..8" in r["reason"] for r in q) and max(r["metadata_offset"] for r in hist) == 7
    hist, q, _ = _replayed(tmp_path / "fill", {"n1": [b"".join(b[:6]) + lc], "n2": [b"".join(b[:6]) + bytes(bad) + rest]})
    assert not [r for r in q if "hole" in r["reason"]] and max(r["metadata_offset"] for r in hist) == 10


def test_a_segment_batch_outside_the_file_names_offset_range_is_quarantined(tmp_path: Path) -> None:
    """A metadata-log segment's batch whose baseOffset (outside the CRC) does not fit the 20-digit file name's
    range is a bad batch, as Kafka's recovery rejects it; built with kafka-python."""
    seg = tmp_path / "n1" / cm.DIR / "00000000000000000500.log"
    seg.parent.mkdir(parents=True)
    seg.write_bytes(kp_batch(500, 2, key=None, value=NOOP) + kp_batch(LONG_MAX, key=None, value=NOOP)
                    + kp_batch(502, key=None, value=NOOP))
    rows = _work([InputFile("cluster_metadata", cm.KSEGMENT, str(seg), seg.stat().st_size, name=seg.name)]).to_pylist()
    q = [(r["unit"], r["reason"]) for r in rows if r["row_kind"] == "quarantine"]
    assert q == [("batch", "metadata batch: offsets outside the segment's range [500, 500+2^31-1]: "
                           f"base offset {LONG_MAX}, last offset {LONG_MAX}")]
    stats = [(s["unit"], s["n_read"], s["n_bad"], s["n_out"]) for s in rows if s["row_kind"] == "stats"]
    assert stats == [("batch", 3, 1, 3)]
    assert [(r["offset"], r["end_offset"]) for r in rows if r["file_kind"] == cm.RANGE] == [(500, 502)]


def test_kafka_dump_logs_invalid_bytes_line_is_read_as_the_binary_reader_reads_the_cut(tmp_path: Path) -> None:
    """kafka-dump-log prints "Found N invalid bytes at the end of <file>" for a segment that ends inside a batch (a
    live copy of the active segment; DumpLogSegments.dumpLog). The binary reader counts that batch in
    audit_runs.units_unpaired and quarantines nothing; the dump's line was a quarantined bad unit (a partial run
    from a healthy copy). Now the text agrees: counted, not quarantined — and quarantined after a rolled segment
    (a later segment of the folder in the dump), as the binary reader quarantines a rolled segment's cut."""
    seg = tmp_path / "__cluster_metadata-0" / "00000000000000000000.log"
    seg.parent.mkdir()
    whole = metadata_log(2)
    seg.write_bytes(whole + kp_batch(7, key=None, value=NOOP, epoch=1)[:40])
    binary = _work([InputFile("cluster_metadata", cm.KSEGMENT, str(seg), seg.stat().st_size, name=seg.name)])
    text = format_dump(whole, str(seg)) + f"Found 40 invalid bytes at the end of {seg.name}\n"
    dump = tmp_path / "dump.txt"
    dump.write_text(text)
    work = _work([InputFile("cluster_metadata", cm.KDUMP, str(dump), dump.stat().st_size, name=dump.name)])
    for w, unit in ((binary, "batch"), (work, "line")):
        rows = w.to_pylist()
        assert [r for r in rows if r["row_kind"] == "quarantine"] == []
        assert [(r["unit"], r["n_bad"], r["n_unpaired"]) for r in rows if r["row_kind"] == "stats"] == [(unit, 0, 1)]
    assert [r["offset"] for r in binary.to_pylist() if r["row_kind"] == "record" and r["file_kind"] == "log"] == \
        [r["offset"] for r in work.to_pylist() if r["row_kind"] == "record" and r["file_kind"] == "log"]
    # a later segment of the same folder in the dump: the first was rolled, its cut is lost bytes
    later = seg.parent / "00000000000000000007.log"
    rolled = text + format_dump(kp_batch(7, key=None, value=NOOP, epoch=1), str(later))
    dump.write_text(rolled)
    rows = _work([InputFile("cluster_metadata", cm.KDUMP, str(dump), dump.stat().st_size, name=dump.name)]).to_pylist()
    q = [r["reason"] for r in rows if r["row_kind"] == "quarantine"]
    assert q == [f"metadata dump: Found 40 invalid bytes at the end of {seg.name}: cut short, but not the partition's "
                 "last segment (a later segment of its folder is in the dump; Kafka never appends to a rolled segment: "
                 "bytes lost)"]
    assert [(r["n_bad"], r["n_unpaired"]) for r in rows if r["row_kind"] == "stats"] == [(1, None)]


def test_a_skip_record_metadata_dump_reads_as_the_normal_one(tmp_path: Path) -> None:
    """``kafka-dump-log --cluster-metadata-decoder --skip-record-metadata`` prints a control record as an empty
    line. Was: a new leader's LeaderChange was no record, so the log had "a hole at offsets 11..11" and the history
    after it was not replayed (status partial); a snapshot in that style "does not start with a
    SnapshotHeaderRecord": not replayed. Now a control batch's records come from its batch line and the history is
    the normal dump's — the snapshot rows dated by the header batch's CreateTime, the header's own
    lastContainedLogTimestamp not being printed."""
    from fixtures_kraft import _part, _pcr

    from epochlib.kraft.codec import encode_control_record_batch, encode_metadata_batch
    from epochlib.kraft.snapshot import encode_snapshot

    lc = (2, {"leader_id": 1, "voters": [{"voter_id": 1}], "granting_voters": [{"voter_id": 1}]})
    log = (metadata_log(3) + encode_control_record_batch([lc], base_offset=11, raft_epoch=2, timestamp=T + 300_000)
           + encode_metadata_batch([_pcr(0, leader=2)], base_offset=12, raft_epoch=2, timestamp=T + 301_000))
    seg = "/c/n1/__cluster_metadata-0/00000000000000000000.log"
    tail = log[scan_batch_boundaries(log)[-2][0]:]  # from offset 11 on, after snapshot 11
    snap = encode_snapshot([(2, 0, {"name": "orders", "topic_id": TID}), _part(0, 1), _part(1, 2)], epoch=1,
                           last_contained_timestamp=T + 200_000, timestamp=T + 200_500)
    name = "00000000000000000011-0000000001.checkpoint"

    def replayed(skip: bool, with_snapshot: bool) -> tuple[list[dict], list[dict]]:
        if with_snapshot:
            text = (format_dump(snap, f"/c/n1/__cluster_metadata-0/{name}", kind="snapshot", snapshot_id=(11, 1),
                                skip_record_metadata=skip)
                    + format_dump(tail, "/c/n1/__cluster_metadata-0/00000000000000000011.log",
                                  skip_record_metadata=skip))
        else:
            text = format_dump(log, seg, skip_record_metadata=skip)
        dump = tmp_path / "dump.txt"
        dump.write_text(text)
        work = _work([InputFile("cluster_metadata", cm.KDUMP, str(dump), dump.stat().st_size, name=dump.name)])
        out = _replay(work).to_pylist()
        q = [r for r in work.to_pylist() + out if r["row_kind"] == "quarantine"]
        return [{k: v for k, v in r.items() if k != "position"} for r in out if r["row_kind"] == "history"], q

    from epochlib.kraft.dumptext import iter_dump_entries

    def entries(skip: bool) -> list[tuple]:  # a control record's offset, time, Raft epoch and type, as in the bytes
        text = (format_dump(log, seg, skip_record_metadata=skip)
                + format_dump(snap, f"/c/n1/__cluster_metadata-0/{name}", kind="snapshot", snapshot_id=(11, 1),
                              skip_record_metadata=skip))
        return [(e.offset, e.timestamp, e.raft_epoch, e.control.control_type if e.control else None)
                for e in iter_dump_entries(text)]

    assert entries(True) == entries(False)
    assert [x for x in entries(True) if x[3] is not None] == [
        (0, T, 1, 2), (11, T + 300_000, 2, 2), (0, T + 200_500, 1, 3), (4, T + 200_500, 1, 4)]
    normal, q = replayed(False, False)
    assert not q and [r["leader"] for r in normal if r["change"] == "leader" and r["partition"] == 0] == [2, 1, 3, 2]
    assert "\n\n" in format_dump(log, seg, skip_record_metadata=True)  # the LeaderChange records: empty lines
    skipped, q = replayed(True, False)
    assert [r["reason"] for r in q] == []
    assert skipped == normal
    normal, q = replayed(False, True)
    assert not q and {r["change"] for r in normal} >= {"snapshot", "leader"}
    skipped, q = replayed(True, True)
    assert [r["reason"] for r in q] == []
    assert skipped == [{**r, "controller_ts": T + 200_500} if r["change"] == "snapshot" else r for r in normal]


def _image(epoch0: int, leader0: int, epoch1: int, leader1: int, isr1: list[int]) -> list[tuple]:
    """The fixture log's image (orders, partitions 0 and 1) with these leaders and leader epochs."""
    def part(p: int, leader: int, epoch: int, isr: list[int]) -> tuple:
        return (3, 0, {"partition_id": p, "topic_id": TID, "replicas": [1, 2, 3], "isr": isr, "leader": leader,
                       "leader_epoch": epoch, "partition_epoch": epoch})

    return [(2, 0, {"name": "orders", "topic_id": TID}), part(0, leader0, epoch0, [1, 2, 3]),
            part(1, leader1, epoch1, isr1)]


def _copy(root: Path, node: str, segments: dict[int, bytes], snapshots: dict[int, list[tuple]]) -> list[InputFile]:
    """A node's ``__cluster_metadata-0`` with segments by base offset (as named) and snapshots by end offset."""
    from epochlib.kraft.snapshot import encode_snapshot

    d = root / node / "__cluster_metadata-0"
    d.mkdir(parents=True)
    out = []
    for base, data in segments.items():
        p = d / f"{base:020d}.log"
        p.write_bytes(data)
        out.append(InputFile("cluster_metadata", cm.KSEGMENT, str(p), p.stat().st_size, name=p.name))
    for end, image in snapshots.items():
        p = d / f"{end:020d}-0000000001.checkpoint"
        p.write_bytes(encode_snapshot(image, epoch=1, last_contained_timestamp=T + 1_000 * end,
                                      timestamp=T + 1_000 * end + 500))
        out.append(InputFile("cluster_metadata", cm.KSNAPSHOT, str(p), p.stat().st_size, name=p.name))
    return out


def _history(files: list[InputFile]) -> tuple[list[dict], list[str]]:
    out = _replay(_work(files)).to_pylist()
    return ([r for r in out if r["row_kind"] == "history"],
            [r["reason"] for r in out if r["row_kind"] == "quarantine"])


def test_a_segment_lost_below_the_chosen_snapshot_is_a_named_hole(tmp_path: Path) -> None:
    """The log read from offset 6 with snapshots ending at 4 and 8: the replay starts from snapshot 8 (the one that
    joins the log), and the log's records 6-7 were dropped without a word, status ok (a review: 318 leader changes
    missing). Snapshot 4 proves offsets 4-5 existed: the hole is quarantined, the history from snapshot 8 on kept."""
    b = _log_batches()
    files = _copy(tmp_path, "n1", {6: b"".join(b[4:])},
                  {4: _image(1, 2, 0, 2, [2]), 8: _image(2, 1, 1, 3, [3])})
    hist, q = _history(files)
    (hole,) = [r for r in q if "hole" in r]
    assert "hole at offsets 4..5 (snapshot 00000000000000000004-0000000001.checkpoint ends there" in hole
    assert "the 2 records at offsets 6..7 after it are not replayed" in hole
    assert "starts from snapshot 00000000000000000008-0000000001.checkpoint" in hole
    assert [(r["metadata_offset"], r["change"]) for r in hist if r["partition"] == 0] == [
        (7, "snapshot"), (10, "leader")]
    assert hist[-1]["change"] == "log_end" and hist[-1]["metadata_offset"] == 10


def test_a_later_snapshot_bridges_a_hole_and_an_older_copy_never_shortens_the_history(tmp_path: Path) -> None:
    """The controller's copy (snapshot 8, log from 8) alone gives the history to offset 10; adding an old node's copy
    of offsets 0-5 made it end at 5 (the hole 6-7 ended it for good). The replay now quarantines the hole and goes on
    from snapshot 8, as a follower fetches a snapshot: every row of the controller's copy alone is still there."""
    b = _log_batches()
    ctrl = _copy(tmp_path / "a", "ctrl", {8: b"".join(b[6:])}, {8: _image(2, 1, 1, 3, [3])})
    alone, q = _history(ctrl)
    assert not q
    both, q = _history(_copy(tmp_path / "b", "ctrl", {8: b"".join(b[6:])}, {8: _image(2, 1, 1, 3, [3])})
                       + _copy(tmp_path / "b", "old", {0: b"".join(b[:4])}, {}))
    (hole,) = q
    assert "hole at offsets 6..7" in hole and "the history stops at offset 5 and goes on from snapshot " \
        "00000000000000000008-0000000001.checkpoint" in hole and "not replayed" not in hole

    def key(r: dict) -> tuple:
        return r["metadata_offset"], r["partition"], r["leader"], r["leader_epoch"], r["change"]

    assert {key(r) for r in alone} <= {key(r) for r in both}
    assert [key(r) for r in both if r["partition"] == 0] == [
        (2, 0, 1, 0, "created"), (4, 0, 2, 1, "leader"), (7, 0, 1, 2, "snapshot"), (10, 0, 3, 3, "leader")]
    assert [r["metadata_offset"] for r in both if r["change"] in ("log_start", "log_end")] == [0, 10]


def test_the_log_end_after_a_hole_is_the_offset_before_it(tmp_path: Path) -> None:
    """A bad CRC at offset 7, the record before it a NoOp: the log_end row said offset 5, the last change kept (a
    review: offset 90 at 09:00:07 while the hole's row said the history ends at 14135, 10:57:14). It is now offset
    6, the NoOp's, and its time."""
    from epochlib.kraft.codec import encode_metadata_batch

    b = _log_batches()
    noop = encode_metadata_batch([(20, 0, {})], base_offset=6, raft_epoch=1, timestamp=T + 35_000)
    bad = bytearray(b[5])
    bad[-1] ^= 0xFF
    hist, q = _history(_copy(tmp_path, "n1", {0: b"".join(b[:4]) + noop + bytes(bad) + b"".join(b[6:])}, {}))
    assert any("hole at offsets 7..7" in r and "the history ends at offset 6" in r for r in q)
    assert [(r["change"], r["metadata_offset"], r["controller_ts"]) for r in hist][-1] == ("log_end", 6, T + 35_000)


def test_an_empty_rolled_segment_is_named_as_the_hole_it_leaves(tmp_path: Path) -> None:
    """A zero-byte ``…0000.log`` next to ``…0008.log``: offsets 0-7 lost in collection. Only the changes to unknown
    partitions after it were quarantined; the hole itself was never named (the check started at the first offset
    read). It is now, and the replay from offset 8 is what it was (a log that starts later, ``log_start``)."""
    b = _log_batches()
    hist, q = _history(_copy(tmp_path, "n1", {0: b"", 8: b"".join(b[6:])}, {}))
    assert any("hole at offsets 0..7 (segment 00000000000000000000.log starts there" in r
               and "the history starts at offset 8 without the state before it" in r for r in q), q
    assert [r["metadata_offset"] for r in hist if r["change"] in ("log_start", "log_end")] == [8, 10]


def test_a_folder_of_empty_segments_says_so(tmp_path: Path) -> None:
    """A metadata-log folder holding only a zero-byte segment: the run said "configured but no input units found",
    where offsets and logdirs say what was there ("(1 empty file)"). The segment is still decoded: its base offset
    is where its log starts (an empty rolled segment is a hole)."""
    from jobs.audit import empty_inputs

    d = tmp_path / "n1" / "__cluster_metadata-0"
    d.mkdir(parents=True)
    (d / "00000000000000000000.log").write_bytes(b"")
    inv = cm.discover_cluster_metadata(str(tmp_path))
    assert empty_inputs(inv.reasons("cluster_metadata", "empty")) == "1 empty file"
    assert [f.name for f in inv.files] == ["00000000000000000000.log"]
