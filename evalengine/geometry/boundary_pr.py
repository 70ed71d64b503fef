"""Boundary precision–recall of partitions (Pont-Tuset & Marques, TPAMI 2015 §3.3 and §2.2; spec-segmentation §4.3,
§1.4): the BSDS boundary measure Fb over ``correspondPixels`` and the morphological approximation F̃b.

Two boundary grids, as the references:

* ``grid="pixel"`` — BSDS500 / SEISM HEAD (Dollár's ``edgesEvalImg``): ``thin(seg2bmap(S))`` against
  ``thin(seg2bmap(G_k))`` for every ground truth ``k``, tolerance ``0.0075 · diagonal``.
* ``grid="contour"`` — the CVPR-2013 SEISM ``fb.m`` behind the stored human results: ``seg2gridbmap`` maps of size
  ``(2h + 1) × (2w + 1)`` (one element per pair of 4-neighbouring pixels with different labels, no thinning), with
  ``correspondPixels``' default tolerance ``0.0075`` of that grid's diagonal.

Several ground truths combine as both do: a partition pixel counts when it matches a pixel of ANY ground truth
(``cnt_p``), recall counts are summed over the ground truths (``cnt_r`` of ``sum_r``).
"""

import numba
import numpy as np

from evalengine.errors import InputError, check_option
from evalengine.geometry.correspond import MAX_DIST, correspond_pixels
from evalengine.geometry.thinning import thin

GRIDS = ("pixel", "contour")
MORPH_TOLERANCE = 0.008  # spec §10: DAVIS's 0.8 % of the diagonal (the paper's text says 8 %)


def seg2bmap(labels: np.ndarray) -> np.ndarray:
    """BSDS ``seg2bmap``: a pixel is boundary when its label differs from its east, south or south-east neighbour
    (inside the image); the last row compares east only, the last column south only, the last pixel never."""
    seg = np.asarray(labels)
    b = np.zeros(seg.shape, np.bool_)
    b[:-1, :-1] = (seg[:-1, :-1] != seg[:-1, 1:]) | (seg[:-1, :-1] != seg[1:, :-1]) | (seg[:-1, :-1] != seg[1:, 1:])
    b[-1, :-1] = seg[-1, :-1] != seg[-1, 1:]
    b[:-1, -1] = seg[:-1, -1] != seg[1:, -1]
    return b


def seg2gridbmap(labels: np.ndarray) -> np.ndarray:
    """SEISM ``seg2gridbmap`` (no image border): the ``(2h + 1) × (2w + 1)`` contour grid, pixel ``(y, x)`` at
    ``(2y + 1, 2x + 1)``, an element between two 4-neighbours set when their labels differ; corners stay 0."""
    seg = np.asarray(labels)
    h, w = seg.shape
    grid = np.zeros((2 * h + 1, 2 * w + 1), np.bool_)
    grid[1::2, 2:-1:2] = seg[:, :-1] != seg[:, 1:]
    grid[2:-1:2, 1::2] = seg[:-1, :] != seg[1:, :]
    return grid


def boundary_map(labels: np.ndarray, grid: str = "pixel") -> np.ndarray:
    """The boundary map Fb compares for a label map: ``thin(seg2bmap)`` on the pixel grid, ``seg2gridbmap`` on
    the contour grid."""
    check_option("grid", grid, GRIDS)
    return thin(seg2bmap(labels)) if grid == "pixel" else seg2gridbmap(labels)


def boundary_counts(pred_labels: np.ndarray, gt_labels_list, tolerance: float = MAX_DIST,
                    grid: str = "pixel", outliers: str = "bsds", seed: int = 0) -> np.ndarray:
    """Fb's four counts ``[cnt_p, sum_p, cnt_r, sum_r]`` (int64) of a partition against its ground truths:
    partition boundary pixels matched by any ground truth, all partition boundary pixels, ground-truth pixels
    matched (summed over ground truths), all ground-truth pixels (summed)."""
    pred = boundary_map(pred_labels, grid)
    matched = np.zeros(pred.shape, np.bool_)
    cnt_r = sum_r = 0
    for k, gt_labels in enumerate(gt_labels_list):
        gt = boundary_map(gt_labels, grid)
        if gt.shape != pred.shape:
            raise InputError(f"boundary_counts: ground truth of shape {np.shape(gt_labels)}, partition of shape "
                             f"{np.shape(pred_labels)}")
        match1, match2 = correspond_pixels(pred, gt, tolerance, outliers=outliers, seed=seed + k)
        matched |= match1 > 0
        cnt_r += int(np.count_nonzero(match2))
        sum_r += int(np.count_nonzero(gt))
    return np.array([np.count_nonzero(matched), np.count_nonzero(pred), cnt_r, sum_r], np.int64)


def _precision_recall(counts, both_empty: tuple[float, float]):
    """``(F, P, R)`` from counts ``[..., 4]``: no ground-truth boundary gives ``P = 0, R = 1``, no partition
    boundary ``P = 1, R = 0``, neither ``both_empty``; F is 0 when ``P + R = 0``."""
    c = np.asarray(counts, np.float64)
    cnt_p, sum_p, cnt_r, sum_r = c[..., 0], c[..., 1], c[..., 2], c[..., 3]
    neither = (sum_p == 0) & (sum_r == 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        precision = np.where(sum_r == 0, 0.0, np.where(sum_p == 0, 1.0, cnt_p / sum_p))
        recall = np.where(sum_r == 0, 1.0, np.where(sum_p == 0, 0.0, cnt_r / sum_r))
        precision, recall = np.where(neither, both_empty[0], precision), np.where(neither, both_empty[1], recall)
        f = np.where(precision + recall == 0, 0.0, 2 * precision * recall / (precision + recall))
    return f, precision, recall


def boundary_precision_recall(counts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(F, P, R)`` of Fb counts (one row per pair, or pooled sums) with SEISM's rules: no ground-truth boundary
    gives ``R = 1, P = 0`` (even with no partition boundary: two identical single-region partitions score F = 0,
    spec §10.12); else no partition boundary ``R = 0, P = 1``."""
    return _precision_recall(counts, (0.0, 1.0))


@numba.njit(cache=True, nogil=True)
def _covered(points, other, r):
    """How many boundary pixels ``points`` (rows of (y, x)) lie within the disc of radius ``r`` of a pixel set in
    ``other``: ``|points ∧ dilate(other, disk(r))|``."""
    h, w = other.shape
    rr = int(r)
    hit = 0
    for p in range(points.shape[0]):
        y, x = points[p, 0], points[p, 1]
        found = False
        for dy in range(-rr, rr + 1):
            if found:
                break
            yy = y + dy
            if yy < 0 or yy >= h:
                continue
            for dx in range(-rr, rr + 1):
                xx = x + dx
                if 0 <= xx < w and dx * dx + dy * dy <= r * r and other[yy, xx]:
                    found = True
                    break
        hit += found
    return hit


def morph_radius(shape, tolerance: float = MORPH_TOLERANCE) -> float:
    """The dilation radius of F̃b (DAVIS ``db_eval_boundary``): ``tolerance`` pixels when ≥ 1, else
    ``ceil(tolerance · √(h² + w²))``; ``shape = (h, w)``, numbers or arrays of them."""
    h, w = (np.asarray(v, np.float64) for v in shape)
    radius = np.full(np.broadcast(h, w).shape, float(tolerance)) if tolerance >= 1 else \
        np.ceil(tolerance * np.sqrt(h * h + w * w))
    return float(radius) if radius.ndim == 0 else radius


def morph_counts_from_maps(pred_bmap: np.ndarray, gt_bmap: np.ndarray,
                           tolerance: float = MORPH_TOLERANCE) -> np.ndarray:
    """F̃b's counts ``[cnt_p, sum_p, cnt_r, sum_r]`` of two boundary maps: the partition's pixels within the disc
    ``disk(r) = {dx² + dy² ≤ r²}`` of a ground-truth pixel, all of them, and the same the other way round."""
    pred_bmap, gt_bmap = np.asarray(pred_bmap, np.bool_), np.asarray(gt_bmap, np.bool_)
    r = morph_radius(pred_bmap.shape, tolerance)
    pred_pts, gt_pts = np.argwhere(pred_bmap), np.argwhere(gt_bmap)
    return np.array([_covered(pred_pts, gt_bmap, r), len(pred_pts), _covered(gt_pts, pred_bmap, r), len(gt_pts)],
                    np.int64)


def morph_boundary_counts(pred_labels: np.ndarray, gt_labels: np.ndarray,
                          tolerance: float = MORPH_TOLERANCE) -> np.ndarray:
    """F̃b's counts (spec §1.4) of two label maps or two boolean masks (a mask is the partition {object,
    background}): ``seg2bmap`` of each, no thinning, dilation by a disc of radius ``ceil(tolerance · diagonal)``."""
    return morph_counts_from_maps(seg2bmap(pred_labels), seg2bmap(gt_labels), tolerance)


def morph_precision_recall(counts) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """``(F̃b, P̃, R̃)`` of F̃b counts with DAVIS's rules: both maps empty give ``P = R = 1``; an empty partition
    map ``P = 1, R = 0``; an empty ground-truth map ``P = 0, R = 1``."""
    return _precision_recall(counts, (1.0, 1.0))
