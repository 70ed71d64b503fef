"""Mask similarity over run lengths (pycocotools ``maskApi.c`` ``rleIou``), no rasters.

Masks are the flat layout of :mod:`evalengine.io.rle` (``counts`` uint32, and where each row's runs are). The
intersection and union are one walk over both rows' runs; for a crowd ground truth the union is the detection's
area (intersection over detection area); an empty intersection gives 0 (``u = 1``). As ``rleIou`` does, a pair is
only walked when the masks' boxes (``rleToBbox``) overlap (``bbIou > 0``): it changes no value, only the time.

Sizes: pycocotools gives -1 to a pair of different ``h × w`` whose boxes overlap (and 0 to one whose boxes do not).
The ingest refuses masks whose size differs from their image's, so the matching kernels (:func:`mask_iou_blocks`)
never see such a pair and take no sizes; :func:`iou`, the reference-shaped wrapper, reproduces the -1.
"""

import numba
import numpy as np

from evalengine.geometry.box_iou import OPENIMAGES, block_offsets, coco_box_iou, pair_iou
from evalengine.io.rle import area, to_bbox


@numba.njit(cache=True, nogil=True, inline="always")
def intersection_union(dt_counts, d0, d1, gt_counts, g0, g1):
    """``(intersection, union)`` pixels of the runs ``dt_counts[d0:d1]`` and ``gt_counts[g0:g1]`` (``rleIou``'s
    walk; the counts must sum to the same ``h·w``)."""
    ca, cb = np.int64(dt_counts[d0]), np.int64(gt_counts[g0])
    va = vb = False
    a, b, inter, uni, ct = d0 + 1, g0 + 1, np.int64(0), np.int64(0), np.int64(1)
    while ct > 0:
        c = min(ca, cb)
        if va or vb:
            uni += c
            if va and vb:
                inter += c
        ct = 0
        ca -= c
        if not ca and a < d1:
            ca, va, a = np.int64(dt_counts[a]), not va, a + 1
        ct += ca
        cb -= c
        if not cb and b < g1:
            cb, vb, b = np.int64(gt_counts[b]), not vb, b + 1
        ct += cb
        if c == 0 and (ca == 0 and a == d1 or cb == 0 and b == g1):
            break  # counts of different sums: pycocotools loops forever; refused on ingest
    return inter, uni


@numba.njit(cache=True, nogil=True, inline="always")
def rle_iou(dt_counts, d0, d1, gt_counts, g0, g1, crowd, dt_area):
    """pycocotools ``rleIou`` of one (detection, ground truth) pair of the same size, without the box pre-check;
    ``dt_area``: the detection's ``rleArea``, the union when ``crowd``."""
    inter, uni = intersection_union(dt_counts, d0, d1, gt_counts, g0, g1)
    if inter == 0:
        uni = 1
    elif crowd:
        uni = dt_area
    return inter / uni


@numba.njit(cache=True, nogil=True, inline="always")
def boxes_overlap(d, g) -> bool:
    """``rleIou``'s pre-check: ``bbIou`` of the two masks' boxes is positive."""
    return coco_box_iou(d[0], d[1], d[2], d[3], g[0], g[1], g[2], g[3], False) > 0.0


@numba.njit(cache=True, nogil=True, inline="always")
def boundary_pair_iou(mask_iou, dt_band, d0, d1, gt_band, g0, g1, crowd):
    """The boundary IoU of a pair (boundary-iou-api ``computeBoundaryIoU``) from its mask IoU and its boundary bands
    (:func:`evalengine.geometry.boundary.boundaries`): the smaller of the two IoUs, the mask's for a crowd ground
    truth."""
    if crowd:
        return mask_iou
    inter, union = intersection_union(dt_band, d0, d1, gt_band, g0, g1)
    return min(mask_iou, inter / union if inter else 0.0)


@numba.njit(cache=True, nogil=True)
def mask_iou_blocks(dt_counts, dt_span, dt_box, dt_area, gt_counts, gt_span, gt_box, gt_crowd,
                    gt_start, gt_len, dt_start, dt_len, lo, hi, bands=None):
    """The mask counterpart of :func:`evalengine.geometry.box_iou.box_iou_blocks`: ``(values, offsets)``, group
    ``k`` in ``[lo, hi)`` having its ``dt_len[k] × gt_len[k]`` IoU matrix, row-major by detection. Row ``r``'s runs
    are ``counts[span[r, 0]:span[r, 1]]`` (:func:`spans`: rows may be reordered without moving the counts);
    ``*_box``: :func:`evalengine.io.rle.to_bbox`; ``dt_area``: :func:`evalengine.io.rle.area`. With ``bands =
    (dt_band, dt_band_span, gt_band, gt_band_span)``, the boundary IoU (:func:`boundary_pair_iou`; a band lies in
    its mask's box, so the pre-check holds for it too)."""
    offsets = block_offsets(gt_len, dt_len, lo, hi)
    values = np.zeros(offsets[-1])
    for k in range(lo, hi):
        at, g0, d0, ng = offsets[k - lo], gt_start[k], dt_start[k], gt_len[k]
        for d in range(d0, d0 + dt_len[k]):
            for g in range(g0, g0 + ng):
                if not boxes_overlap(dt_box[d], gt_box[g]):
                    continue
                value = rle_iou(dt_counts, dt_span[d, 0], dt_span[d, 1], gt_counts, gt_span[g, 0], gt_span[g, 1],
                                gt_crowd[g], dt_area[d])
                if bands is not None:
                    dt_band, dt_band_span, gt_band, gt_band_span = bands
                    value = boundary_pair_iou(value, dt_band, dt_band_span[d, 0], dt_band_span[d, 1], gt_band,
                                              gt_band_span[g, 0], gt_band_span[g, 1], gt_crowd[g])
                values[at + (d - d0) * ng + g - g0] = value
    return values, offsets


def spans(offsets) -> np.ndarray:
    """``(n, 2)`` int64 ``[start, end)`` of each row's runs from ``offsets`` (``n + 1``)."""
    offsets = np.asarray(offsets, np.int64)
    return np.ascontiguousarray(np.stack([offsets[:-1], offsets[1:]], axis=1))


@numba.njit(cache=True, nogil=True)
def _iou_matrix(dt_counts, dt_span, dt_box, dt_area, dt_hw, gt_counts, gt_span, gt_box, gt_crowd, gt_hw):
    out = np.zeros((dt_span.shape[0], gt_span.shape[0]))
    for d in range(dt_span.shape[0]):
        for g in range(gt_span.shape[0]):
            if not boxes_overlap(dt_box[d], gt_box[g]):
                continue
            if dt_hw[d, 0] != gt_hw[g, 0] or dt_hw[d, 1] != gt_hw[g, 1]:
                out[d, g] = -1.0
                continue
            out[d, g] = rle_iou(dt_counts, dt_span[d, 0], dt_span[d, 1], gt_counts, gt_span[g, 0], gt_span[g, 1],
                                gt_crowd[g], dt_area[d])
    return out


def iou(dt, gt, iscrowd) -> np.ndarray:
    """pycocotools ``maskUtils.iou(d, g, iscrowd)`` of two mask sets, each ``(counts, offsets, h, w)``: the ``(m,
    n)`` matrix, -1 for a pair of different sizes whose boxes overlap."""
    sides = []
    for counts, offsets, h, w in (dt, gt):
        counts, offsets = np.asarray(counts, np.uint32), np.asarray(offsets, np.int64)
        h, w = np.asarray(h, np.int64), np.asarray(w, np.int64)
        sides.append((counts, spans(offsets), to_bbox(counts, offsets, h, w), area(counts, offsets),
                      np.ascontiguousarray(np.stack([h, w], axis=1))))
    (dc, ds, db, da, dhw), (gc, gs, gb, _, ghw) = sides
    return _iou_matrix(dc, ds, db, da, dhw, gc, gs, gb, np.asarray(iscrowd, np.bool_), ghw)


_TF_EPSILON = np.float32(1e-7)  # np_mask_ops.EPSILON, in the float32 arithmetic of its masks


@numba.njit(cache=True, nogil=True)
def openimages_overlap_blocks(dt_counts, dt_span, dt_area, dt_corners, gt_counts, gt_span, gt_masked, gt_corners,
                              gt_group_of, gt_start, gt_len, dt_start, dt_len, lo, hi):
    """The TF Object Detection API's overlaps in mask mode (``np_mask_ops``, ``np_box_ops``), as
    :func:`evalengine.geometry.box_iou.box_iou_blocks` lays them out: against a ground truth with a mask, its float32
    ``intersection / max(union, 1e-7)`` (group-of: ``intersection / (detection area + 1e-7)``); against one without,
    the box overlap of the ``OPENIMAGES`` convention on the corners. The masks of a pair have one size."""
    offsets = block_offsets(gt_len, dt_len, lo, hi)
    values = np.zeros(offsets[-1])
    for k in range(lo, hi):
        at, g0, d0, ng = offsets[k - lo], gt_start[k], dt_start[k], gt_len[k]
        for d in range(d0, d0 + dt_len[k]):
            for g in range(g0, g0 + ng):
                if not gt_masked[g]:
                    value = pair_iou(OPENIMAGES, dt_corners[d], gt_corners[g], gt_group_of[g])
                else:
                    inter, union = intersection_union(dt_counts, dt_span[d, 0], dt_span[d, 1], gt_counts,
                                                      gt_span[g, 0], gt_span[g, 1])
                    if gt_group_of[g]:
                        value = np.float32(inter) / (np.float32(dt_area[d]) + _TF_EPSILON)
                    else:
                        value = np.float32(inter) / max(np.float32(union), _TF_EPSILON)
                values[at + (d - d0) * ng + g - g0] = value
    return values, offsets
