"""The accumulation's arrays equal pycocotools' ``eval['precision']``, ``eval['recall']`` and ``eval['scores']`` bit for
bit on random datasets: many tied scores (within and across images), caps hit and not hit (caps above every image's
count cut nothing: computed once), categories without ground truth or without detections, crowd and ``ignore``
ground truths (ignored detections), boundary areas, and custom recall thresholds."""

import numpy as np
import pytest

from evalengine.api import ingest_coco
from evalengine.match.coco import CocoProtocol
from tests.generators import _jitter, random_coco
from tests.helpers import write_inputs
from tests.reference import pycocotools_eval

PROTOCOLS = [
    CocoProtocol(),
    CocoProtocol(max_dets=(1, 2, 3)),
    CocoProtocol(max_dets=(1, 3, 1000)),
    CocoProtocol(max_dets=(2, 5, 100), recall_thresholds=(0.0, 0.2, 0.5, 0.51, 1.0)),
    CocoProtocol(use_cats=False, max_dets=(1, 4, 50)),
    CocoProtocol(iou_thresholds=(0.1, 0.5, 0.9), area_ranges=(("all", 0, 1e10), ("small", 0, 1024),
                                                              ("odd", 500, 3000)), max_dets=(3, 20)),
]
SEEDS_PER_BATCH = 12


def crowded(seed: int):
    """``random_coco(seed)`` with, on some ground truths, a cluster of jittered detections whose scores come from a
    few values (ties within an image and across images), so that small caps cut."""
    gt, dets = random_coco(seed)
    rng = np.random.default_rng(seed + 10_000)
    levels = rng.choice([0.3, 0.5, 0.7, 0.9, 1.0], size=int(rng.integers(1, 4)), replace=False)
    for ann in gt["annotations"]:
        if rng.random() < 0.4:
            for _ in range(int(rng.integers(2, 9))):
                dets.append({"image_id": ann["image_id"], "category_id": ann["category_id"],
                             "bbox": _jitter(rng, ann["bbox"], float(rng.choice([0.03, 0.15])), 1),
                             "score": float(rng.choice(levels))})
    return gt, [dets[i] for i in rng.permutation(len(dets))]


def _compare(tmp_path, seed: int, gt: dict, dt: list, protocol: CocoProtocol) -> None:
    evaluation = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=1 + seed % 3).evaluate(
        protocol)
    acc = evaluation.accumulate(want_curve=True)
    ref = pycocotools_eval(gt, dt, use_cats=protocol.use_cats, max_dets=protocol.max_dets,
                           iou_thresholds=protocol.iou_thresholds, area_ranges=protocol.area_ranges,
                           recall_thresholds=protocol.recall_thresholds, summarize=False)
    ref_cats = list(ref.params.catIds) if protocol.use_cats else [-1]
    assert list(acc.category_ids) == ref_cats, f"seed {seed}"
    # ours [K, A, M, T(, R)], pycocotools' [T, R, K, A, M] and recall [T, K, A, M]
    np.testing.assert_array_equal(acc.precision.transpose(3, 4, 0, 1, 2), ref.eval["precision"], f"seed {seed}")
    np.testing.assert_array_equal(acc.scores.transpose(3, 4, 0, 1, 2), ref.eval["scores"], f"seed {seed}")
    np.testing.assert_array_equal(acc.recall.transpose(3, 0, 1, 2), ref.eval["recall"], f"seed {seed}")
    want_ap = np.where(ref.eval["precision"][:, 0] > -1, ref.eval["precision"].mean(axis=1), -1.0)
    np.testing.assert_allclose(acc.ap.transpose(3, 0, 1, 2), want_ap, rtol=0, atol=1e-12, err_msg=f"seed {seed}")


@pytest.mark.parametrize("batch", range(10))
def test_accumulation_arrays_equal_pycocotools(tmp_path, batch):
    for seed in range(batch * SEEDS_PER_BATCH, (batch + 1) * SEEDS_PER_BATCH):
        gt, dt = crowded(seed) if seed % 2 else random_coco(seed)
        folder = tmp_path / str(seed)
        folder.mkdir()
        _compare(folder, seed, gt, dt, PROTOCOLS[seed // 2 % len(PROTOCOLS)])
