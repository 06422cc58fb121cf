"""epochlib.arrow_compat: the same values on every supported pyarrow (pyarrow 19.x broke the null-scalar form on
sliced or chunked strings, which the metadata pass and the metadata-log decode hand it)."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from epochlib.arrow_compat import null_where
from epochlib.rules._model import norm_topic_ids


def _inputs(typ: pa.DataType):
    values = [None if i % 3 == 1 else (i if pa.types.is_integer(typ) else str(i)) for i in range(2000)]
    base = pa.array(values, typ) if not pa.types.is_binary(typ) else pa.array(
        [None if v is None else str(v).encode() for v in values], typ)
    chunked = pa.chunked_array([base.slice(0, 700), base.slice(700, 5), base.slice(705)])
    return {"plain": base, "sliced": base.slice(333), "chunked": chunked, "chunked, sliced": chunked.slice(351)}


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string(), pa.binary(), pa.int64()], ids=str)
def test_null_where_nulls_exactly_the_masked_rows_of_any_layout(typ) -> None:
    for name, arr in _inputs(typ).items():
        mask = pc.equal(pc.bit_wise_and(pa.array(range(len(arr))), 7), 3)  # every eighth row
        out = null_where(arr, mask)
        out = out.combine_chunks() if isinstance(out, pa.ChunkedArray) else out
        out.validate(full=True)
        assert out.type == arr.type, name
        assert out.to_pylist() == [None if m else v for v, m in zip(arr.to_pylist(), mask.to_pylist(), strict=True)]
        assert out.take(pa.array(range(0, len(out), 7))).to_pylist() == out.to_pylist()[::7]


@pytest.mark.parametrize("typ", [pa.string(), pa.large_string()], ids=str)
def test_topic_ids_normalise_in_either_string_type(typ) -> None:
    """``spark.sql.execution.arrow.useLargeVarTypes`` hands the workers large strings: the first fix for pyarrow 19
    (``replace_with_mask`` with a string null array) refused them."""
    ids = pa.chunked_array([pa.array(["a", "AAAAAAAAAAAAAAAAAAAAAA", None, ""], typ).slice(1),
                            pa.array(["b"], typ)])
    out = norm_topic_ids(ids)
    assert out.to_pylist() == [None, None, None, "b"] and out.type == typ
