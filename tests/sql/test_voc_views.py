"""``voc_ap`` (the COCO accumulation's steps read with the devkit's order and precision) equals the Python VOC metrics
(VOC07 and VOC12 AP, TP, FP, non-difficult ground truths) on random VOC datasets written as XML and devkit result
files: tied scores, difficult objects, empty images, classes whose objects are all difficult or that have no
detection, several IoU thresholds, ``strict`` and ``use_difficult``, two protocols in one store."""

import numpy as np
import polars as pl
import pytest

from evalengine.api import VocProtocol, evaluate_store_voc, ingest_voc
from tests.match.test_voc_differential import THRESHOLDS, random_dataset
from tests.voc_files import write_annotations, write_results


@pytest.mark.parametrize("seed", range(12))
def test_voc_ap_view_equals_python(tmp_path, seed):
    rng = np.random.default_rng(1000 + seed)
    images, detections = random_dataset(rng)
    store = ingest_voc(write_annotations(tmp_path / "Annotations", images),
                       write_results(tmp_path / "results", detections), tmp_path / "store", n_shards=1 + seed % 3)
    protocols = (VocProtocol(iou_thresholds=THRESHOLDS, strict=bool(seed % 2), use_difficult=seed % 4 == 3),
                 VocProtocol())
    for protocol in protocols:
        evaluation = evaluate_store_voc(store, protocol)
        sql = store.sql(f"SELECT * FROM voc_ap WHERE protocol = '{protocol.match_key()}' "
                        "ORDER BY category_id, iou_threshold")
        for metric in ("voc07", "voc12"):
            python = evaluation.per_class(metric).sort("category_id", "iou_threshold")
            assert sql.height == python.height > 0
            for column in ("category_id", "iou_threshold", "tp", "fp", "n_gt"):
                assert sql[column].cast(pl.Float64).to_list() == python[column].cast(pl.Float64).to_list(), column
            np.testing.assert_allclose(sql[f"ap_{metric}"].to_numpy(), python["ap"].to_numpy(), rtol=0, atol=1e-12)
