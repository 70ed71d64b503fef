"""Random scenes written in the formats users have (YOLO txt, OpenImages CSV, CVAT XML, LabelMe JSON) and, beside
each, the equivalent COCO ground truth and results, converted here independently of evalengine (the YOLO formula
transcribed from ultralytics' ``ops.xywhn2xyxy``; polygon areas from pycocotools' ``maskUtils``)."""

import json
from pathlib import Path

import numpy as np
from PIL import Image
from pycocotools import mask as mask_utils

NAMES = ("person", "car", "dog", "bicycle")


def scene(seed: int) -> dict:
    """Images (``stem, width, height``), normalised boxes ``(image, class, cx, cy, w, h, group)`` inside the image,
    and predictions ``(image, class, cx, cy, w, h, conf)`` near them and at random; with repeated scores, coarse
    (``%g``-like) coordinates, images without objects or predictions, and integer or named stems."""
    rng = np.random.default_rng(seed)
    n_images = int(rng.integers(1, 9))
    digits = rng.random() < 0.3
    stems = [str(int(v)) for v in rng.choice(1000, n_images, replace=False)] if digits else \
        [f"img_{i:03d}" for i in rng.choice(1000, n_images, replace=False)]
    coarse = rng.random() < 0.5
    images = [(stem, int(rng.integers(20, 700)), int(rng.integers(20, 700))) for stem in stems]

    def box():
        w, h = rng.uniform(0.02, 0.6, 2)
        cx, cy = rng.uniform(w / 2, 1 - w / 2), rng.uniform(h / 2, 1 - h / 2)
        values = [float(cx), float(cy), float(w), float(h)]
        if coarse:
            values = [float(f"{v:.4g}") for v in values]
            values[0] = min(max(values[0], values[2] / 2), 1 - values[2] / 2)
            values[1] = min(max(values[1], values[3] / 2), 1 - values[3] / 2)
        return values

    objects, predictions = [], []
    scores = rng.choice([0.9, 0.5, 0.25], 5) if rng.random() < 0.4 else None
    for stem, _, _ in images:
        for _ in range(int(rng.integers(0, 7))):
            cls = int(rng.integers(0, len(NAMES)))
            values = box()
            objects.append((stem, cls, *values, bool(rng.random() < 0.1)))
            for _ in range(int(rng.integers(0, 3))):
                jitter = [float(min(max(v + rng.normal(0, 0.02), 0.0), 1.0)) for v in values]
                jitter[2:] = [max(min(v, 1.0), 0.0) for v in jitter[2:]]
                jitter[0] = min(max(jitter[0], jitter[2] / 2), 1 - jitter[2] / 2)
                jitter[1] = min(max(jitter[1], jitter[3] / 2), 1 - jitter[3] / 2)
                conf = float(rng.choice(scores)) if scores is not None else float(rng.random())
                same = rng.random() < 0.8
                predictions.append((stem, cls if same else int(rng.integers(0, len(NAMES))), *jitter, conf))
        for _ in range(int(rng.integers(0, 3))):
            conf = float(rng.choice(scores)) if scores is not None else float(rng.random())
            predictions.append((stem, int(rng.integers(0, len(NAMES))), *box(), conf))
    return {"images": images, "objects": objects, "predictions": predictions, "rng": rng}


def with_segments(sc: dict) -> dict:
    """``sc`` with YOLO segment labels (``segments``: object index → normalised ``[x1, y1, …]``, 3 to 7 points inside
    its box) for the objects of about half of the images (a file holds boxes or segments, never both)."""
    rng = sc["rng"]
    segmented = {stem for stem, _, _ in sc["images"] if rng.random() < 0.5}
    segments = {}
    for i, o in enumerate(sc["objects"]):
        if o[0] in segmented:
            cx, cy, w, h = o[2:6]
            n = int(rng.integers(3, 8))
            xs = np.clip(rng.uniform(cx - w / 2, cx + w / 2, n), 0.0, 1.0)
            ys = np.clip(rng.uniform(cy - h / 2, cy + h / 2, n), 0.0, 1.0)
            segments[i] = [float(v) for xy in zip(xs, ys) for v in xy]
    return {**sc, "segments": segments}


def with_segment_predictions(sc: dict) -> dict:
    """``sc`` whose predictions are all segments (``pred_segments``: prediction index → normalised ``[x1, y1, …]``,
    3 to 7 points inside its box, a degenerate one now and then), as a segmentation model's predict folder holds."""
    rng = sc["rng"]
    pred_segments = {}
    for i, p in enumerate(sc["predictions"]):
        cx, cy, w, h = p[2:6]
        n = int(rng.integers(3, 8))
        xs = np.clip(rng.uniform(cx - w / 2, cx + w / 2, n), 0.0, 1.0)
        ys = np.clip(rng.uniform(cy - h / 2, cy + h / 2, n), 0.0, 1.0)
        if rng.random() < 0.05:  # all points on a line: an empty mask
            ys[:] = ys[0]
        pred_segments[i] = [float(v) for xy in zip(xs, ys) for v in xy]
    return {**sc, "pred_segments": pred_segments}


def image_ids(stems) -> dict:
    """The image id of each stem: ``int(stem)`` when all are distinct integers, else the 1-based sorted position."""
    stems = sorted(stems)
    if all(s.isdigit() for s in stems) and len({int(s) for s in stems}) == len(stems):
        return {s: int(s) for s in stems}
    return {s: i for i, s in enumerate(stems, start=1)}


def xywhn2xyxy(values, width: int, height: int) -> list:
    """ultralytics ``ops.xywhn2xyxy`` (transcribed; float64)."""
    x = np.asarray(values, dtype=np.float64)
    half_w, half_h = x[..., 2] / 2, x[..., 3] / 2
    return [width * (x[..., 0] - half_w), height * (x[..., 1] - half_h), width * (x[..., 0] + half_w),
            height * (x[..., 1] + half_h)]


def _coco_box(corners) -> list:
    x1, y1, x2, y2 = (float(v) for v in corners)
    return [x1, y1, x2 - x1, y2 - y1]


def coco_images(sc: dict, file_names: dict | None = None) -> list:
    ids = image_ids([s for s, _, _ in sc["images"]])
    return [{"id": ids[s], "width": w, "height": h, "file_name": (file_names or {}).get(s, s)}
            for s, w, h in sc["images"]]


def write_yolo(root: Path, sc: dict, names: str = "yaml", sizes: str = "folder") -> tuple:
    """``(dataset folder, predictions folder, images argument)``: ``labels/<stem>.txt`` (an image without objects gets
    an empty file or none), class names as ``data.yaml`` (list or dict) or ``classes.txt``, sizes as an ``images/``
    folder of PNGs or a CSV table; predictions ``pred/labels/<stem>.txt`` with conf."""
    rng = sc["rng"]
    (root / "labels").mkdir(parents=True)
    segments = sc.get("segments", {})
    for stem, _, _ in sc["images"]:
        lines = [" ".join(map(repr, (o[1], *segments.get(i, o[2:6])))) for i, o in enumerate(sc["objects"])
                 if o[0] == stem]
        if lines or rng.random() < 0.5:
            (root / "labels" / f"{stem}.txt").write_text("\n".join(lines) + ("\n" if rng.random() < 0.5 else ""))
    if names == "yaml":
        (root / "data.yaml").write_text(f"path: .\nnames: {list(NAMES)}\n")
    elif names == "dict":
        (root / "data.yaml").write_text("names:\n" + "".join(f"  {k}: {n}\n" for k, n in enumerate(NAMES)))
    else:
        (root / "classes.txt").write_text("\n".join(NAMES) + "\n")
    if sizes == "folder":
        (root / "images").mkdir()
        for stem, w, h in sc["images"]:
            Image.new("L", (w, h)).save(root / "images" / f"{stem}.png")
        images = None
    else:
        images = root / "sizes.csv"
        images.write_text("image,width,height\n" + "".join(f"{s}.jpg,{w},{h}\n" for s, w, h in sc["images"]))
    pred = root / "pred" / "labels"
    pred.mkdir(parents=True)
    for stem, _, _ in sc["images"]:
        pred_segments = sc.get("pred_segments", {})
        lines = [" ".join(map(repr, (p[1], *pred_segments.get(i, p[2:6]), p[6])))
                 for i, p in enumerate(sc["predictions"]) if p[0] == stem]
        if lines:
            (pred / f"{stem}.txt").write_text("\n".join(lines) + "\n")
    return root, root / "pred", images


def coco_of_yolo(sc: dict, sizes: str = "folder") -> tuple:
    """``(ground truth dict, results list)`` of :func:`write_yolo`'s files, in its numbering (predictions over the
    files in stem order, lines in order)."""
    size = {s: (w, h) for s, w, h in sc["images"]}
    ids = image_ids(size)
    suffix = ".png" if sizes == "folder" else ".jpg"
    images = coco_images(sc, {s: s + suffix for s in size})
    annotations = []
    segments = sc.get("segments", {})
    for stem in sorted(size):
        for i, o in ((i, o) for i, o in enumerate(sc["objects"]) if o[0] == stem):
            ann = {"id": len(annotations) + 1, "image_id": ids[stem], "category_id": o[1] + 1, "iscrowd": 0}
            if i in segments:  # the pixel polygon, its extent and its mask's area
                w, h = size[stem]
                points = [float(v) * (w if k % 2 == 0 else h) for k, v in enumerate(segments[i])]
                xs, ys = points[0::2], points[1::2]
                rle = mask_utils.frPyObjects([points], h, w)
                ann.update(bbox=[min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)], segmentation=[points],
                           area=float(mask_utils.area(mask_utils.merge(rle))))
            else:
                ann["bbox"] = x, y, bw, bh = _coco_box(xywhn2xyxy(o[2:6], *size[stem]))
                ann["area"] = bw * bh
                if segments:  # a box's mask is its rectangle, as loadRes makes it
                    ann["segmentation"] = [[x, y, x, y + bh, x + bw, y + bh, x + bw, y]]
            annotations.append(ann)
    results = [{"image_id": ids[p[0]], "category_id": p[1] + 1, "score": p[6],
                **(_segment_result(sc["pred_segments"][i], *size[p[0]]) if "pred_segments" in sc else
                   {"bbox": _coco_box(xywhn2xyxy(p[2:6], *size[p[0]]))})}
               for stem in sorted(size) for i, p in enumerate(sc["predictions"]) if p[0] == stem]
    categories = [{"id": k + 1, "name": n} for k, n in enumerate(NAMES)]
    return {"images": images, "annotations": annotations, "categories": categories}, results


def _segment_result(segment: list, width: int, height: int) -> dict:
    """A segment prediction as a COCO result: the pixel points' extent as ``bbox`` and the polygon's mask
    (``frPyObjects``, merged) as compressed RLE."""
    points = [float(v) * (width if k % 2 == 0 else height) for k, v in enumerate(segment)]
    xs, ys = points[0::2], points[1::2]
    rle = mask_utils.merge(mask_utils.frPyObjects([points], height, width))
    return {"bbox": [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)],
            "segmentation": {"size": rle["size"], "counts": rle["counts"].decode()}}


def _corners(o) -> tuple:
    """Normalised corners of a scene box, clipped into [0, 1]."""
    cx, cy, w, h = o
    return (max(cx - w / 2, 0.0), min(cx + w / 2, 1.0), max(cy - h / 2, 0.0), min(cy + h / 2, 1.0))


def write_openimages(folder: Path, sc: dict) -> tuple:
    """``(boxes.csv, predictions.csv, sizes.csv)`` in the 2019 challenge layout (extra columns included)."""
    folder.mkdir(parents=True, exist_ok=True)
    boxes = "ImageID,Source,LabelName,Confidence,XMin,XMax,YMin,YMax,IsOccluded,IsGroupOf\n" + "".join(
        f"{o[0]},xclick,/m/{NAMES[o[1]]},1,{','.join(map(repr, _corners(o[2:6])))},0,{int(o[6])}\n"
        for o in sc["objects"])
    preds = "ImageID,LabelName,Score,XMin,XMax,YMin,YMax\n" + "".join(
        f"{p[0]},/m/{NAMES[p[1]]},{p[6]!r},{','.join(map(repr, _corners(p[2:6])))}\n" for p in sc["predictions"])
    sizes = "image,width,height\n" + "".join(f"{s},{w},{h}\n" for s, w, h in sc["images"])
    for name, text in (("boxes.csv", boxes), ("predictions.csv", preds), ("sizes.csv", sizes)):
        (folder / name).write_text(text)
    return folder / "boxes.csv", folder / "predictions.csv", folder / "sizes.csv"


def coco_of_openimages(sc: dict) -> tuple:
    """The COCO equivalent of :func:`write_openimages`: categories the LabelNames sorted, group-of as crowd."""
    size = {s: (w, h) for s, w, h in sc["images"]}
    ids = image_ids(size)
    labels = sorted({f"/m/{NAMES[o[1]]}" for o in sc["objects"]})
    cat = {name: k for k, name in enumerate(labels, start=1)}

    def box(stem, values):
        x1, x2, y1, y2 = _corners(values)
        w, h = size[stem]
        return [x1 * w, y1 * h, x2 * w - x1 * w, y2 * h - y1 * h]

    annotations = []
    for o in sc["objects"]:
        b = box(o[0], o[2:6])
        annotations.append({"id": len(annotations) + 1, "image_id": ids[o[0]], "category_id": cat[f"/m/{NAMES[o[1]]}"],
                            "bbox": b, "area": b[2] * b[3], "iscrowd": int(o[6])})
    results = [{"image_id": ids[p[0]], "category_id": cat[f"/m/{NAMES[p[1]]}"], "bbox": box(p[0], p[2:6]),
                "score": p[6]} for p in sc["predictions"] if f"/m/{NAMES[p[1]]}" in cat]
    kept = [p for p in sc["predictions"] if f"/m/{NAMES[p[1]]}" in cat]
    return ({"images": coco_images(sc), "annotations": annotations,
             "categories": [{"id": k, "name": n} for n, k in cat.items()]}, results, kept)


def _pixel_shapes(sc: dict) -> list:
    """Per object ``(stem, name, kind, points)`` in pixels: a box ``[x1, y1, x2, y2]`` or a polygon (a quadrilateral
    inside the box) for about a third of them."""
    rng = sc["rng"]
    size = {s: (w, h) for s, w, h in sc["images"]}
    shapes = []
    for o in sc["objects"]:
        x1, y1, x2, y2 = (float(v) for v in xywhn2xyxy(o[2:6], *size[o[0]]))
        if rng.random() < 0.35:
            mx, my = (x1 + x2) / 2, (y1 + y2) / 2
            points = [mx, y1, x2, my, mx + rng.uniform(0, (x2 - mx) / 2), y2, x1, my]
            shapes.append((o[0], NAMES[o[1]], "polygon", points))
        else:
            shapes.append((o[0], NAMES[o[1]], "box", [x1, y1, x2, y2]))
    return shapes


def coco_of_shapes(sc: dict, shapes: list, names: list, file_names: dict, order: list) -> dict:
    """The COCO ground truth of pixel shapes, numbered over the images in ``order``: a box as ``[x1, y1, x2 - x1,
    y2 - y1]``, a polygon as a segmentation with the points' extent as its box and pycocotools' mask area."""
    size = {s: (w, h) for s, w, h in sc["images"]}
    ids = image_ids(size)
    annotations = []
    for stem in order:
        for _, name, kind, points in (s for s in shapes if s[0] == stem):
            ann = {"id": len(annotations) + 1, "image_id": ids[stem], "category_id": names.index(name) + 1,
                   "iscrowd": 0}
            if kind == "box":
                ann["bbox"] = x, y, w, h = _coco_box(points)
                ann["area"] = w * h
                if any(s[2] == "polygon" for s in shapes):  # a box's mask is its rectangle, as loadRes makes it
                    ann["segmentation"] = [[x, y, x, y + h, x + w, y + h, x + w, y]]
            else:
                xs, ys = points[0::2], points[1::2]
                ann["bbox"] = [min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys)]
                rle = mask_utils.frPyObjects([points], size[stem][1], size[stem][0])
                ann["area"] = float(mask_utils.area(mask_utils.merge(rle)))
                ann["segmentation"] = [points]
            annotations.append(ann)
    return {"images": coco_images(sc, file_names), "annotations": annotations,
            "categories": [{"id": k, "name": n} for k, n in enumerate(names, start=1)]}


def write_cvat(path: Path, sc: dict) -> tuple:
    """``(CVAT XML path, equivalent COCO dict)``; the meta lists the labels in :data:`NAMES` order."""
    shapes = _pixel_shapes(sc)
    parts = ['<?xml version="1.0" encoding="utf-8"?>\n<annotations>\n  <version>1.1</version>\n  <meta><task>'
             '<labels>' + "".join(f"<label><name>{n}</name><color>#fff</color></label>" for n in NAMES) +
             '</labels></task></meta>\n']
    for i, (stem, w, h) in enumerate(sc["images"]):
        parts.append(f'  <image id="{i}" name="{stem}.jpg" width="{w}" height="{h}">\n')
        for _, name, kind, points in (s for s in shapes if s[0] == stem):
            if kind == "box":
                x1, y1, x2, y2 = points
                parts.append(f'    <box label="{name}" source="manual" occluded="0" xtl="{x1!r}" ytl="{y1!r}" '
                             f'xbr="{x2!r}" ybr="{y2!r}" z_order="0"></box>\n')
            else:
                text = ";".join(f"{x!r},{y!r}" for x, y in zip(points[0::2], points[1::2]))
                parts.append(f'    <polygon label="{name}" source="manual" occluded="1" points="{text}" '
                             'z_order="0"></polygon>\n')
        parts.append('    <polyline label="car" points="1,2;3,4" occluded="0"></polyline>\n' if i == 0 else "")
        parts.append("  </image>\n")
    path.write_text("".join(parts) + "</annotations>\n")
    return path, coco_of_shapes(sc, shapes, list(NAMES), {s: f"{s}.jpg" for s, _, _ in sc["images"]},
                                [s for s, _, _ in sc["images"]])  # file order


def write_labelme(folder: Path, sc: dict) -> tuple:
    """``(folder of LabelMe JSON files, equivalent COCO dict)``; rectangles with their corners in either order."""
    shapes = _pixel_shapes(sc)
    folder.mkdir(parents=True)
    rng = sc["rng"]
    for stem, w, h in sc["images"]:
        out = []
        for _, name, kind, points in (s for s in shapes if s[0] == stem):
            if kind == "box":
                x1, y1, x2, y2 = points
                pairs = [[x1, y1], [x2, y2]] if rng.random() < 0.5 else [[x2, y1], [x1, y2]]
                out.append({"label": name, "points": pairs, "group_id": None, "shape_type": "rectangle", "flags": {}})
            else:
                out.append({"label": name, "points": [[x, y] for x, y in zip(points[0::2], points[1::2])],
                            "group_id": None, "shape_type": "polygon", "flags": {}})
        (folder / f"{stem}.json").write_text(json.dumps({
            "version": "5.4.1", "flags": {}, "shapes": out, "imagePath": f"{stem}.jpg", "imageData": None,
            "imageHeight": h, "imageWidth": w}))
    names = sorted({s[1] for s in shapes})
    return folder, coco_of_shapes(sc, shapes, names, {s: f"{s}.jpg" for s, _, _ in sc["images"]},
                                  sorted(s for s, _, _ in sc["images"]))  # files in stem order


def coco_results(sc: dict, gt: dict) -> list:
    """Results for a pixel-space ground truth (CVAT, LabelMe): the scene's predictions by category name."""
    size = {s: (w, h) for s, w, h in sc["images"]}
    ids = image_ids(size)
    cat = {c["name"]: c["id"] for c in gt["categories"]}
    return [{"image_id": ids[p[0]], "category_id": cat[NAMES[p[1]]],
             "bbox": _coco_box(xywhn2xyxy(p[2:6], *size[p[0]])), "score": p[6]}
            for p in sc["predictions"] if NAMES[p[1]] in cat]


def write_fixtures(folder: Path, seed: int = 7) -> None:
    """The small files of ``tests/data/formats/`` (one scene in every format, and its COCO equivalents): ``python -c
    "from tests.format_files import write_fixtures; write_fixtures(Path('tests/data/formats'))"``."""
    sc = scene(seed)
    yolo, _, sizes = write_yolo(folder / "yolo", sc, "yaml", "table")
    sizes.rename(folder / "yolo_sizes.csv")
    gt, dt = coco_of_yolo(sc, "table")
    (folder / "yolo_coco_gt.json").write_text(json.dumps(gt))
    (folder / "yolo_coco_dt.json").write_text(json.dumps(dt))
    write_openimages(folder / "openimages", sc)
    gt, dt, _ = coco_of_openimages(sc)
    (folder / "openimages_coco_gt.json").write_text(json.dumps(gt))
    (folder / "openimages_coco_dt.json").write_text(json.dumps(dt))
    _, gt = write_cvat(folder / "cvat.xml", sc)
    (folder / "cvat_coco_gt.json").write_text(json.dumps(gt))
    (folder / "cvat_coco_dt.json").write_text(json.dumps(coco_results(sc, gt)))
    _, gt = write_labelme(folder / "labelme", sc)
    (folder / "labelme_coco_gt.json").write_text(json.dumps(gt))
    (folder / "labelme_coco_dt.json").write_text(json.dumps(coco_results(sc, gt)))
