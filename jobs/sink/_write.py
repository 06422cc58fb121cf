"""The two write verbs: :func:`write_table` (a Spark DataFrame) and :func:`write_small` (a small Arrow table)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs import schemas
from jobs.config import Config
from jobs.errors import CommitError, ConfigError, SinkError

from . import _lease
from ._conflict import RUN_KEY, other_run, with_retries
from ._delta_spark import write_delta_spark
from ._fit import check_rows_in_range_arrow, conform_arrow, conform_spark, fit_table_schema, spark_schema_for
from ._runlease import check_still_held
from ._staged import write_delta_rs
from ._target import (
    Backend,
    FileSource,
    KeepDays,
    Mode,
    SinkOptions,
    SinkResult,
    check_hold_back,
    check_mode,
    choose_backend,
    has_delta,
    open_delta,
    resolve_target,
    sql_predicate,
)

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["adopts_files", "write_small", "write_table"]


def adopts_files(spark: SparkSession, table: str, config: Config | None = None, *, target: str | None = None,
                 backend: Backend | None = None) -> bool:
    """Whether :func:`write_table` of ``table`` takes a :class:`FileSource` (the delta-rs back end stages
    Parquet files and commits them; delta-spark writes DataFrames only)."""
    tgt = resolve_target(table, config, target, None, SinkOptions())
    return choose_backend(spark, backend or tgt.configured_backend, tgt) == "delta-rs"


def write_table(
    df: DataFrame | FileSource,
    table: str,
    *,
    config: Config | None = None,
    target: str | None = None,
    mode: Mode = "replace_range",
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
    cluster: str | None = None,
    partition_by: Sequence[str] = schemas.PARTITION_BY,
    backend: Backend | None = None,
    options: SinkOptions | None = None,
    hold_back: tuple[dt.date | str, dt.date | str] | None = None,
    keep_days: KeepDays | None = None,
) -> SinkResult:
    """Write a Spark DataFrame to a Delta table.

    Args:
        df: the rows; its columns must be the table's (:mod:`jobs.schemas` for known tables, in any order;
            integer/float widths and all-null columns are cast, anything else is a
            :class:`SchemaMismatchError`). For unknown table names ``df.schema`` is the schema. Or a
            :class:`FileSource` of a known table, whose tasks write the Parquet files themselves (delta-rs
            only: see :func:`adopts_files`).
        table: logical table name; the location is ``<root>/<table>`` or ``catalog.schema.table``.
        config: the run's config (output root or catalog, cluster, back end, storage options).
        target: explicit table location instead of ``config`` (a path/URI or ``catalog.schema.table``).
        mode: ``replace_range`` replaces exactly the partitions ``cluster`` × ``date_range`` (rows outside
            them are an error); ``append`` adds the rows.
        date_range: inclusive ``(from, to)`` dates; required for ``replace_range``.
        cluster: the cluster whose partitions are replaced (default ``config.cluster``).
        partition_by: partition columns (must be ``("cluster", "event_date")`` for ``replace_range``).
        backend: ``auto``/``delta-spark``/``delta-rs``; default: the config's ``[output] backend``.
        options: :class:`SinkOptions` for the delta-rs path.
        hold_back: inclusive ``(from, to)`` days before ``date_range`` (``replace_range`` only) whose rows
            ``df`` may also hold: they are not written to the table but handed back as
            :attr:`SinkResult.held` (a run's lookback state from the same single pass over ``df``; the
            caller releases it). Rows outside both ranges are still an error.
        keep_days: ``replace_range`` only: called once the rows' days are known, with the days of the range the
            write has rows on; the days of the range it returns that the write has no row on are left as they
            are, not replaced (:attr:`SinkResult.kept_days`): a rerun keeps what its input no longer holds.

    Returns:
        A :class:`SinkResult`.

    Raises:
        ConfigError: missing range/cluster/location. SchemaMismatchError: columns do not fit the data or
        the existing table. SinkError: rows outside the replaced range, back end unavailable.
        CommitError: the Delta commit failed (the table stays at its previous version).
    """
    options = options or SinkOptions()
    tgt = resolve_target(table, config, target, cluster, options)
    drange = check_mode(tgt, mode, date_range, partition_by)
    hold = check_hold_back(tgt, mode, drange, hold_back)
    if keep_days is not None and mode != "replace_range":
        raise ConfigError(f"keep_days for {table!r} needs mode='replace_range'")
    spark = df.sparkSession
    chosen = choose_backend(spark, backend or tgt.configured_backend, tgt)
    if isinstance(df, FileSource):
        if chosen != "delta-rs" or table not in schemas.TABLES:
            raise SinkError(f"{table!r}: rows that write their own files need the delta-rs back end and a known "
                            f"table (this write has {chosen}); check jobs.sink.adopts_files first")
        spark_schema = schemas.spark_schema(table)
        return write_delta_rs(df, tgt, mode, drange, list(partition_by), spark_schema, options, hold=hold,
                              conform=lambda extra: conform_spark(extra, spark_schema, table), keep_days=keep_days)
    spark_schema = spark_schema_for(table, df)
    df = conform_spark(df, spark_schema, table)
    if chosen == "delta-spark":
        return write_delta_spark(df, tgt, mode, drange, partition_by, options, hold=hold, keep_days=keep_days)
    return write_delta_rs(df, tgt, mode, drange, list(partition_by), spark_schema, options, hold=hold,
                          keep_days=keep_days)


def write_small(
    data: pa.Table,
    table: str,
    *,
    config: Config | None = None,
    target: str | None = None,
    mode: Mode = "replace_range",
    date_range: tuple[dt.date | str, dt.date | str] | None = None,
    cluster: str | None = None,
    partition_by: Sequence[str] = schemas.PARTITION_BY,
    backend: Backend | None = None,
    spark: SparkSession | None = None,
    options: SinkOptions | None = None,
) -> SinkResult:
    """Write a small ``pyarrow.Table`` (it is held in driver memory) with the same semantics as
    :func:`write_table`. With delta-rs it goes straight through ``write_deltalake`` (no Spark job);
    with delta-spark (or a catalog target) ``spark`` is required and the rows go through Spark."""
    options = options or SinkOptions()
    tgt = resolve_target(table, config, target, cluster, options)
    drange = check_mode(tgt, mode, date_range, partition_by)
    schema = schemas.arrow_schema(table) if table in schemas.TABLES else data.schema
    data = conform_arrow(data, schema, table)
    wanted = backend or tgt.configured_backend
    if tgt.is_catalog or wanted == "delta-spark" or (wanted == "auto" and spark is not None and has_delta(spark)):
        if spark is None:
            raise SinkError(f"writing {table!r} with Spark's Delta source needs spark= (catalog or delta-spark)")
        df = spark.createDataFrame(data, schema=schemas.spark_schema(table) if table in schemas.TABLES else None)
        return write_table(
            df, table, target=tgt.location, config=config, mode=mode, date_range=drange, cluster=tgt.cluster,
            partition_by=partition_by, backend=wanted, options=options,
        )
    from deltalake import DeltaTable, write_deltalake
    from deltalake.transaction import CommitProperties

    uri = tgt.native
    check_rows_in_range_arrow(data, tgt, mode, drange)
    existing = open_delta(uri, tgt.storage_options)
    if existing is not None:
        fit_table_schema(existing, schema, tgt)
    else:
        _create_if_absent(uri, schema, list(partition_by), tgt)
    run = _lease.run_name(options.run_id)
    kwargs: dict[str, Any] = {
        "partition_by": list(partition_by), "storage_options": tgt.storage_options,
        "commit_properties": CommitProperties(custom_metadata={RUN_KEY: run}),
    }
    what = f"delta-rs write of {table!r} at {tgt.location}"
    if tgt.cluster and table != "audit_runs":  # a run whose lease was taken over meanwhile stops here (its own
        check_still_held(tgt.location, tgt.cluster)  # audit_runs row, an append under its id, still records it)

    def attempt(n: int) -> None:
        if mode == "append":
            write_deltalake(uri, data, mode="append", **kwargs)
        else:
            write_deltalake(uri, data, mode="overwrite", predicate=sql_predicate(tgt.cluster, drange), **kwargs)

    try:
        with_retries(
            attempt, retries=options.commit_retries, what=what, committed=lambda: False,
            winner=lambda: other_run(uri, tgt.storage_options, run),
        )
    except CommitError:
        raise
    except Exception as exc:
        raise CommitError(f"{what} failed: {' '.join(str(exc).split())}") from exc
    version = DeltaTable(uri, storage_options=tgt.storage_options).version()
    return SinkResult(table, tgt.location, "delta-rs", mode, version, None, data.num_rows, drange)



def _create_if_absent(uri: str, schema: pa.Schema, partition_by: list[str], tgt: Any) -> None:
    """Create the empty table, put-if-absent: ``write_deltalake`` on a missing table lets two creating runs
    both commit their rows (see :mod:`._conflict`), so the table is created first, alone, and the rows go
    in a separate conflict-checked commit. Losing the creation race to another run is fine."""
    from deltalake import DeltaTable
    from deltalake import Schema as DeltaSchema
    from deltalake.transaction import CommitProperties

    try:
        DeltaTable.create(
            uri, DeltaSchema.from_arrow(schema), mode="error", partition_by=partition_by,
            storage_options=tgt.storage_options, commit_properties=CommitProperties(max_commit_retries=0),
        )
    except Exception as exc:
        if not DeltaTable.is_deltatable(uri, storage_options=tgt.storage_options):
            raise CommitError(f"creating {tgt.table!r} at {tgt.location} failed: {exc}") from exc
