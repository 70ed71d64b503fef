"""A COCO match table exported per object, at one IoU threshold, detection cap and area ``all`` (pycocotools'
``evalImgs`` semantics: ``dtMatches``, ``dtIgnore``, ``gtIgnore`` of the first ``maxDet`` detections per image and
category). The VOC and LVIS match tables are read the same way (COCO's columns, area ``all`` first): VOC has no cap
(``ignored``: matched to a difficult object), LVIS's cap is per image and was applied at matching (``ignored``: a
detection without a true match on a not-exhaustive category; null: dropped by the cap or the federated filter):

- ``coco-results``: the run's detections as COCO results (``id, image_id, category_id, bbox, score``) with
  ``matched_gt_id``, ``iou`` (the partner's IoU, null without one), ``tp`` and ``ignored`` (matched to a crowd); both
  null for a detection COCO does not evaluate (beyond the cap, or of a category without ground truth);
- ``fiftyone``: one row per detection (``kind`` ``prediction``) and per ground truth (``ground_truth``) with the fields
  FiftyOne's ``evaluate_detections(eval_key="eval")`` writes on objects: ``eval`` (``tp``/``fp`` of a detection,
  ``tp``/``fn`` of a ground truth), ``eval_id`` (the partner's id as a string, ``""`` without one) and ``eval_iou``
  (null without one), beside ``label``, ``confidence``, ``bounding_box`` (FiftyOne's relative ``[x, y, w, h]``, null
  where the image has no size) and the image's ``file_name``. Where COCO ignores an object, ``eval`` is ``ignored``
  (FiftyOne's own matching would call a detection on a crowd ``tp`` and a crowd ``tp`` or ``fn``); a detection COCO does
  not evaluate has a null ``eval``.

Each is a lazy query over the match table and the run's detections, so a large run streams to Parquet or JSON Lines.
"""

import polars as pl

from evalengine.errors import ProtocolError, check_option
from evalengine.evaluation.detection import Evaluation
from evalengine.metrics.outcomes import threshold_index
from evalengine.store.shards import scan_shards

EXPORT_FORMATS = ("coco-results", "fiftyone")
EXPORT_PROTOCOLS = ("coco", "voc", "lvis")  # match tables in COCO's columns


def _detections(evaluation: Evaluation, t: int, cap: int) -> pl.LazyFrame:
    """Every detection of the run with its outcome (null where not evaluated)."""
    tp = (pl.col("tp_bits").arr.get(0) & (1 << t)) != 0
    ignored = (pl.col("ignored_bits").arr.get(0) & (1 << t)) != 0
    counted = pl.col("dt_rank") < cap
    matched = (evaluation.dt_matches()
               .select("det_id", pl.when(counted).then(pl.col("matched_gt_id").arr.get(t)).alias("matched_gt_id"),
                       pl.when(counted).then(pl.col("matched_iou").arr.get(t)).alias("iou"),
                       pl.when(counted).then(tp).alias("tp"), pl.when(counted).then(ignored).alias("ignored")))
    dt = scan_shards(evaluation.layout.paths.dt(evaluation.run))
    return (dt.select("det_id", "image_id", "category_id", "score", "x", "y", "w", "h")
            .join(matched, on="det_id", how="left", maintain_order="left").sort("det_id"))


def _ground_truth(evaluation: Evaluation, detections: pl.LazyFrame) -> pl.LazyFrame:
    """Every ground truth of an evaluated category with its first true-positive partner (``evalImgs``' ``gtMatches``:
    at most one) and whether area ``all`` ignores it (a crowd)."""
    partners = (detections.filter(pl.col("tp").fill_null(False))
                .select(pl.col("matched_gt_id").alias("gt_id"), pl.col("det_id").alias("matched_det_id"), "iou"))
    ignored = evaluation.gt_matches().select("gt_id", ((pl.col("ignored_bits") & 1) != 0).alias("ignored"))
    return (evaluation.layout.scan_gt().select("gt_id", "image_id", "category_id", "x", "y", "w", "h")
            .join(ignored, on="gt_id", how="inner").join(partners, on="gt_id", how="left").sort("gt_id"))


def _protocol_check(evaluation: Evaluation, iou_threshold: float, max_dets: int | None) -> tuple:
    protocol = evaluation.protocol
    if protocol.name not in EXPORT_PROTOCOLS or getattr(protocol, "area_ranges", [("all",)])[0][0] != "all":
        raise ProtocolError("export reads a COCO, VOC or LVIS match table whose first area range is 'all'")
    table_cap = protocol.max_dets[-1] if protocol.name != "voc" else 2**31 - 1  # VOC: no cap
    cap = table_cap if max_dets is None else max_dets
    if cap > table_cap:
        raise ProtocolError(f"max_dets {cap} is above the match table's cap {table_cap}")
    return threshold_index(protocol, iou_threshold), cap


def coco_results(evaluation: Evaluation, iou_threshold: float = 0.5, max_dets: int | None = None) -> pl.LazyFrame:
    """The ``coco-results`` rows (see the module)."""
    t, cap = _protocol_check(evaluation, iou_threshold, max_dets)
    return _detections(evaluation, t, cap).select(
        pl.col("det_id").alias("id"), "image_id", "category_id", pl.concat_list("x", "y", "w", "h").alias("bbox"),
        "score", "matched_gt_id", "iou", "tp", "ignored")


def _fiftyone_fields(outcome: pl.Expr, partner: str) -> list:
    matched = pl.col(partner).is_not_null() & (outcome == "tp")
    return [outcome.alias("eval"), pl.when(matched).then(pl.col(partner).cast(pl.String)).otherwise(pl.lit(""))
            .alias("eval_id"), pl.when(matched).then(pl.col("iou")).alias("eval_iou")]


def fiftyone_fields(evaluation: Evaluation, iou_threshold: float = 0.5, max_dets: int | None = None) -> pl.LazyFrame:
    """The ``fiftyone`` rows (see the module): detections by id, then ground truths by id."""
    t, cap = _protocol_check(evaluation, iou_threshold, max_dets)
    detections = _detections(evaluation, t, cap)
    images = evaluation.layout.scan("images").select("image_id", "file_name", "width", "height")
    names = evaluation.layout.scan("categories").select("category_id", pl.col("name").alias("label"))
    relative = pl.concat_list(pl.col("x") / pl.col("width"), pl.col("y") / pl.col("height"),
                              pl.col("w") / pl.col("width"), pl.col("h") / pl.col("height")).alias("bounding_box")
    dt_eval = (pl.when(pl.col("tp").is_null()).then(None).when(pl.col("ignored")).then(pl.lit("ignored"))
               .when(pl.col("tp")).then(pl.lit("tp")).otherwise(pl.lit("fp")))
    gt_eval = (pl.when(pl.col("ignored")).then(pl.lit("ignored"))
               .when(pl.col("matched_det_id").is_not_null()).then(pl.lit("tp")).otherwise(pl.lit("fn")))
    columns = ["kind", "id", "image_id", "file_name", "label", "category_id", "confidence", "bounding_box", "eval",
               "eval_id", "eval_iou"]
    joined = {"on": "image_id", "how": "left", "maintain_order": "left"}
    named = {"on": "category_id", "how": "left", "maintain_order": "left"}
    dt_rows = (detections.join(images, **joined).join(names, **named)
               .select(pl.lit("prediction").alias("kind"), pl.col("det_id").alias("id"), "image_id", "file_name",
                       "label", "category_id", pl.col("score").alias("confidence"), relative,
                       *_fiftyone_fields(dt_eval, "matched_gt_id")))
    gt_rows = (_ground_truth(evaluation, detections).join(images, **joined).join(names, **named)
               .select(pl.lit("ground_truth").alias("kind"), pl.col("gt_id").alias("id"), "image_id", "file_name",
                       "label", "category_id", pl.lit(None, pl.Float64).alias("confidence"), relative,
                       *_fiftyone_fields(gt_eval, "matched_det_id")))
    return pl.concat([dt_rows.select(columns), gt_rows.select(columns)])


def exported(evaluation: Evaluation, fmt: str, iou_threshold: float = 0.5, max_dets: int | None = None) -> pl.LazyFrame:
    """The rows of export format ``fmt`` (:data:`EXPORT_FORMATS`)."""
    check_option("format", fmt, EXPORT_FORMATS)
    return (coco_results if fmt == "coco-results" else fiftyone_fields)(evaluation, iou_threshold, max_dets)
