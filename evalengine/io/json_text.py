"""Places in a JSON text, Python's ``json`` as the exact reader of its values, and the checks of a file's structure.

pycocotools reads every file with ``json.load``, so Python's parser defines what a COCO file means: a key given twice
in one object keeps its last value, and ``1.0`` is a number like any other. The fast readers (Polars) are checked
against it: where they refuse a text, or might read it differently, :func:`parse_values` reads it again, and every
error is reported at its 1-based line and column in the file (:func:`line_column`). The structure the scanners of
:mod:`evalengine.io.json_scan` walk around is checked here too: how a file starts (:func:`check_start`), the top-level
object of a ground truth (:func:`check_skeleton`) and the end of a result list (:func:`diagnose_list_end`).
"""

import functools
import json
import os
import re
import warnings
from pathlib import Path

from evalengine.errors import InputError, InputWarning

WHITESPACE = b" \t\r\n"  # JSON's whitespace
_SKIP_WHITESPACE = re.compile(r"[ \t\r\n]*")
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
        """An error at character ``at``. ``ends``: the text may simply have ended there; when only whitespace follows in
        the piece, and whitespace and closing brackets in the file, the error is placed at the file's end and said to
        be one (truncated?)."""
        offset = self.offset(at)
        only_whitespace_after = _SKIP_WHITESPACE.match(self.text, at).end() == len(self.text)
        if ends and only_whitespace_after and _only_closing_after(self.path, offset):
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
        return not handle.read().strip(WHITESPACE + b"]}")


def parse_values(piece: Piece, lines: bool = False, closing: bool = False, after_value: bool = False,
                 where: bool = True) -> tuple:
    """``(values, spans, repeated)``: the values of a piece of a JSON list — objects and the commas between them —
    or of a JSON Lines file (``lines``: one value per line), read by Python's json; where each lies in ``piece.text``;
    and ``(key, span)`` for each object with a repeated key, which keeps its last value as in pycocotools.

    ``closing``: the piece ends the list, ']' included, and only whitespace may follow; ``after_value``: it starts
    right after a value of the list. The first syntax error raises a located :class:`TextError`. Without ``where``,
    a valid piece is read at once, and ``spans`` and the positions are None.""" 
    text, repeated = piece.text, []
    hook = functools.partial(_object, repeated=repeated)
    if not where and not after_value:
        try:
            if lines:
                values = [json.loads(line, object_pairs_hook=hook) for line in text.split("\n") if line.strip()]
            else:
                values = json.loads("[" + text + ("" if closing else "]"), object_pairs_hook=hook)
            return values, None, [(key, None) for key in repeated]
        except json.JSONDecodeError:  # read value by value, to say where
            repeated.clear()
    decoder = json.JSONDecoder(object_pairs_hook=hook)
    values, spans, at, end = [], [], _SKIP_WHITESPACE.match(text).end(), 0
    after, comma, found = after_value, False, []
    while at < len(text):
        char = text[at]
        if char == "]" and comma:
            raise piece.error(at, "expected an object after ','")
        if char == "]" and not lines:  # the list closes: only whitespace may follow
            rest = _SKIP_WHITESPACE.match(text, at + 1).end()
            if rest < len(text) or not closing:
                raise piece.error(rest, "unexpected text after the list's closing ']'")
            break
        if after and not lines:
            if char != ",":
                raise piece.error(at, f"expected ',' or ']' after an object, found {char!r}")
            at, after, comma = _SKIP_WHITESPACE.match(text, at + 1).end(), False, True
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
            found.append((repeated[before], (at, end)))
        values.append(value)
        spans.append((at, end))
        at, after, comma = _SKIP_WHITESPACE.match(text, end).end(), True, False
    else:
        if closing:
            raise piece.error(len(text), "the file ends before the list's closing ']' (truncated?)")
        if comma:
            raise piece.error(len(text), "expected an object after ','")
    return values, spans, found


def warn_repeated(path: Path, repeated: list, offset: int) -> None:
    """The warning for objects with a repeated key (``repeated``, as :func:`parse_values` gives them), the first of
    them at byte ``offset`` of the file."""
    more = f" (and in {len(repeated) - 1} more objects)" if len(repeated) > 1 else ""
    warnings.warn(f"{path}: {line_column(path, offset)}: key {repeated[0][0]!r} appears twice "
                  f"in one object{more}; the last value is used, as pycocotools (Python's json) does", InputWarning,
                  stacklevel=3)


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
    value = dict(pairs)
    if len(value) < len(pairs):
        keys = [key for key, _ in pairs]
        repeated.append(next(key for i, key in enumerate(keys) if key in keys[:i]))
    return value


def check_start(path: Path, handle, opening: bytes, expected: str) -> None:
    """The file starts (after whitespace) with ``opening``; else a located error: empty, a byte-order mark (which
    Python's json, and so pycocotools, rejects too), or something else than ``expected``. The handle is rewound."""
    head, skipped = handle.read(1024), 0
    if head.startswith(b"\xef\xbb\xbf"):
        raise InputError(f"{path}: line 1, column 1: the file starts with a UTF-8 byte-order mark (BOM), which JSON "
                         "does not allow (pycocotools' json.load rejects it too); save it without one")
    while head and not head.lstrip(WHITESPACE):
        skipped, head = skipped + len(head), handle.read(2**20)
    stripped = head.lstrip(WHITESPACE)
    if not stripped:
        raise InputError(f"{path}: the file is empty (expected {expected})")
    if opening and not stripped.startswith(opening):
        found = stripped[:20].decode("utf-8", "replace")
        raise InputError(f"{path}: {line_column(path, skipped + len(head) - len(stripped))}: expected {expected}, "
                         f"found {found!r}")
    handle.seek(0)


def check_skeleton(path: Path, handle, spans: list, end: int, size: int, tail: str) -> None:
    """The file up to ``end`` with every value replaced by 0, and ``tail``, is a JSON object with nothing after it:
    Python's json reads this skeleton, and its errors are placed back in the file."""
    pieces, at = [], 0  # (start in the skeleton, start in the file, text)
    for start, stop in [*spans, (end, end)]:
        handle.seek(at)
        text = handle.read(start - at).decode("utf-8", "replace") + ("0" if start < end else tail)
        pieces.append((sum(len(p[2]) for p in pieces), at, text))
        at = stop
    skeleton = "".join(p[2] for p in pieces)
    try:
        json.loads(skeleton, object_pairs_hook=lambda pairs: _warn_repeated_top_key(path, pairs))
    except json.JSONDecodeError as exc:  # an unterminated string runs to the end
        at = len(skeleton) if exc.msg.startswith("Unterminated string") else exc.pos
        skeleton_at, file_at, text = next(p for p in reversed(pieces) if p[0] <= at)
        offset = min(file_at + len(text[:at - skeleton_at].encode()), size)
        message = ("unexpected text after the top-level object" if exc.msg == "Extra data"
                   else "the file ends inside its top-level object (truncated?)" if offset == size
                   else f"not valid JSON ({exc.msg})")
        raise InputError(f"{path}: {line_column(path, offset)}: {message}") from None


def _warn_repeated_top_key(path: Path, pairs: list) -> dict:
    keys = [key for key, _ in pairs]
    repeated = sorted({key for key in keys if keys.count(key) > 1})
    if repeated:
        warnings.warn(f"{path}: top-level key(s) {', '.join(map(repr, repeated))} appear more than once; the last "
                      "value is used, as pycocotools (Python's json) does", InputWarning, stacklevel=2)
    return dict(pairs)


def diagnose_list_end(path: Path, text: bytes, offset: int, after_value: bool) -> None:
    """Raise the located error of a list's end that is not ']' and whitespace (``text``, at byte ``offset``)."""
    piece = Piece(path, text, offset)
    values, spans, _ = parse_values(piece, closing=True, after_value=after_value)
    for value, (at, _) in zip(values, spans):
        if not isinstance(value, dict):
            raise piece.error(at, "expected an object")
    raise InputError(f"{path}: {line_column(path, offset + len(text))}: not a well-formed JSON list")
