"""Borji & Iranmanesh's diagnosis on constructed cases (spec §3.4.3–§3.4.6, §7 T7): the §3.4.6 A/B example where
removing duplicates lowers AP@0.75, the cases where the monotonicity T7 asks for does not hold (the notebook's Type I
quirk; per size, pycocotools' out-of-range rule; an empty target box), crowd regions, the notebook's ground-truth-major
duplicates cell against COCO's matching (and against the reference on random data), size attribution, identical
results whatever the shard count or scheduler, and located errors."""

import numpy as np
import polars as pl
import pytest

from evalengine import api
from evalengine.errors import ProtocolError, StoreError
from tests.generators import random_coco
from tests.helpers import coco_dt, coco_gt, write_inputs
from tests.metrics.test_borji_differential import compare

R = 101  # pycocotools' recall thresholds


def _diagnose(tmp_path, gt, dt, **options):
    tmp_path.mkdir(parents=True, exist_ok=True)
    diagnosis = api.borji(write_inputs(tmp_path, gt, dt), **options)
    compare(diagnosis, gt, dt, diagnosis.protocol.variant, diagnosis.protocol.duplicates)
    return diagnosis


def _ap(diagnosis, metric: str) -> dict:
    summary = diagnosis.summary().filter(pl.col("metric") == metric)
    return dict(summary.select("stage", "value").iter_rows())


def _labels(diagnosis) -> dict:
    return dict(diagnosis.detections().select("det_id", "label").collect().iter_rows())


def test_removing_duplicates_lowers_ap75(tmp_path):
    """§3.4.6: A (score 0.9, IoU 0.6) is matched at 0.5, B (0.8, IoU 0.8) is its duplicate; at 0.75 B was the true
    positive, so S3 drops AP@0.75 from 0.5 to 0, while AP50 stays 1."""
    gt = coco_gt([[0, 0, 100, 100]])
    dt = coco_dt([[0, 0, 60, 100], [0, 0, 80, 100]], [0.9, 0.8])
    diagnosis = _diagnose(tmp_path, gt, dt)
    assert _labels(diagnosis) == {1: "tp", 2: "dup"}
    ap75, ap50, ap = _ap(diagnosis, "AP75"), _ap(diagnosis, "AP50"), _ap(diagnosis, "AP")
    assert ap75["S2_loc"] == pytest.approx(0.5, abs=1e-12) and ap75["S3_dup"] == 0.0
    assert ap50["S2_loc"] == pytest.approx(1.0, abs=1e-12) and ap50["S3_dup"] == pytest.approx(1.0, abs=1e-12)
    # thresholds .50–.60: A is the true positive; .65–.80: B, second; .85–.95: none
    assert ap["S2_loc"] == pytest.approx((3 * 1.0 + 4 * 0.5) / 10, abs=1e-12)
    assert ap["S3_dup"] == pytest.approx(3 / 10, abs=1e-12)
    assert ap["S4_miss"] == pytest.approx(1.0, abs=1e-12) and ap["S3b_snap_only"] == pytest.approx(1.0, abs=1e-12)


def test_notebook_type_one_quirk_removes_a_true_positive(tmp_path):
    """borji_ref: A (0.9, IoU 0.2 with G1) claims G1; B (0.8, IoU 0.82 with G1) touches the unclaimed G2 at IoU
    0.026 <= 0.1, so the notebook drops it as Type I although it is pycocotools' true positive: S1 < S0. The paper's
    rule keeps it (IoU_max 0.82) and finds it a duplicate of the snapped A."""
    gt = coco_gt([[0, 0, 100, 100], [105, 0, 100, 100]])
    dt = coco_dt([[0, 0, 20, 100], [10, 0, 100, 100]], [0.9, 0.8])
    notebook = _diagnose(tmp_path / "ref", gt, dt)
    paper = _diagnose(tmp_path / "paper", gt, dt, variant="paper")
    assert _labels(notebook) == {1: "loc", 2: "cls_bg"} and _labels(paper) == {1: "loc", 2: "dup"}
    half = 51 / R / 2  # recall 0.5 (of 2 targets) reached at precision 1/2
    assert _ap(notebook, "AP50")["S0"] == pytest.approx(half, abs=1e-12)
    assert _ap(notebook, "AP50")["S1_cls"] == 0.0
    assert _ap(paper, "AP50")["S1_cls"] == pytest.approx(half, abs=1e-12)
    assert _ap(paper, "AP50")["S2_loc"] == pytest.approx(51 / R, abs=1e-12)


def test_snapping_can_lower_ap_per_size(tmp_path):
    """T1, T2 small (20×20) and exactly detected at 0.9 and 0.7; B (0.8) is a 56×56 box around T1 (IoU 0.128: loc).
    At S1, pycocotools ignores B in 'small' (unmatched, its own area out of range); snapped onto T1 (taken) it is a
    small false positive between the two true positives: APs falls, AP ('all') does not."""
    gt = coco_gt([[0, 0, 20, 20], [100, 0, 20, 20]])
    dt = coco_dt([[0, 0, 20, 20], [0, 0, 56, 56], [100, 0, 20, 20]], [0.9, 0.8, 0.7])
    diagnosis = _diagnose(tmp_path, gt, dt, variant="paper")
    assert _labels(diagnosis) == {1: "tp", 2: "loc", 3: "tp"}
    aps, ap = _ap(diagnosis, "APs"), _ap(diagnosis, "AP")
    assert aps["S1_cls"] == pytest.approx(1.0, abs=1e-12)
    assert aps["S2_loc"] == pytest.approx((51 + 50 * 2 / 3) / R, abs=1e-12)
    assert ap["S1_cls"] == ap["S2_loc"] == pytest.approx((51 + 50 * 2 / 3) / R, abs=1e-12)


def test_an_empty_target_box_is_never_matched(tmp_path):
    """A target of width 0 has IoU 0 with every box (pycocotools), its own included: it stays a miss and the box S4
    adds for it is a false positive, so its class's S4 AP is 0, not 1; the other class is perfect."""
    gt = coco_gt([[10, 10, 0, 5], [0, 0, 50, 50]], category_id=[1, 2])
    dt = coco_dt([[10, 10, 0, 5], [0, 0, 40, 50]], [0.9, 0.8], category_ids=[1, 2])
    diagnosis = _diagnose(tmp_path, gt, dt)
    assert dict(diagnosis.ground_truths().select("gt_id", "label").collect().iter_rows()) == {1: "miss", 2: "matched"}
    s4 = diagnosis.ap_table().filter((pl.col("stage") == "S4_miss") & (pl.col("area_range") == "all")
                                     & (pl.col("max_dets") == 100))
    assert set(s4.filter(pl.col("category_id") == 1).get_column("ap")) == {0.0}
    assert s4.filter(pl.col("category_id") == 2).get_column("ap").to_list() == pytest.approx([1.0] * 10, abs=1e-12)


def test_crowd_regions(tmp_path):
    """A crowd region is no target. On it (crowd IoU >= 0.5): a detection a target takes is tp (regular ground truth
    first, as pycocotools), one whose target is taken or that overlaps none is ignored (no error; it stays until S4).
    Off it the same detections are a duplicate and a Type I error."""
    gt = coco_gt([[0, 0, 200, 200], [0, 0, 50, 50], [400, 0, 50, 50]], iscrowd=[1, 0, 0])
    dt = coco_dt([[0, 0, 50, 50], [0, 0, 48, 50], [100, 100, 50, 50], [300, 300, 50, 50], [400, 0, 50, 50],
                  [401, 0, 50, 50]], [0.9, 0.8, 0.7, 0.6, 0.95, 0.4])
    diagnosis = _diagnose(tmp_path, gt, dt)
    assert _labels(diagnosis) == {1: "tp", 2: "ignored", 3: "ignored", 4: "cls_bg", 5: "tp", 6: "dup"}
    rows = diagnosis.detections().collect()
    assert rows.filter(pl.col("label") == "ignored").get_column("target_gt_id").to_list() == [1, 1]
    assert dict(diagnosis.ground_truths().select("gt_id", "label").collect().iter_rows()) == {
        1: "ignored", 2: "matched", 3: "matched"}
    stage_dt, _ = diagnosis.stage_matches()
    kept = stage_dt.group_by("stage").agg(pl.col("det_id").sort()).collect()
    assert dict(kept.iter_rows()) == {0: [1, 2, 3, 4, 5, 6], 1: [1, 2, 3, 5, 6], 2: [1, 2, 3, 5, 6], 3: [1, 2, 3, 5],
                                      4: [1, 5], 5: [1, 2, 3, 5]}


def test_gt_major_duplicates_differ_from_coco_on_an_iou_tie(tmp_path):
    """A (0.9) overlaps G1 and G2 at exactly IoU 0.6; B (0.8) is G1. COCO's matching gives a tie to the later target
    (A takes G2, B G1); the notebook's cell scans G1 first and A takes it (its own IoU is not beaten), so B is a
    duplicate and G2 a miss. (The paper's variant: the notebook's claims would make B a localisation error of G2.)"""
    gt = coco_gt([[0, 0, 100, 100], [50, 0, 100, 100]])
    dt = coco_dt([[25, 0, 100, 100], [0, 0, 100, 100]], [0.9, 0.8])
    by_score = _diagnose(tmp_path / "coco", gt, dt, variant="paper")
    gt_major = _diagnose(tmp_path / "gt", gt, dt, variant="paper", duplicates="gt_major")
    assert _labels(by_score) == {1: "tp", 2: "tp"} and _labels(gt_major) == {1: "tp", 2: "dup"}
    matched = lambda d: dict(d.detections().select("det_id", "matched_gt_id").collect().iter_rows())  # noqa: E731
    assert matched(by_score) == {1: 2, 2: 1} and matched(gt_major) == {1: 1, 2: None}


@pytest.mark.parametrize("seed", range(40))
def test_gt_major_equals_the_reference(tmp_path, seed):
    gt, dt = random_coco(seed)
    _diagnose(tmp_path, gt, dt, variant=api.BORJI_VARIANTS[seed % 2], duplicates="gt_major", n_shards=1 + seed % 3)


@pytest.mark.parametrize("seed", range(15))
def test_gt_major_equals_coco_without_iou_ties(tmp_path, seed):
    """Ground-truth-major, a detection taken up in an earlier target's scan takes its best free target, and one passed
    over has no free target at >= 0.5 left: the assignment is COCO's up to how equal IoUs are broken. Boxes moved by
    random amounts below 1e-3 have no ties: the labels are the same."""
    gt, dt = random_coco(seed)
    rng = np.random.default_rng(seed)
    for row in gt["annotations"] + dt:
        row["bbox"] = [v + float(rng.uniform(0, 1e-3)) for v in row["bbox"]]
    store = api.ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store")
    by_score, gt_major = (api.borji(store, duplicates=d).detections().sort("det_id").collect()
                          for d in api.BORJI_DUPLICATES)
    assert by_score.drop("protocol").equals(gt_major.drop("protocol"))


def test_sizes_are_attributed_to_the_target_or_the_own_box(tmp_path):
    """loc, dup and miss count in their target's size; cls_bg in its own box's (spec §3.4.5); closed COCO ranges."""
    gt = coco_gt([[0, 0, 20, 20], [200, 0, 32, 32]])  # areas 400 (small) and 1024 (small and medium)
    dt = coco_dt([[0, 0, 56, 56], [500, 500, 100, 100]], [0.9, 0.8])  # a large loc on T1, a large cls_bg
    counts = _diagnose(tmp_path, gt, dt).error_counts()
    got = {(r["area_range"], r["error"]): r["count"] for r in counts.iter_rows(named=True) if r["count"]}
    assert got == {("all", "loc"): 1, ("all", "cls_bg"): 1, ("all", "miss"): 1, ("small", "loc"): 1,
                   ("small", "miss"): 1, ("medium", "miss"): 1, ("large", "cls_bg"): 1}
    small = counts.filter(pl.col("area_range") == "small")
    assert small.get_column("fraction").to_list() == [0.0, 0.5, 0.0, 0.5]


def _outputs(diagnosis):
    stage_dt, stage_gt = diagnosis.stage_matches()
    return (diagnosis.detections().sort("det_id").collect(), diagnosis.ground_truths().sort("gt_id").collect(),
            stage_dt.drop("shard").sort("stage", "det_id").collect(),
            stage_gt.drop("shard").sort("stage", "gt_id").collect(), diagnosis.summary())


@pytest.mark.parametrize("options", [{"n_shards": 3}, {"n_shards": 7}, {"n_shards": 2, "scheduler": "processes"},
                                     {"n_shards": 5, "scheduler": "sync"}])
def test_identical_whatever_the_shards_and_scheduler(tmp_path, options):
    gt, dt = random_coco(11)
    want = _outputs(api.borji(write_inputs(tmp_path, gt, dt), n_shards=1))
    got = _outputs(api.borji(write_inputs(tmp_path, gt, dt), **options))
    for a, b in zip(got, want):
        assert a.equals(b)


def test_located_errors(tmp_path):
    gt, dt = coco_gt([[0, 0, 10, 10]]), coco_dt([[0, 0, 10, 10]], [0.5])
    with pytest.raises(ProtocolError, match=r"variant must be one of \('borji_ref', 'paper'\), got 'notebook'"):
        api.BorjiProtocol(variant="notebook")
    with pytest.raises(ProtocolError, match="duplicates must be one of"):
        api.BorjiProtocol(duplicates="gt-major")
    with pytest.raises(ProtocolError, match="background_threshold 0.6 is above foreground_threshold 0.5"):
        api.BorjiProtocol(background_threshold=0.6)
    with pytest.raises(ProtocolError, match=r"foreground_threshold: 1.5 is not in \(0, 1\]"):
        api.BorjiProtocol(foreground_threshold=1.5)
    with pytest.raises(ProtocolError, match="per category"):
        api.BorjiProtocol(coco=api.CocoProtocol(use_cats=False))
    store = api.ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store")
    with pytest.raises(StoreError, match=r"no run 'other' \(runs: default\)"):
        api.borji(store, run="other")
    with pytest.raises(ProtocolError, match="stage must be one of"):
        api.borji(store).accumulate("S5")
