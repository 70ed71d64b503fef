"""The OpenImages protocol against a transcription of the TF evaluator (tests/openimages_reference.py) on random
datasets: group-of boxes (nested and overlapping), difficult boxes, verified and unverified classes, images with
labels only, equal scores, scores at or below −10 and at 0, invalid boxes, empty classes, several shards; AP per class
and mAP to 1e-12, challenge and V2 modes and group-of weights; CorLoc per class and its mean (``evaluate_corlocs``) to
1e-12 on the same datasets (box and mask modes)."""

import numpy as np
import pytest

from evalengine.match.openimages import OpenImagesProtocol
from tests import openimages_reference
from tests.openimages_cases import evaluate

N_DATASETS = 120


def _boxes(rng, n, grid):
    """``[ymin, xmin, ymax, xmax]`` on a coarse grid (exact ties in IoU) or continuous."""
    if grid:
        lo = rng.integers(0, 8, size=(n, 2)) / 10
        size = rng.integers(1, 6, size=(n, 2)) / 10
    else:
        lo = rng.random((n, 2)) * 0.7
        size = rng.random((n, 2)) * 0.4 + 0.01
    return np.concatenate([lo, np.minimum(lo + size, 1.0)], axis=1)


def _near(rng, boxes, n):
    """Detections near ground-truth boxes (true positives, duplicates, boxes inside group-of boxes)."""
    picked = boxes[rng.integers(0, len(boxes), n)]
    jitter = rng.normal(0, 0.04, size=(n, 4)) * rng.integers(0, 2, size=(n, 1))
    out = np.clip(picked + jitter, 0, 1)
    return out


def random_dataset(seed):
    rng = np.random.default_rng(seed)
    n_classes = int(rng.integers(1, 6))
    grid = bool(rng.integers(0, 2))
    groundtruth, detections = [], []
    for i in range(int(rng.integers(1, 9))):
        key = f"img{rng.integers(0, 10**6):06d}_{i}"
        n_gt = int(rng.integers(0, 7))
        gt_boxes = _boxes(rng, n_gt, grid)
        gt = {"image_key": key, "groundtruth_boxes": gt_boxes,
              "groundtruth_classes": rng.integers(1, n_classes + 1, n_gt),
              "groundtruth_group_of": rng.random(n_gt) < 0.3,
              "groundtruth_difficult": rng.random(n_gt) < 0.15,
              "groundtruth_image_classes": rng.choice(np.arange(1, n_classes + 1), int(rng.integers(0, n_classes + 1)),
                                                      replace=False)}
        if rng.random() < 0.9:
            groundtruth.append(gt)
        n_dt = int(rng.integers(0, 12))
        boxes = _boxes(rng, n_dt, grid)
        if n_gt and n_dt:
            near = rng.random(n_dt) < 0.6
            boxes[near] = _near(rng, gt_boxes, int(near.sum()))
        if n_dt and rng.random() < 0.2:  # invalid boxes are dropped
            boxes[0, 2] = boxes[0, 0]
        scores = rng.random(n_dt)
        if rng.random() < 0.5:
            scores = np.round(scores * 4) / 4  # equal scores, and 0
        if n_dt and rng.random() < 0.1:
            scores[-1] = -10.0 - rng.integers(0, 2)
        if rng.random() < 0.9:
            detections.append({"image_key": key, "detection_boxes": boxes, "detection_scores": scores,
                               "detection_classes": rng.integers(1, n_classes + 1, n_dt)})
    return n_classes, groundtruth, detections


@pytest.mark.parametrize("seed", range(N_DATASETS))
def test_against_tf_evaluator(tmp_path, seed):
    n_classes, groundtruth, detections = random_dataset(seed)
    if not groundtruth:
        groundtruth = [{"image_key": "only", "groundtruth_boxes": np.zeros((0, 4)), "groundtruth_classes": np.zeros(0, int)}]
    challenge = seed % 3 != 0
    weight = [1.0, 0.5, 0.0][seed % 3] if challenge else 0.0
    protocol = OpenImagesProtocol(group_of_weight=weight, verified_labels=challenge)
    # the reference adds ground truth first, then detections in the order the store numbers images
    (expected_ap, expected_map), expected_corloc = openimages_reference.evaluate(
        n_classes, groundtruth, detections, challenge, weight=weight, corloc=True)
    evaluation = evaluate(tmp_path / "s", n_classes, groundtruth, detections, protocol, n_shards=1 + seed % 3)
    result = evaluation.accumulate()
    np.testing.assert_allclose(result.ap, expected_ap, rtol=0, atol=1e-12, equal_nan=True)
    if np.isnan(expected_map):
        assert np.isnan(result.mean_ap)
    else:
        assert result.mean_ap == pytest.approx(expected_map, abs=1e-12)
    _assert_corloc(evaluation, expected_corloc)


def _assert_corloc(evaluation, expected):
    """CorLoc per class and its mean (``evaluate_corlocs``) equal the reference's."""
    np.testing.assert_allclose(evaluation.cor_loc().get_column("corloc").to_numpy(), expected[0], rtol=0, atol=1e-12,
                               equal_nan=True)
    mean = evaluation.mean_cor_loc()
    assert (np.isnan(mean) and np.isnan(expected[1])) or mean == pytest.approx(expected[1], abs=1e-12)


def _random_masks(rng, boxes, h, w, empty_rate):
    """A mask per box on an ``h × w`` raster: roughly the box, some pixels dropped; some empty."""
    masks = np.zeros((len(boxes), h, w), np.uint8)
    for i, (y1, x1, y2, x2) in enumerate(boxes):
        if rng.random() < empty_rate:
            continue
        masks[i, int(y1 * h):max(int(np.ceil(y2 * h)), int(y1 * h) + 1), int(x1 * w):max(int(np.ceil(x2 * w)), int(x1 * w) + 1)] = 1
        masks[i] &= (rng.random((h, w)) < 0.85).astype(np.uint8)
    return masks


@pytest.mark.parametrize("seed", range(40))
def test_masks_against_tf_evaluator(tmp_path, seed):
    """The instance-segmentation mode: masks of one size per dataset, ground truth without masks (box rounds)."""
    n_classes, groundtruth, detections = random_dataset(1000 + seed)
    rng = np.random.default_rng(seed)
    h, w = int(rng.integers(3, 9)), int(rng.integers(3, 9))
    for g in groundtruth:
        g["groundtruth_instance_masks"] = _random_masks(rng, np.asarray(g["groundtruth_boxes"]).reshape(-1, 4), h, w, 0.3)
    for d in detections:
        d["detection_masks"] = _random_masks(rng, np.asarray(d["detection_boxes"]).reshape(-1, 4), h, w, 0.05)
        d["detection_scores"] = np.maximum(d["detection_scores"], -5.0)  # the mask mode fails on dropped scores
    if not groundtruth or not detections:
        return  # (a run of no predictions has no mask columns: not evaluable under segm, see the README)
    weight = [1.0, 0.0][seed % 2]
    protocol = OpenImagesProtocol(group_of_weight=weight, iou_type="segm")
    (expected_ap, expected_map), expected_corloc = openimages_reference.evaluate(
        n_classes, groundtruth, detections, True, weight=weight, corloc=True)
    evaluation = evaluate(tmp_path / "s", n_classes, groundtruth, detections, protocol, n_shards=1 + seed % 2)
    result = evaluation.accumulate()
    np.testing.assert_allclose(result.ap, expected_ap, rtol=0, atol=1e-12, equal_nan=True)
    if not np.isnan(expected_map):
        assert result.mean_ap == pytest.approx(expected_map, abs=1e-12)
    _assert_corloc(evaluation, expected_corloc)
