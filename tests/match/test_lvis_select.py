"""The LVIS results picked before a store in memory shards them (:class:`evalengine.match.lvis.EvaluatedResults`,
:func:`evalengine.store.memory.memory_store`'s ``select``) are the rows the shard tasks' federated filter keeps
(:func:`evalengine.match.lvis.federated`), whatever the batches the run arrives in: images crowded past the cap with
tied scores (and −0.0 against 0.0) at the cut across batches, areas of 0, inf and NaN, categories outside the
ground truth's, images' negative categories."""

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evalengine import schema
from evalengine.match.lvis import EvaluatedResults, federated
from evalengine.store.memory import memory_store
from tests.match.test_lvis_protocol import _federated_by_polars


def _random_run(rng):
    """``(images, categories, gt, dt)`` frames as ingest holds them; dt in file order (``det_id`` 1…n)."""
    image_ids = np.unique(rng.choice(np.array([-3, 0, 5, 2**40, *rng.integers(-10**6, 10**6, 20)]), 10))
    category_ids = np.unique(rng.choice(np.array([1, 3, 2**33, *rng.integers(1, 500, 30)]), 15))
    pool = np.concatenate([category_ids, [7777]])
    negatives = [[int(c) for c in rng.choice(pool, int(rng.integers(0, 4)))] for _ in image_ids]
    images = pl.DataFrame({"image_id": image_ids, "neg_category_ids": negatives,
                           "not_exhaustive_category_ids": [[] for _ in image_ids]},
                          schema_overrides={"neg_category_ids": pl.List(pl.Int64),
                                            "not_exhaustive_category_ids": pl.List(pl.Int64)})
    categories = pl.DataFrame({"category_id": category_ids, "frequency": ["f"] * len(category_ids)})
    m = int(rng.integers(0, 120))
    gt = pl.DataFrame({"gt_id": np.arange(m) + 1, "image_id": rng.choice(image_ids, m),
                       "category_id": rng.choice(pool, m), "area": rng.choice([0.0, 4.0, 100.0, np.inf, np.nan], m),
                       "gt_order": np.arange(m)})
    # a few crowded images: past the cap, with a handful of scores, so the cut falls inside ties
    n = int(rng.integers(0, 4000))
    crowded = rng.choice(image_ids, 3)
    dt = pl.DataFrame({"det_id": np.arange(n) + 1,
                       "image_id": np.where(rng.random(n) < 0.7, rng.choice(crowded, n), rng.choice(image_ids, n)),
                       "category_id": rng.choice(pool, n), "score": rng.choice([-0.0, 0.0, 0.25, 0.5, 0.9], n),
                       "x": rng.random(n), "y": rng.random(n), "w": rng.random(n), "h": rng.random(n),
                       "area": rng.choice([0.0, np.inf, np.nan, 1.0, 2.5, 900.0], n)}, schema=schema.DT)
    return images, categories, gt, dt


def _batches(rng, dt: pl.DataFrame) -> list:
    cuts = np.sort(rng.integers(0, dt.height + 1, int(rng.integers(0, 6))))
    return [dt[a:b] for a, b in zip([0, *cuts], [*cuts, dt.height])]


@pytest.mark.parametrize("seed", range(16))
def test_results_selected_before_the_scatter_are_those_the_shards_keep(seed):
    rng = np.random.default_rng(seed)
    images, categories, gt, dt = _random_run(rng)
    n_shards, max_dets = int(rng.integers(1, 6)), int(rng.choice([1, 7, 40, 300]))
    batches = _batches(rng, dt)
    whole = memory_store(images, categories, gt, {"run": iter(batches)}, n_shards)
    picked = memory_store(images, categories, gt, {"run": iter(batches)}, n_shards,
                          select=EvaluatedResults(images, categories, gt, max_dets))
    assert picked.read("runs").equals(whole.read("runs"))  # every row read is counted
    ids = np.unique(categories.get_column("category_id").to_numpy())
    negative = images.select("image_id", pl.col("neg_category_ids").alias("category_id")).explode("category_id")
    for k in range(n_shards):
        shard = whole.read_file(whole.paths.dt_shard("run", k))
        shard_gt = whole.read_file(whole.paths.gt_shard(k))
        _, _, rows = federated(shard_gt, shard, negative, ids, max_dets)
        assert_frame_equal(picked.read_file(picked.paths.dt_shard("run", k)), shard[rows], check_exact=True)
        # the store's columns read as the matcher reads them: one chunk each
        assert all(c.n_chunks() == 1 for c in picked.read_file(picked.paths.dt_shard("run", k)).get_columns())
    kept = picked.scan_sharded(picked.paths.dt("run")).collect().get_column("det_id").sort().to_list()
    assert kept == _federated_by_polars(gt, dt, negative.drop_nulls(), ids, max_dets)
