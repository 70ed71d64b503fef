"""CSV tables of boxes (detections and proposals), read by their header's names in batches of bounded size.

The header decides the layout (names exact, in any order, other columns ignored): the box is ``x, y, w, h`` (COCO's
``[x, y, w, h]``) or ``x1, y1, x2, y2`` (corners: ``w = x2 - x1``, ``h = y2 - y1``). Detections have ``image_id``,
``score`` and ``category_id``, or a category's ``name`` in a column ``category`` (or ``category_name``) where the
ground truth names its categories. Every value is read as text and parsed by its column's type (never guessed from
the rows before it), so an error names the file, the row's 1-based position (its line is one more, after the header)
and the column; an empty field is a missing value. Ids may be written as integral floats (``2.0``), as in JSON.
"""

import csv
from pathlib import Path
from typing import Iterator

import polars as pl

from evalengine.errors import InputError, first_line
from evalengine.io.coco import CocoDataset
from evalengine.io.validate import _reject, check_csv_header, listed, require
from evalengine.schema import from_pixel_inclusive

XYWH = ("x", "y", "w", "h")
CORNERS = ("x1", "y1", "x2", "y2")
BOX_LAYOUTS = (XYWH, CORNERS)
CATEGORY_NAMES = ("category", "category_name")  # a column of category names, in place of category_id


def csv_header(path: Path) -> list:
    """The column names of a CSV file, each given once."""
    check_csv_header(path)
    try:
        return pl.read_csv(path, n_rows=0, infer_schema=False).columns
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable CSV file ({first_line(exc)})") from None


def box_layout(names) -> tuple:
    """The box columns of a header: ``x, y, w, h`` or ``x1, y1, x2, y2`` (the first complete one), else ()."""
    return next((layout for layout in BOX_LAYOUTS if all(c in names for c in layout)), ())


def header_columns(path: Path, needed, optional=()) -> list:
    """The columns read of a CSV file by its header: each of ``needed`` (a name, or a tuple of alternatives: the
    first present), a box layout (:data:`BOX_LAYOUTS`) and those of ``optional`` present; a missing one is an error
    that says what is expected."""
    names = csv_header(path)
    wanted = [(c,) if isinstance(c, str) else tuple(c) for c in needed]
    chosen = [next((c for c in options if c in names), None) for options in wanted]
    box = box_layout(names)
    texts = [" or ".join(options) for options in wanted] + [" or ".join(map(", ".join, BOX_LAYOUTS))]
    missing = [text for text, found in zip(texts, [*chosen, box]) if not found]
    if missing:
        expected = "; ".join(texts) + (f"; optional {', '.join(optional)}" if optional else "")
        raise InputError(f"{path}: missing column(s) {'; '.join(missing)} (found {', '.join(names)}; expected "
                         f"{expected})")
    return [*chosen, *box, *[c for c in optional if c in names]]


def from_corners(x1, y1, x2, y2, pixel_inclusive: bool = False) -> tuple:
    """``x, y, w, h`` of corner boxes (NumPy arrays or Polars expressions): continuous ``w = x2 - x1``, or 1-based
    inclusive pixels (:func:`evalengine.schema.from_pixel_inclusive`)."""
    if pixel_inclusive:
        return from_pixel_inclusive(x1, y1, x2, y2)
    return x1, y1, x2 - x1 + 0.0, y2 - y1 + 0.0


def csv_batches(path: Path, columns: list, integer_columns, what: str, batch_rows: int) -> Iterator[pl.DataFrame]:
    """The ``columns`` of a CSV file in batches of at most ``batch_rows`` rows, parsed: ``integer_columns`` as Int64
    (Float64 in a batch where an id is written as a float, for :func:`evalengine.io.validate.integers` to check),
    the other columns as Float64, except the :data:`CATEGORY_NAMES` columns (text). ``what``: a row in messages."""
    n_rows = 0
    try:
        batches = pl.scan_csv(path, infer_schema=False).select(columns).collect_batches(chunk_size=batch_rows)
        for text in batches:
            yield _parsed(text, integer_columns, path, what, n_rows)
            n_rows += text.height
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(_unreadable_line(path) or f"{path}: not a readable CSV file ({first_line(exc)})") from None


def _unreadable_line(path: Path) -> str | None:
    """Where Polars could not read a CSV file (it names no line): the first line whose number of fields is not the
    header's, or that is not CSV (an unclosed quote); None if Python's reader finds none."""
    with open(path, newline="", encoding="utf-8-sig", errors="replace") as handle:
        lines = csv.reader(handle, strict=True)
        try:
            n_fields = len(next(lines, []))
            for fields in lines:
                if fields and len(fields) != n_fields:
                    return (f"{path}: line {lines.line_num}: {len(fields)} fields where the header has {n_fields} "
                            "(a value with a comma must be quoted)")
        except csv.Error as exc:
            return f"{path}: line {lines.line_num}: not CSV ({exc})"
    return None


def _row_labels(offset: int) -> pl.Expr:
    """Each row's 1-based position in the file and its line (one more, after the header), for messages."""
    position = pl.int_range(offset + 1, offset + 1 + pl.len())
    return pl.format("{} (line {})", position, position + 1)


def _parsed(text: pl.DataFrame, integer_columns, path: Path, what: str, offset: int) -> pl.DataFrame:
    stripped = {c: pl.col(c).str.strip_chars() for c in text.columns}
    text = text.with_columns(pl.when(value != "").then(value).alias(c) for c, value in stripped.items())
    located = text.with_columns(_position=_row_labels(offset))
    parsed = {}
    for column in text.columns:
        if column in CATEGORY_NAMES:
            continue
        number = pl.col(column).cast(pl.Float64, strict=False)
        if column in integer_columns:
            integer = pl.col(column).cast(pl.Int64, strict=False)
            if not text.select((integer.is_null() & pl.col(column).is_not_null()).any()).item():
                parsed[column] = integer
                continue
        kind = "an integer" if column in integer_columns else "a number"
        _reject(located, number.is_null() & pl.col(column).is_not_null(), path, what, pl.col("_position"), column,
                f"not {kind}")
        parsed[column] = number
    return text.with_columns(**parsed)


def csv_detections(path: Path, dataset: CocoDataset, batch_rows: int) -> Iterator[pl.DataFrame]:
    """The raw detection batches of a CSV file (``image_id, category_id, score, x, y, w, h``; see the module), for
    :func:`evalengine.io.detections.iter_detections` to validate as every format."""
    columns = header_columns(path, ["image_id", ("category_id", *CATEGORY_NAMES), "score"])
    category, box = columns[1], tuple(columns[3:])
    what, n_rows = "detection at position", 0
    for frame in csv_batches(path, columns, ("image_id", "category_id"), what, batch_rows):
        frame = frame.with_columns(_position=_row_labels(n_rows))
        if box == CORNERS:
            for low, high in (("x1", "x2"), ("y1", "y2")):
                _reject(frame, pl.col(high) < pl.col(low), path, what, pl.col("_position"), high,
                        f"less than {low} (corners x1, y1, x2, y2: the header says so)")
            frame = frame.with_columns(v.alias(c) for c, v in zip(XYWH, from_corners(*map(pl.col, CORNERS))))
        if category != "category_id":
            frame = _category_ids(frame, category, dataset.categories, path, what)
        n_rows += frame.height
        yield frame.select("image_id", "category_id", "score", *XYWH)


def _category_ids(frame: pl.DataFrame, column: str, categories: pl.DataFrame, path: Path, what: str) -> pl.DataFrame:
    """``category_id`` of each row's category name; a name the ground truth lacks, or gives two ids, is an error."""
    require(frame, [column], path, what, pl.col("_position"))
    named = categories.select("category_id", pl.col("name").alias(column)).drop_nulls(column)
    used = named.filter(pl.col(column).is_duplicated() & pl.col(column).is_in(frame.get_column(column).implode()))
    if used.height:
        name = used.get_column(column)[0]
        ids = listed(used.filter(pl.col(column) == name).get_column("category_id").sort())
        raise InputError(f"{path}: category name {name!r} names categories {ids} of the ground truth: give "
                         "category_id instead")
    joined = frame.join(named, on=column, how="left", maintain_order="left")
    _reject(joined, pl.col("category_id").is_null(), path, what, pl.col("_position"), column,
            f"not a category name of the ground truth ({listed(named.get_column(column).sort())})")
    return joined.drop(column)
