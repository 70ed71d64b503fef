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
from evalengine.metrics.ap import (array_values, batch_frames, category_batches, order_by_category,
                                   regular_gt_counts)

BATCH_ROWS = 4_000_000  # detections held at once


@dataclass(frozen=True)
class OutcomeBatch:
    """Categories ``category_ids``; rows in table order: ``cat_index`` (into ``category_ids``), ``score``, the
    protocol's two tie keys ``first`` and ``second``, per area range the stored ``tp_bits`` and ``ignored_bits`` (bit
    ``t``: the outcome at IoU threshold ``t``) and ``iou`` (the partner's IoU at ``t``; arbitrary without one);
    ``n_gt[k, a]`` regular ground truths."""

    category_ids: np.ndarray
    cat_index: np.ndarray
    score: np.ndarray
    first: np.ndarray
    second: np.ndarray
    tp_bits: np.ndarray
    ignored_bits: np.ndarray
    iou: np.ndarray
    n_gt: np.ndarray
    t: int


@dataclass(frozen=True)
class RankedBatch:
    """Categories ``category_ids`` (rows ``starts[k]:starts[k + 1]`` are category ``k``'s), arrays by row and area
    range: ``tp``, ``ignored`` (bool) and ``iou`` (a true positive's IoU, NaN elsewhere); ``n_gt[k, a]`` regular
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
def _gather(order, score, tp_bits, ignored_bits, partner_iou, t):
    """The rows in ranking order, with their outcome at threshold ``t`` per area range and a true positive's IoU."""
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
            iou[j, a] = partner_iou[i, a] if tp[j, a] else np.nan
    return score_out, tp, ignored, iou


def _partner_iou(frame: pl.DataFrame, protocol, n_area: int, t: int) -> np.ndarray:
    """(rows, n_area): per area range the partner's IoU at threshold ``t`` — ``area_iou`` (the IoU at the first
    threshold, per area range) or, at another threshold (area range 'all' only), ``matched_iou[t]``. Read without a
    copy: where there is no partner the value is arbitrary (the gather keeps only true positives')."""
    column, width = ("matched_iou", len(protocol.iou_thresholds)) if t else ("area_iou", len(protocol.area_ranges))
    items = frame.get_column(column).to_arrow().flatten()
    values = np.frombuffer(items.buffers()[1], dtype=np.float64, count=items.offset + len(items))[items.offset:]
    return values.reshape(-1, width)[:, t:t + 1] if t else values.reshape(-1, width)[:, :n_area]


def outcome_batches(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, category_ids, protocol, t: int = 0,
                    area_ranges: int | None = None, image_ids=None, batch_rows: int = BATCH_ROWS):
    """Yield an :class:`OutcomeBatch` per batch of categories (of the first ``area_ranges`` area ranges; all by
    default). ``image_ids`` restricts the table to those images (each image is matched on its own). Several batches
    are split in one pass over the table and spilled to disk (:func:`~evalengine.metrics.ap.batch_frames`)."""
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
    columns = ["category_id", "score", *ties, "tp_bits", "ignored_bits", "matched_iou" if t else "area_iou"]
    batches = category_batches(dt_matches, category_ids, batch_rows)
    frames = batch_frames(dt_matches, columns, category_ids, batches)
    for (k_lo, k_hi), frame in zip(batches, frames, strict=True):  # strict: the spill is removed
        outcomes = OutcomeBatch(
            category_ids=category_ids[k_lo:k_hi],
            cat_index=np.searchsorted(category_ids[k_lo:k_hi], frame.get_column("category_id").to_numpy()),
            score=frame.get_column("score").to_numpy().astype(np.float64),
            first=frame.to_series(2).to_numpy().astype(np.int64), second=frame.to_series(3).to_numpy().astype(np.int64),
            tp_bits=array_values(frame.get_column("tp_bits"), n_area_stored)[:, :n_area],
            ignored_bits=array_values(frame.get_column("ignored_bits"), n_area_stored)[:, :n_area],
            iou=_partner_iou(frame, protocol, n_area, t), n_gt=n_gt[k_lo:k_hi], t=t)
        del frame
        yield outcomes
        del outcomes  # while the next batch is read, only the consumer may still hold this one (and it lets go)


def ranked_batches(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, category_ids, protocol, t: int = 0,
                   area_ranges: int | None = None, image_ids=None, batch_rows: int = BATCH_ROWS):
    """Yield a :class:`RankedBatch` per batch of categories: :func:`outcome_batches` in ranking order."""
    for b in outcome_batches(dt_matches, gt_matches, category_ids, protocol, t, area_ranges, image_ids, batch_rows):
        order, starts = order_by_category(b.cat_index, len(b.category_ids), b.score, b.first, b.second)
        score, tp, ignored, iou = _gather(order, b.score, b.tp_bits, b.ignored_bits, b.iou, t)
        ranked = RankedBatch(category_ids=b.category_ids, starts=starts, score=score, tp=tp, ignored=ignored,
                             iou=iou, n_gt=b.n_gt)
        del b, order, score, tp, ignored, iou
        yield ranked
        del ranked
