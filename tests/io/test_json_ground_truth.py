"""The ground-truth kernel (:mod:`evalengine.io.json_ground_truth`) against the exact reader alone.

Generated COCO ground-truth files with every form a field takes (integers written as floats or with exponents, -0,
17-digit decimals, numbers beyond Clinger's fast path, flags as booleans, missing optional keys, extra scalar keys of
every type, skipped nested keys, unicode names, polygon / RLE / uncompressed RLE segmentations, whitespace and pretty
printing, keys and top-level members in any order) are read by :func:`read_coco_gt` and by ``read_coco_gt(...,
kernel=False)``: the three tables are equal bit for bit (the sign of zero included), with the same warnings; the kernel
must have read the common forms itself. Files the kernel hands over (keypoints, repeated or escaped keys, non-ASCII
annotation text, an overflowing number, a broken file) and files with a bad value give the exact reader's message.
Small pieces on several threads exercise the cuts between annotations.
"""

import json
import random
import warnings

import numpy as np
import polars as pl
import pytest

from evalengine.errors import InputError
from evalengine.io import json_ground_truth
from evalengine.io.coco import read_coco_gt
from evalengine.io.rle import encode_strings
from tests.io.test_json_results import _number, near_halfway

_H, _W = 6, 5  # every image's size (an RLE's counts sum to its area)


def _integer(rng: random.Random, value: int) -> str:
    """An integer as writers write it, now and then as an integral float or with an exponent."""
    kind = rng.randrange(12)
    if kind == 0:
        return f"{value}.0"
    if kind == 1 and value:
        return f"{value}e0"
    if kind == 2 and value:
        return f"{value * 10}E-1"
    return str(value)


def _segmentation(rng: random.Random) -> str:
    kind = rng.randrange(4)
    if kind == 0:
        parts = [[float(_number(rng)) % _W if k % 2 == 0 else rng.uniform(0, _H) for k in range(2 * rng.randrange(3, 7))]
                 for _ in range(rng.randrange(1, 3))]
        written = lambda v: next(t for t in iter(lambda: _number(rng), None) if float(t) < 1e300)  # noqa: E731
        return json.dumps(parts) if rng.random() < 0.5 else "[" + ", ".join(  # (above 1e300: handed over)
            "[" + ",".join(written(v) if rng.random() < 0.3 else repr(v) for v in part) + "]" for part in parts) + "]"
    cuts = sorted(rng.sample(range(1, _H * _W), rng.randrange(0, 6)))
    counts = np.diff([0, *cuts, _H * _W]).astype(np.uint32)
    if kind == 1:
        return json.dumps({"size": [_H, _W], "counts": counts.tolist()})
    string = encode_strings(counts, np.array([0, len(counts)]))[0]
    string = string.decode() if isinstance(string, bytes) else str(string)
    return json.dumps({"counts": string, "size": [_H, _W]}) if kind == 2 else "[]"


def _annotation(rng: random.Random, ident: int, images: int, categories: int, extra: dict) -> list:
    sign = lambda: "-" if rng.random() < 0.1 else ""  # noqa: E731
    box = [sign() + _number(rng), sign() + _number(rng), _number(rng), _number(rng)]
    pairs = [("id", _integer(rng, ident)), ("image_id", _integer(rng, rng.randrange(1, images + 1))),
             ("category_id", _integer(rng, rng.randrange(1, categories + 1))), ("bbox", "[" + ", ".join(box) + "]")]
    if rng.random() < 0.9:
        pairs.append(("area", _number(rng) if rng.random() < 0.95 else "null"))
    if rng.random() < 0.8:
        pairs.append(("iscrowd", rng.choice(["0", "1", "0", "true", "false", "0.0", "null"])))
    if rng.random() < 0.2:
        pairs.append(("ignore", rng.choice(["0", "1", "true"])))
    if rng.random() < 0.1:
        pairs.append(("difficult", rng.choice(["0", "1", "false"])))
    if rng.random() < 0.4:
        pairs.append(("segmentation", _segmentation(rng) if rng.random() < 0.9 else "null"))
    for name, kind in extra.items():
        if rng.random() < 0.8:
            pairs.append((name, {"int": lambda: str(rng.randrange(-5, 5)), "float": lambda: _number(rng),
                                 "bool": lambda: rng.choice(["true", "false"]), "string": lambda: json.dumps(
                                     rng.choice(["a", "tag b", "/x", ""])), "nested": lambda: json.dumps(
                                     {"a": [1, None, "x"]})}[kind]()))
    if rng.random() < 0.05:
        pairs.append(("keypoints_like", json.dumps([[1, 2], {"k": "\u00e9"}], ensure_ascii=True)))
    rng.shuffle(pairs)
    return pairs


def _write(path, rng: random.Random, n: int, pretty: bool) -> None:
    images, categories = rng.randrange(1, 30), rng.randrange(1, 12)
    extra = {name: rng.choice(["int", "float", "bool", "string", "nested"]) for name in
             rng.sample(["occluded", "truncated", "source", "isfake", "score_hint", "x"], rng.randrange(0, 4))}
    gap = (lambda: rng.choice(["", " ", "\n  ", "\t", "\r\n"])) if pretty else (lambda: "")
    obj = lambda pairs: "{" + ",".join(f'{gap()}"{k}"{gap()}:{gap()}{v}{gap()}' for k, v in pairs) + gap() + "}"  # noqa: E731
    listed = lambda texts: "[" + gap() + f"{gap()},{gap()}".join(texts) + gap() + "]"  # noqa: E731
    name = lambda k: rng.choice([f"class{k}", f"cl\u00e4ss {k}", f"\u732b{k}"])  # noqa: E731
    members = {
        "images": listed([obj([("id", str(k)), ("width", str(_W)), ("height", str(_H)),
                               ("file_name", json.dumps(f"{name(k)}.jpg", ensure_ascii=rng.random() < 0.5))])
                          for k in range(1, images + 1)]),
        "annotations": listed([obj(_annotation(rng, k, images, categories, extra)) for k in range(1, n + 1)]),
        "categories": listed([obj([("id", str(k)), ("name", json.dumps(name(k), ensure_ascii=False)),
                                   ("supercategory", '"thing"')]) for k in range(1, categories + 1)]),
    }
    if rng.random() < 0.5:
        members["info"] = json.dumps({"description": "gen\u00e9r\u00e9", "year": 2026}, ensure_ascii=False)
    if rng.random() < 0.3:
        members["licenses"] = "[]"
    order = list(members)
    rng.shuffle(order)
    path.write_text(gap() + obj([(k, members[k]) for k in order]) + gap(), encoding="utf-8")


def _read(path, kernel: bool):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            dataset = read_coco_gt(path, kernel=kernel)
        except InputError as exc:
            return str(exc), [str(w.message) for w in caught]
    return dataset, [str(w.message) for w in caught]


def _same_reading(path) -> None:
    """Both readers give the same tables and warnings, or the same message."""
    fast, fast_warnings = _read(path, kernel=True)
    exact, exact_warnings = _read(path, kernel=False)
    assert fast_warnings == exact_warnings
    if isinstance(exact, str):
        assert fast == exact
        return
    assert not isinstance(fast, str), fast
    for table in ("images", "categories", "gt"):
        a, b = getattr(fast, table), getattr(exact, table)
        assert a.schema == b.schema, table
        _same(a, b)


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    """Equal columns: the same nulls, floats bit for bit (the sign of zero included)."""
    assert a.columns == b.columns and a.height == b.height
    for name in a.columns:
        x, y = a.get_column(name), b.get_column(name)
        assert x.is_null().equals(y.is_null()), name
        if x.dtype.is_float():
            assert np.array_equal(x.fill_null(0).to_numpy().view(np.int64), y.fill_null(0).to_numpy().view(np.int64)), name
        else:
            assert x.equals(y), name


@pytest.fixture
def small_pieces(monkeypatch):
    """Pieces of 256 bytes on up to 5 threads: cuts between annotations and inside them (after an RLE's '}')."""
    monkeypatch.setattr(json_ground_truth, "_PIECE_BYTES", 256)
    monkeypatch.setattr(json_ground_truth.os, "cpu_count", lambda: 5)


@pytest.mark.parametrize("seed", range(48))
def test_kernel_reads_what_the_exact_reader_reads(tmp_path, seed, request):
    if seed % 3 == 0:
        request.getfixturevalue("small_pieces")
    rng = random.Random(seed)
    path = tmp_path / "gt.json"
    _write(path, rng, rng.randrange(0, 120), pretty=seed % 2 == 1)
    assert json_ground_truth.annotation_columns(path) is not None  # the kernel read every form of these files
    _same_reading(path)


def _annotations_file(path, annotation: str, extra: str = "") -> None:
    path.write_text('{"images": [{"id": 1, "width": 5, "height": 6}], "categories": [{"id": 1, "name": "a"}], '
                    '"annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "area": 12}, '
                    f'{annotation}]{extra}}}')


HANDED_OVER = [
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "keypoints": [1, 2, 2], "num_keypoints": 1}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "id": 3}',  # repeated: the last wins
    '{"i\\u0064": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "note": "caf\u00e9"}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "area": NaN}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 1e400]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": [[1, 2, 3, 4, 5, 1e999]]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": {"size": [6, 5]}}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": [1, 2, 3, 4, 5, 6]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": {"size": [6, 5], '
    '"counts": "a\\"b"}}',
    '{"id": 2.5, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 2, "image_id": true, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 123456789012345678901, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, null]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": null}',
    '{"id": 2, "image_id": 1, "category_id": 1}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, "4"]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4],}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]} {}',
    '{}',
    '7',
]
CHECKED = [  # read by the kernel; the checks that follow say what is wrong
    '{"id": 1, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 2, "image_id": 9, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 2, "image_id": 1, "category_id": 7, "bbox": [1, 2, 3, 4]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, -3, 4]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "area": -1}',
    '{"id": null, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 2, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 0, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": [[1, 2, 3]]}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": {"size": [5, 5], '
    '"counts": [25]}}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": {"size": [6, 5], '
    '"counts": [3, 4]}}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": {"size": [6, 5], '
    '"counts": "0P"}}',
    '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "segmentation": {"size": [6, 5], '
    '"counts": "zz"}}',
]


@pytest.mark.parametrize("annotation", HANDED_OVER)
def test_what_the_kernel_hands_over_reads_as_the_exact_reader_reads_it(tmp_path, annotation):
    path = tmp_path / "gt.json"
    _annotations_file(path, annotation)
    assert json_ground_truth.annotation_columns(path) is None
    _same_reading(path)


@pytest.mark.parametrize("annotation", CHECKED)
def test_bad_values_the_kernel_reads_give_the_exact_readers_message(tmp_path, annotation):
    path = tmp_path / "gt.json"
    _annotations_file(path, annotation)
    assert json_ground_truth.annotation_columns(path) is not None
    _same_reading(path)


@pytest.mark.parametrize("tail", [', "info": {"a": 1}', ', "images": []', ', "info": {"a": 1', ', "x": 1 2',
                                  ', "x": [1, 2}', ', "\\u0078": 1', '} []', ', "info": {"b": "\u00e9"}'])
def test_the_top_level_object_reads_as_the_exact_reader_reads_it(tmp_path, tail):
    path = tmp_path / "gt.json"
    _annotations_file(path, '{"id": 2, "image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4]}', tail)
    _same_reading(path)


def test_an_annotation_list_of_none_and_lists_in_any_order(tmp_path):
    path = tmp_path / "gt.json"
    path.write_text('{"annotations": [], "categories": [{"id": 1, "name": "a"}], "images": [{"id": 1}]}')
    assert json_ground_truth.annotation_columns(path) is not None
    _same_reading(path)
    assert read_coco_gt(path).gt.height == 0


def test_more_inexact_numbers_than_annotations_are_read_by_the_exact_reader(tmp_path):
    """Every box, area and extra a number the kernel cannot round: more of them than it keeps room for (one per 40
    bytes of the list), so the exact reader reads the file; the same tables."""
    rng = random.Random(6)
    numbers = [[near_halfway(rng) for _ in range(8)] for _ in range(300)]
    annotations = [f'{{"id":{k},"image_id":1,"category_id":1,"bbox":[{",".join(v[:4])}],"area":{v[4]},"a":{v[5]},'
                   f'"b":{v[6]},"c":{v[7]}}}' for k, v in enumerate(numbers, 1)]
    path = tmp_path / "gt.json"
    path.write_text('{"images": [{"id": 1, "width": 5, "height": 6}], "categories": [{"id": 1, "name": "a"}], '
                    f'"annotations": [{",".join(annotations)}]}}')
    assert json_ground_truth.annotation_columns(path) is None
    _same_reading(path)
    gt = read_coco_gt(path).gt
    assert gt.get_column("area").to_list() == [float(v[4]) for v in numbers]
    assert gt.get_column("c").to_list() == [float(v[7]) for v in numbers]
