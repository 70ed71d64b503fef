"""Achievable quality of object proposals (Pont-Tuset & Marques, TPAMI 2015, §2.3 and §6.2) as queries over the
proposal match table, whose ``best_iou`` is each object's best Jaccard among the first N proposals of its image
(the oracle ``M*(o, N)``: one proposal may serve several objects; 0 where none overlaps).

Over all annotated objects pooled across the dataset, per budget: the mean (MCG's ``jaccard_object``), the median,
and the recall at thresholds, the fraction of objects whose best Jaccard is strictly above the threshold (MCG
``recallatoverlap.m``, "higher than a threshold"); the paper's thresholds are 0.5, 0.7 and 0.85. The x-axis is the
mean number of proposals actually used per image (:func:`evalengine.metrics.recall.mean_proposals`).

``measure="boundary_f"`` does the same with each object's best F̃b (``best_fb``, a table matched with
``boundary_f``): "the same three levels are used for F̃b" (§6.2).
"""

import polars as pl

from evalengine.errors import check_option
from evalengine.match.protocol import increasing, unit_thresholds
from evalengine.metrics.recall import aggregate

PONT_TUSET_THRESHOLDS = (0.5, 0.7, 0.85)
# the measure M of M*(o, N) and the match-table column holding it
MEASURES = {"jaccard": "best_iou", "boundary_f": "best_fb"}


def recall_name(threshold: float) -> str:
    return f"recall@{threshold:g}"


def achievable_quality(gt_matches: pl.LazyFrame, thresholds=PONT_TUSET_THRESHOLDS, measure: str = "jaccard",
                       by=()) -> pl.LazyFrame:
    """Per budget (and ``by`` columns): ``n_objects``, ``mean_quality`` (summed in (image, gt_id) order),
    ``median_quality`` (the mean of the two middle values for an even count, as MATLAB's and NumPy's ``median``) and
    ``recall@t`` = fraction of objects with ``M*(o, N) > t`` for each threshold ``t``."""
    check_option("measure", measure, MEASURES)
    thresholds = increasing("thresholds", unit_thresholds("thresholds", thresholds, zero=True))
    best = pl.col(MEASURES[measure])
    keys = ["budget", *by]
    values = {"mean_quality": best, **{recall_name(t): (best > t).cast(pl.Float64) for t in thresholds}}
    means = aggregate(gt_matches, values, keys, "instances")
    medians = gt_matches.group_by(keys).agg(pl.len().alias("n_objects"), best.median().alias("median_quality"))
    return (means.join(medians, on=keys, how="left")
            .select(*keys, "n_objects", "mean_quality", "median_quality", *[recall_name(t) for t in thresholds])
            .with_columns(measure=pl.lit(measure)).sort(keys))
