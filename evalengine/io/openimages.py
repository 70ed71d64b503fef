"""OpenImages challenge inputs (TF Object Detection API ``metrics/oid_challenge_evaluation.py`` and
``dataset_tools/oid_hierarchical_labels_expansion.py``): CSV files read by header name, the class hierarchy JSON, and
the hierarchy expansion of the ground truth.

- boxes: ``ImageID, LabelName, XMin, XMax, YMin, YMax, IsGroupOf`` (other columns are ignored), normalised corners in
  [0, 1] with ``XMin <= XMax`` and ``YMin <= YMax``, ``IsGroupOf`` 0 or 1;
- image-level labels: ``ImageID, LabelName, Confidence`` with ``Confidence`` 0 (verified negative) or 1 (verified
  positive): either makes the class verified for the image;
- predictions: ``ImageID, LabelName, Score, XMin, XMax, YMin, YMax`` (CSV or Parquet, streamed in batches); a
  detection's id is its 1-based position in the file;
- class descriptions (optional): ``LabelName,DisplayName`` rows without a header;
- the hierarchy: nested ``{"LabelName", "Subcategory": [...], "Part": [...]}``.

The expansion is the reference's (``_build_plain_hierarchy`` with ``skip_root``): following ``Subcategory`` links
only (never ``Part``), a box and a positive label are copied to every ancestor of the class, a negative label to every
descendant; the root is not a class. Every LabelName must be a class of the hierarchy. Images are the ImageIDs of the
box and label files, numbered in sorted order (the order the reference's ``groupby('ImageID')`` adds them); the
strings are kept as the images' ``file_name`` and the categories' ``name``.
"""

import base64
import json
import warnings
import zlib
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from evalengine import schema
from evalengine.errors import InputError, InputWarning
from evalengine.io import rle
from evalengine.io.csv_tables import csv_header

BOX_COLUMNS = ("XMin", "XMax", "YMin", "YMax")
MASK_COLUMNS = ("ImageWidth", "ImageHeight", "Mask")  # the instance-segmentation track: base64 of zlib of COCO RLE
PREDICTION_BATCH_ROWS = 1_000_000
_ROW = (pl.col("_row") + 2).alias("_line")  # the 1-based line of a data row (after the header)


@dataclass(frozen=True)
class Hierarchy:
    """The class hierarchy as the reference expands with it: ``ancestors[c]`` (what a box or a positive label of
    ``c`` is copied to), ``descendants[c]`` (what a negative label is copied to), the classes in the file's order and
    its links."""

    classes: tuple
    ancestors: dict
    descendants: dict
    edges: list  # (parent, child, kind), each once, in the file's order


def read_hierarchy(path) -> Hierarchy:
    """The hierarchy JSON (a few hundred classes: read whole)."""
    path = Path(path)
    try:
        root = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as exc:
        raise InputError(f"{path}: not a readable JSON hierarchy ({exc})") from None
    ancestors, descendants, edges, order = {}, {}, {}, {}

    def walk(node, where: str, is_root: bool) -> set:
        if not isinstance(node, dict) or not isinstance(node.get("LabelName"), str):
            raise InputError(f"{path}: {where}: a node must be an object with a string 'LabelName'")
        label = node["LabelName"]
        below = set()
        for kind in ("Subcategory", "Part"):
            children = node.get(kind, [])
            if not isinstance(children, list):
                raise InputError(f"{path}: {where} ({label}): '{kind}' must be a list")
            for i, child in enumerate(children):
                child_where = f"{where}.{kind}[{i}]"
                if kind == "Part":
                    if not isinstance(child, dict) or not isinstance(child.get("LabelName"), str):
                        raise InputError(f"{path}: {child_where}: a node must be an object with a string 'LabelName'")
                    edges.setdefault((label, child["LabelName"], kind), None)
                    continue
                subtree = walk(child, child_where, False)
                edges.setdefault((label, child["LabelName"], kind), None)
                below |= subtree
        if not is_root:
            order.setdefault(label, None)
            descendants.setdefault(label, set()).update(below)
            for member in below:
                ancestors.setdefault(member, set()).add(label)
            ancestors.setdefault(label, set())
            below = below | {label}
        return below

    walk(root, "root", True)
    if not order:  # the TF evaluator refuses zero classes (ObjectDetectionEvaluation raises ValueError)
        raise InputError(f"{path}: the hierarchy has no class under its root (a 'Subcategory' list of classes)")
    return Hierarchy(tuple(order), ancestors, descendants, list(edges))


def _expansion(hierarchy: Hierarchy, table: dict, names: dict) -> pl.DataFrame:
    """``(category_id, target_id)`` pairs: each class with itself and what it expands to."""
    rows = [(names[c], names[t]) for c in hierarchy.classes for t in (c, *sorted(table.get(c, ())))]
    return pl.DataFrame(rows, schema={"category_id": pl.Int64, "target_id": pl.Int64}, orient="row")


def read_class_descriptions(path) -> dict:
    """``{LabelName: DisplayName}`` from a two-column CSV without a header (``class-descriptions-boxable.csv``)."""
    path = Path(path)
    frame = pl.read_csv(path, has_header=False, infer_schema=False, new_columns=["LabelName", "DisplayName"])
    if frame.width != 2:
        raise InputError(f"{path}: expected two columns LabelName,DisplayName, found {frame.width}")
    return dict(frame.iter_rows())


def _header_with(path: Path, columns, what: str) -> list:
    """The header of a CSV file that has each of ``columns``, else a located error naming the missing ones."""
    header = csv_header(path)
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(f"{path}: line 1: the {what} file needs column(s) {', '.join(missing)} "
                         f"(found {', '.join(header)})")
    return header


def _read_csv(path, columns, what: str, optional=()) -> pl.DataFrame:
    """``columns`` (and those of ``optional`` it has) of a CSV file, by header name, as strings, with each row's line
    number."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    header = _header_with(path, columns, what)
    columns = [*columns, *(c for c in optional if c in header)]
    return pl.read_csv(path, columns=columns, infer_schema=False).with_row_index("_row")


def _checked(frame: pl.DataFrame, path, what: str, classes: pl.DataFrame, numeric=(), flags=()) -> pl.DataFrame:
    """Located checks: no empty field, known LabelName, numbers where numbers are due, flags 0 or 1."""
    for column in (c for c in frame.columns if c not in MASK_COLUMNS):
        missing = frame.filter(pl.col(column).is_null())
        if missing.height:
            raise InputError(f"{path}: line {missing.select(_ROW).item(0, 0)}: empty '{column}'")
    for column in (*numeric, *flags):
        value = pl.col(column).str.strip_chars().cast(pl.Float64, strict=False)
        bad = frame.filter(value.is_null())
        if bad.height:
            raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: '{column}' is {bad.get_column(column)[0]!r}, "
                             "not a number")
        frame = frame.with_columns(value.alias(column))
    unknown = frame.join(classes, on="LabelName", how="anti")
    if unknown.height:
        first = unknown.row(0, named=True)
        raise InputError(f"{path}: line {first['_row'] + 2}: LabelName {first['LabelName']!r} is not a class of the "
                         f"hierarchy ({unknown.height} such rows)")
    for column in flags:
        bad = frame.filter(~pl.col(column).is_in([0.0, 1.0]))
        if bad.height:
            raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: '{column}' is "
                             f"{bad.get_column(column)[0]!r}, expected 0 or 1")
    return frame.join(classes, on="LabelName", how="left", maintain_order="left")


def _check_corners(frame: pl.DataFrame, path, what: str, ordered: bool) -> None:
    """Finite coordinates in [0, 1]; with ``ordered``, XMin <= XMax and YMin <= YMax."""
    for column in BOX_COLUMNS:
        bad = frame.filter(~pl.col(column).is_between(0.0, 1.0))
        if bad.height:
            raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: '{column}' is {bad.get_column(column)[0]!r}, "
                             f"outside [0, 1] (normalised coordinates; {bad.height} {what} row(s))")
    if ordered:
        for lo, hi in (("XMin", "XMax"), ("YMin", "YMax")):
            bad = frame.filter(pl.col(lo) > pl.col(hi))
            if bad.height:
                raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: {lo} > {hi} in a {what}")


def decode_masks(frame: pl.DataFrame, path) -> pl.DataFrame:
    """``mask_h, mask_w, mask_rle`` (:data:`evalengine.schema.MASK`) of the rows' ``Mask`` (base64 of zlib of a
    compressed COCO RLE string, ``oid_challenge_evaluation_utils._decode_raw_data_into_masks_and_boxes``) in
    ``ImageHeight × ImageWidth``; null where a row has none. Each string is inflated by zlib in turn (a C call per
    mask)."""
    has = frame.get_column("Mask").is_not_null().to_numpy()
    rows = frame.filter(pl.Series(has))
    for column in ("ImageWidth", "ImageHeight"):
        size = rows.get_column(column).str.strip_chars().cast(pl.Float64, strict=False)
        bad = rows.filter(size.is_null() | (size != size.floor()) | (size < 1))
        if bad.height:
            raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: '{column}' is {bad.get_column(column)[0]!r}, "
                             "not a positive integer (a row with a Mask needs the image's size)")
    h = rows.get_column("ImageHeight").cast(pl.Float64).cast(pl.Int64).to_numpy()
    w = rows.get_column("ImageWidth").cast(pl.Float64).cast(pl.Int64).to_numpy()
    strings = []
    for line, text in zip(rows.select(_ROW).to_series(), rows.get_column("Mask")):
        try:
            strings.append(zlib.decompress(base64.b64decode(text, validate=True)))
        except (ValueError, zlib.error) as exc:
            raise InputError(f"{path}: line {line}: 'Mask' is not base64 of zlib of a COCO RLE ({exc})") from None
    counts, offsets = rle.decode_strings(strings)
    bad = rle.first_bad_counts(counts, offsets, h, w)
    if bad >= 0:
        raise InputError(f"{path}: line {rows.select(_ROW).item(bad, 0)}: 'Mask' does not cover ImageHeight × "
                         f"ImageWidth ({h[bad]} × {w[bad]}) pixels")
    masks = pl.DataFrame({"_row": rows.get_column("_row"), "mask_h": h.astype(np.int32), "mask_w": w.astype(np.int32),
                          "mask_rle": pl.Series(rle.encode_strings(counts, offsets, arrow=True))})
    return frame.join(masks.cast({c: t for c, t in schema.MASK.items() if c in masks.columns}), on="_row", how="left",
                      maintain_order="left")


def _stored_box() -> list:
    return [pl.col("XMin").alias("x"), pl.col("YMin").alias("y"), (pl.col("XMax") - pl.col("XMin")).alias("w"),
            (pl.col("YMax") - pl.col("YMin")).alias("h"), pl.col("XMax").alias("x_max"), pl.col("YMax").alias("y_max")]


@dataclass(frozen=True)
class OpenImagesDataset:
    """The ground truth in the store's tables (``images``, ``categories``, ``gt``, ``image_labels``,
    ``category_edges``)."""

    images: pl.DataFrame
    categories: pl.DataFrame
    gt: pl.DataFrame
    image_labels: pl.DataFrame | None
    category_edges: pl.DataFrame


def _categories(hierarchy: Hierarchy, descriptions: dict | None) -> pl.DataFrame:
    """Every class of the hierarchy, numbered from 1: in the class descriptions' order where given, then in the
    hierarchy's."""
    known = set(hierarchy.classes)
    ordered = [c for c in (descriptions or {}) if c in known]
    ordered += [c for c in hierarchy.classes if c not in set(ordered)]
    names = [(descriptions or {}).get(c) for c in ordered]
    return pl.DataFrame({"category_id": range(1, len(ordered) + 1), "name": ordered, "supercategory": [None] * len(ordered),
                         "display_name": names}, schema=schema.OPENIMAGES_CATEGORIES)


def read_ground_truth(boxes, labels, hierarchy, class_descriptions=None, expand: bool = True, masks=None,
                      with_masks: bool = False) -> OpenImagesDataset:
    """Boxes, image-level labels (``None``: OpenImages V2, no verified labels) and the hierarchy, expanded (unless
    ``expand`` is False: files the reference's expansion tool already wrote). ``with_masks`` (the instance-segmentation
    track): the boxes' ``ImageWidth, ImageHeight, Mask`` columns where they have them, and ``masks``, a file of
    ``ImageID, LabelName, XMin, XMax, YMin, YMax, IsGroupOf, ImageWidth, ImageHeight, Mask`` rows merged with the boxes
    as ``oid_challenge_evaluation.py`` does (``pd.merge(how='outer')`` on those seven columns: rows in key order)."""
    tree = read_hierarchy(hierarchy)
    categories = _categories(tree, read_class_descriptions(class_descriptions) if class_descriptions else None)
    names = dict(zip(categories.get_column("name"), categories.get_column("category_id")))
    classes = categories.select(pl.col("name").alias("LabelName"), "category_id")
    keys = ("ImageID", "LabelName", *BOX_COLUMNS, "IsGroupOf")
    box = _read_csv(boxes, keys, "boxes", MASK_COLUMNS if with_masks else ())
    box = _checked(box, boxes, "box", classes, BOX_COLUMNS, ("IsGroupOf",))
    _check_corners(box, boxes, "box", ordered=True)
    order = ["_row"]
    if with_masks:
        box = decode_masks(box, boxes) if "Mask" in box.columns else box
        if masks is not None:
            extra = _read_csv(masks, (*keys, *MASK_COLUMNS), "masks")
            extra = decode_masks(_checked(extra, masks, "mask", classes, BOX_COLUMNS, ("IsGroupOf",)), masks)
            _check_corners(extra, masks, "mask", ordered=True)
            shapes = [c for c in schema.MASK if c in extra.columns]
            box = box.drop(*[c for c in MASK_COLUMNS if c in box.columns])
            merged = box.join(extra.select(*keys, "category_id", *shapes), on=[*keys, "category_id"], how="full",
                              coalesce=True, suffix="_file")
            own = [c for c in shapes if f"{c}_file" in merged.columns]  # a box's own mask first, else the file's
            merged = merged.with_columns(pl.coalesce(c, f"{c}_file").alias(c) for c in own).drop(f"{c}_file" for c in own)
            box = merged.sort("LabelName", "ImageID", *BOX_COLUMNS, "IsGroupOf", maintain_order=True).with_columns(
                pl.int_range(pl.len(), dtype=pl.UInt32).alias("_row"))
            order = [*BOX_COLUMNS, "IsGroupOf", "_row"]  # within a class, the merge's key order
    label = None
    if labels is not None:
        label = _read_csv(labels, ("ImageID", "LabelName", "Confidence"), "image-level labels")
        label = _checked(label, labels, "label", classes, flags=("Confidence",))
    image_ids = pl.concat([box.select("ImageID"), *([] if label is None else [label.select("ImageID")])]).unique()
    images = image_ids.sort("ImageID").select(
        pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("image_id"), pl.lit(None, pl.Int64).alias("width"),
        pl.lit(None, pl.Int64).alias("height"), pl.col("ImageID").alias("file_name"))
    by_name = images.select(pl.col("file_name").alias("ImageID"), "image_id")
    up = _expansion(tree, tree.ancestors if expand else {}, names)
    shapes = [c for c in schema.MASK if c in box.columns]
    gt = (box.join(by_name, on="ImageID").join(up, on="category_id").sort("target_id", "image_id", *order)
          .select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("gt_id"), "image_id",
                  pl.col("target_id").alias("category_id"), *_stored_box(),
                  ((pl.col("XMax") - pl.col("XMin")) * (pl.col("YMax") - pl.col("YMin"))).alias("area"),
                  (pl.col("IsGroupOf") == 1.0).alias("iscrowd"), pl.lit(None, pl.Boolean).alias("ignore"),
                  pl.lit(None, pl.Boolean).alias("difficult"), pl.col("_row").alias("gt_order"), *shapes))
    gt = gt.select(*schema.GT, *schema.OPENIMAGES_CORNERS, *shapes).cast({**schema.GT, **schema.OPENIMAGES_CORNERS})
    image_labels = None
    if label is not None:
        down = _expansion(tree, tree.descendants if expand else {}, names)
        positive = label.filter(pl.col("Confidence") == 1.0).join(up, on="category_id")
        negative = label.filter(pl.col("Confidence") == 0.0).join(down, on="category_id")
        image_labels = (pl.concat([positive, negative]).join(by_name, on="ImageID")
                        .select("image_id", pl.col("target_id").alias("category_id"),
                                pl.col("Confidence").cast(pl.Int8).alias("confidence"))
                        .unique().sort("image_id", "category_id", "confidence"))
    edges = pl.DataFrame([(names.get(p), names.get(c), p, c, k) for p, c, k in tree.edges],
                         schema=schema.CATEGORY_EDGES, orient="row")
    return OpenImagesDataset(images, categories, gt, image_labels, edges)


def _prediction_batches(path: Path, columns) -> Iterator[pl.DataFrame]:
    if path.suffix.lower() == ".parquet":
        parquet = pq.ParquetFile(path)
        missing = [c for c in columns if c not in parquet.schema_arrow.names]
        if missing:
            raise InputError(f"{path}: the predictions need column(s) {', '.join(missing)}")
        for batch in parquet.iter_batches(PREDICTION_BATCH_ROWS, columns=list(columns)):
            yield pl.from_arrow(batch).cast({c: pl.String for c in columns})
        return
    _header_with(path, columns, "predictions")
    yield from pl.scan_csv(path, infer_schema=False).select(columns).collect_batches(chunk_size=PREDICTION_BATCH_ROWS)


def _boxes_of_masks(frame: pl.DataFrame) -> pl.DataFrame:
    """``XMin, XMax, YMin, YMax`` of the masks' extent over the image's size (``_to_normalized_box``; 0s for an empty
    mask, which the evaluator then drops as an invalid box)."""
    flat, offsets = rle.decode_strings(frame.get_column("mask_rle").to_arrow())
    h, w = (frame.get_column(c).to_numpy().astype(np.int64) for c in ("mask_h", "mask_w"))
    box = rle.to_bbox(flat, offsets, h, w)
    empty = rle.area(flat, offsets) == 0
    x1, y1 = np.where(empty, 0.0, box[:, 0] / w), np.where(empty, 0.0, box[:, 1] / h)
    x2, y2 = np.where(empty, 0.0, (box[:, 0] + box[:, 2]) / w), np.where(empty, 0.0, (box[:, 1] + box[:, 3]) / h)
    return frame.with_columns(pl.Series("XMin", x1), pl.Series("XMax", x2), pl.Series("YMin", y1), pl.Series("YMax", y2))


def iter_predictions(path, dataset: OpenImagesDataset, with_masks: bool = False) -> Iterator[pl.DataFrame]:
    """Predictions as detection frames (schema :data:`evalengine.schema.DT` and the corners), validated batch by batch.
    Predictions on images without ground-truth rows are not evaluated by the reference (it never adds them): they are
    left out, with one warning that counts them. ``with_masks``: ``ImageWidth, ImageHeight, Mask`` instead of the
    corners, which come from the masks."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    columns = ("ImageID", "LabelName", "Score", *(MASK_COLUMNS if with_masks else BOX_COLUMNS))
    classes = dataset.categories.select(pl.col("name").alias("LabelName"), "category_id")
    by_name = dataset.images.select(pl.col("file_name").alias("ImageID"), "image_id")
    offset, unknown = 0, 0
    for raw in _prediction_batches(path, columns):
        frame = raw.with_row_index("_row", offset)
        offset += raw.height
        if with_masks:
            missing = frame.filter(pl.col("Mask").is_null())
            if missing.height:
                raise InputError(f"{path}: line {missing.select(_ROW).item(0, 0)}: empty 'Mask'")
        frame = _checked(frame, path, "prediction", classes, ("Score", *([] if with_masks else BOX_COLUMNS)))
        bad = frame.filter(~pl.col("Score").is_finite())
        if bad.height:
            raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: 'Score' is not a finite number")
        if with_masks:
            frame = _boxes_of_masks(decode_masks(frame, path))
        _check_corners(frame, path, "prediction", ordered=False)
        known = frame.join(by_name, on="ImageID", how="inner", maintain_order="left")
        unknown += frame.height - known.height
        shapes = [c for c in schema.MASK if c in known.columns]
        yield known.select((pl.col("_row") + 1).cast(pl.Int64).alias("det_id"), "image_id", "category_id",
                           pl.col("Score").alias("score"), *_stored_box(),
                           ((pl.col("XMax") - pl.col("XMin")) * (pl.col("YMax") - pl.col("YMin"))).alias("area"),
                           *shapes).select(*schema.DT, *schema.OPENIMAGES_CORNERS, *shapes
                                           ).cast({**schema.DT, **schema.OPENIMAGES_CORNERS})
    if unknown:
        warnings.warn(f"{path}: {unknown} prediction(s) on images without ground-truth rows are not evaluated "
                      "(as the reference, which never adds those images)", InputWarning, stacklevel=2)
