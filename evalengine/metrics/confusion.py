"""Confusion matrices in the COCO matching convention: group-bys over the ``confusion`` table, one row per counted
object (:mod:`evalengine.match.confusion` says which cell each object falls in, and why).

Rows are ground-truth classes, columns predicted classes, background last (null ``category_id``). Rows sum to each
class's regular ground truths, columns to its kept, non-ignored detections; the (background, background) cell is 0.
The queries stream over the table's shards: memory does not grow with the run.
"""

import numpy as np
import polars as pl


def _labels(category_ids) -> pl.DataFrame:
    return pl.DataFrame({"category_id": [*category_ids, None]}, schema={"category_id": pl.Int64})


def confusion_matrix(assignments: pl.LazyFrame, category_ids) -> pl.DataFrame:
    """``gt_category_id, dt_category_id, count, fraction``: every cell of the (K + 1)² matrix (background: null),
    rows in ``category_ids`` order then background; ``fraction`` is the count over its row's sum (null for an empty
    row)."""
    labels = _labels(category_ids).with_row_index("order")
    grid = (labels.rename({"category_id": "gt_category_id", "order": "row"})
            .join(labels.rename({"category_id": "dt_category_id", "order": "column"}), how="cross"))
    counts = assignments.group_by("gt_category_id", "dt_category_id").agg(pl.len().alias("count")).collect()
    return (grid.join(counts, on=["gt_category_id", "dt_category_id"], how="left", nulls_equal=True)
            .with_columns(pl.col("count").fill_null(0).cast(pl.Int64))
            .with_columns(fraction=pl.col("count") / pl.col("count").sum().over("row"))
            .with_columns(pl.when(pl.col("fraction").is_nan()).then(None).otherwise("fraction").alias("fraction"))
            .sort("row", "column").drop("row", "column"))


def per_image_confusion(assignments: pl.LazyFrame) -> pl.DataFrame:
    """``image_id, gt_category_id, dt_category_id, count``: the non-zero cells of each image's matrix."""
    return (assignments.group_by("image_id", "gt_category_id", "dt_category_id")
            .agg(pl.len().alias("count").cast(pl.Int64))
            .sort("image_id", "gt_category_id", "dt_category_id", nulls_last=True).collect())


def matrix_array(matrix: pl.DataFrame, normalize: bool = False) -> np.ndarray:
    """The (K + 1) × (K + 1) array of :func:`confusion_matrix` (rows: ground truth; last: background)."""
    n = int(round(np.sqrt(matrix.height)))
    values = matrix.get_column("fraction" if normalize else "count")
    return (values.fill_null(0.0) if normalize else values).to_numpy().reshape(n, n)
