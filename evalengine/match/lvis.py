"""The LVIS federated protocol (lvis-api 0.5.3 ``LVISResults`` and ``LVISEval``): its parameters and one shard's
matching.

LVIS is COCO's matching on a federated dataset. Before matching, as lvis-api:

- ``LVISResults.limit_dets_per_image``: an image keeps its ``max_dets`` (300) best detections over all categories,
  a stable sort by score (file order wins ties at the cut), counted before anything below is dropped;
- ``get_ann_ids``: ground truths and detections of area 0 are dropped (it keeps ``0 < area < inf``), as are
  detections of categories not in the ground truth;
- ``_prepare``: a detection is evaluated only where its category is known on its image, i.e. listed in the image's
  ``neg_category_ids`` or present among its (kept) ground truths;
- no crowd (``iscrowd`` is not read: every ground truth is matched one to one); the annotations' ``ignore`` field
  is honoured.

Matching is :func:`evalengine.match.coco.match_shard`'s (greedy by score, ground-truth id 0 never counted as matched:
lvis-api tests the partner id for truth, as pycocotools). Then ``evaluate_img``'s federated rule: on an image whose
``not_exhaustive_category_ids`` list the category, a detection that is not a true positive is ignored.
"""

from dataclasses import dataclass
from typing import ClassVar

import numba
import numpy as np
import polars as pl

from evalengine.errors import InputError, ProtocolError, check_option
from evalengine.match import coco
from evalengine.match.protocol import column_array
from evalengine.match.score_order import category_index, sort_rows
from evalengine.match.shape_columns import SHAPE_COLUMNS, places, sources, with_shapes

LVIS_MAX_DETS = 300  # lvis-api Params.max_dets: detections per image, over all categories
IOU_TYPES = ("bbox", "segm")  # LVISEval's
FREQUENCIES = ("r", "c", "f")  # lvis-api Params.img_count_lbl: rare, common, frequent
IMAGE_LABELS = ("neg_category_ids", "not_exhaustive_category_ids")
LABEL_INPUTS = ("negative", "not_exhaustive")  # a shard task's (image_id, category_id) pairs of each list
_LABEL_TYPE = pl.List(pl.Int64)


@dataclass(frozen=True)
class LvisProtocol(coco.CocoProtocol):
    """lvis-api's ``Params``: COCO's IoU and recall thresholds and area ranges, ``max_dets`` = (300,) detections per
    image over all categories (lvis-api's only cap; it also bounds every (image, category) group, so the COCO
    accumulation reads it unchanged), the ``ignore`` field honoured, ``iou_type`` bbox or segm.
    ``zero_id_quirk`` (kept by default) as :class:`~evalengine.match.coco.CocoProtocol`'s: lvis-api's ``dt_m`` holds
    the partner's id, so a match to ground-truth id 0 reads as unmatched."""

    max_dets: tuple | None = (LVIS_MAX_DETS,)
    ignore_flag: bool = True
    name: ClassVar[str] = "lvis"
    table_version: ClassVar[int] = 1

    def __post_init__(self):
        check_option("iou_type", self.iou_type, IOU_TYPES)
        super().__post_init__()
        if not self.use_cats:
            raise ProtocolError("use_cats: the lvis protocol evaluates per category (federated by image and category)")
        if len(self.max_dets) != 1:
            raise ProtocolError(f"max_dets: lvis-api has one cap (detections per image), got {list(self.max_dets)}")

    def shard_inputs(self, layout, run: str) -> tuple:
        """The COCO protocol's shards (a detection run's), each with its images' LVIS labels as ``(image_id,
        category_id)`` pairs (``negative``, ``not_exhaustive``): the images table is read once here, its LVIS fields
        checked first (:func:`check_lvis_labels`), and each task gets only its shard's pairs."""
        images = layout.read("images", ["image_id", "shard", *IMAGE_LABELS]) if _has_labels(layout) else None
        check_lvis_labels(images, layout.read("categories"), sources(layout, run)["gt"])
        if run in layout.proposal_runs:
            raise ProtocolError(f"'{run}' is a proposal run: the lvis protocol evaluates detection runs")
        inputs, context = super().shard_inputs(layout, run)
        # an array, which the task graph passes as it is (Dask walks a list of LVIS's 1,203 ids in every task)
        context["category_ids"] = np.asarray(context["category_ids"], dtype=np.int64)
        labels = {side: _by_shard(_pairs(images, column), layout.n_shards)
                  for side, column in zip(LABEL_INPUTS, IMAGE_LABELS)}
        shards = [{**files, **{side: labels[side][k] for side in LABEL_INPUTS}} for k, files in enumerate(inputs)]
        return shards, context

    def match_shard(self, tables: dict, context: dict) -> dict:
        shapes = SHAPE_COLUMNS[self.iou_type]
        dt = with_shapes(tables["dt"], tables.get("dt_shapes"), shapes["dt"])
        gt = with_shapes(tables["gt"], tables.get("gt_shapes"), shapes["gt"])
        categories = np.unique(context["category_ids"])
        gt, gt_rows, rows = federated(gt, dt, tables["negative"], categories, self.max_dets[0])
        dt_matches, gt_matches = coco.match_shard(gt, dt, categories, self, places(context), rows, gt_rows)
        return {"dt": not_exhaustive(dt_matches, tables["not_exhaustive"], len(self.iou_thresholds), categories),
                "gt": gt_matches}


def _has_labels(layout) -> bool:
    return all(c in layout.scan("images").collect_schema() for c in IMAGE_LABELS)


def check_lvis_labels(images: pl.DataFrame | None, categories: pl.DataFrame, source: str) -> None:
    """What lvis-api reads beyond COCO, present and well typed (it fails with a KeyError otherwise): every image's
    ``neg_category_ids`` and ``not_exhaustive_category_ids`` (lists of category ids) and every category's
    ``frequency`` (``r``, ``c`` or ``f``). ``images`` lacking the lists (or None) is refused."""
    if images is None or any(label not in images.columns for label in IMAGE_LABELS):
        raise InputError(f"{source}: the images have no 'neg_category_ids' and 'not_exhaustive_category_ids' "
                         "(an LVIS ground truth lists both for every image)")
    for label in IMAGE_LABELS:
        try:
            column = images.get_column(label).cast(_LABEL_TYPE)
        except pl.exceptions.PolarsError:
            raise InputError(f"{source}: images' '{label}' must be lists of category ids, got "
                             f"{images.schema[label]}") from None
        missing = images.filter(column.is_null() | column.list.eval(pl.element().is_null()).list.any())
        if missing.height:
            raise InputError(f"{source}: image {missing.get_column('image_id')[0]}: '{label}' is missing or not a "
                             f"list of category ids ({missing.height} image(s))")
    if "frequency" not in categories.columns:
        raise InputError(f"{source}: the categories have no 'frequency' (LVIS: 'r', 'c' or 'f')")
    bad = categories.filter(~pl.col("frequency").cast(pl.String).is_in(FREQUENCIES) | pl.col("frequency").is_null())
    if bad.height:
        raise InputError(f"{source}: category {bad.get_column('category_id')[0]}: 'frequency' must be 'r', 'c' or "
                         f"'f', got {bad.get_column('frequency')[0]!r}")


def _pairs(images: pl.DataFrame, column: str) -> pl.DataFrame:
    """``(image_id, category_id, shard)`` of an image label list."""
    return (images.select("image_id", pl.col(column).cast(_LABEL_TYPE).alias("category_id"), "shard")
            .explode("category_id").drop_nulls("category_id"))


def _by_shard(pairs: pl.DataFrame, n_shards: int) -> list:
    """``pairs`` split by shard, one ``(image_id, category_id)`` frame per shard (empty where it has none)."""
    parts = pairs.partition_by("shard", as_dict=True, include_key=False)
    empty = pairs.clear().drop("shard")
    return [parts.get((k,), empty) for k in range(n_shards)]


def federated(gt: pl.DataFrame, dt: pl.DataFrame, negative: pl.DataFrame, categories: np.ndarray,
              max_dets: int) -> tuple:
    """``(gt, gt_rows, rows)``: ``gt`` without crowd (lvis-api does not read ``iscrowd``), the rows of it lvis-api
    evaluates (of an evaluated category and area in (0, inf)) in the COCO matching's order (category, image, file
    order: :func:`~evalengine.match.coco.prepare_gt`'s) and the rows of ``dt`` it evaluates (ascending): the
    per-image cap, the area and category filters and the federated filter in one pass (:func:`_federated_kept`),
    handed to the COCO matching as rows, not copies. ``negative``: the shard's ``(image_id, category_id)`` of
    ``neg_category_ids``; ``categories``: the evaluated ids, sorted and distinct."""
    gt_image, gt_cat, kept = _evaluated_gt(gt, categories)
    gt_rows = kept[np.lexsort((column_array(gt, "gt_order")[kept], gt_image[kept], gt_cat[kept]))]
    known = _known_pairs(gt_image[kept], gt_cat[kept], negative, categories)
    rows = _federated_kept(column_array(dt, "image_id"), category_index(categories, column_array(dt, "category_id")),
                           column_array(dt, "score", np.float64), column_array(dt, "det_id"),
                           column_array(dt, "area", np.float64), *known, categories.shape[0], max_dets)
    return gt.with_columns(pl.lit(False).alias("iscrowd")), gt_rows, rows


class EvaluatedResults:
    """The results of a run lvis-api evaluates, picked as the run is read, before it is sharded
    (:func:`~evalengine.store.memory.memory_store`'s ``select``): the rows :func:`federated` keeps on their shards (an
    image's rows are all on one shard). A full LVIS run keeps about one result in ten; the others are let go batch by
    batch, only their images, scores and ids held for the per-image cap, decided once the whole run is read.
    ``images`` with ``neg_category_ids``; ``gt`` and ``categories`` as ingested. Called, a new run's selection."""

    def __init__(self, images: pl.DataFrame, categories: pl.DataFrame, gt: pl.DataFrame,
                 max_dets: int = LVIS_MAX_DETS):
        self.categories, self.max_dets = np.unique(column_array(categories, "category_id")), max_dets
        _, self.n_images, self.keys, self.slots = _distinct(column_array(images, "image_id"))
        gt_image, gt_cat, kept = _evaluated_gt(gt, self.categories)
        negative = images.select("image_id", pl.col("neg_category_ids").cast(_LABEL_TYPE).alias("category_id")
                                 ).explode("category_id").drop_nulls("category_id")
        known_image, known_cat = _known_pairs(gt_image[kept], gt_cat[kept], negative, self.categories)
        n_cat = self.categories.shape[0]
        self.dense = self.n_images * n_cat <= 64 * known_image.shape[0] + 65536
        self.pairs = _pair_set(self.keys, self.slots, self.n_images, known_image, known_cat, n_cat, self.dense)

    def __call__(self) -> "_Selection":
        return _Selection(self)


class _Selection:
    """One run's :class:`EvaluatedResults`: :meth:`rows` of each batch as it comes, :meth:`kept` once all are read."""

    def __init__(self, results: EvaluatedResults):
        self.results, self.index, self.score, self.det_id = results, [], [], []
        self.counts = np.zeros(results.n_images, np.int64)  # rows read per image

    def rows(self, frame: pl.DataFrame) -> np.ndarray:
        """The rows of a batch that may be evaluated (of a category known on their image, of area in (0, inf)); of
        every row, its image, score and id are kept for the cap."""
        r = self.results
        index = _indices(r.keys, r.slots, column_array(frame, "image_id"))
        self.index.append(index)
        self.counts += np.bincount(index[index >= 0], minlength=r.n_images)
        self.score.append(column_array(frame, "score", np.float64))
        self.det_id.append(column_array(frame, "det_id"))
        area = column_array(frame, "area", np.float64)
        known = _pairs_probe(index, category_index(r.categories, column_array(frame, "category_id")),
                             r.categories.shape[0], r.dense, *r.pairs)
        return np.flatnonzero(known & (area > 0) & (area < np.inf))

    def kept(self, held: np.ndarray) -> np.ndarray:
        """Whether each ``held`` row (its place in the order read, ascending) is among its image's ``max_dets``
        best of all the rows read (:func:`_cap`)."""
        if not held.shape[0] or self.counts.max(initial=0) <= self.results.max_dets:  # no image past the cap
            return np.ones(held.shape[0], np.bool_)
        capped = _cap(np.concatenate(self.index), self.results.n_images, np.concatenate(self.score),
                      np.concatenate(self.det_id), self.results.max_dets)
        self.index, self.score, self.det_id = [], [], []
        return capped[held]


def _evaluated_gt(gt: pl.DataFrame, categories: np.ndarray) -> tuple:
    """``(image_id, category index, rows)``: the ground truths' images and categories and the rows lvis-api evaluates
    (``get_ann_ids``: an evaluated category and area in (0, inf))."""
    gt_cat = category_index(categories, column_array(gt, "category_id"))
    gt_image, gt_area = column_array(gt, "image_id"), column_array(gt, "area", np.float64)
    return gt_image, gt_cat, np.flatnonzero((gt_cat >= 0) & (gt_area > 0) & (gt_area < np.inf))


def _known_pairs(gt_image, gt_cat, negative: pl.DataFrame, categories: np.ndarray) -> tuple:
    """``(image_id, category index)`` of the pairs where a category is known on an image: its evaluated ground
    truths' and its ``neg_category_ids``' (``negative``: ``(image_id, category_id)`` pairs)."""
    negative_image, negative_cat = _labelled(negative, categories)
    return np.concatenate([gt_image, negative_image]), np.concatenate([gt_cat, negative_cat])


def _labelled(pairs: pl.DataFrame, categories: np.ndarray) -> tuple:
    """``(image_id, category index)`` arrays of a frame of pairs (the index in ``categories``, −1 if not there)."""
    return column_array(pairs, "image_id"), category_index(categories, column_array(pairs, "category_id"))


@numba.njit(cache=True, nogil=True, inline="always")
def _slot(keys, slots, key):
    """Where ``key`` is, or would go, in an open-addressing table (``keys``; ``slots`` −1 where empty): Fibonacci
    hashing, linear probing."""
    mask = keys.shape[0] - 1
    at = np.int64((np.uint64(key) * np.uint64(0x9E3779B97F4A7C15)) >> np.uint64(32)) & mask
    while slots[at] >= 0 and keys[at] != key:
        at = (at + 1) & mask
    return at


@numba.njit(cache=True, nogil=True, inline="always")
def _table(n):
    """An empty table (``keys``, ``slots``) for ``n`` keys, at most half full."""
    size = 16
    while size < 2 * n:
        size *= 2
    return np.empty(size, np.int64), np.full(size, -1, np.int64)


@numba.njit(cache=True, nogil=True)
def _distinct(values):
    """``(index, n, keys, slots)``: each value's index among the distinct values (in order of first appearance), their
    number and the hash table that finds them (``slots[_slot(keys, slots, v)]``: v's index, −1 if absent)."""
    keys, slots = _table(values.shape[0])
    index = np.empty(values.shape[0], np.int64)
    n = 0
    for i in range(values.shape[0]):
        at = _slot(keys, slots, values[i])
        if slots[at] < 0:
            keys[at], slots[at] = values[i], n
            n += 1
        index[i] = slots[at]
    return index, n, keys, slots


@numba.njit(cache=True, nogil=True)
def _indices(keys, slots, values):
    """Each value's index in a table of :func:`_distinct` (−1 if not there)."""
    index = np.empty(values.shape[0], np.int64)
    for i in range(values.shape[0]):
        index[i] = slots[_slot(keys, slots, values[i])]
    return index


@numba.njit(cache=True, nogil=True)
def _pair_set(keys, slots, n_images, set_image, set_cat, n_cat, dense):
    """``(flags, pair_keys, pair_slots)``: the ``(set_image, set_cat)`` pairs whose image is in the table ``keys,
    slots`` (:func:`_distinct`'s, ``n_images`` of them; categories as indices, −1: none) as a flag per (image,
    category) where ``dense``, else as a hash table of ``image * n_cat + category``."""
    flags = np.zeros(n_images * n_cat if dense else 0, np.bool_)
    pair_keys, pair_slots = _table(0 if dense else set_image.shape[0])
    for j in range(set_image.shape[0]):
        image = slots[_slot(keys, slots, set_image[j])]
        if image >= 0 and set_cat[j] >= 0:
            key = image * n_cat + set_cat[j]
            if dense:
                flags[key] = True
            else:
                at = _slot(pair_keys, pair_slots, key)
                pair_keys[at], pair_slots[at] = key, 0
    return flags, pair_keys, pair_slots


@numba.njit(cache=True, nogil=True)
def _pairs_probe(index, cat, n_cat, dense, flags, pair_keys, pair_slots):
    """Whether each row's (image ``index``, category index ``cat``; −1: none) is a pair of :func:`_pair_set`'s."""
    known = np.zeros(index.shape[0], np.bool_)
    for i in range(index.shape[0]):
        if cat[i] >= 0 and index[i] >= 0:
            key = index[i] * n_cat + cat[i]
            known[i] = flags[key] if dense else pair_slots[_slot(pair_keys, pair_slots, key)] >= 0
    return known


@numba.njit(cache=True, nogil=True)
def _pairs_known(index, n_images, cat, keys, slots, set_image, set_cat, n_cat):
    """Whether each row's (image, category) is one of the set's pairs; rows' images as :func:`_distinct`'s
    ``index`` (``n_images`` of them) of its table ``keys, slots``, categories as indices (−1: none). The set is a
    flag per (image, category) where there are at most 64 of them per row (a table of a shard's images by the
    categories: one load per row), else a hash table of its pairs."""
    dense = n_images * n_cat <= 64 * index.shape[0] + 65536
    return _pairs_probe(index, cat, n_cat, dense, *_pair_set(keys, slots, n_images, set_image, set_cat, n_cat, dense))


@numba.njit(cache=True, nogil=True)
def _cap(index, n_images, score, det_id, max_dets):
    """Whether each row is among its image's ``max_dets`` best (``LVISResults.limit_dets_per_image``:
    ``sorted(key=score, reverse=True)``, stable, so file order, ``det_id``, breaks ties; counted over every
    detection); images as :func:`_distinct`'s ``index`` (``n_images`` of them; −1: an image of its own)."""
    n = index.shape[0]
    starts = np.zeros(n_images + 1, np.int64)
    for i in index:
        if i >= 0:
            starts[i + 1] += 1
    capped = np.ones(n, np.bool_)
    if n_images and starts.max() > max_dets:  # the crowded images' rows, grouped by image (a counting sort)
        for k in range(n_images):
            starts[k + 1] += starts[k]
        fill, rows, buffer = starts[:-1].copy(), np.empty(starts[-1], np.int64), np.empty(starts[-1], np.int64)
        for i in range(n):
            if index[i] >= 0:
                rows[fill[index[i]]] = i
                fill[index[i]] += 1
        for k in range(n_images):
            if starts[k + 1] - starts[k] > max_dets:
                sort_rows(rows[starts[k]:starts[k + 1]], buffer, score, det_id, det_id, True)
                capped[rows[starts[k] + max_dets:starts[k + 1]]] = False
    return capped


@numba.njit(cache=True, nogil=True)
def _pairs_in(image, cat, set_image, set_cat, n_cat):
    """Whether each ``(image[i], cat[i])`` is one of the ``(set_image, set_cat)`` pairs (categories as indices, −1:
    none)."""
    index, n_images, keys, slots = _distinct(image)
    return _pairs_known(index, n_images, cat, keys, slots, set_image, set_cat, n_cat)


@numba.njit(cache=True, nogil=True)
def _federated_kept(image, cat, score, det_id, area, known_image, known_cat, n_cat, max_dets):
    """The rows (ascending) of the detections lvis-api evaluates: each image's ``max_dets`` best (``LVISResults.
    limit_dets_per_image``: ``sorted(key=score, reverse=True)``, stable, so file order, ``det_id``, breaks ties;
    counted over every detection), then of an evaluated category (index ``cat`` ≥ 0), of area in (0, inf) and
    of a category known on the image (one of the ``known`` pairs: kept ground truths' and negative ones)."""
    n = image.shape[0]
    index, n_images, keys, slots = _distinct(image)
    capped = _cap(index, n_images, score, det_id, max_dets)
    known = _pairs_known(index, n_images, cat, keys, slots, known_image, known_cat, n_cat)
    kept = np.empty(n, np.int64)
    m = 0
    for i in range(n):
        if capped[i] and known[i] and area[i] > 0 and area[i] < np.inf:
            kept[m] = i
            m += 1
    return kept[:m]


def not_exhaustive(dt_matches: pl.DataFrame, flagged_pairs: pl.DataFrame, n_thr: int,
                   categories: np.ndarray) -> pl.DataFrame:
    """lvis-api ``evaluate_img``: where the image's ``not_exhaustive_category_ids`` list the category (a pair of
    ``flagged_pairs``), a detection without a true match (unmatched, or matched to ground-truth id 0) is ignored at
    every threshold and area range. ``categories``: :func:`federated`'s."""
    flagged = np.flatnonzero(_pairs_in(*_labelled(dt_matches, categories), *_labelled(flagged_pairs, categories),
                                       categories.shape[0]))
    if not flagged.size:
        return dt_matches
    tp = dt_matches.get_column("tp_bits").to_numpy()
    ignored = dt_matches.get_column("ignored_bits").to_numpy().copy()
    every = np.uint64((1 << n_thr) - 1)
    ignored[flagged] = every & ~tp[flagged]
    return dt_matches.with_columns(pl.Series("ignored_bits", ignored, dtype=pl.Array(pl.UInt64, tp.shape[1])))
