"""One broker, three spellings in the captures (node id, advertised host:port, pcap peer ip:port), end to end:
capture files -> ``metadata_observations.broker`` (canonical) / ``broker_address`` (as captured) -> M2
findings and ``stale_metadata_rates`` naming one broker."""

from __future__ import annotations

import io
import struct

import pytest
from fixtures_ingest import DAY1, T1, capture_line, metadata_body

from epochlib import pcap, protocol
from jobs.audit import run_audit
from jobs.config import parse_config
from jobs.sink import read_table_arrow

pytestmark = pytest.mark.spark

# metadata_body lists one broker: node 1 at b1:9092. Its pcap peer address is 10.0.0.1:9092.
PEER = "10.0.0.1"


def _response(epoch: int, version: int, corr: int) -> bytes:
    body = metadata_body(epoch)
    body["topics"][0]["partitions"] = body["topics"][0]["partitions"][:1]
    return protocol.encode_metadata_response(body, version, corr)


def _audit(spark, base, addresses: dict | None):
    """Node 1 serves epoch 5 (captured as node id), then epoch 4 five seconds later to another client
    (captured as its advertised host:port: stale, M2), then epoch 5 again (a pcap of its peer address)."""
    (base / "in").mkdir(parents=True)
    lines = [capture_line(T1, "c1", 1, 12, _response(5, 12, 1)),
             capture_line(T1 + 5_000, "c2", "b1:9092", 12, _response(4, 12, 2))]  # fmt: skip
    (base / "in" / "caps.jsonl").write_text("\n".join(lines) + "\n")
    req = protocol.encode_metadata_request({"topics": None}, 12, 3, "c3")
    framed = lambda b: struct.pack(">i", len(b)) + b  # noqa: E731
    buf = io.BytesIO()
    t = (T1 + 10_000) / 1000
    pcap.write_pcap(buf, [(t, "10.0.0.9", 50000, PEER, 9092, framed(req)),
                          (t + 0.01, PEER, 9092, "10.0.0.9", 50000, framed(_response(5, 12, 3)))])  # fmt: skip
    (base / "in" / "peer.pcap").write_bytes(buf.getvalue())
    inputs: dict = {"metadata": str(base / "in")}
    if addresses is not None:
        inputs["broker_addresses"] = addresses
    config = parse_config({"cluster": "names", "inputs": inputs, "output": {"root": str(base / "out")}})
    run_audit(spark, config, DAY1, DAY1, reports=["stale_metadata"], progress_interval=0)
    return config


def _broker_rates(config) -> dict[str, tuple[int, int]]:
    rates = read_table_arrow("stale_metadata_rates", config).to_pylist()
    return {r["subject"]: (r["responses"], r["stale_responses"]) for r in rates if r["dimension"] == "broker"}


@pytest.fixture(scope="module")
def mapped(spark, tmp_path_factory):
    return _audit(spark, tmp_path_factory.mktemp("names"), {f"{PEER}:9092": 1})


def test_three_spellings_of_one_broker_are_one_broker(mapped) -> None:
    rows = read_table_arrow("metadata_observations", mapped).to_pylist()
    got = sorted((r["client_id"], r["broker"], r["broker_address"]) for r in rows)
    assert got == [("c1", "1", "1"), ("c2", "1", "b1:9092"), ("c3", "1", f"{PEER}:9092")]
    assert _broker_rates(mapped) == {"1": (3, 1)}  # one row: three responses, one stale


def test_the_finding_names_the_node_id_and_the_silver_row_keeps_the_captured_spelling(mapped) -> None:
    (f,) = read_table_arrow("stale_metadata", mapped).to_pylist()
    assert (f["rule"], f["kind"], f["broker"], f["client_id"]) == ("M2", "broker_served_stale", "1", "c2")
    assert f["served_epoch"] == 4 and f["staleness_ms"] == 5_000
    obs = read_table_arrow("metadata_observations", mapped).to_pylist()
    served = [r for r in obs if f["evidence"][0] == f"capture:{r['source']} line {r['position']}"]
    assert [(r["broker"], r["broker_address"]) for r in served] == [("1", "b1:9092")]


def test_without_a_mapping_the_pcap_peer_stays_as_captured(spark, tmp_path) -> None:
    config = _audit(spark, tmp_path, None)
    rows = read_table_arrow("metadata_observations", config).to_pylist()
    assert sorted((r["broker"], r["broker_address"]) for r in rows) == [
        ("1", "1"), ("1", "b1:9092"), (f"{PEER}:9092", f"{PEER}:9092")]  # fmt: skip
    assert _broker_rates(config) == {"1": (2, 1), f"{PEER}:9092": (1, 0)}
