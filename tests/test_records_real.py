"""epochlib.records on segment files written by real Kafka brokers (../shared/real-kafka-data).

Every ``*.log`` must iterate with zero BadBatch and sensible fields, the Arrow batch function
must agree with the reference, and in the KRaft single-broker snapshot the batches'
partitionLeaderEpoch must agree with the partition's ``leader-epoch-checkpoint``.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from epochlib.records import BadBatch, Batch, batches_arrow, iter_batches, split_points

MIN_TS = 1_262_304_000_000  # 2010-01-01: real timestamps are after this


def _logs(root: Path) -> list[Path]:
    logs = sorted(root.rglob("*.log"))
    if not logs:
        pytest.skip("no .log segments in the real data folder")
    return logs


def _checkpoint(path: Path) -> list[tuple[int, int]]:
    """Minimal leader-epoch-checkpoint parse: version line, count line, 'epoch start' lines."""
    lines = path.read_text().split("\n")
    assert lines[0].strip() == "0", f"{path}: checkpoint version {lines[0]!r}"
    count = int(lines[1])
    entries = [tuple(int(x) for x in line.split()) for line in lines[2 : 2 + count]]
    assert len(entries) == count
    return entries  # type: ignore[return-value]


def test_every_real_segment_decodes_cleanly(real_data):
    total_batches = total_records = 0
    for log in _logs(real_data):
        buf = log.read_bytes()
        segment_base = int(log.stem)
        items = list(iter_batches(buf))
        bad = [b for b in items if isinstance(b, BadBatch)]
        assert not bad, f"{log}: {bad[0].reason} at {bad[0].position}"
        next_offset = segment_base
        pos = 0
        for b in items:
            assert b.position == pos, log
            pos += b.size
            assert b.magic in (0, 1, 2) and b.crc_valid
            assert b.base_offset >= next_offset, f"{log}: offsets go backwards at {b.position}"
            assert b.last_offset >= b.base_offset
            assert b.records_count == len(b.records)
            assert all(b.base_offset <= r.offset <= b.last_offset for r in b.records)
            assert [r.offset for r in b.records] == sorted({r.offset for r in b.records})
            assert all(r.timestamp >= MIN_TS for r in b.records), log
            if b.is_control:
                assert all(r.control_name and r.control_type is not None for r in b.records)
            if log.parent.name.startswith("__consumer_offsets") and not b.is_control:
                # coordinator keys start with an int16 record type 0..24 (spec §1.2)
                assert all(
                    r.key is not None and 0 <= struct.unpack(">h", r.key[:2])[0] <= 24 for r in b.records
                )
            next_offset = b.last_offset + 1
        assert pos == len(buf)
        total_batches += len(items)
        total_records += sum(len(b.records) for b in items)
    assert total_batches > 0 and total_records > 0


def test_arrow_agrees_with_reference_on_real_segments(real_data):
    for log in _logs(real_data):
        buf = log.read_bytes()
        ref = list(iter_batches(buf, base_position=7))
        res = batches_arrow(buf, base_position=7)
        t = res.batches.to_pydict()
        assert t["position"] == [b.position for b in ref]
        assert t["partition_leader_epoch"] == [b.partition_leader_epoch for b in ref]
        assert t["last_offset"] == [b.last_offset for b in ref]
        assert not any(t["error"])
        r = res.records.to_pydict()
        assert list(
            zip(r["offset"], r["timestamp"], r["key"], r["value"], r["control_type"], strict=True)
        ) == [(x.offset, x.timestamp, x.key, x.value, x.control_type) for b in ref for x in b.records], log


def test_split_points_on_real_segments(real_data):
    for log in _logs(real_data)[:40]:
        buf = log.read_bytes()
        ranges = split_points(lambda o, n, buf=buf: buf[o : o + n], len(buf), 4096)
        pieces = [b for s, e in ranges for b in iter_batches(buf[s:e], base_position=s, decode_records=False)]
        assert [b.position for b in pieces] == [b.position for b in iter_batches(buf, decode_records=False)]


def test_kraft_leader_epochs_match_checkpoint(real_data):
    root = real_data / "kraft-single-broker-2024"
    if not root.is_dir():
        pytest.skip("kraft-single-broker-2024 not present")
    checked = 0
    for part in sorted(root.glob("__consumer_offsets-*")):
        entries = _checkpoint(part / "leader-epoch-checkpoint")
        for log in sorted(part.glob("*.log")):
            for b in iter_batches(log.read_bytes(), decode_records=False):
                assert isinstance(b, Batch)
                expected = max((e for e in entries if e[1] <= b.base_offset), key=lambda e: e[1])[0]
                assert b.partition_leader_epoch == expected, f"{log} offset {b.base_offset}"
                checked += 1
    assert checked > 0
    # the documented case: __consumer_offsets-0 steps 2 -> 4 -> 6 -> 8 at offsets 0, 3, 9, 34
    batches = list(iter_batches((root / "__consumer_offsets-0" / "00000000000000000000.log").read_bytes()))
    steps = {}
    for b in batches:
        steps.setdefault(b.partition_leader_epoch, b.base_offset)
    assert steps == {2: 0, 4: 3, 6: 9, 8: 34}
