"""Schemas of every stored table, in one place, with the store's schema version.

Tables (see DESIGN.md): ``images``, ``categories``, ``gt`` (ground truth), ``dt`` (detections of a
run), ``runs`` and the match tables ``matches/protocol=P/run=R/{dt,gt}``. Boxes are COCO ``xywh``
in continuous pixel coordinates.
"""

import polars as pl

SCHEMA_VERSION = 1


def from_pixel_inclusive(x1, y1, x2, y2) -> tuple:
    """1-based inclusive pixel corners (PASCAL VOC, Hosang's toolbox) as the stored continuous ``x, y, w, h``
    (their "+1" IoU is then exactly the continuous IoU); NumPy arrays or Polars expressions."""
    return x1 - 1, y1 - 1, x2 - x1 + 1, y2 - y1 + 1

IMAGES = {
    "image_id": pl.Int64,
    "width": pl.Int64,
    "height": pl.Int64,
    "file_name": pl.String,
    "shard": pl.Int32,
}

CATEGORIES = {
    "category_id": pl.Int64,
    "name": pl.String,
    "supercategory": pl.String,
}

BOX = {"x": pl.Float64, "y": pl.Float64, "w": pl.Float64, "h": pl.Float64}

GT = {
    "gt_id": pl.Int64,
    "image_id": pl.Int64,
    "category_id": pl.Int64,
    **BOX,
    "area": pl.Float64,
    "iscrowd": pl.Boolean,
    # the COCO ``ignore`` field as given (pycocotools overwrites it with ``iscrowd``); null if absent
    "ignore": pl.Boolean,
    # PASCAL VOC's ``difficult`` flag (VOC XML, or a COCO annotation's ``difficult`` key); null if not given. The
    # ``voc`` protocol ignores difficult objects; stores written before it have no such column (read: not difficult)
    "difficult": pl.Boolean,
    # position in the source file: pycocotools keeps annotations of an image in file order
    "gt_order": pl.Int64,
}

DT = {
    # 1-based position in the result file, as pycocotools ``loadRes`` assigns ids
    "det_id": pl.Int64,
    "image_id": pl.Int64,
    "category_id": pl.Int64,
    "score": pl.Float64,
    **BOX,
    "area": pl.Float64,
}

# Shapes, on ``gt`` and ``dt`` (and the categories' keypoint names). A table whose input has none of a group has none of
# its columns — as stores written before them — so that boxes alone cost nothing; a row without one holds nulls.
# A mask is COCO's RLE as pycocotools holds it after ``annToRLE``/``loadRes``: the image's size and the run lengths
# (column-major, a run of 0s first) as COCO's compressed string (``rleToString``; the given string where the input was
# one), which shard tasks decode (4x less to write and read than the run lengths); ``polygon`` is the segmentation
# where it was a polygon list (``loadRes``'s box polygon for a result without one, in a file whose other results have
# masks). Stores written before kept the run lengths as ``mask_counts`` (List(UInt32)): :data:`LEGACY_MASK`.
MASK = {
    "mask_h": pl.Int32,
    "mask_w": pl.Int32,
    "mask_rle": pl.String,
    "polygon": pl.List(pl.List(pl.Float64)),
}
# ``[x1, y1, v1, …]`` as given; ``num_keypoints`` of a ground truth as given (pycocotools ignores those with 0)
KEYPOINTS = {"keypoints": pl.List(pl.Float64)}
GT_KEYPOINTS = {**KEYPOINTS, "num_keypoints": pl.Int64}
# a category's keypoint names and skeleton (pairs of 1-based keypoint indices) where given
CATEGORY_KEYPOINTS = {"keypoints": pl.List(pl.String), "skeleton": pl.List(pl.List(pl.Int64))}
# what a shard task reads only when its protocol names it (:meth:`evalengine.match.protocol.Protocol.input_columns`)
SHAPES = (*MASK, *GT_KEYPOINTS)
LEGACY_MASK = "mask_counts"

RUNS = {
    "run": pl.String,
    "kind": pl.String,
    "source": pl.String,
    "n_detections": pl.Int64,
    # KEY=VALUE labels of the run (its model, perturbation, …; see evalengine.store.tags), sorted by key
    "tags": pl.List(pl.Struct({"key": pl.String, "value": pl.String})),
}

# a proposal as read: 1-based position in the source, the score and category if given (null otherwise; the
# category is not used by the recall protocols, only by the coco protocol's pycocotools order)
PROPOSALS_RAW = {
    "image_id": pl.Int64,
    "proposal_id": pl.Int64,
    "score": pl.Float64,
    "category_id": pl.Int64,
    **BOX,
}

# a stored proposal run: ``rank`` is the 1-based position in the image after ordering and de-duplication
# (null for a duplicate, which is kept but never evaluated); rows are sorted by (image_id, rank)
PROPOSALS = {**PROPOSALS_RAW, "rank": pl.Int32}

# the proposal match table (Hosang et al.): one row per (evaluated ground truth, budget)
PROPOSAL_GT_MATCHES = {
    "image_id": pl.Int64,
    "gt_id": pl.Int64,
    "category_id": pl.Int64,
    "budget": pl.Int32,
    # IoU with the partner of the greedy one-to-one matching of the top-``budget`` proposals (0 if none)
    "iou": pl.Float64,
    "matched_rank": pl.Int32,
    # best IoU over the top-``budget`` proposals, one proposal may serve several ground truths
    "best_iou": pl.Float64,
    "best_rank": pl.Int32,
    # segmented proposals with F̃b asked for (Pont-Tuset & Marques §2.3): the best F̃b over the top-``budget``
    # proposals and the first rank giving it; null otherwise
    "best_fb": pl.Float64,
    "best_fb_rank": pl.Int32,
}

# a perturbed proposal run's images: ``homography`` (row-major 3×3) from the reference run's image to this
# one, in 1-based pixel coordinates, and both image sizes
PERTURBATIONS = {
    "image_id": pl.Int64,
    "homography": pl.Array(pl.Float64, 9),
    "width": pl.Int64,
    "height": pl.Int64,
    "ref_width": pl.Int64,
    "ref_height": pl.Int64,
}

# repeatability (Hosang et al. §3): one row per reference proposal of the top N; ``iou`` with its greedy partner
# among the perturbed proposals projected back (0 if none), null when not evaluated (centre outside the other
# image, or no proposal on one side)
REPEATABILITY_MATCHES = {
    "image_id": pl.Int64,
    "rank": pl.Int32,
    "size_bin": pl.Int32,
    "valid": pl.Boolean,
    "touches_gt": pl.Boolean,
    "iou": pl.Float64,
    "matched_rank": pl.Int32,
}

# proposals evaluated per image and budget: min(budget, ranked proposals of the image)
PROPOSAL_IMAGE_COUNTS = {
    "image_id": pl.Int64,
    "budget": pl.Int32,
    "n_proposals": pl.Int32,
}


def dt_matches_schema(n_areas: int, n_thresholds: int) -> dict:
    """One row per evaluated detection. ``tp_bits[a]`` / ``ignored_bits[a]`` hold bit ``t`` set when the
    detection is a true positive / ignored at IoU threshold ``t`` in area range ``a``; a false positive is
    neither. ``matched_gt_id[t]`` / ``matched_iou[t]`` give the partner in the first area range (null if none);
    ``area_iou[a]`` is the partner's IoU at the first threshold in area range ``a`` (null if none)."""
    return {
        "image_id": pl.Int64,
        "category_id": pl.Int64,
        "det_id": pl.Int64,
        "score": pl.Float64,
        "dt_rank": pl.Int32,
        "tp_bits": pl.Array(pl.UInt64, n_areas),
        "ignored_bits": pl.Array(pl.UInt64, n_areas),
        "matched_gt_id": pl.Array(pl.Int64, n_thresholds),
        "matched_iou": pl.Array(pl.Float64, n_thresholds),
        "area_iou": pl.Array(pl.Float64, n_areas),
    }


# the columns of :func:`dt_matches_schema` that name each detection's partner: export, TIDE, confusion, LRP,
# invariance, the SQL views and ``evalImgs`` read them, AP does not; a match table held in memory for AP alone leaves
# them out (:func:`evalengine.engine.planner.match`), a stored one always has them
PARTNER_COLUMNS = ("matched_gt_id", "matched_iou", "area_iou")


def gt_matches_schema(n_areas: int) -> dict:
    """One row per ground truth of an evaluated category. ``ignored_bits`` has bit ``a`` set when it is ignored
    in area range ``a`` (crowd, or area outside); ``matched_bits[a]`` has bit ``t`` set when it is matched at
    IoU threshold ``t`` in area range ``a``."""
    return {
        "image_id": pl.Int64,
        "category_id": pl.Int64,
        "gt_id": pl.Int64,
        "ignored_bits": pl.UInt64,
        "matched_bits": pl.Array(pl.UInt64, n_areas),
    }

def analyze_dt_schema(n_areas: int) -> dict:
    """COCO analyze (:mod:`evalengine.match.analyze`): one row per evaluated detection; ``tp_bits[a]`` /
    ``ignored_bits[a]`` hold bit ``t`` set when it is a true positive / ignored in the evaluation of curve ``t``
    (``MATCHED``: Loc, C50, C75, Sim, Oth) in area range ``a``; neither is a false positive."""
    kept = ("image_id", "category_id", "det_id", "score", "dt_rank", "tp_bits", "ignored_bits")
    return {name: dtype for name, dtype in dt_matches_schema(n_areas, 1).items() if name in kept}


def analyze_gt_schema() -> dict:
    """One row per ground truth of an evaluated category; ``ignored_bits`` bit ``a``: ignored in area range ``a`` by
    MATLAB's rule (crowd, ``ignore`` set, or area outside)."""
    return {name: dtype for name, dtype in gt_matches_schema(1).items() if name != "matched_bits"}


# candidate pairs (:mod:`evalengine.match.pairs`): every (detection, ground truth) pair of any classes in an image
# with box IoU >= the protocol's ``min_iou`` (crowd: intersection over the detection's area, as pycocotools)
PAIRS = {
    "image_id": pl.Int64,
    "det_id": pl.Int64,
    "gt_id": pl.Int64,
    "dt_category_id": pl.Int64,
    "gt_category_id": pl.Int64,
    "iou": pl.Float64,
    "gt_iscrowd": pl.Boolean,
}

# TIDE's matching (:mod:`evalengine.match.tide`): one row per detection kept (the top ``max_dets`` of its image);
# ``outcome`` 0 false positive, 1 true positive, 2 ignored; ``error`` the code of tidecv's error type (1 Cls,
# 2 Loc, 3 Both, 4 Dupe, 5 Bkg; 0 none); ``target_gt_id`` the matched ground truth, or the Cls/Loc error's target;
# ``fix_category_id`` the class of the true positive its fix makes (null: fixing it removes it)
TIDE_DT = {
    "image_id": pl.Int64,
    "category_id": pl.Int64,
    "det_id": pl.Int64,
    "score": pl.Float64,
    "outcome": pl.Int8,
    "error": pl.Int8,
    "target_gt_id": pl.Int64,
    "fix_category_id": pl.Int64,
}

# one row per non-crowd ground truth: ``used`` (matched), ``missed`` (unused and no Cls/Loc error aims at it)
TIDE_GT = {
    "image_id": pl.Int64,
    "category_id": pl.Int64,
    "gt_id": pl.Int64,
    "used": pl.Boolean,
    "missed": pl.Boolean,
}

# Borji & Iranmanesh's diagnosis (:mod:`evalengine.match.borji`): one row per detection of an evaluated category;
# ``label`` the code of ``tp``, ``cls_bg``, ``loc``, ``dup``, ``ignored`` (in that order, from 0); ``target_gt_id`` the
# matched target (tp), the snap target (loc), the target of largest IoU (cls_bg, dup; null if none overlaps) or the
# crowd region (ignored); ``matched_gt_id`` the S3 partner (null: removed at S3); ``iou_max`` the largest IoU with a
# target of the original box; ``area`` the area its size is attributed by (the target's; a cls_bg or ignored one's own)
BORJI_DT = {
    "image_id": pl.Int64,
    "category_id": pl.Int64,
    "det_id": pl.Int64,
    "score": pl.Float64,
    "label": pl.Int8,
    "target_gt_id": pl.Int64,
    "matched_gt_id": pl.Int64,
    "iou_max": pl.Float64,
    "area": pl.Float64,
}

# one row per ground truth of an evaluated category: ``label`` the code of ``matched``, ``miss``, ``ignored`` (crowd);
# ``matched_det_id`` its S3 partner
BORJI_GT = {
    "image_id": pl.Int64,
    "category_id": pl.Int64,
    "gt_id": pl.Int64,
    "area": pl.Float64,
    "label": pl.Int8,
    "matched_det_id": pl.Int64,
}

# the confusion matrix's cells (:mod:`evalengine.match.confusion`): one row per counted object — a kept detection
# (``gt_category_id`` null on the background row; ``gt_id``, ``iou``: its true positive's or confusion's partner) or a
# missed ground truth (``dt_category_id``, ``det_id``, ``score`` null)
CONFUSION = {
    "image_id": pl.Int64,
    "gt_category_id": pl.Int64,
    "dt_category_id": pl.Int64,
    "det_id": pl.Int64,
    "gt_id": pl.Int64,
    "score": pl.Float64,
    "iou": pl.Float64,
}

# partitions (label maps, :mod:`evalengine.io.partitions`): column-major runs of region ids (numbered by first
# appearance in a row-major scan; -1 void). Ground truth: one partition per annotator (1-based) of an image; a
# partition run: one per image and ``parameter`` (a hierarchy's threshold, a sweep's value)
PARTITION_RUNS = {"start": pl.Int64, "length": pl.Int64, "label": pl.Int32}
GT_PARTITIONS = {"image_id": pl.Int64, "annotator": pl.Int32, **PARTITION_RUNS}
SEG_PARTITIONS = {"image_id": pl.Int64, "parameter": pl.Float64, **PARTITION_RUNS}
# the partition match table (spec §9.2): the non-zero cells of the contingency table of each (image, parameter,
# annotator) over the valid pixels, in that order then (seg_region, gt_region); with Fop's candidate flags of the
# cell's two regions (SEISM fop.hpp's area-percentile filter, spec §4.4.3)
CONTINGENCY = {"image_id": pl.Int64, "parameter": pl.Float64, "annotator": pl.Int32, "seg_region": pl.Int32,
               "gt_region": pl.Int32, "n": pl.Int64, "seg_candidate": pl.Boolean, "gt_candidate": pl.Boolean}
# the partition match table's per-pair side: BGM's distance (spec §4.1.4), the pixels a one-to-one region matching
# cannot keep, solved at match time so that SQL reads it as a column
PARTITION_PAIRS = {"image_id": pl.Int64, "parameter": pl.Float64, "annotator": pl.Int32, "bgm_distance": pl.Int64}
# the partition boundary table (Fb, spec §4.3): per (image, parameter) the boundary kernel's four counts against all
# the image's annotators (machine boundary pixels matched by any annotator, all of them; annotator pixels matched,
# all of them, both summed over annotators)
PARTITION_BOUNDARY = {"image_id": pl.Int64, "parameter": pl.Float64, "fb_matched_pred": pl.Int64,
                      "fb_n_pred": pl.Int64, "fb_matched_gt": pl.Int64, "fb_n_gt": pl.Int64}

# OpenImages (:mod:`evalengine.io.openimages`). Ground truth and detections keep the CSV's normalised corners exactly
# (``x`` = XMin, ``y`` = YMin and these two; ``w``, ``h`` are their differences), since the reference compares boxes
# on them; a ground truth's ``iscrowd`` is its IsGroupOf. Categories carry the class's display name.
OPENIMAGES_CORNERS = {"x_max": pl.Float64, "y_max": pl.Float64}
OPENIMAGES_CATEGORIES = {**CATEGORIES, "display_name": pl.String}
# verified image-level labels after the hierarchy expansion, sharded by image: ``confidence`` 1 (positive) or 0
IMAGE_LABELS = {"image_id": pl.Int64, "category_id": pl.Int64, "confidence": pl.Int8}
# the class hierarchy's links, once each: ``kind`` is ``Subcategory`` or ``Part``; the root (not a category) has a
# null id
CATEGORY_EDGES = {"parent_id": pl.Int64, "child_id": pl.Int64, "parent_name": pl.String, "child_name": pl.String,
                  "kind": pl.String}
# the OpenImages match tables (:mod:`evalengine.match.openimages`): ``outcome`` 0 false positive, 1 true positive,
# 2 ignored (difficult), 3 ignored (inside a group-of box); a group-of box's ``group_score`` is the largest score of
# its detections (from 0, as the reference's ``scores_group_of``; null if none)
OPENIMAGES_DT_MATCHES = {**dt_matches_schema(1, 1), "outcome": pl.Int8}
# ``corloc``: its (class, image)'s top-scoring detection has IoU >= the threshold with a ground truth there (CorLoc)
OPENIMAGES_GT_MATCHES = {**gt_matches_schema(1), "group_of": pl.Boolean, "group_score": pl.Float64,
                         "corloc": pl.Boolean}
