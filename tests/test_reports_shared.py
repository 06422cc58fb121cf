"""The findings several report writes share are computed once, by whichever write step asks first."""

from __future__ import annotations

import threading
import time

import pytest

from jobs.session import Once


def test_concurrent_callers_get_one_computation() -> None:
    calls: list[int] = []
    started = threading.Event()

    def make() -> list[int]:
        calls.append(1)
        started.set()
        time.sleep(0.2)  # the other callers arrive while it runs
        return [42]

    once = Once(make)
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(once.get())) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(5)
    assert calls == [1]
    assert len(got) == 4 and all(g is got[0] for g in got)  # the same object, not four equal ones


def test_a_failure_reaches_every_caller_and_is_not_retried() -> None:
    calls: list[int] = []

    def make() -> int:
        calls.append(1)
        raise ValueError("commit pass failed")

    once = Once(make)
    for _ in range(2):
        with pytest.raises(ValueError, match="commit pass failed"):
            once.get()
    assert calls == [1]  # a second write step does not run the failed pass again
