"""COCO analyze (MATLAB ``CocoEval.analyze``) of a stored detection run: the ``analyze`` match table
(:mod:`evalengine.match.analyze`, matched once and kept in the store) and its curves
(:mod:`evalengine.metrics.errors.analyze`)."""

from dataclasses import dataclass
from functools import cached_property

from evalengine.engine.planner import match
from evalengine.evaluation.run import MatchedRun
from evalengine.match.analyze import AnalyzeProtocol
from evalengine.metrics.errors.analyze import AnalyzeResult, analyze_curves
from evalengine.store.layout import StoreLayout


@dataclass(frozen=True, repr=False)
class AnalyzeEvaluation(MatchedRun):
    """A run analysed as MATLAB's ``analyze`` does: ``.result`` holds every curve per category, and the means per
    supercategory and overall; ``dt_matches()`` the per-detection outcomes of each evaluation."""

    protocol: AnalyzeProtocol

    @cached_property
    def result(self) -> AnalyzeResult:
        categories = self.layout.read("categories", ["category_id", "name", "supercategory"])
        return analyze_curves(self.dt_matches(), self.gt_matches(), categories, self.protocol)


def analyze_run(layout: StoreLayout, run: str, protocol: AnalyzeProtocol | None = None,
                **schedule) -> AnalyzeEvaluation:
    """Match ``run``'s ``analyze`` table (once; a category without supercategory is refused first) and analyse it."""
    protocol = protocol or AnalyzeProtocol()
    return AnalyzeEvaluation(layout, run, protocol, match(layout, run, protocol, **schedule))
