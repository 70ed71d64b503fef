"""Shared checks of input tables; every message names the file and the offending ids or rows."""

import io
import re
from pathlib import Path

import polars as pl

from evalengine.errors import InputError, first_line
from evalengine.io.json_scan import list_body

SHOWN = 5  # how many offending ids a message lists
BOX_COLUMNS = ("x", "y", "w", "h")


def listed(values) -> str:
    values = list(values)
    more = f" and {len(values) - SHOWN} more" if len(values) > SHOWN else ""
    return ", ".join(str(v) for v in values[:SHOWN]) + more


def read_json(path: Path, json_schema: dict | None, source=None, offset: int = 0) -> pl.DataFrame:
    """Parse JSON with a fixed schema (unlisted fields are skipped; None infers it from every row), or raise
    a located InputError.

    ``source`` (bytes) is parsed instead of the file when given; ``offset`` is where its text starts in
    the file, so that an error still points at the file's own text. A list with a schema goes through
    :func:`read_json_objects`.
    """
    if source is None and not path.is_file():
        raise InputError(f"{path}: no such file")
    body = list_body(source) if json_schema is not None and source is not None else None
    if body is not None:
        start, end = body
        return read_json_objects(path, json_schema, source[start:end], offset + start)
    return _read_json_list(path, json_schema, source, offset)


def read_json_objects(path: Path, json_schema: dict, objects: bytes, offset: int) -> pl.DataFrame:
    """The whole objects of a JSON list and the commas between them (its text without the brackets, as
    :func:`evalengine.io.json_scan.json_list_chunks` yields it), ``offset`` being where they start in the file.

    One-line objects are parsed as JSON Lines, on every core (a list parses on one); a separator inside a
    string leaves that line unterminated, so a wrong split fails to parse rather than misreads. Anything
    else, or an error, is parsed as the list, whose errors point at the file's text."""
    if objects and not objects.isspace():
        for separator in (b"},{", b"}, {"):
            if separator in objects:
                lines = objects.replace(separator, b"}\n{")
                break
        else:
            lines = objects  # one object, or objects on lines of their own
        try:
            return pl.read_ndjson(io.BytesIO(lines), schema=json_schema)
        except (pl.exceptions.PolarsError, ValueError):
            pass
    return _read_json_list(path, json_schema, b"[" + objects + b"]", offset - 1)


def _read_json_list(path: Path, json_schema: dict | None, source, offset: int) -> pl.DataFrame:
    try:
        return pl.read_json(path if source is None else io.BytesIO(source), schema=json_schema,
                            infer_schema_length=None)
    except (pl.exceptions.PolarsError, ValueError, OSError) as exc:
        message = first_line(exc)
        found = re.search(r"at character (\d+)", message)
        where = _context(path, offset + int(found.group(1))) if found else ""
        raise InputError(f"{path}: not a valid COCO JSON file of the expected shape ({message}){where}") from exc


def _context(path: Path, at: int) -> str:
    """The file's text around byte ``at``; NaN and Infinity (Python's json writes them) are named."""
    with open(path, "rb") as handle:
        handle.seek(max(at - 40, 0))
        text = handle.read(80).decode("utf-8", "replace")
    hint = " NaN and Infinity are not valid JSON numbers." if re.search(r"NaN|Infinity", text) else ""
    return f" near: ...{text}...{hint}"


def require(frame: pl.DataFrame, columns, path: Path, what: str, id_expr: pl.Expr) -> None:
    """Every row has a value in each of ``columns``."""
    for column in columns:
        missing = frame.filter(pl.col(column).is_null())
        if missing.height:
            raise InputError(f"{path}: {what} {listed(missing.select(id_expr).to_series())}: missing field '{column}'")


def unique(frame: pl.DataFrame, column: str, path: Path, what: str) -> None:
    dup = frame.filter(pl.col(column).is_duplicated()).get_column(column).unique().sort()
    if dup.len():
        raise InputError(f"{path}: duplicate {what} id {listed(dup)}")


def split_bbox(frame: pl.DataFrame, path: Path, what: str, id_expr: pl.Expr) -> pl.DataFrame:
    """Replace a ``bbox`` list column ``[x, y, w, h]`` by four columns."""
    bad = frame.filter(pl.col("bbox").is_null() | (pl.col("bbox").list.len() != 4))
    if bad.height:
        raise InputError(
            f"{path}: {what} {listed(bad.select(id_expr).to_series())}: 'bbox' must be a list of 4 numbers [x, y, w, h]"
        )
    return frame.with_columns(
        [pl.col("bbox").list.get(i).alias(c) for i, c in enumerate(BOX_COLUMNS)]
    ).drop("bbox")


def check_boxes(frame: pl.DataFrame, path: Path, what: str, id_expr: pl.Expr) -> None:
    """Boxes are finite with non-negative width and height (zero-size boxes are allowed)."""
    finite = pl.all_horizontal([pl.col(c).is_finite() for c in BOX_COLUMNS])
    bad = frame.filter(~finite)
    if bad.height:
        raise InputError(f"{path}: {what} {listed(bad.select(id_expr).to_series())}: 'bbox' has a non-finite value")
    bad = frame.filter((pl.col("w") < 0) | (pl.col("h") < 0))
    if bad.height:
        raise InputError(f"{path}: {what} {listed(bad.select(id_expr).to_series())}: 'bbox' has a negative width or height")
