"""Issue 13 at ingestion (no Spark): KIP-848 member records name their member, and text-dump positions
are line numbers, so evidence pointers can say ``line N`` for every text unit."""

from __future__ import annotations

import json

import pyarrow as pa

from epochlib import coordinator
from epochlib.rules import GroupState, current_membership
from jobs.ingest import textdumps
from jobs.ingest._kv import group_row


def _member_json(mid: str, client: str | None) -> str:
    key = {"type": 5, "data": {"groupId": "g", "memberId": mid}}
    value = None if client is None else {"version": 0, "data": {
        "instanceId": None, "rackId": None, "clientId": client, "clientHost": "/10.0.0.1",
        "subscribedTopicNames": ["t"], "subscribedTopicRegex": None, "rebalanceTimeoutMs": 300000,
        "serverAssignor": "uniform"}}  # fmt: skip
    return json.dumps({"key": key, "value": value}, separators=(",", ":"))


COMMIT = ('{"key":{"type":1,"data":{"group":"g","topic":"t","partition":0}},"value":{"version":3,"data":'
          '{"offset":42,"leaderEpoch":7,"metadata":"","commitTimestamp":1700000000000,"expireTimestamp":-1}}}')


def _rows(path) -> list[dict]:
    out = pa.Table.from_batches(list(textdumps.decode_text_file(str(path), None))).to_pylist()
    return [r for r in out if r["row_kind"] in ("commit", "group")]


def test_segment_member_records_carry_their_member_and_a_tombstone_removes_it() -> None:
    key = coordinator.encode_key(5, {"group_id": "g", "member_id": "m1"})
    value = coordinator.encode_value(5, 0, {"instance_id": None, "rack_id": None, "client_id": "c1",
                                            "client_host": "/h", "subscribed_topic_names": ["t"]})
    joined = group_row(coordinator.decode_record(key, value))
    left = group_row(coordinator.decode_record(key, None))
    assert joined["record_type"] == "consumer_group_member_metadata" and joined["member_count"] is None
    assert [(m["member_id"], m["client_id"]) for m in joined["members"]] == [("m1", "c1")]
    assert left["is_tombstone"] and [(m["member_id"], m["client_id"]) for m in left["members"]] == [("m1", None)]
    # what the resets make of them: m1 joined, then left
    states = [GroupState.from_row({**joined, "event_ts": 1}), GroupState.from_row({**left, "event_ts": 2})]
    assert [(g.member_count, g.client_ids) for g in current_membership(states)] == [(1, ("c1",)), (0, ())]


def test_text_dump_positions_are_lines_also_for_glued_console_json(tmp_path) -> None:
    objs = [COMMIT, _member_json("m1", "c1"), _member_json("m2", "c2"), _member_json("m1", None)]
    glued, lines = tmp_path / "glued.txt", tmp_path / "lines.txt"
    glued.write_text("".join(objs) + "\n" + COMMIT + "\n")
    lines.write_text("\n".join(objs) + "\n")
    assert [r["position"] for r in _rows(glued)] == [1, 1, 1, 1, 2]  # never a character offset
    got = _rows(lines)
    assert [r["position"] for r in got] == [1, 2, 3, 4]
    members = [(r["is_tombstone"], [(m["member_id"], m["client_id"]) for m in r["members"]]) for r in got[1:]]
    assert members == [(False, [("m1", "c1")]), (False, [("m2", "c2")]), (True, [("m1", None)])]
    states = [GroupState.from_row({**r, "event_ts": i}) for i, r in enumerate(got[1:])]
    assert current_membership(states)[-1].member_count == 1  # m2 is still a member


def test_an_offsets_dump_s_invalid_bytes_at_its_last_segment_s_end_are_counted_not_quarantined(tmp_path) -> None:
    """`kafka-dump-log --offsets-decoder` of a live copy of the active segment ends with "Found N invalid bytes at the
    end of <file>" (DumpLogSegments.dumpLog): the binary reader counts that cut batch in units_unpaired; the text
    reader quarantined the line as "unrecognised". Now counted the same way — and quarantined after a rolled
    segment (a later segment of the same partition dumped after it: bytes lost)."""
    from test_dumps import DUMP_38

    def decode(text: str) -> tuple[list, list]:
        p = tmp_path / "dump.txt"
        p.write_text(text)
        out = pa.Table.from_batches(list(textdumps.decode_text_file(str(p), None))).to_pylist()
        return ([(r["position"], r["reason"]) for r in out if r["row_kind"] == "quarantine"],
                [(r["n_read"], r["n_bad"], r["n_unpaired"]) for r in out if r["row_kind"] == "stats"])

    found = "Found 40 invalid bytes at the end of 00000000000000000000.log\n"
    q0, ((n_read, n_bad, _),) = decode(DUMP_38)  # (DUMP_38 holds two bad record lines of its own)
    assert decode(DUMP_38 + found) == (q0, [(n_read, n_bad, 1)])
    q, stats = decode(DUMP_38 + found + "Dumping /data/__consumer_offsets-7/00000000000000000008.log\n"
                      "Log starting offset: 8\n")
    assert q == q0 + [(DUMP_38.count("\n") + 1, "Found 40 invalid bytes at the end of 00000000000000000000.log: cut "
                       "short, but not the partition's last segment (a later segment of its folder is in the dump; "
                       "Kafka never appends to a rolled segment: bytes lost)")]
    assert stats == [(n_read + 1, n_bad + 1, None)]
    # the tool run inside each partition's folder prints bare names: they name no folder, so a later segment of
    # another partition in the same dump does not make this one rolled (it was quarantined so)
    bare = DUMP_38.replace("Dumping /data/__consumer_offsets-7/", "Dumping ")
    assert bare != DUMP_38
    q, stats = decode(bare + found + "Dumping 00000000000000000100.log\nLog starting offset: 100\n")
    assert (q, stats) == (q0, [(n_read, n_bad, 1)])


def test_the_last_dumped_segment_of_each_folder_windows_paths_too_and_bare_names_each_their_own() -> None:
    from epochlib.dumps import last_dumped_segments

    text = "".join(f"Dumping {p}\n" for p in (
        "/d/t-0/00000000000000000000.log", "/d/t-0/00000000000000000050.log", "/d/t-1/00000000000000000000.log",
        "C:\\kafka\\t-2\\00000000000000000000.log", "C:\\kafka\\t-2\\00000000000000000007.log",
        "00000000000000000003.log", "00000000000000000009.log", "/d/t-0/00000000000000000050.index"))
    assert last_dumped_segments(text) == {
        "/d/t-0/00000000000000000050.log", "/d/t-1/00000000000000000000.log",
        "C:\\kafka\\t-2\\00000000000000000007.log", "00000000000000000003.log", "00000000000000000009.log"}
