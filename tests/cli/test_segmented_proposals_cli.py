"""``evalengine proposals --iou-type segm`` as a user runs it (a subprocess): the cocoapi fake segm results of the
bundled 100 images as segmented proposals, the numbers equal to the brute-force reference of
:mod:`tests.match.test_segmented_proposals` (pycocotools ``maskUtils.iou``); the store path (``add-proposals``, then
``proposals --store``); bad input exits 2 with one line and no traceback."""

import json
import subprocess
import sys

import numpy as np
import pytest

import evalengine
from evalengine.api import ProposalProtocol
from tests.conftest import DATA, PACKAGE_DATA
from tests.io.test_bad_input_corpus import cli
from tests.match.test_segmented_proposals import THRESHOLDS, _measures, reference

GT = PACKAGE_DATA / "instances_val2014_100.json"
SEGM = DATA / "cocoapi_fakesegm100_dt.json"
BUDGETS = (1, 3, 10, 100)


def _run(*argv):
    return subprocess.run([sys.executable, "-m", "evalengine.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=600)


@pytest.fixture(scope="module")
def expected():
    gt, proposals = json.loads(GT.read_text()), json.loads(SEGM.read_text())
    values, used = reference(gt, proposals, BUDGETS)
    return _measures(values, used, len(gt["images"]), BUDGETS)


def _check(payload: dict, expected: dict) -> None:
    assert payload["budgets"] == list(BUDGETS) and payload["iou_type"] == "segm"
    quality = payload["achievable"]
    for k, budget in enumerate(BUDGETS):
        want = expected[budget]
        assert payload["mean_proposals"][k] == pytest.approx(want["mean_proposals"], abs=1e-12)
        assert payload["ar"][k] == pytest.approx(want["ar"], abs=1e-12)
        assert payload["recall"]["0.5"][k] == pytest.approx(want["recall_50"], abs=1e-12)
        assert quality["mean"][k] == pytest.approx(want["mean_quality"], abs=1e-12)
        assert quality["median"][k] == pytest.approx(want["median_quality"], abs=1e-12)
        for t in THRESHOLDS:
            assert quality["recall"][str(t)][k] == pytest.approx(want[f"recall@{t:g}"], abs=1e-12)


def test_fake_segm_results_as_proposals(tmp_path, expected):
    assert expected[100]["n_objects"] > 500 and 0.2 < expected[100]["mean_quality"] < 0.9  # a real case
    result = _run("proposals", "--gt", GT, "--proposals", SEGM, "--iou-type", "segm", "--budgets", *BUDGETS, "--json",
                  "--quiet")
    assert result.returncode == 0, result.stderr
    _check(json.loads(result.stdout), expected)
    table = _run("proposals", "--gt", GT, "--proposals", SEGM, "--iou-type", "segm", "--budgets", *BUDGETS, "--quiet")
    assert table.returncode == 0
    assert "achievable quality (Pont-Tuset & Marques: best Jaccard per object, recall at J > t)" in table.stdout
    line = [line for line in table.stdout.splitlines() if line.startswith("│ 100 ")][-1]  # the quality table's
    shown = [float(cell) for cell in line.strip("│ ").split("┆")]
    assert shown[2:4] == [round(expected[100]["mean_quality"], 4), round(expected[100]["median_quality"], 4)]


def test_store_path(tmp_path, expected):
    store = tmp_path / "store"
    boxes = tmp_path / "boxes.json"
    boxes.write_text(json.dumps([{"image_id": 42, "bbox": [0, 0, 5, 5], "score": 1.0}]))
    assert _run("proposals", "--gt", GT, "--proposals", boxes, "--store", store, "--quiet").returncode == 0
    added = _run("add-proposals", store, "--run", "fakesegm", "--proposals", SEGM)
    assert added.returncode == 0, added.stderr
    result = _run("proposals", "--store", store, "--run", "fakesegm", "--iou-type", "segm", "--budgets", *BUDGETS,
                  "--json", "--quiet")
    assert result.returncode == 0, result.stderr
    _check(json.loads(result.stdout), expected)
    sql = _run("sql", store, "SELECT budget, mean_quality FROM achievable_quality WHERE run = 'fakesegm' ORDER BY budget",
               "--format", "json")
    assert sql.returncode == 0, sql.stderr
    values = [row["mean_quality"] for row in json.loads(sql.stdout)]
    np.testing.assert_allclose(values, [expected[b]["mean_quality"] for b in BUDGETS], rtol=0, atol=1e-12)


def test_bad_input_exits_2_with_one_line(tmp_path):
    bad = tmp_path / "bad.json"
    results = json.loads(SEGM.read_text())[:3]
    results[2]["segmentation"]["size"] = [1, 1]
    bad.write_text(json.dumps(results))
    result = _run("proposals", "--gt", GT, "--proposals", bad, "--iou-type", "segm", "--store", tmp_path / "s")
    assert result.returncode == 2
    assert result.stdout == ""
    assert result.stderr.splitlines() == [
        f"evalengine: error: {bad}: proposal at position 3: 'segmentation' RLE size differs from its image's "
        f"[height, width] ([1, 1], the image's {_size(results[2])})"]
    assert not (tmp_path / "s").exists()
    boxes = _run("proposals", "--gt", GT, "--proposals", PACKAGE_DATA / "instances_val2014_fakebbox100_results.json",
                 "--iou-type", "segm", "--budgets", "1")
    assert boxes.returncode == 2 and "Traceback" not in boxes.stderr
    assert boxes.stderr.splitlines()[-1].endswith("has no masks ('segmentation'), which iou_type 'segm' needs "
                                                  "(missing: mask_h, mask_w, mask_rle)")


def _size(result: dict) -> str:
    image = next(i for i in json.loads(GT.read_text())["images"] if i["id"] == result["image_id"])
    return f"[{image['height']}, {image['width']}]"


def test_quality_of_box_proposals(tmp_path):
    """``--quality`` on boxes: the mean best IoU is the ABO, the recall counts best IoUs strictly above t."""
    boxes = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
    code, out, err = cli(tmp_path, "proposals", "--gt", GT, "--proposals", boxes, "--budgets", 1, 10, 100, "--quality",
                         "--quality-at", 0.5, 0.75, "--json", "--store", tmp_path / "store")
    assert code == 0, err
    payload = json.loads(out)
    assert "iou_type" not in payload
    ev = evalengine.open(tmp_path / "store").evaluate_proposals(protocol=ProposalProtocol(budgets=(1, 10, 100)))
    assert payload["achievable"]["mean"] == ev.best_overlap().sort("budget").get_column("abo").to_list()
    table = ev.gt_matches().collect()
    for k, budget in enumerate((1, 10, 100)):
        best = table.filter(table["budget"] == budget).get_column("best_iou").to_numpy()
        assert payload["achievable"]["median"][k] == pytest.approx(float(np.median(best)), abs=1e-12)
        assert payload["achievable"]["recall"]["0.75"][k] == pytest.approx(float(np.mean(best > 0.75)), abs=1e-12)
