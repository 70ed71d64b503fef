"""Operating points and deployment thresholds: every point equals a re-evaluation of the detections it keeps (the
prefix property), the LRP-optimal point equals oLRP's ``score`` search, the SQL view equals the frame, and the kept
detections are exactly those at or above their category's threshold."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import CocoProtocol, evaluate_coco, ingest_coco
from evalengine.metrics.operating_points import optimal_thresholds
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import write_inputs

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
COUNTS = ["n_gt", "n_tp", "n_fp", "n_fn"]


@pytest.fixture(scope="module")
def sample(tmp_path_factory):
    store = ingest_coco(GT, DT, tmp_path_factory.mktemp("points") / "store", n_shards=3)
    return store, store.evaluate()


def _last_points(evaluation) -> pl.DataFrame:
    """Each category's point at its lowest score: everything the evaluation holds."""
    return evaluation.operating_points().group_by("category_id").last()


@pytest.mark.parametrize("seed", range(12))
def test_each_point_is_the_evaluation_of_the_detections_it_keeps(tmp_path, seed):
    gt, dt = random_coco(seed)
    full = evaluate_coco(*write_inputs(tmp_path, gt, dt), CocoProtocol(), accumulate=False).operating_points()
    scores = sorted({d["score"] for d in dt}, reverse=True)
    for s in scores[:: max(1, len(scores) // 4)]:
        kept = [d for d in dt if d["score"] >= s]
        folder = tmp_path / f"s{scores.index(s)}"
        folder.mkdir()
        again = _last_points(evaluate_coco(*write_inputs(folder, gt, kept), CocoProtocol(), accumulate=False))
        at_s = (full.filter(pl.col("threshold") >= s).group_by("category_id").last()
                .join(again.select("category_id"), on="category_id"))
        mine = at_s.sort("category_id").select("category_id", *COUNTS, "precision", "recall", "f1", "lrp")
        theirs = again.sort("category_id").select(mine.columns)
        assert mine.select("category_id", *COUNTS).equals(theirs.select("category_id", *COUNTS))
        for column in ("precision", "recall", "f1", "lrp"):
            a, b = mine.get_column(column).to_numpy(), theirs.get_column(column).to_numpy()
            assert np.allclose(a, b, rtol=0, atol=1e-12, equal_nan=True), (seed, s, column)


def test_point_values_follow_their_definitions(sample):
    _, evaluation = sample
    points = evaluation.operating_points()
    tp, fp, fn = (points.get_column(c).to_numpy() for c in ("n_tp", "n_fp", "n_fn"))
    precision = np.where(tp + fp > 0, tp / np.maximum(tp + fp, 1), np.nan)
    recall = tp / (tp + fn)
    assert np.allclose(points.get_column("precision").to_numpy(), precision, equal_nan=True, atol=1e-15)
    assert np.allclose(points.get_column("recall").to_numpy(), recall, atol=1e-15)
    with np.errstate(invalid="ignore", divide="ignore"):
        f1 = np.where(tp > 0, 2 * precision * recall / (precision + recall), 0.0)
    assert np.allclose(points.get_column("f1").to_numpy(), f1, atol=1e-15)
    # LRP from its components (spec-detection §2.7), wherever there is a true positive
    with_tp = points.filter(pl.col("n_tp") > 0)
    loc, p_fp, p_fn = (with_tp.get_column(c).to_numpy() for c in ("lrp_loc", "lrp_fp", "lrp_fn"))
    identity = (loc / 0.5 + p_fp / (1 - p_fp) + p_fn / (1 - p_fn)) / (1 + p_fp / (1 - p_fp) + p_fn / (1 - p_fn))
    assert np.allclose(with_tp.get_column("lrp").to_numpy(), identity, atol=1e-12)
    # thresholds are distinct and descending within a category
    assert points.group_by("category_id").agg((pl.col("threshold").diff() < 0).all().alias("ok"))["ok"].fill_null(True).all()


def test_lrp_optimal_point_is_the_score_search_optimum(sample):
    _, evaluation = sample
    best = evaluation.thresholds("lrp")
    olrp = (evaluation.lrp(search="score").table.filter((pl.col("area_range") == "all") & (pl.col("n_tp") > 0))
            .select("category_id", "olrp", pl.col("threshold").alias("s_star"), "n_tp", "n_fp", "n_fn"))
    joined = best.join(olrp, on="category_id", how="full", coalesce=True)
    assert joined.height == best.height == olrp.height > 50
    assert joined.filter(pl.col("lrp") != pl.col("olrp")).is_empty()  # bit for bit: the same arithmetic
    assert joined.filter(pl.col("threshold") != pl.col("s_star")).is_empty()
    assert joined.filter(pl.col("n_tp") != pl.col("n_tp_right")).is_empty()


def test_f1_optimal_point_has_the_greatest_f1_and_ties_keep_fewest(sample):
    _, evaluation = sample
    points = evaluation.operating_points()
    best = optimal_thresholds(points, "f1")
    top = points.filter(pl.col("n_tp") > 0).group_by("category_id").agg(pl.col("f1").max().alias("top"))
    joined = best.join(top, on="category_id")
    assert (joined["f1"] == joined["top"]).all()
    tied = points.join(joined.select("category_id", "top"), on="category_id").filter(pl.col("f1") == pl.col("top"))
    highest = tied.group_by("category_id").agg(pl.col("threshold").max().alias("highest"))
    assert (best.join(highest, on="category_id").select((pl.col("threshold") == pl.col("highest")).all())).item()


def test_kept_detections_are_those_at_or_above_their_category_threshold(sample):
    store, evaluation = sample
    best = evaluation.thresholds("lrp")
    kept = evaluation.kept_detections(best).collect()
    limits = dict(best.select("category_id", "threshold").iter_rows())
    detections = json.loads(DT.read_text())
    expected = sorted(i + 1 for i, d in enumerate(detections)
                      if d["category_id"] in limits and d["score"] >= limits[d["category_id"]])
    assert sorted(kept.get_column("det_id").to_list()) == expected


def test_sql_view_equals_the_frame(sample):
    store, evaluation = sample
    points = evaluation.operating_points()
    view = store.sql("SELECT category_id, threshold, n_gt, n_tp, n_fp, n_fn, precision, recall, f1, lrp "
                     "FROM operating_points WHERE protocol = 'coco' AND iou_threshold = 0.5")
    joined = points.join(view, on=["category_id", "threshold"], how="full", coalesce=True)
    assert joined.height == points.height == view.height
    for column in ("n_gt", "n_tp", "n_fp", "n_fn"):
        assert (joined[column] == joined[f"{column}_right"]).all()
    for column in ("precision", "recall", "f1", "lrp"):
        assert np.allclose(joined[column].to_numpy(), joined[f"{column}_right"].to_numpy(), atol=1e-12,
                           equal_nan=True)


def test_other_iou_threshold_of_the_table(sample):
    _, evaluation = sample
    at_75 = evaluation.operating_points(iou_threshold=0.75)
    at_50 = evaluation.operating_points()
    assert at_75.height == at_50.height
    assert (at_75["n_tp"] <= at_50["n_tp"]).all() and (at_75["n_tp"] < at_50["n_tp"]).any()
