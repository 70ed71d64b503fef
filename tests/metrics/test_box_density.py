"""Box density maps (spec §3.5, E16): both kinds against a brute-force count in exact rational arithmetic on random
boxes (partly outside the image, without area, on cell edges), the score filter, the ground-truth map, errors."""

import json
from fractions import Fraction
from math import ceil, floor

import numpy as np
import pytest

from evalengine.api import box_density, ingest_coco
from evalengine.errors import InputError

SIZES = [(640, 480), (800, 600), (500, 500), (333, 517)]


def random_boxes(rng, image_id: int, width: int, height: int, n: int, grid: int) -> list:
    """Boxes of every kind: inside, crossing the image's edges, outside, without area, on cell edges."""
    boxes = []
    for _ in range(n):
        kind = rng.integers(0, 6)
        if kind == 0:  # on cell edges where the cell size is a whole number of pixels
            cw, ch = width // grid, height // grid
            x, y = cw * int(rng.integers(0, grid)), ch * int(rng.integers(0, grid))
            w, h = cw * int(rng.integers(0, 4)), ch * int(rng.integers(1, 4))
        elif kind == 1:  # crossing or outside the image
            x, y = rng.uniform(-0.5 * width, 1.2 * width), rng.uniform(-0.5 * height, 1.2 * height)
            w, h = rng.uniform(0, width), rng.uniform(0, height)
        elif kind == 2:  # tiny
            x, y, w, h = rng.uniform(0, width), rng.uniform(0, height), rng.uniform(0, 2), rng.uniform(0, 2)
        else:
            x, y = rng.uniform(0, width), rng.uniform(0, height)
            w, h = rng.uniform(1, width - x + 1), rng.uniform(1, height - y + 1)
        boxes.append((image_id, float(x), float(y), float(w), float(h)))
    return boxes


def brute_force(boxes, sizes: dict, grid: int, kind: str) -> np.ndarray:
    """The documented rule cell by cell, in exact arithmetic on the stored doubles (``x + w`` as the double sum)."""
    counts = np.zeros((grid, grid), np.int64)
    for image_id, x, y, w, h in boxes:
        width, height = sizes[image_id]
        if kind == "center":
            cx, cy = Fraction(x + w / 2) * grid / width, Fraction(y + h / 2) * grid / height
            if 0 <= cx <= grid and 0 <= cy <= grid:
                counts[min(floor(cy), grid - 1), min(floor(cx), grid - 1)] += 1
            continue
        # a cell is covered when its interior and the box's interior overlap with positive area
        x1, x2 = Fraction(x), Fraction(x + w)
        y1, y2 = Fraction(y), Fraction(y + h)
        columns = [j for j in range(grid) if min(x2, Fraction((j + 1) * width, grid)) - max(x1, Fraction(j * width, grid)) > 0]
        rows = [i for i in range(grid) if min(y2, Fraction((i + 1) * height, grid)) - max(y1, Fraction(i * height, grid)) > 0]
        for i in rows:
            counts[i, columns] += 1
    return counts


def make_store(tmp_path, seed: int, grid: int):
    rng = np.random.default_rng(seed)
    images = [{"id": i + 1, "width": w, "height": h, "file_name": f"{i}.jpg"} for i, (w, h) in enumerate(SIZES)]
    sizes = {im["id"]: (im["width"], im["height"]) for im in images}
    gt_boxes = [b for im in images for b in random_boxes(rng, im["id"], im["width"], im["height"], 40, grid)]
    crowd = rng.random(len(gt_boxes)) < 0.15
    dt_boxes = [b for im in images for b in random_boxes(rng, im["id"], im["width"], im["height"], 80, grid)]
    scores = np.round(rng.random(len(dt_boxes)), 1)
    gt = {"images": images, "categories": [{"id": 1, "name": "a"}, {"id": 2, "name": "b"}],
          "annotations": [{"id": k + 1, "image_id": b[0], "category_id": int(1 + k % 2), "bbox": list(b[1:]),
                           "area": b[3] * b[4], "iscrowd": int(c)} for k, (b, c) in enumerate(zip(gt_boxes, crowd))]}
    dt = [{"image_id": b[0], "category_id": 1, "bbox": list(b[1:]), "score": float(s)} for b, s in zip(dt_boxes, scores)]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    store = ingest_coco(tmp_path / "gt.json", tmp_path / "dt.json", tmp_path / "store", n_shards=3)
    regular = [b for b, c in zip(gt_boxes, crowd) if not c]
    return store, sizes, regular, list(zip(dt_boxes, scores))


@pytest.mark.parametrize("kind", ["occupancy", "center"])
@pytest.mark.parametrize("seed, grid", [(0, 10), (1, 20), (2, 7)])
def test_counts_equal_brute_force(tmp_path, seed, grid, kind):
    """Detections (all, then score >= 0.5 with scores on a 0.1 grid: ties at the threshold kept) and regular ground
    truth, three shards, images of four sizes."""
    store, sizes, regular, detections = make_store(tmp_path, seed, grid)
    result = box_density(store, grid=grid, kind=kind)
    assert result.predicted.shape == result.ground_truth.shape == (grid, grid)
    np.testing.assert_array_equal(result.predicted, brute_force([b for b, _ in detections], sizes, grid, kind))
    np.testing.assert_array_equal(result.ground_truth, brute_force(regular, sizes, grid, kind))
    assert (result.n_predicted, result.n_ground_truth) == (len(detections), len(regular))
    kept = [b for b, s in detections if s >= 0.5]
    filtered = box_density(store, grid=grid, kind=kind, score_threshold=0.5)
    np.testing.assert_array_equal(filtered.predicted, brute_force(kept, sizes, grid, kind))
    np.testing.assert_array_equal(filtered.ground_truth, result.ground_truth)
    assert filtered.n_predicted == len(kept) < len(detections)
    predicted_share, gt_share = filtered.shares()
    np.testing.assert_array_equal(filtered.difference(), predicted_share - gt_share)
    np.testing.assert_allclose(predicted_share, filtered.predicted / len(kept), rtol=0, atol=0)
    frame = filtered.frame()
    assert frame.columns == ["row", "column", "predicted", "ground_truth", "difference"] and frame.height == grid ** 2
    assert frame.filter((frame["row"] == 1) & (frame["column"] == 2))["predicted"].item() == filtered.predicted[1, 2]


def test_hand_made_cells(tmp_path):
    """On a 100 × 50 image and a 10 × 10 grid (cells 10 × 5 pixels): a box on cell edges covers exactly its cells,
    one crossing the left edge is clipped, one touching a cell only along an edge does not cover it, one without
    area covers nothing; centres: the right and bottom edges belong to the last cells."""
    images = [{"id": 1, "width": 100, "height": 50}]
    boxes = [[10, 5, 20, 10], [-15, 0, 20, 5], [30, 30, 0, 10], [95, 45, 10, 10], [99.5, 49.5, 1, 1]]
    gt = {"images": images, "categories": [{"id": 1, "name": "a"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 100, 50], "area": 5000,
                           "iscrowd": 0}]}
    dt = [{"image_id": 1, "category_id": 1, "bbox": b, "score": 0.5} for b in boxes]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    store = ingest_coco(tmp_path / "gt.json", tmp_path / "dt.json", tmp_path / "store")
    occupancy = box_density(store, grid=10)
    expected = np.zeros((10, 10), np.int64)
    expected[1:3, 1:3] += 1  # x 10..30, y 5..15: columns 1-2, rows 1-2
    expected[0, 0] += 1      # x -15..5 clipped to 0..5, y 0..5: one cell
    expected[9, 9] += 2      # x 95..105 and 99.5..100.5: the last cell, clipped
    np.testing.assert_array_equal(occupancy.predicted, expected)
    assert occupancy.ground_truth.tolist() == np.ones((10, 10), np.int64).tolist()
    centre = box_density(store, grid=10, kind="center")
    expected = np.zeros((10, 10), np.int64)
    expected[2, 2] = 1  # centre (20, 10): the corner of four cells goes to the one right of and below it
    expected[7, 3] = 1  # (30, 35), a box without area still has a centre; (-5, 2.5) is outside: left out
    expected[9, 9] = 2  # (100, 50) twice: the image's bottom-right corner belongs to the last cell
    np.testing.assert_array_equal(centre.predicted, expected)
    assert centre.ground_truth[5, 5] == 1 and centre.ground_truth.sum() == 1


def test_errors(tmp_path):
    store, *_ = make_store(tmp_path, 0, 10)
    for options, message in [({"grid": 0}, "box density grid must be a number of cells per side from 1 to 4096, "
                                           "got 0"),
                             ({"kind": "area"}, "box density kind must be one of ('occupancy', 'center'), got 'area'")]:
        with pytest.raises(InputError) as info:
            box_density(store, **options)
        assert str(info.value) == message
    with pytest.raises(Exception, match="no run 'nope'"):
        box_density(store, run="nope")


def test_an_image_without_size_is_named(tmp_path):
    """Normalised coordinates need each image's size: an image with boxes but no width is refused, by id."""
    gt = {"images": [{"id": 1, "width": 100, "height": 100}, {"id": 7}], "categories": [{"id": 1, "name": "a"}],
          "annotations": [{"id": 1, "image_id": 1, "category_id": 1, "bbox": [0, 0, 10, 10], "area": 100,
                           "iscrowd": 0}]}
    dt = [{"image_id": 7, "category_id": 1, "bbox": [0, 0, 5, 5], "score": 0.5}]
    (tmp_path / "gt.json").write_text(json.dumps(gt))
    (tmp_path / "dt.json").write_text(json.dumps(dt))
    store = ingest_coco(tmp_path / "gt.json", tmp_path / "dt.json", tmp_path / "store")
    with pytest.raises(InputError) as info:
        box_density(store)
    assert str(info.value) == (f"{store.path}: image 7 has detections but no positive width and height (the box "
                               "density is in normalised image coordinates)")
