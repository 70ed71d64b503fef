"""Error-diagnosis figures: TIDE's error bars and the confusion heat map."""

import numpy as np
import polars as pl

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
