"""Shared checks of input tables; every message names the file and the offending ids or rows (1-based positions).

Types are checked before values are cast, so that no cast changes a value: ids must be integers (an integral float
such as ``2.0`` is one, as pycocotools compares ids with ``==``; ``2.7`` is not, and is never truncated), numbers
must be numbers (not strings, booleans or lists), and boxes hold four finite numbers, none null.
"""

import csv
from pathlib import Path

import polars as pl

from evalengine.errors import InputError

SHOWN = 5  # how many offending ids a message lists
BOX_COLUMNS = ("x", "y", "w", "h")
_INT64_MAX = 2**63 - 1


def listed(values) -> str:
    values = list(values)
    more = f" and {len(values) - SHOWN} more" if len(values) > SHOWN else ""
    return ", ".join(str(v) for v in values[:SHOWN]) + more


def check_csv_header(path: Path) -> None:
    """A CSV file's columns have distinct names (Polars would read the first and rename the second 'x' to
    'x_duplicated_0')."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as handle:
        names = next(csv.reader(handle), [])
    repeated = sorted({name for name in names if names.count(name) > 1})
    if repeated:
        raise InputError(f"{path}: line 1: column(s) {', '.join(repeated)} appear more than once")


def require(frame: pl.DataFrame, columns, path: Path, what: str, id_expr: pl.Expr) -> None:
    """Every row has a value in each of ``columns``."""
    for column in columns:
        missing = frame.filter(pl.col(column).is_null())
        if missing.height:
            raise InputError(f"{path}: {what} {listed(missing.select(id_expr).to_series())}: missing field '{column}'")


def unique(frame: pl.DataFrame, column: str, path: Path, what: str) -> None:
    ids = frame.get_column(column)
    if not ids.null_count() and (ids.len() < 2 or (ids.slice(1) > ids.slice(0, ids.len() - 1)).all()):
        return  # strictly increasing (as writers number them): no hashing of a million ids (~0.15 CPU s)
    dup = frame.filter(pl.col(column).is_duplicated()).get_column(column).unique().sort()
    if dup.len():
        raise InputError(f"{path}: duplicate {what} id {listed(dup)}")


def _reject(frame: pl.DataFrame, bad: pl.Expr, path: Path, what: str, id_expr: pl.Expr, column: str,
            reason: str) -> None:
    """A located error at the first row where ``bad`` holds, showing its value of ``column``."""
    rows = frame.filter(bad.fill_null(False))
    if rows.height:
        first = rows.select(id_expr.alias("_id"), pl.col(column)).row(0)
        more = f" (and {rows.height - 1} more rows)" if rows.height > 1 else ""
        raise InputError(f"{path}: {what} {first[0]}: '{column}' is {first[1]!r}, {reason}{more}")


def _unparsed(column: pl.Expr) -> pl.Expr:
    """Non-null values of a non-numeric column that are not even the text of a number (else every non-null one)."""
    as_number = column.cast(pl.String, strict=False).cast(pl.Float64, strict=False)
    return pl.when((column.is_not_null() & as_number.is_null()).any()).then(
        column.is_not_null() & as_number.is_null()).otherwise(column.is_not_null())


def _numeric(dtype) -> bool:
    return dtype == pl.Null or dtype.is_numeric()


def integers(frame: pl.DataFrame, columns, path: Path, what: str, id_expr: pl.Expr) -> pl.DataFrame:
    """``columns`` cast to Int64 once their values are known to be 64-bit integers."""
    for column in columns:
        dtype, value = frame.schema[column], pl.col(column)
        if dtype.is_float() or dtype.is_decimal():
            number = value.cast(pl.Float64)
            _reject(frame, ~(number.is_finite() & (number == number.floor())), path, what, id_expr, column,
                    "not an integer")
            _reject(frame, number.abs() >= 2.0**63, path, what, id_expr, column, "outside the 64-bit integer range")
        elif dtype == pl.UInt64:
            _reject(frame, value > pl.lit(_INT64_MAX, pl.UInt64), path, what, id_expr, column,
                    "outside the 64-bit integer range")
        elif not (dtype == pl.Null or dtype.is_integer()):
            _reject(frame, _unparsed(value), path, what, id_expr, column, "not an integer")
    return frame.with_columns(pl.col(columns).cast(pl.Int64))


def numbers(frame: pl.DataFrame, columns, path: Path, what: str, id_expr: pl.Expr) -> pl.DataFrame:
    """``columns`` cast to Float64 once their type is known to be numeric (a bbox list: of numbers)."""
    for column in columns:
        dtype, value = frame.schema[column], pl.col(column)
        if isinstance(dtype, (pl.List, pl.Array)):
            if not _numeric(dtype.inner):
                _reject(frame, value.is_not_null(), path, what, id_expr, column, "not a list of numbers")
            frame = frame.with_columns(value.cast(pl.List(pl.Float64)))
        elif not _numeric(dtype):
            _reject(frame, _unparsed(value), path, what, id_expr, column, "not a number")
        else:
            frame = frame.with_columns(value.cast(pl.Float64))
    return frame


def split_bbox(frame: pl.DataFrame, path: Path, what: str, id_expr: pl.Expr) -> pl.DataFrame:
    """Replace a ``bbox`` list column ``[x, y, w, h]`` by four columns."""
    frame = numbers(frame, ["bbox"], path, what, id_expr)
    bad = frame.filter(pl.col("bbox").is_null() | (pl.col("bbox").list.len() != 4))
    if bad.height:
        raise InputError(
            f"{path}: {what} {listed(bad.select(id_expr).to_series())}: 'bbox' must be a list of 4 numbers [x, y, w, h]"
        )
    frame = frame.with_columns([pl.col("bbox").list.get(i).alias(c) for i, c in enumerate(BOX_COLUMNS)]).drop("bbox")
    bad = frame.filter(pl.any_horizontal([pl.col(c).is_null() for c in BOX_COLUMNS]))
    if bad.height:
        raise InputError(f"{path}: {what} {listed(bad.select(id_expr).to_series())}: 'bbox' holds a null")
    return frame


def check_boxes(frame: pl.DataFrame, path: Path, what: str, id_expr: pl.Expr) -> None:
    """Boxes are finite with non-negative width and height (zero-size boxes are allowed)."""
    finite = pl.all_horizontal([pl.col(c).is_finite().fill_null(False) for c in BOX_COLUMNS])
    bad = frame.filter(~finite)
    if bad.height:
        raise InputError(f"{path}: {what} {listed(bad.select(id_expr).to_series())}: 'bbox' has a non-finite value")
    bad = frame.filter((pl.col("w") < 0) | (pl.col("h") < 0))
    if bad.height:
        raise InputError(f"{path}: {what} {listed(bad.select(id_expr).to_series())}: 'bbox' has a negative width or height")
