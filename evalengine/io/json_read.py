"""JSON objects into frames of a fixed schema, with every value checked against its type.

The fast reader is Polars' JSON Lines reader (on every core), which is strict about types (``2.7`` is not an
integer, ``true`` not a number) but keeps the first of repeated keys and cannot say where a value is wrong. Where it
refuses a text, or the text may repeat a key, Python's json — pycocotools' reader — reads it again
(:func:`evalengine.io.json_text.parse_values`): repeated keys keep their last value, an integral float is an integer
(pycocotools compares ids with ``==``, and ``2.0 == 2``), and the first value of the wrong type is a located error.
The checked objects are then written back as JSON Lines and read by Polars, so that both ways give the same frame.
"""

import io
import json
import math
import re
from pathlib import Path

import polars as pl

from evalengine.errors import InputError, first_line
from evalengine.io.json_scan import compact, list_body, read_span, repeated_key
from evalengine.io.json_text import Piece, TextError, line_column, parse_values, value_at

# COCO's 0/1 flags: pycocotools tests them for truth, so a JSON boolean means the same
FLAGS = ("iscrowd", "ignore")
_INT64 = 2**63


def read_json_list(path: Path, json_schema: dict, span: tuple, what: str, infer: bool = False) -> pl.DataFrame:
    """The JSON list at byte ``span`` of the file (a value of a COCO ground truth), its ``what`` objects read with
    ``json_schema`` (``infer``: every field, with the type its values have; those of ``json_schema`` are checked,
    by Python's json where the inferred type is another)."""
    text = read_span(path, span)
    body = list_body(text)
    if body is None:
        stripped = text.lstrip()
        start = span[0] + len(text) - len(stripped)
        if stripped.startswith(b"["):  # a list that does not end well: say where
            parse_values(Piece(path, stripped[1:], start + 1), closing=True)
        found = stripped[:20].decode("utf-8", "replace")
        raise TextError(path, line_column(path, start), f"expected a JSON list, found {found!r}")
    start, end = body
    try:
        return read_json_objects(path, json_schema, text[start:end], span[0] + start, infer=infer)
    except TextError as exc:
        raise exc.of_object(what, 0) from None


def read_json_objects(path: Path, json_schema: dict, objects: bytes, offset: int, lines: bool = False,
                      infer: bool = False) -> pl.DataFrame:
    """The objects of a piece of a JSON list — whole objects and the commas between them, as
    :func:`evalengine.io.json_scan.json_list_chunks` yields them — or of a JSON Lines file (``lines``), ``offset``
    being where the piece starts in the file. A value of the wrong type raises a :class:`TextError` whose ``index`` is
    the object's position in the piece."""
    if not objects.strip(b" \t\r\n"):
        return pl.DataFrame(schema=json_schema)
    if repeated_key(objects) < 0:
        try:
            frame = _polars(objects if lines else _one_per_line(objects), json_schema, infer)
            if not infer or all(frame.schema.get(c, t) in (t, pl.Null) for c, t in json_schema.items()):
                return frame
        except (pl.exceptions.PolarsError, ValueError):
            pass  # read again by Python's json, which says what is wrong and where
    # the list's own ']' read too, where it follows, so that an error near it is placed as Python's json places it
    closed = not lines and _followed_by_close(path, offset + len(objects))
    return _exact(Piece(path, objects + b"]" * closed, offset), json_schema, lines, infer, closed)


def _followed_by_close(path: Path, at: int) -> bool:
    with open(path, "rb") as handle:
        handle.seek(at)
        return handle.read(1) == b"]"


def _one_per_line(objects: bytes) -> bytes:
    """The objects one per line. A separator inside a string leaves that line unterminated, so a wrong split fails to
    parse rather than misreads; a pretty-printed list is compacted first."""
    for separator in (b"},{", b"}, {"):
        if separator in objects:
            return objects.replace(separator, b"}\n{")
    if b"\n" in objects:
        return compact(objects).replace(b"},{", b"}\n{")
    return objects


def _polars(lines: bytes, json_schema: dict, infer: bool) -> pl.DataFrame:
    if infer:  # the reader checks the types of the inferred columns
        return pl.read_ndjson(io.BytesIO(lines), infer_schema_length=None)
    return pl.read_ndjson(io.BytesIO(lines), schema=json_schema)


def _exact(piece: Piece, json_schema: dict, lines: bool, infer: bool, closing: bool) -> pl.DataFrame:
    values, spans = parse_values(piece, lines=lines, closing=closing)
    rows = []
    for index, (value, span) in enumerate(zip(values, spans)):
        if not isinstance(value, dict):
            raise piece.error(span[0], f"expected an object, found {_shown(json.dumps(value))}", index)
        row = dict(value) if infer else {}
        for name, dtype in json_schema.items():
            if value.get(name) is not None:
                try:
                    row[name] = _checked(value[name], dtype, name in FLAGS)
                except ValueError as exc:
                    at, written = value_at(piece, span, name)
                    shown = _shown(written or json.dumps(value[name]))
                    raise piece.error(at, f"'{name}' is {shown}, {exc}", index) from None
        try:
            rows.append(json.dumps(row, allow_nan=False))
        except ValueError:
            raise piece.error(span[0], "a value is NaN or Infinity, which JSON does not allow", index) from None
    try:
        return _polars("\n".join(rows).encode(), json_schema, infer)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise InputError(f"{piece.path}: values of unexpected types ({first_line(exc)})") from None


def _checked(value, dtype, flag: bool = False):
    """``value`` as the type ``dtype`` asks for, or ValueError saying why not (types Polars reads leniently,
    such as strings, are left to it)."""
    if dtype == pl.Int64:
        return _integer(value, flag)
    if dtype == pl.Float64:
        return _number(value)
    if isinstance(dtype, pl.List) and dtype.inner == pl.Float64:
        if not isinstance(value, list) or any(isinstance(v, bool) or not isinstance(v, (int, float, type(None)))
                                              for v in value):
            raise ValueError("not a list of numbers")
        try:
            return [None if v is None else _number(v) for v in value]
        except ValueError:
            raise ValueError("not a list of finite numbers") from None
    return value


def _integer(value, flag: bool) -> int:
    if isinstance(value, bool) and not flag:
        raise ValueError("not an integer")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if not isinstance(value, int):
        raise ValueError("not an integer")
    if not -_INT64 <= value < _INT64:
        raise ValueError("outside the 64-bit integer range")
    return int(value)


def _number(value) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError("not a number")
    try:
        finite = math.isfinite(value)
    except OverflowError:
        finite = False
    if not finite:
        raise ValueError("not a finite number")
    return float(value)


def _shown(text: str) -> str:
    """A value's JSON text (a string in quotes) on one line, shortened."""
    text = re.sub(r"\s*\n\s*", " ", text)
    return text if len(text) <= 40 else text[:37] + "..."
