"""Greedy one-to-one assignment by largest IoU at every budget (Hosang et al.'s ``closest_candidates.m``), fused
with the similarity (:func:`evalengine.geometry.box_iou.pair_iou`, the convention a parameter): it streams each
group's columns in rank order and never holds a (rows × columns) matrix, which at 10,000 proposals per image
would cost more than it saves.

Per group (an image) the rows (ground truths) are matched to the first N columns (proposals in rank order) for
each budget N: repeatedly take the largest remaining IoU, then remove its row and column. Ties go to the first
row, then the first column, of the (row × column) matrix, which the toolbox transposes when there are more rows
than columns. A row left without a partner has IoU 0. The assignment is recomputed for every budget (it is not
monotone in N). Beside it, ``best_iou`` is the best IoU over the first N columns (one column may serve several
rows), a running maximum.

One pass over a group's columns in rank order serves every budget: a row can only be assigned one of its
``n_rows`` best columns so far (at most ``n_rows − 1`` are taken by the others before it), so only those are kept
as candidates, and the greedy assignment runs on them at each budget — the same pairs, in the same order, as on
the full matrix.
"""

import numba
import numpy as np

from evalengine.geometry.box_iou import CORNERS, pair_iou
from evalengine.match.groups import merge_groups


@numba.njit(cache=True, nogil=True)
def _greedy(cand_iou, cand_col, cand_n, n_used, g0, bi, out_iou, out_rank):
    """The toolbox's greedy assignment over the candidate pairs; writes each row's partner for budget ``bi``."""
    n_gt = cand_iou.shape[0]
    total = 0
    for g in range(n_gt):
        total += cand_n[g]
    rows = np.empty(total, np.int64)
    cols = np.empty(total, np.int64)
    vals = np.empty(total)
    n = 0
    for g in range(n_gt):
        for c in range(cand_n[g]):
            rows[n], cols[n], vals[n] = g, cand_col[g, c], cand_iou[g, c]
            n += 1
    # first maximum of the (possibly transposed) matrix: (−IoU, row, column) with rows = the smaller side
    first, second = (rows, cols) if n_gt <= n_used else (cols, rows)
    order = np.argsort(second, kind="mergesort")
    order = order[np.argsort(first[order], kind="mergesort")]
    order = order[np.argsort(-vals[order], kind="mergesort")]
    gt_done = np.zeros(n_gt, np.bool_)
    col_done = np.zeros(n_used, np.bool_)
    for i in order:
        g, c = rows[i], cols[i]
        if not gt_done[g] and not col_done[c]:
            gt_done[g] = True
            col_done[c] = True
            out_iou[g0 + g, bi] = vals[i]
            out_rank[g0 + g, bi] = c + 1


@numba.njit(cache=True, nogil=True)
def assign_by_iou(convention, row_box, col_box, row_start, row_len, col_start, col_len, budgets, out):
    """Assign every group at every budget (columns already cut to the largest budget), IoU in ``convention``;
    ``out`` = (iou, rank, best_iou, best_rank), each (rows, budgets), written in place (ranks are 1-based, 0 for
    none)."""
    out_iou, out_rank, best_iou, best_rank = out
    n_b = budgets.shape[0]
    for grp in range(row_start.shape[0]):
        g0, n_gt, p0, n_pr = row_start[grp], row_len[grp], col_start[grp], col_len[grp]
        if n_gt == 0:
            continue
        cand_iou = np.empty((n_gt, n_gt))
        cand_col = np.empty((n_gt, n_gt), np.int64)
        cand_n = np.zeros(n_gt, np.int64)
        run_best = np.zeros(n_gt)
        run_rank = np.zeros(n_gt, np.int32)
        bi = 0
        for j in range(n_pr + 1):
            while bi < n_b and (budgets[bi] == j or (j == n_pr and budgets[bi] > j)):
                _greedy(cand_iou, cand_col, cand_n, j, g0, bi, out_iou, out_rank)
                for g in range(n_gt):
                    best_iou[g0 + g, bi] = run_best[g]
                    best_rank[g0 + g, bi] = run_rank[g]
                bi += 1
            if j == n_pr:
                break
            for g in range(n_gt):
                v = pair_iou(convention, col_box[p0 + j], row_box[g0 + g], False)
                if v > run_best[g]:
                    run_best[g], run_rank[g] = v, j + 1
                if v <= 0.0 or (cand_n[g] == n_gt and v <= cand_iou[g, n_gt - 1]):
                    continue
                # insert after every candidate with IoU >= v (they have lower columns)
                pos = min(cand_n[g], n_gt - 1)
                while pos > 0 and cand_iou[g, pos - 1] < v:
                    cand_iou[g, pos], cand_col[g, pos] = cand_iou[g, pos - 1], cand_col[g, pos - 1]
                    pos -= 1
                cand_iou[g, pos], cand_col[g, pos] = v, j
                cand_n[g] = min(cand_n[g] + 1, n_gt)


def greedy_by_image(row_image, row_corners, col_image, col_corners, budgets):
    """Per image, rows (ground truths) against the first N columns (proposals, in rank order) for each budget N,
    by continuous-box IoU: ``(iou, rank, best_iou, best_rank)`` arrays of shape (rows, budgets); both sides sorted
    by image."""
    budgets = np.asarray(budgets, np.int64)
    groups = merge_groups(row_image, row_image, col_image, col_image, False)
    row_start, row_len, col_start = groups[:, 0], groups[:, 1], groups[:, 2]
    col_len = np.minimum(groups[:, 3], budgets[-1])
    n_rows, n_b = row_corners.shape[0], budgets.shape[0]
    out = (np.zeros((n_rows, n_b)), np.zeros((n_rows, n_b), np.int32), np.zeros((n_rows, n_b)),
           np.zeros((n_rows, n_b), np.int32))
    assign_by_iou(CORNERS, row_corners, col_corners, row_start, row_len, col_start, col_len, budgets, out)
    return out
