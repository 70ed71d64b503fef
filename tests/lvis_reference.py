"""lvis-api 0.5.3 (PyPI ``lvis``) as the reference of the LVIS protocol, and random federated datasets.

lvis-api's ``accumulate`` calls ``np.float``, which NumPy 2 removed: the harness lends NumPy that alias (the
builtin ``float``, what it was) while lvis-api runs, and takes it back after; lvis-api itself is not changed.
"""

import contextlib
import copy
import io
import logging

import numpy as np
from lvis import LVIS, LVISEval, LVISResults

from tests.generators import _box, _jitter, random_coco
from tests.shape_generators import random_masks

logging.getLogger("lvis").setLevel(logging.ERROR)


@contextlib.contextmanager
def _numpy_float():
    """``np.float`` = ``float`` for the duration (NumPy < 1.24 had it; lvis-api's accumulate uses it)."""
    lent = "float" not in np.__dict__
    if lent:
        np.float = float
    try:
        yield
    finally:
        if lent:
            del np.float


def lvis_api(gt: dict, dt: list, iou_type: str = "bbox") -> LVISEval:
    """``LVISEval(gt, dt, iou_type).run()`` on copies of ``gt`` and ``dt`` (its ``results`` and ``eval``)."""
    with _numpy_float(), contextlib.redirect_stdout(io.StringIO()):
        lvis_gt = LVIS.__new__(LVIS)
        lvis_gt.logger = logging.getLogger("lvis")
        lvis_gt.dataset = copy.deepcopy(gt)
        lvis_gt._create_index()
        ev = LVISEval(lvis_gt, LVISResults(lvis_gt, copy.deepcopy(dt)), iou_type)
        ev.run()
    return ev


def per_class(ev: LVISEval) -> dict:
    """AP per category id as our ``per_class`` defines it: the mean of the defined ``precision[:, :, k, 0]``."""
    out = {}
    for k, cat in enumerate(ev.params.cat_ids):
        p = ev.eval["precision"][:, :, k, 0]
        out[cat] = float(np.mean(p[p > -1])) if (p > -1).any() else -1.0
    return out


def printed(ev: LVISEval) -> str:
    """What ``print_results`` prints."""
    with contextlib.redirect_stdout(io.StringIO()) as out:
        ev.print_results()
    return out.getvalue().rstrip("\n")


def federate(gt: dict, dt: list, seed: int) -> tuple:
    """A COCO pair made federated (copies): every category gets a ``frequency`` (and rare ones with a single image),
    categories without ground truth are added; every image gets ``neg_category_ids`` (categories it lacks, and ids that
    are no category) and ``not_exhaustive_category_ids`` (mostly categories it has); detections on unknown categories
    and, often, an image with more than 300 detections (tied scores at the cut); sometimes an annotation id 0."""
    rng = np.random.default_rng(seed + 7919)
    gt, dt = copy.deepcopy(gt), copy.deepcopy(dt)
    extra = [max(c["id"] for c in gt["categories"]) + i for i in range(1, int(rng.integers(1, 4)))]
    gt["categories"] += [{"id": c, "name": f"c{c}"} for c in extra]
    cat_ids = [c["id"] for c in gt["categories"]]
    for cat in gt["categories"]:
        cat["frequency"] = str(rng.choice(["r", "c", "f"], p=[0.4, 0.35, 0.25]))
    present = {}
    for ann in gt["annotations"]:
        present.setdefault(ann["image_id"], set()).add(ann["category_id"])
    for image in gt["images"]:
        has = present.get(image["id"], set())
        lacks = [c for c in cat_ids if c not in has]
        image["neg_category_ids"] = [int(c) for c in lacks if rng.random() < 0.5] + (
            [int(max(cat_ids) + 50)] if rng.random() < 0.2 else [])
        image["not_exhaustive_category_ids"] = [int(c) for c in sorted(has) if rng.random() < 0.3] + (
            [int(rng.choice(lacks))] if lacks and rng.random() < 0.1 else [])
    images = [image["id"] for image in gt["images"]]
    for _ in range(int(rng.integers(0, 6))):  # detections of categories never seen on their image
        dt.append({"image_id": int(rng.choice(images)), "category_id": int(rng.choice(cat_ids)),
                   "bbox": _box(rng, 1), "score": round(float(rng.random()), 2)})
    if rng.random() < 0.4:  # more than 300 on one image, over its categories, with tied scores at the cut
        image = int(rng.choice(images))
        anns = [a for a in gt["annotations"] if a["image_id"] == image] or [None]
        for _ in range(int(rng.integers(280, 420))):
            ann = anns[int(rng.integers(len(anns)))]
            box = _box(rng, 1) if ann is None else _jitter(rng, ann["bbox"], 0.2, 1)
            cat = int(rng.choice(cat_ids)) if ann is None or rng.random() < 0.3 else ann["category_id"]
            dt.append({"image_id": image, "category_id": cat, "bbox": box, "score": round(float(rng.random()), 1)})
    if gt["annotations"] and rng.random() < 0.15:
        gt["annotations"][int(rng.integers(len(gt["annotations"])))]["id"] = 0
    dt = [dt[i] for i in rng.permutation(len(dt))]
    return gt, dt


def random_lvis(seed: int) -> tuple:
    """A federated (gt, results) pair of boxes (see :func:`federate`)."""
    return federate(*random_coco(seed), seed)


def random_lvis_masks(seed: int) -> tuple:
    """A federated (gt, results) pair of masks (results all with or all without boxes, as lvis-api reads them)."""
    gt, dt = random_masks(seed)
    gt, more = federate(gt, [], seed)
    with_box = "bbox" in dt[0]
    more = [d for d in more if d["bbox"][2] > 0 and d["bbox"][3] > 0] if with_box else []  # the box as polygon
    return gt, dt + more


def val100_results(gt: dict, seed: int) -> list:
    """Random results on an LVIS ground truth (``lvis_val_100``): per annotation 0–3 jittered boxes (its category, or
    one the image lists as negative, or any), false positives on negative and not-exhaustive categories and on
    categories the image says nothing of, zero-area boxes, rounded (tied) scores, and often an image with more than 300
    results."""
    rng = np.random.default_rng(seed)
    decimals = int(rng.choice([1, 2, 6]))
    images = {image["id"]: image for image in gt["images"]}
    cat_ids = [c["id"] for c in gt["categories"]]
    by_image = {}
    for ann in gt["annotations"]:
        by_image.setdefault(ann["image_id"], []).append(ann)

    def result(image_id, category, box):
        return {"image_id": image_id, "category_id": int(category), "bbox": box,
                "score": round(float(rng.random()), decimals)}

    def category(image, own):
        listed = image["neg_category_ids"] + image["not_exhaustive_category_ids"]
        kind = rng.random()
        return own if kind < 0.7 else int(rng.choice(listed)) if listed and kind < 0.9 else int(rng.choice(cat_ids))

    dt = []
    for ann in gt["annotations"]:
        for _ in range(int(rng.choice([0, 1, 1, 2, 3]))):
            scale = float(rng.choice([0.02, 0.1, 0.3]))
            dt.append(result(ann["image_id"], category(images[ann["image_id"]], ann["category_id"]),
                             _jitter(rng, ann["bbox"], scale, 2)))
    for image_id, image in images.items():
        for _ in range(int(rng.integers(0, 6))):
            own = by_image[image_id][0]["category_id"] if image_id in by_image else int(rng.choice(cat_ids))
            dt.append(result(image_id, category(image, own), _box(rng, 2)))
    if rng.random() < 0.6:
        image_id = int(rng.choice(list(by_image)))
        for _ in range(int(rng.integers(290, 450))):
            ann = by_image[image_id][int(rng.integers(len(by_image[image_id])))]
            dt.append(result(image_id, category(images[image_id], ann["category_id"]), _jitter(rng, ann["bbox"], 0.2, 2)))
    return [dt[i] for i in rng.permutation(len(dt))]


def write_val100_expected(gt_path, out_path, seeds, iou_type: str = "bbox") -> None:
    """lvis-api's results on ``val100_results(gt, seed)`` for each seed, as ``tests/data/lvis_val_100_expected.json``
    holds them: ``{"<iou_type>:<seed>": {"results": {key: value}, "per_class": {"<category_id>": ap}}}`` (per_class:
    the defined ones; every other category is -1). Adds to ``out_path`` if it exists."""
    import json
    from pathlib import Path

    gt = json.loads(Path(gt_path).read_text())
    out = json.loads(Path(out_path).read_text()) if Path(out_path).exists() else {}
    for seed in seeds:
        ev = lvis_api(gt, val100_results(gt, seed), iou_type)
        out[f"{iou_type}:{seed}"] = {"results": {k: float(v) for k, v in ev.results.items()},
                                     "per_class": {str(c): ap for c, ap in per_class(ev).items() if ap != -1}}
        Path(out_path).write_text(json.dumps(out, indent=0))


def with_box_polygons(dt: list) -> list:
    """Results given their box as a polygon mask, the one ``LVISResults`` makes for a result without a segmentation
    (evalengine refuses box-only results under segm, as for COCO, instead of making it)."""
    return [{**d, "segmentation": [[d["bbox"][0], d["bbox"][1], d["bbox"][0], d["bbox"][1] + d["bbox"][3],
                                    d["bbox"][0] + d["bbox"][2], d["bbox"][1] + d["bbox"][3],
                                    d["bbox"][0] + d["bbox"][2], d["bbox"][1]]]} for d in dt]
