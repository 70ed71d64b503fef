"""The LVIS front door: an LVIS ground truth (COCO-shaped, with the images' ``neg_category_ids`` and
``not_exhaustive_category_ids`` and the categories' ``frequency``, kept as columns of the images and categories
tables at ingest) and a detection run, evaluated as lvis-api's ``LVISEval``."""

import threading

from evalengine.api import DEFAULT_RUN, Phases, Store, _TemporaryFolder, count_rows, estimate_rows, ingest_coco
from evalengine.evaluation.lvis import LvisEvaluation, lvis_output, lvis_payload
from evalengine.io.memory import is_path
from evalengine.match.groups import warm_up
from evalengine.match.lvis import LvisProtocol, EvaluatedResults, check_lvis_labels
from evalengine.store.sharding import default_shard_count

# the largest run a one-shot LVIS evaluation holds in memory (the COCO one's is 2M): lvis-api keeps 300 results per
# image, so LVIS v1 val is at most 5.9M; an LVIS-shaped run of 6M took 1.38 GB at its peak in memory, 1.11 GB through
# a temporary store (the federated filter leaves a smaller match table than COCO's)
IN_MEMORY_DETECTIONS = 8_000_000
# results per shard of a one-shot held in memory (COCO's default: 100k): the federated filter keeps about one result in
# ten (547,972 of 6M in bench_lvis' 20k set), so a 100k shard matches ~10k and its fixed costs (Polars calls, frames,
# under the GIL) outweigh its matching; 12 shards instead of 60 at 6M: match 0.66-0.77 -> 0.41-0.52 s wall, same CPU
IN_MEMORY_RESULTS_PER_SHARD = 500_000

__all__ = ["LvisEvaluation", "LvisProtocol", "evaluate_lvis", "evaluate_store_lvis", "ingest_lvis", "lvis_output",
           "lvis_payload"]


def _check_lvis(dataset, source: str):
    """The dataset, once its LVIS fields are checked (``ingest_coco``'s ``check_gt``: before anything is written)."""
    check_lvis_labels(dataset.images, dataset.categories, source)
    return dataset


def ingest_lvis(gt, dt, store, **options) -> Store:
    """:func:`~evalengine.api.ingest_coco` of an LVIS ground truth, whose images' ``neg_category_ids`` and
    ``not_exhaustive_category_ids`` (list columns of the images table) and categories' ``frequency`` (a column of the
    categories table) are checked before anything is written; ``options`` as ``ingest_coco``'s."""
    return ingest_coco(gt, dt, store, check_gt=_check_lvis, **options)


def evaluate_store_lvis(store: Store, protocol: LvisProtocol | None = None, run: str = DEFAULT_RUN,
                        phases: Phases | None = None, keep_alive: tuple = (), **schedule) -> LvisEvaluation:
    """Match (or reuse the match table of) a stored run under the LVIS protocol and accumulate it; ``keep_alive``:
    what the evaluation's store needs kept (a temporary folder)."""
    phases = phases or Phases()
    protocol = protocol or LvisProtocol()
    with phases.phase("match", total=store.layout.n_shards, unit="shards") as advance:
        evaluation = LvisEvaluation(store.layout, run, protocol, store.match(protocol, run, on_shard_done=advance,
                                                                             **schedule))
    evaluation.keep_alive.extend(keep_alive)
    with phases.phase("accumulate", total=len(evaluation.category_ids), unit="categories") as advance:
        evaluation.accumulate(on_batch_done=advance)
    return evaluation


def evaluate_lvis(gt, dt, protocol: LvisProtocol | None = None, store=None, n_shards: int | None = None,
                  phases: Phases | None = None, in_memory: bool | None = None, **schedule) -> LvisEvaluation:
    """An LVIS ground-truth file and a result file (COCO JSON, JSON Lines or Parquet) in, an LVIS evaluation out; the
    store is kept at ``store``, else held in memory (``in_memory``; by default when the run has at most
    :data:`IN_MEMORY_DETECTIONS` detections and is matched by threads) or made in a temporary folder, for as long as
    the evaluation lives; held in memory, in shards of :data:`IN_MEMORY_RESULTS_PER_SHARD` results unless
    ``n_shards`` is given, and of the results lvis-api evaluates only (the others are dropped once the run is read,
    before it is sharded: :class:`~evalengine.match.lvis.EvaluatedResults`). Masks are read only for
    ``iou_type="segm"`` or a store to keep."""
    phases = phases or Phases()
    protocol = protocol or LvisProtocol()
    threading.Thread(target=warm_up, daemon=True).start()
    if in_memory is None:
        in_memory = (schedule.get("scheduler", "threads") in ("threads", "sync") and schedule.get("address") is None
                     and (not is_path(dt) or estimate_rows(dt) <= IN_MEMORY_DETECTIONS))
    folder = _TemporaryFolder() if store is None and not in_memory else None
    if n_shards is None and store is None and in_memory and is_path(dt):
        n_shards = default_shard_count(estimate_rows(dt), IN_MEMORY_RESULTS_PER_SHARD)
    select = None
    if store is None and in_memory:
        def select(dataset):
            return EvaluatedResults(dataset.images, dataset.categories, dataset.gt, protocol.max_dets[0])
    with phases.phase("ingest", total=count_rows(dt) if is_path(dt) else None, unit="detections") as advance:
        opened = ingest_lvis(gt, dt, folder.path / "store" if folder is not None else store, n_shards=n_shards,
                             progress=advance, masks=store is not None or protocol.iou_type == "segm",
                             select_results=select)
    return evaluate_store_lvis(opened, protocol, phases=phases, keep_alive=() if folder is None else (folder,),
                               **schedule)
