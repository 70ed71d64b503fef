"""Homographies of a perturbed proposal run read from a file (the built ones are
:func:`evalengine.geometry.homography.homography_table`'s). A file (Parquet or JSON records) has columns ``image_id``,
``homography`` (9 numbers, row-major, reference → perturbed in 1-based pixel coordinates), ``width`` and ``height`` of the
perturbed image, and optionally ``ref_width`` and ``ref_height`` (default: the store's image size).
"""

import os
from pathlib import Path

import polars as pl

from evalengine import schema
from evalengine.errors import InputError, first_line
from evalengine.io.json_read import read_json_list
from evalengine.io.validate import integers, listed, numbers, require, unique

_REQUIRED = ("image_id", "homography", "width", "height")
_SIZES = ("width", "height", "ref_width", "ref_height")


def _read(path: Path) -> pl.DataFrame:
    if path.suffix.lower() != ".parquet":  # JSON records: a column no record has is missing
        fields = {c: pl.List(pl.Float64) if c == "homography" else pl.Int64 for c in schema.PERTURBATIONS}
        frame = read_json_list(path, fields, (0, os.path.getsize(path)), "record")
        return frame.select(c for c in frame.columns if frame.get_column(c).null_count() < frame.height)
    try:
        return pl.read_parquet(path)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"{path}: not a readable homography table ({first_line(exc)})") from None


def read_homographies(source, images: pl.DataFrame) -> pl.DataFrame:
    """A homography table (a frame, or a Parquet/JSON file), validated against the store's images: one row per
    image, integer sizes of at least 1 and 9 finite numbers per homography."""
    if isinstance(source, pl.DataFrame):
        frame, path = source, "homographies"
    else:
        path = Path(source)
        if not path.is_file():
            raise InputError(f"{path}: no such file")
        frame = _read(path)
    missing = set(_REQUIRED) - set(frame.columns)
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    frame, row, what = frame.with_row_index("__row", offset=1), pl.col("__row"), "record at position"
    require(frame, _REQUIRED, path, what, row)
    frame = integers(frame, ["image_id", *(c for c in _SIZES if c in frame.columns)], path, what, row)
    frame = numbers(frame, ["homography"], path, what, row)
    bad = frame.filter((pl.col("homography").list.len() != 9) |
                       ~pl.col("homography").list.eval(pl.element().is_finite().fill_null(False)).list.all())
    if bad.height:
        raise InputError(f"{path}: image_id {listed(bad.get_column('image_id'))}: 'homography' must have 9 finite "
                         "numbers")
    small = frame.filter(pl.any_horizontal(pl.col(c) < 1 for c in _SIZES if c in frame.columns))
    if small.height:
        raise InputError(f"{path}: image_id {listed(small.get_column('image_id'))}: image sizes must be at least 1")
    unique(frame, "image_id", path, "image")
    sizes = images.select("image_id", pl.col("width").alias("_w"), pl.col("height").alias("_h"))
    frame = frame.join(sizes, on="image_id", how="left")
    unknown = frame.filter(pl.col("_w").is_null()).get_column("image_id")
    if unknown.len():
        raise InputError(f"{path}: image_id {listed(unknown)} not in the store's images")
    for column, default in (("ref_width", "_w"), ("ref_height", "_h")):
        frame = frame.with_columns(pl.coalesce(*[column][:column in frame.columns], default).alias(column))
    return frame.select(list(schema.PERTURBATIONS)).cast(schema.PERTURBATIONS)
