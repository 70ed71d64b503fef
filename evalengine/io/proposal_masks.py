"""Segmented proposals as PNG files (Pont-Tuset & Marques §2.3: masks, ranked or not), one folder per input:

- ``FOLDER/<image>/<name>.png``: one mask per proposal (its non-zero pixels), ranked by file name (name them
  ``0001.png``, ``0002.png``, … in the method's order; the order of unranked methods is as good as any);
- ``FOLDER/<image>.png``: a label map whose non-zero labels are the image's proposals, ranked by label (they cannot
  overlap: a partition's regions). An RGB map's label is ``R + 256·G + 256²·B`` (COCO panoptic's id), a palette
  map's the palette index.

``<image>`` is an image id or the stem of an image's ``file_name``. A PNG has no score: rank the run with ordering
``given`` (or ``random``). Each mask goes through the results' reader (:func:`evalengine.io.masks.masks`) as an
uncompressed RLE in its image's size; a PNG of another size is a located error naming the file.
"""

import json
from pathlib import Path
from typing import Iterator

import numpy as np
import polars as pl

from evalengine.errors import InputError, first_line

BATCH_PROPOSALS = 10_000


def image_of_stem(images: pl.DataFrame):
    """A function from a file's stem to its image id (an id of ``images``, else the stem of a ``file_name``), or
    None."""
    by_stem = {}
    if "file_name" in images.columns:
        for image_id, name in images.select("image_id", "file_name").drop_nulls().iter_rows():
            by_stem[Path(name).stem] = image_id
    known = set(images.get_column("image_id").to_list())

    def image_of(stem: str):
        return int(stem) if stem.lstrip("-").isdigit() and int(stem) in known else by_stem.get(stem)
    return image_of


def run_lengths(mask: np.ndarray) -> list:
    """COCO's uncompressed counts of a 2-D mask: column-major runs, a run of 0s first."""
    flat = np.asarray(mask, bool).T.reshape(-1)
    changes = np.flatnonzero(flat[1:] != flat[:-1]) + 1
    runs = np.diff(np.concatenate([[0], changes, [flat.size]]))
    return ([0] if flat.size and flat[0] else []) + runs.tolist()


def _pixels(file: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(file) as image:
            array = np.asarray(image)
    except (OSError, UnidentifiedImageError, ValueError) as exc:
        raise InputError(f"{file}: not a readable PNG ({first_line(exc)})") from None
    if array.ndim == 3:  # RGB(A): the label R + 256 G + 256² B (an alpha channel is not a label)
        array = array[..., :3].astype(np.int64) @ np.array([1, 256, 65536], np.int64)
    return array


def _sized(file: Path, array: np.ndarray, size: tuple) -> np.ndarray:
    if array.shape != size:
        raise InputError(f"{file}: mask size [{array.shape[0]}, {array.shape[1]}] differs from its image's [height, "
                         f"width] [{size[0]}, {size[1]}]")
    return array


def _image_masks(entry: Path, size: tuple) -> Iterator[np.ndarray]:
    if entry.is_dir():
        files = sorted(entry.glob("*.png"))
        if not files:
            raise InputError(f"{entry}: a proposal folder of an image must hold .png masks (none found)")
        for file in files:
            yield _sized(file, _pixels(file), size) != 0
        return
    labels = _sized(entry, _pixels(entry), size)
    for label in np.unique(labels[labels != 0]):
        yield labels == label


def png_batches(folder: Path, images: pl.DataFrame) -> Iterator[pl.DataFrame]:
    """Raw proposal batches (``image_id``, ``segmentation`` as JSON text) of a PNG folder, images in name order."""
    entries = sorted([*folder.glob("*.png"), *(p for p in folder.iterdir() if p.is_dir())], key=lambda p: p.name)
    if not entries:
        raise InputError(f"{folder}: a proposal folder must hold .npz files, or per-image .png label maps or "
                         "folders of .png masks (none found)")
    image_of = image_of_stem(images)
    sizes = {row[0]: (row[1], row[2]) for row in images.select("image_id", "height", "width").iter_rows()}
    seen, ids, texts = {}, [], []
    for entry in entries:
        stem = entry.stem if entry.is_file() else entry.name
        image_id = image_of(stem)
        if image_id is None:
            raise InputError(f"{entry}: no image with id or file name '{stem}' in the ground truth")
        if image_id in seen:
            raise InputError(f"{entry}: image {image_id} already has proposals in {seen[image_id]}")
        seen[image_id] = entry
        h, w = sizes[image_id]
        if h is None or w is None:
            raise InputError(f"{entry}: image {image_id} has no 'height' and 'width', which its masks need")
        for mask in _image_masks(entry, (h, w)):
            ids.append(image_id)
            texts.append(json.dumps({"size": [h, w], "counts": run_lengths(mask)}))
        if len(ids) >= BATCH_PROPOSALS:
            yield pl.DataFrame({"image_id": ids, "segmentation": texts}, schema={"image_id": pl.Int64,
                                                                                "segmentation": pl.String})
            ids, texts = [], []
    if ids:
        yield pl.DataFrame({"image_id": ids, "segmentation": texts}, schema={"image_id": pl.Int64,
                                                                            "segmentation": pl.String})
