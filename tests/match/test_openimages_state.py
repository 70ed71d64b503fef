"""``ObjectDetectionEvaluationTest``'s state tests (object_detection_evaluation_test.py; its setUp recorded in
tests/data/openimages/full_call_traces.json): what the TF evaluator holds after adding ground truth and detections,
merging states, and refusing zero classes — in our terms.

The TF evaluator is an accumulator: ``add_single_ground_truth_image_info`` / ``add_single_detected_image_info`` fill
per-class counts and lists, ``get_internal_state`` / ``merge_internal_state`` combine partial evaluations, ``clear``
starts over. evalengine has no such object: ground truth and detections are tables of a store (an image's rows are
its one "add"; adding an image twice has no meaning, the reference only warns and keeps the first), the match table is
written per shard and every metric is a query over it. So each test checks the same numbers where they live here:

- ground truth added → the stored ``gt`` rows (boxes, difficult and group-of flags, classes) and the per-class counts
  ``num_gt`` (``num_gt_instances_per_class``) and ``num_gt_images`` (``num_gt_imgs_per_class``);
- detections added → the image's entries per class (``scores_per_class``, ``tp_fp_labels_per_class``) and CorLoc's
  ``num_correct`` (``num_images_correctly_detected_per_class``);
- merged state → the match table split over 1, 2 or 3 shards (each a partial state, merged by the accumulation):
  the same AP, mAP, precision and recall per class and CorLoc as the recorded ``evaluate``;
- zero classes (``ValueError``) → a hierarchy without a class under its root is refused at ingest.
"""

import numpy as np
import polars as pl
import pytest

from evalengine.errors import InputError
from evalengine.io.openimages import read_hierarchy
from evalengine.match.openimages import OpenImagesProtocol
from evalengine.metrics import openimages as oi_metrics
from tests.openimages_cases import array, evaluate, load, recorded_inputs

PREFIX = "object_detection_evaluation_test::ObjectDetectionEvaluationTest::"
TRACES = load("full_call_traces.json")["calls"]


def _set_up(test: str) -> tuple:
    """The test's setUp as our inputs (classes 1-based), and its recorded ``evaluate`` result if any."""
    return recorded_inputs(TRACES[PREFIX + test])


def _evaluation(tmp_path, test: str, n_shards: int = 1):
    groundtruth, detections, _ = _set_up(test)
    return evaluate(tmp_path / f"s{n_shards}", 3, groundtruth, detections, OpenImagesProtocol.v2(), n_shards=n_shards)


def test_add_single_ground_truth_image_info(tmp_path):
    evaluation = _evaluation(tmp_path, "test_add_single_ground_truth_image_info")
    np.testing.assert_array_equal(evaluation.per_class().get_column("num_gt").to_numpy(), [3, 1, 1])
    np.testing.assert_array_equal(evaluation.cor_loc().get_column("num_gt_images").to_numpy(), [2, 1, 2])
    gt = evaluation.layout.scan_gt().collect().join(evaluation.layout.read("images").select("image_id", "file_name"),
                                                    on="image_id").sort("gt_id")
    img2 = gt.filter(pl.col("file_name") == "img2")
    np.testing.assert_array_equal(img2.select("y", "x", "y_max", "x_max").to_numpy(),
                                  [[10, 10, 11, 11], [500, 500, 510, 510], [10, 10, 12, 12]])
    np.testing.assert_array_equal(img2.get_column("difficult").to_numpy(), [False, True, False])
    np.testing.assert_array_equal(img2.get_column("iscrowd").to_numpy(), [False, False, True])
    np.testing.assert_array_equal(gt.filter(pl.col("file_name") == "img1").get_column("category_id").to_numpy(),
                                  np.array([0, 2, 0]) + 1)


def test_add_single_detected_image_info(tmp_path):
    evaluation = _evaluation(tmp_path, "test_add_single_detected_image_info")
    rows = oi_metrics.entries(evaluation.dt_matches(), evaluation.gt_matches(), 0.0).collect()
    expected_scores, expected_labels = [[0.8, 0.7], [], [0.9]], [[0, 1], [], [0]]
    for c in range(3):
        mine = rows.filter(pl.col("category_id") == c + 1)
        np.testing.assert_array_equal(mine.get_column("score").to_numpy(), expected_scores[c])
        np.testing.assert_array_equal(mine.get_column("label").to_numpy(), expected_labels[c])
    np.testing.assert_array_equal(evaluation.cor_loc().get_column("num_correct").to_numpy(), [0, 0, 0])


@pytest.mark.parametrize("n_shards", [1, 2, 3])
def test_merge_internal_state(tmp_path, n_shards):
    """Partial states merged: the shards' match tables accumulated together equal the recorded ``evaluate`` (which
    the reference's copy, merged from the state, also returns)."""
    evaluation = _evaluation(tmp_path, "test_merge_internal_state", n_shards)
    ap, mean_ap, precisions, recalls, corloc, mean_corloc = _set_up("test_merge_internal_state")[2]
    result = evaluation.accumulate()
    np.testing.assert_allclose(result.ap, array(ap), rtol=0, atol=1e-12)
    assert result.mean_ap == pytest.approx(mean_ap, abs=1e-12)
    rows = oi_metrics.entries(evaluation.dt_matches(), evaluation.gt_matches(), 0.0).collect()
    for c in range(3):
        mine = rows.filter(pl.col("category_id") == c + 1)
        precision, recall = oi_metrics.precision_recall(mine["score"].to_numpy(), mine["label"].to_numpy(),
                                                        result.num_gt[c])
        np.testing.assert_allclose(precision, array(precisions[c]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(recall, array(recalls[c]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(evaluation.cor_loc().get_column("corloc").to_numpy(), array(corloc), rtol=0, atol=1e-12)
    assert evaluation.mean_cor_loc() == pytest.approx(mean_corloc, abs=1e-12)


def test_value_error_on_zero_classes(tmp_path):
    """``ObjectDetectionEvaluation(num_groundtruth_classes=0)`` raises ValueError; here a hierarchy with no class
    under its root is refused with a located error (classes are the hierarchy's)."""
    path = tmp_path / "hierarchy.json"
    path.write_text('{"LabelName": "/m/0bl9f"}')
    with pytest.raises(InputError, match=r"hierarchy\.json: the hierarchy has no class under its root"):
        read_hierarchy(path)
