"""Mask IoU over run lengths is bit-for-bit pycocotools' ``maskUtils.iou`` (``rleIou``), crowd ground truths, empty
and full masks, masks touching the border and pairs of different sizes included."""

import numpy as np
from pycocotools import mask as mask_utils

from evalengine.geometry.masks import iou, mask_iou_blocks, spans
from evalengine.io import rasterise, rle


def _random_masks(rng, n, h, w):
    """Blobs (rectangles and random fills) of assorted sizes; some empty, full, 1-pixel or on the border."""
    masks = np.zeros((h, w, n), np.uint8)
    for i in range(n):
        kind = rng.integers(0, 8)
        if kind == 0:
            continue
        if kind == 1:
            masks[:, :, i] = 1
        elif kind == 2:
            masks[rng.integers(0, h), rng.integers(0, w), i] = 1
        else:
            y0, x0 = rng.integers(0, h), rng.integers(0, w)
            y1, x1 = rng.integers(y0, h) + 1, rng.integers(x0, w) + 1
            block = rng.random((y1 - y0, x1 - x0)) < (1.0 if kind < 5 else rng.uniform(0.3, 0.95))
            masks[y0:y1, x0:x1, i] = block
    return masks


def _layout(encoded, h, w):
    counts, offsets = rle.decode_strings([e["counts"] for e in encoded])
    n = len(encoded)
    return counts, offsets, np.full(n, h), np.full(n, w)


def test_iou_equals_pycocotools_with_crowd():
    rng = np.random.default_rng(7)
    for _ in range(150):
        h, w = {0: (1, 40), 1: (37, 1)}.get(rng.integers(0, 10), tuple(rng.integers(1, 60, 2)))
        m, n = rng.integers(0, 12), rng.integers(1, 9)
        dt = mask_utils.encode(np.asfortranarray(_random_masks(rng, m, h, w)))
        gt = mask_utils.encode(np.asfortranarray(_random_masks(rng, n, h, w)))
        crowd = (rng.random(n) < 0.3).astype(np.uint8)
        got = iou(_layout(dt, h, w), _layout(gt, h, w), crowd)
        want = mask_utils.iou(dt, gt, crowd.tolist())
        assert got.shape == (m, n)
        if m:
            np.testing.assert_array_equal(got, want)


def test_pairs_of_different_sizes_give_minus_one_where_boxes_overlap():
    full = mask_utils.encode(np.ones((4, 5, 1), np.uint8, order="F"))
    corner = np.zeros((6, 7, 2), np.uint8, order="F")
    corner[0, 0, 0] = 1
    corner[5, 6, 1] = 1
    other = mask_utils.encode(corner)
    want = mask_utils.iou(full, other, [0, 1])
    assert want.tolist() == [[-1.0, 0.0]]
    np.testing.assert_array_equal(iou(_layout(full, 4, 5), _layout(other, 6, 7), [0, 1]), want)


def test_blocks_equal_pycocotools_per_group_with_reordered_rows():
    """The matching kernel's blocks: per (group) the detection × ground-truth matrix, rows read through their spans
    (here shuffled), as pycocotools computes them image by image."""
    rng = np.random.default_rng(11)
    h, w = 31, 23
    groups = [(rng.integers(0, 6), rng.integers(0, 7)) for _ in range(40)]
    n_gt, n_dt = sum(g for g, _ in groups), sum(d for _, d in groups)
    gt_enc = mask_utils.encode(np.asfortranarray(_random_masks(rng, n_gt, h, w)))
    dt_enc = mask_utils.encode(np.asfortranarray(_random_masks(rng, n_dt, h, w)))
    crowd = rng.random(n_gt) < 0.25
    # store the counts in a shuffled order; the spans put the rows back in group order
    sides = []
    for enc in (dt_enc, gt_enc):
        order = rng.permutation(len(enc))
        counts, offsets = rle.decode_strings([enc[i]["counts"] for i in order])
        row_span = np.empty((len(enc), 2), np.int64)
        row_span[order] = spans(offsets)
        sides.append((counts, row_span, offsets, order))
    (dc, ds, do, dord), (gc, gs, go, gord) = sides
    dt_box, gt_box = np.empty((n_dt, 4)), np.empty((n_gt, 4))
    dt_box[dord] = rle.to_bbox(dc, do, np.full(n_dt, h), np.full(n_dt, w))
    gt_box[gord] = rle.to_bbox(gc, go, np.full(n_gt, h), np.full(n_gt, w))
    dt_area = np.empty(n_dt, np.int64)
    dt_area[dord] = rle.area(dc, do)
    gt_len = np.array([g for g, _ in groups], np.int64)
    dt_len = np.array([d for _, d in groups], np.int64)
    gt_start, dt_start = np.cumsum(gt_len) - gt_len, np.cumsum(dt_len) - dt_len
    values, offsets = mask_iou_blocks(dc, ds, dt_box, dt_area, gc, gs, gt_box, crowd, gt_start, gt_len, dt_start,
                                      dt_len, 3, len(groups))
    for k in range(3, len(groups)):
        block = values[offsets[k - 3]:offsets[k - 2]]
        if not (dt_len[k] and gt_len[k]):
            assert block.size == 0
            continue
        want = mask_utils.iou(dt_enc[dt_start[k]:dt_start[k] + dt_len[k]], gt_enc[gt_start[k]:gt_start[k] + gt_len[k]],
                              crowd[gt_start[k]:gt_start[k] + gt_len[k]].astype(np.uint8).tolist())
        np.testing.assert_array_equal(block.reshape(dt_len[k], gt_len[k]), want)


def test_polygon_masks_iou_equals_pycocotools():
    """The ingest's path end to end: polygons rasterised here and by pycocotools give the same IoU matrix."""
    rng = np.random.default_rng(2)
    h, w = 48, 64
    rows = []
    for _ in range(30):
        cx, cy, r = rng.uniform(0, w), rng.uniform(0, h), rng.uniform(0.5, 20)
        angles = np.sort(rng.uniform(0, 2 * np.pi, rng.integers(3, 12)))
        rows.append([[float(v) for a in angles for v in (cx + r * np.cos(a), cy + r * np.sin(a))]])
    coords = np.array([v for row in rows for v in row[0]])
    part_offsets = np.cumsum([0] + [len(row[0]) for row in rows])
    counts, offsets = rasterise.from_polygons(coords, part_offsets, np.arange(31), np.full(30, h), np.full(30, w))
    layout = (counts, offsets, np.full(30, h), np.full(30, w))
    crowd = np.arange(30) % 4 == 0
    reference = [mask_utils.merge(mask_utils.frPyObjects(row, h, w)) for row in rows]
    np.testing.assert_array_equal(iou(layout, layout, crowd), mask_utils.iou(reference, reference, crowd.astype(np.uint8).tolist()))
