"""Accumulation in several category batches (the match table split in one pass and spilled, store.spill) equals
accumulation in one batch bit for bit, and pycocotools, on random datasets, slices included."""

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from evalengine.metrics.ap import accumulate, category_batches
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.reference import pycocotools_eval

SEEDS = range(24)


@pytest.mark.parametrize("seed", SEEDS)
def test_batched_accumulation_is_bit_identical(seed, tmp_path):
    rng = np.random.default_rng(1000 + seed)
    gt, dt = random_coco(seed)
    evaluation = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store",
                             n_shards=int(rng.integers(1, 5))).evaluate()
    image_ids = category_ids = None
    if seed % 3 == 1:  # an image slice
        ids = [image["id"] for image in gt["images"]]
        image_ids = sorted(rng.choice(ids, size=int(rng.integers(1, len(ids) + 1)), replace=False).tolist())
        evaluation = evaluation.slice(image_ids=image_ids)
    elif seed % 3 == 2 and len(gt["categories"]) > 1:  # a category slice
        ids = [category["id"] for category in gt["categories"]]
        category_ids = sorted(rng.choice(ids, size=len(ids) - 1, replace=False).tolist())
        evaluation = evaluation.slice(category_ids=category_ids)
    whole = evaluation.accumulate(want_curve=True)
    rows = evaluation.dt_matches().group_by("category_id").len().collect()
    kept = rows.filter(pl.col("category_id").is_in(list(whole.category_ids)))
    batch_rows = int(rng.integers(1, kept.get_column("len").max() + 1)) if kept.height else 1
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    batched = accumulate(evaluation.dt_matches(), evaluation.gt_matches(), evaluation.category_ids,
                         evaluation.protocol, want_curve=True, batch_rows=batch_rows, image_ids=image_ids,
                         scratch=scratch)
    if kept.height > 1:  # detections of two categories: two batches at least
        assert len(category_batches(evaluation.dt_matches(), whole.category_ids, batch_rows)) > 1
    for name in ("ap", "recall", "precision", "scores"):
        np.testing.assert_array_equal(getattr(batched, name), getattr(whole, name))
    assert list(scratch.iterdir()) == []  # the spill is gone

    ref = pycocotools_eval(gt, dt, image_ids=image_ids, category_ids=category_ids)
    # pycocotools [T, R, K, A, M] / [T, K, A, M]; ours [K, A, M, T, R] / [K, A, M, T]
    np.testing.assert_allclose(batched.precision, ref.eval["precision"].transpose(2, 3, 4, 0, 1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(batched.scores, ref.eval["scores"].transpose(2, 3, 4, 0, 1), rtol=0, atol=1e-12)
    np.testing.assert_allclose(batched.recall, ref.eval["recall"].transpose(1, 2, 3, 0), rtol=0, atol=1e-12)


@pytest.mark.parametrize("seed", range(8))
def test_a_store_in_memory_batched_equals_one_batch(seed, tmp_path):
    """A store held in memory is split a shard frame at a time (store.spill.shard_pieces, the layout's shard_pieces): forced small batches give
    the arrays of one batch, and those of the same data on disk."""
    rng = np.random.default_rng(3000 + seed)
    gt, dt = random_coco(seed)
    files, n_shards = write_inputs(tmp_path, gt, dt), int(rng.integers(1, 6))
    in_memory = ingest_coco(*files, None, n_shards=n_shards).evaluate()
    on_disk = ingest_coco(*files, tmp_path / "store", n_shards=n_shards).evaluate()
    dt_matches = in_memory.dt_matches()
    assert len(in_memory.layout.shard_pieces(in_memory.matches_dir / "dt")) == n_shards
    whole = on_disk.accumulate(want_curve=True)
    rows = dt_matches.group_by("category_id").len().collect()
    batch_rows = int(rng.integers(1, rows.get_column("len").max() + 1)) if rows.height else 1
    scratch = tmp_path / "scratch"
    scratch.mkdir()
    batched = accumulate(dt_matches, in_memory.gt_matches(), in_memory.category_ids, in_memory.protocol,
                         want_curve=True, batch_rows=batch_rows, scratch=scratch)
    for name in ("ap", "recall", "precision", "scores"):
        np.testing.assert_array_equal(getattr(batched, name), getattr(whole, name))
    assert list(scratch.iterdir()) == []
