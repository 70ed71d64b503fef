"""CVAT for images 1.1 XML as ground truth: ``<image name width height>`` elements holding ``<box label xtl ytl xbr
ybr occluded>`` and ``<polygon label points="x1,y1;x2,y2;…">`` shapes (read by the VOC reader's expat parser, a
DOCTYPE refused).

- A box is ``x = xtl``, ``y = ytl``, ``w = xbr - xtl``, ``h = ybr - ytl`` (CVAT's coordinates are continuous pixels,
  as its COCO export writes them); a polygon becomes a mask (:func:`evalengine.io.ground_truth.with_polygon_masks`);
  other shapes (polylines, points, ellipses, cuboids) are not objects of a detection ground truth and are counted in
  one warning.
- Categories: the ``<meta>`` labels in file order when the file lists them, else the shapes' labels sorted; ids from 1.
- Images: ids by name without its extension, as VOC's (:func:`evalengine.io.ground_truth.numbered_images`); the name
  is the ``file_name``. Objects are numbered in file order. ``occluded`` is kept as a column.
"""

import json
import warnings
from pathlib import Path

import polars as pl

from evalengine.errors import InputError, InputWarning
from evalengine.io.coco import CocoDataset
from evalengine.io.ground_truth import categories_of, dataset_of, numbered_images, with_polygon_masks
from evalengine.io.voc import parse_xml

_CORNERS = ("xtl", "ytl", "xbr", "ybr")
_IGNORED_SHAPES = ("polyline", "points", "ellipse", "cuboid", "skeleton", "mask", "tag")


def _number(path, node, name: str) -> float:
    text = node.attributes.get(name)
    try:
        value = float(text)
    except (TypeError, ValueError):
        value = float("nan")
    if not value - value == 0.0:
        raise InputError(f"{path}: {node.where}: <{node.tag}> '{name}' is {text!r}, not a number")
    return value


def _points(path, node) -> list:
    text = node.attributes.get("points", "")
    try:
        points = [float(v) for pair in text.split(";") for v in pair.split(",")]
    except ValueError:
        points = []
    if len(points) < 6 or len(points) % 2 or not all(v - v == 0.0 for v in points):
        raise InputError(f"{path}: {node.where}: <polygon> 'points' is {text[:60]!r}, not 3 or more 'x,y' pairs")
    return points


def _size(path, node, name: str) -> int:
    value = _number(path, node, name)
    if value != int(value) or value < 1:
        raise InputError(f"{path}: {node.where}: <image> '{name}' is {node.attributes.get(name)!r}, not a positive "
                         "integer")
    return int(value)


def read_cvat(path) -> CocoDataset:
    """A CVAT for images 1.1 XML file as the store's tables."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    root = parse_xml(path)
    if root.tag != "annotations":
        raise InputError(f"{path}: {root.where}: the root element is <{root.tag}>, expected <annotations> (CVAT for "
                         "images 1.1)")
    meta = root.child("meta")
    listed_labels = []
    stack = [meta] if meta is not None else []
    while stack:  # <meta><task|job|project>…<labels><label><name>
        node = stack.pop()
        if node.tag == "label" and node.child("name") is not None:
            listed_labels.append(node.child("name").value())
        stack.extend(reversed(node.children))
    images, objects, skipped = [], [], 0
    for image in (n for n in root.children if n.tag == "image"):
        name = image.attributes.get("name")
        if not name:
            raise InputError(f"{path}: {image.where}: <image> without a 'name'")
        images.append((name, name.rsplit(".", 1)[0] if "." in Path(name).name else name, _size(path, image, "width"),
                       _size(path, image, "height")))
        for shape in image.children:
            label = shape.attributes.get("label")
            if shape.tag in _IGNORED_SHAPES:
                skipped += 1
                continue
            if shape.tag not in ("box", "polygon"):
                continue
            if not label:
                raise InputError(f"{path}: {shape.where}: <{shape.tag}> without a 'label'")
            occluded = shape.attributes.get("occluded") == "1"
            where = f"{shape.where} (<{shape.tag}>)"
            if shape.tag == "box":
                x1, y1, x2, y2 = (_number(path, shape, c) for c in _CORNERS)
                if x2 < x1 or y2 < y1:
                    raise InputError(f"{path}: {shape.where}: <box> has xbr < xtl or ybr < ytl")
                objects.append((name, label, x1, y1, x2 - x1, y2 - y1, occluded, None, None, where))
            else:
                points = _points(path, shape)
                objects.append((name, label, None, None, None, None, occluded, points, json.dumps([points]), where))
    if not images:
        raise InputError(f"{path}: no <image> element (CVAT for images 1.1)")
    if skipped:
        warnings.warn(f"{path}: {skipped} shapes other than boxes and polygons (polylines, points, …) are not objects "
                      "and are left out", InputWarning, stacklevel=2)
    sizes = pl.DataFrame(images, schema={"file_name": pl.String, "stem": pl.String, "width": pl.Int64,
                                         "height": pl.Int64}, orient="row")
    if sizes.get_column("stem").is_duplicated().any():
        raise InputError(f"{path}: image '{sizes.filter(pl.col('stem').is_duplicated()).item(0, 0)}' appears twice")
    sizes = numbered_images(sizes)
    frame = pl.DataFrame(objects, orient="row", schema={
        "file_name": pl.String, "label": pl.String, "x": pl.Float64, "y": pl.Float64, "w": pl.Float64,
        "h": pl.Float64, "occluded": pl.Boolean, "polygon": pl.List(pl.Float64), "segmentation": pl.String,
        "where": pl.String})
    names = listed_labels or sorted(set(frame.get_column("label")))
    if not names:
        raise InputError(f"{path}: no labelled box or polygon, so there is nothing to evaluate")
    unknown = frame.filter(~pl.col("label").is_in(names))
    if unknown.height:
        raise InputError(f"{path}: {unknown.item(0, 'where')}: label {unknown.item(0, 'label')!r} is not one of the "
                         "<meta> labels")
    frame = frame.join(sizes.select("file_name", "image_id"), on="file_name", maintain_order="left").with_columns(
        pl.col("label").replace_strict(names, range(1, len(names) + 1), return_dtype=pl.Int64).alias("category_id"))
    frame = with_polygon_masks(frame, sizes, path, "shape at")
    return dataset_of(sizes, categories_of(names), frame, extra=["occluded"])
