"""COCO precision, AP and recall as a query over the match table (pycocotools ``accumulate``).

Per category the evaluated detections are ordered by (−score, image id, rank in the image), which is
the order pycocotools' stable mergesort gives over its image-by-image concatenation. For each area
range, detection cap and IoU threshold a numba kernel walks that order once:

- ignored detections keep their rank and repeat the previous precision–recall point, as in
  pycocotools (they cannot change a precision, but ``searchsorted`` can land on one for ``scores``);
- ``recall = tp / G`` and ``precision = tp / (tp + fp + eps)`` with ``eps = np.spacing(1)``;
- the precision envelope is taken from the right, sampled with ``searchsorted(recall, R, 'left')``
  at the recall thresholds, and left at 0 from the first threshold beyond the last recall;
- AP is the mean of the sampled precisions, recall the final recall; both are −1 when the category
  has no regular ground truth in the area range.
"""

from dataclasses import dataclass

import numba
import numpy as np
import polars as pl

from evalengine.match.protocol import CocoProtocol

_EPS = np.spacing(1)


@numba.njit(cache=True, nogil=True)
def _accumulate_kernel(cat_start, cat_len, rank, tp_bits, ignored_bits, scores, n_regular_gt,
                       max_dets, n_thr, rec_thr, want_curve):
    n_cat = cat_start.shape[0]
    n_area = tp_bits.shape[1]
    n_md = max_dets.shape[0]
    n_rec = rec_thr.shape[0]
    ap = np.full((n_cat, n_area, n_md, n_thr), -1.0)
    recall = np.full((n_cat, n_area, n_md, n_thr), -1.0)
    curve_shape = (n_cat, n_area, n_md, n_thr, n_rec) if want_curve else (0, 0, 0, 0, 0)
    precision = np.full(curve_shape, -1.0)
    score_at = np.full(curve_shape, -1.0)
    longest = 0
    for k in range(n_cat):
        longest = max(longest, cat_len[k])
    rc = np.empty(longest)
    pr = np.empty(longest)
    ss = np.empty(longest)
    q = np.empty(n_rec)
    qs = np.empty(n_rec)
    for k in range(n_cat):
        s0 = cat_start[k]
        for a in range(n_area):
            n_gt = n_regular_gt[k, a]
            if n_gt == 0:
                continue
            for m in range(n_md):
                for t in range(n_thr):
                    bit = np.uint64(1) << np.uint64(t)
                    n = 0
                    tp = 0.0
                    fp = 0.0
                    for i in range(s0, s0 + cat_len[k]):
                        if rank[i] >= max_dets[m]:
                            continue
                        if ignored_bits[i, a] & bit:
                            pass  # occupies a rank, repeating the previous point (it can carry eval['scores'])
                        elif tp_bits[i, a] & bit:
                            tp += 1.0
                        else:
                            fp += 1.0
                        rc[n] = tp / n_gt
                        pr[n] = tp / (fp + tp + _EPS)
                        ss[n] = scores[i]
                        n += 1
                    recall[k, a, m, t] = rc[n - 1] if n else 0.0
                    for i in range(n - 1, 0, -1):
                        if pr[i] > pr[i - 1]:
                            pr[i - 1] = pr[i]
                    q[:] = 0.0
                    qs[:] = 0.0
                    idx = np.searchsorted(rc[:n], rec_thr)
                    for r in range(n_rec):
                        if idx[r] >= n:  # pycocotools' try/except stops at the first miss
                            break
                        q[r] = pr[idx[r]]
                        qs[r] = ss[idx[r]]
                    ap[k, a, m, t] = q.mean()
                    if want_curve:
                        precision[k, a, m, t, :] = q
                        score_at[k, a, m, t, :] = qs
    return ap, recall, precision, score_at


@dataclass(frozen=True)
class Accumulation:
    """AP and recall per (category, area range, detection cap, IoU threshold), −1 where undefined.

    ``category_ids`` is ``[-1]`` when categories are pooled (``use_cats`` off). ``precision`` and
    ``scores`` (pycocotools ``eval['precision'/'scores']`` reordered as [K, A, M, T, R]) are present
    only when the curve was asked for.
    """

    protocol: CocoProtocol
    category_ids: np.ndarray
    ap: np.ndarray
    recall: np.ndarray
    precision: np.ndarray | None = None
    scores: np.ndarray | None = None


def _decode_bits(column: pl.Series, width: int) -> np.ndarray:
    values = column.to_numpy()
    return values.reshape(-1, width) if values.ndim == 1 else values


def regular_gt_counts(gt_matches: pl.LazyFrame, category_ids, protocol: CocoProtocol) -> np.ndarray:
    """Number of non-ignored ground truths per (category, area range) — pycocotools ``npig``."""
    n_area = len(protocol.area_ranges)
    category_key = pl.col("category_id") if protocol.use_cats else pl.lit(-1, dtype=pl.Int64).alias("category_id")
    counts = (
        gt_matches.select(category_key, "ignored_bits")
        .group_by("category_id")
        .agg([((pl.col("ignored_bits") & (1 << a)) == 0).sum().alias(f"a{a}") for a in range(n_area)])
        .collect()
    )
    table = pl.DataFrame({"category_id": np.asarray(category_ids, dtype=np.int64)}).join(
        counts, on="category_id", how="left", maintain_order="left"
    )
    return table.select([f"a{a}" for a in range(n_area)]).fill_null(0).to_numpy().astype(np.int64).reshape(-1, n_area)


def accumulate(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, category_ids, protocol: CocoProtocol,
               want_curve: bool = False) -> Accumulation:
    """pycocotools ``accumulate`` over a match table (all categories of ``category_ids``)."""
    category_ids = np.asarray(category_ids if protocol.use_cats else [-1], dtype=np.int64)
    n_area = len(protocol.area_ranges)
    category_key = pl.col("category_id") if protocol.use_cats else pl.lit(-1, dtype=pl.Int64).alias("category_id")
    ordered = (
        dt_matches.select(category_key, "score", "image_id", "dt_rank", "tp_bits", "ignored_bits")
        .sort(["category_id", "score", "image_id", "dt_rank"], descending=[False, True, False, False])
        .collect()
    )
    present = ordered.group_by("category_id", maintain_order=True).agg(pl.len().alias("n"))
    spans = (
        pl.DataFrame({"category_id": category_ids})
        .join(
            present.with_columns((pl.col("n").cum_sum() - pl.col("n")).alias("start")),
            on="category_id",
            how="left",
            maintain_order="left",
        )
        .fill_null(0)
    )
    ap, recall, precision, scores = _accumulate_kernel(
        spans.get_column("start").to_numpy().astype(np.int64),
        spans.get_column("n").to_numpy().astype(np.int64),
        ordered.get_column("dt_rank").to_numpy().astype(np.int64),
        _decode_bits(ordered.get_column("tp_bits"), n_area),
        _decode_bits(ordered.get_column("ignored_bits"), n_area),
        ordered.get_column("score").to_numpy().astype(np.float64),
        regular_gt_counts(gt_matches, category_ids, protocol),
        np.array(protocol.max_dets, dtype=np.int64),
        len(protocol.iou_thresholds),
        np.array(protocol.recall_thresholds),
        want_curve,
    )
    return Accumulation(
        protocol=protocol,
        category_ids=category_ids,
        ap=ap,
        recall=recall,
        precision=precision if want_curve else None,
        scores=scores if want_curve else None,
    )


def ap_table(acc: Accumulation) -> pl.DataFrame:
    """One row per (category, IoU threshold, area range, max dets): ``ap`` and ``recall``, −1 where undefined."""
    p = acc.protocol
    k, a, m, t = np.indices(acc.ap.shape).reshape(4, -1)
    return pl.DataFrame(
        {
            "category_id": acc.category_ids[k],
            "iou_threshold": np.array(p.iou_thresholds)[t],
            "area_range": np.array([r[0] for r in p.area_ranges])[a],
            "max_dets": np.array(p.max_dets, dtype=np.int64)[m],
            "ap": acc.ap.reshape(-1),
            "recall": acc.recall.reshape(-1),
        }
    )


def precision_recall_table(acc: Accumulation) -> pl.DataFrame:
    """pycocotools ``eval['precision']`` and ``eval['scores']`` as rows: the interpolated precision and the
    score reached at every recall threshold, per (category, IoU threshold, area range, max dets)."""
    if acc.precision is None:
        raise ValueError("accumulate(..., want_curve=True) is needed for the precision-recall table")
    p = acc.protocol
    k, a, m, t, r = np.indices(acc.precision.shape).reshape(5, -1)
    return pl.DataFrame(
        {
            "category_id": acc.category_ids[k],
            "iou_threshold": np.array(p.iou_thresholds)[t],
            "area_range": np.array([x[0] for x in p.area_ranges])[a],
            "max_dets": np.array(p.max_dets, dtype=np.int64)[m],
            "recall_threshold": np.array(p.recall_thresholds)[r],
            "precision": acc.precision.reshape(-1),
            "score": acc.scores.reshape(-1),
        }
    )
