"""An opened store: its path map and manifest (see :mod:`evalengine.store.paths` for the layout)."""

import json
from dataclasses import dataclass
from functools import cached_property

import polars as pl

from evalengine import schema
from evalengine.errors import StoreError
from evalengine.store.location import location
from evalengine.store.paths import StorePaths
from evalengine.store.shards import scan_shards


@dataclass(frozen=True)
class StoreLayout:
    """Paths and manifest of an existing store."""

    root: object  # pathlib.Path or evalengine.store.location.RemotePath
    manifest: dict

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

    def check_run(self, run: str) -> None:
        if run not in self.manifest["runs"]:
            raise StoreError(f"{self.root}: no run '{run}' (runs: {', '.join(self.runs) or 'none'})")

    def check_proposal_run(self, run: str) -> None:
        if run not in self.proposal_runs:
            raise StoreError(f"{self.root}: no proposal run '{run}' "
                             f"(proposal runs: {', '.join(sorted(self.proposal_runs)) or 'none'})")

    def read(self, table: str) -> pl.DataFrame:
        """One of the single-file tables (``images``, ``categories``, ``runs``)."""
        return pl.read_parquet(str(self.paths.table(table)))

    def scan(self, table: str) -> pl.LazyFrame:
        """One of the single-file tables, lazily."""
        return pl.scan_parquet(str(self.paths.table(table)))

    def scan_gt(self) -> pl.LazyFrame:
        """The ground truth of every shard, lazily."""
        return scan_shards(self.paths.gt)

    def category_ids(self) -> list:
        return pl.read_parquet(str(self.paths.table("categories")), columns=["category_id"]).get_column("category_id").to_list()


def open_layout(path) -> StoreLayout:
    """Open an existing store, checking its manifest."""
    path = location(path)
    manifest_path = StorePaths(path).manifest
    if not manifest_path.is_file():
        raise StoreError(f"{path}: not an evalengine store (no {manifest_path.name})")
    manifest = json.loads(manifest_path.read_text())
    if manifest.get("schema_version") != schema.SCHEMA_VERSION:
        raise StoreError(
            f"{path}: store schema version {manifest.get('schema_version')} is not {schema.SCHEMA_VERSION}; re-ingest it"
        )
    return StoreLayout(root=path, manifest=manifest)
