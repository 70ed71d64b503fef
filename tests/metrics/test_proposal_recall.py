"""Proposal recall end to end: files → store → match table → recall/AR/ABO, against brute force and pycocotools."""

import json

import numpy as np
import polars as pl
import pytest

from evalengine import api, cli
from evalengine.match.proposals import ProposalProtocol
from evalengine.match.coco import CocoProtocol
from evalengine.store.ranking import ProposalOrder
from tests.match.test_proposal_matching import _iou_matrix, brute_force_greedy
from tests.reference import pycocotools_eval

FAKE100 = "evalengine/data/instances_val2014_fakebbox100_results.json"
GT100 = "evalengine/data/instances_val2014_100.json"


def _random_set(seed):
    """A COCO ground truth and scored proposals: empty images, crowd, integer boxes with exact IoU ties."""
    rng = np.random.default_rng(seed)
    images, anns, props = [], [], []
    for image_id in range(1, 41):
        images.append({"id": image_id, "width": int(rng.integers(40, 120)), "height": int(rng.integers(40, 120))})
        for _ in range(int(rng.choice([0, 1, 2, 3, 6]))):
            box = [float(v) for v in (*rng.integers(0, 30, 2), *rng.integers(1, 40, 2))]
            anns.append({"id": len(anns) + 1, "image_id": image_id, "category_id": int(rng.integers(1, 4)),
                         "bbox": box, "area": box[2] * box[3], "iscrowd": int(rng.random() < 0.1)})
        for _ in range(int(rng.choice([0, 2, 9, 25]))):
            box = [float(v) for v in (*rng.integers(0, 30, 2), *rng.integers(1, 40, 2))]
            props.append({"image_id": image_id, "bbox": box, "score": float(rng.integers(0, 5))})  # tied scores
    gt = {"images": images, "annotations": anns, "categories": [{"id": c, "name": f"c{c}"} for c in (1, 2, 3)]}
    return gt, props


def _expected(gt, props, budgets):
    """Per (budget, ground truth id) greedy IoU by brute force; ranking = stable sort by descending score."""
    out = {}
    for image in gt["images"]:
        anns = [a for a in gt["annotations"] if a["image_id"] == image["id"] and not a["iscrowd"]]
        mine = [p for p in props if p["image_id"] == image["id"]]
        ranked = sorted(range(len(mine)), key=lambda i: -mine[i]["score"])  # stable: file order breaks ties
        for budget in budgets:
            top = [mine[i]["bbox"] for i in ranked][:budget]
            corners = [(x, y, x + w, y + h) for x, y, w, h in top]
            gt_corners = [(a["bbox"][0], a["bbox"][1], a["bbox"][0] + a["bbox"][2], a["bbox"][1] + a["bbox"][3])
                          for a in anns]
            ious, _ = brute_force_greedy(gt_corners, corners)
            best = _iou_matrix(gt_corners, corners).max(axis=1) if corners else np.zeros(len(anns))
            for ann, iou, b in zip(anns, ious, best):
                out[budget, ann["id"]] = (iou, ann["image_id"], ann["category_id"], b)
    return out


@pytest.mark.parametrize("seed", range(4))
def test_recall_ar_and_slices_equal_brute_force(tmp_path, seed):
    gt, props = _random_set(seed)
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "p.json").write_text(json.dumps(props))
    budgets = (1, 3, 10, 100)
    expected = _expected(gt, props, budgets)
    results = []
    for shards in (1, 3):
        store = api.ingest_proposals(tmp_path / "gt.json", tmp_path / "p.json", tmp_path / f"s{shards}",
                                     order=ProposalOrder(dedup=False), n_shards=shards)
        ev = store.evaluate_proposals(protocol=ProposalProtocol(budgets=budgets))
        ar = ev.average_recall()
        rec = ev.recall([0.5, 0.7])
        images_ar = ev.average_recall(aggregation="images")
        per_class = ev.average_recall(by=["category_id"])
        abo, mabo = ev.best_overlap(), ev.mabo()
        images_rec = ev.recall([0.5, 0.7], matcher="best", aggregation="images")
        results.append((ar, rec, images_ar, per_class, abo, mabo, images_rec))
        for budget in budgets:
            ious = np.array([v[0] for (b, _), v in expected.items() if b == budget])
            assert ar.filter(budget=budget).get_column("ar").item() == pytest.approx(
                2 * np.mean(np.maximum(ious - 0.5, 0)), abs=1e-12)
            for t in (0.5, 0.7):
                assert rec.filter(budget=budget, iou_threshold=t).get_column("recall").item() == pytest.approx(
                    np.mean(ious >= t), abs=1e-12)
            per_image = {}
            for (b, _), (iou, image_id, _, _) in expected.items():
                if b == budget:
                    per_image.setdefault(image_id, []).append(2 * max(iou - 0.5, 0))
            assert images_ar.filter(budget=budget).get_column("ar").item() == pytest.approx(
                np.mean([np.mean(v) for v in per_image.values()]), abs=1e-12)
            for t in (0.5, 0.7):  # Wang et al.: per-image recall of best-overlap hits, averaged over images
                hits = {}
                for (b, _), v in expected.items():
                    if b == budget:
                        hits.setdefault(v[1], []).append(v[3] >= t)
                got = images_rec.filter(budget=budget, iou_threshold=t).get_column("recall").item()
                assert got == pytest.approx(np.mean([np.mean(h) for h in hits.values()]), abs=1e-12)
            best = [v[3] for (b, _), v in expected.items() if b == budget]
            assert abo.filter(budget=budget).get_column("abo").item() == pytest.approx(np.mean(best), abs=1e-12)
            per_cat = [np.mean([v[3] for (b, _), v in expected.items() if b == budget and v[2] == c])
                       for c in (1, 2, 3) if any(v[2] == c for (b, _), v in expected.items() if b == budget)]
            assert mabo.filter(budget=budget).get_column("mabo").item() == pytest.approx(np.mean(per_cat), abs=1e-12)
            for cat in (1, 2, 3):
                cat_ious = [v[0] for (b, _), v in expected.items() if b == budget and v[2] == cat]
                got = per_class.filter(budget=budget, category_id=cat).get_column("ar")
                if cat_ious:
                    assert got.item() == pytest.approx(2 * np.mean(np.maximum(np.array(cat_ious) - 0.5, 0)), abs=1e-12)
    for one, three in zip(results[0], results[1]):
        assert one.equals(three)


def test_trapezoid_and_grid_ar_follow_their_definitions(tmp_path):
    gt, props = _random_set(7)
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "p.json").write_text(json.dumps(props))
    ev = api.ingest_proposals(tmp_path / "gt.json", tmp_path / "p.json", tmp_path / "s").evaluate_proposals()
    ious = ev.gt_matches().filter(pl.col("budget") == 10).collect().get_column("iou").to_numpy()
    grid = np.arange(1001) / 1000
    recall = np.array([np.sum(ious >= t) / (len(ious) + np.spacing(1)) for t in grid])
    trapz = 2 * 0.001 * np.trapezoid(recall[grid >= 0.5])
    got = ev.average_recall(method="trapezoid").filter(budget=10).get_column("ar").item()
    assert got == pytest.approx(trapz, abs=1e-12)
    nine = [0.5 + 0.025 * k for k in range(9)]
    grid_ar = ev.average_recall(method="grid", iou_thresholds=nine).filter(budget=10).get_column("ar").item()
    assert grid_ar == pytest.approx(np.mean([np.mean(ious >= t) for t in nine]), abs=1e-12)
    exact_07 = ev.average_recall(iou_range=(0.5, 0.7)).filter(budget=10).get_column("ar").item()
    assert exact_07 == pytest.approx(np.mean((np.clip(ious, 0.5, 0.7) - 0.5) / 0.2), abs=1e-12)


def test_class_agnostic_coco_equals_pycocotools_on_fake100(tmp_path):
    """AR@1/10/100 (and all 12 numbers) of pycocotools with useCats=0 on the cocoapi fake100 set."""
    gt, dt = json.loads(open(GT100).read()), json.loads(open(FAKE100).read())
    store = api.ingest_proposals(GT100, FAKE100, tmp_path / "s", order=ProposalOrder(dedup=False), n_shards=3)
    for budgets in ((1, 10, 100), (1, 3, 10, 32, 100, 316, 1000)):
        ours = store.evaluate(CocoProtocol(use_cats=False, max_dets=budgets), run="proposals").stats()
        ref = pycocotools_eval(gt, dt, use_cats=False, max_dets=budgets).stats
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12)


def test_cli_json_shapes(tmp_path, capsys):
    gt, dt = json.loads(open(GT100).read()), json.loads(open(FAKE100).read())
    assert cli.main(["proposals", "--gt", GT100, "--proposals", FAKE100, "--json", "--quiet"]) == 0
    payload = json.loads(capsys.readouterr().out)
    assert payload["budgets"] == [1, 3, 10, 32, 100, 316, 1000, 3162, 10000]
    assert set(payload["recall"]) == {"0.5", "0.7"}
    assert all(len(payload[k]) == 9 for k in ("mean_proposals", "ar")) and len(payload["recall"]["0.7"]) == 9
    assert payload["mean_proposals"][-1] == pytest.approx(len(dt) / len(gt["images"]))
    assert cli.main(["proposals", "--gt", GT100, "--proposals", FAKE100, "--protocol", "coco", "--budgets", "1", "10",
                     "100", "--no-dedup", "--json", "--quiet"]) == 0
    payload = json.loads(capsys.readouterr().out)
    ref = pycocotools_eval(gt, dt, use_cats=False, max_dets=(1, 10, 100)).stats
    np.testing.assert_allclose(payload["stats"], ref, rtol=0, atol=1e-12)
    np.testing.assert_allclose(payload["ar"], ref[6:9], rtol=0, atol=1e-12)


def test_sql_view_equals_api(tmp_path):
    store = api.ingest_proposals(GT100, FAKE100, tmp_path / "s")
    ev = store.evaluate_proposals()
    view = store.sql("SELECT budget, ar, recall_70, abo, mean_proposals FROM proposal_recall ORDER BY budget")
    ar = ev.average_recall()
    np.testing.assert_allclose(view.get_column("ar"), ar.get_column("ar"), rtol=0, atol=1e-12)
    np.testing.assert_allclose(view.get_column("mean_proposals"), ar.get_column("mean_proposals"), rtol=0, atol=1e-12)
    np.testing.assert_allclose(view.get_column("recall_70"),
                               ev.recall([0.7]).get_column("recall"), rtol=0, atol=1e-12)
    np.testing.assert_allclose(view.get_column("abo"), ev.best_overlap().get_column("abo"), rtol=0, atol=1e-12)


def test_no_evaluated_ground_truth_gives_nulls_per_budget(tmp_path):
    gt = {"images": [{"id": 1, "width": 10, "height": 10}, {"id": 2, "width": 10, "height": 10}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 5, 5], "area": 25, "iscrowd": 1}],
          "categories": [{"id": 1, "name": "a"}]}
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "p.json").write_text(json.dumps([{"image_id": 1, "bbox": [0, 0, 5, 5], "score": 1.0}]))
    assert cli.main(["proposals", "--gt", str(tmp_path / "gt.json"), "--proposals", str(tmp_path / "p.json"),
                     "--budgets", "1", "10", "--oma", "--json", "--quiet"]) == 0
    ev = api.ingest_proposals(tmp_path / "gt.json", tmp_path / "p.json", tmp_path / "s").evaluate_proposals(
        protocol=ProposalProtocol(budgets=(1, 10)))
    report = api.report.proposal_payload(ev)
    assert report["ar"] == [None, None] and report["recall"]["0.5"] == [None, None]
    assert report["mean_proposals"] == [0.5, 0.5]  # one proposal over two images
    assert api.report.oma_payload(ev) == {"0.5": [None, None], "0.7": [None, None]}


@pytest.mark.parametrize("batch", range(4))
def test_class_agnostic_coco_on_random_proposal_runs_equals_pycocotools(tmp_path, batch):
    """The coco protocol on a proposal run (ranked by score, duplicates kept) is pycocotools with useCats=0 on
    the same file: tied scores across categories, crowd, empty images, > 100 boxes per image."""
    from tests.generators import random_coco

    for seed in range(batch * 10, batch * 10 + 10):
        gt, dt = random_coco(seed)
        folder = tmp_path / str(seed)
        folder.mkdir()
        (folder / "gt.json").write_text(json.dumps(gt))
        (folder / "dt.json").write_text(json.dumps(dt))
        store = api.ingest_proposals(folder / "gt.json", folder / "dt.json", folder / "s",
                                     order=ProposalOrder(dedup=False), n_shards=2)
        ours = store.evaluate(CocoProtocol(use_cats=False, max_dets=(1, 10, 100)), run="proposals").stats()
        ref = pycocotools_eval(gt, dt, use_cats=False, max_dets=(1, 10, 100)).stats
        np.testing.assert_allclose(ours, ref, rtol=0, atol=1e-12, err_msg=f"seed {seed}")
