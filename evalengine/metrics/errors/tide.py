"""TIDE (Bolya et al., "TIDE: A General Toolbox for Identifying Object Detection Errors", ECCV 2020) as a query over
the ``tide`` match table (:mod:`evalengine.match.tide`): tidecv 1.0.1's ΔAP of each error type, in its percent units.

tidecv's AP (``APDataObject.get_ap``), per class: the points sorted by −score with Python's stable sort, precision
``tp / (tp + fp)`` and recall ``tp / n_gt``, the right-to-left running maximum of precision, sampled at recall
``k / 100`` (k = 0 … 100) with ``searchsorted(recall, k / 100, 'left')`` (0 past the last point), averaged and × 100;
a class with points but no ground truth scores 0, one with neither is left out of the mean (``get_mAP``).

The order of tied scores is the order the points were pushed (what the stable sort keeps):

- the run's AP pushes image by image (images in ground-truth file order), each image in its score order (file
  order among ties): ties sort by (image, det_id);
- every fixed AP (``TIDERun.fix_errors``) pushes the errors' points first, then the original true positives: ties
  sort by (errors before true positives, image, det_id). So fixing nothing can change the AP; tidecv reports
  ``max(fixed − original, 0)`` for the main errors (so do we) and the plain difference for the special ones.

Fixes: Cls and Loc turn the error into a true positive (of the target's class for Cls) when it is its target's best
(:mod:`evalengine.match.tide`), else remove it; Both, Dupe and Bkg remove it; Miss lowers the class's ground-truth
count by its misses. FalsePos scores every true positive 1 and every error 0; FalseNeg lowers each class's count by
its unused ground truths. Ignored detections are no points, but their errors are counted and fixed like the others.

The COCO-consistent mode (``matching="coco"``) changes what TIDE leaves to its own conventions: pycocotools' matching
(:mod:`evalengine.match.tide`), pycocotools' AP50 (``tp / (tp + fp + eps)``, its linspace recall thresholds), ties in
pycocotools' order (image id, rank) whether fixed or not (so fixing nothing changes nothing), and its class average
(classes without ground truth left out; a fix that leaves none gives 0). Its AP50 is pycocotools' (× 100).
"""

from dataclasses import dataclass

import numba
import numpy as np
import polars as pl

from evalengine.errors import EvalEngineError
from evalengine.match.coco import COCO_RECALL_THRESHOLDS
from evalengine.match.tide import ERRORS, IGNORED, TP
from evalengine.numeric import counting_order
from evalengine.metrics.ap import ACCUMULATE_BATCH_ROWS, batch_frames, category_batches

SPECIAL = ("FalsePos", "FalseNeg")
_RECALL_BINS = 101  # tidecv's resolution 100: recall 0, 0.01, …, 1


@dataclass(frozen=True)
class TideResult:
    """AP50 (tidecv's, in percent), the ΔAP of each main and special error, and the error counts."""

    ap50: float
    main: dict
    special: dict
    counts: dict

    def as_dict(self) -> dict:
        return {"ap50": self.ap50, "main": self.main, "special": self.special, "counts": self.counts}

    def frame(self) -> pl.DataFrame:
        """``error, kind (main | special), delta_ap, count`` (count null for the special errors)."""
        rows = [(name, "main", self.main[name], self.counts[name]) for name in ERRORS]
        rows += [(name, "special", self.special[name], None) for name in SPECIAL]
        return pl.DataFrame(rows, schema={"error": pl.String, "kind": pl.String, "delta_ap": pl.Float64,
                                          "count": pl.Int64}, orient="row")


# tidecv: 101 recall points k / 100, no eps, a class with points but no ground truth counts as 0;
# pycocotools: its linspace recall thresholds, eps = np.spacing(1), classes without ground truth left out
CONVENTIONS = {"tide": (np.array([k / 100 for k in range(101)]), 0.0),
               "coco": (np.array(COCO_RECALL_THRESHOLDS), float(np.spacing(1)))}
# the APs computed per class: the run's, each main error fixed (ERRORS[:-1] order), then Miss, FalsePos, FalseNeg
VARIANTS = ("AP", *ERRORS, *SPECIAL)
_FALSE_POS = VARIANTS.index("FalsePos")
# the ground-truth count each variant divides by: all, all but the misses (Miss), all but the unused (FalseNeg)
_GT_COUNT = tuple({"Miss": 1, "FalseNeg": 2}.get(name, 0) for name in VARIANTS)


@numba.njit(cache=True, nogil=True)
def _ap(correct, n, n_gt, recall_thresholds, eps, precision, recall):
    """One class's AP (× 100) from its first ``n`` points in sorted order: precision ``tp / (tp + fp + eps)``, its
    right-to-left running maximum sampled at each recall threshold with ``searchsorted(recall, r, 'left')`` (0 past
    the last point), averaged; 0 without ground truth or points. ``precision``, ``recall``: scratch of size ``n``."""
    if n_gt == 0 or n == 0:
        return 0.0
    n_true = 0
    for i in range(n):
        n_true += correct[i]
        precision[i] = n_true / (i + 1 + eps)
        recall[i] = n_true / n_gt
    for i in range(n - 1, 0, -1):
        if precision[i] > precision[i - 1]:
            precision[i - 1] = precision[i]
    total = 0.0
    for r in recall_thresholds:
        at = np.searchsorted(recall[:n], r)
        if at < n:
            total += precision[at]
    return total / recall_thresholds.shape[0] * 100


@numba.njit(cache=True, nogil=True)
def _point(v, tp, counted, error, fix_here, moved):
    """Whether a row is a point of variant ``v``'s AP in its class, and whether it is correct there. ``moved``: the
    copy of a fixed error in the class its fix counts in (only in its own error's variant); ``fix_here``: a fixed
    error that stays in its class."""
    if moved:
        return v == error, True
    if v == 0:
        return counted, tp
    if v <= len(ERRORS) - 1 and error == v:  # the fixed error: a true positive here, or moved, or not fixed
        return fix_here, True
    return tp or (error > 0 and counted), tp


@numba.njit(cache=True, nogil=True, parallel=True)
def _variant_aps(order, starts, score, tp, counted, error, fix_here, moved, n_gt, errors_first, recall_thresholds,
                 eps):
    """Per class (rows ``order[starts[k]:starts[k + 1]]`` in the run's push order: −score, then the tie keys) the AP
    of every variant (:data:`VARIANTS`) and its number of points. Fixed APs take the rows in tidecv's fix order
    (``errors_first``: in a run of equal scores the errors' points before the true positives); FalsePos every true
    positive first."""
    n_cat = starts.shape[0] - 1
    aps = np.zeros((n_cat, len(VARIANTS)))
    n_points = np.zeros((n_cat, len(VARIANTS)), np.int64)
    for k in numba.prange(n_cat):
        seg = order[starts[k]:starts[k + 1]]
        n = seg.shape[0]
        fixed_order = seg.copy()
        if errors_first:
            j, i = 0, 0
            while i < n:
                end = i
                while end < n and score[seg[end]] == score[seg[i]]:
                    end += 1
                for first_tp in (False, True):
                    for r in range(i, end):
                        if tp[seg[r]] == first_tp:
                            fixed_order[j] = seg[r]
                            j += 1
                i = end
        true_first = np.concatenate((fixed_order[tp[fixed_order]], fixed_order[~tp[fixed_order]]))
        correct = np.empty(n, np.int64)
        precision, recall = np.empty(n), np.empty(n)
        for v in range(len(VARIANTS)):
            rows = seg if v == 0 else (true_first if v == _FALSE_POS else fixed_order)
            m = 0
            for i in rows:
                keep, ok = _point(v, tp[i], counted[i], error[i], fix_here[i], moved[i])
                if keep:
                    correct[m] = ok
                    m += 1
            aps[k, v] = _ap(correct, m, n_gt[k, _GT_COUNT[v]], recall_thresholds, eps, precision, recall)
            n_points[k, v] = m
    return aps, n_points


def _class_counts(gt: pl.LazyFrame, classes: np.ndarray) -> np.ndarray:
    """``(classes, 3)``: each class's ground truths, those not missed, those used (the counts of :data:`_GT_COUNT`)."""
    counts = gt.group_by("category_id").agg(pl.len().alias("n"), (~pl.col("missed")).sum().alias("kept"),
                                            pl.col("used").sum().alias("used")).collect()
    return (pl.DataFrame({"category_id": classes}).join(counts, on="category_id", how="left", maintain_order="left")
            .select("n", "kept", "used").fill_null(0).to_numpy().astype(np.int64).reshape(-1, 3))


_POINT_COLUMNS = ["category_id", "image_id", "det_id", "score", "outcome", "error", "fix_category_id", "moved"]


def _points(dt: pl.LazyFrame) -> pl.LazyFrame:
    """The points of every class: its detections, and a copy of every fixed error of another class whose fix counts in
    it (``moved``, with that class as ``category_id``); a sharded table keeps its ``shard`` (read a shard at a
    time)."""
    shard = ["shard"] if "shard" in dt.collect_schema() else []
    own = dt.select(*_POINT_COLUMNS[:-1], pl.lit(False).alias("moved"), *shard)
    moved = (dt.filter(pl.col("fix_category_id") != pl.col("category_id"))
             .select(pl.col("fix_category_id").alias("category_id"), *_POINT_COLUMNS[1:-1], pl.lit(True).alias("moved"),
                     *shard))
    return pl.concat([own, moved])


def _with_ranks(rows: pl.DataFrame, batch: np.ndarray, image_rank: pl.DataFrame) -> pl.DataFrame:
    """The points of a batch of classes with their image's ``image_rank`` (the first tie key) and ``cat_index``."""
    index = pl.DataFrame({"category_id": batch, "cat_index": np.arange(batch.shape[0])})
    return rows.join(image_rank, on="image_id", how="left").join(index, on="category_id", how="left")


@numba.njit(cache=True, nogil=True, parallel=True)
def _by_score(order, starts, score, tie):
    """Each class's rows (``order[starts[k]:starts[k + 1]]``) by −score, then ``tie`` (distinct keys: any sort of
    them gives the one order, so the fast unstable one)."""
    for k in numba.prange(starts.shape[0] - 1):
        seg = order[starts[k]:starts[k + 1]]
        seg[:] = seg[np.argsort(tie[seg])]
        seg[:] = seg[np.argsort(-score[seg], kind="mergesort")]  # comparisons: -0.0 ties with 0.0
    return order


def _push_order(rows: pl.DataFrame, batch: np.ndarray) -> tuple:
    """``(order, starts)``: the rows grouped by class, each class by −score, then image rank, then det_id (one key:
    det ids are file positions, below 2^32)."""
    det_id = rows.get_column("det_id").to_numpy()
    if det_id.size and det_id.max() >= 2**32:
        raise EvalEngineError(f"TIDE: detection id {det_id.max()} is 2^32 or more (ids are file positions)")
    tie = (rows.get_column("image_rank").to_numpy().astype(np.int64) << 32) + det_id
    order, starts = counting_order(rows.get_column("cat_index").to_numpy(), batch.shape[0])
    return _by_score(order, starts, rows.get_column("score").to_numpy(), tie), starts


def _mean(aps: np.ndarray, n_points: np.ndarray, n_gt: np.ndarray, matching: str) -> float:
    """The class average of ``matching``: tidecv's over the classes with ground truth or points, pycocotools' over
    those with ground truth (0 when none is left)."""
    counted = (n_gt > 0) | (n_points > 0) if matching == "tide" else n_gt > 0
    if not counted.any() and matching == "coco":
        return 0.0  # pycocotools' −1: every ground truth fixed away (FalseNeg with no true positive)
    if not counted.any():
        raise EvalEngineError("TIDE's mAP is undefined: no class has ground truth or detections (tidecv divides by "
                              "zero)")
    return float(aps[counted].sum() / counted.sum())


def tide_errors(dt: pl.LazyFrame, gt: pl.LazyFrame, images: pl.LazyFrame, matching: str = "tide",
                batch_rows: int = ACCUMULATE_BATCH_ROWS) -> TideResult:
    """ΔAP and counts of every TIDE error from the ``tide`` match table's ``dt`` and ``gt`` sides and the ``images``
    table (its row order is the ground-truth file's image order), with the AP of ``matching``'s convention. The
    classes are read in batches of at most ``batch_rows`` detections, split in one pass over the table and spilled to
    disk (:func:`~evalengine.metrics.ap.batch_frames`): memory does not grow with the run."""
    gt = gt.select("category_id", "used", "missed")
    classes = (pl.concat([dt.select("category_id"), gt.select("category_id")]).unique().sort("category_id")
               .collect().get_column("category_id").to_numpy())
    n_gt = _class_counts(gt, classes)
    # tidecv's ties: (image in ground-truth file order, file order); pycocotools': (image id, rank = file order)
    images = images.select("image_id") if matching == "tide" else images.select("image_id").sort("image_id")
    image_rank = images.with_row_index("image_rank").collect()
    aps, n_points = np.zeros((classes.shape[0], len(VARIANTS))), np.zeros((classes.shape[0], len(VARIANTS)), np.int64)
    counts = np.zeros(len(ERRORS), np.int64)  # by error code (0: none)
    batches = category_batches(dt, classes, batch_rows)
    frames = batch_frames(_points(dt), _POINT_COLUMNS, classes, batches)
    for (k_lo, k_hi), rows in zip(batches, frames, strict=True):  # strict: the spill is removed
        rows = _with_ranks(rows, classes[k_lo:k_hi], image_rank)
        order, starts = _push_order(rows, classes[k_lo:k_hi])
        outcome, error, moved = (rows.get_column(c).to_numpy() for c in ("outcome", "error", "moved"))
        fix_here = (rows.get_column("fix_category_id") == rows.get_column("category_id")).fill_null(False).to_numpy()
        aps[k_lo:k_hi], n_points[k_lo:k_hi] = _variant_aps(
            order, starts, rows.get_column("score").to_numpy(), outcome == TP, outcome != IGNORED, error,
            fix_here & ~moved, moved, n_gt[k_lo:k_hi], matching == "tide", *CONVENTIONS[matching])
        counts += np.bincount(error[~moved], minlength=len(ERRORS))
        del rows, order, starts, outcome, error, moved, fix_here
    means = [_mean(aps[:, v], n_points[:, v], n_gt[:, _GT_COUNT[v]], matching) for v in range(len(VARIANTS))]
    main = {name: max(means[v] - means[0], 0.0) for v, name in enumerate(ERRORS, start=1)}
    special = {name: means[VARIANTS.index(name)] - means[0] for name in SPECIAL}
    error_counts = {name: int(counts[code]) for code, name in enumerate(ERRORS[:-1], start=1)}
    error_counts["Miss"] = int(n_gt[:, 0].sum() - n_gt[:, 1].sum())
    return TideResult(means[0], main, special, error_counts)
