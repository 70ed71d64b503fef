"""Detection files in any accepted format, read and validated in batches of bounded size.

Formats (by extension):

- ``.json``: a COCO result file (a JSON list of objects), parsed in chunks of whole objects;
- ``.jsonl`` / ``.ndjson``: one detection object per line, streamed in chunks of whole lines;
- ``.parquet``: streamed by record batch;
- ``.csv``: read by its header's names (:mod:`evalengine.io.csv_tables`).

JSON is read as pycocotools reads it (:mod:`evalengine.io.json_read`); in every format ids must be integers (an
integral float such as ``2.0`` is one) and scores and boxes finite numbers, and every error names the detection's
1-based position (and, in JSON, its line and column).

Columns: ``image_id, category_id, score`` and either ``bbox`` (a list ``[x, y, w, h]``) or four columns
``x, y, w, h``, and may have ``segmentation`` (COCO's: a polygon list or an RLE; in Parquet its JSON text, or a struct
``{size, counts}``) and ``keypoints`` (``[x, y, v, …]``). As pycocotools ``loadRes``: a detection's id is its 1-based
position in the file, every ``image_id`` must belong to the ground truth, and the FIRST result's fields decide how all
are read (:func:`result_kind`): with a ``bbox``, ``area = w*h`` (and a result without a segmentation has its box as
a polygon, where the file has masks); else with a ``segmentation``, area and box (if not given) from the mask; else
with ``keypoints``, area and box from their extent. Detections of categories absent from the ground truth are kept
(the store loses nothing) but warned about, since the COCO protocol, like pycocotools, leaves them out.
"""

import json
import mmap
import os
import queue
import threading
import warnings
import weakref
from collections import deque
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import closing
from pathlib import Path
from typing import Iterator

import polars as pl
import pyarrow.parquet as pq

from evalengine.errors import InputError, InputWarning, first_line
from evalengine import schema
from evalengine.io.coco import RESULT_FIELDS, CocoDataset
from evalengine.io.csv_tables import csv_detections
from evalengine.io.json_read import read_json_objects
from evalengine.io.json_results import Fallback, result_frames
from evalengine.io.json_scan import CHUNK_BYTES, json_list_chunks, jsonl_chunks, list_sample
from evalengine.io.json_text import TextError
from evalengine.io.masks import (SEGMENTATION, box_polygon, check_keypoints, has_segmentation, masks,
                                 segmentation_text)
from evalengine.io.validate import BOX_COLUMNS, check_boxes, integers, listed, numbers, require, split_bbox

FORMATS = (".json", ".jsonl", ".ndjson", ".parquet", ".csv")
BATCH_ROWS = 1_000_000
_BYTES_PER_JSON_DETECTION = 85  # to estimate a shard count before streaming a JSON file


def _format(path: Path) -> str:
    suffix = path.suffix.lower()
    if suffix not in FORMATS:
        raise InputError(f"{path}: unknown detection format '{suffix}' (expected one of {', '.join(FORMATS)})")
    if not path.is_file():
        raise InputError(f"{path}: no such file")
    return suffix


def count_rows(path) -> int | None:
    """Number of detections if the file says so without being read (Parquet), else None."""
    path = Path(path)
    if _format(path) != ".parquet":
        return None
    try:
        return pq.ParquetFile(path).metadata.num_rows
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError
        raise InputError(f"{path}: not a readable Parquet file ({first_line(exc)})") from None


def estimate_rows(path) -> int:
    """Number of detections in the file: exact for Parquet, from the file size for JSON."""
    exact = count_rows(path)
    return exact if exact is not None else os.path.getsize(path) // _BYTES_PER_JSON_DETECTION


MASK_CHUNK_BYTES = 16 * 2**20  # (peak RSS of a 5k-image file of 500k masks: 0.96 GB, against 1.3 GB in 64 MB chunks)
SHAPE_FIELDS = {"segmentation": SEGMENTATION, **schema.KEYPOINTS}  # read where a result file has them


def _columns(path: Path, names) -> list:
    names = list(names)
    shapes = [c for c in SHAPE_FIELDS if c in names]
    box = ["bbox"] if "bbox" in names else list(BOX_COLUMNS) if shapes == [] or "x" in names else []
    wanted = ["image_id", "category_id", "score", *box]
    missing = [c for c in wanted if c not in names]
    if missing:
        raise InputError(
            f"{path}: missing column(s) {', '.join(missing)} (found {', '.join(names)}; "
            "expected image_id, category_id, score and bbox or x, y, w, h, or segmentation, or keypoints)"
        )
    return wanted + shapes


def result_fields(path, masks: bool = True) -> dict:
    """The fields read of a COCO result file: a result's, and ``segmentation`` and ``keypoints`` where the file holds
    the key (a byte search, so that a file of boxes reads, and stores, no shape columns). Without ``masks``, no
    ``segmentation`` where the first result has a box (:func:`result_kind`: the masks then decide nothing)."""
    if not os.path.getsize(path):
        return dict(RESULT_FIELDS)
    with open(path, "rb") as handle, mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as view:
        fields = {**RESULT_FIELDS, **{c: t for c, t in SHAPE_FIELDS.items() if view.find(f'"{c}"'.encode()) >= 0}}
    if not masks and "segmentation" in fields and _first_result_kind(Path(path)) == "bbox":
        del fields["segmentation"]
    return fields


def _first_result_kind(path: Path) -> str | None:
    """:func:`result_kind` of the file's first result, None where it does not read as one (the reader says why)."""
    try:
        if path.suffix.lower() == ".json":
            first = json.loads(list_sample(path, (0, path.stat().st_size), n_objects=1, max_bytes=2**20))
        else:
            with open(path, "rb") as handle:
                first = [json.loads(handle.readline())]
    except ValueError:
        return None
    return result_kind(first[0]) if first and isinstance(first[0], dict) else None


def prefetch(path, masks: bool = True):
    """Start parsing a COCO result file on a background thread, so that it overlaps with reading the ground truth
    (whose first numba call loads the runtime, ~0.8 s; its polygons are rasterised on one core); pass the result to
    :func:`iter_detections`. A file that fits in one chunk is parsed whole; a larger one is read ahead by
    :class:`_ReadAhead`. None for other formats, which are streamed. ``masks``: :func:`result_fields`'."""
    path = Path(path)
    if not (path.is_file() and path.suffix.lower() == ".json"):
        return None
    if path.stat().st_size > CHUNK_BYTES:
        return _ReadAhead(path, masks)
    pool = ThreadPoolExecutor(max_workers=1)
    future = pool.submit(lambda: list(json_results(path, masks)))
    pool.shutdown(wait=False)
    return future


class _ReadAhead:
    """The chunks of a large result file parsed on a thread of their own, at most one chunk ahead of the reader (and
    the chunks :func:`parsed_in_parallel` holds): memory stays bounded by the chunk size. An error is raised where
    the chunk it is in would have been read; a reader that stops early, or drops this object unread (the ground
    truth was refused), stops the thread."""

    def __init__(self, path: Path, masks: bool):
        self._ready, self._stop = queue.Queue(maxsize=1), threading.Event()
        weakref.finalize(self, self._stop.set)
        threading.Thread(target=_read_ahead, args=(path, masks, self._ready, self._stop), daemon=True).start()

    def result(self) -> Iterator[pl.DataFrame]:
        try:
            while (item := self._ready.get()) is not None:
                if isinstance(item, BaseException):
                    raise item
                yield item
        finally:
            self._stop.set()


def _read_ahead(path: Path, masks: bool, ready: queue.Queue, stop: threading.Event) -> None:
    """:class:`_ReadAhead`'s thread: every chunk, then None (or the error) into ``ready`` until ``stop``."""
    def put(item) -> bool:
        while not stop.is_set():
            try:
                ready.put(item, timeout=0.1)
                return True
            except queue.Full:
                pass
        return False

    try:  # closed in this thread: the parser holds a thread pool
        with closing(json_results(path, masks)) as chunks:
            for chunk in chunks:
                if not put(chunk):
                    return
    except BaseException as exc:  # noqa: BLE001 - handed to the reader, which raises it
        put(exc)
        return
    put(None)


def _raw_batches(path: Path, batch_rows: int, prefetched=None, masks: bool = True,
                 dataset: CocoDataset | None = None) -> Iterator[pl.DataFrame]:
    kind = _format(path)
    if prefetched is not None:
        yield from prefetched.result()
    elif kind == ".csv":
        yield from csv_detections(path, dataset, batch_rows)
    elif kind == ".json":
        yield from json_results(path, masks)
    elif kind == ".parquet":
        yield from parquet_batches(path, batch_rows)
    else:
        fields = json_lines_fields(path, _columns)
        yield from parsed_in_parallel(path, {**fields, **{c: t for c, t in result_fields(path, masks).items()
                                                          if c in SHAPE_FIELDS}}, "detection", lines=True)


def json_lines_fields(path: Path, choose) -> dict:
    """The fields to read from a JSON Lines file: ``choose(path, keys)`` picks them from the keys of its first objects
    (a malformed line ends the sample). With no key at all, those of a result file are read, and the reader says what
    is wrong and where."""
    keys = _json_lines_keys(path)
    known = {**RESULT_FIELDS, **SHAPE_FIELDS}
    return {c: known.get(c, pl.Float64) for c in (choose(path, keys) if keys else RESULT_FIELDS)}


def _json_lines_keys(path: Path, n_lines: int = 1000) -> list:
    keys = {}
    with open(path, "rb") as handle:
        for _, line in zip(range(n_lines), handle):
            try:
                value = json.loads(line) if line.strip() else {}
            except ValueError:
                break
            keys.update(dict.fromkeys(value if isinstance(value, dict) else ()))
    return list(keys)


def json_results(path: Path, masks: bool) -> Iterator[pl.DataFrame]:
    """The frames of a COCO result file: read by the kernel of :mod:`evalengine.io.json_results` as far as it can,
    and from where it gives up (or wholly) by the exact reader."""
    with closing(result_frames(path, not masks, CHUNK_BYTES)) as frames:
        for item in frames:
            if isinstance(item, Fallback):
                yield from parsed_in_parallel(path, result_fields(path, masks), "detection", start=item.offset or None,
                                              first_row=item.rows)
                return
            yield item


def parsed_in_parallel(path: Path, fields: dict, what: str, lines: bool = False, start: int | None = None,
                       first_row: int = 0) -> Iterator[pl.DataFrame]:
    """The chunks of a COCO result file (``lines``: a JSON Lines file) as frames of its ``fields``, parsed on all
    cores (Polars releases the GIL), in file order; an error names the ``what`` (detection, …) by its position.
    ``start``: the list is read from that object on, ``first_row`` results coming before it.

    At most one chunk per core is held at once, so memory stays bounded by the chunk size; compressed masks expand
    several-fold as run lengths, so files with segmentations are read in chunks of :data:`MASK_CHUNK_BYTES`."""
    workers = os.cpu_count() or 1
    n_rows = first_row

    def result(future: Future) -> pl.DataFrame:
        nonlocal n_rows
        try:
            frame = future.result()
        except TextError as exc:
            raise exc.of_object(what, n_rows) from None
        n_rows += frame.height
        return frame

    with ThreadPoolExecutor(max_workers=workers) as pool:
        pending = deque()
        size = {"chunk_bytes": MASK_CHUNK_BYTES} if "segmentation" in fields else {}
        chunks = jsonl_chunks(path, **size) if lines else json_list_chunks(path, start=start, **size)
        for offset, text in chunks:
            pending.append(pool.submit(read_json_objects, path, fields, text, offset, lines))
            if len(pending) >= workers:
                yield result(pending.popleft())
        while pending:
            yield result(pending.popleft())


def result_kind(first: dict) -> str:
    """pycocotools ``loadRes``: what the first result holds decides how every result is read — ``bbox`` (a non-empty
    box), else ``segm`` (a segmentation), else ``keypoints``."""
    if first.get("bbox") not in (None, []) or first.get("x") is not None:
        return "bbox"
    return next((kind for kind, field in (("segm", "segmentation"), ("keypoints", "keypoints"))
                 if first.get(field) is not None), "bbox")


def _normalise(raw: pl.DataFrame, path: Path, offset: int, dataset: CocoDataset, kind: str,
               keep_masks: bool = True) -> pl.DataFrame:
    """Validate one batch and bring it to :data:`evalengine.schema.DT` (and the shape columns of the file's fields),
    read as ``kind`` (:func:`result_kind`); without ``keep_masks``, none of the mask columns (the masks are read only
    where they give the boxes and areas)."""
    if not keep_masks and kind == "bbox":
        raw = raw.drop("segmentation", strict=False)
    frame = raw.with_row_index("det_id", offset=offset + 1).with_columns(pl.col("det_id").cast(pl.Int64))
    row = pl.col("det_id")
    what = "detection at position"
    needed = {"bbox": [c for c in ("bbox", *BOX_COLUMNS) if c in frame.columns], "segm": ["segmentation"],
              "keypoints": ["keypoints"]}[kind]
    require(frame, ["image_id", "category_id", "score", *needed], path, what, row)
    if kind == "bbox" and "bbox" in frame.columns:
        frame = split_bbox(frame, path, what, row)
    frame = integers(frame, ["image_id", "category_id"], path, what, row)
    frame = _checked_boxes(numbers(frame, ["score"], path, what, row), path, what, row)
    bad = frame.filter(~pl.col("score").is_finite())
    if bad.height:
        raise InputError(f"{path}: {what} {listed(bad.select(row).to_series())}: 'score' is not finite")
    unknown = frame.filter(~pl.col("image_id").is_in(dataset.images.get_column("image_id").implode()))
    if unknown.height:
        ids = unknown.get_column("image_id").unique().sort()
        raise InputError(f"{path}: image_id {listed(ids)} not in the ground truth's images")
    if "keypoints" in frame.columns:
        frame = numbers(frame, ["keypoints"], path, what, row)
        check_keypoints(frame, path, what, row)
    if kind == "keypoints":  # loadRes: the box of every keypoint (invisible ones too)
        bad = frame.filter(pl.col("keypoints").list.len() == 0)
        if bad.height:
            raise InputError(f"{path}: {what} {listed(bad.get_column('det_id'))}: 'keypoints' is empty")
        xs, ys = (pl.col("keypoints").list.gather_every(3, offset=k) for k in (0, 1))
        frame = frame.with_columns(pl.concat_list(xs.list.min(), ys.list.min(), xs.list.max() - xs.list.min(),
                                                  ys.list.max() - ys.list.min()).alias("bbox"))
    shaped = None
    if "segmentation" in frame.columns:
        frame = frame.with_columns(segmentation_text(pl.col("segmentation"), frame.schema["segmentation"],
                                                      json_reader=path.suffix.lower() != ".parquet"))
    if has_segmentation(frame):
        made = box_polygon(*map(pl.col, BOX_COLUMNS)) if kind == "bbox" else None
        shaped = masks(frame, dataset.images, path, what, row, default_polygon=made)
        if kind == "segm":  # loadRes: a given box is kept, else the mask's
            given = pl.col("bbox") if "bbox" in frame.columns else pl.lit(None, pl.List(pl.Float64))
            frame = frame.with_columns(pl.when(given.is_null() | (given.list.len() == 0))
                                       .then(pl.Series(shaped.bbox()).cast(pl.List(pl.Float64))).otherwise(given).alias("bbox"))
    if kind != "bbox":
        frame = _checked_boxes(split_bbox(frame, path, what, row), path, what, row)
    area = pl.Series(shaped.area()) if kind == "segm" else pl.col("w") * pl.col("h")
    frame = frame.select("det_id", "image_id", "category_id", "score", *BOX_COLUMNS,
                         area.cast(pl.Float64).alias("area"), *[c for c in schema.KEYPOINTS if c in frame.columns])
    return pl.concat([frame, shaped.columns], how="horizontal") if shaped is not None and keep_masks else frame


def _checked_boxes(frame: pl.DataFrame, path: Path, what: str, row: pl.Expr) -> pl.DataFrame:
    """The box columns (where the frame has them yet) as finite numbers, of non-negative size."""
    if "x" not in frame.columns:
        return frame
    frame = numbers(frame, list(BOX_COLUMNS), path, what, row)
    check_boxes(frame, path, what, row)
    return frame


def parquet_batches(path: Path, batch_rows: int) -> Iterator[pl.DataFrame]:
    """The detection columns of a Parquet file, whole row groups at a time up to ``batch_rows`` rows (a larger row
    group in slices of that size). One batch is held, each decoded on every core (pyarrow's threads): Polars' streaming
    reader held ~8 batches ahead (0.6 GiB for 1M-row batches) for 1.7x the CPU."""
    try:
        source = pq.ParquetFile(path)
        columns = _columns(path, source.schema_arrow.names)
        groups, held = [], 0
        for k in range(source.metadata.num_row_groups):
            rows = source.metadata.row_group(k).num_rows
            if groups and held + rows > batch_rows:
                yield pl.from_arrow(source.read_row_groups(groups, columns=columns))
                groups, held = [], 0
            if rows > batch_rows:
                for batch in source.iter_batches(batch_rows, row_groups=[k], columns=columns):
                    yield pl.from_arrow(batch)
            else:
                groups, held = groups + [k], held + rows
        if groups:
            yield pl.from_arrow(source.read_row_groups(groups, columns=columns))
    except (OSError, ValueError) as exc:  # pyarrow's ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise InputError(f"{path}: not a readable Parquet file ({first_line(exc)})") from None


def iter_detections(path, dataset: CocoDataset, batch_rows: int = BATCH_ROWS,
                    prefetched=None, masks: bool = True) -> Iterator[pl.DataFrame]:
    """Validated detection batches of at most ``batch_rows`` rows (schema :data:`evalengine.schema.DT`, and the
    shape columns where the file has shapes; without ``masks``, no mask columns: for box evaluation only)."""
    path = Path(path)
    known = dataset.categories.get_column("category_id").implode()
    n_rows, unknown, kind = 0, {}, None
    # closed here, not by the garbage collector: a half-read JSON file holds a thread pool, which must not be
    # shut down from whatever thread happens to collect it
    with closing(_raw_batches(path, batch_rows, prefetched, masks, dataset)) as raw_batches:
        for raw in raw_batches:
            if not raw.height:  # an empty list (or chunk) is no batch
                continue
            kind = kind or result_kind(raw.row(0, named=True))
            batch = _normalise(raw, path, n_rows, dataset, kind, masks)
            n_rows += raw.height
            for cat, count in batch.filter(~pl.col("category_id").is_in(known)).get_column("category_id").value_counts().iter_rows():
                unknown[cat] = unknown.get(cat, 0) + count
            yield batch
    if n_rows == 0:
        raise InputError(f"{path}: the result list is empty (pycocotools cannot evaluate it either)"
                         if path.suffix.lower() == ".json" else f"{path}: the file holds no detections")
    if unknown:
        warnings.warn(
            f"{path}: {sum(unknown.values())} detections have category_id {listed(sorted(unknown))}, not in the "
            "ground truth's categories; they are stored but not evaluated (as in pycocotools)",
            InputWarning,
            stacklevel=2,
        )


def read_detections(path, dataset: CocoDataset) -> pl.DataFrame:
    """All detections of a file as one frame (for small inputs and tests; ingest streams instead)."""
    return pl.concat(list(iter_detections(path, dataset)), how="vertical")
