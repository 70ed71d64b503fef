"""Writing and reading sharded tables: one Parquet file per image shard (``folder/shard=k/part-0.parquet``)."""

import itertools
import os
import shutil
import tempfile
import threading
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, nullcontext

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.parquet as pq

from evalengine.store.location import is_remote, location
from evalengine.store.paths import PART, shard_file
from evalengine.store.sharding import shard_of

# bytes a ShardWriter holds before each shard gets a row group of them: with ~1,000 shards a 1M-row batch gives each
# ~1,000 rows, and a row group that small costs twice the CPU to write and to read again (1M images x 100 results)
HELD_BYTES = 256 << 20


def write_table(frame: pl.DataFrame, folder, compression: str = "zstd") -> None:
    """``frame`` as ``folder/part-0.parquet``."""
    folder.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(str(folder / PART), compression=compression, statistics=True)


def scan_shards(folder) -> pl.LazyFrame:
    """Every ``shard=k/part-0.parquet`` in ``folder`` as one lazy frame (with its hive columns); other files beside
    the shards (a perturbed run's ``perturbation.parquet``) are not part of it.

    Polars reads every ``key=value`` level of the path as a column: ``shard`` is an integer, the others (``run``,
    ``protocol``) are strings whatever they look like (a run named ``2024`` or 100 digits is a name)."""
    pattern = str(location(folder) / "shard=*" / "*.parquet")
    keys = [level.split("=", 1)[0] for level in pattern.split("/")[:-2] if "=" in level]
    return pl.scan_parquet(pattern, hive_partitioning=True,
                           hive_schema={**{key: pl.String for key in keys}, "shard": pl.Int64})


def split_by_shard(frame: pl.DataFrame, n_shards: int, arrow_schema) -> tuple:
    """``(table, bounds, nonempty)``: ``frame`` as an Arrow table of ``arrow_schema`` with its rows grouped by the
    shard of their ``image_id`` (stable: each shard keeps the frame's order), shard ``k`` being rows
    ``bounds[k]:bounds[k + 1]``; ``nonempty``: the shards that receive rows. Disk and memory stores shard alike."""
    shards = shard_of(frame.get_column("image_id").to_numpy(), n_shards)
    if not (shards[1:] >= shards[:-1]).all():  # a frame already in shard order is taken as it is
        order = np.argsort(shards, kind="stable")
        frame, shards = frame[order], shards[order]
    bounds = np.searchsorted(shards, np.arange(n_shards + 1))
    return frame.to_arrow().cast(arrow_schema), bounds, np.flatnonzero(np.diff(bounds))


class ShardWriter:
    """Appends frames to one Parquet file per shard as they come.

    Frames are held until they reach ``held_bytes``; then each shard's part of them is written as one row group.
    Memory stays bounded by ``held_bytes`` and the frame being written; shards that receive nothing get an empty file,
    so every shard of a table exists. On an object store the files are written to a local temporary folder and
    uploaded when closed: an open upload stream holds its unsent part in memory (~1 GB for 100 shards).
    """

    def __init__(self, folder, n_shards: int, table_schema: dict, held_bytes: int = HELD_BYTES):
        self.folder = location(folder)
        self.n_shards = n_shards
        self.arrow_schema = pl.DataFrame(schema=table_schema).to_arrow().schema
        self.writers = {}
        self.rows = 0
        self.held_bytes, self._held, self._n_held = held_bytes, [], 0  # (table, bounds) of frames not written yet
        self._staging = tempfile.mkdtemp(prefix="evalengine-shards-") if is_remote(self.folder) else None
        self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)
        self._writing = threading.Condition()  # guards the two below
        self._in_flight, self._stopped = 0, False

    def _open(self, k: int):
        if self._staging:
            return os.path.join(self._staging, f"{k}.parquet")
        (self.folder / f"shard={k}").mkdir(parents=True, exist_ok=True)
        return str(shard_file(self.folder, k))

    def write(self, frame: pl.DataFrame) -> None:
        """Append ``frame``, each row to the shard of its ``image_id``."""
        table, bounds, _ = split_by_shard(frame, self.n_shards, self.arrow_schema)
        self._held.append((table, bounds))
        self._n_held += table.nbytes
        self.rows += frame.height
        if self._n_held >= self.held_bytes:
            self._flush()

    def _flush(self) -> None:
        """Write the held frames: each shard's rows of them (in the order they came) as one row group."""
        held, self._held, self._n_held = self._held, [], 0
        nonempty = np.flatnonzero(sum(np.diff(bounds) for _, bounds in held)) if held else []
        for k in nonempty:
            if k not in self.writers:
                # dictionary encoding costs twice the write time on box and score columns and rarely pays
                self.writers[k] = pq.ParquetWriter(self._open(k), self.arrow_schema, use_dictionary=False)

        def part(k):
            return pa.concat_tables([table.slice(bounds[k], bounds[k + 1] - bounds[k]) for table, bounds in held])

        # pyarrow releases the GIL while encoding: shards are written on all cores
        list(self._pool.map(lambda k: self._write_slice(k, part(k)), nonempty))

    def _write_slice(self, k: int, table) -> None:
        """One shard's part of a frame, on a pool thread, unless the write was stopped."""
        with self._writing:
            if self._stopped:
                return
            self._in_flight += 1
        try:
            self.writers[k].write_table(table)
        finally:
            with self._writing:
                self._in_flight -= 1
                self._writing.notify_all()

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """On an error, stop the writes and close the open files (the caller's temporary folder goes). The writes
        under way are waited for by count, not by joining the pool's threads: a Ctrl-C while the pool starts a thread
        leaves that thread running but unknown to ``shutdown`` (CPython 3.11), and a file closed under a running
        write crashes pyarrow."""
        if exc_type is not None:
            with self._writing:
                self._stopped = True
                self._writing.wait_for(lambda: self._in_flight == 0)
            self._pool.shutdown(wait=False, cancel_futures=True)
            for writer in self.writers.values():
                try:
                    writer.close()
                except Exception:  # noqa: BLE001 - the original error is the one to report
                    pass
        if self._staging:
            shutil.rmtree(self._staging, ignore_errors=True)

    def close(self) -> int:
        """Write what is held, close every file (on an object store: upload it); return the number of rows written."""
        self._flush()
        for k in range(self.n_shards):
            if k in self.writers:
                self.writers[k].close()
            else:
                pq.write_table(self.arrow_schema.empty_table(), self._open(k))
        if self._staging:
            list(self._pool.map(lambda k: shard_file(self.folder, k).upload(self._open(k)), range(self.n_shards)))
            shutil.rmtree(self._staging)
        self._pool.shutdown()
        return self.rows


def closed(batches):
    """Close a batch generator when the write stops, in this thread: readers hold thread pools, which must not be
    shut down by the garbage collector from another thread (that can deadlock in thread start-up)."""
    return closing(batches) if hasattr(batches, "close") else nullcontext()


def write_batches(folder, batches, n_shards: int, table_schema: dict, progress=None, writer=None) -> int:
    """Shard and write every frame of ``batches`` as it comes; return the number of rows. The columns the first frame
    has beyond ``table_schema`` (a run's masks, keypoints) are written too. ``writer(folder, n_shards, schema)``: a
    :class:`ShardWriter` unless given (a store in memory keeps the shards instead)."""
    with closed(batches):
        batches = iter(batches)
        first = next(batches, None)
        if first is not None:
            table_schema = {**table_schema, **{c: t for c, t in first.schema.items() if c not in table_schema}}
        with (writer or ShardWriter)(folder, n_shards, table_schema) as shards:
            for batch in ([] if first is None else itertools.chain([first], batches)):
                shards.write(batch)
                if progress:
                    progress(batch.height)
            return shards.close()
