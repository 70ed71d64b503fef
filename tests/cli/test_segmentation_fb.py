"""Fb in the partition family: the stored CVPR-2013 SEISM Fb of BSDS500 human pairs (``tests/data/seism_bsds``)
through ``evalengine segmentation``, the store path equal to the one-shot path for any scheduler and shard count,
and generated datasets (edge cases included) against the boundary kernel called directly, with SEISM's pooling,
ODS, OIS and AP, in Python and SQL."""

import json
from pathlib import Path

import numpy as np
import pytest

from evalengine.api.segmentation import evaluate_partitions, ingest_partition_arrays, segmentation
from evalengine.cli import main
from evalengine.errors import ProtocolError
from evalengine.geometry.boundary_pr import boundary_counts, boundary_precision_recall
from evalengine.match.partition_boundaries import PartitionBoundaryProtocol
from evalengine.metrics.partition.dataset import AP_RECALLS

DATA = Path(__file__).resolve().parent.parent / "data" / "seism_bsds"
N_DATASETS = 12


@pytest.fixture(scope="module")
def mini_pairs():
    """Six stored pairs (four same-image, two different-image): stem → (partition, ground truths, stored fb)."""
    gt = np.load(DATA / "bsds500_test_gt_mini.npz")
    pairs = json.loads((DATA / "expected_fb_mini_pairs.json").read_text())["pairs"]
    chosen = [p for p in pairs if p["set"] == "same"][:4] + [p for p in pairs if p["set"] == "diff"][:2]
    cases = {}
    for pair in chosen:
        truths = gt[str(pair["gt_image_id"])][np.array(pair["gt_indices"]) - 1]
        if pair["gt_rotated90"]:  # MATLAB imrotate(gt, 90)
            truths = np.rot90(truths, 1, axes=(1, 2))
        cases[f"{pair['set']}_{pair['row']}"] = (gt[str(pair["image_id"])][pair["partition_gt_index"] - 1],
                                                 np.ascontiguousarray(truths), pair["fb"])
    return cases


def _folders(tmp_path, cases):
    pred, gt = tmp_path / "pred", tmp_path / "gt"
    pred.mkdir(), gt.mkdir()
    for stem, (partition, truths, _) in cases.items():
        np.save(pred / f"{stem}.npy", partition)
        np.save(gt / f"{stem}.npy", truths)
    return pred, gt


def test_stored_seism_fb_through_the_cli(mini_pairs, tmp_path, capsys):
    pred, gt = _folders(tmp_path, mini_pairs)
    assert main(["segmentation", "--pred", str(pred), "--gt", str(gt), "--measures", "fb", "pri",
                 "--fb-grid", "contour", "--json"]) == 0
    payload = json.loads(capsys.readouterr().out)
    counts = {stem: boundary_counts(p, list(t), grid="contour") for stem, (p, t, _) in mini_pairs.items()}
    for stem, (_, _, stored) in mini_pairs.items():
        got = payload["per_image"][stem]["fb"]
        assert len(got) == 3  # [F, P, R]
        kernel = np.array(boundary_precision_recall(counts[stem])).ravel()
        assert np.abs(np.array(got) - kernel).max() <= 1e-12, stem
        # the reference's outlier graph is random (README: within 1e-3 of the stored 6-decimal values)
        assert np.abs(np.array(got) - stored).max() < 1e-3, stem
    pooled = np.array(boundary_precision_recall(np.sum(list(counts.values()), axis=0))).ravel()
    assert np.abs(np.array(payload["dataset"]["fb"]) - pooled).max() <= 1e-12
    assert list(payload["dataset"]) == ["pri", "fb"]
    # the store path: ingest, then evaluate with the same kernel options, 2 shards
    store = tmp_path / "store"
    assert main(["ingest", "partitions", "--gt", str(gt), "--pred", f"human={pred}", "--store", str(store),
                 "--shards", "2"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(store), "--protocol", "partitions", "--run", "human", "--measures", "fb",
                 "--fb-grid", "contour", "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)["summary"]
    assert row["measure"] == "fb" and row["ap"] == 0.0  # one parameter: one recall
    assert [row["ods"], row["ods_precision"], row["ods_recall"]] == payload["dataset"]["fb"]
    assert [row["ois"], row["ois_precision"], row["ois_recall"]] == payload["dataset"]["fb"]
    keys = sorted(p.name for p in (store / "matches").iterdir())
    assert keys[0].startswith("protocol=partition_boundaries-") and keys[1] == "protocol=partitions"
    recorded = json.loads(next((store / "matches").glob("protocol=partition_boundaries-*/run=human/protocol.json"))
                          .read_text())
    assert recorded["match"]["grid"] == "contour" and recorded["match"]["outliers"] == "bsds"


def _label_map(rng, h, w):
    kind = rng.integers(0, 5)
    if kind == 0:
        return np.zeros((h, w), np.int64)  # one region: no boundary
    if kind == 1:
        return np.arange(h * w).reshape(h, w)  # all singletons
    k = int(rng.integers(2, 6))
    ys, xs = rng.integers(0, h, k), rng.integers(0, w, k)
    yy, xx = np.mgrid[:h, :w]
    return np.argmin((yy[..., None] - ys) ** 2 + (xx[..., None] - xs) ** 2, axis=-1)  # Voronoi cells


def _dataset(rng):
    images = []
    for index in range(int(rng.integers(1, 6))):
        h, w = int(rng.integers(1, 30)), int(rng.integers(1, 30))
        gts = np.stack([_label_map(rng, h, w) for _ in range(int(rng.integers(1, 4)))])
        sweep = {0.25: _label_map(rng, h, w), 0.5: gts[0].copy(), 0.75: _label_map(rng, h, w)}
        images.append((f"im{index}", gts, {"seg": sweep}))
    return images


def _expected(images, outliers):
    rows = []
    for image_id, (stem, gts, runs) in enumerate(images, 1):
        for parameter, partition in runs["seg"].items():
            counts = boundary_counts(partition, list(gts), outliers=outliers)
            rows.append({"image_id": image_id, "parameter": parameter, "counts": counts,
                         "fb": np.array(boundary_precision_recall(counts)).ravel()})
    return rows


@pytest.mark.parametrize("seed", range(N_DATASETS))
def test_fb_equals_the_kernel_on_generated_datasets(tmp_path, seed):
    rng = np.random.default_rng(seed)
    images = _dataset(rng)
    outliers = ("bsds", "complete")[seed % 2]
    store = ingest_partition_arrays(images, tmp_path / "store", {"seg": [0.25, 0.5, 0.75]},
                                    n_shards=int(seed % 3) + 1)
    evaluation = evaluate_partitions(store, "seg", ["fb"], fb_outliers=outliers,
                                     scheduler="sync" if seed % 2 else "threads")
    expected = _expected(images, outliers)
    per_image = {(r["image_id"], r["parameter"]): r for r in evaluation.per_image.iter_rows(named=True)}
    assert len(per_image) == len(expected)
    for want in expected:
        got = per_image[want["image_id"], want["parameter"]]
        assert [got["fb"], got["fb_precision"], got["fb_recall"]] == pytest.approx(want["fb"], abs=1e-12, rel=0)
    # dataset level: counts summed over images per parameter (not the mean of F)
    pooled = {}
    for want in expected:
        pooled[want["parameter"]] = pooled.get(want["parameter"], 0) + want["counts"]
    points = {p: np.array(boundary_precision_recall(c)).ravel() for p, c in sorted(pooled.items())}
    dataset = evaluation.dataset
    for row in dataset.iter_rows(named=True):
        assert [row["fb"], row["fb_precision"], row["fb_recall"]] == pytest.approx(points[row["parameter"]],
                                                                                   abs=1e-12, rel=0)
    summary = evaluation.summary().row(0, named=True)
    best = max(points, key=lambda p: (points[p][0], -p))  # the first parameter of the largest value
    assert summary["ods_parameter"] == best and summary["ods"] == pytest.approx(points[best][0], abs=1e-12, rel=0)
    # OIS: each image at its best parameter (first on ties), counts pooled there
    at_best = {}
    for want in expected:
        held = at_best.get(want["image_id"])
        if held is None or want["fb"][0] > held["fb"][0]:
            at_best[want["image_id"]] = want
    ois = np.array(boundary_precision_recall(sum(w["counts"] for w in at_best.values()))).ravel()
    assert [summary["ois"], summary["ois_precision"], summary["ois_recall"]] == pytest.approx(ois, abs=1e-12, rel=0)
    recalls = np.array([points[p][2] for p in points])
    distinct, first = np.unique(recalls, return_index=True)
    precisions = np.array([points[p][1] for p in points])[first]
    inside = (AP_RECALLS >= distinct[0]) & (AP_RECALLS <= distinct[-1])
    ap = np.interp(AP_RECALLS[inside], distinct, precisions).sum() / 100 if distinct.size > 1 else 0.0
    assert summary["ap"] == pytest.approx(ap, abs=1e-12, rel=0)
    # SQL: the per-image view and the pooled dataset view
    sql = store.sql("SELECT image_id, parameter, fb, fb_precision, fb_recall FROM partition_measures")
    for row in sql.iter_rows(named=True):
        want = per_image[row["image_id"], row["parameter"]]
        for column in ("fb", "fb_precision", "fb_recall"):
            assert row[column] == pytest.approx(want[column], abs=1e-12, rel=0), column
    sql = store.sql("SELECT parameter, fb, fb_precision, fb_recall FROM dataset_measures ORDER BY parameter")
    assert sql.height == 3
    for row in sql.iter_rows(named=True):
        assert [row["fb"], row["fb_precision"], row["fb_recall"]] == pytest.approx(points[row["parameter"]],
                                                                                   abs=1e-12, rel=0)


def test_store_path_equals_one_shot_for_any_scheduler_and_shards(tmp_path):
    rng = np.random.default_rng(99)
    images = [(stem, gts, {"segmentation": {0.0: runs["seg"][0.25]}}) for stem, gts, runs in _dataset(rng)]
    pred, gt = tmp_path / "pred", tmp_path / "gt"
    pred.mkdir(), gt.mkdir()
    for stem, gts, runs in images:
        np.save(pred / f"{stem}.npy", runs["segmentation"][0.0])
        np.save(gt / f"{stem}.npy", gts)
    frames = [segmentation(pred, gt, ["fb"], n_shards=n, scheduler=s).per_image
              for n, s in ((1, "sync"), (3, "threads"), (2, "processes"))]
    stored = ingest_partition_arrays(images, tmp_path / "store", {"segmentation": [0.0]}, n_shards=2)
    frames.append(evaluate_partitions(stored, "segmentation", ["fb"]).per_image)
    for frame in frames[1:]:
        assert frame.equals(frames[0])
    assert frames[0].height == len(images)


def test_fb_options_are_checked(tmp_path):
    with pytest.raises(ProtocolError, match="fb grid must be one of"):
        PartitionBoundaryProtocol(grid="edges")
    with pytest.raises(ProtocolError, match="fb outliers must be one of"):
        segmentation(tmp_path, tmp_path, ["fb"], fb_outliers="none")
    assert main(["segmentation", "--pred", str(tmp_path), "--gt", str(tmp_path), "--fb-grid", "edges"]) == 2
    assert PartitionBoundaryProtocol().match_key() == "partition_boundaries"
    assert PartitionBoundaryProtocol(grid="contour").match_key() != PartitionBoundaryProtocol().match_key()
