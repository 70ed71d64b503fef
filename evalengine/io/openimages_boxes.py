"""OpenImages box CSVs for the COCO and VOC protocols: the boxes file (``ImageID, LabelName, XMin, XMax, YMin, YMax,
IsGroupOf``) as ground truth and the predictions file (``ImageID, LabelName, Score, XMin, …``, CSV or Parquet) as
detections, read and checked by :mod:`evalengine.io.openimages`'s readers (columns by header name, located errors).

The corners are normalised: the image sizes come from a table or a folder of images (:mod:`evalengine.io.image_sizes`,
``image`` naming an ImageID), and the stored box is ``x = XMin * W``, ``y = YMin * H``, ``w = XMax * W - x``, ``h =
YMax * H - y`` (not rounded). No hierarchy is read or expanded: the categories are the LabelNames of the boxes file in
sorted order, named by them. ``IsGroupOf`` becomes ``iscrowd`` (the COCO protocol then
ignores what matches a group-of box, as the challenge does, but by IoU over the detection's area, not IoA over one
group TP). The images are those of the sizes (every box's ImageID must have a size)."""

import warnings
from pathlib import Path
from typing import Iterator

import polars as pl

from evalengine.errors import InputError, InputWarning
from evalengine.io.coco import CocoDataset
from evalengine.io.ground_truth import categories_of, dataset_of, numbered_images
from evalengine.io.image_sizes import read_image_sizes, stem
# the OpenImages readers' checks, shared rather than repeated
from evalengine.io.openimages import _ROW, BOX_COLUMNS, _check_corners, _checked, _prediction_batches, _read_csv

_KEYS = ("ImageID", "LabelName", *BOX_COLUMNS)


def _pixels(frame: pl.DataFrame, path, sizes: pl.DataFrame, what: str) -> pl.DataFrame:
    """The rows with their image's id and the de-normalised box; a row of an image without a size is an error."""
    frame = frame.join(sizes.select(pl.col("stem").alias("ImageID"), "image_id", "width", "height"), on="ImageID",
                       how="left", maintain_order="left")
    bad = frame.filter(pl.col("width").is_null() | pl.col("height").is_null())
    if bad.height:
        raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: ImageID {bad.get_column('ImageID')[0]!r} has no "
                         f"size in the image sizes ({bad.height} {what} row(s))")
    x, y = pl.col("XMin") * pl.col("width"), pl.col("YMin") * pl.col("height")
    return frame.with_columns(x.alias("x"), y.alias("y"), (pl.col("XMax") * pl.col("width") - x).alias("w"),
                              (pl.col("YMax") * pl.col("height") - y).alias("h"))


def read_openimages_gt(path, images) -> CocoDataset:
    """An OpenImages boxes CSV as COCO-style ground truth (sizes from ``images``: a table or a folder)."""
    path = Path(path)
    sizes = numbered_images(read_image_sizes(images))
    frame = _read_csv(path, (*_KEYS, "IsGroupOf"), "boxes")
    names = sorted(frame.get_column("LabelName").drop_nulls().unique())
    categories = categories_of(names)
    classes = categories.select(pl.col("name").alias("LabelName"), "category_id")
    frame = _checked(frame, path, "box", classes, BOX_COLUMNS, ("IsGroupOf",))
    _check_corners(frame, path, "box", ordered=True)
    frame = _pixels(frame, path, sizes, "box").with_columns((pl.col("IsGroupOf") == 1.0).alias("iscrowd"))
    return dataset_of(sizes, categories, frame)


def iter_openimages_predictions(path, dataset: CocoDataset) -> Iterator[pl.DataFrame]:
    """Detection frames of an OpenImages predictions file, in batches; a detection's id is its 1-based row. Predictions
    of LabelNames without a box are left out with one warning. Unlike the
    challenge (which drops them with a warning), a prediction on an image without a size is an error, as any detection
    of an image outside the ground truth is for the COCO protocol."""
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    classes = dataset.categories.select(pl.col("name").alias("LabelName"), "category_id")
    sizes = dataset.images.with_columns(stem(pl.col("file_name")).alias("stem"))
    offset, unknown = 0, 0
    for raw in _prediction_batches(path, (*_KEYS[:2], "Score", *BOX_COLUMNS)):
        frame = raw.with_row_index("_row", offset)
        offset += raw.height
        known = frame.filter(pl.col("LabelName").is_in(classes.get_column("LabelName").implode())
                             | pl.col("LabelName").is_null())
        unknown += frame.height - known.height
        frame = _checked(known, path, "prediction", classes, ("Score", *BOX_COLUMNS))
        bad = frame.filter(~pl.col("Score").is_finite())
        if bad.height:
            raise InputError(f"{path}: line {bad.select(_ROW).item(0, 0)}: 'Score' is not a finite number")
        _check_corners(frame, path, "prediction", ordered=True)
        frame = _pixels(frame, path, sizes, "prediction")
        yield frame.select((pl.col("_row") + 1).cast(pl.Int64).alias("det_id"), "image_id", "category_id",
                           pl.col("Score").alias("score"), "x", "y", "w", "h", (pl.col("w") * pl.col("h")).alias("area"))
    if offset == 0:
        raise InputError(f"{path}: the file holds no predictions")
    if unknown:
        warnings.warn(f"{path}: {unknown} prediction(s) of LabelNames without a ground-truth box are left out (the COCO "
                      "protocol evaluates only the ground truth's categories)", InputWarning, stacklevel=2)
