"""A detection run matched under the PASCAL VOC protocol: per-class AP (VOC2007 11-point or VOC2010+ all-point),
TP, FP and ground-truth counts and the mAP as queries over its match table, and what the ``voc`` command prints."""

import json
from dataclasses import dataclass, replace

import polars as pl

from evalengine.evaluation.report import table
from evalengine.evaluation.run import MatchedRun
from evalengine.evaluation.thresholds import ScoreThresholdMetrics
from evalengine.match.voc import VocProtocol
from evalengine.metrics import voc as voc_metrics

METRIC_TITLES = {"voc07": "VOC2007 11-point AP", "voc12": "VOC2010+ all-point AP"}


@dataclass(frozen=True, repr=False)
class VocEvaluation(MatchedRun, ScoreThresholdMetrics):
    """A matched run under :class:`~evalengine.match.voc.VocProtocol`; ``image_subset`` restricts it to images (the
    devkit's image set: exact without matching again)."""

    protocol: VocProtocol
    image_subset: tuple | None = None

    @property
    def category_ids(self) -> list:
        return self.layout.category_ids()

    def slice(self, image_ids=None) -> "VocEvaluation":
        return replace(self, image_subset=None if image_ids is None else tuple(image_ids), _cache={})

    def accumulate(self, metric: str = "voc12", on_batch_done=None) -> voc_metrics.VocAccumulation:
        """AP, TP and FP per (class, IoU threshold) with ``metric`` (``voc07`` | ``voc12``); kept per metric."""
        if metric not in self._cache:
            self._cache[metric] = voc_metrics.accumulate(
                self.dt_matches(), self.gt_matches(), self.category_ids, self.protocol, metric=metric,
                on_batch_done=on_batch_done, image_ids=self.image_subset)
        return self._cache[metric]

    def per_class(self, metric: str = "voc12") -> pl.DataFrame:
        """``category_id, name, iou_threshold, ap, tp, fp, n_gt`` (AP −1 where the class has no non-difficult
        ground truth)."""
        names = self.layout.read("categories").select("category_id", "name")
        rows = voc_metrics.ap_table(self.accumulate(metric))
        return rows.join(names, on="category_id", how="left", maintain_order="left").select(
            "category_id", "name", "iou_threshold", "ap", "tp", "fp", "n_gt")

    def precision_recall(self) -> pl.DataFrame:
        """The precision-recall points per (class, IoU threshold) (see :func:`evalengine.metrics.voc.precision_recall`)."""
        dt, gt = self.dt_matches(), self.gt_matches()
        if self.image_subset is not None:
            subset = pl.Series(self.image_subset, dtype=pl.Int64).implode()
            dt, gt = dt.filter(pl.col("image_id").is_in(subset)), gt.filter(pl.col("image_id").is_in(subset))
        return voc_metrics.precision_recall(dt, gt, self.protocol)

    def mean_ap(self, metric: str = "voc12") -> list:
        """mAP per IoU threshold over the classes with non-difficult ground truth."""
        return self.accumulate(metric).mean_ap()


_CLASS = pl.coalesce("name", pl.col("category_id").cast(pl.String)).alias("class")  # a class without a name: its id


def voc_payload(evaluation: VocEvaluation, metric: str) -> dict:
    """``evalengine voc --json``: ``{"map": x, "per_class": {name: {"ap", "tp", "fp", "n_gt"}}}``; with several IoU
    thresholds, ``map``, ``ap``, ``tp`` and ``fp`` are lists (one entry per threshold) and ``iou_thresholds`` says
    which."""
    thresholds = list(evaluation.protocol.iou_thresholds)
    several = len(thresholds) > 1
    per_class = {}
    for row in evaluation.per_class(metric).with_columns(_CLASS).iter_rows(named=True):
        entry = per_class.setdefault(row["class"], {"ap": [], "tp": [], "fp": [], "n_gt": row["n_gt"]})
        for key in ("ap", "tp", "fp"):
            entry[key].append(row[key])
    if not several:
        per_class = {name: {k: v[0] if isinstance(v, list) else v for k, v in entry.items()}
                     for name, entry in per_class.items()}
    mean_ap = evaluation.mean_ap(metric)
    payload = {"map": mean_ap if several else mean_ap[0], "per_class": per_class}
    return {"iou_thresholds": thresholds, **payload} if several else payload


def voc_table(evaluation: VocEvaluation, metric: str) -> str:
    """The devkit-style summary: a title, one row per class (``class, AP, TP, FP, GT``; per threshold when there are
    several) and the mAP."""
    p = evaluation.protocol
    thresholds = list(p.iou_thresholds)
    rule = ">" if p.strict else ">="
    title = (f"{METRIC_TITLES[metric]} at IoU {rule} {', '.join(f'{t:g}' for t in thresholds)} "
             f"(difficult objects {'counted' if p.use_difficult else 'ignored'})")
    frame = evaluation.per_class(metric).with_columns(_CLASS, pl.col("ap").round(4))
    suffix = (lambda t: f" @{t:g}") if len(thresholds) > 1 else (lambda t: "")
    columns = [pl.col(c).filter(pl.col("iou_threshold") == t).first().alias(f"{c.upper()}{suffix(t)}")
               for t in thresholds for c in ("ap", "tp", "fp")]
    rows = frame.group_by("category_id", maintain_order=True).agg(
        pl.col("class").first(), *columns, pl.col("n_gt").first().alias("GT")).drop("category_id")
    means = "  ".join(f"mAP{suffix(t)} = {m:.4f}" for t, m in zip(thresholds, evaluation.mean_ap(metric)))
    return f"{title}\n{table(rows)}\n{means}"


def voc_output(evaluation: VocEvaluation, metric: str, as_json: bool, store=None) -> str:
    """What ``evalengine voc`` and ``evaluate --protocol voc`` print: the table (and where the store is), or the
    JSON object."""
    if as_json:
        return json.dumps(voc_payload(evaluation, metric))
    return voc_table(evaluation, metric) + (f"\nstore: {store}" if store else "")
