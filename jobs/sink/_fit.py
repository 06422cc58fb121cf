"""Schema fitting: the data's columns to the table's schema, and an existing table to the code's schema."""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import pyarrow as pa

from jobs import schemas
from jobs.errors import CommitError, SchemaMismatchError, SinkError

from ._target import Target

if TYPE_CHECKING:
    from pyspark.sql import DataFrame
    from pyspark.sql.types import StructType

__all__ = [
    "arrow_schema_for",
    "check_rows_in_range_arrow",
    "conform_arrow",
    "conform_spark",
    "fit_table_schema",
    "names_diff",
    "spark_schema_for",
    "spark_schema_from_arrow",
    "struct_without",
]

log = logging.getLogger("jobs.sink")


def spark_schema_for(table: str, df: DataFrame) -> StructType:
    return schemas.spark_schema(table) if table in schemas.TABLES else df.schema


def arrow_schema_for(table: str, spark_schema: StructType) -> pa.Schema:
    if table in schemas.TABLES:
        return schemas.arrow_schema(table)
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema)


def spark_schema_from_arrow(table: str, arrow_schema: pa.Schema) -> StructType:
    from pyspark.sql.types import StructField, StructType

    if table in schemas.TABLES and [f.name for f in arrow_schema] == list(schemas.arrow_schema(table).names):
        return schemas.spark_schema(table)
    return StructType([StructField(f.name, schemas.arrow_to_spark_type(f.type), True) for f in arrow_schema])


def struct_without(schema: StructType, names: Sequence[str]) -> StructType:
    from pyspark.sql.types import StructType

    return StructType([f for f in schema.fields if f.name not in names])


def names_diff(table: str, have: Sequence[str], want: Sequence[str]) -> None:
    missing = [n for n in want if n not in have]
    extra = [n for n in have if n not in want]
    if missing or extra:
        parts = []
        if missing:
            parts.append(f"missing {', '.join(missing)}")
        if extra:
            parts.append(f"unexpected {', '.join(extra)}")
        raise SchemaMismatchError(f"{table}: columns do not match the table schema ({'; '.join(parts)})")


def conform_spark(df: DataFrame, schema: StructType, table: str) -> DataFrame:
    """Select the table's columns in order; cast numeric widths and all-null columns, refuse the rest."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import NullType, NumericType

    names_diff(table, df.columns, schema.fieldNames())
    have = {f.name: f.dataType for f in df.schema.fields}
    cols = []
    for field in schema.fields:
        src = have[field.name]
        if src.simpleString() == field.dataType.simpleString():
            cols.append(F.col(field.name))
        elif isinstance(src, NullType) or (isinstance(src, NumericType) and isinstance(field.dataType, NumericType)):
            cols.append(F.col(field.name).cast(field.dataType).alias(field.name))
        else:
            raise SchemaMismatchError(
                f"{table}.{field.name}: has type {src.simpleString()}, the table needs "
                f"{field.dataType.simpleString()}"
            )
    return df.select(*cols)


def conform_arrow(data: pa.Table, schema: pa.Schema, table: str) -> pa.Table:
    names_diff(table, data.column_names, schema.names)
    data = data.select(schema.names)
    try:
        return data.cast(schema)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise SchemaMismatchError(f"{table}: data does not fit the table schema: {exc}") from None


def fit_table_schema(existing: Any, schema: pa.Schema, tgt: Target) -> None:
    """Fit the existing table to ``schema``: new nullable columns are added (a code upgrade that adds a
    column, e.g. ``metadata_token``; old rows read it as null), anything else — a column gone, a changed
    type, a new non-null column — is refused. Columns compare by name (Delta is name-based)."""
    from deltalake import Schema as DeltaSchema

    have = {f.name: repr(f.type) for f in existing.schema().fields}
    want = DeltaSchema.from_arrow(schema).fields
    added = [f for f in want if f.name not in have]
    dropped = [n for n in have if n not in {f.name for f in want}]
    changed = [f.name for f in want if f.name in have and have[f.name] != repr(f.type)]
    required = [f.name for f in added if not f.nullable]
    if not (dropped or changed or required):
        if added:
            try:
                existing.alter.add_columns(added)
            except Exception as exc:
                raise CommitError(f"adding columns to {tgt.table!r} at {tgt.location} failed: {exc}") from exc
            log.info("%s: added column(s) %s to the existing table", tgt.table, ", ".join(f.name for f in added))
        return
    detail = "; ".join(
        s
        for s in (
            f"columns gone {', '.join(dropped)}" if dropped else "",
            f"changed types {', '.join(changed)}" if changed else "",
            f"new non-nullable columns {', '.join(required)}" if required else "",
        )
        if s
    )
    raise SchemaMismatchError(
        f"{tgt.table}: the existing table at {tgt.location} has a different schema ({detail}); "
        "only new nullable columns are added automatically: migrate the table or write to a new output root"
    )


def check_rows_in_range_arrow(
    data: pa.Table, tgt: Target, mode: str, drange: tuple[dt.date, dt.date] | None
) -> None:
    if mode != "replace_range" or data.num_rows == 0:
        return
    import pyarrow.compute as pc

    assert drange is not None
    ok = pc.and_(
        pc.equal(data["cluster"], pa.scalar(tgt.cluster)),
        pc.and_(
            pc.greater_equal(data["event_date"], pa.scalar(drange[0], pa.date32())),
            pc.less_equal(data["event_date"], pa.scalar(drange[1], pa.date32())),
        ),
    )
    bad = data.num_rows - pc.sum(pc.fill_null(ok, False).cast(pa.int64())).as_py()
    if bad:
        raise SinkError(
            f"{tgt.table}: {bad} rows fall outside the replaced range cluster={tgt.cluster!r}, "
            f"{drange[0]}..{drange[1]}; filter them before writing"
        )

