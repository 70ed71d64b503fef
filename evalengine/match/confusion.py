"""The ``confusion`` table: which cell of a confusion matrix each counted object falls in, per shard, in the COCO
matching convention — from the COCO match table and the ``pairs`` table (:mod:`evalengine.match.pairs`).

Rows are ground-truth classes, columns predicted classes (scikit-learn's ``confusion_matrix`` orientation), each
with a last *background* entry (null ``category_id``). At one IoU threshold ``t`` of the COCO protocol, in its first
area range (pycocotools' ``all``) and within its detection cap (``maxDets[-1]`` per image and category), a detection
is *kept* when its score is ``>=`` its class's threshold; then every kept detection and every regular ground truth is
counted exactly once:

1. **Diagonal** — a kept detection that pycocotools' ``evaluateImg`` makes a true positive at ``t``: (its class,
   its class). Greedy matching goes by descending score, so the true positives among the kept detections are the
   ones a matching of the kept detections alone would give (ties in score are kept or dropped together).
2. **Confusions** — the kept false positives of an image, by descending score (ties: file order), each take the
   ground truth of *another* class with the highest IoU ``>= t`` (ties: file order) that no kept true positive
   matched and no earlier confusion took: (that class, its class). One-to-one, as COCO's matching is, so that a row
   sums to the class's ground truths. This is what Ultralytics' ``ConfusionMatrix`` and the TF Object Detection
   confusion matrix report for a class swap, but on top of pycocotools' same-class matching instead of a class-blind
   one, so the diagonal is COCO's TP count.
3. **Background row** — any other kept false positive: (background, its class).
4. **Background column** — a regular ground truth neither matched nor taken: (its class, background), a miss.

Ignored objects are out, as in pycocotools: crowd and ``ignore`` ground truths (and any outside the area range)
are in no row and are never a confusion's target; a detection ignored at ``t`` (matched to one of them) is in no
column. Classes are the evaluated ones (``category_ids``, all by default); a class missing from per-class thresholds,
or with a null threshold (no operating point), keeps no detection.

Everything is decided within an image, so each shard task writes its images' rows (schema
:data:`evalengine.schema.CONFUSION`): the matrix, each image's cells and the SQL views are group-bys over them.
"""

import math
import numbers
from dataclasses import dataclass, field, replace
from typing import ClassVar

import numba
import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import InputError, ProtocolError
from evalengine.match.coco import CocoProtocol
from evalengine.match.pairs import IOU_TYPES as PAIRS_IOU_TYPES
from evalengine.match.pairs import PairsProtocol
from evalengine.match.protocol import Protocol, required_tables
from evalengine.store.paths import shard_file


def score_thresholds(value) -> float | tuple:
    """A score threshold: a finite number, or per class ``((category_id, threshold or None), …)`` sorted by class."""
    if isinstance(value, numbers.Real) and not isinstance(value, bool) and math.isfinite(value):
        return float(value)
    if isinstance(value, (tuple, list)):
        try:
            return tuple(sorted((int(c), None if t is None else float(t)) for c, t in value))
        except (TypeError, ValueError):
            pass
    raise InputError(f"score threshold: expected a finite number or a category_id, threshold frame, got {value!r}")


@dataclass(frozen=True)
class ConfusionProtocol(Protocol):
    """The confusion matrix of the ``coco`` match table at ``iou_threshold`` (one of its thresholds) and
    ``score_threshold`` (a number, or per class ``((category_id, threshold), …)``), over ``category_ids`` (None:
    every class of the store)."""

    iou_threshold: float = 0.5
    score_threshold: float | tuple = 0.05
    category_ids: tuple | None = None
    coco: CocoProtocol = field(default_factory=CocoProtocol)
    name: ClassVar[str] = "confusion"
    sides: ClassVar[tuple] = ("assignments",)

    def __post_init__(self):
        if not self.coco.use_cats:
            raise ProtocolError("confusion matrix: the protocol pools the categories (use_cats off); classes are "
                                "needed")
        if self.coco.iou_type not in PAIRS_IOU_TYPES:
            raise ProtocolError(f"confusion matrix: iou_type '{self.coco.iou_type}' has no pairs table (boxes or "
                                "masks: bbox, segm)")
        if self.iou_threshold not in self.coco.iou_thresholds:
            raise ProtocolError(f"IoU threshold {self.iou_threshold} is not one of the match table's "
                                f"{list(self.coco.iou_thresholds)}")
        object.__setattr__(self, "score_threshold", score_thresholds(self.score_threshold))
        if self.category_ids is not None:
            object.__setattr__(self, "category_ids", tuple(sorted(int(c) for c in self.category_ids)))

    def match_params(self) -> dict:
        thresholds = self.score_threshold
        return {"name": self.name, "iou_threshold": self.iou_threshold,
                "score_threshold": thresholds if isinstance(thresholds, float) else [list(p) for p in thresholds],
                "category_ids": None if self.category_ids is None else list(self.category_ids),
                "coco": self.coco.match_params()}

    @property
    def pairs(self) -> PairsProtocol:
        """The pairs table read, of the COCO protocol's boxes or masks: the default one (IoU >= 0.1), or one down to
        a lower IoU threshold."""
        default = PairsProtocol(iou_type=self.coco.iou_type)
        return default if self.iou_threshold >= default.min_iou else replace(default, min_iou=self.iou_threshold)

    def required(self) -> tuple:
        """The protocols whose tables this one reads, to be matched before it."""
        return self.pairs, self.coco

    def shard_inputs(self, layout, run: str) -> tuple:
        layout.check_run(run)
        paths = layout.paths
        folders = required_tables(layout, run, self.required())
        category_ids = self.category_ids if self.category_ids is not None else tuple(layout.category_ids())
        inputs = [{"gt": str(paths.gt_shard(k)), "pairs": str(shard_file(folders["pairs"] / "pairs", k)),
                   "coco_dt": str(shard_file(folders["coco"] / "dt", k)),
                   "coco_gt": str(shard_file(folders["coco"] / "gt", k))} for k in range(layout.n_shards)]
        return inputs, {"category_ids": category_ids}

    def input_columns(self) -> dict:
        """The COCO match table without its wide columns: the partner's IoU at the first threshold is ``area_iou[0]``,
        ``matched_iou`` is read only for another."""
        partner_iou = "matched_iou" if self._threshold_index() else "area_iou"
        return {"coco_dt": ["image_id", "category_id", "det_id", "score", "dt_rank", "tp_bits", "ignored_bits",
                            "matched_gt_id", partner_iou],
                "coco_gt": ["image_id", "category_id", "gt_id", "ignored_bits"],
                "gt": ["image_id", "gt_id", "gt_order"]}

    def _threshold_index(self) -> int:
        return self.coco.iou_thresholds.index(self.iou_threshold)

    def match_shard(self, tables: dict, context: dict) -> dict:
        return {"assignments": confusion_shard(tables, self, context["category_ids"])}


@numba.njit(cache=True, nogil=True)
def _greedy_take(det, gt, n_det, n_gt):
    """Candidates in priority order (detection by score, then IoU): take each whose detection and ground truth are
    both still free."""
    det_done = np.zeros(n_det, np.bool_)
    gt_taken = np.zeros(n_gt, np.bool_)
    take = np.zeros(det.size, np.bool_)
    for i in range(det.size):
        if not det_done[det[i]] and not gt_taken[gt[i]]:
            det_done[det[i]] = True
            gt_taken[gt[i]] = True
            take[i] = True
    return take


def _kept(coco_dt: pl.LazyFrame, protocol: ConfusionProtocol, classes: pl.Expr) -> pl.DataFrame:
    """The kept detections that are not ignored at the threshold: ``image_id, det_id, score, dt_category_id, tp``
    and the partner ``gt_id`` and its ``iou``."""
    t = protocol._threshold_index()
    dets = coco_dt.filter(pl.col("category_id").is_in(classes) & (pl.col("dt_rank") < protocol.coco.max_det_cap))
    if isinstance(protocol.score_threshold, float):
        dets = dets.filter(pl.col("score") >= protocol.score_threshold)
    else:
        thresholds = pl.LazyFrame(list(protocol.score_threshold), schema={"category_id": pl.Int64,
                                                                          "threshold": pl.Float64}, orient="row")
        dets = dets.join(thresholds, on="category_id").filter(pl.col("score") >= pl.col("threshold"))
    bit = 1 << t
    return (dets.filter((pl.col("ignored_bits").arr.get(0) & bit) == 0)
            .select("image_id", "det_id", "score", pl.col("category_id").alias("dt_category_id"),
                    ((pl.col("tp_bits").arr.get(0) & bit) != 0).alias("tp"),
                    pl.col("matched_gt_id").arr.get(t).alias("gt_id"),
                    (pl.col("matched_iou").arr.get(t) if t else pl.col("area_iou").arr.get(0)).alias("iou"))
            .collect())


def confusion_shard(tables: dict, protocol: ConfusionProtocol, category_ids) -> pl.DataFrame:
    """One shard's rows (:data:`evalengine.schema.CONFUSION`), one per counted object: a kept detection (``gt_id``
    and ``iou``: its true positive's or confusion's partner, null on the background row) or a missed ground truth
    (``det_id`` and ``dt_category_id`` null); ordered by image, det_id, gt_id (misses last)."""
    classes = pl.Series(list(category_ids), dtype=pl.Int64).implode()
    dets = _kept(tables["coco_dt"].lazy(), protocol, classes)
    tp = dets.filter("tp")
    free_gt = (tables["coco_gt"].lazy()
               .filter(pl.col("category_id").is_in(classes) & ((pl.col("ignored_bits") & 1) == 0))
               .select("image_id", "gt_id", pl.col("category_id").alias("gt_category_id"))
               .join(tp.lazy().select("image_id", "gt_id"), on=["image_id", "gt_id"], how="anti")
               .join(tables["gt"].lazy().select("image_id", "gt_id", "gt_order"), on=["image_id", "gt_id"], how="left")
               .collect())
    false_positives = dets.filter(~pl.col("tp")).drop("gt_id", "iou")
    # pycocotools' test is ``iou >= min(t, 1 - 1e-10)``
    candidates = (tables["pairs"].lazy()
                  .filter((pl.col("iou") >= min(protocol.iou_threshold, 1 - 1e-10))
                          & (pl.col("dt_category_id") != pl.col("gt_category_id")))
                  .select("image_id", "det_id", "gt_id", "iou")
                  .join(false_positives.lazy().select("image_id", "det_id", "score"), on=["image_id", "det_id"])
                  .join(free_gt.lazy(), on=["image_id", "gt_id"])
                  .sort("image_id", "score", "det_id", "iou", "gt_order", descending=[False, True, False, True, False])
                  .collect())
    det_index, gt_index = (candidates.select(pl.struct("image_id", key).rank("dense").cast(pl.Int64) - 1)
                           .to_series().to_numpy() for key in ("det_id", "gt_id"))
    take = _greedy_take(det_index, gt_index, candidates.height, candidates.height)
    confused = candidates.filter(pl.Series(take)).select("image_id", "det_id", "gt_id", "gt_category_id", "iou")
    taken = pl.concat([tp.select("image_id", "gt_id"), confused.select("image_id", "gt_id")])
    columns = list(schema.CONFUSION)
    rows = [
        tp.select("image_id", pl.col("dt_category_id").alias("gt_category_id"), "dt_category_id", "det_id", "gt_id",
                  "score", "iou"),
        false_positives.join(confused, on=["image_id", "det_id"], how="left").select(columns),
        free_gt.join(taken, on=["image_id", "gt_id"], how="anti").select(
            "image_id", "gt_category_id", pl.lit(None, pl.Int64).alias("dt_category_id"),
            pl.lit(None, pl.Int64).alias("det_id"), "gt_id", pl.lit(None, pl.Float64).alias("score"),
            pl.lit(None, pl.Float64).alias("iou")),
    ]
    return (pl.concat([r.cast(schema.CONFUSION) for r in rows])
            .sort("image_id", "det_id", "gt_id", nulls_last=True))
