"""Split a JSON list of objects (a COCO result file) into chunks of whole objects, without parsing it.

A numba scanner walks the bytes block by block, tracking nesting depth and string state, and records
where each top-level object ends; every chunk of about ``chunk_bytes`` is then parsed on its own, so
reading a result file of any size needs memory for one chunk only.
"""

from pathlib import Path
from typing import Iterator

import numba
import numpy as np

from evalengine.errors import InputError

CHUNK_BYTES = 64 * 2**20


@numba.njit(cache=True, nogil=True)
def _object_ends(block, state):
    """Offsets just past each '}' closing a top-level list element in ``block``; ``state`` = (depth, in
    string, escaped) carries over between blocks."""
    depth, in_string, escaped = state[0], state[1], state[2]
    ends = np.empty(block.shape[0], np.int64)
    n = 0
    for i in range(block.shape[0]):
        c = block[i]
        if in_string:
            if escaped:
                escaped = 0
            elif c == 92:  # backslash
                escaped = 1
            elif c == 34:  # quote
                in_string = 0
        elif c == 34:
            in_string = 1
        elif c == 123 or c == 91:  # { [
            depth += 1
        elif c == 125 or c == 93:  # } ]
            depth -= 1
            if depth == 1 and c == 125:
                ends[n] = i + 1
                n += 1
    state[0], state[1], state[2] = depth, in_string, escaped
    return ends[:n]


def json_list_chunks(path: Path, chunk_bytes: int = CHUNK_BYTES) -> Iterator[tuple]:
    """``(offset, text)`` pairs: ``text`` is a JSON list holding the next whole objects of the file's
    top-level list, and ``offset`` is where its first object starts in the file, minus one (the '[')."""
    with open(path, "rb") as handle:
        head = handle.read(1024).lstrip()
        if not head.startswith(b"["):
            raise InputError(f"{path}: expected a JSON list of detections (a COCO result file)")
        handle.seek(0)
        state = np.zeros(3, np.int64)
        pending, pending_at = b"", 0
        while True:
            block = handle.read(chunk_bytes)
            if not block:
                break
            ends = _object_ends(np.frombuffer(block, np.uint8), state)
            data = pending + block
            if len(ends):
                cut = len(pending) + int(ends[-1])
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
