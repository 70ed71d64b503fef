"""Confusion matrices in the COCO matching convention: a query over the COCO match table and the ``pairs`` table.

Rows are ground-truth classes, columns predicted classes (scikit-learn's ``confusion_matrix`` orientation), each
with a last *background* entry (null ``category_id``). At one IoU threshold ``t`` of the protocol, in its first area
range (pycocotools' ``all``) and within its detection cap (``maxDets[-1]`` per image and category), a detection is
*kept* when its score is ``>=`` its class's threshold; then every kept detection and every regular ground truth is
counted exactly once:

1. **Diagonal** — a kept detection that pycocotools' ``evaluateImg`` makes a true positive at ``t``: (its class,
   its class). Greedy matching goes by descending score, so the true positives among the kept detections are the
   ones a matching of the kept detections alone would give (ties in score are kept or dropped together).
2. **Confusions** — the kept false positives of an image, by descending score (ties: file order), each take the
   ground truth of *another* class with the highest IoU ``>= t`` (ties: file order) that no kept true positive
   matched and no earlier confusion took: (that class, its class). One-to-one, as COCO's matching is, so that a row
   sums to the class's ground truths. This is what Ultralytics' ``ConfusionMatrix`` and the TF Object Detection
   confusion matrix report for a class swap, but on top of pycocotools' same-class matching instead of a class-blind
   one, so the diagonal is COCO's TP count.
3. **Background row** — any other kept false positive: (background, its class).
4. **Background column** — a regular ground truth neither matched nor taken: (its class, background), a miss.

Ignored objects are out, as in pycocotools: crowd and ``ignore`` ground truths (and any outside the area range)
are in no row and are never a confusion's target; a detection ignored at ``t`` (matched to one of them) is in no
column. Rows sum to each class's regular ground truths, columns to its kept, non-ignored detections; the
(background, background) cell is 0. Classes are the evaluated ones (``category_ids``); a class missing from a
per-class threshold frame, or with a null threshold (no operating point), keeps no detection.
"""

import numba
import numpy as np
import polars as pl

from evalengine.errors import InputError, ProtocolError
from evalengine.metrics.outcomes import threshold_index

OUTCOME_COLUMNS = ("image_id", "gt_category_id", "dt_category_id", "det_id", "gt_id")


@numba.njit(cache=True, nogil=True)
def _greedy_take(det, gt, n_det, n_gt):
    """Candidates in priority order (detection by score, then IoU): take each whose detection and ground truth are
    both still free."""
    det_done = np.zeros(n_det, np.bool_)
    gt_taken = np.zeros(n_gt, np.bool_)
    take = np.zeros(det.size, np.bool_)
    for i in range(det.size):
        if not det_done[det[i]] and not gt_taken[gt[i]]:
            det_done[det[i]] = True
            gt_taken[gt[i]] = True
            take[i] = True
    return take


def _thresholds(score_threshold) -> pl.LazyFrame | float:
    """A single score, or a ``category_id, threshold`` frame (``Evaluation.thresholds()``) made lazy."""
    if isinstance(score_threshold, (pl.DataFrame, pl.LazyFrame)):
        frame = score_threshold.lazy()
        missing = {"category_id", "threshold"} - set(frame.collect_schema().names())
        if missing:
            raise InputError(f"score thresholds: missing column(s) {sorted(missing)} (need category_id, threshold)")
        return frame.select(pl.col("category_id").cast(pl.Int64), pl.col("threshold").cast(pl.Float64))
    if not isinstance(score_threshold, (int, float)) or not np.isfinite(score_threshold):
        raise InputError(f"score threshold: expected a finite number or a category_id, threshold frame, "
                         f"got {score_threshold!r}")
    return float(score_threshold)


def confusion_outcomes(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, pairs: pl.LazyFrame, gt: pl.LazyFrame,
                       category_ids, protocol, iou_threshold: float | None = None, score_threshold=0.0,
                       image_ids=None) -> pl.DataFrame:
    """One row per counted object (:data:`OUTCOME_COLUMNS`): a kept detection (``det_id``; ``gt_id`` its true
    positive's or confusion's partner, null on the background row) or a missed ground truth (``det_id`` null,
    ``dt_category_id`` null). ``pairs`` must hold every pair with IoU >= ``iou_threshold``."""
    if not protocol.use_cats:
        raise ProtocolError("confusion matrix: the protocol pools the categories (use_cats off); classes are needed")
    t = threshold_index(protocol, iou_threshold)
    iou_threshold = protocol.iou_thresholds[t]
    cap = protocol.max_det_cap
    ids = pl.Series(list(category_ids), dtype=pl.Int64).implode()
    dets = dt_matches.filter(pl.col("category_id").is_in(ids) & (pl.col("dt_rank") < cap))
    gts = gt_matches.filter(pl.col("category_id").is_in(ids) & ((pl.col("ignored_bits") & 1) == 0))
    if image_ids is not None:
        images = pl.Series(list(image_ids), dtype=pl.Int64).implode()
        dets, gts = dets.filter(pl.col("image_id").is_in(images)), gts.filter(pl.col("image_id").is_in(images))
    thresholds = _thresholds(score_threshold)
    if isinstance(thresholds, float):
        dets = dets.filter(pl.col("score") >= thresholds)
    else:
        dets = dets.join(thresholds, on="category_id", how="inner").filter(pl.col("score") >= pl.col("threshold"))
    bit = 1 << t
    dets = (dets.filter((pl.col("ignored_bits").arr.get(0) & bit) == 0)
            .select("image_id", "det_id", "score", pl.col("category_id").alias("dt_category_id"),
                    ((pl.col("tp_bits").arr.get(0) & bit) != 0).alias("tp"),
                    pl.col("matched_gt_id").arr.get(t).alias("gt_id"))
            .collect())
    tp = dets.filter("tp")
    free_gt = (gts.select("image_id", "gt_id", pl.col("category_id").alias("gt_category_id"))
               .join(tp.lazy().select("image_id", "gt_id"), on=["image_id", "gt_id"], how="anti")
               .join(gt.select("image_id", "gt_id", "gt_order"), on=["image_id", "gt_id"], how="left")
               .collect())
    false_positives = dets.filter(~pl.col("tp")).drop("gt_id")
    # pycocotools' test is ``iou >= min(t, 1 - 1e-10)``
    candidates = (pairs.filter((pl.col("iou") >= min(iou_threshold, 1 - 1e-10))
                               & (pl.col("dt_category_id") != pl.col("gt_category_id")))
                  .select("image_id", "det_id", "gt_id", "iou")
                  .join(false_positives.lazy().select("image_id", "det_id", "score"), on=["image_id", "det_id"])
                  .join(free_gt.lazy(), on=["image_id", "gt_id"])
                  .sort("image_id", "score", "det_id", "iou", "gt_order", descending=[False, True, False, True, False])
                  .collect())
    det_index, gt_index = (candidates.select(pl.struct("image_id", key).rank("dense").cast(pl.Int64) - 1)
                           .to_series().to_numpy() for key in ("det_id", "gt_id"))
    take = _greedy_take(det_index, gt_index, candidates.height, candidates.height)
    confused = candidates.filter(pl.Series(take)).select("image_id", "det_id", "gt_id", "gt_category_id")
    taken = pl.concat([tp.select("image_id", "gt_id"), confused.select("image_id", "gt_id")])
    rows = [
        tp.select("image_id", pl.col("dt_category_id").alias("gt_category_id"), "dt_category_id", "det_id", "gt_id"),
        false_positives.join(confused, on=["image_id", "det_id"], how="left").select(OUTCOME_COLUMNS),
        free_gt.join(taken, on=["image_id", "gt_id"], how="anti").select(
            "image_id", "gt_category_id", pl.lit(None, pl.Int64).alias("dt_category_id"),
            pl.lit(None, pl.Int64).alias("det_id"), "gt_id"),
    ]
    return pl.concat([r.cast({c: pl.Int64 for c in OUTCOME_COLUMNS}) for r in rows]).sort(
        "image_id", "det_id", "gt_id", nulls_last=True)


def _labels(category_ids) -> pl.DataFrame:
    return pl.DataFrame({"category_id": [*category_ids, None]}, schema={"category_id": pl.Int64})


def confusion_matrix(outcomes: pl.DataFrame, category_ids) -> pl.DataFrame:
    """``gt_category_id, dt_category_id, count, fraction``: every cell of the (K + 1)² matrix (background: null),
    rows in ``category_ids`` order then background; ``fraction`` is the count over its row's sum (null for an empty
    row)."""
    labels = _labels(category_ids).with_row_index("order")
    grid = (labels.rename({"category_id": "gt_category_id", "order": "row"})
            .join(labels.rename({"category_id": "dt_category_id", "order": "column"}), how="cross"))
    counts = outcomes.group_by("gt_category_id", "dt_category_id").agg(pl.len().alias("count"))
    return (grid.join(counts, on=["gt_category_id", "dt_category_id"], how="left", nulls_equal=True)
            .with_columns(pl.col("count").fill_null(0).cast(pl.Int64))
            .with_columns(fraction=pl.col("count") / pl.col("count").sum().over("row"))
            .with_columns(pl.when(pl.col("fraction").is_nan()).then(None).otherwise("fraction").alias("fraction"))
            .sort("row", "column").drop("row", "column"))


def per_image_confusion(outcomes: pl.DataFrame) -> pl.DataFrame:
    """``image_id, gt_category_id, dt_category_id, count``: the non-zero cells of each image's matrix."""
    return (outcomes.group_by("image_id", "gt_category_id", "dt_category_id").agg(pl.len().alias("count").cast(pl.Int64))
            .sort("image_id", "gt_category_id", "dt_category_id", nulls_last=True))


def matrix_array(matrix: pl.DataFrame, normalize: bool = False) -> np.ndarray:
    """The (K + 1) × (K + 1) array of :func:`confusion_matrix` (rows: ground truth; last: background)."""
    n = int(round(np.sqrt(matrix.height)))
    values = matrix.get_column("fraction" if normalize else "count")
    return (values.fill_null(0.0) if normalize else values).to_numpy().reshape(n, n)
