"""A transcription of SEISM's measures (jponttuset/seism @ 6af0cad ``src/measures/*.hpp``, ``mex_eval_segm.cpp``,
``eval_segm.m``; ``src/misc/intersection_matrix.hpp``) in plain NumPy loops over dense intersection matrices, as the
differential reference of the partition tests (SEISM is MATLAB/C++ mex: it cannot be installed here). BGM uses
SciPy's ``linear_sum_assignment`` instead of SEISM's Hungarian (the same optimum)."""

import math

import numpy as np
from scipy.optimize import linear_sum_assignment


def relabel(partition: np.ndarray) -> np.ndarray:
    """``relabel``: region ids by first appearance in a row-major scan."""
    _, first, inverse = np.unique(partition.ravel(), return_index=True, return_inverse=True)
    rank = np.argsort(np.argsort(first))
    return rank[inverse].reshape(partition.shape)


def intersection_matrix(partition, gt, valid=None) -> np.ndarray:
    """``intersection_matrix`` (over ``valid`` pixels only: regions with none are dropped)."""
    a, b = relabel(partition), relabel(gt)
    valid = np.ones(a.shape, bool) if valid is None else valid
    matrix = np.zeros((a.max() + 1, b.max() + 1), np.int64)
    np.add.at(matrix, (a[valid], b[valid]), 1)
    return matrix[matrix.sum(1) > 0][:, matrix.sum(0) > 0]


def _areas(m):
    return m.sum(1), m.sum(0), int(m.sum())


def voi(m):
    a, b, n = _areas(m)
    h1 = -sum(x * math.log(x / n) for x in a) / math.log(2.0) / n
    h2 = -sum(x * math.log(x / n) for x in b) / math.log(2.0) / n
    mi = sum(m[i, j] * math.log(n * m[i, j] / a[i] / b[j]) for j in range(m.shape[1]) for i in range(m.shape[0])
             if m[i, j]) / math.log(2.0) / n
    return h1 + h2 - 2.0 * mi


def pairs(m):
    a, b, n = _areas(m)
    s2, a2, b2 = int((m * m).sum()), int((a * a).sum()), int((b * b).sum())
    n11, n00 = (s2 - n) // 2, (n * n - a2 - b2 + s2) // 2
    n10, n01 = (a2 - s2) // 2, (b2 - s2) // 2
    with np.errstate(invalid="ignore", divide="ignore"):
        return ((n11 + n00) / (n11 + n00 + n01 + n10), np.float64(n11) / (n11 + n10), np.float64(n11) / (n11 + n01))


def covering(m):
    a, b, n = _areas(m)
    jaccard = m / (a[:, None] + b[None, :] - m)
    return float((jaccard.max(1) * a).sum()) / n


def hamming(m):
    """``directional_hamming_distance``: n − Σ over columns of the column maximum."""
    return int(m.sum()) - int(m.max(0).sum())


def bce(m):
    a, b, n = _areas(m)
    i, j = np.nonzero(m)
    e = m[i, j]
    return float((np.maximum((a[i] - e) / a[i], (b[j] - e) / b[j]) * e).sum()) / n


def gce_lce(m):
    a, b, n = _areas(m)
    i, j = np.nonzero(m)
    e = m[i, j]
    gt_side, seg_side = (b[j] - e) * e / b[j], (a[i] - e) * e / a[i]
    return min(gt_side.sum(), seg_side.sum()) / n, np.minimum(gt_side, seg_side).sum() / n


def bgm_distance(m):
    rows, cols = linear_sum_assignment(-m)
    return int(m.sum()) - int(m[rows, cols].sum())


def fop(matrices, gamma_object=0.9, gamma_part=0.25, beta=0.1, percentile=0.99):
    """``ObjectsAndPartsF::calculate``, loop for loop."""
    n_seg, n = matrices[0].shape[0], int(matrices[0].sum())
    seg_area = matrices[0].sum(1)

    def candidates(area):
        order = sorted(range(len(area)), key=lambda r: (area[r] / n, r), reverse=True)
        out, total = np.zeros(len(area), bool), 0.0
        for r in order:
            out[r] = total < percentile
            total += area[r] / n
        return out

    seg_cand, seg_class, seg_frag = candidates(seg_area), np.zeros(n_seg, int), np.zeros(n_seg)
    gt_counts = [0, 0, 0, 0.0]  # objects, parts, candidates, fragmentation
    for m in matrices:
        gt_area = m.sum(0)
        gt_cand, gt_class, gt_frag = candidates(gt_area), np.zeros(m.shape[1], int), np.zeros(m.shape[1])
        for j in range(m.shape[1]):
            for i in range(n_seg):
                recall, precision = m[i, j] / gt_area[j], m[i, j] / seg_area[i]
                if gt_cand[j] and seg_cand[i]:
                    if recall >= gamma_object and precision >= gamma_object:
                        gt_class[j] = seg_class[i] = 1
                    elif recall >= gamma_part and precision >= gamma_object:
                        seg_class[i] = seg_class[i] or 2
                    elif recall >= gamma_object and precision >= gamma_part:
                        gt_class[j] = 2
                if precision >= gamma_object and recall < gamma_object:
                    gt_frag[j] += recall
                elif recall >= gamma_object and precision < gamma_object:
                    seg_frag[i] += precision
        for j in range(m.shape[1]):
            gt_counts[2] += gt_cand[j]
            if gt_class[j] == 2:
                gt_counts[1] += 1
            elif gt_class[j] == 1:
                gt_counts[0] += 1
            elif gt_cand[j]:
                gt_counts[3] += gt_frag[j]
    seg_frag_total = sum(seg_frag[i] for i in range(n_seg) if seg_class[i] == 0 and seg_cand[i]) / len(matrices)
    precision = ((seg_class == 1).sum() + seg_frag_total + beta * (seg_class == 2).sum()) / seg_cand.sum()
    recall = (gt_counts[0] + gt_counts[3] + beta * gt_counts[1]) / gt_counts[2]
    f = 0.0 if precision == 0 and recall == 0 else 2 * precision * recall / (precision + recall)
    return [f, precision, recall]


def eval_segm(partition, gts, valid=None) -> dict:
    """Every measure of ``eval_segm(partition, gts, m)`` (multi-GT conventions of ``mex_eval_segm.cpp``)."""
    mats = [intersection_matrix(partition, gt, valid) for gt in gts]
    k, n = len(mats), int(mats[0].sum())
    out = {"voi": sum(voi(m) for m in mats) / k}
    out["nvoi"] = sum(1.0 if max(m.shape) == 1 else 1 - voi(m) / (2 * math.log(max(m.shape)) / math.log(2.0))
                      for m in mats) / k
    rand = [pairs(m) for m in mats]
    out["pri"] = sum(r[0] for r in rand) / k
    p, r = sum(x[1] for x in rand) / k, sum(x[2] for x in rand) / k
    out["fr"] = [2 * p * r / (p + r) if p + r > 0 else 0.0, p, r]
    out["sc"] = sum(covering(m) for m in mats) / k
    out["ssc"] = sum(covering(m.T) for m in mats) / k
    out["dhd"] = 1 - sum(hamming(m) for m in mats) / k / n
    out["sdhd"] = 1 - sum(hamming(m.T) for m in mats) / k / n
    out["vd"] = 0.5 * (out["dhd"] + out["sdhd"])
    out["bgm"] = 1 - sum(bgm_distance(m) for m in mats) / k / n
    out["bce"] = 1 - sum(bce(m) for m in mats) / k
    out["gce"] = 1 - sum(gce_lce(m)[0] for m in mats) / k
    out["lce"] = 1 - sum(gce_lce(m)[1] for m in mats) / k
    out["fop"] = fop(mats)
    return out
