"""The formats users have (YOLO txt, CVAT XML, LabelMe JSON, OpenImages CSV, VOC, COCO: :mod:`evalengine.io.formats`)
into a store that any protocol evaluates, and a matched run out again, per object (:mod:`evalengine.evaluation.export`)."""

import threading
from pathlib import Path

import polars as pl

from evalengine import schema
from evalengine.api import DEFAULT_RUN, CocoProtocol, Phases, Store, _TemporaryFolder, evaluate_store, open
from evalengine.api import count_rows as api_count_rows
from evalengine.engine.memory import keep_freed_memory
from evalengine.errors import InputError
from evalengine.evaluation.export import EXPORT_FORMATS, exported
from evalengine.evaluation.run import MatchedRun
from evalengine.io import formats
from evalengine.io.coco import CocoDataset
from evalengine.io.formats import DT_FORMATS, GT_FORMATS, NORMALISED
from evalengine.match.groups import warm_up
from evalengine.match.voc import VocProtocol
from evalengine.store.build import add_run, create_store, replaced_store
from evalengine.store.commit import replace_file
from evalengine.store.location import location
from evalengine.store.paths import check_name
from evalengine.store.sharding import default_shard_count
from evalengine.store.tags import check_tags

__all__ = ["DT_FORMATS", "EXPORT_FORMATS", "GT_FORMATS", "add_run_formats", "count_rows", "evaluate_formats", "export",
           "ingest_formats", "input_formats"]


def input_formats(gt, dt, gt_format: str | None = None, dt_format: str | None = None) -> tuple:
    """``(ground-truth format, detection format)`` of the paths: the given ones, else as recognised
    (:func:`evalengine.io.formats.gt_format`, :func:`~evalengine.io.formats.dt_format`)."""
    return formats.gt_format(gt, gt_format), formats.dt_format(dt, dt_format)


def ingest_formats(gt, dt, store, gt_format: str | None = None, dt_format: str | None = None, images=None,
                   names=None, n_shards: int | None = None, run: str = DEFAULT_RUN, overwrite: bool = False,
                   progress=None, tags: dict | None = None) -> Store:
    """A new store from ground truth and detections in any format of :mod:`evalengine.io.formats` (recognised from
    the paths unless named). ``images``: the image sizes of a normalised format (a folder of images or a table
    ``image, width, height``); ``names``: YOLO's ``data.yaml`` or ``classes.txt``."""
    keep_freed_memory()
    check_name("run", run)
    check_tags(tags or {})
    replaced_store(location(store), overwrite, [p for p in (gt, dt, images, names) if p is not None])
    gt_kind, dt_kind = input_formats(gt, dt, gt_format, dt_format)
    if images is not None and gt_kind not in NORMALISED and dt_kind not in NORMALISED:
        raise InputError(f"{images}: image sizes are read for YOLO and OpenImages inputs only (the inputs are "
                         f"{gt_kind} and {dt_kind})")
    if names is not None and gt_kind != "yolo":
        raise InputError(f"{names}: class names are read for a YOLO ground truth only (the ground truth is {gt_kind})")
    dataset = formats.read_gt(gt, gt_kind, images, names)
    shards = n_shards or default_shard_count(max(formats.estimate_dt_rows(dt, dt_kind), dataset.gt.height))
    detections = formats.iter_dt(dt, dataset, dt_kind)
    layout = create_store(store, dataset.images, dataset.categories, dataset.gt, {run: detections},
                          n_shards=shards, provenance={"gt": f"{gt} ({gt_kind})", run: f"{dt} ({dt_kind})"},
                          overwrite=overwrite, progress=progress, tags={run: tags or {}})
    return Store(layout)


def count_rows(dt, dt_format: str | None = None) -> int | None:
    """The detections a file says it holds without being read (:func:`evalengine.api.count_rows` of a COCO-format
    file), else None."""
    return api_count_rows(dt) if formats.dt_format(dt, dt_format) == "coco" else None


def add_run_formats(store, dt, run: str, dt_format: str | None = None, overwrite: bool = False, progress=None,
                    tags: dict | None = None) -> Store:
    """:meth:`Store.add_run` for detections in any format of :mod:`evalengine.io.formats` (a YOLO predictions folder,
    an OpenImages CSV, devkit result files, or a COCO result file), named by ``dt_format`` or recognised."""
    opened = store if isinstance(store, Store) else open(store)
    kind = formats.dt_format(dt, dt_format)
    if kind == "coco":
        return opened.add_run(dt, run, overwrite=overwrite, progress=progress, tags=tags)
    check_name("run", run)
    dataset = CocoDataset(images=opened.images().collect(), categories=opened.categories().collect(),
                          gt=pl.DataFrame(schema=schema.GT))
    return Store(add_run(opened.layout, run, formats.iter_dt(dt, dataset, kind), provenance={run: f"{dt} ({kind})"},
                         overwrite=overwrite, progress=progress, tags=tags))


def evaluate_formats(gt, dt, protocol=None, gt_format: str | None = None, dt_format: str | None = None, images=None,
                     names=None, metric: str = "voc12", store=None, n_shards: int | None = None,
                     phases: Phases | None = None, **schedule):
    """Files of any format in (:func:`ingest_formats`), an evaluation out: COCO's (``protocol`` a
    :class:`CocoProtocol` or None) or VOC's (a :class:`VocProtocol`, with ``metric``); the store is kept at ``store``
    or made in a temporary folder that lives as long as the evaluation."""
    phases = phases or Phases()
    threading.Thread(target=warm_up, daemon=True).start()
    folder = _TemporaryFolder() if store is None else None
    with phases.phase("ingest", unit="detections") as advance:
        opened = ingest_formats(gt, dt, store if folder is None else folder.path / "store", gt_format, dt_format,
                                images, names, n_shards=n_shards, progress=advance)
    if isinstance(protocol, VocProtocol):
        from evalengine.api.voc import evaluate_store_voc  # loaded for VOC only (the coco command's start: ~0.02 s)

        evaluation = evaluate_store_voc(opened, protocol, metric=metric, phases=phases, **schedule)
    else:
        evaluation = evaluate_store(opened, protocol, phases=phases, **schedule)
    if folder is not None:
        evaluation.keep_alive.append(folder)
    return evaluation


def export(store, out, fmt: str = "coco-results", run: str = DEFAULT_RUN, iou_threshold: float = 0.5,
           max_dets: int | None = None, protocol=None, **schedule) -> Path:
    """Write a run's match table (``protocol``: a COCO (default), VOC or LVIS protocol) per object
    (:mod:`evalengine.evaluation.export`: ``coco-results`` or ``fiftyone``) to ``out`` (``.parquet``, ``.jsonl``, or ``.json``: one JSON list), matching the run first if it has
    no table yet; the file appears whole or not at all. Returns ``out``."""
    out = Path(out)
    suffix = out.suffix.lower()
    if suffix not in (".parquet", ".jsonl", ".json"):
        raise InputError(f"{out}: the export is written as .parquet, .jsonl or .json, not '{suffix}'")
    opened = store if isinstance(store, Store) else open(store)
    protocol = protocol or CocoProtocol()
    rows = exported(MatchedRun(opened.layout, run, protocol, opened.match(protocol, run, **schedule)), fmt,
                    iou_threshold, max_dets)
    if suffix == ".parquet":
        replace_file(out, rows.sink_parquet)
    elif suffix == ".jsonl":
        replace_file(out, rows.sink_ndjson)
    else:
        replace_file(out, rows.collect().write_json)
    return out
