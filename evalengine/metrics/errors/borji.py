"""Borji & Iranmanesh's error diagnosis (spec-detection.md §3.4) as queries over the ``borji`` match table
(:mod:`evalengine.match.borji`): each stage's COCO accumulation and summary — every stage is a COCO match table of
the edited detections, so its AP is pycocotools' ``accumulate`` (:func:`evalengine.metrics.ap.accumulate`) over it —
the paper's Table 3 row, and the error counts per object size.

Size attribution (§3.4.5): ``loc``, ``dup`` and ``miss`` count in the size of their ground truth's ``area`` (COCO:
the segmentation area), ``cls_bg`` in its own box's (COCO buckets unmatched detections by their own area). The
buckets are the COCO protocol's area ranges, both bounds inclusive as pycocotools' (an area of exactly 32² counts
as small and as medium).
"""

import polars as pl

from evalengine.match.borji import DT_LABELS, GT_LABELS, STAGES
from evalengine.match.coco import CocoProtocol
from evalengine.metrics.ap import Accumulation, accumulate
from evalengine.metrics.summary import STAT_NAMES, summary_stats

ERRORS = ("cls_bg", "loc", "dup", "miss")
ERROR_HEADERS = ("Cls (Type I)", "Local.", "Duplicates", "Misses")  # the paper's names
# Table 3's columns, in its order; the snap-only stage (§3.4.3 DECIDE) after them
TABLE_STAGES = ("S0", "S1_cls", "S2_loc", "S3_dup", "S4_miss", "S3b_snap_only")
STAGE_HEADERS = ("mAP", "− Cls (Type I)", "+ Local.", "− Duplicates", "+ Misses", "snap only")


def label_name(codes: pl.Expr, names: tuple) -> pl.Expr:
    """A label code column as its name."""
    return codes.replace_strict(list(range(len(names))), list(names), return_dtype=pl.String)


def stage_accumulation(stage_dt: pl.LazyFrame, stage_gt: pl.LazyFrame, stage: str, category_ids,
                       protocol: CocoProtocol) -> Accumulation:
    """pycocotools' ``accumulate`` of one stage's match table."""
    code = STAGES.index(stage)
    return accumulate(stage_dt.filter(pl.col("stage") == code), stage_gt.filter(pl.col("stage") == code),
                      category_ids, protocol)


def stage_summary(accumulations: dict) -> pl.DataFrame:
    """``stage, metric, value``: pycocotools' 12 numbers of each stage (``{stage: Accumulation}``)."""
    return pl.DataFrame([(stage, name, value) for stage, acc in accumulations.items()
                         for name, value in zip(STAT_NAMES, summary_stats(acc))],
                        schema={"stage": pl.String, "metric": pl.String, "value": pl.Float64}, orient="row")


def stage_table(summary: pl.DataFrame, metrics=("AP", "AP50")) -> pl.DataFrame:
    """Table 3's layout: one row per metric, one column per stage in :data:`TABLE_STAGES` order."""
    wide = summary.filter(pl.col("metric").is_in(list(metrics))).pivot("stage", index="metric", values="value")
    order = pl.DataFrame({"metric": list(metrics)})
    return order.join(wide, on="metric", how="left", maintain_order="left").select("metric", *TABLE_STAGES)


def error_counts(dt_labels: pl.LazyFrame, gt_labels: pl.LazyFrame, area_ranges) -> pl.DataFrame:
    """``area_range, error, count, fraction``: the errors (:data:`ERRORS`) whose attributed area lies in each area
    range, and their share of that range's errors (null when it has none)."""
    events = pl.concat([
        dt_labels.select(label_name(pl.col("label"), DT_LABELS).alias("error"), "area"),
        gt_labels.select(label_name(pl.col("label"), GT_LABELS).alias("error"), "area"),
    ]).filter(pl.col("error").is_in(list(ERRORS)))
    ranges = pl.LazyFrame([(label, i, lo, hi) for i, (label, lo, hi) in enumerate(area_ranges)],
                          schema={"area_range": pl.String, "area_index": pl.Int64, "lo": pl.Float64,
                                  "hi": pl.Float64}, orient="row")
    counts = (events.join(ranges, how="cross").filter(pl.col("area").is_between(pl.col("lo"), pl.col("hi")))
              .group_by("area_range", "error").agg(pl.len().alias("count")))
    grid = ranges.select("area_range", "area_index").join(
        pl.LazyFrame({"error": list(ERRORS), "error_index": list(range(len(ERRORS)))}), how="cross")
    table = (grid.join(counts, on=["area_range", "error"], how="left")
             .with_columns(pl.col("count").fill_null(0).cast(pl.Int64))
             .with_columns((pl.col("count") / pl.col("count").sum().over("area_range")).alias("fraction"))
             .with_columns(pl.when(pl.col("fraction").is_nan()).then(None).otherwise(pl.col("fraction"))
                           .alias("fraction"))
             .sort("area_index", "error_index"))
    return table.select("area_range", "error", "count", "fraction").collect()
