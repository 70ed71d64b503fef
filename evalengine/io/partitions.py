"""Partitions (label maps) as read from files and as stored: region ids by first appearance, run-length encoded.

A partition is a label map whose label values are its regions (SEISM ``relabel``: a value seen in two blobs is one
region). Files: ``.png`` (8/16-bit grey, palette indices, or RGB colours read as ``r·2¹⁶ + g·2⁸ + b``), ``.npy`` (a
2-D integer array) and ``.npz`` (holding that one array). Ground truth holds every annotator of an image: a
``(K, H, W)`` array in ``.npy`` / ``.npz``, or ``<stem>_<k>.png`` files (k = 1, 2, …).

Stored form (spec §9.1): regions are numbered 0, 1, … by first appearance in a row-major scan (SEISM's region order,
which decides Fop's ties), then the map is run-length encoded in column-major order (pixel ``x·h + y``, COCO's RLE
order): ``start``, ``length``, ``label``; void pixels (``void_label``) have the label -1.
"""

import re
from pathlib import Path

import numba
import numpy as np
import polars as pl

from evalengine.errors import InputError

LABEL_MAP_SUFFIXES = (".png", ".npy", ".npz")
VOID = -1  # the stored label of a void pixel
_DENSE_RANGE = 1 << 22  # label values spanning less than this are looked up in an array, others compressed first


def read_label_map(path, stack: bool = False) -> np.ndarray:
    """The integer label map (``stack``: the ``(K, H, W)`` annotators) held by a ``.png``, ``.npy`` or ``.npz``."""
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".png":
        array = _read_png(path)
    elif suffix in (".npy", ".npz"):
        array = _read_numpy(path)
    else:
        raise InputError(f"{path}: not a label map (expected {', '.join(LABEL_MAP_SUFFIXES)})")
    if stack and array.ndim == 2:
        array = array[None]
    if array.ndim != (3 if stack else 2) or 0 in array.shape:
        want = "(K, H, W) or (H, W)" if stack else "(H, W)"
        raise InputError(f"{path}: a label map array must be {want} and not empty, got shape {array.shape}")
    return _integer_labels(path, array)


def _read_png(path: Path) -> np.ndarray:
    from PIL import Image, UnidentifiedImageError

    try:
        with Image.open(path) as image:
            mode = image.mode
            if "A" in mode or (mode == "P" and "transparency" in image.info):
                raise InputError(f"{path}: PNG with an alpha channel (mode {mode}); a label map has one channel "
                                 "or RGB colours")
            if mode not in ("1", "L", "P", "I", "I;16", "I;16B", "RGB"):
                raise InputError(f"{path}: PNG of mode {mode} is not a label map (grey, palette or RGB)")
            array = np.asarray(image)
    except (UnidentifiedImageError, OSError, SyntaxError) as exc:
        raise InputError(f"{path}: not a readable PNG ({exc})") from None
    if array.ndim == 3:  # RGB colours as one label each
        array = array.astype(np.int64)
        array = (array[..., 0] << 16) | (array[..., 1] << 8) | array[..., 2]
    return array


def _read_numpy(path: Path) -> np.ndarray:
    try:
        loaded = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise InputError(f"{path}: not a readable NumPy file ({exc})") from None
    if isinstance(loaded, np.ndarray):
        return loaded
    with loaded:
        if len(loaded.files) != 1:
            raise InputError(f"{path}: an .npz label map holds exactly one array, found {len(loaded.files)} "
                             f"({', '.join(loaded.files[:5])})")
        return loaded[loaded.files[0]]


def _integer_labels(path, array: np.ndarray) -> np.ndarray:
    if array.dtype.kind in "iub":
        return array
    if array.dtype.kind == "f" and np.all(np.isfinite(array)) and np.all(array == np.round(array)):
        return array.astype(np.int64)
    raise InputError(f"{path}: labels must be integers, got {array.dtype} values")


def ground_truth_files(gt_dir, stem: str) -> list:
    """The file(s) holding every annotator of ``stem`` in ``gt_dir``: one ``.npy`` / ``.npz``, or ``<stem>_<k>.png``
    in order of k (a located error when there are none, or both kinds)."""
    gt_dir = Path(gt_dir)
    arrays = [gt_dir / f"{stem}{suffix}" for suffix in (".npy", ".npz") if (gt_dir / f"{stem}{suffix}").is_file()]
    pattern = re.compile(re.escape(stem) + r"_([0-9]+)\.png", re.IGNORECASE)
    pngs = sorted((int(m.group(1)), p) for p in gt_dir.glob(f"{_glob_escape(stem)}_*")
                  if (m := pattern.fullmatch(p.name)))
    if len(arrays) + bool(pngs) != 1:
        found = "none" if not (arrays or pngs) else ", ".join(p.name for p in [*arrays, *(p for _, p in pngs)][:4])
        raise InputError(f"{gt_dir}: image '{stem}' needs one ground-truth file ({stem}.npy, {stem}.npz or "
                         f"{stem}_<k>.png), found {found}")
    if pngs and [k for k, _ in pngs] != list(range(1, len(pngs) + 1)):
        raise InputError(f"{gt_dir}: annotators of '{stem}' must be numbered {stem}_1.png … {stem}_{len(pngs)}.png, "
                         f"got k = {[k for k, _ in pngs]}")
    return arrays or [p for _, p in pngs]


def _glob_escape(text: str) -> str:
    return re.sub(r"([*?\[])", r"[\1]", text)


def read_ground_truth(gt_dir, stem: str) -> tuple:
    """``(annotators (K, H, W), where)``: every annotator of ``stem``, and the file(s) they came from."""
    files = ground_truth_files(gt_dir, stem)
    if len(files) == 1 and files[0].suffix.lower() != ".png":
        return read_label_map(files[0], stack=True), str(files[0])
    maps = [read_label_map(path) for path in files]
    for path, label_map in zip(files[1:], maps[1:]):
        if label_map.shape != maps[0].shape:
            raise InputError(f"{path}: label map is {_size(label_map)}, annotator 1 ({files[0].name}) is "
                             f"{_size(maps[0])}")
    return np.stack(maps), str(files[0].parent / f"{stem}_<k>.png")


def _size(label_map) -> str:
    return f"{label_map.shape[-2]}×{label_map.shape[-1]}"


def check_same_size(where: str, label_map: np.ndarray, gt_where: str, annotators: np.ndarray) -> None:
    """A located error unless a partition and its ground truth have the same height and width."""
    if label_map.shape[-2:] != annotators.shape[-2:]:
        raise InputError(f"{where}: label map is {_size(label_map)} (height×width), its ground truth {gt_where} is "
                         f"{_size(annotators)}")


def void_mask(where: str, annotators: np.ndarray, void_label) -> np.ndarray | None:
    """The image's void pixels (``void_label`` in the ground truth; None without one). Every annotator must have the
    same void pixels (one valid-pixel set per image, spec §9.6) and some pixel must be valid."""
    if void_label is None:
        return None
    void = annotators == void_label
    if not void.any():
        return None
    differs = np.flatnonzero((void != void[0]).any(axis=(1, 2)))
    if differs.size:
        raise InputError(f"{where}: annotator {differs[0] + 1} has void label {void_label} at other pixels than "
                         "annotator 1; the void pixels of an image must be the same in every annotator")
    if void[0].all():
        raise InputError(f"{where}: every pixel has the void label {void_label}")
    return void[0]


def encode_partition(label_map: np.ndarray, void: np.ndarray | None = None) -> tuple:
    """``(start, length, label, n_regions)`` of a label map: regions numbered by first appearance in a row-major scan
    (SEISM ``relabel``), runs in column-major order, void pixels (``void``, a mask) labelled :data:`VOID`."""
    low, high = int(label_map.min()), int(label_map.max())
    if high - low >= _DENSE_RANGE:
        values, inverse = np.unique(label_map, return_inverse=True)
        label_map, low, high = inverse.reshape(label_map.shape), 0, values.size - 1
    if label_map.dtype == np.bool_:
        label_map = label_map.view(np.uint8)
    if void is None:
        void = np.zeros((1, 1), np.bool_)
    return _encode(label_map, low, high - low + 1, void, void.shape == label_map.shape)


@numba.njit(cache=True, nogil=True)
def _encode(label_map, low, n_codes, void, has_void):
    """One row-major pass (contiguous reads): a label is looked up only where it differs from its left neighbour (a
    region first appears there), and a column-major run starts where a pixel differs from the one above it (row 0:
    from the last pixel of the previous column); the starts, met row by row, are then placed column by column."""
    h, w = label_map.shape
    region_of = np.full(n_codes, -1, np.int32)
    per_column = np.zeros(w + 1, np.int64)
    start_y = np.empty(h * w, np.int32)
    start_x = np.empty(h * w, np.int32)
    start_code = np.empty(h * w, np.int64)
    above = np.empty(w, np.int64)  # the codes of the previous row (code: label − low, -1 void)
    n_regions = 0
    m = 0
    for y in range(h):
        left = np.int64(-2)
        for x in range(w):
            code = np.int64(-1) if has_void and void[y, x] else np.int64(label_map[y, x]) - low
            if code != left and code >= 0 and region_of[code] < 0:
                region_of[code] = n_regions
                n_regions += 1
            left = code
            if y > 0 and code == above[x]:
                continue
            above[x] = code
            if y == 0 and x > 0:
                last = np.int64(-1) if has_void and void[h - 1, x - 1] else np.int64(label_map[h - 1, x - 1]) - low
                if code == last:
                    continue
            start_y[m], start_x[m], start_code[m] = y, x, code
            per_column[x + 1] += 1
            m += 1
    for x in range(w):
        per_column[x + 1] += per_column[x]
    start = np.empty(m, np.int64)
    label = np.empty(m, np.int32)
    for k in range(m):  # counting sort by column; rows stay increasing within a column
        x = start_x[k]
        at = per_column[x]
        per_column[x] += 1
        start[at] = np.int64(x) * h + start_y[k]
        label[at] = VOID if start_code[k] < 0 else region_of[start_code[k]]
    length = np.empty(m, np.int64)
    length[:-1] = start[1:] - start[:-1]
    length[-1] = h * w - start[-1]
    return start, length, label, n_regions


def image_runs(image_id: int, stem: str, annotators: np.ndarray, predictions: dict, void_label=None,
               gt_where: str = "") -> tuple:
    """One image as the store holds it: ``(image row, ground-truth runs, {run: partition runs})``, where
    ``predictions`` maps a run to ``{parameter: label map}`` (each of the ground truth's size, already checked) and
    runs are column arrays (:func:`runs_frame` makes a table of many)."""
    void = void_mask(gt_where or stem, annotators, void_label)
    gt = _runs(image_id, "annotator", {k: encode_partition(m, void) for k, m in enumerate(annotators, 1)})
    runs = {run: _runs(image_id, "parameter", {p: encode_partition(m) for p, m in sorted(by_parameter.items())})
            for run, by_parameter in predictions.items()}
    height, width = annotators.shape[1:]
    return (image_id, width, height, stem, len(annotators)), gt, runs


def _runs(image_id: int, key: str, encoded: dict) -> dict:
    """The runs of several partitions of one image (``{key value: encoded}``) as columns."""
    sizes = [runs[0].size for runs in encoded.values()]
    columns = [np.concatenate([runs[c] for runs in encoded.values()]) for c in range(3)]
    return {"image_id": np.full(sum(sizes), image_id, np.int64), key: np.repeat(np.array(list(encoded)), sizes),
            "start": columns[0], "length": columns[1], "label": columns[2]}


def runs_frame(runs: list, table_schema: dict) -> pl.DataFrame:
    """One frame of ``table_schema`` (``schema.GT_PARTITIONS`` or ``schema.SEG_PARTITIONS``) from the runs of many
    images (:func:`image_runs`), in that order."""
    return pl.DataFrame({name: np.concatenate([columns[name] for columns in runs]) if runs else []
                         for name in table_schema}, schema=table_schema)
