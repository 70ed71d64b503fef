"""The PASCAL VOC assignment (``VOCevaldet.m``; py-faster-rcnn ``voc_eval.py``), per (category, image) group.

The detections of a group come in (−score, file order) order, the devkit's stable sort. Each one looks at the
ground truth of largest IoU among *all* the group's ground truths — difficult and already detected ones included;
the first in file order on a tie (MATLAB's ``ov > ovmax``, NumPy's ``argmax``) — and, at each threshold where that
IoU passes (``>=`` as the MATLAB devkit, ``>`` with ``strict`` as ``voc_eval.py``):

- a difficult ground truth (unless ``use_difficult``) makes the detection ignored, neither TP nor FP;
- a ground truth not yet detected makes it a true positive, and is marked detected;
- one already detected makes it a false positive (a duplicate): VOC never falls back to another free ground truth.

Where the IoU does not pass, or the image has no ground truth of the class, the detection is a false positive.
Outcomes are bit masks over thresholds in one area range (see :func:`evalengine.schema.dt_matches_schema`).
"""

import numba
import numpy as np

_ONE = np.uint64(1)


@numba.njit(cache=True, nogil=True)
def assign_voc(values, offsets, lo, hi, gt_start, gt_len, dt_start, dt_len, gt_difficult, iou_thr, strict,
               use_difficult, out):
    """Assign groups ``[lo, hi)`` from their IoU blocks (:func:`evalengine.geometry.box_iou.box_iou_blocks`'s
    layout); ``out`` = (dt_tp, dt_ignored, dt_partner, dt_iou, dt_area_iou, gt_ignored, gt_matched), written in
    place. A detection's partner (and its IoU) is kept where it is a true positive or ignored."""
    dt_tp, dt_ignored, dt_partner, dt_iou, dt_area_iou, gt_ignored, gt_matched = out
    n_thr = iou_thr.shape[0]
    for k in range(lo, hi):
        g0, ng, d0, nd = gt_start[k], gt_len[k], dt_start[k], dt_len[k]
        for g in range(ng):
            if gt_difficult[g0 + g] and not use_difficult:
                gt_ignored[g0 + g] = _ONE
        if ng == 0:
            continue
        at = offsets[k - lo]
        for d in range(nd):
            row = at + d * ng
            best, jmax = values[row], 0
            for g in range(1, ng):
                if values[row + g] > best:
                    best, jmax = values[row + g], g
            ignored = gt_difficult[g0 + jmax] and not use_difficult
            for t in range(n_thr):
                if not (best > iou_thr[t] if strict else best >= iou_thr[t]):
                    continue
                bit = _ONE << np.uint64(t)
                if ignored:
                    dt_ignored[d0 + d, 0] |= bit
                elif gt_matched[g0 + jmax, 0] & bit:
                    continue  # a duplicate: a false positive
                else:
                    dt_tp[d0 + d, 0] |= bit
                    gt_matched[g0 + jmax, 0] |= bit
                dt_partner[d0 + d, t] = g0 + jmax
                dt_iou[d0 + d, t] = best
                if t == 0:
                    dt_area_iou[d0 + d, 0] = best
