"""YOLO segment predictions (``class x1 y1 … xn yn conf``, ultralytics' ``save_txt`` with ``save_conf`` of a
segmentation model) against their COCO results, converted independently in ``tests/format_files.py`` (the pixel
polygon's extent as the box, its ``frPyObjects`` mask as RLE): the same stored results and the same 12 numbers for
boxes and masks, over ground truth of boxes and segments; mixed kinds and bad lines are located errors."""

import json
import warnings

import numpy as np
import polars as pl
import pytest

from evalengine import api
from evalengine.api import formats
from evalengine.errors import InputError, InputWarning
from evalengine.io.detections import iter_detections
from evalengine.io.formats import read_gt
from evalengine.io.yolo import iter_yolo_predictions
from tests import format_files as ff

SEEDS = range(24)
SEGM = api.CocoProtocol(iou_type="segm")


def _stats(evaluate, *args, **kwargs):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        return evaluate(*args, **kwargs).stats()


def _scene(seed: int) -> dict:
    sc = ff.scene(seed)
    if not sc["predictions"]:
        sc["predictions"].append((sc["images"][0][0], 0, 0.5, 0.5, 0.3, 0.2, 0.7))
    return ff.with_segment_predictions(ff.with_segments(sc) if seed % 2 else sc)


@pytest.mark.parametrize("seed", SEEDS)
def test_segment_predictions_equal_their_coco_results(tmp_path, seed):
    sc = _scene(seed)
    sizes = "folder" if seed % 3 else "table"
    root, pred, images = ff.write_yolo(tmp_path / "yolo", sc, ("yaml", "dict", "txt")[seed % 3], sizes)
    gt, dt = ff.coco_of_yolo(sc, sizes)
    gt_file, dt_file = _write_json(tmp_path, gt, dt)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputWarning)
        dataset = read_gt(root, "yolo", images)
        ours = pl.concat(iter_yolo_predictions(pred, dataset))
        coco = pl.concat(iter_detections(dt_file, dataset))
    assert ours.columns == coco.columns and "mask_rle" in ours.columns
    assert ours.drop("polygon").rows() == coco.drop("polygon").rows()  # ids, boxes, areas (w·h) and RLE, exactly
    assert _stats(formats.evaluate_formats, root, pred, images=images) == _stats(api.evaluate_coco, gt, dt)
    if sc.get("segments"):  # masks: the segments' (the other objects' rectangles) against the predictions'
        assert (_stats(formats.evaluate_formats, root, pred, SEGM, images=images)
                == _stats(api.evaluate_coco, gt, dt, SEGM))


def _write_json(folder, gt: dict, dt: list) -> tuple:
    (folder / "gt.json").write_text(json.dumps(gt))
    (folder / "dt.json").write_text(json.dumps(dt))
    return folder / "gt.json", folder / "dt.json"


def test_segment_predictions_with_segm_through_the_command(tmp_path, capsys):
    """``evalengine coco --iou-type segm`` on a YOLO dataset of segments and a folder of segment predictions."""
    from evalengine.cli import main

    sc = ff.with_segment_predictions(ff.with_segments(ff.scene(5)))
    root, pred, images = ff.write_yolo(tmp_path / "yolo", sc, "yaml", "table")
    gt, dt = ff.coco_of_yolo(sc, "table")
    assert main(["coco", "--gt", str(root), "--images", str(images), "--dt", str(pred), "--iou-type", "segm",
                 "--json", "--quiet"]) == 0
    got = json.loads(capsys.readouterr().out)["stats"]
    expected = _stats(api.evaluate_coco, gt, dt, SEGM)
    assert len(got) == 12 and np.max(np.abs(np.array(got) - np.array(expected))) <= 1e-12


@pytest.mark.parametrize("files, message", [
    ({"a": "0 0.1 0.2 0.3 0.4 0.5 0.6 0.9\n0 0.5 0.5 0.2 0.2 0.8\n"},
     r"a\.txt: line 2: box lines and segment lines in one folder of predictions \(its first line, .*a\.txt line 1, "
     r"is a segment\)"),
    ({"a": "0 0.5 0.5 0.2 0.2 0.8\n", "b": "1 0.1 0.2 0.3 0.4 0.5 0.6 0.9\n"},
     r"b\.txt: line 1: box lines and segment lines in one folder of predictions \(its first line, .*a\.txt line 1, "
     r"is a box\)"),
    ({"a": "0 0.1 0.2 0.3 0.4 0.5 0.6 0.7\n0 0.1 0.2 0.3 0.4 0.5 0.6 0.7 0.8\n"},
     r"a\.txt: line 2: expected 6 fields 'class cx cy w h conf' or a segment 'class x1 y1 … xn yn conf' of 3 or "
     r"more points, found 9"),
    ({"a": "0 0.1 0.2 0.3 0.4 0.5 0.6 1.5\n"}, r"a\.txt: line 1: 'conf' is 1\.5, outside \[0, 1\]"),
    ({"a": "0 0.1 0.2 0.3 0.4 0.5 1.6 0.5\n"}, r"a\.txt: line 1: 'y3' is -?1\.6, outside \[0, 1\]"),
    ({"a": "0 0.1 0.2 0.3 0.4 0.5 z 0.5\n"}, r"a\.txt: line 1: 'y3' is 'z', not a number"),
    ({"a": "7 0.1 0.2 0.3 0.4 0.5 0.6 0.5\n"}, r"a\.txt: line 1: class 7 is not a known class"),
    ({"c": "0 0.1 0.2 0.3 0.4 0.5 0.6 0.5\n"}, r"c\.txt: line 1: image 'c' has no size"),
])
def test_bad_segment_predictions_are_located(tmp_path, files, message):
    sc = {"images": [("a", 100, 80), ("b", 50, 60)], "objects": [("a", 0, 0.5, 0.5, 0.2, 0.2, False)],
          "predictions": [], "rng": np.random.default_rng(1)}
    root, pred, images = ff.write_yolo(tmp_path / "y", sc, "txt", "table")
    for stem, text in files.items():
        (pred / "labels" / f"{stem}.txt").write_text(text)
    dataset = read_gt(root, "yolo", images)
    with pytest.raises(InputError, match=message):
        list(iter_yolo_predictions(pred, dataset))
