"""The store's one path map: where every table lives, as paths to read and write and as globs relative to the
store for the SQL views (:mod:`evalengine.sql` hands them to DuckDB as variables).

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
    STORE/partitions/gt/shard=k/part-0.parquet          (ground-truth label maps as runs, one per annotator)
    STORE/partitions/run=R/shard=k/part-0.parquet       (machine partitions of run R, one per parameter)
    STORE/image_labels/shard=k/part-0.parquet           (verified image-level labels: OpenImages)
    STORE/category_edges/part-0.parquet                 (the class hierarchy: OpenImages)
    STORE/matches/protocol=P/run=R/<side>/shard=k/part-0.parquet  (+ protocol.json, written last)
"""

import re
from dataclasses import dataclass

from evalengine.errors import InputError

MANIFEST = "manifest.json"
PART = "part-0.parquet"
PERTURBATION = "perturbation.parquet"
PROTOCOL_FILE = "protocol.json"
# a COCO match table's AP and recall per (category, IoU threshold, area range, max dets), beside its protocol.json
ACCUMULATION_FILE = "accumulation.parquet"
# an OpenImages match table's curve order: each entry's place in its class's curve, as the Python metric sorted it
ORDER_FILE = "order.parquet"
# a COCO match table's precision-recall counts per counted detection, area range and cap (the pr_curve view's)
CURVE_FILE = "curve.parquet"
TABLES = ("images", "categories", "runs")  # one file each
GT, DT, PROPOSALS, MATCHES, HIT_COUNTS = "gt", "dt", "proposals", "matches", "hprs"
PARTITIONS = "partitions"
IMAGE_LABELS, CATEGORY_EDGES = "image_labels", "category_edges"  # OpenImages' verified labels and class hierarchy
ENTRIES = (MANIFEST, *TABLES, GT, DT, PROPOSALS, MATCHES, HIT_COUNTS, PARTITIONS, IMAGE_LABELS,
           CATEGORY_EDGES)  # everything a store's folder may hold

# a name that becomes part of a path (a run, a protocol's match key, a cache's lattice): one folder level, never a
# glob, a hive partition value DuckDB reads back as it is, the same on every file system
NAME_RULE = "1 to 100 letters, digits, '.', '_' or '-', starting with a letter or digit"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,99}")


def check_name(kind: str, name) -> str:
    """``name`` if it follows :data:`NAME_RULE`, else an :class:`InputError` naming it."""
    if not isinstance(name, str) or _NAME.fullmatch(name) is None:
        raise InputError(f"{kind} name {name!r} is not allowed: use {NAME_RULE}")
    return name


def shard_file(folder, k):
    """``folder/shard=k/part-0.parquet``: one shard of a sharded table."""
    return folder / f"shard={k}" / PART


@dataclass(frozen=True)
class StorePaths:
    """Every table's location under ``root`` (a :class:`pathlib.Path` or a
    :class:`~evalengine.store.location.RemotePath`)."""

    root: object

    @property
    def manifest(self):
        return self.root / MANIFEST

    def table(self, name: str):
        return self.root / name / PART

    @property
    def gt(self):
        return self.root / GT

    def gt_shard(self, k: int):
        return shard_file(self.gt, k)

    def image_labels_shard(self, k: int):
        return shard_file(self.root / IMAGE_LABELS, k)

    def dt(self, run: str):
        return self.root / DT / f"run={check_name('run', run)}"

    def dt_shard(self, run: str, k: int):
        return shard_file(self.dt(run), k)

    def proposals(self, run: str):
        return self.root / PROPOSALS / f"run={check_name('run', run)}"

    def proposal_shard(self, run: str, k: int):
        return shard_file(self.proposals(run), k)

    def perturbation(self, run: str):
        return self.proposals(run) / PERTURBATION

    def hit_counts(self, lattice: str):
        """Wang et al.'s exact N_hit per (image size, box, τ), shared by every proposal run (see metrics.oma)."""
        return self.root / HIT_COUNTS / f"lattice={check_name('lattice', lattice)}" / PART

    @property
    def gt_partitions(self):
        return self.root / PARTITIONS / GT

    def partitions(self, run: str):
        return self.root / PARTITIONS / f"run={check_name('run', run)}"

    @property
    def matches(self):
        return self.root / MATCHES

    def matches_dir(self, protocol_key: str, run: str):
        return self.matches / f"protocol={check_name('protocol', protocol_key)}" / f"run={check_name('run', run)}"

    def run_matches(self, run: str):
        """Every match table of ``run``, whatever its protocol."""
        return self.matches.glob(f"*/run={check_name('run', run)}")


def table_globs(families: dict) -> dict:
    """Glob of every table relative to the store, by name: the stored tables, and for each protocol family
    (``{name: sides}``) ``<name>_<side>`` (its match tables) and ``<name>_protocols`` (their ``protocol.json``).
    A family's keys are ``<name>`` and ``<name>-<hash>``."""
    shards = "shard=*/*.parquet"
    globs = {name: f"{name}/*.parquet" for name in TABLES}
    globs.update({GT: f"{GT}/{shards}", DT: f"{DT}/run=*/{shards}", PROPOSALS: f"{PROPOSALS}/run=*/{shards}"})
    globs.update({f"{GT}_{PARTITIONS}": f"{PARTITIONS}/{GT}/{shards}", PARTITIONS: f"{PARTITIONS}/run=*/{shards}"})
    globs.update({IMAGE_LABELS: f"{IMAGE_LABELS}/{shards}", CATEGORY_EDGES: f"{CATEGORY_EDGES}/*.parquet"})
    for family, sides in families.items():
        tables = f"{MATCHES}/protocol={family}*/run=*"
        globs[f"{family}_protocols"] = f"{tables}/{PROTOCOL_FILE}"
        globs.update({f"{family}_{side}": f"{tables}/{side}/{shards}" for side in sides})
    return globs
