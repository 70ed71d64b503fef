"""Where boxes fall in the image: density maps of a run's detections and of the ground truth in normalised image
coordinates (Borji & Iranmanesh Fig. 12 and Fig. 11's target-box map; spec §3.5 [DECIDE], experiment E16).

The paper does not define its statistic; both readings the spec names are here, on a ``grid × grid`` lattice of the
unit square (cell ``(i, j)`` spans ``[j/G, (j+1)/G) × [i/G, (i+1)/G)`` of ``(x / width, y / height)``, row 0 at the
top of the image):

- ``occupancy``: each box adds 1 to every cell whose interior meets the box's interior — columns
  ``floor(x1·G/W) … ceil(x2·G/W) − 1`` and rows alike, with ``x1 = x``, ``x2 = x + w`` and ``x1·G/W`` computed as
  ``(x·G)/W``; cells outside the image are dropped (a box is clipped to it), and a box without area (``x2·G/W <=
  x1·G/W`` or the same for y) covers nothing. A box touching a cell only along its edge does not cover it.
- ``center``: each box adds 1 to the cell holding its centre ``(x + w/2, y + h/2)``; the image's right and bottom
  edges belong to the last cells, and a centre outside the image counts nowhere.

Counts are summed shard by shard (occupancy through a 2-D difference array: four ``bincount`` calls per shard, one
prefix sum at the end), so memory is one shard's boxes plus the grids.
"""

import numpy as np
import polars as pl

from evalengine.errors import InputError
from evalengine.store.layout import StoreLayout, read_stored

KINDS = ("occupancy", "center")
BOX = ("x", "y", "w", "h")
MAX_GRID = 4096  # cells per side: the grids stay within ~130 MB


def _scaled(start: pl.Expr, size: pl.Expr, extent: str, grid: int) -> tuple:
    """``(start·G/E, (start + size)·G/E)`` of one axis, in grid units."""
    return (start * grid / pl.col(extent)), ((start + size) * grid / pl.col(extent))


def cell_ranges(boxes: pl.DataFrame, grid: int) -> pl.DataFrame:
    """``j0, j1, i0, i1``: the half-open column and row ranges each box covers (``occupancy``), clipped to the grid;
    boxes that cover nothing are left out. ``boxes``: ``x, y, w, h, width, height``."""
    x1, x2 = _scaled(pl.col("x"), pl.col("w"), "width", grid)
    y1, y2 = _scaled(pl.col("y"), pl.col("h"), "height", grid)
    spans = boxes.select(x1.floor().clip(0, grid).cast(pl.Int64).alias("j0"),
                         x2.ceil().clip(0, grid).cast(pl.Int64).alias("j1"),
                         y1.floor().clip(0, grid).cast(pl.Int64).alias("i0"),
                         y2.ceil().clip(0, grid).cast(pl.Int64).alias("i1"),
                         ((x2 > x1) & (y2 > y1)).alias("area"))
    return spans.filter(pl.col("area") & (pl.col("j1") > pl.col("j0")) & (pl.col("i1") > pl.col("i0"))).drop("area")


def center_cells(boxes: pl.DataFrame, grid: int) -> np.ndarray:
    """The flat cell index ``i·G + j`` of each box centre inside the image (``center``)."""
    cx = (pl.col("x") + pl.col("w") / 2) * grid / pl.col("width")
    cy = (pl.col("y") + pl.col("h") / 2) * grid / pl.col("height")
    inside = (cx >= 0) & (cx <= grid) & (cy >= 0) & (cy <= grid)
    cells = boxes.filter(inside).select(
        cy.floor().clip(0, grid - 1).cast(pl.Int64) * grid + cx.floor().clip(0, grid - 1).cast(pl.Int64))
    return cells.to_series().to_numpy()


def add_boxes(counts: np.ndarray, boxes: pl.DataFrame, grid: int, kind: str) -> None:
    """Add ``boxes`` to ``counts``: a ``(G + 1)²`` difference array (``occupancy``) or the ``G²`` cells (``center``)."""
    if kind == "center":
        counts += np.bincount(center_cells(boxes, grid), minlength=grid * grid)
        return
    spans = cell_ranges(boxes, grid)
    j0, j1, i0, i1 = (spans.get_column(c).to_numpy() for c in ("j0", "j1", "i0", "i1"))
    side, size = grid + 1, (grid + 1) ** 2
    counts += np.bincount(np.concatenate([i0 * side + j0, i1 * side + j1]), minlength=size)
    counts -= np.bincount(np.concatenate([i0 * side + j1, i1 * side + j0]), minlength=size)


def finished(counts: np.ndarray, grid: int, kind: str) -> np.ndarray:
    """The ``G × G`` counts of :func:`add_boxes`' accumulator."""
    if kind == "center":
        return counts.reshape(grid, grid)
    return counts.reshape(grid + 1, grid + 1).cumsum(axis=0).cumsum(axis=1)[:grid, :grid]


_NO_SIZES = pl.DataFrame(schema={"image_id": pl.Int64, "width": pl.Int64, "height": pl.Int64})


def _with_sizes(layout: StoreLayout, boxes: pl.DataFrame, sizes: pl.DataFrame, what: str) -> pl.DataFrame:
    """``boxes`` with their image's ``width, height``; an image with boxes but without a positive size is refused."""
    sized = boxes.join(sizes, on="image_id", how="left")
    bad = sized.filter(~((pl.col("width") > 0) & (pl.col("height") > 0)).fill_null(False))
    if bad.height:
        raise InputError(f"{layout.root}: image {bad.get_column('image_id')[0]} has {what} but no positive width and "
                         "height (the box density is in normalised image coordinates)")
    return sized


def shard_density(layout: StoreLayout, table: str, grid: int, kind: str, run: str | None = None,
                  score_threshold: float | None = None, on_shard_done=None) -> tuple:
    """``(counts, n_boxes)`` of a run's detections (``table="dt"``, those with ``score >= score_threshold``) or of
    the regular (non-crowd) ground truth (``table="gt"``), read shard by shard."""
    if kind not in KINDS:
        raise InputError(f"box density kind must be one of {KINDS}, got {kind!r}")
    if isinstance(grid, bool) or not isinstance(grid, int) or not 1 <= grid <= MAX_GRID:
        raise InputError(f"box density grid must be a number of cells per side from 1 to {MAX_GRID}, got {grid!r}")
    sizes = layout.read("images", ["image_id", "width", "height", "shard"]).partition_by("shard", as_dict=True,
                                                                                         include_key=False)
    counts = np.zeros(grid * grid if kind == "center" else (grid + 1) ** 2, np.int64)
    n_boxes = 0
    for k in range(layout.n_shards):
        if table == "dt":
            boxes = read_stored(layout.paths.dt_shard(run, k), layout.root, ["image_id", "score", *BOX])
            if score_threshold is not None:
                boxes = boxes.filter(pl.col("score") >= score_threshold)
        else:
            boxes = read_stored(layout.paths.gt_shard(k), layout.root, ["image_id", "iscrowd", *BOX])
            boxes = boxes.filter(~pl.col("iscrowd"))
        what = "detections" if table == "dt" else "ground truth"
        add_boxes(counts, _with_sizes(layout, boxes, sizes.get((k,), _NO_SIZES), what), grid, kind)
        n_boxes += boxes.height
        if on_shard_done is not None:
            on_shard_done(1)
    return finished(counts, grid, kind), n_boxes
