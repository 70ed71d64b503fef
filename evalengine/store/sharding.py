"""Assignment of images to shards: ``shard = splitmix64(image_id) mod n``.

A fixed integer hash (not Python's or Polars' hash, which change between versions) so that a store
written today is sharded the same way tomorrow.
"""

import math
import os

import numpy as np


def splitmix64(values: np.ndarray) -> np.ndarray:
    """The SplitMix64 finaliser of each uint64 value (wrapping arithmetic)."""
    z = np.asarray(values, dtype=np.uint64) + np.uint64(0x9E3779B97F4A7C15)
    z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return z ^ (z >> np.uint64(31))


def shard_of(image_ids: np.ndarray, n_shards: int) -> np.ndarray:
    """Shard number of each image id (SplitMix64 finaliser, modulo ``n_shards``)."""
    z = splitmix64(np.asarray(image_ids, dtype=np.int64).view(np.uint64))
    return (z % np.uint64(n_shards)).astype(np.int32)


DETECTIONS_PER_SHARD = 100_000
# proposals are cheaper per row (one class-agnostic pass) and come ten thousand per image: bigger shards mean
# fewer, larger writes while streaming them in
PROPOSALS_PER_SHARD = 1_000_000


def default_shard_count(n_rows: int, rows_per_shard: int = DETECTIONS_PER_SHARD) -> int:
    """About ``rows_per_shard`` detections (or ground truths) per shard, rounded up to a multiple of the cores so
    that the last round of shard tasks keeps every core busy; at most 1024."""
    cores = os.cpu_count() or 1
    rounds = math.ceil(n_rows / rows_per_shard / cores)
    return max(1, min(1024, rounds * cores))
