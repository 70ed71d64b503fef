"""The ``analyze_*`` views equal the Python curves and APs (to 1e-12) on the bundled sample."""

import polars as pl

from evalengine import api
from evalengine.match.analyze import CURVES
from evalengine.store.paths import ACCUMULATION_FILE
from tests.conftest import PACKAGE_DATA


def _long(frame: pl.DataFrame, keys: list) -> pl.DataFrame:
    return frame.unpivot(index=keys, on=list(CURVES), variable_name="curve", value_name="want")


def _max_difference(got: pl.DataFrame, want: pl.DataFrame, keys: list, column: str) -> float:
    joined = got.join(want, on=keys, how="full", coalesce=True)
    assert joined.height == want.height == got.height
    return joined.select((pl.col(column) - pl.col("want")).abs().max()).item()


def test_analyze_views_equal_the_python_result(tmp_path):
    """analyze_ap and analyze_summary first computed in SQL (the mean of analyze_precision), then read from the AP table
    the analysis keeps once its result is computed (accumulation.parquet, the rows of its ap_table())."""
    store = api.ingest_coco(PACKAGE_DATA / "instances_val2014_100.json",
                            PACKAGE_DATA / "instances_val2014_fakebbox100_results.json", tmp_path / "s", n_shards=3)
    analysis = api.analyze(store)
    kept = analysis.matches_dir / ACCUMULATION_FILE
    assert not kept.exists()
    computed = _ap_views(store)
    result = analysis.result
    assert kept.exists() and pl.read_parquet(kept).equals(analysis.ap_table())
    stored = _ap_views(store)
    precision = store.sql("SELECT category_id, area_range, curve, recall_threshold, precision FROM analyze_precision "
                          "WHERE run = 'default'")
    want = result.precision_frame("category").drop("name", "supercategory").rename({"precision": "want"})
    assert _max_difference(precision, want, ["category_id", "area_range", "curve", "recall_threshold"],
                           "precision") == 0.0
    for ap, summary in (computed, stored):
        keys = ["category_id", "area_range"]
        assert _max_difference(ap, _long(result.ap_frame("category").select(*keys, *CURVES), keys),
                               [*keys, "curve"], "ap") < 1e-12
        overall = summary.filter(pl.col("scope") == "overall").drop("scope", "supercategory")
        assert _max_difference(overall, _long(result.ap_frame("overall"), ["area_range"]), ["area_range", "curve"],
                               "ap") < 1e-12
        per_super = summary.filter(pl.col("scope") == "supercategory").drop("scope")
        keys = ["supercategory", "area_range"]
        assert _max_difference(per_super, _long(result.ap_frame("supercategory"), keys), [*keys, "curve"],
                               "ap") < 1e-12
    outcomes = store.sql("SELECT curve, outcome, count(*) AS n FROM analyze_detections WHERE area_range = 'all' "
                         "GROUP BY ALL ORDER BY ALL")
    assert {(c, o): n for c, o, n in outcomes.iter_rows()}[("C75", "tp")] == 554  # pycocotools' (no ignore field)


def _ap_views(store) -> tuple:
    """``(analyze_ap, analyze_summary)`` of the run."""
    return (store.sql("SELECT category_id, area_range, curve, ap FROM analyze_ap"),
            store.sql("SELECT scope, supercategory, area_range, curve, ap FROM analyze_summary"))
