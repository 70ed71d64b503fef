"""A store held in memory: the tables a store on disk would hold, sharded the same way, as Arrow-backed Polars frames
keyed by the path each file would have (issue 17 item 3).

A one-shot evaluation (``evalengine coco`` without ``--store``, :func:`evalengine.evaluate_coco`) ingests into one,
matches its shards and keeps the match table beside them, so it never writes and re-reads Parquet that it would then
delete. The frames are those a store on disk gives back (the same shard of every row, the same row order and column
types), so every match and metric is bit-identical to the disk path's. :meth:`MemoryLayout.stored` writes it out as
a store in a temporary folder for what only a store on disk serves (a protocol matched by Dask tasks that read
files)."""

import json
import shutil
import tempfile
import weakref
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import numba
import numpy as np
import polars as pl
import pyarrow as pa

from evalengine import schema
from evalengine.arrow import arrow_array, numpy_view
from evalengine.numeric import counting_order
from evalengine.store.build import create_store, run_row
from evalengine.store.layout import StoreLayout, damaged, open_layout
from evalengine.store.paths import PROTOCOL_FILE, StorePaths, shard_file
from evalengine.store.shards import scan_shards, write_batches
from evalengine.store.sharding import shard_of
from evalengine.store.tags import check_tags

ROOT = PurePosixPath("<memory>")


class MemoryShards:
    """:class:`~evalengine.store.shards.ShardWriter`'s twin: each shard's rows, in the order they come, as one frame in
    ``files`` under the name of the file the writer would write.

    The frames written are held as they come (Arrow, the store's types; only the rows ``select.rows`` picks, see
    :func:`memory_store`) with their rows' shards; :meth:`close` decides once which held rows are kept
    (``select.kept``; all without a selection) and their places in shard order (a stable counting sort: each shard
    keeps the input's order), then moves every column once into one shard-ordered array, column by column so that
    the input is freed as it goes; each shard's frame is a slice of it (no copy)."""

    def __init__(self, folder, n_shards: int, table_schema: dict, files: dict, select=None):
        self.folder, self.n_shards, self.files, self.select = folder, n_shards, files, select
        self.arrow_schema = pl.DataFrame(schema=table_schema).to_arrow().schema
        self.tables, self.shards, self.held = [], [], []
        self.rows = 0

    def write(self, frame: pl.DataFrame) -> None:
        rows = frame.height
        if rows and self.select is not None:
            picked = self.select.rows(frame)
            self.held.append(picked + self.rows)  # their places in the order read
            frame = frame[picked] if picked.shape[0] < rows else frame
        if frame.height:
            self.tables.append(frame.to_arrow().cast(self.arrow_schema))
            self.shards.append(shard_of(frame.get_column("image_id").to_numpy(), self.n_shards))
        self.rows += rows

    def __enter__(self) -> "MemoryShards":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.tables, self.shards, self.held = [], [], []  # nothing is kept of a failed write

    def close(self) -> int:
        """Shard what was written (see the class); the number of rows written, kept or not."""
        shards = np.concatenate(self.shards) if self.shards else np.zeros(0, np.int32)
        self.shards = []
        kept = None
        if self.select is not None:
            kept = np.flatnonzero(self.select.kept(np.concatenate(self.held) if self.held else np.zeros(0, np.int64)))
            self.held = []
        order, starts = counting_order(shards if kept is None else shards[kept], self.n_shards)
        if kept is not None:
            order = kept[order]
        places = np.full(shards.shape[0], -1, np.int64)
        places[order] = np.arange(order.shape[0])  # each row's place in shard order (-1: not kept)
        columns = []
        for name in self.arrow_schema.names:
            chunks = [table.column(name) for table in self.tables]
            self.tables = [table.drop_columns([name]) for table in self.tables]  # freed as it goes
            columns.append(_in_shard_order(chunks, order, places, self.arrow_schema.field(name).type))
        table = pl.from_arrow(pa.Table.from_arrays(columns, schema=self.arrow_schema), rechunk=False)
        for k in range(self.n_shards):
            # one chunk: a column then reads as a NumPy array without a copy (the shard tasks read each several times)
            self.files[str(shard_file(self.folder, k))] = table.slice(starts[k], starts[k + 1] - starts[k])
        return self.rows


@numba.njit(cache=True, nogil=True)
def _scatter(out, values, places):
    for i in range(values.shape[0]):
        if places[i] >= 0:
            out[places[i]] = values[i]


@numba.njit(cache=True, nogil=True)
def _scatter_bytes(out, out_offsets, data, offsets, places):
    """Each row's bytes (``data[offsets[i]:offsets[i + 1]]``) to its place's span of ``out``."""
    for i in range(places.shape[0]):
        if places[i] >= 0:
            at, start = out_offsets[places[i]], offsets[i]
            out[at:at + offsets[i + 1] - start] = data[start:offsets[i + 1]]


def _strings_in_shard_order(chunks: list, order: np.ndarray, places: np.ndarray, arrow_type) -> pa.Array:
    """:func:`_in_shard_order` of large strings without nulls (masks' RLE strings): their bytes moved once, chunk by
    chunk, into the output's buffer (Arrow's take and the concatenation of its chunks copy them twice)."""
    offsets = [np.frombuffer(chunk.buffers()[1], np.int64, len(chunk) + 1, 8 * chunk.offset) for chunk in chunks]
    lengths = np.concatenate([np.diff(o) for o in offsets] or [np.zeros(0, np.int64)])
    out_offsets = np.zeros(order.shape[0] + 1, np.int64)
    np.cumsum(lengths[order], out=out_offsets[1:])
    out = np.empty(out_offsets[-1], np.uint8)
    row = 0
    for chunk, chunk_offsets in zip(chunks, offsets):
        data = chunk.buffers()[2]
        _scatter_bytes(out, out_offsets, np.frombuffer(data, np.uint8) if data is not None else np.zeros(0, np.uint8),
                       chunk_offsets, places[row:row + len(chunk)])
        row += len(chunk)
    return pa.Array.from_buffers(arrow_type, order.shape[0], [None, pa.py_buffer(out_offsets), pa.py_buffer(out)])


def _in_shard_order(chunks: list, order: np.ndarray, places: np.ndarray, arrow_type) -> pa.Array:
    """One column's chunks (in input order) as the rows ``order`` (``places``: each row's place in it, -1 if not
    there): numbers and flags without nulls scattered chunk by chunk through NumPy, strings without nulls byte by
    byte, the others (lists, nulls) by Arrow's take."""
    chunks = [chunk for column in chunks for chunk in column.chunks]
    plain = (pa.types.is_integer(arrow_type) or pa.types.is_floating(arrow_type) or pa.types.is_boolean(arrow_type))
    if any(chunk.null_count for chunk in chunks) or not (plain or pa.types.is_large_string(arrow_type)):
        return pa.chunked_array(chunks, arrow_type).take(arrow_array(order)).combine_chunks()
    if not plain:
        return _strings_in_shard_order(chunks, order, places, arrow_type)
    out = np.empty(order.shape[0], arrow_type.to_pandas_dtype())
    offset = 0
    for chunk in chunks:
        _scatter(out, numpy_view(chunk), places[offset:offset + len(chunk)])
        offset += len(chunk)
    return arrow_array(out)


@dataclass(frozen=True, repr=False)
class MemoryLayout(StoreLayout):
    """A store in memory (:func:`memory_store`); it reads as :class:`StoreLayout` does, from ``files``."""

    files: dict = field(default_factory=dict, compare=False)
    persistent = False

    def described(self) -> str:
        return f"in memory: {self.n_shards} shards, runs: {', '.join(self.runs) or 'none'}"

    def read_file(self, path, columns=None, exclude=()) -> pl.DataFrame:
        """One table file, whole or its ``columns`` (else all but ``exclude``), as :func:`read_stored` reads it."""
        try:
            frame = self.files[str(path)]
        except KeyError:
            raise damaged(path, self.root, "missing") from None
        if columns is not None:
            return frame.select(columns)
        return frame.select(pl.exclude(*exclude)) if exclude else frame

    def read(self, table: str, columns=None) -> pl.DataFrame:
        return self.read_file(self.paths.table(table), columns)

    def scan(self, table: str) -> pl.LazyFrame:
        return self.read(table).lazy()

    def columns_of(self, path) -> list:
        return self.read_file(path).columns

    def scan_sharded(self, folder) -> pl.LazyFrame:
        """The shards of ``folder`` as :func:`~evalengine.store.shards.scan_shards` reads them: their rows in shard
        order, then the folder's ``key=value`` levels (strings) and ``shard``; a folder on disk (a table matched in
        :meth:`stored`) is read from there. A filter on ``shard`` reads only that shard's frame (its ``shard`` is a
        literal, which Polars folds)."""
        if not str(folder).startswith(f"{ROOT}/"):
            return scan_shards(folder)
        pieces = self.shard_pieces(folder)
        return pl.concat(pieces) if pieces else pl.LazyFrame()

    def shard_pieces(self, folder) -> list:
        """:meth:`StoreLayout.shard_pieces`: the frames held of each shard of ``folder`` (no copy), in shard order,
        with the columns :meth:`scan_sharded` adds."""
        if not str(folder).startswith(f"{ROOT}/"):
            return super().shard_pieces(folder)
        prefix = f"{folder}/shard="
        shards = sorted((int(name[len(prefix):].split("/", 1)[0]), frame) for name, frame in self.files.items()
                        if name.startswith(prefix))
        levels = {level.split("=", 1)[0]: level.split("=", 1)[1] for level in PurePosixPath(str(folder)).parts
                  if "=" in level}
        return [frame.lazy().with_columns(*[pl.lit(value, pl.String).alias(key) for key, value in levels.items()],
                                          pl.lit(k, pl.Int64).alias("shard")) for k, frame in shards]

    def recorded(self, folder) -> dict | None:
        """The ``protocol.json`` of a match table kept here, None if none is."""
        text = self.files.get(str(folder / PROTOCOL_FILE))
        return None if text is None else json.loads(text)

    def keep_matches(self, folder, sides: list, description: dict) -> None:
        """Keep a match table: ``sides`` holds one ``{side: frame}`` per shard; ``protocol.json``'s text last."""
        for k, frames in enumerate(sides):
            for side, frame in frames.items():
                self.files[str(shard_file(folder / side, k))] = frame
        self.files[str(folder / PROTOCOL_FILE)] = json.dumps(description, indent=2)

    def stored(self) -> StoreLayout:
        """This store written out to a temporary folder (once; removed with this layout or at exit), its match tables
        with it."""
        if "_stored" not in self.__dict__:
            folder = Path(tempfile.mkdtemp(prefix="evalengine-"))
            weakref.finalize(self, shutil.rmtree, folder, True)
            self.__dict__["_stored"] = _write_out(self, folder / "store")
        return self.__dict__["_stored"]


def _write_out(layout: MemoryLayout, target) -> StoreLayout:
    create_store(target, layout.read("images").drop("shard"), layout.read("categories"),
                 layout.scan_sharded(layout.paths.gt).drop("shard").collect(),
                 {run: [layout.scan_sharded(layout.paths.dt(run)).drop("run", "shard").collect()]
                  for run in layout.runs}, n_shards=layout.n_shards, provenance=layout.manifest.get("provenance"))
    for name, value in layout.files.items():
        if not name.startswith(f"{ROOT}/matches/"):
            continue
        path = target / PurePosixPath(name).relative_to(ROOT)
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(value, str):
            path.write_text(value)
        else:
            value.write_parquet(str(path), compression="lz4")
    return open_layout(target)


def memory_store(images, categories, gt, runs: dict, n_shards: int, provenance=None, progress=None,
                 tags: dict | None = None, select=None) -> MemoryLayout:
    """:func:`~evalengine.store.build.create_store`'s tables, kept in memory: the images with their shard, the
    categories, the runs table, the ground truth and each run's detections (an iterable of frames, sharded as they
    come). ``select()``, where given, makes a new selection of a run's rows, a protocol's filter applied before they
    are sharded, so that the rows it drops are let go as they come and never moved: ``rows(frame)``, the rows of a
    batch to hold (ascending), and ``kept(held)``, once the run is read, whether each held row (its place in the
    order read) is kept. The runs table counts every row read."""
    files, paths = {}, StorePaths(ROOT)
    images = images.with_columns(pl.Series("shard", shard_of(images.get_column("image_id").to_numpy(), n_shards)))
    for name, frame in (("images", images), ("categories", categories)):
        files[str(paths.table(name))] = pl.from_arrow(frame.to_arrow())
    with MemoryShards(paths.gt, n_shards, dict(gt.schema), files) as gt_shards:
        gt_shards.write(gt)
        gt_shards.close()
    rows = [run_row(run, write_batches(paths.dt(run), batches, n_shards, schema.DT, progress,
                                       writer=lambda folder, n, table_schema: MemoryShards(folder, n, table_schema,
                                                                                           files,
                                                                                           select and select())),
                    provenance, tags=check_tags((tags or {}).get(run, {}))) for run, batches in runs.items()]
    files[str(paths.table("runs"))] = pl.DataFrame(rows, schema=schema.RUNS)
    manifest = {"schema_version": schema.SCHEMA_VERSION, "n_shards": n_shards, "runs": sorted(runs),
                "proposal_runs": {}, "provenance": {k: str(v) for k, v in (provenance or {}).items()}}
    return MemoryLayout(root=ROOT, manifest=manifest, files=files)
