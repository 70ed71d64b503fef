"""``--iou-type segm|keypoints`` through the command and the API: pycocotools' summaries as it prints them, the
same store, match table and SQL views as boxes, keypoint sigmas from a file, and located errors."""

import json

import numpy as np
import pytest

from evalengine import api
from evalengine.match.coco import CocoProtocol
from tests.conftest import DATA, PACKAGE_DATA
from tests.helpers import run_cli, write_inputs

GT = PACKAGE_DATA / "instances_val2014_100.json"
SEGM_DT = DATA / "cocoapi_fakesegm100_dt.json"
KP_GT, KP_DT = DATA / "fce_keypoints_gt.json", DATA / "fce_keypoints_dt.json"


def _printed(case: str) -> str:
    lines = json.loads((DATA / f"{case}_expected.json").read_text())["runs"]["default"]["summary_text"]
    return "\n".join(line for line in lines if line.startswith(" Average")) + "\n"


def test_coco_segm_prints_pycocotools_summary(capsys):
    status, out, err = run_cli(capsys, "coco", "--gt", GT, "--dt", SEGM_DT, "--iou-type", "segm", "--quiet")
    assert (status, err) == (0, "")
    assert out == _printed("cocoapi_fakesegm100")


def test_coco_keypoints_prints_pycocotools_summary_and_json(capsys):
    status, out, _ = run_cli(capsys, "coco", "--gt", KP_GT, "--dt", KP_DT, "--iou-type", "keypoints", "--quiet")
    assert status == 0 and out == _printed("fce_keypoints")
    status, out, _ = run_cli(capsys, "coco", "--gt", KP_GT, "--dt", KP_DT, "--iou-type", "keypoints", "--json")
    payload = json.loads(out)
    expected = json.loads((DATA / "fce_keypoints_expected.json").read_text())["runs"]["default"]["stats"]
    assert payload["stat_names"] == list(expected)
    np.testing.assert_allclose(payload["stats"], list(expected.values()), rtol=0, atol=1e-12)


def test_use_cats_0_keypoints_are_pycocotools_zeros(capsys):
    """pycocotools' computeOks looks objects up under category -1 when useCats=0: nothing matches."""
    status, out, _ = run_cli(capsys, "coco", "--gt", KP_GT, "--dt", KP_DT, "--iou-type", "keypoints", "--use-cats", "0",
                             "--json")
    assert status == 0 and json.loads(out)["stats"] == [0.0] * 10


def test_kpt_sigmas_file(tmp_path, capsys):
    sigmas = [0.05] * 17
    listed, mapped = tmp_path / "list.json", tmp_path / "map.json"
    listed.write_text(json.dumps(sigmas))
    mapped.write_text(json.dumps({"1": sigmas}))
    want = api.evaluate_coco(KP_GT, KP_DT, CocoProtocol(iou_type="keypoints", kpt_oks_sigmas=sigmas)).stats()
    assert want != api.evaluate_coco(KP_GT, KP_DT, CocoProtocol(iou_type="keypoints")).stats()
    for path in (listed, mapped):
        status, out, _ = run_cli(capsys, "coco", "--gt", KP_GT, "--dt", KP_DT, "--iou-type", "keypoints",
                                 "--kpt-sigmas", path, "--json")
        assert status == 0 and json.loads(out)["stats"] == want


@pytest.mark.parametrize("content, message", [
    ("[0.1, -1]", "list.json: kpt_oks_sigmas: -1 is not a positive number"),
    ('"x"', "list.json: expected a list of sigmas or an object {category id: list}, got str"),
    ("{", "list.json: not valid JSON"),
])
def test_bad_kpt_sigmas_file_is_located(tmp_path, capsys, content, message):
    (tmp_path / "list.json").write_text(content)
    status, _, err = run_cli(capsys, "coco", "--gt", KP_GT, "--dt", KP_DT, "--iou-type", "keypoints",
                             "--kpt-sigmas", tmp_path / "list.json")
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_a_keypoint_count_other_than_the_sigmas_is_located(tmp_path, capsys):
    (tmp_path / "five.json").write_text(json.dumps([0.1] * 5))
    status, _, err = run_cli(capsys, "coco", "--gt", KP_GT, "--dt", KP_DT, "--iou-type", "keypoints",
                             "--kpt-sigmas", tmp_path / "five.json")
    assert status == 2 and len(err.strip().splitlines()) == 1
    assert f"{KP_GT}: annotation " in err and "(category 1) has 17 keypoints where its category's sigmas have 5" in err


@pytest.mark.parametrize("argv, message", [
    (("--dt", PACKAGE_DATA / "instances_val2014_fakebbox100_results.json", "--iou-type", "segm"),
     ("instances_val2014_fakebbox100_results.json: run 'default' has no masks ('segmentation'), which iou_type 'segm' "
      "needs (missing: mask_h, mask_w, mask_rle)")),
    (("--dt", DATA / "cocoapi_fakekeypoints100_dt.json", "--iou-type", "keypoints"),
     "instances_val2014_100.json: the ground truth has no keypoints, which iou_type 'keypoints' needs"),
])
def test_missing_shapes_are_located(capsys, argv, message):
    status, _, err = run_cli(capsys, "coco", "--gt", GT, *argv)
    assert status == 2 and message in err and len(err.strip().splitlines()) == 1


def test_rows_without_a_shape_are_located(tmp_path, capsys):
    gt = json.loads(KP_GT.read_text())
    del gt["annotations"][3]["num_keypoints"]
    gt_path, _ = write_inputs(tmp_path, gt, [])
    status, _, err = run_cli(capsys, "coco", "--gt", gt_path, "--dt", KP_DT, "--iou-type", "keypoints")
    ident = gt["annotations"][3]["id"]
    assert status == 2 and f"{gt_path}: annotation {ident} (category 1) has no 'num_keypoints'" in err


def test_segm_and_bbox_tables_live_side_by_side_in_one_store(tmp_path, capsys):
    """One store, two match tables (the protocol keys differ), the same SQL views, report and slices."""
    store = tmp_path / "store"
    assert run_cli(capsys, "ingest", "coco", "--gt", GT, "--dt", SEGM_DT, "--store", store, "--quiet")[0] == 0
    bbox, segm = CocoProtocol(), CocoProtocol(iou_type="segm")
    assert bbox.match_key() != segm.match_key() != CocoProtocol(iou_type="keypoints").match_key()
    status, out, _ = run_cli(capsys, "evaluate", store, "--iou-type", "segm", "--quiet")
    assert status == 0 and out == _printed("cocoapi_fakesegm100")
    opened = api.open(store)
    boxes = opened.evaluate(bbox).stats()
    masks = opened.evaluate(segm).stats()
    assert boxes != masks
    ap = opened.sql(f"SELECT avg(ap) AS ap FROM ap_by_protocol WHERE protocol = '{segm.match_key()}' AND area_range = 'all' "
                    "AND max_dets = 100 AND ap > -1").item()
    assert ap == pytest.approx(masks[0], abs=1e-12)
    status, out, _ = run_cli(capsys, "report", store, "--iou-type", "segm", "--where", "image_id < 200000", "--json")
    assert status == 0 and len(json.loads(out)["stats"]) == 12


def test_ingest_without_masks_stores_none(tmp_path, capsys):
    status, _, _ = run_cli(capsys, "ingest", "coco", "--gt", DATA / "detectron2_gt.json", "--dt",
                           DATA / "detectron2_dt.json", "--store", tmp_path / "s", "--no-masks")
    assert status == 0 and "mask_rle" not in api.open(tmp_path / "s").dt().collect_schema()
    status, _, err = run_cli(capsys, "evaluate", tmp_path / "s", "--iou-type", "segm")
    assert status == 2 and "run 'default' has no masks ('segmentation')" in err
