"""Error diagnosis of a stored detection run: TIDE (:mod:`evalengine.metrics.errors.tide`) over the ``tide`` match
table, which is matched from the ``pairs`` table (both made once and kept in the store)."""

from dataclasses import dataclass, replace
from functools import cached_property

import polars as pl

from evalengine.engine.planner import match
from evalengine.errors import InputError, check_option
from evalengine.evaluation.run import MatchedRun
from evalengine.match.tide import ERRORS, IOU_TYPES, MATCHINGS, TideProtocol
from evalengine.metrics.errors.tide import SPECIAL, TideResult, tide_errors
from evalengine.store.layout import StoreLayout

# tide: tidecv's matching, AP50 and averaging; coco: pycocotools' matching, AP50 and averaging
TIDE_MODES = MATCHINGS
TIDE_IOU_TYPES = IOU_TYPES
# tidecv's names of the iou types (``TIDE.BOX``, ``TIDE.MASK``)
_MODE_NAMES = {"bbox": "bbox", "segm": "mask"}


@dataclass(frozen=True)
class TideEvaluation(MatchedRun):
    """A run diagnosed with TIDE: the ΔAP and counts of every error, and the per-detection table they come from."""

    protocol: TideProtocol

    @cached_property
    def result(self) -> TideResult:
        """From ``dt_matches()`` (one row per kept detection: outcome, error code, target and fix,
        :data:`evalengine.schema.TIDE_DT`) and ``gt_matches()`` (one row per non-crowd ground truth: used, missed)."""
        return tide_errors(self.dt_matches(), self.gt_matches(), self.layout.scan("images"), self.protocol.matching)


def diagnose_tide(layout: StoreLayout, run: str, protocol: TideProtocol | None = None, mode: str = "tide",
                  iou_type: str | None = None, **schedule) -> TideEvaluation:
    """Match the tables ``run``'s TIDE table is read from (pairs; in ``mode`` "coco" also the COCO match table) and
    the TIDE table itself (each once), then diagnose it; ``iou_type`` (``bbox``, ``segm``), when given, replaces the
    protocol's. A ground truth without annotations (outside crowd regions)
    is refused: TIDE's AP has no positive to measure (tidecv divides by zero, or reports 0)."""
    check_option("mode", mode, TIDE_MODES)
    protocol = replace(protocol or TideProtocol(), matching=mode)
    protocol = protocol if iou_type is None else replace(protocol, iou_type=iou_type)
    if not layout.scan_gt().filter(~pl.col("iscrowd")).select(pl.len()).collect().item():
        source = layout.manifest.get("provenance", {}).get("gt", layout.root)
        raise InputError(f"{source}: no annotations (outside crowd regions): TIDE's AP is undefined")
    for required in protocol.required():
        match(layout, run, required, **schedule)
    return TideEvaluation(layout, run, protocol, match(layout, run, protocol, **schedule))


def _table(rows: list, title: str) -> list:
    """tidecv's ``plotting.print_table``: right-aligned columns, a title centred over the dividers."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    divider = "--" + "---".join("-" * w for w in widths) + "-"
    lines = [" " * ((len(divider) - len(title)) // 2) + title, divider.replace("-", "=")]
    for row in rows:
        lines.append("  " + "   ".join(cell.rjust(w) for cell, w in zip(row, widths)) + "  ")
        if row is rows[0]:
            lines.append(divider)
    return lines + [divider.replace("-", "=")]


def tide_summary(result: TideResult, name: str, protocol: TideProtocol) -> str:
    """tidecv's ``TIDE.summarize()`` text for one run called ``name`` (its mode, ``bbox`` or ``mask``, in the title)."""
    main = [["Type", *ERRORS], [" dAP", *(f"{result.main[e]:6.2f}" for e in ERRORS)]]
    special = [["Type", *SPECIAL], [" dAP", *(f"{result.special[e]:6.2f}" for e in SPECIAL)]]
    title = f"{_MODE_NAMES[protocol.iou_type]} AP @ {int(protocol.pos_threshold * 100):d}: {result.ap50:.2f}"
    return "\n".join([f"-- {name} --", "", title, "",
                      *_table(main, "Main Errors"), "", *_table(special, "Special Error")])
