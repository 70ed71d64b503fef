"""Figures draw the numbers the metrics compute."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from evalengine.cli import main
from evalengine import plots
from tests.conftest import PACKAGE_DATA

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    folder = tmp_path_factory.mktemp("plots")
    dets = json.loads(DT.read_text())
    for det in dets:
        det["score"] = round(1 - det["score"], 3)  # a second run with inverted confidence
    (folder / "inverted.json").write_text(json.dumps(dets))
    return ingest_coco(GT, DT, folder / "store").add_run(folder / "inverted.json", "inverted")


def test_pr_curves_per_category(store):
    table = store.evaluate().precision_recall()
    names = dict(store.categories().select("category_id", "name").collect().iter_rows())
    figure = plots.pr_curves(table, names, category_ids=[1, 3], iou_threshold=0.5)
    lines = figure.axes[0].get_lines()
    assert [line.get_label() for line in lines] == ["person", "car"]
    want = table.filter((pl.col("category_id") == 1) & (pl.col("iou_threshold") == 0.5) &
                        (pl.col("area_range") == "all") & (pl.col("max_dets") == 100)).sort("recall_threshold")
    np.testing.assert_array_equal(lines[0].get_ydata(), want["precision"].to_numpy())


def test_ap_by_size_bars(store):
    summaries = {run: store.evaluate(run=run).summary() for run in ("default", "inverted")}
    figure = plots.ap_by_size(summaries)
    heights = [patch.get_height() for patch in figure.axes[0].patches]
    want = [dict(summary.iter_rows())[m] for summary in summaries.values() for m in ("AP", "APs", "APm", "APl")]
    np.testing.assert_allclose(heights, want, rtol=0, atol=0)


def test_recall_iou_is_the_class_mean_recall(store):
    table = store.evaluate().ap_table()
    line = plots.recall_iou({"default": table}).axes[0].get_lines()[0]
    at = table.filter((pl.col("area_range") == "all") & (pl.col("max_dets") == 100) & (pl.col("recall") > -1))
    want = at.group_by("iou_threshold").agg(pl.col("recall").mean()).sort("iou_threshold")
    np.testing.assert_array_equal(line.get_ydata(), want["recall"].to_numpy())
    assert np.mean(line.get_ydata()) == pytest.approx(store.evaluate().stats()[8], abs=1e-12)  # AR100


def test_plot_commands_write_images(tmp_path, store):
    for kind, extra in (("pr", []), ("recall-iou", ["--runs", "default", "inverted"]),
                        ("ap-by-size", ["--runs", "default", "inverted"]),
                        ("compare", ["--runs", "default", "inverted"])):
        out = tmp_path / f"{kind}.png"
        assert main(["plot", str(store.path), kind, "--out", str(out), *extra]) == 0
        assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_proposal_curves_draw_the_recall_and_ar_tables(tmp_path):
    from evalengine.api import ingest_proposals

    store = ingest_proposals(GT, DT, tmp_path / "p")
    evaluation = store.evaluate_proposals()
    curve = evaluation.recall_iou_curve()
    line = plots.proposal_recall_iou({"proposals": curve}, 100).axes[0].get_lines()[0]
    want = curve.filter(pl.col("budget") == 100).sort("iou_threshold")
    np.testing.assert_array_equal(line.get_ydata(), want["recall"].to_numpy())
    np.testing.assert_array_equal(line.get_xdata(), want["iou_threshold"].to_numpy())
    ar = evaluation.average_recall()
    line = plots.ar_by_budget({"proposals": ar}).axes[0].get_lines()[0]
    np.testing.assert_array_equal(line.get_ydata(), ar.sort("budget")["ar"].to_numpy())
    np.testing.assert_array_equal(line.get_xdata(), ar.sort("budget")["mean_proposals"].to_numpy())
    for kind in ("proposal-recall-iou", "ar-budget"):
        assert main(["plot", str(tmp_path / "p"), kind, "--out", str(tmp_path / f"{kind}.png")]) == 0
        assert (tmp_path / f"{kind}.png").stat().st_size > 1000


def test_tide_bars():
    from evalengine import api as tide_api
    from tests.conftest import PACKAGE_DATA
    result = tide_api.tide((PACKAGE_DATA / "instances_val2014_100.json",
                            PACKAGE_DATA / "instances_val2014_fakebbox100_results.json")).result
    figure = plots.tide_errors({"default": result})
    heights = [bar.get_height() for bar in figure.axes[0].patches]
    assert heights == [result.main[name] for name in ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss")]
    assert [t.get_text() for t in figure.axes[1].get_xticklabels()] == ["FalsePos", "FalseNeg"]
    plots.close(figure)


def test_borji_bars_draw_the_stage_table_and_the_error_shares(store):
    from evalengine import api

    diagnosis = api.borji(store)
    table, errors = diagnosis.table(("AP", "AP50")), diagnosis.error_counts()
    left, right = plots.borji_diagnosis(table, errors).axes[:2]
    heights = [patch.get_height() for patch in left.patches]
    want = [100 * value for row in table.iter_rows() for value in row[1:]]
    np.testing.assert_allclose(heights, want, rtol=0, atol=1e-12)
    assert [tick.get_text() for tick in left.get_xticklabels()] == ["mAP", "− Cls (Type I)", "+ Local.",
                                                                   "− Duplicates", "+ Misses", "snap only"]
    shares = [patch.get_height() for patch in right.patches]  # one stack layer per error, over the sizes
    want = [100 * f for e in ("cls_bg", "loc", "dup", "miss") for f in errors.filter(pl.col("error") == e)["fraction"]]
    np.testing.assert_allclose(shares, want, rtol=0, atol=1e-12)
    plots.close(left.figure)
