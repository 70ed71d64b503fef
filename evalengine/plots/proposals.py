"""Proposal figures: recall against IoU at a budget, average recall against the budget (Hosang et al.); achievable
quality against the budget and its distribution (Pont-Tuset & Marques)."""

import polars as pl

from evalengine.plots.figure import pyplot


def proposal_recall_iou(curves: dict, budget: int):
    """Recall against IoU threshold at one budget, one line per proposal run (Hosang et al. Fig. 6); ``curves``
    maps a run name to :meth:`ProposalEvaluation.recall_iou_curve`'s frame; the legend gives the mean recall over
    the drawn thresholds (≈ AR on the default 0.001 grid)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for run, table in curves.items():
        curve = table.filter(pl.col("budget") == budget).sort("iou_threshold")
        mean = float(curve["recall"].mean()) if curve.height else float("nan")
        ax.plot(curve["iou_threshold"], curve["recall"], label=f"{run} (AR ≈ {mean:.3f})")
    ax.set(xlabel="IoU threshold", ylabel="recall", xlim=(0.5, 1.0), ylim=(0, 1),
           title=f"recall vs IoU at {budget} proposals per image")
    ax.legend()
    fig.tight_layout()
    return fig


def ar_by_budget(tables: dict):
    """AR against the mean number of proposals per image (log axis, Hosang et al. Fig. 7c), one line per run;
    ``tables`` maps a run name to :meth:`ProposalEvaluation.average_recall`'s frame."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for run, table in tables.items():
        table = table.sort("budget")
        ax.plot(table["mean_proposals"], table["ar"], marker="o", label=run)
    ax.set(xscale="log", xlabel="mean number of proposals per image", ylabel="average recall", ylim=(0, 1),
           title="AR vs number of proposals")
    ax.legend()
    fig.tight_layout()
    return fig


def achievable_by_budget(tables: dict):
    """Pont-Tuset & Marques Fig. 9: the mean and median best Jaccard per object and the recall at each Jaccard
    threshold against the mean number of proposals used (log axis), one colour per run; ``tables`` maps a run name to
    :meth:`ProposalEvaluation.achievable_quality`'s frame."""
    plt = pyplot()
    fig, (quality, recall) = plt.subplots(1, 2, figsize=(11, 4.5))
    for k, (run, table) in enumerate(tables.items()):
        table, colour = table.sort("budget"), f"C{k}"
        x = table["mean_proposals"]
        quality.plot(x, table["mean_quality"], color=colour, label=f"{run} mean")
        quality.plot(x, table["median_quality"], color=colour, linestyle="--", label=f"{run} median")
        for column, style in zip([c for c in table.columns if c.startswith("recall@")], ("-", "--", ":", "-.")):
            recall.plot(x, table[column], color=colour, linestyle=style, label=f"{run} J > {column[7:]}")
    quality.set(xscale="log", xlabel="mean number of proposals per image", ylabel="best Jaccard per object",
                ylim=(0, 1), title="achievable quality")
    recall.set(xscale="log", xlabel="mean number of proposals per image", ylabel="recall", ylim=(0, 1),
               title="recall at Jaccard thresholds")
    quality.legend()
    recall.legend()
    fig.tight_layout()
    return fig


def best_quality_histogram(matches: dict, budget: int, bins: int = 20):
    """The distribution of each object's best Jaccard at one budget (the paper's histogram of M*), one run per
    histogram; ``matches`` maps a run name to its proposal match table (:meth:`ProposalEvaluation.gt_matches`)."""
    plt = pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.5))
    for run, table in matches.items():
        values = table.filter(pl.col("budget") == budget).get_column("best_iou").to_numpy()
        ax.hist(values, bins=bins, range=(0, 1), histtype="step", label=f"{run} ({len(values)} objects)")
    ax.set(xlabel="best Jaccard per object", ylabel="objects", xlim=(0, 1),
           title=f"best Jaccard at {budget} proposals per image")
    ax.legend()
    fig.tight_layout()
    return fig
