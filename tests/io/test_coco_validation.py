"""Bad COCO input gets a clear error naming the file and the offending id or row."""

import json

import pytest

from evalengine.errors import InputError, InputWarning
from evalengine.io.coco import read_coco_gt
from evalengine.io.detections import read_detections
from tests.helpers import coco_dt, coco_gt


def write(tmp_path, name, obj):
    path = tmp_path / name
    path.write_text(obj if isinstance(obj, str) else json.dumps(obj))
    return path


def gt_error(tmp_path, gt) -> str:
    path = write(tmp_path, "gt.json", gt)
    with pytest.raises(InputError) as info:
        read_coco_gt(path)
    assert str(path) in str(info.value)
    return str(info.value)


def test_missing_file_is_named(tmp_path):
    with pytest.raises(InputError, match="nope.json: no such file"):
        read_coco_gt(tmp_path / "nope.json")


def test_invalid_json(tmp_path):
    assert "gt.json: line 1, column 2: not valid JSON (Expecting property name" in gt_error(tmp_path, "{not json")


def test_missing_top_level_list(tmp_path):
    gt = coco_gt([[0, 0, 1, 1]])
    del gt["annotations"]
    assert "missing the top-level list 'annotations'" in gt_error(tmp_path, gt)


def test_duplicate_annotation_id(tmp_path):
    gt = coco_gt([[0, 0, 1, 1], [0, 0, 2, 2]], id=[7, 7])
    assert "duplicate annotation id 7" in gt_error(tmp_path, gt)


def test_duplicate_image_id(tmp_path):
    gt = coco_gt([[0, 0, 1, 1]])
    gt["images"].append(dict(gt["images"][0]))
    assert "duplicate image id 1" in gt_error(tmp_path, gt)


def test_annotation_of_unknown_image(tmp_path):
    gt = coco_gt([[0, 0, 1, 1], [0, 0, 2, 2]], id=[3, 4])
    gt["annotations"][1]["image_id"] = 99
    assert "annotation 4: 'image_id' not in 'images'" in gt_error(tmp_path, gt)


def test_annotation_of_unknown_category(tmp_path):
    gt = coco_gt([[0, 0, 1, 1]], id=[12])
    gt["annotations"][0]["category_id"] = 42
    assert "annotation 12: 'category_id' not in 'categories'" in gt_error(tmp_path, gt)


@pytest.mark.parametrize("bbox, message", [
    ([0, 0, 1], "must be a list of 4 numbers"),
    (None, "must be a list of 4 numbers"),
    ([0, 0, -1, 2], "has a negative width or height"),
])
def test_bad_box(tmp_path, bbox, message):
    gt = coco_gt([[0, 0, 1, 1]], id=[5])
    gt["annotations"][0]["bbox"] = bbox
    assert f"annotation 5: 'bbox' {message}" in gt_error(tmp_path, gt)


def test_overflowing_number_is_located(tmp_path):
    text = json.dumps(coco_gt([[0, 0, 1, 1]], id=[5])).replace("[0, 0, 1, 1]", "[0, 0, 1e999, 1]")
    column = text.index('"bbox"') + 1
    assert (f"annotation at position 1 (line 1, column {column}): 'bbox' is [0, 0, 1e999, 1], not a list of finite "
            "numbers") in gt_error(tmp_path, text)


def test_nan_literal_is_located(tmp_path):
    text = json.dumps(coco_gt([[0, 0, 1, 1]], id=[5])).replace("[0, 0, 1, 1]", "[0, 0, NaN, 1]")
    assert "annotation at position 1 (line 1, column" in gt_error(tmp_path, text)
    assert "'bbox' is [0, 0, NaN, 1], not a list of finite numbers" in gt_error(tmp_path, text)


def test_negative_area(tmp_path):
    assert "'area' must be a finite number >= 0" in gt_error(tmp_path, coco_gt([[0, 0, 1, 1]], area=[-3.0]))


def test_missing_annotation_id(tmp_path):
    gt = coco_gt([[0, 0, 1, 1]])
    del gt["annotations"][0]["id"]
    assert "annotation at position 1: missing field 'id'" in gt_error(tmp_path, gt)


def test_zero_id_and_missing_area_warn(tmp_path):
    gt = coco_gt([[0, 0, 2, 3]], id=[0])
    del gt["annotations"][0]["area"]
    path = write(tmp_path, "gt.json", gt)
    with pytest.warns(InputWarning) as record:
        dataset = read_coco_gt(path)
    messages = " | ".join(str(w.message) for w in record)
    assert "annotation id 0 found" in messages and "has no 'area'; using w*h" in messages
    assert dataset.gt["area"].to_list() == [6.0]


def results_error(tmp_path, dt) -> str:
    dataset = read_coco_gt(write(tmp_path, "gt.json", coco_gt([[0, 0, 1, 1]])))
    path = write(tmp_path, "dt.json", dt)
    with pytest.raises(InputError) as info:
        read_detections(path, dataset)
    assert str(path) in str(info.value)
    return str(info.value)


def test_empty_results(tmp_path):
    assert "the result list is empty" in results_error(tmp_path, [])


def test_result_missing_score(tmp_path):
    dt = coco_dt([[0, 0, 1, 1], [0, 0, 1, 1]], [0.5, 0.5])
    del dt[1]["score"]
    assert "detection at position 2: missing field 'score'" in results_error(tmp_path, dt)


def test_result_of_unknown_image(tmp_path):
    assert "image_id 77 not in the ground truth's images" in results_error(
        tmp_path, coco_dt([[0, 0, 1, 1]], [0.5], image_ids=[77]))


def test_result_with_non_finite_score_is_located(tmp_path):
    text = json.dumps(coco_dt([[0, 0, 1, 1]], [0.5])).replace("0.5", "NaN")
    column = text.index('"score"') + 1
    assert (f"detection at position 1 (line 1, column {column}): 'score' is NaN, not a finite number"
            in results_error(tmp_path, text))


def test_result_of_unknown_category_is_kept_with_a_warning(tmp_path):
    dataset = read_coco_gt(write(tmp_path, "gt.json", coco_gt([[0, 0, 1, 1]])))
    path = write(tmp_path, "dt.json", coco_dt([[0, 0, 1, 1], [0, 0, 1, 1]], [0.5, 0.4], category_ids=[1, 9]))
    with pytest.warns(InputWarning, match="1 detections have category_id 9"):
        dt = read_detections(path, dataset)
    assert dt["category_id"].to_list() == [1, 9]
    assert dt["det_id"].to_list() == [1, 2]


def test_every_image_and_category_field_is_kept(tmp_path):
    gt = coco_gt([[0, 0, 1, 1]], image_ids=[3])
    gt["images"][0].update({"coco_url": "http://x/3.jpg", "weather": "rain", "shard": 7})
    gt["categories"][0].update({"frequency": "r", "synset": "cat.n.01"})
    dataset = read_coco_gt(write(tmp_path, "gt.json", gt))
    image = dataset.images.row(0, named=True)
    assert image["image_id"] == 3 and image["weather"] == "rain" and image["coco_url"] == "http://x/3.jpg"
    assert image["source_shard"] == 7 and "shard" not in dataset.images.columns
    category = dataset.categories.row(0, named=True)
    assert (category["category_id"], category["frequency"], category["synset"]) == (1, "r", "cat.n.01")


def test_extra_annotation_fields_are_kept(tmp_path):
    gt = coco_gt([[0, 0, 1, 1], [2, 2, 3, 3]], occluded=[True, False], source=["cvat", "manual"],
                 difficulty=[1, 2], visibility=[0.5, 1], x=[9, 9])
    dataset = read_coco_gt(write(tmp_path, "gt.json", gt))
    frame = dataset.gt.sort("gt_id")
    assert frame["occluded"].to_list() == [True, False]
    assert frame["source"].to_list() == ["cvat", "manual"]
    assert frame["difficulty"].to_list() == [1, 2]
    assert frame["visibility"].to_list() == [0.5, 1.0]
    assert frame["source_x"].to_list() == [9, 9] and frame["x"].to_list() == [0.0, 2.0]
