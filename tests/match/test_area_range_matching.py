"""Spec §7 T8 (area-range-dependent matching, spec §1.2.4): detection D has IoU 0.6 with a small ground truth A and
0.714 with a medium one B. Under ``all`` D takes B; under ``small`` B is ignored and sorted last, so D reaches A
first and is a true positive on it — both as pycocotools decides."""

import numpy as np

from evalengine.match.coco import CocoProtocol
from tests.helpers import both_stats, coco_dt, coco_gt, ours_evaluation

A, B, D = [0, 0, 30, 30], [0, 0, 30, 70], [0, 0, 30, 50]  # areas 900 (small), 2100 (medium), 1500


def _matches(tmp_path, area_range):
    tmp_path.mkdir()
    protocol = CocoProtocol(area_ranges=(area_range,))
    gt, dt = coco_gt([A, B], id=[1, 2]), coco_dt([D], [0.9])
    ours, ref, _, _ = both_stats(tmp_path, gt, dt, protocol)
    np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)
    evaluation = ours_evaluation(tmp_path, gt, dt, protocol)
    return evaluation.dt_matches().collect().row(0, named=True), evaluation.gt_matches().collect().sort("gt_id")


def test_t8_the_same_detection_matches_a_under_small_and_b_under_all(tmp_path):
    every = (1 << 10) - 1  # bits of the 10 COCO IoU thresholds
    dt, gt = _matches(tmp_path / "all", ("all", 0, 1e10))
    assert dt["matched_gt_id"][:5] == [2] * 5 and dt["tp_bits"] == [0b11111]  # IoU 0.714: a TP up to 0.70
    assert abs(dt["matched_iou"][0] - 1500 / 2100) < 1e-15
    assert gt["matched_bits"].to_list() == [[0], [0b11111]] and gt["ignored_bits"].to_list() == [0, 0]
    dt, gt = _matches(tmp_path / "small", ("small", 0, 1024))
    assert dt["matched_gt_id"][:3] == [1] * 3 and dt["tp_bits"] == [0b111]  # IoU 0.6 with A: a TP up to 0.60
    assert abs(dt["matched_iou"][0] - 0.6) < 1e-15
    # at 0.65 and 0.70 D falls through to the ignored B (IoU 0.714) and takes it; above, nothing: D's own area is
    # out of range, so it is ignored, not a false positive, at every threshold above 0.6
    assert gt["matched_bits"].to_list() == [[0b111], [0b11000]] and gt["ignored_bits"].to_list() == [0, 1]
    assert dt["ignored_bits"] == [every ^ 0b111]
