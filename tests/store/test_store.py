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
