"""Segmentation figures: precision–recall curves of a partition measure over each run's parameters with its ODS
and OIS points (SEISM ``pr_curves.m``; Pont-Tuset & Marques Fig. 11), and per-measure boxplots over images."""

from evalengine.plots.figure import pyplot


def segmentation_pr_curves(evaluations: dict, measure: str = "fop"):
    """One curve per run (``{run: SegmentationEvaluation}``) of ``fr``, ``fop`` or ``fb`` (recall on x, as SEISM),
    the ODS point as a star, the OIS point as a circle; the legend gives ODS F, OIS F and AP."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(5.5, 5))
    for run, evaluation in evaluations.items():
        curve = evaluation.pr_curve(measure)
        summary = evaluation.summary().row(list(evaluation.measures).index(measure), named=True)
        (line,) = ax.plot(curve["recall"], curve["precision"],
                          label=f"{run} [ODS {summary['ods']:.3f}, OIS {summary['ois']:.3f}, AP {summary['ap']:.3f}]")
        ax.plot(summary["ods_recall"], summary["ods_precision"], "*", color=line.get_color(), markersize=10)
        ax.plot(summary["ois_recall"], summary["ois_precision"], "o", color=line.get_color(), fillstyle="none")
    ax.set(xlabel="recall", ylabel="precision", xlim=(0, 1), ylim=(0, 1), title=f"{measure}: precision–recall")
    ax.legend(loc="lower left", fontsize="small")
    fig.tight_layout()
    return fig


def measure_boxplots(per_image, measures, parameter: float | None = None):
    """A boxplot per measure of its per-image values (the F of ``fr``/``fop``) at ``parameter`` (the only one by
    default), from :attr:`SegmentationEvaluation.per_image`."""
    if parameter is not None:
        per_image = per_image.filter(per_image["parameter"] == parameter)
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(max(4.0, 0.6 * len(measures) + 1), 4))
    ax.boxplot([per_image[m].drop_nans().drop_nulls().to_numpy() for m in measures])
    ax.set_xticks(range(1, len(measures) + 1), list(measures))
    ax.set(ylabel="per-image value", title=f"{per_image['image_id'].n_unique()} images")
    fig.tight_layout()
    return fig
