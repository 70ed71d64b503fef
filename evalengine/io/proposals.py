"""Object-proposal files: class-agnostic boxes per image, with a score or in a given order.

Formats (by extension):

- ``.json``: a COCO result file (``image_id``, ``bbox`` ``[x, y, w, h]``, optional ``score``), parsed in
  chunks of whole objects;
- ``.jsonl`` / ``.ndjson``, ``.parquet``: columns ``image_id`` and either ``x1, y1, x2, y2`` or
  ``bbox`` ``[x, y, w, h]``, optional ``score``;
- ``.csv``: columns ``image_id`` and either ``x1, y1, x2, y2`` or ``x, y, w, h``, optional ``score``, read by the
  header's names as detection CSV is (:mod:`evalengine.io.csv_tables`);
- segmented proposals (Pont-Tuset & Marques §2.3): ``.json``, ``.jsonl`` / ``.ndjson`` or ``.parquet`` with a COCO
  ``segmentation`` (polygons, compressed or uncompressed RLE, read as :mod:`evalengine.io.masks` reads results) in
  the size of its image instead of a box; the box is the mask's (``toBbox``) unless a ``bbox`` is given, as
  ``loadRes``; or a folder of PNG masks (:mod:`evalengine.io.proposal_masks`);

A ``category_id``, if present, is kept but proposals are class-agnostic: only the ``coco`` protocol reads it,
to order tied scores as pycocotools does with ``useCats=0``.
- a folder of ``.npz`` files, one per image, named by image id (or by the image's ``file_name`` stem),
  each with ``boxes`` (n×4, ``x1, y1, x2, y2``) and optionally ``scores``.

``proposal_id`` is the 1-based position in the source (files of a folder in name order), so the given
order is kept. Boxes are stored as continuous ``x, y, w, h``; ``box_convention="pixel-inclusive"``
reads 1-based inclusive pixel boxes (PASCAL VOC, Hosang's toolbox) as ``x = x1 - 1, w = x2 - x1 + 1``,
under which the toolbox's "+1" IoU equals the continuous IoU.
"""

from contextlib import closing
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from evalengine import schema
from evalengine.errors import InputError, check_option, first_line
from evalengine.io.coco import RESULT_FIELDS
from evalengine.io.detections import BATCH_ROWS, json_lines_fields, parsed_in_parallel, result_fields
from evalengine.io.masks import masks, segmentation_text
from evalengine.io.proposal_masks import image_of_stem, png_batches
from evalengine.io.csv_tables import CORNERS, csv_batches, from_corners, header_columns
from evalengine.io.validate import BOX_COLUMNS, check_boxes, integers, listed, numbers, require, split_bbox

FORMATS = (".json", ".jsonl", ".ndjson", ".parquet", ".csv")
BOX_CONVENTIONS = ("continuous", "pixel-inclusive")


def _columns(path: Path, names) -> list:
    names = list(names)
    if "bbox" in names:
        box = ["bbox"]
    elif all(c in names for c in CORNERS):
        box = list(CORNERS)
    elif "segmentation" in names:
        box = []
    else:
        raise InputError(f"{path}: expected columns x1, y1, x2, y2 or bbox, or segmentation "
                         f"(found {', '.join(names)})")
    if "image_id" not in names:
        raise InputError(f"{path}: missing column image_id (found {', '.join(names)})")
    return ["image_id", *box, *[c for c in ("score", "category_id", "segmentation") if c in names]]


def _file_batches(path: Path, batch_rows: int) -> Iterator[pl.DataFrame]:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"{path}: unknown proposal format '{suffix}' (expected one of {', '.join(FORMATS)} "
                         "or a folder of .npz files)")
    if suffix == ".json":
        fields = result_fields(path)
        yield from parsed_in_parallel(path, {c: fields[c] for c in (*RESULT_FIELDS, "segmentation") if c in fields},
                                      "proposal")
        return
    if suffix in (".jsonl", ".ndjson"):
        yield from parsed_in_parallel(path, json_lines_fields(path, _columns), "proposal", lines=True)
        return
    try:
        if suffix == ".parquet":
            file = pq.ParquetFile(path)
            columns = _columns(path, file.schema_arrow.names)
            for batch in file.iter_batches(batch_size=batch_rows, columns=columns):
                yield pl.from_arrow(batch)
        else:
            columns = header_columns(path, ["image_id"], optional=("score", "category_id"))
            yield from csv_batches(path, columns, ("image_id", "category_id"), "proposal at position", batch_rows)
    except (pl.exceptions.PolarsError, OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable proposal file ({first_line(exc)})") from None


def _npz_batches(folder: Path, images: pl.DataFrame) -> Iterator[pl.DataFrame]:
    files = sorted(folder.glob("*.npz"))
    image_of = image_of_stem(images)
    for file in files:
        image_id = image_of(file.stem)
        if image_id is None:
            raise InputError(f"{file}: no image with id or file name '{file.stem}' in the ground truth")
        try:
            with np.load(file) as data:
                boxes, scores = data["boxes"], data["scores"] if "scores" in data else None
        except (OSError, ValueError, KeyError, EOFError) as exc:
            raise InputError(f"{file}: not a proposal .npz with an array 'boxes' ({first_line(exc)})") from None
        for name, array in (("boxes", boxes), ("scores", scores)):
            if array is not None and array.dtype.kind not in "iuf":
                raise InputError(f"{file}: '{name}' must hold numbers, not {array.dtype}")
        boxes = boxes.astype(np.float64)
        scores = None if scores is None else scores.astype(np.float64)
        if boxes.ndim != 2 or boxes.shape[1] != 4:
            raise InputError(f"{file}: 'boxes' must have shape (n, 4) as x1, y1, x2, y2, got {boxes.shape}")
        if scores is not None and scores.shape != (boxes.shape[0],):
            raise InputError(f"{file}: 'scores' must have shape ({boxes.shape[0]},), got {scores.shape}")
        frame = pl.DataFrame({"image_id": np.full(boxes.shape[0], image_id, np.int64),
                              **{c: boxes[:, i] for i, c in enumerate(CORNERS)}})
        yield frame.with_columns(pl.Series("score", scores, dtype=pl.Float64)) if scores is not None else frame


def _normalise(raw: pl.DataFrame, path: Path, offset: int, images: pl.DataFrame, box_convention: str) -> pl.DataFrame:
    """Validate one batch and bring it to :data:`evalengine.schema.PROPOSALS_RAW` (and :data:`evalengine.schema.MASK`
    for segmented proposals)."""
    frame = raw.with_row_index("proposal_id", offset=offset + 1).with_columns(pl.col("proposal_id").cast(pl.Int64))
    row = pl.col("proposal_id")  # 1-based, as the ordering errors and the stored proposal_id
    what = "proposal at position"
    segmented = "segmentation" in frame.columns
    needed = ("image_id", "segmentation") if segmented else ("image_id", "bbox", *CORNERS, *BOX_COLUMNS)
    require(frame, [c for c in needed if c in frame.columns], path, what, row)
    image_ids = images.get_column("image_id")
    shaped = None
    if segmented:
        if box_convention != "continuous":
            raise InputError(f"{path}: box convention '{box_convention}' is for proposal boxes; segmented proposals' "
                             "boxes are their masks' (toBbox)")
        frame = _known_images(integers(frame, ["image_id"], path, what, row), path, image_ids)
        frame = frame.with_columns(segmentation_text(pl.col("segmentation"), frame.schema["segmentation"],
                                                      json_reader=path.suffix.lower() != ".parquet"))
        shaped = masks(frame, images, path, what, row)
        given = pl.col("bbox") if "bbox" in frame.columns else pl.lit(None, pl.List(pl.Float64))
        mask_box = pl.Series(shaped.bbox()).cast(pl.List(pl.Float64))
        frame = frame.with_columns(pl.when(given.is_null() | (given.list.len() == 0)).then(mask_box).otherwise(given)
                                   .alias("bbox"))
    if "bbox" in frame.columns:
        frame = split_bbox(frame, path, what, row)
    if "x" in frame.columns:
        if box_convention == "pixel-inclusive":
            frame = frame.with_columns(pl.col("x", "y") - 1.0)
    else:
        frame = numbers(frame, CORNERS, path, what, row)
        x, y, w, h = from_corners(*map(pl.col, CORNERS), pixel_inclusive=box_convention == "pixel-inclusive")
        frame = frame.with_columns(x=x, y=y, w=w, h=h)
    frame = frame.with_columns([pl.lit(None, dtype=schema.PROPOSALS_RAW[c]).alias(c)
                                for c in ("score", "category_id") if c not in frame.columns])
    frame = integers(frame, ["image_id", "category_id"], path, what, row)
    frame = numbers(frame, ["score", *BOX_COLUMNS], path, what, row)
    check_boxes(frame, path, what, row)
    bad = frame.filter(pl.col("score").is_not_null() & ~pl.col("score").is_finite())
    if bad.height:
        raise InputError(f"{path}: {what} {listed(bad.select(row).to_series())}: 'score' is not finite")
    frame = _known_images(frame, path, image_ids).select(list(schema.PROPOSALS_RAW)).cast(schema.PROPOSALS_RAW)
    return frame if shaped is None else pl.concat([frame, shaped.columns], how="horizontal")


def _known_images(frame: pl.DataFrame, path: Path, image_ids: pl.Series) -> pl.DataFrame:
    unknown = frame.filter(~pl.col("image_id").is_in(image_ids.implode()))
    if unknown.height:
        raise InputError(f"{path}: image_id {listed(unknown.get_column('image_id').unique().sort())} "
                         "not in the ground truth's images")
    return frame


def iter_proposals(path, images: pl.DataFrame, box_convention: str = "continuous",
                   batch_rows: int = BATCH_ROWS) -> Iterator[pl.DataFrame]:
    """Validated proposal batches (schema :data:`evalengine.schema.PROPOSALS_RAW`) of a file or .npz folder."""
    check_option("box_convention", box_convention, BOX_CONVENTIONS, InputError)
    path = Path(path)
    if not path.exists():
        raise InputError(f"{path}: no such file or folder")
    if path.is_dir():
        raw_batches = _npz_batches(path, images) if any(path.glob("*.npz")) else png_batches(path, images)
    else:
        raw_batches = _file_batches(path, batch_rows)
    n_rows = 0
    # closed here, not by the garbage collector: a half-read JSON file holds a thread pool, which must not be
    # shut down from whatever thread happens to collect it
    with closing(raw_batches):
        for raw in raw_batches:
            if raw.height:  # an empty list (or chunk) is no batch
                yield _normalise(raw, path, n_rows, images, box_convention)
                n_rows += raw.height
    if n_rows == 0:
        raise InputError(f"{path}: no proposals")
