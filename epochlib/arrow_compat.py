"""Arrow compute helpers that work alike on every pyarrow the project supports (>= 19.0.1), shared by the
codec's batch functions and the Spark jobs."""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc


def null_where(values: Any, mask: Any) -> Any:
    """``values`` (an array or chunked array) with nulls where ``mask`` is true.

    Against a null *array*, not ``pc.if_else(mask, null_scalar, values)``: for a string or binary ``values`` that is
    sliced or in several chunks, pyarrow 19.x builds a broken array from the null scalar ("buffer slice would exceed
    buffer length" later); Databricks Runtime 17 ships pyarrow 19."""
    return pc.if_else(mask, pa.nulls(len(values), values.type), values)
