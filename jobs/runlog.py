"""Operational rows: ``quarantine`` (undecodable input units) and ``audit_runs`` (one row per run and
source kind), plus the :class:`RunContext` every job of a run shares, and the run's status.

Statuses (what a scheduler alerts on; README "Nightly"): per source kind, :func:`source_status` says
``ok`` (units decoded on every day of the range), ``partial`` (some units quarantined, or days of the
range without rows) or ``no_input`` (the configured source yielded nothing: no units, or none decoded);
the KRaft metadata log (:data:`JUDGED_BY_UNITS`) is judged by its units alone — a quiet day changes
nothing, so a day without ``partition_history`` rows is not missing input;
the run's status (:func:`run_status`) is ``failed`` when it raised, ``no_input`` when every configured
source has none — or every configured daily source (all but the metadata log, whose old files decode on any
night) —, ``partial`` when any source is not ``ok``, else ``ok``.

Ingestion jobs build quarantine rows on the executors with :func:`quarantine_frame` (a DataFrame
transform) or on the driver with :func:`quarantine_row`; the run's end builds ``audit_runs`` rows with
:func:`audit_run_table` from :class:`SourceCounts`, whose constructor enforces the reconciliation
``units_read = units_decoded + units_quarantined`` (DESIGN.md "Outputs").
"""

from __future__ import annotations

import datetime as dt
import uuid
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from . import schemas
from .config import Config, parse_date_range

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

    from .sink import SinkResult

__all__ = [
    "JUDGED_BY_UNITS",
    "days_of",
    "spans",
    "unit_count",
    "MAX_RAW_BYTES",
    "SOURCE_KINDS",
    "SOURCE_STATUSES",
    "STATUSES",
    "UNITS",
    "RunContext",
    "SourceCounts",
    "SourceStatus",
    "audit_run_table",
    "clusters_with_runs",
    "new_run_id",
    "no_run_of_cluster",
    "run_status",
    "source_status",
    "bound_raw",
    "quarantine_frame",
    "quarantine_row",
    "quarantine_table",
    "write_audit_runs",
]

#: At most this many bytes of an undecodable unit are kept in ``quarantine.raw``.
MAX_RAW_BYTES = 4096
SOURCE_KINDS: tuple[str, ...] = ("offsets", "logdirs", "metadata", "cluster_metadata")
UNITS: tuple[str, ...] = ("batch", "record", "line", "file", "frame")
#: The run's status, worst last: what ``audit_runs.status``, the summary JSON and the metrics say.
STATUSES: tuple[str, ...] = ("ok", "partial", "no_input", "failed")
#: One source kind's status (``audit_runs.source_status``).
SOURCE_STATUSES: tuple[str, ...] = ("ok", "partial", "no_input")
#: Source kinds whose status comes from their units (files, batches read and quarantined) only, not from
#: rows per day: the metadata log records changes, and a day without one is a quiet day, not a gap.
JUDGED_BY_UNITS: frozenset[str] = frozenset({"cluster_metadata"})


def clusters_with_runs(config: Config) -> set[str] | None:
    """The clusters with runs in ``audit_runs`` (None when that table cannot be read without Spark; none when
    there is no such table: report tables without it are a run stopped before its end, not a finished one).

    Raises:
        InputError, SinkError: as :func:`jobs.sink.read_stored_table` — a damaged ``audit_runs`` is said, not read
            as "any cluster" (a mistyped one then passed for "no findings").
    """
    from .sink import read_stored_table

    if config.output.root is None:
        return None
    runs = read_stored_table("audit_runs", config, columns=["cluster"])
    return set() if runs is None else set(runs.column("cluster").to_pylist())


def no_run_of_cluster(config: Config, clusters: set[str] | None) -> str:
    """The one line for a cluster no run wrote at the output location (a typo must not read as "no findings"
    or "no input"), naming the clusters that are there."""
    known = ", ".join(sorted(clusters or ())) or (
        "none: no run finished there (a stopped run records none; run it again)")
    return (f"no run of cluster {config.cluster!r} at {config.output.table_location('')} "
            f"(clusters there: {known})")


def _utcnow() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _code_version() -> str:
    import epochlib

    return str(getattr(epochlib, "__version__", "unknown"))


def new_run_id() -> str:
    """A fresh run id (what ``audit_runs.run_id`` and the run lease name a run by)."""
    return uuid.uuid4().hex


@dataclass(frozen=True)
class RunContext:
    """Identity of one run: what every row it writes is stamped with."""

    cluster: str
    range_from: dt.date
    range_to: dt.date
    run_id: str = field(default_factory=new_run_id)
    started_at: dt.datetime = field(default_factory=_utcnow)
    code_version: str = field(default_factory=_code_version)
    input_roots: tuple[tuple[str, str], ...] = ()
    """(source kind, input root) of the configured inputs (``audit_runs.input_root``)."""

    def __post_init__(self) -> None:
        if self.range_from > self.range_to:
            raise ValueError(f"range_from {self.range_from} is after range_to {self.range_to}")
        if self.started_at.tzinfo is None:
            raise ValueError("started_at must be timezone-aware (UTC)")

    @classmethod
    def start(
        cls,
        config: Config,
        from_: dt.date | str,
        to: dt.date | str | None = None,
        *,
        run_id: str | None = None,
    ) -> RunContext:
        """A context for ``config.cluster`` over ``[from_, to]`` (validated like the CLI flags)."""
        start, end = parse_date_range(from_, to)
        extra = {"run_id": run_id} if run_id is not None else {}
        roots = tuple((n, str(r)) for n, r in zip(config.inputs.LOCATIONS, config.inputs.roots, strict=True) if r)
        return cls(cluster=config.cluster, range_from=start, range_to=end, input_roots=roots, **extra)

    @property
    def date_range(self) -> tuple[dt.date, dt.date]:
        return (self.range_from, self.range_to)

    def holds(self, day: dt.date) -> bool:
        """Whether ``day`` lies in the run's range (the dates this run writes)."""
        return self.range_from <= day <= self.range_to


# ------------------------------------------------------------------------------------------- quarantine


def bound_raw(raw: bytes | bytearray | memoryview | None) -> bytes | None:
    """The first :data:`MAX_RAW_BYTES` bytes of ``raw`` (None stays None)."""
    if raw is None:
        return None
    return bytes(memoryview(raw)[:MAX_RAW_BYTES])


def _check(name: str, value: str, valid: tuple[str, ...]) -> None:
    if value not in valid:
        raise ValueError(f"{name} {value!r} is not one of {', '.join(valid)}")


def quarantine_row(
    ctx: RunContext,
    *,
    source_kind: str,
    source: str,
    position: int,
    unit: str,
    reason: str,
    raw: bytes | bytearray | memoryview | None,
    event_date: dt.date | None = None,
) -> dict[str, Any]:
    """One ``quarantine`` row as a dict (driver side: file-level failures, tests).

    ``event_date`` is the unit's own UTC date when it has one, else the run's ``from`` date (DESIGN:
    ``from`` only for units without a time). A unit dated outside the run's range belongs to the run
    whose range holds its date: check :meth:`RunContext.holds` before writing the row.
    """
    _check("source_kind", source_kind, SOURCE_KINDS)
    _check("unit", unit, UNITS)
    if event_date is None:
        event_date = ctx.range_from
    return {
        "cluster": ctx.cluster,
        "event_date": event_date,
        "run_id": ctx.run_id,
        "source_kind": source_kind,
        "source": source,
        "position": int(position),
        "unit": unit,
        "reason": reason,
        "raw": bound_raw(raw),
    }


def quarantine_table(rows: Iterable[Mapping[str, Any]]) -> pa.Table:
    """Rows from :func:`quarantine_row` as a ``pyarrow.Table`` in the ``quarantine`` schema."""
    return pa.Table.from_pylist(list(rows), schema=schemas.arrow_schema("quarantine"))


def quarantine_frame(df: DataFrame, ctx: RunContext, source_kind: str) -> DataFrame:
    """Executor-side quarantine rows: ``df`` has ``source``, ``position``, ``unit``, ``reason``, ``raw``
    and optionally ``event_date``; the result is in the ``quarantine`` schema with ``raw`` cut to
    :data:`MAX_RAW_BYTES` and ``event_date`` as in :func:`quarantine_row`: the unit's own date, the run's
    ``from`` only for units without one. Units whose own date lies outside the run's range are left out:
    the run whose range holds that date writes them, so two nightly runs never store one bad unit twice."""
    from pyspark.sql import functions as F

    _check("source_kind", source_kind, SOURCE_KINDS)
    start, end = F.lit(ctx.range_from), F.lit(ctx.range_to)
    if "event_date" in df.columns:
        own = F.col("event_date").cast("date")
        df = df.where(own.isNull() | own.between(start, end))
        event_date = F.coalesce(own, start)
    else:
        event_date = start
    out = df.select(
        F.lit(ctx.cluster).alias("cluster"),
        event_date.alias("event_date"),
        F.lit(ctx.run_id).alias("run_id"),
        F.lit(source_kind).alias("source_kind"),
        F.col("source").cast("string").alias("source"),
        F.col("position").cast("long").alias("position"),
        F.col("unit").cast("string").alias("unit"),
        F.col("reason").cast("string").alias("reason"),
        F.substring(F.col("raw").cast("binary"), 1, MAX_RAW_BYTES).alias("raw"),
    )
    return out


def read_quarantine(spark: SparkSession, config: Config, date_range: tuple[dt.date, dt.date] | None,
                    columns: Sequence[str] | None = None) -> list[dict[str, Any]]:
    """The ``quarantine`` rows of ``config.cluster`` in ``date_range`` (None: every date), into the driver (bad units are few): through
    delta-rs for a path table, else Spark; none when the table is not there. ``columns`` reads only those."""
    from .errors import NoTableError, SinkError
    from .sink import read_table, read_table_arrow

    try:
        return read_table_arrow("quarantine", config, cluster=config.cluster, date_range=date_range,
                                columns=columns).to_pylist()
    except NoTableError:
        return []
    except SinkError:  # a catalog table: only Spark reads it
        pass
    try:
        df = read_table(spark, "quarantine", config, cluster=config.cluster, date_range=date_range)
    except Exception as exc:  # not written yet (SinkError, or Spark's AnalysisException for catalogs)
        if not isinstance(exc, SinkError) and "TABLE_OR_VIEW_NOT_FOUND" not in str(exc):
            raise
        return []
    return [r.asDict() for r in (df.select(*columns) if columns else df).collect()]


# ------------------------------------------------------------------------------------------- audit_runs


@dataclass(frozen=True)
class SourceCounts:
    """What a run read from one source kind. Construction fails unless read = decoded + quarantined."""

    source_kind: str
    unit: str
    units_decoded: int
    units_quarantined: int
    records_decoded: int
    units_read: int | None = None
    """Defaults to ``units_decoded + units_quarantined``; when given, it must equal that sum."""
    units_unpaired: int | None = None
    """Limits of the input counted apart from units_read: capture frames (unpaired, partial), segment files that
    end inside a batch (a copy of the active segment)."""

    def __post_init__(self) -> None:
        _check("source_kind", self.source_kind, SOURCE_KINDS)
        _check("unit", self.unit, UNITS)
        for name in ("units_decoded", "units_quarantined", "records_decoded"):
            if getattr(self, name) < 0:
                raise ValueError(f"{self.source_kind}: {name} is negative")
        total = self.units_decoded + self.units_quarantined
        if self.units_read is None:
            object.__setattr__(self, "units_read", total)
        elif self.units_read != total:
            raise ValueError(
                f"{self.source_kind}: units_read {self.units_read} != units_decoded {self.units_decoded}"
                f" + units_quarantined {self.units_quarantined}"
            )


@dataclass(frozen=True)
class SourceStatus:
    """How complete one configured source kind was: its status, totals and the days it had no rows."""

    source_kind: str
    status: str
    units_read: int
    units_decoded: int
    units_quarantined: int
    records_decoded: int
    days_without_input: tuple[dt.date, ...] = ()
    reason: str = ""
    """One human sentence when the status is not ``ok`` (what the summary prints)."""
    rows_kept: int = 0
    """Silver rows of the range earlier runs stored that this run kept, reading no unit of the source, or none
    dated on the days kept (not replaced: the reports read them)."""
    quarantine_kept: int = 0
    """``quarantine`` rows of the range earlier runs stored that this run kept with them (L1 reads them)."""
    days_kept: tuple[dt.date, ...] = ()
    """Days of the range this run read units of the source but none dated then, whose rows earlier runs stored it
    kept: their input is gone (``--fail-on-no-input`` exits 6, as for a source kept whole)."""


def unit_count(n: int, unit: str) -> str:
    """``n`` units in words: ``1 file``, ``2 files``, ``1,363 batches`` (not "batchs"), ``1 run``."""
    return f"{n:,} {unit}" if n == 1 else f"{n:,} {unit}{'es' if unit.endswith(('ch', 'sh', 's', 'x')) else 's'}"


def spans(days: Iterable[dt.date]) -> str:
    """``2024-06-29, 2024-07-02 .. 2024-07-05``: consecutive days as one span."""
    out: list[list[dt.date]] = []
    for d in sorted(days):
        if out and (d - out[-1][-1]).days == 1:
            out[-1].append(d)
        else:
            out.append([d])
    return ", ".join(str(s[0]) if len(s) == 1 else f"{s[0]} .. {s[-1]}" for s in out)


def days_of(start: dt.date, end: dt.date) -> list[dt.date]:
    return [start + dt.timedelta(days=i) for i in range((end - start).days + 1)]


def source_status(
    source_kind: str,
    counts: Iterable[SourceCounts],
    days_with_rows: Iterable[dt.date],
    date_range: tuple[dt.date, dt.date],
    kept: Mapping[dt.date, int] | None = None,
    *,
    quarantine_kept: int = 0,
    empty: str = "",
    kept_days: Mapping[dt.date, int] | None = None,
) -> SourceStatus:
    """The status of one configured source kind from its counts (every unit of that kind) and the days
    of ``date_range`` on which its silver tables got rows (ignored for :data:`JUDGED_BY_UNITS` kinds).

    ``kept``: day -> silver rows of the source that earlier runs stored in the range and this run kept, reading
    none of its units (:attr:`jobs.ingest.IngestResult.kept`). The source is still ``no_input`` (this run read
    nothing of it), said with the rows kept; the days they cover are covered (not in ``days_without_input``).
    ``quarantine_kept``: the ``quarantine`` rows of the range that such a source kept (the run wrote none of its
    own; L1 reads them), said with the rows. ``empty``: what the source's inputs held that were read with zero
    units (``3 empty files``), said when it read none: files were there, not nothing. ``kept_days``: day -> silver
    rows of the source that earlier runs stored on a day of the range this run read units of it but none dated that
    day (its dumps of the day rotated away: :attr:`jobs.ingest.IngestResult.kept_days`); the source is ``partial``
    and says so, with the rows in ``rows_kept``. With ``kept_days``, ``quarantine_kept`` counts the
    source's ``quarantine`` rows of those days, kept with them (its unit-dated table's days), said with the rows."""
    mine = [c for c in counts if c.source_kind == source_kind]
    read = sum(int(c.units_read or 0) for c in mine)
    decoded = sum(c.units_decoded for c in mine)
    quarantined = sum(c.units_quarantined for c in mine)
    records = sum(c.records_decoded for c in mine)
    by_units = source_kind in JUDGED_BY_UNITS
    have = set(days_with_rows)
    missing = () if by_units else tuple(d for d in days_of(*date_range) if d not in have)
    units = ", ".join(unit_count(c.units_read, c.unit) for c in mine) or "nothing"
    rows_kept = sum(n for d, n in (kept or {}).items() if date_range[0] <= d <= date_range[1]) if read == 0 else 0
    bad_kept = quarantine_kept if read == 0 and kept is not None else 0
    by_day = {d: n for d, n in (kept_days or {}).items() if n and date_range[0] <= d <= date_range[1]} if read else {}
    held = f" ({empty})" if empty else ""
    if read == 0 and rows_kept:
        status, reason = "no_input", (f"no input units{held}; kept the {rows_kept:,} rows earlier runs stored for "
                                      + spans(d for d, n in (kept or {}).items() if n and date_range[0] <= d <= date_range[1]))
        if bad_kept:
            reason += f", and their {unit_count(bad_kept, 'quarantined unit')} (the quarantine table)"
    elif bad_kept:
        status, reason = "no_input", (f"no input units{held}; kept the {unit_count(bad_kept, 'quarantined unit')} "
                                      "earlier runs stored for the range (the quarantine table)")
    elif read == 0:
        status, reason = "no_input", f"configured but no input units found{held}"
    elif decoded == 0:
        status, reason = "no_input", f"{units} read, none decoded ({quarantined} quarantined)"
    elif not by_units and (records == 0 or len(missing) == len(days_of(*date_range))):
        status, reason = "no_input", f"{units} decoded, but no rows in the range"
    elif quarantined or missing:
        parts = []
        if quarantined:
            parts.append(f"{quarantined} of {read} units quarantined")
        if missing:
            parts.append(f"{no_input_on(source_kind)} " + ", ".join(d.isoformat() for d in missing))
        status, reason = "partial", "; ".join(parts)
    else:
        status, reason = "ok", ""
    if by_day:  # days this run had no input of: what earlier runs stored for them stays, said
        rows_kept = sum(by_day.values())
        bad_kept = quarantine_kept
        said = (f"kept the {rows_kept:,} rows earlier runs stored for {spans(by_day)} (no input of it "
                f"{'that day' if len(by_day) == 1 else 'those days'})")
        if bad_kept:
            said += f", and their {unit_count(bad_kept, 'quarantined unit')} (the quarantine table)"
        reason = f"{reason}; {said}" if reason else said
        status = "partial" if status == "ok" else status
    return SourceStatus(source_kind, status, read, decoded, quarantined, records, missing, reason, rows_kept, bad_kept,
                        tuple(sorted(by_day)))


def no_input_on(source_kind: str) -> str:
    """How a source's days without input are named, by `run` and `report` alike: log dirs cover a day by the
    snapshots taken on it (``no snapshots taken on``), the other sources by their rows (``no rows on``)."""
    return "no snapshots taken on" if source_kind == "logdirs" else "no rows on"


def run_status(sources: Iterable[SourceStatus], *, failed: bool = False) -> str:
    """The run's status from its sources' (see the module docstring)."""
    if failed:
        return "failed"
    sources = list(sources)
    states = [s.status for s in sources]
    # the metadata log is state, not daily data: its old files decode on every night, so alone it does not make a
    # night without any daily input ok or partial (a copy configured turned such a night into a success)
    daily = [s.status for s in sources if s.source_kind not in JUDGED_BY_UNITS]
    if not states or all(s == "no_input" for s in (daily or states)):
        return "no_input"
    return "ok" if all(s == "ok" for s in states) else "partial"


def audit_run_table(
    ctx: RunContext,
    counts: Iterable[SourceCounts],
    findings: Mapping[str, int] | None = None,
    *,
    status: str = "ok",
    finished_at: dt.datetime | None = None,
    error: str | None = None,
    sources: Mapping[str, SourceStatus] | None = None,
) -> pa.Table:
    """The ``audit_runs`` rows of a run: one per (source kind, unit) given — a source kind can count
    several units, e.g. segment batches and dump lines — each pair at most once; when none is given,
    one row with ``source_kind`` null so the run and its finding counts are still recorded.

    ``status`` is the run's (:data:`STATUSES`), ``error`` its one-line error when it failed, and
    ``sources`` each source kind's :class:`SourceStatus` (its status and days without rows)."""
    _check("status", status, STATUSES)
    counts = list(counts)
    kinds = [(c.source_kind, c.unit) for c in counts]
    if len(set(kinds)) != len(kinds):
        raise ValueError(f"(source kind, unit) repeated in audit counts: {kinds}")
    finished = finished_at or _utcnow()
    found = sorted((str(k), int(v)) for k, v in (findings or {}).items())
    base = {
        "cluster": ctx.cluster,
        "event_date": ctx.range_from,
        "run_id": ctx.run_id,
        "range_from": ctx.range_from,
        "range_to": ctx.range_to,
        "started_at": ctx.started_at,
        "finished_at": finished,
        "code_version": ctx.code_version,
        "status": status,
        "findings": found,
        "error": error,
    }
    sources = sources or {}

    roots = dict(ctx.input_roots)

    def per_source(kind: str | None) -> dict[str, Any]:
        s = sources.get(kind) if kind is not None else None
        root = {"input_root": roots.get(kind) if kind is not None else None}
        if s is None:
            return {"source_status": None, "days_without_input": None, **root}
        return {"source_status": s.status, "days_without_input": list(s.days_without_input), **root}

    empty = {
        "source_kind": None, "unit": None, "units_read": 0, "units_decoded": 0,
        "units_quarantined": 0, "records_decoded": 0,
    }
    rows = [
        {
            **base,
            "source_kind": c.source_kind,
            "unit": c.unit,
            "units_read": c.units_read,
            "units_decoded": c.units_decoded,
            "units_quarantined": c.units_quarantined,
            "records_decoded": c.records_decoded,
            **per_source(c.source_kind),
            "units_unpaired": c.units_unpaired,
        }
        for c in counts
    ] or [{**base, **empty, **per_source(None)}]
    return pa.Table.from_pylist(rows, schema=schemas.arrow_schema("audit_runs"))


def write_audit_runs(rows: pa.Table, config: Config, **kwargs: Any) -> SinkResult:
    """Append the run's rows to ``audit_runs`` (append-only history: each run has its own run_id)."""
    from .sink import write_small

    return write_small(rows, "audit_runs", config=config, mode="append", **kwargs)
