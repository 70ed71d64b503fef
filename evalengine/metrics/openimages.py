"""OpenImages AP as the TF Object Detection API computes it (``ObjectDetectionEvaluation.evaluate``,
``utils/metrics.py`` ``compute_precision_recall`` and ``compute_average_precision``), from an OpenImages match table.

Per class, the reference concatenates each image's entries in the order images were added (our ``image_id`` order):
the image's evaluated detections that are not ignored, in its own order (``dt_rank``; label 1 for a true positive, 0
for a false positive), then one entry per group-of box that holds a detection scored above 0 (label
``group_of_weight`` at the box's ``group_score``; none when the weight is 0). It sorts them with
``np.argsort(scores)[::-1]`` (ties in NumPy's order, so NumPy sorts here too; each entry's place is kept in the
accumulation, ``order``, for the SQL view), and

- ``precision = cumsum(tp) / (cumsum(tp) + cumsum(label <= 0))``, ``recall = cumsum(tp) / num_gt``, where ``num_gt``
  counts regular non-difficult boxes and ``group_of_weight`` per non-difficult group-of box;
- the points with recall in ``[recall_lower_bound, recall_upper_bound]`` are kept (the whole curve by default);
- AP is VOC's all-point area: precision padded with 0 at both ends, made non-increasing from the right, summed
  (``np.sum``) over the steps of recall; no entry gives 0; a class without ground truth (``num_gt == 0``) is NaN;
- the mAP is ``np.nanmean`` over the categories; ``weighted`` (``use_weighted_mean_ap``) pools the entries of every
  class with ground truth, in category order, into one curve instead.
"""

from dataclasses import dataclass

import numpy as np
import polars as pl

from evalengine.match.group_of import FALSE_POSITIVE, TRUE_POSITIVE


@dataclass(frozen=True)
class OpenImagesAccumulation:
    """Per category (in ``category_ids`` order): AP (NaN without ground truth), ``num_gt`` and the entries' TP sum;
    the mAP."""

    category_ids: np.ndarray
    ap: np.ndarray
    num_gt: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    mean_ap: float
    # ``category_id, image_id, side, at, position``: each entry of a class with ground truth and its place in the
    # class's curve (``np.argsort(scores)[::-1]``), kept for the SQL view (ties in NumPy's unstable order)
    order: pl.DataFrame

    def frame(self) -> pl.DataFrame:
        return pl.DataFrame({"category_id": self.category_ids, "ap": self.ap, "num_gt": self.num_gt, "tp": self.tp,
                             "fp": self.fp}, schema={"category_id": pl.Int64, "ap": pl.Float64, "num_gt": pl.Float64,
                                                    "tp": pl.Float64, "fp": pl.Int64})


def entries(dt: pl.LazyFrame, gt: pl.LazyFrame, group_of_weight: float) -> pl.LazyFrame:
    """``category_id, image_id, side, at, score, label`` in the reference's concatenation order (category, image,
    side, rank)."""
    detections = dt.filter(pl.col("outcome").is_in([FALSE_POSITIVE, TRUE_POSITIVE])).select(
        "category_id", "image_id", pl.lit(0, pl.Int8).alias("side"), pl.col("dt_rank").cast(pl.Int64).alias("at"),
        "score", (pl.col("tp_bits").arr.first() > 0).cast(pl.Float64).alias("label"))
    # a group-of box without a mask (instance segmentation: ignored_bits bit 1) gives no entry
    groups = gt.filter(pl.col("group_of") & (pl.col("group_score") > 0) & pl.lit(group_of_weight > 0)
                       & (pl.col("ignored_bits") & 2 == 0)).select(
        "category_id", "image_id", pl.lit(1, pl.Int8).alias("side"), pl.col("gt_id").alias("at"),
        pl.col("group_score").alias("score"), pl.lit(float(group_of_weight)).alias("label"))
    return pl.concat([detections, groups]).sort("category_id", "image_id", "side", "at")


def ground_truth_counts(gt: pl.LazyFrame, group_of_weight: float) -> pl.LazyFrame:
    """``category_id, num_gt``: per image ``regular + group_of_weight × group-of`` (non-difficult), summed over the
    images in order, as ``_update_ground_truth_statistics`` accumulates."""
    counted = gt.filter(pl.col("ignored_bits") == 0)
    per_image = counted.group_by("category_id", "image_id").agg(
        (~pl.col("group_of")).sum().cast(pl.Float64).alias("regular"),
        pl.col("group_of").sum().cast(pl.Float64).alias("groups"))
    per_image = per_image.with_columns((pl.col("regular") + group_of_weight * pl.col("groups")).alias("n"))
    return per_image.sort("category_id", "image_id").group_by("category_id", maintain_order=True).agg(
        pl.col("n").cum_sum().last().alias("num_gt"))


def precision_recall(scores: np.ndarray, labels: np.ndarray, num_gt: float, order: np.ndarray | None = None) -> tuple:
    """``compute_precision_recall``: the curve in ``np.argsort(scores)[::-1]`` order (``order``, when computed)."""
    order = np.argsort(scores)[::-1] if order is None else order
    tp = labels[order]
    cum_tp, cum_fp = np.cumsum(tp), np.cumsum((tp <= 0).astype(float))
    return cum_tp.astype(float) / (cum_tp + cum_fp), cum_tp.astype(float) / num_gt


def average_precision(precision: np.ndarray, recall: np.ndarray) -> float:
    """``compute_average_precision``: VOC's all-point area."""
    if not precision.size:
        return 0.0
    recall = np.concatenate([[0], recall, [1]])
    precision = np.maximum.accumulate(np.concatenate([[0], precision, [0]])[::-1])[::-1]
    steps = np.where(recall[1:] != recall[:-1])[0] + 1
    return float(np.sum((recall[steps] - recall[steps - 1]) * precision[steps]))


def _bounded_ap(scores, labels, num_gt, bounds, order=None) -> float:
    precision, recall = precision_recall(scores, labels, num_gt, order)
    kept = (recall >= bounds[0]) & (recall <= bounds[1])
    return average_precision(precision[kept], recall[kept])


def accumulate(dt: pl.LazyFrame, gt: pl.LazyFrame, category_ids, group_of_weight: float,
               recall_bounds: tuple = (0.0, 1.0), weighted: bool = False) -> OpenImagesAccumulation:
    """AP per category and the mAP (see the module's docstring)."""
    category_ids = np.asarray(category_ids, np.int64)
    rows = entries(dt, gt, group_of_weight).collect()
    counts = ground_truth_counts(gt, group_of_weight).collect()
    num_gt = np.zeros(category_ids.shape[0])
    at = {int(c): i for i, c in enumerate(category_ids)}
    for category, n in counts.iter_rows():
        if category in at:
            num_gt[at[category]] = n
    cats = rows.get_column("category_id").to_numpy()
    scores, labels = rows.get_column("score").to_numpy(), rows.get_column("label").to_numpy()
    bounds = np.searchsorted(cats, category_ids), np.searchsorted(cats, category_ids, side="right")
    ap, tp, fp = np.full(category_ids.shape[0], np.nan), np.zeros(category_ids.shape[0]), np.zeros(category_ids.shape[0], np.int64)
    pooled, positions = [], np.full(rows.height, -1, np.int64)
    for i in range(category_ids.shape[0]):  # one NumPy sort per class, as the reference
        lo, hi = bounds[0][i], bounds[1][i]
        tp[i], fp[i] = labels[lo:hi].sum(), int((labels[lo:hi] <= 0).sum())
        if num_gt[i] == 0:
            continue
        pooled.append((lo, hi))
        order = np.argsort(scores[lo:hi])[::-1]
        positions[lo + order] = np.arange(hi - lo)
        ap[i] = _bounded_ap(scores[lo:hi], labels[lo:hi], num_gt[i], recall_bounds, order)
    if weighted:
        index = np.concatenate([np.arange(lo, hi) for lo, hi in pooled]) if pooled else np.zeros(0, np.int64)
        mean_ap = _bounded_ap(scores[index], labels[index], num_gt.sum(), recall_bounds) if pooled else np.nan
    else:
        mean_ap = float(np.nanmean(ap)) if (~np.isnan(ap)).any() else float("nan")
    order = rows.select("category_id", "image_id", "side", "at", pl.Series("position", positions)).filter(
        pl.col("position") >= 0)
    return OpenImagesAccumulation(category_ids, ap, num_gt, tp, fp, float(mean_ap), order)


def cor_loc(num_gt_images, num_correct) -> np.ndarray:
    """``metrics.compute_cor_loc`` (Deselaers et al., ECCV 2010): per class, the share of its images with ground truth
    whose top-scoring detection localises it; NaN for a class without such an image."""
    num_gt_images, num_correct = np.asarray(num_gt_images), np.asarray(num_correct)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(num_gt_images == 0, np.nan, num_correct / num_gt_images)


def cor_loc_counts(gt: pl.LazyFrame) -> pl.LazyFrame:
    """``category_id, num_gt_images, num_correct``: the images with a ground truth of the class (any: difficult,
    group-of and, for masks, mask-less ones count, as ``_update_ground_truth_statistics``) and those of them whose
    class is correctly localised (the match table's ``corloc``)."""
    per_image = gt.group_by("category_id", "image_id").agg(pl.col("corloc").any())
    return per_image.group_by("category_id").agg(pl.len().cast(pl.Int64).alias("num_gt_images"),
                                                 pl.col("corloc").sum().cast(pl.Int64).alias("num_correct"))


def recall_at_k(labels: np.ndarray, rank: np.ndarray, num_gt: float, k: int) -> float:
    """``metrics.compute_recall_at_k``: each image's first ``k`` labels summed (``np.sum`` of them in order: True or
    a positive value counts as its value) over ``num_gt``. ``labels`` holds the images' lists one after the other, in
    score order; ``rank`` is each entry's position in its image's list (``match.groups.rank_in_group``)."""
    return np.sum(labels[rank < k]) / num_gt


def median_rank_at_k(labels: np.ndarray, rank: np.ndarray, k: int) -> float:
    """``metrics.compute_median_rank_at_k``: the median position of the true positives (label > 0) among each
    image's first ``k`` (``labels`` and ``rank`` as :func:`recall_at_k`'s)."""
    return np.median(rank[(rank < k) & (labels > 0)])

