"""The formats users have, each against the COCO path: a random scene written as YOLO txt, OpenImages CSV, CVAT XML or
LabelMe JSON gives the same tables and the same 12 numbers as its COCO equivalent (converted independently in
``tests/format_files.py``), and bad rows are located errors."""

import warnings

import numpy as np
import polars as pl
import pytest

from evalengine import api
from evalengine.api import formats
from evalengine.errors import InputError, InputWarning
from evalengine.io.formats import dt_format, gt_format, read_gt
from evalengine.match.voc import VocProtocol
from tests import format_files as ff

SEEDS = range(24)


def _coco_stats(tmp_path, gt: dict, dt: list, protocol=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return api.evaluate_coco(gt, dt, protocol).stats()


def _format_stats(gt, dt, protocol=None, **inputs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return formats.evaluate_formats(gt, dt, protocol, **inputs).stats()


def _same_tables(dataset, coco: dict) -> None:
    """The reader's tables hold the COCO dict's images, categories and boxes, exactly."""
    images = dataset.images.sort("image_id")
    assert images.select("image_id", "width", "height", "file_name").rows() == sorted(
        (i["id"], i["width"], i["height"], i["file_name"]) for i in coco["images"])
    assert dataset.categories.select("category_id", "name").rows() == [(c["id"], c["name"]) for c in coco["categories"]]
    gt = dataset.gt.sort("gt_id")
    assert gt.select("gt_id", "image_id", "category_id", "x", "y", "w", "h", "area", "iscrowd").rows() == [
        (a["id"], a["image_id"], a["category_id"], *a["bbox"], a["area"], bool(a["iscrowd"])) for a in coco["annotations"]]


@pytest.mark.parametrize("seed", SEEDS)
def test_yolo_equals_its_coco_equivalent(tmp_path, seed):
    sc = ff.scene(seed)
    names = ("yaml", "dict", "txt")[seed % 3]
    sizes = "folder" if seed % 2 else "table"
    root, pred, images = ff.write_yolo(tmp_path / "yolo", sc, names, sizes)
    gt, dt = ff.coco_of_yolo(sc, sizes)
    assert gt_format(root) == "yolo" and dt_format(pred) == "yolo"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        _same_tables(read_gt(root, "yolo", images), gt)
    expected = _coco_stats(tmp_path, gt, dt) if dt else None
    if not dt:
        with pytest.raises(InputError, match="no YOLO prediction"):
            _format_stats(root, pred, images=images)
        return
    assert _format_stats(root, pred, images=images) == expected


@pytest.mark.parametrize("seed", SEEDS)
def test_yolo_segments_equal_their_coco_polygons(tmp_path, seed):
    """Segment labels (``class x1 y1 … xn yn``) read as COCO polygon annotations: the same tables (box = the pixel
    points' extent, area = the mask's) and the same 12 numbers for boxes and for masks (results: box polygons)."""
    sc = ff.with_segments(ff.scene(seed))
    sizes = "folder" if seed % 2 else "table"
    root, _, images = ff.write_yolo(tmp_path / "yolo", sc, ("yaml", "dict", "txt")[seed % 3], sizes)
    gt, dt = ff.coco_of_yolo(sc, sizes)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        dataset = read_gt(root, "yolo", images)
    _same_tables(dataset, gt)
    assert ("mask_rle" in dataset.gt.columns) == bool(sc["segments"])
    if not dt:
        return
    gt_file, dt_file = ff_write_json(tmp_path, gt, dt)
    assert _format_stats(root, dt_file, images=images) == _coco_stats(tmp_path, gt, dt)
    if sc["segments"]:
        segm = api.CocoProtocol(iou_type="segm")
        dt = [{**d, "segmentation": [[d["bbox"][0], d["bbox"][1], d["bbox"][0], d["bbox"][1] + d["bbox"][3],
                                      d["bbox"][0] + d["bbox"][2], d["bbox"][1] + d["bbox"][3],
                                      d["bbox"][0] + d["bbox"][2], d["bbox"][1]]]} for d in dt]
        gt_file, dt_file = ff_write_json(tmp_path, gt, dt)
        assert _format_stats(root, dt_file, segm, images=images) == _coco_stats(tmp_path, gt, dt, segm)


@pytest.mark.parametrize("seed", SEEDS)
def test_openimages_csv_equals_its_coco_equivalent_for_coco_and_voc(tmp_path, seed):
    sc = ff.scene(seed)
    if not sc["objects"]:
        sc["objects"].append((sc["images"][0][0], 0, 0.5, 0.5, 0.2, 0.2, False))
    boxes, preds, sizes = ff.write_openimages(tmp_path / "oi", sc)
    gt, dt, _ = ff.coco_of_openimages(sc)
    assert gt_format(boxes) == "openimages" and dt_format(preds) == "openimages"
    _same_tables(read_gt(boxes, "openimages", sizes), gt)
    if not dt:
        return
    assert _format_stats(boxes, preds, images=sizes) == _coco_stats(tmp_path, gt, dt)
    voc = formats.evaluate_formats(boxes, preds, VocProtocol(), images=sizes)
    reference = api.evaluate_voc(*ff_write_json(tmp_path, gt, dt), VocProtocol())
    assert voc.per_class().rows() == reference.per_class().rows()
    assert voc.mean_ap() == reference.mean_ap()


def ff_write_json(tmp_path, gt, dt):
    import json

    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    return tmp_path / "gt.json", tmp_path / "dt.json"


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("kind", ["cvat", "labelme"])
def test_cvat_and_labelme_equal_their_coco_equivalent(tmp_path, seed, kind):
    sc = ff.scene(seed)
    if not sc["objects"]:
        sc["objects"].append((sc["images"][0][0], 1, 0.5, 0.5, 0.3, 0.2, False))
    path, gt = (ff.write_cvat(tmp_path / "a.xml", sc) if kind == "cvat" else ff.write_labelme(tmp_path / "lm", sc))
    assert gt_format(path) == kind
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        dataset = read_gt(path, kind)
    _same_tables(dataset, gt)
    polygons = [a for a in gt["annotations"] if "segmentation" in a]
    assert ("mask_rle" in dataset.gt.columns) == bool(polygons)
    dt = ff.coco_results(sc, gt)
    if not dt:
        return
    gt_file, dt_file = ff_write_json(tmp_path, gt, dt)
    assert _format_stats(path, dt_file) == _coco_stats(tmp_path, gt, dt)
    segm = api.CocoProtocol(iou_type="segm")
    if polygons:  # the masks too: the polygons' masks against results with box polygons (loadRes' own)
        dt = [{**d, "segmentation": [[d["bbox"][0], d["bbox"][1], d["bbox"][0], d["bbox"][1] + d["bbox"][3],
                                      d["bbox"][0] + d["bbox"][2], d["bbox"][1] + d["bbox"][3],
                                      d["bbox"][0] + d["bbox"][2], d["bbox"][1]]]} for d in dt]
        gt_file, dt_file = ff_write_json(tmp_path, gt, dt)
        assert _format_stats(path, dt_file, segm) == _coco_stats(tmp_path, gt, dt, segm)


def test_yolo_conversion_is_ultralytics_formula(tmp_path):
    """The stored pixels are ultralytics' ``xywhn2xyxy`` of the file's numbers (transcribed in format_files), bit for
    bit, including a box that reaches past the image border."""
    sc = {"images": [("a", 641, 479)], "objects": [("a", 2, 0.1, 0.9, 0.3, 0.25, False)], "predictions": [],
          "rng": np.random.default_rng(0)}
    root, _, images = ff.write_yolo(tmp_path / "y", sc, "txt", "table")
    gt = read_gt(root, "yolo", images).gt
    x1, y1, x2, y2 = ff.xywhn2xyxy([0.1, 0.9, 0.3, 0.25], 641, 479)
    assert gt.select("x", "y", "w", "h").row(0) == (x1, y1, x2 - x1, y2 - y1)
    assert x1 < 0 and gt.item(0, "category_id") == 3


@pytest.mark.parametrize("text, message", [
    ("0 0.5 0.5 0.2\n", r"a\.txt: line 1: expected 5 fields 'class cx cy w h' or a segment .*, found 4"),
    ("0 0.5 0.5 0.2 0.2\n1 0.5 x 0.2 0.2\n", r"a\.txt: line 2: 'cy' is 'x', not a number"),
    ("0 0.5 0.5 1.2 0.2\n", r"a\.txt: line 1: 'w' is 1\.2, outside \[0, 1\]"),
    ("\n7 0.5 0.5 0.2 0.2\n", r"a\.txt: line 2: class 7 is not a known class \(the names list 4 classes\)"),
    ("1.5 0.5 0.5 0.2 0.2\n", r"a\.txt: line 1: class 1\.5 is not an integer"),
    ("0 1 2 3 4 5 6 7\n", r"line 1: expected 5 fields 'class cx cy w h' or a segment 'class x1 y1 … xn yn' of 3 "
                          r"or more points, found 8"),
    ("0 0.1 0.2 0.3\n", r"line 1: expected 5 fields .* found 4"),
    ("0 0.1 0.2 0.3 0.4 0.5 0.6\n2 0.1 0.2 y 0.4 0.5 0.6\n", r"a\.txt: line 2: 'x2' is 'y', not a number"),
    ("0 0.1 0.2 0.3 0.4 0.5 -0.6\n", r"a\.txt: line 1: 'y3' is -0\.6, outside \[0, 1\]"),
    ("9 0.1 0.2 0.3 0.4 0.5 0.6\n", r"a\.txt: line 1: class 9 is not a known class"),
    ("0 0.1 0.2 0.3 0.4 0.5 0.6\n0 0.5 0.5 0.2 0.2\n", r"a\.txt: line 2: box lines and segment lines in one file"),
])
def test_yolo_bad_lines_are_located(tmp_path, text, message):
    sc = {"images": [("a", 100, 80)], "objects": [], "predictions": [], "rng": np.random.default_rng(1)}
    root, _, images = ff.write_yolo(tmp_path / "y", sc, "txt", "table")
    (root / "labels" / "a.txt").write_text(text)
    with pytest.raises(InputError, match=message):
        read_gt(root, "yolo", images)


def test_yolo_missing_size_and_repeated_lines(tmp_path):
    sc = {"images": [("a", 100, 80)], "objects": [], "predictions": [], "rng": np.random.default_rng(1)}
    root, _, images = ff.write_yolo(tmp_path / "y", sc, "yaml", "table")
    (root / "labels" / "b.txt").write_text("0 0.5 0.5 0.2 0.2\n")
    with pytest.raises(InputError, match=r"b\.txt: line 1: image 'b' has no size"):
        read_gt(root, "yolo", images)
    (root / "labels" / "b.txt").unlink()
    (root / "labels" / "a.txt").write_text("0 0.5 0.5 0.2 0.2\n0 0.5 0.5 0.2 0.2\n")
    with pytest.warns(InputWarning, match="2 repeated label lines are kept"):
        assert read_gt(root, "yolo", images).gt.height == 2
    with pytest.raises(InputError, match="give the image sizes"):
        read_gt(root, "yolo")
    (images).write_text("image,width,height\na.jpg,100,\n")
    with pytest.raises(InputError, match=r"sizes\.csv: line 2: empty 'height'"):
        read_gt(root, "yolo", images)


def test_openimages_csv_bad_rows_are_located(tmp_path):
    sc = {"images": [("i1", 100, 80)], "objects": [("i1", 0, 0.5, 0.5, 0.2, 0.2, False)],
          "predictions": [("i1", 0, 0.5, 0.5, 0.2, 0.2, 0.9)], "rng": np.random.default_rng(1)}
    boxes, preds, sizes = ff.write_openimages(tmp_path, sc)
    boxes.write_text(boxes.read_text() + "i2,xclick,/m/person,1,0.1,0.2,0.1,0.2,0,0\n")
    with pytest.raises(InputError, match=r"boxes\.csv: line 3: ImageID 'i2' has no size"):
        read_gt(boxes, "openimages", sizes)
    boxes.write_text(boxes.read_text().replace("i2,xclick,/m/person,1,0.1,0.2", "i1,xclick,/m/person,1,0.1,1.5"))
    with pytest.raises(InputError, match=r"boxes\.csv: line 3: 'XMax' is 1\.5, outside \[0, 1\]"):
        read_gt(boxes, "openimages", sizes)
    with pytest.raises(InputError, match="give the image sizes"):
        read_gt(boxes, "openimages")


def test_cvat_and_labelme_bad_input_is_located(tmp_path):
    sc = ff.scene(3)
    path, _ = ff.write_cvat(tmp_path / "a.xml", sc)
    with pytest.warns(InputWarning, match=r"a\.xml: 1 shapes other than boxes and polygons .* are left out"):
        read_gt(path, "cvat")
    path.write_text(path.read_text().replace('xtl="', 'xtl="x', 1))
    with pytest.raises(InputError, match=r"a\.xml: line \d+, column \d+: <box> 'xtl' is 'x"):
        read_gt(path, "cvat")
    path, _ = ff.write_cvat(tmp_path / "b.xml", ff.scene(3))
    path.write_text(path.read_text().replace('<box label="', '<box label="cat', 1))
    with pytest.raises(InputError, match=r"b\.xml: line \d+, column \d+ \(<box>\): label 'cat\w+' is not one of the "
                                         "<meta> labels"):
        read_gt(path, "cvat")
    path.write_text('<?xml version="1.0"?>\n<!DOCTYPE a [<!ENTITY x "y">]>\n<annotations/>\n')
    with pytest.raises(InputError, match=r"b\.xml: line 2: a DOCTYPE declaration is not accepted"):
        read_gt(path, "cvat")
    folder, _ = ff.write_labelme(tmp_path / "lm", sc)
    first = sorted(folder.glob("*.json"))[0]
    first.write_text(first.read_text().replace('"imageWidth"', '"imageWidthX"'))
    with pytest.raises(InputError, match=rf"{first.name}: 'imageWidth' is None, not a positive integer"):
        read_gt(folder, "labelme")
    first.write_text('{"shapes": [{"label": "a", "shape_type": "rectangle", "points": [[1, 2], [3, "4"]]}], '
                     '"imageWidth": 10, "imageHeight": 10}')
    with pytest.raises(InputError, match=rf"{first.name}: shape 1: 'points' must be a list of \[x, y\] pairs"):
        read_gt(folder, "labelme")


def test_export_against_pycocotools_eval_imgs(tmp_path):
    """Every detection's and ground truth's outcome in both exports equals pycocotools' ``evalImgs`` (area all,
    maxDet 100) at each threshold asked for, on random scenes with crowds (OpenImages group-of boxes)."""
    from pycocotools.coco import COCO
    from pycocotools.cocoeval import COCOeval

    for seed in range(6):
        sc = ff.scene(100 + seed)
        sc["objects"].append((sc["images"][0][0], 0, 0.5, 0.5, 0.4, 0.4, True))
        boxes, preds, sizes = ff.write_openimages(tmp_path / f"s{seed}", sc)
        gt, dt, _ = ff.coco_of_openimages(sc)
        if not dt:
            continue
        store = formats.ingest_formats(boxes, preds, tmp_path / f"store{seed}", images=sizes)
        coco = COCO()
        coco.dataset = gt
        coco.createIndex()
        # the detections' ids as stored (rows of the CSV) for pycocotools' loadRes numbering
        stored = store.dt().sort("det_id").collect()
        results = [{"image_id": r["image_id"], "category_id": r["category_id"], "bbox": [r["x"], r["y"], r["w"], r["h"]],
                    "score": r["score"]} for r in stored.iter_rows(named=True)]
        evaluator = COCOeval(coco, coco.loadRes(results), "bbox")
        evaluator.evaluate()
        ids = stored.get_column("det_id").to_list()  # loadRes id k is stored det_id ids[k - 1]
        for t_index, threshold in ((0, 0.5), (5, 0.75)):
            expected_dt, expected_gt = {}, {}
            for entry in evaluator.evalImgs:
                if entry is None or entry["aRng"] != [0, 1e10]:
                    continue
                for k, det in enumerate(entry["dtIds"]):
                    partner = int(entry["dtMatches"][t_index, k])
                    ignored = bool(entry["dtIgnore"][t_index, k])
                    expected_dt[ids[det - 1]] = ("ignored" if ignored else "tp" if partner else "fp",
                                                 str(partner) if partner and not ignored else "")
                for k, gt_id in enumerate(entry["gtIds"]):
                    crowd = bool(entry["gtIgnore"][k])
                    partner = int(entry["gtMatches"][t_index, k])
                    expected_gt[gt_id] = ("ignored" if crowd else "tp" if partner else "fn",
                                          str(ids[partner - 1]) if partner and not crowd else "")
            out = formats.export(store, tmp_path / f"f{seed}_{t_index}.parquet", "fiftyone", iou_threshold=threshold)
            rows = pl.read_parquet(out)
            got_dt = {r["id"]: (r["eval"], r["eval_id"]) for r in rows.filter(pl.col("kind") == "prediction")
                      .iter_rows(named=True) if r["eval"] is not None}
            got_gt = {r["id"]: (r["eval"], r["eval_id"]) for r in rows.filter(pl.col("kind") == "ground_truth")
                      .iter_rows(named=True)}
            assert got_dt == expected_dt
            assert got_gt == expected_gt
            results_rows = pl.read_ndjson(formats.export(store, tmp_path / f"c{seed}.jsonl", "coco-results",
                                                         iou_threshold=threshold))
            assert results_rows.height == stored.height
            assert results_rows.get_column("tp").sum() == sum(e[0] == "tp" for e in expected_dt.values())
            tp = results_rows.filter(pl.col("tp"))
            assert dict(zip(tp.get_column("id"), tp.get_column("matched_gt_id").cast(pl.String))) == {
                k: v[1] for k, v in expected_dt.items() if v[0] == "tp"}
