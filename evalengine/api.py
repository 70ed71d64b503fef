"""What a notebook imports: open or build a store, evaluate a run, get metrics as Polars frames."""

import math
import os
import tempfile
import threading
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path

import polars as pl

from evalengine import baselines, schema
from evalengine import sql as sql_views
from evalengine.engine.matching import match_proposal_run, match_repeatability_run, match_run
from evalengine.engine.memory import keep_freed_memory
from evalengine.io.coco import CocoDataset, read_coco_gt
from evalengine.io.detections import count_rows, estimate_rows, iter_detections, prefetch
from evalengine.io.metadata import with_image_metadata
from evalengine.io.perturbations import homography_table, read_homographies
from evalengine.io.proposals import iter_proposals
from evalengine.match.coco import warm_up
from evalengine.match.proposals import ProposalProtocol
from evalengine.match.protocol import CocoProtocol
from evalengine.match.repeatability import RepeatabilityProtocol
from evalengine.metrics import ap as ap_metrics
from evalengine.metrics import repeatability as repeatability_metrics
from evalengine.metrics import summary as summary_metrics
from evalengine.metrics.counts import per_image_counts
from evalengine.progress import Phases
from evalengine.proposal_evaluation import ProposalEvaluation
from evalengine.store.layout import (
    ProposalRun, StoreLayout, add_proposal_run, add_run, create_store, open_layout, scan_shards,
)
from evalengine.store.ranking import ProposalOrder

DEFAULT_RUN = "default"
DEFAULT_PROPOSAL_RUN = "proposals"
_DETECTIONS_PER_SHARD = 100_000
# proposals are cheaper per row (one class-agnostic pass) and come ten thousand per image: bigger shards mean
# fewer, larger writes while streaming them in
_PROPOSALS_PER_SHARD = 1_000_000


def default_shard_count(n_rows: int, rows_per_shard: int = _DETECTIONS_PER_SHARD) -> int:
    """About ``rows_per_shard`` detections (or ground truths) per shard, rounded up to a multiple of the cores so
    that the last round of shard tasks keeps every core busy; at most 1024."""
    cores = os.cpu_count() or 1
    rounds = math.ceil(n_rows / rows_per_shard / cores)
    return max(1, min(1024, rounds * cores))


@dataclass(frozen=True)
class Store:
    """An opened store. Tables come back as lazy frames; ``evaluate`` matches a run and returns an :class:`Evaluation`."""

    layout: StoreLayout

    @property
    def path(self):
        """The store's folder (:class:`pathlib.Path`) or object-store URL (:class:`~evalengine.store.location.RemotePath`)."""
        return self.layout.root

    @property
    def runs(self) -> list:
        return self.layout.runs

    def images(self) -> pl.LazyFrame:
        return pl.scan_parquet(str(self.layout.table("images")))

    def categories(self) -> pl.LazyFrame:
        return pl.scan_parquet(str(self.layout.table("categories")))

    def gt(self) -> pl.LazyFrame:
        return scan_shards(self.path / "gt")

    def dt(self, run: str = DEFAULT_RUN) -> pl.LazyFrame:
        self.layout.check_run(run)
        return scan_shards(self.path / "dt" / f"run={run}")

    def add_run(self, dt_path, run: str, overwrite: bool = False, progress=None) -> "Store":
        """Add a detection run (a model, or a model under a perturbation) to this store; returns the store."""
        dataset = CocoDataset(images=self.images().collect(), categories=self.categories().collect(),
                              gt=pl.DataFrame(schema=schema.GT))
        layout = add_run(self.layout, run, iter_detections(dt_path, dataset), provenance={run: str(dt_path)},
                         overwrite=overwrite, progress=progress)
        return Store(layout)

    def proposals(self, run: str = DEFAULT_PROPOSAL_RUN) -> pl.LazyFrame:
        self.layout.check_proposal_run(run)
        return scan_shards(self.path / "proposals" / f"run={run}")

    def add_proposals(self, path, run: str = DEFAULT_PROPOSAL_RUN, order: ProposalOrder | None = None,
                      box_convention: str = "continuous", overwrite: bool = False, progress=None) -> "Store":
        """Add a proposal run (see :mod:`evalengine.io.proposals` for the formats), ranked by ``order``."""
        images = self.images().collect()
        proposal = ProposalRun(lambda: iter_proposals(path, images, box_convention),
                               order or ProposalOrder(), box_convention, source=str(path))
        return Store(add_proposal_run(self.layout, run, proposal, provenance={run: str(path)}, overwrite=overwrite,
                                      progress=progress))

    def add_baseline(self, kind: str, per_image: int, run: str | None = None, params: dict | None = None,
                     seed: int = 0, overwrite: bool = False) -> "Store":
        """Add a baseline proposal run (Hosang et al. §2.4) generated for every image of the store; Uniform and
        Gaussian are fitted on the store's ground truth unless ``params`` are given."""
        images = self.images().collect()
        if params is None and kind in ("uniform", "gaussian"):
            fit = baselines.fit_uniform if kind == "uniform" else baselines.fit_gaussian
            params = fit(self.gt().collect(), images)
        run = run or kind
        proposal = ProposalRun(lambda: baselines.generate(kind, images, per_image, params, seed),
                               ProposalOrder("given"))
        return Store(add_proposal_run(self.layout, run, proposal, overwrite=overwrite,
                                      provenance={run: f"baseline {kind}, {per_image} per image, seed {seed}"}))

    def add_perturbed_proposals(self, path, run: str, kind: str, level: float | None = None, homographies=None,
                                reference: str = DEFAULT_PROPOSAL_RUN, order: ProposalOrder | None = None,
                                box_convention: str = "continuous", overwrite: bool = False) -> "Store":
        """Add the proposals of perturbed images (Hosang et al. §3) as a run tied to ``reference``: homographies
        from a file or frame (``homographies``), else built for every image from ``kind`` and ``level``."""
        self.layout.check_proposal_run(reference)
        images = self.images().collect()
        table = (homography_table(images, kind, level) if homographies is None
                 else read_homographies(homographies, images))
        proposal = ProposalRun(lambda: iter_proposals(path, images, box_convention), order or ProposalOrder(),
                               box_convention, perturbation=table, kind=kind, level=level, reference=reference, source=str(path))
        return Store(add_proposal_run(self.layout, run, proposal, provenance={run: str(path)}, overwrite=overwrite))

    def repeatability(self, runs, reference: str = DEFAULT_PROPOSAL_RUN, top_n: int = 1000, method: str = "exact",
                      empty_bins: str = "skip", touching_gt: bool = False, by_bin: bool = False,
                      scheduler: str = "threads", address: str | None = None,
                      workers: int | None = None) -> pl.DataFrame:
        """Repeatability of each perturbed run against ``reference`` (Hosang et al. §3), with its kind and level;
        ``by_bin`` gives the area per size bin instead."""
        protocol = RepeatabilityProtocol(reference=reference, top_n=top_n)
        tables = []
        for run in runs:
            folder = match_repeatability_run(self.layout, run, protocol, scheduler=scheduler, address=address,
                                             workers=workers)
            tables.append(scan_shards(folder / "ref").drop("shard").collect()
                          .with_columns(run=pl.lit(run)))
        matches = pl.concat(tables)
        table = (repeatability_metrics.repeatability_by_bin(matches, method, touching_gt) if by_bin else
                 repeatability_metrics.repeatability(matches, method, empty_bins, touching_gt))
        described = pl.DataFrame([{"run": run, "kind": self.layout.proposal_runs[run]["perturbation"]["kind"],
                                   "level": self.layout.proposal_runs[run]["perturbation"]["level"]} for run in runs],
                                 schema={"run": pl.String, "kind": pl.String, "level": pl.Float64})
        return described.join(table, on="run", how="left", maintain_order="left")

    def evaluate_proposals(self, run: str = DEFAULT_PROPOSAL_RUN, protocol: ProposalProtocol | None = None,
                           scheduler: str = "threads", address: str | None = None, on_shard_done=None,
                           workers: int | None = None) -> ProposalEvaluation:
        """Match a proposal run at every budget (Hosang et al.), reusing a stored match table."""
        protocol = protocol or ProposalProtocol()
        folder = match_proposal_run(self.layout, run, protocol, scheduler=scheduler, address=address,
                                    on_shard_done=on_shard_done, workers=workers)
        return ProposalEvaluation(store=self, run=run, protocol=protocol, matches_dir=folder)

    def compare(self, runs: list, protocol: CocoProtocol | None = None, **evaluate_options) -> pl.DataFrame:
        """AP@[.50:.95] (max dets 100) per category and area range for each run, and each run's difference
        to the first: one row per (category, area range), columns ``ap_<run>`` and ``diff_<run>``."""
        tables = []
        for run in runs:
            table = self.evaluate(protocol, run=run, **evaluate_options).ap_table()
            tables.append(
                table.filter((pl.col("max_dets") == 100) & (pl.col("ap") > -1))
                .group_by("category_id", "area_range").agg(pl.col("ap").mean().alias(f"ap_{run}"))
            )
        joined = tables[0]
        for table in tables[1:]:
            joined = joined.join(table, on=["category_id", "area_range"], how="full", coalesce=True)
        base = f"ap_{runs[0]}"
        return (joined.with_columns([(pl.col(f"ap_{run}") - pl.col(base)).alias(f"diff_{run}") for run in runs[1:]])
                .join(self.categories().select("category_id", "name").collect(), on="category_id", how="left")
                .sort("category_id", "area_range"))

    def sql(self, query: str) -> pl.DataFrame:
        """Run SQL over the store's DuckDB views (see the top-level ``sql/`` folder) and return a Polars frame."""
        return sql_views.query(self.path, query)

    def image_ids(self, where: str) -> list:
        """Ids of the images satisfying an SQL predicate over the ``images`` view (any ingested metadata)."""
        return self.sql(f"SELECT image_id FROM images WHERE {where} ORDER BY image_id").get_column("image_id").to_list()

    def report(self, protocol: CocoProtocol | None = None, run: str = DEFAULT_RUN, where: str | None = None,
               category_ids=None, **evaluate_options) -> ap_metrics.Accumulation:
        """COCO metrics of a slice: images chosen by an SQL ``where`` on image metadata, categories by id.

        Image and category slices reuse the stored match table; other area ranges, IoU thresholds or a
        larger detection cap change the matching itself (pycocotools matches per area range), so a
        protocol with them is matched first (once; its match table is kept beside the others).
        """
        evaluation = self.evaluate(protocol, run=run, **evaluate_options)
        image_ids = None if where is None else self.image_ids(where)
        return evaluation.accumulate(image_ids=image_ids, category_ids=category_ids)

    def duckdb(self):
        """A DuckDB connection with the store's views, for notebooks (``.pl()``, ``.arrow()``, ``.df()``)."""
        return sql_views.connect(self.path)

    def evaluate(self, protocol: CocoProtocol | None = None, run: str = DEFAULT_RUN,
                 scheduler: str = "threads", address: str | None = None, on_shard_done=None,
                 workers: int | None = None) -> "Evaluation":
        """Match ``run`` under ``protocol`` (reusing a stored match table with the same parameters)."""
        protocol = protocol or CocoProtocol()
        folder = match_run(self.layout, run, protocol, scheduler=scheduler, address=address,
                           on_shard_done=on_shard_done, workers=workers)
        return Evaluation(store=self, run=run, protocol=protocol, matches_dir=folder)


@dataclass(frozen=True)
class Evaluation:
    """A matched run: the match table and every COCO metric as a query over it."""

    store: Store
    run: str
    protocol: CocoProtocol
    matches_dir: object
    _cache: dict = field(default_factory=dict, repr=False, compare=False)

    def dt_matches(self) -> pl.LazyFrame:
        return scan_shards(self.matches_dir / "dt")

    def gt_matches(self) -> pl.LazyFrame:
        return scan_shards(self.matches_dir / "gt")

    @cached_property
    def category_ids(self) -> list:
        return self.store.categories().select("category_id").collect().get_column("category_id").to_list()

    def accumulate(self, want_curve: bool = False, on_batch_done=None, image_ids=None,
                   category_ids=None) -> ap_metrics.Accumulation:
        """pycocotools ``accumulate``; ``image_ids`` / ``category_ids`` restrict it as ``params.imgIds`` /
        ``params.catIds`` would (no new matching needed). The full accumulation is cached."""
        whole = image_ids is None and category_ids is None
        key = bool(want_curve)
        if whole and key in self._cache:
            return self._cache[key]
        result = ap_metrics.accumulate(
            self.dt_matches(), self.gt_matches(), self.category_ids if category_ids is None else sorted(category_ids),
            self.protocol, want_curve=want_curve, on_batch_done=on_batch_done, image_ids=image_ids,
        )
        if whole:
            self._cache[key] = result
        return result

    def ap_table(self) -> pl.DataFrame:
        """AP and recall per (category, IoU threshold, area range, max dets)."""
        return ap_metrics.ap_table(self.accumulate())

    def precision_recall(self) -> pl.DataFrame:
        """Interpolated precision and score at every recall threshold (pycocotools ``eval['precision']``)."""
        return ap_metrics.precision_recall_table(self.accumulate(want_curve=True))

    def stats(self) -> list:
        """pycocotools ``COCOeval.stats``."""
        return summary_metrics.summary_stats(self.accumulate())

    def summary(self) -> pl.DataFrame:
        return summary_metrics.summary_frame(self.accumulate())

    def format_summary(self) -> str:
        return summary_metrics.format_summary(self.accumulate())

    def per_class(self) -> pl.DataFrame:
        """AP, AP50 and AR per category (area 'all', last max dets), joined to the category names."""
        table = summary_metrics.per_class_frame(self.accumulate())
        if not self.protocol.use_cats:
            return table
        return table.join(self.store.categories().collect(), on="category_id", how="left", maintain_order="left")

    def per_image_counts(self, iou_threshold: float = 0.5, area_range: str = "all", max_dets: int | None = None):
        return per_image_counts(
            self.dt_matches(), self.gt_matches(), self.store.images(), self.protocol,
            iou_threshold=iou_threshold, area_range=area_range, max_dets=max_dets,
        )


def open(path) -> Store:  # noqa: A001 - the documented entry point: evalengine.open(path)
    """Open an existing store."""
    keep_freed_memory()
    return Store(open_layout(path))


def ingest_coco(gt_json, dt_path, store, n_shards: int | None = None, run: str = DEFAULT_RUN,
                overwrite: bool = False, progress=None, image_metadata=None) -> Store:
    """Validate a COCO ground-truth file and a detection file (COCO JSON, JSON Lines or Parquet, see
    :mod:`evalengine.io.detections`) and write them as a new store, streaming the detections into shards.
    ``image_metadata`` (CSV or Parquet keyed by ``image_id``) adds columns to the images table."""
    keep_freed_memory()
    detections = prefetch(dt_path)  # parsed while the ground truth is read
    dataset = read_coco_gt(gt_json)
    if image_metadata is not None:
        dataset = with_image_metadata(dataset, image_metadata)
    shards = n_shards or default_shard_count(max(estimate_rows(dt_path), dataset.gt.height))
    layout = create_store(
        store, dataset.images, dataset.categories, dataset.gt,
        {run: iter_detections(dt_path, dataset, prefetched=detections)},
        n_shards=shards, provenance={"gt": str(gt_json), run: str(dt_path)}, overwrite=overwrite, progress=progress,
    )
    return Store(layout)


def ingest_gt(gt_json, store, n_shards: int | None = None, overwrite: bool = False) -> Store:
    """A store with a COCO ground truth and no run yet (add detection, proposal or baseline runs to it)."""
    keep_freed_memory()
    dataset = read_coco_gt(gt_json)
    layout = create_store(store, dataset.images, dataset.categories, dataset.gt, {},
                          n_shards=n_shards or default_shard_count(dataset.gt.height),
                          provenance={"gt": str(gt_json)}, overwrite=overwrite)
    return Store(layout)


def ingest_proposals(gt_json, proposals_path, store, run: str = DEFAULT_PROPOSAL_RUN,
                     order: ProposalOrder | None = None, box_convention: str = "continuous",
                     n_shards: int | None = None, overwrite: bool = False, progress=None) -> Store:
    """Validate a COCO ground-truth file and a proposal file or .npz folder and write them as a new store."""
    keep_freed_memory()
    dataset = read_coco_gt(gt_json)
    path = Path(proposals_path)
    rows = estimate_rows(path) if path.is_file() and path.suffix.lower() in (".json", ".parquet") else 0
    shards = n_shards or max(default_shard_count(rows, _PROPOSALS_PER_SHARD), default_shard_count(dataset.gt.height))
    proposal = ProposalRun(lambda: iter_proposals(path, dataset.images, box_convention), order or ProposalOrder(),
                           box_convention, source=str(path))
    layout = create_store(store, dataset.images, dataset.categories, dataset.gt, {}, n_shards=shards,
                          provenance={"gt": str(gt_json), run: str(proposals_path)}, overwrite=overwrite,
                          progress=progress, proposal_runs={run: proposal})
    return Store(layout)


def evaluate_coco(gt_json, dt_path, protocol: CocoProtocol | None = None, store=None, n_shards: int | None = None,
                  scheduler: str = "threads", address: str | None = None, phases: Phases | None = None,
                  workers: int | None = None) -> ap_metrics.Accumulation:
    """Files in, accumulated COCO metrics out; the store is kept at ``store`` or made in a temporary folder.

    ``phases`` (a :class:`~evalengine.progress.Phases`) shows progress and times ingest, match and accumulate.
    """
    protocol = protocol or CocoProtocol()
    phases = phases or Phases()
    threading.Thread(target=warm_up, daemon=True).start()
    with tempfile.TemporaryDirectory(prefix="evalengine-") as tmp:
        target = store if store is not None else Path(tmp) / "store"
        with phases.phase("ingest", total=count_rows(dt_path), unit="detections") as advance:
            store_ = ingest_coco(gt_json, dt_path, target, n_shards=n_shards, progress=advance)
        return evaluate_store(store_, protocol, scheduler=scheduler, address=address, phases=phases, workers=workers)


def evaluate_store(store: Store, protocol: CocoProtocol | None = None, run: str = DEFAULT_RUN,
                   scheduler: str = "threads", address: str | None = None, phases: Phases | None = None,
                   workers: int | None = None) -> ap_metrics.Accumulation:
    """Match (or reuse the match table of) a stored run and accumulate it, phase by phase."""
    phases = phases or Phases()
    with phases.phase("match", total=store.layout.n_shards, unit="shards") as advance:
        evaluation = store.evaluate(protocol, run=run, scheduler=scheduler, address=address, on_shard_done=advance,
                                    workers=workers)
    n_classes = len(evaluation.category_ids) if evaluation.protocol.use_cats else 1
    with phases.phase("accumulate", total=n_classes, unit="categories") as advance:
        return evaluation.accumulate(on_batch_done=advance)
