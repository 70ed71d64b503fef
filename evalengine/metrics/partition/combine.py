"""Per image (and parameter) measures with SEISM's names, directions and multi-ground-truth conventions
(``mex_eval_segm.cpp``, ``eval_segm.m``; spec §4, testdata ``conventions``):

- the mean over annotators of each pair's value: ``sc``, ``ssc``, ``pri``, ``voi``, ``nvoi``; of each error, as a
  similarity ``1 − mean``: ``bce``, ``gce``, ``lce``; of each distance in pixels, ``1 − mean / n``: ``dhd``, ``sdhd``,
  ``bgm``; ``vd = (dhd + sdhd) / 2``;
- ``fr``: F of the mean precision and the mean recall (0 unless their sum is positive);
- ``fop``: one classification over all annotators (:mod:`evalengine.metrics.partition.objects`);
- ``fb``: the boundary kernel's counts pooled over annotators (``schema.PARTITION_BOUNDARY``), SEISM's edge rules
  (:func:`evalengine.geometry.boundary_pr.boundary_precision_recall`).

A pair's ``n`` is its valid pixels (all of them without void).
"""

import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError
from evalengine.geometry.boundary_pr import boundary_precision_recall
from evalengine.match.partitions import bgm_distances
from evalengine.metrics.partition import IMAGE, PAIR, with_marginals
from evalengine.metrics.partition.objects import ObjectsAndParts, fop_terms
from evalengine.metrics.partition.pairs import pair_terms
from evalengine.metrics.partition.region import normalized_voi, region_terms

# SEISM's measure names, in its order; fr, fop and fb are [F, P, R], the others one number (higher is better, but voi)
MEASURES = ("sc", "ssc", "pri", "voi", "nvoi", "bce", "gce", "lce", "dhd", "sdhd", "vd", "bgm", "fr", "fop", "fb")
PR_MEASURES = ("fr", "fop", "fb")
BOUNDARY_MEASURES = ("fb",)  # from the boundary table, not the contingency table
CONTINGENCY_MEASURES = tuple(m for m in MEASURES if m not in BOUNDARY_MEASURES)
FB_COUNTS = tuple(schema.PARTITION_BOUNDARY)[2:]  # matched_pred, n_pred, matched_gt, n_gt


def check_measures(measures) -> tuple:
    """The requested measures in SEISM's order (all of them, fb included, for None), or a located error."""
    if measures is None:
        return MEASURES
    measures = tuple(measures)
    for measure in measures:
        if measure not in MEASURES:
            raise ProtocolError(f"--measures: unknown measure {measure!r} (measures: {', '.join(MEASURES)})")
    return tuple(m for m in MEASURES if m in measures)


def measure_columns(measures) -> list:
    """The columns holding ``measures`` (``fr`` → ``fr``, ``fr_precision``, ``fr_recall``)."""
    return [c for m in measures for c in ((m, f"{m}_precision", f"{m}_recall") if m in PR_MEASURES else (m,))]


def image_measures(cells: pl.DataFrame, measures=None, objects: ObjectsAndParts = ObjectsAndParts(),
                   boundary: pl.DataFrame | None = None, pairs: pl.DataFrame | None = None) -> pl.DataFrame:
    """One row per (image, parameter) with the columns of ``measures``, from contingency cells
    (``schema.CONTINGENCY``), for ``bgm`` their pairs' distances (``schema.PARTITION_PAIRS``, the match table's
    ``pairs`` side; solved here when not given) and, for ``fb``, the boundary counts (``schema.PARTITION_BOUNDARY``,
    kept as columns: the dataset level pools them)."""
    measures = check_measures(measures)
    marginals = with_marginals(cells.lazy())
    terms = region_terms(marginals).join(pair_terms(marginals), on=PAIR)
    if "bgm" in measures:
        terms = terms.join((bgm_distances(cells) if pairs is None else pairs).lazy(), on=PAIR)
    total = pl.col("total").first().cast(pl.Float64)

    def similarity(distance: str) -> pl.Expr:
        return 1.0 - pl.col(distance).cast(pl.Float64).mean() / total

    per_image = terms.sort(PAIR).group_by(IMAGE, maintain_order=True).agg(
        sc=pl.col("sc").mean(), ssc=pl.col("ssc").mean(), pri=pl.col("ri").mean(), voi=pl.col("voi").mean(),
        nvoi=normalized_voi(pl.col("voi"), pl.col("n_seg"), pl.col("n_gt")).mean(),
        bce=1.0 - pl.col("bce").mean(), gce=1.0 - pl.col("gce").mean(), lce=1.0 - pl.col("lce").mean(),
        dhd=similarity("dhd_distance"), sdhd=similarity("sdhd_distance"),
        **({"bgm": similarity("bgm_distance")} if "bgm" in measures else {}),
        fr_precision=pl.col("precision").mean(), fr_recall=pl.col("recall").mean(),
    ).with_columns(vd=0.5 * (pl.col("dhd") + pl.col("sdhd")),
                   fr=f_measure(pl.col("fr_precision"), pl.col("fr_recall"))).collect()
    if "fop" in measures:
        per_image = per_image.join(fop_terms(cells, objects), on=IMAGE, how="left")
    if "fb" in measures:
        per_image = per_image.join(with_boundary_measures(boundary), on=IMAGE, how="left")
    return per_image.select(*IMAGE, *measure_columns(measures), *(FB_COUNTS if "fb" in measures else ()))


def with_boundary_measures(counts: pl.DataFrame) -> pl.DataFrame:
    """``counts`` (the four ``FB_COUNTS`` columns, per image or pooled) with ``fb``, ``fb_precision``,
    ``fb_recall`` by SEISM's rules (no GT boundary: P 0, R 1; no machine boundary: P 1, R 0)."""
    f, precision, recall = boundary_precision_recall(counts.select(FB_COUNTS).to_numpy().reshape(-1, 4))
    return counts.with_columns(fb=pl.Series(f, dtype=pl.Float64), fb_precision=pl.Series(precision, dtype=pl.Float64),
                               fb_recall=pl.Series(recall, dtype=pl.Float64))


def f_measure(precision: pl.Expr, recall: pl.Expr) -> pl.Expr:
    """``2PR/(P+R)``, 0 unless ``P + R > 0`` (SEISM; a NaN sum gives 0 as the C++ comparison does)."""
    total = precision + recall
    return pl.when(total.is_not_nan() & (total > 0)).then(2 * precision * recall / total).otherwise(0.0)
