"""Incidents (issue 17): findings grouped by subject, cause and time; the simulator's truth for the demo forms
one incident per injected anomaly; re-check commands name the evidence relative to the input roots; the
terminal summary and the JSON summary list the same incidents."""

from __future__ import annotations

import datetime as dt
import json
import shlex

import pytest

from epochlib.incidents import (
    IncidentWindows,
    group_incidents,
    parse_pointer,
    printable,
    recheck_commands,
    relative_path,
)
from epochlib.rules._model import capture_pointer, offsets_pointer

T0 = int(dt.datetime(2024, 3, 4, 6, 0, tzinfo=dt.timezone.utc).timestamp() * 1000)
MIN = 60_000
HOUR = 60 * MIN
ROOTS = {"offsets": "/data/in/offsets", "logdirs": "/data/in/logdirs", "metadata": "/data/in/metadata"}


def f(fid: str, rule: str, kind: str, sev: str, ms: int, **kw) -> dict:
    return {"finding_id": fid, "rule": rule, "kind": kind, "severity": sev, "event_ts": ms, **kw}


def unclean_election(topic: str = "orders", partition: int = 3) -> list[dict]:
    """17 F2 commits of two groups after an unclean election, the consumers' rewinds, then the replicas'
    truncation and an unresolved divergence seen at the next snapshot rounds (2 h apart)."""
    rows = [f(f"f2-{i}", "F2", "commit_beyond_epoch_end", "error", T0 + i * 3 * MIN, topic=topic, partition=partition,
              group_id=("orders-audit", "orders-processor")[i % 2], end_offset=89004, committed_offset=90000 + 100 * i,
              records_affected=996 + 100 * i,
              evidence=[offsets_pointer("/data/in/offsets/__consumer_offsets-7/00000000000000000000.log", 100 * i, i)])
            for i in range(17)]  # fmt: skip
    rows.append(f("s1", "S1a", "truncation", "info", T0 + 55 * MIN, topic=topic, partition=partition,
                  group_id="orders-processor", previous_offset=91500, new_offset=89046, truncation_point=89004))
    rows.append(f("l5", "L5", "lineage_truncated", "info", T0 + 2 * HOUR, topic=topic, partition=partition, broker="1",
                  evidence=["checkpoint:/data/in/logdirs/broker=1/snapshot=20240304T080000Z/orders-3/"
                            "leader-epoch-checkpoint line 4"]))
    rows.append(f("d1", "D1", "replica_divergence_unresolved", "error", T0 + 4 * HOUR, topic=topic,
                  partition=partition, broker="3", records_affected=14160))
    return rows


def test_an_unclean_election_is_one_incident_in_time_order():
    other = f("skip", "S2b", "spurious_skip", "error", T0 + 10 * MIN, topic="orders", partition=4,
              group_id="orders-processor", previous_offset=79861, new_offset=82876, records_skipped=3015)
    incidents = group_incidents([*reversed(unclean_election()), other])
    assert len(incidents) == 2
    big = next(i for i in incidents if i.partitions == (("orders", 3),))
    assert len(big.findings) == 20 and big.severity == "error"
    times = [r["event_ts"] for r in big.findings]
    assert times == sorted(times) and big.findings[0]["finding_id"] == "f2-0" and big.findings[-1]["finding_id"] == "d1"
    assert big.start_ms == T0 and big.end_ms == T0 + 4 * HOUR
    assert big.groups == ("orders-audit", "orders-processor") and big.brokers == ("1", "3")
    # the largest count per (group or replica, partition), not the sum of 17 overlapping ones
    assert big.records_affected == (996 + 1600) + (996 + 1500) + 14160
    assert big.title == "F2 commit_beyond_epoch_end on orders-3"
    assert ("F2", "commit_beyond_epoch_end", "error", 17) in big.kinds and "truncated" in big.meaning
    # the same group on another partition minutes later is a separate incident (different partition,
    # not a group-wide action: the group link only spans minutes)
    assert next(i for i in incidents if i is not big).partitions == (("orders", 4),)


def test_time_windows_split_a_partition_and_join_a_group_action():
    a = f("a", "S1e", "spurious_rewind", "error", T0, topic="t", partition=0, group_id="g")
    b = f("b", "S1e", "spurious_rewind", "error", T0 + 4 * HOUR, topic="t", partition=0, group_id="g")
    assert len(group_incidents([a, b])) == 2  # 4 h apart on one partition: two incidents
    assert len(group_incidents([a, b], IncidentWindows(partition_gap_ms=5 * HOUR))) == 1
    resets = [f(f"r{p}", "S1b", "operator_reset", "info", T0 + p * 1000, topic="shipments", partition=p,
                group_id="router") for p in range(3)]  # fmt: skip
    late = f("r9", "S1b", "operator_reset", "info", T0 + HOUR, topic="shipments", partition=9, group_id="router")
    incidents = group_incidents([*resets, late])
    assert [len(i.partitions) for i in incidents] == [3, 1]  # one reset command, then another an hour later


def test_causes_and_shared_evidence_join_across_subjects_and_time():
    k2 = f("k2", "K2", "unclean_leader_election", "warning", T0, topic="orders", partition=3)
    f2 = f("f2", "F2", "commit_beyond_epoch_end", "error", T0 + 10 * HOUR, topic="orders", partition=3,
           group_id="g", cause_finding_id="k2")
    (one,) = group_incidents([k2, f2])
    assert one.lead is not None and one.lead["kind"] == "unclean_leader_election"  # the cause names it
    assert one.severity == "error"
    m2 = f("m2", "M2", "broker_served_stale", "warning", T0, topic="orders", partition=2, broker="1",
           evidence=["capture:/data/in/metadata/a.jsonl line 1446"])
    s1 = f("s1", "S1d", "spurious_rewind_to_earliest", "error", T0 + 14 * MIN, topic="orders", partition=7,
           group_id="g2", correlated_finding_id="m2")
    m2b = f("m2b", "M2", "broker_served_stale", "warning", T0 + 30 * MIN, topic="payments", partition=0,
            broker="2", evidence=["capture:/data/in/metadata/a.jsonl line 1446"])  # the same response
    (joined,) = group_incidents([m2, s1, m2b])
    assert {fid["finding_id"] for fid in joined.findings} == {"m2", "s1", "m2b"}
    assert [i.partitions for i in group_incidents([m2, {**s1, "correlated_finding_id": None}])] == [
        (("orders", 7),), (("orders", 2),)]


def test_incidents_are_numbered_most_severe_first_then_by_time():
    rows = [f("i", "F4", "commit_epoch_dropped", "info", T0, topic="a", partition=0, group_id="g1"),
            f("w", "M2", "broker_served_stale", "warning", T0 + MIN, topic="b", partition=0, broker="1"),
            f("e2", "S2b", "spurious_skip", "error", T0 + 2 * HOUR, topic="c", partition=0, group_id="g3"),
            f("e1", "S1e", "spurious_rewind", "error", T0 + HOUR, topic="d", partition=0, group_id="g4"),
            f("c", "L3", "batch_epoch_regression", "critical", T0 + 3 * HOUR, topic="e", partition=0, broker="2")]
    got = [(i.number, i.severity, i.findings[0]["finding_id"]) for i in group_incidents(rows)]
    assert got == [(1, "critical", "c"), (2, "error", "e1"), (3, "error", "e2"), (4, "warning", "w"), (5, "info", "i")]
    ids = {i.incident_id for i in group_incidents(rows)}
    assert ids == {i.incident_id for i in group_incidents(list(reversed(rows)))}  # stable ids


# ------------------------------------------------------------------------------------- the demo's truth


def _expected_components(truth: list[dict]) -> set[frozenset[tuple]]:
    """The simulator's own guarantee (epochlib/sim/incidents.py): a partition belongs to one incident, and
    an incident's dedicated group acts on its partitions at one instant. As sets of subjects."""
    parent: dict[tuple, tuple] = {}

    def find(x: tuple) -> tuple:
        parent.setdefault(x, x)
        while parent[x] != x:
            x = parent[x]
        return x

    def subject(r: dict) -> tuple:
        return ("p", r["topic"], r["partition"]) if r.get("partition") is not None else ("t", r["topic"])

    by_group_instant: dict[tuple, tuple] = {}
    topic_level = {r["topic"] for r in truth if r.get("partition") is None}
    for r in truth:
        s = find(subject(r))
        if r.get("partition") is not None and r["topic"] in topic_level:
            # a partition finding on a topic with topic-level findings (a re-creation's M3 and the M5
            # regression the re-creation causes on partition 0) belongs to that topic's incident
            parent[find(("t", r["topic"]))] = s
        if r.get("group_id"):
            other = by_group_instant.setdefault((r["group_id"], r["event_ts"]), s)
            parent[find(other)] = s
    comps: dict[tuple, set] = {}
    for r in truth:
        comps.setdefault(find(subject(r)), set()).add(subject(r))
    return {frozenset(c) for c in comps.values()}


def _subjects(incident) -> frozenset[tuple]:
    """The subjects of an incident's findings (a topic-level finding beside partition ones keeps its own)."""
    return frozenset(("p", r["topic"], r["partition"]) if r.get("partition") is not None else ("t", r["topic"])
                     for r in incident.findings)


def _anomalies_with_findings(a) -> int:
    """Injected anomalies that cause findings: every count except the ones that refine another
    (unresolved divergence is an unclean election's; a re-creation shows only with its M3) or cause none."""
    import dataclasses

    counts = dataclasses.asdict(a)
    return sum(counts.values()) - a.unresolved_divergence - a.topic_recreations - a.aborted_txns


def test_the_demo_truth_forms_one_incident_per_injected_anomaly(tmp_path):
    sim = pytest.importorskip("epochlib.sim")
    from jobs.accuracy import read_truth

    scenario = sim.preset("demo")
    res = sim.simulate(scenario, tmp_path / "demo")
    truth = read_truth(res.truth)
    incidents = group_incidents(truth)
    assert len(incidents) == _anomalies_with_findings(scenario.anomalies) == 22
    # the README's account of the demo page says the same (it said 58 findings in 18 incidents for a long while)
    from pathlib import Path

    readme = " ".join((Path(__file__).parents[1] / "README.md").read_text(encoding="utf-8").split())
    assert f"The demo's {len(truth)} findings form {len(incidents)} incidents" in readme
    assert {_subjects(i) for i in incidents} == _expected_components(truth)
    unclean = next(i for i in incidents if ("orders", 3) in i.partitions)
    assert {r["kind"] for r in unclean.findings} >= {"commit_beyond_epoch_end", "truncation", "lineage_truncated",
                                                     "replica_divergence_unresolved"}


@pytest.mark.slow
@pytest.mark.parametrize("preset", ["accuracy-1", "accuracy-2", "accuracy-3"])
def test_every_accuracy_preset_gives_one_incident_per_anomaly(preset, tmp_path):
    """Wider scenarios: two or three incidents of a kind, a partition reused hours later by another
    incident, a divergence proven two snapshot rounds (6 h) after the commits past its truncation point."""
    sim = pytest.importorskip("epochlib.sim")
    from jobs.accuracy import read_truth

    scenario = sim.preset(preset)
    incidents = group_incidents(read_truth(sim.simulate(scenario, tmp_path / preset).truth))
    assert len(incidents) == _anomalies_with_findings(scenario.anomalies)


# ---------------------------------------------------------------------------------------- re-checking


def test_recheck_commands_use_the_input_roots_and_the_suggested_offsets():
    rows = unclean_election()
    rows[0]["group_id"] = "it's a group"  # quoting survives odd names
    (inc,) = group_incidents(rows)
    cmds = recheck_commands(inc, ROOTS)
    text = "\n".join(c.command for c in cmds)
    assert ('kafka-dump-log.sh --files "$OFFSETS"/__consumer_offsets-7/00000000000000000000.log --offsets-decoder '
            "| grep -E '\\| offset: (0|1|2|3|4) '") in text
    assert 'cat "$LOGDIRS"/broker=1/snapshot=20240304T080000Z/orders-3/leader-epoch-checkpoint' in text
    assert "kafka-topics.sh --bootstrap-server \"$BOOTSTRAP\" --describe --topic orders" in text
    assert "--describe --group orders-audit" in text
    dry = [c.command for c in cmds if "--reset-offsets" in c.command]
    assert all(c.endswith("--dry-run") for c in dry) and len(dry) == 3
    assert ("kafka-consumer-groups.sh --bootstrap-server \"$BOOTSTRAP\" --group orders-audit --topic orders:3 "
            "--reset-offsets --to-offset 89004 --dry-run") in dry  # the epoch end the F2 evidence names
    odd = next(c for c in dry if "it" in c)
    assert shlex.split(odd)[4] == "it's a group"
    assert "/data/in" not in text  # every evidence path is relative to a root


def test_pointers_and_relative_paths():
    p = parse_pointer(offsets_pointer("/data/in/offsets/__consumer_offsets-3/00000000000000000000.log", 4096, 12))
    assert p is not None and (p.kind, p.position, p.unit, p.number, p.offset) == ("offsets", 4096, None, None, 12)
    assert p.file == "/data/in/offsets/__consumer_offsets-3/00000000000000000000.log"
    c = parse_pointer("capture:/data/in/metadata/x.pcap frame 7")
    assert c is not None and (c.kind, c.unit, c.number, c.position) == ("capture", "frame", 7, None)
    assert parse_pointer("no pointer here") is None
    assert relative_path("file:///data/in/logdirs/broker=1/x", ROOTS) == "$LOGDIRS/broker=1/x"
    nested = {"offsets": "/data", "logdirs": "/data/in/logdirs"}
    assert relative_path("/data/in/logdirs/a", nested) == "$LOGDIRS/a"  # the longest root wins
    assert relative_path("/elsewhere/a", ROOTS) == "/elsewhere/a"
    assert relative_path("/data/in/offsets-old/a", ROOTS) == "/data/in/offsets-old/a"  # not a prefix match


# ----------------------------------------------------------------------------- terminal and JSON summary


def test_terminal_and_json_summaries_list_the_same_incidents(tmp_path):
    import pyarrow as pa

    from jobs import schemas
    from jobs.alerts import run_document
    from jobs.config import Config, Inputs, Output
    from jobs.sink import write_small
    from jobs.summary import format_summary, summarise

    day = dt.date(2024, 3, 4)
    cfg = Config(cluster="c1", output=Output(root=str(tmp_path / "t")), inputs=Inputs(**ROOTS))
    rows = unclean_election()
    hostile = "orders-processor\x1b]0;PWNED\x07\x1b[2J\nStatus: ok\u202e"  # a client chose this group id
    rows.append(f("skip", "S2b", "spurious_skip", "error", T0 + 9 * HOUR, topic="orders", partition=4,
                  group_id=hostile, previous_offset=79861, new_offset=82876, records_skipped=3015))
    by_table: dict[str, list[dict]] = {"fencing_violations": [], "spurious_offset_resets": []}
    for r in rows:
        table = "spurious_offset_resets" if r["rule"].startswith("S") else "fencing_violations"
        by_table[table].append({**r, "cluster": "c1", "event_date": day, "run_id": "r",
                                "event_ts": dt.datetime.fromtimestamp(r["event_ts"] / 1000, dt.timezone.utc)})
    for table, items in by_table.items():
        schema = schemas.arrow_schema(table)
        data = pa.Table.from_pylist([{fl.name: r.get(fl.name) for fl in schema} for r in items], schema=schema)
        write_small(data, table, config=cfg, date_range=(day, day))
    s = summarise(cfg, day, day)
    text = format_summary(s)
    assert "incidents: 2 (2 error)" in text
    assert "#1   error    2024-03-04 06:00:00 .. 10:00:00  F2 commit_beyond_epoch_end on orders-3 (20 findings" in text
    assert "#2   error    2024-03-04 15:00:00  S2b spurious_skip on orders-4 (1 finding, 3,015 records)" in text
    # the terminal gets the group id escaped: no escape sequence acts, no forged line
    assert "orders-processor\\x1b]0;PWNED\\x07\\x1b[2J\\nStatus: ok\\u202e" in text
    assert "\x1b" not in text and "\u202e" not in text and "\nStatus" not in text
    doc = run_document(cluster="c1", date_from=day, date_to=day, status="ok", summary=s)
    data = json.loads(json.dumps(doc))["findings"]  # what --summary-json writes, JSON-ready as is
    assert [(i["number"], i["title"], i["finding_count"]) for i in data["incidents"]] == [
        (1, "F2 commit_beyond_epoch_end on orders-3", 20), (2, "S2b spurious_skip on orders-4", 1)]
    assert data["incidents"][0]["start"] == "2024-03-04T06:00:00.000Z"
    assert any("--to-offset 79861 --dry-run" in c["command"] for c in data["incidents"][1]["recheck"])
    assert any('"$OFFSETS"/__consumer_offsets-7/' in c["command"] for c in data["incidents"][0]["recheck"])
    assert data["input_roots"]["OFFSETS"] == ROOTS["offsets"]  # what $OFFSETS stands for
    assert data["total"] == 21
    assert any(g == hostile for i in data["incidents"] for g in i["groups"])  # the JSON keeps the data as it is
    # `report` with only --output-root and --cluster (the README's command): the roots come from the run that wrote
    # the range (audit_runs.input_root), so the commands are still relative to them (they were absolute paths)
    from jobs.runlog import RunContext, SourceCounts, audit_run_table

    bare = Config(cluster="c1", output=Output(root=str(tmp_path / "t")))
    assert not any('"$OFFSETS"' in c.command for i in summarise(bare, day, day).incidents
                   for c in recheck_commands(i, summarise(bare, day, day).roots))
    run = RunContext.start(cfg, day)
    write_small(audit_run_table(run, [SourceCounts("offsets", "batch", 3, 0, 3)]), "audit_runs", config=cfg,
                mode="append")
    s = summarise(bare, day, day)
    assert s.roots == {"offsets": ROOTS["offsets"]}
    assert any('"$OFFSETS"/__consumer_offsets-7/' in c.command for c in recheck_commands(s.incidents[0], s.roots))
    assert summarise(bare, day + dt.timedelta(days=1), day + dt.timedelta(days=1)).roots == {}  # not that run's range


# the pointers as the rules write them (epochlib.rules._model, epochlib.rules.kraft), one file each
REAL_POINTERS = [
    offsets_pointer("/data/in/offsets/broker=1/__consumer_offsets-7/00000000000000000000.log", 2626, 30),
    offsets_pointer("/data/in/offsets/dumps/offsets 7.txt", 12, 31),
    offsets_pointer("/data/in/offsets/dumps/o.parquet", 4, None),
    "segment:/data/in/logdirs/broker=1/snapshot=20240304T080000Z/orders-3/00000000000000089000.log@byte 0 offset 89000",
    "checkpoint:/data/in/logdirs/broker=1/snapshot=20240304T080000Z/orders-3/leader-epoch-checkpoint line 4",
    capture_pointer("/data/in/metadata/c.jsonl", 329),
    capture_pointer("/data/in/metadata/c.pcap", 7),
]


def _files(cmd: str) -> list[str]:
    return [a for a in shlex.split(cmd.replace('"$OFFSETS"', "/data/in/offsets").replace('"$LOGDIRS"', "/data/in/logdirs")
                                   .replace('"$METADATA"', "/data/in/metadata")) if a.startswith("/data/in/")]


@pytest.mark.parametrize("pointer", REAL_POINTERS)
def test_each_evidence_pointer_the_rules_write_gets_a_command_on_the_file_itself(pointer: str) -> None:
    """The commands name the evidence file exactly (it named ``…log@byte 2626``, which kafka-dump-log ignores as an
    unknown file, for every segment pointer the job writes) and the record it points at."""
    (inc,) = group_incidents([f("x", "F2", "commit_beyond_epoch_end", "error", T0, topic="orders", partition=3,
                                group_id="g", evidence=[pointer])])
    cmds = [c for c in recheck_commands(inc, ROOTS) if "kafka-topics" not in c.command and "consumer-groups" not in c.command]
    assert len(cmds) == 1, cmds
    (path,) = _files(cmds[0].command)
    assert path == parse_pointer(pointer).file and "@" not in path
    cmd = cmds[0].command
    expected = {"offsets": {"log": "| offset: 30 ", "txt": "sed -n 12p ", "parquet": " 4"}, "segment": "baseOffset: 89000 ",
                "checkpoint": "cat ", "capture": {"jsonl": "sed -n 329p ", "pcap": "frame.number in {7}"}}[pointer.split(":")[0]]
    if isinstance(expected, dict):
        expected = expected[path.rsplit(".", 1)[1]]
    assert expected in cmd, cmd


def test_a_metadata_log_finding_gets_the_metadata_decoder_command() -> None:
    from epochlib.rules.kraft import HistoryChange

    base = {"metadata_offset": 97200, "topic": "orders", "topic_id": "AAAAAAAAAAAAAAAAAAAAAQ", "partition": 3, "position": 97200, "change": "leader"}
    seg = HistoryChange.from_row({**base, "source": "/data/in/cm/__cluster_metadata-0/00000000000000000000.log"})
    snap = HistoryChange.from_row({**base, "source": "/data/in/cm/__cluster_metadata-0/00000000000000090000-0000000003"
                                   ".checkpoint"})
    (inc,) = group_incidents([f("k", "K2", "unclean_leader_election", "critical", T0, topic="orders", partition=3,
                                evidence=[seg.pointer(), snap.pointer()])])
    cmds = [c.command for c in recheck_commands(inc, {**ROOTS, "cluster_metadata": "/data/in/cm"})]
    assert ("kafka-dump-log.sh --cluster-metadata-decoder --files "
            "\"$CLUSTER_METADATA\"/__cluster_metadata-0/00000000000000000000.log | grep -E '\\| offset: 97200 '") in cmds
    assert ("kafka-dump-log.sh --cluster-metadata-decoder --files "
            "\"$CLUSTER_METADATA\"/__cluster_metadata-0/00000000000000090000-0000000003.checkpoint") in cmds


def test_every_captured_line_a_finding_names_is_printed_not_only_the_first() -> None:
    rows = [f(f"m{i}", "M1", "stale_metadata", "warning", T0 + i, topic="orders", partition=3, broker="2",
              evidence=[capture_pointer("/data/in/metadata/c.jsonl", n)]) for i, n in enumerate((326, 329))]
    (inc,) = group_incidents(rows)
    assert any(c.command == "sed -n '326p;329p' \"$METADATA\"/c.jsonl" for c in recheck_commands(inc, ROOTS))


def test_pasting_the_commands_runs_nothing_a_name_in_the_evidence_chose(tmp_path) -> None:
    """A group id with a newline, a file name with ``$(…)``: pasted into a shell as the HTML shows them (``# what``
    above each command), the commands run only Kafka's tools (found by a review: both ran ``touch``)."""
    import os
    import subprocess

    bad_group = f"clicks\ntouch {tmp_path}/PWNED_GROUP #\u202e\x1b]0;t\x07"
    bad_file = f"/data/in/metadata/caps-$(touch {tmp_path}/PWNED_FILE)-`touch {tmp_path}/PWNED_TICK`.jsonl"
    (inc,) = group_incidents([f("s", "S2b", "spurious_skip", "error", T0, topic="orders", partition=3, group_id=bad_group,
                                previous_offset=5, evidence=[capture_pointer(bad_file, 3)])])
    cmds = recheck_commands(inc, ROOTS)
    script = "".join(f"# {c.what}\n{c.command}\n" for c in cmds)
    assert all("\n" not in c.what and "\x1b" not in c.what and "\u202e" not in c.what for c in cmds)
    stubs = tmp_path / "bin"
    stubs.mkdir()
    for tool in ("kafka-dump-log.sh", "kafka-topics.sh", "kafka-consumer-groups.sh", "sed", "tshark"):
        (stubs / tool).write_text("#!/bin/sh\nexit 0\n")
        (stubs / tool).chmod(0o755)
    env = {"PATH": f"{stubs}:{os.environ['PATH']}", "METADATA": str(tmp_path / "m"), "BOOTSTRAP": "b:9092"}
    subprocess.run(["bash", "-c", script], env=env, check=False, capture_output=True, timeout=30)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["bin"]


def test_printable_escapes_what_a_terminal_would_act_on() -> None:
    assert printable("a\nb\x1b[2J\x1b]0;x\x07\u202eok\x9b") == "a\\nb\\x1b[2J\\x1b]0;x\\x07\\u202eok\\x9b"
    assert printable("orders-processor é ü 日本") == "orders-processor é ü 日本"
    # a backslash is doubled, so a name holding a literal backslash-n reads apart from one holding a newline
    assert printable("a\\nb") == "a\\\\nb" != printable("a\nb") == "a\\nb"
    assert printable("x\u061cy") == "x\\u061cy"  # the Arabic letter mark reorders text too


def test_evidence_without_a_file_gets_no_command() -> None:
    (inc,) = group_incidents([f("x", "F2", "commit_beyond_epoch_end", "error", T0, topic="orders", partition=3,
                                group_id="g", evidence=[offsets_pointer(None, None, None)])])
    assert not [c for c in recheck_commands(inc, ROOTS) if "'?'" in c.command or " ?" in c.command]


def test_roots_are_compared_in_the_form_the_evidence_names_files(tmp_path) -> None:
    """Evidence names files ``<native root>/<rel>``: a root written ``s3a://`` must match ``s3://`` sources, or every
    command kept its absolute URI (a review)."""
    from jobs.config import Config, Inputs, Output
    from jobs.summary import input_roots

    cfg = Config(cluster="c", output=Output(root=str(tmp_path)), inputs=Inputs(offsets="s3a://bucket/in/"))
    roots = input_roots(cfg)
    assert roots == {"offsets": "s3://bucket/in"}
    assert relative_path("s3://bucket/in/broker=1/__consumer_offsets-3/0.log", roots) == \
        "$OFFSETS/broker=1/__consumer_offsets-3/0.log"


def test_the_top_subjects_tie_by_name_not_by_the_order_the_tables_were_read_in() -> None:
    from collections import Counter

    from jobs.summary import most_findings

    one, other = Counter(["payments-api", "inventory-dashboard", "inventory-dashboard", "payments-api", "z"]), \
        Counter(["inventory-dashboard", "payments-api", "payments-api", "inventory-dashboard", "z"])
    assert most_findings(one, 2) == most_findings(other, 2) == [("inventory-dashboard", 2), ("payments-api", 2)]
    assert most_findings(Counter({"10": 1, "2": 1, "3": 5}), 3) == [("3", 5), ("2", 1), ("10", 1)]  # brokers by number
