"""The TF Object Detection API's own OpenImages tests (recorded: tests/data/openimages/, see tests/data/README.md)
reproduced through the store: evaluators, per-image TP/FP, the precision/recall and AP functions, the hierarchy
expansion and the challenge CSV parsing."""

import json

import numpy as np
import polars as pl
import pytest
from pycocotools import mask as mask_utils

from evalengine.io.openimages import read_ground_truth, read_hierarchy
from evalengine.match.openimages import OpenImagesProtocol
from evalengine.metrics import openimages as oi_metrics
from tests.openimages_cases import DATA, array, evaluate, load, recorded_inputs

EVALUATORS = load("evaluator_cases.json")
PER_IMAGE = load("per_image_cases.json")
METRICS = load("metrics_hierarchy_parsing_cases.json")
MASKS = ("evaluate_masks", "Segmentation")


def _skip_unlabeled(case) -> list:
    """PrecisionAtRecallDetectionEvaluator's ``skip_predictions_for_unlabeled_class``: detections of classes not in the
    image's one-hot ``groundtruth_labeled_classes`` are removed before evaluation."""
    labeled = {g["image_key"]: np.flatnonzero(array(g["groundtruth_labeled_classes"]) == 1)
               for g in case["groundtruth"] if "groundtruth_labeled_classes" in g}
    detections = []
    for d in case["detections"]:
        keep = np.isin(array(d["detection_classes"]), labeled[d["image_key"]])
        detections.append({**{k: array(v)[keep] for k, v in d.items() if k != "image_key"}, "image_key": d["image_key"]})
    return detections


@pytest.mark.parametrize("name", list(EVALUATORS), ids=lambda n: n.split("::", 1)[1])
def test_evaluator_cases(tmp_path, name):
    case = EVALUATORS[name]
    args, kind = case["constructor_args"], case["evaluator"]
    masks = args.get("evaluate_masks") or "Segmentation" in kind
    protocol = OpenImagesProtocol(iou_threshold=args["matching_iou_threshold"],
                                  group_of_weight=args.get("group_of_weight", 0.0),
                                  verified_labels=kind == "OpenImagesChallengeEvaluator",
                                  iou_type="segm" if masks else "bbox")
    detections = _skip_unlabeled(case) if args.get("skip_predictions_for_unlabeled_class") else case["detections"]
    groundtruth = [{k: v for k, v in g.items() if k != "groundtruth_labeled_classes"} for g in case["groundtruth"]]
    n_classes = max(c["id"] for c in args["categories"])
    evaluation = evaluate(tmp_path / "s", n_classes, groundtruth, detections, protocol)
    result = evaluation.accumulate((args.get("recall_lower_bound", 0.0), args.get("recall_upper_bound", 1.0)),
                                   weighted=kind.startswith("Weighted"))
    names = {c["id"]: c["name"] for c in args["categories"]}
    for key, expected in case["expected_metrics"].items():
        if "/mAP@" in key:
            assert result.mean_ap == pytest.approx(expected, abs=1e-12), key
        else:
            category = next(i for i, n in names.items() if key.endswith("/" + n))
            assert result.ap[category - 1] == pytest.approx(expected, abs=1e-12, nan_ok=True), key


def _single_class_calls():
    for name, case in PER_IMAGE.items():
        for i, call in enumerate(case["calls"]):
            if call["kind"] == "per_image_single_class":
                yield pytest.param(call, id=f"{name.split('::', 1)[1]}[{i}]")


def _per_image_entries(tmp_path, protocol, n_classes, boxes, scores, classes, gt_boxes, gt_classes, difficult, group_of,
                       masks=None):
    gt = {"image_key": "img", "groundtruth_boxes": gt_boxes, "groundtruth_classes": gt_classes,
          "groundtruth_difficult": difficult, "groundtruth_group_of": group_of}
    dt = {"image_key": "img", "detection_boxes": boxes, "detection_scores": scores, "detection_classes": classes}
    if masks is not None:
        dt["detection_masks"], gt["groundtruth_instance_masks"] = masks
    evaluation = evaluate(tmp_path / "s", n_classes, [gt], [dt], protocol)
    rows = oi_metrics.entries(evaluation.dt_matches(), evaluation.gt_matches(), protocol.group_of_weight).collect()
    return {c: (rows.filter(pl.col("category_id") == c).get_column("score").to_numpy(),
                rows.filter(pl.col("category_id") == c).get_column("label").to_numpy()) for c in range(1, n_classes + 1)}


@pytest.mark.parametrize("call", list(_single_class_calls()))
def test_per_image_single_class(tmp_path, call):
    """``_compute_tp_fp_for_single_class``: the image's entries (scores and labels) in the evaluator's order."""
    names = ("detected_boxes", "detected_scores", "groundtruth_boxes", "groundtruth_is_difficult_list",
             "groundtruth_is_group_of_list", "detected_masks", "groundtruth_masks")
    values = {**dict(zip(names, call["args"])), **call["kwargs"]}
    boxes, scores, gt_boxes = (np.asarray(array(values[k]), float) for k in names[:3])
    params = call["evaluator_params"]
    masks = values.get("detected_masks") is not None
    protocol = OpenImagesProtocol.v2(iou_threshold=params["matching_iou_threshold"],
                                     group_of_weight=params["group_of_weight"], iou_type="segm" if masks else "bbox")
    n_gt = gt_boxes.reshape(-1, 4).shape[0]
    found = _per_image_entries(tmp_path, protocol, 1, boxes.reshape(-1, 4), scores, np.ones(len(scores), int),
                               gt_boxes.reshape(-1, 4), np.ones(n_gt, int),
                               np.asarray(array(values[names[3]]), bool), np.asarray(array(values[names[4]]), bool),
                               (array(values[names[5]]), array(values[names[6]])) if masks else None)
    expected_scores, expected_labels = (np.asarray(array(r), float) for r in call["result"])
    np.testing.assert_array_equal(found[1][0], expected_scores)
    np.testing.assert_array_equal(found[1][1], expected_labels)


def test_per_image_multi_class(tmp_path):
    """``compute_object_detection_metrics`` over three classes (MultiClassesTpFpTest)."""
    call = PER_IMAGE["per_image_evaluation_test::MultiClassesTpFpTest::test_tp_fp"]["calls"][3]
    boxes, scores, classes, gt_boxes, gt_classes, difficult, group_of = (array(a) for a in call["args"])
    protocol = OpenImagesProtocol.v2(iou_threshold=call["evaluator_params"]["matching_iou_threshold"])
    found = _per_image_entries(tmp_path, protocol, 3, boxes, scores, classes + 1, gt_boxes, gt_classes + 1,
                               difficult.astype(bool), group_of)
    expected_scores, expected_labels, _ = call["result"]
    for c in range(3):
        np.testing.assert_array_equal(found[c + 1][0], array(expected_scores[c]))
        np.testing.assert_array_equal(found[c + 1][1], array(expected_labels[c]).astype(float))


def _metric_calls(kind):
    for name, case in METRICS.items():
        for call in case["calls"]:
            if call["kind"] == kind:
                yield call


def test_precision_recall_and_average_precision():
    n = 0
    for call in _metric_calls("metrics.compute_precision_recall"):
        scores, labels, num_gt = (array(a) for a in call["args"])
        if num_gt == 0:
            continue  # the reference returns None: a class without ground truth, NaN below
        precision, recall = oi_metrics.precision_recall(scores, labels.astype(float), num_gt)
        np.testing.assert_allclose(precision, array(call["result"][0]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(recall, array(call["result"][1]), rtol=0, atol=1e-12)
        n += 1
    for call in _metric_calls("metrics.compute_average_precision"):
        if call["args"][0] is None:
            continue
        precision, recall = (array(a) for a in call["args"])
        assert oi_metrics.average_precision(precision, recall) == pytest.approx(call["result"], abs=1e-12)
        n += 1
    assert n == 4


def test_class_without_ground_truth_is_nan_and_left_out(tmp_path):
    gt = {"image_key": "a", "groundtruth_boxes": np.array([[0.0, 0.0, 1.0, 1.0]]), "groundtruth_classes": np.array([1])}
    dt = {"image_key": "a", "detection_boxes": np.array([[0.0, 0.0, 1.0, 1.0], [0.0, 0.0, 1.0, 1.0]]),
          "detection_scores": np.array([0.5, 0.4]), "detection_classes": np.array([1, 2])}
    result = evaluate(tmp_path / "s", 2, [gt], [dt], OpenImagesProtocol.v2()).accumulate()
    assert result.ap[0] == 1.0 and np.isnan(result.ap[1]) and result.mean_ap == 1.0


def test_hierarchy_expansion_golden():
    expected = load("expected_tf_oid_hierarchy_expansion.json")
    tree = read_hierarchy(DATA / "bbox_labels_600_hierarchy.json")
    assert len(tree.classes) == 601
    assert {c: sorted(a) for c, a in tree.ancestors.items() if a} == {c: sorted(a) for c, a in expected["ancestors"].items() if a}
    assert set(expected["ancestors"]) == set(tree.classes)
    assert {c: sorted(d) for c, d in tree.descendants.items() if d} == {c: sorted(d) for c, d in expected["descendants"].items()}


def _write_tree(tmp_path, tree: dict):
    path = tmp_path / "hierarchy.json"
    path.write_text(json.dumps(tree))
    return path


def test_expansion_examples(tmp_path):
    """The golden examples (Spoon, Crab, … boxes and labels) through the ingest."""
    expected = load("expected_tf_oid_hierarchy_expansion.json")["examples"]
    hierarchy = DATA / "bbox_labels_600_hierarchy.json"
    for i, example in enumerate(expected):
        boxes = tmp_path / f"boxes{i}.csv"
        labels = tmp_path / f"labels{i}.csv"
        boxes.write_text("ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\n")
        labels.write_text("ImageID,LabelName,Confidence\n")
        if example["call"] == "expand_boxes_or_segments_from_csv":
            boxes.write_text(f"ImageID,LabelName,XMin,XMax,YMin,YMax,IsGroupOf\nimg0,{example['input_label']},0.1,0.2,0.3,0.4,0\n")
        else:
            confidence = example["input_row"].split(",")[2]
            labels.write_text(f"ImageID,LabelName,Confidence\nimg0,{example['input_label']},{confidence}\n")
        dataset = read_ground_truth(boxes, labels, hierarchy)
        names = dict(zip(dataset.categories.get_column("category_id"), dataset.categories.get_column("name")))
        rows = dataset.gt if example["call"] == "expand_boxes_or_segments_from_csv" else dataset.image_labels
        found = sorted(names[c] for c in rows.get_column("category_id"))
        assert len(found) == example["output_row_count"]
        assert found == example["output_labels_sorted"]


def test_small_hierarchy_cases(tmp_path):
    """oid_hierarchical_labels_expansion_test: a→{b, c→{d, e, f→d}, f→d}, boxes and labels."""
    for name in ("test_bbox_expansion", "test_labels_expansion", "test_segm_expansion"):
        calls = METRICS[f"oid_hierarchical_labels_expansion_test::HierarchicalLabelsExpansionTest::{name}"]["calls"]
        tree = read_hierarchy(_write_tree(tmp_path, calls[0]["args"][0]))
        for call in calls[1:]:
            row = call["args"][0].strip().split(",")
            label = row[call["args"][1]]
            if call["kind"].endswith("expand_boxes_or_segments_from_csv"):
                targets = {label} | tree.ancestors[label]
            else:
                positive = int(row[call["args"][2]]) == 1
                targets = {label} | (tree.ancestors[label] if positive else tree.descendants[label])
            expected = {r.strip().split(",")[call["args"][1]] for r in call["result"]}
            assert targets == expected and len(call["result"]) == len(targets)


def _recorded_ground_truth(tmp_path, gt_call, integer_columns) -> tuple:
    """``build_groundtruth_dictionary``'s recorded input table as our reader's files: ``(boxes CSV, labels CSV,
    hierarchy, class descriptions)``, the ``integer_columns`` of the boxes written as integers."""
    frame, label_map = gt_call["args"]
    table = pl.DataFrame(frame["data"], schema=frame["columns"], orient="row", infer_schema_length=None)
    hierarchy = _write_tree(tmp_path, {"LabelName": "root", "Subcategory": [{"LabelName": n} for n in label_map]})
    descriptions = tmp_path / "classes.csv"
    descriptions.write_text("".join(f"{n},{n}\n" for n in sorted(label_map, key=label_map.get)))
    boxes = table.filter(pl.col("XMin").is_not_null()).drop("ConfidenceImageLabel")
    labels = table.filter(pl.col("ConfidenceImageLabel").is_not_null()).select(
        "ImageID", "LabelName", pl.col("ConfidenceImageLabel").cast(pl.Int64).alias("Confidence"))
    boxes.with_columns(pl.col(*integer_columns).cast(pl.Int64)).write_csv(tmp_path / "boxes.csv")
    labels.write_csv(tmp_path / "labels.csv")
    return tmp_path / "boxes.csv", tmp_path / "labels.csv", hierarchy, descriptions


def test_challenge_csv_parsing(tmp_path):
    """build_groundtruth_dictionary / build_predictions_dictionary (boxes): the same boxes, classes, group-of flags,
    verified classes and scores through our readers."""
    from evalengine.io.openimages import iter_predictions
    prefix = "oid_challenge_evaluation_utils_test::OidChallengeEvaluationUtilTest::"
    gt_call = METRICS[prefix + "testBuildGroundtruthDictionaryBoxes"]["calls"][0]
    dataset = read_ground_truth(*_recorded_ground_truth(tmp_path, gt_call, ["IsGroupOf"]))
    expected = gt_call["result"]
    gt = dataset.gt.sort("gt_id")
    np.testing.assert_array_equal(gt.select("y", "x", "y_max", "x_max").to_numpy(), array(expected["groundtruth_boxes"]))
    np.testing.assert_array_equal(gt.get_column("category_id").to_numpy(), array(expected["groundtruth_classes"]))
    np.testing.assert_array_equal(gt.get_column("iscrowd").to_numpy(), array(expected["groundtruth_group_of"]).astype(bool))
    assert sorted(dataset.image_labels.get_column("category_id").unique()) == sorted(array(expected["groundtruth_image_classes"]))
    dt_call = METRICS[prefix + "testBuildPredictionDictionaryBoxes"]["calls"][0]
    frame = dt_call["args"][0]
    pl.DataFrame(frame["data"], schema=frame["columns"], orient="row").write_csv(tmp_path / "pred.csv")
    dt = pl.concat(list(iter_predictions(tmp_path / "pred.csv", dataset)))
    expected = dt_call["result"]
    np.testing.assert_array_equal(dt.select("y", "x", "y_max", "x_max").to_numpy(), array(expected["detection_boxes"]))
    np.testing.assert_array_equal(dt.get_column("score").to_numpy(), array(expected["detection_scores"]))
    np.testing.assert_array_equal(dt.get_column("category_id").to_numpy(), array(expected["detection_classes"]))


def test_challenge_csv_parsing_masks(tmp_path):
    """build_groundtruth_dictionary / build_predictions_dictionary with masks: the decoded masks (base64 of zlib of
    COCO RLE) and the prediction boxes made from them."""
    from evalengine.io.openimages import iter_predictions
    from tests.openimages_cases import compressed
    prefix = "oid_challenge_evaluation_utils_test::OidChallengeEvaluationUtilTest::"
    gt_call = METRICS[prefix + "testBuildGroundtruthDictionaryMasks"]["calls"][0]
    dataset = read_ground_truth(*_recorded_ground_truth(tmp_path, gt_call, ["IsGroupOf", "ImageWidth", "ImageHeight"]),
                                with_masks=True)
    expected = gt_call["result"]
    gt = dataset.gt.sort("gt_order")
    np.testing.assert_array_equal(gt.select("y", "x", "y_max", "x_max").to_numpy(), array(expected["groundtruth_boxes"]))
    for stored, mask in zip(gt.get_column("mask_rle").to_list(), array(expected["groundtruth_instance_masks"])):
        if mask.any():
            assert stored == compressed(mask)
        else:  # no Mask, or an empty one: the reference's zero mask (no mask, for the evaluator)
            assert stored is None or mask_utils.area({"size": list(mask.shape), "counts": stored}) == 0
    dt_call = METRICS[prefix + "testBuildPredictionDictionaryMasks"]["calls"][0]
    frame = dt_call["args"][0]
    pl.DataFrame(frame["data"], schema=frame["columns"], orient="row").write_csv(tmp_path / "p.csv")
    dt = pl.concat(list(iter_predictions(tmp_path / "p.csv", dataset, with_masks=True)))
    expected = dt_call["result"]
    np.testing.assert_array_equal(dt.select("y", "x", "y_max", "x_max").to_numpy(), array(expected["detection_boxes"]))
    for stored, mask in zip(dt.get_column("mask_rle").to_list(), array(expected["detection_masks"])):
        assert stored == compressed(mask)
    np.testing.assert_array_equal(dt.get_column("score").to_numpy(), array(expected["detection_scores"]))


def test_object_detection_evaluation_evaluate(tmp_path):
    """ObjectDetectionEvaluationTest.test_evaluate (full_call_traces.json): difficult and group-of boxes with
    ``group_of_weight`` 0 through ``ObjectDetectionEvaluation``: AP, mAP and each class's precision and recall."""
    groundtruth, detections, expected = recorded_inputs(
        load("full_call_traces.json")["calls"]["object_detection_evaluation_test::ObjectDetectionEvaluationTest::"
                                               "test_evaluate"])
    protocol = OpenImagesProtocol.v2()
    evaluation = evaluate(tmp_path / "s", 3, groundtruth, detections, protocol)
    result = evaluation.accumulate()
    np.testing.assert_allclose(result.ap, array(expected[0]), rtol=0, atol=1e-12)
    assert result.mean_ap == pytest.approx(expected[1], abs=1e-12)
    rows = oi_metrics.entries(evaluation.dt_matches(), evaluation.gt_matches(), 0.0).collect()
    for c in range(3):
        mine = rows.filter(pl.col("category_id") == c + 1)
        precision, recall = oi_metrics.precision_recall(mine["score"].to_numpy(), mine["label"].to_numpy(),
                                                        result.num_gt[c])
        np.testing.assert_allclose(precision, array(expected[2][c]), rtol=0, atol=1e-12)
        np.testing.assert_allclose(recall, array(expected[3][c]), rtol=0, atol=1e-12)
    np.testing.assert_allclose(evaluation.cor_loc().get_column("corloc").to_numpy(), array(expected[4]), rtol=0,
                               atol=1e-12)
    assert evaluation.mean_cor_loc() == pytest.approx(expected[5], abs=1e-12)
