"""The partition match table (spec §9.2–9.3): per (image, parameter, annotator) the sparse contingency table
``n_ij = |R_i ∩ R'_j|`` between a machine partition and one ground-truth annotator, over the valid pixels.

SEISM builds it as a dense ``intersection_matrix`` of relabelled partitions; here both partitions are column-major
label runs (:mod:`evalengine.io.partitions`) merged interval by interval, and only non-zero cells are kept. Region
ids are SEISM's (first appearance in a row-major scan), so every measure reads its region order from the cells.

Each cell also carries Fop's candidate flags of its two regions (SEISM ``fop.hpp``, spec §4.4.3): the 99 % area
cut follows a running sum of doubles in a tie order, which a query cannot promise, so it is decided here and the
Fop query (``sql/91_partition_measures.sql``, :mod:`evalengine.metrics.partition.objects`) reads the flags.
"""

from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError
from evalengine.match.partition_matching import pair_matched
from evalengine.match.protocol import Protocol, column_array
from evalengine.store.partitions import check_partition_run
from evalengine.store.paths import shard_file

PAIR = ["image_id", "parameter", "annotator"]  # one contingency table: a partition against one annotator
DENSE_CELLS = 1 << 16  # a pair with at most this many (region, region) cells is accumulated densely, else sorted


@dataclass(frozen=True)
class PartitionRunProtocol(Protocol):
    """A protocol over a stored partition run: each shard task reads the run's and the ground truth's runs."""

    def shard_inputs(self, layout, run: str) -> tuple:
        check_partition_run(layout, run)
        return [{"gt": shard_file(layout.paths.gt_partitions, k), "seg": shard_file(layout.paths.partitions(run), k)}
                for k in range(layout.n_shards)], {}


@dataclass(frozen=True)
class PartitionProtocol(PartitionRunProtocol):
    """The contingency tables of a partition run against the store's ground truth (void pixels are the store's,
    every measure is a query over the cells), with Fop's candidate flags at ``area_percentile`` (SEISM: 0.99)."""

    name: ClassVar[str] = "partitions"
    sides: ClassVar[tuple] = ("contingency", "pairs")
    table_version: ClassVar[int] = 3  # 2: the per-pair side (bgm_distance); 3: Fop's candidate flags
    area_percentile: float = 0.99

    def __post_init__(self):
        if not 0 < self.area_percentile <= 1:
            raise ProtocolError(f"fop area_percentile must be in (0, 1], got {self.area_percentile!r}")

    def match_shard(self, tables: dict, context: dict) -> dict:
        cells = contingency(tables["seg"], tables["gt"], area_percentile=self.area_percentile)
        return {"contingency": cells, "pairs": bgm_distances(cells)}


def contingency(seg: pl.DataFrame, gt: pl.DataFrame, dense_cells: int = DENSE_CELLS,
                area_percentile: float = 0.99) -> pl.DataFrame:
    """The non-zero cells (``schema.CONTINGENCY``) of every machine partition of ``seg`` against every annotator of
    its image in ``gt`` (both run tables of one shard), with Fop's candidate flags at ``area_percentile``; a pair
    of at most ``dense_cells`` region pairs is accumulated in a dense table, a larger one by sorting its pieces."""
    seg = _sorted(seg, ["image_id", "parameter", "start"])
    gt = _sorted(gt, ["image_id", "annotator", "start"])
    seg_groups = group_bounds(seg, ["image_id", "parameter"])
    gt_groups = group_bounds(gt, ["image_id", "annotator"])
    cells = _cells(column_array(seg, "image_id"), column_array(seg, "start"), column_array(seg, "length"),
                   column_array(seg, "label", "int32"), seg_groups,
                   column_array(gt, "image_id"), column_array(gt, "start"), column_array(gt, "length"),
                   column_array(gt, "label", "int32"), gt_groups, dense_cells)
    seg_row, annotator_row, seg_region, gt_region, n = cells
    seg_candidate, gt_candidate = _candidate_flags(seg_row, annotator_row, seg_region, gt_region, n, area_percentile)
    return pl.DataFrame({
        "image_id": column_array(seg, "image_id")[seg_row],
        "parameter": column_array(seg, "parameter", "float64")[seg_row],
        "annotator": column_array(gt, "annotator", "int32")[annotator_row],
        "seg_region": seg_region, "gt_region": gt_region, "n": n,
        "seg_candidate": seg_candidate, "gt_candidate": gt_candidate,
    }, schema=schema.CONTINGENCY)


def bgm_distances(cells: pl.DataFrame) -> pl.DataFrame:
    """Per pair of ``cells`` (``schema.CONTINGENCY``) its ``bgm_distance`` (``schema.PARTITION_PAIRS``; spec §4.1.4,
    :mod:`evalengine.match.partition_matching`)."""
    cells = _sorted(cells, [*PAIR, "seg_region", "gt_region"])
    bounds = group_bounds(cells, PAIR)
    matched, total = pair_matched(column_array(cells, "seg_region", "int32"), column_array(cells, "gt_region", "int32"),
                                  column_array(cells, "n"), bounds)
    return cells[bounds[:-1]].select(*PAIR).with_columns(bgm_distance=pl.Series(total - matched)).cast(
        schema.PARTITION_PAIRS)


def _sorted(frame: pl.DataFrame, keys: list) -> pl.DataFrame:
    """``frame`` in ``keys`` order; the store writes runs in that order, which a linear check confirms."""
    greater = np.zeros(max(frame.height - 1, 0), np.bool_)  # row i + 1 after row i, decided by a key so far
    tied = np.ones_like(greater)
    for key in keys:
        values = frame.get_column(key).to_numpy()
        greater |= tied & (values[1:] > values[:-1])
        tied &= values[1:] == values[:-1]
    return frame if greater.all() else frame.sort(keys)


def group_bounds(frame: pl.DataFrame, keys: list) -> np.ndarray:
    """Row offsets where the value of ``keys`` changes (first row of each group, then the row count)."""
    if frame.height == 0:
        return np.zeros(1, np.int64)
    change = np.zeros(frame.height, np.bool_)
    change[0] = True
    for key in keys:
        values = frame.get_column(key).to_numpy()
        change[1:] |= values[1:] != values[:-1]
    return np.append(np.flatnonzero(change), frame.height).astype(np.int64)


@numba.njit(cache=True, nogil=True)
def _cells(seg_image, seg_start, seg_len, seg_label, seg_groups, gt_image, gt_start, gt_len, gt_label, gt_groups,
           dense_cells):
    """Merge each machine partition's runs with each annotator's runs of its image; aggregate equal cells."""
    n_seg, n_gt = seg_groups.size - 1, gt_groups.size - 1
    # gt groups of each seg group (both sorted by image)
    first_gt = np.empty(n_seg, np.int64)
    last_gt = np.empty(n_seg, np.int64)
    g = 0
    for s in range(n_seg):
        image = seg_image[seg_groups[s]]
        while g < n_gt and gt_image[gt_groups[g]] < image:
            g += 1
        end = g
        while end < n_gt and gt_image[gt_groups[end]] == image:
            end += 1
        first_gt[s], last_gt[s] = g, end
    # the cells are far fewer than the run pieces: outputs grow by doubling, memory follows the cells
    capacity = 1024
    out_seg_row = np.empty(capacity, np.int64)
    out_gt_row = np.empty(capacity, np.int64)
    out_i = np.empty(capacity, np.int32)
    out_j = np.empty(capacity, np.int32)
    out_n = np.empty(capacity, np.int64)
    count = 0
    piece_i = np.empty(0, np.int32)
    piece_j = np.empty(0, np.int32)
    piece_n = np.empty(0, np.int64)
    for s in range(n_seg):
        s0, s1 = seg_groups[s], seg_groups[s + 1]
        n_rows = 0
        for r in range(s0, s1):
            n_rows = max(n_rows, seg_label[r] + 1)
        for a in range(first_gt[s], last_gt[s]):
            g0, g1 = gt_groups[a], gt_groups[a + 1]
            size = (s1 - s0) + (g1 - g0)
            if piece_i.size < size:
                piece_i = np.empty(size, np.int32)
                piece_j = np.empty(size, np.int32)
                piece_n = np.empty(size, np.int64)
            m = 0
            n_cols = 0
            i, j = s0, g0
            while i < s1 and j < g1:
                end_i, end_j = seg_start[i] + seg_len[i], gt_start[j] + gt_len[j]
                overlap = min(end_i, end_j) - max(seg_start[i], gt_start[j])
                if gt_label[j] >= 0 and overlap > 0:
                    piece_i[m], piece_j[m], piece_n[m] = seg_label[i], gt_label[j], overlap
                    n_cols = max(n_cols, gt_label[j] + 1)
                    m += 1
                if end_i <= end_j:
                    i += 1
                if end_j <= end_i:
                    j += 1
            if count + m > capacity:  # a pair adds at most m cells
                capacity = max(2 * capacity, count + m)
                out_seg_row = _grown(out_seg_row, count, capacity)
                out_gt_row = _grown(out_gt_row, count, capacity)
                out_i = _grown(out_i, count, capacity)
                out_j = _grown(out_j, count, capacity)
                out_n = _grown(out_n, count, capacity)
            if n_rows * n_cols <= dense_cells:
                dense = np.zeros(n_rows * n_cols, np.int64)
                for p in range(m):
                    dense[piece_i[p] * n_cols + piece_j[p]] += piece_n[p]
                for key in range(n_rows * n_cols):
                    if dense[key]:
                        out_seg_row[count], out_gt_row[count] = s0, g0
                        out_i[count], out_j[count], out_n[count] = key // n_cols, key % n_cols, dense[key]
                        count += 1
            else:
                keys = piece_i[:m].astype(np.int64) * n_cols + piece_j[:m]
                order = np.argsort(keys)
                p = 0
                while p < m:
                    key = keys[order[p]]
                    total = 0
                    while p < m and keys[order[p]] == key:
                        total += piece_n[order[p]]
                        p += 1
                    out_seg_row[count], out_gt_row[count] = s0, g0
                    out_i[count], out_j[count], out_n[count] = key // n_cols, key % n_cols, total
                    count += 1
    return out_seg_row[:count], out_gt_row[:count], out_i[:count], out_j[:count], out_n[:count]


@numba.njit(cache=True, nogil=True)
def _grown(array, used, capacity):
    """``array``'s first ``used`` values in a new array of ``capacity``."""
    grown = np.empty(capacity, array.dtype)
    grown[:used] = array[:used]
    return grown


@numba.njit(cache=True, nogil=True)
def _candidate_flags(seg_row, gt_row, seg_region, gt_region, n, area_percentile):
    """Per cell, whether its machine and its annotator region are Fop candidates (:func:`fop_candidates`); the cells
    come a partition (``seg_row``) at a time, an annotator (``gt_row``) at a time within it; the machine regions'
    areas and the image's valid pixels are the first annotator's table's (every annotator has the same)."""
    m = n.size
    seg_flag = np.zeros(m, np.bool_)
    gt_flag = np.zeros(m, np.bool_)
    lo = 0
    while lo < m:
        hi, first_end, n_seg = lo, lo, 0
        while hi < m and seg_row[hi] == seg_row[lo]:
            n_seg = max(n_seg, seg_region[hi] + 1)
            hi += 1
        while first_end < hi and gt_row[first_end] == gt_row[lo]:
            first_end += 1
        seg_area = np.zeros(n_seg, np.int64)
        for c in range(lo, first_end):
            seg_area[seg_region[c]] += n[c]
        image_area = seg_area.sum()
        seg_candidate = fop_candidates(seg_area, image_area, area_percentile)
        for c in range(lo, hi):
            seg_flag[c] = seg_candidate[seg_region[c]]
        start = lo
        while start < hi:
            end, n_gt = start, 0
            while end < hi and gt_row[end] == gt_row[start]:
                n_gt = max(n_gt, gt_region[end] + 1)
                end += 1
            gt_area = np.zeros(n_gt, np.int64)
            for c in range(start, end):
                gt_area[gt_region[c]] += n[c]
            gt_candidate = fop_candidates(gt_area, image_area, area_percentile)
            for c in range(start, end):
                gt_flag[c] = gt_candidate[gt_region[c]]
            start = end
        lo = hi
    return seg_flag, gt_flag


@numba.njit(cache=True, nogil=True)
def fop_candidates(area, image_area, area_percentile):
    """SEISM ``fop.hpp``'s candidates of one partition: regions by decreasing area (ties: higher index first, the
    C++ multimap's reverse order) while the area fraction summed before them (a running sum of doubles) is below
    ``area_percentile``; regions of no valid pixel are never candidates."""
    n_regions = area.size
    key = area * n_regions + np.arange(n_regions)  # area, then index, both descending
    order = np.argsort(-key)
    candidate = np.zeros(n_regions, np.bool_)
    cumulative = 0.0
    for r in order:
        if area[r] == 0:
            continue
        candidate[r] = cumulative < area_percentile
        cumulative += area[r] / image_area
    return candidate
