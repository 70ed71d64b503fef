"""The pairs table: every (detection, ground truth) pair of an image with IoU >= min_iou and no other, IoU equal to
pycocotools' ``maskUtils.iou`` (crowd: over the detection's area), the same whatever the shard count or scheduler."""

import polars as pl
import pytest
from pycocotools import mask as mask_utils

from evalengine import schema
from evalengine.api import ingest_coco
from evalengine.errors import ProtocolError
from evalengine.match import PROTOCOLS
from evalengine.match.pairs import PairsProtocol
from evalengine.store.shards import scan_shards
from tests.generators import random_coco
from tests.helpers import write_inputs


def brute_force(gt: dict, dt: list, min_iou: float) -> pl.DataFrame:
    """Every pair of every image through pycocotools, filtered at ``min_iou``."""
    rows = []
    for image in gt["images"]:
        anns = [a for a in gt["annotations"] if a["image_id"] == image["id"]]
        dets = [(k + 1, d) for k, d in enumerate(dt) if d["image_id"] == image["id"]]
        if not anns or not dets:
            continue
        ious = mask_utils.iou([d["bbox"] for _, d in dets], [a["bbox"] for a in anns],
                              [int(a.get("iscrowd", 0)) for a in anns])
        for i, (det_id, det) in enumerate(dets):
            for j, ann in enumerate(anns):
                if ious[i, j] >= min_iou:
                    rows.append((image["id"], det_id, ann["id"], det["category_id"], ann["category_id"],
                                 float(ious[i, j]), bool(ann.get("iscrowd", 0))))
    return pl.DataFrame(rows, schema=schema.PAIRS, orient="row").sort("det_id", "gt_id")


def _pairs(store, protocol=PairsProtocol(), **schedule) -> pl.DataFrame:
    folder = store.match(protocol, "default", **schedule)
    return scan_shards(folder / "pairs").drop("protocol", "run", "shard").collect()


@pytest.mark.parametrize("seed", range(40))
def test_every_pair_above_the_threshold_and_no_other(tmp_path, seed):
    gt, dt = random_coco(seed)
    min_iou = (0.1, 0.0, 0.5, 0.3)[seed % 4]
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=1 + seed % 3)
    got = _pairs(store, PairsProtocol(min_iou=min_iou))
    assert got.sort("det_id", "gt_id").equals(brute_force(gt, dt, min_iou)), f"seed {seed}"


def test_rows_come_per_image_in_detection_then_annotation_order(tmp_path):
    gt, dt = random_coco(3)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=1)
    got = _pairs(store, PairsProtocol(min_iou=0.0))
    order = {ann["id"]: k for k, ann in enumerate(gt["annotations"])}
    keys = got.with_columns(pl.col("gt_id").replace_strict(order).alias("gt_order"))
    assert keys.equals(keys.sort("image_id", "det_id", "gt_order"))


@pytest.mark.parametrize("scheduler", ["sync", "threads", "processes"])
def test_identical_whatever_the_shards_and_scheduler(tmp_path, scheduler):
    gt, dt = random_coco(11)
    inputs = write_inputs(tmp_path, gt, dt)
    want = _pairs(ingest_coco(*inputs, tmp_path / "one", n_shards=1), scheduler="sync").sort("det_id", "gt_id")
    got = _pairs(ingest_coco(*inputs, tmp_path / "seven", n_shards=7), scheduler=scheduler).sort("det_id", "gt_id")
    assert got.equals(want) and got.height > 0


def test_chunks_bound_the_blocks(tmp_path, monkeypatch):
    """Small similarity chunks (one image at a time) give the same table."""
    gt, dt = random_coco(8)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=2)
    want = _pairs(store)
    import evalengine.match.groups as groups
    monkeypatch.setattr(groups, "MAX_BLOCK_CELLS", 1)
    got = _pairs(ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "again", n_shards=2))
    assert got.equals(want)


def test_protocol_contract():
    assert PairsProtocol in PROTOCOLS and PairsProtocol().match_key() == "pairs"
    assert PairsProtocol(0.2).match_key().startswith("pairs-")
    for bad in (-0.1, 1.5, "x", float("nan")):
        with pytest.raises(ProtocolError, match="min_iou"):
            PairsProtocol(bad)
