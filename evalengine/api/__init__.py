"""What a notebook imports: open or build a store, add runs, evaluate a run under a protocol and get back an
evaluation whose metrics are Polars frames (:mod:`evalengine.evaluation`)."""

from __future__ import annotations  # the proposal, SQL and baseline types load with the methods that use them

import importlib
import shutil
import sys
import tempfile
import types
import warnings
import weakref
from dataclasses import dataclass, replace
from pathlib import Path

import polars as pl

from evalengine import schema
from evalengine.api.lazy import LAZY, LAZY_NAMES, MODULE_NAMES, SOURCE_NAME
from evalengine.engine.memory import keep_freed_memory
from evalengine.engine.planner import match
from evalengine.engine.runner import SCHEDULERS
from evalengine.errors import InputWarning
from evalengine.evaluation import report
from evalengine.evaluation.detection import Evaluation, compare
from evalengine.io.coco import CocoDataset, read_coco_gt
from evalengine.io.detections import count_rows, estimate_rows, iter_detections, prefetch
from evalengine.io.memory import as_files, describe
from evalengine.match.coco import COCO_AREA_RANGES, COCO_IOU_THRESHOLDS, COCO_MAX_DETS, IOU_TYPES, CocoProtocol
from evalengine.progress import Phases
from evalengine.geometry.boxes import corner_columns
from evalengine.store.build import add_proposal_run, add_run, create_store, replaced_store
from evalengine.store.commit import replace_file
from evalengine.store.layout import Shown, StoreLayout, open_layout
from evalengine.store.location import location
from evalengine.store.memory import memory_store
from evalengine.store.paths import NAME_RULE, check_name
from evalengine.store.ranking import ORDERINGS, ProposalOrder, ProposalRun
from evalengine.store.shards import scan_shards
from evalengine.store.tags import check_tags, parse_tags
from evalengine.store.sharding import PROPOSALS_PER_SHARD, default_shard_count

def __getattr__(name: str):
    """A name of :data:`LAZY`, imported on first use with the other names of its module, which are kept as this
    module's attributes (a front door's function wins over its submodule's name: ``analyze``, ``borji``, …)."""
    if name not in LAZY_NAMES:
        raise AttributeError(f"module 'evalengine.api' has no attribute {name!r}")
    source = LAZY_NAMES[name]
    module = importlib.import_module(source)
    for bound in LAZY[source]:
        globals()[bound] = module if bound in MODULE_NAMES else getattr(module, SOURCE_NAME.get(bound, bound))
    return globals()[name]


class _Api(types.ModuleType):
    """This module's type: importing a front door (``evalengine.api.analyze``) binds its name here to the submodule;
    where a function of :data:`LAZY` has that name (``analyze``, ``borji``, ``confusion``, …), the function is
    given, whichever was imported first."""

    def __getattribute__(self, name):
        value = super().__getattribute__(name)
        if isinstance(value, types.ModuleType) and name in LAZY_NAMES and name not in MODULE_NAMES:
            return __getattr__(name)
        return value


sys.modules[__name__].__class__ = _Api


def _lazy(*names):
    """The values of ``names`` (of :data:`LAZY`), for the methods below (a module's own functions do not see its
    ``__getattr__``)."""
    values = tuple(__getattr__(name) for name in names)
    return values if len(values) > 1 else values[0]


# what the front doors declare their options from (the command is built on this module alone)
__all__ = ["BOX_CONVENTIONS", "COCO_AREA_RANGES", "COCO_IOU_THRESHOLDS", "COCO_MAX_DETS", "HOSANG_BUDGETS",
           "PONT_TUSET_BUDGETS", "PROPOSAL_IOU_TYPES",
           "IOU_TYPES", "LRP_SEARCHES", "NAME_RULE", "ORDERINGS", "SCHEDULERS", "CocoProtocol", "Evaluation", "Phases", "ProposalEvaluation",
           "ProposalOrder", "ProposalProtocol", "Store", "check_store", "count_rows", "evaluate_coco", "evaluate_store", "ingest_coco",
           "ingest_gt", "ingest_proposals", "location", "lrp_protocol", "evaluate_thresholds", "open", "replace_file", "report",
           "VOC_METRICS", "VocEvaluation", "VocProtocol", "evaluate_store_voc", "evaluate_voc", "ingest_voc",
           "voc_output", "voc_sample", "StreamingEvaluator", "export", "evaluate_formats", "ingest_formats",
           "add_run_formats"]

DEFAULT_RUN = "default"
DEFAULT_PROPOSAL_RUN = "proposals"


@dataclass(frozen=True, repr=False)
class Store(Shown):
    """An opened store. Tables come back as lazy frames; ``evaluate`` matches a run and returns an evaluation."""

    layout: StoreLayout

    @property
    def path(self):
        """The store's folder (:class:`pathlib.Path`) or object-store URL (:class:`~evalengine.store.location.RemotePath`)."""
        return self.layout.root

    @property
    def runs(self) -> list:
        return self.layout.runs

    def images(self) -> pl.LazyFrame:
        return self.layout.scan("images")

    def categories(self) -> pl.LazyFrame:
        return self.layout.scan("categories")

    def gt(self) -> pl.LazyFrame:
        return self.layout.scan_gt()

    def dt(self, run: str = DEFAULT_RUN) -> pl.LazyFrame:
        self.layout.check_run(run)
        return self.layout.scan_sharded(self.layout.paths.dt(run))

    def proposals(self, run: str = DEFAULT_PROPOSAL_RUN) -> pl.LazyFrame:
        self.layout.check_proposal_run(run)
        return scan_shards(self.layout.paths.proposals(run))

    def add_run(self, dt_path, run: str, overwrite: bool = False, progress=None, tags: dict | None = None) -> "Store":
        """Add a detection run (a model, or a model under a perturbation) to this store, with its ``tags``
        (``{"model": "frcnn", "perturbation": "blur"}``, see :mod:`evalengine.store.tags`); returns the store.
        ``dt_path``: a file, or results in memory (:mod:`evalengine.io.memory`)."""
        check_name("run", run)
        check_tags(tags or {})
        dataset = CocoDataset(images=self.images().collect(), categories=self.categories().collect(),
                              gt=pl.DataFrame(schema=schema.GT))
        with as_files(dt=dt_path) as (_, dt_file):
            return Store(add_run(self.layout, run, iter_detections(dt_file, dataset),
                                 provenance={run: describe(dt_path)}, overwrite=overwrite, progress=progress, tags=tags))

    def add_proposals(self, path, run: str = DEFAULT_PROPOSAL_RUN, order: ProposalOrder | None = None,
                      box_convention: str = "continuous", overwrite: bool = False, progress=None,
                      tags: dict | None = None) -> "Store":
        """Add a proposal run (see :mod:`evalengine.io.proposals` for the formats), ranked by ``order``, labelled with
        ``tags`` (:func:`evalengine.store.tags.proposal_tags`: not ``perturbation``, ``level`` or ``reference``)."""
        check_name("run", run)
        images = self.images().collect()
        iter_proposals = _lazy("iter_proposals")
        proposal = ProposalRun(lambda: iter_proposals(path, images, box_convention),
                               order or ProposalOrder(), box_convention, source=str(path))
        return Store(add_proposal_run(self.layout, run, proposal, provenance={run: str(path)}, overwrite=overwrite,
                                      progress=progress, tags=tags))

    def add_baseline(self, kind: str, per_image: int, run: str | None = None, params: dict | None = None,
                     seed: int = 0, overwrite: bool = False) -> "Store":
        """Add a baseline proposal run (Hosang et al. §2.4) generated for every image of the store; Uniform and
        Gaussian are fitted on the store's ground truth unless ``params`` are given."""
        images, baselines = self.images().collect(), _lazy("baselines")
        if params is None:
            params = baselines.fitted_params(kind, self.gt().collect(), images)
        run = kind if run is None else run
        proposal = ProposalRun(lambda: baselines.generate(kind, images, per_image, params, seed),
                               ProposalOrder("given"))
        return Store(add_proposal_run(self.layout, run, proposal, overwrite=overwrite,
                                      provenance={run: f"baseline {kind}, {per_image} per image, seed {seed}"}))

    def add_perturbed_proposals(self, path, run: str, kind: str, level: float | None = None, homographies=None,
                                reference: str = DEFAULT_PROPOSAL_RUN, order: ProposalOrder | None = None,
                                box_convention: str = "continuous", overwrite: bool = False,
                                tags: dict | None = None) -> "Store":
        """Add the proposals of perturbed images (Hosang et al. §3) as a run tied to ``reference``: homographies
        from a file or frame (``homographies``), else built for every image from ``kind`` and ``level``; tagged
        with them and ``tags`` (e.g. ``{"model": "edgeboxes"}``)."""
        self.layout.check_proposal_run(reference)
        images = self.images().collect()
        homography_table, read_homographies, iter_proposals = _lazy("homography_table", "read_homographies",
                                                                    "iter_proposals")
        table = (homography_table(images, kind, level) if homographies is None
                 else read_homographies(homographies, images))
        proposal = ProposalRun(lambda: iter_proposals(path, images, box_convention), order or ProposalOrder(),
                               box_convention, perturbation=table, kind=kind, level=level, reference=reference,
                               source=str(path))
        return Store(add_proposal_run(self.layout, run, proposal, provenance={run: str(path)}, overwrite=overwrite,
                                      tags=tags))

    def match(self, protocol, run: str, scheduler: str = "threads", address: str | None = None, on_shard_done=None,
              workers: int | None = None, partners: bool = True):
        """Match ``run`` under any protocol (reusing a stored match table with the same parameters); its folder.
        ``partners=False``: held in memory, the table may leave out the columns AP does not read
        (:func:`evalengine.engine.planner.match`)."""
        return match(self.layout, run, protocol, scheduler=scheduler, address=address, on_shard_done=on_shard_done,
                     workers=workers, partners=partners)

    def evaluate(self, protocol: CocoProtocol | None = None, run: str = DEFAULT_RUN, **schedule) -> Evaluation:
        """Match ``run`` under the COCO ``protocol``; ``schedule``: ``scheduler``, ``address``, ``workers``,
        ``on_shard_done``, ``partners`` (:meth:`match`)."""
        protocol = protocol or CocoProtocol()
        return Evaluation(self.layout, run, protocol, self.match(protocol, run, **schedule))

    def evaluate_proposals(self, run: str = DEFAULT_PROPOSAL_RUN, protocol: ProposalProtocol | None = None,
                           **schedule) -> ProposalEvaluation:
        """Match a proposal run at every budget (Hosang et al.), reusing a stored match table."""
        protocol = protocol or _lazy("ProposalProtocol")()
        return _lazy("ProposalEvaluation")(self.layout, run, protocol, self.match(protocol, run, **schedule))

    def mean_proposals(self, run: str, budgets) -> pl.DataFrame:
        """Mean proposals per image at each budget, counted from the ranked proposals of ``run``."""
        return _lazy("proposal_evaluation").coco_mean_proposals(self.layout, run, budgets)

    def repeatability(self, runs, reference: str | None = None, top_n: int = 1000, method: str = "exact",
                      empty_bins: str = "skip", touching_gt: bool = False, by_bin: bool = False,
                      **schedule) -> pl.DataFrame:
        """Repeatability of each perturbed run (Hosang et al. §3) against the reference run it was added with, or
        ``reference`` (which wins, with a warning), with its kind and level; ``by_bin``: the area per size bin."""
        repeatability_protocol, proposal_evaluation = _lazy("RepeatabilityProtocol", "proposal_evaluation")
        protocols = {run: repeatability_protocol(proposal_evaluation.reference_run(self.layout, run, reference), top_n)
                     for run in runs}
        folders = [(run, self.match(protocols[run], run, **schedule)) for run in runs]
        return proposal_evaluation.repeatability(self.layout, folders, method, empty_bins, touching_gt, by_bin)

    def compare(self, runs: list, protocol: CocoProtocol | None = None, overall: bool = False,
                **schedule) -> pl.DataFrame:
        """AP per category and area range of each run and its difference to the first; ``overall``: with the
        summary's AP per area range (:func:`evalengine.evaluation.detection.compare`)."""
        return compare({run: self.evaluate(protocol, run=run, **schedule) for run in runs},
                       self.layout.read("categories"), overall)

    def export(self, out, fmt: str = "coco-results", run: str = DEFAULT_RUN, iou_threshold: float = 0.5,
               max_dets: int | None = None, protocol: CocoProtocol | None = None, **schedule):
        """A run's COCO match table per object written to ``out`` (:func:`evalengine.api.formats.export`)."""
        return _lazy("export")(self, out, fmt, run, iou_threshold, max_dets, protocol, **schedule)

    def sql(self, query: str, allow_external: bool = False) -> pl.DataFrame:
        """Run one read-only SQL statement (``SELECT`` or ``WITH``) over the store's DuckDB views (see the top-level
        ``sql/`` folder) and return a Polars frame; ``allow_external`` runs anything DuckDB runs, on any file
        (:mod:`evalengine.sql`)."""
        return _lazy("sql_views").query(self.path, query, allow_external)

    def duckdb(self, allow_external: bool = False):
        """A DuckDB connection with the store's views, for notebooks (``.pl()``, ``.arrow()``, ``.df()``): no file or
        URL outside the store, no extension, its configuration locked, unless ``allow_external``. Its statements are
        not checked as :meth:`sql`'s are: inside the store, a COPY or EXPORT of yours would write."""
        return _lazy("sql_views").connect(self.path, allow_external)

    def image_ids(self, where: str) -> list:
        """Ids of the images satisfying ``where``, one boolean SQL expression over the ``images`` view (any
        ingested metadata), e.g. ``"width > 500 AND weather = 'rain'"``."""
        return _lazy("sql_views").image_ids(self.path, where)

    def report(self, protocol: CocoProtocol | None = None, run: str = DEFAULT_RUN, where: str | None = None,
               category_ids=None, **schedule) -> Evaluation:
        """COCO metrics of a slice: images chosen by an SQL ``where`` on image metadata, categories by id.

        Image and category slices reuse the stored match table; other area ranges, IoU thresholds or a
        larger detection cap change the matching itself (pycocotools matches per area range), so a
        protocol with them is matched first (once; its match table is kept beside the others).
        """
        image_ids = None if where is None else self.image_ids(where)  # a refused predicate costs no matching
        if image_ids == []:
            warnings.warn(f"{self.path}: no image satisfies {where!r}: every number of the slice is -1", InputWarning,
                          stacklevel=2)
        return self.evaluate(protocol, run=run, **schedule).slice(image_ids=image_ids, category_ids=category_ids)


def open(path) -> Store:  # noqa: A001 - the documented entry point: evalengine.open(path)
    """Open an existing store."""
    keep_freed_memory()
    return Store(open_layout(path))


def ingest_coco(gt_json, dt_path, store, n_shards: int | None = None, run: str = DEFAULT_RUN,
                overwrite: bool = False, progress=None, image_metadata=None, tags: dict | None = None,
                masks: bool = True, check_gt=None, select_results=None) -> Store:
    """Validate a COCO ground-truth file and a detection file (COCO JSON, JSON Lines or Parquet, see
    :mod:`evalengine.io.detections`) and write them as a new store at ``store`` (a folder or an object-store URL; None:
    held in memory, :mod:`evalengine.store.memory`, as a one-shot evaluation does), streaming the detections into
    shards. ``image_metadata`` (CSV or Parquet keyed by ``image_id``) adds columns to
    the images table; ``tags`` label the run (as :meth:`Store.add_run`'s). ``overwrite`` replaces a store of ours only
    (see :func:`evalengine.store.build.replaced_store`). ``gt_json`` may be a COCO dict and ``dt_path`` results in
    memory (a list of result dicts, a table, NumPy arrays: :mod:`evalengine.io.memory`). ``masks=False`` stores no
    result masks (box evaluation only; a result file of box results then parses none); ``check_gt`` vets the read GT.
    ``select_results(dataset)``, held in memory only: the rows of the run a protocol evaluates (``memory_store``'s
    ``select``), the others not stored."""
    keep_freed_memory()
    check_name("run", run)
    check_tags(tags or {})
    with as_files(gt_json, dt_path) as (gt_file, dt_file):
        return _ingest_coco(gt_file, dt_file, store, n_shards, run, overwrite, progress, image_metadata, tags,
                            {"gt": describe(gt_json), run: describe(dt_path)}, masks, check_gt, select_results)


def _ingest_coco(gt_json, dt_path, store, n_shards, run, overwrite, progress, image_metadata, tags, provenance,
                 masks, check_gt=None, select_results=None):
    if store is not None:
        replaced_store(location(store), overwrite, [gt_json, dt_path, image_metadata or gt_json])  # before parsing
    detections = prefetch(dt_path, masks)  # parsed while the ground truth is read
    # held in memory, the ground truth is kept for the next call (evalengine.api.coco); a store keeps it instead
    read_gt = _lazy("read_gt") if store is None else read_coco_gt
    dataset = read_gt(gt_json) if check_gt is None else check_gt(read_gt(gt_json), str(gt_json))
    if image_metadata is not None:
        dataset = _lazy("with_image_metadata")(dataset, image_metadata)
    shards = n_shards or default_shard_count(max(estimate_rows(dt_path), dataset.gt.height))
    if store is None:
        runs = {run: iter_detections(dt_path, dataset, prefetched=detections, masks=masks)}
        return Store(memory_store(dataset.images, dataset.categories, dataset.gt, runs, shards, provenance, progress,
                                  {run: tags or {}}, select_results and select_results(dataset)))
    gt = [dataset.gt]  # handed over: written first, then let go (the detections are checked without it)
    dataset = replace(dataset, gt=dataset.gt.clear())
    runs = {run: iter_detections(dt_path, dataset, prefetched=detections, masks=masks)}
    return Store(create_store(store, dataset.images, dataset.categories, gt, runs, n_shards=shards,
                              provenance=provenance, overwrite=overwrite, progress=progress, tags={run: tags or {}}))


def ingest_gt(gt_json, store, n_shards: int | None = None, overwrite: bool = False) -> Store:
    """A store with a COCO ground truth (a file or a COCO dict) and no run yet (add detection, proposal or baseline
    runs to it)."""
    keep_freed_memory()
    with as_files(gt_json) as (gt_file, _):
        replaced_store(location(store), overwrite, [gt_file])
        dataset = read_coco_gt(gt_file)
    layout = create_store(store, dataset.images, dataset.categories, dataset.gt, {},
                          n_shards=n_shards or default_shard_count(dataset.gt.height),
                          provenance={"gt": describe(gt_json)}, overwrite=overwrite)
    return Store(layout)


def ingest_proposals(gt_json, proposals_path, store, run: str = DEFAULT_PROPOSAL_RUN,
                     order: ProposalOrder | None = None, box_convention: str = "continuous",
                     n_shards: int | None = None, overwrite: bool = False, progress=None,
                     tags: dict | None = None) -> Store:
    """Validate a COCO ground-truth file and a proposal file or .npz folder and write them as a new store, the run
    labelled with ``tags`` (:func:`evalengine.store.tags.proposal_tags`)."""
    keep_freed_memory()
    check_name("run", run)
    replaced_store(location(store), overwrite, [gt_json, proposals_path])
    dataset = read_coco_gt(gt_json)
    path = Path(proposals_path)
    rows = estimate_rows(path) if path.is_file() and path.suffix.lower() in (".json", ".parquet") else 0
    shards = n_shards or max(default_shard_count(rows, PROPOSALS_PER_SHARD), default_shard_count(dataset.gt.height))
    iter_proposals = _lazy("iter_proposals")
    proposal = ProposalRun(lambda: iter_proposals(path, dataset.images, box_convention), order or ProposalOrder(),
                           box_convention, source=str(path))
    layout = create_store(store, dataset.images, dataset.categories, dataset.gt, {}, n_shards=shards,
                          provenance={"gt": str(gt_json), run: str(proposals_path)}, overwrite=overwrite,
                          progress=progress, proposal_runs={run: proposal}, tags={run: tags or {}})
    return Store(layout)


class _TemporaryFolder:
    """A temporary folder, removed once nothing holds this object (or at exit)."""

    def __init__(self):
        self.path = Path(tempfile.mkdtemp(prefix="evalengine-"))
        weakref.finalize(self, shutil.rmtree, self.path, True)


def on_store_or_files(store, n_shards: int | None, evaluate):
    """``evaluate(layout)`` on a :class:`Store`, or on ``(gt_json, dt_path)`` ingested into a temporary store that
    lives as long as the result (its ``keep_alive``)."""
    folder = _TemporaryFolder() if isinstance(store, tuple) else None
    opened = store if folder is None else ingest_coco(*store, folder.path / "store", n_shards=n_shards)
    result = evaluate(opened.layout)
    if folder is not None:
        result.keep_alive.append(folder)
    return result


def check_store(path, repair: bool = False) -> pl.DataFrame:
    """``evalengine fsck``: the problems of a store, one row each (``path``, ``problem``, ``repair``: ``remove``
    or what to do); with ``repair``, the removable ones are removed (see :mod:`evalengine.store.fsck`)."""
    fsck, finding = _lazy("fsck", "Finding")
    findings = fsck(path, repair)
    return pl.DataFrame([vars(finding) for finding in findings],
                        schema={name: pl.String for name in finding.__dataclass_fields__})


def baseline_params(gt_json, kind: str, params: dict | None = None) -> dict | None:
    """The parameters of a baseline: ``params`` as given, else fitted on a COCO ground truth (Uniform, Gaussian)."""
    dataset = read_coco_gt(gt_json)
    return params if params is not None else _lazy("baselines").fitted_params(kind, dataset.gt, dataset.images)


def generate_baseline(gt_json, kind: str, per_image: int, params: dict | None = None, seed: int = 0) -> tuple:
    """``(proposals, n_images)``: a baseline (Hosang et al. §2.4) for every image of a COCO ground truth, as one
    frame of continuous ``image_id, x1, y1, x2, y2``; Uniform and Gaussian fitted on it unless ``params`` are given."""
    dataset, baselines = read_coco_gt(gt_json), _lazy("baselines")
    if params is None:
        params = baselines.fitted_params(kind, dataset.gt, dataset.images)
    frames = baselines.generate(kind, dataset.images, per_image, params, seed)
    return pl.concat(list(frames)).select("image_id", *corner_columns()), dataset.images.height
