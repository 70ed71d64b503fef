"""BSDS ``correspondPixels`` (Martin, Fowlkes & Malik, TPAMI 2004; segbench ``match.cc``): a minimum-cost one-to-one
correspondence between the boundary pixels of two maps, with outliers.

The reference's graph, kept here: with ``idiag = √(rows² + cols²)``, ``max_dist`` and ``outlier_cost`` become
``md = max_dist · idiag`` pixels and ``oc = outlier_cost · md``. A pixel is a node when a pixel of the other map lies
within ``u² + v² ≤ md²``; each such pair is an edge of integer weight ``rint(100 · √(u² + v²))``. Every node may
instead go to an outlier at ``ow = ceil(100 · oc)``, and outliers pair among themselves at ``ow``: the reference
solves that assignment with Goldberg's CSA over a sparse random outlier graph (6 outlier connections a node, from a
clock-seeded generator), whose optimum is, but for a vanishing chance, the optimum of the complete graph, i.e.
``min Σ_matched w + ow · (n1 + n2 − matched)``. We solve that optimum exactly (an integer shortest-augmenting-path
assignment). Where several optima exist, which one CSA returns depends on its random outlier graph, so the matched
pixels (not their number, not the cost) may differ from a given MATLAB run.

The assignment is made perfect by doubling: rows are map-1 nodes and map-2 "outlier" rows, columns map-2 nodes and
map-1 "outlier" columns; node ``i`` of map 1 has its own outlier column (weight ``ow``), node ``j`` of map 2 its own
outlier row (``ow``), and each edge ``(i, j)`` (weight ``2w``) has a mirror edge (outlier row ``j``, outlier column
``i``) of weight 0, so a perfect assignment costs ``2 Σ_matched w + ow · (n1 + n2 − 2 · matched)``.
"""

import numba
import numpy as np

from evalengine.errors import InputError, check_option
from evalengine.geometry.assignment import assign, csr, augment, tight_matching

MAX_DIST = 0.0075
OUTLIER_COST = 100.0
MULTIPLIER = 100  # match.cc: CSA needs integer weights
DEGREE = 6  # match.cc: outlier connections of a node
OUTLIERS = ("bsds", "complete")


def window(md: float) -> np.ndarray:
    """The reference's search window: ``(du, dv, weight)`` rows for ``|du|, |dv| ≤ ceil(md)`` with
    ``du² + dv² ≤ md²`` (compared in double precision), weight ``rint(100 · √(du² + dv²))``."""
    r = int(np.ceil(md))
    du, dv = np.meshgrid(np.arange(-r, r + 1), np.arange(-r, r + 1), indexing="ij")
    d2 = (du * du + dv * dv).astype(np.float64).ravel()
    keep = ~(d2 > md * md)
    weight = np.rint(np.sqrt(d2[keep]) * MULTIPLIER).astype(np.int64)
    return np.stack([du.ravel()[keep], dv.ravel()[keep], weight], axis=1).astype(np.int64)


@numba.njit(cache=True, nogil=True)
def _nodes(bmap1, bmap2, win):
    """Matchable pixels of each map as node ids in column-major order (the reference's numbering), and the edges
    ``(i, j, weight)`` in the reference's order (x1, y1, du, dv). Three sweeps over the pixel pairs within the
    window: mark the matchable pixels, count the edges, fill them."""
    h, w = bmap1.shape
    able1 = np.zeros((h, w), np.bool_)
    able2 = np.zeros((h, w), np.bool_)
    id1 = np.full((h, w), -1, np.int64)
    id2 = np.full((h, w), -1, np.int64)
    n1, n2 = 0, 0
    edges = np.empty((0, 3), np.int64)
    for sweep in range(3):
        m = 0
        for x in range(w):
            for y in range(h):
                if bmap1[y, x]:
                    for k in range(win.shape[0]):
                        y2, x2 = y + win[k, 1], x + win[k, 0]
                        if 0 <= y2 < h and 0 <= x2 < w and bmap2[y2, x2]:
                            if sweep == 0:
                                able1[y, x] = able2[y2, x2] = True
                            elif sweep == 2:
                                edges[m, 0], edges[m, 1], edges[m, 2] = id1[y, x], id2[y2, x2], win[k, 2]
                            m += 1
        if sweep == 0:
            for x in range(w):
                for y in range(h):
                    if able1[y, x]:
                        id1[y, x] = n1
                        n1 += 1
                    if able2[y, x]:
                        id2[y, x] = n2
                        n2 += 1
        elif sweep == 1:
            edges = np.empty((m, 3), np.int64)
    return id1, id2, n1, n2, edges


@numba.njit(cache=True, nogil=True)
def _complete_graph(n1, n2, edges, ow):
    """The doubled assignment graph of the complete outlier model (module docstring)."""
    m = edges.shape[0]
    rows = np.empty(2 * m + n1 + n2, np.int64)
    cols = np.empty_like(rows)
    costs = np.empty_like(rows)
    for e in range(m):
        i, j = edges[e, 0], edges[e, 1]
        rows[2 * e], cols[2 * e], costs[2 * e] = i, j, 2 * edges[e, 2]
        rows[2 * e + 1], cols[2 * e + 1], costs[2 * e + 1] = n1 + j, n2 + i, 0
    for i in range(n1):
        rows[2 * m + i], cols[2 * m + i], costs[2 * m + i] = i, n2 + i, ow
    for j in range(n2):
        rows[2 * m + n1 + j], cols[2 * m + n1 + j], costs[2 * m + n1 + j] = n1 + j, j, ow
    return csr(n1 + n2, rows, cols, costs)


@numba.njit(cache=True, nogil=True)
def _k_of_n(k, n, out):
    """``k`` distinct integers drawn uniformly from ``[0, n)``, increasing (BSDS ``kOfN``'s contract)."""
    for a in range(k):
        while True:
            x = np.random.randint(0, n)
            fresh = True
            for b in range(a):
                fresh &= out[b] != x
            if fresh:
                break
        out[a] = x
    out[:k].sort()


@numba.njit(cache=True, nogil=True)
def _bsds_graph(n1, n2, edges, ow, seed):
    """``match.cc``'s assignment graph: the real edges; from each map-1 node ``d1 = min(6, n1 − 1)`` random
    outlier columns other than its own, from each map-2 node ``d2`` random outlier rows other than its own; from
    each node of the larger side ``d3 = min(6, n1, n2)`` random outlier–outlier edges, all at ``ow``; and the
    "perfect match overlay" (every node to its own outlier at ``100 · ow``). The reference draws from a clock-seeded
    generator; ours is seeded with ``seed``."""
    np.random.seed(seed)
    m, n = edges.shape[0], n1 + n2
    nmin, nmax = min(n1, n2), max(n1, n2)
    d1, d2, d3 = max(0, min(DEGREE, n1 - 1)), max(0, min(DEGREE, n2 - 1)), min(DEGREE, nmin)
    total = m + d1 * n1 + d2 * n2 + d3 * nmax + n
    rows = np.empty(total, np.int64)
    cols = np.empty(total, np.int64)
    costs = np.full(total, ow, np.int64)
    rows[:m], cols[:m], costs[:m] = edges[:, 0], edges[:, 1], edges[:, 2]
    c = m
    pick = np.empty(DEGREE, np.int64)
    for i in range(n1):
        _k_of_n(d1, n1 - 1, pick)
        for a in range(d1):
            rows[c], cols[c] = i, n2 + pick[a] + (pick[a] >= i)
            c += 1
    for j in range(n2):
        _k_of_n(d2, n2 - 1, pick)
        for a in range(d2):
            rows[c], cols[c] = n1 + pick[a] + (pick[a] >= j), j
            c += 1
    for i in range(nmax):
        _k_of_n(d3, nmin, pick)
        for a in range(d3):
            rows[c], cols[c] = (n1 + i, n2 + pick[a]) if n1 < n2 else (n1 + pick[a], n2 + i)
            c += 1
    for i in range(n1):
        rows[c], cols[c], costs[c] = i, n2 + i, ow * MULTIPLIER
        c += 1
    for j in range(n2):
        rows[c], cols[c], costs[c] = n1 + j, j, ow * MULTIPLIER
        c += 1
    return csr(n, rows, cols, costs)


@numba.njit(cache=True, nogil=True)
def _solve_bsds(n1, n2, edges, ow, seed, col4row_c, u_c, v_c):
    """The optimum of :func:`_bsds_graph` (costs doubled), warm-started from the complete model's optimum: with
    its slacks ``y_i = ow − u_i − v_(own outlier)`` and ``z_j = ow − u_(own outlier) − v_j`` (≥ 0, and
    ``y_i + z_j ≥ 2ow − 2w_ij``), ``u_i = 2ow − y_i``, ``v_j = −z_j``, outlier rows ``2ow`` and outlier columns
    0 are feasible duals of the random graph, under which every outlier edge of an unmatched node is tight; the
    complete optimum's real edges that stay tight are kept, and shortest augmenting paths do the rest."""
    n = n1 + n2
    ptr, col, cost = _bsds_graph(n1, n2, edges, ow, seed)
    cost *= 2
    u = np.full(n, 2 * ow, np.int64)
    v = np.zeros(n, np.int64)
    for i in range(n1):
        u[i] = ow + u_c[i] + v_c[n2 + i]
    for j in range(n2):
        v[j] = u_c[n1 + j] + v_c[j] - ow
    col4row = np.full(n, -1, np.int64)
    row4col = np.full(n, -1, np.int64)
    for i in range(n1):
        j = col4row_c[i]
        if j < n2:
            for e in range(ptr[i], ptr[i + 1]):
                if col[e] == j and cost[e] == u[i] + v[j]:
                    col4row[i], row4col[j] = j, i
    tight_matching(ptr, col, cost, u, v, col4row, row4col)
    augment(ptr, col, cost, u, v, col4row, row4col)
    return col4row


@numba.njit(cache=True, nogil=True)
def _match_maps(bmap1, bmap2, win, ow, complete, seed):
    """The reference's outputs: per pixel of each map, the 1-based column-major index of its partner in the other
    map, 0 when unmatched."""
    h, w = bmap1.shape
    id1, id2, n1, n2, edges = _nodes(bmap1, bmap2, win)
    ptr, col, cost = _complete_graph(n1, n2, edges, ow)
    col4row, u, v = assign(ptr, col, cost)
    if not complete:
        col4row = _solve_bsds(n1, n2, edges, ow, seed, col4row, u, v)
    pix1 = np.empty(n1, np.int64)
    pix2 = np.empty(n2, np.int64)
    for x in range(w):
        for y in range(h):
            if id1[y, x] >= 0:
                pix1[id1[y, x]] = x * h + y
            if id2[y, x] >= 0:
                pix2[id2[y, x]] = x * h + y
    m1 = np.zeros((h, w), np.int64)
    m2 = np.zeros((h, w), np.int64)
    for i in range(n1):
        j = col4row[i]
        if j < n2:
            p, q = pix1[i], pix2[j]
            m1[p % h, p // h] = q + 1
            m2[q % h, q // h] = p + 1
    return m1, m2


def correspond_pixels(bmap1: np.ndarray, bmap2: np.ndarray, max_dist: float = MAX_DIST,
                      outlier_cost: float = OUTLIER_COST, outliers: str = "bsds",
                      seed: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """``[match1, match2] = correspondPixels(bmap1, bmap2, max_dist, outlier_cost)``: for each boundary pixel of
    one map, the 1-based column-major (MATLAB) index of its partner pixel in the other map, 0 when unmatched.

    ``outliers="bsds"`` solves the reference's sparse random outlier graph exactly (drawn with ``seed``; the
    reference's own draw is clock-seeded, so its matched count varies from run to run by a pixel or a few on
    large maps); ``outliers="complete"`` the deterministic optimum of the outlier model the graph stands for."""
    check_option("outliers", outliers, OUTLIERS)
    bmap1, bmap2 = np.asarray(bmap1) != 0, np.asarray(bmap2) != 0
    if bmap1.shape != bmap2.shape or bmap1.ndim != 2:
        raise InputError(f"correspond_pixels: maps of shapes {bmap1.shape} and {bmap2.shape}, expected one 2-D "
                         "shape")
    rows, cols = bmap1.shape
    idiag = np.sqrt(float(rows * rows + cols * cols))
    md = max_dist * idiag
    ow = int(np.ceil(outlier_cost * max_dist * idiag * MULTIPLIER))
    return _match_maps(bmap1, bmap2, window(md), ow, outliers == "complete", seed)
