"""pycocotools ``rleFrPoly`` (a polygon's mask as run lengths, transcribed from ``maskApi.c`` with its arithmetic),
and ``frPyObjects`` + ``merge`` of each row's polygons (:func:`from_polygons`).

The vertices are scaled by 5 and truncated toward zero after ``+ 0.5`` (so -0.2 goes to 0, not -1); the boundary is
walked point by point in doubles (``(int)(ys + s * t + .5)``); a step between two points is kept where the column
changes onto a sampled column, ``(x + .5) / 5 - .5`` integral and inside ``[0, w - 1]``, with its row clamped to ``[0,
h]`` then ``ceil``-ed; the kept pixel indices are sorted and their differences are the runs (two toggles at the same
pixel cancel). A segment between equal vertices divides 0 by 0: its one point has the row of ``(int)NaN`` (INT_MIN on
x86), never used since its column equals its neighbours'. Coordinates are assumed finite and within
:data:`MAX_COORDINATE`.

``frPyObjects`` (:func:`from_polygons`): a polygon of an odd number of coordinates loses the last one (``int(len(p) /
2)`` vertices); a list whose FIRST polygon has exactly 4 numbers is read as boxes ``[x, y, w, h]`` (``rleFrBbox``:
the polygon ``x, y, x, y+h, x+w, y+h, x+w, y``). pycocotools then raises (its ``frBbox`` takes no list),
faster-coco-eval rasterises each part's first 4 numbers as a box (a part of fewer is empty) and merges: so does
:func:`from_polygons`. ``annToRLE`` merges the parts by union (``rleMerge``, pairwise from the first). A row without
polygons (``frPyObjects([])`` raises IndexError) is an empty mask ``[h·w]``.
"""

import numba
import numpy as np

from evalengine.io.rle import reserve

_SCALE = 5.0  # the upsampling
_INT_MIN = -2147483648  # (int)NaN on x86: the row of a point between equal vertices


@numba.njit(cache=True, nogil=True, inline="always")
def _boundary_point(pu, pv, u, v, h, w):
    """rleFrPoly's downsampling of the step from ``(pu, pv)`` to ``(u, v)`` (upsampled): ``(pixel index where the mask
    toggles, its column)``, or -1. In integers: ``xd = (c + .5) / 5 - .5`` is integral exactly when ``c ≡ 2 (mod 5)``
    (other values lie 0.2 from any integer, far beyond rounding), and ``ceil(clamp((v + .5) / 5 - .5, 0, h))`` is the
    clamped ``ceil((v - 2) / 5)``."""
    if u == pu:
        return -1, -1
    c = u if u < pu else u - 1
    if c < 2 or (c - 2) % 5 or (c - 2) // 5 > w - 1:
        return -1, -1
    return (c - 2) // 5 * h + min(max(-((2 - min(pv, v)) // 5), 0), h), (c - 2) // 5


@numba.njit(cache=True, nogil=True, inline="always")
def _before_step(xs, s, t, c):
    """Whether point ``t`` of a steep segment lies before its column's step between ``c`` and ``c + 1``."""
    u = int(xs + s * t + 0.5)
    return u <= c if s > 0 else u > c


@numba.njit(cache=True, nogil=True)
def _sort_toggles(a, column, n):
    """``a[:n + 1]`` sorted, ``a[n]`` (= h·w) being the largest: a counting sort by the column each toggle was made
    for (``a // h``, or one less for a toggle at row ``h``: no division, which took a third of the rasterising), then
    an insertion sort that only meets the few toggles of a column (np.sort took most of the rasterising time)."""
    out = np.empty(n + 1, np.int64)
    out[n] = a[n]
    if n == 0:
        return out
    lo, hi = column[0], column[0]
    for i in range(n):
        lo, hi = min(lo, column[i]), max(hi, column[i])
    start = np.zeros(hi - lo + 2, np.int64)
    for i in range(n):
        start[column[i] - lo + 1] += 1
    for c in range(1, start.size):
        start[c] += start[c - 1]
    for i in range(n):
        c = column[i] - lo
        out[start[c]] = a[i]
        start[c] += 1
    for i in range(1, n):
        value, j = out[i], i - 1
        while j >= 0 and out[j] > value:
            out[j + 1] = out[j]
            j -= 1
        out[j + 1] = value
    return out


@numba.njit(cache=True, nogil=True)
def poly_rle(xy, k, h, w):
    """pycocotools ``rleFrPoly`` of the ``k`` vertices ``xy[0:2k]`` in an ``h × w`` image: its run lengths.

    The C code walks every point of the 5× upsampled boundary; here a shallow segment (``dx >= dy``: the column
    changes at every point) visits only its steps onto a sampled column, each computed with the C expression, so
    the result is the same. An image of no pixel gives ``[0]``, as pycocotools when ``h`` is 0."""
    if h <= 0 or w <= 0:
        return np.zeros(1, np.uint32)
    m = 1
    for j in range(k):
        x0, y0 = int(_SCALE * xy[2 * j] + 0.5), int(_SCALE * xy[2 * j + 1] + 0.5)
        jn = (j + 1) % k
        x1, y1 = int(_SCALE * xy[2 * jn] + 0.5), int(_SCALE * xy[2 * jn + 1] + 0.5)
        m += max(abs(x1 - x0), abs(y1 - y0)) // 5 + 2
    a = np.empty(m, np.int64)  # the toggles (at most one per sampled column a segment crosses, + 1), then h·w
    column = np.empty(m, np.int64)  # the column of each toggle
    nb, pu, pv = 0, 0, 0
    for j in range(k):
        xs, ys = int(_SCALE * xy[2 * j] + 0.5), int(_SCALE * xy[2 * j + 1] + 0.5)
        jn = (j + 1) % k
        xe, ye = int(_SCALE * xy[2 * jn] + 0.5), int(_SCALE * xy[2 * jn + 1] + 0.5)
        dx, dy = abs(xe - xs), abs(ys - ye)
        flip = (dx >= dy and xs > xe) or (dx < dy and ys > ye)
        if flip:
            xs, xe, ys, ye = xe, xs, ye, ys
        if dx >= dy:
            s = (ye - ys) / dx if dx else 0.0
            t0 = dx if flip else 0  # the first point visited: its step from the previous segment's last point
            u, v = xs + t0, int(ys + s * t0 + 0.5) if dx else _INT_MIN  # 0/0: see the module docstring
            if j > 0:
                p, at = _boundary_point(pu, pv, u, v, h, w)
                if p >= 0:
                    a[nb], column[nb] = p, at
                    nb += 1
            # steps between t and t + 1 (either direction) land on column xs + t: only t ≡ 2 - xs (mod 5) count
            lo = max(0, 2 - xs)
            t = lo + (2 - xs - lo) % 5
            hi = min(dx - 1, 5 * (w - 1) + 2 - xs)
            while t <= hi:
                vmin = min(int(ys + s * t + 0.5), int(ys + s * (t + 1) + 0.5))
                column[nb] = (xs + t - 2) // 5
                a[nb] = column[nb] * h + min(max(-((2 - vmin) // 5), 0), h)
                nb += 1
                t += 5
            t1 = 0 if flip else dx  # the last point visited
            pu, pv = xs + t1, int(ys + s * t1 + 0.5) if dx else _INT_MIN
        else:
            s = (xe - xs) / dy
            t0 = dy if flip else 0
            if j > 0:
                p, at = _boundary_point(pu, pv, int(xs + s * t0 + 0.5), ys + t0, h, w)
                if p >= 0:
                    a[nb], column[nb] = p, at
                    nb += 1
            # the column u(t) moves by at most 1 per step and monotonically: it steps from c to c ± 1 once for each
            # c between its ends; find that step for the sampled c by the line's equation, then exactly
            ua, ub = int(xs + 0.5), int(xs + s * dy + 0.5)
            lo = max(min(ua, ub), 2)
            c = lo + (2 - lo) % 5
            while c <= min(max(ua, ub) - 1, 5 * (w - 1) + 2):
                t = min(max(int(np.floor((c + 0.5 - xs) / s)), 0), dy - 1)
                while t + 1 < dy and _before_step(xs, s, t + 1, c):
                    t += 1
                while t > 0 and not _before_step(xs, s, t, c):
                    t -= 1
                column[nb] = (c - 2) // 5
                a[nb] = column[nb] * h + min(max(-((2 - ys - t) // 5), 0), h)
                nb += 1
                c += 5
            t1 = 0 if flip else dy  # the last point visited
            pu, pv = int(xs + s * t1 + 0.5), ys + t1
    a[nb] = h * w
    a = _sort_toggles(a, column, nb)
    prev = 0
    for j in range(nb + 1):
        a[j], prev = a[j] - prev, a[j]
    b = np.empty(nb + 1, np.uint32)
    j, m = 1, 1
    b[0] = a[0]
    while j <= nb:
        if a[j] > 0:
            b[m] = a[j]
            m += 1
            j += 1
        else:
            j += 1
            if j <= nb:
                b[m - 1] += a[j]
                j += 1
    return b[:m]


@numba.njit(cache=True, nogil=True)
def union(a, b):
    """pycocotools ``rleMerge`` of two masks of the same size with ``intersect=0``."""
    out = np.empty(a.size + b.size + 1, np.uint32)
    ca, cb = np.int64(a[0]), np.int64(b[0])
    v = va = vb = False
    m, ia, ib, cc, ct = 0, 1, 1, np.int64(0), np.int64(1)
    while ct > 0:
        c = min(ca, cb)
        cc += c
        ct = 0
        ca -= c
        if not ca and ia < a.size:
            ca, va, ia = np.int64(a[ia]), not va, ia + 1
        ct += ca
        cb -= c
        if not cb and ib < b.size:
            cb, vb, ib = np.int64(b[ib]), not vb, ib + 1
        ct += cb
        vp, v = v, va or vb
        if v != vp or ct == 0:
            out[m] = cc
            m += 1
            cc = 0
        if c == 0 and (ca == 0 and ia == a.size or cb == 0 and ib == b.size):
            break  # counts of different sums: pycocotools loops forever; refused on ingest
    return out[:m]


@numba.njit(cache=True, nogil=True)
def _polygons_kernel(coords, part_offsets, row_parts, h, w):
    n = row_parts.size - 1
    offsets = np.zeros(n + 1, np.int64)
    counts = np.empty(max(16, 8 * n), np.uint32)
    box = np.empty(8)
    for r in range(n):
        p0, p1, hh, ww = row_parts[r], row_parts[r + 1], h[r], w[r]
        as_boxes = p1 > p0 and part_offsets[p0 + 1] - part_offsets[p0] == 4
        merged = np.full(1, hh * ww, np.uint32)  # no polygon: an empty mask
        for p in range(p0, p1):
            c0, length = part_offsets[p], part_offsets[p + 1] - part_offsets[p]
            if as_boxes:  # rleFrBbox: the box's corners as a polygon (fewer than 4 numbers: empty)
                if length >= 4:
                    xs, ys = coords[c0], coords[c0 + 1]
                    xe, ye = xs + coords[c0 + 2], ys + coords[c0 + 3]
                    box[0], box[1], box[2], box[3], box[4], box[5], box[6], box[7] = xs, ys, xs, ye, xe, ye, xe, ys
                part = poly_rle(box, 4 if length >= 4 else 0, hh, ww)
            else:
                part = poly_rle(coords[c0:c0 + length], length // 2, hh, ww)
            merged = part if p == p0 else union(merged, part)
        counts = reserve(counts, offsets[r], merged.size)
        counts[offsets[r]:offsets[r] + merged.size] = merged
        offsets[r + 1] = offsets[r] + merged.size
    return counts[:offsets[n]].copy(), offsets


def from_polygons(coords, part_offsets, row_parts, h, w):
    """``(counts, offsets)`` of each row's polygons as pycocotools ``annToRLE`` makes them (``frPyObjects`` then
    ``merge``): polygon ``p`` is ``coords[part_offsets[p]:part_offsets[p + 1]]`` (x, y, x, y, …), row ``r`` has the
    polygons ``row_parts[r]:row_parts[r + 1]``; the 4-number box form and the empty row as the module docstring."""
    return _polygons_kernel(np.ascontiguousarray(coords, np.float64), np.ascontiguousarray(part_offsets, np.int64),
                            np.ascontiguousarray(row_parts, np.int64), np.ascontiguousarray(h, np.int64),
                            np.ascontiguousarray(w, np.int64))


def from_boxes(boxes, h, w):
    """``(counts, offsets)`` of ``[x, y, w, h]`` boxes, one per row (pycocotools ``frBbox``)."""
    boxes = np.ascontiguousarray(boxes, np.float64).reshape(-1, 4)
    n = len(boxes)
    return from_polygons(boxes.reshape(-1), np.arange(n + 1, dtype=np.int64) * 4, np.arange(n + 1, dtype=np.int64),
                         h, w)


MAX_COORDINATE = 1e8  # |x|, |y| beyond: pycocotools' 32-bit ints overflow (and one segment would be 5e8 points)


@numba.njit(cache=True, nogil=True)
def _first_bad_polygon(coords, part_offsets, row_parts):
    for r in range(row_parts.size - 1):
        p0, p1 = row_parts[r], row_parts[r + 1]
        if p1 > p0 and part_offsets[p0 + 1] - part_offsets[p0] < 4:
            return r
        for p in range(p0, p1):
            if (part_offsets[p + 1] - part_offsets[p]) % 2:
                return r
            for c in range(part_offsets[p], part_offsets[p + 1]):
                if not abs(coords[c]) <= MAX_COORDINATE:
                    return r
    return -1


def first_bad_polygon(coords, part_offsets, row_parts) -> int:
    """The first row pycocotools refuses or reads wrongly, or -1: its first polygon has fewer than 4 numbers
    (pycocotools: "input type is not supported"), a polygon has an odd number of coordinates (pycocotools drops the
    last), or a coordinate is not finite or beyond :data:`MAX_COORDINATE`."""
    return int(_first_bad_polygon(np.ascontiguousarray(coords, np.float64),
                                  np.ascontiguousarray(part_offsets, np.int64), np.ascontiguousarray(row_parts, np.int64)))
