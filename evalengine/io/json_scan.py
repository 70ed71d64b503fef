"""Find structure in a JSON file without parsing it, so that only the parts needed are parsed.

A numba scanner walks the bytes block by block, tracking nesting depth and string state:

- ``json_list_chunks`` splits a top-level list (a COCO result file) into chunks of whole objects,
  each parsed on its own, so that a result file of any size needs memory for one chunk only (its scanner
  looks up each byte's class in a table and records only where the block's last whole object ends);
- ``jsonl_chunks`` splits a JSON Lines file at line ends;
- ``top_level_values`` finds the text of each value of a top-level object (``images``,
  ``annotations``, …), so that each list is parsed with a schema of its own;
- ``repeated_key`` finds a key given twice in one object (Polars' reader keeps the first value, Python's json —
  pycocotools' reader — the last), unless ``colons`` already shows that every key is one that was read; ``compact``
  drops the whitespace between tokens, so that a pretty-printed list is read as JSON Lines too.

The structure around the values is checked too (a BOM, a missing ']' or '}', text after the end), by
:mod:`evalengine.io.json_text`, which locates every error by line and column.
"""

import mmap
import os
from pathlib import Path
from typing import Iterator

import numba
import numpy as np

from evalengine.errors import InputError
from evalengine.io.json_text import WHITESPACE, check_skeleton, check_start, diagnose_list_end, line_column

CHUNK_BYTES = 64 * 2**20


KEY_OPENS, KEY_CLOSES, COLON, COMMA, TOP_CLOSES, ELEMENT_CLOSES = 1, 2, 3, 4, 5, 6
_QUOTE, _BACKSLASH, _OPENS, _OBJECT_CLOSES, _LIST_CLOSES, _COLON, _COMMA = 1, 2, 3, 4, 5, 6, 7
# byte → class: 0 for every byte that cannot change the nesting or string state (almost all of them)
_BYTE_CLASS = np.zeros(256, np.uint8)
_BYTE_CLASS[[ord('"'), ord("\\"), ord("{"), ord("["), ord("}"), ord("]")]] = [
    _QUOTE, _BACKSLASH, _OPENS, _OPENS, _OBJECT_CLOSES, _LIST_CLOSES]
_STRUCTURE_CLASS = _BYTE_CLASS.copy()  # and the separators, for the events at depth 1
_STRUCTURE_CLASS[[ord(":"), ord(",")]] = [_COLON, _COMMA]
_SPACE = 8
_COMPACT_CLASS = _BYTE_CLASS.copy()  # and the whitespace, which :func:`compact` drops outside strings
_COMPACT_CLASS[[ord(" "), ord("\t"), ord("\r"), ord("\n")]] = _SPACE
_MAX_KEYS = 64  # keys per object compared by :func:`repeated_key`; an object with more is read by Python's json


# what one structural byte did
_STRING_OPENS, _STRING_CLOSES, _NESTS, _OBJECT_ENDS, _LIST_ENDS, _SEPARATOR = 1, 2, 3, 4, 5, 6


@numba.njit(cache=True, nogil=True, inline="always")
def _step(cls, depth, in_string, escaped):
    """The string/escape/nesting state machine for one byte of class ``cls`` > 0: the new ``(depth, in_string,
    escaped)`` and what the byte did (0: nothing; a separator outside strings is :data:`_SEPARATOR`)."""
    if in_string:
        if escaped:
            return depth, 1, 0, 0
        if cls == _BACKSLASH:
            return depth, 1, 1, 0
        if cls == _QUOTE:
            return depth, 0, 0, _STRING_CLOSES
        return depth, 1, 0, 0
    if cls == _QUOTE:
        return depth, 1, 0, _STRING_OPENS
    if cls == _OPENS:
        return depth + 1, 0, 0, _NESTS
    if cls == _OBJECT_CLOSES:
        return depth - 1, 0, 0, _OBJECT_ENDS
    if cls == _LIST_CLOSES:
        return depth - 1, 0, 0, _LIST_ENDS
    return depth, 0, escaped, _SEPARATOR if cls != _BACKSLASH else 0


@numba.njit(cache=True, nogil=True)
def _scan(block, state, offset, byte_class, every_event):
    """(position, kind) of the structure at nesting depth 1 in ``block``: a string opens or closes, ':', ',', the
    top-level value closes, or an object inside it closes — or, without ``every_event``, only the last
    :data:`ELEMENT_CLOSES` (what the chunk splitter needs, recorded without growing a list). ``state`` = (depth, in
    string, escaped) carries over between blocks. Most bytes are of class 0 and cost one table look-up."""
    depth, in_string, escaped = state[0], state[1], state[2]
    events = np.empty((1024 if every_event else 1, 2), np.int64)
    n = 0
    for i in range(block.shape[0]):
        cls = byte_class[block[i]]
        if cls == 0:
            escaped = 0
            continue
        depth, in_string, escaped, did = _step(cls, depth, in_string, escaped)
        if not every_event:
            if did == _OBJECT_ENDS and depth == 1:
                events[0, 0], events[0, 1], n = offset + i, ELEMENT_CLOSES, 1
            continue
        kind = 0
        if did == _OBJECT_ENDS or did == _LIST_ENDS:
            kind = TOP_CLOSES if depth == 0 else (ELEMENT_CLOSES if depth == 1 and did == _OBJECT_ENDS else 0)
        elif depth == 1 and did != 0 and did != _NESTS:
            kind = (KEY_OPENS if did == _STRING_OPENS else KEY_CLOSES if did == _STRING_CLOSES
                    else COLON if cls == _COLON else COMMA)
        if kind:
            if n == events.shape[0]:
                grown = np.empty((2 * n, 2), np.int64)
                grown[:n] = events
                events = grown
            events[n, 0], events[n, 1] = offset + i, kind
            n += 1
    state[0], state[1], state[2] = depth, in_string, escaped
    return events[:n]


@numba.njit(cache=True, nogil=True)
def _value_end(buf, p, byte_class):
    n = buf.shape[0]
    if buf[p] != 91 and buf[p] != 123 and buf[p] != 34:  # a number or a literal: up to a separator or whitespace
        while p < n and buf[p] != 44 and buf[p] != 125 and buf[p] != 93 and byte_class[buf[p]] != _SPACE:
            p += 1
        return p
    depth, in_string, escaped = 0, 0, 0
    for i in range(p, n):
        cls = byte_class[buf[i]]
        if cls == 0 or cls == _SPACE:
            escaped = 0
            continue
        depth, in_string, escaped, _ = _step(cls, depth, in_string, escaped)
        if depth == 0 and not in_string:
            return i + 1
    return -1


def value_end(buf: np.ndarray, p: int) -> int:
    """End of the JSON value starting at ``p`` of ``buf`` (uint8) as :func:`top_level_values` delimits it (strings and
    nesting followed, the text inside not checked), or -1 where ``buf`` ends first."""
    return int(_value_end(buf, p, _COMPACT_CLASS)) if p < len(buf) else -1


def _events(block, state, offset, byte_class):
    """Every depth-1 event of ``block`` (see :func:`_scan`)."""
    return _scan(block, state, offset, byte_class, True)


def _last_element_end(block, state, byte_class) -> int:
    """Position in ``block`` of the last '}' closing an element of the top-level list, or -1."""
    last = _scan(block, state, 0, byte_class, False)
    return int(last[0, 0]) if last.shape[0] else -1


@numba.njit(cache=True, nogil=True)
def _repeated_key(text, byte_class) -> int:
    """Position of the first string at depth 1 of a sequence of JSON objects that equals an earlier one of its object
    — a key given twice, or a string value equal to a key (a false alarm: the reader that follows is exact) — or
    -1. An object with more than :data:`_MAX_KEYS` strings counts as repeating."""
    depth, in_string, escaped = 0, 0, 0
    starts, lengths = np.empty(_MAX_KEYS, np.int64), np.empty(_MAX_KEYS, np.int64)
    n, start = 0, 0
    for i in range(text.shape[0]):
        cls = byte_class[text[i]]
        if cls == 0:
            escaped = 0
            continue
        depth, in_string, escaped, did = _step(cls, depth, in_string, escaped)
        if depth != 1:
            continue
        if did == _NESTS:
            n = 0
        elif did == _STRING_OPENS:
            start = i + 1
        elif did == _STRING_CLOSES:
            length = i - start
            for k in range(n):
                if lengths[k] == length and (text[starts[k]:starts[k] + length] == text[start:i]).all():
                    return start - 1
            if n == _MAX_KEYS:
                return start - 1
            starts[n], lengths[n] = start, length
            n += 1
    return -1


@numba.njit(cache=True, nogil=True)
def _count(text, byte) -> int:
    n = 0
    for i in range(text.shape[0]):
        n += text[i] == byte
    return n


def colons(text: bytes) -> int:
    """How many ':' the text holds: one per key of its objects, plus any inside strings (a vectorised count, ~6x
    cheaper than :func:`repeated_key`)."""
    return int(_count(np.frombuffer(text, np.uint8), ord(":")))


def repeated_key(text: bytes) -> int:
    """Where a sequence of JSON objects (a chunk of a list, without its brackets, or of JSON Lines) may repeat a key
    in one object, or -1 (see :func:`_repeated_key`)."""
    return int(_repeated_key(np.frombuffer(text, np.uint8), _BYTE_CLASS))


@numba.njit(cache=True, nogil=True)
def _compact(text, byte_class):
    depth, in_string, escaped = 0, 0, 0
    out = np.empty_like(text)
    n, token, space = 0, False, False
    for i in range(text.shape[0]):
        byte = text[i]
        cls = byte_class[byte]
        if cls == _SPACE and not in_string:
            space = token  # after a number or a literal, whitespace separates it from what follows
            continue
        if space:
            out[n] = 32
            n += 1
            space = False
        out[n] = byte
        n += 1
        if cls == 0 or cls == _SPACE:
            escaped = 0
            token = not in_string and byte != 44 and byte != 58  # not ',' nor ':'
            continue
        depth, in_string, escaped, did = _step(cls, depth, in_string, escaped)
        token = False
    return out[:n]


def compact(text: bytes) -> bytes:
    """``text`` without the whitespace outside its strings, but for one space after a number or a literal, which keeps
    it apart from what follows (``4 2`` stays two tokens)."""
    return _compact(np.frombuffer(text, np.uint8), _COMPACT_CLASS).tobytes()


def top_level_values(path: Path, block_bytes: int = CHUNK_BYTES) -> dict:
    """``{key: (start, end)}``: the byte span of each value of the file's top-level JSON object (the last of a
    repeated key, as Python's json). The text around the values is checked to be a well-formed object, with nothing
    after it."""
    with open(path, "rb") as handle:
        check_start(path, handle, b"{", "a JSON object (a COCO ground-truth file)")
        state = np.zeros(3, np.int64)
        events, size = [], 0
        while block := handle.read(block_bytes):
            events.append(_events(np.frombuffer(block, np.uint8), state, size, _STRUCTURE_CLASS))
            size += len(block)
        events = np.concatenate(events) if events else np.empty((0, 2), np.int64)
        spans, key, value_start, closed = {}, None, None, False
        for i, (position, kind) in enumerate(events):
            if kind == KEY_OPENS and value_start is None and i + 1 < len(events):
                handle.seek(position + 1)
                key = handle.read(events[i + 1][0] - position - 1).decode("utf-8", "replace")
            elif kind == COLON:
                value_start = position + 1
            elif kind in (COMMA, TOP_CLOSES) and value_start is not None:
                spans[key] = (value_start, position)
                key, value_start = None, None
            if kind == TOP_CLOSES:
                closed = True
                break
        # a file that ends inside a value is checked up to that value
        check_skeleton(path, handle, sorted(spans.values()), size if closed or value_start is None else value_start,
                        size, "" if closed or value_start is None else "0}")
        if not closed:
            raise InputError(f"{path}: {line_column(path, size)}: the file ends inside its top-level object "
                             "(truncated?)")
        return spans


def read_span(path: Path, span: tuple) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(span[0])
        return handle.read(span[1] - span[0])


def list_sample(path: Path, span: tuple, n_objects: int = 1000, max_bytes: int = 4 * 2**20) -> bytes:
    """The first ``n_objects`` objects of the JSON list at ``span`` (within ``max_bytes``), as a JSON list. The text
    read grows fourfold until it holds them (a sample of a large list scans a small part of it)."""
    window = min(64 * 2**10, max_bytes)
    while True:
        text = read_span(path, (span[0], min(span[1], span[0] + window))).lstrip()
        events = _events(np.frombuffer(text, np.uint8), np.zeros(3, np.int64), 0, _STRUCTURE_CLASS)
        ends = events[events[:, 1] == ELEMENT_CLOSES, 0][:n_objects]
        if len(ends) == n_objects or window >= max_bytes or span[0] + window >= span[1]:
            return text[: int(ends[-1]) + 1] + b"]" if len(ends) else b"[]"
        window = min(4 * window, max_bytes)


def _refuse_an_object(path: Path) -> None:
    """A JSON object given for a result file: say what it is and how to make the result list of it."""
    with open(path, "rb") as handle:
        if not handle.read(1024).lstrip(WHITESPACE).startswith(b"{"):
            return
    keys = top_level_values(path).keys()
    if {"images", "annotations"} <= keys:
        raise InputError(f"{path}: a COCO ground-truth file (images, annotations), where detections are expected: a "
                         "JSON list of results (image_id, category_id, bbox or segmentation, score)")
    if "annotations" in keys:
        raise InputError(f"{path}: a JSON object whose 'annotations' hold the results, where a COCO result file is "
                         f"that list alone; write it alone, e.g. jq .annotations {path} > results.json")


def json_list_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES, start: int | None = None) -> Iterator[tuple]:
    """``(offset, objects)`` pairs: ``objects`` holds the next whole objects of the file's top-level list and the
    separators between them (no brackets, no leading comma), and ``offset`` is where it starts in the file. The file
    is mapped, scanned in blocks and each chunk copied once out of it. Objects must be separated by ',' and the list
    closed by ']' with nothing but whitespace after it; otherwise Python's json reads the end of the file to say
    where it goes wrong. ``start``: where to begin, at an object of the list (after a ',')."""
    with open(path, "rb") as handle:
        try:
            check_start(path, handle, b"[", "a JSON list of detections (a COCO result file)")
        except InputError:
            _refuse_an_object(path)
            raise
        size = os.fstat(handle.fileno()).st_size
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            start = _after(view, 0, b"[") if start is None else start
            if size - start <= chunk_bytes:  # one chunk: the file as it is, no scan needed
                close = _before_close(view)
                if view[close:close + 1] != b"]" or close < start:
                    diagnose_list_end(path, view[start:], start, after_value=False)
                yield start, view[start:close]
                return
            state, at, last = np.array([1, 0, 0], np.int64), start, -1  # inside the list
            for block_at in range(start, size, chunk_bytes):
                end = _block_element_end(view, block_at, min(chunk_bytes, size - block_at), state)
                if end < 0:  # an object longer than a block
                    continue
                last = block_at + end
                yield at, view[at:last + 1]
                at = _after(view, last + 1, b"")
                if view[at:at + 1] == b",":
                    at = _after(view, at + 1, b"")
                elif view[at:at + 1] not in (b"]", b""):
                    raise InputError(f"{path}: {line_column(path, at)}: expected ',' or ']' after an object, found "
                                     f"{view[at:at + 1].decode('utf-8', 'replace')!r}")
            tail_at = last + 1 if last >= 0 else start
            if view[tail_at:].strip(WHITESPACE) != b"]":
                diagnose_list_end(path, view[tail_at:], tail_at, after_value=last >= 0)


def _block_element_end(view, at: int, length: int, state) -> int:
    """:func:`_last_element_end` of ``length`` bytes of the mapped file from ``at`` (the array is released on return,
    so that the map can be closed)."""
    return _last_element_end(np.frombuffer(view, np.uint8, length, at), state, _BYTE_CLASS)


def jsonl_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple]:
    """``(offset, lines)`` pairs: the next whole lines of a JSON Lines file (a last line without its line end
    included) and where they start in the file; the file is mapped and each chunk copied once out of it."""
    with open(path, "rb") as handle:
        check_start(path, handle, b"", "JSON Lines")
        size = os.fstat(handle.fileno()).st_size
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            at = 0
            while at < size:
                end = size if at + chunk_bytes >= size else view.rfind(b"\n", at, at + chunk_bytes) + 1
                if end == 0:  # a line longer than a chunk
                    end = view.find(b"\n", at + chunk_bytes) + 1 or size
                yield at, view[at:end]
                at = end


def _after(text: bytes, at: int, separator: bytes) -> int:
    """Position after the whitespace, ``separator`` (if there) and whitespace starting at ``at``."""
    while at < len(text) and text[at] in WHITESPACE:
        at += 1
    if separator and text[at:at + len(separator)] == separator:
        at += len(separator)
        while at < len(text) and text[at] in WHITESPACE:
            at += 1
    return at


def list_body(text: bytes) -> tuple | None:
    """``(start, end)`` of what lies between a JSON list's brackets (whitespace trimmed at the start), or None when
    ``text`` is not a list."""
    start = _after(text, 0, b"")
    close = _before_close(text)
    if text[start:start + 1] != b"[" or text[close:close + 1] != b"]" or close <= start:
        return None
    return _after(text, start, b"["), close


def _before_close(text: bytes) -> int:
    """End of ``text`` without its trailing whitespace and closing ']' (if there)."""
    end = len(text)
    while end and text[end - 1] in WHITESPACE:
        end -= 1
    return end - 1 if text[end - 1:end] == b"]" else end
