"""The LVIS protocol against lvis-api 0.5.3 (:mod:`tests.lvis_reference`): every ``get_results`` value, the AP of every
category and the printed lines, on random federated datasets (negative and not-exhaustive categories, detections on
categories an image says nothing of, more than 300 detections on an image with tied scores at the cut, zero-area ground
truths and detections, crowd and ignore flags, ground-truth id 0, rare categories with one image), boxes and masks,
and on random results over the ``lvis_val_100`` ground truth (lvis-api's stored results)."""

import json

import numpy as np
import pytest

from evalengine.api import LvisProtocol, evaluate_lvis, evaluate_store_lvis, ingest_gt, open as open_store
from evalengine.evaluation.lvis import print_results
from tests.conftest import DATA
from tests.helpers import write_inputs
from tests.lvis_reference import (lvis_api, per_class, printed, random_lvis, random_lvis_masks, val100_results,
                                  with_box_polygons)

SEEDS_PER_BATCH = 10
VAL100 = DATA / "lvis_val_100.json"


def check(evaluation, ref, seed) -> None:
    """Ours equal to lvis-api: every result (same keys, same order), every category's AP, the printed lines."""
    got = evaluation.results()
    assert list(got) == list(ref.results), seed
    np.testing.assert_allclose([got[k] for k in got], [float(v) for v in ref.results.values()], rtol=0, atol=1e-12,
                               err_msg=f"seed {seed}")
    ours = dict(zip(*evaluation.per_class().select("category_id", "ap").to_dict(as_series=False).values()))
    expected = per_class(ref)
    assert ours.keys() == expected.keys(), seed
    np.testing.assert_allclose([ours[k] for k in expected], list(expected.values()), rtol=0, atol=1e-12,
                               err_msg=f"seed {seed}")
    assert print_results(evaluation) == printed(ref), seed


# (iou type, generator, batch of SEEDS_PER_BATCH seeds): 200 box sets, 40 mask sets
CASES = [("bbox", random_lvis, b) for b in range(20)] + [("segm", random_lvis_masks, b) for b in range(4)]


@pytest.mark.parametrize("iou_type, generate, batch", CASES, ids=[f"{t}-{b}" for t, _, b in CASES])
def test_random_federated_sets_equal_lvis_api(tmp_path, iou_type, generate, batch):
    for seed in range(batch * SEEDS_PER_BATCH, (batch + 1) * SEEDS_PER_BATCH):
        gt, dt = generate(seed)
        files = write_inputs(tmp_path, gt, dt, names=(f"gt{seed}.json", f"dt{seed}.json"))
        # a store in memory (the one-shot's default) and, one set in four, through a temporary folder
        evaluation = evaluate_lvis(*files, LvisProtocol(iou_type=iou_type), n_shards=1 + seed % 3,
                                   in_memory=seed % 4 != 0)
        assert evaluation.layout.persistent == (seed % 4 == 0)
        check(evaluation, lvis_api(gt, dt, iou_type), seed)


@pytest.fixture(scope="module")
def val100_store(tmp_path_factory):
    """``lvis_val_100`` in a store (4 shards), to which each case adds its results as a run."""
    return ingest_gt(VAL100, tmp_path_factory.mktemp("val100") / "store", n_shards=4)


EXPECTED = json.loads((DATA / "lvis_val_100_expected.json").read_text())


@pytest.mark.parametrize("case", sorted(EXPECTED, key=lambda c: (c.split(":")[0], int(c.split(":")[1]))))
def test_val100_random_results_equal_lvis_api(tmp_path, val100_store, case):
    """lvis-api's results stored for seeded random results on lvis_val_100 (``write_val100_expected``; under segm
    the boxes' polygons, as lvis-api makes them)."""
    iou_type, seed = case.split(":")
    gt = json.loads(VAL100.read_text())
    path = tmp_path / "dt.json"
    results = val100_results(gt, int(seed))
    path.write_text(json.dumps(with_box_polygons(results) if iou_type == "segm" else results))
    run = f"{iou_type}{seed}"
    store = open_store(val100_store.path).add_run(path, run)
    evaluation = evaluate_store_lvis(store, LvisProtocol(iou_type=iou_type), run=run)
    expected = EXPECTED[case]
    got = evaluation.results()
    assert list(got) == list(expected["results"])
    np.testing.assert_allclose(list(got.values()), list(expected["results"].values()), rtol=0, atol=1e-12)
    table = evaluation.per_class()
    defined = table.filter(table["ap"] != -1)
    assert sorted(map(str, defined["category_id"])) == sorted(expected["per_class"])
    np.testing.assert_allclose(defined["ap"].to_numpy(),
                               [expected["per_class"][str(c)] for c in defined["category_id"]], rtol=0, atol=1e-12)
    assert table.height == 1230


def test_val100_live_against_lvis_api(tmp_path):
    """One case of lvis_val_100 run live through lvis-api (the stored cases' generator and reference agree)."""
    gt = json.loads(VAL100.read_text())
    dt = val100_results(gt, 1000)
    path = tmp_path / "dt.json"
    path.write_text(json.dumps(dt))
    check(evaluate_lvis(VAL100, path, n_shards=3), lvis_api(gt, dt), 1000)


@pytest.mark.parametrize("case", ["bbox:0", "bbox:7", "bbox:23", "bbox:41", "segm:2", "segm:5"])
def test_val100_through_ingest_lvis_and_evaluate(tmp_path, capsys, case):
    """Stored cases of lvis_val_100 through the commands: ``ingest lvis`` (GT and results into a store of 1–3 shards)
    then ``evaluate STORE --protocol lvis --json`` equal to lvis-api's stored results."""
    from evalengine.cli import main
    iou_type, seed = case.split(":")
    gt = json.loads(VAL100.read_text())
    results = val100_results(gt, int(seed))
    path = tmp_path / "dt.json"
    path.write_text(json.dumps(with_box_polygons(results) if iou_type == "segm" else results))
    store = tmp_path / "store"
    assert main(["ingest", "lvis", "--gt", str(VAL100), "--dt", str(path), "--store", str(store), "--shards",
                 str(1 + int(seed) % 3), "--quiet"]) == 0
    capsys.readouterr()
    assert main(["evaluate", str(store), "--protocol", "lvis", "--iou-type", iou_type, "--json", "--quiet"]) == 0
    payload = json.loads(capsys.readouterr().out)
    expected = EXPECTED[case]
    assert list(payload["stats"]) == list(expected["results"])
    np.testing.assert_allclose(list(payload["stats"].values()), list(expected["results"].values()), rtol=0, atol=1e-12)
    defined = {c: ap for c, ap in payload["per_class"].items() if ap != -1}
    assert sorted(defined) == sorted(expected["per_class"])
    np.testing.assert_allclose([defined[c] for c in expected["per_class"]], list(expected["per_class"].values()),
                               rtol=0, atol=1e-12)
