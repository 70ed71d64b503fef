"""``evalengine density`` and ``plot STORE density``: the pooled table, the JSON object, the figure, one-line errors."""

import json

import numpy as np
import pytest

from evalengine.api import box_density, ingest_coco
from tests.conftest import PACKAGE_DATA
from tests.helpers import run_cli as _run

GT = PACKAGE_DATA / "instances_val2014_100.json"
DT = PACKAGE_DATA / "instances_val2014_fakebbox100_results.json"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    return ingest_coco(GT, DT, tmp_path_factory.mktemp("density") / "store")


def test_text_and_json(capsys, store):
    status, out, err = _run(capsys, "density", store.path)
    lines = out.splitlines()
    assert (status, err) == (0, "") and len(lines) == 13
    assert lines[0] == (f"box density (occupancy, 100×100 grid of normalised image coordinates): run 'default' of "
                        f"{store.path}, 734 detections; 830 ground-truth boxes (crowd left out)")
    assert lines[2].split() == ["y", "\\", "x", *[f"{k / 10:.2f}" for k in range(10)]]
    ratios = box_density(store).block_ratios()
    assert [float(v) for v in lines[3].split()[1:]] == pytest.approx(ratios[0], abs=0.005)
    status, out, err = _run(capsys, "density", store.path, "--kind", "center", "--grid", "8", "--score-threshold",
                            "0.5", "--json")
    got = json.loads(out)
    assert (status, err) == (0, "")
    assert list(got) == ["run", "kind", "grid", "score_threshold", "n_predicted", "n_ground_truth", "predicted",
                         "ground_truth", "difference"]
    assert (got["run"], got["kind"], got["grid"], got["score_threshold"]) == ("default", "center", 8, 0.5)
    dt = json.loads(DT.read_text())
    assert got["n_predicted"] == sum(d["score"] >= 0.5 for d in dt)
    for key in ("predicted", "ground_truth", "difference"):
        assert np.array(got[key]).shape == (8, 8)
    assert sum(map(sum, got["ground_truth"])) == got["n_ground_truth"] == 830  # every centre is inside its image
    assert np.allclose(got["difference"], np.array(got["predicted"]) / got["n_predicted"]
                       - np.array(got["ground_truth"]) / got["n_ground_truth"], rtol=0, atol=1e-15)


def test_plot_and_errors(capsys, store, tmp_path):
    status, out, err = _run(capsys, "plot", store.path, "density", "--out", tmp_path / "d.png", "--density-kind",
                            "center", "--grid", "20")
    assert (status, out, err) == (0, f"figure written to {tmp_path / 'd.png'}\n", "")
    assert (tmp_path / "d.png").stat().st_size > 10_000
    status, out, err = _run(capsys, "density", store.path, "--run", "nope")
    assert (status, out) == (2, "") and err == f"evalengine: error: {store.path}: no run 'nope' (runs: default)\n"
    status, out, err = _run(capsys, "density", store.path, "--grid", "5000")
    assert (status, out) == (2, "") and err == ("evalengine: error: box density grid must be a number of cells per "
                                                "side from 1 to 4096, got 5000\n")
