"""Readers of COCO ground-truth and result JSON files, with validation.

Files are parsed by Polars' JSON reader with a fixed schema (fields the engine does not use, such as
``segmentation``, are skipped without being materialised as Python objects). Every rejected input
names the file and the offending id or row; input that pycocotools accepts but that is probably a
mistake raises an :class:`~evalengine.errors.InputWarning` instead.
"""

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import polars as pl

from evalengine import schema
from evalengine.errors import InputError, InputWarning

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
_RESULT = {"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64), "score": pl.Float64}

_SHOWN = 5  # how many offending ids a message lists


@dataclass(frozen=True)
class CocoDataset:
    """The ground truth of a COCO file as three tables (see :mod:`evalengine.schema`)."""

    images: pl.DataFrame
    categories: pl.DataFrame
    gt: pl.DataFrame


def _read_json(path: Path, json_schema: dict) -> pl.DataFrame:
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    try:
        return pl.read_json(path, schema=json_schema)
    except (pl.exceptions.PolarsError, ValueError, OSError) as exc:
        first_line = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{path}: not a valid COCO JSON file of the expected shape ({first_line}){_context(path, first_line)}") from exc


def _context(path: Path, message: str) -> str:
    """The text around the parser's error position; NaN and Infinity (Python's json writes them) are named."""
    found = re.search(r"at character (\d+)", message)
    if not found:
        return ""
    at = int(found.group(1))
    with open(path, "rb") as handle:
        handle.seek(max(at - 40, 0))
        text = handle.read(80).decode("utf-8", "replace")
    hint = " NaN and Infinity are not valid JSON numbers." if re.search(r"NaN|Infinity", text) else ""
    return f" near: ...{text}...{hint}"


def _listed(values) -> str:
    values = list(values)
    more = f" and {len(values) - _SHOWN} more" if len(values) > _SHOWN else ""
    return ", ".join(str(v) for v in values[:_SHOWN]) + more


def _explode(frame: pl.DataFrame, key: str) -> pl.DataFrame:
    return frame.select(pl.col(key).explode()).drop_nulls().unnest(key)


def _boxes(frame: pl.DataFrame, path: Path, what: str, id_expr: pl.Expr) -> pl.DataFrame:
    """Split a ``bbox`` list column into ``x, y, w, h``, rejecting malformed, non-finite or negative boxes."""
    bad_len = frame.filter(pl.col("bbox").is_null() | (pl.col("bbox").list.len() != 4))
    if bad_len.height:
        raise InputError(
            f"{path}: {what} {_listed(bad_len.select(id_expr).to_series())}: 'bbox' must be a list of 4 numbers [x, y, w, h]"
        )
    frame = frame.with_columns(
        [pl.col("bbox").list.get(i).alias(c) for i, c in enumerate(("x", "y", "w", "h"))]
    ).drop("bbox")
    finite = pl.all_horizontal([pl.col(c).is_finite() for c in ("x", "y", "w", "h")])
    bad = frame.filter(~finite)
    if bad.height:
        raise InputError(f"{path}: {what} {_listed(bad.select(id_expr).to_series())}: 'bbox' has a non-finite value")
    bad = frame.filter((pl.col("w") < 0) | (pl.col("h") < 0))
    if bad.height:
        raise InputError(f"{path}: {what} {_listed(bad.select(id_expr).to_series())}: 'bbox' has a negative width or height")
    return frame


def _require(frame: pl.DataFrame, columns, path: Path, what: str, id_expr: pl.Expr) -> None:
    for column in columns:
        missing = frame.filter(pl.col(column).is_null())
        if missing.height:
            raise InputError(f"{path}: {what} {_listed(missing.select(id_expr).to_series())}: missing field '{column}'")


def _unique(frame: pl.DataFrame, column: str, path: Path, what: str) -> None:
    dup = frame.filter(pl.col(column).is_duplicated()).get_column(column).unique().sort()
    if dup.len():
        raise InputError(f"{path}: duplicate {what} id {_listed(dup)}")


def read_coco_gt(path) -> CocoDataset:
    """Read a COCO ground-truth file (``images``, ``annotations``, ``categories``).

    pycocotools conventions kept: ``area`` is the annotation's field (the segmentation area for COCO);
    ``iscrowd`` drives ignoring; annotations keep their file order (``gt_order``).
    """
    path = Path(path)
    raw = _read_json(path, _GT_FILE)
    for key in ("images", "annotations", "categories"):
        if raw.height == 0 or raw.get_column(key).null_count() == raw.height:
            raise InputError(f"{path}: missing the top-level list '{key}'")

    images = _explode(raw, "images").with_row_index("row")
    _require(images, ["id"], path, "image at position", pl.col("row"))
    _unique(images, "id", path, "image")
    images = images.drop("row").rename({"id": "image_id"})

    categories = _explode(raw, "categories").with_row_index("row")
    _require(categories, ["id"], path, "category at position", pl.col("row"))
    _unique(categories, "id", path, "category")
    categories = categories.drop("row").rename({"id": "category_id"}).sort("category_id")

    gt = _explode(raw, "annotations").with_row_index("gt_order").with_columns(pl.col("gt_order").cast(pl.Int64))
    _require(gt, ["id"], path, "annotation at position", pl.col("gt_order"))
    _unique(gt, "id", path, "annotation")
    ann = pl.col("id")
    _require(gt, ["image_id", "category_id"], path, "annotation", ann)
    gt = _boxes(gt, path, "annotation", ann)
    unknown = gt.filter(~pl.col("image_id").is_in(images.get_column("image_id").implode()))
    if unknown.height:
        raise InputError(f"{path}: annotation {_listed(unknown.get_column('id'))}: 'image_id' not in 'images'")
    unknown = gt.filter(~pl.col("category_id").is_in(categories.get_column("category_id").implode()))
    if unknown.height:
        raise InputError(f"{path}: annotation {_listed(unknown.get_column('id'))}: 'category_id' not in 'categories'")
    bad = gt.filter(pl.col("area").is_not_null() & ~(pl.col("area").is_finite() & (pl.col("area") >= 0)))
    if bad.height:
        raise InputError(f"{path}: annotation {_listed(bad.get_column('id'))}: 'area' must be a finite number >= 0")
    no_area = gt.filter(pl.col("area").is_null())
    if no_area.height:
        warnings.warn(
            f"{path}: annotation {_listed(no_area.get_column('id'))} has no 'area'; using w*h of its bbox "
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


def read_coco_results(path, dataset: CocoDataset) -> pl.DataFrame:
    """Read a COCO bbox result file (a JSON list of ``image_id, category_id, bbox, score``).

    As pycocotools ``loadRes``: detection ids are the 1-based file positions, ``area = w*h``, and every
    ``image_id`` must be an image of the ground truth. Detections of a category absent from the ground
    truth are kept in the store but warned about (pycocotools silently leaves them out of evaluation).
    """
    path = Path(path)
    raw = _read_json(path, _RESULT)
    if raw.height == 0:
        raise InputError(f"{path}: the result list is empty (pycocotools cannot evaluate it either)")
    dt = raw.with_row_index("det_id", offset=1).with_columns(pl.col("det_id").cast(pl.Int64))
    row = pl.col("det_id") - 1
    _require(dt, ["image_id", "category_id", "bbox", "score"], path, "result at position", row)
    dt = _boxes(dt, path, "result at position", row)
    bad = dt.filter(~pl.col("score").is_finite())
    if bad.height:
        raise InputError(f"{path}: result at position {_listed(bad.select(row).to_series())}: 'score' is not finite")
    unknown = dt.filter(~pl.col("image_id").is_in(dataset.images.get_column("image_id").implode()))
    if unknown.height:
        ids = unknown.get_column("image_id").unique().sort()
        raise InputError(f"{path}: image_id {_listed(ids)} not in the ground truth's images")
    unknown = dt.filter(~pl.col("category_id").is_in(dataset.categories.get_column("category_id").implode()))
    if unknown.height:
        ids = unknown.get_column("category_id").unique().sort()
        warnings.warn(
            f"{path}: {unknown.height} detections have category_id {_listed(ids)}, not in the ground truth's "
            "categories; they are stored but not evaluated (as in pycocotools)",
            InputWarning,
            stacklevel=2,
        )
    return dt.select(
        "det_id",
        "image_id",
        "category_id",
        "score",
        "x",
        "y",
        "w",
        "h",
        (pl.col("w") * pl.col("h")).alias("area"),
    )
