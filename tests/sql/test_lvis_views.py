"""The ``lvis_*`` views against lvis-api 0.5.3 (:mod:`tests.lvis_reference`) on random federated sets, both ways
``lvis_ap`` is served: computed in SQL from a match table alone (its run not yet accumulated: ``lvis_ap_pending``),
and read from the AP table an LVIS evaluation keeps beside it (``accumulation.parquet``: ``lvis_ap_tables``);
``get_results`` and every category's AP to 1e-12, the two ways row for row."""

import numpy as np
import polars as pl
import pytest

from evalengine.api import LvisProtocol, evaluate_store_lvis
from evalengine.api.lvis import ingest_lvis
from evalengine.store.paths import ACCUMULATION_FILE
from tests.helpers import write_inputs
from tests.lvis_reference import lvis_api, per_class, random_lvis

AP_KEYS = ["protocol", "run", "category_id", "iou_threshold", "area_range"]


def _views(store) -> tuple:
    results = store.sql("SELECT metric, value FROM lvis_results WHERE protocol = 'lvis' AND run = 'default'")
    classes = store.sql("SELECT category_id, ap FROM lvis_per_class_ap WHERE run = 'default'")
    ap = store.sql("SELECT * FROM lvis_ap").sort(AP_KEYS)
    return results, classes, ap


def _check(results, classes, ref) -> None:
    assert results["metric"].to_list() == list(ref.results)
    np.testing.assert_allclose(results["value"].to_numpy(), [float(v) for v in ref.results.values()], rtol=0,
                               atol=1e-12)
    expected = per_class(ref)
    assert sorted(classes["category_id"].to_list()) == sorted(expected)
    np.testing.assert_allclose(classes["ap"].to_numpy(), [expected[c] for c in classes["category_id"]], rtol=0,
                               atol=1e-12)


@pytest.mark.parametrize("seed", range(12))
def test_lvis_views_computed_and_kept_equal_lvis_api(tmp_path, seed):
    gt, dt = random_lvis(seed)
    ref = lvis_api(gt, dt)
    store = ingest_lvis(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=1 + seed % 3)
    matches_dir = store.match(LvisProtocol(), "default")
    assert not (matches_dir / ACCUMULATION_FILE).exists()
    results, classes, computed = _views(store)  # lvis_ap in SQL (the table is pending)
    _check(results, classes, ref)

    evaluate_store_lvis(store)  # the Python accumulation keeps the run's AP table
    assert (matches_dir / ACCUMULATION_FILE).exists()
    results, classes, kept = _views(store)
    _check(results, classes, ref)
    assert kept.select(AP_KEYS).equals(computed.select(AP_KEYS))
    for column in ("ap", "recall"):
        np.testing.assert_allclose(kept[column].to_numpy(), computed[column].to_numpy(), rtol=0, atol=1e-12)
    assert kept.height == computed.height == len(gt["categories"]) * 10 * 4


def test_a_slice_keeps_no_table(tmp_path):
    """An image slice's accumulation is not the run's: it writes nothing (the views stay computed in SQL)."""
    gt, dt = random_lvis(3)
    store = ingest_lvis(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=2)
    evaluation = evaluate_store_lvis(store)
    (evaluation.matches_dir / ACCUMULATION_FILE).unlink()
    evaluation.slice([gt["images"][0]["id"]]).results()
    assert not (evaluation.matches_dir / ACCUMULATION_FILE).exists()
    assert store.sql("SELECT count(*) AS n FROM lvis_ap_tables")["n"].item() == 0
    assert pl.DataFrame(store.sql("SELECT * FROM lvis_ap")).height > 0
