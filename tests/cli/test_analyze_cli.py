"""``evalengine analyze``: the table and the documented JSON, from files and from a store; ``plot STORE analyze``;
one-line errors."""

import json

import polars as pl
import pytest

from evalengine import api
from tests.conftest import SAMPLE_DT as DT
from tests.conftest import SAMPLE_GT as GT
from tests.helpers import coco_dt, coco_gt, write_inputs
from tests.helpers import run_cli as _run

CURVES = ["C75", "C50", "Loc", "Sim", "Oth", "BG", "FN"]


def test_table_is_the_overall_ap_per_area_range(capsys):
    status, out, err = _run(capsys, "analyze", "--gt", GT, "--dt", DT)
    assert status == 0 and err == ""
    lines = out.splitlines()
    assert lines[0].startswith("COCO analyze (MATLAB CocoEval.analyze), maxDets 100: each curve's AP, mean over the 80")
    assert [cell.strip() for cell in lines[2].strip("│").split("┆")] == ["area", *CURVES]
    assert [cell.strip() for cell in lines[4].strip("│").split("┆")] == [
        "all", ".501", ".610", ".613", ".624", ".677", ".677", "1.00"]
    assert [line.split("┆")[0].strip("│ ") for line in lines[4:8]] == ["all", "small", "medium", "large"]


def test_json_shape_and_values(capsys, tmp_path):
    status, out, _ = _run(capsys, "analyze", "--gt", GT, "--dt", DT, "--json")
    got = json.loads(out)
    assert status == 0
    assert list(got) == ["curves", "area_ranges", "max_dets", "overall", "per_supercategory", "per_category"]
    assert got["curves"] == CURVES and got["area_ranges"] == ["all", "small", "medium", "large"]
    assert got["max_dets"] == 100
    assert list(got["overall"]["all"]) == CURVES
    assert round(got["overall"]["all"]["Oth"], 6) == 0.677351
    assert len(got["per_category"]) == 80 and len(got["per_supercategory"]) == 12
    dog = got["per_category"]["18"]
    assert (dog["name"], dog["supercategory"], list(dog["ap"])) == ("dog", "animal", got["area_ranges"])
    result = api.analyze((GT, DT)).result
    want = result.ap_frame("supercategory").filter(pl.col("supercategory") == "animal").row(0, named=True)
    assert got["per_supercategory"]["animal"]["all"] == {curve: want[curve] for curve in CURVES}
    store = api.ingest_coco(GT, DT, tmp_path / "store", n_shards=2)
    status, out, _ = _run(capsys, "analyze", store.path, "--json", "--scheduler", "sync")
    assert status == 0 and json.loads(out) == got


def test_plot_analyze_writes_a_figure(capsys, tmp_path):
    pytest.importorskip("matplotlib")
    store = api.ingest_coco(GT, DT, tmp_path / "store")
    figures = ((), "overall.png"), (("--categories", "18"), "dog.png"), (("--supercategory", "animal"), "a.png")
    for argv, name in figures:
        status, out, _ = _run(capsys, "plot", store.path, "analyze", "--out", tmp_path / name, *argv)
        assert status == 0 and out == f"figure written to {tmp_path / name}\n" and (tmp_path / name).stat().st_size
    status, _, err = _run(capsys, "plot", store.path, "analyze", "--out", tmp_path / "x.png", "--categories", "999")
    assert status == 2 and err == "evalengine: error: category 999: not a category of the ground truth\n"
    status, _, err = _run(capsys, "plot", store.path, "analyze", "--out", tmp_path / "x.png", "--categories", "1", "2")
    assert status == 2 and "one category (--categories ID) or one --supercategory" in err


def test_errors_are_one_line(capsys, tmp_path):
    status, _, err = _run(capsys, "analyze", "--gt", GT)
    assert status == 2 and err == "evalengine: error: analyze: give a STORE, or --gt and --dt (not both)\n"
    gt = coco_gt([[0, 0, 10, 10]])  # categories without supercategory
    gt_path, dt_path = write_inputs(tmp_path, gt, coco_dt([[0, 0, 10, 10]], [0.9]))
    status, _, err = _run(capsys, "analyze", "--gt", gt_path, "--dt", dt_path)
    assert status == 2 and err == (f"evalengine: error: {gt_path}: category 1 ('c1') has no supercategory: COCO "
                                   "analyze's Sim curve compares a category with the others of its supercategory\n")
