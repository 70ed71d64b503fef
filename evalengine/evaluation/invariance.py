"""Invariance tables (Borji & Iranmanesh §6; spec §3.5 "Engine tabulation"): the COCO AP numbers of the runs tagged
with their perturbation, per model, size and class, as one long table and the paper's pivots (Tables 4–6: rows
models, columns perturbation × metric); and each object's outcome paired across the perturbations (spec: within-object
comparisons, which the paper lacks).

- A run enters when it has a ``perturbation`` tag (``add-run --tag perturbation=blur``; a perturbed proposal run has
  its kind as one); its ``level`` tag is kept beside it; its model is its ``model`` tag, else its ``reference`` run,
  else its name. Runs without a perturbation tag are left out (and listed).
- Detection runs are evaluated by the COCO protocol against their store's ground truth. A perturbation that moves the
  ground truth (vertical flip, crop, white background …) has a store of its own, so several stores are read as one
  table, each run against its own ground truth. Perturbed proposal runs (the repeatability machinery) are measured by
  their repeatability against their reference run (Hosang et al. §3: top 1000, exact, empty bins skipped), as
  metric ``repeatability``: their boxes are in the perturbed images' frame.
- Objects are paired across runs by ``source_ann_id`` when a store's ground truth has that column (the annotation a
  variant's object comes from, spec §5.1), else by annotation id: the stores of one dataset's variants must keep them.
"""

from dataclasses import dataclass, field

import polars as pl

from evalengine.engine.planner import match
from evalengine.errors import InputError
from evalengine.evaluation.detection import Evaluation
from evalengine.evaluation.proposals import repeatability
from evalengine.match.coco import CocoProtocol
from evalengine.match.repeatability import RepeatabilityProtocol
from evalengine.metrics.invariance import INVARIANCE_METRICS, METRIC_SIZES, class_metrics, object_outcomes
from evalengine.store.layout import StoreLayout
from evalengine.store.tags import run_tags

RUN_COLUMNS = {"store": pl.String, "model": pl.String, "perturbation": pl.String, "level": pl.String,
               "run": pl.String}
VALUE_SCHEMA = {"metric": pl.String, "size": pl.String, "category_id": pl.Int64, "value": pl.Float64}
METRICS_SCHEMA = {**RUN_COLUMNS, **VALUE_SCHEMA}
SOURCE_ID = "source_ann_id"  # the ground truth's column that pairs the objects of a dataset's variants


@dataclass(frozen=True)
class TaggedRun:
    """A run of a store with its perturbation, level, model and (proposal runs) reference run."""

    layout: StoreLayout
    run: str
    kind: str  # "detections" or "proposals"
    model: str
    perturbation: str
    level: str | None
    reference: str | None

    @property
    def label(self) -> str:
        """The perturbation and its level, as the repeatability machinery writes them (``scale:0.5``)."""
        return self.perturbation if self.level is None else f"{self.perturbation}:{self.level}"


def _run_columns(run: TaggedRun) -> dict:
    """The columns that name a run in every table of :class:`Invariance`, as literals."""
    values = {"store": str(run.layout.root), "model": run.model, "perturbation": run.perturbation,
              "level": run.level, "run": run.run}
    return {name: pl.lit(value, RUN_COLUMNS[name]) for name, value in values.items()}


# :attr:`TaggedRun.label` of a table's rows
LABEL = (pl.when(pl.col("level").is_null()).then(pl.col("perturbation"))
         .otherwise(pl.col("perturbation") + ":" + pl.col("level")))


def tagged_runs(layouts) -> tuple:
    """``(tagged, untagged)``: every run of the stores with a ``perturbation`` tag, in the order the runs were added
    (store by store), and ``store:run`` of the others."""
    tagged, untagged = [], []
    for layout in layouts:
        for run, own in run_tags(layout).items():  # in the order the runs were added
            if run not in layout.runs and run not in layout.proposal_runs:
                continue
            if "perturbation" not in own:
                untagged.append(f"{layout.root}:{run}")
                continue
            kind = "detections" if run in layout.runs else "proposals"
            model = own.get("model") or own.get("reference") or run
            tagged.append(TaggedRun(layout, run, kind, model, own["perturbation"], own.get("level"),
                                    own.get("reference")))
    return tagged, untagged


def _chosen(runs: list, attribute: str, wanted) -> list:
    """The runs whose ``attribute`` is one of ``wanted`` (None: all); asking for an unknown one is a located error."""
    if wanted is None:
        return runs
    known = list(dict.fromkeys(getattr(run, attribute) for run in runs))
    unknown = [value for value in wanted if value not in known]
    if unknown:
        raise InputError(f"{attribute} {unknown[0]!r} is not a tag of any run (known: {', '.join(known)})")
    return [run for run in runs if getattr(run, attribute) in wanted]


def select_runs(layouts, perturbations=None, models=None) -> tuple:
    """``(runs, untagged)``: the tagged runs of ``layouts`` with one of ``perturbations`` and ``models`` (None: any),
    each (model, perturbation, level) once."""
    runs, untagged = tagged_runs(layouts)
    if not runs:
        listed = ", ".join(untagged) or "none"
        raise InputError(f"{', '.join(str(layout.root) for layout in layouts)}: no run has a 'perturbation' tag "
                         f"(runs: {listed}); tag them: evalengine add-run STORE --run R --dt FILE "
                         "--tag perturbation=NAME --tag model=NAME")
    runs = _chosen(_chosen(runs, "perturbation", perturbations), "model", models)
    seen = {}
    for run in runs:
        key = (run.model, run.label)
        if key in seen:
            first = seen[key]
            raise InputError(f"runs {first.layout.root}:{first.run} and {run.layout.root}:{run.run} are both model "
                             f"'{run.model}' under perturbation '{run.label}'; tag one of them otherwise")
        seen[key] = run
    return runs, untagged


@dataclass(frozen=True)
class Invariance:
    """The tagged runs of one or more stores, evaluated on demand (matching each once; the tables stay in the stores).
    ``schedule``: ``scheduler``, ``address``, ``workers``."""

    runs: tuple
    untagged: tuple = ()
    schedule: dict = field(default_factory=dict)
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def evaluation(self, run: TaggedRun) -> Evaluation:
        """The COCO evaluation of a tagged detection run."""
        key = (str(run.layout.root), run.run)
        if key not in self._cache:
            protocol = CocoProtocol()
            self._cache[key] = Evaluation(run.layout, run.run, protocol,
                                          match(run.layout, run.run, protocol, **self.schedule))
        return self._cache[key]

    def _rows(self, run: TaggedRun) -> pl.DataFrame:
        """The run's rows of :meth:`metrics` (``metric, size, category_id, value``)."""
        if run.kind == "proposals":
            folder = match(run.layout, run.run, RepeatabilityProtocol(reference=run.reference), **self.schedule)
            value = repeatability(run.layout, [(run.run, folder)]).get_column("repeatability")[0]
            return pl.DataFrame({"metric": "repeatability", "size": "all", "category_id": None, "value": value},
                                schema=VALUE_SCHEMA)
        evaluation = self.evaluation(run)
        means = pl.DataFrame({"metric": INVARIANCE_METRICS, "size": [METRIC_SIZES[m] for m in INVARIANCE_METRICS],
                              "category_id": None, "value": evaluation.stats()[:len(INVARIANCE_METRICS)]},
                             schema=VALUE_SCHEMA)
        return pl.concat([means, class_metrics(evaluation.ap_table(), evaluation.protocol.max_dets)])

    def metrics(self) -> pl.DataFrame:
        """The long table: ``store, model, perturbation, level, run, metric, size, category_id, value`` — metric one
        of AP, AP50, AP75, APs, APm, APl (size: all, all, all, small, medium, large; category_id null: pycocotools'
        class mean, else that class; −1 where undefined), or ``repeatability`` for a perturbed proposal run."""
        if "metrics" not in self._cache:
            frames = [self._rows(run).with_columns(**_run_columns(run)) for run in self.runs]
            self._cache["metrics"] = pl.concat(frames).select(list(METRICS_SCHEMA))
        return self._cache["metrics"]

    def table(self, metrics=INVARIANCE_METRICS, category_id: int | None = None) -> pl.DataFrame:
        """A pivot of the paper's shape: one row per model, one column per perturbation (with its level) and metric
        (``"blur AP50"``), for the class mean or one class; perturbations and models in the order of the runs."""
        order = {label: i for i, label in enumerate(dict.fromkeys(run.label for run in self.runs))}
        models = {model: i for i, model in enumerate(dict.fromkeys(run.model for run in self.runs))}
        wanted = pl.col("category_id").is_null() if category_id is None else pl.col("category_id") == category_id
        rows = (self.metrics().filter(wanted & pl.col("metric").is_in(list(metrics)))
                .with_columns(LABEL.alias("label"))
                .sort(pl.col("label").replace_strict(order), pl.col("metric").replace_strict(
                    {metric: i for i, metric in enumerate(metrics)}), pl.col("model").replace_strict(models))
                .with_columns((pl.col("label") + " " + pl.col("metric")).alias("column")))
        pivot = rows.pivot(on="column", index="model", values="value")
        return pivot.sort(pl.col("model").replace_strict(models))

    def objects(self, iou_threshold: float = 0.5) -> pl.DataFrame:
        """Each regular object of each tagged detection run's ground truth: ``store, model, perturbation, level, run,
        object_id, image_id, gt_id, category_id, detected, score, iou`` at ``iou_threshold`` (``object_id``: the
        ground truth's ``source_ann_id`` where it has one, else ``gt_id``), run by run, by image and id; an object
        paired across runs must keep its class."""
        frames = []
        for run in (run for run in self.runs if run.kind == "detections"):
            evaluation = self.evaluation(run)
            gt = run.layout.scan_gt()
            source = (pl.coalesce(pl.col(SOURCE_ID).cast(pl.Int64), "gt_id") if SOURCE_ID in gt.collect_schema().names()
                      else pl.col("gt_id"))
            ids = gt.select("gt_id", source.alias("object_id"))
            outcomes = (object_outcomes(evaluation.dt_matches(), evaluation.gt_matches(), evaluation.protocol,
                                        iou_threshold).join(ids, on="gt_id", how="left").sort("image_id", "gt_id")
                        .collect())
            twice = outcomes.filter(pl.col("object_id").is_duplicated()).get_column("object_id")
            if twice.len():
                raise InputError(f"{run.layout.root}: object {twice[0]} ({SOURCE_ID}) is more than one annotation; "
                                 "objects cannot be paired across runs")
            frames.append(outcomes.with_columns(**_run_columns(run)))
        if not frames:
            raise InputError("no tagged detection run: per-object outcomes come from detection runs")
        table = pl.concat(frames).select(*RUN_COLUMNS, "object_id", "image_id", "gt_id", "category_id", "detected",
                                         "score", "iou")
        classes = table.group_by("object_id").agg(pl.col("category_id").n_unique().alias("n"),
                                                  pl.col("store").unique().sort().alias("stores"))
        clash = classes.filter(pl.col("n") > 1)
        if clash.height:
            first = clash.sort("object_id").row(0, named=True)
            raise InputError(f"object {first['object_id']} has different categories in {', '.join(first['stores'])}: "
                             f"their ground truths do not pair (give the variants a '{SOURCE_ID}' column)")
        return table

    def object_changes(self, baseline: str, iou_threshold: float = 0.5) -> pl.DataFrame:
        """Per model and perturbation, the objects paired with the model's ``baseline`` run (a perturbation label):
        ``n_objects``, detected under the baseline, under the perturbation, ``lost`` (baseline only) and ``gained``."""
        labels = {run.label for run in self.runs if run.kind == "detections"}
        if baseline not in labels:
            raise InputError(f"baseline perturbation {baseline!r} is not a tag of any detection run "
                             f"(known: {', '.join(sorted(labels)) or 'none'})")
        objects = self.objects(iou_threshold).with_columns(LABEL.alias("label"))
        base = objects.filter(pl.col("label") == baseline).select("model", "object_id",
                                                                  pl.col("detected").alias("base"))
        paired = objects.filter(pl.col("label") != baseline).join(base, on=["model", "object_id"])
        return (paired.group_by("model", "label", maintain_order=True)
                .agg(pl.len().cast(pl.Int64).alias("n_objects"),
                     pl.col("base").sum().cast(pl.Int64).alias("detected_baseline"),
                     pl.col("detected").sum().cast(pl.Int64).alias("detected"),
                     (pl.col("base") & ~pl.col("detected")).sum().cast(pl.Int64).alias("lost"),
                     (~pl.col("base") & pl.col("detected")).sum().cast(pl.Int64).alias("gained"))
                .rename({"label": "perturbation"}))
