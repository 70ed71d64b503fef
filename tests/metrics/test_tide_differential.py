"""Differential test: TIDE on hundreds of random datasets equals tidecv 1.0.1 itself (ΔAP to 1e-9, counts exactly).

Each case joins a few ``random_coco`` datasets (ties, crowd, empty images, classes without ground truth, > 100
detections in an image-category), renumbered apart, plus TIDE's own stressors: an image of > 100 detections of
mixed classes (the cap is per image), and boxes at exactly IoU 0.5 and 0.1 and at exactly 0.5 inside a crowd region
(tidecv's ``>=`` for matching and Cls, ``<=`` for Loc and Bkg, ``>`` for ignore regions)."""

import json

import numpy as np
import pytest

from evalengine import api
from evalengine.errors import InputError
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.metrics.tide_reference import tidecv_errors

DATASETS_PER_CASE = 5
CASES = 60


def _crowded_image(rng, gt, dt):
    """> 100 detections of every class on one image, around its objects or anywhere, scores with ties."""
    image = int(rng.choice([i["id"] for i in gt["images"]]))
    boxes = [a["bbox"] for a in gt["annotations"] if a["image_id"] == image] or [[10.0, 10.0, 50.0, 40.0]]
    cats = [c["id"] for c in gt["categories"]] + [max(c["id"] for c in gt["categories"]) + 1]  # one not in the GT
    for _ in range(int(rng.integers(101, 130))):
        x, y, w, h = boxes[int(rng.integers(len(boxes)))]
        dx, dy = rng.normal(0, 0.3 * max(w, 1), 2)
        dt.append({"image_id": image, "category_id": int(rng.choice(cats)), "score": round(float(rng.random()), 1),
                   "bbox": [x + dx, y + dy, w * float(np.exp(rng.normal(0, 0.3))), h]})


def _boundary_image(gt, dt, image_id, cat, other):
    """A 10×10 object and detections at IoU exactly 0.5 (its class and another), 0.1, and IoA exactly 0.5 with a
    crowd region."""
    gt["images"].append({"id": image_id, "width": 100, "height": 100})
    gt["annotations"] += [
        {"id": image_id * 10 + 1, "image_id": image_id, "category_id": cat, "bbox": [0, 0, 10, 10], "area": 100,
         "iscrowd": 0},
        {"id": image_id * 10 + 2, "image_id": image_id, "category_id": cat, "bbox": [50, 50, 5, 10], "area": 50,
         "iscrowd": 1}]
    for category, box, score in ((cat, [0, 0, 5, 10], 0.9), (cat, [0, 0, 5, 10], 0.9), (other, [0, 5, 10, 5], 0.8),
                                 (cat, [0, 0, 1, 10], 0.7), (cat, [50, 50, 10, 10], 0.6), (cat, [50, 50, 6, 10], 0.6)):
        dt.append({"image_id": image_id, "category_id": category, "bbox": box, "score": score})


def _case(case: int):
    rng = np.random.default_rng(10_000 + case)
    gt = {"images": [], "annotations": [], "categories": []}
    dt = []
    for k in range(DATASETS_PER_CASE):
        one_gt, one_dt = random_coco(case * DATASETS_PER_CASE + k)
        offset = 100 * k
        gt["images"] += [dict(i, id=i["id"] + offset) for i in one_gt["images"]]
        gt["categories"] += [dict(c, id=c["id"] + offset) for c in one_gt["categories"]]
        gt["annotations"] += [dict(a, id=a["id"] + 10**6 * k, image_id=a["image_id"] + offset,
                                   category_id=a["category_id"] + offset) for a in one_gt["annotations"]]
        dt += [dict(d, image_id=d["image_id"] + offset, category_id=d["category_id"] + offset) for d in one_dt]
    if case % 3 == 0:
        _crowded_image(rng, gt, dt)
    if case % 4 == 0:
        cats = [c["id"] for c in gt["categories"]]
        _boundary_image(gt, dt, 10_000 + case, cats[0], cats[-1])
    gt["categories"] += [{"id": 9999, "name": "detected only"}]
    dt = [dt[i] for i in rng.permutation(len(dt))]
    return gt, dt


def _assert_equal(got: dict, want: dict, where: str):
    assert got["ap50"] == pytest.approx(want["ap50"], abs=1e-9), where
    for kind in ("main", "special"):
        assert got[kind] == pytest.approx(want[kind], abs=1e-9), f"{where} {kind}"
    assert got["counts"] == want["counts"], where


@pytest.mark.parametrize("batch", range(6))
def test_random_datasets_equal_tidecv(tmp_path, batch):
    for case in range(batch * CASES // 6, (batch + 1) * CASES // 6):
        gt, dt = _case(case)
        folder = tmp_path / str(case)
        folder.mkdir()
        gt_path, dt_path = write_inputs(folder, gt, dt)
        want = tidecv_errors(json.loads(gt_path.read_text()), json.loads(dt_path.read_text()))
        got = api.tide((gt_path, dt_path), n_shards=1 + case % 4).result.as_dict()
        _assert_equal(got, want, f"case {case}")


@pytest.mark.parametrize("seed", range(0, 60, 2))
def test_single_random_datasets_equal_tidecv(tmp_path, seed):
    gt, dt = random_coco(seed)
    gt_path, dt_path = write_inputs(tmp_path, gt, dt)
    if not any(not a.get("iscrowd") for a in gt["annotations"]):  # tidecv divides by zero
        with pytest.raises(InputError, match="no annotations"):
            api.tide((gt_path, dt_path))
        return
    want = tidecv_errors(json.loads(gt_path.read_text()), json.loads(dt_path.read_text()))
    _assert_equal(api.tide((gt_path, dt_path), n_shards=2).result.as_dict(), want, f"seed {seed}")
