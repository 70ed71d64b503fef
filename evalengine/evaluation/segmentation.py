"""Segmentation (partition) evaluation of a stored run: the contingency match table and, for ``fb``, the boundary
table (one engine task per shard each), the per-image measures computed shard by shard (memory bounded by the
shard), and the dataset level: the value at each parameter, ODS, OIS, AP and PR curves
(:mod:`evalengine.metrics.partition`)."""

from dataclasses import dataclass, field
from functools import cached_property

import polars as pl

from evalengine.engine.planner import match
from evalengine.match.partition_boundaries import PartitionBoundaryProtocol
from evalengine.match.partitions import PartitionProtocol
from evalengine.metrics.partition import IMAGE
from evalengine.metrics.partition.combine import PR_MEASURES, check_measures, image_measures
from evalengine.metrics.partition.dataset import average_precision, dataset_measures, ods, ois, pr_curve
from evalengine.metrics.partition.objects import ObjectsAndParts
from evalengine.store.paths import shard_file
from evalengine.store.shards import scan_shards


@dataclass
class SegmentationEvaluation:
    """The measures of partition run ``run`` of a store (``layout``)."""

    layout: object
    run: str
    measures: tuple = None
    objects: ObjectsAndParts = ObjectsAndParts()
    schedule: dict = field(default_factory=dict)
    keep_alive: list = field(default_factory=list)  # a temporary store this evaluation reads
    boundary: PartitionBoundaryProtocol = PartitionBoundaryProtocol()  # fb's kernel parameters

    def __post_init__(self):
        self.measures = check_measures(self.measures)
        self.match_dir = match(self.layout, self.run, PartitionProtocol(self.objects.area_percentile),
                               **self.schedule)
        self.boundary_dir = (match(self.layout, self.run, self.boundary, **self.schedule)
                             if "fb" in self.measures else None)

    def contingency(self) -> pl.LazyFrame:
        """The partition match table: the non-zero cells of every (image, parameter, annotator)."""
        return scan_shards(self.match_dir / "contingency")

    @cached_property
    def per_image(self) -> pl.DataFrame:
        """One row per image and parameter: ``image_id``, ``file_name`` (the label map's stem), ``parameter`` and
        the measures' columns (``fr``, ``fr_precision``, ``fr_recall``, …; with ``fb`` its four counts)."""
        shards = [image_measures(pl.read_parquet(str(shard_file(self.match_dir / "contingency", k))),
                                 self.measures, self.objects, self._boundary_shard(k),
                                 pl.read_parquet(str(shard_file(self.match_dir / "pairs", k))))
                  for k in range(self.layout.n_shards)]
        names = self.layout.read("images", ["image_id", "file_name"])
        return (pl.concat(shards).join(names, on="image_id", how="left")
                .select("image_id", "file_name", pl.exclude("image_id", "file_name")).sort(IMAGE))

    def _boundary_shard(self, k: int) -> pl.DataFrame | None:
        return pl.read_parquet(str(shard_file(self.boundary_dir / "boundary", k))) if self.boundary_dir else None

    @cached_property
    def dataset(self) -> pl.DataFrame:
        """One row per parameter: every measure at the dataset level (mean; F of the mean P and R for fr, fop; fb of
        the pooled counts)."""
        return dataset_measures(self.per_image, self.measures)

    def summary(self) -> pl.DataFrame:
        """Per measure: ODS parameter and value, OIS value, and for the PR measures their P/R at ODS and OIS, and AP."""
        rows = []
        for measure in self.measures:
            best, per_image_best = ods(self.dataset, measure), ois(self.per_image, measure)
            rows.append({"measure": measure, "ods_parameter": best["parameter"], "ods": best["value"],
                         "ods_precision": best.get("precision"), "ods_recall": best.get("recall"),
                         "ois": per_image_best["value"], "ois_precision": per_image_best.get("precision"),
                         "ois_recall": per_image_best.get("recall"),
                         "ap": average_precision(self.dataset, measure) if measure in PR_MEASURES else None})
        return pl.DataFrame(rows, schema={"measure": pl.String, "ods_parameter": pl.Float64, "ods": pl.Float64,
                                          "ods_precision": pl.Float64, "ods_recall": pl.Float64,
                                          "ois": pl.Float64, "ois_precision": pl.Float64, "ois_recall": pl.Float64,
                                          "ap": pl.Float64})

    def pr_curve(self, measure: str = "fop") -> pl.DataFrame:
        """The dataset precision–recall curve of ``fr``, ``fop`` or ``fb`` over the run's parameters."""
        return pr_curve(self.dataset, measure)
