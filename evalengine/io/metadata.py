"""A user table of image metadata (CSV or Parquet keyed by ``image_id``), joined to the images table."""

import dataclasses
from pathlib import Path

import polars as pl

from evalengine import schema
from evalengine.errors import InputError, first_line
from evalengine.io.coco import CocoDataset
from evalengine.io.validate import check_csv_header, integers, listed


def read_table(path: Path) -> pl.DataFrame:
    """A user's CSV (by header, types inferred from every row) or Parquet table, or a one-line error."""
    parquet = path.suffix.lower() == ".parquet"
    if not parquet:
        check_csv_header(path)
    try:
        return pl.read_parquet(path) if parquet else pl.read_csv(path, infer_schema_length=None)
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise InputError(f"{path}: not a readable CSV or Parquet table ({first_line(exc)})") from None


def read_image_metadata(path) -> pl.DataFrame:
    path = Path(path)
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    frame = read_table(path)
    if "image_id" not in frame.columns:
        raise InputError(f"{path}: no 'image_id' column (found {', '.join(frame.columns)})")
    frame = frame.with_row_index("__evalengine_row", offset=1)
    missing = frame.filter(pl.col("image_id").is_null())
    if missing.height:
        raise InputError(f"{path}: row {listed(missing.get_column('__evalengine_row'))}: no 'image_id'")
    return integers(frame, ["image_id"], path, "row", pl.col("__evalengine_row")).drop("__evalengine_row")


def with_image_metadata(dataset: CocoDataset, path) -> CocoDataset:
    """``dataset`` with the table's columns added to its images; every row must name a known image, once, and no
    column may take the name of one the images table has (the store's own, such as ``shard``, included)."""
    meta = read_image_metadata(path)
    path = Path(path)
    dup = meta.filter(pl.col("image_id").is_duplicated()).get_column("image_id").unique().sort()
    if dup.len():
        raise InputError(f"{path}: image_id {listed(dup)} appears more than once")
    unknown = meta.filter(~pl.col("image_id").is_in(dataset.images.get_column("image_id").implode()))
    if unknown.height:
        raise InputError(f"{path}: image_id {listed(unknown.get_column('image_id'))} not in the ground truth's images")
    taken = set(dataset.images.columns) | set(schema.IMAGES)
    clash = [c for c in meta.columns if c != "image_id" and c in taken]
    if clash:
        raise InputError(f"{path}: column(s) {', '.join(clash)} already exist in the images table; rename them")
    images = dataset.images.join(meta, on="image_id", how="left", maintain_order="left")
    return dataclasses.replace(dataset, images=images)
