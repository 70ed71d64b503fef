"""The similarity step apart from the assignment: IoU conventions, and match tables that do not depend on how the
groups are cut into blocks (memory is bounded per shard, results are not)."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine import api
from evalengine.geometry.box_iou import COCO, CORNERS, VOC, box_iou_blocks, corner_iou, voc_box_iou
from evalengine.match import groups
from evalengine.match.coco import CocoProtocol
from evalengine.match.groups import block_chunks
from evalengine.match.proposals import ProposalProtocol
from tests.generators import random_coco


def test_voc_iou_is_the_devkits_plus_one_rule():
    box = np.array([1.0, 1.0, 10.0, 10.0])
    assert voc_box_iou(box, box) == 1.0
    assert voc_box_iou(box, np.array([6.0, 1.0, 15.0, 10.0])) == 50 / 150  # iw = 10 - 6 + 1, ih = 10
    assert voc_box_iou(box, np.array([11.0, 1.0, 20.0, 10.0])) == 0.0  # touching pixels do not overlap
    assert voc_box_iou(box, np.array([10.0, 10.0, 20.0, 20.0])) == 1 / 220  # one shared pixel


def test_blocks_are_detection_major_per_group_in_each_convention():
    dt = np.array([[0.0, 0.0, 10.0, 10.0], [5.0, 0.0, 10.0, 10.0], [100.0, 100.0, 2.0, 2.0]])
    gt = np.array([[0.0, 0.0, 10.0, 10.0], [5.0, 5.0, 10.0, 10.0]])
    crowd = np.array([False, True])
    # group 0: dt 0-1 × gt 0-1; group 1: dt 2 × no gt
    gt_start, gt_len, dt_start, dt_len = (np.array(v) for v in ([0, 2], [2, 0], [0, 2], [2, 1]))
    values, offsets = box_iou_blocks(COCO, dt, gt, crowd, gt_start, gt_len, dt_start, dt_len, 0, 2)
    assert offsets.tolist() == [0, 4, 4]
    # crowd: intersection over the detection's area
    assert values.tolist() == [1.0, 25 / 100, 50 / 150, 50 / 100]
    corners = dt.copy()
    corners[:, 2:] += corners[:, :2]
    gt_corners = gt.copy()
    gt_corners[:, 2:] += gt_corners[:, :2]
    values, _ = box_iou_blocks(CORNERS, corners, gt_corners, crowd, gt_start, gt_len, dt_start, dt_len, 0, 1)
    assert values.tolist() == [corner_iou(d, g) for d in corners[:2] for g in gt_corners]
    values, _ = box_iou_blocks(VOC, corners, gt_corners, crowd, gt_start, gt_len, dt_start, dt_len, 0, 1)
    assert values.tolist() == [voc_box_iou(d, g) for d in corners[:2] for g in gt_corners]


def test_chunks_cover_every_group_once_within_the_bound():
    rng = np.random.default_rng(0)
    gt_len, dt_len = rng.integers(0, 20, 500), rng.integers(0, 30, 500)
    chunks = block_chunks(gt_len, dt_len, max_cells=300)
    assert [lo for lo, _ in chunks][1:] == [hi for _, hi in chunks][:-1] and chunks[0][0] == 0 and chunks[-1][1] == 500
    cells = gt_len * dt_len
    for lo, hi in chunks:
        assert cells[lo:hi].sum() <= 300 or hi - lo == 1


def _tables(folder):
    return {side.name: pl.read_parquet(str(side / "shard=*" / "*.parquet")) for side in sorted(folder.iterdir())
            if side.is_dir()}


@pytest.mark.parametrize("seed", range(4))
def test_match_tables_do_not_depend_on_the_block_size(tmp_path, monkeypatch, seed):
    gt, dt = random_coco(seed)
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    store = api.ingest_coco(tmp_path / "gt.json", tmp_path / "dt.json", tmp_path / "s", n_shards=2)
    store = store.add_proposals(tmp_path / "dt.json", run="proposals")
    protocols = {"default": CocoProtocol(), "proposals": ProposalProtocol(budgets=(1, 3, 10, 100))}
    whole = {run: _tables(store.match(protocol, run)) for run, protocol in protocols.items()}
    for run in protocols:
        for folder in store.path.glob(f"matches/*/run={run}"):
            folder.rename(tmp_path / f"whole-{run}")
    monkeypatch.setattr(groups, "MAX_BLOCK_CELLS", 7)  # a chunk per group or a few
    for run, protocol in protocols.items():
        chunked = _tables(store.match(protocol, run))
        assert chunked.keys() == whole[run].keys()
        for side, frame in chunked.items():
            assert frame.equals(whole[run][side]), (run, side)
