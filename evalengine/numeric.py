"""Kernels below every layer: NumPy's floating-point summation order, for kernels whose sums must equal a
reference's ``np.sum`` to the bit (pycocotools' ``computeOks``, the LRP code's localisation error), and a stable
counting sort (rows grouped by a small index: shards, categories, images)."""

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def _block_sum(values, lo, n):
    """NumPy's sum of at most 128 values: sequential below 8, else 8 accumulators combined pairwise, then the rest."""
    if n < 8:
        total = 0.0
        for i in range(lo, lo + n):
            total += values[i]
        return total
    r = values[lo:lo + 8].copy()
    i = 8
    while i < n - n % 8:
        for j in range(8):
            r[j] += values[lo + i + j]
        i += 8
    total = ((r[0] + r[1]) + (r[2] + r[3])) + ((r[4] + r[5]) + (r[6] + r[7]))
    for i in range(i, n):
        total += values[lo + i]
    return total


@numba.njit(cache=True, nogil=True)
def pairwise_sum(values, lo, n):
    """``np.sum(values[lo:lo + n])`` float for float: NumPy's pairwise summation (blocks of at most 128, halves
    rounded down to a multiple of 8 above), walked with an explicit stack (numba's cache does not keep recursion)."""
    tasks = np.empty((128, 3), np.int64)  # (lo, n, halves combined?) — the depth is log2(n / 128)
    sums = np.empty(128)
    n_tasks, n_sums = 1, 0
    tasks[0, 0], tasks[0, 1], tasks[0, 2] = lo, n, 0
    while n_tasks:
        n_tasks -= 1
        at, size, combine = tasks[n_tasks, 0], tasks[n_tasks, 1], tasks[n_tasks, 2]
        if combine:
            n_sums -= 1
            sums[n_sums - 1] = sums[n_sums - 1] + sums[n_sums]
        elif size <= 128:
            sums[n_sums] = _block_sum(values, at, size)
            n_sums += 1
        else:
            half = size // 2
            half -= half % 8
            tasks[n_tasks, 0], tasks[n_tasks, 1], tasks[n_tasks, 2] = at, size, 1
            tasks[n_tasks + 1, 0], tasks[n_tasks + 1, 1], tasks[n_tasks + 1, 2] = at + half, size - half, 0
            tasks[n_tasks + 2, 0], tasks[n_tasks + 2, 1], tasks[n_tasks + 2, 2] = at, half, 0
            n_tasks += 3
    return sums[0]


@numba.njit(cache=True, nogil=True)
def counting_order(index, n_groups):
    """``(order, starts)``: the rows grouped by ``index`` (0 … n_groups − 1, ascending), each group in row order (a
    stable counting sort); group ``k`` is ``order[starts[k]:starts[k + 1]]``."""
    counts = np.zeros(n_groups + 1, np.int64)
    for i in index:
        counts[i + 1] += 1
    starts = np.cumsum(counts)
    fill = starts[:-1].copy()
    order = np.empty(index.shape[0], np.int64)
    for i in range(index.shape[0]):
        order[fill[index[i]]] = i
        fill[index[i]] += 1
    return order, starts
