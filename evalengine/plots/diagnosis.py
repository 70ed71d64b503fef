"""Error-diagnosis figures: TIDE's error bars."""

from evalengine.plots.figure import pyplot


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

