"""The Hosang protocol: proposal-to-ground-truth matching for recall at every budget (Hosang et al., TPAMI 2016,
§4.1, App. A).

Per image and budget N, the top-N ranked proposals are matched to all the image's ground truths,
class-agnostically, by continuous-box IoU, in two ways at once (:mod:`evalengine.match.greedy_iou`): ``iou``, the
greedy one-to-one assignment of the toolbox's ``closest_candidates.m`` (0 for a ground truth left without a
partner), and ``best_iou``, the best IoU over the top N, one proposal serving several ground truths (ABO, Wang et
al.'s hits).
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError
from evalengine.geometry.boxes import corners
from evalengine.match.greedy_iou import greedy_by_image
from evalengine.match.protocol import Protocol, column_array, positive_integers

# round(10.^(0:0.5:4)) of the toolbox
HOSANG_BUDGETS = (1, 3, 10, 32, 100, 316, 1000, 3162, 10000)


@dataclass(frozen=True)
class ProposalProtocol(Protocol):
    """Hosang et al.'s recall protocol: ``budgets`` (proposals per image), and which ground truth counts.

    Their choices: every VOC box, difficult ones included ("our goal is to measure maximum recall"), and COCO
    without crowd annotations, which are dropped before matching (not treated as ignore regions).
    ``include_difficult`` applies when the ground truth has a ``difficult`` field.
    """

    budgets: tuple = HOSANG_BUDGETS
    drop_crowd: bool = True
    include_difficult: bool = True
    name: ClassVar[str] = "hosang"
    sides: ClassVar[tuple] = ("gt", "images")

    def __post_init__(self):
        budgets = tuple(sorted(set(positive_integers("budgets", self.budgets))))
        if not budgets:
            raise ProtocolError(f"budgets: positive integers are needed, got {list(self.budgets)}")
        object.__setattr__(self, "budgets", budgets)

    def shard_inputs(self, layout, run: str) -> tuple:
        layout.check_proposal_run(run)
        paths = layout.paths
        return [{"gt": str(paths.gt_shard(k)), "proposals": str(paths.proposal_shard(run, k))}
                for k in range(layout.n_shards)], {}

    def match_shard(self, tables: dict, context: dict) -> dict:
        gt_matches, counts = match_proposal_shard(tables["gt"], tables["proposals"], self)
        return {"gt": gt_matches, "images": counts}


def evaluated_gt(gt: pl.DataFrame, protocol: ProposalProtocol) -> pl.DataFrame:
    """The ground truths recall is measured on, in (image, file) order."""
    keep = pl.lit(True)
    if protocol.drop_crowd:
        keep &= ~pl.col("iscrowd")
    if not protocol.include_difficult and "difficult" in gt.columns:
        keep &= ~pl.col("difficult").cast(pl.Boolean).fill_null(False)
    return gt.filter(keep).sort("image_id", "gt_order")


def match_proposal_shard(gt: pl.DataFrame, proposals: pl.DataFrame, protocol: ProposalProtocol):
    """Match one shard; return ``(gt_matches, image_counts)`` (schemas in :mod:`evalengine.schema`)."""
    gt = evaluated_gt(gt, protocol)
    budgets = np.array(protocol.budgets, np.int64)
    ranked = proposals.filter(pl.col("rank").is_not_null() & (pl.col("rank") <= int(budgets[-1])))
    gt_image = column_array(gt, "image_id")
    iou, rank, best, best_rank = greedy_by_image(gt_image, corners(gt),
                                                 column_array(ranked, "image_id"),
                                                 corners(ranked), budgets)
    n_b = len(budgets)
    gt_matches = pl.DataFrame({
        "image_id": np.repeat(gt_image, n_b),
        "gt_id": np.repeat(gt.get_column("gt_id").to_numpy(), n_b),
        "category_id": np.repeat(gt.get_column("category_id").to_numpy(), n_b),
        "budget": np.tile(budgets, gt.height),
        "iou": iou.reshape(-1),
        "matched_rank": rank.reshape(-1),
        "best_iou": best.reshape(-1),
        "best_rank": best_rank.reshape(-1),
    }).with_columns(pl.col("matched_rank", "best_rank").replace(0, None)).cast(schema.PROPOSAL_GT_MATCHES)
    return gt_matches, image_counts(ranked, protocol.budgets)


def image_counts(proposals: pl.DataFrame, budgets) -> pl.DataFrame:
    """Proposals evaluated per image and budget: min(budget, ranked proposals of the image)."""
    per_image = proposals.filter(pl.col("rank").is_not_null()).group_by("image_id").len("n_ranked")
    return (per_image.join(pl.DataFrame({"budget": list(budgets)}), how="cross")
            .select("image_id", "budget", pl.min_horizontal("n_ranked", "budget").alias("n_proposals"))
            .cast(schema.PROPOSAL_IMAGE_COUNTS).sort("image_id", "budget"))


def as_detections(proposals: pl.DataFrame, ordering: str, default_category: int) -> pl.DataFrame:
    """Ranked proposals (duplicates left out) as detections for the ``coco`` protocol with ``useCats=0``.

    A run ordered by descending score keeps its scores and categories, so the order is pycocotools' own
    (score, then category, then file position — the order ``loadRes`` + ``evaluateImg`` give with
    ``useCats=0``); any other run gets ``score = −rank``, so its own order is kept. Proposals without a
    category count as ``default_category``."""
    score = pl.col("score") if ordering == "score-desc" else -pl.col("rank").cast(pl.Float64)
    return (proposals.filter(pl.col("rank").is_not_null())
            .select(pl.col("proposal_id").alias("det_id"), "image_id",
                    pl.col("category_id").fill_null(default_category), score.alias("score"), "x", "y", "w", "h",
                    (pl.col("w") * pl.col("h")).alias("area"))
            .cast(schema.DT))
