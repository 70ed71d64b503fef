"""The SQL views over the match tables of masks, boundaries and keypoints: ``protocols.iou_type``, and ``ap`` and
``coco_summary`` over every COCO table of a store (12 numbers; keypoints: pycocotools' 10) equal the Python metrics to
1e-12, on the cocoapi fake results, faster-coco-eval's keypoints case and random mask and keypoint datasets."""

import numpy as np
import pytest

from evalengine.api import ingest_coco
from evalengine.match.coco import CocoProtocol
from tests.conftest import DATA, SAMPLE_GT
from tests.helpers import write_inputs
from tests.shape_generators import random_keypoints, random_masks

KEYS = ["category_id", "iou_threshold", "area_range", "max_dets"]
KEYPOINT_METRICS = ["AP", "AP50", "AP75", "APm", "APl", "AR", "AR50", "AR75", "ARm", "ARl"]


def _assert_views_equal_python(store, evaluations: dict) -> None:
    """Per table: the protocols row's iou_type, the ``ap`` rows and the ``coco_summary`` rows against Python."""
    protocols = store.sql("SELECT protocol, run, iou_type FROM protocols ORDER BY protocol")
    assert {(row["protocol"], row["iou_type"]) for row in protocols.iter_rows(named=True)} == {
        (protocol.match_key(), protocol.iou_type) for protocol in evaluations}
    for protocol, evaluation in evaluations.items():
        key = protocol.match_key()
        summary = store.sql(f"SELECT * FROM coco_summary WHERE protocol = '{key}' AND run = 'default'")
        assert summary.columns == ["run", "protocol", "iou_type", "metric", "value"]
        assert set(summary["iou_type"]) == {protocol.iou_type}
        assert summary["metric"].to_list() == evaluation.summary()["metric"].to_list()
        np.testing.assert_allclose(summary["value"].to_numpy(), evaluation.stats(), rtol=0, atol=1e-12)
        view = store.sql(f"SELECT * FROM ap WHERE protocol = '{key}' AND run = 'default'").sort(KEYS)
        table = evaluation.ap_table().sort(KEYS)
        assert set(view["iou_type"]) == {protocol.iou_type}
        assert view.select(KEYS).equals(table.select(KEYS))
        np.testing.assert_allclose(view["ap"].to_numpy(), table["ap"].to_numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(view["recall"].to_numpy(), table["recall"].to_numpy(), rtol=0, atol=1e-12)


def test_bbox_segm_and_boundary_tables_of_one_store(tmp_path):
    store = ingest_coco(SAMPLE_GT, DATA / "cocoapi_fakesegm100_dt.json", tmp_path / "store", n_shards=3)
    evaluations = {protocol: store.evaluate(protocol) for protocol in (
        CocoProtocol(), CocoProtocol(iou_type="segm"), CocoProtocol(iou_type="boundary"),
        CocoProtocol(iou_type="segm", iou_thresholds=(0.5, 0.75), max_dets=(1, 5, 100)))}
    _assert_views_equal_python(store, evaluations)
    segm = store.sql("SELECT value FROM coco_summary WHERE iou_type = 'segm' AND protocol = '"
                     f"{CocoProtocol(iou_type='segm').match_key()}' AND metric = 'AP'").item()
    assert segm == pytest.approx(0.3195452758576433, abs=1e-12)  # pycocotools' segm AP of the cocoapi fake results


def test_keypoint_summary_has_the_ten_numbers(tmp_path):
    store = ingest_coco(DATA / "fce_keypoints_gt.json", DATA / "fce_keypoints_dt.json", tmp_path / "store")
    protocol = CocoProtocol(iou_type="keypoints")
    evaluation = store.evaluate(protocol)
    _assert_views_equal_python(store, {protocol: evaluation})
    summary = store.sql("SELECT metric FROM coco_summary")
    assert summary["metric"].to_list() == KEYPOINT_METRICS


@pytest.mark.parametrize("seed", range(8))
def test_random_masks_and_keypoints(tmp_path, seed):
    gt, dt = random_masks(seed)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt, ("gt_m.json", "dt_m.json")), tmp_path / "masks", n_shards=1 + seed % 3)
    _assert_views_equal_python(store, {p: store.evaluate(p) for p in (
        CocoProtocol(iou_type="segm"), CocoProtocol(iou_type="segm", use_cats=False))})
    gt, dt = random_keypoints(seed)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt, ("gt_k.json", "dt_k.json")), tmp_path / "keypoints", n_shards=1 + seed % 3)
    _assert_views_equal_python(store, {p: store.evaluate(p) for p in (
        CocoProtocol(iou_type="keypoints"),
        CocoProtocol(iou_type="keypoints", use_cats=False, kpt_use_cats_quirk=False))})
