"""F̃b counts over run lengths (:mod:`evalengine.geometry.mask_boundary`) equal the dense
:func:`~evalengine.geometry.boundary_pr.morph_boundary_counts` (DAVIS ``db_eval_boundary``) exactly, pair by pair:
random blobs with holes, rectangles, masks touching the border, 1-pixel, empty and full masks, thin strips, images
down to 1 pixel high, the default tolerance and pixel radii."""

import numpy as np
import pytest
from pycocotools import mask as mask_utils

from evalengine.geometry.boundary_pr import morph_boundary_counts, morph_precision_recall
from evalengine.geometry.mask_boundary import boundary_count_blocks, mask_boundaries
from evalengine.geometry.masks import spans
from evalengine.io import rle


def _random_masks(rng, n, h, w):
    """Blobs with holes, rectangles (some on the border), 1-pixel, empty, full masks, strips and noise."""
    masks = np.zeros((n, h, w), np.bool_)
    yy, xx = np.mgrid[:h, :w]
    for i in range(n):
        kind = rng.integers(0, 9)
        if kind == 0:
            continue
        if kind == 1:
            masks[i] = True
        elif kind == 2:
            masks[i, rng.integers(0, h), rng.integers(0, w)] = True
        elif kind == 3:  # a band along a border
            side = rng.integers(0, 4)
            k = rng.integers(1, max(2, min(h, w)))
            masks[i, :k] = side == 0
            masks[i, -k:] |= side == 1
            masks[i, :, :k] |= side == 2
            masks[i, :, -k:] |= side == 3
        elif kind == 4:  # a thin strip
            masks[i, :, rng.integers(0, w)] = True
        elif kind == 5:
            masks[i] = rng.random((h, w)) < rng.uniform(0.1, 0.9)
        else:  # an ellipse, with a hole now and then
            cy, cx = rng.uniform(-2, h + 2), rng.uniform(-2, w + 2)
            ry, rx = rng.uniform(0.5, h), rng.uniform(0.5, w)
            d = ((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2
            masks[i] = d <= 1
            if kind == 8:
                masks[i] &= d > rng.uniform(0.05, 0.5)
    return masks


def _sides(masks, tolerance):
    n, h, w = masks.shape
    encoded = mask_utils.encode(np.asfortranarray(masks.transpose(1, 2, 0).astype(np.uint8)))
    counts, offsets = rle.decode_strings([e["counts"] for e in encoded])
    return mask_boundaries(counts, spans(offsets), np.full(n, h), np.full(n, w), tolerance)


def _counts(dt_masks, gt_masks, tolerance):
    m, n = len(dt_masks), len(gt_masks)
    one = np.zeros(1, np.int64)
    counts, offsets = boundary_count_blocks(_sides(dt_masks, tolerance), _sides(gt_masks, tolerance), one,
                                            np.full(1, n), one, np.full(1, m), 0, 1)
    assert offsets.tolist() == [0, m * n]
    return counts.reshape(m, n, 4)


@pytest.mark.parametrize("tolerance", [0.008, 0.03, 1.0, 2.5, 4.0])
def test_counts_equal_dense_morph_boundary_counts(tolerance):
    rng = np.random.default_rng(int(tolerance * 1000))
    pairs = 0
    for _ in range(12):
        h, w = (int(v) for v in rng.integers(1, 60, 2))
        dt, gt = _random_masks(rng, int(rng.integers(1, 7)), h, w), _random_masks(rng, int(rng.integers(1, 7)), h, w)
        got = _counts(dt, gt, tolerance)
        for d in range(len(dt)):
            for g in range(len(gt)):
                want = morph_boundary_counts(dt[d], gt[g], tolerance)
                np.testing.assert_array_equal(got[d, g], want, err_msg=f"{h}x{w} pair {d},{g}")
                pairs += 1
    assert pairs > 100


def test_large_radius_and_big_images():
    """0.8 % of the diagonal of a 700 × 500 image is a radius of 7; 5 % one of 43."""
    rng = np.random.default_rng(7)
    for tolerance in (0.008, 0.05):
        dt, gt = _random_masks(rng, 4, 700, 500), _random_masks(rng, 4, 700, 500)
        got = _counts(dt, gt, tolerance)
        for d in range(4):
            for g in range(4):
                np.testing.assert_array_equal(got[d, g], morph_boundary_counts(dt[d], gt[g], tolerance))


def test_edge_cases_by_hand():
    """A 1-pixel mask has the pixel and its west, north and north-west neighbours as boundary (``seg2bmap``); an
    empty or full mask has none (F̃b 1 against another such, DAVIS's rule)."""
    h, w = 5, 6
    one = np.zeros((1, h, w), np.bool_)
    one[0, 2, 3] = True
    empty, full = np.zeros((1, h, w), np.bool_), np.ones((1, h, w), np.bool_)
    assert _sides(one, 1.0)[4].tolist() == [4]
    counts = _counts(np.concatenate([one, empty, full]), np.concatenate([one, empty, full]), 1.0)
    assert counts[0, 0].tolist() == [4, 4, 4, 4]
    assert counts[1, 2].tolist() == [0, 0, 0, 0]
    f = morph_precision_recall(counts)[0]
    assert f[0, 0] == 1.0 and f[1, 2] == 1.0 and f[0, 1] == 0.0 and f[1, 0] == 0.0
