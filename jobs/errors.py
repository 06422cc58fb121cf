"""Named errors of the `jobs` package, under one base.

Each error's message is one line a user can act on; the CLI prints ``str(error)`` and exits non-zero.
Anything else escaping a job is a bug.
"""

from __future__ import annotations

__all__ = [
    "one_line",
    "CommitError",
    "ConfigError",
    "EpochAuditError",
    "InputError",
    "SchemaMismatchError",
    "SinkError",
]


class EpochAuditError(Exception):
    """Base of every error the jobs raise on purpose."""


class ConfigError(EpochAuditError, ValueError):
    """The configuration (TOML file, CLI flag or date range) is invalid."""


class InputError(EpochAuditError):
    """An input location is missing or unreadable (not a decode failure: those are quarantined)."""


class SinkError(EpochAuditError):
    """The Delta sink could not write or read a table."""


class NoTableError(SinkError):
    """There is no Delta table at the location (nothing was ever written there)."""


class SchemaMismatchError(SinkError):
    """The data's columns do not match the table's schema (missing, extra or incompatible columns)."""


class CommitError(SinkError):
    """The Delta transaction could not be committed; the table stays at its previous version."""


def one_line(exc: BaseException, limit: int = 500) -> str:
    """A one-line account of ``exc`` for stderr, ``audit_runs.error`` and the JSON summary: its first
    non-empty line (a Java exception's stack trace and Py4J's framing are dropped), at most ``limit``
    characters."""
    for line in str(exc).splitlines():
        line = " ".join(line.split())
        if line and not line.startswith(("at ", "Traceback", "py4j.protocol")):
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return type(exc).__name__
