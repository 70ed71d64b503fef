"""A results dataset built by hand (``COCO()``, ``dataset`` set, ``createIndex()``, not ``loadRes``) may hold a detection
of annotation id 0. pycocotools ``evaluateImg`` records a match as ``gtm[t, g] = d['id']`` and tests ``gtm[t, g] > 0``
for a taken ground truth, so a match of detection id 0 leaves its ground truth free for a later detection (which is
then a true positive too), and ``gtMatches`` shows 0 there. The engine's matching has no such rule; the entries of
``evalImgs`` of the (image, category) groups holding such a detection are made again here as ``evaluateImg`` makes
them, from the same IoU matrices (``COCOeval.ious``), and accumulated from that list."""

import numpy as np


def zero_id_groups(coco_dt, image_ids, category_ids, use_cats: bool) -> set:
    """``(image_id, category_id)`` of the evaluated groups holding a detection of id 0 (category -1 when pooled)."""
    images, cats = set(image_ids), set(category_ids)
    return {(ann["image_id"], ann["category_id"] if use_cats else -1) for ann in coco_dt.dataset.get("annotations", [])
            if ann.get("id") == 0 and ann["image_id"] in images and (not use_cats or ann["category_id"] in cats)}


def _objects(coco, image_id: int, category_id: int, p) -> list:
    """pycocotools' objects of one group: the image's annotations in index order, of the category (pooled: of each
    of ``catIds`` in turn, as ``computeIoU`` and ``evaluateImg`` gather them)."""
    anns = coco.loadAnns(coco.getAnnIds(imgIds=[image_id]))
    return [a for c in ([category_id] if p.useCats else p.catIds) for a in anns if a["category_id"] == c]


def evaluate_group(coco_gt, coco_dt, ious, image_id: int, category_id: int, area_range, max_det: int, p) -> dict:
    """pycocotools ``evaluateImg`` of one group (its dict, or None with no object); crowd ground truths are ignored
    (``_prepare`` sets ``ignore = iscrowd``; keypoints: also with no labelled keypoint)."""
    gt, dt = _objects(coco_gt, image_id, category_id, p), _objects(coco_dt, image_id, category_id, p)
    if not gt and not dt:
        return None
    lo, hi = area_range
    crowd = np.array([bool(g.get("iscrowd", 0)) for g in gt], bool)
    ignore = crowd | np.array([p.iouType == "keypoints" and g["num_keypoints"] == 0 for g in gt], bool)
    gt_ignore = (ignore | np.array([g["area"] < lo or g["area"] > hi for g in gt], bool)).astype(int)
    gt_order = np.argsort(gt_ignore, kind="mergesort")
    gt = [gt[i] for i in gt_order]
    gt_ignore, crowd = gt_ignore[gt_order], crowd[gt_order]
    dt_order = np.argsort([-d["score"] for d in dt], kind="mergesort")
    dt = [dt[i] for i in dt_order[:max_det]]
    iou = ious[image_id, category_id]
    iou = iou[:, gt_order] if len(iou) > 0 else iou
    n_thr = len(p.iouThrs)
    gtm, dtm = np.zeros((n_thr, len(gt))), np.zeros((n_thr, len(dt)))
    dt_ignore = np.zeros((n_thr, len(dt)))
    if len(iou):
        for t, threshold in enumerate(p.iouThrs):
            for d, det in enumerate(dt):
                best, m = min([threshold, 1 - 1e-10]), -1
                for g in range(len(gt)):
                    if gtm[t, g] > 0 and not crowd[g]:
                        continue
                    if m > -1 and gt_ignore[m] == 0 and gt_ignore[g] == 1:
                        break
                    if iou[d, g] < best:
                        continue
                    best, m = iou[d, g], g
                if m == -1:
                    continue
                dt_ignore[t, d] = gt_ignore[m]
                dtm[t, d] = gt[m]["id"]
                gtm[t, m] = det["id"]
    outside = np.array([d["area"] < lo or d["area"] > hi for d in dt], bool).reshape(1, len(dt))
    dt_ignore = np.logical_or(dt_ignore, np.logical_and(dtm == 0, np.repeat(outside, n_thr, 0)))
    return {"image_id": image_id, "category_id": category_id, "aRng": area_range, "maxDet": max_det,
            "dtIds": [d["id"] for d in dt], "gtIds": [g["id"] for g in gt], "dtMatches": dtm, "gtMatches": gtm,
            "dtScores": [d["score"] for d in dt], "gtIgnore": gt_ignore, "dtIgnore": dt_ignore}


def with_zero_id_groups(eval_imgs: list, groups: set, coco_gt, coco_dt, ious, p) -> list:
    """``eval_imgs`` (pycocotools' order: category, area range, image) with the entries of ``groups`` made again."""
    eval_imgs = list(eval_imgs)
    cats = p.catIds if p.useCats else [-1]
    n_area, n_img = len(p.areaRng), len(p.imgIds)
    for k, category_id in enumerate(cats):
        for a, area_range in enumerate(p.areaRng):
            for i, image_id in enumerate(p.imgIds):
                if (image_id, category_id) in groups:
                    eval_imgs[k * n_area * n_img + a * n_img + i] = evaluate_group(
                        coco_gt, coco_dt, ious, image_id, category_id, area_range, p.maxDets[-1], p)
    return eval_imgs
