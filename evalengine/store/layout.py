"""The on-disk store: a folder of hive-partitioned Parquet tables, sharded by image.

::

    STORE/manifest.json                 schema version, shard count, runs, provenance
    STORE/images/part-0.parquet         one row per image, with its shard
    STORE/categories/part-0.parquet
    STORE/runs/part-0.parquet
    STORE/gt/shard=k/part-0.parquet
    STORE/dt/run=R/shard=k/part-0.parquet
    STORE/proposals/run=R/shard=k/part-0.parquet        (proposal runs, ranked; see store.ranking)
    STORE/proposals/run=R/perturbation.parquet          (a perturbed run's homographies and image sizes)
    STORE/hprs/lattice=L/part-0.parquet                 (cached exact hit counts of Wang et al.'s HPRS)
    STORE/matches/protocol=P/run=R/{dt,gt}/shard=k/part-0.parquet  (+ protocol.json)

Every write goes to a temporary folder beside its target and is renamed into place, so a failed
ingest or match leaves no partial table behind. ``STORE`` may also be an object-store URL
(see :mod:`evalengine.store.location`).
"""

import json
import os
import shutil
import uuid
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from contextlib import closing, contextmanager, nullcontext, suppress
from dataclasses import dataclass
from datetime import datetime, timezone

import numpy as np
import polars as pl
import pyarrow.parquet as pq

from evalengine import __version__, schema
from evalengine.errors import StoreError, first_line
from evalengine.store.location import is_remote, location, remove_tree, replace_file, replace_text
from evalengine.store.ranking import ProposalOrder, rank_proposals
from evalengine.store.sharding import shard_of

MANIFEST = "manifest.json"
PART = "part-0.parquet"
PERTURBATION = "perturbation.parquet"


@contextmanager
def atomic_folder(target, overwrite: bool = False):
    """Yield a temporary folder that replaces ``target`` only if the block completes.

    On an object store (no rename) the block writes to ``target`` itself, which is emptied first when
    overwriting; the block writes the file that makes its table visible last, and a failure deletes the folder.
    """
    target = location(target)
    if target.exists() and not overwrite:
        raise StoreError(f"{target}: already exists (pass overwrite to replace it)")
    if is_remote(target):
        target.require_bucket()
        remove_tree(target)
        try:
            yield target
        except OSError as exc:  # the object store refused a write: say where, leave nothing
            with suppress(OSError):
                remove_tree(target)
            raise StoreError(f"{target}: writing failed ({first_line(exc)})") from exc
        except BaseException:
            with suppress(OSError):
                remove_tree(target)
            raise
        return
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.parent / f".{target.name}.tmp-{uuid.uuid4().hex[:8]}"
    tmp.mkdir()
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    if target.exists():
        old = target.parent / f".{target.name}.old-{uuid.uuid4().hex[:8]}"
        os.replace(target, old)
        os.replace(tmp, target)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, target)


def _write(frame: pl.DataFrame, folder, compression: str = "zstd") -> None:
    folder.mkdir(parents=True, exist_ok=True)
    frame.write_parquet(str(folder / PART), compression=compression, statistics=True)


def scan_shards(folder) -> pl.LazyFrame:
    """Every ``shard=k/part-0.parquet`` in ``folder`` as one lazy frame (with its hive columns); other files beside
    the shards (a perturbed run's ``perturbation.parquet``) are not part of it."""
    return pl.scan_parquet(str(location(folder) / "shard=*" / "*.parquet"), hive_partitioning=True)


class ShardWriter:
    """Appends frames to one Parquet file per shard (``folder/shard=k/part-0.parquet``) as they come.

    Memory stays bounded by the frame being written; shards that receive nothing get an empty file,
    so every shard of a table exists.
    """

    def __init__(self, folder, n_shards: int, table_schema: dict):
        self.folder = location(folder)
        self.n_shards = n_shards
        self.arrow_schema = pl.DataFrame(schema=table_schema).to_arrow().schema
        self.writers = {}
        self.rows = 0
        self._pool = ThreadPoolExecutor(max_workers=os.cpu_count() or 1)

    def write(self, frame: pl.DataFrame, shards) -> None:
        shards = np.asarray(shards)
        order = np.argsort(shards, kind="stable")
        bounds = np.searchsorted(shards[order], np.arange(self.n_shards + 1))
        table = frame[order].to_arrow().cast(self.arrow_schema)
        nonempty = np.flatnonzero(np.diff(bounds))
        for k in nonempty:
            if k not in self.writers:
                (self.folder / f"shard={k}").mkdir(parents=True, exist_ok=True)
                # dictionary encoding costs twice the write time on box and score columns and rarely pays
                self.writers[k] = pq.ParquetWriter(str(self.folder / f"shard={k}" / PART), self.arrow_schema,
                                                   use_dictionary=False)
        # pyarrow releases the GIL while encoding: shards are written on all cores
        list(self._pool.map(lambda k: self.writers[k].write_table(table.slice(bounds[k], bounds[k + 1] - bounds[k])),
                            nonempty))
        self.rows += frame.height

    def __enter__(self) -> "ShardWriter":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        """On an error, stop the write threads and close the open files (the caller's temporary folder goes)."""
        if exc_type is not None:
            self._pool.shutdown(wait=True)
            for writer in self.writers.values():
                try:
                    writer.close()
                except Exception:  # noqa: BLE001 - the original error is the one to report
                    pass

    def close(self) -> int:
        """Close every file; return the number of rows written."""
        self._pool.shutdown()
        for k in range(self.n_shards):
            if k in self.writers:
                self.writers[k].close()
            else:
                (self.folder / f"shard={k}").mkdir(parents=True, exist_ok=True)
                pq.write_table(self.arrow_schema.empty_table(), str(self.folder / f"shard={k}" / PART))
        return self.rows


@dataclass(frozen=True)
class StoreLayout:
    """Paths and manifest of an existing store."""

    root: object  # pathlib.Path or evalengine.store.location.RemotePath
    manifest: dict

    @property
    def n_shards(self) -> int:
        return self.manifest["n_shards"]

    @property
    def runs(self) -> list:
        return list(self.manifest["runs"])

    def table(self, name: str):
        return self.root / name / PART

    def gt_shard(self, k: int):
        return self.root / "gt" / f"shard={k}" / PART

    def dt_shard(self, run: str, k: int):
        return self.root / "dt" / f"run={run}" / f"shard={k}" / PART

    @property
    def proposal_runs(self) -> dict:
        """Proposal run name → its ordering, de-duplication and box convention."""
        return dict(self.manifest.get("proposal_runs", {}))

    def proposal_shard(self, run: str, k: int):
        return self.root / "proposals" / f"run={run}" / f"shard={k}" / PART

    def perturbation(self, run: str):
        return self.root / "proposals" / f"run={run}" / PERTURBATION

    def check_proposal_run(self, run: str) -> None:
        if run not in self.proposal_runs:
            raise StoreError(f"{self.root}: no proposal run '{run}' "
                             f"(proposal runs: {', '.join(sorted(self.proposal_runs)) or 'none'})")

    def hit_count_cache(self, lattice: str):
        """Wang et al.'s exact N_hit per (image size, box, τ), shared by every proposal run (see metrics.oma)."""
        return self.root / "hprs" / f"lattice={lattice}" / PART

    def matches_dir(self, protocol_key: str, run: str):
        return self.root / "matches" / f"protocol={protocol_key}" / f"run={run}"

    def check_run(self, run: str) -> None:
        if run not in self.manifest["runs"]:
            raise StoreError(f"{self.root}: no run '{run}' (runs: {', '.join(self.runs) or 'none'})")


def create_store(path, images, categories, gt, runs: dict, n_shards: int = 1, provenance=None, overwrite=False,
                 progress=None, proposal_runs: dict | None = None):
    """Write a new store atomically.

    ``runs`` maps a run name to an iterable of detection frames (schema :data:`evalengine.schema.DT`),
    which are sharded and written as they come. ``proposal_runs`` maps a run name to a
    :class:`ProposalRun`. ``progress(n_rows)`` is called after each frame.
    """
    proposal_runs = proposal_runs or {}
    clash = set(runs) & set(proposal_runs)
    if clash:
        raise StoreError(f"{path}: run name(s) {', '.join(sorted(clash))} used for both detections and proposals")
    if n_shards < 1:
        raise StoreError(f"n_shards must be >= 1, got {n_shards}")
    path = location(path)
    images = images.with_columns(pl.Series("shard", shard_of(images.get_column("image_id").to_numpy(), n_shards)))
    with atomic_folder(path, overwrite=overwrite) as tmp:
        _write(images, tmp / "images")
        _write(categories, tmp / "categories")
        with ShardWriter(tmp / "gt", n_shards, dict(gt.schema)) as gt_writer:  # schema.GT and extra source fields
            gt_writer.write(gt, shard_of(gt.get_column("image_id").to_numpy(), n_shards))
            gt_writer.close()
        run_rows = [
            _run_row(run, _write_run(tmp / "dt" / f"run={run}", batches, n_shards, progress), provenance)
            for run, batches in runs.items()
        ]
        run_rows += [
            _run_row(run, _write_proposal_run(tmp / "proposals" / f"run={run}", proposal, n_shards, progress),
                     provenance, kind="proposals")
            for run, proposal in proposal_runs.items()
        ]
        _write(pl.DataFrame(run_rows, schema=schema.RUNS), tmp / "runs")
        manifest = {
            "schema_version": schema.SCHEMA_VERSION,
            "evalengine_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "n_shards": n_shards,
            "runs": sorted(runs),
            "proposal_runs": {run: proposal.description() for run, proposal in sorted(proposal_runs.items())},
            "provenance": {k: str(v) for k, v in (provenance or {}).items()},
        }
        (tmp / MANIFEST).write_text(json.dumps(manifest, indent=2))  # last: on an object store it commits the store
    return open_layout(path)


def _closed(batches):
    """Close a batch generator when the write stops, in this thread: readers hold thread pools, which must not be
    shut down by the garbage collector from another thread (that can deadlock in thread start-up)."""
    return closing(batches) if hasattr(batches, "close") else nullcontext()


def _write_run(folder, batches, n_shards: int, progress) -> int:
    with ShardWriter(folder, n_shards, schema.DT) as writer, _closed(batches):
        for batch in batches:
            writer.write(batch, shard_of(batch.get_column("image_id").to_numpy(), n_shards))
            if progress:
                progress(batch.height)
        return writer.close()


@dataclass(frozen=True)
class ProposalRun:
    """A proposal run to write: a function returning its validated batches (schema
    :data:`evalengine.schema.PROPOSALS_RAW`; called a second time if the source's images turn out to be
    interleaved), how it is ranked, and the box convention its source used (recorded; boxes are stored continuous)."""

    batches: object
    order: ProposalOrder = ProposalOrder()
    box_convention: str = "continuous"
    # proposals of perturbed images: one homography per image to the reference run's images
    # (schema :data:`evalengine.schema.PERTURBATIONS`) and what the perturbation is
    perturbation: pl.DataFrame | None = None
    kind: str | None = None
    level: float | None = None
    reference: str | None = None
    source: str = "proposals"  # named in error messages

    def description(self) -> dict:
        out = {**self.order.description(), "box_convention": self.box_convention}
        if self.perturbation is not None:
            out["perturbation"] = {"kind": self.kind, "level": self.level, "reference": self.reference}
        return out


class _ImagesNotContiguous(Exception):
    """The source's images are interleaved: ranking while streaming is not possible."""


def _write_proposal_run(folder, proposal: ProposalRun, n_shards: int, progress) -> int:
    """Rank the proposals while streaming them into shards when each image's proposals are contiguous in the
    source (the common case: per-image files, image-sorted tables); otherwise shard them first, then rank each
    shard (an image's proposals are all in one shard)."""
    try:
        n_proposals = _rank_streaming(folder, proposal, n_shards, progress)
    except _ImagesNotContiguous:
        remove_tree(folder)
        n_proposals = _rank_by_shard(folder, proposal, n_shards, progress)
    if proposal.perturbation is not None:
        proposal.perturbation.select(list(schema.PERTURBATIONS)).cast(schema.PERTURBATIONS).write_parquet(
            str(folder / PERTURBATION))
    return n_proposals


def _rank_streaming(folder, proposal: ProposalRun, n_shards: int, progress) -> int:
    """Each batch's complete images are ranked and written; the last image waits for the next batch."""
    batches = proposal.batches()
    carry, last_done = None, None
    workers = os.cpu_count() or 1
    with ShardWriter(folder, n_shards, schema.PROPOSALS) as writer, _closed(batches), \
            ThreadPoolExecutor(max_workers=workers) as pool:
        pending = deque()  # batches being ranked (Polars releases the GIL), written in order: at most one per core

        def flush(keep: int) -> None:
            while len(pending) > keep:
                ranked = pending.popleft().result()
                writer.write(ranked, shard_of(ranked.get_column("image_id").to_numpy(), n_shards))

        def write(frame: pl.DataFrame) -> None:
            pending.append(pool.submit(rank_proposals, frame, proposal.order, proposal.source))
            flush(workers - 1)

        for batch in batches:
            frame = batch if carry is None else pl.concat([carry, batch])
            ids = frame.get_column("image_id").to_numpy()
            if (np.diff(ids) < 0).any() or (last_done is not None and ids[0] <= last_done):
                raise _ImagesNotContiguous
            last = pl.col("image_id") == ids[-1]
            done, carry = frame.filter(~last), frame.filter(last)
            if done.height:
                write(done)
                last_done = int(ids[ids != ids[-1]][-1])
            if progress:
                progress(batch.height)
        if carry is not None and carry.height:
            write(carry)
        flush(0)
        return writer.close()


def _rank_by_shard(folder, proposal: ProposalRun, n_shards: int, progress) -> int:
    raw = folder / ".raw"
    batches = proposal.batches()
    with ShardWriter(raw, n_shards, schema.PROPOSALS_RAW) as writer, _closed(batches):
        for batch in batches:
            writer.write(batch, shard_of(batch.get_column("image_id").to_numpy(), n_shards))
            if progress:
                progress(batch.height)
        n_proposals = writer.close()

    def rank_shard(k: int) -> None:
        ranked = rank_proposals(pl.read_parquet(str(raw / f"shard={k}" / PART)), proposal.order, source=proposal.source)
        # lz4: zstd took a quarter of the ingest of 50M proposals; rows stay sorted by (image, rank)
        _write(ranked, folder / f"shard={k}", compression="lz4")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # Polars releases the GIL
        list(pool.map(rank_shard, range(n_shards)))
    remove_tree(raw)
    return n_proposals


def _run_row(run: str, n_rows: int, provenance, kind: str = "detections") -> dict:
    return {"run": run, "kind": kind, "source": str((provenance or {}).get(run, "")), "n_detections": n_rows}


def add_run(layout: StoreLayout, run: str, batches, provenance=None, overwrite: bool = False, progress=None):
    """Add (or, with ``overwrite``, replace) a detection run of an existing store.

    The run's shards are written to a temporary folder and renamed into place; then the runs table and
    the manifest are each replaced through a temporary file. One writer at a time per store.
    """
    _check_new_run(layout, run, overwrite, taken=layout.proposal_runs)
    with atomic_folder(layout.root / "dt" / f"run={run}", overwrite=overwrite) as tmp:
        n_detections = _write_run(tmp, batches, layout.n_shards, progress)
    manifest = dict(layout.manifest, runs=sorted(set(layout.manifest["runs"]) | {run}))
    return _register_run(layout, _run_row(run, n_detections, provenance), manifest, provenance)


def add_proposal_run(layout: StoreLayout, run: str, proposal: ProposalRun, provenance=None, overwrite: bool = False,
                     progress=None):
    """Add (or, with ``overwrite``, replace) a proposal run of an existing store, atomically as :func:`add_run`."""
    _check_new_run(layout, run, overwrite, taken=layout.runs)
    with atomic_folder(layout.root / "proposals" / f"run={run}", overwrite=overwrite) as tmp:
        n_proposals = _write_proposal_run(tmp, proposal, layout.n_shards, progress)
    manifest = dict(layout.manifest, proposal_runs={**layout.proposal_runs, run: proposal.description()})
    return _register_run(layout, _run_row(run, n_proposals, provenance, kind="proposals"), manifest, provenance)


def _check_new_run(layout: StoreLayout, run: str, overwrite: bool, taken) -> None:
    if run in taken:
        raise StoreError(f"{layout.root}: run name '{run}' is taken by a run of the other kind")
    if (run in layout.runs or run in layout.proposal_runs) and not overwrite:
        raise StoreError(f"{layout.root}: run '{run}' already exists (pass overwrite to replace it)")


def _register_run(layout: StoreLayout, row: dict, manifest: dict, provenance) -> StoreLayout:
    """Drop the stale match tables of a (re)written run, then replace the runs table and the manifest."""
    run = row["run"]
    for folder in list((layout.root / "matches").glob(f"*/run={run}")):  # a replaced run's match tables no longer hold
        remove_tree(folder)
    runs = pl.read_parquet(str(layout.table("runs"))).filter(pl.col("run") != run)
    runs = pl.concat([runs, pl.DataFrame([row], schema=schema.RUNS)])
    replace_file(layout.table("runs"), runs.write_parquet)
    manifest["provenance"] = dict(manifest.get("provenance", {}), **{k: str(v) for k, v in (provenance or {}).items()})
    replace_text(layout.root / MANIFEST, json.dumps(manifest, indent=2))
    return open_layout(layout.root)


def open_layout(path) -> StoreLayout:
    """Open an existing store, checking its manifest."""
    path = location(path)
    manifest_path = path / MANIFEST
    if not manifest_path.is_file():
        raise StoreError(f"{path}: not an evalengine store (no {MANIFEST})")
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("schema_version") != schema.SCHEMA_VERSION:
        raise StoreError(
            f"{path}: store schema version {manifest.get('schema_version')} is not {schema.SCHEMA_VERSION}; re-ingest it"
        )
    return StoreLayout(root=path, manifest=manifest)
