"""In-memory inputs: a COCO ground-truth dict, a list of result dicts, a Polars / pandas / Arrow table, a mapping of
column arrays, or pycocotools' ``N x 7`` NumPy array (``loadNumpyAnnotations``: image_id, x, y, w, h, score,
category_id).

Each goes through the very readers and validation of the files (:mod:`evalengine.io.coco`,
:mod:`evalengine.io.detections`): it is written to a temporary file of the matching format (JSON, Parquet), read,
and the file removed; an error names the object instead of that file (``results: detection at position 4: 'score' is
not finite``, positions 1-based as the file readers count them)."""

import contextlib
import json
import os
import shutil
import tempfile
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import polars as pl
import pyarrow as pa

from evalengine.errors import InputError, first_line

GT_LABEL = "ground truth (COCO dict)"
RESULTS_LABEL = "results"
_NUMPY_COLUMNS = ("image_id", "x", "y", "w", "h", "score", "category_id")


def is_path(source) -> bool:
    return isinstance(source, (str, os.PathLike))


def describe(source) -> str:
    """What the store's provenance records of an input: its path, or the kind of object it was."""
    return str(source) if is_path(source) else f"in-memory {type(source).__name__}"


def _plain(value):
    """JSON of NumPy scalars and arrays, and of RLE ``counts`` as pycocotools' encoder returns them (bytes)."""
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, bytes):
        return value.decode("ascii")
    raise TypeError(f"a value of type {type(value).__name__} is not JSON")


def results_table(source) -> pl.DataFrame | None:
    """Detections given as a table (Polars, pandas, Arrow, a mapping of columns, the ``N x 7`` array), as a Polars
    frame of the file readers' columns; None for a list of result dicts."""
    if isinstance(source, pl.DataFrame):
        return source
    if isinstance(source, (pa.Table, pa.RecordBatch)):
        return pl.from_arrow(source)
    if type(source).__module__.split(".")[0] == "pandas":
        return pl.from_pandas(source)
    if isinstance(source, np.ndarray):
        if source.ndim != 2 or source.shape[1] != len(_NUMPY_COLUMNS):
            raise InputError(f"{RESULTS_LABEL}: a NumPy array of results must be N x 7 ({', '.join(_NUMPY_COLUMNS)}), "
                             f"got shape {source.shape}")
        return pl.DataFrame({name: source[:, i] for i, name in enumerate(_NUMPY_COLUMNS)})
    if isinstance(source, Mapping):
        try:
            return pl.DataFrame(dict(source))
        except (pl.exceptions.PolarsError, TypeError, ValueError) as exc:
            raise InputError(f"{RESULTS_LABEL}: columns that do not make a table ({first_line(exc)})") from None
    if isinstance(source, (list, tuple)):
        return None
    raise InputError(f"{RESULTS_LABEL}: expected a path, a list of result dicts, a table or an N x 7 array, "
                     f"got {type(source).__name__}")


def _write(source, folder: Path, name: str, gt: bool) -> Path:
    if gt:
        if not isinstance(source, Mapping):
            raise InputError(f"{GT_LABEL}: expected a path or a COCO dict (images, annotations, categories), got "
                             f"{type(source).__name__}")
        path = folder / f"{name}.json"
        content = dict(source)
    else:
        table = results_table(source)
        if table is not None:
            path = folder / f"{name}.parquet"
            table.write_parquet(path)
            return path
        path, content = folder / f"{name}.json", list(source)
    try:
        path.write_text(json.dumps(content, default=_plain))
    except (TypeError, ValueError) as exc:
        raise InputError(f"{GT_LABEL if gt else RESULTS_LABEL}: not JSON-like ({first_line(exc)})") from None
    return path


@contextlib.contextmanager
def as_files(gt=None, dt=None):
    """``(gt_path, dt_path)`` for ``gt`` (a path or a COCO dict) and ``dt`` (a path, a list of result dicts or a
    table): paths are left as they are, objects written to a temporary folder removed on exit. An
    :class:`InputError` raised inside names the objects, not the temporary files."""
    if (gt is None or is_path(gt)) and (dt is None or is_path(dt)):
        yield gt, dt
        return
    folder = Path(tempfile.mkdtemp(prefix="evalengine-input-"))
    renamed = {}
    try:
        paths = []
        for source, name, label, is_gt in ((gt, "gt", GT_LABEL, True), (dt, "dt", RESULTS_LABEL, False)):
            if source is None or is_path(source):
                paths.append(source)
                continue
            path = _write(source, folder, name, is_gt)
            renamed[str(path)] = label
            paths.append(path)
        def named(text: str) -> str:
            for path, label in renamed.items():
                text = text.replace(path, label)
            return text

        try:
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                yield tuple(paths)
        except InputError as exc:
            if named(str(exc)) == str(exc):
                raise
            raise type(exc)(named(str(exc))) from None
        finally:
            for warning in caught:  # given again, once recording has stopped
                warnings.warn(named(str(warning.message)), warning.category, stacklevel=3)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
