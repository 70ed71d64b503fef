"""Random COCO mask and keypoint datasets rich in the cases that break evaluators (seeded, for differential tests),
in the forms pycocotools reads."""

import numpy as np
from pycocotools import mask as mask_utils


def _rle(bitmap: np.ndarray, form: str) -> dict:
    rle = mask_utils.encode(np.asfortranarray(bitmap.astype(np.uint8)))
    if form == "compressed":
        return {"size": rle["size"], "counts": rle["counts"].decode()}
    counts, bits = [], bitmap.T.reshape(-1)  # column-major runs, a run of 0s first
    value, run = 0, 0
    for bit in bits:
        if bit == value:
            run += 1
        else:
            counts.append(run)
            value, run = bit, 1
    counts.append(run)
    return {"size": rle["size"], "counts": counts}


def _bitmap(rng, h: int, w: int) -> np.ndarray:
    """A rectangle (of 32² or 96² pixels now and then), a blob, one pixel, nothing, or a band on the border."""
    mask = np.zeros((h, w), np.uint8)
    kind = rng.integers(0, 10)
    if kind == 0 and h >= 32 and w >= 32:
        side = 96 if h >= 96 and w >= 96 and rng.random() < 0.5 else 32
        y, x = rng.integers(0, h - side + 1), rng.integers(0, w - side + 1)
        mask[y:y + side, x:x + side] = 1
    elif kind == 1:
        mask[rng.integers(0, h), rng.integers(0, w)] = 1
    elif kind == 2:
        pass
    elif kind == 3:
        mask[:, : rng.integers(1, w + 1)] = 1  # touching three borders
    else:
        yy, xx = np.mgrid[:h, :w]
        cy, cx = rng.uniform(0, h), rng.uniform(0, w)
        ry, rx = rng.uniform(0.5, h / 1.5 + 1), rng.uniform(0.5, w / 1.5 + 1)
        mask[((yy - cy) / ry) ** 2 + ((xx - cx) / rx) ** 2 <= 1] = 1
    return mask


def _polygons(rng, h: int, w: int) -> list:
    """1 to 3 parts, some running off the image."""
    parts = []
    for _ in range(int(rng.integers(1, 4))):
        n = int(rng.integers(3, 9))
        cx, cy, r = rng.uniform(-5, w + 5), rng.uniform(-5, h + 5), rng.uniform(0.3, max(h, w) / 2)
        angles = np.sort(rng.uniform(0, 2 * np.pi, n))
        xy = np.stack([cx + r * np.cos(angles), cy + r * np.sin(angles)], 1)
        parts.append([round(float(v), 2) for v in xy.reshape(-1)])
    return parts


def _moved(rng, bitmap: np.ndarray) -> np.ndarray:
    """A detection of ``bitmap``: shifted by a few pixels (cut at the border), sometimes grown or thinned."""
    h, w = bitmap.shape
    out = np.zeros_like(bitmap)
    dy, dx = (int(v) for v in rng.integers(-3, 4, 2))
    out[max(dy, 0):h + min(dy, 0), max(dx, 0):w + min(dx, 0)] = bitmap[max(-dy, 0):h - max(dy, 0),
                                                                      max(-dx, 0):w - max(dx, 0)]
    if rng.random() < 0.3:
        out[:, 1:] |= out[:, :-1]
    return out


def random_masks(seed: int):
    """A (gt dict, result list) pair of masks: polygons of several parts, compressed and uncompressed RLE, crowd
    regions, empty and 1-pixel masks, masks on the border, areas of exactly 32² and 96² (mask and ``area`` field), tied
    scores; results either all with a box (then any form of mask, area = box w·h) or none (compressed RLE, area and box
    from the mask), as ``loadRes`` reads them."""
    rng = np.random.default_rng(seed)
    cat_ids = sorted(rng.choice([1, 2, 4], size=int(rng.integers(1, 4)), replace=False).tolist())
    images = [{"id": i + 1, "height": int(rng.integers(5, 130)), "width": int(rng.integers(5, 130))}
              for i in range(int(rng.integers(1, 4)))]
    with_box, score_decimals = rng.random() < 0.5, int(rng.choice([1, 2, 6]))
    annotations, results = [], []
    for image in images:
        h, w = image["height"], image["width"]
        for _ in range(int(rng.choice([0, 1, 2, 3, 5]))):
            bitmap = _bitmap(rng, h, w)
            form = str(rng.choice(["polygon", "compressed", "uncompressed"]))
            segmentation = _polygons(rng, h, w) if form == "polygon" else _rle(bitmap, form)
            if form == "polygon":
                bitmap = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(segmentation, h, w)))
            area = float(bitmap.sum()) if rng.random() < 0.7 else float(rng.choice([1024.0, 9216.0, rng.uniform(0, 4e3)]))
            category = int(rng.choice(cat_ids))
            annotations.append({"id": len(annotations) + 1, "image_id": image["id"], "category_id": category,
                                "bbox": [float(v) for v in mask_utils.toBbox(mask_utils.encode(np.asfortranarray(bitmap)))],
                                "area": area, "iscrowd": int(rng.random() < 0.12), "segmentation": segmentation})
            for _ in range(int(rng.choice([0, 1, 1, 2, 3]))):
                cat = category if rng.random() < 0.85 else int(rng.choice(cat_ids))
                results.append(_result(rng, image, cat, _moved(rng, bitmap), with_box, score_decimals))
        for _ in range(int(rng.integers(0, 4))):  # false positives
            results.append(_result(rng, image, int(rng.choice(cat_ids)), _bitmap(rng, h, w), with_box, score_decimals))
    if not results:
        results.append(_result(rng, images[0], cat_ids[0], _bitmap(rng, images[0]["height"], images[0]["width"]),
                               with_box, score_decimals))
    results = [results[i] for i in rng.permutation(len(results))]
    gt = {"images": images, "annotations": annotations, "categories": [{"id": c, "name": f"c{c}"} for c in cat_ids]}
    return gt, results


def _result(rng, image: dict, category: int, bitmap: np.ndarray, with_box: bool, score_decimals: int) -> dict:
    result = {"image_id": image["id"], "category_id": category, "score": round(float(rng.random()), score_decimals)}
    if not with_box:
        result["segmentation"] = _rle(bitmap, "compressed")
        return result
    box = [float(v) for v in mask_utils.toBbox(mask_utils.encode(np.asfortranarray(bitmap)))]
    result["bbox"] = [0.0, 0.0, 32.0, 32.0] if rng.random() < 0.1 else box  # area (w·h) exactly 32²
    form = str(rng.choice(["polygon", "compressed", "uncompressed"]))
    result["segmentation"] = (_polygons(rng, image["height"], image["width"]) if form == "polygon"
                              else _rle(bitmap, form))
    return result


def random_keypoints(seed: int, k: int = 17):
    """A (gt dict, result list) pair of ``k`` keypoints per object: invisible keypoints, ground truths with none
    visible (measured to their box's region), ``num_keypoints`` 0 (ignored, sometimes with visible keypoints) or not
    matching the visible count, an empty keypoint list, zero-area and crowd ground truths, areas of exactly 32² and
    96², tied scores, integer and fractional coordinates; results either all with a box (area = w·h) or none (area
    and box from the keypoints' extent)."""
    rng = np.random.default_rng(seed)
    cat_ids = sorted(rng.choice([1, 2, 3], size=int(rng.integers(1, 3)), replace=False).tolist())
    images = [{"id": i + 1, "height": 480, "width": 640} for i in range(int(rng.integers(1, 5)))]
    with_box, score_decimals, integral = rng.random() < 0.3, int(rng.choice([1, 2, 6])), rng.random() < 0.3
    annotations, results = [], []

    def coords(values):
        return [round(float(v)) if integral else round(float(v), 2) for v in values]

    for image in images:
        for _ in range(int(rng.choice([0, 1, 2, 3, 5]))):
            x, y = rng.uniform(0, 500, 2)
            w, h = (0.0, 0.0) if rng.random() < 0.05 else tuple(float(v) for v in rng.uniform(2, 150, 2))
            v = rng.choice([0, 1, 2], k, p=[0.3, 0.3, 0.4]) if rng.random() < 0.85 else np.zeros(k, int)
            xs, ys = rng.uniform(x, x + w + 1, k), rng.uniform(y, y + h + 1, k)
            keypoints = [c for triple in zip(coords(xs), coords(ys), v.tolist()) for c in triple]
            num = int((v > 0).sum())
            kind = rng.random()
            if kind < 0.08:
                num = 0
            elif kind < 0.12:
                num = int(rng.integers(1, k + 1))
            elif kind < 0.14 and not num:
                keypoints = []
            area = float(rng.choice([w * h, w * h * 0.6, 0.0, 1024.0, 9216.0], p=[0.4, 0.35, 0.1, 0.075, 0.075]))
            category = int(rng.choice(cat_ids))
            annotations.append({"id": len(annotations) + 1, "image_id": image["id"], "category_id": category,
                                "bbox": [round(float(x), 2), round(float(y), 2), round(w, 2), round(h, 2)],
                                "area": area, "iscrowd": int(rng.random() < 0.08), "keypoints": keypoints,
                                "num_keypoints": num})
            for _ in range(int(rng.choice([0, 1, 1, 2, 3]))):
                scale = float(rng.choice([0.5, 2.0, 8.0, 30.0]))
                base_x, base_y = (xs, ys) if keypoints else (rng.uniform(x, x + w + 1, k), rng.uniform(y, y + h + 1, k))
                cat = category if rng.random() < 0.85 else int(rng.choice(cat_ids))
                results.append(_keypoint_result(rng, image, cat, base_x + rng.normal(0, scale, k),
                                                base_y + rng.normal(0, scale, k), coords, with_box, score_decimals))
        for _ in range(int(rng.integers(0, 3))):  # false positives
            results.append(_keypoint_result(rng, image, int(rng.choice(cat_ids)), rng.uniform(0, 640, k),
                                            rng.uniform(0, 480, k), coords, with_box, score_decimals))
    if not results:
        results.append(_keypoint_result(rng, images[0], cat_ids[0], rng.uniform(0, 640, k), rng.uniform(0, 480, k),
                                        coords, with_box, score_decimals))
    results = [results[i] for i in rng.permutation(len(results))]
    gt = {"images": images, "annotations": annotations, "categories": [{"id": c, "name": f"c{c}"} for c in cat_ids]}
    return gt, results


def _keypoint_result(rng, image, category, xs, ys, coords, with_box: bool, score_decimals: int) -> dict:
    v = rng.choice([0, 1, 2], len(xs)).tolist()
    result = {"image_id": image["id"], "category_id": category, "score": round(float(rng.random()), score_decimals),
              "keypoints": [c for triple in zip(coords(xs), coords(ys), v) for c in triple]}
    if with_box:
        result["bbox"] = [round(float(v), 2) for v in (*rng.uniform(0, 500, 2), *rng.uniform(1, 150, 2))]
    return result


def random_segmented_proposals(seed: int):
    """A (gt dict, proposal list) pair for segmented proposals: ground-truth masks as polygons of several parts and
    compressed or uncompressed RLE (some crowd, empty and 1-pixel), and per image 0 to 30 proposals — moved objects,
    exact copies of objects (J = 1) and of earlier proposals (duplicates), random, empty and 1-pixel masks, polygons —
    with scores of one decimal (ties) or none at all (ranked by file order), images interleaved or not."""
    rng = np.random.default_rng(seed)
    images = [{"id": i + 1, "height": int(rng.integers(4, 50)), "width": int(rng.integers(4, 50)),
               "file_name": f"img{i + 1}.jpg"} for i in range(int(rng.integers(1, 5)))]
    scored = rng.random() < 0.7
    annotations, proposals = [], []
    for image in images:
        h, w = image["height"], image["width"]
        objects = []
        for _ in range(int(rng.choice([0, 1, 2, 3, 5, 8]))):
            bitmap = _bitmap(rng, h, w)
            form = str(rng.choice(["polygon", "compressed", "uncompressed"]))
            segmentation = _polygons(rng, h, w) if form == "polygon" else _rle(bitmap, form)
            if form == "polygon":
                bitmap = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(segmentation, h, w)))
            objects.append(bitmap)
            annotations.append({"id": len(annotations) + 1, "image_id": image["id"], "category_id": 1,
                                "bbox": [float(v) for v in mask_utils.toBbox(mask_utils.encode(np.asfortranarray(bitmap)))],
                                "area": float(bitmap.sum()), "iscrowd": int(rng.random() < 0.1),
                                "segmentation": segmentation})
        own = []
        for _ in range(int(rng.integers(0, 31))):
            kind = rng.integers(0, 10)
            if objects and kind < 4:
                bitmap = _moved(rng, objects[rng.integers(0, len(objects))])
            elif objects and kind == 4:
                bitmap = objects[rng.integers(0, len(objects))].copy()
            elif own and kind == 5:
                bitmap = own[rng.integers(0, len(own))].copy()
            else:
                bitmap = _bitmap(rng, h, w)
            own.append(bitmap)
            form = str(rng.choice(["compressed", "uncompressed", "compressed", "polygon"]))
            if form == "polygon":
                segmentation = _polygons(rng, h, w)
                own[-1] = mask_utils.decode(mask_utils.merge(mask_utils.frPyObjects(segmentation, h, w)))
            else:
                segmentation = _rle(bitmap, form)
            proposal = {"image_id": image["id"], "segmentation": segmentation}
            if scored:
                proposal["score"] = round(float(rng.random()), 1)
            proposals.append(proposal)
    if not proposals:
        proposals.append({"image_id": images[0]["id"], "segmentation": _rle(np.zeros((images[0]["height"],
                                                                                     images[0]["width"])), "compressed"),
                          **({"score": 0.5} if scored else {})})
    if rng.random() < 0.3:  # images interleaved: ranked per shard instead of while streaming
        proposals = [proposals[i] for i in rng.permutation(len(proposals))]
    gt = {"images": images, "annotations": annotations, "categories": [{"id": 1, "name": "object"}]}
    return gt, proposals
