"""Golden tests of the proposal metrics against Hosang et al.'s published data (tests/data/hosang)."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.metrics.correlation import metric_ap_correlation, recall_curve_metrics
from evalengine.metrics.recall import recall_curve_ar
from tests.conftest import DATA

HOSANG = DATA / "hosang"
# the methods of Table 3 (12 methods and 4 baselines); the EdgeBoxes variants of Fig. 15
TABLE3 = ["Objectness", "Rahtu", "SelectiveSearch", "RandomizedPrims", "Uniform", "Gaussian", "CPMC", "Bing",
          "Endres", "Rantalankila", "Superpixels", "Sliding window", "EdgeBoxes", "MCG", "Rigor", "Geodesic"]
EDGE_BOXES = ["EdgeBoxes50", "EdgeBoxes55", "EdgeBoxes60", "EdgeBoxes65", "EdgeBoxes", "EdgeBoxes75", "EdgeBoxes80",
              "EdgeBoxes85", "EdgeBoxes90"]


@pytest.fixture(scope="module")
def published():
    return json.loads((HOSANG / "voc07_test_recall_published.json").read_text())


def _recall_table(published) -> pl.DataFrame:
    names = [m["name"] for m in published["methods"]]
    thresholds = published["iou_thresholds"]
    return pl.DataFrame([{"method": name, "iou_threshold": t, "recall": r}
                         for name, curve in zip(names, published["recalls"]) for t, r in zip(thresholds, curve)])


def _detector(file: str, detector: str, published) -> pl.DataFrame:
    aps = json.loads((HOSANG / file).read_text())["aps"]
    names = [m["name"] for m in published["methods"]]  # the toolbox's files list methods in the same order
    return pl.DataFrame({"method": names, "detector": detector, "ap": aps})


def test_ar_from_published_recall_curves(published):
    """Trapezoid over the 21 stored points of each curve gives the published AR (0.001 grid) within 3e-4."""
    thresholds = np.array(published["iou_thresholds"])
    for method, curve, ar in zip(published["methods"], published["recalls"], published["ARs"]):
        assert abs(recall_curve_ar(np.array(curve), thresholds) - ar) <= 3e-4, method["name"]


def test_ar_map_correlations_of_the_paper(published):
    recall = _recall_table(published)
    ar = pl.DataFrame({"method": [m["name"] for m in published["methods"]], "ar": published["ARs"]})
    nine_point = (recall.filter(pl.col("iou_threshold") <= 0.7 + 1e-12).group_by("method")
                  .agg(pl.col("recall").mean().alias("value")).with_columns(metric=pl.lit("ar_0.5_0.7_grid")))
    metrics = pl.concat([recall_curve_metrics(recall, ar), nine_point.select("method", "metric", "value")])
    detectors = pl.concat([_detector("voc07_test_detector_frcn_aps.json", "frcn", published),
                           _detector("voc07_test_detector_rcnn_aps.json", "rcnn", published),
                           _detector("voc07_test_detector_frcn_noregr_aps.json", "frcn_noregr", published)])

    table3 = metric_ap_correlation(metrics.filter(pl.col("method").is_in(TABLE3)), detectors)
    row = table3.filter((pl.col("detector") == "frcn") & (pl.col("metric") == "ar_0.5_0.7_grid"))
    assert row.get_column("n_methods").item() == 16
    assert round(row.get_column("pearson").item(), 3) == 0.949  # §5.4: AR over 0.5–0.7, Fast R-CNN + regression

    fig15 = metric_ap_correlation(metrics.filter(pl.col("method").is_in(EDGE_BOXES) & (pl.col("metric") == "ar")),
                                  detectors)
    pearson = dict(zip(fig15.get_column("detector"), fig15.get_column("pearson")))
    assert fig15.get_column("n_methods").unique().to_list() == [9]
    assert round(pearson["rcnn"], 3) == 0.985
    assert round(pearson["frcn_noregr"], 3) == 0.974
    # Fig. 13: recall at 0.5 only weakly correlated, > 0.9 around 0.7 for Fast R-CNN without regression
    noregr = table3.filter(pl.col("detector") == "frcn_noregr")
    at = dict(zip(noregr.get_column("metric"), noregr.get_column("pearson")))
    assert at["recall@0.7"] > 0.9 > at["recall@0.5"]


def test_per_class_correlation_is_pearson_per_category(published):
    """Fig. 14: per class, Pearson across methods of per-class AR and per-class AP (here recomputed with NumPy)."""
    names = [m["name"] for m in published["methods"]]
    aps = json.loads((HOSANG / "voc07_test_detector_frcn_aps.json").read_text())["aps_per_class"]
    metrics = pl.DataFrame([{"method": n, "category_id": c + 1, "metric": "ar", "value": v}
                            for n, per_class in zip(names, published["ARs_per_class"]) for c, v in enumerate(per_class)])
    detector = pl.DataFrame([{"method": n, "category_id": c + 1, "detector": "frcn", "ap": v}
                             for n, per_class in zip(names, aps) for c, v in enumerate(per_class)])
    table = metric_ap_correlation(metrics.filter(pl.col("method").is_in(TABLE3)),
                                  detector.filter(pl.col("method").is_in(TABLE3)))
    assert table.height == 20 and table.get_column("n_methods").unique().to_list() == [16]
    rows = [names.index(m) for m in TABLE3]
    for c in range(20):
        ar = [published["ARs_per_class"][i][c] for i in rows]
        ap = [aps[i][c] for i in rows]
        got = table.filter(pl.col("category_id") == c + 1).get_column("pearson").item()
        assert got == pytest.approx(np.corrcoef(ar, ap)[0, 1], abs=1e-12)
