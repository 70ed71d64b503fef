"""PASCAL VOC AP as a query over a VOC match table (py-faster-rcnn ``voc_eval.py`` / ``voc_ap``, the devkit's
``VOCevaldet.m`` / ``VOCap.m``).

Per class, the detections of every image are taken in (−score, det_id) order — the devkit's stable sort of the
class's result file, the protocol's ``tie_order`` in the shared ranking (``ap.order_by_category``) —, and a numba
kernel walks them once per IoU threshold:

- ignored detections (whose best ground truth is difficult) count in neither TP nor FP; ``voc_eval.py`` gives them
  a rank with the previous point's recall and precision (or (0, 0) before the first one), which changes neither
  AP, so they are left out;
- ``rec = tp / npos`` (``npos``: the class's non-difficult ground truths) and ``prec = tp / max(tp + fp, eps)``;
- **voc07**, the VOC2007 11-point AP: the mean over ``t in np.arange(0., 1.1, 0.1)`` — floats, so
  ``t[3] = 0.30000000000000004`` and a recall of exactly 0.3 does not reach it — of ``max(prec[rec >= t])`` (0 when
  none), summed ``ap + p / 11.`` in that order;
- **voc12**, the VOC2010+ all-point AP: the precision envelope from the right over ``[0, prec…, 0]`` at
  ``[0, rec…, 1]``, summed over the points where recall changes, ``(mrec[i+1] − mrec[i]) · mpre[i+1]``.

Conventions where the references divide by zero: a class without non-difficult ground truth (none at all, or every
object difficult) has AP −1 (undefined; ``voc_eval.py`` would give NaN) and is left out of the mAP; a class with
ground truth but no detection has AP 0 and counts. TP and FP are counted for every class, detections of a class
without ground truth being false positives (or ignored, on a difficult object).
"""

from dataclasses import dataclass

import numba
import numpy as np
import polars as pl

from evalengine.errors import ProtocolError
from evalengine.match.voc import VocProtocol
from evalengine.metrics.ap import ACCUMULATE_BATCH_ROWS, order_by_category
from evalengine.metrics.outcomes import outcome_batches

METRICS = ("voc07", "voc12")
VOC07_RECALL_THRESHOLDS = tuple(float(t) for t in np.arange(0.0, 1.1, 0.1))  # voc_ap's exact floats
_EPS = np.finfo(np.float64).eps


@numba.njit(cache=True, nogil=True)
def _ap_11_point(rec, prec, thresholds):
    """``voc_ap(rec, prec, use_07_metric=True)``: the best precision at recall >= t, for each t, over 11."""
    envelope = prec.copy()
    for i in range(envelope.shape[0] - 2, -1, -1):
        envelope[i] = max(envelope[i], envelope[i + 1])
    ap = 0.0
    for t in thresholds:
        i = np.searchsorted(rec, t)  # recall never falls: rec >= t from the first such rank on
        p = envelope[i] if i < rec.shape[0] else 0.0
        ap = ap + p / 11.0
    return ap


@numba.njit(cache=True, nogil=True)
def _ap_all_point(rec, prec):
    """``voc_ap(rec, prec)``: the area under the right-to-left precision envelope, with sentinels."""
    n = rec.shape[0]
    mrec = np.empty(n + 2)
    mpre = np.empty(n + 2)
    mrec[0], mrec[n + 1], mpre[0], mpre[n + 1] = 0.0, 1.0, 0.0, 0.0
    mrec[1:n + 1] = rec
    mpre[1:n + 1] = prec
    for i in range(n + 1, 0, -1):
        mpre[i - 1] = max(mpre[i - 1], mpre[i])
    ap = 0.0
    for i in range(n + 1):
        if mrec[i + 1] != mrec[i]:
            ap += (mrec[i + 1] - mrec[i]) * mpre[i + 1]
    return ap


@numba.njit(cache=True, nogil=True, parallel=True)
def _voc_kernel(starts, tp_bits, ignored_bits, n_thr, npos, eleven_point, thresholds):
    """Rows ``starts[k]:starts[k+1]`` are category ``k``'s detections in ranking order; AP, TP and FP per
    (category, threshold)."""
    n_cat = starts.shape[0] - 1
    ap = np.full((n_cat, n_thr), -1.0)
    tp_count = np.zeros((n_cat, n_thr), np.int64)
    fp_count = np.zeros((n_cat, n_thr), np.int64)
    for k in numba.prange(n_cat):
        n = starts[k + 1] - starts[k]
        rec = np.empty(n)
        prec = np.empty(n)
        for t in range(n_thr):
            bit = np.uint64(1) << np.uint64(t)
            tp = fp = 0.0
            m = 0
            for i in range(starts[k], starts[k + 1]):
                if ignored_bits[i] & bit:
                    continue
                if tp_bits[i] & bit:
                    tp += 1.0
                else:
                    fp += 1.0
                rec[m] = tp / npos[k] if npos[k] else 0.0
                prec[m] = tp / max(tp + fp, _EPS)
                m += 1
            tp_count[k, t], fp_count[k, t] = int(tp), int(fp)
            if npos[k]:
                ap[k, t] = (_ap_11_point(rec[:m], prec[:m], thresholds) if eleven_point
                            else _ap_all_point(rec[:m], prec[:m]))
    return ap, tp_count, fp_count


@dataclass(frozen=True)
class VocAccumulation:
    """AP (−1 where the class has no non-difficult ground truth), TP and FP per (category, IoU threshold), and the
    non-difficult ground truths per category."""

    protocol: VocProtocol
    metric: str
    category_ids: np.ndarray
    ap: np.ndarray
    tp: np.ndarray
    fp: np.ndarray
    n_gt: np.ndarray

    def mean_ap(self) -> list:
        """mAP per IoU threshold: the mean over the classes with non-difficult ground truth (−1 if none has)."""
        defined = self.n_gt > 0
        return [float(self.ap[defined, t].mean()) if defined.any() else -1.0 for t in range(self.ap.shape[1])]


def accumulate(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, category_ids, protocol: VocProtocol,
               metric: str = "voc12", batch_rows: int = ACCUMULATE_BATCH_ROWS, on_batch_done=None,
               image_ids=None) -> VocAccumulation:
    """VOC AP per class over a match table, a batch of categories at a time. ``image_ids`` restricts it to those
    images (the devkit's image set): VOC matches every image on its own, so this is exact without matching again."""
    if metric not in METRICS:
        raise ProtocolError(f"metric must be one of {METRICS}, got {metric!r}")
    category_ids = np.asarray(category_ids, dtype=np.int64)
    n_thr = len(protocol.iou_thresholds)
    ap = np.full((len(category_ids), n_thr), -1.0)
    tp, fp = np.zeros_like(ap, np.int64), np.zeros_like(ap, np.int64)
    n_gt = np.zeros(len(category_ids), np.int64)
    thresholds = np.array(VOC07_RECALL_THRESHOLDS)
    k_lo = 0
    for batch in outcome_batches(dt_matches, gt_matches, category_ids, protocol, 0, 1, image_ids, batch_rows):
        k_hi = k_lo + len(batch.category_ids)
        order, starts = order_by_category(batch.cat_index, k_hi - k_lo, batch.score, batch.first, batch.second)
        n_gt[k_lo:k_hi] = batch.n_gt[:, 0]
        result = _voc_kernel(starts, batch.tp_bits[order, 0], batch.ignored_bits[order, 0], n_thr, n_gt[k_lo:k_hi],
                             metric == "voc07", thresholds)
        ap[k_lo:k_hi], tp[k_lo:k_hi], fp[k_lo:k_hi] = result
        if on_batch_done:
            on_batch_done(k_hi - k_lo)
        k_lo = k_hi
        del batch, order, result  # not held while the next batch is read
    return VocAccumulation(protocol=protocol, metric=metric, category_ids=category_ids, ap=ap, tp=tp, fp=fp, n_gt=n_gt)


def ap_table(acc: VocAccumulation) -> pl.DataFrame:
    """One row per (category, IoU threshold): ``ap`` (−1 where undefined), ``tp``, ``fp``, ``n_gt``."""
    k, t = np.indices(acc.ap.shape).reshape(2, -1)
    return pl.DataFrame({
        "category_id": acc.category_ids[k],
        "iou_threshold": np.array(acc.protocol.iou_thresholds)[t],
        "ap": acc.ap.reshape(-1),
        "tp": acc.tp.reshape(-1),
        "fp": acc.fp.reshape(-1),
        "n_gt": acc.n_gt[k],
    })


def precision_recall(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, protocol: VocProtocol) -> pl.DataFrame:
    """``voc_eval.py``'s ``rec`` and ``prec`` as rows: per (category, IoU threshold), each counted detection in
    (−score, det_id) order with its outcome and the cumulative ``tp``, ``fp``, ``recall`` (null for a class without
    non-difficult ground truth) and ``precision``."""
    npos = (gt_matches.filter((pl.col("ignored_bits") & 1) == 0).group_by("category_id")
            .agg(pl.len().cast(pl.Int64).alias("n_gt")))
    curves = []
    for t, threshold in enumerate(protocol.iou_thresholds):
        bit = 1 << t
        is_tp = (pl.col("tp_bits").arr.first() & bit) != 0
        curves.append(
            dt_matches.filter((pl.col("ignored_bits").arr.first() & bit) == 0)
            .select("category_id", "image_id", "det_id", "score", is_tp.alias("is_tp"),
                    pl.lit(threshold).alias("iou_threshold")))
    cumulative = [pl.col("is_tp").cast(pl.Int64).cum_sum().alias("tp"),
                  (~pl.col("is_tp")).cast(pl.Int64).cum_sum().alias("fp")]
    return (pl.concat(curves).sort(["category_id", "iou_threshold", pl.col("score") + 0.0, "det_id"],
                                   descending=[False, False, True, False])
            .with_columns([c.over("category_id", "iou_threshold") for c in cumulative])
            .join(npos, on="category_id", how="left", maintain_order="left")
            .with_columns((pl.col("tp") / pl.col("n_gt")).alias("recall"),
                          (pl.col("tp") / pl.max_horizontal(pl.col("tp") + pl.col("fp"), pl.lit(_EPS)))
                          .alias("precision"))
            .collect())
