"""The running counts of pycocotools' precision-recall curve (``accumulate``'s ``tp_sum`` / ``fp_sum``), kept beside a
COCO match table so that the ``pr_curve`` view reads them instead of ranking every detection in SQL
(``sql/30_pr_curve.sql``).

Per category (one pool with ``use_cats`` off), detections in pycocotools' order (score descending, image id, rank in
image); per area range and cap, one row per detection with ``dt_rank < max_dets`` that is not ignored at every IoU
threshold, of a category with regular ground truth there (``npig > 0``): ``n_kept``, these rows up to it, and
``n_steps``, the steps up to it. A step is a row that is a true positive or ignored at some threshold; the others are
false positives at every threshold, so a curve changes otherwise only by one false positive a row. A step also holds
``tp[t]`` and ``fp[t]``, the true positives and counted false positives up to it at each threshold (``np.cumsum`` of
``tps`` / ``fps``; a row ignored at ``t`` counts in neither); any row's counts are its last step's, with
``n_kept - n_kept(step)`` more false positives. Steps are few (6 % of the rows on a COCO-shaped set), so the lists are
small. Categories are read in batches, so memory is bounded by a batch."""

import numpy as np
import polars as pl

from evalengine.metrics.ap import batch_frames, category_batches
from evalengine.store.location import is_remote, location

BATCH_ROWS = 200_000  # detections of a batch of categories: about 200 bytes a kept row of a piece in memory

COLUMNS = {"category_id": pl.Int64, "area_index": pl.Int32, "max_dets": pl.Int64, "score": pl.Float64,
           "image_id": pl.Int64, "dt_rank": pl.Int64, "tp_bits": pl.UInt64, "ignored_bits": pl.UInt64,
           "n_gt": pl.Int64, "n_kept": pl.Int64, "n_steps": pl.Int64}


def _segment_cumsum(values: np.ndarray, starts: np.ndarray) -> np.ndarray:
    """Running sums of ``values`` (rows, or rows × thresholds) restarting at each row of ``starts`` (a boolean per
    row)."""
    total = np.cumsum(values, axis=0, dtype=np.int64)
    before = np.concatenate([np.zeros((1, *values.shape[1:]), np.int64), total[:-1]])
    first = np.maximum.accumulate(np.where(starts, np.arange(starts.shape[0]), 0))
    return total - before[first]


def _starts(category: np.ndarray) -> np.ndarray:
    """True at each row whose category differs from the row before (rows sorted by category)."""
    return np.concatenate([[True], category[1:] != category[:-1]]) if category.size else np.zeros(0, bool)


def _regular_gt(gt: pl.DataFrame, category: np.ndarray, n_areas: int) -> np.ndarray:
    """npig, the ground truths not ignored in each area range, of each row's category (rows × area ranges)."""
    keys, inverse = np.unique(gt.get_column("category_id").to_numpy(), return_inverse=True)
    bits = gt.get_column("ignored_bits").to_numpy().astype(np.uint64)
    table = np.zeros((keys.shape[0] + 1, n_areas), np.int64)  # the last row: a category without ground truth
    for a in range(n_areas):
        table[:-1, a] = np.bincount(inverse, weights=(bits >> np.uint64(a)) & np.uint64(1) == 0,
                                    minlength=keys.shape[0])
    at = np.searchsorted(keys, category)
    found = at < keys.shape[0]
    found[found] = keys[at[found]] == category[found]
    return table[np.where(found, at, keys.shape[0])]


def _schema(protocol) -> dict:
    lists = pl.Array(pl.Int64, len(protocol.iou_thresholds))
    return {**COLUMNS, "tp": lists, "fp": lists}


def _pieces(dt: pl.DataFrame, gt: pl.DataFrame, protocol):
    """The rows of one batch of categories (``dt``: the match table's rows of these categories; ``gt``: its ground
    truths, of these categories or more; with ``use_cats`` off, every row), one frame per (area range, cap) that keeps
    some, each cast to the declared schema (one Parquet schema for the file, whatever dtypes the match table's columns
    have)."""
    n_thresholds, n_areas = len(protocol.iou_thresholds), len(protocol.area_ranges)
    schema = _schema(protocol)
    if not protocol.use_cats:
        dt, gt = dt.with_columns(category_id=pl.lit(-1, pl.Int64)), gt.with_columns(category_id=pl.lit(-1, pl.Int64))
    dt = dt.sort(["category_id", "score", "image_id", "dt_rank"], descending=[False, True, False, False])
    category = dt.get_column("category_id").to_numpy()
    regular = _regular_gt(gt, category, n_areas)
    rank = dt.get_column("dt_rank").to_numpy()
    tp_all = dt.get_column("tp_bits").to_numpy().reshape(-1, n_areas)
    ignored_all = dt.get_column("ignored_bits").to_numpy().reshape(-1, n_areas)
    shifts, every = np.arange(n_thresholds, dtype=np.uint64), np.uint64(2**n_thresholds - 1)
    for a in range(n_areas):
        counted_somewhere = ignored_all[:, a] & every != every
        for max_dets in protocol.max_dets:
            kept = np.flatnonzero((rank < max_dets) & counted_somewhere & (regular[:, a] > 0))
            if not kept.size:
                continue
            tp_bits, ignored_bits = tp_all[kept, a], ignored_all[kept, a]
            starts = _starts(category[kept])
            n_kept = _segment_cumsum(np.ones(kept.size, np.int64), starts)
            is_step = (tp_bits | ignored_bits) != 0
            n_steps = _segment_cumsum(is_step, starts)
            step = np.flatnonzero(is_step)
            is_tp = (tp_bits[step, None] >> shifts) & 1 == 1
            ignored = (ignored_bits[step, None] >> shifts) & 1 == 1
            step_starts = _starts(category[kept][step])
            tp = _segment_cumsum(is_tp & ~ignored, step_starts)
            fp = n_kept[step, None] - _segment_cumsum(ignored, step_starts) - tp
            tp_rows, fp_rows = np.zeros((kept.size, n_thresholds), np.int64), np.zeros((kept.size, n_thresholds), np.int64)
            tp_rows[step], fp_rows[step] = tp, fp
            yield dt[kept].select(
                "category_id", pl.lit(a, pl.Int32).alias("area_index"), pl.lit(max_dets, pl.Int64).alias("max_dets"),
                "score", "image_id", "dt_rank", pl.col("tp_bits").arr.get(a).alias("tp_bits"),
                pl.col("ignored_bits").arr.get(a).alias("ignored_bits")).with_columns(
                pl.Series("n_gt", regular[kept, a]), pl.Series("n_kept", n_kept), pl.Series("n_steps", n_steps),
                pl.Series("is_step", is_step), pl.Series("tp", tp_rows), pl.Series("fp", fp_rows)).with_columns(
                [pl.when("is_step").then(name).alias(name) for name in ("tp", "fp")]).drop("is_step").cast(schema)


def write_curve_counts(path: str, dt: pl.LazyFrame, gt: pl.LazyFrame, protocol, category_ids: list) -> None:
    """Write the rows of every category to ``path`` (Parquet; a folder or an object store's URL): the match table
    read once and split in batches of at most :data:`BATCH_ROWS` detections (whole categories,
    :func:`~evalengine.metrics.ap.batch_frames`), each (area range, cap) of a batch written as it is made."""
    import pyarrow.parquet as pq

    columns = ["category_id", "image_id", "dt_rank", "score", "tp_bits", "ignored_bits"]
    truths = gt.select("category_id", "ignored_bits").collect()
    if protocol.use_cats and len(category_ids):
        category_ids = np.asarray(category_ids, dtype=np.int64)
        batches = category_batches(dt, category_ids, BATCH_ROWS)
        frames = batch_frames(dt, columns, category_ids, batches)
    else:
        frames = [dt.select(columns).collect()]
    target = location(path)
    with (target.fs.open_output_stream(target.key) if is_remote(target) else open(target, "wb")) as sink:
        with pq.ParquetWriter(sink, pl.DataFrame(schema=_schema(protocol)).to_arrow().schema) as writer:
            for frame in frames:
                for piece in _pieces(frame, truths, protocol):
                    writer.write_table(piece.to_arrow())
