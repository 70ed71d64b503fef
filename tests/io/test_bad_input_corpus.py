"""A corpus of bad input: hundreds of malformed files made from the bundled sample by mutation (values replaced by
null, strings, booleans, fractions, huge integers, NaN; keys dropped or repeated; files truncated at random offsets,
garbage appended, a byte-order mark, broken structure), and bad protocol parameters.

Through the command (``coco`` and ``ingest coco``), every refused input exits with 2 and one stderr line
``evalengine: error: FILE: …`` naming the file and the place (a 1-based position, an id, or a line and column), and
leaves nothing behind; where pycocotools reads an input (a repeated key keeps its last value, an id written ``42.0``),
the numbers are pycocotools'. Through the readers, a differential test against Python's json (pycocotools' parser)
checks that the fast and the exact way of reading JSON accept the same files and read the same values.
"""

import contextlib
import io
import json
import math
import random
import tempfile
import warnings

import numpy as np
import polars as pl
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalengine.api import evaluate_coco
from evalengine.cli import main
from evalengine.errors import InputError
from evalengine.io.coco import read_coco_gt
from evalengine.io.detections import read_detections
from tests.conftest import PACKAGE_DATA
from tests.reference import pycocotools_eval

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
GT_DICT = json.loads(GT.read_text())
DT_LIST = json.loads(DT.read_text())
DATASET = read_coco_gt(GT)
NAN, INF, HUGE = "__NaN__", "__Infinity__", "__1e999__"  # written as the bare literals Python's json reads


def dumps(value) -> str:
    text = json.dumps(value)
    return (text.replace(f'"{NAN}"', "NaN").replace(f'"{INF}"', "Infinity").replace(f'"{HUGE}"', "1e999"))


def cli(tmp_path, *argv):
    """``(exit code, stdout, stderr lines)`` of the command, temporary folders kept in ``tmp_path``."""
    out, err = io.StringIO(), io.StringIO()
    tempfile.tempdir = str(tmp_path)
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err), warnings.catch_warnings():
            code = main([str(a) for a in argv])
    finally:
        tempfile.tempdir = None
    return code, out.getvalue(), err.getvalue().splitlines()


def refused(tmp_path, bad, *expected, gt=GT, command="ingest"):
    """Run ``ingest coco`` (or ``coco``) on the bad file and check the one-line, located refusal."""
    before = set(tmp_path.iterdir())
    store = tmp_path / "store"
    argv = (["ingest", "coco", "--store", store] if command == "ingest" else ["coco"]) + ["--gt", gt, "--dt", bad]
    code, out, err = cli(tmp_path, *argv, "--quiet")
    assert code == 2 and out == "", err
    assert len(err) == 1 and err[0].startswith(f"evalengine: error: {bad if bad != DT else gt}: "), err
    for text in expected:
        assert text in err[0], (text, err[0])
    assert set(tmp_path.iterdir()) == before  # no store, no temporary folder
    return err[0]


def write(tmp_path, name, text) -> object:
    path = tmp_path / name
    path.write_bytes(text if isinstance(text, bytes) else text.encode())
    return path


# ---------------------------------------------------------------- values of a detection, in every format
# (field, value, message); the position of the detection is always named too
VALUES = [
    ("image_id", 2.7, "'image_id' is 2.7, not an integer"),
    ("image_id", "42", "'image_id' is \"42\", not an integer"),
    ("image_id", True, "'image_id' is true, not an integer"),
    ("image_id", 2**63, "'image_id' is 9223372036854775808, outside the 64-bit integer range"),
    ("image_id", -2**63 - 1, "outside the 64-bit integer range"),
    ("image_id", None, "missing field 'image_id'"),
    ("image_id", [42], "'image_id' is [42], not an integer"),
    ("category_id", 18.5, "'category_id' is 18.5, not an integer"),
    ("category_id", "18", "not an integer"),
    ("category_id", {}, "'category_id' is {}, not an integer"),
    ("category_id", False, "'category_id' is false, not an integer"),
    ("category_id", NAN, "'category_id' is NaN, not an integer"),
    ("score", None, "missing field 'score'"),
    ("score", "0.5", "'score' is \"0.5\", not a number"),
    ("score", True, "'score' is true, not a number"),
    ("score", [0.5], "'score' is [0.5], not a number"),
    ("score", NAN, "'score' is NaN, not a finite number"),
    ("score", INF, "'score' is Infinity, not a finite number"),
    ("score", HUGE, "'score' is 1e999, not a finite number"),
    ("bbox", None, "missing field 'bbox'"),
    ("bbox", [1, 2, 3], "'bbox' must be a list of 4 numbers"),
    ("bbox", "1,2,3,4", "'bbox' is \"1,2,3,4\", not a list of numbers"),
    ("bbox", 5, "'bbox' is 5, not a list of numbers"),
    ("bbox", {"x": 1}, "not a list of numbers"),
    ("bbox", [None, 1, 2, 3], "'bbox' holds a null"),
    ("bbox", ["1", 1, 2, 3], "'bbox' is [\"1\", 1, 2, 3], not a list of numbers"),
    ("bbox", [True, 1, 2, 3], "not a list of numbers"),
    ("bbox", [[1], 1, 2, 3], "not a list of numbers"),
    ("bbox", [NAN, 1, 2, 3], "'bbox' is [NaN, 1, 2, 3], not a list of finite numbers"),
    ("bbox", [0, 0, -1, 3], "'bbox' has a negative width or height"),
]


def _mutated(index: int, field: str, value) -> list:
    dt = [dict(d) for d in DT_LIST]
    dt[index][field] = value
    return dt


@pytest.mark.parametrize("index", [0, 5, 733])
@pytest.mark.parametrize("field, value, message", VALUES)
def test_a_bad_value_in_a_result_file(tmp_path, index, field, value, message):
    bad = write(tmp_path, "dt.json", dumps(_mutated(index, field, value)))
    line = refused(tmp_path, bad, f"detection at position {index + 1}", message)
    if "line 1, column" in line:  # found by Python's json: the column is the key's
        column = int(line.split("line 1, column ")[1].split(")")[0])
        assert bad.read_text()[column - 1:].startswith(f'"{field}"')


@pytest.mark.parametrize("index", [0, 400])
@pytest.mark.parametrize("field, value, message", VALUES[::2])
def test_a_bad_value_in_a_json_lines_file(tmp_path, index, field, value, message):
    lines = "".join(dumps(d) + "\n" for d in _mutated(index, field, value))
    bad = write(tmp_path, "dt.jsonl", lines)
    line = refused(tmp_path, bad, f"detection at position {index + 1}", message)
    assert "line" not in line or f"(line {index + 1}, column" in line


def _parquet(tmp_path, frame: pl.DataFrame):
    path = tmp_path / "dt.parquet"
    frame.write_parquet(path)
    return path


def _frame() -> pl.DataFrame:
    return pl.read_json(DT, schema={"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64),
                                    "score": pl.Float64})


def _at(row: int, value, otherwise: str) -> pl.Expr:
    return pl.when(pl.int_range(pl.len()) == row).then(value).otherwise(pl.col(otherwise))


PARQUET = [  # (column, expression making it, message)
    ("image_id", lambda r: _at(r, pl.lit(42.5), "image_id"), "'image_id' is 42.5, not an integer"),
    ("image_id", lambda r: _at(r, pl.lit(float("nan")), "image_id"), "'image_id' is nan, not an integer"),
    ("image_id", lambda r: _at(r, pl.lit(2**63, pl.UInt64), "image_id").cast(pl.UInt64),
     "'image_id' is 9223372036854775808, outside the 64-bit integer range"),
    ("image_id", lambda r: _at(r, pl.lit(1e19), "image_id"), "outside the 64-bit integer range"),
    ("category_id", lambda r: pl.col("category_id").cast(pl.String), "not an integer"),
    ("category_id", lambda r: _at(r, pl.lit("x"), "category_id"), "'category_id' is 'x', not an integer"),
    ("category_id", lambda r: pl.col("category_id") > 0, "'category_id' is True, not an integer"),
    ("score", lambda r: _at(r, pl.lit("high"), "score"), "'score' is 'high', not a number"),
    ("score", lambda r: pl.col("score") > 0.5, "not a number"),
    ("score", lambda r: _at(r, pl.lit(float("inf")), "score"), "'score' is not finite"),
    ("score", lambda r: _at(r, pl.lit(None, pl.Float64), "score"), "missing field 'score'"),
    ("bbox", lambda r: _at(r, pl.lit([None, 1.0, 2.0, 3.0]), "bbox"), "'bbox' holds a null"),
    ("bbox", lambda r: pl.col("bbox").list.eval(pl.element().cast(pl.String)), "not a list of numbers"),
    ("bbox", lambda r: pl.col("bbox").map_elements(lambda b: [[v] for v in b], pl.List(pl.List(pl.Float64))),
     "not a list of numbers"),
    ("bbox", lambda r: _at(r, pl.lit([1.0, 2.0, 3.0]), "bbox"), "'bbox' must be a list of 4 numbers"),
    ("bbox", lambda r: _at(r, pl.lit([1.0, 2.0, float("nan"), 3.0]), "bbox"), "'bbox' has a non-finite value"),
]


@pytest.mark.parametrize("row", [0, 300])
@pytest.mark.parametrize("column, make, message", PARQUET)
def test_a_bad_value_in_a_parquet_file(tmp_path, row, column, make, message):
    bad = _parquet(tmp_path, _frame().with_columns(make(row).alias(column)))
    line = refused(tmp_path, bad, "detection at position ", message)
    if "(and " not in line and "not a list of numbers" not in line:  # one bad row: it is named
        assert f"detection at position {row + 1}" in line


# ---------------------------------------------------------------- structure
DT_TEXT = DT.read_text()
GT_TEXT = GT.read_text()


def _python_error(text: str) -> tuple:
    """Where Python's json (pycocotools' reader) finds ``text`` wrong (``line L, column C``) and whether at its end
    (an unterminated string is reported where the text ends, not where the string starts)."""
    try:
        json.loads(text)
    except json.JSONDecodeError as exc:
        at = len(text) if exc.msg.startswith("Unterminated string") else exc.pos
        line = text.count("\n", 0, at) + 1
        return f"line {line}, column {at - (text.rfind(chr(10), 0, at) + 1) + 1}: ", at == len(text)
    raise AssertionError("valid JSON")


@pytest.mark.parametrize("offset", [0, 1, 2, 10, 100, 1000] + random.Random(0).sample(range(len(DT_TEXT) - 1), 24))
def test_a_truncated_result_file(tmp_path, offset):
    """Refused at the place Python's json names; said to be truncated when that place is the file's end."""
    bad = write(tmp_path, "dt.json", DT_TEXT[:offset])
    if offset == 0:
        refused(tmp_path, bad, "the file is empty")
        return
    where, at_end = _python_error(DT_TEXT[:offset])
    line = refused(tmp_path, bad, where)
    assert ("(truncated?)" in line) == at_end, line


JSONL_TEXT = "".join(json.dumps(d) + "\n" for d in DT_LIST)


@pytest.mark.parametrize("offset", random.Random(1).sample(range(1, len(JSONL_TEXT) - 1), 16))
def test_a_truncated_json_lines_file(tmp_path, offset):
    text = JSONL_TEXT[:offset]
    bad = write(tmp_path, "dt.jsonl", text)
    head, _, last = text.rpartition("\n")
    try:
        complete = isinstance(json.loads(last), dict) if last else True
    except ValueError:
        complete = False
    if complete:  # whole lines: a shorter file, but a valid one
        assert cli(tmp_path, "ingest", "coco", "--gt", GT, "--dt", bad, "--store", tmp_path / "s", "--quiet")[0] == 0
    else:
        where, at_end = _python_error(last)
        line = refused(tmp_path, bad, where.replace("line 1,", f"line {head.count(chr(10)) + 2},"))
        assert ("(truncated?)" in line) == at_end, line


GT_END = GT_TEXT.rindex("}")


@pytest.mark.parametrize("offset", [1, 2, 17] + random.Random(2).sample(range(3, GT_END), 17))
def test_a_truncated_ground_truth(tmp_path, offset):
    bad = write(tmp_path, "gt.json", GT_TEXT[:offset])
    refused(tmp_path, DT, f"{bad}: line 1, column {offset + 1}: the file ends inside its top-level object", gt=bad)


@pytest.mark.parametrize("garbage", ["]", "x", ",", "{}", " ]", "[]", "\n}", ", {}", "\n\n0"])
def test_text_after_the_result_list(tmp_path, garbage):
    bad = write(tmp_path, "dt.json", DT_TEXT.rstrip() + garbage)
    stripped = garbage.lstrip()
    where = DT_TEXT.rstrip() + garbage[:len(garbage) - len(stripped)]
    line, column = where.count("\n") + 1, len(where.rsplit("\n", 1)[-1]) + 1
    refused(tmp_path, bad, f"line {line}, column {column}: unexpected text after the list's closing ']'")


@pytest.mark.parametrize("garbage", ["x", "}", "{}", "]", ",", "\n\n{}"])
def test_text_after_the_ground_truth(tmp_path, garbage):
    bad = write(tmp_path, "gt.json", GT_TEXT.rstrip() + garbage)
    line = garbage.count("\n") + 1
    refused(tmp_path, DT, f"{bad}: line {line}, column ", "unexpected text after the top-level object", gt=bad)


STRUCTURES = [  # a result file, and what is said about it
    ("", "the file is empty"),
    (" \n\t", "the file is empty"),
    ("[", "line 1, column 2: the file ends before the list's closing ']' (truncated?)"),
    ("[ \n", "line 2, column 1: the file ends before the list's closing ']' (truncated?)"),
    ("[]", "the result list is empty"),
    ("[ ]\n", "the result list is empty"),
    ("{}", "line 1, column 1: expected a JSON list of detections"),
    ("null", "line 1, column 1: expected a JSON list of detections"),
    ("]", "line 1, column 1: expected a JSON list of detections"),
    ("[1]", "detection at position 1 (line 1, column 2): expected an object, found 1"),
    ("[[]]", "detection at position 1 (line 1, column 2): expected an object, found []"),
    ("[{}]", "detection at position 1: missing field 'image_id'"),
    ('[{"image_id": 42}{"image_id": 42}]', "line 1, column 18: expected ',' or ']' after an object, found '{'"),
    ('[{"image_id": 42},]', "line 1, column 19: expected an object after ','"),
    ('[{"image_id": 42},,{}]', "line 1, column 19: not valid JSON (Expecting value)"),
    ('[{"image_id": 42}]]', "line 1, column 19: unexpected text after the list's closing ']'"),
    ('[{"image_id": 42 "score": 1}]', "line 1, column 18: not valid JSON (Expecting ',' delimiter)"),
    ("[{'image_id': 42}]", "line 1, column 3: not valid JSON (Expecting property name"),
    ('[{"image_id": 0x2A}]', "line 1, column 16: not valid JSON (Expecting ',' delimiter)"),
    ('[{"image_id": 42}]\x00', "line 1, column 19: unexpected text after the list's closing ']'"),
    ('\ufeff[{"image_id": 42}]', "line 1, column 1: the file starts with a UTF-8 byte-order mark"),
]


@pytest.mark.parametrize("text, message", STRUCTURES)
def test_a_malformed_result_list(tmp_path, text, message):
    refused(tmp_path, write(tmp_path, "dt.json", text), message)


def test_invalid_utf8_is_located(tmp_path):
    bad = write(tmp_path, "dt.json", b'[{"image_id": 42, "note": "\xff"}]')
    refused(tmp_path, bad, "line 1, column 28: not UTF-8 text")


@pytest.mark.parametrize("prefix", [b"\xef\xbb\xbf"])
@pytest.mark.parametrize("name, text", [("dt.json", DT_TEXT), ("dt.jsonl", JSONL_TEXT), ("gt.json", GT_TEXT)])
def test_a_byte_order_mark(tmp_path, prefix, name, text):
    """pycocotools' json.load refuses a BOM; so do we, saying so."""
    bad = write(tmp_path, name, prefix + text.encode())
    argv = dict(gt=bad) if name == "gt.json" else {}
    refused(tmp_path, bad if name != "gt.json" else DT, f"{bad}: line 1, column 1: the file starts with a UTF-8 "
            "byte-order mark", **argv)


# ---------------------------------------------------------------- the ground truth
def _gt(section: str, index: int, field: str, value) -> str:
    gt = json.loads(GT_TEXT)
    if value is _DROP:
        del gt[section][index][field]
    else:
        gt[section][index][field] = value
    return dumps(gt)


_DROP = object()
GT_VALUES = [  # (list, index, field, value, message)
    ("annotations", 3, "id", 2.7, "annotation at position 4 (line 1, column"),
    ("annotations", 3, "id", "5", "'id' is \"5\", not an integer"),
    ("annotations", 3, "id", 2**63, "'id' is 9223372036854775808, outside the 64-bit integer range"),
    ("annotations", 3, "id", _DROP, "annotation at position 4: missing field 'id'"),
    ("annotations", 3, "image_id", 74.5, "'image_id' is 74.5, not an integer"),
    ("annotations", 3, "category_id", "18", "'category_id' is \"18\", not an integer"),
    ("annotations", 3, "bbox", [None, 1, 2, 3], "'bbox' holds a null"),
    ("annotations", 3, "bbox", [1, 2, "3", 4], "not a list of numbers"),
    ("annotations", 3, "area", "big", "'area' is \"big\", not a number"),
    ("annotations", 3, "area", -1, "'area' must be a finite number >= 0"),
    ("annotations", 3, "iscrowd", 0.5, "'iscrowd' is 0.5, not an integer"),
    ("images", 2, "id", 42.5, "image at position 3 (line 1, column"),
    ("images", 2, "id", 42.5, "'id' is 42.5, not an integer"),
    ("images", 2, "id", "42", "image at position 3 (line 1, column"),
    ("images", 2, "id", "42", "'id' is \"42\", not an integer"),
    ("images", 2, "id", None, "image at position 3: missing field 'id'"),
    ("images", 2, "width", 640.5, "'width' is 640.5, not an integer"),
    ("images", 2, "id", 2**64, "'id' is 18446744073709551616, outside the 64-bit integer range"),
    ("categories", 0, "id", 1.5, "'id' is 1.5, not an integer"),
    ("categories", 0, "id", 1.5, "category at position 1 (line 1, column"),
]


@pytest.mark.parametrize("section, index, field, value, message", GT_VALUES)
def test_a_bad_value_in_the_ground_truth(tmp_path, section, index, field, value, message):
    bad = write(tmp_path, "gt.json", _gt(section, index, field, value))
    refused(tmp_path, DT, f"{bad}: ", message, gt=bad)


@pytest.mark.parametrize("change, message", [
    (lambda gt: gt.pop("annotations"), "missing the top-level list 'annotations'"),
    (lambda gt: gt.update(images={}), "line 1, column "),
    (lambda gt: gt.update(categories=[]), "'categories' is empty"),
    (lambda gt: gt.update(categories=[{"name": "x"}]), "category at position 1: missing field 'id'"),
    (lambda gt: gt["categories"].append(dict(gt["categories"][0])), "duplicate category id 1"),
])
def test_a_bad_ground_truth_structure(tmp_path, change, message):
    gt = json.loads(GT_TEXT)
    change(gt)
    bad = write(tmp_path, "gt.json", json.dumps(gt))
    refused(tmp_path, DT, f"{bad}: ", message, gt=bad)


@pytest.mark.parametrize("text, message", [
    ('{"images": [], "annotations": [], "categories": [], "info": {"a": tru}}', "not valid JSON"),
    ('{"images": [] "annotations": [], "categories": []}', "not valid JSON"),
    ('{"images": [], "annotations": [], "categories": [{"id": 1}]]}', "not valid JSON"),
    ('{"images": [], "annotations": [], "categories": [{"id": 1}], "info": }', "expected a value for 'info'"),
    ('{"images": [{"id": 1}], "annotations": [], "categories": [{"id": 1}]} {}', "unexpected text after the top-level"),
    ('{"images": [{"id": 1}], "annotations": [], "categories": [{"id": 1}' + "\n", "the file ends inside"),
])
def test_a_malformed_ground_truth(tmp_path, text, message):
    """Refused at the place Python's json names."""
    bad = write(tmp_path, "gt.json", text)
    refused(tmp_path, DT, f"{bad}: {_python_error(text)[0]}{message}", gt=bad)


# ---------------------------------------------------------------- inputs pycocotools reads: its numbers
def _same_numbers(tmp_path, gt_text: str, dt_text: str, dt_name="dt.json", warns=True):
    gt_path, dt_path = write(tmp_path, "gt.json", gt_text), write(tmp_path, dt_name, dt_text)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        ours = evaluate_coco(gt_path, dt_path).stats()
    repeated = [str(w.message) for w in caught if "appears twice in one object" in str(w.message)]
    assert bool(repeated) == warns, repeated
    dt = [json.loads(line) for line in dt_text.splitlines()] if dt_name.endswith(".jsonl") else json.loads(dt_text)
    assert ours == pytest.approx(list(pycocotools_eval(json.loads(gt_text), dt).stats), abs=1e-12)
    return repeated


@pytest.mark.parametrize("key, first", [("score", 0.999), ("category_id", 1), ("bbox", [0, 0, 1, 1]),
                                        ("image_id", 139)])
def test_a_repeated_key_keeps_its_last_value(tmp_path, key, first):
    """pycocotools reads files with json.load, where the last of repeated keys wins; so do we, with a warning."""
    text = DT_TEXT.replace("{", "{" + json.dumps(key) + ": " + json.dumps(first) + ", ", 1)
    assert json.loads(text) == DT_LIST
    (message,) = _same_numbers(tmp_path, GT_TEXT, text)
    column = text.index(json.dumps(key), text.index(json.dumps(key)) + 1) + 1  # the repeated key
    assert message.endswith(f"line 1, column {column}: key {key!r} appears twice in one object; the last value is "
                            "used, as pycocotools (Python's json) does")
    lines = JSONL_TEXT.replace("{", "{" + json.dumps(key) + ": " + json.dumps(first) + ", ", 2)
    _same_numbers(tmp_path, GT_TEXT, lines, "dt.jsonl")


def test_repeated_keys_in_the_ground_truth(tmp_path):
    gt = GT_TEXT.replace('"category_id": 18,', '"category_id": 1, "category_id": 18,', 1)
    gt = gt.replace('{"license": 3,', '{"id": 5, "license": 3,', 1)
    assert json.loads(gt) == GT_DICT
    _same_numbers(tmp_path, gt, DT_TEXT)


def test_integral_float_ids_are_integers(tmp_path):
    """pycocotools compares ids with ==, and 42.0 == 42: the same numbers, from JSON, JSON Lines and Parquet."""
    dt = [dict(d, image_id=float(d["image_id"]), category_id=float(d["category_id"])) for d in DT_LIST]
    _same_numbers(tmp_path, GT_TEXT, json.dumps(dt), warns=False)
    want = evaluate_coco(GT, DT).stats()
    _frame().with_columns(pl.col("image_id", "category_id").cast(pl.Float64)).write_parquet(tmp_path / "f.parquet")
    assert evaluate_coco(GT, tmp_path / "f.parquet").stats() == want
    write(tmp_path, "f.jsonl", "".join(json.dumps(d) + "\n" for d in dt))
    assert evaluate_coco(GT, tmp_path / "f.jsonl").stats() == want


@pytest.mark.parametrize("layout", ["compact", "indented", "one per line", "mixed"])
def test_every_layout_reads_alike(tmp_path, layout):
    text = {"compact": json.dumps(DT_LIST, separators=(",", ":")), "indented": json.dumps(DT_LIST, indent=3),
            "one per line": "[\n" + ",\n".join(json.dumps(d) for d in DT_LIST) + "\n]",
            "mixed": "[" + ",".join(json.dumps(d, indent=i % 3 or None) for i, d in enumerate(DT_LIST)) + "]"}[layout]
    assert read_detections(write(tmp_path, "dt.json", text), DATASET).equals(read_detections(DT, DATASET))


# ---------------------------------------------------------------- other readers
def test_a_corrupt_parquet_file(tmp_path):
    data = (tmp_path / "ok.parquet")
    _frame().write_parquet(data)
    raw = data.read_bytes()
    data.unlink()
    for n, cut in enumerate([0, 4, len(raw) // 2, len(raw) - 5]):
        bad = write(tmp_path, f"dt{n}.parquet", raw[:cut] + b"garbage" * (cut == 4))
        refused(tmp_path, bad, "not a readable Parquet file")
        (tmp_path / f"dt{n}.parquet").unlink()


@pytest.mark.parametrize("column, value, message", [
    ("shard", 1, "column(s) shard already exist in the images table"),
    ("width", 1, "column(s) width already exist in the images table"),
    ("file_name", "x", "column(s) file_name already exist in the images table"),
])
def test_image_metadata_cannot_replace_our_columns(tmp_path, column, value, message):
    meta = write(tmp_path, "meta.csv", f"image_id,{column}\n42,{value}\n")
    code, _, err = cli(tmp_path, "ingest", "coco", "--gt", GT, "--dt", DT, "--store", tmp_path / "s",
                       "--image-metadata", meta, "--quiet")
    assert code == 2 and err == [f"evalengine: error: {meta}: {message}; rename them"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["meta.csv"]


@pytest.mark.parametrize("rows, message", [
    ("42,a\n42,b\n", "image_id 42 appears more than once"),
    ("7,a\n", "image_id 7 not in the ground truth's images"),
    ("42.5,a\n", "row 1: 'image_id' is 42.5, not an integer"),
    (",a\n", "row 1: no 'image_id'"),
])
def test_bad_image_metadata(tmp_path, rows, message):
    meta = write(tmp_path, "meta.csv", "image_id,weather\n" + rows)
    code, _, err = cli(tmp_path, "ingest", "coco", "--gt", GT, "--dt", DT, "--store", tmp_path / "s",
                       "--image-metadata", meta, "--quiet")
    assert code == 2 and err == [f"evalengine: error: {meta}: {message}"]


@pytest.mark.parametrize("header, message", [
    ("image_id,weather,weather", "line 1: column(s) weather appear more than once"),
    ("image_id,image_id", "line 1: column(s) image_id appear more than once"),
])
def test_image_metadata_with_a_repeated_column(tmp_path, header, message):
    """Polars would read the first and rename the second: refused, as a repeated key of JSON is not."""
    meta = write(tmp_path, "meta.csv", header + "\n" + ",".join(["42"] * header.count(",")) + ",x\n")
    code, _, err = cli(tmp_path, "ingest", "coco", "--gt", GT, "--dt", DT, "--store", tmp_path / "s",
                       "--image-metadata", meta, "--quiet")
    assert code == 2 and err == [f"evalengine: error: {meta}: {message}"]


@pytest.fixture
def proposal_gt(tmp_path):
    gt = {"images": [{"id": 7, "width": 100, "height": 80}], "annotations": [
        {"id": 1, "image_id": 7, "category_id": 1, "bbox": [10, 10, 30, 20], "area": 600, "iscrowd": 0}],
        "categories": [{"id": 1, "name": "a"}]}
    return write(tmp_path, "gt.json", json.dumps(gt))


def _proposals_refused(tmp_path, gt, bad, *expected):
    before = set(tmp_path.iterdir())
    code, out, err = cli(tmp_path, "proposals", "--gt", gt, "--proposals", bad, "--budgets", "1", "10")
    assert code == 2 and len(err) == 1 and err[0].startswith(f"evalengine: error: {bad}: "), err
    for text in expected:
        assert text in err[0], (text, err[0])
    assert set(tmp_path.iterdir()) == before


@pytest.mark.parametrize("n_rows", [5, 10_050])  # each value is parsed by its column's type, not the first rows'
@pytest.mark.parametrize("column, value, message", [
    ("x1", "abc", "(line {line}): 'x1' is 'abc', not a number"),
    ("image_id", "7.5", ": 'image_id' is 7.5, not an integer"),
    ("image_id", "seven", "(line {line}): 'image_id' is 'seven', not an integer"),
    ("score", "high", "(line {line}): 'score' is 'high', not a number"),
])
def test_a_bad_value_in_a_proposal_csv(tmp_path, proposal_gt, n_rows, column, value, message):
    rows = [{"image_id": "7", "x1": "1", "y1": "2", "x2": "30", "y2": "40", "score": "0.5"} for _ in range(n_rows)]
    rows[-2][column] = value
    text = "image_id,x1,y1,x2,y2,score\n" + "".join(",".join(r.values()) + "\n" for r in rows)
    bad = write(tmp_path, "p.csv", text)
    located = f"proposal at position {n_rows - 1}" + (" " if message[0] == "(" else "")
    _proposals_refused(tmp_path, proposal_gt, bad, located + message.format(line=n_rows))


@pytest.mark.parametrize("name, text, message", [
    ("p.csv", "image_id,x1,y1,x2,x2\n7,1,2,3,4\n", "line 1: column(s) x2 appear more than once"),
    ("p.json", "[]", "no proposals"),
    ("p.json", '[{"image_id": 7.5, "bbox": [1, 2, 3, 4], "score": 1}]', "'image_id' is 7.5, not an integer"),
    ("p.json", '[{"image_id": 7, "bbox": [1, null, 3, 4]}]', "proposal at position 1: 'bbox' holds a null"),
    ("p.jsonl", '{"image_id": 7, "x1": 1, "y1": 2, "x2": "3", "y2": 4}\n', "'x2' is \"3\", not a number"),
    ("p.jsonl", '{"image_id": 7, "x1": 1, "y1": 2, "x2": 3, "y2": 4}\n{"image_id": 7', "line 2, column 15: the file "
                "ends early (truncated?)"),
    ("p.json", '[{"image_id": 7, "bbox": [1, 2, 3, 4]}', "line 1, column 39: the file ends before"),
])
def test_bad_proposal_files(tmp_path, proposal_gt, name, text, message):
    _proposals_refused(tmp_path, proposal_gt, write(tmp_path, name, text), message)


def test_a_proposal_npz_of_strings(tmp_path, proposal_gt):
    folder = tmp_path / "npz"
    folder.mkdir()
    np.savez(folder / "7.npz", boxes=np.array([["1", "2", "3", "4"]]))
    code, _, err = cli(tmp_path, "proposals", "--gt", proposal_gt, "--proposals", folder)
    assert code == 2 and err == [f"evalengine: error: {folder / '7.npz'}: 'boxes' must hold numbers, not <U1"]


# ---------------------------------------------------------------- protocol parameters
@pytest.mark.parametrize("argv, message", [
    (["--iou-thresholds", "nan"], "coco: argument --iou-thresholds: expected a number, got 'nan'; see evalengine coco --help"),
    (["--iou-thresholds", "1.5"], "coco: argument --iou-thresholds: an IoU threshold is between 0 and 1, got 1.5; see "
                                 "evalengine coco --help"),
    (["--iou-thresholds", "0"], "iou_thresholds: 0.0 is not in (0, 1]"),
    (["--iou-thresholds", "0.5", "0.5"], "iou_thresholds must be increasing, without repeats: got [0.5, 0.5]"),
    (["--iou-thresholds", "0.75", "0.5"], "iou_thresholds must be increasing, without repeats: got [0.75, 0.5]"),
    (["--area-ranges", "all:100:0"], "area_ranges: 'all' has lo 100.0 > hi 0.0"),
    (["--area-ranges", "all:0:1e10", "all:0:100"], "area_ranges: the label 'all' is used twice"),
    (["--area-ranges", "all:nan:1"], "coco: argument --area-ranges: expected a number, got 'nan'; see evalengine coco "
                                     "--help"),
    (["--area-ranges", ":0:1"], "area_ranges: a label must be a non-empty string, got ''"),
    (["--max-dets", "0"], "coco: argument --max-dets: must be at least 1, got 0; see evalengine coco --help"),
    (["--max-dets", "10", "10"], "max_dets: distinct positive integers are needed, got [10, 10]"),
])
def test_bad_coco_parameters(tmp_path, argv, message):
    code, out, err = cli(tmp_path, "coco", "--gt", GT, "--dt", DT, *argv)
    assert code == 2 and err == [f"evalengine: error: {message}"]


@pytest.mark.parametrize("argv, message", [
    (["--iou", "nan"], "proposals: argument --iou: expected a number, got 'nan'; see evalengine proposals --help"),
    (["--iou", "0.5", "1.5"], "proposals: argument --iou: an IoU threshold is between 0 and 1, got 1.5; see "
                               "evalengine proposals --help"),
    (["--budgets", "0"], "proposals: argument --budgets: must be at least 1, got 0; see evalengine proposals --help"),
    (["--oma", "--iou", "0"], "iou_thresholds: 0.0 is not in (0, 1]"),
])
def test_bad_proposal_parameters(tmp_path, proposal_gt, argv, message):
    props = write(tmp_path, "p.json", '[{"image_id": 7, "bbox": [10, 10, 30, 20], "score": 1}]')
    code, _, err = cli(tmp_path, "proposals", "--gt", proposal_gt, "--proposals", props, *argv)
    assert code == 2 and err == [f"evalengine: error: {message}"]


# ---------------------------------------------------------------- differential: our JSON reading vs Python's json
def _reference(text: bytes, images: set):
    """The detections Python's json (pycocotools' reader) reads from ``text``, checked by our rules, or None."""
    try:
        if text.startswith(b"\xef\xbb\xbf"):
            return None
        objects = json.loads(text.decode("utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(objects, list) or not objects:
        return None
    rows = []
    for o in objects:
        if not isinstance(o, dict):
            return None
        ids = [o.get("image_id"), o.get("category_id")]
        if any(isinstance(v, bool) or not isinstance(v, (int, float)) or not float(v).is_integer()
               or not -2**63 <= v < 2**63 for v in ids) or int(ids[0]) not in images:
            return None
        score, box = o.get("score"), o.get("bbox")
        numbers = [score] + (box if isinstance(box, list) else [])
        if (not isinstance(box, list) or len(box) != 4 or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                                              or not math.isfinite(v) for v in numbers)
                or box[2] < 0 or box[3] < 0):
            return None
        rows.append((int(ids[0]), int(ids[1]), float(score), *map(float, box)))
    return rows


def _read_as_python_reads(path, list_text: bytes) -> str | None:
    """Read ``path`` as we do, and ``list_text`` (its text, as a JSON list) as Python's json does: the same rows, or a
    refusal where Python's json or our rules refuse, as one line naming the file (returned)."""
    want = _reference(list_text, set(DATASET.images.get_column("image_id").to_list()))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            got = read_detections(path, DATASET)
    except InputError as exc:
        message = str(exc)
        assert want is None, (list_text, message)
        assert message.startswith(f"{path}: ") and "\n" not in message
        return message
    assert want is not None, list_text
    assert got.select("image_id", "category_id", "score", "x", "y", "w", "h").rows() == want
    return None


SMALL = json.dumps([dict(d, note="a}, {\"b\": [1]}") if i == 1 else d for i, d in enumerate(DT_LIST[:6])]).encode()
PIECES = [b"", b" ", b"\n", b",", b":", b"{", b"}", b"[", b"]", b'"', b"\\", b"0", b"1.5", b"-", b"e9", b"null",
          b"true", b"NaN", b'"score": 2', b'"image_id": 74.0', b"\x00", b"\t", b"\xff", b"\xef\xbb\xbf"]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(edits=st.lists(st.tuples(st.integers(0, len(SMALL)), st.integers(0, 3), st.sampled_from(PIECES)),
                      min_size=1, max_size=3))
def test_reading_agrees_with_pythons_json(tmp_path_factory, edits):
    """Random edits of a small result file (bytes replaced, inserted, deleted): we accept exactly what Python's json
    reads and our rules allow, with the same values, and refuse the rest with a located error."""
    text = SMALL
    for at, length, piece in edits:
        text = text[:at] + piece + text[at + length:]
    path = tmp_path_factory.mktemp("fuzz") / "dt.json"
    path.write_bytes(text)
    message = _read_as_python_reads(path, text)
    if message is not None:
        assert any(s in message for s in ("line ", "position ", "image_id ", "empty")), message
        if not text.lstrip(b" \t\r\n").startswith(b"["):
            return  # not a list: it is said what is found
        try:
            decoded = text.decode("utf-8")
            json.loads(decoded)
        except json.JSONDecodeError:  # not JSON: refused where Python's json says
            where, at_end = _python_error(decoded)
            assert where in message and ("(truncated?)" in message) == at_end, (text, message)
        except UnicodeDecodeError:
            assert "not UTF-8 text" in message, message


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2**70, 2**70) | st.sampled_from([42, 74, 1, 18, 2.0, 42.0, -0.0, 1e300])
    | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(st.text(max_size=3), inner, max_size=2), max_leaves=6)
FIELDS = ["image_id", "category_id", "score", "bbox", "note"]


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(changes=st.lists(st.tuples(st.integers(0, 5), st.sampled_from(FIELDS), JSON_VALUES, st.booleans()),
                        min_size=1, max_size=3),
       layout=st.sampled_from([None, 1, "lines"]))
def test_values_read_as_pythons_json_reads_them(tmp_path_factory, changes, layout):
    """Any JSON value in place of a field, or given as a repeated key first: accepted exactly when Python's json and
    our rules accept it, with the same values, in a JSON list of any layout and in JSON Lines."""
    objects = [dict(d) for d in DT_LIST[:6]]
    texts = [json.dumps(o) for o in objects]
    for index, field, value, repeat in changes:
        if repeat:  # the value comes first and the object's own value last: the last one wins
            texts[index] = "{" + json.dumps(field) + ": " + json.dumps(value) + ", " + texts[index][1:]
        else:
            objects[index][field] = value
            texts[index] = json.dumps(objects[index], indent=layout if layout != "lines" else None)
    text = ("".join(t + "\n" for t in texts) if layout == "lines" else "[" + ", ".join(texts) + "]").encode()
    path = tmp_path_factory.mktemp("values") / ("dt.jsonl" if layout == "lines" else "dt.json")
    path.write_bytes(text)
    message = _read_as_python_reads(path, b"[" + b",".join(text.splitlines()) + b"]" if layout == "lines" else text)
    assert message is None or "position " in message or "image_id " in message, message


@pytest.mark.parametrize("text, message", [
    ("", "the file is empty (expected JSON Lines)"),
    ("\n \n", "the file is empty (expected JSON Lines)"),
    ('{"image_id": 4\n', "line 2, column 1: the file ends early (truncated?)"),  # as Python's json places it
    ('[{"image_id": 42}]\n', "detection at position 1 (line 1, column 1): expected an object, found [{\"image_id\": 42}]"),
    ("{}\n", "detection at position 1: missing field 'image_id'"),
    ('{"image_id": 42} {"image_id": 42}\n', "line 1, column 18: expected one object per line"),
])
def test_a_malformed_json_lines_file(tmp_path, text, message):
    refused(tmp_path, write(tmp_path, "dt.jsonl", text), message)
