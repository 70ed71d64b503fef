"""Build COCO inputs in memory and evaluate them with evalengine and with pycocotools."""

import json

import numpy as np
import pytest

from evalengine.api import evaluate_coco, ingest_coco
from evalengine.match.coco import CocoProtocol
from tests.generators import random_coco
from tests.reference import per_class, pycocotools_eval


def coco_gt(boxes, image_ids=None, n_images=None, categories=None, **columns) -> dict:
    """A ground-truth dict from ``boxes`` ([x, y, w, h] each); other annotation fields given as lists."""
    n = len(boxes)
    image_ids = image_ids or [1] * n
    images = sorted(set(image_ids) | set(range(1, (n_images or 0) + 1)))
    cats = columns.pop("category_id", [1] * n)
    anns = []
    for i, box in enumerate(boxes):
        ann = {"id": i + 1, "image_id": image_ids[i], "category_id": cats[i], "bbox": list(box),
               "area": box[2] * box[3], "iscrowd": 0}
        ann.update({key: values[i] for key, values in columns.items()})
        anns.append(ann)
    categories = categories or sorted(set(cats))
    return {"images": [{"id": i, "width": 1000, "height": 1000} for i in images], "annotations": anns,
            "categories": [{"id": c, "name": f"c{c}"} for c in categories]}


def coco_dt(boxes, scores, image_ids=None, category_ids=None) -> list:
    n = len(boxes)
    image_ids = image_ids or [1] * n
    category_ids = category_ids or [1] * n
    return [{"image_id": image_ids[i], "category_id": category_ids[i], "bbox": list(boxes[i]), "score": scores[i]}
            for i in range(n)]


def write_inputs(tmp_path, gt: dict, dt: list, names=("gt.json", "dt.json")):
    gt_path, dt_path = tmp_path / names[0], tmp_path / names[1]
    gt_path.write_text(json.dumps(gt))
    dt_path.write_text(json.dumps(dt))
    return gt_path, dt_path


def write_proposals_near_objects(tmp_path, seed: int = 3):
    """``random_coco(seed)``'s ground truth as ``gt.json`` and ``props.json``: three proposals per object, each
    30 × 20 at its corner (x jittered), scored at random; returns their paths."""
    gt, _ = random_coco(seed)
    rng = np.random.default_rng(0)
    props = [{"image_id": a["image_id"], "bbox": [a["bbox"][0] + rng.normal(0, 2), a["bbox"][1], 30.0, 20.0],
              "score": float(rng.random())} for a in gt["annotations"] for _ in range(3)]
    return write_inputs(tmp_path, gt, props, names=("gt.json", "props.json"))


def ours(tmp_path, gt, dt, protocol=None, n_shards=1):
    gt_path, dt_path = write_inputs(tmp_path, gt, dt)
    return evaluate_coco(gt_path, dt_path, protocol or CocoProtocol(), n_shards=n_shards)


def ours_evaluation(tmp_path, gt, dt, protocol=None, n_shards=1):
    gt_path, dt_path = write_inputs(tmp_path, gt, dt)
    return ingest_coco(gt_path, dt_path, tmp_path / "store", n_shards=n_shards).evaluate(protocol or CocoProtocol())


def both_stats(tmp_path, gt, dt, protocol=None, n_shards=1):
    """(evalengine stats, pycocotools stats, evalengine per-class dict, pycocotools per-class dict)."""
    protocol = protocol or CocoProtocol()
    acc = ours(tmp_path, gt, dt, protocol, n_shards)
    ref = pycocotools_eval(gt, dt, use_cats=protocol.use_cats, max_dets=protocol.max_dets,
                           iou_thresholds=protocol.iou_thresholds, area_ranges=protocol.area_ranges,
                           recall_thresholds=protocol.recall_thresholds, iou_type=protocol.iou_type,
                           kpt_oks_sigmas=protocol.kpt_oks_sigmas[0][1] if protocol.iou_type == "keypoints" else None)
    mine = {row["category_id"]: (row["ap"], row["ap50"], row["ar"]) for row in acc.class_metrics().iter_rows(named=True)}
    return acc.stats(), list(ref.stats), mine, per_class(ref)


def run_cli(capsys, *argv):
    """The ``evalengine`` command in-process on ``argv`` (paths as text): (exit status, stdout, stderr)."""
    from evalengine.cli import main

    status = main([str(a) for a in argv])
    out, err = capsys.readouterr()
    return status, out, err


def assert_per_class_equal(table, expected: dict) -> None:
    """``class_metrics()`` equal to pycocotools' per-category AP, AP50 and AR at the last maxDets (1e-12), for exactly
    the expected categories (``expected``: category id as text -> ``{"AP", "AP50", "AR_maxDets_last"}``)."""
    assert sorted(str(c) for c in table["category_id"]) == sorted(expected)
    for row in table.iter_rows(named=True):
        want = expected[str(row["category_id"])]
        assert row["ap"] == pytest.approx(want["AP"], abs=1e-12)
        assert row["ap50"] == pytest.approx(want["AP50"], abs=1e-12)
        assert row["ar"] == pytest.approx(want["AR_maxDets_last"], abs=1e-12)
