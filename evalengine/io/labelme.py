"""LabelMe annotations as ground truth: a folder of JSON files, one per image (``imagePath``, ``imageWidth``,
``imageHeight`` and ``shapes``, each with ``label``, ``points`` and ``shape_type``).

- ``rectangle``: two corner points in any order, the box their extent (``x = min``, ``w = max - min``);
  ``polygon``: a mask (:func:`evalengine.io.ground_truth.with_polygon_masks`); other shape types (circle, line,
  point, linestrip, mask) are counted in one warning and left out.
- Images: one per file, the file's stem naming it (ids as VOC's:
  :func:`evalengine.io.ground_truth.numbered_images`), ``imagePath`` its ``file_name``. Categories: the labels sorted,
  ids from 1. Objects are numbered over the files in stem order, shapes in file order. A file is small and read
  whole.
"""

import json
import warnings
from pathlib import Path

import polars as pl

from evalengine.errors import InputError, InputWarning
from evalengine.io.coco import CocoDataset
from evalengine.io.ground_truth import categories_of, dataset_of, numbered_images, with_polygon_masks


def _load(path: Path) -> dict:
    try:
        value = json.loads(path.read_text(encoding="utf-8-sig"))
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start + 1})") from None
    except ValueError as exc:
        raise InputError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(value, dict) or not isinstance(value.get("shapes"), list):
        raise InputError(f"{path}: not a LabelMe file (an object with a 'shapes' list)")
    for key in ("imageWidth", "imageHeight"):
        size = value.get(key)
        if not isinstance(size, int) or isinstance(size, bool) or size < 1:
            raise InputError(f"{path}: '{key}' is {size!r}, not a positive integer")
    return value


def _points(path: Path, number: int, shape: dict) -> list:
    points = shape.get("points")
    ok = isinstance(points, list) and all(
        isinstance(p, list) and len(p) == 2 and all(isinstance(v, (int, float)) and not isinstance(v, bool)
                                                    and v - v == 0 for v in p) for p in points)
    if not ok:
        raise InputError(f"{path}: shape {number}: 'points' must be a list of [x, y] pairs of finite numbers")
    return [float(v) for p in points for v in p]


def read_labelme(folder) -> CocoDataset:
    """A folder of LabelMe JSON files as the store's tables."""
    folder = Path(folder)
    files = sorted((p for p in folder.glob("*.json") if not p.name.startswith(".")), key=lambda p: p.stem)
    if not files:
        raise InputError(f"{folder}: no LabelMe .json file in this folder")
    images, objects, skipped = [], [], 0
    for path in files:
        value = _load(path)
        images.append((str(value.get("imagePath") or path.stem), path.stem, value["imageWidth"], value["imageHeight"]))
        for number, shape in enumerate(value["shapes"], start=1):
            kind = shape.get("shape_type") or "polygon"  # LabelMe's default
            if kind not in ("rectangle", "polygon"):
                skipped += 1
                continue
            label = shape.get("label")
            if not isinstance(label, str) or not label:
                raise InputError(f"{path}: shape {number}: no 'label'")
            points = _points(path, number, shape)
            where = f"{path.name} shape {number}"
            if kind == "rectangle":
                if len(points) != 4:
                    raise InputError(f"{path}: shape {number}: a rectangle has 2 points, found {len(points) // 2}")
                xs, ys = points[0::2], points[1::2]
                objects.append((path.stem, label, min(xs), min(ys), max(xs) - min(xs), max(ys) - min(ys), None, None,
                                where))
            else:
                if len(points) < 6:
                    raise InputError(f"{path}: shape {number}: a polygon has 3 or more points, found {len(points) // 2}")
                objects.append((path.stem, label, None, None, None, None, points, json.dumps([points]), where))
    if skipped:
        warnings.warn(f"{folder}: {skipped} shapes other than rectangles and polygons (circles, lines, points, …) are "
                      "not objects and are left out", InputWarning, stacklevel=2)
    sizes = numbered_images(pl.DataFrame(images, orient="row", schema={
        "file_name": pl.String, "stem": pl.String, "width": pl.Int64, "height": pl.Int64}))
    frame = pl.DataFrame(objects, orient="row", schema={
        "stem": pl.String, "label": pl.String, "x": pl.Float64, "y": pl.Float64, "w": pl.Float64, "h": pl.Float64,
        "polygon": pl.List(pl.Float64), "segmentation": pl.String, "where": pl.String})
    names = sorted(set(frame.get_column("label")))
    if not names:
        raise InputError(f"{folder}: no labelled box or polygon, so there is nothing to evaluate")
    frame = frame.join(sizes.select("stem", "image_id"), on="stem", maintain_order="left").with_columns(
        pl.col("label").replace_strict(names, range(1, len(names) + 1), return_dtype=pl.Int64).alias("category_id"))
    return dataset_of(sizes, categories_of(names), with_polygon_masks(frame, sizes, folder, "shape"))
