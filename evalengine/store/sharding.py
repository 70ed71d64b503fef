"""Assignment of images to shards: ``shard = splitmix64(image_id) mod n``.

A fixed integer hash (not Python's or Polars' hash, which change between versions) so that a store
written today is sharded the same way tomorrow.
"""

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
