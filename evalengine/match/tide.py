"""TIDE's matching and error assignment (Bolya et al., ECCV 2020; ``tidecv`` 1.0.1 ``TIDEExample`` and
``TIDERun._eval_image``), per image over the ``pairs`` table (:mod:`evalengine.match.pairs`).

tidecv's rules, which differ from pycocotools':

- per image, the detections of ALL classes are sorted by score (Python's stable sort: file order breaks ties) and
  cut to ``max_dets`` (100 per image, not per class);
- matching: in that order each detection takes the unused same-class ground truth of highest IoU (the first in file
  order among equal ones, NumPy's argmax) when that IoU is ``>= pos_threshold``; crowd annotations are not matched;
- ignore regions (crowd annotations): an unmatched detection whose intersection over its own area with a crowd
  region of its class is strictly ``> pos_threshold`` is ignored (neither TP nor FP);
- every unmatched or ignored detection gets one error, tested in this order: no non-crowd ground truth in the image
  → Bkg; Loc: ``background_threshold <= max same-class IoU <= pos_threshold`` (target: its argmax); Cls: max
  other-class IoU ``>= pos_threshold`` (target: its argmax); Dupe: max IoU with a used same-class ground truth
  ``>= pos_threshold``; Bkg: max IoU with any ground truth ``<= background_threshold``; else Both;
- a Cls or Loc error fixes into a true positive only when its target is unused and it has the highest score of the
  errors aiming at that target (the first in detection order among equal scores; tidecv's ``BestGTMatch``);
- a non-crowd ground truth left unused is a false negative; a Miss unless some Cls/Loc error aimed at it.

``matching="coco"`` keeps the error rules but takes the matching from pycocotools (the default ``coco`` match table
at IoU 0.5, area "all", 100 detections per image and category): true positives, ignored detections (on crowd regions)
and used ground truths are pycocotools', ignored detections get no error, and "crowd" in the rules above means
pycocotools' ignored ground truth (crowd, or area outside "all").

The ``dt`` side has one row per kept detection, grouped by class (``outcome``: 0 false positive, 1 true positive,
2 ignored; ``error``: :data:`ERRORS` code, 0 none; ``target_gt_id``: the matched ground truth, or the Cls/Loc target;
``fix_category_id``: the class its fixed true positive counts in, null if fixing it removes it); the ``gt`` side one
row per non-crowd ground truth (``used``, ``missed``).
"""

from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError
from evalengine.errors import check_option
from evalengine.match.coco import CocoProtocol
from evalengine.match.groups import file_order_by_image, merge_groups
from evalengine.match.pairs import IOU_TYPES, PairsProtocol
from evalengine.match.protocol import (Protocol, box_keyed, column_array, positive_integers, required_tables,
                                       unit_thresholds)
from evalengine.store.paths import shard_file

# tidecv's error types in its order (``TIDE._error_types``); the code of a detection error is its index + 1
ERRORS = ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss")
CLS, LOC, BOTH, DUPE, BKG = 1, 2, 3, 4, 5
FP, TP, IGNORED = 0, 1, 2
MATCHINGS = ("tide", "coco")


@dataclass(frozen=True)
class TideProtocol(Protocol):
    """tidecv's ``TIDE(pos_threshold, background_threshold)`` with ``Data.max_dets`` detections per image; with
    ``matching="coco"``, pycocotools' matching at ``pos_threshold`` (``max_dets`` per image and category).
    ``iou_type``: ``bbox`` (tidecv's ``TIDE.BOX``) or ``segm`` (``TIDE.MASK``: mask IoU)."""

    pos_threshold: float = 0.5
    background_threshold: float = 0.1
    max_dets: int = 100
    matching: str = "tide"
    iou_type: str = "bbox"
    name: ClassVar[str] = "tide"
    sides: ClassVar[tuple] = ("dt", "gt")

    def __post_init__(self):
        """Thresholds in (0, 1], the background one not above the positive one (a pair below the background
        threshold is not in the pairs table, so a higher positive threshold could not be tested)."""
        object.__setattr__(self, "pos_threshold", unit_thresholds("pos_threshold", [self.pos_threshold])[0])
        object.__setattr__(self, "background_threshold",
                           unit_thresholds("background_threshold", [self.background_threshold])[0])
        object.__setattr__(self, "max_dets", positive_integers("max_dets", [self.max_dets])[0])
        check_option("matching", self.matching, MATCHINGS)
        check_option("iou_type", self.iou_type, IOU_TYPES, ProtocolError)
        if self.background_threshold > self.pos_threshold:
            raise ProtocolError(f"background_threshold {self.background_threshold} is above pos_threshold "
                                f"{self.pos_threshold}")

    def match_params(self) -> dict:
        """The parameters; ``iou_type`` only for masks (so that box tables keep their keys)."""
        return box_keyed(super().match_params())

    @property
    def pairs(self) -> PairsProtocol:
        """The pairs table read: every pair at or above the background threshold."""
        return PairsProtocol(min_iou=self.background_threshold, iou_type=self.iou_type)

    @property
    def coco(self) -> CocoProtocol | None:
        """The COCO protocol whose match table ``matching="coco"`` reads (None for tidecv's matching)."""
        if self.matching == "tide":
            return None
        # its table (the one ``evaluate`` makes) has IoU 0.5, area all, cap 100 first
        default = CocoProtocol(iou_type=self.iou_type)
        if (self.pos_threshold, self.max_dets) == (default.iou_thresholds[0], default.max_det_cap):
            return default
        return CocoProtocol(iou_thresholds=(self.pos_threshold,), area_ranges=default.area_ranges[:1],
                            max_dets=(self.max_dets,), iou_type=self.iou_type)

    def required(self) -> tuple:
        """The protocols whose tables this one reads, to be matched before it."""
        return (self.pairs,) if self.coco is None else (self.pairs, self.coco)

    def shard_inputs(self, layout, run: str) -> tuple:
        layout.check_run(run)
        paths = layout.paths
        folders = required_tables(layout, run, self.required())
        inputs = [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k)),
                   "pairs": str(shard_file(folders["pairs"] / "pairs", k)),
                   **({} if self.coco is None else {"coco_dt": str(shard_file(folders["coco"] / "dt", k)),
                                                    "coco_gt": str(shard_file(folders["coco"] / "gt", k))})}
                  for k in range(layout.n_shards)]
        return inputs, {}

    def input_columns(self) -> dict:
        """No boxes (the pairs hold the IoUs); of the COCO match table, what :func:`_coco_matching` reads."""
        return {"dt": ["image_id", "category_id", "det_id", "score"],
                "gt": ["image_id", "category_id", "gt_id", "iscrowd", "gt_order"],
                "coco_dt": ["image_id", "category_id", "det_id", "score", "tp_bits", "ignored_bits", "matched_gt_id"],
                "coco_gt": ["gt_id", "ignored_bits", "matched_bits"]}

    def match_shard(self, tables: dict, context: dict) -> dict:
        return dict(zip(self.sides, tide_shard(tables, self)))


@numba.njit(cache=True, nogil=True)
def _capped_by_score(order, starts, score, max_dets):
    """Each group (image) of ``order`` (rows in (image, det_id) order) by −score, stably, cut to ``max_dets``: the
    kept rows in tidecv's per-image order."""
    kept = np.empty(order.shape[0], np.int64)
    n = 0
    for k in range(starts.shape[0] - 1):
        seg = order[starts[k]:starts[k + 1]]
        seg = seg[np.argsort(-score[seg], kind="mergesort")]  # comparisons: -0.0 ties with 0.0
        take = min(seg.shape[0], max_dets)
        kept[n:n + take] = seg[:take]
        n += take
    return kept[:n]


def _tide_order(dt: pl.DataFrame, max_dets: int) -> np.ndarray:
    """The rows of ``dt`` in tidecv's per-image order (score, then file order), cut to ``max_dets`` per image."""
    by_image, starts = file_order_by_image(column_array(dt, "image_id"), column_array(dt, "det_id"))
    return _capped_by_score(by_image, starts, column_array(dt, "score", np.float64), max_dets)


def _positions(ids: np.ndarray, wanted: np.ndarray) -> np.ndarray:
    """The position in ``ids`` (distinct) of each of ``wanted``, −1 where absent."""
    if not ids.shape[0]:
        return np.full(wanted.shape[0], -1, np.int64)
    if np.all(ids[1:] > ids[:-1]):  # a shard's detections are stored in file order
        at = np.minimum(np.searchsorted(ids, wanted), ids.shape[0] - 1)
    else:
        by_id = np.argsort(ids)
        at = by_id[np.minimum(np.searchsorted(ids, wanted, sorter=by_id), ids.shape[0] - 1)]
    return np.where(ids[at] == wanted, at, -1)


def _coco_matching(tables: dict, gt: pl.DataFrame):
    """The detections pycocotools evaluated, with their outcome and partner at the protocol's first IoU threshold and
    area range; the ground truths' matched and ignored flags there."""
    bit = lambda column: (pl.col(column).arr.first() & 1) != 0  # noqa: E731 - area 0, threshold 0
    coco_dt = tables["coco_dt"].select(
        "image_id", "category_id", "det_id", "score",
        pl.when(bit("tp_bits")).then(TP).when(bit("ignored_bits")).then(IGNORED).otherwise(FP).alias("outcome"),
        pl.col("matched_gt_id").arr.first().alias("partner"))
    coco_gt = tables["coco_gt"].select("gt_id", ((pl.col("ignored_bits") & 1) != 0).alias("crowd"),
                                       bit("matched_bits").alias("used"))
    return coco_dt, gt.drop("iscrowd").join(coco_gt, on="gt_id", maintain_order="left")


def _pair_arrays(pairs: pl.DataFrame, source: pl.DataFrame, kept: np.ndarray, gt: pl.DataFrame) -> tuple:
    """``(pair_start, pair_g, pair_iou)``: the pairs of the kept detections (rows ``kept`` of ``source``) by position
    in ``kept`` (``pair_start[d]`` to ``pair_start[d + 1]``), each detection's in ground-truth row order (the pairs
    table's: file order)."""
    d_of_row = np.full(source.height + 1, -1, np.int64)  # the last entry answers −1 (absent)
    d_of_row[kept] = np.arange(kept.shape[0])
    d = d_of_row[_positions(column_array(source, "det_id"), column_array(pairs, "det_id"))]
    g = _positions(column_array(gt, "gt_id"), column_array(pairs, "gt_id"))
    keep = np.flatnonzero((d >= 0) & (g >= 0))
    keep = keep[np.argsort(d[keep], kind="stable")]
    pair_start = np.zeros(kept.shape[0] + 1, np.int64)
    np.cumsum(np.bincount(d[keep], minlength=kept.shape[0]), out=pair_start[1:])
    return pair_start, g[keep], column_array(pairs, "iou", np.float64)[keep]


def _by_class(category: np.ndarray) -> np.ndarray:
    """A stable order grouping the rows by class (a radix sort when the ids are small, as COCO's are)."""
    small = category.shape[0] and 0 <= category.min() and category.max() < 2**15
    return np.argsort(category.astype(np.int16) if small else category, kind="stable")


def tide_shard(tables: dict, protocol: TideProtocol) -> tuple:
    """``(dt rows, gt rows)`` of one shard (schemas :data:`evalengine.schema.TIDE_DT`, ``TIDE_GT``)."""
    gt = tables["gt"].sort("image_id", "gt_order")
    if protocol.coco is None:
        source, cap = tables["dt"], protocol.max_dets
        gt = gt.with_columns(pl.col("iscrowd").alias("crowd"), pl.lit(False).alias("used"))
    else:
        (source, gt), cap = _coco_matching(tables, gt), np.iinfo(np.int64).max
    kept = _tide_order(source, cap)
    dt = source[kept]
    pair_start, pair_g, pair_iou = _pair_arrays(tables["pairs"], source, kept, gt)
    gt_image, dt_image = column_array(gt, "image_id"), column_array(dt, "image_id")
    groups = merge_groups(gt_image, gt_image, dt_image, dt_image, False)
    gt_cat, gt_crowd, gt_ids = column_array(gt, "category_id"), column_array(gt, "crowd", np.bool_), column_array(gt, "gt_id")
    dt_cat = column_array(dt, "category_id")
    used = column_array(gt, "used", np.bool_).copy()
    if protocol.coco is None:
        outcome, target = np.zeros(dt.height, np.int8), np.full(dt.height, -1, np.int64)
    else:
        outcome = column_array(dt, "outcome", np.int8).copy()
        partner = _positions(gt_ids, dt.get_column("partner").fill_null(-1).to_numpy())
        target = np.where(outcome == TP, partner, -1)
    error, fixes, usable = assign_errors(
        np.ascontiguousarray(groups), dt_cat, column_array(dt, "score", np.float64), gt_cat, gt_crowd, pair_start,
        pair_g, pair_iou, protocol.pos_threshold, protocol.background_threshold, protocol.coco is None, outcome,
        target, used)
    has_target = target >= 0
    safe = np.where(has_target, target, 0)
    fix_category = np.where(error == CLS, gt_cat[safe] if gt.height else dt_cat, dt_cat)
    rows = _by_class(dt_cat)  # grouped by class: the ΔAP step reads class batches
    dt_rows = pl.DataFrame({
        **{c: column_array(dt, c, dtype)[rows] for c, dtype in
           (("image_id", np.int64), ("category_id", np.int64), ("det_id", np.int64), ("score", np.float64))},
        "outcome": outcome[rows],
        "error": error[rows],
        "target_gt_id": pl.Series((gt_ids[safe] if gt.height else target)[rows]).set(pl.Series(~has_target[rows]),
                                                                                       None),
        "fix_category_id": pl.Series(fix_category[rows]).set(pl.Series(~fixes[rows]), None),
    }, schema=schema.TIDE_DT)
    regular = pl.Series(~gt_crowd)
    gt_rows = pl.DataFrame({
        **{c: gt.get_column(c).filter(regular) for c in ("image_id", "category_id", "gt_id")},
        "used": used[~gt_crowd],
        "missed": ~used[~gt_crowd] & ~usable[~gt_crowd],
    }, schema=schema.TIDE_GT)
    return dt_rows, gt_rows


@numba.njit(cache=True, nogil=True)
def _best(p0, p1, pair_g, pair_iou, want, gt_cat, gt_crowd, used, cat, same, used_only):
    """Max IoU over a detection's pairs ``[p0, p1)`` with non-crowd ground truths of its class (``same``) or of the
    others, the used ones only with ``used_only``; and its first argmax (NumPy's ``argmax`` on tidecv's matrix).
    ``want``: the ground truths still free (matching), or None. (-1.0, -1) when there is none."""
    best, at = -1.0, -1
    for p in range(p0, p1):
        g = pair_g[p]
        if gt_crowd[g] or (gt_cat[g] == cat) != same or (used_only and not used[g]) or (want and used[g]):
            continue
        if pair_iou[p] > best:
            best, at = pair_iou[p], g
    return best, at


@numba.njit(cache=True, nogil=True)
def assign_errors(groups, dt_cat, dt_score, gt_cat, gt_crowd, pair_start, pair_g, pair_iou, pos, bg, tide_matching,
                  outcome, target, used):
    """tidecv's matching and ignore regions (with ``tide_matching``; else ``outcome``, ``target`` and ``used`` come
    matched) and error assignment over every image group (see the module's docstring); ``(error, fixes, usable)``,
    the first three arrays updated in place."""
    n_dt, n_gt = dt_cat.shape[0], gt_cat.shape[0]
    error = np.zeros(n_dt, np.int8)
    fixes = np.zeros(n_dt, np.bool_)
    usable = np.zeros(n_gt, np.bool_)
    best_score = np.full(n_gt, -1.0)  # BestGTMatch: the best score starts at -1, a later one must exceed it
    best_det = np.full(n_gt, -1, np.int64)
    for k in range(groups.shape[0]):
        g0, ng, d0, nd = groups[k, 0], groups[k, 1], groups[k, 2], groups[k, 3]
        n_regular = 0
        for g in range(g0, g0 + ng):
            n_regular += not gt_crowd[g]
        for d in range(d0, d0 + nd if tide_matching else d0):  # matching, in score order
            iou, g = _best(pair_start[d], pair_start[d + 1], pair_g, pair_iou, True, gt_cat, gt_crowd, used,
                           dt_cat[d], True, False)
            if g >= 0 and iou >= pos:
                used[g] = True
                outcome[d], target[d] = TP, g
        for d in range(d0, d0 + nd if tide_matching else d0):  # ignore regions: crowd of the class, IoA > threshold
            if outcome[d] == TP:
                continue
            for p in range(pair_start[d], pair_start[d + 1]):
                g = pair_g[p]
                if gt_crowd[g] and gt_cat[g] == dt_cat[d] and pair_iou[p] > pos:
                    outcome[d] = IGNORED
        for d in range(d0, d0 + nd):
            if outcome[d] == TP or (outcome[d] == IGNORED and not tide_matching):
                continue
            if n_regular == 0:
                error[d] = BKG
                continue
            p0, p1 = pair_start[d], pair_start[d + 1]
            iou, g = _best(p0, p1, pair_g, pair_iou, False, gt_cat, gt_crowd, used, dt_cat[d], True, False)
            if bg <= iou <= pos:
                error[d], target[d] = LOC, g
            else:
                iou, g = _best(p0, p1, pair_g, pair_iou, False, gt_cat, gt_crowd, used, dt_cat[d], False, False)
                if iou >= pos:
                    error[d], target[d] = CLS, g
                elif _best(p0, p1, pair_g, pair_iou, False, gt_cat, gt_crowd, used, dt_cat[d], True, True)[0] >= pos:
                    error[d] = DUPE
                elif max(iou, _best(p0, p1, pair_g, pair_iou, False, gt_cat, gt_crowd, used, dt_cat[d], True,
                                    False)[0]) <= bg:
                    error[d] = BKG
                else:
                    error[d] = BOTH
            g = target[d]
            if g >= 0 and not used[g]:
                usable[g] = True
                if best_score[g] < dt_score[d]:
                    best_score[g], best_det[g] = dt_score[d], d
        for d in range(d0, d0 + nd):
            g = target[d]
            fixes[d] = outcome[d] != TP and g >= 0 and not used[g] and best_det[g] == d
    return error, fixes, usable
