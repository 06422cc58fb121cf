"""Builders of small ingestion inputs in DESIGN.md's layout, with what each must decode to.

:func:`build_inputs` writes one tree with every input kind and form (segments with every codec, a legacy
message set, transactions, Parquet/JSONL dumps, both tool-dump families, snapshots of two brokers × two
times, JSONL and pcap captures) plus deliberately bad units, and returns an :class:`Expect` with the
counts and values the tests assert. All event times fall on DAY1 except a few commits on DAY2.
"""

from __future__ import annotations

import base64
import datetime as dt
import io
import json
import struct
from dataclasses import dataclass, field
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from epochlib import checkpoint, coordinator, pcap, protocol, records
from epochlib.records import NewRecord

DAY1 = dt.date(2024, 3, 1)
DAY2 = dt.date(2024, 3, 2)
T1 = 1709251200000 + 3_600_000  # 2024-03-01T01:00:00Z
T2 = 1709337600000 + 3_600_000  # 2024-03-02T01:00:00Z
TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"


@dataclass
class Expect:
    """What the inputs hold (counts per silver table and per (kind, unit))."""

    commits_day1: int = 0
    commits_day2: int = 0
    groups: int = 0
    txn: dict[str, str] = field(default_factory=dict)  # group_id -> txn_state
    lineage_rows: int = 0
    record_batches: int = 0
    observations: int = 0
    quarantine: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, unit) -> n
    unpaired: dict[tuple[str, str], int] = field(default_factory=dict)  # (kind, unit) -> limits of the input


def commit_kv(group: str, topic: str, partition: int, offset: int, epoch: int, ts: int) -> tuple[bytes, bytes]:
    return (coordinator.encode_offset_commit_key(group, topic, partition),
            coordinator.encode_offset_commit_value(offset, leader_epoch=epoch, commit_timestamp=ts))


def _group_kv(group: str, ts: int) -> tuple[bytes, bytes]:
    assignment = coordinator.encode_consumer_assignment(
        {"assigned_partitions": [{"topic": "orders", "partitions": [0, 1]}], "user_data": None}, 1)
    sub = coordinator.encode_consumer_subscription({"topics": ["orders"], "user_data": None,
                                                    "owned_partitions": []}, 1)
    value = coordinator.encode_group_metadata_value({
        "protocol_type": "consumer", "generation": 3, "protocol": "range", "leader": "m-1",
        "current_state_timestamp": ts, "members": [{
            "member_id": "m-1", "group_instance_id": None, "client_id": "client-a", "client_host": "/10.0.0.1",
            "rebalance_timeout": 300000, "session_timeout": 45000, "subscription": sub,
            "assignment": assignment}]})
    return coordinator.encode_key(2, {"group": group}), value


def _seg_path(root: Path, broker: int, part: int) -> Path:
    p = root / f"broker={broker}" / f"__consumer_offsets-{part}" / "00000000000000000000.log"
    p.parent.mkdir(parents=True, exist_ok=True)
    return p


def write_offsets_segments(root: Path, ex: Expect) -> None:
    """Segments: every codec, a group record, transactions, a legacy message set, bad units."""
    out = bytearray()
    off = 0
    for i, codec in enumerate(["none", "gzip", "snappy", "lz4", "zstd"]):
        recs = [NewRecord(*commit_kv("g-codec", "orders", i, 100 + j, 5, T1 + j), T1 + j) for j in range(3)]
        out += records.encode_batch(recs, base_offset=off, partition_leader_epoch=5, compression=codec)
        off += 3
    ex.commits_day1 += 15
    k, v = _group_kv("g-codec", T1)
    out += records.encode_batch([NewRecord(k, v, T1)], base_offset=off, partition_leader_epoch=5)
    off += 1
    ex.groups += 1
    # transactions: producer 7 committed, 8 aborted, 9 open
    for pid, group in ((7, "g-txn-c"), (8, "g-txn-a"), (9, "g-txn-o")):
        out += records.encode_batch([NewRecord(*commit_kv(group, "orders", 0, 5, 5, T1), T1)], base_offset=off,
                                    partition_leader_epoch=5, producer_id=pid, producer_epoch=0,
                                    is_transactional=True)
        off += 1
        ex.commits_day1 += 1
    for pid, marker in ((7, "COMMIT"), (8, "ABORT")):
        out += records.encode_control_batch(marker, base_offset=off, partition_leader_epoch=5, producer_id=pid,
                                            producer_epoch=0, coordinator_epoch=1, timestamp=T1)
        off += 1
    ex.txn.update({"g-txn-c": "committed", "g-txn-a": "aborted", "g-txn-o": "open"})
    # a day-2 commit
    out += records.encode_batch([NewRecord(*commit_kv("g-day2", "orders", 0, 7, 6, T2), T2)], base_offset=off,
                                partition_leader_epoch=6)
    off += 1
    ex.commits_day2 += 1
    _seg_path(root, 1, 0).write_bytes(bytes(out))

    # legacy message sets (v1 gzip wrapper, v0 plain)
    legacy = records.encode_legacy_message_set(
        [NewRecord(*commit_kv("g-legacy", "orders", 0, 10 + j, -1, T1), T1) for j in range(2)],
        magic=1, base_offset=0, compression="gzip")
    legacy += records.encode_legacy_message_set(
        [NewRecord(*commit_kv("g-legacy", "orders", 1, 20, -1, T1), -1)], magic=0, base_offset=2)
    ex.commits_day1 += 3
    _seg_path(root, 1, 1).write_bytes(legacy)

    # bad units: a CRC mismatch, an undecodable key; and a final batch cut short by the end of the file (a copy of
    # the active segment: Kafka's reader ends the log there), which is no unit but a limit of the copy
    good = records.encode_batch([NewRecord(*commit_kv("g-bad", "orders", 0, 1, 5, T1), T1)], base_offset=0,
                                partition_leader_epoch=5)
    bad_crc = bytearray(records.encode_batch([NewRecord(*commit_kv("g-bad", "orders", 0, 2, 5, T1), T1)],
                                             base_offset=1, partition_leader_epoch=5))
    bad_crc[-1] ^= 0xFF
    bad_key = records.encode_batch([NewRecord(b"\x00\x01\x00", b"\x00\x03", T1)], base_offset=2,
                                   partition_leader_epoch=5)
    tail = records.encode_batch([NewRecord(*commit_kv("g-bad", "orders", 0, 3, 5, T1), T1)], base_offset=3,
                                partition_leader_epoch=5)[:40]
    _seg_path(root, 1, 2).write_bytes(good + bytes(bad_crc) + bad_key + tail)
    ex.commits_day1 += 1
    ex.quarantine[("offsets", "batch")] = ex.quarantine.get(("offsets", "batch"), 0) + 1
    ex.quarantine[("offsets", "record")] = ex.quarantine.get(("offsets", "record"), 0) + 1
    ex.unpaired[("offsets", "batch")] = ex.unpaired.get(("offsets", "batch"), 0) + 1


def write_offsets_dumps(root: Path, ex: Expect) -> None:
    """Parquet and JSONL dumps (Spark Kafka source schema), console JSON, Scala lines, kafka-dump-log."""
    d = root / "dumps"
    d.mkdir(parents=True, exist_ok=True)
    kvs = [commit_kv("g-parquet", "orders", 0, 30 + j, 5, T1) for j in range(4)]
    pq.write_table(pa.table({
        "key": pa.array([k for k, _ in kvs], pa.binary()), "value": pa.array([v for _, v in kvs], pa.binary()),
        "topic": ["__consumer_offsets"] * 4, "partition": pa.array([3] * 4, pa.int32()),
        "offset": pa.array(range(4), pa.int64()),
        "timestamp": pa.array([T1 * 1000] * 4, pa.timestamp("us", tz="UTC")),
    }), d / "commits.parquet")
    ex.commits_day1 += 4
    lines = []
    for j in range(3):
        k, v = commit_kv("g-jsonl", "orders", 0, 40 + j, 5, T1)
        ts = "2024-03-01T01:00:00.000Z" if j % 2 else T1
        lines.append(json.dumps({"key": base64.b64encode(k).decode(), "value": base64.b64encode(v).decode(),
                                 "partition": 4, "offset": j, "timestamp": ts}))
    tomb_k, _ = commit_kv("g-jsonl", "orders", 0, 0, 5, T1)
    lines.append(json.dumps({"key": base64.b64encode(tomb_k).decode(), "value": None, "partition": 4,
                             "offset": 3, "timestamp": T1}))
    lines.append("{not json")
    (d / "commits.jsonl").write_text("\n".join(lines) + "\n")
    ex.commits_day1 += 4
    ex.quarantine[("offsets", "line")] = ex.quarantine.get(("offsets", "line"), 0) + 1
    console = "".join(json.dumps({"key": {"type": 1, "data": {"group": "g-console", "topic": "orders",
                                                               "partition": 0}},
                                  "value": {"version": 3, "data": {"offset": 50 + j, "leaderEpoch": 5,
                                                                   "metadata": "", "commitTimestamp": T1}}},
                                 separators=(",", ":")) for j in range(2))
    (d / "console.txt").write_text(console)
    ex.commits_day1 += 2
    scala = (f"[g-scala,orders,0]::OffsetAndMetadata(offset=60, leaderEpoch=Optional[5], metadata=, "
             f"commitTimestamp={T1}, expireTimestamp=None)\n"
             f"[g-scala,orders,1]::OffsetAndMetadata(offset=61, leaderEpoch=Optional.empty, metadata=, "
             f"commitTimestamp={T1}, expireTimestamp=None)\n")
    (d / "scala.txt").write_text(scala)
    ex.commits_day1 += 2
    dump = (
        "Dumping /var/kafka/__consumer_offsets-5/00000000000000000000.log\n"
        "Log starting offset: 0\n"
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 "
        "producerEpoch: -1 partitionLeaderEpoch: 5 isTransactional: false isControl: false "
        f"deleteHorizonMs: OptionalLong.empty position: 0 CreateTime: {T1} size: 120 magic: 2 "
        "compresscodec: none crc: 1 isvalid: true\n"
        f"| offset: 0 CreateTime: {T1} keySize: 12 valueSize: 24 sequence: -1 headerKeys: [] "
        'key: {"type":"1","data":{"group":"g-dumplog","topic":"orders","partition":0}} '
        f'payload: {{"version":"3","data":{{"offset":70,"leaderEpoch":5,"metadata":"","commitTimestamp":{T1}}}}}\n'
    )
    (d / "dumplog.txt").write_text(dump)
    ex.commits_day1 += 1
    # non-Kafka files: one with an unknown name, one .txt that is no dump
    (root / "notes.bin").write_bytes(b"\x00\x01hello")
    (d / "readme.txt").write_text("This folder holds exports.\nNothing else.\n")
    ex.quarantine[("offsets", "file")] = ex.quarantine.get(("offsets", "file"), 0) + 2


def snapshot_ms(name: str) -> int:
    return int(dt.datetime.strptime(name, "%Y%m%dT%H%M%SZ").replace(tzinfo=dt.timezone.utc).timestamp() * 1000)


def write_logdirs(root: Path, ex: Expect) -> None:
    """Two brokers × two snapshots of ``orders-0``; the last snapshot of broker 2 has a malformed checkpoint."""
    snaps = ["20240301T060000Z", "20240301T180000Z"]
    for broker in (1, 2):
        for si, snap in enumerate(snaps):
            base = root / f"broker={broker}" / f"snapshot={snap}"
            pdir = base / "orders-0"
            pdir.mkdir(parents=True, exist_ok=True)
            entries = [(0, 0), (2, 10)] + ([(4, 20)] if si else [])
            text = checkpoint.format_leader_epoch_checkpoint(entries)
            if broker == 2 and si == 1:
                text = "0\n3\n0 0\n2 10\n"  # count says 3, two entries: rule L1
                ex.quarantine[("logdirs", "file")] = ex.quarantine.get(("logdirs", "file"), 0) + 1
            else:
                ex.lineage_rows += 1
            (pdir / "leader-epoch-checkpoint").write_text(text)
            (pdir / "partition.metadata").write_text(checkpoint.format_partition_metadata(TOPIC_ID))
            seg = b"".join(records.encode_batch([NewRecord(b"k", b"v", T1 + i)], base_offset=i * 10,
                                                partition_leader_epoch=2 * i) for i in range(2 + si))
            (pdir / "00000000000000000000.log").write_bytes(seg)
            (pdir / "00000000000000000000.index").write_bytes(b"")
            ex.record_batches += 2 + si
            end = 10 * (2 + si)
            for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint"):
                (base / name).write_text(checkpoint.format_offset_checkpoint({("orders", 0): end}))
            (base / "log-start-offset-checkpoint").write_text(checkpoint.format_offset_checkpoint({("orders", 0): 0}))


def metadata_body(epoch: int) -> dict:
    return {
        "throttle_time_ms": 0, "brokers": [{"node_id": 1, "host": "b1", "port": 9092, "rack": None}],
        "cluster_id": "clu", "controller_id": 1,
        "topics": [{"error_code": 0, "name": "orders", "topic_id": TOPIC_ID, "is_internal": False,
                    "partitions": [{"error_code": 0, "partition_index": p, "leader_id": 1, "leader_epoch": epoch,
                                    "replica_nodes": [1, 2], "isr_nodes": [1, 2], "offline_replicas": []}
                                   for p in range(2)],
                    "topic_authorized_operations": -(1 << 31)}],
        "cluster_authorized_operations": -(1 << 31), "error_code": 0,
    }


def capture_line(ts: int | str, client_id: str, broker: str | int, version: int, response: bytes, **extra) -> str:
    """One JSONL capture line (DESIGN.md layout); ``extra`` adds keys such as ``metadata_token``."""
    return json.dumps({"ts": ts, "client_id": client_id, "broker": broker, "api_version": version,
                       "response": base64.b64encode(response).decode(), **extra})


def write_metadata(root: Path, ex: Expect) -> None:
    """A JSONL capture (two good responses, one undecodable) and a pcap with one Metadata exchange."""
    root.mkdir(parents=True, exist_ok=True)
    lines = []
    for i, (ver, ts) in enumerate(((9, T1), (12, "2024-03-01T02:00:00Z"))):
        resp = protocol.encode_metadata_response(metadata_body(4 + i), ver, 100 + i)
        lines.append(capture_line(ts, "client-a", "b1:9092", ver, resp))
    lines.append(capture_line(T1, "client-a", 1, 12, b"\x00\x00\x00\x01\xff"))
    (root / "captures.jsonl").write_text("\n".join(lines) + "\n")
    ex.observations += 4
    ex.quarantine[("metadata", "line")] = ex.quarantine.get(("metadata", "line"), 0) + 1
    req = protocol.encode_metadata_request({"topics": None}, 9, 200, "client-b")
    resp = protocol.encode_metadata_response(metadata_body(6), 9, 200)
    framed = lambda b: struct.pack(">i", len(b)) + b  # noqa: E731
    buf = io.BytesIO()
    t = T1 / 1000
    pcap.write_pcap(buf, [(t, "10.0.0.9", 50000, "10.0.0.1", 9092, framed(req)),
                          (t + 0.01, "10.0.0.1", 9092, "10.0.0.9", 50000, framed(resp))])
    (root / "capture.pcap").write_bytes(buf.getvalue())
    ex.observations += 2
    (root / "junk.csv").write_text("a,b\n")
    ex.quarantine[("metadata", "file")] = ex.quarantine.get(("metadata", "file"), 0) + 1


def build_inputs(base: Path) -> tuple[dict[str, str], Expect]:
    """Write the full input tree under ``base``; returns ({offsets, logdirs, metadata} paths, Expect)."""
    ex = Expect()
    paths = {k: base / k for k in ("offsets", "logdirs", "metadata")}
    write_offsets_segments(paths["offsets"], ex)
    write_offsets_dumps(paths["offsets"], ex)
    write_logdirs(paths["logdirs"], ex)
    write_metadata(paths["metadata"], ex)
    return {k: str(v) for k, v in paths.items()}, ex
