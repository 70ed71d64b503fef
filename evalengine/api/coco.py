"""The COCO one-shot: files (or objects in memory) in, an evaluation out (``evalengine coco``), and the evaluation of
a stored run (``evalengine evaluate``).

Without a store to keep, the run is ingested into a store held in memory (:mod:`evalengine.store.memory`): the same
shards, match table and metric queries as on disk, without writing and re-reading Parquet the call would then
delete (issue 17 item 3). Above :data:`IN_MEMORY_DETECTIONS` detections, or on a scheduler of other processes, it
goes through a temporary folder instead, so that memory stays bounded by the shard."""

import functools
import os
import threading
import warnings
from pathlib import Path

from evalengine.api import DEFAULT_RUN, Store, _TemporaryFolder, ingest_coco
from evalengine.engine.memory import release_freed_memory
from evalengine.errors import InputWarning, ZeroIdWarning
from evalengine.evaluation.detection import Evaluation
from evalengine.io.coco import CocoDataset, read_coco_gt
from evalengine.io.detections import count_rows, estimate_rows
from evalengine.io.memory import is_path
from evalengine.match.coco import CocoProtocol
from evalengine.match.groups import warm_up
from evalengine.progress import Phases

# the largest run a one-shot evaluation holds in memory: its detections and match table take ~0.3 KB a detection
IN_MEMORY_DETECTIONS = 2_000_000


def evaluate_coco(gt_json, dt_path, protocol: CocoProtocol | None = None, store=None, n_shards: int | None = None,
                  phases: Phases | None = None, accumulate: bool = True, in_memory: bool | None = None,
                  partners: bool = False, **schedule) -> Evaluation:
    """Files (or objects in memory, as :func:`ingest_coco` takes them) in, a COCO evaluation out; the store is kept at
    ``store``, else held in memory (``in_memory``; by default when the run has at most :data:`IN_MEMORY_DETECTIONS`
    detections and is matched by threads) or made in a temporary folder, for as long as the evaluation lives.
    ``accumulate=False`` leaves AP to be accumulated when asked for (LRP, operating points do not need it).
    ``partners``: a match table held in memory keeps each detection's partner ids and IoUs from the start (export,
    TIDE, confusion, LRP read them); without, it is matched for AP alone and matched again when one of those asks
    (a stored table always has them).

    ``phases`` (a :class:`~evalengine.progress.Phases`) shows progress and times ingest, match and accumulate.
    """
    phases = phases or Phases()
    threading.Thread(target=warm_up, daemon=True).start()
    if in_memory is None:
        in_memory = (schedule.get("scheduler", "threads") in ("threads", "sync") and schedule.get("address") is None
                     and (not is_path(dt_path) or estimate_rows(dt_path) <= IN_MEMORY_DETECTIONS))
    folder = _TemporaryFolder() if store is None and not in_memory else None
    total = count_rows(dt_path) if is_path(dt_path) else None
    with phases.phase("ingest", total=total, unit="detections") as advance, warnings.catch_warnings():
        if protocol is not None and not protocol.zero_id_quirk:  # the quirk is off: id 0 is matched
            warnings.simplefilter("ignore", ZeroIdWarning)
        opened = ingest_coco(gt_json, dt_path, folder.path / "store" if folder is not None else store,
                             n_shards=n_shards, progress=advance, masks=store is not None or _reads_masks(protocol))
    release_freed_memory()  # the parse's buffers: the match table would otherwise come on top of them
    return evaluate_store(opened, protocol, phases=phases, accumulate=accumulate, partners=partners,
                          keep_alive=() if folder is None else (folder,), **schedule)


def _reads_masks(protocol: CocoProtocol | None) -> bool:
    """Whether ``protocol`` matches masks: a one-shot evaluation that does not keep its store stores none otherwise."""
    return protocol is not None and protocol.iou_type in ("segm", "boundary")


def evaluate_store(store: Store, protocol: CocoProtocol | None = None, run: str = DEFAULT_RUN,
                   phases: Phases | None = None, accumulate: bool = True, partners: bool = True,
                   keep_alive: tuple = (), **schedule) -> Evaluation:
    """Match (or reuse the match table of) a stored run and accumulate it, phase by phase; ``partners``:
    :meth:`Store.match`'s."""
    phases = phases or Phases()
    if "neg_category_ids" in store.images().collect_schema().names():  # lvis-api's image labels
        warnings.warn("the ground truth is LVIS' (its images have 'neg_category_ids'), evaluated here as COCO; "
                      "`evalengine lvis` (evaluate_lvis) applies LVIS' federated rules", InputWarning)
    with phases.phase("match", total=store.layout.n_shards, unit="shards") as advance:
        evaluation = store.evaluate(protocol, run=run, on_shard_done=advance, partners=partners, **schedule)
    evaluation.keep_alive.extend(keep_alive)
    if not accumulate:
        return evaluation
    release_freed_memory()
    n_classes = len(evaluation.category_ids) if evaluation.protocol.use_cats else 1
    with phases.phase("accumulate", total=n_classes, unit="categories") as advance:
        evaluation.accumulate(on_batch_done=advance)
    return evaluation


def read_gt(path) -> CocoDataset:
    """:func:`~evalengine.io.coco.read_coco_gt`, kept for the next call while the file is the same (path, size,
    modification time, inode): a notebook evaluates one ground truth against many result files. Its warnings are
    given again on every call."""
    path = Path(path)
    if not path.is_file():
        return read_coco_gt(path)  # its located error
    status = os.stat(path)
    dataset, caught = _parsed_gt(str(path.resolve()), (status.st_size, status.st_mtime_ns, status.st_ino))
    for warning in caught:
        warnings.warn_explicit(warning.message, warning.category, warning.filename, warning.lineno)
    return dataset


@functools.lru_cache(maxsize=1)
def _parsed_gt(path: str, identity: tuple) -> tuple:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        dataset = read_coco_gt(path)
    return dataset, tuple(caught)
