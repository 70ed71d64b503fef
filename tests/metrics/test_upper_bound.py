"""The empirical upper-bound AP (Borji & Iranmanesh §4): spec §7 T6 on random data, and the run against pycocotools
evaluating the same detections built here independently, as the reference notebook builds them."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine.api import evaluate_store_voc, ingest_gt, upper_bound
from evalengine.match.coco import COCO_IOU_THRESHOLDS, CocoProtocol
from evalengine.match.voc import VocProtocol
from tests.generators import random_coco
from tests.reference import pycocotools_eval

# thresholds beyond COCO's: a loose one, one near 1 and 1 itself (pycocotools compares with min(τ, 1 − 1e-10))
TAUS = (0.05, *COCO_IOU_THRESHOLDS, 0.99, 1.0)
VOC = VocProtocol(iou_thresholds=(0.05, 0.5, 0.9, 1.0))
AREAS = (("all", 0, 1e10), ("small", 0, 1024), ("medium", 1024, 9216), ("large", 9216, 1e10), ("tiny", 0, 100))


def store_of(tmp_path, gt: dict):
    path = tmp_path / "gt.json"
    path.write_text(json.dumps(gt))
    return ingest_gt(path, tmp_path / "store", n_shards=2)


def classifier_table(tmp_path, gt: dict, labels, scores):
    path = tmp_path / "classifier.parquet"
    pl.DataFrame({"image_id": [a["image_id"] for a in gt["annotations"]], "gt_id": [a["id"] for a in gt["annotations"]],
                  "category_id": list(labels), "score": list(scores)}).write_parquet(path)
    return path


def true_labels(gt: dict) -> list:
    return [a["category_id"] for a in gt["annotations"]]


def random_scores(rng, n: int) -> list:
    """Scores with ties (rounded to one decimal half of the time)."""
    scores = rng.random(n)
    return list(np.round(scores, 1) if rng.random() < 0.5 else scores)


@pytest.mark.parametrize("seed", range(8))
def test_true_labels_give_ap_1_at_every_threshold_size_and_interpolation(tmp_path, seed):
    """T6: GT boxes, their true labels and random scores: AP = 1 for every τ, area range and COCO / VOC07 / VOC12
    interpolation (every class with ground truth there, 100 detections per image; pycocotools' eps makes
    1 − 1e-16)."""
    rng = np.random.default_rng(seed)
    gt = {}
    while not gt.get("annotations"):
        gt, _ = random_coco(1000 + seed)
        gt["annotations"] = [a for a in gt["annotations"] if a["bbox"][2] > 0 and a["bbox"][3] > 0]  # IoU 1 needs area
        seed += 100
    store = store_of(tmp_path, gt)
    path = classifier_table(tmp_path, gt, true_labels(gt), random_scores(rng, len(gt["annotations"])))
    result = upper_bound(store, path, protocol=CocoProtocol(iou_thresholds=TAUS, area_ranges=AREAS))
    table = result.evaluation.ap_table().filter((pl.col("ap") > -1) & (pl.col("max_dets") == 100))
    assert table.height > 0
    np.testing.assert_allclose(table.get_column("ap").to_numpy(), 1, rtol=0, atol=1e-12)
    np.testing.assert_allclose(table.get_column("recall").to_numpy(), 1, rtol=0, atol=0)
    assert result.overall_accuracy() == 1
    for metric in ("voc07", "voc12"):
        voc = evaluate_store_voc(result.store, VOC, run="uap", metric=metric)
        aps = voc.per_class(metric).filter(pl.col("ap") > -1).get_column("ap").to_numpy()
        assert aps.size, metric
        np.testing.assert_allclose(aps, 1, rtol=0, atol=1e-12, err_msg=metric)  # VOC07: eleven 1s summed, / 11


def grid_gt(rng, n_images: int, categories) -> dict:
    """Boxes that overlap nothing: at most one per 160-pixel cell of a 4×4 grid, of every size class."""
    anns = []
    for image_id in range(1, n_images + 1):
        for cell in rng.choice(16, size=int(rng.integers(0, 12)), replace=False):
            w, h = rng.uniform(4, 150, 2)
            x, y = 160 * (cell % 4) + rng.uniform(0, 159 - w), 160 * (cell // 4) + rng.uniform(0, 159 - h)
            anns.append({"id": len(anns) + 7, "image_id": image_id, "category_id": int(rng.choice(categories)),
                         "bbox": [float(x), float(y), float(w), float(h)], "area": float(w * h),
                         "iscrowd": int(rng.random() < 0.1)})
    order = rng.permutation(len(anns))
    return {"images": [{"id": i, "width": 640, "height": 640} for i in range(1, n_images + 1)],
            "annotations": [anns[i] for i in order], "categories": [{"id": c, "name": f"c{c}"} for c in categories]}


@pytest.mark.parametrize("seed", range(8))
def test_permuted_labels_on_disjoint_boxes_give_the_same_ap_at_every_threshold(tmp_path, seed):
    """T6: labels permuted (a third wrong) on boxes that overlap nothing: each class's AP is identical across τ
    (COCO, every area range and cap; VOC07 and VOC12), and below 1 where a label is wrong."""
    rng = np.random.default_rng(seed)
    categories = [1, 2, 3, 5]
    gt = grid_gt(rng, 6, categories)
    labels = [c if rng.random() < 0.67 else int(rng.choice(categories)) for c in true_labels(gt)]
    store = store_of(tmp_path, gt)
    result = upper_bound(store, classifier_table(tmp_path, gt, labels, random_scores(rng, len(labels))),
                         protocol=CocoProtocol(iou_thresholds=TAUS, area_ranges=AREAS))
    spread = (result.evaluation.ap_table().group_by("category_id", "area_range", "max_dets")
              .agg(pl.col("ap").n_unique().alias("n"), pl.col("ap").first()))
    assert spread.get_column("n").to_list() == [1] * spread.height
    assert spread.filter(pl.col("ap") > -1).get_column("ap").min() < 1
    for metric in ("voc07", "voc12"):
        voc = evaluate_store_voc(result.store, VOC, run="uap", metric=metric)
        per_class = voc.per_class(metric).group_by("category_id").agg(pl.col("ap").n_unique().alias("n"))
        assert per_class.get_column("n").to_list() == [1] * per_class.height, metric


def notebook_detections(gt: dict, labels, scores, unit_score: bool, keep) -> list:
    """calc_upperBound.ipynb: one detection per entry of data['annotations'] (crowd included), the GT box, the
    predicted label and the classifier's score (or 1)."""
    return [{"image_id": a["image_id"], "category_id": label, "bbox": a["bbox"], "score": 1.0 if unit_score else s}
            for a, label, s, k in zip(gt["annotations"], labels, scores, keep) if k]


@pytest.mark.parametrize("batch", range(6))
def test_upper_bound_run_equals_pycocotools(tmp_path, batch):
    """On random ground truths (crowd, ties, degenerate boxes, boundary areas, classes without objects), random
    labels, scores with ties, the unit-score variant and annotations left out (allow_missing): the 12 numbers and
    per-class AP / AP50 / AR equal pycocotools on the detections built here (1e-12); the accuracy is the share of
    correct labels over labelled non-crowd objects."""
    for seed in range(batch * 10, (batch + 1) * 10):
        rng = np.random.default_rng(seed)
        gt, _ = random_coco(seed)
        if not gt["annotations"]:
            continue
        categories = [c["id"] for c in gt["categories"]]
        labels = [c if rng.random() < 0.7 else int(rng.choice(categories)) for c in true_labels(gt)]
        scores = random_scores(rng, len(labels))
        unit_score, allow_missing = seed % 3 == 0, seed % 4 == 1
        keep = rng.random(len(labels)) < 0.8 if allow_missing else np.ones(len(labels), bool)
        folder = tmp_path / str(seed)
        folder.mkdir()
        store = store_of(folder, gt)
        path = classifier_table(folder, {"annotations": [a for a, k in zip(gt["annotations"], keep) if k]},
                                [x for x, k in zip(labels, keep) if k], [x for x, k in zip(scores, keep) if k])
        result = upper_bound(store, path, unit_score=unit_score, allow_missing=allow_missing)
        dets = notebook_detections(gt, labels, scores, unit_score, keep)
        if not dets:
            continue
        ref = pycocotools_eval(gt, dets)
        np.testing.assert_allclose(result.evaluation.stats(), ref.stats, rtol=0, atol=1e-12, err_msg=f"seed {seed}")
        precision, recall = ref.eval["precision"], ref.eval["recall"]
        mine = result.per_class().sort("category_id")
        for k, row in enumerate(mine.iter_rows(named=True)):
            p, r = precision[:, :, k, 0, -1], recall[:, k, 0, -1]
            want = [float(np.mean(x[x > -1])) if (x > -1).any() else -1.0 for x in (p, p[:1], r)]
            np.testing.assert_allclose([row["ap"], row["ap50"], row["ar"]], want, rtol=0, atol=1e-12,
                                       err_msg=f"seed {seed} category {row['category_id']}")
            objects = [(a["category_id"], x) for a, x, k in zip(gt["annotations"], labels, keep)
                       if k and not a["iscrowd"] and a["category_id"] == row["category_id"]]
            assert row["n_objects"] == (len(objects) or None)
            if objects:
                assert row["accuracy"] == sum(t == x for t, x in objects) / len(objects)
