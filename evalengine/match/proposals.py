"""The Hosang protocol: proposal-to-ground-truth matching for recall at every budget (Hosang et al., TPAMI 2016,
§4.1, App. A).

Per image and budget N, the top-N ranked proposals are matched to all the image's ground truths,
class-agnostically, by continuous-box IoU, in two ways at once (:mod:`evalengine.match.greedy_iou`): ``iou``, the
greedy one-to-one assignment of the toolbox's ``closest_candidates.m`` (0 for a ground truth left without a
partner), and ``best_iou``, the best IoU over the top N, one proposal serving several ground truths (ABO, Wang et
al.'s hits).

``iou_type="segm"``: proposals and ground truths are masks, the similarity their mask IoU
(:func:`evalengine.geometry.masks.mask_iou_blocks`, ``maskUtils.iou`` with no crowd) handed to the same assignment; the
``best_iou`` column is then Pont-Tuset & Marques' best Jaccard per object and budget (§2.3, ``object_best``). With
``boundary_f``, ``best_fb`` is their best F̃b per object and budget, one proposal serving several objects, and
``best_fb_rank`` the first proposal giving it (:func:`evalengine.match.shapes.boundary_f_similarity`; null without).
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError, check_option
from evalengine.geometry.boundary_pr import MORPH_TOLERANCE
from evalengine.geometry.boxes import corners
from evalengine.match.greedy_iou import best_blocks_by_image, greedy_blocks_by_image, greedy_by_image
from evalengine.match.protocol import Protocol, box_keyed, column_array, positive_integers, real_numbers
from evalengine.match.shape_columns import SHAPE_COLUMNS, boundary_f_similarity, mask_similarity, sources, with_shapes

# round(10.^(0:0.5:4)) of the toolbox
HOSANG_BUDGETS = (1, 3, 10, 32, 100, 316, 1000, 3162, 10000)
# MCG's benchmark (Pont-Tuset & Marques §2.3): [10:5:100, 125:25:1000, 1500:500:6000, 100000]
PONT_TUSET_BUDGETS = (*range(10, 101, 5), *range(125, 1001, 25), *range(1500, 6001, 500), 100000)
IOU_TYPES = ("bbox", "segm")
_MASKS = SHAPE_COLUMNS["segm"]["gt"]


@dataclass(frozen=True)
class ProposalProtocol(Protocol):
    """Hosang et al.'s recall protocol: ``budgets`` (proposals per image), and which ground truth counts.

    Their choices: every VOC box, difficult ones included ("our goal is to measure maximum recall"), and COCO
    without crowd annotations, which are dropped before matching (not treated as ignore regions).
    ``include_difficult`` applies when the ground truth has a ``difficult`` field. ``iou_type``: ``bbox`` (boxes) or
    ``segm`` (masks of a proposal run ingested with segmentations, against the ground truth's masks).
    ``boundary_f`` (masks only): each object's best F̃b too, with the dilation ``fb_tolerance`` (a fraction of the
    image diagonal below 1, pixels from 1; DAVIS's 0.008 by default: the paper's text says 8 %, spec §1.4).
    """

    budgets: tuple = HOSANG_BUDGETS
    drop_crowd: bool = True
    include_difficult: bool = True
    iou_type: str = "bbox"
    boundary_f: bool = False
    fb_tolerance: float = MORPH_TOLERANCE
    name: ClassVar[str] = "hosang"
    sides: ClassVar[tuple] = ("gt", "images")
    table_version: ClassVar[int] = 2  # 2: best_fb, best_fb_rank

    def __post_init__(self):
        budgets = tuple(sorted(set(positive_integers("budgets", self.budgets))))
        if not budgets:
            raise ProtocolError(f"budgets: positive integers are needed, got {list(self.budgets)}")
        object.__setattr__(self, "budgets", budgets)
        check_option("iou_type", self.iou_type, IOU_TYPES, ProtocolError)
        tolerance = real_numbers("fb_tolerance", [self.fb_tolerance])[0]
        if not 0 < tolerance < float("inf"):
            raise ProtocolError(f"fb_tolerance: a positive number is needed, got {self.fb_tolerance!r}")
        object.__setattr__(self, "fb_tolerance", tolerance)
        if self.boundary_f and self.iou_type != "segm":
            raise ProtocolError("boundary_f: F̃b compares mask boundaries; it needs iou_type 'segm' (on boxes it is "
                                "meaningless, spec-segmentation §2)")

    def match_params(self) -> dict:
        """The parameters; ``iou_type`` only when masks, the F̃b ones only when asked for (so that the tables of
        earlier stores keep their keys)."""
        params = box_keyed(super().match_params())
        if self.boundary_f:
            return params
        return {k: v for k, v in params.items() if k not in ("boundary_f", "fb_tolerance")}

    def shard_inputs(self, layout, run: str) -> tuple:
        layout.check_proposal_run(run)
        paths = layout.paths
        inputs = [{"gt": str(paths.gt_shard(k)), "proposals": str(paths.proposal_shard(run, k))}
                  for k in range(layout.n_shards)]
        if self.iou_type == "segm":
            origin = {"gt": sources(layout, run)["gt"], "proposals": sources(layout, run)["dt"]}
            for side, file in (inputs[0].items() if inputs else ()):
                missing = [c for c in _MASKS if c not in pl.scan_parquet(file).collect_schema()]
                if missing:
                    whose = "the ground truth" if side == "gt" else f"proposal run '{run}'"
                    raise ProtocolError(f"{origin[side]}: {whose} has no masks ('segmentation'), which iou_type "
                                        f"'segm' needs (missing: {', '.join(missing)})")
            inputs = [{**files, "gt_shapes": files["gt"], "proposal_shapes": files["proposals"]} for files in inputs]
        return inputs, {"sources": sources(layout, run)}

    def input_columns(self) -> dict:
        return {"gt_shapes": list(_MASKS), "proposal_shapes": list(_MASKS)}

    def match_shard(self, tables: dict, context: dict) -> dict:
        gt, proposals = tables["gt"], tables["proposals"]
        where = None
        if self.iou_type == "segm":
            gt = with_shapes(gt, tables["gt_shapes"], _MASKS)
            proposals = with_shapes(proposals, tables["proposal_shapes"], _MASKS)
            where = {"gt": (f"{context['sources']['gt']}: annotation", "gt_id"),
                     "dt": (f"{context['sources']['dt']}: proposal at position", "proposal_id")}
        gt_matches, counts = match_proposal_shard(gt, proposals, self, where)
        return {"gt": gt_matches, "images": counts}


def evaluated_gt(gt: pl.DataFrame, protocol: ProposalProtocol) -> pl.DataFrame:
    """The ground truths recall is measured on, in (image, file) order."""
    keep = pl.lit(True)
    if protocol.drop_crowd:
        keep &= ~pl.col("iscrowd")
    if not protocol.include_difficult and "difficult" in gt.columns:
        keep &= ~pl.col("difficult").cast(pl.Boolean).fill_null(False)
    return gt.filter(keep).sort("image_id", "gt_order")


def match_proposal_shard(gt: pl.DataFrame, proposals: pl.DataFrame, protocol: ProposalProtocol,
                         where: dict | None = None):
    """Match one shard; return ``(gt_matches, image_counts)`` (schemas in :mod:`evalengine.schema`). ``where``: how
    errors name a row (masks: :func:`evalengine.match.shape_columns.places`)."""
    gt = evaluated_gt(gt, protocol)
    budgets = np.array(protocol.budgets, np.int64)
    ranked = proposals.filter(pl.col("rank").is_not_null() & (pl.col("rank") <= int(budgets[-1])))
    gt_image, proposal_image = column_array(gt, "image_id"), column_array(ranked, "image_id")
    if protocol.iou_type == "segm":
        where = where or {"gt": ("annotation", "gt_id"), "dt": ("proposal at position", "proposal_id")}

        def similarity(groups):  # plain IoU for every ground truth, as the box IoU here (no crowd rule)
            return mask_similarity(gt, ranked, np.zeros(gt.height, np.bool_), groups, protocol, where)
        iou, rank, best, best_rank = greedy_blocks_by_image(gt_image, proposal_image, budgets, similarity)
    else:
        iou, rank, best, best_rank = greedy_by_image(gt_image, corners(gt), proposal_image, corners(ranked), budgets)
    n_b = len(budgets)
    fb = {"best_fb": pl.lit(None, pl.Float64), "best_fb_rank": pl.lit(None, pl.Int32)}
    if protocol.boundary_f:
        fb = dict(zip(fb, (pl.Series(a.reshape(-1)) for a in best_blocks_by_image(
            gt_image, proposal_image, budgets,
            lambda groups: boundary_f_similarity(gt, ranked, groups, protocol.fb_tolerance, where)))))
    gt_matches = pl.DataFrame({
        "image_id": np.repeat(gt_image, n_b),
        "gt_id": np.repeat(gt.get_column("gt_id").to_numpy(), n_b),
        "category_id": np.repeat(gt.get_column("category_id").to_numpy(), n_b),
        "budget": np.tile(budgets, gt.height),
        "iou": iou.reshape(-1),
        "matched_rank": rank.reshape(-1),
        "best_iou": best.reshape(-1),
        "best_rank": best_rank.reshape(-1),
    }).with_columns(**fb).with_columns(pl.col("matched_rank", "best_rank", "best_fb_rank").replace(0, None)
                                       ).cast(schema.PROPOSAL_GT_MATCHES)
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
