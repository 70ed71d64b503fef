"""Golden tests: every COCO bbox reference case reproduces pycocotools' stats and per-class values."""

import json

import numpy as np
import pytest

from evalengine.api import evaluate_coco
from evalengine.match.coco import CocoProtocol
from evalengine.metrics.summary import STAT_NAMES
from tests.conftest import DATA, PACKAGE_DATA
from tests.helpers import assert_per_class_equal

CASES = {
    "cocoapi_fake100": (PACKAGE_DATA / "instances_val2014_100.json",
                        PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"),
    "review_coco_eval": (DATA / "review_coco_eval_gt.json", DATA / "review_coco_eval_dt.json"),
    "review_toy": (DATA / "review_toy_gt.json", DATA / "review_toy_dt.json"),
    "torchmetrics": (DATA / "torchmetrics_gt.json", DATA / "torchmetrics_dt.json"),
    "fce_dataset": (DATA / "fce_dataset_gt.json", DATA / "fce_dataset_dt.json"),
    "detectron2": (DATA / "detectron2_gt.json", DATA / "detectron2_dt.json"),
}
RUNS = {
    "default": CocoProtocol(),
    "iouThrs_0.25_0.5_0.75": CocoProtocol(iou_thresholds=(0.25, 0.5, 0.75)),
    "recThrs_0.25_0.5_0.75": CocoProtocol(recall_thresholds=(0.25, 0.5, 0.75)),
    "useCats_0": CocoProtocol(use_cats=False),
    "useCats_0_maxDets_1_10_1000": CocoProtocol(use_cats=False, max_dets=(1, 10, 1000)),
}


@pytest.mark.parametrize("n_shards", [1, 4])
@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("case", list(CASES))
def test_stats_equal_pycocotools(case, run, n_shards):
    expected = json.loads((DATA / f"{case}_expected.json").read_text())["runs"][run]
    gt, dt = CASES[case]
    acc = evaluate_coco(gt, dt, RUNS[run], n_shards=n_shards)
    got = acc.stats()
    want = [expected["stats"][name] for name in STAT_NAMES]
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("case", list(CASES))
def test_per_class_equal_pycocotools(case):
    expected = json.loads((DATA / f"{case}_expected.json").read_text())["runs"]["default"]["per_category"]
    gt, dt = CASES[case]
    table = evaluate_coco(gt, dt).class_metrics()
    assert_per_class_equal(table, expected)
