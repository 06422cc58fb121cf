"""Writers for the simulator's output, in the exact input layout of DESIGN.md.

```
<out>/offsets/broker=<id>/__consumer_offsets-<N>/<20-digit base offset>.log
<out>/logdirs/broker=<id>/snapshot=<YYYYMMDDTHHMMSSZ>/<topic>-<p>/{leader-epoch-checkpoint,partition.metadata,*.log}
<out>/logdirs/broker=<id>/snapshot=<...>/{log-start-offset,replication-offset,recovery-point-offset}-checkpoint
<out>/metadata/*.jsonl, <out>/metadata/*.pcap
<out>/truth.jsonl
```

Segments are streamed to disk batch by batch (bounded memory) and rolled at a size limit, as a broker
rolls at ``segment.bytes``.
"""

from __future__ import annotations

import base64
import datetime as dt
import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any, BinaryIO

from ._codec import need

__all__ = ["iso_ms", "snapshot_name", "SegmentLog", "MetadataCaptures", "TruthLog", "write_snapshot_files"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)


def iso_ms(ms: int) -> str:
    """ISO-8601 UTC with milliseconds, e.g. ``2024-03-04T01:02:03.456Z``."""
    t = _EPOCH + dt.timedelta(milliseconds=ms)
    return t.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def snapshot_name(ms: int) -> str:
    """The snapshot folder's time text (UTC, whole seconds): ``YYYYMMDDTHHMMSSZ``."""
    return (_EPOCH + dt.timedelta(milliseconds=ms)).strftime("%Y%m%dT%H%M%SZ")


class SegmentLog:
    """One partition's ``.log`` segments in a directory: appends encoded batches, rolls at a size."""

    __slots__ = ("dir", "segment_bytes", "next_offset", "_fh", "_size", "segments", "batches", "bytes")

    def __init__(self, directory: Path, segment_bytes: int, next_offset: int = 0) -> None:
        self.dir = directory
        self.segment_bytes = segment_bytes
        self.next_offset = next_offset
        self._fh: BinaryIO | None = None
        self._size = 0
        self.segments = 0
        self.batches = 0
        self.bytes = 0

    def append(self, batch: bytes, n_offsets: int) -> int:
        """Write one encoded batch whose base offset is ``next_offset``; returns that base offset."""
        if self._fh is None or (self._size and self._size + len(batch) > self.segment_bytes):
            self._roll()
        assert self._fh is not None
        self._fh.write(batch)
        self._size += len(batch)
        self.batches += 1
        self.bytes += len(batch)
        base = self.next_offset
        self.next_offset += n_offsets
        return base

    def _roll(self) -> None:
        if self._fh is not None:
            self._fh.close()
        self.dir.mkdir(parents=True, exist_ok=True)
        self._fh = open(self.dir / f"{self.next_offset:020d}.log", "wb")  # noqa: SIM115 - long-lived handle
        self._size = 0
        self.segments += 1

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None


class MetadataCaptures:
    """MetadataResponse captures: JSONL lines (two files with the two timestamp/broker spellings) and a
    pcap of request/response TCP segments for the clients captured on the wire."""

    def __init__(self, directory: Path, date_tag: str) -> None:
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        # file "a": ISO timestamps and "host:port" brokers; file "b": epoch ms and node ids.
        self._a = open(self.dir / f"captures-{date_tag}-a.jsonl", "w", encoding="utf-8")  # noqa: SIM115
        self._b = open(self.dir / f"captures-{date_tag}-b.jsonl", "w", encoding="utf-8")  # noqa: SIM115
        self.pcap_path = self.dir / f"traffic-{date_tag}.pcap"
        self._segments: list[tuple[float, str, int, str, int, bytes]] = []
        self.jsonl_lines = 0
        self.pcap_pairs = 0

    def jsonl(self, ts: int, client_id: str, broker_id: int, broker_addr: str, api_version: int, response: bytes,
              *, style: str) -> None:  # fmt: skip
        """One JSONL line; ``response`` is header + body (no size prefix)."""
        if style == "a":
            line = {"ts": iso_ms(ts), "client_id": client_id, "broker": broker_addr}
            fh = self._a
        else:
            line = {"ts": ts, "client_id": client_id, "broker": broker_id}
            fh = self._b
        line["api_version"] = api_version
        line["response"] = base64.b64encode(response).decode("ascii")
        fh.write(json.dumps(line, separators=(",", ":")) + "\n")
        self.jsonl_lines += 1

    def wire(self, ts: int, client_ip: str, client_port: int, broker_ip: str, broker_port: int,
             request: bytes, response: bytes, rtt_ms: int) -> None:  # fmt: skip
        """A framed request and its framed response on one TCP connection."""
        self._segments.append((ts / 1000.0, client_ip, client_port, broker_ip, broker_port, request))
        self._segments.append(((ts + rtt_ms) / 1000.0, broker_ip, broker_port, client_ip, client_port, response))
        self.pcap_pairs += 1

    def close(self) -> None:
        self._a.close()
        self._b.close()
        if self._segments:
            pcap = need("pcap", "write_pcap")
            with open(self.pcap_path, "wb") as fh:
                pcap.write_pcap(fh, self._segments)
        self._segments = []


class TruthLog:
    """The ground truth: every finding the simulator caused, written sorted as ``truth.jsonl``."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.rows: list[dict[str, Any]] = []

    def add(self, rule: str, kind: str, severity: str, event_ts: int, note: str, **subject: Any) -> dict[str, Any]:
        row: dict[str, Any] = {"rule": rule, "kind": kind, "severity": severity, "event_ts": event_ts,
                               "event_time": iso_ms(event_ts)}  # fmt: skip
        for k in ("topic", "topic_id", "partition", "group_id", "client_id", "broker"):
            if k in subject and subject[k] is not None:
                row[k] = subject.pop(k)
        subject = {k: v for k, v in subject.items() if v is not None}
        row.update(subject)
        row["note"] = note
        self.rows.append(row)
        return row

    def counts(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for r in self.rows:
            k = f"{r['rule']}:{r['kind']}"
            out[k] = out.get(k, 0) + 1
        return dict(sorted(out.items()))

    def close(self) -> None:
        def key(r: dict[str, Any]):
            return (r["event_ts"], r["rule"], r["kind"], r.get("topic", ""), r.get("partition", -1),
                    r.get("group_id", ""), r.get("client_id", ""), r.get("broker", -1), r.get("offset", -1))  # fmt: skip

        self.rows.sort(key=key)
        with open(self.path, "w", encoding="utf-8") as fh:
            for i, r in enumerate(self.rows):
                fh.write(json.dumps({"id": i, **r}, separators=(",", ":"), sort_keys=False) + "\n")


def write_snapshot_files(
    root: Path,
    partitions: Iterable[dict[str, Any]],
    log_start: dict[tuple[str, int], int],
    high_watermarks: dict[tuple[str, int], int],
    recovery_points: dict[tuple[str, int], int],
) -> int:
    """One broker snapshot: per partition dir (checkpoint text, partition.metadata, segments) and the
    three root checkpoints. ``partitions`` items: topic, partition, topic_id, checkpoint (text),
    segments (list of (base_offset, bytes)). Returns the number of files written."""
    ck = need("checkpoint", "format_offset_checkpoint", "format_partition_metadata")
    root.mkdir(parents=True, exist_ok=True)
    n = 0
    for p in partitions:
        d = root / f"{p['topic']}-{p['partition']}"
        d.mkdir(parents=True, exist_ok=True)
        (d / "leader-epoch-checkpoint").write_bytes(p["checkpoint"].encode("utf-8"))
        (d / "partition.metadata").write_bytes(ck.format_partition_metadata(p["topic_id"]).encode("utf-8"))
        n += 2
        for base, data in p.get("segments", ()):
            (d / f"{base:020d}.log").write_bytes(data)
            n += 1
    for name, entries in (("log-start-offset-checkpoint", log_start), ("replication-offset-checkpoint", high_watermarks),
                          ("recovery-point-offset-checkpoint", recovery_points)):  # fmt: skip
        (root / name).write_bytes(ck.format_offset_checkpoint(entries).encode("utf-8"))
        n += 1
    return n
