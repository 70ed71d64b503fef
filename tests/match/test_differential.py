"""Differential test: hundreds of random datasets, all 12 stats and per-class values equal pycocotools."""

import numpy as np
import pytest

from evalengine.match.coco import CocoProtocol
from tests.generators import random_coco
from tests.helpers import both_stats

PROTOCOLS = [
    CocoProtocol(),
    CocoProtocol(use_cats=False),
    CocoProtocol(max_dets=(1, 5, 10)),
    CocoProtocol(iou_thresholds=(0.1, 0.3, 0.5, 0.75, 0.9)),
    CocoProtocol(use_cats=False, max_dets=(1, 10, 1000)),
    CocoProtocol(area_ranges=(("all", 0, 1e10), ("small", 0, 400), ("medium", 400, 2500), ("large", 2500, 1e10),
                              ("tiny", 0, 100)), recall_thresholds=(0.0, 0.25, 0.5, 0.75, 1.0)),
]
SEEDS_PER_BATCH = 12


@pytest.mark.parametrize("batch", range(25))
def test_random_datasets_equal_pycocotools(tmp_path, batch):
    for seed in range(batch * SEEDS_PER_BATCH, (batch + 1) * SEEDS_PER_BATCH):
        gt, dt = random_coco(seed)
        protocol = PROTOCOLS[seed % len(PROTOCOLS)]
        folder = tmp_path / str(seed)
        folder.mkdir()
        got, ref, got_pc, ref_pc = both_stats(folder, gt, dt, protocol, n_shards=1 + seed % 3)
        np.testing.assert_allclose(got, ref, rtol=0, atol=1e-12, err_msg=f"seed {seed}")
        assert got_pc.keys() == ref_pc.keys(), f"seed {seed}"
        for k in ref_pc:
            np.testing.assert_allclose(got_pc[k], ref_pc[k], rtol=0, atol=1e-12, err_msg=f"seed {seed} category {k}")
