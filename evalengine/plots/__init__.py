"""Figures people would rather look at than read (matplotlib, an optional extra: ``evalengine[plot]``).

Each function takes what the metrics return and gives back a ``matplotlib.figure.Figure``; one module per family.
"""

from evalengine.plots.density import box_density
from evalengine.plots.detection import ap_by_size, lrp_curves, pr_curves, pr_operating_points, recall_iou, run_differences
from evalengine.plots.diagnosis import analyze_pr, borji_diagnosis, confusion_heatmap, tide_errors
from evalengine.plots.figure import close, figure_formats
from evalengine.plots.proposals import achievable_by_budget, ar_by_budget, best_quality_histogram, proposal_recall_iou

__all__ = ["achievable_by_budget", "analyze_pr", "ap_by_size", "ar_by_budget", "best_quality_histogram", "borji_diagnosis", "box_density", "close", "confusion_heatmap", "figure_formats", "lrp_curves",
           "pr_curves", "pr_operating_points", "proposal_recall_iou", "recall_iou", "run_differences", "tide_errors"]
