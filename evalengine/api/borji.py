"""The front door of Borji & Iranmanesh's error diagnosis (the cumulative fix-one-error-type AP table and the
per-size error breakdown, :mod:`evalengine.evaluation.borji`) of a stored run or of COCO files."""

from dataclasses import replace

from evalengine.api import DEFAULT_RUN, on_store_or_files
from evalengine.evaluation.borji import BorjiEvaluation, borji_summary, diagnose_borji
from evalengine.match.borji import DUPLICATES as BORJI_DUPLICATES
from evalengine.match.borji import IOU_TYPES as BORJI_IOU_TYPES
from evalengine.match.borji import STAGES as BORJI_STAGES
from evalengine.match.borji import VARIANTS as BORJI_VARIANTS
from evalengine.match.borji import BorjiProtocol

__all__ = ["BORJI_DUPLICATES", "BORJI_IOU_TYPES", "BORJI_STAGES", "BORJI_VARIANTS", "BorjiEvaluation", "BorjiProtocol", "borji",
           "borji_summary"]


def borji(store, run: str = DEFAULT_RUN, variant: str | None = None, duplicates: str | None = None,
          protocol: BorjiProtocol | None = None, n_shards: int | None = None, iou_type: str | None = None,
          **schedule) -> BorjiEvaluation:
    """The diagnosis of a stored run (a :class:`~evalengine.api.Store`), or of ``(gt_json, dt_path)`` through a
    temporary store that lives as long as the diagnosis. ``variant`` (``borji_ref``: the authors' notebook, default;
    ``paper``), ``duplicates`` (``coco``, default; ``gt_major``: the notebook's cell) and ``iou_type`` (``bbox``,
    default; ``segm``: masks; ``boundary``: boundary IoU; that of its COCO protocol) override ``protocol``'s.
    ``.table()`` is Table 3 (AP and AP50 per stage), ``.summary()`` every stage's 12 numbers, ``.error_counts()`` the
    errors per size, ``.detections()`` / ``.ground_truths()`` the labels. The table is matched once and kept in the
    store; ``schedule``: ``scheduler``, ``address``, ``workers``."""
    protocol = protocol or BorjiProtocol()
    protocol = replace(protocol, **{k: v for k, v in (("variant", variant), ("duplicates", duplicates)) if v})
    if iou_type:
        protocol = replace(protocol, coco=replace(protocol.coco, iou_type=iou_type))
    return on_store_or_files(store, n_shards, lambda layout: diagnose_borji(layout, run, protocol, **schedule))
