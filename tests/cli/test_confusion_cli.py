"""``evalengine confusion``: the JSON shape and sums, the table, a store and files giving the same matrix, the
per-class thresholds; one-line errors."""

import json

import numpy as np
import pytest

from evalengine import api
from evalengine.api import ingest_coco
from tests.conftest import DATA
from tests.conftest import SAMPLE_DT as DT
from tests.conftest import SAMPLE_GT as GT
from tests.helpers import run_cli as _run


def test_json_shape_and_sums(capsys, tmp_path):
    status, out, err = _run(capsys, "confusion", "--gt", GT, "--dt", DT, "--score", "0.5", "--json")
    got = json.loads(out)
    assert status == 0 and err == ""
    assert list(got) == ["iou_threshold", "score_threshold", "normalized", "labels", "category_ids", "matrix"]
    assert got["iou_threshold"] == 0.5 and got["score_threshold"] == 0.5 and got["normalized"] is False
    assert got["labels"][0] == "person" and got["labels"][-1] == "background" and got["category_ids"][-1] is None
    matrix = np.array(got["matrix"])
    assert matrix.shape == (81, 81) and matrix[-1, -1] == 0
    gt = json.loads(GT.read_text())["annotations"]
    assert matrix[0].sum() == sum(1 for a in gt if a["category_id"] == 1 and not a["iscrowd"])
    assert matrix[0, 0] == 107  # person true positives at score >= 0.5 (the table below)
    ingest_coco(GT, DT, tmp_path / "store")
    status, out, _ = _run(capsys, "confusion", tmp_path / "store", "--score", "0.5", "--json", "--normalize")
    normalised = np.array(json.loads(out)["matrix"])
    rows = matrix.sum(axis=1) > 0
    np.testing.assert_allclose(normalised[rows], matrix[rows] / matrix[rows].sum(axis=1, keepdims=True))


def test_table_and_per_class_thresholds(capsys, tmp_path):
    status, out, _ = _run(capsys, "confusion", "--gt", GT, "--dt", DT, "--score", "0.5")
    assert status == 0
    assert out.startswith("confusion matrix at IoU >= 0.5, score >= 0.5")
    assert "│ person         ┆ person         ┆ 107   ┆ 0.428        │" in out
    status, out, _ = _run(capsys, "confusion", "--gt", GT, "--dt", DT, "--thresholds", "f1", "--iou", "0.75", "--json")
    got = json.loads(out)
    assert status == 0 and got["score_threshold"] == "f1" and got["iou_threshold"] == 0.75


@pytest.mark.parametrize("argv, message", [
    (["confusion", "--gt", GT], "confusion: give a STORE, or --gt and --dt (not both)"),
    (["confusion", "--gt", GT, "--dt", DT, "--iou", "2"], "an IoU threshold is between 0 and 1, got 2"),
    (["confusion", "--gt", GT, "--dt", DT, "--score", "0.1", "--thresholds", "lrp"], "not allowed with argument"),
    (["confusion", "--gt", GT, "--dt", DT, "--thresholds", "ap"], "invalid choice: 'ap'"),
])
def test_errors_are_one_line(capsys, argv, message):
    status, out, err = _run(capsys, *argv)
    assert status == 2 and out == ""
    assert err.startswith("evalengine: error: ") and message in err and err.count("\n") == 1


def test_segm_reads_the_mask_tables(capsys, tmp_path):
    segm_dt = DATA / "cocoapi_fakesegm100_dt.json"
    status, out, err = _run(capsys, "confusion", "--gt", GT, "--dt", segm_dt, "--iou-type", "segm", "--json")
    assert status == 0 and err == ""
    matrix = np.array(json.loads(out)["matrix"])
    store = ingest_coco(GT, segm_dt, tmp_path / "store")
    np.testing.assert_array_equal(matrix, api.confusion(store, iou_type="segm").array())
    assert not np.array_equal(matrix, api.confusion(store).array())  # the boxes of the same results
    gt = json.loads(GT.read_text())["annotations"]
    assert matrix[0].sum() == sum(1 for a in gt if a["category_id"] == 1 and not a["iscrowd"])
