"""Writing a store: a new one, a run added or replaced, a cache kept; each atomically
(see :mod:`evalengine.store.commit`)."""

import json
import warnings
from datetime import datetime, timezone
from pathlib import Path

import polars as pl

from evalengine import __version__, schema
from evalengine.errors import StoreError, StoreWarning
from evalengine.store.commit import atomic_folder, replace_file, replace_text
from evalengine.store.layout import StoreLayout, open_layout
from evalengine.store.location import is_remote, location, remove_tree
from evalengine.store.lock import writing
from evalengine.store.paths import CATEGORY_EDGES, ENTRIES, IMAGE_LABELS, MANIFEST, StorePaths, check_name
from evalengine.store.ranking import ProposalRun, write_proposal_run
from evalengine.store.shards import ShardWriter, write_batches, write_table
from evalengine.store.sharding import shard_of
from evalengine.store.tags import check_tags, proposal_tags, tag_list, with_tags


def create_store(path, images, categories, gt, runs: dict, n_shards: int = 1, provenance=None, overwrite=False,
                 progress=None, proposal_runs: dict | None = None, tags: dict | None = None,
                 image_labels=None, category_edges=None) -> StoreLayout:
    """Write a new store atomically, under the store's write lock.

    ``gt``: the ground truth (schema :data:`evalengine.schema.GT` and its source fields), a frame or a list of one
    that is emptied once written, so that a caller who hands it over holds no ground truth while the runs are read.
    ``runs`` maps a run name to an iterable of detection frames (schema :data:`evalengine.schema.DT`),
    which are sharded and written as they come. ``proposal_runs`` maps a run name to a
    :class:`~evalengine.store.ranking.ProposalRun`. ``progress(n_rows)`` is called after each frame.
    ``provenance`` maps a name to the input it came from. ``tags`` maps a run to its tags (:mod:`evalengine.store.tags`).
    ``overwrite`` replaces a store, never anything else (see :func:`replaced_store`). ``image_labels`` (sharded by
    image) and ``category_edges`` are OpenImages' verified labels and class hierarchy (:mod:`evalengine.io.openimages`).
    """
    proposal_runs = proposal_runs or {}
    tags = tags or {}
    for run in [*runs, *proposal_runs]:
        check_name("run", run)
    clash = set(runs) & set(proposal_runs)
    if clash:
        raise StoreError(f"{path}: run name(s) {', '.join(sorted(clash))} used for both detections and proposals")
    if n_shards < 1:
        raise StoreError(f"n_shards must be >= 1, got {n_shards}")
    path = location(path)
    images = images.with_columns(pl.Series("shard", shard_of(images.get_column("image_id").to_numpy(), n_shards)))
    run_rows = {run: {"tags": check_tags(tags.get(run, {}))} for run in runs}  # checked before anything is written
    run_rows.update({run: {"kind": "proposals", "tags": proposal_tags(run, proposal.description(), tags.get(run))}
                     for run, proposal in proposal_runs.items()})
    with writing(path):
        replaced = replaced_store(path, overwrite, (provenance or {}).values())
        _write_store(path, images, categories, gt, runs, proposal_runs, n_shards, provenance, progress, run_rows,
                     {"image_labels": image_labels, "category_edges": category_edges})
    if replaced:
        warnings.warn(f"{path}: replaced {replaced}", StoreWarning, stacklevel=2)
    return open_layout(path)


def replaced_store(path, overwrite: bool, inputs=()) -> str:
    """What writing a store at ``path`` replaces ('' for nothing or an empty folder), or a :class:`StoreError`:
    only a store of ours is replaced (its manifest says so), with ``overwrite``, holding nothing but a store's
    tables (never another file, never one of the ``inputs``)."""
    if not path.exists():
        return ""
    if not is_remote(path) and not path.is_dir():
        raise StoreError(f"{path}: is a file, not a store")
    entries = {entry.name for entry in path.glob("*")}
    if not entries:
        return ""
    if MANIFEST not in entries:
        raise StoreError(f"{path}: exists and is not an evalengine store (no {MANIFEST}); refusing to replace it")
    if not overwrite:
        raise StoreError(f"{path}: already exists (--overwrite, or overwrite=True in Python, replaces it)")
    foreign = sorted(entries - set(ENTRIES))
    if foreign:
        raise StoreError(f"{path}: holds '{foreign[0]}', which is not part of a store; refusing to replace it")
    if not is_remote(path):
        folder = path.resolve()
        for source in map(Path, map(str, inputs)):
            if source.exists() and source.resolve().is_relative_to(folder):
                raise StoreError(f"{path}: holds the input {source}; refusing to replace it")
    try:
        manifest = json.loads((path / MANIFEST).read_text())
        return (f"the store of {manifest['n_shards']} shards and runs: "
                f"{', '.join([*manifest['runs'], *manifest.get('proposal_runs', {})]) or 'none'}")
    except (OSError, ValueError, KeyError, TypeError):
        return "a damaged store"


def _write_store(path, images, categories, gt, runs, proposal_runs, n_shards, provenance, progress, run_rows,
                 extra) -> None:
    with atomic_folder(path, overwrite=True) as tmp:
        paths = StorePaths(tmp)
        if extra["category_edges"] is not None:
            write_table(extra["category_edges"], paths.table(CATEGORY_EDGES).parent)
        if extra["image_labels"] is not None:
            write_batches(tmp / IMAGE_LABELS, [extra["image_labels"]], n_shards, schema.IMAGE_LABELS)
        write_table(images, paths.table("images").parent)
        write_table(categories, paths.table("categories").parent)
        gt = gt if isinstance(gt, list) else [gt]
        with ShardWriter(paths.gt, n_shards, dict(gt[0].schema)) as gt_writer:
            gt_writer.write(gt.pop())
            gt_writer.close()
        rows = [run_row(run, write_batches(paths.dt(run), batches, n_shards, schema.DT, progress), provenance,
                        **run_rows[run]) for run, batches in runs.items()]
        rows += [run_row(run, write_proposal_run(paths.proposals(run), proposal, n_shards, progress), provenance,
                         **run_rows[run]) for run, proposal in proposal_runs.items()]
        write_table(pl.DataFrame(rows, schema=schema.RUNS), paths.table("runs").parent)
        manifest = {
            "schema_version": schema.SCHEMA_VERSION,
            "evalengine_version": __version__,
            "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "n_shards": n_shards,
            "runs": sorted(runs),
            "proposal_runs": {run: proposal.description() for run, proposal in sorted(proposal_runs.items())},
            "provenance": {k: str(v) for k, v in (provenance or {}).items()},
        }
        paths.manifest.write_text(json.dumps(manifest, indent=2))  # last: on an object store it commits the store


def run_row(run: str, n_rows: int, provenance, kind: str = "detections", tags: dict | None = None) -> dict:
    return {"run": run, "kind": kind, "source": str((provenance or {}).get(run, "")), "n_detections": n_rows,
            "tags": tag_list(tags)}


def add_run(layout: StoreLayout, run: str, batches, provenance=None, overwrite: bool = False,
            progress=None, tags: dict | None = None) -> StoreLayout:
    """Add (or, with ``overwrite``, replace) a detection run of an existing store, with its ``tags``
    (:mod:`evalengine.store.tags`).

    Under the store's write lock, the run's shards are written to a temporary folder and renamed into place;
    then the runs table and the manifest, read again under the lock, are each replaced through a temporary file.
    """
    check_tags(tags or {})  # before anything is written
    with writing(layout.root):
        layout, replaced = _check_new_run(layout.root, run, overwrite, kind="detections")
        with atomic_folder(layout.paths.dt(run), overwrite=True) as tmp:
            n_detections = write_batches(tmp, batches, layout.n_shards, schema.DT, progress)
        manifest = dict(layout.manifest, runs=sorted(set(layout.manifest["runs"]) | {run}))
        return _register_run(layout, run_row(run, n_detections, provenance, tags=tags), manifest, provenance,
                             replaced)


def add_proposal_run(layout: StoreLayout, run: str, proposal: ProposalRun, provenance=None, overwrite: bool = False,
                     progress=None, tags: dict | None = None) -> StoreLayout:
    """Add (or, with ``overwrite``, replace) a proposal run of an existing store with its ``tags`` (and a perturbed
    run's own, :func:`evalengine.store.tags.proposal_tags`), atomically as :func:`add_run`."""
    tags = proposal_tags(run, proposal.description(), tags)  # before anything is written
    with writing(layout.root):
        layout, replaced = _check_new_run(layout.root, run, overwrite, kind="proposals")
        with atomic_folder(layout.paths.proposals(run), overwrite=True) as tmp:
            n_proposals = write_proposal_run(tmp, proposal, layout.n_shards, progress)
        manifest = dict(layout.manifest, proposal_runs={**layout.proposal_runs, run: proposal.description()})
        row = run_row(run, n_proposals, provenance, kind="proposals", tags=tags)
        return _register_run(layout, row, manifest, provenance, replaced)


def _check_new_run(root, run: str, overwrite: bool, kind: str) -> tuple:
    """The store as it is now (read under the write lock), if ``run`` may be written to it, and what writing it
    replaces ('' for nothing)."""
    check_name("run", run)
    layout = open_layout(root)
    if run in (layout.proposal_runs if kind == "detections" else layout.runs):
        raise StoreError(f"{layout.root}: run name '{run}' is taken by a run of the other kind")
    if run in layout.runs or run in layout.proposal_runs:
        if not overwrite:
            raise StoreError(f"{layout.root}: run '{run}' already exists (--overwrite, or overwrite=True in Python, replaces it)")
        old = layout.read("runs").filter(pl.col("run") == run).to_dicts()
        what = f" ({old[0]['n_detections']} {kind} from {old[0]['source'] or 'a generator'})" if old else ""
        return layout, f"run '{run}'{what}"
    return layout, ""


def _register_run(layout: StoreLayout, row: dict, manifest: dict, provenance, replaced: str) -> StoreLayout:
    """Drop the stale match tables of a (re)written run, then replace the runs table and the manifest (under the
    write lock of the caller)."""
    run = row["run"]
    for folder in list(layout.paths.run_matches(run)):  # a replaced run's match tables no longer hold
        remove_tree(folder)
    runs = with_tags(layout.read("runs")).filter(pl.col("run") != run)
    runs = pl.concat([runs, pl.DataFrame([row], schema=schema.RUNS)])
    replace_file(layout.paths.table("runs"), runs.write_parquet)
    manifest["provenance"] = dict(manifest.get("provenance", {}), **{k: str(v) for k, v in (provenance or {}).items()})
    replace_text(layout.paths.manifest, json.dumps(manifest, indent=2))
    if replaced:
        warnings.warn(f"{layout.root}: replaced {replaced}", StoreWarning, stacklevel=3)
    return open_layout(layout.root)


def read_hit_counts(layout: StoreLayout, lattice: str) -> pl.DataFrame | None:
    """The cached exact HPRS hit counts of ``lattice`` (see :mod:`evalengine.metrics.oma`), None if none yet."""
    cache = layout.paths.hit_counts(lattice)
    return pl.read_parquet(str(cache)) if cache.is_file() else None


def add_hit_counts(layout: StoreLayout, lattice: str, known: pl.DataFrame | None, counted: pl.DataFrame) -> None:
    """Keep newly ``counted`` hit counts beside the ``known`` ones (N_hit depends on the image size, box and τ only,
    so every later query of every run reuses them)."""
    if counted.height:
        cache = layout.paths.hit_counts(lattice)
        with writing(layout.root):
            cache.parent.mkdir(parents=True, exist_ok=True)
            replace_file(cache, (counted if known is None else pl.concat([known, counted])).write_parquet)
