"""JSON objects into frames of a fixed schema, with every value checked against its type.

The fast reader is Polars' JSON Lines reader (on every core), which is strict about types (``2.7`` is not an
integer, ``true`` not a number) but keeps the first of repeated keys and cannot say where a value is wrong. Where it
refuses a text, or the text may repeat a key (:func:`_may_repeat_keys`), Python's json — pycocotools' reader — reads
it again (:func:`evalengine.io.json_text.parse_values`): repeated keys keep their last value, an integral float is an
integer (pycocotools compares ids with ``==``, and ``2.0 == 2``), and the first value of the wrong type is a located
error.
The checked objects are then written back as JSON Lines and read by Polars, so that both ways give the same frame.
"""

import functools
import io
import json
import re
from pathlib import Path

import polars as pl

from evalengine.errors import InputError, first_line
from evalengine.io.json_scan import colons, compact, list_body, read_span, repeated_key
from evalengine.io.json_text import WHITESPACE, Piece, TextError, line_column, parse_values, value_at, warn_repeated

# COCO's 0/1 flags: pycocotools tests them for truth, so a JSON boolean means the same (VOC's ``difficult`` too)
FLAGS = ("iscrowd", "ignore", "difficult")
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
    if not objects.lstrip(WHITESPACE):  # (lstrip copies nothing when there is nothing to strip)
        return pl.DataFrame(schema=json_schema)
    one_per_line = objects if lines else _one_per_line(objects)
    try:
        frame = _polars(one_per_line, json_schema, infer)
    except (pl.exceptions.PolarsError, ValueError):
        frame = None if infer else _integral_floats(one_per_line, json_schema)
    if (frame is not None and all(frame.schema.get(c, t) in (t, pl.Null) for c, t in json_schema.items())
            and not _may_repeat_keys(objects, frame)):
        return frame
    # else read again by Python's json, which says what is wrong and where
    # the list's own ']' read too, where it follows, so that an error near it is placed as Python's json places it
    closed = not lines and _followed_by_close(path, offset + len(objects))
    piece = Piece(path, objects + b"]" * closed, offset)
    values, spans, repeats = parse_values(piece, lines=lines, closing=closed, where=False)
    if repeats:  # placed at the repeated key
        key, span = repeats[0]
        warn_repeated(path, repeats, piece.offset(value_at(piece, span, key)[0]) if span
                      else offset + repeated_key(objects))
    return _exact(piece, values, spans, json_schema, lines, infer, closed)


def _integral_floats(lines: bytes, json_schema: dict) -> pl.DataFrame | None:
    """The frame when its integers are written as floats (``42.0``, as float columns are written): read as numbers,
    kept when each is integral and below 2**53 in magnitude (where a float is exactly its integer); else None."""
    integers = [c for c, t in json_schema.items() if t == pl.Int64]
    try:
        frame = pl.read_ndjson(io.BytesIO(lines), schema={c: pl.Float64 if c in integers else t
                                                          for c, t in json_schema.items()})
    except (pl.exceptions.PolarsError, ValueError):
        return None
    exact = pl.all_horizontal(((pl.col(c) == pl.col(c).floor()) & (pl.col(c).abs() < 2.0**53)).fill_null(True)
                              for c in integers)
    return frame.with_columns(pl.col(integers).cast(pl.Int64)) if integers and frame.select(exact.all()).item() else None


def _may_repeat_keys(objects: bytes, frame: pl.DataFrame) -> bool:
    """Whether an object of the text may give a key twice (Polars kept the first value, pycocotools keeps the last).
    Not when the text holds one ':' per value read (each key has one, and a repeated key would be a second one);
    else the key scanner says."""
    return colons(objects) != _values_read(frame) and repeated_key(objects) >= 0


def _values_read(frame: pl.DataFrame) -> int:
    return sum(frame.height - frame.get_column(c).null_count() for c in frame.columns)


_TYPED_FROM = 1000  # the objects whose values type the fields of a list read with every field (images, categories)


def _inferred(lines: bytes) -> pl.DataFrame:
    """Every field of the objects, with the type its values have: typed from the first :data:`_TYPED_FROM` objects
    (Polars' full inference reads the text twice: 0.10 against 0.03 CPU s for 80k images), kept where that read
    every key: no key is followed by a space before its ':' and the text holds one '":' per non-null value read, so
    no key the first objects lack, no null and no nested object. Else, or where a later value does not parse as its
    field's type, read again with the types inferred from every object (where the first read, Polars gives the same
    frame either way)."""
    try:
        frame = pl.read_ndjson(io.BytesIO(lines), infer_schema_length=_TYPED_FROM)
    except (pl.exceptions.PolarsError, ValueError):
        frame = None
    if (frame is not None and not any(gap in lines for gap in (b'" :', b'"\t:', b'"\r:'))
            and lines.count(b'":') == _values_read(frame)):
        return frame
    return pl.read_ndjson(io.BytesIO(lines), infer_schema_length=None)


def _followed_by_close(path: Path, at: int) -> bool:
    with open(path, "rb") as handle:
        handle.seek(at)
        return handle.read(1) == b"]"


def _one_per_line(objects: bytes) -> bytes:
    """The objects one per line: every separator between two objects becomes a line break. Line breaks already there
    would pass for separators where a ',' is missing, so such a text is compacted first. A separator inside a string
    leaves that line unterminated, so a wrong split fails to parse rather than misreads."""
    if b"\n" in objects:
        objects = compact(objects)
    for separator in (b"},{", b"}, {"):
        if separator in objects:
            return objects.replace(separator, b"}\n{")
    return objects


def _polars(lines: bytes, json_schema: dict, infer: bool) -> pl.DataFrame:
    if infer:  # the reader checks the types of the inferred columns
        return _inferred(lines)
    return pl.read_ndjson(io.BytesIO(lines), schema=json_schema)


_ENCODE = json.JSONEncoder(allow_nan=False).encode


def _exact(piece: Piece, values: list, spans, json_schema: dict, lines: bool, infer: bool,
           closing: bool) -> pl.DataFrame:
    """The values Python's json read, checked against the schema and read by Polars again (so that both ways give
    the same frame); the first wrong value raises a located error."""
    def error(index: int, message: str, name: str | None = None, value=None) -> TextError:
        nonlocal spans
        spans = spans or parse_values(piece, lines=lines, closing=closing)[1]  # where: read again, value by value
        if name is None:
            return piece.error(spans[index][0], message, index)
        at, written = value_at(piece, spans[index], name)
        return piece.error(at, f"'{name}' is {_shown(written or json.dumps(value))}, {message}", index)

    checks = [(name, check) for name, dtype in json_schema.items()
              if (check := _check_of(dtype, name in FLAGS)) is not None]
    fields = list(json_schema)
    rows = []
    for index, value in enumerate(values):
        if type(value) is not dict:
            raise error(index, f"expected an object, found {_shown(json.dumps(value))}")
        row = dict(value) if infer else {name: value[name] for name in fields if name in value}
        for name, check in checks:
            if row.get(name) is not None:
                try:
                    row[name] = check(row[name])
                except ValueError as exc:
                    raise error(index, str(exc), name, row[name]) from None
        try:
            rows.append(_ENCODE(row))
        except ValueError:
            raise error(index, "a value is NaN or Infinity, which JSON does not allow") from None
    try:
        return _polars("\n".join(rows).encode(), json_schema, infer)
    except (pl.exceptions.PolarsError, ValueError) as exc:
        raise InputError(f"{piece.path}: values of unexpected types ({first_line(exc)})") from None


def _check_of(dtype, flag: bool):
    """The check of a value of type ``dtype``: it returns the value as that type asks for, or raises ValueError saying
    why not; None for types Polars reads leniently (strings)."""
    if dtype == pl.Int64:
        return functools.partial(_integer, flag=flag)
    if dtype == pl.Float64:
        return _number
    if isinstance(dtype, pl.List) and dtype.inner == pl.Float64:
        return _numbers
    return None


def _integer(value, flag: bool = False) -> int:
    kind = type(value)
    if kind is float and value.is_integer() or kind is bool and flag:
        value = int(value)
    elif kind is not int:
        raise ValueError("not an integer")
    if -_INT64 <= value < _INT64:
        return value
    raise ValueError("outside the 64-bit integer range")


def _number(value) -> float:
    """A finite float (Python's json reads only int, float, bool, str, list, dict and None)."""
    kind = type(value)
    if kind is float and value - value == 0.0:  # not NaN nor infinite
        return value
    if kind is int:
        try:
            return float(value)
        except OverflowError:
            pass
    if kind is float:  # NaN or ±Infinity, which Python's json.dump writes and pycocotools reads (ranking NaN last)
        raise ValueError("not a finite number (JSON has none; Python's json.dump writes it for a float NaN or inf: "
                         "drop those results or give them a number)")
    raise ValueError("not a finite number" if kind is int else "not a number")


def _numbers(value) -> list:
    if type(value) is not list:
        raise ValueError("not a list of numbers")
    try:
        return [v if v is None else _number(v) for v in value]
    except ValueError as exc:
        raise ValueError(f"not a list of {'finite ' if 'finite' in str(exc) else ''}numbers") from None


def _shown(text: str) -> str:
    """A value's JSON text (a string in quotes) on one line, shortened."""
    text = re.sub(r"\s*\n\s*", " ", text)
    return text if len(text) <= 40 else text[:37] + "..."
