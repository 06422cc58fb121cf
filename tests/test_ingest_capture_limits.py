"""Issue 12 item 2 (ingest side): capture limits are counted apart from bad input.

A capture's unpaired requests/responses and partial frames are no quarantine rows: they go to the
``frame`` stats' ``n_unpaired`` (``audit_runs.units_unpaired``) so that ``units_quarantined`` means
"could not decode" and ``units_read = units_decoded + units_quarantined`` holds; a TLS stream on a
broker port is one quarantined frame; TLS to another port is an info line. Frames are built by
kafka-python and dpkt (see test_pcap_capture_limits).
"""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pyarrow as pa
import pytest
from test_pcap import _capture, metadata_request, metadata_response
from test_pcap_capture_limits import B, C, app_data, real_client_hello, server_flight

from jobs.ingest import metadata as md
from jobs.runlog import RunContext, SourceCounts, audit_run_table


def _decode(path: Path) -> list[dict]:
    rb = pa.RecordBatch.from_pylist([{"source": str(path), "size": path.stat().st_size, "form": "pcap"}],
                                    schema=md.FILE_SCHEMA)
    return [r for b in md.decode_capture_files((9092,))(iter([rb])) if b is not None for r in b.to_pylist()]


def test_unpaired_and_partial_frames_are_counted_not_quarantined(tmp_path):
    req7, req9 = metadata_request(2, 7), metadata_request(2, 9)
    resp7, resp8, resp9 = (metadata_response(2, cid, partitions=2) for cid in (7, 8, 9))
    old = metadata_response(2, 6)
    c2 = (C[0], 50002)
    segs = [
        (1.0, *C, *B, req7, 0),
        (1.2, *C, *B, req9, len(req7) + len(metadata_request(2, 8))),  # request 8 never captured
        (1.5, *B, *C, old[-40:] + resp7 + resp8 + resp9, 0),  # starts inside a frame: one partial
        (2.0, *c2, *B, metadata_request(2, 11)),  # a request whose response was not captured
    ]
    p = tmp_path / "cap.pcap"
    p.write_bytes(_capture(segs, handshake=False))
    rows = _decode(p)
    obs = [r for r in rows if r["row_kind"] == "observation"]
    assert sorted({r["correlation_id"] for r in obs}) == [7, 9]
    assert not [r for r in rows if r["row_kind"] == "quarantine"]
    (stats,) = [r for r in rows if r["row_kind"] == "stats"]
    assert (stats["unit"], stats["n_read"], stats["n_bad"]) == ("frame", 2, 0)
    assert stats["n_unpaired"] >= 3  # response 8, request 11, the partial frame (and the cut tail of c2)
    counts = SourceCounts("metadata", "frame", units_decoded=stats["n_read"] - stats["n_bad"],
                          units_quarantined=stats["n_bad"], records_decoded=stats["n_out"],
                          units_read=stats["n_read"], units_unpaired=stats["n_unpaired"])
    day = dt.date(2024, 3, 1)
    row = audit_run_table(RunContext("c", day, day), [counts]).to_pylist()[0]
    assert (row["units_read"], row["units_quarantined"], row["units_unpaired"]) == (2, 0, stats["n_unpaired"])


def test_a_tls_stream_on_a_broker_port_is_one_quarantined_frame(tmp_path):
    c3 = (C[0], 50003)
    segs = [(1.0, *C, *B, metadata_request(1, 7)), (1.1, *B, *C, metadata_response(1, 7)),
            (3.0, *c3, *B, real_client_hello()), (3.1, *B, *c3, server_flight()), (3.2, *c3, *B, app_data(3)),
            (3.3, *B, *c3, app_data(5, 1400))]
    p = tmp_path / "cap.pcap"
    p.write_bytes(_capture(segs))
    rows = _decode(p)
    (q,) = [r for r in rows if r["row_kind"] == "quarantine"]
    assert "TLS-encrypted stream" in q["reason"] and q["unit"] == "frame"
    (stats,) = [r for r in rows if r["row_kind"] == "stats"]
    assert (stats["n_read"], stats["n_bad"], stats["n_unpaired"]) == (2, 1, 0)


def test_tls_to_a_port_that_is_not_a_broker_port_is_an_info_line(tmp_path):
    port = (B[0], 9093)
    segs = [(1.0, *C, *B, metadata_request(1, 7)), (1.1, *B, *C, metadata_response(1, 7)),
            (2.0, *C[:1], 51000, *port, real_client_hello()), (2.1, *port, C[0], 51000, server_flight())]
    p = tmp_path / "cap.pcap"
    p.write_bytes(_capture(segs))
    rows = _decode(p)
    assert not [r for r in rows if r["row_kind"] == "quarantine"]
    (info,) = [r for r in rows if r["row_kind"] == "info"]
    assert "port 9093" in info["reason"]
    (stats,) = [r for r in rows if r["row_kind"] == "stats"]
    assert (stats["n_read"], stats["n_bad"], stats["n_unpaired"]) == (1, 0, 0)


@pytest.mark.spark
def test_the_notes_are_the_same_whether_the_pass_or_spark_writes_the_observations(spark, tmp_path, monkeypatch):
    """The capture pass's notes are read from its side files (no Spark job); Spark's rows give the same ones."""
    import jobs.sink
    from jobs.config import Config, Inputs, Output
    from jobs.ingest import run_ingestion

    port = (B[0], 9093)
    segs = [(1.0, *C, *B, metadata_request(1, 7)), (1.1, *B, *C, metadata_response(1, 7)),
            (2.0, *C[:1], 51000, *port, real_client_hello()), (2.1, *port, C[0], 51000, server_flight())]
    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "cap.pcap").write_bytes(_capture(segs))
    (tmp_path / "in" / "cap2.pcap").write_bytes(_capture(segs[2:]))  # a second file with a note
    (tmp_path / "in" / "plain.pcap").write_bytes(_capture(segs[:2]))  # and one without
    notes = {}
    for how in ("files", "spark"):
        if how == "spark":
            monkeypatch.setattr(jobs.sink, "adopts_files", lambda *a, **k: False)
        cfg = Config(cluster="c", inputs=Inputs(metadata=str(tmp_path / "in")), output=Output(root=str(tmp_path / how)))
        res = run_ingestion(spark, cfg, "1970-01-01", "1970-01-01")
        res.release()
        notes[how] = sorted(res.infos)  # in the order the files were read, which the two ways choose differently
    assert notes["files"] == notes["spark"]
    # cap2 holds no exchange on the broker port at all: its TLS note, and the note naming the ports with traffic
    assert [n.split(": ")[1] for n in notes["files"]] == [str(tmp_path / "in" / f)
                                                          for f in ("cap.pcap", "cap2.pcap", "cap2.pcap")]
    assert all("port 9093" in n for n in notes["files"][:2]) and "ports with traffic in this file: 9093" in notes[
        "files"][2]


def test_an_undecodable_response_among_good_ones_gives_no_observation_rows(tmp_path):
    """Good and undecodable responses decoded in one chunk: the observation rows are the good responses' only
    (the bad one is a quarantine row), and the silver rows of a mixed batch are its observation rows."""
    import base64
    import json

    good = [metadata_response(2, cid, partitions=2)[4:] for cid in (7, 8)]  # kafka-python's bytes, unframed
    lines = [{"ts": f"2024-03-01T00:00:0{i}Z", "api_version": 2, "response": base64.b64encode(r).decode()}
             for i, r in enumerate([good[0], good[1][:-9], good[1]])]  # the middle one cut short
    p = tmp_path / "cap.jsonl"
    p.write_text("\n".join(json.dumps(x) for x in lines) + "\n")
    rb = pa.RecordBatch.from_pylist([{"source": str(p), "size": p.stat().st_size, "form": "jsonl"}],
                                    schema=md.FILE_SCHEMA)
    batches = [b for b in md.decode_capture_files((9092,))(iter([rb])) if b is not None]
    rows = [r for b in batches for r in b.to_pylist()]
    obs = [r for r in rows if r["row_kind"] == "observation"]
    assert [(r["position"], r["correlation_id"], r["partition"]) for r in obs] == [(1, 7, 0), (1, 7, 1), (3, 8, 0),
                                                                                   (3, 8, 1)]
    (bad,) = [r for r in rows if r["row_kind"] == "quarantine"]
    assert bad["position"] == 2 and "undecodable MetadataResponse" in bad["reason"]
    # the silver columns of every row kind together: only the observations come out
    mixed = pa.Table.from_batches(batches).combine_chunks().to_batches()[0]
    silver = md.observations_arrow(mixed)
    assert silver.column("correlation_id").to_pylist() == [7, 7, 8, 8]


@pytest.mark.parametrize("fail_after", [None, 1])
def test_an_unreadable_jsonl_capture_is_quarantined_not_a_failed_run(tmp_path, monkeypatch, fail_after):
    """A JSONL capture the task cannot open (or that fails to read on after its first line) is one quarantined
    file, ``unreadable: …``, as a pcap is: the PermissionError escaped the Python worker and failed the whole
    run with exit 4."""
    import jobs.fs

    p = tmp_path / "cap.jsonl"
    p.write_text("\n".join(["{}"] * 3) + "\n")
    real = jobs.fs.open_reader

    class Failing:
        def __init__(self, source):
            if fail_after is None:
                raise PermissionError(13, "Permission denied", source)
            self.r, self.size, self.calls = real(source), 1 << 20, 0

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            self.r.close()

        def read_at(self, pos, n):
            self.calls += 1
            if self.calls > fail_after:
                raise OSError(5, "Input/output error")
            return self.r.read_at(pos, 3)  # the first line only

    monkeypatch.setattr(jobs.fs, "open_reader", Failing)
    rb = pa.RecordBatch.from_pylist([{"source": str(p), "size": p.stat().st_size, "form": "jsonl"}],
                                    schema=md.FILE_SCHEMA)
    rows = [r for b in md.decode_capture_files((9092,))(iter([rb])) if b is not None for r in b.to_pylist()]
    (q,) = [r for r in rows if r["row_kind"] == "quarantine" and r["unit"] == "file"]
    assert q["reason"].startswith("unreadable: ") and q["source"] == str(p)
    reason = "Permission denied" if fail_after is None else "Input/output error"
    assert reason in q["reason"]
    stats = {r["unit"]: (r["n_read"], r["n_bad"]) for r in rows if r["row_kind"] == "stats"}
    assert stats["file"] == (1, 1)
    if fail_after is None:
        assert "line" not in stats
    else:  # the line read before the failure is counted (a bad capture line: "{}" has no response)
        assert stats["line"] == (1, 1)


def _dpkt_capture(flows: list[tuple[tuple[str, int], tuple[str, int], list[tuple[bool, bytes]]]]) -> bytes:
    """A pcap written by dpkt (not our writer): per flow (client, server, [(to_server, payload)]), a SYN, a SYN-ACK,
    then each payload in one segment with running sequence numbers."""
    import io
    import socket

    import dpkt

    f = io.BytesIO()
    w = dpkt.pcap.Writer(f, linktype=dpkt.pcap.DLT_EN10MB)
    t = 1_700_000_000.0

    def pkt(src, dst, seq, ack, flags, data=b""):
        tcp = dpkt.tcp.TCP(sport=src[1], dport=dst[1], seq=seq, ack=ack, flags=flags, win=65535, data=data)
        ip = dpkt.ip.IP(src=socket.inet_aton(src[0]), dst=socket.inet_aton(dst[0]), p=6, ttl=64, data=tcp)
        ip.len = len(ip)
        return bytes(dpkt.ethernet.Ethernet(src=b"\x02" + bytes(5), dst=b"\x02" + bytes(4) + b"\x01",
                                            type=dpkt.ethernet.ETH_TYPE_IP, data=ip))

    for client, server, payloads in flows:
        cseq, sseq = 1000, 5000
        for frame in (pkt(client, server, cseq, 0, dpkt.tcp.TH_SYN),
                      pkt(server, client, sseq, cseq + 1, dpkt.tcp.TH_SYN | dpkt.tcp.TH_ACK)):
            t += 0.001
            w.writepkt(frame, ts=t)
        cseq, sseq = cseq + 1, sseq + 1
        for to_server, data in payloads:
            t += 0.001
            if to_server:
                w.writepkt(pkt(client, server, cseq, sseq, dpkt.tcp.TH_PUSH | dpkt.tcp.TH_ACK, data), ts=t)
                cseq += len(data)
            else:
                w.writepkt(pkt(server, client, sseq, cseq, dpkt.tcp.TH_PUSH | dpkt.tcp.TH_ACK, data), ts=t)
                sseq += len(data)
    return f.getvalue()


def _kafka_on(port: int, n: int = 3) -> tuple:
    """n Metadata exchanges (kafka-python's bytes) between a client and a broker listening on ``port``."""
    return ((C[0], 50010), (B[0], port), [x for cid in range(n)
                                          for x in ((True, metadata_request(1, cid)), (False, metadata_response(1, cid)))])


def test_a_capture_without_an_exchange_on_the_broker_ports_names_the_ports_that_carried_traffic(tmp_path):
    """A capture of brokers listening on 19092 read with broker_ports = [9092]: nothing decoded (the source is
    no_input), and nothing said why. Now the file's info line names the TCP ports that carried its traffic, the
    brokers' port first; a capture with exchanges gets no such line (the ports are counted only on that path)."""
    ssh = ((C[0], 50020), (B[0], 22), [(True, b"SSH-2.0-x\r\n"), (False, b"SSH-2.0-y\r\n")])
    p = tmp_path / "cap.pcap"
    p.write_bytes(_dpkt_capture([_kafka_on(19092), ssh]))
    rows = _decode(p)
    assert [r for r in rows if r["row_kind"] in ("observation", "quarantine")] == []
    (stats,) = [r for r in rows if r["row_kind"] == "stats"]
    assert (stats["n_read"], stats["n_bad"], stats["n_unpaired"]) == (0, 0, 0)
    (info,) = [r for r in rows if r["row_kind"] == "info"]
    assert info["reason"] == ("no Metadata exchange on the configured broker_ports (9092); TCP ports with traffic in "
                              "this file: 19092 (8 packets), 22 (4 packets) — set [inputs] broker_ports to the "
                              "brokers' listener ports")
    hint = md.no_exchange_hint([f"metadata: {p}: {info['reason']}"] * 2, (9092,))
    assert hint == ("2 capture files read with no Metadata exchange on broker_ports (9092); TCP ports with traffic "
                    "in them: 19092 (16 packets), 22 (8 packets) — set [inputs] broker_ports to the brokers' "
                    "listener ports")
    # the right port: decoded, no such line
    p.write_bytes(_dpkt_capture([_kafka_on(9092), ssh]))
    rows = _decode(p)
    assert len({r["correlation_id"] for r in rows if r["row_kind"] == "observation"}) == 3
    assert [r for r in rows if r["row_kind"] == "info"] == []


@pytest.mark.spark
def test_a_run_with_the_wrong_broker_ports_says_which_ports_carried_traffic(spark, tmp_path):
    """What the operator sees: the run's status line for the metadata source (and the JSON summary's reason) says
    the captures held no Metadata exchange on broker_ports and names the port the brokers used."""
    import json

    from click.testing import CliRunner

    from jobs.cli import cli

    (tmp_path / "in").mkdir()
    (tmp_path / "in" / "cap.pcap").write_bytes(_dpkt_capture([_kafka_on(19092)]))
    res = CliRunner().invoke(cli, ["run", "--from", "2023-11-14", "--output-root", str(tmp_path / "out"),
                                   "--cluster", "c", "--metadata", str(tmp_path / "in"),
                                   "--summary-json", str(tmp_path / "s.json")])
    doc = json.loads((tmp_path / "s.json").read_text())
    assert doc["status"] == "no_input", res.output
    reason = doc["sources"]["metadata"]["reason"]
    assert reason.startswith("configured but no input units found; 1 capture file read with no Metadata exchange on "
                             "broker_ports (9092); TCP ports with traffic in it: 19092 (8 packets)"), reason
    assert "19092 (8 packets)" in res.output


def test_decode_names_the_ports_of_a_capture_with_nothing_on_the_broker_port(tmp_path):
    import json

    from click.testing import CliRunner

    from jobs.cli import cli

    p = tmp_path / "cap.pcap"
    p.write_bytes(_dpkt_capture([_kafka_on(19092, n=1)]))
    rows = [json.loads(line) for line in CliRunner().invoke(cli, ["decode", str(p)]).output.splitlines()]
    assert [(r["type"], r["unit"]) for r in rows] == [("info", "file")]
    assert "TCP ports with traffic in this file: 19092 (4 packets)" in rows[0]["reason"]
    rows = [json.loads(line) for line in CliRunner().invoke(cli, ["decode", str(p), "--broker-port", "19092"]).output
            .splitlines()]
    assert [r["type"] for r in rows] == ["metadata_observation"] * 3
