"""Concurrent writers and dead runs' leftovers in the Delta sink (issue 18 items 5 and 8).

The races are real: two threads write through the delta-rs back end at once, held at the commit by a
barrier so that both have read the table (or found none) before either commits.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import os
import shutil
import subprocess
import sys
import threading
from pathlib import Path

import deltalake
import deltalake.transaction
import pyarrow as pa
import pytest
from deltalake import DeltaTable
from fixtures_sink import killed_before_commit

from jobs import schemas, sink
from jobs.config import parse_config
from jobs.errors import CommitError
from jobs.sink import SinkOptions, _conflict, _delta_spark, _lease, write_small, write_table
from jobs.sink._target import resolve_target

D1, D2 = dt.date(2024, 3, 1), dt.date(2024, 3, 2)
UTC = dt.timezone.utc
RATES = "stale_metadata_rates"
ROWS = 100


def cfg(tmp_path: Path):
    return parse_config({"cluster": "c1", "output": {"root": str(tmp_path / "out")}})


def rates(spark, tag: str, day: dt.date = D1, n: int = ROWS):
    data = [("c1", day, "broker", f"{tag}-{i}", i, 0, 0.0, 0, i) for i in range(n)]  # + the metadata-lag columns
    return spark.createDataFrame(data, schemas.spark_schema(RATES))


def subjects(path: Path) -> list[str]:
    return sorted(DeltaTable(str(path)).to_pyarrow_table()["subject"].to_pylist())


def hold_first_call(monkeypatch, owner, name: str, parties: int = 2) -> threading.Barrier:
    """Make the first call of ``owner.name`` in each thread wait until ``parties`` threads got there."""
    barrier = threading.Barrier(parties, timeout=60)
    original = getattr(owner, name)
    seen: set[int] = set()

    def held(*args, **kwargs):
        me = threading.get_ident()
        if me not in seen:
            seen.add(me)
            with contextlib.suppress(threading.BrokenBarrierError):
                barrier.wait()
        return original(*args, **kwargs)

    monkeypatch.setattr(owner, name, held)
    return barrier


def race(*writers) -> list[object]:
    """Run the writers in threads at once; their results or exceptions, in order."""
    out: list[object] = [None] * len(writers)

    def run(i, w):
        try:
            out[i] = w()
        except Exception as exc:  # the test inspects it
            out[i] = exc

    threads = [threading.Thread(target=run, args=(i, w)) for i, w in enumerate(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(300)
    return out


# ------------------------------------------------------------------------------ item 5: commit races


@pytest.mark.spark
def test_two_runs_creating_the_table_at_once_write_the_range_once(spark, tmp_path, monkeypatch) -> None:
    config, path = cfg(tmp_path), tmp_path / "out" / RATES
    hold_first_call(monkeypatch, deltalake.transaction, "create_table_with_add_actions")
    a, b = rates(spark, "A"), rates(spark, "B")
    results = race(
        lambda: write_table(a, RATES, config=config, date_range=(D1, D1), options=SinkOptions(run_id="run-A")),
        lambda: write_table(b, RATES, config=config, date_range=(D1, D1), options=SinkOptions(run_id="run-B")),
    )
    assert [type(r).__name__ for r in results] == ["SinkResult", "SinkResult"], results
    got = subjects(path)
    assert len(got) == ROWS  # not 200: the second run replaced the first one's range
    assert {s.split("-")[0] for s in got} in ({"A"}, {"B"})
    assert DeltaTable(str(path)).version() == 1
    assert not (path / sink.STAGING_DIR).exists() or os.listdir(path / sink.STAGING_DIR) == []


@pytest.mark.spark
@pytest.mark.parametrize("range_has_rows", [True, False], ids=["range-has-rows", "range-empty"])
def test_two_runs_replacing_the_same_range_both_succeed_and_the_last_wins(
    spark, tmp_path, monkeypatch, range_has_rows
) -> None:
    config, path = cfg(tmp_path), tmp_path / "out" / RATES
    write_table(rates(spark, "old", D1 if range_has_rows else D2, 3), RATES, config=config,
                date_range=(D1, D2))
    hold_first_call(monkeypatch, DeltaTable, "create_write_transaction")
    a, b = rates(spark, "A"), rates(spark, "B")
    results = race(
        lambda: write_table(a, RATES, config=config, date_range=(D1, D1), options=SinkOptions(run_id="run-A")),
        lambda: write_table(b, RATES, config=config, date_range=(D1, D1), options=SinkOptions(run_id="run-B")),
    )
    assert [type(r).__name__ for r in results] == ["SinkResult", "SinkResult"], results
    table = DeltaTable(str(path)).to_pyarrow_table()
    d1 = sorted(s for s, d in zip(table["subject"].to_pylist(), table["event_date"].to_pylist(), strict=True)
                if d == D1)
    assert len(d1) == ROWS and len({s.split("-")[0] for s in d1}) == 1  # one run's rows, once
    last = DeltaTable(str(path)).history(1)[0]
    assert {s.split("-")[0] for s in d1} == {last[_conflict.RUN_KEY].split("-")[1]}  # the last commit's
    assert table.num_rows == ROWS + (0 if range_has_rows else 3)  # D2 untouched


@pytest.mark.spark
def test_a_writer_that_keeps_losing_fails_with_one_line_naming_the_other_run(spark, tmp_path, monkeypatch) -> None:
    config, path = cfg(tmp_path), tmp_path / "out" / RATES
    write_table(rates(spark, "old", D1, 3), RATES, config=config, date_range=(D1, D1))
    hold_first_call(monkeypatch, DeltaTable, "create_write_transaction")
    no_retry = {"commit_retries": 0}
    results = race(
        lambda: write_table(rates(spark, "A"), RATES, config=config, date_range=(D1, D1),
                            options=SinkOptions(run_id="run-A", **no_retry)),
        lambda: write_table(rates(spark, "B"), RATES, config=config, date_range=(D1, D1),
                            options=SinkOptions(run_id="run-B", **no_retry)),
    )
    errors = [r for r in results if isinstance(r, Exception)]
    assert len(errors) == 1 and isinstance(errors[0], CommitError), results
    loser = "A" if isinstance(results[0], Exception) else "B"
    winner = "B" if loser == "A" else "A"
    message = str(errors[0])
    assert "\n" not in message and "gave up after 1 attempt(s)" in message
    assert f"run run-{winner}" in message and f"run-{loser} " not in message
    assert {s.split("-")[0] for s in subjects(path)} == {winner}
    # The loser's moved files were taken back out of the table.
    names = [p.name for p in path.rglob("*.parquet")]
    assert len(names) == len(DeltaTable(str(path)).file_uris()) + 1  # + the replaced "old" file (until VACUUM)


def test_write_small_creating_the_table_at_once_writes_the_range_once(tmp_path, monkeypatch) -> None:
    config, path = cfg(tmp_path), tmp_path / "out" / RATES
    hold_first_call(monkeypatch, deltalake, "write_deltalake")

    def data(tag: str) -> pa.Table:
        rows = [{"cluster": "c1", "event_date": D1, "dimension": "broker", "subject": f"{tag}-{i}",
                 "responses": i, "stale_responses": 0, "stale_rate": 0.0} for i in range(ROWS)]
        return pa.Table.from_pylist(rows, schema=schemas.arrow_schema(RATES))

    a, b = data("A"), data("B")
    results = race(
        lambda: write_small(a, RATES, config=config, date_range=(D1, D1)),
        lambda: write_small(b, RATES, config=config, date_range=(D1, D1)),
    )
    assert [type(r).__name__ for r in results] == ["SinkResult", "SinkResult"], results
    got = subjects(path)
    assert len(got) == ROWS and len({s.split("-")[0] for s in got}) == 1


class _ConflictingWriter:
    """A stand-in for ``df.write`` on the delta-spark back end (no Maven here): fails ``fail`` times
    with Delta's concurrent-modification error, then saves."""

    def __init__(self, log: list, fail: int) -> None:
        self.log, self.fail = log, fail

    def __getattr__(self, name):
        def chain(*args, **kwargs):
            self.log.append((name, args))
            return self

        return chain

    def save(self, path: str) -> None:
        self.log.append(("save", (path,)))
        if sum(1 for n, _ in self.log if n == "save") <= self.fail:
            raise RuntimeError(
                "[DELTA_CONCURRENT_DELETE_READ] ConcurrentDeleteReadException: This transaction attempted to "
                "read one or more files that were deleted\n\tat io.delta..."
            )


class _FakeFrame:
    def __init__(self, fail: int) -> None:
        self.log: list = []
        self.fail = fail

    @property
    def write(self) -> _ConflictingWriter:
        return _ConflictingWriter(self.log, self.fail)


def test_delta_spark_back_end_retries_a_lost_race_then_names_the_other_run(tmp_path, monkeypatch) -> None:
    tgt = resolve_target(RATES, cfg(tmp_path), None, None, None)
    monkeypatch.setattr(_conflict.time, "sleep", lambda s: None)
    frame = _FakeFrame(fail=2)
    res = _delta_spark.write_delta_spark(frame, tgt, "replace_range", (D1, D1), schemas.PARTITION_BY,
                                         SinkOptions(run_id="run-A", commit_retries=2))
    saves = [a for n, a in frame.log if n == "save"]
    assert len(saves) == 3 and res.backend == "delta-spark"
    assert ("option", ("userMetadata", "run-A")) in frame.log
    assert ("option", ("replaceWhere", "cluster = 'c1' AND event_date >= DATE'2024-03-01' "
                       "AND event_date <= DATE'2024-03-01'")) in frame.log

    # The other run's commit names it (userMetadata, as delta-spark records it).
    path = tmp_path / "out" / RATES
    deltalake.write_deltalake(str(path), pa.table({"x": [1]}),
                              commit_properties=deltalake.CommitProperties(custom_metadata={"userMetadata": "run-B"}))
    with pytest.raises(CommitError) as info:
        _delta_spark.write_delta_spark(_FakeFrame(fail=9), tgt, "replace_range", (D1, D1), schemas.PARTITION_BY,
                                       SinkOptions(run_id="run-A", commit_retries=1))
    assert "\n" not in str(info.value) and "gave up after 2 attempt(s)" in str(info.value)
    assert "by run run-B" in str(info.value)
    # Anything that is not a lost race fails at once, on one line.
    class Broken(_FakeFrame):
        @property
        def write(self):
            raise RuntimeError("AnalysisException: path does not exist\n\tat ...")

    with pytest.raises(CommitError, match=r"^Delta write of .* failed: AnalysisException: path does not exist"):
        _delta_spark.write_delta_spark(Broken(0), tgt, "append", None, schemas.PARTITION_BY, SinkOptions())


def test_delta_spark_back_end_leaves_the_kept_days_out_of_replace_where(tmp_path) -> None:
    """``keep_days`` with delta-spark: the days the frame has rows on are listed first (nothing is staged), and the
    days kept are excluded from ``replaceWhere``; a named day with rows is replaced."""
    tgt = resolve_target(RATES, cfg(tmp_path), None, None, None)
    d3 = D2 + dt.timedelta(days=1)

    class Rows(_FakeFrame):  # rows on D2 only
        def select(self, *cols):
            return self

        def distinct(self):
            return self

        def collect(self):
            return [(D2,)]

    frame = Rows(fail=0)
    res = _delta_spark.write_delta_spark(frame, tgt, "replace_range", (D1, d3), schemas.PARTITION_BY,
                                         SinkOptions(run_id="run-A"), keep_days=lambda have: [D1, *have, d3])
    assert res.kept_days == (D1, d3)
    assert ("option", ("replaceWhere", "cluster = 'c1' AND event_date >= DATE'2024-03-01' AND event_date <= "
                       "DATE'2024-03-03' AND event_date NOT IN (DATE'2024-03-01', DATE'2024-03-03')")) in frame.log


@pytest.mark.spark
def test_delta_spark_back_end_holds_back_the_lookback_days_from_one_pass(spark, tmp_path, monkeypatch) -> None:
    """Without a staging folder, delta-spark writes everything but the held days (rows outside both ranges
    still reach its replaceWhere, which refuses them) and hands the held days back cached."""
    tgt = resolve_target(RATES, cfg(tmp_path), None, None, None)
    written: list = []

    def fake_write(df, tgt, mode, drange, partition_by, options=None, *, hold=None, keep_days=None):
        written.extend(sorted(r.subject for r in df.collect()))
        return sink.SinkResult(tgt.table, tgt.location, "delta-spark", mode, 1, None, None, drange)

    monkeypatch.setattr(_delta_spark, "write_delta_spark", fake_write)
    d0, d3 = D1 - dt.timedelta(days=1), D2 + dt.timedelta(days=1)
    df = spark.createDataFrame(
        [("c1", d, "broker", s, 1, 0, 0.5, 1, 1) for d, s in ((d0, "early"), (D1, "held"), (D2, "range"),
                                                              (d3, "late"))],
        schemas.spark_schema(RATES))
    res = _delta_spark._write_holding_back(df, tgt, "replace_range", (D2, D2), schemas.PARTITION_BY, None, (D1, D1))
    assert written == ["early", "late", "range"]
    assert [r.subject for r in res.held.frame.collect()] == ["held"]
    res.held.release()
    empty_day = d0 - dt.timedelta(days=5)
    none = _delta_spark._write_holding_back(df, tgt, "replace_range", (D2, D2), schemas.PARTITION_BY, None,
                                            (empty_day, empty_day))
    assert none.held.frame is None


# -------------------------------------------------------------------------- item 8: dead runs' leftovers


def _lease_file(root: Path, token: str, *, host: str, pid: int, age: dt.timedelta, seconds: float = 600) -> None:
    body = {"token": token, "run": f"run-{token[-4:]}", "host": host, "pid": pid, "pidns": _lease._PIDNS,
            "heartbeat": (dt.datetime.now(UTC) - age).isoformat(), "lease_seconds": seconds}
    root.mkdir(parents=True, exist_ok=True)
    (root / f"{token}{_lease.LEASE_SUFFIX}").write_text(json.dumps(body))


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def _fake_run(path: Path, token: str, parquet: Path, *, moved: bool, manifest: bool) -> list[Path]:
    """A staging folder with one staged file and (``moved``) one file already moved into the table, as a
    run leaves them when it is killed between the move and the commit."""
    staging = path / sink.STAGING_DIR / token / "cluster=c1" / "event_date=2024-03-01"
    staging.mkdir(parents=True)
    shutil.copy(parquet, staging / "part-00001-x.c000.snappy.parquet")
    out = [staging.parent.parent]
    if moved:
        dest = path / "cluster=c1" / "event_date=2024-03-01" / f"{token}-part-00000-x.c000.snappy.parquet"
        shutil.copy(parquet, dest)
        out.append(dest)
        if manifest:
            rel = str(dest.relative_to(path))
            (staging.parent.parent / "_moves.json").write_text(json.dumps({"token": token, "files": [rel]}))
    return out


def _token(minutes_ago: float, tail: str) -> str:
    born = dt.datetime.now(UTC) - dt.timedelta(minutes=minutes_ago)
    return f"{born:%Y%m%dT%H%M%SZ}-{tail:0>12}"


@pytest.mark.spark
def test_next_run_removes_what_dead_runs_left_and_keeps_what_live_runs_own(spark, tmp_path) -> None:
    config, path = cfg(tmp_path), tmp_path / "out" / RATES
    write_table(rates(spark, "old", D1, 3), RATES, config=config, date_range=(D1, D2))
    parquet = next(path.rglob("*.parquet"))
    st = path / sink.STAGING_DIR
    host = _lease.run_name(None).split(":")[0]
    runs = {
        # dead: removed by the next run, however young
        "pid-gone": (_token(1, "a1"), dict(host=host, pid=_dead_pid(), age=dt.timedelta(seconds=5))),
        "expired": (_token(30, "a2"), dict(host="elsewhere", pid=1, age=dt.timedelta(minutes=11))),
        "no-manifest": (_token(1, "a3"), dict(host=host, pid=_dead_pid(), age=dt.timedelta(seconds=5))),
        # live: kept
        "live-here": (_token(1, "b1"), dict(host=host, pid=os.getppid(), age=dt.timedelta(seconds=5))),
        "live-elsewhere": (_token(1, "b2"), dict(host="elsewhere", pid=1, age=dt.timedelta(minutes=9))),
    }
    left: dict[str, list[Path]] = {}
    for name, (token, lease) in runs.items():
        left[name] = _fake_run(path, token, parquet, moved=True, manifest=name != "no-manifest")
        _lease_file(st, token, **lease)
    # Uncommitted files of a dead run whose staging folder and lease are already gone.
    stray = path / "cluster=c1" / "event_date=2024-03-02" / f"{_token(2, 'c1')}-part-00000-y.c000.snappy.parquet"
    stray.parent.mkdir(parents=True)
    shutil.copy(parquet, stray)
    # A legacy staging folder (no lease) younger than staging_grace: kept, as before.
    legacy = _fake_run(path, _token(5, "d1"), parquet, moved=False, manifest=False)

    write_table(rates(spark, "new", D2, 2), RATES, config=config, date_range=(D2, D2))

    for name in ("pid-gone", "expired", "no-manifest"):
        assert not any(p.exists() for p in left[name]), name
        assert not (st / f"{runs[name][0]}{_lease.LEASE_SUFFIX}").exists(), name
    for name in ("live-here", "live-elsewhere"):
        assert all(p.exists() for p in left[name]), name
        assert (st / f"{runs[name][0]}{_lease.LEASE_SUFFIX}").exists(), name
    assert not stray.exists() and legacy[0].exists()
    # Nothing the table references was touched.
    assert sorted(s.split("-")[0] for s in subjects(path)) == ["new", "new", "old", "old", "old"]
    assert all(os.path.exists(f) for f in DeltaTable(str(path)).file_uris())


@pytest.mark.spark
def test_a_killed_run_is_cleaned_by_the_very_next_run(spark, tmp_path, monkeypatch) -> None:
    """SIGKILL after the move, before the commit: no cleanup code runs at all; the lease stays behind with
    this (still running) process's pid but a token no write of this process holds any more."""
    config, path = cfg(tmp_path), tmp_path / "out" / RATES
    write_table(rates(spark, "old", D1, 3), RATES, config=config, date_range=(D1, D1))

    with killed_before_commit(monkeypatch):
        write_table(rates(spark, "dead"), RATES, config=config, date_range=(D1, D1))
    (lease,) = (path / sink.STAGING_DIR).glob(f"*{_lease.LEASE_SUFFIX}")
    orphans = [p for p in path.rglob("*.parquet") if sink.STAGING_DIR not in p.parts and "-part-" in p.name]
    assert len(orphans) > 1 and subjects(path) == ["old-0", "old-1", "old-2"]

    write_table(rates(spark, "next", D2, 1), RATES, config=config, date_range=(D2, D2))  # default options
    assert os.listdir(path / sink.STAGING_DIR) == []
    live = set(DeltaTable(str(path)).file_uris())
    assert all(str(p) in live for p in orphans if p.exists())  # only committed files remain
    assert not lease.exists() and subjects(path) == ["next-0", "old-0", "old-1", "old-2"]


def test_lease_liveness() -> None:
    now = dt.datetime.now(UTC)
    me = _lease.run_name(None).split(":")[0]

    def lease(**kw) -> _lease.Lease:
        base = dict(token="t", run="r", host=me, pid=os.getppid(), heartbeat=now, seconds=600.0, pidns=_lease._PIDNS)
        return _lease.Lease(**{**base, **kw})

    assert _lease.is_live(lease())
    assert not _lease.is_live(lease(heartbeat=now - dt.timedelta(seconds=601)))
    assert not _lease.is_live(lease(pid=_dead_pid()))
    assert _lease.is_live(lease(host="elsewhere", pid=_dead_pid()))  # another host: only the lease counts
    # another container with this host name (its own pid namespace): its pids are not ours to check
    assert _lease.is_live(lease(pid=_dead_pid(), pidns="pid:[4026599999]"))
    if _lease._PIDNS:  # (where /proc names it) a lease written before the namespace was: judged by its heartbeat
        assert _lease.is_live(lease(pid=_dead_pid(), pidns=""))
    assert not _lease.is_live(lease(pid=os.getpid(), token="not-being-written"))
    assert _lease.is_live(None)  # a lease being written right now


def test_writes_inside_an_audit_run_are_named_after_it() -> None:
    """run_audit wraps its writes in ``running_as``: leases and conflict messages name the audit run."""
    from jobs.sink import running_as

    assert _lease.run_name(None).count(":") == 1  # host:pid outside a run
    with running_as("run-42"):
        assert _lease.run_name(None) == "run-42"
        assert _lease.run_name("explicit") == "explicit"
    assert not _lease.run_name(None).startswith("run-42")


@pytest.mark.spark
def test_writes_from_the_runs_parallel_steps_are_named_after_the_run_too(spark) -> None:
    """The reports' table writes run in driver threads (run_concurrently): their leases and commits named the
    thread's host:pid, which no operator finds in audit_runs, instead of the audit run."""
    from jobs.session import run_concurrently
    from jobs.sink import running_as

    with running_as("run-42"):
        names = run_concurrently(spark, [(f"step {i}", lambda: _lease.run_name(None)) for i in range(3)], workers=2)
    assert names == {"step 0": "run-42", "step 1": "run-42", "step 2": "run-42"}


@pytest.mark.spark
def test_staging_settings_held_by_writes_at_once_are_restored_after_the_last(spark) -> None:
    """Table writes running at once (jobs.session.run_concurrently) share the staging write's session
    settings: one finishing must not take them from under another, and the last puts back what was there."""
    from jobs.sink._staged import _session_conf

    key = "spark.sql.maxConcurrentOutputFileWriters"
    spark.conf.set(key, "1")
    try:
        first, second = _session_conf(spark, {key: "4"}), _session_conf(spark, {key: "4"})
        first.__enter__()
        second.__enter__()
        first.__exit__(None, None, None)
        assert spark.conf.get(key) == "4"  # the second write is still running
        second.__exit__(None, None, None)
        assert spark.conf.get(key) == "1"
    finally:
        spark.conf.unset(key)
