"""The COCO protocol's parameters, in one frozen dataclass (pycocotools ``Params``, iouType bbox)."""

import hashlib
import json
from dataclasses import dataclass, field

import numpy as np

from evalengine.errors import ProtocolError

# pycocotools builds both arrays with np.linspace: iou_thresholds[8] is 0.8999999999999999 and ten of
# the recall thresholds lie one ulp above k/100. Parity needs these exact floats.
COCO_IOU_THRESHOLDS = tuple(float(t) for t in np.linspace(0.5, 0.95, int(np.round((0.95 - 0.5) / 0.05)) + 1))
COCO_RECALL_THRESHOLDS = tuple(float(r) for r in np.linspace(0.0, 1.00, int(np.round((1.00 - 0.0) / 0.01)) + 1))
COCO_AREA_RANGES = (
    ("all", 0.0, 1e5**2),
    ("small", 0.0, 32.0**2),
    ("medium", 32.0**2, 96.0**2),
    ("large", 96.0**2, 1e5**2),
)
COCO_MAX_DETS = (1, 10, 100)
_BITS = 64  # outcomes per (detection, area range) are stored as one uint64 bit mask over thresholds


@dataclass(frozen=True)
class CocoProtocol:
    """pycocotools' evaluation parameters.

    ``area_ranges`` are ``(label, lo, hi)`` with both bounds inclusive, as in pycocotools.
    ``zero_id_quirk`` reproduces pycocotools counting a match to ground-truth id 0 as unmatched;
    set it to False for the corrected behaviour.
    """

    iou_thresholds: tuple = COCO_IOU_THRESHOLDS
    recall_thresholds: tuple = COCO_RECALL_THRESHOLDS
    area_ranges: tuple = COCO_AREA_RANGES
    max_dets: tuple = COCO_MAX_DETS
    use_cats: bool = True
    zero_id_quirk: bool = True
    name: str = field(default="coco", init=False)

    def __post_init__(self):
        object.__setattr__(self, "iou_thresholds", tuple(float(t) for t in self.iou_thresholds))
        object.__setattr__(self, "recall_thresholds", tuple(float(r) for r in self.recall_thresholds))
        object.__setattr__(self, "area_ranges", tuple((str(l), float(lo), float(hi)) for l, lo, hi in self.area_ranges))
        object.__setattr__(self, "max_dets", tuple(int(m) for m in self.max_dets))
        if not 1 <= len(self.iou_thresholds) <= _BITS:
            raise ProtocolError(f"iou_thresholds: between 1 and {_BITS} thresholds are supported, got {len(self.iou_thresholds)}")
        if not 1 <= len(self.area_ranges) <= _BITS:
            raise ProtocolError(f"area_ranges: between 1 and {_BITS} ranges are supported, got {len(self.area_ranges)}")
        if not self.recall_thresholds:
            raise ProtocolError("recall_thresholds: at least one is needed")
        if not self.max_dets or min(self.max_dets) < 1:
            raise ProtocolError(f"max_dets: positive integers are needed, got {list(self.max_dets)}")

    @property
    def max_det_cap(self) -> int:
        """Detections kept per (image, category): pycocotools matches with ``maxDets[-1]``."""
        return self.max_dets[-1]

    def match_params(self) -> dict:
        """The parameters the matching depends on (recall thresholds and smaller caps are accumulation-only)."""
        return {
            "name": self.name,
            "iou_thresholds": list(self.iou_thresholds),
            "area_ranges": [{"label": label, "lo": lo, "hi": hi} for label, lo, hi in self.area_ranges],
            "max_det_cap": self.max_det_cap,
            "use_cats": self.use_cats,
            "zero_id_quirk": self.zero_id_quirk,
        }

    def description(self) -> dict:
        """What ``protocol.json`` records beside a match table: the matching parameters, and the
        accumulation parameters of the evaluation that made it (the SQL views accumulate with these)."""
        return {
            "match": self.match_params(),
            "accumulation": {"max_dets": list(self.max_dets), "recall_thresholds": list(self.recall_thresholds)},
        }

    def match_key(self) -> str:
        """Partition name of this protocol's match table: ``coco`` for the defaults, else ``coco-<hash>``."""
        params = self.match_params()
        if params == CocoProtocol().match_params():
            return self.name
        digest = hashlib.sha1(json.dumps(params, sort_keys=True).encode()).hexdigest()[:10]
        return f"{self.name}-{digest}"

    def area_index(self, label: str) -> int:
        labels = [r[0] for r in self.area_ranges]
        if label not in labels:
            raise ProtocolError(f"area range '{label}' not in {labels}")
        return labels.index(label)
