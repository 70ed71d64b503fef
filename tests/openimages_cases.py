"""OpenImages test inputs in the TF evaluator's terms: per-image dicts (boxes ``[ymin, xmin, ymax, xmax]``, 1-based
classes, group-of and difficult flags, verified image classes) turned into a store, and the recorded cases' arrays."""

import json
from pathlib import Path

import numpy as np
import polars as pl
from pycocotools import mask as mask_utils

from evalengine import schema
from evalengine.api import Store
from evalengine.api.openimages import evaluate_store_openimages
from evalengine.store.build import create_store

DATA = Path(__file__).parent / "data" / "openimages"


def load(name: str) -> dict:
    return json.loads((DATA / name).read_text())


def array(value):
    """A recorded ``{"__ndarray__": …, "dtype": …}`` as a NumPy array (other values as they are)."""
    if isinstance(value, dict) and "__ndarray__" in value:
        return np.array(value["__ndarray__"], dtype=value["dtype"])
    return value


def _box_columns(boxes: np.ndarray) -> dict:
    boxes = np.asarray(boxes, np.float64).reshape(-1, 4)
    y1, x1, y2, x2 = boxes.T
    return {"x": x1, "y": y1, "w": x2 - x1, "h": y2 - y1, "x_max": x2, "y_max": y2, "area": (x2 - x1) * (y2 - y1)}


def rle_counts(mask: np.ndarray) -> list:
    """COCO's uncompressed run lengths of a dense ``h × w`` mask: column-major, a run of 0s first."""
    flat = np.asarray(mask, np.uint8).reshape(mask.shape).flatten(order="F")
    changes = np.flatnonzero(np.diff(flat)) + 1
    bounds = np.concatenate([[0], changes, [flat.size]])
    runs = np.diff(bounds).tolist()
    return ([0] + runs) if flat.size and flat[0] == 1 else runs


def _mask_columns(masks) -> dict:
    masks = np.asarray(array(masks), np.uint8)
    return {"mask_h": pl.Series([m.shape[0] for m in masks], dtype=pl.Int32),
            "mask_w": pl.Series([m.shape[1] for m in masks], dtype=pl.Int32),
            "mask_rle": pl.Series([compressed(m) for m in masks], dtype=pl.String)}


def compressed(mask: np.ndarray) -> str:
    """pycocotools' compressed RLE string of a 2-D mask (the store's ``mask_rle``)."""
    return mask_utils.encode(np.asfortranarray(mask.astype(np.uint8)))["counts"].decode()


def build_store(path, n_classes: int, groundtruth: list, detections: list, n_shards: int = 1) -> Store:
    """A store of TF evaluator inputs. ``groundtruth``: dicts with ``image_key``, ``groundtruth_boxes``,
    ``groundtruth_classes`` and optional ``groundtruth_group_of``, ``groundtruth_difficult``,
    ``groundtruth_image_classes``; ``detections``: ``image_key``, ``detection_boxes``, ``detection_scores``,
    ``detection_classes``. Images are numbered in the order the evaluator adds detections (then the others), which
    is the order of its per-class concatenation."""
    keys = [d["image_key"] for d in detections]
    keys += [g["image_key"] for g in groundtruth if g["image_key"] not in keys]
    image_id = {key: i + 1 for i, key in enumerate(keys)}
    images = pl.DataFrame({"image_id": list(image_id.values()), "width": [None] * len(keys),
                           "height": [None] * len(keys), "file_name": [str(k) for k in keys]},
                          schema={c: t for c, t in schema.IMAGES.items() if c != "shard"})
    categories = pl.DataFrame({"category_id": range(1, n_classes + 1), "name": [f"c{i}" for i in range(1, n_classes + 1)],
                               "supercategory": [None] * n_classes}, schema=schema.CATEGORIES)
    gt_frames, label_rows = [], []
    for g in groundtruth:
        classes = np.asarray(array(g["groundtruth_classes"]), np.int64).reshape(-1)
        n = classes.shape[0]
        flags = {}
        for key, column in (("groundtruth_group_of", "iscrowd"), ("groundtruth_difficult", "difficult")):
            value = np.asarray(array(g.get(key, np.zeros(0, bool))), bool).reshape(-1)
            flags[column] = value if value.shape[0] == n else np.zeros(n, bool)  # the evaluator's "empty: none"
        masks = _mask_columns(g["groundtruth_instance_masks"]) if "groundtruth_instance_masks" in g else {}
        gt_frames.append(pl.DataFrame({"image_id": np.full(n, image_id[g["image_key"]], np.int64), "category_id": classes,
                                       **_box_columns(array(g["groundtruth_boxes"])), **flags, **masks}))
        verified = g.get("groundtruth_image_classes", g.get("groundtruth_labeled_classes"))
        for c in np.asarray(array(verified) if verified is not None else [], np.int64).reshape(-1):
            label_rows.append((image_id[g["image_key"]], int(c), 1))
    gt = pl.concat(gt_frames, how="diagonal_relaxed") if gt_frames else pl.DataFrame()
    gt = gt.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("gt_id"),
                         pl.int_range(pl.len(), dtype=pl.Int64).alias("gt_order"),
                         pl.lit(None, pl.Boolean).alias("ignore")).cast({**schema.GT, **schema.OPENIMAGES_CORNERS,
                                                                        **{c: t for c, t in schema.MASK.items() if c in gt.columns}})
    shapes = [c for c in schema.MASK if c in gt.columns and c != "polygon"]
    gt = gt.select(*schema.GT, *schema.OPENIMAGES_CORNERS, *shapes)
    dt_frames = []
    for d in detections:
        n = np.asarray(array(d["detection_scores"])).reshape(-1).shape[0]
        dt_frames.append(pl.DataFrame({"image_id": np.full(n, image_id[d["image_key"]], np.int64),
                                       "category_id": np.asarray(array(d["detection_classes"]), np.int64).reshape(-1),
                                       "score": np.asarray(array(d["detection_scores"]), np.float64).reshape(-1),
                                       **_box_columns(array(d["detection_boxes"])),
                                       **(_mask_columns(d["detection_masks"]) if "detection_masks" in d else {})}))
    empty = {**schema.DT, **schema.OPENIMAGES_CORNERS}
    dt = pl.concat(dt_frames, how="diagonal_relaxed") if dt_frames else pl.DataFrame(schema=empty).drop("det_id")
    dt = dt.with_columns(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("det_id"))
    dt = dt.select(*schema.DT, *schema.OPENIMAGES_CORNERS, *[c for c in schema.MASK if c in dt.columns]).cast(
        {**schema.DT, **schema.OPENIMAGES_CORNERS})
    labels = pl.DataFrame(label_rows, schema=schema.IMAGE_LABELS, orient="row").unique()
    layout = create_store(path, images, categories, gt, {"default": [dt]}, n_shards=n_shards, image_labels=labels)
    return Store(layout)


def evaluate(path, n_classes, groundtruth, detections, protocol, n_shards: int = 1):
    return evaluate_store_openimages(build_store(path, n_classes, groundtruth, detections, n_shards), protocol,
                                     scheduler="sync")


def recorded_inputs(calls: list) -> tuple:
    """A recorded ``ObjectDetectionEvaluation`` test (its calls in ``full_call_traces.json``) as our inputs:
    ``(groundtruth, detections, result of its first evaluate or None)``, classes made 1-based."""
    groundtruth, detections, expected = [], [], None
    for call in calls:
        args = [array(a) for a in call.get("args") or []]
        if call["kind"] == "add_single_ground_truth_image_info":
            g = {"image_key": args[0], "groundtruth_boxes": args[1], "groundtruth_classes": args[2] + 1}
            if len(args) > 3:
                g["groundtruth_difficult"], g["groundtruth_group_of"] = args[3], args[4]
            groundtruth.append(g)
        elif call["kind"] == "add_single_detected_image_info":
            detections.append({"image_key": args[0], "detection_boxes": args[1], "detection_scores": args[2],
                               "detection_classes": args[3] + 1})
        elif call["kind"] == "evaluate" and expected is None:
            expected = call["result"]
    return groundtruth, detections, expected
