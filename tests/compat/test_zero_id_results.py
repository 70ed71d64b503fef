"""A results dataset built by hand (``COCO()``, ``dataset``, ``createIndex()``) whose ids start at 0, as a user (or
an exporter) numbering from 0 makes it: pycocotools then leaves the ground truth matched by detection 0 free for a
later detection; the drop-in gives the same stats, ``precision``, ``recall``, ``scores`` and evalImgs (array-equal),
on random datasets under params edits (one ground truth with two true positives: more recall events than ground
truths), and in the corrected mode (``zero_id_quirk=False``) matches as if the id were another."""

import contextlib
import copy
import io

import numpy as np
import pytest
from pycocotools.coco import COCO as RefCOCO
from pycocotools.cocoeval import COCOeval as RefCOCOeval

from evalengine.compat import COCO, COCOeval
from tests.compat.pycocotools_parity import assert_accumulated_equal, assert_eval_images_equal
from tests.compat.test_cocoeval import EDITS
from tests.generators import random_coco


def _hand_built(coco_class, eval_class, gt: dict, dt: list, edit=None, **options):
    """``dt`` as a results dataset built by hand, its ids 0, 1, 2, … in list order and ``area`` w·h."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = coco_class()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        coco_dt = coco_class()
        coco_dt.dataset = {"images": copy.deepcopy(gt["images"]), "categories": copy.deepcopy(gt["categories"]),
                           "annotations": [dict(d, id=n, area=d["bbox"][2] * d["bbox"][3], iscrowd=0)
                                           for n, d in enumerate(copy.deepcopy(dt))]}
        coco_dt.createIndex()
        ev = eval_class(coco_gt, coco_dt, "bbox", **options)
        if edit is not None:
            edit(ev.params)
        ev.evaluate()
        ev.accumulate()
        ev.summarize()
    return ev


def _with_zero_first(gt: dict, dt: list) -> list:
    """``dt`` with a copy of a ground truth's box first (id 0 then matches it) and a weaker copy later, so that the
    quirk shows."""
    ann = next((a for a in gt["annotations"] if not a.get("iscrowd")), None)
    if ann is None:
        return dt
    twin = {"image_id": ann["image_id"], "category_id": ann["category_id"], "bbox": list(ann["bbox"])}
    return [dict(twin, score=0.99), *dt, dict(twin, score=0.98)]


@pytest.mark.parametrize("batch", range(4))
def test_hand_built_results_with_id_0_equal_pycocotools(batch):
    shown = 0
    for seed in range(batch * 10, batch * 10 + 10):
        gt, dt = random_coco(seed)
        dt = _with_zero_first(gt, dt)
        edit = EDITS[seed % len(EDITS)]
        ref = _hand_built(RefCOCO, RefCOCOeval, gt, dt, edit)
        ours = _hand_built(COCO, COCOeval, gt, dt, edit)
        try:
            for key in ("precision", "recall", "scores"):
                assert np.array_equal(ours.eval[key], ref.eval[key]), key
            assert np.array_equal(ours.stats, ref.stats)
            assert_eval_images_equal(ours.evalImgs, ref.evalImgs)
        except AssertionError as exc:
            raise AssertionError(f"seed {seed}: {exc}") from None
        # the quirk is there to see: a ground truth matched by detection 0 shows 0 in gtMatches
        shown += any(e is not None and 0 in e["dtIds"] and (np.asarray(e["dtMatches"]) > 0).any()
                     for e in ref.evalImgs)
    assert shown >= 5


def test_corrected_mode_matches_id_0_as_another():
    gt, dt = random_coco(3)
    dt = _with_zero_first(gt, dt)
    with pytest.warns(UserWarning, match="corrected mode"):
        ours = _hand_built(COCO, COCOeval, gt, dt, zero_id_quirk=False)
    shifted = [dict(d) for d in dt]
    with contextlib.redirect_stdout(io.StringIO()):  # ids from 1: no quirk in pycocotools
        coco_gt = RefCOCO()
        coco_gt.dataset = copy.deepcopy(gt)
        coco_gt.createIndex()
        ref = RefCOCOeval(coco_gt, coco_gt.loadRes(shifted), "bbox")
        ref.evaluate()
        ref.accumulate()
        ref.summarize()
    assert_accumulated_equal(ours, ref)
