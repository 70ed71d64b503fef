"""A transcription of MATLAB ``CocoEval.analyze`` (cocodataset/cocoapi @ 8c9bcc3, ``MatlabAPI/CocoEval.m``) built on
pycocotools: the same evaluations on the same modified ground truth, each run by pycocotools' ``COCOeval`` with
MATLAB's ignore rule.

MATLAB's ``analyze``:

1. ``maxDets = 100``, ``iouThrs = [.75 .5 .1]``: ``evaluate``, ``accumulate`` → rows C75, C50, Loc of ``ps``;
2. per category k (``useCats = 0``, ``iouThrs = .1``, the detections of k only):
   Sim — the ground truth restricted to the categories of k's supercategory, ``ignore = 1`` on the others;
   Oth — all the ground truth, ``ignore = 1`` on every category but k;
3. ``ps(ps == -1) = 0``; BG = ``ps(Oth) > 0``; FN = 1.

MATLAB's ``evaluateImg`` ignores a ground truth that is crowd OR has its ``ignore`` field set OR lies outside the area
range; pycocotools' ``_prepare`` overwrites ``ignore`` with ``iscrowd``, which :class:`MatlabCOCOeval` undoes.
"""

import numpy as np
from pycocotools import mask as mask_utils
from pycocotools.cocoeval import COCOeval

from tests.generators import random_coco
from tests.geometry.test_boundary import compute_boundary_iou
from tests.shape_generators import random_masks
from tests.reference import pycocotools_eval

CURVES = ("C75", "C50", "Loc", "Sim", "Oth", "BG", "FN")


class MatlabCOCOeval(COCOeval):
    """pycocotools' evaluation with MATLAB ``CocoEval``'s ``gtIg = iscrowd | ignore | area outside``."""

    def _prepare(self):
        flags = {ann["id"]: bool(ann.get("ignore", 0)) for ann in self.cocoGt.dataset["annotations"]}
        super()._prepare()  # sets gt['ignore'] = iscrowd
        for gts in self._gts.values():
            for gt in gts:
                gt["ignore"] = int(bool(gt["ignore"]) or flags[gt["id"]])


class MatlabBoundaryCOCOeval(MatlabCOCOeval):
    """The same with boundary IoU as the authors' ``computeBoundaryIoU`` (boundary-iou-api, transcribed in
    ``tests/geometry/test_boundary.py``) on the masks pycocotools' ``segm`` evaluation prepares."""

    def computeIoU(self, imgId, catId):
        p = self.params
        gt = self._gts[imgId, catId] if p.useCats else [g for c in p.catIds for g in self._gts[imgId, c]]
        dt = self._dts[imgId, catId] if p.useCats else [d for c in p.catIds for d in self._dts[imgId, c]]
        if not gt or not dt:
            return []
        dt = [dt[i] for i in np.argsort([-d["score"] for d in dt], kind="mergesort")][:p.maxDets[-1]]
        return compute_boundary_iou([mask_utils.decode(d["segmentation"]) for d in dt],
                                    [mask_utils.decode(g["segmentation"]) for g in gt], [int(g["iscrowd"]) for g in gt])


def _precision(gt: dict, dt: list, iou_type: str = "bbox", **params) -> np.ndarray:
    """``eval['precision']`` [T, R, K, A] at 100 detections, MATLAB's ignore rule (``iou_type``: pycocotools', or
    ``boundary``)."""
    evaluator = MatlabBoundaryCOCOeval if iou_type == "boundary" else MatlabCOCOeval
    ev = pycocotools_eval(gt, dt, max_dets=[100], evaluator=evaluator, summarize=False,
                          iou_type="segm" if iou_type == "boundary" else iou_type, **params)
    return ev.eval["precision"][..., 0]


def matlab_analyze(gt: dict, dt: list, area_ranges=None, recall_thresholds=None, iou_type: str = "bbox") -> tuple:
    """``(category ids, ps)``: MATLAB's ``ps`` [7 curves, R, K, A] (curves in :data:`CURVES` order), categories in
    id order (MATLAB's ``evaluate`` sorts them; its loop pairs them with ``getCatIds()``, the file order)."""
    cat_ids = sorted(c["id"] for c in gt["categories"])
    supercategory = {c["id"]: c["supercategory"] for c in gt["categories"]}
    # MATLAB's analyze keeps params' areas, recall thresholds and iouType (segm: pycocotools' maskUtils.iou)
    params = {"area_ranges": area_ranges, "recall_thresholds": recall_thresholds, "iou_type": iou_type}
    class_wise = _precision(gt, dt, iou_thresholds=[0.75, 0.5, 0.1], **params)
    ps = np.zeros((7, *class_wise.shape[1:]))
    ps[:3] = class_wise
    for k, cat in enumerate(cat_ids):
        mine = [d for d in dt if d["category_id"] == cat]
        same = {c for c in cat_ids if supercategory[c] == supercategory[cat]}
        for row, kept in ((3, same), (4, set(cat_ids))):
            anns = [a if a["category_id"] == cat else dict(a, ignore=1)
                    for a in gt["annotations"] if a["category_id"] in kept]
            if mine:
                ps[row, :, k, :] = _precision(dict(gt, annotations=anns), mine, use_cats=False, iou_thresholds=[0.1],
                                              **params)[0, :, 0, :]
            # else: no detection, precision 0 (-1 without regular ground truth, 0 below); pycocotools' loadRes
            # cannot load an empty result list
    ps[ps == -1] = 0
    ps[5] = ps[4] > 0
    ps[6] = 1
    return cat_ids, ps


def _with_confusions(gt: dict, dt: list, rng, moved) -> tuple:
    """Two supercategories drawn, objects of another category laid on some objects (``moved(ann)``: the copy's
    shape; some crowd: Sim and Oth ignore detections there) and, half the time, a category with detections but no
    ground truth."""
    cats = [c["id"] for c in gt["categories"]]
    for category in gt["categories"]:
        category["supercategory"] = f"s{int(rng.integers(0, 2))}"
    next_id = max((a["id"] for a in gt["annotations"]), default=0) + 1
    for ann in list(gt["annotations"]):
        if len(cats) > 1 and rng.random() < 0.3:
            shape = moved(ann)
            gt["annotations"].append(dict(ann, id=next_id, category_id=int(rng.choice([c for c in cats
                                                                                      if c != ann["category_id"]])),
                                          **shape, iscrowd=int(rng.random() < 0.2)))
            next_id += 1
    if rng.random() < 0.5:  # detections of a category without ground truth
        gt["categories"].append({"id": 99, "name": "detected only", "supercategory": "s0"})
        dt += [dict(d, category_id=99, score=round(float(rng.random()), 2)) for d in dt[:3]]
    return gt, dt


def random_dataset(seed: int) -> tuple:
    """``random_coco(seed)`` with :func:`_with_confusions`: the other category's object on the same box, or nearly."""
    rng = np.random.default_rng(50_000 + seed)

    def moved(ann):
        x, y, w, h = ann["bbox"]
        dx, dy = rng.normal(0, 0.1 * max(w, 1), 2) * (rng.random() < 0.5)
        return {"bbox": [x + dx, y + dy, w, h]}
    return _with_confusions(*random_coco(seed), rng, moved)


def random_mask_dataset(seed: int) -> tuple:
    """``random_masks(seed)`` (polygons, RLE, crowd, empty and 1-pixel masks, areas at 32² and 96²) with
    :func:`_with_confusions`: the other category's object on the same mask."""
    return _with_confusions(*random_masks(seed), np.random.default_rng(70_000 + seed), lambda ann: {})
