"""One client id on several hosts is several clients: Java's default client ids (``consumer-<group>-<n>``, ``n``
counted per JVM) repeat on every host of a group, and each client instance keeps its own view of the leader epochs
(KIP-232). Captures -> ``metadata_observations.client_host`` -> M1/M3 per (client id, host)."""

from __future__ import annotations

import io
import json
import struct

import pytest
from fixtures_ingest import DAY1, T1, capture_line, metadata_body

from epochlib import pcap, protocol
from jobs.audit import run_audit
from jobs.config import parse_config
from jobs.ingest.metadata import _host
from jobs.sink import read_table_arrow

CLIENT = "consumer-g1-1"


def _response(epoch: int, corr: int) -> bytes:
    body = metadata_body(epoch)
    body["topics"][0]["partitions"] = body["topics"][0]["partitions"][:1]
    return protocol.encode_metadata_response(body, 12, corr)


def test_the_host_of_a_captured_address() -> None:
    assert _host("10.0.1.1:50000") == "10.0.1.1"
    assert _host("[fd00::1]:50000") == "fd00::1"
    assert _host("pod-a") == "pod-a" and _host(None) is None and _host("") is None


def test_a_jsonl_host_is_checked_and_an_empty_one_is_none(tmp_path) -> None:
    import pyarrow as pa

    from jobs.ingest.metadata import WORK, _decode_jsonl, parse_capture_line

    def line(host) -> str:
        return json.dumps({**json.loads(capture_line(T1, "c", 1, 12, _response(6, 1))), "client_host": host})

    for bad in (7, "h" * 256):
        with pytest.raises(ValueError, match="bad client_host") as e:
            parse_capture_line(line(bad))
        assert e.value.capture_ms == T1  # dated by the line's own time: a run of its day counts it
    assert parse_capture_line(line("h" * 255))[0]["client_host"] == "h" * 255
    (tmp_path / "c.jsonl").write_text(line("") + "\n" + line(None) + "\n")
    rows = pa.Table.from_batches(list(_decode_jsonl(str(tmp_path / "c.jsonl"), {})), schema=WORK).to_pylist()
    assert [r["client_host"] for r in rows if r["row_kind"] == "observation"] == [None, None]


def test_a_line_with_a_good_time_is_dated_whatever_else_is_wrong() -> None:
    from jobs.ingest.metadata import parse_capture_line

    good = json.loads(capture_line(T1, "c", 1, 12, _response(6, 1)))
    for broken in ({"response": "AAAAAQAAAAAAB"}, {"response": None}, {"api_version": -1},
                   {"metadata_token": -5}):
        with pytest.raises(ValueError) as e:
            parse_capture_line(json.dumps({**good, **broken}))
        assert e.value.capture_ms == T1, broken
    with pytest.raises(ValueError) as e:
        parse_capture_line(json.dumps({**good, "ts": "yesterday"}))
    assert not hasattr(e.value, "capture_ms")


@pytest.mark.spark
def test_one_client_id_on_two_hosts_is_two_clients(spark, tmp_path) -> None:
    """Host A sees epoch 6 from broker 1; 300 ms later (inside M2's grace) broker 2, lagging, serves epoch 5 to host
    B, which never saw 6: no M1. Later broker 2 serves epoch 5 to host A: a real M1, naming the host. The same
    through JSONL's optional ``client_host``, where a host that is not a string quarantines the line."""
    framed = lambda b: struct.pack(">i", len(b)) + b  # noqa: E731
    packets, t = [], T1 / 1000
    for i, (host, port, broker, epoch, dt_s) in enumerate([("10.0.1.1", 50001, "10.0.0.1", 6, 0.0),
                                                          ("10.0.1.2", 50002, "10.0.0.2", 5, 0.3),
                                                          ("10.0.1.1", 50003, "10.0.0.2", 5, 0.6)]):
        req = protocol.encode_metadata_request({"topics": None}, 12, i + 1, CLIENT)
        packets += [(t + dt_s, host, port, broker, 9092, framed(req)),
                    (t + dt_s + 0.001, broker, 9092, host, port, framed(_response(epoch, i + 1)))]
    buf = io.BytesIO()
    pcap.write_pcap(buf, packets)
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "hosts.pcap").write_bytes(buf.getvalue())

    def line(ms: int, epoch: int, corr: int, host) -> str:
        obj = json.loads(capture_line(ms, "json-client", 1, 12, _response(epoch, corr)))
        return json.dumps({**obj, "client_host": host})

    (tmp_path / "in" / "lines.jsonl").write_text("\n".join([
        line(T1, 6, 11, "pod-a"), line(T1 + 300, 5, 12, "pod-b"), line(T1 + 400, 5, 13, 7)]) + "\n")
    config = parse_config({"cluster": "hosts", "inputs": {
        "metadata": str(tmp_path / "in"), "broker_addresses": {"10.0.0.1:9092": 1, "10.0.0.2:9092": 2}},
        "output": {"root": str(tmp_path / "out")}})  # fmt: skip
    run_audit(spark, config, DAY1, DAY1, reports=["stale_metadata"], progress_interval=0)

    obs = read_table_arrow("metadata_observations", config).to_pylist()
    assert sorted({(r["client_id"], r["client_host"]) for r in obs}, key=str) == [
        (CLIENT, "10.0.1.1"), (CLIENT, "10.0.1.2"), ("json-client", "pod-a"), ("json-client", "pod-b")]
    found = read_table_arrow("stale_metadata", config).to_pylist()
    assert [(f["rule"], f["client_id"], f["served_epoch"], f["cached_epoch"]) for f in found] == [
        ("M1", CLIENT, 5, 6)]
    assert f"client {CLIENT} on 10.0.1.1 was served leader epoch 5" in found[0]["detail"]
    (bad,) = read_table_arrow("quarantine", config).to_pylist()
    assert bad["position"] == 3 and "bad client_host 7" in bad["reason"]
