"""A detection run matched under the OpenImages protocol: per-class AP and the mAP as queries over its match table,
and what the ``openimages`` command prints (the TF evaluator's metrics, one ``name,value`` line each, as
``oid_challenge_evaluation.py`` writes them)."""

import json
import math
from dataclasses import dataclass

import polars as pl

from evalengine.evaluation.run import MatchedRun
from evalengine.match.openimages import OpenImagesProtocol
from evalengine.metrics import openimages as oi_metrics


@dataclass(frozen=True)
class OpenImagesEvaluation(MatchedRun):
    """A matched run under :class:`~evalengine.match.openimages.OpenImagesProtocol`."""

    protocol: OpenImagesProtocol

    def accumulate(self, recall_bounds: tuple = (0.0, 1.0), weighted: bool = False) -> oi_metrics.OpenImagesAccumulation:
        key = (tuple(recall_bounds), weighted)
        if key not in self._cache:
            self._cache[key] = oi_metrics.accumulate(self.dt_matches(), self.gt_matches(), self.layout.category_ids(),
                                                     self.protocol.group_of_weight, recall_bounds, weighted)
        return self._cache[key]

    def per_class(self) -> pl.DataFrame:
        """``category_id, name, display_name, ap, num_gt, tp, fp`` for every category (AP NaN without ground truth)."""
        categories = self.layout.read("categories")
        names = categories.select("category_id", "name",
                                  *(["display_name"] if "display_name" in categories.columns else []))
        return self.accumulate().frame().join(names, on="category_id", how="left", maintain_order="left")

    def mean_ap(self) -> float:
        return self.accumulate().mean_ap

    def metric_prefix(self) -> str:
        return "OpenImagesDetectionChallenge" if self.protocol.verified_labels else "OpenImagesV2"


def openimages_payload(evaluation: OpenImagesEvaluation) -> dict:
    """``{"map": x, "per_class": {LabelName: ap}}`` over the classes with ground truth (the reference's NaN classes
    are left out)."""
    rows = evaluation.per_class().filter(pl.col("ap").is_not_nan())
    return {"map": evaluation.mean_ap(), "per_class": dict(zip(rows.get_column("name"), rows.get_column("ap")))}


def openimages_lines(evaluation: OpenImagesEvaluation) -> str:
    """The reference's metrics file: ``<prefix>_Precision/mAP@<t>IOU`` and one
    ``<prefix>_PerformanceByCategory/AP@<t>IOU/<LabelName>`` per category, in category order (``nan`` without ground
    truth), values as Python's ``str``."""
    prefix, t = evaluation.metric_prefix(), evaluation.protocol.iou_threshold
    lines = [f"{prefix}_Precision/mAP@{t}IOU,{evaluation.mean_ap()}"]
    for name, ap in evaluation.per_class().select("name", "ap").iter_rows():
        lines.append(f"{prefix}_PerformanceByCategory/AP@{t}IOU/{name},{'nan' if math.isnan(ap) else ap}")
    return "\n".join(lines)


def openimages_output(evaluation: OpenImagesEvaluation, as_json: bool, store=None) -> str:
    if as_json:
        return json.dumps(openimages_payload(evaluation))
    return openimages_lines(evaluation) + (f"\nstore: {store}" if store else "")
