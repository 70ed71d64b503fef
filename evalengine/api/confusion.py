"""The confusion-matrix front door (:mod:`evalengine.metrics.confusion`): a stored run, or COCO files through a
temporary store; a single score threshold or the per-class LRP- or F1-optimal ones of the same match table."""

from evalengine.api import DEFAULT_RUN, Store, evaluate_coco
from evalengine.api.voc import lrp_protocol
from evalengine.errors import check_option
from evalengine.evaluation.confusion import Confusion

__all__ = ["CONFUSION_THRESHOLDS", "Confusion", "confusion", "confusion_payload"]

# per-class thresholds a confusion matrix can be read at (``Evaluation.thresholds`` criteria)
CONFUSION_THRESHOLDS = ("lrp", "f1")


def confusion(store, iou_threshold: float = 0.5, score_threshold=0.05, thresholds: str | None = None,
              run: str = DEFAULT_RUN, n_shards: int | None = None, iou_type: str = "bbox", **schedule) -> Confusion:
    """The confusion matrix of a stored run (a :class:`~evalengine.api.Store`) or of ``(gt_json, dt_path)``, at
    ``iou_threshold`` (the default COCO match table at 0.5, else a one-threshold one) and ``score_threshold`` (a
    number or a ``category_id, threshold`` frame), or at each class's ``thresholds`` ("lrp" or "f1", chosen at
    the same IoU threshold); ``iou_type``: boxes (``bbox``) or masks (``segm``)."""
    if thresholds is not None:
        check_option("thresholds", thresholds, CONFUSION_THRESHOLDS)
    protocol = lrp_protocol(iou_threshold, iou_type=iou_type)
    if isinstance(store, Store):
        evaluation = store.evaluate(protocol, run=run, **schedule)
    else:
        evaluation = evaluate_coco(*store, protocol, n_shards=n_shards, accumulate=False, partners=True, **schedule)
    if thresholds is not None:
        score_threshold = evaluation.thresholds(thresholds, iou_threshold).select("category_id", "threshold")
    return evaluation.confusion(iou_threshold, score_threshold, **schedule)


def confusion_payload(result: Confusion, score_threshold, normalize: bool = False) -> dict:
    """The command's JSON: the score threshold (a number, or "lrp" / "f1"), labels (names, then "background"), their category ids (null: background), the matrix
    rows (ground truth) by columns (predictions), counts or row fractions."""
    ids = list(result.category_ids)
    return {"iou_threshold": result.iou_threshold, "score_threshold": score_threshold, "normalized": normalize,
            "labels": [result.names.get(i, str(i)) for i in ids] + ["background"],
            "category_ids": ids + [None], "matrix": result.array(normalize).tolist()}
