"""The error-diagnosis front door: TIDE (Bolya et al.) of a stored run or of COCO files
(:mod:`evalengine.evaluation.errors`), and the ``pairs`` table the cross-class diagnoses read."""

import threading

import polars as pl

from evalengine.api import DEFAULT_RUN, Store, on_store_or_files
from evalengine.evaluation.errors import (TIDE_IOU_TYPES, TIDE_MODES, TideEvaluation, TideProtocol, diagnose_tide,
                                          tide_summary)
from evalengine.match.groups import warm_up
from evalengine.match.pairs import PairsProtocol
from evalengine.store.shards import scan_shards

__all__ = ["TIDE_IOU_TYPES", "TIDE_MODES", "TideEvaluation", "TideProtocol", "pairs", "tide", "tide_summary"]


def pairs(store: Store, run: str = DEFAULT_RUN, min_iou: float = 0.1, iou_type: str = "bbox",
          **schedule) -> pl.LazyFrame:
    """The ``pairs`` table of a stored run (:mod:`evalengine.match.pairs`; matched once and kept, SQL view ``pairs``):
    every (detection, ground truth) pair of any classes with IoU >= ``min_iou`` (of boxes, or of masks: ``segm``),
    as a lazy frame."""
    return scan_shards(store.match(PairsProtocol(min_iou=min_iou, iou_type=iou_type), run, **schedule) / "pairs")


def tide(store, run: str = DEFAULT_RUN, mode: str = "tide", protocol: TideProtocol | None = None,
         n_shards: int | None = None, iou_type: str | None = None, **schedule) -> TideEvaluation:
    """TIDE's diagnosis of a stored run (a :class:`~evalengine.api.Store`), or of ``(gt_json, dt_path)`` through a
    temporary store that lives as long as the diagnosis. ``.result`` holds AP50, ΔAP per error and the counts;
    ``mode``: ``tide`` (tidecv's matching, AP and averaging) or ``coco`` (pycocotools'); ``iou_type``: ``bbox`` or
    ``segm`` (tidecv's ``TIDE.MASK``; default: the protocol's, ``bbox``). The pairs and TIDE tables
    are matched once and kept in the store; ``schedule``: ``scheduler``, ``address``, ``workers``."""
    threading.Thread(target=warm_up, daemon=True).start()  # numba's runtime starts while the input is read
    return on_store_or_files(store, n_shards, lambda layout: diagnose_tide(layout, run, protocol, mode, iou_type,
                                                                                   **schedule))
