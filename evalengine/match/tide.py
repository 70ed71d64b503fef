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

The ``dt`` side has one row per kept detection (``outcome``: 0 false positive, 1 true positive, 2 ignored;
``error``: :data:`ERRORS` code, 0 none; ``target_gt_id``: the matched ground truth, or the Cls/Loc target;
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
from evalengine.match.groups import merge_groups, rank_in_group
from evalengine.match.pairs import PairsProtocol
from evalengine.match.protocol import Protocol, column_array, positive_integers, unit_thresholds
from evalengine.store.paths import PROTOCOL_FILE, shard_file

# tidecv's error types in its order (``TIDE._error_types``); the code of a detection error is its index + 1
ERRORS = ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss")
CLS, LOC, BOTH, DUPE, BKG = 1, 2, 3, 4, 5
FP, TP, IGNORED = 0, 1, 2


@dataclass(frozen=True)
class TideProtocol(Protocol):
    """tidecv's ``TIDE(pos_threshold, background_threshold)`` with ``Data.max_dets`` detections per image."""

    pos_threshold: float = 0.5
    background_threshold: float = 0.1
    max_dets: int = 100
    name: ClassVar[str] = "tide"
    sides: ClassVar[tuple] = ("dt", "gt")

    def __post_init__(self):
        """Thresholds in (0, 1], the background one not above the positive one (a pair below the background
        threshold is not in the pairs table, so a higher positive threshold could not be tested)."""
        object.__setattr__(self, "pos_threshold", unit_thresholds("pos_threshold", [self.pos_threshold])[0])
        object.__setattr__(self, "background_threshold",
                           unit_thresholds("background_threshold", [self.background_threshold])[0])
        object.__setattr__(self, "max_dets", positive_integers("max_dets", [self.max_dets])[0])
        if self.background_threshold > self.pos_threshold:
            raise ProtocolError(f"background_threshold {self.background_threshold} is above pos_threshold "
                                f"{self.pos_threshold}")

    @property
    def pairs(self) -> PairsProtocol:
        """The pairs table read: every pair at or above the background threshold."""
        return PairsProtocol(min_iou=self.background_threshold)

    def shard_inputs(self, layout, run: str) -> tuple:
        layout.check_run(run)
        paths = layout.paths
        pairs = paths.matches_dir(self.pairs.match_key(), run)
        if not (pairs / PROTOCOL_FILE).is_file():
            raise ProtocolError(f"{layout.root}: run '{run}' has no pairs table with min_iou "
                                f"{self.background_threshold}; match the pairs protocol first")
        return [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k)),
                 "pairs": str(shard_file(pairs / "pairs", k))} for k in range(layout.n_shards)], {}

    def match_shard(self, tables: dict, context: dict) -> dict:
        return dict(zip(self.sides, tide_shard(tables["gt"], tables["dt"], tables["pairs"], self)))


def tide_shard(gt: pl.DataFrame, dt: pl.DataFrame, pairs: pl.DataFrame, protocol: TideProtocol) -> tuple:
    """``(dt rows, gt rows)`` of one shard (schemas :data:`evalengine.schema.TIDE_DT`, ``TIDE_GT``)."""
    dt = dt.sort([pl.col("image_id"), pl.col("score") + 0.0, pl.col("det_id")], descending=[False, True, False])
    image = column_array(dt, "image_id")
    keep = rank_in_group(image, np.zeros_like(image)) < protocol.max_dets
    dt = dt.filter(keep).with_row_index("d")
    gt = gt.sort("image_id", "gt_order").with_row_index("g")
    pairs = (pairs.lazy().join(dt.lazy().select("det_id", "d"), on="det_id")
             .join(gt.lazy().select("gt_id", "g"), on="gt_id").sort("d", "g").select("d", "g", "iou").collect())
    pair_d = column_array(pairs, "d")
    pair_start = np.searchsorted(pair_d, np.arange(dt.height + 1)).astype(np.int64)
    gt_image, dt_image = column_array(gt, "image_id"), column_array(dt, "image_id")
    groups = merge_groups(gt_image, gt_image, dt_image, dt_image, False)
    gt_cat, gt_crowd = column_array(gt, "category_id"), column_array(gt, "iscrowd", np.bool_)
    dt_cat = column_array(dt, "category_id")
    outcome, error, target, fixes, used, usable = assign_errors(
        np.ascontiguousarray(groups), dt_cat, column_array(dt, "score", np.float64), gt_cat, gt_crowd, pair_start,
        column_array(pairs, "g"), column_array(pairs, "iou", np.float64), protocol.pos_threshold,
        protocol.background_threshold)
    gt_ids = column_array(gt, "gt_id")
    has_target = target >= 0
    safe = np.where(has_target, target, 0)
    fix_category = np.where(error == CLS, gt_cat[safe] if gt.height else dt_cat, dt_cat)
    dt_rows = pl.DataFrame({
        **{c: dt.get_column(c) for c in ("image_id", "category_id", "det_id", "score")},
        "outcome": outcome,
        "error": error,
        "target_gt_id": pl.Series(gt_ids[safe] if gt.height else target).set(pl.Series(~has_target), None),
        "fix_category_id": pl.Series(fix_category).set(pl.Series(~fixes), None),
    }, schema=schema.TIDE_DT)
    regular = ~gt_crowd
    gt_rows = pl.DataFrame({
        **{c: gt.get_column(c).filter(pl.Series(regular)) for c in ("image_id", "category_id", "gt_id")},
        "used": used[regular],
        "missed": ~used[regular] & ~usable[regular],
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
def assign_errors(groups, dt_cat, dt_score, gt_cat, gt_crowd, pair_start, pair_g, pair_iou, pos, bg):
    """tidecv's matching, ignore regions and error assignment over every image group (see the module's docstring)."""
    n_dt, n_gt = dt_cat.shape[0], gt_cat.shape[0]
    outcome = np.zeros(n_dt, np.int8)
    error = np.zeros(n_dt, np.int8)
    target = np.full(n_dt, -1, np.int64)
    fixes = np.zeros(n_dt, np.bool_)
    used = np.zeros(n_gt, np.bool_)
    usable = np.zeros(n_gt, np.bool_)
    best_score = np.full(n_gt, -1.0)  # BestGTMatch: the best score starts at -1, a later one must exceed it
    best_det = np.full(n_gt, -1, np.int64)
    for k in range(groups.shape[0]):
        g0, ng, d0, nd = groups[k, 0], groups[k, 1], groups[k, 2], groups[k, 3]
        n_regular = 0
        for g in range(g0, g0 + ng):
            n_regular += not gt_crowd[g]
        for d in range(d0, d0 + nd):  # matching, in score order
            iou, g = _best(pair_start[d], pair_start[d + 1], pair_g, pair_iou, True, gt_cat, gt_crowd, used,
                           dt_cat[d], True, False)
            if g >= 0 and iou >= pos:
                used[g] = True
                outcome[d], target[d] = TP, g
        for d in range(d0, d0 + nd):  # ignore regions: crowd of the class, IoA strictly above the threshold
            if outcome[d] == TP:
                continue
            for p in range(pair_start[d], pair_start[d + 1]):
                g = pair_g[p]
                if gt_crowd[g] and gt_cat[g] == dt_cat[d] and pair_iou[p] > pos:
                    outcome[d] = IGNORED
        for d in range(d0, d0 + nd):
            if outcome[d] == TP:
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
    return outcome, error, target, fixes, used, usable
