"""COCO precision, AP and recall as a query over the match table (pycocotools ``accumulate``).

Per category the evaluated detections are ordered by (−score, image id, rank in the image), which is
the order pycocotools' stable mergesort gives over its image-by-image concatenation. A numba kernel
walks that order once per category, for every area range, detection cap and IoU threshold at once (issue 17):

- caps above a category's largest count in an image cut nothing, so they share one set of counts;
- per (area range, cap) it counts the rows not ignored at every threshold, and per threshold only the set bits
  (true positives, partial ignores), so a row costs its outcomes, not areas × caps × thresholds;
- ``recall = tp / G`` and ``precision = tp / (tp + fp + eps)`` with ``eps = np.spacing(1)``, the counts integral
  floats as the reference's cumulative sums are;
- pycocotools samples the right-to-left precision envelope with ``searchsorted(recall, R, 'left')``.
  Recall only rises at a true positive and precision only falls between two, so every sampled value
  is the envelope at a true positive (or, for ``R <= 0``, at the first rank): the kernel keeps just
  those points, which gives the same floats with memory bounded by the ground-truth count;
- ignored detections are not counted but keep their rank, as in pycocotools (the first rank's score
  can be an ignored detection's in ``eval['scores']``);
- thresholds from the first one beyond the last recall on are left at 0 (pycocotools' try/except);
- AP is the mean of the sampled precisions, recall the final recall; both are −1 when the category
  has no regular ground truth in the area range.
"""

from dataclasses import dataclass

import numba
import numpy as np
import polars as pl
from numba.cpython.unsafe.numbers import trailing_zeros

from evalengine.errors import EvalEngineError
from evalengine.match.coco import CocoProtocol
from evalengine.match.score_order import ranking_by_category
from evalengine.store.spill import spilled_batches

_EPS = np.spacing(1)


@numba.njit(cache=True, nogil=True)
def order_by_category(cat_index, n_cat, score, image_id, rank):
    """Row order grouped by category, each group in pycocotools' order (−score, image id, rank; then row order): the
    rows in that order (:func:`~evalengine.match.score_order.ranking_by_category`). (Any two tie keys work:
    ``image_id`` and ``rank`` are the first and second, e.g. a protocol's ``tie_order``.)"""
    return ranking_by_category(cat_index, n_cat, score, image_id, rank)


@numba.njit(cache=True, nogil=True, inline="always")
def _distinct_caps(max_dets, top_rank):
    """``(caps, slot)``: the distinct caps a category's detections see, ascending, and each ``max_dets`` entry's place
    among them. A cap above the category's highest rank in an image (``top_rank``) cuts nothing, so every such cap
    gives the same counts: they are computed once."""
    effective = np.minimum(max_dets, top_rank + 1)
    caps = np.unique(effective)
    return caps, np.searchsorted(caps, effective)


@numba.njit(cache=True, nogil=True)
def _count_category(rows, rank, tp_bits, ignored_bits, scores, n_gt, caps, every_threshold, want_curve, tp, ignored,
                    seen, n_ranked, first_score, event_precision, event_score):
    """One category's ``rows`` in ranking order, every area range, cap (``caps``, ascending) and threshold in one walk;
    the counters (zeros on entry) and events filled in place. Per (area range, cap) it counts the detections not
    ignored at every threshold (``seen``) and, visiting only the set bits, per threshold those ignored (``ignored``)
    and the true positives (``tp``), so ``tp + fp = seen − ignored``: the reference's integral float counts. At each
    true positive its precision ``tp / (tp + fp + eps)`` (and its score). False when a (area range, cap, threshold) has
    more true positives than the events hold (the id-0 quirk can match more than the ground-truth count): the caller
    retries with room for more (a bound check here rather than a growing array, which would cost every event)."""
    n_cap = caps.shape[0]
    capacity = event_precision.shape[3]
    for i in rows:
        lo = 0  # the caps this rank is within: caps[lo:] (pycocotools cuts each image's list at its cap)
        while lo < n_cap and caps[lo] <= rank[i]:
            lo += 1
        if lo == n_cap:
            continue
        for c in range(lo, n_cap):
            if n_ranked[c] == 0:
                first_score[c] = scores[i]
            n_ranked[c] += 1
        for a in range(n_gt.shape[0]):
            ignored_i = ignored_bits[i, a]
            if n_gt[a] == 0 or ignored_i == every_threshold:  # ignored at every threshold: not counted
                continue
            for c in range(lo, n_cap):
                seen[a, c] += 1
            some = ignored_i
            while some:  # ignored at some thresholds only (matched to an ignored ground truth)
                t = trailing_zeros(some)
                for c in range(lo, n_cap):
                    ignored[a, c, t] += 1
                some &= some - np.uint64(1)
            hits = tp_bits[i, a] & ~ignored_i
            while hits:
                t = trailing_zeros(hits)
                for c in range(lo, n_cap):
                    e = tp[a, c, t]
                    if e == capacity:
                        return False
                    tp[a, c, t] = e + 1
                    event_precision[a, c, t, e] = (e + 1.0) / ((seen[a, c] - ignored[a, c, t]) + _EPS)
                    if want_curve:
                        event_score[a, c, t, e] = scores[i]
                hits &= hits - np.uint64(1)
    return True


@numba.njit(cache=True, nogil=True, inline="always")
def _recall_steps(n_gt, rec_thr):
    """Where pycocotools' ``searchsorted(tp / n_gt, R, 'left')`` lands for each recall threshold ``R``, as the true
    positive it stops at: the least ``e`` with ``(e + 1) / n_gt >= R`` (the reference's float division), −1 for
    ``R <= 0`` (the first rank, whatever it is). It depends on ``n_gt`` only: one per (category, area range)."""
    steps = np.empty(rec_thr.shape[0], np.int64)
    for r in range(rec_thr.shape[0]):
        if rec_thr[r] <= 0.0:
            steps[r] = -1
            continue
        e = max(0, int(np.ceil(rec_thr[r] * n_gt)) - 1)  # an estimate the two walks make exact
        while e > 0 and e / n_gt >= rec_thr[r]:
            e -= 1
        while (e + 1.0) / n_gt < rec_thr[r]:
            e += 1
        steps[r] = e
    return steps


@numba.njit(cache=True, nogil=True, inline="always")
def _interpolated(event_precision, event_score, n_ev, n_ranked, first_score, steps, q, qs, want_curve):
    """pycocotools' sampled precision envelope of one (category, area range, cap, threshold): ``q`` and ``qs`` (the
    scores, with ``want_curve``) at every recall threshold (its ``steps``); 0 from the first one beyond the last recall
    on (its try/except). The envelope at a true positive is the largest precision of the true positives from it on:
    precision only falls between two."""
    env = event_precision[:n_ev]
    for e in range(n_ev - 2, -1, -1):
        if env[e + 1] > env[e]:
            env[e] = env[e + 1]
    q[:] = 0.0
    qs[:] = 0.0
    if n_ranked == 0:
        return
    for r in range(steps.shape[0]):
        e = steps[r]
        if e < 0:  # searchsorted lands on the first rank
            q[r] = env[0] if n_ev else 0.0
            qs[r] = first_score
        elif e >= n_ev:  # pycocotools' try/except stops at the first miss
            break
        else:
            q[r] = env[e]
            if want_curve:
                qs[r] = event_score[e]


@numba.njit(cache=True, nogil=True, parallel=True)
def _accumulate_kernel(order, starts, rank, tp_bits, ignored_bits, scores, n_regular_gt, max_dets, n_thr, rec_thr,
                       want_curve):
    """Rows ``order[starts[k]:starts[k+1]]`` are category ``k``'s detections in ranking order: one walk over them
    (:func:`_count_category`) counts every area range, distinct cap and threshold; the envelope is then sampled per
    (area range, cap, threshold) and copied to the caps that share it."""
    n_cat = starts.shape[0] - 1
    n_area = tp_bits.shape[1]
    n_md = max_dets.shape[0]
    n_rec = rec_thr.shape[0]
    every_threshold = ~np.uint64(0) >> np.uint64(64 - n_thr)
    ap = np.full((n_cat, n_area, n_md, n_thr), -1.0)
    recall = np.full((n_cat, n_area, n_md, n_thr), -1.0)
    curve_shape = (n_cat, n_area, n_md, n_thr, n_rec) if want_curve else (0, 0, 0, 0, 0)
    precision = np.full(curve_shape, -1.0)
    score_at = np.full(curve_shape, -1.0)
    for k in numba.prange(n_cat):
        n_gt = n_regular_gt[k]
        if n_gt.max() == 0:  # −1 everywhere
            continue
        rows = order[starts[k]:starts[k + 1]]
        top_rank = -1
        for i in rows:
            top_rank = max(top_rank, rank[i])
        caps, slot = _distinct_caps(max_dets, top_rank)
        n_cap = caps.shape[0]
        tp = np.zeros((n_area, n_cap, n_thr), np.int64)
        ignored = np.zeros((n_area, n_cap, n_thr), np.int64)
        seen = np.zeros((n_area, n_cap), np.int64)
        n_ranked = np.zeros(n_cap, np.int64)
        first_score = np.zeros(n_cap)
        capacity = max(1, n_gt.max())
        event_precision = np.empty((n_area, n_cap, n_thr, capacity))
        event_score = np.empty((n_area, n_cap, n_thr, capacity if want_curve else 0))
        while not _count_category(rows, rank, tp_bits, ignored_bits, scores, n_gt, caps, every_threshold, want_curve,
                                  tp, ignored, seen, n_ranked, first_score, event_precision, event_score):
            tp[:] = 0
            ignored[:] = 0
            seen[:] = 0
            n_ranked[:] = 0
            capacity *= 2
            event_precision = np.empty((n_area, n_cap, n_thr, capacity))
            event_score = np.empty((n_area, n_cap, n_thr, capacity if want_curve else 0))
        q = np.empty(n_rec)
        qs = np.empty(n_rec)
        for a in range(n_area):
            if n_gt[a] == 0:
                continue
            steps = _recall_steps(n_gt[a], rec_thr)
            for c in range(n_cap):
                for t in range(n_thr):
                    _interpolated(event_precision[a, c, t], event_score[a, c, t], tp[a, c, t], n_ranked[c],
                                  first_score[c], steps, q, qs, want_curve)
                    ap_ = q.mean()
                    recall_ = tp[a, c, t] / n_gt[a] if n_ranked[c] else 0.0
                    for m in range(n_md):
                        if slot[m] == c:
                            ap[k, a, m, t] = ap_
                            recall[k, a, m, t] = recall_
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


ACCUMULATE_BATCH_ROWS = 4_000_000  # detections held at once; categories are accumulated in batches


def array_values(column: pl.Series, width: int) -> np.ndarray:
    """An ``Array(dtype, width)`` column (no null rows; a null item of a float array becomes NaN) as a
    (rows, width) array, without a per-row conversion."""
    return column.to_numpy().reshape(-1, width)  # Polars' own conversion (pyarrow's imports pandas: ~0.4 s)


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


def category_batches(dt_matches: pl.LazyFrame, category_ids: np.ndarray, max_rows: int) -> list:
    """Contiguous ranges ``[k_lo, k_hi)`` of ``category_ids`` holding at most ``max_rows`` detections each
    (a single category with more detections gets a batch of its own)."""
    counts = dt_matches.group_by("category_id").agg(pl.len().alias("n")).collect()
    rows = (pl.DataFrame({"category_id": category_ids})
            .join(counts, on="category_id", how="left", maintain_order="left")
            .get_column("n").fill_null(0).to_numpy())
    batches, lo, held = [], 0, 0
    for k, n in enumerate(rows):
        if held and held + n > max_rows:
            batches.append((lo, k))
            lo, held = k, 0
        held += n
    batches.append((lo, len(rows)))
    return batches


def batch_frames(dt_matches: pl.LazyFrame, columns: list, category_ids: np.ndarray, batches: list, scratch=None):
    """The ``columns`` of the rows of ``dt_matches`` of each batch ``[k_lo, k_hi)`` of ``category_ids``
    (:func:`category_batches`), a frame per batch, in table order. One batch is one read; several are split in one pass
    and spilled to disk (:func:`~evalengine.store.spill.spilled_batches`): each match file is read once, not once per
    batch."""
    if len(batches) == 1:  # the range first: row groups outside a slice's categories are skipped on their statistics
        kept = pl.col("category_id").is_in(pl.Series(category_ids).implode())
        yield dt_matches.filter(pl.col("category_id").is_between(category_ids[0], category_ids[-1]) & kept
                                ).select(columns).collect()
        return
    batch_of = np.repeat(np.arange(len(batches), dtype=np.int32), [k_hi - k_lo for k_lo, k_hi in batches])
    batch = pl.col("category_id").replace_strict(pl.Series(category_ids), pl.Series(batch_of), default=None)
    yield from spilled_batches(dt_matches, columns, batch, len(batches), scratch)


def accumulate_ranked(cat_index, n_cat: int, score, tie_key, rank, tp_bits, ignored_bits, n_regular_gt, max_dets,
                      n_thr: int, recall_thresholds, want_curve: bool) -> tuple:
    """``(ap, recall, precision, scores)`` of detections given as arrays: each one's category (``cat_index`` in
    ``[0, n_cat)``), score, tie key (the image's place in pycocotools' concatenation) and rank in its image, and its
    outcome bits per area range (``tp_bits`` / ``ignored_bits``, ``(n, n_area)``); ``n_regular_gt`` is ``(n_cat,
    n_area)``. Shapes ``[n_cat, n_area, M, T(, R)]``."""
    score = np.asarray(score).astype(np.float64, copy=False)  # no copy where the table's columns already are
    rank = np.asarray(rank).astype(np.int64, copy=False)
    order, starts = order_by_category(np.asarray(cat_index).astype(np.int64, copy=False), n_cat, score,
                                      np.asarray(tie_key).astype(np.int64, copy=False), rank)
    return _accumulate_kernel(order, starts, rank, np.ascontiguousarray(tp_bits), np.ascontiguousarray(ignored_bits),
                              score, np.ascontiguousarray(n_regular_gt), np.array(max_dets, dtype=np.int64), n_thr,
                              np.array(recall_thresholds, dtype=np.float64), want_curve)


def accumulate(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, category_ids, protocol: CocoProtocol,
               want_curve: bool = False, batch_rows: int = ACCUMULATE_BATCH_ROWS, on_batch_done=None,
               image_ids=None, scratch=None) -> Accumulation:
    """pycocotools ``accumulate`` over a match table, a batch of categories at a time.

    ``protocol`` gives ``area_ranges``, ``max_dets``, ``recall_thresholds``, ``use_cats`` and ``iou_thresholds``, one
    per bit of the table's ``tp_bits`` / ``ignored_bits``: a :class:`CocoProtocol`, or another protocol whose table
    holds one evaluation per bit (:class:`~evalengine.match.analyze.AnalyzeProtocol`).

    Several batches are split in one pass over the table (:func:`batch_frames`), in ``scratch``.

    ``image_ids`` restricts it to those images: pycocotools matches every image on its own, so this equals
    a run with ``params.imgIds`` set to them, without matching again. ``category_ids`` plays the part of
    ``params.catIds``.
    """
    if image_ids is not None:
        subset = pl.Series(np.asarray(image_ids, dtype=np.int64)).implode()
        dt_matches = dt_matches.filter(pl.col("image_id").is_in(subset))
        gt_matches = gt_matches.filter(pl.col("image_id").is_in(subset))
    category_ids = np.asarray(category_ids if protocol.use_cats else [-1], dtype=np.int64)
    n_area, n_md, n_thr = len(protocol.area_ranges), len(protocol.max_dets), len(protocol.iou_thresholds)
    n_rec = len(protocol.recall_thresholds)
    shape = (len(category_ids), n_area, n_md, n_thr)
    ap, recall = np.full(shape, -1.0), np.full(shape, -1.0)
    precision = np.full((*shape, n_rec), -1.0) if want_curve else None
    scores = np.full((*shape, n_rec), -1.0) if want_curve else None
    n_regular_gt = regular_gt_counts(gt_matches, category_ids, protocol)
    columns = ["score", "image_id", "dt_rank", "tp_bits", "ignored_bits"]
    batches = category_batches(dt_matches, category_ids, batch_rows) if protocol.use_cats else [(0, 1)]
    frames = batch_frames(dt_matches, ["category_id", *columns], category_ids, batches, scratch) \
        if protocol.use_cats else [dt_matches.select(columns).collect()]
    for (k_lo, k_hi), frame in zip(batches, frames, strict=True):  # strict: the spill is removed
        if protocol.use_cats:
            cat_index = np.searchsorted(category_ids[k_lo:k_hi], frame.get_column("category_id").to_numpy())
        else:
            cat_index = np.zeros(frame.height, np.int64)
        result = accumulate_ranked(
            cat_index, k_hi - k_lo, frame.get_column("score").to_numpy(), frame.get_column("image_id").to_numpy(),
            frame.get_column("dt_rank").to_numpy(), array_values(frame.get_column("tp_bits"), n_area),
            array_values(frame.get_column("ignored_bits"), n_area), n_regular_gt[k_lo:k_hi], protocol.max_dets, n_thr,
            protocol.recall_thresholds, want_curve)
        ap[k_lo:k_hi], recall[k_lo:k_hi] = result[0], result[1]
        if want_curve:
            precision[k_lo:k_hi], scores[k_lo:k_hi] = result[2], result[3]
        if on_batch_done:
            on_batch_done(k_hi - k_lo)
        del frame, result  # not held while the next batch is read
    return Accumulation(protocol=protocol, category_ids=category_ids, ap=ap, recall=recall,
                        precision=precision, scores=scores)


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
        raise EvalEngineError("accumulate(..., want_curve=True) is needed for the precision-recall table")
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
