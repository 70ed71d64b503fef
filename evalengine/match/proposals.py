"""Proposal-to-ground-truth matching for recall at every budget (Hosang et al., TPAMI 2016, §4.1, App. A).

Per image and budget N, the top-N ranked proposals are matched to all the image's ground truths,
class-agnostically, in two ways at once:

- ``iou``: the greedy one-to-one assignment of the toolbox's ``closest_candidates.m`` — repeatedly take the
  largest remaining IoU, then remove its row and column. Ties go to the first row, then the first column, of
  the (GT × proposal) matrix, which the toolbox transposes when there are more ground truths than proposals.
  A ground truth left without a partner has IoU 0. The assignment is recomputed for every budget (it is not
  monotone in N).
- ``best_iou``: the best IoU over the top-N, one proposal may serve several ground truths (ABO, Wang et al.'s
  hits); it is a running maximum over rank.

One pass over an image's proposals in rank order serves every budget: a ground truth can only be assigned one
of its ``n_gt`` best proposals so far (at most ``n_gt − 1`` are taken by the others before it), so only those
are kept as candidates, and the greedy assignment runs on them at each budget — the same pairs, in the same
order, as on the full matrix.
"""

import hashlib
import json
from dataclasses import asdict, dataclass

import numba
import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError
from evalengine.match.coco import merge_groups

# round(10.^(0:0.5:4)) of the toolbox
HOSANG_BUDGETS = (1, 3, 10, 32, 100, 316, 1000, 3162, 10000)


@dataclass(frozen=True)
class ProposalProtocol:
    """Hosang et al.'s recall protocol: ``budgets`` (proposals per image), and which ground truth counts.

    Their choices: every VOC box, difficult ones included ("our goal is to measure maximum recall"), and COCO
    without crowd annotations, which are dropped before matching (not treated as ignore regions).
    ``include_difficult`` applies when the ground truth has a ``difficult`` field.
    """

    budgets: tuple = HOSANG_BUDGETS
    drop_crowd: bool = True
    include_difficult: bool = True
    name: str = "hosang"

    def __post_init__(self):
        budgets = tuple(sorted({int(b) for b in self.budgets}))
        if not budgets or budgets[0] < 1:
            raise ProtocolError(f"budgets: positive integers are needed, got {list(self.budgets)}")
        object.__setattr__(self, "budgets", budgets)

    def match_params(self) -> dict:
        return asdict(self)

    def description(self) -> dict:
        return {"match": self.match_params()}

    def match_key(self) -> str:
        """``hosang`` for the defaults, else ``hosang-<hash of the parameters>``."""
        params = self.match_params()
        if params == ProposalProtocol().match_params():
            return self.name
        return f"{self.name}-{hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]}"


@numba.njit(cache=True, nogil=True, inline="always")
def _iou(a, b) -> float:
    """Continuous-box IoU of ``(x1, y1, x2, y2)`` rows; 0 for disjoint or empty boxes."""
    iw = min(a[2], b[2]) - max(a[0], b[0])
    ih = min(a[3], b[3]) - max(a[1], b[1])
    if iw <= 0.0 or ih <= 0.0:
        return 0.0
    inter = iw * ih
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0.0 else 0.0


@numba.njit(cache=True, nogil=True)
def _greedy(cand_iou, cand_col, cand_n, n_used, g0, bi, out_iou, out_rank):
    """The toolbox's greedy assignment over the candidate pairs; writes each GT's partner for budget ``bi``."""
    n_gt, k = cand_iou.shape
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
def _hosang_kernel(gt_box, pr_box, gt_start, gt_len, pr_start, pr_len, budgets):
    n_b = budgets.shape[0]
    n_gt_all = gt_box.shape[0]
    out_iou = np.zeros((n_gt_all, n_b))
    out_rank = np.zeros((n_gt_all, n_b), np.int32)
    best_iou = np.zeros((n_gt_all, n_b))
    best_rank = np.zeros((n_gt_all, n_b), np.int32)
    for grp in range(gt_start.shape[0]):
        g0, n_gt, p0 = gt_start[grp], gt_len[grp], pr_start[grp]
        n_pr = min(pr_len[grp], budgets[n_b - 1])
        if n_gt == 0:
            continue
        cand_iou = np.empty((n_gt, n_gt))
        cand_col = np.empty((n_gt, n_gt), np.int64)
        cand_n = np.zeros(n_gt, np.int64)
        run_best = np.zeros(n_gt)
        run_rank = np.zeros(n_gt, np.int32)
        bi = 0
        for j in range(n_pr + 1):
            used = j
            while bi < n_b and (budgets[bi] == used or (j == n_pr and budgets[bi] > used)):
                _greedy(cand_iou, cand_col, cand_n, used, g0, bi, out_iou, out_rank)
                for g in range(n_gt):
                    best_iou[g0 + g, bi] = run_best[g]
                    best_rank[g0 + g, bi] = run_rank[g]
                bi += 1
            if j == n_pr:
                break
            for g in range(n_gt):
                v = _iou(gt_box[g0 + g], pr_box[p0 + j])
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
    return out_iou, out_rank, best_iou, best_rank


def greedy_by_image(row_image, row_corners, col_image, col_corners, budgets):
    """Per image, rows (ground truths) against the first N columns (proposals, in rank order) for each budget N:
    ``(iou, rank, best_iou, best_rank)`` arrays of shape (rows, budgets); both sides sorted by image."""
    groups = merge_groups(row_image, row_image, col_image, col_image, False)
    return _hosang_kernel(row_corners, col_corners, groups[:, 0], groups[:, 1], groups[:, 2], groups[:, 3],
                          np.asarray(budgets, np.int64))


def evaluated_gt(gt: pl.DataFrame, protocol: ProposalProtocol) -> pl.DataFrame:
    """The ground truths recall is measured on, in (image, file) order."""
    keep = pl.lit(True)
    if protocol.drop_crowd:
        keep &= ~pl.col("iscrowd")
    if not protocol.include_difficult and "difficult" in gt.columns:
        keep &= ~pl.col("difficult").cast(pl.Boolean).fill_null(False)
    return gt.filter(keep).sort("image_id", "gt_order")


def _corners(frame: pl.DataFrame) -> np.ndarray:
    return np.ascontiguousarray(
        frame.select("x", "y", (pl.col("x") + pl.col("w")).alias("x2"), (pl.col("y") + pl.col("h")).alias("y2")).to_numpy().astype(np.float64)
    ).reshape(-1, 4)


def match_proposal_shard(gt: pl.DataFrame, proposals: pl.DataFrame, protocol: ProposalProtocol):
    """Match one shard; return ``(gt_matches, image_counts)`` (schemas in :mod:`evalengine.schema`)."""
    gt = evaluated_gt(gt, protocol)
    budgets = np.array(protocol.budgets, np.int64)
    ranked = proposals.filter(pl.col("rank").is_not_null() & (pl.col("rank") <= int(budgets[-1])))
    gt_image = gt.get_column("image_id").to_numpy().astype(np.int64)
    iou, rank, best, best_rank = greedy_by_image(gt_image, _corners(gt),
                                                 ranked.get_column("image_id").to_numpy().astype(np.int64),
                                                 _corners(ranked), budgets)
    n_b = len(budgets)
    gt_matches = pl.DataFrame({
        "image_id": np.repeat(gt_image, n_b),
        "gt_id": np.repeat(gt.get_column("gt_id").to_numpy(), n_b),
        "category_id": np.repeat(gt.get_column("category_id").to_numpy(), n_b),
        "budget": np.tile(budgets, gt.height),
        "iou": iou.reshape(-1),
        "matched_rank": rank.reshape(-1),
        "best_iou": best.reshape(-1),
        "best_rank": best_rank.reshape(-1),
    }).with_columns(pl.col("matched_rank", "best_rank").replace(0, None)).cast(schema.PROPOSAL_GT_MATCHES)
    return gt_matches, image_counts(ranked, protocol.budgets)


def image_counts(proposals: pl.DataFrame, budgets) -> pl.DataFrame:
    """Proposals evaluated per image and budget: min(budget, ranked proposals of the image)."""
    per_image = proposals.filter(pl.col("rank").is_not_null()).group_by("image_id").len("n_ranked")
    return (per_image.join(pl.DataFrame({"budget": list(budgets)}), how="cross")
            .select("image_id", "budget", pl.min_horizontal("n_ranked", "budget").alias("n_proposals"))
            .cast(schema.PROPOSAL_IMAGE_COUNTS).sort("image_id", "budget"))


def as_detections(proposals: pl.DataFrame, ordering: str, default_category: int) -> pl.DataFrame:
    """Ranked proposals (duplicates left out) as detections for the ``coco`` protocol with ``useCats=0``.

    A run ordered by descending score keeps its scores and categories, so the order is pycocotools' own
    (score, then category, then file position — the order ``loadRes`` + ``evaluateImg`` give with
    ``useCats=0``); any other run gets ``score = −rank``, so its own order is kept. Proposals without a
    category count as ``default_category``."""
    score = pl.col("score") if ordering == "score-desc" else -pl.col("rank").cast(pl.Float64)
    return (proposals.filter(pl.col("rank").is_not_null())
            .select(pl.col("proposal_id").alias("det_id"), "image_id",
                    pl.col("category_id").fill_null(default_category), score.alias("score"), "x", "y", "w", "h",
                    (pl.col("w") * pl.col("h")).alias("area"))
            .cast(schema.DT))
