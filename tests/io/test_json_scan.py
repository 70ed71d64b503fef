"""COCO result files are parsed in chunks of whole objects: any chunk size gives the same detections."""

import json

import polars as pl
import pytest

from evalengine.errors import InputError
from evalengine.io.coco import RESULT_FIELDS, read_coco_gt
from evalengine.io.detections import read_detections
from evalengine.io.json_scan import json_list_chunks
from evalengine.io.validate import read_json_objects
from tests.conftest import PACKAGE_DATA

DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


def _parse(path, chunk_bytes):
    chunks = list(json_list_chunks(path, chunk_bytes))
    text = path.read_bytes()
    for offset, objects in chunks:  # each chunk is the file's own text, from a whole object to a whole object
        assert text[offset:offset + len(objects)] == objects and objects.lstrip()[:1] == b"{"
        assert objects.rstrip()[-1:] == b"}"
    return pl.concat([pl.read_json(b"[" + objects + b"]", schema=RESULT_FIELDS) for _, objects in chunks])


@pytest.mark.parametrize("chunk_bytes", [1, 7, 100, 4096, 1 << 26])
def test_any_chunk_size_gives_every_object(chunk_bytes):
    want = pl.read_json(DT, schema=RESULT_FIELDS)
    assert _parse(DT, chunk_bytes).equals(want)


def test_strings_with_braces_and_pretty_printing(tmp_path):
    objects = [{"image_id": 1, "category_id": 2, "bbox": [0, 0, 1, 1], "score": 0.5, "note": 'a } \\" ] {'},
               {"image_id": 3, "category_id": 4, "bbox": [1, 2, 3, 4], "score": 0.25, "extra": {"x": [1, {"y": 2}]}}]
    path = tmp_path / "dt.json"
    path.write_text(json.dumps(objects, indent=4))
    got = _parse(path, 5)
    assert got["image_id"].to_list() == [1, 3] and got["score"].to_list() == [0.5, 0.25]


def test_not_a_list(tmp_path):
    path = tmp_path / "dt.json"
    path.write_text(json.dumps({"annotations": []}))
    with pytest.raises(InputError, match="expected a JSON list of detections"):
        list(json_list_chunks(path))


def test_error_in_a_later_chunk_points_at_the_file(tmp_path):
    objects = [{"image_id": 42, "category_id": 1, "bbox": [0, 0, 1, 1], "score": 0.5}] * 50
    text = json.dumps(objects)
    position = text.rindex("0.5")
    path = tmp_path / "dt.json"
    path.write_text(text[:position] + "NaN" + text[position + 3:])
    chunks = list(json_list_chunks(path, 100))
    assert len(chunks) > 10
    for offset, objects in chunks[:-1]:
        read_json_objects(path, RESULT_FIELDS, objects, offset)
    offset, objects = chunks[-1]
    with pytest.raises(InputError, match=r'"score": NaN\}\]\.\.\. NaN and Infinity'):
        read_json_objects(path, RESULT_FIELDS, objects, offset)


def test_truncated_file_is_an_error(tmp_path):
    path = tmp_path / "dt.json"
    path.write_text(DT.read_text()[:-40])
    with pytest.raises(InputError, match="not a valid COCO JSON file"):
        read_detections(path, read_coco_gt(PACKAGE_DATA / "instances_val2014_100.json"))
