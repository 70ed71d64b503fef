"""TIDE golden cases: tidecv 1.0.1's own outputs (tests/data/tide_official/) on the bundled val2014 sample and the
torchmetrics inputs (a class with predictions but no ground truth, averaged as 0)."""

import json

import polars as pl
import pytest

from evalengine import api
from evalengine.api import ingest_coco
from evalengine.errors import InputError
from evalengine.match.tide import TideProtocol
from tests.conftest import DATA, PACKAGE_DATA

CASES = {
    "val2014_100": (PACKAGE_DATA / "instances_val2014_100.json",
                    PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"),
    "tm_inputs": (DATA / "torchmetrics_gt.json", DATA / "torchmetrics_dt.json"),
}


def _expected(case: str) -> dict:
    return json.loads((DATA / "tide_official" / f"expected_tide_{case}_bbox.json").read_text())


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("n_shards", [1, 4])
def test_equals_tidecv(case, n_shards):
    expected = _expected(case)
    got = api.tide(CASES[case], n_shards=n_shards).result
    assert got.ap50 == pytest.approx(expected["AP50_tide"], abs=1e-9)
    assert got.main == pytest.approx(expected["main_errors_dAP"], abs=1e-9)
    assert list(got.main) == ["Cls", "Loc", "Both", "Dupe", "Bkg", "Miss"]
    assert got.special == pytest.approx(expected["special_errors_dAP"], abs=1e-9)
    assert got.counts == expected["error_counts"]


@pytest.mark.parametrize("case", CASES)
def test_summary_is_tidecvs_text(case):
    got = api.tide(CASES[case])
    assert api.tide_summary(got.result, "run", got.protocol) == "\n".join(_expected(case)["summary_text"])


def test_frame_and_tables(tmp_path):
    diagnosis = api.tide(ingest_coco(*CASES["val2014_100"], tmp_path / "store"))
    frame = diagnosis.result.frame()
    assert frame.get_column("error").to_list() == ["Cls", "Loc", "Both", "Dupe", "Bkg", "Miss", "FalsePos", "FalseNeg"]
    assert frame.filter(pl.col("error") == "Cls").get_column("count").item() == 83
    dt = diagnosis.dt_matches().collect()
    # the bundled sample has 734 detections, no image with more than 100; 83 Cls errors, one of them fixable
    assert dt.height == 734
    assert dt.filter(pl.col("error") == 1).height == 83
    assert dt.filter(pl.col("outcome") == 1).height == diagnosis.gt_matches().collect().get_column("used").sum()
    # a second diagnosis reuses both tables
    again = api.tide(api.open(tmp_path / "store"))
    assert again.matches_dir == diagnosis.matches_dir and again.result == diagnosis.result


def test_no_annotations_is_a_located_error(tmp_path):
    gt = {"images": [{"id": 1, "width": 9, "height": 9}], "categories": [{"id": 1, "name": "a"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 4, 4], "area": 16, "iscrowd": 1}]}
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps([{"image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2], "score": 1}]))
    with pytest.raises(InputError, match=r"gt\.json: no annotations \(outside crowd regions\)"):
        api.tide((tmp_path / "gt.json", tmp_path / "dt.json"))


@pytest.mark.parametrize("params", [dict(pos_threshold=0), dict(background_threshold=0.6),
                                    dict(max_dets=0), dict(background_threshold=float("nan"))])
def test_bad_parameters(params):
    with pytest.raises(Exception, match="threshold|max_dets"):
        TideProtocol(**params)


@pytest.mark.parametrize("scheduler", ["sync", "processes"])
def test_tide_table_identical_whatever_the_scheduler_and_shards(tmp_path, scheduler):
    want = api.tide(CASES["val2014_100"], n_shards=1, scheduler="threads")
    got = api.tide(CASES["val2014_100"], n_shards=5, scheduler=scheduler)
    for side in ("dt_matches", "gt_matches"):
        a, b = (getattr(d, side)().drop("shard").collect() for d in (want, got))
        assert a.sort(a.columns[2]).equals(b.sort(b.columns[2]))
    assert got.result == want.result
