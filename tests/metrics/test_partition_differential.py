"""Differential tests of the partition measures against the SEISM transcription (``seism_reference``) on generated
datasets with edge cases, and the property tests of spec §8.3."""

import numpy as np
import pytest

from evalengine.api.segmentation import evaluate_partitions, ingest_partition_arrays
from evalengine.metrics.partition.combine import CONTINGENCY_MEASURES, PR_MEASURES
from tests.metrics import seism_reference

N_DATASETS = 12


def _blocky(rng, h, w, n_labels):
    """Random labels on a coarse grid, upsampled: regions of several pixels, some split in two blobs."""
    gh, gw = rng.integers(1, max(2, h // 2) + 1), rng.integers(1, max(2, w // 2) + 1)
    coarse = rng.integers(0, n_labels, (gh, gw))
    return coarse[np.arange(h) * gh // h][:, np.arange(w) * gw // w]


def _partition(rng, h, w):
    kind = rng.integers(0, 7)
    if kind == 0:
        return np.full((h, w), int(rng.integers(-5, 5)))  # one region
    if kind == 1:
        return np.arange(h * w).reshape(h, w) * 3  # all singletons
    if kind == 2:
        return _blocky(rng, h, w, 4) * (1 << 30) - 7  # values spanning more than the dense range
    if kind == 3:
        return _blocky(rng, h, w, 40).astype(np.uint16)
    return _blocky(rng, h, w, int(rng.integers(2, 9)))


def _merge(rng, label_map):
    """A coarsening of ``label_map`` (objects and parts for Fop)."""
    values = np.unique(label_map)
    merged = rng.integers(0, max(1, values.size // 2), values.size)
    return merged[np.searchsorted(values, label_map)]


def _dataset(rng):
    images = []
    for index in range(int(rng.integers(1, 6))):
        h, w = int(rng.integers(1, 25)), int(rng.integers(1, 25))
        base = _partition(rng, h, w)
        gts = [base if rng.random() < 0.3 else (_merge(rng, base) if rng.random() < 0.5 else _partition(rng, h, w))
               for _ in range(int(rng.integers(1, 5)))]
        sweep = {0.25: _merge(rng, base) if rng.random() < 0.5 else _partition(rng, h, w), 0.75: base}
        images.append((f"im{index}", np.stack(gts), {"seg": sweep}))
    return images


def _row_measures(row):
    return {m: [row[m], row[f"{m}_precision"], row[f"{m}_recall"]] if m in PR_MEASURES else [row[m]]
            for m in CONTINGENCY_MEASURES}


def _assert_equal(got: dict, want: dict, where):
    for measure in CONTINGENCY_MEASURES:
        g, w = np.array(got[measure], float), np.array(want[measure], float, ndmin=1)
        assert np.array_equal(np.isnan(g), np.isnan(w)), (where, measure, g, w)
        assert np.all(np.abs(g[~np.isnan(g)] - w[~np.isnan(w)]) <= 1e-12), (where, measure, g, w)


@pytest.mark.parametrize("seed", range(N_DATASETS))
def test_measures_equal_seism_on_generated_datasets(tmp_path, seed):
    rng = np.random.default_rng(seed)
    images = _dataset(rng)
    store = ingest_partition_arrays(images, tmp_path / "store", {"seg": [0.25, 0.75]}, n_shards=int(seed % 3) + 1)
    per_image = evaluate_partitions(store, "seg", scheduler="sync" if seed % 2 else "threads").per_image
    assert per_image.height == 2 * len(images)
    by_key = {(row["file_name"], row["parameter"]): row for row in per_image.iter_rows(named=True)}
    for stem, gts, runs in images:
        for parameter, partition in runs["seg"].items():
            _assert_equal(_row_measures(by_key[stem, parameter]), seism_reference.eval_segm(partition, gts),
                          (seed, stem, parameter))
    # the SQL views give the same numbers (bgm from the match table's pairs side, fop from its candidate flags, fb
    # from its boundary table)
    sql = store.sql("SELECT * FROM partition_measures")
    columns = [c for c in sql.columns if c in per_image.columns and c not in ("image_id", "file_name", "parameter")]
    assert "bgm" in columns and "fop_recall" in columns and len(columns) == 25  # 12 numbers, fr, fop and fb with
    # P and R, fb's four counts
    for row in sql.iter_rows(named=True):
        ours = by_key[row["file_name"], row["parameter"]]
        for column in columns:
            got, want = float(row[column]), float(ours[column])
            assert (np.isnan(got) and np.isnan(want)) or abs(got - want) <= 1e-12, (seed, column, got, want)


@pytest.mark.parametrize("seed", range(4))
def test_void_pixels_are_left_out_of_every_count(tmp_path, seed):
    rng = np.random.default_rng(100 + seed)
    h, w = 12, 17
    partition = _blocky(rng, h, w, 6)
    gts = np.stack([_blocky(rng, h, w, 5) for _ in range(3)])
    void = rng.random((h, w)) < 0.3
    void[0, 0] = False
    gts[:, void] = 255
    store = ingest_partition_arrays([("v", gts, {"seg": {0.0: partition}})], tmp_path / "store", {"seg": [0.0]},
                                    void_label=255)
    row = evaluate_partitions(store, "seg").per_image.row(0, named=True)
    _assert_equal(_row_measures(row), seism_reference.eval_segm(partition, list(gts), valid=~void), seed)


def _evaluate_pairs(tmp_path, pairs):
    store = ingest_partition_arrays([(f"p{i}", gt[None], {"seg": {0.0: seg}}) for i, (seg, gt) in enumerate(pairs)],
                                    tmp_path / "store", {"seg": [0.0]})
    return [_row_measures(row) for row in evaluate_partitions(store, "seg").per_image.iter_rows(named=True)]


def test_properties_of_spec_8_3(tmp_path):
    rng = np.random.default_rng(7)
    maps = [_blocky(rng, 15, 20, k) for k in (2, 5, 9)] + [np.arange(20).reshape(4, 5)]
    pairs = [(m, m) for m in maps] + [(a, b) for a in maps[:3] for b in maps[:3] if a is not b]
    pairs += [(np.zeros((15, 20), int), maps[1]), (np.arange(300).reshape(15, 20), maps[1])]
    results = _evaluate_pairs(tmp_path, pairs)
    for identical in results[:4]:  # identical partitions: every similarity is 1, VoI 0
        for measure in CONTINGENCY_MEASURES:
            want = [0.0] if measure == "voi" else ([1.0, 1.0, 1.0] if measure in PR_MEASURES else [1.0])
            if measure == "fr" and identical is results[3]:
                want = [0.0, float("nan"), float("nan")]  # all singletons: 0/0 precision and recall (SEISM)
            got = np.array(identical[measure])
            assert np.allclose(got, want, rtol=0, atol=1e-12, equal_nan=True), (measure, got)
    swapped = results[4:10]
    for (a, b), ab in zip(pairs[4:10], swapped):
        ba = swapped[next(i for i, (x, y) in enumerate(pairs[4:10]) if x is b and y is a)]
        for measure in ("voi", "pri", "vd", "bgm", "nvoi", "bce"):  # symmetric measures
            assert ab[measure] == pytest.approx(ba[measure], abs=1e-12)
        for one, other in (("sc", "ssc"), ("dhd", "sdhd")):  # asymmetric ones swap
            assert ab[one] == pytest.approx(ba[other], abs=1e-12)
        assert ab["fr"][1:] == pytest.approx(ba["fr"][:0:-1], abs=1e-12)  # Pr <-> Rr
        assert ab["bgm"][0] <= min(ab["dhd"][0], ab["sdhd"][0]) + 1e-12
        assert 0 <= ab["nvoi"][0] <= 1 and 0 <= ab["fop"][1] <= 1 and 0 <= ab["fop"][2] <= 1
    single, singletons = results[10], results[11]
    n = 300
    b2 = float((np.unique(maps[1], return_counts=True)[1].astype(np.int64) ** 2).sum())
    assert single["dhd"] == [1.0] and single["fr"][2] == 1.0
    assert single["fr"][1] == pytest.approx((b2 - n) / (n * n - n), abs=1e-12)
    assert singletons["sdhd"] == [1.0]
