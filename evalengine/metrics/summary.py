"""The COCO 12-number summary and per-class table (pycocotools ``summarize``), from an accumulation.

``summarize`` quirks kept for parity: AP (stats[0]) always looks for ``maxDets == 100``; the other
entries use ``max_dets[0..2]``; thresholds are found by exact float comparison (0.5, 0.75) and area
ranges by label ('all', 'small', 'medium', 'large'); a slice with nothing defined is −1.
"""

import numpy as np
import polars as pl

from evalengine.errors import ProtocolError
from evalengine.metrics.ap import Accumulation

STAT_NAMES = ("AP", "AP50", "AP75", "APs", "APm", "APl", "AR1", "AR10", "AR100", "ARs", "ARm", "ARl")


def _mean_defined(values: np.ndarray) -> float:
    defined = values[values > -1]
    return float(np.mean(defined)) if defined.size else -1.0


def _slice(acc: Accumulation, values: np.ndarray, iou_threshold, area_label: str, max_dets: int) -> np.ndarray:
    p = acc.protocol
    areas = [i for i, r in enumerate(p.area_ranges) if r[0] == area_label]
    caps = [i for i, m in enumerate(p.max_dets) if m == max_dets]
    thresholds = range(len(p.iou_thresholds)) if iou_threshold is None else np.where(
        iou_threshold == np.array(p.iou_thresholds)
    )[0]
    return values[:, areas][:, :, caps][:, :, :, list(thresholds)]


def summary_stats(acc: Accumulation) -> list:
    """The 12 numbers of pycocotools ``COCOeval.stats`` (bbox), in its order."""
    md = acc.protocol.max_dets
    if len(md) < 3:
        raise ProtocolError(f"the COCO summary needs 3 max_dets values, got {list(md)}")
    layout = [
        (acc.ap, None, "all", 100),
        (acc.ap, 0.5, "all", md[2]),
        (acc.ap, 0.75, "all", md[2]),
        (acc.ap, None, "small", md[2]),
        (acc.ap, None, "medium", md[2]),
        (acc.ap, None, "large", md[2]),
        (acc.recall, None, "all", md[0]),
        (acc.recall, None, "all", md[1]),
        (acc.recall, None, "all", md[2]),
        (acc.recall, None, "small", md[2]),
        (acc.recall, None, "medium", md[2]),
        (acc.recall, None, "large", md[2]),
    ]
    return [_mean_defined(_slice(acc, values, t, area, cap)) for values, t, area, cap in layout]


def summary_frame(acc: Accumulation) -> pl.DataFrame:
    """The 12 numbers as rows ``(metric, value)``."""
    return pl.DataFrame({"metric": list(STAT_NAMES), "value": summary_stats(acc)})


def format_summary(acc: Accumulation) -> str:
    """The summary exactly as pycocotools prints it."""
    p = acc.protocol
    md = p.max_dets
    t_lo, t_hi = p.iou_thresholds[0], p.iou_thresholds[-1]
    rows = [
        (1, None, "all", 100), (1, 0.5, "all", md[2]), (1, 0.75, "all", md[2]),
        (1, None, "small", md[2]), (1, None, "medium", md[2]), (1, None, "large", md[2]),
        (0, None, "all", md[0]), (0, None, "all", md[1]), (0, None, "all", md[2]),
        (0, None, "small", md[2]), (0, None, "medium", md[2]), (0, None, "large", md[2]),
    ]
    lines = []
    for (is_ap, t, area, cap), value in zip(rows, summary_stats(acc)):
        title = "Average Precision" if is_ap else "Average Recall"
        short = "(AP)" if is_ap else "(AR)"
        iou = f"{t_lo:0.2f}:{t_hi:0.2f}" if t is None else f"{t:0.2f}"
        lines.append(f" {title:<18} {short} @[ IoU={iou:<9} | area={area:>6s} | maxDets={cap:>3d} ] = {value:0.3f}")
    return "\n".join(lines)


def per_class_frame(acc: Accumulation) -> pl.DataFrame:
    """Per category, area range 'all' (the first) and the last max_dets: AP, AP50 and AR (−1 where undefined)."""
    p = acc.protocol
    ap = acc.ap[:, 0, -1, :]
    recall = acc.recall[:, 0, -1, :]
    at50 = np.where(0.5 == np.array(p.iou_thresholds))[0]
    return pl.DataFrame(
        {
            "category_id": acc.category_ids,
            "ap": [_mean_defined(row) for row in ap],
            "ap50": [_mean_defined(row[at50]) for row in ap],
            "ar": [_mean_defined(row) for row in recall],
        }
    )
