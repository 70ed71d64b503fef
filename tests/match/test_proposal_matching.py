"""The proposal matcher against a brute-force transcription of the toolbox's greedy matching."""

import numpy as np
import polars as pl
import pytest

from evalengine.match.proposals import ProposalProtocol, match_proposal_shard


def _iou_matrix(gt, pr):
    """IoU of every (ground truth, proposal) pair of ``x1, y1, x2, y2`` rows, written out plainly."""
    out = np.zeros((len(gt), len(pr)))
    for i, a in enumerate(gt):
        for j, b in enumerate(pr):
            iw = min(a[2], b[2]) - max(a[0], b[0])
            ih = min(a[3], b[3]) - max(a[1], b[1])
            if iw > 0 and ih > 0:
                union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - iw * ih
                out[i, j] = iw * ih / union if union > 0 else 0.0
    return out


def brute_force_greedy(gt, pr):
    """closest_candidates.m on the boxes' IoU matrix (:func:`greedy_on_matrix`)."""
    return greedy_on_matrix(_iou_matrix(gt, pr))


def greedy_on_matrix(m):
    """closest_candidates.m on a (ground truths × proposals) IoU matrix: max per row (first column), then the first
    row with the largest of those; the matrix is transposed when there are more ground truths than proposals.
    ``(IoU of each ground truth with its partner, 0 if none; the partner's 1-based rank or None)``."""
    n_gt, n_pr = m.shape
    transposed = n_gt > n_pr
    work = m.T.copy() if transposed else m.copy()
    result, partner = np.zeros(n_gt), [None] * n_gt
    for _ in range(work.shape[0]):
        if work.size == 0:
            break
        col_per_row = np.argmax(work, axis=1)
        max_per_row = work[np.arange(work.shape[0]), col_per_row]
        row = int(np.argmax(max_per_row))
        if max_per_row[row] == -np.inf:
            break
        col = int(col_per_row[row])
        g = col if transposed else row
        result[g] = m[g, row if transposed else col]
        partner[g] = (row if transposed else col) + 1 if result[g] > 0 else None  # a 1-based rank
        work[row, :] = -np.inf
        work[:, col] = -np.inf
    return result, partner


def _random_image(rng, n_gt, n_pr, integer):
    def boxes(n):
        xy = rng.uniform(0, 40, (n, 2))
        wh = rng.uniform(1, 30, (n, 2))
        if integer:  # small integer lattice: many exact IoU ties
            xy, wh = np.floor(xy / 4), np.floor(wh / 4) + 1
        return np.hstack([xy, wh])
    gt, pr = boxes(n_gt), boxes(n_pr)
    if n_pr and n_gt and rng.random() < 0.5:  # exact copies of ground truths and of other proposals
        pr[rng.integers(0, n_pr)] = gt[rng.integers(0, n_gt)]
        pr[rng.integers(0, n_pr)] = pr[rng.integers(0, n_pr)]
    return gt, pr


def _corners(xywh):
    return [(x, y, x + w, y + h) for x, y, w, h in xywh]


@pytest.mark.parametrize("seed", range(6))
def test_greedy_and_best_overlap_equal_brute_force_at_every_budget(seed):
    rng = np.random.default_rng(seed)
    budgets = (1, 2, 3, 5, 8, 13, 40)
    gt_rows, pr_rows, images = [], [], {}
    for image_id in range(60):
        gt, pr = _random_image(rng, int(rng.integers(0, 9)), int(rng.integers(0, 30)), integer=rng.random() < 0.6)
        images[image_id] = (gt, pr)
        gt_rows += [dict(gt_id=1000 * image_id + i, image_id=image_id, category_id=int(rng.integers(1, 4)),
                         x=b[0], y=b[1], w=b[2], h=b[3], iscrowd=False, gt_order=i) for i, b in enumerate(gt)]
        pr_rows += [dict(image_id=image_id, proposal_id=len(pr_rows) + 1 + j, score=None, x=b[0], y=b[1], w=b[2],
                         h=b[3], rank=j + 1) for j, b in enumerate(pr)]
    gt_frame = pl.DataFrame(gt_rows, schema_overrides={"gt_order": pl.Int64})
    pr_frame = pl.DataFrame(pr_rows, schema_overrides={"score": pl.Float64, "rank": pl.Int32})
    matches, counts = match_proposal_shard(gt_frame, pr_frame, ProposalProtocol(budgets=budgets))
    n_checked = 0
    for image_id, (gt, pr) in images.items():
        for budget in budgets:
            got = matches.filter((pl.col("image_id") == image_id) & (pl.col("budget") == budget)).sort("gt_id")
            top = _corners(pr[:budget])
            expected, partner = brute_force_greedy(_corners(gt), top)
            assert got.get_column("iou").to_list() == expected.tolist()
            assert got.get_column("matched_rank").to_list() == partner
            m = _iou_matrix(_corners(gt), top)
            best = m.max(axis=1) if len(top) else np.zeros(len(gt))
            assert got.get_column("best_iou").to_list() == best.tolist()
            first_best = [int(np.argmax(row)) + 1 if row.max() > 0 else None for row in m] if len(top) else [None] * len(gt)
            assert got.get_column("best_rank").to_list() == first_best
            n_checked += len(gt)
        if len(pr):
            used = counts.filter(pl.col("image_id") == image_id).sort("budget").get_column("n_proposals").to_list()
            assert used == [min(b, len(pr)) for b in budgets]
    assert n_checked > 500
