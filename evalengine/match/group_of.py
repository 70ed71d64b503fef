"""The OpenImages assignment with group-of boxes (TF Object Detection API ``per_image_evaluation.py``
``_compute_tp_fp_for_single_class``), per (category, image) group.

The detections of a group come in the evaluator's order (its ``np.argsort(scores)[::-1]``, see
:mod:`evalengine.match.openimages`). Two stages, as the reference:

1. regular (non-group-of) ground truth: each detection looks at the one of largest IoU among *all* of them (the
   first on a tie, ``np.argmax``); at ``IoU >= threshold`` a difficult one makes it ignored, a free one makes it a
   true positive (and is taken), a taken one leaves it a false positive — no fallback to another ground truth;
2. group-of ground truth: each detection that is not a true positive nor ignored looks at the group-of box of
   largest intersection over the detection's area (IoA); at ``IoA >= threshold`` it is ignored and the box keeps
   the largest score of its detections, starting from 0 (``scores_group_of``): the box is one true positive of
   weight ``group_of_weight`` at that score when it is above 0 — a stage-1 duplicate inside a group-of box is
   rescued this way.

A group without ground truth of its class leaves every detection a false positive.
"""

import numba
import numpy as np

FALSE_POSITIVE, TRUE_POSITIVE, DIFFICULT, GROUP_OF = 0, 1, 2, 3


@numba.njit(cache=True, nogil=True)
def assign_group_of(values, offsets, lo, hi, gt_start, gt_len, dt_start, dt_len, dt_score, gt_group_of,
                    gt_difficult, iou_threshold, out):
    """Assign groups ``[lo, hi)`` from their similarity blocks (:func:`evalengine.geometry.box_iou.box_iou_blocks`
    with the ``OPENIMAGES`` convention: IoU for regular ground truth, IoA for group-of). ``out`` = (dt_outcome,
    dt_partner, dt_overlap, gt_matched, gt_group_score), written in place: a detection's outcome (one of
    ``FALSE_POSITIVE``, ``TRUE_POSITIVE``, ``DIFFICULT``, ``GROUP_OF``), its partner (a ground-truth row, −1 if none)
    and their overlap; whether a ground truth is taken (or holds a detection, group-of) and a group-of box's
    score (NaN while it holds none)."""
    dt_outcome, dt_partner, dt_overlap, gt_matched, gt_group_score = out
    for k in range(lo, hi):
        g0, ng, d0, nd = gt_start[k], gt_len[k], dt_start[k], dt_len[k]
        if ng == 0 or nd == 0:
            continue
        at = offsets[k - lo]
        for d in range(nd):  # stage 1: regular ground truth
            row = at + d * ng
            best, jmax = -1.0, -1
            for g in range(ng):
                if not gt_group_of[g0 + g] and values[row + g] > best:
                    best, jmax = values[row + g], g
            if jmax < 0 or not best >= iou_threshold:
                continue
            if gt_difficult[g0 + jmax]:
                dt_outcome[d0 + d] = DIFFICULT
            elif not gt_matched[g0 + jmax]:
                dt_outcome[d0 + d] = TRUE_POSITIVE
                gt_matched[g0 + jmax] = True
            else:
                continue  # a duplicate: a false positive unless a group-of box takes it
            dt_partner[d0 + d], dt_overlap[d0 + d] = g0 + jmax, best
        for d in range(nd):  # stage 2: group-of ground truth
            if dt_outcome[d0 + d] != FALSE_POSITIVE:
                continue
            row = at + d * ng
            best, jmax = -1.0, -1
            for g in range(ng):
                if gt_group_of[g0 + g] and values[row + g] > best:
                    best, jmax = values[row + g], g
            if jmax < 0 or not best >= iou_threshold:
                continue
            g = g0 + jmax
            dt_outcome[d0 + d] = GROUP_OF
            dt_partner[d0 + d], dt_overlap[d0 + d] = g, best
            gt_matched[g] = True
            previous = 0.0 if np.isnan(gt_group_score[g]) else gt_group_score[g]
            gt_group_score[g] = max(previous, dt_score[d0 + d])
