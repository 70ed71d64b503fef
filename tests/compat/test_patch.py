"""``patch_pycocotools``: reversible, and code written for pycocotools runs on the engine unchanged with the same
numbers — torchvision's ``CocoEvaluator`` (transcribed: it is not in the wheel) with its per-batch evaluate and
merged ``evalImgs``, and torchmetrics' ``MeanAveragePrecision`` (pycocotools backend; needs torch, the
``compat-test`` extra)."""

import contextlib
import io
import sys
import types

import numpy as np
import pycocotools.coco
import pycocotools.cocoeval
import pytest

from evalengine.compat import COCO, COCOeval, Params, patch_pycocotools
from tests.compat import torchvision_coco_eval
from tests.generators import random_coco

ORIGINALS = (pycocotools.coco.COCO, pycocotools.cocoeval.COCOeval, pycocotools.cocoeval.Params)


def test_patch_is_reversible_and_reaches_names_imported_before():
    assert torchvision_coco_eval.COCO is ORIGINALS[0]
    with patch_pycocotools():
        assert (pycocotools.coco.COCO, pycocotools.cocoeval.COCOeval, pycocotools.cocoeval.Params) == (COCO, COCOeval,
                                                                                                        Params)
        assert torchvision_coco_eval.COCO is COCO
    assert (pycocotools.coco.COCO, pycocotools.cocoeval.COCOeval, pycocotools.cocoeval.Params) == ORIGINALS
    assert torchvision_coco_eval.COCO is ORIGINALS[0]
    patch = patch_pycocotools()
    assert pycocotools.cocoeval.COCOeval is COCOeval
    patch.undo()
    assert pycocotools.cocoeval.COCOeval is ORIGINALS[1]


def _torchvision_run(gt: dict, batches: list):
    """CocoEvaluator over ``batches`` of ``{image_id: prediction}``, the ground truth a COCO of whatever
    ``pycocotools.coco.COCO`` is now."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco_gt = pycocotools.coco.COCO()
        coco_gt.dataset = gt
        coco_gt.createIndex()
        evaluator = torchvision_coco_eval.CocoEvaluator(coco_gt, ["bbox"])
        for batch in batches:
            evaluator.update(batch)
        evaluator.synchronize_between_processes()
        evaluator.accumulate()
        evaluator.summarize()
    return evaluator.coco_eval["bbox"]


def _batches(seed: int, n_batches: int) -> tuple:
    gt, dt = random_coco(seed)
    images = [image["id"] for image in gt["images"]]
    predictions = {}
    for image_id in images:
        dets = [d for d in dt if d["image_id"] == image_id]
        boxes = np.array([d["bbox"] for d in dets], dtype=np.float64).reshape(-1, 4)
        predictions[image_id] = {"boxes": np.column_stack([boxes[:, :2], boxes[:, :2] + boxes[:, 2:]]),
                                 "scores": np.array([d["score"] for d in dets]),
                                 "labels": np.array([d["category_id"] for d in dets], dtype=np.int64)}
    parts = np.array_split(np.array(images), n_batches)
    return gt, [{int(i): predictions[int(i)] for i in part} for part in parts if part.size]


@pytest.mark.parametrize("seed", range(8))
def test_torchvision_coco_evaluator_same_patched_and_not(seed):
    gt, batches = _batches(seed, 1 + seed % 3)
    ref = _torchvision_run(gt, batches)
    with patch_pycocotools():
        ours = _torchvision_run(gt, batches)
    assert isinstance(ours, COCOeval)
    for key in ("precision", "recall", "scores"):
        assert np.array_equal(ours.eval[key], ref.eval[key]), key
    assert np.array_equal(ours.stats, ref.stats)


def _torchmetrics_inputs(seed: int, torch):
    gt, dt = random_coco(seed)
    preds, target = [], []
    for image in gt["images"]:
        anns = [a for a in gt["annotations"] if a["image_id"] == image["id"]]
        dets = [d for d in dt if d["image_id"] == image["id"]]

        def boxes(rows):
            return torch.tensor([r["bbox"] for r in rows], dtype=torch.float64).reshape(-1, 4)

        preds.append({"boxes": boxes(dets), "scores": torch.tensor([d["score"] for d in dets], dtype=torch.float64),
                      "labels": torch.tensor([d["category_id"] for d in dets], dtype=torch.int64)})
        target.append({"boxes": boxes(anns), "labels": torch.tensor([a["category_id"] for a in anns], dtype=torch.int64),
                       "iscrowd": torch.tensor([a.get("iscrowd", 0) for a in anns], dtype=torch.int64)})
    return preds, target


def _without_torchvision(monkeypatch, detection):
    """torchmetrics asks for torchvision, which does not import beside the pinned torch: its one use on this path,
    ``box_convert`` from xywh to xywh (an identity, as torchvision's), stands in for it here."""
    if not detection._TORCHVISION_AVAILABLE:
        ops = types.ModuleType("torchvision.ops")

        def box_convert(boxes, in_fmt, out_fmt):
            assert in_fmt == out_fmt == "xywh"
            return boxes.clone()

        ops.box_convert = box_convert
        package = types.ModuleType("torchvision")
        package.ops = ops
        monkeypatch.setitem(sys.modules, "torchvision", package)
        monkeypatch.setitem(sys.modules, "torchvision.ops", ops)
        monkeypatch.setattr(detection, "_TORCHVISION_AVAILABLE", True)


@pytest.mark.parametrize("seed", range(6))
def test_torchmetrics_mean_average_precision_same_patched_and_not(seed, monkeypatch):
    torch = pytest.importorskip("torch")
    detection = pytest.importorskip("torchmetrics.detection.mean_ap")
    _without_torchvision(monkeypatch, detection)
    preds, target = _torchmetrics_inputs(seed, torch)

    def compute():
        metric = detection.MeanAveragePrecision(box_format="xywh", backend="pycocotools", class_metrics=True,
                                                max_detection_thresholds=[1, 10, 100] if seed % 2 else [1, 5, 100])
        metric.update(preds, target)
        return metric.compute()

    ref = compute()
    runs = []
    monkeypatch.setattr(COCOeval, "accumulate", lambda self, p=None, run=COCOeval.accumulate: runs.append(run(self, p)))
    with patch_pycocotools():
        ours = compute()
    assert len(runs) == 1 + ref["classes"].numel()  # the engine answered (all classes, then each one)
    assert ours.keys() == ref.keys()
    for key, value in ref.items():
        assert torch.equal(ours[key], value), key
