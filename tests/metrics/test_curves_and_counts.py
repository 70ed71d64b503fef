"""The precision–recall table equals pycocotools' ``precision``/``scores`` arrays; per-image counts equal ``evalImgs``."""

import json

import numpy as np
import pytest

from evalengine.api import ingest_coco
from tests.conftest import PACKAGE_DATA
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.reference import pycocotools_eval

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.fixture(scope="module")
def fake100(tmp_path_factory):
    evaluation = ingest_coco(GT, DT, tmp_path_factory.mktemp("s") / "store", n_shards=3).evaluate()
    reference = pycocotools_eval(json.loads(GT.read_text()), json.loads(DT.read_text()))
    return evaluation, reference


def _indices(table, evaluation, reference):
    """pycocotools array indices (k, t, a, m) of each row of one of our tables."""
    p = evaluation.protocol
    return (np.searchsorted(reference.params.catIds, table["category_id"].to_numpy()),
            np.searchsorted(p.iou_thresholds, table["iou_threshold"].to_numpy()),
            np.array([p.area_index(label) for label in table["area_range"].to_list()]),
            np.searchsorted(p.max_dets, table["max_dets"].to_numpy()))


def test_precision_recall_table_equals_pycocotools_arrays(fake100):
    evaluation, reference = fake100
    table = evaluation.precision_recall()
    k, t, a, m = _indices(table, evaluation, reference)
    r = np.searchsorted(evaluation.protocol.recall_thresholds, table["recall_threshold"].to_numpy())
    assert table.height == reference.eval["precision"].size
    np.testing.assert_array_equal(table["precision"].to_numpy(), reference.eval["precision"][t, r, k, a, m])
    np.testing.assert_array_equal(table["score"].to_numpy(), reference.eval["scores"][t, r, k, a, m])


def test_ap_table_recall_equals_pycocotools(fake100):
    evaluation, reference = fake100
    table = evaluation.ap_table()
    k, t, a, m = _indices(table, evaluation, reference)
    np.testing.assert_array_equal(table["recall"].to_numpy(), reference.eval["recall"][t, k, a, m])
    precision = reference.eval["precision"][t, :, k, a, m]
    want = np.where(precision[:, 0] > -1, precision.mean(axis=1), -1.0)
    np.testing.assert_allclose(table["ap"].to_numpy(), want, rtol=0, atol=1e-12)


def _reference_counts(reference, iou_index, area_index, cap):
    """TP / FP / FN per image from pycocotools ``evalImgs`` (area range ``area_index``, first ``cap`` detections)."""
    counts = {}
    n_area = len(reference.params.areaRng)
    n_img = len(reference.params.imgIds)
    for k in range(len(reference.params.catIds)):
        for i in range(n_img):
            e = reference.evalImgs[k * n_area * n_img + area_index * n_img + i]
            if e is None:
                continue
            dtm = e["dtMatches"][iou_index, :cap]
            dt_ig = e["dtIgnore"][iou_index, :cap]
            tp = int(np.logical_and(dtm, ~dt_ig).sum())
            fp = int(np.logical_and(dtm == 0, ~dt_ig).sum())
            n_gt = int((~e["gtIgnore"].astype(bool)).sum())
            c = counts.setdefault(e["image_id"], [0, 0, 0])
            c[0] += tp
            c[1] += fp
            c[2] += n_gt - tp
    return counts


@pytest.mark.parametrize("seed", [1, 4, 9, 30])
@pytest.mark.parametrize("iou_threshold, area_range, cap", [(0.5, "all", 100), (0.75, "small", 10), (0.95, "large", 1)])
def test_per_image_counts_equal_eval_imgs(tmp_path, seed, iou_threshold, area_range, cap):
    gt, dt = random_coco(seed)
    evaluation = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=2).evaluate()
    reference = pycocotools_eval(gt, dt)
    p = evaluation.protocol
    want = _reference_counts(reference, int(np.argmin(np.abs(np.array(p.iou_thresholds) - iou_threshold))),
                             p.area_index(area_range), cap)
    got = evaluation.per_image_counts(iou_threshold=iou_threshold, area_range=area_range, max_dets=cap)
    got = {row["image_id"]: [row["tp"], row["fp"], row["fn"]] for row in got.iter_rows(named=True)}
    for image_id in set(got) | set(want):
        assert got.get(image_id, [0, 0, 0]) == want.get(image_id, [0, 0, 0]), f"seed {seed} image {image_id}"


@pytest.mark.parametrize("batch_rows", [1, 50, 300])
def test_accumulation_in_category_batches_is_identical(fake100, batch_rows):
    from evalengine.metrics.ap import accumulate, category_batches

    evaluation, _ = fake100
    whole = evaluation.accumulate(want_curve=True)
    assert len(category_batches(evaluation.dt_matches(), whole.category_ids, batch_rows)) > 1
    batched = accumulate(evaluation.dt_matches(), evaluation.gt_matches(), evaluation.category_ids,
                         evaluation.protocol, want_curve=True, batch_rows=batch_rows)
    for name in ("ap", "recall", "precision", "scores"):
        np.testing.assert_array_equal(getattr(batched, name), getattr(whole, name))


@pytest.mark.parametrize("rank_order", ["as stored", "shuffled"])
def test_ranking_order_is_pycocotools_order(rank_order):
    """(−score, image id, rank) per category, as pycocotools' stable sort of per-image score-sorted lists; rows of
    an image may arrive in rank order (as stored) or not."""
    from evalengine.metrics.ap import order_by_category

    rng = np.random.default_rng(4)
    n = 5000
    cat_index = rng.integers(0, 7, n)
    image_id = rng.integers(0, 60, n)
    score = rng.integers(0, 5, n) / 4  # many ties
    rows = np.lexsort((-score, image_id, cat_index))  # the stored order: (category, image, −score)
    rank = np.empty(n, np.int64)
    for k, (c, i) in enumerate(zip(cat_index[rows], image_id[rows])):
        same = k and c == cat_index[rows[k - 1]] and i == image_id[rows[k - 1]]
        rank[rows[k]] = rank[rows[k - 1]] + 1 if same else 0
    if rank_order == "shuffled":
        rows = rng.permutation(n)
    cat, img, sc, rk = cat_index[rows], image_id[rows], score[rows], rank[rows]
    order, starts = order_by_category(cat, 7, sc, img, rk)
    want = np.lexsort((rk, img, -sc, cat))
    assert np.array_equal(order, want)
    assert np.array_equal(starts, np.searchsorted(cat[want], np.arange(8)))
