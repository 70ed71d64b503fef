"""``evalengine lrp`` and ``thresholds``: the same numbers through every door, the official summary's layout,
the kept detections written atomically outside the store, and one-line errors."""

import json

import polars as pl
import pytest

from evalengine.api import evaluate_coco, ingest_coco
from tests.conftest import DATA
from tests.conftest import SAMPLE_DT as DT
from tests.conftest import SAMPLE_GT as GT
from tests.helpers import run_cli as _run


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return ingest_coco(GT, DT, tmp_path_factory.mktemp("lrp") / "store")


def test_files_and_store_give_the_api_summary(store, capsys):
    expected = evaluate_coco(GT, DT, accumulate=False).lrp().summary()
    status, out, _ = _run(capsys, "lrp", "--gt", GT, "--dt", DT, "--json")
    assert status == 0 and json.loads(out) == json.loads(json.dumps(expected))
    status, out, _ = _run(capsys, "lrp", store.path, "--json")
    assert status == 0 and json.loads(out) == json.loads(json.dumps(expected))
    assert set(expected) == {"olrp", "olrp_loc", "olrp_fp", "olrp_fn", "olrp_small", "olrp_medium", "olrp_large",
                             "per_class"}


def test_text_ends_with_the_official_summary_lines(store, capsys):
    status, out, _ = _run(capsys, "lrp", store.path)
    summary = evaluate_coco(GT, DT, accumulate=False).lrp().summary()
    lines = out.splitlines()
    assert status == 0 and lines[0] == "search: rank"
    assert lines[-16] == f"Optimal LRP             @[ IoU=0.50      | area=   all | maxDets=100 ] = {summary['olrp']:0.3f}"
    assert lines[-12] == (f"Optimal LRP             @[ IoU=0.50      | area= small | maxDets=100 ] = "
                          f"{summary['olrp_small']:0.3f}")


def test_searches_and_another_iou(store, capsys):
    values = {}
    for argv in (["--search", "rank"], ["--search", "score"], ["--search", "grid"],
                 ["--search", "grid", "--compare", ">"], ["--iou", "0.75"]):
        status, out, _ = _run(capsys, "lrp", store.path, "--json", *argv)
        assert status == 0
        values[" ".join(argv)] = json.loads(out)["olrp"]
    assert values["--search rank"] <= values["--search score"]  # a tie group kept whole is one of the rank prefixes
    assert values["--iou 0.75"] > values["--search rank"]
    # every grid threshold keeps a run of whole tie groups: the grid's optimum is never below the score search's
    assert values["--search grid"] >= values["--search score"] - 1e-12
    assert values["--search grid --compare >"] >= values["--search score"] - 1e-12


def test_thresholds_json_and_kept_detections(store, capsys, tmp_path):
    out_file = tmp_path / "kept.parquet"
    status, out, _ = _run(capsys, "thresholds", store.path, "--criterion", "f1", "--json", "--out", out_file)
    assert status == 0
    payload = json.loads(out)
    assert payload["criterion"] == "f1" and payload["iou_threshold"] == 0.5
    person = payload["per_class"]["1"]
    assert person["name"] == "person" and person["n_tp"] + person["n_fn"] == 250
    kept = pl.read_parquet(out_file)
    limits = {int(k): v["threshold"] for k, v in payload["per_class"].items()}
    assert kept.height == sum(1 for d in json.loads(DT.read_text())
                              if d["category_id"] in limits and d["score"] >= limits[d["category_id"]])
    assert not list(tmp_path.glob(".*"))  # no temporary file left
    status, _, err = _run(capsys, "thresholds", store.path, "--out", out_file)
    assert status == 2 and err.count("\n") == 1 and "already exists (--force replaces it)" in err


@pytest.mark.parametrize("argv, message", [
    (["lrp"], "give a STORE, or --gt and --dt (not both)"),
    (["lrp", "STORE", "--gt", GT, "--dt", DT], "give a STORE, or --gt and --dt (not both)"),
    (["lrp", "--gt", GT], "give a STORE, or --gt and --dt (not both)"),
    (["lrp", "STORE", "--search", "best"], "argument --search: invalid choice"),
    (["lrp", "STORE", "--iou", "1.5"], "--iou"),
    (["thresholds", "STORE", "--criterion", "ap"], "argument --criterion: invalid choice"),
])
def test_bad_arguments_are_one_line(store, capsys, argv, message):
    status, out, err = _run(capsys, *[store.path if a == "STORE" else a for a in argv])
    assert status == 2 and out == "" and err.count("\n") == 1 and message in err


@pytest.mark.parametrize("kind", ["lrp", "pr-optimal"])
def test_plots(store, capsys, tmp_path, kind):
    target = tmp_path / f"{kind}.png"
    status, _, _ = _run(capsys, "plot", store.path, kind, "--out", target, "--categories", 1, 3)
    assert status == 0 and target.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_iou_type_segm_gives_the_official_mask_values(capsys):
    """``--iou-type segm``: the official code's ``iouType='segm'`` numbers (tests/data/lrp_official)."""
    expected = json.loads((DATA / "lrp_official" / "expected_lrp_val2014_100_segm.json").read_text())["stats"]
    status, out, _ = _run(capsys, "lrp", "--gt", GT, "--dt", DATA / "cocoapi_fakesegm100_dt.json", "--iou-type",
                          "segm", "--json")
    got = json.loads(out)
    assert status == 0
    for name in ("oLRP", "oLRP_Loc", "oLRP_FP", "oLRP_FN", "oLRP_small", "oLRP_medium", "oLRP_large"):
        assert got[name.replace("oLRP", "olrp").lower()] == pytest.approx(expected[name], abs=1e-12), name


def test_iou_type_with_the_voc_protocol_is_one_line(capsys):
    status, _, err = _run(capsys, "lrp", "--protocol", "voc", "--gt", GT, "--dt", DT, "--iou-type", "segm")
    assert status == 2 and err.strip() == "evalengine: error: iou_type 'segm': the VOC protocol matches boxes only"
