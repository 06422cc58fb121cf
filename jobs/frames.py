"""Small helpers over Spark DataFrames shared by ingestion, the reports, the sink and the audit."""

from __future__ import annotations

from collections.abc import Sequence
from functools import reduce
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["union_all"]


def union_all(frames: Sequence[DataFrame]) -> DataFrame:
    """The rows of every frame, columns matched by name (``unionByName``); ``frames`` must not be empty."""
    return reduce(lambda a, b: a.unionByName(b), frames)
