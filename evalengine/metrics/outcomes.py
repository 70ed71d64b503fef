"""A match table read as ranked outcomes: for a batch of categories, every evaluated detection in the protocol's
accumulation order (score descending, ties by ``protocol.tie_order``: pycocotools' mergesort for COCO, the devkit's
file order for VOC) with, per area range, whether it is a true positive, ignored, and its partner's IoU — at one
IoU threshold. The score-threshold metrics (LRP, precision/recall/F1 at a score) are prefix sums over these rows
(the prefix property of greedy matching, spec-detection §2.6)."""

from dataclasses import dataclass

import numba
import numpy as np
import polars as pl

from evalengine.errors import ProtocolError
from evalengine.metrics.ap import category_batches, order_by_category, regular_gt_counts

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


@numba.njit(cache=True, nogil=True, parallel=True)
def _gather(order, score, tp_bits, ignored_bits, first_iou, area_iou, t):
    """The rows in ranking order, with their outcome at threshold ``t`` per area range: ``iou`` is the partner's IoU
    (area 0: ``matched_iou[t]``; the others: ``area_iou[a]``, the IoU at the first threshold)."""
    n, n_area = order.shape[0], tp_bits.shape[1]
    score_out = np.empty(n)
    tp, ignored, iou = np.empty((n, n_area), np.bool_), np.empty((n, n_area), np.bool_), np.empty((n, n_area))
    bit = np.uint64(1) << np.uint64(t)
    for j in numba.prange(n):
        i = order[j]
        score_out[j] = score[i]
        for a in range(n_area):
            tp[j, a] = tp_bits[i, a] & bit != 0
            ignored[j, a] = ignored_bits[i, a] & bit != 0
            iou[j, a] = first_iou[i] if a == 0 else area_iou[i, a]
    return score_out, tp, ignored, iou


def _values(column: pl.Series, width: int, dtype) -> np.ndarray:
    """An Array column as a (rows, width) array (nulls as NaN), without a per-row conversion."""
    return column.to_arrow().flatten().to_numpy(zero_copy_only=False).astype(dtype, copy=False).reshape(-1, width)


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
    ties = list(protocol.tie_order) + [pl.lit(0, dtype=pl.Int64).alias("_none")] * (2 - len(protocol.tie_order))
    n_area_stored = len(protocol.area_ranges)
    for k_lo, k_hi in category_batches(dt_matches, category_ids, batch_rows):
        batch = pl.Series(category_ids[k_lo:k_hi]).implode()
        frame = (dt_matches.filter(pl.col("category_id").is_in(batch))
                 .select("category_id", "score", *ties, "tp_bits", "ignored_bits",
                         pl.col("matched_iou").arr.get(t).fill_null(np.nan).alias("first_iou"), "area_iou")
                 .collect())
        cat_index = np.searchsorted(category_ids[k_lo:k_hi], frame.get_column("category_id").to_numpy())
        score = frame.get_column("score").to_numpy().astype(np.float64)
        first, second = (frame.to_series(2 + i).to_numpy().astype(np.int64) for i in range(2))
        order, starts = order_by_category(cat_index, k_hi - k_lo, score, first, second)
        columns = _gather(order, score, _values(frame.get_column("tp_bits"), n_area_stored, np.uint64)[:, :n_area],
                          _values(frame.get_column("ignored_bits"), n_area_stored, np.uint64)[:, :n_area],
                          frame.get_column("first_iou").to_numpy().astype(np.float64),
                          _values(frame.get_column("area_iou"), n_area_stored, np.float64), t)
        del frame, order, first, second, score  # only the gathered arrays are held while the batch is consumed
        yield RankedBatch(category_ids=category_ids[k_lo:k_hi], starts=starts, score=columns[0], tp=columns[1],
                          ignored=columns[2], iou=columns[3], n_gt=n_gt[k_lo:k_hi])
