"""Per image (and parameter) measures with SEISM's names, directions and multi-ground-truth conventions
(``mex_eval_segm.cpp``, ``eval_segm.m``; spec §4, testdata ``conventions``):

- the mean over annotators of each pair's value: ``sc``, ``ssc``, ``pri``, ``voi``, ``nvoi``; of each error, as a
  similarity ``1 − mean``: ``bce``, ``gce``, ``lce``; of each distance in pixels, ``1 − mean / n``: ``dhd``, ``sdhd``,
  ``bgm``; ``vd = (dhd + sdhd) / 2``;
- ``fr``: F of the mean precision and the mean recall (0 unless their sum is positive);
- ``fop``: one classification over all annotators (:mod:`evalengine.metrics.partition.objects`);
- ``fb``: counts pooled over annotators (the boundary kernel's, not part of this module yet).

A pair's ``n`` is its valid pixels (all of them without void).
"""

import polars as pl

from evalengine.errors import ProtocolError
from evalengine.metrics.partition import IMAGE, PAIR, with_marginals
from evalengine.metrics.partition.bgm import bgm_terms
from evalengine.metrics.partition.objects import ObjectsAndParts, fop_terms
from evalengine.metrics.partition.pairs import pair_terms
from evalengine.metrics.partition.region import normalized_voi, region_terms

# SEISM's measure names, in its order; fr, fop and fb are [F, P, R], the others one number (higher is better, but voi)
MEASURES = ("sc", "ssc", "pri", "voi", "nvoi", "bce", "gce", "lce", "dhd", "sdhd", "vd", "bgm", "fr", "fop", "fb")
PR_MEASURES = ("fr", "fop", "fb")
NOT_YET = {"fb": "the boundary measure fb is not yet available (it comes with the boundary kernels)"}
AVAILABLE = tuple(m for m in MEASURES if m not in NOT_YET)


def check_measures(measures) -> tuple:
    """The requested measures in SEISM's order (all available ones for None), or a located error."""
    if measures is None:
        return AVAILABLE
    measures = tuple(measures)
    for measure in measures:
        if measure in NOT_YET:
            raise ProtocolError(f"--measures: {NOT_YET[measure]}")
        if measure not in MEASURES:
            raise ProtocolError(f"--measures: unknown measure {measure!r} (measures: {', '.join(MEASURES)})")
    return tuple(m for m in MEASURES if m in measures)


def measure_columns(measures) -> list:
    """The columns holding ``measures`` (``fr`` → ``fr``, ``fr_precision``, ``fr_recall``)."""
    return [c for m in measures for c in ((m, f"{m}_precision", f"{m}_recall") if m in PR_MEASURES else (m,))]


def image_measures(cells: pl.DataFrame, measures=None, objects: ObjectsAndParts = ObjectsAndParts()) -> pl.DataFrame:
    """One row per (image, parameter) with the columns of ``measures``, from contingency cells
    (``schema.CONTINGENCY``)."""
    measures = check_measures(measures)
    marginals = with_marginals(cells.lazy())
    pairs = region_terms(marginals).join(pair_terms(marginals), on=PAIR)
    if "bgm" in measures:
        pairs = pairs.join(bgm_terms(cells).lazy(), on=PAIR)
    total = pl.col("total").first().cast(pl.Float64)

    def similarity(distance: str) -> pl.Expr:
        return 1.0 - pl.col(distance).cast(pl.Float64).mean() / total

    per_image = pairs.sort(PAIR).group_by(IMAGE, maintain_order=True).agg(
        sc=pl.col("sc").mean(), ssc=pl.col("ssc").mean(), pri=pl.col("ri").mean(), voi=pl.col("voi").mean(),
        nvoi=normalized_voi(pl.col("voi"), pl.col("n_seg"), pl.col("n_gt")).mean(),
        bce=1.0 - pl.col("bce").mean(), gce=1.0 - pl.col("gce").mean(), lce=1.0 - pl.col("lce").mean(),
        dhd=similarity("dhd_distance"), sdhd=similarity("sdhd_distance"),
        **({"bgm": similarity("bgm_distance")} if "bgm" in measures else {}),
        fr_precision=pl.col("precision").mean(), fr_recall=pl.col("recall").mean(),
    ).with_columns(vd=0.5 * (pl.col("dhd") + pl.col("sdhd")),
                   fr=f_measure(pl.col("fr_precision"), pl.col("fr_recall"))).collect()
    if "fop" in measures:
        per_image = per_image.join(fop_terms(cells), on=IMAGE, how="left")
    return per_image.select(*IMAGE, *measure_columns(measures))


def f_measure(precision: pl.Expr, recall: pl.Expr) -> pl.Expr:
    """``2PR/(P+R)``, 0 unless ``P + R > 0`` (SEISM; a NaN sum gives 0 as the C++ comparison does)."""
    total = precision + recall
    return pl.when(total.is_not_nan() & (total > 0)).then(2 * precision * recall / total).otherwise(0.0)
