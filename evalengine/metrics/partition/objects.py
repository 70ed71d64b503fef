"""Precision and recall for objects and parts, Fop (Pont-Tuset & Marques §4; spec §4.4.3), exactly as SEISM's
``fop.hpp`` ``ObjectsAndPartsF::calculate`` does it over all the annotators of an image at once:

- candidates: per partition, regions by decreasing area (ties: higher region index first, the C++ multimap's reverse
  order) are candidates while the area fraction summed before them is below ``area_percentile``: decided at match
  time, the cells' flags (:func:`evalengine.match.partitions.fop_candidates`);
- classification over candidate pairs with ``>=`` thresholds: OBJECT (both overlaps >= γo) over PART (machine region
  inside a GT region: ``O_S >= γo``, ``O_G >= γp``; or the reverse for the GT region); the machine side is an
  OBJECT for any annotator;
- fragmentation over all pairs: ``O_G`` summed on a GT region whose machine parts lie inside it, ``O_S`` on a machine
  region made of GT parts; counted for candidates left unclassified, the machine side's divided by K;
- ``P = (objects + fragmentation + β·parts) / candidates`` on each side, the GT side pooled over annotators.

Defaults are the code's (γo = 0.9, not the paper's 0.95; the 99 % area filter is code only; spec §10.1–10.5).
"""

from dataclasses import dataclass

import numba
import numpy as np
import polars as pl

from evalengine.match.partitions import group_bounds
from evalengine.match.protocol import column_array
from evalengine.metrics.partition import IMAGE

NONE, OBJECT, PART = 0, 1, 2


@dataclass(frozen=True)
class ObjectsAndParts:
    """Fop's parameters (SEISM ``mex_eval_segm.cpp``: 0.9, 0.25, 0.1; ``fop.hpp``: 0.99, the match table's
    candidate flags: :class:`evalengine.match.partitions.PartitionProtocol`)."""

    gamma_object: float = 0.9
    gamma_part: float = 0.25
    beta: float = 0.1
    area_percentile: float = 0.99


def fop_terms(cells: pl.DataFrame, params: ObjectsAndParts = ObjectsAndParts()) -> pl.DataFrame:
    """Per image and parameter (``IMAGE``): ``fop``, ``fop_precision``, ``fop_recall``, from the cells and their
    candidate flags (matched at ``params.area_percentile``)."""
    cells = cells.sort(*IMAGE, "annotator", "gt_region", "seg_region")
    bounds = group_bounds(cells, IMAGE)
    f, precision, recall = _fop(column_array(cells, "annotator", "int32"), column_array(cells, "seg_region", "int32"),
                                column_array(cells, "gt_region", "int32"), column_array(cells, "n"),
                                column_array(cells, "seg_candidate", "bool"),
                                column_array(cells, "gt_candidate", "bool"), bounds,
                                params.gamma_object, params.gamma_part, params.beta)
    return cells[bounds[:-1]].select(*IMAGE).with_columns(
        fop=pl.Series(f), fop_precision=pl.Series(precision), fop_recall=pl.Series(recall))


@numba.njit(cache=True, nogil=True)
def _fop(annotator, seg_region, gt_region, n, seg_flag, gt_flag, bounds, gamma_object, gamma_part, beta):
    n_images = bounds.size - 1
    f_out = np.zeros(n_images)
    p_out = np.zeros(n_images)
    r_out = np.zeros(n_images)
    for g in range(n_images):
        lo, hi = bounds[g], bounds[g + 1]
        first = annotator[lo]
        n_seg = 0
        for c in range(lo, hi):
            n_seg = max(n_seg, seg_region[c] + 1)
        seg_area = np.zeros(n_seg, np.int64)
        seg_candidate = np.zeros(n_seg, np.bool_)
        for c in range(lo, hi):
            seg_candidate[seg_region[c]] = seg_flag[c]
            if annotator[c] == first:  # the machine regions' areas from the first annotator's table
                seg_area[seg_region[c]] += n[c]
        seg_class = np.zeros(n_seg, np.int8)
        seg_fragments = np.zeros(n_seg)
        n_annotators = 0
        gt_objects, gt_parts, gt_candidates = 0, 0, 0
        gt_fragmentation = 0.0
        c = lo
        while c < hi:  # one annotator's cells, ordered by (gt_region, seg_region) as fop.hpp scans them
            end = c
            n_gt = 0
            while end < hi and annotator[end] == annotator[c]:
                n_gt = max(n_gt, gt_region[end] + 1)
                end += 1
            n_annotators += 1
            gt_area = np.zeros(n_gt, np.int64)
            gt_candidate = np.zeros(n_gt, np.bool_)
            for k in range(c, end):
                gt_area[gt_region[k]] += n[k]
                gt_candidate[gt_region[k]] = gt_flag[k]
            gt_class = np.zeros(n_gt, np.int8)
            gt_fragments = np.zeros(n_gt)
            for k in range(c, end):
                i, j = seg_region[k], gt_region[k]
                recall = n[k] / gt_area[j]
                precision = n[k] / seg_area[i]
                if gt_candidate[j] and seg_candidate[i]:
                    if recall >= gamma_object and precision >= gamma_object:
                        gt_class[j] = OBJECT
                        seg_class[i] = OBJECT
                    elif recall >= gamma_part and precision >= gamma_object:
                        if seg_class[i] == NONE:
                            seg_class[i] = PART
                    elif recall >= gamma_object and precision >= gamma_part:
                        gt_class[j] = PART
                if precision >= gamma_object and recall < gamma_object:
                    gt_fragments[j] += recall
                elif recall >= gamma_object and precision < gamma_object:
                    seg_fragments[i] += precision
            for j in range(n_gt):
                gt_candidates += gt_candidate[j]
                if gt_class[j] == PART:
                    gt_parts += 1
                elif gt_class[j] == OBJECT:
                    gt_objects += 1
                elif gt_candidate[j]:
                    gt_fragmentation += gt_fragments[j]
            c = end
        seg_objects, seg_parts, seg_candidates = 0, 0, 0
        seg_fragmentation = 0.0
        for i in range(n_seg):
            seg_candidates += seg_candidate[i]
            if seg_class[i] == PART:
                seg_parts += 1
            elif seg_class[i] == OBJECT:
                seg_objects += 1
            elif seg_candidate[i]:
                seg_fragmentation += seg_fragments[i]
        seg_fragmentation = seg_fragmentation / n_annotators
        precision = (seg_objects + seg_fragmentation + beta * seg_parts) / seg_candidates
        recall = (gt_objects + gt_fragmentation + beta * gt_parts) / gt_candidates
        p_out[g], r_out[g] = precision, recall
        f_out[g] = 0.0 if precision == 0 and recall == 0 else 2 * precision * recall / (precision + recall)
    return f_out, p_out, r_out
