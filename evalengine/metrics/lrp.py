"""Optimal LRP (Oksuz et al., "Localization Recall Precision", ECCV'18 and TPAMI'21) as a prefix query over a
match table: one cumulative pass per category and area range, no re-matching (spec-detection §2.6).

``LRP = (Σ_TP (1 − IoU) / (1 − τ) + N_FP + N_FN) / (N_TP + N_FP + N_FN)`` over the detections above a score
threshold; oLRP is its minimum, found by one of three searches:

- ``rank`` (default, the official TPAMI'21 code, kemaloksuz/LRP-Error ``accumulate``): the minimum over rank
  prefixes of pycocotools' order, tied scores split as its cumulative arrays split them; the localisation total is
  ``N_TP − Σ IoU`` and the first minimal rank wins; the threshold is the score at that rank. Only the true
  positives are sorted (a prefix ending with a false positive never scores less, rounding aside), so it reads the
  match table in its own order: cheaper than the accumulation of AP;
- ``score``: the same arithmetic, but only prefixes that end a run of equal scores (a score threshold keeps ties
  together, §2.6's reading);
- ``grid`` (the ECCV'18 code, cancam/LRP ``cocoevalLRP.py``): thresholds ``np.linspace(0, 1, 101)``, detections
  with ``score >= s`` (``compare=">"``: ``score > s``, as its VOC code), its arithmetic (normalised by
  ``max(N_TP + N_FP, G)``, NumPy's pairwise sum of the localisation errors), ties to the lowest threshold, reported
  as ``index * 0.01``.

Components at the optimum (the official conventions): ``loc`` the mean ``1 − IoU`` of the true positives (not
divided by ``1 − τ``), ``fp = N_FP / (N_TP + N_FP)``, ``fn = N_FN / G``; NaN where a denominator is 0. A category with
regular ground truth and no true positive has oLRP = fn = 1 and NaN loc, fp and threshold (``rank``/``score``); a
category without regular ground truth has none of them.
"""

from dataclasses import dataclass

import numba
import numpy as np
import polars as pl

from evalengine.errors import check_option
from evalengine.metrics.outcomes import outcome_batches, ranked_batches, threshold_index
from evalengine.numeric import counting_order, pairwise_sum

SEARCHES = ("rank", "score", "grid")
COMPARES = (">=", ">")
# the ECCV'18 code's score grid (np.linspace: index 35 is 0.35000000000000003, not 0.35)
SCORE_GRID = np.linspace(0.0, 1.0, 101)
_FIELDS = ("olrp", "loc", "fp", "fn", "threshold", "n_tp", "n_fp", "n_fn")


@numba.njit(cache=True, nogil=True)
def _score_optimum(score, tp, ignored, iou, lo, hi, n_gt, tau):
    """``score`` search over ranked rows ``lo:hi`` (one category, one area range), in the official arithmetic: the
    prefixes that end a run of equal scores."""
    best, best_at, tp_n, fp_n, iou_sum = np.inf, -1, 0, 0, 0.0
    best_tp = best_fp = 0
    best_loc = 0.0
    for i in range(lo, hi):
        if tp[i]:
            tp_n += 1
            iou_sum += iou[i]
        elif not ignored[i]:
            fp_n += 1
        if i + 1 < hi and score[i + 1] == score[i]:
            continue
        fn_n = n_gt - tp_n
        loc = tp_n - iou_sum
        lrp = (loc / (1 - tau) + fp_n + fn_n) / (tp_n + fp_n + fn_n)
        if lrp < best:
            best, best_at, best_tp, best_fp, best_loc = lrp, i, tp_n, fp_n, loc
    out = np.full(8, np.nan)
    if tp_n == 0:  # no detection, or no true positive: the official code's convention
        out[0], out[3], out[5], out[6], out[7] = 1.0, 1.0, 0, 0, n_gt
        return out
    out[0] = best
    out[1] = best_loc / best_tp if best_tp else np.nan
    out[2] = best_fp / (best_tp + best_fp) if best_tp + best_fp else np.nan
    out[3] = (n_gt - best_tp) / n_gt
    out[4] = score[best_at]
    out[5], out[6], out[7] = best_tp, best_fp, n_gt - best_tp
    return out


@numba.njit(cache=True, nogil=True)
def _before(score, first, second, i, j):
    """Row ``i`` ranks before row ``j``: higher score, then the protocol's tie keys (pycocotools' mergesort order)."""
    if score[i] != score[j]:
        return score[i] > score[j]
    if first[i] != first[j]:
        return first[i] < first[j]
    return second[i] < second[j]


@numba.njit(cache=True, nogil=True)
def _in_ranking_order(rows, score, first, second):
    """``rows`` sorted into the ranking order (stable sorts by the last key first)."""
    rows = rows[np.argsort(second[rows], kind="mergesort")]
    rows = rows[np.argsort(first[rows], kind="mergesort")]
    return rows[np.argsort(-score[rows], kind="mergesort")]


@numba.njit(cache=True, nogil=True)
def _ranked_before(ranked, score, first, second, r):
    """How many of ``ranked`` (rows in ranking order) rank before row ``r``: a binary search."""
    lo, hi = 0, ranked.shape[0]
    while lo < hi:
        mid = (lo + hi) // 2
        if _before(score, first, second, ranked[mid], r):
            lo = mid + 1
        else:
            hi = mid
    return lo


@numba.njit(cache=True, nogil=True)
def _fp_score(rows, score, first, second, tp_bits, ignored_bits, a, bit, tps, gap, k):
    """The score of the ``k``-th false positive (1-based, in ranking order) among those after ``gap`` true
    positives (``tps``: area ``a``'s true positives in ranking order)."""
    picked = np.empty(rows.shape[0], np.int64)
    n = 0
    for r in rows:
        if not (tp_bits[r, a] & bit or ignored_bits[r, a] & bit) and _ranked_before(tps, score, first, second, r) == gap:
            picked[n] = r
            n += 1
    return score[_in_ranking_order(picked[:n], score, first, second)[k - 1]]


@numba.njit(cache=True, nogil=True)
def _rank_optimum(rows, score, first, second, tp_bits, ignored_bits, iou, a, bit, tps, gaps, top, n_gt, tau):
    """The ``rank`` search over one category and area range, in the official arithmetic, from its true positives
    ``tps`` in ranking order and ``gaps[p]``, the false positives ranked between the ``p``-th and the next.

    A prefix ending with a false positive scores at least the prefix before it (LRP <= 1), and a prefix ending with
    an ignored detection the same: the minimum is at a true positive, or at the first row (LRP exactly 1) — unless
    LRP is so near 1 that rounding lets a false positive's prefix win; those prefixes are then evaluated too."""
    out = np.full(8, np.nan)
    if tps.shape[0] == 0:  # no detection, or no true positive: the official code's convention
        out[0], out[3], out[5], out[6], out[7] = 1.0, 1.0, 0, 0, n_gt
        return out
    best, best_tp, best_fp, best_loc, best_score = np.inf, 0, 0, 0.0, np.nan
    best_gap, best_k = -1, 0
    if not tp_bits[top, a] & bit:  # the first row's prefix: (FP + G) / (FP + G)
        best, best_fp, best_score = 1.0, 0 if ignored_bits[top, a] & bit else 1, score[top]
    tp_n, fp_n, iou_sum = 0, gaps[0], 0.0
    for p in range(tps.shape[0]):
        tp_n += 1
        iou_sum += iou[tps[p], a]
        fn_n = n_gt - tp_n
        loc = tp_n - iou_sum
        lrp = (loc / (1 - tau) + fp_n + fn_n) / (tp_n + fp_n + fn_n)
        if lrp < best:
            best, best_tp, best_fp, best_loc, best_score, best_gap = lrp, tp_n, fp_n, loc, score[tps[p]], -1
        gap = gaps[p + 1]
        if gap and 1 - lrp < (tp_n + fp_n + gap + fn_n) * 1e-12:
            for k in range(1, gap + 1):
                value = (loc / (1 - tau) + (fp_n + k) + fn_n) / (tp_n + (fp_n + k) + fn_n)
                if value < best:
                    best, best_tp, best_fp, best_loc, best_gap, best_k = value, tp_n, fp_n + k, loc, p + 1, k
        fp_n += gap
    if best_gap >= 0:
        best_score = _fp_score(rows, score, first, second, tp_bits, ignored_bits, a, bit, tps, best_gap, best_k)
    out[0] = best
    out[1] = best_loc / best_tp if best_tp else np.nan
    out[2] = best_fp / (best_tp + best_fp) if best_tp + best_fp else np.nan
    out[3] = (n_gt - best_tp) / n_gt
    out[4] = best_score
    out[5], out[6], out[7] = best_tp, best_fp, n_gt - best_tp
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def _rank_search_kernel(cat_index, score, first, second, tp_bits, ignored_bits, iou, t, n_gt, tau):
    """The ``rank`` search over rows in table order, ``[K, A, 8]`` as :func:`_ranked_search_kernel`: per category only
    its true positives are ranked; every false positive is placed among them by a binary search (no sort of all
    rows). The true positives of any area range are ranked together, so one search serves every area range."""
    n_cat, n_area = n_gt.shape[0], n_gt.shape[1]
    order, starts = counting_order(cat_index, n_cat)
    bit = np.uint64(1) << np.uint64(t)
    out = np.full((n_cat, n_area, 8), np.nan)
    for c in numba.prange(n_cat):
        rows = order[starts[c]:starts[c + 1]]
        hits = np.empty(rows.shape[0], np.int64)
        n_hits = 0
        top = rows[0] if rows.shape[0] else -1
        for r in rows:
            if _before(score, first, second, r, top):
                top = r
            for a in range(n_area):
                if tp_bits[r, a] & bit:
                    hits[n_hits] = r
                    n_hits += 1
                    break
        hits = _in_ranking_order(hits[:n_hits], score, first, second)
        tp_rank = np.zeros((n_area, n_hits + 1), np.int64)  # [a, u]: area a's true positives among hits[:u]
        for u in range(n_hits):
            for a in range(n_area):
                tp_rank[a, u + 1] = tp_rank[a, u] + (tp_bits[hits[u], a] & bit != 0)
        gaps = np.zeros((n_area, n_hits + 1), np.int64)
        for r in rows:
            u = -1
            for a in range(n_area):
                if not (tp_bits[r, a] & bit or ignored_bits[r, a] & bit):
                    if u < 0:
                        u = _ranked_before(hits, score, first, second, r)
                    gaps[a, tp_rank[a, u]] += 1
        for a in range(n_area):
            if n_gt[c, a] == 0:
                continue
            tps = np.empty(tp_rank[a, n_hits], np.int64)
            n = 0
            for u in range(n_hits):
                if tp_bits[hits[u], a] & bit:
                    tps[n] = hits[u]
                    n += 1
            out[c, a] = _rank_optimum(rows, score, first, second, tp_bits, ignored_bits, iou, a, bit, tps, gaps[a],
                                      top, n_gt[c, a], tau)
    return out


@numba.njit(cache=True, nogil=True)
def _grid_optimum(score, tp, ignored, iou, lo, hi, n_gt, tau, grid, strict):
    """``grid`` search over rows ``lo:hi``, in the ECCV'18 code's arithmetic."""
    n = hi - lo
    loc_error = np.zeros(n)  # 1 − IoU of the true positives (the code maps a matched IoU x != 0 to 1 − x)
    tp_cum = np.zeros(n + 1, np.int64)
    fp_cum = np.zeros(n + 1, np.int64)
    for j in range(n):
        i = lo + j
        if tp[i] and iou[i] != 0.0:
            loc_error[j] = 1 - iou[i]
        tp_cum[j + 1] = tp_cum[j] + tp[i]
        fp_cum[j + 1] = fp_cum[j] + (not tp[i] and not ignored[i])
    out = np.full(8, np.nan)
    best = np.inf
    kept = 0
    for s in range(grid.shape[0] - 1, -1, -1):  # from the highest threshold, so that the lowest wins ties last
        while kept < n and (score[lo + kept] > grid[s] or (not strict and score[lo + kept] == grid[s])):
            kept += 1
        omega, nhat = float(tp_cum[kept]), float(fp_cum[kept])
        mhat = n_gt - omega
        norm = max(omega + nhat, float(n_gt))
        loc_sum = pairwise_sum(loc_error, 0, kept)
        z = (omega + mhat + nhat) / norm
        lrp = (loc_sum / norm + (1 - tau) * (nhat / norm) + (1 - tau) * (mhat / norm)) / z / (1 - tau)
        if lrp <= best:
            best = lrp
            out[0] = lrp
            out[1] = loc_sum / omega if omega else np.nan
            out[2] = nhat / (omega + nhat) if omega + nhat else np.nan
            out[3] = mhat / n_gt
            out[4] = s * 0.01
            out[5], out[6], out[7] = omega, nhat, mhat
    return out


@numba.njit(cache=True, nogil=True, parallel=True)
def _ranked_search_kernel(starts, score, tp, ignored, iou, n_gt, tau, grid_search, grid, strict):
    """The ``score`` (or ``grid``) search over ranked rows, ``[K, A, 8]``: oLRP, loc, fp, fn, threshold, N_TP, N_FP,
    N_FN at the optimum per (category, area range); NaN rows where the category has no regular ground truth."""
    n_cat, n_area = starts.shape[0] - 1, tp.shape[1]
    out = np.full((n_cat, n_area, 8), np.nan)
    for k in numba.prange(n_cat * n_area):
        c, a = k // n_area, k % n_area
        if n_gt[c, a] == 0:
            continue
        lo, hi = starts[c], starts[c + 1]
        if grid_search:
            out[c, a] = _grid_optimum(score, tp[:, a], ignored[:, a], iou[:, a], lo, hi, n_gt[c, a], tau, grid, strict)
        else:
            out[c, a] = _score_optimum(score, tp[:, a], ignored[:, a], iou[:, a], lo, hi, n_gt[c, a], tau)
    return out


@dataclass(frozen=True)
class OptimalLRP:
    """oLRP per (category, area range): ``table`` has ``category_id, area_range, n_gt`` and the fields at the
    optimum (null where undefined); ``summary()`` is the official summary."""

    table: pl.DataFrame
    iou_threshold: float
    search: str

    @property
    def area_ranges(self) -> list:
        return self.table.get_column("area_range").unique(maintain_order=True).to_list()

    def mean(self, field: str, area_range: str) -> float:
        """The official summary of a field: its mean over the categories with regular ground truth in the area
        range, NaN dropped (NumPy's mean, in category order); −1 when nothing is left."""
        values = (self.table.filter((pl.col("area_range") == area_range) & (pl.col("n_gt") > 0))
                  .get_column(field).drop_nulls().to_numpy())
        return float(np.mean(values)) if len(values) else -1.0

    def summary(self) -> dict:
        """moLRP and its mean components (the first area range, 'all'), moLRP per other area range, and per category
        (first area range, categories with regular ground truth) oLRP, components and threshold (null: NaN)."""
        first, *others = self.area_ranges
        summary = {"olrp": self.mean("olrp", first), "olrp_loc": self.mean("loc", first),
                   "olrp_fp": self.mean("fp", first), "olrp_fn": self.mean("fn", first),
                   **{f"olrp_{label}": self.mean("olrp", label) for label in others}}
        per_class = self.table.filter((pl.col("area_range") == first) & (pl.col("n_gt") > 0))
        summary["per_class"] = {str(row["category_id"]): {f: row[f] for f in ("olrp", "loc", "fp", "fn", "threshold")}
                                for row in per_class.iter_rows(named=True)}
        return summary


def optimal_lrp(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, category_ids, protocol,
                iou_threshold: float | None = None, search: str = "rank", compare: str = ">=",
                image_ids=None) -> OptimalLRP:
    """oLRP at ``iou_threshold`` (a threshold of the match table; per area range only its first, the official
    ``iouThrs[0]``) for every category and area range of the protocol (see the module's docstring)."""
    check_option("search", search, SEARCHES)
    check_option("compare", compare, COMPARES)
    t = threshold_index(protocol, iou_threshold)
    n_area = len(protocol.area_ranges) if t == 0 else 1
    tau = protocol.iou_thresholds[t]
    parts = []
    batches = (outcome_batches if search == "rank" else ranked_batches)(
        dt_matches, gt_matches, category_ids, protocol, t, n_area, image_ids)
    for batch in batches:
        if search == "rank":
            values = _rank_search_kernel(batch.cat_index, batch.score, batch.first, batch.second, batch.tp_bits,
                                         batch.ignored_bits, batch.iou, t, batch.n_gt, tau)
        else:
            values = _ranked_search_kernel(batch.starts, batch.score, batch.tp, batch.ignored, batch.iou, batch.n_gt,
                                           tau, search == "grid", SCORE_GRID, compare == ">")
        k, a = np.indices(values.shape[:2]).reshape(2, -1)
        parts.append(pl.DataFrame({
            "category_id": batch.category_ids[k],
            "area_range": np.array([r[0] for r in protocol.area_ranges[:n_area]])[a],
            "n_gt": batch.n_gt[k, a],
            **{field: values[k, a, i] for i, field in enumerate(_FIELDS)},
        }))
        del batch  # not held while the next batch is read
    table = pl.concat(parts).with_columns([pl.col(f).fill_nan(None) for f in _FIELDS]).with_columns(
        [pl.col(f).cast(pl.Int64) for f in ("n_tp", "n_fp", "n_fn")])
    order = {r[0]: i for i, r in enumerate(protocol.area_ranges)}
    table = table.sort(pl.col("area_range").replace_strict(order), "category_id")
    return OptimalLRP(table=table, iou_threshold=tau, search=search)
