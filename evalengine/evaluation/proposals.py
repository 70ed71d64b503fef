"""Matched proposal runs: recall, AR, best overlap, OMA and their slices as Polars frames (Hosang et al.; Wang et
al.), and repeatability under perturbations (Hosang et al. §3)."""

import warnings
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from evalengine.errors import InputWarning, ProtocolError, check_option
from evalengine.evaluation.run import MatchedRun
from evalengine.match.proposals import ProposalProtocol, image_counts
from evalengine.metrics import achievable as achievable_metrics
from evalengine.metrics import oma as oma_metrics
from evalengine.metrics import recall as recall_metrics
from evalengine.metrics import repeatability as repeatability_metrics
from evalengine.store.build import add_hit_counts, read_hit_counts
from evalengine.store.layout import StoreLayout
from evalengine.store.shards import scan_shards

BY = ("category_id", "size_bin")
AR_METHODS = ("exact", "trapezoid", "grid")


@dataclass(frozen=True, repr=False)
class ProposalEvaluation(MatchedRun):
    """The proposal match table of one run (``gt`` one row per ground truth and budget, ``images`` the
    proposals evaluated per image) and every recall metric as a query over it."""

    protocol: ProposalProtocol

    def image_counts(self) -> pl.LazyFrame:
        return scan_shards(self.matches_dir / "images")

    def images(self) -> pl.LazyFrame:
        return self.layout.scan("images")

    def gt(self) -> pl.LazyFrame:
        return self.layout.scan_gt()

    @cached_property
    def n_images(self) -> int:
        return self.images().select(pl.len()).collect().item()

    def _matches(self, by) -> pl.LazyFrame:
        for column in by:
            check_option("by", column, BY)
        frame = self.gt_matches()
        if "size_bin" in by:
            frame = recall_metrics.with_size_bin(frame, self.gt(), self.images())
        return frame

    def mean_proposals(self) -> pl.DataFrame:
        """Mean number of proposals actually evaluated per image, per budget (the x-axis of Hosang et al.)."""
        return recall_metrics.mean_proposals(self.image_counts(), self.n_images, self.protocol.budgets).collect()

    def _with_budget_axis(self, table: pl.LazyFrame) -> pl.DataFrame:
        return table.join(self.mean_proposals().lazy(), on="budget", how="left", maintain_order="left").collect()

    def recall(self, iou_thresholds=(0.5, 0.7), matcher: str = "greedy", aggregation: str = "instances",
               by=()) -> pl.DataFrame:
        """Recall per (budget, IoU threshold[, slice]): recall vs #proposals, or vs IoU for a fine threshold grid."""
        table = recall_metrics.recall(self._matches(by), iou_thresholds, matcher, aggregation, list(by))
        return self._with_budget_axis(table)

    def recall_iou_curve(self, iou_thresholds=None, matcher: str = "greedy", aggregation: str = "instances") -> pl.DataFrame:
        """Recall vs IoU threshold at every budget, on the toolbox's 0.001 grid over [0.5, 1] by default."""
        if iou_thresholds is None:
            grid = recall_metrics.toolbox_grid()
            iou_thresholds = grid[grid >= 0.5]
        return self.recall(iou_thresholds, matcher, aggregation)

    def average_recall(self, method: str = "exact", iou_range=(0.5, 1.0), iou_thresholds=None,
                       matcher: str = "greedy", aggregation: str = "instances", by=()) -> pl.DataFrame:
        """AR per budget: ``exact`` (the integral over ``iou_range``), ``trapezoid`` (the toolbox's 0.001 grid)
        or ``grid`` (the mean recall at ``iou_thresholds``)."""
        check_option("method", method, AR_METHODS)
        frame = self._matches(by)
        if method == "exact":
            table = recall_metrics.average_recall(frame, matcher, aggregation, iou_range, list(by))
        elif method == "trapezoid":
            if aggregation != "instances":
                raise ProtocolError("the toolbox's trapezoid AR pools instances; use method='exact' for images")
            table = recall_metrics.average_recall_trapezoid(frame, matcher, list(by))
        else:
            if iou_thresholds is None:
                raise ProtocolError("method='grid' needs iou_thresholds")
            table = recall_metrics.average_recall_grid(frame, iou_thresholds, matcher, aggregation, list(by))
        return self._with_budget_axis(table.with_columns(method=pl.lit(method)))

    def best_overlap(self, by=()) -> pl.DataFrame:
        """ABO per budget (mean best IoU over ground truths, non-exclusive) and, per category, MABO's terms."""
        return self._with_budget_axis(recall_metrics.best_overlap(self._matches(by), list(by)))

    def achievable_quality(self, thresholds=achievable_metrics.PONT_TUSET_THRESHOLDS, measure: str = "jaccard",
                           by=()) -> pl.DataFrame:
        """Pont-Tuset & Marques §2.3 per budget: mean and median of each object's best Jaccard among the first N
        proposals, and the recall at Jaccard strictly above each threshold, against the mean proposals used.
        ``measure="boundary_f"``: the same of each object's best F̃b (a protocol with ``boundary_f``)."""
        if measure == "boundary_f" and not self.protocol.boundary_f:
            raise ProtocolError("measure 'boundary_f': the proposals were matched without F̃b; evaluate with "
                                "ProposalProtocol(iou_type='segm', boundary_f=True) "
                                "(CLI: --quality-measure boundary_f)")
        table = achievable_metrics.achievable_quality(self._matches(by), thresholds, measure, list(by))
        return self._with_budget_axis(table)

    def mabo(self) -> pl.DataFrame:
        """MABO per budget: the mean over categories of each category's ABO (Uijlings et al.'s Selective Search)."""
        return self._with_budget_axis(recall_metrics.mean_best_overlap_per_class(self.gt_matches()))

    def per_class(self, budget: int | None = None, iou_thresholds=(0.5, 0.7)) -> pl.DataFrame:
        """AR and recall per category at one budget (default: the largest), from the class-agnostic matching."""
        budget = self._budget(budget)
        ar = self.average_recall(by=["category_id"]).filter(pl.col("budget") == budget)
        rec = (self.recall(iou_thresholds, by=["category_id"]).filter(pl.col("budget") == budget)
               .pivot("iou_threshold", index="category_id", values="recall")
               .rename(lambda c: c if c == "category_id" else f"recall@{c}"))
        n = self.gt_matches().filter(pl.col("budget") == budget).group_by("category_id").len("n_gt").collect()
        return (ar.select("category_id", "ar").join(rec, on="category_id").join(n, on="category_id")
                .join(self.layout.read("categories").select("category_id", "name"), on="category_id", how="left")
                .sort("category_id"))

    def oma(self, iou_thresholds=(0.5, 0.8), lattice: str = "edges") -> pl.DataFrame:
        """Wang et al.'s recall and OMA per (budget, IoU threshold): per-image means, non-exclusive hits, the
        random-sampling chance HPRS removed (Eq. 8). OMA vs budget at a threshold, or vs IoU at a budget.
        The exact hit counts are cached in the store (``hprs/lattice=L``) and reused by every run and query.
        Boxes only: HPRS counts the boxes of a lattice, which have no mask counterpart."""
        if self.protocol.iou_type != "bbox":
            raise ProtocolError("OMA is defined on boxes (Wang et al.'s HPRS of a box lattice), not on iou_type "
                                f"'{self.protocol.iou_type}'")
        known = read_hit_counts(self.layout, lattice)
        counts, counted = oma_metrics.object_hit_counts(
            recall_metrics.evaluated_gt_boxes(self.gt_matches(), self.gt()).collect(),
            self.images().collect(), iou_thresholds, lattice, known=known)
        add_hit_counts(self.layout, lattice, known, counted)
        table = oma_metrics.oma(self.gt_matches().collect(), self.image_counts().collect(), counts)
        return self._with_budget_axis(table.lazy())

    def average_oma(self, n_thresholds: int = 10, lattice: str = "edges") -> pl.DataFrame:
        """AO (Eq. 9) per budget with its right Riemann sum over {0.5 + 0.5k/n, k = 1..n}; Wang et al. do not give
        n, so it is a parameter (10 by default), as is AR's in their Eq. 3."""
        table = self.oma(recall_metrics.wang_thresholds(n_thresholds), lattice)
        return (table.group_by("budget", maintain_order=True)
                .agg(pl.col("oma").mean().alias("average_oma"), pl.col("recall").mean().alias("average_recall"),
                     pl.col("mean_proposals").first())
                .with_columns(n_thresholds=pl.lit(n_thresholds)).sort("budget"))

    def volume_under_surface(self, matcher: str = "greedy") -> float:
        return recall_metrics.volume_under_surface(self.average_recall(matcher=matcher))

    def _budget(self, budget):
        budget = self.protocol.budgets[-1] if budget is None else int(budget)
        if budget not in self.protocol.budgets:
            raise ProtocolError(f"budget {budget} was not evaluated (budgets: {list(self.protocol.budgets)})")
        return budget

    def per_budget(self, table: pl.DataFrame, column: str) -> list:
        """``column`` of ``table`` as one value per budget of the protocol (null where the table has none)."""
        budgets = pl.DataFrame({"budget": list(self.protocol.budgets)}, schema={"budget": pl.Int32})
        return budgets.join(table.select("budget", column), on="budget", how="left",
                            maintain_order="left").get_column(column).to_list()


def coco_mean_proposals(layout: StoreLayout, run: str, budgets) -> pl.DataFrame:
    """Mean proposals per image at each budget, counted from the ranked proposals (the coco protocol has no
    proposal match table)."""
    counts = image_counts(scan_shards(layout.paths.proposals(run)).select("image_id", "rank").collect(), budgets)
    n_images = layout.scan("images").select(pl.len()).collect().item()
    return recall_metrics.mean_proposals(counts.lazy(), n_images, budgets).collect()


def reference_run(layout: StoreLayout, run: str, reference: str | None = None) -> str:
    """The reference run of perturbed proposal run ``run``: the one it was added with (its manifest description, also
    its ``reference`` tag), unless ``reference`` names another, which wins with a warning."""
    layout.check_proposal_run(run)
    stored = layout.proposal_runs[run].get("perturbation", {}).get("reference")
    if stored is None:  # not a perturbed run: the protocol says so (it has no homographies)
        return reference or run
    if reference is None or reference == stored:
        return stored
    layout.check_proposal_run(reference)
    warnings.warn(f"proposal run '{run}' was added with reference '{stored}'; measured against '{reference}' as "
                  "asked", InputWarning, stacklevel=3)
    return reference


def repeatability(layout: StoreLayout, folders: list, method: str = "exact", empty_bins: str = "skip",
                  touching_gt: bool = False, by_bin: bool = False) -> pl.DataFrame:
    """Repeatability of each perturbed run (``[(run, its repeatability match table)]``) with its kind and level;
    ``by_bin`` gives the area per size bin instead."""
    matches = pl.concat([scan_shards(folder / "ref").drop("shard").collect().with_columns(run=pl.lit(run))
                         for run, folder in folders])
    table = (repeatability_metrics.repeatability_by_bin(matches, method, touching_gt) if by_bin else
             repeatability_metrics.repeatability(matches, method, empty_bins, touching_gt))
    perturbations = [(run, layout.proposal_runs[run]["perturbation"]) for run, _ in folders]
    described = pl.DataFrame([{"run": run, "kind": p["kind"], "level": p["level"]} for run, p in perturbations],
                             schema={"run": pl.String, "kind": pl.String, "level": pl.Float64})
    return described.join(table, on="run", how="left", maintain_order="left")
