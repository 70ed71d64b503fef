"""Region-based measures per contingency table (spec §4.1), as SEISM's ``mex_eval_segm`` computes them: segmentation
covering both ways (``sc.hpp``), directional Hamming distance both ways (``dhd.hpp``), BCE, GCE and LCE
(``bce_gce_lce.hpp``) and the variation of information (``voi.hpp``, in bits), with its normalised form.

Orientation (spec §0, §4.1.1): ``sc`` and ``sdhd`` sum over the machine partition's regions, ``ssc`` and ``dhd``
over the ground truth's.
"""

import math

import polars as pl

from evalengine.metrics.partition import PAIR

LOG2 = math.log(2.0)


def region_terms(cells: pl.LazyFrame) -> pl.LazyFrame:
    """Per pair (``PAIR``): ``total`` pixels, region counts ``n_seg``, ``n_gt``, and ``sc``, ``ssc``, the distances
    ``dhd_distance`` / ``sdhd_distance`` (pixels), ``bce``, ``gce``, ``lce`` (errors in [0, 1]) and ``voi`` (bits),
    from cells with marginals (:func:`evalengine.metrics.partition.with_marginals`)."""
    n, a, b, total = (pl.col(c).cast(pl.Float64) for c in ("n", "a", "b", "total"))
    cells = cells.with_columns(
        jaccard=n / (a + b - n),
        # BCE: max of the two refinement errors, weighted by the cell (Martin's per-pixel form grouped by cell)
        bce_term=pl.max_horizontal((a - n) / a, (b - n) / b) * n,
        gce_gt=(b - n) * n / b, gce_seg=(a - n) * n / a,
        # mutual information term, in voi.hpp's order of operations
        mi_term=n * (total * n / a / b).log(),
    )
    by_seg = cells.group_by([*PAIR, "seg_region"]).agg(
        area=pl.col("a").first(), max_jaccard=pl.col("jaccard").max(), max_n=pl.col("n").max())
    by_gt = cells.group_by([*PAIR, "gt_region"]).agg(
        area=pl.col("b").first(), max_jaccard=pl.col("jaccard").max(), max_n=pl.col("n").max())
    seg_terms = by_seg.group_by(PAIR).agg(*_side_terms("seg"))
    gt_terms = by_gt.group_by(PAIR).agg(*_side_terms("gt"))
    cell_terms = cells.group_by(PAIR).agg(
        total=pl.col("total").first(),
        bce_sum=pl.col("bce_term").sum(), gce_gt=pl.col("gce_gt").sum(), gce_seg=pl.col("gce_seg").sum(),
        lce_sum=pl.min_horizontal("gce_gt", "gce_seg").sum(), mi_sum=pl.col("mi_term").sum())
    total = pl.col("total").cast(pl.Float64)
    return (cell_terms.join(seg_terms, on=PAIR).join(gt_terms, on=PAIR)
            .select(*PAIR, "total", "n_seg", "n_gt",
                    sc=pl.col("covering_seg") / total,
                    ssc=pl.col("covering_gt") / total,
                    dhd_distance=pl.col("total") - pl.col("max_n_gt"),
                    sdhd_distance=pl.col("total") - pl.col("max_n_seg"),
                    bce=pl.col("bce_sum") / total,
                    gce=pl.min_horizontal("gce_gt", "gce_seg") / total,
                    lce=pl.col("lce_sum") / total,
                    voi=(pl.col("entropy_seg") / LOG2 / total + pl.col("entropy_gt") / LOG2 / total
                         - 2.0 * (pl.col("mi_sum") / LOG2 / total))))


def _side_terms(side: str) -> list:
    """A partition's sums over its regions: count, covering numerator, sum of max intersections, −Σ a·log(a/n)."""
    area = pl.col("area").cast(pl.Float64)
    total = pl.col("area").sum().cast(pl.Float64)
    return [pl.len().alias(f"n_{side}"),
            (pl.col("max_jaccard") * area).sum().alias(f"covering_{side}"),
            pl.col("max_n").sum().alias(f"max_n_{side}"),
            (-(area * (area / total).log()).sum()).alias(f"entropy_{side}")]


def normalized_voi(voi: pl.Expr, n_seg: pl.Expr, n_gt: pl.Expr) -> pl.Expr:
    """SEISM's ``nvoi`` similarity: ``1 − VoI / (2·log₂ max(N_S, N_G))``, 1 when both partitions are one region
    (spec §4.1.6, the code form; not the paper's ``log N``)."""
    regions = pl.max_horizontal(n_seg, n_gt)
    return pl.when(regions == 1).then(1.0).otherwise(1.0 - voi / (2.0 * regions.cast(pl.Float64).log() / LOG2))
