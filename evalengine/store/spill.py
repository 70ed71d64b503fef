"""A table split into batches in one pass: its rows are streamed once and appended to one Arrow IPC file per batch in
a temporary folder, then read back a batch at a time.

Accumulation reads a match table in category batches; reading the sharded files once per batch costs a read of every
file per batch (1,000 files × 27 batches at 100M detections, their row groups spanning several categories). Spilled,
each file is read once and memory stays bounded by one batch and one streamed chunk, whatever the number of files.
"""

import tempfile
from pathlib import Path

import polars as pl
import pyarrow as pa

_BATCH = "__batch"
# lz4 frames: ~4× less disk for match rows (mostly zero outcome bits) for a few percent of the pass's CPU
_OPTIONS = pa.ipc.IpcWriteOptions(compression="lz4")


def shard_pieces(table: pl.LazyFrame):
    """``table`` a shard at a time, in table order: its rows of each value of ``shard`` (a sharded table,
    :meth:`~evalengine.store.layout.StoreLayout.scan_sharded`, or any table derived from one), else the whole table.
    Each piece reads one shard's rows: on disk a filter on the hive column reads one file, in memory a shard's
    ``shard`` is a literal that Polars folds (what a derived table adds to the rows, e.g. a filter, is evaluated on
    every shard's rows for each piece). A caller holding the layout and folder reads the pieces directly
    (:meth:`~evalengine.store.layout.StoreLayout.shard_pieces`)."""
    if "shard" in table.collect_schema():
        shards = table.select(pl.col("shard").unique(maintain_order=True)).collect().get_column("shard")
        return (table.filter(pl.col("shard") == k) for k in shards)
    return [table]


def spilled_batches(table: pl.LazyFrame, columns: list, batch: pl.Expr, n_batches: int, scratch=None):
    """The ``columns`` of the rows of ``table`` whose ``batch`` (an expression giving an integer in ``[0, n_batches)``
    or null: not kept) is ``b``, as one frame per ``b`` in order, each row kept in its order in ``table``.

    A sharded table (:func:`~evalengine.store.shards.scan_shards`: a ``shard`` column) is read one shard at a time, so
    memory holds one shard's rows, not a streaming engine's read-ahead over every file. The spill folder lives in
    ``scratch`` (default: the system's temporary folder, ``TMPDIR``) while the generator runs."""
    pieces = (piece.with_columns(batch.alias(_BATCH)).filter(pl.col(_BATCH).is_not_null()).select(*columns, _BATCH)
              for piece in shard_pieces(table))
    empty = pl.DataFrame(schema=table.select(columns).collect_schema())
    with tempfile.TemporaryDirectory(prefix="evalengine-spill-", dir=scratch) as folder:
        paths = [Path(folder) / f"{b}.arrow" for b in range(n_batches)]
        writers = {}
        try:
            for piece in pieces:
                for (b,), part in piece.collect().partition_by(_BATCH, include_key=False, as_dict=True).items():
                    arrow = part.to_arrow()
                    if b not in writers:
                        writers[b] = pa.ipc.new_file(str(paths[b]), arrow.schema, options=_OPTIONS)
                    writers[b].write_table(arrow)
        finally:
            for writer in writers.values():
                writer.close()
        for b, path in enumerate(paths):
            if b in writers:
                with pa.memory_map(str(path)) as source:
                    frame = pl.from_arrow(pa.ipc.open_file(source).read_all())
                path.unlink()
            else:
                frame = empty
            yield frame
            del frame  # not held while the next batch is read
