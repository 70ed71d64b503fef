"""Find structure in a JSON file without parsing it, so that only the parts needed are parsed.

A numba scanner walks the bytes block by block, tracking nesting depth and string state:

- ``json_list_chunks`` splits a top-level list (a COCO result file) into chunks of whole objects,
  each parsed on its own, so that a result file of any size needs memory for one chunk only;
- ``top_level_values`` finds the text of each value of a top-level object (``images``,
  ``annotations``, …), so that each list is parsed with a schema of its own.
"""

import os
from pathlib import Path
from typing import Iterator

import numba
import numpy as np

from evalengine.errors import InputError

CHUNK_BYTES = 64 * 2**20


KEY_OPENS, KEY_CLOSES, COLON, COMMA, TOP_CLOSES, ELEMENT_CLOSES = 1, 2, 3, 4, 5, 6


@numba.njit(cache=True, nogil=True)
def _events(block, state, offset):
    """(position, kind) of the structure at nesting depth 1 in ``block``: a string opens or closes, ':',
    ',', the top-level value closes, or an object inside it closes. ``state`` = (depth, in string,
    escaped) carries over between blocks."""
    depth, in_string, escaped = state[0], state[1], state[2]
    events = np.empty((1024, 2), np.int64)
    n = 0
    for i in range(block.shape[0]):
        c = block[i]
        kind = 0
        if in_string:
            if escaped:
                escaped = 0
            elif c == 92:  # backslash
                escaped = 1
            elif c == 34:  # quote
                in_string = 0
                kind = KEY_CLOSES if depth == 1 else 0
        elif c == 34:
            in_string = 1
            kind = KEY_OPENS if depth == 1 else 0
        elif c == 123 or c == 91:  # { [
            depth += 1
        elif c == 125 or c == 93:  # } ]
            depth -= 1
            kind = TOP_CLOSES if depth == 0 else (ELEMENT_CLOSES if depth == 1 and c == 125 else 0)
        elif depth == 1 and (c == 58 or c == 44):  # : ,
            kind = COLON if c == 58 else COMMA
        if kind:
            if n == events.shape[0]:
                grown = np.empty((2 * n, 2), np.int64)
                grown[:n] = events
                events = grown
            events[n, 0], events[n, 1] = offset + i, kind
            n += 1
    state[0], state[1], state[2] = depth, in_string, escaped
    return events[:n]


def top_level_values(path: Path, block_bytes: int = CHUNK_BYTES) -> dict:
    """``{key: (start, end)}``: the byte span of each value of the file's top-level JSON object."""
    with open(path, "rb") as handle:
        if not handle.read(1024).lstrip().startswith(b"{"):
            raise InputError(f"{path}: expected a JSON object (a COCO ground-truth file)")
        handle.seek(0)
        state = np.zeros(3, np.int64)
        events, offset = [], 0
        while block := handle.read(block_bytes):
            events.append(_events(np.frombuffer(block, np.uint8), state, offset))
            offset += len(block)
        if state[0] != 0 or state[1]:
            raise InputError(f"{path}: not a valid COCO JSON file (it ends inside an object, a list or a string)")
        events = np.concatenate(events) if events else np.empty((0, 2), np.int64)
        spans, key, value_start = {}, None, None
        for i, (position, kind) in enumerate(events):
            if kind == KEY_OPENS and value_start is None:
                handle.seek(position + 1)
                key = handle.read(events[i + 1][0] - position - 1).decode("utf-8", "replace")
            elif kind == COLON:
                value_start = position + 1
            elif kind in (COMMA, TOP_CLOSES) and value_start is not None:
                spans[key] = (value_start, position)
                key, value_start = None, None
        return spans


def read_span(path: Path, span: tuple) -> bytes:
    with open(path, "rb") as handle:
        handle.seek(span[0])
        return handle.read(span[1] - span[0])


def list_sample(path: Path, span: tuple, n_objects: int = 1000, max_bytes: int = 4 * 2**20) -> bytes:
    """The first ``n_objects`` objects of the JSON list at ``span`` (within ``max_bytes``), as a JSON list."""
    text = read_span(path, (span[0], min(span[1], span[0] + max_bytes))).lstrip()
    events = _events(np.frombuffer(text, np.uint8), np.zeros(3, np.int64), 0)
    ends = events[events[:, 1] == ELEMENT_CLOSES, 0][:n_objects]
    return text[: int(ends[-1]) + 1] + b"]" if len(ends) else b"[]"


def json_list_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple]:
    """``(offset, text)`` pairs: ``text`` is a JSON list holding the next whole objects of the file's
    top-level list, and ``offset`` is where its first object starts in the file, minus one (the '[')."""
    with open(path, "rb") as handle:
        head = handle.read(1024).lstrip()
        if not head.startswith(b"["):
            raise InputError(f"{path}: expected a JSON list of detections (a COCO result file)")
        handle.seek(0)
        if os.fstat(handle.fileno()).st_size <= chunk_bytes:  # one chunk: the file as it is, no scan needed
            yield 0, handle.read()
            return
        state = np.zeros(3, np.int64)
        pending, pending_at = b"", 0
        while True:
            block = handle.read(chunk_bytes)
            if not block:
                break
            events = _events(np.frombuffer(block, np.uint8), state, 0)
            ends = events[events[:, 1] == ELEMENT_CLOSES, 0]
            data = pending + block
            if len(ends):
                cut = len(pending) + int(ends[-1]) + 1
                yield from _wrapped(data[:cut], pending_at)
                pending, pending_at = data[cut:], pending_at + cut
            else:
                pending = data
        tail = pending.strip().rstrip(b"]").strip()
        if tail.strip(b", \n\r\t"):
            yield from _wrapped(pending, pending_at)


def _wrapped(text: bytes, at: int) -> Iterator[tuple]:
    """``text`` holds whole objects, possibly after the list's '[' or a ','; make it a list of its own."""
    stripped = text.lstrip()
    skipped = len(text) - len(stripped)
    if stripped[:1] in (b"[", b","):
        stripped, skipped = stripped[1:], skipped + 1
    body = stripped.rstrip().rstrip(b"]").rstrip()
    if body:
        yield at + skipped - 1, b"[" + body + b"]"
