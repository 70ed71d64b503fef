"""The empirical upper-bound AP (Borji & Iranmanesh §4; spec §3.3): the ground-truth boxes labelled by a classifier
(:mod:`evalengine.io.classifier`) are added to the store as a detection run — one detection per annotation, its box the
annotation's, its category and score the classifier's (strategy 1: the target box's label; strategy 2: the label chosen
among boxes sampled near the target, :func:`~evalengine.io.classifier.choose_labels`) — and evaluated by the COCO
protocol like any run.

Localisation is solved by construction, so the AP is the same at every IoU threshold up to one effect (spec §3.3.1):
a box labelled with another class can still match an object of that class that it overlaps at IoU >= τ."""

import json
from dataclasses import dataclass

import polars as pl

from evalengine.api import Store, open as open_store
from evalengine.evaluation.detection import Evaluation
from evalengine.evaluation.report import coco_summary
from evalengine.io.classifier import (STRATEGIES, check_classifier_table, choose_labels, read_classifier_table,
                                      upper_bound_detections)
from evalengine.metrics.summary import STAT_NAMES
from evalengine.store.build import add_run

__all__ = ["UPPER_BOUND_RUN", "UPPER_BOUND_STRATEGIES", "UpperBound", "upper_bound", "upper_bound_output"]

UPPER_BOUND_RUN = "uap"
UPPER_BOUND_STRATEGIES = STRATEGIES


@dataclass(frozen=True)
class UpperBound:
    """The upper-bound run's COCO evaluation and the classifier's top-1 accuracy per class of the true label
    (``category_id, n_objects, n_correct, accuracy`` over the labelled non-crowd annotations: crowd boxes make
    detections, as in the notebook, but are ignored by the evaluation and by the accuracy)."""

    evaluation: Evaluation
    accuracy: pl.DataFrame
    strategy: str = "s1"
    n_rows: int = 0  # rows of the classifier table (several per annotation under strategy 2)

    @property
    def run(self) -> str:
        return self.evaluation.run

    @property
    def store(self) -> Store:
        """The store with the run added."""
        return Store(self.evaluation.layout)

    def overall_accuracy(self) -> float:
        """Correct labels over labelled non-crowd annotations (NaN when there is none)."""
        n = self.accuracy.get_column("n_objects").sum()
        return self.accuracy.get_column("n_correct").sum() / n if n else float("nan")

    def per_class(self) -> pl.DataFrame:
        """The evaluation's per-class AP, AP50 and AR with the classifier's accuracy on the class (null: no object)."""
        return self.evaluation.per_class().join(self.accuracy, on="category_id", how="left", maintain_order="left")


def _accuracy(labelled: pl.DataFrame) -> pl.DataFrame:
    objects = labelled.filter(~pl.col("iscrowd"))
    return (objects.group_by(pl.col("true_category_id").alias("category_id"))
            .agg(pl.len().cast(pl.Int64).alias("n_objects"),
                 (pl.col("category_id") == pl.col("true_category_id")).sum().cast(pl.Int64).alias("n_correct"))
            .with_columns((pl.col("n_correct") / pl.col("n_objects")).alias("accuracy"))
            .sort("category_id"))


def upper_bound(store, classifier, run: str = UPPER_BOUND_RUN, unit_score: bool = False,
                allow_missing: bool = False, overwrite: bool = False, protocol=None, strategy: str = "s1",
                **schedule) -> UpperBound:
    """Add the upper-bound run built from the ``classifier`` table (a path) to ``store`` (a
    :class:`~evalengine.api.Store` or a path) as ``run`` (``overwrite`` replaces one of that name) and evaluate it
    under the COCO ``protocol`` (default: pycocotools'). ``strategy``: ``s1`` (one row per annotation), ``s2_mcb`` or
    ``s2_mfl`` (several rows per annotation, one per sampled box; see
    :func:`~evalengine.io.classifier.choose_labels`). ``unit_score`` scores every detection 1 (the paper's variant,
    which "lowers the UAP"); ``allow_missing`` accepts annotations without a row (missed). The run is tagged
    ``upper_bound=classifier-score`` (or ``unit-score``) and ``strategy=<strategy>``."""
    store = store if isinstance(store, Store) else open_store(store)
    table = read_classifier_table(classifier, strategy)
    gt = store.gt().select("gt_id", "image_id", "category_id", "iscrowd", "gt_order", "x", "y", "w", "h").collect()
    labelled = choose_labels(check_classifier_table(table, gt, store.layout.category_ids(), classifier,
                                                    allow_missing), strategy)
    tags = {"upper_bound": "unit-score" if unit_score else "classifier-score", "strategy": strategy}
    layout = add_run(store.layout, run, [upper_bound_detections(labelled, unit_score)],
                     provenance={run: str(classifier)}, overwrite=overwrite, tags=tags)
    return UpperBound(Store(layout).evaluate(protocol, run=run, **schedule), _accuracy(labelled), strategy,
                      table.height)


def upper_bound_output(result: UpperBound, as_json: bool = False, per_class: bool = False) -> str:
    """``evalengine upper-bound``: pycocotools' summary of the run and the classifier's accuracy (``per_class``: then
    the per-class table); or one JSON object ``{"run", "strategy", "stats", "stat_names", "accuracy", "n_objects",
    "per_class": {category_id: {"name", "ap", "ap50", "ar", "accuracy", "n_objects"}}}`` (−1: no ground truth; null:
    no object)."""
    table = result.per_class()
    n_objects = int(result.accuracy.get_column("n_objects").sum())
    if as_json:
        rows = {str(row["category_id"]): {key: row[key] for key in ("name", "ap", "ap50", "ar", "accuracy",
                                                                    "n_objects")}
                for row in table.iter_rows(named=True)}
        return json.dumps({"run": result.run, "strategy": result.strategy, "stats": result.evaluation.stats(),
                           "stat_names": list(STAT_NAMES),
                           "accuracy": result.overall_accuracy(), "n_objects": n_objects, "per_class": rows})
    text = (f"{coco_summary(result.evaluation)}\nclassifier accuracy {result.overall_accuracy():.4f} on "
            f"{n_objects} objects (crowd left out); run '{result.run}' of {result.evaluation.layout.root}")
    if result.strategy != "s1":
        text += f"\nlabels chosen by {result.strategy} from {result.n_rows:,} rows of the classifier table"
    if per_class:
        shown = table.select("category_id", "name", "n_objects", "accuracy", "ap", "ap50", "ar")
        with pl.Config(tbl_rows=-1, tbl_hide_dataframe_shape=True, tbl_hide_column_data_types=True):
            text += "\n" + str(shown.with_columns(pl.col("accuracy", "ap", "ap50", "ar").round(4)))
    return text
