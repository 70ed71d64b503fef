"""COCO analyze (MATLAB ``CocoEval.analyze``, cocodataset/cocoapi; after Hoiem et al.) as a query over the
``analyze`` match table (:mod:`evalengine.match.analyze`).

Each matched curve (C75, C50, Loc, Sim, Oth) is COCO's 101-point interpolated precision of its evaluation, accumulated
as pycocotools does (:func:`evalengine.metrics.ap.accumulate`: ranked by (−score, image id, rank), precision
``tp / (tp + fp + eps)``, the right-to-left envelope sampled at each recall threshold), per category and area range
with ``maxDets`` 100. Then, as ``analyze``:

- ``ps(ps == -1) = 0``: a category without regular ground truth in the area range has 0 everywhere (not left out);
- BG is ``ps(Oth) > 0``, a step: 1 up to Oth's last recall reached, 0 after; FN is 1 everywhere;
- a curve's AP (the legend's ``[.xxx]``) is the mean of its precision over the recall thresholds;
- the overall curves are the means over every category of the ground truth (those without ground truth count as
  0, FN as 1), a supercategory's the mean over its categories; their AP is again the mean over recall thresholds.

The stacked figure draws each curve's area above the previous one: every curve is at least the one before it.
"""

import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from evalengine.errors import check_option
from evalengine.match.analyze import CURVES, MATCHED, MAX_DETS
from evalengine.metrics.ap import accumulate

SCOPES = ("overall", "supercategory", "category")


def legend_ap(ap: float) -> str:
    """MATLAB's legend value: ``round(ap * 1000)`` (halves away from zero) as ``.xxx``, ``1.00`` for 1000."""
    thousandths = math.floor(ap * 1000 + 0.5)
    return "1.00" if thousandths == 1000 else f".{thousandths:03d}"


@dataclass(frozen=True)
class AnalyzeResult:
    """MATLAB's ``ps`` per category: ``precision[k, a, c, r]`` of category ``categories[k]``, area range ``a``, curve
    :data:`CURVES` ``[c]`` at recall threshold ``r`` (−1 already set to 0)."""

    categories: pl.DataFrame  # category_id, name, supercategory, in the order of precision's first axis
    area_ranges: tuple
    recall_thresholds: tuple
    precision: np.ndarray

    def _scopes(self, by: str) -> tuple:
        """``(keys, precision [S, A, C, R])`` of each category, supercategory or the overall mean."""
        check_option("by", by, SCOPES)
        if by == "category":
            return self.categories, self.precision
        if by == "overall":
            return pl.DataFrame(), self.precision.mean(axis=0, keepdims=True)
        names = self.categories.get_column("supercategory").unique(maintain_order=True).sort()
        groups = [self.precision[(self.categories.get_column("supercategory") == name).to_numpy()].mean(axis=0)
                  for name in names]
        return pl.DataFrame({"supercategory": names}), np.stack(groups)

    def precision_frame(self, by: str = "overall") -> pl.DataFrame:
        """Every curve's precision at every recall threshold: the key columns of ``by`` (none for ``overall``;
        ``supercategory``; ``category_id, name, supercategory``), ``area_range, curve, recall_threshold,
        precision``."""
        keys, precision = self._scopes(by)
        s, a, c, r = np.indices(precision.shape).reshape(4, -1)
        frame = pl.DataFrame({"area_range": np.array(self.area_ranges)[a], "curve": np.array(CURVES)[c],
                              "recall_threshold": np.array(self.recall_thresholds)[r],
                              "precision": precision.reshape(-1)})
        return pl.concat([keys[s], frame], how="horizontal") if keys.width else frame

    def ap_frame(self, by: str = "overall") -> pl.DataFrame:
        """Each curve's AP (mean precision over the recall thresholds), one column per curve, one row per key of
        ``by`` and area range."""
        keys, precision = self._scopes(by)
        ap = precision.mean(axis=-1)  # [S, A, C]
        s, a = np.indices(ap.shape[:2]).reshape(2, -1)
        frame = pl.DataFrame({"area_range": np.array(self.area_ranges)[a],
                              **{curve: ap[s, a, c] for c, curve in enumerate(CURVES)}})
        return pl.concat([keys[s], frame], how="horizontal") if keys.width else frame

    def as_dict(self) -> dict:
        """``{"curves", "area_ranges", "max_dets", "overall": {area: {curve: ap}}, "per_supercategory": {name: {area:
        {curve: ap}}}, "per_category": {id: {"name", "supercategory", "ap": {area: {curve: ap}}}}}``."""
        def by_area(rows) -> dict:
            return {row["area_range"]: {curve: row[curve] for curve in CURVES} for row in rows}

        per_supercategory = {}
        for row in self.ap_frame("supercategory").iter_rows(named=True):
            per_supercategory.setdefault(row["supercategory"], []).append(row)
        per_category = {}
        for row in self.ap_frame("category").iter_rows(named=True):
            entry = per_category.setdefault(str(row["category_id"]), {"name": row["name"],
                                                                      "supercategory": row["supercategory"], "ap": []})
            entry["ap"].append(row)
        return {"curves": list(CURVES), "area_ranges": list(self.area_ranges), "max_dets": MAX_DETS,
                "overall": by_area(self.ap_frame("overall").iter_rows(named=True)),
                "per_supercategory": {name: by_area(rows) for name, rows in per_supercategory.items()},
                "per_category": {key: dict(entry, ap=by_area(entry["ap"])) for key, entry in per_category.items()}}


def analyze_curves(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, categories: pl.DataFrame,
                   protocol) -> AnalyzeResult:
    """``analyze``'s curves of every category of ``categories`` (``category_id, name, supercategory``) from the
    ``analyze`` match table of ``protocol`` (an :class:`~evalengine.match.analyze.AnalyzeProtocol`)."""
    categories = categories.select("category_id", "name", "supercategory").sort("category_id")
    acc = accumulate(dt_matches, gt_matches, categories.get_column("category_id").to_numpy(), protocol,
                     want_curve=True)
    matched = acc.precision[:, :, 0]  # [K, A, matched curve, R]
    matched = np.where(matched == -1, 0.0, matched)
    precision = np.empty((*matched.shape[:2], len(CURVES), matched.shape[-1]))
    for t, curve in enumerate(MATCHED):
        precision[:, :, CURVES.index(curve)] = matched[:, :, t]
    precision[:, :, CURVES.index("BG")] = precision[:, :, CURVES.index("Oth")] > 0
    precision[:, :, CURVES.index("FN")] = 1.0
    return AnalyzeResult(categories, tuple(r[0] for r in protocol.area_ranges), tuple(protocol.recall_thresholds),
                         precision)
