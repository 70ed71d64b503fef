"""The run tags and invariance views: ``runs`` (tags as a map), ``run_tags``, ``invariance_metrics`` and
``invariance_objects`` equal the Python tables; a store written before tags reads as having none."""

import json
import warnings

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco, invariance, open as open_store
from evalengine.errors import InputWarning
from tests.conftest import PACKAGE_DATA

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("invariance")
    store = ingest_coco(GT, DT, folder / "store", n_shards=3)
    dets = json.loads(DT.read_text())
    rng = np.random.default_rng(0)
    for model, shift in (("a", 0.0), ("b", 2.0)):
        for perturbation, more in (("orig", 0.0), ("blur", 4.0)):
            moved = [dict(d, bbox=[d["bbox"][0] + shift + more * rng.random(), *d["bbox"][1:]]) for d in dets]
            path = folder / f"{model}-{perturbation}.json"
            path.write_text(json.dumps(moved))
            store = store.add_run(path, f"{model}-{perturbation}", tags={"model": model, "perturbation": perturbation,
                                                                          **({"level": "4"} if more else {})})
    return store


def test_runs_view_has_tags_as_a_map(store):
    runs = store.sql("SELECT run, tags['model'] AS model, tags['level'] AS level, cardinality(tags) AS n FROM runs")
    assert runs.rows() == [("default", None, None, 0), ("a-orig", "a", None, 2), ("a-blur", "a", "4", 3),
                           ("b-orig", "b", None, 2), ("b-blur", "b", "4", 3)]
    assert store.sql("SELECT * FROM run_tags WHERE run = 'a-blur' ORDER BY key").rows() == [
        ("a-blur", "level", "4"), ("a-blur", "model", "a"), ("a-blur", "perturbation", "blur")]


def test_invariance_views_equal_python(store):
    with pytest.warns(InputWarning, match="store:default$"):
        result = invariance(store, scheduler="sync")
    python = result.metrics().drop("store")
    sql = store.sql("SELECT * FROM invariance_metrics")
    assert sql.columns == python.columns
    key = ["run", "metric", "category_id"]
    joined = python.join(sql, on=key, how="full", nulls_equal=True, coalesce=True)
    assert joined.height == python.height == sql.height == 4 * 6 * (1 + 80)
    assert joined.filter(pl.col("value_right").is_null() | pl.col("value").is_null()).height == 0
    np.testing.assert_allclose(joined.get_column("value"), joined.get_column("value_right"), rtol=0, atol=1e-12)
    assert (joined.get_column("level") == joined.get_column("level_right")).all()
    objects = store.sql("SELECT * FROM invariance_objects").sort("run", "gt_id")
    want = result.objects().drop("store", "object_id").sort("run", "gt_id")
    assert objects.columns == want.columns
    assert objects.drop("score", "iou").equals(want.drop("score", "iou"))
    for column in ("score", "iou"):
        assert objects.get_column(column).is_null().equals(want.get_column(column).is_null())
        np.testing.assert_allclose(objects.get_column(column).fill_null(0), want.get_column(column).fill_null(0),
                                   rtol=0, atol=0)


def test_a_store_written_before_tags_reads_as_having_none(tmp_path):
    store = ingest_coco(GT, DT, tmp_path / "store")
    runs = store.path / "runs" / "part-0.parquet"
    pl.read_parquet(runs).drop("tags").write_parquet(runs)
    assert store.sql("SELECT run, cardinality(tags) AS n FROM runs").rows() == [("default", 0)]
    assert store.sql("SELECT count(*) AS n FROM run_tags").item() == 0
    store = open_store(store.path).add_run(DT, "blurred", tags={"perturbation": "blur"})
    assert store.sql("SELECT run, tags['perturbation'] AS p FROM runs").rows() == [("default", None),
                                                                                   ("blurred", "blur")]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        assert invariance(store).metrics().get_column("run").unique().to_list() == ["blurred"]
