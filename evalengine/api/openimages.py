"""The OpenImages front door: ingest the challenge's CSV files (boxes, image-level labels, the class hierarchy and
predictions) into a store, match it under the OpenImages protocol, and evaluate files in one call."""

import threading
from pathlib import Path

from evalengine.api import DEFAULT_RUN, Phases, Store, _TemporaryFolder
from evalengine.engine.memory import keep_freed_memory
from evalengine.evaluation.openimages import OpenImagesEvaluation, openimages_output, openimages_payload
from evalengine.io.openimages import iter_predictions, read_ground_truth
from evalengine.match.groups import warm_up
from evalengine.match.openimages import OpenImagesProtocol
from evalengine.store.build import create_store, replaced_store
from evalengine.store.location import location
from evalengine.store.paths import check_name
from evalengine.store.sharding import default_shard_count

__all__ = ["OpenImagesEvaluation", "OpenImagesProtocol", "evaluate_openimages", "evaluate_store_openimages",
           "ingest_openimages", "openimages_output", "openimages_payload"]


def ingest_openimages(boxes, labels, hierarchy, dt, store, class_descriptions=None, expand: bool = True,
                      n_shards: int | None = None, run: str = DEFAULT_RUN, overwrite: bool = False,
                      progress=None, masks=None, with_masks: bool = False) -> Store:
    """A new store from OpenImages CSV files (:mod:`evalengine.io.openimages`): ground-truth ``boxes``, image-level
    ``labels`` (None: none, the V2 protocol), the ``hierarchy`` JSON and predictions ``dt`` (CSV or Parquet).
    ``expand``: copy boxes and labels along the hierarchy (False for files the reference's expansion tool already
    wrote). ``with_masks``: the instance-segmentation track's inputs (masks in the boxes file or in ``masks``, and in
    the predictions)."""
    keep_freed_memory()
    check_name("run", run)
    replaced_store(location(store), overwrite, [p for p in (boxes, labels, hierarchy, dt) if p is not None])
    dataset = read_ground_truth(boxes, labels, hierarchy, class_descriptions, expand, masks, with_masks)
    size = max(dataset.gt.height, Path(dt).stat().st_size // 80 if Path(dt).is_file() else 0)
    layout = create_store(store, dataset.images, dataset.categories, dataset.gt, {run: iter_predictions(dt, dataset, with_masks)},
                          n_shards=n_shards or default_shard_count(size),
                          provenance={"gt": str(boxes), "labels": str(labels), "hierarchy": str(hierarchy), run: str(dt)},
                          overwrite=overwrite, progress=progress, image_labels=dataset.image_labels,
                          category_edges=dataset.category_edges)
    return Store(layout)


def evaluate_store_openimages(store: Store, protocol: OpenImagesProtocol | None = None, run: str = DEFAULT_RUN,
                              phases: Phases | None = None, keep_alive: tuple = (),
                              **schedule) -> OpenImagesEvaluation:
    """Match (or reuse the match table of) a stored run under the OpenImages protocol and accumulate its AP;
    ``keep_alive``: what the evaluation's store needs kept (a temporary folder)."""
    phases = phases or Phases()
    protocol = protocol or OpenImagesProtocol()
    with phases.phase("match", total=store.layout.n_shards, unit="shards") as advance:
        evaluation = OpenImagesEvaluation(store.layout, run, protocol,
                                          store.match(protocol, run, on_shard_done=advance, **schedule))
    evaluation.keep_alive.extend(keep_alive)
    with phases.phase("accumulate"):
        evaluation.accumulate()
    return evaluation


def evaluate_openimages(boxes, labels, hierarchy, dt, protocol: OpenImagesProtocol | None = None,
                        class_descriptions=None, expand: bool = True, store=None, n_shards: int | None = None,
                        phases: Phases | None = None, masks=None, **schedule) -> OpenImagesEvaluation:
    """OpenImages files in (:func:`ingest_openimages`'s), an evaluation out; without ``labels`` the V2 protocol
    unless one is given. The store is kept at ``store`` or made in a temporary folder that lives as long as the
    evaluation."""
    phases = phases or Phases()
    if protocol is None:
        protocol = OpenImagesProtocol() if labels is not None else OpenImagesProtocol.v2()
    threading.Thread(target=warm_up, daemon=True).start()
    folder = _TemporaryFolder() if store is None else None
    with phases.phase("ingest", unit="detections") as advance:
        opened = ingest_openimages(boxes, labels, hierarchy, dt, store if folder is None else folder.path / "store",
                                   class_descriptions, expand, n_shards=n_shards, progress=advance, masks=masks,
                                   with_masks=protocol.iou_type == "segm")
    return evaluate_store_openimages(opened, protocol, phases=phases, keep_alive=() if folder is None else (folder,),
                                     **schedule)
