"""Differential test: COCO analyze equals a transcription of MATLAB ``CocoEval.analyze`` on pycocotools
(``analyze_reference.py``) — every curve's 101 precisions per category and area range, the APs per category,
supercategory and overall — on the bundled val2014 sample and on 120 random datasets.

The random datasets are :func:`~tests.metrics.analyze_reference.random_dataset`'s: ``random_coco`` (ties, crowd, the
``ignore`` field, empty images, categories without ground truth, > 100 detections in an image-category, boundary
areas) with supercategories, objects of other categories on the same boxes, a category detected but never annotated."""

import json

import numpy as np
import pytest

from evalengine import api
from evalengine.match.analyze import CURVES
from tests.conftest import PACKAGE_DATA
from tests.helpers import write_inputs
from tests.metrics.analyze_reference import CURVES as MATLAB_CURVES
from tests.metrics.analyze_reference import matlab_analyze, random_dataset

DATASETS = 120
BATCHES = 6


def _assert_equal(result, cat_ids, ps, where: str):
    """Every precision (ps is MATLAB's [curve, R, K, A]) and every AP, to 1e-12."""
    assert list(CURVES) == list(MATLAB_CURVES)
    assert result.categories.get_column("category_id").to_list() == cat_ids, where
    want = np.transpose(ps, (2, 3, 0, 1))  # [K, A, curve, R]
    np.testing.assert_allclose(result.precision, want, rtol=0, atol=1e-12, err_msg=where)
    per_category = result.ap_frame("category")
    np.testing.assert_allclose(per_category.select(CURVES).to_numpy().reshape(want.shape[:3]), want.mean(axis=-1),
                               rtol=0, atol=1e-12, err_msg=where)
    overall = result.ap_frame("overall").select(CURVES).to_numpy()  # [A, curve]: MATLAB's mean(mean(ps, 3), 2)
    np.testing.assert_allclose(overall, ps.mean(axis=2).mean(axis=1).T, rtol=0, atol=1e-12, err_msg=where)
    names = np.array([result.categories.get_column("supercategory").to_list()])[0]
    for row in result.ap_frame("supercategory").iter_rows(named=True):
        a = list(result.area_ranges).index(row["area_range"])
        members = ps[:, :, names == row["supercategory"], a].mean(axis=2).mean(axis=1)
        np.testing.assert_allclose([row[c] for c in CURVES], members, rtol=0, atol=1e-12, err_msg=where)


def test_bundled_sample_equals_matlab_analyze():
    gt_path = PACKAGE_DATA / "instances_val2014_100.json"
    dt_path = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
    cat_ids, ps = matlab_analyze(json.loads(gt_path.read_text()), json.loads(dt_path.read_text()))
    result = api.analyze((gt_path, dt_path), n_shards=3).result
    _assert_equal(result, cat_ids, ps, "val2014 sample")
    overall = result.ap_frame("overall").row(0, named=True)  # area all
    assert [round(overall[c], 3) for c in CURVES] == [0.501, 0.61, 0.613, 0.624, 0.677, 0.677, 1.0]


@pytest.mark.parametrize("batch", range(BATCHES))
def test_random_datasets_equal_matlab_analyze(tmp_path, batch):
    for seed in range(batch * DATASETS // BATCHES, (batch + 1) * DATASETS // BATCHES):
        gt, dt = random_dataset(seed)
        folder = tmp_path / str(seed)
        folder.mkdir()
        paths = write_inputs(folder, gt, dt)
        cat_ids, ps = matlab_analyze(json.loads(paths[0].read_text()), json.loads(paths[1].read_text()))
        _assert_equal(api.analyze(paths, n_shards=1 + seed % 3).result, cat_ids, ps, f"seed {seed}")


def test_other_area_ranges_and_recall_thresholds_equal_matlab_analyze(tmp_path):
    """``analyze`` keeps ``params.areaRng`` and ``params.recThrs``; so does the protocol (its table has its own key)."""
    protocol = api.AnalyzeProtocol(area_ranges=(("all", 0, 1e10), ("tiny", 0, 400), ("big", 400, 1e10)),
                                   recall_thresholds=(0.0, 0.25, 0.5, 0.75, 1.0))
    assert protocol.match_key() != "analyze" == api.AnalyzeProtocol().match_key()
    for seed in range(200, 210):
        gt, dt = random_dataset(seed)
        folder = tmp_path / str(seed)
        folder.mkdir()
        cat_ids, ps = matlab_analyze(gt, dt, protocol.area_ranges, protocol.recall_thresholds)
        result = api.analyze(write_inputs(folder, gt, dt), protocol=protocol).result
        assert result.precision.shape[1:] == (3, 7, 5)
        _assert_equal(result, cat_ids, ps, f"seed {seed}")
