"""The COCO 12-number summary (10 for keypoints) and per-class table (pycocotools ``summarize``), from an
accumulation.

``summarize`` quirks kept for parity: AP (stats[0]) always looks for ``maxDets == 100``; the other
entries use ``max_dets[0..2]``; thresholds are found by exact float comparison (0.5, 0.75) and area
ranges by label ('all', 'small', 'medium', 'large'); a slice with nothing defined is −1. For keypoints
(``_summarizeKps``) every entry looks for ``maxDets == 20``.
"""

import numpy as np
import polars as pl

from evalengine.errors import ProtocolError
from evalengine.metrics.ap import Accumulation

# pycocotools summarize() (bbox) as data, shared with the SQL view ``coco_summary``: the metric, AP (True) or AR,
# the IoU threshold (None: the mean over all of them), the area range label, and the detection cap — "ap100" is
# always 100 (the AP quirk), "md1".."md3" are max_dets[0..2]
SUMMARY_LAYOUT = (
    ("AP", True, None, "all", "ap100"),
    ("AP50", True, 0.5, "all", "md3"),
    ("AP75", True, 0.75, "all", "md3"),
    ("APs", True, None, "small", "md3"),
    ("APm", True, None, "medium", "md3"),
    ("APl", True, None, "large", "md3"),
    ("AR1", False, None, "all", "md1"),
    ("AR10", False, None, "all", "md2"),
    ("AR100", False, None, "all", "md3"),
    ("ARs", False, None, "small", "md3"),
    ("ARm", False, None, "medium", "md3"),
    ("ARl", False, None, "large", "md3"),
)
STAT_NAMES = tuple(row[0] for row in SUMMARY_LAYOUT)
# pycocotools _summarizeKps(): its 10 numbers, all at maxDets=20 (a cap given as a number is that number)
KEYPOINT_LAYOUT = tuple((f"{kind}{suffix}", kind == "AP", t, area, 20) for kind in ("AP", "AR")
                        for suffix, t, area in (("", None, "all"), ("50", 0.5, "all"), ("75", 0.75, "all"),
                                                ("m", None, "medium"), ("l", None, "large")))


def summary_layout(protocol) -> tuple:
    """The summary rows of ``protocol``'s iou type: :data:`KEYPOINT_LAYOUT` or :data:`SUMMARY_LAYOUT`."""
    return KEYPOINT_LAYOUT if protocol.iou_type == "keypoints" else SUMMARY_LAYOUT


def stat_names(protocol) -> list:
    return [row[0] for row in summary_layout(protocol)]


def summary_cap(cap, max_dets) -> int:
    """The detection cap a layout row reads."""
    if isinstance(cap, int):
        return cap
    return 100 if cap == "ap100" else max_dets[int(cap[2:]) - 1]


def mean_defined(values: np.ndarray) -> float:
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


def summary_stats(acc: Accumulation, layout: tuple | None = None) -> list:
    """The numbers of pycocotools ``COCOeval.stats`` (12; keypoints: 10), in its order; or of another ``layout``'s
    rows (:func:`printed_layout`)."""
    md = acc.protocol.max_dets
    layout = layout or summary_layout(acc.protocol)
    needed = max((int(cap[2:]) for *_, cap in layout if isinstance(cap, str) and cap.startswith("md")), default=0)
    if len(md) < needed:
        raise ProtocolError(f"the COCO summary needs {needed} max_dets values, got {list(md)}")
    return [mean_defined(_slice(acc, acc.ap if is_ap else acc.recall, t, area, summary_cap(cap, md)))
            for _, is_ap, t, area, cap in layout]


def printed_layout(protocol) -> tuple:
    """The rows a summary prints for ``protocol``'s own area ranges: pycocotools' layout without the rows of area
    labels the protocol does not have (they would be −1), and an AP and an AR row (the size rows' cap) for each label
    beyond the layout's, in the protocol's order. The default ranges give pycocotools' layout itself."""
    layout = summary_layout(protocol)
    labels = [label for label, _, _ in protocol.area_ranges]
    known = {row[3] for row in layout}
    extra = [label for label in labels if label not in known]
    if not extra and all(row[3] in labels for row in layout):
        return layout
    size_cap = layout[-1][4]
    kept = [row for row in layout if row[3] in labels]
    ap = [row for row in kept if row[1]] + [(f"AP[{label}]", True, None, label, size_cap) for label in extra]
    ar = [row for row in kept if not row[1]] + [(f"AR[{label}]", False, None, label, size_cap) for label in extra]
    return tuple(ap + ar)


def summary_frame(acc: Accumulation) -> pl.DataFrame:
    """The summary as rows ``(metric, value)``."""
    return pl.DataFrame({"metric": stat_names(acc.protocol), "value": summary_stats(acc)})


def per_class_frame(acc: Accumulation) -> pl.DataFrame:
    """Per category, area range 'all' (the first) and the last max_dets: AP, AP50 and AR (−1 where undefined)."""
    p = acc.protocol
    ap = acc.ap[:, 0, -1, :]
    recall = acc.recall[:, 0, -1, :]
    at50 = np.where(0.5 == np.array(p.iou_thresholds))[0]
    return pl.DataFrame(
        {
            "category_id": acc.category_ids,
            "ap": [mean_defined(row) for row in ap],
            "ap50": [mean_defined(row[at50]) for row in ap],
            "ar": [mean_defined(row) for row in recall],
        }
    )
