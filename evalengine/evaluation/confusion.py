"""Confusion matrices of a run matched under the COCO protocol: its ``confusion`` table
(:mod:`evalengine.match.confusion`, read from the COCO match table and the ``pairs`` table, each matched once and
kept in the store) and the group-bys over it (:mod:`evalengine.metrics.confusion`)."""

from dataclasses import dataclass, field

import polars as pl

from evalengine.engine.planner import match
from evalengine.errors import InputError
from evalengine.match.confusion import ConfusionProtocol
from evalengine.metrics import confusion
from evalengine.metrics.outcomes import threshold_index
from evalengine.store.shards import scan_shards


@dataclass(frozen=True)
class Confusion:
    """A stored ``confusion`` table (``folder``), restricted to ``image_ids`` (None: all), and its matrices."""

    folder: object  # pathlib.Path or RemotePath
    protocol: ConfusionProtocol
    category_ids: tuple
    names: dict  # category_id -> name
    image_ids: tuple | None = None
    # what the files depend on (the temporary folder of a one-shot evaluation), kept as long as the matrix
    keep_alive: list = field(default_factory=list, repr=False, compare=False)

    @property
    def iou_threshold(self) -> float:
        return self.protocol.iou_threshold

    def assignments(self) -> pl.LazyFrame:
        """One row per counted object: ``image_id, gt_category_id, dt_category_id, det_id, gt_id, score, iou``
        (:data:`evalengine.schema.CONFUSION`)."""
        rows = scan_shards(self.folder / "assignments")
        if self.image_ids is None:
            return rows
        return rows.filter(pl.col("image_id").is_in(pl.Series(self.image_ids, dtype=pl.Int64).implode()))

    def matrix(self) -> pl.DataFrame:
        """Every cell: ``gt_category_id, dt_category_id, count, fraction`` (row-normalised; background: null)."""
        return confusion.confusion_matrix(self.assignments(), self.category_ids)

    def per_image(self) -> pl.DataFrame:
        """The non-zero cells of each image: ``image_id, gt_category_id, dt_category_id, count``."""
        return confusion.per_image_confusion(self.assignments())

    def array(self, normalize: bool = False):
        """The (K + 1)² NumPy matrix, rows ground truth, columns predictions, background last."""
        return confusion.matrix_array(self.matrix(), normalize)


def _score_thresholds(score_threshold):
    """A number as it is (the protocol checks it), or a ``category_id, threshold`` frame (``Evaluation.thresholds()``)
    as per-class pairs."""
    if not isinstance(score_threshold, (pl.DataFrame, pl.LazyFrame)):
        return score_threshold
    frame = score_threshold.lazy()
    missing = {"category_id", "threshold"} - set(frame.collect_schema().names())
    if missing:
        raise InputError(f"score thresholds: missing column(s) {sorted(missing)} (need category_id, threshold)")
    return tuple(frame.select(pl.col("category_id").cast(pl.Int64), pl.col("threshold").cast(pl.Float64))
                 .collect().iter_rows())


class ConfusionMetrics:
    """Mixed into :class:`~evalengine.evaluation.detection.Evaluation`."""

    def confusion(self, iou_threshold: float | None = None, score_threshold=0.0, **schedule) -> Confusion:
        """The confusion matrix at one of the protocol's IoU thresholds (the first by default) and a score threshold:
        a number, or a ``category_id, threshold`` frame such as :meth:`thresholds` returns. Its table is matched
        once per (IoU threshold, score threshold(s), classes) and kept in the store."""
        tau = self.protocol.iou_thresholds[threshold_index(self.protocol, iou_threshold)]
        protocol = ConfusionProtocol(tau, _score_thresholds(score_threshold), self.category_subset, self.protocol)
        for required in protocol.required():
            match(self.layout, self.run, required, **schedule)
        folder = match(self.layout, self.run, protocol, **schedule)
        names = dict(self.layout.read("categories").select("category_id", "name").iter_rows())
        return Confusion(folder, protocol, tuple(self.category_ids), names, self.image_subset, self.keep_alive)
