"""``evalengine tide``: tidecv's summary text and the JSON shape, from files and from a store; one-line errors."""

import json

import pytest

from evalengine.api import ingest_coco
from tests.conftest import DATA
from tests.conftest import SAMPLE_DT as DT
from tests.conftest import SAMPLE_GT as GT
from tests.helpers import run_cli as _run

EXPECTED = json.loads((DATA / "tide_official" / "expected_tide_val2014_100_bbox.json").read_text())


def test_json_shape_and_values(capsys, tmp_path):
    status, out, err = _run(capsys, "tide", "--gt", GT, "--dt", DT, "--json")
    got = json.loads(out)
    assert status == 0 and err == ""
    assert list(got) == ["ap50", "main", "special", "counts"]
    assert list(got["main"]) == ["Cls", "Loc", "Both", "Dupe", "Bkg", "Miss"]
    assert list(got["special"]) == ["FalsePos", "FalseNeg"]
    assert got["counts"] == EXPECTED["error_counts"]
    assert got["ap50"] == pytest.approx(EXPECTED["AP50_tide"], abs=1e-9)
    assert got["main"] == pytest.approx(EXPECTED["main_errors_dAP"], abs=1e-9)
    assert got["special"] == pytest.approx(EXPECTED["special_errors_dAP"], abs=1e-9)
    store = ingest_coco(GT, DT, tmp_path / "store")
    status, out, _ = _run(capsys, "tide", store.path, "--json")
    assert status == 0 and json.loads(out) == got


def test_text_is_tidecvs_summary(capsys, tmp_path):
    status, out, _ = _run(capsys, "tide", "--gt", GT, "--dt", DT)
    want = ["-- instances_val2014_fakebbox100_results --"] + EXPECTED["summary_text"][1:]
    assert status == 0 and out == "\n".join(want) + "\n"
    store = ingest_coco(GT, DT, tmp_path / "store")
    status, out, _ = _run(capsys, "tide", store.path, "--run", "default")
    assert status == 0 and out.splitlines()[0] == "-- default --" and out.splitlines()[1:] == want[1:]


def test_parameters_reach_the_protocol(capsys):
    status, out, _ = _run(capsys, "tide", "--gt", GT, "--dt", DT, "--json", "--pos-threshold", "0.75",
                          "--background-threshold", "0.2", "--max-dets", "10")
    got = json.loads(out)
    assert status == 0 and got["ap50"] < EXPECTED["AP50_tide"]


@pytest.mark.parametrize("argv, message", [
    (["tide"], "evalengine: error: tide: give a STORE, or --gt and --dt (not both)"),
    (["tide", "--gt", GT], "evalengine: error: tide: give a STORE, or --gt and --dt (not both)"),
    (["tide", "--gt", GT, "--dt", DT, "--background-threshold", "0.7"],
     "evalengine: error: background_threshold 0.7 is above pos_threshold 0.5"),
    (["tide", "--gt", GT, "--dt", DT, "--mode", "x"], "evalengine: error: tide: argument --mode: invalid choice"),
])
def test_one_line_errors(capsys, argv, message):
    status, out, err = _run(capsys, *argv)
    assert status == 2 and out == "" and err.startswith(message) and err.count("\n") == 1


def test_no_annotations_is_located(capsys, tmp_path):
    (tmp_path / "gt.json").write_text(json.dumps({"images": [{"id": 1, "width": 5, "height": 5}], "annotations": [],
                                                  "categories": [{"id": 1, "name": "a"}]}))
    (tmp_path / "dt.json").write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2],
                                                   "score": 0.5}]))
    status, out, err = _run(capsys, "tide", "--gt", tmp_path / "gt.json", "--dt", tmp_path / "dt.json")
    assert status == 2 and out == ""
    assert err == f"evalengine: error: {tmp_path / 'gt.json'}: no annotations (outside crowd regions): TIDE's AP is " \
                  "undefined\n"


def test_coco_mode(capsys):
    status, out, _ = _run(capsys, "tide", "--gt", GT, "--dt", DT, "--json", "--mode", "coco")
    got = json.loads(out)
    assert status == 0 and got["ap50"] == pytest.approx(69.69727247299576, abs=1e-9)  # pycocotools' AP50 × 100
    assert got["counts"] == EXPECTED["error_counts"]


SEGM_DT = DATA / "cocoapi_fakesegm100_dt.json"
SEGM = json.loads((DATA / "tide_official" / "expected_tide_val2014_100_segm.json").read_text())


def test_segm_is_tidecvs_mask_mode(capsys, tmp_path):
    status, out, err = _run(capsys, "tide", "--gt", GT, "--dt", SEGM_DT, "--iou-type", "segm", "--json")
    got = json.loads(out)
    assert status == 0 and err == "" and got["counts"] == SEGM["error_counts"]
    assert got["ap50"] == pytest.approx(SEGM["AP50_tide"], abs=1e-9)
    assert got["main"] == pytest.approx(SEGM["main_errors_dAP"], abs=1e-9)
    assert got["special"] == pytest.approx(SEGM["special_errors_dAP"], abs=1e-9)
    store = ingest_coco(GT, SEGM_DT, tmp_path / "store")
    status, out, _ = _run(capsys, "tide", store.path, "--iou-type", "segm")
    assert status == 0 and out.splitlines() == ["-- default --"] + SEGM["summary_text"][1:]  # "mask AP @ 50: 51.80"
    status, out, _ = _run(capsys, "tide", store.path, "--json")  # the boxes of the same store
    assert status == 0 and json.loads(out)["ap50"] != got["ap50"]


def test_segm_one_line_errors(capsys):
    status, out, err = _run(capsys, "tide", "--gt", GT, "--dt", DT, "--iou-type", "segm")
    assert status == 2 and out == "" and err.count("\n") == 1
    assert err.startswith(f"evalengine: error: {DT}: run 'default' has no masks ('segmentation')")
    status, _, err = _run(capsys, "tide", "--gt", GT, "--dt", DT, "--iou-type", "keypoints")
    assert status == 2 and err.startswith("evalengine: error: tide: argument --iou-type: invalid choice")
