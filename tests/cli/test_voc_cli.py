"""The VOC commands: ``voc`` (table and JSON), ``ingest voc`` then ``evaluate --protocol voc|coco``, every detection
format giving the same numbers, and the SQL views equal to the Python metrics (1e-12)."""

import json

import polars as pl
import pytest

from evalengine.api import VocProtocol, evaluate_store_voc, evaluate_voc, ingest_voc
from evalengine.io.voc import iter_devkit_results, read_voc_annotations
from tests.conftest import DATA
from tests.io.test_bad_input_corpus import cli
from tests.voc_files import padilla_to_voc

TOY = DATA / "voc" / "padilla_toy"


@pytest.fixture(scope="module")
def toy(tmp_path_factory):
    """The toy example: its Annotations folder and its detections as a devkit result folder."""
    return TOY / "Annotations", padilla_to_voc(None, TOY / "dets", tmp_path_factory.mktemp("toy"))[1]


def test_voc_json_and_table(tmp_path, toy):
    gt, results = toy
    code, out, err = cli(tmp_path, "voc", "--gt", gt, "--dt", results, "--json", "--metric", "voc07")
    assert code == 0, err
    assert json.loads(out) == {"map": pytest.approx(0.8863636363636364, abs=1e-12),
                               "per_class": {"cat": {"ap": pytest.approx(0.8863636363636364, abs=1e-12), "tp": 11,
                                                     "fp": 1, "n_gt": 12}}}
    code, out, _ = cli(tmp_path, "voc", "--gt", gt, "--dt", results, "--iou", "0.75", "--strict")
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "VOC2010+ all-point AP at IoU > 0.75 (difficult objects ignored)"
    assert "│ cat   ┆ 0.5097 ┆ 8  ┆ 4  ┆ 12 │" in lines
    assert lines[-1] == "mAP = 0.5097"


def test_ingest_then_evaluate_either_protocol(tmp_path, toy):
    gt, results = toy
    store = tmp_path / "store"
    code, out, err = cli(tmp_path, "ingest", "voc", "--gt", gt, "--dt", results, "--store", store, "--shards", "3")
    assert code == 0 and out.startswith(f"store: {store} (3 shards"), err
    code, out, _ = cli(tmp_path, "evaluate", store, "--protocol", "voc", "--json", "--iou-thresholds", "0.5", "0.75")
    payload = json.loads(out)
    assert payload["iou_thresholds"] == [0.5, 0.75]
    assert payload["map"] == [pytest.approx(0.8958333333333334, abs=1e-12), pytest.approx(0.5097222222222222,
                                                                                             abs=1e-12)]
    assert payload["per_class"]["cat"]["tp"] == [11, 8]
    code, out, _ = cli(tmp_path, "evaluate", store, "--json")
    assert code == 0 and json.loads(out)["stats"][1] == pytest.approx(0.8902640264026401, abs=1e-12)
    code, _, err = cli(tmp_path, "evaluate", store, "--protocol", "voc", "--area-ranges", "all:0:10")
    assert code == 2 and err == ["evalengine: error: evaluate: --area-ranges is an option of the coco protocol, "
                                 "not of voc"]


def test_every_detection_format_and_coco_ground_truth(tmp_path, toy):
    """The toy example as COCO JSON ground truth (boxes continuous) and as a COCO result file, JSON Lines and
    Parquet: the devkit folder's numbers."""
    gt_folder, results = toy
    dataset = read_voc_annotations(gt_folder)
    reference = evaluate_voc(gt_folder, results).per_class()
    coco = {"images": [{"id": r["image_id"], "file_name": f"{r['file_name']}.jpg", "width": r["width"],
                        "height": r["height"]} for r in dataset.images.iter_rows(named=True)],
            "categories": [{"id": 1, "name": "cat"}],
            "annotations": [{"id": r["gt_id"], "image_id": r["image_id"], "category_id": 1,
                             "bbox": [r["x"], r["y"], r["w"], r["h"]], "area": r["area"], "iscrowd": 0}
                            for r in dataset.gt.iter_rows(named=True)]}
    (tmp_path / "gt.json").write_text(json.dumps(coco))
    dt = pl.concat(list(iter_devkit_results(results, dataset))).sort("det_id")
    rows = [{"image_id": r["image_id"], "category_id": 1, "score": r["score"], "bbox": [r["x"], r["y"], r["w"], r["h"]]}
            for r in dt.iter_rows(named=True)]
    (tmp_path / "dt.json").write_text(json.dumps(rows))
    (tmp_path / "dt.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    dt.select("image_id", "category_id", "score", "x", "y", "w", "h").write_parquet(tmp_path / "dt.parquet")
    for gt in (gt_folder, tmp_path / "gt.json"):
        for detections in (results, tmp_path / "dt.json", tmp_path / "dt.jsonl", tmp_path / "dt.parquet"):
            assert evaluate_voc(gt, detections).per_class().equals(reference), (gt, detections)


def test_sql_views_equal_the_python_metrics(tmp_path):
    """voc_ap (both metrics, TP, FP, n_gt) and voc_pr_curve on a VOC2012 subset with difficult objects, two
    protocols in one store."""
    database = DATA / "voc" / "padilla_database"
    names = (database / "voc.names").read_text().split()
    dets = tmp_path / "dets"
    dets.mkdir()
    for path in (database / "dets").glob("*.txt"):
        lines = [line.split() for line in path.read_text().splitlines() if line.strip()]
        (dets / path.name).write_text("".join(" ".join([names[int(f[0])], *f[1:]]) + "\n" for f in lines))
    _, results = padilla_to_voc(None, dets, tmp_path, box="xyxy")
    store = ingest_voc(database / "Annotations", results, tmp_path / "store", n_shards=4)
    for protocol in (VocProtocol(iou_thresholds=(0.5, 0.7)), VocProtocol(strict=True, use_difficult=True)):
        evaluation = evaluate_store_voc(store, protocol)
        key = protocol.match_key()
        sql = store.sql(f"SELECT * FROM voc_ap WHERE protocol = '{key}' ORDER BY category_id, iou_threshold")
        for metric in ("voc07", "voc12"):
            python = evaluation.per_class(metric).sort("category_id", "iou_threshold")
            assert sql["tp"].to_list() == python["tp"].to_list() and sql["n_gt"].to_list() == python["n_gt"].to_list()
            assert sql["fp"].to_list() == python["fp"].to_list()
            diff = (sql[f"ap_{metric}"] - python["ap"]).abs().max()
            assert diff <= 1e-12, (metric, key)
        curve = store.sql(f"SELECT category_id, iou_threshold, det_id, tp, fp, recall, precision FROM voc_pr_curve "
                          f"WHERE protocol = '{key}' ORDER BY category_id, iou_threshold, score DESC, det_id")
        python = evaluation.precision_recall().select(curve.columns)
        assert curve.select("category_id", "det_id", "tp", "fp").equals(python.select("category_id", "det_id", "tp",
                                                                                        "fp").cast(pl.Int64))
        assert (curve["precision"] - python["precision"]).abs().max() <= 1e-12
