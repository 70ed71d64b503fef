"""Proposal recall, average recall and best overlap as queries over the proposal match table.

Hosang et al. (TPAMI 2016): recall at IoU threshold t with N proposals is the fraction of ground truths whose
greedy partner among the top N has IoU >= t, pooled over all annotations (``aggregation="instances"``);
AR = 2∫_{0.5}^{1} recall(t) dt, which for a fixed matching is exactly 2·mean(max(IoU − 0.5, 0)) (App. A);
the x-axis of every "vs #proposals" curve is the mean actual number of proposals per image.
Wang et al. ("Insights of object proposal evaluation", Eq. 2) average per-image recall instead
(``aggregation="images"``, over images with at least one evaluated ground truth) with non-exclusive hits
(``matcher="best"``). Every output carries the matcher and the aggregation it used.
"""

import numpy as np
import polars as pl

from evalengine.errors import ProtocolError, check_option
from evalengine.geometry.boxes import size_bin_expr
from evalengine.match.protocol import unit_thresholds
from evalengine.metrics.integrate import trapezoid

MATCHERS = {"greedy": "iou", "best": "best_iou"}
AGGREGATIONS = ("instances", "images")


def _iou_column(matcher: str) -> pl.Expr:
    check_option("matcher", matcher, MATCHERS)
    return pl.col(MATCHERS[matcher])


def _group_starts(table: pl.DataFrame, keys: list) -> np.ndarray:
    """Row positions where a run of equal ``keys`` starts in a sorted table."""
    changed = np.zeros(table.height, bool)
    changed[:1] = True
    for key in keys:
        values = table.get_column(key).to_numpy()
        changed[1:] |= values[1:] != values[:-1]
    return np.flatnonzero(changed)


def _group_means(table: pl.DataFrame, keys: list, names: list) -> pl.DataFrame:
    """Mean of ``names`` over runs of equal ``keys`` in a sorted table, summed left to right (NumPy
    ``reduceat``): the same floats whatever the sharding, the thread count or the file layout."""
    if table.height == 0:
        return table.select(*keys, *names)
    starts = _group_starts(table, keys)
    counts = np.diff(np.append(starts, table.height))
    means = {name: np.add.reduceat(table.get_column(name).to_numpy().astype(np.float64), starts) / counts
             for name in names}
    return table.select(keys)[starts].with_columns([pl.Series(name, v) for name, v in means.items()])


def aggregate(frame: pl.LazyFrame, values: dict, by: list, aggregation: str) -> pl.LazyFrame:
    """Mean of each expression in ``values`` per ``by`` group, over annotations or over images (then images)."""
    check_option("aggregation", aggregation, AGGREGATIONS)
    # one row per ground truth × budget: sorted so that every sum runs in the same order
    table = (frame.select(*by, "image_id", "gt_id", *[expr.alias(name) for name, expr in values.items()])
             .sort(*by, "image_id", "gt_id").collect())
    if aggregation == "instances":
        return _group_means(table, list(by), list(values)).lazy()
    per_image = _group_means(table, [*by, "image_id"], list(values))
    return _group_means(per_image, list(by), list(values)).lazy()


def mean_proposals(image_counts: pl.LazyFrame, n_images: int, budgets) -> pl.LazyFrame:
    """Mean number of proposals actually evaluated per image at each budget, over all ``n_images`` images
    (an image without proposals counts 0)."""
    sums = image_counts.group_by("budget").agg(pl.col("n_proposals").sum().alias("total"))
    return (pl.LazyFrame({"budget": list(budgets)}, schema={"budget": pl.Int32})
            .join(sums, on="budget", how="left")
            .select("budget", (pl.col("total").fill_null(0) / max(n_images, 1)).alias("mean_proposals")))


def recall(gt_matches: pl.LazyFrame, iou_thresholds, matcher: str = "greedy", aggregation: str = "instances",
           by=()) -> pl.LazyFrame:
    """Recall at each (budget, IoU threshold), optionally per ``by`` columns (e.g. ``category_id``).

    Per group the IoUs are sorted once and every threshold is a binary search, so a 0.001 grid costs no more
    than one threshold. Pooled recall is ``count / n``; per-image recall averages ``count_i / n_i`` over the
    group's images (each ground truth weighing ``1 / (n_images · n_i)``, summed in IoU order)."""
    check_option("aggregation", aggregation, AGGREGATIONS)
    keys = ["budget", *by]
    per_image = pl.len().over(*keys, "image_id")
    n_images = pl.col("image_id").n_unique().over(keys)
    table = (gt_matches.select(*keys, "image_id", "gt_id", _iou_column(matcher).alias("_iou"))
             .with_columns((1.0 / (per_image * n_images)).alias("_weight"))
             .sort(*keys, "_iou", "gt_id").collect())
    thresholds = np.array(unit_thresholds("iou_thresholds", iou_thresholds, zero=True))
    starts = _group_starts(table, keys)
    ends = np.append(starts[1:], table.height)
    ious, weights = table.get_column("_iou").to_numpy(), table.get_column("_weight").to_numpy()
    rows = []
    for start, end in zip(starts, ends):
        values = ious[start:end]
        below = np.searchsorted(values, thresholds, side="left")  # IoUs < t
        if aggregation == "instances":
            result = (values.shape[0] - below) / values.shape[0]
        else:  # suffix sums of the weights, from the largest IoU down
            suffix = np.append(np.cumsum(weights[start:end][::-1])[::-1], 0.0)
            result = suffix[below]
        group = table.select(keys)[int(start)]
        rows.append(group.join(pl.DataFrame({"iou_threshold": thresholds, "recall": result}), how="cross"))
    out = pl.concat(rows) if rows else pl.DataFrame(schema={**table.select(keys).schema, "iou_threshold": pl.Float64,
                                                              "recall": pl.Float64})
    return (out.lazy().with_columns(matcher=pl.lit(matcher), aggregation=pl.lit(aggregation))
            .sort(*keys, "iou_threshold"))


def average_recall(gt_matches: pl.LazyFrame, matcher: str = "greedy", aggregation: str = "instances",
                   iou_range=(0.5, 1.0), by=()) -> pl.LazyFrame:
    """Exact AR over ``iou_range`` [a, b]: (1/(b−a))∫_a^b recall(t) dt = mean(clip(IoU, a, b) − a)/(b − a)
    (Hosang et al. App. A; [0.5, 1] gives their AR, [0.5, 0.7] the §5.4 variant as an integral)."""
    lo, hi = (float(v) for v in iou_range)
    if not 0.0 <= lo < hi <= 1.0:
        raise ProtocolError(f"iou_range must satisfy 0 <= a < b <= 1, got {iou_range}")
    value = (_iou_column(matcher).clip(lo, hi) - lo) / (hi - lo)
    return (aggregate(gt_matches, {"ar": value}, ["budget", *by], aggregation)
            .with_columns(matcher=pl.lit(matcher), aggregation=pl.lit(aggregation))
            .sort("budget", *by))


def recall_curve_ar(recall_values: np.ndarray, thresholds: np.ndarray, lo: float = 0.5, hi: float = 1.0) -> float:
    """AR from a sampled recall-vs-IoU curve by the trapezoid rule over [lo, hi] (the toolbox integrates
    its 0.001-grid curve this way: ``AR = 2 * 0.001 * trapz(recall(overlap >= 0.5))``)."""
    thresholds, recall_values = np.asarray(thresholds, float), np.asarray(recall_values, float)
    keep = (thresholds >= lo) & (thresholds <= hi)
    return trapezoid(thresholds[keep], recall_values[keep]) / (hi - lo)


def toolbox_grid() -> np.ndarray:
    """The toolbox's IoU grid ``0:0.001:1`` as exact decimals."""
    return np.arange(1001) / 1000.0


def average_recall_trapezoid(gt_matches: pl.LazyFrame, matcher: str = "greedy", by=()) -> pl.LazyFrame:
    """The toolbox's AR: recall on the 0.001 grid (``count / (n + eps)``), trapezoid over [0.5, 1] (times 2)."""
    grid = toolbox_grid()
    table = recall(gt_matches, grid[grid >= 0.5], matcher=matcher, by=by).collect()
    n = gt_matches.group_by("budget", *by).len("n").collect()
    table = table.join(n, on=["budget", *by]).with_columns(
        # the toolbox divides by (num_pos + eps): recall * n / (n + eps)
        (pl.col("recall") * pl.col("n") / (pl.col("n") + np.spacing(1))).alias("recall"))
    rows = []
    for key, group in table.group_by(["budget", *by], maintain_order=True):
        group = group.sort("iou_threshold")
        rows.append({**dict(zip(["budget", *by], key)),
                     "ar": recall_curve_ar(group.get_column("recall").to_numpy(),
                                           group.get_column("iou_threshold").to_numpy())})
    return pl.LazyFrame(rows).with_columns(matcher=pl.lit(matcher), aggregation=pl.lit("instances")).sort("budget", *by)


def average_recall_grid(gt_matches: pl.LazyFrame, iou_thresholds, matcher: str = "greedy",
                        aggregation: str = "instances", by=()) -> pl.LazyFrame:
    """AR as the plain mean of recall at given thresholds: the toolbox's 9-point AR over 0.5–0.7 (§5.4), or
    Wang et al.'s right Riemann sum {0.5 + 0.5k/n, k = 1..n} (Eq. 3)."""
    return (recall(gt_matches, iou_thresholds, matcher, aggregation, by)
            .group_by("budget", *by, "matcher", "aggregation").agg(pl.col("recall").mean().alias("ar"))
            .sort("budget", *by))


def wang_thresholds(n: int) -> list:
    """Wang et al. Eq. 3's thresholds: 0.5 + 0.5k/n for k = 1..n (a right Riemann sum)."""
    return [0.5 + 0.5 * k / n for k in range(1, n + 1)]


def volume_under_surface(ar_by_budget: pl.DataFrame) -> float:
    """VUS-like summary (Hosang et al. App. A mention it without a normalisation): the mean of AR over
    log10(budget), trapezoid rule between the budgets, i.e. (1/log-range)∫∫ 2·recall(t, N) dt dlogN."""
    table = ar_by_budget.sort("budget")
    x = np.log10(table.get_column("budget").to_numpy().astype(float))
    y = table.get_column("ar").to_numpy()
    if len(x) < 2:
        return float(y[0]) if len(y) else float("nan")
    return trapezoid(x, y) / (x[-1] - x[0])


def with_size_bin(gt_matches: pl.LazyFrame, gt: pl.LazyFrame, images: pl.LazyFrame) -> pl.LazyFrame:
    """Add ``size_bin`` 0–9: sqrt(box area / image area) in Hosang et al.'s ten bins of 0.1 (the last open)."""
    relative = (pl.col("w") * pl.col("h") / (pl.col("width") * pl.col("height"))).sqrt()
    sizes = (gt.select("gt_id", "image_id", "w", "h").join(images.select("image_id", "width", "height"), on="image_id")
             .select("gt_id", size_bin_expr(relative).alias("size_bin")))
    return gt_matches.join(sizes, on="gt_id", how="left")


def evaluated_gt_boxes(gt_matches: pl.LazyFrame, gt: pl.LazyFrame) -> pl.LazyFrame:
    """The boxes of the ground truths present in the match table (the protocol's crowd/difficult filters applied)."""
    ids = gt_matches.select("gt_id").unique()
    return gt.join(ids, on="gt_id", how="semi").select("gt_id", "image_id", "x", "y", "w", "h")


def best_overlap(gt_matches: pl.LazyFrame, by=()) -> pl.LazyFrame:
    """ABO: the mean over ground truths of the best IoU over the top-N (non-exclusive), per budget."""
    return aggregate(gt_matches, {"abo": pl.col("best_iou")}, ["budget", *by], "instances").sort("budget", *by)


def mean_best_overlap_per_class(gt_matches: pl.LazyFrame) -> pl.LazyFrame:
    """MABO: the mean over categories of each category's ABO (Uijlings et al.'s Selective Search), per budget."""
    per_class = best_overlap(gt_matches, ["category_id"]).collect()
    return _group_means(per_class, ["budget"], ["abo"]).rename({"abo": "mabo"}).lazy()
