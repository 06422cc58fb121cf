"""The Delta sink: the one component that writes (and reads back) epoch-audit's tables.

Shaped like ``deltalake.write_deltalake``: one verb, keyword-only options, a ``Literal`` mode whose
default is the safe one for this job (``replace_range``: replaceWhere on ``cluster`` and an
``event_date`` range, so a rerun never duplicates rows and other dates stay untouched).

Two back ends (DESIGN.md "Delta"):

``delta-spark``
    Spark's own Delta data source, when the session has it (:func:`jobs.session.has_delta`): Databricks,
    or spark-submit with the delta-spark package. ``replaceWhere`` for ranges; catalog targets
    (``[output] catalog``/``schema``) are written with ``saveAsTable``.

``delta-rs``
    Everything else (the embedded default: local Spark, no Maven). The data never passes through the
    driver:

    1. Spark writes Parquet files in parallel into ``<table>/_staging/<token>/cluster=…/event_date=…/``
       (``_``-prefixed, so no Delta reader or vacuum ever looks there);
    2. the driver lists them, checks their partition values against the run's cluster and range, reads
       each file's *footer* (its row count: the Delta statistics, see :func:`_footer_stats`), and moves
       (renames) them to ``<table>/cluster=…/event_date=…/<token>-<name>``; a manifest of the moves is
       written first so a crash here can be undone;
    3. the driver commits **one** Delta transaction with delta-rs
       (``DeltaTable.create_write_transaction``): ``add`` actions for the new files and, for
       ``replace_range``, a partition overwrite of exactly ``cluster = c AND from <= event_date <= to``
       (delta-rs derives the ``remove`` actions from the snapshot it read); a new table is created with
       ``create_table_with_add_actions`` in one commit, put-if-absent: of two runs creating it at once,
       the loser writes its rows as an ordinary commit into the table the winner created. A commit that
       lost a race to a concurrent writer is retried on a fresh snapshot up to
       :attr:`SinkOptions.commit_retries` times, then fails with a one-line :class:`CommitError` naming the
       other run (each commit records its run id); see :mod:`._conflict` for the delta-rs behaviour this
       relies on;
    4. the staging folder is removed, and so is whatever dead runs left in the table: staging folders
       whose lease expired or whose owner process is gone, and data files no Delta version references
       (:mod:`._lease`: each run holds ``_staging/<token>.lease`` with its run id, host, pid and a
       heartbeat while it writes; folders without a lease fall back to :attr:`SinkOptions.staging_grace`).

    With ``hold_back`` (a run's lookback days before its range), step 1 writes those days too, in the same
    Spark write, but steps 2-3 commit only the range: the held days' staged files stay in the staging
    folder, under the write's lease (still renewed), and come back as :attr:`SinkResult.held`, read with
    ``spark.read.parquet``, until the caller releases them; a run that dies first leaves them to step 4 of
    the next write. So one decode of an input yields both the range's rows and the lookback state.

    With ``keep_days``, once step 1 has staged the files, the days of the range they have no row on that
    ``keep_days`` names are left out of step 3's overwrite (``event_date not in [...]``; with delta-spark, of
    ``replaceWhere``, after one job lists the frame's days): they keep what earlier runs stored
    (:attr:`SinkResult.kept_days`), as a rerun whose input of a day is gone must.

    A run that dies anywhere before step 3 leaves the table at its previous version: readers follow the
    Delta log, which never names an uncommitted file. The token is recorded in the commit's
    ``commitInfo`` (``epochAudit.staging``) so cleanup can tell a committed run from a dead one.

    Trade-offs: on object stores (S3/GCS) a move is a server-side copy, not a rename (still no data
    through the driver); footers are read one per file on the driver (metadata only, a thread pool);
    files carry no column min/max statistics (see ``_staged._footer_stats`` for why), so readers skip data
    by the ``cluster``/``event_date`` partitions only.

Small tables (a few thousand rows: audit_runs, rates) may skip Spark: :func:`write_small` writes a
``pyarrow.Table`` with ``deltalake.write_deltalake`` (``mode="overwrite"`` + ``predicate``). A missing
table is first created empty, put-if-absent, so that two runs creating it at once do not both commit
their rows; a lost race is retried like the staged commit's.

Reading back: :func:`read_table` gives a Spark DataFrame. With delta-spark it is ``format("delta")``;
without it, Spark cannot read the Delta log, so the file list comes from delta-rs
(``DeltaTable.get_add_actions``: the live files and their partition values) and Spark reads exactly
those Parquet files (``spark.read.schema(...).parquet(*files)``), one read per partition with the
partition values added as literals (partition columns are not stored in Delta data files). Tables with
deletion vectors (only delta-spark writes them) cannot be read this way and raise :class:`SinkError`.
:func:`read_table_arrow` reads through delta-rs alone (tests, small tables); :func:`read_stored_table` does for
``report``/``findings``, telling a table that cannot be read (exit 4) from a location that cannot be reached (3).

Modules: :mod:`._target` (where a table is, options and result types, back-end choice),
:mod:`._write` (the verbs), :mod:`._delta_spark`, :mod:`._staged` (the delta-rs commit path),
:mod:`._conflict` (commit races: bounded retries, naming the other run), :mod:`._lease` (who owns a
staging folder), :mod:`._runlease` (one writing run per cluster and output root: :func:`hold_run`), :mod:`._read`, :mod:`._fit` (schema fitting); locations go through :mod:`jobs.fs`.
"""

from __future__ import annotations

from ._lease import running_as
from ._read import read_stored_table, read_table, read_table_arrow, table_files
from ._runlease import LEASE_DIR, check_run_lease, hold_run, run_lease_path
from ._staged import STAGING_DIR
from ._target import Backend, FileSource, HeldRows, Mode, SinkOptions, SinkResult, table_location
from ._write import adopts_files, write_small, write_table

__all__ = [
    "running_as",
    "LEASE_DIR",
    "check_run_lease",
    "hold_run",
    "run_lease_path",
    "STAGING_DIR",
    "Backend",
    "FileSource",
    "HeldRows",
    "Mode",
    "SinkOptions",
    "SinkResult",
    "read_stored_table",
    "read_table",
    "read_table_arrow",
    "table_files",
    "adopts_files",
    "table_location",
    "write_small",
    "write_table",
]
