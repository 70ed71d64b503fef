"""Operating points: precision, recall, F1 and LRP of each category at every distinct score, and the per-category
score thresholds that optimise F1 or LRP — what a team deploys (Oksuz et al. TPAMI'21 §6: class-specific
LRP-optimal thresholds).

A threshold ``s`` keeps the detections with ``score >= s`` (equal scores stay together, so these are the points of
the ``score`` search of :mod:`evalengine.metrics.lrp`; its optimum is the LRP-optimal threshold here). At each point,
with G regular ground truths: ``precision = TP / (TP + FP)``, ``recall = TP / G``, ``f1 = 2 P R / (P + R)`` (0 when
TP = 0), and LRP in the official arithmetic. Ignored detections (crowd, out-of-range) pass thresholds but count in
neither TP nor FP, as in the matching.
"""

import numba
import numpy as np
import polars as pl

from evalengine.errors import check_option
from evalengine.metrics.outcomes import ranked_batches, threshold_index

CRITERIA = ("lrp", "f1")


@numba.njit(cache=True, nogil=True)
def _points_kernel(starts, score, tp, ignored, iou, n_gt, tau):
    """One row per (category, distinct score): category index, score, TP, FP, Σ IoU of the TPs (area range 0)."""
    n = score.shape[0]
    category, at, n_tp, n_fp, iou_sum = (np.empty(n, np.int64), np.empty(n), np.empty(n, np.int64),
                                         np.empty(n, np.int64), np.empty(n))
    rows = 0
    for c in range(starts.shape[0] - 1):
        if n_gt[c] == 0:
            continue
        tp_n = fp_n = 0
        total = 0.0
        for i in range(starts[c], starts[c + 1]):
            if tp[i]:
                tp_n += 1
                total += iou[i]
            elif not ignored[i]:
                fp_n += 1
            if i + 1 < starts[c + 1] and score[i + 1] == score[i]:
                continue
            category[rows], at[rows], n_tp[rows], n_fp[rows], iou_sum[rows] = c, score[i], tp_n, fp_n, total
            rows += 1
    return category[:rows], at[:rows], n_tp[:rows], n_fp[:rows], iou_sum[:rows]


def operating_points(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, category_ids, protocol,
                     iou_threshold: float | None = None, image_ids=None) -> pl.DataFrame:
    """One row per (category, distinct score), scores descending: ``n_tp, n_fp, n_fn, precision, recall, f1, lrp,
    lrp_loc, lrp_fp, lrp_fn`` of the detections kept at ``score >= threshold`` (area range 'all', categories with
    regular ground truth; ``iou_threshold``: one of the match table's, the first by default)."""
    t = threshold_index(protocol, iou_threshold)
    tau = protocol.iou_thresholds[t]
    parts = []
    for batch in ranked_batches(dt_matches, gt_matches, category_ids, protocol, t, 1, image_ids):
        n_gt = batch.n_gt[:, 0]
        category, score, n_tp, n_fp, iou_sum = _points_kernel(batch.starts, batch.score, batch.tp[:, 0],
                                                              batch.ignored[:, 0], batch.iou[:, 0], n_gt, tau)
        parts.append(pl.DataFrame({"category_id": batch.category_ids[category], "threshold": score,
                                   "n_gt": n_gt[category], "n_tp": n_tp, "n_fp": n_fp, "iou_sum": iou_sum}))
        del batch  # not held while the next batch is read
    tp, fp, gt = pl.col("n_tp"), pl.col("n_fp"), pl.col("n_gt")
    precision = pl.when(tp + fp > 0).then(tp / (tp + fp))
    recall = tp / gt
    loc = tp - pl.col("iou_sum")
    return (pl.concat(parts).with_columns((gt - tp).alias("n_fn"))
            .with_columns(precision.alias("precision"), recall.alias("recall"))
            .with_columns(
                pl.when(tp > 0).then(2 * pl.col("precision") * pl.col("recall")
                                     / (pl.col("precision") + pl.col("recall"))).otherwise(0.0).alias("f1"),
                ((loc / (1 - tau) + fp + pl.col("n_fn")) / (tp + fp + pl.col("n_fn"))).alias("lrp"),
                pl.when(tp > 0).then(loc / tp).alias("lrp_loc"),
                pl.when(tp + fp > 0).then(fp / (tp + fp)).alias("lrp_fp"),
                (pl.col("n_fn") / gt).alias("lrp_fn"))
            .drop("iou_sum"))


def optimal_thresholds(points: pl.DataFrame, criterion: str = "lrp") -> pl.DataFrame:
    """Per category the operating point of least LRP (``criterion="lrp"``) or greatest F1 (``"f1"``); ties go to the
    highest threshold (the fewest detections). A category without a true positive at any score keeps no threshold
    (its row is absent)."""
    check_option("criterion", criterion, CRITERIA)
    key = pl.col("lrp") if criterion == "lrp" else -pl.col("f1")
    return (points.filter(pl.col("n_tp") > 0).sort("category_id", key, pl.col("threshold"),
                                                   descending=[False, False, True], maintain_order=True)
            .group_by("category_id", maintain_order=True).first())


def kept_detections(detections: pl.LazyFrame, thresholds: pl.DataFrame) -> pl.LazyFrame:
    """The detections at their category's threshold (``score >= threshold``); categories without one keep none."""
    return (detections.join(thresholds.lazy().select("category_id", "threshold"), on="category_id", how="inner")
            .filter(pl.col("score") >= pl.col("threshold")).drop("threshold"))
