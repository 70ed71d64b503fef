"""COCO greedy matching of one image shard (pycocotools ``evaluateImg``), as a numba kernel.

Per (image, category) group — per image when ``use_cats`` is off — the detections are sorted by
score (stable: file order breaks ties; with ``use_cats`` off, category then file order, as
pycocotools concatenates the per-category lists) and cut to ``maxDets[-1]``. For every area range
the ground truths are stably reordered, regular before ignored, and for every IoU threshold each
detection in turn takes the best still-free ground truth with IoU >= threshold, where:

- a later ground truth with equal IoU wins (the running threshold is raised to the best IoU);
- once matched to a regular ground truth, the search stops at the ignored ones;
- a crowd ground truth can absorb any number of detections (its IoU is intersection over detection area);
- a detection matched to an ignored ground truth is ignored, and an unmatched detection whose own
  area is outside the range is ignored, not a false positive.
"""

import numba
import numpy as np
import polars as pl
import pyarrow as pa

from evalengine import schema
from evalengine.geometry.box_iou import coco_box_iou
from evalengine.match.protocol import CocoProtocol

_ONE = np.uint64(1)


@numba.njit(cache=True, nogil=True)
def _coco_match_kernel(
    gt_box, gt_area, gt_crowd, gt_zero_id, dt_box, dt_area,
    grp_gt_start, grp_gt_len, grp_dt_start, grp_dt_len,
    iou_thr, area_lo, area_hi, zero_id_quirk,
):
    n_dt = dt_box.shape[0]
    n_gt = gt_box.shape[0]
    n_thr = iou_thr.shape[0]
    n_area = area_lo.shape[0]
    dt_tp = np.zeros((n_dt, n_area), np.uint64)
    dt_ignored = np.zeros((n_dt, n_area), np.uint64)
    dt_partner = np.full((n_dt, n_thr), -1, np.int64)
    dt_iou = np.zeros((n_dt, n_thr))
    gt_ignored = np.zeros(n_gt, np.uint64)
    gt_matched = np.zeros((n_gt, n_area), np.uint64)
    most_gt = max(grp_gt_len.max(), 1) if grp_gt_len.shape[0] else 1
    most_dt = max(grp_dt_len.max(), 1) if grp_dt_len.shape[0] else 1
    ious = np.empty((most_dt, most_gt))  # scratch buffers, reused by every group
    order = np.empty(most_gt, np.int64)
    ignored = np.empty(most_gt, np.bool_)
    taken = np.empty(most_gt, np.bool_)
    for k in range(grp_gt_start.shape[0]):
        g0 = grp_gt_start[k]
        ng = grp_gt_len[k]
        d0 = grp_dt_start[k]
        nd = grp_dt_len[k]
        if ng == 0:  # nothing to match: only the out-of-range rule applies
            for a in range(n_area):
                for d in range(nd):
                    if dt_area[d0 + d] < area_lo[a] or dt_area[d0 + d] > area_hi[a]:
                        dt_ignored[d0 + d, a] = ~np.uint64(0) >> np.uint64(64 - n_thr)
            continue
        for d in range(nd):
            for g in range(ng):
                ious[d, g] = coco_box_iou(
                    dt_box[d0 + d, 0], dt_box[d0 + d, 1], dt_box[d0 + d, 2], dt_box[d0 + d, 3],
                    gt_box[g0 + g, 0], gt_box[g0 + g, 1], gt_box[g0 + g, 2], gt_box[g0 + g, 3], gt_crowd[g0 + g],
                )
        for a in range(n_area):
            lo = area_lo[a]
            hi = area_hi[a]
            area_bit = _ONE << np.uint64(a)
            n_regular = 0
            for g in range(ng):
                if gt_crowd[g0 + g] or gt_area[g0 + g] < lo or gt_area[g0 + g] > hi:
                    gt_ignored[g0 + g] |= area_bit
                else:
                    order[n_regular] = g
                    n_regular += 1
            i = n_regular
            for g in range(ng):
                if gt_ignored[g0 + g] & area_bit:
                    order[i] = g
                    i += 1
            for i in range(ng):
                ignored[i] = i >= n_regular
            for t in range(n_thr):
                thr_bit = _ONE << np.uint64(t)
                taken[:ng] = False
                for d in range(nd):
                    best = min(iou_thr[t], 1 - 1e-10)
                    m = -1
                    for i in range(ng):
                        g = order[i]
                        if taken[i] and not gt_crowd[g0 + g]:
                            continue
                        if m > -1 and not ignored[m] and ignored[i]:
                            break
                        if ious[d, g] < best:
                            continue
                        best = ious[d, g]
                        m = i
                    outside = dt_area[d0 + d] < lo or dt_area[d0 + d] > hi
                    if m == -1:
                        if outside:
                            dt_ignored[d0 + d, a] |= thr_bit
                        continue
                    taken[m] = True
                    g = order[m]
                    gt_matched[g0 + g, a] |= thr_bit
                    # pycocotools stores the partner's id and tests it for truth: id 0 reads as unmatched
                    counted = not (zero_id_quirk and gt_zero_id[g0 + g])
                    if ignored[m] or (not counted and outside):
                        dt_ignored[d0 + d, a] |= thr_bit
                    elif counted:
                        dt_tp[d0 + d, a] |= thr_bit
                    if a == 0:
                        dt_partner[d0 + d, t] = g0 + g
                        dt_iou[d0 + d, t] = ious[d, g]
    return dt_tp, dt_ignored, dt_partner, dt_iou, gt_ignored, gt_matched


def prepare_gt(gt: pl.DataFrame, category_ids, use_cats: bool = True) -> pl.DataFrame:
    """Ground truths of evaluated categories in pycocotools order within each group (file order; by category, then
    file order, when categories are pooled). Groups run by category, then image, so that the match table comes out
    grouped by category (by image when pooled)."""
    gt = gt.filter(pl.col("category_id").is_in(pl.Series(category_ids).implode()))
    keys = ["category_id", "image_id", "gt_order"] if use_cats else ["image_id", "category_id", "gt_order"]
    return gt.sort(keys)


def prepare_dt(dt: pl.DataFrame, category_ids, protocol: CocoProtocol) -> pl.DataFrame:
    """Detections of evaluated categories, score-sorted per group (ties: file order, as pycocotools' stable sort),
    ranked, cut to ``maxDets[-1]``; groups in :func:`prepare_gt`'s order."""
    dt = dt.filter(pl.col("category_id").is_in(pl.Series(category_ids).implode()))
    score = pl.col("score") + 0.0  # -0.0 ties with 0.0, as in pycocotools' sort
    keys = ([pl.col("category_id"), pl.col("image_id"), score, pl.col("det_id")] if protocol.use_cats
            else [pl.col("image_id"), score, pl.col("category_id"), pl.col("det_id")])
    dt = dt.sort(keys, descending=[key is score for key in keys])
    image = dt.get_column("image_id").to_numpy()
    category = dt.get_column("category_id").to_numpy() if protocol.use_cats else np.zeros_like(image)
    rank = _rank_in_group(image, category)
    keep = rank < protocol.max_det_cap
    return dt.filter(keep).with_columns(pl.Series("dt_rank", rank[keep], dtype=pl.Int32))


@numba.njit(cache=True, nogil=True)
def _rank_in_group(image, category):
    """0-based position of each row within its run of equal (image, category) in sorted arrays."""
    out = np.empty(image.shape[0], np.int64)
    for i in range(image.shape[0]):
        same = i and image[i] == image[i - 1] and category[i] == category[i - 1]
        out[i] = out[i - 1] + 1 if same else 0
    return out


def warm_up() -> None:
    """Initialise numba's runtime (about 0.7 s per process, even with cached kernels) by calling a kernel once.

    The front doors run this on a background thread while they read input, to hide that latency."""
    _rank_in_group(np.zeros(1, np.int64), np.zeros(1, np.int64))


@numba.njit(cache=True, nogil=True)
def merge_groups(gt_key, gt_subkey, dt_key, dt_subkey, use_subkey):
    """(gt_start, gt_len, dt_start, dt_len) of every group present on either side; a group is a run of equal key
    (and subkey, with ``use_subkey``), both sides sorted by (key, subkey)."""
    n_gt, n_dt = gt_key.shape[0], dt_key.shape[0]
    out = np.empty((n_gt + n_dt, 4), np.int64)
    i = j = n = 0
    while i < n_gt or j < n_dt:
        if j == n_dt:
            side = -1
        elif i == n_gt:
            side = 1
        else:
            side = 0
            if gt_key[i] != dt_key[j]:
                side = -1 if gt_key[i] < dt_key[j] else 1
            elif use_subkey and gt_subkey[i] != dt_subkey[j]:
                side = -1 if gt_subkey[i] < dt_subkey[j] else 1
        i0, j0 = i, j
        if side <= 0:
            while i < n_gt and gt_key[i] == gt_key[i0] and (not use_subkey or gt_subkey[i] == gt_subkey[i0]):
                i += 1
        if side >= 0:
            while j < n_dt and dt_key[j] == dt_key[j0] and (not use_subkey or dt_subkey[j] == dt_subkey[j0]):
                j += 1
        out[n, 0], out[n, 1], out[n, 2], out[n, 3] = i0, i - i0, j0, j - j0
        n += 1
    return out[:n]


def _fixed_list(values: np.ndarray, valid=None) -> pa.Array:
    flat = pa.array(values.reshape(-1), mask=None if valid is None else ~valid.reshape(-1))
    return pa.FixedSizeListArray.from_arrays(flat, values.shape[1])


def match_shard(gt: pl.DataFrame, dt: pl.DataFrame, category_ids, protocol: CocoProtocol):
    """Match one shard; return ``(dt_matches, gt_matches)`` frames (schemas in :mod:`evalengine.schema`)."""
    gt = prepare_gt(gt, category_ids, protocol.use_cats)
    dt = prepare_dt(dt, category_ids, protocol)

    def col(frame, name, dtype=np.float64):
        return frame.get_column(name).to_numpy().astype(dtype, copy=False)

    first, second = ("category_id", "image_id") if protocol.use_cats else ("image_id", "category_id")
    groups = merge_groups(col(gt, first, np.int64), col(gt, second, np.int64),
                          col(dt, first, np.int64), col(dt, second, np.int64), protocol.use_cats)

    def boxes(frame):
        return np.ascontiguousarray(frame.select("x", "y", "w", "h").to_numpy().astype(np.float64))

    dt_tp, dt_ignored, dt_partner, dt_iou, gt_ignored, gt_matched = _coco_match_kernel(
        boxes(gt), col(gt, "area"), col(gt, "iscrowd", np.bool_), col(gt, "gt_id", np.int64) == 0,
        boxes(dt), col(dt, "area"),
        groups[:, 0], groups[:, 1], groups[:, 2], groups[:, 3],
        np.array(protocol.iou_thresholds), np.array([r[1] for r in protocol.area_ranges]),
        np.array([r[2] for r in protocol.area_ranges]), protocol.zero_id_quirk,
    )
    has_partner = dt_partner >= 0
    partner_id = col(gt, "gt_id", np.int64)[np.where(has_partner, dt_partner, 0)] if gt.height else dt_partner
    n_area, n_thr = len(protocol.area_ranges), len(protocol.iou_thresholds)
    dt_matches = pl.from_arrow(
        pa.table(
            {
                "image_id": dt.get_column("image_id").to_arrow(),
                "category_id": dt.get_column("category_id").to_arrow(),
                "det_id": dt.get_column("det_id").to_arrow(),
                "score": dt.get_column("score").to_arrow(),
                "dt_rank": dt.get_column("dt_rank").to_arrow(),
                "tp_bits": _fixed_list(dt_tp),
                "ignored_bits": _fixed_list(dt_ignored),
                "matched_gt_id": _fixed_list(partner_id, has_partner),
                "matched_iou": _fixed_list(dt_iou, has_partner),
            }
        )
    ).cast(schema.dt_matches_schema(n_area, n_thr))
    gt_matches = pl.from_arrow(
        pa.table(
            {
                "image_id": gt.get_column("image_id").to_arrow(),
                "category_id": gt.get_column("category_id").to_arrow(),
                "gt_id": gt.get_column("gt_id").to_arrow(),
                "ignored_bits": pa.array(gt_ignored),
                "matched_bits": _fixed_list(gt_matched),
            }
        )
    ).cast(schema.gt_matches_schema(n_area))
    return dt_matches, gt_matches
