"""Greedy assignment by detection score (pycocotools ``evaluateImg``), over precomputed similarity blocks.

Per group the detections come sorted by score and cut to the cap. For every area range the ground truths are
stably reordered, regular before ignored (crowd, flagged in ``gt_ignore``, or area outside the range; pycocotools
flags nothing there, MATLAB's ``CocoEval`` the annotations' ``ignore`` field), and for every IoU threshold each
detection in turn takes the best still-free ground truth with similarity >= threshold, where:

- a later ground truth with equal similarity wins (the running threshold is raised to the best value);
- once matched to a regular ground truth, the search stops at the ignored ones;
- a crowd ground truth can absorb any number of detections (an ignored one that is not crowd, one only);
- a detection matched to an ignored ground truth is ignored, and an unmatched detection whose own area is
  outside the range is ignored, not a false positive;
- pycocotools stores the partner's id and tests it for truth, so with ``zero_id_quirk`` a match to ground-truth
  id 0 reads as unmatched.

Outcomes are bit masks over thresholds (see :func:`evalengine.schema.dt_matches_schema`); the partner's similarity
is kept per threshold in the first area range, and per area range at the first threshold (LRP's localisation term,
Oksuz et al., whose code matches with ``iouThrs[0]``).
"""

import numba
import numpy as np

_ONE = np.uint64(1)


@numba.njit(cache=True, nogil=True)
def assign_by_score(values, offsets, lo, hi, gt_start, gt_len, dt_start, dt_len, gt_area, gt_crowd, gt_ignore,
                    gt_zero_id, dt_area, iou_thr, area_lo, area_hi, zero_id_quirk, out):
    """Assign groups ``[lo, hi)`` from their blocks (:func:`evalengine.geometry.box_iou.box_iou_blocks`'s layout);
    ``out`` = (dt_tp, dt_ignored, dt_partner, dt_iou, dt_area_iou, gt_ignored, gt_matched), written in place;
    ``dt_partner``, ``dt_iou`` and ``dt_area_iou`` with no rows are not written.

    Thresholds are independent searches (a ``taken`` row each), so each detection runs them in turn and stops at
    the first one its best similarity in the group does not reach: the later ones are not reached either."""
    dt_tp, dt_ignored, dt_partner, dt_iou, dt_area_iou, gt_ignored, gt_matched = out
    partners = dt_partner.shape[0] > 0  # else left out (a table for AP alone: schema.PARTNER_COLUMNS)
    n_thr = iou_thr.shape[0]
    n_area = area_lo.shape[0]
    all_bits = ~np.uint64(0) >> np.uint64(64 - n_thr)
    lowest = np.empty(n_thr)  # the similarity a match at each threshold needs at least
    for t in range(n_thr):
        lowest[t] = min(iou_thr[t], 1 - 1e-10)
    most_gt = 1
    for k in range(lo, hi):
        most_gt = max(most_gt, gt_len[k])
    order = np.empty(most_gt, np.int64)  # scratch buffers, reused by every group
    ignored = np.empty(most_gt, np.bool_)
    taken = np.empty((n_thr, most_gt), np.bool_)
    for k in range(lo, hi):
        g0, ng, d0, nd = gt_start[k], gt_len[k], dt_start[k], dt_len[k]
        block = offsets[k - lo]
        if ng == 0:  # nothing to match: only the out-of-range rule applies
            for a in range(n_area):
                for d in range(nd):
                    if dt_area[d0 + d] < area_lo[a] or dt_area[d0 + d] > area_hi[a]:
                        dt_ignored[d0 + d, a] = all_bits
            continue
        for a in range(n_area):
            area_bit = _ONE << np.uint64(a)
            n_regular = 0
            for g in range(ng):
                outside = gt_area[g0 + g] < area_lo[a] or gt_area[g0 + g] > area_hi[a]
                if gt_crowd[g0 + g] or gt_ignore[g0 + g] or outside:
                    gt_ignored[g0 + g] |= area_bit
                else:
                    order[n_regular] = g
                    n_regular += 1
            i = n_regular
            for g in range(ng):
                if gt_ignored[g0 + g] & area_bit:
                    order[i] = g
                    i += 1
            for i in range(ng):
                ignored[i] = i >= n_regular
            taken[:, :ng] = False
            for d in range(nd):
                row = block + d * ng
                best_value = -np.inf  # NaN: never skip (a NaN similarity is taken as the reference's loop takes it)
                for g in range(ng):
                    value = values[row + g]
                    best_value = np.inf if value != value else max(best_value, value)
                outside = dt_area[d0 + d] < area_lo[a] or dt_area[d0 + d] > area_hi[a]
                for t in range(n_thr):
                    if best_value < lowest[t]:  # no ground truth reaches this threshold, nor the next ones
                        if outside:
                            dt_ignored[d0 + d, a] |= all_bits >> np.uint64(t) << np.uint64(t)
                        break
                    thr_bit = _ONE << np.uint64(t)
                    best = lowest[t]
                    m = -1
                    for i in range(ng):
                        g = order[i]
                        if taken[t, i] and not gt_crowd[g0 + g]:
                            continue
                        if m > -1 and not ignored[m] and ignored[i]:
                            break
                        if values[row + g] < best:
                            continue
                        best = values[row + g]
                        m = i
                    if m == -1:
                        if outside:
                            dt_ignored[d0 + d, a] |= thr_bit
                        continue
                    taken[t, m] = True
                    g = order[m]
                    gt_matched[g0 + g, a] |= thr_bit
                    counted = not (zero_id_quirk and gt_zero_id[g0 + g])
                    if ignored[m] or (not counted and outside):
                        dt_ignored[d0 + d, a] |= thr_bit
                    elif counted:
                        dt_tp[d0 + d, a] |= thr_bit
                    if partners and t == 0:
                        dt_area_iou[d0 + d, a] = values[row + g]
                    if partners and a == 0:
                        dt_partner[d0 + d, t] = g0 + g
                        dt_iou[d0 + d, t] = values[row + g]
