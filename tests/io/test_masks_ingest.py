"""Masks and keypoints on ingest, against pycocotools: every stored RLE equals ``annToRLE`` (ground truth) and
``loadRes`` + ``annToRLE`` (results), both decoded to run lengths and compared exactly, and a result's stored area
and box equal ``loadRes``'s; bad input gets one located line."""

import contextlib
import copy
import io
import json
import warnings

import numpy as np
import polars as pl
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

import evalengine
from evalengine.errors import InputError
from evalengine.io.coco import read_coco_gt
from evalengine.io.detections import iter_detections, read_detections
from tests.conftest import DATA, PACKAGE_DATA
from tests.helpers import run_cli

GOLDEN = [  # (ground truth, results): every segm / keypoint file of tests/data
    (PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakesegm100_dt.json"),
    (PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakekeypoints100_dt.json"),
    (PACKAGE_DATA / "instances_val2014_100.json", PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"),
    (DATA / "fce_dataset_gt.json", DATA / "fce_dataset_dt.json"),
    (DATA / "fce_dataset_gt.json", DATA / "fce_dataset_rle_nobbox_dt.json"),
    (DATA / "detectron2_gt.json", DATA / "detectron2_dt.json"),
    (DATA / "fce_keypoints_gt.json", DATA / "fce_keypoints_dt.json"),
]


def rle_counts(rle: dict) -> list:
    """The run lengths of a pycocotools RLE: its list, or its string read as ``rleFrString`` reads it."""
    if isinstance(rle["counts"], list):
        return list(rle["counts"])
    text, counts, at = rle["counts"], [], 0
    text = text.decode() if isinstance(text, bytes) else text
    while at < len(text):
        value, shift, more = 0, 0, True
        while more:
            c = ord(text[at]) - 48
            value |= (c & 0x1F) << shift
            more, at, shift = bool(c & 0x20), at + 1, shift + 5
            if not more and c & 0x10:
                value |= -1 << shift
        counts.append(value + (counts[-2] if len(counts) > 2 else 0))
    return counts


def _runs(stored) -> list | None:
    """The run lengths of a stored ``mask_rle`` (a compressed string), or None."""
    return None if stored is None else rle_counts({"counts": stored})


def _coco(gt: dict) -> COCO:
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = copy.deepcopy(gt)
        coco.createIndex()
    return coco


def _load_res(coco: COCO, dt: list) -> COCO:
    with contextlib.redirect_stdout(io.StringIO()):
        return coco.loadRes(copy.deepcopy(dt))


def _stored(frame: pl.DataFrame, key: str) -> dict:
    return {row[key]: row for row in frame.iter_rows(named=True)}


def _check_gt(gt: dict, dataset) -> None:
    coco, rows = _coco(gt), _stored(dataset.gt, "gt_id")
    with_segm = [ann for ann in gt["annotations"] if ann.get("segmentation") is not None]
    assert ("mask_rle" in dataset.gt.columns) == bool(with_segm)
    for ann in with_segm:
        row, image = rows[ann["id"]], coco.imgs[ann["image_id"]]
        assert _runs(row["mask_rle"]) == rle_counts(coco.annToRLE(ann)), ann["id"]
        assert (row["mask_h"], row["mask_w"]) == (image["height"], image["width"])
        assert row["polygon"] == (ann["segmentation"] if isinstance(ann["segmentation"], list) else None)
        assert row["area"] == ann["area"]
    for ann in gt["annotations"]:
        if "keypoints" in ann:
            assert rows[ann["id"]]["keypoints"] == ann["keypoints"]
            assert rows[ann["id"]]["num_keypoints"] == ann["num_keypoints"]


def _check_dt(coco_gt: COCO, dt: list, stored: pl.DataFrame) -> None:
    res, rows = _load_res(coco_gt, dt), _stored(stored, "det_id")
    assert len(rows) == len(res.anns)
    has_masks = any("segmentation" in ann for ann in dt)
    assert ("mask_rle" in stored.columns) == has_masks
    for ann_id, ann in res.anns.items():
        row = rows[ann_id]
        assert row["area"] == float(ann["area"]), ann_id
        assert [row[c] for c in "xywh"] == [float(v) for v in ann["bbox"]], ann_id
        if has_masks:
            assert _runs(row["mask_rle"]) == (rle_counts(res.annToRLE(ann)) if "segmentation" in ann else None), ann_id
            if isinstance(ann.get("segmentation"), dict) and isinstance(ann["segmentation"]["counts"], str):
                assert row["mask_rle"] == ann["segmentation"]["counts"], ann_id  # a compressed string as given
            segm = ann.get("segmentation")
            assert row["polygon"] == (segm if isinstance(segm, list) else None), ann_id
        if "keypoints" in ann:
            assert row["keypoints"] == ann["keypoints"]


@pytest.mark.parametrize("gt_path, dt_path", GOLDEN, ids=lambda p: p.stem)
def test_golden_files_equal_pycocotools(gt_path, dt_path):
    gt, dt = json.loads(gt_path.read_text()), json.loads(dt_path.read_text())
    dataset = read_coco_gt(gt_path)
    _check_gt(gt, dataset)
    _check_dt(_coco(gt), dt, read_detections(dt_path, dataset))


def test_keypoint_categories_are_kept():
    categories = read_coco_gt(DATA / "fce_keypoints_gt.json").categories
    source = json.loads((DATA / "fce_keypoints_gt.json").read_text())["categories"][0]
    assert categories.schema["keypoints"] == pl.List(pl.String)
    assert categories.row(0, named=True)["keypoints"] == source["keypoints"]
    assert categories.row(0, named=True)["skeleton"] == source["skeleton"]


# ------------------------------------------------------------------------------------------------ random datasets

def _polygon(rng, h, w) -> list:
    n = int(rng.integers(3, 9))
    cx, cy, r = rng.uniform(-5, w + 5), rng.uniform(-5, h + 5), rng.uniform(0.3, max(h, w) / 3)
    angles = np.sort(rng.uniform(0, 2 * np.pi, n))
    xy = np.stack([cx + r * np.cos(angles), cy + r * np.sin(angles)], 1)
    return [round(float(v), 2) for v in xy.reshape(-1)]


def _bitmap(rng, h, w) -> np.ndarray:
    mask = np.zeros((h, w), np.uint8)
    y0, x0 = rng.integers(0, h), rng.integers(0, w)
    mask[y0:y0 + rng.integers(0, h), x0:x0 + rng.integers(0, w)] = 1
    if rng.random() < 0.3:
        mask[0, :] = 1  # touching the border
    return mask


def _segmentation(rng, h, w, form: str):
    if form == "polygon":
        return [_polygon(rng, h, w) for _ in range(int(rng.integers(1, 4)))]
    rle = mask_utils.encode(np.asfortranarray(_bitmap(rng, h, w)))
    if form == "compressed":
        return {"size": rle["size"], "counts": rle["counts"].decode()}
    return {"size": rle["size"], "counts": rle_counts(rle)}


def random_dataset(seed: int) -> tuple:
    """A ground truth of polygons (several parts), crowd uncompressed RLE and compressed RLE, and results of each
    form: with boxes (some without a segmentation), or compressed RLE without (area and box from the mask)."""
    rng = np.random.default_rng(seed)
    images = [{"id": i + 1, "height": int(rng.integers(1, 40)), "width": int(rng.integers(1, 40))} for i in range(4)]
    annotations, results, with_box = [], [], seed % 2 == 0
    for image in images:
        h, w = image["height"], image["width"]
        for _ in range(int(rng.integers(0, 5))):
            crowd = rng.random() < 0.2
            form = "uncompressed" if crowd else str(rng.choice(["polygon", "compressed"]))
            annotations.append({"id": len(annotations) + 1, "image_id": image["id"], "category_id": 1,
                                "bbox": [1.0, 1.0, 2.0, 2.0], "area": float(rng.uniform(0, 100)),
                                "iscrowd": int(crowd), "segmentation": _segmentation(rng, h, w, form)})
        for _ in range(int(rng.integers(1, 5))):
            result = {"image_id": image["id"], "category_id": 1, "score": float(rng.random())}
            if with_box:
                result["bbox"] = [round(float(v), 2) for v in rng.uniform(0, 20, 4)]
                if rng.random() < 0.8:
                    result["segmentation"] = _segmentation(rng, h, w, str(rng.choice(
                        ["polygon", "compressed", "uncompressed"])))
            else:
                result["segmentation"] = _segmentation(rng, h, w, "compressed")
            results.append(result)
    if with_box and "segmentation" not in results[0]:  # a file of masks (else no mask is stored at all)
        results[0]["segmentation"] = _segmentation(rng, images[0]["height"], images[0]["width"], "polygon")
    return {"images": images, "annotations": annotations, "categories": [{"id": 1, "name": "a"}]}, results


@pytest.mark.parametrize("seed", range(120))
def test_random_masks_equal_pycocotools(tmp_path, seed):
    gt, dt = random_dataset(seed)
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    dataset = read_coco_gt(tmp_path / "gt.json")
    _check_gt(gt, dataset)
    _check_dt(_coco(gt), dt, read_detections(tmp_path / "dt.json", dataset))


# ------------------------------------------------------------------------------------ inputs pycocotools refuses

def _gt(segmentation, height=10, width=12, **extra) -> dict:
    return {"images": [{"id": 1, "height": height, "width": width}], "categories": [{"id": 1, "name": "a"}],
            "annotations": [{"id": 7, "image_id": 1, "category_id": 1, "bbox": [1, 1, 3, 3], "area": 9,
                             "segmentation": segmentation, **extra}]}


def _write(tmp_path, gt: dict, dt: list | None = None):
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    if dt is not None:
        (tmp_path / "dt.json").write_text(json.dumps(dt))
    return tmp_path / "gt.json", tmp_path / "dt.json"


def test_an_empty_segmentation_is_an_empty_mask(tmp_path):
    """pycocotools and faster-coco-eval fail on ``"segmentation": []`` (IndexError); hotcoco reads an empty mask."""
    gt_path, _ = _write(tmp_path, _gt([]))
    assert list(map(_runs, read_coco_gt(gt_path).gt.get_column("mask_rle"))) == [[120]]


def test_a_first_polygon_of_four_numbers_is_boxes_as_faster_coco_eval_reads_it(tmp_path):
    """pycocotools' ``frPyObjects`` takes such a list for boxes and then fails; faster-coco-eval rasterises the boxes."""
    from faster_coco_eval.core import mask as fce_mask

    segmentation = [[1, 1, 5, 5], [2, 6, 3, 2]]
    gt_path, _ = _write(tmp_path, _gt(segmentation))
    want = rle_counts(fce_mask.merge(fce_mask.frPyObjects(segmentation, 10, 12)))
    assert list(map(_runs, read_coco_gt(gt_path).gt.get_column("mask_rle"))) == [want]


def test_results_of_polygons_or_uncompressed_rle_without_box_take_area_and_box_from_the_mask(tmp_path):
    """pycocotools, faster-coco-eval and hotcoco all refuse these in ``loadRes`` (``maskUtils.area`` of a list); they
    are read as a compressed RLE without a box is: area and box of the mask rasterised in the image's size."""
    box = [[2, 3, 8, 3, 8, 7, 2, 7]]
    rle = mask_utils.merge(mask_utils.frPyObjects(box, 10, 12))
    results = [{"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": box},
               {"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": {"size": [10, 12],
                                                                                "counts": rle_counts(rle)}}]
    gt_path, dt_path = _write(tmp_path, _gt(box), results)
    dt = read_detections(dt_path, read_coco_gt(gt_path))
    area, bbox = float(mask_utils.area(rle)), mask_utils.toBbox(rle).tolist()
    assert dt.select("area", "x", "y", "w", "h").rows() == [(area, *bbox)] * 2
    assert list(map(_runs, dt.get_column("mask_rle"))) == [rle_counts(rle)] * 2


def test_keypoints_are_stored_as_given(tmp_path):
    results = [{"image_id": 1, "category_id": 1, "score": 0.5, "keypoints": [1, 2, 1, 5, 7, 2, 0, 0, 0]}]
    gt_path, dt_path = _write(tmp_path, _gt([[1, 1, 4, 1, 4, 4]], keypoints=[1, 1, 2], num_keypoints=1), results)
    dataset = read_coco_gt(gt_path)
    assert dataset.gt.select("keypoints", "num_keypoints").rows() == [([1.0, 1.0, 2.0], 1)]
    dt = read_detections(dt_path, dataset)
    # loadRes: the box of every keypoint, the invisible one at (0, 0) included
    assert dt.select("keypoints", "x", "y", "w", "h", "area").rows() == [
        ([1.0, 2.0, 1.0, 5.0, 7.0, 2.0, 0.0, 0.0, 0.0], 0.0, 0.0, 5.0, 7.0, 35.0)]
    assert "mask_rle" not in dt.columns


# ------------------------------------------------------------------------------------------------------ bad input

BAD_GT = [
    ([[1, 1, 8, 1, 8, 8, 3]], "annotation 7: 'segmentation' polygon 1 has an odd number of coordinates (7)"),
    ({"size": [10, 12], "counts": [5, 3]}, "annotation 7: 'segmentation' RLE counts sum to 8, not height x width = 120"),
    ({"size": [5, 5], "counts": [25]}, "annotation 7: 'segmentation' RLE size differs from its image's [height, "
                                       "width] ([5, 5], the image's [10, 12])"),
    ({"size": [10, 12], "counts": "52"}, "annotation 7: 'segmentation' RLE counts sum to"),
    ({"size": [10, 12], "counts": "5!2"}, "annotation 7: 'segmentation' counts is not a compressed RLE string (5!2)"),
    ({"size": [10, 12]}, "annotation 7: 'segmentation' is not an RLE {size: [h, w], counts}"),
    ("a", "annotation 7: 'segmentation' is neither a polygon list nor an RLE {size, counts}"),
    ([["a"]], "annotation 7: 'segmentation' is not a polygon list of numbers"),
]


@pytest.mark.parametrize("segmentation, message", BAD_GT, ids=range(len(BAD_GT)))
def test_bad_ground_truth_masks_are_located(tmp_path, segmentation, message):
    gt_path, _ = _write(tmp_path, _gt(segmentation))
    with pytest.raises(InputError) as caught:
        read_coco_gt(gt_path)
    assert str(caught.value).startswith(f"{gt_path}: {message}")
    assert "\n" not in str(caught.value)


def test_bad_keypoints_are_located(tmp_path):
    gt_path, _ = _write(tmp_path, _gt([[1, 1, 4, 1, 4, 4]], keypoints=[1, 1, 2, 3], num_keypoints=1))
    with pytest.raises(InputError, match=r"annotation 7: 'keypoints' length is not a multiple of 3 \(4\)$"):
        read_coco_gt(gt_path)
    gt_path, dt_path = _write(tmp_path, _gt([[1, 1, 4, 1, 4, 4]]), [
        {"image_id": 1, "category_id": 1, "score": 0.5, "keypoints": [1, 2, 1]},
        {"image_id": 1, "category_id": 1, "score": 0.5, "keypoints": [1, 2]}])
    with pytest.raises(InputError, match=r"dt.json: detection at position 2: 'keypoints' length is not a multiple"):
        read_detections(dt_path, read_coco_gt(gt_path))


def test_a_bad_result_mask_fails_the_ingest_with_a_located_line_and_no_store(tmp_path, capsys):
    good = {"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": {"size": [10, 12], "counts": [120]}}
    bad = dict(good, segmentation={"size": [10, 11], "counts": [110]})
    gt_path, dt_path = _write(tmp_path, _gt([[1, 1, 4, 1, 4, 4]]), [good] * 3 + [bad])
    status, _, err = run_cli(capsys, "coco", "--gt", gt_path, "--dt", dt_path, "--store", tmp_path / "store")
    assert status == 2
    assert err.strip() == (f"evalengine: error: {dt_path}: detection at position 4: 'segmentation' RLE size "
                           "differs from its image's [height, width] ([10, 11], the image's [10, 12])")
    assert not (tmp_path / "store").exists()


def test_a_result_file_of_masks_requires_a_mask_on_every_result(tmp_path):
    """loadRes (the first result has a segmentation and no box): a result without one is a KeyError there."""
    good = {"image_id": 1, "category_id": 1, "score": 0.5, "segmentation": {"size": [10, 12], "counts": [120]}}
    gt_path, dt_path = _write(tmp_path, _gt([]), [good, {"image_id": 1, "category_id": 1, "score": 0.5,
                                                          "bbox": [1, 1, 2, 2]}])
    with pytest.raises(InputError, match=r"detection at position 2: missing field 'segmentation'$"):
        read_detections(dt_path, read_coco_gt(gt_path))


# ---------------------------------------------------------------------------------------------- formats and store

def test_json_lines_and_parquet_carry_the_same_masks(tmp_path):
    gt_path, dt_path = DATA / "fce_dataset_gt.json", DATA / "fce_dataset_rle_nobbox_dt.json"
    dataset = read_coco_gt(gt_path)
    want = read_detections(dt_path, dataset)
    results = json.loads(dt_path.read_text())
    (tmp_path / "dt.jsonl").write_text("\n".join(json.dumps(r) for r in results))
    as_struct = pl.DataFrame(results).select("image_id", "category_id", "score", "segmentation")
    as_struct.write_parquet(tmp_path / "struct.parquet")
    as_struct.with_columns(pl.col("segmentation").struct.json_encode()).write_parquet(tmp_path / "text.parquet")
    for path in (tmp_path / "dt.jsonl", tmp_path / "struct.parquet", tmp_path / "text.parquet"):
        assert read_detections(path, dataset).equals(want), path


def test_the_store_keeps_masks_and_a_box_store_has_no_mask_columns(tmp_path):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = evalengine.ingest_coco(PACKAGE_DATA / "instances_val2014_100.json", DATA / "cocoapi_fakesegm100_dt.json",
                                       tmp_path / "masks", n_shards=3)
        boxes = evalengine.ingest_coco(PACKAGE_DATA / "instances_val2014_100.json",
                                       PACKAGE_DATA / "instances_val2014_fakebbox100_results.json", tmp_path / "boxes")
    dataset = read_coco_gt(PACKAGE_DATA / "instances_val2014_100.json")
    stored_gt = store.gt().drop("shard").collect().sort("gt_id")
    assert stored_gt.select(dataset.gt.columns).equals(dataset.gt.sort("gt_id"))
    want = read_detections(DATA / "cocoapi_fakesegm100_dt.json", dataset)
    assert store.dt().collect().sort("det_id").select(want.columns).equals(want)
    assert "mask_rle" not in boxes.dt().collect_schema()
    # runs of masks and of boxes side by side: the dt view has the mask columns, null for the boxes
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        store = store.add_run(PACKAGE_DATA / "instances_val2014_fakebbox100_results.json", "boxes")
    assert store.sql("SELECT run, count(*) AS n, count(mask_rle) AS masks FROM dt GROUP BY run ORDER BY run").rows(
    ) == [("boxes", 734, 0), ("default", 734, 734)]
    assert boxes.evaluate(evalengine.CocoProtocol()).summary().get_column("value")[0] == pytest.approx(
        0.5045806987249628, abs=1e-12)


@pytest.mark.parametrize("suffix", [".json", ".jsonl", ".parquet"])
def test_without_masks_box_results_store_no_mask_and_mask_results_keep_their_boxes(tmp_path, suffix):
    """``masks=False`` (``ingest coco --no-masks``, and a one-shot box evaluation): box results are read and stored
    as without their masks (a JSON file's are not even parsed); results without boxes still take box and area from
    their masks, as ``loadRes``; the box numbers are unchanged."""
    boxed = json.loads((DATA / "detectron2_dt.json").read_text())  # boxes and compressed masks
    cases = [(DATA / "detectron2_gt.json", boxed), (PACKAGE_DATA / "instances_val2014_100.json",
                                                    json.loads((DATA / "cocoapi_fakesegm100_dt.json").read_text()))]
    for k, (gt, results) in enumerate(cases):
        path = tmp_path / f"dt{k}{suffix}"
        if suffix == ".json":
            path.write_text(json.dumps(results))
        elif suffix == ".jsonl":
            path.write_text("\n".join(json.dumps(r) for r in results))
        else:
            pl.DataFrame([{**r, "segmentation": json.dumps(r["segmentation"])} for r in results]).write_parquet(path)
        dataset = read_coco_gt(gt)
        full = read_detections(path, dataset)
        without = pl.concat(list(iter_detections(path, dataset, masks=False)))
        assert "mask_rle" in full.columns and not set(without.columns) & {"mask_h", "mask_w", "mask_rle", "polygon"}
        assert without.equals(full.select(without.columns))
    stats = [evalengine.ingest_coco(DATA / "detectron2_gt.json", path, tmp_path / f"s{masks}", masks=masks)
             .evaluate(evalengine.CocoProtocol()).stats() for masks, path in ((True, DATA / "detectron2_dt.json"),
                                                                               (False, tmp_path / f"dt0{suffix}"))]
    assert stats[0] == stats[1]


def test_a_one_shot_box_evaluation_reads_no_masks(tmp_path):
    from evalengine.io.detections import result_fields
    from evalengine.store.shards import scan_shards

    assert "segmentation" not in result_fields(DATA / "detectron2_dt.json", masks=False)
    assert "segmentation" in result_fields(DATA / "cocoapi_fakesegm100_dt.json", masks=False)  # boxes from masks
    box = evalengine.evaluate_coco(DATA / "detectron2_gt.json", DATA / "detectron2_dt.json")  # held in memory
    assert "mask_rle" not in box.layout.scan_sharded(box.layout.paths.dt("default")).collect_schema()
    kept = evalengine.evaluate_coco(DATA / "detectron2_gt.json", DATA / "detectron2_dt.json", store=tmp_path / "kept")
    assert "mask_rle" in scan_shards(kept.layout.paths.dt("default")).collect_schema() and kept.stats() == box.stats()
