"""Keypoint similarity: pycocotools ``COCOeval.computeOks``, bit for bit, as the similarity step of matching.

For a ground truth of ``k`` keypoints ``(xg, yg, vg)``, box ``(x, y, w, h)`` and ``area``, and a detection's
keypoints ``(xd, yd)``, with ``vars = (2·sigma)²`` per keypoint::

    e = (dx² + dy²) / vars / (area + eps) / 2          (eps = np.spacing(1))
    OKS = sum(exp(-e)) / len(e)

over the ground truth's visible keypoints (``vg > 0``): ``dx = xd - xg``; when none is visible, over all ``k``, the
distance to the region ``[x - w, x + 2w] × [y - h, y + 2h]`` (0 inside). As pycocotools, the sum is NumPy's pairwise
summation (8 accumulators; :func:`evalengine.numeric.pairwise_sum`) and ``exp`` NumPy's own (a vectorised ``np.exp`` between the two
kernels, not the C library's, which differs from it in the last bit): the values are pycocotools' to the bit.
"""

import numba
import numpy as np

from evalengine.geometry.box_iou import block_offsets
from evalengine.numeric import pairwise_sum

# pycocotools Params('keypoints').kpt_oks_sigmas: COCO's 17 person keypoints
COCO_PERSON_SIGMAS = tuple(float(s) for s in np.array(
    [.26, .25, .25, .35, .35, .79, .79, .72, .72, .62, .62, 1.07, 1.07, .87, .87, .89, .89]) / 10.0)
_EPS = float(np.spacing(1))


def keypoint_vars(sigmas) -> np.ndarray:
    """pycocotools' ``vars = (sigmas * 2)**2``."""
    return (np.asarray(sigmas, np.float64) * 2) ** 2


@numba.njit(cache=True, nogil=True, inline="always")
def _visible(kpts, k0, k1) -> int:
    """How many of the keypoints ``kpts[k0:k1]`` are visible (``v > 0``)."""
    n = 0
    for p in range(k0 + 2, k1, 3):
        n += kpts[p] > 0
    return n


@numba.njit(cache=True, nogil=True)
def _exponents(dt_kpts, dt_span, gt_kpts, gt_span, gt_box, gt_area, vars_, gt_vars, gt_start, gt_len, dt_start,
               dt_len, lo, hi):
    """Every pair's ``-e`` terms, concatenated; where each pair's terms start (``n_pairs + 1``); the blocks'
    offsets."""
    offsets = block_offsets(gt_len, dt_len, lo, hi)
    starts = np.zeros(offsets[-1] + 1, np.int64)
    for k in range(lo, hi):  # how many terms each pair has: the visible keypoints, else all
        for g in range(gt_start[k], gt_start[k] + gt_len[k]):
            visible = _visible(gt_kpts, gt_span[g, 0], gt_span[g, 1])
            for d in range(dt_len[k]):
                starts[offsets[k - lo] + d * gt_len[k] + g - gt_start[k] + 1] = (
                    visible if visible > 0 else gt_vars[g, 1] - gt_vars[g, 0])
    starts = np.cumsum(starts)
    e = np.empty(starts[-1])
    for k in range(lo, hi):
        for g in range(gt_start[k], gt_start[k] + gt_len[k]):
            x, y, w, h = gt_box[g, 0], gt_box[g, 1], gt_box[g, 2], gt_box[g, 3]
            x0, x1, y0, y1 = x - w, x + w * 2, y - h, y + h * 2
            g0, v0 = gt_span[g, 0], gt_vars[g, 0]
            region = _visible(gt_kpts, g0, gt_span[g, 1]) == 0
            denominator = gt_area[g] + _EPS
            for d in range(dt_len[k]):
                out = starts[offsets[k - lo] + d * gt_len[k] + g - gt_start[k]]
                d0 = dt_span[dt_start[k] + d, 0]
                for j in range(gt_vars[g, 1] - v0):
                    xd, yd = dt_kpts[d0 + 3 * j], dt_kpts[d0 + 3 * j + 1]
                    if region:
                        dx = max(0.0, x0 - xd) + max(0.0, xd - x1)
                        dy = max(0.0, y0 - yd) + max(0.0, yd - y1)
                    elif gt_kpts[g0 + 3 * j + 2] > 0:
                        dx, dy = xd - gt_kpts[g0 + 3 * j], yd - gt_kpts[g0 + 3 * j + 1]
                    else:
                        continue
                    e[out] = -((dx * dx + dy * dy) / vars_[v0 + j] / denominator / 2)
                    out += 1
    return e, starts, offsets


@numba.njit(cache=True, nogil=True)
def _means(terms, starts):
    values = np.empty(starts.shape[0] - 1)
    for p in range(values.shape[0]):
        values[p] = pairwise_sum(terms, starts[p], starts[p + 1] - starts[p]) / (starts[p + 1] - starts[p])
    return values


def oks_blocks(dt_kpts, dt_span, gt_kpts, gt_span, gt_box, gt_area, vars_, gt_vars, gt_start, gt_len, dt_start,
               dt_len, lo, hi):
    """The keypoint counterpart of :func:`evalengine.geometry.box_iou.box_iou_blocks`: ``(values, offsets)``, group
    ``k`` in ``[lo, hi)`` having its ``dt_len[k] × gt_len[k]`` OKS matrix, row-major by detection. Row ``r``'s
    ``[x, y, v, …]`` are ``kpts[span[r, 0]:span[r, 1]]`` (a ground truth's may be empty: no visible keypoint);
    ``gt_box``: the ground truths' ``x, y, w, h``; a ground truth's ``vars`` (:func:`keypoint_vars`) are
    ``vars_[gt_vars[g, 0]:gt_vars[g, 1]]``, one per keypoint, and a detection has as many keypoints."""
    e, starts, offsets = _exponents(dt_kpts, dt_span, gt_kpts, gt_span, gt_box, gt_area, vars_, gt_vars, gt_start,
                                    gt_len, dt_start, dt_len, lo, hi)
    return _means(np.exp(e), starts), offsets
