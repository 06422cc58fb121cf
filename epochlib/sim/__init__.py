"""The cluster simulator with ground truth (issue 5).

``simulate(scenario, out_dir)`` writes a simulated cluster's evidence in the input layout of
DESIGN.md — ``offsets/`` (``__consumer_offsets`` segments), ``logdirs/`` (broker snapshots),
``metadata/`` (MetadataResponse captures as JSONL and pcap), ``cluster_metadata/`` (the controller's
KRaft metadata log: ``node=<id>/__cluster_metadata-0/`` with segments and a snapshot) — plus ``truth.jsonl``: one line per
finding the injected anomalies cause (rule, kind, severity, subject, event time, note) and
``simulation.json`` (the scenario and the counts). Same scenario, same bytes.

CLI contract (``epoch-audit simulate --preset demo --out DIR [--commits N] [--seed S]``)::

    from epochlib.sim import preset, simulate
    result = simulate(preset(name, commits=n, seed=s), out_dir)
    print(result.summary())
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .scenario import Anomalies, Scenario, preset, scenario_presets

__all__ = ["Anomalies", "Scenario", "SimResult", "preset", "scenario_presets", "simulate"]


@dataclass(frozen=True)
class SimResult:
    """Where the output went and what it holds."""

    out_dir: Path
    offsets: Path
    logdirs: Path
    metadata: Path
    truth: Path
    date_from: str  # first and last UTC event dates, for ``epoch-audit run --from/--to``
    date_to: str
    counts: dict[str, int]
    truth_counts: dict[str, int]  # "RULE:kind" -> findings in truth.jsonl
    cluster_metadata: Path  # the [inputs] cluster_metadata folder (holds node=<id>/__cluster_metadata-0/)

    @property
    def date_range(self) -> tuple[str, str]:
        """(first, last) UTC event date, ISO text."""
        return (self.date_from, self.date_to)

    @property
    def truth_path(self) -> Path:
        return self.truth

    def summary(self) -> str:
        return "\n".join(self.summary_lines())

    def summary_lines(self) -> list[str]:
        """The lines of :meth:`summary`, each whole (a path in one holding a newline stays in that line): a
        caller escaping what it prints escapes each line, never the newlines between them."""
        c = self.counts
        lines = [
            f"simulated {self.date_from}..{self.date_to} into {self.out_dir}",
            f"  {c['commits']} commits in {c['commit_batches']} batches, {c['group_metadata']} group records, "
            f"{c['tombstones']} tombstones, {c['txn_markers']} txn markers",
            f"  {c['snapshots']} broker snapshots ({c['snapshot_files']} files, {c['data_batches']} data batches), "
            f"{c['metadata_responses']} metadata responses, {c.get('metadata_records', 0)} metadata log records "
            f"({c.get('metadata_partition_changes', 0)} partition changes)",
            f"  ground truth: {sum(self.truth_counts.values())} findings in {self.truth}",
        ]
        lines += [f"    {k}: {v}" for k, v in self.truth_counts.items()]
        return lines


def simulate(scenario: Scenario, out_dir: str | Path) -> SimResult:
    """Run ``scenario`` and write its files under ``out_dir`` (which must not already hold a simulation).

    Raises:
        FileExistsError: ``out_dir`` already has ``offsets/``, ``logdirs/``, ``metadata/`` or ``cluster_metadata/``.
        ImportError: a codec module the simulator writes through is not available.
    """
    from .engine import Sim
    from .writers import MetadataCaptures

    out = Path(out_dir)
    for sub in ("offsets", "logdirs", "metadata", "cluster_metadata"):
        if (out / sub).exists():
            raise FileExistsError(f"{out / sub} already exists; simulate into an empty folder")
    out.mkdir(parents=True, exist_ok=True)
    sim = Sim(scenario, out)
    sim.setup()
    sim.captures = MetadataCaptures(out / "metadata", scenario.start.replace("-", ""))
    try:
        sim.plan()
        sim.run()
    finally:
        for log in sim.olog.values():
            log.close()
        sim.captures.close()
        sim.klog.close(sim.t_end)
    sim.truth.close()
    d0 = dt.datetime.fromtimestamp(sim.t0 / 1000, dt.timezone.utc).date()
    d1 = dt.datetime.fromtimestamp((sim.t_end - 1) / 1000, dt.timezone.utc).date()
    counts = dict(sim.counts)
    counts["offsets_segments"] = sum(log.segments for log in sim.olog.values())
    counts["offsets_bytes"] = sum(log.bytes for log in sim.olog.values())
    counts["pcap_pairs"] = sim.captures.pcap_pairs
    counts["jsonl_lines"] = sim.captures.jsonl_lines
    counts.update(sim.klog.counts)
    res = SimResult(out, out / "offsets", out / "logdirs", out / "metadata", sim.truth.path, d0.isoformat(),
                    d1.isoformat(), counts, sim.truth.counts(), out / "cluster_metadata")  # fmt: skip
    meta: dict[str, Any] = {"scenario": dataclasses.asdict(scenario), "date_from": res.date_from,
                            "date_to": res.date_to, "counts": counts, "truth_counts": res.truth_counts}  # fmt: skip
    (out / "simulation.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return res
