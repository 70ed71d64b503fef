"""The queries of the invariance tables (Borji & Iranmanesh §6; spec §3.5): a run's six COCO AP numbers per class,
and each object's outcome, from a COCO accumulation and match table.

Per class, a metric is the mean over its IoU thresholds of the class's AP in the metric's area range, as pycocotools'
``summarize`` takes the mean over classes and thresholds (−1 where the class has no regular ground truth there); the
class mean is ``summarize``'s own number (:func:`evalengine.metrics.summary.summary_stats`).
"""

import polars as pl

from evalengine.metrics.outcomes import threshold_index
from evalengine.metrics.summary import SUMMARY_LAYOUT, summary_cap

# the AP rows of pycocotools' summary: AP, AP50, AP75 (all sizes), APs, APm, APl
AP_LAYOUT = tuple(row for row in SUMMARY_LAYOUT if row[1])
INVARIANCE_METRICS = tuple(row[0] for row in AP_LAYOUT)
METRIC_SIZES = {row[0]: row[3] for row in AP_LAYOUT}


def class_metrics(ap_table: pl.DataFrame, max_dets) -> pl.DataFrame:
    """``metric, size, category_id, value`` per class for each metric of :data:`AP_LAYOUT`, from an evaluation's
    :meth:`~evalengine.evaluation.detection.Evaluation.ap_table` and its protocol's ``max_dets``."""
    frames = []
    for metric, _, iou, area, cap in AP_LAYOUT:
        rows = ap_table.filter((pl.col("area_range") == area) & (pl.col("max_dets") == summary_cap(cap, max_dets)))
        if iou is not None:
            rows = rows.filter(pl.col("iou_threshold") == iou)
        frames.append(rows.group_by("category_id")
                      .agg(pl.col("ap").filter(pl.col("ap") > -1).mean().fill_null(-1.0).alias("value"))
                      .select(pl.lit(metric).alias("metric"), pl.lit(area).alias("size"), "category_id", "value")
                      .sort("category_id"))
    return pl.concat(frames)


def object_outcomes(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, protocol,
                    iou_threshold: float = 0.5) -> pl.LazyFrame:
    """Each regular ground truth (not crowd, in the first area range: all sizes) with ``detected`` — a detection took
    it at ``iou_threshold`` — and that detection's ``score`` and ``iou`` (null when missed):
    ``image_id, gt_id, category_id, detected, score, iou``."""
    t = threshold_index(protocol, iou_threshold)
    bit = 1 << t
    partners = (dt_matches.filter((pl.col("tp_bits").arr.get(0) & bit) != 0)
                .select("image_id", pl.col("matched_gt_id").arr.get(t).alias("gt_id"), "score",
                        pl.col("matched_iou").arr.get(t).alias("iou")))
    return (gt_matches.filter((pl.col("ignored_bits") & 1) == 0)
            .select("image_id", "gt_id", "category_id",
                    ((pl.col("matched_bits").arr.get(0) & bit) != 0).alias("detected"))
            .join(partners, on=["image_id", "gt_id"], how="left"))
