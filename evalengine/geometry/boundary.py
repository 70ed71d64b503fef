"""Boundary IoU (Cheng et al., CVPR 2021) as the authors' boundary-iou-api computes it, over run lengths.

The authors (``boundary_iou/utils/boundary_utils.py`` ``mask_to_boundary``): ``d = int(round(ratio · √(h² + w²)))``
(Python's round: half to even, so 2.5 → 2 and 3.5 → 4), at least 1; the mask padded by one 0 pixel, eroded
``d`` times by a 3 × 3 square (``cv2.erode``), cropped back; the boundary is the mask minus its erosion. A pixel thus
survives the erosion when the ``(2d + 1)²`` square around it lies inside the image and inside the mask (an image no
taller or wider than ``2d`` erodes to nothing: its boundary is the whole mask). Their ``computeBoundaryIoU`` takes
pycocotools' IoU of the masks and of the boundaries and keeps the smaller for a regular ground truth; a crowd
ground truth keeps the mask's (intersection over detection area). faster-coco-eval rounds the dilation in single
precision and differs on images no taller than twice the dilation; we follow the authors.

Here the erosion runs on each mask's per-column foreground intervals, no raster: the square erosion is separable,
a vertical one (each interval loses ``d`` pixels at both ends) then a horizontal one, the intersection of ``2d + 1``
neighbouring columns, taken as two overlapping windows of ``P`` columns (``P`` the largest power of two ≤ ``2d + 1``)
built by doubling: ``O(runs · log d)`` per mask.
"""

import numba
import numpy as np

from evalengine.geometry.masks import mask_iou_blocks, spans
from evalengine.io.rle import area, reserve, to_bbox

DILATION_RATIO = 0.02


def dilation(h, w, ratio: float = DILATION_RATIO) -> np.ndarray:
    """The authors' ``int(round(ratio * sqrt(h**2 + w**2)))``, at least 1, per image size (int64)."""
    h, w = np.asarray(h, np.int64), np.asarray(w, np.int64)
    return np.maximum(np.round(ratio * np.sqrt((h * h + w * w).astype(np.float64))), 1).astype(np.int64)


@numba.njit(cache=True, nogil=True)
def _column_intervals(counts, r0, r1, h):
    """The foreground of the runs ``counts[r0:r1]`` as per-column ``[y0, y1)`` intervals, touching ones joined:
    ``(x0, ptr, lo, hi)``, local column ``x`` (image column ``x0 + x``) holding ``ptr[x]:ptr[x + 1]``."""
    n_max = (r1 - r0) // 2 + 1
    p, first, last = np.int64(0), np.int64(-1), np.int64(-1)
    for j in range(r0, r1):
        if (j - r0) % 2 == 1 and counts[j] > 0:
            first = p // h if first < 0 else first
            last = (p + counts[j] - 1) // h
        p += counts[j]
    nc = last - first + 1 if first >= 0 else 0
    col, lo, hi = np.empty(n_max + nc, np.int64), np.empty(n_max + nc, np.int64), np.empty(n_max + nc, np.int64)
    n, p = 0, np.int64(0)
    for j in range(r0, r1):
        q = p + counts[j]
        while (j - r0) % 2 == 1 and p < q:
            x = p // h
            end = min(q, (x + 1) * h)
            if n > 0 and col[n - 1] == x - first and hi[n - 1] == p - x * h:
                hi[n - 1] = end - x * h
            else:
                col[n], lo[n], hi[n] = x - first, p - x * h, end - x * h
                n += 1
            p = end
        p = q
    ptr = np.zeros(nc + 1, np.int64)
    for i in range(n):
        ptr[col[i] + 1] += 1
    for x in range(nc):
        ptr[x + 1] += ptr[x]
    return max(first, 0), ptr, lo[:n].copy(), hi[:n].copy()


@numba.njit(cache=True, nogil=True)
def _intersect(ptr, lo, hi, xa, xb, out_lo, out_hi, n):
    """Append the intersection of columns ``xa`` and ``xb`` (sorted disjoint intervals); the new count."""
    i, i1, j, j1 = ptr[xa], ptr[xa + 1], ptr[xb], ptr[xb + 1]
    while i < i1 and j < j1:
        a, b = max(lo[i], lo[j]), min(hi[i], hi[j])
        if a < b:
            out_lo[n], out_hi[n] = a, b
            n += 1
        if hi[i] < hi[j]:
            i += 1
        else:
            j += 1
    return n


@numba.njit(cache=True, nogil=True)
def _windows(ptr, lo, hi, first, span, stride):
    """Per column ``x``: the intersection of columns ``x + first`` and ``x + first + span`` when both exist (stride:
    ``x`` runs over columns whose window fits), else empty."""
    nc = ptr.size - 1
    out_ptr = np.zeros(nc + 1, np.int64)
    out_lo, out_hi = np.empty(2 * lo.size + 1, np.int64), np.empty(2 * lo.size + 1, np.int64)
    n = 0
    for x in range(nc):
        if x + first >= 0 and x + first + span < nc and x + first + stride < nc:
            n = _intersect(ptr, lo, hi, x + first, x + first + span, out_lo, out_hi, n)
        out_ptr[x + 1] = n
    return out_ptr, out_lo[:n].copy(), out_hi[:n].copy()


@numba.njit(cache=True, nogil=True, inline="always")
def _emit(out, used, start, last_end, s, e):
    """Append the foreground ``[s, e)`` (flat, after ``last_end``) to the runs ``out[start:used]``."""
    if used > start and s == last_end:
        out[used - 1] += e - s
    else:
        out[used], out[used + 1] = s - last_end, e - s
        used += 2
    return used, e


@numba.njit(cache=True, nogil=True)
def band(counts, r0, r1, h, w, d, out, used):
    """The authors' boundary of the mask ``counts[r0:r1]`` (``h × w``, dilation ``d``), appended to ``out`` from
    ``used`` as COCO runs (``rleEncode``'s: no trailing empty run); returns ``(out, used)``."""
    x0, ptr, lo, hi = _column_intervals(counts, r0, r1, h)
    nc = ptr.size - 1
    v_ptr, v_lo, v_hi = np.zeros(nc + 1, np.int64), np.empty(lo.size, np.int64), np.empty(lo.size, np.int64)
    n = 0
    for x in range(nc):  # vertical erosion: the image's top and bottom are background
        for i in range(ptr[x], ptr[x + 1]):
            if hi[i] - lo[i] > 2 * d:
                v_lo[n], v_hi[n] = lo[i] + d, hi[i] - d
                n += 1
        v_ptr[x + 1] = n
    a_ptr, a_lo, a_hi = v_ptr, v_lo[:n], v_hi[:n]
    width = 1  # a_*: per column x, what columns x .. x + width - 1 all have
    while 2 * width <= 2 * d + 1:
        a_ptr, a_lo, a_hi = _windows(a_ptr, a_lo, a_hi, 0, width, 0)
        width *= 2
    # horizontal erosion: columns x - d .. x + d, all inside the mask's columns (the image's sides are background)
    e_ptr, e_lo, e_hi = _windows(a_ptr, a_lo, a_hi, -d, 2 * d + 1 - width, 2 * d)
    out = reserve(out, used, 2 * (lo.size + e_lo.size) + 1)
    start, last_end = used, np.int64(0)
    for x in range(nc):  # the band: each mask interval minus the eroded ones inside it
        base, j = (x0 + x) * h, e_ptr[x]
        for i in range(ptr[x], ptr[x + 1]):
            y = lo[i]
            while j < e_ptr[x + 1] and e_lo[j] < hi[i]:
                if e_lo[j] > y:
                    used, last_end = _emit(out, used, start, last_end, base + y, base + e_lo[j])
                y = e_hi[j]
                j += 1
            if hi[i] > y:
                used, last_end = _emit(out, used, start, last_end, base + y, base + hi[i])
    if used == start or last_end < h * w:
        out[used] = h * w - last_end
        used += 1
    return out, used


@numba.njit(cache=True, nogil=True)
def _bands_kernel(counts, offsets, h, w, d):
    n = offsets.size - 1
    out, out_offsets = np.empty(max(16, counts.size), np.uint32), np.zeros(n + 1, np.int64)
    for r in range(n):
        out, used = band(counts, offsets[r], offsets[r + 1], h[r], w[r], d[r], out, out_offsets[r])
        out_offsets[r + 1] = used
    return out[:out_offsets[n]].copy(), out_offsets


def boundaries(counts, offsets, h, w, dilation_ratio: float = DILATION_RATIO):
    """``(counts, offsets)`` of each mask's boundary band (the authors' ``mask_to_boundary``)."""
    h, w = np.asarray(h, np.int64), np.asarray(w, np.int64)
    return _bands_kernel(np.asarray(counts, np.uint32), np.asarray(offsets, np.int64), h, w,
                         dilation(h, w, dilation_ratio))


def boundary_iou(dt, gt, iscrowd, dilation_ratio: float = DILATION_RATIO) -> np.ndarray:
    """The authors' ``computeBoundaryIoU`` matrix ``(m, n)`` of two mask sets of one image size, each ``(counts,
    offsets, h, w)``."""
    sides = []
    for counts, offsets, h, w in (dt, gt):
        counts, offsets = np.asarray(counts, np.uint32), np.asarray(offsets, np.int64)
        band_counts, band_offsets = boundaries(counts, offsets, h, w, dilation_ratio)
        sides.append((counts, spans(offsets), to_bbox(counts, offsets, h, w), area(counts, offsets), band_counts,
                      spans(band_offsets)))
    (dc, ds, db, da, dbc, dbs), (gc, gs, gb, _, gbc, gbs) = sides
    m, n = len(ds), len(gs)
    values, _ = mask_iou_blocks(dc, ds, db, da, gc, gs, gb, np.asarray(iscrowd, np.bool_), np.zeros(1, np.int64),
                                np.full(1, n), np.zeros(1, np.int64), np.full(1, m), 0, 1, (dbc, dbs, gbc, gbs))
    return values.reshape(m, n)
