"""The stored AP tables (``accumulation.parquet`` beside a COCO match table, written when the run's AP is computed) and
the views that read them: the same numbers as the SQL accumulation macros they replace and as the Python metrics."""

import dataclasses

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from evalengine.match.coco import CocoProtocol
from evalengine.store.fsck import fsck
from evalengine.store.paths import ACCUMULATION_FILE
from tests.generators import random_coco
from tests.helpers import write_inputs

KEY = ["protocol", "run", "category_id", "iou_threshold", "area_range", "max_dets"]
VIEWS = {  # view: its key columns (the rows are compared sorted by them)
    "ap_by_protocol": KEY,
    "ap": KEY,
    "coco_summary": ["protocol", "run", "metric"],
    "ap_by_run": ["run", "category_id", "area_range"],
    "run_comparison": ["run_a", "run_b", "category_id", "area_range"],
}
PROTOCOLS = [CocoProtocol(), CocoProtocol(use_cats=False, max_dets=(1, 10, 1000)),
             CocoProtocol(iou_thresholds=(0.5, 0.6, 0.75), max_dets=(2, 5, 50),
                          area_ranges=(("all", 0, 1e10), ("small", 0, 16**2), ("medium", 16**2, 48**2),
                                       ("large", 48**2, 1e10)))]


def _views(store) -> dict:
    return {view: store.sql(f"SELECT * FROM {view}").sort(key, nulls_last=True) for view, key in VIEWS.items()}


def _assert_same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert a.columns == b.columns and a.height == b.height
    for column in a.columns:
        if a[column].dtype.is_float():
            np.testing.assert_allclose(a[column].to_numpy(), b[column].to_numpy(), rtol=0, atol=1e-12)
        else:
            assert a[column].to_list() == b[column].to_list(), column


def _store(tmp_path, seed: int, runs: int = 1):
    gt, dt = random_coco(seed)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=2)
    for k in range(1, runs):  # another model: a third of the detections dropped, the others rescored (with ties)
        other = [dict(d, score=round((d["score"] * 7.919 + i * 0.37 * k) % 1, 2)) for i, d in enumerate(dt)
                 if i % 3 != 1]
        store = store.add_run(write_inputs(tmp_path, gt, other, names=("gt.json", f"dt{k}.json"))[1], run=f"r{k}")
    return store


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("protocol", PROTOCOLS, ids=["default", "pooled", "custom"])
def test_stored_tables_equal_the_macros_and_python(tmp_path, seed, protocol):
    store = _store(tmp_path, seed, runs=2)
    evaluations = {run: store.evaluate(protocol, run=run) for run in ("default", "r1")}
    files = {run: evaluation.matches_dir / ACCUMULATION_FILE for run, evaluation in evaluations.items()}
    assert not any(f.exists() for f in files.values())  # matching alone computes no AP
    computed = _views(store)  # the macros over the match tables
    evaluations["default"].stats()  # writes the AP table of the run
    assert files["default"].exists() and not files["r1"].exists()
    mixed = _views(store)  # one run from its stored table, the other computed
    evaluations["r1"].ap_table()
    stored = _views(store)
    for view in VIEWS:
        _assert_same(computed[view], mixed[view])
        _assert_same(computed[view], stored[view])
    for run, evaluation in evaluations.items():
        table = evaluation.ap_table().sort(KEY[2:])
        view = stored["ap_by_protocol"].filter(pl.col("run") == run).drop("protocol", "run").sort(KEY[2:])
        _assert_same(view, table)
        summary = stored["coco_summary"].filter(pl.col("run") == run)
        order = {name: i for i, name in enumerate(evaluation.summary()["metric"])}
        values = summary.sort(pl.col("metric").replace_strict(order))["value"].to_numpy()
        np.testing.assert_allclose(values, evaluation.stats(), rtol=0, atol=1e-12)


def test_the_stored_table_is_python_ap_table(tmp_path):
    store = _store(tmp_path, 3)
    evaluation = store.evaluate()
    table = evaluation.ap_table()
    written = pl.read_parquet(evaluation.matches_dir / ACCUMULATION_FILE)
    assert written.equals(table)
    assert store.sql("SELECT count(*) AS n FROM coco_ap_tables")["n"].item() == table.height


def test_slices_and_other_accumulations_write_nothing(tmp_path):
    store = _store(tmp_path, 5)
    evaluation = store.evaluate()
    target = evaluation.matches_dir / ACCUMULATION_FILE
    evaluation.slice(image_ids=store.image_ids("true")[:2]).stats()
    evaluation.slice(category_ids=evaluation.category_ids[:1]).stats()
    assert not target.exists()
    # same match table, other recall thresholds: protocol.json records the first protocol's, which the views use
    other = store.evaluate(dataclasses.replace(CocoProtocol(), recall_thresholds=(0.0, 0.5, 1.0)))
    assert other.matches_dir == evaluation.matches_dir
    other.stats()
    assert not target.exists()
    evaluation.stats()
    assert target.exists()


def test_fsck_keeps_a_good_table_and_removes_a_damaged_one(tmp_path):
    store = _store(tmp_path, 4)
    evaluation = store.evaluate()
    evaluation.stats()
    target = evaluation.matches_dir / ACCUMULATION_FILE
    assert fsck(store.path) == []
    target.write_bytes(b"not parquet")
    findings = fsck(store.path, repair=True)
    assert [f.path for f in findings] == [str(target)] and "AP table unreadable" in findings[0].problem
    assert not target.exists() and (evaluation.matches_dir / "dt").is_dir()
    assert store.sql("SELECT count(*) AS n FROM ap")["n"].item() == evaluation.ap_table().height
