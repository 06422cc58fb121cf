"""Named errors of the `jobs` package, under one base.

Each error's message is one line a user can act on; the CLI prints ``str(error)`` and exits non-zero.
Anything else escaping a job is a bug.
"""

from __future__ import annotations

__all__ = [
    "interruption",
    "one_line",
    "CommitError",
    "ConfigError",
    "EpochAuditError",
    "InputError",
    "RunLeaseHeld",
    "SchemaMismatchError",
    "SinkError",
    "Terminated",
]


class EpochAuditError(Exception):
    """Base of every error the jobs raise on purpose."""


class ConfigError(EpochAuditError, ValueError):
    """The configuration (TOML file, CLI flag or date range) is invalid."""


class InputError(EpochAuditError):
    """An input location is missing or unreadable (not a decode failure: those are quarantined)."""


class RunLeaseHeld(EpochAuditError):
    """Another live run of the same cluster holds the run lease of the output root (:mod:`jobs.sink._runlease`):
    this run writes nothing. The message names that run (id, host, pid, start) and the lease file."""


class SinkError(EpochAuditError):
    """The Delta sink could not write or read a table."""


class RunLeaseLost(SinkError):
    """This run's lease was taken over by another run (this one stopped renewing it past its length: a paused VM,
    a frozen process): it stops before its next table commit rather than write beside that run."""


class Terminated(BaseException):  # noqa: N818 - named as the scheduler's word for it, not an "Error"
    """SIGTERM (a scheduler's timeout) or SIGINT (Ctrl-C) reached ``epoch-audit run``: raised in its main thread, a
    BaseException so that nothing meant for errors swallows it, and caught where a failed run is recorded
    (``audit_runs``, ``--summary-json``, ``--metrics-file``); the process then exits 128 + the signal's number."""

    def __init__(self, signum: int) -> None:
        import signal

        self.signum = signum
        super().__init__(f"terminated by {signal.Signals(signum).name}")

    @property
    def exit_code(self) -> int:
        return 128 + self.signum


def interruption(exc: BaseException) -> BaseException | None:
    """The interrupt (:class:`Terminated`, KeyboardInterrupt) that ``exc`` is, or arose while handling: a signal
    that came during a Spark call often ends the JVM too (a scheduler signals the whole process group), and the
    cleanup on the interrupt's way out then fails with a Py4J "Connection refused" that hides it. None: no interrupt."""
    seen: set[int] = set()
    at: BaseException | None = exc
    while at is not None and id(at) not in seen:
        if isinstance(at, (Terminated, KeyboardInterrupt)):
            return at
        seen.add(id(at))
        at = at.__cause__ or at.__context__
    return None


class NoTableError(SinkError):
    """There is no Delta table at the location (nothing was ever written there)."""


class SchemaMismatchError(SinkError):
    """The data's columns do not match the table's schema (missing, extra or incompatible columns)."""


class CommitError(SinkError):
    """The Delta transaction could not be committed; the table stays at its previous version."""


def one_line(exc: BaseException, limit: int = 500) -> str:
    """A one-line account of ``exc`` for stderr, ``audit_runs.error`` and the JSON summary: its first
    non-empty line (a Java exception's stack trace and Py4J's framing are dropped), at most ``limit``
    characters. What that line only announces is added to it: the Java exception after Py4J's "An error
    occurred while calling …" (``org.apache.spark.SparkException: Could not parse Master URL: 'local[x]'``), and
    a Python traceback's last exception line (a Python worker's ``PermissionError: …``)."""
    lines = [" ".join(line.split()) for line in str(exc).splitlines()]
    text = ""
    for i, line in enumerate(lines):
        if line and not line.startswith(("at ", "Traceback", "py4j.protocol")):
            text = line
            nxt = lines[i + 1] if i + 1 < len(lines) else ""
            if line.startswith("An error occurred while calling") and nxt.startswith(": ") and len(nxt) > 2:
                text = f"{line} {nxt[2:]}"
            break
    raised = _traceback_exception(str(exc))
    if raised and raised not in text:
        text = f"{text} {raised}" if text.endswith(":") or not text else f"{text}: {raised}"
    if not text:
        return type(exc).__name__
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _traceback_exception(text: str) -> str | None:
    """The exception line that ends the last Python traceback in ``text`` (the first unindented line after a
    ``Traceback (most recent call last):``), or None when ``text`` holds no traceback."""
    found, in_traceback = None, False
    for line in text.splitlines():
        if line.startswith("Traceback (most recent call last)"):
            in_traceback = True
        elif in_traceback and line.strip() and not line[0].isspace():
            found, in_traceback = " ".join(line.split()), False
    return found
