"""The fencing report's executor functions (pure Arrow, no Spark)."""

from __future__ import annotations

import random

import pyarrow as pa
from test_reports_fencing import LINEAGE

from epochlib.rules import check_lineage_history, check_replica_divergence
from jobs.reports import _frames as fr
from jobs.reports.fencing import _l3_replica, _lineage_rules


def _by_group(rows: list[dict], tolerance_ms: int) -> list[str]:
    """The finding ids of L5 per (broker, topic, partition) and D1/D2 per (topic, partition), grouped on the
    raw column values as ``groupBy().applyInArrow`` grouped them."""
    out = []
    for tp in dict.fromkeys((r["topic"], r["partition"]) for r in rows):
        part = [r for r in rows if (r["topic"], r["partition"]) == tp]
        snaps = sorted(fr.snapshots_from_arrow(pa.Table.from_pylist(part)), key=fr.snapshot_order)
        out += check_replica_divergence(snaps, tolerance_ms=tolerance_ms)
        for b in dict.fromkeys(r["broker"] for r in part):
            replica = [r for r in part if r["broker"] == b]
            out += check_lineage_history(sorted(fr.snapshots_from_arrow(pa.Table.from_pylist(replica)),
                                                key=fr.snapshot_order))  # fmt: skip
    return sorted(fr.findings_table(out).column("finding_id").to_pylist())


def test_lineage_rules_per_partition_equal_the_rules_per_group() -> None:
    """L5 and D1/D2 run as one ``mapInArrow`` per hash partition: whatever order and batches a partition's
    rows arrive in (several (topic, partition)s mixed; a null broker beside one named "None", which a
    snapshot reads alike; a null topic), the findings are those of the rules called once per replica (L5)
    and once per partition (D1/D2), as ``groupBy().applyInArrow`` called them."""
    rows = [dict(r, broker=str(r["broker"])) for r in LINEAGE]
    t1 = [r for r in rows if (r["topic"], r["partition"]) == ("t", 1)]  # an L5 truncation on broker 1
    rows += [dict(t1[0], broker=None), dict(t1[1], broker="None")]  # one snapshot each: no L5 of their own
    rows += [dict(r, topic=None) for r in t1]
    want = _by_group(rows, 60_000)
    kinds = {r["kind"] for r in pa.Table.from_batches(list(_lineage_rules(iter(pa.Table.from_pylist(rows).to_batches()),
                                                                          tolerance_ms=60_000))).to_pylist()}  # fmt: skip
    assert {"lineage_truncated", "replica_divergence_unresolved", "replica_lineage_conflict"} <= kinds

    rng = random.Random(7)
    for _ in range(20):
        rng.shuffle(rows)
        table = pa.Table.from_pylist(rows)
        cuts = sorted(rng.sample(range(1, len(rows)), 2))
        batches = [table.slice(a, b - a).combine_chunks().to_batches()[0]
                   for a, b in zip([0, *cuts], [*cuts, len(rows)], strict=True)]  # fmt: skip
        got = pa.Table.from_batches(list(_lineage_rules(iter(batches), tolerance_ms=60_000)))
        assert sorted(got.column("finding_id").to_pylist()) == want
    assert list(_lineage_rules(iter([]), tolerance_ms=60_000)) == []


def test_l3_skips_batches_whose_snapshot_lies_outside_the_window() -> None:
    """A batch dated on D1 from a snapshot taken on D2 is read by a run over D1 without its lineage
    snapshot (dated D2): nothing to judge it against, no crash (issue 13, found by the midnight test)."""
    snaps = pa.table({"snapshot_ts": pa.array([1_000], pa.int64())})
    batches = pa.table({"snapshot_ts": pa.array([2_000, 2_000], pa.int64())})
    assert _l3_replica(snaps, batches) == []
