"""TIDE's COCO-consistent mode against pycocotools: its AP50 is pycocotools' (× 100), and each fix equals
pycocotools' AP50 of the inputs edited as the fix says (Bkg, Dupe, Both: the detections removed; Loc: snapped to its
target, or removed; Cls: relabelled and snapped to its target, or removed; Miss: the missed annotations removed;
FalseNeg: every unmatched annotation removed). The detections are cut to pycocotools' 100 per image and category
first, so that removing some cannot bring others under the cap."""

import numpy as np
import polars as pl
import pytest

from evalengine import api
from tests.generators import random_coco
from tests.helpers import write_inputs
from tests.reference import pycocotools_eval


def _capped(dt: list) -> list:
    """pycocotools' per-(image, category) cap of 100, by score (stable), in file order."""
    order = sorted(range(len(dt)), key=lambda k: (dt[k]["image_id"], dt[k]["category_id"], -dt[k]["score"], k))
    rank, kept, last = 0, set(), None
    for k in order:
        key = (dt[k]["image_id"], dt[k]["category_id"])
        rank = rank + 1 if key == last else 0
        last = key
        if rank < 100:
            kept.add(k)
    return [d for k, d in enumerate(dt) if k in kept]


def _ap50(gt: dict, dt: list) -> float:
    if not dt:
        return 0.0
    stat = pycocotools_eval(gt, dt).stats[1]
    return 0.0 if stat == -1 else stat * 100


def _fixed_inputs(gt: dict, dt: list, rows: pl.DataFrame, gts: pl.DataFrame, error: str):
    boxes = {a["id"]: a for a in gt["annotations"]}
    code = {"Cls": 1, "Loc": 2, "Both": 3, "Dupe": 4, "Bkg": 5}.get(error)
    by_det = {r["det_id"]: r for r in rows.iter_rows(named=True)}
    if code is None:
        drop = set(gts.filter(pl.col("missed") if error == "Miss" else ~pl.col("used")).get_column("gt_id"))
        return dict(gt, annotations=[a for a in gt["annotations"] if a["id"] not in drop]), dt
    fixed = []
    for det_id, det in enumerate(dt, start=1):
        row = by_det.get(det_id)
        if row is None or row["error"] != code:
            fixed.append(det)
        elif row["fix_category_id"] is not None:
            target = boxes[row["target_gt_id"]]
            fixed.append(dict(det, bbox=target["bbox"], category_id=row["fix_category_id"]))
    return gt, fixed


@pytest.mark.parametrize("seed", range(40))
def test_fixes_equal_pycocotools_on_edited_inputs(tmp_path, seed):
    gt, dt = random_coco(seed)
    dt = _capped(dt)
    if not any(not a.get("iscrowd") for a in gt["annotations"]):
        return
    diagnosis = api.tide(write_inputs(tmp_path, gt, dt), mode="coco", n_shards=1 + seed % 3)
    result, rows = diagnosis.result, diagnosis.dt_matches().collect()
    gts = diagnosis.gt_matches().collect()
    base = _ap50(gt, dt)
    assert result.ap50 == pytest.approx(base, abs=1e-9), f"seed {seed}"
    for error in ("Cls", "Loc", "Both", "Dupe", "Bkg", "Miss"):
        want = max(_ap50(*_fixed_inputs(gt, dt, rows, gts, error)) - base, 0.0)
        assert result.main[error] == pytest.approx(want, abs=1e-9), f"seed {seed} {error}"
    want = _ap50(*_fixed_inputs(gt, dt, rows, gts, "FalseNeg")) - base
    assert result.special["FalseNeg"] == pytest.approx(want, abs=1e-9), f"seed {seed} FalseNeg"


def test_false_pos_is_perfect_precision_up_to_the_recall_reached():
    """FalsePos: every true positive first, so a class's AP is the share of recall thresholds at or below its
    final recall (pycocotools' linspace thresholds; precision tp / (tp + eps) is 1 to 1e-15), 0 without one."""
    from tests.conftest import PACKAGE_DATA
    gt, dt = PACKAGE_DATA / "instances_val2014_100.json", PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"
    diagnosis = api.tide((gt, dt), mode="coco")
    rows, gts = diagnosis.dt_matches().collect(), diagnosis.gt_matches().collect()
    recall = (gts.group_by("category_id").agg(pl.col("used").mean().alias("recall")).get_column("recall").to_numpy())
    thresholds = np.array(api.CocoProtocol().recall_thresholds)
    want = np.mean([(thresholds <= r).mean() * 100 if r else 0.0 for r in recall]) - diagnosis.result.ap50
    assert diagnosis.result.special["FalsePos"] == pytest.approx(want, abs=1e-9)
    assert rows.filter(pl.col("outcome") == 1).height == gts.get_column("used").sum()
