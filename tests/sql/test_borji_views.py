"""The ``borji_*`` views equal the Python tables: the labels, every stage's match rows and the errors per size."""

import polars as pl

from evalengine import api
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import write_inputs


def _check(store, diagnosis, protocol: str) -> None:
    where = f"WHERE protocol = '{protocol}'"
    view = store.sql(f"SELECT * EXCLUDE (protocol, run) FROM borji_detections {where} ORDER BY det_id")
    assert view.equals(diagnosis.detections().sort("det_id").collect().select(view.columns))
    view = store.sql(f"SELECT * EXCLUDE (protocol, run) FROM borji_ground_truths {where} ORDER BY gt_id")
    assert view.equals(diagnosis.ground_truths().sort("gt_id").collect().select(view.columns))
    view = store.sql(f"SELECT area_range, error, count, fraction FROM borji_error_counts {where}")
    assert view.equals(diagnosis.error_counts())
    stage_dt, _ = diagnosis.stage_matches()
    names = pl.col("stage").replace_strict(list(range(6)), list(api.BORJI_STAGES), return_dtype=pl.String)
    view = store.sql(f"SELECT * EXCLUDE (protocol, run) FROM borji_stage_matches {where} ORDER BY stage, det_id")
    assert view.equals(stage_dt.drop("protocol", "run", "shard").with_columns(names).sort("stage", "det_id").collect())


def test_borji_views_on_the_sample(tmp_path):
    store = api.ingest_coco(PACKAGE_DATA / "instances_val2014_100.json",
                            PACKAGE_DATA / "instances_val2014_fakebbox100_results.json", tmp_path / "s", n_shards=3)
    _check(store, api.borji(store), "borji")
    paper = api.borji(store, variant="paper")
    _check(store, paper, paper.protocol.match_key())
    counts = store.sql("SELECT protocol, count(*) AS n FROM borji_detections GROUP BY ALL ORDER BY ALL")
    assert counts.get_column("n").to_list() == [734, 734]


def test_borji_views_on_random_data_with_crowd(tmp_path):
    gt, dt = random_coco(3)
    store = api.ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "s", n_shards=2)
    _check(store, api.borji(store, duplicates="gt_major"), api.BorjiProtocol(duplicates="gt_major").match_key())
