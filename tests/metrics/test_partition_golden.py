"""Golden tests of the partition measures against SEISM's own results (tests/data/seism/, see its README):
the demo (``eval_segm`` multi-GT and pairwise), and all 2,126 BSDS500 human-vs-human pairs of the CVPR-era
``eval_human_disc.m`` with their per-image and dataset summaries."""

import json
from pathlib import Path

import numpy as np
import polars as pl
import pytest

from evalengine.api.segmentation import evaluate_partitions, ingest_partition_arrays
from evalengine.metrics.partition.combine import CONTINGENCY_MEASURES, PR_MEASURES
from evalengine.metrics.partition.dataset import dataset_measures

DATA = Path(__file__).resolve().parent.parent / "data" / "seism"


def _measure(row: dict, measure: str) -> list:
    return [row[measure], row[f"{measure}_precision"], row[f"{measure}_recall"]] if measure in PR_MEASURES \
        else [row[measure]]


def _evaluate(tmp_path, images, n_shards=1) -> pl.DataFrame:
    store = ingest_partition_arrays(images, tmp_path / "store", {"human": [0.0]}, n_shards=n_shards)
    return evaluate_partitions(store, "human", CONTINGENCY_MEASURES).per_image


def test_seism_demo_multi_gt_and_pairwise(tmp_path):
    arrays = np.load(DATA / "demo_partitions.npz")
    expected = json.loads((DATA / "expected_seism_measures.json").read_text())
    partition, gt1, gt2 = arrays["partition"], arrays["gt1"], arrays["gt2"]
    cases = {"demo": (partition, [gt1, gt2]), "partition_vs_gt1": (partition, [gt1]),
             "partition_vs_gt2": (partition, [gt2]), "gt1_vs_gt2": (gt1, [gt2])}
    per_image = _evaluate(tmp_path, [(stem, np.stack(gts), {"human": {0.0: seg}})
                                     for stem, (seg, gts) in cases.items()])
    rows = {row["file_name"]: row for row in per_image.iter_rows(named=True)}
    assert set(expected["demo_multi_gt"]) == set(CONTINGENCY_MEASURES)
    for measure, values in expected["demo_multi_gt"].items():
        assert _measure(rows["demo"], measure) == pytest.approx(values, abs=1e-12, rel=0), measure
    for measure, by_pair in expected["pairwise_single_gt"].items():
        for case, values in by_pair.items():
            assert _measure(rows[case], measure) == pytest.approx(values, abs=1e-12, rel=0), (measure, case)


def test_seism_perfect_partition_gives_one(tmp_path):
    expected = json.loads((DATA / "expected_seism_measures.json").read_text())["perfect_2x2_all_ones"]
    two_by_two = np.ones((2, 2), np.uint32)  # SEISM's eval_segm(ones(2), {ones(2)}, m)
    row = _evaluate(tmp_path, [("perfect", two_by_two[None], {"human": {0.0: two_by_two}})]).row(0, named=True)
    for measure, values in expected.items():
        assert _measure(row, measure) == values, measure


@pytest.fixture(scope="module")
def human_pairs(tmp_path_factory):
    """SEISM's 2,126 human-vs-human pairs (one GT as the partition against a set of GTs) evaluated in one store."""
    ground_truth = np.load(DATA / "bsds500_test_gt.npz")
    pairs = json.loads((DATA / "expected_seism_human_test_pairs.json").read_text())["pairs"]

    def images():
        for pair in pairs:
            partition = ground_truth[str(pair["image_id"])][pair["partition_gt_index"] - 1]
            gts = ground_truth[str(pair["gt_image_id"])][np.array(pair["gt_indices"]) - 1]
            if pair["gt_rotated90"]:  # MATLAB imrotate(gt, 90)
                gts = np.rot90(gts, 1, axes=(1, 2))
            yield f"{pair['set']}_{pair['row']}", gts, {"human": {0.0: partition}}

    store = ingest_partition_arrays(images(), tmp_path_factory.mktemp("human") / "store", {"human": [0.0]}, n_shards=3)
    per_image = evaluate_partitions(store, "human", CONTINGENCY_MEASURES).per_image
    return pairs, per_image.with_columns(set=pl.col("file_name").str.split("_").list.first()), store


def test_every_human_pair_equals_seism(human_pairs):
    pairs, per_image, _ = human_pairs
    rows = {row["file_name"]: row for row in per_image.iter_rows(named=True)}
    assert len(rows) == len(pairs) == 2126
    worst = {}
    for pair in pairs:
        row = rows[f"{pair['set']}_{pair['row']}"]
        for measure, value in pair["computed"].items():
            got, want = np.array(_measure(row, measure)), np.array(value, ndmin=1)
            worst[measure] = max(worst.get(measure, 0.0), float(np.abs(got - want).max()))
        for measure, value in pair["documented"].items():
            if measure == "fb":
                continue
            got = np.array(_measure(row, measure))
            # printed with %f: the value rounds to the stored string
            assert np.all(np.abs(got - np.array(value, ndmin=1)) <= 5e-7 + 1e-12), (pair["set"], pair["row"], measure)
    assert set(worst) == set(CONTINGENCY_MEASURES)
    assert max(worst.values()) <= 1e-12, worst


def test_human_summaries_equal_seism(human_pairs):
    pairs, per_image, _ = human_pairs
    summary = json.loads((DATA / "expected_seism_human_test_summary.json").read_text())
    image_of = pl.DataFrame({"file_name": [f"{p['set']}_{p['row']}" for p in pairs],
                             "source_image": [p["image_id"] for p in pairs]})
    per_image = per_image.join(image_of, on="file_name")
    published = {}
    for set_name in ("same", "diff"):
        rows = per_image.filter(pl.col("set") == set_name)
        # eval_human_perf.m: the plain mean of each value (F, P, R separately) over an image's rows
        means = {row["source_image"]: row for row in
                 rows.group_by("source_image").agg(pl.exclude("file_name", "set", "image_id").mean()).iter_rows(
                     named=True)}
        for expected in summary["per_image"][set_name]:
            row = means[expected["image_id"]]
            for measure, value in expected["computed"].items():
                assert _measure(row, measure) == pytest.approx(np.array(value, ndmin=1).tolist(), abs=1e-12, rel=0)
        # gather_human.m: F of the mean P and R over all rows; the mean otherwise
        dataset = dataset_measures(rows.with_columns(parameter=pl.lit(0.0)), CONTINGENCY_MEASURES).row(0, named=True)
        published[set_name] = (round(dataset["fop"], 5), round(dataset["pri"], 5))
        for measure, value in summary["dataset_from_computed_pairs"][set_name].items():
            want = [value["F"], value["mean_P"], value["mean_R"]] if isinstance(value, dict) else [value]
            assert _measure(dataset, measure) == pytest.approx(want, abs=1e-12, rel=0), (set_name, measure)
    assert published == {"same": (0.55688, 0.87623), "diff": (0.05523, 0.64066)}  # the Fop and PRI


def test_human_fop_through_sql(human_pairs):
    """Fop from the SQL views (candidate flags of the match table): every pair's SEISM value, and the summary's
    dataset Fop of each set (gather_human.m: F of the mean P and R over its pairs)."""
    pairs, _, store = human_pairs
    sql = {row["file_name"]: row for row in store.sql(
        "SELECT file_name, fop, fop_precision, fop_recall FROM partition_measures").iter_rows(named=True)}
    assert len(sql) == 2126
    for pair in pairs:
        row = sql[f"{pair['set']}_{pair['row']}"]
        assert _measure(row, "fop") == pytest.approx(pair["computed"]["fop"], abs=1e-12, rel=0), pair["row"]
    summary = json.loads((DATA / "expected_seism_human_test_summary.json").read_text())["dataset_from_computed_pairs"]
    dataset = store.sql("SELECT split_part(file_name, '_', 1) AS set, fb_f(avg(fop_precision), avg(fop_recall)) AS fop,"
                        " avg(fop_precision) AS fop_precision, avg(fop_recall) AS fop_recall "
                        "FROM partition_measures GROUP BY ALL")
    published = {}
    for row in dataset.iter_rows(named=True):
        want = summary[row["set"]]["fop"]
        assert _measure(row, "fop") == pytest.approx([want["F"], want["mean_P"], want["mean_R"]], abs=1e-12, rel=0)
        published[row["set"]] = round(row["fop"], 5)
    assert published == {"same": 0.55688, "diff": 0.05523}
