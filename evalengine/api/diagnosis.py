"""The error-diagnosis front door: TIDE (Bolya et al.) of a stored run or of COCO files
(:mod:`evalengine.evaluation.errors`)."""

import threading

from evalengine.api import DEFAULT_RUN, on_store_or_files
from evalengine.evaluation.errors import TIDE_MODES, TideEvaluation, TideProtocol, diagnose_tide, tide_summary
from evalengine.match.groups import warm_up

__all__ = ["TIDE_MODES", "TideEvaluation", "TideProtocol", "tide", "tide_summary"]


def tide(store, run: str = DEFAULT_RUN, mode: str = "tide", protocol: TideProtocol | None = None,
         n_shards: int | None = None, **schedule) -> TideEvaluation:
    """TIDE's diagnosis of a stored run (a :class:`~evalengine.api.Store`), or of ``(gt_json, dt_path)`` through a
    temporary store that lives as long as the diagnosis. ``.result`` holds AP50, ΔAP per error and the counts;
    ``mode``: ``tide`` (tidecv's matching, AP and averaging) or ``coco`` (pycocotools'). The pairs and TIDE tables
    are matched once and kept in the store; ``schedule``: ``scheduler``, ``address``, ``workers``."""
    threading.Thread(target=warm_up, daemon=True).start()  # numba's runtime starts while the input is read
    return on_store_or_files(store, n_shards, lambda layout: diagnose_tide(layout, run, protocol, mode, **schedule))
