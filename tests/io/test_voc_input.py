"""VOC inputs: the XML reader's rules (image, category and annotation ids, difficult and truncated, the +1 box
conversion), COCO's ``difficult`` key, and a corpus of bad VOC input refused through the command with one located
line (file, line or element, problem), exit status 2 and nothing written."""

import json

import pytest

from evalengine.errors import InputError
from evalengine.io.coco import read_coco_gt
from evalengine.io.voc import image_ids, iter_devkit_results, read_voc_annotations
from tests.io.test_bad_input_corpus import cli
from tests.voc_files import write_annotations, write_results

IMAGES = {"000001": [("dog", 1, 2, 10, 20, False), ("cat", 5, 5, 9, 9, True)], "000010": [],
          "000002": [("cat", 3, 4, 3, 4, False)]}


def test_ids_boxes_and_flags(tmp_path):
    dataset = read_voc_annotations(write_annotations(tmp_path / "Annotations", IMAGES, {"000001": (353, 500)}))
    assert dataset.images.select("image_id", "file_name", "width", "height").rows() == [
        (1, "000001", 353, 500), (2, "000002", 500, 375), (10, "000010", 500, 375)]
    assert dataset.categories.select("category_id", "name").rows() == [(1, "cat"), (2, "dog")]
    assert dataset.gt.select("gt_id", "image_id", "category_id", "x", "y", "w", "h", "area", "iscrowd", "difficult",
                             "truncated", "gt_order").rows() == [
        (1, 1, 2, 0.0, 1.0, 10.0, 19.0, 190.0, False, False, False, 0),
        (2, 1, 1, 4.0, 4.0, 5.0, 5.0, 25.0, False, True, False, 1),
        (3, 2, 1, 2.0, 3.0, 1.0, 1.0, 1.0, False, False, False, 2)]


def test_image_id_rule():
    assert image_ids(["000001", "000005"]) == [1, 5]
    assert image_ids(["2007_000027", "2007_000032"]) == [1, 2]
    assert image_ids(["1", "01"]) == [1, 2]  # equal as numbers: positions


def test_flags_left_out_are_null(tmp_path):
    folder = tmp_path / "a"
    folder.mkdir()
    (folder / "x.xml").write_text("<annotation><object><name>cat</name><bndbox><xmin>1</xmin><ymin>1</ymin>"
                                  "<xmax>4.5</xmax><ymax>4</ymax></bndbox></object></annotation>")
    gt = read_voc_annotations(folder).gt
    assert gt.select("difficult", "truncated", "w").rows() == [(None, None, 4.5)]


def test_coco_difficult_key(tmp_path):
    """A COCO annotation's ``difficult`` (0/1 or a boolean) is the VOC flag; absent: null."""
    gt = {"images": [{"id": 1, "width": 10, "height": 10}], "categories": [{"id": 1, "name": "cat"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2], "area": 4, "difficult": 1},
                          {"id": 2, "image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2], "area": 4,
                           "difficult": False},
                          {"id": 3, "image_id": 1, "category_id": 1, "bbox": [0, 0, 2, 2], "area": 4}]}
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(gt))
    assert read_coco_gt(path).gt.get_column("difficult").to_list() == [True, False, None]
    gt["annotations"][0]["difficult"] = "yes"
    path.write_text(json.dumps(gt))
    with pytest.raises(InputError, match="annotation at position 1 .*'difficult' is \"yes\", not an integer"):
        read_coco_gt(path)


def test_results_by_file_name_stem_and_det_ids(tmp_path):
    """Result lines name an image by its file name or its stem; ids run over the files in name order."""
    gt = {"images": [{"id": 7, "file_name": "a/b.jpg"}, {"id": 9, "file_name": "c.png"}],
          "categories": [{"id": 3, "name": "cat"}, {"id": 4, "name": "dog"}], "annotations": []}
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    dataset = read_coco_gt(tmp_path / "gt.json")
    results = write_results(tmp_path / "r", {"dog": [("c", 0.5, 1, 1, 4, 4)],
                                             "cat": [("b", 0.25, 1, 1, 2, 2), ("c.png", 0.75, 1.5, 1, 3, 2)]})
    frames = list(iter_devkit_results(results, dataset))
    rows = [r for f in frames for r in f.select("det_id", "image_id", "category_id", "score", "x", "w").rows()]
    assert rows == [(1, 7, 3, 0.25, 0.0, 2.0), (2, 9, 3, 0.75, 0.5, 2.5), (3, 9, 4, 0.5, 0.0, 4.0)]


XML_OK = ("<annotation><size><width>5</width><height>5</height></size><object><name>cat</name><difficult>0"
          "</difficult><bndbox><xmin>1</xmin><ymin>1</ymin><xmax>4</xmax><ymax>4</ymax></bndbox></object>"
          "</annotation>")
# (XML text, what the one line must say)
BAD_XML = [
    ("<annotation><object><name>cat</name>", "line 1, column 37: malformed XML (no element found)"),
    ("<annotation>\n  <object>\n</annotation>", "line 3, column 3: malformed XML (mismatched tag)"),
    ("", "line 1, column 1: malformed XML (no element found)"),
    ("<annotation>&bogus;</annotation>", "line 1, column 13: malformed XML (undefined entity)"),
    ('<?xml version="1.0"?>\n<!DOCTYPE lolz [<!ENTITY lol "lol">]>\n<annotation>&lol;</annotation>',
     "line 2: a DOCTYPE declaration is not accepted"),
    ("<voc></voc>", "line 1, column 1: the root element is <voc>, expected <annotation>"),
    (XML_OK.replace("<xmin>1</xmin>", "<xmin>abc</xmin>"), "object 1 (cat): 'bndbox/xmin': 'abc' is not a number"),
    (XML_OK.replace("<xmin>1</xmin>", ""), "object 1 (cat): 'bndbox/xmin': missing"),
    (XML_OK.replace("<xmax>4</xmax>", "<xmax>nan</xmax>"), "'bndbox/xmax': 'nan' is not a number"),
    (XML_OK.replace("<xmax>4</xmax>", "<xmax>-3</xmax>"), "a negative width or height"),
    (XML_OK.replace("<name>cat</name>", ""), "object 1: missing 'name'"),
    (XML_OK.replace("<difficult>0", "<difficult>2"), "object 1: 'difficult' is '2', expected 0 or 1"),
    (XML_OK.replace("<difficult>0", "<difficult>x"), "object 1: 'difficult': 'x' is not an integer"),
    (XML_OK.replace("<width>5", "<width>5.5"), "'size/width': '5.5' is not an integer"),
    (XML_OK.replace("<bndbox>", "").replace("</bndbox>", ""), "object 1 (cat): missing 'bndbox'"),
]
GOOD_RESULTS = "000001 0.9 1 1 4 4\n"
# (result file text, what the one line must say)
BAD_RESULTS = [
    ("000001 0.9 1 1 4\n", "line 1: expected 6 fields '<image> <score> <x1> <y1> <x2> <y2>', found 5"),
    (GOOD_RESULTS + "\n000001 0.9 1 1 4 4 7\n", "line 3: expected 6 fields"),
    ("000001 high 1 1 4 4\n", "line 1: 'score' is 'high', not a finite number"),
    (GOOD_RESULTS + "000001 nan 1 1 4 4\n", "line 2: 'score' is 'nan', not a finite number"),
    ("000001 0.5 1 1 4 inf\n", "line 1: 'y2' is 'inf', not a finite number"),
    ("000001 0.5 1 1 4,5 4\n", "line 1: 'x2' is '4,5', not a finite number"),
    (GOOD_RESULTS * 2 + "000077 0.5 1 1 4 4\n", "line 3: image '000077' not in the ground truth's images"),
    ("000001 0.5 5 1 2 4\n", "line 1: the box has x2 < x1 - 1"),
    (b"000001 0.5 1 1 4 4\xff\n", "not UTF-8 text"),
]


def _voc_inputs(tmp_path, xml=XML_OK, results=GOOD_RESULTS, result_name="comp4_det_test_cat.txt"):
    annotations, folder = tmp_path / "Annotations", tmp_path / "results"
    annotations.mkdir()
    folder.mkdir()
    (annotations / "000001.xml").write_text(xml)
    (folder / result_name).write_bytes(results if isinstance(results, bytes) else results.encode())
    return annotations, folder


def _refused(tmp_path, annotations, results, where, expected, command="voc"):
    """One line ``evalengine: error: <where>: …expected…``, exit 2, nothing written."""
    before = set(tmp_path.iterdir())
    store = tmp_path / "store"
    argv = ([command] if command == "voc" else ["ingest", "voc", "--store", store])
    code, out, err = cli(tmp_path, *argv, "--gt", annotations, "--dt", results, "--quiet")
    assert code == 2 and out == "", err
    assert len(err) == 1 and err[0].startswith(f"evalengine: error: {where}: "), err
    assert expected in err[0], (expected, err[0])
    assert set(tmp_path.iterdir()) == before


@pytest.mark.parametrize("kind, case", [("xml", i) for i in range(len(BAD_XML))]
                         + [("results", i) for i in range(len(BAD_RESULTS))])
def test_bad_file(tmp_path, kind, case):
    """Through ``voc`` and ``ingest voc`` in turn."""
    text, expected = (BAD_XML if kind == "xml" else BAD_RESULTS)[case]
    annotations, results = _voc_inputs(tmp_path, **{kind: text})
    where = annotations / "000001.xml" if kind == "xml" else results / "comp4_det_test_cat.txt"
    _refused(tmp_path, annotations, results, where, expected, command="voc" if case % 2 else "ingest")


def test_bad_folders(tmp_path):
    annotations, results = _voc_inputs(tmp_path, result_name="comp4_det_test_horse.txt")
    _refused(tmp_path, annotations, results, results / "comp4_det_test_horse.txt",
             "class 'horse' not in the ground truth's categories (cat)")
    (results / "comp4_det_test_horse.txt").rename(results / "comp3_det_val_cat.txt")
    (results / "comp4_det_test_cat.txt").write_text(GOOD_RESULTS)
    _refused(tmp_path, annotations, results, results / "comp4_det_test_cat.txt",
             "a second result file for class 'cat' (the first: comp3_det_val_cat.txt)")
    for path in results.iterdir():
        path.unlink()
    _refused(tmp_path, annotations, results, results, "no result file named comp<N>_det_<set>_<class>.txt")
    (annotations / "000001.xml").unlink()
    _refused(tmp_path, annotations, results, annotations, "no .xml annotation files in this folder")
