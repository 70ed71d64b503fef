"""An independent transcription of Borji & Iranmanesh's error diagnosis (spec-detection.md §3.4.3–§3.4.5) in plain
Python, for the differential tests: labels per detection and ground truth, each stage's detection list built as the
paper's steps edit it, and each list evaluated by pycocotools.

It follows the procedure as the reference notebook (``Error_diagnosis.ipynb``) is laid out — a global score-ordered
pass over all detections with claim flags on the targets (``borji_ref``), a ground-truth-major scan per image for
the notebook's duplicates cell — not the engine's per-group kernel. IoU is pycocotools' ``maskUtils.iou`` of the boxes,
or of the masks (``iou_type="segm"``: the ground truth's ``annToRLE``, the results' as ``loadRes`` reads them), or
boundary-iou-api's ``computeBoundaryIoU`` (``"boundary"``, transcribed in ``tests/geometry/test_boundary.py``). A
detection moved onto a target (or added for a miss) takes the target's box, and mask with the mask's area
(``maskUtils.area``), the engine's rule. The engine's decisions are made the same way: ties in file order (§1.3), crowd annotations are not targets, a detection
that would be an error but has crowd IoU >= ``t_fg`` with a crowd region is ignored and untouched until S4, whose
list holds only the snapped true positives and the added misses.
"""

import contextlib
import copy
import io

import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.cocoeval import COCOeval

from tests.geometry.test_boundary import compute_boundary_iou
from tests.io.test_masks_ingest import _coco, _load_res
from tests.match.test_shapes_differential import _BoundaryEval

STAGES = ("S0", "S1_cls", "S2_loc", "S3_dup", "S4_miss", "S3b_snap_only")


class Shapes:
    """What the IoU is taken of — boxes, or masks as pycocotools' ``segm`` evaluation prepares them — and how."""

    def __init__(self, gt: dict, dt: list, iou_type: str = "bbox"):
        self.iou_type = iou_type
        if iou_type == "bbox":
            return
        coco_gt = _coco(gt)
        self.gt = {a["id"]: coco_gt.annToRLE(a) for a in coco_gt.dataset["annotations"]}
        coco_dt = _load_res(coco_gt, dt)
        # loadRes: ids are file positions + 1; area w·h when the first result has a box, else the mask's
        self.dt = {r["id"]: {"segmentation": coco_dt.annToRLE(r), "area": r["area"], "bbox": r["bbox"]}
                   for r in coco_dt.dataset["annotations"]}

    def of_gt(self, ann: dict):
        return ann["bbox"] if self.iou_type == "bbox" else self.gt[ann["id"]]

    def of_dt(self, d: dict, moved: dict):
        """Detection ``d``'s shape, or that of the target it was moved onto (``moved``: det id -> annotation)."""
        if d["det_id"] in moved:
            return self.of_gt(moved[d["det_id"]])
        return d["bbox"] if self.iou_type == "bbox" else self.dt[d["det_id"]]["segmentation"]

    def iou(self, shape, shapes: list, crowd: bool = False) -> np.ndarray:
        if not shapes:
            return np.zeros(0)
        if self.iou_type == "boundary":
            return compute_boundary_iou([mask_utils.decode(shape)], [mask_utils.decode(s) for s in shapes],
                                        [int(crowd)] * len(shapes)).reshape(-1)
        if self.iou_type == "bbox":
            shape, shapes = list(map(float, shape)), [list(map(float, b)) for b in shapes]
        return np.asarray(mask_utils.iou([shape], shapes, [int(crowd)] * len(shapes)), dtype=float).reshape(-1)

    def result(self, d: dict) -> dict:
        """A detection as its stage lists hold it: as given (boxes), or as ``loadRes`` read it (masks)."""
        return d if self.iou_type == "bbox" else dict(d, **self.dt[d["det_id"]])

    def moved(self, d: dict, ann: dict) -> dict:
        """``d`` moved onto the target ``ann``: its box, and its mask with the mask's area."""
        if self.iou_type == "bbox":
            return dict(d, bbox=ann["bbox"])
        rle = self.gt[ann["id"]]
        return dict(d, bbox=ann["bbox"], segmentation=rle, area=float(mask_utils.area(rle)))


def diagnose(gt: dict, dt: list, variant: str = "borji_ref", duplicates: str = "coco", t_bg=0.1, t_fg=0.5,
             iou_type: str = "bbox"):
    """``(det_labels, gt_labels, stages)``: ``det_labels[det_id] = (label, target_gt_id, matched_gt_id)``,
    ``gt_labels[gt_id] = (label, matched_det_id)``, ``stages[name]`` = the stage's result list (det ids 1-based)."""
    shapes = Shapes(gt, dt, iou_type)
    categories = {c["id"] for c in gt["categories"]}
    anns = gt["annotations"]
    targets, crowds = {}, {}  # (image, category) -> annotations in file order
    for ann in anns:
        (crowds if ann.get("iscrowd", 0) else targets).setdefault((ann["image_id"], ann["category_id"]), []).append(ann)
    dets = [dict(d, det_id=i + 1) for i, d in enumerate(dt) if d["category_id"] in categories]
    order = sorted(dets, key=lambda d: (-(d["score"] + 0.0), d["det_id"]))  # every step's order (§1.3)
    label, target, box2, region = {}, {}, {}, {}  # box2: the target a detection is moved onto in S2
    for d in order:  # the crowd region each detection lies on (crowd IoU >= t_fg), if any
        regions = crowds.get((d["image_id"], d["category_id"]), [])
        ioa = shapes.iou(shapes.of_dt(d, box2), [shapes.of_gt(a) for a in regions], crowd=True)
        if ioa.size and ioa.max() >= t_fg:
            region[d["det_id"]] = regions[int(np.argmax(ioa))]["id"]
    claimed = set()
    for d in order:  # S1 and S2
        group = targets.get((d["image_id"], d["category_id"]), [])
        ious = shapes.iou(shapes.of_dt(d, box2), [shapes.of_gt(a) for a in group])
        best = int(np.argmax(ious)) if ious.size and ious.max() > 0 else None
        target[d["det_id"]] = None if best is None else group[best]["id"]
        if variant == "paper":
            snap = best
            value = 0.0 if best is None else ious[best]
        else:  # the notebook: the best unclaimed target overlapping at all, else the best claimed one
            free = [(ious[j], -j) for j, a in enumerate(group) if a["id"] not in claimed and ious[j] > 0]
            taken = [(ious[j], -j) for j, a in enumerate(group) if a["id"] in claimed and ious[j] > 0]
            pick = max(free) if free else (max(taken) if taken else None)
            snap = None if pick is None else -pick[1]
            value = 0.0 if pick is None else pick[0]
        if value < t_fg and d["det_id"] in region:
            label[d["det_id"]], target[d["det_id"]] = "ignored", region[d["det_id"]]
            continue
        if variant != "paper" and free and value > t_bg:
            claimed.add(group[snap]["id"])
        if value <= t_bg:
            label[d["det_id"]] = "cls_bg"
        elif value < t_fg:
            label[d["det_id"]] = "loc"
            target[d["det_id"]] = group[snap]["id"]
            box2[d["det_id"]] = group[snap]
    candidates = [d for d in order if label.get(d["det_id"]) in (None, "loc")]
    matched = _match_gt_major(gt, candidates, targets, box2, t_fg, shapes) if duplicates == "gt_major" else \
        _match_by_score(candidates, targets, box2, t_fg, shapes)
    by_gt = {g: d for d, g in matched.items()}
    for d in candidates:
        if label.get(d["det_id"]) == "loc":
            continue
        if d["det_id"] in matched:
            label[d["det_id"]], target[d["det_id"]] = "tp", matched[d["det_id"]]
        elif d["det_id"] in region:
            label[d["det_id"]], target[d["det_id"]] = "ignored", region[d["det_id"]]
        else:
            label[d["det_id"]] = "dup"
    gt_labels = {}
    for ann in anns:
        if ann["category_id"] not in categories:
            continue
        if ann.get("iscrowd", 0):
            gt_labels[ann["id"]] = ("ignored", None)
        else:
            gt_labels[ann["id"]] = ("matched", by_gt[ann["id"]]) if ann["id"] in by_gt else ("miss", None)
    det_labels = {d["det_id"]: (label[d["det_id"]], target.get(d["det_id"]), matched.get(d["det_id"]))
                  for d in dets}
    return det_labels, gt_labels, _stages(gt, dets, det_labels, gt_labels, box2, shapes)


def _match_by_score(candidates, targets, box2, t_fg, shapes):
    """One-to-one greedy matching at IoU >= t_fg in score order, as pycocotools' ``evaluateImg`` (the largest IoU
    among free targets, a later target winning a tie)."""
    taken, matched = set(), {}
    for d in candidates:
        group = targets.get((d["image_id"], d["category_id"]), [])
        ious = shapes.iou(shapes.of_dt(d, box2), [shapes.of_gt(a) for a in group])
        best, m = min(t_fg, 1 - 1e-10), None
        for j, a in enumerate(group):
            if a["id"] in taken or ious[j] < best:
                continue
            best, m = ious[j], a["id"]
        if m is not None:
            taken.add(m)
            matched[d["det_id"]] = m
    return matched


def _match_gt_major(gt, candidates, targets, box2, t_fg, shapes):
    """The notebook's duplicates cell: per image, per unseen annotation in file order, the detections in score order;
    a detection overlapping another unseen annotation more (and >= t_fg) goes there, else one at >= t_fg with this
    annotation takes it and the scan moves to the next annotation."""
    seen, matched = set(), {}
    by_image = {}
    for d in candidates:
        by_image.setdefault(d["image_id"], []).append(d)
    for image in gt["images"]:
        for ann in [a for a in gt["annotations"] if a["image_id"] == image["id"] and not a.get("iscrowd", 0)]:
            if ann["id"] in seen:
                continue
            for d in by_image.get(image["id"], []):
                if d["category_id"] != ann["category_id"] or d["det_id"] in matched:
                    continue
                box = shapes.of_dt(d, box2)
                own = shapes.iou(box, [shapes.of_gt(ann)])[0]
                best, other = own, None
                for o in targets[(image["id"], ann["category_id"])]:
                    if o["id"] in seen or o["id"] == ann["id"]:
                        continue
                    value = shapes.iou(box, [shapes.of_gt(o)])[0]
                    if value > best and value >= t_fg:
                        best, other = value, o["id"]
                if other is not None:
                    seen.add(other)
                    matched[d["det_id"]] = other
                elif own >= t_fg:
                    seen.add(ann["id"])
                    matched[d["det_id"]] = ann["id"]
                    break
    return matched


def _stages(gt, dets, det_labels, gt_labels, box2, shapes):
    """Each stage's result list: S1 drops Type I errors, S2 snaps the mislocalised boxes, S3 keeps the matched and
    the ignored detections, S3b snaps the matched ones onto their targets, S4 keeps those and appends every missed
    target (file order) with score 1."""
    anns = {a["id"]: a for a in gt["annotations"]}
    matched = {d: m for d, (_, _, m) in det_labels.items() if m is not None}
    dets = [shapes.result(d) for d in dets]
    s1 = [d for d in dets if det_labels[d["det_id"]][0] != "cls_bg"]
    s2 = [shapes.moved(d, box2[d["det_id"]]) if d["det_id"] in box2 else d for d in s1]
    s3 = [d for d in s2 if det_labels[d["det_id"]][0] == "ignored" or d["det_id"] in matched]
    snap = [shapes.moved(d, anns[matched[d["det_id"]]]) if d["det_id"] in matched else d for d in s3]
    misses = [shapes.moved({"image_id": a["image_id"], "category_id": a["category_id"], "score": 1}, a)
              for a in gt["annotations"] if gt_labels.get(a["id"], ("",))[0] == "miss"]
    s4 = [d for d in snap if d["det_id"] in matched] + misses
    lists = (dets, s1, s2, s3, s4, snap)
    return {name: [{k: v for k, v in d.items() if k != "det_id"} for d in rows] for name, rows in zip(STAGES, lists)}


def evaluate(gt: dict, dt: list, iou_type: str = "bbox") -> list:
    """pycocotools' 12 numbers of a result list: read by ``loadRes`` (boxes), or as given (masks: each result holds
    the mask, area and box ``loadRes`` gave it, or a moved one's, :class:`Shapes`); ``boundary`` by boundary-iou-api's
    evaluation. An empty list as pycocotools would see a result file without detections (``loadRes`` cannot take
    one, so the results object is built as it builds it)."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = _coco(gt)
        if dt and iou_type == "bbox":
            coco_dt = coco_gt.loadRes(copy.deepcopy(dt))
        else:
            coco_dt = _coco({"images": gt["images"], "categories": gt["categories"],
                             "annotations": [dict(d, id=i + 1, iscrowd=0) for i, d in enumerate(dt)]})
        ev = (_BoundaryEval if iou_type == "boundary" else COCOeval)(coco_gt, coco_dt,
                                                                      "bbox" if iou_type == "bbox" else "segm")
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return [float(v) for v in ev.stats]
