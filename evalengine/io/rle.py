"""COCO masks as pycocotools' ``maskApi.c`` reads them, vectorised over many rows.

A set of ``n`` masks is ``counts`` (``np.uint32``: every row's uncompressed run lengths concatenated; column-major,
starting with a run of 0s, as COCO) and ``offsets`` (``np.int64``, ``n + 1``: row ``r`` is
``counts[offsets[r]:offsets[r + 1]]``), with per-row ``h, w`` (``np.int64``). The kernels transcribe ``maskApi.c``
(pycocotools 2.0.8+, whose ``rleToBbox`` is the corrected one) line by line, quirks included; they raise nothing:
the ``first_bad_*`` helpers find the rows to refuse before, so that the caller can name the file and id.

pycocotools' quirks kept on purpose (each is tested against it):

- ``rleFrString`` / ``rleToString``: 5 bits per character (48 + value, 0x20 = more), the sign taken from bit 0x10 of
  the last character, and from the fourth run on the value stored is the difference with the run two before (``i >
  2``, not ``i >= 2``). The string ends at a NUL character. (pycocotools shifts a C ``int``, exact only for runs
  below 2**31 pixels; here 64-bit throughout.)
- ``rleFrPoly``, ``frPyObjects`` and ``merge`` of polygons: see :mod:`evalengine.io.rasterise`.
- ``rleToBbox``: the run count is cut to even; a mask whose foreground runs all have length 0 (``[5, 0, 7]``) gets
  ``[w, h, 2**32 - w + 1, 2**32 - h + 1]`` (unsigned wrap-around), a mask of no foreground run ``[0, 0, 0, 0]``.
- ``rleArea`` sums the odd runs. Uncompressed RLE (``{"counts": [...]}``) is stored as given: pycocotools
  round-trips it through a string, which changes nothing.
"""

import numba
import numpy as np
import pyarrow as pa

_U32 = 0xFFFFFFFF


# ---------------------------------------------------------------------------------------------- compressed strings

_BLOCK = 8  # characters tested at once for one-character values


@numba.njit(cache=True, nogil=True, inline="always")
def one_character_values(data, p, end):
    """Whether ``data[p:p + 8]`` (within ``end``) are eight values of one character each (``0``…``O``: no 0x20
    "more" bit; no NUL), which are most of a mask's: they are then read without a branch per character."""
    if p + _BLOCK > end:
        return False
    flags = 0
    for i in range(_BLOCK):
        flags |= (data[p + i] < 48) | (data[p + i] > 79)
    return flags == 0


@numba.njit(cache=True, nogil=True, inline="always")
def one_character_value(byte):
    """The value of a one-character ``rleFrString`` value: 5 bits, negative with the 0x10 bit."""
    c = np.int64(byte) - 48
    return (c & 0xF) - (c & 0x10)


@numba.njit(cache=True, nogil=True, inline="always")
def _finish_value(x, k, c, counts, m, base):
    """The end of one rleFrString value: ``c`` its last character; the sign from its 0x10 bit, then the difference
    with the run two before from the fourth run on."""
    if c & 0x10:
        x |= np.int64(-1) << min(5 * k, 63)
    if m - base > 2:
        x += np.int64(counts[m - 2])
    counts[m] = np.uint32(x & _U32)


@numba.njit(cache=True, nogil=True, inline="always")
def _decode_one(data, start, end, counts, m):
    """rleFrString of ``data[start:end]`` into ``counts[m:]``; returns the position after its last run. It ends at NUL
    as in C, an unfinished last value too (C reads the NUL: ``0 - 48`` gives a last character with the 0x10 bit)."""
    base, x, k, p = m, np.int64(0), 0, start
    while p < end:
        if k == 0 and m - base > 2 and one_character_values(data, p, end):
            before, last = np.int64(counts[m - 2]), np.int64(counts[m - 1])
            for i in range(_BLOCK):
                value = (before + one_character_value(data[p + i])) & _U32
                counts[m + i] = value
                before, last = last, value
            m, p = m + _BLOCK, p + _BLOCK
            continue
        if data[p] == 0:
            break
        c = (np.int64(data[p]) - 48) & 0x3F
        x |= (c & 0x1F) << min(5 * k, 63)
        k += 1
        if not c & 0x20:
            _finish_value(x, k, c, counts, m, base)
            m, x, k = m + 1, np.int64(0), 0
        p += 1
    if k:
        x |= np.int64(0x10) << min(5 * k, 63)
        _finish_value(x, k + 1, 0x10, counts, m, base)
        m += 1
    return m


@numba.njit(cache=True, nogil=True)
def _decode_kernel(data, bounds):
    """rleFrString over every string ``data[bounds[r]:bounds[r + 1]]``: one pass, at most one value per character."""
    n = bounds.size - 1
    offsets = np.zeros(n + 1, np.int64)
    counts = np.empty(bounds[n] - bounds[0] + n, np.uint32)
    for r in range(n):
        offsets[r + 1] = _decode_one(data, bounds[r], bounds[r + 1], counts, offsets[r])
    return counts[:offsets[n]].copy(), offsets


@numba.njit(cache=True, nogil=True)
def _encode_kernel(counts, offsets):
    """rleToString of every row: the characters and their offsets."""
    n = offsets.size - 1
    data = np.empty(7 * counts.size, np.uint8)  # a 32-bit difference needs at most 7 characters
    bounds = np.zeros(n + 1, np.int64)
    p = 0
    for r in range(n):
        base = offsets[r]
        for i in range(offsets[r + 1] - base):
            x = np.int64(counts[base + i])
            if i > 2:
                x -= np.int64(counts[base + i - 2])
            more = True
            while more:
                c = x & 0x1F
                x >>= 5
                more = x != -1 if c & 0x10 else x != 0
                if more:
                    c |= 0x20
                data[p] = c + 48
                p += 1
        bounds[r + 1] = p
    return data[:p], bounds


def _binary_array(strings) -> pa.Array:
    strings = strings.combine_chunks() if isinstance(strings, pa.ChunkedArray) else strings
    binary = strings.cast(pa.large_binary()) if isinstance(strings, pa.Array) else pa.array(strings, pa.large_binary())
    if not binary.null_count:
        return binary
    import pyarrow.compute as pc  # here: a box evaluation imports this module but never needs it (~0.05 s of a start)

    empty = pa.Array.from_buffers(pa.large_binary(), len(binary),
                                  [None, pa.py_buffer(np.zeros(len(binary) + 1, np.int64)), pa.py_buffer(b"")])
    return pc.coalesce(binary, empty)  # a null is empty (filled from an array: a pa.scalar imports pandas)


def _bytes(strings) -> tuple:
    """``(data, bounds)`` of strings (:func:`decode_strings`): string ``r`` is ``data[bounds[r]:bounds[r + 1]]``."""
    arr = _binary_array(strings)
    bounds = np.frombuffer(arr.buffers()[1], np.int64)[arr.offset:arr.offset + len(arr) + 1]
    data = arr.buffers()[2]
    data = np.frombuffer(data, np.uint8) if data is not None and data.size else np.zeros(1, np.uint8)
    return data, np.ascontiguousarray(bounds)


def decode_strings(strings):
    """``(counts, offsets)`` of compressed COCO strings (pycocotools ``rleFrString``): a list of str / bytes or a
    pyarrow string or binary array (a null is an empty string)."""
    if len(strings) == 0:
        return np.zeros(0, np.uint32), np.zeros(1, np.int64)
    return _decode_kernel(*_bytes(strings))


def encode_strings(counts, offsets, arrow: bool = False):
    """Compressed COCO strings of the rows (pycocotools ``rleToString``): a list of str, or with ``arrow`` a pyarrow
    large string array (no Python objects: for writing Parquet)."""
    data, bounds = _encode_kernel(np.asarray(counts, np.uint32), np.asarray(offsets, np.int64))
    strings = pa.LargeStringArray.from_buffers(len(bounds) - 1, pa.py_buffer(bounds), pa.py_buffer(data))
    return strings if arrow else strings.to_pylist()


# --------------------------------------------------------------------------------------------------- buffers

@numba.njit(cache=True, nogil=True, inline="always")
def reserve(buf, used, need):
    """``buf`` (its first ``used`` items kept) with room for ``need`` more: a kernel's growing output."""
    if used + need <= buf.size:
        return buf
    grown = np.empty(max(2 * buf.size, used + need), buf.dtype)
    grown[:used] = buf[:used]
    return grown


# --------------------------------------------------------------------------------------------- area, bbox, checks

@numba.njit(cache=True, nogil=True)
def _area_kernel(counts, offsets):
    n = offsets.size - 1
    out = np.zeros(n, np.int64)
    for r in range(n):
        for j in range(offsets[r] + 1, offsets[r + 1], 2):
            out[r] += counts[j]
    return out


def area(counts, offsets) -> np.ndarray:
    """Foreground pixels of each row (pycocotools ``rleArea``), int64."""
    return _area_kernel(np.asarray(counts, np.uint32), np.asarray(offsets, np.int64))


@numba.njit(cache=True, nogil=True)
def bbox_of(counts, r0, r1, h, w, out):
    """pycocotools (2.0.8+) ``rleToBbox`` of the runs ``counts[r0:r1]`` into ``out[0:4]``, in uint32 arithmetic."""
    m = (r1 - r0) // 2 * 2
    out[:] = 0.0
    if m == 0:
        return
    xs, ys, xe, ye, cc = np.int64(w), np.int64(h), np.int64(0), np.int64(0), np.int64(0)
    for j in range(m):
        start = cc
        cc = (cc + counts[r0 + j]) & _U32
        if j % 2 == 0 or counts[r0 + j] == 0:
            continue
        x_start, y_start = start // h, start % h
        x_end, y_end = ((cc - 1) & _U32) // h, ((cc - 1) & _U32) % h
        xs, xe = min(xs, x_start), max(xe, x_end)
        if x_start < x_end:
            ys, ye = 0, h - 1
        else:
            ys, ye = min(ys, y_start), max(ye, y_end)
    out[0], out[1] = xs, ys
    out[2], out[3] = (xe - xs + 1) & _U32, (ye - ys + 1) & _U32


@numba.njit(cache=True, nogil=True)
def _bbox_kernel(counts, offsets, h, w):
    out = np.empty((offsets.size - 1, 4))
    for r in range(offsets.size - 1):
        bbox_of(counts, offsets[r], offsets[r + 1], h[r], w[r], out[r])
    return out


def to_bbox(counts, offsets, h, w) -> np.ndarray:
    """``(n, 4)`` float64 ``[x, y, w, h]`` of each row (pycocotools ``toBbox``)."""
    return _bbox_kernel(np.asarray(counts, np.uint32), np.asarray(offsets, np.int64),
                        np.asarray(h, np.int64), np.asarray(w, np.int64))


@numba.njit(cache=True, nogil=True)
def _decode_rows_kernel(data, bounds, rows, h, w, n):
    """String ``i`` decoded as row ``rows[i]`` of ``n``, its box and area computed while its runs are in cache."""
    counts = np.empty(bounds[-1] - bounds[0] + rows.size, np.uint32)
    span, box, area = np.zeros((n, 2), np.int64), np.zeros((n, 4)), np.zeros(n, np.int64)
    m = 0
    for i in range(rows.size):
        r, start = rows[i], m
        m = _decode_one(data, bounds[i], bounds[i + 1], counts, m)
        span[r, 0], span[r, 1] = start, m
        bbox_of(counts, start, m, h[r], w[r], box[r])
        area[r] = counts[start + 1:m:2].sum()  # rleArea: the odd runs
    return counts[:m], span, box, area


def decode_rows(strings, rows, h, w, n: int) -> tuple:
    """``(counts, span, box, area)`` in one pass: string ``i`` is row ``rows[i]`` of ``n``, its runs (``rleFrString``)
    ``counts[span[r, 0]:span[r, 1]]``, ``box[r]`` its ``toBbox`` in size ``h[r], w[r]``, ``area[r]`` its ``area``."""
    data, bounds = _bytes(strings) if len(strings) else (np.zeros(1, np.uint8), np.zeros(1, np.int64))
    return _decode_rows_kernel(data, bounds, *(np.asarray(a, np.int64) for a in (rows, h, w)), n)


@numba.njit(cache=True, nogil=True)
def _first_bad_sum(counts, offsets, h, w):
    for r in range(offsets.size - 1):
        total = np.int64(0)
        for j in range(offsets[r], offsets[r + 1]):
            total += counts[j]
        if total != h[r] * w[r]:
            return r
    return -1


def first_bad_counts(counts, offsets, h, w) -> int:
    """The first row whose runs do not sum to ``h·w`` (pycocotools would read past the mask), or -1."""
    return int(_first_bad_sum(np.asarray(counts, np.uint32), np.asarray(offsets, np.int64),
                              np.asarray(h, np.int64), np.asarray(w, np.int64)))


MALFORMED = -1  # :func:`runs_sum` of a string that is not a compressed RLE


@numba.njit(cache=True, nogil=True, inline="always")
def runs_sum(data, p0, p1):
    """The sum of the runs ``rleFrString`` decodes from ``data[p0:p1]`` (as :func:`_decode_kernel`, without keeping
    them), or :data:`MALFORMED` where a character is outside ``0``…``o`` or the last one continues a value (C would
    read past the string). Blocks of one-character values take :func:`one_character_values`' path."""
    if p1 > p0 and data[p1 - 1] >= 80:  # 'P'..'o': the last value continues
        return MALFORMED
    total, before, last, m, x, k = np.int64(0), np.int64(0), np.int64(0), 0, np.int64(0), 0
    bad, p = False, p0
    while p < p1:
        if k == 0 and m > 2 and one_character_values(data, p, p1):
            for i in range(_BLOCK):
                value = (before + one_character_value(data[p + i])) & _U32
                total, before, last = total + value, last, value
            m, p = m + _BLOCK, p + _BLOCK
            continue
        c = np.int64(data[p]) - 48
        bad |= (c < 0) | (c > 63)
        x |= (c & 0x1F) << min(5 * k, 63)
        k += 1
        if not c & 0x20:
            x |= np.int64(-((c >> 4) & 1)) << min(5 * k, 63)  # the sign, without a branch (it is random)
            if m > 2:
                x += before
            value = x & _U32
            total, before, last, m, x, k = total + value, last, value, m + 1, np.int64(0), 0
        p += 1
    return MALFORMED if bad else total


@numba.njit(cache=True, nogil=True)
def _runs_sums(data, bounds):
    out = np.empty(bounds.size - 1, np.int64)
    for r in range(bounds.size - 1):
        out[r] = runs_sum(data, bounds[r], bounds[r + 1])
    return out


def first_bad_sums(sums, h, w) -> tuple:
    """``(malformed, bad_sum)``: the first row whose :func:`runs_sum` is :data:`MALFORMED`, and the first whose runs
    do not sum to ``h·w``, each -1 if none (with a malformed row, ``bad_sum`` is not looked for)."""
    sums = np.asarray(sums, np.int64)
    malformed = np.flatnonzero(sums == MALFORMED)
    if len(malformed):
        return int(malformed[0]), -1
    bad = np.flatnonzero(sums != np.asarray(h, np.int64) * np.asarray(w, np.int64))
    return -1, int(bad[0]) if len(bad) else -1


def first_bad_strings(strings, h, w) -> tuple:
    """:func:`first_bad_sums` of compressed strings (a list or a pyarrow array): the strings are not decoded into
    memory."""
    if len(strings) == 0:
        return -1, -1
    return first_bad_sums(_runs_sums(*_bytes(strings)), h, w)
