"""pycocotools' per-image results (``COCOeval.evalImgs``) built from the match table, and ``accumulate`` over such a
list (as torchvision's ``CocoEvaluator`` runs it, on the lists of several processes merged).

An entry of ``evalImgs`` is pycocotools ``evaluateImg``'s dict for one (category, area range, image), None where
the image has neither a ground truth nor a detection of the category; entries run category by category, then area
range, then image (``k * A * I + a * I + i``). Its arrays come from one match table per area range (the table holds
the partners of its first area range): ``dtMatches`` the partner ground-truth id (0: none), ``dtIgnore`` the ignored
bits, ``gtMatches`` the partner detection id (a crowd region absorbing several: the last, as pycocotools overwrites),
``gtIds`` the ground truths with the ignored ones last (pycocotools' stable ``argsort`` of ``_ignore``)."""

import numpy as np
import polars as pl

from evalengine.metrics.ap import accumulate_ranked, array_values

_BIT_SHIFTS = np.arange(64, dtype=np.uint64)


def _entries(keys: np.ndarray, n_keys: int) -> np.ndarray:
    """Start of each key's rows in ``keys`` (sorted), ``n_keys + 1`` values."""
    return np.searchsorted(keys, np.arange(n_keys + 1))


def _bits(mask: np.ndarray) -> np.ndarray:
    """Rows of a ``(n, T)`` bool array packed as uint64 bit masks (bit ``t`` for column ``t``)."""
    return np.bitwise_or.reduce(mask.astype(np.uint64) << _BIT_SHIFTS[:mask.shape[1]], axis=1) if mask.shape[1] \
        else np.zeros(mask.shape[0], np.uint64)


def eval_images(tables: list, image_ids, category_ids, use_cats: bool, area_ranges: list, max_det: int, n_thr: int,
                det_ids=None) -> list:
    """``evalImgs`` from ``tables``, one ``(dt_matches, gt_matches)`` pair of frames per area range (dt: image_id,
    category_id, det_id, score, dt_rank, ignored_bits, matched_gt_id; gt: image_id, category_id, gt_id, gt_order,
    ignored_bits; the area range's outcomes in bit / column 0), restricted to ``image_ids`` (sorted, unique) and
    ``category_ids`` (``[-1]`` when pooled). ``det_ids`` maps a detection's position to its own id (None: the
    position, as ``loadRes`` numbers results)."""
    image_ids = np.asarray(image_ids, dtype=np.int64)
    cats = np.asarray(category_ids, dtype=np.int64)
    n_img, n_area = image_ids.size, len(area_ranges)
    out = [None] * (cats.size * n_area * n_img)
    for a, (dt, gt) in enumerate(tables):
        dt, dt_key = _keyed(dt, image_ids, cats, use_cats)
        gt, gt_key = _keyed(gt, image_ids, cats, use_cats)
        dt_order = np.lexsort((dt.get_column("dt_rank").to_numpy(), dt_key))
        gt_ignored = (gt.get_column("ignored_bits").to_numpy() & np.uint64(1)) != 0
        gt_order = np.lexsort((gt.get_column("gt_order").to_numpy(), gt.get_column("category_id").to_numpy(),
                               gt_ignored, gt_key))
        dt, dt_key = dt[dt_order], dt_key[dt_order]
        gt_ids, gt_ignored, gt_key = gt.get_column("gt_id").to_numpy()[gt_order], gt_ignored[gt_order], gt_key[gt_order]
        positions = dt.get_column("det_id").to_numpy()
        ids = positions if det_ids is None else det_ids[positions - 1]
        partner = array_values(dt.get_column("matched_gt_id"), n_thr)  # NaN-free: nulls become 0 below
        has_partner = ~np.isnan(partner) if partner.dtype.kind == "f" else np.ones_like(partner, bool)
        partner = np.nan_to_num(partner, nan=0.0).astype(np.int64) if partner.dtype.kind == "f" else partner
        dt_matches = np.where(has_partner, partner, 0).astype(np.float64).T.copy()
        ignored = dt.get_column("ignored_bits").to_numpy()
        dt_ignore = ((ignored[None, :] >> _BIT_SHIFTS[:n_thr, None]) & np.uint64(1)) != 0
        gt_matches = _gt_partners(gt_ids, has_partner, partner, ids, n_thr)
        scores = dt.get_column("score").to_numpy()
        dt_starts, gt_starts = _entries(dt_key, cats.size * n_img), _entries(gt_key, cats.size * n_img)
        present = np.flatnonzero((np.diff(dt_starts) > 0) | (np.diff(gt_starts) > 0))
        gt_flag = gt_ignored.astype(np.int64)
        area = list(area_ranges[a])
        for key in present.tolist():
            k, i = divmod(key, n_img)
            d0, d1, g0, g1 = dt_starts[key], dt_starts[key + 1], gt_starts[key], gt_starts[key + 1]
            out[k * n_area * n_img + a * n_img + i] = {
                "image_id": int(image_ids[i]), "category_id": int(cats[k]), "aRng": area, "maxDet": max_det,
                "dtIds": ids[d0:d1].tolist(), "gtIds": gt_ids[g0:g1].tolist(),
                "dtMatches": dt_matches[:, d0:d1], "gtMatches": gt_matches[:, g0:g1],
                "dtScores": scores[d0:d1].tolist(),
                "gtIgnore": gt_flag[g0:g1] if g1 > g0 else np.array([]),
                "dtIgnore": dt_ignore[:, d0:d1],
            }
    return out


def _keyed(frame: pl.DataFrame, image_ids: np.ndarray, cats: np.ndarray, use_cats: bool) -> tuple:
    """The rows of the evaluated images and categories, and each one's entry ``k * I + i``."""
    image = frame.get_column("image_id").to_numpy()
    i = np.searchsorted(image_ids, image).clip(0, max(image_ids.size - 1, 0))
    keep = image_ids[i] == image if image_ids.size else np.zeros(image.size, bool)
    k = np.zeros(image.size, np.int64)
    if use_cats:
        cat = frame.get_column("category_id").to_numpy()
        k = np.searchsorted(cats, cat).clip(0, max(cats.size - 1, 0))
        keep &= cats[k] == cat
    keep_rows = np.flatnonzero(keep)
    return frame[keep_rows], (k * image_ids.size + i)[keep_rows]


def _gt_partners(gt_ids: np.ndarray, has_partner: np.ndarray, partner: np.ndarray, det_ids: np.ndarray,
                 n_thr: int) -> np.ndarray:
    """``gtMatches`` of every ground truth row (``(T, G)``): the id of the last detection (in rank order) matched to
    it at each threshold, 0 for none. Ground-truth ids are unique in a store."""
    out = np.zeros((n_thr, gt_ids.size))
    by_id = np.argsort(gt_ids, kind="stable")
    for t in range(n_thr):
        rows = np.flatnonzero(has_partner[:, t])
        if not rows.size:
            continue
        gt_row = by_id[np.searchsorted(gt_ids[by_id], partner[rows, t])]
        last = rows.size - 1 - np.unique(gt_row[::-1], return_index=True)[1]
        out[t, gt_row[last]] = det_ids[rows[last]]
    return out


def accumulate_eval_images(eval_imgs: list, p, pe) -> dict:
    """pycocotools ``accumulate`` over ``eval_imgs`` made under the parameters ``pe`` (``_paramsEval``), for the
    parameters ``p``: ``{"precision", "recall", "scores"}`` as ``[T, R, K, A, M]`` (recall ``[T, K, A, M]``). The
    categories, area ranges, caps and images of ``p`` found in ``pe`` are accumulated (pycocotools' ``k_list``,
    ``a_list``, ``m_list``, ``i_list``); the rest stay −1."""
    cat_ids = p.catIds if p.useCats else [-1]
    n_thr, n_rec = len(p.iouThrs), len(p.recThrs)
    shape = (n_thr, n_rec, len(cat_ids) if p.useCats else 1, len(p.areaRng), len(p.maxDets))
    precision, scores, recall = -np.ones(shape), -np.ones(shape), -np.ones((n_thr, *shape[2:]))
    evaluated = set(pe.catIds if pe.useCats else [-1])
    k_list = [n for n, k in enumerate(cat_ids) if k in evaluated]
    m_list = [m for m in p.maxDets if m in set(pe.maxDets)]
    areas = set(map(tuple, pe.areaRng))
    a_list = [n for n, a in enumerate(map(tuple, p.areaRng)) if a in areas]
    images = set(pe.imgIds)
    i_list = [n for n, i in enumerate(p.imgIds) if i in images]
    n_img0, n_area0 = len(pe.imgIds), len(pe.areaRng)
    groups, parts = len(k_list) * len(a_list), []
    n_regular = np.zeros((max(groups, 1), 1), np.int64)
    for kk, k0 in enumerate(k_list):
        for aa, a0 in enumerate(a_list):
            group = kk * len(a_list) + aa
            for place, i in enumerate(i_list):
                e = eval_imgs[k0 * n_area0 * n_img0 + a0 * n_img0 + i]
                if e is None:
                    continue
                n_regular[group, 0] += np.count_nonzero(np.asarray(e["gtIgnore"]) == 0)
                parts.append((group, place, e))
    if not groups or not m_list:
        return {"precision": precision, "recall": recall, "scores": scores}
    sizes = np.array([len(e["dtScores"]) for _, _, e in parts], dtype=np.int64)
    group = np.repeat(np.array([g for g, _, _ in parts], dtype=np.int64), sizes)
    place = np.repeat(np.array([pl_ for _, pl_, _ in parts], dtype=np.int64), sizes)
    rank = np.concatenate([np.arange(n) for n in sizes]) if parts else np.zeros(0, np.int64)
    score = np.concatenate([np.asarray(e["dtScores"], dtype=np.float64) for _, _, e in parts]) if parts else rank * 0.0
    matched = np.concatenate([np.asarray(e["dtMatches"]).reshape(n_thr, -1) != 0 for _, _, e in parts], axis=1) \
        if parts else np.zeros((n_thr, 0), bool)
    ignored = np.concatenate([np.asarray(e["dtIgnore"]).reshape(n_thr, -1).astype(bool) for _, _, e in parts],
                             axis=1) if parts else np.zeros((n_thr, 0), bool)
    tp_bits = _bits((matched & ~ignored).T)[:, None]
    ignored_bits = _bits(ignored.T)[:, None]
    _, rec, prec, score_at = accumulate_ranked(group, groups, score, place, rank, tp_bits, ignored_bits, n_regular,
                                               m_list, n_thr, p.recThrs, True)
    for kk, k0 in enumerate(k_list):
        for aa, a0 in enumerate(a_list):
            g = kk * len(a_list) + aa
            cells = (slice(None), slice(None), k0, a0, slice(0, len(m_list)))
            precision[cells] = np.transpose(prec[g, 0], (1, 2, 0))
            scores[cells] = np.transpose(score_at[g, 0], (1, 2, 0))
            recall[:, k0, a0, :len(m_list)] = rec[g, 0].T
    return {"precision": precision, "recall": recall, "scores": scores}
