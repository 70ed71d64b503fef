"""SEISM's quadtree baseline (Pont-Tuset & Marques §5.2, spec §6.2) at any number of regions, as its code makes it:

- ``create_quad_tree.m``: a contour-grid UCM (``(2h + 1) × (2w + 1)``) of the 32×32 grid whose lines sit at
  ``floor(linspace(1, dim + 1, 33))``; each contour segment gets the next value, finest level first (per level the
  row segments, split by that level's columns, then the column segments, split by the next level's rows; a later
  segment overwrites an earlier one where they cross), the two middle lines last (left half, right half, column);
- ``griducm2seg.m``: the partition of ``num_regs`` keeps the ``num_regs − 1`` highest values of ``unique(ucm)``
  (all of them, threshold 0, when ``num_regs`` exceeds the count) and labels the 4-connected pixels between them.

Its parameter list (``parameters/QuadTree.txt``) is :data:`QUADTREE_REGIONS`; 1024 gives the full 32×32 grid.
SEISM's stored baseline (``results/QuadTree`` of its CVPR-2013 commit 8cc8447) was made on the portrait size and
rotated 90° counter-clockwise for landscape images (its landscape values need ``rot90(tree(w, h))``: the middle
row then falls below row ``ceil(h/2)``); ``portrait=True`` (the default) reproduces it, ``portrait=False`` builds the
tree on the image's own size as ``create_quad_tree(h, w)`` reads.
"""

from functools import lru_cache

import numba
import numpy as np

from evalengine.errors import InputError

QUADTREE_REGIONS = (2, 3, 4, 8, 16, 20, 32, 40, 50, 64, 80, 128, 160, 256, 320, 400, 800)  # SEISM's parameters
_LEVELS = 5  # bounds{ii}{1..5}: 31, 15, 7, 3 and 1 lines a side


def quadtree_partition(height: int, width: int, n_regions: int, portrait: bool = True) -> np.ndarray:
    """The quadtree baseline's label map (``height × width``, int32) at SEISM's parameter ``n_regions``; a landscape
    image's tree is its portrait tree rotated 90° counter-clockwise unless ``portrait`` is False."""
    if height < 1 or width < 1 or n_regions < 1:
        raise InputError(f"quadtree: needs a positive size and number of regions, got {height}×{width}, {n_regions}")
    if portrait and height < width:
        return np.rot90(_quadtree(width, height, n_regions), 1)
    return _quadtree(height, width, n_regions)


def _quadtree(height: int, width: int, n_regions: int) -> np.ndarray:
    """``griducm2seg(create_quad_tree(height, width), n_regions)``."""
    grid = _quadtree_ucm(height, width)
    values = np.unique(grid)
    threshold = 0 if n_regions > values.size else values[values.size - n_regions]
    contour = grid > threshold
    return _label_pixels(contour, height, width)


@lru_cache(maxsize=8)
def _quadtree_ucm(height: int, width: int) -> np.ndarray:
    """``create_quad_tree.m``'s ``grid_ucm`` (0-based indices of its 1-based ranges; read-only, cached by size)."""
    bounds = []
    for size in (height, width):
        lines = [2 * np.floor(np.linspace(1, size + 1, 33)).astype(np.int64)[1:-1] - 1]  # 1-based grid lines
        for _ in range(_LEVELS - 1):
            lines.append(lines[-1][1:-1:2])
        bounds.append(lines)
    rows, cols = bounds
    grid = np.zeros((2 * height + 1, 2 * width + 1), np.int64)
    value = 1
    for level in range(_LEVELS - 1):
        for row in rows[level]:  # row segments, split by this level's columns
            for lo, hi in _segments(cols[level], 2 * width):
                grid[row - 1, lo:hi] = value
                value += 1
        for col in cols[level]:  # column segments, split by the next level's rows
            for lo, hi in _segments(rows[level + 1], 2 * height):
                grid[lo:hi, col - 1] = value
                value += 1
    middle_row, middle_col = rows[-1][0] - 1, cols[-1][0] - 1
    grid[middle_row, 1:middle_col + 1] = value + 1
    grid[middle_row, middle_col + 1:] = value + 2
    grid[1:, middle_col] = value + 3
    grid[:, 0], grid[:, -1] = grid[:, 1], grid[:, -2]
    grid[0, :], grid[-1, :] = grid[1, :], grid[-2, :]
    grid.flags.writeable = False
    return grid


def _segments(splits: np.ndarray, end: int) -> list:
    """0-based slices of MATLAB's ``2:s(1)``, ``s(k)+1:s(k+1)``, ``s(end)+1:end-1`` over a grid side of ``end + 1``."""
    edges = [1, *splits.tolist(), end]
    return list(zip(edges[:-1], edges[1:]))


@numba.njit(cache=True, nogil=True)
def _label_pixels(contour, height, width):
    """``bwlabel(1 − contour', 4)`` read at the pixels: a pixel joins its right (lower) neighbour unless the grid
    cell between them is a contour; components by union–find, each labelled by its root's pixel index."""
    parent = np.arange(height * width)
    for y in range(height):
        for x in range(width):
            here = y * width + x
            if x + 1 < width and not contour[2 * y + 1, 2 * x + 2]:
                _union(parent, here, here + 1)
            if y + 1 < height and not contour[2 * y + 2, 2 * x + 1]:
                _union(parent, here, here + width)
    labels = np.empty((height, width), np.int32)
    for y in range(height):
        for x in range(width):
            labels[y, x] = _root(parent, y * width + x)
    return labels


@numba.njit(cache=True, nogil=True)
def _root(parent, node):
    while parent[node] != node:
        parent[node] = parent[parent[node]]
        node = parent[node]
    return node


@numba.njit(cache=True, nogil=True)
def _union(parent, a, b):
    a, b = _root(parent, a), _root(parent, b)
    if a != b:
        parent[max(a, b)] = min(a, b)
