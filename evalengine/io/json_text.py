"""Places in a JSON text, and Python's ``json`` as the exact reader of its values.

pycocotools reads every file with ``json.load``, so Python's parser defines what a COCO file means: a key given twice
in one object keeps its last value, and ``1.0`` is a number like any other. The fast readers (Polars) are checked
against it: where they refuse a text, or might read it differently, :func:`parse_values` reads it again, and every
error is reported at its 1-based line and column in the file (:func:`line_column`).
"""

import json
import os
import re
import warnings
from pathlib import Path

from evalengine.errors import InputError, InputWarning

_WHITESPACE = re.compile(r"[ \t\r\n]*")
_NEAR = 30  # characters shown on each side of an error


def line_column(path: Path, at: int) -> str:
    """``line L, column C`` of byte ``at`` of the file, both 1-based (the column counts characters)."""
    line, line_start, done = 1, 0, 0
    with open(path, "rb") as handle:
        while done < at and (block := handle.read(min(2**24, at - done))):
            line += block.count(b"\n")
            if (last := block.rfind(b"\n")) >= 0:
                line_start = done + last + 1
            done += len(block)
        handle.seek(line_start)
        column = len(handle.read(at - line_start).decode("utf-8", "replace")) + 1
    return f"line {line}, column {column}"


class TextError(InputError):
    """A located error in a piece of a JSON file: ``path: line L, column C: message``. ``index`` is the 0-based
    position, in the piece, of the object it is about (None for a syntax error), so that a reader who knows how many
    objects came before can name the object (:meth:`of_object`)."""

    def __init__(self, path: Path, where: str, message: str, index: int | None = None):
        super().__init__(f"{path}: {where}: {message}")
        self.path, self.where, self.message, self.index = path, where, message, index

    def of_object(self, what: str, first: int) -> InputError:
        """The error naming the object's 1-based position in the file, ``first`` objects coming before the piece."""
        if self.index is None:
            return self
        return InputError(f"{self.path}: {what} at position {first + self.index + 1} ({self.where}): {self.message}")


class Piece:
    """A piece of a JSON file, decoded: ``text`` starts at byte ``base`` of the file at ``path``."""

    def __init__(self, path: Path, data: bytes, base: int):
        self.path, self.base = Path(path), base
        try:
            self.text = data.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise TextError(self.path, line_column(self.path, base + exc.start), "not UTF-8 text") from None
        self.ascii = len(self.text) == len(data)

    def offset(self, at: int) -> int:
        """The file offset of character ``at``."""
        return self.base + (at if self.ascii else len(self.text[:at].encode()))

    def error(self, at: int, message: str, index: int | None = None, ends: bool = False) -> TextError:
        """An error at character ``at``. ``ends``: the text may simply have ended there; when that is the end of the
        piece and only closing brackets follow in the file, the error is placed at the file's end and said to be one
        (truncated?)."""
        offset = self.offset(at)
        if ends and at >= len(self.text) and _only_closing_after(self.path, offset):
            offset, message = os.path.getsize(self.path), f"the file ends early (truncated?): {message}"
        near = self.text[max(at - _NEAR, 0):at + _NEAR]
        near = f", near {near!r}" if near.strip() else ""
        return TextError(self.path, line_column(self.path, offset), message + near, index)


def _only_closing_after(path: Path, offset: int) -> bool:
    """Whether nothing but whitespace and closing brackets follows byte ``offset`` of the file."""
    size = os.path.getsize(path)
    if size - offset > 64:
        return False
    with open(path, "rb") as handle:
        handle.seek(offset)
        return not handle.read().strip(b" \t\r\n]}")


def parse_values(piece: Piece, lines: bool = False, closing: bool = False, after_value: bool = False):
    """``(values, spans)``: the values of a piece of a JSON list — objects and the commas between them — or of a JSON
    Lines file (``lines``: one value per line), read by Python's json, and where each lies in ``piece.text``.

    A repeated key keeps its last value (as in pycocotools) with an :class:`InputWarning`. ``closing``: the piece ends
    the list, ']' included, and only whitespace may follow; ``after_value``: it starts right after a value of the
    list. The first syntax error raises a located :class:`TextError`."""
    text, repeated, first_repeat = piece.text, [], None
    decoder = json.JSONDecoder(object_pairs_hook=lambda pairs: _object(pairs, repeated))
    values, spans, at, end = [], [], _WHITESPACE.match(text).end(), 0
    after, comma, n_repeating = after_value, False, 0
    while at < len(text):
        char = text[at]
        if char == "]" and comma:
            raise piece.error(at, "expected an object after ','")
        if char == "]" and not lines:  # the list closes: only whitespace may follow
            rest = _WHITESPACE.match(text, at + 1).end()
            if rest < len(text) or not closing:
                raise piece.error(rest, "unexpected text after the list's closing ']'")
            break
        if after and not lines:
            if char != ",":
                raise piece.error(at, f"expected ',' or ']' after an object, found {char!r}")
            at, after, comma = _WHITESPACE.match(text, at + 1).end(), False, True
            continue
        if after and "\n" not in text[end:at]:
            raise piece.error(at, "expected one object per line, found a second one on the line")
        before = len(repeated)
        line_end = text.find("\n", at) if lines else -1  # a JSON Lines value ends with its line
        line_end = len(text) if line_end < 0 else line_end
        try:
            value, end = decoder.raw_decode(text[at:line_end] if lines else text, 0 if lines else at)
        except json.JSONDecodeError as exc:  # an unterminated string runs to the end of the text
            error_at = line_end if exc.msg.startswith("Unterminated string") else exc.pos + (at if lines else 0)
            raise piece.error(error_at, f"not valid JSON ({exc.msg})", ends=True) from None
        end += at if lines else 0
        if len(repeated) > before:
            n_repeating += 1
            first_repeat = first_repeat or (repeated[before], at)
        values.append(value)
        spans.append((at, end))
        at, after, comma = _WHITESPACE.match(text, end).end(), True, False
    else:
        if closing:
            raise piece.error(len(text), "the file ends before the list's closing ']' (truncated?)")
        if comma:
            raise piece.error(len(text), "expected an object after ','")
    if first_repeat:
        key, at = first_repeat
        more = f" (and in {n_repeating - 1} more objects)" if n_repeating > 1 else ""
        warnings.warn(f"{piece.path}: {line_column(piece.path, piece.offset(at))}: key {key!r} appears twice in one "
                      f"object{more}; the last value is used, as pycocotools (Python's json) does", InputWarning,
                      stacklevel=2)
    return values, spans


def value_at(piece: Piece, span: tuple, key: str) -> tuple:
    """``(position, text)`` of the value of ``key`` in the object at ``span`` of the piece (its last, if repeated), as
    written in the file; the object's start and None if it cannot be found."""
    found = None
    for found in re.finditer(rf'"{re.escape(key)}"\s*:\s*', piece.text[span[0]:span[1]]):
        pass
    if found is None:
        return span[0], None
    start = span[0] + found.end()
    try:
        end = json.JSONDecoder().raw_decode(piece.text, start)[1]
    except json.JSONDecodeError:
        return span[0], None
    return span[0] + found.start(), piece.text[start:end]


def _object(pairs: list, repeated: list) -> dict:
    """A JSON object as Python's json builds it (the last of repeated keys wins); its first repeated key is noted."""
    seen = set()
    for key, _ in pairs:
        if key in seen:
            repeated.append(key)
            break
        seen.add(key)
    return dict(pairs)
