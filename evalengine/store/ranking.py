"""The ``rank`` of each proposal in its image: order, then de-duplicate, then (at evaluation) truncate.

Hosang et al. §2.6 and their toolbox (``get_candidates.m``, ``deduplicate_proposals.m``): a method's
proposals are put in its order (by score, descending or ascending, as given, or a seeded random
permutation for unscored baselines); duplicates are removed *after* ordering and *before* the top-N cut,
keeping the first occurrence under the key ``(round(x1), round(y1), ceil(x2), ceil(y2))`` (MATLAB's
round: half away from zero). Ties in score keep the given order (MATLAB's sort is stable).
"""

from dataclasses import asdict, dataclass

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import InputError
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
        if self.ordering not in ORDERINGS:
            raise InputError(f"ordering must be one of {ORDERINGS}, got {self.ordering!r}")

    def description(self) -> dict:
        return asdict(self)


def _random_key(frame: pl.DataFrame, seed: int) -> np.ndarray:
    """A permutation key per proposal that depends only on (seed, image, position), not on the sharding."""
    image = splitmix64(frame.get_column("image_id").to_numpy().view(np.uint64) ^ np.uint64(seed & (2**64 - 1)))
    return splitmix64(image ^ frame.get_column("proposal_id").to_numpy().view(np.uint64))


def rank_proposals(frame: pl.DataFrame, order: ProposalOrder, source: str = "proposals") -> pl.DataFrame:
    """Add ``rank`` (schema :data:`evalengine.schema.PROPOSALS`); rows come back sorted by (image, rank)."""
    if order.ordering.startswith("score"):
        missing = frame.filter(pl.col("score").is_null())
        if missing.height:
            raise InputError(f"{source}: ordering '{order.ordering}' needs a score, but proposal(s) at position "
                             f"{', '.join(map(str, missing.get_column('proposal_id').head(5)))} have none "
                             "(use ordering 'given' or 'random')")
        keys, descending = ["image_id", "score", "proposal_id"], [False, order.ordering == "score-desc", False]
    elif order.ordering == "random":
        frame = frame.with_columns(pl.Series("_key", _random_key(frame, order.seed)))
        keys, descending = ["image_id", "_key", "proposal_id"], [False, False, False]
    else:
        keys, descending = ["image_id", "proposal_id"], [False, False]
    frame = frame.sort(keys, descending=descending, maintain_order=True)
    if order.dedup:
        x2, y2 = pl.col("x") + pl.col("w"), pl.col("y") + pl.col("h")
        key = [pl.col("image_id"), pl.col("x").round(0, mode="half_away_from_zero").alias("k1"),
               pl.col("y").round(0, mode="half_away_from_zero").alias("k2"), x2.ceil().alias("k3"),
               y2.ceil().alias("k4")]
        first = pl.struct(key).is_first_distinct()
    else:
        first = pl.lit(True)
    frame = frame.with_columns(first.alias("_first"))
    rank = pl.when(pl.col("_first")).then(pl.col("_first").cast(pl.Int32).cum_sum().over("image_id"))
    ranked = frame.with_columns(rank.alias("rank")).select(list(schema.PROPOSALS)).cast(schema.PROPOSALS)
    return ranked.sort("image_id", "rank", nulls_last=True, maintain_order=True)
