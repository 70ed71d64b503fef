"""F̃b of mask pairs over run lengths (Pont-Tuset & Marques, TPAMI 2015 §2.2; spec-segmentation §1.4 and §9.2, the
object match table's F̃b counts): the counts of :func:`evalengine.geometry.boundary_pr.morph_boundary_counts` for every
(proposal, object) pair of a group, without a raster of the image set.

Per mask, its ``seg2bmap`` boundary ``B`` (a mask is the partition {object, background}; the image border is never a
boundary) and ``D``, ``B`` dilated by the disc ``{dx² + dy² ≤ r²}`` of DAVIS ``db_eval_boundary``
(:func:`evalengine.geometry.boundary_pr.morph_radius`), both kept as COCO runs over the whole image. Each mask is
rasterised over its box grown by one pixel (a boundary pixel lies within one of the mask), the dilation over that
window grown by ``r``: one window per mask at a time, at most the image. A pair's counts are then run-length
intersections (:func:`evalengine.geometry.masks.intersection_union`): ``bp_hit = |B_p ∧ D_o|``, ``bp_tot = |B_p|``,
``bg_hit = |B_o ∧ D_p|``, ``bg_tot = |B_o|``.
"""

import numba
import numpy as np

from evalengine.geometry.boundary import _emit
from evalengine.geometry.boundary_pr import MORPH_TOLERANCE, morph_radius
from evalengine.geometry.box_iou import block_offsets
from evalengine.geometry.masks import intersection_union
from evalengine.io.rle import reserve


@numba.njit(cache=True, nogil=True)
def _mask_window(counts, r0, r1, h, w):
    """The mask ``counts[r0:r1]`` rasterised over its box grown by one pixel (clipped to the image): ``(x0, y0,
    raster)``, ``raster[x - x0, y - y0]``; an empty raster for an empty mask."""
    xs, ys, xe, ye, p = w, h, -1, -1, np.int64(0)
    for j in range(r0, r1):
        c = np.int64(counts[j])
        if (j - r0) % 2 == 1 and c > 0:
            x_start, x_end = p // h, (p + c - 1) // h
            xs, xe = min(xs, x_start), max(xe, x_end)
            ys = min(ys, p % h) if x_start == x_end else 0
            ye = max(ye, (p + c - 1) % h) if x_start == x_end else h - 1
        p += c
    if xe < 0:
        return np.int64(0), np.int64(0), np.zeros((0, 0), np.bool_)
    x0, y0, x1, y1 = max(xs - 1, 0), max(ys - 1, 0), min(xe + 1, w - 1), min(ye + 1, h - 1)
    raster = np.zeros((x1 - x0 + 1, y1 - y0 + 1), np.bool_)
    p = 0
    for j in range(r0, r1):
        c = np.int64(counts[j])
        if (j - r0) % 2 == 1:
            for q in range(p, p + c):
                raster[q // h - x0, q % h - y0] = True
        p += c
    return np.int64(x0), np.int64(y0), raster


@numba.njit(cache=True, nogil=True)
def _seg2bmap(raster, x0, y0, h, w):
    """``seg2bmap`` of the window (pixels outside it are background): a pixel differs from its east, south or
    south-east neighbour inside the image."""
    nx, ny = raster.shape
    out = np.zeros((nx, ny), np.bool_)
    for i in range(nx):
        for k in range(ny):
            v = raster[i, k]
            east = x0 + i + 1 < w
            south = y0 + k + 1 < h
            e = raster[i + 1, k] if i + 1 < nx else False
            s = raster[i, k + 1] if k + 1 < ny else False
            se = raster[i + 1, k + 1] if i + 1 < nx and k + 1 < ny else False
            out[i, k] = (east and v != e) or (south and v != s) or (east and south and v != se)
    return out


@numba.njit(cache=True, nogil=True)
def _runs(raster, x0, y0, h, w, out, used):
    """Append the window ``raster`` as COCO runs over the ``h × w`` image (column-major); ``(out, used, pixels)``."""
    out = reserve(out, used, 2 * raster.size + 2)
    start, last_end, pixels = used, np.int64(0), 0
    nx, ny = raster.shape
    for i in range(nx):
        k = 0
        while k < ny:
            if not raster[i, k]:
                k += 1
                continue
            k1 = k
            while k1 < ny and raster[i, k1]:
                k1 += 1
            base = (x0 + i) * h + y0
            used, last_end = _emit(out, used, start, last_end, base + k, base + k1)
            pixels += k1 - k
            k = k1
    if used == start or last_end < h * w:
        out[used] = h * w - last_end
        used += 1
    return out, used, pixels


@numba.njit(cache=True, nogil=True)
def _dilate(bmap, x0, y0, h, w, r):
    """``bmap`` dilated by the disc of radius ``r`` (``dx² + dy² ≤ r²``, as ``boundary_pr._covered``), over the
    window grown by ``floor(r)`` and clipped to the image: ``(x0, y0, raster)``, column by column from interval
    ends."""
    rr = int(r)
    reach = np.zeros(2 * rr + 1, np.int64)  # the largest dy of each dx in -rr..rr
    for dx in range(-rr, rr + 1):
        for dy in range(rr + 1):
            if dx * dx + dy * dy <= r * r:
                reach[dx + rr] = dy
    nx, ny = bmap.shape
    dx0, dy0 = max(x0 - rr, 0), max(y0 - rr, 0)
    dx1, dy1 = min(x0 + nx - 1 + rr, w - 1), min(y0 + ny - 1 + rr, h - 1)
    mx, my = dx1 - dx0 + 1, dy1 - dy0 + 1
    edges = np.zeros((mx, my + 1), np.int64)
    for i in range(nx):
        for k in range(ny):
            if not bmap[i, k]:
                continue
            x, y = x0 + i, y0 + k
            for dx in range(-rr, rr + 1):
                xx = x + dx
                if xx < 0 or xx >= w:
                    continue
                a, b = max(y - reach[dx + rr], dy0), min(y + reach[dx + rr], dy1)
                edges[xx - dx0, a - dy0] += 1
                edges[xx - dx0, b - dy0 + 1] -= 1
    raster = np.zeros((mx, my), np.bool_)
    for i in range(mx):
        depth = 0
        for k in range(my):
            depth += edges[i, k]
            raster[i, k] = depth > 0
    return dx0, dy0, raster


@numba.njit(cache=True, nogil=True)
def _boundaries_kernel(counts, span, h, w, radius):
    n = span.shape[0]
    b_out, d_out = np.empty(max(16, 2 * n), np.uint32), np.empty(max(16, 2 * n), np.uint32)
    b_span, d_span = np.zeros((n, 2), np.int64), np.zeros((n, 2), np.int64)
    b_used, d_used = 0, 0
    total = np.zeros(n, np.int64)
    window = np.zeros((n, 4), np.int64)  # the dilation's window x0, y0, x1, y1 (x1 < x0: empty)
    for m in range(n):
        x0, y0, raster = _mask_window(counts, span[m, 0], span[m, 1], h[m], w[m])
        bmap = _seg2bmap(raster, x0, y0, h[m], w[m])
        b_span[m, 0], d_span[m, 0] = b_used, d_used
        b_out, b_used, total[m] = _runs(bmap, x0, y0, h[m], w[m], b_out, b_used)
        window[m, 2] = -1
        if total[m]:
            dx0, dy0, dilated = _dilate(bmap, x0, y0, h[m], w[m], radius[m])
            d_out, d_used, _ = _runs(dilated, dx0, dy0, h[m], w[m], d_out, d_used)
            window[m, 0], window[m, 1] = dx0, dy0
            window[m, 2], window[m, 3] = dx0 + dilated.shape[0] - 1, dy0 + dilated.shape[1] - 1
        else:
            d_out, d_used, _ = _runs(bmap, x0, y0, h[m], w[m], d_out, d_used)
        b_span[m, 1], d_span[m, 1] = b_used, d_used
    return b_out[:b_used].copy(), b_span, d_out[:d_used].copy(), d_span, total, window


def mask_boundaries(counts, span, h, w, tolerance: float = MORPH_TOLERANCE) -> tuple:
    """Each mask's F̃b sides: ``(b_counts, b_span, d_counts, d_span, b_total, window)`` — its boundary's runs, the
    dilated boundary's, the boundary's pixel count and the dilation's window ``(x0, y0, x1, y1)`` (inclusive; ``x1 <
    x0`` when empty). ``counts, span``: the masks' runs (:func:`evalengine.geometry.masks.spans`); ``h, w``: each
    mask's size."""
    h, w = np.asarray(h, np.int64), np.asarray(w, np.int64)
    radius = np.asarray(morph_radius((h, w), tolerance), np.float64).reshape(-1)
    return _boundaries_kernel(np.asarray(counts, np.uint32), np.asarray(span, np.int64), h, w, radius)


@numba.njit(cache=True, nogil=True, inline="always")
def _hit(a_runs, a_span, a, b_runs, b_span, b):
    """``|A ∧ B|`` of row ``a`` of one side's runs and row ``b`` of the other's."""
    return intersection_union(a_runs, a_span[a, 0], a_span[a, 1], b_runs, b_span[b, 0], b_span[b, 1])[0]


@numba.njit(cache=True, nogil=True)
def boundary_count_blocks(dt_sides, gt_sides, gt_start, gt_len, dt_start, dt_len, lo, hi):
    """F̃b's counts ``[bp_hit, bp_tot, bg_hit, bg_tot]`` (int64, one row per pair) laid out as
    :func:`evalengine.geometry.masks.mask_iou_blocks` lays its values: ``(counts, offsets)``. ``*_sides``: what
    :func:`mask_boundaries` gives each side; a pair whose dilation windows do not meet has no hit."""
    db, db_span, dd, dd_span, d_total, d_window = dt_sides
    gb, gb_span, gd, gd_span, g_total, g_window = gt_sides
    offsets = block_offsets(gt_len, dt_len, lo, hi)
    counts = np.zeros((offsets[-1], 4), np.int64)
    for k in range(lo, hi):
        at, g0, d0, ng = offsets[k - lo], gt_start[k], dt_start[k], gt_len[k]
        for d in range(d0, d0 + dt_len[k]):
            for g in range(g0, g0 + ng):
                i = at + (d - d0) * ng + g - g0
                counts[i, 1], counts[i, 3] = d_total[d], g_total[g]
                a, b = d_window[d], g_window[g]
                if a[0] <= b[2] and b[0] <= a[2] and a[1] <= b[3] and b[1] <= a[3]:
                    counts[i, 0] = _hit(db, db_span, d, gd, gd_span, g)
                    counts[i, 2] = _hit(gb, gb_span, g, dd, dd_span, d)
    return counts, offsets
