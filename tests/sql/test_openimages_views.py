"""The OpenImages SQL views equal the Python API (AP per class, mAP, counts) where a class's scores are distinct, and
the OpenImages tables (image_labels, category_edges) are views of their own."""

import numpy as np
import polars as pl
import pytest

from evalengine.api import open as open_store
from evalengine.api.openimages import evaluate_store_openimages
from evalengine.match.openimages import OpenImagesProtocol
from tests.cli.test_openimages_cli import DESCRIPTIONS, HIERARCHY, write_challenge_files
from tests.match.test_openimages_differential import random_dataset
from tests.openimages_cases import build_store


@pytest.mark.parametrize("seed", range(1, 16, 3))
def test_ap_view_equals_python(tmp_path, seed):
    n_classes, groundtruth, detections = random_dataset(seed)
    rng = np.random.default_rng(seed)
    for d in detections:  # distinct scores: the SQL tie order is the stable one
        d["detection_scores"] = rng.permutation(len(d["detection_scores"])) + rng.random() * 0.5 + 1000 * len(d["image_key"])
        d["detection_scores"] = d["detection_scores"] + rng.random(len(d["detection_scores"])) * 1e-3
    if not groundtruth:
        groundtruth = [{"image_key": "only", "groundtruth_boxes": np.zeros((0, 4)), "groundtruth_classes": np.zeros(0, int)}]
    store = build_store(tmp_path / "s", n_classes, groundtruth, detections, n_shards=2)
    for protocol in (OpenImagesProtocol(group_of_weight=0.5), OpenImagesProtocol.v2()):
        evaluation = evaluate_store_openimages(store, protocol, scheduler="sync")
        expected = evaluation.per_class().sort("category_id")
        found = store.sql(f"SELECT category_id, ap, tp, fp, num_gt FROM openimages_ap "
                          f"WHERE protocol = '{protocol.match_key()}' ORDER BY category_id")
        np.testing.assert_allclose(found["ap"].to_numpy(), expected["ap"].to_numpy(), rtol=0, atol=1e-12,
                                   equal_nan=True)
        np.testing.assert_allclose(found["num_gt"].to_numpy(), expected["num_gt"].to_numpy(), rtol=0, atol=0)
        np.testing.assert_allclose(found["tp"].to_numpy(), expected["tp"].to_numpy(), rtol=0, atol=1e-12)
        assert found["fp"].to_list() == expected["fp"].to_list()
        mean = store.sql(f"SELECT map FROM openimages_map WHERE protocol = '{protocol.match_key()}'").item()
        assert (mean is None and np.isnan(evaluation.mean_ap())) or mean == pytest.approx(evaluation.mean_ap(), abs=1e-12)


def test_hierarchy_and_label_views(tmp_path):
    from evalengine.api.openimages import ingest_openimages
    paths = write_challenge_files(tmp_path, 2)
    store = ingest_openimages(paths["boxes"], paths["labels"], HIERARCHY, paths["predictions"], tmp_path / "s",
                              class_descriptions=DESCRIPTIONS)
    edges = store.sql("SELECT kind, count(*) AS n FROM category_edges GROUP BY kind ORDER BY kind")
    assert edges.rows() == [("Part", 38), ("Subcategory", 647)]  # the shared testdata README's counts
    assert store.sql("SELECT count(*) FROM category_edges WHERE parent_id IS NULL").item() == 90  # the root's
    spoon = store.sql("SELECT display_name FROM categories WHERE name = '/m/0cmx8'").item()
    assert spoon == "Spoon"
    labels = store.sql("SELECT count(*) FROM image_labels").item()
    assert labels == pl.read_parquet(str(tmp_path / "s" / "image_labels" / "*" / "*.parquet")).height > 0
    coco_store = open_store(tmp_path / "s")
    assert "image_labels" in coco_store.sql("SELECT table_name FROM information_schema.tables").get_column(
        "table_name").to_list()
