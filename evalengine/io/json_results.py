"""COCO box results parsed straight from the file's bytes into typed columns, by a numba kernel.

The kernel reads the common shape of a result list — objects of ``image_id``, ``category_id`` (integers),
``bbox`` (four numbers) and ``score`` (a number), with any other key holding a plain value, and a ``segmentation``
(:mod:`evalengine.io.json_segmentation`; skipped where masks are not read) — and gives up (:data:`FAIL`) on anything
else: another form of a value (``2.0`` as an id, ``null``, a list of another length, NaN, …), a repeated key, an
escape in a key, non-ASCII text, or a syntax error; a file holding keypoints is left to the exact reader whole. The caller then reads the same bytes with the exact, located reader
(:mod:`evalengine.io.json_read`), so every accepted file gives the frame that reader gives, and every refused one
its message.

Numbers are read as Python's json reads them (correctly rounded, :mod:`evalengine.io.json_numbers`); the rare number
it cannot round (more than 19 digits, near a halfway point) is handed back as text and converted by Arrow's (correctly
rounded) parser.
"""

import mmap
import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numba
import numpy as np
import polars as pl

from evalengine.io.json_text import WHITESPACE, diagnose_list_end
from evalengine.io.json_pieces import kept_pieces
from evalengine.io.json_segmentation import end_row, outputs, parsed, read_segmentation
from evalengine.io.json_numbers import MANTISSA_DIGITS, number
from evalengine.io.json_values import (END, FAIL, FALSE, MORE, NEXT, NULL, TRUE, correctly_rounded, member,
                                       next_element, numbers_at, runs_out, skip_value, scratch, space,
                                       unmanaged, usual_key, work_arrays)

SHAPES = 4  # what a parse ended on, beside :mod:`evalengine.io.json_values`' LIMIT, END, MORE, FAIL: keypoints
MIN_OBJECT_BYTES = 57  # {"image_id":1,"category_id":1,"bbox":[1,1,1,1],"score":1}: every key is required
_IMAGE_ID, _CATEGORY_ID, _BBOX, _SCORE, _SEGMENTATION, _KEYPOINTS = 0, 1, 2, 3, 4, 5
_ALL_REQUIRED = 0b1111
_START, _OTHER = 6, 7  # the slots of :data:`_KEYS`' follows-table for an object's start and another key
_KEYS = (b"image_id", b"category_id", b"bbox", b"score", b"segmentation", b"keypoints")
_KEY_BYTES = np.frombuffer(b"".join(_KEYS), np.uint8)
_KEY_STARTS = np.cumsum([0] + [len(k) for k in _KEYS]).astype(np.int64)


@numba.njit(cache=True, nogil=True)
def parse_results(buf, p, limit, skip_segmentation, key_bytes, key_starts, true_, false_, null_, rows, store, used,
                  work):
    """The result objects of a list from ``p`` (at an object, or whitespace before it) until the list ends or a ','
    ends at ``limit`` or after it: ``(status, position, object start, ids (n, 2), values (n, 5: x, y, w, h, score),
    inexact (k, 3: start, end, n * column + row), capacity, store)``; segmentations are read into ``rows``, ``store``
    and ``used`` (:func:`evalengine.io.json_segmentation.read_segmentation`, the outputs of
    :func:`~evalengine.io.json_segmentation.outputs` for at least ``capacity`` rows) unless skipped. ``status`` :data:`LIMIT` (``position``: after the ','),
    :data:`END` (at the list's ']'), :data:`MORE` (the buffer ends inside an object, which starts at ``position``),
    :data:`FAIL` or :data:`SHAPES` (at the object starting at ``object start``). ``work``:
    :func:`~evalengine.io.json_values.scratch`; the arrays the caller keeps are used :func:`unmanaged`."""
    buf, key_bytes, key_starts = unmanaged(buf), unmanaged(key_bytes), unmanaged(key_starts)
    true_, false_, null_ = unmanaged(true_), unmanaged(false_), unmanaged(null_)
    other_starts, other_ends, found, spans = work_arrays(work)
    n = buf.shape[0]
    capacity = rows[0].shape[0]
    ids = np.empty((2, capacity), np.int64)
    values = np.empty((5, capacity), np.float64)
    inexact = np.empty((capacity, 3), np.int64)  # (never grown: a reassigned array is counted at every object)
    n_inexact, row = 0, 0
    follows = np.full(_OTHER + 1, -1, np.int64)  # the key seen after each key (and after '{') in the last object
    status = FAIL
    while True:
        start = space(buf, p, n)
        p, status = start, FAIL  # (not what ended the previous object)
        if p >= n:
            status = MORE
            break
        if buf[p] != 123:
            break
        p, seen, n_other, broken, previous = p + 1, 0, 0, False, _START
        while True:
            p = space(buf, p, n)
            k = follows[previous]
            length = usual_key(buf, p, n, k, seen, key_bytes, key_starts)
            if length:
                p, seen = space(buf, p + length + 2, n), seen | (1 << k)
                p = space(buf, p + 1, n) if p < n and buf[p] == 58 else -1
            else:
                k, p, seen, n_other = member(buf, p, n, key_bytes, key_starts, seen, other_starts, other_ends, n_other)
                if k >= 0:
                    follows[previous] = k
            previous = k if k >= 0 else _OTHER
            if p < 0:
                broken = True
                break
            if k == _IMAGE_ID or k == _CATEGORY_ID:
                p, integer, whole, _, exact = number(buf, p, n)
                if p < 0 or not integer or not exact or abs(whole) >= MANTISSA_DIGITS:
                    broken = True
                    break
                ids[k, row] = whole
            elif k == _SCORE or k == _BBOX:
                count = 1 if k == _SCORE else 4
                p = numbers_at(buf, p, n, count, found, spans)
                for j in range(count if p >= 0 else 0):
                    column = 4 if k == _SCORE else j
                    values[column, row] = found[j]
                    if spans[j, 0] >= 0:
                        if n_inexact == capacity:  # more than one a result on average: the exact reader reads on
                            p = -1
                            break
                        inexact[n_inexact, 0], inexact[n_inexact, 1] = spans[j, 0], spans[j, 1]
                        inexact[n_inexact, 2] = column * capacity + row
                        n_inexact += 1
                if p < 0:
                    broken = True
                    break
            elif k == _SEGMENTATION and skip_segmentation or k < 0:
                p = skip_value(buf, p, n, true_, false_, null_)
                if p < 0:
                    broken = True
                    break
            elif k == _SEGMENTATION:
                p, store = read_segmentation(buf, p, n, row, rows, store, used)
                if p < 0:
                    broken = True
                    break
            else:  # keypoints: the exact reader reads them
                status = SHAPES
                broken = True
                break
            p = space(buf, p, n)
            if p < n and buf[p] == 44:
                p += 1
                continue
            if p < n and buf[p] == 125 and (seen & _ALL_REQUIRED) == _ALL_REQUIRED:
                p += 1
                break
            broken = True
            break
        if broken:
            if status != SHAPES and runs_out(buf, start, n):
                status = MORE
            p = start
            break
        if not skip_segmentation:
            end_row(row, rows, used)
        row += 1
        status, p = next_element(buf, p, n, limit)
        if status == NEXT:
            continue
        if status == MORE:
            p = start  # (the object may be followed by more of it: read it again with what follows)
            row -= 1
        break
    return status, p, start, ids[:, :row], values[:, :row], inexact[:n_inexact], capacity, store


def parse(buf: np.ndarray, at: int, limit: int, masks: bool) -> tuple:
    """:func:`parse_results` of ``buf`` (uint8) from ``at``, its inexact numbers converted: ``(status, position,
    object start, columns)`` with ``columns`` a dict of NumPy arrays (image_id, category_id, x, y, w, h, score) and,
    with ``masks``, the segmentations as :func:`evalengine.io.json_segmentation.parsed_columns`."""
    rows, store, used = outputs((buf.shape[0] - at) // MIN_OBJECT_BYTES + 1)
    status, position, start, ids, values, inexact, capacity, store = parse_results(
        buf, at, limit, not masks, _KEY_BYTES, _KEY_STARTS, TRUE, FALSE, NULL, rows, store, used, scratch())
    n = values.shape[1]
    inexact = inexact[inexact[:, 2] % capacity < n]  # not those of an object given up on
    if len(inexact):
        converted = correctly_rounded(buf, inexact[:, 0], inexact[:, 1])
        if converted is None:
            return FAIL, at, at, _columns(ids[:, :0], values[:, :0])
        columns, row = np.divmod(inexact[:, 2], capacity)
        values[columns, row] = converted
    columns = _columns(ids, values)
    if masks:
        segmentation = parsed(buf, n, rows, store, used)
        if segmentation is None:
            return FAIL, at, at, _columns(ids[:, :0], values[:, :0])
        columns.update(segmentation)
    return status, position, start, columns


def _columns(ids: np.ndarray, values: np.ndarray) -> dict:
    return {"image_id": ids[0], "category_id": ids[1],
            **{name: values[k] for k, name in enumerate(("x", "y", "w", "h", "score"))}}


@dataclass(frozen=True)
class Fallback:
    """Where the kernel gave up: the exact reader reads the file from byte ``offset`` (0: the whole file), ``rows``
    results coming before it."""

    offset: int
    rows: int


_PARALLEL_BYTES = 2**20  # a block this long is parsed in pieces, one per core
_WORKERS = os.cpu_count() or 1


def result_frames(path: Path, skip_segmentation: bool, block_bytes: int) -> Iterator:
    """Frames (image_id, category_id, x, y, w, h, score, and where the file holds a ``"segmentation"`` key and
    masks are not skipped, the segmentations as :func:`evalengine.io.json_segmentation.parsed_columns`) of the COCO
    result list in the file, read in blocks of ``block_bytes``, each in pieces on every core; the last item is a
    :class:`Fallback` where the kernel gave up (the file is then to be read from there by the exact reader). A file
    that holds a ``"keypoints"`` key is read by the exact reader: then nothing is yielded but the fallback."""
    size = path.stat().st_size
    with open(path, "rb") as handle, ThreadPoolExecutor(max_workers=max(_WORKERS - 1, 1)) as pool:
        buf = handle.read(block_bytes)
        at = len(buf) - len(buf.lstrip(WHITESPACE))
        keypoints, segmentation = _keys_in(path, buf, size, not skip_segmentation)
        if buf[at:at + 1] != b"[" or keypoints:
            yield Fallback(0, 0)
            return
        masks = segmentation and not skip_segmentation
        base, p, rows = 0, at + 1, 0
        while True:
            arr = np.frombuffer(buf, np.uint8)
            final = base + len(buf) >= size
            for status, position, start, columns in _parse_block(buf, arr, p, pool, masks):
                if status in (FAIL, SHAPES) or status == MORE and final:
                    if rows == 0:
                        yield Fallback(0, 0)
                        return
                    if len(columns["score"]):
                        yield pl.DataFrame(columns)
                    yield Fallback(base + start, rows + len(columns["score"]))
                    return
                if len(columns["score"]):
                    rows += len(columns["score"])
                    yield pl.DataFrame(columns)
            if status == END:
                break
            if status == MORE:
                buf, base, p = buf[position:] + handle.read(block_bytes), base + position, 0
        tail = buf[position + 1:] + handle.read()
        if tail.strip(WHITESPACE):  # text after the list: said as the exact reader says it
            last = len(buf[:position].rstrip(WHITESPACE))
            diagnose_list_end(path, buf[last:] + tail, base + last, after_value=True)


def _parse_block(buf: bytes, arr: np.ndarray, p: int, pool: ThreadPoolExecutor, masks: bool) -> list:
    """The :func:`parse` results of a block (``buf``, as ``arr``) from ``p``, in order: one piece per core, cut
    after a '},' (the pieces after the first on ``pool``'s threads). A piece is kept when the one before ended at its
    cut (the cut was between two results); where one did not, the rest of the block is parsed from where it ended,
    in one piece."""
    n = arr.shape[0]
    cuts = [p]
    for k in range(1, _WORKERS if n - p >= _PARALLEL_BYTES else 1):
        split = buf.find(b"},", max(p + (n - p) * k // _WORKERS, cuts[-1]))
        if split < 0:
            break
        cuts.append(split + 2)
    limits = cuts[1:] + [n + 1]
    try:
        others = [pool.submit(parse, arr, cuts[k], limits[k], masks) for k in range(1, len(cuts))]
    except RuntimeError:  # no thread can be started (an address-space limit): one piece
        return [parse(arr, p, n + 1, masks)]
    pieces = [parse(arr, p, limits[0], masks)] + [other.result() for other in others]
    return kept_pieces(pieces, cuts, lambda at: parse(arr, at, n + 1, masks))


def _keys_in(path: Path, first: bytes, size: int, segmentation: bool) -> tuple:
    """Whether the file (whose first block is ``first``) holds the text of a keypoints key, and (if ``segmentation``
    is asked: masks are read) of a segmentation key, as :func:`evalengine.io.detections.result_fields` searches them:
    a file of boxes reads no mask columns. Each search reads the whole file (:func:`_holds`)."""
    keys = (b'"keypoints"', b'"segmentation"')[:1 + segmentation]
    if size <= len(first):
        found = [first.find(key) >= 0 for key in keys]
    else:
        counts = np.bincount(np.frombuffer(first[:_SAMPLE_BYTES], np.uint8), minlength=256)
        with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
            found = [_holds(view, key, counts * (size / min(len(first), _SAMPLE_BYTES))) for key in keys]
    return found[0], len(found) > 1 and found[1]


_SAMPLE_BYTES = 2**20  # the start of the file whose byte counts choose :func:`_holds`' anchor
_MAX_FINDS = 10_000  # finds of the anchor byte expected in the file, beyond which the key is searched whole


def _holds(view: mmap.mmap, key: bytes, expected: np.ndarray) -> bool:
    """Whether ``view`` holds ``key``: its rarest byte (``expected``: each byte's count estimated from the file's
    start) is looked for by ``memchr`` (vectorised) and each find compared with the key; where that byte is not rare,
    the key is searched whole (``bytes.find`` tests the key's last byte, a '"', at most positions: ~1 GB/s)."""
    needle = np.frombuffer(key, np.uint8)
    anchor = int(np.argmin(expected[needle]))
    if expected[needle[anchor]] > _MAX_FINDS:
        return view.find(key) >= 0
    byte, p = key[anchor:anchor + 1], view.find(key[anchor:anchor + 1], anchor)
    while p >= 0:
        if view[p - anchor:p - anchor + len(key)] == key:
            return True
        p = view.find(byte, p + 1)
    return False
