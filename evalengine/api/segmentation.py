"""The segmentation front door: partition stores from label-map folders or arrays, their evaluation with SEISM's
measures, and the one-shot ``evalengine segmentation --pred DIR --gt DIR``."""

import itertools
import math
import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import polars as pl

from evalengine.errors import InputError
from evalengine.evaluation.segmentation import SegmentationEvaluation
from evalengine.io.partitions import (LABEL_MAP_SUFFIXES, check_same_size, ground_truth_files, image_runs,
                                      read_ground_truth, read_label_map)
from evalengine.io.quadtree import QUADTREE_REGIONS, quadtree_partition
from evalengine.match.partition_boundaries import PartitionBoundaryProtocol
from evalengine.metrics.partition.combine import PR_MEASURES, check_measures
from evalengine.metrics.partition.dataset import ods
from evalengine.metrics.partition.objects import ObjectsAndParts
from evalengine.store.partitions import create_partition_store, partition_runs
from evalengine.store.sharding import default_shard_count

SEGMENTATION_RUN = "segmentation"
QUADTREE_RUN = "quadtree"
ENCODE_CHUNK = 32  # images encoded at once: memory bounded by the chunk


def ingest_partition_arrays(images, store, runs: dict, void_label=None, n_shards: int = 1, overwrite: bool = False,
                            provenance=None):
    """A partition store from arrays: ``images`` yields ``(stem, annotators (K, H, W), {run: {parameter: label
    map}}[, where the annotators came from])`` per image (image ids are 1-based positions); ``runs`` maps each run to its parameters. Images are
    checked in order and encoded on every core (the run-length kernel releases the GIL), a chunk at a time."""
    from evalengine.api import open as open_store

    def checked():
        for image_id, (stem, annotators, predictions, *where) in enumerate(images, 1):
            for run, by_parameter in predictions.items():
                if set(by_parameter) != set(runs[run]):
                    raise InputError(f"image '{stem}': run '{run}' has parameters {sorted(by_parameter)}, "
                                     f"the run has {sorted(runs[run])}")
                for parameter, label_map in by_parameter.items():
                    check_same_size(f"image '{stem}', run '{run}', parameter {parameter}", label_map,
                                    f"of image '{stem}'", annotators)
            yield image_id, stem, annotators, predictions, void_label, where[0] if where else f"image '{stem}'"

    def encoded():
        with ThreadPoolExecutor(os.cpu_count() or 1) as pool:
            inputs = checked()
            while chunk := list(itertools.islice(inputs, ENCODE_CHUNK)):
                yield from pool.map(lambda arguments: image_runs(*arguments), chunk)

    create_partition_store(store, encoded(), runs, n_shards, void_label, provenance, overwrite)
    return open_store(store)


def ingest_partitions(gt_dir, predictions: dict, store, void_label=None, n_shards: int | None = None,
                      overwrite: bool = False, quadtree: bool = False):
    """A partition store from folders: ``gt_dir`` (every annotator of each image) and ``predictions``, run → a
    folder of label maps (one parameter, 0) or of sub-folders named by parameter values (a sweep); ``quadtree`` adds
    the run ``quadtree``, SEISM's baseline at its parameters (the number of regions, 2 … 800)."""
    gt_dir = Path(gt_dir)
    stems = _ground_truth_stems(gt_dir)
    sweeps = {run: _sweep(Path(folder)) for run, folder in predictions.items()}
    for run, sweep in sweeps.items():
        for parameter, folder in sweep.items():
            files = _label_maps(folder)
            missing, extra = sorted(set(stems) - set(files)), sorted(set(files) - set(stems))
            if missing or extra:
                problem = (f"has no label map for image '{missing[0]}' of {gt_dir}" if missing
                           else f"has '{files[extra[0]].name}', an image {gt_dir} has no ground truth for")
                raise InputError(f"{folder}: {problem}")

    def images():
        for stem in stems:
            annotators, where = read_ground_truth(gt_dir, stem)
            by_run = {}
            for run, sweep in sweeps.items():
                by_run[run] = {}
                for parameter, folder in sweep.items():
                    path = _label_maps(folder)[stem]
                    label_map = read_label_map(path)
                    check_same_size(str(path), label_map, where, annotators)
                    by_run[run][parameter] = label_map
            if quadtree:
                by_run[QUADTREE_RUN] = {float(n): quadtree_partition(*annotators.shape[1:], n)
                                        for n in QUADTREE_REGIONS}
            yield stem, annotators, by_run, where

    n_shards = n_shards or default_shard_count(len(stems))
    provenance = {"gt": gt_dir, **{run: Path(folder) for run, folder in predictions.items()}}
    runs = {run: list(sweep) for run, sweep in sweeps.items()}
    if quadtree:
        if QUADTREE_RUN in runs:
            raise InputError(f"run name '{QUADTREE_RUN}' is the quadtree baseline's")
        runs[QUADTREE_RUN] = [float(n) for n in QUADTREE_REGIONS]
    return ingest_partition_arrays(images(), store, runs, void_label, n_shards, overwrite, provenance)


def _ground_truth_stems(gt_dir: Path) -> list:
    if not gt_dir.is_dir():
        raise InputError(f"{gt_dir}: not a folder of ground-truth label maps")
    stems = set()
    for path in gt_dir.iterdir():
        if path.suffix.lower() in (".npy", ".npz"):
            stems.add(path.stem)
        elif path.suffix.lower() == ".png":
            stem, _, k = path.stem.rpartition("_")
            if not (stem and k.isdigit()):
                raise InputError(f"{path}: a ground-truth PNG is named <stem>_<k>.png (annotator k = 1, 2, …)")
            stems.add(stem)
    if not stems:
        raise InputError(f"{gt_dir}: holds no ground truth (.npy, .npz or <stem>_<k>.png)")
    for stem in stems:
        ground_truth_files(gt_dir, stem)  # one kind of file per image
    return sorted(stems)


def _label_maps(folder: Path) -> dict:
    files = {}
    for path in sorted(folder.iterdir()):
        if path.is_file() and path.suffix.lower() in LABEL_MAP_SUFFIXES:
            if path.stem in files:
                raise InputError(f"{folder}: two label maps for image '{path.stem}' ({files[path.stem].name}, "
                                 f"{path.name})")
            files[path.stem] = path
    return files


def _sweep(folder: Path) -> dict:
    """``{parameter: folder}``: the folder itself (parameter 0) or its sub-folders named by numbers."""
    if not folder.is_dir():
        raise InputError(f"{folder}: not a folder of label maps")
    subfolders = [p for p in folder.iterdir() if p.is_dir()]
    if not subfolders:
        return {0.0: folder}
    sweep = {}
    for sub in subfolders:
        try:
            parameter = float(sub.name)
        except ValueError:
            raise InputError(f"{sub}: a parameter sweep's sub-folders are named by numbers (e.g. 0.25)") from None
        if not math.isfinite(parameter) or parameter in sweep:
            raise InputError(f"{sub}: parameter {sub.name} is not finite or repeats {sweep.get(parameter)}")
        sweep[parameter] = sub
    return dict(sorted(sweep.items()))


def evaluate_partitions(store, run: str | None = None, measures=None, objects: ObjectsAndParts = ObjectsAndParts(),
                        fb_grid: str = "pixel", fb_outliers: str = "bsds", **schedule) -> SegmentationEvaluation:
    """Match (or reuse) the contingency table (and for ``fb`` the boundary table, Fb's kernel on ``fb_grid`` with
    ``fb_outliers``: :func:`evalengine.geometry.boundary_pr.boundary_counts`) of a stored partition run and
    evaluate ``measures``."""
    boundary = PartitionBoundaryProtocol(grid=fb_grid, outliers=fb_outliers)
    layout = store.layout
    if run is None:
        runs = sorted(partition_runs(layout))
        run = runs[0] if len(runs) == 1 else SEGMENTATION_RUN
    return SegmentationEvaluation(layout, run, check_measures(measures), objects, schedule, boundary=boundary)


def segmentation(pred_dir, gt_dir, measures=None, void_label=None, objects: ObjectsAndParts = ObjectsAndParts(),
                 n_shards: int | None = None, fb_grid: str = "pixel", fb_outliers: str = "bsds",
                 **schedule) -> SegmentationEvaluation:
    """``evalengine segmentation``: ``pred_dir``'s label maps against ``gt_dir``'s, in a temporary store."""
    from evalengine.api import _TemporaryFolder

    measures = check_measures(measures)  # before any reading
    PartitionBoundaryProtocol(grid=fb_grid, outliers=fb_outliers)
    folder = _TemporaryFolder()
    store = ingest_partitions(gt_dir, {SEGMENTATION_RUN: pred_dir}, folder.path / "store", void_label, n_shards)
    evaluation = evaluate_partitions(store, SEGMENTATION_RUN, measures, objects, fb_grid, fb_outliers, **schedule)
    evaluation.keep_alive.append(folder)
    return evaluation


def values_at_ods(evaluation: SegmentationEvaluation, measure: str) -> pl.DataFrame:
    """``image_id``, ``value``: the per-image values of ``measure`` at the run's ODS parameter (the judgments of
    SABD and SISD, :mod:`evalengine.metrics.partition.meta`)."""
    best = ods(evaluation.dataset, measure)["parameter"]
    return evaluation.per_image.filter(pl.col("parameter") == best).select("image_id", value=measure)


def segmentation_payload(evaluation: SegmentationEvaluation, parameter: float | None = None) -> dict:
    """``{"dataset": {measure: value}, "per_image": {stem: {measure: value}}}`` at ``parameter`` (the run's only one
    by default), SEISM's names; ``fr``, ``fop``, ``fb`` as ``[F, P, R]``."""
    per_image, dataset = evaluation.per_image, evaluation.dataset
    parameters = dataset.get_column("parameter").to_list()
    if parameter is None:
        if len(parameters) != 1:
            raise InputError(f"run '{evaluation.run}' is a sweep of {len(parameters)} parameters: name one")
        parameter = parameters[0]
    at = dataset.filter(dataset["parameter"] == parameter).row(0, named=True)
    return {"dataset": _values(at, evaluation.measures),
            "per_image": {row["file_name"]: _values(row, evaluation.measures)
                          for row in per_image.filter(per_image["parameter"] == parameter).iter_rows(named=True)}}


def _values(row: dict, measures) -> dict:
    return {m: [row[m], row[f"{m}_precision"], row[f"{m}_recall"]] if m in PR_MEASURES else row[m] for m in measures}
