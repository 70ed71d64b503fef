"""The similarity steps of the COCO protocol's ``segm``, ``boundary`` and ``keypoints`` iou types (pycocotools
``computeIoU`` on masks, boundary-iou-api's ``computeBoundaryIoU``, ``computeOks``) and the checks that name what is
missing (the columns they read, the keypoint sigmas and how rows are named: :mod:`evalengine.match.shape_columns`).

``segm``: mask IoU of the stored run lengths (:func:`evalengine.geometry.masks.mask_iou_blocks`; crowd: intersection
over the detection's mask area), areas for the area ranges as pycocotools (a ground truth's ``area`` field, a
result's as ``loadRes`` set it: both the stored ``area``). ``keypoints``: OKS (:func:`evalengine.geometry.oks.oks_blocks`)
with each category's sigmas; ground truths with ``num_keypoints`` 0 are ignored, as pycocotools ``_prepare``.
"""

import numpy as np
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc

from evalengine import schema
from evalengine.arrow import list_lengths
from evalengine.errors import ProtocolError, StoreError
from evalengine.geometry.boundary import boundaries
from evalengine.geometry.boundary_pr import morph_precision_recall
from evalengine.geometry.box_iou import block_offsets
from evalengine.geometry.mask_boundary import boundary_count_blocks, mask_boundaries
from evalengine.geometry.masks import mask_iou_blocks, spans
from evalengine.geometry.oks import keypoint_vars, oks_blocks
from evalengine.io import rle
from evalengine.match.shape_columns import SHAPE_COLUMNS, sources

_WHAT = {"segm": "masks ('segmentation')", "boundary": "masks ('segmentation')", "keypoints": "keypoints"}


def shape_tables(layout, run: str, iou_type: str, files: dict) -> list:
    """The sides whose shape columns are stored (``files``: a shard of each side, ``{"gt", "dt"}``); a located error
    for a side with rows but none of them (none of its inputs held masks or keypoints). An empty side is matched
    without them, as pycocotools evaluates it."""
    origin, stored = sources(layout, run), []
    for side, file in files.items():
        needed = SHAPE_COLUMNS[iou_type][side]
        names = layout.columns_of(file)
        missing = [c for c in needed if c not in names]
        if not missing:
            stored += [side] if needed else []
            continue
        folder = layout.paths.gt if side == "gt" else layout.paths.dt(run)
        if schema.LEGACY_MASK in names:
            raise StoreError(f"{folder}: masks stored as run lengths ('{schema.LEGACY_MASK}') by an earlier "
                             "evalengine, which now stores compressed RLE ('mask_rle'); ingest the files again")
        if layout.scan_sharded(folder).select(pl.len()).collect().item():
            whose = "the ground truth" if side == "gt" else f"run '{run}'"
            raise ProtocolError(f"{origin[side]}: {whose} has no {_WHAT[iou_type]}, which iou_type '{iou_type}' "
                                f"needs (missing: {', '.join(missing)})")
    return stored


def _rows(frame: pl.DataFrame, column: str) -> tuple:
    """``(values, span)`` of a list column: row ``r``'s values are ``values[span[r, 0]:span[r, 1]]`` (none if null)."""
    array = frame.get_column(column).to_arrow()
    array = array.combine_chunks() if isinstance(array, pa.ChunkedArray) else array
    lengths = list_lengths(array)
    values = pl.Series(pc.list_flatten(array)).to_numpy()
    return np.ascontiguousarray(values), spans(np.concatenate([[0], np.cumsum(lengths)]))


def _refuse(frame: pl.DataFrame, bad: np.ndarray, where: tuple, problem: str) -> None:
    """A located error at the first row of ``frame`` where ``bad`` holds; ``where``: ``(prefix, id column)``."""
    if bad.any():
        first = int(np.flatnonzero(bad)[0])
        ident, category = frame.get_column(where[1])[first], frame.get_column("category_id")[first]
        more = f" (and {int(bad.sum()) - 1} more)" if bad.sum() > 1 else ""
        raise ProtocolError(f"{where[0]} {ident} (category {category}) {problem}{more}")


def _masks(frame: pl.DataFrame, paired: np.ndarray, where: tuple, iou_type: str, boundary: bool = False) -> tuple:
    """``(counts, span, box, area, band)`` of the rows' masks (stored compressed: ``rleFrString``; then ``rleToBbox``,
    ``rleArea``; ``band``: the boundary bands' ``(counts, span)`` when ``boundary``); a row without one refused. Only
    the ``paired`` rows (:func:`_paired`) are decoded: the others are never compared (empty runs, a zero box)."""
    _refuse(frame, frame.get_column("mask_rle").is_null().to_numpy(), where,
            f"has no 'segmentation', which iou_type '{iou_type}' needs")
    rows = np.flatnonzero(paired)
    # gathered before Arrow: Polars' to_arrow copies every string of the column it converts
    strings = frame.get_column("mask_rle").gather(rows).to_arrow()
    h, w = (frame.get_column(c).fill_null(0).to_numpy().astype(np.int64) for c in ("mask_h", "mask_w"))
    counts, span, box, area = rle.decode_rows(strings, rows, h, w, frame.height)
    band = None
    if boundary:
        band_counts, band_offsets = boundaries(counts, np.append(span[rows, 0], len(counts)), h[rows], w[rows])
        band_span = np.zeros((frame.height, 2), np.int64)
        band_span[rows] = spans(band_offsets)
        band = (band_counts, band_span)
    return counts, span, box, area, band


def _paired(n: int, starts: np.ndarray, lengths: np.ndarray, other_lengths: np.ndarray) -> np.ndarray:
    """Whether each of a side's ``n`` rows shares a group with a row of the other side (group ``k`` holds the rows
    ``starts[k]:starts[k] + lengths[k]``): in COCO-shaped results most detections have no ground truth of their class
    in their image, and their masks are never compared."""
    keep = (lengths > 0) & (other_lengths > 0)
    edges = np.zeros(n + 1, np.int64)
    np.add.at(edges, starts[keep], 1)
    np.add.at(edges, starts[keep] + lengths[keep], -1)
    return np.cumsum(edges[:-1]) > 0


def mask_similarity(gt: pl.DataFrame, dt: pl.DataFrame, gt_crowd: np.ndarray, groups: tuple, protocol, where: dict):
    """Mask IoU blocks as pycocotools ``maskUtils.iou`` (crowd: intersection over the detection's mask area); for
    ``boundary``, boundary IoU as the authors' ``computeBoundaryIoU`` (dilation ratio 0.02: the smaller of the mask
    and boundary IoUs, the mask's for a crowd ground truth; :mod:`evalengine.geometry.boundary`)."""
    boundary = protocol.iou_type == "boundary"
    gt_start, gt_len, dt_start, dt_len = groups
    g_counts, g_span, g_box, _, g_band = _masks(gt, _paired(gt.height, gt_start, gt_len, dt_len), where["gt"],
                                                protocol.iou_type, boundary)
    d_counts, d_span, d_box, d_area, d_band = _masks(dt, _paired(dt.height, dt_start, dt_len, gt_len), where["dt"],
                                                     protocol.iou_type, boundary)
    bands = (*d_band, *g_band) if boundary else None
    return lambda lo, hi: mask_iou_blocks(d_counts, d_span, d_box, d_area, g_counts, g_span, g_box, gt_crowd,
                                          *groups, lo, hi, bands)


def boundary_f_similarity(gt: pl.DataFrame, dt: pl.DataFrame, groups: tuple, tolerance: float, where: dict):
    """F̃b blocks of the mask pairs (Pont-Tuset & Marques §2.2, DAVIS ``db_eval_boundary``: the boundary F of each
    pair, ``tolerance`` as :func:`evalengine.geometry.boundary_pr.morph_radius` reads it;
    :mod:`evalengine.geometry.mask_boundary`)."""
    gt_start, gt_len, dt_start, dt_len = groups
    sides = []
    for frame, paired, side in ((gt, _paired(gt.height, gt_start, gt_len, dt_len), "gt"),
                                (dt, _paired(dt.height, dt_start, dt_len, gt_len), "dt")):
        counts, span = _masks(frame, paired, where[side], "segm")[:2]
        h, w = (frame.get_column(c).to_numpy().astype(np.int64) for c in ("mask_h", "mask_w"))
        sides.append(mask_boundaries(counts, span, h, w, tolerance))

    def blocks(lo, hi):
        counts, offsets = boundary_count_blocks(sides[1], sides[0], *groups, lo, hi)
        return morph_precision_recall(counts)[0], offsets
    return blocks


def _sigma_rows(categories: np.ndarray, sigmas: tuple, use_cats: bool) -> tuple:
    """``(vars, span)``: the ``vars`` of every category's sigmas concatenated, and each row's span in them (with
    ``use_cats`` off, pycocotools' one list: the default)."""
    listed = np.array([category for category, _ in sigmas[1:]] if use_cats else [], np.int64)
    vars_ = np.concatenate([keypoint_vars(s) for _, s in sigmas])
    lengths = np.array([len(s) for _, s in sigmas], np.int64)
    ends = np.cumsum(lengths)
    entry = np.zeros(len(categories), np.int64)
    if len(listed):
        at = np.searchsorted(listed, categories)
        entry = np.where(listed[np.minimum(at, len(listed) - 1)] == categories, at + 1, 0)
    return vars_, np.ascontiguousarray(np.stack([ends[entry] - lengths[entry], ends[entry]], axis=1))


def keypoint_similarity(gt: pl.DataFrame, dt: pl.DataFrame, gt_crowd: np.ndarray, groups: tuple, protocol,
                        where: dict):
    """OKS blocks as pycocotools ``computeOks``; a keypoint count that differs from the category's sigmas refused.
    With ``use_cats`` off and ``kpt_use_cats_quirk``, zeros: pycocotools finds no ground truth of category -1."""
    for side, frame in (("gt", gt), ("dt", dt)):
        _refuse(frame, frame.get_column("keypoints").is_null().to_numpy(), where[side],
                "has no 'keypoints', which iou_type 'keypoints' needs")
    g_kpts, g_span = _rows(gt, "keypoints")
    d_kpts, d_span = _rows(dt, "keypoints")
    vars_, g_vars = _sigma_rows(gt.get_column("category_id").to_numpy(), protocol.kpt_oks_sigmas, protocol.use_cats)
    _, d_vars = _sigma_rows(dt.get_column("category_id").to_numpy(), protocol.kpt_oks_sigmas, protocol.use_cats)
    # a ground truth's may be empty: pycocotools then measures to its box's region, with the sigmas' count
    for frame, span, var_span, side in ((gt, g_span, g_vars, "gt"), (dt, d_span, d_vars, "dt")):
        n, k = (span[:, 1] - span[:, 0]) // 3, var_span[:, 1] - var_span[:, 0]
        bad = (n != k) & ~((n == 0) & (side == "gt"))
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            _refuse(frame, bad, where[side], f"has {n[first]} keypoints where its category's sigmas have {k[first]}")
    if not protocol.use_cats and protocol.kpt_use_cats_quirk:
        return lambda lo, hi: _zeros(groups, lo, hi)
    gt_box = np.ascontiguousarray(gt.select("x", "y", "w", "h").to_numpy().astype(np.float64))
    gt_area = gt.get_column("area").to_numpy().astype(np.float64)
    d_kpts, g_kpts = d_kpts.astype(np.float64, copy=False), g_kpts.astype(np.float64, copy=False)
    return lambda lo, hi: oks_blocks(d_kpts, d_span, g_kpts, g_span, gt_box, gt_area, vars_, g_vars, *groups, lo, hi)


def _zeros(groups: tuple, lo: int, hi: int) -> tuple:
    offsets = block_offsets(groups[1], groups[3], lo, hi)
    return np.zeros(offsets[-1]), offsets


def keypoint_ignored(gt: pl.DataFrame, where: dict) -> np.ndarray:
    """pycocotools ``_prepare`` for keypoints: a ground truth with ``num_keypoints`` 0 is ignored (null refused)."""
    _refuse(gt, gt.get_column("num_keypoints").is_null().to_numpy(), where["gt"],
            "has no 'num_keypoints', which iou_type 'keypoints' needs (pycocotools ignores those with 0)")
    return (gt.get_column("num_keypoints") == 0).to_numpy()
