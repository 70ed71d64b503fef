"""The LVIS summary (lvis-api ``LVISEval.summarize`` and ``get_results``) and per-category AP, from the COCO
accumulation of an LVIS match table.

lvis-api's ``accumulate`` is pycocotools' (``tp / (tp + fp + eps)``, the right-to-left envelope, ``searchsorted``
left, zeros past the last recall, −1 for a category without regular ground truth) with one cap, 300 per image, which
:class:`~evalengine.match.lvis.LvisProtocol` applies at matching; ``summarize`` is the mean of the defined (> −1)
values of the slice, APr/APc/APf over the categories of a ``frequency`` (r, c, f; −1 for an empty group).
"""

import numpy as np
import polars as pl

from evalengine.metrics.ap import Accumulation
from evalengine.metrics.summary import mean_defined


def lvis_layout(max_dets: int) -> tuple:
    """lvis-api ``summarize()`` as data: the ``get_results`` key, AP (True) or AR, the IoU threshold (None: all), the
    area range label and the frequency group (None: every category)."""
    ap = [("AP", None, "all", None), ("AP50", 0.5, "all", None), ("AP75", 0.75, "all", None),
          *((f"AP{area[0]}", None, area, None) for area in ("small", "medium", "large")),
          *((f"AP{group}", None, "all", group) for group in ("r", "c", "f"))]
    ar = [(f"AR@{max_dets}", None, "all", None),
          *((f"AR{area[0]}@{max_dets}", None, area, None) for area in ("small", "medium", "large"))]
    return tuple((key, True, t, area, group) for key, t, area, group in ap) + tuple(
        (key, False, t, area, group) for key, t, area, group in ar)


def lvis_results(acc: Accumulation, frequency: np.ndarray) -> dict:
    """``LVISEval.get_results()``: ``{key: value}`` in its order, each the ``np.mean`` of the defined values of its
    slice taken in lvis-api's element order (precision [T, R, K], recall [T, K]), so the floats are its own.
    ``acc``: accumulated with the curve; ``frequency``: each category's letter, in ``acc.category_ids`` order."""
    p = acc.protocol
    results = {}
    for key, is_ap, t, area, group in lvis_layout(p.max_dets[0]):
        areas = [i for i, r in enumerate(p.area_ranges) if r[0] == area]
        # [T, R, K, A] (lvis-api's precision) or [T, K, A] (its recall), from ours [K, A, M, T, R] / [K, A, M, T]
        values = (acc.precision[:, areas, 0].transpose(2, 3, 0, 1) if is_ap
                  else acc.recall[:, areas, 0].transpose(2, 0, 1))
        if t is not None:
            values = values[np.where(t == np.array(p.iou_thresholds))[0]]
        if group is not None:
            values = values[..., frequency == group, :]
        results[key] = mean_defined(values)
    return results


def per_class_ap(acc: Accumulation) -> pl.DataFrame:
    """``category_id, ap``: AP@[.50:.95] of each category, area 'all': the mean of lvis-api's ``precision[:, :, k,
    0]``, −1 where the category has no regular ground truth. A category's curves are all defined or all −1 (the
    accumulation fills every threshold of a category with ground truth), so each is one row's mean, in one reduction
    over the categories (a row's sum is the same pairwise sum as ``np.mean`` of that row alone)."""
    curves = acc.precision[:, 0, 0].reshape(len(acc.category_ids), -1)
    return pl.DataFrame({"category_id": acc.category_ids,
                         "ap": np.where(curves[:, 0] > -1, curves.mean(axis=1), -1.0)})
