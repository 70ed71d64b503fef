"""``bwmorph(…, 'thin', Inf)``: hand-checked shapes, and scikit-image's ``thin`` (the same Lam–Lee–Suen tables,
iterated to convergence with zero padding) on random images."""

import numpy as np
import pytest
from scipy import ndimage
from skimage.morphology import thin as skimage_thin

from evalengine.geometry.thinning import REMOVE_FIRST, REMOVE_SECOND, thin


def test_bar_thins_to_its_middle_line():
    bar = np.zeros((5, 9), bool)
    bar[1:4, 1:8] = True
    expected = np.zeros((5, 9), bool)
    expected[2, 2:7] = True
    assert np.array_equal(thin(bar), expected)


def test_square_thins_to_a_point_and_lines_stay():
    square = np.ones((3, 3), bool)
    assert np.argwhere(thin(square)).tolist() == [[1, 1]]
    line = np.eye(6, dtype=bool) | np.eye(6, k=1, dtype=bool)[::-1]
    once = thin(line)
    assert np.array_equal(thin(once), once) and not (once & ~line).any()
    diagonal = np.eye(7, dtype=bool)
    assert np.array_equal(thin(diagonal), diagonal)


def test_tables_remove_isolated_and_end_pixels_never():
    # an isolated pixel (index 0) and the end of a horizontal line (only x1 = E set) survive both subiterations
    assert not REMOVE_FIRST[0] and not REMOVE_SECOND[0]
    assert not REMOVE_FIRST[1] and not REMOVE_SECOND[1]
    assert REMOVE_FIRST.sum() > 0 and REMOVE_SECOND.sum() > 0


@pytest.mark.parametrize("seed", range(4))
def test_equals_scikit_image(seed):
    rng = np.random.default_rng(seed)
    for _ in range(60):
        h, w = rng.integers(1, 48, 2)
        image = rng.random((h, w)) < rng.uniform(0.1, 0.9)
        if rng.random() < 0.5:
            image = ndimage.binary_dilation(image, iterations=int(rng.integers(1, 4)))
        assert np.array_equal(thin(image), skimage_thin(image))
