"""MetadataResponse captures -> ``metadata_observations`` (executor + Spark parts).

- JSONL: one response per line ``{"ts", "client_id", "broker", "api_version", "response"}`` (``response``
  = base64 of header + body, no size prefix), optionally ``"metadata_token"``: a monotone cluster-metadata
  token recorded beside the response (e.g. the KRaft metadata offset a capturing proxy saw), an integer
  0..2^63-1 that rule M2 compares; absent or null = null, anything else quarantines the line (a dropped token
  would hide staleness silently), and optionally ``"client_host"``: the client's host (a string of at most 255
  characters, "" read as none; anything else quarantines the line), which with ``client_id`` tells one client
  from another. Unit ``line``, ``position`` = line number. A large capture is cut into line ranges decoded by
  many tasks (:mod:`.lines`), with the line numbers of the whole file.
- pcap / pcapng: :func:`epochlib.pcap.iter_exchanges` reassembles the TCP streams on the configured broker
  ports and pairs requests with responses by correlation id; the API version comes from the request, the
  client id from its header. Unit ``frame``, ``position`` = the response's frame number. What the capture
  holds that cannot be decoded is quarantined: a corrupt frame, and one row per TLS-encrypted TCP stream on a
  broker port (counted as a frame). Limits of the capture are not bad input and are counted apart, in
  ``audit_runs.units_unpaired`` (not in ``units_read``): requests or responses whose other half was not
  captured, frames cut by the capture's start, end or a gap. TLS handshakes to ports that are not broker
  ports become one ``info`` line per port for the run's notes. A capture with no exchange on the broker ports
  at all (a wrong ``broker_ports``) gets an ``info`` line naming the TCP ports that carried its traffic
  (:data:`NO_EXCHANGE`; counted only then, in a second walk over its packets), which the metadata source's
  status repeats (:func:`no_exchange_hint`). Traffic carries no metadata token (null).

Each decodable response becomes one row per (topic, partition) via
:func:`epochlib.protocol.metadata_observations_arrow` (a response without topics gives one row with the
topic columns null, as the codec returns it). An undecodable (short or malformed) response is quarantined;
bytes after a complete body are ignored as clients do, and counted in ``trailing_bytes``.

``broker`` is the serving broker's canonical name, resolved once per response by
:func:`epochlib.brokers.canonical_brokers_arrow`: the node id when the capture gives one, or its
``host:port`` is in that response's broker list, or the ``[inputs] broker_addresses`` mapping names it;
else the captured value. ``broker_address`` keeps the captured value (JSONL ``broker`` as written, pcap
peer ``ip:port``); quarantine rows keep the captured value too. ``client_host`` is the client's host: the pcap
client's IP (without the port: one client reaches several brokers over connections with different ports), the
JSONL ``client_host`` as written, else null.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from epochlib import brokers, protocol
from jobs.fs import open_reader

from ._rows import MS_MAX, MS_MIN, RAW_MAX, SIDE_FIELDS, RowBuffer, make_batch, side_row, stats_row, ts_ms
from .lines import read_lines
from .pass_files import PassFiles

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["FILE_SCHEMA", "NO_EXCHANGE", "WORK", "CaptureFiles", "decode_capture_files", "no_exchange_hint",
           "no_exchange_reason", "observation_files", "observations_arrow", "observations_frame"]

_OBS = [
    ("correlation_id", pa.int32()), ("cluster_id", pa.string()), ("controller_id", pa.int32()),
    ("topic", pa.string()), ("topic_id", pa.string()), ("partition", pa.int32()), ("leader_id", pa.int32()),
    ("leader_epoch", pa.int32()), ("replicas", pa.list_(pa.int32())), ("isr", pa.list_(pa.int32())),
    ("offline_replicas", pa.list_(pa.int32())), ("topic_error", pa.int16()), ("partition_error", pa.int16()),
    ("trailing_bytes", pa.int32()),
]

WORK = pa.schema([
    *SIDE_FIELDS,
    pa.field("capture_ms", pa.int64()),
    pa.field("client_id", pa.string()),
    pa.field("broker", pa.string()),
    pa.field("api_version", pa.int16()),
    pa.field("metadata_token", pa.int64()),
    pa.field("broker_address", pa.string()),
    pa.field("client_host", pa.string()),
    *[pa.field(n, t) for n, t in _OBS],
])

FILE_SCHEMA = pa.schema([pa.field("source", pa.string()), pa.field("size", pa.int64()),
                         pa.field("form", pa.string())])

_CHUNK = 4096
_TOKEN_MAX = (1 << 63) - 1  # the silver column is a long
_HOST_MAX = 255  # a host name's longest spelling (RFC 1035); the host goes into findings' sentences


def _broker_text(value: Any) -> str | None:
    return None if value is None else str(value)


def _metadata_token(value: Any) -> int | None:
    """A capture line's optional ``metadata_token``: None when absent/null, else an int 0..2^63-1.

    Raises ValueError for anything else (a string, a float, a bool, a negative or too large number)."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= _TOKEN_MAX:
        raise ValueError(f"bad metadata_token {value!r:.60} (must be an integer 0..2^63-1)")
    return value


def parse_capture_line(line: str) -> tuple[dict[str, Any], bytes, int, int, int | None]:
    """One JSONL capture line: ``(object, response bytes, api_version, capture ms, metadata_token)``.

    The one reading of a line (the ingestion and ``epoch-audit decode`` both use it, so ``decode`` shows the
    error a run quarantines the line with). Raises ValueError (or TypeError, OverflowError, RecursionError,
    binascii.Error: :data:`LINE_ERRORS`) for a line that is not a capture: not a JSON object with a base64
    ``response``, an ``api_version`` that is not an int16 >= 0, a missing or unparseable ``ts``, a bad
    ``metadata_token``, a ``client_host`` that is not a string."""
    obj = json.loads(line)
    if not isinstance(obj, dict):
        raise ValueError("not a JSON object with a base64 response")
    ts = obj.get("ts")
    ms = ts_ms(ts)
    if ms is None:
        raise ValueError(f"missing or unparseable ts {str(ts)[:40]!r}")
    try:  # the line has a good time: whatever else is wrong, it is dated by it (a run of its day counts it)
        if not isinstance(obj.get("response"), str):
            raise ValueError("not a JSON object with a base64 response")
        resp = base64.b64decode(obj["response"], validate=True)
        ver = obj.get("api_version")
        if not isinstance(ver, int) or isinstance(ver, bool) or not 0 <= ver <= 0x7FFF:
            raise ValueError(f"bad api_version {ver!r}")
        token = _metadata_token(obj.get("metadata_token"))
        host = obj.get("client_host")
        if not isinstance(host, (str, type(None))) or (host is not None and len(host) > _HOST_MAX):
            raise ValueError(f"bad client_host {host!r:.60} (must be a string of at most {_HOST_MAX} characters)")
    except LINE_ERRORS as e:
        e.capture_ms = ms  # type: ignore[attr-defined]
        raise
    return obj, resp, ver, ms, token


#: What :func:`parse_capture_line` raises for a line that is not a capture.
LINE_ERRORS = (ValueError, TypeError, OverflowError, RecursionError, binascii.Error)


def _observations(src: str, unit: str, ctx: dict[str, list], responses: list, versions: list,
                  side: RowBuffer, addresses: dict[str, int]) -> tuple[pa.RecordBatch | None, int, int]:
    """Decode a chunk of responses; returns (observation rows, quarantined units, rows out)."""
    n = len(responses)
    if not n:
        return None, 0, 0
    resp_arr, ver_arr = pa.array(responses, pa.binary()), pa.array(versions, pa.int16())
    obs = protocol.metadata_observations_arrow(resp_arr, ver_arr)
    idx = obs.column("response_index").to_numpy(zero_copy_only=False)
    err = obs.column("error")
    bad_mask = pc.is_valid(err).to_numpy(zero_copy_only=False)
    n_bad = 0
    for i in np.unique(idx[bad_mask]).tolist():
        n_bad += 1
        reason = err[int(np.flatnonzero((idx == i) & bad_mask)[0])].as_py()
        side.add(side_row(src, ctx["position"][i], unit, f"undecodable MetadataResponse: {reason}",
                          (responses[i] or b"")[:RAW_MAX], q_ms=ctx["capture_ms"][i],
                          client_id=ctx["client_id"][i], broker=ctx["broker"][i],
                          api_version=versions[i]))
    # (a filter copies every column: ~0.1 s a million observations, spent only when a response was undecodable)
    good = obs.filter(pc.invert(pc.is_valid(err))) if err.null_count < len(err) else obs
    gidx = pa.array(good.column("response_index").to_numpy(zero_copy_only=False).astype(np.int64))
    m = good.num_rows
    if not m:
        return None, n_bad, 0
    # one name per response (not per row): the serving broker's node id where the capture lets us know it
    captured = pa.array(ctx["broker"], pa.string())
    canonical = brokers.canonical_brokers_arrow(captured, resp_arr, ver_arr, addresses)
    cols = {
        "row_kind": pa.array(["observation"] * m), "source": pa.array([src] * m),
        "position": pc.take(pa.array(ctx["position"], pa.int64()), gidx),
        "capture_ms": pc.take(pa.array(ctx["capture_ms"], pa.int64()), gidx),
        "client_id": pc.take(pa.array(ctx["client_id"], pa.string()), gidx),
        "broker": pc.take(canonical, gidx),
        "broker_address": pc.take(captured, gidx),
        "client_host": pc.take(pa.array(ctx["client_host"], pa.string()), gidx),
        "api_version": pc.take(pa.array(versions, pa.int16()), gidx),
        "metadata_token": pc.take(pa.array(ctx["metadata_token"], pa.int64()), gidx),
    }
    for name, _t in _OBS:
        cols[name] = good.column(name)
    return make_batch(WORK, cols, m), n_bad, m


class _Chunk:
    """Captured responses waiting to be decoded together (one Arrow batch call per chunk), with the
    counts of what was decoded and quarantined so far."""

    def __init__(self, src: str, unit: str, side: RowBuffer, addresses: dict[str, int]) -> None:
        self.src, self.unit, self.side, self.addresses = src, unit, side, addresses
        self.ctx: dict[str, list] = {
            k: [] for k in ("position", "capture_ms", "client_id", "broker", "metadata_token", "client_host")
        }
        self.responses: list = []
        self.versions: list = []
        self.bad = self.out = 0

    def add(self, position: int, capture_ms: int | None, client_id: Any, broker: Any, response: bytes,
            version: int, metadata_token: int | None = None, client_host: str | None = None) -> bool:
        """Queue one response (with its validated token and client host, if the capture has them); True when
        the chunk is full and should be flushed."""
        for name, value in (("position", position), ("capture_ms", capture_ms), ("client_id", client_id),
                            ("broker", _broker_text(broker)), ("metadata_token", metadata_token),
                            ("client_host", client_host)):
            self.ctx[name].append(value)
        self.responses.append(response)
        self.versions.append(version)
        return len(self.responses) >= _CHUNK

    def flush(self) -> pa.RecordBatch | None:
        batch, bad, out = _observations(self.src, self.unit, self.ctx, self.responses, self.versions, self.side,
                                        self.addresses)
        self.bad += bad
        self.out += out
        for v in self.ctx.values():
            v.clear()
        self.responses.clear()
        self.versions.clear()
        return batch


def _decode_jsonl(row: dict | str, addresses: dict[str, int]) -> Iterator[pa.RecordBatch]:
    """A JSONL capture (its source, or a file row), or one line range of it
    (:data:`~jobs.ingest.lines.LINE_RANGE_SCHEMA`), with the line numbers of the whole file."""
    if isinstance(row, str):
        row = {"source": row}
    src = row["source"]
    side = RowBuffer(WORK)
    chunk = _Chunk(src, "line", side, addresses)
    n_read = n_bad = 0
    failed = False
    try:
        for line_no, line in read_lines(row):
            if not line.strip():
                continue
            n_read += 1
            try:
                obj, resp, ver, ms, token = parse_capture_line(line)
            except LINE_ERRORS as e:
                n_bad += 1
                # dated by the line's own time when it had a good one (only the token was wrong)
                side.add(side_row(src, line_no, "line", f"bad capture line: {e}", line[:RAW_MAX],
                                  q_ms=getattr(e, "capture_ms", None)))
                continue
            if chunk.add(line_no, ms, obj.get("client_id"), obj.get("broker"), resp, ver, token,
                         obj.get("client_host") or None):  # "" is no host, as an absent key
                batch = chunk.flush()
                if batch is not None:
                    yield batch
    except OSError as e:  # a file the task cannot open or read on: quarantined, as a pcap, not a failed run
        failed = True
        side.add(side_row(src, row.get("start") or 0, "file", f"unreadable: {e}"))
        side.add(stats_row(src, "file", 1, 1, 0))
    batch = chunk.flush()
    if batch is not None:
        yield batch
    if n_read or not failed:
        side.add(stats_row(src, "line", n_read, n_bad + chunk.bad, chunk.out))
    yield side.flush()


def _ms(ts: Any) -> int | None:
    """Capture time of an exchange in epoch ms (``ts`` in seconds as a float, or ms as an int)."""
    if ts is None:
        return None
    if isinstance(ts, float):
        return int(round(ts * 1000)) if math.isfinite(ts) and abs(ts) < 1e15 else None
    return int(ts)


def _host(address: str | None) -> str | None:
    """The host of a captured ``ip:port`` (``[v6]:port`` -> ``v6``): one client reaches several brokers over
    connections with different ports, and M1/M3/M5 follow what one client instance saw."""
    if not address:
        return None
    host, sep, port = address.rpartition(":")
    if not sep or not port.isdigit():
        return address
    return host[1:-1] if host.startswith("[") and host.endswith("]") else host


def _decode_pcap(src: str, broker_ports: Sequence[int], addresses: dict[str, int]) -> Iterator[pa.RecordBatch]:
    from epochlib import pcap

    side = RowBuffer(WORK)
    try:
        with open_reader(src) as r:
            data = r.read_all()
    except OSError as e:
        side.add(side_row(src, 0, "file", f"unreadable: {e}"))
        side.add(stats_row(src, "file", 1, 1, 0))
        yield side.flush()
        return
    chunk = _Chunk(src, "frame", side, addresses)
    tally = pcap.CaptureTally()
    n_read = n_bad = n_file_bad = 0
    for ex in pcap.iter_exchanges(data, broker_ports=tuple(broker_ports), api_keys={3}):
        tally.add(ex)
        if isinstance(ex, pcap.CaptureError):
            if ex.unit == "file":
                n_file_bad += 1
                side.add(side_row(src, ex.position, "file", ex.reason, data[:RAW_MAX]))
            elif ex.quarantined:  # corrupt frames; one row per TLS stream on a broker port (counted as a frame)
                n_read += 1
                n_bad += 1
                side.add(side_row(src, ex.position, "frame", ex.reason, None, broker=ex.broker))
            elif ex.kind == pcap.TLS_PORT:  # not bad input, not a unit: a note for the run's summary
                side.add({"row_kind": "info", "source": src, "position": ex.position, "reason": ex.reason})
            # unpaired requests/responses and partial frames are limits of the capture: counted below
            continue
        n_read += 1
        ms = _ms(ex.ts)
        if ms is None or not MS_MIN <= ms <= MS_MAX:
            n_bad += 1
            side.add(side_row(src, ex.frame_index, "frame", f"capture time {ex.ts!r:.40} is outside "
                              "0001-01-01..9999-12-31", None, broker=_broker_text(ex.broker)))
            continue
        if chunk.add(ex.frame_index, ms, ex.client_id, ex.broker, ex.response, ex.api_version,
                     client_host=_host(ex.client)):
            batch = chunk.flush()
            if batch is not None:
                yield batch
    batch = chunk.flush()
    if batch is not None:
        yield batch
    if n_file_bad:
        side.add(stats_row(src, "file", n_file_bad, n_file_bad, 0))
    unpaired = tally.unpaired_requests + tally.unpaired_responses + tally.partial_frames
    if n_read or unpaired or not n_file_bad:
        side.add(stats_row(src, "frame", n_read, n_bad + chunk.bad, chunk.out, unpaired))
    if not (n_read or unpaired or n_file_bad):  # read, but nothing on the broker ports: name the ports that had traffic
        side.add({"row_kind": "info", "source": src, "position": 0,
                  "reason": no_exchange_reason(broker_ports, pcap.tcp_ports(data, top=PORT_HINT_TOP))})
    yield side.flush()


#: How many of the busiest TCP ports a capture without exchanges names (:func:`no_exchange_reason`).
PORT_HINT_TOP = 5
#: The start of the info line of a capture file read without a Metadata exchange on the configured broker ports.
NO_EXCHANGE = "no Metadata exchange on the configured broker_ports"
_PORT_PACKETS = re.compile(r"(\d+) \((\d+) packets?\)")


def _ports_text(ports: Sequence[tuple[int, int]]) -> str:
    return ", ".join(f"{p} ({n} packet{'s' if n != 1 else ''})" for p, n in ports)


def no_exchange_reason(broker_ports: Sequence[int], ports: Sequence[tuple[int, int]]) -> str:
    """The info line of a capture file without a Metadata exchange on ``broker_ports``, naming the TCP ports that
    carried its traffic (``(port, packets)``, busiest first: :func:`epochlib.pcap.tcp_ports`)."""
    configured = ", ".join(str(p) for p in broker_ports) or "none"
    if not ports:
        return f"{NO_EXCHANGE} ({configured}); the file holds no TCP traffic"
    return (f"{NO_EXCHANGE} ({configured}); TCP ports with traffic in this file: {_ports_text(ports)} — set "
            "[inputs] broker_ports to the brokers' listener ports")


def no_exchange_hint(infos: Iterable[str], broker_ports: Sequence[int]) -> str | None:
    """One sentence for the metadata source's status from the run's info lines (``<kind>: <source>: <reason>``):
    how many capture files held no Metadata exchange on ``broker_ports`` and the TCP ports that carried their
    traffic, summed over them (busiest first); None when every capture file read held one."""
    lines = [i for i in infos if NO_EXCHANGE in i]
    if not lines:
        return None
    totals: dict[int, int] = {}
    for line in lines:
        for port, n in _PORT_PACKETS.findall(line.split(NO_EXCHANGE, 1)[1]):
            totals[int(port)] = totals.get(int(port), 0) + int(n)
    top = sorted(totals.items(), key=lambda kv: (-kv[1], kv[0]))[:PORT_HINT_TOP]
    configured = ", ".join(str(p) for p in broker_ports) or "none"
    files = f"{len(lines)} capture file{'s' if len(lines) != 1 else ''}"
    if not top:
        return f"{files} read with no Metadata exchange on broker_ports ({configured}) and no TCP traffic"
    return (f"{files} read with no Metadata exchange on broker_ports ({configured}); TCP ports with traffic in "
            f"{'them' if len(lines) != 1 else 'it'}: {_ports_text(top)} — set [inputs] broker_ports to the brokers' "
            "listener ports")


def decode_capture_files(broker_ports: Sequence[int], broker_addresses: Mapping[str, int] | None = None):
    """A ``mapInArrow`` function decoding capture files into :data:`WORK` rows.

    ``broker_addresses`` is the config's address -> node id mapping (validated here, on the driver, and
    shipped to the executors as a plain dict)."""
    ports = tuple(int(p) for p in broker_ports)
    addresses = brokers.normalize_addresses(broker_addresses or {})

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            for row in rb.to_pylist():
                if row["form"] == "pcap":
                    yield from _decode_pcap(row["source"], ports, addresses)
                else:
                    yield from _decode_jsonl(row, addresses)

    return fn


#: The ``metadata_observations`` columns (minus cluster/event_date) in their order; ``capture_ts`` and
#: ``event_ts`` are both the capture time.
OBSERVATION_COLUMNS = (
    "capture_ts", "client_id", "broker", "api_version", "correlation_id", "topic", "topic_id", "partition",
    "leader_id", "leader_epoch", "replicas", "isr", "offline_replicas", "topic_error", "partition_error",
    "cluster_id", "controller_id", "source", "position", "event_ts", "metadata_token", "broker_address",
    "trailing_bytes", "client_host",
)  # fmt: skip
_TS = pa.timestamp("us", tz="UTC")


def observations_arrow(work: pa.RecordBatch) -> pa.RecordBatch:
    """The observation rows of a :data:`WORK` batch in the :data:`OBSERVATION_COLUMNS` (what
    :func:`observations_frame` gives in Spark)."""
    return _silver(work.filter(pc.equal(work.column("row_kind"), "observation")))


def _silver(o: pa.RecordBatch) -> pa.RecordBatch:
    """:data:`WORK` rows that are all observations, in the :data:`OBSERVATION_COLUMNS`."""
    ts = o.column("capture_ms").cast(pa.timestamp("ms", tz="UTC")).cast(_TS)
    cols = [ts if name in ("capture_ts", "event_ts") else o.column(name) for name in OBSERVATION_COLUMNS]
    return pa.RecordBatch.from_arrays(cols, names=list(OBSERVATION_COLUMNS))


def observation_files(decode: Any) -> Any:
    """``decode`` (:func:`decode_capture_files`) for the capture pass that writes the observations itself
    (:class:`CaptureFiles`): observation rows in their silver columns, every other row as a side row."""

    def fn(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for b in decode(batches):
            is_obs = pc.equal(b.column("row_kind"), "observation")
            n_obs = pc.sum(is_obs.cast(pa.int64())).as_py() or 0
            if n_obs < b.num_rows:
                yield b.filter(pc.invert(is_obs))
            if n_obs:  # the decode's batches are all observations or none: no filter copy then (~0.2 s a million)
                yield _silver(b if n_obs == b.num_rows else b.filter(is_obs))

    return fn


class CaptureFiles(PassFiles):
    """The captures as a :class:`jobs.sink.FileSource` of ``metadata_observations`` (delta-rs sink): each
    task decodes its pcap file or JSONL line range once and writes the observation rows with pyarrow
    (:mod:`.pass_files`); :attr:`side` then holds the quarantine, stats and info rows (:data:`WORK`). The JVM
    never holds the observations as rows (at 1 M observation rows the Spark write, with the work rows
    cached, was ~7 CPU-s)."""

    side_schema = WORK

    def __init__(self, spark: Any, files: list[Any], *, cluster: str, days: tuple[Any, Any], default_date: Any,
                 broker_ports: Sequence[int], broker_addresses: Mapping[str, int] | None, split_bytes: int,
                 parallelism: int) -> None:
        super().__init__(spark, cluster=cluster, days=days, default_date=default_date)
        self.files, self.split_bytes, self.parallelism = files, split_bytes, parallelism
        self.decode = observation_files(decode_capture_files(broker_ports, broker_addresses))

    def frames(self) -> list[tuple[DataFrame, Any]]:
        return [(f, self.decode) for f in capture_frames(self._spark, self.files, split_bytes=self.split_bytes,
                                                          parallelism=self.parallelism)]


def capture_frames(spark: Any, files: list[Any], *, split_bytes: int, parallelism: int) -> list[DataFrame]:
    """The input rows of the captures: one per pcap file (:data:`FILE_SCHEMA`), and the JSONL captures cut
    into line ranges (a multi-GB hourly capture spreads over executors)."""
    from ._spark import files_frame
    from .discover import PCAP
    from .lines import line_ranges_frame

    out = []
    pcaps = [f for f in files if f.form == PCAP]
    if pcaps:
        out.append(files_frame(spark, pcaps, FILE_SCHEMA, parallelism))
    jsonl = [f for f in files if f.form != PCAP]
    if jsonl:
        out.append(line_ranges_frame(spark, jsonl, split_bytes=split_bytes, parallelism=parallelism))
    return out


def observations_frame(work: DataFrame) -> DataFrame:
    """``metadata_observations`` columns (minus cluster/event_date)."""
    from pyspark.sql import functions as F

    o = work.filter(F.col("row_kind") == "observation")
    return o.select(
        F.timestamp_millis("capture_ms").alias("capture_ts"), "client_id", "broker", "api_version",
        "correlation_id", "topic", "topic_id", "partition", "leader_id", "leader_epoch", "replicas", "isr",
        "offline_replicas", "topic_error", "partition_error", "cluster_id", "controller_id", "source",
        "position", F.timestamp_millis("capture_ms").alias("event_ts"), "metadata_token", "broker_address",
        "trailing_bytes", "client_host",
    )
