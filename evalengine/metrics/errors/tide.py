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


@numba.njit(cache=True, nogil=True)
def _class_aps(correct, starts, n_gt, recall_thresholds, eps):
    """Per class, from its points in sorted order (``starts``: class boundaries): precision ``tp / (tp + fp + eps)``,
    its right-to-left running maximum sampled at each recall threshold with ``searchsorted(recall, r, 'left')`` (0
    past the last point), averaged; 0 for a class without ground truth."""
    n_cls = n_gt.shape[0]
    aps = np.zeros(n_cls)
    for c in range(n_cls):
        s, e = starts[c], starts[c + 1]
        if n_gt[c] == 0 or e == s:
            continue
        n = e - s
        precision = np.empty(n)
        recall = np.empty(n)
        n_true = 0
        for i in range(n):
            n_true += correct[s + i]
            precision[i] = n_true / (i + 1 + eps)
            recall[i] = n_true / n_gt[c]
        for i in range(n - 1, 0, -1):
            if precision[i] > precision[i - 1]:
                precision[i - 1] = precision[i]
        total = 0.0
        for r in recall_thresholds:
            at = np.searchsorted(recall, r)
            if at < n:
                total += precision[at]
        aps[c] = total / recall_thresholds.shape[0] * 100
    return aps


# tidecv: 101 recall points k / 100, no eps, a class with points but no ground truth counts as 0;
# pycocotools: its linspace recall thresholds, eps = np.spacing(1), classes without ground truth left out
CONVENTIONS = {"tide": (np.array([k / 100 for k in range(101)]), 0.0),
               "coco": (np.array(COCO_RECALL_THRESHOLDS), float(np.spacing(1)))}


def mean_ap(cls, correct, order, n_gt, matching: str = "tide") -> float:
    """The mAP (× 100) of points (class index, correct) taken in ``order`` (their positions sorted by −score, ties
    broken as the convention pushes them), with ``matching``'s AP and class average."""
    order = order[np.argsort(cls[order], kind="stable")]
    starts = np.searchsorted(cls[order], np.arange(n_gt.shape[0] + 1))
    aps = _class_aps(correct[order].astype(np.int64), starts, n_gt, *CONVENTIONS[matching])
    counted = n_gt > 0
    if matching == "tide":
        counted |= np.diff(starts) > 0
    if not counted.any() and matching == "coco":
        return 0.0  # pycocotools' −1: every ground truth fixed away (FalseNeg with no true positive)
    if not counted.any():
        raise EvalEngineError("TIDE's mAP is undefined: no class has ground truth or detections (tidecv divides by "
                              "zero)")
    return float(aps[counted].sum() / counted.sum())


def tide_errors(dt: pl.LazyFrame, gt: pl.LazyFrame, images: pl.LazyFrame, matching: str = "tide") -> TideResult:
    """ΔAP and counts of every TIDE error from the ``tide`` match table's ``dt`` and ``gt`` sides and the ``images``
    table (its row order is the ground-truth file's image order), with the AP of ``matching``'s convention."""
    order = images.select("image_id").with_row_index("image_order").select("image_id", pl.col("image_order").cast(pl.Int64))
    dt = dt.select("image_id", "category_id", "det_id", "score", "outcome", "error", "fix_category_id").join(
        order, on="image_id").collect()
    gt = gt.select("category_id", "used", "missed").collect()
    classes = pl.concat([dt.get_column("category_id"), gt.get_column("category_id")]).unique().sort().to_numpy()
    cls, fix_cls = (np.searchsorted(classes, dt.get_column(c).fill_null(classes[0]).to_numpy())
                    for c in ("category_id", "fix_category_id"))
    gt_cls = np.searchsorted(classes, gt.get_column("category_id").to_numpy())

    def per_class(mask):
        return np.bincount(gt_cls[mask], minlength=classes.shape[0]).astype(np.int64)

    n_gt = per_class(np.ones(gt.height, bool))
    column = dt.get_column
    outcome, error, det_id = column("outcome").to_numpy(), column("error").to_numpy(), column("det_id").to_numpy()
    fixes = column("fix_category_id").is_not_null().to_numpy()
    tp, counted = outcome == TP, outcome != IGNORED
    error_point = (error > 0) & counted
    by_score = -(column("score").to_numpy() + 0.0)  # -0.0 ties with 0.0, as in both references' sorts
    if matching == "tide":  # push order: the run's AP image by image; a fixed AP the errors' points first
        base_order = np.lexsort((det_id, column("image_order").to_numpy(), by_score))
        fix_order = np.lexsort((det_id, column("image_order").to_numpy(), tp, by_score))
    else:  # pycocotools: (image id, rank), fixed or not
        base_order = fix_order = np.lexsort((det_id, column("image_id").to_numpy(), by_score))

    def ap(keep, order, cls_=cls, correct=tp, gt_count=n_gt):
        return mean_ap(cls_, correct, order[keep[order]], gt_count, matching)

    base = ap(counted, base_order)
    main = {}
    for code, name in enumerate(ERRORS[:-1], start=1):
        fixed = (error == code) & fixes
        keep = tp | (error_point & (error != code)) | fixed
        main[name] = max(ap(keep, fix_order, np.where(fixed, fix_cls, cls), tp | fixed) - base, 0.0)
    missed, used = gt.get_column("missed").to_numpy(), gt.get_column("used").to_numpy()
    unfixed = tp | error_point
    main["Miss"] = max(ap(unfixed, fix_order, gt_count=n_gt - per_class(missed)) - base, 0.0)
    true_first = fix_order[np.argsort(~tp[fix_order], kind="stable")]  # FalsePos: true positives score 1, errors 0
    special = {
        "FalsePos": ap(unfixed, true_first) - base,
        "FalseNeg": ap(unfixed, fix_order, gt_count=n_gt - per_class(~used)) - base,
    }
    counts = {name: int((error == code).sum()) for code, name in enumerate(ERRORS[:-1], start=1)}
    counts["Miss"] = int(missed.sum())
    return TideResult(base, main, special, counts)
