"""Who owns a staging folder: a lease file per run, so the next run can remove what a dead run left.

A run that stages files under ``<table>/_staging/<token>/`` first writes ``<table>/_staging/<token>.lease``
(JSON: token, run id, host, pid, start and heartbeat times, lease length) and rewrites its heartbeat from a
background thread every third of the lease while it writes. The lease is removed after the staging folder.

A staging folder is **owned by a live run** when its lease exists and

- its heartbeat is younger than the lease length (:attr:`SinkOptions.lease`), and
- the owner is not provably gone: on the same host, its pid is not running, or (same process) its token
  is not among the writes this process is doing now.

Everything else — lease expired, owner process gone, lease unreadable and older than the lease length —
is a dead run's leftover and is removed by the next write of the same table. A staging folder with no
lease at all was left by a version of the sink that wrote none; it is removed once its token time is
older than :attr:`SinkOptions.staging_grace` (the former rule).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
import logging
import os
import socket
import threading
from collections.abc import Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow.fs as pafs

__all__ = ["LEASE_SUFFIX", "Lease", "hold", "is_live", "read_leases", "remove_lease", "run_name"]

log = logging.getLogger("jobs.sink")

LEASE_SUFFIX = ".lease"
_HOST = socket.gethostname()


def _pid_namespace() -> str:
    """This process's pid namespace (``pid:[4026531836]``; "" where /proc does not say): two containers with one
    host name (``--network host``, k8s ``hostNetwork``) each see only their own pids, so "pid not running" proves
    a lease's owner gone only when it was written in this namespace."""
    try:
        return os.readlink("/proc/self/ns/pid")
    except OSError:
        return ""


_PIDNS = _pid_namespace()


def same_pid_space(host: str, pidns: str) -> bool:
    """Whether a lease written on ``host`` in pid namespace ``pidns`` names pids this process can see (a lease
    without a namespace, from before it was written, counts as another host's: only its heartbeat can expire)."""
    return host == _HOST and pidns == _PIDNS
_ACTIVE: set[str] = set()  # tokens this process is writing right now
_ACTIVE_LOCK = threading.Lock()


@dataclass(frozen=True)
class Lease:
    """One staging folder's owner, as its lease file says."""

    token: str
    run: str
    host: str
    pid: int
    heartbeat: dt.datetime
    seconds: float
    pidns: str = ""

    def describe(self) -> str:
        """How a message names the owning run."""
        return f"run {self.run} (pid {self.pid} on {self.host}, staging {self.token})"


_CURRENT_RUN: ContextVar[str | None] = ContextVar("epoch_audit_sink_run", default=None)


@contextlib.contextmanager
def running_as(run_id: str) -> Iterator[None]:
    """Name every sink write in this block after the audit run ``run_id``, so a concurrent writer's
    conflict message and the leases name the run an operator can find in ``audit_runs``."""
    token = _CURRENT_RUN.set(run_id)
    try:
        yield
    finally:
        _CURRENT_RUN.reset(token)


def run_name(run_id: str | None) -> str:
    """The run id recorded in leases and commits: the caller's, else the audit run in force
    (:func:`running_as`), else ``host:pid``."""
    return run_id or _CURRENT_RUN.get() or f"{_HOST}:{os.getpid()}"


def _path(root: str, token: str) -> str:
    return f"{root.rstrip('/')}/{token}{LEASE_SUFFIX}"


def _write(fs: pafs.FileSystem, root: str, token: str, run: str, seconds: float) -> None:
    now = dt.datetime.now(dt.timezone.utc)
    body = {
        "token": token, "run": run, "host": _HOST, "pid": os.getpid(), "pidns": _PIDNS,
        "heartbeat": now.isoformat(), "lease_seconds": seconds,
    }
    with fs.open_output_stream(_path(root, token)) as out:
        out.write(json.dumps(body).encode())


@contextlib.contextmanager
def hold(fs: pafs.FileSystem, root: str, token: str, run: str, lease: dt.timedelta) -> Iterator[None]:
    """Own ``<root>/<token>`` for the duration of the block: write the lease, renew it from a daemon thread,
    stop renewing on exit. The lease file itself is removed by the caller after the staging folder."""
    from jobs.errors import SinkError

    seconds = max(lease.total_seconds(), 1.0)
    try:
        fs.create_dir(root, recursive=True)
        _write(fs, root, token, run, seconds)
    except OSError as exc:
        raise SinkError(f"cannot write the staging lease {_path(root, token)}: {exc}") from exc
    with _ACTIVE_LOCK:
        _ACTIVE.add(token)
    stop = threading.Event()

    def beat() -> None:
        while not stop.wait(seconds / 3):
            try:
                _write(fs, root, token, run, seconds)
            except OSError as exc:  # a missed beat only shortens the lease; the write goes on
                log.warning("could not renew staging lease %s: %s", _path(root, token), exc)

    thread = threading.Thread(target=beat, name=f"sink-lease-{token}", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()
        with _ACTIVE_LOCK:
            _ACTIVE.discard(token)


def remove_lease(fs: pafs.FileSystem, root: str, token: str) -> None:
    with contextlib.suppress(FileNotFoundError, OSError):
        fs.delete_file(_path(root, token))


def read_leases(fs: pafs.FileSystem, root: str) -> dict[str, Lease | None]:
    """Every lease under ``root`` by token; ``None`` for a lease that cannot be read (being written, or
    corrupt) and is younger than an hour: treated as live, it is retried by the next run."""
    import pyarrow.fs as pafs

    out: dict[str, Lease | None] = {}
    infos = fs.get_file_info(pafs.FileSelector(root, recursive=False, allow_not_found=True))
    now = dt.datetime.now(dt.timezone.utc)
    for info in infos:
        if info.type != pafs.FileType.File or not info.base_name.endswith(LEASE_SUFFIX):
            continue
        token = info.base_name[: -len(LEASE_SUFFIX)]
        try:
            with fs.open_input_stream(info.path) as f:
                raw = json.loads(f.read().decode())
            out[token] = Lease(
                str(raw["token"]), str(raw["run"]), str(raw["host"]), int(raw["pid"]),
                dt.datetime.fromisoformat(raw["heartbeat"]), float(raw["lease_seconds"]), str(raw.get("pidns", "")),
            )
        except (OSError, ValueError, KeyError, TypeError):
            mtime = info.mtime or now
            young = mtime.tzinfo is None or now - mtime < dt.timedelta(hours=1)
            out[token] = None if young else Lease(token, "?", "?", -1, mtime, 0.0)
    return out


def is_live(lease: Lease | None, now: dt.datetime | None = None) -> bool:
    """Whether the run holding ``lease`` may still be writing (see the module docstring)."""
    if lease is None:
        return True
    now = now or dt.datetime.now(dt.timezone.utc)
    if (now - lease.heartbeat).total_seconds() > lease.seconds:
        return False
    if not same_pid_space(lease.host, lease.pidns):
        return True
    if lease.pid == os.getpid():
        with _ACTIVE_LOCK:
            return lease.token in _ACTIVE
    return _pid_running(lease.pid)


def _pid_running(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:  # PermissionError: it exists, owned by someone else
        return True
    return True
