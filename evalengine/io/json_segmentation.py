"""A COCO ``segmentation`` value read straight from JSON bytes by numba (the masks of the result and ground-truth
kernels, :mod:`evalengine.io.json_results` and :mod:`evalengine.io.json_ground_truth`), and the parsed columns it gives
(:func:`parsed_columns`).

The forms read are pycocotools' three: a polygon list (``[[x, y, …], …]``, possibly ``[]``), a compressed RLE
``{"size": [h, w], "counts": "…"}`` (the string's ``\\\\`` escapes unescaped) and an uncompressed one (``counts`` a
list of integers). Anything else (``null``, another key, a repeated one, another escape, a number of another form in
``size`` or ``counts``, a nested value in a polygon) is given up on: the exact reader then reads it and says what is
wrong. The values are left as given; :func:`evalengine.io.masks.masks` checks them (odd polygons, sizes, sums)
against the images, with the same messages for either reader. A compressed string's runs are summed while it is
copied (:func:`evalengine.io.rle.runs_sum`), so that the check of its sum reads no string again.
"""

import numba
import numpy as np
import polars as pl
import pyarrow as pa

from evalengine.arrow import arrow_array
from evalengine.io import json_numbers
from evalengine.io.json_values import correctly_rounded, known_key, plain_end, room, space, string_end, usual_key
from evalengine.io.rle import reserve, runs_sum

# json_numbers.number, called rather than inlined (it is inlined in the box kernel): inlining it at these call sites
# made the kernel take minutes to compile, and masks hold few numbers
number = numba.njit(cache=True, nogil=True)(json_numbers.number.py_func)

# a row's form
NO_MASK, POLYGONS, COMPRESSED, UNCOMPRESSED = 0, 1, 2, 3
# the counters of :func:`read_segmentation`'s growing outputs
CHARS, NUMBERS, PARTS, INEXACT = 0, 1, 2, 3
_MAX_EXPONENT = 300  # a number whose decimal exponent may be above this may overflow a double
_MAX_INTEGER = 2**53  # counts and sizes are kept in float64 / int64: exact below this
_KEY_BYTES, _KEY_STARTS = np.frombuffer(b"sizecounts", np.uint8).copy(), np.array([0, 4, 10], np.int64)
_MAX_SIZE_DIGITS = 15  # below 2**53: read as plain digits by the usual RLE's path
# a row's header (rows[1]): the RLE's size [h, w] and, for a compressed string, its runs' sum (rle.runs_sum)
HEIGHT, WIDTH, RUNS_SUM = 0, 1, 2
# the parsed columns (:func:`parsed_columns`), by form
COLUMNS = {POLYGONS: "segmentation_polygon", COMPRESSED: "segmentation_rle", UNCOMPRESSED: "segmentation_rle_counts"}


def outputs(capacity: int) -> tuple:
    """Empty ``(rows, store, used)`` for :func:`read_segmentation` over at most ``capacity`` rows."""
    rows = (np.zeros(capacity, np.int8), np.zeros((3, capacity), np.int64), np.zeros(capacity, np.int64),
            np.zeros(capacity, np.int64))
    store = (np.empty(1024, np.uint8), np.empty(256), np.empty(64, np.int64), np.empty((16, 3), np.int64))
    return rows, store, np.zeros(4, np.int64)


@numba.njit(cache=True, nogil=True)
def _number_list(buf, p, n, store, used, integers):
    """The list of numbers at ``p`` (after its '[') appended to ``store``'s numbers as one part: ``(end, store)``,
    end -1 where it is not one. Polygon coordinates beyond Clinger's fast path are noted as inexact (the text's
    ``start, end`` and the number's index); ``integers``: counts, each an integer below 2**53."""
    chars, numbers, part_ends, inexact = store
    p = space(buf, p + 1, n)
    if p < n and buf[p] == 93:
        p += 1
    else:
        while True:
            p = space(buf, p, n)
            at = p
            p, integer, whole, value, exact = number(buf, p, n)
            if p < 0:
                return -1, (chars, numbers, part_ends, inexact)
            if integers and not (integer and exact and abs(whole) < _MAX_INTEGER):
                return -1, (chars, numbers, part_ends, inexact)
            numbers = reserve(numbers, used[NUMBERS], 1)
            numbers[used[NUMBERS]] = whole if integers else value
            if not exact:
                inexact = room(inexact, used[INEXACT])
                inexact[used[INEXACT], 0], inexact[used[INEXACT], 1] = at, p
                inexact[used[INEXACT], 2] = used[NUMBERS]
                used[INEXACT] += 1
            used[NUMBERS] += 1
            p = space(buf, p, n)
            if p < n and buf[p] == 44:
                p += 1
                continue
            if p < n and buf[p] == 93:
                p += 1
                break
            return -1, (chars, numbers, part_ends, inexact)
    part_ends = reserve(part_ends, used[PARTS], 1)
    part_ends[used[PARTS]] = used[NUMBERS]
    used[PARTS] += 1
    return p, (chars, numbers, part_ends, inexact)


@numba.njit(cache=True, nogil=True, inline="always")
def _counts_string(buf, p, n, store, used):
    """The compressed counts string at ``p`` (at its quote) appended to ``store``'s characters, its ``\\\\``
    unescaped: ``(end, runs' sum, store)`` (:func:`evalengine.io.rle.runs_sum`), end -1 for another escape, a control
    character or a non-ASCII byte."""
    chars, numbers, part_ends, inexact = store
    m, q = used[CHARS], p + 1
    while True:
        e = plain_end(buf, q, n)
        chars = reserve(chars, m, e - q + 1)
        chars[m:m + e - q] = buf[q:e]
        m += e - q
        if e + 1 < n and buf[e] == 92 and buf[e + 1] == 92:
            chars[m] = 92
            m, q = m + 1, e + 2
            continue
        if e < n and buf[e] == 34:
            total = runs_sum(chars, used[CHARS], m)
            used[CHARS] = m
            return e + 1, total, (chars, numbers, part_ends, inexact)
        return -1, 0, (chars, numbers, part_ends, inexact)


@numba.njit(cache=True, nogil=True, inline="always")
def _next_item(buf, p, n, close):
    """After an item ending at ``p`` (-1: none) of a list or object closed by ``close``: ``(position, closed)``, the
    position after the ',' and whitespace, or after the closing byte; -1 for anything else."""
    if p < 0:
        return -1, False
    p = space(buf, p, n)
    if p < n and buf[p] == 44:
        return space(buf, p + 1, n), False
    if p < n and buf[p] == close:
        return p + 1, True
    return -1, False


@numba.njit(cache=True, nogil=True)
def _rle(buf, p, n, row, rows, store, used):
    """The RLE object at ``p`` (at its '{'): ``(end, store)``; its form and header (:data:`HEIGHT`, …) into
    ``rows``."""
    form, header = rows[0], rows[1]
    seen = 0
    p = space(buf, p + 1, n)
    while True:
        if p >= n or buf[p] != 34:
            return -1, store
        key_end = string_end(buf, p, n)
        if key_end < 0:
            return -1, store
        k = known_key(buf, p + 1, key_end - 1, _KEY_BYTES, _KEY_STARTS) + 1  # 1: size, 2: counts, 0: another
        if k == 0 or seen & k:
            return -1, store
        seen |= k
        p = space(buf, key_end, n)
        if p >= n or buf[p] != 58:
            return -1, store
        p = space(buf, p + 1, n)
        if p >= n:
            return -1, store
        if k == 1:  # [h, w]
            if buf[p] != 91:
                return -1, store
            p += 1
            for j in range(2):
                p = space(buf, p, n)
                p, integer, whole, _, exact = number(buf, p, n)
                if p < 0 or not integer or not exact or abs(whole) >= _MAX_INTEGER:
                    return -1, store
                header[j, row] = whole
                p = space(buf, p, n)
                if p >= n or buf[p] != (93 if j == 1 else 44):
                    return -1, store
                p += 1
        elif buf[p] == 34:
            form[row] = COMPRESSED
            p, total, store = _counts_string(buf, p, n, store, used)
            header[RUNS_SUM, row] = total
        elif buf[p] == 91:
            form[row] = UNCOMPRESSED
            p, store = _number_list(buf, p, n, store, used, True)
        else:
            return -1, store
        p, closed = _next_item(buf, p, n, 125)
        if closed:
            return (p if seen == 3 else -1), store
        if p < 0:
            return -1, store


@numba.njit(cache=True, nogil=True, inline="always")
def _after_key(buf, p, n, k):
    """The position after key ``k`` of :data:`_KEY_BYTES` (0: size, 1: counts) quoted at ``p``
    (:func:`~evalengine.io.json_values.usual_key`), a ':' and the whitespace around it, or -1."""
    length = usual_key(buf, p, n, k, 0, _KEY_BYTES, _KEY_STARTS)
    if length == 0:
        return -1
    p = space(buf, p + length + 2, n)
    return space(buf, p + 1, n) if p < n and buf[p] == 58 else -1


@numba.njit(cache=True, nogil=True, inline="always")
def _digits(buf, p, n):
    """``(end, value)`` of the plain decimal digits at ``p`` (no sign, no leading zero, at most
    :data:`_MAX_SIZE_DIGITS`); end -1 where they are not."""
    q, value = p, np.int64(0)
    while q < n and q - p <= _MAX_SIZE_DIGITS and 48 <= buf[q] <= 57:
        value = 10 * value + (np.int64(buf[q]) - 48)
        q += 1
    if q == p or q - p > _MAX_SIZE_DIGITS or buf[p] == 48 and q - p > 1:
        return -1, value
    return q, value


@numba.njit(cache=True, nogil=True, inline="always")
def _usual_rle(buf, p, n, row, rows, store, used):
    """The usual compressed RLE at ``p`` (at its '{'), as detectron2 and pycocotools write it: ``{"size": [h, w],
    "counts": "…"}``, plain digits, in one walk without :func:`_rle`'s key table and number reader: ``(end, store)``,
    end -1 where it is another form (then read by :func:`_rle`; nothing kept)."""
    header = rows[1]
    p = _after_key(buf, space(buf, p + 1, n), n, 0)
    if p < 0 or p >= n or buf[p] != 91:
        return -1, store
    p += 1
    for j in range(2):
        p, value = _digits(buf, space(buf, p, n), n)
        header[j, row] = value
        p = space(buf, p, n) if p >= 0 else n
        if p >= n or buf[p] != (93 if j == 1 else 44):
            return -1, store
        p += 1
    p = space(buf, p, n)
    if p >= n or buf[p] != 44:
        return -1, store
    p = _after_key(buf, space(buf, p + 1, n), n, 1)
    if p < 0 or p >= n or buf[p] != 34:
        return -1, store
    chars_before = used[CHARS]
    p, total, store = _counts_string(buf, p, n, store, used)
    p = space(buf, p, n) if p >= 0 else n
    if p >= n or buf[p] != 125:
        used[CHARS] = chars_before
        return -1, store
    rows[0][row], header[RUNS_SUM, row] = COMPRESSED, total
    return p + 1, store


@numba.njit(cache=True, nogil=True)
def read_segmentation(buf, p, n, row, rows, store, used):
    """The segmentation value at ``p`` of result ``row``: ``(end, store)``, end -1 where it is given up on.

    ``rows``: per row its form, header (3, rows: :data:`HEIGHT`, …), and where its characters and parts end (set by
    :func:`end_row`); ``store``: the growing characters (uint8), numbers (float64), part ends (int64) and inexact
    numbers; ``used``: how much of each is filled (:data:`CHARS`, …)."""
    if p >= n:
        return -1, store
    if buf[p] == 123:
        end, store = _usual_rle(buf, p, n, row, rows, store, used)
        if end >= 0:
            return end, store
        return _rle(buf, p, n, row, rows, store, used)
    if buf[p] != 91:
        return -1, store
    rows[0][row] = POLYGONS
    p = space(buf, p + 1, n)
    if p < n and buf[p] == 93:
        return p + 1, store
    while True:
        if p >= n or buf[p] != 91:
            return -1, store
        p, store = _number_list(buf, p, n, store, used, False)
        p, closed = _next_item(buf, p, n, 93)
        if closed or p < 0:
            return p, store


@numba.njit(cache=True, nogil=True, inline="always")
def end_row(row, rows, used):
    """Where result ``row``'s characters and parts end (every row's, a row without a mask too)."""
    rows[2][row], rows[3][row] = used[CHARS], used[PARTS]


def parsed(buf: np.ndarray, n: int, rows: tuple, store: tuple, used: np.ndarray) -> dict | None:
    """:func:`parsed_columns` of the first ``n`` rows :func:`read_segmentation` read from ``buf`` into ``(rows, store,
    used)`` (:func:`outputs`), the polygon coordinates beyond the fast path correctly rounded; None where one is not
    finite (1e400: Python's json reads inf, which the exact reader refuses)."""
    form, header, chars_end, parts_end = rows[0][:n], rows[1][:, :n], rows[2][:n], rows[3][:n]
    chars, numbers, part_ends, inexact = store
    n_parts = int(parts_end[-1]) if n else 0
    numbers = numbers[:part_ends[n_parts - 1] if n_parts else 0]
    inexact = inexact[:used[INEXACT]]
    inexact = inexact[inexact[:, 2] < len(numbers)]  # not those of a row given up on
    if len(inexact):
        converted = correctly_rounded(buf, inexact[:, 0], inexact[:, 1])
        if converted is None:
            return None
        numbers[inexact[:, 2]] = converted
    chars = chars[:chars_end[-1] if n else 0]
    return parsed_columns(form, header, chars, chars_end, numbers, part_ends[:n_parts], parts_end)


def parsed_columns(form: np.ndarray, header: np.ndarray, chars: np.ndarray, chars_end: np.ndarray,
                   numbers: np.ndarray, part_ends: np.ndarray, parts_end: np.ndarray) -> dict:
    """The rows' segmentations as the columns :func:`evalengine.io.masks.masks` reads (:data:`COLUMNS`), each null
    where a row has another form: ``segmentation_polygon`` ``List(List(Float64))``, ``segmentation_rle`` ``{size:
    List(Int64), counts: String, runs_sum: Int64}`` and ``segmentation_rle_counts`` ``{size, counts: List(Int64)}``,
    as JSON would decode them (with the compressed strings' :func:`evalengine.io.rle.runs_sum`). Row ``r``'s header
    is ``header[:, r]`` (:data:`HEIGHT`, …), its characters end at ``chars_end[r]``, its parts (polygons, or its
    counts as one part) at ``parts_end[r]``, part ``k``'s numbers at ``part_ends[k]``."""
    n = len(form)
    columns = {}
    part_offsets = np.concatenate([[0], part_ends]).astype(np.int64)
    row_parts = np.concatenate([[0], parts_end]).astype(np.int64)
    sizes = pa.ListArray.from_arrays(arrow_array(np.arange(0, 2 * n + 1, 2, dtype=np.int32)),
                                     arrow_array(header[:RUNS_SUM].T))
    for kind, name in COLUMNS.items():
        here = form == kind
        mask = arrow_array(~here)
        if kind == POLYGONS:
            parts = pa.ListArray.from_arrays(arrow_array(part_offsets),
                                             arrow_array(numbers.astype(np.float64, copy=False)))
            array = pa.LargeListArray.from_arrays(arrow_array(row_parts), parts, mask=mask)
        elif kind == COMPRESSED:
            bounds = np.concatenate([[0], chars_end]).astype(np.int64)
            counts = pa.LargeStringArray.from_buffers(n, pa.py_buffer(bounds), pa.py_buffer(chars))
            array = pa.StructArray.from_arrays([sizes, counts, arrow_array(header[RUNS_SUM])],
                                               names=["size", "counts", "runs_sum"], mask=mask)
        else:
            ends = part_offsets[row_parts[1:]]
            starts = np.where(here, part_offsets[row_parts[:-1]], ends)
            lengths = ends - starts
            offsets = np.concatenate([[0], np.cumsum(lengths)])
            taken = np.repeat(starts - offsets[:-1], lengths) + np.arange(offsets[-1])
            counts = pa.LargeListArray.from_arrays(arrow_array(offsets), arrow_array(numbers[taken].astype(np.int64)))
            array = pa.StructArray.from_arrays([sizes, counts], names=["size", "counts"], mask=mask)
        columns[name] = pl.Series(name, array)
    return columns
