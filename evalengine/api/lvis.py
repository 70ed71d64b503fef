"""The LVIS front door: an LVIS ground truth (COCO-shaped, with the images' ``neg_category_ids`` and
``not_exhaustive_category_ids`` and the categories' ``frequency``, kept as columns of the images and categories
tables at ingest) and a detection run, evaluated as lvis-api's ``LVISEval``."""

import threading

from evalengine.api import DEFAULT_RUN, Phases, Store, _TemporaryFolder, count_rows, ingest_coco
from evalengine.evaluation.lvis import LvisEvaluation, lvis_output, lvis_payload
from evalengine.match.groups import warm_up
from evalengine.match.lvis import LvisProtocol, check_lvis_labels

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
                        phases: Phases | None = None, **schedule) -> LvisEvaluation:
    """Match (or reuse the match table of) a stored run under the LVIS protocol and accumulate it."""
    phases = phases or Phases()
    protocol = protocol or LvisProtocol()
    with phases.phase("match", total=store.layout.n_shards, unit="shards") as advance:
        evaluation = LvisEvaluation(store.layout, run, protocol, store.match(protocol, run, on_shard_done=advance,
                                                                             **schedule))
    with phases.phase("accumulate", total=len(evaluation.category_ids), unit="categories") as advance:
        evaluation.accumulate(on_batch_done=advance)
    return evaluation


def evaluate_lvis(gt, dt, protocol: LvisProtocol | None = None, store=None, n_shards: int | None = None,
                  phases: Phases | None = None, **schedule) -> LvisEvaluation:
    """An LVIS ground-truth file and a result file (COCO JSON, JSON Lines or Parquet) in, an LVIS evaluation out; the
    store is kept at ``store`` or made in a temporary folder that lives as long as the evaluation."""
    phases = phases or Phases()
    threading.Thread(target=warm_up, daemon=True).start()
    folder = _TemporaryFolder() if store is None else None
    with phases.phase("ingest", total=count_rows(dt), unit="detections") as advance:
        opened = ingest_lvis(gt, dt, store if folder is None else folder.path / "store", n_shards=n_shards,
                             progress=advance)
    evaluation = evaluate_store_lvis(opened, protocol, phases=phases, **schedule)
    if folder is not None:
        evaluation.keep_alive.append(folder)
    return evaluation
