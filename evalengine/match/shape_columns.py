"""What the COCO protocol's iou types read beside the boxes, and how errors name a row: the light part of
:mod:`evalengine.match.shapes`, so that box matching does not import the mask and keypoint machinery (pyarrow's
compute functions, the RLE, boundary and OKS kernels; ~0.05-0.08 CPU s of the bbox command's start).

The similarity steps of masks and keypoints, and the checks they make, are :mod:`evalengine.match.shapes`' functions;
the names below (:func:`shape_step`) import it on their first call.
"""

import math
import numbers

import polars as pl

from evalengine import schema
from evalengine.errors import ProtocolError
from evalengine.geometry.oks import COCO_PERSON_SIGMAS

# the shape columns each iou type reads, per side (schema.MASK, schema.GT_KEYPOINTS / KEYPOINTS)
SHAPE_COLUMNS = {
    "bbox": {"gt": (), "dt": ()},
    "segm": {"gt": ("mask_h", "mask_w", "mask_rle"), "dt": ("mask_h", "mask_w", "mask_rle")},
    "boundary": {"gt": ("mask_h", "mask_w", "mask_rle"), "dt": ("mask_h", "mask_w", "mask_rle")},
    "keypoints": {"gt": ("keypoints", "num_keypoints"), "dt": ("keypoints",)},
}
_SHAPE_TYPES = {**schema.MASK, **schema.GT_KEYPOINTS}


def shape_step(name: str):
    """:mod:`evalengine.match.shapes`' function ``name``, imported on its first call."""
    def step(*args, **kwargs):
        from evalengine.match import shapes

        return getattr(shapes, name)(*args, **kwargs)

    step.__name__ = step.__qualname__ = name
    step.__doc__ = f"evalengine.match.shapes.{name} (imported on the first call)."
    return step


mask_similarity, keypoint_similarity, keypoint_ignored, shape_tables, boundary_f_similarity = (
    shape_step(name) for name in ("mask_similarity", "keypoint_similarity", "keypoint_ignored", "shape_tables",
                                  "boundary_f_similarity"))


def with_shapes(frame: pl.DataFrame, shapes: pl.DataFrame | None, columns) -> pl.DataFrame:
    """``frame`` beside its shape columns read apart (:func:`evalengine.match.shapes.shape_tables`), or null ones where
    none are stored."""
    if shapes is not None:
        return frame.hstack(shapes)
    return frame.with_columns(pl.lit(None, dtype=_SHAPE_TYPES[c]).alias(c) for c in columns)


def places(context: dict) -> dict:
    """How errors name a row of each side: ``(source file: annotation | result, id column)``."""
    return {"gt": (f"{context['sources']['gt']}: annotation", "gt_id"),
            "dt": (f"{context['sources']['dt']}: result", "det_id")}


def sources(layout, run: str) -> dict:
    """The input files of the ground truth and of ``run`` (the store where not recorded), for errors."""
    provenance = layout.manifest.get("provenance", {})
    return {"gt": provenance.get("gt") or str(layout.root), "dt": provenance.get(run) or str(layout.root)}


def kpt_sigmas(value) -> tuple:
    """The keypoint sigmas as the protocol holds them: ``((category_id or None, sigmas), …)``, ``None`` the default of
    every category not listed. ``value``: None (COCO's 17 person sigmas for every category), a list (for every
    category), or a mapping ``{category_id: list}`` (the others: COCO's person sigmas)."""
    if value is None:
        return ((None, COCO_PERSON_SIGMAS),)
    if isinstance(value, tuple) and value and all(isinstance(p, tuple) and len(p) == 2 for p in value) and \
            value[0][0] is None:
        return value  # already normalised (dataclasses.replace)
    if isinstance(value, dict):
        entries = {None: COCO_PERSON_SIGMAS}
        for key, sigmas in value.items():
            try:
                category = int(key)
            except (TypeError, ValueError):
                raise ProtocolError(f"kpt_oks_sigmas: a category id is an integer, got {key!r}") from None
            entries[category] = _sigma_list(f"kpt_oks_sigmas[{category}]", sigmas)
        return ((None, entries.pop(None)), *sorted(entries.items()))
    return ((None, _sigma_list("kpt_oks_sigmas", value)),)


def _sigma_list(name: str, values) -> tuple:
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise ProtocolError(f"{name}: expected a list of positive numbers, got {values!r}")
    values = tuple(values)
    for v in values:
        if isinstance(v, bool) or not isinstance(v, numbers.Real) or not (v > 0 and math.isfinite(v)):
            raise ProtocolError(f"{name}: {v!r} is not a positive number")
    if not values:
        raise ProtocolError(f"{name}: at least one sigma is needed")
    return tuple(float(v) for v in values)
