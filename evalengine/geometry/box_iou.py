"""Box similarity: the IoU conventions of the reference tools, and the similarity step of matching.

Each convention is bit-for-bit the reference's arithmetic:

- ``COCO`` (pycocotools ``maskApi.c`` ``bbIou``) on ``x, y, w, h``: the intersection width is
  ``min(x_d + w_d, x_g + w_g) - max(x_d, x_g)``, a non-positive width or height gives 0, and for a crowd ground
  truth the union is the detection's own area (intersection over detection area);
- ``CORNERS`` (Hosang et al.'s toolbox, continuous boxes) on ``x1, y1, x2, y2``: 0 for disjoint or empty boxes;
- ``VOC`` (the PASCAL devkit's "+1 pixel" rule) on 1-based inclusive ``x1, y1, x2, y2``: widths are
  ``x2 - x1 + 1``, a box overlaps when both intersection sides are > 0;
- ``OPENIMAGES`` (the TF Object Detection API's ``np_box_ops.iou`` / ``ioa``) on ``x1, y1, x2, y2``: ``CORNERS``
  for a regular ground truth, and for a group-of one (the crowd flag) intersection over the detection's area.

:func:`box_iou_blocks` is the similarity step: for a range of (ground truth, detection) groups it returns each
group's IoU matrix, detection-major, which the assignment kernels of :mod:`evalengine.match` read. Other
similarities (mask IoU, OKS, boundary IoU) produce the same ``(values, offsets)`` blocks. A kernel that streams
(Hosang's, over 10,000 proposals per image) calls :func:`pair_iou` with the convention as a parameter instead.
"""

import numba
import numpy as np

COCO, CORNERS, VOC, OPENIMAGES = 0, 1, 2, 3


@numba.njit(cache=True, nogil=True, inline="always")
def coco_box_iou(dx, dy, dw, dh, gx, gy, gw, gh, crowd):
    """IoU of one detection and one ground-truth box (pycocotools ``bbIou``)."""
    w = min(dw + dx, gw + gx) - max(dx, gx)
    if w <= 0.0:
        return 0.0
    h = min(dh + dy, gh + gy) - max(dy, gy)
    if h <= 0.0:
        return 0.0
    inter = w * h
    det_area = dw * dh
    union = det_area if crowd else det_area + gw * gh - inter
    return inter / union


@numba.njit(cache=True, nogil=True, inline="always")
def corner_iou(a, b) -> float:
    """Continuous-box IoU of ``(x1, y1, x2, y2)`` rows; 0 for disjoint or empty boxes."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0.0 or ih <= 0.0:
        return 0.0
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0.0 else 0.0


@numba.njit(cache=True, nogil=True, inline="always")
def corner_ioa(d, g) -> float:
    """Intersection over the area of ``d`` (TF ``np_box_ops.ioa(g, d)``: a group-of box ``g``); 0 for disjoint
    boxes; ``d`` has a positive area (the TF evaluator drops the others first)."""
    iw = min(d[2], g[2]) - max(d[0], g[0])
    ih = min(d[3], g[3]) - max(d[1], g[1])
    if iw <= 0.0 or ih <= 0.0:
        return 0.0
    return iw * ih / ((d[2] - d[0]) * (d[3] - d[1]))


@numba.njit(cache=True, nogil=True, inline="always")
def voc_box_iou(d, g) -> float:
    """The PASCAL devkit's overlap of 1-based inclusive ``(x1, y1, x2, y2)`` boxes (``VOCevaldet.m``)."""
    iw = min(d[2], g[2]) - max(d[0], g[0]) + 1
    ih = min(d[3], g[3]) - max(d[1], g[1]) + 1
    if iw <= 0.0 or ih <= 0.0:
        return 0.0
    union = (d[2] - d[0] + 1) * (d[3] - d[1] + 1) + (g[2] - g[0] + 1) * (g[3] - g[1] + 1) - iw * ih
    return iw * ih / union


@numba.njit(cache=True, nogil=True, inline="always")
def pair_iou(convention, d, g, crowd) -> float:
    """The IoU of one detection (or proposal) row ``d`` and one ground-truth row ``g`` in ``convention``: the one
    similarity a fused kernel calls with the convention as its parameter."""
    if convention == COCO:
        return coco_box_iou(d[0], d[1], d[2], d[3], g[0], g[1], g[2], g[3], crowd)
    if convention == VOC:
        return voc_box_iou(d, g)
    if convention == OPENIMAGES and crowd:
        return corner_ioa(d, g)
    return corner_iou(d, g)


@numba.njit(cache=True, nogil=True, inline="always")
def block_offsets(gt_len, dt_len, lo, hi):
    """Where each group ``k`` in ``[lo, hi)`` has its ``dt_len[k] × gt_len[k]`` block in a similarity step's values."""
    offsets = np.zeros(hi - lo + 1, np.int64)
    for k in range(lo, hi):
        offsets[k - lo + 1] = offsets[k - lo] + dt_len[k] * gt_len[k]
    return offsets


@numba.njit(cache=True, nogil=True)
def box_iou_blocks(convention, dt_box, gt_box, gt_crowd, gt_start, gt_len, dt_start, dt_len, lo, hi):
    """``(values, offsets)``: group ``k`` in ``[lo, hi)`` has its ``dt_len[k] × gt_len[k]`` IoU matrix, row-major
    by detection, at ``values[offsets[k - lo]:offsets[k - lo + 1]]``; boxes as ``convention`` reads them."""
    offsets = block_offsets(gt_len, dt_len, lo, hi)
    values = np.empty(offsets[-1])
    for k in range(lo, hi):
        at, g0, d0, ng = offsets[k - lo], gt_start[k], dt_start[k], gt_len[k]
        for d in range(dt_len[k]):
            box = dt_box[d0 + d]
            for g in range(ng):
                values[at + d * ng + g] = pair_iou(convention, box, gt_box[g0 + g], gt_crowd[g0 + g])
    return values, offsets
