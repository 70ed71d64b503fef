"""The PASCAL VOC protocol (the MATLAB devkit's ``VOCevaldet.m``; py-faster-rcnn's ``voc_eval.py`` as options): its
parameters and one shard's matching.

Per (category, image) group the detections are sorted by (−score, det_id) — the devkit's stable sort of a class's
detections in result-file order —, the similarity step computes the devkit's "+1 pixel" IoU
(:data:`evalengine.geometry.box_iou.VOC`) and :func:`evalengine.match.greedy_voc.assign_voc` assigns them. No
detection cap, no area range: the table has one area range, ``all``, so that the queries written for COCO tables
(``tp_bits[0]``, ``area_iou[0]``) read VOC tables unchanged.

Boxes are stored continuous (``x, y, w, h``); the devkit's 1-based inclusive corners are ``x1 = x + 1``,
``x2 = x + w``. For boxes read from VOC XML or result files (:func:`evalengine.schema.from_pixel_inclusive`) these are
the file's numbers exactly when they are integers (below 2^53) or at least 1 with ``x2 - x1`` exact; other
non-integer corners can come back one ulp off, so an IoU may differ from ``voc_eval.py``'s in its last bits.
COCO-format boxes are read as continuous: a box ``[x, y, w, h]`` has devkit corners ``x + 1 … x + w``.
"""

import math
from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl
import pyarrow as pa

from evalengine import schema
from evalengine.arrow import arrow_array
from evalengine.errors import ProtocolError
from evalengine.geometry.box_iou import VOC, box_iou_blocks
from evalengine.match.coco import _fixed_list
from evalengine.match.greedy_voc import assign_voc
from evalengine.match.groups import block_chunks, merge_groups, rank_in_group
from evalengine.match.protocol import Protocol, column_array, increasing, unit_thresholds

VOC_IOU_THRESHOLDS = (0.5,)
_BITS = 64


@dataclass(frozen=True)
class VocProtocol(Protocol):
    """PASCAL VOC matching.

    ``iou_thresholds``: one bit each in the match table (the devkit's ``minoverlap`` is 0.5). ``strict``: a
    detection passes at ``IoU > threshold`` (py-faster-rcnn ``voc_eval.py``, ``ovmax > ovthresh``) instead of the
    MATLAB devkit's ``ov >= minoverlap``. ``use_difficult``: difficult objects count as regular ones
    (``voc_eval.py``'s ``use_diff``).
    """

    iou_thresholds: tuple = VOC_IOU_THRESHOLDS
    strict: bool = False
    use_difficult: bool = False
    name: ClassVar[str] = "voc"
    sides: ClassVar[tuple] = ("dt", "gt")
    # the devkit's stable sort of a class's detections, in result-file order
    tie_order: ClassVar[tuple] = ("det_id",)
    use_cats: ClassVar[bool] = True  # always per class (what the category-pooling queries ask)

    def __post_init__(self):
        object.__setattr__(self, "iou_thresholds",
                           increasing("iou_thresholds", unit_thresholds("iou_thresholds", self.iou_thresholds)))
        if not 1 <= len(self.iou_thresholds) <= _BITS:
            raise ProtocolError(f"iou_thresholds: between 1 and {_BITS} thresholds are supported, got "
                                f"{len(self.iou_thresholds)}")
        for option in ("strict", "use_difficult"):
            if not isinstance(getattr(self, option), (bool, np.bool_)):
                raise ProtocolError(f"{option} must be True or False, got {getattr(self, option)!r}")

    @property
    def area_ranges(self) -> tuple:
        """One range, every box: the match table's single area slot."""
        return (("all", 0.0, math.inf),)

    def match_params(self) -> dict:
        return {"name": self.name, "iou_thresholds": list(self.iou_thresholds), "strict": bool(self.strict),
                "use_difficult": bool(self.use_difficult)}

    def shard_inputs(self, layout, run: str) -> tuple:
        """A detection run's shards; every shard task shares the category ids."""
        layout.check_run(run)
        paths = layout.paths
        inputs = [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k))} for k in range(layout.n_shards)]
        return inputs, {"category_ids": layout.category_ids()}

    def match_shard(self, tables: dict, context: dict) -> dict:
        dt_matches, gt_matches = match_shard(tables["gt"], tables["dt"], context["category_ids"], self)
        return {"dt": dt_matches, "gt": gt_matches}


def _devkit_corners(frame: pl.DataFrame) -> np.ndarray:
    """The devkit's 1-based inclusive ``x1, y1, x2, y2`` of stored continuous boxes."""
    x, y, w, h = (pl.col(c) for c in ("x", "y", "w", "h"))
    corners = frame.select((x + 1).alias("x1"), (y + 1).alias("y1"), (x + w).alias("x2"), (y + h).alias("y2"))
    corners = corners.to_numpy().astype(np.float64)
    return np.ascontiguousarray(corners).reshape(-1, 4)


def match_shard(gt: pl.DataFrame, dt: pl.DataFrame, category_ids, protocol: VocProtocol):
    """Match one shard; ``(dt_matches, gt_matches)`` in the COCO match tables' schemas, rows in (category, image,
    −score, det_id) order. A store written before ground truth had ``difficult`` reads as having none."""
    wanted = pl.Series(category_ids).implode()
    if "difficult" not in gt.columns:
        gt = gt.with_columns(pl.lit(None, pl.Boolean).alias("difficult"))
    gt = gt.filter(pl.col("category_id").is_in(wanted)).sort("category_id", "image_id", "gt_order")
    score = pl.col("score") + 0.0  # -0.0 ties with 0.0, as in the devkit's sort
    dt = (dt.filter(pl.col("category_id").is_in(wanted))
          .sort([pl.col("category_id"), pl.col("image_id"), score, pl.col("det_id")],
                descending=[False, False, True, False]))
    gt_cat, gt_image = column_array(gt, "category_id"), column_array(gt, "image_id")
    dt_cat, dt_image = column_array(dt, "category_id"), column_array(dt, "image_id")
    groups = merge_groups(gt_cat, gt_image, dt_cat, dt_image, True)
    gt_start, gt_len, dt_start, dt_len = (np.ascontiguousarray(groups[:, i]) for i in range(4))
    n_thr = len(protocol.iou_thresholds)
    out = (np.zeros((dt.height, 1), np.uint64), np.zeros((dt.height, 1), np.uint64),
           np.full((dt.height, n_thr), -1, np.int64), np.zeros((dt.height, n_thr)), np.full((dt.height, 1), np.nan),
           np.zeros(gt.height, np.uint64), np.zeros((gt.height, 1), np.uint64))
    difficult = gt.get_column("difficult").fill_null(False).to_numpy().astype(np.bool_)
    gt_box, dt_box = _devkit_corners(gt), _devkit_corners(dt)
    no_crowd = np.zeros(gt.height, np.bool_)
    for lo, hi in block_chunks(gt_len, dt_len):
        values, offsets = box_iou_blocks(VOC, dt_box, gt_box, no_crowd, gt_start, gt_len, dt_start, dt_len, lo, hi)
        assign_voc(values, offsets, lo, hi, gt_start, gt_len, dt_start, dt_len, difficult,
                   np.array(protocol.iou_thresholds), protocol.strict, protocol.use_difficult, out)
    dt_tp, dt_ignored, dt_partner, dt_iou, dt_area_iou, gt_ignored, gt_matched = out
    gt_ids = column_array(gt, "gt_id")
    has_partner = dt_partner >= 0
    partner_id = gt_ids[np.where(has_partner, dt_partner, 0)] if gt.height else dt_partner
    rank = rank_in_group(dt_image, dt_cat)
    dt_matches = pl.from_arrow(pa.table({
        **{c: dt.get_column(c).to_arrow() for c in ("image_id", "category_id", "det_id", "score")},
        "dt_rank": arrow_array(rank.astype(np.int32)),
        "tp_bits": _fixed_list(dt_tp),
        "ignored_bits": _fixed_list(dt_ignored),
        "matched_gt_id": _fixed_list(partner_id, has_partner),
        "matched_iou": _fixed_list(dt_iou, has_partner),
        "area_iou": _fixed_list(dt_area_iou, ~np.isnan(dt_area_iou)),
    })).cast(schema.dt_matches_schema(1, n_thr))
    gt_matches = pl.from_arrow(pa.table({
        **{c: gt.get_column(c).to_arrow() for c in ("image_id", "category_id", "gt_id")},
        "ignored_bits": arrow_array(gt_ignored),
        "matched_bits": _fixed_list(gt_matched),
    })).cast(schema.gt_matches_schema(1))
    return dt_matches, gt_matches
