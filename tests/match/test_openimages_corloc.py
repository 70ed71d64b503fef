"""CorLoc, recall@k and median rank as the TF Object Detection API computes them (``utils/metrics.py``,
``per_image_evaluation.py``): the recorded ``metrics_test`` calls (tests/data/openimages/), the CorLoc flag of every
recorded ``compute_object_detection_metrics`` call, and ``CorLocTest``'s two cases (not recorded in the testdata: their
inputs and expected flags are copied from ``per_image_evaluation_test.py`` of tf-models-research-object-detection
2.8.0.post1, Apache-2.0), all through the store's match table."""

import numpy as np
import pytest

from evalengine.match.groups import rank_in_group
from evalengine.match.openimages import OpenImagesProtocol
from evalengine.metrics import openimages as oi_metrics
from tests.openimages_cases import array, evaluate, load

METRICS = load("metrics_hierarchy_parsing_cases.json")
TRACES = load("full_call_traces.json")["calls"]


def _calls(kind):
    return [c for case in METRICS.values() for c in case["calls"] if c["kind"] == kind]


def test_compute_cor_loc():
    """``test_compute_cor_loc`` and ``test_compute_cor_loc_nans``: NaN where a class has no ground-truth image."""
    calls = _calls("metrics.compute_cor_loc")
    assert len(calls) == 2
    for call in calls:
        found = oi_metrics.cor_loc(*(array(a) for a in call["args"]))
        np.testing.assert_allclose(found, array(call["result"]), rtol=0, atol=1e-12, equal_nan=True)


def _flattened(tp_fp_list):
    """The reference's per-image lists as our columns: the labels one image after the other (``np.concatenate``'s
    dtype) and each entry's position in its image."""
    labels = np.concatenate([array(a) for a in tp_fp_list])
    images = np.concatenate([np.full(array(a).shape[0], i) for i, a in enumerate(tp_fp_list)])
    return labels, rank_in_group(images, np.zeros_like(images))


def test_compute_recall_at_k():
    calls = _calls("metrics.compute_recall_at_k")
    assert len(calls) == 4
    for call in calls:
        tp_fp_list, num_gt, k = call["args"]
        assert oi_metrics.recall_at_k(*_flattened(tp_fp_list), num_gt, k) == pytest.approx(call["result"], abs=1e-12)


def test_compute_median_rank_at_k():
    calls = _calls("metrics.compute_median_rank_at_k")
    assert len(calls) == 4
    for call in calls:
        tp_fp_list, k = call["args"]
        assert oi_metrics.median_rank_at_k(*_flattened(tp_fp_list), k) == pytest.approx(call["result"], abs=1e-12)


def _image_cor_loc(tmp_path, n_classes, threshold, boxes, scores, classes, gt_boxes, gt_classes, difficult=None,
                   group_of=None, masks=None, gt_masks=None):
    """``_compute_cor_loc`` of one image through a store (classes 0-based, as the per-image evaluator takes them):
    each class's number of correctly localised images (0 or 1)."""
    gt = {"image_key": "img", "groundtruth_boxes": gt_boxes, "groundtruth_classes": np.asarray(gt_classes) + 1}
    if difficult is not None:
        gt["groundtruth_difficult"], gt["groundtruth_group_of"] = difficult, group_of
    dt = {"image_key": "img", "detection_boxes": boxes, "detection_scores": scores,
          "detection_classes": np.asarray(classes) + 1}
    if masks is not None:
        dt["detection_masks"], gt["groundtruth_instance_masks"] = masks, gt_masks
    protocol = OpenImagesProtocol.v2(iou_threshold=threshold, iou_type="segm" if masks is not None else "bbox")
    evaluation = evaluate(tmp_path / "s", n_classes, [gt], [dt], protocol)
    return evaluation.cor_loc().get_column("num_correct").to_numpy()


def _per_image_compute_calls():
    for name, calls in TRACES.items():
        for i, call in enumerate(calls):
            if call["kind"] == "per_image_compute":
                yield pytest.param(call, id=f"{name.split('::', 1)[1]}[{i}]")


@pytest.mark.parametrize("call", list(_per_image_compute_calls()))
def test_recorded_per_image_cor_loc(tmp_path, call):
    """``is_class_correctly_detected_in_image`` of every recorded ``compute_object_detection_metrics`` call (boxes and
    masks, group-of and difficult boxes, invalid boxes)."""
    names = ("detected_boxes", "detected_scores", "detected_class_labels", "groundtruth_boxes",
             "groundtruth_class_labels", "groundtruth_is_difficult_list", "groundtruth_is_group_of_list",
             "detected_masks", "groundtruth_masks")
    kw = {k: array(v) for k, v in {**dict(zip(names, call["args"])), **call["kwargs"]}.items()}
    params = call["evaluator_params"]
    expected = array(call["result"][2])
    if not np.asarray(kw["groundtruth_boxes"]).size:
        assert not expected.any()
        return
    found = _image_cor_loc(tmp_path, params["num_groundtruth_classes"], params["matching_iou_threshold"],
                           np.asarray(kw["detected_boxes"], float).reshape(-1, 4), kw["detected_scores"],
                           kw["detected_class_labels"], np.asarray(kw["groundtruth_boxes"], float).reshape(-1, 4),
                           kw["groundtruth_class_labels"], kw["groundtruth_is_difficult_list"],
                           kw["groundtruth_is_group_of_list"], kw.get("detected_masks"), kw.get("groundtruth_masks"))
    np.testing.assert_array_equal(found, expected)


# CorLocTest (per_image_evaluation_test.py): three classes, four detections, three ground truths
_CORLOC_INPUTS = dict(boxes=np.array([[0, 0, 1, 1], [0, 0, 2, 2], [0, 0, 3, 3], [0, 0, 5, 5]], dtype=float),
                      scores=np.array([0.9, 0.9, 0.1, 0.9]), classes=np.array([0, 1, 0, 2]),
                      gt_boxes=np.array([[0, 0, 1, 1], [0, 0, 3, 3], [0, 0, 6, 6]], dtype=float),
                      gt_classes=np.array([0, 0, 2]))


@pytest.mark.parametrize(("threshold", "expected"), [(0.5, [1, 0, 1]), (0.9, [1, 0, 0])],
                         ids=["test_compute_corloc_with_normal_iou_threshold",
                              "test_compute_corloc_with_very_large_iou_threshold"])
def test_cor_loc_test_cases(tmp_path, threshold, expected):
    np.testing.assert_array_equal(_image_cor_loc(tmp_path, 3, threshold, **_CORLOC_INPUTS), expected)


def test_top_detection_is_the_first_of_equal_scores_and_counts_below_the_score_floor(tmp_path):
    """``np.argmax`` over the valid boxes in file order: of two equal top scores the first decides, and a score of −10
    or less (which the AP's non-maximum suppression drops) still takes part; an invalid box never does."""
    gt_boxes, gt_classes = np.array([[0.0, 0.0, 0.5, 0.5]]), [0]
    far, on = [0.6, 0.6, 0.9, 0.9], [0.0, 0.0, 0.5, 0.5]
    assert _image_cor_loc(tmp_path / "a", 1, 0.5, np.array([far, on]), [0.7, 0.7], [0, 0], gt_boxes, gt_classes)[0] == 0
    assert _image_cor_loc(tmp_path / "b", 1, 0.5, np.array([on, far]), [0.7, 0.7], [0, 0], gt_boxes, gt_classes)[0] == 1
    assert _image_cor_loc(tmp_path / "c", 1, 0.5, np.array([on]), [-12.0], [0], gt_boxes, gt_classes)[0] == 1
    invalid = [0.0, 0.5, 0.5, 0.5]
    assert _image_cor_loc(tmp_path / "d", 1, 0.5, np.array([invalid, on]), [0.9, 0.1], [0, 0], gt_boxes,
                          gt_classes)[0] == 1
