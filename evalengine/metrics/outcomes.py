"""A match table read as ranked outcomes: for a batch of categories, every evaluated detection in the protocol's
accumulation order (score descending, ties by ``protocol.tie_order``: pycocotools' mergesort for COCO, the devkit's
file order for VOC) with, per area range, whether it is a true positive, ignored, and its partner's IoU — at one
IoU threshold. The score-threshold metrics (LRP, precision/recall/F1 at a score) are prefix sums over these rows
(the prefix property of greedy matching, spec-detection §2.6)."""

from dataclasses import dataclass

import numpy as np
import polars as pl

from evalengine.errors import ProtocolError
from evalengine.metrics.ap import category_batches, regular_gt_counts

BATCH_ROWS = 4_000_000  # detections held at once


@dataclass(frozen=True)
class RankedBatch:
    """Categories ``category_ids`` (rows ``starts[k]:starts[k + 1]`` are category ``k``'s), arrays by row and area
    range: ``tp``, ``ignored`` (bool) and ``iou`` (the partner's IoU, NaN without one); ``n_gt[k, a]`` regular
    ground truths."""

    category_ids: np.ndarray
    starts: np.ndarray
    score: np.ndarray
    tp: np.ndarray
    ignored: np.ndarray
    iou: np.ndarray
    n_gt: np.ndarray


def threshold_index(protocol, iou_threshold: float | None) -> int:
    """Index of ``iou_threshold`` in the protocol's thresholds (None: the first, as the official LRP code uses
    ``iouThrs[0]``); the partner's IoU is stored per area range only at the first threshold."""
    thresholds = list(protocol.iou_thresholds)
    if iou_threshold is None:
        return 0
    if iou_threshold not in thresholds:
        raise ProtocolError(f"IoU threshold {iou_threshold} is not one of the match table's {thresholds}")
    return thresholds.index(iou_threshold)


def _outcome_columns(n_area: int, t: int) -> list:
    """Per area range ``a``: ``tp{a}``, ``ig{a}`` at threshold ``t`` and ``iou{a}`` (area 0: ``matched_iou[t]``; the
    others: ``area_iou[a]``, which is the IoU at the first threshold)."""
    columns, bit = [], pl.lit(1 << t, dtype=pl.UInt64)
    for a in range(n_area):
        columns += [((pl.col("tp_bits").arr.get(a) & bit) != 0).alias(f"tp{a}"),
                    ((pl.col("ignored_bits").arr.get(a) & bit) != 0).alias(f"ig{a}"),
                    (pl.col("matched_iou").arr.get(t) if a == 0 else pl.col("area_iou").arr.get(a))
                    .fill_null(np.nan).alias(f"iou{a}")]
    return columns


def ranked_batches(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, category_ids, protocol, t: int = 0,
                   area_ranges: int | None = None, image_ids=None, batch_rows: int = BATCH_ROWS):
    """Yield a :class:`RankedBatch` per batch of categories (of the first ``area_ranges`` area ranges; all by
    default). ``image_ids`` restricts the table to those images (each image is matched on its own)."""
    n_area = area_ranges or len(protocol.area_ranges)
    if t and n_area > 1:
        raise ProtocolError("outcomes per area range need the match table's first IoU threshold "
                            f"({protocol.iou_thresholds[0]}): match with that threshold first")
    if image_ids is not None:
        subset = pl.Series(np.asarray(image_ids, dtype=np.int64)).implode()
        dt_matches = dt_matches.filter(pl.col("image_id").is_in(subset))
        gt_matches = gt_matches.filter(pl.col("image_id").is_in(subset))
    use_cats = getattr(protocol, "use_cats", True)
    category_ids = np.asarray(category_ids if use_cats else [-1], dtype=np.int64)
    if not use_cats:  # categories pooled (pycocotools useCats=0): one pseudo-category -1
        dt_matches = dt_matches.with_columns(pl.lit(-1, dtype=pl.Int64).alias("category_id"))
    n_gt = regular_gt_counts(gt_matches, category_ids, protocol)[:, :n_area]
    score = (pl.col("score") + 0.0).alias("score")  # -0.0 ties with 0.0, as in the references' sorts
    keys = ["category_id", "score", *protocol.tie_order]
    for k_lo, k_hi in category_batches(dt_matches, category_ids, batch_rows):
        batch = pl.Series(category_ids[k_lo:k_hi]).implode()
        frame = (dt_matches.filter(pl.col("category_id").is_in(batch))
                 .select("category_id", score, *protocol.tie_order, *_outcome_columns(n_area, t))
                 .sort(keys, descending=[key == "score" for key in keys]).collect())
        index = np.searchsorted(category_ids[k_lo:k_hi], frame.get_column("category_id").to_numpy())
        starts = np.searchsorted(index, np.arange(k_hi - k_lo + 1))

        def stacked(prefix, dtype):
            return np.ascontiguousarray(
                frame.select([f"{prefix}{a}" for a in range(n_area)]).to_numpy().astype(dtype).reshape(-1, n_area))

        yield RankedBatch(category_ids=category_ids[k_lo:k_hi], starts=starts,
                          score=frame.get_column("score").to_numpy().astype(np.float64),
                          tp=stacked("tp", np.bool_), ignored=stacked("ig", np.bool_), iou=stacked("iou", np.float64),
                          n_gt=n_gt[k_lo:k_hi])
