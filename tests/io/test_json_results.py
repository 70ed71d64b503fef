"""The result-list kernel (:mod:`evalengine.io.json_results`) against the exact reader and Python's json.

Generated result files with every form a value can take (integers for floats, -0, 17-digit decimals, exponents,
numbers beyond Clinger's fast path, whitespace and pretty printing, extra keys with nested values, keys in any order,
masks skipped) are read with the kernel and with the exact reader alone: the frames are equal bit for bit (the sign of
zero included) and equal to Python's json's values. Files read in small blocks exercise the two-thread split, objects
cut by a block's end, and a value the kernel gives up on after frames were yielded: the same located message as the
exact reader's (the same position, line and column; the excerpt shown after "near" starts where the piece read
starts).
"""

import json
import random
import warnings
from decimal import Decimal

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from evalengine.errors import InputError
from evalengine.io import detections, json_results
from evalengine.io.detections import iter_detections
from evalengine.io.json_results import Fallback
from tests.io.test_bad_input_corpus import DATASET

IMAGES = DATASET.images.get_column("image_id").to_list()
CATEGORIES = DATASET.categories.get_column("category_id").to_list()


def _number(rng: random.Random) -> str:
    """The text of a non-negative number as writers write them (and some they rarely do)."""
    kind = rng.randrange(10)
    if kind == 0:
        return str(rng.randrange(0, 2000))
    if kind == 1:
        return repr(rng.random() * 10 ** rng.randrange(-3, 4))  # up to 17 significant digits
    if kind == 2:
        return f"{rng.random() * 600:.2f}"
    if kind == 3:
        return f"{rng.randrange(1, 10**6)}e{rng.randrange(-30, 8)}"
    if kind == 4:
        return f"{rng.random():.25f}"  # 25 digits: beyond the fast path
    if kind == 5:
        return str(rng.randrange(2**53, 2**60))  # an integer beyond 2**53
    if kind == 6:
        return rng.choice(["0", "0.0", "1E2", "1e+2", "5e-324", "1.7976931348623157e308", "0.30000000000000004",
                           "9007199254740993", "1e23", "123456789012345678901234567890"])
    if kind == 7:
        return f"{rng.randrange(10**16, 10**19)}.{rng.randrange(10**5)}"
    return f"{rng.random() * 100:.{rng.randrange(1, 8)}f}"


def _result(rng: random.Random) -> dict:
    """One result as (key, text of the value) pairs, in a random order, with extra keys now and then."""
    sign = lambda: "-" if rng.random() < 0.1 else ""  # noqa: E731 - negative x, y (allowed) and -0
    box = [sign() + _number(rng), sign() + _number(rng), _number(rng), _number(rng)]
    pairs = [("image_id", str(rng.choice(IMAGES))), ("category_id", str(rng.choice(CATEGORIES))),
             ("bbox", "[" + ", ".join(box) + "]"), ("score", _number(rng) if rng.random() < 0.9 else "-0")]
    if rng.random() < 0.2:
        pairs.append(("segmentation", json.dumps(rng.choice([{"size": [10, 10], "counts": "a\\u0041b"},
                                                               [[1, 2, 3.5, 4, 5, 6]], {"a": [None, True, False]}]))))
    if rng.random() < 0.2:
        pairs.append(("id", str(rng.randrange(10**6))))
    if rng.random() < 0.1:
        pairs.append(("file_name", json.dumps("a \"quoted\" \\ name\t/")))
    rng.shuffle(pairs)
    return pairs


def _write(path, rng: random.Random, n: int, pretty: bool) -> list:
    objects = [_result(rng) for _ in range(n)]
    gap = (lambda: rng.choice(["", " ", "\n  ", "\t", "\r\n"])) if pretty else (lambda: "")
    texts = ["{" + ",".join(f"{gap()}\"{k}\"{gap()}:{gap()}{v}{gap()}" for k, v in pairs) + gap() + "}"
             for pairs in objects]
    path.write_text(gap() + "[" + gap() + f"{gap()},{gap()}".join(texts) + gap() + "]" + gap())
    return objects


def _exact(path, masks: bool = False) -> pl.DataFrame:
    """The frame of the exact reader alone."""
    saved = detections.result_frames
    def fallback(*_):
        yield Fallback(0, 0)

    detections.result_frames = fallback
    try:
        return pl.concat(list(iter_detections(path, DATASET, masks=masks)))
    finally:
        detections.result_frames = saved


def _same(a: pl.DataFrame, b: pl.DataFrame) -> None:
    assert a.columns == b.columns and a.height == b.height
    for name in a.columns:
        if not a.schema[name].is_numeric():
            assert a.get_column(name).equals(b.get_column(name)), name
            continue
        x, y = a.get_column(name).to_numpy(), b.get_column(name).to_numpy()
        assert np.array_equal(x, y), name
        if x.dtype.kind == "f":
            assert np.array_equal(np.signbit(x), np.signbit(y)), name


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 4 KiB, split from 1 KiB as on four cores: many blocks, objects cut at their ends, up to four
    pieces each (cuts inside a segmentation too)."""
    monkeypatch.setattr(detections, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(json_results, "_PARALLEL_BYTES", 1024)
    monkeypatch.setattr(json_results, "_WORKERS", 4)


@pytest.mark.parametrize("seed", range(40))
def test_kernel_reads_what_the_exact_reader_reads(tmp_path, seed):
    rng = random.Random(seed)
    path = tmp_path / "results.json"
    objects = _write(path, rng, rng.randrange(1, 300), pretty=seed % 2 == 1)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = pl.concat(list(iter_detections(path, DATASET, masks=False)))
        _same(fast, _exact(path))
    # and as Python's json reads the values
    values = json.loads(path.read_text())
    assert fast.get_column("score").to_list() == [float(v["score"]) for v in values]
    assert fast.select("x", "y", "w", "h").rows() == [tuple(map(float, v["bbox"])) for v in values]
    assert len(objects) == fast.height


@pytest.mark.parametrize("seed", range(12))
def test_kernel_in_small_blocks(tmp_path, small_blocks, seed):
    rng = random.Random(100 + seed)
    path = tmp_path / "results.json"
    _write(path, rng, rng.randrange(250, 450), pretty=seed % 3 == 0)
    assert path.stat().st_size > 4 * 4096
    frames = list(json_results.result_frames(path, True, 4096))
    assert not any(isinstance(f, Fallback) for f in frames) and len(frames) > 4
    _same(pl.concat(list(iter_detections(path, DATASET, masks=False))), _exact(path))


@pytest.mark.parametrize("bad, expected", [
    ('"score": 2.0e400', "'score' is"),         # inf in Python's json: refused where it is
    ('"score": "0.5"', "'score' is"),
    ('"image_id": 42.5', "'image_id' is 42.5, not an integer"),
    ('"bbox": [1, 2, 3]', "'bbox' must be a list of 4 numbers"),
    ('"score": NaN', "not a finite number"),
])
def test_a_late_bad_value_is_located_as_the_exact_reader_locates_it(tmp_path, small_blocks, bad, expected):
    rng = random.Random(7)
    path = tmp_path / "results.json"
    objects = _write(path, rng, 300, pretty=False)
    text = path.read_text()
    key = bad.split('"')[1]
    at = text.rfind(f'"{key}":')  # in the last object: frames were yielded before it
    value_end = text.find("]", at) + 1 if key == "bbox" else min(i for i in (text.find(",", at), text.find("}", at))
                                                                  if i >= 0)
    path.write_text(text[:at] + bad + text[value_end:])
    messages = []
    for read in (lambda: list(iter_detections(path, DATASET, masks=False)), lambda: _exact(path)):
        with pytest.raises(InputError) as error:
            read()
        messages.append(str(error.value).split(", near ")[0])  # the excerpt shown starts where the piece read does
    assert messages[0] == messages[1] and expected in messages[0] and "position 300" in messages[0]
    assert len(objects) == 300


def test_integral_floats_and_repeated_keys_fall_back_to_pycocotools_reading(tmp_path):
    path = tmp_path / "results.json"
    path.write_text('[{"image_id": %d, "category_id": %d.0, "bbox": [1, 2, 3, 4], "score": 0.5, "score": 0.25}]'
                    % (IMAGES[0], CATEGORIES[0]))
    with pytest.warns(Warning, match="appears twice"):
        frame = pl.concat(list(iter_detections(path, DATASET, masks=False)))
    assert frame.row(0, named=True)["score"] == 0.25 and frame.row(0, named=True)["category_id"] == CATEGORIES[0]


@pytest.mark.parametrize("odd", [
    '"bboxes": [1], "bbox": [1, 2, 3, 4]',          # a longer key starting as the expected one
    '"bbo": 1, "bbox": [1, 2, 3, 4]',               # a shorter one
    '"bbox" : [1, 2, 3, 4]',                        # whitespace before the ':'
    '"b\\u0062ox": [1, 2, 3, 4]',                 # the expected key, escaped: the exact reader reads it
    '"bbox": [1, 2, 3, 4], "bbox": [5, 6, 7, 8]',   # the expected key twice
])
def test_keys_in_the_usual_order_then_another_text(tmp_path, odd):
    """The kernel first tries the key that came next in the previous object: a text that is not exactly that key
    (another key sharing its start, whitespace, an escape, a repeat) is read as the exact reader reads it."""
    path = tmp_path / "results.json"
    image = DATASET.images.row(0, named=True)["image_id"]
    usual = f'{{"image_id": {image}, "category_id": {CATEGORIES[0]}, "bbox": [1, 2, 3, 4], "score": 0.5}}'
    odd = f'{{"image_id": {image}, "category_id": {CATEGORIES[0]}, {odd}, "score": 0.25}}'
    path.write_text("[" + ", ".join([usual] * 50 + [odd] + [usual] * 50) + "]")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        fast = pl.concat(list(iter_detections(path, DATASET, masks=False)))
        _same(fast, _exact(path))
    assert fast.height == 101 and fast.row(50, named=True)["score"] == 0.25
    values = json.loads(path.read_text())
    assert fast.select("x", "y", "w", "h").rows() == [tuple(map(float, v["bbox"])) for v in values]


def test_masks_are_read_by_the_kernel(tmp_path):
    """With masks, the kernel reads the segmentation (tests/io/test_json_segmentation.py has every form): the frame
    has the mask columns, as the exact reader's."""
    path = tmp_path / "results.json"
    image = DATASET.images.row(0, named=True)
    path.write_text(json.dumps([{"image_id": image["image_id"], "category_id": CATEGORIES[0], "bbox": [1, 2, 3, 4],
                                 "score": 0.5, "segmentation": [[1, 1, 5, 1, 5, 5]]}]))
    frames = list(json_results.result_frames(path, False, 2**20))
    assert len(frames) == 1 and "segmentation_polygon" in frames[0].columns
    with_masks = pl.concat(list(iter_detections(path, DATASET)))
    _same(with_masks, _exact(path, masks=True))
    assert "mask_rle" in with_masks.columns


def test_inexact_numbers_are_rounded_as_pythons_float():
    """The numbers beyond the fast path go through Arrow's parser: correctly rounded, as Python's float."""
    rng = random.Random(3)
    texts = [f"{rng.randrange(10**16, 10**20)}e{rng.randrange(-340, 300)}" for _ in range(20000)]
    texts += [f"0.{rng.randrange(10**24):024d}" for _ in range(20000)]
    texts += ["2.2250738585072011e-308", "4.9406564584124654e-324", "9007199254740993", "1.00000000000000011102230246251565404236316680908203125"]
    converted = pc.cast(pa.array(texts), pa.float64()).to_numpy()
    assert converted.tolist() == [float(t) for t in texts]


def near_halfway(rng: random.Random) -> str:
    """25 significant digits of the midpoint between a double in [1, 2) and the next one: beyond 19 digits and within
    1e-24 of a halfway point, so the kernel cannot round it (Arrow's parser does)."""
    x = 1 + rng.getrandbits(52) / 2**52
    return f"{Decimal(x) + Decimal(2) ** -53:.24f}"


def test_more_inexact_numbers_than_results_are_read_by_the_exact_reader(tmp_path):
    """A file whose every number needs Arrow's parser holds more of them than the kernel keeps room for (one a result
    on average): the kernel gives up there and the exact reader reads the file, as Python's json does."""
    rng = random.Random(5)
    results = [{"image_id": rng.choice(IMAGES), "category_id": rng.choice(CATEGORIES),
                "bbox": [near_halfway(rng) for _ in range(4)], "score": near_halfway(rng)} for _ in range(300)]
    texts = [f'{{"image_id": {r["image_id"]}, "category_id": {r["category_id"]}, "bbox": [{", ".join(r["bbox"])}], '
             f'"score": {r["score"]}}}' for r in results]
    path = tmp_path / "dt.json"
    path.write_text("[" + ", ".join(texts) + "]")
    data = path.read_bytes()
    assert json_results.parse(np.frombuffer(data, np.uint8), 1, len(data) + 1, False)[0] == json_results.FAIL
    frame = pl.concat(list(iter_detections(path, DATASET, masks=False)))
    _same(frame, _exact(path))
    assert frame.get_column("score").to_list() == [float(r["score"]) for r in results]
    assert frame.get_column("w").to_list() == [float(r["bbox"][2]) for r in results]
