"""Pairs-of-pixels measures per contingency table (spec §4.2; SEISM ``pri_fr.hpp``): the Rand index and the
precision and recall for regions, from exact integer pair counts.

``N11 = (Σn² − n)/2``, ``N10 = (Σa² − Σn²)/2`` (same machine region, different GT region), ``N01 = (Σb² − Σn²)/2``,
``N00 = (n² − Σa² − Σb² + Σn²)/2``. Precision (recall) is 0/0 = NaN for an all-singleton partition (ground truth), as
in SEISM.
"""

import polars as pl

from evalengine.metrics.partition import PAIR


def pair_terms(cells: pl.LazyFrame) -> pl.LazyFrame:
    """Per pair (``PAIR``): ``ri``, ``precision`` and ``recall`` for regions, from cells with marginals."""
    seg = cells.group_by([*PAIR, "seg_region"]).agg(area=pl.col("a").first()).group_by(PAIR).agg(
        a2=(pl.col("area") * pl.col("area")).sum())
    gt = cells.group_by([*PAIR, "gt_region"]).agg(area=pl.col("b").first()).group_by(PAIR).agg(
        b2=(pl.col("area") * pl.col("area")).sum())
    counts = cells.group_by(PAIR).agg(n=pl.col("n").sum(), s2=(pl.col("n") * pl.col("n")).sum())
    n11 = (pl.col("s2") - pl.col("n")) // 2
    n10 = (pl.col("a2") - pl.col("s2")) // 2
    n01 = (pl.col("b2") - pl.col("s2")) // 2
    n00 = (pl.col("n") * pl.col("n") - pl.col("a2") - pl.col("b2") + pl.col("s2")) // 2
    return (counts.join(seg, on=PAIR).join(gt, on=PAIR)
            .select(*PAIR, ri=_ratio(n11 + n00, n11 + n00 + n01 + n10),
                    precision=_ratio(n11, n11 + n10), recall=_ratio(n11, n11 + n01)))


def _ratio(numerator: pl.Expr, denominator: pl.Expr) -> pl.Expr:
    """``numerator / denominator`` in doubles, NaN for 0/0 (C++'s result)."""
    return numerator.cast(pl.Float64) / denominator.cast(pl.Float64)
