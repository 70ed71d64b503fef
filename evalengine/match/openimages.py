"""The OpenImages protocol (TF Object Detection API ``OpenImagesChallengeEvaluator`` / ``OpenImagesDetectionEvaluator``
and ``per_image_evaluation.py``): its parameters and one shard's matching.

Per image, as the reference's ``add_single_detected_image_info``:

- with ``verified_labels`` (the challenge), a detection is evaluated only where its class is verified for its image: an
  image-level label (positive or negative, after the hierarchy expansion; ``image_labels`` table) or a ground-truth
  box of the class; the others are dropped (neither TP nor FP). Without (OpenImages V2), every class is evaluated;
- detections with ``XMin >= XMax`` or ``YMin >= YMax`` are dropped (``_remove_invalid_boxes``), and so are scores of
  −10 or less (the ``score_threshold`` of its ``non_max_suppression``, which at IoU 1.0 only sorts);
- per (class, image) the detections are ordered as ``np.argsort(scores)[::-1]`` over them in file order: NumPy's
  (unstable) sort decides among equal scores, so groups with ties are ordered by NumPy itself; the first
  ``max_dets`` (10,000) are kept;
- boxes are compared on the normalised corners exactly as given (``x``, ``y``, ``x_max``, ``y_max``) and assigned by
  :func:`evalengine.match.group_of.assign_group_of`.

Tables: ``dt`` (one row per evaluated detection: ``tp_bits``/``ignored_bits`` as the COCO tables, one area range and
one threshold; ``dt_rank`` its position in the evaluator's order; ``outcome``) and ``gt`` (one row per ground truth:
``ignored_bits`` for a difficult one, ``matched_bits``, ``group_of``, the group-of box's ``group_score`` and
``corloc``, :func:`cor_loc_hits`).
"""

from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import polars as pl
import pyarrow as pa

from evalengine import schema
from evalengine.arrow import arrow_array
from evalengine.errors import ProtocolError, check_option
from evalengine.geometry.box_iou import OPENIMAGES, box_iou_blocks
from evalengine.geometry.masks import openimages_overlap_blocks, spans
from evalengine.match.coco import _fixed_list
from evalengine.match.group_of import BOX_MATCHED, DIFFICULT, GROUP_OF, TRUE_POSITIVE, assign_group_of
from evalengine.match.groups import block_chunks, merge_groups
from evalengine.io import rle
from evalengine.match.shapes import _masks
from evalengine.match.protocol import Protocol, column_array, positive_integers, real_numbers, unit_thresholds

IOU_TYPES = ("bbox", "segm")
MASK_COLUMNS = ("mask_h", "mask_w", "mask_rle")
SCORE_FLOOR = -10.0  # np_box_list_ops.non_max_suppression(score_threshold=-10.0) keeps scores above it
CORNERS = ("x", "y", "x_max", "y_max")
IGNORED = (DIFFICULT, GROUP_OF, BOX_MATCHED)


@dataclass(frozen=True)
class OpenImagesProtocol(Protocol):
    """OpenImages matching. Defaults: the detection challenge (``OpenImagesDetectionChallengeEvaluator``: IoU 0.5,
    ``group_of_weight`` 1, verified image-level labels). ``OpenImagesProtocol.v2()``: OpenImages V2
    (``OpenImagesDetectionEvaluator``: group-of boxes pure ignore, no image-level labels)."""

    iou_threshold: float = 0.5
    group_of_weight: float = 1.0
    verified_labels: bool = True
    max_dets: int = 10000
    iou_type: str = "bbox"
    name: ClassVar[str] = "openimages"
    sides: ClassVar[tuple] = ("dt", "gt")
    use_cats: ClassVar[bool] = True
    table_version: ClassVar[int] = 2  # 2: gt ``corloc``

    def __post_init__(self):
        object.__setattr__(self, "iou_threshold", unit_thresholds("iou_threshold", [self.iou_threshold])[0])
        weight = real_numbers("group_of_weight", [self.group_of_weight])[0]
        if weight < 0:
            raise ProtocolError(f"group_of_weight must be >= 0, got {weight}")
        object.__setattr__(self, "group_of_weight", weight)
        object.__setattr__(self, "max_dets", positive_integers("max_dets", [self.max_dets])[0])
        check_option("iou_type", self.iou_type, IOU_TYPES)
        if not isinstance(self.verified_labels, (bool, np.bool_)):
            raise ProtocolError(f"verified_labels must be True or False, got {self.verified_labels!r}")

    @classmethod
    def v2(cls, **params) -> "OpenImagesProtocol":
        return cls(**{"group_of_weight": 0.0, "verified_labels": False, **params})

    @classmethod
    def segmentation_challenge(cls, **params) -> "OpenImagesProtocol":
        """``OpenImagesInstanceSegmentationChallengeEvaluator``: masks, group-of boxes pure ignore."""
        return cls(**{"group_of_weight": 0.0, "iou_type": "segm", **params})

    def shard_inputs(self, layout, run: str) -> tuple:
        """A detection run's shards with the ground truth and (``verified_labels``) the image-level labels."""
        layout.check_run(run)
        paths = layout.paths
        inputs = [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k))} for k in range(layout.n_shards)]
        if self.verified_labels:
            if not paths.image_labels_shard(0).is_file():
                raise ProtocolError(f"{layout.root}: no image_labels table (the challenge protocol needs verified "
                                    "image-level labels; use OpenImagesProtocol.v2() without them)")
            for k, shard in enumerate(inputs):
                shard["image_labels"] = str(paths.image_labels_shard(k))
        return inputs, {}

    def input_columns(self) -> dict:
        boxes = ["image_id", "category_id", *CORNERS, *(MASK_COLUMNS if self.iou_type == "segm" else ())]
        return {"gt": ["gt_id", *boxes, "iscrowd", "difficult"], "dt": ["det_id", "score", *boxes],
                "image_labels": ["image_id", "category_id"]}

    def match_shard(self, tables: dict, context: dict) -> dict:
        dt_matches, gt_matches = match_shard(tables["gt"], tables["dt"], tables.get("image_labels"), self)
        return {"dt": dt_matches, "gt": gt_matches}


def evaluated_detections(gt: pl.DataFrame, dt: pl.DataFrame, labels: pl.DataFrame | None,
                         protocol: OpenImagesProtocol) -> pl.DataFrame:
    """The detections the evaluator keeps, in (category, image, evaluator order), with ``dt_rank``."""
    dt = dt.filter((pl.col("x") < pl.col("x_max")) & (pl.col("y") < pl.col("y_max")) & (pl.col("score") > SCORE_FLOOR))
    if labels is not None:
        verified = pl.concat([labels.select("image_id", "category_id"), gt.select("image_id", "category_id")]).unique()
        dt = dt.join(verified, on=["image_id", "category_id"], how="semi")
    # a stable ascending sort reversed: equal scores in reverse file order; groups with ties get NumPy's own order
    # (-0.0 ties with 0.0, as in NumPy's sort)
    dt = dt.with_columns(pl.col("score") + 0.0).sort(["category_id", "image_id", "score", "det_id"], descending=True)
    dt = dt.sort(["category_id", "image_id"], maintain_order=True)
    tied = dt.select(pl.col("score").is_duplicated().over("category_id", "image_id").any()).item()
    if tied:
        dt = _numpy_tie_order(dt)
    dt = dt.with_columns(pl.int_range(pl.len()).over("category_id", "image_id").cast(pl.Int32).alias("dt_rank"))
    return dt.filter(pl.col("dt_rank") < protocol.max_dets)


def _numpy_tie_order(dt: pl.DataFrame) -> pl.DataFrame:
    """Reorder the (category, image) groups that hold equal scores by ``np.argsort(scores)[::-1]`` over their
    detections in file order, as the reference sorts (its tie order is NumPy's: an unstable sort)."""
    keys = pl.struct("category_id", "image_id")
    with_ties = dt.filter(pl.col("score").is_duplicated().over("category_id", "image_id"))
    groups = with_ties.select(keys.alias("key")).unique().get_column("key")
    tied = dt.with_columns(keys.is_in(groups.implode()).alias("_tied"))
    untouched = tied.filter(~pl.col("_tied")).drop("_tied")
    reordered = []
    for _, frame in tied.filter(pl.col("_tied")).drop("_tied").sort("det_id").group_by(
            ["category_id", "image_id"], maintain_order=True):
        order = np.argsort(frame.get_column("score").to_numpy())[::-1]
        reordered.append(frame[order])
    dt = pl.concat([untouched, *reordered]).with_row_index("_at")
    # back to (category, image) order, each group's rows in the order just made
    return dt.sort(["category_id", "image_id", "_at"]).drop("_at")


def _ground_truth_masks(gt: pl.DataFrame, mask_mode: bool) -> tuple:
    """``(counts, span, masked)`` of the ground truth's masks; a ground truth without one (null: an empty string) has no
    runs, area 0 (the reference: a mask of zeros is none)."""
    if not mask_mode:
        return None, None, np.zeros(gt.height, np.bool_)
    counts, offsets = rle.decode_strings(gt.get_column("mask_rle").to_arrow())
    return counts, spans(offsets), rle.area(counts, offsets) > 0


def _overlap_blocks(dt: pl.DataFrame, gt_box, gt_masks: tuple, group_of, groups: tuple, mask_mode: bool):
    """``(lo, hi) -> (values, offsets)``: the reference's overlaps of each group's detections and ground truth (IoU;
    IoA into group-of boxes; masks first in mask mode)."""
    gt_start, gt_len, dt_start, dt_len = groups
    dt_box = np.ascontiguousarray(dt.select(CORNERS).to_numpy().astype(np.float64)).reshape(-1, 4)
    if not mask_mode:
        return lambda lo, hi: box_iou_blocks(OPENIMAGES, dt_box, gt_box, group_of, gt_start, gt_len, dt_start, dt_len,
                                             lo, hi)
    g_counts, g_span, masked = gt_masks
    if dt.height:
        d_counts, d_span, _, d_area, _ = _masks(dt, np.ones(dt.height, np.bool_), ("detection", "det_id"), "segm")
    else:
        d_counts, d_span, d_area = np.zeros(0, np.uint32), np.zeros((0, 2), np.int64), np.zeros(0, np.int64)
    return lambda lo, hi: openimages_overlap_blocks(d_counts, d_span, d_area, dt_box, g_counts, g_span, masked, gt_box,
                                                    group_of, gt_start, gt_len, dt_start, dt_len, lo, hi)


def _groups(gt: pl.DataFrame, dt: pl.DataFrame) -> tuple:
    groups = merge_groups(column_array(gt, "category_id"), column_array(gt, "image_id"),
                          column_array(dt, "category_id"), column_array(dt, "image_id"), True)
    return tuple(np.ascontiguousarray(groups[:, i]) for i in range(4))


@numba.njit(cache=True, nogil=True)
def _located(values, offsets, lo, hi, gt_start, gt_len, dt_len, usable, threshold, hit):
    """``hit[g]`` for the ground truth of groups ``[lo, hi)`` that hold one detection: the detection's largest overlap
    with them (0 with an unusable one: a ground truth without a mask in mask mode) is ``>= threshold``."""
    for k in range(lo, hi):
        if gt_len[k] == 0 or dt_len[k] == 0:
            continue
        best = -1.0
        for g in range(gt_len[k]):
            value = values[offsets[k - lo] + g] if usable[gt_start[k] + g] else 0.0
            best = max(best, value)
        hit[gt_start[k]:gt_start[k] + gt_len[k]] = best >= threshold


def cor_loc_hits(gt: pl.DataFrame, dt: pl.DataFrame, gt_box, gt_masks: tuple, protocol: OpenImagesProtocol):
    """Per ground truth (in ``gt``'s order): whether its (class, image) is correctly localised, as
    ``per_image_evaluation._compute_is_class_correctly_detected_in_image``: the class's detection of largest score on
    the image (``np.argmax``: the first in file order among equal scores; over every valid box, before the score floor
    and the cap) has IoU (masks: mask IoU) ``>= iou_threshold`` with some ground truth of the class, difficult and
    group-of ones included (plain IoU: CorLoc treats them as regular boxes)."""
    valid = dt.filter((pl.col("x") < pl.col("x_max")) & (pl.col("y") < pl.col("y_max")))
    top = (valid.with_columns(pl.col("score") + 0.0).sort(["category_id", "image_id", "score", "det_id"],
                                                           descending=[False, False, True, False])
           .unique(["category_id", "image_id"], keep="first", maintain_order=True))
    mask_mode = protocol.iou_type == "segm"
    groups = _groups(gt, top)
    regular = np.zeros(gt.height, np.bool_)
    blocks = _overlap_blocks(top, gt_box, gt_masks, regular, groups, mask_mode)
    usable = gt_masks[2] if mask_mode else np.ones(gt.height, np.bool_)
    threshold = np.float32(protocol.iou_threshold) if mask_mode else protocol.iou_threshold
    hit = np.zeros(gt.height, np.bool_)
    for lo, hi in block_chunks(groups[1], groups[3]):
        values, offsets = blocks(lo, hi)
        _located(values, offsets, lo, hi, groups[0], groups[1], groups[3], usable, threshold, hit)
    return hit


def match_shard(gt: pl.DataFrame, dt: pl.DataFrame, labels: pl.DataFrame | None, protocol: OpenImagesProtocol):
    """Match one shard; ``(dt_matches, gt_matches)`` (see the module's docstring), rows in (category, image,
    evaluator order) and (category, image, gt_id) order."""
    gt = gt.sort("category_id", "image_id", "gt_id")
    mask_mode = protocol.iou_type == "segm"
    gt_box = np.ascontiguousarray(gt.select(CORNERS).to_numpy().astype(np.float64)).reshape(-1, 4)
    gt_masks = _ground_truth_masks(gt, mask_mode)
    masked = gt_masks[2]
    located = cor_loc_hits(gt, dt, gt_box, gt_masks, protocol)
    dt = evaluated_detections(gt, dt, labels if protocol.verified_labels else None, protocol)
    groups = _groups(gt, dt)
    gt_start, gt_len, dt_start, dt_len = groups
    group_of = gt.get_column("iscrowd").fill_null(False).to_numpy().astype(np.bool_)
    difficult = gt.get_column("difficult").fill_null(False).to_numpy().astype(np.bool_)
    out = (np.zeros(dt.height, np.int8), np.full(dt.height, -1, np.int64), np.full(dt.height, np.nan),
           np.zeros(gt.height, np.bool_), np.full(gt.height, np.nan))
    score = column_array(dt, "score", "float64")
    thresholds = np.array([np.float32(protocol.iou_threshold), protocol.iou_threshold])
    blocks = _overlap_blocks(dt, gt_box, gt_masks, group_of, groups, mask_mode)
    for lo, hi in block_chunks(gt_len, dt_len):
        values, offsets = blocks(lo, hi)
        assign_group_of(values, offsets, lo, hi, gt_start, gt_len, dt_start, dt_len, score, group_of, difficult,
                        masked, mask_mode, thresholds, out)
    outcome, partner, overlap, gt_matched, group_score = out
    has_partner = partner >= 0
    gt_ids = column_array(gt, "gt_id")
    partner_id = gt_ids[np.where(has_partner, partner, 0)] if gt.height else partner
    one = np.uint64(1)
    dt_matches = pl.from_arrow(pa.table({
        **{c: dt.get_column(c).to_arrow() for c in ("image_id", "category_id", "det_id", "score", "dt_rank")},
        "tp_bits": _fixed_list(np.where(outcome == TRUE_POSITIVE, one, 0).astype(np.uint64).reshape(-1, 1)),
        "ignored_bits": _fixed_list(np.where(np.isin(outcome, IGNORED), one, 0).astype(np.uint64).reshape(-1, 1)),
        "matched_gt_id": _fixed_list(partner_id.reshape(-1, 1), has_partner.reshape(-1, 1)),
        "matched_iou": _fixed_list(overlap.reshape(-1, 1), has_partner.reshape(-1, 1)),
        "area_iou": _fixed_list(overlap.reshape(-1, 1), has_partner.reshape(-1, 1)),
        "outcome": arrow_array(outcome),
    })).cast(schema.OPENIMAGES_DT_MATCHES)
    gt_matches = pl.from_arrow(pa.table({
        **{c: gt.get_column(c).to_arrow() for c in ("image_id", "category_id", "gt_id")},
        "ignored_bits": arrow_array(difficult.astype(np.uint64) | np.where(mask_mode & ~masked, 2, 0).astype(np.uint64)),
        "matched_bits": _fixed_list(gt_matched.astype(np.uint64).reshape(-1, 1)),
        "group_of": arrow_array(group_of),
        "group_score": arrow_array(group_score, ~np.isnan(group_score)),
        "corloc": arrow_array(located),
    })).cast(schema.OPENIMAGES_GT_MATCHES)
    return dt_matches, gt_matches
