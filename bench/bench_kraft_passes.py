"""The metadata-log report passes over observations, per core (no Spark), in CPU time: the reference functions
of :mod:`epochlib.rules.kraft` over ``MetadataObservation`` values against the columnar ones of
:mod:`epochlib.rules.kraft_pass` over the same Arrow table (which must give the same answers: checked here too).

Input, synthesised: a replayed log of 20 topics x 40 partitions whose leaders move every ~20 minutes over a day
(~58 k changes), and ``--observations`` rows in responses of 40 partitions (one topic each), captured through the
day by 50 clients from 6 brokers; 1 % of the responses serve an epoch one behind. A quarter of the responses
carry no topic ids (below v10), for the log's id fill.

    python bench/bench_kraft_passes.py                        # 1 M observations, ~1 min
    python bench/bench_kraft_passes.py --observations 200000 --repeat 3
"""

from __future__ import annotations

import argparse
import base64
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pyarrow as pa  # noqa: E402
import pyarrow.compute as pc  # noqa: E402

from epochlib.rules import kraft as ref  # noqa: E402
from epochlib.rules import kraft_pass as col  # noqa: E402
from epochlib.rules import observations_from_arrow  # noqa: E402

DAY = 86_400_000
T0 = 1_709_510_400_000  # 2024-03-04
TOPICS = [(f"topic-{i}", base64.urlsafe_b64encode(bytes([i + 1]) * 16).rstrip(b"=").decode()) for i in range(20)]
PARTS = 40


def make_log(rnd: random.Random) -> tuple[ref.LogView, dict]:
    """The view and, per (topic id, partition), the (start time, epoch) steps (for the observations)."""
    rows, steps, off = [], {}, 0
    for name, tid in TOPICS:
        off += 1
        rows.append(ref.HistoryChange(off, T0, name, tid, None, "topic_created"))
        for p in range(PARTS):
            off += 1
            rows.append(ref.HistoryChange(off, T0, name, tid, p, "created", 1, 0, (1, 2, 3)))
            steps[(tid, p)] = [(T0, 0)]
    t = T0
    while t < T0 + DAY:
        t += rnd.randint(1_000, 2_000)
        name, tid = rnd.choice(TOPICS)
        p = rnd.randrange(PARTS)
        off += 1
        epoch = steps[(tid, p)][-1][1] + 1
        steps[(tid, p)].append((t, epoch))
        rows.append(ref.HistoryChange(off, t, name, tid, p, "leader", rnd.randint(1, 6), epoch, (1, 2, 3)))
    return ref.LogView.build(rows), steps


def make_observations(rnd: random.Random, n: int, steps: dict) -> pa.Table:
    cols: dict[str, list] = {k: [] for k in ("capture_ts", "client_id", "broker", "topic", "topic_id", "partition",
                                             "leader_epoch", "correlation_id", "source", "position")}
    position = 0
    while len(cols["partition"]) < n:
        position += 1
        ts = T0 + rnd.randrange(DAY)
        name, tid = rnd.choice(TOPICS)
        stale = rnd.random() < 0.01
        no_ids = rnd.random() < 0.25
        client, broker = f"client-{rnd.randrange(50)}", str(rnd.randrange(1, 7))
        for p in range(PARTS):
            hist = steps[(tid, p)]
            i = max(j for j, (t, _) in enumerate(hist) if t <= ts)
            epoch = hist[max(0, i - 1)][1] if stale else hist[i][1]
            for k, v in (("capture_ts", ts), ("client_id", client), ("broker", broker), ("topic", name),
                         ("topic_id", None if no_ids else tid), ("partition", p), ("leader_epoch", epoch),
                         ("correlation_id", position), ("source", "captures-20240304.jsonl"), ("position", position)):
                cols[k].append(v)
    types = {"capture_ts": pa.int64(), "partition": pa.int32(), "leader_epoch": pa.int32(),
             "correlation_id": pa.int32(), "position": pa.int64()}
    return pa.table({k: pa.array(v[:n], types.get(k, pa.string())) for k, v in cols.items()})


def cpu(fn, repeat: int):
    best, out = float("inf"), None
    for _ in range(repeat):
        t = time.process_time()
        out = fn()
        best = min(best, time.process_time() - t)
    return best, out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--observations", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=1)
    args = ap.parse_args(argv)
    rnd = random.Random(17)
    view, steps = make_log(rnd)
    table = make_observations(rnd, args.observations, steps)
    index = col.SpanIndex.of(view)
    n, grace = table.num_rows, 1000
    print(f"{n:,} observations, {sum(len(s) for s in view.spans.values()):,} epoch spans", flush=True)

    s_obj, obs = cpu(lambda: observations_from_arrow(table), args.repeat)
    s_row, _ = cpu(lambda: [ref.MetadataObservation.from_row(r) for r in table.to_pylist()], args.repeat)
    s_fill_r, filled = cpu(lambda: ref.with_log_topic_ids(obs, view), args.repeat)
    s_fill_c, ids = cpu(lambda: col.fill_log_topic_ids(view, table), args.repeat)
    assert ids.to_pylist() == [o.topic_id for o in filled]
    table = table.set_column(table.schema.get_field_index("topic_id"), "topic_id", ids)
    s_m2_r, (found, _) = cpu(lambda: ref.check_broker_staleness_logged(filled, view, grace), args.repeat)
    s_m2_c, found_c = cpu(lambda: col.logged_staleness(index, table, grace), args.repeat)
    assert found_c == found
    s_lag_r, lags = cpu(lambda: ref.response_lags(filled, view, grace), args.repeat)
    s_lag_c, (judged, _) = cpu(lambda: col.row_lags(index, table, grace), args.repeat)
    clients = pc.unique(table.column("client_id")).to_pylist()
    by_client = {c: table.filter(pc.equal(table.column("client_id"), c)) for c in clients}
    s_m5_r, m5 = cpu(lambda: [f for c in clients for f in ref.check_metadata_offsets(
        [o for o in filled if o.client_id == c], view)], args.repeat)
    s_m5_c, m5_c = cpu(lambda: [f for c in clients for f in col.metadata_offsets(index, by_client[c])], args.repeat)
    assert m5_c == m5

    print(f"{'pass':<28}{'reference CPU-s':>16}{'columnar CPU-s':>16}{'ratio':>8}")
    for name, r, c in (("observations from Arrow", s_row, s_obj), ("log topic ids (M3)", s_fill_r, s_fill_c),
                       ("M2 from the log", s_m2_r, s_m2_c), ("metadata lag", s_lag_r, s_lag_c),
                       ("M5 (per client)", s_m5_r, s_m5_c)):
        print(f"{name:<28}{r:>16.2f}{c:>16.2f}{r / max(c, 1e-9):>7.0f}x")
    ref_total = s_row + s_fill_r + s_m2_r + s_lag_r + s_m5_r
    col_total = s_fill_c + s_m2_c + s_lag_c + s_m5_c
    print(f"{'all four passes':<28}{ref_total:>16.2f}{col_total:>16.2f}{ref_total / max(col_total, 1e-9):>7.0f}x"
          "  (the reference builds the objects once, as the report did per pass)")
    print(f"(findings: M2 {len(found)}, M5 {len(m5)}, "
          f"responses judged {len(lags):,}, rows judged {int(judged.sum()):,})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
