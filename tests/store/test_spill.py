"""store.spill: a table split into batches in one pass, each batch's rows in table order, the spill removed."""

import numpy as np
import polars as pl
import pytest

from evalengine.store.spill import spilled_batches


def _table(seed: int, n: int) -> pl.DataFrame:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**63, (n, 3), dtype=np.uint64) * rng.integers(0, 2, (n, 3), dtype=np.uint64)
    return pl.DataFrame({
        "category_id": rng.choice([1, 2, 5, 7, 9, 11], n),
        "score": np.round(rng.random(n), 2),
        "image_id": rng.integers(0, 50, n),
        "dt_rank": rng.integers(0, 100, n).astype(np.int32),
        "tp_bits": pl.Series(bits).cast(pl.Array(pl.UInt64, 3)),
    })


@pytest.mark.parametrize("seed", range(8))
def test_each_batch_holds_its_rows_in_table_order(seed, tmp_path):
    table = _table(seed, int(np.random.default_rng(seed).integers(0, 5000)))
    batch_of = {1: 0, 2: 0, 5: 2, 9: 3, 11: 3}  # 7: no batch (not kept); batch 1: empty
    batch = pl.col("category_id").replace_strict(list(batch_of), list(batch_of.values()), default=None)
    frames = list(spilled_batches(table.lazy(), batch, 4, tmp_path))
    assert len(frames) == 4
    for b, frame in enumerate(frames):
        expected = table.filter(pl.col("category_id").is_in([c for c, d in batch_of.items() if d == b]))
        assert frame.schema == table.schema
        assert frame.equals(expected)
    assert list(tmp_path.iterdir()) == []


def test_the_spill_goes_when_reading_stops(tmp_path):
    table = _table(1, 1000)
    frames = spilled_batches(table.lazy(), pl.col("category_id") % 3, 3, tmp_path)
    first = next(frames)
    assert first.equals(table.filter(pl.col("category_id") % 3 == 0))
    assert len(list(tmp_path.iterdir())) == 1
    frames.close()
    assert list(tmp_path.iterdir()) == []
