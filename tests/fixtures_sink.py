"""Shared test helper for the sink: a write killed between its staged files and its commit."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from jobs.sink import _lease, _staged


@contextlib.contextmanager
def killed_before_commit(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """A write in this block dies after Spark staged and the driver moved the files, before the commit,
    without any cleanup code running (what SIGKILL leaves: the staging folder, its lease, the moved files)."""

    def die(*args, **kwargs):
        raise KeyboardInterrupt("killed")

    with monkeypatch.context() as m:
        m.setattr(_staged, "_commit", die)
        m.setattr(_staged, "_discard_staging", lambda *a, **k: None)
        m.setattr(_lease, "remove_lease", lambda *a, **k: None)
        with pytest.raises(KeyboardInterrupt):
            yield
