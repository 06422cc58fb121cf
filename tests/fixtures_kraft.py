"""A small hand-built KRaft metadata log with one of each event the metadata-log rules look at (shared by the
ingestion unit tests and the Spark end-to-end test)."""

from __future__ import annotations

import datetime as dt

from epochlib.kraft.codec import encode_control_record_batch, encode_metadata_batch

DAY = dt.date(2024, 5, 1)
T = 1714521600000  # 2024-05-01T00:00:00Z
TID = "AAAAAAAAAAAAAAAAAAAAAQ"


def _part(p: int, leader: int) -> tuple:
    return (3, 0, {"partition_id": p, "topic_id": TID, "replicas": [1, 2, 3], "isr": [1, 2, 3], "leader": leader,
                   "leader_epoch": 0, "partition_epoch": 0})


def _pcr(p: int, **changes) -> tuple:
    return (5, 0, {"partition_id": p, "topic_id": TID, **changes})


def metadata_log(last_leader: int) -> bytes:
    """orders (2 partitions) created at T+1s; p0 epoch 1 @ offset 4 (T+10s), p1 ISR shrinks to [2] @5, p1 leader 3
    outside the ISR @6 (T+30s, unclean), p0 epoch 2 @7 (T+40s), expansion to 4 partitions @8-9 (T+100s), p0
    epoch 3 @10 (T+200s, leader ``last_leader``)."""
    batches = [
        (T + 1_000, [(2, 0, {"name": "orders", "topic_id": TID}), _part(0, 1), _part(1, 2)]),
        (T + 10_000, [_pcr(0, leader=2)]),
        (T + 20_000, [_pcr(1, isr=[2])]),
        (T + 30_000, [_pcr(1, leader=3, isr=[3])]),
        (T + 40_000, [_pcr(0, leader=1)]),
        (T + 100_000, [_part(2, 1), _part(3, 2)]),
        (T + 200_000, [_pcr(0, leader=last_leader)]),
    ]
    out = [encode_control_record_batch([(2, {"leader_id": 1, "voters": [{"voter_id": 1}],
                                             "granting_voters": [{"voter_id": 1}]})],
                                       base_offset=0, raft_epoch=1, timestamp=T)]
    off = 1
    for ts, recs in batches:
        out.append(encode_metadata_batch(recs, base_offset=off, raft_epoch=1, timestamp=ts))
        off += len(recs)
    return b"".join(out)
