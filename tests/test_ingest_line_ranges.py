"""Issue 12 item 7: JSONL captures and text dumps are cut into line ranges like segments into byte ranges.

Each form is decoded whole and in small ranges (planned by the same executor function Spark runs); the
rows must be identical, line numbers and character positions included, and the ranges must be several.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pytest
from fixtures_ingest import T1, capture_line, metadata_body

from epochlib import protocol
from jobs.ingest import lines, textdumps
from jobs.ingest import metadata as md

WIDE = 1 << 40  # a partition no column holds: the record parses, and is quarantined with its text


def _part(j: int) -> int:
    return WIDE if j % 10 == 5 else j % 4


def _console_obj(j: int, part: int) -> str:
    return json.dumps({"key": {"type": 1, "data": {"group": f"g-ü{j % 3}", "topic": "orders", "partition": part}},
                       "value": {"version": 3, "data": {"offset": j, "leaderEpoch": 5, "metadata": "é",
                                                        "commitTimestamp": T1 + j}}}, separators=(",", ":"))


def _console(n: int) -> str:
    out = []
    for j in range(n):
        obj = _console_obj(j, _part(j))
        if j % 10 == 3:  # glued objects: the second is positioned by character (unfit in every other pair)
            out.append(obj + _console_obj(j, WIDE if j % 20 == 13 else j % 4))
        elif j % 10 == 7:
            out.append("{not json at all")
        else:
            out.append(f"CreateTime:{T1 + j}\tPartition:{j % 50}\t{obj}" if j % 2 else obj)
    return "\n".join(out) + "\n"


def _scala(n: int) -> str:
    return "".join(f"[g{j},orders,{_part(j)}]::OffsetAndMetadata(offset={j}, leaderEpoch=Optional[5], metadata=, "
                   f"commitTimestamp={T1 + j}, expireTimestamp=None)\n" for j in range(n))


def _dump_log(n: int) -> str:
    out = []
    for part in (3, 4):
        out.append(f"Dumping /var/kafka/__consumer_offsets-{part}/00000000000000000000.log")
        out.append("Log starting offset: 0")
        for j in range(n):
            out.append(
                f"baseOffset: {j} lastOffset: {j} count: 1 baseSequence: -1 lastSequence: -1 producerId: {j % 2 * 7 - 1} "
                f"producerEpoch: -1 partitionLeaderEpoch: 5 isTransactional: false isControl: false "
                f"deleteHorizonMs: OptionalLong.empty position: {j * 120} CreateTime: {T1 + j} size: 120 magic: 2 "
                "compresscodec: none crc: 1 isvalid: true")
            out.append(
                f"| offset: {j} CreateTime: {T1 + j} keySize: 12 valueSize: 24 sequence: -1 headerKeys: [] "
                f'key: {{"type":"1","data":{{"group":"g{part}","topic":"orders","partition":{_part(j)}}}}} '
                f'payload: {{"version":"3","data":{{"offset":{j},"leaderEpoch":5,"metadata":"","commitTimestamp":{T1 + j}}}}}')
    return "\n".join(out) + "\n"


def _rows_of(batches) -> list[dict]:
    return [r for b in batches if b is not None for r in b.to_pylist()]


def _planned(path: Path, form: str, target: int) -> list[dict]:
    rb = pa.RecordBatch.from_pylist([{"source": str(path), "size": path.stat().st_size, "form": form,
                                      "broker": "1", "target": target}], schema=lines.LINE_RANGE_SCHEMA)
    return _rows_of(lines.plan_line_ranges(iter([rb])))


def _normalise(rows: list[dict]) -> list[tuple]:
    """Rows as comparable tuples; stats rows summed (one per range vs one per file)."""
    out, stats = [], {}
    for r in rows:
        if r["row_kind"] == "stats":
            s = stats.setdefault(r["unit"], [0, 0, 0])
            s[0] += r["n_read"]
            s[1] += r["n_bad"]
            s[2] += r["n_out"]
        else:
            out.append(tuple(sorted((k, repr(v)) for k, v in r.items())))
    return sorted(out) + [("stats", k, tuple(v)) for k, v in sorted(stats.items())]


def test_the_line_of_an_unfit_record_is_found_after_a_line_that_is_not_utf8(tmp_path) -> None:
    """The readers see a line that is not UTF-8 as empty: the quarantined record's text comes from that same
    text, so a glued object after it shows itself, not its neighbour's tail."""
    p = tmp_path / "dump.txt"
    p.write_bytes(b"\xff\xfe not text\n" + (_console_obj(1, 1) + _console_obj(2, WIDE)).encode() + b"\n")
    rows = _rows_of(textdumps.decode_text_range({"source": str(p), "broker": "1"}))
    (unfit,) = [r for r in rows if r["row_kind"] == "quarantine" and r["reason"].startswith("bad value")]
    assert unfit["raw"].decode() == _console_obj(2, WIDE)


@pytest.mark.parametrize("make", [_console, _scala, _dump_log])
def test_a_text_dump_in_line_ranges_decodes_to_the_same_rows_as_whole(tmp_path, make):
    p = tmp_path / "dump.txt"
    p.write_text(make(60), encoding="utf-8")
    whole = _rows_of(textdumps.decode_text_range({"source": str(p), "broker": "1"}))
    ranges = _planned(p, "text", 700)
    assert len(ranges) >= 5
    assert [r["start"] for r in ranges[1:]] == [r["end"] for r in ranges[:-1]] and ranges[-1]["end"] == p.stat().st_size
    split = [row for r in ranges for row in _rows_of(textdumps.decode_text_range(r))]
    assert _normalise(split) == _normalise(whole)
    assert {r["row_kind"] for r in whole} >= {"commit", "stats"}
    # a record that parsed but does not fit is quarantined with its line (a glued object: from its start)
    text_lines = p.read_text(encoding="utf-8").splitlines()
    unfit = [r for r in whole if r["row_kind"] == "quarantine" and r["reason"].startswith("bad value")]
    assert len(unfit) == {_console: 6 + 3, _dump_log: 2 * 6}.get(make, 6)  # the dump-log: two partitions
    for r in unfit:
        shown = r["raw"].decode("utf-8")
        assert str(WIDE) in shown
        assert shown in text_lines or any(t.endswith(shown) and shown.startswith("{") for t in text_lines), shown
    if make is _console:  # bad lines are quarantined; commits are pointed at by their line number
        assert any(r["row_kind"] == "quarantine" and r["reason"].startswith("invalid JSON") for r in whole)
        commits = [r["position"] for r in whole if r["row_kind"] == "commit"]
        assert max(commits) == 60 and min(commits) == 1  # line numbers of the whole file, in every range
        assert len(commits) - len(set(commits)) == 3  # two glued objects share their line (when both fit)


def test_a_jsonl_capture_in_line_ranges_decodes_to_the_same_rows_as_whole(tmp_path):
    resp = protocol.encode_metadata_response(metadata_body(4), 9, 100)
    text = "".join(capture_line(T1 + j, f"c{j}", "b1:9092", 9, resp) + "\n" + ("\n" if j % 5 == 0 else "")
                   + ("{bad\n" if j % 7 == 0 else "") for j in range(40))
    p = tmp_path / "cap.jsonl"
    p.write_text(text)
    fn = md.decode_capture_files((9092,))
    whole = _rows_of(fn(iter([pa.RecordBatch.from_pylist(
        [{"source": str(p), "size": p.stat().st_size, "form": "jsonl"}], schema=md.FILE_SCHEMA)])))
    ranges = _planned(p, "jsonl", 2000)
    assert len(ranges) >= 5
    split = _rows_of(fn(iter([pa.RecordBatch.from_pylist(ranges, schema=lines.LINE_RANGE_SCHEMA)])))
    assert _normalise(split) == _normalise(whole)
    assert sum(r["row_kind"] == "quarantine" for r in whole) == 6


def test_cut_points_cover_the_file_and_start_on_units(tmp_path):
    data = _dump_log(30).encode()
    cuts = lines.cut_points(lambda pos, n: data[pos:pos + n], len(data), 500, "dump_log")
    assert cuts[0][0] == 0 and cuts[-1][1] == len(data)
    for start, _end, first_line, first_char, ctx in cuts[1:]:
        assert data[start:].startswith((b"baseOffset:", b"Dumping ")), data[start:start + 20]
        assert data[:start].count(b"\n") == first_line and len(data[:start].decode()) == first_char
        assert ctx is None or ctx.startswith("Dumping ")
    assert lines.cut_points(lambda pos, n: b"", 0, 10) == []
