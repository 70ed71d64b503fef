"""Borji & Iranmanesh's error diagnosis of a stored detection run (:mod:`evalengine.metrics.errors.borji`) over the
``borji`` match table: the labels of every detection and ground truth, and the COCO match table of every stage."""

from dataclasses import dataclass

import polars as pl

from evalengine.engine.planner import match
from evalengine.errors import check_option
from evalengine.evaluation.report import table
from evalengine.evaluation.run import MatchedRun
from evalengine.match.borji import DT_LABELS, GT_LABELS, STAGES, BorjiProtocol
from evalengine.metrics.ap import Accumulation, ap_table
from evalengine.metrics.errors import borji
from evalengine.store.layout import StoreLayout
from evalengine.store.shards import scan_shards


@dataclass(frozen=True, repr=False)
class BorjiEvaluation(MatchedRun):
    """A run diagnosed: ``dt_matches()`` / ``gt_matches()`` are the label tables (:data:`evalengine.schema.BORJI_DT`,
    ``BORJI_GT``), ``stage_matches()`` every stage's COCO match table, and each stage's metrics queries over it."""

    protocol: BorjiProtocol

    def stage_matches(self) -> tuple:
        """``(dt, gt)``: the COCO match tables of every stage, with the stage's code (:data:`STAGES` index) first."""
        return scan_shards(self.matches_dir / "stage_dt"), scan_shards(self.matches_dir / "stage_gt")

    def accumulate(self, stage: str) -> Accumulation:
        """pycocotools' ``accumulate`` of a stage (one of :data:`STAGES`), kept once computed."""
        check_option("stage", stage, STAGES)
        if stage not in self._cache:
            self._cache[stage] = borji.stage_accumulation(*self.stage_matches(), stage, self.layout.category_ids(),
                                                          self.protocol.coco)
        return self._cache[stage]

    def accumulations(self) -> dict:
        """``{stage: Accumulation}`` of every stage; once all are computed, their AP tables (:meth:`ap_table`) are
        kept beside the match table for the SQL view ``borji_stage_ap`` (:meth:`MatchedRun._keep_ap_table`)."""
        accumulations = {stage: self.accumulate(stage) for stage in borji.TABLE_STAGES}
        self._keep_ap_table(lambda: _stage_ap_table(accumulations))
        return accumulations

    def summary(self) -> pl.DataFrame:
        """``stage, metric, value``: pycocotools' 12-number summary of every stage (AP … ARl)."""
        return borji.stage_summary(self.accumulations())

    def table(self, metrics=("AP", "AP50")) -> pl.DataFrame:
        """The paper's Table 3: a row per metric (AP@[.50:.95], AP50, …), a column per stage (S0 = "mAP" … S4 =
        "+ Misses", then the snap-only stage)."""
        return borji.stage_table(self.summary(), metrics)

    def ap_table(self) -> pl.DataFrame:
        """``stage`` and :func:`evalengine.metrics.ap.ap_table`'s rows (per category, IoU threshold, area range,
        max dets) of every stage."""
        return _stage_ap_table(self.accumulations())

    def detections(self) -> pl.LazyFrame:
        """The detection labels with their names (``tp``, ``cls_bg``, ``loc``, ``dup``, ``ignored``)."""
        return self.dt_matches().drop("shard").with_columns(borji.label_name(pl.col("label"), DT_LABELS))

    def ground_truths(self) -> pl.LazyFrame:
        """The ground-truth labels with their names (``matched``, ``miss``, ``ignored``)."""
        return self.gt_matches().drop("shard").with_columns(borji.label_name(pl.col("label"), GT_LABELS))

    def error_counts(self) -> pl.DataFrame:
        """``area_range, error, count, fraction``: the errors per object size (the paper's pies)."""
        return borji.error_counts(self.dt_matches(), self.gt_matches(), self.protocol.coco.area_ranges)

    def label_counts(self) -> dict:
        """``{"detections": {label: n}, "ground_truths": {label: n}}`` over every label."""
        counts = {}
        for side, frame, names in (("detections", self.dt_matches(), DT_LABELS),
                                   ("ground_truths", self.gt_matches(), GT_LABELS)):
            found = dict(frame.group_by("label").agg(pl.len()).collect().iter_rows())
            counts[side] = {name: found.get(code, 0) for code, name in enumerate(names)}
        return counts

    def as_dict(self) -> dict:
        """The ``evalengine diagnose --json`` object (see the README)."""
        summary = self.summary()
        errors = self.error_counts()
        return {
            "variant": self.protocol.variant,
            "duplicates": self.protocol.duplicates,
            "background_threshold": self.protocol.background_threshold,
            "foreground_threshold": self.protocol.foreground_threshold,
            "iou_type": self.protocol.iou_type,
            "stages": list(borji.TABLE_STAGES),
            "stage_names": dict(zip(borji.TABLE_STAGES, borji.STAGE_HEADERS)),
            "summary": {stage: dict(summary.filter(pl.col("stage") == stage).select("metric", "value").iter_rows())
                        for stage in borji.TABLE_STAGES},
            "errors": {area: dict(errors.filter(pl.col("area_range") == area).select("error", "count").iter_rows())
                       for area in errors.get_column("area_range").unique(maintain_order=True)},
            "labels": self.label_counts(),
        }


def _stage_ap_table(accumulations: dict) -> pl.DataFrame:
    return pl.concat([ap_table(acc).select(pl.lit(stage).alias("stage"), pl.all())
                      for stage, acc in accumulations.items()])


def diagnose_borji(layout: StoreLayout, run: str, protocol: BorjiProtocol | None = None,
                   **schedule) -> BorjiEvaluation:
    """Match ``run``'s ``borji`` table (once; kept in the store) and diagnose it."""
    protocol = protocol or BorjiProtocol()
    return BorjiEvaluation(layout, run, protocol, match(layout, run, protocol, **schedule))


def borji_summary(evaluation: BorjiEvaluation) -> str:
    """The printed diagnosis: Table 3's row under AP@[.50:.95] and AP50 (percent), then the errors per size."""
    p = evaluation.protocol
    masks = f", iou type {p.iou_type}" if p.iou_type != "bbox" else ""
    stages = evaluation.table().with_columns(pl.col(s).mul(100).round(1) for s in borji.TABLE_STAGES)
    stages = stages.rename(dict(zip(borji.TABLE_STAGES, borji.STAGE_HEADERS)))
    errors = evaluation.error_counts().with_columns(
        pl.format("{} ({}%)", "count", (pl.col("fraction") * 100).round(1).fill_null(0)).alias("cell"),
        pl.col("error").replace_strict(dict(zip(borji.ERRORS, borji.ERROR_HEADERS))))
    by_size = errors.pivot("area_range", index="error", values="cell")
    return "\n".join([
        f"Borji & Iranmanesh error diagnosis ({p.variant}, duplicates {p.duplicates}{masks}; background IoU <= "
        f"{p.background_threshold:g}, foreground IoU >= {p.foreground_threshold:g}): AP in percent",
        table(stages), "", "errors by object size: count (share of the size's errors)", table(by_size)])
