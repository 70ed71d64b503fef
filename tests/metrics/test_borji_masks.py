"""Borji & Iranmanesh's diagnosis on masks (``iou_type="segm"``, and ``"boundary"``) against the reference
transcription (``borji_reference``) with pycocotools' ``maskUtils.iou`` (boundary-iou-api's ``computeBoundaryIoU``)
as its IoU and each stage evaluated by pycocotools' ``segm`` evaluation: every label exactly and every stage's 12
numbers to 1e-12, on 36 random mask sets (``tests.shape_generators.random_masks``: polygons of several parts,
compressed and uncompressed RLE, crowd regions, empty, 1-pixel and border masks, areas at 32² and 96², results with
boxes — area w·h — or without, tied scores) over both variants and both duplicate matchings, and 8 boundary sets;
the rule for a moved detection's area on a constructed case; the keys; a run without masks refused."""

import json

import numpy as np
import polars as pl
import pytest
from pycocotools import mask as mask_utils

from evalengine import api
from evalengine.errors import ProtocolError
from tests.conftest import DATA, PACKAGE_DATA
from tests.helpers import write_inputs
from tests.metrics.borji_reference import diagnose
from tests.metrics.test_borji_differential import compare, perfect_s4
from tests.shape_generators import random_masks

MODES = (("borji_ref", "coco"), ("paper", "coco"), ("borji_ref", "gt_major"), ("paper", "gt_major"))
BATCHES, SEEDS = 4, range(36)


def _check(tmp_path, seed: int, iou_type: str) -> tuple:
    """The diagnosis of ``random_masks(seed)`` equals the reference under ``iou_type``; ``(gt, dt, labels)``."""
    gt, dt = random_masks(seed)
    variant, duplicates = MODES[seed % len(MODES)]
    folder = tmp_path / f"{iou_type}{seed}"
    folder.mkdir()
    diagnosis = api.borji(write_inputs(folder, gt, dt), variant=variant, duplicates=duplicates, iou_type=iou_type,
                          n_shards=1 + seed % 3)
    ap = compare(diagnosis, gt, dt, variant, duplicates, iou_type)
    perfect_s4(diagnosis, gt)
    assert ap["S2_loc"]["AP50"] <= ap["S3_dup"]["AP50"] + 1e-12
    return gt, dt, dict(diagnosis.detections().select("det_id", "label").collect().iter_rows())


@pytest.mark.parametrize("batch", range(BATCHES))
def test_random_mask_sets_equal_the_reference(tmp_path, batch):
    differ = 0
    for seed in SEEDS[batch::BATCHES]:
        gt, dt, labels = _check(tmp_path, seed, "segm")
        variant, duplicates = MODES[seed % len(MODES)]
        boxed = [d if "bbox" in d else dict(d, bbox=mask_utils.toBbox(d["segmentation"]).tolist()) for d in dt]
        boxes = {d: entry[0] for d, entry in diagnose(gt, boxed, variant, duplicates)[0].items()}
        differ += boxes != labels
    assert differ, "no dataset where masks and boxes give different labels"


@pytest.mark.parametrize("batch", range(2))
def test_random_boundary_sets_equal_the_reference(tmp_path, batch):
    for seed in range(200 + batch, 216, 2):
        _check(tmp_path, seed, "boundary")


def _encoded(bitmap: np.ndarray) -> dict:
    rle = mask_utils.encode(np.asfortranarray(bitmap.astype(np.uint8)))
    return {"size": rle["size"], "counts": rle["counts"].decode()}


def test_a_moved_detection_takes_the_target_mask_and_its_area(tmp_path):
    """Target A is an L of two 40×5 bars: mask area 375 (small), box 40×40 = 1600 (medium), ``area`` field 10000
    (large). Detection 1 is A's mask (true positive); detection 2 (given box 60×60: area 3600) covers half a bar, IoU
    100/375, and is snapped onto A in S2, where A is taken: a false positive of A's mask area — counted in small,
    ignored in medium and large (pycocotools' rule for an unmatched detection out of range). Its error counts in
    A's ``area`` field's size (large)."""
    a = np.zeros((64, 64), np.uint8)
    a[0:5, 0:40] = 1
    a[0:40, 0:5] = 1
    part = np.zeros_like(a)
    part[0:5, 20:40] = 1
    gt = {"images": [{"id": 1, "height": 64, "width": 64}], "categories": [{"id": 1, "name": "c"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 40, 40], "area": 10000.0,
                           "iscrowd": 0, "segmentation": _encoded(a)}]}
    dt = [{"image_id": 1, "category_id": 1, "score": 0.9, "bbox": [0, 0, 40, 40], "segmentation": _encoded(a)},
          {"image_id": 1, "category_id": 1, "score": 0.8, "bbox": [0, 0, 60, 60], "segmentation": _encoded(part)}]
    diagnosis = api.borji(write_inputs(tmp_path, gt, dt), variant="paper", iou_type="segm")
    compare(diagnosis, gt, dt, "paper", "coco", "segm")
    labels = diagnosis.detections().sort("det_id").collect()
    assert labels.get_column("label").to_list() == ["tp", "loc"]
    assert labels.get_column("iou_max").to_list() == [1.0, 100 / 375]
    stage_dt, _ = diagnosis.stage_matches()
    moved = stage_dt.filter((pl.col("stage") == api.BORJI_STAGES.index("S2_loc")) & (pl.col("det_id") == 2)).collect()
    every_threshold = (1 << 10) - 1
    assert moved.get_column("ignored_bits").to_list() == [[0, 0, every_threshold, every_threshold]]
    assert moved.get_column("tp_bits").to_list() == [[0, 0, 0, 0]]
    errors = diagnosis.error_counts().filter(pl.col("error") == "loc")
    assert dict(errors.select("area_range", "count").iter_rows()) == {"all": 1, "small": 0, "medium": 0, "large": 1}


def test_the_bundled_segm_results(tmp_path):
    """The cocoapi fake segm results on the bundled 100 images: S0 is pycocotools' segm evaluation of the file, S4
    is perfect; masks and boxes are tables of their own in one store."""
    store = api.ingest_coco(PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakesegm100_dt.json",
                            tmp_path / "store", n_shards=2)
    masks, boxes = api.borji(store, iou_type="segm"), api.borji(store)
    stats = json.loads((DATA / "cocoapi_fakesegm100_expected.json").read_text())["runs"]["default"]["stats"]
    summary = masks.summary().filter(pl.col("stage") == "S0")
    assert dict(summary.select("metric", "value").iter_rows()) == pytest.approx(stats, abs=1e-12)
    assert masks.table().row(0)[api.BORJI_STAGES.index("S4_miss") + 1] == pytest.approx(1.0, abs=1e-12)
    assert masks.matches_dir != boxes.matches_dir and not masks.table().equals(boxes.table())
    assert api.BorjiProtocol().match_key() == "borji" and masks.protocol.match_key().startswith("borji-")
    assert masks.as_dict()["iou_type"] == "segm" and boxes.as_dict()["iou_type"] == "bbox"


def test_keypoints_and_mask_less_runs_are_refused(tmp_path):
    with pytest.raises(ProtocolError, match="iou_type must be one of"):
        api.BorjiProtocol(coco=api.CocoProtocol(iou_type="keypoints"))
    with pytest.raises(ProtocolError, match="has no masks"):
        api.borji((PACKAGE_DATA / "instances_val2014_100.json",
                   PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"), iou_type="segm")
