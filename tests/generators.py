"""Random COCO datasets rich in the cases that break evaluators (seeded, for differential tests)."""

import numpy as np


def _box(rng, decimals):
    kind = rng.integers(0, 10)
    if kind == 0:
        w, h = 32.0, 32.0          # area exactly 32²: small and medium
    elif kind == 1:
        w, h = 96.0, 96.0          # area exactly 96²: medium and large
    elif kind == 2:
        w, h = 16.0, 64.0          # 1024 with another shape
    elif kind == 3:
        w, h = float(rng.choice([0.0, 5.0])), 0.0   # degenerate
    else:
        w, h = rng.uniform(1, 150, 2)
    x, y = rng.uniform(0, 300, 2)
    return [round(float(v), decimals) for v in (x, y, w, h)]


def _jitter(rng, box, scale, decimals):
    x, y, w, h = box
    dx, dy = rng.normal(0, scale * max(w, 1), 2)
    sw, sh = np.exp(rng.normal(0, scale, 2))
    return [round(float(v), decimals) for v in (x + dx, y + dy, max(w * sw, 0.0), max(h * sh, 0.0))]


def random_coco(seed: int):
    """A (gt dict, result list) pair: empty images, images without detections, categories without GT,
    tied and rounded scores, crowd, boundary areas, degenerate boxes and, sometimes, > 100 detections
    in one image-category."""
    rng = np.random.default_rng(seed)
    decimals = int(rng.integers(0, 3))
    cat_ids = sorted(rng.choice([0, 1, 2, 3, 5, 8], size=int(rng.integers(1, 5)), replace=False).tolist())
    image_ids = sorted(rng.choice(np.arange(0, 60), size=int(rng.integers(1, 7)), replace=False).tolist())
    gt_cats = cat_ids[:-1] if len(cat_ids) > 1 and rng.random() < 0.3 else cat_ids  # maybe a category with no GT
    anns = []
    for image_id in image_ids:
        for _ in range(int(rng.choice([0, 1, 2, 4, 7]))):
            box = _box(rng, decimals)
            ann = {"image_id": image_id, "category_id": int(rng.choice(gt_cats)), "bbox": box,
                   "iscrowd": int(rng.random() < 0.12)}
            r = rng.random()
            ann["area"] = box[2] * box[3] if r < 0.7 else float(rng.choice([1024.0, 9216.0, rng.uniform(0, 20000)]))
            if rng.random() < 0.2:
                ann["ignore"] = int(rng.random() < 0.5)
            anns.append(ann)
    ids = rng.choice(np.arange(1, 10**6), size=len(anns), replace=False)
    order = rng.permutation(len(anns))
    anns = [dict(anns[i], id=int(ids[j])) for j, i in enumerate(order)]

    dets = []
    score_decimals = int(rng.choice([1, 2, 6]))
    def score():
        return round(float(rng.random()), score_decimals)
    for ann in anns:
        for _ in range(int(rng.choice([0, 1, 1, 2, 3]))):
            cat = ann["category_id"] if rng.random() < 0.85 else int(rng.choice(cat_ids))
            dets.append({"image_id": ann["image_id"], "category_id": cat,
                         "bbox": _jitter(rng, ann["bbox"], float(rng.choice([0.02, 0.1, 0.3])), decimals),
                         "score": score()})
    for _ in range(int(rng.integers(0, 8))):
        dets.append({"image_id": int(rng.choice(image_ids)), "category_id": int(rng.choice(cat_ids)),
                     "bbox": _box(rng, decimals), "score": score()})
    if rng.random() < 0.15:  # one crowded image-category beyond the 100 cap
        image_id, cat = int(rng.choice(image_ids)), int(rng.choice(cat_ids))
        base = _box(rng, decimals)
        for _ in range(int(rng.integers(101, 140))):
            dets.append({"image_id": image_id, "category_id": cat, "bbox": _jitter(rng, base, 0.2, decimals),
                         "score": score()})
    if not dets:
        dets.append({"image_id": image_ids[0], "category_id": cat_ids[0], "bbox": _box(rng, decimals), "score": 0.5})
    dets = [dets[i] for i in rng.permutation(len(dets))]
    gt = {"images": [{"id": i, "width": 640, "height": 480} for i in image_ids], "annotations": anns,
          "categories": [{"id": c, "name": f"class{c}"} for c in cat_ids]}
    return gt, dets
