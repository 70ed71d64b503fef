"""The error-diagnosis front door: TIDE (Bolya et al.) of a stored run or of COCO files
(:mod:`evalengine.evaluation.errors`)."""

import threading

from evalengine.api import DEFAULT_RUN, _TemporaryFolder, ingest_coco
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
    folder = _TemporaryFolder() if isinstance(store, tuple) else None
    opened = store if folder is None else ingest_coco(*store, folder.path / "store", n_shards=n_shards)
    diagnosis = diagnose_tide(opened.layout, run, protocol, mode, **schedule)
    if folder is not None:
        diagnosis.keep_alive.append(folder)
    return diagnosis
