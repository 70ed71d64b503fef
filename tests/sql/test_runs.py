"""Several runs in one store: adding runs atomically, comparing them in Python, SQL and the CLI."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from evalengine.cli import main
from evalengine.errors import InputError, StoreError
from tests.conftest import PACKAGE_DATA
from tests.reference import per_class, pycocotools_eval

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


def _jittered(tmp_path):
    """Run B: the fake results with every box shifted by 3 pixels (a worse localiser)."""
    dets = json.loads(DT.read_text())
    for det in dets:
        det["bbox"] = [det["bbox"][0] + 3.0, det["bbox"][1] + 3.0, det["bbox"][2], det["bbox"][3]]
    path = tmp_path / "shifted.json"
    path.write_text(json.dumps(dets))
    return path, dets


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
    folder = tmp_path_factory.mktemp("runs")
    shifted, dets = _jittered(folder)
    store = ingest_coco(GT, DT, folder / "store", n_shards=2, run="base").add_run(shifted, "shifted")
    return store, dets


def test_added_run_equals_pycocotools(two_runs):
    store, dets = two_runs
    assert store.runs == ["base", "shifted"]
    reference = pycocotools_eval(json.loads(GT.read_text()), dets)
    np.testing.assert_allclose(store.evaluate(run="shifted").stats(), reference.stats, rtol=0, atol=1e-12)


def test_compare_in_python_and_sql(two_runs):
    store, dets = two_runs
    table = store.compare(["base", "shifted"]).filter(pl.col("area_range") == "all")
    reference = per_class(pycocotools_eval(json.loads(GT.read_text()), dets))
    base = per_class(pycocotools_eval(json.loads(GT.read_text()), json.loads(DT.read_text())))
    for row in table.iter_rows(named=True):
        k = row["category_id"]
        assert row["ap_shifted"] == pytest.approx(reference[k][0], abs=1e-12)
        assert row["diff_shifted"] == pytest.approx(reference[k][0] - base[k][0], abs=1e-12)
    view = store.sql("SELECT category_id, ap_difference FROM run_comparison WHERE run_a = 'base' "
                     "AND run_b = 'shifted' AND area_range = 'all' ORDER BY category_id")
    joined = view.join(table, on="category_id")
    with_gt = sum(1 for values in base.values() if values[0] > -1)
    assert joined.height == table.height == with_gt == 70
    np.testing.assert_allclose(joined["ap_difference"], joined["diff_shifted"], rtol=0, atol=1e-12)
    assert (table["diff_shifted"] < 0).sum() > 40  # shifting boxes by 3 px hurts most classes


def test_compare_command(capsys, two_runs):
    store, _ = two_runs
    assert main(["compare", str(store.path), "base", "shifted", "--area-range", "small", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert rows and {"ap_base", "ap_shifted", "diff_shifted", "name"} <= rows[0].keys()
    assert {row["area_range"] for row in rows} == {"small"}


def test_add_run_refuses_duplicates_and_bad_input(tmp_path):
    store = ingest_coco(GT, DT, tmp_path / "store")
    with pytest.raises(StoreError, match="run 'default' already exists"):
        store.add_run(DT, "default")
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps([{"image_id": 7, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}]))
    with pytest.raises(InputError, match="image_id 7 not in the ground truth's images"):
        store.add_run(bad, "broken")
    assert sorted(p.name for p in (tmp_path / "store" / "dt").iterdir()) == ["run=default"]
    assert store.runs == ["default"]


def test_replacing_a_run_drops_its_stale_match_table(tmp_path):
    shifted, dets = _jittered(tmp_path)
    store = ingest_coco(GT, DT, tmp_path / "store")
    before = store.evaluate().stats()
    store = store.add_run(shifted, "default", overwrite=True)
    after = store.evaluate().stats()
    reference = pycocotools_eval(json.loads(GT.read_text()), dets)
    assert after != before
    np.testing.assert_allclose(after, reference.stats, rtol=0, atol=1e-12)
