"""The COCO analyze front door (MATLAB ``CocoEval.analyze``, :mod:`evalengine.evaluation.analyze`): a stored run, or
COCO files through a temporary store."""

import polars as pl

from evalengine.api import DEFAULT_RUN, on_store_or_files
from evalengine.errors import EvalEngineError
from evalengine.evaluation.analyze import AnalyzeEvaluation, analyze_run
from evalengine.match.analyze import CURVES, IOU_TYPES, AnalyzeProtocol
from evalengine.metrics.errors.analyze import AnalyzeResult, legend_ap

__all__ = ["ANALYZE_CURVES", "ANALYZE_IOU_TYPES", "AnalyzeEvaluation", "AnalyzeProtocol", "AnalyzeResult", "analyze", "analyze_scope",
           "analyze_table"]

ANALYZE_CURVES = CURVES
ANALYZE_IOU_TYPES = IOU_TYPES


def analyze(store, run: str = DEFAULT_RUN, protocol: AnalyzeProtocol | None = None, n_shards: int | None = None,
            **schedule) -> AnalyzeEvaluation:
    """COCO analyze of a stored run (a :class:`~evalengine.api.Store`), or of ``(gt_json, dt_path)`` through a
    temporary store that lives as long as the evaluation. ``.result`` holds the C75, C50, Loc, Sim, Oth, BG and FN
    curves per category, supercategory and overall, per area range; the ``analyze`` table is matched once and kept in
    the store; ``schedule``: ``scheduler``, ``address``, ``workers``."""
    return on_store_or_files(store, n_shards, lambda layout: analyze_run(layout, run, protocol, **schedule))


def analyze_table(result: AnalyzeResult) -> pl.DataFrame:
    """The overall AP of each curve per area range as MATLAB's legends show it (``.xxx``), a frame to print."""
    return pl.DataFrame([{"area": row["area_range"], **{curve: legend_ap(row[curve]) for curve in CURVES}}
                         for row in result.ap_frame("overall").iter_rows(named=True)])


def analyze_scope(result: AnalyzeResult, category_id: int | None = None, supercategory: str | None = None) -> tuple:
    """``(precision rows, name)`` of one category, one supercategory or (neither given) the overall mean, named as
    MATLAB names its figures (``<supercategory>-<name>``, ``overall-<supercategory>``, ``overall-all``)."""
    if category_id is not None:
        rows = result.precision_frame("category").filter(pl.col("category_id") == category_id)
        if rows.is_empty():
            raise EvalEngineError(f"category {category_id}: not a category of the ground truth")
        return rows, f"{rows.item(0, 'supercategory')}-{rows.item(0, 'name')}"
    if supercategory is not None:
        rows = result.precision_frame("supercategory").filter(pl.col("supercategory") == supercategory)
        if rows.is_empty():
            known = sorted(set(result.categories.get_column("supercategory")))
            raise EvalEngineError(f"supercategory {supercategory!r}: not one of {known}")
        return rows, f"overall-{supercategory}"
    return result.precision_frame("overall"), "overall-all"
