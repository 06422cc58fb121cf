"""One run at a time per cluster and output root: the run lease.

Two runs of one cluster over one output root (the nightly run and an operator's backfill, or a retry the scheduler
started after a timeout it thought had killed the first) would both decode and write, and the last to finish would
win table by table. So a run that writes (``epoch-audit run``, ``--reports-only`` included, spark-submit.sh, the
notebook: :func:`jobs.audit.run_audit`) first takes ``<root>/_run_leases/<cluster>.lease`` (JSON: run id, host,
pid, start and heartbeat times, lease length), rewrites its heartbeat from a background thread every third of the
lease, and removes it when it ends, however it ends. Read-only commands take none.

A lease belongs to a **live run** unless its heartbeat is older than its lease length, or its holder ran on this
host, in this pid namespace (a container sharing the host's name sees other pids), and its pid is no longer running (the ideas of :mod:`._lease`, the staging folders' leases): such a dead run's
lease is taken over, with a warning. A live one refuses the run with :class:`~jobs.errors.RunLeaseHeld`, naming the
holder. A lease that cannot be read is live while it is younger than the lease length (it may be being written).

Taking it is atomic on local paths (an exclusive create; a dead run's lease is renamed away first, so that of two
runs taking it over only one succeeds). Object stores offer no exclusive create through pyarrow/fsspec: there the
lease is written, and read back after a short pause, and the run that does not find its own id there gives way —
which closes the window of two runs started together to that pause, not to nothing.

Catalog tables (``[output] catalog``) have no root to put the lease under: such runs take none.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

from jobs.errors import RunLeaseHeld, RunLeaseLost, SinkError
from jobs.fs import filesystem, resolve

from ._lease import _HOST, _PIDNS, _pid_running, same_pid_space

if TYPE_CHECKING:
    import pyarrow.fs as pafs

    from jobs.config import Config

__all__ = ["LEASE_DIR", "RUN_LEASE", "RunLease", "check_run_lease", "check_still_held", "hold_run", "run_lease_path"]

log = logging.getLogger("jobs.sink")

LEASE_DIR = "_run_leases"
#: How long a run lease stays valid without a heartbeat (renewed every third of it): a run killed with SIGKILL on
#: another host blocks the next one at most this long (on its own host, only until its pid is gone).
RUN_LEASE = dt.timedelta(minutes=10)
#: Object stores: how long to wait before reading back a lease just written (see the module docstring).
SETTLE_S = 0.5

_HELD: dict[str, RunLease] = {}  # lease path -> the lease this process holds there
_HELD_LOCK = threading.Lock()


@dataclass(frozen=True)
class _Holder:
    """What a lease file says."""

    run: str
    host: str
    pid: int
    started: str
    heartbeat: dt.datetime
    seconds: float
    pidns: str = ""

    def describe(self) -> str:
        started = self.started
        with contextlib.suppress(ValueError):
            started = dt.datetime.fromisoformat(started).isoformat(timespec="seconds")
        return (f"run {self.run} on host {self.host} (pid {self.pid}), started at {started}, "
                f"last heartbeat {self.heartbeat.isoformat(timespec='seconds')}")


@dataclass(eq=False)
class RunLease:
    """The run lease this process holds (:func:`hold_run`)."""

    path: str
    """Where the lease file is (as the output root is written: a local path or a URI)."""
    run_id: str
    started: dt.datetime
    took_over: str | None = None
    """The warning said when a dead run's lease was taken over, else None."""
    _fs: pafs.FileSystem | None = None
    _native: str = ""
    _key: str = ""
    """The lease file as :func:`_lease_key` names it (what a table write under the same root looks up)."""
    _stop: threading.Event | None = None
    _thread: threading.Thread | None = None


def run_lease_path(config: Config) -> str | None:
    """Where the run lease of ``config.cluster`` under ``config.output.root`` is; None for catalog tables."""
    if config.output.root is None:
        return None
    return f"{config.output.root.rstrip('/')}/{LEASE_DIR}/{config.cluster}.lease"


def _lease_file(config: Config, verb: str) -> tuple[str, pafs.FileSystem, str]:
    """The run lease's path as the user named the root (for messages), its filesystem and its native path there.

    Raises:
        SinkError: the store cannot be reached (``cannot <verb> the run lease ...``: exit 4, one line).
    """
    path = run_lease_path(config)
    assert path is not None
    try:
        fs, native_root = filesystem(config.output.root or "")
    except _fs_errors() as exc:  # an unreachable store or credentials that get no token
        raise SinkError(f"cannot {verb} the run lease {path}: {_first_line(exc)}") from exc
    return path, fs, f"{native_root.rstrip('/')}/{LEASE_DIR}/{config.cluster}.lease"


def _lease_key(root: str, cluster: str) -> str:
    """The run lease file of ``cluster`` under ``root`` in one spelling whatever the root's (relative, ``file://``,
    ``s3a://``): a table write finds the lease its run holds by the table's own location."""
    return f"{resolve(root).native.rstrip('/')}/{LEASE_DIR}/{cluster}.lease"


def _fs_errors() -> tuple[type[BaseException], ...]:
    """What a store's calls raise when it cannot be reached: OSError, pyarrow's own errors (an Azure or S3
    credential that cannot get a token), ValueError (a scheme the installed pyarrow/fsspec does not know)."""
    import pyarrow as pa

    return (OSError, ValueError, pa.ArrowException)


def _first_line(exc: BaseException) -> str:
    """A store error's first line (pyarrow's Azure/S3 errors go on for pages)."""
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def _now() -> dt.datetime:
    return dt.datetime.now(dt.timezone.utc)


def _body(run_id: str, started: dt.datetime, seconds: float) -> bytes:
    return json.dumps({"run": run_id, "host": _HOST, "pid": os.getpid(), "pidns": _PIDNS, "started": started.isoformat(),
                       "heartbeat": _now().isoformat(), "lease_seconds": seconds}).encode()


def _local(fs: pafs.FileSystem) -> bool:
    import pyarrow.fs as pafs

    return isinstance(fs, pafs.LocalFileSystem)


def _read(fs: pafs.FileSystem, path: str) -> _Holder | float | None:
    """The lease at ``path``: its holder; the file's age in seconds when it cannot be read (0 when that is unknown
    too: live); None: there is none."""
    import pyarrow.fs as pafs

    try:
        info = fs.get_file_info(path)
    except _fs_errors():
        return 0.0
    if info.type == pafs.FileType.NotFound:
        return None
    try:
        with fs.open_input_stream(path) as f:
            raw = json.loads(f.read().decode())
        holder = _Holder(str(raw["run"]), str(raw["host"]), int(raw["pid"]), str(raw["started"]),
                         dt.datetime.fromisoformat(raw["heartbeat"]), float(raw["lease_seconds"]),
                         str(raw.get("pidns", "")))
        if holder.heartbeat.tzinfo is None:
            raise ValueError("heartbeat without a time zone")
        return holder
    except FileNotFoundError:
        return None
    except (*_fs_errors(), KeyError, TypeError):
        mtime = info.mtime
        if mtime is None or mtime.tzinfo is None:
            return 0.0
        return max((_now() - mtime).total_seconds(), 0.0)


def _dead(holder: _Holder | float, seconds: float, path: str) -> str | None:
    """Why the lease ``holder`` belongs to a run that is gone (the takeover warning), or None: it is live."""
    if isinstance(holder, float):
        return (f"took over the run lease {path}, which could not be read and was last written "
                f"{holder:.0f} s ago") if holder > seconds else None
    age = (_now() - holder.heartbeat).total_seconds()
    if age > holder.seconds:
        return (f"took over the run lease {path} of {holder.describe()}: no heartbeat for {age:.0f} s "
                f"(the lease is {holder.seconds:.0f} s), so that run is gone")
    if not same_pid_space(holder.host, holder.pidns):  # (another container with this host name: its pids are not ours)
        return None
    if holder.pid == os.getpid():
        with _HELD_LOCK:
            mine = _HELD.get(path)
        if mine is not None and mine.run_id == holder.run:
            return None  # another call in this process (a notebook's thread) is running it
    elif _pid_running(holder.pid):
        return None
    return (f"took over the run lease {path} of {holder.describe()}: its process is no longer running on this "
            "host, so that run is gone")


def _refusal(holder: _Holder | float, path: str, cluster: str) -> RunLeaseHeld:
    if isinstance(holder, float):
        who = f"a run whose lease cannot be read (written {holder:.0f} s ago)"
    else:
        who = holder.describe()
        if holder.host == _HOST and holder.pidns != _PIDNS:  # its pid cannot be checked from here
            until = holder.heartbeat + dt.timedelta(seconds=holder.seconds)
            who += (f" (its pid was not checked: the lease was written "
                    f"{'in another pid namespace' if holder.pidns else 'by an earlier version'}; it counts as live "
                    f"until its heartbeat is {holder.seconds:.0f} s old, at {until.isoformat(timespec='seconds')})")
    return RunLeaseHeld(f"another run of cluster {cluster!r} is writing to this output root: {who}; wait for it to "
                        f"finish, or remove the lease file {path} if you are sure that run is gone")


def _create_local(fs: pafs.FileSystem, native: str, body: bytes, stale: _Holder | float | None) -> bool:
    """Create the lease file exclusively; a dead run's lease (``stale``, as it was judged) is renamed away first.
    False: another run was quicker (it took the dead run's lease, or created one)."""
    if stale is not None:
        aside = f"{native}.{os.getpid()}.{threading.get_ident()}.stale"
        try:
            os.rename(native, aside)
        except FileNotFoundError:
            return False
        moved = _read(fs, aside)
        if not (moved == stale or isinstance(moved, float) and isinstance(stale, float)):
            # another run took it over between our read and the rename: put it back
            with contextlib.suppress(OSError):
                os.link(aside, native)  # (unless a third run has created one since)
            with contextlib.suppress(OSError):
                os.remove(aside)
            return False
        with contextlib.suppress(OSError):
            os.remove(aside)
    try:
        fd = os.open(native, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(fd, "wb") as f:
        f.write(body)
    return True


def _rewrite(fs: pafs.FileSystem, native: str, body: bytes) -> None:
    """Replace the lease's content whole (a reader never sees half of it)."""
    if _local(fs):
        tmp = f"{native}.{os.getpid()}.tmp"
        with open(tmp, "wb") as f:
            f.write(body)
        os.replace(tmp, native)
    else:
        with fs.open_output_stream(native) as out:
            out.write(body)


def _mine(fs: pafs.FileSystem, native: str, run_id: str) -> bool:
    holder = _read(fs, native)
    return isinstance(holder, _Holder) and holder.run == run_id and holder.host == _HOST \
        and holder.pid == os.getpid()


def _acquire(config: Config, run_id: str, seconds: float) -> RunLease:
    path, fs, native = _lease_file(config, "write")
    try:
        fs.create_dir(native.rsplit("/", 1)[0], recursive=True)
    except _fs_errors() as exc:  # an unreachable store or credentials that get no token: exit 4, one line
        raise SinkError(f"cannot write the run lease {path}: {_first_line(exc)}") from exc
    started = _now()
    for _attempt in range(5):
        holder = _read(fs, native)
        why = None
        if holder is not None:
            why = _dead(holder, seconds, path)
            if why is None:
                raise _refusal(holder, path, config.cluster)
        body = _body(run_id, started, seconds)
        try:
            if _local(fs):
                if not _create_local(fs, native, body, holder):
                    continue  # another run took it meanwhile: judge its lease
            else:
                _rewrite(fs, native, body)
                time.sleep(SETTLE_S)
                if not _mine(fs, native, run_id):
                    continue  # another run wrote after us: it has the lease (judged again: live)
        except _fs_errors() as exc:
            raise SinkError(f"cannot write the run lease {path}: {_first_line(exc)}") from exc
        except BaseException:  # a signal while taking it: what was written goes, as on any way out
            with contextlib.suppress(OSError):
                if _mine(fs, native, run_id):
                    fs.delete_file(native)
            raise
        return RunLease(path, run_id, started, why, fs, native, _lease_key(config.output.root or "", config.cluster))
    holder = _read(fs, native)
    raise _refusal(holder if holder is not None else 0.0, path, config.cluster)


def _renew(lease: RunLease, seconds: float) -> None:
    assert lease._stop is not None and lease._fs is not None
    while not lease._stop.wait(seconds / 3):
        try:
            holder = _read(lease._fs, lease._native)
            if isinstance(holder, float):  # a store's blip (a 503, a timeout): the next beat tries again
                log.warning("could not read the run lease %s to renew it; trying again in %.0f s", lease.path,
                            seconds / 3)
                continue
            if not (isinstance(holder, _Holder) and holder.run == lease.run_id):
                log.warning("the run lease %s is no longer this run's (%s): not renewing it", lease.path,
                            holder.describe() if isinstance(holder, _Holder) else "removed")
                return
            _rewrite(lease._fs, lease._native, _body(lease.run_id, lease.started, seconds))
        except _fs_errors() as exc:  # a missed beat only shortens the lease; the run goes on
            log.warning("could not renew the run lease %s: %s", lease.path, _first_line(exc))


def _release(lease: RunLease) -> None:
    if lease._stop is not None:
        lease._stop.set()
    if lease._thread is not None:
        lease._thread.join()
    fs = lease._fs
    if fs is None:
        return
    with contextlib.suppress(*_fs_errors()):
        if _mine(fs, lease._native, lease.run_id):  # a lease taken over meanwhile is the other run's
            fs.delete_file(lease._native)
    if _local(fs):  # no empty folder left beside the tables
        with contextlib.suppress(OSError):
            os.rmdir(lease._native.rsplit("/", 1)[0])


def check_still_held(location: str, cluster: str) -> None:
    """Before a Delta commit into the table at ``location``: when this process holds the run lease of ``cluster``
    under that table's root, it must still be this run's. A run paused past its lease (a stopped VM, a frozen
    process) had it taken over by the next run; on waking it stops here instead of overwriting that run's tables.
    No check when no run lease is held here (catalog tables, a notebook's own ``write_table``), nor when the lease
    cannot be read just now (the heartbeat's rule: a store's blip is not a takeover).

    Raises:
        RunLeaseLost: another run holds the lease now (named), or it is gone.
    """
    key = _lease_key(resolve(location).native.rstrip("/").rsplit("/", 1)[0], cluster)
    with _HELD_LOCK:
        lease = next((held for held in _HELD.values() if held._key == key), None)
    if lease is None or lease._fs is None:
        return
    path = lease.path
    try:
        holder = _read(lease._fs, lease._native)
    except _fs_errors():
        return
    if isinstance(holder, float) or (isinstance(holder, _Holder) and holder.run == lease.run_id):
        return
    who = holder.describe() if isinstance(holder, _Holder) else "no run (the lease file was removed)"
    raise RunLeaseLost(f"this run's lease {path} is held by {who} now: this run stopped renewing it for longer "
                       "than its length (a paused machine?) and it was taken over, so this run stops before "
                       f"committing more; the tables it wrote are that run's to replace")


def check_run_lease(config: Config, lease: dt.timedelta = RUN_LEASE) -> None:
    """Refuse, without taking it, a run whose lease a live run holds (``spark-submit.sh`` asks before a JVM
    starts; the run itself then takes the lease, :func:`hold_run`). A dead run's lease, or none, passes.

    Raises:
        RunLeaseHeld: as :func:`hold_run` would.
    """
    if config.output.root is None:
        return
    path, fs, native = _lease_file(config, "read")
    holder = _read(fs, native)
    if holder is not None and _dead(holder, max(lease.total_seconds(), 1.0), path) is None:
        raise _refusal(holder, path, config.cluster)


@contextlib.contextmanager
def hold_run(config: Config, run_id: str, *, warn: Callable[[str], None] | None = None,
             lease: dt.timedelta = RUN_LEASE) -> Iterator[RunLease | None]:
    """Hold the run lease of ``config.cluster`` under its output root for the block, as run ``run_id``; released
    on every way out (an exception, :class:`~jobs.errors.Terminated` included). A block inside another of the same
    run in this process (the CLI takes the lease before Spark starts, then :func:`jobs.audit.run_audit` asks for it
    again) shares the outer one. Yields None for catalog tables (no lease).

    Raises:
        RunLeaseHeld: a live run holds the lease (its id, host, pid and start are in the message).
        SinkError: the lease cannot be written at the output root.
    """
    path = run_lease_path(config)
    if path is None:
        yield None
        return
    with _HELD_LOCK:
        outer = _HELD.get(path)
    if outer is not None and outer.run_id == run_id:
        yield outer
        return
    seconds = max(lease.total_seconds(), 1.0)
    held = _acquire(config, run_id, seconds)
    try:
        with _HELD_LOCK:
            _HELD[path] = held
        if held.took_over and warn is not None:
            warn(held.took_over)
        held._stop = threading.Event()
        held._thread = threading.Thread(target=_renew, args=(held, seconds),
                                        name=f"run-lease-{config.cluster}", daemon=True)
        held._thread.start()
        yield held
    finally:
        with _HELD_LOCK:
            if _HELD.get(path) is held:
                del _HELD[path]
        _release(held)
