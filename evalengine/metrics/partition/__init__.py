"""Partition measures (Pont-Tuset & Marques, TPAMI 2015; SEISM's code) as queries over the contingency table
(:mod:`evalengine.match.partitions`): region-based (``region``), pairs of pixels (``pairs``; bipartite matching is solved at match time,
:mod:`evalengine.match.partition_matching`), objects and parts (``objects``), the multi-ground-truth combination per image (``combine``), dataset
level, ODS, OIS and AP (``dataset``) and the meta-measures (``meta``).
"""

import polars as pl

from evalengine.match.partitions import PAIR  # noqa: F401 - one contingency table: a partition against one annotator

IMAGE = ["image_id", "parameter"]  # one partition against all its image's annotators


def with_marginals(cells: pl.LazyFrame) -> pl.LazyFrame:
    """The cells with their rows' and columns' areas ``a`` (machine region), ``b`` (annotator region) and the
    pair's pixel count ``total`` (spec §0)."""
    return cells.with_columns(a=pl.col("n").sum().over([*PAIR, "seg_region"]),
                              b=pl.col("n").sum().over([*PAIR, "gt_region"]),
                              total=pl.col("n").sum().over(PAIR))
