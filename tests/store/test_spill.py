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
    frames = list(spilled_batches(table.lazy(), table.columns, batch, 4, tmp_path))
    assert len(frames) == 4
    for b, frame in enumerate(frames):
        expected = table.filter(pl.col("category_id").is_in([c for c, d in batch_of.items() if d == b]))
        assert frame.schema == table.schema
        assert frame.equals(expected)
    assert list(tmp_path.iterdir()) == []


def test_the_spill_goes_when_reading_stops(tmp_path):
    table = _table(1, 1000)
    frames = spilled_batches(table.lazy(), table.columns, pl.col("category_id") % 3, 3, tmp_path)
    first = next(frames)
    assert first.equals(table.filter(pl.col("category_id") % 3 == 0))
    assert len(list(tmp_path.iterdir())) == 1
    frames.close()
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("seed", range(4))
def test_a_sharded_table_is_read_a_shard_at_a_time_in_table_order(seed, tmp_path):
    from evalengine.store.paths import shard_file
    from evalengine.store.shards import scan_shards

    rng = np.random.default_rng(seed)
    table = _table(seed, 3000).with_columns(shard=pl.Series(rng.integers(0, 12, 3000)))
    for k, part in table.partition_by("shard", as_dict=True).items():
        path = shard_file(tmp_path / "t", k[0])
        path.parent.mkdir(parents=True)
        part.drop("shard").write_parquet(path)
    scanned = scan_shards(tmp_path / "t")
    columns = ["category_id", "score", "tp_bits"]
    frames = list(spilled_batches(scanned, columns, pl.col("image_id") // 20, 3, tmp_path))
    whole = scanned.collect()  # the table order: files in the scan's order
    for b, frame in enumerate(frames):
        assert frame.equals(whole.filter(pl.col("image_id") // 20 == b).select(columns))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["t"]
