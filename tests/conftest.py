"""Shared fixtures: paths to the real broker files, and one local[1] SparkSession for all Spark tests."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
REAL_DATA = Path(os.environ.get("EPOCH_AUDIT_REAL_DATA", ROOT.parent / "shared" / "real-kafka-data"))


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
