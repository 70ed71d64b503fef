"""Differential tests of the keypoints iou type: random keypoint sets (:mod:`tests.shape_generators`), every stat
and per-class value equal to pycocotools at 1e-12; categories pooled by OKS; per-category sigmas."""

import numpy as np
import polars as pl
import pytest
from pycocotools.cocoeval import COCOeval

from evalengine.match.coco import CocoProtocol
from tests.helpers import ours
from tests.match.test_shapes_differential import SEEDS_PER_BATCH, check
from tests.reference import per_class, pycocotools_eval
from tests.shape_generators import random_keypoints

KEYPOINTS = [
    CocoProtocol(iou_type="keypoints"),
    CocoProtocol(iou_type="keypoints", use_cats=False),
    CocoProtocol(iou_type="keypoints", max_dets=(1, 2, 20)),
    CocoProtocol(iou_type="keypoints", iou_thresholds=(0.1, 0.3, 0.5, 0.75, 0.9)),
]
# a set of 5 keypoints, sigmas of another skeleton (for every category)
OTHER_SIGMAS = (0.025, 0.1, 0.05, 0.3, 0.072)


@pytest.mark.parametrize("batch", range(12))
def test_random_keypoint_sets_equal_pycocotools(tmp_path, batch):
    for seed in range(batch * SEEDS_PER_BATCH, (batch + 1) * SEEDS_PER_BATCH):
        other = seed % 5 == 4
        gt, dt = random_keypoints(seed, k=len(OTHER_SIGMAS) if other else 17)
        protocol = KEYPOINTS[seed % len(KEYPOINTS)]
        if other:
            protocol = CocoProtocol(iou_type="keypoints", use_cats=protocol.use_cats, kpt_oks_sigmas=OTHER_SIGMAS)
        folder = tmp_path / str(seed)
        folder.mkdir()
        check(folder, gt, dt, protocol, 1 + seed % 2, seed)


class _PooledOks(COCOeval):
    """pycocotools with ``computeOks`` pooling categories under ``useCats=0`` as ``computeIoU`` does (what
    ``kpt_use_cats_quirk=False`` computes)."""

    def computeOks(self, imgId, catId):
        if self.params.useCats:
            return super().computeOks(imgId, catId)
        saved = self._gts[imgId, catId], self._dts[imgId, catId]
        self._gts[imgId, catId] = [g for c in self.params.catIds for g in self._gts[imgId, c]]
        self._dts[imgId, catId] = [d for c in self.params.catIds for d in self._dts[imgId, c]]
        try:
            return super().computeOks(imgId, catId)
        finally:
            self._gts[imgId, catId], self._dts[imgId, catId] = saved


@pytest.mark.parametrize("seed", range(20))
def test_pooled_keypoints_equal_pycocotools_with_pooled_oks(tmp_path, seed):
    gt, dt = random_keypoints(1000 + seed)
    protocol = CocoProtocol(iou_type="keypoints", use_cats=False, kpt_use_cats_quirk=False)
    got = ours(tmp_path, gt, dt, protocol).stats()
    ref = pycocotools_eval(gt, dt, use_cats=False, iou_type="keypoints", evaluator=_PooledOks).stats
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12)


def _two_skeletons(seed: int) -> tuple:
    """Category 1 with COCO's 17 person keypoints, category 2 with :data:`OTHER_SIGMAS`' 5."""
    (gt, dt), (gt5, dt5) = random_keypoints(seed), random_keypoints(seed + 5000, k=len(OTHER_SIGMAS))
    n = len(gt["annotations"])
    annotations = [a for a in gt["annotations"]] + [dict(a, id=a["id"] + n, category_id=2) for a in gt5["annotations"]]
    results = [{**{k: v for k, v in r.items() if k != "bbox"}, "category_id": c}  # one result form: no boxes
               for c, part in ((1, dt), (2, dt5)) for r in part]
    images = {i["id"]: i for i in gt["images"] + gt5["images"]}
    for a in annotations[:n]:
        a["category_id"] = 1
    return ({"images": sorted(images.values(), key=lambda i: i["id"]), "annotations": annotations,
             "categories": [{"id": 1, "name": "person"}, {"id": 2, "name": "other"}]}, results)


@pytest.mark.parametrize("seed", range(15))
def test_per_category_sigmas_equal_pycocotools_per_category(tmp_path, seed):
    """Each category's values equal pycocotools run on that category alone with its sigmas."""
    gt, dt = _two_skeletons(seed)
    protocol = CocoProtocol(iou_type="keypoints", kpt_oks_sigmas={2: OTHER_SIGMAS})
    table = ours(tmp_path, gt, dt, protocol).class_metrics()
    for category, sigmas in ((1, None), (2, OTHER_SIGMAS)):
        ref = per_class(pycocotools_eval(gt, dt, iou_type="keypoints", category_ids=[category],
                                         kpt_oks_sigmas=sigmas, summarize=False))[category]
        row = table.filter(pl.col("category_id") == category).row(0, named=True)
        np.testing.assert_allclose([row["ap"], row["ap50"], row["ar"]], ref, rtol=0, atol=1e-12,
                                   err_msg=f"seed {seed} category {category}")
