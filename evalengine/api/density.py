"""Box density maps of a stored run against its ground truth (Borji & Iranmanesh Fig. 12; spec §3.5, E16;
:mod:`evalengine.metrics.box_density` says which cells a box counts in)."""

import json
from dataclasses import dataclass

import numpy as np
import polars as pl

from evalengine.api import DEFAULT_RUN, Store, open as open_store
from evalengine.metrics.box_density import KINDS, shard_density

__all__ = ["DENSITY_KINDS", "BoxDensity", "box_density", "box_density_output"]

DENSITY_KINDS = KINDS
_BLOCKS = 10  # the printed summary pools the grid into at most this many blocks per side


@dataclass(frozen=True)
class BoxDensity:
    """The two ``grid × grid`` count maps (row 0 at the top of the image) and the boxes they count: the run's
    detections with ``score >= score_threshold`` (all when None) and the regular (non-crowd) ground truth."""

    run: str
    kind: str
    grid: int
    score_threshold: float | None
    predicted: np.ndarray
    ground_truth: np.ndarray
    n_predicted: int
    n_ground_truth: int

    def shares(self) -> tuple:
        """Each map over its number of boxes: the share of boxes covering each cell (``occupancy``) or centred in it
        (``center``; each map then sums to 1 up to centres outside the image); zeros without boxes."""
        return tuple(counts / n if n else np.zeros(counts.shape) for counts, n in
                     ((self.predicted, self.n_predicted), (self.ground_truth, self.n_ground_truth)))

    def difference(self) -> np.ndarray:
        """Predicted share minus ground-truth share, per cell (the paper's difference map; drawn log-scaled)."""
        predicted, ground_truth = self.shares()
        return predicted - ground_truth

    def frame(self) -> pl.DataFrame:
        """``row, column, predicted, ground_truth, difference``: one row per cell (counts, and the share difference)."""
        rows, columns = np.indices(self.predicted.shape)
        return pl.DataFrame({"row": rows.ravel(), "column": columns.ravel(), "predicted": self.predicted.ravel(),
                             "ground_truth": self.ground_truth.ravel(), "difference": self.difference().ravel()})

    def block_ratios(self, blocks: int = _BLOCKS) -> np.ndarray:
        """The grid pooled into ``blocks × blocks`` (fewer on a smaller grid; blocks as even as ``np.array_split``
        makes them): each block's share of the predicted map's total over its share of the ground truth's (1: as
        dense as the ground truth; inf where the ground truth has nothing; NaN where neither has)."""
        n = min(blocks, self.grid)
        edges = [part[0] for part in np.array_split(np.arange(self.grid), n)]

        def pooled(counts):
            block = np.add.reduceat(np.add.reduceat(counts, edges, axis=0), edges, axis=1).astype(np.float64)
            total = block.sum()
            return block / total if total else block

        with np.errstate(divide="ignore", invalid="ignore"):
            return pooled(self.predicted) / pooled(self.ground_truth)


def box_density(store, run: str = DEFAULT_RUN, grid: int = 100, kind: str = "occupancy",
                score_threshold: float | None = None, on_shard_done=None) -> BoxDensity:
    """The density maps of ``run``'s detections (``score >= score_threshold``) and of the store's regular ground
    truth on a ``grid × grid`` lattice of normalised image coordinates, ``kind`` ``occupancy`` or ``center``; read
    shard by shard (memory: one shard and the grids)."""
    store = store if isinstance(store, Store) else open_store(store)
    store.layout.check_run(run)
    predicted, n_predicted = shard_density(store.layout, "dt", grid, kind, run, score_threshold, on_shard_done)
    ground_truth, n_ground_truth = shard_density(store.layout, "gt", grid, kind)
    return BoxDensity(run, kind, grid, score_threshold, predicted, ground_truth, n_predicted, n_ground_truth)


def _ratio(value: float) -> str:
    return "-" if np.isnan(value) else "inf" if np.isinf(value) else f"{value:.2f}"


def box_density_output(result: BoxDensity, as_json: bool = False, store=None) -> str:
    """``evalengine density``: the boxes counted and the grid pooled into 10 × 10 blocks, each block's predicted
    density over the ground truth's (:meth:`BoxDensity.block_ratios`); or one JSON object ``{"run", "kind", "grid",
    "score_threshold", "n_predicted", "n_ground_truth", "predicted", "ground_truth", "difference"}`` (the maps as
    lists of rows, top row first: counts, counts, predicted share minus ground-truth share)."""
    if as_json:
        return json.dumps({"run": result.run, "kind": result.kind, "grid": result.grid,
                           "score_threshold": result.score_threshold, "n_predicted": result.n_predicted,
                           "n_ground_truth": result.n_ground_truth, "predicted": result.predicted.tolist(),
                           "ground_truth": result.ground_truth.tolist(), "difference": result.difference().tolist()})
    kept = "" if result.score_threshold is None else f" with score >= {result.score_threshold:g}"
    ratios = result.block_ratios()
    n = ratios.shape[0]
    edges = [part[0] / result.grid for part in np.array_split(np.arange(result.grid), n)]
    lines = [f"box density ({result.kind}, {result.grid}×{result.grid} grid of normalised image coordinates): run "
             f"'{result.run}'{'' if store is None else f' of {store}'}, {result.n_predicted:,} detections{kept}; "
             f"{result.n_ground_truth:,} ground-truth boxes (crowd left out)",
             f"predicted density over ground-truth density in {n}×{n} blocks (1: alike; --json for the grids); "
             "rows y, columns x from",
             "y \\ x " + "".join(f"{edge:>6.2f}" for edge in edges)]
    lines += [f"{edge:>5.2f} " + "".join(f"{_ratio(value):>6}" for value in row) for edge, row in zip(edges, ratios)]
    return "\n".join(lines)
