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

Masks (the instance-segmentation track, ``mask_mode``): the two stages run first over the ground truth with a mask
(mask IoU / IoA), then again over the ground truth without one (box IoU / IoA); a detection taken in that second round
as a true positive is ignored (``BOX_MATCHED``, the reference's ``is_matched_to_box``), and group-of boxes without a
mask give no entry (the metrics leave them out).
"""

import numba
import numpy as np

FALSE_POSITIVE, TRUE_POSITIVE, DIFFICULT, GROUP_OF, BOX_MATCHED = 0, 1, 2, 3, 4


@numba.njit(cache=True, nogil=True)
def assign_group_of(values, offsets, lo, hi, gt_start, gt_len, dt_start, dt_len, dt_score, gt_group_of,
                    gt_difficult, gt_masked, mask_mode, thresholds, out):
    """Assign groups ``[lo, hi)`` from their similarity blocks (:func:`evalengine.geometry.box_iou.box_iou_blocks`
    with the ``OPENIMAGES`` convention, or :func:`evalengine.geometry.masks.openimages_overlap_blocks`: IoU for
    regular ground truth, IoA for group-of). ``out`` = (dt_outcome, dt_partner, dt_overlap, gt_matched,
    gt_group_score), written in place: a detection's outcome (``FALSE_POSITIVE``, ``TRUE_POSITIVE``, ``DIFFICULT``,
    ``GROUP_OF``, ``BOX_MATCHED``), its partner (a ground-truth row, −1 if none) and their overlap; whether a ground
    truth is taken (or holds a detection, group-of) and a group-of box's score (NaN while it holds none).
    ``thresholds``: the IoU threshold against mask overlaps (float32 ones: the threshold as float32, as NumPy 2
    compares a float32 with a Python float) and against box overlaps."""
    dt_outcome, dt_partner, dt_overlap, gt_matched, gt_group_score = out
    for k in range(lo, hi):
        g0, ng, d0, nd = gt_start[k], gt_len[k], dt_start[k], dt_len[k]
        if ng == 0 or nd == 0:
            continue
        at = offsets[k - lo]
        for masked_round in (True, False):
            if masked_round and not mask_mode:
                continue
            for group_round in (False, True):
                for d in range(nd):
                    if dt_outcome[d0 + d] != FALSE_POSITIVE:
                        continue
                    row = at + d * ng
                    best, jmax = -1.0, -1
                    for g in range(ng):
                        if (gt_group_of[g0 + g] == group_round and gt_masked[g0 + g] == masked_round
                                and values[row + g] > best):
                            best, jmax = values[row + g], g
                    if jmax < 0 or not best >= thresholds[0 if masked_round else 1]:
                        continue
                    g = g0 + jmax
                    if group_round:
                        dt_outcome[d0 + d] = GROUP_OF
                        gt_matched[g] = True
                        previous = 0.0 if np.isnan(gt_group_score[g]) else gt_group_score[g]
                        gt_group_score[g] = max(previous, dt_score[d0 + d])
                    elif gt_difficult[g]:
                        dt_outcome[d0 + d] = DIFFICULT
                    elif not gt_matched[g]:
                        dt_outcome[d0 + d] = TRUE_POSITIVE if masked_round or not mask_mode else BOX_MATCHED
                        gt_matched[g] = True
                    else:
                        continue  # a duplicate: a false positive unless a group-of box takes it
                    dt_partner[d0 + d], dt_overlap[d0 + d] = g, best
