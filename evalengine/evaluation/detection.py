"""A detection run matched under the COCO protocol: every COCO metric as a query over its match table, for the
whole run or a slice of it (pycocotools ``params.imgIds`` / ``params.catIds``)."""

from dataclasses import dataclass, replace
from functools import cached_property

import polars as pl

from evalengine.evaluation.confusion import ConfusionMetrics
from evalengine.evaluation.run import MatchedRun
from evalengine.evaluation.thresholds import ScoreThresholdMetrics
from evalengine.match.coco import CocoProtocol
from evalengine.metrics import ap as ap_metrics
from evalengine.metrics import summary as summary_metrics
from evalengine.metrics.counts import per_image_counts
from evalengine.metrics.curve_counts import write_curve_counts
from evalengine.store.paths import CURVE_FILE


@dataclass(frozen=True, repr=False)
class Evaluation(MatchedRun, ScoreThresholdMetrics, ConfusionMetrics):
    """A matched run: the match table and every COCO metric as a query over it.

    ``image_subset`` / ``category_subset`` restrict it to a slice: pycocotools matches every image and category on its
    own, so a slice is only a filter of the accumulation, exact without matching again."""

    protocol: CocoProtocol
    image_subset: tuple | None = None
    category_subset: tuple | None = None

    def slice(self, image_ids=None, category_ids=None) -> "Evaluation":
        """The same run restricted to these images and categories (None: all)."""
        return replace(self, image_subset=None if image_ids is None else tuple(image_ids),
                       category_subset=None if category_ids is None else tuple(sorted(category_ids)), _cache={})

    @cached_property
    def category_ids(self) -> list:
        """The evaluated categories (pycocotools ``params.catIds``)."""
        return list(self.category_subset) if self.category_subset is not None else self.layout.category_ids()

    def accumulate(self, want_curve: bool = False, on_batch_done=None) -> ap_metrics.Accumulation:
        """pycocotools ``accumulate`` ([K, A, M, T, R] arrays); kept for each ``want_curve``."""
        key = bool(want_curve)
        if key not in self._cache:
            self._cache[key] = ap_metrics.accumulate(
                self.dt_matches(partners=False), self.gt_matches(), self.category_ids, self.protocol,
                want_curve=want_curve, on_batch_done=on_batch_done, image_ids=self.image_subset)
            self._store_ap_table(self._cache[key])
        return self._cache[key]

    def ap_table(self) -> pl.DataFrame:
        """AP and recall per (category, IoU threshold, area range, max dets), −1 where undefined."""
        return ap_metrics.ap_table(self.accumulate())

    def _store_ap_table(self, acc: ap_metrics.Accumulation) -> None:
        """The whole run's :func:`~evalengine.metrics.ap.ap_table` kept for the SQL views (:meth:`_keep_ap_table`);
        a slice keeps none."""
        if self.image_subset is None and self.category_subset is None:
            self._keep_ap_table(lambda: ap_metrics.ap_table(acc))
            self._keep_table(CURVE_FILE, lambda path: write_curve_counts(  # the pr_curve view's counts
                path, self.dt_matches(), self.gt_matches(), self.protocol, self.category_ids))

    def precision_recall(self) -> pl.DataFrame:
        """Interpolated precision and score at every recall threshold (pycocotools ``eval['precision']``)."""
        return ap_metrics.precision_recall_table(self.accumulate(want_curve=True))

    def stats(self) -> list:
        """pycocotools ``COCOeval.stats``."""
        return summary_metrics.summary_stats(self.accumulate())

    def summary(self) -> pl.DataFrame:
        """The 12 numbers as ``metric, value`` rows."""
        return summary_metrics.summary_frame(self.accumulate())

    def described(self) -> str:
        sliced = [f"{len(ids)} {what}" for what, ids in (("images", self.image_subset),
                                                          ("categories", self.category_subset)) if ids is not None]
        return super().described() + (f", slice of {' and '.join(sliced)}" if sliced else "")

    def _repr_html_(self) -> str:
        """The one line and the summary (:meth:`summary`) as a table."""
        return super()._repr_html_() + self.summary()._repr_html_()

    def class_metrics(self) -> pl.DataFrame:
        """AP, AP50 and AR per category (area 'all', last max dets), −1 where undefined."""
        return summary_metrics.per_class_frame(self.accumulate())

    def per_class(self) -> pl.DataFrame:
        """:meth:`class_metrics` joined to the category names."""
        table = self.class_metrics()
        if not self.protocol.use_cats:
            return table
        return table.join(self.layout.read("categories"), on="category_id", how="left", maintain_order="left")

    def to_dict(self, prefix: str | None = None, per_class: bool = True) -> dict:
        """Flat results for loggers: ``{"bbox/AP": …, "bbox/AP50": …, …, "bbox/AP/<class name>": …}`` (the summary's
        names; per category its AP, AP50 and AR as :meth:`per_class`, −1 where it has no ground truth). ``prefix``:
        the iou type unless given ("" for none)."""
        prefix = self.protocol.iou_type if prefix is None else prefix
        key = f"{prefix}/" if prefix else ""
        out = {f"{key}{name}": float(value) for name, value in zip(summary_metrics.stat_names(self.protocol),
                                                                    self.stats())}
        if per_class and self.protocol.use_cats:
            for row in self.per_class().iter_rows(named=True):
                name = row["name"] if row["name"] is not None else str(row["category_id"])
                out.update({f"{key}{metric}/{name}": float(row[column])
                            for metric, column in (("AP", "ap"), ("AP50", "ap50"), ("AR", "ar"))})
        return out

    def per_image_counts(self, iou_threshold: float = 0.5, area_range: str = "all", max_dets: int | None = None):
        """TP, FP and FN per image (see :func:`evalengine.metrics.counts.per_image_counts`)."""
        return per_image_counts(self.dt_matches(partners=False), self.gt_matches(), self.layout.scan("images"), self.protocol, iou_threshold=iou_threshold, area_range=area_range, max_dets=max_dets)


def compare(evaluations: dict, categories: pl.DataFrame, overall: bool = False) -> pl.DataFrame:
    """AP@[.50:.95] (max dets 100) per category and area range for each run (``{run: Evaluation}``), and each run's
    difference to the first: one row per (category, area range), columns ``ap_<run>`` and ``diff_<run>``. ``overall``
    adds per area range a row with a null category (named ``(all)``): the summary's AP, the mean over every defined
    (category, IoU threshold) as pycocotools ``summarize``. The rows are sorted by category and area range, or
    with ``overall`` the overall rows first, then by the largest |difference| of the second run."""
    runs = list(evaluations)
    tables = []
    for run, evaluation in evaluations.items():
        defined = evaluation.ap_table().filter((pl.col("max_dets") == 100) & (pl.col("ap") > -1))
        table = defined.group_by("category_id", "area_range").agg(pl.col("ap").mean().alias(f"ap_{run}"))
        if overall:
            table = pl.concat([table, defined.group_by("area_range").agg(
                pl.lit(None, table.schema["category_id"]).alias("category_id"), pl.col("ap").mean().alias(f"ap_{run}"))
                .select(table.columns)])
        tables.append(table)
    joined = tables[0]
    for table in tables[1:]:
        joined = joined.join(table, on=["category_id", "area_range"], how="full", coalesce=True, nulls_equal=True)
    base = f"ap_{runs[0]}"
    joined = (joined.with_columns([(pl.col(f"ap_{run}") - pl.col(base)).alias(f"diff_{run}") for run in runs[1:]])
              .join(categories.select("category_id", "name"), on="category_id", how="left")
              .sort("category_id", "area_range", nulls_last=False))
    if not overall:
        return joined
    joined = joined.with_columns(pl.when(pl.col("category_id").is_null()).then(pl.lit("(all)"))
                                 .otherwise(pl.col("name")).alias("name"))
    order = [pl.col("category_id").is_not_null()] + ([pl.col(f"diff_{runs[1]}").abs()] if len(runs) > 1 else [])
    return joined.sort(order, descending=[False, True][:len(order)], nulls_last=True, maintain_order=True)
