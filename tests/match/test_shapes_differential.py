"""Differential tests of the segm and boundary iou types: random mask datasets (:mod:`tests.shape_generators`), every
stat and per-class value equal to pycocotools (boundary: boundary-iou-api's rules on pycocotools) at 1e-12; the
golden mask cases under boundary IoU."""

import json

import numpy as np
import pytest
from pycocotools import mask as mask_utils
from pycocotools.cocoeval import COCOeval

from evalengine.api import evaluate_coco
from evalengine.match.coco import CocoProtocol
from tests.conftest import DATA, PACKAGE_DATA
from tests.geometry.test_boundary import compute_boundary_iou
from tests.helpers import both_stats, ours
from tests.reference import pycocotools_eval
from tests.shape_generators import random_masks

SEGM = [
    CocoProtocol(iou_type="segm"),
    CocoProtocol(iou_type="segm", use_cats=False),
    CocoProtocol(iou_type="segm", max_dets=(1, 2, 5)),
    CocoProtocol(iou_type="segm", iou_thresholds=(0.1, 0.3, 0.5, 0.75, 0.9)),
    CocoProtocol(iou_type="segm", area_ranges=(("all", 0, 1e10), ("small", 0, 400), ("medium", 400, 2500),
                                               ("large", 2500, 1e10))),
]
SEEDS_PER_BATCH = 10


def check(folder, gt, dt, protocol, n_shards, seed):
    got, ref, got_pc, ref_pc = both_stats(folder, gt, dt, protocol, n_shards=n_shards)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12, err_msg=f"seed {seed}")
    assert got_pc.keys() == ref_pc.keys(), f"seed {seed}"
    for k in ref_pc:
        np.testing.assert_allclose(got_pc[k], ref_pc[k], rtol=0, atol=1e-12, err_msg=f"seed {seed} category {k}")


@pytest.mark.parametrize("batch", range(12))
def test_random_mask_datasets_equal_pycocotools(tmp_path, batch):
    for seed in range(batch * SEEDS_PER_BATCH, (batch + 1) * SEEDS_PER_BATCH):
        gt, dt = random_masks(seed)
        folder = tmp_path / str(seed)
        folder.mkdir()
        check(folder, gt, dt, SEGM[seed % len(SEGM)], 1 + seed % 3, seed)


class _BoundaryEval(COCOeval):
    """boundary-iou-api's COCOeval for ``iouType='boundary'``: pycocotools' segm evaluation with ``computeIoU`` giving
    ``computeBoundaryIoU`` (the authors' rules, :func:`tests.geometry.test_boundary.compute_boundary_iou`)."""

    def computeIoU(self, imgId, catId):
        p = self.params
        cats = [catId] if p.useCats else p.catIds
        gt = [g for c in cats for g in self._gts[imgId, c]]
        dt = [d for c in cats for d in self._dts[imgId, c]]
        if not gt and not dt:
            return []
        dt = [dt[i] for i in np.argsort([-d["score"] for d in dt], kind="mergesort")][:p.maxDets[-1]]
        masks = [[mask_utils.decode(o["segmentation"]) for o in side] for side in (dt, gt)]
        return compute_boundary_iou(*masks, [int(o["iscrowd"]) for o in gt])


@pytest.mark.parametrize("batch", range(4))
def test_random_boundary_datasets_equal_the_authors(tmp_path, batch):
    for seed in range(batch * SEEDS_PER_BATCH, (batch + 1) * SEEDS_PER_BATCH):
        gt, dt = random_masks(2000 + seed)
        protocol = CocoProtocol(iou_type="boundary", use_cats=seed % 3 != 2)
        folder = tmp_path / str(seed)
        folder.mkdir()
        got = ours(folder, gt, dt, protocol, n_shards=1 + seed % 2).stats()
        ref = pycocotools_eval(gt, dt, use_cats=protocol.use_cats, iou_type="segm", evaluator=_BoundaryEval).stats
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12, err_msg=f"seed {seed}")


@pytest.mark.parametrize("gt_path, dt_path", [
    (PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakesegm100_dt.json"),
    (DATA / "fce_dataset_gt.json", DATA / "fce_dataset_rle_nobbox_dt.json"),
    (DATA / "detectron2_gt.json", DATA / "detectron2_dt.json"),
])
def test_golden_mask_cases_under_boundary_iou_equal_the_authors(gt_path, dt_path):
    gt, dt = json.loads(gt_path.read_text()), json.loads(dt_path.read_text())
    got = evaluate_coco(gt_path, dt_path, CocoProtocol(iou_type="boundary")).stats()
    ref = pycocotools_eval(gt, dt, iou_type="segm", evaluator=_BoundaryEval).stats
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)
