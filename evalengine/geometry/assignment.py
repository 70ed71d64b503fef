"""Minimum-cost perfect assignment of a sparse square integer cost matrix, exact (the solver of BSDS
``correspondPixels``' graphs; Goldberg's CSA there): Jonker & Volgenant's initialisation (column reduction, augmenting
row reduction), Hopcroft–Karp on the tight edges, then shortest augmenting paths with Dijkstra on reduced costs, as
scipy's ``linear_sum_assignment``. Integer costs throughout, so optima are exact.
"""

import heapq

import numba
import numpy as np


@numba.njit(cache=True, nogil=True)
def csr(n, rows, cols, costs):
    """Rows of a COO graph as CSR ``(ptr, col, cost)``, each row's entries in input order."""
    ptr = np.zeros(n + 1, np.int64)
    for e in range(rows.size):
        ptr[rows[e] + 1] += 1
    for r in range(n):
        ptr[r + 1] += ptr[r]
    col = np.empty(rows.size, np.int64)
    cost = np.empty(rows.size, np.int64)
    fill = ptr[:-1].copy()
    for e in range(rows.size):
        col[fill[rows[e]]], cost[fill[rows[e]]] = cols[e], costs[e]
        fill[rows[e]] += 1
    return ptr, col, cost


@numba.njit(cache=True, nogil=True)
def _row_reduction(ptr, col, cost, v, col4row, row4col):
    """One pass of Jonker & Volgenant's augmenting row reduction over the free rows (an auction step): a free row
    takes its cheapest column under reduced costs ``cost − v``, raising that column's reduced cost to the row's
    second cheapest, and the row it displaces is served next. Every assigned row keeps a cheapest column of its
    own, so ``u = min(cost − v)`` per row stays a feasible dual with assigned edges tight."""
    n = ptr.size - 1
    big = np.iinfo(np.int64).max
    free = np.empty(n, np.int64)
    n_free = 0
    for i in range(n):
        if col4row[i] < 0:
            free[n_free] = i
            n_free += 1
    k, todo, n_free = 0, n_free, 0
    while k < todo:
        i = free[k]
        k += 1
        u1, u2, j1, j2 = big, big, -1, -1
        for e in range(ptr[i], ptr[i + 1]):
            r = cost[e] - v[col[e]]
            if r < u2:
                if r < u1:
                    u2, j2, u1, j1 = u1, j1, r, col[e]
                else:
                    u2, j2 = r, col[e]
        if j1 < 0:
            continue
        i0 = row4col[j1]
        if j2 >= 0 and u1 < u2:
            v[j1] -= u2 - u1
        elif i0 >= 0 and j2 >= 0:
            j1, i0 = j2, row4col[j2]
        if i0 >= 0:
            col4row[i0] = -1
            if j2 >= 0 and u1 < u2:
                k -= 1
                free[k] = i0
            else:
                free[n_free] = i0
                n_free += 1
        row4col[j1], col4row[i] = i, j1


@numba.njit(cache=True, nogil=True)
def assign(ptr, col, cost):
    """Minimum-cost perfect assignment of a sparse square integer cost matrix (rows in CSR): a column reduction,
    a greedy assignment of tight edges and two passes of augmenting row reduction, then shortest augmenting paths
    (:func:`augment`). Returns ``(col4row, u, v)`` (optimal duals); ``col4row`` is -1 everywhere when no perfect
    assignment exists."""
    n = ptr.size - 1
    big = np.iinfo(np.int64).max
    u = np.zeros(n, np.int64)
    v = np.full(n, big, np.int64)
    for e in range(ptr[n]):
        v[col[e]] = min(v[col[e]], cost[e])
    col4row = np.full(n, -1, np.int64)
    row4col = np.full(n, -1, np.int64)
    if n > 0 and v.max() == big:
        return col4row, u, v
    for i in range(n):
        for e in range(ptr[i], ptr[i + 1]):
            if cost[e] == v[col[e]] and row4col[col[e]] < 0:
                row4col[col[e]], col4row[i] = i, col[e]
                break
    for _ in range(2):
        _row_reduction(ptr, col, cost, v, col4row, row4col)
    for i in range(n):
        u[i] = big
        for e in range(ptr[i], ptr[i + 1]):
            u[i] = min(u[i], cost[e] - v[col[e]])
    if not augment(ptr, col, cost, u, v, col4row, row4col):
        col4row[:] = -1
    return col4row, u, v


@numba.njit(cache=True, nogil=True)
def tight_matching(ptr, col, cost, u, v, col4row, row4col):
    """Hopcroft–Karp on the tight edges (``cost = u + v``): grows the assignment to a maximum one of the tight
    subgraph, leaving the duals feasible and every assigned edge tight, so few rows remain for Dijkstra."""
    n = ptr.size - 1
    inf = np.iinfo(np.int64).max
    dist = np.empty(n, np.int64)
    queue = np.empty(n, np.int64)
    it = np.empty(n, np.int64)
    stack = np.empty(n + 1, np.int64)
    cols = np.empty(n + 1, np.int64)
    while True:
        head, tail, found = 0, 0, False
        for i in range(n):
            dist[i] = inf
            if col4row[i] < 0:
                dist[i] = 0
                queue[tail] = i
                tail += 1
        while head < tail:
            i = queue[head]
            head += 1
            for e in range(ptr[i], ptr[i + 1]):
                if cost[e] - u[i] - v[col[e]] == 0:
                    i2 = row4col[col[e]]
                    if i2 < 0:
                        found = True
                    elif dist[i2] == inf:
                        dist[i2] = dist[i] + 1
                        queue[tail] = i2
                        tail += 1
        if not found:
            return
        for i in range(n):
            it[i] = ptr[i]
        for r in range(n):
            if col4row[r] >= 0 or dist[r] != 0:
                continue
            sp = 0
            stack[0] = r
            while sp >= 0:
                i = stack[sp]
                step = False
                while it[i] < ptr[i + 1]:
                    e = it[i]
                    it[i] += 1
                    j = col[e]
                    if cost[e] - u[i] - v[j] != 0:
                        continue
                    i2 = row4col[j]
                    if i2 < 0:
                        cols[sp] = j
                        for k in range(sp, -1, -1):
                            col4row[stack[k]], row4col[cols[k]] = cols[k], stack[k]
                        sp = -1
                        step = True
                        break
                    if dist[i2] == dist[i] + 1:
                        cols[sp] = j
                        sp += 1
                        stack[sp] = i2
                        step = True
                        break
                if not step:
                    dist[i] = inf
                    sp -= 1


@numba.njit(cache=True, nogil=True)
def augment(ptr, col, cost, u, v, col4row, row4col):
    """Shortest augmenting paths (Dijkstra on reduced costs ``cost − u − v``, as scipy's
    ``linear_sum_assignment``; columns at the current distance wait on a stack beside the heap) from every free
    row, given feasible duals under which the assigned edges are tight; updates all in place. False when some
    row cannot be assigned."""
    n = ptr.size - 1
    big = np.iinfo(np.int64).max
    spc = np.full(n, big, np.int64)
    path = np.full(n, -1, np.int64)
    scanned = np.zeros(n, np.bool_)
    touched = np.empty(n, np.int64)
    rows = np.empty(n, np.int64)
    level = np.empty(n * 2 + 1, np.int64)
    for cur in range(n):
        if col4row[cur] >= 0:
            continue
        heap = [(np.int64(0), np.int64(0), np.int64(0))]
        heap.pop()
        n_touched, n_rows, n_level, i, low, sink = 0, 0, 0, cur, np.int64(0), -1
        while sink < 0:
            rows[n_rows] = i
            n_rows += 1
            for e in range(ptr[i], ptr[i + 1]):
                j = col[e]
                if scanned[j]:
                    continue
                r = low + cost[e] - u[i] - v[j]
                if r < spc[j]:
                    if spc[j] == big:
                        touched[n_touched] = j
                        n_touched += 1
                    spc[j], path[j] = r, i
                    if r == low:  # same distance: no heap (the reduced-cost-0 plateaus are large)
                        level[n_level] = j
                        n_level += 1
                    else:
                        heapq.heappush(heap, (r, np.int64(row4col[j] >= 0), j))
            j = -1
            while n_level > 0:
                n_level -= 1
                j = level[n_level]
                if not scanned[j]:
                    break
                j = -1
            while j < 0 and len(heap) > 0:
                r, _, j = heapq.heappop(heap)
                if scanned[j] or r != spc[j]:
                    j = -1
            if j < 0:
                return False
            low = spc[j]
            scanned[j] = True
            if row4col[j] < 0:
                sink = j
            else:
                i = row4col[j]
        u[cur] += low
        for k in range(1, n_rows):
            u[rows[k]] += low - spc[col4row[rows[k]]]
        j = sink
        while True:
            i = path[j]
            row4col[j] = i
            j, col4row[i] = col4row[i], j
            if i == cur:
                break
        for k in range(n_touched):
            j = touched[k]
            if scanned[j]:
                v[j] -= low - spc[j]
            spc[j], path[j], scanned[j] = big, -1, False
    return True
