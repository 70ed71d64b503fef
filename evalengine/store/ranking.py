"""The ``rank`` of each proposal in its image: order, then de-duplicate, then (at evaluation) truncate; and a
proposal run ranked while it streams into shards.

Hosang et al. §2.6 and their toolbox (``get_candidates.m``, ``deduplicate_proposals.m``): a method's
proposals are put in its order (by score, descending or ascending, as given, or a seeded random
permutation for unscored baselines); duplicates are removed *after* ordering and *before* the top-N cut,
keeping the first occurrence under the key ``(round(x1), round(y1), ceil(x2), ceil(y2))`` (MATLAB's
round: half away from zero). Ties in score keep the given order (MATLAB's sort is stable). A run of masks (segmented
proposals, :data:`evalengine.schema.MASK` columns) is de-duplicated by mask: a proposal whose compressed RLE equals an
earlier one's of its image.
"""

import itertools
import os
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import InputError, check_option
from evalengine.store.location import remove_tree
from evalengine.store.paths import PERTURBATION, shard_file
from evalengine.store.shards import ShardWriter, closed, write_batches, write_table
from evalengine.store.sharding import splitmix64

ORDERINGS = ("score-desc", "score-asc", "given", "random")


@dataclass(frozen=True)
class ProposalOrder:
    """How a proposal run is ranked: ``ordering`` (one of :data:`ORDERINGS`), the ``seed`` of the random
    permutation, and whether duplicates are removed (``dedup``)."""

    ordering: str = "score-desc"
    seed: int = 0
    dedup: bool = True

    def __post_init__(self):
        check_option("ordering", self.ordering, ORDERINGS, InputError)

    def description(self) -> dict:
        return asdict(self)


def _random_key(frame: pl.DataFrame, seed: int) -> np.ndarray:
    """A permutation key per proposal that depends only on (seed, image, position), not on the sharding."""
    image = splitmix64(frame.get_column("image_id").to_numpy().view(np.uint64) ^ np.uint64(seed & (2**64 - 1)))
    return splitmix64(image ^ frame.get_column("proposal_id").to_numpy().view(np.uint64))


def stored_schema(frame: pl.DataFrame | None) -> dict:
    """The stored table's schema: :data:`evalengine.schema.PROPOSALS`, and the mask columns where ``frame`` has them."""
    masks = frame is not None and "mask_rle" in frame.columns
    return {**schema.PROPOSALS, **(schema.MASK if masks else {})}


def rank_proposals(frame: pl.DataFrame, order: ProposalOrder, source: str = "proposals") -> pl.DataFrame:
    """Add ``rank`` (schema :data:`evalengine.schema.PROPOSALS`); rows come back sorted by (image, rank)."""
    if order.ordering.startswith("score"):
        missing = frame.filter(pl.col("score").is_null())
        if missing.height:
            raise InputError(f"{source}: ordering '{order.ordering}' needs a score, but proposal(s) at position "
                             f"{', '.join(map(str, missing.get_column('proposal_id').head(5)))} have none "
                             "(use ordering 'given' or 'random': --ordering given, or ProposalOrder('given') in Python; "
                             "baseline runs have no scores)")
        keys, descending = ["image_id", "score", "proposal_id"], [False, order.ordering == "score-desc", False]
    elif order.ordering == "random":
        frame = frame.with_columns(pl.Series("_key", _random_key(frame, order.seed)))
        keys, descending = ["image_id", "_key", "proposal_id"], [False, False, False]
    else:
        keys, descending = ["image_id", "proposal_id"], [False, False]
    frame = frame.sort(keys, descending=descending, maintain_order=True)
    if order.dedup and "mask_rle" in frame.columns:
        first = pl.struct("image_id", "mask_rle").is_first_distinct()
    elif order.dedup:
        x2, y2 = pl.col("x") + pl.col("w"), pl.col("y") + pl.col("h")
        key = [pl.col("image_id"), pl.col("x").round(0, mode="half_away_from_zero").alias("k1"),
               pl.col("y").round(0, mode="half_away_from_zero").alias("k2"), x2.ceil().alias("k3"),
               y2.ceil().alias("k4")]
        first = pl.struct(key).is_first_distinct()
    else:
        first = pl.lit(True)
    frame = frame.with_columns(first.alias("_first"))
    rank = pl.when(pl.col("_first")).then(pl.col("_first").cast(pl.Int32).cum_sum().over("image_id"))
    stored = stored_schema(frame)
    ranked = frame.with_columns(rank.alias("rank")).select(list(stored)).cast(stored)
    return ranked.sort("image_id", "rank", nulls_last=True, maintain_order=True)


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


def write_proposal_run(folder, proposal: ProposalRun, n_shards: int, progress) -> int:
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
    source = proposal.batches()
    workers = os.cpu_count() or 1
    with closed(source):
        first = next(iter(source), None)
        batches = [] if first is None else itertools.chain([first], iter(source))
        return _write_ranked(folder, proposal, n_shards, progress, batches, stored_schema(first), workers)


def _write_ranked(folder, proposal: ProposalRun, n_shards: int, progress, batches, table_schema: dict,
                  workers: int) -> int:
    carry, last_done = None, None
    with ShardWriter(folder, n_shards, table_schema) as writer, ThreadPoolExecutor(max_workers=workers) as pool:
        pending = deque()  # batches being ranked (Polars releases the GIL), written in order: at most one per core

        def flush(keep: int) -> None:
            while len(pending) > keep:
                writer.write(pending.popleft().result())

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
    n_proposals = write_batches(raw, proposal.batches(), n_shards, schema.PROPOSALS_RAW, progress)

    def rank_shard(k: int) -> None:
        ranked = rank_proposals(pl.read_parquet(str(shard_file(raw, k))), proposal.order, source=proposal.source)
        # lz4: zstd took a quarter of the ingest of 50M proposals; rows stay sorted by (image, rank)
        write_table(ranked, folder / f"shard={k}", compression="lz4")

    with ThreadPoolExecutor(max_workers=os.cpu_count() or 1) as pool:  # Polars releases the GIL
        list(pool.map(rank_shard, range(n_shards)))
    remove_tree(raw)
    return n_proposals
