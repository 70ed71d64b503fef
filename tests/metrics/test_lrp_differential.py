"""Differential LRP: the engine against the test reference (the official LRP codes' arithmetic on PyPI
pycocotools' own evalImgs, tests/metrics/lrp_reference.py) on seeded random COCO datasets, per (category, area
range) and in the summary, for every search, at two IoU thresholds, in stores of 1 and 3 shards: 1e-12, thresholds
exactly, nulls in the same places."""

import math

import numpy as np
import pytest

from evalengine.match.coco import COCO_IOU_THRESHOLDS, CocoProtocol
from tests.helpers import ours
from tests.metrics.lrp_reference import SEARCHES, dt_ious, cocoeval, lrp_reference, lrp_summary
from tests.shape_generators import random_masks

# the generator gives some datasets a ground truth of id 0 on purpose
pytestmark = pytest.mark.filterwarnings("ignore:.*annotation id 0 found")
N_DATASETS = 150
TAUS = {0.5: range(N_DATASETS), 0.75: range(0, N_DATASETS, 3)}
ENGINE_SEARCH = {"rank": {"search": "rank"}, "score": {"search": "score"},
                 "grid>=": {"search": "grid", "compare": ">="}, "grid>": {"search": "grid", "compare": ">"}}
VALUES = ("olrp", "loc", "fp", "fn")
SIDE_KINDS = ((32, 32), (96, 96), (16, 64), (31, 33), (95, 97), (8, 8), (120, 60), (48, 40))


def _gt_box(rng):
    """Integer boxes (exact IoU 0.5 / 0.75 partners are integer too), many on the area-range bounds 32², 96²."""
    w, h = SIDE_KINDS[rng.integers(len(SIDE_KINDS))] if rng.random() < 0.6 else rng.integers(2, 150, 2)
    return [int(rng.integers(0, 400)), int(rng.integers(0, 300)), int(w), int(h)]


def _partner(rng, box):
    """A detection for ``box``: exactly IoU 0.5 or 0.75 (integer halves and quarters of a side), a near copy, a
    loose box, or a box elsewhere."""
    x, y, w, h = box
    kind = rng.integers(0, 8)
    if kind == 0 and h % 2 == 0:
        return [x, y, w, h // 2]                      # IoU exactly 0.5
    if kind == 1:
        return [x, y, 2 * w, h]                       # IoU exactly 0.5, the partner twice as large
    if kind == 2 and h % 4 == 0:
        return [x, y, w, 3 * h // 4]                  # IoU exactly 0.75
    if kind == 3:
        return [x + 500, y + 400, w, h]               # no overlap: an FP
    scale = (0.03, 0.1, 0.25, 0.5)[kind % 4]
    dx, dy = rng.normal(0, scale * max(w, 1), 2)
    sw, sh = np.exp(rng.normal(0, scale, 2))
    return [round(float(v), 1) for v in (x + dx, y + dy, max(w * sw, 1.0), max(h * sh, 1.0))]


def random_lrp_coco(seed: int):
    """(gt dict, result list): score ties within and across images, crowd, GT id 0, empty images, images with only
    detections, classes without GT, with GT and no detection, with GT and no TP, > 100 detections in one (image,
    class), boxes on the area bounds, IoU exactly 0.5 / 0.75, annotated areas that differ from w·h (so a detection's
    partner can differ between area ranges)."""
    rng = np.random.default_rng(seed)
    cat_ids = sorted(rng.choice([0, 1, 2, 3, 5, 7], size=int(rng.integers(1, 6)), replace=False).tolist())
    image_ids = sorted(rng.choice(np.arange(0, 40), size=int(rng.integers(1, 9)), replace=False).tolist())
    roles = {c: rng.choice(["normal", "normal", "normal", "no_gt", "no_dt", "no_tp"]) for c in cat_ids}
    gt_cats = [c for c in cat_ids if roles[c] != "no_gt"] or cat_ids[:1]
    anns = []
    for image_id in image_ids:
        n = int(rng.choice([0, 0, 1, 2, 3, 5, 8]))
        cluster = _gt_box(rng)
        for _ in range(n):
            box = _gt_box(rng) if rng.random() < 0.6 else _partner(rng, cluster)
            ann = {"image_id": int(image_id), "category_id": int(rng.choice(gt_cats)), "bbox": box,
                   "iscrowd": int(rng.random() < 0.1)}
            r = rng.random()
            ann["area"] = float(box[2] * box[3]) if r < 0.75 else float(rng.choice([1024.0, 9216.0, 5000.0, 500.0]))
            anns.append(ann)
    ids = rng.choice(np.arange(1, 10**5), size=len(anns), replace=False)
    if len(anns) and rng.random() < 0.4:
        ids[rng.integers(len(anns))] = 0              # pycocotools counts a match to GT id 0 as unmatched
    anns = [dict(ann, id=int(i)) for ann, i in zip(anns, ids)]

    decimals = int(rng.choice([1, 2, 2, 6]))
    def score():
        return round(float(rng.random()), decimals)
    dets = []
    for ann in anns:
        if roles[ann["category_id"]] == "no_dt":
            continue
        for _ in range(int(rng.choice([0, 1, 1, 2, 3]))):
            box = _partner(rng, ann["bbox"])
            if roles[ann["category_id"]] == "no_tp":
                box = [box[0] + 700, box[1], box[2], box[3]]
            dets.append({"image_id": ann["image_id"], "category_id": ann["category_id"], "bbox": box,
                         "score": score()})
    det_cats = [c for c in cat_ids if roles[c] != "no_dt"] or cat_ids
    for _ in range(int(rng.integers(0, 10))):     # background, also on images without GT and classes without GT
        dets.append({"image_id": int(rng.choice(image_ids)), "category_id": int(rng.choice(det_cats)),
                     "bbox": _gt_box(rng), "score": score()})
    if rng.random() < 0.12:     # crowded (image, class) groups beyond the 100 cap; > 256 in a class: pairwise sums
        cat = int(rng.choice(det_cats))
        for image_id in rng.choice(image_ids, size=int(rng.integers(1, 4))):
            base = anns[rng.integers(len(anns))]["bbox"] if anns else _gt_box(rng)
            for _ in range(int(rng.integers(101, 130))):
                dets.append({"image_id": int(image_id), "category_id": cat, "bbox": _partner(rng, base),
                             "score": score()})
    if not dets:
        dets.append({"image_id": int(image_ids[0]), "category_id": int(det_cats[0]), "bbox": _gt_box(rng),
                     "score": 0.35})
    dets = [dets[i] for i in rng.permutation(len(dets))]
    gt = {"images": [{"id": int(i), "width": 640, "height": 480} for i in image_ids], "annotations": anns,
          "categories": [{"id": int(c), "name": f"class{c}"} for c in cat_ids]}
    return gt, dets


def _same(got, want, exact=False) -> bool:
    if want is None or (isinstance(want, float) and math.isnan(want)):
        return got is None or (isinstance(got, float) and math.isnan(got))
    if got is None:
        return False
    return got == want if exact else abs(got - want) <= 1e-12


def compare(result, reference: dict, categories, sizes=True) -> list:
    """The differences between an engine LRP result and the reference, as readable strings (empty: equal);
    ``sizes=False``: area range 'all' only."""
    if not sizes:
        reference = {key: row for key, row in reference.items() if key[1] == "all"}
    diffs = []
    rows = {(r["category_id"], r["area_range"]): r for r in result.table.iter_rows(named=True)}
    for key, want in reference.items():
        got = rows.get(key)
        if want is None:
            if got is not None and got["olrp"] is not None:
                diffs.append(f"{key}: official -1 (no evaluable GT), engine olrp {got['olrp']}")
            continue
        if got is None:
            diffs.append(f"{key}: missing from the engine's table")
            continue
        for name in VALUES + ("threshold",):
            if not _same(got[name], want[name], exact=name == "threshold"):
                diffs.append(f"{key} {name}: engine {got[name]!r}, reference {want[name]!r}")
        for name in ("n_gt", "n_tp", "n_fn") + (("n_fp",) if want["n_fp"] is not None else ()):
            if got[name] != want[name]:
                diffs.append(f"{key} {name}: engine {got[name]!r}, reference {want[name]!r}")
    extra = set(rows) - set(reference)
    if extra:
        diffs.append(f"rows the reference does not have: {sorted(extra)}")
    got = result.summary()
    want = lrp_summary({**{(c, a): None for c in categories for a in ("small", "medium", "large")}, **reference},
                       categories)
    for name in ("olrp", "olrp_loc", "olrp_fp", "olrp_fn") + (("olrp_small", "olrp_medium", "olrp_large") if sizes else ()):
        if not _same(got[name], want[name]):
            diffs.append(f"summary {name}: engine {got[name]!r}, reference {want[name]!r}")
    if sorted(got["per_class"]) != sorted(want["per_class"]):
        diffs.append(f"summary per_class keys: engine {sorted(got['per_class'])}, reference {sorted(want['per_class'])}")
    for c in set(got["per_class"]) & set(want["per_class"]):
        for name, value in want["per_class"][c].items():
            if not _same(got["per_class"][c][name], value, exact=name == "threshold"):
                diffs.append(f"summary per_class {c} {name}: engine {got['per_class'][c][name]!r}, reference {value!r}")
    return diffs


def test_generator_covers_the_cases():
    """The seeds used below do contain every case the differential test claims to cover."""
    seen = set()
    for seed in range(N_DATASETS):
        gt, dt = random_lrp_coco(seed)
        ev = cocoeval(gt, dt)
        table = lrp_reference(ev)
        anns, gt_cats = gt["annotations"], {a["category_id"] for a in gt["annotations"]}
        seen |= {"gt_id_0"} if any(a["id"] == 0 for a in anns) else set()
        seen |= {"crowd"} if any(a["iscrowd"] for a in anns) else set()
        seen |= {"class_without_gt"} if any(c["id"] not in gt_cats for c in gt["categories"]) else set()
        seen |= {"empty_image"} if any(not any(a["image_id"] == i["id"] for a in anns + dt) for i in gt["images"]) else set()
        seen |= {"only_detections"} if any(not any(a["image_id"] == i["id"] for a in anns) and any(
            d["image_id"] == i["id"] for d in dt) for i in gt["images"]) else set()
        per_group = {}
        for d in dt:
            per_group[d["image_id"], d["category_id"]] = per_group.get((d["image_id"], d["category_id"]), 0) + 1
        seen |= {"over_100"} if max(per_group.values()) > 100 else set()
        scores = [d["score"] for d in dt]
        seen |= {"ties"} if len(set(scores)) < len(scores) else set()
        seen |= {"area_bound"} if any(a["area"] in (1024.0, 9216.0) for a in anns) else set()
        rows = [r for r in table.values() if r is not None]
        seen |= {"no_tp"} if any(r["n_tp"] == 0 for r in rows) else set()
        by_score = lrp_reference(ev, "score")
        seen |= {"tie_split"} if any(r["threshold"] != by_score[k]["threshold"]
                                      for k, r in table.items() if r is not None and r["n_tp"]) else set()
        seen |= {"tp_iou_exactly_0.5"} if any(e is not None and np.any(dt_ious(ev, e) == 0.5)
                                              for e in ev.evalImgs) else set()
        n_img, n_area = len(ev.params.imgIds), len(ev.params.areaRng)
        for j, e in enumerate(ev.evalImgs):  # the same detection, another partner in another area range
            if e is not None:
                here, in_all = e["dtMatches"][0], ev.evalImgs[j - (j // n_img % n_area) * n_img]["dtMatches"][0]
                if np.any((here != in_all) & (here != 0) & (in_all != 0)):
                    seen.add("partner_differs_by_area")
    assert seen == {"gt_id_0", "crowd", "class_without_gt", "empty_image", "only_detections", "over_100", "ties",
                    "area_bound", "no_tp", "tie_split", "tp_iou_exactly_0.5", "partner_differs_by_area"}


@pytest.mark.parametrize("tau", list(TAUS))
def test_engine_equals_reference(tmp_path, tau):
    failures = []
    for seed in TAUS[tau]:
        gt, dt = random_lrp_coco(seed)
        ev = cocoeval(gt, dt, iou_thresholds=[tau])
        evaluation = ours(tmp_path, gt, dt, CocoProtocol(iou_thresholds=(tau,)), n_shards=1 + 2 * (seed % 3 == 1))
        for search in SEARCHES:
            diffs = compare(evaluation.lrp(**ENGINE_SEARCH[search]), lrp_reference(ev, search), ev.params.catIds)
            failures += [f"seed {seed} tau {tau} {search}: {d}" for d in diffs[:3]]
    assert not failures, f"{len(failures)} differences, first: " + "\n".join(failures[:20])


@pytest.mark.parametrize("tau", [0.75, COCO_IOU_THRESHOLDS[8]])
def test_other_threshold_of_the_default_table(tmp_path, tau):
    """LRP at another IoU threshold of the default 10-threshold match table (area range 'all') equals the official
    code run with ``iouThrs=[tau]`` (pycocotools matches each threshold on its own; τ index 8 is 0.8999999999999999)."""
    failures = []
    for seed in range(0, N_DATASETS, 8):
        gt, dt = random_lrp_coco(seed)
        ev = cocoeval(gt, dt, iou_thresholds=[tau])
        evaluation = ours(tmp_path, gt, dt)
        for search in SEARCHES:
            result = evaluation.lrp(iou_threshold=tau, **ENGINE_SEARCH[search])
            diffs = compare(result, lrp_reference(ev, search), ev.params.catIds, sizes=False)
            failures += [f"seed {seed} tau {tau} {search}: {d}" for d in diffs[:3]]
    assert not failures, f"{len(failures)} differences, first: " + "\n".join(failures[:20])


N_MASK_DATASETS = 60


@pytest.mark.parametrize("iou_type", ["segm"])
def test_masks_equal_reference(tmp_path, iou_type):
    """LRP of mask match tables equals the official code run with ``iouType='segm'`` (pycocotools' mask IoU and
    areas) on random mask datasets (tests/shape_generators.py: polygons, RLE, crowd, empty and border masks, areas
    at the range bounds, tied scores), every search, in stores of 1 and 3 shards."""
    failures = []
    for seed in range(N_MASK_DATASETS):
        gt, dt = random_masks(seed)
        ev = cocoeval(gt, dt, iou_type=iou_type)
        evaluation = ours(tmp_path, gt, dt, CocoProtocol(iou_type=iou_type), n_shards=1 + 2 * (seed % 3 == 1))
        for search in SEARCHES:
            diffs = compare(evaluation.lrp(**ENGINE_SEARCH[search]), lrp_reference(ev, search), ev.params.catIds)
            failures += [f"seed {seed} {search}: {d}" for d in diffs[:3]]
    assert not failures, f"{len(failures)} differences, first: " + "\n".join(failures[:20])
