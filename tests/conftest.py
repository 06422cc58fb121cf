"""Shared fixtures: paths to the real broker files, and one local[1] SparkSession for all Spark tests."""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REAL_DATA = Path(os.environ.get("EPOCH_AUDIT_REAL_DATA", ROOT.parent / "shared" / "real-kafka-data"))
# the CLI processes the tests start neither read nor write the user's class-data archive (jobs.class_cache);
# its own tests name a folder of their own
os.environ["EPOCH_AUDIT_CLASS_CACHE"] = "off"


@pytest.fixture(scope="session")
def real_data() -> Path:
    """The shared folder of files written by real Kafka brokers; skips when it is absent."""
    if not REAL_DATA.is_dir():
        pytest.skip(f"real Kafka data not found at {REAL_DATA}")
    return REAL_DATA


@pytest.fixture(scope="session")
def spark():
    """One local[1] SparkSession for the whole run (UI off, few shuffle partitions)."""
    from jobs.session import get_or_create_session

    session = get_or_create_session(
        master="local[1]",
        app_name="epoch-audit-tests",
        extra_conf={"spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false"},
    )
    yield session
    session.stop()


@pytest.fixture
def small_run(spark):
    """A context manager: the shared session as one nobody configured (the width and adaptive execution chosen by
    jobs.session.size_shuffles, which a run then narrows to its input: one partition for a small one, what the CLI
    does), restored afterwards. The shared session's own width is explicit, which a run never narrows."""
    from jobs.session import (
        ADAPTIVE_CONF,
        ARROW_INPUT_CONF,
        AUTO_ADAPTIVE_KEY,
        AUTO_WIDTH_KEY,
        SHUFFLE_PARTITIONS,
        size_shuffles,
    )

    keys = (*ADAPTIVE_CONF, *ARROW_INPUT_CONF, SHUFFLE_PARTITIONS, AUTO_WIDTH_KEY, AUTO_ADAPTIVE_KEY)

    @contextlib.contextmanager
    def automatic():
        before = {k: spark.conf.get(k, None) for k in keys}
        for k in keys:
            spark.conf.unset(k)
        size_shuffles(spark)
        try:
            yield
        finally:
            for k, v in before.items():
                if v is None:
                    spark.conf.unset(k)
                else:
                    spark.conf.set(k, v)

    return automatic


_STATUS: dict[str, int] = {}


def pytest_sessionfinish(session, exitstatus) -> None:
    _STATUS["exit"] = int(exitstatus)


@pytest.hookimpl(trylast=True)
def pytest_unconfigure(config) -> None:
    """Leave with pytest's own status once everything is reported.

    pyarrow/delta-rs thread pools can abort the interpreter during its final teardown
    ("terminate called without an active exception", exit 134; delta-rs#2184, arrow#34314),
    which would turn a green run red at random. Set EPOCH_AUDIT_SOFT_EXIT=1 to see that teardown.
    """
    if "exit" in _STATUS and not os.environ.get("EPOCH_AUDIT_SOFT_EXIT"):
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(_STATUS["exit"])
