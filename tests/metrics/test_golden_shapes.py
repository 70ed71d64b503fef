"""Golden tests of the segm and keypoints iou types: every reference case reproduces pycocotools' stats (12; keypoints:
10) and per-class values at 1e-12, and prints its summary as pycocotools does."""

import json

import numpy as np
import pytest

from evalengine.api import evaluate_coco, report
from evalengine.match.coco import CocoProtocol
from evalengine.metrics.summary import stat_names
from tests.conftest import DATA, PACKAGE_DATA
from tests.helpers import assert_per_class_equal

SEGM_CASES = {
    "cocoapi_fakesegm100": (PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakesegm100_dt.json"),
    "fce_dataset_segm": (DATA / "fce_dataset_gt.json", DATA / "fce_dataset_dt.json"),
    "fce_dataset_rle_nobbox": (DATA / "fce_dataset_gt.json", DATA / "fce_dataset_rle_nobbox_dt.json"),
    "detectron2_segm": (DATA / "detectron2_gt.json", DATA / "detectron2_dt.json"),
}
SEGM_RUNS = {
    "default": CocoProtocol(iou_type="segm"),
    "iouThrs_0.25_0.5_0.75": CocoProtocol(iou_type="segm", iou_thresholds=(0.25, 0.5, 0.75)),
    "recThrs_0.25_0.5_0.75": CocoProtocol(iou_type="segm", recall_thresholds=(0.25, 0.5, 0.75)),
    "useCats_0": CocoProtocol(iou_type="segm", use_cats=False),
    "useCats_0_maxDets_1_10_1000": CocoProtocol(iou_type="segm", use_cats=False, max_dets=(1, 10, 1000)),
}
KEYPOINTS = (DATA / "fce_keypoints_gt.json", DATA / "fce_keypoints_dt.json")


def _expected(case: str, run: str = "default") -> dict:
    return json.loads((DATA / f"{case}_expected.json").read_text())["runs"][run]


@pytest.mark.parametrize("n_shards", [1, 3])
@pytest.mark.parametrize("run", list(SEGM_RUNS))
@pytest.mark.parametrize("case", list(SEGM_CASES))
def test_segm_stats_equal_pycocotools(case, run, n_shards):
    expected = _expected(case, run)
    protocol = SEGM_RUNS[run]
    got = evaluate_coco(*SEGM_CASES[case], protocol, n_shards=n_shards).stats()
    np.testing.assert_allclose(got, [expected["stats"][name] for name in stat_names(protocol)], rtol=0, atol=1e-12)


def test_the_bboxless_rle_file_gives_faster_coco_evals_apm():
    """The issue's check: results of compressed RLE without boxes (area and box from the mask), APm 0.7367986798679867."""
    stats = evaluate_coco(*SEGM_CASES["fce_dataset_rle_nobbox"], CocoProtocol(iou_type="segm")).stats()
    assert stats[4] == pytest.approx(0.7367986798679867, abs=1e-12)


@pytest.mark.parametrize("case", [*SEGM_CASES, "fce_keypoints"])
def test_per_class_equal_pycocotools(case):
    expected = _expected(case)["per_category"]
    inputs, iou_type = (KEYPOINTS, "keypoints") if case == "fce_keypoints" else (SEGM_CASES[case], "segm")
    table = evaluate_coco(*inputs, CocoProtocol(iou_type=iou_type)).class_metrics()
    assert_per_class_equal(table, expected)


@pytest.mark.parametrize("n_shards", [1, 2])
def test_keypoint_stats_and_summary_equal_pycocotools(n_shards):
    expected = _expected("fce_keypoints")
    protocol = CocoProtocol(iou_type="keypoints")
    assert protocol.max_dets == (20,) and [r[0] for r in protocol.area_ranges] == ["all", "medium", "large"]
    evaluation = evaluate_coco(*KEYPOINTS, protocol, n_shards=n_shards)
    names = stat_names(protocol)
    assert names == ["AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl"]
    np.testing.assert_allclose(evaluation.stats(), [expected["stats"][n] for n in names], rtol=0, atol=1e-12)
    printed = [line for line in expected["summary_text"] if line.startswith(" Average")]
    assert report.coco_summary(evaluation).splitlines() == printed


def test_segm_summary_prints_as_pycocotools():
    expected = _expected("cocoapi_fakesegm100")
    evaluation = evaluate_coco(*SEGM_CASES["cocoapi_fakesegm100"], CocoProtocol(iou_type="segm"))
    printed = [line for line in expected["summary_text"] if line.startswith(" Average")]
    assert report.coco_summary(evaluation).splitlines() == printed
