"""Boundary IoU equals the authors' boundary-iou-api (Cheng et al. 2021): their ``mask_to_boundary`` (cv2 erosion of
the zero-padded mask) and ``computeBoundaryIoU`` (pycocotools IoU of masks and of boundaries, the smaller for a
regular ground truth, the mask's for a crowd one) are transcribed here and compared exactly on random masks."""

import cv2
import numpy as np
from pycocotools import mask as mask_utils

from evalengine.geometry.boundary import boundaries, boundary_iou, dilation
from evalengine.io import rle


def mask_to_boundary(mask, dilation_ratio=0.02):
    """boundary_iou/utils/boundary_utils.py, verbatim."""
    h, w = mask.shape
    img_diag = np.sqrt(h ** 2 + w ** 2)
    dilation = int(round(dilation_ratio * img_diag))  # noqa: RUF046
    if dilation < 1:  # noqa: PLR1730
        dilation = 1
    new_mask = cv2.copyMakeBorder(mask, 1, 1, 1, 1, cv2.BORDER_CONSTANT, value=0)
    kernel = np.ones((3, 3), dtype=np.uint8)
    new_mask_erode = cv2.erode(new_mask, kernel, iterations=dilation)
    mask_erode = new_mask_erode[1: h + 1, 1: w + 1]
    return mask - mask_erode


def encode(masks):
    return [mask_utils.encode(np.asfortranarray(m[:, :, None]))[0] for m in masks]


def compute_boundary_iou(dt_masks, gt_masks, iscrowd):
    """boundary_iou/coco_instance_api/cocoeval.py ``computeBoundaryIoU`` on decoded masks."""
    d_m, g_m = encode(dt_masks), encode(gt_masks)
    d_b, g_b = encode([mask_to_boundary(m) for m in dt_masks]), encode([mask_to_boundary(m) for m in gt_masks])
    mask_ious = np.array(mask_utils.iou(d_m, g_m, iscrowd))
    boundary_ious = np.array(mask_utils.iou(d_b, g_b, iscrowd))
    iscrowd = np.array(iscrowd)
    ious = mask_ious
    if len(gt_masks) and len(dt_masks):
        ious[:, iscrowd == 0] = np.minimum(mask_ious[:, iscrowd == 0], boundary_ious[:, iscrowd == 0])
    return ious


def _random_mask(rng, h, w):
    mask = np.zeros((h, w), np.uint8)
    kind = rng.integers(0, 9)
    if kind == 1:
        mask[:] = 1
    elif kind == 2:
        mask[rng.integers(0, h), rng.integers(0, w)] = 1
    elif kind >= 3:
        for _ in range(rng.integers(1, 4)):  # blobs: ellipses and rectangles, some cut by the border
            cy, cx = rng.uniform(-0.2, 1.2) * h, rng.uniform(-0.2, 1.2) * w
            ry, rx = rng.uniform(0.5, 0.6 * h + 1), rng.uniform(0.5, 0.6 * w + 1)
            yy, xx = np.mgrid[:h, :w]
            shape = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1 if kind % 2 else (
                (abs(yy - cy) <= ry) & (abs(xx - cx) <= rx))
            mask[shape] = 1 if rng.random() < 0.8 else 0
        if kind == 8:
            mask &= (rng.random((h, w)) < 0.9).astype(np.uint8)
    return mask


def _sizes(rng, n):
    """Image sizes giving dilations 1 to ~6, the half-way diagonals (2.5 rounds to 2, 3.5 to 4), strips and images no
    taller or wider than twice the dilation."""
    fixed = [(75, 100), (105, 140), (1, 60), (60, 1), (3, 250), (200, 4), (1, 1), (2, 2)]
    return fixed + [tuple(rng.integers(1, 220, 2)) for _ in range(n)]


def _layout(masks, h, w):
    counts, offsets = rle.decode_strings([e["counts"] for e in encode(masks)])
    return counts, offsets, np.full(len(masks), h), np.full(len(masks), w)


def test_dilation_rounds_half_to_even_as_the_authors():
    assert dilation([75, 105, 30, 21, 1], [100, 140, 40, 28, 1]).tolist() == [2, 4, 1, 1, 1]
    assert dilation([480, 427], [640, 640]).tolist() == [16, 15]


def test_boundary_bands_equal_the_authors():
    rng = np.random.default_rng(21)
    for h, w in _sizes(rng, 60):
        masks = [_random_mask(rng, h, w) for _ in range(6)]
        counts, offsets, hs, ws = _layout(masks, h, w)
        got = rle.encode_strings(*boundaries(counts, offsets, hs, ws))
        want = [e["counts"].decode() for e in encode([mask_to_boundary(m) for m in masks])]
        assert got == want, (h, w)


def test_boundary_iou_equals_the_authors_with_crowd():
    rng = np.random.default_rng(8)
    for h, w in _sizes(rng, 40):
        dt = [_random_mask(rng, h, w) for _ in range(rng.integers(1, 7))]
        gt = [_random_mask(rng, h, w) for _ in range(rng.integers(1, 5))]
        crowd = (rng.random(len(gt)) < 0.3).astype(np.uint8).tolist()
        got = boundary_iou(_layout(dt, h, w), _layout(gt, h, w), crowd)
        np.testing.assert_array_equal(got, compute_boundary_iou(dt, gt, crowd))
