"""pycocotools' ``COCOeval`` and ``Params`` on the engine: the same constructor, ``params``, ``evaluate()`` /
``accumulate()`` / ``summarize()``, ``stats``, ``eval`` and ``evalImgs``, with pycocotools' shapes and values.

``evaluate`` writes the two COCO objects into a temporary store (removed with the object) and matches them under the
:class:`~evalengine.match.coco.CocoProtocol` the parameters describe; ``params.imgIds`` / ``catIds`` are slices of
one match table, as in :class:`~evalengine.evaluation.detection.Evaluation`. ``evalImgs`` is built when first read
(one match table per area range: the table keeps the partners of its first one). ``accumulate`` reads the match table
while ``evalImgs`` and the parameters are those of ``evaluate``; given another ``evalImgs`` (torchvision's
``CocoEvaluator`` merges those of its processes) or other parameters, it accumulates that list as pycocotools does.

Strict by default: pycocotools' numbers, quirks included. ``COCOeval(..., zero_id_quirk=False)`` (or
``kpt_use_cats_quirk=False``) gives the engine's corrected mode, and says so when it evaluates."""

import copy
import datetime
import time
import warnings
from dataclasses import replace

import numpy as np
import polars as pl

from evalengine.api import COCO_IOU_THRESHOLDS, Store, _TemporaryFolder
from evalengine.compat.coco import compat_coco
from evalengine.compat.eval_images import accumulate_eval_images, eval_images
from evalengine.compat.ious import iou_matrices
from evalengine.compat.zero_id import with_zero_id_groups, zero_id_groups
from evalengine.match.coco import (COCO_AREA_RANGES, COCO_MAX_DETS, COCO_RECALL_THRESHOLDS, KEYPOINT_AREA_RANGES,
                                   KEYPOINT_MAX_DETS, CocoProtocol)
from evalengine.match.shape_columns import kpt_sigmas
from evalengine.metrics.summary import KEYPOINT_LAYOUT, SUMMARY_LAYOUT, summary_cap
from evalengine.store.build import create_store
from evalengine.store.sharding import default_shard_count

CORRECTIONS = {"zero_id_quirk": "ground-truth id 0 can be matched",
               "kpt_use_cats_quirk": "keypoints with useCats 0 are matched by OKS"}


class Params:
    """pycocotools ``Params``: ``imgIds, catIds, iouThrs, recThrs, maxDets, areaRng, areaRngLbl, useCats`` (and
    ``kpt_oks_sigmas`` for keypoints), ``iouType``, ``useSegm``."""

    def __init__(self, iouType="segm"):  # noqa: N803 - pycocotools' names
        if iouType not in ("segm", "bbox", "keypoints"):
            raise Exception("iouType not supported")
        keypoints = iouType == "keypoints"
        self.imgIds, self.catIds = [], []
        self.iouThrs = np.array(COCO_IOU_THRESHOLDS)
        self.recThrs = np.array(COCO_RECALL_THRESHOLDS)
        ranges = KEYPOINT_AREA_RANGES if keypoints else COCO_AREA_RANGES
        self.maxDets = list(KEYPOINT_MAX_DETS if keypoints else COCO_MAX_DETS)
        self.areaRng = [[lo, hi] for _, lo, hi in ranges]
        self.areaRngLbl = [label for label, _, _ in ranges]
        self.useCats = 1
        if keypoints:
            self.kpt_oks_sigmas = np.array(kpt_sigmas(None)[0][1])
        self.iouType = iouType
        self.useSegm = None


class COCOeval:
    """pycocotools ``COCOeval(cocoGt=None, cocoDt=None, iouType='segm')`` on the engine; ``corrections``: the
    :class:`~evalengine.match.coco.CocoProtocol` quirk switches of :data:`CORRECTIONS` (default: pycocotools')."""

    def __init__(self, cocoGt=None, cocoDt=None, iouType="segm", **corrections):  # noqa: N803
        if not iouType:
            print("iouType not specified. use default iouType segm")
        unknown = set(corrections) - set(CORRECTIONS)
        if unknown:
            raise TypeError(f"COCOeval: unknown option(s) {sorted(unknown)} (corrections: {sorted(CORRECTIONS)})")
        self.cocoGt, self.cocoDt = cocoGt, cocoDt
        self.corrections = corrections
        self.eval, self.stats, self._ious = {}, [], {}
        self.params = Params(iouType=iouType)
        self._paramsEval = {}
        self._eval_imgs, self._engine_eval_imgs = [], None
        self._built = None  # (store, evaluation, protocol) of the last evaluate
        self._zero_ids = set()  # groups with a detection of id 0 (evalengine.compat.zero_id)
        self._stores = {}
        if cocoGt is not None:
            self.params.imgIds = sorted(cocoGt.getImgIds())
            self.params.catIds = sorted(cocoGt.getCatIds())

    # -- evaluate -----------------------------------------------------------------------------------------------------

    def evaluate(self):
        """pycocotools ``evaluate``: normalises ``params`` (sorted unique ids, sorted caps) and matches."""
        tic = time.time()
        print("Running per image evaluation...")
        p = self.params
        if p.useSegm is not None:
            p.iouType = "segm" if p.useSegm == 1 else "bbox"
            print(f"useSegm (deprecated) is not None. Running {p.iouType} evaluation")
        print(f"Evaluate annotation type *{p.iouType}*")
        p.imgIds = list(np.unique(p.imgIds))
        if p.useCats:
            p.catIds = list(np.unique(p.catIds))
        p.maxDets = sorted(p.maxDets)
        self.params = p
        protocol = self._protocol(p)
        changed = ", ".join(CORRECTIONS[name] for name, on in self.corrections.items() if not on)
        if changed:
            warnings.warn(f"evalengine COCOeval in a corrected mode ({changed}): its numbers differ from "
                          "pycocotools' where that matters", stacklevel=2)
        store = self._store(p)
        evaluation = store.evaluate(protocol).slice(
            image_ids=[int(i) for i in p.imgIds], category_ids=[int(c) for c in p.catIds] if p.useCats else None)
        self._built = (store, evaluation, protocol)
        self._zero_ids = zero_id_groups(compat_coco(self.cocoDt), p.imgIds, p.catIds, p.useCats) \
            if protocol.zero_id_quirk and next(iter(self._stores.values()))[2] is not None else set()
        self._eval_imgs = self._ious = None  # built when read
        self._paramsEval = copy.deepcopy(self.params)
        print(f"DONE (t={time.time() - tic:0.2f}s).")

    def _protocol(self, p) -> CocoProtocol:
        labels = list(p.areaRngLbl) + [f"area{a}" for a in range(len(p.areaRngLbl), len(p.areaRng))]
        sigmas = {"kpt_oks_sigmas": tuple(float(s) for s in p.kpt_oks_sigmas)} if p.iouType == "keypoints" else {}
        return CocoProtocol(iou_thresholds=tuple(float(t) for t in p.iouThrs),
                            recall_thresholds=tuple(float(r) for r in p.recThrs),
                            area_ranges=tuple((label, float(lo), float(hi)) for label, (lo, hi) in zip(labels, p.areaRng)),
                            max_dets=tuple(int(m) for m in p.maxDets), use_cats=bool(p.useCats), iou_type=p.iouType,
                            **sigmas, **self.corrections)

    def _store(self, p) -> Store:
        """The store of the two COCO objects (kept while they are unchanged). With ``useCats`` off pycocotools pools
        only the objects of ``params.catIds``, so those are the ones stored."""
        coco_gt = compat_coco(self.cocoGt)
        gt = coco_gt.engine_gt()
        frames, ids = compat_coco(self.cocoDt).engine_results(coco_gt, masks=p.iouType == "segm")
        pooled = None if p.useCats else tuple(int(c) for c in p.catIds)
        key = (id(gt), id(frames), pooled)
        if key not in self._stores:
            gt_rows = gt.gt
            if pooled is not None:
                kept = pl.Series(pooled, dtype=pl.Int64).implode()
                gt_rows = gt_rows.filter(pl.col("category_id").is_in(kept))
                frames = [frame.filter(pl.col("category_id").is_in(kept)) for frame in frames]
            folder = _TemporaryFolder()
            n_rows = max(sum(frame.height for frame in frames), gt_rows.height)
            layout = create_store(folder.path / "store", gt.images, gt.categories, gt_rows, {"default": frames},
                                  n_shards=default_shard_count(n_rows))
            self._stores = {key: (Store(layout), folder, ids, gt, frames)}  # one store at a time
        return self._stores[key][0]

    # -- evalImgs -----------------------------------------------------------------------------------------------------

    @property
    def evalImgs(self):  # noqa: N802
        """pycocotools ``evalImgs`` (built from the match tables when first read after ``evaluate``)."""
        if self._eval_imgs is None:
            self._eval_imgs = self._build_eval_images()
            self._engine_eval_imgs = self._eval_imgs
        return self._eval_imgs

    @evalImgs.setter
    def evalImgs(self, value):  # noqa: N802
        self._eval_imgs = value

    @property
    def ious(self):
        """pycocotools ``ious`` (:mod:`evalengine.compat.ious`; built when first read after ``evaluate``)."""
        if self._ious is None:
            store, _, protocol = self._built
            p = self._paramsEval
            self._ious = iou_matrices(store.layout, "default", protocol, p.imgIds,
                                      p.catIds if p.useCats else [-1])
        return self._ious

    @ious.setter
    def ious(self, value):
        self._ious = value

    def _build_eval_images(self) -> list:
        store, evaluation, protocol = self._built
        p = self._paramsEval
        ids = next(iter(self._stores.values()))[2]
        gt_order = store.gt().select("gt_id", "gt_order")
        tables = []
        for a, area_range in enumerate(protocol.area_ranges):
            one = evaluation if a == 0 else store.evaluate(replace(protocol, area_ranges=(area_range,)))
            dt = one.dt_matches().select("image_id", "category_id", "det_id", "score", "dt_rank",
                                         pl.col("ignored_bits").arr.first(), "matched_gt_id").collect()
            gt = one.gt_matches().select("image_id", "category_id", "gt_id", "ignored_bits").join(
                gt_order, on="gt_id", how="left").collect()
            tables.append((dt, gt))
        built = eval_images(tables, p.imgIds, p.catIds if p.useCats else [-1], bool(p.useCats), p.areaRng,
                            p.maxDets[-1], len(p.iouThrs), ids)
        return with_zero_id_groups(built, self._zero_ids, compat_coco(self.cocoGt), compat_coco(self.cocoDt),
                                   self.ious, p) if self._zero_ids else built

    # -- accumulate and summarize -------------------------------------------------------------------------------------

    def accumulate(self, p=None):
        """pycocotools ``accumulate``: ``eval`` with ``precision`` / ``scores`` ``[T, R, K, A, M]`` and ``recall``
        ``[T, K, A, M]``."""
        print("Accumulating evaluation results...")
        tic = time.time()
        if not self._built and not self._eval_imgs:
            print("Please run evaluate() first")
        p = self.params if p is None else p
        p.catIds = p.catIds if p.useCats == 1 else [-1]
        if self._from_tables(p):
            acc = self._built[1].accumulate(want_curve=True)
            if tuple(p.recThrs) != acc.protocol.recall_thresholds:
                acc = replace(self._built[1], protocol=replace(self._built[2], recall_thresholds=tuple(
                    float(r) for r in p.recThrs)), _cache={}).accumulate(want_curve=True)
            arrays = {"precision": np.transpose(acc.precision, (3, 4, 0, 1, 2)).copy(),
                      "recall": np.transpose(acc.recall, (3, 0, 1, 2)).copy(),
                      "scores": np.transpose(acc.scores, (3, 4, 0, 1, 2)).copy()}
        else:
            arrays = accumulate_eval_images(self.evalImgs, p, self._paramsEval)
        self.eval = {"params": p, "counts": list(arrays["precision"].shape),
                     "date": datetime.datetime.now().strftime("%Y-%m-%d %H:%M:%S"), **arrays}
        print(f"DONE (t={time.time() - tic:0.2f}s).")

    def _from_tables(self, p) -> bool:
        """Whether the match table answers: ``evalImgs`` is the one ``evaluate`` made (or not built yet) and the
        parameters that decide it are those of ``evaluate``."""
        if self._built is None or self._zero_ids or (self._eval_imgs is not None and self._eval_imgs is not getattr(
                self, "_engine_eval_imgs", None)):
            return False
        pe = self._paramsEval
        same = [list(p.imgIds) == list(pe.imgIds), list(p.maxDets) == list(pe.maxDets),
                [list(r) for r in p.areaRng] == [list(r) for r in pe.areaRng], bool(p.useCats) == bool(pe.useCats),
                np.array_equal(p.iouThrs, pe.iouThrs)]
        return all(same) and (not p.useCats or list(p.catIds) == list(pe.catIds))

    def summarize(self):
        """pycocotools ``summarize``: prints the summary and sets ``stats`` (12 numbers; keypoints: 10), each the mean
        of the defined cells of ``eval`` as pycocotools selects them."""
        if not self.eval:
            raise Exception("Please run accumulate() first")
        p = self.params
        layout = KEYPOINT_LAYOUT if p.iouType == "keypoints" else SUMMARY_LAYOUT
        stats = np.zeros((len(layout),))
        for n, (_, is_ap, t, area, cap) in enumerate(layout):
            stats[n] = self._summarize(is_ap, t, area, summary_cap(cap, p.maxDets))
        self.stats = stats

    def _summarize(self, is_ap: bool, iou_threshold, area: str, max_dets: int) -> float:
        p = self.params
        areas = [i for i, label in enumerate(p.areaRngLbl) if label == area]
        caps = [i for i, m in enumerate(p.maxDets) if m == max_dets]
        values = self.eval["precision" if is_ap else "recall"]
        if iou_threshold is not None:
            values = values[np.where(iou_threshold == p.iouThrs)[0]]
        values = values[:, :, :, areas, caps] if is_ap else values[:, :, areas, caps]
        defined = values[values > -1]
        mean = -1 if len(defined) == 0 else np.mean(defined)
        title, short = ("Average Precision", "(AP)") if is_ap else ("Average Recall", "(AR)")
        iou = f"{p.iouThrs[0]:0.2f}:{p.iouThrs[-1]:0.2f}" if iou_threshold is None else f"{iou_threshold:0.2f}"
        print(f" {title:<18} {short} @[ IoU={iou:<9} | area={area:>6s} | maxDets={max_dets:>3d} ] = {mean:0.3f}")
        return mean

    def __str__(self):
        self.summarize()
        return ""
