"""MATLAB's ``bwmorph(bw, 'thin', Inf)``: the two-subiteration thinning of Lam, Lee & Suen (TPAMI 1992, p. 879,
Guo & Hall's algorithm), as two 256-entry look-up tables over the 8-neighbourhood, iterated until nothing changes.

Neighbours ``x1..x8`` run counter-clockwise from east (E, NE, N, NW, W, SW, S, SE); bit ``k - 1`` of a LUT index is
``x_k``. A foreground pixel is removed in the first subiteration when G1 ∧ G2 ∧ G3 hold, in the second when
G1 ∧ G2 ∧ G3' hold; pixels outside the image are background (``bwlookup`` pads with zeros). One iteration is both
subiterations, each applied to the whole image in parallel.
"""

import numba
import numpy as np


def _luts() -> tuple[np.ndarray, np.ndarray]:
    """The removal tables of the two subiterations, from the conditions of Lam et al. (1992)."""
    bits = (np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1
    x = [None] + [bits[:, k] for k in range(8)] + [bits[:, 0]]  # x[1..8], x[9] = x1
    g1 = sum((1 - x[2 * i - 1]) & (x[2 * i] | x[2 * i + 1]) for i in range(1, 5)) == 1
    n1 = sum(x[2 * k - 1] | x[2 * k] for k in range(1, 5))
    n2 = sum(x[2 * k] | x[2 * k + 1] for k in range(1, 5))
    g2 = (np.minimum(n1, n2) >= 2) & (np.minimum(n1, n2) <= 3)
    g3 = ((x[2] | x[3] | (1 - x[8])) & x[1]) == 0
    g3p = ((x[6] | x[7] | (1 - x[4])) & x[5]) == 0
    return g1 & g2 & g3, g1 & g2 & g3p


REMOVE_FIRST, REMOVE_SECOND = _luts()

# (dy, dx) of x1..x8
_NEIGHBOURS = np.array([[0, 1], [-1, 1], [-1, 0], [-1, -1], [0, -1], [1, -1], [1, 0], [1, 1]], np.int64)


@numba.njit(cache=True, nogil=True)
def _subiteration(img, remove, ys, xs, n):
    """Remove, in parallel, the foreground pixels ``(ys[:n], xs[:n])`` whose neighbourhood ``remove`` marks; the
    survivors are compacted in place. Returns (survivors, removed)."""
    h, w = img.shape
    gone = np.zeros(n, np.bool_)
    for p in range(n):
        y, x = ys[p], xs[p]
        index = 0
        for k in range(8):
            yy, xx = y + _NEIGHBOURS[k, 0], x + _NEIGHBOURS[k, 1]
            if 0 <= yy < h and 0 <= xx < w and img[yy, xx]:
                index |= 1 << k
        gone[p] = remove[index]
    kept, removed = 0, 0
    for p in range(n):
        if gone[p]:
            img[ys[p], xs[p]] = False
            removed += 1
        else:
            ys[kept], xs[kept] = ys[p], xs[p]
            kept += 1
    return kept, removed


@numba.njit(cache=True, nogil=True)
def _thin(img, first, second):
    ys, xs = np.nonzero(img)
    ys, xs = ys.astype(np.int64), xs.astype(np.int64)
    n = ys.size
    while True:
        n, removed1 = _subiteration(img, first, ys, xs, n)
        n, removed2 = _subiteration(img, second, ys, xs, n)
        if removed1 + removed2 == 0:
            return img


def thin(bw: np.ndarray) -> np.ndarray:
    """``bwmorph(bw, 'thin', Inf)`` of a 2-D boolean image (a new array)."""
    return _thin(np.array(bw, dtype=np.bool_, copy=True), REMOVE_FIRST, REMOVE_SECOND)
