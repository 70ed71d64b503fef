"""Confusion matrices against a brute-force count from the raw boxes: pycocotools' ``evaluateImg`` for the same-class
matching (its ``evalImgs``), then plain loops for the cross-class step the module docstring defines
(:mod:`evalengine.metrics.confusion`); and the row / column sums it promises."""

from collections import Counter

import numpy as np
import polars as pl
import pytest
from pycocotools import mask as mask_utils

from evalengine import CocoProtocol
from evalengine.errors import InputError, ProtocolError
from tests.generators import random_coco
from tests.helpers import ours_evaluation
from tests.reference import pycocotools_eval
from tests.shape_generators import random_masks


def brute_force(gt: dict, dt: list, t_index: int, thresholds, iou_type: str = "bbox") -> tuple:
    """``(Counter of (gt class, dt class) cells, Counter of (image, gt class, dt class))``, background None;
    ``thresholds``: ``{category_id: score}`` (missing: nothing kept); ``iou_type`` bbox or segm (``annToRLE``)."""
    ev = pycocotools_eval(gt, dt, iou_type=iou_type)
    tau = ev.params.iouThrs[t_index]
    tp, fp, free = [], [], []  # (image, det_id, class, score) / (image, gt_id, class)
    for e in ev.evalImgs:
        if e is None or e["aRng"] != ev.params.areaRng[0] or e["maxDet"] != ev.params.maxDets[-1]:
            continue
        matched = set()
        for k, det_id in enumerate(e["dtIds"]):
            if e["dtScores"][k] < thresholds.get(e["category_id"], np.inf) or e["dtIgnore"][t_index][k]:
                continue
            if e["dtMatches"][t_index][k] > 0:
                tp.append((e["image_id"], det_id, e["category_id"]))
                matched.add(int(e["dtMatches"][t_index][k]))
            else:
                fp.append((e["image_id"], det_id, e["category_id"], e["dtScores"][k]))
        free += [(e["image_id"], g, e["category_id"]) for g, ig in zip(e["gtIds"], e["gtIgnore"])
                 if not ig and g not in matched]
    boxes = {a["id"]: a["bbox"] for a in gt["annotations"]}
    order = {a["id"]: i for i, a in enumerate(gt["annotations"])}
    cells = [(image, c, c) for image, _, c in tp]
    taken = set()
    for image, det_id, c, _ in sorted(fp, key=lambda f: (f[0], -f[3], f[1])):
        best, best_iou = None, min(tau, 1 - 1e-10)
        for _, g, gc in sorted((f for f in free if f[0] == image), key=lambda f: order[f[1]]):
            if gc == c or g in taken:
                continue
            if iou_type == "segm":
                iou = mask_utils.iou([ev.cocoDt.annToRLE(ev.cocoDt.anns[det_id])],
                                     [ev.cocoGt.annToRLE(ev.cocoGt.anns[g])], [0])[0, 0]
            else:
                iou = mask_utils.iou([dt[det_id - 1]["bbox"]], [boxes[g]], [0])[0, 0]
            if iou >= best_iou and (best is None or iou > best_iou):
                best, best_iou = (g, gc), iou
        if best is None:
            cells.append((image, None, c))
        else:
            taken.add(best[0])
            cells.append((image, best[1], c))
    cells += [(image, gc, None) for image, g, gc in free if g not in taken]
    return Counter((g, d) for _, g, d in cells), Counter(cells)


def _category_ids(gt):
    return [c["id"] for c in gt["categories"]]


@pytest.mark.parametrize("seed", range(50))
def test_equals_the_brute_force_count(tmp_path, seed):
    gt, dt = random_coco(seed)
    rng = np.random.default_rng(seed)
    t_index = int(rng.choice([0, 0, 5, 9]))
    ev = ours_evaluation(tmp_path, gt, dt, n_shards=1 + seed % 3)
    ids = _category_ids(gt)
    if seed % 3 == 0:
        score, thresholds = 0.0, {c: 0.0 for c in ids}
    elif seed % 3 == 1:
        score = float(rng.choice([0.3, 0.5]))
        thresholds = {c: score for c in ids}
    else:  # per class, one class missing, one null
        thresholds = {c: float(rng.random()) for c in ids[1:]}
        score = pl.DataFrame({"category_id": ids, "threshold": [None, *thresholds.values()]},
                             schema={"category_id": pl.Int64, "threshold": pl.Float64})
    confusion = ev.confusion(ev.protocol.iou_thresholds[t_index], score)
    want, want_per_image = brute_force(gt, dt, t_index, thresholds)
    got = {(r["gt_category_id"], r["dt_category_id"]): r["count"] for r in confusion.matrix().iter_rows(named=True)}
    assert {k: v for k, v in got.items() if v} == dict(want), f"seed {seed}"
    assert len(got) == (len(ids) + 1) ** 2
    per_image = {(r["image_id"], r["gt_category_id"], r["dt_category_id"]): r["count"]
                 for r in confusion.per_image().iter_rows(named=True)}
    assert per_image == dict(want_per_image)


@pytest.mark.parametrize("seed", range(20))
def test_masks_equal_the_brute_force_count(tmp_path, seed):
    """On masks (``iou_type="segm"``): pycocotools' segm matching on the diagonal, confusions by mask IoU."""
    gt, dt = random_masks(seed)
    ev = ours_evaluation(tmp_path, gt, dt, CocoProtocol(iou_type="segm"), n_shards=1 + seed % 2)
    confusion = ev.confusion(0.5, 0.0)
    want, want_per_image = brute_force(gt, dt, 0, {c: 0.0 for c in _category_ids(gt)}, "segm")
    got = {(r["gt_category_id"], r["dt_category_id"]): r["count"] for r in confusion.matrix().iter_rows(named=True)}
    assert {k: v for k, v in got.items() if v} == dict(want), f"seed {seed}"
    per_image = {(r["image_id"], r["gt_category_id"], r["dt_category_id"]): r["count"]
                 for r in confusion.per_image().iter_rows(named=True)}
    assert per_image == dict(want_per_image)


def test_masks_without_pairs_are_refused(tmp_path):
    gt, dt = random_masks(0)
    ev = ours_evaluation(tmp_path, gt, dt, CocoProtocol(iou_type="boundary"))
    with pytest.raises(ProtocolError, match="iou_type 'boundary' has no pairs table"):
        ev.confusion(0.5, 0.0)


@pytest.mark.parametrize("seed", range(50, 62))
def test_rows_sum_to_ground_truths_and_columns_to_detections(tmp_path, seed):
    gt, dt = random_coco(seed)
    ev = ours_evaluation(tmp_path, gt, dt)
    array = ev.confusion(0.5, 0.0).array()
    ids = _category_ids(gt)
    regular = Counter(a["category_id"] for a in gt["annotations"] if not a["iscrowd"])
    assert array[:-1].sum(axis=1).tolist() == [regular[c] for c in ids]
    outcome = ev.dt_matches().filter(pl.col("dt_rank") < 100).collect()
    counted = outcome.filter((pl.col("ignored_bits").arr.get(0) & 1) == 0).get_column("category_id").to_list()
    assert array[:, :-1].sum(axis=0).tolist() == [Counter(counted)[c] for c in ids]
    assert array[-1, -1] == 0
    normalised = ev.confusion(0.5, 0.0).array(normalize=True)
    rows = array.sum(axis=1) > 0
    np.testing.assert_allclose(normalised[rows].sum(axis=1), 1.0)
    assert not normalised[~rows].any()


def test_a_class_swap_is_off_the_diagonal_and_a_taken_object_is_not_taken_twice(tmp_path):
    box = [10.0, 10.0, 50.0, 50.0]
    gt = {"images": [{"id": 1, "width": 100, "height": 100}],
          "categories": [{"id": 1, "name": "cat"}, {"id": 2, "name": "dog"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": box, "area": 2500.0, "iscrowd": 0},
                          {"id": 2, "image_id": 1, "category_id": 2, "bbox": [60.0, 60.0, 30.0, 30.0],
                           "area": 900.0, "iscrowd": 0}]}
    dt = [{"image_id": 1, "category_id": 2, "bbox": box, "score": 0.9},   # a dog on the cat: (cat, dog)
          {"image_id": 1, "category_id": 2, "bbox": box, "score": 0.8},   # the cat is taken: (background, dog)
          {"image_id": 1, "category_id": 1, "bbox": [0.0, 0.0, 5.0, 5.0], "score": 0.7}]  # (background, cat)
    array = ours_evaluation(tmp_path, gt, dt).confusion(0.5, 0.5).array()
    assert array.tolist() == [[0, 1, 0], [0, 0, 1], [1, 1, 0]]


def test_bad_thresholds_are_refused(tmp_path):
    gt, dt = random_coco(3)
    ev = ours_evaluation(tmp_path, gt, dt)
    with pytest.raises(ProtocolError, match="IoU threshold 0.3"):
        ev.confusion(0.3)
    with pytest.raises(InputError, match="missing column"):
        ev.confusion(0.5, pl.DataFrame({"category_id": [1]}))
    with pytest.raises(InputError, match="finite number"):
        ev.confusion(0.5, float("nan"))
    (tmp_path / "pooled").mkdir()
    with pytest.raises(ProtocolError, match="use_cats"):
        ours_evaluation(tmp_path / "pooled", gt, dt, CocoProtocol(use_cats=False)).confusion(0.5)
