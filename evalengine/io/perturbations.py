"""Homographies of a perturbed proposal run: read from a file, or built for every image from a perturbation kind.

Built kinds (Hosang et al. §3.1): ``scale`` (level = factor; the perturbed image is ceil(level·W) wide, as
MATLAB's imresize), ``rotate`` (level = degrees; both the reference and the perturbed image are the common crop
of rotations within ±20°), ``flip`` (horizontal mirror), and the photometric kinds ``light``, ``jpeg``,
``blur``, ``saltnpepper``, ``none`` (identity). A file (Parquet or JSON records) has columns ``image_id``,
``homography`` (9 numbers, row-major, reference → perturbed in 1-based pixel coordinates), ``width`` and ``height`` of the
perturbed image, and optionally ``ref_width`` and ``ref_height`` (default: the store's image size).
"""

import math
from pathlib import Path

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import InputError, first_line
from evalengine.geometry.homography import flip_homography, rotation_homography, scale_homography

PHOTOMETRIC = ("light", "jpeg", "blur", "saltnpepper", "none")
KINDS = ("scale", "rotate", "flip", *PHOTOMETRIC)


def homography_table(images: pl.DataFrame, kind: str, level: float | None = None) -> pl.DataFrame:
    """Homographies and sizes of every image under one perturbation (schema :data:`evalengine.schema.PERTURBATIONS`)."""
    if kind not in KINDS:
        raise InputError(f"perturbation kind must be one of {KINDS}, got {kind!r}")
    if kind in ("scale", "rotate") and level is None:
        raise InputError(f"perturbation '{kind}' needs a level (scale factor or degrees)")
    rows = []
    for image_id, width, height in images.select("image_id", "width", "height").iter_rows():
        if width is None or height is None:
            raise InputError(f"image {image_id}: width and height are needed to build homographies")
        ref_w, ref_h, out_w, out_h = width, height, width, height
        if kind == "scale":
            h = scale_homography(level)
            out_w, out_h = math.ceil(level * width), math.ceil(level * height)
        elif kind == "rotate":
            h, ref_w, ref_h = rotation_homography(width, height, level)
            out_w, out_h = ref_w, ref_h
        elif kind == "flip":
            h = flip_homography(width)
        else:
            h = np.eye(3)
        rows.append({"image_id": image_id, "homography": h.reshape(-1).tolist(), "width": out_w, "height": out_h,
                     "ref_width": ref_w, "ref_height": ref_h})
    return pl.DataFrame(rows, schema=schema.PERTURBATIONS)


def read_homographies(source, images: pl.DataFrame) -> pl.DataFrame:
    """A homography table (a frame, or a Parquet/JSON file), validated against the store's images."""
    if isinstance(source, pl.DataFrame):
        frame, path = source, "homographies"
    else:
        path = Path(source)
        try:
            frame = pl.read_parquet(path) if path.suffix.lower() == ".parquet" else pl.read_json(path)
        except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
            raise InputError(f"{path}: not a readable homography table ({first_line(exc)})") from exc
    missing = {"image_id", "homography", "width", "height"} - set(frame.columns)
    if missing:
        raise InputError(f"{path}: missing column(s) {', '.join(sorted(missing))}")
    sizes = images.select("image_id", pl.col("width").alias("_w"), pl.col("height").alias("_h"))
    frame = frame.join(sizes, on="image_id", how="left")
    unknown = frame.filter(pl.col("_w").is_null()).get_column("image_id")
    if unknown.len():
        raise InputError(f"{path}: image_id {', '.join(map(str, unknown.head(5)))} not in the store's images")
    if not isinstance(frame.schema["homography"], pl.Array):
        bad = frame.filter(pl.col("homography").list.len() != 9).get_column("image_id")
        if bad.len():
            raise InputError(f"{path}: image_id {', '.join(map(str, bad.head(5)))}: 'homography' must have 9 numbers")
    for column, default in (("ref_width", "_w"), ("ref_height", "_h")):
        frame = frame.with_columns((pl.col(column) if column in frame.columns else pl.col(default)).alias(column))
    return frame.with_columns(pl.col("homography").cast(pl.List(pl.Float64))).select(list(schema.PERTURBATIONS)) \
        .cast(schema.PERTURBATIONS)
