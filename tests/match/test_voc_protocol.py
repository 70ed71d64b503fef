"""The VOC protocol's rules on hand-made cases: the MATLAB devkit's ``>=`` at an IoU exactly equal to the threshold
(``>`` with ``strict``), no fall-back to another free ground truth, difficult objects, the file-order tie, the match
table's schemas and order, keys and parameters."""

import math

import polars as pl
import pytest

from evalengine import schema
from evalengine.errors import ProtocolError
from evalengine.match.voc import VocProtocol, match_shard


def _gt(rows):
    """``rows``: ``(gt_id, image_id, category_id, x1, y1, x2, y2, difficult)`` with devkit corners."""
    frame = pl.DataFrame(rows, schema=["gt_id", "image_id", "category_id", "x1", "y1", "x2", "y2", "difficult"],
                         orient="row")
    x, y, w, h = schema.from_pixel_inclusive(*(pl.col(c).cast(pl.Float64) for c in ("x1", "y1", "x2", "y2")))
    return frame.with_row_index("gt_order").select("gt_id", "image_id", "category_id", x.alias("x"), y.alias("y"),
                                                    w.alias("w"), h.alias("h"), "difficult",
                                                    pl.col("gt_order").cast(pl.Int64))


def _dt(rows):
    """``rows``: ``(det_id, image_id, category_id, score, x1, y1, x2, y2)``."""
    frame = pl.DataFrame(rows, schema=["det_id", "image_id", "category_id", "score", "x1", "y1", "x2", "y2"],
                         orient="row")
    x, y, w, h = schema.from_pixel_inclusive(*(pl.col(c).cast(pl.Float64) for c in ("x1", "y1", "x2", "y2")))
    return frame.select("det_id", "image_id", "category_id", pl.col("score").cast(pl.Float64), x.alias("x"),
                        y.alias("y"), w.alias("w"), h.alias("h"))


def _outcomes(dt_matches):
    """``{det_id: 'tp' | 'fp' | 'ignored'}`` at the first threshold."""
    return {d: "tp" if tp & 1 else "ignored" if ig & 1 else "fp" for d, tp, ig in
            zip(dt_matches["det_id"], dt_matches["tp_bits"].arr.first(), dt_matches["ignored_bits"].arr.first())}


def test_iou_equal_to_the_threshold():
    """Ground truth 1..10 × 1..10 (100 pixels), detection 1..10 × 1..5 (50 pixels, all inside): IoU exactly 0.5 —
    a TP under the MATLAB devkit's ``ov >= 0.5``, a FP under voc_eval.py's ``ovmax > 0.5``."""
    gt = _gt([(1, 1, 1, 1, 1, 10, 10, False)])
    dt = _dt([(1, 1, 1, 0.9, 1, 1, 10, 5)])
    matches, _ = match_shard(gt, dt, [1], VocProtocol())
    assert matches["matched_iou"].to_list() == [[0.5]]
    assert _outcomes(matches) == {1: "tp"}
    assert _outcomes(match_shard(gt, dt, [1], VocProtocol(strict=True))[0]) == {1: "fp"}


def test_no_fall_back_to_a_free_ground_truth_and_difficult_objects():
    """Detection 2's best ground truth is taken by detection 1: a duplicate FP, although ground truth 2 is free with
    IoU > 0.5 (COCO would match it). Detection 3's best is difficult: ignored, and its partner recorded."""
    gt = _gt([(1, 1, 1, 1, 1, 10, 10, False), (2, 1, 1, 1, 1, 10, 9, False), (3, 1, 1, 50, 50, 60, 60, True)])
    dt = _dt([(1, 1, 1, 0.9, 1, 1, 10, 10), (2, 1, 1, 0.8, 1, 1, 10, 10), (3, 1, 1, 0.7, 50, 50, 60, 60)])
    matches, gt_matches = match_shard(gt, dt, [1], VocProtocol())
    assert _outcomes(matches) == {1: "tp", 2: "fp", 3: "ignored"}
    assert matches["matched_gt_id"].to_list() == [[1], [None], [3]]
    assert matches["area_iou"].to_list() == [[1.0], [None], [1.0]]
    assert gt_matches["ignored_bits"].to_list() == [0, 0, 1]
    assert gt_matches["matched_bits"].to_list() == [[1], [0], [0]]
    counted = match_shard(gt, dt, [1], VocProtocol(use_difficult=True))
    assert _outcomes(counted[0])[3] == "tp" and counted[1]["ignored_bits"].to_list() == [0, 0, 0]


def test_ties_keep_file_order_and_first_maximum():
    """Equal scores: the earlier detection (det_id) goes first and takes the ground truth; equal IoU with two ground
    truths: the first in file order is the partner."""
    gt = _gt([(7, 1, 1, 1, 1, 10, 10, False), (8, 1, 1, 1, 1, 10, 10, False)])
    dt = _dt([(5, 1, 1, 0.5, 1, 1, 10, 10), (3, 1, 1, 0.5, 1, 1, 10, 10), (4, 1, 1, 0.6, 30, 30, 40, 40)])
    matches, _ = match_shard(gt, dt, [1], VocProtocol())
    assert matches["det_id"].to_list() == [4, 3, 5]
    assert matches["dt_rank"].to_list() == [0, 1, 2]
    assert _outcomes(matches) == {4: "fp", 3: "tp", 5: "fp"}
    assert matches["matched_gt_id"].to_list()[1] == [7]


def test_table_schema_rows_and_thresholds():
    """The COCO match-table schemas with one area slot; rows by (category, image, −score, det_id); one bit per
    threshold; detections of an image without ground truth of their class are FPs."""
    gt = _gt([(1, 2, 1, 1, 1, 10, 10, False), (2, 1, 2, 1, 1, 10, 10, False)])
    dt = _dt([(1, 2, 1, 0.3, 1, 1, 10, 8), (2, 1, 1, 0.9, 1, 1, 10, 10), (3, 1, 2, 0.1, 1, 1, 10, 10),
              (4, 2, 1, 0.8, 1, 1, 10, 10)])
    matches, gt_matches = match_shard(gt, dt, [1, 2], VocProtocol(iou_thresholds=(0.5, 0.75, 0.9)))
    assert matches.schema == pl.Schema(schema.dt_matches_schema(1, 3))
    assert gt_matches.schema == pl.Schema(schema.gt_matches_schema(1))
    assert matches.select("category_id", "image_id", "det_id").rows() == [(1, 1, 2), (1, 2, 4), (1, 2, 1), (2, 1, 3)]
    assert matches["tp_bits"].to_list() == [[0], [7], [0], [7]]
    assert matches["matched_iou"].to_list()[1] == [1.0, 1.0, 1.0]


def test_store_without_difficult_column():
    """Ground truth stored before the column existed reads as not difficult."""
    gt = _gt([(1, 1, 1, 1, 1, 10, 10, True)]).drop("difficult")
    matches, gt_matches = match_shard(gt, _dt([(1, 1, 1, 0.9, 1, 1, 10, 10)]), [1], VocProtocol())
    assert _outcomes(matches) == {1: "tp"} and gt_matches["ignored_bits"].to_list() == [0]


def test_keys_and_parameters():
    assert VocProtocol().match_key() == "voc"
    assert VocProtocol(strict=True).match_key().startswith("voc-")
    assert VocProtocol(iou_thresholds=[0.5]).match_key() == "voc"
    assert VocProtocol().area_ranges == (("all", 0.0, math.inf),)
    assert VocProtocol.tie_order == ("det_id",) and VocProtocol.sides == ("dt", "gt")
    for bad in ({"iou_thresholds": (0.7, 0.5)}, {"iou_thresholds": (0.0,)}, {"iou_thresholds": (float("nan"),)},
                {"iou_thresholds": ()}, {"strict": "yes"}, {"use_difficult": 1}):
        with pytest.raises(ProtocolError):
            VocProtocol(**bad)
