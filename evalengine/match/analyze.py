"""COCO analyze (the MATLAB ``CocoEval.analyze`` of cocodataset/cocoapi, after Hoiem et al.'s "Diagnosing Error in
Object Detectors"): its parameters and one shard's matching.

MATLAB's ``analyze`` runs ``evaluate`` several times; this table holds every run's outcome of each detection (the top
``maxDets`` = 100 of its image and category, in COCO's order) per area range, one bit per run in ``tp_bits[a]`` /
``ignored_bits[a]`` (neither: a false positive), bit ``t`` for curve :data:`MATCHED` ``[t]``:

- Loc, C50, C75: the category's own evaluation at IoU .1, .5 and .75 (:class:`~evalengine.match.coco.CocoProtocol`
  with ``ignore_flag``: MATLAB's ``evaluateImg`` ignores a ground truth that is crowd, or has ``ignore`` set, or
  lies outside the area range; pycocotools overwrites ``ignore`` with ``iscrowd``);
- Sim: the category's detections alone, ``useCats = 0``, IoU .1, against the image's ground truths of the
  category's supercategory, those of the other categories set ``ignore = 1``;
- Oth: the same against all the image's ground truths.

In Sim and Oth the ground truths of an image come in MATLAB's order — ``CocoApi`` sorts the annotations by image,
then category, stably (file order within), as pycocotools pools categories with ``useCats = 0`` — then the greedy
kernel puts the regular ones first. An ignored ground truth that is not crowd takes one detection only (MATLAB's
"already matched" test reads ``iscrowd``, not ``ignore``), a crowd one any number.

The ``gt`` side has one row per ground truth of an evaluated category with ``ignored_bits`` (bit ``a``: ignored in
area range ``a`` by MATLAB's rule): its regular ground truths are every curve's recall denominator, Sim and Oth
included (the other categories' ground truths are ignored there).

``iou_type="segm"`` (``"boundary"``): every run compares masks (boundary IoU, Cheng et al.) as the COCO protocol does
(:data:`evalengine.match.coco.SIMILARITY`; crowd: intersection over the detection's mask area), as MATLAB's
``analyze`` does with ``params.iouType = 'segm'``; areas are the stored ones (a ground truth's ``area`` field).
"""

from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import InputError, ProtocolError, check_option
from evalengine.match.coco import (COCO_AREA_RANGES, COCO_RECALL_THRESHOLDS, SIMILARITY, CocoProtocol, assign,
                                   ignore_flags, match_shard, prepare_dt, rules)
from evalengine.match.protocol import Protocol, column_array
from evalengine.match.shape_columns import SHAPE_COLUMNS, places, shape_tables, sources, with_shapes

# every curve of MATLAB's figure, in its order; BG and FN are not matched (BG = Oth's precision > 0, FN = 1)
CURVES = ("C75", "C50", "Loc", "Sim", "Oth", "BG", "FN")
MATCHED = ("Loc", "C50", "C75", "Sim", "Oth")  # bit t of the match table's tp_bits / ignored_bits
CLASS_IOU = (0.1, 0.5, 0.75)  # the category's own evaluation: Loc, C50, C75
CONFUSION_IOU = 0.1  # Sim and Oth
MAX_DETS = 100  # analyze sets params.maxDets = 100
IOU_TYPES = ("bbox", "segm", "boundary")


@dataclass(frozen=True)
class AnalyzeProtocol(Protocol):
    """MATLAB ``analyze``'s parameters: the area ranges and recall thresholds of ``params`` (COCO's by default);
    ``maxDets`` is 100 and the IoU thresholds are fixed by ``analyze``. ``zero_id_quirk``: MATLAB, as pycocotools,
    stores the partner's id and tests it for truth (a match to ground-truth id 0 reads as unmatched). ``iou_type``:
    boxes (``bbox``), masks (``segm``) or boundary IoU (``boundary``)."""

    area_ranges: tuple = COCO_AREA_RANGES
    recall_thresholds: tuple = COCO_RECALL_THRESHOLDS
    zero_id_quirk: bool = True
    iou_type: str = "bbox"
    name: ClassVar[str] = "analyze"
    sides: ClassVar[tuple] = ("dt", "gt")
    tie_order: ClassVar[tuple] = ("image_id", "dt_rank")
    # what metrics.ap.accumulate reads: one bit per matched curve (its IoU threshold), one cap, per category
    iou_thresholds: ClassVar[tuple] = (*CLASS_IOU, CONFUSION_IOU, CONFUSION_IOU)
    max_dets: ClassVar[tuple] = (MAX_DETS,)
    use_cats: ClassVar[bool] = True

    def __post_init__(self):
        """The parameters as :class:`CocoProtocol` checks them (area ranges, recall thresholds)."""
        check_option("iou_type", self.iou_type, IOU_TYPES, ProtocolError)
        checked = self.coco
        object.__setattr__(self, "area_ranges", checked.area_ranges)
        object.__setattr__(self, "recall_thresholds", checked.recall_thresholds)

    @property
    def coco(self) -> CocoProtocol:
        """The category's own evaluation (Loc, C50, C75), with MATLAB's ignore rule."""
        return CocoProtocol(iou_thresholds=CLASS_IOU, recall_thresholds=self.recall_thresholds,
                            area_ranges=self.area_ranges, max_dets=self.max_dets, zero_id_quirk=self.zero_id_quirk,
                            ignore_flag=True, iou_type=self.iou_type)

    def match_params(self) -> dict:
        return {"name": self.name, "area_ranges": [{"label": label, "lo": lo, "hi": hi}
                                                   for label, lo, hi in self.area_ranges],
                "max_det_cap": MAX_DETS, "zero_id_quirk": self.zero_id_quirk,
                **({} if self.iou_type == "bbox" else {"iou_type": self.iou_type})}

    def description(self) -> dict:
        return {"match": self.match_params(), "curves": list(MATCHED),
                "accumulation": {"max_dets": list(self.max_dets), "recall_thresholds": list(self.recall_thresholds)}}

    def shard_inputs(self, layout, run: str) -> tuple:
        """The run's shards; every task shares the categories and their supercategories (Sim needs one for every
        category: a located error otherwise)."""
        layout.check_run(run)
        categories = layout.read("categories", ["category_id", "name", "supercategory"])
        supercategories = dict(zip(categories.get_column("category_id"), categories.get_column("supercategory")))
        check_supercategories(categories, layout.manifest.get("provenance", {}).get("gt", layout.root))
        paths = layout.paths
        inputs = [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k))} for k in range(layout.n_shards)]
        stored = shape_tables(layout, run, self.iou_type, inputs[0]) if inputs and self.iou_type != "bbox" else []
        inputs = [{**files, **{f"{side}_shapes": files[side] for side in stored}} for files in inputs]
        return inputs, {"category_ids": layout.category_ids(), "supercategories": supercategories,
                        "sources": sources(layout, run)}

    def input_columns(self) -> dict:
        """The iou type's shape columns, read apart (none for boxes)."""
        shapes = SHAPE_COLUMNS[self.iou_type]
        return {"gt_shapes": list(shapes["gt"]), "dt_shapes": list(shapes["dt"])}

    def match_shard(self, tables: dict, context: dict) -> dict:
        gt, dt = tables["gt"], tables["dt"]
        if self.iou_type != "bbox":
            gt = with_shapes(gt, tables.get("gt_shapes"), SHAPE_COLUMNS[self.iou_type]["gt"])
            dt = with_shapes(dt, tables.get("dt_shapes"), SHAPE_COLUMNS[self.iou_type]["dt"])
        return dict(zip(self.sides, analyze_shard(gt, dt, context["category_ids"], context["supercategories"], self,
                                                  places(context))))


def check_supercategories(categories: pl.DataFrame, source) -> None:
    """Every category has a supercategory (Sim compares a category with the others of its supercategory): MATLAB's
    ``analyze`` fails on a file without the field, and with an empty one its ``getCatIds('supNms', '')`` skips the
    filter (Sim would silently equal Oth); refused here, naming the first such category."""
    missing = categories.filter(pl.col("supercategory").is_null() | (pl.col("supercategory") == ""))
    if missing.height:
        category_id, name = missing.row(0)[:2]
        more = f" (and {missing.height - 1} more)" if missing.height > 1 else ""
        raise InputError(f"{source}: category {category_id} ({name!r}) has no supercategory{more}: COCO analyze's "
                         "Sim curve compares a category with the others of its supercategory")


@numba.njit(cache=True, nogil=True)
def _gather(lo, hi, group_code, gt_code, same_only):
    """Per group ``k``, the ground truths ``[lo[k], hi[k])`` of its image, only those whose supercategory code equals
    the group's with ``same_only``: ``(index, gt_start, gt_len)``, the groups' ground truths laid end to end."""
    n = lo.shape[0]
    gt_start = np.empty(n, np.int64)
    gt_len = np.empty(n, np.int64)
    total = 0
    for k in range(n):
        count = 0
        for g in range(lo[k], hi[k]):
            count += not same_only or gt_code[g] == group_code[k]
        gt_start[k], gt_len[k] = total, count
        total += count
    index = np.empty(total, np.int64)
    for k in range(n):
        i = gt_start[k]
        for g in range(lo[k], hi[k]):
            if not same_only or gt_code[g] == group_code[k]:
                index[i] = g
                i += 1
    return index, gt_start, gt_len


def _confusion_runs(gt: pl.DataFrame, ranked: pl.DataFrame, supercategories: dict, protocol: AnalyzeProtocol,
                    where: dict):
    """Sim's and Oth's ``(tp, ignored)`` bits (bit 0) per ranked detection and area range: each (category, image)
    group of detections against its image's ground truths (of its supercategory for Sim), the other categories'
    ignored."""
    gt = gt.sort("image_id", "category_id", "gt_order")  # MATLAB's CocoApi order
    codes = {name: i for i, name in enumerate(sorted(set(supercategories.values())))}
    to_code = {category: codes[name] for category, name in supercategories.items()}

    def code(frame: pl.DataFrame) -> np.ndarray:
        return column_array(frame.select(pl.col("category_id").replace_strict(to_code, return_dtype=pl.Int64)),
                            "category_id")

    gt_image, gt_category, gt_code = column_array(gt, "image_id"), column_array(gt, "category_id"), code(gt)
    starts = np.flatnonzero(column_array(ranked, "dt_rank") == 0)
    dt_start = starts.astype(np.int64)
    dt_len = np.diff(np.append(starts, ranked.height)).astype(np.int64)
    group_image, group_category = column_array(ranked, "image_id")[starts], column_array(ranked, "category_id")[starts]
    group_code = code(ranked)[starts]
    lo, hi = np.searchsorted(gt_image, group_image, "left"), np.searchsorted(gt_image, group_image, "right")
    flagged = ignore_flags(gt, True)
    # what matching reads, gathered per group
    gt = gt.select("gt_id", "category_id", "x", "y", "w", "h", "area", "iscrowd",
                   *SHAPE_COLUMNS[protocol.iou_type]["gt"])
    dt_area = column_array(ranked, "area", np.float64)
    outcomes = []
    for same_only in (True, False):
        index, gt_start, gt_len = _gather(lo, hi, group_code, gt_code, same_only)
        pooled = gt[index]
        other = gt_category[index] != np.repeat(group_category, gt_len)
        groups = (gt_start, gt_len, dt_start, dt_len)
        matching = rules(pooled, flagged[index] | other, dt_area, (CONFUSION_IOU,), protocol)
        blocks = SIMILARITY[protocol.iou_type](pooled, ranked, matching[1], groups, protocol, where)
        out = assign(blocks, groups, matching, ranked.height, pooled.height)
        outcomes.append((out[0], out[1]))
    return outcomes


def analyze_shard(gt: pl.DataFrame, dt: pl.DataFrame, category_ids, supercategories: dict,
                  protocol: AnalyzeProtocol, where: dict | None = None) -> tuple:
    """``(dt rows, gt rows)`` of one shard (schemas :func:`evalengine.schema.analyze_dt_schema` and
    ``analyze_gt_schema``); ``where``: how errors name a row (:func:`evalengine.match.shape_columns.places`)."""
    coco = protocol.coco
    dt_matches, gt_matches = match_shard(gt, dt, category_ids, coco, where)
    ranked = prepare_dt(dt, category_ids, coco)  # the rows of dt_matches, in its order
    n_area = len(protocol.area_ranges)
    tp = dt_matches.get_column("tp_bits").to_arrow().flatten().to_numpy().reshape(-1, n_area).copy()
    ignored = dt_matches.get_column("ignored_bits").to_arrow().flatten().to_numpy().reshape(-1, n_area).copy()
    runs = _confusion_runs(gt, ranked, supercategories, protocol, where)
    for curve, (run_tp, run_ignored) in zip(("Sim", "Oth"), runs):
        bit = np.uint64(MATCHED.index(curve))
        tp |= run_tp << bit
        ignored |= run_ignored << bit
    n_dt = dt_matches.height
    dt_rows = dt_matches.select("image_id", "category_id", "det_id", "score", "dt_rank").with_columns(
        pl.Series("tp_bits", tp.reshape(n_dt, n_area)), pl.Series("ignored_bits", ignored.reshape(n_dt, n_area)))
    gt_rows = gt_matches.select("image_id", "category_id", "gt_id", "ignored_bits")
    return dt_rows.cast(schema.analyze_dt_schema(n_area)), gt_rows.cast(schema.analyze_gt_schema())
