"""The ``analyze`` match table and curves are identical whatever the shard count and the scheduler."""

import polars as pl

from evalengine import api
from tests.conftest import PACKAGE_DATA
from tests.helpers import write_inputs
from tests.metrics.analyze_reference import random_dataset

GT, DT = PACKAGE_DATA / "instances_val2014_100.json", PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


def _outputs(evaluation):
    dt = evaluation.dt_matches().drop("shard").sort("det_id").collect()
    gt = evaluation.gt_matches().drop("shard").sort("gt_id").collect()
    return dt, gt, evaluation.result.precision


def _assert_same(outputs):
    dt, gt, precision = outputs[0]
    assert dt.height > 0 and gt.height > 0
    for other_dt, other_gt, other_precision in outputs[1:]:
        assert other_dt.equals(dt) and other_gt.equals(gt)
        assert (other_precision == precision).all()


def test_shards_and_schedulers_agree_on_the_sample(tmp_path):
    outputs = []
    for n_shards, scheduler in ((1, "sync"), (7, "threads"), (4, "processes")):
        store = api.ingest_coco(GT, DT, tmp_path / f"s{n_shards}", n_shards=n_shards)
        outputs.append(_outputs(api.analyze(store, scheduler=scheduler, workers=2)))
    _assert_same(outputs)


def test_shards_agree_on_a_random_dataset_with_supercategories(tmp_path):
    gt, dt = random_dataset(3)
    paths = write_inputs(tmp_path, gt, dt)
    outputs = [_outputs(api.analyze(paths, n_shards=n_shards)) for n_shards in (1, 2, 5)]
    _assert_same(outputs)
    assert outputs[0][0].select(pl.col("ignored_bits").arr.first() > 0).to_series().any()
