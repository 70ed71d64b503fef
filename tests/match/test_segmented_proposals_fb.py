"""F̃b of segmented proposals (Pont-Tuset & Marques §2.2–2.3) against a NumPy/SciPy transcription of DAVIS
``db_eval_boundary`` (its ``seg2bmap``, ``binary_dilation`` by ``skimage.morphology.disk``): every object's best F̃b
and its first rank at every budget, the mean / median / recall at F̃b > t, on random datasets of every input format
and sharding, with any scheduler; the box tables' keys unchanged; F̃b refused where it means nothing."""

import json

import numpy as np
import polars as pl
import pytest
from pycocotools import mask as mask_utils
from scipy.ndimage import binary_dilation
from skimage.morphology import disk

import evalengine
from evalengine import schema
from evalengine.api import ProposalOrder, ProposalProtocol
from evalengine.errors import ProtocolError
from tests.cli.test_segmented_proposals_cli import _run
from tests.match.test_segmented_proposals import _write, ranked_masks
from tests.shape_generators import random_segmented_proposals

BUDGETS = (1, 2, 3, 5, 8, 13, 40)
THRESHOLDS = (0.5, 0.7, 0.85)
# datasets with objects (a ground truth without any has no mask columns, which the segm protocol refuses)
SEEDS = [s for s in range(1000, 1100) if random_segmented_proposals(s)[0]["annotations"]][:36]


def davis_seg2bmap(seg):
    """DAVIS ``seg2bmap`` at the image's own size."""
    seg = seg.astype(bool)
    e, s, se = np.zeros_like(seg), np.zeros_like(seg), np.zeros_like(seg)
    e[:, :-1], s[:-1, :], se[:-1, :-1] = seg[:, 1:], seg[1:, :], seg[1:, 1:]
    b = seg ^ e | seg ^ s | seg ^ se
    b[-1, :] = seg[-1, :] ^ e[-1, :]
    b[:, -1] = seg[:, -1] ^ s[:, -1]
    b[-1, -1] = 0
    return b


def davis_f(foreground, ground_truth, bound_th=0.008):
    """DAVIS ``db_eval_boundary`` (no void)."""
    bound_pix = bound_th if bound_th >= 1 else np.ceil(bound_th * np.linalg.norm(foreground.shape))
    fg_b, gt_b = davis_seg2bmap(foreground), davis_seg2bmap(ground_truth)
    fg_dil, gt_dil = binary_dilation(fg_b, disk(bound_pix)), binary_dilation(gt_b, disk(bound_pix))
    n_fg, n_gt = np.sum(fg_b), np.sum(gt_b)
    if n_fg == 0 and n_gt > 0:
        precision, recall = 1, 0
    elif n_fg > 0 and n_gt == 0:
        precision, recall = 0, 1
    elif n_fg == 0 and n_gt == 0:
        precision, recall = 1, 1
    else:
        precision, recall = np.sum(fg_b & gt_dil) / float(n_fg), np.sum(gt_b & fg_dil) / float(n_gt)
    return 0.0 if precision + recall == 0 else 2 * precision * recall / (precision + recall)


def fb_reference(gt, proposals, budgets, drop_crowd=True, dedup=True, tolerance=0.008) -> dict:
    """``{(image, object, budget): (best F̃b, its first rank or None)}``."""
    out = {}
    for image, anns, g_rles, _, bitmaps in ranked_masks(gt, proposals, drop_crowd, dedup):
        g_bits = [mask_utils.decode(r) for r in g_rles]
        f = np.array([[davis_f(p, g, tolerance) for p in bitmaps] for g in g_bits]).reshape(len(g_bits), len(bitmaps))
        for budget in budgets:
            top = f[:, :budget]
            for k, ann in enumerate(anns):
                row = top[k]
                best = float(row.max()) if row.size else 0.0
                out[(image["id"], ann["id"], budget)] = (best, int(np.argmax(row)) + 1 if best > 0 else None)
    return out


def _check(ev, expected):
    got = ev.gt_matches().collect()
    assert got.height == len(expected)
    for row in got.iter_rows(named=True):
        best, rank = expected[(row["image_id"], row["gt_id"], row["budget"])]
        assert row["best_fb"] == pytest.approx(best, abs=1e-12) and row["best_fb_rank"] == rank, row
    quality = ev.achievable_quality(THRESHOLDS, measure="boundary_f")
    for budget in BUDGETS:
        values = np.array([v[0] for (_, _, b), v in expected.items() if b == budget])
        rows = quality.filter(pl.col("budget") == budget)
        if not len(values):
            assert rows.height == 0
            continue
        row = rows.row(0, named=True)
        assert row["measure"] == "boundary_f" and row["n_objects"] == len(values)
        assert row["mean_quality"] == pytest.approx(float(np.mean(values)), abs=1e-12)
        assert row["median_quality"] == pytest.approx(float(np.median(values)), abs=1e-12)
        for t in THRESHOLDS:
            assert row[f"recall@{t:g}"] == pytest.approx(float(np.mean(values > t)), abs=1e-12)


@pytest.mark.parametrize("seed", SEEDS)
def test_best_fb_equals_davis(tmp_path, seed):
    gt, proposals = random_segmented_proposals(seed)
    drop_crowd, dedup = seed % 4 != 3, seed % 5 != 4
    tolerance = (0.008, 0.05, 2.0)[seed % 3]
    gt_path, path = _write(tmp_path, gt, proposals, ("json", "jsonl", "parquet")[seed % 3])
    order = ProposalOrder("score-desc" if "score" in proposals[0] else "given", dedup=dedup)
    store = evalengine.ingest_proposals(gt_path, path, tmp_path / "store", order=order, n_shards=1 + seed % 3)
    protocol = ProposalProtocol(budgets=BUDGETS, drop_crowd=drop_crowd, iou_type="segm", boundary_f=True,
                                fb_tolerance=tolerance)
    _check(store.evaluate_proposals(protocol=protocol), fb_reference(gt, proposals, BUDGETS, drop_crowd, dedup,
                                                                     tolerance))


def test_any_sharding_and_scheduler_gives_the_same_table(tmp_path):
    gt, proposals = random_segmented_proposals(2033)  # 20 objects, 38 proposals in 4 images
    gt_path, path = _write(tmp_path, gt, proposals, "json")
    protocol = ProposalProtocol(budgets=BUDGETS, iou_type="segm", boundary_f=True)
    tables = []
    for n_shards, schedule in ((1, {}), (3, {"scheduler": "threads", "workers": 2}),
                               (4, {"scheduler": "processes", "workers": 2})):
        store = evalengine.ingest_proposals(gt_path, path, tmp_path / f"s{n_shards}", n_shards=n_shards)
        ev = store.evaluate_proposals(protocol=protocol, **schedule)
        tables.append(ev.gt_matches().collect().select(*schema.PROPOSAL_GT_MATCHES).sort("image_id", "gt_id", "budget"))
    for table in tables[1:]:
        assert table.equals(tables[0])
    assert tables[0].get_column("best_fb").null_count() == 0


def test_protocol_keys_and_refusals(tmp_path):
    assert ProposalProtocol().match_key() == "hosang"  # box tables keep their keys
    assert ProposalProtocol(iou_type="segm").match_key() == ProposalProtocol(iou_type="segm",
                                                                             fb_tolerance=0.01).match_key()
    assert ProposalProtocol(iou_type="segm", boundary_f=True).match_key() != ProposalProtocol(
        iou_type="segm").match_key()
    with pytest.raises(ProtocolError, match="boundary_f.*iou_type 'segm'"):
        ProposalProtocol(boundary_f=True)
    with pytest.raises(ProtocolError, match="fb_tolerance"):
        ProposalProtocol(iou_type="segm", boundary_f=True, fb_tolerance=0)
    gt, proposals = random_segmented_proposals(5)
    gt_path, path = _write(tmp_path, gt, proposals, "json")
    store = evalengine.ingest_proposals(gt_path, path, tmp_path / "store")
    ev = store.evaluate_proposals(protocol=ProposalProtocol(budgets=BUDGETS, iou_type="segm"))
    assert ev.gt_matches().collect().get_column("best_fb").null_count() == ev.gt_matches().collect().height
    with pytest.raises(ProtocolError, match="without F̃b"):
        ev.achievable_quality(measure="boundary_f")


def _measures(expected: dict, budget: int) -> dict:
    values = np.array([v[0] for (_, _, b), v in expected.items() if b == budget])
    return {"mean": float(np.mean(values)), "median": float(np.median(values)),
            **{t: float(np.mean(values > t)) for t in THRESHOLDS}}


def test_sql_views_equal_the_api(tmp_path):
    gt, proposals = random_segmented_proposals(2033)
    gt_path, path = _write(tmp_path, gt, proposals, "json")
    store = evalengine.ingest_proposals(gt_path, path, tmp_path / "store", n_shards=2)
    protocol = ProposalProtocol(budgets=BUDGETS, iou_type="segm", boundary_f=True)
    ev = store.evaluate_proposals(protocol=protocol)
    sql = store.sql(f"SELECT * FROM achievable_quality WHERE protocol = '{protocol.match_key()}' ORDER BY budget")
    api = ev.achievable_quality(THRESHOLDS, measure="boundary_f").sort("budget")
    for ours, theirs in (("mean_quality", "mean_fb"), ("median_quality", "median_fb"), ("recall@0.5", "fb_recall_50"),
                         ("recall@0.7", "fb_recall_70"), ("recall@0.85", "fb_recall_85")):
        np.testing.assert_allclose(sql.get_column(theirs).to_numpy().astype(float),
                                   api.get_column(ours).to_numpy().astype(float), rtol=0, atol=1e-12)
    expected = fb_reference(gt, proposals, BUDGETS)
    assert sql.get_column("mean_fb").to_list()[-1] == pytest.approx(_measures(expected, BUDGETS[-1])["mean"], abs=1e-12)
    best = store.sql(f"SELECT image_id, gt_id, budget, best_fb, best_fb_rank FROM object_best "
                     f"WHERE protocol = '{protocol.match_key()}'")
    for image_id, gt_id, budget, value, rank in best.iter_rows():
        assert (value, rank) == pytest.approx(expected[(image_id, gt_id, budget)], abs=1e-12)


def test_cli_quality_measure_boundary_f(tmp_path):
    gt, proposals = random_segmented_proposals(2033)
    gt_path, path = _write(tmp_path, gt, proposals, "json")
    expected = fb_reference(gt, proposals, BUDGETS)
    argv = ["proposals", "--gt", gt_path, "--proposals", path, "--iou-type", "segm", "--budgets", *BUDGETS,
            "--quality-measure", "jaccard", "boundary_f", "--quiet"]
    payload = json.loads(_run(*argv, "--json").stdout)
    quality = payload["achievable_boundary_f"]
    assert quality["measure"] == "boundary_f" and payload["achievable"]["measure"] == "jaccard"
    for k, budget in enumerate(BUDGETS):
        want = _measures(expected, budget)
        assert quality["mean"][k] == pytest.approx(want["mean"], abs=1e-12)
        assert quality["median"][k] == pytest.approx(want["median"], abs=1e-12)
        for t in THRESHOLDS:
            assert quality["recall"][str(t)][k] == pytest.approx(want[t], abs=1e-12)
    text = _run(*argv).stdout
    assert "achievable quality (Pont-Tuset & Marques: best F̃b per object, recall at F̃b > t)" in text
    boxes = _run("proposals", "--gt", gt_path, "--proposals", path, "--quality-measure", "boundary_f")
    assert boxes.returncode == 2 and boxes.stderr.splitlines() == [
        "evalengine: error: --quality-measure boundary_f: F̃b compares mask boundaries; give --iou-type segm"]
    bad = _run(*argv, "--fb-tolerance", "-1")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr and "fb_tolerance" in bad.stderr


def test_sql_reads_a_table_of_the_earlier_version(tmp_path):
    """A Hosang table written before ``best_fb`` (version 1) beside a new one: the views read both, F̃b null."""
    gt, proposals = random_segmented_proposals(2033)
    gt_path, path = _write(tmp_path, gt, proposals, "json")
    store = evalengine.ingest_proposals(gt_path, path, tmp_path / "store")
    old, new = (ProposalProtocol(budgets=b, iou_type="segm", boundary_f=f) for b, f in (((1, 2), False), (BUDGETS, True)))
    for protocol in (old, new):
        store.evaluate_proposals(protocol=protocol).gt_matches().collect()
    files = list((tmp_path / "store").rglob(f"protocol={old.match_key()}/**/gt/**/*.parquet"))
    assert files
    for file in files:
        pl.read_parquet(file).drop("best_fb", "best_fb_rank").write_parquet(file)
    rows = store.sql("SELECT protocol, count(*) AS n, count(best_fb) AS with_fb FROM object_best GROUP BY protocol "
                     "ORDER BY n")
    assert rows.get_column("protocol").to_list() == [old.match_key(), new.match_key()]
    assert rows.get_column("with_fb").to_list() == [0, rows.item(1, "n")]
