"""SEISM's quadtree baseline at every parameter: against a literal NumPy/SciPy transcription of
``create_quad_tree.m`` + ``griducm2seg.m`` (1-based MATLAB indexing kept), and on the BSDS500 test images against
SEISM's stored per-image results of the quadtree (``results/QuadTree``, CVPR-2013 code, 6 decimals)."""

import json
from pathlib import Path

import numpy as np
import pytest
from scipy import ndimage

from evalengine.api.segmentation import evaluate_partitions, ingest_partition_arrays
from evalengine.io.partitions import encode_partition
from evalengine.io.quadtree import QUADTREE_REGIONS, quadtree_partition

DATA = Path(__file__).resolve().parents[1] / "data" / "seism"


class _OneBased:
    """A MATLAB matrix: ``m[i, j]`` with 1-based inclusive ranges given as (first, last) pairs."""

    def __init__(self, rows, cols):
        self.a = np.zeros((rows, cols))

    def set(self, rows, cols, value):
        (r0, r1), (c0, c1) = rows, cols
        if r0 <= r1 and c0 <= c1:
            self.a[r0 - 1:r1, c0 - 1:c1] = value


def reference_quadtree(sx, sy, num_regs):
    """``create_quad_tree(sx, sy)`` then ``griducm2seg(grid_ucm, num_regs)``, statement by statement."""
    res = [sx, sy]
    bounds = [[None] * 5 for _ in range(2)]
    for ii in range(2):
        tmp = np.floor(np.linspace(1, res[ii] + 1, 33))[1:-1].astype(int)
        bounds[ii][0] = 2 * tmp - 1
        for level in range(1, 5):
            previous = bounds[ii][level - 1]
            bounds[ii][level] = previous[1:len(previous) - 1:2]  # (2:2:end-1)
    curr_max = 1
    g = _OneBased(2 * sx + 1, 2 * sy + 1)
    end_r, end_c = 2 * sx + 1, 2 * sy + 1
    for ii in range(4):
        b1, b2, b1n = bounds[0][ii], bounds[1][ii], bounds[0][ii + 1]
        for jj in range(len(b1)):
            g.set((b1[jj], b1[jj]), (2, b2[0]), curr_max)
            curr_max += 1
            for kk in range(len(b2) - 1):
                g.set((b1[jj], b1[jj]), (b2[kk] + 1, b2[kk + 1]), curr_max)
                curr_max += 1
            g.set((b1[jj], b1[jj]), (b2[-1] + 1, end_c - 1), curr_max)
            curr_max += 1
        for jj in range(len(b2)):
            g.set((2, b1n[0]), (b2[jj], b2[jj]), curr_max)
            curr_max += 1
            for kk in range(len(b1n) - 1):
                g.set((b1n[kk] + 1, b1n[kk + 1]), (b2[jj], b2[jj]), curr_max)
                curr_max += 1
            g.set((b1n[-1] + 1, end_r - 1), (b2[jj], b2[jj]), curr_max)
            curr_max += 1
    r5, c5 = bounds[0][4][0], bounds[1][4][0]
    g.set((r5, r5), (2, c5), curr_max + 1)
    g.set((r5, r5), (c5 + 1, end_c), curr_max + 2)
    g.set((2, end_r), (c5, c5), curr_max + 3)
    a = g.a
    a[:, 0], a[:, -1] = a[:, 1], a[:, -2]
    a[0, :], a[-1, :] = a[1, :], a[-2, :]
    ths = np.unique(a)
    sel_th = 0 if num_regs > len(ths) else ths[len(ths) - num_regs]
    tmp = (a > sel_th).astype(int)
    tmp[0::2, 0::2] = 1
    filled, _ = ndimage.label(1 - tmp.T)  # bwlabel(., 4): SciPy's default structure is 4-connected
    return filled[1::2, 1::2].T


def same_partition(a, b) -> bool:
    first, second = encode_partition(a), encode_partition(b)
    return all(np.array_equal(x, y) for x, y in zip(first[:3], second[:3])) and first[3] == second[3]


@pytest.mark.parametrize("size", [(321, 481), (481, 321), (1, 1), (2, 3), (7, 40), (33, 65), (64, 64), (100, 37)])
def test_quadtree_equals_the_transcription(size):
    for n_regions in (1, *QUADTREE_REGIONS, 1023, 1024, 5000):
        ours = quadtree_partition(*size, n_regions, portrait=False)
        assert ours.shape == size
        assert same_partition(ours, reference_quadtree(*size, n_regions)), (size, n_regions)


def test_quadtree_region_counts_on_bsds_sizes():
    for n_regions in (*QUADTREE_REGIONS, 1024):
        assert encode_partition(quadtree_partition(321, 481, n_regions))[3] == n_regions
    assert encode_partition(quadtree_partition(321, 481, 1))[3] == 1


def test_quadtree_random_sizes():
    rng = np.random.default_rng(15)
    for _ in range(20):
        size = tuple(int(v) for v in rng.integers(1, 200, 2))
        n_regions = int(rng.choice([*QUADTREE_REGIONS, *rng.integers(1, 1100, 3)]))
        assert same_partition(quadtree_partition(*size, n_regions, portrait=False), reference_quadtree(*size, n_regions))
        rotated = np.rot90(reference_quadtree(size[1], size[0], n_regions), 1) if size[0] < size[1] else None
        assert same_partition(quadtree_partition(*size, n_regions), reference_quadtree(*size, n_regions)
                              if rotated is None else rotated)


def test_quadtree_equals_seisms_stored_baseline(tmp_path):
    """SEISM's per-image results of its quadtree at all 17 parameters (8cc8447 ``results/QuadTree``, 6 decimals) on
    six BSDS500 test images of both orientations, every measure but the random Fb."""
    results = np.load(DATA / "seism_cvpr2013_results.npz")
    assert [int(p) for p in json.loads(str(results["params"]))["QuadTree"]] == list(QUADTREE_REGIONS)
    ground_truth = np.load(DATA / "bsds500_test_gt.npz")
    ids = results["image_ids"]
    landscape = [k for k in range(ids.size) if ground_truth[str(ids[k])].shape[1] < ground_truth[str(ids[k])].shape[2]]
    chosen = [*landscape[:3], *[k for k in range(ids.size) if k not in landscape][:3]]
    parameters = [float(n) for n in QUADTREE_REGIONS]
    images = ((str(ids[k]), ground_truth[str(ids[k])],
               {"quadtree": {float(n): quadtree_partition(*ground_truth[str(ids[k])].shape[1:], n)
                             for n in QUADTREE_REGIONS}}) for k in chosen)
    store = ingest_partition_arrays(images, tmp_path / "store", {"quadtree": parameters}, n_shards=2)
    measures = ["fop", "fr", "nvoi", "pri", "sc", "ssc", "dhd", "sdhd", "bgm", "vd", "bce"]
    per_image = evaluate_partitions(store, "quadtree", measures).per_image
    order = {str(ids[k]): position for position, k in enumerate(chosen)}
    per_image = per_image.sort(per_image["file_name"].replace_strict(order), "parameter")
    for measure in measures:
        stored = results[f"QuadTree/{measure}"][:, chosen] / 1e6  # (parameter, image, [F, P, R] or value)
        columns = [measure, f"{measure}_precision", f"{measure}_recall"] if stored.shape[2] == 3 else [measure]
        ours = per_image.select(columns).to_numpy().reshape(len(chosen), len(parameters), -1).transpose(1, 0, 2)
        assert np.abs(ours - stored).max() <= 5e-7 + 1e-12, measure
