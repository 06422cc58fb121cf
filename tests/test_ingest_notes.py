"""Units decoded with a note (issue 12 items 1 and 5) reach the silver tables as rows with the note in a
column, never as quarantine rows: the executor functions (no Spark) and one end-to-end run."""

from __future__ import annotations

import base64
import json
import struct

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from fixtures_ingest import DAY1, T1, capture_line
from test_trailing_bytes import _rdkafka_mock_v12

from jobs.ingest import metadata as md
from jobs.ingest._kv import COMMIT_PASS, SIDE_PASS, decode_kv

KEY = struct.pack(">hh", 1, 1) + b"g" + struct.pack(">h", 1) + b"t" + struct.pack(">i", 0)
V3 = struct.pack(">hqih", 3, 40, 5, 0) + struct.pack(">q", T1)
V5 = struct.pack(">hqi", 5, 41, 6) + b"\x01" + struct.pack(">q", T1) + b"\x00"  # v4 layout, version 5
GROUP_KEY = struct.pack(">hh", 2, 1) + b"g"
# GroupMetadataValue v3 (no members), and the same group in the v4 (flexible) layout marked version 5
GV3 = (struct.pack(">hh", 3, 8) + b"consumer" + struct.pack(">ih", 4, 5) + b"range" + struct.pack(">h", 1) + b"m"
       + struct.pack(">qi", T1, 0))
GV5 = struct.pack(">h", 5) + b"\x09consumer" + struct.pack(">i", 4) + b"\x06range\x02m" + struct.pack(">q", T1) + b"\x01\x00"


def _kv(keys, values, p):
    n = len(keys)
    ctx = {"source": pa.array(["s"] * n), "position": pa.array(range(n), pa.int64()),
           "log_offset": pa.array(range(n), pa.int64()), "record_ms": pa.array([T1] * n, pa.int64())}
    out = list(decode_kv(pa.array(keys, pa.binary()), pa.array(values, pa.binary()), ctx, p, unit="line",
                         source="s"))
    return [b for b, _, _ in out if b is not None], sum(bad for _, bad, _ in out)


def test_commit_and_group_rows_carry_the_marks():
    keys = [KEY, KEY + b"\x00", KEY, GROUP_KEY, GROUP_KEY + b"\x00"]
    values = [V3, V3, V5, GV3, GV5]
    (commits,), _ = _kv(keys[:3], values[:3], COMMIT_PASS)
    assert commits["committed_offset"].to_pylist() == [40, 40, 41]
    assert commits["value_version"].to_pylist() == [3, 3, 5]
    assert commits["value_version_above_known"].to_pylist() == [False, False, True]
    assert commits["trailing_bytes"].to_pylist() == [0, 1, 0]
    batches, n_bad = _kv(keys[3:], values[3:], SIDE_PASS)
    side = pa.Table.from_batches(batches)
    groups = side.filter(pc.equal(side["row_kind"], "group")).to_pylist()
    assert [(g["generation"], g["value_version"], g["value_version_above_known"], g["trailing_bytes"])
            for g in groups] == [(4, 3, False, 0), (4, 5, True, 1)]
    assert n_bad == 0


def test_a_capture_line_with_a_trailing_byte_is_decoded_not_quarantined(tmp_path):
    p = tmp_path / "cap.jsonl"
    p.write_text("\n".join([
        capture_line(T1, "rdkafka", "127.0.0.1:39617", 12, _rdkafka_mock_v12(b"\x00")),
        capture_line(T1 + 1, "rdkafka", "127.0.0.1:39617", 12, _rdkafka_mock_v12(b"")[:-1]),  # short: quarantined
    ]) + "\n")
    out = pa.Table.from_batches(list(md._decode_jsonl(str(p), {})), schema=md.WORK).to_pylist()
    obs = [r for r in out if r["row_kind"] == "observation"]
    assert [(r["position"], r["partition"], r["trailing_bytes"]) for r in obs] == [(1, 0, 1), (1, 1, 1), (1, 2, 1)]
    (q,) = [r for r in out if r["row_kind"] == "quarantine"]
    assert q["position"] == 2
    (stats,) = [r for r in out if r["row_kind"] == "stats"]
    assert (stats["n_read"], stats["n_bad"]) == (2, 1)


@pytest.mark.spark
def test_end_to_end_notes_reach_the_silver_tables_and_counts_reconcile(spark, tmp_path):
    from jobs.audit import run_audit
    from jobs.config import parse_config
    from jobs.sink import read_table_arrow

    (tmp_path / "md").mkdir()
    (tmp_path / "md" / "caps.jsonl").write_text(
        capture_line(T1, "rdkafka", "127.0.0.1:39617", 12, _rdkafka_mock_v12(b"\x00")) + "\n")
    (tmp_path / "off").mkdir()
    lines = [json.dumps({"key": base64.b64encode(k).decode(), "value": base64.b64encode(v).decode(),
                         "partition": 4, "offset": i, "timestamp": T1})
             for i, (k, v) in enumerate([(KEY, V5), (KEY + b"\x00\x00", V3)])]
    (tmp_path / "off" / "commits.jsonl").write_text("\n".join(lines) + "\n")
    config = parse_config({"cluster": "notes", "inputs": {"metadata": str(tmp_path / "md"),
                                                          "offsets": str(tmp_path / "off")},
                           "output": {"root": str(tmp_path / "out")}})
    result = run_audit(spark, config, DAY1, DAY1, reports=[], progress_interval=0)
    obs = read_table_arrow("metadata_observations", config).to_pylist()
    assert sorted((r["partition"], r["trailing_bytes"]) for r in obs) == [(0, 1), (1, 1), (2, 1)]
    commits = read_table_arrow("offset_commits", config).to_pylist()
    assert sorted((r["committed_offset"], r["value_version"], r["value_version_above_known"], r["trailing_bytes"])
                  for r in commits) == [(40, 3, False, 2), (41, 5, True, 0)]
    assert result.quarantined == 0
    assert result.ingest.counts
    for c in result.ingest.counts:
        assert c.units_read == c.units_decoded + c.units_quarantined and c.units_quarantined == 0
