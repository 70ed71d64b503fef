"""Borji & Iranmanesh's error diagnosis ("Empirical Upper Bound in Object Detection and More", §5; spec-detection.md
§3.4.3–§3.4.5): per (image, category) one label per detection and ground truth, and the detection set of every
cumulative stage matched under the COCO protocol, so that each stage's AP is a query (:mod:`evalengine.metrics.ap`).

Per group, detections in (−score, file order), targets = the group's non-crowd ground truths in file order:

- S1 ``cls_bg`` (Type I): IoU_max <= ``t_bg`` (no target included): removed;
- S2 ``loc``: ``t_bg`` < IoU_max < ``t_fg``: the box becomes its target's box (score and class kept);
- S3: one-to-one matching at IoU >= ``t_fg`` of the remaining boxes; an unmatched one is removed (``dup``, or a
  snapped ``loc``); a matched one is ``tp`` (a snapped one stays ``loc``);
- ``ignored``: crowd annotations are no targets (spec §3.4.4). A detection that would be a ``cls_bg``, ``loc`` or
  ``dup`` error but lies on a crowd region (crowd IoU, intersection over its own area, >= ``t_fg``) is no error at
  ``t_fg`` for COCO, which matches it to the region: it is ``ignored``, claims nothing and is left as it is. One
  that a target takes stays ``tp`` (pycocotools tries regular ground truths before crowd regions);
- S4: every matched box becomes its target's box and every unmatched target (``miss``) is added with score 1;
  ignored detections are not kept (S4 is the ideal result: one exact box per target, nothing else). The snap-only
  stage S3b snaps the matched boxes and adds nothing.

``variant`` chooses IoU_max and the target in S1/S2:

- ``paper``: the largest IoU over the targets, its target the first of largest IoU (file order);
- ``borji_ref`` (the notebook ``Error_diagnosis.ipynb``): in score order, the largest IoU over the targets not yet
  claimed that overlap at all (the first of largest IoU); a detection kept with such a target claims it. When no
  unclaimed target overlaps, the largest IoU over the claimed ones (no claim). Its quirk is kept: a detection that
  touches an unclaimed target at IoU <= ``t_bg`` is Type I even when a claimed one overlaps it much more.

``duplicates`` chooses the S3 matching: ``coco`` (pycocotools' ``evaluateImg`` at ``t_fg``: each box in score order
takes the free target of largest IoU, a later target winning a tie) or ``gt_major`` (the notebook's duplicates
cell: targets in file order, each scanning the free boxes in score order; a box overlapping another free target
more, at >= ``t_fg``, takes that one and the scan goes on; else a box at >= ``t_fg`` takes this target and the scan
stops). No detection cap applies to the steps (the notebook has none); the stages are evaluated with the COCO
protocol's cap. IoU is pycocotools' (clamped at 0; the notebook's unclamped intersection is a bug, spec §1.1).

The COCO protocol's ``iou_type`` is the similarity of every step and stage (:data:`evalengine.match.coco.SIMILARITY`):
``bbox``, ``segm`` (``maskUtils.iou``; crowd: intersection over the detection's mask area) or ``boundary``. The
kernels read similarity blocks: each group's detections against its ground truths, and its ground truths against
each other (what a detection moved onto a target, in S3, is compared by). A detection moved onto a target (S2, S3b,
S4) or added for a miss takes the target's shape — its box, and its mask — and the area a result of that shape has
(pycocotools ``loadRes``): the box's w·h for boxes, the mask's area (``maskUtils.area``, not the ground truth's
``area`` field) for masks; the other detections keep theirs.
"""

from dataclasses import dataclass, field
from typing import ClassVar

import numba
import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError, check_option
from evalengine.geometry.boxes import xywh
from evalengine.io import rle
from evalengine.match.coco import SIMILARITY, CocoProtocol, match_shard, prepare_gt
from evalengine.match.groups import block_chunks, merge_groups
from evalengine.match.protocol import Protocol, column_array, unit_thresholds
from evalengine.match.shape_columns import SHAPE_COLUMNS, places, shape_tables, sources, with_shapes

VARIANTS = ("borji_ref", "paper")
DUPLICATES = ("coco", "gt_major")
IOU_TYPES = ("bbox", "segm", "boundary")
# stage codes are positions here; S3b (snap only) comes last so that S0..S4 keep the paper's numbers
STAGES = ("S0", "S1_cls", "S2_loc", "S3_dup", "S4_miss", "S3b_snap_only")
DT_LABELS = ("tp", "cls_bg", "loc", "dup", "ignored")
GT_LABELS = ("matched", "miss", "ignored")
TP, CLS_BG, LOC, DUP, IGNORED = range(5)
MATCHED, MISS, GT_IGNORED = range(3)


@dataclass(frozen=True)
class BorjiProtocol(Protocol):
    """The diagnosis' thresholds (``background_threshold`` t_bg, ``foreground_threshold`` t_fg), its ``variant``
    and ``duplicates`` matching, and the COCO protocol each stage is evaluated with (by category; its ``iou_type``:
    boxes, masks or mask boundaries, :data:`IOU_TYPES`, is the diagnosis' similarity)."""

    variant: str = "borji_ref"
    duplicates: str = "coco"
    background_threshold: float = 0.1
    foreground_threshold: float = 0.5
    coco: CocoProtocol = field(default_factory=CocoProtocol)
    name: ClassVar[str] = "borji"
    sides: ClassVar[tuple] = ("dt", "gt", "stage_dt", "stage_gt")

    def __post_init__(self):
        check_option("variant", self.variant, VARIANTS)
        check_option("duplicates", self.duplicates, DUPLICATES)
        for name in ("background_threshold", "foreground_threshold"):
            object.__setattr__(self, name, unit_thresholds(name, [getattr(self, name)])[0])
        if self.background_threshold > self.foreground_threshold:
            raise ProtocolError(f"background_threshold {self.background_threshold} is above foreground_threshold "
                                f"{self.foreground_threshold}")
        if not isinstance(self.coco, CocoProtocol) or not self.coco.use_cats:
            raise ProtocolError("coco: the diagnosis is per category (a CocoProtocol with use_cats on is needed)")
        check_option("iou_type", self.coco.iou_type, IOU_TYPES)

    @property
    def iou_type(self) -> str:
        return self.coco.iou_type

    def match_params(self) -> dict:
        return {"name": self.name, "variant": self.variant, "duplicates": self.duplicates,
                "background_threshold": self.background_threshold,
                "foreground_threshold": self.foreground_threshold, "coco": self.coco.match_params()}

    def description(self) -> dict:
        return {"match": self.match_params(), "accumulation": self.coco.description()["accumulation"]}

    def shard_inputs(self, layout, run: str) -> tuple:
        """The run's detection and ground-truth shards; the first id of the added misses (above every detection's:
        a miss sorts after a detection of equal score, as the notebook appends them); the masks apart, for masks."""
        layout.check_run(run)
        paths = layout.paths
        runs = layout.read("runs").filter(pl.col("run") == run)
        context = {"category_ids": layout.category_ids(), "miss_id_base": int(runs.get_column("n_detections")[0]) + 1,
                   "sources": sources(layout, run)}
        inputs = [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k))} for k in range(layout.n_shards)]
        stored = shape_tables(layout, run, self.iou_type, inputs[0]) if inputs and self.iou_type != "bbox" else []
        inputs = [{**files, **{f"{side}_shapes": files[side] for side in stored}} for files in inputs]
        return inputs, context

    def input_columns(self) -> dict:
        """The iou type's shape columns, read apart (none for boxes)."""
        shapes = SHAPE_COLUMNS[self.iou_type]
        return {"gt_shapes": list(shapes["gt"]), "dt_shapes": list(shapes["dt"])}

    def match_shard(self, tables: dict, context: dict) -> dict:
        shapes = SHAPE_COLUMNS[self.iou_type]
        gt = with_shapes(tables["gt"], tables.get("gt_shapes"), shapes["gt"])
        dt = with_shapes(tables["dt"], tables.get("dt_shapes"), shapes["dt"])
        return dict(zip(self.sides, borji_shard(gt, dt, context, self)))


@numba.njit(cache=True, nogil=True, inline="always")
def _iou(blocks, k, d, g, group, snap):
    """The similarity of detection ``d`` and ground truth ``g`` of group ``k`` (``group``: its ``(g0, ng, d0)``):
    of the detection's own shape, or, when ``snap`` is given and it was moved onto target ``snap[d]`` in S2, of
    that target's shape. ``blocks``: ``(values, offsets, own_values, own_offsets, lo)``, the group range's blocks
    against the detections and among the ground truths."""
    g0, ng, d0 = group
    values, offsets, own, own_offsets, lo = blocks
    if snap is not None and snap[d] >= 0:
        return own[own_offsets[k - lo] + (snap[d] - g0) * ng + g - g0]
    return values[offsets[k - lo] + (d - d0) * ng + g - g0]


@numba.njit(cache=True, nogil=True)
def _steps_1_2(blocks, k, d, group, gt_crowd, notebook, t_bg, t_fg, claimed, out):
    """Type I, mislocalised (with its snap target) or ignored, for detection ``d`` (see the module's docstring);
    ``region[d]``: the crowd region it lies on (crowd IoU >= ``t_fg``, the first of largest), else −1."""
    label, target, iou_max, snap, region = out
    g0, ng = group[0], group[1]
    best, at, ioa = 0.0, -1, -1.0
    free, free_at, held, held_at = 0.0, -1, 0.0, -1
    for g in range(g0, g0 + ng):
        value = _iou(blocks, k, d, g, group, None)
        if gt_crowd[g]:
            if value > ioa:
                ioa, region[d] = value, g
            continue
        if value > best:
            best, at = value, g
        if claimed[g] and value > held:
            held, held_at = value, g
        elif not claimed[g] and value > free:
            free, free_at = value, g
    if ioa < t_fg:
        region[d] = -1
    iou_max[d], target[d] = best, at
    value, pick = best, at
    if notebook:
        value, pick = (free, free_at) if free_at >= 0 else (held, held_at)
    if value < t_fg and region[d] >= 0:  # not an error in COCO: it falls to the crowd region
        label[d], target[d] = IGNORED, region[d]
        return
    if notebook and free_at >= 0 and value > t_bg:
        claimed[free_at] = True
    if value <= t_bg:
        label[d] = CLS_BG
    elif value < t_fg:
        label[d], target[d], snap[d] = LOC, pick, pick


@numba.njit(cache=True, nogil=True)
def _match_by_score(blocks, k, group, nd, snap, gt_crowd, label, t_fg, match, gt_match):
    """pycocotools' greedy matching at ``t_fg`` of the group's remaining shapes, non-crowd targets only."""
    g0, ng, d0 = group
    for d in range(d0, d0 + nd):
        if label[d] == CLS_BG or label[d] == IGNORED:
            continue
        best, m = min(t_fg, 1 - 1e-10), -1
        for g in range(g0, g0 + ng):
            if gt_crowd[g] or gt_match[g] >= 0:
                continue
            value = _iou(blocks, k, d, g, group, snap)
            if value < best:
                continue
            best, m = value, g
        if m >= 0:
            match[d], gt_match[m] = m, d


@numba.njit(cache=True, nogil=True)
def _match_gt_major(blocks, k, group, nd, snap, gt_crowd, label, t_fg, match, gt_match):
    """The notebook's duplicates cell (see the module's docstring)."""
    g0, ng, d0 = group
    for g in range(g0, g0 + ng):
        if gt_crowd[g] or gt_match[g] >= 0:
            continue
        for d in range(d0, d0 + nd):
            if label[d] == CLS_BG or label[d] == IGNORED or match[d] >= 0:
                continue
            own = _iou(blocks, k, d, g, group, snap)
            best, other = own, -1
            for o in range(g0, g0 + ng):
                if o == g or gt_crowd[o] or gt_match[o] >= 0:
                    continue
                value = _iou(blocks, k, d, o, group, snap)
                if value > best and value >= t_fg:
                    best, other = value, o
            if other >= 0:
                match[d], gt_match[other] = other, d
            elif own >= t_fg:
                match[d], gt_match[g] = g, d
                break


@numba.njit(cache=True, nogil=True)
def diagnose_groups(groups, lo, hi, blocks, gt_crowd, notebook, gt_major, t_bg, t_fg, state):
    """The labels of groups ``[lo, hi)`` (``blocks``: :func:`_iou`'s), written into ``state = (label, target, iou_max,
    snap, match, gt_match, region, claimed)`` (:func:`_state`): the detection's label code, its target row (matched,
    snap or largest-IoU target; the crowd region of an ignored one; −1), IoU_max over the targets, its S2 snap target
    row, its S3 partner row; each ground truth's S3 partner row (−1: none)."""
    label, target, iou_max, snap, match, gt_match, region, claimed = state
    gt_start, gt_len, dt_start, dt_len = groups
    for k in range(lo, hi):
        group, nd = (gt_start[k], gt_len[k], dt_start[k]), dt_len[k]
        for d in range(dt_start[k], dt_start[k] + nd):
            _steps_1_2(blocks, k, d, group, gt_crowd, notebook, t_bg, t_fg, claimed,
                       (label, target, iou_max, snap, region))
        if gt_major:
            _match_gt_major(blocks, k, group, nd, snap, gt_crowd, label, t_fg, match, gt_match)
        else:
            _match_by_score(blocks, k, group, nd, snap, gt_crowd, label, t_fg, match, gt_match)
        for d in range(dt_start[k], dt_start[k] + nd):
            if label[d] == TP and match[d] >= 0:
                target[d] = match[d]
            elif label[d] == TP and region[d] >= 0:  # unmatched on a crowd region: COCO ignores it
                label[d], target[d] = IGNORED, region[d]
            elif label[d] == TP:
                label[d] = DUP


def _state(n_dt: int, n_gt: int) -> tuple:
    """:func:`diagnose_groups`' arrays, before any group."""
    rows = tuple(np.full(n_dt, -1, np.int64) for _ in range(4))  # target, snap, match, region
    return (np.full(n_dt, TP, np.int8), rows[0], np.zeros(n_dt), rows[1], rows[2], np.full(n_gt, -1, np.int64),
            rows[3], np.zeros(n_gt, np.bool_))


def diagnose(targets: pl.DataFrame, dt: pl.DataFrame, protocol: BorjiProtocol, where: dict) -> tuple:
    """``(label, target, iou_max, snap, match, gt_match)`` of a shard's targets (:func:`prepare_gt`) and detections
    (by category, image, −score, file order): the similarity blocks of the protocol's iou type, in chunks of bounded
    size, read by :func:`diagnose_groups`."""
    groups = merge_groups(column_array(targets, "category_id"), column_array(targets, "image_id"),
                          column_array(dt, "category_id"), column_array(dt, "image_id"), True)
    groups = tuple(np.ascontiguousarray(groups[:, i]) for i in range(4))
    crowd = column_array(targets, "iscrowd", np.bool_)
    similarity = SIMILARITY[protocol.iou_type]
    against_dt = similarity(targets, dt, crowd, groups, protocol.coco, where)
    # the targets of a group with detections among themselves (non-crowd: S3 tests only regular targets)
    own_len = np.where(groups[3] > 0, groups[1], 0)
    own_groups = (groups[0], own_len, groups[0], own_len)
    among_gt = similarity(targets, targets, np.zeros_like(crowd), own_groups, protocol.coco,
                          {"gt": where["gt"], "dt": where["gt"]})
    state = _state(dt.height, targets.height)
    for lo, hi in block_chunks(groups[1], groups[3] + own_len):
        blocks = (*against_dt(lo, hi), *among_gt(lo, hi), lo)
        diagnose_groups(groups, lo, hi, blocks, crowd, protocol.variant == "borji_ref",
                        protocol.duplicates == "gt_major", protocol.background_threshold,
                        protocol.foreground_threshold, state)
    label, target, iou_max, snap, match, gt_match = state[:6]
    return label, target, iou_max, snap, match, gt_match


def _ids(ids: np.ndarray, rows: np.ndarray) -> pl.Series:
    """``ids`` at ``rows``, null where a row is −1."""
    return pl.Series(ids[np.maximum(rows, 0)] if len(ids) else rows).set(pl.Series(rows < 0), None)


def borji_shard(gt: pl.DataFrame, dt: pl.DataFrame, context: dict, protocol: BorjiProtocol) -> tuple:
    """``(dt labels, gt labels, stage dt matches, stage gt matches)`` of one shard (schemas in :mod:`evalengine.schema`:
    ``BORJI_DT``, ``BORJI_GT``; the stage tables are COCO match tables with a ``stage`` code first)."""
    category_ids = context["category_ids"]
    where = places(context)
    targets = prepare_gt(gt, category_ids)  # (category, image, file order)
    dt = dt.filter(pl.col("category_id").is_in(pl.Series(category_ids).implode())).sort(
        [pl.col("category_id"), pl.col("image_id"), pl.col("score") + 0.0, pl.col("det_id")],
        descending=[False, False, True, False])
    label, target, iou_max, snap, match, gt_match = diagnose(targets, dt, protocol, where)
    gt_ids, gt_area = column_array(targets, "gt_id"), column_array(targets, "area", np.float64)
    own_area = np.isin(label, (CLS_BG, IGNORED)) | (target < 0)  # size attribution (spec §3.4.5)
    safe = np.maximum(target, 0)
    dt_rows = pl.DataFrame({
        **{c: dt.get_column(c) for c in ("image_id", "category_id", "det_id", "score")},
        "label": label,
        "target_gt_id": _ids(gt_ids, target),
        "matched_gt_id": _ids(gt_ids, match),
        "iou_max": iou_max,
        "area": np.where(own_area, column_array(dt, "area", np.float64), gt_area[safe] if targets.height else 0.0),
    }, schema=schema.BORJI_DT)
    crowd = column_array(targets, "iscrowd", np.bool_)
    gt_label = np.where(crowd, GT_IGNORED, np.where(gt_match >= 0, MATCHED, MISS)).astype(np.int8)
    gt_rows = pl.DataFrame({
        **{c: targets.get_column(c) for c in ("image_id", "category_id", "gt_id", "area")},
        "label": gt_label,
        "matched_det_id": _ids(column_array(dt, "det_id"), gt_match),
    }, schema=schema.BORJI_GT)
    stage_dt, stage_gt = [], []
    stages = _stages(dt, targets, _target_shapes(targets, protocol.iou_type), label, snap, match, gt_label,
                     context["miss_id_base"])
    for code, stage in enumerate(stages):
        matched_dt, matched_gt = match_shard(gt, stage, category_ids, protocol.coco, where)
        stage_dt.append(matched_dt.select(pl.lit(code, pl.Int8).alias("stage"), pl.all()))
        stage_gt.append(matched_gt.select(pl.lit(code, pl.Int8).alias("stage"), pl.all()))
    return dt_rows, gt_rows, pl.concat(stage_dt), pl.concat(stage_gt)


def _target_shapes(targets: pl.DataFrame, iou_type: str) -> pl.DataFrame:
    """What a detection moved onto each target (or added for it) takes: the target's box and mask, and the area
    pycocotools ``loadRes`` gives a result of that shape — the box's w·h, or the mask's area for masks."""
    columns = ["x", "y", "w", "h", *SHAPE_COLUMNS[iou_type]["dt"]]
    if iou_type == "bbox":
        box = xywh(targets)
        return targets.select(columns).with_columns(area=pl.Series(box[:, 2] * box[:, 3], dtype=pl.Float64))
    counts, offsets = rle.decode_strings(targets.get_column("mask_rle").to_arrow())
    return targets.select(columns).with_columns(area=pl.Series(rle.area(counts, offsets), dtype=pl.Float64))


def _moved(dt: pl.DataFrame, onto: np.ndarray, shapes: pl.DataFrame) -> pl.DataFrame:
    """``dt`` with every row where ``onto >= 0`` given the shape of target row ``onto`` (:func:`_target_shapes`)."""
    moved = onto >= 0
    if not moved.any():
        return dt
    taken, flag = shapes[np.maximum(onto, 0)], pl.Series(moved)
    return dt.with_columns(pl.when(flag).then(taken.get_column(c)).otherwise(pl.col(c)).alias(c)
                           for c in shapes.columns)


def _stages(dt, targets, shapes, label, snap, match, gt_label, miss_id_base) -> list:
    """The detection set of each stage, in :data:`STAGES` order (columns of the ``dt`` table and the masks')."""
    dt = dt.select(*schema.DT, *[c for c in shapes.columns if c not in schema.DT])
    kept_1 = pl.Series(label != CLS_BG)
    kept_3 = pl.Series((label == IGNORED) | (match >= 0))
    matched = pl.Series(match >= 0)
    misses = pl.concat([targets.select((pl.col("gt_order") + miss_id_base).alias("det_id"), "image_id", "category_id",
                                       pl.lit(1.0).alias("score")), shapes], how="horizontal")
    misses = misses.filter(pl.Series(gt_label == MISS)).select(dt.columns).cast(dt.schema)
    moved = _moved(dt, snap, shapes)
    snapped = _moved(moved, match, shapes)
    return [dt, dt.filter(kept_1), moved.filter(kept_1), moved.filter(kept_3),
            pl.concat([snapped.filter(matched), misses]), snapped.filter(kept_3)]
