"""COCO analyze (MATLAB ``CocoEval.analyze``) of a stored detection run: the ``analyze`` match table
(:mod:`evalengine.match.analyze`, matched once and kept in the store) and its curves
(:mod:`evalengine.metrics.errors.analyze`)."""

from dataclasses import dataclass
from functools import cached_property

import polars as pl

from evalengine.engine.planner import match
from evalengine.evaluation.run import MatchedRun
from evalengine.match.analyze import CURVES, AnalyzeProtocol
from evalengine.metrics.errors.analyze import AnalyzeResult, analyze_curves
from evalengine.store.layout import StoreLayout


@dataclass(frozen=True, repr=False)
class AnalyzeEvaluation(MatchedRun):
    """A run analysed as MATLAB's ``analyze`` does: ``.result`` holds every curve per category, and the means per
    supercategory and overall; ``dt_matches()`` the per-detection outcomes of each evaluation."""

    protocol: AnalyzeProtocol

    @cached_property
    def result(self) -> AnalyzeResult:
        """The curves; their AP per category, area range and curve (:meth:`ap_table`) kept beside the match table for
        the SQL view ``analyze_ap`` (:meth:`MatchedRun._keep_ap_table`)."""
        categories = self.layout.read("categories", ["category_id", "name", "supercategory"])
        result = analyze_curves(self.dt_matches(), self.gt_matches(), categories, self.protocol)
        self._keep_ap_table(lambda: _ap_table(result))
        return result

    def ap_table(self) -> pl.DataFrame:
        """``category_id, area_range, curve, ap``: each curve's AP per category and area range (the rows of the SQL
        view ``analyze_ap``)."""
        return _ap_table(self.result)


def _ap_table(result: AnalyzeResult) -> pl.DataFrame:
    return (result.ap_frame("category").select("category_id", "area_range", *CURVES)
            .unpivot(index=["category_id", "area_range"], on=list(CURVES), variable_name="curve", value_name="ap"))


def analyze_run(layout: StoreLayout, run: str, protocol: AnalyzeProtocol | None = None,
                **schedule) -> AnalyzeEvaluation:
    """Match ``run``'s ``analyze`` table (once; a category without supercategory is refused first) and analyse it."""
    protocol = protocol or AnalyzeProtocol()
    return AnalyzeEvaluation(layout, run, protocol, match(layout, run, protocol, **schedule))
