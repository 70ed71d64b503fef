"""Error-diagnosis figures: TIDE's error bars, COCO analyze's stacked precision-recall areas, Borji & Iranmanesh's
cumulative AP and errors by size, the confusion heat map."""

import numpy as np
import polars as pl

from evalengine.match.analyze import CURVES
from evalengine.metrics.errors.analyze import legend_ap
from evalengine.metrics.errors.borji import ERROR_HEADERS, ERRORS, STAGE_HEADERS, TABLE_STAGES
from evalengine.plots.figure import pyplot

_ANNOTATED_CLASSES = 20  # cell values are written in the cells up to this many classes


def tide_errors(results: dict):
    """TIDE's summary as bars (tidecv's ``Plotter.make_summary_plot`` without the pie): ΔAP of each main error, then
    of the special ones, one bar per run. ``results`` maps a run name to its ``TideResult``."""
    plt = pyplot()
    fig, axes = plt.subplots(1, 2, figsize=(8, 3.5), gridspec_kw={"width_ratios": [3, 1]})
    width = 0.8 / max(len(results), 1)
    for ax, kind in zip(axes, ("main", "special")):
        names = list(next(iter(results.values())).as_dict()[kind]) if results else []
        for k, (run, result) in enumerate(results.items()):
            values = [result.as_dict()[kind][name] for name in names]
            ax.bar([i + k * width for i in range(len(names))], values, width, label=run)
        ax.set_xticks([i + width * (len(results) - 1) / 2 for i in range(len(names))], names)
        ax.set(ylabel="dAP", title="Main errors" if kind == "main" else "Special errors")
    axes[0].legend(loc="upper right", fontsize="small")
    fig.tight_layout()
    return fig



# MATLAB analyze's colours (makeplot's cs), curve by curve: C75 and C50 white, then Loc, Sim, Oth, BG, FN
ANALYZE_COLOURS = ((1, 1, 1), (1, 1, 1), (.31, .51, .74), (.75, .31, .30), (.36, .90, .38), (.50, .39, .64),
                   (1, .6, 0))


def analyze_pr(precision: pl.DataFrame, title: str = "overall"):
    """COCO analyze's stacked-area precision-recall figure (MATLAB ``makeplot``), one panel per area range of
    ``precision`` (``area_range, curve, recall_threshold, precision`` rows of one category, supercategory or the
    overall mean, :meth:`~evalengine.metrics.errors.analyze.AnalyzeResult.precision_frame`): each curve's band fills
    the space above the previous curve, black edges, legend ``[.xxx] C75`` (the curve's AP as MATLAB rounds it)."""
    plt = pyplot()
    areas = precision.get_column("area_range").unique(maintain_order=True).to_list()
    columns = min(len(areas), 2)
    rows = -(-len(areas) // columns)
    fig, axes = plt.subplots(rows, columns, figsize=(5.5 * columns, 4.5 * rows), squeeze=False)
    for ax, area in zip(axes.flat, areas):
        below = None
        for curve, colour in zip(CURVES, ANALYZE_COLOURS):
            points = precision.filter((pl.col("area_range") == area) & (pl.col("curve") == curve)).sort(
                "recall_threshold")
            recall, values = points.get_column("recall_threshold").to_numpy(), points.get_column("precision").to_numpy()
            ax.fill_between(recall, 0 if below is None else below, values, facecolor=colour, edgecolor="black",
                            linewidth=0.6, label=f"[{legend_ap(float(values.mean()))}] {curve}")
            below = values
        ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1), title=f"{title}-{area}")
        ax.legend(loc="lower left", fontsize="small")
    for ax in list(axes.flat)[len(areas):]:
        ax.set_axis_off()
    fig.tight_layout()
    return fig


def borji_diagnosis(table, errors):
    """Borji & Iranmanesh's diagnosis in two panels: the AP of each cumulative stage (bars, one group per metric row
    of ``table``, the diagnosis' ``table()``), and the errors per object size (``error_counts()``) as stacked shares,
    the paper's pies as bars."""
    headers = dict(zip(TABLE_STAGES, STAGE_HEADERS))
    plt = pyplot()
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4), gridspec_kw={"width_ratios": [3, 2]})
    stages = [c for c in table.columns if c != "metric"]
    width = 0.8 / max(table.height, 1)
    for k, row in enumerate(table.iter_rows(named=True)):
        values = [max(row[s], 0.0) * 100 for s in stages]
        bars = left.bar([i + k * width for i in range(len(stages))], values, width, label=row["metric"])
        left.bar_label(bars, fmt="%.1f", fontsize="x-small")
    left.set_xticks([i + width * (table.height - 1) / 2 for i in range(len(stages))],
                    [headers.get(s, s) for s in stages], rotation=20, ha="right")
    left.set(ylabel="AP (%)", ylim=(0, 108), title="AP after each cumulative fix")
    left.legend(loc="upper left", fontsize="small")
    sizes = errors.get_column("area_range").unique(maintain_order=True).to_list()
    bottom = [0.0] * len(sizes)
    for error in errors.get_column("error").unique(maintain_order=True).to_list():
        rows = errors.filter(errors["error"] == error)
        share = [(rows.filter(rows["area_range"] == s).get_column("fraction")[0] or 0.0) * 100 for s in sizes]
        right.bar(sizes, share, 0.6, bottom=bottom, label=dict(zip(ERRORS, ERROR_HEADERS)).get(error, error))
        bottom = [b + v for b, v in zip(bottom, share)]
    right.set(ylabel="share of the errors (%)", ylim=(0, 100), title="Errors by object size")
    right.legend(loc="center left", bbox_to_anchor=(1.0, 0.5), fontsize="small")
    fig.tight_layout()
    return fig


def confusion_heatmap(matrix: pl.DataFrame, category_names: dict, normalize: bool = False, title: str = ""):
    """The confusion matrix as a heat map: rows ground truth, columns detections, the classes in ``matrix``'s order
    then background (``Confusion.matrix()``: ``gt_category_id, dt_category_id, count, fraction``). Counts on a
    logarithmic scale (empty cells blank), or each row's fractions (``normalize``) from 0 to 1; the values are written
    in the cells when there are at most 20 classes."""
    plt = pyplot()
    from matplotlib.colors import LogNorm

    labels = [category_names.get(c, str(c)) if c is not None else "background"
              for c in matrix.get_column("dt_category_id").unique(maintain_order=True)]
    n = len(labels)
    counts = matrix.get_column("count").to_numpy().reshape(n, n)
    values = matrix.get_column("fraction").fill_null(0.0).to_numpy().reshape(n, n) if normalize else counts
    shown = np.ma.masked_where(counts == 0, values)
    size = min(4 + 0.16 * n, 16)
    fig, ax = plt.subplots(figsize=(size + 1, size))
    norm = None if normalize or not counts.any() else LogNorm(vmin=1, vmax=counts.max())
    image = ax.imshow(shown, cmap="Blues", norm=norm, vmin=0 if normalize else None, vmax=1 if normalize else None,
                      interpolation="nearest")
    fig.colorbar(image, ax=ax, fraction=0.046, pad=0.04, label="row fraction" if normalize else "count")
    ticks = range(n)
    font = "small" if n <= _ANNOTATED_CLASSES + 1 else 5
    ax.set_xticks(ticks, labels, rotation=90, fontsize=font)
    ax.set_yticks(ticks, labels, fontsize=font)
    ax.set(xlabel="detected", ylabel="ground truth",
           title=title or f"Confusion matrix ({'row-normalised' if normalize else 'counts'})")
    if n <= _ANNOTATED_CLASSES + 1:
        top = values.max() if values.size else 0
        for (i, j), value in np.ndenumerate(values):
            if counts[i, j]:
                text = f"{value:.2f}" if normalize else str(int(value))
                ax.text(j, i, text, ha="center", va="center", fontsize="x-small",
                        color="white" if value > top / 2 else "black")
    fig.tight_layout()
    return fig
