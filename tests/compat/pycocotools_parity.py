"""Run pycocotools' COCO / COCOeval and the drop-in on the same inputs and compare everything COCOeval exposes."""

import contextlib
import copy
import io

import numpy as np


def run_cocoeval(coco_class, eval_class, gt: dict, dt, edit=None, iou_type="bbox", steps=True):
    """``eval_class`` over ``coco_class`` objects of copies of ``gt`` and ``dt`` (loadRes), ``edit(params)`` applied
    before ``evaluate``; evaluated, accumulated and summarized unless not ``steps``."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = coco_class()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        coco_dt = coco_gt.loadRes(copy.deepcopy(dt) if isinstance(dt, list) else dt)
        ev = eval_class(coco_gt, coco_dt, iou_type)
        if edit is not None:
            edit(ev.params)
        if steps:
            ev.evaluate()
            ev.accumulate()
            ev.summarize()
    return ev


def assert_eval_images_equal(got: list, expected: list) -> None:
    """``evalImgs`` entry by entry: the same Nones, keys, lists and arrays (values, shapes and dtypes' kinds)."""
    assert len(got) == len(expected)
    for n, (mine, ref) in enumerate(zip(got, expected)):
        if mine is None or ref is None:
            assert mine is None and ref is None, f"entry {n}: {mine} != {ref}"
            continue
        assert mine.keys() == ref.keys(), n
        for key, value in ref.items():
            if isinstance(value, np.ndarray):
                assert isinstance(mine[key], np.ndarray), (n, key)
                assert mine[key].shape == value.shape and mine[key].dtype.kind == value.dtype.kind, (n, key)
                assert np.array_equal(mine[key], value), (n, key, mine[key], value)
            else:
                assert list(mine[key]) == list(value) if isinstance(value, list) else mine[key] == value, (n, key)


def assert_accumulated_equal(got, expected) -> None:
    """``eval`` arrays and ``stats`` array-equal."""
    for key in ("precision", "recall", "scores"):
        assert got.eval[key].shape == expected.eval[key].shape, key
        assert np.array_equal(got.eval[key], expected.eval[key]), key
    assert got.eval["counts"] == expected.eval["counts"]
    assert np.array_equal(np.asarray(got.stats), np.asarray(expected.stats))


def assert_ious_equal(got: dict, expected: dict) -> None:
    """``ious``: the same keys in the same order, each matrix array-equal (``[]`` where pycocotools has ``[]``)."""
    assert list(got) == list(expected)
    for key, value in expected.items():
        if isinstance(value, list):
            assert isinstance(got[key], list) and got[key] == value, key
        else:
            assert got[key].shape == value.shape and np.array_equal(got[key], value), key
