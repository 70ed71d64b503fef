"""Homographies of a perturbed proposal run read from a file (the built ones are
:func:`evalengine.geometry.homography.homography_table`'s). A file (Parquet or JSON records) has columns ``image_id``,
``homography`` (9 numbers, row-major, reference → perturbed in 1-based pixel coordinates), ``width`` and ``height`` of the
perturbed image, and optionally ``ref_width`` and ``ref_height`` (default: the store's image size).
"""

from pathlib import Path

import polars as pl

from evalengine import schema
from evalengine.errors import InputError, first_line

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
