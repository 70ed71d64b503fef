"""``evalengine diagnose``: Borji & Iranmanesh's Table 3 row and the errors per size, from files and from a store; the
JSON object; one-line errors."""

import json

import pytest

from evalengine import api
from tests.conftest import DATA
from tests.conftest import SAMPLE_DT as DT
from tests.conftest import SAMPLE_GT as GT
from tests.helpers import run_cli as _run

SEGM_DT = DATA / "cocoapi_fakesegm100_dt.json"


def test_text_is_table_three_and_the_sizes(capsys):
    status, out, err = _run(capsys, "diagnose", "--gt", GT, "--dt", DT)
    lines = out.splitlines()
    assert status == 0 and err == ""
    assert lines[0] == ("Borji & Iranmanesh error diagnosis (borji_ref, duplicates coco; background IoU <= 0.1, "
                        "foreground IoU >= 0.5): AP in percent")
    assert lines[2] == "│ metric ┆ mAP  ┆ − Cls (Type I) ┆ + Local. ┆ − Duplicates ┆ + Misses ┆ snap only │"
    assert lines[4] == "│ AP     ┆ 50.5 ┆ 56.2           ┆ 56.5     ┆ 56.5         ┆ 100.0    ┆ 77.4      │"
    assert lines[5] == "│ AP50   ┆ 69.7 ┆ 77.0           ┆ 77.4     ┆ 77.4         ┆ 100.0    ┆ 77.4      │"
    assert lines[8] == "errors by object size: count (share of the size's errors)"
    assert lines[12] == "│ Cls (Type I) ┆ 83 (31.4%)  ┆ 25 (22.5%) ┆ 22 (28.9%) ┆ 36 (46.8%) │"
    assert lines[15] == "│ Misses       ┆ 179 (67.8%) ┆ 85 (76.6%) ┆ 53 (69.7%) ┆ 41 (53.2%) │"


def test_json_object(capsys, tmp_path):
    status, out, _ = _run(capsys, "diagnose", "--gt", GT, "--dt", DT, "--variant", "paper", "--json")
    got = json.loads(out)
    assert status == 0
    assert list(got) == ["variant", "duplicates", "background_threshold", "foreground_threshold", "iou_type", "stages",
                         "stage_names", "summary", "errors", "labels"]
    assert got["iou_type"] == "bbox"
    assert got["stages"] == ["S0", "S1_cls", "S2_loc", "S3_dup", "S4_miss", "S3b_snap_only"]
    assert list(got["summary"]["S0"]) == ["AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs",
                                          "ARm", "ARl"]
    assert got["summary"]["S0"]["AP"] == pytest.approx(0.5045806987249627, abs=1e-15)  # pycocotools' AP
    assert got["summary"]["S4_miss"]["AP"] == pytest.approx(1.0, abs=1e-12)
    assert got["errors"]["all"] == {"cls_bg": 83, "loc": 1, "dup": 1, "miss": 180}
    # 734 detections, 839 annotations (9 crowd); the matched loc error counts among the matched annotations
    assert got["labels"] == {"detections": {"tp": 649, "cls_bg": 83, "loc": 1, "dup": 1, "ignored": 0},
                             "ground_truths": {"matched": 650, "miss": 180, "ignored": 9}}
    store = api.ingest_coco(GT, DT, tmp_path / "store")
    status, out, _ = _run(capsys, "diagnose", store.path, "--variant", "paper", "--json")
    assert status == 0 and json.loads(out) == got
    assert got == api.borji(store, variant="paper").as_dict()


def test_masks(capsys, tmp_path):
    """``--iou-type segm`` on the cocoapi fake segm results: the header says so, S0 is pycocotools' segm evaluation
    of the file, the JSON equals the API's on a store."""
    status, out, err = _run(capsys, "diagnose", "--gt", GT, "--dt", SEGM_DT, "--iou-type", "segm")
    assert status == 0 and err == ""
    assert out.splitlines()[0] == ("Borji & Iranmanesh error diagnosis (borji_ref, duplicates coco, iou type segm; "
                                   "background IoU <= 0.1, foreground IoU >= 0.5): AP in percent")
    status, out, _ = _run(capsys, "diagnose", "--gt", GT, "--dt", SEGM_DT, "--iou-type", "segm", "--json")
    got = json.loads(out)
    stats = json.loads((DATA / "cocoapi_fakesegm100_expected.json").read_text())["runs"]["default"]["stats"]
    assert status == 0 and got["iou_type"] == "segm"
    assert got["summary"]["S0"] == pytest.approx(stats, abs=1e-12)
    store = api.ingest_coco(GT, SEGM_DT, tmp_path / "store")
    assert got == api.borji(store, iou_type="segm").as_dict()


@pytest.mark.parametrize("argv, message", [
    (["diagnose"], "evalengine: error: diagnose: give a STORE, or --gt and --dt (not both)"),
    (["diagnose", "--dt", DT], "evalengine: error: diagnose: give a STORE, or --gt and --dt (not both)"),
    (["diagnose", "--gt", GT, "--dt", DT, "--variant", "notebook"],
     "evalengine: error: diagnose: argument --variant: invalid choice: 'notebook'"),
    (["diagnose", "--gt", GT, "--dt", DT, "--foreground-threshold", "1.5"],
     "evalengine: error: diagnose: argument --foreground-threshold: an IoU threshold is between 0 and 1, got 1.5"),
    (["diagnose", "--gt", GT, "--dt", DT, "--background-threshold", "0.7"],
     "evalengine: error: background_threshold 0.7 is above foreground_threshold 0.5"),
    (["diagnose", "--gt", GT.parent / "missing.json", "--dt", DT], "evalengine: error: "),
    (["diagnose", "--gt", GT, "--dt", DT, "--iou-type", "keypoints"],
     "evalengine: error: diagnose: argument --iou-type: invalid choice: 'keypoints'"),
    (["diagnose", "--gt", GT, "--dt", DT, "--iou-type", "segm"],
     f"evalengine: error: {DT}: run 'default' has no masks ('segmentation'), which iou_type 'segm' needs"),
])
def test_one_line_errors(capsys, argv, message):
    status, out, err = _run(capsys, *argv)
    assert status == 2 and out == "" and err.startswith(message) and err.count("\n") == 1


def test_unknown_run_is_located(capsys, tmp_path):
    store = api.ingest_coco(GT, DT, tmp_path / "store")
    status, _, err = _run(capsys, "diagnose", store.path, "--run", "nope")
    assert status == 2 and err == f"evalengine: error: {store.path}: no run 'nope' (runs: default)\n"
