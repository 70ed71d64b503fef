"""A detection run matched under the LVIS federated protocol: lvis-api's results (AP, AP50, AP75, APs/m/l, APr/c/f,
AR@300 and the size ARs) and the AP per category as queries over its match table, and what the ``lvis`` command
prints (``LVISEval.print_results``) or returns as JSON."""

import json
from dataclasses import dataclass, replace
from functools import cached_property

import numpy as np
import polars as pl

from evalengine.evaluation.run import MatchedRun
from evalengine.match.lvis import LvisProtocol
from evalengine.metrics import ap as ap_metrics
from evalengine.metrics import lvis as lvis_metrics


@dataclass(frozen=True, repr=False)
class LvisEvaluation(MatchedRun):
    """A matched run under :class:`~evalengine.match.lvis.LvisProtocol`. ``image_subset`` restricts it to images
    (lvis-api ``params.img_ids``: every image is matched on its own, so a slice is exact without matching again)."""

    protocol: LvisProtocol
    image_subset: tuple | None = None

    @cached_property
    def category_ids(self) -> list:
        """Every category of the ground truth (lvis-api ``params.cat_ids``)."""
        return self.layout.category_ids()

    def slice(self, image_ids=None) -> "LvisEvaluation":
        return replace(self, image_subset=None if image_ids is None else tuple(image_ids), _cache={})

    def accumulate(self, on_batch_done=None) -> ap_metrics.Accumulation:
        """lvis-api ``accumulate``: pycocotools' over the LVIS match table, with the 300 cap, and its precision
        curves (the summary averages them as lvis-api does); the whole run's AP table is kept for SQL."""
        if "acc" not in self._cache:
            self._cache["acc"] = ap_metrics.accumulate(self.dt_matches(), self.gt_matches(), self.category_ids,
                                                       self.protocol, want_curve=True, on_batch_done=on_batch_done,
                                                       image_ids=self.image_subset)
            if self.image_subset is None:  # kept for the lvis_ap view (sql/22_lvis_ap_tables.sql)
                self._keep_ap_table(lambda: ap_metrics.ap_table(self._cache["acc"]))
        return self._cache["acc"]

    def categories(self) -> pl.DataFrame:
        """``category_id, name, frequency`` in ``category_ids`` order."""
        return self.layout.read("categories", ["category_id", "name", "frequency"]).sort("category_id")

    def results(self) -> dict:
        """``LVISEval.get_results()``: ``{"AP": …, "AR@300": …, …}`` in its order."""
        frequency = self.categories().get_column("frequency").to_numpy()
        return lvis_metrics.lvis_results(self.accumulate(), np.asarray(frequency, dtype=object))

    def summary(self) -> pl.DataFrame:
        """:meth:`results` as ``metric, value`` rows."""
        results = self.results()
        return pl.DataFrame({"metric": list(results), "value": list(results.values())})

    def per_class(self) -> pl.DataFrame:
        """``category_id, ap, name, frequency``: AP@[.50:.95] (area all) per category, −1 where undefined."""
        return lvis_metrics.per_class_ap(self.accumulate()).join(self.categories(), on="category_id", how="left",
                                                                 maintain_order="left")


def print_results(evaluation: LvisEvaluation) -> str:
    """The results exactly as lvis-api ``print_results`` prints them (its labels: area ``s``/``m``/``l``, the
    frequency group as ``catIds``)."""
    p = evaluation.protocol
    lines = []
    for key, value in evaluation.results().items():
        title, short = ("Average Precision", "(AP)") if "AP" in key else ("Average Recall", "(AR)")
        iou = (f"{float(key[2:]) / 100:0.2f}" if len(key) > 2 and key[2].isdigit()
               else f"{p.iou_thresholds[0]:0.2f}:{p.iou_thresholds[-1]:0.2f}")
        group = key[2] if len(key) > 2 and key[2] in "rcf" else "all"
        area = key[2] if len(key) > 2 and key[2] in "sml" else "all"
        lines.append(f" {title:<18} {short} @[ IoU={iou:<9} | area={area:>6s} | maxDets={p.max_dets[0]:>3d} "
                     f"catIds={group:>3s}] = {value:0.3f}")
    return "\n".join(lines)


def lvis_payload(evaluation: LvisEvaluation) -> dict:
    """``evalengine lvis --json``: ``{"stats": {key: value}, "per_class": {"<category_id>": ap}}``."""
    per_class = evaluation.per_class()
    return {"stats": evaluation.results(),
            "per_class": dict(zip(map(str, per_class.get_column("category_id")), per_class.get_column("ap")))}


def lvis_output(evaluation: LvisEvaluation, as_json: bool, store=None) -> str:
    """What ``evalengine lvis`` prints: lvis-api's lines (and where the store is), or the JSON object."""
    if as_json:
        return json.dumps(lvis_payload(evaluation))
    return print_results(evaluation) + (f"\nstore: {store}" if store else "")
