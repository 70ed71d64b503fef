"""The pycocotools probe vectors of specs/anchors.md §3d: documented value and pycocotools, both."""

import warnings

import numpy as np
import polars as pl
import pytest

from evalengine.errors import InputWarning
from evalengine.match.coco import CocoProtocol
from tests.helpers import both_stats, coco_dt, coco_gt, ours_evaluation

AP, AP50, APS, APM, APL, AR100 = 0, 1, 3, 4, 5, 8


def grid_boxes(n, size=10.0, step=20.0, per_row=16):
    return [[(i % per_row) * step, (i // per_row) * step, size, size] for i in range(n)]


def check(tmp_path, gt, dt, protocol=None):
    got, ref, got_pc, ref_pc = both_stats(tmp_path, gt, dt, protocol)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
    assert got_pc.keys() == ref_pc.keys()
    for k in ref_pc:
        np.testing.assert_allclose(got_pc[k], ref_pc[k], rtol=0, atol=1e-12)
    return got


def test_probe1_cap_of_100_per_image_and_class(tmp_path):
    boxes = grid_boxes(160)
    stats = check(tmp_path, coco_gt(boxes), coco_dt(boxes, [0.9] * 160))
    assert stats[AR100] == pytest.approx(0.625, abs=1e-12)
    assert stats[AP] == pytest.approx(63 / 101, abs=1e-12)  # documented: 0.624


def test_probe1b_cap_applies_per_class(tmp_path):
    boxes = grid_boxes(160)
    cats = [1 + i % 2 for i in range(160)]
    stats = check(tmp_path, coco_gt(boxes, category_id=cats), coco_dt(boxes, [0.9] * 160, category_ids=cats))
    assert stats[AR100] == pytest.approx(1.0, abs=1e-12)


def test_probe2_equal_iou_goes_to_the_later_ground_truth(tmp_path):
    gt = coco_gt([[0, 0, 10, 10], [10, 0, 10, 10]], id=[5, 9])
    dt = coco_dt([[5, 0, 10, 10]], [0.8])
    protocol = CocoProtocol(iou_thresholds=(0.3,))
    check(tmp_path, gt, dt, protocol)
    matches = ours_evaluation(tmp_path, gt, dt, protocol).dt_matches().collect()
    assert matches["matched_gt_id"].to_list() == [[9]]
    assert matches["matched_iou"].to_list()[0][0] == pytest.approx(1 / 3, abs=1e-15)


def test_probe3_category_without_ground_truth_does_not_count(tmp_path):
    gt = coco_gt([[0, 0, 10, 10]], categories=[1, 2])
    dt = coco_dt([[0, 0, 10, 10]] + [[100 + 20 * i, 0, 10, 10] for i in range(50)], [0.5] + [0.99] * 50,
                 category_ids=[1] + [2] * 50)
    stats = check(tmp_path, gt, dt)
    assert stats[AP] == pytest.approx(1.0, abs=1e-12)


def test_probe4_area_1024_is_small_and_medium(tmp_path):
    stats = check(tmp_path, coco_gt([[0, 0, 32, 32]]), coco_dt([[0, 0, 32, 32]], [0.9]))
    assert stats[APS] == pytest.approx(1.0, abs=1e-12) and stats[APM] == pytest.approx(1.0, abs=1e-12)


def test_probe4b_ground_truth_area_field_not_box_area(tmp_path):
    stats = check(tmp_path, coco_gt([[0, 0, 100, 100]], area=[500.0]), coco_dt([[0, 0, 100, 100]], [0.9]))
    assert stats[APS] == pytest.approx(1.0, abs=1e-12)
    assert stats[APL] == -1


def test_probe5_ground_truth_id_zero_never_matches(tmp_path):
    gt = coco_gt([[0, 0, 10, 10], [50, 0, 10, 10]], id=[0, 1])
    dt = coco_dt([[0, 0, 10, 10], [50, 0, 10, 10]], [0.9, 0.8])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        stats = check(tmp_path, gt, dt)
        assert stats[AP] == pytest.approx(0.252, abs=5e-4)
        assert stats[AR100] == pytest.approx(0.5, abs=1e-12)
        corrected = ours_evaluation(tmp_path, gt, dt, CocoProtocol(zero_id_quirk=False))
    assert corrected.stats()[AR100] == pytest.approx(1.0, abs=1e-12)


def test_probe6_false_positive_on_image_without_ground_truth(tmp_path):
    gt = coco_gt([[0, 0, 10, 10]], n_images=2)
    dt = coco_dt([[0, 0, 10, 10], [0, 0, 10, 10]], [0.5, 0.9], image_ids=[1, 2])
    stats = check(tmp_path, gt, dt)
    assert stats[AP] == pytest.approx(0.5, abs=1e-12)


def test_probe7_crowd_absorbs_detections_with_iou_over_detection_area(tmp_path):
    gt = coco_gt([[0, 0, 100, 100], [200, 200, 10, 10]], iscrowd=[1, 0])
    dt = coco_dt([[10, 10, 5, 5], [30, 30, 5, 5], [200, 200, 10, 10]], [0.9, 0.8, 0.7])
    stats = check(tmp_path, gt, dt)
    assert stats[AP] == pytest.approx(1.0, abs=1e-12)
    matches = ours_evaluation(tmp_path, gt, dt).dt_matches().sort("det_id").collect()
    assert [row[0] for row in matches["matched_iou"].to_list()[:2]] == [1.0, 1.0]


def test_probe8_ignore_field_is_overwritten_by_iscrowd(tmp_path):
    gt = coco_gt([[0, 0, 10, 10], [50, 0, 10, 10]], ignore=[0, 1])
    stats = check(tmp_path, gt, coco_dt([[0, 0, 10, 10]], [0.9]))
    assert stats[AR100] == pytest.approx(0.5, abs=1e-12)


def test_probe9_summary_ap_looks_for_max_dets_100(tmp_path):
    stats = check(tmp_path, coco_gt([[0, 0, 10, 10]]), coco_dt([[0, 0, 10, 10]], [0.9]),
                  CocoProtocol(max_dets=(10, 50, 300)))
    assert stats[AP] == -1


def test_probe10_iou_exactly_at_threshold_matches(tmp_path):
    stats = check(tmp_path, coco_gt([[0, 0, 10, 10]]), coco_dt([[0, 0, 10, 5]], [0.9]))
    assert stats[AP50] == 0.9999999999999999


def test_per_image_counts_follow_the_matches(tmp_path):
    gt = coco_gt([[0, 0, 10, 10], [50, 0, 10, 10], [0, 0, 10, 10]], image_ids=[1, 1, 2], n_images=3)
    dt = coco_dt([[0, 0, 10, 10], [0, 0, 10, 10], [300, 300, 10, 10]], [0.9, 0.8, 0.7], image_ids=[1, 1, 3])
    counts = ours_evaluation(tmp_path, gt, dt).per_image_counts()
    assert counts.to_dicts() == [
        {"image_id": 1, "tp": 1, "fp": 1, "fn": 1, "n_gt": 2, "ignored_dt": 0},
        {"image_id": 2, "tp": 0, "fp": 0, "fn": 1, "n_gt": 1, "ignored_dt": 0},
        {"image_id": 3, "tp": 0, "fp": 1, "fn": 0, "n_gt": 0, "ignored_dt": 0},
    ]
    assert isinstance(counts, pl.DataFrame)
