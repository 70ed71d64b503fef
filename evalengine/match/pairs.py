"""The ``pairs`` table: per image, every (detection, ground truth) pair of ANY classes whose box IoU is at least
``min_iou`` — the one table the cross-class diagnoses read (TIDE's Cls / Both / Bkg, Hoiem's Sim / Oth, Borji's
steps, confusion matrices).

- IoU is pycocotools' box IoU (``bbIou``); for a crowd ground truth it is, as there, the intersection over the
  detection's area, and the row says ``gt_iscrowd`` (TIDE's ignore regions, COCO's crowd). With ``iou_type="segm"``
  it is the mask IoU, crowd likewise (``maskUtils.iou``, as tidecv's mask mode;
  :func:`evalengine.match.shapes.mask_similarity`). The COCO ``ignore`` field and the areas are joined from ``gt``
  by ``gt_id`` when an analysis needs them.
- The comparison is ``iou >= min_iou``: with the default 0.1 a pair at exactly TIDE's background threshold is
  present (its Loc test is ``0.1 <= IoU``), and "no pair" means "IoU < 0.1 with everything", so its Bkg test
  (``IoU <= 0.1``) is decided by the pairs with IoU > 0.1.
- Every detection of the run takes part, of any category and rank: each analysis applies its own cap (COCO's per
  image and category, TIDE's per image) from the ``dt`` table's scores.
- A detection's outcome under a COCO protocol is not copied here: join ``matches/protocol=coco…/dt`` on
  ``(image_id, det_id)`` (``tp_bits``, ``matched_gt_id``), so that one pairs table serves every COCO parameter set.

Rows are O(detections): a box overlaps few objects at IoU >= 0.1. They come per image in (det_id, ground-truth
file order) order, identical whatever the shard count.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError, check_option
from evalengine.geometry.box_iou import COCO, box_iou_blocks
from evalengine.geometry.boxes import xywh
from evalengine.match.groups import block_chunks, file_order_by_image, merge_groups
from evalengine.match.protocol import Protocol, box_keyed, column_array, unit_thresholds
from evalengine.match.shape_columns import SHAPE_COLUMNS, mask_similarity, places, shape_tables, sources, with_shapes

IOU_TYPES = ("bbox", "segm")


@dataclass(frozen=True)
class PairsProtocol(Protocol):
    """Candidate (detection, ground truth) pairs of any classes with IoU >= ``min_iou`` (in [0, 1]; 0 keeps every
    pair of the image); ``iou_type``: boxes (``bbox``) or masks (``segm``)."""

    min_iou: float = 0.1
    iou_type: str = "bbox"
    name: ClassVar[str] = "pairs"
    sides: ClassVar[tuple] = ("pairs",)

    def __post_init__(self):
        object.__setattr__(self, "min_iou", unit_thresholds("min_iou", [self.min_iou], zero=True)[0])
        check_option("iou_type", self.iou_type, IOU_TYPES, ProtocolError)

    def match_params(self) -> dict:
        """The parameters; ``iou_type`` only for masks (so that box tables keep their keys)."""
        return box_keyed(super().match_params())

    def shard_inputs(self, layout, run: str) -> tuple:
        layout.check_run(run)
        paths = layout.paths
        inputs = [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k))} for k in range(layout.n_shards)]
        if self.iou_type == "bbox":
            return inputs, {}
        stored = shape_tables(layout, run, self.iou_type, inputs[0]) if inputs else []
        inputs = [{**files, **{f"{side}_shapes": files[side] for side in stored}} for files in inputs]
        return inputs, {"sources": sources(layout, run)}

    def input_columns(self) -> dict:
        box, shapes = ["x", "y", "w", "h"], SHAPE_COLUMNS[self.iou_type]
        return {"dt": ["image_id", "category_id", "det_id", *box],
                "gt": ["image_id", "category_id", "gt_id", *box, "iscrowd", "gt_order"],
                "gt_shapes": list(shapes["gt"]), "dt_shapes": list(shapes["dt"])}

    def match_shard(self, tables: dict, context: dict) -> dict:
        gt, dt, where = tables["gt"], tables["dt"], None
        if self.iou_type != "bbox":
            gt = with_shapes(gt, tables.get("gt_shapes"), SHAPE_COLUMNS[self.iou_type]["gt"])
            dt = with_shapes(dt, tables.get("dt_shapes"), SHAPE_COLUMNS[self.iou_type]["dt"])
            where = places(context)
        return {"pairs": pairs_shard(gt, dt, self, where)}


def pairs_shard(gt: pl.DataFrame, dt: pl.DataFrame, protocol: PairsProtocol, where: dict | None = None) -> pl.DataFrame:
    """One shard's pairs (schema :data:`evalengine.schema.PAIRS`): the IoU blocks of each image (boxes, or masks for
    a ``segm`` ``protocol``; ``where``: how errors name a row), in chunks of bounded size
    (:func:`evalengine.match.groups.block_chunks`), filtered at its ``min_iou``."""
    gt = gt.sort("image_id", "gt_order")
    dt = dt[file_order_by_image(column_array(dt, "image_id"), column_array(dt, "det_id"))[0]]
    gt_image, dt_image = column_array(gt, "image_id"), column_array(dt, "image_id")
    groups = merge_groups(gt_image, gt_image, dt_image, dt_image, False)
    gt_start, gt_len, dt_start, dt_len = (np.ascontiguousarray(groups[:, i]) for i in range(4))
    gt_crowd = column_array(gt, "iscrowd", np.bool_)
    if protocol.iou_type == "bbox":
        gt_box, dt_box = xywh(gt), xywh(dt)

        def blocks(lo, hi):
            return box_iou_blocks(COCO, dt_box, gt_box, gt_crowd, gt_start, gt_len, dt_start, dt_len, lo, hi)
    else:
        where = where or {"gt": ("annotation", "gt_id"), "dt": ("result", "det_id")}
        blocks = mask_similarity(gt, dt, gt_crowd, (gt_start, gt_len, dt_start, dt_len), protocol, where)
    dt_rows, gt_rows, ious = [], [], []
    for lo, hi in block_chunks(gt_len, dt_len):
        values, offsets = blocks(lo, hi)
        at = np.flatnonzero(values >= protocol.min_iou)
        group = np.searchsorted(offsets, at, side="right") - 1 + lo
        local = at - offsets[group - lo]
        n_gt = gt_len[group]
        dt_rows.append(dt_start[group] + local // n_gt)
        gt_rows.append(gt_start[group] + local % n_gt)
        ious.append(values[at])
    d = np.concatenate(dt_rows) if dt_rows else np.zeros(0, np.int64)
    g = np.concatenate(gt_rows) if gt_rows else np.zeros(0, np.int64)
    return pl.DataFrame({
        "image_id": dt_image[d],
        "det_id": column_array(dt, "det_id")[d],
        "gt_id": column_array(gt, "gt_id")[g],
        "dt_category_id": column_array(dt, "category_id")[d],
        "gt_category_id": column_array(gt, "category_id")[g],
        "iou": np.concatenate(ious) if ious else np.zeros(0),
        "gt_iscrowd": gt_crowd[g],
    }, schema=schema.PAIRS)
