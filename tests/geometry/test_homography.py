"""Homographies of the repeatability protocol against the toolbox's own (tests/data/hosang)."""

import json

import numpy as np
import pytest

from evalengine.geometry.homography import flip_homography, project_boxes, rotation_homography, scale_homography
from tests.conftest import DATA

HOSANG = DATA / "hosang"


@pytest.fixture(scope="module")
def toolbox():
    homographies = json.loads((HOSANG / "voc07_test_repeatability_homographies.json").read_text())["homographies"]
    sizes = [entry["img_size"] for entry in json.loads((HOSANG / "voc07_test_annotations.json").read_text())["impos"]]
    return homographies, sizes


def test_rotation_with_common_crop_equals_the_toolbox_on_every_voc07_image(toolbox):
    homographies, sizes = toolbox
    worst = max(np.max(np.abs(rotation_homography(w, h, 1.0)[0] - np.array(expected)))
                for (w, h), expected in zip(sizes, homographies["rotate"]))
    assert worst < 1e-12


def test_scale_and_photometric_homographies(toolbox):
    homographies, _ = toolbox
    assert all(np.array_equal(scale_homography(1.1), np.array(h)) for h in homographies["scale"])
    for kind in ("light", "jpeg", "blur", "saltnpepper"):
        assert all(np.array_equal(np.eye(3), np.array(h)) for h in homographies[kind])


def test_corner_rule_projection():
    x, y, w, h = (np.array([v]) for v in (9.0, 19.0, 21.0, 11.0))  # pixels 10..30 × 20..30
    assert [float(v[0]) for v in project_boxes(x, y, w, h, scale_homography(2.0))] == [18.0, 38.0, 41.0, 21.0]  # pixels 19..59 × 39..59
    assert [float(v[0]) for v in project_boxes(x, y, w, h, flip_homography(100))] == [70.0, 19.0, 21.0, 11.0]
    rot = np.array([[0.0, -1.0, 0.0], [1.0, 0.0, 0.0], [0.0, 0.0, 1.0]])  # a rotation by 45° would shrink the box
    c, s = np.cos(np.pi / 4), np.sin(np.pi / 4)
    rot45 = np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]])
    px, py, pw, ph = project_boxes(np.array([-1.0]), np.array([-1.0]), np.array([3.0]), np.array([3.0]), rot45)
    # pixel box 0..2 × 0..2: corners at ±√2 (x) and 0, √2, √2, 2√2 (y); means of the two smallest/largest
    assert float(pw[0]) == pytest.approx(np.sqrt(2) + 1) and float(ph[0]) == pytest.approx(np.sqrt(2) + 1)
    assert np.allclose(project_boxes(x, y, w, h, rot)[2:], (np.array([11.0]), np.array([21.0])))
