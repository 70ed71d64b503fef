"""Correlation of proposal metrics with detector AP across proposal methods (Hosang et al. §5.4, Figs. 13–15).

Two tables, joined on ``method`` (and on ``dataset`` / ``category_id`` when both have them):

- ``metrics``: ``method, metric, value`` — e.g. recall at each IoU threshold and AR at 1 000 proposals;
- ``detector_ap``: ``method, detector, ap`` — a detector's (m)AP when trained and tested on that method.

The result has one row per (slice, detector, metric) with the number of methods and Pearson's r (DuckDB's
``corr`` computes the same from the ``metric_values`` view).
"""

import polars as pl

SLICES = ("dataset", "category_id")


def recall_curve_metrics(recall: pl.DataFrame, ar: pl.DataFrame | None = None) -> pl.DataFrame:
    """``method, iou_threshold, recall`` (+ optional ``method, ar``) as ``method, metric, value`` rows, the metric
    named ``recall@<t>`` or ``ar``; other columns (dataset, category_id) are kept."""
    keep = [c for c in SLICES if c in recall.columns]
    rows = recall.select("method", *keep, pl.format("recall@{}", pl.col("iou_threshold")).alias("metric"),
                         pl.col("recall").alias("value"))
    if ar is not None:
        rows = pl.concat([rows, ar.select("method", *keep, pl.lit("ar").alias("metric"), pl.col("ar").alias("value"))])
    return rows


def metric_ap_correlation(metrics: pl.DataFrame, detector_ap: pl.DataFrame) -> pl.DataFrame:
    """Pearson correlation between each metric and each detector's AP over the methods present in both tables."""
    keys = ["method", *[c for c in SLICES if c in metrics.columns and c in detector_ap.columns]]
    joined = metrics.join(detector_ap, on=keys, how="inner")
    groups = [*keys[1:], "detector", "metric"]
    return (joined.group_by(groups)
            .agg(pl.len().alias("n_methods"), pl.corr("value", "ap").alias("pearson"))
            .sort(groups))
