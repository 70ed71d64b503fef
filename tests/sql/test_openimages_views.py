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


def _tied_dataset(seed: int, n_classes: int = 3, n_images: int = 60):
    """Many images, few classes, scores on a coarse grid: well over 16 entries per class with equal scores, where
    NumPy's argsort (not stable) orders ties otherwise than a stable sort."""
    from tests.match.test_openimages_differential import _boxes, _near
    rng = np.random.default_rng(seed)
    groundtruth, detections = [], []
    for i in range(n_images):
        n_gt, n_dt = int(rng.integers(0, 5)), int(rng.integers(1, 9))
        gt_boxes, boxes = _boxes(rng, n_gt, bool(i % 2)), _boxes(rng, n_dt, bool(i % 2))
        if n_gt:
            near = rng.random(n_dt) < 0.7
            boxes[near] = _near(rng, gt_boxes, int(near.sum()))
        groundtruth.append({"image_key": f"img{i}", "groundtruth_boxes": gt_boxes,
                            "groundtruth_classes": rng.integers(1, n_classes + 1, n_gt),
                            "groundtruth_group_of": rng.random(n_gt) < 0.25,
                            "groundtruth_difficult": rng.random(n_gt) < 0.1,
                            "groundtruth_image_classes": np.arange(1, n_classes + 1)})
        detections.append({"image_key": f"img{i}", "detection_boxes": boxes,
                           "detection_scores": np.round(rng.random(n_dt) * 4) / 4,
                           "detection_classes": rng.integers(1, n_classes + 1, n_dt)})
    return n_classes, groundtruth, detections


def _stable_positions(entries: pl.DataFrame) -> pl.DataFrame:
    """Each entry's place in its class's curve under a stable descending sort (the view's order without a stored
    one)."""
    return entries.sort(["category_id", "score", "image_id", "side", "at"], descending=[False, True, True, True, True]
                        ).with_columns(pl.int_range(pl.len()).over("category_id").alias("stable"))


@pytest.mark.parametrize("seed", range(4))
def test_ap_view_exact_with_ties(tmp_path, seed):
    """With many tied scores per class the view follows the order the Python metric sorted (order.parquet, written by
    the accumulation) and equals it to 1e-12; the test checks that NumPy's order is not the stable one here."""
    from evalengine.evaluation.openimages import OpenImagesEvaluation
    from evalengine.metrics import openimages as oi_metrics
    from evalengine.store.paths import ORDER_FILE
    store = build_store(tmp_path / "s", *_tied_dataset(seed), n_shards=2)
    for protocol in (OpenImagesProtocol(group_of_weight=0.5), OpenImagesProtocol.v2()):
        key = protocol.match_key()
        evaluation = OpenImagesEvaluation(store.layout, "default", protocol,
                                          store.match(protocol, "default", scheduler="sync"))
        pending = store.sql(f"SELECT count(*) FROM openimages_entries WHERE protocol = '{key}' AND position IS NOT NULL")
        assert pending.item() == 0 and not (evaluation.matches_dir / ORDER_FILE).exists()
        expected = evaluation.per_class().sort("category_id")
        kept = pl.read_parquet(evaluation.matches_dir / ORDER_FILE)
        entries = oi_metrics.entries(evaluation.dt_matches(), evaluation.gt_matches(), protocol.group_of_weight)
        ranked = _stable_positions(entries.collect()).join(kept, on=["category_id", "image_id", "side", "at"])
        assert ranked.height == kept.height and ranked.group_by("category_id").len()["len"].min() > 16
        assert (ranked["position"] != ranked["stable"]).any()  # ties in NumPy's order, not a stable sort's
        found = store.sql(f"SELECT category_id, ap, tp, fp, num_gt FROM openimages_ap WHERE protocol = '{key}' "
                          f"ORDER BY category_id")
        np.testing.assert_allclose(found["ap"].to_numpy(), expected["ap"].to_numpy(), rtol=0, atol=1e-12,
                                   equal_nan=True)
        assert found["fp"].to_list() == expected["fp"].to_list()
        mean = store.sql(f"SELECT map FROM openimages_map WHERE protocol = '{key}'").item()
        assert mean == pytest.approx(evaluation.mean_ap(), abs=1e-12)


def test_fsck_keeps_a_good_order_table_and_removes_a_damaged_one(tmp_path):
    from evalengine.store.fsck import fsck
    from evalengine.store.paths import ORDER_FILE
    store = build_store(tmp_path / "s", *_tied_dataset(7, n_images=12), n_shards=2)
    evaluation = evaluate_store_openimages(store, OpenImagesProtocol(), scheduler="sync")
    target = evaluation.matches_dir / ORDER_FILE
    assert target.exists() and fsck(store.path) == []
    target.write_bytes(b"not parquet")
    findings = fsck(store.path, repair=True)
    assert [f.path for f in findings] == [str(target)] and "kept table unreadable" in findings[0].problem
    assert not target.exists() and (evaluation.matches_dir / "dt").is_dir()
    expected = evaluate_store_openimages(store, OpenImagesProtocol(), scheduler="sync").mean_ap()
    assert store.sql("SELECT map FROM openimages_map").item() == pytest.approx(expected, abs=1e-12)
