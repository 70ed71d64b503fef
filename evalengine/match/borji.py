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
"""

from dataclasses import dataclass, field
from typing import ClassVar

import numba
import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError, check_option
from evalengine.geometry.box_iou import coco_box_iou
from evalengine.geometry.boxes import xywh
from evalengine.match.coco import CocoProtocol, match_shard, prepare_gt
from evalengine.match.groups import merge_groups
from evalengine.match.protocol import Protocol, column_array, unit_thresholds

VARIANTS = ("borji_ref", "paper")
DUPLICATES = ("coco", "gt_major")
# stage codes are positions here; S3b (snap only) comes last so that S0..S4 keep the paper's numbers
STAGES = ("S0", "S1_cls", "S2_loc", "S3_dup", "S4_miss", "S3b_snap_only")
DT_LABELS = ("tp", "cls_bg", "loc", "dup", "ignored")
GT_LABELS = ("matched", "miss", "ignored")
TP, CLS_BG, LOC, DUP, IGNORED = range(5)
MATCHED, MISS, GT_IGNORED = range(3)


@dataclass(frozen=True)
class BorjiProtocol(Protocol):
    """The diagnosis' thresholds (``background_threshold`` t_bg, ``foreground_threshold`` t_fg), its ``variant``
    and ``duplicates`` matching, and the COCO protocol each stage is evaluated with (by category, boxes)."""

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

    def match_params(self) -> dict:
        return {"name": self.name, "variant": self.variant, "duplicates": self.duplicates,
                "background_threshold": self.background_threshold,
                "foreground_threshold": self.foreground_threshold, "coco": self.coco.match_params()}

    def description(self) -> dict:
        return {"match": self.match_params(), "accumulation": self.coco.description()["accumulation"]}

    def shard_inputs(self, layout, run: str) -> tuple:
        """The run's detection and ground-truth shards; the first id of the added misses (above every detection's:
        a miss sorts after a detection of equal score, as the notebook appends them)."""
        layout.check_run(run)
        paths = layout.paths
        runs = layout.read("runs").filter(pl.col("run") == run)
        context = {"category_ids": layout.category_ids(), "miss_id_base": int(runs.get_column("n_detections")[0]) + 1}
        inputs = [{"gt": str(paths.gt_shard(k)), "dt": str(paths.dt_shard(run, k))} for k in range(layout.n_shards)]
        return inputs, context

    def match_shard(self, tables: dict, context: dict) -> dict:
        return dict(zip(self.sides, borji_shard(tables["gt"], tables["dt"], context, self)))


@numba.njit(cache=True, nogil=True, inline="always")
def _iou(a, b, crowd):
    return coco_box_iou(a[0], a[1], a[2], a[3], b[0], b[1], b[2], b[3], crowd)


@numba.njit(cache=True, nogil=True)
def _steps_1_2(d, g0, ng, dt_box, gt_box, gt_crowd, notebook, t_bg, t_fg, claimed, out):
    """Type I, mislocalised (with its snap target) or ignored, for detection ``d`` (see the module's docstring);
    ``region[d]``: the crowd region it lies on (crowd IoU >= ``t_fg``, the first of largest), else −1."""
    label, target, iou_max, snap, region = out
    best, at, ioa = 0.0, -1, -1.0
    free, free_at, held, held_at = 0.0, -1, 0.0, -1
    for g in range(g0, g0 + ng):
        value = _iou(dt_box[d], gt_box[g], gt_crowd[g])
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
def _match_by_score(g0, ng, d0, nd, box, gt_box, gt_crowd, label, t_fg, match, gt_match):
    """pycocotools' greedy matching at ``t_fg`` of the group's remaining boxes, non-crowd targets only."""
    for d in range(d0, d0 + nd):
        if label[d] == CLS_BG or label[d] == IGNORED:
            continue
        best, m = min(t_fg, 1 - 1e-10), -1
        for g in range(g0, g0 + ng):
            if gt_crowd[g] or gt_match[g] >= 0:
                continue
            value = _iou(box[d], gt_box[g], False)
            if value < best:
                continue
            best, m = value, g
        if m >= 0:
            match[d], gt_match[m] = m, d


@numba.njit(cache=True, nogil=True)
def _match_gt_major(g0, ng, d0, nd, box, gt_box, gt_crowd, label, t_fg, match, gt_match):
    """The notebook's duplicates cell (see the module's docstring)."""
    for g in range(g0, g0 + ng):
        if gt_crowd[g] or gt_match[g] >= 0:
            continue
        for d in range(d0, d0 + nd):
            if label[d] == CLS_BG or label[d] == IGNORED or match[d] >= 0:
                continue
            own = _iou(box[d], gt_box[g], False)
            best, other = own, -1
            for o in range(g0, g0 + ng):
                if o == g or gt_crowd[o] or gt_match[o] >= 0:
                    continue
                value = _iou(box[d], gt_box[o], False)
                if value > best and value >= t_fg:
                    best, other = value, o
            if other >= 0:
                match[d], gt_match[other] = other, d
            elif own >= t_fg:
                match[d], gt_match[g] = g, d
                break


@numba.njit(cache=True, nogil=True)
def diagnose_groups(groups, dt_box, gt_box, gt_crowd, notebook, gt_major, t_bg, t_fg):
    """Every group's labels: ``(label, target, iou_max, snap, match, gt_match)`` — the detection's label code, its
    target row (matched, snap or largest-IoU target; the crowd region of an ignored one; −1), IoU_max over the
    targets, its S2 snap target row, its S3 partner row; each ground truth's S3 partner row (−1: none)."""
    n_dt, n_gt = dt_box.shape[0], gt_box.shape[0]
    label = np.full(n_dt, TP, np.int8)
    target, snap, match = np.full(n_dt, -1, np.int64), np.full(n_dt, -1, np.int64), np.full(n_dt, -1, np.int64)
    region = np.full(n_dt, -1, np.int64)
    iou_max = np.zeros(n_dt)
    gt_match = np.full(n_gt, -1, np.int64)
    claimed = np.zeros(n_gt, np.bool_)
    box = dt_box.copy()  # each detection's box after S2
    for k in range(groups.shape[0]):
        g0, ng, d0, nd = groups[k, 0], groups[k, 1], groups[k, 2], groups[k, 3]
        for d in range(d0, d0 + nd):
            _steps_1_2(d, g0, ng, dt_box, gt_box, gt_crowd, notebook, t_bg, t_fg, claimed,
                       (label, target, iou_max, snap, region))
            if snap[d] >= 0:
                box[d] = gt_box[snap[d]]
        if gt_major:
            _match_gt_major(g0, ng, d0, nd, box, gt_box, gt_crowd, label, t_fg, match, gt_match)
        else:
            _match_by_score(g0, ng, d0, nd, box, gt_box, gt_crowd, label, t_fg, match, gt_match)
        for d in range(d0, d0 + nd):
            if label[d] == TP and match[d] >= 0:
                target[d] = match[d]
            elif label[d] == TP and region[d] >= 0:  # unmatched on a crowd region: COCO ignores it
                label[d], target[d] = IGNORED, region[d]
            elif label[d] == TP:
                label[d] = DUP
    return label, target, iou_max, snap, match, gt_match


def _ids(ids: np.ndarray, rows: np.ndarray) -> pl.Series:
    """``ids`` at ``rows``, null where a row is −1."""
    return pl.Series(ids[np.maximum(rows, 0)] if len(ids) else rows).set(pl.Series(rows < 0), None)


def _boxes(frame: pl.DataFrame, boxes: np.ndarray) -> pl.DataFrame:
    """``frame`` with these boxes, and their area ``w·h`` (pycocotools ``loadRes``)."""
    return frame.with_columns(**{c: pl.Series(boxes[:, i]) for i, c in enumerate("xywh")},
                              area=pl.Series(boxes[:, 2] * boxes[:, 3]))


def borji_shard(gt: pl.DataFrame, dt: pl.DataFrame, context: dict, protocol: BorjiProtocol) -> tuple:
    """``(dt labels, gt labels, stage dt matches, stage gt matches)`` of one shard (schemas in :mod:`evalengine.schema`:
    ``BORJI_DT``, ``BORJI_GT``; the stage tables are COCO match tables with a ``stage`` code first)."""
    category_ids = context["category_ids"]
    targets = prepare_gt(gt, category_ids)  # (category, image, file order)
    dt = dt.filter(pl.col("category_id").is_in(pl.Series(category_ids).implode())).sort(
        [pl.col("category_id"), pl.col("image_id"), pl.col("score") + 0.0, pl.col("det_id")],
        descending=[False, False, True, False])
    groups = merge_groups(column_array(targets, "category_id"), column_array(targets, "image_id"),
                          column_array(dt, "category_id"), column_array(dt, "image_id"), True)
    gt_box, dt_box, crowd = xywh(targets), xywh(dt), column_array(targets, "iscrowd", np.bool_)
    label, target, iou_max, snap, match, gt_match = diagnose_groups(
        groups, dt_box, gt_box, crowd, protocol.variant == "borji_ref", protocol.duplicates == "gt_major",
        protocol.background_threshold, protocol.foreground_threshold)
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
    gt_label = np.where(crowd, GT_IGNORED, np.where(gt_match >= 0, MATCHED, MISS)).astype(np.int8)
    gt_rows = pl.DataFrame({
        **{c: targets.get_column(c) for c in ("image_id", "category_id", "gt_id", "area")},
        "label": gt_label,
        "matched_det_id": _ids(column_array(dt, "det_id"), gt_match),
    }, schema=schema.BORJI_GT)
    stage_dt, stage_gt = [], []
    for code, stage in enumerate(_stages(dt, dt_box, gt_box, targets, label, snap, match, gt_label,
                                         context["miss_id_base"])):
        matched_dt, matched_gt = match_shard(gt, stage, category_ids, protocol.coco)
        stage_dt.append(matched_dt.select(pl.lit(code, pl.Int8).alias("stage"), pl.all()))
        stage_gt.append(matched_gt.select(pl.lit(code, pl.Int8).alias("stage"), pl.all()))
    return dt_rows, gt_rows, pl.concat(stage_dt), pl.concat(stage_gt)


def _stages(dt, dt_box, gt_box, targets, label, snap, match, gt_label, miss_id_base) -> list:
    """The detection set of each stage, in :data:`STAGES` order (columns of the ``dt`` table)."""
    dt = dt.select(schema.DT.keys())
    box_2 = np.where((snap >= 0)[:, None], gt_box[np.maximum(snap, 0)] if len(gt_box) else dt_box, dt_box)
    box_3 = np.where((match >= 0)[:, None], gt_box[np.maximum(match, 0)] if len(gt_box) else dt_box, box_2)
    kept_1 = pl.Series(label != CLS_BG)
    kept_3 = pl.Series((label == IGNORED) | (match >= 0))
    matched = pl.Series(match >= 0)
    missed = targets.filter(pl.Series(gt_label == MISS))
    misses = _boxes(missed.select(
        (pl.col("gt_order") + miss_id_base).alias("det_id"), "image_id", "category_id", pl.lit(1.0).alias("score"),
        "x", "y", "w", "h"), xywh(missed)).cast(schema.DT)
    moved, snapped = _boxes(dt, box_2), _boxes(dt, box_3)
    return [dt, dt.filter(kept_1), moved.filter(kept_1), moved.filter(kept_3),
            pl.concat([snapped.filter(matched), misses]), snapped.filter(kept_3)]
