"""COCO result files are parsed in chunks of whole objects: any chunk size gives the same detections."""

import json
import re

import polars as pl
import pytest

from evalengine.errors import InputError
from evalengine.io.coco import RESULT_FIELDS, read_coco_gt
from evalengine.io.detections import read_detections
from evalengine.io.json_scan import json_list_chunks, jsonl_chunks
from evalengine.io.json_read import read_json_objects
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
    with pytest.raises(InputError, match="a JSON object whose 'annotations' hold the results, where a COCO result file "
                                         "is that list alone"):
        list(json_list_chunks(path))
    path.write_text(json.dumps({"results": []}))
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
    column = path.read_text().rindex('"score": NaN') + 1
    with pytest.raises(InputError, match=rf"dt.json: line 1, column {column}: 'score' is NaN, not a finite number"):
        read_json_objects(path, RESULT_FIELDS, objects, offset)


def test_truncated_file_is_an_error(tmp_path):
    path = tmp_path / "dt.json"
    path.write_text(DT.read_text()[:-40])
    with pytest.raises(InputError, match=rf"dt.json: line 1, column {len(DT.read_text()) - 39}: the file ends early "
                                         r"\(truncated\?\)"):
        read_detections(path, read_coco_gt(PACKAGE_DATA / "instances_val2014_100.json"))


def _reference_events(text: bytes):
    """The structure at depth 1, by a plain reading of JSON's grammar (strings, escapes, nesting)."""
    from evalengine.io import json_scan as js

    depth, in_string, escaped, out = 0, False, False, []
    for i, c in enumerate(text):
        kind = 0
        if in_string:
            if escaped:
                escaped = False
            elif c == ord("\\"):
                escaped = True
            elif c == ord('"'):
                in_string = False
                kind = js.KEY_CLOSES if depth == 1 else 0
        elif c == ord('"'):
            in_string = True
            kind = js.KEY_OPENS if depth == 1 else 0
        elif c in b"{[":
            depth += 1
        elif c in b"}]":
            depth -= 1
            kind = js.TOP_CLOSES if depth == 0 else (js.ELEMENT_CLOSES if depth == 1 and c == ord("}") else 0)
        elif depth == 1 and c in b":,":
            kind = js.COLON if c == ord(":") else js.COMMA
        if kind:
            out.append((i, kind))
    return out


@pytest.mark.parametrize("seed", range(6))
def test_scanner_events_equal_a_plain_reading(seed):
    """Strings holding braces, brackets, separators, escaped quotes and backslashes; any block size."""
    import numpy as np

    from evalengine.io import json_scan as js

    rng = np.random.default_rng(seed)
    pieces = ['a', '{', '}', '[', ']', ':', ',', '\\"', '\\\\', ' ', '\\n', 'é']

    def string():
        return '"' + "".join(rng.choice(pieces, rng.integers(0, 6))) + '"'

    def value(depth):
        kind = rng.integers(0, 4 if depth < 3 else 2)
        if kind == 0:
            return str(rng.integers(-5, 5))
        if kind == 1:
            return string()
        if kind == 2:
            return "[" + ", ".join(value(depth + 1) for _ in range(rng.integers(0, 4))) + "]"
        return "{" + ",".join(f"{string()}: {value(depth + 1)}" for _ in range(rng.integers(0, 4))) + "}"

    for top in ("{" + ", ".join(f'"k{i}": {value(1)}' for i in range(8)) + "}",
                "[" + ",".join(value(1) for _ in range(20)) + "]"):
        text = top.encode()
        want = _reference_events(text)
        for block in (1, 3, 64, len(text)):
            state, got = np.zeros(3, np.int64), []
            for at in range(0, len(text), block):
                events = js._events(np.frombuffer(text[at:at + block], np.uint8), state, at, js._STRUCTURE_CLASS)
                got += [tuple(map(int, e)) for e in events]
            assert got == want
        ends = [i for i, kind in want if kind == js.ELEMENT_CLOSES]
        state = np.zeros(3, np.int64)
        assert js._last_element_end(np.frombuffer(text, np.uint8), state, js._BYTE_CLASS) == (ends[-1] if ends else -1)


@pytest.mark.parametrize("chunk_bytes", [97, 4096])
@pytest.mark.parametrize("end, message", [
    ("", "the file ends before the list's closing ']' (truncated?)"),
    ("]x", "unexpected text after the list's closing ']'"),
    (",]", "expected an object after ','"),
    (", 5]", "expected an object"),
    (', {"image_id": 42', "the file ends early (truncated?)"),
    ("]]", "unexpected text after the list's closing ']'"),
])
def test_the_end_of_a_list_read_in_chunks(tmp_path, chunk_bytes, end, message):
    """Read in blocks, a list must still close with ']' and nothing after it: the error is Python's json's place."""
    text = json.dumps(json.loads(DT.read_text())[:40])[:-1] + end
    path = tmp_path / "dt.json"
    path.write_text(text)
    try:
        json.loads(text)
        at = text.rindex("5")  # JSON, but not an object
    except json.JSONDecodeError as exc:
        at = len(text) if exc.msg.startswith("Unterminated") else exc.pos
    with pytest.raises(InputError, match=rf"dt.json: line 1, column {at + 1}: .*{re.escape(message)}"):
        for offset, objects in json_list_chunks(path, chunk_bytes):
            read_json_objects(path, RESULT_FIELDS, objects, offset)


@pytest.mark.parametrize("chunk_bytes", [97, 1 << 20])
@pytest.mark.parametrize("separator", ["", " ", "\n", ";"])
def test_objects_must_be_separated_by_commas(tmp_path, chunk_bytes, separator):
    objects = [json.dumps(o) for o in json.loads(DT.read_text())[:40]]
    text = "[" + ", ".join(objects[:20]) + separator + ", ".join(objects[20:]) + "]"
    path = tmp_path / "dt.json"
    path.write_text(text)
    at = text.index(objects[19]) + len(objects[19])
    at += len(separator) - len(separator.lstrip())  # Python's json: at the first non-blank character
    where = f"line {text.count(chr(10), 0, at) + 1}, column {at - text.rfind(chr(10), 0, at)}"
    with pytest.raises(InputError, match=rf"dt.json: {where}: expected ',' or ']' after an object"):
        for offset, chunk in json_list_chunks(path, chunk_bytes):
            read_json_objects(path, RESULT_FIELDS, chunk, offset)


def test_positions_count_the_objects_of_earlier_chunks(tmp_path, monkeypatch):
    """A detection is named by its position in the file, whatever chunk it is read in; JSON Lines by its line."""
    import functools

    from evalengine.io import detections

    objects = json.loads(DT.read_text())
    objects[700]["category_id"] = 2.5
    path, lines = tmp_path / "dt.json", tmp_path / "dt.jsonl"
    path.write_text(json.dumps(objects))
    lines.write_text("".join(json.dumps(o) + "\n" for o in objects))
    monkeypatch.setattr(detections, "json_list_chunks", functools.partial(json_list_chunks, chunk_bytes=1000))
    monkeypatch.setattr(detections, "jsonl_chunks", functools.partial(jsonl_chunks, chunk_bytes=1000))
    dataset = read_coco_gt(PACKAGE_DATA / "instances_val2014_100.json")
    column = path.read_text().index('"category_id": 2.5') + 1
    with pytest.raises(InputError, match=rf"detection at position 701 \(line 1, column {column}\): 'category_id' is "
                                         "2.5, not an integer"):
        read_detections(path, dataset)
    column = lines.read_text().splitlines()[700].index('"category_id"') + 1
    with pytest.raises(InputError, match=rf"detection at position 701 \(line 701, column {column}\): 'category_id' is "
                                         "2.5"):
        read_detections(lines, dataset)


@pytest.mark.parametrize("chunk_bytes", [1, 50, 1 << 20])
def test_json_lines_chunks_are_whole_lines(tmp_path, chunk_bytes):
    text = "".join(json.dumps(o) + "\n" for o in json.loads(DT.read_text())[:30]) + '{"last": "no line end"}'
    path = tmp_path / "dt.jsonl"
    path.write_text(text)
    chunks = list(jsonl_chunks(path, chunk_bytes))
    assert b"".join(c for _, c in chunks) == text.encode()
    assert all(text.encode()[at:at + len(c)] == c for at, c in chunks)
    assert all(c.endswith(b"\n") for _, c in chunks[:-1])


def test_repeated_keys_are_found_by_the_scanner():
    from evalengine.io.json_scan import repeated_key

    assert repeated_key(b'{"a": 1, "b": {"a": 2}}, {"a": "b", "c": [1, "a"]}') == -1
    assert repeated_key(b'{"a": 1}, {"b": 1, "a": 2, "b": 3}') == 27
    assert repeated_key(b'{"a": "a"}') == 6  # a value equal to a key: a false alarm, the exact reader decides
    assert repeated_key(b'{"a\\"": 1, "a\\"": 2}') == 11
    assert repeated_key(b'\n'.join(b'{"k%d": 1}' % i for i in range(100))) == -1
    many = b"{" + b", ".join(b'"k%d": 1' % i for i in range(70)) + b"}"
    assert repeated_key(many) > 0  # more keys than compared: read exactly


def test_compact_keeps_strings():
    from evalengine.io.json_scan import compact

    assert compact(b'{ "a b" : [ 1 ,\n 2 ],\t"c\\" d": " x " }') == b'{"a b":[1 ,2 ],"c\\" d":" x "}'
    assert compact(b'[4\n2, true\n, nul l, {"a":\n1\n}\n,\n{}]') == b'[4 2,true ,nul l,{"a":1 },{}]'


def test_integral_floats_read_fast_and_exactly(tmp_path):
    """Ids written as floats are read by Polars as numbers where every one is an exact integer (below 2**53), and by
    Python's json otherwise: the same integers as pycocotools' reader gives."""
    dataset = read_coco_gt(PACKAGE_DATA / "instances_val2014_100.json")
    objects = json.loads(DT.read_text())
    path = tmp_path / "dt.json"
    for big in (1e16, 9007199254740993.0, -2.0**62):
        text = json.dumps([dict(o, image_id=float(o["image_id"])) for o in objects]).replace(
            '"category_id": 18', f'"category_id": {big!r}', 1)
        path.write_text(text)
        with pytest.warns(Warning, match="category_id"):
            got = read_detections(path, dataset)
        want = [int(o["category_id"]) for o in json.loads(text)]
        assert got.get_column("category_id").to_list() == want and got.get_column("image_id").dtype == pl.Int64
