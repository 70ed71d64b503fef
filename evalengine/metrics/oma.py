"""Object-proposal measurement ability (Wang et al., "Insights of Object Proposal Evaluation", §3).

HPRS(o, k) is the probability that k boxes drawn without repetition from every box of the image lattice hit
object o (IoU >= τ), Eq. 7: ``1 − C(N_tol − N_hit, k) / C(N_tol, k)``, evaluated in log space as
``−expm1(Σ_{i<k} log1p(−N_hit / (N_tol − i)))``. OMA removes it from recall, Eq. 8:
``OMA = mean_i (|H_i| − Σ_j HPRS(o_j, k_i)) / |O_i|`` over images with objects, hits non-exclusive (best IoU
over the top-k, as ``best_iou`` in the proposal match table), ``k_i`` the proposals evaluated on image i.

N_hit is counted exactly, not with the paper's Algorithm 1 (whose Eq. 5 needs relative offsets in its
y-bounds, see the spec): IoU depends on a candidate only through (width, intersection width) and
(height, intersection height), so per object the x-intervals and y-intervals of the lattice are histogrammed
and the exact rational condition ``(P+Q)·iw·ih >= P·(cw·ch + w·h)`` for ``τ = P/Q`` is summed with prefix
sums. Lattices: ``edges`` — corner coordinates 0..W (continuous boxes, the default); ``wang`` — 1..W as the
paper writes it (``N_tol = C(W,2)·C(H,2)``).
"""

from fractions import Fraction

import numba
import numpy as np
import polars as pl

from evalengine.errors import ProtocolError, check_option
from evalengine.match.protocol import unit_thresholds

LATTICES = ("edges", "wang")


def _ratio(tau: float) -> tuple:
    """τ as an exact fraction P/Q of its shortest decimal form (0.7 → 7/10)."""
    fraction = Fraction(repr(float(tau)))
    if not 0 < fraction <= 1:
        raise ProtocolError(f"IoU threshold must be in (0, 1], got {tau}")
    return fraction.numerator, fraction.denominator


@numba.njit(cache=True, nogil=True)
def _interval_histogram(lo, hi, o1, o2):
    """hist[c, i]: lattice intervals [a, b], lo <= a < b <= hi, of length c meeting [o1, o2] over length i > 0."""
    size = hi - lo
    hist = np.zeros((size + 1, size + 1), np.int64)
    for a in range(lo, hi):
        for b in range(a + 1, hi + 1):
            inter = min(b, o2) - max(a, o1)
            if inter > 0:
                hist[b - a, inter] += 1
    return hist


@numba.njit(cache=True, nogil=True, parallel=True)
def _count_hits(boxes, lo_x, hi_x, lo_y, hi_y, p, q):
    """N_hit of each integer object box (x1, y1, x2, y2) on its image lattice, for τ = p/q."""
    n = boxes.shape[0]
    out = np.zeros(n, np.int64)
    for k in numba.prange(n):
        x1, y1, x2, y2 = boxes[k, 0], boxes[k, 1], boxes[k, 2], boxes[k, 3]
        w, h = x2 - x1, y2 - y1
        if w <= 0 or h <= 0:
            continue
        hx = _interval_histogram(lo_x[k], hi_x[k], x1, x2)
        hy = _interval_histogram(lo_y[k], hi_y[k], y1, y2)
        # suffix sums over the intersection height: sy[ch, t] = Σ_{ih >= t} hy[ch, ih]
        sy = np.zeros((hy.shape[0], hy.shape[1] + 1), np.int64)
        for ch in range(hy.shape[0]):
            for t in range(hy.shape[1] - 1, -1, -1):
                sy[ch, t] = sy[ch, t + 1] + hy[ch, t]
        # necessary conditions of IoU >= τ prune the loops: iw >= τw, iw >= τ·cw, ch >= ih >= τh, ch <= h/τ
        total = 0
        ch_lo, ch_hi = (p * h + q - 1) // q, min((h * q) // p, hy.shape[0] - 1)
        for iw in range((p * w + q - 1) // q, min(w, hx.shape[1] - 1) + 1):
            for cw in range(iw, min((iw * q) // p, hx.shape[0] - 1) + 1):
                count = hx[cw, iw]
                if count == 0:
                    continue
                den = (p + q) * iw
                for ch in range(max(ch_lo, 1), ch_hi + 1):
                    t = (p * (cw * ch + w * h) + den - 1) // den  # least ih with (p+q)·iw·ih >= p·(cw·ch + w·h)
                    if t < hy.shape[1]:
                        total += count * sy[ch, max(t, 1)]
        out[k] = total
    return out


def lattice_bounds(width, height, lattice: str = "edges"):
    """Corner coordinate ranges of every box of a W×H image: 0..W (``edges``) or 1..W (``wang``)."""
    check_option("lattice", lattice, LATTICES)
    width, height = np.asarray(width, np.int64), np.asarray(height, np.int64)
    lo = np.zeros_like(width) if lattice == "edges" else np.ones_like(width)
    return lo, width, np.zeros_like(height) if lattice == "edges" else np.ones_like(height), height


def n_total(width, height, lattice: str = "edges") -> np.ndarray:
    """N_tol, Eq. 4: the number of lattice boxes (C(W,2)·C(H,2) on Wang's lattice, C(W+1,2)·C(H+1,2) on edges)."""
    lo_x, hi_x, lo_y, hi_y = lattice_bounds(width, height, lattice)
    nx, ny = hi_x - lo_x + 1, hi_y - lo_y + 1
    return (nx * (nx - 1) // 2) * (ny * (ny - 1) // 2)


def n_hit(boxes, width, height, tau: float, lattice: str = "edges") -> np.ndarray:
    """N_hit of each object: lattice boxes with IoU >= τ (exact), for integer boxes (x1, y1, x2, y2)."""
    boxes = np.ascontiguousarray(np.asarray(boxes, np.int64).reshape(-1, 4))
    lo_x, hi_x, lo_y, hi_y = lattice_bounds(np.broadcast_to(width, boxes.shape[:1]),
                                            np.broadcast_to(height, boxes.shape[:1]), lattice)
    p, q = _ratio(tau)
    return _count_hits(boxes, lo_x, hi_x, lo_y, hi_y, p, q)


@numba.njit(cache=True, nogil=True, parallel=True)
def _hprs_kernel(total, hits, draws):
    out = np.zeros(total.shape[0])
    for j in numba.prange(total.shape[0]):
        if draws[j] <= 0 or hits[j] <= 0:
            continue
        if draws[j] > total[j] - hits[j]:
            out[j] = 1.0
            continue
        log_miss = 0.0
        for i in range(draws[j]):
            log_miss += np.log1p(-hits[j] / (total[j] - i))
        out[j] = -np.expm1(log_miss)
    return out


def hprs(n_tol, n_hit_, k) -> np.ndarray:
    """Eq. 7 for each (N_tol, N_hit, k): 1 − Π_{i<k} (N_tol − N_hit − i)/(N_tol − i), in log space."""
    arrays = [np.ascontiguousarray(np.asarray(v, np.int64)) for v in np.broadcast_arrays(n_tol, n_hit_, k)]
    shape = arrays[0].shape
    return _hprs_kernel(*(a.reshape(-1) for a in arrays)).reshape(shape)


HIT_COUNT_KEYS = ["width", "height", "x1", "y1", "x2", "y2", "iou_threshold"]


def object_hit_counts(gt: pl.DataFrame, images: pl.DataFrame, iou_thresholds, lattice: str = "edges",
                      known: pl.DataFrame | None = None) -> tuple:
    """``(per_gt, counted)``: ``gt_id, iou_threshold, n_tol, n_hit`` per ground truth (boxes rounded to the
    lattice), and the distinct (image size, box, τ) rows counted now, ``N_hit`` being computed once per key;
    keys found in ``known`` (earlier ``counted`` rows: a cache) are not counted again."""
    table = (gt.join(images.select("image_id", "width", "height"), on="image_id", how="left")
             .select("gt_id", "width", "height",
                     pl.col("x").round(0).cast(pl.Int64).alias("x1"), pl.col("y").round(0).cast(pl.Int64).alias("y1"),
                     (pl.col("x") + pl.col("w")).round(0).cast(pl.Int64).alias("x2"),
                     (pl.col("y") + pl.col("h")).round(0).cast(pl.Int64).alias("y2")))
    if lattice == "wang":  # Wang et al.'s corners 1..W: a continuous edge e is corner e + 1
        table = table.with_columns(pl.col("x1", "y1", "x2", "y2") + 1)
    boxes = table.select(HIT_COUNT_KEYS[:-1]).unique(maintain_order=True)
    wanted = boxes.join(pl.DataFrame({"iou_threshold": unit_thresholds("iou_thresholds", iou_thresholds)}), how="cross")
    known = known if known is not None else pl.DataFrame(schema={**wanted.schema, "n_hit": pl.Int64})
    missing = wanted.join(known, on=HIT_COUNT_KEYS, how="anti")
    parts = []
    for (tau,), group in missing.group_by("iou_threshold", maintain_order=True):
        counts = n_hit(group.select("x1", "y1", "x2", "y2").to_numpy(), group.get_column("width").to_numpy(),
                       group.get_column("height").to_numpy(), tau, lattice)
        parts.append(group.with_columns(n_hit=pl.Series(counts, dtype=pl.Int64)))
    counted = pl.concat(parts) if parts else known.clear()
    hits = pl.concat([known.select(*HIT_COUNT_KEYS, "n_hit"), counted]).join(wanted, on=HIT_COUNT_KEYS, how="semi")
    hits = hits.with_columns(n_tol=pl.Series(n_total(hits.get_column("width").to_numpy(),
                                                     hits.get_column("height").to_numpy(), lattice), dtype=pl.Int64))
    per_gt = table.join(hits, on=HIT_COUNT_KEYS[:-1], how="left").select("gt_id", "iou_threshold", "n_tol", "n_hit")
    return per_gt, counted


def oma(gt_matches: pl.DataFrame, image_counts: pl.DataFrame, hit_counts: pl.DataFrame) -> pl.DataFrame:
    """OMA and (Wang's) recall per (budget, IoU threshold): per-image mean of hit − HPRS, over images with objects.

    ``gt_matches``: the proposal match table (``best_iou`` per ground truth and budget); ``image_counts``: the
    proposals evaluated per image and budget (k_i); ``hit_counts``: :func:`object_hit_counts`."""
    rows = (gt_matches.select("image_id", "gt_id", "budget", "best_iou")
            .join(hit_counts, on="gt_id")
            .join(image_counts, on=["image_id", "budget"], how="left")
            .with_columns(pl.col("n_proposals").fill_null(0)))
    chance = hprs(rows.get_column("n_tol").to_numpy(), rows.get_column("n_hit").to_numpy(),
                  rows.get_column("n_proposals").to_numpy())
    rows = rows.with_columns(hit=(pl.col("best_iou") >= pl.col("iou_threshold")).cast(pl.Float64),
                             hprs=pl.Series(chance))
    per_image = (rows.sort("image_id", "gt_id")
                 .group_by("budget", "iou_threshold", "image_id", maintain_order=True)
                 .agg(pl.col("hit").mean().alias("recall"), (pl.col("hit") - pl.col("hprs")).mean().alias("oma")))
    return (per_image.group_by("budget", "iou_threshold", maintain_order=True)
            .agg(pl.col("recall").mean(), pl.col("oma").mean(), pl.len().alias("n_images"))
            .with_columns(matcher=pl.lit("best"), aggregation=pl.lit("images"))
            .sort("budget", "iou_threshold"))
