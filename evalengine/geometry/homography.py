"""Homographies between a reference image and a perturbed one, and boxes projected through them.

Conventions of Hosang et al.'s repeatability code (§3): ``H`` maps reference to perturbed coordinates
("H * x_reference = x_rotated") in 1-based pixel coordinates, where a box covers the pixels x1..x2. A
continuous box (x, y, w, h) is that box with x1 = x + 1, x2 = x + w. A projected box is not the enclosing box
of the projected corners: its x1 is the mean of the two smallest projected x, x2 the mean of the two largest
(``project_candidates.m``), and likewise for y.

Built perturbations (Hosang et al. §3.1, :func:`homography_table`): ``scale`` (level = factor; the perturbed image
is ceil(level·W) wide, as MATLAB's imresize), ``rotate`` (level = degrees; both the reference and the perturbed
image are the common crop of rotations within ±20°), ``flip`` (horizontal mirror), and the photometric kinds
``light``, ``jpeg``, ``blur``, ``saltnpepper``, ``none`` (identity).
"""

import math

import numpy as np
import polars as pl

from evalengine import schema
from evalengine.errors import InputError, check_option


def scale_homography(factor: float) -> np.ndarray:
    """Resizing by ``factor``: x' = factor·(x − 1) + 1 in pixel coordinates."""
    s = float(factor)
    return np.array([[s, 0.0, 1.0 - s], [0.0, s, 1.0 - s], [0.0, 0.0, 1.0]])


def flip_homography(width: int) -> np.ndarray:
    """Horizontal mirror of a ``width``-pixel image: x' = width + 1 − x."""
    return np.array([[-1.0, 0.0, width + 1.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]])


def _translation(dx: float, dy: float) -> np.ndarray:
    out = np.eye(3)
    out[0, 2], out[1, 2] = dx, dy
    return out


def _intersect(p, q):
    """Intersection of the lines through segments p and q (each 2×2), None if parallel."""
    a1, b1 = p[1, 1] - p[0, 1], p[0, 0] - p[1, 0]
    a2, b2 = q[1, 1] - q[0, 1], q[0, 0] - q[1, 0]
    c1, c2 = a1 * p[0, 0] + b1 * p[0, 1], a2 * q[0, 0] + b2 * q[0, 1]
    delta = a1 * b2 - a2 * b1
    if delta == 0:
        return None
    return ((b2 * c1 - b1 * c2) / delta, (a1 * c2 - a2 * c1) / delta)


def _rotation(width: int, height: int, angle: float):
    """Rotation about the image centre (imrotate 'crop'), then the biggest axis-aligned box inside the
    rotated content (the toolbox's ``get_biggest_rect``); returns (H original → crop, crop width, crop height)."""
    rad = np.deg2rad(angle)
    centre = np.array([width / 2.0 + 1.0, height / 2.0 + 1.0])
    rot = np.eye(3)
    rot[:2, :2] = [[np.cos(-rad), -np.sin(-rad)], [np.sin(-rad), np.cos(-rad)]]
    h = _translation(*centre) @ rot @ _translation(*-centre)
    corners = h @ np.array([[1, width, width, 1], [1, 1, height, height], [1, 1, 1, 1]], dtype=float)
    corners = (corners[:2] / corners[2]).T
    diagonals = (np.array([[1.0, 1.0], [width, height]]), np.array([[width, 1.0], [1.0, height]]))
    points = []
    for edge in ((0, 1), (1, 2), (2, 3), (0, 3)):
        for diagonal in diagonals:
            point = _intersect(corners[list(edge)], diagonal)
            if point is not None:
                points.append(point)
    points = np.unique(np.array(points), axis=0)
    distance = np.sum((np.array([width, height]) / 2.0 - points) ** 2, axis=1)
    closest = points[np.argsort(distance, kind="stable")[:4]]
    xs, ys = np.sort(closest[:, 0]), np.sort(closest[:, 1])
    x_min, x_max = int(np.ceil(max(xs[0], xs[1]))), int(np.floor(min(xs[2], xs[3])))
    y_min, y_max = int(np.ceil(max(ys[0], ys[1]))), int(np.floor(min(ys[2], ys[3])))
    return _translation(-(x_min - 1), -(y_min - 1)) @ h, x_max - x_min + 1, y_max - y_min + 1


def rotation_crop_size(width: int, height: int, max_angles=(-20.0, 20.0)) -> tuple:
    """The common crop of every rotation (Hosang et al. §3.1): the smallest biggest-rectangle over ``max_angles``."""
    sizes = [_rotation(width, height, a)[1:] for a in max_angles]
    return min(s[0] for s in sizes), min(s[1] for s in sizes)


def rotation_homography(width: int, height: int, angle: float, max_angles=(-20.0, 20.0)) -> tuple:
    """``(H, crop_width, crop_height)`` of a rotation by ``angle`` degrees whose reference is the 0° image cut to
    the common crop; both images are that crop (``repeatability_rotate.m``)."""
    crop_w, crop_h = rotation_crop_size(width, height, max_angles)
    h, rot_w, rot_h = _rotation(width, height, angle)
    to_original = _translation(np.floor((width - crop_w) / 2), np.floor((height - crop_h) / 2))
    to_crop = _translation(-np.floor((rot_w - crop_w) / 2), -np.floor((rot_h - crop_h) / 2))
    return to_crop @ h @ to_original, crop_w, crop_h


def project_boxes(x, y, w, h, homography) -> tuple:
    """Continuous boxes projected through per-box homographies (n×3×3, or one 3×3) with the corner rule."""
    homography = np.asarray(homography, dtype=float)
    x1, y1, x2, y2 = x + 1.0, y + 1.0, x + w, y + h
    corner_x = np.stack([x1, x2, x2, x1], axis=-1)
    corner_y = np.stack([y1, y1, y2, y2], axis=-1)
    points = np.stack([corner_x, corner_y, np.ones_like(corner_x)], axis=-2)  # n×3×4
    projected = homography @ points if homography.ndim == 3 else np.einsum("ij,njk->nik", homography, points)
    px = np.sort(projected[:, 0] / projected[:, 2], axis=-1)
    py = np.sort(projected[:, 1] / projected[:, 2], axis=-1)
    nx1, nx2 = (px[:, 0] + px[:, 1]) / 2, (px[:, 2] + px[:, 3]) / 2
    ny1, ny2 = (py[:, 0] + py[:, 1]) / 2, (py[:, 2] + py[:, 3]) / 2
    return nx1 - 1.0, ny1 - 1.0, nx2 - nx1 + 1.0, ny2 - ny1 + 1.0


def centre_inside(x, y, w, h, width, height) -> np.ndarray:
    """The toolbox's validity test: the box centre, in pixel coordinates, lies in [1, width] × [1, height]."""
    cx, cy = x + 1.0 + (w - 1.0) / 2, y + 1.0 + (h - 1.0) / 2
    return (cx >= 1) & (cy >= 1) & (cx <= width) & (cy <= height)


PHOTOMETRIC = ("light", "jpeg", "blur", "saltnpepper", "none")
KINDS = ("scale", "rotate", "flip", *PHOTOMETRIC)


def homography_table(images: pl.DataFrame, kind: str, level: float | None = None) -> pl.DataFrame:
    """Homographies and sizes of every image under one perturbation (schema :data:`evalengine.schema.PERTURBATIONS`)."""
    check_option("perturbation kind", kind, KINDS, InputError)
    if kind in ("scale", "rotate") and level is None:
        raise InputError(f"perturbation '{kind}' needs a level (scale factor or degrees)")
    rows = []
    for image_id, width, height in images.select("image_id", "width", "height").iter_rows():
        if width is None or height is None:
            raise InputError(f"image {image_id}: width and height are needed to build homographies")
        ref_w, ref_h, out_w, out_h = width, height, width, height
        if kind == "scale":
            h = scale_homography(level)
            out_w, out_h = math.ceil(level * width), math.ceil(level * height)
        elif kind == "rotate":
            h, ref_w, ref_h = rotation_homography(width, height, level)
            out_w, out_h = ref_w, ref_h
        elif kind == "flip":
            h = flip_homography(width)
        else:
            h = np.eye(3)
        rows.append({"image_id": image_id, "homography": h.reshape(-1).tolist(), "width": out_w, "height": out_h,
                     "ref_width": ref_w, "ref_height": ref_h})
    return pl.DataFrame(rows, schema=schema.PERTURBATIONS)
