"""The store's ground-truth tables (:class:`~evalengine.io.coco.CocoDataset`) from the images, classes and objects any
annotation format reads (YOLO, CVAT, LabelMe, OpenImages CSV): one way to number and type them."""

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.io.coco import CocoDataset
from evalengine.io.masks import box_polygon, masks
from evalengine.io.voc import image_ids


def numbered_images(images: pl.DataFrame) -> pl.DataFrame:
    """``images`` (``stem, file_name, width, height``, one row per image) in stem order with their ``image_id``:
    ``int(stem)`` when every stem is a distinct decimal integer, else the 1-based position (the VOC reader's rule)."""
    images = images.sort("stem")
    return images.with_columns(pl.Series("image_id", image_ids(images.get_column("stem").to_list()), pl.Int64))


def categories_of(names) -> pl.DataFrame:
    """Categories numbered from 1 in the order of ``names``."""
    names = list(names)
    return pl.DataFrame({"category_id": range(1, len(names) + 1), "name": names, "supercategory": None},
                        schema=schema.CATEGORIES)


def dataset_of(images: pl.DataFrame, categories: pl.DataFrame, objects: pl.DataFrame, extra=()) -> CocoDataset:
    """The three tables: ``images`` as :func:`numbered_images` gives them, ``objects`` with ``image_id, category_id,
    x, y, w, h`` and optionally ``area`` (else ``w * h``), ``iscrowd`` and the mask columns, in the order that gives
    their ids (``gt_id`` and ``gt_order``: 1-based and 0-based positions); ``extra`` columns are kept (after the
    store's)."""
    area = pl.col("area") if "area" in objects.columns else pl.col("w") * pl.col("h")
    crowd = pl.col("iscrowd") if "iscrowd" in objects.columns else pl.lit(False)
    shapes = [c for c in schema.MASK if c in objects.columns]
    gt = objects.with_row_index("gt_order").select(
        (pl.col("gt_order") + 1).cast(pl.Int64).alias("gt_id"), "image_id", "category_id", *schema.BOX,
        area.alias("area"), crowd.alias("iscrowd"), pl.lit(None, pl.Boolean).alias("ignore"),
        pl.lit(None, pl.Boolean).alias("difficult"), pl.col("gt_order").cast(pl.Int64), *shapes, *extra)
    table = images.select(*[c for c in schema.IMAGES if c != "shard"]).cast(
        {c: t for c, t in schema.IMAGES.items() if c != "shard"})
    return CocoDataset(images=table, categories=categories,
                       gt=gt.cast({**schema.GT, **{c: schema.MASK[c] for c in shapes}}))


def with_polygon_masks(objects: pl.DataFrame, images: pl.DataFrame, path, what: str) -> pl.DataFrame:
    """``objects`` whose ``polygon`` column holds a polygon's points ``[x1, y1, x2, y2, …]`` and ``segmentation`` the
    same as COCO's JSON text ``[[x1, y1, …]]`` (both null for a box) with their masks (rasterised as pycocotools'
    ``frPyObjects``) and, for a polygon, its box (the points' extent) and area (the mask's: ``maskUtils.area``); a box
    keeps ``x, y, w, h`` and the area ``w * h``, and its mask is its rectangle (``loadRes``' polygon of a box result),
    so that a mask evaluation reads every object. ``what`` names an object in errors by its ``where`` column."""
    if objects.get_column("polygon").null_count() == objects.height:
        return objects.drop("polygon", "segmentation")
    xs, ys = (pl.col("polygon").list.gather_every(2, offset=k) for k in (0, 1))
    objects = objects.with_columns(pl.coalesce(value, pl.col(c)).alias(c) for c, value in (
        ("x", xs.list.min()), ("y", ys.list.min()), ("w", xs.list.max() - xs.list.min()),
        ("h", ys.list.max() - ys.list.min())))
    shaped = masks(objects, images, path, what, pl.col("where"), default_polygon=box_polygon(*map(pl.col, schema.BOX)))
    area = np.where(objects.get_column("polygon").is_not_null().to_numpy(), shaped.area(),
                    (objects.get_column("w") * objects.get_column("h")).to_numpy())
    return pl.concat([objects.drop("polygon", "segmentation").with_columns(pl.Series("area", area, pl.Float64)),
                      shaped.columns], how="horizontal")
