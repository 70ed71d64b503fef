"""The ``rank`` search's kernel (true positives ranked, false positives placed among them by binary search) against
the official arithmetic over every prefix of the fully sorted rows (tests/metrics/lrp_reference.py ``_ranked``), on
random rows built to corner it: IoUs exactly at thresholds whose ``1 - τ`` is inexact (LRP within rounding of 1, where
a false positive's prefix can win), true positives below τ (LRP > 1: it does win), heavy score ties broken by two keys,
ignored rows, several area ranges."""

import math

import numpy as np
import pytest

from evalengine.metrics.lrp import _FIELDS, _rank_search_kernel
from tests.metrics.lrp_reference import _ranked

TAUS = (0.5, 0.55, 0.65, 0.7, 0.85, 0.95)


def _rows(rng, n, n_cat, n_area, tau):
    cat_index = rng.integers(0, n_cat, n)
    score = rng.choice(rng.random(int(rng.integers(1, 6))), n) if rng.random() < 0.5 else rng.random(n)
    first = rng.integers(0, 4, n)
    second = rng.permutation(n)  # (first, second) unique, as (image id, rank)
    kind = rng.integers(0, 3, (n, n_area))  # 0 FP, 1 TP, 2 ignored
    if rng.random() < 0.3:
        kind[rng.random(n) < 0.9] = 0
    exact = rng.random() < 0.5
    iou = np.where(exact, tau, tau + (1 - tau) * rng.random((n, n_area)) ** 8)
    if rng.random() < 0.2:  # true positives below τ (no matching gives them): LRP > 1, a false positive's prefix wins
        iou = rng.random((n, n_area))
    bits = lambda k: np.where(kind == k, np.uint64(1), np.uint64(0)).astype(np.uint64)  # noqa: E731
    return cat_index, score, first, second, bits(1), bits(2), iou, kind


@pytest.mark.parametrize("seed", range(300))
def test_rank_kernel_equals_the_official_arithmetic(seed):
    rng = np.random.default_rng(seed)
    tau = TAUS[seed % len(TAUS)]
    n, n_cat, n_area = int(rng.integers(1, 120)), int(rng.integers(1, 4)), int(rng.integers(1, 4))
    cat_index, score, first, second, tp_bits, ignored_bits, iou, kind = _rows(rng, n, n_cat, n_area, tau)
    n_gt = rng.integers(0, 40, (n_cat, n_area))
    n_gt = np.maximum(n_gt, np.stack([((cat_index == c)[:, None] & (kind == 1)).sum(0) for c in range(n_cat)]))
    got = _rank_search_kernel(cat_index, score, first, second, tp_bits, ignored_bits, iou, 0, n_gt, tau)
    for c in range(n_cat):
        rows = np.flatnonzero(cat_index == c)
        rows = rows[np.lexsort((second[rows], first[rows], -score[rows]))]
        for a in range(n_area):
            if n_gt[c, a] == 0:
                assert np.isnan(got[c, a]).all()
                continue
            tps, fps = kind[rows, a] == 1, kind[rows, a] == 0
            want = _ranked(score[rows], tps, fps, np.where(tps, iou[rows, a], 0.0), int(n_gt[c, a]), tau, "rank")
            for i, field in enumerate(_FIELDS):
                expected = want[field]
                if expected is None:  # no true positive: the official code has no FP count, ours is 0
                    assert field == "n_fp" and got[c, a, i] == 0
                elif isinstance(expected, float) and math.isnan(expected):
                    assert math.isnan(got[c, a, i]), (c, a, field)
                else:
                    assert got[c, a, i] == expected, (c, a, field, got[c, a, i], expected)
