"""Segmented proposals (Pont-Tuset & Marques §2.3; Hosang et al.'s protocols on masks) against a brute-force
reference: pycocotools ``maskUtils.iou`` of the decoded masks (checked against plain NumPy Jaccard on the bitmaps),
NumPy best Jaccard per object at every budget, the toolbox's greedy assignment written out plainly
(:func:`tests.match.test_proposal_matching.greedy_on_matrix`), and the measures as NumPy means, medians and
counts; every number equal to 1e-12, on random datasets read from every input format and sharding."""

import contextlib
import io
import json

import numpy as np
import polars as pl
import pytest
from pycocotools import mask as mask_utils
from pycocotools.coco import COCO

import evalengine
from evalengine.api import ProposalOrder, ProposalProtocol
from tests.match.test_proposal_matching import greedy_on_matrix
from tests.shape_generators import random_segmented_proposals

BUDGETS = (1, 2, 3, 5, 8, 13, 40)
THRESHOLDS = (0.5, 0.7, 0.85)
N_CASES = 60


def _proposal_rle(segmentation, h, w):
    if isinstance(segmentation, list):
        return mask_utils.merge(mask_utils.frPyObjects(segmentation, h, w))
    if isinstance(segmentation["counts"], list):
        return mask_utils.frPyObjects(segmentation, h, w)
    return {"size": segmentation["size"], "counts": segmentation["counts"].encode()}


def ranked_masks(gt: dict, proposals: list, drop_crowd: bool = True, dedup: bool = True):
    """Per image: ``(image, evaluated objects, their RLEs, the proposals' RLEs in rank order, their bitmaps)``."""
    with contextlib.redirect_stdout(io.StringIO()):
        coco = COCO()
        coco.dataset = json.loads(json.dumps(gt))
        coco.createIndex()
    scored = "score" in proposals[0]
    for image in gt["images"]:
        h, w = image["height"], image["width"]
        anns = [a for a in gt["annotations"] if a["image_id"] == image["id"] and not (drop_crowd and a["iscrowd"])]
        g_rles = [coco.annToRLE(a) for a in anns]
        mine = [p for p in proposals if p["image_id"] == image["id"]]
        if scored:  # descending score, ties in file order (a stable sort)
            mine = [mine[i] for i in np.argsort([-p["score"] for p in mine], kind="stable")]
        p_rles = [_proposal_rle(p["segmentation"], h, w) for p in mine]
        bitmaps = [mask_utils.decode(r) for r in p_rles]
        if dedup:  # a mask equal to an earlier one of the image is dropped
            keep = [i for i in range(len(bitmaps)) if not any(np.array_equal(bitmaps[i], bitmaps[j]) for j in range(i))]
            p_rles, bitmaps = [p_rles[i] for i in keep], [bitmaps[i] for i in keep]
        yield image, anns, g_rles, p_rles, bitmaps


def reference(gt: dict, proposals: list, budgets, drop_crowd: bool = True, dedup: bool = True):
    """Per image: the evaluated objects' ids, and per budget their best Jaccard / its first rank / the greedy partner's
    IoU and rank; the proposals used per image and budget."""
    out, used = {}, {}
    for image, anns, g_rles, p_rles, bitmaps in ranked_masks(gt, proposals, drop_crowd, dedup):
        m = np.zeros((len(g_rles), len(p_rles)))
        if g_rles and p_rles:
            m = np.asarray(mask_utils.iou(p_rles, g_rles, [0] * len(g_rles)), np.float64).T
            g_bits = [mask_utils.decode(r).astype(bool) for r in g_rles]
            for i, g in enumerate(g_bits):  # plain Jaccard: 0 for an empty intersection
                for j, p in enumerate(bitmaps):
                    inter, union = np.sum(g & p.astype(bool)), np.sum(g | p.astype(bool))
                    assert m[i, j] == (inter / union if inter else 0.0)
        for budget in budgets:
            top = m[:, :budget]
            best = top.max(axis=1) if top.shape[1] else np.zeros(len(anns))
            best_rank = [int(np.argmax(row)) + 1 if row.size and row.max() > 0 else None for row in top]
            iou, rank = greedy_on_matrix(top)
            for k, ann in enumerate(anns):
                out[(image["id"], ann["id"], budget)] = (best[k], best_rank[k], iou[k], rank[k])
            used[(image["id"], budget)] = min(budget, len(p_rles))
    return out, used


def _write(tmp_path, gt, proposals, form: str):
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    if form == "json":
        path = tmp_path / "props.json"
        path.write_text(json.dumps(proposals))
    elif form == "jsonl":
        path = tmp_path / "props.jsonl"
        path.write_text("".join(json.dumps(p) + "\n" for p in proposals))
    else:
        path = tmp_path / "props.parquet"
        pl.DataFrame({"image_id": [p["image_id"] for p in proposals],
                      "segmentation": [json.dumps(p["segmentation"]) for p in proposals],
                      **({"score": [p["score"] for p in proposals]} if "score" in proposals[0] else {})}
                     ).write_parquet(path)
    return tmp_path / "gt.json", path


def _measures(values: dict, used: dict, n_images: int, budgets):
    rows = {}
    for budget in budgets:
        entries = [v for (_, _, b), v in values.items() if b == budget]
        best = np.array([e[0] for e in entries])
        greedy = np.array([e[2] for e in entries])
        rows[budget] = {
            "mean_proposals": sum(n for (_, b), n in used.items() if b == budget) / n_images,
            "n_objects": len(entries),
            "mean_quality": float(np.mean(best)) if len(best) else None,
            "median_quality": float(np.median(best)) if len(best) else None,
            **{f"recall@{t:g}": float(np.mean(best > t)) if len(best) else None for t in THRESHOLDS},
            "ar": float(2 * np.mean(np.maximum(greedy - 0.5, 0))) if len(best) else None,
            "recall_50": float(np.mean(greedy >= 0.5)) if len(best) else None,
            "recall_70": float(np.mean(greedy >= 0.7)) if len(best) else None,
        }
    return rows


@pytest.mark.parametrize("seed", range(N_CASES))
def test_segmented_proposals_equal_the_reference(tmp_path, seed):
    gt, proposals = random_segmented_proposals(seed)
    form = ("json", "jsonl", "parquet")[seed % 3]
    drop_crowd, dedup = seed % 4 != 3, seed % 5 != 4
    gt_path, path = _write(tmp_path, gt, proposals, form)
    order = ProposalOrder("score-desc" if "score" in proposals[0] else "given", dedup=dedup)
    store = evalengine.ingest_proposals(gt_path, path, tmp_path / "store", order=order, n_shards=1 + seed % 3)
    ev = store.evaluate_proposals(protocol=ProposalProtocol(budgets=BUDGETS, drop_crowd=drop_crowd,
                                                            iou_type="segm"))
    expected, used = reference(gt, proposals, BUDGETS, drop_crowd, dedup)
    got = ev.gt_matches().collect()
    assert got.height == len(expected)
    for row in got.iter_rows(named=True):
        best, best_rank, iou, rank = expected[(row["image_id"], row["gt_id"], row["budget"])]
        assert (row["best_iou"], row["best_rank"], row["iou"], row["matched_rank"]) == (best, best_rank, iou, rank)
    n_images = len(gt["images"])
    measures = _measures(expected, used, n_images, BUDGETS)
    quality = ev.achievable_quality(THRESHOLDS)
    ar = ev.average_recall()
    recall = ev.recall([0.5, 0.7])
    for budget, want in measures.items():
        mean_proposals = ev.mean_proposals().filter(pl.col("budget") == budget).item(0, "mean_proposals")
        assert mean_proposals == pytest.approx(want["mean_proposals"], abs=1e-12)
        if want["n_objects"] == 0:
            assert quality.filter(pl.col("budget") == budget).height == 0
            continue
        row = quality.filter(pl.col("budget") == budget).row(0, named=True)
        for name in ("n_objects", "mean_quality", "median_quality", *[f"recall@{t:g}" for t in THRESHOLDS]):
            assert row[name] == pytest.approx(want[name], abs=1e-12), name
        assert row["mean_proposals"] == pytest.approx(want["mean_proposals"], abs=1e-12)
        assert ar.filter(pl.col("budget") == budget).item(0, "ar") == pytest.approx(want["ar"], abs=1e-12)
        for t, name in ((0.5, "recall_50"), (0.7, "recall_70")):
            value = recall.filter((pl.col("budget") == budget) & (pl.col("iou_threshold") == t)).item(0, "recall")
            assert value == pytest.approx(want[name], abs=1e-12)


def test_sql_views_equal_the_api(tmp_path):
    gt, proposals = random_segmented_proposals(7)
    gt_path, path = _write(tmp_path, gt, proposals, "json")
    order = ProposalOrder("score-desc" if "score" in proposals[0] else "given")
    store = evalengine.ingest_proposals(gt_path, path, tmp_path / "store", order=order, n_shards=2)
    ev = store.evaluate_proposals(protocol=ProposalProtocol(budgets=BUDGETS, iou_type="segm"))
    key = ProposalProtocol(budgets=BUDGETS, iou_type="segm").match_key()
    sql = store.sql(f"SELECT * FROM achievable_quality WHERE protocol = '{key}' ORDER BY budget")
    api = ev.achievable_quality(THRESHOLDS).sort("budget")
    assert sql.get_column("budget").to_list() == api.get_column("budget").to_list()
    for ours, theirs in (("mean_quality", "mean_quality"), ("median_quality", "median_quality"),
                         ("recall@0.5", "recall_50"), ("recall@0.7", "recall_70"), ("recall@0.85", "recall_85"),
                         ("mean_proposals", "mean_proposals"), ("n_objects", "n_objects")):
        np.testing.assert_allclose(sql.get_column(theirs).to_numpy().astype(float),
                                   api.get_column(ours).to_numpy().astype(float), rtol=0, atol=1e-12)
    best = store.sql(f"SELECT gt_id, budget, best_iou, n_proposals FROM object_best WHERE protocol = '{key}' "
                     "ORDER BY gt_id, budget")
    table = ev.gt_matches().collect().sort("gt_id", "budget")
    assert best.get_column("best_iou").to_list() == table.get_column("best_iou").to_list()


def test_same_tables_whatever_the_sharding_and_scheduler(tmp_path):
    gt, proposals = random_segmented_proposals(11)
    gt_path, path = _write(tmp_path, gt, proposals, "json")
    order = ProposalOrder("score-desc" if "score" in proposals[0] else "given")
    protocol = ProposalProtocol(budgets=BUDGETS, iou_type="segm")
    tables = []
    for k, (shards, scheduler) in enumerate(((1, "sync"), (4, "threads"), (3, "processes"))):
        store = evalengine.ingest_proposals(gt_path, path, tmp_path / f"s{k}", order=order, n_shards=shards)
        ev = store.evaluate_proposals(protocol=protocol, scheduler=scheduler, workers=2)
        tables.append((ev.gt_matches().collect().drop("shard").sort("gt_id", "budget"),
                       ev.achievable_quality().sort("budget")))
    for gt_table, quality in tables[1:]:
        assert gt_table.equals(tables[0][0])
        assert quality.equals(tables[0][1])


def test_box_tables_keep_their_key():
    """``iou_type`` enters the match key only for masks: stored box tables are reused as before."""
    assert ProposalProtocol().match_key() == "hosang"
    assert ProposalProtocol(budgets=(1, 10)).match_key() == ProposalProtocol(budgets=(1, 10), iou_type="bbox").match_key()
    assert ProposalProtocol(iou_type="segm").match_key().startswith("hosang-")
