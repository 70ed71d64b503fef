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
    range, and their share of that range's errors (null when it has none). One pass over the labels."""
    codes = {name: code for code, name in enumerate(DT_LABELS)}
    events = pl.concat([
        dt_labels.filter(pl.col("label").is_in([codes[e] for e in ERRORS[:3]]))
        .select(pl.col("label").replace_strict([codes[e] for e in ERRORS[:3]], [0, 1, 2], return_dtype=pl.Int8)
                .alias("error"), "area"),
        gt_labels.filter(pl.col("label") == GT_LABELS.index("miss")).select(pl.lit(3, pl.Int8).alias("error"), "area"),
    ])
    counts = (events.group_by("error")
              .agg(pl.col("area").is_between(lo, hi).sum().alias(str(a)) for a, (_, lo, hi) in enumerate(area_ranges))
              .collect())
    found = {(a, row["error"]): row[str(a)] for row in counts.iter_rows(named=True) for a in range(len(area_ranges))}
    rows = [(label, error, found.get((a, e), 0)) for a, (label, _, _) in enumerate(area_ranges)
            for e, error in enumerate(ERRORS)]
    table = pl.DataFrame(rows, schema={"area_range": pl.String, "error": pl.String, "count": pl.Int64}, orient="row")
    total = pl.col("count").sum().over("area_range")
    return table.with_columns(pl.when(total > 0).then(pl.col("count") / total).alias("fraction"))
