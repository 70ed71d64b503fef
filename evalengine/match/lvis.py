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

import numpy as np
import polars as pl

from evalengine.errors import InputError, ProtocolError, check_option
from evalengine.match import coco
from evalengine.match.groups import rank_in_group
from evalengine.match.protocol import column_array
from evalengine.match.shapes import SHAPE_COLUMNS, places, sources, with_shapes

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
        return [{**files, **{side: labels[side][k] for side in LABEL_INPUTS}} for k, files in enumerate(inputs)], context

    def match_shard(self, tables: dict, context: dict) -> dict:
        shapes = SHAPE_COLUMNS[self.iou_type]
        dt = with_shapes(tables["dt"], tables.get("dt_shapes"), shapes["dt"])
        gt = with_shapes(tables["gt"], tables.get("gt_shapes"), shapes["gt"])
        gt, dt = federated(gt, dt, tables["negative"], context["category_ids"], self.max_dets[0])
        dt_matches, gt_matches = coco.match_shard(gt, dt, context["category_ids"], self, places(context))
        return {"dt": not_exhaustive(dt_matches, tables["not_exhaustive"], len(self.iou_thresholds)),
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


def federated(gt: pl.DataFrame, dt: pl.DataFrame, negative: pl.DataFrame, category_ids, max_dets: int) -> tuple:
    """``(gt, dt)`` as lvis-api evaluates them (the module's list): the per-image cap, the area and category filters,
    the federated filter. ``negative``: the shard's ``(image_id, category_id)`` of ``neg_category_ids``."""
    evaluated = pl.Series(category_ids, dtype=pl.Int64).implode()
    kept = pl.col("category_id").is_in(evaluated) & (pl.col("area") > 0) & (pl.col("area") < np.inf)
    gt = gt.filter(kept).with_columns(pl.lit(False).alias("iscrowd"))
    dt = _cap_per_image(dt, max_dets).filter(kept)
    known = pl.concat([negative, gt.select("image_id", "category_id")])
    return gt, dt.join(known, on=["image_id", "category_id"], how="semi")


def _cap_per_image(dt: pl.DataFrame, max_dets: int) -> pl.DataFrame:
    """``LVISResults.limit_dets_per_image``: the ``max_dets`` best of each image, ``sorted(key=score, reverse=True)``
    (stable: file order breaks ties); only the images above the cap are sorted."""
    crowded = dt.group_by("image_id").len().filter(pl.col("len") > max_dets).get_column("image_id")
    if not crowded.len():
        return dt
    over = pl.col("image_id").is_in(crowded.implode())
    score = pl.col("score") + 0.0  # -0.0 ties with 0.0, as in Python's sort
    ranked = dt.filter(over).sort([pl.col("image_id"), score, pl.col("det_id")], descending=[False, True, False])
    image = column_array(ranked, "image_id")
    return pl.concat([dt.filter(~over), ranked.filter(rank_in_group(image, np.zeros_like(image)) < max_dets)])


def not_exhaustive(dt_matches: pl.DataFrame, flagged_pairs: pl.DataFrame, n_thr: int) -> pl.DataFrame:
    """lvis-api ``evaluate_img``: where the image's ``not_exhaustive_category_ids`` list the category (a pair of
    ``flagged_pairs``), a detection without a true match (unmatched, or matched to ground-truth id 0) is ignored at
    every threshold and area range."""
    flagged = (dt_matches.select("image_id", "category_id").with_row_index()
               .join(flagged_pairs, on=["image_id", "category_id"], how="semi")
               .get_column("index").to_numpy())
    if not flagged.size:
        return dt_matches
    tp = dt_matches.get_column("tp_bits").to_numpy()
    ignored = dt_matches.get_column("ignored_bits").to_numpy().copy()
    every = np.uint64((1 << n_thr) - 1)
    ignored[flagged] = every & ~tp[flagged]
    return dt_matches.with_columns(pl.Series("ignored_bits", ignored, dtype=pl.Array(pl.UInt64, tp.shape[1])))
