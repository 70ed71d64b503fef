"""Groups of one shard's sorted ground truths and detections (an image, or an image and a category), and the
chunks in which their similarity blocks are computed and assigned."""

import numba
import numpy as np

from evalengine.numeric import counting_order

MAX_BLOCK_CELLS = 1 << 22  # similarity values held at once per shard task (32 MiB of float64)


@numba.njit(cache=True, nogil=True)
def merge_groups(gt_key, gt_subkey, dt_key, dt_subkey, use_subkey):
    """(gt_start, gt_len, dt_start, dt_len) of every group present on either side; a group is a run of equal key
    (and subkey, with ``use_subkey``), both sides sorted by (key, subkey)."""
    n_gt, n_dt = gt_key.shape[0], dt_key.shape[0]
    out = np.empty((n_gt + n_dt, 4), np.int64)
    i = j = n = 0
    while i < n_gt or j < n_dt:
        if j == n_dt:
            side = -1
        elif i == n_gt:
            side = 1
        else:
            side = 0
            if gt_key[i] != dt_key[j]:
                side = -1 if gt_key[i] < dt_key[j] else 1
            elif use_subkey and gt_subkey[i] != dt_subkey[j]:
                side = -1 if gt_subkey[i] < dt_subkey[j] else 1
        i0, j0 = i, j
        if side <= 0:
            while i < n_gt and gt_key[i] == gt_key[i0] and (not use_subkey or gt_subkey[i] == gt_subkey[i0]):
                i += 1
        if side >= 0:
            while j < n_dt and dt_key[j] == dt_key[j0] and (not use_subkey or dt_subkey[j] == dt_subkey[j0]):
                j += 1
        out[n, 0], out[n, 1], out[n, 2], out[n, 3] = i0, i - i0, j0, j - j0
        n += 1
    return out[:n]


@numba.njit(cache=True, nogil=True)
def rank_in_group(image, category):
    """0-based position of each row within its run of equal (image, category) in sorted arrays."""
    out = np.empty(image.shape[0], np.int64)
    for i in range(image.shape[0]):
        same = i and image[i] == image[i - 1] and category[i] == category[i - 1]
        out[i] = out[i - 1] + 1 if same else 0
    return out


def grouped_by(keys: np.ndarray) -> tuple:
    """:func:`counting_order` over the distinct values of ``keys``, in ascending order of value."""
    values, index = np.unique(keys, return_inverse=True)
    return counting_order(index.astype(np.int64).ravel(), values.shape[0])


def file_order_by_image(image_id: np.ndarray, det_id: np.ndarray) -> tuple:
    """``(order, starts)``: the rows in (image, det_id) order, image ``k``'s at ``order[starts[k]:starts[k + 1]]``.
    A shard's detections are stored in file order, so a stable grouping by image suffices; others are ordered by
    det_id first."""
    by_det = None if np.all(det_id[1:] > det_id[:-1]) else np.argsort(det_id)
    order, starts = grouped_by(image_id if by_det is None else image_id[by_det])
    return (order if by_det is None else by_det[order]), starts


def block_chunks(gt_len: np.ndarray, dt_len: np.ndarray, max_cells: int | None = None) -> list:
    """Contiguous group ranges ``[lo, hi)`` whose similarity blocks hold at most ``max_cells`` values together (a
    larger group gets a range of its own), so that a shard's memory does not grow with its pairs."""
    max_cells = max_cells or MAX_BLOCK_CELLS
    ends = np.cumsum(np.asarray(gt_len, np.int64) * np.asarray(dt_len, np.int64))
    chunks, lo, base = [], 0, 0
    while lo < len(ends):
        hi = max(int(np.searchsorted(ends, base + max_cells, side="right")), lo + 1)
        chunks.append((lo, hi))
        lo, base = hi, int(ends[hi - 1])
    return chunks


def warm_up() -> None:
    """Initialise numba's runtime (about 0.7 s per process, even with cached kernels) by calling a kernel once.

    The front doors run this on a background thread while they read input, to hide that latency."""
    rank_in_group(np.zeros(1, np.int64), np.zeros(1, np.int64))
