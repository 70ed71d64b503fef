"""The formats through the command: each fixture of ``tests/data/formats/`` (one scene in YOLO, OpenImages CSV, CVAT,
LabelMe, and its COCO equivalents) prints what its COCO equivalent prints, ``ingest coco`` stores it, ``export`` writes
the per-object outcomes, and bad input is one line with exit status 2 and no store left behind."""

import json
import subprocess
import sys
from pathlib import Path

import polars as pl
import pytest

from evalengine.cli import main

DATA = Path(__file__).parent.parent / "data" / "formats"


def command(*argv) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "evalengine.cli", *map(str, argv)], capture_output=True, text=True,
                          timeout=600)


def run(capsys, *argv):
    code = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("name, gt, dt, extra", [
    ("yolo", DATA / "yolo", DATA / "yolo" / "pred", ["--images", DATA / "yolo_sizes.csv"]),
    ("openimages", DATA / "openimages" / "boxes.csv", DATA / "openimages" / "predictions.csv",
     ["--images", DATA / "openimages" / "sizes.csv"]),
    ("cvat", DATA / "cvat.xml", DATA / "cvat_coco_dt.json", []),
    ("labelme", DATA / "labelme", DATA / "labelme_coco_dt.json", []),
])
def test_each_format_prints_what_its_coco_equivalent_prints(capsys, name, gt, dt, extra):
    code, out, err = run(capsys, "coco", "--gt", gt, "--dt", dt, *extra, "--json", "--quiet")
    assert code == 0, err
    code, expected, err = run(capsys, "coco", "--gt", DATA / f"{name}_coco_gt.json", "--dt",
                              DATA / f"{name}_coco_dt.json", "--json", "--quiet")
    assert code == 0, err
    assert json.loads(out) == json.loads(expected)
    assert json.loads(out)["stats"][1] > 0.2  # the fixture's detections find their objects


def test_voc_protocol_of_openimages_csv(capsys):
    oi = DATA / "openimages"
    code, out, err = run(capsys, "voc", "--gt", oi / "boxes.csv", "--dt", oi / "predictions.csv", "--images",
                         oi / "sizes.csv", "--json", "--quiet")
    assert code == 0, err
    code, expected, _ = run(capsys, "voc", "--gt", DATA / "openimages_coco_gt.json", "--dt",
                            DATA / "openimages_coco_dt.json", "--json", "--quiet")
    assert json.loads(out) == json.loads(expected)
    assert set(json.loads(out)["per_class"]) <= {"/m/bicycle", "/m/car", "/m/dog", "/m/person"}


def test_ingest_then_export_both_formats(tmp_path):
    store = tmp_path / "store"
    result = command("ingest", "coco", "--gt", DATA / "yolo", "--dt", DATA / "yolo" / "pred", "--images",
                     DATA / "yolo_sizes.csv", "--store", store, "--quiet")
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith(f"store: {store} (")
    result = command("export", store, "--format", "fiftyone", "--iou-threshold", "0.75", "--out", tmp_path / "f.jsonl")
    assert result.returncode == 0, result.stderr
    rows = pl.read_ndjson(tmp_path / "f.jsonl")
    predictions, truths = rows.filter(pl.col("kind") == "prediction"), rows.filter(pl.col("kind") == "ground_truth")
    n_dt = len(json.loads((DATA / "yolo_coco_dt.json").read_text()))
    n_gt = len(json.loads((DATA / "yolo_coco_gt.json").read_text())["annotations"])
    assert (predictions.height, truths.height) == (n_dt, n_gt)
    tp = predictions.filter(pl.col("eval") == "tp")
    assert tp.height == truths.filter(pl.col("eval") == "tp").height > 0
    assert (tp.get_column("eval_iou") >= 0.75).all()
    # a true positive's partner names it back
    back = dict(zip(truths.get_column("id").cast(pl.String), truths.get_column("eval_id")))
    assert all(back[gt] == str(det) for det, gt in zip(tp.get_column("id"), tp.get_column("eval_id")))
    result = command("export", store, "--out", tmp_path / "c.json")
    assert result.returncode == 0, result.stderr
    results = json.loads((tmp_path / "c.json").read_text())
    assert [r["id"] for r in results] == list(range(1, n_dt + 1))
    assert {"bbox", "score", "matched_gt_id", "iou", "tp", "ignored"} <= results[0].keys()


def test_bad_input_is_one_line_and_leaves_no_store(tmp_path):
    labels = tmp_path / "y" / "labels"
    labels.mkdir(parents=True)
    (labels / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n3 0.5 0.5 0.2\n")
    (tmp_path / "sizes.csv").write_text("image,width,height\na.png,10,10\n")
    store = tmp_path / "store"
    result = command("ingest", "coco", "--gt", tmp_path / "y", "--dt", DATA / "yolo" / "pred", "--images",
                     tmp_path / "sizes.csv", "--store", store, "--quiet")
    assert result.returncode == 2 and result.stdout == ""
    assert result.stderr == (f"evalengine: error: {labels / 'a.txt'}: line 2: expected 5 fields 'class cx cy w h' or "
                             "a segment 'class x1 y1 … xn yn' of 3 or more points, found 4\n")
    assert not store.exists()
    result = command("export", tmp_path, "--out", tmp_path / "x.csv")
    assert result.returncode == 2 and result.stderr.startswith("evalengine: error: ")


def test_add_run_of_yolo_predictions_to_a_store(tmp_path):
    """A YOLO predictions folder added as a second run of a store gives that run the numbers of the one-shot path."""
    store = tmp_path / "store"
    result = command("ingest", "coco", "--gt", DATA / "yolo_coco_gt.json", "--dt", DATA / "yolo_coco_dt.json", "--store",
                     store, "--quiet")
    assert result.returncode == 0, result.stderr
    result = command("add-run", store, "--run", "yolo", "--dt", DATA / "yolo" / "pred", "--quiet")
    assert result.returncode == 0, result.stderr
    first = command("evaluate", store, "--json", "--quiet")
    second = command("evaluate", store, "--run", "yolo", "--json", "--quiet")
    assert first.returncode == second.returncode == 0
    assert json.loads(first.stdout)["stats"] == json.loads(second.stdout)["stats"]
    result = command("coco", "--gt", DATA / "yolo_coco_gt.json", "--dt", DATA / "yolo_coco_dt.json", "--images",
                     DATA / "yolo_sizes.csv")
    assert result.returncode == 2
    assert result.stderr.endswith("image sizes are read for YOLO and OpenImages inputs only (the inputs are coco and "
                                  "coco)\n")


@pytest.mark.parametrize("name, gt, dt, extra", [
    ("yolo", DATA / "yolo", DATA / "yolo" / "pred", ["--images", DATA / "yolo_sizes.csv"]),
    ("openimages", DATA / "openimages" / "boxes.csv", DATA / "openimages" / "predictions.csv",
     ["--images", DATA / "openimages" / "sizes.csv"]),
    ("cvat", DATA / "cvat.xml", DATA / "cvat_coco_dt.json", ["--gt-format", "cvat"]),
])
def test_ingest_voc_of_each_format_equals_its_coco_equivalent(tmp_path, name, gt, dt, extra):
    """``ingest voc`` with the format flags, then ``evaluate --protocol voc``, prints what ``voc`` prints on the COCO
    equivalent; a format flag that does not fit is refused."""
    store = tmp_path / "store"
    result = command("ingest", "voc", "--gt", gt, "--dt", dt, *extra, "--store", store, "--quiet")
    assert result.returncode == 0, result.stderr
    got = command("evaluate", store, "--protocol", "voc", "--json", "--quiet")
    expected = command("voc", "--gt", DATA / f"{name}_coco_gt.json", "--dt", DATA / f"{name}_coco_dt.json", "--json",
                       "--quiet")
    assert got.returncode == expected.returncode == 0, got.stderr + expected.stderr
    assert json.loads(got.stdout) == json.loads(expected.stdout)
    assert json.loads(got.stdout)["map"] > 0.2
    result = command("ingest", "voc", "--gt", DATA / f"{name}_coco_gt.json", "--dt", DATA / f"{name}_coco_dt.json",
                     "--names", DATA / "yolo" / "data.yaml", "--store", tmp_path / "other", "--quiet")
    assert result.returncode == 2 and result.stderr.endswith("class names are read for a YOLO ground truth only (the "
                                                             "ground truth is coco)\n")
    assert not (tmp_path / "other").exists()
