"""OKS blocks against pycocotools ``computeOks``, to the bit; NumPy's pairwise summation."""

import numpy as np
import pytest
from pycocotools.cocoeval import COCOeval, Params

from evalengine.geometry.oks import COCO_PERSON_SIGMAS, keypoint_vars, oks_blocks
from evalengine.numeric import pairwise_sum


class _Oks(COCOeval):
    """``computeOks`` alone, on objects given in memory."""

    def __init__(self, gts, dts, sigmas):
        self.params = Params("keypoints")
        self.params.kpt_oks_sigmas = np.array(sigmas)
        self._gts, self._dts = {(1, 1): gts}, {(1, 1): dts}


def _flat(rows):
    ends = np.cumsum([0] + [len(r) for r in rows])
    return np.concatenate([np.asarray(r, np.float64) for r in rows] + [np.zeros(0)]), np.stack([ends[:-1], ends[1:]], 1)


def _random_group(rng, k):
    gts = []
    for _ in range(int(rng.integers(1, 5))):
        v = rng.choice([0, 1, 2], k, p=[0.5, 0.25, 0.25]) if rng.random() < 0.8 else np.zeros(k, int)
        keypoints = np.stack([rng.random(k) * 100, rng.random(k) * 100, v], 1).reshape(-1)
        if rng.random() < 0.2:
            keypoints = np.round(keypoints)
        empty = not v.any() and rng.random() < 0.3
        gts.append({"keypoints": [] if empty else keypoints.tolist(), "bbox": (rng.random(4) * 50).tolist(),
                    "area": float(rng.choice([0.0, rng.random() * 5000]))})
    dts = [{"keypoints": np.stack([rng.random(k) * 150 - 20, rng.random(k) * 150 - 20, np.ones(k)], 1).reshape(-1)
            .tolist(), "score": float(rng.random())} for _ in range(int(rng.integers(1, 6)))]
    return gts, sorted(dts, key=lambda d: -d["score"])


@pytest.mark.parametrize("k", [17, 5, 1])
def test_oks_blocks_equal_compute_oks_bit_for_bit(k):
    rng = np.random.default_rng(k)
    sigmas = COCO_PERSON_SIGMAS if k == 17 else tuple(rng.uniform(0.02, 0.2, k))
    for _ in range(200):
        gts, dts = _random_group(rng, k)
        want = _Oks(gts, dts, sigmas).computeOks(1, 1)
        g_kpts, g_span = _flat([g["keypoints"] for g in gts])
        d_kpts, d_span = _flat([d["keypoints"] for d in dts])
        values, offsets = oks_blocks(
            d_kpts, d_span, g_kpts, g_span, np.array([g["bbox"] for g in gts]), np.array([g["area"] for g in gts]),
            keypoint_vars(sigmas), np.tile([0, k], (len(gts), 1)), np.array([0]), np.array([len(gts)]),
            np.array([0]), np.array([len(dts)]), 0, 1)
        assert list(offsets) == [0, len(gts) * len(dts)]
        assert np.array_equal(values.reshape(len(dts), len(gts)), want)


def test_pairwise_sum_is_numpys():
    values = np.random.default_rng(0).random(1200) * 1e3
    for n in [0, 1, 7, 8, 9, 17, 128, 129, 300, 1000]:
        assert pairwise_sum(values, 5, n) == np.sum(values[5:5 + n])


def test_person_sigmas_are_pycocotools():
    assert np.array_equal(np.array(COCO_PERSON_SIGMAS), Params("keypoints").kpt_oks_sigmas)
