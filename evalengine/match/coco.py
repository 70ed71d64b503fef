"""The COCO protocol (pycocotools ``Params`` and ``evaluateImg``, iouType bbox): its parameters and one shard's
matching.

Per (image, category) group — per image when ``use_cats`` is off — the detections are sorted by score (stable:
file order breaks ties; with ``use_cats`` off, category then file order, as pycocotools concatenates the
per-category lists) and cut to ``maxDets[-1]``; the similarity step computes each group's box IoU (crowd: IoA),
and :func:`evalengine.match.greedy_score.assign_by_score` assigns them.
"""

from dataclasses import dataclass
from typing import ClassVar

import numpy as np
import polars as pl
import pyarrow as pa

from evalengine import schema
from evalengine.errors import ProtocolError, check_option
from evalengine.geometry.box_iou import COCO, box_iou_blocks
from evalengine.geometry.boxes import xywh
from evalengine.match.greedy_score import assign_by_score
from evalengine.match.groups import block_chunks, merge_groups
from evalengine.match.proposals import as_detections
from evalengine.arrow import arrow_array
from evalengine.match.protocol import (Protocol, column_array, increasing, positive_integers,
                                       real_numbers, take_rows, unit_thresholds)
from evalengine.match.score_order import matching_order
from evalengine.match.shape_columns import (SHAPE_COLUMNS, keypoint_ignored, keypoint_similarity, kpt_sigmas,
                                            mask_similarity, places, shape_tables, sources, with_shapes)

# pycocotools builds both arrays with np.linspace: iou_thresholds[8] is 0.8999999999999999 and ten of
# the recall thresholds lie one ulp above k/100. Parity needs these exact floats.
COCO_IOU_THRESHOLDS = tuple(float(t) for t in np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1))
COCO_RECALL_THRESHOLDS = tuple(float(r) for r in np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1))
COCO_AREA_RANGES = (
    ("all", 0.0, 1e5**2),
    ("small", 0.0, 32.0**2),
    ("medium", 32.0**2, 96.0**2),
    ("large", 96.0**2, 1e5**2),
)
COCO_MAX_DETS = (1, 10, 100)
# pycocotools Params('keypoints')
KEYPOINT_AREA_RANGES = (("all", 0.0, 1e5**2), ("medium", 32.0**2, 96.0**2), ("large", 96.0**2, 1e5**2))
KEYPOINT_MAX_DETS = (20,)
IOU_TYPES = ("bbox", "segm", "keypoints", "boundary")
_GT_COLUMNS = ("gt_id", "image_id", "category_id", "x", "y", "w", "h", "area", "iscrowd", "gt_order")
_DT_COLUMNS = ("det_id", "image_id", "category_id", "score", "x", "y", "w", "h", "area")
_BITS = 64  # outcomes per (detection, area range) are stored as one uint64 bit mask over thresholds


@dataclass(frozen=True)
class CocoProtocol(Protocol):
    """pycocotools' evaluation parameters.

    ``area_ranges`` are ``(label, lo, hi)`` with both bounds inclusive, as in pycocotools.
    ``zero_id_quirk`` reproduces pycocotools counting a match to ground-truth id 0 as unmatched;
    set it to False for the corrected behaviour. ``iou_type`` chooses the similarity step (:data:`SIMILARITY`):
    ``bbox``, ``segm`` (masks), ``boundary`` (boundary IoU, Cheng et al.) or ``keypoints`` (OKS); ``area_ranges`` and ``max_dets`` left out are pycocotools'
    defaults for it (keypoints: all/medium/large and 20). ``kpt_oks_sigmas`` (keypoints): a list for every category,
    or ``{category_id: list}`` (the others: COCO's 17 person sigmas, the default; see
    :func:`evalengine.match.shape_columns.kpt_sigmas`); with ``use_cats`` off, one list, as pycocotools.
    ``kpt_use_cats_quirk`` reproduces pycocotools' ``computeOks`` with ``useCats=0``: it looks the objects up under
    category -1, finds none, and nothing matches (AP 0); False matches the pooled objects by OKS.
    ``ignore_flag`` honours the annotations' ``ignore`` field as MATLAB's ``CocoEval.evaluateImg`` does (ignored:
    crowd, or ``ignore``, or area outside); pycocotools overwrites that field with ``iscrowd`` (False, the default).
    """

    iou_thresholds: tuple = COCO_IOU_THRESHOLDS
    recall_thresholds: tuple = COCO_RECALL_THRESHOLDS
    area_ranges: tuple | None = None
    max_dets: tuple | None = None
    use_cats: bool = True
    zero_id_quirk: bool = True
    iou_type: str = "bbox"
    ignore_flag: bool = False
    kpt_oks_sigmas: tuple | None = None
    kpt_use_cats_quirk: bool = True
    name: ClassVar[str] = "coco"
    sides: ClassVar[tuple] = ("dt", "gt")
    table_version: ClassVar[int] = 2  # 2: ``area_iou``
    # pycocotools' mergesort of the image-by-image concatenation (images in id order, each in rank order)
    tie_order: ClassVar[tuple] = ("image_id", "dt_rank")
    in_memory: ClassVar[bool] = True
    partner_columns: ClassVar[tuple] = schema.PARTNER_COLUMNS

    def __post_init__(self):
        """Parameters pycocotools would take but that mean nothing are refused: thresholds must increase within
        (0, 1] (recall: [0, 1]), area ranges have distinct labels and lo <= hi, caps are positive and distinct (the
        last one is the matching cap, in any order, as in pycocotools)."""
        check_option("iou_type", self.iou_type, IOU_TYPES)
        keypoints = self.iou_type == "keypoints"
        if self.area_ranges is None:
            object.__setattr__(self, "area_ranges", KEYPOINT_AREA_RANGES if keypoints else COCO_AREA_RANGES)
        if self.max_dets is None:
            object.__setattr__(self, "max_dets", KEYPOINT_MAX_DETS if keypoints else COCO_MAX_DETS)
        sigmas = kpt_sigmas(self.kpt_oks_sigmas)
        if sigmas != kpt_sigmas(None) and not keypoints:
            raise ProtocolError(f"kpt_oks_sigmas: only iou_type 'keypoints' uses them (iou_type is '{self.iou_type}')")
        if len(sigmas) > 1 and not self.use_cats:
            raise ProtocolError("kpt_oks_sigmas: with use_cats off, pycocotools uses one list for every category; "
                                "give a list, not one per category")
        object.__setattr__(self, "kpt_oks_sigmas", sigmas)
        object.__setattr__(self, "iou_thresholds",
                           increasing("iou_thresholds", unit_thresholds("iou_thresholds", self.iou_thresholds)))
        object.__setattr__(self, "recall_thresholds", increasing(
            "recall_thresholds", unit_thresholds("recall_thresholds", self.recall_thresholds, zero=True)))
        object.__setattr__(self, "area_ranges", _area_ranges(self.area_ranges))
        object.__setattr__(self, "max_dets", positive_integers("max_dets", self.max_dets))
        if not 1 <= len(self.iou_thresholds) <= _BITS:
            raise ProtocolError(f"iou_thresholds: between 1 and {_BITS} thresholds are supported, got {len(self.iou_thresholds)}")
        if not 1 <= len(self.area_ranges) <= _BITS:
            raise ProtocolError(f"area_ranges: between 1 and {_BITS} ranges are supported, got {len(self.area_ranges)}")
        if not self.recall_thresholds:
            raise ProtocolError("recall_thresholds: at least one is needed")
        if not self.max_dets or len(set(self.max_dets)) < len(self.max_dets):
            raise ProtocolError(f"max_dets: distinct positive integers are needed, got {list(self.max_dets)}")

    @property
    def max_det_cap(self) -> int:
        """Detections kept per (image, category): pycocotools matches with ``maxDets[-1]``."""
        return self.max_dets[-1]

    def match_params(self) -> dict:
        """The parameters the matching depends on (recall thresholds and smaller caps are accumulation-only)."""
        return {
            "name": self.name,
            "iou_thresholds": list(self.iou_thresholds),
            "area_ranges": [{"label": label, "lo": lo, "hi": hi} for label, lo, hi in self.area_ranges],
            "max_det_cap": self.max_det_cap,
            "use_cats": self.use_cats,
            "zero_id_quirk": self.zero_id_quirk,
            # recorded only when they are not the defaults, so that the stores written before them keep their keys
            **({} if self.iou_type == "bbox" else {"iou_type": self.iou_type}),
            **({"ignore_flag": True} if self.ignore_flag else {}),
            **({"kpt_oks_sigmas": [{"category_id": c, "sigmas": list(s)} for c, s in self.kpt_oks_sigmas]}
               if self.iou_type == "keypoints" else {}),
            **({"kpt_use_cats_quirk": False} if not self.kpt_use_cats_quirk else {}),
        }

    def description(self) -> dict:
        """The matching parameters, and the accumulation parameters of the evaluation that made the table (the SQL
        views accumulate with these)."""
        return {
            "match": self.match_params(),
            "accumulation": {"max_dets": list(self.max_dets), "recall_thresholds": list(self.recall_thresholds)},
        }

    def area_index(self, label: str) -> int:
        labels = [r[0] for r in self.area_ranges]
        if label not in labels:
            raise ProtocolError(f"area range '{label}' not in {labels}")
        return labels.index(label)

    def shard_inputs(self, layout, run: str) -> tuple:
        """A detection run's shards, or a proposal run's (``use_cats`` off): its ranked proposals are matched as
        class-agnostic detections (see :func:`evalengine.match.proposals.as_detections`)."""
        from_proposals = run in layout.proposal_runs
        if from_proposals and (self.use_cats or self.iou_type != "bbox"):
            raise ProtocolError(f"'{run}' is a proposal run: the coco protocol evaluates proposals (boxes) with "
                                "use_cats off and iou_type bbox")
        if not from_proposals:
            layout.check_run(run)
        paths = layout.paths
        if from_proposals:
            inputs = [{"gt": str(paths.gt_shard(k)), "proposals": str(paths.proposal_shard(run, k))}
                      for k in range(layout.n_shards)]
        else:
            inputs = [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k))} for k in range(layout.n_shards)]
            stored = shape_tables(layout, run, self.iou_type, inputs[0]) if inputs and self.iou_type != "bbox" else []
            inputs = [{**files, **{f"{side}_shapes": files[side] for side in stored}} for files in inputs]
        context = {"category_ids": layout.category_ids(), "sources": sources(layout, run),
                   "proposal_ordering": layout.proposal_runs[run]["ordering"] if from_proposals else None}
        return inputs, context

    def input_columns(self) -> dict:
        """The box columns; the iou type's shape columns apart, from the same files (``gt_shapes``, ``dt_shapes``:
        no mask is read for boxes, and a side stored without shapes is read without them); a proposal run's
        table whole."""
        shapes = SHAPE_COLUMNS[self.iou_type]
        return {"gt": [*_GT_COLUMNS, *(["ignore"] if self.ignore_flag else [])], "dt": list(_DT_COLUMNS),
                "gt_shapes": list(shapes["gt"]), "dt_shapes": list(shapes["dt"])}

    def match_shard(self, tables: dict, context: dict) -> dict:
        if "proposals" in tables:
            dt = as_detections(tables["proposals"], context["proposal_ordering"], context["category_ids"][0])
        else:
            dt = with_shapes(tables["dt"], tables.get("dt_shapes"), SHAPE_COLUMNS[self.iou_type]["dt"])
        gt = with_shapes(tables["gt"], tables.get("gt_shapes"), SHAPE_COLUMNS[self.iou_type]["gt"])
        dt_matches, gt_matches = match_shard(gt, dt, context["category_ids"], self, places(context),
                                             partners=context.get("partners", True))
        return {"dt": dt_matches, "gt": gt_matches}


def _area_ranges(ranges) -> tuple:
    """``(label, lo, hi)`` triples with a non-empty label, used once, and bounds with lo <= hi (inf allowed)."""
    checked = []
    for area_range in ranges if isinstance(ranges, (list, tuple)) else [ranges]:
        if not isinstance(area_range, (list, tuple)) or len(area_range) != 3:
            raise ProtocolError(f"area_ranges: expected (label, lo, hi) triples, got {area_range!r}")
        label, lo, hi = area_range[0], *real_numbers(f"area_ranges '{area_range[0]}'", area_range[1:])
        if not isinstance(label, str) or not label:
            raise ProtocolError(f"area_ranges: a label must be a non-empty string, got {label!r}")
        if lo > hi:
            raise ProtocolError(f"area_ranges: '{label}' has lo {lo} > hi {hi}")
        if label in [c[0] for c in checked]:
            raise ProtocolError(f"area_ranges: the label '{label}' is used twice")
        checked.append((label, lo, hi))
    return tuple(checked)


def prepare_gt(gt: pl.DataFrame, category_ids, use_cats: bool = True) -> pl.DataFrame:
    """Ground truths of evaluated categories in pycocotools order within each group (file order; by category, then
    file order, when categories are pooled). Groups run by category, then image, so that the match table comes out
    grouped by category (by image when pooled)."""
    gt = gt.filter(pl.col("category_id").is_in(pl.Series(category_ids).implode()))
    keys = ["category_id", "image_id", "gt_order"] if use_cats else ["image_id", "category_id", "gt_order"]
    return gt.sort(keys)


def prepare_dt(dt: pl.DataFrame, category_ids, protocol: CocoProtocol, rows: np.ndarray | None = None) -> pl.DataFrame:
    """Detections of evaluated categories, score-sorted per group (ties: file order, as pycocotools' stable sort),
    ranked, cut to ``maxDets[-1]``; groups in :func:`prepare_gt`'s order (:func:`~evalengine.match.score_order.
    matching_order`). ``rows``: only these rows of ``dt`` (ascending; a protocol's filter, e.g. LVIS's, without a
    copy of the frame)."""
    keys = [column_array(dt, "category_id"), column_array(dt, "image_id"), column_array(dt, "score", np.float64),
            column_array(dt, "det_id")]
    order, rank = matching_order(*(keys if rows is None else [key[rows] for key in keys]), category_ids,
                                 protocol.use_cats, protocol.max_det_cap)
    return take_rows(dt, order if rows is None else rows[order]).with_columns(pl.Series("dt_rank", rank,
                                                                                        dtype=pl.Int32))


def _fixed_list(values: np.ndarray, valid=None) -> pa.Array:
    return pa.FixedSizeListArray.from_arrays(arrow_array(values, valid), values.shape[1])


def _box_similarity(gt: pl.DataFrame, dt: pl.DataFrame, gt_crowd: np.ndarray, groups: tuple, protocol=None,
                    where=None):
    """Box IoU blocks in pycocotools' arithmetic (crowd: intersection over the detection's area)."""
    gt_box, dt_box = xywh(gt), xywh(dt)
    return lambda lo, hi: box_iou_blocks(COCO, dt_box, gt_box, gt_crowd, *groups, lo, hi)


# the similarity step of each iou type: (gt, dt, crowd flags, groups, protocol, where rows are named in errors) → a
# function of a group range giving its blocks
SIMILARITY = {"bbox": _box_similarity, "segm": mask_similarity, "boundary": mask_similarity,
              "keypoints": keypoint_similarity}


def assign(blocks, groups: tuple, rules: tuple, n_dt: int, n_gt: int, partners: bool = True) -> tuple:
    """:func:`~evalengine.match.greedy_score.assign_by_score` over every group, ``blocks(lo, hi)`` giving the
    similarity of groups ``[lo, hi)`` in chunks of bounded size; its ``out`` arrays. ``rules``: :func:`rules`.
    Without ``partners`` the partner arrays have no rows (not computed)."""
    n_thr, n_area = len(rules[5]), len(rules[6])
    n_partners = n_dt if partners else 0
    out = (np.zeros((n_dt, n_area), np.uint64), np.zeros((n_dt, n_area), np.uint64),
           np.full((n_partners, n_thr), -1, np.int64), np.zeros((n_partners, n_thr)),
           np.full((n_partners, n_area), np.nan), np.zeros(n_gt, np.uint64), np.zeros((n_gt, n_area), np.uint64))
    for lo, hi in block_chunks(groups[1], groups[3]):
        values, offsets = blocks(lo, hi)
        assign_by_score(values, offsets, lo, hi, *groups, *rules, out)
    return out


def rules(gt: pl.DataFrame, gt_ignore: np.ndarray, dt_area: np.ndarray, iou_thresholds, protocol) -> tuple:
    """The matching rules :func:`assign_by_score` reads beside the blocks, for ground truths ``gt`` (``gt_ignore``:
    flagged ignored beyond crowd and area) and detections of areas ``dt_area``."""
    return (column_array(gt, "area", np.float64), column_array(gt, "iscrowd", np.bool_), gt_ignore,
            column_array(gt, "gt_id") == 0, dt_area, np.array(iou_thresholds, np.float64),
            np.array([r[1] for r in protocol.area_ranges]), np.array([r[2] for r in protocol.area_ranges]),
            protocol.zero_id_quirk)


def ignore_flags(gt: pl.DataFrame, honoured: bool) -> np.ndarray:
    """The annotations' ``ignore`` field (null: 0) where it is ``honoured`` (MATLAB), else none (pycocotools)."""
    if not honoured:
        return np.zeros(gt.height, np.bool_)
    return gt.get_column("ignore").fill_null(False).to_numpy().astype(np.bool_)


def similarity(gt: pl.DataFrame, dt: pl.DataFrame, category_ids, protocol: CocoProtocol, where: dict,
               dt_rows: np.ndarray | None = None, gt_rows: np.ndarray | None = None) -> tuple:
    """``(gt, dt, groups, blocks)``: one shard's objects in matching order (pycocotools ``computeIoU``'s: ground truths
    as given, detections by score and cut), their groups (gt start, gt length, dt start, dt length) and the function
    giving the similarity blocks of a group range (:data:`SIMILARITY`). ``gt_rows``: the rows of ``gt`` to match,
    already in :func:`prepare_gt`'s order (None: :func:`prepare_gt`)."""
    gt = prepare_gt(gt, category_ids, protocol.use_cats) if gt_rows is None else take_rows(gt, gt_rows)
    dt = prepare_dt(dt, category_ids, protocol, dt_rows)
    first, second = ("category_id", "image_id") if protocol.use_cats else ("image_id", "category_id")
    groups = merge_groups(column_array(gt, first), column_array(gt, second), column_array(dt, first), column_array(dt, second),
                          protocol.use_cats)
    groups = tuple(np.ascontiguousarray(groups[:, i]) for i in range(4))
    crowd = column_array(gt, "iscrowd", np.bool_)
    return gt, dt, groups, SIMILARITY[protocol.iou_type](gt, dt, crowd, groups, protocol, where)


def match_shard(gt: pl.DataFrame, dt: pl.DataFrame, category_ids, protocol: CocoProtocol, where: dict | None = None,
                dt_rows: np.ndarray | None = None, gt_rows: np.ndarray | None = None, partners: bool = True):
    """Match one shard; return ``(dt_matches, gt_matches)`` frames (schemas in :mod:`evalengine.schema`). ``where``:
    how errors name a row (:func:`evalengine.match.shape_columns.places`); ``dt_rows``: the rows of ``dt`` to match
    (ascending; None: all), ``gt_rows`` those of ``gt`` in matching order (None: :func:`prepare_gt`), a protocol's
    filter handed over without a copy of the frame (LVIS's federated rows). Without ``partners`` the detections'
    table leaves out :data:`~evalengine.schema.PARTNER_COLUMNS` (a table for AP alone)."""
    where = where or {"gt": ("annotation", "gt_id"), "dt": ("result", "det_id")}
    gt, dt, groups, blocks = similarity(gt, dt, category_ids, protocol, where, dt_rows, gt_rows)
    n_area, n_thr = len(protocol.area_ranges), len(protocol.iou_thresholds)
    gt_ids = column_array(gt, "gt_id")
    gt_ignore = ignore_flags(gt, protocol.ignore_flag)
    if protocol.iou_type == "keypoints":
        gt_ignore |= keypoint_ignored(gt, where)
    matching = rules(gt, gt_ignore, column_array(dt, "area", np.float64), protocol.iou_thresholds, protocol)
    out = assign(blocks, groups, matching, dt.height, gt.height, partners)
    dt_tp, dt_ignored, dt_partner, dt_iou, dt_area_iou, gt_ignored, gt_matched = out
    columns = {c: dt.get_column(c).to_arrow() for c in ("image_id", "category_id", "det_id", "score", "dt_rank")}
    columns.update(tp_bits=_fixed_list(dt_tp), ignored_bits=_fixed_list(dt_ignored))
    if partners:
        has_partner = dt_partner >= 0
        partner_id = gt_ids[np.where(has_partner, dt_partner, 0)] if gt.height else dt_partner
        columns.update(matched_gt_id=_fixed_list(partner_id, has_partner), matched_iou=_fixed_list(dt_iou, has_partner),
                       area_iou=_fixed_list(dt_area_iou, ~np.isnan(dt_area_iou)))
    dt_schema = schema.dt_matches_schema(n_area, n_thr)
    dt_matches = pl.from_arrow(pa.table(columns)).cast({name: dt_schema[name] for name in columns})
    gt_matches = pl.from_arrow(pa.table({
        **{c: gt.get_column(c).to_arrow() for c in ("image_id", "category_id", "gt_id")},
        "ignored_bits": arrow_array(gt_ignored),
        "matched_bits": _fixed_list(gt_matched),
    })).cast(schema.gt_matches_schema(n_area))
    return dt_matches, gt_matches
