"""COCO analyze's rules on small hand-made cases, each checked against the MATLAB transcription too: MATLAB's ignore
field, its per-image ground-truth order in Sim/Oth, ignored objects that take one detection (crowd: any number), the
supercategory of Sim, categories without ground truth, BG's step and FN; a category without supercategory is a
located error."""

import numpy as np
import polars as pl
import pytest

from evalengine import api
from evalengine.errors import InputError
from evalengine.match.analyze import CURVES, MATCHED
from tests.helpers import coco_dt, coco_gt, write_inputs
from tests.metrics.analyze_reference import matlab_analyze

FAR = [500, 500, 20, 20]  # a box no detection overlaps


def _gt(boxes, categories, supercategories: dict, **columns) -> dict:
    gt = coco_gt(boxes, category_id=categories, categories=sorted(supercategories), **columns)
    for category in gt["categories"]:
        category["supercategory"] = supercategories[category["id"]]
    return gt


def _analyze(tmp_path, gt, dt):
    """(our evaluation, MATLAB's ps) after checking that every precision agrees."""
    evaluation = api.analyze(write_inputs(tmp_path, gt, dt))
    _, ps = matlab_analyze(gt, dt)
    np.testing.assert_array_equal(evaluation.result.precision, np.transpose(ps, (2, 3, 0, 1)))
    return evaluation


def _outcomes(evaluation, curve: str) -> dict:
    """det_id → 'tp' | 'fp' | 'ignored' in ``curve``'s evaluation, area all."""
    bit = 1 << MATCHED.index(curve)
    rows = evaluation.dt_matches().select(
        "det_id", pl.col("tp_bits").arr.first().alias("tp"), pl.col("ignored_bits").arr.first().alias("ignored")
    ).collect()
    return {d: "tp" if tp & bit else "ignored" if ignored & bit else "fp" for d, tp, ignored in rows.iter_rows()}


def _ap(evaluation, category_id: int) -> dict:
    row = evaluation.result.ap_frame("category").filter((pl.col("category_id") == category_id)
                                                       & (pl.col("area_range") == "all")).row(0, named=True)
    return {curve: row[curve] for curve in CURVES}


def test_ignore_field_is_honoured_as_matlab_does(tmp_path):
    """MATLAB's evaluateImg ignores an object with ``ignore: 1`` (pycocotools overwrites the field with iscrowd)."""
    gt = _gt([[0, 0, 10, 10], [100, 0, 10, 10]], [1, 1], {1: "a"}, ignore=[1, 0])
    dt = coco_dt([[0, 0, 10, 10], [100, 0, 10, 10]], [0.9, 0.8], category_ids=[1, 1])
    evaluation = _analyze(tmp_path, gt, dt)
    assert _outcomes(evaluation, "C75") == {1: "ignored", 2: "tp"}
    # one regular object, found first: precision 1 / (1 + eps) with pycocotools' eps (MATLAB's is exactly 1)
    assert _ap(evaluation, 1)["C75"] == pytest.approx(1.0, abs=1e-15)


def test_sim_ignores_same_supercategory_oth_every_category(tmp_path):
    """A detection on an object of its supercategory is ignored from Sim on; on another supercategory's, from Oth."""
    gt = _gt([[0, 0, 10, 10], [100, 0, 10, 10], [200, 0, 10, 10]], [1, 2, 3], {1: "animal", 2: "animal", 3: "car"})
    dt = coco_dt([[0, 0, 10, 10], [100, 0, 10, 10], [200, 0, 10, 10]], [0.5, 0.9, 0.8], category_ids=[1, 1, 1])
    evaluation = _analyze(tmp_path, gt, dt)
    assert _outcomes(evaluation, "Loc") == {1: "tp", 2: "fp", 3: "fp"}
    assert _outcomes(evaluation, "Sim") == {1: "tp", 2: "ignored", 3: "fp"}
    assert _outcomes(evaluation, "Oth") == {1: "tp", 2: "ignored", 3: "ignored"}
    ap = _ap(evaluation, 1)
    assert (ap["Loc"], ap["Sim"], ap["Oth"]) == pytest.approx((1 / 3, 1 / 2, 1.0), abs=1e-15)


def test_an_ignored_object_takes_one_detection_a_crowd_any_number(tmp_path):
    """MATLAB's "already matched" test reads iscrowd, not ignore: an object of another category absorbs one
    detection in Oth, a crowd region of another category every one."""
    gt = _gt([FAR, [0, 0, 10, 10], [100, 0, 10, 10]], [1, 2, 2], {1: "a", 2: "b"}, iscrowd=[0, 0, 1])
    dt = coco_dt([[0, 0, 10, 10], [0, 0, 10, 10], [100, 0, 10, 10], [100, 0, 10, 10]], [0.9, 0.8, 0.7, 0.6],
                 category_ids=[1, 1, 1, 1])
    assert _outcomes(_analyze(tmp_path, gt, dt), "Oth") == {1: "ignored", 2: "fp", 3: "ignored", 4: "ignored"}


def test_sim_and_oth_see_an_images_objects_by_category_then_file_order(tmp_path):
    """CocoApi sorts annotations by (image, category): the tied detection takes the LAST of equal IoU, here the object
    of category 3 listed first in the file, which leaves the next detection nothing (in file order it would take it)."""
    gt = _gt([FAR, [0, 0, 10, 10], [5, 0, 10, 10]], [1, 3, 2], {1: "a", 2: "a", 3: "a"})
    dt = coco_dt([[2.5, 0, 10, 10], [-5, 0, 10, 10]], [0.9, 0.8], category_ids=[1, 1])  # IoU .6 with both; .33, 0
    evaluation = _analyze(tmp_path, gt, dt)
    assert _outcomes(evaluation, "Oth") == {1: "ignored", 2: "fp"}
    assert _outcomes(evaluation, "Sim") == {1: "ignored", 2: "fp"}


def test_category_without_ground_truth_counts_zero_and_bg_is_a_step(tmp_path):
    """``ps(ps == -1) = 0``: a category with detections and no object has 0 on every curve but FN (1); BG is 1 up to
    Oth's last recall, 0 after, and the overall curve is the mean over both categories."""
    gt = _gt([[0, 0, 10, 10], [100, 0, 10, 10]], [1, 1], {1: "a", 2: "a"})
    dt = coco_dt([[0, 0, 10, 10], [300, 0, 10, 10]], [0.9, 0.8], category_ids=[1, 2])
    evaluation = _analyze(tmp_path, gt, dt)
    assert _ap(evaluation, 2) == {**dict.fromkeys(CURVES, 0.0), "FN": 1.0}
    curves = evaluation.result.precision_frame("category").filter(
        (pl.col("category_id") == 1) & (pl.col("area_range") == "all") & (pl.col("curve") == "BG"))
    assert curves.get_column("precision").to_list() == [1.0] * 51 + [0.0] * 50  # recall 0.5 reached, not more
    overall = evaluation.result.ap_frame("overall").row(0, named=True)
    assert overall["FN"] == 1.0 and overall["C50"] == pytest.approx(51 / 101 / 2, abs=1e-15)


@pytest.mark.parametrize("supercategory", [None, ""])
def test_a_category_without_supercategory_is_refused(tmp_path, supercategory):
    gt = _gt([[0, 0, 10, 10]], [1], {1: "a", 7: supercategory})
    if supercategory is None:
        del gt["categories"][1]["supercategory"]
    gt_path, dt_path = write_inputs(tmp_path, gt, coco_dt([[0, 0, 10, 10]], [0.9]))
    with pytest.raises(InputError, match=r"gt\.json: category 7 \('c7'\) has no supercategory: COCO analyze's Sim"):
        api.analyze((gt_path, dt_path))


def test_the_coco_protocol_honours_the_ignore_field_only_when_asked():
    """``CocoProtocol.ignore_flag`` (MATLAB's rule) is recorded only when set: stored default tables keep their key."""
    from evalengine.match.coco import CocoProtocol

    assert CocoProtocol().match_key() == "coco" and "ignore_flag" not in CocoProtocol().match_params()
    assert CocoProtocol(ignore_flag=True).match_params()["ignore_flag"] is True
    assert CocoProtocol(ignore_flag=True).match_key() != "coco"
