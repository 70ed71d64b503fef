"""Image-independent proposal baselines (Hosang et al. §2.4), as generators of proposal batches.

- ``uniform``: box centre, sqrt of relative area and log aspect ratio drawn uniformly within ranges fitted on
  ground truth after trimming 0.5 % at each end;
- ``gaussian``: the same four features from a multivariate normal fitted on ground truth, with rejection of
  draws outside the image and a 5-pixel floor on width and height;
- ``sliding-window``: Bing's 28 window sizes on regular grids, the budget split across sizes.

Features and box construction follow the toolbox (``collect_statistics.m``, ``sample_uniform.m``,
``sample_gaussian.m``, ``sample_bing_windows.m``) in its 1-based inclusive pixel boxes; generated boxes are
returned continuous (``x = x1 − 1, w = x2 − x1 + 1``). Each image draws from its own generator seeded by
``(seed, image_id)``, so a run does not depend on batching or sharding. Output rows follow
:data:`evalengine.schema.PROPOSALS_RAW` without scores (rank them with ordering ``given``).
"""

from typing import Iterator

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.schema import from_pixel_inclusive
from evalengine.errors import InputError, check_option

KINDS = ("uniform", "gaussian", "sliding-window")
_TRIM = 0.005
# Bing's window sizes (w, h) as the toolbox lists them
BING_SIZES = ((512, 512), (256, 512), (128, 512), (64, 512), (512, 256), (256, 256), (128, 256), (64, 256),
              (32, 256), (512, 128), (256, 128), (128, 128), (64, 128), (32, 128), (16, 128), (512, 64), (256, 64),
              (128, 64), (64, 64), (32, 64), (16, 64), (128, 32), (64, 32), (32, 32), (16, 32), (64, 16), (32, 16),
              (16, 16))
_DENSER_FROM = 5  # the leftover budget densifies sizes from 256×256 on


def _features(gt: pl.DataFrame, images: pl.DataFrame) -> np.ndarray:
    """Per ground truth: aspect ratio, relative area, relative centre x and y (toolbox pixel boxes)."""
    table = gt.join(images.select("image_id", "width", "height"), on="image_id", how="left")
    if table.get_column("width").null_count() or table.get_column("height").null_count():
        raise InputError("fitting a baseline needs the width and height of every ground-truth image")
    x1 = table.get_column("x").to_numpy() + 1.0
    y1 = table.get_column("y").to_numpy() + 1.0
    w, h = table.get_column("w").to_numpy(), table.get_column("h").to_numpy()
    width, height = table.get_column("width").to_numpy(), table.get_column("height").to_numpy()
    x2, y2 = x1 + w - 1.0, y1 + h - 1.0
    return np.column_stack([w / h, w * h / (width * height), (x1 + x2) / 2 / width, (y1 + y2) / 2 / height])


def fit_uniform(gt: pl.DataFrame, images: pl.DataFrame) -> dict:
    """Ranges of the four features after trimming 0.5 % at each end (1-based ``round(0.005 n)``-th values)."""
    features = np.sort(_features(gt, images), axis=0)
    n = features.shape[0]
    lo, hi = max(int(np.floor(_TRIM * n + 0.5)), 1) - 1, max(int(np.floor((1 - _TRIM) * n + 0.5)), 1) - 1
    names = ("aspect_ratio", "relative_scale", "relative_x", "relative_y")
    return {name: {"min": float(features[lo, i]), "max": float(features[hi, i])} for i, name in enumerate(names)}


def fit_gaussian(gt: pl.DataFrame, images: pl.DataFrame) -> dict:
    """Mean and sample covariance of (log2 aspect ratio, sqrt relative area, relative x, relative y)."""
    ar, scale, rx, ry = _features(gt, images).T
    data = np.column_stack([np.log2(ar), np.sqrt(scale), rx, ry])
    return {"mean": data.mean(axis=0).tolist(), "covar": np.cov(data, rowvar=False, ddof=1).tolist()}


def fitted_params(kind: str, gt: pl.DataFrame, images: pl.DataFrame) -> dict | None:
    """The parameters ``kind`` is generated from, fitted on ``gt`` (None for sliding windows, which need none)."""
    fit = {"uniform": fit_uniform, "gaussian": fit_gaussian}.get(kind)
    return fit(gt, images) if fit else None


def _matlab_round(values: np.ndarray) -> np.ndarray:
    return np.sign(values) * np.floor(np.abs(values) + 0.5)


def _boxes(rel_x, rel_y, rel_scale, aspect, width, height, min_side=0.0):
    area = rel_scale * width * height
    h = np.maximum(np.sqrt(area / aspect), min_side)
    w = np.maximum(area / np.sqrt(area / aspect), min_side)
    x1 = _matlab_round(rel_x * width - w / 2)
    y1 = _matlab_round(rel_y * height - h / 2)
    return x1, y1, _matlab_round(x1 + w - 1), _matlab_round(y1 + h - 1)


def _uniform(rng, n, width, height, params):
    def draw(name, transform=lambda v: v, inverse=lambda v: v):
        lo, hi = transform(params[name]["min"]), transform(params[name]["max"])
        return inverse(rng.uniform(lo, hi, n))

    rel_x, rel_y = draw("relative_x"), draw("relative_y")
    rel_scale = draw("relative_scale", np.sqrt, np.square)
    aspect = draw("aspect_ratio", np.log2, np.exp2)
    x1, y1, x2, y2 = _boxes(rel_x, rel_y, rel_scale, aspect, width, height)
    return from_pixel_inclusive(np.clip(x1, 1, width), np.clip(y1, 1, height), np.clip(x2, 1, width),
                                np.clip(y2, 1, height))


def _gaussian(rng, n, width, height, params):
    mean, covar = np.asarray(params["mean"]), np.asarray(params["covar"])
    samples = np.empty((0, 4))
    while samples.shape[0] < n:  # rejection: a draw outside the image is drawn again
        draw = rng.multivariate_normal(mean, covar, size=max(n - samples.shape[0], 16) * 2)
        ok = (draw[:, 1] > 0) & (draw[:, 1] <= 1) & (draw[:, 2] >= 0) & (draw[:, 2] <= 1) & \
             (draw[:, 3] >= 0) & (draw[:, 3] <= 1)
        samples = np.vstack([samples, draw[ok]])
    log_ar, sqrt_scale, rel_x, rel_y = samples[:n].T
    x1, y1, x2, y2 = _boxes(rel_x, rel_y, sqrt_scale ** 2, np.exp2(log_ar), width, height, min_side=5.0)
    shift_x, shift_y = np.maximum(1 - x1, 0), np.maximum(1 - y1, 0)  # truncation by shifting into the image
    return from_pixel_inclusive(x1 + shift_x, y1 + shift_y, np.minimum(x2 + shift_x, width), np.minimum(y2 + shift_y, height))


def _grid(extent: int, stride: float) -> np.ndarray:
    """A centred grid ``(1 + mod(extent − 1, stride)/2) : stride : extent``."""
    if extent < 1:
        return np.zeros(0)
    start = 1 + np.mod(extent - 1, stride) / 2
    return np.arange(start, extent + 1e-9, stride)


def _sliding_window(rng, n, width, height, params):
    """Windows [x, y, x + w, y + h] (returned as x, y, w, h); the whole image stands in for the sizes that do
    not fit."""
    sizes = [(w, h) for w, h in BING_SIZES if w < width and h < height]
    boxes = [] if len(sizes) == len(BING_SIZES) else [(np.array([0.0]), np.array([0.0]),
                                                       np.array([float(width)]), np.array([float(height)]))]
    per_size = n // max(len(sizes), 1)
    layouts, used = [], len(boxes)
    for w, h in sizes:
        ex, ey = width - w, height - h
        stride = max(np.sqrt(ex * ey / max(per_size, 1)), 1.0)
        while _grid(ex, stride).size * _grid(ey, stride).size > per_size:
            stride += 1
        layouts.append([w, h, stride])
        used += _grid(ex, stride).size * _grid(ey, stride).size
    for layout in layouts[_DENSER_FROM:]:  # spend the leftover budget on denser grids, in order, while it fits
        w, h, stride = layout
        ex, ey = width - w, height - h
        extra = _grid(ex, 0.75 * stride).size * _grid(ey, 0.75 * stride).size - _grid(ex, stride).size * _grid(ey, stride).size
        if used + extra > n:
            break
        layout[2], used = 0.75 * stride, used + extra
    for w, h, stride in layouts:
        xs, ys = np.meshgrid(_grid(width - w, stride), _grid(height - h, stride))
        xs, ys = xs.reshape(-1), ys.reshape(-1)
        boxes.append((xs, ys, np.full(xs.shape, float(w)), np.full(ys.shape, float(h))))
    return tuple(np.concatenate([b[i] for b in boxes])[:n] for i in range(4))


_GENERATORS = {"uniform": _uniform, "gaussian": _gaussian, "sliding-window": _sliding_window}


def generate(kind: str, images: pl.DataFrame, per_image: int, params: dict | None = None, seed: int = 0,
             images_per_batch: int = 500) -> Iterator[pl.DataFrame]:
    """Proposal batches of ``kind`` for every image (``per_image`` boxes each, at most for sliding windows)."""
    check_option("baseline kind", kind, KINDS, InputError)
    if kind != "sliding-window" and params is None:
        raise InputError(f"the {kind} baseline needs fitted parameters (fit_{kind} or the toolbox's values)")
    if per_image < 1:
        raise InputError(f"per_image must be at least 1, got {per_image}")
    rows = images.select("image_id", "width", "height").sort("image_id")
    if rows.get_column("width").null_count() or rows.get_column("height").null_count():
        raise InputError("baselines need the width and height of every image")
    offset = 0
    for batch in rows.iter_slices(images_per_batch):
        parts = []
        for image_id, width, height in batch.iter_rows():
            rng = np.random.default_rng([seed, image_id])
            x, y, w, h = _GENERATORS[kind](rng, per_image, width, height, params)
            parts.append(pl.DataFrame({"image_id": np.full(x.shape[0], image_id, np.int64), "x": x, "y": y,
                                       "w": w, "h": h}))
        frame = pl.concat(parts)
        yield (frame.with_row_index("proposal_id", offset=offset + 1)
               .with_columns(pl.lit(None, pl.Float64).alias("score"), pl.lit(None, pl.Int64).alias("category_id"))
               .select(list(schema.PROPOSALS_RAW)).cast(schema.PROPOSALS_RAW))
        offset += frame.height
