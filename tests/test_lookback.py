"""Issue 13 items 1 and 2 end to end, on a simulated cluster whose evidence crosses midnight.

A run over D2 alone into a fresh output root must give the same D2 findings as a run over D1..D2: the
lookback reads the inputs' D1 rows as detection state although no run wrote them. A bad unit is stored
once, under its own date, however the nightly runs cut the days.
"""

from __future__ import annotations

import datetime as dt
import os

import pytest

pytestmark = [pytest.mark.spark, pytest.mark.slow]

D1, D2 = "2024-06-30", "2024-07-01"
REPORTS = ("stale_metadata", "fencing_violations", "spurious_offset_resets")


def at_midnight(sim_cls, midnight_ms: int):
    """``Sim.slot``/``Sim.slot_time`` replacements that start every incident the simulator can place in the
    slot ending at ``midnight_ms`` 46-74 s before it: its first sightings (a client's newer epoch, a
    group's commits, the last snapshot round) fall on D1 and its findings on D2."""
    slot, slot_time = sim_cls.slot, sim_cls.slot_time

    def midnight_slot(self, need_after: int = 0, first: int = 0) -> int:
        i = self.bounds.index(midnight_ms) - 1 if midnight_ms in self.bounds else -1
        if first <= i <= len(self.bounds) - 2 - need_after:
            self.slot_use[i] = self.slot_use.get(i, 0) + 1
            return i
        return slot(self, need_after, first)

    def midnight_time(self, i: int, *args, **kwargs) -> int:
        if self.bounds[i + 1] == midnight_ms:
            return midnight_ms - self.rng.randrange(46_000, 74_000)
        return slot_time(self, i, *args, **kwargs)

    return midnight_slot, midnight_time


def _findings_on(config, day: str) -> list[dict]:
    from jobs.sink import read_table_arrow

    rows = []
    for table in REPORTS:
        rows += [{k: v for k, v in r.items() if k != "run_id"} for r in read_table_arrow(table, config).to_pylist()
                 if r["event_date"].isoformat() == day]
    return sorted(rows, key=lambda r: r["finding_id"])


def _quarantined(config) -> list[tuple]:
    from jobs.sink import read_table_arrow

    return sorted((r["source"], r["position"], r["unit"], r["event_date"].isoformat())
                  for r in read_table_arrow("quarantine", config).to_pylist())


def test_a_run_over_d2_alone_on_a_fresh_root_finds_what_a_run_over_d1_d2_finds(spark, tmp_path, monkeypatch) -> None:
    sim_mod = pytest.importorskip("epochlib.sim")
    from epochlib.sim.engine import Sim
    from jobs.audit import run_audit
    from jobs.config import parse_config

    # 18:00 on D1 to 06:00 on D2, a snapshot round at midnight, the incidents starting a minute before it:
    # the newer epoch a client saw, a group's previous commits, the replicas' previous snapshots are on D1,
    # the findings (M1/M2, F2/F4, S1, L5, D2) on D2
    midnight = int(dt.datetime.fromisoformat(f"{D2}T00:00:00+00:00").timestamp() * 1000)
    slot, slot_time = at_midnight(Sim, midnight)
    monkeypatch.setattr(Sim, "slot", slot)
    monkeypatch.setattr(Sim, "slot_time", slot_time)
    sc = sim_mod.Scenario(name="midnight", seed=13, start=f"{D1}T18:00:00", days=0.5, commits=2000,
                          snapshot_interval_hours=2.0, retention_hours=3.0)
    sim = sim_mod.simulate(sc, tmp_path / "sim")
    assert (sim.date_from, sim.date_to) == (D1, D2)

    def config(root: str):
        return parse_config({
            "cluster": "midnight",
            "inputs": {"offsets": str(sim.offsets), "logdirs": str(sim.logdirs), "metadata": str(sim.metadata),
                       "cluster_metadata": str(sim.cluster_metadata)},
            "output": {"root": str(tmp_path / root)},
        })  # fmt: skip

    whole, alone = config("whole"), config("alone")
    lines: list[str] = []
    first = run_audit(spark, whole, D1, D2, progress_interval=0)
    incident = run_audit(spark, alone, D2, D2, progress=lines.append, progress_interval=0)

    want, got = _findings_on(whole, D2), _findings_on(alone, D2)
    # every rule family has D2 findings here, and each needed D1's state
    assert {r["rule"][0] for r in want} >= {"M", "F", "S", "L", "D"}
    # the metadata log's D1 changes too (without them, every replica whose checkpoint named an epoch the log
    # assigned on D1 got a K1 error); M2 is judged from the log
    assert [r["detail"] for r in got if r["rule"] == "K1"] == [r["detail"] for r in want if r["rule"] == "K1"]
    assert any(r["rule"] == "M2" and "metadata log" in r["detail"] for r in want)
    assert got == want
    # the run over D2 had D1 from its inputs: nothing lacked; the run over D1..D2 had nothing before D1
    # and says so, naming the rules that went without
    assert incident.warnings == [] and not [x for x in lines if x.startswith("warning:")]
    assert any("metadata_observations" in w and "M1/M2/M3" in w for w in first.warnings)
    assert any("offset_commits" in w and "2024-06-29" in w for w in first.warnings)
    # only D2 was written by the incident run
    from jobs.sink import read_table_arrow

    for table in ("offset_commits", "epoch_lineage", "metadata_observations", *REPORTS):
        assert {r["event_date"].isoformat() for r in read_table_arrow(table, alone).to_pylist()} == {D2}, table
    # but the metadata log's changes of D1, which no run had stored, went to partition_history: a reports-only rerun
    # of D2 reads the history from the table, and without them took every epoch assigned on D1 for "never
    # assigned" (K1 errors; a day-split review)
    assert D1 in {r["event_date"].isoformat() for r in read_table_arrow("partition_history", alone).to_pylist()}
    rerun = run_audit(spark, alone, D2, D2, ingest=False, progress_interval=0)
    kraft = [r for r in want if r["rule"][0] in "KP"]
    assert kraft and [r for r in _findings_on(alone, D2) if r["rule"][0] in "KP"] == kraft
    # (the other rules' D1 state is not in the tables: that run says so, as any run with lookback gaps does)
    assert not any("partition_history" in w for w in rerun.warnings)

    d1 = config("d1")
    run_audit(spark, d1, D1, D1, progress_interval=0)
    # a run over D1 alone finds what the run over D1..D2 finds on D1: the F2/S1/S2 of commits late on D1 are judged
    # against the midnight snapshot round (on D2: the run's inputs hold it), and the metadata log reaching past D1
    # judges captures after D1's last change (M2) as in the longer run
    late = [r for r in _findings_on(whole, D1) if r["rule"][:2] in ("F2", "S1", "S2")
            and any("snapshot=20240701T000000Z" in e for e in r["evidence"])]
    assert late  # the midnight round decides some D1 findings
    assert _findings_on(d1, D1) == _findings_on(whole, D1)

    # issue 13 item 2: the nightly run of D1 afterwards stores D1's bad units under D1, and each bad unit
    # is stored once, as the run over both days stored it
    run_audit(spark, alone, D1, D1, reports=(), progress_interval=0)
    assert _quarantined(alone) == _quarantined(whole)
    assert len(set(_quarantined(whole))) == len(_quarantined(whole)) > 0
    # the reports rerun over D1 from the tables alone read D2's snapshots from the table the D2 run wrote
    reread = run_audit(spark, alone, D1, D1, ingest=False, progress_interval=0)
    assert _findings_on(alone, D1) == _findings_on(whole, D1)
    # a reports-only run reads no input: its status is that of the silver rows it read (it said ok even where
    # there were none)
    assert reread.status == "ok" and {s.status for s in reread.sources.values()} == {"ok"}
    before = run_audit(spark, alone, dt.date(2024, 1, 1), dt.date(2024, 1, 1), ingest=False, progress_interval=0)
    assert before.sources["offsets"].status == "no_input" and before.status != "ok"


def test_reports_only_where_no_run_ingested_is_an_input_error(spark, tmp_path) -> None:
    """A mistyped --output-root with --reports-only: exit 3 (it said ok, and wrote empty report tables there)."""
    from jobs.audit import run_audit
    from jobs.config import Config, Output
    from jobs.errors import InputError

    cfg = Config(cluster="c1", output=Output(root=str(tmp_path / "typo")))
    with pytest.raises(InputError, match="--reports-only: no silver tables"):
        run_audit(spark, cfg, dt.date(2024, 3, 4), dt.date(2024, 3, 4), ingest=False, progress_interval=0)
    assert not (tmp_path / "typo").exists()  # nothing written there, not even a failed audit_runs row


def test_the_commits_of_the_lookback_days_are_one_write_s_held_files_never_the_table_s(
        spark, tmp_path, monkeypatch) -> None:
    """Issue 16: the commits are decoded once and written once over the lookback day and the range; the
    lookback day's rows are the run's state (exactly what a run over both days stores for that day), held
    in the write's staging folder until the reports are done, never in the table, and a killed run's held
    files are removed by the next run."""
    sim_mod = pytest.importorskip("epochlib.sim")
    from jobs import sink
    from jobs.config import parse_config
    from jobs.ingest import run_ingestion
    from jobs.sink import _lease, _staged, read_table

    sc = sim_mod.Scenario(name="late", seed=16, start=f"{D1}T18:00:00", days=0.5, commits=1500,
                          snapshot_interval_hours=2.0, retention_hours=3.0)
    sim = sim_mod.simulate(sc, tmp_path / "sim")

    def config(root: str):
        return parse_config({"cluster": "late", "inputs": {"offsets": str(sim.offsets)},
                             "output": {"root": str(tmp_path / root)}, "rules": {"lookback_days": 1}})

    def rows(df) -> list[str]:
        return sorted(str(tuple(r)) for r in df.select(*sorted(df.columns)).collect())

    whole, alone = config("whole"), config("alone")
    run_ingestion(spark, whole, D1, D2).release()
    want = rows(read_table(spark, "offset_commits", whole, date_range=(D1, D1)))
    assert want

    res = run_ingestion(spark, alone, D2, D2)
    staging = tmp_path / "alone" / "offset_commits" / sink.STAGING_DIR
    try:
        assert rows(res.lookback["offset_commits"]) == want
        assert len(os.listdir(staging)) == 2  # the held files' folder and its live lease
        assert res.tables["offset_commits"].rows_written == len(rows(read_table(spark, "offset_commits", whole,
                                                                                  date_range=(D2, D2))))
    finally:
        res.release()
    assert os.listdir(staging) == []
    table = tmp_path / "alone" / "offset_commits"
    assert {p.name for p in (table / "cluster=late").iterdir()} == {f"event_date={D2}"}

    # a run killed while the reports read its state: the held files stay in the staging folder only, and the
    # next run of the table removes them
    killed = run_ingestion(spark, alone, D2, D2)
    with monkeypatch.context() as m:
        m.setattr(_staged, "_discard_staging", lambda *a, **k: None)
        m.setattr(_lease, "remove_lease", lambda *a, **k: None)
        killed.release()
    assert len(os.listdir(staging)) == 2
    assert {p.name for p in (table / "cluster=late").iterdir()} == {f"event_date={D2}"}
    run_ingestion(spark, alone, D2, D2).release()
    assert os.listdir(staging) == []


def test_an_l3_regression_in_a_snapshot_just_after_midnight_is_found_by_the_nightly_run_of_its_day(
        spark, tmp_path) -> None:
    """The batch is dated 23:50 on D; the first snapshot holding it was taken at 00:00:14 on D+1. The run over D
    had the batch but not that snapshot's lineage, the run over D+1 had both but the finding (dated D) out of its
    range: nightly runs lost a critical finding that a run over D..D+1 reports."""
    from epochlib import checkpoint, records
    from epochlib.records import NewRecord
    from jobs.audit import run_audit
    from jobs.config import parse_config
    from jobs.sink import read_table_arrow

    day = dt.date(2024, 3, 4)
    late = int(dt.datetime(2024, 3, 4, 23, 50, tzinfo=dt.timezone.utc).timestamp() * 1000)
    pdir = tmp_path / "logdirs" / "broker=1" / "snapshot=20240305T000014Z" / "orders-0"
    pdir.mkdir(parents=True)
    (pdir / "leader-epoch-checkpoint").write_text(checkpoint.format_leader_epoch_checkpoint([(0, 0), (2, 10)]))
    # epochs 0, 2, then 1: a stale leader's batch after the newer epoch's (critical)
    seg = b"".join(records.encode_batch([NewRecord(b"k", b"v", late - 60_000 + i)], base_offset=10 * i,
                                        partition_leader_epoch=e) for i, e in enumerate((0, 2, 1)))
    (pdir / "00000000000000000000.log").write_bytes(seg)
    (pdir.parent / "log-start-offset-checkpoint").write_text(checkpoint.format_offset_checkpoint({("orders", 0): 0}))

    def config(root: str):
        return parse_config({"cluster": "c", "inputs": {"logdirs": str(tmp_path / "logdirs")},
                             "output": {"root": str(tmp_path / root)}})

    def l3(cfg) -> list[tuple]:
        return sorted((r["event_date"], r["kind"], r["severity"]) for r in read_table_arrow("fencing_violations", cfg)
                      .to_pylist() if r["rule"] == "L3")

    run_audit(spark, config("both"), day, day + dt.timedelta(days=1), progress_interval=0)
    nightly = config("nightly")
    run_audit(spark, nightly, day, day, progress_interval=0)
    run_audit(spark, nightly, day + dt.timedelta(days=1), day + dt.timedelta(days=1), progress_interval=0)
    assert l3(config("both")) == [(day, "batch_epoch_regression", "critical")]
    assert l3(nightly) == l3(config("both"))


def _kv_line(key: bytes, value: bytes, offset: int, ts: int) -> str:
    import base64
    import json

    return json.dumps({"key": base64.b64encode(key).decode(), "value": base64.b64encode(value).decode(),
                       "partition": 7, "offset": offset, "timestamp": ts})


def _group_lines() -> list[tuple[int, str]]:
    """(time, JSONL line) of two groups' records on ``__consumer_offsets``: ``old`` had a member on 03-01 and has
    been empty since 03-01 09:00 (its consumers stopped); an operator resets it on 03-03 and 03-04 (epoch -1, as
    ``kafka-consumer-groups`` writes). ``py`` has had a member since 03-01 (its last rebalance), a client that
    commits no epoch (kafka-python), and rewinds on 03-04 with nothing to explain it."""
    from epochlib import coordinator as co

    def ms(day: int, hour: int, minute: int = 0) -> int:
        return int(dt.datetime(2024, 3, day, hour, minute, tzinfo=dt.timezone.utc).timestamp() * 1000)

    def group(gid: str, ts: int, gen: int, clients: list[str]) -> tuple[bytes, bytes]:
        sub = co.encode_consumer_subscription({"topics": ["m"], "user_data": None, "owned_partitions": []}, 1)
        assignment = co.encode_consumer_assignment(
            {"assigned_partitions": [{"topic": "m", "partitions": [0]}], "user_data": None}, 1)
        members = [{"member_id": f"{c}-1", "group_instance_id": None, "client_id": c, "client_host": "/10.0.0.9",
                    "rebalance_timeout": 300000, "session_timeout": 45000, "subscription": sub,
                    "assignment": assignment} for c in clients]  # fmt: skip
        value = co.encode_group_metadata_value({"protocol_type": "consumer", "generation": gen,
                                                "protocol": "range" if clients else None,
                                                "leader": f"{clients[0]}-1" if clients else None,
                                                "current_state_timestamp": ts, "members": members})  # fmt: skip
        return co.encode_key(2, {"group": gid}), value

    def commit(gid: str, offset: int, epoch: int, ts: int) -> tuple[bytes, bytes]:
        return (co.encode_offset_commit_key(gid, "m", 0),
                co.encode_offset_commit_value(offset, leader_epoch=epoch, commit_timestamp=ts))

    recs = [(ms(1, 7), group("old", ms(1, 7), 4, ["c-old"])), (ms(1, 8), commit("old", 3000, 2, ms(1, 8))),
            (ms(1, 9), group("old", ms(1, 9), 5, [])), (ms(3, 9), commit("old", 5000, -1, ms(3, 9))),
            (ms(4, 9), commit("old", 4000, -1, ms(4, 9))),
            (ms(1, 7, 30), group("py", ms(1, 7, 30), 2, ["c-py"])), (ms(4, 8), commit("py", 500, -1, ms(4, 8))),
            (ms(4, 8, 5), commit("py", 400, -1, ms(4, 8, 5)))]  # fmt: skip
    recs.sort(key=lambda r: r[0])
    return [(t, _kv_line(k, v, i, t)) for i, (t, (k, v)) in enumerate(recs)]


def test_a_group_s_membership_older_than_the_lookback_is_read_by_a_run_over_one_day(spark, tmp_path) -> None:
    """A group empty for longer than ``lookback_days`` (its Empty record on 03-01, the run over 03-04 with a lookback
    of one day) is still empty: an operator's reset is S1b naming that record; and a group whose members' record is
    as old is still a consumer group: its rewind stays an error (S1e), though its client commits no epoch. From the
    run's inputs (a fresh root) and from the stored table (a nightly run whose inputs hold only the newer records)."""
    from jobs.audit import run_audit
    from jobs.config import parse_config
    from jobs.sink import read_table_arrow

    lines = _group_lines()
    whole, recent = tmp_path / "whole" / "dump", tmp_path / "recent" / "dump"
    mar3 = int(dt.datetime(2024, 3, 3, tzinfo=dt.timezone.utc).timestamp() * 1000)
    for d, rows in ((whole, [x for _, x in lines]), (recent, [x for t, x in lines if t >= mar3])):
        d.mkdir(parents=True)
        (d / "offsets.jsonl").write_text("\n".join(rows) + "\n")

    def config(inputs, root):
        return parse_config({"cluster": "g", "inputs": {"offsets": str(inputs.parent)},
                             "output": {"root": str(tmp_path / root)}, "rules": {"lookback_days": 1}})

    def resets(cfg) -> dict[str, tuple]:
        return {r["group_id"]: (r["rule"], r["kind"], r["severity"], r["evidence"][-1], r["detail"])
                for r in read_table_arrow("spurious_offset_resets", cfg).to_pylist()
                if r["event_date"].isoformat() == "2024-03-04"}  # fmt: skip

    fresh = config(whole, "fresh")
    run_audit(spark, fresh, "2024-03-04", "2024-03-04", progress_interval=0)
    nightly = config(whole, "nightly")
    run_audit(spark, nightly, "2024-03-01", "2024-03-01", progress_interval=0)
    nightly = config(recent, "nightly")
    run_audit(spark, nightly, "2024-03-04", "2024-03-04", progress_interval=0)
    longer = config(whole, "longer")
    run_audit(spark, longer, "2024-03-01", "2024-03-04", progress_interval=0)
    want = resets(longer)
    assert {g: r[:3] for g, r in want.items()} == {"old": ("S1b", "operator_reset", "info"),
                                                   "py": ("S1e", "spurious_rewind", "error")}
    assert want["old"][3].endswith("(group metadata)") and "empty since its record at" in want["old"][4]
    assert resets(fresh) == want
    # the nightly run's commits come from other files (their pointers differ); the group record from the table
    assert {g: (*r[:3], r[4]) for g, r in resets(nightly).items()} == {g: (*r[:3], r[4]) for g, r in want.items()}
    assert resets(nightly)["old"][3] == want["old"][3]
