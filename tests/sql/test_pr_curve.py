"""The ``pr_curve`` view, point by point, against pycocotools' ``accumulate`` written out over the match table (NumPy):
per (category, area range, max dets) the detections ranked below the cap in each image, in the order score
descending, image id, rank (``np.argsort(-scores, kind='mergesort')`` over images in id order), then per IoU threshold
``tps = dtm & ~dtIg``, ``fps = ~dtm & ~dtIg``, their running sums, recall ``tp / npig`` and precision
``tp / (tp + fp + spacing(1))``, the ignored detections left out; curves of categories without regular ground truth
left out."""

import numpy as np
import polars as pl
import pytest

from evalengine.api import ingest_coco
from evalengine.match.coco import CocoProtocol
from evalengine.store.paths import CURVE_FILE
from tests.generators import random_coco
from tests.helpers import write_inputs

KEYS = ["category_id", "iou_threshold", "area_range", "max_dets", "image_id", "dt_rank"]


def _reference(evaluation) -> pl.DataFrame:
    protocol = evaluation.protocol
    dt = evaluation.dt_matches().collect()
    gt = evaluation.gt_matches().collect()
    if not protocol.use_cats:
        dt = dt.with_columns(category_id=pl.lit(-1, dt.schema["category_id"]))
        gt = gt.with_columns(category_id=pl.lit(-1))
    dt = dt.sort(["category_id", "score", "image_id", "dt_rank"], descending=[False, True, False, False])
    rows = []
    for category_id in dt["category_id"].unique().sort():
        own = dt.filter(pl.col("category_id") == category_id)
        truths = gt.filter(pl.col("category_id") == category_id)["ignored_bits"].to_numpy().astype(np.int64)
        for a, (area_range, _, _) in enumerate(protocol.area_ranges):
            n_gt = int(((truths >> a) & 1 == 0).sum())
            if n_gt == 0:
                continue
            tp_bits = np.array([bits[a] for bits in own["tp_bits"]], dtype=np.int64)
            ignored_bits = np.array([bits[a] for bits in own["ignored_bits"]], dtype=np.int64)
            for max_dets in protocol.max_dets:
                kept = own["dt_rank"].to_numpy() < max_dets
                for t, iou_threshold in enumerate(protocol.iou_thresholds):
                    ignored = ((ignored_bits >> t) & 1 == 1)[kept]
                    is_tp = ((tp_bits >> t) & 1 == 1)[kept]
                    tps = np.cumsum(is_tp & ~ignored)[~ignored]
                    fps = np.cumsum(~is_tp & ~ignored)[~ignored]
                    rows.append(pl.DataFrame({
                        "category_id": np.full(tps.size, category_id),
                        "iou_threshold": np.full(tps.size, iou_threshold),
                        "area_range": [area_range] * tps.size, "max_dets": np.full(tps.size, max_dets),
                        "image_id": own["image_id"].to_numpy()[kept][~ignored],
                        "dt_rank": own["dt_rank"].to_numpy()[kept][~ignored],
                        "is_tp": is_tp[~ignored], "tp": tps, "fp": fps, "recall": tps / n_gt,
                        "precision": tps / (tps + fps + np.spacing(1))}))
    return pl.concat(rows, how="vertical_relaxed")


@pytest.mark.parametrize("seed", [1, 2, 5, 7, 11, 13, 21, 34])
@pytest.mark.parametrize("protocol", [CocoProtocol(), CocoProtocol(use_cats=False, max_dets=(1, 10, 1000)),
                                      CocoProtocol(max_dets=(2, 3), iou_thresholds=(0.3, 0.5, 0.9))])
@pytest.mark.parametrize("accumulated", [False, True])
def test_pr_curve_point_by_point(tmp_path, seed, protocol, accumulated):
    """Computed in SQL (only matched), and read from the counts kept when the run's AP is computed (curve.parquet)."""
    gt, dt = random_coco(seed)
    store = ingest_coco(*write_inputs(tmp_path, gt, dt), tmp_path / "store", n_shards=2)
    evaluation = store.evaluate(protocol)
    if accumulated:
        evaluation.ap_table()
    assert (evaluation.matches_dir / CURVE_FILE).exists() == accumulated
    view = store.sql(f"SELECT * FROM pr_curve WHERE protocol = '{protocol.match_key()}'")
    expected = _reference(evaluation)
    assert view.height == expected.height
    joined = expected.join(view, on=KEYS, how="left", suffix="_view")
    for column in ("is_tp", "tp", "fp"):
        assert joined[column].cast(pl.Int64).to_list() == joined[f"{column}_view"].cast(pl.Int64).to_list(), column
    for column in ("recall", "precision"):
        np.testing.assert_allclose(joined[f"{column}_view"].to_numpy(), joined[column].to_numpy(), rtol=0, atol=1e-12)
