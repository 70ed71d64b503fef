"""The ``pairs`` and ``tide_*`` views equal the Python tables and counts."""

import polars as pl

from evalengine import api
from evalengine.store.shards import scan_shards
from tests.conftest import PACKAGE_DATA


def test_pairs_and_tide_views(tmp_path):
    diagnosis = api.tide(api.ingest_coco(PACKAGE_DATA / "instances_val2014_100.json",
                                         PACKAGE_DATA / "instances_val2014_fakebbox100_results.json", tmp_path / "s",
                                         n_shards=3))
    store = api.open(tmp_path / "s")
    pairs = scan_shards(store.path / "matches" / "protocol=pairs" / "run=default" / "pairs").collect()
    view = store.sql("SELECT * EXCLUDE (protocol, run, shard) FROM pairs")
    assert view.sort("det_id", "gt_id").equals(pairs.drop("protocol", "run", "shard").sort("det_id", "gt_id"))
    assert api.pairs(store).collect().sort("det_id", "gt_id").equals(pairs.sort("det_id", "gt_id"))  # the same table
    loose = api.pairs(store, min_iou=0.05).collect()  # a table of its own, with every pair of the default one
    assert loose.height > pairs.height and loose.filter(pl.col("iou") >= 0.1).height == pairs.height
    counts = dict(store.sql("SELECT error, count FROM tide_error_counts").iter_rows())
    assert counts == {name: n for name, n in diagnosis.result.counts.items() if n}
    outcomes = store.sql("SELECT outcome, count(*) AS n FROM tide_detections GROUP BY 1")
    assert dict(outcomes.iter_rows()) == {"tp": 649, "fp": 85}
    assert store.sql("SELECT count(*) FILTER (WHERE used) AS n FROM tide_ground_truths").item() == 649
    assert diagnosis.dt_matches().filter(pl.col("outcome") == 1).collect().height == 649
