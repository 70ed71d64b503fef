"""The store held in memory shards as the store on disk does: every shard's frame equals the file the
:class:`~evalengine.store.shards.ShardWriter` writes (rows, order and types), whatever the columns' kinds."""

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evalengine.store.layout import read_stored
from evalengine.numeric import counting_order
from evalengine.store.memory import MemoryShards
from evalengine.store.paths import shard_file
from evalengine.store.shards import ShardWriter

SCHEMA = {"image_id": pl.Int64, "det_id": pl.Int64, "score": pl.Float64, "label": pl.Int32, "flag": pl.Boolean,
          "maybe": pl.Float64, "mask_rle": pl.String, "keypoints": pl.List(pl.Float64)}


def _frames(rng, n_frames: int) -> list:
    frames = []
    for i, n in enumerate(rng.integers(0, 400, n_frames)):
        with_nulls = bool(rng.integers(2))
        frames.append(pl.DataFrame({
            "image_id": rng.integers(-5, 60, n), "det_id": np.arange(n) + 1000 * i, "score": rng.random(n),
            "label": rng.integers(0, 9, n).astype(np.int32), "flag": rng.random(n) < 0.5,
            "maybe": [None if with_nulls and v < 0.3 else float(v) for v in rng.random(n)],
            "mask_rle": [None if with_nulls and v < 0.1 else f"r{v:.4f}" * int(v * 3) for v in rng.random(n)],
            "keypoints": [[float(v)] * int(v * 4) for v in rng.random(n)]}, schema=SCHEMA))
    return frames


@pytest.mark.parametrize("seed", range(12))
def test_memory_shards_equal_the_shard_files(tmp_path, seed):
    rng = np.random.default_rng(seed)
    frames = _frames(rng, int(rng.integers(0, 5)))
    n_shards = int(rng.integers(1, 9))
    with ShardWriter(tmp_path / "disk", n_shards, SCHEMA) as writer:
        for frame in frames:
            writer.write(frame)
        written = writer.close()
    files = {}
    with MemoryShards(tmp_path / "memory", n_shards, SCHEMA, files) as shards:
        for frame in frames:
            shards.write(frame)
        assert shards.close() == written == sum(f.height for f in frames)
    for k in range(n_shards):
        held = files[str(shard_file(tmp_path / "memory", k))]
        assert_frame_equal(held, read_stored(shard_file(tmp_path / "disk", k), tmp_path), check_exact=True)
        assert all(held.get_column(c).n_chunks() == 1 for c in held.columns)


def test_counting_order_is_a_stable_grouping():
    shards = np.random.default_rng(0).integers(0, 7, 1000).astype(np.int32)
    grouped, starts = counting_order(shards, 9)
    order = np.argsort(shards, kind="stable")
    assert (grouped == order).all()
    assert (starts == np.searchsorted(shards[order], np.arange(10))).all()
