"""The partition boundary table (Fb, spec §4.3): per (image, parameter) the four counts of
:func:`evalengine.geometry.boundary_pr.boundary_counts` of a machine partition against all its image's annotators.

Fb is a per-image matching (``correspondPixels``), not an aggregation of the contingency table, so it is a protocol
of its own: its table is made only when ``fb`` is asked for, one engine task per shard, from the stored runs decoded
back to label maps one image at a time (memory bounded by the shard's runs and one image's maps).
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import check_option
from evalengine.geometry.boundary_pr import GRIDS, boundary_counts
from evalengine.geometry.correspond import MAX_DIST, OUTLIERS
from evalengine.match.partitions import PartitionRunProtocol, _sorted, group_bounds
from evalengine.match.protocol import column_array


@dataclass(frozen=True)
class PartitionBoundaryProtocol(PartitionRunProtocol):
    """Fb's counts of a partition run (the kernel's parameters: ``grid``, ``outliers``, ``tolerance`` as a fraction
    of the diagonal, and ``seed`` of the reference's random outlier graph, annotator ``k`` drawing ``seed + k``)."""

    name: ClassVar[str] = "partition_boundaries"
    sides: ClassVar[tuple] = ("boundary",)
    grid: str = "pixel"
    outliers: str = "bsds"
    tolerance: float = MAX_DIST
    seed: int = 0

    def __post_init__(self):
        check_option("fb grid", self.grid, GRIDS)
        check_option("fb outliers", self.outliers, OUTLIERS)

    def shard_inputs(self, layout, run: str) -> tuple:
        inputs, _ = super().shard_inputs(layout, run)
        sizes = layout.read("images", ["image_id", "height", "width"])
        return inputs, {"sizes": dict(zip(sizes["image_id"].to_list(), zip(sizes["height"].to_list(),
                                                                           sizes["width"].to_list())))}

    def match_shard(self, tables: dict, context: dict) -> dict:
        return {"boundary": self.boundary_table(tables["seg"], tables["gt"], context["sizes"])}

    def boundary_table(self, seg: pl.DataFrame, gt: pl.DataFrame, sizes: dict) -> pl.DataFrame:
        """``schema.PARTITION_BOUNDARY`` rows of every machine partition of ``seg`` against its image's annotators
        in ``gt`` (run tables of one shard); ``sizes`` maps an image id to its ``(height, width)``."""
        seg = _sorted(seg, ["image_id", "parameter", "start"])
        gt = _sorted(gt, ["image_id", "annotator", "start"])
        seg_groups, gt_groups = group_bounds(seg, ["image_id", "parameter"]), group_bounds(gt, ["image_id"])
        seg_image, gt_image = column_array(seg, "image_id"), column_array(gt, "image_id")
        parameters = column_array(seg, "parameter", "float64")
        gt_first = dict(zip(gt_image[gt_groups[:-1]].tolist(), range(gt_groups.size - 1)))
        rows, counts = [], []
        image, truths = None, None
        for s in range(seg_groups.size - 1):  # one kernel call per partition: the matching dominates
            first = seg_groups[s]
            if seg_image[first] != image:
                image = seg_image[first]
                g = gt_first[image]
                truths = decode_partitions(gt[gt_groups[g]:gt_groups[g + 1]], "annotator", sizes[image])
            pred = decode_partitions(seg[first:seg_groups[s + 1]], "parameter", sizes[image])[0]
            rows.append(first)
            counts.append(boundary_counts(pred, truths, self.tolerance, self.grid, self.outliers, self.seed))
        counts = np.array(counts, np.int64).reshape(-1, 4)
        rows = np.array(rows, np.int64)
        return pl.DataFrame({"image_id": seg_image[rows], "parameter": parameters[rows],
                             **{name: counts[:, c] for c, name in enumerate(list(schema.PARTITION_BOUNDARY)[2:])}},
                            schema=schema.PARTITION_BOUNDARY)


def decode_partitions(runs: pl.DataFrame, key: str, size: tuple) -> list:
    """The label maps (``size`` = (height, width), void -1) of the column-major runs of one image, one per value
    of ``key`` in their order."""
    height, width = size
    bounds = group_bounds(runs, [key])
    labels, lengths = column_array(runs, "label", "int32"), column_array(runs, "length")
    return [np.repeat(labels[a:b], lengths[a:b]).reshape(width, height).T for a, b in zip(bounds[:-1], bounds[1:])]
