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

Masks (segmented proposals) take the same assignment over precomputed similarity blocks (:func:`assign_blocks`, a
mask IoU is a walk over run lengths, not a formula to fuse), computed per chunk of images
(:func:`greedy_blocks_by_image`).
"""

import numba
import numpy as np

from evalengine.geometry.box_iou import CORNERS, pair_iou
from evalengine.match.groups import block_chunks, merge_groups


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


@numba.njit(cache=True, nogil=True, inline="always")
def _close_budgets(j, n_pr, bi, budgets, cand_iou, cand_col, cand_n, run_best, run_rank, g0, out) -> int:
    """Before column ``j``: write every budget that ends there (or beyond the group's last column) to ``out`` =
    (iou, rank, best_iou, best_rank); the index of the next budget."""
    out_iou, out_rank, best_iou, best_rank = out
    n_gt = run_best.shape[0]
    while bi < budgets.shape[0] and (budgets[bi] == j or (j == n_pr and budgets[bi] > j)):
        _greedy(cand_iou, cand_col, cand_n, j, g0, bi, out_iou, out_rank)
        for g in range(n_gt):
            best_iou[g0 + g, bi] = run_best[g]
            best_rank[g0 + g, bi] = run_rank[g]
        bi += 1
    return bi


@numba.njit(cache=True, nogil=True, inline="always")
def _offer(v, g, j, cand_iou, cand_col, cand_n, run_best, run_rank) -> None:
    """Column ``j``'s IoU ``v`` with row ``g``: the running best, and a candidate if among the row's best."""
    n_gt = run_best.shape[0]
    if v > run_best[g]:
        run_best[g], run_rank[g] = v, j + 1
    if v <= 0.0 or (cand_n[g] == n_gt and v <= cand_iou[g, n_gt - 1]):
        return
    # insert after every candidate with IoU >= v (they have lower columns)
    pos = min(cand_n[g], n_gt - 1)
    while pos > 0 and cand_iou[g, pos - 1] < v:
        cand_iou[g, pos], cand_col[g, pos] = cand_iou[g, pos - 1], cand_col[g, pos - 1]
        pos -= 1
    cand_iou[g, pos], cand_col[g, pos] = v, j
    cand_n[g] = min(cand_n[g] + 1, n_gt)


@numba.njit(cache=True, nogil=True, inline="always")
def _group_state(n_gt):
    """(candidate IoUs, their columns, candidates per row, running best, its rank) of a group of ``n_gt`` rows."""
    return (np.empty((n_gt, n_gt)), np.empty((n_gt, n_gt), np.int64), np.zeros(n_gt, np.int64), np.zeros(n_gt),
            np.zeros(n_gt, np.int32))


@numba.njit(cache=True, nogil=True)
def assign_by_iou(convention, row_box, col_box, row_start, row_len, col_start, col_len, budgets, out):
    """Assign every group at every budget (columns already cut to the largest budget), IoU in ``convention``;
    ``out`` = (iou, rank, best_iou, best_rank), each (rows, budgets), written in place (ranks are 1-based, 0 for
    none)."""
    for grp in range(row_start.shape[0]):
        g0, n_gt, p0, n_pr = row_start[grp], row_len[grp], col_start[grp], col_len[grp]
        if n_gt == 0:
            continue
        cand_iou, cand_col, cand_n, run_best, run_rank = _group_state(n_gt)
        bi = 0
        for j in range(n_pr + 1):
            bi = _close_budgets(j, n_pr, bi, budgets, cand_iou, cand_col, cand_n, run_best, run_rank, g0, out)
            if j == n_pr:
                break
            for g in range(n_gt):
                v = pair_iou(convention, col_box[p0 + j], row_box[g0 + g], False)
                _offer(v, g, j, cand_iou, cand_col, cand_n, run_best, run_rank)


@numba.njit(cache=True, nogil=True)
def assign_blocks(values, offsets, lo, hi, row_start, row_len, col_len, budgets, out):
    """:func:`assign_by_iou` over precomputed similarity blocks of groups ``[lo, hi)`` (a
    :func:`evalengine.geometry.masks.mask_iou_blocks` chunk: group ``k``'s ``col_len[k] × row_len[k]`` values,
    row-major by column), the same assignment and tie order."""
    for grp in range(lo, hi):
        g0, n_gt, n_pr, at = row_start[grp], row_len[grp], col_len[grp], offsets[grp - lo]
        if n_gt == 0:
            continue
        cand_iou, cand_col, cand_n, run_best, run_rank = _group_state(n_gt)
        bi = 0
        for j in range(n_pr + 1):
            bi = _close_budgets(j, n_pr, bi, budgets, cand_iou, cand_col, cand_n, run_best, run_rank, g0, out)
            if j == n_pr:
                break
            for g in range(n_gt):
                _offer(values[at + j * n_gt + g], g, j, cand_iou, cand_col, cand_n, run_best, run_rank)


@numba.njit(cache=True, nogil=True)
def best_blocks(values, offsets, lo, hi, row_start, row_len, col_len, budgets, best, best_rank):
    """Only the running best of :func:`assign_blocks` (``best_iou``, ``best_rank``: the first column of the largest
    value among the first N, 0 for none above 0) of groups ``[lo, hi)``, written to ``best`` and ``best_rank``."""
    for grp in range(lo, hi):
        g0, n_gt, n_pr, at = row_start[grp], row_len[grp], col_len[grp], offsets[grp - lo]
        run_best, run_rank = np.zeros(n_gt), np.zeros(n_gt, np.int32)
        bi = 0
        for j in range(n_pr + 1):
            while bi < budgets.shape[0] and (budgets[bi] == j or (j == n_pr and budgets[bi] > j)):
                best[g0:g0 + n_gt, bi], best_rank[g0:g0 + n_gt, bi] = run_best, run_rank
                bi += 1
            for g in range(n_gt if j < n_pr else 0):
                v = values[at + j * n_gt + g]
                if v > run_best[g]:
                    run_best[g], run_rank[g] = v, j + 1


def image_groups(row_image, col_image, budgets) -> tuple:
    """``(row_start, row_len, col_start, col_len)`` of every image on either side (both sorted by image), the columns
    cut to the largest budget."""
    groups = merge_groups(row_image, row_image, col_image, col_image, False)
    col_len = np.minimum(groups[:, 3], budgets[-1])
    return tuple(np.ascontiguousarray(a) for a in (groups[:, 0], groups[:, 1], groups[:, 2], col_len))


def _outputs(n_rows: int, n_b: int) -> tuple:
    return (np.zeros((n_rows, n_b)), np.zeros((n_rows, n_b), np.int32), np.zeros((n_rows, n_b)),
            np.zeros((n_rows, n_b), np.int32))


def greedy_by_image(row_image, row_corners, col_image, col_corners, budgets):
    """Per image, rows (ground truths) against the first N columns (proposals, in rank order) for each budget N,
    by continuous-box IoU: ``(iou, rank, best_iou, best_rank)`` arrays of shape (rows, budgets); both sides sorted
    by image."""
    budgets = np.asarray(budgets, np.int64)
    row_start, row_len, col_start, col_len = image_groups(row_image, col_image, budgets)
    out = _outputs(row_corners.shape[0], budgets.shape[0])
    assign_by_iou(CORNERS, row_corners, col_corners, row_start, row_len, col_start, col_len, budgets, out)
    return out


def greedy_blocks_by_image(row_image, col_image, budgets, similarity):
    """:func:`greedy_by_image` with the similarity of a kernel that gives blocks (mask IoU): ``similarity(groups)``
    returns a function of a group range ``[lo, hi)`` giving its ``(values, offsets)``, computed in chunks of bounded
    size (:func:`evalengine.match.groups.block_chunks`)."""
    budgets = np.asarray(budgets, np.int64)
    groups = image_groups(row_image, col_image, budgets)
    row_start, row_len, _, col_len = groups
    out = _outputs(row_image.shape[0], budgets.shape[0])
    blocks = similarity(groups)
    for lo, hi in block_chunks(row_len, col_len):
        values, offsets = blocks(lo, hi)
        assign_blocks(values, offsets, lo, hi, row_start, row_len, col_len, budgets, out)
    return out


def best_blocks_by_image(row_image, col_image, budgets, similarity):
    """``(best, best_rank)`` of :func:`greedy_blocks_by_image` alone (no assignment), for a second similarity of the
    same pairs (F̃b beside the mask IoU)."""
    budgets = np.asarray(budgets, np.int64)
    row_start, row_len, _, col_len = groups = image_groups(row_image, col_image, budgets)
    best, best_rank = _outputs(row_image.shape[0], budgets.shape[0])[2:]
    blocks = similarity(groups)
    for lo, hi in block_chunks(row_len, col_len):
        values, offsets = blocks(lo, hi)
        best_blocks(values, offsets, lo, hi, row_start, row_len, col_len, budgets, best, best_rank)
    return best, best_rank
