"""The PASCAL VOC front door (ingest, evaluate, the bundled sample) and the protocol choice of the score-threshold
metrics (LRP, operating points) of a COCO or VOC run."""

import threading
from dataclasses import replace
from importlib import resources
from pathlib import Path

from evalengine.api import (COCO_IOU_THRESHOLDS, DEFAULT_RUN, CocoProtocol, Phases, Store,
                            _TemporaryFolder, evaluate_coco, open)
from evalengine.engine.memory import keep_freed_memory
from evalengine.errors import ProtocolError, check_option
from evalengine.evaluation.voc import VocEvaluation, voc_output
from evalengine.io.detections import estimate_rows
from evalengine.io.voc import estimate_result_rows, iter_voc_detections, read_ground_truth
from evalengine.match.groups import warm_up
from evalengine.match.voc import VocProtocol
from evalengine.metrics.voc import METRICS as VOC_METRICS
from evalengine.store.build import create_store, replaced_store
from evalengine.store.location import location
from evalengine.store.paths import check_name
from evalengine.store.sharding import default_shard_count
from evalengine.store.tags import check_tags

__all__ = ["VOC_METRICS", "VocEvaluation", "evaluate_store_voc", "evaluate_thresholds", "evaluate_voc", "ingest_voc",
           "lrp_protocol", "voc_output", "voc_sample"]


def ingest_voc(gt, dt, store, n_shards: int | None = None, run: str = DEFAULT_RUN, overwrite: bool = False,
               progress=None, tags: dict | None = None) -> Store:
    """A new store from PASCAL VOC inputs (see :mod:`evalengine.io.voc`): ground truth from an ``Annotations/``
    folder of XML files or a COCO file, detections from a folder of devkit result files (``comp4_det_test_<class>
    .txt``, …) or a COCO result file, JSON Lines or Parquet. Any protocol evaluates it (the COCO one with area
    ``w·h`` and no crowd). ``tags`` label the run (:mod:`evalengine.store.tags`)."""
    keep_freed_memory()
    check_name("run", run)
    check_tags(tags or {})
    replaced_store(location(store), overwrite, [gt, dt])
    dataset = read_ground_truth(gt)
    rows = estimate_result_rows(dt) if Path(dt).is_dir() else estimate_rows(dt)
    layout = create_store(store, dataset.images, dataset.categories, dataset.gt, {run: iter_voc_detections(dt, dataset)},
                          n_shards=n_shards or default_shard_count(max(rows, dataset.gt.height)),
                          provenance={"gt": str(gt), run: str(dt)}, overwrite=overwrite, progress=progress,
                          tags={run: tags or {}})
    return Store(layout)


def evaluate_store_voc(store: Store, protocol: VocProtocol | None = None, run: str = DEFAULT_RUN, metric: str = "voc12",
                       phases: Phases | None = None, **schedule) -> VocEvaluation:
    """Match (or reuse the match table of) a stored run under the VOC protocol and accumulate ``metric``."""
    phases = phases or Phases()
    protocol = protocol or VocProtocol()
    with phases.phase("match", total=store.layout.n_shards, unit="shards") as advance:
        evaluation = VocEvaluation(store.layout, run, protocol, store.match(protocol, run, on_shard_done=advance,
                                                                             **schedule))
    with phases.phase("accumulate", total=len(evaluation.category_ids), unit="categories") as advance:
        evaluation.accumulate(metric, on_batch_done=advance)
    return evaluation


def evaluate_voc(gt, dt, protocol: VocProtocol | None = None, metric: str = "voc12", store=None,
                 n_shards: int | None = None, phases: Phases | None = None, **schedule) -> VocEvaluation:
    """PASCAL VOC files in (:func:`ingest_voc`'s), a VOC evaluation out; the store is kept at ``store`` or made in a
    temporary folder that lives as long as the evaluation."""
    phases = phases or Phases()
    threading.Thread(target=warm_up, daemon=True).start()
    folder = _TemporaryFolder() if store is None else None
    with phases.phase("ingest", unit="detections") as advance:
        opened = ingest_voc(gt, dt, store if folder is None else folder.path / "store", n_shards=n_shards,
                            progress=advance)
    evaluation = evaluate_store_voc(opened, protocol, metric=metric, phases=phases, **schedule)
    if folder is not None:
        evaluation.keep_alive.append(folder)
    return evaluation


def voc_sample() -> tuple:
    """``(Annotations folder, results folder)`` of the bundled VOC sample: 100 VOC2012 images, 20 classes, 38 difficult
    objects, a detector's devkit result files (``evalengine/data/NOTICE.md``)."""
    folder = Path(str(resources.files("evalengine.data"))) / "voc_sample"
    return folder / "Annotations", folder / "results"


def lrp_protocol(iou_threshold: float = 0.5, max_dets: int | None = None, family: str = "coco",
                 strict: bool = False, iou_type: str = "bbox", kpt_oks_sigmas=None):
    """The protocol LRP is read from. COCO: the official code takes ``iouThrs[0]`` and ``maxDets[-1]``, so the
    default protocol of ``iou_type`` (its ``iouType``: boxes, masks, boundaries or keypoints) at 0.5 and its cap (100;
    keypoints 20: its match table is the one ``evaluate`` makes), else one threshold and that cap. VOC: the devkit's
    matching of boxes at that threshold (``strict``: ``IoU > τ``, as voc_eval.py and the VOC LRP code)."""
    check_option("family", family, ("coco", "voc"))
    if family == "voc":
        if iou_type != "bbox":
            raise ProtocolError(f"iou_type '{iou_type}': the VOC protocol matches boxes only")
        return VocProtocol(iou_thresholds=(iou_threshold,), strict=strict)
    default = CocoProtocol(iou_type=iou_type, kpt_oks_sigmas=kpt_oks_sigmas)
    if iou_threshold == COCO_IOU_THRESHOLDS[0] and max_dets in (None, default.max_det_cap):
        return default
    return replace(default, iou_thresholds=(iou_threshold,), max_dets=(max_dets or default.max_det_cap,))


def evaluate_thresholds(protocol, store=None, run: str = DEFAULT_RUN, gt=None, dt=None, **schedule):
    """A matched run for the score-threshold metrics (LRP, operating points): of a store, or of files in a
    temporary store; COCO or VOC by ``protocol``."""
    voc = isinstance(protocol, VocProtocol)
    if store is None:
        return (evaluate_voc(gt, dt, protocol, **schedule) if voc
                else evaluate_coco(gt, dt, protocol, accumulate=False, partners=True, **schedule))
    opened = open(store)
    return evaluate_store_voc(opened, protocol, run, **schedule) if voc else opened.evaluate(protocol, run, **schedule)
