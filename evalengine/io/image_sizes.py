"""Image sizes for formats whose boxes are normalised (YOLO txt, OpenImages CSV): from a folder of images (each file's
header read by Pillow, never its pixels) or from a table (CSV or Parquet ``image, width, height``, ``image`` naming an
image by its file name or its stem)."""

from pathlib import Path

import polars as pl

from evalengine.errors import InputError, first_line
from evalengine.io.metadata import read_table
from evalengine.io.validate import integers, listed

# the image suffixes ultralytics reads (``ultralytics.data.utils.IMG_FORMATS``)
IMAGE_SUFFIXES = (".bmp", ".dng", ".jpeg", ".jpg", ".mpo", ".png", ".tif", ".tiff", ".webp", ".pfm", ".heic")
SIZES = {"file_name": pl.String, "stem": pl.String, "width": pl.Int64, "height": pl.Int64}


def stem(name: pl.Expr) -> pl.Expr:
    """A file name without its extension (the name a label or CSV file gives its image by)."""
    return name.str.replace(r"\.[^./\\]*$", "")


def image_files(folder: Path) -> list:
    """The image files of a folder (not its subfolders), in name order."""
    return sorted(p for p in folder.iterdir() if p.suffix.lower() in IMAGE_SUFFIXES and not p.name.startswith("."))


def _folder_sizes(folder: Path) -> pl.DataFrame:
    from PIL import Image, UnidentifiedImageError  # only here: the command's start-up does not load Pillow

    rows = []
    for path in image_files(folder):
        try:
            with Image.open(path) as image:  # lazy: reads the header only
                rows.append((path.name, path.stem, *image.size))
        except (OSError, UnidentifiedImageError) as exc:
            raise InputError(f"{path}: not a readable image ({first_line(exc)})") from None
    if not rows:
        raise InputError(f"{folder}: no image file ({', '.join(IMAGE_SUFFIXES)}) in this folder")
    return pl.DataFrame(rows, schema=SIZES, orient="row")


def _table_sizes(path: Path) -> pl.DataFrame:
    parquet = path.suffix.lower() == ".parquet"
    frame = read_table(path)
    missing = [c for c in ("image", "width", "height") if c not in frame.columns]
    if missing:
        raise InputError(f"{path}: the image sizes table needs column(s) {', '.join(missing)} (image, width, height; "
                         f"found {', '.join(frame.columns)})")
    line = pl.col("_line")
    frame = frame.with_row_index("_line", offset=2 if not parquet else 1)
    what = "line" if not parquet else "row"
    for column in ("image", "width", "height"):
        bad = frame.filter(pl.col(column).is_null())
        if bad.height:
            raise InputError(f"{path}: {what} {listed(bad.get_column('_line'))}: empty '{column}'")
    frame = integers(frame, ["width", "height"], path, what, line)
    bad = frame.filter((pl.col("width") < 1) | (pl.col("height") < 1))
    if bad.height:
        raise InputError(f"{path}: {what} {listed(bad.get_column('_line'))}: width and height must be at least 1")
    name = pl.col("image").cast(pl.String)
    return frame.select(name.alias("file_name"), stem(name).alias("stem"), "width",
                        "height", "_line")


def read_image_sizes(source) -> pl.DataFrame:
    """``file_name, stem, width, height`` of every image of ``source`` (a folder of images, or a table), in stem
    order; an image named twice (by its stem) is an error."""
    path = Path(source)
    if path.is_dir():
        sizes = _folder_sizes(path).with_row_index("_line", offset=1)
    elif path.is_file():
        sizes = _table_sizes(path)
    else:
        raise InputError(f"{path}: no such folder of images or table of image sizes")
    dup = sizes.filter(pl.col("stem").is_duplicated())
    if dup.height:
        first = dup.sort("_line").row(0, named=True)
        raise InputError(f"{path}: image '{first['stem']}' is named more than once "
                         f"({listed(dup.get_column('file_name'))})")
    return sizes.drop("_line").sort("stem")
