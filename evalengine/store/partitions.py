"""A store of partitions (spec §9.1–9.2): ground-truth annotators and machine partition runs as column-major label
runs, sharded by image, written atomically as any store (:mod:`evalengine.store.build`).

::

    STORE/images/part-0.parquet                    image_id, width, height, file_name (the label map's stem),
                                                   n_annotators, shard
    STORE/partitions/gt/shard=k/part-0.parquet     schema.GT_PARTITIONS
    STORE/partitions/run=R/shard=k/part-0.parquet  schema.SEG_PARTITIONS (a run: a method; its rows: one partition
                                                   per image and parameter)
    STORE/manifest.json                            ``partition_runs``: run → {parameters, tags}; ``void_label``

The box tables (``gt``, ``categories``, ``runs``) exist and are empty, so that every store command opens it.
"""

import json
from datetime import datetime, timezone

import numpy as np
import polars as pl

from evalengine import __version__, schema
from evalengine.errors import StoreError
from evalengine.io.partitions import runs_frame
from evalengine.store.build import replaced_store
from evalengine.store.commit import atomic_folder
from evalengine.store.layout import StoreLayout, open_layout
from evalengine.store.location import location
from evalengine.store.lock import writing
from evalengine.store.paths import StorePaths, check_name
from evalengine.store.shards import ShardWriter, write_table
from evalengine.store.sharding import shard_of

BATCH_IMAGES = 256  # images gathered before a write: few row groups, memory bounded by the batch
IMAGES = {**{k: v for k, v in schema.IMAGES.items() if k != "shard"}, "n_annotators": pl.Int32}


def create_partition_store(path, images, runs: dict, n_shards: int = 1, void_label=None, provenance=None,
                           overwrite: bool = False, tags: dict | None = None) -> StoreLayout:
    """Write a partition store from ``images``: an iterable of ``(image row, gt runs, {run: runs})`` per image
    (rows of :data:`IMAGES`, runs as :func:`evalengine.io.partitions.image_runs` gives them); ``runs`` maps each
    run to its parameters."""
    for run in runs:
        check_name("run", run)
    if n_shards < 1:
        raise StoreError(f"n_shards must be >= 1, got {n_shards}")
    path = location(path)
    with writing(path):
        replaced_store(path, overwrite, (provenance or {}).values())
        with atomic_folder(path, overwrite=True) as tmp:
            paths = StorePaths(tmp)
            rows = _write_partitions(paths, images, runs, n_shards)
            frame = pl.DataFrame(rows, schema=IMAGES, orient="row")
            frame = frame.with_columns(pl.Series("shard", shard_of(frame.get_column("image_id").to_numpy(),
                                                                   n_shards), pl.Int32))
            write_table(frame, paths.table("images").parent)
            write_table(pl.DataFrame(schema=schema.CATEGORIES), paths.table("categories").parent)
            write_table(pl.DataFrame(schema=schema.RUNS), paths.table("runs").parent)
            with ShardWriter(paths.gt, n_shards, schema.GT) as empty:
                empty.close()
            manifest = {
                "schema_version": schema.SCHEMA_VERSION,
                "evalengine_version": __version__,
                "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                "n_shards": n_shards,
                "runs": [],
                "partition_runs": {run: {"parameters": sorted(set(parameters)), "tags": (tags or {}).get(run, {})}
                                   for run, parameters in sorted(runs.items())},
                "void_label": void_label,
                "provenance": {k: str(v) for k, v in (provenance or {}).items()},
            }
            paths.manifest.write_text(json.dumps(manifest, indent=2))  # last: on an object store it commits
    return open_layout(path)


def _write_partitions(paths: StorePaths, images, runs: dict, n_shards: int) -> list:
    rows = []
    tables = {None: schema.GT_PARTITIONS, **{run: schema.SEG_PARTITIONS for run in runs}}
    writers = {None: ShardWriter(paths.gt_partitions, n_shards, schema.GT_PARTITIONS)}
    writers.update({run: ShardWriter(paths.partitions(run), n_shards, schema.SEG_PARTITIONS) for run in runs})
    pending = {key: [] for key in writers}
    try:
        for row, gt, predictions in images:
            rows.append(row)
            pending[None].append(gt)
            for run, columns in predictions.items():
                pending[run].append(columns)
            if len(rows) % BATCH_IMAGES == 0:
                _flush(writers, pending, tables, n_shards)
        _flush(writers, pending, tables, n_shards)
        for writer in writers.values():
            writer.close()
    except BaseException as exc:
        for writer in writers.values():
            writer.__exit__(type(exc), exc, None)
        raise
    return rows


def _flush(writers: dict, pending: dict, tables: dict, n_shards: int) -> None:
    """One frame per table of the pending images, in shard order (image order within a shard), so the writer
    slices it without a gather."""
    for key, images in pending.items():
        if images:
            shards = shard_of(np.array([columns["image_id"][0] for columns in images], np.int64), n_shards)
            writers[key].write(runs_frame([images[i] for i in np.argsort(shards, kind="stable")], tables[key]))
            images.clear()


def partition_runs(layout) -> dict:
    """``{run: {parameters, tags}}`` of a partition store (a :class:`StoreError` for a store without partitions)."""
    if "partition_runs" not in layout.manifest:
        raise StoreError(f"{layout.root}: holds no partitions (build one with `evalengine ingest partitions`)")
    return dict(layout.manifest["partition_runs"])


def check_partition_run(layout, run: str) -> None:
    if run not in partition_runs(layout):
        raise StoreError(f"{layout.root}: no partition run '{run}' "
                         f"(partition runs: {', '.join(sorted(partition_runs(layout))) or 'none'})")
