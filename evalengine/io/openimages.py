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

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Iterator

import polars as pl
import pyarrow.parquet as pq

from evalengine import schema
from evalengine.errors import InputError, InputWarning
from evalengine.io.validate import check_csv_header

BOX_COLUMNS = ("XMin", "XMax", "YMin", "YMax")
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


def _read_csv(path, columns, what: str) -> pl.DataFrame:
    """``columns`` of a CSV file, by header name, as strings, with each row's line number."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    check_csv_header(path)
    header = pl.read_csv(path, n_rows=0, infer_schema=False).columns
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(f"{path}: line 1: the {what} file needs column(s) {', '.join(missing)} "
                         f"(found {', '.join(header)})")
    return pl.read_csv(path, columns=list(columns), infer_schema=False).with_row_index("_row")


def _checked(frame: pl.DataFrame, path, what: str, classes: pl.DataFrame, numeric=(), flags=()) -> pl.DataFrame:
    """Located checks: no empty field, known LabelName, numbers where numbers are due, flags 0 or 1."""
    for column in frame.columns:
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


def read_ground_truth(boxes, labels, hierarchy, class_descriptions=None, expand: bool = True) -> OpenImagesDataset:
    """Boxes, image-level labels (``None``: OpenImages V2, no verified labels) and the hierarchy, expanded (unless
    ``expand`` is False: files the reference's expansion tool already wrote)."""
    tree = read_hierarchy(hierarchy)
    categories = _categories(tree, read_class_descriptions(class_descriptions) if class_descriptions else None)
    names = dict(zip(categories.get_column("name"), categories.get_column("category_id")))
    classes = categories.select(pl.col("name").alias("LabelName"), "category_id")
    box = _read_csv(boxes, ("ImageID", "LabelName", *BOX_COLUMNS, "IsGroupOf"), "boxes")
    box = _checked(box, boxes, "box", classes, BOX_COLUMNS, ("IsGroupOf",))
    _check_corners(box, boxes, "box", ordered=True)
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
    gt = (box.join(by_name, on="ImageID").join(up, on="category_id").sort("_row", "target_id")
          .select(pl.int_range(1, pl.len() + 1, dtype=pl.Int64).alias("gt_id"), "image_id",
                  pl.col("target_id").alias("category_id"), *_stored_box(),
                  ((pl.col("XMax") - pl.col("XMin")) * (pl.col("YMax") - pl.col("YMin"))).alias("area"),
                  (pl.col("IsGroupOf") == 1.0).alias("iscrowd"), pl.lit(None, pl.Boolean).alias("ignore"),
                  pl.lit(None, pl.Boolean).alias("difficult"), pl.col("_row").alias("gt_order")))
    gt = gt.select(*schema.GT, *schema.OPENIMAGES_CORNERS).cast({**schema.GT, **schema.OPENIMAGES_CORNERS})
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
    check_csv_header(path)
    header = pl.read_csv(path, n_rows=0, infer_schema=False).columns
    missing = [c for c in columns if c not in header]
    if missing:
        raise InputError(f"{path}: line 1: the predictions file needs column(s) {', '.join(missing)} "
                         f"(found {', '.join(header)})")
    yield from pl.scan_csv(path, infer_schema=False).select(columns).collect_batches(chunk_size=PREDICTION_BATCH_ROWS)


def iter_predictions(path, dataset: OpenImagesDataset) -> Iterator[pl.DataFrame]:
    """Predictions as detection frames (schema :data:`evalengine.schema.DT` and the corners), validated batch by batch.
    Predictions on images without ground-truth rows are not evaluated by the reference (it never adds them): they are
    left out, with one warning that counts them."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    columns = ("ImageID", "LabelName", "Score", *BOX_COLUMNS)
    classes = dataset.categories.select(pl.col("name").alias("LabelName"), "category_id")
    by_name = dataset.images.select(pl.col("file_name").alias("ImageID"), "image_id")
    offset, unknown = 0, 0
    for raw in _prediction_batches(path, columns):
        frame = raw.with_row_index("_row", offset)
        offset += raw.height
        frame = _checked(frame, path, "prediction", classes, ("Score", *BOX_COLUMNS))
        bad = frame.filter(~pl.col("Score").is_finite())
        if bad.height:
            raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: 'Score' is not a finite number")
        _check_corners(frame, path, "prediction", ordered=False)
        known = frame.join(by_name, on="ImageID", how="inner", maintain_order="left")
        unknown += frame.height - known.height
        yield known.select((pl.col("_row") + 1).cast(pl.Int64).alias("det_id"), "image_id", "category_id",
                           pl.col("Score").alias("score"), *_stored_box(),
                           ((pl.col("XMax") - pl.col("XMin")) * (pl.col("YMax") - pl.col("YMin"))).alias("area")
                           ).select(*schema.DT, *schema.OPENIMAGES_CORNERS).cast({**schema.DT, **schema.OPENIMAGES_CORNERS})
    if unknown:
        warnings.warn(f"{path}: {unknown} prediction(s) on images without ground-truth rows are not evaluated "
                      "(as the reference, which never adds those images)", InputWarning, stacklevel=2)
