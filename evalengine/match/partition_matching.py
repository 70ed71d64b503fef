"""Bipartite graph matching per contingency table (spec §4.1.4; SEISM ``bgm.hpp``), solved at match time: the
largest number of pixels kept by a one-to-one matching of regions, ``d_BGM = n − max_M Σ n_ij``; SEISM solves it
with the Hungarian algorithm on the padded square matrix of ``−n_ij``, here the shortest-augmenting-path Hungarian
on the rectangular matrix (the same optimum, in exact integers)."""

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def pair_matched(seg_region, gt_region, n, bounds):
    """Per pair (cells ``bounds[p]:bounds[p + 1]``): the pixels its best one-to-one region matching keeps, and its
    pixels."""
    n_pairs = bounds.size - 1
    matched = np.zeros(n_pairs, np.int64)
    total = np.zeros(n_pairs, np.int64)
    for p in range(n_pairs):
        lo, hi = bounds[p], bounds[p + 1]
        n_seg, n_gt = 0, 0
        for c in range(lo, hi):
            n_seg, n_gt = max(n_seg, seg_region[c] + 1), max(n_gt, gt_region[c] + 1)
            total[p] += n[c]
        transpose = n_seg > n_gt  # rows are the smaller side
        rows, cols = (n_gt, n_seg) if transpose else (n_seg, n_gt)
        weight = np.zeros((rows, cols), np.int64)
        for c in range(lo, hi):
            if transpose:
                weight[gt_region[c], seg_region[c]] = n[c]
            else:
                weight[seg_region[c], gt_region[c]] = n[c]
        matched[p] = max_weight_matching(weight)
    return matched, total


@numba.njit(cache=True, nogil=True)
def max_weight_matching(weight):
    """The largest total weight of a one-to-one matching of rows to columns (rows <= columns), by the Hungarian
    algorithm with potentials (Kuhn–Munkres, shortest augmenting paths) on the costs ``−weight``."""
    rows, cols = weight.shape
    big = np.iinfo(np.int64).max // 4
    u = np.zeros(rows + 1, np.int64)
    v = np.zeros(cols + 1, np.int64)
    row_of = np.zeros(cols + 1, np.int64)  # 1-based row matched to column j (0: none)
    way = np.zeros(cols + 1, np.int64)
    for i in range(1, rows + 1):
        row_of[0] = i
        j0 = 0
        min_slack = np.full(cols + 1, big, np.int64)
        used = np.zeros(cols + 1, np.bool_)
        while True:
            used[j0] = True
            i0 = row_of[j0]
            delta = big
            j1 = 0
            for j in range(1, cols + 1):
                if not used[j]:
                    slack = -weight[i0 - 1, j - 1] - u[i0] - v[j]
                    if slack < min_slack[j]:
                        min_slack[j] = slack
                        way[j] = j0
                    if min_slack[j] < delta:
                        delta = min_slack[j]
                        j1 = j
            for j in range(cols + 1):
                if used[j]:
                    u[row_of[j]] += delta
                    v[j] -= delta
                else:
                    min_slack[j] -= delta
            j0 = j1
            if row_of[j0] == 0:
                break
        while j0 != 0:
            j1 = way[j0]
            row_of[j0] = row_of[j1]
            j0 = j1
    kept = 0
    for j in range(1, cols + 1):
        if row_of[j] != 0:
            kept += weight[row_of[j] - 1, j - 1]
    return kept
