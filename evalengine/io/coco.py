"""Readers of COCO ground-truth and result JSON files, with validation.

Files are parsed by Polars' JSON reader with a fixed schema (fields the engine does not use, such as
``segmentation``, are skipped without being materialised as Python objects). Every rejected input
names the file and the offending id or row; input that pycocotools accepts but that is probably a
mistake raises an :class:`~evalengine.errors.InputWarning` instead.
"""

import warnings
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from evalengine import schema
from evalengine.errors import InputError, InputWarning
from evalengine.io.validate import check_boxes, listed, read_json, require, split_bbox, unique

_IMAGE = pl.Struct({"id": pl.Int64, "width": pl.Int64, "height": pl.Int64, "file_name": pl.String})
_CATEGORY = pl.Struct({"id": pl.Int64, "name": pl.String, "supercategory": pl.String})
_ANNOTATION = pl.Struct(
    {
        "id": pl.Int64,
        "image_id": pl.Int64,
        "category_id": pl.Int64,
        "bbox": pl.List(pl.Float64),
        "area": pl.Float64,
        "iscrowd": pl.Int64,
        "ignore": pl.Int64,
    }
)
_GT_FILE = {"images": pl.List(_IMAGE), "annotations": pl.List(_ANNOTATION), "categories": pl.List(_CATEGORY)}
RESULT_FIELDS = {"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64), "score": pl.Float64}


@dataclass(frozen=True)
class CocoDataset:
    """The ground truth of a COCO file as three tables (see :mod:`evalengine.schema`)."""

    images: pl.DataFrame
    categories: pl.DataFrame
    gt: pl.DataFrame


def _explode(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    return frame.select(pl.col(key).explode()).drop_nulls().unnest(key)


def read_coco_gt(path) -> CocoDataset:
    """Read a COCO ground-truth file (``images``, ``annotations``, ``categories``).

    pycocotools conventions kept: ``area`` is the annotation's field (the segmentation area for COCO);
    ``iscrowd`` drives ignoring; annotations keep their file order (``gt_order``).
    """
    path = Path(path)
    raw = read_json(path, _GT_FILE)
    for key in ("images", "annotations", "categories"):
        if raw.height == 0 or raw.get_column(key).null_count() == raw.height:
            raise InputError(f"{path}: missing the top-level list '{key}'")

    images = _explode(raw, "images").with_row_index("row")
    require(images, ["id"], path, "image at position", pl.col("row"))
    unique(images, "id", path, "image")
    images = images.drop("row").rename({"id": "image_id"})

    categories = _explode(raw, "categories").with_row_index("row")
    require(categories, ["id"], path, "category at position", pl.col("row"))
    unique(categories, "id", path, "category")
    categories = categories.drop("row").rename({"id": "category_id"}).sort("category_id")

    gt = _explode(raw, "annotations").with_row_index("gt_order").with_columns(pl.col("gt_order").cast(pl.Int64))
    require(gt, ["id"], path, "annotation at position", pl.col("gt_order"))
    unique(gt, "id", path, "annotation")
    ann = pl.col("id")
    require(gt, ["image_id", "category_id"], path, "annotation", ann)
    gt = split_bbox(gt, path, "annotation", ann)
    check_boxes(gt, path, "annotation", ann)
    unknown = gt.filter(~pl.col("image_id").is_in(images.get_column("image_id").implode()))
    if unknown.height:
        raise InputError(f"{path}: annotation {listed(unknown.get_column('id'))}: 'image_id' not in 'images'")
    unknown = gt.filter(~pl.col("category_id").is_in(categories.get_column("category_id").implode()))
    if unknown.height:
        raise InputError(f"{path}: annotation {listed(unknown.get_column('id'))}: 'category_id' not in 'categories'")
    bad = gt.filter(pl.col("area").is_not_null() & ~(pl.col("area").is_finite() & (pl.col("area") >= 0)))
    if bad.height:
        raise InputError(f"{path}: annotation {listed(bad.get_column('id'))}: 'area' must be a finite number >= 0")
    no_area = gt.filter(pl.col("area").is_null())
    if no_area.height:
        warnings.warn(
            f"{path}: annotation {listed(no_area.get_column('id'))} has no 'area'; using w*h of its bbox "
            "(pycocotools would fail on it)",
            InputWarning,
            stacklevel=2,
        )
    zero = gt.filter(pl.col("id") == 0)
    if zero.height:
        warnings.warn(
            f"{path}: annotation id 0 found; pycocotools can never count it as matched "
            "(the 'coco' protocol keeps that quirk, zero_id_quirk=False fixes it)",
            InputWarning,
            stacklevel=2,
        )
    gt = gt.select(
        pl.col("id").alias("gt_id"),
        "image_id",
        "category_id",
        "x",
        "y",
        "w",
        "h",
        pl.coalesce("area", pl.col("w") * pl.col("h")).alias("area"),
        (pl.col("iscrowd").fill_null(0) != 0).alias("iscrowd"),
        (pl.col("ignore") != 0).alias("ignore"),
        "gt_order",
    )
    images = images.select(
        [pl.col(c).cast(t) for c, t in schema.IMAGES.items() if c != "shard"]
    )
    categories = categories.select([pl.col(c).cast(t) for c, t in schema.CATEGORIES.items()])
    return CocoDataset(images=images, categories=categories, gt=gt.select([pl.col(c).cast(t) for c, t in schema.GT.items()]))
