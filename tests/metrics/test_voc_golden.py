"""Golden VOC values: the Padilla tools' (review_object_detection_metrics' test_case_1 and README toy example;
Object-Detection-Metrics' worked example), which match with the devkit's rules — IoU with the +1 pixel rule on the
corners (x, y, x + w, y + h), a TP at IoU >= threshold (``iouMax >= iou_threshold``), the stable sort by score —, so
the default ``VocProtocol`` (the MATLAB devkit's ``>=``) reproduces them; and the COCO protocol on the same VOC
ground truth (Padilla's COCO summary of the toy example)."""

import json
import re

import pytest

from evalengine.api import CocoProtocol, VocProtocol, evaluate_voc, ingest_voc
from tests.conftest import DATA
from tests.voc_files import padilla_to_voc

VOC = DATA / "voc"
EXPECTED = json.loads((VOC / "padilla_expected.json").read_text())
METHOD = {"voc07": "ELEVEN_POINT_INTERPOLATION", "voc12": "EVERY_POINT_INTERPOLATION"}
TOY_GT = VOC / "padilla_toy" / "Annotations"


@pytest.fixture(scope="module")
def test_case_1(tmp_path_factory):
    case = VOC / "padilla_test_case_1"
    return padilla_to_voc(case / "gts", case / "dets", tmp_path_factory.mktemp("test_case_1"))


@pytest.fixture(scope="module")
def toy_results(tmp_path_factory):
    return padilla_to_voc(None, TOY_GT.parent / "dets", tmp_path_factory.mktemp("toy"))[1]


@pytest.mark.parametrize("iou", [0.1, 0.3, 0.5, 0.75])
@pytest.mark.parametrize("metric", ["voc07", "voc12"])
def test_test_case_1(test_case_1, iou, metric):
    """AP to the documented 10 digits (and the tool's own value to 1e-12), TP, FP and npos."""
    gt, results = test_case_1
    expected = EXPECTED["test_case_1"][f"{METHOD[metric]}@{iou}/object"]
    documented = {("voc07", 0.1): 0.3333333333, ("voc07", 0.3): 0.2683982683, ("voc07", 0.5): 0.0303030303,
                  ("voc07", 0.75): 0.0, ("voc12", 0.1): 0.3371980676, ("voc12", 0.3): 0.2456866804,
                  ("voc12", 0.5): 0.0222222222, ("voc12", 0.75): 0.0}[metric, iou]
    row = evaluate_voc(gt, results, VocProtocol(iou_thresholds=(iou,)), metric=metric).per_class(metric).row(
        0, named=True)
    assert row["ap"] == pytest.approx(documented, abs=1e-10)  # printed with 10 digits (cut, not rounded)
    assert row["ap"] == pytest.approx(expected["AP"], abs=1e-12)
    assert (row["tp"], row["fp"], row["n_gt"]) == (expected["TP"], expected["FP"], expected["npos"])


def test_toy_example(toy_results):
    """The README's four values (88.64 %, 89.58 %, 49.24 %, 50.97 %), the tool's to 1e-12, counts and mAP, from the
    toy example's VOC XML files."""
    for iou in (0.5, 0.75):
        evaluation = evaluate_voc(TOY_GT, toy_results, VocProtocol(iou_thresholds=(iou,)))
        for metric, printed in zip(("voc07", "voc12"), {0.5: (88.64, 89.58), 0.75: (49.24, 50.97)}[iou]):
            expected = EXPECTED["toyexample_cat"][f"{METHOD[metric]}@{iou}/cat"]
            row = evaluation.per_class(metric).row(0, named=True)
            assert round(100 * row["ap"], 2) == printed
            assert row["ap"] == pytest.approx(expected["AP"], abs=1e-12)
            assert (row["tp"], row["fp"], row["n_gt"]) == (expected["TP"], expected["FP"], expected["npos"])
            assert evaluation.mean_ap(metric) == [pytest.approx(EXPECTED["toyexample_cat"][f"{METHOD[metric]}@{iou}"
                                                                                          "/mAP"], abs=1e-12)]


def test_worked_example_curve(test_case_1):
    """Object-Detection-Metrics' results.txt (the same boxes, IoU 0.3): AP 24.57 % and its precision and recall
    lists, printed with two decimals."""
    text = (VOC / "padilla_object_detection_metrics_results.txt").read_text()
    listed = {name: [float(v) for v in re.findall(r"'([\d.]+)'", re.search(rf"{name}: \[(.*)\]", text).group(1))]
              for name in ("Precision", "Recall")}
    evaluation = evaluate_voc(*test_case_1, VocProtocol(iou_thresholds=(0.3,)))
    curve = evaluation.precision_recall()
    assert round(100 * evaluation.per_class("voc12")["ap"][0], 2) == 24.57
    assert [round(p + 1e-12, 2) for p in curve["precision"]] == listed["Precision"]
    assert [round(r + 1e-12, 2) for r in curve["recall"]] == listed["Recall"]


def test_coco_protocol_on_voc_ground_truth(toy_results, tmp_path):
    """A VOC store evaluated with the COCO protocol (area = w·h of the continuous box, no crowd): the Padilla tool's
    COCO summary of the toy example (its NaN: no object of that size, pycocotools' −1)."""
    store = ingest_voc(TOY_GT, toy_results, tmp_path / "store")
    stats = store.evaluate(CocoProtocol()).stats()
    names = ["AP", "AP50", "AP75", "APsmall", "APmedium", "APlarge", "AR1", "AR10", "AR100", "ARsmall", "ARmedium",
             "ARlarge"]
    expected = EXPECTED["toyexample_cat_coco_summary_padilla"]
    for name, value in zip(names, stats):
        assert value == (-1 if expected[name] != expected[name] else pytest.approx(expected[name], abs=1e-12)), name
