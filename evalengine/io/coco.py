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
from evalengine.errors import InputError, InputWarning, ZeroIdWarning, first_line
from evalengine.io.json_ground_truth import ANNOTATION, annotation_columns, extra_annotation_fields
from evalengine.io.json_read import read_json_list
from evalengine.io.json_scan import read_span, top_level_values
from evalengine.io.json_text import Piece, line_column, parse_values
from evalengine.io.masks import check_keypoints, masks, segmentation_text
from evalengine.io.validate import check_boxes, integers, listed, require, split_bbox, unique

RESULT_FIELDS = {"image_id": pl.Int64, "category_id": pl.Int64, "bbox": pl.List(pl.Float64), "score": pl.Float64}
# the fields of images and categories the store types itself (others are kept with the type their values have)
_IMAGE_FIELDS = {"id": pl.Int64, "width": pl.Int64, "height": pl.Int64, "file_name": pl.String}
_CATEGORY_FIELDS = {"id": pl.Int64, "name": pl.String, "supercategory": pl.String}


@dataclass(frozen=True)
class CocoDataset:
    """The ground truth of a COCO file as three tables (see :mod:`evalengine.schema`)."""

    images: pl.DataFrame
    categories: pl.DataFrame
    gt: pl.DataFrame


def _with_id(frame: pl.DataFrame, path: Path, what: str, table_schema: dict) -> pl.DataFrame:
    """Validate the ``id`` of a list of images or categories and bring it to ``table_schema``.

    Every other field of the source is kept (COCO image attributes, LVIS frequencies, …); a field whose
    name the store uses for itself is kept as ``source_<name>``.
    """
    id_column = f"{what}_id"
    if "id" not in frame.columns:
        frame = frame.with_columns(pl.lit(None, dtype=pl.Int64).alias("id"))
    own = {id_column, "shard"} & set(table_schema)  # columns the store fills itself
    frame = frame.rename(_stored_names(frame.columns, own, path, f"{what}s"))
    frame = frame.with_row_index("row", offset=1)
    require(frame, ["id"], path, f"{what} at position", pl.col("row"))
    integral = [c for c, t in table_schema.items() if t == pl.Int64 and c in frame.columns and c != id_column]
    frame = integers(frame, ["id", *integral], path, f"{what} at position", pl.col("row"))
    frame = frame.drop("row").rename({"id": id_column})
    try:
        frame = frame.with_columns(
            [pl.col(c).cast(t) if c in frame.columns else pl.lit(None, dtype=t).alias(c)
             for c, t in table_schema.items() if c != "shard"]
        )
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: {what} fields of an unexpected type ({first_line(exc)})") from None
    unique(frame, id_column, path, what)
    first = [c for c in table_schema if c != "shard"]
    return frame.select(first + [c for c in frame.columns if c not in first])


def read_coco_gt(path, kernel: bool = True) -> CocoDataset:
    """Read a COCO ground-truth file (``images``, ``annotations``, ``categories``).

    pycocotools conventions kept: ``area`` is the annotation's field (the segmentation area for COCO);
    ``iscrowd`` drives ignoring; annotations keep their file order (``gt_order``). An annotation's ``difficult`` key
    (0/1 or a boolean, as VOC→COCO converters that keep the flag write it) is the VOC protocol's difficult flag;
    mmdetection's converter writes difficult objects as ``iscrowd: 1`` and Detectron's VOC files as ``ignore: 1``
    instead, which the VOC protocol does not read as difficult (see :mod:`evalengine.io.voc`).

    The annotations are parsed by the kernel of :mod:`evalengine.io.json_ground_truth` where it can (``kernel=False``:
    the exact reader alone, which gives the same tables and errors), the rest by the exact reader.
    """
    path = Path(path)
    if path.is_dir():
        raise InputError(f"{path}: a PASCAL VOC folder (Annotations/), where a COCO ground-truth JSON file is expected; "
                         "evaluate it with `evalengine voc`" if (path / "Annotations").is_dir() else
                         f"{path}: a folder, where a COCO ground-truth JSON file is expected")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    parsed = annotation_columns(path) if kernel else None
    spans = parsed[0] if parsed else top_level_values(path)
    for key in ("images", "annotations", "categories"):
        if key not in spans:
            raise InputError(f"{path}: missing the top-level list '{key}'")

    for key, span in spans.items():  # the values not read below are JSON too (pycocotools reads them all)
        if key in ("images", "annotations", "categories"):
            continue
        text = read_span(path, span)
        if len(parse_values(Piece(path, text, span[0]), where=False)[0]) != 1:
            at = span[0] + len(text) - len(text.lstrip())
            raise InputError(f"{path}: {line_column(path, at)}: expected a value for '{key}'")
    images = _with_id(read_json_list(path, _IMAGE_FIELDS, spans["images"], "image", infer=True), path, "image",
                      schema.IMAGES)
    categories = _with_id(read_json_list(path, _CATEGORY_FIELDS, spans["categories"], "category", infer=True),
                          path, "category", schema.CATEGORIES).sort("category_id")
    try:
        categories = categories.cast({c: t for c, t in schema.CATEGORY_KEYPOINTS.items() if c in categories.columns})
    except pl.exceptions.PolarsError as exc:
        raise InputError(f"{path}: categories' 'keypoints' or 'skeleton' of an unexpected type ({first_line(exc)})"
                         ) from None
    if not categories.height:
        raise InputError(f"{path}: 'categories' is empty, so there is nothing to evaluate (pycocotools would report "
                         "-1 for every metric)")
    if parsed:
        gt, extra = parsed[1], {c: t for c, t in parsed[1].schema.items() if c not in ANNOTATION.to_schema()}
    else:
        extra = extra_annotation_fields(path, spans["annotations"])
        gt = read_json_list(path, {**ANNOTATION.to_schema(), **extra}, spans["annotations"], "annotation")
    gt = (gt.rename(_stored_names(extra, _GT_OWN, path, "annotations"))
          .with_row_index("gt_order").with_columns(pl.col("gt_order").cast(pl.Int64)))
    require(gt, ["id"], path, "annotation at position", pl.col("gt_order") + 1)
    unique(gt, "id", path, "annotation")
    ann = pl.col("id")
    require(gt, ["image_id", "category_id"], path, "annotation", ann)
    # the kernel reads four numbers as the box, or gives up
    gt = pl.concat([gt, parsed[2]], how="horizontal") if parsed else split_bbox(gt, path, "annotation", ann)
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
            "(the 'coco' protocol keeps that quirk; --keep-zero-id-quirk 0, or zero_id_quirk=False in Python, "
            "fixes it)",
            ZeroIdWarning,
            stacklevel=2,
        )
    shapes = _shapes(gt, images, path)
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
        (pl.col("difficult") != 0).alias("difficult"),
        "gt_order",
        *_stored_names(extra, _GT_OWN, path, "annotations").values(),
    )
    gt = pl.concat([gt, shapes], how="horizontal") if shapes.width else gt
    gt = gt.with_columns([pl.col(c).cast(t) for c, t in schema.GT.items()])
    return CocoDataset(images=images, categories=categories, gt=gt)


_GT_OWN = set(schema.GT) | set(schema.MASK) | set(schema.GT_KEYPOINTS) | {"shard"}


def _shapes(gt: pl.DataFrame, images: pl.DataFrame, path: Path) -> pl.DataFrame:
    """The mask columns (if an annotation has a ``segmentation``) and the keypoint columns (if one has ``keypoints``
    or ``num_keypoints``) of the annotations, in their order; none where no annotation has them (see
    :data:`evalengine.schema.MASK`). A segmentation is Polars' JSON reader's text, or the kernel's parsed values."""
    columns = []
    if gt.get_column("segmentation").null_count() < gt.height:
        text = gt.with_columns(segmentation_text(pl.col("segmentation"), gt.schema["segmentation"], json_reader=True))
        columns.append(masks(text, images, path, "annotation", pl.col("id")).columns)
    if any(gt.get_column(c).null_count() < gt.height for c in schema.GT_KEYPOINTS):
        check_keypoints(gt, path, "annotation", pl.col("id"))
        columns.append(gt.select(list(schema.GT_KEYPOINTS)))
    return pl.concat(columns, how="horizontal") if columns else pl.DataFrame()


def _stored_names(names, own: set, path: Path, what: str) -> dict:
    """``{name: stored name}``: a source field named like one of the store's own columns (``own``) is kept as
    ``source_<name>``, unless the source has that field too."""
    renamed = {name: f"source_{name}" if name in own else name for name in names}
    clash = sorted(set(renamed.values()) & (set(names) - own) & {f"source_{name}" for name in own})
    if clash:
        raise InputError(f"{path}: the {what} have both '{clash[0].removeprefix('source_')}' (a name the store uses, "
                         f"kept as '{clash[0]}') and '{clash[0]}'")
    return renamed
