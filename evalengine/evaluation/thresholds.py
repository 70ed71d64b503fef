"""The score-threshold metrics of any matched detection run (COCO or VOC protocol): optimal LRP, operating points,
deployment thresholds and the detections they keep — prefix queries over its match table
(:mod:`evalengine.metrics.lrp`, :mod:`evalengine.metrics.operating_points`)."""

import polars as pl

from evalengine.metrics import lrp as lrp_metrics
from evalengine.metrics import operating_points as points


class ScoreThresholdMetrics:
    """Mixed into an evaluation with ``layout``, ``run``, ``protocol``, ``category_ids``, ``image_subset``,
    ``dt_matches()`` and ``gt_matches()``."""

    def lrp(self, iou_threshold: float | None = None, search: str = "rank", compare: str = ">=") -> lrp_metrics.OptimalLRP:
        """Optimal LRP per category and area range; at the protocol's first IoU threshold unless another of its
        thresholds is given (then area range 'all' only)."""
        return lrp_metrics.optimal_lrp(self.dt_matches(), self.gt_matches(), self.category_ids, self.protocol,
                                       iou_threshold=iou_threshold, search=search, compare=compare,
                                       image_ids=self.image_subset)

    def operating_points(self, iou_threshold: float | None = None) -> pl.DataFrame:
        """Precision, recall, F1 and LRP of each category at every distinct score (area range 'all')."""
        return points.operating_points(self.dt_matches(), self.gt_matches(), self.category_ids, self.protocol,
                                       iou_threshold=iou_threshold, image_ids=self.image_subset)

    def thresholds(self, criterion: str = "lrp", iou_threshold: float | None = None) -> pl.DataFrame:
        """Per category the LRP-optimal (or F1-optimal) score threshold and its operating point, with the names."""
        best = points.optimal_thresholds(self.operating_points(iou_threshold), criterion)
        if not getattr(self.protocol, "use_cats", True):
            return best
        names = self.layout.read("categories").select("category_id", "name")
        return (best.join(names, on="category_id", how="left", maintain_order="left")
                .select("category_id", "name", pl.exclude("category_id", "name")))

    def kept_detections(self, thresholds: pl.DataFrame) -> pl.LazyFrame:
        """The run's detections with ``score >= threshold`` of their category (``thresholds``: ``category_id,
        threshold``, as :meth:`thresholds` gives)."""
        return points.kept_detections(self.layout.scan_sharded(self.layout.paths.dt(self.run)), thresholds)
