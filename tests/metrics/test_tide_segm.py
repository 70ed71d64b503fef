"""TIDE on masks (``iou_type="segm"``, tidecv's ``TIDE.MASK``): tidecv 1.0.1's own output on the bundled val2014
sample (tests/data/tide_official/expected_tide_val2014_100_segm.json) and a differential test against tidecv's mask
mode on random mask datasets (``tests.shape_generators.random_masks``, joined, with TIDE's stressors in masks: an
image of > 100 detections of mixed classes, masks at exactly IoU 0.5 and 0.1, at exactly IoA 0.5 with a crowd
region)."""

import json

import numpy as np
import polars as pl
import pytest
from pycocotools import mask as mask_utils

from evalengine import api
from evalengine.api import ingest_coco
from evalengine.errors import InputError, ProtocolError
from evalengine.match.pairs import PairsProtocol
from evalengine.match.tide import TideProtocol
from tests.conftest import DATA, PACKAGE_DATA
from tests.helpers import write_inputs
from tests.metrics.tide_reference import tidecv_mask_errors
from tests.shape_generators import random_masks

GT, DT = PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakesegm100_dt.json"
EXPECTED = json.loads((DATA / "tide_official" / "expected_tide_val2014_100_segm.json").read_text())
DATASETS_PER_CASE = 4
CASES = 40


def _assert_equal(got: dict, want: dict, where: str, tolerance: float = 1e-9):
    assert got["ap50"] == pytest.approx(want["ap50"], abs=tolerance), where
    for kind in ("main", "special"):
        assert got[kind] == pytest.approx(want[kind], abs=tolerance), f"{where} {kind}"
    assert got["counts"] == want["counts"], where


@pytest.mark.parametrize("n_shards", [1, 4])
def test_equals_tidecv_mask_mode(n_shards):
    got = api.tide((GT, DT), n_shards=n_shards, iou_type="segm")
    want = {"ap50": EXPECTED["AP50_tide"], "main": EXPECTED["main_errors_dAP"],
            "special": EXPECTED["special_errors_dAP"], "counts": EXPECTED["error_counts"]}
    _assert_equal(got.result.as_dict(), want, "val2014_100 segm")
    assert api.tide_summary(got.result, "run", got.protocol) == "\n".join(EXPECTED["summary_text"])


def test_keys_and_tables(tmp_path):
    """Box tables keep their keys; the mask ones get their own, beside them in one store."""
    assert PairsProtocol().match_key() == "pairs" and TideProtocol().match_key() == "tide"
    assert "iou_type" not in TideProtocol(matching="coco").match_params()
    segm = TideProtocol(iou_type="segm")
    assert segm.match_key().startswith("tide-") and segm.pairs.match_key().startswith("pairs-")
    assert segm.pairs.iou_type == "segm" and TideProtocol(matching="coco", iou_type="segm").coco.iou_type == "segm"
    store = ingest_coco(GT, DT, tmp_path / "store")
    masks = api.tide(store, iou_type="segm")
    boxes = api.tide(store)
    assert masks.matches_dir != boxes.matches_dir
    assert boxes.result.ap50 != masks.result.ap50 == pytest.approx(EXPECTED["AP50_tide"], abs=1e-9)
    pairs = api.pairs(store, iou_type="segm").collect()
    assert pairs.height and pairs.get_column("iou").min() >= 0.1
    # a crowd pair's IoU is the intersection over the detection's mask area (maskUtils.iou(d, g, [True]))
    crowd = pairs.filter(pl.col("gt_iscrowd")).row(0, named=True)
    gt = {a["id"]: a for a in json.loads(GT.read_text())["annotations"]}[crowd["gt_id"]]
    image = {i["id"]: i for i in json.loads(GT.read_text())["images"]}[crowd["image_id"]]
    det = json.loads(DT.read_text())[crowd["det_id"] - 1]  # det_id: 1-based file position
    region = mask_utils.frPyObjects(gt["segmentation"], image["height"], image["width"])
    want = mask_utils.iou([det["segmentation"]], [region], [True])[0, 0]
    assert crowd["iou"] == pytest.approx(want, abs=1e-15)


def test_coco_mode_takes_pycocotools_segm_matching():
    got = api.tide((GT, DT), mode="coco", iou_type="segm").result
    stats = json.loads((DATA / "cocoapi_fakesegm100_expected.json").read_text())["runs"]["default"]["stats"]
    assert got.ap50 == pytest.approx(100 * stats["AP50"], abs=1e-9)  # pycocotools' segm AP50


def test_run_without_masks_is_refused(tmp_path):
    with pytest.raises(ProtocolError, match="has no masks"):
        api.tide((GT, PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"), iou_type="segm")
    with pytest.raises(ProtocolError, match="iou_type"):
        TideProtocol(iou_type="keypoints")


def _compressed(segmentation, h: int, w: int) -> dict:
    """A result's mask as compressed RLE (what tidecv's mask mode can read; ``loadRes`` converts the same way)."""
    if isinstance(segmentation, dict) and isinstance(segmentation["counts"], str):
        return segmentation
    rle = mask_utils.frPyObjects(segmentation, h, w)
    rle = mask_utils.merge(rle) if isinstance(rle, list) else rle
    return {"size": rle["size"], "counts": rle["counts"].decode()}


def _rle(bitmap: np.ndarray) -> dict:
    rle = mask_utils.encode(np.asfortranarray(bitmap.astype(np.uint8)))
    return {"size": rle["size"], "counts": rle["counts"].decode()}


def _boundary_image(gt, dt, image_id, cat, other):
    """A 10×10 object; masks at IoU exactly 0.5 (its class twice, tied, and another), 0.1; a crowd region of 50
    pixels and masks at IoA exactly 0.5 (kept) and 50/60 (ignored)."""
    gt["images"].append({"id": image_id, "width": 100, "height": 100, "file_name": f"{image_id}.jpg"})
    square, region = np.zeros((100, 100), np.uint8), np.zeros((100, 100), np.uint8)
    square[0:10, 0:10], region[50:60, 50:55] = 1, 1
    for k, (bitmap, crowd) in enumerate(((square, 0), (region, 1))):
        gt["annotations"].append({"id": image_id * 10 + k, "image_id": image_id, "category_id": cat,
                                  "bbox": [float(v) for v in mask_utils.toBbox(mask_utils.encode(
                                      np.asfortranarray(bitmap)))], "area": float(bitmap.sum()), "iscrowd": crowd,
                                  "segmentation": _rle(bitmap)})
    for category, (rows, cols), score in ((cat, (10, 5), 0.9), (cat, (10, 5), 0.9), (other, (5, 10), 0.8),
                                          (cat, (10, 1), 0.7)):
        bitmap = np.zeros((100, 100), np.uint8)
        bitmap[0:rows, 0:cols] = 1
        dt.append({"image_id": image_id, "category_id": category, "score": score, "segmentation": _rle(bitmap)})
    for cols, score in ((10, 0.6), (6, 0.6)):
        bitmap = np.zeros((100, 100), np.uint8)
        bitmap[50:60, 50:50 + cols] = 1
        dt.append({"image_id": image_id, "category_id": cat, "score": score, "segmentation": _rle(bitmap)})


def _crowded_image(rng, gt, dt):
    """> 100 detections of mixed classes (one without ground truth) on one image: its objects' masks shifted, tied
    scores."""
    annotated = sorted({a["image_id"] for a in gt["annotations"]}) or [gt["images"][0]["id"]]
    image = {i["id"]: i for i in gt["images"]}[annotated[int(rng.integers(len(annotated)))]]
    h, w = image["height"], image["width"]
    masks = [mask_utils.decode(_compressed(a["segmentation"], h, w)) for a in gt["annotations"]
             if a["image_id"] == image["id"]] or [np.ones((h, w), np.uint8)]
    cats = [c["id"] for c in gt["categories"]]
    for _ in range(int(rng.integers(101, 125))):
        bitmap = np.roll(masks[int(rng.integers(len(masks)))], tuple(int(v) for v in rng.integers(-2, 3, 2)), (0, 1))
        dt.append({"image_id": image["id"], "category_id": int(rng.choice(cats)),
                   "score": round(float(rng.random()), 1), "segmentation": _rle(bitmap)})


def _case(case: int):
    rng = np.random.default_rng(20_000 + case)
    gt = {"images": [], "annotations": [], "categories": []}
    dt = []
    for k in range(DATASETS_PER_CASE):
        one_gt, one_dt = random_masks(case * DATASETS_PER_CASE + k)
        sizes = {i["id"]: (i["height"], i["width"]) for i in one_gt["images"]}
        offset = 100 * k
        gt["images"] += [dict(i, id=i["id"] + offset, file_name=f"{i['id'] + offset}.jpg") for i in one_gt["images"]]
        gt["categories"] += [dict(c, id=c["id"] + offset) for c in one_gt["categories"]]
        gt["annotations"] += [dict(a, id=a["id"] + 10**6 * k, image_id=a["image_id"] + offset,
                                   category_id=a["category_id"] + offset) for a in one_gt["annotations"]]
        dt += [{"image_id": d["image_id"] + offset, "category_id": d["category_id"] + offset, "score": d["score"],
                "segmentation": _compressed(d["segmentation"], *sizes[d["image_id"]])} for d in one_dt]
    gt["categories"] += [{"id": 9999, "name": "detected only"}]
    if case % 3 == 0:
        _crowded_image(rng, gt, dt)
    if case % 4 == 0:
        _boundary_image(gt, dt, 10_000 + case, gt["categories"][0]["id"], gt["categories"][-2]["id"])
    dt = [dt[i] for i in rng.permutation(len(dt))]
    return gt, dt


@pytest.mark.parametrize("batch", range(4))
def test_random_mask_datasets_equal_tidecv(tmp_path, batch):
    checked = 0
    for case in range(batch * CASES // 4, (batch + 1) * CASES // 4):
        gt, dt = _case(case)
        folder = tmp_path / str(case)
        folder.mkdir()
        gt_path, dt_path = write_inputs(folder, gt, dt)
        if not any(not a["iscrowd"] for a in gt["annotations"]):  # tidecv divides by zero
            with pytest.raises(InputError, match="no annotations"):
                api.tide((gt_path, dt_path), iou_type="segm")
            continue
        want = tidecv_mask_errors(gt_path, dt_path)
        got = api.tide((gt_path, dt_path), n_shards=1 + case % 3, iou_type="segm").result.as_dict()
        _assert_equal(got, want, f"case {case}")
        checked += 1
    assert checked >= CASES // 4 - 1
