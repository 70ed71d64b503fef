"""A detection run matched under the OpenImages protocol: per-class AP and the mAP as queries over its match table,
and what the ``openimages`` command prints (the TF evaluator's metrics, one ``name,value`` line each, as
``oid_challenge_evaluation.py`` writes them)."""

import json
import math
from dataclasses import dataclass

import numpy as np
import polars as pl

from evalengine.evaluation.run import MatchedRun
from evalengine.match.openimages import OpenImagesProtocol
from evalengine.metrics import openimages as oi_metrics
from evalengine.store.paths import ORDER_FILE


@dataclass(frozen=True)
class OpenImagesEvaluation(MatchedRun):
    """A matched run under :class:`~evalengine.match.openimages.OpenImagesProtocol`."""

    protocol: OpenImagesProtocol

    def accumulate(self, recall_bounds: tuple = (0.0, 1.0), weighted: bool = False) -> oi_metrics.OpenImagesAccumulation:
        key = (tuple(recall_bounds), weighted)
        if key not in self._cache:
            self._cache[key] = oi_metrics.accumulate(self.dt_matches(), self.gt_matches(), self.layout.category_ids(),
                                                     self.protocol.group_of_weight, recall_bounds, weighted)
            self._keep_table(ORDER_FILE, self._cache[key].order.write_parquet)  # the SQL view's tie order
        return self._cache[key]

    def per_class(self) -> pl.DataFrame:
        """``category_id, name, display_name, ap, num_gt, tp, fp`` for every category (AP NaN without ground truth)."""
        categories = self.layout.read("categories")
        names = categories.select("category_id", "name",
                                  *(["display_name"] if "display_name" in categories.columns else []))
        return self.accumulate().frame().join(names, on="category_id", how="left", maintain_order="left")

    def mean_ap(self) -> float:
        return self.accumulate().mean_ap

    def cor_loc(self) -> pl.DataFrame:
        """``category_id, name, num_gt_images, num_correct, corloc`` for every category (the TF evaluator's
        ``evaluate_corlocs``: ``compute_cor_loc``, NaN for a category on no image)."""
        counts = oi_metrics.cor_loc_counts(self.gt_matches()).collect()
        frame = (self.layout.read("categories").select("category_id", "name").sort("category_id")
                 .join(counts, on="category_id", how="left", maintain_order="left").fill_null(0))
        corloc = oi_metrics.cor_loc(frame.get_column("num_gt_images").to_numpy(),
                                    frame.get_column("num_correct").to_numpy())
        return frame.with_columns(pl.Series("corloc", corloc, dtype=pl.Float64))

    def mean_cor_loc(self) -> float:
        """``np.nanmean`` of :meth:`cor_loc` over the categories (NaN when none has ground truth)."""
        corloc = self.cor_loc().get_column("corloc").to_numpy()
        return float(np.nanmean(corloc)) if (~np.isnan(corloc)).any() else float("nan")

    def metric_prefix(self) -> str:
        return "OpenImagesDetectionChallenge" if self.protocol.verified_labels else "OpenImagesV2"


def openimages_payload(evaluation: OpenImagesEvaluation, corloc: bool = False) -> dict:
    """``{"map": x, "per_class": {LabelName: ap}}`` over the classes with ground truth (the reference's NaN classes
    are left out); ``corloc``: also ``"mean_corloc"`` and ``"corloc": {LabelName: corloc}`` (classes on an image)."""
    rows = evaluation.per_class().filter(pl.col("ap").is_not_nan())
    payload = {"map": evaluation.mean_ap(), "per_class": dict(zip(rows.get_column("name"), rows.get_column("ap")))}
    if corloc:
        located = evaluation.cor_loc().filter(pl.col("corloc").is_not_nan())
        payload.update(mean_corloc=evaluation.mean_cor_loc(),
                       corloc=dict(zip(located.get_column("name"), located.get_column("corloc"))))
    return payload


def _value(x: float) -> str:
    return "nan" if math.isnan(x) else str(x)


def openimages_lines(evaluation: OpenImagesEvaluation, corloc: bool = False) -> str:
    """The reference's metrics file: ``<prefix>_Precision/mAP@<t>IOU`` and one
    ``<prefix>_PerformanceByCategory/AP@<t>IOU/<LabelName>`` per category, in category order (``nan`` without ground
    truth), values as Python's ``str``; ``corloc`` (``evaluate_corlocs``): ``Precision/meanCorLoc@<t>IOU`` second and
    ``PerformanceByCategory/CorLoc@<t>IOU/<LabelName>`` after each category's AP, in the evaluator's order."""
    prefix, t = evaluation.metric_prefix(), evaluation.protocol.iou_threshold
    lines = [f"{prefix}_Precision/mAP@{t}IOU,{_value(evaluation.mean_ap())}"]
    located = evaluation.cor_loc().get_column("corloc").to_list() if corloc else None
    if corloc:
        lines.append(f"{prefix}_Precision/meanCorLoc@{t}IOU,{_value(evaluation.mean_cor_loc())}")
    for i, (name, ap) in enumerate(evaluation.per_class().select("name", "ap").iter_rows()):
        lines.append(f"{prefix}_PerformanceByCategory/AP@{t}IOU/{name},{_value(ap)}")
        if corloc:
            lines.append(f"{prefix}_PerformanceByCategory/CorLoc@{t}IOU/{name},{_value(located[i])}")
    return "\n".join(lines)


def openimages_output(evaluation: OpenImagesEvaluation, as_json: bool, store=None, corloc: bool = False) -> str:
    if as_json:
        return json.dumps(openimages_payload(evaluation, corloc))
    return openimages_lines(evaluation, corloc) + (f"\nstore: {store}" if store else "")
