"""BSDS ``correspondPixels``: the assignment solver against scipy, the outlier models' optima against scipy on the
same graphs (dense complete model; the sparse random graph of ``match.cc``), and the match maps' contract."""

import numpy as np
import pytest
import scipy.sparse as sp
from scipy.optimize import linear_sum_assignment
from scipy.sparse.csgraph import min_weight_full_bipartite_matching

from evalengine.errors import InputError
from evalengine.geometry import correspond as C
from evalengine.geometry.assignment import assign, csr


def _random_maps(rng):
    h, w = rng.integers(2, 28, 2)
    b1 = rng.random((h, w)) < rng.uniform(0.02, 0.4)
    b2 = rng.random((h, w)) < rng.uniform(0.02, 0.4)
    return b1, b2, float(rng.uniform(0.02, 0.2)), float(rng.choice([1.5, 3.0, 100.0]))


def _graph(b1, b2, max_dist, outlier_cost):
    h, w = b1.shape
    idiag = np.sqrt(float(h * h + w * w))
    ow = int(np.ceil(outlier_cost * max_dist * idiag * C.MULTIPLIER))
    return (*C._nodes(b1, b2, C.window(max_dist * idiag)), ow)


def _pairs(m1, h):
    ys, xs = np.nonzero(m1)
    q = m1[ys, xs] - 1
    return ys, xs, q % h, q // h


def test_assign_equals_scipy_on_sparse_matrices():
    rng = np.random.default_rng(5)
    for _ in range(1500):
        n = int(rng.integers(1, 10))
        mask = rng.random((n, n)) < rng.uniform(0.2, 1)
        mask[np.arange(n), rng.permutation(n)] = True
        costs = rng.integers(0, rng.choice([3, 10, 1000]), (n, n))
        r, c = np.nonzero(mask)
        col4row = assign(*csr(n, r.astype(np.int64), c.astype(np.int64), costs[r, c].astype(np.int64)))[0]
        dense = np.where(mask, costs, 10**9)
        rr, cc = linear_sum_assignment(dense)
        assert sorted(col4row) == list(range(n))
        assert dense[np.arange(n), col4row].sum() == dense[rr, cc].sum()


def test_complete_model_optimum_equals_scipy():
    """min Σ rint(100 d) + ow · (n1 + n2 − matched): the reference's assignment with every outlier connection."""
    rng = np.random.default_rng(1)
    for _ in range(250):
        b1, b2, max_dist, outlier_cost = _random_maps(rng)
        _, _, n1, n2, edges, ow = _graph(b1, b2, max_dist, outlier_cost)
        m1, m2 = C.correspond_pixels(b1, b2, max_dist, outlier_cost, outliers="complete")
        n, h = n1 + n2, b1.shape[0]
        if n == 0:
            assert not m1.any() and not m2.any()
            continue
        dense = np.full((n, n), 10**12)
        dense[:n1, n2:] = dense[n1:, :n2] = dense[n1:, n2:] = ow
        dense[edges[:, 0], edges[:, 1]] = edges[:, 2]
        rr, cc = linear_sum_assignment(dense)
        ys, xs, y2, x2 = _pairs(m1, h)
        ours = np.rint(np.hypot(ys - y2, xs - x2) * 100).sum() + ow * (n - len(ys))
        assert ours == dense[rr, cc].sum()


def test_bsds_graph_optimum_equals_scipy():
    rng = np.random.default_rng(3)
    for _ in range(250):
        b1, b2, max_dist, outlier_cost = _random_maps(rng)
        _, _, n1, n2, edges, ow = _graph(b1, b2, max_dist, outlier_cost)
        n = n1 + n2
        if n == 0:
            continue
        seed = int(rng.integers(0, 1000))
        ptr, col, cost = C._bsds_graph(n1, n2, edges, ow, seed)
        # + 1 on every edge (the same on every perfect assignment): scipy drops explicit zeros
        matrix = sp.csr_matrix((cost + 1.0, (np.repeat(np.arange(n), np.diff(ptr)), col)), shape=(n, n))
        rr, cc = min_weight_full_bipartite_matching(matrix)
        col4row = C._solve_bsds(n1, n2, edges, ow, seed, *assign(*C._complete_graph(n1, n2, edges, ow)))
        assert sorted(col4row) == list(range(n))
        assert matrix[np.arange(n), col4row].sum() == matrix[rr, cc].sum()


def test_bsds_graph_has_the_reference_degrees():
    edges = np.array([[0, 0, 100], [1, 1, 0], [2, 1, 141]], np.int64)
    for n1, n2 in ((3, 2), (9, 12)):
        ptr, col, cost = C._bsds_graph(n1, n2, edges, 500, 7)
        d1, d2, d3 = min(6, n1 - 1), min(6, n2 - 1), min(6, n1, n2)
        assert ptr[-1] == len(edges) + d1 * n1 + d2 * n2 + d3 * max(n1, n2) + n1 + n2
        assert (cost == 500 * 100).sum() == n1 + n2 and set(cost.tolist()) == {0, 100, 141, 500, 50000}
        for i in range(n1):  # a map-1 node never reaches its own outlier at cost ow
            row = col[ptr[i]:ptr[i + 1]][cost[ptr[i]:ptr[i + 1]] == 500]
            assert len(row) == d1 and n2 + i not in row and len(set(row)) == d1


@pytest.mark.parametrize("outliers", C.OUTLIERS)
def test_match_maps_are_mutual_and_within_tolerance(outliers):
    rng = np.random.default_rng(11)
    for _ in range(60):
        b1, b2, max_dist, outlier_cost = _random_maps(rng)
        m1, m2 = C.correspond_pixels(b1, b2, max_dist, outlier_cost, outliers=outliers)
        h, w = b1.shape
        assert not (m1.astype(bool) & ~b1).any() and not (m2.astype(bool) & ~b2).any()
        ys, xs, y2, x2 = _pairs(m1, h)
        assert (m2[y2, x2] == xs * h + ys + 1).all() and len(ys) == np.count_nonzero(m2)
        assert (np.hypot(ys - y2, xs - x2) <= max_dist * np.hypot(h, w)).all()


def test_identical_maps_match_themselves():
    bmap = np.zeros((20, 30), bool)
    bmap[5, 2:25] = bmap[3:18, 12] = True
    for outliers in C.OUTLIERS:
        m1, m2 = C.correspond_pixels(bmap, bmap, outliers=outliers)
        ys, xs = np.nonzero(bmap)
        assert (m1[ys, xs] == xs * 20 + ys + 1).all() and np.array_equal(m1, m2)


def test_window_follows_match_cc():
    win = C.window(1.5)
    assert {(u, v) for u, v, _ in win} == {(u, v) for u in range(-2, 3) for v in range(-2, 3) if u * u + v * v <= 2.25}
    assert dict(((u, v), c) for u, v, c in win)[(1, 1)] == 141


def test_bad_shapes_raise_input_error():
    with pytest.raises(InputError, match="shapes"):
        C.correspond_pixels(np.zeros((3, 4)), np.zeros((4, 3)))
