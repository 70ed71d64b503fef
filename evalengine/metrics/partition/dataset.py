"""Dataset-level partition measures over a parameter sweep, as SEISM's ``src/scripts`` compute them (spec §5):

- per parameter (``gather_measure.m``): the mean over images; for ``fr`` and ``fop`` the mean precision and the mean
  recall and F of those (not the mean of per-image F); for ``fb`` the boundary counts summed over images;
- ODS (``general_ods.m``): the parameter of the largest dataset value (the first on ties, MATLAB ``max``; the
  smallest for the distance ``voi``);
- OIS (``general_ois.m``): each image at its own best parameter (first on ties); the mean of those values, or for
  ``fr`` / ``fop`` F of the mean precision and recall there, for ``fb`` of the counts summed there;
- AP (``general_ap.m``): the dataset (recall, precision) points of distinct recalls, interpolated linearly at
  recall 0, 0.01, …, 1; the mean over the 101 points inside the curve's recall range (sum / 100); 0 with fewer
  than two distinct recalls.
"""

import numpy as np
import polars as pl

from evalengine.metrics.partition.combine import (FB_COUNTS, PR_MEASURES, f_measure, measure_columns,
                                                  with_boundary_measures)

AP_RECALLS = np.arange(101) / 100
DISTANCES = ("voi",)  # lower is better: its optimum is the smallest value


def dataset_measures(per_image: pl.DataFrame, measures) -> pl.DataFrame:
    """One row per parameter: the dataset value of each measure (``fr``/``fop``: F of the means, and the means;
    ``fb``: of the boundary counts summed over images, spec §4.3)."""
    columns = [c for c in measure_columns(measures) if "fb" not in measures or not c.startswith("fb")]
    pooled = [pl.col(FB_COUNTS).sum()] if "fb" in measures else []
    means = per_image.group_by("parameter").agg(pl.col(columns).mean(), *pooled).sort("parameter")
    means = means.with_columns(f_measure(pl.col(f"{m}_precision"), pl.col(f"{m}_recall")).alias(m)
                               for m in measures if m in ("fr", "fop"))
    return with_boundary_measures(means) if "fb" in measures else means


def ods(dataset: pl.DataFrame, measure: str) -> dict:
    """The optimal dataset scale: ``{parameter, value}`` (and ``precision``, ``recall`` of a PR measure)."""
    values = dataset.get_column(measure).to_numpy()
    best = int(np.argmin(values) if measure in DISTANCES else np.argmax(values))
    return _point(dataset.row(best, named=True), measure)


def ois(per_image: pl.DataFrame, measure: str) -> dict:
    """The optimal image scale: ``{value}`` (and ``precision``, ``recall`` of a PR measure)."""
    at_best = (per_image.sort("image_id", "parameter")
               .group_by("image_id", maintain_order=True)
               .agg(pl.all().get(pl.col(measure).arg_min() if measure in DISTANCES else pl.col(measure).arg_max())))
    if measure not in PR_MEASURES:
        return {"value": at_best.get_column(measure).mean()}
    if measure == "fb":  # the counts pooled at each image's best parameter
        f, precision, recall = with_boundary_measures(at_best.select(pl.col(FB_COUNTS).sum())).row(0)[4:]
        return {"value": f, "precision": precision, "recall": recall}
    means = at_best.select(precision=pl.col(f"{measure}_precision").mean(), recall=pl.col(f"{measure}_recall").mean())
    precision, recall = means.row(0)
    return {"value": 2 * precision * recall / (precision + recall), "precision": precision, "recall": recall}


def average_precision(dataset: pl.DataFrame, measure: str) -> float:
    """SEISM's ``general_ap``: precision interpolated at 101 recalls over the dataset PR curve of a PR measure."""
    recall = dataset.get_column(f"{measure}_recall").to_numpy()
    precision = dataset.get_column(f"{measure}_precision").to_numpy()
    distinct, first = np.unique(recall, return_index=True)
    if distinct.size < 2:
        return 0.0
    inside = (AP_RECALLS >= distinct[0]) & (AP_RECALLS <= distinct[-1])
    return float(np.interp(AP_RECALLS[inside], distinct, precision[first]).sum() / 100)


def pr_curve(dataset: pl.DataFrame, measure: str) -> pl.DataFrame:
    """The dataset precision–recall points of a PR measure, one per parameter."""
    return dataset.select("parameter", precision=f"{measure}_precision", recall=f"{measure}_recall", f=measure)


def _point(row: dict, measure: str) -> dict:
    point = {"parameter": row["parameter"], "value": row[measure]}
    if measure in PR_MEASURES:
        point.update(precision=row[f"{measure}_precision"], recall=row[f"{measure}_recall"])
    return point
