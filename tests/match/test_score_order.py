"""The radix orders of match.score_order against NumPy's stable sorts and the merge sort they replace, on generated
keys with the edge cases: ties, NaN scores, -0.0 beside 0.0, negative and int64-wide keys, empty input."""

import numpy as np
import pytest

from evalengine.match.score_order import by_key, descending_key, ranking_order, sort_rows


def _scores(rng, n):
    score = rng.integers(0, 6, n) / 5  # many ties
    special = rng.random(n)
    score[special < 0.05] = np.nan
    score[(special >= 0.05) & (special < 0.1)] = -0.0
    score[(special >= 0.1) & (special < 0.12)] = -np.inf
    score[(special >= 0.12) & (special < 0.14)] = np.inf
    score[(special >= 0.14) & (special < 0.2)] *= -1e300
    return score


def _keys(rng, n, wide):
    if wide:
        return rng.integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, n, dtype=np.int64, endpoint=True)
    return rng.integers(-50, 50, n) * (1 << rng.integers(0, 40))


@pytest.mark.parametrize("seed", range(30))
def test_ranking_order_is_the_merge_sorts_order(seed):
    rng = np.random.default_rng(seed)
    n = int(rng.integers(0, 3000))
    score, first, second = _scores(rng, n), _keys(rng, n, seed % 3 == 0), _keys(rng, n, seed % 5 == 0)
    got = ranking_order(score, first, second)
    rows = np.arange(n)
    sort_rows(rows, np.empty_like(rows), score, first, second, False)
    assert np.array_equal(got, rows)
    nan_last = np.where(np.isnan(score), np.inf, -(score + 0.0))  # -0.0 ties 0.0; NaN after -inf's -(-inf)
    rank = np.unique(nan_last, return_inverse=True)[1] + np.isnan(score)  # NaN strictly after +inf
    assert np.array_equal(got, np.lexsort((second, first, rank)))


@pytest.mark.parametrize("seed", range(20))
def test_by_key_is_a_stable_sort(seed):
    rng = np.random.default_rng(100 + seed)
    n = int(rng.integers(0, 5000))
    key = _keys(rng, n, seed % 4 == 0)
    rows = rng.permutation(n).astype(np.int64)
    assert np.array_equal(by_key(rows, key), rows[np.argsort(key, kind="stable")])


def test_descending_key_orders_as_the_scores():
    score = np.array([1.0, 0.5, 0.0, -0.0, -0.5, -np.inf, np.inf, np.nan, 5e-324, -5e-324])
    key = descending_key(score)
    assert key[2] == key[3]  # -0.0 ties 0.0
    assert key[7] == key.max() and np.sum(key == key.max()) == 1  # NaN last
    finite = ~np.isnan(score)
    assert np.array_equal(np.argsort(key[finite], kind="stable"), np.argsort(-(score[finite] + 0.0), kind="stable"))
