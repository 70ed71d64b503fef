"""A sharded table a shard at a time (:meth:`evalengine.store.layout.StoreLayout.shard_pieces`): a store in memory
gives the pieces a store on disk gives (the same rows, order, columns and types), and so does
:func:`evalengine.store.spill.shard_pieces` of any table derived from a sharded one, whatever the filter."""

import numpy as np
import polars as pl
import pytest
from polars.testing import assert_frame_equal

from evalengine.api import ingest_coco
from evalengine.store.spill import shard_pieces
from tests.generators import random_coco
from tests.helpers import write_inputs

FILTERS = [lambda t: t, lambda t: t.filter(pl.col("image_id") % 3 == 1),
           lambda t: t.filter(pl.col("category_id").is_in([1, 2, 5])).select("image_id", "category_id", "shard"),
           lambda t: t.filter(pl.lit(False)), lambda t: t.with_columns((pl.col("image_id") * 2).alias("twice"))]


@pytest.mark.parametrize("seed", range(6))
def test_memory_and_disk_give_the_same_pieces(seed, tmp_path):
    rng = np.random.default_rng(seed)
    gt, dt = random_coco(seed)
    files, n_shards = write_inputs(tmp_path, gt, dt), int(rng.integers(1, 6))
    in_memory = ingest_coco(*files, None, n_shards=n_shards).evaluate()
    on_disk = ingest_coco(*files, tmp_path / "store", n_shards=n_shards).evaluate()
    assert not in_memory.layout.persistent and on_disk.layout.persistent
    for folder in (lambda e: e.layout.paths.gt, lambda e: e.layout.paths.dt("default"),
                   lambda e: e.matches_dir / "dt", lambda e: e.matches_dir / "gt"):
        memory_pieces = in_memory.layout.shard_pieces(folder(in_memory))
        disk_pieces = on_disk.layout.shard_pieces(folder(on_disk))
        assert len(memory_pieces) == len(disk_pieces) == n_shards
        for derive in FILTERS:
            for k, (held, read) in enumerate(zip(memory_pieces, disk_pieces)):
                expected = derive(read).collect()
                assert_frame_equal(derive(held).collect(), expected, check_exact=True)
                assert expected.height == 0 or (expected.get_column("shard") == k).all()
            # the spill's pieces of a derived table: the same rows, shard by shard, on either store
            whole = {name: derive(e.layout.scan_sharded(folder(e))) for name, e in (("memory", in_memory),
                                                                                     ("disk", on_disk))}
            spilled = {name: [piece.collect() for piece in shard_pieces(table)] for name, table in whole.items()}
            assert len(spilled["memory"]) == len(spilled["disk"])
            for held, read in zip(spilled["memory"], spilled["disk"]):
                assert_frame_equal(held, read, check_exact=True)
            assert_frame_equal(pl.concat([derive(p) for p in memory_pieces]).collect(),
                               whole["disk"].collect(), check_exact=True)
