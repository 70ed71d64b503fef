"""The partition match table: run merging gives SEISM's intersection matrix (regions by first appearance in a
row-major scan), in any row order of the stored runs, dense or sorted accumulation alike."""

import numpy as np
import polars as pl
import pytest

from evalengine import schema
from evalengine.io.partitions import encode_partition, image_runs, runs_frame
from evalengine.match.partitions import DENSE_CELLS, contingency
from tests.metrics.seism_reference import relabel


@pytest.mark.parametrize("dense_cells", [DENSE_CELLS, 0])
def test_cells_equal_the_intersection_matrix(dense_cells):
    rng = np.random.default_rng(1)
    images = [image_runs(image_id, "x", rng.integers(0, 4, (2, h, w)) * 5 - 3,
                         {"seg": {0.5: rng.integers(0, 300, (h, w)), 0.1: rng.integers(0, 2, (h, w))}})
              for image_id, (h, w) in enumerate([(1, 1), (7, 3), (13, 11)], 1)]
    frames = [(row, runs_frame([gt], schema.GT_PARTITIONS), {"seg": runs_frame([runs["seg"]], schema.SEG_PARTITIONS)})
              for row, gt, runs in images]
    gt = pl.concat([f[1] for f in frames])
    seg = pl.concat([f[2]["seg"] for f in frames])
    shuffled = contingency(seg.sample(fraction=1.0, shuffle=True, seed=2),
                           gt.sample(fraction=1.0, shuffle=True, seed=3), dense_cells)
    cells = contingency(seg, gt, dense_cells)
    assert shuffled.equals(cells)
    for image_id, (_, gt_frame, runs) in enumerate(frames, 1):
        for parameter in (0.1, 0.5):
            for annotator in (1, 2):
                got = cells.filter((pl.col("image_id") == image_id) & (pl.col("parameter") == parameter)
                                   & (pl.col("annotator") == annotator)).select("seg_region", "gt_region", "n")
                seg_map = _decode(runs["seg"].filter(pl.col("parameter") == parameter), gt_frame, image_id)
                gt_map = _decode(gt_frame.filter(pl.col("annotator") == annotator), gt_frame, image_id)
                matrix = np.zeros((seg_map.max() + 1, gt_map.max() + 1), np.int64)
                np.add.at(matrix, (seg_map.ravel(), gt_map.ravel()), 1)
                i, j = np.nonzero(matrix)
                assert got.to_numpy().tolist() == np.c_[i, j, matrix[i, j]].tolist()


def _decode(runs: pl.DataFrame, gt_frame, image_id) -> np.ndarray:
    """A label map back from its column-major runs (the store's form), checked to be in SEISM's region order."""
    size = int(runs["length"].sum())
    flat = np.repeat(runs["label"].to_numpy(), runs["length"].to_numpy())
    height = {1: 1, 2: 7, 3: 13}[image_id]
    label_map = flat.reshape(size // height, height).T
    assert (relabel(label_map) == label_map).all()
    return label_map


def test_encoding_round_trips_with_void():
    label_map = np.array([[5, 5, 9], [9, 7, 5]])
    void = np.array([[False, True, False], [False, False, False]])
    start, length, label, n_regions = encode_partition(label_map, void)
    assert n_regions == 3  # 5, 9, 7 in row-major first appearance; the void pixel is not a region
    assert start.tolist() == [0, 1, 2, 3, 4, 5] and length.tolist() == [1] * 6
    assert label.tolist() == [0, 1, -1, 2, 1, 0]  # column-major: (0,0) (1,0) (0,1) (1,1) (0,2) (1,2)
