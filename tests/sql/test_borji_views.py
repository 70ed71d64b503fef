"""The ``borji_*`` views equal the Python tables: the labels, every stage's match rows and the errors per size."""

import numpy as np
import polars as pl
import pytest

from evalengine import api
from evalengine.store.paths import ACCUMULATION_FILE
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.shape_generators import random_masks

STAGE_KEY = ["stage", "category_id", "iou_threshold", "area_range", "max_dets"]


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
    _check_stage_ap(store, paper)
    counts = store.sql("SELECT protocol, count(*) AS n FROM borji_detections GROUP BY ALL ORDER BY ALL")
    assert counts.get_column("n").to_list() == [734, 734]


def test_borji_views_on_random_data_with_crowd(tmp_path):
    gt, dt = random_coco(3)
    store = api.ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "s", n_shards=2)
    _check(store, api.borji(store, duplicates="gt_major"), api.BorjiProtocol(duplicates="gt_major").match_key())


def test_borji_views_on_masks(tmp_path):
    """A store with the box and the mask (segm, boundary) diagnoses of one run: each protocol's views equal its Python
    tables, and ``borji_stage_protocols`` says what each compared."""
    gt, dt = random_masks(5)
    store = api.ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "s", n_shards=2)
    for iou_type in ("bbox", "segm", "boundary"):
        diagnosis = api.borji(store, variant="paper", iou_type=iou_type)
        _check(store, diagnosis, diagnosis.protocol.match_key())
        _check_stage_ap(store, diagnosis)
    kinds = store.sql("SELECT DISTINCT iou_type FROM borji_stage_protocols ORDER BY ALL").get_column("iou_type")
    assert kinds.to_list() == ["bbox", "boundary", "segm"]


def _check_stage_ap(store, diagnosis) -> None:
    """borji_stage_summary and borji_stage_ap equal the Python stage summary and AP table to 1e-12, row for row: first
    by the COCO accumulation macros over the stage match tables, then from the AP tables the diagnosis keeps once it
    has accumulated every stage (accumulation.parquet, the rows of its ap_table())."""
    kept = diagnosis.matches_dir / ACCUMULATION_FILE
    assert not kept.exists()
    computed = _stage_views(store, diagnosis)
    python = diagnosis.summary()
    assert kept.exists() and pl.read_parquet(kept).equals(diagnosis.ap_table())
    stored = _stage_views(store, diagnosis)
    for summary in (computed[0], stored[0]):
        joined = python.join(summary, on=["stage", "metric"], how="full", coalesce=True, suffix="_sql")
        assert joined.height == python.height == 12 * len(api.BORJI_STAGES)
        np.testing.assert_allclose(joined["value_sql"].to_numpy(), joined["value"].to_numpy(), rtol=0, atol=1e-12)
    python = diagnosis.ap_table().sort(STAGE_KEY)
    for view in (computed[1], stored[1]):
        assert view.select(STAGE_KEY).equals(python.select(STAGE_KEY))
        np.testing.assert_allclose(view["ap"].to_numpy(), python["ap"].to_numpy(), rtol=0, atol=1e-12)
        np.testing.assert_allclose(view["recall"].to_numpy(), python["recall"].to_numpy(), rtol=0, atol=1e-12)


def _stage_views(store, diagnosis) -> tuple:
    """``(borji_stage_summary, borji_stage_ap)`` of the diagnosis' match table."""
    where = f"WHERE protocol = '{diagnosis.protocol.match_key()}' AND run = 'default'"
    return (store.sql(f"SELECT stage, metric, value FROM borji_stage_summary {where}"),
            store.sql(f"SELECT * EXCLUDE (protocol, run) FROM borji_stage_ap {where}").sort(STAGE_KEY))


@pytest.mark.parametrize("seed", [1, 4, 9])
def test_borji_stage_ap_view_equals_python(tmp_path, seed):
    """Both variants and both duplicate modes on random stores (crowd, empty images, ties): the stage AP of SQL is
    the Python one."""
    gt, dt = random_coco(seed)
    store = api.ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "s", n_shards=2)
    for variant in ("borji_ref", "paper"):
        for duplicates in ("coco", "gt_major"):
            _check_stage_ap(store, api.borji(store, variant=variant, duplicates=duplicates))
