"""The DuckDB views give the same numbers as the Python metrics (which equal pycocotools)."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from evalengine.cli import main
from evalengine.errors import EvalEngineError
from evalengine.match.coco import CocoProtocol
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import write_inputs

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.fixture(scope="module")
def fake100(tmp_path_factory):
    store = ingest_coco(GT, DT, tmp_path_factory.mktemp("s") / "store", n_shards=3)
    return store, store.evaluate()


def _sorted(frame: pl.DataFrame) -> pl.DataFrame:
    return frame.sort(["category_id", "iou_threshold", "area_range", "max_dets"])


def test_coco_summary_equals_python(fake100):
    store, evaluation = fake100
    summary = store.sql("SELECT metric, value FROM coco_summary WHERE run = 'default'")
    assert summary["metric"].to_list() == evaluation.summary()["metric"].to_list()
    np.testing.assert_allclose(summary["value"].to_numpy(), evaluation.stats(), rtol=0, atol=1e-12)


def test_ap_view_equals_python_ap_table(fake100):
    store, evaluation = fake100
    view = _sorted(store.sql("SELECT * FROM ap WHERE run = 'default' AND protocol = 'coco'"))
    assert view.columns == ["run", "protocol", "iou_type", "category_id", "iou_threshold", "area_range", "max_dets",
                            "ap", "recall"]
    table = _sorted(evaluation.ap_table())
    assert view.select("category_id", "iou_threshold", "area_range", "max_dets").equals(
        table.select("category_id", "iou_threshold", "area_range", "max_dets"))
    np.testing.assert_allclose(view["ap"].to_numpy(), table["ap"].to_numpy(), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(view["recall"].to_numpy(), table["recall"].to_numpy())


@pytest.mark.parametrize("seed", [2, 7, 13])
@pytest.mark.parametrize("protocol", [CocoProtocol(), CocoProtocol(use_cats=False, max_dets=(1, 10, 1000))])
def test_ap_by_protocol_on_random_data(tmp_path, seed, protocol):
    gt, dt = random_coco(seed)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=2)
    evaluation = store.evaluate(protocol)
    view = _sorted(store.sql(f"SELECT * FROM ap_by_protocol WHERE protocol = '{protocol.match_key()}'"))
    table = _sorted(evaluation.ap_table())
    np.testing.assert_allclose(view["ap"].to_numpy(), table["ap"].to_numpy(), rtol=0, atol=1e-12)
    np.testing.assert_array_equal(view["recall"].to_numpy(), table["recall"].to_numpy())


def test_image_counts_equal_python(fake100):
    store, evaluation = fake100
    for threshold in (0.5, 0.75):
        view = store.sql(f"SELECT image_id, tp, fp, fn, n_gt, ignored_dt FROM image_counts "
                         f"WHERE run = 'default' AND iou_threshold = {threshold} ORDER BY image_id")
        assert view.equals(evaluation.per_image_counts(iou_threshold=threshold))


def test_detection_outcomes_join_metadata(fake100):
    store, evaluation = fake100
    outcomes = store.sql("SELECT outcome, count(*) AS n, count(matched_gt_id) AS with_partner, "
                         "min(matched_iou) AS lowest_iou, count(file_name) AS with_file "
                         "FROM detection_outcomes WHERE iou_threshold = 0.5 GROUP BY outcome ORDER BY outcome")
    counts = evaluation.per_image_counts(iou_threshold=0.5)
    by_outcome = {row["outcome"]: row for row in outcomes.iter_rows(named=True)}
    assert by_outcome["tp"]["n"] == counts["tp"].sum() and by_outcome["fp"]["n"] == counts["fp"].sum()
    assert by_outcome["tp"]["with_partner"] == by_outcome["tp"]["n"] and by_outcome["tp"]["lowest_iou"] >= 0.5
    assert all(row["with_file"] == row["n"] for row in by_outcome.values())


def test_pr_curve_ends_at_the_final_recall(fake100):
    store, evaluation = fake100
    last = store.sql("SELECT category_id, iou_threshold, area_range, max_dets, max(recall) AS recall "
                     "FROM pr_curve WHERE protocol = 'coco' GROUP BY ALL")
    table = evaluation.ap_table().join(last, on=["category_id", "iou_threshold", "area_range", "max_dets"])
    assert table.height > 0
    np.testing.assert_array_equal(table["recall"].to_numpy(), table["recall_right"].to_numpy())


def test_views_before_matching(tmp_path):
    store = ingest_coco(GT, DT, tmp_path / "store")
    assert store.sql("SELECT count(*) AS n FROM dt")["n"].to_list() == [734]
    with pytest.raises(EvalEngineError, match="exist after `evalengine evaluate STORE`"):
        store.sql("SELECT * FROM ap")


def test_duckdb_connection_for_notebooks(fake100):
    store, _ = fake100
    con = store.duckdb()
    assert con.execute("SELECT count(*) FROM categories").fetchall() == [(80,)]
    assert con.sql("SELECT * FROM coco_summary").arrow().read_all().num_rows == 12


def test_sql_command(capsys, tmp_path, fake100):
    store, evaluation = fake100
    path = str(store.path)
    assert main(["sql", path, "SELECT metric, value FROM coco_summary", "--format", "json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["value"] for r in rows] == pytest.approx(evaluation.stats(), abs=1e-12)
    query = tmp_path / "q.sql"
    query.write_text("SELECT category_id, ap FROM ap WHERE iou_threshold = 0.5 AND area_range = 'all' "
                     "AND max_dets = 100 ORDER BY category_id")
    assert main(["sql", path, "--file", str(query), "--format", "csv"]) == 0
    assert capsys.readouterr().out.splitlines()[0] == "category_id,ap"
    out = tmp_path / "ap.parquet"
    assert main(["sql", path, "--file", str(query), "--format", "parquet", "--out", str(out)]) == 0
    assert pl.read_parquet(out).height == 80
    assert main(["sql", path, "SELECT nope FROM ap"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("evalengine: error: SQL error: Binder Error") and "nope" in err
