"""Repeatability (Hosang et al. §3) as a query over the repeatability match table.

Per size bin (ten bins of sqrt(relative area) of the reference proposal), the area under the recall-vs-IoU
curve over [0, 1], then the unweighted mean over bins. The area under the step curve
``recall(t) = #{IoU >= t}/n`` is exactly the mean matched IoU (``method="exact"``); the toolbox integrates the
points (0, 1), (o_(1), n/n), …, (o_(n), 1/n) and (o_(n) + 0.001, 0) by the trapezoid rule
(``method="trapezoid"``, ``repeatability_plot.m``, without its subsampling to 500 values per bin). The toolbox
averages empty bins as 0 (``empty_bins="zero"``); by default they are left out (``"skip"``).
``touching_gt`` keeps the reference proposals with IoU >= 0.5 to some ground truth (the paper's variant).
"""

import numpy as np
import polars as pl

from evalengine.errors import check_option
from evalengine.geometry.boxes import SIZE_BIN_EDGES
from evalengine.metrics.integrate import trapezoid

N_BINS = len(SIZE_BIN_EDGES) + 1
METHODS = ("exact", "trapezoid")
EMPTY_BINS = ("skip", "zero")


def _trapezoid_area(ious: np.ndarray) -> float:
    o = np.sort(ious)
    n = o.shape[0]
    if n == 0:
        return 0.0
    x = np.concatenate([[0.0], o])
    y = np.concatenate([[1.0], (n - np.arange(n)) / n])
    if o[-1] < 1:
        x, y = np.append(x, o[-1] + 0.001), np.append(y, 0.0)
    return trapezoid(x, y)


def repeatability_by_bin(matches: pl.DataFrame, method: str = "exact", touching_gt: bool = False) -> pl.DataFrame:
    """``run, size_bin, n, area`` for every run and bin (bins without evaluated proposals have n = 0)."""
    check_option("method", method, METHODS)
    rows = matches.filter(pl.col("iou").is_not_null() & (pl.col("touches_gt") if touching_gt else pl.lit(True)))
    if method == "exact":
        areas = rows.group_by("run", "size_bin").agg(pl.len().alias("n"), pl.col("iou").mean().alias("area"))
    else:
        areas = pl.DataFrame(
            [{"run": run, "size_bin": size_bin, "n": group.height,
              "area": _trapezoid_area(group.get_column("iou").to_numpy())}
             for (run, size_bin), group in rows.group_by("run", "size_bin")],
            schema={"run": pl.String, "size_bin": pl.Int32, "n": pl.UInt32, "area": pl.Float64})
    grid = (matches.select("run").unique()
            .join(pl.DataFrame({"size_bin": np.arange(N_BINS, dtype=np.int32)}), how="cross"))
    return (grid.join(areas.with_columns(pl.col("size_bin").cast(pl.Int32)), on=["run", "size_bin"], how="left")
            .with_columns(pl.col("n").fill_null(0)).sort("run", "size_bin"))


def repeatability(matches: pl.DataFrame, method: str = "exact", empty_bins: str = "skip",
                  touching_gt: bool = False) -> pl.DataFrame:
    """``run, repeatability, n_evaluated, n_bins``: the unweighted mean over size bins of each bin's area."""
    check_option("empty_bins", empty_bins, EMPTY_BINS)
    bins = repeatability_by_bin(matches, method, touching_gt)
    area = pl.col("area").fill_null(0.0) if empty_bins == "zero" else pl.col("area")
    return (bins.group_by("run").agg(area.mean().alias("repeatability"), pl.col("n").sum().alias("n_evaluated"),
                                     (pl.col("n") > 0).sum().alias("n_bins"))
            .sort("run"))
