"""Segmentations read by the result-list kernel (:mod:`evalengine.io.json_segmentation`) against the exact reader.

Result files of every segmentation form (polygon lists of several parts, ``[]``, compressed RLE whose strings hold
escaped backslashes, uncompressed RLE, results without a segmentation, coordinates beyond Clinger's fast path), keys
in any order and any whitespace, are read with the kernel and with the exact reader alone: the stored frames (mask
strings, sizes, polygons, areas, boxes) are equal. Small blocks cut objects and split blocks across two threads;
forms the kernel gives up on are handed over to the exact reader (also after frames were yielded); bad masks the
kernel reads are refused with the exact reader's located message. pycocotools' own reading of the same random files
is checked by ``tests/io/test_masks_ingest.py::test_random_masks_equal_pycocotools`` (through the kernel).
"""

import json
import random
import warnings

import polars as pl
import pytest
from pycocotools import mask as mask_utils

from evalengine.errors import InputError
from evalengine.io import detections, json_results, rle
from evalengine.io.coco import read_coco_gt
from evalengine.io.detections import iter_detections
from evalengine.io.json_results import Fallback
from tests.io.test_json_results import _same
from tests.io.test_masks_ingest import random_dataset, rle_counts


def _read(path, dataset, masks: bool = True, exact: bool = False):
    """The detections' frame (or the error's message), by the kernel (as far as it goes) or the exact reader."""
    saved = detections.result_frames

    def fallback(*_):
        yield Fallback(0, 0)

    if exact:
        detections.result_frames = fallback
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return pl.concat(list(iter_detections(path, dataset, masks=masks)))
    except InputError as error:
        return str(error)
    finally:
        detections.result_frames = saved


def _number_text(rng: random.Random, value: float) -> str:
    """A coordinate as writers write it: as given, with 17 digits, beyond the fast path, or an exponent."""
    kind = rng.randrange(6)
    if kind == 1:
        return repr(value + rng.random() * 1e-9)
    if kind == 2:
        return f"{value:.25f}"
    if kind == 3:
        return f"{value * 100:.0f}e-2"
    if kind == 4 and value == int(value):
        return str(int(value))
    return json.dumps(value)


def _text(rng: random.Random, value, pretty: bool) -> str:
    """JSON of ``value`` with keys shuffled, random whitespace, and polygon numbers in :func:`_number_text`'s forms."""
    gap = (lambda: rng.choice(["", " ", "\n  ", "\t", "\r\n"])) if pretty else (lambda: "")
    if isinstance(value, dict):
        items = list(value.items())
        rng.shuffle(items)
        return "{" + ",".join(f"{gap()}{json.dumps(k)}{gap()}:{gap()}{_text(rng, v, pretty)}" for k, v in items) + "}"
    if isinstance(value, list):
        return "[" + gap() + f"{gap()},{gap()}".join(_text(rng, v, pretty) for v in value) + gap() + "]"
    if isinstance(value, float):
        return _number_text(rng, value)
    return json.dumps(value)


def _files(tmp_path, seed: int, copies: int = 1, pretty: bool = False) -> tuple:
    """A ground truth and a result file of every mask form (``random_dataset``'s, its results ``copies`` times)."""
    gt, dt = random_dataset(seed)
    rng = random.Random(seed)
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    results = [dict(r) for _ in range(copies) for r in dt]
    for result in results[1:]:  # an empty polygon list now and then: an empty mask
        if "bbox" in result and rng.random() < 0.05:
            result["segmentation"] = []
    path = tmp_path / "dt.json"
    path.write_text("[" + ",".join(_text(rng, r, pretty) for r in results) + "]")
    return read_coco_gt(tmp_path / "gt.json"), path, gt, results


@pytest.mark.parametrize("seed", range(60))
def test_every_form_is_read_as_the_exact_reader_reads_it(tmp_path, seed):
    dataset, path, _, results = _files(tmp_path, seed, pretty=seed % 3 == 0)
    frames = list(json_results.result_frames(path, False, 2**20))
    with_box = "bbox" in results[0]
    # results with boxes are the kernel's (a file without boxes is pycocotools' segm reading: the exact reader's)
    assert any(isinstance(f, Fallback) for f in frames) != with_box
    fast = _read(path, dataset)
    assert isinstance(fast, pl.DataFrame) and "mask_rle" in fast.columns
    _same(fast, _read(path, dataset, exact=True))
    _same(_read(path, dataset, masks=False), _read(path, dataset, masks=False, exact=True))


@pytest.fixture
def small_blocks(monkeypatch):
    """Blocks of 4 KiB, split from 1 KiB as on three cores: objects cut at the blocks' ends, up to three pieces each
    (cuts after a mask's '},' too)."""
    monkeypatch.setattr(detections, "CHUNK_BYTES", 4096)
    monkeypatch.setattr(json_results, "_PARALLEL_BYTES", 1024)
    monkeypatch.setattr(json_results, "_WORKERS", 3)


@pytest.mark.parametrize("seed", [0, 2, 4, 6, 8, 10, 12, 14])
def test_masks_in_small_blocks(tmp_path, small_blocks, seed):
    dataset, path, _, _ = _files(tmp_path, seed, copies=40, pretty=seed % 4 == 0)
    assert path.stat().st_size > 4 * 4096
    frames = list(json_results.result_frames(path, False, 4096))
    assert not any(isinstance(f, Fallback) for f in frames) and len(frames) > 4
    _same(_read(path, dataset), _read(path, dataset, exact=True))


# forms the kernel leaves to the exact reader (each read as it reads them, or refused with its message)
HANDED_OVER = [
    "null",
    '{"size": [10, 12], "counts": [120], "iscrowd": 0}',
    '{"size": [10.0, 12], "counts": [120]}',
    '{"size": [10, 12], "counts": [120.0]}',
    '{"size": [10, 12], "counts": "\\u00352"}',
    '{"counts": [120]}',
    '[[1, 1, 5, 1, 5, null]]',
    '[[1, 1, 5, 1, 5, 5], [[1]]]',
    '{"size": [10, 12], "counts": [120], "counts": [120]}',
    # near the usual compressed form (json_segmentation._usual_rle), which then leaves them to the key table's path
    '{"size": [010, 12], "counts": "01o04VO000000000l0"}',
    '{"size": [1e1, 12], "counts": "01o04VO000000000l0"}',
    '{"size": [10, 12], "counts": "01o04VO000000000l0", "iscrowd": 0}',
    '{"size": [10, 12], "counts": "01o04VO000000000l0", "size": [10, 12]}',
    '{"size": [10, 12,], "counts": "01o04VO000000000l0"}',
]


@pytest.mark.parametrize("value", HANDED_OVER, ids=range(len(HANDED_OVER)))
def test_what_the_kernel_gives_up_on_is_read_by_the_exact_reader(tmp_path, small_blocks, value):
    image = {"id": 1, "height": 10, "width": 12}
    gt = {"images": [image], "annotations": [], "categories": [{"id": 1, "name": "a"}]}
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    good = '{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "segmentation": %s}'
    texts = [good % '{"size": [10, 12], "counts": "01o04VO000000000l0"}'] * 200 + [good % value] + [good % "[[1, 1, 6, 1, 6, 6]]"]
    path = tmp_path / "dt.json"
    path.write_text("[" + ",\n".join(texts) + "]")
    dataset = read_coco_gt(tmp_path / "gt.json")
    frames = list(json_results.result_frames(path, False, 4096))
    assert frames[-1] == Fallback(frames[-1].offset, 200) and frames[-1].offset > 4096  # frames came before it
    fast, exact = _read(path, dataset), _read(path, dataset, exact=True)
    if isinstance(exact, str):
        assert fast == exact and ("position 201" in fast or "line 201" in fast)  # (a syntax error: its line)
    else:
        _same(fast, exact)


# bad masks the kernel reads: refused as the exact reader refuses them
BAD = [
    ('{"size": [10, 12], "counts": [5, 3]}', "'segmentation' RLE counts sum to 8, not height x width = 120"),
    ('{"size": [10, 12], "counts": "52"}', "'segmentation' RLE counts sum to"),
    ('{"counts": "5!2", "size": [10, 12]}', "'segmentation' counts is not a compressed RLE string (5!2)"),
    ('{"size": [10, 12], "counts": "5\\\\2"}', "'segmentation' RLE counts sum to"),
    ('{"size": [5, 5], "counts": [25]}', "'segmentation' RLE size differs from its image's [height, width] ([5, 5], "
                                         "the image's [10, 12])"),
    ('{"size": [-10, 12], "counts": "01o04VO000000000l0"}', "'segmentation' RLE size differs from its image's"),
    ('{"size": [1000000000000000, 12], "counts": "0"}', "'segmentation' RLE size differs from its image's"),
    ('{ "size" : [ 10 , 0 ] , "counts" : "" }', "'segmentation' RLE size differs from its image's"),
    ('{"size": [10, 12], "counts": [-1, 121]}', "'segmentation' RLE counts must be integers in [0, 2**32)"),
    ("[[1, 1, 5, 1, 5]]", "'segmentation' polygon 1 has an odd number of coordinates (5)"),
    ("[[1, 1]]", "'segmentation' the first polygon has fewer than 4 numbers (2), which pycocotools refuses"),
    ("[[1, 1, 5, 1, 5, 5], [1, 2e9, 3, 4, 5, 6]]", "'segmentation' polygon 2 has a null, or a coordinate beyond"),
    ("[[]]", "'segmentation' the first polygon has fewer than 4 numbers (0)"),
]


@pytest.mark.parametrize("value, message", BAD, ids=range(len(BAD)))
def test_bad_masks_the_kernel_reads_are_located_as_the_exact_reader_locates_them(tmp_path, small_blocks, value,
                                                                                  message):
    gt = {"images": [{"id": 1, "height": 10, "width": 12}], "annotations": [], "categories": [{"id": 1, "name": "a"}]}
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    good = '{"image_id": 1, "category_id": 1, "bbox": [1, 2, 3, 4], "score": 0.5, "segmentation": %s}'
    texts = [good % '{"size": [10, 12], "counts": "01o04VO000000000l0"}'] * 150 + [good % value] * 2
    path = tmp_path / "dt.json"
    path.write_text("[" + ",\n".join(texts) + "]")
    dataset = read_coco_gt(tmp_path / "gt.json")
    assert not any(isinstance(f, Fallback) for f in json_results.result_frames(path, False, 4096))
    fast, exact = _read(path, dataset), _read(path, dataset, exact=True)
    assert isinstance(fast, str) and fast == exact
    assert fast.startswith(f"{path}: detection at position 151: {message}") and "\n" not in fast


def test_parsed_masks_equal_pycocotools_runs(tmp_path):
    """The stored strings of kernel-read masks decode to pycocotools' run lengths (frPyObjects, merge)."""
    dataset, path, gt, results = _files(tmp_path, 4, copies=3)
    frame = _read(path, dataset)
    size = {image["id"]: (image["height"], image["width"]) for image in gt["images"]}
    counts, offsets = rle.decode_strings(frame.get_column("mask_rle").to_arrow())
    for k, result in enumerate(results):
        h, w = size[result["image_id"]]
        segmentation = result.get("segmentation")
        if segmentation is None:  # loadRes: the box as a polygon
            x, y, bw, bh = result["bbox"]
            segmentation = [[x, y, x, y + bh, x + bw, y + bh, x + bw, y]]
        if isinstance(segmentation, dict):  # an RLE: as given
            want = rle_counts(segmentation)
        elif segmentation == []:  # hotcoco's empty mask (pycocotools raises)
            want = [h * w]
        else:
            want = rle_counts(mask_utils.merge(mask_utils.frPyObjects(segmentation, h, w)))
        assert counts[offsets[k]:offsets[k + 1]].tolist() == want, k
