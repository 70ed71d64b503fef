"""Fop (spec §4.4.3) at any area percentile and thresholds, through the Python path and the SQL views, against the
SEISM transcription (``seism_reference.fop``), on generated datasets rich in equal-area regions at the 99 % cut
(where the candidates' tie order and the running double sum decide)."""

import numpy as np
import pytest

from evalengine.api.segmentation import evaluate_partitions, ingest_partition_arrays
from evalengine.errors import ProtocolError
from evalengine.match.partitions import PartitionProtocol
from evalengine.metrics.partition.objects import ObjectsAndParts
from tests.metrics import seism_reference
from tests.metrics.test_partition_differential import _blocky, _dataset, _merge

N_DATASETS = 8
PERCENTILES = (0.99, 0.9, 0.5, 1.0, 0.97)


def _striped(rng, h, w):
    """Equal-area stripes (one split in small pieces): many ties of area around the percentile's cut."""
    n_stripes = int(rng.integers(2, 12))
    label_map = np.arange(w)[None, :].repeat(h, 0) * n_stripes // w
    small = rng.random((h, w)) < 0.03
    label_map[small] = n_stripes + np.arange(small.sum())
    return label_map


def _tied_dataset(rng):
    images = _dataset(rng)
    for index in range(2):
        h, w = int(rng.integers(8, 40)), int(rng.integers(8, 40))
        base = _striped(rng, h, w)
        gts = np.stack([base, _merge(rng, base), _striped(rng, h, w), _blocky(rng, h, w, 5)])
        images.append((f"t{index}", gts[: int(rng.integers(1, 5))],
                       {"seg": {0.25: _striped(rng, h, w), 0.75: np.fliplr(base)}}))
    return images


@pytest.mark.parametrize("seed", range(N_DATASETS))
def test_fop_equals_seism_in_python_and_sql(tmp_path, seed):
    rng = np.random.default_rng(300 + seed)
    images = _tied_dataset(rng)
    store = ingest_partition_arrays(images, tmp_path / "store", {"seg": [0.25, 0.75]}, n_shards=int(seed % 2) + 1)
    percentile = PERCENTILES[seed % len(PERCENTILES)]
    gammas = {} if seed % 3 else {"gamma_object": 0.8, "gamma_part": 0.3, "beta": 0.2}
    objects = ObjectsAndParts(area_percentile=percentile, **gammas)
    evaluation = evaluate_partitions(store, "seg", ["fop"], objects)
    rows = {(r["file_name"], r["parameter"]): r for r in evaluation.per_image.iter_rows(named=True)}
    key = PartitionProtocol(percentile).match_key()
    sql = {(r["file_name"], r["parameter"]): r for r in store.sql(
        f"SELECT * FROM partition_measures WHERE protocol = '{key}'").iter_rows(named=True)}
    assert len(rows) == len(sql) == 2 * len(images)
    for stem, gts, runs in images:
        for parameter, partition in runs["seg"].items():
            matrices = [seism_reference.intersection_matrix(partition, gt) for gt in gts]
            want = seism_reference.fop(matrices, percentile=percentile, **gammas)
            got = [rows[stem, parameter][c] for c in ("fop", "fop_precision", "fop_recall")]
            assert got == pytest.approx(want, abs=1e-12, rel=0), (seed, stem, parameter)
            if not gammas:  # the views use SEISM's thresholds; their candidates follow the protocol key
                got = [sql[stem, parameter][c] for c in ("fop", "fop_precision", "fop_recall")]
                assert got == pytest.approx(want, abs=1e-12, rel=0), (seed, stem, parameter)
    if not gammas:  # the dataset level: F of the mean P and R, per parameter
        dataset = store.sql(f"SELECT parameter, fop, fop_precision, fop_recall FROM dataset_measures "
                            f"WHERE protocol = '{key}' ORDER BY parameter")
        want = evaluation.dataset.select("parameter", "fop", "fop_precision", "fop_recall")
        assert np.abs(dataset.to_numpy() - want.to_numpy()).max() <= 1e-12
        curve = store.sql(f"SELECT parameter, precision, recall, f FROM pr_curve_segmentation "
                          f"WHERE protocol = '{key}' AND measure = 'fop' ORDER BY parameter")
        assert np.abs(curve.to_numpy() - want.to_numpy()[:, [0, 2, 3, 1]]).max() <= 1e-12


def test_candidate_flags_follow_the_area_percentile(tmp_path):
    # four regions of 40, 30, 20, 10 pixels: the fractions summed before them are 0, 0.4, 0.7 and, as SEISM's running
    # sum of doubles gives it, 0.8999999999999999: below 0.9 (the exact 90 % would not be)
    label_map = np.repeat(np.array([0, 1, 2, 3]), [40, 30, 20, 10]).reshape(10, 10)
    store = ingest_partition_arrays([("x", label_map[None], {"seg": {0.0: label_map}})], tmp_path / "store",
                                    {"seg": [0.0]})
    for percentile, candidates in ((0.99, 4), (0.9, 4), (0.89, 3), (0.7, 2), (0.4, 1)):
        evaluation = evaluate_partitions(store, "seg", ["fop"], ObjectsAndParts(area_percentile=percentile))
        flags = evaluation.contingency().collect().sort("seg_region")
        assert flags["seg_candidate"].sum() == flags["gt_candidate"].sum() == candidates
        assert flags["seg_candidate"].to_list() == [r < candidates for r in range(4)]
        assert evaluation.per_image["fop"].to_list() == [1.0]  # identical partitions: every candidate an object
    with pytest.raises(ProtocolError, match="area_percentile"):
        PartitionProtocol(0.0)
