"""An opened store: its path map and manifest (see :mod:`evalengine.store.paths` for the layout).

A store found damaged (an unreadable or incomplete manifest, shards that do not match its shard count, a missing or
unreadable table file) is a :class:`~evalengine.errors.StoreError` that names the file and points to
``evalengine fsck``.
"""

import html
import json
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from evalengine import schema
from evalengine.errors import StoreError, first_line
from evalengine.store.location import location
from evalengine.store.paths import PART, StorePaths, shard_file
from evalengine.store.shards import scan_shards


class Shown:
    """How an object over a store (its ``layout``) shows in a notebook: one line saying what it is (``repr``, and as
    HTML), not the manifest."""

    def described(self) -> str:
        return self.layout.described()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.described()})"

    def _repr_html_(self) -> str:
        return f"<code>{html.escape(repr(self))}</code>"


@dataclass(frozen=True, repr=False)
class StoreLayout(Shown):
    """Paths and manifest of an existing store."""

    root: object  # pathlib.Path or evalengine.store.location.RemotePath
    manifest: dict
    persistent = True  # its tables are files (a store in memory: evalengine.store.memory)

    @property
    def layout(self) -> "StoreLayout":
        return self

    def described(self) -> str:
        """``'<root>': N shards, runs: …[, proposal runs: …]``."""
        proposals = f", proposal runs: {', '.join(self.proposal_runs)}" if self.proposal_runs else ""
        return f"'{self.root}': {self.n_shards} shards, runs: {', '.join(self.runs) or 'none'}{proposals}"

    @cached_property
    def paths(self) -> StorePaths:
        return StorePaths(self.root)

    @property
    def n_shards(self) -> int:
        return self.manifest["n_shards"]

    @property
    def runs(self) -> list:
        return list(self.manifest["runs"])

    @property
    def proposal_runs(self) -> dict:
        """Proposal run name → its ordering, de-duplication and box convention."""
        return dict(self.manifest.get("proposal_runs", {}))

    @property
    def partition_runs(self) -> dict:
        """Partition run name → its parameters and tags (a partition store, :mod:`evalengine.store.partitions`)."""
        return dict(self.manifest.get("partition_runs", {}))

    def check_run(self, run: str) -> None:
        if run not in self.manifest["runs"]:
            raise StoreError(f"{self.root}: no run '{run}' (runs: {', '.join(self.runs) or 'none'})")

    def check_proposal_run(self, run: str) -> None:
        if run not in self.proposal_runs:
            raise StoreError(f"{self.root}: no proposal run '{run}' "
                             f"(proposal runs: {', '.join(sorted(self.proposal_runs)) or 'none'})")

    def read(self, table: str, columns=None) -> pl.DataFrame:
        """One of the single-file tables (``images``, ``categories``, ``runs``)."""
        return read_stored(self.paths.table(table), self.root, columns)

    def scan(self, table: str) -> pl.LazyFrame:
        """One of the single-file tables, lazily."""
        return pl.scan_parquet(str(self.paths.table(table)))

    def scan_gt(self) -> pl.LazyFrame:
        """The ground truth of every shard, lazily."""
        return self.scan_sharded(self.paths.gt)

    def scan_sharded(self, folder) -> pl.LazyFrame:
        """A sharded table of the store (a run's detections, a match table's side), lazily."""
        return scan_shards(folder)

    def shard_pieces(self, folder) -> list:
        """A sharded table a shard at a time: one lazy frame per shard of the store, in shard order, each that shard's
        rows of :meth:`scan_sharded` (the same columns; a filter on the hive column ``shard``: one file read)."""
        table = self.scan_sharded(folder)
        return [table.filter(pl.col("shard") == k) for k in range(self.n_shards)]

    def read_file(self, path, columns=None, exclude=()) -> pl.DataFrame:
        """One table file (:func:`read_stored`)."""
        return read_stored(path, self.root, columns, exclude)

    def columns_of(self, path) -> list:
        """The column names of one table file."""
        return pl.scan_parquet(str(path)).collect_schema().names()

    def category_ids(self) -> list:
        return self.read("categories", ["category_id"]).get_column("category_id").to_list()


def damaged(path, store, problem: str) -> StoreError:
    """The error of a damaged store: the file, what is wrong with it, and the way out."""
    return StoreError(f"{path}: {problem} — the store is damaged; run `evalengine fsck {store}`")


def read_stored(path, store, columns=None, exclude=()) -> pl.DataFrame:
    """A table file of ``store`` (a shard, in a shard task too), whole or its ``columns`` (else all but ``exclude``);
    a missing or unreadable one is a damaged store. The one place table files are read eagerly."""
    try:
        if columns is None and exclude:
            return pl.scan_parquet(str(path)).select(pl.exclude(*exclude)).collect()
        return pl.read_parquet(str(path), columns=columns)
    except FileNotFoundError:
        raise damaged(path, store, "missing") from None
    except (pl.exceptions.PolarsError, OSError) as exc:
        raise damaged(path, store, f"not a readable Parquet file ({first_line(exc)})") from exc


# the manifest's keys and their JSON types (``proposal_runs`` and ``provenance`` may be left out)
MANIFEST_KEYS = {"schema_version": int, "n_shards": int, "runs": list, "proposal_runs": dict, "provenance": dict}
OPTIONAL_KEYS = ("proposal_runs", "provenance")
JSON_TYPES = {int: "an integer", float: "a number", str: "a string", bool: "a boolean", list: "a list",
              dict: "an object", type(None): "null"}


def _manifest_problem(manifest) -> str | None:
    """What is wrong with a parsed manifest, if anything (its schema version aside)."""
    if not isinstance(manifest, dict):
        return f"{JSON_TYPES[type(manifest)]}, not a JSON object"
    for key, kind in MANIFEST_KEYS.items():
        if key not in manifest:
            if key not in OPTIONAL_KEYS:
                return f"no '{key}'"
        elif not isinstance(manifest[key], kind) or isinstance(manifest[key], bool):
            return f"'{key}' is {JSON_TYPES[type(manifest[key])]}, not {JSON_TYPES[kind]}"
    if manifest["n_shards"] < 1:
        return f"'n_shards' is {manifest['n_shards']}, not a count of shards"
    if not all(isinstance(run, str) for run in manifest["runs"]):
        return "'runs' holds something other than run names"
    if not all(isinstance(run, dict) for run in manifest.get("proposal_runs", {}).values()):
        return "'proposal_runs' holds something other than run descriptions"
    return None


def _read_manifest(path, manifest_path) -> dict:
    """The manifest as a dict with its keys of the right types, or a located error."""
    try:
        manifest = json.loads(manifest_path.read_text())
    except ValueError as exc:  # not JSON, or not UTF-8 text
        raise damaged(manifest_path, path, f"not valid JSON ({first_line(exc)})") from None
    version = manifest.get("schema_version") if isinstance(manifest, dict) else None
    if version is not None and version != schema.SCHEMA_VERSION:  # an older store may hold other keys
        raise StoreError(f"{path}: store schema version {version!r} is not {schema.SCHEMA_VERSION}; re-ingest it")
    problem = _manifest_problem(manifest)
    if problem:
        raise damaged(manifest_path, path, problem)
    return manifest


def _check_shard_count(layout: StoreLayout) -> None:
    """The ground truth holds exactly the manifest's ``n_shards`` shards (one listing of its folder)."""
    n_shards, folder = layout.n_shards, layout.paths.gt
    found = {file.parent.name for file in folder.glob(f"shard=*/{PART}")}
    missing = [k for k in range(n_shards) if f"shard={k}" not in found]
    if missing:
        raise damaged(shard_file(folder, missing[0]), layout.root, f"missing (the manifest says {n_shards} shards)")
    extra = sorted(found - {f"shard={k}" for k in range(n_shards)})
    if extra:
        raise damaged(folder / extra[0], layout.root, f"a shard beyond the manifest's n_shards ({n_shards})")


def read_layout(path) -> StoreLayout:
    """An existing store as its manifest (checked) describes it, whatever its tables hold (see fsck)."""
    path = location(path)
    manifest_path = StorePaths(path).manifest
    if not manifest_path.is_file():
        raise StoreError(f"{path}: not an evalengine store (no {manifest_path.name})")
    return StoreLayout(root=path, manifest=_read_manifest(path, manifest_path))


def open_layout(path) -> StoreLayout:
    """Open an existing store, checking its manifest and that its ground truth has as many shards as it says."""
    layout = read_layout(path)
    _check_shard_count(layout)
    return layout
