"""Check a store and repair what can be repaired without the inputs (``evalengine fsck``).

Under the store's write lock, every file the manifest promises is looked for and its Parquet footer read; what an
interrupted or concurrent writer of an older version left is found: temporary folders, run folders and runs-table
rows without a manifest entry, match tables without their ``protocol.json``, of a run that is gone, or missing a
shard. Repairs only remove what no result depends on (a removed match table is made again by the next
``evaluate``); a missing or damaged table of the ground truth or of a run is reported with what to do.
"""

from dataclasses import dataclass

import polars as pl
import pyarrow.parquet as pq

from evalengine.errors import StoreError, first_line
from evalengine.store.commit import replace_file
from evalengine.store.layout import read_layout
from evalengine.store.location import is_remote, location, remove_tree
from evalengine.store.lock import temporaries, writing
from evalengine.store.paths import (ACCUMULATION_FILE, CURVE_FILE, DT, MANIFEST, ORDER_FILE, PARTITIONS, PROPOSALS,
                                    PROTOCOL_FILE, TABLES, shard_file)

REMOVE = "remove"


@dataclass(frozen=True)
class Finding:
    """One problem: the file or folder, what is wrong, and what repairing does (``remove``) or what to do."""

    path: str
    problem: str
    repair: str


def fsck(path, repair: bool = False) -> list:
    """The problems of the store at ``path`` (a list of :class:`Finding`); with ``repair``, those whose repair is
    :data:`REMOVE` are repaired."""
    root = location(path)
    if not (root / MANIFEST).is_file():  # nothing to check, and no lock (or folder) to make for it
        raise StoreError(f"{root}: not an evalengine store (no {MANIFEST})")
    with writing(root, clean=False):
        findings = [Finding(str(entry), "left by an interrupted write", REMOVE)
                    for entry in ([] if is_remote(root) else temporaries(root))]
        try:
            layout = read_layout(root)
        except StoreError as exc:
            return findings + [Finding(str(root / MANIFEST), str(exc), "re-ingest the store")]
        findings += _tables(layout) + _runs(layout) + _match_tables(layout)
        if repair:
            _repair(layout, findings)
    return findings


def _unreadable(path) -> str:
    """'' if ``path`` is a readable Parquet file, else why not."""
    try:
        if is_remote(path):
            with path.fs.open_input_file(path.key) as stream:
                pq.read_metadata(stream)
        else:
            pq.read_metadata(str(path))
        return ""
    except FileNotFoundError:
        return "missing"
    except (OSError, ValueError) as exc:
        return f"unreadable ({first_line(exc)})"


def _sharded(folder, n_shards: int, fix: str) -> list:
    """A sharded table's missing or unreadable shards, and shard folders beyond the store's shard count."""
    findings = []
    for k in range(n_shards):
        problem = _unreadable(shard_file(folder, k))
        if problem:
            findings.append(Finding(str(shard_file(folder, k)), problem, fix))
    extra = [entry for entry in folder.glob("shard=*") if entry.name.removeprefix("shard=") not in
             {str(k) for k in range(n_shards)}]
    findings += [Finding(str(entry), f"not one of the store's {n_shards} shards", fix) for entry in extra]
    return findings


def _tables(layout) -> list:
    findings = []
    for name in TABLES:
        problem = _unreadable(layout.paths.table(name))
        if problem:
            findings.append(Finding(str(layout.paths.table(name)), problem, "re-ingest the store"))
    if layout.partition_runs:
        findings += _sharded(layout.paths.gt_partitions, layout.n_shards, "re-ingest the store")
    return findings + _sharded(layout.paths.gt, layout.n_shards, "re-ingest the store")


def _runs(layout) -> list:
    findings = []
    for kind, folder, runs, run_path in ((DT, layout.root / DT, layout.runs, layout.paths.dt),
                                         (PROPOSALS, layout.root / PROPOSALS, layout.proposal_runs,
                                          layout.paths.proposals),
                                         ("partition", layout.root / PARTITIONS, layout.partition_runs,
                                          layout.paths.partitions)):
        for run in runs:
            findings += _sharded(run_path(run), layout.n_shards, f"add run '{run}' again with overwrite")
        for entry in folder.glob("run=*"):
            if entry.name.removeprefix("run=") not in runs:
                findings.append(Finding(str(entry), f"a {kind} run the manifest does not list", REMOVE))
    if not any(finding.path == str(layout.paths.table("runs")) for finding in findings):
        listed = set(layout.runs) | set(layout.proposal_runs)
        stray = sorted(set(layout.read("runs").get_column("run").to_list()) - listed)
        if stray:
            findings.append(Finding(str(layout.paths.table("runs")),
                                    f"rows of runs the manifest does not list: {', '.join(stray)}", REMOVE))
    return findings


def _match_tables(layout) -> list:
    runs = set(layout.runs) | set(layout.proposal_runs) | set(layout.partition_runs)
    findings = []
    for folder in layout.paths.matches.glob("protocol=*/run=*"):
        recorded = folder / PROTOCOL_FILE
        if folder.name.removeprefix("run=") not in runs:
            findings.append(Finding(str(folder), "match table of a run the manifest does not list", REMOVE))
        elif not recorded.is_file():
            findings.append(Finding(str(folder), f"match table without its {PROTOCOL_FILE} (unfinished)", REMOVE))
        elif any(_sharded(side, layout.n_shards, REMOVE) for side in folder.glob("*")
                 if side.name not in (PROTOCOL_FILE, ACCUMULATION_FILE, ORDER_FILE, CURVE_FILE)):
            findings.append(Finding(str(folder), "match table with missing or damaged shards", REMOVE))
        elif (folder / ACCUMULATION_FILE).exists() and _unreadable(folder / ACCUMULATION_FILE):
            findings.append(Finding(str(folder / ACCUMULATION_FILE),  # written again by the next evaluate
                                    f"AP table {_unreadable(folder / ACCUMULATION_FILE)}", REMOVE))
        else:  # the tables the SQL views read, written again when the run is next evaluated
            findings += [Finding(str(folder / kept), f"kept table {_unreadable(folder / kept)}", REMOVE)
                         for kept in (ORDER_FILE, CURVE_FILE) if (folder / kept).exists() and _unreadable(folder / kept)]
    return findings


def _repair(layout, findings: list) -> None:
    for finding in findings:
        if finding.repair != REMOVE:
            continue
        if finding.path == str(layout.paths.table("runs")):
            listed = set(layout.runs) | set(layout.proposal_runs)
            runs = layout.read("runs").filter(pl.col("run").is_in(sorted(listed)))
            replace_file(layout.paths.table("runs"), runs.write_parquet)
            continue
        target = location(finding.path)
        if is_remote(target) or target.is_dir():
            remove_tree(target)
        else:
            target.unlink(missing_ok=True)
