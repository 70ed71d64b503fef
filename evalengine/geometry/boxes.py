"""Box conventions and size bins, in one place.

Boxes are stored as COCO ``x, y, w, h`` in continuous pixel coordinates. Kernels that work on corners get
``x1, y1, x2, y2 = x, y, x + w, y + h`` (the readers bring other conventions to the stored one with
:func:`evalengine.schema.from_pixel_inclusive`). Size bins are Hosang et al.'s (§1.6, the toolbox's):
sqrt(box area / image area) in ten bins of 0.1, the last open.
"""

import numpy as np
import polars as pl

SIZE_BIN_EDGES = tuple(round(0.1 * k, 1) for k in range(1, 10))


def corner_columns() -> list:
    """Polars expressions ``x1, y1, x2, y2`` of a frame with ``x, y, w, h`` columns."""
    x, y, w, h = (pl.col(c) for c in ("x", "y", "w", "h"))
    return [x.alias("x1"), y.alias("y1"), (x + w).alias("x2"), (y + h).alias("y2")]


def corners(frame: pl.DataFrame) -> np.ndarray:
    """An (n, 4) float64 array of ``x1, y1, x2, y2`` of a frame with ``x, y, w, h`` columns."""
    return np.ascontiguousarray(frame.select(corner_columns()).to_numpy().astype(np.float64)).reshape(-1, 4)


def xywh(frame: pl.DataFrame) -> np.ndarray:
    """An (n, 4) float64 array of ``x, y, w, h``."""
    return np.ascontiguousarray(frame.select("x", "y", "w", "h").to_numpy().astype(np.float64)).reshape(-1, 4)


def corner_arrays(x, y, w, h) -> np.ndarray:
    """``x1, y1, x2, y2`` of NumPy box columns, as an (n, 4) array."""
    return np.ascontiguousarray(np.column_stack([x, y, x + w, y + h]))


def size_bins(relative_size: np.ndarray) -> np.ndarray:
    """Bin 0–9 of each sqrt(relative area) (a value on an edge goes to the bin above it)."""
    return np.searchsorted(np.array(SIZE_BIN_EDGES), relative_size, side="right")


def size_bin_expr(relative_size: pl.Expr) -> pl.Expr:
    """:func:`size_bins` as a Polars expression."""
    return relative_size.cut(list(SIZE_BIN_EDGES), left_closed=True).to_physical().cast(pl.Int32)
