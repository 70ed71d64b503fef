"""pycocotools as the reference: run it on in-memory COCO dicts and return what the tests compare."""

import contextlib
import copy
import io

import numpy as np
from pycocotools.coco import COCO
from pycocotools.cocoeval import COCOeval


def pycocotools_eval(gt: dict, dt: list, use_cats=True, max_dets=None, iou_thresholds=None, area_ranges=None,
                     recall_thresholds=None, image_ids=None, category_ids=None, evaluator=COCOeval,
                     summarize=True, iou_type="bbox", kpt_oks_sigmas=None) -> COCOeval:
    """``evaluator`` (COCOeval or a subclass) run on copies of ``gt`` and ``dt``; ``summarize`` needs pycocotools'
    three max dets (keypoints: 20)."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = COCO()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(copy.deepcopy(dt))
        ev = evaluator(coco_gt, coco_dt, iou_type)
        if kpt_oks_sigmas is not None:
            ev.params.kpt_oks_sigmas = np.array(kpt_oks_sigmas)
        ev.params.useCats = int(use_cats)
        if max_dets is not None:
            ev.params.maxDets = list(max_dets)
        if iou_thresholds is not None:
            ev.params.iouThrs = np.array(iou_thresholds)
        if recall_thresholds is not None:
            ev.params.recThrs = np.array(recall_thresholds)
        if image_ids is not None:
            ev.params.imgIds = list(image_ids)
        if category_ids is not None:
            ev.params.catIds = list(category_ids)
        if area_ranges is not None:
            ev.params.areaRng = [[lo, hi] for _, lo, hi in area_ranges]
            ev.params.areaRngLbl = [label for label, _, _ in area_ranges]
        ev.evaluate()
        ev.accumulate()
        if summarize:
            ev.summarize()
    return ev


def per_class(ev: COCOeval) -> dict:
    """AP, AP50 and AR per category id for area 'all' and the last maxDets, as our per-class table defines them."""
    out = {}
    precision, recall = ev.eval["precision"], ev.eval["recall"]
    at50 = np.where(ev.params.iouThrs == 0.5)[0]
    for k, cat in enumerate(ev.params.catIds if ev.params.useCats else [-1]):
        p = precision[:, :, k, 0, -1]
        r = recall[:, k, 0, -1]
        p50 = precision[at50, :, k, 0, -1]
        out[cat] = tuple(float(np.mean(x[x > -1])) if (x > -1).any() else -1.0 for x in (p, p50, r))
    return out
