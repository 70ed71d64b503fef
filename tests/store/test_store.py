"""The store: atomic writes, no silent overwrite, shard-count invariance, reuse of match tables."""

import json

import polars as pl
import pytest

import evalengine
from evalengine.api import ingest_coco
from evalengine.errors import InputError, StoreError
from evalengine.match.coco import CocoProtocol
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import write_inputs

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


def test_failed_ingest_leaves_nothing(tmp_path):
    bad = tmp_path / "dt.json"
    bad.write_text(json.dumps([{"image_id": 424242, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}]))
    with pytest.raises(InputError):
        ingest_coco(GT, bad, tmp_path / "store")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dt.json"]


def test_existing_store_is_not_overwritten(tmp_path):
    ingest_coco(GT, DT, tmp_path / "store", n_shards=2)
    with pytest.raises(StoreError, match="already exists"):
        ingest_coco(GT, DT, tmp_path / "store")
    store = ingest_coco(GT, DT, tmp_path / "store", n_shards=3, overwrite=True)
    assert store.layout.n_shards == 3
    assert [p.name for p in tmp_path.iterdir()] == ["store"]


def test_layout_is_hive_partitioned_by_shard(tmp_path):
    store = ingest_coco(GT, DT, tmp_path / "store", n_shards=4)
    assert sorted(p.name for p in (tmp_path / "store" / "gt").iterdir()) == [f"shard={k}" for k in range(4)]
    assert store.gt().collect().height == 839
    assert store.dt().collect().height == 734
    images = store.images().collect()
    gt = store.gt().collect().join(images.select("image_id", "shard"), on="image_id")
    assert (gt["shard"].cast(pl.Int32) == gt["shard_right"]).all()


def test_open_rejects_other_folders_and_versions(tmp_path):
    with pytest.raises(StoreError, match="not an evalengine store"):
        evalengine.open(tmp_path)
    ingest_coco(GT, DT, tmp_path / "store")
    manifest = tmp_path / "store" / "manifest.json"
    manifest.write_text(json.dumps(dict(json.loads(manifest.read_text()), schema_version=0)))
    with pytest.raises(StoreError, match="schema version 0"):
        evalengine.open(tmp_path / "store")


def test_unknown_run(tmp_path):
    store = ingest_coco(GT, DT, tmp_path / "store")
    with pytest.raises(StoreError, match="no run 'other'"):
        store.evaluate(run="other")


def _sorted_matches(evaluation):
    return evaluation.dt_matches().drop("shard").sort("det_id").collect(), \
        evaluation.gt_matches().drop("shard").sort("gt_id").collect()


@pytest.mark.parametrize("seed", [3, 11, 26])
def test_match_table_is_the_same_for_any_shard_count(tmp_path, seed):
    gt, dt = random_coco(seed)
    gt_path, dt_path = write_inputs(tmp_path, gt, dt)
    results = []
    for n_shards in (1, 2, 7):
        store = ingest_coco(gt_path, dt_path, tmp_path / f"store{n_shards}", n_shards=n_shards)
        for protocol in (CocoProtocol(), CocoProtocol(use_cats=False)):
            results.append((protocol.use_cats, *_sorted_matches(store.evaluate(protocol))))
    for use_cats in (True, False):
        same = [r[1:] for r in results if r[0] == use_cats]
        for dt_m, gt_m in same[1:]:
            assert dt_m.equals(same[0][0]) and gt_m.equals(same[0][1])


def test_evaluate_reuses_a_match_table_with_the_same_parameters(tmp_path):
    store = ingest_coco(GT, DT, tmp_path / "store")
    first = store.evaluate()
    stamp = (first.matches_dir / "protocol.json").stat().st_mtime_ns
    again = evalengine.open(tmp_path / "store").evaluate(CocoProtocol(recall_thresholds=(0.5,)))
    assert again.matches_dir == first.matches_dir
    assert (again.matches_dir / "protocol.json").stat().st_mtime_ns == stamp
    other = store.evaluate(CocoProtocol(max_dets=(1, 10, 50)))
    assert other.matches_dir != first.matches_dir
    assert other.matches_dir.name == "run=default" and other.matches_dir.parent.name.startswith("protocol=coco-")


@pytest.mark.parametrize("seed", range(4))
def test_shard_writer_holds_frames_and_writes_a_row_group_per_flush(tmp_path, seed):
    """Held frames reach each shard in the order they came, whatever the budget; a shard gets one row group per
    flush (every frame with a budget of 0, one in all when everything is held to the end)."""
    import numpy as np
    import pyarrow.parquet as pq

    from evalengine.store.paths import shard_file
    from evalengine.store.sharding import shard_of
    from evalengine.store.shards import ShardWriter, scan_shards

    rng = np.random.default_rng(seed)
    frames = [pl.DataFrame({"image_id": rng.integers(1, 50, n), "det_id": np.arange(n) + 1000 * i,
                            "score": rng.random(n)}) for i, n in enumerate(rng.integers(0, 300, 6))]
    frame_bytes = max(f.to_arrow().nbytes for f in frames)
    want = None
    for budget in (0, 2 * frame_bytes - 1, 1 << 40):
        folder = tmp_path / f"held{budget}"
        with ShardWriter(folder, 5, dict(frames[0].schema), held_bytes=budget) as writer:
            for frame in frames:
                writer.write(frame)
            assert writer.close() == sum(f.height for f in frames)
        got = scan_shards(folder).collect().sort("shard", maintain_order=True)
        assert got.drop("shard").sort("det_id").equals(pl.concat(frames).sort("det_id"))
        assert got.group_by("shard").agg(pl.col("det_id").diff().min() > 0).get_column("det_id").fill_null(True).all()
        assert (got.get_column("shard").to_numpy() == shard_of(got.get_column("image_id").to_numpy(), 5)).all()
        want = got if want is None else want
        assert got.equals(want)
        groups = [pq.ParquetFile(shard_file(folder, k)).metadata.num_row_groups for k in range(5)]
        if budget == 0:
            assert groups == [sum(bool((shard_of(f.get_column("image_id").to_numpy(), 5) == k).any()) for f in frames)
                              for k in range(5)]
        elif budget == 1 << 40:
            assert groups == [int(k in set(got.get_column("shard"))) for k in range(5)]
