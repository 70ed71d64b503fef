"""Proposal figures: recall against IoU at a budget, average recall against the budget (Hosang et al.)."""

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
