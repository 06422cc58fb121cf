"""``epoch-audit decode``: units decoded with a note (issue 12 items 1 and 5) print their rows and then
one ``info`` line, instead of an error line."""

from __future__ import annotations

import base64
import json
import struct
from pathlib import Path

from click.testing import CliRunner
from test_trailing_bytes import _rdkafka_mock_v12

from epochlib import records
from jobs.cli import cli
from jobs.decode import decode_path

KEY = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
V5 = struct.pack(">hqi", 5, 1234, 17) + b"\x01" + struct.pack(">q", 1_750_000_000_000) + b"\x00"


def test_capture_line_with_a_trailing_byte_gives_observations_and_one_info_line(tmp_path: Path) -> None:
    line = {"ts": "2026-01-01T00:00:00Z", "client_id": "rdkafka", "broker": "127.0.0.1:39617", "api_version": 12,
            "response": base64.b64encode(_rdkafka_mock_v12(b"\x00")).decode()}
    p = tmp_path / "cap.jsonl"
    p.write_text(json.dumps(line) + "\n")
    res = CliRunner().invoke(cli, ["decode", str(p)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.output.splitlines()]
    assert [r["type"] for r in rows] == ["metadata_observation"] * 3 + ["info"]
    assert {r["trailing_bytes"] for r in rows[:3]} == {1}
    assert rows[3]["unit"] == "line" and rows[3]["position"] == 1 and "1 bytes after" in rows[3]["reason"]


def test_segment_record_above_known_version_and_trailing_key_byte(tmp_path: Path) -> None:
    d = tmp_path / "__consumer_offsets-0"
    d.mkdir()
    batch = records.encode_batch([records.NewRecord(KEY + b"\x00", V5, 1_750_000_000_000)], base_offset=7)
    (d / "00000000000000000007.log").write_bytes(batch)
    rows = list(decode_path(d / "00000000000000000007.log"))
    assert [r["type"] for r in rows] == ["batch", "record", "info", "info"]
    rec = rows[1]
    assert rec["value"]["version"] == 5 and rec["value"]["offset"] == 1234 and rec["key"]["trailing_bytes"] == 1
    assert "key" in rows[2]["reason"] and rows[2]["position"] == 7
    assert "version 5" in rows[3]["reason"]


REAL_TOPIC_SEGMENT = (Path(__file__).resolve().parents[2] / "shared" / "real-kafka-data" / "kraft-microservice"
                      / "order_created-0" / "00000000000000000000.log")


def test_decode_of_a_plain_topic_segment_and_of_an_undecodable_commit_prints_rows(tmp_path: Path) -> None:
    """A segment of any topic, and a __consumer_offsets record whose value is not one, print their rows (the
    record's error in ``coordinator_error``); both used to end in AttributeError (exit 1)."""
    plain = tmp_path / "orders-0" / "00000000000000000000.log"
    plain.parent.mkdir()
    plain.write_bytes(records.encode_batch([records.NewRecord(b"k", b"v", 1_750_000_000_000)]))
    bad = tmp_path / "__consumer_offsets-5" / "00000000000000000000.log"
    bad.parent.mkdir()
    bad.write_bytes(records.encode_batch([records.NewRecord(KEY, b"\xff\xff\x00", 1_750_000_000_000)]))
    paths = [plain, bad] + ([REAL_TOPIC_SEGMENT] if REAL_TOPIC_SEGMENT.is_file() else [])
    for p in paths:
        res = CliRunner().invoke(cli, ["decode", str(p)])
        assert res.exit_code == 0, (p, res.output)
        rows = [json.loads(x) for x in res.output.splitlines()]
        assert {r["type"] for r in rows} == {"batch", "record"}, p
    assert "version -1" in rows_of(bad)[-1]["coordinator_error"]


def rows_of(path: Path) -> list[dict]:
    return [json.loads(x) for x in CliRunner().invoke(cli, ["decode", str(path)]).output.splitlines()]


def test_decode_into_a_pipe_closed_early_exits_0_without_noise(tmp_path: Path) -> None:
    """``epoch-audit decode big.log | head -1``: the reader going away is a normal end (it used to close
    stderr and exit 1 with "lost sys.stderr")."""
    import subprocess
    import sys

    seg = tmp_path / "orders-0" / "00000000000000000000.log"
    seg.parent.mkdir()
    seg.write_bytes(b"".join(records.encode_batch([records.NewRecord(b"k" * 50, b"v" * 200, 1_750_000_000_000)],
                                                  base_offset=i) for i in range(5000)))
    proc = subprocess.Popen([sys.executable, "-c", "from jobs.cli import main; main()", "decode", str(seg)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout.readline().startswith(b'{"type":"batch"')
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(60) == 0, err
    assert "Traceback" not in err and "lost sys.stderr" not in err and "error" not in err.lower(), err


def test_decode_shows_the_error_a_run_quarantines_a_capture_line_with(tmp_path: Path) -> None:
    """``decode`` and the ingestion read a capture line with one function: a line the run quarantines is an
    error row with the same reason (decode printed observations for three of these)."""
    from jobs.ingest.metadata import _decode_jsonl

    good = {"ts": "2026-01-01T00:00:00Z", "client_id": "c", "broker": "b:9092", "api_version": 12,
            "response": base64.b64encode(_rdkafka_mock_v12(b"")).decode()}
    bad = [{**good, "api_version": "12"}, {k: v for k, v in good.items() if k != "ts"},
           {**good, "metadata_token": -1}, {**good, "response": "%%%"}, {**good, "api_version": True}]
    p = tmp_path / "cap.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in [good, *bad]) + "\n")
    rows = [json.loads(x) for x in CliRunner().invoke(cli, ["decode", str(p)]).output.splitlines()]
    errors = {r["position"]: r["reason"] for r in rows if r["type"] == "error"}
    assert sorted(errors) == [2, 3, 4, 5, 6] and {r["line"] for r in rows if r["type"] != "error"} == {1}
    side = [b.to_pylist() for b in _decode_jsonl({"source": str(p)}, {})]
    quarantined = {r["position"]: r["reason"] for batch in side for r in batch
                   if r.get("row_kind") == "quarantine" or (r.get("reason") and r.get("unit") == "line")}
    assert quarantined == errors


def test_partition_metadata_kafka_reads_but_never_writes_gives_its_topic_id_and_one_info_line(tmp_path: Path) -> None:
    p = tmp_path / "t-0" / "partition.metadata"
    p.parent.mkdir()
    p.write_text("version: 1\ntopic_id: dGVzdHRvcGljdGVzdDAxMg\nextra: 1\n")
    res = CliRunner().invoke(cli, ["decode", str(p)])
    assert res.exit_code == 0, res.output
    rows = [json.loads(x) for x in res.output.splitlines()]
    assert rows[0] == {"type": "partition_metadata", "version": 1, "topic_id": "dGVzdHRvcGljdGVzdDAxMg"}
    assert [r["type"] for r in rows] == ["partition_metadata", "info"]
    assert "version 1" in rows[1]["reason"] and "1 line after the topic id" in rows[1]["reason"]
    p.write_text("version: 0\ntopic_id: dGVzdHRvcGljdGVzdDAxMg")  # as Kafka writes it: no note
    assert [r["type"] for r in decode_path(p)] == ["partition_metadata"]
