"""Confusion matrices of a run matched under the COCO protocol (:mod:`evalengine.metrics.confusion`): its match
table and the ``pairs`` table (matched once, kept in the store, at the default ``min_iou`` 0.1 unless the IoU
threshold is lower)."""

from dataclasses import dataclass

import polars as pl

from evalengine.engine.planner import match
from evalengine.match.pairs import PairsProtocol
from evalengine.metrics import confusion
from evalengine.metrics.outcomes import threshold_index
from evalengine.store.shards import scan_shards


@dataclass(frozen=True)
class Confusion:
    """The counted objects (:func:`~evalengine.metrics.confusion.confusion_outcomes`) and the matrices they give."""

    outcomes: pl.DataFrame
    category_ids: tuple
    iou_threshold: float
    names: dict  # category_id -> name

    def matrix(self) -> pl.DataFrame:
        """Every cell: ``gt_category_id, dt_category_id, count, fraction`` (row-normalised; background: null)."""
        return confusion.confusion_matrix(self.outcomes, self.category_ids)

    def per_image(self) -> pl.DataFrame:
        """The non-zero cells of each image: ``image_id, gt_category_id, dt_category_id, count``."""
        return confusion.per_image_confusion(self.outcomes)

    def array(self, normalize: bool = False):
        """The (K + 1)² NumPy matrix, rows ground truth, columns predictions, background last."""
        return confusion.matrix_array(self.matrix(), normalize)


class ConfusionMetrics:
    """Mixed into :class:`~evalengine.evaluation.detection.Evaluation`."""

    def confusion(self, iou_threshold: float | None = None, score_threshold=0.0, **schedule) -> Confusion:
        """The confusion matrix at one of the protocol's IoU thresholds (the first by default) and a score threshold:
        a number, or a ``category_id, threshold`` frame such as :meth:`thresholds` returns."""
        tau = self.protocol.iou_thresholds[threshold_index(self.protocol, iou_threshold)]
        pairs = PairsProtocol() if tau >= PairsProtocol.min_iou else PairsProtocol(min_iou=tau)
        pairs_dir = match(self.layout, self.run, pairs, **schedule)
        outcomes = confusion.confusion_outcomes(
            self.dt_matches(), self.gt_matches(), scan_shards(pairs_dir / "pairs"), self.layout.scan_gt(),
            self.category_ids, self.protocol, tau, score_threshold, image_ids=self.image_subset)
        names = dict(self.layout.read("categories").select("category_id", "name").iter_rows())
        return Confusion(outcomes, tuple(self.category_ids), tau, names)
