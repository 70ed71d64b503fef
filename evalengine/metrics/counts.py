"""Per-image true positive, false positive and false negative counts from the match table."""

import polars as pl

from evalengine.errors import ProtocolError
from evalengine.match.coco import CocoProtocol


def per_image_counts(dt_matches: pl.LazyFrame, gt_matches: pl.LazyFrame, images: pl.LazyFrame,
                     protocol: CocoProtocol, iou_threshold: float = 0.5, area_range: str = "all",
                     max_dets: int | None = None) -> pl.DataFrame:
    """TP, FP and FN per image at one IoU threshold, area range and detection cap.

    A false negative is a regular ground truth not matched by a counted detection (``G − TP``), as in
    the recall pycocotools reports; ignored detections and ground truths are in neither count.
    """
    if iou_threshold not in protocol.iou_thresholds:
        raise ProtocolError(f"iou_threshold {iou_threshold} is not one of the protocol's {list(protocol.iou_thresholds)}")
    t = protocol.iou_thresholds.index(iou_threshold)
    a = protocol.area_index(area_range)
    cap = protocol.max_dets[-1] if max_dets is None else max_dets
    tp = (pl.col("tp_bits").arr.get(a) & (1 << t)) != 0
    ignored = (pl.col("ignored_bits").arr.get(a) & (1 << t)) != 0
    dets = (
        dt_matches.filter(pl.col("dt_rank") < cap)
        .group_by("image_id")
        .agg(tp.sum().alias("tp"), (~tp & ~ignored).sum().alias("fp"), ignored.sum().alias("ignored_dt"))
    )
    gts = gt_matches.group_by("image_id").agg(((pl.col("ignored_bits") & (1 << a)) == 0).sum().alias("n_gt"))
    return (
        images.select("image_id")
        .join(dets, on="image_id", how="left")
        .join(gts, on="image_id", how="left")
        .with_columns(pl.col("tp", "fp", "ignored_dt", "n_gt").fill_null(0).cast(pl.Int64))
        .with_columns((pl.col("n_gt") - pl.col("tp")).alias("fn"))
        .select("image_id", "tp", "fp", "fn", "n_gt", "ignored_dt")
        .sort("image_id")
        .collect()
    )
