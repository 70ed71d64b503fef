"""COCO analyze on masks (``iou_type="segm"``, and ``"boundary"``) equals the transcription of MATLAB
``CocoEval.analyze`` run by pycocotools with ``iouType='segm'`` (``maskUtils.iou`` the similarity: ``analyze_reference.py``) — every curve's 101
precisions per category and area range and the APs — on 36 random mask sets (polygons of several parts, RLE, crowd,
empty and 1-pixel masks, areas at 32² and 96², objects of another category on the same mask); boundary IoU against
the same transcription with the authors' ``computeBoundaryIoU`` (boundary-iou-api) as the similarity on 12; the
CLI's ``--iou-type segm``; box tables keep their key."""

import json
import subprocess
import sys

import numpy as np
import pytest

from evalengine import api
from tests.helpers import write_inputs
from tests.metrics.analyze_reference import matlab_analyze, random_mask_dataset
from tests.metrics.test_analyze_differential import _assert_equal

SEEDS = range(36)
BATCHES = 4


def _check(tmp_path, seed: int, iou_type: str) -> tuple:
    """Our analyze of ``random_mask_dataset(seed)`` equals MATLAB's under ``iou_type``; ``(inputs, ps)``."""
    gt, dt = random_mask_dataset(seed)
    folder = tmp_path / str(seed)
    folder.mkdir()
    paths = write_inputs(folder, gt, dt)
    inputs = (json.loads(paths[0].read_text()), json.loads(paths[1].read_text()))
    cat_ids, ps = matlab_analyze(*inputs, iou_type=iou_type)
    result = api.analyze(paths, protocol=api.AnalyzeProtocol(iou_type=iou_type), n_shards=1 + seed % 3).result
    _assert_equal(result, cat_ids, ps, f"seed {seed}")
    return inputs, ps


@pytest.mark.parametrize("batch", range(BATCHES))
def test_random_mask_sets_equal_matlab_analyze_on_masks(tmp_path, batch):
    differ = 0
    for seed in SEEDS[batch::BATCHES]:
        inputs, ps = _check(tmp_path, seed, "segm")
        differ += not np.array_equal(matlab_analyze(*inputs)[1], ps)
    assert differ, "no dataset where masks and boxes give different curves"


@pytest.mark.parametrize("batch", range(2))
def test_random_mask_sets_equal_matlab_analyze_on_boundaries(tmp_path, batch):
    for seed in range(100 + batch, 112, 2):
        _check(tmp_path, seed, "boundary")


def test_keys_and_cli(tmp_path):
    assert api.AnalyzeProtocol().match_key() == "analyze"
    assert api.AnalyzeProtocol(iou_type="segm").match_key().startswith("analyze-")
    gt, dt = random_mask_dataset(3)
    paths = write_inputs(tmp_path, gt, dt)
    cat_ids, ps = matlab_analyze(gt, dt, iou_type="segm")
    out = subprocess.run([sys.executable, "-m", "evalengine.cli", "analyze", "--gt", str(paths[0]), "--dt",
                          str(paths[1]), "--iou-type", "segm", "--json"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr
    overall = json.loads(out.stdout)["overall"]["all"]
    for c, curve in enumerate(api.ANALYZE_CURVES):
        assert overall[curve] == pytest.approx(ps[c, :, :, 0].mean(), abs=1e-12)
    boxes_only = tmp_path / "boxes.json"
    boxes_only.write_text(json.dumps([{k: v for k, v in d.items() if k != "segmentation"} | {"bbox": [0, 0, 2, 2]}
                                      for d in dt]))
    out = subprocess.run([sys.executable, "-m", "evalengine.cli", "analyze", "--gt", str(paths[0]), "--dt",
                          str(boxes_only), "--iou-type", "segm"], capture_output=True, text=True, timeout=600)
    assert out.returncode == 2 and "Traceback" not in out.stderr and "segmentation" in out.stderr
