"""Golden LRP: the official LRP-Error code's values (tests/data/lrp_official/, computed with kemaloksuz/LRP-Error @
ec408f3; boxes, and masks with ``iouType='segm'``) are reproduced by the test reference (which validates it) and by
the engine (thresholds exactly, 1e-12 otherwise)."""

import json
import math

import pytest

from evalengine.api import CocoProtocol, evaluate_coco
from tests.conftest import DATA, PACKAGE_DATA
from tests.metrics.lrp_reference import cocoeval, lrp_reference, lrp_summary

CASES = {  # (ground truth, results, iouType)
    "val2014_100_bbox": (PACKAGE_DATA / "instances_val2014_100.json",
                         PACKAGE_DATA / "instances_val2014_fakebbox100_results.json", "bbox"),
    "val2014_100_segm": (PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakesegm100_dt.json", "segm"),
    "tm_inputs_bbox": (DATA / "torchmetrics_gt.json", DATA / "torchmetrics_dt.json", "bbox"),
    "toyexample_coco_bbox": (DATA / "review_toy_gt.json", DATA / "review_toy_dt.json", "bbox"),
}
STATS = {"oLRP": "olrp", "oLRP_Loc": "olrp_loc", "oLRP_FP": "olrp_fp", "oLRP_FN": "olrp_fn",
         "oLRP_small": "olrp_small", "oLRP_medium": "olrp_medium", "oLRP_large": "olrp_large"}
PER_CLASS = {"oLRP": "olrp", "oLRP_Loc": "loc", "oLRP_FP": "fp", "oLRP_FN": "fn", "lrp_opt_thr": "threshold"}


def _expected(case):
    return json.loads((DATA / "lrp_official" / f"expected_lrp_{case}.json").read_text())


def _assert_summary(summary, expected):
    for official, ours in STATS.items():
        assert summary[ours] == pytest.approx(expected["stats"][official], abs=1e-12), official
    per_category = expected["per_category_area_all_maxDets100"]
    # a class without non-crowd ground truth keeps the official -1 and is absent from per_class
    with_gt = {c: v for c, v in per_category.items() if v["oLRP"] != -1}
    assert all(set(v.values()) == {-1.0} for c, v in per_category.items() if c not in with_gt)
    assert sorted(summary["per_class"]) == sorted(with_gt)
    for category, values in with_gt.items():
        got = summary["per_class"][category]
        for official, ours in PER_CLASS.items():
            want = values[official]
            if want is None or ours == "threshold":
                assert got[ours] == want, (category, official)
            else:
                assert got[ours] == pytest.approx(want, abs=1e-12), (category, official)


@pytest.mark.parametrize("case", list(CASES))
def test_reference_reproduces_official(case):
    """The reference on PyPI pycocotools' evalImgs gives every official value (here even bit for bit)."""
    gt, dt, iou_type = CASES[case]
    ev = cocoeval(json.loads(gt.read_text()), json.loads(dt.read_text()), iou_type=iou_type)
    summary = lrp_summary(lrp_reference(ev), ev.params.catIds)
    _assert_summary(summary, _expected(case))
    expected = _expected(case)
    assert [summary[ours] for ours in STATS.values()] == [expected["stats"][o] for o in STATS]


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.filterwarnings("ignore:.*annotation id 0 found")  # the toy's GT ids start at 0: the official value has the quirk
def test_engine_reproduces_official(case):
    gt, dt, iou_type = CASES[case]
    result = evaluate_coco(gt, dt, CocoProtocol(iou_type=iou_type), accumulate=False).lrp()
    _assert_summary(result.summary(), _expected(case))


def test_official_conventions_in_the_expected_files():
    """What the official files say, read directly: a class with GT and no TP (two in val2014) has oLRP = FN = 1 and
    null loc, FP and threshold; a class without GT (ten in val2014, label 3 of tm_inputs) keeps -1."""
    val = _expected("val2014_100_bbox")["per_category_area_all_maxDets100"]
    no_tp = {c: v for c, v in val.items() if v["oLRP_Loc"] is None}
    assert len(no_tp) == 2 and sum(v["oLRP"] == -1 for v in val.values()) == 10
    assert all(v["oLRP"] == 1 and v["oLRP_FN"] == 1 and v["oLRP_FP"] is None and v["lrp_opt_thr"] is None
               for v in no_tp.values())
    assert _expected("tm_inputs_bbox")["per_category_area_all_maxDets100"]["3"]["oLRP"] == -1
    assert not any(math.isnan(v["oLRP"]) for v in val.values())
