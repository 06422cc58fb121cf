"""Where a sink write or read goes and how: the target table, the options and result types, the back end.

A location is resolved once through :mod:`jobs.fs` (``location`` canonical, ``spark`` for Spark,
``native`` for delta-rs and pyarrow); a catalog name ``catalog.schema.table`` stays as written.
"""

from __future__ import annotations

import abc
import datetime as dt
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from jobs import fs, schemas
from jobs.config import Config, parse_date_range
from jobs.errors import ConfigError, SinkError

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "Backend",
    "HeldRows",
    "KeepDays",
    "Mode",
    "SinkOptions",
    "SinkResult",
    "Target",
    "check_hold_back",
    "check_mode",
    "choose_backend",
    "days_to_keep",
    "has_delta",
    "open_delta",
    "resolve_target",
    "sql_predicate",
    "table_location",
]

Mode = Literal["replace_range", "append"]
Backend = Literal["auto", "delta-spark", "delta-rs"]


@dataclass(frozen=True)
class SinkOptions:
    """Tuning of the delta-rs commit path (the defaults suit nightly and CLI runs)."""

    staging_grace: dt.timedelta = dt.timedelta(hours=12)
    """Only for staging folders *without* a lease (left by a version of the sink that wrote none): older
    than this, they are treated as left by a dead run and removed. Leased folders follow :attr:`lease`."""
    lease: dt.timedelta = dt.timedelta(minutes=10)
    """How long a staging lease stays valid without a heartbeat (renewed every third of it while the run
    writes). A folder whose lease expired, or whose owner process is gone, is removed by the next write."""
    commit_retries: int = 5
    """How many times a commit that lost a race to a concurrent writer is retried on a fresh snapshot before
    the write fails with a :class:`CommitError` naming the other run."""
    run_id: str | None = None
    """The writer's run id, recorded in leases and commits so other runs can name it (default ``host:pid``)."""
    threads: int = 8
    """Driver threads for footer reads and file moves (I/O bound: matters on object stores)."""
    storage_options: Mapping[str, str] | None = None
    """delta-rs storage options (default: the config's ``[output.storage_options]``)."""


class FileSource(abc.ABC):
    """Rows that write their own Parquet files for the delta-rs sink to commit, instead of a DataFrame that
    Spark writes (:func:`jobs.sink.write_table` takes either). The offsets and capture passes are such
    (:mod:`jobs.ingest.pass_files`): their Python tasks decode and write the commits or observations in one
    go, so the JVM never turns them into rows."""

    @property
    @abc.abstractmethod
    def sparkSession(self) -> SparkSession:  # noqa: N802 - the DataFrame attribute it stands in for
        """The session the rows are computed in."""

    @abc.abstractmethod
    def stage(self, path: str, partition_by: list[str], schema: Any) -> DataFrame | None:
        """Write the rows as Parquet under ``path``: Hive folders of ``partition_by`` (values escaped as Spark
        does), files named ``*.parquet`` in the table's Arrow ``schema`` without the partition columns;
        temporary files named ``.…`` and anything else in folders named ``_…`` (they are not the table's).
        Returns further rows (a DataFrame in the table's columns) for Spark to add to the same folder, or
        None. A retried task must leave the same files, not more."""

    @property
    def keep_staging(self) -> bool:
        """Whether the staging folder (its ``_…`` folders) must outlive the commit, until the result's
        :attr:`SinkResult.held` is released."""
        return False


@dataclass(eq=False)
class HeldRows:
    """The rows a ``replace_range`` write held back from the table (its ``hold_back`` days, e.g. a run's
    lookback days): never committed, readable as :attr:`frame` until :meth:`release`.

    With delta-rs they are the write's own staged Parquet files of those days, left in its staging folder
    under its lease (so no second decode or spill is needed, and a killed run's files are removed by the
    next write of the table like any dead run's staging); with delta-spark, a persisted frame."""

    frame: DataFrame | None
    """The held rows in the table's schema; None when the write had none in those days."""
    _release: Callable[[], None] = field(default=lambda: None, repr=False)
    _released: bool = field(default=False, repr=False)

    def release(self) -> None:
        """Drop the held rows (their staging folder and lease, or the cache); idempotent."""
        if not self._released:
            self._released = True
            self._release()


@dataclass(frozen=True)
class SinkResult:
    """What a write did."""

    table: str
    """Logical table name (e.g. ``offset_commits``)."""
    location: str
    """Path/URI of the Delta table, or ``catalog.schema.table``."""
    backend: str
    """``delta-spark`` or ``delta-rs``."""
    mode: str
    version: int | None
    """Delta table version after the write (None when it cannot be read with delta-rs)."""
    files_added: int | None = None
    rows_written: int | None = None
    """Rows in the added files (delta-rs path: from the Parquet footers; None for delta-spark)."""
    date_range: tuple[dt.date, dt.date] | None = None
    held: HeldRows | None = None
    """With ``hold_back``: the rows of those days, kept out of the table (release them when done)."""
    kept_days: tuple[dt.date, ...] = ()
    """With ``keep_days``: the days of the range the write left as they were (not replaced)."""



@dataclass(frozen=True)
class Target:
    """One table a write or read addresses."""

    table: str
    location: str
    """Canonical path/URI (:attr:`jobs.fs.Location.uri`), or ``catalog.schema.table``."""
    is_catalog: bool
    cluster: str | None
    storage_options: dict[str, str] | None
    configured_backend: str
    spark: str
    """What Spark reads and writes (:attr:`jobs.fs.Location.spark`; the catalog name for catalog tables)."""
    native: str
    """What delta-rs and pyarrow open (:attr:`jobs.fs.Location.native`)."""


def table_location(table: str, config: Config | None = None, *, target: str | None = None) -> str:
    """Where ``table`` lives: ``<root>/<table>`` or ``catalog.schema.table`` (``target`` wins)."""
    return resolve_target(table, config, target, None, None).location


def resolve_target(
    table: str,
    config: Config | None,
    target: str | None,
    cluster: str | None,
    options: SinkOptions | None,
) -> Target:
    if config is None and target is None:
        raise ConfigError(f"write/read of {table!r}: give either config= or target=")
    storage = dict(options.storage_options) if options and options.storage_options is not None else None
    if storage is None and config is not None and config.output.storage_options:
        storage = dict(config.output.storage_options)
    backend = config.output.backend if config is not None else "auto"
    the_cluster = cluster if cluster is not None else (config.cluster if config is not None else None)
    if target is not None:
        written, is_catalog = target, _looks_like_catalog_name(target)
    elif config.output.root is not None:
        written, is_catalog = config.output.table_location(table), False
    else:
        written, is_catalog = config.output.table_location(table), True
    if is_catalog:
        return Target(table, written, True, the_cluster, storage, backend, written, written)
    loc = fs.resolve(written)
    return Target(table, loc.uri, False, the_cluster, storage, backend, loc.spark, loc.native)


def _looks_like_catalog_name(target: str) -> bool:
    parts = target.split(".")
    return len(parts) == 3 and all(p.replace("_", "a").isalnum() for p in parts) and "/" not in target


def check_mode(
    tgt: Target, mode: str, date_range: Any, partition_by: Sequence[str]
) -> tuple[dt.date, dt.date] | None:
    if mode not in ("replace_range", "append"):
        raise ConfigError(f"unknown sink mode {mode!r}; valid: replace_range, append")
    drange = parse_date_range(*date_range) if date_range is not None else None
    if mode == "replace_range":
        if drange is None:
            raise ConfigError(f"replace_range write of {tgt.table!r} needs date_range=(from, to)")
        if tgt.cluster is None:
            raise ConfigError(f"replace_range write of {tgt.table!r} needs a cluster (config or cluster=)")
        if tuple(partition_by) != schemas.PARTITION_BY:
            raise ConfigError(f"replace_range needs partition_by={schemas.PARTITION_BY}, got {tuple(partition_by)}")
    return drange


def check_hold_back(
    tgt: Target, mode: str, drange: tuple[dt.date, dt.date] | None, hold_back: Any
) -> tuple[dt.date, dt.date] | None:
    """The parsed ``hold_back`` days: only for ``replace_range``, and wholly before the replaced range."""
    if hold_back is None:
        return None
    hold = parse_date_range(*hold_back)
    if mode != "replace_range" or drange is None:
        raise ConfigError(f"hold_back for {tgt.table!r} needs mode='replace_range'")
    if hold[1] >= drange[0]:
        raise ConfigError(f"hold_back {hold[0]}..{hold[1]} of {tgt.table!r} must end before the range's "
                          f"first day {drange[0]}")
    return hold


def has_delta(spark: SparkSession) -> bool:
    from jobs.session import has_delta as session_has_delta

    return session_has_delta(spark)


def choose_backend(spark: SparkSession, wanted: str, tgt: Target) -> str:
    if wanted not in ("auto", "delta-spark", "delta-rs"):
        raise ConfigError(f"unknown sink back end {wanted!r}; valid: auto, delta-spark, delta-rs")
    if wanted == "auto":
        wanted = "delta-spark" if has_delta(spark) else "delta-rs"
    if wanted == "delta-spark" and not has_delta(spark):
        raise SinkError(
            "back end 'delta-spark' requested but the Spark session has no Delta support "
            "(start it with the delta-spark package, or set [output] backend = \"delta-rs\")"
        )
    if wanted == "delta-rs" and tgt.is_catalog:
        raise SinkError(f"catalog table {tgt.location} needs Spark's Delta source; the session has none")
    return wanted


def sql_predicate(cluster: str | None, drange: tuple[dt.date, dt.date] | None) -> str:
    assert cluster is not None and drange is not None
    quoted = cluster.replace("'", "''")
    return (
        f"cluster = '{quoted}' AND event_date >= '{drange[0].isoformat()}' "
        f"AND event_date <= '{drange[1].isoformat()}'"
    )


KeepDays = Callable[[frozenset[dt.date]], Iterable[dt.date]]
"""``write_table(keep_days=...)``: called with the days of the range the write has rows on; returns the days of
the range whose stored rows it keeps (days it has rows on are never kept)."""


def days_to_keep(keep_days: KeepDays | None, drange: tuple[dt.date, dt.date] | None,
                 written: Iterable[dt.date]) -> tuple[dt.date, ...]:
    """The days a ``keep_days`` write leaves as they are: those ``keep_days`` names, in the range, without rows
    of the write."""
    if keep_days is None or drange is None:
        return ()
    have = frozenset(d for d in written if drange[0] <= d <= drange[1])
    return tuple(sorted({d for d in keep_days(have) if drange[0] <= d <= drange[1] and d not in have}))



def open_delta(uri: str, storage_options: dict[str, str] | None, *, quiet: bool = False) -> Any:
    from deltalake import DeltaTable

    try:
        if not DeltaTable.is_deltatable(uri, storage_options=storage_options):
            return None
        return DeltaTable(uri, storage_options=storage_options)
    except Exception as exc:
        if quiet:
            return None
        raise SinkError(f"cannot open Delta table at {uri}: {exc}") from exc

