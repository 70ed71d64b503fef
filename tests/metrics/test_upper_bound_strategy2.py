"""The upper bound's strategy 2 (spec §3.3.3): a simulated classifier labels boxes sampled at exact IoU around each
ground truth (:mod:`evalengine.geometry.jitter`); the labels chosen by ``s2_mcb`` / ``s2_mfl`` equal a brute-force
choice written here, and the run's AP equals pycocotools on the detections built from those choices."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_gt, upper_bound
from evalengine.geometry.box_iou import coco_box_iou
from evalengine.geometry.jitter import jittered_boxes
from tests.generators import random_coco
from tests.reference import pycocotools_eval


def sampled_rows(rng, gt: dict) -> pl.DataFrame:
    """A classifier's table over sampled boxes: per annotation, boxes at IoU γ ∈ {0.5, 0.7} (four families, one or
    two α), each labelled by the category of the image's ground truth it overlaps most (first in file order on a
    tie), one time in four by a random category, scores on a coarse grid (ties); half the annotations also get a row
    for the target box itself (box 0), a tenth none at all."""
    categories = [c["id"] for c in gt["categories"]]
    anns = gt["annotations"]
    rows = []
    for ann in anns:
        if rng.random() < 0.1:
            continue
        x, y, w, h = ann["bbox"]
        gamma = float(rng.choice([0.5, 0.7]))
        low = 2 * gamma / (1 + gamma)
        boxes = jittered_boxes(pl.DataFrame({"x": [x], "y": [y], "w": [w], "h": [h]}), gamma,
                               sorted(rng.uniform(low, 1, int(rng.integers(1, 3)))))
        samples = boxes.select("x", "y", "w", "h").rows()
        samples = ([(x, y, w, h)] if rng.random() < 0.5 else []) + samples
        for box_id, (bx, by, bw, bh) in enumerate(samples, start=0 if len(samples) > len(boxes) else 1):
            same_image = [a for a in anns if a["image_id"] == ann["image_id"]]
            ious = [coco_box_iou(bx, by, bw, bh, *a["bbox"], False) for a in same_image]
            label = same_image[int(np.argmax(ious))]["category_id"]
            if rng.random() < 0.25:
                label = int(rng.choice(categories))
            rows.append({"image_id": ann["image_id"], "gt_id": ann["id"], "box_id": box_id, "category_id": label,
                         "score": round(float(rng.random()), 1)})
    order = rng.permutation(len(rows))  # the table's order is not the annotations'
    return pl.DataFrame([rows[i] for i in order])


def brute_force_choice(table: pl.DataFrame, strategy: str) -> dict:
    """``{gt_id: (label, score)}`` by the documented rules, row by row."""
    chosen = {}
    rows = {}
    for position, row in enumerate(table.iter_rows(named=True)):
        rows.setdefault(row["gt_id"], []).append((position, row["category_id"], row["score"]))
    for gt_id, mine in rows.items():
        if strategy == "s2_mcb":
            position, label, score = max(mine, key=lambda r: (r[2], -r[0]))
            chosen[gt_id] = (label, score)
            continue
        labels = {}
        for position, label, score in mine:
            count, best, first = labels.get(label, (0, -np.inf, position))
            labels[label] = (count + 1, max(best, score), min(first, position))
        label = max(labels, key=lambda c: (labels[c][0], labels[c][1], -labels[c][2]))
        chosen[gt_id] = (label, labels[label][1])
    return chosen


@pytest.mark.parametrize("strategy", ["s2_mcb", "s2_mfl"])
@pytest.mark.parametrize("batch", range(2))
def test_strategy_2_equals_brute_force_and_pycocotools(tmp_path, strategy, batch):
    checked = 0
    for seed in range(batch * 6, (batch + 1) * 6):
        rng = np.random.default_rng(seed)
        gt, _ = random_coco(seed)
        table = sampled_rows(rng, gt) if gt["annotations"] else pl.DataFrame()
        if not table.height:
            continue
        folder = tmp_path / str(seed)
        folder.mkdir()
        (folder / "gt.json").write_text(json.dumps(gt))
        table.write_parquet(folder / "classifier.parquet")
        store = ingest_gt(folder / "gt.json", folder / "store", n_shards=2)
        result = upper_bound(store, folder / "classifier.parquet", strategy=strategy, allow_missing=True)
        chosen = brute_force_choice(table, strategy)
        labelled = [a for a in gt["annotations"] if a["id"] in chosen]
        detections = result.store.dt("uap").sort("det_id").select("category_id", "score").collect().rows()
        assert detections == [chosen[a["id"]] for a in labelled], f"seed {seed}"
        dets = [{"image_id": a["image_id"], "category_id": chosen[a["id"]][0], "bbox": a["bbox"],
                 "score": chosen[a["id"]][1]} for a in labelled]
        ref = pycocotools_eval(gt, dets)
        np.testing.assert_allclose(result.evaluation.stats(), ref.stats, rtol=0, atol=1e-12, err_msg=f"seed {seed}")
        objects = [(a["category_id"], chosen[a["id"]][0]) for a in labelled if not a["iscrowd"]]
        if objects:
            assert result.overall_accuracy() == pytest.approx(sum(t == c for t, c in objects) / len(objects), abs=0)
        assert result.strategy == strategy and result.n_rows == table.height
        checked += 1
    assert checked >= 3


def test_ties_and_the_target_row(tmp_path):
    """Hand-made rows: MCB's tie goes to the row first in the table; MFL's tie between labels to the higher best
    score, then to the label seen first; a row for the target box counts like any other (the table decides)."""
    gt = {"images": [{"id": 1, "width": 100, "height": 100}],
          "annotations": [{"id": i, "image_id": 1, "category_id": 1, "bbox": [20.0 * i, 0, 10, 10], "area": 100,
                           "iscrowd": 0} for i in (1, 2, 3, 4)],
          "categories": [{"id": c, "name": f"c{c}"} for c in (1, 2, 3)]}
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    table = pl.DataFrame({
        "gt_id":       [1,   1,   1,   2,   2,   2,   2,   3,   3,   3,   4,   4,   4],
        "box_id":      [1,   2,   3,   1,   2,   3,   4,   1,   2,   3,   0,   1,   2],
        "category_id": [2,   3,   1,   2,   3,   3,   2,   3,   2,   1,   1,   2,   2],
        "score":       [0.8, 0.8, 0.3, 0.4, 0.9, 0.1, 0.6, 0.5, 0.5, 0.2, 0.95, 0.3, 0.2]})
    path = tmp_path / "classifier.csv"
    table.write_csv(path)
    store = ingest_gt(tmp_path / "gt.json", tmp_path / "store")
    got = {}
    for strategy in ("s2_mcb", "s2_mfl"):
        result = upper_bound(store, path, strategy=strategy, run=strategy)
        got[strategy] = result.store.dt(strategy).sort("det_id").select("category_id", "score").collect().rows()
    # gt 1: 2 and 3 tie at 0.8, 2 comes first; gt 4: the target's own row (box 0, label 1 at 0.95) is the most confident
    assert got["s2_mcb"] == [(2, 0.8), (3, 0.9), (3, 0.5), (1, 0.95)]
    # gt 1: three labels once each, 2 and 3 tie on best score 0.8, 2 is seen first; gt 2: 2 and 3 twice each, 3 has
    # 0.9; gt 3: three labels once, 3 and 2 tie at 0.5, 3 first; gt 4: label 2 twice beats the target's label 1 once
    assert got["s2_mfl"] == [(2, 0.8), (3, 0.9), (3, 0.5), (2, 0.3)]
