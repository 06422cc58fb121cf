"""The optional ``metadata_token`` of JSONL captures, end to end: capture line -> the silver column (or a
quarantined line) -> rule M2 in the ``stale_metadata`` report and its rates."""

from __future__ import annotations

import pyarrow.compute as pc
import pytest
from fixtures_ingest import DAY1, T1, TOPIC_ID, capture_line, metadata_body

from epochlib import protocol
from jobs.audit import run_audit
from jobs.config import parse_config
from jobs.sink import read_table_arrow

pytestmark = pytest.mark.spark

#: (ms after T1, client, broker, token) of four one-partition responses, all serving epoch 5 of orders-0:
#: b2 serves token 90 five seconds after b1 served 100 (beyond the 1 s grace): stale by token only.
RESPONSES = [
    (0, "c1", "b1:9092", 100),
    (5_000, "c2", "b2:9092", 90),
    (6_000, "c1", "b1:9092", 100),
    (7_000, "c3", "b3:9092", 100),
]
#: lines whose token is wrong in type or range: quarantined with the reason, never dropped or decoded.
BAD_TOKENS = ["100", -1, 1.5, True, 1 << 63]


def _response(corr: int) -> bytes:
    body = metadata_body(5)
    body["topics"][0]["partitions"] = body["topics"][0]["partitions"][:1]
    return protocol.encode_metadata_response(body, 12, corr)


def _audit(spark, base, *, tokens: bool):
    """Write the captures (with or without tokens), run ingestion + stale_metadata; the run's config."""
    lines = []
    for i, (dt_ms, client, broker, token) in enumerate(RESPONSES):
        extra = {"metadata_token": token} if tokens else {}
        lines.append(capture_line(T1 + dt_ms, client, broker, 12, _response(i), **extra))
    if tokens:
        lines.append(capture_line(T1 + 8_000, "c4", "b1:9092", 12, _response(10), metadata_token=None))
        lines += [capture_line(T1 + 9_000, "c5", "b1:9092", 12, _response(20 + i), metadata_token=bad)
                  for i, bad in enumerate(BAD_TOKENS)]
    (base / "in").mkdir(parents=True)
    (base / "in" / "caps.jsonl").write_text("\n".join(lines) + "\n")
    config = parse_config({"cluster": "tok", "inputs": {"metadata": str(base / "in")},
                           "output": {"root": str(base / "out")}})  # fmt: skip
    result = run_audit(spark, config, DAY1, DAY1, reports=["stale_metadata"], progress_interval=0)
    return config, result


@pytest.fixture(scope="module")
def with_tokens(spark, tmp_path_factory):
    return _audit(spark, tmp_path_factory.mktemp("tokens"), tokens=True)


def test_tokens_become_the_silver_column(with_tokens) -> None:
    config, _ = with_tokens
    rows = read_table_arrow("metadata_observations", config).to_pylist()
    got = sorted((r["position"], r["broker_address"], r["metadata_token"]) for r in rows)
    # lines 1-4 carry their token, line 5 an explicit null; no bad line became an observation
    assert got == [(1, "b1:9092", 100), (2, "b2:9092", 90), (3, "b1:9092", 100), (4, "b3:9092", 100),
                   (5, "b1:9092", None)]  # fmt: skip
    # the responses list b1:9092 as node 1 (b2, b3 are not listed: kept as captured)
    assert {r["broker_address"]: r["broker"] for r in rows} == {"b1:9092": "1", "b2:9092": "b2:9092",
                                                                 "b3:9092": "b3:9092"}  # fmt: skip
    assert {r["topic_id"] for r in rows} == {TOPIC_ID} and {r["leader_epoch"] for r in rows} == {5}


def test_a_bad_token_quarantines_its_line_with_the_reason(with_tokens) -> None:
    config, result = with_tokens
    q = read_table_arrow("quarantine", config)
    q = q.filter(pc.equal(q["source_kind"], "metadata")).to_pylist()
    assert sorted(r["position"] for r in q) == [6, 7, 8, 9, 10]
    assert {r["unit"] for r in q} == {"line"} and {r["event_date"] for r in q} == {DAY1}
    reasons = sorted(r["reason"] for r in q)
    assert reasons == sorted(f"bad capture line: bad metadata_token {b!r} (must be an integer 0..2^63-1)"
                             for b in BAD_TOKENS)  # fmt: skip
    assert all(b'"metadata_token"' in r["raw"] for r in q)
    lines = result.ingest.count("metadata", "line")
    assert (lines.units_read, lines.units_decoded, lines.units_quarantined) == (10, 5, 5)


def test_a_lower_token_after_a_higher_one_is_one_m2_finding(with_tokens) -> None:
    config, result = with_tokens
    (f,) = read_table_arrow("stale_metadata", config).to_pylist()
    assert (f["rule"], f["kind"], f["severity"]) == ("M2", "broker_served_stale", "warning")
    assert (f["broker"], f["client_id"], f["topic"], f["partition"]) == ("b2:9092", "c2", "orders", 0)
    assert (f["served_epoch"], f["cached_epoch"], f["staleness_ms"]) == (5, None, 5_000)
    assert "token 90" in f["detail"] and "token 100" in f["detail"]
    src = read_table_arrow("metadata_observations", config)["source"][0].as_py()
    assert f["evidence"] == [f"capture:{src} line 2", f"capture:{src} line 1"]
    assert result.findings["stale_metadata"] == 1
    rates = read_table_arrow("stale_metadata_rates", config).to_pylist()
    by = {(r["dimension"], r["subject"]): (r["responses"], r["stale_responses"]) for r in rates}
    assert by[("broker", "b2:9092")] == (1, 1) and by[("broker", "1")] == (3, 0)
    assert by[("client", "c2")] == (1, 1) and by[("client", "c1")] == (2, 0)


def test_without_tokens_the_same_responses_give_no_finding(spark, tmp_path) -> None:
    config, result = _audit(spark, tmp_path, tokens=False)
    rows = read_table_arrow("metadata_observations", config).to_pylist()
    assert len(rows) == len(RESPONSES) and {r["metadata_token"] for r in rows} == {None}
    assert read_table_arrow("stale_metadata", config).num_rows == 0 and result.findings["stale_metadata"] == 0


def test_an_output_root_from_before_the_token_column_is_upgraded_in_place(spark, tmp_path) -> None:
    """The first run of the new version over an existing output root adds the column, and old rows read
    it as null, instead of stopping mid-run with a schema error."""
    import datetime as dt

    import pyarrow as pa
    from deltalake import write_deltalake

    from jobs import schemas

    old_schema = schemas.arrow_schema("metadata_observations")
    for later in ("broker_address", "metadata_token", "client_host"):  # added after such a table was written
        old_schema = old_schema.remove(old_schema.get_field_index(later))
    old_day = DAY1 - dt.timedelta(days=1)
    row = {f.name: None for f in old_schema} | {"cluster": "tok", "event_date": old_day, "client_id": "old"}
    write_deltalake(str(tmp_path / "out" / "metadata_observations"),
                    pa.Table.from_pylist([row], schema=old_schema), partition_by=["cluster", "event_date"])  # fmt: skip
    config, result = _audit(spark, tmp_path, tokens=True)
    rows = read_table_arrow("metadata_observations", config).to_pylist()
    assert [(r["metadata_token"], r["broker_address"]) for r in rows if r["client_id"] == "old"] == [(None, None)]
    assert sorted(r["metadata_token"] for r in rows if r["event_date"] == DAY1 and r["metadata_token"]) == [
        90, 100, 100, 100]  # fmt: skip
    assert [f["kind"] for f in read_table_arrow("stale_metadata", config).to_pylist()] == ["broker_served_stale"]
